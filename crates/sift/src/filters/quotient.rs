//! Quotient filter: a compact hash table of `r`-bit remainders, with deletes, counts, merge and
//! resize from the stored fingerprints.
//!
//! Bender, Farach-Colton, Johnson, Kraner, Kuszmaul, Medjedovic, Montes, Shetty, Spillane &
//! Zadok, "Don't thrash: how to cache your hash on flash", VLDB 2012 (the layout implemented
//! here); Pandey, Bender, Johnson & Patro, "A general-purpose counting filter: making every bit
//! count", SIGMOD 2017 (the rank-and-select variant, which needs 2.125 instead of 3 metadata bits
//! per slot; not implemented here).
//!
//! * **Idea**: each item has a `(q + r)`-bit fingerprint `V`; its high part, the quotient, names a
//!   home slot, and only the low `r` bits (the remainder) are stored. Remainders of equal
//!   quotient form a *run*, runs are kept in quotient order and shifted right as needed
//!   (linear probing, sorted). Three bits per slot describe the layout: `occupied` (some item has
//!   this slot as home), `continuation` (this slot continues the run of the slot before) and
//!   `shifted` (this remainder is not in its home slot).
//! * **Fingerprint**: `V = ⌊h1 · nq · 2^r / 2^64⌋` for `nq` quotients: quotient `V >> r`,
//!   remainder `V mod 2^r`. This is the multiply-shift range reduction (Lemire 2019) applied to
//!   `nq · 2^r`, so `nq` is any integer (no power-of-two rounding), and doubling `nq` while
//!   dropping one remainder bit keeps `V` unchanged: [`Quotient::resize`] needs only the stored
//!   fingerprints, not the items.
//! * **FPR**: `p = 1 - e^(-α/2^r) ≈ α · 2^-r` at load `α = n / nq`
//!   ([`crate::math::quotient_fpr`]).
//! * **Space**: `(r + 3)` bits per slot, `nq / 0.95` slots for `n` items, plus
//!   `64 + 8·√nq` overflow slots at the end of the table (the table does not wrap around): at 1%
//!   `r = 7` and about 10.6 bits/key for a million items (measured in the tests).
//! * **Parameters**: [`Quotient::new`] takes `nq = ⌈n / 0.95⌉` and `r = ⌈log2(0.95 / p)⌉`
//!   (1 to 56, with `nq · 2^r ≤ 2^64`); [`Quotient::with_params`] takes both.
//! * **Limits**: at most `nq` items (load 1); an insert beyond, or one whose shifted run would
//!   pass the end of the overflow slots, is [`Error::Full`] and changes nothing. Insert and delete
//!   rewrite the cluster they touch, so their cost grows like linear probing's: about
//!   `1/(1-α)^2` slots, which is why the constructor plans for 95% load and not more.
//! * **Duplicates and deletes**: inserting an item again stores its remainder again;
//!   [`Quotient::count`] counts the copies and [`Remove::remove`] removes one. A delete only ever
//!   removes one stored fingerprint equal to the item's, so it never loses another member; but
//!   removing an item that was never inserted can remove a different item with the same
//!   fingerprint (a false negative for it): only remove what you inserted.
//!
//! ```
//! use sift::prelude::*;
//! use sift::Quotient;
//!
//! let mut f = Quotient::new(10_000, 0.01)?; // r = 7
//! for i in 0..10_000u32 {
//!     f.try_insert(i.to_le_bytes())?;
//! }
//! assert!((0..10_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members: p = 1 - e^(-0.95/128) = 0.74%; the 99.9% binomial bound is 0.83%.
//! let fp = (10_000..110_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 830, "{fp} false positives");
//! f.resize()?; // twice the quotients, one remainder bit less, same items
//! assert!((0..10_000u32).all(|i| f.contains(i.to_le_bytes())));
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{try_zeroed, MAX_BYTES};
use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{decode_verified, Encoder, FilterKind, ParamWriter};
use crate::hash::{Digest, HashKind, Hasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist, Remove};

/// Largest remainder width: with the 3 metadata bits a slot stays within 64 bits.
pub const MAX_REMAINDER_BITS: u32 = 56;
/// Load the constructor sizes for: `nq = ⌈n / DESIGN_LOAD⌉`.
pub const DESIGN_LOAD: f64 = 0.95;

const OCCUPIED: u64 = 1;
const CONTINUATION: u64 = 2;
const SHIFTED: u64 = 4;
const META: u64 = 7;

/// Overflow slots after the `nq` home slots: runs shifted past the last home slot land there.
/// The spill at the end behaves like the queue of a random walk, `O(√nq)`; `8·√nq + 64` leaves a
/// wide margin even at load 1.
pub fn overflow_slots(quotients: u64) -> u64 {
    64 + 8 * quotients.isqrt()
}

/// A quotient filter. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq)]
pub struct Quotient {
    /// The three metadata bitmaps, one bit per slot: occupied, continuation, shifted. Kept apart
    /// from the remainders so that finding a run is word-wide bit arithmetic (count the shifted
    /// bits before the home slot, popcount the occupied ones, select the run start).
    occupieds: Vec<u64>,
    continuations: Vec<u64>,
    shifteds: Vec<u64>,
    /// Packed `r`-bit remainders; one extra zero word at the end for reads that straddle two words.
    words: Vec<u64>,
    quotients: u64,
    slots: u64,
    r: u32,
    hasher: Hasher,
    items: u64,
    capacity: u64,
    target_fpr: f64,
}

impl Quotient {
    /// A filter for `expected_items` at false-positive rate `fpr`, with the default hash.
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(expected_items as u64, fpr);
        Self::with_hasher(expected_items, fpr, Hasher::new(kind, 0))
    }

    /// Like [`Quotient::new`], with a chosen hash function and seed.
    pub fn with_hasher(expected_items: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        let quotients = (expected_items as f64 / DESIGN_LOAD).ceil();
        let r = (DESIGN_LOAD / fpr).log2().ceil().max(1.0);
        if r > MAX_REMAINDER_BITS as f64 {
            return Err(Error::param("fpr", fpr, "at least 2^-56 for a quotient filter"));
        }
        let bytes = quotients * (r + 3.0) / 8.0;
        if bytes > MAX_BYTES as f64 {
            return Err(Error::CapacityExceeded {
                requested_bytes: bytes.min(u128::MAX as f64) as u128,
                limit_bytes: MAX_BYTES,
            });
        }
        let mut f = Self::with_params(quotients as u64, r as u32, hasher)?;
        f.capacity = expected_items as u64;
        f.target_fpr = fpr;
        Ok(f)
    }

    /// A filter of `quotients` home slots (any count ≥ 1) and `remainder_bits`-bit remainders
    /// (1 to 56), with `quotients · 2^remainder_bits ≤ 2^64`.
    pub fn with_params(quotients: u64, remainder_bits: u32, hasher: Hasher) -> Result<Self> {
        if quotients == 0 {
            return Err(Error::param("quotients", quotients, "at least 1"));
        }
        if remainder_bits == 0 || remainder_bits > MAX_REMAINDER_BITS {
            return Err(Error::param("remainder_bits", remainder_bits, "between 1 and 56"));
        }
        if (quotients as u128) << remainder_bits > 1u128 << 64 {
            return Err(Error::param(
                "remainder_bits",
                remainder_bits,
                "at most 64 - log2(quotients): the fingerprint has 64 bits",
            ));
        }
        let slots = quotients + overflow_slots(quotients);
        let words = try_zeroed(Self::words_for(slots, remainder_bits)?)?;
        let bitmap = slots.div_ceil(64) as usize;
        Ok(Quotient {
            occupieds: try_zeroed(bitmap)?,
            continuations: try_zeroed(bitmap)?,
            shifteds: try_zeroed(bitmap)?,
            words,
            quotients,
            slots,
            r: remainder_bits,
            hasher,
            items: 0,
            capacity: ((quotients as f64) * DESIGN_LOAD).floor().max(1.0) as u64,
            target_fpr: math::quotient_fpr(remainder_bits, DESIGN_LOAD),
        })
    }

    /// Words of remainder storage (plus the guard word); checks the whole table's size.
    fn words_for(slots: u64, r: u32) -> Result<usize> {
        let total = (slots as u128 * (r as u128 + 3)).div_ceil(64) + 4;
        if total * 8 > MAX_BYTES || total > usize::MAX as u128 {
            return Err(Error::CapacityExceeded { requested_bytes: total * 8, limit_bytes: MAX_BYTES });
        }
        let words = (slots as u128 * r as u128).div_ceil(64) + 1;
        if words * 8 > MAX_BYTES || words > usize::MAX as u128 {
            return Err(Error::CapacityExceeded { requested_bytes: words * 8, limit_bytes: MAX_BYTES });
        }
        Ok(words as usize)
    }

    /// Number of home slots (quotients) `nq`.
    pub fn num_quotients(&self) -> u64 {
        self.quotients
    }

    /// Number of slots including the overflow slots.
    pub fn num_slots(&self) -> u64 {
        self.slots
    }

    /// Remainder width `r`.
    pub fn remainder_bits(&self) -> u32 {
        self.r
    }

    /// The item count the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate the filter was sized for (at [`Quotient::capacity`] items).
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Items per home slot, `n / nq`; inserts fail beyond 1.
    pub fn load_factor(&self) -> f64 {
        self.items as f64 / self.quotients as f64
    }

    /// The fingerprint `V` of a digest (what [`Quotient::iter_hashes`] yields for it).
    #[inline]
    pub fn fingerprint(&self, d: Digest) -> u64 {
        ((d.h1 as u128 * ((self.quotients as u128) << self.r)) >> 64) as u64
    }

    /// Number of stored copies of `item`'s fingerprint: at least the number of times it was
    /// inserted and not removed.
    pub fn count<T: AsRef<[u8]>>(&self, item: T) -> usize {
        self.count_digest(self.hasher.digest(item.as_ref()))
    }

    /// [`Quotient::count`] for a digest.
    pub fn count_digest(&self, d: Digest) -> usize {
        let (q, rem) = self.split(self.fingerprint(d));
        match self.run_start(q) {
            None => 0,
            Some(s) => self.run(s).filter(|&x| x == rem).count(),
        }
    }

    /// Inserts `item`; `Ok(true)` if it was not reported present before, `Ok(false)` if another
    /// copy was stored, [`Error::Full`] if the filter holds `nq` items or the run would pass the
    /// end of the table (the filter is then unchanged).
    pub fn try_insert<T: AsRef<[u8]>>(&mut self, item: T) -> Result<bool> {
        self.try_insert_digest(self.hasher.digest(item.as_ref()))
    }

    /// [`Quotient::try_insert`] for a caller-computed 64-bit hash.
    pub fn try_insert_hash(&mut self, hash: u64) -> Result<bool> {
        self.try_insert_digest(Digest::from_u64(hash))
    }

    /// [`Quotient::try_insert`] for a digest.
    pub fn try_insert_digest(&mut self, d: Digest) -> Result<bool> {
        let v = self.fingerprint(d);
        let was_present = self.count_digest(d) > 0;
        self.insert_fingerprint(v)?;
        Ok(!was_present)
    }

    /// The stored fingerprints `V` (quotient `<< r` | remainder), in increasing order, each as
    /// many times as it is stored.
    pub fn iter_hashes(&self) -> Hashes<'_> {
        Hashes { f: self, s: 0, next_q: 0, q: 0, end: self.slots }
    }

    /// Doubles the number of quotients and drops one remainder bit, rebuilding from the stored
    /// fingerprints: the items stay, the FPR at the same item count stays the same
    /// (`α/2 · 2^-(r-1)`), and the filter takes up to twice as many items.
    /// Fails (unchanged) when `r = 1` or the larger table cannot be allocated.
    pub fn resize(&mut self) -> Result<()> {
        if self.r <= 1 {
            return Err(Error::param("remainder_bits", self.r, "at least 2 to resize"));
        }
        let quotients = self
            .quotients
            .checked_mul(2)
            .ok_or(Error::CapacityExceeded { requested_bytes: u128::MAX, limit_bytes: MAX_BYTES })?;
        let mut g = Quotient::with_params(quotients, self.r - 1, self.hasher)?;
        let mut v: Vec<u64> = Vec::new();
        v.try_reserve_exact(self.items as usize)
            .map_err(|_| Error::OutOfMemory { bytes: self.items as usize * 8 })?;
        v.extend(self.iter_hashes());
        g.build_sorted(&v)?;
        g.capacity = self.capacity.saturating_mul(2);
        g.target_fpr = self.target_fpr;
        *self = g;
        Ok(())
    }

    /// Adds every fingerprint of `other` (same hash function and seed, same fingerprint space
    /// `nq · 2^r`, e.g. the same parameters or one a resized copy of the other).
    /// [`Error::Full`] if the union does not fit; `self` is then unchanged.
    pub fn merge(&mut self, other: &Quotient) -> Result<()> {
        if self.hasher != other.hasher {
            return Err(Error::Incompatible { reason: "different hash function or seed" });
        }
        if (self.quotients as u128) << self.r != (other.quotients as u128) << other.r {
            return Err(Error::Incompatible { reason: "different fingerprint space (quotients · 2^r)" });
        }
        let total = self.items + other.items;
        if total > self.quotients {
            return Err(Error::Full { len: self.items as usize });
        }
        let mut v: Vec<u64> = Vec::new();
        v.try_reserve_exact(total as usize).map_err(|_| Error::OutOfMemory { bytes: total as usize * 8 })?;
        v.extend(self.iter_hashes());
        v.extend(other.iter_hashes());
        v.sort_unstable();
        let mut g = Quotient::with_params(self.quotients, self.r, self.hasher)?;
        g.capacity = self.capacity;
        g.target_fpr = self.target_fpr;
        g.build_sorted(&v).map_err(|_| Error::Full { len: self.items as usize })?;
        *self = g;
        Ok(())
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        self.occupieds.fill(0);
        self.continuations.fill(0);
        self.shifteds.fill(0);
        self.words.fill(0);
        self.items = 0;
    }

    // ---- slots ---------------------------------------------------------------------------

    #[inline(always)]
    fn split(&self, v: u64) -> (u64, u64) {
        (v >> self.r, v & ((1u64 << self.r) - 1))
    }

    /// The remainder in slot `i`.
    #[inline(always)]
    fn rem(&self, i: u64) -> u64 {
        let w = self.r as u64;
        let bit = i * w;
        let (k, off) = ((bit >> 6) as usize, (bit & 63) as u32);
        let mut v = self.words[k] >> off;
        if off as u64 + w > 64 {
            v |= self.words[k + 1] << (64 - off);
        }
        v & ((1u64 << w) - 1)
    }

    #[inline(always)]
    fn set_rem(&mut self, i: u64, v: u64) {
        let w = self.r as u64;
        let mask = (1u64 << w) - 1;
        let bit = i * w;
        let (k, off) = ((bit >> 6) as usize, (bit & 63) as u32);
        self.words[k] = (self.words[k] & !(mask << off)) | (v << off);
        if off as u64 + w > 64 {
            let hi = mask >> (64 - off);
            self.words[k + 1] = (self.words[k + 1] & !hi) | (v >> (64 - off));
        }
    }

    /// Slot `i` as one value: remainder `<< 3` | shifted (4) | continuation (2) | occupied (1).
    #[inline(always)]
    fn get(&self, i: u64) -> u64 {
        let (k, b) = ((i >> 6) as usize, i & 63);
        let m = (self.occupieds[k] >> b & 1)
            | (self.continuations[k] >> b & 1) << 1
            | (self.shifteds[k] >> b & 1) << 2;
        self.rem(i) << 3 | m
    }

    /// Writes slot `i` as [`Quotient::get`] reads it.
    #[inline(always)]
    fn set(&mut self, i: u64, v: u64) {
        let (k, b) = ((i >> 6) as usize, i & 63);
        let put = |w: &mut u64, on: bool| *w = (*w & !(1 << b)) | ((on as u64) << b);
        put(&mut self.occupieds[k], v & OCCUPIED != 0);
        put(&mut self.continuations[k], v & CONTINUATION != 0);
        put(&mut self.shifteds[k], v & SHIFTED != 0);
        self.set_rem(i, v >> 3);
    }

    #[inline(always)]
    fn occupied(&self, i: u64) -> bool {
        self.occupieds[(i >> 6) as usize] >> (i & 63) & 1 != 0
    }

    #[inline(always)]
    fn continuation(&self, i: u64) -> bool {
        self.continuations[(i >> 6) as usize] >> (i & 63) & 1 != 0
    }

    /// The nearest slot at or before non-empty slot `q` that holds an unshifted remainder: skips
    /// the run of shifted bits ending at `q`, a word at a time. Every remainder after it (up to
    /// the next empty slot) has a quotient at least that slot's. Slot 0 is never shifted.
    #[inline]
    fn cluster_start(&self, q: u64) -> u64 {
        let mut c = q;
        loop {
            let off = (c & 63) as u32;
            // Bit `c` to the top; the leading ones are the shifted slots `c, c-1, ...`.
            let ones = (self.shifteds[(c >> 6) as usize] << (63 - off)).leading_ones();
            if ones <= off {
                return c - ones as u64;
            }
            c -= off as u64 + 1;
        }
    }

    /// Slot of the first remainder of quotient `q`'s run, if `q` is occupied. From the cluster
    /// start `c`, the runs appear in the order of the occupied quotients, so `q`'s run is the
    /// `k`-th run start at or after `c`, `k` being the number of occupied quotients in `c..=q`
    /// (rank), and a run start is a non-empty (occupied or shifted) slot that is not a
    /// continuation (select).
    fn run_start(&self, q: u64) -> Option<u64> {
        if !self.occupied(q) {
            return None;
        }
        let c = self.cluster_start(q);
        // rank: occupied bits in c..=q
        let (wc, wq) = ((c >> 6) as usize, (q >> 6) as usize);
        let mut k = 0u32;
        for w in wc..=wq {
            let mut x = self.occupieds[w];
            if w == wc {
                x &= u64::MAX << (c & 63);
            }
            if w == wq {
                x &= u64::MAX >> (63 - (q & 63));
            }
            k += x.count_ones();
        }
        // select: the k-th run start from c
        let mut w = wc;
        let mut first = true;
        loop {
            let mut x = (self.occupieds[w] | self.shifteds[w]) & !self.continuations[w];
            if first {
                x &= u64::MAX << (c & 63);
                first = false;
            }
            let n = x.count_ones();
            if n >= k {
                for _ in 1..k {
                    x &= x - 1;
                }
                return Some(((w as u64) << 6) + x.trailing_zeros() as u64);
            }
            k -= n;
            w += 1;
        }
    }

    /// The remainders of the run starting at slot `s`.
    fn run(&self, s: u64) -> impl Iterator<Item = u64> + '_ {
        let mut i = s;
        let mut first = true;
        core::iter::from_fn(move || {
            if i >= self.slots || (!first && !self.continuation(i)) {
                return None;
            }
            first = false;
            let x = self.rem(i);
            i += 1;
            Some(x)
        })
    }

    /// Inserts one fingerprint by rewriting the cluster region around its home slot.
    fn insert_fingerprint(&mut self, v: u64) -> Result<()> {
        if self.items >= self.quotients {
            return Err(Error::Full { len: self.items as usize });
        }
        let (q, rem) = self.split(v);
        if self.get(q) & META == 0 {
            // Empty home slot: nothing is shifted through it, the item starts its own run here.
            self.set(q, rem << 3 | OCCUPIED);
            self.items += 1;
            return Ok(());
        }
        let c = self.cluster_start(q);
        let mut entries = self.decode(c);
        let at = entries.partition_point(|&e| e <= (q, rem));
        entries.insert(at, (q, rem));
        self.rewrite(c, &entries)?;
        self.items += 1;
        Ok(())
    }

    /// Removes one stored copy of fingerprint `v`.
    fn remove_fingerprint(&mut self, v: u64) -> bool {
        let (q, rem) = self.split(v);
        if !self.occupied(q) {
            return false;
        }
        let c = self.cluster_start(q);
        let mut entries = self.decode(c);
        let Some(at) = entries.iter().position(|&e| e == (q, rem)) else {
            return false;
        };
        entries.remove(at);
        self.rewrite(c, &entries).expect("a shorter layout always fits");
        self.items -= 1;
        true
    }

    /// The `(quotient, remainder)` pairs stored from slot `c` (unshifted) to the next empty slot.
    fn decode(&self, c: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let (mut s, mut next_q, mut q) = (c, c, c);
        while s < self.slots {
            let x = self.get(s);
            if x & META == 0 {
                break;
            }
            if x & CONTINUATION == 0 {
                while !self.occupied(next_q) {
                    next_q += 1;
                }
                q = next_q;
                next_q += 1;
            }
            out.push((q, x >> 3));
            s += 1;
        }
        out
    }

    /// Lays `entries` (sorted, quotients ≥ `c`) out from slot `c`, replacing the region from `c`
    /// to the first empty slot. Checks that the layout fits before writing anything.
    fn rewrite(&mut self, c: u64, entries: &[(u64, u64)]) -> Result<()> {
        let mut p = c;
        for &(q, _) in entries {
            p = p.max(q) + 1;
        }
        if p > self.slots {
            return Err(Error::Full { len: self.items as usize });
        }
        let mut s = c;
        while s < self.slots && self.get(s) & META != 0 {
            self.set(s, 0);
            s += 1;
        }
        self.lay_out(c, entries);
        Ok(())
    }

    /// Writes sorted `entries` from slot `start` on into cleared slots (the caller checked that
    /// they fit).
    fn lay_out(&mut self, start: u64, entries: &[(u64, u64)]) {
        let mut p = start;
        let mut prev_q = u64::MAX;
        for &(q, rem) in entries {
            let pos = p.max(q);
            let mut x = rem << 3;
            if q == prev_q {
                x |= CONTINUATION;
            }
            if pos != q {
                x |= SHIFTED;
            }
            // Overwriting slot `pos` whole cannot drop an occupied bit: the quotients marked so
            // far had their runs placed before `pos`, so they are all `< pos`.
            self.set(pos, x);
            if q != prev_q {
                let y = self.get(q);
                self.set(q, y | OCCUPIED);
            }
            prev_q = q;
            p = pos + 1;
        }
    }

    /// Fills an empty table from sorted fingerprints.
    fn build_sorted(&mut self, v: &[u64]) -> Result<()> {
        if v.len() as u64 > self.quotients {
            return Err(Error::Full { len: v.len() });
        }
        let entries: Vec<(u64, u64)> = v.iter().map(|&x| self.split(x)).collect();
        let mut p = 0;
        for &(q, _) in &entries {
            p = p.max(q) + 1;
        }
        if p > self.slots {
            return Err(Error::Full { len: v.len() });
        }
        self.lay_out(0, &entries);
        self.items = v.len() as u64;
        Ok(())
    }

    /// Checks every layout invariant the algorithms rely on (for decoded files): slot by slot,
    /// runs pair with occupied quotients in order, a remainder is shifted exactly when it is not
    /// in its home slot, continuations follow a slot of the same run, no run is interrupted by
    /// an empty slot, empty slots are all zero, only home slots are occupied, and the number of
    /// remainders is `items`.
    fn check_layout(&self) -> core::result::Result<(), &'static str> {
        let (mut pending, mut next_q, mut count) = (0u64, 0u64, 0u64);
        let mut prev_nonempty = false;
        for s in 0..self.slots {
            let x = self.get(s);
            if x & OCCUPIED != 0 {
                if s >= self.quotients {
                    return Err("occupied bit on an overflow slot");
                }
                pending += 1;
            }
            if x & META == 0 {
                if x != 0 {
                    return Err("remainder in an empty slot");
                }
                if pending != 0 {
                    return Err("an occupied quotient has no run before an empty slot");
                }
                prev_nonempty = false;
                continue;
            }
            if x & CONTINUATION != 0 {
                if !prev_nonempty || x & SHIFTED == 0 {
                    return Err("continuation without a run before it");
                }
            } else {
                if pending == 0 {
                    return Err("a run without an occupied quotient");
                }
                while next_q < s && self.get(next_q) & OCCUPIED == 0 {
                    next_q += 1;
                }
                let q = next_q;
                next_q += 1;
                pending -= 1;
                if (x & SHIFTED != 0) != (q != s) {
                    return Err("shifted bit does not match the run's position");
                }
            }
            if x & SHIFTED != 0 && !prev_nonempty {
                return Err("shifted remainder after an empty slot");
            }
            count += 1;
            prev_nonempty = true;
        }
        if pending != 0 {
            return Err("an occupied quotient has no run");
        }
        if count != self.items {
            return Err("item count does not match the stored remainders");
        }
        Ok(())
    }
}

/// Iterator over the stored fingerprints of a [`Quotient`] filter, in increasing order.
#[derive(Debug, Clone)]
pub struct Hashes<'a> {
    f: &'a Quotient,
    s: u64,
    next_q: u64,
    q: u64,
    end: u64,
}

impl Iterator for Hashes<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        while self.s < self.end {
            let x = self.f.get(self.s);
            self.s += 1;
            if x & META == 0 {
                continue;
            }
            if x & CONTINUATION == 0 {
                // Runs appear in quotient order: this one belongs to the next occupied quotient.
                while !self.f.occupied(self.next_q) {
                    self.next_q += 1;
                }
                self.q = self.next_q;
                self.next_q += 1;
            }
            return Some(self.q << self.f.r | x >> 3);
        }
        None
    }
}

impl Filter for Quotient {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    fn contains_digest(&self, d: Digest) -> bool {
        let (q, rem) = self.split(self.fingerprint(d));
        match self.run_start(q) {
            None => false,
            Some(s) => self.run(s).any(|x| x == rem),
        }
    }

    fn len(&self) -> usize {
        self.items as usize
    }

    fn size_in_bytes(&self) -> usize {
        (3 * self.occupieds.len() + self.words.len()) * 8
    }

    fn expected_fpr(&self) -> f64 {
        math::quotient_fpr(self.r, self.load_factor())
    }
}

impl Insert for Quotient {
    /// Inserts a copy; `false` if the item was already reported present **or the filter is
    /// full** (see [`Quotient::try_insert_digest`], which tells the two apart).
    fn insert_digest(&mut self, d: Digest) -> bool {
        self.try_insert_digest(d).unwrap_or(false)
    }
}

impl Remove for Quotient {
    fn remove_digest(&mut self, d: Digest) -> bool {
        let v = self.fingerprint(d);
        self.remove_fingerprint(v)
    }
}

impl Persist for Quotient {
    const KIND: FilterKind = FilterKind::Quotient;

    /// Parameters (48 bytes): quotients `nq` `u64`, remainder bits `r` `u32` (1 to 56, with
    /// `nq · 2^r ≤ 2^64`), reserved `u32` (0), slots `u64` (`nq + 64 + 8·⌊√nq⌋`), items `u64`,
    /// capacity `u64`, target FPR `f64`.
    ///
    /// Payload: three bitmaps of `8·⌈slots / 64⌉` bytes each, slot `i` being bit `i & 7` of byte
    /// `i >> 3`: occupied (quotient `i` has items), continuation (slot `i` continues the run of
    /// slot `i - 1`), shifted (the remainder in slot `i` is not in its home slot); then the
    /// remainders, `⌈slots · r / 8⌉` bytes, slot `i` being the `r`-bit little-endian field at bit
    /// `i · r`. Empty slots (no bit set) have remainder 0; bits past the last slot are 0. Decoding
    /// checks every layout invariant, so a corrupted table is an error and not a wrong answer later.
    fn to_bytes(&self) -> Vec<u8> {
        let mut p = ParamWriter::new();
        p.u64(self.quotients)
            .u32(self.r)
            .u32(0)
            .u64(self.slots)
            .u64(self.items)
            .u64(self.capacity)
            .f64(self.target_fpr);
        let len = Self::payload_len(self.slots, self.r) as u64;
        let mut e = Encoder::new(Self::KIND, self.hasher, p.as_bytes(), len);
        self.write_payload(e.payload());
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let quotients = r.u64("quotients")?;
        let rbits = r.u32("remainder bits")?;
        let reserved = r.u32("reserved")?;
        let slots = r.u64("slots")?;
        let items = r.u64("items")?;
        let capacity = r.u64("capacity")?;
        let target_fpr = r.fpr("target fpr")?;
        r.finish()?;
        let bad = |m: &'static str| -> Error { FormatError::InvalidParams(m).into() };
        if quotients == 0
            || rbits == 0
            || rbits > MAX_REMAINDER_BITS
            || (quotients as u128) << rbits > 1u128 << 64
            || reserved != 0
        {
            return Err(bad("quotient: quotients ≥ 1, remainder bits 1 to 56, quotients · 2^r ≤ 2^64"));
        }
        if slots != quotients + overflow_slots(quotients) || items > quotients {
            return Err(bad("quotient: slot count or item count inconsistent with the quotients"));
        }
        let len = Self::payload_len(slots, rbits);
        let payload = raw.payload();
        if len != payload.len() as u128 {
            return Err(FormatError::Truncated {
                what: "quotient slots",
                needed: len.min(u64::MAX as u128) as u64,
                available: payload.len() as u64,
            }
            .into());
        }
        // The payload has exactly the table's length, so this allocation is bounded by the input.
        let mut f = Quotient::with_params(quotients, rbits, raw.hasher())?;
        let bitmap = f.occupieds.len() * 8;
        let mut at = 0;
        for v in [&mut f.occupieds, &mut f.continuations, &mut f.shifteds] {
            fill_le(v, &payload[at..at + bitmap]);
            at += bitmap;
        }
        fill_le(&mut f.words, &payload[at..]);
        let tail = |v: &[u64], used: u64| {
            let (k, off) = ((used >> 6) as usize, used & 63);
            (off != 0 && v[k] >> off != 0) || v[k + (off != 0) as usize..].iter().any(|&x| x != 0)
        };
        if tail(&f.occupieds, slots)
            || tail(&f.continuations, slots)
            || tail(&f.shifteds, slots)
            || tail(&f.words, slots * rbits as u64)
        {
            return Err(bad("quotient: bits set past the last slot"));
        }
        f.items = items;
        f.check_layout().map_err(bad)?;
        f.capacity = capacity;
        f.target_fpr = target_fpr;
        Ok(f)
    }
}

impl Quotient {
    /// Bytes of the file payload: three bitmaps and the packed remainders.
    fn payload_len(slots: u64, r: u32) -> u128 {
        3 * 8 * (slots as u128).div_ceil(64) + (slots as u128 * r as u128).div_ceil(8)
    }

    fn write_payload(&self, out: &mut Vec<u8>) {
        for v in [&self.occupieds, &self.continuations, &self.shifteds] {
            for w in v {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        let mut left = (self.slots * self.r as u64).div_ceil(8) as usize;
        for w in &self.words {
            let n = left.min(8);
            out.extend_from_slice(&w.to_le_bytes()[..n]);
            left -= n;
            if left == 0 {
                break;
            }
        }
    }
}

/// Loads little-endian bytes into words (the last word zero-padded).
fn fill_le(words: &mut [u64], bytes: &[u8]) {
    for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_le_bytes(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn upper(p: f64, n: f64) -> f64 {
        p + 3.1 * (p * (1.0 - p) / n).sqrt()
    }

    fn key(i: u64) -> [u8; 8] {
        i.to_le_bytes()
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            Quotient::new(0, 0.01),
            Err(Error::InvalidParameter { name: "expected_items", .. })
        ));
        for p in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(Quotient::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })),
                "p = {p}"
            );
        }
        assert!(matches!(Quotient::new(10, 1e-30), Err(Error::InvalidParameter { name: "fpr", .. })));
        assert!(matches!(Quotient::new(usize::MAX, 0.01), Err(Error::CapacityExceeded { .. })));
        let h = Hasher::default();
        assert!(matches!(
            Quotient::with_params(0, 7, h),
            Err(Error::InvalidParameter { name: "quotients", .. })
        ));
        for r in [0, 57, 64] {
            assert!(matches!(
                Quotient::with_params(100, r, h),
                Err(Error::InvalidParameter { name: "remainder_bits", .. })
            ));
        }
        assert!(matches!(
            Quotient::with_params(1 << 60, 8, h),
            Err(Error::InvalidParameter { name: "remainder_bits", .. })
        ));
        assert!(matches!(Quotient::with_params(1 << 56, 8, h), Err(Error::CapacityExceeded { .. })));
        let mut f = Quotient::with_params(10, 1, h).unwrap();
        assert!(matches!(f.resize(), Err(Error::InvalidParameter { .. })));
    }

    #[test]
    fn sizing_and_bits_per_key() {
        let f = Quotient::new(1_000_000, 0.01).unwrap();
        assert_eq!(f.remainder_bits(), 7);
        assert_eq!(f.num_quotients(), 1_052_632);
        assert_eq!(f.num_slots(), 1_052_632 + 64 + 8 * 1025);
        let bits_per_key = f.size_in_bytes() as f64 * 8.0 / 1e6;
        println!("quotient n = 1e6, p = 1%: {bits_per_key:.2} bits/key");
        assert!(bits_per_key < 10.7, "{bits_per_key}");
    }

    #[test]
    fn packed_slots_round_trip_for_every_width() {
        for r in 1..=MAX_REMAINDER_BITS {
            let mut f = Quotient::with_params(50, r, Hasher::default()).unwrap();
            let mask = (1u64 << (r + 3)) - 1;
            let val = |i: u64| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7) & mask;
            for i in 0..f.slots {
                f.set(i, val(i));
            }
            for i in 0..f.slots {
                assert_eq!(f.get(i), val(i), "r {r} slot {i}");
            }
            assert_eq!(*f.words.last().unwrap(), 0);
        }
    }

    #[test]
    fn duplicates_count_and_remove() {
        let mut f = Quotient::new(1000, 0.01).unwrap();
        assert_eq!(f.try_insert("a"), Ok(true));
        assert_eq!(f.try_insert("a"), Ok(false));
        assert_eq!(f.count("a"), 2);
        assert!(f.remove("a"));
        assert!(f.contains("a"));
        assert!(f.remove("a"));
        assert!(!f.contains("a") && !f.remove("a") && f.is_empty());
        assert_eq!(f.check_layout(), Ok(()));
    }

    #[test]
    fn fpr_within_binomial_bound() {
        const PROBES: u64 = 2_000_000;
        for (n, p) in [(200_000usize, 0.01), (100_000, 0.001), (100_000, 0.1)] {
            let mut f = Quotient::with_hasher(n, p, Hasher::new(HashKind::Xxh3_64, 5)).unwrap();
            for i in 0..n as u64 {
                f.try_insert(key(i)).unwrap();
            }
            let fp = (n as u64..n as u64 + PROBES).filter(|&i| f.contains(key(i))).count();
            let measured = fp as f64 / PROBES as f64;
            let e = f.expected_fpr();
            println!(
                "quotient n {n} r {} load {:.3}: FPR {measured:.6} (formula {e:.6}, target {p})",
                f.remainder_bits(),
                f.load_factor()
            );
            assert!(e <= p);
            assert!(measured <= upper(e * 1.01, PROBES as f64), "{measured} > bound of {e}");
            assert!(measured >= e - 3.1 * (e / PROBES as f64).sqrt() - 0.05 * e, "{measured} ≪ {e}");
        }
    }

    #[test]
    fn full_filter_refuses_and_loses_nothing() {
        let mut f = Quotient::with_params(100_000, 8, Hasher::default()).unwrap();
        let mut i = 0u64;
        let err = loop {
            match f.try_insert(key(i)) {
                Ok(_) => i += 1,
                Err(e) => break e,
            }
        };
        assert!(matches!(err, Error::Full { .. }));
        println!("quotient nq = 100000: full after {i} items (load {:.4})", f.load_factor());
        assert!(f.load_factor() >= 0.99, "load {}", f.load_factor());
        let before = f.clone();
        assert!(f.try_insert(key(u64::MAX)).is_err());
        assert_eq!(f, before);
        assert!((0..i).all(|k| f.contains(key(k))));
        assert_eq!(f.check_layout(), Ok(()));
        for k in 0..i / 2 {
            assert!(f.remove(key(k)));
        }
        assert!((i / 2..i).all(|k| f.contains(key(k))));
        assert_eq!(f.check_layout(), Ok(()));
        f.resize().unwrap();
        assert!((i / 2..i).all(|k| f.contains(key(k))));
        assert_eq!(f.check_layout(), Ok(()));
    }

    #[test]
    fn resize_keeps_items_and_fpr() {
        const PROBES: u64 = 1_000_000;
        let mut f = Quotient::with_hasher(100_000, 0.01, Hasher::new(HashKind::Xxh3_64, 9)).unwrap();
        for i in 0..100_000u64 {
            f.try_insert(key(i)).unwrap();
        }
        let before: Vec<u64> = f.iter_hashes().collect();
        f.resize().unwrap();
        assert_eq!(f.remainder_bits(), 6);
        assert_eq!(f.num_quotients(), 2 * 105_264);
        assert_eq!(f.check_layout(), Ok(()));
        assert_eq!(f.iter_hashes().collect::<Vec<_>>(), before, "fingerprints are unchanged");
        assert!((0..100_000u64).all(|i| f.contains(key(i))));
        for i in 100_000..200_000u64 {
            f.try_insert(key(i)).unwrap();
        }
        let fp = (1u64 << 40..(1 << 40) + PROBES).filter(|&i| f.contains(key(i))).count();
        let e = f.expected_fpr();
        assert!((fp as f64 / PROBES as f64) <= upper(e * 1.01, PROBES as f64), "{fp} vs {e}");
    }

    #[test]
    fn merge_and_incompatible() {
        let h = Hasher::new(HashKind::Xxh3_64, 1);
        let mut a = Quotient::with_hasher(10_000, 0.01, h).unwrap();
        let mut b = a.clone();
        for i in 0..4000u64 {
            a.try_insert(key(i)).unwrap();
        }
        for i in 3000..8000u64 {
            b.try_insert(key(i)).unwrap();
        }
        let mut m = a.clone();
        m.merge(&b).unwrap();
        assert_eq!(m.len(), 9000);
        assert!((0..8000u64).all(|i| m.contains(key(i))));
        assert_eq!(m.count(key(3500)), 2);
        assert_eq!(m.check_layout(), Ok(()));
        // Full: unchanged.
        let before = m.clone();
        assert!(matches!(m.merge(&b), Err(Error::Full { .. })));
        assert_eq!(m, before);
        // A resized copy shares the fingerprint space.
        let mut big = b.clone();
        big.resize().unwrap();
        let mut a2 = a.clone();
        a2.merge(&big).unwrap();
        assert_eq!(a2.iter_hashes().collect::<Vec<_>>(), m.iter_hashes().collect::<Vec<_>>());
        let other_seed = Quotient::with_hasher(10_000, 0.01, Hasher::new(HashKind::Xxh3_64, 2)).unwrap();
        assert!(matches!(a.merge(&other_seed), Err(Error::Incompatible { .. })));
        let other_shape = Quotient::with_hasher(20_000, 0.01, h).unwrap();
        assert!(matches!(a.merge(&other_shape), Err(Error::Incompatible { .. })));
    }

    #[test]
    fn round_trip_and_corruption() {
        for r in [1u32, 5, 7, 13, 29, 52] {
            let mut f = Quotient::with_params(3000, r, Hasher::new(HashKind::Xxh64, 4)).unwrap();
            for i in 0..2800u64 {
                f.try_insert(key(i % 2000)).unwrap();
            }
            let bytes = f.to_bytes();
            let g = Quotient::from_bytes(&bytes).unwrap();
            assert_eq!(f, g);
            for cut in [0, 20, 60, bytes.len() / 2, bytes.len() - 1] {
                assert!(Quotient::from_bytes(&bytes[..cut]).is_err(), "cut {cut}");
            }
            for at in (0..bytes.len()).step_by(13) {
                let mut b = bytes.clone();
                b[at] ^= 0x20;
                assert!(Quotient::from_bytes(&b).is_err(), "flip at {at}");
            }
        }
    }

    /// Files with a valid CRC whose table breaks a layout invariant are refused.
    #[test]
    fn forged_tables_are_errors() {
        let f0 = Quotient::with_params(10, 5, Hasher::default()).unwrap();
        let forge = |f: &Quotient, quotients: u64, r: u32, slots: u64, items: u64| {
            let mut p = ParamWriter::new();
            p.u64(quotients).u32(r).u32(0).u64(slots).u64(items).u64(1).f64(0.01);
            let mut payload = Vec::new();
            f.write_payload(&mut payload);
            let mut e =
                Encoder::new(FilterKind::Quotient, Hasher::default(), p.as_bytes(), payload.len() as u64);
            e.payload().extend_from_slice(&payload);
            Quotient::from_bytes(&e.finish())
        };
        let slots = f0.slots;
        assert!(forge(&f0, 10, 5, slots, 0).is_ok());
        assert!(forge(&f0, 10, 5, slots, 1).is_err(), "item count");
        assert!(forge(&f0, 10, 5, slots + 1, 0).is_err(), "slot count");
        assert!(forge(&f0, 0, 5, slots, 0).is_err());
        assert!(forge(&f0, 10, 6, slots, 0).is_err(), "payload length");
        assert!(forge(&f0, 10, 0, slots, 0).is_err());
        let with = |cells: &[(u64, u64)]| {
            let mut f = f0.clone();
            for &(i, x) in cells {
                f.set(i, x);
            }
            f
        };
        let n = |cells: &[(u64, u64)]| forge(&with(cells), 10, 5, slots, cells.len() as u64);
        assert!(n(&[(3, 9 << 3 | OCCUPIED)]).is_ok());
        assert!(n(&[(3, 9 << 3 | OCCUPIED), (4, 1 << 3 | CONTINUATION | SHIFTED)]).is_ok());
        assert!(n(&[(0, 9 << 3 | SHIFTED)]).is_err(), "shifted at slot 0");
        assert!(n(&[(3, 9 << 3)]).is_err(), "remainder in an empty slot");
        assert!(n(&[(3, 9 << 3 | CONTINUATION | SHIFTED)]).is_err(), "continuation first");
        assert!(n(&[(3, 9 << 3 | OCCUPIED | SHIFTED)]).is_err(), "shifted at home");
        assert!(n(&[(3, 9 << 3 | OCCUPIED), (4, 1 << 3 | CONTINUATION)]).is_err(), "unshifted continuation");
        assert!(n(&[(3, 9 << 3 | OCCUPIED), (5, 1 << 3 | SHIFTED)]).is_err(), "run without quotient");
        assert!(forge(&with(&[(3, OCCUPIED | 2 << 3), (4, OCCUPIED | SHIFTED)]), 10, 5, slots, 2).is_err());
        assert!(forge(&with(&[(12, OCCUPIED)]), 10, 5, slots, 1).is_err(), "occupied overflow slot");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u16),
        Remove(u16),
        Resize,
        Merge(Vec<u16>),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![
                30 => (0u16..400).prop_map(Op::Insert),
                20 => (0u16..400).prop_map(Op::Remove),
                1 => Just(Op::Resize),
                1 => prop::collection::vec(0u16..400, 0..30).prop_map(Op::Merge),
            ],
            1..500,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, rng_seed: proptest::test_runner::RngSeed::Fixed(0x9f1e), ..ProptestConfig::default() })]

        /// Against a multiset model: no false negatives, exact len, and the stored fingerprints
        /// are exactly those of the model's items; `Full` changes nothing; the layout invariants
        /// hold after every operation.
        #[test]
        fn behaves_like_a_multiset(ops in ops(), quotients in 1u64..80, r in 1u32..9) {
            let h = Hasher::new(HashKind::Xxh3_64, 3);
            let mut f = Quotient::with_params(quotients, r, h).unwrap();
            let mut model: HashMap<u16, usize> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k) => {
                        let before = f.clone();
                        match f.try_insert(k.to_le_bytes()) {
                            Ok(new) => {
                                prop_assert!(new || f.count(k.to_le_bytes()) > 1);
                                *model.entry(k).or_default() += 1;
                            }
                            Err(Error::Full { .. }) => prop_assert_eq!(&f, &before),
                            Err(e) => prop_assert!(false, "unexpected {e}"),
                        }
                    }
                    Op::Remove(k) => {
                        if let Some(c) = model.get_mut(&k).filter(|c| **c > 0) {
                            prop_assert!(f.remove(k.to_le_bytes()));
                            *c -= 1;
                        }
                    }
                    Op::Resize => {
                        if f.remainder_bits() > 1 {
                            f.resize().unwrap();
                        }
                    }
                    Op::Merge(keys) => {
                        let mut g = Quotient::with_params(f.num_quotients(), f.remainder_bits(), h).unwrap();
                        let added: Vec<u16> =
                            keys.into_iter().filter(|k| g.try_insert(k.to_le_bytes()).is_ok()).collect();
                        let before = f.clone();
                        match f.merge(&g) {
                            Ok(()) => {
                                for k in added {
                                    *model.entry(k).or_default() += 1;
                                }
                            }
                            Err(Error::Full { .. }) => prop_assert_eq!(&f, &before),
                            Err(e) => prop_assert!(false, "unexpected {e}"),
                        }
                    }
                }
                prop_assert_eq!(f.check_layout(), Ok(()));
                prop_assert_eq!(f.len(), model.values().sum::<usize>());
                let mut want: Vec<u64> = model
                    .iter()
                    .flat_map(|(k, &c)| {
                        let v = f.fingerprint(h.digest(&k.to_le_bytes()));
                        std::iter::repeat_n(v, c)
                    })
                    .collect();
                want.sort_unstable();
                prop_assert_eq!(f.iter_hashes().collect::<Vec<_>>(), want);
                for (k, &c) in &model {
                    prop_assert!(f.count(k.to_le_bytes()) >= c);
                    if c > 0 {
                        prop_assert!(f.contains(k.to_le_bytes()), "false negative for {}", k);
                    }
                }
            }
            let g = Quotient::from_bytes(&f.to_bytes()).unwrap();
            prop_assert_eq!(g, f);
        }
    }
}
