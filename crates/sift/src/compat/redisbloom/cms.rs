//! RedisBloom's Count-Min Sketch, `CMSk-TYPE` (spec `redisbloom-sketches.md` §5, RDB §10.3).
//!
//! The Count-Min Sketch of Cormode and Muthukrishnan ("An Improved Data Stream Summary: The
//! Count-Min Sketch and its Applications", J. Algorithms 55(1), 2005) keeps `depth` rows of
//! `width` counters. An item increments one counter per row, chosen by a per-row hash; its count
//! is estimated by the smallest of those counters. The estimate never falls below the true count
//! (counters only grow, and only collisions add to them); with `width = ⌈e/ε⌉` and
//! `depth = ⌈ln(1/δ)⌉` it exceeds it by more than `ε·N` (N the total of all increments) with
//! probability at most δ.
//!
//! RedisBloom's choices, reproduced exactly: the row hash is 32-bit MurmurHash2 seeded with the
//! row number, reduced modulo the width; counters are u32 and **saturate** at 2^32 − 1; the
//! total `count` is a wrapping u64; `CMS.INITBYPROB` sizes the sketch as `width = ⌈2/error⌉` and
//! `depth = ⌈log10(p) / log10(0.5)⌉` computed in single precision (so `depth = ⌈log2(1/p)⌉`
//! for most inputs); `CMS.MERGE` replaces the destination with a weighted sum of sketches of the
//! same shape and refuses any sum outside a counter's range. Memory: 4 bytes per counter.
//!
//! ```
//! use sift::compat::redisbloom::CountMinSketch;
//!
//! // CMS.INITBYPROB k 0.001 0.01 → 2000 × 7; CMS.INCRBY k x 1 x 2 x 3 → [1, 3, 6].
//! let mut cms = CountMinSketch::init_by_prob(0.001, 0.01, u64::MAX)?;
//! assert_eq!((cms.width(), cms.depth()), (2000, 7));
//! let answers: Vec<u32> = [1, 2, 3].iter().map(|&v| cms.incr_by(b"x", v)).collect();
//! assert_eq!(answers, [1, 3, 6]);
//! assert_eq!(cms.query(b"x"), 6);
//! assert_eq!(cms.count(), 6);
//!
//! // A seeded check of the ε·N bound: 20 000 increments over 2 000 items, ε = 0.001.
//! let mut x = 0x9e37_79b9_7f4a_7c15u64;
//! let mut truth = vec![0u32; 2000];
//! for _ in 0..20_000 {
//!     x ^= x << 13; x ^= x >> 7; x ^= x << 17;
//!     let i = (x % 2000) as usize;
//!     truth[i] += 1;
//!     cms.incr_by(format!("item:{i}").as_bytes(), 1);
//! }
//! // Every estimate is at least the truth. A row over-counts an item by its share of the other
//! // items' increments, N / width on average, so by more than 2·N / width with probability at
//! // most 1/2 (Markov); all 7 rows do with probability at most 2^-7. Of 2000 items, at most
//! // 15.6 are expected above truth + 2·N / width; 40 is more than 6 binomial deviations above.
//! let n = cms.count() as u32;
//! let mut over = 0;
//! for (i, &t) in truth.iter().enumerate() {
//!     let est = cms.query(format!("item:{i}").as_bytes());
//!     assert!(est >= t);
//!     over += (est > t + 2 * n / 2000) as u32;
//! }
//! assert!(over <= 40, "{over}");
//! # Ok::<(), sift::compat::redisbloom::CmsCreateError>(())
//! ```

use crate::bits::{CowHandle, CowWriter, Storage};
use crate::hash::murmur2_32;

/// A counter's ceiling: counters saturate here, and an increment whose result is this value is
/// answered with `CMS: INCRBY overflow` (§5.4).
pub const CMS_COUNTER_MAX: u32 = u32::MAX;

/// Largest `width · depth` a sketch may have: (2^64 − 1) / 4 (§5.2).
pub const CMS_MAX_CELLS: u64 = u64::MAX / 4;

/// Why a sketch could not be created (`CMS.INITBYDIM`, `CMS.INITBYPROB`). The variants come in
/// the order RedisBloom checks them; each names the reply it becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CmsCreateError {
    /// INITBYDIM's width is below 1. (`CMS: invalid width`.)
    #[error("width must be at least 1")]
    InvalidWidth,
    /// INITBYDIM's depth is below 1. (`CMS: invalid depth`.)
    #[error("depth must be at least 1")]
    InvalidDepth,
    /// INITBYPROB's error is not in (0, 1). (`CMS: invalid overestimation value`.)
    #[error("overestimation must be in (0, 1)")]
    InvalidOverestimation,
    /// INITBYPROB's probability is not in (0, 1). (`CMS: invalid prob value`.)
    #[error("probability must be in (0, 1)")]
    InvalidProbability,
    /// A dimension below 1 (INITBYPROB's depth for a probability that rounds to 1 in single
    /// precision), at or above 2^63, infinite, or `width · depth` above 2^63 − 1.
    /// (`CMS: invalid init arguments`.)
    #[error("invalid dimensions")]
    InvalidDimensions,
    /// `width · depth` above (2^64 − 1) / 4, the cells above the caller's byte budget, or the
    /// allocation failed. (`CMS: Insufficient memory to create the key`.)
    #[error("not enough memory for the counters")]
    InsufficientMemory,
}

/// Why `CMS.MERGE` failed after its arguments were checked (§5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CmsMergeError {
    /// No source was given (the command refuses `numKeys <= 0` before: `CMS: Number of keys must
    /// be positive`).
    #[error("no source sketch")]
    NoSources,
    /// Source `index` has another width or depth than the destination.
    /// (`CMS: width/depth is not equal`.)
    #[error("source {index} has another width or depth")]
    ShapeMismatch {
        /// Position of the source in the list.
        index: usize,
    },
    /// A weighted cell sum or the weighted count sum is out of range. (`CMS: MERGE overflow`.)
    #[error("weighted sum out of range")]
    Overflow,
}

/// One source of [`CountMinSketch::merge`]: the destination itself (its contents before the
/// merge), or another sketch.
#[derive(Debug, Clone, Copy)]
pub enum CmsSource<'a> {
    /// The destination, as it was before the merge.
    Destination,
    /// Another sketch.
    Sketch(&'a CountMinSketch),
}

/// A piece of counters that is not the next one of a chunked load
/// ([`CountMinSketch::load_cells`]): pieces come in order from the first byte, within the
/// sketch's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{len} bytes of counters at {at}: expected the piece at {expected} of the sketch's {cells}")]
pub struct CmsCellsError {
    /// Where the piece starts, in bytes.
    pub at: u64,
    /// Its length.
    pub len: u64,
    /// Where the next piece must start.
    pub expected: u64,
    /// Bytes of the sketch's counters.
    pub cells: u64,
}

/// A Count-Min Sketch with RedisBloom's layout and arithmetic (§5).
#[derive(Clone, PartialEq, Eq)]
pub struct CountMinSketch {
    width: u64,
    depth: u64,
    count: u64,
    /// `depth × width` u32 counters, row-major, little-endian: exactly the RDB string (§10.3),
    /// so saving copies nothing. Large ones in huge-page storage, which a snapshot can read
    /// while the counters change ([`CountMinSketch::freeze`]).
    cells: Storage<u8>,
    /// Bytes of counters a chunked load has still to fill ([`CountMinSketch::load_cells`]); 0
    /// otherwise.
    load_missing: u64,
}

impl core::fmt::Debug for CountMinSketch {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CountMinSketch")
            .field("width", &self.width)
            .field("depth", &self.depth)
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

/// Width and depth of `CMS.INITBYPROB error probability` (§5.2), before the dimension checks:
/// `⌈2.0 / error⌉`, and `⌈log10f(p) / log10f(0.5)⌉` in binary32. A result that is infinite or
/// at least 2^63 is [`CmsCreateError::InvalidDimensions`].
///
/// ```
/// use sift::compat::redisbloom::cms_dims_for_error;
/// assert_eq!(cms_dims_for_error(0.07, 0.01), Ok((29, 7)));
/// assert_eq!(cms_dims_for_error(0.05, 0.249999999), Ok((40, 2))); // in f64 the depth would be 3
/// ```
pub fn cms_dims_for_error(error: f64, probability: f64) -> Result<(i64, i64), CmsCreateError> {
    if !(error > 0.0 && error < 1.0) {
        return Err(CmsCreateError::InvalidOverestimation);
    }
    if !(probability > 0.0 && probability < 1.0) {
        return Err(CmsCreateError::InvalidProbability);
    }
    let width = (2.0 / error).ceil();
    let quotient = log10_f32(probability as f32) / log10_f32(0.5);
    let depth = (quotient as f64).ceil();
    Ok((c_f64_to_i64(width)?, c_f64_to_i64(depth)?))
}

/// Single-precision base-10 logarithm, correctly rounded for every input that matters (§5.2
/// shows that any correctly rounded `log10f` gives RedisBloom's depths): the f64 logarithm is
/// accurate to well under a binary32 ulp, so rounding it to f32 is correct except within about
/// 2^-29 ulp of a rounding boundary.
fn log10_f32(x: f32) -> f32 {
    (x as f64).log10() as f32
}

/// A non-negative f64 dimension as RedisBloom keeps it; infinite or ≥ 2^63 is invalid. NaN
/// cannot occur (the inputs are range-checked).
fn c_f64_to_i64(v: f64) -> Result<i64, CmsCreateError> {
    if v.is_nan() || v >= 9_223_372_036_854_775_808.0 {
        return Err(CmsCreateError::InvalidDimensions);
    }
    // A negative zero (probability rounding to 1.0f) becomes 0 and fails the next check.
    Ok(v as i64)
}

impl CountMinSketch {
    /// `CMS.INITBYDIM key width depth` after the arguments were parsed as integers: the checks of
    /// §8 in RedisBloom's order, then the allocation. `max_bytes` caps the counters' memory
    /// (`4 · width · depth`); a larger sketch is [`CmsCreateError::InsufficientMemory`], refused
    /// before anything is allocated (pass `u64::MAX` for no cap beyond the allocator's).
    pub fn init_by_dim(width: i64, depth: i64, max_bytes: u64) -> Result<Self, CmsCreateError> {
        if width < 1 {
            return Err(CmsCreateError::InvalidWidth);
        }
        if depth < 1 {
            return Err(CmsCreateError::InvalidDepth);
        }
        Self::with_dims(width, depth, max_bytes)
    }

    /// `CMS.INITBYPROB key error probability` after the arguments were parsed as doubles (§5.2,
    /// §8). `max_bytes` as in [`CountMinSketch::init_by_dim`].
    pub fn init_by_prob(error: f64, probability: f64, max_bytes: u64) -> Result<Self, CmsCreateError> {
        let (w, d) = cms_dims_for_error(error, probability)?;
        Self::with_dims(w, d, max_bytes)
    }

    /// The dimension checks of §5.2 (steps 1–3) and the allocation.
    fn with_dims(w: i64, d: i64, max_bytes: u64) -> Result<Self, CmsCreateError> {
        if w < 1 || d < 1 || w > i64::MAX / d {
            return Err(CmsCreateError::InvalidDimensions);
        }
        let cells = w as u64 * d as u64;
        if cells > CMS_MAX_CELLS || cells * 4 > max_bytes {
            return Err(CmsCreateError::InsufficientMemory);
        }
        let len = usize::try_from(cells * 4).map_err(|_| CmsCreateError::InsufficientMemory)?;
        let bytes = Storage::zeroed(len).map_err(|_| CmsCreateError::InsufficientMemory)?;
        Ok(CountMinSketch { width: w as u64, depth: d as u64, count: 0, cells: bytes, load_missing: 0 })
    }

    /// Rebuilds a sketch from its RDB fields (§10.3). `cells` must be exactly `4 · width · depth`
    /// bytes; `None` otherwise (or for a zero dimension).
    pub(crate) fn from_parts(width: u64, depth: u64, count: u64, cells: Vec<u8>) -> Option<Self> {
        if width == 0 || depth == 0 {
            return None;
        }
        let len = width.checked_mul(depth)?.checked_mul(4)?;
        if cells.len() as u64 != len {
            return None;
        }
        Some(CountMinSketch { width, depth, count, cells: Storage::adopt(cells).ok()?, load_missing: 0 })
    }

    /// A sketch whose counters are all 0, to be filled by [`CountMinSketch::load_cells`]
    /// (`load_cms_header`'s, after its checks). `None` for a zero dimension, a product that
    /// overflows, or an allocation that fails.
    pub(crate) fn zeroed_for_load(width: u64, depth: u64, count: u64) -> Option<Self> {
        if width == 0 || depth == 0 {
            return None;
        }
        let len = usize::try_from(width.checked_mul(depth)?.checked_mul(4)?).ok()?;
        Some(CountMinSketch {
            width,
            depth,
            count,
            cells: Storage::zeroed(len).ok()?,
            load_missing: len as u64,
        })
    }

    /// Sets the counters' bytes `at..at + data.len()` (of [`CountMinSketch::cells_le`]) to
    /// `data`: the next piece of the chunked dump, after `load_cms_header`. Pieces come in
    /// order from the first byte; one that is not the next, or does not lie within the
    /// counters, is refused, and nothing changes.
    pub fn load_cells(&mut self, at: u64, data: &[u8]) -> Result<(), CmsCellsError> {
        let len = self.cells.len() as u64;
        let expected = len - self.load_missing;
        if at != expected || data.len() as u64 > self.load_missing {
            return Err(CmsCellsError { at, len: data.len() as u64, expected, cells: len });
        }
        self.load_missing -= data.len() as u64;
        let (at, end) = (at as usize, at as usize + data.len());
        // A snapshot may be reading the counters (a load into a live sketch): the pieces are
        // saved for it first, as every other write does.
        let guard = self.cells.cow_guard();
        let mut w = guard.as_ref().map(|g| g.writer());
        if let Some(w) = w.as_mut() {
            w.before_write(&self.cells, at..end);
        }
        self.cells[at..end].copy_from_slice(data);
        drop(w);
        Ok(())
    }

    /// Bytes of counters a chunked load has not filled yet: not 0 after the last piece means
    /// pieces were missing.
    pub fn load_missing(&self) -> u64 {
        self.load_missing
    }

    /// Counters per row.
    pub fn width(&self) -> u64 {
        self.width
    }
    /// Rows.
    pub fn depth(&self) -> u64 {
        self.depth
    }
    /// Sum of all increments, wrapping at 2^64.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// `count` as `CMS.INFO` prints it: a signed 64-bit integer, so 2^63 and above are negative.
    pub fn info_count(&self) -> i64 {
        self.count as i64
    }
    /// The counters as the RDB string stores them: `depth × width` u32, row-major,
    /// little-endian.
    pub fn cells_le(&self) -> &[u8] {
        &self.cells
    }
    /// Counter `(row, column)`.
    pub fn cell(&self, row: u64, column: u64) -> u32 {
        self.get(self.index(row, column))
    }

    /// Memory the type's callback reports to `MEMORY USAGE` (current RedisBloom, §5.7):
    /// `32 + 4 · width · depth`.
    pub fn memory_usage(&self) -> u64 {
        32 + self.cells.len() as u64
    }

    #[inline]
    fn index(&self, row: u64, column: u64) -> usize {
        (row * self.width + column) as usize
    }

    #[inline]
    fn get(&self, i: usize) -> u32 {
        u32::from_le_bytes(self.cells[4 * i..4 * i + 4].try_into().expect("4 bytes"))
    }

    /// Sets counter `i`; `w` is the lock of the snapshot reading the counters, if one is
    /// (every change goes through here: the counter's piece is saved for the snapshot first).
    #[inline]
    fn set(&mut self, w: Option<&mut CowWriter<'_>>, i: usize, v: u32) {
        if let Some(w) = w {
            w.before_write(&self.cells, 4 * i..4 * i + 4);
        }
        self.cells[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// The sketch's RDB fields (`save_cms`, §10.3) as they are now, to be written later while
    /// the counters keep changing: the counters are guarded, writers copying aside only the
    /// [`COW_PIECE`](crate::bits::COW_PIECE)-sized pieces they change before the snapshot has
    /// read them. `None` for a sketch small enough to copy.
    pub fn freeze(&self) -> Option<FrozenCms> {
        use super::rdb::{save_cms_header, write_length, ModuleFieldWriter, OPCODE_STRING};
        let cells = self.cells.freeze()?;
        let mut header = Vec::new();
        save_cms_header(self, &mut ModuleFieldWriter { out: &mut header });
        // `save_string` of a large string: its length, then its bytes (the integer forms are
        // for strings of at most a dozen bytes).
        let mut string_head = Vec::new();
        write_length(&mut string_head, OPCODE_STRING);
        write_length(&mut string_head, self.cells.len() as u64);
        Some(FrozenCms { header, string_head, cells })
    }

    /// Column of `item` in `row`: `MurmurHash2(item, row) mod width` (§5.3).
    #[inline]
    fn column(&self, item: &[u8], row: u64) -> u64 {
        murmur2_32(item, row as u32) as u64 % self.width
    }

    /// `CMS.INCRBY`'s step for one pair (§5.4): adds `value` to the item's counter in every row
    /// (each saturating at [`CMS_COUNTER_MAX`]), adds it to `count`, and returns the item's new
    /// estimate, the smallest of its counters. An estimate equal to [`CMS_COUNTER_MAX`] is
    /// answered with `CMS: INCRBY overflow` instead of the number.
    ///
    /// The command accepts increments in [0, 2^63 − 1]; larger values behave the same (the
    /// counters saturate).
    pub fn incr_by(&mut self, item: &[u8], value: u64) -> u32 {
        let guard = self.cells.cow_guard();
        let mut w = guard.as_ref().map(|g| g.writer());
        let mut min = u32::MAX;
        for row in 0..self.depth {
            let i = self.index(row, self.column(item, row));
            let c = self.get(i) as u64;
            let v = c.saturating_add(value).min(CMS_COUNTER_MAX as u64) as u32;
            self.set(w.as_mut(), i, v);
            min = min.min(v);
        }
        self.count = self.count.wrapping_add(value);
        min
    }

    /// `CMS.QUERY`'s answer for one item (§5.5): the smallest of its counters.
    pub fn query(&self, item: &[u8]) -> u32 {
        (0..self.depth).map(|row| self.get(self.index(row, self.column(item, row)))).min().unwrap_or(0)
    }

    /// `CMS.MERGE`'s effect (§5.6): replaces this sketch's counters and count by the weighted
    /// sums `Σ source · weight` over `sources` (a [`CmsSource::Destination`] entry stands for
    /// this sketch's contents before the merge). Every sum is checked first, in i64: if any
    /// product or partial sum overflows, a final cell sum is outside [0, 2^32 − 1], or the count
    /// sum is negative, nothing changes and the result is [`CmsMergeError::Overflow`].
    pub fn merge(&mut self, sources: &[(CmsSource<'_>, i64)]) -> Result<(), CmsMergeError> {
        if sources.is_empty() {
            return Err(CmsMergeError::NoSources);
        }
        for (index, (s, _)) in sources.iter().enumerate() {
            if let CmsSource::Sketch(s) = s {
                if s.width != self.width || s.depth != self.depth {
                    return Err(CmsMergeError::ShapeMismatch { index });
                }
            }
        }
        let cells = (self.width * self.depth) as usize;
        // Both checks before anything is written; the write pass recomputes the sums, so the
        // destination's old cells are still in place when they are read as a source.
        for p in 0..cells {
            self.cell_sum(sources, p).ok_or(CmsMergeError::Overflow)?;
        }
        let count = self.count_sum(sources).ok_or(CmsMergeError::Overflow)?;
        let guard = self.cells.cow_guard();
        let mut w = guard.as_ref().map(|g| g.writer());
        for p in 0..cells {
            let v = self.cell_sum(sources, p).expect("checked above");
            self.set(w.as_mut(), p, v);
        }
        self.count = count;
        Ok(())
    }

    fn cell_sum(&self, sources: &[(CmsSource<'_>, i64)], p: usize) -> Option<u32> {
        let mut acc = 0i64;
        for (s, w) in sources {
            let c = match s {
                CmsSource::Destination => self.get(p),
                CmsSource::Sketch(s) => s.get(p),
            };
            acc = acc.checked_add((c as i64).checked_mul(*w)?)?;
        }
        u32::try_from(acc).ok()
    }

    fn count_sum(&self, sources: &[(CmsSource<'_>, i64)]) -> Option<u64> {
        let mut acc = 0i64;
        for (s, w) in sources {
            let c = match s {
                CmsSource::Destination => self.count,
                CmsSource::Sketch(s) => s.count,
            };
            // The count is taken as an unsigned number: 2^63 and above never fit with a
            // positive weight.
            let product = i64::try_from(c as i128 * *w as i128).ok()?;
            acc = acc.checked_add(product)?;
        }
        (acc >= 0).then_some(acc as u64)
    }
}

/// A sketch as it was when [`CountMinSketch::freeze`] was called. Dropping it ends the
/// copy-on-write.
#[derive(Debug)]
pub struct FrozenCms {
    /// The fields before the counters: width, depth, count (`save_cms_header`).
    header: Vec<u8>,
    /// The cells string's opcode and length, between the header and the counters in the RDB
    /// fields.
    string_head: Vec<u8>,
    cells: CowHandle,
}

impl FrozenCms {
    /// Appends the RDB fields `save_cms` gave at the freeze. The counters are read once: call
    /// it once, and not with [`FrozenCms::read_cells`].
    pub fn write(&self, out: &mut Vec<u8>) {
        // Grown here, not while a piece is read under the guard's lock.
        out.reserve(self.header.len() + self.string_head.len() + self.cells.len());
        out.extend_from_slice(&self.header);
        out.extend_from_slice(&self.string_head);
        self.cells.read(0, self.cells.len(), out);
    }

    /// The fields `save_cms_header` gave at the freeze (width, depth, count).
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// Bytes of the counters.
    pub fn cells_len(&self) -> usize {
        self.cells.len()
    }

    /// Appends the counters' bytes `from..from + n` as they were at the freeze (clipped to
    /// [`FrozenCms::cells_len`]). Each byte is read once: read them front to back, in any
    /// pieces, and not with [`FrozenCms::write`].
    pub fn read_cells(&self, from: usize, n: usize, out: &mut Vec<u8>) {
        let n = n.min(self.cells.len().saturating_sub(from));
        // Grown here, not while a piece is read under the guard's lock.
        out.reserve(n);
        self.cells.read(from, n, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_vectors_of_the_spec() {
        let rows: [(&[u8], [u32; 4]); 7] = [
            (b"", [0, 0x5bd15e36, 0xb7a2bc6d, 0x4a8566e0]),
            (b"a", [0x92685f5e, 0x2550b18c, 0x2cf62649, 0xf23cf517]),
            (b"abc", [0x13577c9b, 0x60a4fcc1, 0xe70a2fe6, 0xd88274d7]),
            (b"abcd", [0x26873021, 0xc93f7a16, 0x0173798d, 0x81b55b43]),
            (b"item:0", [0xbacc7dca, 0x3b73d252, 0x84075a96, 0x57fdbc21]),
            (b"only", [0x3dc75c40, 0xc38df77a, 0x98881c70, 0x0504bc2b]),
            (b"hello world", [0x44a81419, 0x83ea5dee, 0xd94a2afb, 0xfba01f39]),
        ];
        for (item, want) in rows {
            for (seed, w) in [0u32, 1, 2, 1919].into_iter().zip(want) {
                assert_eq!(murmur2_32(item, seed), w, "{item:?} seed {seed}");
            }
        }
    }

    #[test]
    fn init_by_prob_dimensions_of_the_spec() {
        for (e, w) in
            [(0.05, 40), (0.001, 2000), (0.07, 29), (0.333, 7), (0.3, 7), (0.9999999, 3), (1e-5, 200000)]
        {
            assert_eq!(cms_dims_for_error(e, 0.5).unwrap().0, w, "error {e}");
        }
        for (p, d) in [(0.249999999, 2), (0.125, 3), (0.0009765625, 10), (0.01, 7), (0.0001, 14), (0.5, 1)] {
            assert_eq!(cms_dims_for_error(0.5, p).unwrap().1, d, "probability {p}");
        }
        for k in 1..=149 {
            let p = 0.5f64.powi(k);
            assert_eq!(cms_dims_for_error(0.5, p).unwrap().1, k as i64, "0.5^{k}");
        }
        // Probabilities that round to 0 in f32 give an infinite depth; to 1, depth 0.
        assert_eq!(cms_dims_for_error(0.5, 1e-46), Err(CmsCreateError::InvalidDimensions));
        assert_eq!(
            CountMinSketch::init_by_prob(0.5, 0.999999999, u64::MAX).unwrap_err(),
            CmsCreateError::InvalidDimensions
        );
        // Errors below ~2.2e-19 give a width of 2^63 or more.
        assert_eq!(cms_dims_for_error(1e-19, 0.5), Err(CmsCreateError::InvalidDimensions));
        assert_eq!(cms_dims_for_error(5e-19, 0.5).unwrap().0, (2.0f64 / 5e-19).ceil() as i64);
        for bad in [0.0, 1.0, -0.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(cms_dims_for_error(bad, 0.5), Err(CmsCreateError::InvalidOverestimation));
            assert_eq!(cms_dims_for_error(0.5, bad), Err(CmsCreateError::InvalidProbability));
        }
    }

    /// The depth computed with this crate's `log10f` equals the one computed with the platform's
    /// (glibc's, on Linux: RedisBloom's) for every f32 within ±3000 ulps of 0.5^k, where a 1-ulp
    /// difference could move the quotient across an integer (§5.2).
    #[test]
    fn depth_agrees_with_platform_log10f_near_powers_of_half() {
        for k in 1..=126 {
            let centre = 0.5f32.powi(k).to_bits();
            for d in -3000i32..=3000 {
                let p = f32::from_bits((centre as i32 + d) as u32);
                if !(p > 0.0 && p < 1.0) {
                    continue;
                }
                let platform = ((p.log10() / 0.5f32.log10()) as f64).ceil() as i64;
                assert_eq!(cms_dims_for_error(0.5, p as f64).unwrap().1, platform, "{p:e}");
            }
        }
    }

    #[test]
    fn dimension_checks_in_order() {
        let m = u64::MAX;
        assert_eq!(CountMinSketch::init_by_dim(0, 5, m).unwrap_err(), CmsCreateError::InvalidWidth);
        assert_eq!(CountMinSketch::init_by_dim(-1, 0, m).unwrap_err(), CmsCreateError::InvalidWidth);
        assert_eq!(CountMinSketch::init_by_dim(5, 0, m).unwrap_err(), CmsCreateError::InvalidDepth);
        assert_eq!(
            CountMinSketch::init_by_dim(i64::MAX / 2 + 1, 2, m).unwrap_err(),
            CmsCreateError::InvalidDimensions
        );
        assert_eq!(
            CountMinSketch::init_by_dim(i64::MAX / 2, 2, m).unwrap_err(),
            CmsCreateError::InsufficientMemory
        );
        assert_eq!(
            CountMinSketch::init_by_dim(1 << 31, 1 << 31, m).unwrap_err(),
            CmsCreateError::InsufficientMemory
        );
        // The budget is checked before allocating.
        assert_eq!(
            CountMinSketch::init_by_dim(100, 10, 3999).unwrap_err(),
            CmsCreateError::InsufficientMemory
        );
        let c = CountMinSketch::init_by_dim(100, 10, 4000).unwrap();
        assert_eq!((c.width(), c.depth(), c.count(), c.memory_usage()), (100, 10, 0, 4032));
    }

    #[test]
    fn increments_saturate_and_count_wraps() {
        let mut c = CountMinSketch::init_by_dim(3, 2, u64::MAX).unwrap();
        assert_eq!(c.incr_by(b"x", 1), 1);
        assert_eq!(c.incr_by(b"x", 2), 3);
        assert_eq!(c.incr_by(b"x", 3), 6);
        assert_eq!(c.incr_by(b"x", u32::MAX as u64 - 7), u32::MAX - 1);
        assert_eq!(c.incr_by(b"x", 1), CMS_COUNTER_MAX);
        assert_eq!(c.incr_by(b"x", 0), CMS_COUNTER_MAX);
        assert_eq!(c.query(b"x"), CMS_COUNTER_MAX);
        let mut d = CountMinSketch::init_by_dim(3, 2, u64::MAX).unwrap();
        assert_eq!(d.incr_by(b"y", 1 << 32), CMS_COUNTER_MAX);
        assert_eq!(d.incr_by(b"y", i64::MAX as u64), CMS_COUNTER_MAX);
        assert_eq!(d.incr_by(b"y", 2), CMS_COUNTER_MAX);
        assert_eq!(d.count(), (1u64 << 32).wrapping_add(i64::MAX as u64).wrapping_add(2));
        assert!(d.info_count() < 0);
    }

    #[test]
    fn merge_checks_then_replaces() {
        let mut a = CountMinSketch::init_by_dim(4, 2, u64::MAX).unwrap();
        let mut b = a.clone();
        a.incr_by(b"p", 5);
        b.incr_by(b"p", 7);
        let mut dst = a.clone();
        dst.merge(&[(CmsSource::Destination, 2), (CmsSource::Sketch(&b), -1)]).unwrap();
        assert_eq!((dst.count(), dst.query(b"p")), (3, 3));
        b.incr_by(b"q", 1);
        // A negative final cell fails and changes nothing.
        let before = dst.clone();
        assert_eq!(dst.merge(&[(CmsSource::Sketch(&b), -1)]), Err(CmsMergeError::Overflow));
        assert_eq!(dst, before);
        // A count of 2^63 or more fails with any positive weight.
        let mut big = a.clone();
        big.count = 1 << 63;
        assert_eq!(dst.merge(&[(CmsSource::Sketch(&big), 1)]), Err(CmsMergeError::Overflow));
        assert_eq!(dst.merge(&[(CmsSource::Sketch(&big), 0)]), Ok(()));
        assert_eq!((dst.count(), dst.query(b"p")), (0, 0));
        // Intermediate sums may be negative; products may not overflow.
        dst.merge(&[(CmsSource::Sketch(&a), -3), (CmsSource::Sketch(&a), 4)]).unwrap();
        assert_eq!(dst.query(b"p"), 5);
        assert_eq!(dst.merge(&[(CmsSource::Sketch(&a), i64::MAX)]), Err(CmsMergeError::Overflow));
        let other = CountMinSketch::init_by_dim(5, 2, u64::MAX).unwrap();
        assert_eq!(
            dst.merge(&[(CmsSource::Sketch(&a), 1), (CmsSource::Sketch(&other), 1)]),
            Err(CmsMergeError::ShapeMismatch { index: 1 })
        );
        assert_eq!(dst.merge(&[]), Err(CmsMergeError::NoSources));
    }

    /// The RDB fields `save_cms` writes for `c` now.
    fn fields(c: &CountMinSketch) -> Vec<u8> {
        let mut out = Vec::new();
        crate::compat::redisbloom::rdb::save_cms(
            c,
            &mut crate::compat::redisbloom::rdb::ModuleFieldWriter { out: &mut out },
        );
        out
    }

    fn frozen_fields(f: &FrozenCms) -> Vec<u8> {
        let mut out = Vec::new();
        f.write(&mut out);
        out
    }

    /// A sketch of 2 rows of 1 Mi counters (8 MiB: huge storage, 32 copy-on-write pieces) with
    /// some counts.
    fn big_sketch() -> CountMinSketch {
        let mut c = CountMinSketch::init_by_dim(1 << 20, 2, u64::MAX).unwrap();
        for i in 0..2000u32 {
            c.incr_by(&i.to_le_bytes(), u64::from(i % 7) + 1);
        }
        c
    }

    /// Each kind of write, alone while the sketch is frozen, changes the live sketch and leaves
    /// the frozen fields as they were, whether the sketch is dropped before they are read or
    /// not: an increment, a merge into the sketch. One write at a time, so that a write skipping
    /// its guard fails this test.
    #[test]
    fn every_write_alone_keeps_the_frozen_fields() {
        assert!(CountMinSketch::init_by_dim(100, 5, u64::MAX).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let other = {
            let mut o = CountMinSketch::init_by_dim(1 << 20, 2, u64::MAX).unwrap();
            o.incr_by(b"o", 3);
            o
        };
        let ops: Vec<crate::format::NamedWrite<'_, CountMinSketch>> = vec![
            ("incr_by", Box::new(|c: &mut CountMinSketch| assert_eq!(c.incr_by(b"new item", 9), 9))),
            (
                "merge",
                Box::new(|c: &mut CountMinSketch| {
                    c.merge(&[(CmsSource::Destination, 2), (CmsSource::Sketch(&other), 1)]).unwrap()
                }),
            ),
        ];
        crate::format::assert_each_write_keeps(
            &big_sketch,
            &fields,
            &CountMinSketch::freeze,
            &frozen_fields,
            &ops,
        );
    }

    /// An increment copies aside only the pieces of the counters it changes: one per row.
    #[test]
    fn an_increment_copies_only_the_pieces_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        use crate::bits::COW_PIECE;
        let mut c = big_sketch();
        let at_freeze = c.cells_le().to_vec();
        let frozen = c.freeze().unwrap();
        assert_eq!(frozen.cells.len() / COW_PIECE, 32);
        let changed = |c: &CountMinSketch| {
            let live = c.cells_le();
            crate::bits::pieces_differing(live, &at_freeze).len()
        };
        for i in 0..10u32 {
            let saved = frozen.cells.saved_pieces();
            c.incr_by(format!("x{i}").as_bytes(), 1);
            assert!(frozen.cells.saved_pieces() <= saved + 2, "two counters, two pieces at most");
            assert_eq!(frozen.cells.saved_pieces(), changed(&c), "after increment {i}");
        }
        assert!(frozen.cells.saved_pieces() >= 5);
    }
}
