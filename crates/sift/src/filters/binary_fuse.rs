//! Binary fuse filters: the smallest fast static filters, built once from a set.
//!
//! Graf & Lemire, "Binary fuse filters: fast and smaller than xor filters", ACM JEA 27, 2022.
//!
//! * **Idea**: an array of `f`-bit fingerprints cut into segments of a power-of-two length. Each
//!   key names one slot in each of 3 (or 4) consecutive segments; the array is solved (by
//!   peeling, see [`crate::filters::peel`]) so that the xor of a key's slots is the key's
//!   fingerprint. A query is 3 (or 4) loads and xors, no branch on the data.
//! * **FPR**: `2^-f`: a non-member's fingerprint matches the xor of its slots by chance
//!   (0.39% for [`BinaryFuse8`], 0.0015% for [`BinaryFuse16`]).
//! * **Space**: `1.125·f` bits per key 3-wise, `1.075·f` 4-wise, for large sets
//!   ([`crate::math::fuse_size_factor`]; small sets need more room): 9.04 and 8.62 bits per key
//!   for `BinaryFuse8` at a million keys, against 9.84 for [`crate::Xor8`] and 9.6 for a Bloom
//!   filter at a *higher* FPR (1%).
//! * **Parameters**: the fingerprint width (the type) and the [`Arity`]: 4-wise is 4.5% smaller,
//!   slower to build and does one more load per query.
//! * **Hashing**: the item's 64-bit hash (`Digest::h1` of the filter's [`Hasher`], XXH3 by
//!   default) is mixed with a per-build seed (MurmurHash3's finaliser); the seed is the first of a
//!   deterministic sequence for which peeling succeeds and is stored in the file.
//! * **Limits**: static: no insert, no delete (rebuild instead); at most 2^32 slots. Construction
//!   needs about 19 bytes of scratch memory per key and tolerates duplicate items.
//!
//! ```
//! use sift::prelude::*;
//! use sift::BinaryFuse8;
//!
//! let keys: Vec<[u8; 4]> = (0..100_000u32).map(|i| i.to_le_bytes()).collect();
//! let f = BinaryFuse8::build(&keys)?;
//! assert!(keys.iter().all(|k| f.contains(k)));
//! // 200k non-members: FPR 2^-8 = 0.39%, 99.9% binomial bound 0.39% + 3.1·sqrt(p(1-p)/N) = 0.43%.
//! let fp = (100_000..300_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 860, "{fp} false positives");
//! assert!(f.size_in_bytes() * 8 < 100_000 * 10);
//! # Ok::<(), sift::Error>(())
//! ```

use crate::error::{Error, FormatError, Result};
use crate::filters::peel::{mix, Fingerprint, FuseLayout, HashSource, ItemHashes, Peeler};
use crate::format::{decode_verified, Encoder, FilterKind, ParamWriter};
use crate::hash::{Digest, Hasher};
use crate::math;
use crate::traits::{Filter, Persist};
use crate::traits_static::StaticFilter;

/// Largest segment length (Graf & Lemire 2022 cap it at 2^18 slots).
pub const MAX_SEGMENT_LENGTH: u32 = 1 << 18;

/// How many slots each key uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Arity {
    /// Three slots: 1.125 slots per key, 3 loads per query (the paper's default).
    #[default]
    Three = 3,
    /// Four slots: 1.075 slots per key, 4 loads per query.
    Four = 4,
}

impl Arity {
    /// 3 or 4.
    pub const fn get(self) -> u32 {
        self as u32
    }
}

/// A binary fuse filter with fingerprints of type `F` (`u8` or `u16`). See the
/// [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryFuse<F: Fingerprint> {
    fingerprints: Vec<F>,
    seed: u64,
    segment_length: u32,
    segment_count: u32,
    /// `segment_count · segment_length`: the range of a key's first slot.
    segment_count_length: u64,
    arity: Arity,
    hasher: Hasher,
    items: u64,
}

/// Binary fuse filter with 8-bit fingerprints: FPR 2^-8 ≈ 0.39%, ≈ 9.0 bits per key (8.6 4-wise).
pub type BinaryFuse8 = BinaryFuse<u8>;
/// Binary fuse filter with 16-bit fingerprints: FPR 2^-16 ≈ 0.0015%, ≈ 18 bits per key.
pub type BinaryFuse16 = BinaryFuse<u16>;

/// Seeds tried per layout before the array is enlarged.
const ATTEMPTS_PER_LAYOUT: u32 = 16;
/// Layouts tried (each a little larger) before giving up.
const LAYOUTS: u32 = 8;

impl<F: Fingerprint> BinaryFuse<F> {
    /// Builds the filter of `items` with the given arity and hasher.
    pub fn build_with<T: AsRef<[u8]>>(items: &[T], arity: Arity, hasher: Hasher) -> Result<Self> {
        // Each item is hashed straight into its bucketed place (no vector of hashes first).
        Self::from_source(&ItemHashes { items, hasher }, arity, hasher)
    }

    /// Builds the filter from the 64-bit hashes `hasher.hash64(item)` of the items (duplicates
    /// allowed), with the given arity.
    pub fn from_hashes_with(hashes: &[u64], arity: Arity, hasher: Hasher) -> Result<Self> {
        Self::from_source(hashes, arity, hasher)
    }

    fn from_source<S: HashSource + ?Sized>(src: &S, arity: Arity, hasher: Hasher) -> Result<Self> {
        let n = src.count();
        if n == 0 {
            return Ok(BinaryFuse {
                fingerprints: Vec::new(),
                seed: 0,
                segment_length: 0,
                segment_count: 0,
                segment_count_length: 0,
                arity,
                hasher,
                items: 0,
            });
        }
        let a = arity.get();
        let nf = n as f64;
        let len = math::fuse_segment_length(a, nf);
        let capacity = (nf * math::fuse_size_factor(a, nf)).ceil();
        let count = ((capacity / len as f64).ceil() - (a - 1) as f64).max(1.0);
        if count * len as f64 + (a as f64 - 1.0) * len as f64 > u32::MAX as f64 {
            return Err(Error::CapacityExceeded {
                requested_bytes: (capacity * (F::BITS / 8) as f64) as u128,
                limit_bytes: u32::MAX as u128 * (F::BITS / 8) as u128,
            });
        }
        let mut layout = FuseLayout { len, count: count as u32 };
        let mut peeler = Peeler::new(src);
        let mut fps: Vec<F> = Vec::new();
        for _ in 0..LAYOUTS {
            let peeled = match arity {
                Arity::Three => peeler.run::<F, 3, _>(&layout, ATTEMPTS_PER_LAYOUT, &mut fps)?,
                Arity::Four => peeler.run::<F, 4, _>(&layout, ATTEMPTS_PER_LAYOUT, &mut fps)?,
            };
            if let Some(p) = peeled {
                return Ok(BinaryFuse {
                    fingerprints: fps,
                    seed: p.seed,
                    segment_length: layout.len,
                    segment_count: layout.count,
                    segment_count_length: layout.count as u64 * layout.len as u64,
                    arity,
                    hasher,
                    items: p.distinct as u64,
                });
            }
            // Peeling keeps failing (tiny sets, where the size factor is least accurate): give
            // it more room, about 6% at a time.
            layout.count += (layout.count / 16).max(1);
        }
        Err(Error::ConstructionFailed {
            attempts: peeler.attempts(),
            reason: "binary fuse peeling did not complete",
        })
    }

    /// Slots per key (3 or 4).
    pub fn arity(&self) -> Arity {
        self.arity
    }

    /// The seed mixed into the item hashes (found at construction, stored in the file).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Length of a segment (a power of two; 0 for an empty filter).
    pub fn segment_length(&self) -> u32 {
        self.segment_length
    }

    /// Number of segments a key's first slot can fall in.
    pub fn segment_count(&self) -> u32 {
        self.segment_count
    }

    /// The fingerprint array.
    pub fn fingerprints(&self) -> &[F] {
        &self.fingerprints
    }

    /// Bits of storage per distinct key.
    pub fn bits_per_key(&self) -> f64 {
        (self.size_in_bytes() * 8) as f64 / self.items.max(1) as f64
    }

    #[inline(always)]
    fn query(&self, h: u64) -> bool {
        let fp = &self.fingerprints;
        if fp.is_empty() {
            return false;
        }
        let x = mix(h, self.seed);
        let f = F::from_key(x);
        // The positions are below the array length by construction (and by validation in
        // `from_bytes`), so the bounds checks below never fail; they are predicted perfectly.
        match self.arity {
            Arity::Three => {
                let [a, b, c] = FuseLayout::positions::<3>(self.segment_length, self.segment_count_length, x);
                f == fp[a] ^ fp[b] ^ fp[c]
            }
            Arity::Four => {
                let [a, b, c, d] =
                    FuseLayout::positions::<4>(self.segment_length, self.segment_count_length, x);
                f == fp[a] ^ fp[b] ^ fp[c] ^ fp[d]
            }
        }
    }
}

impl<F: Fingerprint> Filter for BinaryFuse<F> {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    #[inline]
    fn contains_digest(&self, digest: Digest) -> bool {
        self.query(digest.h1)
    }

    /// Same answer as the provided method; hashes with `Hasher::digest_inline` so that a
    /// query is one inlined XXH3 and 3 (4) loads.
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool
    where
        Self: Sized,
    {
        self.query(self.hasher.digest_inline(item.as_ref()).h1)
    }

    #[inline]
    fn contains_hash(&self, hash: u64) -> bool {
        self.query(hash)
    }

    fn len(&self) -> usize {
        self.items as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.fingerprints.len() * core::mem::size_of::<F>()
    }

    fn expected_fpr(&self) -> f64 {
        if self.items == 0 {
            0.0
        } else {
            0.5f64.powi(F::BITS as i32)
        }
    }
}

impl<F: Fingerprint> StaticFilter for BinaryFuse<F> {
    fn build_with_hasher<T: AsRef<[u8]>>(items: &[T], hasher: Hasher) -> Result<Self> {
        Self::build_with(items, Arity::Three, hasher)
    }

    fn build_from_hashes_with_hasher(hashes: &[u64], hasher: Hasher) -> Result<Self> {
        Self::from_hashes_with(hashes, Arity::Three, hasher)
    }
}

/// The file kind of a fingerprint width.
fn kind_of<F: Fingerprint>() -> FilterKind {
    if F::BITS == 8 {
        FilterKind::BinaryFuse8
    } else {
        FilterKind::BinaryFuse16
    }
}

impl<F: Fingerprint> Persist for BinaryFuse<F> {
    const KIND: FilterKind = if F::BITS == 8 { FilterKind::BinaryFuse8 } else { FilterKind::BinaryFuse16 };

    /// Kinds `BinaryFuse8` (19) and `BinaryFuse16` (20). Parameters (32 bytes): arity `u8` (3 or
    /// 4), fingerprint bits `u8` (8 or 16, as the kind says), reserved `u16` = 0, segment length
    /// `u32` (a power of two, 4 to 2^18; 0 when empty), segment count `u32` (0 when empty),
    /// reserved `u32` = 0, seed `u64` (mixed into every item hash), items `u64` (distinct keys).
    /// Payload: `(segment count + arity - 1) · segment length` fingerprints, little-endian
    /// (1 or 2 bytes each); empty for an empty filter.
    fn to_bytes(&self) -> Vec<u8> {
        debug_assert_eq!(Self::KIND, kind_of::<F>());
        let mut p = ParamWriter::new();
        p.u8(self.arity.get() as u8)
            .u8(F::BITS as u8)
            .u16(0)
            .u32(self.segment_length)
            .u32(self.segment_count)
            .u32(0)
            .u64(self.seed)
            .u64(self.items);
        let mut e = Encoder::new(Self::KIND, self.hasher, p.as_bytes(), self.size_in_bytes() as u64);
        let out = e.payload();
        for &f in &self.fingerprints {
            f.write_le(out);
        }
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let arity = r.u8("arity")?;
        let bits = r.u8("fingerprint bits")?;
        let reserved = r.u16("reserved")?;
        let segment_length = r.u32("segment length")?;
        let segment_count = r.u32("segment count")?;
        let reserved2 = r.u32("reserved")?;
        let seed = r.u64("seed")?;
        let items = r.u64("items")?;
        r.finish()?;
        let bad = |why: &'static str| -> Error { FormatError::InvalidParams(why).into() };
        let arity = match arity {
            3 => Arity::Three,
            4 => Arity::Four,
            _ => return Err(bad("binary fuse: arity must be 3 or 4")),
        };
        if bits as u32 != F::BITS || reserved != 0 || reserved2 != 0 {
            return Err(bad("binary fuse: fingerprint width or reserved fields wrong"));
        }
        let width = (F::BITS / 8) as u64;
        let payload = raw.payload();
        let slots = if segment_count == 0 {
            if segment_length != 0 || items != 0 {
                return Err(bad("binary fuse: an empty filter has no segments and no items"));
            }
            0
        } else {
            if !segment_length.is_power_of_two() || !(4..=MAX_SEGMENT_LENGTH).contains(&segment_length) {
                return Err(bad("binary fuse: segment length must be a power of two from 4 to 2^18"));
            }
            let slots = (segment_count as u64 + arity.get() as u64 - 1) * segment_length as u64;
            if slots > u32::MAX as u64 {
                return Err(bad("binary fuse: more than 2^32 slots"));
            }
            if items > slots {
                return Err(bad("binary fuse: more items than slots"));
            }
            slots
        };
        if payload.len() as u64 != slots * width {
            return Err(FormatError::Truncated {
                what: "binary fuse fingerprints",
                needed: slots * width,
                available: payload.len() as u64,
            }
            .into());
        }
        let mut fingerprints: Vec<F> = crate::bits::try_zeroed(slots as usize)?;
        for (f, chunk) in fingerprints.iter_mut().zip(payload.chunks_exact(width as usize)) {
            *f = F::read_le(chunk);
        }
        Ok(BinaryFuse {
            fingerprints,
            seed,
            segment_length,
            segment_count,
            segment_count_length: segment_count as u64 * segment_length as u64,
            arity,
            hasher: raw.hasher(),
            items,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 99.9% one-sided binomial upper bound on the false positives among `trials` probes.
    fn fp_bound(p: f64, trials: f64) -> f64 {
        trials * (p + 3.1 * (p * (1.0 - p) / trials).sqrt())
    }

    fn keys(n: u64, salt: u64) -> Vec<u64> {
        (0..n).map(|i| crate::filters::peel::mix(i, salt)).collect()
    }

    fn check_filter<F: Fingerprint>(n: u64, arity: Arity, probes: u64) -> BinaryFuse<F> {
        let hashes = keys(n, 7);
        let f = BinaryFuse::<F>::from_hashes_with(&hashes, arity, Hasher::default()).unwrap();
        assert_eq!(f.len() as u64, n);
        assert!(hashes.iter().all(|&h| f.contains_hash(h)), "false negative");
        if probes > 0 {
            let fp = (0..probes).filter(|&i| f.contains_hash(mix(i, 1 << 62))).count();
            let p = f.expected_fpr();
            assert!((fp as f64) < fp_bound(p, probes as f64), "{fp} false positives in {probes}, p = {p}");
        }
        f
    }

    #[test]
    fn no_false_negatives_and_fpr_8() {
        let f = check_filter::<u8>(1_000_000, Arity::Three, 2_000_000);
        assert!(f.bits_per_key() <= 9.05, "3-wise bits/key {}", f.bits_per_key());
        let f = check_filter::<u8>(1_000_000, Arity::Four, 2_000_000);
        assert!(f.bits_per_key() <= 8.7, "4-wise bits/key {}", f.bits_per_key());
    }

    #[test]
    fn no_false_negatives_and_fpr_16() {
        // p = 2^-16: 4M probes expect 61 false positives.
        let f = check_filter::<u16>(1_000_000, Arity::Three, 4_000_000);
        assert!(f.bits_per_key() <= 18.1, "bits/key {}", f.bits_per_key());
        check_filter::<u16>(200_000, Arity::Four, 4_000_000);
    }

    #[test]
    fn every_small_size_builds() {
        for n in (1..300).chain([1000, 4095, 4096, 4097, 65_537]) {
            check_filter::<u8>(n, Arity::Three, 0);
            check_filter::<u8>(n, Arity::Four, 0);
        }
    }

    #[test]
    fn duplicates_are_tolerated() {
        let mut items: Vec<String> = (0..50_000).map(|i| format!("key{i}")).collect();
        items.extend((0..50_000).step_by(3).map(|i| format!("key{i}")));
        items.extend((0..100).map(|_| "hot".to_string()));
        for arity in [Arity::Three, Arity::Four] {
            let f = BinaryFuse8::build_with(&items, arity, Hasher::default()).unwrap();
            assert_eq!(f.len(), 50_001);
            assert!(items.iter().all(|k| f.contains(k)));
        }
        // All equal, and adversarially many: the sorted, deduplicated retry handles it.
        let same = vec![42u64; 10_000];
        let f = BinaryFuse16::build_from_hashes(&same).unwrap();
        assert_eq!(f.len(), 1);
        assert!(f.contains_hash(42));
    }

    #[test]
    fn empty_set_contains_nothing() {
        let f = BinaryFuse8::build::<&[u8]>(&[]).unwrap();
        assert!(f.is_empty());
        assert_eq!(f.size_in_bytes(), 0);
        assert!(!f.contains("anything"));
        assert!((0..1000u64).all(|h| !f.contains_hash(h)));
        let g = BinaryFuse8::from_bytes(&f.to_bytes()).unwrap();
        assert_eq!(f, g);
    }

    #[test]
    fn build_paths_agree() {
        let items: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
        let hasher = Hasher::new(crate::HashKind::Xxh3_64, 99);
        let a = BinaryFuse16::build_with_hasher(&items, hasher).unwrap();
        let hashes: Vec<u64> = items.iter().map(|i| hasher.hash64(i.as_bytes())).collect();
        let b = BinaryFuse16::build_from_hashes_with_hasher(&hashes, hasher).unwrap();
        assert_eq!(a, b);
        assert!(items.iter().all(|i| a.contains(i)));
    }

    #[test]
    fn round_trip_and_corruption() {
        for arity in [Arity::Three, Arity::Four] {
            let f = BinaryFuse8::from_hashes_with(&keys(5000, 1), arity, Hasher::default()).unwrap();
            let bytes = f.to_bytes();
            assert_eq!(BinaryFuse8::from_bytes(&bytes).unwrap(), f);
            assert!(matches!(
                BinaryFuse16::from_bytes(&bytes),
                Err(Error::Format(FormatError::WrongKind { .. }))
            ));
            for cut in [0, 10, 40, bytes.len() / 2, bytes.len() - 1] {
                assert!(BinaryFuse8::from_bytes(&bytes[..cut]).is_err());
            }
            let mut bad = bytes.clone();
            bad[100] ^= 1;
            assert!(BinaryFuse8::from_bytes(&bad).is_err());
        }
        let g = BinaryFuse16::from_hashes_with(&keys(3000, 2), Arity::Four, Hasher::default()).unwrap();
        assert_eq!(BinaryFuse16::from_bytes(&g.to_bytes()).unwrap(), g);
    }

    /// Re-encodes a filter file with a patched parameter block and a fresh CRC, so that the
    /// parameter validation (not the checksum) has to catch the problem.
    fn patched(bytes: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        b[32 + at..32 + at + value.len()].copy_from_slice(value);
        let end = b.len() - 4;
        let crc = crc32c::crc32c(&b[..end]);
        b[end..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn inconsistent_parameters_are_errors_not_panics() {
        let f = BinaryFuse8::from_hashes_with(&keys(2000, 3), Arity::Three, Hasher::default()).unwrap();
        let bytes = f.to_bytes();
        let cases: [(usize, &[u8]); 8] = [
            (0, &[5]),                        // arity
            (0, &[4]),                        // arity 4 changes the slot count
            (1, &[16]),                       // width
            (2, &[1, 0]),                     // reserved
            (4, &3u32.to_le_bytes()),         // segment length not a power of two
            (4, &(1u32 << 20).to_le_bytes()), // segment length too large
            (8, &u32::MAX.to_le_bytes()),     // segment count: slots overflow / mismatch
            (24, &u64::MAX.to_le_bytes()),    // more items than slots
        ];
        for (at, v) in cases {
            let b = patched(&bytes, at, v);
            assert!(matches!(BinaryFuse8::from_bytes(&b), Err(Error::Format(_))), "patch at {at} accepted");
        }
    }

    #[test]
    fn bad_input_never_panics() {
        let f = BinaryFuse8::from_hashes_with(&keys(300, 4), Arity::Four, Hasher::default()).unwrap();
        let bytes = f.to_bytes();
        let mut state = 0x1234_5678u64;
        for _ in 0..2000 {
            let mut b = bytes.clone();
            state = mix(state, 1);
            let i = (state % b.len() as u64) as usize;
            b[i] = (state >> 32) as u8;
            let _ = BinaryFuse8::from_bytes(&b);
            let _ = BinaryFuse8::from_bytes(&b[..i]);
        }
    }
}
