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
//!   to be grouped by their top bits before counting, so the counting pass sweeps the array front
//!   to back. One pass places them (as Graf & Lemire's reference code): each bucket writes from
//!   its expected start and a full bucket spills into the next one's area, with an exact counting
//!   sort as the fallback. Items are hashed and mixed straight into their place. (An exact
//!   counting sort throughout was not adopted: it orders the keys differently, and the order
//!   decides which duplicates the test below catches, hence, with duplicates, the seed and the
//!   bytes.)
//! * **Duplicate keys**: two equal keys use the same `A` slots and cancel in the xors, so peeling
//!   would stall. When adding a key leaves a slot with count 2 and xor 0, the two keys there are
//!   equal: the second is taken out again and counted as a duplicate (Graf & Lemire's reference
//!   implementation detects duplicates the same way). This catches equal keys that are counted
//!   before a third key reaches one of their slots, which is the usual case since the bucketed order
//!   places them next to each other. Should duplicates slip through (or a slot's count overflow),
//!   peeling fails and the next attempt works on a sorted, deduplicated copy of the hashes: exact,
//!   at the cost of one sort that only adversarial input pays.
//! * **Peeling order**: a descending scan over the slots queues the slots with one key, and a
//!   FIFO queue is worked off down to a few dozen entries behind the scan after each block of
//!   slots; taking a key out queues the slots it leaves with one key. The work stays in the few
//!   segments around the scan, consecutive entries seldom depend on each other (so several keys
//!   are in flight at once, where a depth-first stack waited for each key's slots in turn), and
//!   the slots of the key a few entries on are prefetched. Which seeds work does not depend on
//!   the order; the fingerprints do, so filters built by earlier versions (breadth-first peeling)
//!   differ from today's for the same input (the format is the same: both read and answer
//!   alike). `peel/reference.rs` keeps that earlier construction as the tests' oracle for seed,
//!   shape and items.
//! * **Scratch memory** (in `bits::Storage`: 2 MiB-aligned, huge pages where the kernel gives
//!   them): keys `8·n`, peel positions `n`, slot xors `8·s`, counts `s` bytes (`s` slots), reused
//!   across attempts, plus `8·n` for the deduplicated copy if it is ever needed: about 19.2 bytes
//!   per key for a binary fuse filter (s ≈ 1.13·n), 20.5 for an xor filter (s ≈ 1.23·n),
//!   measured by `benches/probes/fuse.rs`. Besides, the peeling queue: 4 bytes per entry, grown
//!   by doubling while a cascade of peels outruns the scan; a slot is queued at most twice (by
//!   the scan, and when its count drops to one), so it holds at most `2·s` entries, and it
//!   measured 16,384 entries (64 KiB) up to n = 200,000 and 131,072 (512 KiB, 0.17 bytes per
//!   key) for an xor filter at n = 3M. Building from items hashes each item straight into its
//!   place in the key array (no vector of hashes first); a retry hashes the items again.

use crate::bits::{prefetch, Storage, Zeroable};
use crate::error::{Error, Result};
use crate::hash::{fastrange, Hasher};

#[cfg(test)]
mod reference;

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

/// Where a build's item hashes come from: a slice of them, or the items and their hasher (so
/// that the first attempt hashes each item straight into its bucketed place, without a vector
/// of hashes in between).
pub(crate) trait HashSource {
    /// Number of items (duplicates included).
    fn count(&self) -> usize;
    /// Calls `f` with every item's hash, in item order.
    fn each(&self, f: impl FnMut(u64));
}

impl HashSource for [u64] {
    fn count(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(u64)) {
        for &h in self {
            f(h);
        }
    }
}

/// Items hashed on the fly by `hasher.hash64` (the same bits, inlined for the default XXH3).
pub(crate) struct ItemHashes<'a, T> {
    pub items: &'a [T],
    pub hasher: Hasher,
}

impl<T: AsRef<[u8]>> HashSource for ItemHashes<'_, T> {
    fn count(&self) -> usize {
        self.items.len()
    }
    #[inline(always)]
    fn each(&self, mut f: impl FnMut(u64)) {
        for i in self.items {
            f(self.hasher.digest_inline(i.as_ref()).h1);
        }
    }
}

/// Scratch buffers of a build, kept across attempts.
pub(crate) struct Peeler<'a, S: HashSource + ?Sized> {
    src: &'a S,
    dedup: Option<Vec<u64>>,
    /// The keys in counting order, then the stack of peeled keys.
    keys: Option<Storage<u64>>,
    /// Which of its slots each stacked key was peeled from.
    found: Option<Storage<u8>>,
    xors: Option<Storage<u64>>,
    counts: Option<Storage<u8>>,
    /// Whether `keys`, `xors` and `counts` are still all zero (freshly allocated).
    clean: bool,
    /// The ring buffer of slots with one key waiting to be peeled (small: see `peel`).
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

/// Makes `s` hold at least `len` values; `true` if it was allocated anew (so is all zero).
/// `huge`: huge-page storage when large (the arrays read at random: slot xors and counts); else
/// a plain vector (the key and position arrays, read and written in order or in a few streams,
/// for which 4 KiB pages cost no TLB misses and a fresh huge page can cost a compaction).
fn scratch<T: Zeroable>(s: &mut Option<Storage<T>>, len: usize, huge: bool) -> Result<bool> {
    if s.as_ref().is_some_and(|s| s.len() >= len) {
        return Ok(false);
    }
    // Free the old array before allocating the larger one.
    *s = None;
    *s = Some(if huge { Storage::zeroed(len)? } else { Storage::zeroed_plain(len)? });
    Ok(true)
}

thread_local! {
    /// Phase times of the builds on this thread, when [`probe_start`] turned them on.
    static PROBE: core::cell::Cell<Option<[u64; 5]>> = const { core::cell::Cell::new(None) };
}

/// Starts recording the time a build spends in its phases (for `benches/probes/fuse.rs`; not a
/// stable API): hashing and placing the keys, counting, peeling, assigning, and allocating (and
/// zeroing) the scratch arrays.
#[doc(hidden)]
pub fn probe_start() {
    PROBE.with(|p| p.set(Some([0; 5])));
}

/// Nanoseconds spent per phase since [`probe_start`] (summed over attempts), and stops recording.
#[doc(hidden)]
pub fn probe_take() -> Option<[u64; 5]> {
    PROBE.with(|p| p.take())
}

/// A clock that reads the time only when the probe is on.
struct PhaseClock {
    on: bool,
    last: Option<std::time::Instant>,
    ns: [u64; 5],
}

impl PhaseClock {
    fn new() -> Self {
        let on = PROBE.with(|p| p.get().is_some());
        PhaseClock { on, last: on.then(std::time::Instant::now), ns: [0; 5] }
    }
    #[inline]
    fn lap(&mut self, phase: usize) {
        if let Some(t) = self.last {
            let now = std::time::Instant::now();
            self.ns[phase] += (now - t).as_nanos() as u64;
            self.last = Some(now);
        }
    }
}

impl Drop for PhaseClock {
    fn drop(&mut self) {
        if self.on {
            PROBE.with(|p| {
                if let Some(mut acc) = p.get() {
                    for (a, n) in acc.iter_mut().zip(self.ns) {
                        *a += n;
                    }
                    p.set(Some(acc));
                }
            });
        }
    }
}

/// Places the mixed keys of `src` in `keys` (all zero on entry), approximately sorted by their
/// top `bb` bits, in one pass (as Graf & Lemire's reference code): bucket `b` starts writing at
/// its expected start `b·n / 2^bb`, and a key whose bucket's area is full moves on to the next
/// bucket's (wrapping; there are exactly `n` places for `n` keys, so it ends). `false` if that
/// failed: a key mixed to 0 (an empty place is 0: one hash value in 2^64) or no bucket had room.
fn place_approx<S: HashSource + ?Sized>(
    src: &S,
    seed: u64,
    bb: u32,
    keys: &mut [u64],
    buckets: &mut [u32],
) -> bool {
    let n = keys.len();
    let shift = 64 - bb;
    let nb = 1usize << bb;
    for (b, start) in buckets.iter_mut().enumerate() {
        *start = ((b as u64 * n as u64) >> bb) as u32;
    }
    let mut ok = true;
    src.each(|h| {
        if !ok {
            return;
        }
        let x = mix(h, seed);
        ok &= x != 0;
        let mut b = (x >> shift) as usize;
        let mut tries = 0;
        // The place is read in the line the write goes to: no extra memory traffic.
        while keys.get(buckets[b] as usize).is_none_or(|&k| k != 0) {
            b = (b + 1) & (nb - 1);
            tries += 1;
            if tries > nb {
                // No bucket has room at its write position (not seen in practice): the exact
                // sort always works.
                ok = false;
                return;
            }
        }
        let at = &mut buckets[b];
        keys[*at as usize] = x;
        *at += 1;
    });
    ok
}

/// Places the mixed keys of `src` in `keys` exactly sorted by their top `bb` bits (a counting
/// sort: two more passes over the source); the fallback of [`place_approx`].
fn place_exact<S: HashSource + ?Sized>(src: &S, seed: u64, bb: u32, keys: &mut [u64], buckets: &mut [u32]) {
    let shift = 64 - bb;
    buckets.fill(0);
    src.each(|h| buckets[(mix(h, seed) >> shift) as usize + 1] += 1);
    for i in 1..buckets.len() {
        buckets[i] += buckets[i - 1];
    }
    src.each(|h| {
        let x = mix(h, seed);
        let b = &mut buckets[(x >> shift) as usize];
        keys[*b as usize] = x;
        *b += 1;
    });
}

/// Takes the key of slot `s` out if `s` still has one key: stacks it (key and which of its slots
/// it was taken from) and removes it from all its slots, queueing every slot this leaves with one
/// key (branch-free: write, advance only if the count is 1).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn take<const A: usize, L: Layout<A>>(
    layout: &L,
    s: usize,
    counts: &mut [u8],
    xors: &mut [u64],
    keys: &mut [u64],
    found: &mut [u8],
    stacked: &mut usize,
    q: &mut [u32],
    tail: &mut usize,
) {
    let c = counts[s];
    if c >> 2 != 1 {
        // Its key was taken out meanwhile from another slot (count 0).
        return;
    }
    let x = xors[s];
    keys[*stacked] = x;
    found[*stacked] = c & 3;
    *stacked += 1;
    let mask = q.len() - 1;
    // The own slot too: there the update gives count 0 and xor 0, so it is not queued again
    // and a second entry of it in the queue is skipped.
    for (j, t) in layout.positions(x).into_iter().enumerate() {
        let ct = (counts[t] ^ j as u8).wrapping_sub(4);
        counts[t] = ct;
        xors[t] ^= x;
        q[*tail & mask] = t as u32;
        *tail += (ct >> 2 == 1) as usize;
    }
}

/// Doubles the ring buffer `q`, keeping the entries `head..tail` at their (masked) places.
fn grow(q: &mut Vec<u32>, head: usize, tail: usize) -> Result<()> {
    let old = q.len();
    let mut next = Vec::new();
    alloc(&mut next, old * 2)?;
    for i in head..tail {
        next[i & (old * 2 - 1)] = q[i & (old - 1)];
    }
    *q = next;
    Ok(())
}

/// Entries the peeling queue keeps before it takes the front one (see [`peel`]).
const LAG: usize = 32;
/// How far ahead of the front of the queue the slots of an entry's key are prefetched.
const PREFETCH: usize = 16;
/// Slots scanned at a time.
const BLOCK: usize = 64;

/// Peels the keys counted in `counts` and `xors`, stacking them in `keys` and `found` in the
/// order they are taken out; returns how many.
///
/// A descending scan over the slots queues every slot with one key (branch-free), `BLOCK` slots
/// at a time, and the queue (a ring buffer, first in first out) is worked off down to `LAG`
/// entries after each block, so the work stays among the few segments around the scan. Taking a
/// key out queues the slots it leaves with one key at the back. Consecutive entries of a FIFO
/// seldom depend on each other, so the processor overlaps the work of several keys (a stack,
/// depth first, chains them: each step waits for the slots of the key before), and the slots
/// of the key `PREFETCH` entries on are fetched while the front one is taken out. A slot can
/// be queued twice (by the scan and when a key is taken out) or lose its key before its turn;
/// its count is 0 then and it is skipped. Every slot that has one key at some point is queued
/// after that point, so the peeling is complete: the keys left are the 2-core of the hypergraph,
/// whatever the order, and the order changes only the fingerprints, not which seeds work.
fn peel<const A: usize, L: Layout<A>>(
    layout: &L,
    counts: &mut [u8],
    xors: &mut [u64],
    keys: &mut [u64],
    found: &mut [u8],
    queue: &mut Vec<u32>,
) -> Result<usize> {
    if queue.len() < 4 * BLOCK {
        alloc(queue, 4 * BLOCK)?;
    }
    let slots = counts.len();
    let (mut head, mut tail, mut stacked) = (0usize, 0usize, 0usize);
    let mut end = slots;
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        if tail - head + BLOCK > queue.len() {
            grow(queue, head, tail)?;
        }
        let mask = queue.len() - 1;
        for s in (start..end).rev() {
            queue[tail & mask] = s as u32;
            tail += (counts[s] >> 2 == 1) as usize;
        }
        // The last block drains the queue.
        let keep = if start == 0 { 0 } else { LAG };
        while tail - head > keep {
            if tail - head + A > queue.len() {
                grow(queue, head, tail)?;
            }
            let mask = queue.len() - 1;
            if tail - head > PREFETCH {
                // Only a hint: the entry may lose its key before its turn (count and xor 0).
                let ahead = queue[(head + PREFETCH) & mask] as usize;
                for u in layout.positions(xors[ahead]) {
                    prefetch(xors.as_ptr().wrapping_add(u));
                    prefetch(counts.as_ptr().wrapping_add(u));
                }
            }
            let s = queue[head & mask] as usize;
            head += 1;
            take(layout, s, counts, xors, keys, found, &mut stacked, queue, &mut tail);
        }
        end = start;
    }
    Ok(stacked)
}

impl<'a, S: HashSource + ?Sized> Peeler<'a, S> {
    /// Starts a build of the hashes of `src` (duplicates allowed).
    pub(crate) fn new(src: &'a S) -> Self {
        Peeler {
            src,
            dedup: None,
            keys: None,
            found: None,
            xors: None,
            counts: None,
            clean: false,
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
        let mut clock = PhaseClock::new();
        let n = self.src.count();
        let mut fresh = scratch(&mut self.keys, n, false)?;
        scratch(&mut self.found, n, false)?;
        fresh &= scratch(&mut self.xors, slots, true)?;
        fresh &= scratch(&mut self.counts, slots, true)?;
        self.clean = fresh;
        alloc(fps, slots)?;
        clock.lap(4);
        drop(clock);
        for _ in 0..attempts {
            let seed = attempt_seed(self.next_attempt);
            self.next_attempt += 1;
            let result = match self.dedup.take() {
                Some(d) => {
                    let r = self.attempt(d.as_slice(), layout, seed, fps);
                    self.dedup = Some(d);
                    r
                }
                None => self.attempt(self.src, layout, seed, fps),
            };
            if let Some(distinct) = result? {
                return Ok(Some(Peeled { seed, distinct }));
            }
            if self.dedup.is_none() {
                // Peeling failed: maybe duplicates the cheap check missed. From now on work on
                // a sorted, deduplicated copy (exact).
                let n = self.src.count();
                let mut d: Vec<u64> = Vec::new();
                d.try_reserve_exact(n).map_err(|_| Error::OutOfMemory { bytes: n * 8 })?;
                self.src.each(|h| d.push(h));
                d.sort_unstable();
                d.dedup();
                self.dedup = Some(d);
            }
        }
        Ok(None)
    }

    /// One attempt with one seed on the hashes of `src`: `Some(distinct keys)` on success.
    fn attempt<T: HashSource + ?Sized, F: Fingerprint, const A: usize, L: Layout<A>>(
        &mut self,
        src: &T,
        layout: &L,
        seed: u64,
        fps: &mut [F],
    ) -> Result<Option<usize>> {
        let mut clock = PhaseClock::new();
        let n = src.count();
        let slots = layout.slots();
        let clean = core::mem::replace(&mut self.clean, false);
        let (Some(keys), Some(found), Some(xors), Some(counts)) =
            (&mut self.keys, &mut self.found, &mut self.xors, &mut self.counts)
        else {
            unreachable!("run allocates the scratch arrays");
        };
        let keys = &mut keys[..n];
        let found = &mut found[..n];
        let xors = &mut xors[..slots];
        let counts = &mut counts[..slots];
        // 1. The keys, in counting order, mixed (and for items hashed) straight into place.
        let bb = layout.bucket_bits();
        if bb == 0 {
            let mut i = 0;
            src.each(|h| {
                keys[i] = mix(h, seed);
                i += 1;
            });
        } else {
            alloc(&mut self.buckets, (1usize << bb) + 1)?;
            if !clean {
                keys.fill(0);
            }
            if !place_approx(src, seed, bb, keys, &mut self.buckets) {
                place_exact(src, seed, bb, keys, &mut self.buckets);
            }
        }
        clock.lap(0);
        // 2. Counts and xors per slot, taking duplicates out.
        if !clean {
            xors.fill(0);
            counts.fill(0);
        }
        let mut duplicates = 0usize;
        // Fetch the lines of the slots of a key a few keys ahead: keys in item order (xor filter)
        // hit random slots; bucketed keys (binary fuse) sweep the array, but meet each line of
        // the segments after the first one's at random (the offsets are hashed), a miss each.
        // Not for arrays that stay in cache.
        let ahead = if bb == 0 { 16 } else { 32 };
        let prefetch_ahead = slots >= 1 << 16;
        for i in 0..n {
            if prefetch_ahead && i + ahead < n {
                for s in layout.positions(keys[i + ahead]) {
                    prefetch(xors.as_ptr().wrapping_add(s));
                    prefetch(counts.as_ptr().wrapping_add(s));
                }
            }
            let x = keys[i];
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
        clock.lap(1);
        // 3. Peel (see `peel`).
        let stacked = peel(layout, counts, xors, keys, found, &mut self.queue)?;
        clock.lap(2);
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
        clock.lap(3);
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

    use crate::filters::binary_fuse::{Arity, BinaryFuse};
    use crate::hash::Hasher;
    use crate::Xor8;

    /// Sizes to test: tiny ones, both sides of every change of the segment length (3- and
    /// 4-wise) up to 10^5, of the bucket count, and 10^5.
    fn sizes() -> Vec<usize> {
        let mut v: Vec<usize> = (0..=40).collect();
        v.extend([63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 1000, 1023, 1024, 1025, 4095, 4096, 4097]);
        for k in 2..=12 {
            for base in [3.33f64.powf(k as f64 - 2.25), 2.91f64.powf(k as f64 + 0.5)] {
                let b = base.ceil() as usize;
                if b <= 100_000 {
                    v.extend([b.saturating_sub(1), b, b + 1]);
                }
            }
        }
        v.push(100_000);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// `n` hashes: distinct ones (`dup = 0`), or with duplicates of kind `dup`: 1 a tenth repeated
    /// at random places, 2 every key twice in a row, 3 the first half repeated as the second,
    /// 4 all equal.
    fn hashes(n: usize, salt: u64, dup: u32) -> Vec<u64> {
        let distinct: Vec<u64> = (0..n as u64).map(|i| mix(i, salt)).collect();
        match dup {
            0 => distinct,
            1 => (0..n)
                .map(|i| {
                    if mix(i as u64, 99) % 10 == 0 {
                        distinct[(mix(i as u64, 98) as usize) % n]
                    } else {
                        distinct[i]
                    }
                })
                .collect(),
            2 => (0..n).map(|i| distinct[i / 2]).collect(),
            3 => (0..n).map(|i| distinct[i % n.div_ceil(2).max(1)]).collect(),
            _ => vec![distinct.first().copied().unwrap_or(5); n],
        }
    }

    /// The filter of `h` has the reference construction's seed, shape and item count (peeling
    /// succeeds for the same seeds in any order, and duplicates are found in the same counting
    /// pass), and it is valid: every key's fingerprint is the xor of its slots (`contains_hash`
    /// compares exactly that). Its fingerprints differ from the reference's (another peeling
    /// order).
    fn check_fuse<F: Fingerprint>(h: &[u64], arity: Arity, what: &str) {
        let want = reference::binary_fuse::<F>(h, arity.get()).unwrap();
        let got = BinaryFuse::<F>::from_hashes_with(h, arity, Hasher::default()).unwrap();
        let shape = (got.segment_length() as u64, got.segment_count() as u64);
        let items = crate::traits::Filter::len(&got) as u64;
        let bits = F::BITS;
        let n = h.len();
        assert_eq!(
            (got.seed(), shape, got.fingerprints().len(), items),
            (want.seed, want.shape, want.fingerprints.len(), want.items),
            "{what}: n = {n}, arity {arity:?}, {bits} bits: not the reference's seed, shape or items",
        );
        let missing = h.iter().filter(|&&x| !crate::traits::Filter::contains_hash(&got, x)).count();
        assert_eq!(
            missing, 0,
            "{what}: n = {n}, arity {arity:?}, {bits} bits: keys whose slots do not xor to them"
        );
    }

    fn check_xor(h: &[u64], what: &str) {
        let want = reference::xor8(h).unwrap();
        let got = Xor8::from_hashes_with(h, Hasher::default()).unwrap();
        let n = h.len();
        assert_eq!(
            (got.seed(), got.fingerprints().len(), crate::traits::Filter::len(&got) as u64),
            (want.seed, want.fingerprints.len(), want.items),
            "{what}: n = {n}, xor8: not the reference's seed, shape or items"
        );
        let missing = h.iter().filter(|&&x| !crate::traits::Filter::contains_hash(&got, x)).count();
        assert_eq!(missing, 0, "{what}: n = {n}, xor8: keys whose slots do not xor to them");
    }

    #[test]
    fn grow_keeps_the_queue_in_order() {
        // Entries 5..13 of a ring of 8 wrap around; doubled, they read back in order.
        let mut q: Vec<u32> = (0..8).map(|i| if i < 5 { i + 8 } else { i }).collect();
        grow(&mut q, 5, 13).unwrap();
        assert_eq!(q.len(), 16);
        assert_eq!((5..13).map(|i| q[i & 15]).collect::<Vec<_>>(), (5..13).collect::<Vec<u32>>());
    }

    #[test]
    fn valid_and_same_seeds_as_reference() {
        for n in sizes() {
            for dup in 0..=4 {
                if dup == 4 && n > 1000 {
                    continue;
                }
                let h = hashes(n, 17 + n as u64, dup);
                let what = format!("duplicates of kind {dup}");
                check_fuse::<u8>(&h, Arity::Three, &what);
                check_fuse::<u8>(&h, Arity::Four, &what);
                check_fuse::<u16>(&h, Arity::Three, &what);
                check_fuse::<u16>(&h, Arity::Four, &what);
                check_xor(&h, &what);
            }
        }
    }

    #[test]
    fn valid_and_same_seeds_as_reference_from_items() {
        // Items hashed while placing give the filter of their hashes (with repeated items).
        for n in [0usize, 1, 7, 1000, 30_000] {
            let items: Vec<[u8; 8]> =
                (0..n as u64).map(|i| (i % (n as u64 * 9 / 10).max(1)).to_le_bytes()).collect();
            let hasher = Hasher::default();
            let h: Vec<u64> = items.iter().map(|i| hasher.hash64(i)).collect();
            for arity in [Arity::Three, Arity::Four] {
                let a = BinaryFuse::<u8>::build_with(&items, arity, hasher).unwrap();
                let b = BinaryFuse::<u8>::from_hashes_with(&h, arity, hasher).unwrap();
                assert_eq!(a, b, "n = {n}");
                check_fuse::<u8>(&h, arity, "items");
            }
            let a = <Xor8 as crate::StaticFilter>::build_with_hasher(&items, hasher).unwrap();
            assert_eq!(a, Xor8::from_hashes_with(&h, hasher).unwrap(), "n = {n}");
            check_xor(&h, "items");
        }
    }

    #[test]
    fn valid_and_same_seeds_as_reference_large() {
        // Large enough for huge-page scratch storage and the xor filter's prefetching.
        for n in [300_000usize, 1_000_000] {
            let h = hashes(n, 5, 0);
            check_fuse::<u8>(&h, Arity::Three, "large");
            check_fuse::<u16>(&h, Arity::Four, "large");
            check_xor(&h, "large");
            let h = hashes(n, 6, 1);
            check_fuse::<u8>(&h, Arity::Four, "large, duplicates");
            check_xor(&h, "large, duplicates");
        }
    }
}
