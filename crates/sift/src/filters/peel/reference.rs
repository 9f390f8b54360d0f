//! The construction of earlier versions (breadth-first queue of all degree-1 slots, keys hashed
//! into a separate vector first), kept unchanged as the oracle of the tests: since the current
//! construction peels in another order (a scan over the slots), it must find the same seed,
//! shape and item count (which seeds work does not depend on the peeling order, and duplicates
//! are taken out in the same counting pass) and a valid filter, not the same fingerprints.

use super::{attempt_seed, mix, Fingerprint, Layout, Peeled};
use crate::error::{Error, Result};

/// Scratch buffers of a build, kept across attempts.
pub(crate) struct RefPeeler<'a> {
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

fn alloc<T: Copy + Default>(v: &mut Vec<T>, len: usize) -> Result<()> {
    v.clear();
    if v.capacity() < len {
        v.try_reserve_exact(len - v.len())
            .map_err(|_| Error::OutOfMemory { bytes: len.saturating_mul(core::mem::size_of::<T>()) })?;
    }
    v.resize(len, T::default());
    Ok(())
}

impl<'a> RefPeeler<'a> {
    /// Starts a build of `hashes` (duplicates allowed).
    pub(crate) fn new(hashes: &'a [u64]) -> Self {
        RefPeeler {
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

/// What a reference build produced: the fields that go into the file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct RefFilter<F> {
    pub seed: u64,
    /// Segment length and count (binary fuse) or block length and 0 (xor).
    pub shape: (u64, u64),
    pub fingerprints: Vec<F>,
    pub items: u64,
}

/// `BinaryFuse::from_hashes_with` as it was (same sizes, same retries), on [`RefPeeler`].
pub(crate) fn binary_fuse<F: Fingerprint>(hashes: &[u64], arity: u32) -> Result<RefFilter<F>> {
    use super::FuseLayout;
    use crate::math;
    let n = hashes.len();
    if n == 0 {
        return Ok(RefFilter { seed: 0, shape: (0, 0), fingerprints: Vec::new(), items: 0 });
    }
    let a = arity;
    let nf = n as f64;
    let len = math::fuse_segment_length(a, nf);
    let capacity = (nf * math::fuse_size_factor(a, nf)).ceil();
    let count = ((capacity / len as f64).ceil() - (a - 1) as f64).max(1.0);
    let mut layout = FuseLayout { len, count: count as u32 };
    let mut peeler = RefPeeler::new(hashes);
    let mut fps: Vec<F> = Vec::new();
    for _ in 0..8 {
        let peeled = match arity {
            3 => peeler.run::<F, 3, _>(&layout, 16, &mut fps)?,
            _ => peeler.run::<F, 4, _>(&layout, 16, &mut fps)?,
        };
        if let Some(p) = peeled {
            return Ok(RefFilter {
                seed: p.seed,
                shape: (layout.len as u64, layout.count as u64),
                fingerprints: fps,
                items: p.distinct as u64,
            });
        }
        layout.count += (layout.count / 16).max(1);
    }
    Err(Error::ConstructionFailed { attempts: peeler.attempts(), reason: "reference" })
}

/// `Xor8::from_hashes_with` as it was, on [`RefPeeler`].
pub(crate) fn xor8(hashes: &[u64]) -> Result<RefFilter<u8>> {
    use super::XorLayout;
    let n = hashes.len();
    if n == 0 {
        return Ok(RefFilter { seed: 0, shape: (0, 0), fingerprints: Vec::new(), items: 0 });
    }
    let capacity = (1.23 * n as f64).floor() + 32.0;
    let mut block = (capacity / 3.0).ceil() as u64;
    let mut peeler = RefPeeler::new(hashes);
    let mut fps: Vec<u8> = Vec::new();
    for _ in 0..8 {
        let layout = XorLayout { block };
        if let Some(p) = peeler.run::<u8, 3, _>(&layout, 16, &mut fps)? {
            return Ok(RefFilter {
                seed: p.seed,
                shape: (block, 0),
                fingerprints: fps,
                items: p.distinct as u64,
            });
        }
        block += block / 16 + 1;
    }
    Err(Error::ConstructionFailed { attempts: peeler.attempts(), reason: "reference" })
}
