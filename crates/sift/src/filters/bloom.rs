//! Classic Bloom filter: one bit array, `k` probes anywhere in it.
//!
//! Bloom, "Space/time trade-offs in hash coding with allowable errors", CACM 13(7), 1970.
//!
//! * **FPR**: `p ≈ (1 - e^(-k·n/m))^k` ([`crate::math::bloom_fpr`]).
//! * **Space**: `m = -n·ln p / ln² 2`, i.e. `1.44·log2(1/p)` bits per key (9.59 at 1%), with
//!   `k = log2(1/p)` probes.
//! * **Probes**: enhanced double hashing on the item's [`Digest`] (Kirsch & Mitzenmacher 2006,
//!   Dillinger & Manolios 2004), reduced to `0..m` by a multiply-shift, so `m` is any number of bits
//!   (no power-of-two rounding).
//! * **Set algebra**: [`Bloom::union`] and [`Bloom::intersect`] of filters of the same shape, and
//!   [`Bloom::estimated_items`] from the fill ratio (Swamidass & Baldi 2007).
//! * **Limits**: every probe can miss the cache, so for filters much larger than the cache
//!   [`crate::BlockedBloom`] is several times faster at a small cost in bits; use the batch methods
//!   ([`Filter::contains_many`]) to overlap the misses.
//!
//! ```
//! use sift::prelude::*;
//! use sift::Bloom;
//!
//! let mut f = Bloom::new(10_000, 0.01)?;
//! for i in 0..10_000u32 {
//!     f.insert(i.to_le_bytes());
//! }
//! assert!((0..10_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members: the measured FPR stays within a 99.9% binomial bound of 1%.
//! let fp = (10_000..110_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 1_100, "{fp} false positives");
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{prefetch, BitVec, CowGuard, CowWriter};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{decode_verified, Encoder, FilterKind, FrozenFile, FrozenPart, ParamWriter};
use crate::hash::{fastrange, Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist, BATCH_AHEAD};

/// Above this size a query stops at the first clear bit (see `contains_digest`): about the L2
/// cache of one core on the machines measured (1.25 MiB there); below it the branch-free loop
/// is faster.
const EARLY_EXIT_BYTES: usize = 2 << 20;

/// Largest number of hash functions accepted.
pub const MAX_HASHES: u32 = 64;

/// A classic Bloom filter. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq)]
pub struct Bloom {
    bits: BitVec,
    k: u32,
    hasher: Hasher,
    /// `hasher` with its per-seed constants precomputed, for the hot paths.
    hot: HotHasher,
    items: u64,
    /// Set bits, maintained on insert so the fill ratio and the FPR it implies cost nothing.
    ones: u64,
    capacity: u64,
    target_fpr: f64,
}

/// Probe positions of one item: enhanced double hashing. Shared with [`crate::CountingBloom`],
/// which must probe exactly the same positions.
#[derive(Clone, Copy)]
pub(crate) struct Probes {
    a: u64,
    b: u64,
    m: u64,
}

impl Probes {
    #[inline(always)]
    pub(crate) fn new(d: Digest, m: u64) -> Self {
        Probes { a: d.h1, b: d.h2, m }
    }
    /// The `i`-th probe position (call with `i = 0, 1, 2, ...` in order).
    #[inline(always)]
    pub(crate) fn next(&mut self, i: u32) -> u64 {
        let x = fastrange(self.a, self.m);
        self.a = self.a.wrapping_add(self.b);
        self.b = self.b.wrapping_add(i as u64);
        x
    }

    /// The first `K` positions, the same as `K` calls of [`Probes::next`] (tested), each computed
    /// from the digest directly: the recurrence of `next` gives `a_i = h1 + i·h2 + C(i, 3)`
    /// (mod 2^64), so the `K` multiplies do not wait on one another and, `K` being known, the
    /// offsets are constants.
    #[inline(always)]
    pub(crate) fn first<const K: usize>(d: Digest, m: u64) -> [u64; K] {
        core::array::from_fn(|i| {
            let i = i as u64;
            let c3 = i * i.saturating_sub(1) * i.saturating_sub(2) / 6;
            fastrange(d.h1.wrapping_add(i.wrapping_mul(d.h2)).wrapping_add(c3), m)
        })
    }
}

/// The word holding bit `x` of `words`, without a bounds check.
///
/// # Safety
/// `x < m` where `m` is the bit count of a [`BitVec`] whose words are `words`: a `BitVec` of `m`
/// bits has exactly `ceil(m / 64)` words (its fields are private; `BitVec::zeroed` and
/// `BitVec::from_le_bytes` are its only constructors, `Clone` keeps both, `words_mut` cannot
/// resize), so `x / 64 < words.len()`. Every probe position is `fastrange(_, m)`, which is `< m`
/// only for `m ≥ 1` (`fastrange(_, 0) = 0`, and a `BitVec` of 0 bits has no word): a [`Bloom`]'s
/// `m` is at least 1 because its only constructors, `with_params` and `from_bytes`, refuse 0
/// bits (test `zero_bits_are_refused`), and nothing changes `m` afterwards.
#[inline(always)]
unsafe fn word_at(words: &[u64], x: u64) -> u64 {
    debug_assert!(((x >> 6) as usize) < words.len());
    // SAFETY: the caller's contract, above.
    unsafe { *words.get_unchecked((x >> 6) as usize) }
}

/// [`word_at`], mutably.
///
/// # Safety
/// As for [`word_at`].
#[inline(always)]
unsafe fn word_at_mut(words: &mut [u64], x: u64) -> &mut u64 {
    debug_assert!(((x >> 6) as usize) < words.len());
    // SAFETY: the caller's contract (see `word_at`).
    unsafe { words.get_unchecked_mut((x >> 6) as usize) }
}

/// Whether the `K` probe bits of `d` are all set, testing every one (no branch).
#[inline(always)]
fn all_set<const K: usize>(bits: &BitVec, d: Digest) -> bool {
    let (words, m) = (bits.words(), bits.len());
    let mut all = 1u64;
    for x in Probes::first::<K>(d, m) {
        // SAFETY: `x = fastrange(_, m) < m`, the bit count of `words` (see `word_at`).
        all &= unsafe { word_at(words, x) } >> (x & 63);
    }
    all & 1 == 1
}

/// Whether the `K` probe bits of `d` are all set, stopping at the first clear one. Positions
/// by the recurrence, each computed just before its test: a non-member stops after about two,
/// and computing all `K` first (`Probes::first`) made its query 8% slower at n = 4M (members
/// the same; docs/BENCHMARKS.md, "Bloom query and insert against fastbloom").
#[inline(always)]
fn all_set_early_exit<const K: usize>(bits: &BitVec, d: Digest) -> bool {
    let (words, m) = (bits.words(), bits.len());
    let mut p = Probes::new(d, m);
    for i in 0..K as u32 {
        let x = p.next(i);
        // SAFETY: `x = fastrange(_, m) < m`, the bit count of `words` (see `word_at`).
        if unsafe { word_at(words, x) } >> (x & 63) & 1 == 0 {
            return false;
        }
    }
    true
}

impl Bloom {
    /// A filter sized for `expected_items` at false-positive rate `fpr`, with the optimal number
    /// of bits and hashes and the default hash (XXH3, 128-bit only for astronomically large sets).
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(expected_items as u64, fpr);
        Self::with_hasher(expected_items, fpr, Hasher::new(kind, 0))
    }

    /// Like [`Bloom::new`], with a chosen hash function and seed.
    pub fn with_hasher(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let n = expected_items as f64;
        // The textbook size (Bloom 1970; what Guava, RedisBloom and the seeds compute) and the
        // integer k that gives it the lowest FPR. Rounding k puts the FPR at capacity within 1% of
        // the target (1.004·p at p = 0.01, 1.007·p at p = 0.1), never further.
        let m = math::bloom_optimal_bits(n, fpr).ceil().max(64.0);
        let k = math::bloom_optimal_k(m, n).min(MAX_HASHES);
        if m.is_nan() || m > (crate::bits::MAX_BYTES * 8) as f64 {
            return Err(Error::CapacityExceeded {
                requested_bytes: (m / 8.0).min(u128::MAX as f64) as u128,
                limit_bytes: crate::bits::MAX_BYTES,
            });
        }
        let mut f = Self::with_params(m as u64, k, hasher)?;
        f.capacity = expected_items as u64;
        f.target_fpr = fpr;
        Ok(f)
    }

    /// A filter of exactly `bits` bits and `hashes` hash functions (1 to 64).
    pub fn with_params(bits: u64, hashes: u32, hasher: Hasher) -> Result<Self> {
        if bits == 0 {
            return Err(Error::param("bits", bits, "at least 1"));
        }
        if hashes == 0 || hashes > MAX_HASHES {
            return Err(Error::param("hashes", hashes, "between 1 and 64"));
        }
        let bits_vec = BitVec::zeroed(bits)?;
        let capacity = math::bloom_capacity_with_k(bits as f64, hashes as f64, 0.5f64.powi(hashes as i32));
        Ok(Bloom {
            bits: bits_vec,
            k: hashes,
            hasher,
            hot: HotHasher::new(hasher),
            items: 0,
            ones: 0,
            capacity: capacity.max(1.0) as u64,
            target_fpr: math::bloom_fpr(bits as f64, capacity, hashes as f64).clamp(f64::MIN_POSITIVE, 0.5),
        })
    }

    /// Number of bits `m`.
    pub fn num_bits(&self) -> u64 {
        self.bits.len()
    }

    /// Number of hash functions `k`.
    pub fn num_hashes(&self) -> u32 {
        self.k
    }

    /// The item count the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for (at [`Bloom::capacity`] items).
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// The bit array.
    pub fn bits(&self) -> &BitVec {
        &self.bits
    }

    /// Fraction of bits set.
    pub fn fill_ratio(&self) -> f64 {
        self.ones as f64 / self.bits.len() as f64
    }

    /// FPR measured from the fill ratio, `fill^k`: what the filter gives now, whatever was
    /// inserted (duplicates, unions) — the number to monitor before rebuilding.
    pub fn current_fpr(&self) -> f64 {
        math::bloom_fpr_from_fill(self.fill_ratio(), self.k as f64)
    }

    /// Estimated number of distinct items from the number of set bits (Swamidass & Baldi 2007):
    /// useful after [`Bloom::union`], where [`Filter::len`] no longer counts distinct items.
    pub fn estimated_items(&self) -> f64 {
        math::bloom_estimate_items(self.bits.len() as f64, self.k as f64, self.ones as f64)
    }

    fn check_same_shape(&self, other: &Bloom) -> Result<()> {
        if self.bits.len() != other.bits.len() {
            return Err(Error::Incompatible { reason: "different number of bits" });
        }
        if self.k != other.k {
            return Err(Error::Incompatible { reason: "different number of hash functions" });
        }
        if self.hasher != other.hasher {
            return Err(Error::Incompatible { reason: "different hash function or seed" });
        }
        Ok(())
    }

    /// Adds every item of `other` to `self` (bitwise OR). The result reports every member of
    /// either filter. [`Filter::len`] becomes the estimate of [`Bloom::estimated_items`].
    pub fn union(&mut self, other: &Bloom) -> Result<()> {
        self.check_same_shape(other)?;
        let guard = self.bits.cow_guard();
        let _writer = guard.as_ref().map(|g| self.save_all(g));
        self.bits.or_assign(&other.bits);
        self.ones = self.bits.count_ones();
        self.items = self.estimated_items().min(u64::MAX as f64) as u64;
        Ok(())
    }

    /// Keeps only what both filters report (bitwise AND). Every item inserted in both is still
    /// reported; the FPR of the result is at most that of the fuller operand.
    pub fn intersect(&mut self, other: &Bloom) -> Result<()> {
        self.check_same_shape(other)?;
        let guard = self.bits.cow_guard();
        let _writer = guard.as_ref().map(|g| self.save_all(g));
        self.bits.and_assign(&other.bits);
        self.ones = self.bits.count_ones();
        self.items = self.estimated_items().min(u64::MAX as f64) as u64;
        Ok(())
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        let guard = self.bits.cow_guard();
        let _writer = guard.as_ref().map(|g| self.save_all(g));
        self.bits.clear();
        self.items = 0;
        self.ones = 0;
    }

    /// Takes the lock of `g` (a snapshot reading the bits, [`Bloom::freeze`]) and saves every
    /// word the snapshot has not read yet, for a write that changes them all; the write happens
    /// under the lock returned.
    #[cold]
    fn save_all<'g>(&self, g: &'g CowGuard) -> CowWriter<'g> {
        let mut w = g.writer();
        w.before_write_values(self.bits.words(), 0..self.bits.words().len());
        w
    }

    /// [`Insert::insert_digest`] while a snapshot reads the bits: the pieces of the item's `k`
    /// words are saved for it first (the same positions the insert sets: [`Probes::first`]
    /// gives those of [`Probes::next`]), and the insert happens under the lock.
    #[cold]
    fn set_probes_guarded(&mut self, g: &CowGuard, d: Digest) -> u64 {
        let mut w = g.writer();
        let mut p = Probes::new(d, self.bits.len());
        for i in 0..self.k {
            let x = (p.next(i) >> 6) as usize;
            w.before_write_values(self.bits.words(), x..x + 1);
        }
        self.set_probes(d)
    }

    /// Sets the item's `k` bits; returns how many were clear.
    #[inline(always)]
    fn set_probes(&mut self, d: Digest) -> u64 {
        if self.k == 7 {
            // The usual k (FPR 1%): unrolled, inlined, positions computed independently.
            set_all::<7>(&mut self.bits, d)
        } else {
            set_any_k(&mut self.bits, self.k, d)
        }
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// the bits are guarded ([`crate::bits::COW_PIECE`]-sized pieces copied aside by the writes
    /// that reach them before the file has been written), so that no write waits for a copy of
    /// the whole filter. `None` for a filter small enough to copy (not in its own huge-page
    /// allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        let g = self.bits.freeze()?;
        Some(FrozenFile::new(Self::KIND, self.hasher, self.params().as_bytes(), vec![FrozenPart::Words(g)]))
    }

    /// The parameter block of the file.
    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        p.u64(self.bits.len()).u32(self.k).u32(0).u64(self.items).u64(self.capacity).f64(self.target_fpr);
        p
    }

    /// [`Filter::contains_digest`] for any `k`: unrolled for `k` up to 16, a loop over
    /// [`Probes`] above.
    #[inline(never)]
    fn contains_any_k(&self, d: Digest) -> bool {
        let m = self.bits.len();
        let words = self.bits.words();
        let large = words.len() * 8 > EARLY_EXIT_BYTES;
        // Unrolled for the k of the usual FPRs (k = 1..=16: FPR down to about 1e-5), one call
        // and a jump table away.
        macro_rules! unrolled {
            ($($k:literal)*) => {
                match self.k {
                    $($k => {
                        return if large {
                            all_set_early_exit::<$k>(&self.bits, d)
                        } else {
                            all_set::<$k>(&self.bits, d)
                        }
                    })*
                    _ => {}
                }
            };
        }
        unrolled!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
        let mut p = Probes::new(d, m);
        if large {
            // A filter larger than the core's L2: stop at the first clear bit. A member tests
            // all k bits either way (the branches are predicted, so its loads still overlap);
            // a non-member of a half-full filter stops after two probes on average, saving most
            // of its cache misses (at n = 10M, 12 MB: non-member query 1.7–2.0x fastbloom's with
            // the branch-free loop, 1.1–1.4x with this one; docs/BENCHMARKS.md).
            for i in 0..self.k {
                let x = p.next(i);
                // SAFETY: `x = fastrange(_, m) < m`, the bit count of `words` (see `word_at`).
                if unsafe { word_at(words, x) } >> (x & 63) & 1 == 0 {
                    return false;
                }
            }
            return true;
        }
        // Cache-resident: branch-free, all k loads issued together and no mispredicted exit
        // (an early exit mispredicts about once per non-member, which costs more than the hits
        // it saves when the lines are in cache).
        let mut all = 1u64;
        for i in 0..self.k {
            let x = p.next(i);
            // SAFETY: `x = fastrange(_, m) < m`, the bit count of `words` (see `word_at`).
            all &= unsafe { word_at(words, x) } >> (x & 63);
        }
        all & 1 == 1
    }

    #[inline(always)]
    fn prefetch_digest(&self, d: Digest) {
        let mut p = Probes::new(d, self.bits.len());
        let words = self.bits.words();
        for i in 0..self.k {
            let x = p.next(i);
            prefetch(&words[(x >> 6) as usize]);
        }
    }
}

impl Filter for Bloom {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    #[inline(always)]
    fn contains_digest(&self, d: Digest) -> bool {
        if self.k == 7 {
            // The usual k (FPR 1%): unrolled, inlined, positions computed independently.
            let words = self.bits.words();
            return if words.len() * 8 > EARLY_EXIT_BYTES {
                all_set_early_exit::<7>(&self.bits, d)
            } else {
                all_set::<7>(&self.bits, d)
            };
        }
        self.contains_any_k(d)
    }

    /// Same answer as the trait's default; hashes through the precomputed per-seed state
    /// instead of copying the hasher out (fewer instructions per query).
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.contains_digest(self.hot.digest(item.as_ref()))
    }

    /// On a filter larger than the cache: `staged_contains` (the probe lines of a group of
    /// items are requested together, in two steps); below, one query after the other.
    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        assert_eq!(digests.len(), out.len(), "one output slot per digest");
        if self.bits.size_in_bytes() <= EARLY_EXIT_BYTES {
            for (d, o) in digests.iter().zip(out.iter_mut()) {
                *o = self.contains_digest(*d);
            }
            return;
        }
        staged_contains(self.bits.words(), self.bits.len(), self.k, digests, out);
    }

    fn len(&self) -> usize {
        self.items as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.bits.size_in_bytes()
    }

    /// The FPR of this filter as it is: `(set bits / m)^k`. Exact for a random non-member (up to
    /// the independence of its k probes), whatever was inserted — duplicates, false positives at
    /// insertion, unions.
    fn expected_fpr(&self) -> f64 {
        self.current_fpr()
    }
}

impl Insert for Bloom {
    #[inline(always)]
    fn insert_digest(&mut self, d: Digest) -> bool {
        let flipped = match self.bits.cow_guard() {
            None => self.set_probes(d),
            Some(g) => self.set_probes_guarded(&g, d),
        };
        self.ones += flipped;
        let new = flipped != 0;
        self.items += new as u64;
        new
    }

    /// Same effect as the trait's default, hashing through the precomputed state.
    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool {
        let d = self.hot.digest(item.as_ref());
        self.insert_digest(d)
    }

    fn insert_digests(&mut self, digests: &[Digest]) -> usize {
        for d in digests.iter().take(BATCH_AHEAD) {
            self.prefetch_digest(*d);
        }
        let mut new = 0;
        for i in 0..digests.len() {
            if let Some(d) = digests.get(i + BATCH_AHEAD) {
                self.prefetch_digest(*d);
            }
            new += self.insert_digest(digests[i]) as usize;
        }
        new
    }
}

/// Sets the `K` probe bits of `d`; returns how many were clear.
#[inline(always)]
fn set_all<const K: usize>(bits: &mut BitVec, d: Digest) -> u64 {
    let m = bits.len();
    let words = bits.words_mut();
    let mut already = 0u64;
    for x in Probes::first::<K>(d, m) {
        // SAFETY: `x = fastrange(_, m) < m`, the bit count of `words` (see `word_at`).
        let w = unsafe { word_at_mut(words, x) };
        *w = set_bit_count(*w, x, &mut already);
    }
    K as u64 - already
}

/// `v` with bit `x & 63` set; adds that bit's old value (0 or 1) to `already`. On x86-64 one
/// `bts` (which leaves the old bit in the carry flag) and one `adc`: LLVM tests the bit and sets
/// it in two separate instructions on a copy of the word, and the insert was 10% slower for it
/// (n = 1M, docs/BENCHMARKS.md, "Bloom query and insert against fastbloom").
#[inline(always)]
fn set_bit_count(v: u64, x: u64, already: &mut u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut v = v;
        // SAFETY: register-only instructions (no memory, no stack: `nomem`, `nostack`): `bts`
        // with a 64-bit register bit offset works on bit `x mod 64` of the register (the
        // unbounded bit-string addressing applies only to a memory operand), `adc` adds the
        // carry it left. `pure` holds: the outputs depend only on the inputs and nothing else
        // is written, except the flags, which the compiler treats as clobbered because
        // `preserves_flags` is absent (it must be: both instructions write CF and others). The
        // portable version below is tested to give the same results.
        unsafe {
            core::arch::asm!(
                "bts {v}, {x}",
                "adc {a}, 0",
                v = inout(reg) v,
                x = in(reg) x,
                a = inout(reg) *already,
                options(pure, nomem, nostack),
            );
        }
        v
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        set_bit_count_portable(v, x, already)
    }
}

/// [`set_bit_count`] in plain Rust (the version of other targets, and the reference of the test).
#[cfg(any(test, not(target_arch = "x86_64")))]
#[inline(always)]
fn set_bit_count_portable(v: u64, x: u64, already: &mut u64) -> u64 {
    *already += v >> (x & 63) & 1;
    v | 1 << (x & 63)
}

/// [`set_all`] for any `k`: unrolled for `k` up to 16, a loop over [`Probes`] above.
#[inline(never)]
fn set_any_k(bits: &mut BitVec, k: u32, d: Digest) -> u64 {
    macro_rules! unrolled {
        ($($k:literal)*) => {
            match k {
                $($k => return set_all::<$k>(bits, d),)*
                _ => {}
            }
        };
    }
    unrolled!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    let m = bits.len();
    let words = bits.words_mut();
    let mut p = Probes::new(d, m);
    let mut already = 0;
    for i in 0..k {
        let x = p.next(i);
        // SAFETY: `x = fastrange(_, m) < m`, the bit count of `words` (see `word_at`).
        let w = unsafe { word_at_mut(words, x) };
        *w = set_bit_count(*w, x, &mut already);
    }
    k as u64 - already
}

/// Probe positions buffered per group of a staged query ([`staged_contains`]): about 500 cache
/// lines, many more than a core keeps misses in flight (10–16 fill buffers), and few enough
/// (32 KiB of lines) to still be in L1/L2 when they are read.
const STAGE_POSITIONS: usize = 512;

/// Probes of a staged query tested before the item's other lines are requested: a non-member
/// of a filter filled to its capacity (half its bits set) fails these two with probability 3/4,
/// so most non-members cost two lines instead of `k`.
const HEAD: usize = 2;

/// The batch query of a filter larger than the cache, a three-step pipeline over groups of
/// `STAGE_POSITIONS / k` digests: (1) compute the probe positions of group `g + 2` and request
/// the lines of its first [`HEAD`] probes; (2) test those probes for group `g + 1` and request
/// the remaining lines of the items that passed; (3) finish group `g`. A line is requested
/// about one step before it is read, and many requests are in flight at once.
fn staged_contains(words: &[u64], m: u64, k: u32, digests: &[Digest], out: &mut [bool]) {
    let k = k as usize;
    let head = HEAD.min(k);
    let per = (STAGE_POSITIONS / k).max(1);
    let groups = digests.len().div_ceil(per);
    let range = |g: usize| g * per..((g + 1) * per).min(digests.len());
    let bit = |x: u64| words[(x >> 6) as usize] >> (x & 63);
    let fill = |g: usize, buf: &mut [u64; STAGE_POSITIONS]| {
        for (d, slots) in digests[range(g)].iter().zip(buf.chunks_exact_mut(k)) {
            let mut p = Probes::new(*d, m);
            for (i, slot) in slots.iter_mut().enumerate() {
                *slot = p.next(i as u32);
            }
            for &x in &slots[..head] {
                prefetch(&words[(x >> 6) as usize]);
            }
        }
    };
    let check_head = |g: usize, buf: &[u64; STAGE_POSITIONS], out: &mut [bool]| {
        for (o, slots) in out[range(g)].iter_mut().zip(buf.chunks_exact(k)) {
            let all = slots[..head].iter().fold(1, |a, &x| a & bit(x));
            *o = all & 1 == 1;
            if *o {
                for &x in &slots[head..] {
                    prefetch(&words[(x >> 6) as usize]);
                }
            }
        }
    };
    let finish = |g: usize, buf: &[u64; STAGE_POSITIONS], out: &mut [bool]| {
        for (o, slots) in out[range(g)].iter_mut().zip(buf.chunks_exact(k)) {
            if *o {
                // Branch-free over the rest: these lines were requested a step ago.
                *o = slots[head..].iter().fold(1, |a, &x| a & bit(x)) & 1 == 1;
            }
        }
    };
    let mut bufs = [[0u64; STAGE_POSITIONS]; 3];
    for (g, buf) in bufs.iter_mut().enumerate().take(groups.min(2)) {
        fill(g, buf);
    }
    if groups > 0 {
        check_head(0, &bufs[0], out);
    }
    for g in 0..groups {
        if g + 2 < groups {
            fill(g + 2, &mut bufs[(g + 2) % 3]);
        }
        if g + 1 < groups {
            check_head(g + 1, &bufs[(g + 1) % 3], out);
        }
        finish(g, &bufs[g % 3], out);
    }
}

impl Persist for Bloom {
    const KIND: FilterKind = FilterKind::Bloom;

    /// Parameters: bits `u64`, hashes `u32`, reserved `u32`, items `u64`, capacity `u64`,
    /// target FPR `f64`. Payload: the bit array, 8 bytes per 64 bits, little-endian.
    fn to_bytes(&self) -> Vec<u8> {
        let p = self.params();
        let mut e = Encoder::new(Self::KIND, self.hasher, p.as_bytes(), self.bits.size_in_bytes() as u64);
        self.bits.write_le(e.payload());
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let bits = r.u64("bits")?;
        let k = r.u32("hashes")?;
        let reserved = r.u32("reserved")?;
        let items = r.u64("items")?;
        let capacity = r.u64("capacity")?;
        let target_fpr = r.fpr("target fpr")?;
        r.finish()?;
        if reserved != 0 {
            return Err(FormatError::InvalidParams("bloom: reserved field is not zero").into());
        }
        if bits == 0 || k == 0 || k > MAX_HASHES {
            return Err(
                FormatError::InvalidParams("bloom: bits and hashes must be positive, hashes ≤ 64").into()
            );
        }
        let bits = BitVec::from_le_bytes(bits, raw.payload())?;
        let ones = bits.count_ones();
        let hasher = raw.hasher();
        Ok(Bloom { bits, k, hasher, hot: HotHasher::new(hasher), items, ones, capacity, target_fpr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::blocked_bloom::tests::digest;
    use crate::format::{assert_each_write_keeps_frozen, NamedWrite};

    /// The staged batch query of large filters answers what one query at a time answers, for
    /// every `k` shape (fewer probes than `HEAD`, the default, the largest) and batch lengths
    /// around the group size, with members and random digests mixed.
    #[test]
    fn staged_batch_query_agrees_with_single_queries() {
        let mut st = 91u64;
        let mut next = || crate::filters::blocked_bloom::tests::splitmix(&mut st);
        let bits = (EARLY_EXIT_BYTES as u64 * 8) * 3 / 2;
        for k in [1u32, 2, 3, 7, 64] {
            let mut f = Bloom::with_params(bits, k, Hasher::default()).unwrap();
            // Filled to about half its bits set (as at capacity), so both answers are common.
            let n = (bits as f64 * std::f64::consts::LN_2 / k as f64) as usize;
            let members: Vec<Digest> = (0..n).map(|_| Digest { h1: next(), h2: next() }).collect();
            f.insert_digests(&members);
            assert!(members.iter().all(|d| f.contains_digest(*d)), "k {k}");
            let per = STAGE_POSITIONS / k as usize;
            for len in [0, 1, per - 1, per, per + 1, 2 * per, 3 * per + 5, 20_000] {
                let digests: Vec<Digest> = (0..len)
                    .map(|i| {
                        if i % 2 == 0 {
                            members[(next() % n as u64) as usize]
                        } else {
                            Digest { h1: next(), h2: next() }
                        }
                    })
                    .collect();
                let mut out = vec![false; len];
                f.contains_digests(&digests, &mut out);
                let want: Vec<bool> = digests.iter().map(|d| f.contains_digest(*d)).collect();
                assert_eq!(out, want, "k {k} len {len}");
                if len >= 20_000 {
                    let yes = want.iter().filter(|&&b| b).count();
                    assert!(yes >= len / 2 && yes < len, "k {k}: {yes} of {len}");
                }
            }
        }
    }

    /// `Probes::first` (closed form, used by the unrolled paths) gives the positions of
    /// successive `Probes::next` calls (the recurrence CountingBloom and the format rely on),
    /// for every `K` the unrolled paths use and a few more, at small, odd and huge `m`.
    #[test]
    fn first_positions_equal_the_recurrence() {
        fn check<const K: usize>(d: Digest, m: u64) {
            let mut p = Probes::new(d, m);
            let want: Vec<u64> = (0..K as u32).map(|i| p.next(i)).collect();
            assert_eq!(Probes::first::<K>(d, m).to_vec(), want, "K {K} m {m} {d:?}");
        }
        let mut st = 5u64;
        let mut next = || crate::filters::blocked_bloom::tests::splitmix(&mut st);
        for m in [1u64, 2, 63, 64, 65, 9_585_059, 1 << 40, u64::MAX] {
            for _ in 0..200 {
                let d = Digest { h1: next(), h2: next() };
                // Every K of the unrolled paths (1 to 16), and the largest k accepted.
                macro_rules! each {
                    ($($k:literal)*) => { $(check::<$k>(d, m);)* };
                }
                each!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 64);
            }
            check::<7>(Digest { h1: u64::MAX, h2: u64::MAX }, m);
            check::<64>(Digest { h1: 0, h2: 0 }, m);
        }
    }

    /// The `bts`/`adc` of `set_bit_count` gives what the portable version gives, for every bit
    /// offset (including offsets of 64 and above, taken mod 64) of random and edge words.
    #[test]
    fn set_bit_count_agrees_with_portable() {
        let mut st = 3u64;
        let mut next = || crate::filters::blocked_bloom::tests::splitmix(&mut st);
        let mut words = vec![0u64, u64::MAX, 1, 1 << 63];
        words.extend((0..200).map(|_| next()));
        for v in words {
            for x in (0..256u64).chain([u64::MAX, u64::MAX - 63, 1 << 40]) {
                for start in [0u64, 5] {
                    let (mut a, mut b) = (start, start);
                    assert_eq!(
                        set_bit_count(v, x, &mut a),
                        set_bit_count_portable(v, x, &mut b),
                        "{v:#x} {x}"
                    );
                    assert_eq!(a, b, "{v:#x} {x}");
                }
            }
        }
    }

    /// The query paths (unrolled for k = 7, the loop for other k; early exit above
    /// `EARLY_EXIT_BYTES`, branch-free below; all without bounds checks) answer what testing
    /// every probe bit with checked indexing answers, and the insert paths set exactly the bits
    /// a checked insert sets, for members and random digests, on filters on each side of the
    /// threshold whose bit counts are not multiples of 64 (the last word partly used).
    #[test]
    fn unchecked_paths_agree_with_checked_probes() {
        fn all_probes(f: &Bloom, d: Digest) -> bool {
            let mut p = Probes::new(d, f.bits.len());
            (0..f.k).all(|i| {
                let x = p.next(i);
                f.bits.words()[(x >> 6) as usize] >> (x & 63) & 1 == 1
            })
        }
        let mut st = 77u64;
        let mut next = || crate::filters::blocked_bloom::tests::splitmix(&mut st);
        // k = 7: the inlined path; 3, 10, 16: the unrolled arms of the other k; 20: the loop.
        for k in [7u32, 3, 10, 16, 20] {
            for bits in [(1u64 << 20) + 13, (EARLY_EXIT_BYTES as u64 * 8) * 3 / 2 + 37] {
                let mut f = Bloom::with_params(bits, k, Hasher::default()).unwrap();
                let mut checked = vec![0u64; f.bits.words().len()];
                // The load at which the FPR is 1%: fill 0.01^(1/k) = 1 - e^(-kn/m).
                let fill = 0.01f64.powf(1.0 / k as f64);
                let n = (-(1.0 - fill).ln() * bits as f64 / k as f64) as usize;
                let members: Vec<Digest> = (0..n).map(|_| Digest { h1: next(), h2: next() }).collect();
                for d in &members {
                    let mut p = Probes::new(*d, bits);
                    let mut flipped = 0;
                    for i in 0..k {
                        let x = p.next(i);
                        flipped += (checked[(x >> 6) as usize] >> (x & 63) & 1 == 0) as u64;
                        checked[(x >> 6) as usize] |= 1 << (x & 63);
                    }
                    assert_eq!(f.insert_digest(*d), flipped != 0, "k {k} bits {bits}");
                }
                assert_eq!(f.bits.words(), &checked[..], "k {k} bits {bits}");
                assert_eq!(f.ones, f.bits.count_ones(), "k {k} bits {bits}");
                assert_eq!(f.bits.words().len() * 8 > EARLY_EXIT_BYTES, bits > 1 << 21);
                assert!(members.iter().all(|d| f.contains_digest(*d)), "k {k} bits {bits}");
                let mut hits = 0;
                for _ in 0..200_000 {
                    let d = Digest { h1: next(), h2: next() };
                    let want = all_probes(&f, d);
                    assert_eq!(f.contains_digest(d), want, "k {k} bits {bits}");
                    hits += want as u32;
                }
                // About 1% (2,000 expected), so both answers occur and the comparison means
                // something.
                assert!(hits > 500 && hits < 5_000, "k {k} bits {bits}: {hits} hits");
            }
        }
    }

    /// Every `k` (1 to 64: the inlined k = 7, each unrolled arm, the loop above 16) at tiny and
    /// odd bit counts (1, 2, 63, 64, 65, 1000, 4099), on filters made by `with_params` and
    /// decoded by `from_bytes` (with items already in, then cleared, unioned, intersected): the
    /// unchecked insert sets exactly the bits, and returns exactly the answers, `ones` and
    /// `items`, of the code before the unchecked paths (the `Probes` loop with checked
    /// indexing, below), and every query answers what testing each probe bit answers.
    #[test]
    fn every_k_and_tiny_m_agree_with_the_checked_loop() {
        /// The insert before the unchecked paths: returns (new, bits flipped).
        fn checked_insert(words: &mut [u64], m: u64, k: u32, d: Digest) -> (bool, u64) {
            let mut p = Probes::new(d, m);
            let mut flipped = 0;
            for i in 0..k {
                let x = p.next(i);
                let w = &mut words[(x >> 6) as usize];
                let mask = 1u64 << (x & 63);
                flipped += (*w & mask == 0) as u64;
                *w |= mask;
            }
            (flipped != 0, flipped)
        }
        fn checked_contains(words: &[u64], m: u64, k: u32, d: Digest) -> bool {
            let mut p = Probes::new(d, m);
            (0..k).all(|i| {
                let x = p.next(i);
                words[(x >> 6) as usize] >> (x & 63) & 1 == 1
            })
        }
        let mut st = 17u64;
        let mut next = || crate::filters::blocked_bloom::tests::splitmix(&mut st);
        for m in [1u64, 2, 63, 64, 65, 1000, 4099] {
            for k in 1..=MAX_HASHES {
                let mut f = Bloom::with_params(m, k, Hasher::default()).unwrap();
                let mut words = vec![0u64; f.bits.words().len()];
                let (mut ones, mut items) = (0u64, 0u64);
                // Enough inserts to fill small filters completely (repeated positions, all
                // answers "not new" at the end) and larger ones partly.
                let n = 3 * m as usize / k as usize + 5;
                for round in 0..4 {
                    for _ in 0..n {
                        let d = Digest { h1: next(), h2: next() };
                        let (new, flipped) = checked_insert(&mut words, m, k, d);
                        assert_eq!(f.insert_digest(d), new, "m {m} k {k}");
                        ones += flipped;
                        items += new as u64;
                        assert!(f.contains_digest(d), "m {m} k {k}");
                    }
                    assert_eq!(f.bits.words(), &words[..], "m {m} k {k} round {round}");
                    assert_eq!((f.ones, f.items), (ones, items), "m {m} k {k} round {round}");
                    for _ in 0..200 {
                        let d = Digest { h1: next(), h2: next() };
                        assert_eq!(f.contains_digest(d), checked_contains(&words, m, k, d), "m {m} k {k}");
                    }
                    // The next round continues on a filter rebuilt another way.
                    f = match round {
                        // Decoded from its file.
                        0 => Bloom::from_bytes(&f.to_bytes()).unwrap(),
                        // Unioned into an empty decoded filter of the same shape.
                        1 => {
                            let mut g =
                                Bloom::from_bytes(&Bloom::with_params(m, k, f.hasher).unwrap().to_bytes())
                                    .unwrap();
                            g.union(&f).unwrap();
                            items = g.items;
                            g
                        }
                        // Intersected with itself, then cleared: the model restarts from zero.
                        _ => {
                            let mut g = f.clone();
                            g.intersect(&f).unwrap();
                            assert_eq!(g.bits, f.bits);
                            g.clear();
                            words.fill(0);
                            (ones, items) = (0, 0);
                            g
                        }
                    };
                }
            }
        }
    }

    /// No `Bloom` of 0 bits can exist (the unchecked probes rely on `m ≥ 1`: `fastrange(_, 0)`
    /// is 0, and 0 bits have no word): `with_params` and `from_bytes` refuse it, with or without
    /// a payload.
    #[test]
    fn zero_bits_are_refused() {
        assert!(Bloom::with_params(0, 7, Hasher::default()).is_err());
        for payload in [0u64, 8] {
            let mut p = ParamWriter::new();
            p.u64(0).u32(7).u32(0).u64(0).u64(1).f64(0.01);
            let mut e = Encoder::new(Bloom::KIND, Hasher::default(), p.as_bytes(), payload);
            e.payload().extend(std::iter::repeat_n(0u8, payload as usize));
            assert!(Bloom::from_bytes(&e.finish()).is_err(), "payload {payload}");
        }
        // The same file with 1 bit decodes (so the refusal above is the bit count's).
        let mut p = ParamWriter::new();
        p.u64(1).u32(7).u32(0).u64(0).u64(1).f64(0.01);
        let mut e = Encoder::new(Bloom::KIND, Hasher::default(), p.as_bytes(), 8);
        e.payload().extend([0u8; 8]);
        let mut f = Bloom::from_bytes(&e.finish()).unwrap();
        assert!(f.insert(b"x") && f.contains(b"x"));
    }

    /// Bloom files with every byte but the CRC mutated (the CRC recomputed, so the mutations
    /// reach the parameter checks, as in the fuzz target `decode`), and with the bit count
    /// rewritten to every value from 0 to 200 (the payload kept): whatever decodes has
    /// `ceil(m / 64)` words and `m ≥ 1`, and inserting into it (which the fuzz target does not
    /// do) and querying it give what the checked probe loop gives.
    #[test]
    fn decoded_files_satisfy_the_unchecked_probes_contract() {
        let golden: &[u8] = include_bytes!("../../tests/fixtures/bloom.sift");
        let with_crc = |mut b: Vec<u8>| {
            let end = b.len() - 4;
            let crc = crc32c::crc32c(&b[..end]);
            b[end..].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let orig = Bloom::from_bytes(golden).unwrap();
        let m_at = golden.windows(8).position(|w| w == orig.num_bits().to_le_bytes()).unwrap();
        let mut files = Vec::new();
        for i in 0..golden.len() - 4 {
            for v in [0u8, 1, 2, 7, 0x3f, 0x40, 0x41, 0x80, 0xff] {
                let mut b = golden.to_vec();
                b[i] = v;
                files.push(with_crc(b));
            }
        }
        for m in 0..=200u64 {
            let mut b = golden.to_vec();
            b[m_at..m_at + 8].copy_from_slice(&m.to_le_bytes());
            files.push(with_crc(b));
        }
        let mut st = 23u64;
        let mut next = || crate::filters::blocked_bloom::tests::splitmix(&mut st);
        let mut decoded = 0;
        for b in &files {
            let Ok(mut f) = Bloom::from_bytes(b) else { continue };
            decoded += 1;
            let m = f.num_bits();
            assert!(m >= 1);
            assert_eq!(f.bits.words().len() as u64, m.div_ceil(64));
            let mut words = f.bits.words().to_vec();
            for _ in 0..40 {
                let d = Digest { h1: next(), h2: next() };
                let mut p = Probes::new(d, m);
                let mut flipped = 0;
                for i in 0..f.k {
                    let x = p.next(i);
                    flipped += (words[(x >> 6) as usize] >> (x & 63) & 1 == 0) as u64;
                    words[(x >> 6) as usize] |= 1 << (x & 63);
                }
                let ones = f.ones;
                assert_eq!(f.insert_digest(d), flipped != 0, "m {m} k {}", f.k);
                assert_eq!(f.ones, ones + flipped);
                let d = Digest { h1: next(), h2: next() };
                let mut p = Probes::new(d, m);
                let want = (0..f.k).all(|i| {
                    let x = p.next(i);
                    words[(x >> 6) as usize] >> (x & 63) & 1 == 1
                });
                assert_eq!(f.contains_digest(d), want, "m {m} k {}", f.k);
            }
            assert_eq!(f.bits.words(), &words[..]);
        }
        // The bit counts 1 to 64 with an empty-enough payload, and a few k and hasher
        // mutations, decode.
        assert!(decoded > 64, "{decoded}");
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(Bloom::new(0, 0.01), Err(Error::InvalidParameter { name: "expected_items", .. })));
        for p in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(Bloom::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })), "p = {p}");
        }
        assert!(matches!(Bloom::new(usize::MAX, 1e-9), Err(Error::CapacityExceeded { .. })));
        assert!(Bloom::with_params(0, 3, Hasher::default()).is_err());
        assert!(Bloom::with_params(64, 0, Hasher::default()).is_err());
        assert!(Bloom::with_params(64, 65, Hasher::default()).is_err());
    }

    #[test]
    fn sizing_matches_the_formulas() {
        let f = Bloom::new(100_000_000, 0.01).unwrap();
        assert_eq!(f.num_hashes(), 7);
        assert_eq!(f.num_bits(), 958_505_838, "seed 002: ≈ 958.5 million bits");
        for p in [0.5, 0.1, 0.01, 0.001, 1e-6] {
            let f = Bloom::new(12_345, p).unwrap();
            let at_capacity = math::bloom_fpr(f.num_bits() as f64, 12_345.0, f.num_hashes() as f64);
            assert!(at_capacity <= p * 1.01, "p = {p}: {at_capacity}");
            assert!(at_capacity > p * 0.99, "p = {p}: oversized, {at_capacity}");
        }
    }

    #[test]
    fn insert_reports_new_and_len_counts() {
        let mut f = Bloom::new(1000, 0.01).unwrap();
        assert!(f.insert("a"));
        assert!(!f.insert("a"));
        assert_eq!(f.len(), 1);
        assert!(f.contains("a"));
        assert!(f.contains_hash(f.hasher().hash64(b"a")));
    }

    #[test]
    fn union_and_intersection() {
        let mut a = Bloom::new(10_000, 0.01).unwrap();
        let mut b = Bloom::new(10_000, 0.01).unwrap();
        for i in 0..3000u32 {
            a.insert(i.to_le_bytes());
        }
        for i in 2000..5000u32 {
            b.insert(i.to_le_bytes());
        }
        let mut u = a.clone();
        u.union(&b).unwrap();
        assert!((0..5000u32).all(|i| u.contains(i.to_le_bytes())));
        let est = u.estimated_items();
        assert!((est - 5000.0).abs() < 150.0, "estimate {est}");
        let mut x = a.clone();
        x.intersect(&b).unwrap();
        assert!((2000..3000u32).all(|i| x.contains(i.to_le_bytes())));
        let other = Bloom::new(20_000, 0.01).unwrap();
        assert!(matches!(a.union(&other), Err(Error::Incompatible { .. })));
    }

    #[test]
    fn batch_agrees_with_single() {
        let mut f = Bloom::new(50_000, 0.01).unwrap();
        let items: Vec<[u8; 8]> = (0..50_000u64).map(|i| (i * 7).to_le_bytes()).collect();
        assert_eq!(f.insert_many(&items), f.len());
        let probes: Vec<[u8; 8]> = (0..100_000u64).map(|i| i.to_le_bytes()).collect();
        let batch = f.contains_many(&probes);
        for (p, b) in probes.iter().zip(batch) {
            assert_eq!(f.contains(p), b);
        }
    }

    /// A filter above the huge-page threshold and its plain-storage copy agree bit for bit.
    #[test]
    fn huge_page_and_plain_storage_agree() {
        let mut f = Bloom::new(4_000_000, 0.01).unwrap();
        assert_eq!(f.bits.is_huge(), cfg!(target_os = "linux"));
        let mut g = f.clone();
        g.bits = g.bits.with_plain_storage();
        let items: Vec<[u8; 8]> = (0..300_000u64).map(|i| (i * 31).to_le_bytes()).collect();
        assert_eq!(f.insert_many(&items[..150_000]), g.insert_many(&items[..150_000]));
        for i in &items[150_000..] {
            assert_eq!(f.insert(i), g.insert(i));
        }
        assert_eq!(f, g);
        assert!(items.iter().all(|i| f.contains(i)), "false negative");
        assert_eq!(f.to_bytes(), g.to_bytes());
    }

    #[test]
    fn round_trip() {
        let mut f = Bloom::new(1000, 0.001).unwrap();
        for i in 0..700u32 {
            f.insert(i.to_string());
        }
        let bytes = f.to_bytes();
        let g = Bloom::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n / 2] ^= 0x10;
        assert!(matches!(Bloom::from_bytes(&bad), Err(Error::Format(FormatError::ChecksumMismatch { .. }))));
    }

    /// A filter of 8 MiB of bits (huge storage on Linux, so it freezes: 32 copy-on-write pieces)
    /// with `k` hashes and 20,000 items.
    fn big_bloom(k: u32) -> Bloom {
        let mut f = Bloom::with_params(64 << 20, k, Hasher::default()).unwrap();
        let mut st = 11;
        for _ in 0..20_000 {
            f.insert_digest(digest(&mut st));
        }
        f
    }

    /// Each kind of write, alone while the filter is frozen, changes the live filter and leaves
    /// the frozen file as it was at the freeze, whether the filter is dropped before the file is
    /// written or not: one insert (with the unrolled `k = 7` and with the loop of `k = 20`), a
    /// batch insert, a union, an intersection, a clear.
    #[test]
    fn every_write_alone_keeps_the_frozen_file() {
        assert!(Bloom::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        for k in [7, 20] {
            let mut st = 5;
            let one = digest(&mut st);
            let batch: Vec<Digest> = (0..5000).map(|_| digest(&mut st)).collect();
            let mut full = Bloom::with_params(64 << 20, k, Hasher::default()).unwrap();
            for _ in 0..30_000 {
                full.insert_digest(digest(&mut st));
            }
            let ops: Vec<NamedWrite<'_, Bloom>> = vec![
                ("insert", Box::new(|f: &mut Bloom| assert!(f.insert_digest(one)))),
                ("batch insert", Box::new(|f: &mut Bloom| assert!(f.insert_digests(&batch) > 4900))),
                ("union", Box::new(|f: &mut Bloom| f.union(&full).unwrap())),
                ("intersect", Box::new(|f: &mut Bloom| f.intersect(&full).unwrap())),
                ("clear", Box::new(|f: &mut Bloom| f.clear())),
            ];
            assert_each_write_keeps_frozen(&|| big_bloom(k), |f| f.to_bytes(), Bloom::freeze, &ops);
        }
        let f = big_bloom(7);
        drop(f.freeze());
        assert!(f.freeze().is_some(), "once written, the frozen file lets go");
    }

    /// While a snapshot reads the filter, an insert copies aside only the pieces of the words it
    /// sets (at most `k`): the pieces saved are exactly those where the live bits now differ
    /// from the frozen ones.
    #[test]
    fn an_insert_during_a_freeze_copies_only_the_pieces_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        use crate::bits::COW_PIECE;
        let mut f = big_bloom(7);
        let bytes = |f: &Bloom| f.bits.words().iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
        let at_freeze = bytes(&f);
        let want = f.to_bytes();
        let frozen = f.freeze().unwrap();
        let g = frozen.guard(0);
        assert_eq!(g.len() / COW_PIECE, 32);
        let changed = |f: &Bloom| {
            let live = bytes(f);
            crate::bits::pieces_differing(&live, &at_freeze).len()
        };
        let mut st = 99;
        for i in 0..5 {
            let saved = g.saved_pieces();
            assert!(f.insert_digest(digest(&mut st)));
            assert!(g.saved_pieces() <= saved + 7, "seven words written, seven pieces at most");
            assert_eq!(g.saved_pieces(), changed(&f), "after insert {i}");
        }
        assert!(g.saved_pieces() > 7 && g.saved_pieces() < 32, "{}", g.saved_pieces());
        assert!(frozen.to_vec() == want, "the frozen file is the filter at the freeze");
    }
}
