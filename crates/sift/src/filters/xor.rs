//! Xor filter with 8-bit fingerprints: a static filter, built once from a set.
//!
//! Graf & Lemire, "Xor filters: faster and smaller than Bloom and cuckoo filters", ACM JEA 25, 2020.
//!
//! * **Idea**: an array of `⌊1.23·n⌋ + 32` 8-bit fingerprints in three equal blocks. Each key names
//!   one slot per block; the array is solved by peeling ([`crate::filters::peel`]) so that the xor
//!   of a key's three slots is the key's fingerprint. A query is three loads and two xors.
//! * **FPR**: `2^-8 ≈ 0.39%`.
//! * **Space**: `1.23·8 ≈ 9.84` bits per key ([`crate::math::xor_bits_per_key`]).
//!   [`crate::BinaryFuse8`] has the same FPR in 9.0 bits per key and builds faster: prefer it; the
//!   xor filter is here for compatibility with systems that use it.
//! * **Hashing**: `Digest::h1` of the filter's [`Hasher`] (XXH3 by default), mixed with a seed
//!   found at construction and stored in the file.
//! * **Limits**: static (no insert, no delete); at most 2^32 slots; construction needs about
//!   20.5 bytes of scratch memory per key and tolerates duplicate items.
//!
//! ```
//! use sift::prelude::*;
//! use sift::Xor8;
//!
//! let keys: Vec<String> = (0..50_000).map(|i| format!("user:{i}")).collect();
//! let f = Xor8::build(&keys)?;
//! assert!(keys.iter().all(|k| f.contains(k)));
//! // 200k non-members: FPR 2^-8, 99.9% binomial bound 0.43%.
//! let fp = (0..200_000).filter(|i| f.contains(format!("other:{i}"))).count();
//! assert!(fp < 860, "{fp} false positives");
//! # Ok::<(), sift::Error>(())
//! ```

use crate::error::{Error, FormatError, Result};
use crate::filters::peel::{mix, xor_positions, Fingerprint, HashSource, ItemHashes, Peeler, XorLayout};
use crate::format::{decode_verified, Encoder, FilterKind, ParamWriter};
use crate::hash::{Digest, Hasher};
use crate::traits::{Filter, Persist};
use crate::traits_static::StaticFilter;

/// An xor filter with 8-bit fingerprints. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xor8 {
    fingerprints: Vec<u8>,
    /// Slots per block (a third of the array).
    block: u64,
    seed: u64,
    hasher: Hasher,
    items: u64,
}

const ATTEMPTS_PER_LAYOUT: u32 = 16;
const LAYOUTS: u32 = 8;

impl Xor8 {
    /// Builds the filter of `items` with `hasher`. Duplicates are allowed.
    pub fn build_with<T: AsRef<[u8]>>(items: &[T], hasher: Hasher) -> Result<Self> {
        <Self as StaticFilter>::build_with_hasher(items, hasher)
    }

    /// Builds the filter from the 64-bit hashes `hasher.hash64(item)` (duplicates allowed).
    pub fn from_hashes_with(hashes: &[u64], hasher: Hasher) -> Result<Self> {
        Self::from_source(hashes, hasher)
    }

    fn from_source<S: HashSource + ?Sized>(src: &S, hasher: Hasher) -> Result<Self> {
        let n = src.count();
        if n == 0 {
            return Ok(Xor8 { fingerprints: Vec::new(), block: 0, seed: 0, hasher, items: 0 });
        }
        // Graf & Lemire 2020, §3: capacity ⌊1.23·n⌋ + 32, three blocks.
        let capacity = (1.23 * n as f64).floor() + 32.0;
        let mut block = (capacity / 3.0).ceil() as u64;
        if block * 3 > u32::MAX as u64 {
            return Err(Error::CapacityExceeded {
                requested_bytes: block as u128 * 3,
                limit_bytes: u32::MAX as u128,
            });
        }
        let mut peeler = Peeler::new(src);
        let mut fps: Vec<u8> = Vec::new();
        for _ in 0..LAYOUTS {
            let layout = XorLayout { block };
            if let Some(p) = peeler.run::<u8, 3, _>(&layout, ATTEMPTS_PER_LAYOUT, &mut fps)? {
                return Ok(Xor8 { fingerprints: fps, block, seed: p.seed, hasher, items: p.distinct as u64 });
            }
            block += block / 16 + 1;
        }
        Err(Error::ConstructionFailed {
            attempts: peeler.attempts(),
            reason: "xor filter peeling did not complete",
        })
    }

    /// The seed mixed into the item hashes (stored in the file).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The fingerprint array (three blocks).
    pub fn fingerprints(&self) -> &[u8] {
        &self.fingerprints
    }

    /// Bits of storage per distinct key.
    pub fn bits_per_key(&self) -> f64 {
        (self.fingerprints.len() * 8) as f64 / self.items.max(1) as f64
    }

    #[inline(always)]
    fn query(&self, h: u64) -> bool {
        let fp = &self.fingerprints;
        if fp.is_empty() {
            return false;
        }
        let x = mix(h, self.seed);
        // Positions are below 3·block = fp.len() by construction and by validation.
        let [a, b, c] = xor_positions(x, self.block);
        u8::from_key(x) == fp[a] ^ fp[b] ^ fp[c]
    }
}

impl Filter for Xor8 {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    #[inline]
    fn contains_digest(&self, digest: Digest) -> bool {
        self.query(digest.h1)
    }

    #[inline]
    fn contains_hash(&self, hash: u64) -> bool {
        self.query(hash)
    }

    fn len(&self) -> usize {
        self.items as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.fingerprints.len()
    }

    fn expected_fpr(&self) -> f64 {
        if self.items == 0 {
            0.0
        } else {
            1.0 / 256.0
        }
    }
}

impl StaticFilter for Xor8 {
    /// Hashes each item straight into the key array (no vector of hashes first).
    fn build_with_hasher<T: AsRef<[u8]>>(items: &[T], hasher: Hasher) -> Result<Self> {
        Self::from_source(&ItemHashes { items, hasher }, hasher)
    }

    fn build_from_hashes_with_hasher(hashes: &[u64], hasher: Hasher) -> Result<Self> {
        Self::from_hashes_with(hashes, hasher)
    }
}

impl Persist for Xor8 {
    const KIND: FilterKind = FilterKind::Xor8;

    /// Kind `Xor8` (18). Parameters (24 bytes): block length `u64` (slots per block; the array has
    /// `3 · block` slots, at most 2^32; 0 when empty), seed `u64` (mixed into every item hash),
    /// items `u64` (distinct keys). Payload: the `3 · block` one-byte fingerprints.
    fn to_bytes(&self) -> Vec<u8> {
        let mut p = ParamWriter::new();
        p.u64(self.block).u64(self.seed).u64(self.items);
        let mut e = Encoder::new(Self::KIND, self.hasher, p.as_bytes(), self.fingerprints.len() as u64);
        e.payload().extend_from_slice(&self.fingerprints);
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let block = r.u64("block length")?;
        let seed = r.u64("seed")?;
        let items = r.u64("items")?;
        r.finish()?;
        if block > u32::MAX as u64 / 3 {
            return Err(FormatError::InvalidParams("xor8: more than 2^32 slots").into());
        }
        let slots = block * 3;
        if items > slots || (block == 0) != (items == 0) {
            return Err(FormatError::InvalidParams("xor8: item count inconsistent with the array").into());
        }
        let payload = raw.payload();
        if payload.len() as u64 != slots {
            return Err(FormatError::Truncated {
                what: "xor8 fingerprints",
                needed: slots,
                available: payload.len() as u64,
            }
            .into());
        }
        let mut fingerprints: Vec<u8> = Vec::new();
        fingerprints
            .try_reserve_exact(payload.len())
            .map_err(|_| Error::OutOfMemory { bytes: payload.len() })?;
        fingerprints.extend_from_slice(payload);
        Ok(Xor8 { fingerprints, block, seed, hasher: raw.hasher(), items })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: u64, salt: u64) -> Vec<u64> {
        (0..n).map(|i| mix(i, salt)).collect()
    }

    #[test]
    fn no_false_negatives_fpr_and_size() {
        let hashes = keys(1_000_000, 11);
        let f = Xor8::build_from_hashes(&hashes).unwrap();
        assert_eq!(f.len(), 1_000_000);
        assert!(hashes.iter().all(|&h| f.contains_hash(h)));
        let probes = 2_000_000u64;
        let fp = (0..probes).filter(|&i| f.contains_hash(mix(i, 1 << 62))).count() as f64;
        let p = 1.0 / 256.0;
        let bound = probes as f64 * (p + 3.1 * (p * (1.0 - p) / probes as f64).sqrt());
        assert!(fp < bound, "{fp} false positives, bound {bound}");
        assert!(f.bits_per_key() < 9.85, "bits/key {}", f.bits_per_key());
    }

    #[test]
    fn small_sets_duplicates_and_empty() {
        for n in 1..200 {
            let h = keys(n, 5);
            let f = Xor8::build_from_hashes(&h).unwrap();
            assert!(h.iter().all(|&x| f.contains_hash(x)), "n = {n}");
        }
        let mut items: Vec<&str> = vec!["a", "b", "c", "a", "a", "b"];
        items.extend(std::iter::repeat_n("z", 1000));
        let f = Xor8::build(&items).unwrap();
        assert_eq!(f.len(), 4);
        assert!(items.iter().all(|i| f.contains(i)));
        let e = Xor8::build::<&str>(&[]).unwrap();
        assert!(e.is_empty() && !e.contains("a") && e.size_in_bytes() == 0);
        assert_eq!(Xor8::from_bytes(&e.to_bytes()).unwrap(), e);
    }

    #[test]
    fn round_trip_and_corruption() {
        let f = Xor8::build_from_hashes(&keys(4000, 9)).unwrap();
        let bytes = f.to_bytes();
        assert_eq!(Xor8::from_bytes(&bytes).unwrap(), f);
        for cut in 0..bytes.len() {
            assert!(Xor8::from_bytes(&bytes[..cut]).is_err());
        }
        let mut bad = bytes.clone();
        bad[60] ^= 4;
        assert!(Xor8::from_bytes(&bad).is_err());
        // A consistent CRC over inconsistent parameters: the validation catches it.
        for (at, v) in [(0usize, 1u64 << 40), (0, 5), (16, 1 << 50)] {
            let mut b = bytes.clone();
            b[32 + at..40 + at].copy_from_slice(&v.to_le_bytes());
            let end = b.len() - 4;
            let crc = crc32c::crc32c(&b[..end]);
            b[end..].copy_from_slice(&crc.to_le_bytes());
            assert!(matches!(Xor8::from_bytes(&b), Err(Error::Format(_))), "patch at {at}");
        }
    }
}
