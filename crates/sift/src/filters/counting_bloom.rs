//! Counting Bloom filter: a classic Bloom filter whose bits are 4-bit counters, so items can be
//! removed.
//!
//! Fan, Cao, Almeida & Broder, "Summary cache: a scalable wide-area web cache sharing protocol",
//! IEEE/ACM ToN 8(3), 2000, §V.
//!
//! * **Idea**: inserting an item increments its `k` counters, removing it decrements them, and an
//!   item is reported present when all its counters are non-zero. The counters sit at exactly the
//!   probe positions of the classic [`crate::Bloom`] (enhanced double hashing on the [`Digest`],
//!   multiply-shift to `0..m`), so a counting filter "is" a Bloom filter whose bit `x` is
//!   `counter[x] > 0`.
//! * **FPR**: the Bloom formula `p ≈ (1 - e^(-k·n/m))^k` ([`crate::math::bloom_fpr`]), with `n`
//!   the items currently in the filter (inserts minus removes).
//! * **Space**: `m` and `k` as the classic Bloom filter, 4 bits per counter, so 4× the memory:
//!   `4 · 1.44 · log2(1/p)` bits per key (38.3 at 1%).
//! * **Overflow**: a counter that reaches 15 saturates and sticks there forever: it is never
//!   incremented past 15 and never decremented. A saturated counter can therefore never drop to
//!   zero, so overflow can never cause a false negative; it only keeps the positions of removed
//!   items set (a slightly higher FPR afterwards). With 4-bit counters at optimal load, the chance
//!   that any counter ever reaches 16 is about `1.37e-15 · m` (Fan et al. 2000, §V.C), so
//!   saturation is practically confined to heavy duplicates; [`CountingBloom::saturated_counters`]
//!   reports it.
//! * **Parameters**: `expected_items` and `fpr` ([`CountingBloom::new`]), or exact counters and
//!   hashes ([`CountingBloom::with_params`]).
//! * **Limits**: only remove what was inserted. Removing an item that was never inserted but is a
//!   false positive decrements counters that belong to other items and can create false negatives
//!   for them (this is inherent to counting Bloom filters, see [`crate::Remove`]).
//!
//! ```
//! use sift::prelude::*;
//! use sift::CountingBloom;
//!
//! let mut f = CountingBloom::new(10_000, 0.01)?;
//! for i in 0..12_000u32 {
//!     f.insert(i.to_le_bytes());
//! }
//! for i in 10_000..12_000u32 {
//!     assert!(f.remove(i.to_le_bytes()));
//! }
//! assert_eq!(f.len(), 10_000);
//! assert!((0..10_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members: the measured FPR stays within a 99.9% binomial bound of 1%.
//! let fp = (20_000..120_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 1_100, "{fp} false positives");
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{CowGuard, CowWriter, Storage, MAX_BYTES};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::filters::bloom::{Probes, MAX_HASHES};
use crate::format::{decode_verified, Encoder, FilterKind, FrozenFile, FrozenPart, ParamWriter};
use crate::hash::{Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist, Remove};

/// The value at which a counter saturates and sticks.
pub const SATURATED: u8 = 15;

/// Counters per 64-bit storage word.
const PER_WORD: u64 = 16;

/// Every nibble's lowest bit, to count saturated nibbles word-parallel.
const NIBBLE_LOW_BITS: u64 = 0x1111_1111_1111_1111;

/// Non-zero 4-bit counters in `words`.
fn nonzero_in(words: &[u64]) -> u64 {
    words.iter().map(|&x| ((x | (x >> 1) | (x >> 2) | (x >> 3)) & NIBBLE_LOW_BITS).count_ones() as u64).sum()
}

/// A counting Bloom filter with 4-bit saturating counters. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq)]
pub struct CountingBloom {
    /// 16 counters per word; counter `i` is nibble `i % 16` (least significant first) of word
    /// `i / 16`, so the little-endian byte image holds counter `2j` in the low nibble of byte `j`.
    words: Storage<u64>,
    counters: u64,
    k: u32,
    hasher: Hasher,
    /// `hasher` with its per-seed constants precomputed, for the item paths.
    hot: HotHasher,
    /// Inserts minus successful removes.
    items: u64,
    capacity: u64,
    target_fpr: f64,
}

/// Words needed for `counters` 4-bit counters, with a structured error for absurd counts.
fn words_for_counters(counters: u64) -> Result<usize> {
    let words = counters.div_ceil(PER_WORD);
    let bytes = words as u128 * 8;
    if bytes > MAX_BYTES || words > usize::MAX as u64 {
        return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
    }
    Ok(words as usize)
}

impl CountingBloom {
    /// A filter sized for `expected_items` at false-positive rate `fpr`: the same number of
    /// counters `m` and hashes `k` as [`crate::Bloom::new`] gives bits and hashes.
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(expected_items as u64, fpr);
        Self::with_hasher(expected_items, fpr, Hasher::new(kind, 0))
    }

    /// Like [`CountingBloom::new`], with a chosen hash function and seed.
    pub fn with_hasher(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let n = expected_items as f64;
        let m = math::bloom_optimal_bits(n, fpr).ceil().max(64.0);
        // 4 bits per counter: m counters need m / 2 bytes.
        if m / 2.0 > MAX_BYTES as f64 {
            return Err(Error::CapacityExceeded {
                requested_bytes: (m / 2.0) as u128,
                limit_bytes: MAX_BYTES,
            });
        }
        let k = math::bloom_optimal_k(m, n).min(MAX_HASHES);
        let mut f = Self::with_params(m as u64, k, hasher)?;
        f.capacity = expected_items as u64;
        f.target_fpr = fpr;
        Ok(f)
    }

    /// A filter of exactly `counters` 4-bit counters and `hashes` hash functions (1 to 64).
    pub fn with_params(counters: u64, hashes: u32, hasher: Hasher) -> Result<Self> {
        if counters == 0 {
            return Err(Error::param("counters", counters, "at least 1"));
        }
        if hashes == 0 || hashes > MAX_HASHES {
            return Err(Error::param("hashes", hashes, "between 1 and 64"));
        }
        let words = Storage::zeroed(words_for_counters(counters)?)?;
        let capacity =
            math::bloom_capacity_with_k(counters as f64, hashes as f64, 0.5f64.powi(hashes as i32));
        Ok(CountingBloom {
            words,
            counters,
            k: hashes,
            hasher,
            hot: HotHasher::new(hasher),
            items: 0,
            capacity: capacity.max(1.0) as u64,
            target_fpr: math::bloom_fpr(counters as f64, capacity, hashes as f64)
                .clamp(f64::MIN_POSITIVE, 0.5),
        })
    }

    /// Number of counters `m` (the `m` of the Bloom formulas).
    pub fn num_counters(&self) -> u64 {
        self.counters
    }

    /// Number of hash functions `k`.
    pub fn num_hashes(&self) -> u32 {
        self.k
    }

    /// The item count the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for (at [`CountingBloom::capacity`] items).
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// The value of counter `i` (0 to 15; 15 means saturated, "at least 15").
    ///
    /// # Panics
    /// If `i >= self.num_counters()`.
    #[inline]
    pub fn counter(&self, i: u64) -> u8 {
        assert!(i < self.counters, "counter {i} out of range (filter has {})", self.counters);
        self.get(i)
    }

    #[inline(always)]
    fn get(&self, i: u64) -> u8 {
        ((self.words[(i / PER_WORD) as usize] >> ((i % PER_WORD) * 4)) & 0xf) as u8
    }

    /// Adds one to counter `i` unless it is saturated; returns the value it had before. `cow`
    /// is the lock of the snapshot reading the counters, if one is: the counter's piece is
    /// saved for it first.
    #[inline(always)]
    fn increment(&mut self, cow: Option<&mut CowWriter<'_>>, i: u64) -> u8 {
        let at = (i / PER_WORD) as usize;
        if let Some(cow) = cow {
            cow.before_write_values(&self.words, at..at + 1);
        }
        let w = &mut self.words[at];
        let shift = (i % PER_WORD) * 4;
        let c = ((*w >> shift) & 0xf) as u8;
        if c < SATURATED {
            *w += 1 << shift;
        }
        c
    }

    /// Subtracts one from counter `i` if it is neither zero nor saturated (`cow`: as for
    /// [`CountingBloom::increment`]).
    #[inline(always)]
    fn decrement(&mut self, cow: Option<&mut CowWriter<'_>>, i: u64) {
        let at = (i / PER_WORD) as usize;
        if let Some(cow) = cow {
            cow.before_write_values(&self.words, at..at + 1);
        }
        let w = &mut self.words[at];
        let shift = (i % PER_WORD) * 4;
        let c = (*w >> shift) & 0xf;
        // Zero is only reachable here when a never-inserted false positive is removed and one of
        // its positions repeats; never wrap into the neighbouring nibble.
        if c != 0 && c != SATURATED as u64 {
            *w -= 1 << shift;
        }
    }

    /// Number of counters stuck at 15. Each one keeps its position set forever (no false
    /// negatives, a little extra FPR); many of them mean the filter saw heavy duplicates or is
    /// badly overloaded.
    pub fn saturated_counters(&self) -> u64 {
        self.words
            .iter()
            .map(|&x| (x & (x >> 1) & (x >> 2) & (x >> 3) & NIBBLE_LOW_BITS).count_ones() as u64)
            .sum()
    }

    /// Number of non-zero counters (the set bits of the equivalent Bloom filter).
    pub fn nonzero_counters(&self) -> u64 {
        nonzero_in(&self.words)
    }

    /// FPR measured from the fraction of non-zero counters, `fill^k`.
    pub fn current_fpr(&self) -> f64 {
        math::bloom_fpr_from_fill(self.nonzero_counters() as f64 / self.counters as f64, self.k as f64)
    }

    /// [`CountingBloom::current_fpr`] from the counters of an evenly spaced sample of at most
    /// [`FILL_SAMPLE_BYTES`](crate::bits::FILL_SAMPLE_BYTES) ([`sample_runs`](crate::bits::sample_runs)),
    /// the exact figure for a filter no larger: what a monitor polling large filters under a lock
    /// can afford.
    pub fn sampled_fpr(&self) -> f64 {
        if self.words.len() * 8 <= crate::bits::FILL_SAMPLE_BYTES {
            return self.current_fpr();
        }
        let (mut nonzero, mut words) = (0u64, 0usize);
        for r in crate::bits::sample_runs(
            self.words.len(),
            crate::bits::FILL_SAMPLE_RUN / 8,
            crate::bits::FILL_SAMPLE_BYTES / 8,
        ) {
            words += r.len();
            nonzero += nonzero_in(&self.words[r]);
        }
        math::bloom_fpr_from_fill(nonzero as f64 / (words as f64 * 16.0), self.k as f64)
    }

    /// The count-min estimate of how many times the item with this digest is in the filter: the
    /// smallest of its counters. Never below the true count (while only inserted items are
    /// removed), except that 15 means "15 or more".
    pub fn count_estimate_digest(&self, d: Digest) -> u8 {
        let mut p = Probes::new(d, self.counters);
        let mut min = SATURATED;
        for i in 0..self.k {
            min = min.min(self.get(p.next(i)));
        }
        min
    }

    /// The count-min estimate of how many times `item` was inserted (minus removed); see
    /// [`CountingBloom::count_estimate_digest`].
    pub fn count_estimate<T: AsRef<[u8]>>(&self, item: T) -> u8 {
        self.count_estimate_digest(self.hot.digest(item.as_ref()))
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        let guard = self.words.cow_guard();
        let _cow = guard.as_ref().map(|g| {
            let mut w = g.writer();
            w.before_write_values(&self.words, 0..self.words.len());
            w
        });
        self.words.fill(0);
        self.items = 0;
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// the counters are guarded ([`crate::bits::COW_PIECE`]-sized pieces copied aside by the
    /// writes that reach them before the file has been written), so that no write waits for a
    /// copy of the whole filter. `None` for a filter small enough to copy (not in its own
    /// huge-page allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        let g = self.words.freeze()?;
        Some(FrozenFile::new(Self::KIND, self.hasher, self.params().as_bytes(), vec![FrozenPart::Words(g)]))
    }

    /// The file's parameter block.
    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        p.u64(self.counters).u32(self.k).u32(0).u64(self.items).u64(self.capacity).f64(self.target_fpr);
        p
    }

    /// The lock of the snapshot reading the counters, if one is: one atomic load when none is.
    #[inline(always)]
    fn cow_guard(&self) -> Option<std::sync::Arc<CowGuard>> {
        self.words.cow_guard()
    }
}

impl Filter for CountingBloom {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// Same answer as the trait's default, hashing through the precomputed state.
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.contains_digest(self.hot.digest(item.as_ref()))
    }

    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        let mut p = Probes::new(d, self.counters);
        for i in 0..self.k {
            if self.get(p.next(i)) == 0 {
                return false;
            }
        }
        true
    }

    /// Inserts minus successful removes (duplicates count once per insert).
    fn len(&self) -> usize {
        self.items.min(usize::MAX as u64) as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.words.len() * 8
    }

    fn expected_fpr(&self) -> f64 {
        math::bloom_fpr(self.counters as f64, self.items as f64, self.k as f64)
    }
}

impl Insert for CountingBloom {
    /// Same effect as the trait's default, hashing through the precomputed state.
    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool {
        let d = self.hot.digest(item.as_ref());
        self.insert_digest(d)
    }

    /// Increments the item's `k` counters (a position probed twice is incremented twice);
    /// saturated counters stay at 15. Returns `true` if the item was not reported present before.
    #[inline]
    fn insert_digest(&mut self, d: Digest) -> bool {
        let mut p = Probes::new(d, self.counters);
        let mut new = false;
        let guard = self.cow_guard();
        let mut cow = guard.as_ref().map(|g| g.writer());
        for i in 0..self.k {
            // A repeated position reads the value this insert already raised, which is non-zero;
            // so `new` is true exactly when some position was zero before the insert.
            new |= self.increment(cow.as_mut(), p.next(i)) == 0;
        }
        self.items = self.items.saturating_add(1);
        new
    }
}

impl Remove for CountingBloom {
    /// Same effect as the trait's default, hashing through the precomputed state.
    fn remove<T: AsRef<[u8]>>(&mut self, item: T) -> bool {
        let d = self.hot.digest(item.as_ref());
        self.remove_digest(d)
    }

    /// If the item is reported present, decrements each of its non-saturated counters (a position
    /// probed twice is decremented twice, mirroring insert) and returns `true`; otherwise changes
    /// nothing and returns `false`.
    fn remove_digest(&mut self, d: Digest) -> bool {
        if !self.contains_digest(d) {
            return false;
        }
        let mut p = Probes::new(d, self.counters);
        let guard = self.cow_guard();
        let mut cow = guard.as_ref().map(|g| g.writer());
        for i in 0..self.k {
            self.decrement(cow.as_mut(), p.next(i));
        }
        self.items = self.items.saturating_sub(1);
        true
    }
}

impl Persist for CountingBloom {
    const KIND: FilterKind = FilterKind::CountingBloom;

    /// Parameters: counters `u64`, hashes `u32`, reserved `u32` (0), items `u64` (inserts minus
    /// removes), capacity `u64`, target FPR `f64`. Payload: the counters, 4 bits each, 16 per
    /// little-endian `u64` (8 bytes per 16 counters, `ceil(m / 16) · 8` bytes): counter `i` is the
    /// low nibble of byte `i / 2` when `i` is even, the high nibble when odd. Nibbles past the last
    /// counter are zero.
    fn to_bytes(&self) -> Vec<u8> {
        let p = self.params();
        let mut e = Encoder::new(Self::KIND, self.hasher, p.as_bytes(), self.size_in_bytes() as u64);
        let out = e.payload();
        for w in self.words.iter() {
            out.extend_from_slice(&w.to_le_bytes());
        }
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let counters = r.u64("counters")?;
        let k = r.u32("hashes")?;
        let reserved = r.u32("reserved")?;
        let items = r.u64("items")?;
        let capacity = r.u64("capacity")?;
        let target_fpr = r.fpr("target fpr")?;
        r.finish()?;
        if counters == 0 || k == 0 || k > MAX_HASHES || reserved != 0 {
            return Err(FormatError::InvalidParams(
                "counting bloom: counters and hashes must be positive, hashes ≤ 64, reserved 0",
            )
            .into());
        }
        let n = words_for_counters(counters)?;
        let payload = raw.payload();
        // Check the length before allocating, so a corrupted count cannot request a huge buffer.
        if payload.len() as u128 != n as u128 * 8 {
            return Err(FormatError::Truncated {
                what: "counter array",
                needed: n as u64 * 8,
                available: payload.len() as u64,
            }
            .into());
        }
        let mut words: Storage<u64> = Storage::zeroed(n)?;
        for (w, chunk) in words.iter_mut().zip(payload.chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        }
        let used = counters % PER_WORD;
        if used != 0 && words.last().is_some_and(|w| w >> (used * 4) != 0) {
            return Err(FormatError::InvalidParams("counting bloom: counters set past the end").into());
        }
        let hasher = raw.hasher();
        Ok(CountingBloom {
            words,
            counters,
            k,
            hasher,
            hot: HotHasher::new(hasher),
            items,
            capacity,
            target_fpr,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{assert_each_write_keeps_frozen, NamedWrite};
    use crate::Bloom;

    /// A filter of 8 MiB of counters (huge storage on Linux, so it freezes: 32 copy-on-write
    /// pieces) with 20,000 items.
    fn big_counting() -> CountingBloom {
        let mut f = CountingBloom::with_params(16 << 20, 7, Hasher::default()).unwrap();
        for i in 0..20_000u32 {
            f.insert(i.to_le_bytes());
        }
        f
    }

    /// Each kind of write, alone while the filter is frozen, changes the live filter and leaves
    /// the frozen file as it was at the freeze, whether the filter is dropped before the file is
    /// written or not: an insert, a remove, a clear. One write at a time, so that a write
    /// skipping its guard fails this test.
    #[test]
    fn every_write_alone_keeps_the_frozen_file() {
        assert!(CountingBloom::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let ops: [NamedWrite<'_, CountingBloom>; 3] = [
            (
                "insert",
                Box::new(|f| {
                    f.insert(b"new item");
                }),
            ),
            ("remove", Box::new(|f| assert!(f.remove(5u32.to_le_bytes())))),
            ("clear", Box::new(|f| f.clear())),
        ];
        assert_each_write_keeps_frozen(&big_counting, |f| f.to_bytes(), CountingBloom::freeze, &ops);
    }

    /// An insert copies aside only the pieces of the counters it changes: at most `k`.
    #[test]
    fn an_insert_during_a_freeze_copies_only_the_pieces_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        use crate::bits::COW_PIECE;
        let mut f = big_counting();
        let at_freeze: Vec<u64> = f.words.to_vec();
        let frozen = f.freeze().unwrap();
        let g = frozen.guard(0);
        assert_eq!(g.len() / COW_PIECE, 32);
        let changed = |f: &CountingBloom| crate::bits::pieces_differing(&f.words[..], &at_freeze).len();
        for i in 0..5u32 {
            let saved = g.saved_pieces();
            f.insert(format!("x{i}"));
            assert!(g.saved_pieces() <= saved + 7, "seven counters, seven pieces at most");
            assert_eq!(g.saved_pieces(), changed(&f), "after insert {i}");
        }
        assert!(g.saved_pieces() >= 10);
    }
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// 32 MiB of counters, an eighth of them sampled: the sampled fill (4 Mi words, 64 Mi
    /// counters) has a standard deviation of at most sqrt(f(1−f)/2^26) ≈ 6e-5 around the exact
    /// fill; the FPR `fill^k` moves k times the fill's relative error (k = 7 here, fill ≈ 0.3:
    /// about 0.15%), so 2% is over ten standard deviations. A small filter gives the exact figure.
    #[test]
    fn the_sampled_fpr_of_a_large_filter_stands_for_the_exact_one() {
        let mut big = CountingBloom::with_params(64 << 20, 7, Hasher::default()).unwrap();
        for i in 0..3_000_000u64 {
            big.insert(i.to_le_bytes());
        }
        let (exact, sampled) = (big.current_fpr(), big.sampled_fpr());
        assert!(exact > 1e-5, "{exact}");
        assert!((sampled - exact).abs() < 0.02 * exact, "sampled {sampled} vs exact {exact}");
        let mut small = CountingBloom::new(1000, 0.01).unwrap();
        for i in 0..500u64 {
            small.insert(i.to_le_bytes());
        }
        assert_eq!(small.sampled_fpr(), small.current_fpr());
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            CountingBloom::new(0, 0.01),
            Err(Error::InvalidParameter { name: "expected_items", .. })
        ));
        for p in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(
                matches!(CountingBloom::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })),
                "p = {p}"
            );
        }
        assert!(matches!(CountingBloom::new(usize::MAX, 1e-9), Err(Error::CapacityExceeded { .. })));
        assert!(matches!(
            CountingBloom::with_params(u64::MAX, 3, Hasher::default()),
            Err(Error::CapacityExceeded { .. })
        ));
        assert!(CountingBloom::with_params(0, 3, Hasher::default()).is_err());
        assert!(CountingBloom::with_params(64, 0, Hasher::default()).is_err());
        assert!(CountingBloom::with_params(64, 65, Hasher::default()).is_err());
    }

    #[test]
    fn sized_like_bloom() {
        for (n, p) in [(1000, 0.01), (12_345, 0.001), (100_000_000, 0.01)] {
            let c = CountingBloom::new(n, p).unwrap();
            let b = Bloom::new(n, p).unwrap();
            assert_eq!(c.num_counters(), b.num_bits());
            assert_eq!(c.num_hashes(), b.num_hashes());
            assert_eq!(c.hasher(), b.hasher());
            assert_eq!(c.size_in_bytes() as u64, b.num_bits().div_ceil(16) * 8);
        }
    }

    #[test]
    fn probes_the_same_positions_as_bloom() {
        // Odd sizes so the multiply-shift reduction is exercised, not a power of two.
        for (m, k) in [(1_000_003u64, 7u32), (777, 3), (64, 13)] {
            let mut b = Bloom::with_params(m, k, Hasher::default()).unwrap();
            let mut c = CountingBloom::with_params(m, k, Hasher::default()).unwrap();
            for i in 0..(m / 20).max(5) {
                let item = i.to_le_bytes();
                assert_eq!(b.insert(item), c.insert(item), "m = {m}, item {i}");
            }
            for x in 0..m {
                assert_eq!(b.bits().get(x), c.counter(x) > 0, "m = {m}, position {x}");
            }
        }
    }

    #[test]
    fn insert_remove_len_and_counts() {
        let mut f = CountingBloom::new(1000, 0.01).unwrap();
        assert!(f.insert("a"));
        assert!(!f.insert("a"));
        assert_eq!(f.len(), 2);
        assert_eq!(f.count_estimate("a"), 2);
        assert!(f.contains_hash(f.hasher().hash64(b"a")));
        assert!(!f.contains("b"));
        assert!(!f.remove("b"), "an absent item is not removed");
        assert_eq!(f.len(), 2);
        assert!(f.remove("a"));
        assert!(f.contains("a"));
        assert_eq!(f.count_estimate("a"), 1);
        assert!(f.remove("a"));
        assert!(!f.contains("a"));
        assert!(!f.remove("a"));
        assert_eq!(f.len(), 0);
        assert_eq!(f.nonzero_counters(), 0);
    }

    #[test]
    fn removing_an_absent_item_changes_nothing() {
        let mut f = CountingBloom::new(1000, 0.01).unwrap();
        for i in 0..500u32 {
            f.insert(i.to_le_bytes());
        }
        let before = f.clone();
        let mut refused = 0;
        for i in 1000..3000u32 {
            if !f.contains(i.to_le_bytes()) {
                assert!(!f.remove(i.to_le_bytes()));
                refused += 1;
            }
        }
        assert!(refused > 1900);
        assert_eq!(f, before);
    }

    #[test]
    fn repeated_positions_are_counted_twice_both_ways() {
        // With 2 counters and 8 hashes every item hits some counter several times.
        let mut f = CountingBloom::with_params(2, 8, Hasher::default()).unwrap();
        let d = Digest { h1: 0x1234_5678_9abc_def0, h2: 0x0fed_cba9_8765_4321 };
        let mut hits = [0u8; 2];
        let mut p = Probes::new(d, 2);
        for i in 0..8 {
            hits[p.next(i) as usize] += 1;
        }
        assert!(f.insert_digest(d));
        assert_eq!([f.counter(0), f.counter(1)], hits);
        assert!(f.remove_digest(d));
        assert_eq!([f.counter(0), f.counter(1)], [0, 0]);
        assert!(!f.contains_digest(d));
    }

    #[test]
    fn saturated_counters_stick_and_never_cause_false_negatives() {
        // 40 counters, 4 hashes: every item collides with many others.
        let mut f = CountingBloom::with_params(40, 4, Hasher::default()).unwrap();
        let others: Vec<u32> = (100..110).collect();
        for &o in &others {
            f.insert(o.to_le_bytes());
        }
        // Hammer a few items: their counters (shared with the others') go far past 15.
        for _ in 0..40 {
            for hot in 0..3u32 {
                f.insert(hot.to_le_bytes());
            }
        }
        let saturated = f.saturated_counters();
        assert!(saturated > 0);
        assert!(f.count_estimate(0u32.to_le_bytes()) == SATURATED);
        // Remove every copy of the hot items.
        for _ in 0..40 {
            for hot in 0..3u32 {
                assert!(f.remove(hot.to_le_bytes()));
            }
        }
        assert!(others.iter().all(|o| f.contains(o.to_le_bytes())), "false negative after saturation");
        assert_eq!(f.saturated_counters(), saturated, "saturated counters never move");
        assert_eq!(f.len(), others.len());
        // The remaining items can still be removed one by one without false negatives.
        for (j, o) in others.iter().enumerate() {
            assert!(f.remove(o.to_le_bytes()));
            assert!(others[j + 1..].iter().all(|o| f.contains(o.to_le_bytes())));
        }
        assert_eq!(f.len(), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16),
        Remove(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        // A small universe so items are often inserted twice and removed while duplicated.
        prop_oneof![3 => (0u16..60).prop_map(Op::Insert), 2 => (0u16..60).prop_map(Op::Remove)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A multiset model: every item still present (inserted more often than removed) is
        /// reported, remove succeeds exactly for present items, and len counts the multiset.
        #[test]
        fn behaves_like_a_multiset(
            counters in 8u64..400,
            k in 1u32..9,
            ops in proptest::collection::vec(op(), 1..400),
        ) {
            let mut f = CountingBloom::with_params(counters, k, Hasher::new(HashKind::Xxh3_64, 7)).unwrap();
            let mut model: HashMap<u16, usize> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(x) => {
                        let new = f.insert(x.to_le_bytes());
                        if model.get(&x).copied().unwrap_or(0) > 0 {
                            prop_assert!(!new, "present item {} reported new", x);
                        }
                        *model.entry(x).or_default() += 1;
                    }
                    Op::Remove(x) => {
                        let present = model.get(&x).copied().unwrap_or(0);
                        if present > 0 {
                            prop_assert!(f.remove(x.to_le_bytes()), "remove of present item {} failed", x);
                            model.insert(x, present - 1);
                        } else if !f.contains(x.to_le_bytes()) {
                            // Removing a true negative must be a no-op; removing a false positive
                            // is the caller's error (it can damage other items), so the model
                            // does not do it.
                            let before = f.clone();
                            prop_assert!(!f.remove(x.to_le_bytes()));
                            prop_assert_eq!(&f, &before);
                        }
                    }
                }
                for (x, &c) in &model {
                    if c > 0 {
                        prop_assert!(f.contains(x.to_le_bytes()), "false negative for {}", x);
                        prop_assert!(f.count_estimate(x.to_le_bytes()) as usize >= c.min(15));
                    }
                }
                prop_assert_eq!(f.len(), model.values().sum::<usize>());
            }
        }
    }

    #[test]
    fn fpr_within_binomial_bound() {
        let n = 200_000u32;
        let mut f = CountingBloom::new(n as usize, 0.01).unwrap();
        for i in 0..n {
            f.insert(i.to_le_bytes());
        }
        // Remove and re-insert a slice so the counters have been through both operations.
        for i in 0..20_000u32 {
            assert!(f.remove(i.to_le_bytes()));
        }
        for i in 0..20_000u32 {
            f.insert(i.to_le_bytes());
        }
        assert!((0..n).all(|i| f.contains(i.to_le_bytes())));
        let probes = 2_000_000u32;
        let fp = (n..n + probes).filter(|i| f.contains(i.to_le_bytes())).count() as f64;
        let measured = fp / probes as f64;
        let p = f.expected_fpr();
        assert!((p - 0.01).abs() < 2e-4, "formula gives {p}");
        // 99.9% one-sided binomial bound, plus 2% model error for the Bloom approximation and
        // double hashing.
        let sigma = (p * (1.0 - p) / probes as f64).sqrt();
        assert!(measured <= p * 1.02 + 3.1 * sigma, "measured {measured}, expected {p}");
        assert!(measured >= p * 0.98 - 3.1 * sigma, "measured {measured}, expected {p}");
    }

    #[test]
    fn round_trip_and_corruption() {
        let mut f = CountingBloom::new(1000, 0.001).unwrap();
        for i in 0..700u32 {
            f.insert(i.to_string());
        }
        for _ in 0..20 {
            f.insert("hot");
        }
        f.remove("3");
        let bytes = f.to_bytes();
        let g = CountingBloom::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        assert_eq!(g.count_estimate("hot"), f.count_estimate("hot"));
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n / 2] ^= 0x10;
        assert!(matches!(
            CountingBloom::from_bytes(&bad),
            Err(Error::Format(FormatError::ChecksumMismatch { .. }))
        ));
        for cut in [0, 10, 40, n - 1] {
            assert!(CountingBloom::from_bytes(&bytes[..cut]).is_err());
        }
        // A Bloom file is not a counting Bloom file.
        let b = Bloom::new(1000, 0.01).unwrap();
        assert!(matches!(
            CountingBloom::from_bytes(&b.to_bytes()),
            Err(Error::Format(FormatError::WrongKind { .. }))
        ));
    }

    /// Re-encodes with edited parameters and payload and a valid CRC, to reach the validation
    /// behind the checksum.
    fn forge(params: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut e = Encoder::new(FilterKind::CountingBloom, Hasher::default(), params, payload.len() as u64);
        e.payload().extend_from_slice(payload);
        e.finish()
    }

    #[test]
    fn invalid_parameters_behind_a_valid_checksum_are_errors() {
        let params = |counters: u64, k: u32, reserved: u32| {
            let mut p = ParamWriter::new();
            p.u64(counters).u32(k).u32(reserved).u64(0).u64(10).f64(0.01);
            p.as_bytes().to_vec()
        };
        assert!(CountingBloom::from_bytes(&forge(&params(20, 3, 0), &[0; 16])).is_ok());
        // Zero counters, zero or too many hashes, reserved bits.
        for p in [params(0, 3, 0), params(20, 0, 0), params(20, 65, 0), params(20, 3, 1)] {
            assert!(CountingBloom::from_bytes(&forge(&p, &[0; 16])).is_err());
        }
        // Payload of the wrong size, including a count that would need an absurd allocation.
        assert!(CountingBloom::from_bytes(&forge(&params(20, 3, 0), &[0; 8])).is_err());
        assert!(CountingBloom::from_bytes(&forge(&params(u64::MAX, 3, 0), &[0; 16])).is_err());
        assert!(CountingBloom::from_bytes(&forge(&params(1 << 60, 3, 0), &[0; 16])).is_err());
        // A counter past the 20th (nibble 4 of the second word).
        let mut payload = [0u8; 16];
        payload[10] = 0x01;
        assert!(CountingBloom::from_bytes(&forge(&params(20, 3, 0), &payload)).is_err());
        // Truncated parameter block, and a longer one.
        let p = params(20, 3, 0);
        assert!(CountingBloom::from_bytes(&forge(&p[..p.len() - 1], &[0; 16])).is_err());
        let mut longer = p.clone();
        longer.push(0);
        assert!(CountingBloom::from_bytes(&forge(&longer, &[0; 16])).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let good = CountingBloom::new(100, 0.01).unwrap().to_bytes();
        for len in 0..200usize {
            let mut v: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let _ = CountingBloom::from_bytes(&v);
            // Same header, random tail.
            let keep = len.min(good.len());
            v[..keep].copy_from_slice(&good[..keep]);
            let _ = CountingBloom::from_bytes(&v);
        }
    }
}
