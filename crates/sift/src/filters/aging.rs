//! Age-partitioned Bloom filter: a sliding window over the last `N` insertions.
//!
//! Shtul, Baquero & Almeida, "Age-Partitioned Bloom Filters", arXiv 2001.03147, 2020, in a
//! blocked layout of `sift`'s own (the paper also describes an Age-Partitioned Blocked Bloom
//! Filter, with 2-3 cache-line accesses per insertion and around 2-4 per query).
//!
//! * **Idea**: the filter is `k + l` *slices*. An item is written into the `k` youngest slices
//!   (one bit each) and is reported present when some `k` consecutive slices all hold its bit.
//!   Every `g` insertions (a *generation*) the oldest slice is cleared and becomes the youngest,
//!   so an item keeps its `k` slices for `l` more generations after its own: the last `N = l·g`
//!   insertions are always members, and an item leaves within one more generation.
//! * **Blocked layout** (`src/simd/rows.rs`): an item uses one *row* in every slice, and a row
//!   keeps the words of all slices side by side: 16 or 32 words
//!   of 32 bits (15 or 31 slices and a stamp), one or two cache lines. An insertion reads and
//!   writes one row, a query reads one row and checks every alignment of `k` slices at once
//!   (AVX2: about 16 instructions per 8 words). A generation shift writes nothing in the rows:
//!   each row's stamp tells which of its slices became the youngest since it was last written
//!   (they read as empty, and the next write zeroes them), so a shift costs the same whatever
//!   the filter's size.
//! * **One change from the paper, for sharp expiry**: an item's bit in a slice also depends on
//!   the slice's *offset* in the item's run of `k`, and a query tests each alignment with the
//!   offsets it implies. With the paper's plain runs, an item whose oldest slice was retired
//!   still has `k - 1` bits in a row and needs only one more by chance: it fades out over `k`
//!   generations, reported present about half the time right after it left the window. With
//!   offsets, its remaining bits never count at another alignment, so once it is out of the
//!   window plus one generation it answers exactly like a never-seen item (measured in
//!   `fpr_over_a_stream`: 0.01021 for expired items against 0.00959 for never-seen ones at p =
//!   0.01). The price: alignments no longer share bits, about twice the rate at equal memory,
//!   which the sizing pays with 6% more memory.
//! * **FPR**: [`crate::math::aging_fpr`], exact per alignment under Poisson row loads, checked
//!   against a simulation of the layout. The paper's analysis treats the slices as independent
//!   ([`crate::math::apbf_fpr_from_fills`]); in a row they are not (two items of one generation
//!   share `k` words), which that analysis misses by 1.6× at 1% and more at lower rates.
//!   [`Filter::expected_fpr`] evaluates the formula with the filter's own generation sizes.
//! * **Sizing** ([`crate::math::aging_plan`]): `new(window, p)` picks the row width (15 or 31
//!   slices), `k`, `l` and the rows that hold the window at FPR ≤ `p` in the worst phase (right
//!   before a shift, every live generation full) with the least memory: 25.3 bits per window
//!   item at 1% (k = 8, l = 23), 15.8 at 10%, 36.9 at 0.1% (stamps included); 2.4 to 3.3 times a
//!   [`crate::BlockedBloom`] holding the window's items, since each item sits in `k` slices of
//!   `k + l` and the slices must stay sparse enough for every alignment. Measured rates:
//!   `fpr_over_a_stream` and the conformance suite.
//! * **What counts toward the window**: insertions that set at least one bit in the youngest
//!   slices. Re-inserting an item those slices already hold sets nothing and does not advance
//!   the window (the item is already guaranteed for `l` more generations), so repeats cannot
//!   push distinct items out. [`Insert::insert`] still returns whether the item was reported
//!   present before (over the whole window), which reads every slice of the row;
//!   [`AgingBloom::push`] leaves the same filter, bit for bit, without that answer, reading and
//!   writing only the stamp and the words of the `k` youngest slices (in a 32-word row, one
//!   cache line while those words share the stamp's line, 8 generations of 31 at `k = 8`, and
//!   two otherwise), for callers that keep a window and need no reply per item
//!   (`benches/probes/aging_speed.rs` measures both).
//! * **Limits**: no deletion; rates below [`crate::math::AGING_MIN_FPR`] (1e-7) are refused:
//!   the formula's inclusion–exclusion carries a rounding error of about 1e-11, fine down to
//!   1e-7 (`k` up to about 17) and not below. For a window by time see
//!   [`crate::TimeLimitedBloom`] (same rows).
//!
//! ```
//! use sift::prelude::*;
//! use sift::AgingBloom;
//!
//! let mut f = AgingBloom::new(10_000, 0.01)?;
//! for i in 0..100_000u32 {
//!     f.insert(i.to_le_bytes());
//! }
//! // The last 10 000 insertions are members, always.
//! assert!((90_000..100_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // Items older than the window plus a generation are gone: 50 000 of them, and 100 000
//! // never-seen items, report present at most at a 99.9% binomial bound of 1%.
//! let old = (0..50_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(old < 570, "{old} old items still present");
//! let fp = (1_000_000..1_100_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 1_100, "{fp} false positives");
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{Storage, MAX_BYTES};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{
    decode_verified, write_words, Encoder, FilterKind, FrozenFile, FrozenPart, ParamReader, ParamWriter,
    StreamEncoder,
};
use crate::hash::{Digest, HashKind, Hasher, HotHasher};
use crate::math::{self, AGING_DEFAULT_MAX_SLICES, AGING_MAX_K, AGING_MAX_SLICES};
use crate::simd::{rows, Block, Kernel, PREFETCH_AHEAD};
use crate::traits::{Filter, Insert, Persist};

/// The layout code stored in the parameter block: 1 = the row layout of `src/simd/rows.rs`.
pub(crate) const LAYOUT: u32 = 1;

/// Bookkeeping of one slice, by physical index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SliceMeta {
    /// Counted insertions of the generation this slice started (while it was the youngest).
    pub(crate) items: u64,
    /// When it became the youngest (the caller's clock; 0 in a window by count).
    pub(crate) born: u64,
}

/// Rows of slices in a ring, with per-slice bookkeeping: the state both aging filters share.
///
/// Logical position `i` (0 = the youngest slice) is physical slice `(head + i) % slices`; the
/// `k` youngest take insertions, logical `0..live` are queried. `epoch` counts the generations
/// started; a row stamped with an older epoch has that many of its youngest slices stale
/// (`src/simd/rows.rs`).
#[derive(Clone)]
pub(crate) struct Ring {
    blocks: Storage<Block>,
    rows: u64,
    slices: usize,
    head: usize,
    live: usize,
    epoch: u32,
    meta: Vec<SliceMeta>,
    /// Bit `p` set when physical slice `p` has left the `k` youngest since it became the
    /// youngest. It left at the shift that made the slice now `k` positions younger the
    /// youngest, so its retirement time is that slice's birth ([`Ring::left_at`]): one bit
    /// instead of a third `u64` per record.
    left_set: u32,
    /// Per-word table of the kernels (a function of `slices`, `head` and `k`).
    ages: rows::Ages,
    kernel: Kernel,
    /// The owner's cache for its hot path, in what is otherwise the struct's tail padding (the
    /// ring is no larger with it): a window by time keeps here when its clock must next start
    /// a generation or retire a slice, as an offset from the current generation's start
    /// (`TimeLimitedBloom::refresh_due`). Follows from the rest; a window by count leaves it 0.
    pub(crate) due: u32,
}

impl PartialEq for Ring {
    /// Same shape, same bits, same bookkeeping (the kernel does not matter; `ages` and `due`
    /// follow from the rest).
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows
            && self.slices == other.slices
            && self.k() == other.k()
            && self.head == other.head
            && self.live == other.live
            && self.epoch == other.epoch
            && self.meta == other.meta
            && (0..self.slices).all(|p| self.left_of(p) == other.left_of(p))
            && self.blocks == other.blocks
    }
}

/// The bits of the result of [`rows::alignments`] that stand for alignments `0 ..= live - k`.
#[inline(always)]
fn valid_alignments(live: usize, k: usize) -> u32 {
    rows::low_bits(live) & !rows::low_bits(k - 1)
}

/// Epochs between two sweeps of the stamps ([`Ring::bump_epoch`]).
const SWEEP_EVERY: u32 = 1 << 30;

/// Checks a ring shape; the bytes of its rows.
pub(crate) fn check_shape(rows: u64, slices: u32, k: u32) -> Result<u64> {
    if rows == 0 {
        return Err(Error::param("rows", rows, "at least 1"));
    }
    if slices != 15 && slices != AGING_MAX_SLICES {
        return Err(Error::param("slices", slices, "15 or 31 (rows of 16 or 32 words with the stamp)"));
    }
    if k == 0 || k > AGING_MAX_K || k >= slices {
        return Err(Error::param("hashes", k, "between 1 and 24, and fewer than the slices"));
    }
    let bytes = rows as u128 * math::aging_row_words(slices) as u128 * 4;
    if bytes > MAX_BYTES || bytes > isize::MAX as u128 {
        return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
    }
    Ok(bytes as u64)
}

impl Ring {
    /// An empty ring (shape checked by [`check_shape`]); logical `0..live` are queried.
    pub(crate) fn new(rows: u64, slices: u32, k: u32, live: usize) -> Result<Ring> {
        let bytes = check_shape(rows, slices, k)?;
        let blocks = Storage::<Block>::zeroed((bytes / 64) as usize)?;
        Ok(Ring {
            blocks,
            rows,
            slices: slices as usize,
            head: 0,
            live,
            epoch: 0,
            meta: vec![SliceMeta::default(); slices as usize],
            left_set: 0,
            ages: rows::Ages::new(slices as usize, 0, k as usize),
            kernel: Kernel::detect(),
            due: 0,
        })
    }

    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }
    pub(crate) fn slices(&self) -> usize {
        self.slices
    }
    /// Slices each item is written into (kept once, in the kernel tables: the ring has no
    /// byte to spare for a second copy next to [`Ring::due`]).
    #[inline(always)]
    pub(crate) fn k(&self) -> usize {
        self.ages.k as usize
    }
    pub(crate) fn head(&self) -> usize {
        self.head
    }
    pub(crate) fn live(&self) -> usize {
        self.live
    }
    pub(crate) fn epoch(&self) -> u32 {
        self.epoch
    }
    pub(crate) fn kernel_name(&self) -> &'static str {
        self.kernel.name()
    }
    pub(crate) fn force_scalar(&mut self) {
        self.kernel = Kernel::scalar();
    }
    pub(crate) fn size_in_bytes(&self) -> usize {
        self.blocks.len() * 64
    }
    /// Bytes the ring holds outside its own struct: the rows and the per-slice records.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.size_in_bytes() + self.meta.capacity() * core::mem::size_of::<SliceMeta>()
    }

    /// Words per row: the stamp and one per slice.
    #[inline(always)]
    fn words_per_row(&self) -> usize {
        self.slices + 1
    }

    /// The physical slice at logical position `i` (`i < slices`).
    #[inline(always)]
    pub(crate) fn phys(&self, i: usize) -> usize {
        let p = self.head + i;
        if p >= self.slices {
            p - self.slices
        } else {
            p
        }
    }

    /// Bookkeeping of the slice at logical position `i`.
    pub(crate) fn meta_at(&self, i: usize) -> &SliceMeta {
        &self.meta[self.phys(i)]
    }

    /// Bookkeeping by physical index.
    pub(crate) fn meta(&self) -> &[SliceMeta] {
        &self.meta
    }

    /// When the slice at logical position `i` stopped taking insertions (left the `k`
    /// youngest): the birth of the slice `k` positions younger, which became the youngest at
    /// that shift and has not been replaced since (a slice is replaced only after every older
    /// one); 0 while it is among the `k` youngest, and before its first shift after a reset.
    #[inline(always)]
    pub(crate) fn left_at(&self, i: usize) -> u64 {
        if i >= self.k() && self.left_set >> self.phys(i) & 1 == 1 {
            self.meta[self.phys(i - self.k())].born
        } else {
            0
        }
    }

    /// [`Ring::left_at`] by physical index.
    pub(crate) fn left_of(&self, p: usize) -> u64 {
        self.left_at((p + self.slices - self.head) % self.slices)
    }

    /// Counted insertions of the current generation.
    #[inline(always)]
    pub(crate) fn current_items(&self) -> u64 {
        self.meta[self.head].items
    }

    /// The words of every row, row after row.
    pub(crate) fn words(&self) -> &[u32] {
        rows::words(&self.blocks)
    }

    #[inline(always)]
    fn row(&self, h1: u64) -> &[u32] {
        let n = self.words_per_row();
        let start = rows::row_index(h1, self.rows) as usize * n;
        &rows::words(&self.blocks)[start..start + n]
    }

    /// Hints the CPU to load the row of `h1` (every cache line of it: 16 words each).
    #[inline(always)]
    fn prefetch(&self, h1: u64) {
        let n = self.words_per_row();
        let start = rows::row_index(h1, self.rows) as usize * n;
        let words = rows::words(&self.blocks);
        for line in (0..n).step_by(16) {
            crate::bits::prefetch(words[start + line..].as_ptr());
        }
    }

    /// Whether the item has its run of `k` slices at some alignment among the `live` youngest.
    #[inline(always)]
    pub(crate) fn contains(&self, d: Digest, live: usize) -> bool {
        let row = self.row(d.h1);
        let stale = rows::stale(self.epoch, row[0]);
        let found = rows::alignments(self.kernel, row, rows::key(d.h2), &self.ages, stale);
        found & valid_alignments(live, self.k()) != 0
    }

    /// Writes the item into the `k` youngest slices. Returns (reported present before, set a
    /// new bit); a new bit counts the insertion toward the current generation.
    #[inline(always)]
    pub(crate) fn insert(&mut self, d: Digest) -> (bool, bool) {
        let y = rows::key(d.h2);
        let n = self.words_per_row();
        let start = rows::row_index(d.h1, self.rows) as usize * n;
        let guard = self.blocks.cow_guard();
        let _cow = guard.as_ref().map(|g| {
            let mut w = g.writer();
            w.before_write_values(rows::words(&self.blocks), start..start + n);
            w
        });
        let Ring { blocks, head, live, ages, kernel, epoch, .. } = self;
        let k = ages.k as usize;
        let row = &mut rows::words_mut(blocks)[start..start + n];
        let stale = rows::stale(*epoch, row[0]);
        let (found, new) = rows::insert(*kernel, row, y, ages, stale, *epoch);
        let present = found & valid_alignments(*live, k) != 0;
        let head = *head;
        if new {
            self.meta[head].items += 1;
        }
        (present, new)
    }

    /// [`Ring::insert`] without the answer "reported present before": the same bits, but only
    /// the words of the `k` youngest slices (and the stamp) are read and written
    /// ([`rows::push`]).
    #[inline(always)]
    pub(crate) fn push(&mut self, d: Digest) {
        let y = rows::key(d.h2);
        let n = self.words_per_row();
        let start = rows::row_index(d.h1, self.rows) as usize * n;
        let guard = self.blocks.cow_guard();
        let _cow = guard.as_ref().map(|g| {
            let mut w = g.writer();
            w.before_write_values(rows::words(&self.blocks), start..start + n);
            w
        });
        let Ring { blocks, ages, kernel, epoch, .. } = self;
        let row = &mut rows::words_mut(blocks)[start..start + n];
        let stale = rows::stale(*epoch, row[0]);
        if rows::push(*kernel, row, y, ages, stale, *epoch) {
            self.meta[self.head].items += 1;
        }
    }

    /// Answers for many digests, prefetching the rows ahead.
    pub(crate) fn contains_batch(&self, digests: &[Digest], live: usize, out: &mut [bool]) {
        assert_eq!(digests.len(), out.len(), "one output slot per digest");
        for d in digests.iter().take(PREFETCH_AHEAD) {
            self.prefetch(d.h1);
        }
        for (i, (d, o)) in digests.iter().zip(out.iter_mut()).enumerate() {
            if let Some(next) = digests.get(i + PREFETCH_AHEAD) {
                self.prefetch(next.h1);
            }
            *o = self.contains(*d, live);
        }
    }

    /// Starts a new generation at time `t`: the slice leaving the `k` youngest is stamped `t`,
    /// the slice after the oldest (the oldest itself when every slice is live) becomes the
    /// youngest, empty: the epoch moves on, which makes it stale in every row. The caller makes
    /// sure that slice holds nothing still needed.
    pub(crate) fn shift(&mut self, t: u64) {
        let leaving = self.phys(self.k() - 1);
        self.left_set |= 1 << leaving;
        self.head = if self.head == 0 { self.slices - 1 } else { self.head - 1 };
        self.meta[self.head] = SliceMeta { items: 0, born: t };
        self.left_set &= !(1 << self.head);
        self.live = (self.live + 1).min(self.slices);
        self.ages = rows::Ages::new(self.slices, self.head, self.k());
        self.bump_epoch(1);
    }

    /// Moves the epoch on by `by`. Every [`SWEEP_EVERY`] epochs the rows whose slices are all
    /// stale are re-stamped (still all stale), so that no stamp falls more than `2^30 + 32`
    /// epochs behind and `epoch - stamp` never wraps: one pass over the stamps every billion
    /// generations.
    fn bump_epoch(&mut self, by: u32) {
        let before = self.epoch;
        self.epoch = self.epoch.wrapping_add(by);
        if before / SWEEP_EVERY != self.epoch / SWEEP_EVERY {
            let (n, slices, epoch) = (self.words_per_row(), self.slices as u32, self.epoch);
            // A sweep may re-stamp any row: a frozen ring saves every piece first (once a
            // billion generations).
            let guard = self.blocks.cow_guard();
            let _cow = guard.as_ref().map(|g| {
                let mut w = g.writer();
                w.before_write_values(rows::words(&self.blocks), 0..rows::words(&self.blocks).len());
                w
            });
            for row in rows::words_mut(&mut self.blocks).chunks_exact_mut(n) {
                if rows::stale(epoch, row[0]) >= slices {
                    row[0] = epoch.wrapping_sub(32);
                }
            }
        }
    }

    /// Forgets the oldest live slices while `expired` says so of the time they stopped taking
    /// insertions ([`Ring::left_at`]), keeping the `k` youngest.
    pub(crate) fn retire(&mut self, mut expired: impl FnMut(u64) -> bool) {
        while self.live > self.k() && expired(self.left_at(self.live - 1)) {
            self.live -= 1;
        }
    }

    /// Every slice emptied (by moving the epoch past every row's stamp: no row is written) and
    /// every record cleared; logical `0..live` queried from now on, all born at `born` (the
    /// oldest of them is as young as the youngest: none holds anything from before).
    pub(crate) fn reset(&mut self, live: usize, born: u64) {
        self.meta.fill(SliceMeta::default());
        self.left_set = 0;
        self.head = 0;
        for m in &mut self.meta[..live] {
            m.born = born;
        }
        self.live = live;
        self.ages = rows::Ages::new(self.slices, 0, self.k());
        self.bump_epoch(self.slices as u32);
    }

    /// Counted insertions of the generations whose `k` slices are all among the `live`
    /// youngest: the items the window holds.
    pub(crate) fn held(&self, live: usize) -> u64 {
        if live < self.k() {
            return 0;
        }
        (0..=live - self.k()).map(|a| self.meta_at(a).items).fold(0u64, u64::saturating_add)
    }

    /// Counted insertions of every live generation.
    pub(crate) fn live_items(&self) -> u64 {
        (0..self.live).map(|a| self.meta_at(a).items).fold(0u64, u64::saturating_add)
    }

    /// [`math::aging_fpr`] with the loads of the live generations (per row).
    pub(crate) fn expected_fpr(&self, live: usize) -> f64 {
        let gens: Vec<f64> = (0..live).map(|a| self.meta_at(a).items as f64 / self.rows as f64).collect();
        math::aging_fpr(self.k() as u32, live, &gens)
    }

    /// Fraction of the bits of logical slice `i` that are set (reads one word per row; stale
    /// words count as empty).
    pub(crate) fn slice_fill(&self, i: usize) -> f64 {
        let w = self.phys(i) + 1;
        let ones: u64 = self
            .words()
            .chunks_exact(self.words_per_row())
            .filter(|r| (i as u32) >= rows::stale(self.epoch, r[0]))
            .map(|r| r[w].count_ones() as u64)
            .sum();
        ones as f64 / (self.rows as f64 * rows::WORD_BITS as f64)
    }

    /// The ring's fields as a file stores them first: rows, slices, k.
    pub(crate) fn write_shape(&self, p: &mut ParamWriter) {
        p.u64(self.rows).u32(self.slices as u32).u32(self.k() as u32);
    }

    /// Bytes of the payload (the rows).
    pub(crate) fn payload_len(&self) -> u64 {
        self.blocks.len() as u64 * 64
    }

    /// The file [`Ring::encode`] gives now, to be written later while the ring keeps changing:
    /// the header (shape, records) is copied now, the rows are guarded ([`crate::bits::COW_PIECE`]
    /// pieces copied aside by the writes that reach them before the file has been written).
    /// `None` when the rows are small enough to copy (not in their own huge-page allocation) or
    /// already frozen.
    pub(crate) fn freeze(
        &self,
        kind: FilterKind,
        hasher: Hasher,
        params: &ParamWriter,
    ) -> Option<FrozenFile> {
        let g = self.blocks.freeze()?;
        Some(FrozenFile::new(kind, hasher, params.as_bytes(), vec![FrozenPart::Words32(g)]))
    }

    /// Encodes a file: `params`, then the rows.
    pub(crate) fn encode(&self, kind: FilterKind, hasher: Hasher, params: &ParamWriter) -> Vec<u8> {
        let mut e = Encoder::new(kind, hasher, params.as_bytes(), self.payload_len());
        let out = e.payload();
        for w in self.words() {
            out.extend_from_slice(&w.to_le_bytes());
        }
        e.finish()
    }

    /// Streams the same file to `w`.
    pub(crate) fn write_to<W: std::io::Write + ?Sized>(
        &self,
        w: &mut W,
        kind: FilterKind,
        hasher: Hasher,
        params: &ParamWriter,
    ) -> std::io::Result<()> {
        let mut e = StreamEncoder::new(w, kind, hasher, params.as_bytes(), self.payload_len())?;
        // Two little-endian u32 words are the bytes of one little-endian u64 (rows have an even
        // number of words).
        write_words(&mut e, self.words().chunks_exact(2).map(|w| w[0] as u64 | (w[1] as u64) << 32))?;
        e.finish()?;
        Ok(())
    }

    /// Reads the shape fields written by [`Ring::write_shape`] and checks them.
    pub(crate) fn read_shape(r: &mut ParamReader<'_>, what: &'static str) -> Result<(u64, u32, u32)> {
        let rows = r.u64("rows")?;
        let slices = r.u32("slices")?;
        let k = r.u32("hashes")?;
        if check_shape(rows, slices, k).is_err() {
            return Err(FormatError::InvalidParams(what).into());
        }
        Ok((rows, slices, k))
    }

    /// A ring decoded from a file: the shape, where the youngest slice is, how many are live,
    /// the epoch, the records by physical slice, the times the slices stopped taking insertions
    /// (by physical slice; empty for none: a window by count) and the payload (checked to be
    /// the rows' bytes). A retirement time must be the birth of the slice `k` younger, as every
    /// shift makes it ([`Ring::left_at`]), or 0.
    pub(crate) fn decode(
        (rows, slices, k): (u64, u32, u32),
        head: u32,
        live: u32,
        epoch: u32,
        meta: Vec<SliceMeta>,
        lefts: &[u64],
        payload: &[u8],
    ) -> Result<Ring> {
        let bytes = check_shape(rows, slices, k)?;
        if head >= slices {
            return Err(FormatError::InvalidParams("aging filter: head is not a slice").into());
        }
        if live < k || live > slices {
            return Err(FormatError::InvalidParams("aging filter: live slices out of range").into());
        }
        if meta.len() != slices as usize {
            return Err(FormatError::InvalidParams("aging filter: one record per slice").into());
        }
        if payload.len() as u64 != bytes {
            return Err(FormatError::InvalidParams("aging filter: payload is not the rows' words").into());
        }
        let mut ring = Ring::new(rows, slices, k, live as usize)?;
        for (w, c) in rows::words_mut(&mut ring.blocks).iter_mut().zip(payload.chunks_exact(4)) {
            *w = u32::from_le_bytes(c.try_into().expect("4 bytes"));
        }
        ring.head = head as usize;
        ring.epoch = epoch;
        ring.meta = meta;
        ring.ages = rows::Ages::new(ring.slices, ring.head, ring.k());
        if !lefts.is_empty() && lefts.len() != ring.slices {
            return Err(FormatError::InvalidParams("aging filter: one record per slice").into());
        }
        for (p, &left) in lefts.iter().enumerate() {
            if left == 0 {
                continue;
            }
            let i = (p + ring.slices - ring.head) % ring.slices;
            if i < ring.k() || ring.meta[ring.phys(i - ring.k())].born != left {
                return Err(FormatError::InvalidParams(
                    "aging filter: a slice's retirement time is not the birth of the slice k younger",
                )
                .into());
            }
            ring.left_set |= 1 << p;
        }
        Ok(ring)
    }
}

/// A sliding-window Bloom filter over the last `N` insertions. See the
/// [module documentation](self).
#[derive(Clone)]
pub struct AgingBloom {
    ring: Ring,
    hasher: Hasher,
    /// `hasher` with its per-seed constants precomputed, for the hot paths.
    hot: HotHasher,
    /// Counted insertions per generation, `g`.
    generation: u64,
    /// The window asked for (at most `l·g`).
    window: u64,
    target_fpr: f64,
}

impl PartialEq for AgingBloom {
    fn eq(&self, other: &Self) -> bool {
        self.ring == other.ring
            && self.hasher == other.hasher
            && self.generation == other.generation
            && self.window == other.window
            && self.target_fpr == other.target_fpr
    }
}

impl core::fmt::Debug for AgingBloom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AgingBloom")
            .field("window", &self.window)
            .field("generation", &self.generation)
            .field("rows", &self.ring.rows)
            .field("slices", &self.ring.slices)
            .field("k", &self.ring.k())
            .field("head", &self.ring.head)
            .field("items", &self.ring.held(self.ring.live))
            .field("hasher", &self.hasher)
            .field("target_fpr", &self.target_fpr)
            .finish()
    }
}

/// Rows for generations of `g` items at `load` items per row per generation.
pub(crate) fn rows_for(g: u64, load: f64) -> Result<u64> {
    let rows = (g as f64 / load).ceil().max(1.0);
    if rows.is_nan() || rows >= (MAX_BYTES / 64) as f64 {
        return Err(Error::CapacityExceeded {
            requested_bytes: (rows * 64.0).min(u128::MAX as f64) as u128,
            limit_bytes: MAX_BYTES,
        });
    }
    Ok(rows as u64)
}

impl AgingBloom {
    /// A filter whose last `window` insertions are always members, at false-positive rate
    /// `fpr` (for never-seen items and for items that left the window), sized by
    /// [`math::aging_plan`] with rows of at most 31 slices, and the default hash.
    pub fn new(window: usize, fpr: f64) -> Result<Self> {
        check_items(window)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(window as u64, fpr);
        Self::with_hasher(window, fpr, Hasher::new(kind, 0))
    }

    /// Like [`AgingBloom::new`], with a chosen hash function and seed.
    pub fn with_hasher(window: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        check_items(window)?;
        check_fpr(fpr)?;
        let plan = math::aging_plan(fpr, AGING_DEFAULT_MAX_SLICES).ok_or(Error::param(
            "fpr",
            fpr,
            "a rate an aging filter can reach: 1e-7 and above",
        ))?;
        let generation = (window as u64).div_ceil(plan.l as u64);
        let rows = rows_for(generation, plan.load)?;
        let mut f = Self::with_params(rows, plan.slices, plan.k, generation, hasher)?;
        f.window = window as u64;
        f.target_fpr = fpr;
        Ok(f)
    }

    /// A filter of exactly `rows` rows of `slices` slices (15 or 31: rows of 16 or 32 words),
    /// writing each item into `hashes` slices (1 to 24, fewer than `slices`), with generations
    /// of `generation` insertions. Its window is `(slices - hashes)·generation` and its
    /// [`target_fpr`](AgingBloom::target_fpr) the worst-phase rate of that shape.
    pub fn with_params(rows: u64, slices: u32, hashes: u32, generation: u64, hasher: Hasher) -> Result<Self> {
        if generation == 0 {
            return Err(Error::param("generation", generation, "at least 1"));
        }
        check_shape(rows, slices, hashes)?;
        let window = (slices - hashes) as u64 * generation;
        let ring = Ring::new(rows, slices, hashes, slices as usize)?;
        let load = generation as f64 / rows as f64;
        let target = math::aging_fpr(hashes, slices as usize, &vec![load; slices as usize]);
        Ok(AgingBloom {
            ring,
            hasher,
            hot: HotHasher::new(hasher),
            generation,
            window,
            target_fpr: target.clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON),
        })
    }

    /// The number of most recent insertions that are always members.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Insertions per generation, `g`: the window moves by one slice every `g` insertions.
    pub fn generation_size(&self) -> u64 {
        self.generation
    }

    /// Slices per row, `k + l`.
    pub fn num_slices(&self) -> u32 {
        self.ring.slices as u32
    }

    /// Slices each item is written into, `k`.
    pub fn num_hashes(&self) -> u32 {
        self.ring.k() as u32
    }

    /// Rows (each one word per slice).
    pub fn num_rows(&self) -> u64 {
        self.ring.rows
    }

    /// The false-positive rate the filter was sized for (worst phase of a full window).
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Bytes the filter has allocated outside its own struct: the rows
    /// ([`Filter::size_in_bytes`]) and one record per slice. A filter in memory takes this plus
    /// `size_of::<AgingBloom>()`.
    pub fn heap_bytes(&self) -> usize {
        self.ring.heap_bytes()
    }

    /// The probe kernel in use: `"avx2"` or `"scalar"`.
    pub fn kernel_name(&self) -> &'static str {
        self.ring.kernel_name()
    }

    /// Switches to the portable kernel (tests cover both; the bits are the same).
    #[doc(hidden)]
    pub fn force_scalar(&mut self) {
        self.ring.force_scalar();
    }

    /// Slices queried: the `k` youngest and the older ones holding insertions of the window
    /// (every slice once the ring has turned).
    pub fn live_slices(&self) -> u32 {
        self.ring.live as u32
    }

    /// Insertions counted since the oldest slice became the youngest: how far back, in
    /// insertions, the filter can still remember (between the window and the window plus a
    /// generation once it is full).
    pub fn oldest_slice_age(&self) -> u64 {
        self.ring.live_items()
    }

    /// Counted insertions of the current generation (the window moves on when it reaches
    /// [`generation_size`](Self::generation_size), or, for a window by time, when its time is up).
    pub fn current_generation(&self) -> u64 {
        self.ring.current_items()
    }

    /// Fraction of the bits of the `i`-th youngest slice that are set (reads one word per row).
    ///
    /// # Panics
    /// If `i` is not below [`AgingBloom::num_slices`].
    pub fn slice_fill(&self, i: usize) -> f64 {
        assert!(i < self.ring.slices, "slice {i} of {}", self.ring.slices);
        self.ring.slice_fill(i)
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// the parameters and slice records are copied now, the rows are guarded (pieces of
    /// [`crate::bits::COW_PIECE`] bytes copied aside by the writes that reach them before the
    /// file has been written), so that no write waits for a copy of the whole filter. `None` for
    /// a filter small enough to copy (not in its own huge-page allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        self.ring.freeze(Self::KIND, self.hasher, &self.params())
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        let live = self.ring.slices;
        self.ring.reset(live, 0);
    }

    /// Inserts `item` without answering whether it was present: the filter afterwards is the
    /// one [`Insert::insert`] leaves, bit for bit (the window moves the same way), but only the
    /// item's `k` youngest slices are read, where `insert` reads every slice of the row to
    /// answer. For streams that only need the window kept (a replica applying its primary's
    /// insertions, a log replayed, a bulk load), not a reply per item.
    // Always inlined: a call costs this short path its register saves and restores, about a
    // tenth of its instructions (benches/probes/aging_speed.rs).
    #[inline(always)]
    pub fn push<T: AsRef<[u8]>>(&mut self, item: T) {
        let d = self.hot.digest(item.as_ref());
        self.push_digest(d);
    }

    /// [`AgingBloom::push`] of the item with this digest.
    #[inline(always)]
    pub fn push_digest(&mut self, d: Digest) {
        if self.ring.current_items() >= self.generation {
            self.ring.shift(0);
        }
        self.ring.push(d);
    }

    /// [`AgingBloom::push`] of many digests in order, prefetching their rows ahead.
    pub fn push_digests(&mut self, digests: &[Digest]) {
        for d in digests.iter().take(PREFETCH_AHEAD) {
            self.ring.prefetch(d.h1);
        }
        for (i, d) in digests.iter().enumerate() {
            if let Some(next) = digests.get(i + PREFETCH_AHEAD) {
                self.ring.prefetch(next.h1);
            }
            self.push_digest(*d);
        }
    }

    /// [`AgingBloom::push`] of many items in order.
    pub fn push_many<T: AsRef<[u8]>>(&mut self, items: &[T]) {
        let mut digests = [Digest::default(); 256];
        for chunk in items.chunks(256) {
            for (d, item) in digests.iter_mut().zip(chunk) {
                *d = self.hot.digest(item.as_ref());
            }
            self.push_digests(&digests[..chunk.len()]);
        }
    }

    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        self.ring.write_shape(&mut p);
        p.u64(self.generation)
            .u64(self.window)
            .f64(self.target_fpr)
            .u32(self.ring.head() as u32)
            .u32(LAYOUT)
            .u32(self.ring.epoch())
            .u32(0);
        for m in self.ring.meta() {
            p.u64(m.items);
        }
        p
    }
}

impl Filter for AgingBloom {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        self.ring.contains(d, self.ring.live)
    }

    /// Same answer as the trait's default; reads the hasher in place instead of copying it out.
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.ring.contains(self.hot.digest(item.as_ref()), self.ring.live)
    }

    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        self.ring.contains_batch(digests, self.ring.live, out);
    }

    /// Insertions the window holds (counted as the window counts them: see the module doc).
    fn len(&self) -> usize {
        self.ring.held(self.ring.live).min(usize::MAX as u64) as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.ring.size_in_bytes()
    }

    /// [`math::aging_fpr`] with the sizes of the live generations: the rate for never-seen
    /// items now, rising through a generation and falling at each shift.
    fn expected_fpr(&self) -> f64 {
        self.ring.expected_fpr(self.ring.live)
    }
}

impl Insert for AgingBloom {
    #[inline]
    fn insert_digest(&mut self, d: Digest) -> bool {
        if self.ring.current_items() >= self.generation {
            self.ring.shift(0);
        }
        !self.ring.insert(d).0
    }

    /// Same effect as the trait's default, without copying the hasher out.
    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool {
        let d = self.hot.digest(item.as_ref());
        self.insert_digest(d)
    }

    fn insert_digests(&mut self, digests: &[Digest]) -> usize {
        for d in digests.iter().take(PREFETCH_AHEAD) {
            self.ring.prefetch(d.h1);
        }
        let mut new = 0;
        for (i, d) in digests.iter().enumerate() {
            if let Some(next) = digests.get(i + PREFETCH_AHEAD) {
                self.ring.prefetch(next.h1);
            }
            new += self.insert_digest(*d) as usize;
        }
        new
    }
}

impl Persist for AgingBloom {
    const KIND: FilterKind = FilterKind::AgingBloom;

    /// Parameters: rows `u64`, slices `u32`, hashes `u32`, generation `u64`, window `u64`,
    /// target FPR `f64`, head `u32`, layout `u32` (1), epoch `u32`, reserved `u32` (0), then per
    /// slice (physical order) the counted insertions of its generation `u64`. Payload: the rows
    /// in order, each as its stamp and `slices` words, 32-bit little-endian (`docs/FORMAT.md`).
    fn to_bytes(&self) -> Vec<u8> {
        self.ring.encode(Self::KIND, self.hasher, &self.params())
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let shape = Ring::read_shape(&mut r, "aging bloom: bad shape")?;
        let generation = r.u64("generation")?;
        let window = r.u64("window")?;
        let target_fpr = r.fpr("target fpr")?;
        let head = r.u32("head")?;
        let layout = r.u32("layout")?;
        let epoch = r.u32("epoch")?;
        let reserved = r.u32("reserved")?;
        let mut meta = Vec::with_capacity(shape.1 as usize);
        for _ in 0..shape.1 {
            meta.push(SliceMeta { items: r.u64("generation items")?, born: 0 });
        }
        r.finish()?;
        if layout != LAYOUT || reserved != 0 {
            return Err(FormatError::InvalidParams("aging bloom: unknown row layout").into());
        }
        if generation == 0 {
            return Err(FormatError::InvalidParams("aging bloom: zero generation").into());
        }
        let most = (shape.1 - shape.2) as u128 * generation as u128;
        if window == 0 || window as u128 > most {
            return Err(FormatError::InvalidParams("aging bloom: window outside 1..=l·g").into());
        }
        if meta.iter().any(|m| m.items > generation) {
            return Err(FormatError::InvalidParams("aging bloom: a generation larger than g").into());
        }
        let ring = Ring::decode(shape, head, shape.1, epoch, meta, &[], raw.payload())?;
        Ok(AgingBloom {
            ring,
            hasher: raw.hasher(),
            hot: HotHasher::new(raw.hasher()),
            generation,
            window,
            target_fpr,
        })
    }

    /// The bytes of [`Persist::to_bytes`], streamed.
    fn write_to<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        self.ring.write_to(w, Self::KIND, self.hasher, &self.params())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::filters::blocked_bloom::tests::{digest, upper_bound};
    use crate::format::{assert_each_write_keeps_frozen, NamedWrite};

    /// The last `window` insertions are members after every insertion, on both kernels, for
    /// several shapes, including windows that are not a multiple of `l`.
    #[test]
    fn window_is_always_present() {
        for (window, p) in [(1usize, 0.01), (7, 0.1), (1000, 0.01), (5003, 0.001)] {
            for scalar in [false, true] {
                let mut f = AgingBloom::new(window, p).unwrap();
                if scalar {
                    f.force_scalar();
                }
                let mut st = window as u64;
                let ds: Vec<Digest> = (0..window * 6 + 17).map(|_| digest(&mut st)).collect();
                for (i, d) in ds.iter().enumerate() {
                    f.insert_digest(*d);
                    // The oldest member of the window (presence only ends by age).
                    let oldest = (i + 1).saturating_sub(window);
                    assert!(f.contains_digest(ds[oldest]), "window {window}: insert {i}, item {oldest}");
                    if i % 997 == 0 || i + 1 == ds.len() {
                        assert!(
                            ds[oldest..=i].iter().all(|d| f.contains_digest(*d)),
                            "window {window} at {i}"
                        );
                    }
                }
                assert!(f.len() as u64 <= f.generation_size() * (f.num_slices() - f.num_hashes() + 1) as u64);
            }
        }
    }

    /// Items leave within a generation of the window; old items and never-seen items report
    /// present at the filter's rate (99.9% binomial bounds), in the worst phase of the cycle.
    #[test]
    fn fpr_over_a_stream() {
        for (window, p) in [(20_000usize, 0.1), (20_000, 0.01), (50_000, 0.001)] {
            let mut f = AgingBloom::new(window, p).unwrap();
            let mut st = 77;
            let mut ds: Vec<Digest> = (0..window * 5).map(|_| digest(&mut st)).collect();
            for d in &ds {
                f.insert_digest(*d);
            }
            // Fill the current generation: the worst phase, right before a shift.
            let g = f.generation_size() as usize;
            while (f.ring.current_items() as usize) < g {
                let d = digest(&mut st);
                f.insert_digest(d);
                ds.push(d);
            }
            let n = ds.len();
            let gone = n - window - g;
            let old = ds[..gone].iter().filter(|d| f.contains_digest(**d)).count();
            let probes = 400_000;
            let fp = (0..probes).filter(|_| f.contains_digest(digest(&mut st))).count();
            let (old_rate, rate) = (old as f64 / gone as f64, fp as f64 / probes as f64);
            let expected = f.expected_fpr();
            eprintln!(
                "window {window} p {p}: {:.2} bits/item, k {} slices {}, measured {rate:.5}, old {old_rate:.5}, \
                 expected {expected:.5}, target {:.5}",
                f.size_in_bytes() as f64 * 8.0 / window as f64,
                f.num_hashes(),
                f.num_slices(),
                f.target_fpr()
            );
            assert!(expected <= p * 1.0001, "expected {expected} above target {p}");
            assert!(fp as f64 <= probes as f64 * upper_bound(p, probes as f64), "measured {rate} above {p}");
            assert!(old as f64 <= gone as f64 * upper_bound(p, gone as f64), "old items {old_rate}");
            // The formula is exact for the layout: the measured rate lies within 99.9% bounds
            // of it (plus 3% for the spread of one filter's loads around the Poisson model).
            let sd = (expected * (1.0 - expected) / probes as f64).sqrt();
            assert!(
                (rate - expected).abs() <= 3.3 * sd + 0.03 * expected,
                "measured {rate} vs formula {expected}"
            );
        }
    }

    /// `push` builds the filter `insert` builds, bit for bit, through many shifts, on both
    /// kernels, one at a time and in batches; and it keeps the window.
    #[test]
    fn push_builds_what_insert_builds() {
        for (window, p) in [(7usize, 0.1), (1000, 0.01), (5003, 0.001)] {
            for scalar in [false, true] {
                let mut a = AgingBloom::new(window, p).unwrap();
                if scalar {
                    a.force_scalar();
                }
                let (mut b, mut c) = (a.clone(), a.clone());
                let mut st = 11 + window as u64;
                // Repeats included: they must not move the window either way.
                let ds: Vec<Digest> = (0..window * 7 + 5)
                    .map(|i| if i % 5 == 4 { Digest { h1: i as u64, h2: 7 } } else { digest(&mut st) })
                    .collect();
                for (i, d) in ds.iter().enumerate() {
                    a.insert_digest(*d);
                    b.push_digest(*d);
                    if i % 113 == 0 {
                        assert!(a == b, "window {window}: apart after {i}");
                    }
                    let oldest = (i + 1).saturating_sub(window);
                    assert!(b.contains_digest(ds[oldest]), "window {window}: insert {i}, item {oldest}");
                }
                c.push_digests(&ds);
                assert!(a == b && a == c, "window {window}");
                assert_eq!(a.to_bytes(), b.to_bytes());
                assert_eq!(a.to_bytes(), c.to_bytes());
            }
        }
        let mut a = AgingBloom::new(100, 0.01).unwrap();
        let mut b = a.clone();
        let items: Vec<[u8; 4]> = (0..1000u32).map(|i| i.to_le_bytes()).collect();
        a.insert_many(&items);
        b.push_many(&items);
        assert_eq!(a.to_bytes(), b.to_bytes());
        for i in &items[..10] {
            b.push(i);
            a.insert(i);
        }
        assert_eq!(a.to_bytes(), b.to_bytes());
    }

    /// Repeats of items the youngest slices hold do not move the window.
    #[test]
    fn repeats_do_not_push_items_out() {
        let mut f = AgingBloom::new(1000, 0.01).unwrap();
        let mut st = 3;
        let ds: Vec<Digest> = (0..1000).map(|_| digest(&mut st)).collect();
        for d in &ds {
            f.insert_digest(*d);
        }
        let age = f.oldest_slice_age();
        for _ in 0..10 {
            for d in &ds[990..] {
                assert!(!f.insert_digest(*d), "a repeat is reported present");
            }
        }
        assert_eq!(f.oldest_slice_age(), age);
        assert!(ds.iter().all(|d| f.contains_digest(*d)));
    }

    #[test]
    fn round_trip_equality_and_corruption() {
        let mut f = AgingBloom::new(3000, 0.01).unwrap();
        let mut st = 5;
        for _ in 0..10_000 {
            f.insert_digest(digest(&mut st));
        }
        let bytes = f.to_bytes();
        let g = AgingBloom::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        let mut streamed = Vec::new();
        f.write_to(&mut streamed).unwrap();
        assert_eq!(streamed, bytes);
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n / 2] ^= 4;
        assert!(matches!(
            AgingBloom::from_bytes(&bad),
            Err(Error::Format(FormatError::ChecksumMismatch { .. }))
        ));
    }

    /// Re-encodes a file with edited parameters and a fresh CRC, to reach the validation that
    /// comes after the checksum.
    fn reencode(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>), payload_delta: i64) -> Vec<u8> {
        let raw = crate::format::decode(bytes).unwrap();
        let mut params = raw.params().to_vec();
        edit(&mut params);
        let payload = raw.payload();
        let len = (payload.len() as i64 + payload_delta) as usize;
        let mut e = Encoder::new(FilterKind::AgingBloom, raw.hasher(), &params, len as u64);
        e.payload().extend_from_slice(&payload[..len.min(payload.len())]);
        let out = e.payload();
        out.resize(out.len() + len.saturating_sub(payload.len()), 0);
        e.finish()
    }

    #[test]
    fn inconsistent_parameters_are_errors() {
        let mut f = AgingBloom::new(1000, 0.01).unwrap();
        for i in 0..1500u32 {
            f.insert(i.to_le_bytes());
        }
        let bytes = f.to_bytes();
        assert_eq!(AgingBloom::from_bytes(&reencode(&bytes, |_| {}, 0)).unwrap(), f);
        let set32 =
            |at: usize, v: u32| move |p: &mut Vec<u8>| p[at..at + 4].copy_from_slice(&v.to_le_bytes());
        let set64 =
            |at: usize, v: u64| move |p: &mut Vec<u8>| p[at..at + 8].copy_from_slice(&v.to_le_bytes());
        let cases: Vec<Vec<u8>> = vec![
            reencode(&bytes, set64(0, 0), 0),               // no rows
            reencode(&bytes, set64(0, u64::MAX), 0),        // absurd rows
            reencode(&bytes, set32(8, 16), 0),              // slices neither 15 nor 31
            reencode(&bytes, set32(8, 63), 0),              // too many slices
            reencode(&bytes, set32(12, 0), 0),              // k = 0
            reencode(&bytes, set32(12, 31), 0),             // k = slices
            reencode(&bytes, set64(16, 0), 0),              // g = 0
            reencode(&bytes, set64(24, 0), 0),              // window 0
            reencode(&bytes, set64(24, u64::MAX), 0),       // window past l·g
            reencode(&bytes, set64(32, 2f64.to_bits()), 0), // fpr
            reencode(&bytes, set32(40, 99), 0),             // head past the slices
            reencode(&bytes, set32(44, 2), 0),              // layout
            reencode(&bytes, set32(52, 1), 0),              // reserved
            reencode(&bytes, set64(56, u64::MAX), 0),       // generation past g
            reencode(&bytes, |p| p.push(0), 0),             // long
            reencode(&bytes, |p| p.truncate(50), 0),        // short
            reencode(&bytes, |_| {}, -8),                   // payload
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(
                matches!(AgingBloom::from_bytes(c), Err(Error::Format(_))),
                "case {i}: {:?}",
                AgingBloom::from_bytes(c)
            );
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            AgingBloom::new(0, 0.01),
            Err(Error::InvalidParameter { name: "expected_items", .. })
        ));
        for p in [1e-8, 1e-17] {
            assert!(
                matches!(AgingBloom::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })),
                "{p}"
            );
        }
        assert!(AgingBloom::new(10, math::AGING_MIN_FPR).is_ok());
        for p in [0.0, 1.0, f64::NAN, -1.0] {
            assert!(matches!(AgingBloom::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })));
        }
        assert!(matches!(AgingBloom::new(usize::MAX, 0.01), Err(Error::CapacityExceeded { .. })));
        let h = Hasher::default();
        assert!(AgingBloom::with_params(0, 15, 4, 10, h).is_err());
        assert!(AgingBloom::with_params(1, 16, 4, 10, h).is_err());
        assert!(AgingBloom::with_params(1, 15, 15, 10, h).is_err());
        assert!(AgingBloom::with_params(1, 15, 0, 10, h).is_err());
        assert!(AgingBloom::with_params(1, 15, 4, 0, h).is_err());
        assert!(AgingBloom::with_params(1, 31, 25, 10, h).is_err());
        assert!(matches!(
            AgingBloom::with_params(u64::MAX, 31, 4, 1, h),
            Err(Error::CapacityExceeded { .. })
        ));
    }

    /// Both kernels give the same bits, answers and files over a long stream with shifts.
    #[test]
    fn kernels_give_the_same_filter() {
        let mut a = AgingBloom::new(2000, 0.01).unwrap();
        let mut b = a.clone();
        b.force_scalar();
        let mut st = 8;
        for _ in 0..20_000 {
            let d = digest(&mut st);
            assert_eq!(a.insert_digest(d), b.insert_digest(d));
            let q = digest(&mut st);
            assert_eq!(a.contains_digest(q), b.contains_digest(q));
        }
        assert_eq!(a.to_bytes(), b.to_bytes());
        let ds: Vec<Digest> = (0..5000).map(|_| digest(&mut st)).collect();
        let mut out = vec![false; ds.len()];
        a.contains_digests(&ds, &mut out);
        assert!(ds.iter().zip(&out).all(|(d, o)| b.contains_digest(*d) == *o));
        let mut c = b.clone();
        assert_eq!(a.insert_digests(&ds), ds.iter().filter(|d| c.insert_digest(**d)).count());
        assert_eq!(a.to_bytes(), c.to_bytes());
    }

    /// Crossing a multiple of 2^30 epochs re-stamps the rows whose slices are all stale, so
    /// that `epoch - stamp` never wraps; the filter goes on working across it.
    #[test]
    fn epoch_sweep_keeps_stamps_close() {
        let mut f = AgingBloom::new(1000, 0.01).unwrap();
        let mut st = 41;
        let ds: Vec<Digest> = (0..500).map(|_| digest(&mut st)).collect();
        for d in &ds {
            f.insert_digest(*d);
        }
        let n = f.ring.words_per_row();
        // Far in the future: every row is stale (as after 2^30 generations without a write).
        f.ring.epoch = SWEEP_EVERY - 2;
        assert!(ds.iter().all(|d| !f.ring.contains(*d, f.ring.live)), "every slice stale");
        f.ring.shift(0);
        f.ring.shift(0);
        let epoch = f.ring.epoch;
        assert_eq!(epoch, SWEEP_EVERY);
        for row in f.ring.words().chunks_exact(n) {
            assert_eq!(row[0], epoch.wrapping_sub(32), "a fully stale row is re-stamped");
        }
        let more: Vec<Digest> = (0..3000).map(|_| digest(&mut st)).collect();
        for (i, d) in more.iter().enumerate() {
            f.insert_digest(*d);
            assert!(f.contains_digest(more[(i + 1).saturating_sub(1000)]), "insert {i}");
        }
    }

    #[test]
    fn expected_fpr_tracks_the_phase() {
        let mut f = AgingBloom::new(10_000, 0.01).unwrap();
        let mut st = 1;
        assert_eq!(f.expected_fpr(), 0.0);
        let g = f.generation_size() as usize;
        for _ in 0..g * 40 {
            f.insert_digest(digest(&mut st));
        }
        let full = f.expected_fpr();
        f.insert_digest(digest(&mut st));
        let after = f.expected_fpr();
        assert!(after < full, "a shift lowers the rate: {after} vs {full}");
        assert!((full - f.target_fpr()).abs() < 0.05 * f.target_fpr(), "{full} vs {}", f.target_fpr());
        f.clear();
        assert!(f.is_empty() && f.expected_fpr() == 0.0 && f.slice_fill(0) == 0.0);
    }

    /// A filter of 8 MiB of rows (huge storage on Linux, so it freezes: 32 copy-on-write
    /// pieces) with 20,000 items over 4 generations of 5,000 (the youngest half full).
    fn big_aging(scalar: bool) -> AgingBloom {
        let mut f = AgingBloom::with_params(1 << 16, 31, 8, 5_000, Hasher::default()).unwrap();
        if scalar {
            f.force_scalar();
        }
        for i in 0..17_500u32 {
            f.insert(i.to_le_bytes());
        }
        f
    }

    /// Each kind of write, alone while the filter is frozen, changes the live filter and leaves
    /// the frozen file as it was at the freeze (rows and slice records), whether the filter is
    /// dropped before the file is written or not, on both kernels: an insert, a push, a batch of
    /// each across a generation shift, a clear, and the epoch sweep that re-stamps every stale
    /// row. One write at a time, so that a write skipping its guard fails this test.
    #[test]
    fn every_write_alone_keeps_the_frozen_file() {
        assert!(AgingBloom::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let ops: [NamedWrite<'_, AgingBloom>; 6] = [
            ("insert", Box::new(|f| assert!(f.insert(b"new item")))),
            ("push", Box::new(|f| f.push(b"new item"))),
            (
                "insert batch past a shift",
                Box::new(|f| {
                    let items: Vec<[u8; 4]> = (100_000..103_000u32).map(|i| i.to_le_bytes()).collect();
                    let ds: Vec<Digest> = items.iter().map(|i| f.hot.digest(i)).collect();
                    f.insert_digests(&ds);
                }),
            ),
            (
                "push batch past a shift",
                Box::new(|f| {
                    let items: Vec<[u8; 4]> = (100_000..103_000u32).map(|i| i.to_le_bytes()).collect();
                    f.push_many(&items);
                }),
            ),
            ("clear", Box::new(|f| f.clear())),
            (
                "epoch sweep",
                Box::new(|f| {
                    f.ring.epoch = SWEEP_EVERY - 1;
                    f.ring.shift(0);
                }),
            ),
        ];
        for scalar in [false, true] {
            assert_each_write_keeps_frozen(&|| big_aging(scalar), |f| f.to_bytes(), AgingBloom::freeze, &ops);
        }
    }

    /// An insert or a push copies aside only the piece of the row it writes (a row of 128 bytes
    /// never straddles two pieces), and the sweep every piece.
    #[test]
    fn a_write_during_a_freeze_copies_only_the_pieces_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        use crate::bits::COW_PIECE;
        let mut f = big_aging(false);
        let at_freeze: Vec<u32> = f.ring.words().to_vec();
        let frozen = f.freeze().unwrap();
        let g = frozen.guard(0);
        assert_eq!(g.len() / COW_PIECE, 32);
        let changed = |f: &AgingBloom| crate::bits::pieces_differing(f.ring.words(), &at_freeze).len();
        for i in 0..12u32 {
            let saved = g.saved_pieces();
            if i % 2 == 0 {
                f.insert(format!("x{i}"));
            } else {
                f.push(format!("x{i}"));
            }
            assert!(g.saved_pieces() <= saved + 1, "one row, one piece at most");
            assert_eq!(g.saved_pieces(), changed(&f), "after write {i}");
        }
        assert!(g.saved_pieces() >= 6);
        f.ring.epoch = SWEEP_EVERY - 1;
        f.ring.shift(0);
        assert_eq!(g.saved_pieces(), 32, "the sweep may re-stamp any row");
    }
}
