//! The AVX2 kernel: the eight word masks of an item in two 256-bit registers, built with variable
//! shifts; a query is two `vptest` against the halves of the block.
//!
//! Every function here is `unsafe` for one reason only: it must run on a CPU with AVX2. The
//! [`super::Kernel`] wrapper calls them only after `is_x86_feature_detected!("avx2")`.

use core::arch::x86_64::*;

use super::{remix, Block, Blocks, DISABLE, PREFETCH_AHEAD};
use super::{ContainsFn, InsertFn};
use crate::hash::Digest;

/// Loads the two 256-bit halves of a block.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn load(b: &Block) -> (__m256i, __m256i) {
    let p = b.0.as_ptr() as *const __m256i;
    // SAFETY: `Block` is 64 bytes long and 64-byte aligned, so both 32-byte aligned loads are in
    // bounds and aligned; any bit pattern is a valid `__m256i`.
    unsafe { (_mm256_load_si256(p), _mm256_load_si256(p.add(1))) }
}

/// Stores the two 256-bit halves of a block.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn store(b: &mut Block, lo: __m256i, hi: __m256i) {
    let p = b.0.as_mut_ptr() as *mut __m256i;
    // SAFETY: as in `load`; the exclusive borrow makes the write unaliased.
    unsafe {
        _mm256_store_si256(p, lo);
        _mm256_store_si256(p.add(1), hi);
    }
}

/// One round: per word `w`, `1 << ((h >> 6w) & 63)` if the window of `len` words starting at
/// `h >> 61` covers `w`, else 0 (the table adds 64 to the shift count, and `vpsllvq` gives 0 for
/// counts above 63).
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn round(h: u64, len: u32) -> (__m256i, __m256i) {
    let hv = _mm256_set1_epi64x(h as i64);
    let c63 = _mm256_set1_epi64x(63);
    let one = _mm256_set1_epi64x(1);
    // `len ≤ 8` and `h >> 61 < 8` are visible to the compiler: no bounds check.
    // SAFETY: AVX2 is available (the caller's contract).
    let (dlo, dhi) = unsafe { load(&DISABLE[len.min(8) as usize][(h >> 61) as usize]) };
    let slo = _mm256_setr_epi64x(0, 6, 12, 18);
    let shi = _mm256_setr_epi64x(24, 30, 36, 42);
    let clo = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi64(hv, slo), c63), dlo);
    let chi = _mm256_or_si256(_mm256_and_si256(_mm256_srlv_epi64(hv, shi), c63), dhi);
    (_mm256_sllv_epi64(one, clo), _mm256_sllv_epi64(one, chi))
}

/// The masks of an item: round 1, and round 2 when `k > 8`.
#[inline]
#[target_feature(enable = "avx2")]
unsafe fn masks(h2: u64, k: u32) -> (__m256i, __m256i) {
    // SAFETY (both calls): AVX2 is available (the caller's contract).
    let (mut lo, mut hi) = unsafe { round(h2, k.min(8)) };
    if k > 8 {
        let (a, b) = unsafe { round(remix(h2), k - 8) };
        lo = _mm256_or_si256(lo, a);
        hi = _mm256_or_si256(hi, b);
    }
    (lo, hi)
}

/// Whether every bit of the item is set in `block`.
///
/// # Safety
/// The CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn contains(block: &Block, h2: u64, k: u32) -> bool {
    // SAFETY: AVX2 is available (this function's contract).
    let ((lo, hi), (blo, bhi)) = unsafe { (masks(h2, k), load(block)) };
    // testc(a, b) = 1 iff (!a & b) == 0: every mask bit is set in the block.
    (_mm256_testc_si256(blo, lo) & _mm256_testc_si256(bhi, hi)) != 0
}

/// Sets the item's bits; returns whether any was clear before.
///
/// # Safety
/// The CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) unsafe fn insert(block: &mut Block, h2: u64, k: u32) -> bool {
    // SAFETY: AVX2 is available (this function's contract).
    let ((lo, hi), (blo, bhi)) = unsafe { (masks(h2, k), load(block)) };
    let present = (_mm256_testc_si256(blo, lo) & _mm256_testc_si256(bhi, hi)) != 0;
    // SAFETY: as above.
    unsafe { store(block, _mm256_or_si256(blo, lo), _mm256_or_si256(bhi, hi)) };
    !present
}

/// Batch query with prefetching; the loop is compiled with AVX2 so `contains` inlines into it.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn contains_batch(blocks: &Blocks, k: u32, digests: &[Digest], out: &mut [bool]) {
    for d in digests.iter().take(PREFETCH_AHEAD) {
        blocks.prefetch(d.h1);
    }
    for (i, (d, o)) in digests.iter().zip(out.iter_mut()).enumerate() {
        if let Some(next) = digests.get(i + PREFETCH_AHEAD) {
            blocks.prefetch(next.h1);
        }
        // SAFETY: AVX2 is available (this function's contract).
        *o = unsafe { contains(blocks.get(d.h1), d.h2, k) };
    }
}

/// Batch insert with prefetching; returns how many items were new.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn insert_batch(blocks: &mut Blocks, k: u32, digests: &[Digest]) -> usize {
    for d in digests.iter().take(PREFETCH_AHEAD) {
        blocks.prefetch(d.h1);
    }
    let mut new = 0;
    for (i, d) in digests.iter().enumerate() {
        if let Some(next) = digests.get(i + PREFETCH_AHEAD) {
            blocks.prefetch(next.h1);
        }
        // SAFETY: AVX2 is available (this function's contract).
        new += unsafe { insert(blocks.get_mut(d.h1), d.h2, k) } as usize;
    }
    new
}

/// [`contains`] for a constant `k` (the masks fold `min(k, 8)`, the window row and the second
/// round away).
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn contains_k<const K: u32>(block: &Block, h2: u64) -> bool {
    // SAFETY: AVX2 is available (this function's contract).
    unsafe { contains(block, h2, K) }
}

/// [`insert`] for a constant `k`.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
unsafe fn insert_k<const K: u32>(block: &mut Block, h2: u64) -> bool {
    // SAFETY: AVX2 is available (this function's contract).
    unsafe { insert(block, h2, K) }
}

/// The per-`k` AVX2 probes, index `k - 1`. Calling them requires AVX2: [`super::Probe::new`]
/// hands them out only for the AVX2 kernel.
pub(super) fn per_k_fns() -> ([ContainsFn; 16], [InsertFn; 16]) {
    (super::per_k!(contains_k, ContainsFn), super::per_k!(insert_k, InsertFn))
}
