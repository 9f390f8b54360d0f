//! Probe kernels of the age-partitioned row layout ([`crate::AgingBloom`],
//! [`crate::TimeLimitedBloom`]).
//!
//! # The row layout (what the bits mean, on disk too)
//!
//! A filter is `rows` rows of 16 or 32 little-endian 32-bit words, one or two whole 64-byte
//! cache lines. Word 0 of a row is its *stamp*: the filter's generation count (its *epoch*) when
//! the row was last written. Words `1 ..` hold the slices, word `p + 1` for slice `p` (the
//! slice's *physical* index, which never changes while the slices take turns being the
//! youngest). A slice that became the youngest after the row's stamp holds stale bits in that
//! row: it counts as empty, and the next write of the row clears it. That is how a new
//! generation empties its slice: the epoch moves by one and nothing else is written, instead of
//! a pass over every row (which cost an extra cache line per insertion on average at 1%).
//!
//! An item with digest `(h1, h2)` lives in row `fastrange(h1, rows)`. In the word of slice `p`
//! its *base* position is `b_p = (y·M_p mod 2^32) >> 27`, a multiply-shift hash (Dietzfelbinger
//! et al. 1997) of the item's `y = h2 >> 32` with a fixed odd constant per slice
//! ([`MULTIPLIERS`]), and an item written into the `k` youngest slices sets, in the slice of age
//! `j` (`j = 0` the youngest), bit `(b_p - j) mod 32`: the bit depends on where the slice stands
//! in the item's run of `k` slices (its *offset*). Positions follow the physical index, so an
//! item's bits stay put as the ring turns; offsets stay too, since an item's `k` slices age
//! together.
//!
//! A query looks for an *alignment* `a` (the age of the youngest slice of a run) at which all
//! `k` slices `a .. a+k` hold the item's bit for their offset. Offsets make a run count only at
//! the alignment it was written at: the bits an item left in its younger slices after its
//! oldest one was retired never combine with other slices into a new run, so an item that left
//! the window answers like an item never seen (the paper's plain runs let such an item fade
//! out over `k` more generations instead).
//!
//! The kernel computes all alignments at once, in a 32-bit mask whose bit `k-1+a` stands for
//! alignment `a`. The word of the slice of age `s` (zero if stale) is rotated left by
//! `s + k - 1 - b_p`, which
//! takes the item's offset-`j` bit `b_p - j` to bit `s + k - 1 - j = k - 1 + a` for `a = s - j`;
//! the bits outside the slice's `k` alignments `[s, s+k)` are then filled with ones, and every
//! slice is ANDed in: bit `k-1+a` of the result is set iff every slice of alignment `a` holds its
//! bit. With AVX2 eight words go per step (one `vpmulld` for their positions, a compare for the
//! stale ones, two variable shifts for the rotation): about 16 instructions per 8 words, no
//! loop-carried dependency but the AND, no branch on the data.
//!
//! Why 32-bit words: against 64-bit ones the rows are half as long for the same number of slices
//! and a step covers twice as many slices; the price is a stronger correlation between the
//! slices of a row (two items of a generation meet in a 32-bit word more often), which the
//! sizing pays with about 6% more memory, and the stamp takes another 3% (25.3 bits per window
//! item at 1%, against 23.1 with 64-bit words and no stamp).
//! Why multiply-shift rather than the double hashing `h2 + p·h3` of the other Bloom filters:
//! the top bits of an arithmetic progression collide together in neighbouring slices whenever
//! two items' steps are close, which correlates the slices of a run; at `k = 8` the filter then
//! measured 1.37× the rate of the layout's formula.

use crate::hash::fastrange;

use super::{Block, Kernel};

/// Words in a row of the widest layout (two cache lines of 32-bit words: the stamp and 31
/// slices).
pub(crate) const MAX_WORDS: usize = 32;

/// Bits per slice word.
pub(crate) const WORD_BITS: u32 = 32;

/// The odd multipliers of the slices' base positions, by word: word `p + 1` (slice `p`) has
/// `M_p`, the low 32 bits of the SplitMix64 output for `z = (p + 1)·0x9e3779b97f4a7c15` with the
/// lowest bit set; word 0 (the stamp) has none (0). Part of the file format: never change them.
pub(crate) static MULTIPLIERS: [u32; MAX_WORDS] = {
    let mut t = [0u32; MAX_WORDS];
    let mut p = 0;
    while p + 1 < MAX_WORDS {
        let mut z = (p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        t[p + 1] = (z as u32) | 1;
        p += 1;
    }
    t
};

/// The 32-bit words of a slice of blocks, in order (sixteen per block).
#[inline(always)]
pub(crate) fn words(blocks: &[Block]) -> &[u32] {
    // SAFETY: `Block` is `#[repr(C, align(64))]` around `[u64; 8]`, 64 bytes with no padding,
    // so `n` blocks are exactly `16n` consecutive, initialised, suitably aligned `u32`s (each
    // `u64` is two of them, in memory order), borrowed for as long as the blocks are.
    unsafe { core::slice::from_raw_parts(blocks.as_ptr() as *const u32, blocks.len() * 16) }
}

/// The 32-bit words of a slice of blocks, mutably.
#[inline(always)]
pub(crate) fn words_mut(blocks: &mut [Block]) -> &mut [u32] {
    // SAFETY: as in `words`; the exclusive borrow of the blocks makes the words unaliased, and
    // every bit pattern is a valid `u32` (and a valid block) whatever is written.
    unsafe { core::slice::from_raw_parts_mut(blocks.as_mut_ptr() as *mut u32, blocks.len() * 16) }
}

/// The 32 bits of an item's second hash word its positions are computed from.
#[inline(always)]
pub(crate) fn key(h2: u64) -> u32 {
    (h2 >> 32) as u32
}

/// The base position of an item with key `y` in word `w` (slice `w - 1`).
#[inline(always)]
pub(crate) fn base(y: u32, w: usize) -> u32 {
    y.wrapping_mul(MULTIPLIERS[w]) >> 27
}

/// How many of a row's youngest slices are stale, from the filter's epoch and the row's stamp:
/// the generations started since the row was written, at most 32 (then every slice is).
#[inline(always)]
pub(crate) fn stale(epoch: u32, stamp: u32) -> u32 {
    epoch.wrapping_sub(stamp).min(32)
}

/// The row an item with first hash word `h1` lives in.
#[inline(always)]
pub(crate) fn row_index(h1: u64, rows: u64) -> u64 {
    fastrange(h1, rows)
}

/// The item's bit in word `w` when that word's slice is at offset `j` of its run.
#[cfg(test)]
pub(crate) fn position(y: u32, w: usize, j: usize) -> u32 {
    base(y, w).wrapping_sub(j as u32) % WORD_BITS
}

/// The low `n` bits set (`n ≤ 32`).
#[inline(always)]
pub(crate) fn low_bits(n: usize) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// The age of a word that is no slice's (the stamp, and the words past a row of 16): never
/// stale, never written.
pub(crate) const NO_AGE: u8 = u8::MAX;

/// The per-word tables of a ring state (word 0 is the stamp, word `p + 1` slice `p`): the left
/// rotation that brings a slice's offset bits to their alignments' bits, `age + k - 1` (before
/// subtracting the item's base position), the ones that fill the bits outside its `k`
/// alignments, and its age (one byte: insertions write to the words of age below `k`, which the
/// insertion kernels compute). The query kernel loads the first two as they are: computing them
/// from the ages measured 25-30% slower queries (`benches/probes/aging_speed.rs`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Ages {
    /// `age + k - 1` of each slice's word.
    pub(crate) turn: [u32; MAX_WORDS],
    /// `!(low_k << age)` of each slice's word (32 bits); all ones for the stamp.
    pub(crate) fill: [u32; MAX_WORDS],
    /// The age of each slice's word (its offset in the runs written now, for the `k` youngest);
    /// [`NO_AGE`] for the stamp and past the row, so that it is never stale nor written.
    pub(crate) age: [u8; MAX_WORDS],
    /// Bit `i` set when the 8-word group `8i .. 8i+8` holds a word of the `k` youngest slices:
    /// the groups [`push`] writes when no older slice is stale.
    pub(crate) groups: u32,
    /// `k`, the slices insertions write to.
    pub(crate) k: u32,
    /// Word offsets of two groups that together hold every word of the `k` youngest slices,
    /// when two suffice: the groups of `groups`, or, when one holds them all, that group and the
    /// other group of its cache line (where [`push`] then changes nothing), so that a push
    /// reads and writes exactly two groups without a loop and no other cache line.
    pub(crate) pair: Option<[u32; 2]>,
}

impl Ages {
    /// The tables for `slices` slices whose youngest is physical `head`, `k` per run.
    pub(crate) fn new(slices: usize, head: usize, k: usize) -> Ages {
        let low_k = low_bits(k) as u64;
        let mut t = Ages {
            turn: [0; MAX_WORDS],
            fill: [u32::MAX; MAX_WORDS],
            age: [NO_AGE; MAX_WORDS],
            groups: 0,
            k: k as u32,
            pair: None,
        };
        for p in 0..slices {
            let age = (p + slices - head) % slices;
            t.turn[p + 1] = (age + k - 1) as u32;
            t.fill[p + 1] = !((low_k << age) as u32);
            t.age[p + 1] = age as u8;
            if age < k {
                t.groups |= 1 << ((p + 1) / 8);
            }
        }
        let first = t.groups.trailing_zeros();
        t.pair = match t.groups.count_ones() {
            // Groups 2i and 2i + 1 share a cache line; both exist in rows of 16 and 32 words.
            1 => Some([first * 8, (first ^ 1) * 8]),
            2 => Some([first * 8, (31 - t.groups.leading_zeros()) * 8]),
            _ => None,
        };
        t
    }

    /// The age of word `w`'s slice ([`NO_AGE`] for the stamp).
    #[inline(always)]
    pub(crate) fn age(&self, w: usize) -> u32 {
        self.age[w] as u32
    }

    /// All ones for the words of the `k` youngest slices (those insertions write to), else 0.
    #[inline(always)]
    fn active(&self, w: usize) -> u32 {
        if self.age(w) < self.k {
            u32::MAX
        } else {
            0
        }
    }
}

/// The ages of words `p .. p + 8` ([`Ages::age`]), one per lane.
///
/// # Safety
/// The CPU must support AVX2, and `p + 8 ≤ 32`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn ages_avx2(ages: &Ages, p: usize) -> core::arch::x86_64::__m256i {
    use core::arch::x86_64::*;
    // SAFETY: `p + 8 ≤ 32` (this function's contract), the length of the table: the 8 bytes
    // read are in bounds; the load accepts any address.
    unsafe { _mm256_cvtepu8_epi32(_mm_loadl_epi64(ages.age.as_ptr().add(p) as *const __m128i)) }
}

/// Bit `k-1+a` of the result (for `a + k ≤` the slices): whether every slice of age `a .. a+k`
/// holds the item's bit for its offset in the run (see the module documentation), the `stale`
/// youngest slices counting as empty. Bits below `k-1` are meaningless. `row.len()` is 16 or
/// 32.
///
/// The fast kernels read the stale words as they are and clear the alignments that include a
/// stale slice afterwards ([`stale_alignments`]): an empty slice fails exactly the alignments
/// that contain it, and the stale slices are the youngest, so those are the alignments below
/// `stale`. That saves zeroing the words (a compare and an AND per step) on the query path.
#[inline(always)]
pub(crate) fn alignments(kernel: Kernel, row: &[u32], y: u32, ages: &Ages, stale: u32) -> u32 {
    debug_assert!(row.len() == 16 || row.len() == 32);
    match kernel.0 {
        #[cfg(target_arch = "x86_64")]
        super::Impl::Avx2 => {
            // SAFETY: `Impl::Avx2` exists only when `Kernel::detect` found AVX2 on this CPU.
            unsafe { alignments_avx2_any(row, y, ages) & !stale_alignments(stale, ages.k) }
        }
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        super::Impl::Avx512 => {
            // SAFETY: every CPU with AVX-512F (which `Kernel::detect` checked) has AVX2.
            unsafe { alignments_avx2_any(row, y, ages) & !stale_alignments(stale, ages.k) }
        }
        _ => alignments_scalar(row, y, ages, stale),
    }
}

/// The bits of [`alignments`]' result for the alignments that include one of the `stale`
/// youngest slices: alignments `0 .. stale`, bits `k-1 .. k-1+stale` (those past bit 31 do
/// not exist). Only the x86-64 kernels leave stale slices to this mask.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn stale_alignments(stale: u32, k: u32) -> u32 {
    ((low_bits(stale as usize) as u64) << (k.max(1) - 1)) as u32
}

/// [`alignments`] without special instructions (the reference the tests compare the others
/// with).
#[inline(always)]
pub(crate) fn alignments_scalar(row: &[u32], y: u32, ages: &Ages, stale: u32) -> u32 {
    let mut all = u32::MAX;
    for (w, &word) in row.iter().enumerate().skip(1) {
        let word = if ages.age(w) < stale { 0 } else { word };
        all &= word.rotate_left(ages.turn[w].wrapping_sub(base(y, w)) % WORD_BITS) | ages.fill[w];
    }
    all
}

/// [`alignments_avx2`] for a row of either width (16 or 32 words).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn alignments_avx2_any(row: &[u32], y: u32, ages: &Ages) -> u32 {
    if row.len() == MAX_WORDS {
        // SAFETY: AVX2 (this function's contract); the row has 32 words.
        unsafe { alignments_avx2::<MAX_WORDS>(row, y, ages) }
    } else {
        assert!(row.len() >= 16, "a row has 16 or 32 words");
        // SAFETY: AVX2 (this function's contract); the row has at least 16 words.
        unsafe { alignments_avx2::<16>(row, y, ages) }
    }
}

/// Rotates each lane of `w` left by `r` (`r = d mod 32`, `d` the rotation as computed): two
/// variable shifts whose counts are both below 32, so neither needs a fix-up for a count of 32
/// (`x >> 0 | x << 0 = x` for `r = 0`).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn rotate_left_avx2(
    w: core::arch::x86_64::__m256i,
    d: core::arch::x86_64::__m256i,
) -> core::arch::x86_64::__m256i {
    use core::arch::x86_64::*;
    let c31 = _mm256_set1_epi32(31);
    let left = _mm256_and_si256(d, c31);
    let right = _mm256_and_si256(_mm256_sub_epi32(_mm256_setzero_si256(), d), c31);
    _mm256_or_si256(_mm256_sllv_epi32(w, left), _mm256_srlv_epi32(w, right))
}

/// [`alignments`] with AVX2 for a row of `WORDS` words (16 or 32), eight per step, unrolled;
/// stale slices are not cleared (the caller masks [`stale_alignments`]).
///
/// # Safety
/// The CPU must support AVX2, and `row.len()` must be at least `WORDS`, a multiple of 8 up to
/// 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn alignments_avx2<const WORDS: usize>(row: &[u32], y: u32, ages: &Ages) -> u32 {
    use core::arch::x86_64::*;
    const { assert!(WORDS % 8 == 0 && WORDS <= MAX_WORDS) };
    let yv = _mm256_set1_epi32(y as i32);
    let mut all = _mm256_set1_epi32(-1);
    let mut p = 0;
    while p < WORDS {
        // SAFETY: `p + 8 ≤ WORDS ≤ row.len()` and `WORDS ≤ 32`, the length of `MULTIPLIERS` and
        // of every table of `ages`: the 32 bytes read from each are in bounds; unaligned loads
        // accept any address and any bits are a valid `__m256i`.
        let (m, w, turn, fill) = unsafe {
            (
                _mm256_loadu_si256(MULTIPLIERS.as_ptr().add(p) as *const __m256i),
                _mm256_loadu_si256(row.as_ptr().add(p) as *const __m256i),
                _mm256_loadu_si256(ages.turn.as_ptr().add(p) as *const __m256i),
                _mm256_loadu_si256(ages.fill.as_ptr().add(p) as *const __m256i),
            )
        };
        let base = _mm256_srli_epi32(_mm256_mullo_epi32(yv, m), 27);
        // SAFETY: AVX2 is available (this function's contract).
        let rot = unsafe { rotate_left_avx2(w, _mm256_sub_epi32(turn, base)) };
        all = _mm256_and_si256(all, _mm256_or_si256(rot, fill));
        p += 8;
    }
    // SAFETY: AVX2 is available (this function's contract).
    unsafe { and_lanes(all) }
}

/// The AND of the eight 32-bit lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn and_lanes(v: core::arch::x86_64::__m256i) -> u32 {
    use core::arch::x86_64::*;
    let half = _mm_and_si128(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let quarter = _mm_and_si128(half, _mm_shuffle_epi32(half, 0b01_00_11_10));
    let last = _mm_and_si128(quarter, _mm_shuffle_epi32(quarter, 0b10_11_00_01));
    _mm_cvtsi128_si32(last) as u32
}

/// An insertion in one pass over the row: returns [`alignments`] of the row as it was (stale
/// slices empty), and whether the item's bits in the `k` youngest slices were not all set
/// already; then clears the stale slices' words, sets the item's bits and stamps the row with
/// `epoch`. Same row as `alignments` followed by clearing, `set` and the stamp.
#[inline(always)]
pub(crate) fn insert(
    kernel: Kernel,
    row: &mut [u32],
    y: u32,
    ages: &Ages,
    stale: u32,
    epoch: u32,
) -> (u32, bool) {
    debug_assert!(row.len() == 16 || row.len() == 32);
    let out = match kernel.0 {
        #[cfg(target_arch = "x86_64")]
        super::Impl::Avx2 => {
            // SAFETY: `Impl::Avx2` exists only when `Kernel::detect` found AVX2 on this CPU.
            unsafe { insert_avx2_any(row, y, ages, stale) }
        }
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        super::Impl::Avx512 => {
            // SAFETY: every CPU with AVX-512F (which `Kernel::detect` checked) has AVX2.
            unsafe { insert_avx2_any(row, y, ages, stale) }
        }
        _ => insert_scalar(row, y, ages, stale),
    };
    row[0] = epoch;
    out
}

/// [`insert`] without special instructions (the stamp is written by the caller).
#[inline(always)]
pub(crate) fn insert_scalar(row: &mut [u32], y: u32, ages: &Ages, stale: u32) -> (u32, bool) {
    let mut all = u32::MAX;
    let mut new = 0u32;
    for (w, word) in row.iter_mut().enumerate().skip(1) {
        let old = if ages.age(w) < stale { 0 } else { *word };
        let b = base(y, w);
        all &= old.rotate_left(ages.turn[w].wrapping_sub(b) % WORD_BITS) | ages.fill[w];
        let bit = (1u32 << (b.wrapping_sub(ages.age(w)) % WORD_BITS)) & ages.active(w);
        new |= bit & !old;
        *word = old | bit;
    }
    (all, new != 0)
}

/// [`insert_avx2`] for a row of either width (16 or 32 words).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn insert_avx2_any(row: &mut [u32], y: u32, ages: &Ages, stale: u32) -> (u32, bool) {
    if row.len() == MAX_WORDS {
        // SAFETY: AVX2 (this function's contract); the row has 32 words.
        unsafe { insert_avx2::<MAX_WORDS>(row, y, ages, stale) }
    } else {
        assert!(row.len() >= 16, "a row has 16 or 32 words");
        // SAFETY: AVX2 (this function's contract); the row has at least 16 words.
        unsafe { insert_avx2::<16>(row, y, ages, stale) }
    }
}

/// [`insert`] with AVX2 for a row of `WORDS` words (16 or 32): eight words per step,
/// unrolled, one store per step (the stamp's lane is rewritten by the caller).
///
/// # Safety
/// The CPU must support AVX2, and `row.len()` must be at least `WORDS`, a multiple of 8 up to
/// 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn insert_avx2<const WORDS: usize>(row: &mut [u32], y: u32, ages: &Ages, stale: u32) -> (u32, bool) {
    use core::arch::x86_64::*;
    const { assert!(WORDS % 8 == 0 && WORDS <= MAX_WORDS) };
    let yv = _mm256_set1_epi32(y as i32);
    let sv = _mm256_set1_epi32(stale as i32);
    let c31 = _mm256_set1_epi32(31);
    let one = _mm256_set1_epi32(1);
    let kv = _mm256_set1_epi32(ages.k as i32);
    let mut all = _mm256_set1_epi32(-1);
    let mut new = _mm256_setzero_si256();
    let mut p = 0;
    while p < WORDS {
        // SAFETY: `p + 8 ≤ WORDS ≤ row.len()` and `WORDS ≤ 32`, the length of every table read:
        // the 32 bytes read from each (and written to `row`) are in bounds; unaligned accesses
        // accept any address, any bits are a valid `__m256i`, and `row` is borrowed exclusively.
        unsafe {
            let m = _mm256_loadu_si256(MULTIPLIERS.as_ptr().add(p) as *const __m256i);
            let at = row.as_mut_ptr().add(p) as *mut __m256i;
            let turn = _mm256_loadu_si256(ages.turn.as_ptr().add(p) as *const __m256i);
            let fill = _mm256_loadu_si256(ages.fill.as_ptr().add(p) as *const __m256i);
            let age = ages_avx2(ages, p);
            // Ages are at most 255 and k at most 24: the signed compare is exact.
            let active = _mm256_cmpgt_epi32(kv, age);
            let w = _mm256_andnot_si256(_mm256_cmpgt_epi32(sv, age), _mm256_loadu_si256(at));
            let base = _mm256_srli_epi32(_mm256_mullo_epi32(yv, m), 27);
            let rot = rotate_left_avx2(w, _mm256_sub_epi32(turn, base));
            all = _mm256_and_si256(all, _mm256_or_si256(rot, fill));
            let pos = _mm256_and_si256(_mm256_sub_epi32(base, age), c31);
            let bit = _mm256_and_si256(_mm256_sllv_epi32(one, pos), active);
            new = _mm256_or_si256(new, _mm256_andnot_si256(w, bit));
            _mm256_storeu_si256(at, _mm256_or_si256(w, bit));
        }
        p += 8;
    }
    // SAFETY: AVX2 is available (this function's contract).
    (unsafe { and_lanes(all) }, _mm256_testz_si256(new, new) == 0)
}

/// An insertion that does not ask whether the item was present: clears the stale slices'
/// words, sets the item's bits in the `k` youngest slices and stamps the row with `epoch`;
/// returns whether any of those bits was clear. The row ends exactly as after [`insert`], but
/// only the 8-word groups that hold a word of the `k` youngest slices are read and written
/// (every group when more than `k` slices are stale, which needs a row left unwritten for `k`
/// generations): at `k = 8` two groups of a 32-word row instead of four, no rotation of the
/// older slices' words, and the other cache line of the row untouched whenever neither the
/// stamp nor the youngest slices are in it.
#[inline(always)]
pub(crate) fn push(kernel: Kernel, row: &mut [u32], y: u32, ages: &Ages, stale: u32, epoch: u32) -> bool {
    debug_assert!(row.len() == 16 || row.len() == 32);
    let new = match kernel.0 {
        #[cfg(target_arch = "x86_64")]
        super::Impl::Avx2 => {
            // SAFETY: `Impl::Avx2` exists only when `Kernel::detect` found AVX2 on this CPU.
            unsafe { push_avx2_any(row, y, ages, stale) }
        }
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        super::Impl::Avx512 => {
            // SAFETY: every CPU with AVX-512F (which `Kernel::detect` checked) has AVX2.
            unsafe { push_avx2_any(row, y, ages, stale) }
        }
        _ => push_scalar(row, y, ages, stale, push_groups(ages, stale, row.len())),
    };
    row[0] = epoch;
    new
}

/// The 8-word groups [`push`] must visit: those of the `k` youngest slices, which hold every
/// stale word too when `stale ≤ k` (stale words are those of age below `stale`); every group
/// past that. Never a group past a row of `len` words, whatever the tables say (the kernels
/// rely on it).
#[inline(always)]
fn push_groups(ages: &Ages, stale: u32, len: usize) -> u32 {
    let groups = if stale > ages.k { u32::MAX } else { ages.groups };
    groups
        & match len {
            32.. => 0b1111,
            16.. => 0b0011,
            _ => 0,
        }
}

/// [`push`] without special instructions, over the words of `groups` (the stamp is written by
/// the caller).
#[inline(always)]
pub(crate) fn push_scalar(row: &mut [u32], y: u32, ages: &Ages, stale: u32, groups: u32) -> bool {
    let mut new = 0u32;
    for (w, word) in row.iter_mut().enumerate() {
        if groups & (1 << (w / 8)) == 0 {
            continue;
        }
        let old = if ages.age(w) < stale { 0 } else { *word };
        let bit = (1u32 << (base(y, w).wrapping_sub(ages.age(w)) % WORD_BITS)) & ages.active(w);
        new |= bit & !old;
        *word = old | bit;
    }
    new != 0
}

/// [`push_avx2`] for a row of either width (16 or 32 words).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn push_avx2_any(row: &mut [u32], y: u32, ages: &Ages, stale: u32) -> bool {
    if row.len() == MAX_WORDS {
        // SAFETY: AVX2 (this function's contract); the row has 32 words.
        unsafe { push_avx2::<MAX_WORDS>(row, y, ages, stale) }
    } else {
        assert!(row.len() >= 16, "a row has 16 or 32 words");
        // SAFETY: AVX2 (this function's contract); the row has at least 16 words.
        unsafe { push_avx2::<16>(row, y, ages, stale) }
    }
}

/// [`push`] with AVX2 for a row of `WORDS` words (16 or 32): when the `k` youngest slices lie in
/// two groups ([`Ages::pair`]) and no older slice is stale, exactly those two groups, without a
/// loop; otherwise every group [`push_groups`] names.
///
/// # Safety
/// The CPU must support AVX2, and `row.len()` must be at least `WORDS`, a multiple of 8 up to
/// 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn push_avx2<const WORDS: usize>(row: &mut [u32], y: u32, ages: &Ages, stale: u32) -> bool {
    use core::arch::x86_64::*;
    const { assert!(WORDS % 8 == 0 && WORDS >= 16 && WORDS <= MAX_WORDS) };
    let yv = _mm256_set1_epi32(y as i32);
    let sv = _mm256_set1_epi32(stale as i32);
    let new = if ages.pair.is_some() && stale <= ages.k {
        let [a, b] = ages.pair.unwrap_or_default();
        // Word offsets of groups inside the row whatever the tables say: multiples of 8 below
        // `WORDS` (a power of two).
        let (a, b) = (a as usize & (WORDS - 8), b as usize & (WORDS - 8));
        // SAFETY: AVX2 (this function's contract); `a + 8 ≤ WORDS ≤ row.len()`, likewise `b`.
        unsafe {
            _mm256_or_si256(push_group_avx2(row, a, yv, sv, ages), push_group_avx2(row, b, yv, sv, ages))
        }
    } else {
        let mut groups = push_groups(ages, stale, WORDS);
        let mut new = _mm256_setzero_si256();
        while groups != 0 {
            let p = groups.trailing_zeros() as usize * 8;
            groups &= groups - 1;
            // SAFETY: AVX2 (this function's contract); `push_groups` names only groups inside
            // `WORDS ≤ row.len()` words: `p + 8 ≤ row.len()`.
            new = _mm256_or_si256(new, unsafe { push_group_avx2(row, p, yv, sv, ages) });
        }
        new
    };
    _mm256_testz_si256(new, new) == 0
}

/// One group of [`push_avx2`]: words `p .. p + 8` of the row, `yv` the item's key and `sv` the
/// stale count in every lane; returns the bits it set that were clear.
///
/// # Safety
/// The CPU must support AVX2, and `p + 8 ≤ row.len()`, `p + 8 ≤ 32`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn push_group_avx2(
    row: &mut [u32],
    p: usize,
    yv: core::arch::x86_64::__m256i,
    sv: core::arch::x86_64::__m256i,
    ages: &Ages,
) -> core::arch::x86_64::__m256i {
    use core::arch::x86_64::*;
    // SAFETY: `p + 8 ≤ row.len()` and `p + 8 ≤ 32`, the length of every table read (this
    // function's contract): the 32 bytes read from each (and written to `row`) are in bounds;
    // unaligned accesses accept any address, any bits are a valid `__m256i`, and `row` is
    // borrowed exclusively.
    unsafe {
        let m = _mm256_loadu_si256(MULTIPLIERS.as_ptr().add(p) as *const __m256i);
        let at = row.as_mut_ptr().add(p) as *mut __m256i;
        let age = ages_avx2(ages, p);
        let active = _mm256_cmpgt_epi32(_mm256_set1_epi32(ages.k as i32), age);
        let w = _mm256_andnot_si256(_mm256_cmpgt_epi32(sv, age), _mm256_loadu_si256(at));
        let base = _mm256_srli_epi32(_mm256_mullo_epi32(yv, m), 27);
        let pos = _mm256_and_si256(_mm256_sub_epi32(base, age), _mm256_set1_epi32(31));
        let bit = _mm256_and_si256(_mm256_sllv_epi32(_mm256_set1_epi32(1), pos), active);
        _mm256_storeu_si256(at, _mm256_or_si256(w, bit));
        _mm256_andnot_si256(w, bit)
    }
}

/// Writes the item into the `k` slices from physical `first` (the youngest) on, cyclically, the
/// slice at offset `j` getting bit `b_p - j`; returns whether any of those bits was clear. (The
/// reference [`insert`] is tested against; no stale slices, no stamp.)
#[cfg(test)]
pub(crate) fn set(row: &mut [u32], y: u32, first: usize, k: usize) -> bool {
    let n = row.len() - 1;
    debug_assert!(first < n && k <= n);
    let mut p = first;
    let mut new = false;
    for j in 0..k {
        let bit = 1u32 << (base(y, p + 1).wrapping_sub(j as u32) % WORD_BITS);
        new |= row[p + 1] & bit == 0;
        row[p + 1] |= bit;
        p += 1;
        if p == n {
            p = 0;
        }
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checksum of [`MULTIPLIERS`], recorded when the layout was introduced.
    const PINNED_MULTIPLIER_SUM: u64 = 6_633_263_529_467_805_879;

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The alignments by definition: bit `k-1+a` iff every slice of age `a+j` has bit
    /// `position(.., word, j)`, slices younger than `stale` being empty.
    fn alignments_by_definition(row: &[u32], y: u32, k: usize, head: usize, stale: usize) -> u32 {
        let n = row.len() - 1;
        let mut out = 0;
        for a in 0..=n - k {
            let ok = (0..k).all(|j| {
                let p = (head + a + j) % n;
                a + j >= stale && (row[p + 1] >> position(y, p + 1, j)) & 1 == 1
            });
            out |= (ok as u32) << (k - 1 + a);
        }
        out
    }

    fn random_row(st: &mut u64, words: usize) -> Vec<u32> {
        let dense = splitmix(st) % 3;
        (0..words)
            .map(|_| {
                let x = splitmix(st) as u32;
                match dense {
                    0 => x,
                    1 => x | (x >> 7) | (x << 11),
                    _ => !(x & (x >> 5) & (x << 9)),
                }
            })
            .collect()
    }

    /// Every kernel finds the alignments of the definition, for both row widths and every `k`,
    /// head, number of stale slices and density (rows dense enough that runs occur).
    #[test]
    fn kernels_agree_with_the_definition() {
        let mut st = 5;
        for kernel in Kernel::all_available() {
            for words in [16usize, 32] {
                let slices = words - 1;
                for k in 1..slices.min(25) {
                    for _ in 0..300 {
                        let head = (splitmix(&mut st) % slices as u64) as usize;
                        let stale =
                            [0, 0, 1, k, (splitmix(&mut st) % 40) as usize][(splitmix(&mut st) % 5) as usize];
                        let ages = Ages::new(slices, head, k);
                        let row = random_row(&mut st, words);
                        let y = splitmix(&mut st) as u32;
                        let want = alignments_by_definition(&row, y, k, head, stale);
                        let valid = low_bits(slices) & !low_bits(k - 1);
                        let s = stale.min(32) as u32;
                        assert_eq!(alignments_scalar(&row, y, &ages, s) & valid, want, "words {words} k {k}");
                        assert_eq!(
                            alignments(kernel, &row, y, &ages, s) & valid,
                            want,
                            "{} words {words} k {k} stale {stale}",
                            kernel.name()
                        );
                    }
                }
            }
        }
    }

    /// Every kernel's one-pass insert equals: alignments, then the stale words cleared, `set`,
    /// and the stamp; over rows filled by many inserts (both widths, every head, several `k`,
    /// stale slices or not).
    #[test]
    fn insert_is_alignments_clear_set_and_stamp() {
        let mut st = 13;
        for kernel in Kernel::all_available() {
            for words in [16usize, 32] {
                let slices = words - 1;
                for k in [1usize, 4, 8, 15.min(slices - 1), 24.min(slices - 1)] {
                    for head in 0..slices {
                        let ages = Ages::new(slices, head, k);
                        let mut a = random_row(&mut st, words);
                        for round in 0..40 {
                            let stale = if round % 7 == 0 { (splitmix(&mut st) % 40) as u32 } else { 0 };
                            let y = splitmix(&mut st) as u32;
                            let mut b = a.clone();
                            let want = alignments_scalar(&b, y, &ages, stale.min(32));
                            for p in 0..slices {
                                if ages.age(p + 1) < stale {
                                    b[p + 1] = 0;
                                }
                            }
                            let want_new = set(&mut b, y, head, k);
                            b[0] = 77 + round;
                            let got = insert(kernel, &mut a, y, &ages, stale.min(32), 77 + round);
                            assert_eq!(got, (want, want_new), "{} k {k}", kernel.name());
                            assert_eq!(a, b);
                        }
                    }
                }
            }
        }
    }

    /// Every kernel's `push` leaves the row exactly as `insert` does and reports the same new
    /// bits: both widths, every head, several `k`, no stale slices, a few, and more than `k`.
    #[test]
    fn push_writes_what_insert_writes() {
        let mut st = 17;
        for kernel in Kernel::all_available() {
            for words in [16usize, 32] {
                let slices = words - 1;
                for k in [1usize, 4, 8, 15.min(slices - 1), 24.min(slices - 1)] {
                    for head in 0..slices {
                        let ages = Ages::new(slices, head, k);
                        let mut a = random_row(&mut st, words);
                        for round in 0..60 {
                            let stale = match round % 5 {
                                0 => 0,
                                1 => (splitmix(&mut st) % (k as u64 + 1)) as u32,
                                2 => k as u32 + 1 + (splitmix(&mut st) % 40) as u32,
                                _ => (splitmix(&mut st) % 3) as u32,
                            }
                            .min(32);
                            let y = splitmix(&mut st) as u32;
                            let mut b = a.clone();
                            let (_, want_new) = insert(Kernel::scalar(), &mut b, y, &ages, stale, 5 + round);
                            let got_new = push(kernel, &mut a, y, &ages, stale, 5 + round);
                            assert_eq!(
                                got_new,
                                want_new,
                                "{} words {words} k {k} head {head}",
                                kernel.name()
                            );
                            assert_eq!(
                                a,
                                b,
                                "{} words {words} k {k} head {head} stale {stale}",
                                kernel.name()
                            );
                            if round % 9 == 0 {
                                // Sparse rows too, where most pushes set new bits.
                                a = vec![0; words];
                            }
                        }
                    }
                }
            }
        }
    }

    /// `set` writes exactly the run of the definition: the item is found at alignment 0 and at
    /// no other (in an otherwise empty row), and a second write sets nothing new.
    #[test]
    fn set_writes_one_run_at_alignment_zero() {
        let mut st = 9;
        for words in [16usize, 32] {
            let slices = words - 1;
            for head in 0..slices {
                for k in [1, 3, slices / 2, 24.min(slices - 1)] {
                    let y = splitmix(&mut st) as u32;
                    let mut row = vec![0u32; words];
                    assert!(set(&mut row, y, head, k));
                    let found = alignments_by_definition(&row, y, k, head, 0);
                    assert_eq!(found, 1 << (k - 1), "words {words} head {head} k {k}");
                    let ages = Ages::new(slices, head, k);
                    let valid = low_bits(slices) & !low_bits(k - 1);
                    assert_eq!(alignments_scalar(&row, y, &ages, 0) & valid, 1 << (k - 1));
                    // Its first slice stale: gone.
                    assert_eq!(alignments_scalar(&row, y, &ages, 1) & valid, 0);
                    assert_eq!(row.iter().map(|w| w.count_ones()).sum::<u32>(), k as u32);
                    assert!(!set(&mut row, y, head, k), "the second write is not new");
                }
            }
        }
    }

    #[test]
    fn stale_counts_generations_since_the_stamp() {
        assert_eq!(stale(5, 5), 0);
        assert_eq!(stale(7, 5), 2);
        assert_eq!(stale(5, 7), 32, "a stamp after the epoch (wrapped): every slice stale");
        assert_eq!(stale(1 << 30, 0), 32);
        assert_eq!(stale(3, u32::MAX), 4, "the epoch wraps");
    }

    /// The multipliers are odd and distinct, and pinned (the file format depends on them).
    #[test]
    fn multipliers_are_pinned() {
        assert_eq!(MULTIPLIERS[0], 0, "the stamp has none");
        assert_eq!(MULTIPLIERS[1], 0x7b1d_cdaf, "docs/FORMAT.md quotes it");
        assert!(MULTIPLIERS[1..].iter().all(|m| m & 1 == 1));
        let mut sorted = MULTIPLIERS.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), MAX_WORDS);
        let sum = MULTIPLIERS.iter().fold(0u64, |a, &m| a.wrapping_mul(31).wrapping_add(m as u64));
        assert_eq!(sum, PINNED_MULTIPLIER_SUM, "the multipliers changed: old files would not decode");
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn words_view_blocks_in_order() {
        let mut blocks = vec![Block::default(); 3];
        words_mut(&mut blocks)[19] = 7;
        assert_eq!(blocks[1].0[1] >> 32, 7, "word 19 is the high half of u64 word 9 (little-endian)");
        assert_eq!(words(&blocks).len(), 48);
    }
}
