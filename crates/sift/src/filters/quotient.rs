//! Quotient filter: a compact hash table of `r`-bit remainders, with deletes, counts, merge and
//! resize from the stored fingerprints, in the rank-and-select layout.
//!
//! Pandey, Bender, Johnson & Patro, "A general-purpose counting filter: making every bit count",
//! SIGMOD 2017 (the rank-and-select quotient filter, RSQF, implemented here); Bender,
//! Farach-Colton, Johnson, Kraner, Kuszmaul, Medjedovic, Montes, Shetty, Spillane & Zadok, "Don't
//! thrash: how to cache your hash on flash", VLDB 2012 (the quotient filter with 3 metadata bits
//! per slot, which files written by earlier versions of `sift` hold and which are still read).
//!
//! * **Idea**: each item has a `(q + r)`-bit fingerprint `V`; its high part, the quotient, names a
//!   home slot, and only the low `r` bits (the remainder) are stored. Remainders of equal
//!   quotient form a *run*, kept sorted; runs are kept in quotient order, each starting at its
//!   home slot or right after the previous run (linear probing, sorted). Two bits per slot
//!   describe the layout: `occupied` (some item has this slot as home) and `runend` (this slot
//!   ends a run). The run of quotient `q` ends at the `k`-th runend bit after the runs of the
//!   quotients before `q`'s 64-slot block, `k` being the number of occupied bits of the block up
//!   to `q` (*rank*); finding that bit is a *select*. So that select starts near `q` and not at
//!   slot 0, each block keeps an *offset*: how far past its first slot the runs of earlier
//!   quotients reach. A query is a popcount, one or two word-wide selects and one comparison of
//!   the run's remainders in a single 64-bit word (a zero-lane test over its `r`-bit lanes; the
//!   slot-by-slot scan only for runs longer than `64 / r` slots or begun in an earlier block).
//! * **Layout in memory**: per 64-slot block, the occupied word, the runend word and the 64
//!   remainders, `8·(2 + r)` bytes together (the bytes written to a file, layout 1), and apart,
//!   one offset byte per block (255 = "recompute from the bitmaps"; on distinct keys filled to
//!   95% load the largest offset was 74 slots at n = 1M and 108 at 10M). The offsets are derived,
//!   never stored in a file. They are not kept inside the blocks as qfilter does: at n = 1M the
//!   offset array is 16 KB and stays in the L1/L2 cache, its load took ~2% of the query's
//!   samples under `perf`, and the in-cache query (`examples/quotient_query_probe.rs` at
//!   n = 20,000) trailed qfilter by as much as the out-of-cache one, so the cost was not that
//!   miss (docs/BENCHMARKS.md, branch `quot9`).
//! * **Fingerprint**: `V = ⌊h1 · nq · 2^r / 2^64⌋` for `nq` quotients: quotient `V >> r`,
//!   remainder `V mod 2^r`. This is the multiply-shift range reduction (Lemire 2019) applied to
//!   `nq · 2^r`, so `nq` is any integer (no power-of-two rounding), and doubling `nq` while
//!   dropping one remainder bit keeps `V` unchanged: [`Quotient::resize`] needs only the stored
//!   fingerprints, not the items.
//! * **FPR**: `p = 1 - e^(-α/2^r) ≈ α · 2^-r` at load `α = n / nq`
//!   ([`crate::math::quotient_fpr`]).
//! * **Space**: `r + 2` bits per slot plus an 8-bit offset per 64 slots (`r + 2.125`), `nq / 0.95`
//!   slots for `n` items, plus `64 + 8·√nq` overflow slots at the end of the table (the table
//!   does not wrap around), rounded up to whole 64-slot blocks: at 1% `r = 7` and about 9.7
//!   bits/key for a million items (9.68, measured in the tests; 9.81 with the 16-bit offsets
//!   before branch `quot9`).
//! * **Parameters**: [`Quotient::new`] takes `nq = ⌈n / 0.95⌉` and `r = ⌈log2(0.95 / p)⌉`
//!   (1 to 56, with `nq · 2^r ≤ 2^64`); [`Quotient::with_params`] takes both.
//! * **Limits**: at most `nq` items (load 1); an insert beyond, or one whose shifted run would
//!   pass the end of the overflow slots, is [`Error::Full`] and changes nothing. An insert or
//!   delete shifts the slots up to the next empty one by one place (word-wide), so its cost grows
//!   like linear probing's, `1/(1-α)^2` slots, which is why the constructor plans for 95% load.
//! * **Duplicates and deletes**: inserting an item again stores its remainder again;
//!   [`Quotient::count`] counts the copies and [`Remove::remove`] removes one. A delete only ever
//!   removes one stored fingerprint equal to the item's, so it never loses another member; but
//!   removing an item that was never inserted can remove a different item with the same
//!   fingerprint (a false negative for it): only remove what you inserted.
//!
//! ```
//! use sift::prelude::*;
//! use sift::Quotient;
//!
//! let mut f = Quotient::new(10_000, 0.01)?; // r = 7
//! for i in 0..10_000u32 {
//!     f.try_insert(i.to_le_bytes())?;
//! }
//! assert!((0..10_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members: p = 1 - e^(-0.95/128) = 0.74%; the 99.9% binomial bound is 0.83%.
//! let fp = (10_000..110_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 830, "{fp} false positives");
//! f.resize()?; // twice the quotients, one remainder bit less, same items
//! assert!((0..10_000u32).all(|i| f.contains(i.to_le_bytes())));
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{prefetch, select64, try_zeroed, Storage, MAX_BYTES};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{decode_verified, Encoder, FilterKind, ParamWriter};
use crate::hash::{Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist, Remove};

/// Largest remainder width (kept from the 3-metadata-bit layout, where a slot had to fit in 64
/// bits, so that every filter of an earlier version can be read and resized alike).
pub const MAX_REMAINDER_BITS: u32 = 56;
/// Load the constructor sizes for: `nq = ⌈n / DESIGN_LOAD⌉`.
pub const DESIGN_LOAD: f64 = 0.95;

/// Layout code (the parameter block's `layout` field) of the 3-metadata-bit layout of files
/// written by earlier versions; decoded by converting to the rank-and-select layout.
const LAYOUT_CLASSIC: u32 = 0;
/// Layout code of the rank-and-select layout, the one written.
const LAYOUT_RANK_SELECT: u32 = 1;

/// An offset at or above this is stored as this value, meaning "recompute" (the slow path,
/// [`Quotient::offset_slow`]). Offsets are small on distinct random keys: filled to 95% load, the
/// largest offset was 74 slots at n = 1M and 108 at n = 10M (none reached 128), so one byte
/// holds them and the slow path is taken only behind a cluster of heavy duplicates.
const OFFSET_SATURATED: u8 = u8::MAX;

/// Overflow slots after the `nq` home slots: runs shifted past the last home slot land there.
/// The spill at the end behaves like the queue of a random walk, `O(√nq)`; `8·√nq + 64` leaves a
/// wide margin even at load 1.
pub fn overflow_slots(quotients: u64) -> u64 {
    64 + 8 * quotients.isqrt()
}

/// Slots of the rank-and-select layout: home and overflow slots, rounded up to whole blocks.
fn rank_select_slots(quotients: u64) -> u64 {
    (quotients + overflow_slots(quotients)).div_ceil(64) * 64
}

#[inline(always)]
fn low_mask(bits: u32) -> u64 {
    u64::MAX >> (64 - bits)
}

/// A quotient filter. See the [module documentation](self).
#[derive(Clone, Debug)]
pub struct Quotient {
    /// Blocks of `2 + r` words for 64 slots each: the occupied bits, the runend bits, then the
    /// 64 `r`-bit remainders packed little-endian (slot `s` at bit `s·r`). One block is what a
    /// query touches, so its metadata and remainders are kept together. One zero guard word at
    /// the end lets a remainder read always load two words. In a [`Storage`], so that a table of
    /// 4 MiB or more (about 3.5 million slots at `r = 7`) is on transparent huge pages where the
    /// system allows it: at n = 10M the 12 MB table spans ~3,000 4 KiB pages, more than the TLB
    /// covers, and every random probe would otherwise miss the TLB as well as the cache.
    blocks: Storage<u64>,
    /// Per block `b`: the slots at or after `64·b` taken by runs of quotients below `64·b`
    /// (`OFFSET_SATURATED` = recompute). Derived from `blocks`; rebuilt on decode.
    offsets: Vec<u8>,
    /// Threshold at which offsets saturate (`OFFSET_SATURATED`; lowered by tests to exercise the
    /// slow path).
    offset_cap: u8,
    /// Words per block, `2 + r`.
    stride: usize,
    quotients: u64,
    /// `nq · 2^r` modulo `2^64` (0 for `2^64`): the fingerprint range, so that
    /// [`Quotient::fingerprint`] is one 64×64→128-bit multiply.
    range: u64,
    slots: u64,
    r: u32,
    hasher: Hasher,
    /// `hasher` with its per-seed constants precomputed, for the insert and query paths.
    hot: HotHasher,
    /// Bit 0 of every whole `r`-bit lane of a 64-bit word, lanes counted from the top
    /// (`Σ 2^(64 - (j+1)·r)`, `j < ⌊64 / r⌋`): the broadcast of [`Quotient::contains_in_window`].
    lane_ones: u64,
    /// [`Quotient::fast_bits`], read once at construction: the query and insert test this field
    /// (in a cache line they load anyway) instead of std's detection cache behind the GOT.
    /// Always `false` (and unread) on other targets.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    fast: bool,
    items: u64,
    capacity: u64,
    target_fpr: f64,
}

/// Equal when they hold the same table (the offsets are derived from it).
impl PartialEq for Quotient {
    fn eq(&self, o: &Self) -> bool {
        self.blocks == o.blocks
            && self.quotients == o.quotients
            && self.r == o.r
            && self.hasher == o.hasher
            && self.items == o.items
            && self.capacity == o.capacity
            && self.target_fpr.to_bits() == o.target_fpr.to_bits()
    }
}

impl Quotient {
    /// A filter for `expected_items` at false-positive rate `fpr`, with the default hash.
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(expected_items as u64, fpr);
        Self::with_hasher(expected_items, fpr, Hasher::new(kind, 0))
    }

    /// Like [`Quotient::new`], with a chosen hash function and seed.
    pub fn with_hasher(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let quotients = (expected_items as f64 / DESIGN_LOAD).ceil();
        let r = (DESIGN_LOAD / fpr).log2().ceil().max(1.0);
        if r > MAX_REMAINDER_BITS as f64 {
            return Err(Error::param("fpr", fpr, "at least 2^-56 for a quotient filter"));
        }
        let bytes = quotients * (r + 2.125) / 8.0;
        if bytes > MAX_BYTES as f64 {
            return Err(Error::CapacityExceeded {
                requested_bytes: bytes.min(u128::MAX as f64) as u128,
                limit_bytes: MAX_BYTES,
            });
        }
        let mut f = Self::with_params(quotients as u64, r as u32, hasher)?;
        f.capacity = expected_items as u64;
        f.target_fpr = fpr;
        Ok(f)
    }

    /// A filter of `quotients` home slots (any count ≥ 1) and `remainder_bits`-bit remainders
    /// (1 to 56), with `quotients · 2^remainder_bits ≤ 2^64`.
    pub fn with_params(quotients: u64, remainder_bits: u32, hasher: Hasher) -> Result<Self> {
        if quotients == 0 {
            return Err(Error::param("quotients", quotients, "at least 1"));
        }
        if remainder_bits == 0 || remainder_bits > MAX_REMAINDER_BITS {
            return Err(Error::param("remainder_bits", remainder_bits, "between 1 and 56"));
        }
        if (quotients as u128) << remainder_bits > 1u128 << 64 {
            return Err(Error::param(
                "remainder_bits",
                remainder_bits,
                "at most 64 - log2(quotients): the fingerprint has 64 bits",
            ));
        }
        let slots = rank_select_slots(quotients);
        let nblocks = slots / 64;
        let stride = 2 + remainder_bits as usize;
        let words = nblocks as u128 * stride as u128 + 1;
        let bytes = words * 8 + nblocks as u128;
        if bytes > MAX_BYTES || words > usize::MAX as u128 {
            return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
        }
        Ok(Quotient {
            blocks: Storage::zeroed(words as usize)?,
            offsets: try_zeroed(nblocks as usize)?,
            offset_cap: OFFSET_SATURATED,
            stride,
            quotients,
            range: ((quotients as u128) << remainder_bits) as u64,
            slots,
            r: remainder_bits,
            hasher,
            hot: HotHasher::new(hasher),
            lane_ones: (1..=64 / remainder_bits).fold(0, |a, j| a | 1 << (64 - j * remainder_bits)),
            fast: Self::fast_bits(),
            items: 0,
            capacity: ((quotients as f64) * DESIGN_LOAD).floor().max(1.0) as u64,
            target_fpr: math::quotient_fpr(remainder_bits, DESIGN_LOAD),
        })
    }

    /// Number of home slots (quotients) `nq`.
    pub fn num_quotients(&self) -> u64 {
        self.quotients
    }

    /// Number of slots including the overflow slots.
    pub fn num_slots(&self) -> u64 {
        self.slots
    }

    /// Remainder width `r`.
    pub fn remainder_bits(&self) -> u32 {
        self.r
    }

    /// The item count the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for (at [`Quotient::capacity`] items).
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Items per home slot, `n / nq`; inserts fail beyond 1.
    pub fn load_factor(&self) -> f64 {
        self.items as f64 / self.quotients as f64
    }

    /// The fingerprint `V` of a digest (what [`Quotient::iter_hashes`] yields for it).
    #[inline]
    pub fn fingerprint(&self, d: Digest) -> u64 {
        // ⌊h1 · nq · 2^r / 2^64⌋: with nq · 2^r < 2^64 the high word of one 64×64 product
        // (the same bits as the 64×128 product it replaces); with nq · 2^r = 2^64 it is h1.
        if self.range == 0 {
            d.h1
        } else {
            ((d.h1 as u128 * self.range as u128) >> 64) as u64
        }
    }

    /// Number of stored copies of `item`'s fingerprint: at least the number of times it was
    /// inserted and not removed.
    pub fn count<T: AsRef<[u8]>>(&self, item: T) -> usize {
        self.count_digest(self.hasher.digest(item.as_ref()))
    }

    /// [`Quotient::count`] for a digest.
    pub fn count_digest(&self, d: Digest) -> usize {
        self.count_fingerprint(self.fingerprint(d))
    }

    /// Number of stored copies of fingerprint `v`.
    fn count_fingerprint(&self, v: u64) -> usize {
        let (q, rem) = self.split(v);
        let Some(end) = self.run_end(q) else { return 0 };
        let mut i = end;
        let mut n = 0;
        loop {
            let x = self.rem(i);
            if x < rem {
                return n;
            }
            n += (x == rem) as usize;
            if i == q || self.is_runend(i - 1) {
                return n;
            }
            i -= 1;
        }
    }

    /// Inserts `item`; `Ok(true)` if it was not reported present before, `Ok(false)` if another
    /// copy was stored, [`Error::Full`] if the filter holds `nq` items or the run would pass the
    /// end of the table (the filter is then unchanged).
    #[inline]
    pub fn try_insert<T: AsRef<[u8]>>(&mut self, item: T) -> Result<bool> {
        #[cfg(target_arch = "x86_64")]
        if self.fast {
            // SAFETY: `fast` is `fast_bits()`, set at construction: the CPU has POPCNT, BMI1 and
            // BMI2, the only requirements of the `target_feature` function.
            return unsafe { self.try_insert_item_fast(item) };
        }
        self.try_insert_item_portable(item)
    }

    /// Hash and insert in one function compiled with POPCNT, BMI1 and BMI2: one call per insert.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2")]
    fn try_insert_item_fast<T: AsRef<[u8]>>(&mut self, item: T) -> Result<bool> {
        let v = self.fingerprint(self.hot_digest(item.as_ref()));
        self.insert_fingerprint_body::<true>(v).map(|present| !present)
    }

    /// [`Quotient::try_insert_item_fast`] for CPUs without POPCNT, BMI1 and BMI2.
    #[inline(never)]
    fn try_insert_item_portable<T: AsRef<[u8]>>(&mut self, item: T) -> Result<bool> {
        let v = self.fingerprint(self.hot_digest(item.as_ref()));
        self.insert_fingerprint_body::<true>(v).map(|present| !present)
    }

    /// [`Quotient::try_insert`] for a caller-computed 64-bit hash.
    pub fn try_insert_hash(&mut self, hash: u64) -> Result<bool> {
        self.try_insert_digest(Digest::from_u64(hash))
    }

    /// [`Quotient::try_insert`] for a digest.
    pub fn try_insert_digest(&mut self, d: Digest) -> Result<bool> {
        let v = self.fingerprint(d);
        self.insert_fingerprint(v).map(|present| !present)
    }

    /// The stored fingerprints `V` (quotient `<< r` | remainder), in increasing order, each as
    /// many times as it is stored.
    pub fn iter_hashes(&self) -> Hashes<'_> {
        Hashes { f: self, next_q: 0, frontier: 0, q: 0, i: 1, end: 0 }
    }

    /// Doubles the number of quotients and drops one remainder bit, rebuilding from the stored
    /// fingerprints: the items stay, the FPR at the same item count stays the same
    /// (`α/2 · 2^-(r-1)`), and the filter takes up to twice as many items.
    /// Fails (unchanged) when `r = 1` or the larger table cannot be allocated.
    pub fn resize(&mut self) -> Result<()> {
        if self.r <= 1 {
            return Err(Error::param("remainder_bits", self.r, "at least 2 to resize"));
        }
        let quotients = self
            .quotients
            .checked_mul(2)
            .ok_or(Error::CapacityExceeded { requested_bytes: u128::MAX, limit_bytes: MAX_BYTES })?;
        let mut g = Quotient::with_params(quotients, self.r - 1, self.hasher)?;
        g.offset_cap = self.offset_cap;
        let mut v: Vec<u64> = Vec::new();
        v.try_reserve_exact(self.items as usize)
            .map_err(|_| Error::OutOfMemory { bytes: self.items as usize * 8 })?;
        v.extend(self.iter_hashes());
        g.build_sorted(&v)?;
        g.capacity = self.capacity.saturating_mul(2);
        g.target_fpr = self.target_fpr;
        *self = g;
        Ok(())
    }

    /// Adds every fingerprint of `other` (same hash function and seed, same fingerprint space
    /// `nq · 2^r`, e.g. the same parameters or one a resized copy of the other).
    /// [`Error::Full`] if the union does not fit; `self` is then unchanged.
    pub fn merge(&mut self, other: &Quotient) -> Result<()> {
        if self.hasher != other.hasher {
            return Err(Error::Incompatible { reason: "different hash function or seed" });
        }
        if (self.quotients as u128) << self.r != (other.quotients as u128) << other.r {
            return Err(Error::Incompatible { reason: "different fingerprint space (quotients · 2^r)" });
        }
        let total = self.items + other.items;
        if total > self.quotients {
            return Err(Error::Full { len: self.items as usize });
        }
        let mut v: Vec<u64> = Vec::new();
        v.try_reserve_exact(total as usize).map_err(|_| Error::OutOfMemory { bytes: total as usize * 8 })?;
        v.extend(self.iter_hashes());
        v.extend(other.iter_hashes());
        v.sort_unstable();
        let mut g = Quotient::with_params(self.quotients, self.r, self.hasher)?;
        g.offset_cap = self.offset_cap;
        g.capacity = self.capacity;
        g.target_fpr = self.target_fpr;
        g.build_sorted(&v).map_err(|_| Error::Full { len: self.items as usize })?;
        *self = g;
        Ok(())
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        self.blocks.fill(0);
        self.offsets.fill(0);
        self.items = 0;
    }

    // ---- slots ---------------------------------------------------------------------------

    #[inline(always)]
    fn split(&self, v: u64) -> (u64, u64) {
        (v >> self.r, v & low_mask(self.r))
    }

    #[inline(always)]
    fn nblocks(&self) -> u64 {
        self.slots >> 6
    }

    #[inline(always)]
    fn occ_word(&self, b: u64) -> u64 {
        self.blocks[b as usize * self.stride]
    }

    #[inline(always)]
    fn runend_word(&self, b: u64) -> u64 {
        self.blocks[b as usize * self.stride + 1]
    }

    #[inline(always)]
    fn is_runend(&self, i: u64) -> bool {
        self.runend_word(i >> 6) >> (i & 63) & 1 != 0
    }

    #[inline(always)]
    fn set_occupied(&mut self, q: u64, on: bool) {
        let w = &mut self.blocks[(q >> 6) as usize * self.stride];
        *w = (*w & !(1 << (q & 63))) | ((on as u64) << (q & 63));
    }

    #[inline(always)]
    fn set_runend(&mut self, i: u64, on: bool) {
        let w = &mut self.blocks[(i >> 6) as usize * self.stride + 1];
        *w = (*w & !(1 << (i & 63))) | ((on as u64) << (i & 63));
    }

    /// The remainder in slot `i`: one unaligned two-word read (the guard word keeps the second
    /// word in bounds), no branch.
    #[inline(always)]
    fn rem(&self, i: u64) -> u64 {
        let r = self.r as u64;
        let bit = (i & 63) * r;
        let k = (i >> 6) as usize * self.stride + 2 + (bit >> 6) as usize;
        let two = self.blocks[k] as u128 | (self.blocks[k + 1] as u128) << 64;
        (two >> (bit & 63)) as u64 & low_mask(self.r)
    }

    #[inline(always)]
    fn set_rem(&mut self, i: u64, v: u64) {
        let r = self.r as u64;
        let mask = low_mask(self.r);
        let bit = (i & 63) * r;
        let k = (i >> 6) as usize * self.stride + 2 + (bit >> 6) as usize;
        let off = (bit & 63) as u32;
        self.blocks[k] = (self.blocks[k] & !(mask << off)) | (v << off);
        if off as u64 + r > 64 {
            let hi = mask >> (64 - off);
            self.blocks[k + 1] = (self.blocks[k + 1] & !hi) | (v >> (64 - off));
        }
    }

    /// Block `b`'s offset: slots at or after `64·b` taken by runs of quotients below `64·b`.
    #[inline(always)]
    fn offset(&self, b: u64) -> u64 {
        let o = self.offsets[b as usize];
        if o < self.offset_cap {
            o as u64
        } else {
            self.offset_slow(b)
        }
    }

    /// Block `b`'s offset computed from the bitmaps, starting from the nearest earlier block with
    /// an exact offset (block 0's is always 0: no quotient lies below it).
    #[cold]
    fn offset_slow(&self, b: u64) -> u64 {
        let mut b0 = b;
        while self.offsets[b0 as usize] >= self.offset_cap {
            b0 -= 1;
        }
        let start = (b0 << 6) + self.offsets[b0 as usize] as u64;
        let k: u64 = (b0..b).map(|j| self.occ_word(j).count_ones() as u64).sum();
        self.offset_from(start, k, b)
    }

    /// Offset of block `b` given that the runs of quotients below an earlier block start at
    /// `start` and that `k` more quotients are occupied between that block and `b`.
    fn offset_from(&self, start: u64, k: u64, b: u64) -> u64 {
        let first = b << 6;
        if k == 0 {
            start.saturating_sub(first)
        } else {
            (self.select_from(start, k) + 1).saturating_sub(first)
        }
    }

    /// Position of the `d`-th (`d ≥ 1`) runend bit at or after slot `x` (`slots` if there is
    /// none, which a consistent table never asks for).
    #[inline(always)]
    fn select_from(&self, x: u64, mut d: u64) -> u64 {
        let mut b = x >> 6;
        if b >= self.nblocks() {
            return self.slots;
        }
        let mut w = self.runend_word(b) & (u64::MAX << (x & 63));
        loop {
            let c = w.count_ones() as u64;
            if d <= c {
                return (b << 6) + select64(w, (d - 1) as u32) as u64;
            }
            d -= c;
            b += 1;
            if b >= self.nblocks() {
                return self.slots;
            }
            w = self.runend_word(b);
        }
    }

    /// The end of quotient `q`'s run, if `q` is occupied (rank in the block, then select from
    /// the block's offset).
    #[inline(always)]
    fn run_end(&self, q: u64) -> Option<u64> {
        let b = q >> 6;
        // The run usually ends in q's own block, near q: fetch the remainder word of slot q
        // now, so that its cache miss overlaps the one of the metadata words instead of
        // following it (the block is 8·(2 + r) bytes, often two cache lines).
        prefetch(&self.blocks[b as usize * self.stride + 2 + (((q & 63) * self.r as u64) >> 6) as usize]);
        let occ = self.occ_word(b);
        if occ >> (q & 63) & 1 == 0 {
            return None;
        }
        let d = (occ & (u64::MAX >> (63 - (q & 63)))).count_ones() as u64;
        Some(self.select_from((b << 6) + self.offset(b), d))
    }

    /// The first occupied quotient in `from..to`, if any.
    #[inline(always)]
    fn next_occupied(&self, from: u64, to: u64) -> Option<u64> {
        if from >= to {
            return None;
        }
        let mut b = from >> 6;
        let mut w = self.occ_word(b) & (u64::MAX << (from & 63));
        loop {
            if w != 0 {
                let q = (b << 6) + w.trailing_zeros() as u64;
                return (q < to).then_some(q);
            }
            b += 1;
            if b << 6 >= to || b >= self.nblocks() {
                return None;
            }
            w = self.occ_word(b);
        }
    }

    /// Adds one to (`grow`) or removes one from the offsets of the blocks starting in
    /// `q+1 ..= e`: the blocks whose earlier runs grew or shrank by one slot. A saturated offset
    /// stays saturated ("recompute"), so a stored offset below the cap is always exact.
    fn adjust_offsets(&mut self, q: u64, e: u64, grow: bool) {
        let (lo, hi) = ((q >> 6) + 1, (e >> 6).min(self.nblocks() - 1));
        let cap = self.offset_cap;
        for b in lo..=hi {
            let o = &mut self.offsets[b as usize];
            if *o < cap {
                if grow {
                    *o += 1;
                } else {
                    *o -= 1;
                }
            }
        }
    }

    /// Inserts one fingerprint (another copy if it is stored already); `Ok(true)` if a copy was
    /// already stored. (Inlined into the two instantiations of [`Quotient::insert_fingerprint`].)
    ///
    /// One rank and at most one select: `d`, the occupied quotients of `q`'s block before `q`,
    /// and the block's offset tell whether slot `q` is free with popcounts alone (the runend
    /// bits from the offset to `q` number `d`: every run of a quotient before `q` ends before
    /// it); then the item takes slot `q` as a run of one, nothing moves (the fast path, most
    /// inserts below ~70% load). Otherwise one select finds the end of `q`'s run (or, `q` being
    /// unoccupied, of the last run before it), which is reused for the shift and for the bits.
    /// `FREE_SLOT = false` turns the fast path off (tests pin the two paths against each other).
    #[inline(always)]
    fn insert_fingerprint_body<const FREE_SLOT: bool>(&mut self, v: u64) -> Result<bool> {
        if self.items >= self.quotients {
            return Err(Error::Full { len: self.items as usize });
        }
        let (q, rem) = self.split(v);
        let b = q >> 6;
        let qi = (q & 63) as u32;
        let base = b as usize * self.stride;
        // As in `run_end`: the remainder word of slot q, which the insert reads or writes in
        // most cases, is fetched while the metadata words load.
        prefetch(&self.blocks[base + 2 + ((qi as u64 * self.r as u64) >> 6) as usize]);
        let occ = self.blocks[base];
        let occupied = occ >> qi & 1 != 0;
        let d = (occ & !(u64::MAX << qi)).count_ones() as u64;
        let off = self.offset(b);
        if FREE_SLOT && !occupied && off <= qi as u64 {
            let runends = self.blocks[base + 1] & bit_range(off as usize, qi as usize);
            if runends.count_ones() as u64 == d {
                // Slot q is free: a run of one, no shift, no offset changes (they count the
                // slots at or after a block's start taken by earlier blocks' runs).
                self.blocks[base] = occ | 1 << qi;
                self.blocks[base + 1] |= 1 << qi;
                self.set_rem(q, rem);
                self.items += 1;
                return Ok(false);
            }
        }
        let start = (b << 6) + off;
        let (p, present, end) = if occupied {
            let end = self.select_from(start, d + 1);
            // Sorted run: the new copy goes after every remainder ≤ it.
            let (mut i, mut p) = (end, end + 1);
            let mut present = false;
            loop {
                let x = self.rem(i);
                if x <= rem {
                    present = x == rem;
                    break;
                }
                p = i;
                if i == q || self.is_runend(i - 1) {
                    break;
                }
                i -= 1;
            }
            (p, present, Some(end))
        } else {
            let frontier = if d == 0 { start } else { self.select_from(start, d) + 1 };
            (q.max(frontier), false, None)
        };
        // Slots p..=end are q's run, in use: the search for a free slot starts after it. Every
        // run of a quotient ≤ q ends before that slot; the runs of the occupied quotients in
        // q+1..=x have not begun before it.
        let x = end.map_or(p, |end| end + 1);
        let e = if x >= self.slots { x } else { self.first_free(x, self.occupied_in(q + 1, x + 1)) };
        if e >= self.slots {
            return Err(Error::Full { len: self.items as usize });
        }
        self.shift_up(p, e);
        self.set_rem(p, rem);
        match end {
            None => {
                self.set_runend(p, true);
                self.set_occupied(q, true);
            }
            Some(end) if p == end + 1 => {
                self.set_runend(end, false);
                self.set_runend(p, true);
            }
            Some(_) => self.set_runend(p, false),
        }
        self.adjust_offsets(q, e, true);
        self.items += 1;
        Ok(present)
    }

    /// Number of occupied quotients in `from..to` (`to ≤ slots`), word by word.
    #[inline(always)]
    fn occupied_in(&self, from: u64, to: u64) -> u64 {
        if from >= to {
            return 0;
        }
        let (fb, tb) = (from >> 6, (to - 1) >> 6);
        let mut w = self.occ_word(fb) & (u64::MAX << (from & 63));
        let mut n = 0;
        for b in fb..tb {
            n += w.count_ones() as u64;
            w = self.occ_word(b + 1);
        }
        n + (w & (u64::MAX >> (63 - ((to - 1) & 63)))).count_ones() as u64
    }

    /// The first unused slot at or after `x`, given that `k` runs of quotients `≤ x` have not
    /// ended before `x` (`≥ slots` if the table is used to its end). Walks the bitmaps forward
    /// from `x` alone, word by word: those `k` runs end at the `k`-th runend bit `y` from `x`;
    /// the slot after it is free unless quotients in `x+1..=y+1` are occupied, whose runs come
    /// next; so again from `y + 1` with their count. No offsets and no rank from a block start.
    #[inline(always)]
    fn first_free(&self, mut x: u64, mut k: u64) -> u64 {
        while k > 0 {
            let y = self.select_from(x, k);
            if y + 1 >= self.slots {
                return self.slots;
            }
            k = self.occupied_in(x + 1, y + 2);
            x = y + 1;
        }
        x
    }

    /// Removes one stored copy of fingerprint `v`. (Inlined into the two instantiations of
    /// [`Quotient::remove_fingerprint`].)
    #[inline(always)]
    fn remove_fingerprint_body(&mut self, v: u64) -> bool {
        let (q, rem) = self.split(v);
        let Some(end) = self.run_end(q) else { return false };
        let mut i = end;
        loop {
            let x = self.rem(i);
            if x == rem {
                break;
            }
            if x < rem || i == q || self.is_runend(i - 1) {
                return false;
            }
            i -= 1;
        }
        let alone = i == end && (i == q || self.is_runend(i - 1));
        // The runs after q's move down by one as long as they are contiguous and shifted.
        let (mut last, mut cq) = (end, q);
        while last + 1 < self.slots {
            match self.next_occupied(cq + 1, last + 1) {
                Some(q2) => {
                    last = self.select_from(last + 1, 1);
                    cq = q2;
                }
                None => break,
            }
        }
        self.shift_down(i, last);
        if alone {
            self.set_occupied(q, false);
        } else if i == end {
            self.set_runend(i - 1, true);
        }
        self.adjust_offsets(q, last, false);
        self.items -= 1;
        true
    }

    /// Moves slots `p..e` (remainders and runend bits) to `p+1..=e`; slot `p` keeps stale bits
    /// for the caller to overwrite. Word-wide, block by block from the top.
    fn shift_up(&mut self, p: u64, e: u64) {
        if p == e {
            return;
        }
        let (pb, eb) = (p >> 6, e >> 6);
        let r = self.r as usize;
        let mut b = eb;
        loop {
            let lo = if b == pb { (p & 63) as usize } else { 0 };
            let hi = if b == eb { (e & 63) as usize } else { 64 };
            let base = b as usize * self.stride;
            // Runend bits [lo, hi) up by one (bit 63 went to the next block already).
            let m = bit_range(lo, hi);
            let w = self.blocks[base + 1];
            self.blocks[base + 1] = (w & !(m << 1)) | ((w & m) << 1);
            let rems = &mut self.blocks[base + 2..base + 2 + r];
            // Slot 63 of a block below the top one went to slot 0 of the next block already.
            shift_bits_up(rems, lo * r, hi.min(63) * r, r as u32);
            if b > pb {
                // Slot 0 of this block takes slot 63 of the previous block.
                let prev_last = ((b - 1) << 6) + 63;
                let bit = self.is_runend(prev_last);
                self.set_runend(b << 6, bit);
                let x = self.rem(prev_last);
                self.set_rem(b << 6, x);
            }
            if b == pb {
                break;
            }
            b -= 1;
        }
    }

    /// Moves slots `i+1..=last` (remainders and runend bits) to `i..last` and clears slot `last`.
    fn shift_down(&mut self, i: u64, last: u64) {
        let (ib, lb) = (i >> 6, last >> 6);
        let r = self.r as usize;
        for b in ib..=lb {
            let base = b as usize * self.stride;
            if b > ib {
                // Slot 0 of this block goes to slot 63 of the previous one.
                let bit = self.is_runend(b << 6);
                self.set_runend((b << 6) - 1, bit);
                let x = self.rem(b << 6);
                self.set_rem((b << 6) - 1, x);
            }
            // Slots [lo, hi] down by one, lo ≥ 1.
            let lo = if b == ib { (i & 63) as usize + 1 } else { 1 };
            let hi = if b == lb { (last & 63) as usize } else { 63 };
            if lo <= hi {
                let m = bit_range(lo, hi + 1);
                let w = self.blocks[base + 1];
                self.blocks[base + 1] = (w & !(m >> 1)) | ((w & m) >> 1);
                let rems = &mut self.blocks[base + 2..base + 2 + r];
                shift_bits_down(rems, lo * r, (hi + 1) * r, r as u32);
            }
        }
        self.set_runend(last, false);
        self.set_rem(last, 0);
    }

    /// Fills an empty table from sorted fingerprints.
    fn build_sorted(&mut self, v: &[u64]) -> Result<()> {
        if v.len() as u64 > self.quotients {
            return Err(Error::Full { len: v.len() });
        }
        let mut p = 0;
        for &x in v {
            p = p.max(x >> self.r) + 1;
        }
        if p > self.slots {
            return Err(Error::Full { len: v.len() });
        }
        let mut pos = 0u64;
        let mut prev_q = None;
        for &x in v {
            let (q, rem) = self.split(x);
            if prev_q != Some(q) {
                if prev_q.is_some() {
                    self.set_runend(pos - 1, true);
                }
                self.set_occupied(q, true);
                pos = pos.max(q);
            }
            self.set_rem(pos, rem);
            pos += 1;
            prev_q = Some(q);
        }
        if prev_q.is_some() {
            self.set_runend(pos - 1, true);
        }
        self.items = v.len() as u64;
        self.rebuild_offsets();
        Ok(())
    }

    /// Computes every block's offset in one pass (a cursor over the runend bits follows the
    /// running count of occupied quotients).
    fn rebuild_offsets(&mut self) {
        let mut k = 0u64; // occupied quotients below the current block
        let (mut seen, mut rb) = (0u64, 0u64); // runend bits in blocks < rb
        for b in 0..self.nblocks() {
            let mut off = 0;
            if k > 0 {
                loop {
                    let c = self.runend_word(rb).count_ones() as u64;
                    if seen + c >= k || rb + 1 >= self.nblocks() {
                        break;
                    }
                    seen += c;
                    rb += 1;
                }
                let end = (rb << 6) + select64(self.runend_word(rb), (k - seen - 1) as u32) as u64;
                off = (end + 1).saturating_sub(b << 6);
            }
            self.offsets[b as usize] = off.min(self.offset_cap as u64) as u8;
            k += self.occ_word(b).count_ones() as u64;
        }
    }

    /// Checks every layout invariant the algorithms rely on (for decoded files): the runs pair
    /// with the occupied quotients in order, each run starts at its quotient or right after the
    /// previous run and ends at the first runend bit from there, its remainders are sorted, no
    /// runend bit lies outside a run, unused slots hold remainder 0, only home slots are
    /// occupied, and the number of remainders is `items`.
    fn check_layout(&self) -> core::result::Result<(), &'static str> {
        let zero_between = |a: u64, b: u64| (a..b).all(|s| self.rem(s) == 0);
        let (mut frontier, mut count) = (0u64, 0u64);
        let mut q = 0;
        while let Some(oq) = self.next_occupied(q, self.slots) {
            if oq >= self.quotients {
                return Err("occupied bit on an overflow slot");
            }
            let start = oq.max(frontier);
            let end = self.select_from(frontier, 1);
            if end >= self.slots {
                return Err("an occupied quotient has no run");
            }
            if end < start {
                return Err("a run end outside any run");
            }
            if !zero_between(frontier, start) {
                return Err("remainder in an unused slot");
            }
            if (start..end).any(|s| self.rem(s) > self.rem(s + 1)) {
                return Err("run not sorted");
            }
            count += end - start + 1;
            frontier = end + 1;
            q = oq + 1;
        }
        if self.select_from(frontier, 1) < self.slots {
            return Err("a run end without an occupied quotient");
        }
        if !zero_between(frontier, self.slots) {
            return Err("remainder in an unused slot");
        }
        if count != self.items {
            return Err("item count does not match the stored remainders");
        }
        Ok(())
    }

    /// Whether a stored fingerprint equals `v` (inlined into the instantiations of
    /// [`Quotient::contains_fingerprint`] and `contains`): [`Quotient::contains_in_window`] when
    /// the run lies in one block and its remainders in 64 bits, else the slot-by-slot scan.
    #[inline(always)]
    fn contains_fingerprint_body(&self, v: u64) -> bool {
        let (q, rem) = self.split(v);
        let Some(end) = self.run_end(q) else { return false };
        match self.contains_in_window(q, rem, end) {
            Some(found) => found,
            None => self.contains_in_run(q, rem, end),
        }
    }

    /// Whether the run of `q`, ending at `end`, holds `rem`: slot by slot from its end (the run is
    /// sorted: down while the remainders are ≥ the query's).
    #[inline(always)]
    fn contains_in_run(&self, q: u64, rem: u64, end: u64) -> bool {
        let mut i = end;
        loop {
            let x = self.rem(i);
            if x <= rem {
                return x == rem;
            }
            if i == q || self.is_runend(i - 1) {
                return false;
            }
            i -= 1;
        }
    }

    /// Whether the run of `q`, ending at `end`, holds `rem`, compared in one 64-bit word with no
    /// loop over the slots: one read takes the 64 bits that end with `end`'s remainder; if that
    /// remainder is not `rem` (a member's usually is: most runs are one slot long), `rem` is
    /// looked for at once in every `r`-bit lane of `x = window ^ rem·ONES` that belongs to the run
    /// (exact zero-lane test: a lane is zero iff neither its top bit nor, after adding
    /// `2^(r-1) - 1` to its low bits, the carry into the top bit is set). The run starts after
    /// the previous runend bit of `end`'s block word, or at `q` when `q` is in that block. `None`
    /// when the run began in an earlier block or has more than `⌊64 / r⌋` slots (the caller
    /// scans). The runs of a 95%-loaded table are 1.55 slots long on average. The scan this
    /// replaces takes a hard-to-predict branch per slot (`x ≤ rem`, then whether the run goes
    /// on), and a query mispredicted behind a cache miss holds up the queries queued after it.
    #[inline(always)]
    fn contains_in_window(&self, q: u64, rem: u64, end: u64) -> Option<bool> {
        let (eb, ei) = (end >> 6, (end & 63) as u32);
        // The 64 bits that end with `end`'s remainder: lanes aligned from the top, slot
        // `end - j` in lane `j`; below the block's first remainder they hold its runend word,
        // masked off like every lane before the run.
        let top = (eb as usize * self.stride + 2) as u64 * 64 + (ei as u64 + 1) * self.r as u64;
        let bottom = top - 64;
        let k = (bottom >> 6) as usize;
        let two = self.blocks[k] as u128 | (self.blocks[k + 1] as u128) << 64;
        let window = (two >> (bottom & 63)) as u64;
        if window >> (64 - self.r) == rem {
            return Some(true);
        }
        let lo = if q >> 6 == eb { (q & 63) as u32 } else { 0 };
        let before = self.runend_word(eb) & bit_range(lo as usize, ei as usize);
        let start = if before != 0 {
            64 - before.leading_zeros()
        } else if q >> 6 == eb {
            lo
        } else {
            return None; // the run began in an earlier block
        };
        let width = (ei + 1 - start) * self.r;
        if width > 64 {
            return None;
        }
        let mask = !(u64::MAX >> 1 >> (width - 1));
        let x = (window ^ rem.wrapping_mul(self.lane_ones)) & mask;
        let high = self.lane_ones << (self.r - 1);
        let low = high.wrapping_sub(self.lane_ones);
        Some(!(((x & low) + low) | x) & high & mask != 0)
    }

    // ---- dispatch: POPCNT, BMI1 and BMI2 where the CPU has them -------------------------------

    /// Whether the CPU has POPCNT, BMI1 and BMI2 (std caches the detection: one load and a branch).
    #[inline(always)]
    fn fast_bits() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("popcnt")
                && std::is_x86_feature_detected!("bmi1")
                && std::is_x86_feature_detected!("bmi2")
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// [`Quotient::contains_fingerprint_body`], compiled with POPCNT, BMI1 and BMI2 when the CPU has
    /// them. The baseline x86-64 target has neither, so `count_ones` (the rank of every query and
    /// insert) is a dozen-instruction bit trick and the select a call; qfilter, the reference of
    /// issue 3, issues both instructions unconditionally. Same bits either way (the same source,
    /// compiled twice; `fast_and_portable_paths_agree` checks it).
    #[inline]
    fn contains_fingerprint(&self, v: u64) -> bool {
        #[cfg(target_arch = "x86_64")]
        if Self::fast_bits() {
            // SAFETY: the CPU has POPCNT, BMI1 and BMI2 (checked just above), the only requirement
            // of the `target_feature` function.
            return unsafe { self.contains_fingerprint_fast(v) };
        }
        self.contains_fingerprint_body(v)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2")]
    fn contains_fingerprint_fast(&self, v: u64) -> bool {
        self.contains_fingerprint_body(v)
    }

    /// Hash and query in one function compiled with POPCNT, BMI1 and BMI2: one call per query.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2")]
    fn contains_item_fast<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.contains_fingerprint_body(self.fingerprint(self.hot_digest(item.as_ref())))
    }

    /// [`Quotient::contains_item_fast`] for CPUs without POPCNT, BMI1 and BMI2.
    #[inline(never)]
    fn contains_item_portable<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.contains_fingerprint_body(self.fingerprint(self.hot_digest(item.as_ref())))
    }

    /// [`Quotient::insert_fingerprint_body`] with POPCNT, BMI1 and BMI2 when the CPU has them (see
    /// [`Quotient::contains_fingerprint`]).
    fn insert_fingerprint(&mut self, v: u64) -> Result<bool> {
        #[cfg(target_arch = "x86_64")]
        if Self::fast_bits() {
            // SAFETY: the CPU has POPCNT, BMI1 and BMI2 (checked just above), the only requirement
            // of the `target_feature` function.
            return unsafe { self.insert_fingerprint_fast(v) };
        }
        self.insert_fingerprint_body::<true>(v)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2")]
    fn insert_fingerprint_fast(&mut self, v: u64) -> Result<bool> {
        self.insert_fingerprint_body::<true>(v)
    }

    /// [`Quotient::remove_fingerprint_body`] with POPCNT, BMI1 and BMI2 when the CPU has them (see
    /// [`Quotient::contains_fingerprint`]).
    fn remove_fingerprint(&mut self, v: u64) -> bool {
        #[cfg(target_arch = "x86_64")]
        if Self::fast_bits() {
            // SAFETY: the CPU has POPCNT, BMI1 and BMI2 (checked just above), the only requirement
            // of the `target_feature` function.
            return unsafe { self.remove_fingerprint_fast(v) };
        }
        self.remove_fingerprint_body(v)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,bmi1,bmi2")]
    fn remove_fingerprint_fast(&mut self, v: u64) -> bool {
        self.remove_fingerprint_body(v)
    }

    /// The digest of `bytes` for the insert and query paths: [`HotHasher::digest`] (which
    /// hashes keys of 17 to 32 bytes with 4-byte loads, avoiding a store-forwarding stall on a
    /// key just written to the stack).
    #[inline(always)]
    fn hot_digest(&self, bytes: &[u8]) -> Digest {
        self.hot.digest(bytes)
    }

    /// Test hook: saturate offsets at `cap` (instead of 255), to exercise the slow path.
    #[cfg(test)]
    fn set_offset_cap(&mut self, cap: u8) {
        self.offset_cap = cap.max(1);
        self.rebuild_offsets();
    }
}

/// Bits `lo..hi` of a word (`hi ≤ 64`).
#[inline(always)]
fn bit_range(lo: usize, hi: usize) -> u64 {
    if lo >= hi {
        0
    } else {
        (u64::MAX >> (64 - (hi - lo))) << lo
    }
}

/// In the little-endian bit string `ws`, moves bits `a..z` to `a+k..z+k` (bits pushed past the
/// end are dropped; bits outside `a..z+k` are kept; bits `a..a+k` are left stale). `0 < k < 64`.
fn shift_bits_up(ws: &mut [u64], a: usize, z: usize, k: u32) {
    if a >= z {
        return;
    }
    let total = ws.len() * 64;
    let (da, dz) = (a + k as usize, (z + k as usize).min(total));
    if da >= dz {
        return;
    }
    // Destination words from the top: each takes its own bits shifted up and the top bits of
    // the word below, both still unmodified.
    let mut t = (dz - 1) / 64;
    loop {
        let below = if t > 0 { ws[t - 1] >> (64 - k) } else { 0 };
        let src = (ws[t] << k) | below;
        let m = bit_range(da.max(t * 64) - t * 64, dz.min(t * 64 + 64) - t * 64);
        ws[t] = (ws[t] & !m) | (src & m);
        if t * 64 <= da {
            break;
        }
        t -= 1;
    }
}

/// In the little-endian bit string `ws`, moves bits `a..z` to `a-k..z-k` (`k ≤ a`; bits outside
/// `a-k..z` are kept; bits `z-k..z` are left stale). `0 < k < 64`.
fn shift_bits_down(ws: &mut [u64], a: usize, z: usize, k: u32) {
    if a >= z {
        return;
    }
    let (da, dz) = (a - k as usize, z - k as usize);
    let mut t = da / 64;
    while t * 64 < dz {
        let above = if t + 1 < ws.len() { ws[t + 1] << (64 - k) } else { 0 };
        let src = (ws[t] >> k) | above;
        let m = bit_range(da.max(t * 64) - t * 64, dz.min(t * 64 + 64) - t * 64);
        ws[t] = (ws[t] & !m) | (src & m);
        t += 1;
    }
}

/// Iterator over the stored fingerprints of a [`Quotient`] filter, in increasing order.
#[derive(Debug, Clone)]
pub struct Hashes<'a> {
    f: &'a Quotient,
    /// Where to look for the next occupied quotient.
    next_q: u64,
    /// The slot after the previous run.
    frontier: u64,
    /// The current run: its quotient, the next slot to yield and its last slot.
    q: u64,
    i: u64,
    end: u64,
}

impl Iterator for Hashes<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.i > self.end {
            let q = self.f.next_occupied(self.next_q, self.f.quotients)?;
            let start = q.max(self.frontier);
            self.end = self.f.select_from(start, 1);
            self.frontier = self.end + 1;
            self.q = q;
            self.i = start;
            self.next_q = q + 1;
        }
        let x = self.f.rem(self.i);
        self.i += 1;
        Some(self.q << self.f.r | x)
    }
}

impl Filter for Quotient {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// Same answer as the provided method; hashes with `Quotient::hot_digest` (same bits).
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool
    where
        Self: Sized,
    {
        #[cfg(target_arch = "x86_64")]
        if self.fast {
            // SAFETY: `fast` is `fast_bits()`, set at construction: the CPU has POPCNT, BMI1 and
            // BMI2, the only requirements of the `target_feature` function.
            return unsafe { self.contains_item_fast(item) };
        }
        self.contains_item_portable(item)
    }

    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        self.contains_fingerprint(self.fingerprint(d))
    }

    fn len(&self) -> usize {
        self.items as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.blocks.len() * 8 + self.offsets.len()
    }

    fn expected_fpr(&self) -> f64 {
        math::quotient_fpr(self.r, self.load_factor())
    }
}

impl Insert for Quotient {
    /// Inserts a copy; `false` if the item was already reported present **or the filter is
    /// full** (see [`Quotient::try_insert_digest`], which tells the two apart).
    fn insert_digest(&mut self, d: Digest) -> bool {
        self.try_insert_digest(d).unwrap_or(false)
    }

    /// Same answer as the provided method; hashes with `Quotient::hot_digest` (same bits).
    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool
    where
        Self: Sized,
    {
        self.try_insert(item).unwrap_or(false)
    }
}

impl Remove for Quotient {
    fn remove_digest(&mut self, d: Digest) -> bool {
        let v = self.fingerprint(d);
        self.remove_fingerprint(v)
    }
}

impl Persist for Quotient {
    const KIND: FilterKind = FilterKind::Quotient;

    /// Parameters (48 bytes): quotients `nq` `u64`, remainder bits `r` `u32` (1 to 56, with
    /// `nq · 2^r ≤ 2^64`), layout `u32`, slots `u64`, items `u64`, capacity `u64`, target FPR
    /// `f64`.
    ///
    /// **Layout 1** (rank-and-select, what this version writes): `slots = 64·⌈(nq + 64 +
    /// 8·⌊√nq⌋) / 64⌉`. Payload: `slots / 64` blocks of `8·(2 + r)` bytes: the block's occupied
    /// bits (`u64`, bit `s` for slot `64·b + s`: quotient has items), its runend bits (`u64`: the
    /// slot ends a run), then its 64 remainders as `r` little-endian `u64` words, slot `s` being
    /// the `r`-bit field at bit `s·r`. Runs are sorted, in quotient order, each starting at its
    /// quotient or right after the previous run; unused slots have remainder 0. The per-block
    /// offsets are not stored: decoding recomputes them.
    ///
    /// **Layout 0** (three metadata bits, written by earlier versions; read only, converted to
    /// layout 1 on decoding): `slots = nq + 64 + 8·⌊√nq⌋`. Payload: three bitmaps of
    /// `8·⌈slots / 64⌉` bytes each, slot `i` being bit `i & 7` of byte `i >> 3`: occupied
    /// (quotient `i` has items), continuation (slot `i` continues the run of slot `i - 1`),
    /// shifted (the remainder in slot `i` is not in its home slot); then the remainders,
    /// `⌈slots · r / 8⌉` bytes, slot `i` being the `r`-bit little-endian field at bit `i · r`.
    ///
    /// Decoding checks every layout invariant, so a corrupted table is an error and not a wrong
    /// answer later.
    fn to_bytes(&self) -> Vec<u8> {
        let mut p = ParamWriter::new();
        p.u64(self.quotients)
            .u32(self.r)
            .u32(LAYOUT_RANK_SELECT)
            .u64(self.slots)
            .u64(self.items)
            .u64(self.capacity)
            .f64(self.target_fpr);
        let table = &self.blocks[..self.blocks.len() - 1];
        let mut e = Encoder::new(Self::KIND, self.hasher, p.as_bytes(), table.len() as u64 * 8);
        let out = e.payload();
        for w in table {
            out.extend_from_slice(&w.to_le_bytes());
        }
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let quotients = r.u64("quotients")?;
        let rbits = r.u32("remainder bits")?;
        let layout = r.u32("layout")?;
        let slots = r.u64("slots")?;
        let items = r.u64("items")?;
        let capacity = r.u64("capacity")?;
        let target_fpr = r.fpr("target fpr")?;
        r.finish()?;
        let bad = |m: &'static str| -> Error { FormatError::InvalidParams(m).into() };
        if quotients == 0
            || rbits == 0
            || rbits > MAX_REMAINDER_BITS
            || (quotients as u128) << rbits > 1u128 << 64
        {
            return Err(bad("quotient: quotients ≥ 1, remainder bits 1 to 56, quotients · 2^r ≤ 2^64"));
        }
        let want_slots = match layout {
            LAYOUT_CLASSIC => quotients + overflow_slots(quotients),
            LAYOUT_RANK_SELECT => rank_select_slots(quotients),
            _ => return Err(bad("quotient: unknown layout (this build reads 0 and 1)")),
        };
        if slots != want_slots || items > quotients {
            return Err(bad("quotient: slot count or item count inconsistent with the quotients"));
        }
        let payload = raw.payload();
        let len = match layout {
            LAYOUT_CLASSIC => classic::payload_len(slots, rbits),
            _ => slots as u128 / 64 * (2 + rbits as u128) * 8,
        };
        if len != payload.len() as u128 {
            return Err(FormatError::Truncated {
                what: "quotient slots",
                needed: len.min(u64::MAX as u128) as u64,
                available: payload.len() as u64,
            }
            .into());
        }
        // The payload has exactly the table's length, so these allocations are bounded by the
        // input.
        let mut f = Quotient::with_params(quotients, rbits, raw.hasher())?;
        if layout == LAYOUT_CLASSIC {
            let hashes = classic::decode(quotients, rbits, slots, items, payload).map_err(bad)?;
            f.build_sorted(&hashes).map_err(|_| bad("quotient: the table does not fit"))?;
        } else {
            for (w, chunk) in f.blocks.iter_mut().zip(payload.chunks_exact(8)) {
                *w = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
            }
            f.items = items;
            f.check_layout().map_err(bad)?;
            f.rebuild_offsets();
        }
        f.capacity = capacity;
        f.target_fpr = target_fpr;
        Ok(f)
    }
}

/// The 3-metadata-bit layout of earlier versions (layout 0), read only: checked and turned into
/// the sorted list of stored fingerprints.
mod classic {
    const OCCUPIED: u64 = 1;
    const CONTINUATION: u64 = 2;
    const SHIFTED: u64 = 4;
    const META: u64 = 7;

    /// Bytes of a layout-0 payload: three bitmaps and the packed remainders.
    pub(super) fn payload_len(slots: u64, r: u32) -> u128 {
        3 * 8 * (slots as u128).div_ceil(64) + (slots as u128 * r as u128).div_ceil(8)
    }

    pub(super) struct Table {
        pub(super) bitmaps: [Vec<u64>; 3],
        pub(super) words: Vec<u64>,
        pub(super) r: u32,
        pub(super) slots: u64,
        pub(super) quotients: u64,
    }

    impl Table {
        /// Slot `i`: remainder `<< 3` | shifted (4) | continuation (2) | occupied (1).
        pub(super) fn get(&self, i: u64) -> u64 {
            let (k, b) = ((i >> 6) as usize, i & 63);
            let m = (0..3).fold(0, |m, j| m | (self.bitmaps[j][k] >> b & 1) << j);
            let bit = i * self.r as u64;
            let (w, off) = ((bit >> 6) as usize, (bit & 63) as u32);
            let two = self.words[w] as u128 | (self.words[w + 1] as u128) << 64;
            ((two >> off) as u64 & (u64::MAX >> (64 - self.r))) << 3 | m
        }

        #[cfg(test)]
        pub(super) fn set(&mut self, i: u64, v: u64) {
            let (k, b) = ((i >> 6) as usize, i & 63);
            for j in 0..3 {
                let w = &mut self.bitmaps[j][k];
                *w = (*w & !(1 << b)) | ((v >> j & 1) << b);
            }
            let mask = u64::MAX >> (64 - self.r);
            let bit = i * self.r as u64;
            let (w, off) = ((bit >> 6) as usize, (bit & 63) as u32);
            let two = (self.words[w] as u128 | (self.words[w + 1] as u128) << 64) & !((mask as u128) << off)
                | ((v >> 3 & mask) as u128) << off;
            self.words[w] = two as u64;
            self.words[w + 1] = (two >> 64) as u64;
        }

        fn occupied(&self, i: u64) -> bool {
            self.bitmaps[0][(i >> 6) as usize] >> (i & 63) & 1 != 0
        }

        /// Checks the layout invariants (as the earlier versions did) and returns the stored
        /// fingerprints in increasing order.
        pub(super) fn hashes(&self, items: u64) -> Result<Vec<u64>, &'static str> {
            let (mut pending, mut next_q, mut q) = (0u64, 0u64, 0u64);
            let mut prev_nonempty = false;
            let mut out = Vec::new();
            for s in 0..self.slots {
                let x = self.get(s);
                if x & OCCUPIED != 0 {
                    if s >= self.quotients {
                        return Err("occupied bit on an overflow slot");
                    }
                    pending += 1;
                }
                if x & META == 0 {
                    if x != 0 {
                        return Err("remainder in an empty slot");
                    }
                    if pending != 0 {
                        return Err("an occupied quotient has no run before an empty slot");
                    }
                    prev_nonempty = false;
                    continue;
                }
                if x & CONTINUATION != 0 {
                    if !prev_nonempty || x & SHIFTED == 0 {
                        return Err("continuation without a run before it");
                    }
                } else {
                    if pending == 0 {
                        return Err("a run without an occupied quotient");
                    }
                    while next_q < s && !self.occupied(next_q) {
                        next_q += 1;
                    }
                    q = next_q;
                    next_q += 1;
                    pending -= 1;
                    if (x & SHIFTED != 0) != (q != s) {
                        return Err("shifted bit does not match the run's position");
                    }
                }
                if x & SHIFTED != 0 && !prev_nonempty {
                    return Err("shifted remainder after an empty slot");
                }
                if out.len() as u64 >= items {
                    return Err("item count does not match the stored remainders");
                }
                out.push(q << self.r | x >> 3);
                prev_nonempty = true;
            }
            if pending != 0 {
                return Err("an occupied quotient has no run");
            }
            if out.len() as u64 != items {
                return Err("item count does not match the stored remainders");
            }
            // Runs were not sorted in this layout.
            out.sort_unstable();
            Ok(out)
        }
    }

    /// Loads little-endian bytes into words (the last word zero-padded).
    fn fill_le(words: &mut [u64], bytes: &[u8]) {
        for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
    }

    /// Reads a layout-0 payload (its length already checked against `payload_len`).
    pub(super) fn decode(
        quotients: u64,
        r: u32,
        slots: u64,
        items: u64,
        payload: &[u8],
    ) -> Result<Vec<u64>, &'static str> {
        let n = slots.div_ceil(64) as usize;
        let mut t = Table {
            bitmaps: [vec![0; n], vec![0; n], vec![0; n]],
            words: vec![0; (slots * r as u64).div_ceil(64) as usize + 1],
            r,
            slots,
            quotients,
        };
        let mut at = 0;
        for v in t.bitmaps.iter_mut() {
            fill_le(v, &payload[at..at + 8 * n]);
            at += 8 * n;
        }
        fill_le(&mut t.words, &payload[at..]);
        let tail = |v: &[u64], used: u64| {
            let (k, off) = ((used >> 6) as usize, used & 63);
            (off != 0 && v[k] >> off != 0) || v[k + (off != 0) as usize..].iter().any(|&x| x != 0)
        };
        if t.bitmaps.iter().any(|v| tail(v, slots)) || tail(&t.words, slots * r as u64) {
            return Err("quotient: bits set past the last slot");
        }
        t.hashes(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn upper(p: f64, n: f64) -> f64 {
        p + 3.1 * (p * (1.0 - p) / n).sqrt()
    }

    fn key(i: u64) -> [u8; 8] {
        i.to_le_bytes()
    }

    /// Every offset kept up to date by inserts and deletes is exact or saturated, and every
    /// offset computed from scratch at or above the cap is saturated.
    fn offsets_consistent(f: &Quotient) -> bool {
        let mut g = f.clone();
        g.rebuild_offsets();
        g.offsets.iter().zip(&f.offsets).all(|(&want, &have)| have == want || have == f.offset_cap)
    }

    /// The POPCNT/BMI2 instantiations of insert, query and remove give the same tables and
    /// answers as the portable ones, on heavy loads (long clusters spanning blocks), duplicates
    /// and saturated offsets (the slow offset path).
    #[test]
    fn fast_and_portable_paths_agree() {
        #[cfg(target_arch = "x86_64")]
        assert!(
            Quotient::fast_bits(),
            "the test machine has POPCNT, BMI1 and BMI2; else this test checks nothing"
        );
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (nq, r, cap) in [(5_000u64, 7u32, OFFSET_SATURATED), (3_000, 3, 40), (700, 12, 5)] {
            let mut fast = Quotient::with_params(nq, r, Hasher::default()).unwrap();
            fast.set_offset_cap(cap);
            let mut slow = fast.clone();
            let mut stored = Vec::new();
            for i in 0..nq {
                // Some duplicates: every 7th value repeats an earlier one.
                let v = if i % 7 == 6 { stored[(next() % stored.len() as u64) as usize] } else { next() };
                let v = fast.fingerprint(Digest::from_u64(v));
                assert_eq!(fast.insert_fingerprint(v), slow.insert_fingerprint_body::<true>(v));
                stored.push(v);
            }
            assert!(
                fast == slow && fast.offsets == slow.offsets,
                "nq {nq} r {r}: tables differ after inserts"
            );
            for _ in 0..4 * nq {
                let v = fast.fingerprint(Digest::from_u64(next()));
                assert_eq!(fast.contains_fingerprint(v), slow.contains_fingerprint_body(v));
            }
            for &v in &stored {
                assert!(fast.contains_fingerprint(v) && slow.contains_fingerprint_body(v));
            }
            for (i, &v) in stored.iter().enumerate() {
                let w = if i % 3 == 0 { fast.fingerprint(Digest::from_u64(next())) } else { v };
                assert_eq!(fast.remove_fingerprint(w), slow.remove_fingerprint_body(w));
            }
            assert!(
                fast == slow && fast.offsets == slow.offsets,
                "nq {nq} r {r}: tables differ after removes"
            );
            assert!(offsets_consistent(&fast));
        }
    }

    /// `try_insert` and `contains` on keys: the POPCNT/BMI2 functions (hash and table in one)
    /// and the portable ones (`fast` off) build the same table and give the same answers, with
    /// duplicates, up to 95% load.
    #[test]
    fn item_paths_fast_and_portable_agree() {
        let mut fast = Quotient::new(20_000, 0.01).unwrap();
        #[cfg(target_arch = "x86_64")]
        assert!(fast.fast, "the test machine has POPCNT, BMI1 and BMI2; else this test checks nothing");
        let mut portable = fast.clone();
        portable.fast = false;
        for i in 0..10_000u64 {
            let k = key(if i % 10 == 9 { i / 3 } else { i });
            assert_eq!(fast.try_insert(k).unwrap(), portable.try_insert(k).unwrap());
            assert_eq!(fast.insert(k), portable.insert(k));
        }
        assert!(fast == portable && fast.offsets == portable.offsets);
        assert!(fast.load_factor() > 0.9);
        for i in 0..60_000u64 {
            assert_eq!(fast.contains(key(i)), portable.contains(key(i)), "key {i}");
        }
    }

    /// The insert/query hash path gives the trait's digest for every key length and hash kind
    /// (so files and `insert_hash` callers see the same fingerprints).
    #[test]
    fn hot_digest_is_the_hashers_digest() {
        for kind in [HashKind::Xxh3_64, HashKind::Xxh3_128, HashKind::Xxh64] {
            for seed in [0u64, 7, u64::MAX] {
                let f = Quotient::with_params(100, 7, Hasher::new(kind, seed)).unwrap();
                for len in 0..=40usize {
                    let bytes: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(37) ^ seed as u8).collect();
                    assert_eq!(
                        f.hot_digest(&bytes),
                        f.hasher.digest(&bytes),
                        "{kind:?} seed {seed} len {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            Quotient::new(0, 0.01),
            Err(Error::InvalidParameter { name: "expected_items", .. })
        ));
        for p in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(Quotient::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })),
                "p = {p}"
            );
        }
        assert!(matches!(Quotient::new(10, 1e-30), Err(Error::InvalidParameter { name: "fpr", .. })));
        assert!(matches!(Quotient::new(usize::MAX, 0.01), Err(Error::CapacityExceeded { .. })));
        let h = Hasher::default();
        assert!(matches!(
            Quotient::with_params(0, 7, h),
            Err(Error::InvalidParameter { name: "quotients", .. })
        ));
        for r in [0, 57, 64] {
            assert!(matches!(
                Quotient::with_params(100, r, h),
                Err(Error::InvalidParameter { name: "remainder_bits", .. })
            ));
        }
        assert!(matches!(
            Quotient::with_params(1 << 60, 8, h),
            Err(Error::InvalidParameter { name: "remainder_bits", .. })
        ));
        assert!(matches!(Quotient::with_params(1 << 56, 8, h), Err(Error::CapacityExceeded { .. })));
        let mut f = Quotient::with_params(10, 1, h).unwrap();
        assert!(matches!(f.resize(), Err(Error::InvalidParameter { .. })));
    }

    #[test]
    fn sizing_and_bits_per_key() {
        let f = Quotient::new(1_000_000, 0.01).unwrap();
        assert_eq!(f.remainder_bits(), 7);
        assert_eq!(f.num_quotients(), 1_052_632);
        assert_eq!(f.num_slots(), (1_052_632u64 + 64 + 8 * 1025).div_ceil(64) * 64);
        let bits_per_key = f.size_in_bytes() as f64 * 8.0 / 1e6;
        println!("quotient n = 1e6, p = 1%: {bits_per_key:.2} bits/key");
        // 72-byte blocks of 64 slots at r = 7 and one offset byte per block: 9.68.
        assert!(bits_per_key < 9.69, "{bits_per_key}");
    }

    /// Reference for the word-wide shifts: slot by slot.
    fn shifted_by_slots(f: &Quotient, from: u64, to: u64, up: bool) -> Quotient {
        let mut g = f.clone();
        if up {
            for i in (from..to).rev() {
                g.set_rem(i + 1, f.rem(i));
                g.set_runend(i + 1, f.is_runend(i));
            }
        } else {
            for i in from + 1..=to {
                g.set_rem(i - 1, f.rem(i));
                g.set_runend(i - 1, f.is_runend(i));
            }
            g.set_rem(to, 0);
            g.set_runend(to, false);
        }
        g
    }

    #[test]
    fn packed_slots_and_shifts_for_every_width() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for r in 1..=MAX_REMAINDER_BITS {
            let mut f = Quotient::with_params(200, r, Hasher::default()).unwrap();
            let val = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7 & low_mask(r);
            for i in 0..f.slots {
                f.set_rem(i, val(i));
                f.set_runend(i, val(i) & 1 == 1);
            }
            for i in 0..f.slots {
                assert_eq!(f.rem(i), val(i), "r {r} slot {i}");
            }
            assert_eq!(*f.blocks.last().unwrap(), 0, "guard word");
            for _ in 0..40 {
                let a = next() % f.slots;
                let b = a + next() % (f.slots - a);
                let mut up = f.clone();
                up.shift_up(a, b);
                let want = shifted_by_slots(&f, a, b, true);
                // Slot a is stale after shift_up: compare everything else.
                up.set_rem(a, want.rem(a));
                up.set_runend(a, want.is_runend(a));
                assert!(up.blocks == want.blocks, "shift_up r {r} {a}..{b}");
                let mut down = f.clone();
                down.shift_down(a, b);
                assert!(down.blocks == shifted_by_slots(&f, a, b, false).blocks, "shift_down r {r} {a}..{b}");
            }
        }
    }

    /// The one-word run comparison (`contains_in_window`) gives the slot-by-slot scan's answer
    /// whenever it gives one, for every remainder width, at 50% and 95% load with duplicates
    /// (long runs, runs crossing blocks): members, their neighbours (same quotient, remainder
    /// ± 1) and random fingerprints. It fails when a lane of the run is masked off or one before
    /// the run is not (checked by hand once each: the mask one lane short, one lane too long).
    #[test]
    fn window_and_scan_agree() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut windowed = 0u64;
        for r in (1..=MAX_REMAINDER_BITS).filter(|r| r % 5 == 1 || [7, 8, 9, 16, 32, 33, 56].contains(r)) {
            for load in [0.5, 0.95] {
                let nq = 3_000u64.min(1 << (64 - r));
                let mut f = Quotient::with_params(nq, r, Hasher::default()).unwrap();
                let mut stored = Vec::new();
                while (f.len() as f64) < nq as f64 * load {
                    // Every 5th value repeats an earlier one; every 9th is a near neighbour.
                    let v = match stored.len() % 45 {
                        i if i % 5 == 4 => stored[(next() % stored.len() as u64) as usize],
                        i if i % 9 == 8 => stored[(next() % stored.len() as u64) as usize] ^ 1,
                        _ => f.fingerprint(Digest::from_u64(next())),
                    };
                    f.insert_fingerprint(v).unwrap();
                    stored.push(v);
                }
                let probes = stored
                    .iter()
                    .flat_map(|&v| [v, v.wrapping_add(1), v.wrapping_sub(1)])
                    .chain((0..20_000).map(|_| f.fingerprint(Digest::from_u64(next()))));
                for v in probes {
                    let (q, rem) = f.split(v);
                    let want = f.count_fingerprint(v) > 0;
                    assert_eq!(f.contains_fingerprint_body(v), want, "r {r} load {load} v {v:#x}");
                    if q >= f.quotients {
                        continue;
                    }
                    let Some(end) = f.run_end(q) else { continue };
                    assert_eq!(f.contains_in_run(q, rem, end), want);
                    if let Some(got) = f.contains_in_window(q, rem, end) {
                        assert_eq!(got, want, "r {r} load {load} v {v:#x}: window");
                        windowed += 1;
                    }
                }
            }
        }
        assert!(windowed > 300_000, "{windowed} probes answered by the window");
    }

    #[test]
    fn duplicates_count_and_remove() {
        let mut f = Quotient::new(1000, 0.01).unwrap();
        assert_eq!(f.try_insert("a"), Ok(true));
        assert_eq!(f.try_insert("a"), Ok(false));
        assert_eq!(f.count("a"), 2);
        assert!(f.remove("a"));
        assert!(f.contains("a"));
        assert!(f.remove("a"));
        assert!(!f.contains("a") && !f.remove("a") && f.is_empty());
        assert_eq!(f.check_layout(), Ok(()));
    }

    /// The one-multiply fingerprint is `⌊h1 · nq · 2^r / 2^64⌋` computed in 128 bits (the
    /// definition the stored bytes follow), also at `nq · 2^r = 2^64` and for odd `nq`.
    #[test]
    fn fingerprint_is_the_wide_product() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        for (nq, r) in
            [(1u64, 1u32), (1_052_632, 7), (256, 56), (255, 56), (1 << 20, 44), (3, 2), (99_991, 40)]
        {
            let f = Quotient::with_params(nq, r, Hasher::default()).unwrap();
            for h in [0, 1, u64::MAX, u64::MAX - 1, 1 << 63] {
                let want = ((h as u128 * ((nq as u128) << r)) >> 64) as u64;
                assert_eq!(f.fingerprint(Digest::from_u64(h)), want, "nq {nq} r {r} h {h:#x}");
            }
            for _ in 0..1000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let h = x ^ x >> 29;
                let want = ((h as u128 * ((nq as u128) << r)) >> 64) as u64;
                assert_eq!(f.fingerprint(Digest::from_u64(h)), want, "nq {nq} r {r} h {h:#x}");
            }
        }
    }

    /// FNV-1a of a byte string (a fixed digest of a table for the test below).
    fn fnv1a(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
    }

    /// The fast path (home slot free) and the general path give the same table: inserting with
    /// both, with the general path alone (`insert_fingerprint_body::<false>`), and building from
    /// the sorted fingerprints (`build_sorted`, which shares no code with the insert) give
    /// identical blocks and offsets, at every tenth of the fill up to 95% load, with duplicates,
    /// for several widths and saturated offsets. Then random inserts, removes and counts against
    /// a `HashMap` of fingerprints at loads held between 80% and 95%: `count` is exact on
    /// fingerprints, and the table stays the one `build_sorted` makes from the model.
    #[test]
    fn fast_and_general_insert_paths_agree_with_a_model() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (nq, r, cap) in [
            (4_000u64, 7u32, OFFSET_SATURATED),
            (2_500, 2, OFFSET_SATURATED),
            (1_500, 10, 3),
            (130, 5, OFFSET_SATURATED),
        ] {
            let mut both = Quotient::with_params(nq, r, Hasher::default()).unwrap();
            both.set_offset_cap(cap);
            let mut general = both.clone();
            let mut model: HashMap<u64, usize> = HashMap::new();
            let sorted_table = |model: &HashMap<u64, usize>| {
                let mut v: Vec<u64> = model.iter().flat_map(|(&v, &c)| std::iter::repeat_n(v, c)).collect();
                v.sort_unstable();
                let mut g = Quotient::with_params(nq, r, Hasher::default()).unwrap();
                g.offset_cap = cap;
                g.build_sorted(&v).unwrap();
                g
            };
            let target = (nq as f64 * 0.95) as u64;
            let mut stored = Vec::new();
            let mut fast_hits = 0;
            for i in 0..target {
                let v = if i % 11 == 10 {
                    stored[(next() % stored.len() as u64) as usize]
                } else {
                    both.fingerprint(Digest::from_u64(next()))
                };
                let (items, blocks) = (both.items, both.blocks.clone());
                let present = both.insert_fingerprint(v).unwrap();
                // The fast path changes exactly one remainder and two metadata bits, no shift.
                let (q, _) = both.split(v);
                let b = (q >> 6) as usize * both.stride;
                let changed = (0..blocks.len()).filter(|&k| blocks[k] != both.blocks[k]).count();
                fast_hits +=
                    (items + 1 == both.items && changed <= 3 && blocks[b] != both.blocks[b]) as usize;
                assert_eq!(present, general.insert_fingerprint_body::<false>(v).unwrap());
                assert_eq!(present, model.get(&v).is_some_and(|&c| c > 0));
                *model.entry(v).or_default() += 1;
                stored.push(v);
                if (i + 1) % (target / 10).max(1) == 0 || i + 1 == target {
                    let want = sorted_table(&model);
                    assert!(
                        both.blocks == want.blocks && both.offsets == want.offsets,
                        "nq {nq} r {r}: at {i}"
                    );
                    assert!(
                        general.blocks == want.blocks && general.offsets == want.offsets,
                        "nq {nq} r {r}: at {i}"
                    );
                    assert_eq!(both.check_layout(), Ok(()));
                }
            }
            // The fast path is taken (about half the inserts of a fill to 95%: e^-α at load α).
            assert!(fast_hits as u64 > target / 4, "nq {nq} r {r}: fast path taken {fast_hits} times");
            // Churn at 80-95% load: remove a stored or a random fingerprint, insert a new one or
            // a copy, check counts.
            for step in 0..6 * nq {
                let load = both.items as f64 / nq as f64;
                let v = if load > 0.8 && (load >= 0.95 || next() % 2 == 0) {
                    let v = if next() % 4 == 0 {
                        both.fingerprint(Digest::from_u64(next()))
                    } else {
                        stored[(next() % stored.len() as u64) as usize]
                    };
                    let had = model.get(&v).copied().unwrap_or(0);
                    let removed = both.remove_fingerprint(v);
                    assert_eq!(removed, general.remove_fingerprint_body(v));
                    assert_eq!(removed, had > 0);
                    if removed {
                        *model.get_mut(&v).unwrap() -= 1;
                    }
                    v
                } else {
                    let v = if next() % 8 == 0 {
                        stored[(next() % stored.len() as u64) as usize]
                    } else {
                        both.fingerprint(Digest::from_u64(next()))
                    };
                    let present = both.insert_fingerprint(v).unwrap();
                    assert_eq!(present, general.insert_fingerprint_body::<false>(v).unwrap());
                    assert_eq!(present, model.get(&v).is_some_and(|&c| c > 0));
                    *model.entry(v).or_default() += 1;
                    stored.push(v);
                    v
                };
                let counted = both.count_fingerprint(v);
                assert_eq!(
                    counted,
                    model.get(&v).copied().unwrap_or(0),
                    "nq {nq} r {r}: count at step {step}"
                );
                if step % nq == nq - 1 {
                    let want = sorted_table(&model);
                    // (A removal leaves a saturated offset saturated: exact or saturated, checked below.)
                    assert!(both.blocks == want.blocks, "nq {nq} r {r}: churn {step}");
                    assert!(general.blocks == want.blocks, "nq {nq} r {r}: churn {step}");
                    assert!(offsets_consistent(&both));
                }
            }
        }
    }

    /// The bytes of a filter built item by item are those the code before the insert fast path
    /// (commit `b29d330`) wrote: FNV-1a of `to_bytes()` of `Quotient::new(20_000, 0.01)` filled
    /// to its capacity with the keys `0..20_000` (little-endian u64), then 1,000 of them again
    /// (duplicates). The constant was printed by this same test compiled into `b29d330`'s
    /// quotient.rs (the code then inserted through rank-and-select and `first_unused` only).
    #[test]
    fn bytes_match_the_code_before_the_fast_path() {
        let mut f = Quotient::new(20_000, 0.01).unwrap();
        for i in 0..20_000u64 {
            f.try_insert(key(i)).unwrap();
        }
        for i in 0..1_000u64 {
            f.try_insert(key(i * 7)).unwrap();
        }
        assert_eq!(fnv1a(&f.to_bytes()), 0x2e9a_fa6a_9437_954d);
    }

    /// A run longer than the offsets can hold (many copies of one item) saturates them; queries,
    /// inserts and deletes behind it stay exact.
    #[test]
    fn saturated_offsets_stay_correct() {
        // Hash 0 has fingerprint 0: the copies form one run from slot 0.
        let many = Digest::from_u64(0);
        for (cap, copies) in [(u8::MAX, 2_000), (3, 2_000)] {
            let mut f = Quotient::with_params(300_000, 8, Hasher::default()).unwrap();
            f.set_offset_cap(cap);
            for _ in 0..copies {
                f.try_insert_digest(many).unwrap();
            }
            for i in 0..100_000u64 {
                f.try_insert(key(i)).unwrap();
            }
            assert!(f.offsets.iter().any(|&o| o >= f.offset_cap), "some offset saturates");
            assert!(offsets_consistent(&f));
            assert_eq!(f.count_digest(many), copies);
            assert!((0..100_000u64).all(|i| f.contains(key(i))));
            for i in (0..100_000u64).step_by(2) {
                assert!(f.remove(key(i)));
            }
            for _ in 10..copies {
                assert!(f.remove_digest(many));
            }
            assert!(offsets_consistent(&f));
            assert_eq!(f.count_digest(many), 10);
            assert!((1..100_000u64).step_by(2).all(|i| f.contains(key(i))));
            assert_eq!(f.check_layout(), Ok(()));
        }
    }

    #[test]
    fn fpr_within_binomial_bound() {
        const PROBES: u64 = 2_000_000;
        for (n, p) in [(200_000usize, 0.01), (100_000, 0.001), (100_000, 0.1)] {
            let mut f = Quotient::with_hasher(n, p, Hasher::new(HashKind::Xxh3_64, 5)).unwrap();
            for i in 0..n as u64 {
                f.try_insert(key(i)).unwrap();
            }
            let fp = (n as u64..n as u64 + PROBES).filter(|&i| f.contains(key(i))).count();
            let measured = fp as f64 / PROBES as f64;
            let e = f.expected_fpr();
            println!(
                "quotient n {n} r {} load {:.3}: FPR {measured:.6} (formula {e:.6}, target {p})",
                f.remainder_bits(),
                f.load_factor()
            );
            assert!(e <= p);
            assert!(measured <= upper(e * 1.01, PROBES as f64), "{measured} > bound of {e}");
            assert!(measured >= e - 3.1 * (e / PROBES as f64).sqrt() - 0.05 * e, "{measured} ≪ {e}");
            assert!(offsets_consistent(&f));
        }
    }

    #[test]
    fn full_filter_refuses_and_loses_nothing() {
        let mut f = Quotient::with_params(100_000, 8, Hasher::default()).unwrap();
        let mut i = 0u64;
        let err = loop {
            match f.try_insert(key(i)) {
                Ok(_) => i += 1,
                Err(e) => break e,
            }
        };
        assert!(matches!(err, Error::Full { .. }));
        println!("quotient nq = 100000: full after {i} items (load {:.4})", f.load_factor());
        assert!(f.load_factor() >= 0.99, "load {}", f.load_factor());
        let before = f.clone();
        assert!(f.try_insert(key(u64::MAX)).is_err());
        assert_eq!(f, before);
        assert!((0..i).all(|k| f.contains(key(k))));
        assert_eq!(f.check_layout(), Ok(()));
        assert!(offsets_consistent(&f));
        for k in 0..i / 2 {
            assert!(f.remove(key(k)));
        }
        assert!((i / 2..i).all(|k| f.contains(key(k))));
        assert_eq!(f.check_layout(), Ok(()));
        assert!(offsets_consistent(&f));
        f.resize().unwrap();
        assert!((i / 2..i).all(|k| f.contains(key(k))));
        assert_eq!(f.check_layout(), Ok(()));
    }

    #[test]
    fn resize_keeps_items_and_fpr() {
        const PROBES: u64 = 1_000_000;
        let mut f = Quotient::with_hasher(100_000, 0.01, Hasher::new(HashKind::Xxh3_64, 9)).unwrap();
        for i in 0..100_000u64 {
            f.try_insert(key(i)).unwrap();
        }
        let before: Vec<u64> = f.iter_hashes().collect();
        f.resize().unwrap();
        assert_eq!(f.remainder_bits(), 6);
        assert_eq!(f.num_quotients(), 2 * 105_264);
        assert_eq!(f.check_layout(), Ok(()));
        assert_eq!(f.iter_hashes().collect::<Vec<_>>(), before, "fingerprints are unchanged");
        assert!((0..100_000u64).all(|i| f.contains(key(i))));
        for i in 100_000..200_000u64 {
            f.try_insert(key(i)).unwrap();
        }
        let fp = (1u64 << 40..(1 << 40) + PROBES).filter(|&i| f.contains(key(i))).count();
        let e = f.expected_fpr();
        assert!((fp as f64 / PROBES as f64) <= upper(e * 1.01, PROBES as f64), "{fp} vs {e}");
    }

    #[test]
    fn merge_and_incompatible() {
        let h = Hasher::new(HashKind::Xxh3_64, 1);
        let mut a = Quotient::with_hasher(10_000, 0.01, h).unwrap();
        let mut b = a.clone();
        for i in 0..4000u64 {
            a.try_insert(key(i)).unwrap();
        }
        for i in 3000..8000u64 {
            b.try_insert(key(i)).unwrap();
        }
        let mut m = a.clone();
        m.merge(&b).unwrap();
        assert_eq!(m.len(), 9000);
        assert!((0..8000u64).all(|i| m.contains(key(i))));
        assert_eq!(m.count(key(3500)), 2);
        assert_eq!(m.check_layout(), Ok(()));
        // Full: unchanged.
        let before = m.clone();
        assert!(matches!(m.merge(&b), Err(Error::Full { .. })));
        assert_eq!(m, before);
        // A resized copy shares the fingerprint space.
        let mut big = b.clone();
        big.resize().unwrap();
        let mut a2 = a.clone();
        a2.merge(&big).unwrap();
        assert_eq!(a2.iter_hashes().collect::<Vec<_>>(), m.iter_hashes().collect::<Vec<_>>());
        let other_seed = Quotient::with_hasher(10_000, 0.01, Hasher::new(HashKind::Xxh3_64, 2)).unwrap();
        assert!(matches!(a.merge(&other_seed), Err(Error::Incompatible { .. })));
        let other_shape = Quotient::with_hasher(20_000, 0.01, h).unwrap();
        assert!(matches!(a.merge(&other_shape), Err(Error::Incompatible { .. })));
    }

    #[test]
    fn round_trip_and_corruption() {
        for r in [1u32, 5, 7, 13, 29, 52] {
            let mut f = Quotient::with_params(3000, r, Hasher::new(HashKind::Xxh64, 4)).unwrap();
            for i in 0..2800u64 {
                f.try_insert(key(i % 2000)).unwrap();
            }
            let bytes = f.to_bytes();
            let g = Quotient::from_bytes(&bytes).unwrap();
            assert_eq!(f, g);
            assert_eq!(f.offsets, g.offsets);
            for cut in [0, 20, 60, bytes.len() / 2, bytes.len() - 1] {
                assert!(Quotient::from_bytes(&bytes[..cut]).is_err(), "cut {cut}");
            }
            for at in (0..bytes.len()).step_by(13) {
                let mut b = bytes.clone();
                b[at] ^= 0x20;
                assert!(Quotient::from_bytes(&b).is_err(), "flip at {at}");
            }
        }
    }

    /// Encodes a file around a chosen parameter block and payload, with a valid CRC.
    fn forge(
        quotients: u64,
        r: u32,
        layout: u32,
        slots: u64,
        items: u64,
        payload: &[u8],
    ) -> Result<Quotient> {
        let mut p = ParamWriter::new();
        p.u64(quotients).u32(r).u32(layout).u64(slots).u64(items).u64(1).f64(0.01);
        let mut e = Encoder::new(FilterKind::Quotient, Hasher::default(), p.as_bytes(), payload.len() as u64);
        e.payload().extend_from_slice(payload);
        Quotient::from_bytes(&e.finish())
    }

    /// Files with a valid CRC whose rank-and-select table breaks a layout invariant are refused.
    #[test]
    fn forged_tables_are_errors() {
        let f0 = Quotient::with_params(10, 5, Hasher::default()).unwrap();
        let slots = f0.slots;
        let n = |f: &Quotient, items: u64| {
            let payload: Vec<u8> =
                f.blocks[..f.blocks.len() - 1].iter().flat_map(|w| w.to_le_bytes()).collect();
            forge(10, 5, 1, slots, items, &payload)
        };
        let mut ok = f0.clone();
        for i in 0..6u64 {
            ok.try_insert(key(i)).unwrap();
        }
        assert!(n(&ok, 6).is_ok());
        assert!(n(&ok, 5).is_err(), "item count");
        let payload: Vec<u8> = ok.to_bytes()[32 + 48..ok.to_bytes().len() - 4].to_vec();
        assert!(forge(10, 5, 1, slots, 6, &payload).is_ok());
        assert!(forge(10, 5, 1, slots + 64, 6, &payload).is_err(), "slot count");
        assert!(forge(10, 5, 2, slots, 6, &payload).is_err(), "layout");
        assert!(forge(0, 5, 1, slots, 6, &payload).is_err());
        assert!(forge(10, 6, 1, slots, 6, &payload).is_err(), "payload length");
        assert!(forge(10, 0, 1, slots, 6, &payload).is_err());
        let with = |edit: &dyn Fn(&mut Quotient)| {
            let mut f = f0.clone();
            edit(&mut f);
            f
        };
        // A run at slot 3 holding remainder 9.
        let one = |f: &mut Quotient| {
            f.set_occupied(3, true);
            f.set_runend(3, true);
            f.set_rem(3, 9);
        };
        assert!(n(&with(&one), 1).is_ok());
        assert!(n(&with(&|f| f.set_rem(3, 9)), 0).is_err(), "remainder in an unused slot");
        assert!(n(&with(&|f| f.set_occupied(3, true)), 0).is_err(), "occupied without a run");
        assert!(n(&with(&|f| f.set_runend(3, true)), 1).is_err(), "run end without a quotient");
        assert!(n(&with(&|f| f.set_occupied(12, true)), 0).is_err(), "occupied overflow slot");
        let unsorted = |f: &mut Quotient| {
            one(f);
            f.set_runend(3, false);
            f.set_runend(4, true);
            f.set_rem(4, 2);
        };
        assert!(n(&with(&unsorted), 2).is_err(), "unsorted run");
        let sorted = |f: &mut Quotient| {
            unsorted(f);
            f.set_rem(4, 10);
        };
        assert!(n(&with(&sorted), 2).is_ok());
        // Two quotients, the second run placed before its home slot.
        let early = |f: &mut Quotient| {
            one(f);
            f.set_occupied(6, true);
            f.set_runend(4, true);
            f.set_rem(4, 1);
        };
        assert!(n(&with(&early), 2).is_err(), "run before its quotient");
    }

    /// Files of the earlier 3-metadata-bit layout (layout 0) decode into the same set of
    /// fingerprints; broken ones are refused. The committed golden file of that layout is
    /// checked by the conformance suite (`quotient_classic_golden_still_decodes`).
    #[test]
    fn classic_layout_files_decode() {
        use classic::Table;
        let (quotients, r) = (10u64, 5u32);
        let slots = quotients + overflow_slots(quotients);
        let empty = || Table {
            bitmaps: [
                vec![0; slots.div_ceil(64) as usize],
                vec![0; slots.div_ceil(64) as usize],
                vec![0; slots.div_ceil(64) as usize],
            ],
            words: vec![0; (slots * r as u64).div_ceil(64) as usize + 1],
            r,
            slots,
            quotients,
        };
        let payload = |t: &Table| {
            let mut out = Vec::new();
            for v in &t.bitmaps {
                out.extend(v.iter().flat_map(|w| w.to_le_bytes()));
            }
            let mut left = (slots * r as u64).div_ceil(8) as usize;
            for w in &t.words {
                let k = left.min(8);
                out.extend_from_slice(&w.to_le_bytes()[..k]);
                left -= k;
            }
            out
        };
        let cells = |c: &[(u64, u64)]| {
            let mut t = empty();
            for &(i, x) in c {
                t.set(i, x);
            }
            forge(quotients, r, 0, slots, c.len() as u64, &payload(&t))
        };
        // Quotient 3: remainders 9 then 1 (unsorted in that layout), quotient 4 shifted to 5.
        let f = cells(&[(3, 9 << 3 | 1), (4, 1 << 3 | 2 | 4 | 1), (5, 7 << 3 | 4)]).unwrap();
        assert_eq!(f.iter_hashes().collect::<Vec<_>>(), vec![3 << r | 1, 3 << r | 9, 4 << r | 7]);
        assert_eq!(f.check_layout(), Ok(()));
        assert_eq!(Quotient::from_bytes(&f.to_bytes()).unwrap(), f);
        assert!(cells(&[(0, 9 << 3 | 4)]).is_err(), "shifted at slot 0");
        assert!(cells(&[(3, 9 << 3)]).is_err(), "remainder in an empty slot");
        assert!(cells(&[(3, 9 << 3 | 2 | 4)]).is_err(), "continuation first");
        assert!(cells(&[(3, 9 << 3 | 1 | 4)]).is_err(), "shifted at home");
        assert!(cells(&[(3, 9 << 3 | 1), (4, 1 << 3 | 2)]).is_err(), "unshifted continuation");
        assert!(cells(&[(3, 9 << 3 | 1), (5, 1 << 3 | 4)]).is_err(), "run without quotient");
        assert!(cells(&[(12, 1)]).is_err(), "occupied overflow slot");
        let t = empty();
        assert!(forge(quotients, r, 0, slots, 1, &payload(&t)).is_err(), "item count");
        assert!(forge(quotients, r, 0, slots + 1, 0, &payload(&t)).is_err(), "slot count");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16),
        Remove(u16),
        Resize,
        Merge(Vec<u16>),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![
                30 => (0u16..400).prop_map(Op::Insert),
                20 => (0u16..400).prop_map(Op::Remove),
                1 => Just(Op::Resize),
                1 => prop::collection::vec(0u16..400, 0..30).prop_map(Op::Merge),
            ],
            1..500,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, rng_seed: proptest::test_runner::RngSeed::Fixed(0x9f1e), ..ProptestConfig::default() })]

        /// Against a multiset model: no false negatives, exact len, and the stored fingerprints
        /// are exactly those of the model's items; `Full` changes nothing; the layout invariants
        /// hold and the offsets are exact after every operation (also when they saturate at a
        /// small cap, which exercises their slow path).
        #[test]
        fn behaves_like_a_multiset(ops in ops(), quotients in 1u64..300, r in 1u32..9, cap in prop_oneof![Just(u8::MAX), 1u8..6]) {
            let h = Hasher::new(HashKind::Xxh3_64, 3);
            let mut f = Quotient::with_params(quotients, r, h).unwrap();
            f.set_offset_cap(cap);
            let mut model: HashMap<u16, usize> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k) => {
                        let before = f.clone();
                        match f.try_insert(k.to_le_bytes()) {
                            Ok(new) => {
                                prop_assert!(new || f.count(k.to_le_bytes()) > 1);
                                *model.entry(k).or_default() += 1;
                            }
                            Err(Error::Full { .. }) => prop_assert_eq!(&f, &before),
                            Err(e) => prop_assert!(false, "unexpected {e}"),
                        }
                    }
                    Op::Remove(k) => {
                        if let Some(c) = model.get_mut(&k).filter(|c| **c > 0) {
                            prop_assert!(f.remove(k.to_le_bytes()));
                            *c -= 1;
                        }
                    }
                    Op::Resize => {
                        if f.remainder_bits() > 1 {
                            f.resize().unwrap();
                        }
                    }
                    Op::Merge(keys) => {
                        let mut g = Quotient::with_params(f.num_quotients(), f.remainder_bits(), h).unwrap();
                        let added: Vec<u16> =
                            keys.into_iter().filter(|k| g.try_insert(k.to_le_bytes()).is_ok()).collect();
                        let before = f.clone();
                        match f.merge(&g) {
                            Ok(()) => {
                                for k in added {
                                    *model.entry(k).or_default() += 1;
                                }
                            }
                            Err(Error::Full { .. }) => prop_assert_eq!(&f, &before),
                            Err(e) => prop_assert!(false, "unexpected {e}"),
                        }
                    }
                }
                prop_assert_eq!(f.check_layout(), Ok(()));
                prop_assert!(offsets_consistent(&f));
                prop_assert_eq!(f.len(), model.values().sum::<usize>());
                let mut want: Vec<u64> = model
                    .iter()
                    .flat_map(|(k, &c)| {
                        let v = f.fingerprint(h.digest(&k.to_le_bytes()));
                        std::iter::repeat_n(v, c)
                    })
                    .collect();
                want.sort_unstable();
                prop_assert_eq!(f.iter_hashes().collect::<Vec<_>>(), want);
                for (k, &c) in &model {
                    prop_assert!(f.count(k.to_le_bytes()) >= c);
                    if c > 0 {
                        prop_assert!(f.contains(k.to_le_bytes()), "false negative for {}", k);
                    }
                }
            }
            let g = Quotient::from_bytes(&f.to_bytes()).unwrap();
            prop_assert_eq!(g, f);
        }
    }
}
