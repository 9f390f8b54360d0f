//! Construction by hypergraph peeling, shared by the xor and binary fuse filters.
//!
//! Every key `x` (the item's 64-bit hash mixed with the attempt's seed) names `A` slots of a
//! fingerprint array, one in each of `A` disjoint ranges. The filter stores in each slot a value
//! such that the xor of a key's `A` slots is its fingerprint. Peeling (Botelho, Pagh & Ziviani
//! 2007; Graf & Lemire, "Xor filters", JEA 2020, Algorithm 3) finds an order in which to assign
//! them: repeatedly take a slot that exactly one remaining key uses, push (key, slot) on a stack
//! and remove the key; then pop the stack in reverse and give each key's own slot the value that
//! makes its xor right. It succeeds when every key is pushed.
//!
//! Bookkeeping per slot is a count and the xor of the keys using it (so the one key of a slot of
//! count 1 is read off directly), packed as in Graf & Lemire 2022 §4: `count << 2 | idx`, where
//! `idx` is the xor of the positions (0..A) at which the slot's keys use it.
//!
//! * **Cache-friendly order** (binary fuse, Graf & Lemire 2022 §5): a layout may ask for the keys
//!   to be grouped by their top bits before counting; a counting sort (no comparison sort) groups
//!   them by the segment of their first slot, so the counting pass sweeps the array front to back.
//! * **Duplicate keys**: two equal keys use the same `A` slots and cancel in the xors, so peeling
//!   would stall. When adding a key leaves a slot with count 2 and xor 0, the two keys there are
//!   equal: the second is taken out again and counted as a duplicate (Graf & Lemire's reference
//!   implementation detects duplicates the same way). This catches equal keys that are counted
//!   before a third key reaches one of their slots, which is the usual case since the bucketed order
//!   places them next to each other. Should duplicates slip through (or a slot's count overflow),
//!   peeling fails and the next attempt works on a sorted, deduplicated copy of the hashes: exact,
//!   at the cost of one sort that only adversarial input pays.
//! * **Scratch memory**: keys `8·n`, stack positions `n`, slot xors `8·s`, counts `s`, queue `4·s`
//!   bytes (`s` slots), plus `8·n` for the deduplicated copy if it is ever needed: about
//!   23.7 bytes per key for a binary fuse filter (s ≈ 1.13·n), 26.3 for an xor filter (s ≈ 1.23·n),
//!   and 4 bytes per segment of bucket counters. Building from items (not hashes) adds the `8·n`
//!   bytes of the hashes.

use crate::error::{Error, Result};
use crate::hash::fastrange;

/// Fingerprint types of the xor-family filters: `u8` and `u16`.
pub trait Fingerprint:
    Copy + Default + Eq + core::ops::BitXor<Output = Self> + core::fmt::Debug + private::Sealed
{
    /// Bits of a fingerprint.
    const BITS: u32;
    /// The fingerprint of a mixed key: its low bits folded with its high half.
    fn from_key(x: u64) -> Self;
    /// Appends the little-endian bytes.
    fn write_le(self, out: &mut Vec<u8>);
    /// Reads from exactly `BITS / 8` little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
}

mod private {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
}

impl Fingerprint for u8 {
    const BITS: u32 = 8;
    #[inline(always)]
    fn from_key(x: u64) -> Self {
        (x ^ (x >> 32)) as u8
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self);
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0]
    }
}

impl Fingerprint for u16 {
    const BITS: u32 = 16;
    #[inline(always)]
    fn from_key(x: u64) -> Self {
        (x ^ (x >> 32)) as u16
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn read_le(bytes: &[u8]) -> Self {
        u16::from_le_bytes([bytes[0], bytes[1]])
    }
}

/// Mixes an item hash with an attempt seed: the MurmurHash3 64-bit finaliser of `h + seed`, a
/// bijection of `h` for a fixed seed (so distinct hashes stay distinct keys).
#[inline(always)]
pub(crate) const fn mix(h: u64, seed: u64) -> u64 {
    let mut x = h.wrapping_add(seed);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// The seed of attempt `i`: a SplitMix64 output (Steele, Lea & Flood 2014), so successive
/// attempts use unrelated seeds, and the same input always gets the same seed.
pub(crate) const fn attempt_seed(i: u32) -> u64 {
    let mut z = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where a key's `A` slots are.
pub(crate) trait Layout<const A: usize> {
    /// Length of the fingerprint array.
    fn slots(&self) -> usize;
    /// The key's slots, one per range, each `< slots()`, pairwise distinct.
    fn positions(&self, x: u64) -> [usize; A];
    /// If nonzero, keys are counted in order of their top `bucket_bits` bits (which must order
    /// them by their first slot).
    fn bucket_bits(&self) -> u32;
}

/// Slots of the xor filter (Graf & Lemire 2020, §3): three blocks of `block` slots, the `i`-th
/// slot chosen by the key rotated by `21·i` bits, reduced by a multiply-shift.
#[derive(Debug, Clone, Copy)]
pub(crate) struct XorLayout {
    pub block: u64,
}

impl Layout<3> for XorLayout {
    fn slots(&self) -> usize {
        (self.block * 3) as usize
    }
    #[inline(always)]
    fn positions(&self, x: u64) -> [usize; 3] {
        xor_positions(x, self.block)
    }
    fn bucket_bits(&self) -> u32 {
        0
    }
}

/// See [`XorLayout`].
#[inline(always)]
pub(crate) fn xor_positions(x: u64, block: u64) -> [usize; 3] {
    [
        fastrange(x, block) as usize,
        (fastrange(x.rotate_left(21), block) + block) as usize,
        (fastrange(x.rotate_left(42), block) + 2 * block) as usize,
    ]
}

/// Slots of a binary fuse filter (Graf & Lemire 2022, §3): the array is cut into segments of
/// `len` (a power of two) slots; a key's first slot is anywhere in the first `count` segments
/// (multiply-shift of its top bits), its `j`-th slot is in the `j`-th following segment, at an
/// offset xored with `len - 1` bits of the key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FuseLayout {
    /// Segment length, a power of two.
    pub len: u32,
    /// Number of segments a first slot can fall in.
    pub count: u32,
}

impl FuseLayout {
    #[inline(always)]
    pub(crate) fn positions<const A: usize>(len: u32, count_len: u64, x: u64) -> [usize; A] {
        let mask = (len - 1) as u64;
        let h0 = fastrange(x, count_len);
        let l = len as u64;
        let mut p = [0usize; A];
        p[0] = h0 as usize;
        p[1] = ((h0 + l) ^ ((x >> 18) & mask)) as usize;
        p[2] = ((h0 + 2 * l) ^ (x & mask)) as usize;
        if A == 4 {
            // A third independent offset: the top bits of an odd-constant product depend on
            // every bit of x, not only the top bits the first slot already used.
            let y = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            p[3] = ((h0 + 3 * l) ^ ((y >> 46) & mask)) as usize;
        }
        p
    }
}

impl<const A: usize> Layout<A> for FuseLayout {
    fn slots(&self) -> usize {
        (self.count as usize + A - 1) * self.len as usize
    }
    #[inline(always)]
    fn positions(&self, x: u64) -> [usize; A] {
        FuseLayout::positions::<A>(self.len, self.count as u64 * self.len as u64, x)
    }
    fn bucket_bits(&self) -> u32 {
        // One bucket per segment or so (as the reference implementation): keys of a bucket have
        // their first slot in one segment, so the counting pass moves through the array front to
        // back, while the scatter into buckets writes to few enough places to stay in cache.
        let segments = (self.count as u64).max(2);
        (64 - (segments - 1).leading_zeros()).min(20)
    }
}

/// Scratch buffers of a build, kept across attempts.
pub(crate) struct Peeler<'a> {
    hashes: &'a [u64],
    dedup: Option<Vec<u64>>,
    keys: Vec<u64>,
    found: Vec<u8>,
    xors: Vec<u64>,
    counts: Vec<u8>,
    queue: Vec<u32>,
    buckets: Vec<u32>,
    next_attempt: u32,
}

/// What a successful build produced.
pub(crate) struct Peeled {
    /// The seed mixed into the hashes.
    pub seed: u64,
    /// Distinct keys.
    pub distinct: usize,
}

fn alloc<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> Result<()> {
    v.clear();
    if v.capacity() < len {
        v.try_reserve_exact(len - v.len())
            .map_err(|_| Error::OutOfMemory { bytes: len.saturating_mul(core::mem::size_of::<T>()) })?;
    }
    v.resize(len, T::default());
    Ok(())
}

impl<'a> Peeler<'a> {
    /// Starts a build of `hashes` (duplicates allowed).
    pub(crate) fn new(hashes: &'a [u64]) -> Self {
        Peeler {
            hashes,
            dedup: None,
            keys: Vec::new(),
            found: Vec::new(),
            xors: Vec::new(),
            counts: Vec::new(),
            queue: Vec::new(),
            buckets: Vec::new(),
            next_attempt: 0,
        }
    }

    /// Seeds tried so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.next_attempt
    }

    /// Tries up to `attempts` seeds with `layout`; on success `fps` (of `layout.slots()` values)
    /// holds the fingerprints.
    pub(crate) fn run<F: Fingerprint, const A: usize, L: Layout<A>>(
        &mut self,
        layout: &L,
        attempts: u32,
        fps: &mut Vec<F>,
    ) -> Result<Option<Peeled>> {
        let slots = layout.slots();
        if slots > u32::MAX as usize {
            return Err(Error::CapacityExceeded {
                requested_bytes: slots as u128 * 14,
                limit_bytes: u32::MAX as u128 * 14,
            });
        }
        let n = self.hashes.len();
        alloc(&mut self.keys, n)?;
        alloc(&mut self.found, n)?;
        alloc(&mut self.xors, slots)?;
        alloc(&mut self.counts, slots)?;
        // One entry more than slots: the branch-free pushes below write before they know whether
        // the entry counts, and at most `slots` entries are ever live.
        alloc(&mut self.queue, slots + 1)?;
        alloc(fps, slots)?;
        for _ in 0..attempts {
            let seed = attempt_seed(self.next_attempt);
            self.next_attempt += 1;
            if let Some(distinct) = self.attempt(layout, seed, fps)? {
                return Ok(Some(Peeled { seed, distinct }));
            }
            if self.dedup.is_none() {
                // Peeling failed: maybe duplicates the cheap check missed. From now on work on
                // a sorted, deduplicated copy (exact).
                let mut d: Vec<u64> = Vec::new();
                d.try_reserve_exact(self.hashes.len())
                    .map_err(|_| Error::OutOfMemory { bytes: self.hashes.len() * 8 })?;
                d.extend_from_slice(self.hashes);
                d.sort_unstable();
                d.dedup();
                self.dedup = Some(d);
            }
        }
        Ok(None)
    }

    /// One attempt with one seed: `Some(distinct keys)` on success.
    fn attempt<F: Fingerprint, const A: usize, L: Layout<A>>(
        &mut self,
        layout: &L,
        seed: u64,
        fps: &mut [F],
    ) -> Result<Option<usize>> {
        let src: &[u64] = self.dedup.as_deref().unwrap_or(self.hashes);
        let n = src.len();
        let keys = &mut self.keys[..n];
        // 1. The keys, in counting order.
        let bb = layout.bucket_bits();
        if bb == 0 {
            for (k, &h) in keys.iter_mut().zip(src) {
                *k = mix(h, seed);
            }
        } else {
            // Approximately sorted by bucket in one pass (as Graf & Lemire's reference code):
            // bucket `b` starts writing at its expected start `b·n / 2^bb`, and a key whose
            // bucket's area is full moves on to the next bucket's (wrapping; there are exactly
            // `n` places for `n` keys, so it ends). An empty place is 0, so a key that mixes to
            // 0 (one hash value in 2^64) would be lost: then fall back to an exact counting sort.
            let shift = 64 - bb;
            let nb = 1usize << bb;
            alloc(&mut self.buckets, nb + 1)?;
            for (b, start) in self.buckets.iter_mut().enumerate() {
                *start = ((b as u64 * n as u64) >> bb) as u32;
            }
            keys.fill(0);
            let mut exact = false;
            'keys: for &h in src {
                let x = mix(h, seed);
                exact |= x == 0;
                let mut b = (x >> shift) as usize;
                let mut tries = 0;
                while keys.get(self.buckets[b] as usize).is_none_or(|&k| k != 0) {
                    b = (b + 1) & (nb - 1);
                    tries += 1;
                    if tries > nb {
                        // No bucket has room at its write position (not seen in practice):
                        // the exact sort below always works.
                        exact = true;
                        break 'keys;
                    }
                }
                let at = &mut self.buckets[b];
                keys[*at as usize] = x;
                *at += 1;
            }
            if exact {
                self.buckets.fill(0);
                for &h in src {
                    self.buckets[(mix(h, seed) >> shift) as usize + 1] += 1;
                }
                for i in 1..self.buckets.len() {
                    self.buckets[i] += self.buckets[i - 1];
                }
                for &h in src {
                    let x = mix(h, seed);
                    let b = &mut self.buckets[(x >> shift) as usize];
                    keys[*b as usize] = x;
                    *b += 1;
                }
            }
        }
        // 2. Counts and xors per slot, taking duplicates out.
        self.xors.fill(0);
        self.counts.fill(0);
        let (xors, counts) = (&mut self.xors[..], &mut self.counts[..]);
        let mut duplicates = 0usize;
        for &x in keys.iter() {
            let p = layout.positions(x);
            let mut overflow = false;
            for (j, &s) in p.iter().enumerate() {
                overflow |= counts[s] >= 0xfc;
                counts[s] = counts[s].wrapping_add(4) ^ j as u8;
                xors[s] ^= x;
            }
            if overflow {
                // More than 63 keys on one slot: not a random hash set. Give up this seed.
                return Ok(None);
            }
            // A duplicate of an earlier key leaves xor 0 on all its slots (if no third key
            // shares them): test the cheap necessary condition first.
            let all = p.iter().fold(u64::MAX, |a, &s| a & xors[s]);
            if all == 0 && p.iter().any(|&s| counts[s] >> 2 == 2 && xors[s] == 0) {
                for (j, &s) in p.iter().enumerate() {
                    counts[s] = (counts[s] ^ j as u8).wrapping_sub(4);
                    xors[s] ^= x;
                }
                duplicates += 1;
            }
        }
        // 3. Peel: slots used by one key, then the slots that this frees. The queue is a stack
        // whose pushes are branch-free (write the slot, advance only if its count is 1): which
        // slots qualify is data-dependent and would mispredict often (as in Graf & Lemire's
        // reference code).
        let queue = &mut self.queue[..];
        let mut qlen = 0usize;
        for (s, &c) in counts.iter().enumerate() {
            queue[qlen] = s as u32;
            qlen += (c >> 2 == 1) as usize;
        }
        let mut stacked = 0usize;
        let found = &mut self.found[..n];
        while qlen > 0 {
            qlen -= 1;
            let s = queue[qlen] as usize;
            if counts[s] >> 2 != 1 {
                continue;
            }
            let x = xors[s];
            let idx = counts[s] & 3;
            // The stack reuses `keys`: the keys now live in `xors`, and `stacked` never
            // overtakes the keys counted.
            keys[stacked] = x;
            found[stacked] = idx;
            stacked += 1;
            // Take the key out of all its slots, its own included: there the update gives count
            // 0 and xor 0 (`(4 | idx) ^ idx - 4 = 0`, `x ^ x = 0`), so the own slot is neither
            // special-cased (an unpredictable branch) nor pushed.
            let p = layout.positions(x);
            for (j, &t) in p.iter().enumerate() {
                counts[t] = (counts[t] ^ j as u8).wrapping_sub(4);
                xors[t] ^= x;
                queue[qlen] = t as u32;
                qlen += (counts[t] >> 2 == 1) as usize;
            }
        }
        if stacked + duplicates != n {
            return Ok(None);
        }
        // 4. Assign in reverse peeling order.
        fps.fill(F::default());
        for i in (0..stacked).rev() {
            let x = keys[i];
            let p = layout.positions(x);
            let own = p[found[i] as usize];
            let mut v = F::from_key(x);
            for &t in &p {
                v = v ^ fps[t];
            }
            // fps[own] is still 0 here (each slot is assigned once, by its peeled key), so the
            // loop above xored only the other slots.
            fps[own] = v;
        }
        Ok(Some(stacked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_is_a_bijection_on_a_sample() {
        let mut v: Vec<u64> = (0..100_000u64).map(|h| mix(h, 12345)).collect();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), 100_000);
        assert_ne!(attempt_seed(0), attempt_seed(1));
    }

    #[test]
    fn fuse_positions_are_in_range_and_distinct() {
        let l = FuseLayout { len: 1024, count: 50 };
        for i in 0..100_000u64 {
            let x = mix(i, 1);
            let p3: [usize; 3] = Layout::<3>::positions(&l, x);
            let p4: [usize; 4] = Layout::<4>::positions(&l, x);
            assert!(p3.iter().all(|&s| s < Layout::<3>::slots(&l)));
            assert!(p4.iter().all(|&s| s < Layout::<4>::slots(&l)));
            for j in 1..4 {
                assert_eq!(p4[j] / 1024, p4[0] / 1024 + j, "slot j in the j-th next segment");
            }
        }
    }
}
