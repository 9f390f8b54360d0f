//! Split-block Bloom filter, bit-compatible with Apache Parquet's SBBF.
//!
//! Specified by the Parquet format (`parquet-format/BloomFilter.md`), after Putze, Sanders &
//! Singler, "Cache-, hash- and space-efficient Bloom filters", JEA 2009 (blocks), and the split
//! layout of Broder & Mitzenmacher, "Network applications of Bloom filters: a survey", 2004, §2.1.
//!
//! * **Idea**: the bitset is a sequence of 256-bit blocks of eight 32-bit little-endian words.
//!   An item's 64-bit hash `h` picks block `((h >> 32) · blocks) >> 32` (a multiply-shift, so any
//!   block count works), and the low 32 bits `key = h as u32` set one bit in each of the eight
//!   words: bit `(key · SALT[i]) >> 27` of word `i`, with the spec's eight odd salts [`SALT`]. One
//!   cache line, eight independent bits, no loop-carried dependency.
//! * **Hash**: XXH64 with seed 0 of the value's Parquet plain encoding ([`HashKind::Xxh64`]):
//!   little-endian bytes for `INT32`/`INT64`/`FLOAT`/`DOUBLE`, and for `BYTE_ARRAY` the bytes
//!   themselves, *without* the 4-byte length prefix of the plain encoding (this is what
//!   parquet-mr, Spark and arrow-rs hash; the golden vectors in the tests pin it).
//!   **For this type the 64-bit hash is the raw XXH64 value**: [`Digest::h1`] is used as is and
//!   `h2` is ignored, so [`Insert::insert_hash`] and [`Filter::contains_hash`] take exactly the
//!   hash a Parquet reader or writer computes.
//! * **FPR**: `p = Σ_i Poisson(i; n/blocks) · (1 - (31/32)^i)^8`
//!   ([`crate::math::split_block_fpr`]).
//! * **Space**: the spec sizes filters with the classic formula `c = -8 / ln(1 - p^(1/8))` bits
//!   per value (9.68 at 1%), which underestimates the true FPR (a filter of exactly that size has
//!   1.46% at a 1% target); writers then round up to a power of two bytes, which usually, not
//!   always, makes up for it. The tight size is about 10.5 bits/key at 1% ([`crate::plan`], and
//!   any multiple of 32 bytes is accepted by [`SplitBlockBloom::with_num_bytes`]);
//!   [`SplitBlockBloom::new`] takes the smallest whole number of blocks that meets the target,
//!   and [`SplitBlockBloom::for_parquet`] exactly what Parquet writers allocate.
//! * **Parameters**: `expected_items` and `fpr`, or a size in bytes. Parquet stores bitsets of a
//!   power of two bytes between 32 B and 128 MiB ([`SplitBlockBloom::for_parquet`]); the native
//!   API allows any multiple of 32 bytes up to 2^32 blocks (128 GiB), the limit of the block
//!   index formula.
//! * **Limits**: `k = 8` is fixed, so the filter is most space-efficient around `p ≈ 0.5%`; for
//!   very low FPRs the classic or blocked Bloom filters use fewer bits. Only 32 bits of the hash
//!   select the bits in a block, so FPRs below about `2^-32` per block are not reachable.
//!
//! ```
//! use sift::prelude::*;
//! use sift::SplitBlockBloom;
//!
//! let mut f = SplitBlockBloom::new(10_000, 0.01)?;
//! for i in 0..10_000i64 {
//!     f.insert(i.to_le_bytes()); // an INT64 column: plain encoding is 8 little-endian bytes
//! }
//! assert!((0..10_000i64).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members: within a 99.9% binomial bound of the filter's expected FPR.
//! let p = f.expected_fpr();
//! let fp = (10_000..110_000i64).filter(|i| f.contains(i.to_le_bytes())).count() as f64;
//! assert!(fp / 100_000.0 <= p * 1.05 + 3.1 * (p * (1.0 - p) / 100_000.0).sqrt(), "{fp}");
//! // Sized in whole 32-byte blocks (412 blocks here); a filter for a Parquet file takes the
//! // writers' power-of-two size instead, and its bitset is what the file stores:
//! assert_eq!(f.to_parquet_bytes().len(), 412 * 32);
//! assert_eq!(SplitBlockBloom::for_parquet(10_000, 0.01)?.to_parquet_bytes().len(), 16 * 1024);
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{CowGuard, Storage};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{decode_verified, Encoder, FilterKind, FrozenFile, FrozenPart, ParamWriter};
use crate::hash::{Digest, HashKind, Hasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist};

/// The eight salts of the Parquet specification, one per 32-bit word of a block.
pub const SALT: [u32; 8] =
    [0x47b6_137b, 0x4497_4d91, 0x8824_ad5b, 0xa2b7_289d, 0x7054_95c7, 0x2df1_424b, 0x9efc_4947, 0x5c6b_fb31];

/// Bytes per block (eight 32-bit words).
pub const BLOCK_BYTES: usize = 32;

/// Smallest bitset Parquet writers produce.
pub const PARQUET_MIN_BYTES: usize = 32;

/// Largest bitset Parquet writers produce (128 MiB).
pub const PARQUET_MAX_BYTES: usize = 128 << 20;

/// Largest number of blocks: the block index `((h >> 32) · blocks) >> 32` addresses 2^32 blocks.
pub const MAX_BLOCKS: u64 = 1 << 32;

/// The hasher Parquet specifies: XXH64, seed 0.
pub const PARQUET_HASHER: Hasher = Hasher::new(HashKind::Xxh64, 0);

type Block = [u32; 8];

/// A split-block Bloom filter, bit-compatible with Parquet. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq)]
pub struct SplitBlockBloom {
    /// In a [`Storage`]: a large bitset is on huge pages where the system allows it, and can be
    /// frozen for a snapshot ([`SplitBlockBloom::freeze`]).
    blocks: Storage<Block>,
    hasher: Hasher,
    items: u64,
    capacity: u64,
    target_fpr: f64,
}

/// The bit each word of the block gets for `key` (the low 32 bits of the hash).
#[inline(always)]
fn mask(key: u32) -> Block {
    let mut m = [0u32; 8];
    for i in 0..8 {
        m[i] = 1 << (key.wrapping_mul(SALT[i]) >> 27);
    }
    m
}

/// The block of hash `h` among `n` blocks (`n ≤ 2^32`).
#[inline(always)]
fn block_index(h: u64, n: usize) -> usize {
    (((h >> 32) * n as u64) >> 32) as usize
}

fn check_num_bytes(num_bytes: u64) -> Result<u64> {
    if num_bytes == 0 || num_bytes % BLOCK_BYTES as u64 != 0 {
        return Err(Error::param("num_bytes", num_bytes, "a positive multiple of 32"));
    }
    let blocks = num_bytes / BLOCK_BYTES as u64;
    if blocks > MAX_BLOCKS {
        return Err(Error::CapacityExceeded {
            requested_bytes: num_bytes as u128,
            limit_bytes: MAX_BLOCKS as u128 * BLOCK_BYTES as u128,
        });
    }
    Ok(blocks)
}

impl SplitBlockBloom {
    /// A filter for `expected_items` distinct values at false-positive rate `fpr`, hashed with
    /// XXH64 seed 0 as Parquet hashes: the smallest number of 32-byte blocks whose true
    /// split-block FPR ([`crate::math::split_block_fpr`]) is at most `fpr` (the spec's sizing
    /// formula underestimates the FPR by 46% at 1%, so this is larger than that formula's size).
    ///
    /// Parquet writers use power-of-two sizes between 32 bytes and 128 MiB: for a filter to put in
    /// a Parquet file, use [`SplitBlockBloom::for_parquet`] (the writers' exact size) or
    /// [`SplitBlockBloom::with_num_bytes`] with a power of two. Rounding to a power of two costs
    /// up to 2x the memory, which a native filter does not need to pay.
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        Self::with_hasher(expected_items, fpr, PARQUET_HASHER)
    }

    /// Like [`SplitBlockBloom::new`], with another hash function (the result is then not
    /// readable by Parquet).
    pub fn with_hasher(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let n = expected_items as f64;
        let limit = MAX_BLOCKS as f64 * BLOCK_BYTES as f64;
        let too_big = |bytes: f64| Error::CapacityExceeded {
            requested_bytes: bytes.min(u128::MAX as f64) as u128,
            limit_bytes: limit as u128,
        };
        // Rule out absurd sizes before the bisection, with the spec's (smaller) estimate.
        let spec_bytes = n * math::parquet_sbbf_bits_per_value(fpr) / 8.0;
        if spec_bytes > limit {
            return Err(too_big(spec_bytes));
        }
        let bytes = math::split_block_blocks_for(n, fpr).saturating_mul(BLOCK_BYTES as u64);
        if bytes as f64 > limit {
            return Err(too_big(bytes as f64));
        }
        let mut f = Self::with_num_bytes_and_hasher(bytes, hasher)?;
        f.capacity = expected_items as u64;
        f.target_fpr = fpr;
        Ok(f)
    }

    /// Exactly what a Parquet writer (parquet-mr, arrow-rs) allocates for `ndv` distinct values
    /// at `fpp`: the size of [`SplitBlockBloom::new`] clamped to 128 MiB. Above about 110 million
    /// values at 1% the clamp means the filter is overloaded and misses `fpp`.
    pub fn for_parquet(ndv: usize, fpp: f64) -> Result<Self> {
        check_items(ndv)?;
        check_fpr(fpp)?;
        let mut f = Self::with_num_bytes(math::parquet_sbbf_bytes(ndv as f64, fpp) as usize)?;
        f.capacity = ndv as u64;
        f.target_fpr = fpp;
        Ok(f)
    }

    /// An empty filter of `num_bytes` bytes: any positive multiple of 32 (Parquet writers only
    /// use powers of two from 32 B to 128 MiB).
    pub fn with_num_bytes(num_bytes: usize) -> Result<Self> {
        Self::with_num_bytes_and_hasher(num_bytes as u64, PARQUET_HASHER)
    }

    /// Like [`SplitBlockBloom::with_num_bytes`], with another hash function.
    pub fn with_num_bytes_and_hasher(num_bytes: u64, hasher: Hasher) -> Result<Self> {
        let n = check_num_bytes(num_bytes)?;
        let blocks = Storage::<Block>::zeroed(n as usize)?;
        // Without a target, size for the point where each word is half full, as Bloom does:
        // (31/32)^λ = 1/2 items per block.
        let per_block = core::f64::consts::LN_2 / (32.0f64 / 31.0).ln();
        let capacity = (per_block * n as f64).max(1.0);
        Ok(SplitBlockBloom {
            blocks,
            hasher,
            items: 0,
            capacity: capacity as u64,
            target_fpr: math::split_block_fpr(n as f64, capacity).clamp(f64::MIN_POSITIVE, 0.5),
        })
    }

    /// Reads the bitset of a Parquet Bloom filter: the bytes that follow its Thrift
    /// `BloomFilterHeader` (`num_bytes` of them). The length must be a positive multiple of 32.
    /// The hasher is XXH64 seed 0; [`Filter::len`] is estimated from the bits set
    /// ([`SplitBlockBloom::estimated_items`]), since Parquet does not store the count.
    pub fn from_parquet_bytes(bitset: &[u8]) -> Result<Self> {
        let mut f = Self::with_num_bytes_and_hasher(bitset.len() as u64, PARQUET_HASHER)?;
        for (block, bytes) in f.blocks.iter_mut().zip(bitset.chunks_exact(BLOCK_BYTES)) {
            for (w, b) in block.iter_mut().zip(bytes.chunks_exact(4)) {
                *w = u32::from_le_bytes(b.try_into().expect("4-byte chunk"));
            }
        }
        f.items = f.estimated_items().round() as u64;
        Ok(f)
    }

    /// The bitset exactly as Parquet stores it after the `BloomFilterHeader`: blocks in order,
    /// each as eight little-endian 32-bit words.
    pub fn to_parquet_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.num_bytes());
        self.write_bitset(&mut out);
        out
    }

    fn write_bitset(&self, out: &mut Vec<u8>) {
        for block in &self.blocks {
            for w in block {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
    }

    /// Whether the size is one a Parquet writer produces (a power of two from 32 B to 128 MiB).
    pub fn is_parquet_size(&self) -> bool {
        let b = self.num_bytes();
        b.is_power_of_two() && (PARQUET_MIN_BYTES..=PARQUET_MAX_BYTES).contains(&b)
    }

    /// Size of the bitset in bytes.
    pub fn num_bytes(&self) -> usize {
        self.blocks.len() * BLOCK_BYTES
    }

    /// Number of 256-bit blocks.
    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// The item count the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for.
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Estimated number of distinct items from the bits set. Each item sets one bit in each
    /// 32-bit word of its block and block loads are Poisson(λ = n / blocks), so a given bit stays
    /// clear with probability `E[(31/32)^X] = e^(-λ/32)`; hence `n ≈ -32 · blocks · ln(1 - fill)`
    /// (the Swamidass & Baldi estimate of [`crate::math::bloom_estimate_items`], averaged over the
    /// block loads). Infinite for a full filter.
    pub fn estimated_items(&self) -> f64 {
        let set: u64 = self.blocks.iter().flatten().map(|w| w.count_ones() as u64).sum();
        let total = self.blocks.len() as f64 * 256.0;
        if set as f64 >= total {
            return f64::INFINITY;
        }
        -32.0 * self.blocks.len() as f64 * (1.0 - set as f64 / total).ln()
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        let guard = self.blocks.cow_guard();
        let _writer = guard.as_ref().map(|g| {
            let mut w = g.writer();
            w.before_write_values(&self.blocks, 0..self.blocks.len());
            w
        });
        self.blocks.fill([0; 8]);
        self.items = 0;
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// the blocks are guarded ([`crate::bits::COW_PIECE`]-sized pieces copied aside by the
    /// writes that reach them before the file has been written), so that no write waits for a
    /// copy of the whole filter. `None` for a filter small enough to copy (not in its own
    /// huge-page allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        let g = self.blocks.freeze()?;
        Some(FrozenFile::new(Self::KIND, self.hasher, self.params().as_bytes(), vec![FrozenPart::Words32(g)]))
    }

    /// The parameter block of the file.
    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        p.u64(self.num_bytes() as u64).u64(self.items).u64(self.capacity).f64(self.target_fpr);
        p
    }

    /// Sets the item's eight bits in block `b`; returns whether one of them was clear.
    #[inline(always)]
    fn set_block(&mut self, b: usize, d: Digest) -> bool {
        let block = &mut self.blocks[b];
        let m = mask(d.h1 as u32);
        let mut new = false;
        for i in 0..8 {
            new |= block[i] & m[i] == 0;
            block[i] |= m[i];
        }
        new
    }

    /// [`SplitBlockBloom::set_block`] while a snapshot reads the blocks: the block's piece is
    /// saved for it first, and the write happens under its lock.
    #[cold]
    fn set_block_guarded(&mut self, g: &CowGuard, b: usize, d: Digest) -> bool {
        let mut w = g.writer();
        w.before_write_values(&self.blocks, b..b + 1);
        self.set_block(b, d)
    }
}

impl Filter for SplitBlockBloom {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// Uses `d.h1` only: it is the 64-bit hash Parquet specifies (XXH64 seed 0 with the default
    /// hasher), so `contains_hash(xxh64(plain_bytes, 0))` answers as a Parquet reader does.
    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        let block = &self.blocks[block_index(d.h1, self.blocks.len())];
        let m = mask(d.h1 as u32);
        let mut all = true;
        for i in 0..8 {
            all &= block[i] & m[i] != 0;
        }
        all
    }

    /// Inserts that changed the filter (or, after [`SplitBlockBloom::from_parquet_bytes`], the
    /// estimate from the bits set plus such inserts since).
    fn len(&self) -> usize {
        self.items.min(usize::MAX as u64) as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.num_bytes()
    }

    fn expected_fpr(&self) -> f64 {
        math::split_block_fpr(self.blocks.len() as f64, self.items as f64)
    }
}

impl Insert for SplitBlockBloom {
    /// Sets the item's eight bits (from `d.h1` only, see [`Filter::contains_digest`]); returns
    /// `true` if one of them was clear.
    #[inline]
    fn insert_digest(&mut self, d: Digest) -> bool {
        let b = block_index(d.h1, self.blocks.len());
        let new = match self.blocks.cow_guard() {
            None => self.set_block(b, d),
            Some(g) => self.set_block_guarded(&g, b, d),
        };
        self.items += new as u64;
        new
    }
}

impl Persist for SplitBlockBloom {
    const KIND: FilterKind = FilterKind::SplitBlockBloom;

    /// Parameters: bitset bytes `u64` (a positive multiple of 32), items `u64`, capacity `u64`,
    /// target FPR `f64`. Payload: the bitset exactly as Parquet stores it
    /// ([`SplitBlockBloom::to_parquet_bytes`]): blocks of eight little-endian `u32` words.
    fn to_bytes(&self) -> Vec<u8> {
        let p = self.params();
        let mut e = Encoder::new(Self::KIND, self.hasher, p.as_bytes(), self.num_bytes() as u64);
        self.write_bitset(e.payload());
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let num_bytes = r.u64("num_bytes")?;
        let items = r.u64("items")?;
        let capacity = r.u64("capacity")?;
        let target_fpr = r.fpr("target fpr")?;
        r.finish()?;
        if num_bytes == 0
            || num_bytes % BLOCK_BYTES as u64 != 0
            || num_bytes / BLOCK_BYTES as u64 > MAX_BLOCKS
        {
            return Err(FormatError::InvalidParams(
                "split-block bloom: size must be a positive multiple of 32 bytes, at most 2^32 blocks",
            )
            .into());
        }
        let payload = raw.payload();
        // decode() already checked that the payload fills the file, so this length check comes
        // before any allocation of `num_bytes`.
        if payload.len() as u64 != num_bytes {
            return Err(FormatError::Truncated {
                what: "split-block bitset",
                needed: num_bytes,
                available: payload.len() as u64,
            }
            .into());
        }
        let mut f = Self::from_parquet_bytes(payload)?;
        f.hasher = raw.hasher();
        f.items = items;
        f.capacity = capacity;
        f.target_fpr = target_fpr;
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::blocked_bloom::tests::digest;
    use parquet::bloom_filter::Sbbf;

    fn parquet_bitset(s: &Sbbf) -> Vec<u8> {
        let mut out = Vec::new();
        s.write_bitset(&mut out).unwrap();
        out
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            SplitBlockBloom::new(0, 0.01),
            Err(Error::InvalidParameter { name: "expected_items", .. })
        ));
        for p in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY] {
            assert!(matches!(SplitBlockBloom::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })));
            assert!(SplitBlockBloom::for_parquet(10, p).is_err());
        }
        assert!(matches!(SplitBlockBloom::new(usize::MAX, 1e-9), Err(Error::CapacityExceeded { .. })));
        for b in [0usize, 1, 31, 33, 48] {
            assert!(matches!(
                SplitBlockBloom::with_num_bytes(b),
                Err(Error::InvalidParameter { name: "num_bytes", .. })
            ));
            assert!(SplitBlockBloom::from_parquet_bytes(&vec![0; b]).is_err());
        }
        assert!(matches!(
            SplitBlockBloom::with_num_bytes_and_hasher((MAX_BLOCKS + 1) * 32, PARQUET_HASHER),
            Err(Error::CapacityExceeded { .. })
        ));
        assert!(SplitBlockBloom::with_num_bytes(96).is_ok(), "native sizes need not be powers of two");
    }

    #[test]
    fn sizes_match_the_parquet_crate() {
        for ndv in [1u64, 10, 100, 1000, 10_000, 123_457, 1_000_000] {
            for fpp in [0.5, 0.1, 0.05, 0.01, 0.001, 1e-4] {
                let theirs = Sbbf::new_with_ndv_fpp(ndv, fpp).unwrap();
                let ours = SplitBlockBloom::for_parquet(ndv as usize, fpp).unwrap();
                assert_eq!(ours.num_blocks(), theirs.num_blocks(), "ndv {ndv}, fpp {fpp}");
                assert!(ours.is_parquet_size());
                // `new` meets the target with the fewest whole blocks: at most the next power of
                // two above it, which is the writers' size or twice it.
                let native = SplitBlockBloom::new(ndv as usize, fpp).unwrap();
                let fpr = |blocks: usize| math::split_block_fpr(blocks as f64, ndv as f64);
                assert!(fpr(native.num_blocks()) <= fpp);
                assert!(native.num_blocks() == 1 || fpr(native.num_blocks() - 1) > fpp);
                let pow2 = native.num_blocks().next_power_of_two().max(theirs.num_blocks());
                let ratio = pow2 / theirs.num_blocks();
                assert!(ratio == 1 || ratio == 2, "ndv {ndv}, fpp {fpp}: {ratio}");
            }
        }
        // The 128 MiB clamp: for_parquet follows it, new does not (nor the power-of-two sizes).
        assert_eq!(SplitBlockBloom::for_parquet(200_000_000, 0.01).unwrap().num_bytes(), PARQUET_MAX_BYTES);
    }

    /// Values of every physical type, inserted into both implementations: the bitsets must be
    /// byte for byte the same, and both must answer every probe the same way.
    #[test]
    fn bit_identical_to_the_parquet_crate() {
        for (ndv, fpp) in [(100u64, 0.01), (5_000, 0.05), (50_000, 0.001)] {
            let mut theirs = Sbbf::new_with_ndv_fpp(ndv, fpp).unwrap();
            let mut ours = SplitBlockBloom::for_parquet(ndv as usize, fpp).unwrap();
            for i in 0..ndv as i64 {
                match i % 5 {
                    0 => {
                        theirs.insert(&(i * 7919));
                        ours.insert((i * 7919).to_le_bytes());
                    }
                    1 => {
                        let v = i as i32 ^ 0x5a5a;
                        theirs.insert(&v);
                        ours.insert(v.to_le_bytes());
                    }
                    2 => {
                        let v = i as f64 * 0.25;
                        theirs.insert(&v);
                        ours.insert(v.to_le_bytes());
                    }
                    3 => {
                        let s = format!("key-{i}");
                        theirs.insert(&s.as_str());
                        ours.insert(s.as_bytes());
                    }
                    _ => {
                        let b: Vec<u8> = (0..(i % 40) as u8).collect();
                        theirs.insert(b.as_slice());
                        ours.insert(&b);
                    }
                }
            }
            let bitset = parquet_bitset(&theirs);
            assert_eq!(ours.to_parquet_bytes(), bitset, "ndv {ndv}, fpp {fpp}");
            // Each side reads the other's bytes and agrees on members and non-members.
            let back = Sbbf::new(&ours.to_parquet_bytes());
            let mine = SplitBlockBloom::from_parquet_bytes(&bitset).unwrap();
            assert_eq!(mine.to_parquet_bytes(), bitset);
            for i in 0..200_000i64 {
                let v = i * 31 + 1;
                let t = theirs.check(&v);
                assert_eq!(t, ours.contains(v.to_le_bytes()));
                assert_eq!(t, back.check(&v));
                assert_eq!(t, mine.contains(v.to_le_bytes()));
            }
        }
    }

    #[test]
    fn insert_hash_is_the_raw_xxh64() {
        let mut a = SplitBlockBloom::with_num_bytes(1024).unwrap();
        let mut b = a.clone();
        a.insert("hello");
        assert!(b.insert_hash(xxhash_rust::xxh64::xxh64(b"hello", 0)));
        assert_eq!(a, b);
        assert!(a.contains_hash(xxhash_rust::xxh64::xxh64(b"hello", 0)));
        assert_eq!(a.hasher().hash64(b"hello"), xxhash_rust::xxh64::xxh64(b"hello", 0));
    }

    /// A bitset written by parquet-mr through Spark 3.2.1 for an INT64 column holding 0..=9
    /// (`parquet.bloom.filter.max.bytes = 32`), as published in the test suite of the parquet2
    /// crate: an independent writer, not the Rust reference.
    #[test]
    fn golden_parquet_mr_int64() {
        let spark: [u8; 32] = [
            24, 130, 24, 8, 134, 8, 68, 6, 2, 101, 128, 10, 64, 2, 38, 78, 114, 1, 64, 38, 1, 192, 194, 152,
            64, 70, 0, 36, 56, 121, 64, 0,
        ];
        let mut f = SplitBlockBloom::with_num_bytes(32).unwrap();
        for v in 0..10i64 {
            f.insert(v.to_le_bytes());
        }
        assert_eq!(f.to_parquet_bytes(), spark);
        let g = SplitBlockBloom::from_parquet_bytes(&spark).unwrap();
        assert!((0..10i64).all(|v| g.contains(v.to_le_bytes())));
        assert!(!g.contains(10i64.to_le_bytes()));
    }

    /// A bitset written by parquet-mr/Spark for a string column holding "a0" .. "a9", as used in
    /// the arrow-rs test suite: BYTE_ARRAY values are hashed without a length prefix.
    #[test]
    fn golden_parquet_mr_strings() {
        let spark: [u8; 32] = [
            200, 1, 80, 20, 64, 68, 8, 109, 6, 37, 4, 67, 144, 80, 96, 32, 8, 132, 43, 33, 0, 5, 99, 65, 2,
            0, 224, 44, 64, 78, 96, 4,
        ];
        let mut f = SplitBlockBloom::with_num_bytes(32).unwrap();
        for i in 0..10 {
            f.insert(format!("a{i}"));
        }
        assert_eq!(f.to_parquet_bytes(), spark);
    }

    /// Pins the layout with hand-picked hashes across four blocks (our own vector, checked
    /// against the parquet crate in `bit_identical_to_the_parquet_crate`).
    #[test]
    fn golden_small_vector() {
        let mut f = SplitBlockBloom::with_num_bytes(128).unwrap();
        for h in [0u64, 1, 0x4000_0000_8000_0001, 0xffff_ffff_ffff_ffff, 0x9e37_79b9_7f4a_7c15] {
            f.insert_hash(h);
        }
        let bytes = f.to_parquet_bytes();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, GOLDEN_HEX);
    }

    const GOLDEN_HEX: &str = concat!(
        "0101000001010000010002000100100001400000210000000100080001080000",
        "0000000100000001020000001000000000000040000020000800000000000008",
        "0000800000010000400000000000400040000000000000800000100000000002",
        "0000800000008000004000000008000000000200000000040010000000001000",
    );

    #[test]
    fn fpr_within_binomial_bound() {
        // A tight, non-power-of-two size from the planner's formula, so the FPR is near 1%.
        let n = 200_000u64;
        let blocks = math::split_block_blocks_for(n as f64, 0.01);
        let mut f = SplitBlockBloom::with_num_bytes(blocks as usize * 32).unwrap();
        for i in 0..n {
            f.insert(i.to_le_bytes());
        }
        assert!((0..n).all(|i| f.contains(i.to_le_bytes())));
        let probes = 2_000_000u64;
        let fp = (n..n + probes).filter(|i| f.contains(i.to_le_bytes())).count() as f64;
        let measured = fp / probes as f64;
        let p = math::split_block_fpr(blocks as f64, n as f64);
        assert!(p <= 0.01 && p > 0.0098, "p = {p}");
        let sigma = (p * (1.0 - p) / probes as f64).sqrt();
        assert!(measured <= p * 1.02 + 3.1 * sigma, "measured {measured}, expected {p}");
        assert!(measured >= p * 0.98 - 3.1 * sigma, "measured {measured}, expected {p}");
        let est = f.estimated_items();
        assert!((est - n as f64).abs() < 0.02 * n as f64, "estimate {est}");
    }

    #[test]
    fn round_trip_and_corruption() {
        let mut f = SplitBlockBloom::new(1000, 0.01).unwrap();
        for i in 0..700u32 {
            f.insert(i.to_string());
        }
        let bytes = f.to_bytes();
        let g = SplitBlockBloom::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n / 2] ^= 0x10;
        assert!(matches!(
            SplitBlockBloom::from_bytes(&bad),
            Err(Error::Format(FormatError::ChecksumMismatch { .. }))
        ));
        for cut in [0, 10, 40, n - 1] {
            assert!(SplitBlockBloom::from_bytes(&bytes[..cut]).is_err());
        }
        // Forged parameters behind a valid checksum.
        let forge = |num_bytes: u64, payload: &[u8]| {
            let mut p = ParamWriter::new();
            p.u64(num_bytes).u64(0).u64(10).f64(0.01);
            let mut e =
                Encoder::new(FilterKind::SplitBlockBloom, PARQUET_HASHER, p.as_bytes(), payload.len() as u64);
            e.payload().extend_from_slice(payload);
            e.finish()
        };
        assert!(SplitBlockBloom::from_bytes(&forge(64, &[0; 64])).is_ok());
        assert!(SplitBlockBloom::from_bytes(&forge(0, &[])).is_err());
        assert!(SplitBlockBloom::from_bytes(&forge(48, &[0; 48])).is_err());
        assert!(SplitBlockBloom::from_bytes(&forge(64, &[0; 32])).is_err());
        assert!(SplitBlockBloom::from_bytes(&forge(u64::MAX - 31, &[0; 32])).is_err());
        assert!(SplitBlockBloom::from_bytes(&forge(1 << 50, &[0; 32])).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let good = SplitBlockBloom::new(10, 0.01).unwrap().to_bytes();
        for len in 0..200usize {
            let mut v: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let _ = SplitBlockBloom::from_bytes(&v);
            let _ = SplitBlockBloom::from_parquet_bytes(&v);
            let keep = len.min(good.len());
            v[..keep].copy_from_slice(&good[..keep]);
            let _ = SplitBlockBloom::from_bytes(&v);
        }
    }

    /// A filter of 8 MiB (huge storage on Linux, so it freezes: 32 copy-on-write pieces) with
    /// 20,000 items.
    fn big_split_block() -> SplitBlockBloom {
        let mut f = SplitBlockBloom::with_num_bytes(8 << 20).unwrap();
        let mut st = 11;
        for _ in 0..20_000 {
            f.insert_digest(digest(&mut st));
        }
        f
    }

    /// Each kind of write, alone while the filter is frozen, changes the live filter and leaves
    /// the frozen file as it was at the freeze, whether the filter is dropped before the file is
    /// written or not: one insert, a batch insert, a clear.
    #[test]
    fn every_write_alone_keeps_the_frozen_file() {
        assert!(SplitBlockBloom::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let mut st = 5;
        let one = digest(&mut st);
        let batch: Vec<Digest> = (0..5000).map(|_| digest(&mut st)).collect();
        let ops: Vec<crate::format::NamedWrite<'_, SplitBlockBloom>> = vec![
            ("insert", Box::new(|f: &mut SplitBlockBloom| assert!(f.insert_digest(one)))),
            ("batch insert", Box::new(|f: &mut SplitBlockBloom| assert!(f.insert_digests(&batch) > 4900))),
            ("clear", Box::new(|f: &mut SplitBlockBloom| f.clear())),
        ];
        crate::format::assert_each_write_keeps_frozen(
            &big_split_block,
            |f| f.to_bytes(),
            SplitBlockBloom::freeze,
            &ops,
        );
        let f = big_split_block();
        drop(f.freeze());
        assert!(f.freeze().is_some(), "once written, the frozen file lets go");
    }

    /// While a snapshot reads the filter, an insert copies aside only the piece of its block:
    /// the pieces saved are exactly those where the live blocks now differ from the frozen ones.
    #[test]
    fn an_insert_during_a_freeze_copies_only_the_piece_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        use crate::bits::COW_PIECE;
        let mut f = big_split_block();
        let at_freeze = f.to_parquet_bytes();
        let want = f.to_bytes();
        let frozen = f.freeze().unwrap();
        let g = frozen.guard(0);
        assert_eq!(g.len() / COW_PIECE, 32);
        let changed = |f: &SplitBlockBloom| {
            let live = f.to_parquet_bytes();
            crate::bits::pieces_differing(&live, &at_freeze).len()
        };
        let mut st = 99;
        for i in 0..20 {
            let saved = g.saved_pieces();
            assert!(f.insert_digest(digest(&mut st)));
            assert!(g.saved_pieces() <= saved + 1, "one block written, one piece at most");
            assert_eq!(g.saved_pieces(), changed(&f), "after insert {i}");
        }
        assert!(g.saved_pieces() > 10, "20 random blocks of 32 pieces hit many: {}", g.saved_pieces());
        assert!(frozen.to_vec() == want, "the frozen file is the filter at the freeze");
    }
}
