//! RedisBloom filters in `sift` files: the chunks of their `SCANDUMP` stream, verbatim.
//!
//! A RedisBloom filter cannot become a native `sift` filter (its bits sit where RedisBloom's
//! hashing puts them), so a `sift` file holding one keeps RedisBloom's own serialisation: the
//! header chunk and the data chunks, each with the iterator `SCANDUMP` returned with it. Loading
//! goes through [`BloomChain::from_header`] / [`BloomChain::load_chunk`] (and the cuckoo
//! equivalents), so a file is checked exactly as a `LOADCHUNK` sequence would be, and writing it
//! back out as `SCANDUMP` replies gives RedisBloom's bytes.

use super::{BloomChain, CuckooFilter, LoadLimits, CF_HEADER_LEN, MAX_CHUNK};
use crate::error::{Error, FormatError, Result};
use crate::format::{decode_verified, Encoder, FilterKind, ParamWriter};
use crate::hash::{HashKind, Hasher};
use crate::traits::Persist;

/// The hasher recorded in the header of both kinds (informational: the chain's `options` field
/// says whether a legacy chain uses 32-bit MurmurHash2).
const HASHER: Hasher = Hasher::new(HashKind::Murmur64A, 0);

fn bad(why: &'static str) -> Error {
    FormatError::InvalidParams(why).into()
}

/// Parameter block: chunk count `u64`. Payload: for each chunk, the iterator `SCANDUMP` returned
/// with it (`i64`), its length (`u64`) and its bytes; no padding between chunks.
fn encode(kind: FilterKind, chunks: &[(i64, &[u8])]) -> Vec<u8> {
    let mut p = ParamWriter::new();
    p.u64(chunks.len() as u64);
    let len: u64 = chunks.iter().map(|(_, d)| 16 + d.len() as u64).sum();
    let mut e = Encoder::new(kind, HASHER, p.as_bytes(), len);
    for (it, data) in chunks {
        e.payload().extend_from_slice(&it.to_le_bytes());
        e.payload().extend_from_slice(&(data.len() as u64).to_le_bytes());
        e.payload().extend_from_slice(data);
    }
    e.finish()
}

/// `(iterator, data)` of each chunk, borrowed from the file.
type Chunks<'a> = Vec<(i64, &'a [u8])>;

/// The chunks of a file: the header chunk, then data chunks whose iterators are contiguous
/// (each is the previous one plus its length, starting after the header at 1), as `SCANDUMP`
/// produces them. Returns the chunks and the total data length.
fn decode_chunks(bytes: &[u8], kind: FilterKind) -> Result<(Chunks<'_>, u64)> {
    let raw = decode_verified(bytes, kind)?;
    // RedisBloom hashes with MurmurHash64A and no seed: a file naming another hash was not
    // written by this code and its items would be looked up with the wrong hash.
    if raw.hasher() != Hasher::new(HashKind::Murmur64A, 0) {
        return Err(bad("redisbloom: the header must name hash id 4 (murmur64a) with seed 0"));
    }
    let mut r = raw.param_reader();
    let count = r.u64("chunk count")?;
    r.finish()?;
    let payload = raw.payload();
    if count == 0 || count > payload.len() as u64 / 16 {
        return Err(bad("redisbloom: chunk count does not match the payload"));
    }
    let mut chunks = Vec::with_capacity(count as usize);
    let mut at = 0usize;
    let mut next = 1i64;
    let mut data_len = 0u64;
    for i in 0..count {
        if payload.len() - at < 16 {
            return Err(bad("redisbloom: chunk header past the end of the payload"));
        }
        let it = i64::from_le_bytes(payload[at..at + 8].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(payload[at + 8..at + 16].try_into().expect("8 bytes"));
        at += 16;
        if len > (payload.len() - at) as u64 || len > MAX_CHUNK as u64 {
            return Err(bad("redisbloom: chunk longer than the payload or than 16 MiB"));
        }
        let data = &payload[at..at + len as usize];
        at += len as usize;
        if i == 0 {
            if it != 1 {
                return Err(bad("redisbloom: the header chunk must carry iterator 1"));
            }
        } else {
            if len == 0 || next.checked_add(len as i64) != Some(it) {
                return Err(bad("redisbloom: data chunks are not contiguous"));
            }
            next = it;
            data_len += len;
        }
        chunks.push((it, data));
    }
    if at != payload.len() {
        return Err(bad("redisbloom: bytes after the last chunk"));
    }
    Ok((chunks, data_len))
}

/// Every byte of the filter must come from a chunk: a missing chunk would leave zeroed bits, that
/// is false negatives.
fn check_complete(data_len: u64, filter_bytes: u64) -> Result<()> {
    if data_len != filter_bytes {
        return Err(bad("redisbloom: the chunks do not cover the whole filter"));
    }
    Ok(())
}

impl BloomChain {
    /// The whole `SCANDUMP` stream: `(iterator, data)` for every call before the end marker.
    pub fn scandump_all(&self) -> Vec<(i64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut it = 0;
        while let Some((next, data)) = self.scandump(it) {
            out.push((next, data.into_owned()));
            it = next;
        }
        out
    }
}

impl CuckooFilter {
    /// The whole `SCANDUMP` stream: `(position, data)` for every call before the end marker
    /// (none for an empty filter, as in RedisBloom).
    pub fn scandump_all(&self) -> Vec<(i64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Some((next, data)) = self.scandump(pos) {
            out.push((next, data.into_owned()));
            pos = next;
        }
        out
    }

    /// The header and every sub-filter in `SCANDUMP`'s chunking, also for an empty filter (whose
    /// `SCANDUMP` is empty): what a `sift` file stores, so the shape survives.
    fn chunks_for_file(&self) -> Vec<(i64, &[u8])> {
        let mut out: Vec<(i64, &[u8])> = Vec::new();
        let mut pos = 1i64;
        for f in self.filters() {
            let slots = f.slots();
            if slots.len() <= MAX_CHUNK {
                pos += slots.len() as i64;
                out.push((pos, slots));
            } else {
                for piece in slots.chunks(MAX_CHUNK) {
                    pos += piece.len() as i64;
                    out.push((pos, piece));
                }
            }
        }
        out
    }
}

impl Persist for BloomChain {
    const KIND: FilterKind = FilterKind::RedisBloomChain;

    /// Parameters: chunk count `u64`. Payload: the `SCANDUMP` chunks, each as iterator `i64`,
    /// length `u64`, bytes (the first is the header, `20 + 53·links` bytes with iterator 1; then
    /// the link bitmaps in pieces of at most 16 MiB). Hash id 4 (MurmurHash64A), seed 0.
    fn to_bytes(&self) -> Vec<u8> {
        let dump = self.scandump_all();
        let chunks: Vec<(i64, &[u8])> = dump.iter().map(|(i, d)| (*i, &d[..])).collect();
        encode(Self::KIND, &chunks)
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (chunks, data_len) = decode_chunks(bytes, Self::KIND)?;
        // The bitmaps are all in the file, so a header may not declare more than it carries.
        let limits = LoadLimits { max_bytes: data_len, ..LoadLimits::DEFAULT };
        let mut chain = BloomChain::from_header(chunks[0].1, &limits)
            .map_err(|_| bad("redisbloom-bf: invalid SCANDUMP header chunk"))?;
        for &(it, data) in &chunks[1..] {
            chain.load_chunk(it, data).map_err(|_| bad("redisbloom-bf: a chunk does not fit the chain"))?;
        }
        check_complete(data_len, chain.links().iter().map(|l| l.bytes()).sum())?;
        Ok(chain)
    }
}

impl Persist for CuckooFilter {
    const KIND: FilterKind = FilterKind::RedisBloomCuckoo;

    /// Parameters: chunk count `u64`. Payload: the chunks as for `redisbloom-bf`: the 38-byte
    /// `SCANDUMP` header with iterator 1, then each sub-filter's slots (whole up to 16 MiB, else
    /// 16 MiB pieces). Unlike `SCANDUMP`, an empty filter is stored too (header and zero slots).
    /// Hash id 4 (MurmurHash64A), seed 0.
    fn to_bytes(&self) -> Vec<u8> {
        let header = self.header();
        let mut chunks: Vec<(i64, &[u8])> = vec![(1, &header[..])];
        chunks.extend(self.chunks_for_file());
        encode(Self::KIND, &chunks)
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (chunks, data_len) = decode_chunks(bytes, Self::KIND)?;
        if chunks[0].1.len() != CF_HEADER_LEN {
            return Err(bad("redisbloom-cf: the header chunk is not 38 bytes"));
        }
        let limits = LoadLimits { max_bytes: data_len, ..LoadLimits::DEFAULT };
        let mut cf = CuckooFilter::from_header(chunks[0].1, &limits)
            .map_err(|_| bad("redisbloom-cf: invalid SCANDUMP header chunk"))?;
        for &(pos, data) in &chunks[1..] {
            cf.load_chunk(pos, data).map_err(|_| bad("redisbloom-cf: a chunk does not fit the filter"))?;
        }
        check_complete(data_len, cf.filters().iter().map(|f| f.slots().len() as u64).sum())?;
        Ok(cf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_chain_round_trip() {
        let mut c = BloomChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..40u32 {
            c.add(i.to_string().as_bytes()).unwrap();
        }
        assert!(c.links().len() > 1);
        let b = c.to_bytes();
        let d = BloomChain::from_bytes(&b).unwrap();
        assert_eq!(d, c);
        assert_eq!(d.scandump_all(), c.scandump_all());
        for cut in 0..b.len() {
            assert!(BloomChain::from_bytes(&b[..cut]).is_err());
        }
        assert!(CuckooFilter::from_bytes(&b).is_err(), "wrong kind");
    }

    #[test]
    fn cuckoo_round_trip_including_empty() {
        let mut cf = CuckooFilter::new(1000, 2, 20, 1).unwrap();
        let empty = CuckooFilter::from_bytes(&cf.to_bytes()).unwrap();
        assert_eq!(empty, cf);
        assert!(cf.scandump_all().is_empty());
        for i in 0..300u32 {
            cf.insert(i.to_string().as_bytes()).unwrap();
        }
        let b = cf.to_bytes();
        let d = CuckooFilter::from_bytes(&b).unwrap();
        assert_eq!(d, cf);
        assert_eq!(d.scandump_all(), cf.scandump_all());
        assert!((0..300u32).all(|i| d.contains(i.to_string().as_bytes())));
    }

    #[test]
    fn a_missing_chunk_is_refused() {
        let mut c = BloomChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..40u32 {
            c.add(i.to_string().as_bytes()).unwrap();
        }
        let dump = c.scandump_all();
        let mut chunks: Vec<(i64, &[u8])> = dump.iter().map(|(i, d)| (*i, &d[..])).collect();
        chunks.pop();
        let b = encode(FilterKind::RedisBloomChain, &chunks);
        assert!(BloomChain::from_bytes(&b).is_err());
        // A header declaring a huge link with no data behind it: refused before allocating.
        let mut h = dump[0].1.clone();
        h[20..28].copy_from_slice(&(1u64 << 40).to_le_bytes());
        h[28..36].copy_from_slice(&(1u64 << 43).to_le_bytes());
        let b = encode(FilterKind::RedisBloomChain, &[(1, &h)]);
        assert!(BloomChain::from_bytes(&b).is_err());
    }
    /// A file naming another hash than MurmurHash64A / seed 0 is refused, with the CRC fixed up so
    /// only the hash fields are wrong.
    #[test]
    fn another_hash_or_seed_is_refused() {
        let mut c = BloomChain::new(10, 0.01, 2, false).unwrap();
        c.add(b"x").unwrap();
        let cf = CuckooFilter::new(64, 2, 20, 1).unwrap();
        for (base, is_bloom) in [(c.to_bytes(), true), (cf.to_bytes(), false)] {
            let decodes = |b: &[u8]| {
                if is_bloom {
                    BloomChain::from_bytes(b).is_ok()
                } else {
                    CuckooFilter::from_bytes(b).is_ok()
                }
            };
            assert!(decodes(&base));
            for (at, value) in [(8usize, 1u8), (8, 3), (16, 1), (23, 0x80)] {
                let mut b = base.clone();
                b[at] = value;
                let end = b.len() - 4;
                let crc = crc32c::crc32c(&b[..end]);
                b[end..].copy_from_slice(&crc.to_le_bytes());
                assert!(!decodes(&b), "byte {at} = {value} accepted");
            }
        }
    }

    /// Mutated files, with the CRC recomputed so the parameter and chunk validation is reached:
    /// an error or a filter, never a panic or a huge allocation.
    #[test]
    fn mutated_files_never_panic() {
        let mut c = BloomChain::new(10, 0.01, 2, false).unwrap();
        let mut cf = CuckooFilter::new(64, 2, 20, 1).unwrap();
        for i in 0..30u32 {
            c.add(i.to_string().as_bytes()).unwrap();
            cf.insert(i.to_string().as_bytes()).unwrap();
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for base in [c.to_bytes(), cf.to_bytes()] {
            for _ in 0..3000 {
                let mut b = base.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % (b.len() as u64 - 4)) as usize;
                    b[at] = next() as u8;
                }
                let end = b.len() - 4;
                let crc = crc32c::crc32c(&b[..end]);
                b[end..].copy_from_slice(&crc.to_le_bytes());
                if let Ok(d) = BloomChain::from_bytes(&b) {
                    let _ = (d.contains(b"1"), d.info(), d.scandump_all());
                }
                if let Ok(d) = CuckooFilter::from_bytes(&b) {
                    let _ = (d.contains(b"1"), d.info(), d.scandump_all());
                }
            }
        }
    }
}
