//! Snapshot files: every live key with its type, deadline and value, in one versioned file with
//! a CRC32C trailer. A value of a registered data type is stored as its type's tag and its dump
//! chunks (`sift_commands::DataType::dump_chunk`) and rebuilt from them, so every counter and bit
//! comes back exactly (a `DEBUG RELOAD` gives byte-identical `SCANDUMP`s for the RedisBloom
//! filters, whose chunks are their `SCANDUMP` header and chunks).
//!
//! ```text
//! header (32 bytes)
//!      0   8  magic "SIFTSNAP"
//!      8   2  version (u16, 1)
//!     10   2  flags (0)
//!     12   4  reserved (0)
//!     16   8  creation time, Unix ms (u64)
//!     24   8  reserved (0)
//! entries, back to back, each:
//!      0   1  type: 1 string, else a registered data type's tag (2 Bloom chain, MBbloom--;
//!             3 cuckoo filter, MBbloomCF; 5 CMSk-TYPE, 6 TopK-TYPE, 7 TDIS-TYPE; see
//!             `sift_commands::families`)
//!      1   1  flags: bit 0 = has a deadline
//!     [2   8  deadline, Unix ms (u64), only with flag bit 0]
//!          4  key length K (u32), then K bytes
//!          value, by type:
//!            string: length (u64), bytes
//!            data type: chunk count C ≥ 1 (u32), then C × (position i64, length u64, bytes);
//!                    chunk 0 is the header (position 0), the others are loaded in order with
//!                    their position (for the filters, what LOADCHUNK takes)
//! trailer
//!      0   1  0xFF (end of entries)
//!      1   8  number of entries (u64)
//!      9   4  CRC32C of every preceding byte of the file
//! ```
//!
//! Everything is little-endian. The whole file is verified (checksum, then structure) before a
//! single key is handed to the keyspace: a damaged snapshot is refused, never half-loaded. Both
//! passes stream the file ([`verify_stream`], [`decode_stream`]): loading needs the values plus
//! one chunk, not a copy of the file.
//!
//! The library's own format (`sift::format`) frames one filter of a `FilterKind`; a snapshot is
//! a keyspace of mixed values whose filters must round-trip through RedisBloom's own dump
//! encoding, so it has its own container built the same way (magic, version refused when newer,
//! explicit little-endian fields, CRC32C trailer).

use std::io::Read;

use bytes::Bytes;
use sift::compat::redisbloom::LoadLimits;
use sift_commands::{registry, Chunk, Data, Defaults, Frozen, LoadContext};

use crate::db::{Entry, Shard, Value};

/// Snapshot file magic.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"SIFTSNAP";
/// The snapshot format version this build writes and reads.
pub const SNAPSHOT_VERSION: u16 = 1;
/// Size of the header.
pub const HEADER_LEN: usize = 32;
/// Size of the trailer.
pub const TRAILER_LEN: usize = 13;

const T_STRING: u8 = 1;
const T_END: u8 = 0xFF;

/// The file header.
pub fn header(created_ms: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&SNAPSHOT_MAGIC);
    h[8..10].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&created_ms.to_le_bytes());
    h
}

/// The trailer, given the entry count and the CRC32C of everything before the CRC field.
pub fn trailer(entries: u64, crc_so_far: u32) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[0] = T_END;
    t[1..9].copy_from_slice(&entries.to_le_bytes());
    let crc = crc32c::crc32c_append(crc_so_far, &t[..9]);
    t[9..13].copy_from_slice(&crc.to_le_bytes());
    t
}

/// Appends an entry's type, flags, deadline and key.
fn encode_head(key: &[u8], ty: u8, expires: Option<u64>, out: &mut Vec<u8>) {
    out.push(ty);
    match expires {
        Some(t) => {
            out.push(1);
            out.extend_from_slice(&t.to_le_bytes());
        }
        None => out.push(0),
    }
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
}

/// Appends a data type's value: its chunk count and chunks.
fn encode_data(d: &dyn Data, out: &mut Vec<u8>) {
    let chunks: Vec<Chunk<'_>> = d.chunks().collect();
    out.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
    for c in chunks {
        out.extend_from_slice(&c.pos.to_le_bytes());
        out.extend_from_slice(&(c.data.len() as u64).to_le_bytes());
        out.extend_from_slice(&c.data);
    }
}

/// Appends one entry.
pub fn encode_entry(key: &[u8], entry: &Entry, out: &mut Vec<u8>) {
    match &entry.value {
        Value::String(s) => {
            encode_head(key, T_STRING, entry.expires_at(), out);
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s);
        }
        Value::Data(d) => {
            encode_head(key, d.snapshot_tag(), entry.expires_at(), out);
            encode_data(&**d, out);
        }
    }
}

/// Encodes every entry of `shard` live at `now`: (bytes, number of entries). Prepares the
/// values to be saved first ([`Shard::prepare_for_save`], `changed` gets the keys it changed).
pub fn encode_shard(shard: &mut Shard, now: u64, changed: &mut dyn FnMut(&[u8])) -> (Vec<u8>, u64) {
    shard.prepare_for_save(now, changed);
    let mut out = Vec::new();
    let mut n = 0;
    for (k, e) in shard.iter(now) {
        encode_entry(k, e, &mut out);
        n += 1;
    }
    (out, n)
}

/// An entry as a background snapshot holds it from its epoch until it is written: the entry
/// encoded, or, for a value whose type can freeze it ([`sift_commands::DataType::freeze`]), its
/// head encoded and the frozen value, dumped when the entry is written (a large filter is not
/// copied under its writers' lock).
pub enum Held {
    /// Whole entries, encoded, and how many.
    Encoded(Vec<u8>, u64),
    /// The entry's head (type, flags, deadline, key) and its frozen value.
    Frozen(Vec<u8>, Box<dyn Frozen>),
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::Encoded(b, n) => write!(f, "Encoded({n} entries, {} bytes)", b.len()),
            Held::Frozen(h, v) => write!(f, "Frozen({} head bytes, {} chunks)", h.len(), v.chunk_count()),
        }
    }
}

/// Holds every entry of `shard` live at `now` as it is now (under the shard's lock), once
/// prepared to be saved ([`Shard::prepare_for_save`], `changed` gets the keys it changed).
pub fn hold_shard(shard: &mut Shard, now: u64, changed: &mut dyn FnMut(&[u8])) -> Vec<Held> {
    shard.prepare_for_save(now, changed);
    let mut held = Vec::new();
    let (mut small, mut n) = (Vec::new(), 0);
    for (k, e) in shard.iter(now) {
        if let Value::Data(d) = &e.value {
            if let Some(f) = d.freeze() {
                let mut head = Vec::new();
                encode_head(k, d.snapshot_tag(), e.expires_at(), &mut head);
                held.push(Held::Frozen(head, f));
                continue;
            }
        }
        encode_entry(k, e, &mut small);
        n += 1;
    }
    if n > 0 {
        held.push(Held::Encoded(small, n));
    }
    held
}

/// Writes held entries through `sink(bytes, entries)` (see `persist::disk`), a frozen value
/// chunk by chunk. Returns the number of entries.
pub fn write_held(
    held: Vec<Held>,
    sink: &mut dyn FnMut(&[u8], u64) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    let mut n = 0;
    let mut buf = Vec::new();
    for h in held {
        match h {
            Held::Encoded(bytes, k) => {
                sink(&bytes, k)?;
                n += k;
            }
            Held::Frozen(head, f) => {
                sink(&head, 0)?;
                sink(&u32::try_from(f.chunk_count()).unwrap_or(u32::MAX).to_le_bytes(), 0)?;
                let mut cursor = 0;
                let mut written = 0u64;
                let framing = |pos: i64, len: u64| {
                    let mut framing = [0u8; 16];
                    framing[..8].copy_from_slice(&pos.to_le_bytes());
                    framing[8..].copy_from_slice(&len.to_le_bytes());
                    framing
                };
                loop {
                    // A large filter's file goes to the sink in the pieces it is read in: built
                    // whole, it was a second copy of the filter (gigabytes) for the snapshot.
                    let next = if let Some((pos, next, len)) = f.streamed_chunk(cursor) {
                        sink(&framing(pos, len), 0)?;
                        let mut out = SinkWriter { sink: &mut *sink, written: 0 };
                        f.write_chunk(cursor, &mut out)?;
                        if out.written != len {
                            return Err(std::io::Error::other(format!(
                                "a frozen value's chunk gave {} bytes, {len} announced",
                                out.written
                            )));
                        }
                        next
                    } else {
                        buf.clear();
                        let Some((pos, next)) = f.dump_chunk(cursor, &mut buf) else { break };
                        sink(&framing(pos, buf.len() as u64), 0)?;
                        sink(&buf, 0)?;
                        next
                    };
                    written += 1;
                    cursor = next;
                }
                if written != f.chunk_count() {
                    return Err(std::io::Error::other(format!(
                        "a frozen value gave {written} chunks, {} announced",
                        f.chunk_count()
                    )));
                }
                sink(&[], 1)?;
                n += 1;
            }
        }
    }
    Ok(n)
}

/// The bytes of a streamed chunk, passed on to a snapshot's sink as they come.
struct SinkWriter<'a> {
    sink: &'a mut dyn FnMut(&[u8], u64) -> std::io::Result<()>,
    written: u64,
}

impl std::io::Write for SinkWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (self.sink)(buf, 0)?;
        self.written += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A whole snapshot in memory (tests, small keyspaces).
pub fn encode_all<'a>(created_ms: u64, entries: impl IntoIterator<Item = (&'a [u8], &'a Entry)>) -> Vec<u8> {
    let mut out = header(created_ms).to_vec();
    let mut n = 0;
    for (k, e) in entries {
        encode_entry(k, e, &mut out);
        n += 1;
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&trailer(n, crc));
    out
}

/// A little-endian reader over a snapshot's entries, streamed from any `Read`: it computes the
/// CRC32C of what it reads and reports where it failed. It never reads past `end` (the start of
/// the trailer), so a damaged length cannot make it allocate more than the file holds.
struct Reader<R> {
    r: R,
    at: u64,
    end: u64,
    crc: u32,
}

impl<R: Read> Reader<R> {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), String> {
        self.r.read_exact(buf).map_err(|e| format!("reading at offset {}: {e}", self.at))?;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        self.at += buf.len() as u64;
        Ok(())
    }
    fn check(&self, n: u64) -> Result<usize, String> {
        self.at
            .checked_add(n)
            .filter(|&e| e <= self.end)
            .map(|_| n as usize)
            .ok_or_else(|| format!("entry data past the end at offset {}", self.at))
    }
    /// The next `n` bytes into `buf` (replacing its contents).
    fn take_into(&mut self, n: u64, buf: &mut Vec<u8>) -> Result<(), String> {
        let n = self.check(n)?;
        buf.clear();
        buf.resize(n, 0);
        self.fill(buf)
    }
    fn take_vec(&mut self, n: u64) -> Result<Vec<u8>, String> {
        let mut v = Vec::new();
        self.take_into(n, &mut v)?;
        Ok(v)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], String> {
        self.check(N as u64)?;
        let mut a = [0u8; N];
        self.fill(&mut a)?;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.arr::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
}

/// Checks a header (the first [`HEADER_LEN`] bytes) and the length of a file of `len` bytes.
fn check_header(head: &[u8], len: u64) -> Result<(), String> {
    if len < (HEADER_LEN + TRAILER_LEN) as u64 {
        return Err(format!("truncated ({len} bytes)"));
    }
    if head[0..8] != SNAPSHOT_MAGIC {
        return Err("not a sift snapshot (bad magic)".into());
    }
    let version = u16::from_le_bytes([head[8], head[9]]);
    if version != SNAPSHOT_VERSION {
        return Err(format!(
            "snapshot format version {version}, this build reads version {SNAPSHOT_VERSION}"
        ));
    }
    Ok(())
}

/// Checks the header and the checksum of a whole snapshot file in memory.
pub fn verify(data: &[u8]) -> Result<(), String> {
    verify_stream(data, data.len() as u64)
}

/// Checks the header and the checksum of a snapshot of `len` bytes read from `r`, in pieces of
/// 1 MiB: memory does not grow with the file.
pub fn verify_stream(mut r: impl Read, len: u64) -> Result<(), String> {
    if len < (HEADER_LEN + TRAILER_LEN) as u64 {
        return Err(format!("truncated ({len} bytes)"));
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut crc = 0u32;
    let mut left = len - 4;
    let mut first = true;
    while left > 0 {
        let n = (left as usize).min(buf.len());
        r.read_exact(&mut buf[..n]).map_err(|e| format!("reading at offset {}: {e}", len - 4 - left))?;
        if first {
            check_header(&buf[..n.min(HEADER_LEN)], len)?;
            first = false;
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        left -= n as u64;
    }
    let mut stored = [0u8; 4];
    r.read_exact(&mut stored).map_err(|e| format!("reading the checksum: {e}"))?;
    if crc != u32::from_le_bytes(stored) {
        return Err("checksum mismatch".into());
    }
    Ok(())
}

/// Decodes a snapshot in memory (see [`decode_stream`]).
pub fn decode(
    data: &[u8],
    limits: &LoadLimits,
    f: impl FnMut(Bytes, Entry) -> Result<(), String>,
) -> Result<u64, String> {
    verify(data)?;
    decode_stream(data, data.len() as u64, limits, f)
}

/// Decodes a snapshot of `len` bytes streamed from `r`, calling `f(key, entry)` for each entry
/// in file order; `limits` bound what a filter header may allocate. Returns the number of
/// entries. Memory beyond the values themselves is one chunk (at most what the type dumps at
/// once), never the file: a value is rebuilt from its header and then chunk by chunk.
///
/// The caller checks the file first ([`verify_stream`]), so that a damaged snapshot is refused
/// before a single key is handed to the keyspace; this pass checks the checksum again at the
/// end, so a file changed in between is refused too. Every structural error is reported (never
/// a panic), with its offset.
pub fn decode_stream(
    r: impl Read,
    len: u64,
    limits: &LoadLimits,
    mut f: impl FnMut(Bytes, Entry) -> Result<(), String>,
) -> Result<u64, String> {
    if len < (HEADER_LEN + TRAILER_LEN) as u64 {
        return Err(format!("truncated ({len} bytes)"));
    }
    let body_end = len - TRAILER_LEN as u64;
    let mut r = Reader { r: std::io::BufReader::with_capacity(1 << 20, r), at: 0, end: body_end, crc: 0 };
    let head: [u8; HEADER_LEN] = r.arr()?;
    check_header(&head, len)?;
    let cx = LoadContext { limits: *limits, defaults: Defaults::default() };
    let mut chunk = Vec::new();
    let mut n = 0u64;
    while r.at < body_end {
        let at = r.at;
        let ty = r.u8()?;
        let flags = r.u8()?;
        if flags & !1 != 0 {
            return Err(format!("unknown entry flags {flags:#x} at offset {at}"));
        }
        let expires = if flags & 1 != 0 { Some(r.u64()?) } else { None };
        let klen = r.u32()?;
        let key = Bytes::from(r.take_vec(u64::from(klen))?);
        let value = match ty {
            T_STRING => {
                let len = r.u64()?;
                Value::String(Bytes::from(r.take_vec(len)?))
            }
            tag => {
                let Some(ty) = registry().type_by_tag(tag) else {
                    return Err(format!("unknown entry type {tag} at offset {at}"));
                };
                let count = r.u32()?;
                if count == 0 {
                    return Err(format!("value without a header at offset {at}"));
                }
                let mut value = None;
                for _ in 0..count {
                    let pos = r.u64()? as i64;
                    let len = r.u64()?;
                    r.take_into(len, &mut chunk)?;
                    let step = match &mut value {
                        None if pos == 0 => (ty.restore)(&chunk, &cx).map(|v| value = Some(v)),
                        None => Err("the first chunk is not the header".into()),
                        Some(v) => v.load_chunk(pos, &chunk),
                    };
                    step.map_err(|e| format!("{} of the entry at offset {at}: {e}", ty.name))?;
                }
                let mut value = value.expect("count >= 1 chunks were loaded");
                value.finish_load().map_err(|e| format!("{} of the entry at offset {at}: {e}", ty.name))?;
                Value::Data(value)
            }
        };
        f(key, Entry::with_expiry(value, expires))?;
        n += 1;
    }
    let crc_body = r.crc;
    r.end = len;
    let t: [u8; TRAILER_LEN] = r.arr()?;
    let stored = u64::from_le_bytes(t[1..9].try_into().expect("8 bytes"));
    let crc = crc32c::crc32c_append(crc_body, &t[..9]);
    if crc != u32::from_le_bytes(t[9..13].try_into().expect("4 bytes")) {
        return Err("checksum mismatch".into());
    }
    if t[0] != T_END || stored != n {
        return Err(format!("trailer says {stored} entries, the file holds {n}"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sift::compat::redisbloom::{BloomChain, CuckooFilter};

    fn entries() -> Vec<(Bytes, Entry)> {
        let mut bloom = BloomChain::new(100, 0.01, 2, false).unwrap();
        for i in 0..300u32 {
            bloom.add(&i.to_le_bytes()).unwrap();
        }
        let mut cuckoo = CuckooFilter::new(1000, 2, 20, 1).unwrap();
        for i in 0..500u32 {
            cuckoo.insert(&i.to_le_bytes()).unwrap();
        }
        cuckoo.delete(&7u32.to_le_bytes());
        let empty_cuckoo = CuckooFilter::new(64, 4, 20, 2).unwrap();
        vec![
            (Bytes::from_static(b"s"), Entry::new(Value::String(Bytes::from_static(b"hello")))),
            (Bytes::from_static(b""), Entry::with_expiry(Value::String(Bytes::new()), Some(1 << 50))),
            (Bytes::from_static(b"bf"), Entry::with_expiry(Value::Data(Box::new(bloom)), Some(99))),
            (Bytes::from_static(b"cf"), Entry::new(Value::Data(Box::new(cuckoo)))),
            (Bytes::from_static(b"cf0"), Entry::new(Value::Data(Box::new(empty_cuckoo)))),
        ]
    }

    /// The value as its `SCANDUMP` replies give it (for the filters), or its bytes.
    fn dump(v: &Value) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut it = 0;
        loop {
            let next = match v {
                Value::Data(d) => match (d.downcast_ref::<BloomChain>(), d.downcast_ref::<CuckooFilter>()) {
                    (Some(b), _) => b.scandump(it).map(|(n, d)| (n, d.into_owned())),
                    (_, Some(c)) => c.scandump(it).map(|(n, d)| (n, d.into_owned())),
                    _ => panic!("{d:?}"),
                },
                Value::String(s) => return vec![s.to_vec()],
            };
            let Some((n, d)) = next else { break };
            out.push(d);
            it = n;
        }
        out
    }

    #[test]
    fn round_trip_is_exact() {
        let src = entries();
        let file = encode_all(5, src.iter().map(|(k, e)| (&k[..], e)));
        let mut got = Vec::new();
        let n = decode(&file, &LoadLimits::default(), |k, e| {
            got.push((k, e));
            Ok(())
        })
        .unwrap();
        assert_eq!(n, src.len() as u64);
        for ((k1, e1), (k2, e2)) in src.iter().zip(&got) {
            assert_eq!(k1, k2);
            assert_eq!(e1.expires_at(), e2.expires_at());
            assert_eq!(e1.value.type_name(), e2.value.type_name());
            assert_eq!(dump(&e1.value), dump(&e2.value), "key {k1:?}");
        }
        let header = |v: &Value| match v {
            Value::Data(d) => d.downcast_ref::<CuckooFilter>().map(|c| c.header()),
            Value::String(_) => None,
        };
        assert!(header(&src[4].1.value).is_some());
        assert_eq!(header(&src[4].1.value), header(&got[4].1.value), "the empty cuckoo filter");
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let src = entries();
        let file = encode_all(5, src.iter().take(2).map(|(k, e)| (&k[..], e)));
        for at in 0..file.len() {
            let mut bad = file.clone();
            bad[at] ^= 0x01;
            assert!(decode(&bad, &LoadLimits::default(), |_, _| Ok(())).is_err(), "byte {at}");
        }
        assert!(decode(&file[..file.len() - 1], &LoadLimits::default(), |_, _| Ok(())).is_err());
    }

    /// The entry pass alone refuses a file that changed after the checksum pass: every
    /// flipped byte is caught, by the structure or by the checksum it computes again.
    #[test]
    fn the_streamed_pass_checks_again() {
        let src = entries();
        let file = encode_all(5, src.iter().map(|(k, e)| (&k[..], e)));
        let limits = LoadLimits::default();
        assert_eq!(decode_stream(&file[..], file.len() as u64, &limits, |_, _| Ok(())), Ok(src.len() as u64));
        for at in 0..file.len() {
            let mut bad = file.clone();
            bad[at] ^= 0x01;
            assert!(decode_stream(&bad[..], bad.len() as u64, &limits, |_, _| Ok(())).is_err(), "byte {at}");
            assert!(verify_stream(&bad[..], bad.len() as u64).is_err(), "byte {at}");
        }
        // A file shorter than it claims to be.
        let short = &file[..file.len() - 5];
        assert!(decode_stream(short, file.len() as u64, &limits, |_, _| Ok(())).is_err());
        assert!(verify_stream(short, file.len() as u64).is_err());
    }

    /// A shard holding one large cuckoo filter is held frozen, not encoded under the lock, and
    /// written later it gives the bytes `encode_shard` gave at the hold, though the filter kept
    /// changing in between: the snapshot format does not depend on the path. A small filter is
    /// encoded at once.
    #[test]
    fn a_held_large_cuckoo_filter_writes_the_bytes_of_its_hold() {
        use crate::db::{now_ms, shard_of, Db};
        for (key, capacity, frozen) in
            [(&b"big"[..], 1u64 << 23, cfg!(target_os = "linux")), (b"small", 1000, false)]
        {
            let mut cf = CuckooFilter::new(capacity, 2, 20, 1).unwrap();
            for i in 0..(capacity / 8) as u32 {
                cf.insert(&i.to_le_bytes()).unwrap();
            }
            let db = Db::new();
            let mut l = db.lock_all();
            l.insert(Bytes::copy_from_slice(key), Value::Data(Box::new(cf)));
            let now = now_ms();
            let (encoded, held) = l.with_shard(shard_of(key), |s| {
                (encode_shard(s, now, &mut |_| {}), hold_shard(s, now, &mut |_| {}))
            });
            assert_eq!(encoded.1, 1);
            assert_eq!(held.len(), 1);
            assert_eq!(matches!(held[0], Held::Frozen(..)), frozen, "{held:?}");
            let Some(Value::Data(d)) = l.get_mut(key).map(|e| &mut e.value) else { panic!("the filter") };
            let cf = d.downcast_mut::<CuckooFilter>().unwrap();
            for i in 0..50_000u32 {
                cf.insert(format!("later{i}").as_bytes()).unwrap();
            }
            assert!(cf.delete(&3u32.to_le_bytes()));
            let mut written = Vec::new();
            let n = write_held(held, &mut |b, _| {
                written.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            assert_eq!(n, 1);
            assert!(written == encoded.0, "the held filter wrote other bytes than the encoded one");
        }
    }

    /// A held large sift filter (a blocked Bloom filter of 16 MB) reaches the sink in pieces
    /// of at most a megabyte, never as one buffer of its whole file, and gives the bytes the
    /// filter encodes to.
    #[test]
    fn a_held_large_sift_filter_reaches_the_sink_in_pieces() {
        use crate::db::{now_ms, shard_of, Db};
        use sift_commands::sf::{Native, SiftFilter};
        let mut filter = sift::AnyFilter::Blocked(sift::BlockedBloom::new(6_000_000, 0.0001).unwrap());
        for i in 0..1000u32 {
            filter.insert(&i.to_le_bytes()).unwrap();
        }
        let sf = SiftFilter::new(Native::new(filter).unwrap());
        let bytes = sf.filter().unwrap().size_in_bytes();
        assert!(bytes > 8 << 20, "{bytes}");
        let db = Db::new();
        let mut l = db.lock_all();
        l.insert(Bytes::from_static(b"big"), Value::Data(Box::new(sf)));
        let now = now_ms();
        let (encoded, held) = l.with_shard(shard_of(b"big"), |s| {
            (encode_shard(s, now, &mut |_| {}), hold_shard(s, now, &mut |_| {}))
        });
        assert_eq!(held.len(), 1);
        assert!(matches!(held[0], Held::Frozen(..)), "{held:?}");
        let (mut written, mut largest) = (Vec::new(), 0);
        let n = write_held(held, &mut |b, _| {
            largest = largest.max(b.len());
            written.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 1);
        assert!(written == encoded.0, "the held filter wrote other bytes than the encoded one");
        assert!(largest <= 1 << 20, "one write to the sink of {largest} bytes");
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
            let limits = LoadLimits { max_bytes: 1 << 20, ..LoadLimits::default() };
            let _ = decode(&body, &limits, |_, _| Ok(()));
            // With a valid frame and checksum around them, the entry decoder sees the bytes.
            let mut file = header(1).to_vec();
            file.extend_from_slice(&body);
            let crc = crc32c::crc32c(&file);
            file.extend_from_slice(&trailer(1, crc));
            let _ = decode(&file, &limits, |_, _| Ok(()));
        }
    }
}
