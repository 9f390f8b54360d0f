//! The AVX-512 kernel: the eight word masks of an item in one 512-bit register, i.e. the whole
//! cache line at once. The window of words a round covers is an 8-bit lane mask (`maskz` shift),
//! so no table of shift counts is loaded; a query is one and-not and one lane test. Same masks as
//! the scalar kernel (`kernels_agree` checks it), so the same bits and files.
//!
//! Every function here is `unsafe` for one reason only: it must run on a CPU with AVX-512F (and
//! AVX2 for the batch loops, which reuse the AVX2 kernel). [`super::Kernel`] hands them out only
//! after `is_x86_feature_detected!` found both.

// The AVX-512 intrinsics are stable since Rust 1.89, above the workspace MSRV (1.85): this module
// is behind the opt-in `avx512` feature, whose documentation says so.
#![allow(clippy::incompatible_msrv)]

use core::arch::x86_64::*;

use super::{remix, window, Block, ContainsFn, InsertFn};

/// One round: per word `w` covered by the window of `len` words from `h >> 61`, the bit
/// `(h >> 6w) & 63`; zero elsewhere.
#[inline]
#[target_feature(enable = "avx512f")]
fn round(h: u64, len: u32) -> __m512i {
    let hv = _mm512_set1_epi64(h as i64);
    let shifts = _mm512_setr_epi64(0, 6, 12, 18, 24, 30, 36, 42);
    let counts = _mm512_and_si512(_mm512_srlv_epi64(hv, shifts), _mm512_set1_epi64(63));
    _mm512_maskz_sllv_epi64(window(h >> 61, len.min(8)), _mm512_set1_epi64(1), counts)
}

/// The masks of an item: round 1, and round 2 when `k > 8`.
#[inline]
#[target_feature(enable = "avx512f")]
fn masks(h2: u64, k: u32) -> __m512i {
    let m = round(h2, k.min(8));
    if k > 8 {
        _mm512_or_si512(m, round(remix(h2), k - 8))
    } else {
        m
    }
}

/// Loads a block.
#[inline]
#[target_feature(enable = "avx512f")]
fn load(b: &Block) -> __m512i {
    // SAFETY: `Block` is 64 bytes long and 64-byte aligned, so the aligned 64-byte load is in
    // bounds and aligned; any bit pattern is a valid `__m512i`.
    unsafe { _mm512_load_si512(b.0.as_ptr() as *const _) }
}

/// Whether every bit of the item is set in `block`.
///
/// # Safety
/// The CPU must support AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn contains(block: &Block, h2: u64, k: u32) -> bool {
    let missing = _mm512_andnot_si512(load(block), masks(h2, k));
    _mm512_test_epi64_mask(missing, missing) == 0
}

/// Sets the item's bits; returns whether any was clear before.
///
/// # Safety
/// The CPU must support AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn insert(block: &mut Block, h2: u64, k: u32) -> bool {
    let m = masks(h2, k);
    let b = load(block);
    let missing = _mm512_andnot_si512(b, m);
    // SAFETY: as in `load`; the exclusive borrow makes the write unaliased.
    unsafe { _mm512_store_si512(block.0.as_mut_ptr() as *mut _, _mm512_or_si512(b, m)) };
    _mm512_test_epi64_mask(missing, missing) != 0
}

/// [`contains`] for a constant `k`.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn contains_k<const K: u32>(block: &Block, h2: u64) -> bool {
    // SAFETY: AVX-512F is available (this function's contract).
    unsafe { contains(block, h2, K) }
}

/// [`insert`] for a constant `k`.
///
/// # Safety
/// The CPU must support AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn insert_k<const K: u32>(block: &mut Block, h2: u64) -> bool {
    // SAFETY: AVX-512F is available (this function's contract).
    unsafe { insert(block, h2, K) }
}

/// The per-`k` AVX-512 probes, index `k - 1`. Calling them requires AVX-512F:
/// [`super::Probe::new`] hands them out only for the AVX-512 kernel.
pub(super) fn per_k_fns() -> ([ContainsFn; 16], [InsertFn; 16]) {
    (super::per_k!(contains_k, ContainsFn), super::per_k!(insert_k, InsertFn))
}
