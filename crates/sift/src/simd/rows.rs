//! Probe kernels of the age-partitioned row layout ([`crate::AgingBloom`],
//! [`crate::TimeLimitedBloom`]).
//!
//! # The row layout (what the bits mean, on disk too)
//!
//! A filter is `rows` rows of `slices` little-endian 64-bit words (`slices` a multiple of 8, so
//! a row is whole 64-byte cache lines); word `p` of a row belongs to slice `p` (the slice's
//! *physical* index, which never changes while the slices take turns being the youngest). An
//! item with digest `(h1, h2)` lives in row `fastrange(h1, rows)`. In the word of slice `p` its
//! *base* position is `b_p = (y·M_p mod 2^32) >> 26`, a multiply-shift hash (Dietzfelbinger et
//! al. 1997) of the item's `y = h2 >> 32` with a fixed odd constant per slice ([`MULTIPLIERS`]),
//! and an item written into the `k` youngest slices sets, in the slice of age `j` (`j = 0` the
//! youngest), bit `(b_p - j) mod 64`: the bit
//! depends on where the slice stands in the item's run of `k` slices (its *offset*). Positions
//! follow the physical index, so an item's bits stay put as the ring turns; offsets stay too,
//! since an item's `k` slices age together.
//!
//! A query looks for an *alignment* `a` (the age of the youngest slice of a run) at which all
//! `k` slices `a .. a+k` hold the item's bit for their offset. Offsets make a run count only at
//! the alignment it was written at: the bits an item left in its younger slices after its
//! oldest one was retired never combine with other slices into a new run, so an item that left
//! the window answers like an item never seen (the paper's plain runs let such an item fade
//! out over `k` more generations instead).
//!
//! The kernel computes all alignments at once. For the slice of age `s` it takes the `k` bits
//! `b_p - (k-1) .. b_p` (a rotate and a mask: bit `k-1-j` is offset `j`), shifts them left by
//! `s` so that offset `j` lands on bit `k-1+a` for `a = s - j`, fills the bits outside the
//! slice's `k` alignments with ones, and ANDs every slice in: bit `k-1+a` of the result is set
//! iff every slice of alignment `a` holds its bit. With AVX2 four slices go per step (variable
//! shifts for the rotate and the placement); no loop-carried dependency but the AND, no branch
//! on the data.
//!
//! Why multiply-shift rather than the double hashing `h2 + p·h3` of the other Bloom filters: the
//! top six bits of an arithmetic progression collide together in neighbouring slices whenever
//! two items' steps are close (one pair in 32), which correlates the slices of a run; at `k = 8`
//! the filter then measured 1.37× the rate of the layout's formula (0.0135 against 0.0098). With
//! independent multipliers the measured rate is the formula's (`fpr_over_a_stream`).

use crate::hash::fastrange;

use super::{Block, Kernel};

/// The odd multipliers of the slices' base positions: `M_p` is the low 32 bits of the
/// SplitMix64 output for `z = (p + 1)·0x9e3779b97f4a7c15`, with the lowest bit set. Part of the
/// file format: never change them.
pub(crate) static MULTIPLIERS: [u32; 64] = {
    let mut t = [0u32; 64];
    let mut p = 0;
    while p < 64 {
        let mut z = (p as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        t[p] = (z as u32) | 1;
        p += 1;
    }
    t
};

/// The words of a slice of blocks, in order (eight per block).
#[inline(always)]
pub(crate) fn words(blocks: &[Block]) -> &[u64] {
    // SAFETY: `Block` is `#[repr(C, align(64))]` around `[u64; 8]`, 64 bytes with no padding,
    // so `n` blocks are exactly `8n` consecutive, initialised, suitably aligned `u64`s, borrowed
    // for as long as the blocks are.
    unsafe { core::slice::from_raw_parts(blocks.as_ptr() as *const u64, blocks.len() * super::WORDS) }
}

/// The words of a slice of blocks, mutably.
#[inline(always)]
pub(crate) fn words_mut(blocks: &mut [Block]) -> &mut [u64] {
    // SAFETY: as in `words`; the exclusive borrow of the blocks makes the words unaliased, and
    // every bit pattern is a valid `u64` (and a valid block) whatever is written.
    unsafe { core::slice::from_raw_parts_mut(blocks.as_mut_ptr() as *mut u64, blocks.len() * super::WORDS) }
}

/// The 32 bits of an item's second hash word its positions are computed from.
#[inline(always)]
pub(crate) fn key(h2: u64) -> u32 {
    (h2 >> 32) as u32
}

/// The base position of an item with key `y` in physical slice `p`.
#[inline(always)]
pub(crate) fn base(y: u32, p: usize) -> u32 {
    y.wrapping_mul(MULTIPLIERS[p]) >> 26
}

/// The row an item with first hash word `h1` lives in.
#[inline(always)]
pub(crate) fn row_index(h1: u64, rows: u64) -> u64 {
    fastrange(h1, rows)
}

/// The item's bit in the word of physical slice `p` when that slice is at offset `j` of its run.
#[cfg(test)]
pub(crate) fn position(y: u32, p: usize, j: usize) -> u32 {
    base(y, p).wrapping_sub(j as u32) & 63
}

/// The per-slice tables of a ring state, by physical slice: the slice's age (logical index) and
/// the ones that fill the bits outside its `k` alignments, `!(low_k << age)`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Ages {
    /// Age of each physical slice.
    pub(crate) age: [u64; 64],
    /// `!(low_k << age)` of each physical slice.
    pub(crate) fill: [u64; 64],
}

impl Ages {
    /// The tables for `slices` slices whose youngest is physical `head`, `k` per run.
    pub(crate) fn new(slices: usize, head: usize, k: usize) -> Ages {
        let low_k = low_bits(k);
        let mut t = Ages { age: [0; 64], fill: [u64::MAX; 64] };
        for p in 0..slices {
            let age = (p + slices - head) % slices;
            t.age[p] = age as u64;
            t.fill[p] = !(low_k << age);
        }
        t
    }
}

/// The low `n` bits set (`n ≤ 64`).
#[inline(always)]
pub(crate) fn low_bits(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Bit `k-1+a` of the result (for `a + k ≤ row.len()`): whether every slice of age `a .. a+k`
/// holds the item's bit for its offset in the run (see the module documentation). Bits below
/// `k-1` are meaningless. `row.len() ≤ 64`, a multiple of 8.
#[inline(always)]
pub(crate) fn alignments(kernel: Kernel, row: &[u64], y: u32, k: usize, ages: &Ages) -> u64 {
    debug_assert!(row.len() <= 64 && row.len() % 8 == 0 && (1..=64).contains(&k));
    match kernel.0 {
        #[cfg(target_arch = "x86_64")]
        super::Impl::Avx2 => {
            // SAFETY: `Impl::Avx2` exists only when `Kernel::detect` found AVX2 on this CPU.
            unsafe { alignments_avx2(row, y, k, ages) }
        }
        #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
        super::Impl::Avx512 => {
            // SAFETY: every CPU with AVX-512F (which `Kernel::detect` checked) has AVX2.
            unsafe { alignments_avx2(row, y, k, ages) }
        }
        _ => alignments_scalar(row, y, k, ages),
    }
}

/// [`alignments`] without special instructions (the reference the tests compare the others
/// with).
#[inline(always)]
pub(crate) fn alignments_scalar(row: &[u64], y: u32, k: usize, ages: &Ages) -> u64 {
    let low_k = low_bits(k);
    let back = (k as u32 - 1) & 63;
    let mut all = u64::MAX;
    for (p, &w) in row.iter().enumerate() {
        // Bits b_p - (k-1) ..= b_p of the word, offset j at bit k-1-j.
        let bits = w.rotate_right(base(y, p).wrapping_sub(back) & 63) & low_k;
        all &= (bits << ages.age[p]) | ages.fill[p];
    }
    all
}

/// [`alignments`] with AVX2: eight base positions per multiply, four slices per step.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn alignments_avx2(row: &[u64], y: u32, k: usize, ages: &Ages) -> u64 {
    use core::arch::x86_64::*;
    let yv = _mm256_set1_epi32(y as i32);
    let back = _mm256_set1_epi32(((k as u32 - 1) & 63) as i32);
    let c63 = _mm256_set1_epi32(63);
    let low_k = _mm256_set1_epi64x(low_bits(k) as i64);
    let c64 = _mm256_set1_epi64x(64);
    let mut all = _mm256_set1_epi64x(-1);
    // One step: the four slices from `p` with their rotations `r` (64-bit lanes).
    let step = |all: __m256i, p: usize, r: __m256i| -> __m256i {
        // SAFETY: the caller keeps `p + 4 ≤ row.len() ≤ 64`, so the 32 bytes read from `row`,
        // `ages.age` and `ages.fill` are in bounds; unaligned loads accept any address and any
        // bits are a valid `__m256i`. AVX2 is available (this function's contract).
        unsafe {
            let w = _mm256_loadu_si256(row.as_ptr().add(p) as *const __m256i);
            let age = _mm256_loadu_si256(ages.age.as_ptr().add(p) as *const __m256i);
            let fill = _mm256_loadu_si256(ages.fill.as_ptr().add(p) as *const __m256i);
            // Rotate right by r (a left shift by 64 gives 0, which is right for r = 0).
            let rot =
                _mm256_or_si256(_mm256_srlv_epi64(w, r), _mm256_sllv_epi64(w, _mm256_sub_epi64(c64, r)));
            let placed = _mm256_sllv_epi64(_mm256_and_si256(rot, low_k), age);
            _mm256_and_si256(all, _mm256_or_si256(placed, fill))
        }
    };
    let mut p = 0;
    while p + 8 <= row.len() {
        // SAFETY: `p + 8 ≤ row.len() ≤ 64 = MULTIPLIERS.len()`: 32 bytes in bounds, unaligned.
        let m = unsafe { _mm256_loadu_si256(MULTIPLIERS.as_ptr().add(p) as *const __m256i) };
        // Eight rotations b_p - (k-1) mod 64, as 32-bit lanes, then widened to two halves.
        let r32 =
            _mm256_and_si256(_mm256_sub_epi32(_mm256_srli_epi32(_mm256_mullo_epi32(yv, m), 26), back), c63);
        let lo = _mm256_cvtepu32_epi64(_mm256_castsi256_si128(r32));
        let hi = _mm256_cvtepu32_epi64(_mm256_extracti128_si256(r32, 1));
        all = step(all, p, lo);
        all = step(all, p + 4, hi);
        p += 8;
    }
    let mut lanes = [0u64; 4];
    // SAFETY: `lanes` is 32 bytes of writable memory; an unaligned store accepts any address.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, all) };
    lanes[0] & lanes[1] & lanes[2] & lanes[3]
}

/// Writes the item into the `k` slices from physical `first` (the youngest) on, cyclically, the
/// slice at offset `j` getting bit `b_p - j`; returns whether any of those bits was clear.
#[inline(always)]
pub(crate) fn set(row: &mut [u64], y: u32, first: usize, k: usize) -> bool {
    let n = row.len();
    debug_assert!(first < n && k <= n);
    let mut p = first;
    let mut new = false;
    for j in 0..k {
        let bit = 1u64 << (base(y, p).wrapping_sub(j as u32) & 63);
        new |= row[p] & bit == 0;
        row[p] |= bit;
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
    const PINNED_MULTIPLIER_SUM: u64 = 5_517_710_159_305_320_180;

    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The alignments by definition: bit `k-1+a` iff every slice of age `a+j` has bit
    /// `position(.., p, j)`.
    fn alignments_by_definition(row: &[u64], y: u32, k: usize, head: usize) -> u64 {
        let n = row.len();
        let mut out = 0;
        for a in 0..=n - k {
            let ok = (0..k).all(|j| {
                let p = (head + a + j) % n;
                (row[p] >> position(y, p, j)) & 1 == 1
            });
            out |= (ok as u64) << (k - 1 + a);
        }
        out
    }

    /// Every kernel finds the alignments of the definition, for every row width, `k`, head and
    /// density (rows dense enough that runs occur).
    #[test]
    fn kernels_agree_with_the_definition() {
        let mut st = 5;
        for kernel in Kernel::all_available() {
            for slices in (8..=64).step_by(8) {
                for k in [1usize, 2, 5, 9, 16, 24] {
                    if k >= slices {
                        continue;
                    }
                    for _ in 0..300 {
                        let head = (splitmix(&mut st) % slices as u64) as usize;
                        let ages = Ages::new(slices, head, k);
                        let dense = splitmix(&mut st) % 3;
                        let row: Vec<u64> = (0..slices)
                            .map(|_| match dense {
                                0 => splitmix(&mut st),
                                1 => splitmix(&mut st) | splitmix(&mut st) | splitmix(&mut st),
                                _ => !(splitmix(&mut st) & splitmix(&mut st) & splitmix(&mut st)),
                            })
                            .collect();
                        let y = splitmix(&mut st) as u32;
                        let want = alignments_by_definition(&row, y, k, head);
                        let valid = low_bits(slices) & !low_bits(k - 1);
                        assert_eq!(
                            alignments_scalar(&row, y, k, &ages) & valid,
                            want,
                            "slices {slices} k {k}"
                        );
                        assert_eq!(
                            alignments(kernel, &row, y, k, &ages) & valid,
                            want,
                            "{} slices {slices} k {k}",
                            kernel.name()
                        );
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
        for slices in [8usize, 16, 24, 64] {
            for head in 0..slices {
                for k in [1, 3, slices / 2, slices - 1] {
                    let y = splitmix(&mut st) as u32;
                    let mut row = vec![0u64; slices];
                    assert!(set(&mut row, y, head, k));
                    let found = alignments_by_definition(&row, y, k, head);
                    assert_eq!(found, 1 << (k - 1), "slices {slices} head {head} k {k}");
                    let ages = Ages::new(slices, head, k);
                    let valid = low_bits(slices) & !low_bits(k - 1);
                    assert_eq!(alignments_scalar(&row, y, k, &ages) & valid, 1 << (k - 1));
                    assert_eq!(row.iter().map(|w| w.count_ones()).sum::<u32>(), k as u32);
                    assert!(!set(&mut row, y, head, k), "the second write is not new");
                }
            }
        }
    }

    /// The multipliers are odd and distinct, and pinned (the file format depends on them).
    #[test]
    fn multipliers_are_pinned() {
        assert_eq!(MULTIPLIERS[0], 0x7b1d_cdaf, "docs/FORMAT.md quotes it");
        assert!(MULTIPLIERS.iter().all(|m| m & 1 == 1));
        let mut sorted = MULTIPLIERS.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 64);
        let sum = MULTIPLIERS.iter().fold(0u64, |a, &m| a.wrapping_mul(31).wrapping_add(m as u64));
        assert_eq!(sum, PINNED_MULTIPLIER_SUM, "the multipliers changed: old files would not decode");
    }

    #[test]
    fn words_view_blocks_in_order() {
        let mut blocks = vec![Block::default(); 3];
        words_mut(&mut blocks)[9] = 7;
        assert_eq!(blocks[1].0[1], 7);
        assert_eq!(words(&blocks).len(), 24);
    }
}
