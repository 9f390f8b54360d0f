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
//!   samples under `perf`, and the in-cache query (`benches/probes/quotient_query.rs` at
//!   n = 20,000) trailed qfilter by as much as the out-of-cache one, so the cost was not that
//!   miss (docs/BENCHMARKS.md, "Quotient query: offsets outside the blocks kept, the run window").
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
//!   of earlier versions).
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

use crate::bits::{prefetch, select64, try_zeroed, CowGuard, CowWriter, Storage, MAX_BYTES};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{decode_verified, Encoder, FilterKind, FrozenFile, FrozenPart, ParamWriter};
use crate::hash::{Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist, Remove};

mod classic;
mod table;

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
        let guard = self.blocks.cow_guard();
        let _writer = guard.as_ref().map(|g| {
            let mut w = g.writer();
            w.before_write_values(&self.blocks, 0..self.blocks.len());
            w
        });
        self.blocks.fill(0);
        self.offsets.fill(0);
        self.items = 0;
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// the table is guarded ([`crate::bits::COW_PIECE`]-sized pieces copied aside by the writes
    /// that reach them before the file has been written), so that no write waits for a copy of
    /// the whole table. An insert or a delete copies the pieces of the slots it shifts; a resize
    /// or a merge builds a new table and leaves the guarded one as it was. `None` for a filter
    /// small enough to copy (not in its own huge-page allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        let g = self.blocks.freeze()?;
        // The table without its guard word, as `to_bytes` writes it.
        let table = (self.blocks.len() as u64 - 1) * 8;
        Some(FrozenFile::new(
            Self::KIND,
            self.hasher,
            self.params().as_bytes(),
            vec![FrozenPart::WordsPrefix(g, table)],
        ))
    }

    /// The parameter block of the file.
    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        p.u64(self.quotients)
            .u32(self.r)
            .u32(LAYOUT_RANK_SELECT)
            .u64(self.slots)
            .u64(self.items)
            .u64(self.capacity)
            .f64(self.target_fpr);
        p
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
        let p = self.params();
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

#[cfg(test)]
mod tests;
