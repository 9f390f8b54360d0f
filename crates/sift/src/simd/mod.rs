//! The probe kernels of the cache-line-blocked Bloom filters ([`crate::BlockedBloom`],
//! [`crate::AtomicBloom`], the layers of [`crate::ScalableBloom`]) and of the age-partitioned
//! rows of [`crate::AgingBloom`] and [`crate::TimeLimitedBloom`] (`rows.rs`): AVX2 and AVX-512
//! with a portable scalar kernel, chosen once per process.
//!
//! The kernels are `unsafe` (CPU features, unchecked block access), as are a few other hot paths
//! of the crate, each with its `// SAFETY:` argument: the huge-page storage and BMI2 `select` in
//! `bits.rs`, the unchecked word reads of [`crate::Bloom`], the atomic-block reinterpretation of
//! [`crate::AtomicBloom`], the unchecked bucket words and SSE2 field tests of [`crate::Cuckoo`]
//! and the POPCNT/BMI paths of [`crate::Quotient`].
//!
//! # The block layout (what the bits mean, on disk too)
//!
//! A block is 512 bits: eight little-endian `u64` words, 64-byte aligned so that one block is one
//! cache line. An item with digest `(h1, h2)` lives in block `fastrange(h1, blocks)`; inside it,
//! its `k` bits (1 ≤ k ≤ 16) are laid out in up to two *rounds* of one bit per word:
//!
//! * round 1 sets `min(k, 8)` bits in the consecutive words `s, s+1, … (mod 8)` starting at
//!   `s = h2 >> 61`; the bit in word `w` is bit `(h2 >> 6w) & 63`;
//! * if `k > 8`, round 2 does the same for `k - 8` words with `h3 = remix(h2)` (the MurmurHash3
//!   64-bit finaliser) in place of `h2`.
//!
//! The start word is uniform, so every word of the block carries the same expected load whatever
//! `k` is, and an item's round-1 bits never collide with each other (they are in distinct words).
//! The exact false-positive rate of this layout is [`crate::math::blocked_words_fpr`].
//!
//! Why this layout rather than `k` random positions in 512 bits: the position of the bit in word
//! `w` is a fixed 6-bit field of the hash, independent of `s`, so with AVX2 the eight positions
//! are two variable shifts (`vpsrlvq` then `vpsllvq`) and the `k`-word window is one table load
//! per half-block that pushes the shift count of disabled words past 63 (which `vpsllvq` turns
//! into a zero mask). No permutes, no 64-bit multiplies, no loop over `k`, no branch on the
//! data; a query is then two `vptest` against the two halves of the cache line. The scalar kernel
//! computes the very same eight masks word by word.
//!
//! # Dispatch
//!
//! [`Kernel::detect`] picks AVX2 once per process when the CPU has it (`is_x86_feature_detected`),
//! unless the environment variable `SIFT_FORCE_SCALAR` is set to a non-empty value other than
//! `0`; [`Kernel::scalar`] forces the portable kernel (the tests use it to check that both set the
//! same bits and answer the same).

use std::sync::OnceLock;

use crate::hash::{fastrange, Digest};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(all(target_arch = "x86_64", feature = "avx512"))]
mod avx512;
pub(crate) mod rows;
pub(crate) mod scalar;

/// Words per block.
pub(crate) const WORDS: usize = 8;

/// Largest `k` the layout supports (two rounds of eight words).
pub(crate) const MAX_K: u32 = 16;

/// One 512-bit block: a cache line of eight little-endian words.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
#[repr(C, align(64))]
pub(crate) struct Block(pub(crate) [u64; WORDS]);

// SAFETY: a block of zero words is a valid (empty) block, equal to `Block::default()`.
unsafe impl crate::bits::Zeroable for Block {}

/// The blocks of a filter: never empty, so that `fastrange(h1, len)` is always a valid index.
/// Large filters get huge-page-friendly storage ([`crate::bits::Storage`]).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Blocks(crate::bits::Storage<Block>);

impl Blocks {
    /// Wraps `blocks`; `None` when it is empty.
    #[cfg(test)]
    pub(crate) fn new(blocks: Vec<Block>) -> Option<Self> {
        Self::from_storage(crate::bits::Storage::from_vec(blocks))
    }

    /// Wraps `blocks`; `None` when it is empty.
    pub(crate) fn from_storage(blocks: crate::bits::Storage<Block>) -> Option<Self> {
        if blocks.is_empty() {
            None
        } else {
            Some(Blocks(blocks))
        }
    }

    /// The storage, handed over (for the zero-copy conversions of [`crate::AtomicBloom`]). While
    /// a snapshot reads these blocks ([`Blocks::freeze`]) it gets a copy instead: an atomic
    /// filter's writers do not take the guard, so they must not write the guarded blocks (the
    /// snapshot keeps them, and frees them when done).
    pub(crate) fn into_storage(self) -> crate::bits::Storage<Block> {
        if self.0.cow_guard().is_some() {
            return self.0.clone();
        }
        self.0
    }

    /// The same blocks in plain `Vec` storage (tests compare both kinds of storage).
    #[cfg(test)]
    pub(crate) fn with_plain_storage(&self) -> Blocks {
        Blocks(crate::bits::Storage::plain_from(&self.0).unwrap())
    }

    /// Whether the blocks are in huge-page-advised storage.
    #[cfg(test)]
    pub(crate) fn is_huge(&self) -> bool {
        self.0.is_huge()
    }

    /// Number of blocks (at least 1).
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The blocks.
    #[inline(always)]
    pub(crate) fn as_slice(&self) -> &[Block] {
        &self.0
    }

    /// The blocks, mutably (the length cannot change through a slice).
    #[inline(always)]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [Block] {
        &mut self.0
    }

    /// A copy-on-write guard for a snapshot to read the blocks later, when they are large
    /// ([`crate::bits::Storage::freeze`]).
    pub(crate) fn freeze(&self) -> Option<crate::bits::CowHandle> {
        self.0.freeze()
    }

    /// The guard of the blocks, if a snapshot is reading them: one atomic load when none is.
    /// Every write to the blocks checks it first and, when there is one, saves the blocks it
    /// changes under its lock.
    #[inline(always)]
    pub(crate) fn cow_guard(&self) -> Option<std::sync::Arc<crate::bits::CowGuard>> {
        self.0.cow_guard()
    }

    /// The block an item with first hash word `h1` lives in.
    #[inline(always)]
    pub(crate) fn index(&self, h1: u64) -> usize {
        fastrange(h1, self.0.len() as u64) as usize
    }

    /// The block of `h1`, without a bounds check.
    #[inline(always)]
    pub(crate) fn get(&self, h1: u64) -> &Block {
        let i = self.index(h1);
        // SAFETY: `fastrange(x, n) = (x·n) >> 64 < n` for every `x < 2^64` and `n ≥ 1`, and the
        // constructor guarantees `len ≥ 1`; the length never changes afterwards (only slices of
        // the vector are handed out). So `i < len`.
        unsafe { self.0.get_unchecked(i) }
    }

    /// The block of `h1`, mutably, without a bounds check.
    #[inline(always)]
    pub(crate) fn get_mut(&mut self, h1: u64) -> &mut Block {
        let i = self.index(h1);
        // SAFETY: as in `get`: `i < len` because `len ≥ 1` and fastrange maps into `0..len`.
        unsafe { self.0.get_unchecked_mut(i) }
    }

    /// Hints the CPU to load the block of `h1`.
    #[inline(always)]
    pub(crate) fn prefetch(&self, h1: u64) {
        crate::bits::prefetch(self.get(h1));
    }
}

/// Which kernel a filter probes with. The AVX2 variant can only be obtained from
/// [`Kernel::detect`], after the CPU was found to support AVX2: that is what makes calling the
/// `#[target_feature(enable = "avx2")]` functions sound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kernel(Impl);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Impl {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512F for single probes (and AVX2, which every AVX-512 CPU has, for the batch loops).
    #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
    Avx512,
}

impl Kernel {
    /// The fastest kernel this CPU supports (decided once per process).
    pub(crate) fn detect() -> Kernel {
        static BEST: OnceLock<Kernel> = OnceLock::new();
        *BEST.get_or_init(|| {
            let forced = std::env::var_os("SIFT_FORCE_SCALAR").is_some_and(|v| !v.is_empty() && v != "0");
            if forced {
                return Kernel::scalar();
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                #[cfg(feature = "avx512")]
                {
                    let no512 = std::env::var_os("SIFT_NO_AVX512").is_some_and(|v| !v.is_empty() && v != "0");
                    if !no512 && std::arch::is_x86_feature_detected!("avx512f") {
                        return Kernel(Impl::Avx512);
                    }
                }
                return Kernel(Impl::Avx2);
            }
            Kernel::scalar()
        })
    }

    /// Every kernel this CPU can run (the tests compare them all with the scalar one).
    #[cfg(test)]
    pub(crate) fn all_available() -> Vec<Kernel> {
        #[allow(unused_mut)]
        let mut v = vec![Kernel::scalar()];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            v.push(Kernel(Impl::Avx2));
            #[cfg(feature = "avx512")]
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Kernel(Impl::Avx512));
            }
        }
        v
    }

    /// The portable kernel.
    pub(crate) const fn scalar() -> Kernel {
        Kernel(Impl::Scalar)
    }

    /// A short name (`"avx2"` or `"scalar"`).
    pub(crate) fn name(self) -> &'static str {
        match self.0 {
            Impl::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Impl::Avx2 => "avx2",
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Impl::Avx512 => "avx512",
        }
    }

    /// Whether every bit of the item is set in its block (the reference the tests compare the
    /// per-`k` [`Probe`]s with).
    #[cfg(test)]
    pub(crate) fn contains(self, blocks: &Blocks, d: Digest, k: u32) -> bool {
        match self.0 {
            Impl::Scalar => scalar::contains(blocks.get(d.h1), d.h2, k),
            // SAFETY: `Impl::Avx2` exists only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            Impl::Avx2 => unsafe { avx2::contains(blocks.get(d.h1), d.h2, k) },
            // SAFETY: `Impl::Avx512` exists only when AVX-512F was found on this CPU.
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Impl::Avx512 => unsafe { avx512::contains(blocks.get(d.h1), d.h2, k) },
        }
    }

    /// Sets the item's bits; returns whether any was clear before (test reference, as
    /// [`Kernel::contains`]).
    #[cfg(test)]
    pub(crate) fn insert(self, blocks: &mut Blocks, d: Digest, k: u32) -> bool {
        match self.0 {
            Impl::Scalar => scalar::insert(blocks.get_mut(d.h1), d.h2, k),
            // SAFETY: `Impl::Avx2` exists only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            Impl::Avx2 => unsafe { avx2::insert(blocks.get_mut(d.h1), d.h2, k) },
            // SAFETY: `Impl::Avx512` exists only when AVX-512F was found on this CPU.
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Impl::Avx512 => unsafe { avx512::insert(blocks.get_mut(d.h1), d.h2, k) },
        }
    }

    /// [`Kernel::contains`] for many digests, prefetching `ahead` blocks in advance.
    pub(crate) fn contains_batch(self, blocks: &Blocks, k: u32, digests: &[Digest], out: &mut [bool]) {
        assert_eq!(digests.len(), out.len(), "one output slot per digest");
        match self.0 {
            Impl::Scalar => {
                batch_contains(blocks, digests, out, |b, d| scalar::contains(b.get(d.h1), d.h2, k))
            }
            // SAFETY: `Impl::Avx2` exists only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            Impl::Avx2 => unsafe { avx2::contains_batch(blocks, k, digests, out) },
            // SAFETY: `Impl::Avx512` exists only when AVX2 (and AVX-512F) were found on this CPU.
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Impl::Avx512 => unsafe { avx2::contains_batch(blocks, k, digests, out) },
        }
    }

    /// [`Kernel::insert`] for many digests, prefetching ahead; returns how many were new.
    pub(crate) fn insert_batch(self, blocks: &mut Blocks, k: u32, digests: &[Digest]) -> usize {
        match self.0 {
            Impl::Scalar => batch_insert(blocks, digests, |b, d| scalar::insert(b.get_mut(d.h1), d.h2, k)),
            // SAFETY: `Impl::Avx2` exists only when `detect` found AVX2 on this CPU.
            #[cfg(target_arch = "x86_64")]
            Impl::Avx2 => unsafe { avx2::insert_batch(blocks, k, digests) },
            // SAFETY: `Impl::Avx512` exists only when AVX2 (and AVX-512F) were found on this CPU.
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Impl::Avx512 => unsafe { avx2::insert_batch(blocks, k, digests) },
        }
    }
}

/// A probe specialised for one kernel and one `k`: two plain function pointers chosen once per
/// filter ([`Probe::new`]), so a query pays one indirect call and nothing else for the dispatch:
/// no branch on the kernel, no `min(k, 8)`, no test for a second round, and the window table row
/// is a constant. The functions behind the pointers compute exactly the masks of
/// [`Kernel::contains`] / [`Kernel::insert`] for that `k` (`kernels_agree` checks it).
///
/// Why it matters: a query on a filter bigger than L2 waits for one cache miss; how many misses
/// overlap depends on how many queries fit in the CPU's reorder window, i.e. on the number of
/// instructions per query (see `docs/BENCHMARKS.md`, "What changed for speed: per-`k` probe
/// kernels, AVX-512, XXH3 with the seed precomputed").
#[derive(Clone, Copy)]
pub(crate) struct Probe {
    contains: unsafe fn(&Block, u64) -> bool,
    insert: unsafe fn(&mut Block, u64) -> bool,
}

impl core::fmt::Debug for Probe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Probe")
    }
}

/// The scalar probe for a constant `K`.
#[inline(never)]
fn scalar_contains_k<const K: u32>(block: &Block, h2: u64) -> bool {
    scalar::contains(block, h2, K)
}

/// The scalar insert for a constant `K`.
#[inline(never)]
fn scalar_insert_k<const K: u32>(block: &mut Block, h2: u64) -> bool {
    scalar::insert(block, h2, K)
}

/// `[f::<1>, f::<2>, …, f::<16>]` for a generic function `f`, coerced to `unsafe fn` pointers.
macro_rules! per_k {
    ($f:ident, $t:ty) => {
        [
            $f::<1> as $t,
            $f::<2> as $t,
            $f::<3> as $t,
            $f::<4> as $t,
            $f::<5> as $t,
            $f::<6> as $t,
            $f::<7> as $t,
            $f::<8> as $t,
            $f::<9> as $t,
            $f::<10> as $t,
            $f::<11> as $t,
            $f::<12> as $t,
            $f::<13> as $t,
            $f::<14> as $t,
            $f::<15> as $t,
            $f::<16> as $t,
        ]
    };
}
// The x86-64 kernels' modules use it by path; the scalar table below, in this module, by name.
#[cfg(target_arch = "x86_64")]
pub(crate) use per_k;

/// A per-`k` probe: whether the item's bits are all set in the block.
pub(crate) type ContainsFn = unsafe fn(&Block, u64) -> bool;
/// A per-`k` insert: sets the item's bits, returns whether one was clear.
pub(crate) type InsertFn = unsafe fn(&mut Block, u64) -> bool;

impl Probe {
    /// The probe of `kernel` for `k` bits per item (`k` is clamped to 1..=16; the filters
    /// validate it before).
    pub(crate) fn new(kernel: Kernel, k: u32) -> Probe {
        let i = (k.clamp(1, MAX_K) - 1) as usize;
        match kernel.0 {
            Impl::Scalar => {
                let c: [ContainsFn; 16] = per_k!(scalar_contains_k, ContainsFn);
                let s: [InsertFn; 16] = per_k!(scalar_insert_k, InsertFn);
                Probe { contains: c[i], insert: s[i] }
            }
            #[cfg(target_arch = "x86_64")]
            Impl::Avx2 => {
                let (c, s) = avx2::per_k_fns();
                Probe { contains: c[i], insert: s[i] }
            }
            #[cfg(all(target_arch = "x86_64", feature = "avx512"))]
            Impl::Avx512 => {
                let (c, s) = avx512::per_k_fns();
                Probe { contains: c[i], insert: s[i] }
            }
        }
    }

    /// Whether every bit of the item is set in its block.
    #[inline(always)]
    pub(crate) fn contains(self, blocks: &Blocks, d: Digest) -> bool {
        // SAFETY: the pointer is a scalar function (always sound) or an AVX2 / AVX-512 one,
        // which `Probe::new` hands out only for `Impl::Avx2` / `Impl::Avx512`, which exist only
        // when `Kernel::detect` found those features on this CPU.
        unsafe { (self.contains)(blocks.get(d.h1), d.h2) }
    }

    /// Sets the item's bits; returns whether any was clear before.
    #[inline(always)]
    pub(crate) fn insert(self, blocks: &mut Blocks, d: Digest) -> bool {
        // SAFETY: as in `Probe::contains`.
        unsafe { (self.insert)(blocks.get_mut(d.h1), d.h2) }
    }

    /// Sets the bits of an item with second hash word `h2` in `block` (which the caller found
    /// from `h1`: the stripes of [`crate::filters::blocked_bloom::Stripe`] index a part of the
    /// blocks themselves); returns whether any was clear before.
    #[inline(always)]
    pub(crate) fn insert_block(self, block: &mut Block, h2: u64) -> bool {
        // SAFETY: as in `Probe::contains`: the function behind the pointer needs only the CPU
        // features `Probe::new` checked; the block is a valid `&mut`.
        unsafe { (self.insert)(block, h2) }
    }
}

/// How many digests the batch loops run ahead with their prefetches: enough to keep about eight
/// cache misses in flight (a block probe is a few ns, a DRAM miss ~100 ns). Not yet tuned by
/// measurement: the shared machine was too loaded for stable timings; the benches should pick
/// between 8 and 16.
pub(crate) const PREFETCH_AHEAD: usize = 8;

/// The batch query loop shared by both kernels: prefetch `PREFETCH_AHEAD` blocks ahead, probe.
#[inline(always)]
pub(crate) fn batch_contains(
    blocks: &Blocks,
    digests: &[Digest],
    out: &mut [bool],
    probe: impl Fn(&Blocks, Digest) -> bool,
) {
    for d in digests.iter().take(PREFETCH_AHEAD) {
        blocks.prefetch(d.h1);
    }
    for (i, (d, o)) in digests.iter().zip(out.iter_mut()).enumerate() {
        if let Some(next) = digests.get(i + PREFETCH_AHEAD) {
            blocks.prefetch(next.h1);
        }
        *o = probe(blocks, *d);
    }
}

/// The batch insert loop shared by both kernels.
#[inline(always)]
pub(crate) fn batch_insert(
    blocks: &mut Blocks,
    digests: &[Digest],
    mut put: impl FnMut(&mut Blocks, Digest) -> bool,
) -> usize {
    for d in digests.iter().take(PREFETCH_AHEAD) {
        blocks.prefetch(d.h1);
    }
    let mut new = 0;
    for (i, d) in digests.iter().enumerate() {
        if let Some(next) = digests.get(i + PREFETCH_AHEAD) {
            blocks.prefetch(next.h1);
        }
        new += put(blocks, *d) as usize;
    }
    new
}

/// The second-round hash word: the MurmurHash3 64-bit finaliser of `h2` (a bijection whose
/// output bits each depend on every input bit), so round 2 is independent of round 1 in practice.
#[inline(always)]
pub(crate) const fn remix(h2: u64) -> u64 {
    let mut x = h2;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// The words a round of `len` bits (0 ≤ len ≤ 8) starting at word `start` covers, as a bit mask
/// over the eight words.
#[inline(always)]
pub(crate) const fn window(start: u64, len: u32) -> u8 {
    let run = ((1u16 << len) - 1) as u8;
    run.rotate_left((start & 7) as u32)
}

/// For the AVX2 kernel: `DISABLE[len][start]` holds, per word, 0 if the round of `len` bits
/// starting at `start` covers the word and 64 if not. Or-ed into the shift counts, it pushes the
/// counts of uncovered words past 63, where `vpsllvq` yields 0.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) static DISABLE: [[Block; 8]; 9] = {
    let mut t = [[Block([0; WORDS]); 8]; 9];
    let mut len = 0;
    while len <= 8 {
        let mut start = 0;
        while start < 8 {
            let win = window(start as u64, len as u32);
            let mut w = 0;
            while w < WORDS {
                if (win >> w) & 1 == 0 {
                    t[len][start].0[w] = 64;
                }
                w += 1;
            }
            start += 1;
        }
        len += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (SplitMix64) for test digests.
    fn splitmix(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn windows_cover_len_words_evenly() {
        for len in 0..=8u32 {
            let mut per_word = [0u32; 8];
            for s in 0..8 {
                let w = window(s, len);
                assert_eq!(w.count_ones(), len);
                for (i, c) in per_word.iter_mut().enumerate() {
                    *c += (w >> i) as u32 & 1;
                }
            }
            assert!(per_word.iter().all(|&c| c == len), "len {len}: {per_word:?}");
        }
    }

    #[test]
    fn masks_have_k_bits_in_the_right_words() {
        let mut st = 1;
        for k in 1..=MAX_K {
            for _ in 0..1000 {
                let h2 = splitmix(&mut st);
                let m = scalar::masks(h2, k);
                let total: u32 = m.iter().map(|w| w.count_ones()).sum();
                if k <= 8 {
                    assert_eq!(total, k);
                    assert!(m.iter().all(|w| w.count_ones() <= 1));
                } else {
                    // Round 2 may hit a round-1 bit (probability 1/64 per word).
                    assert!(total <= k && total >= 8, "k {k}: {total}");
                    assert!(m.iter().all(|w| w.count_ones() >= 1));
                }
            }
        }
    }

    /// The AVX2 and scalar kernels set the same bits (same block bytes) and answer the same, for
    /// every k and many random digests, on a filter small enough for blocks to fill up.
    #[test]
    fn kernels_agree() {
        let all = Kernel::all_available();
        if all.len() == 1 {
            eprintln!("no AVX2 on this CPU: only the scalar kernel runs");
        }
        for kernel in all {
            agrees_with_scalar(kernel);
        }
    }

    fn agrees_with_scalar(best: Kernel) {
        let mut st = 42;
        for k in 1..=MAX_K {
            let mut a = Blocks::new(vec![Block::default(); 37]).unwrap();
            let mut b = a.clone();
            for _ in 0..3000 {
                let d = Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) };
                let qa = best.contains(&a, d, k);
                let qb = Kernel::scalar().contains(&b, d, k);
                assert_eq!(qa, qb, "k {k}: query before insert");
                let na = best.insert(&mut a, d, k);
                let nb = Kernel::scalar().insert(&mut b, d, k);
                assert_eq!(na, nb, "k {k}: insert result");
                assert_eq!(na, !qa);
                assert!(best.contains(&a, d, k) && Kernel::scalar().contains(&b, d, k));
            }
            assert!(a == b, "k {k}: the kernels set different bits");
            // Batches agree with single probes, for both kernels.
            let ds: Vec<Digest> =
                (0..5000).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
            let mut oa = vec![false; ds.len()];
            let mut ob = vec![false; ds.len()];
            best.contains_batch(&a, k, &ds, &mut oa);
            Kernel::scalar().contains_batch(&b, k, &ds, &mut ob);
            assert_eq!(oa, ob);
            for (d, o) in ds.iter().zip(&oa) {
                assert_eq!(*o, Kernel::scalar().contains(&b, *d, k));
            }
            let na = best.insert_batch(&mut a, k, &ds);
            let nb = Kernel::scalar().insert_batch(&mut b, k, &ds);
            assert_eq!(na, nb);
            assert!(a == b, "k {k}: batch inserts set different bits");
            // The per-k probes of both kernels agree with the generic kernels.
            for kernel in [best, Kernel::scalar()] {
                let p = Probe::new(kernel, k);
                let mut c = a.clone();
                for d in &ds {
                    assert_eq!(p.contains(&c, *d), Kernel::scalar().contains(&b, *d, k), "k {k}");
                }
                let more: Vec<Digest> =
                    (0..2000).map(|_| Digest { h1: splitmix(&mut st), h2: splitmix(&mut st) }).collect();
                let mut e = b.clone();
                for d in &more {
                    assert_eq!(p.insert(&mut c, *d), Kernel::scalar().insert(&mut e, *d, k), "k {k}");
                }
                assert!(c == e, "k {k}: the per-k probe ({}) set different bits", kernel.name());
            }
        }
    }
}
