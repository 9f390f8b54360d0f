//! The portable kernel: the same eight word masks as the AVX2 kernel, computed word by word.
//! Branch-free over the eight words (a disabled word gets an empty mask), so a query costs the
//! same whether or not it is a member and never mispredicts on the data.

use super::{remix, window, Block, WORDS};

/// One round of masks: for each word covered by the window starting at `h >> 61` with `len`
/// words, the bit `(h >> 6w) & 63`.
#[inline(always)]
fn round(m: &mut [u64; WORDS], h: u64, len: u32) {
    let en = window(h >> 61, len.min(8));
    for (w, mw) in m.iter_mut().enumerate() {
        *mw |= (((en >> w) & 1) as u64) << ((h >> (6 * w)) & 63);
    }
}

/// The eight word masks of an item with second hash word `h2` and `k` bits (1 ≤ k ≤ 16).
#[inline(always)]
pub(crate) fn masks(h2: u64, k: u32) -> [u64; WORDS] {
    let mut m = [0u64; WORDS];
    round(&mut m, h2, k.min(8));
    if k > 8 {
        round(&mut m, remix(h2), k - 8);
    }
    m
}

/// Whether every bit of the item is set in `block`.
#[inline(always)]
pub(crate) fn contains(block: &Block, h2: u64, k: u32) -> bool {
    let m = masks(h2, k);
    let mut missing = 0;
    for (mw, bw) in m.iter().zip(&block.0) {
        missing |= mw & !bw;
    }
    missing == 0
}

/// Sets the item's bits; returns whether any was clear before.
#[inline(always)]
pub(crate) fn insert(block: &mut Block, h2: u64, k: u32) -> bool {
    let m = masks(h2, k);
    let mut missing = 0;
    for (mw, bw) in m.iter().zip(block.0.iter_mut()) {
        missing |= mw & !*bw;
        *bw |= mw;
    }
    missing != 0
}
