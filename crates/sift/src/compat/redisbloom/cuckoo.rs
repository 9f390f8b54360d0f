//! RedisBloom's cuckoo filter, `MBbloomCF` (spec §6, dump format §7.2).
//!
//! Fan, Andersen, Kaminsky & Mitzenmacher, "Cuckoo Filter: Practically Better Than Bloom", 2014,
//! with RedisBloom's choices: 8-bit fingerprints `hash mod 255 + 1`, buckets of 1..255 slots,
//! partial-key cuckoo hashing with the multiplier `0x5bd1e995`, and a list of sub-filters that
//! grows by `expansion` when an insert finds no room after `maxIterations` kicks. Kicks only touch
//! the newest sub-filter, always start at slot 0 of the item's first bucket and advance the victim
//! slot by one per step (no randomness), and are rolled back when they fail, so the layout after
//! every operation, and with it every dump, is deterministic and equal to RedisBloom's.

use std::borrow::Cow;

use super::dump::{Fields, FrozenBytes, LoadLimits, CF_HEADER_LEN, MAX_CHUNK};
use super::{CF_MAX_BUCKETS, CF_MAX_BUCKET_SIZE, CF_MAX_CAPACITY, CF_MAX_EXPANSION, CF_MAX_FILTERS};
use crate::bits::{prefetch, CowGuard, Storage};
use crate::hash::murmur64a;

/// The multiplier of the alternate-bucket computation (§6.3, §6.5).
const ALT_MUL: u64 = 0x5bd1_e995;

/// Why a cuckoo filter could not be created (`CF.RESERVE`, auto-create of `CF.ADD` /
/// `CF.ADDNX` / `CF.INSERT` / `CF.INSERTNX`). Spec §8 gives the reply of each variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CuckooCreateError {
    /// `capacity < 2·bucketSize`. (`Capacity must be in the range [2 * BUCKETSIZE, 1073741824]` in
    /// CF.RESERVE; `ERR Could not create filter` on auto-create.)
    #[error("capacity must be at least twice the bucket size")]
    CapacityTooSmall,
    /// `capacity > 2^30`. (`Capacity must be in the range [2 * BUCKETSIZE, 1073741824]`.)
    #[error("capacity must be at most 1073741824")]
    CapacityOutOfRange,
    /// The bucket size is not in [1, 255]. (`BUCKETSIZE: value must be in the range [1, 255]`.)
    #[error("bucket size must be in [1, 255]")]
    BucketSizeOutOfRange,
    /// The kick-out limit is 0. (`MAXITERATIONS: value must be in the range [1, 65535]`.)
    #[error("max iterations must be in [1, 65535]")]
    MaxIterationsOutOfRange,
    /// The expansion is above 32768. (`EXPANSION: value must be in the range [0, 32768]`.)
    #[error("expansion must be in [0, 32768]")]
    ExpansionOutOfRange,
    /// The slot array could not be allocated. (`ERR Insufficient memory to create filter`.)
    #[error("could not allocate the slot array")]
    OutOfMemory,
}

/// Why an insert failed (§6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CuckooInsertError {
    /// No room after the kick-outs, and the filter does not expand. (`Filter is full`; −1 / `#f`
    /// in CF.INSERT.)
    #[error("filter is full")]
    NoSpace,
    /// The filter had to grow and could not: 65535 sub-filters, more than 2^56 − 1 buckets, or the
    /// allocation failed. (`ERR Insufficient memory`; −1 / `#f` in CF.INSERT.)
    #[error("could not allocate a new sub-filter")]
    MemAllocFailed,
}

/// Why a `CF.LOADCHUNK key 1 header` was refused (§7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CuckooHeaderError {
    /// The header is not exactly 38 bytes. (`Invalid header`.)
    #[error("header must be 38 bytes")]
    Length,
    /// Every other variant is `Couldn't create filter!`.
    /// `bucketSize` not in [1, `cf-bucket-size` upper bound].
    #[error("bad bucket size")]
    BucketSize,
    /// `numFilters` (truncated to 16 bits) is 0.
    #[error("bad number of sub-filters")]
    NumFilters,
    /// `maxIterations` is 0.
    #[error("bad max iterations")]
    MaxIterations,
    /// `expansion` above 32768, or 0 with more than one sub-filter.
    #[error("bad expansion")]
    Expansion,
    /// `numBuckets` is 0, above 2^56 − 1 or not a power of two.
    #[error("bad number of buckets")]
    NumBuckets,
    /// Sub-filter `index` would have 0 buckets (or an unrepresentable count).
    #[error("sub-filter {index} has a bad bucket count")]
    SubFilterBuckets {
        /// Index of the sub-filter, oldest first.
        index: usize,
    },
    /// The slot arrays exceed [`LoadLimits::max_bytes`] or could not be allocated.
    #[error("slot arrays too large to allocate")]
    OutOfMemory,
}

/// Why a `CF.LOADCHUNK` data chunk was refused (§7.2). Every variant is `Couldn't load chunk!`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CuckooChunkError {
    /// Empty data, `pos <= 0` or `pos − 1 < len(data)`.
    #[error("bad position for this chunk")]
    BadPosition,
    /// The chunk runs past the end of its sub-filter.
    #[error("chunk does not fit its sub-filter")]
    DoesNotFit,
}

/// The hash of an item as RedisBloom's cuckoo filter uses it (§6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuckooHash {
    /// `MurmurHash64A(item, 0)`: selects the first bucket.
    pub h1: u64,
    /// `h1 XOR (fp · 0x5bd1e995)`: selects the second bucket.
    pub h2: u64,
    /// The fingerprint, `h1 mod 255 + 1` (never 0, which marks an empty slot).
    pub fp: u8,
}

impl CuckooHash {
    /// Hashes an item (raw bytes).
    #[inline]
    pub fn new(item: &[u8]) -> Self {
        let h1 = murmur64a(item, 0);
        let fp = (h1 % 255 + 1) as u8;
        CuckooHash { h1, h2: h1 ^ (fp as u64).wrapping_mul(ALT_MUL), fp }
    }
}

/// One sub-filter: `buckets · bucketSize` one-byte slots (in huge-page memory when large, which
/// a snapshot can then read piece by piece while writers go on: [`CuckooFilter::freeze`]).
#[derive(Clone, PartialEq, Eq)]
pub struct SubFilter {
    buckets: u64,
    slots: Storage<u8>,
}

/// `len` zeroed slots, or `None` when they cannot be allocated.
fn zeroed_slots(len: u64) -> Option<Storage<u8>> {
    Storage::zeroed(usize::try_from(len).ok()?).ok()
}

impl core::fmt::Debug for SubFilter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SubFilter").field("buckets", &self.buckets).finish_non_exhaustive()
    }
}

impl SubFilter {
    /// Number of buckets.
    pub fn buckets(&self) -> u64 {
        self.buckets
    }
    /// The slots, bucket `j` at `[j·bucketSize, (j+1)·bucketSize)`; 0 is an empty slot.
    pub fn slots(&self) -> &[u8] {
        &self.slots
    }

    /// Byte offset of the bucket `h` selects, truncated to 32 bits as RedisBloom computes it on
    /// every path except the kick-out (§6.3).
    #[inline]
    fn offset32(&self, h: u64, bs: usize) -> usize {
        offset32(h, self.buckets, bs)
    }

    #[inline]
    fn bucket(&self, off: usize, bs: usize) -> &[u8] {
        &self.slots[off..off + bs]
    }

    /// Stores `fp` in the first empty slot of the bucket at `off`; `false` when it is full.
    #[inline]
    fn place(&mut self, off: usize, bs: usize, fp: u8) -> bool {
        match self.slots[off..off + bs].iter().position(|&s| s == 0) {
            Some(j) => {
                self.set(off + j, fp);
                true
            }
            None => false,
        }
    }

    /// Sets slot `i` to `v`. Every change of a slot goes through here (or, for a range,
    /// [`SubFilter::set_range`]): while a snapshot reads the slots ([`CuckooFilter::freeze`]),
    /// the piece holding the slot is saved for it first.
    #[inline]
    fn set(&mut self, i: usize, v: u8) {
        match self.slots.cow_guard() {
            None => self.slots[i] = v,
            Some(g) => self.set_guarded(&g, i, v),
        }
    }

    #[cold]
    fn set_guarded(&mut self, g: &CowGuard, i: usize, v: u8) {
        let mut w = g.writer();
        w.before_write(&self.slots, i..i + 1);
        self.slots[i] = v;
    }

    /// Copies `data` into the slots from `at` (a `LOADCHUNK`), as [`SubFilter::set`] does.
    fn set_range(&mut self, at: usize, data: &[u8]) {
        let guard = self.slots.cow_guard();
        let mut writer = guard.as_ref().map(|g| g.writer());
        if let Some(w) = &mut writer {
            w.before_write(&self.slots, at..at + data.len());
        }
        self.slots[at..at + data.len()].copy_from_slice(data);
    }

    /// First-fit of §6.5 step 1 (and §6.7): bucket `h1` first, then bucket `h2`.
    #[inline]
    fn place_either(&mut self, h1: u64, h2: u64, bs: usize, fp: u8) -> bool {
        let (o1, o2) = (self.offset32(h1, bs), self.offset32(h2, bs));
        self.place(o1, bs, fp) || self.place(o2, bs, fp)
    }
}

/// `((h mod nb) · bs) mod 2^32`: the bucket's byte offset as RedisBloom computes it outside the
/// kick-out path. Only sub-filters over 4 GiB see the truncation.
#[inline]
fn offset32(h: u64, nb: u64, bs: usize) -> usize {
    ((h % nb).wrapping_mul(bs as u64) as u32) as usize
}

/// The numbers of `CF.INFO` (§6.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuckooInfo {
    /// `Size`: `40 + 16·numFilters + Σ nb_i·bucketSize`.
    pub size: u64,
    /// `Number of buckets` (of sub-filter 0).
    pub buckets: u64,
    /// `Number of filters`.
    pub filters: u64,
    /// `Number of items inserted` (inserted minus deleted).
    pub items: u64,
    /// `Number of items deleted` (since the last compaction).
    pub deletes: u64,
    /// `Bucket size`.
    pub bucket_size: u16,
    /// `Expansion rate`, as stored.
    pub expansion: u16,
    /// `Max iterations`.
    pub max_iterations: u16,
}

/// RedisBloom's cuckoo filter (`MBbloomCF`): 8-bit fingerprints in buckets of `bucketSize`
/// slots, a list of sub-filters that grows by `expansion` when an insert finds no room after
/// `maxIterations` deterministic kicks in the newest sub-filter (Fan et al., "Cuckoo Filter:
/// Practically Better Than Bloom", 2014, with RedisBloom's choices, spec §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuckooFilter {
    num_buckets: u64,
    num_items: u64,
    num_deletes: u64,
    bucket_size: u16,
    max_iterations: u16,
    expansion: u16,
    filters: Vec<SubFilter>,
}

/// The smallest power of two ≥ `v`, with `next_pow2(0) = 0` (§6.2); `None` past 2^63.
fn next_pow2(v: u64) -> Option<u64> {
    if v == 0 {
        Some(0)
    } else {
        v.checked_next_power_of_two()
    }
}

impl CuckooFilter {
    /// Creates a filter as `CF.RESERVE key capacity BUCKETSIZE bs MAXITERATIONS mi EXPANSION e`
    /// does (§6.2): `nextPow2(capacity / bs)` buckets (at least 1), expansion stored as
    /// `nextPow2(e)`, one empty sub-filter.
    ///
    /// Checked: `bucket_size` in [1, 255], `max_iterations ≥ 1`, `expansion ≤ 32768`,
    /// `2·bucket_size ≤ capacity ≤ 2^30`. (A server whose `cf-bucket-size` bound was lowered
    /// checks that bound itself, §3.)
    pub fn new(
        capacity: u64,
        bucket_size: u16,
        max_iterations: u16,
        expansion: u16,
    ) -> Result<Self, CuckooCreateError> {
        if !(1..=CF_MAX_BUCKET_SIZE).contains(&bucket_size) {
            return Err(CuckooCreateError::BucketSizeOutOfRange);
        }
        if max_iterations == 0 {
            return Err(CuckooCreateError::MaxIterationsOutOfRange);
        }
        if expansion > CF_MAX_EXPANSION {
            return Err(CuckooCreateError::ExpansionOutOfRange);
        }
        if capacity < 2 * bucket_size as u64 {
            return Err(CuckooCreateError::CapacityTooSmall);
        }
        if capacity > CF_MAX_CAPACITY {
            return Err(CuckooCreateError::CapacityOutOfRange);
        }
        let nb = next_pow2(capacity / bucket_size as u64).expect("capacity ≤ 2^30").max(1);
        let expansion = next_pow2(expansion as u64).expect("expansion ≤ 32768") as u16;
        let slots = zeroed_slots(nb * bucket_size as u64).ok_or(CuckooCreateError::OutOfMemory)?;
        Ok(CuckooFilter {
            num_buckets: nb,
            num_items: 0,
            num_deletes: 0,
            bucket_size,
            max_iterations,
            expansion,
            filters: vec![SubFilter { buckets: nb, slots }],
        })
    }

    /// `CF.RESERVE`'s capacity check (§8 step 6) on the parsed (signed) capacity:
    /// [`CuckooCreateError::CapacityTooSmall`] below `2·bucket_size` (negative values included),
    /// [`CuckooCreateError::CapacityOutOfRange`] above 2^30. Both are the same reply there.
    pub fn check_capacity(capacity: i64, bucket_size: u16) -> Result<u64, CuckooCreateError> {
        if capacity < 2 * bucket_size as i64 {
            return Err(CuckooCreateError::CapacityTooSmall);
        }
        if capacity as u64 > CF_MAX_CAPACITY {
            return Err(CuckooCreateError::CapacityOutOfRange);
        }
        Ok(capacity as u64)
    }

    #[inline]
    fn bs(&self) -> usize {
        self.bucket_size as usize
    }

    /// `CF.EXISTS` (§6.4): whether any sub-filter holds the fingerprint in either bucket.
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(CuckooHash::new(item))
    }

    /// [`CuckooFilter::contains`] for a precomputed hash.
    pub fn contains_hash(&self, h: CuckooHash) -> bool {
        let bs = self.bs();
        self.filters.iter().any(|f| {
            f.bucket(f.offset32(h.h1, bs), bs).contains(&h.fp)
                || f.bucket(f.offset32(h.h2, bs), bs).contains(&h.fp)
        })
    }

    /// `CF.MEXISTS`: appends [`CuckooFilter::contains`] of each item to `out`. The items are
    /// hashed ahead and the two buckets of item `i + 8` (in every sub-filter, newest first, at
    /// most 4) are requested from memory while item `i` is tested, so the cache misses of a
    /// large filter overlap; the answers are those of `contains`, item by item.
    pub fn contains_many<I: AsRef<[u8]>>(&self, items: &[I], out: &mut Vec<bool>) {
        const AHEAD: usize = 8;
        let bs = self.bs();
        let prepare = |item: &I| {
            let h = CuckooHash::new(item.as_ref());
            // Sub-filters under 1 MiB stay in the caches: prefetching them only repeats work.
            for f in self.filters.iter().rev().take(4).filter(|f| f.slots.len() >= 1 << 20) {
                let base = f.slots.as_ptr();
                // In bounds (the same offsets `contains` indexes); only a hint either way.
                prefetch(base.wrapping_add(f.offset32(h.h1, bs)));
                prefetch(base.wrapping_add(f.offset32(h.h2, bs)));
            }
            h
        };
        out.reserve(items.len());
        let mut ahead = [CuckooHash { h1: 0, h2: 0, fp: 0 }; AHEAD];
        for (slot, item) in ahead.iter_mut().zip(items) {
            *slot = prepare(item);
        }
        for i in 0..items.len() {
            let h = ahead[i % AHEAD];
            if let Some(next) = items.get(i + AHEAD) {
                ahead[i % AHEAD] = prepare(next);
            }
            out.push(self.contains_hash(h));
        }
    }

    /// `CF.COUNT` (§6.4): matching slots in both buckets of every sub-filter; a bucket named by
    /// both hashes is counted twice.
    pub fn count(&self, item: &[u8]) -> u64 {
        let h = CuckooHash::new(item);
        let bs = self.bs();
        self.filters
            .iter()
            .map(|f| {
                let n1 = f.bucket(f.offset32(h.h1, bs), bs).iter().filter(|&&s| s == h.fp).count();
                let n2 = f.bucket(f.offset32(h.h2, bs), bs).iter().filter(|&&s| s == h.fp).count();
                (n1 + n2) as u64
            })
            .sum()
    }

    /// `CF.ADD` (§6.5): stores the item (duplicates allowed), growing when needed.
    pub fn insert(&mut self, item: &[u8]) -> Result<(), CuckooInsertError> {
        self.insert_hash(CuckooHash::new(item))
    }

    /// `CF.ADDNX` (§6.5): `Ok(false)` (and no change) when the item already looks present.
    pub fn insert_unique(&mut self, item: &[u8]) -> Result<bool, CuckooInsertError> {
        let h = CuckooHash::new(item);
        if self.contains_hash(h) {
            return Ok(false);
        }
        self.insert_hash(h).map(|()| true)
    }

    /// [`CuckooFilter::insert`] for a precomputed hash.
    pub fn insert_hash(&mut self, h: CuckooHash) -> Result<(), CuckooInsertError> {
        self.insert_hash_within(h, &mut |_| true)
    }

    /// [`CuckooFilter::insert`], except that a growth is first offered to `allow` with the bytes
    /// the new sub-filter would take (a server's memory budget check, asked only when the filter
    /// must grow); a refused growth fails with [`CuckooInsertError::MemAllocFailed`].
    pub fn insert_within(
        &mut self,
        item: &[u8],
        allow: &mut dyn FnMut(u64) -> bool,
    ) -> Result<(), CuckooInsertError> {
        self.insert_hash_within(CuckooHash::new(item), allow)
    }

    /// [`CuckooFilter::insert_unique`] with the growth check of [`CuckooFilter::insert_within`].
    pub fn insert_unique_within(
        &mut self,
        item: &[u8],
        allow: &mut dyn FnMut(u64) -> bool,
    ) -> Result<bool, CuckooInsertError> {
        let h = CuckooHash::new(item);
        if self.contains_hash(h) {
            return Ok(false);
        }
        self.insert_hash_within(h, allow).map(|()| true)
    }

    /// Bytes the next sub-filter would take (§6.5 step 5); `None` when it cannot be sized.
    pub fn next_growth_bytes(&self) -> Option<u64> {
        (self.expansion as u128)
            .checked_pow(self.filters.len() as u32)
            .and_then(|p| p.checked_mul(self.num_buckets as u128))
            .and_then(|nb| nb.checked_mul(self.bucket_size as u128))
            .and_then(|b| u64::try_from(b).ok())
    }

    fn insert_hash_within(
        &mut self,
        h: CuckooHash,
        allow: &mut dyn FnMut(u64) -> bool,
    ) -> Result<(), CuckooInsertError> {
        let bs = self.bs();
        loop {
            // 1. First fit, newest sub-filter to oldest.
            if self.filters.iter_mut().rev().any(|f| f.place_either(h.h1, h.h2, bs, h.fp)) {
                self.num_items = self.num_items.wrapping_add(1);
                return Ok(());
            }
            // 2, 3. Kick-out in the newest sub-filter, rolled back when it fails.
            if self.kick_out(h) {
                self.num_items = self.num_items.wrapping_add(1);
                return Ok(());
            }
            // 4, 5. Grow, then retry: the new sub-filter is empty, so the next pass succeeds.
            if self.expansion == 0 {
                return Err(CuckooInsertError::NoSpace);
            }
            if !self.next_growth_bytes().is_some_and(&mut *allow) {
                return Err(CuckooInsertError::MemAllocFailed);
            }
            self.grow()?;
        }
    }

    /// The kick-out of §6.5 step 2 on the newest sub-filter, with the roll-back of step 3.
    /// Offsets here are 64-bit, unlike the other paths.
    fn kick_out(&mut self, h: CuckooHash) -> bool {
        let bs = self.bs();
        let max = self.max_iterations;
        let f = self.filters.last_mut().expect("a filter has at least one sub-filter");
        let nb = f.buckets;
        let mut ii = h.h1 % nb;
        let mut victim = 0usize;
        let mut cur = h.fp;
        // Swaps `cur` with the slot at `i`.
        let swap = |f: &mut SubFilter, cur: &mut u8, i: usize| {
            let old = f.slots[i];
            f.set(i, *cur);
            *cur = old;
        };
        for _ in 0..max {
            swap(f, &mut cur, ii as usize * bs + victim);
            ii = (ii ^ (cur as u64).wrapping_mul(ALT_MUL)) % nb;
            if f.place(ii as usize * bs, bs, cur) {
                return true;
            }
            victim = (victim + 1) % bs;
        }
        for _ in 0..max {
            victim = (victim + bs - 1) % bs;
            ii = (ii ^ (cur as u64).wrapping_mul(ALT_MUL)) % nb;
            swap(f, &mut cur, ii as usize * bs + victim);
        }
        false
    }

    /// Appends a sub-filter of `numBuckets · expansion^numFilters` buckets (§6.5 step 5).
    fn grow(&mut self) -> Result<(), CuckooInsertError> {
        if self.filters.len() >= CF_MAX_FILTERS as usize {
            return Err(CuckooInsertError::MemAllocFailed);
        }
        let nb = (self.expansion as u128)
            .checked_pow(self.filters.len() as u32)
            .and_then(|p| p.checked_mul(self.num_buckets as u128))
            .filter(|&nb| nb <= CF_MAX_BUCKETS as u128)
            .ok_or(CuckooInsertError::MemAllocFailed)? as u64;
        let slots = zeroed_slots(nb * self.bucket_size as u64).ok_or(CuckooInsertError::MemAllocFailed)?;
        self.filters.push(SubFilter { buckets: nb, slots });
        Ok(())
    }

    /// `CF.DEL` (§6.6): clears the first matching slot, newest sub-filter first, bucket `h1` then
    /// `h2`; `false` when none matches. May trigger an automatic [`CuckooFilter::compact`]
    /// (`continue = false`) when deletes exceed 10% of the items and there are several
    /// sub-filters.
    pub fn delete(&mut self, item: &[u8]) -> bool {
        let h = CuckooHash::new(item);
        let bs = self.bs();
        let found = self.filters.iter_mut().rev().any(|f| {
            for o in [f.offset32(h.h1, bs), f.offset32(h.h2, bs)] {
                if let Some(j) = f.slots[o..o + bs].iter().position(|&s| s == h.fp) {
                    f.set(o + j, 0);
                    return true;
                }
            }
            false
        });
        if !found {
            return false;
        }
        self.num_items = self.num_items.wrapping_sub(1);
        self.num_deletes = self.num_deletes.wrapping_add(1);
        if self.filters.len() > 1 && self.num_deletes as f64 > self.num_items as f64 * 0.1 {
            self.compact(false);
        }
        true
    }

    /// Compaction (§6.7): moves fingerprints of newer sub-filters into free slots of older ones
    /// and drops the last sub-filter once it is empty. `CF.COMPACT` passes `cont = true` (keep
    /// going after a sub-filter that could not be emptied); automatic compaction after deletes
    /// passes `false`. Resets the delete counter.
    pub fn compact(&mut self, cont: bool) {
        let bs = self.bs();
        let mut f = self.filters.len() - 1;
        while f >= 1 {
            let (older, rest) = self.filters.split_at_mut(f);
            let newer = &mut rest[0];
            let mut failed = false;
            for b in 0..newer.buckets {
                for s in 0..bs {
                    let idx = b as usize * bs + s;
                    let fp = newer.slots[idx];
                    if fp == 0 {
                        continue;
                    }
                    let h2 = b ^ (fp as u64).wrapping_mul(ALT_MUL);
                    if older.iter_mut().any(|o| o.place_either(b, h2, bs, fp)) {
                        newer.set(idx, 0);
                    } else {
                        failed = true;
                    }
                }
            }
            if !failed && f == self.filters.len() - 1 {
                self.filters.pop();
            }
            if failed && !cont {
                break;
            }
            f -= 1;
        }
        self.num_deletes = 0;
    }

    /// Number of sub-filters (a CF write first checks it against `cf-max-expansions`, §6.8).
    pub fn num_filters(&self) -> usize {
        self.filters.len()
    }

    /// Items inserted minus items deleted.
    pub fn len(&self) -> u64 {
        self.num_items
    }

    /// Whether `numItems` is 0 (`SCANDUMP` then returns no header).
    pub fn is_empty(&self) -> bool {
        self.num_items == 0
    }

    /// The sub-filters, oldest first.
    pub fn filters(&self) -> &[SubFilter] {
        &self.filters
    }

    /// Buckets of sub-filter 0.
    pub fn num_buckets(&self) -> u64 {
        self.num_buckets
    }

    /// Deletes since the last compaction.
    pub fn num_deletes(&self) -> u64 {
        self.num_deletes
    }

    /// Slots per bucket.
    pub fn bucket_size(&self) -> u16 {
        self.bucket_size
    }

    /// The kick-out limit.
    pub fn max_iterations(&self) -> u16 {
        self.max_iterations
    }

    /// The growth factor, as stored.
    pub fn expansion(&self) -> u16 {
        self.expansion
    }

    /// `CF.INFO` (§6.8).
    pub fn info(&self) -> CuckooInfo {
        let slots = self.filters.iter().fold(0u64, |s, f| s.wrapping_add(f.slots.len() as u64));
        CuckooInfo {
            size: 40u64.wrapping_add(16 * self.filters.len() as u64).wrapping_add(slots),
            buckets: self.num_buckets,
            filters: self.filters.len() as u64,
            items: self.num_items,
            deletes: self.num_deletes,
            bucket_size: self.bucket_size,
            expansion: self.expansion,
            max_iterations: self.max_iterations,
        }
    }

    /// `CF.DEBUG` (§6.8).
    pub fn debug_line(&self) -> String {
        format!(
            "bktsize:{} buckets:{} items:{} deletes:{} filters:{} max_iterations:{} expansion:{}",
            self.bucket_size,
            self.num_buckets,
            self.num_items,
            self.num_deletes,
            self.filters.len(),
            self.max_iterations,
            self.expansion
        )
    }

    /// The 38-byte `SCANDUMP` header (§7.2).
    pub fn header(&self) -> [u8; CF_HEADER_LEN] {
        let mut h = [0u8; CF_HEADER_LEN];
        h[0..8].copy_from_slice(&self.num_items.to_le_bytes());
        h[8..16].copy_from_slice(&self.num_buckets.to_le_bytes());
        h[16..24].copy_from_slice(&self.num_deletes.to_le_bytes());
        h[24..32].copy_from_slice(&(self.filters.len() as u64).to_le_bytes());
        h[32..34].copy_from_slice(&self.bucket_size.to_le_bytes());
        h[34..36].copy_from_slice(&self.max_iterations.to_le_bytes());
        h[36..38].copy_from_slice(&self.expansion.to_le_bytes());
        h
    }

    /// `CF.SCANDUMP key pos` (§7.2): `Some((next_pos, data))`, or `None` for the end marker
    /// `[0, null]`. An empty filter (`numItems == 0`) has no dump at all. Position 0 gives the
    /// header; a position inside a sub-filter of at most 16 MiB gives that whole sub-filter (and
    /// advances by its size from `pos`, even from the middle); larger sub-filters go in 16 MiB
    /// pieces starting at the position.
    pub fn scandump(&self, pos: i64) -> Option<(i64, Cow<'_, [u8]>)> {
        if self.num_items == 0 || pos < 0 {
            return None;
        }
        if pos == 0 {
            return Some((1, Cow::Owned(self.header().to_vec())));
        }
        let mut o = (pos - 1) as u64;
        for f in &self.filters {
            let size = f.slots.len() as u64;
            if o < size {
                if size <= MAX_CHUNK as u64 {
                    return Some((pos + size as i64, Cow::Borrowed(&f.slots[..])));
                }
                let rel = o as usize;
                let len = (f.slots.len() - rel).min(MAX_CHUNK);
                return Some((pos + len as i64, Cow::Borrowed(&f.slots[rel..rel + len])));
            }
            o -= size;
        }
        None
    }

    /// The filter as it is now, to dump later while it keeps changing (a background snapshot),
    /// or `None` when none of its sub-filters is large enough to gain from it (the caller then
    /// dumps the filter at once). The header and the small sub-filters are copied now; a large
    /// sub-filter's slots are read later, a writer copying aside only the [`COW_PIECE`]-sized
    /// pieces it changes before the snapshot has read them, so that a write waits for those
    /// pieces, never for the whole filter.
    ///
    /// [`COW_PIECE`]: crate::bits::COW_PIECE
    pub fn freeze(&self) -> Option<FrozenCuckoo> {
        if !self.filters.iter().any(|f| f.slots.is_huge()) {
            return None;
        }
        let filters = self.filters.iter().map(|f| FrozenBytes::of(&f.slots)).collect();
        Some(FrozenCuckoo { header: self.header(), filters })
    }

    /// `CF.LOADCHUNK key 1 header` (§7.2): validates a 38-byte header and builds a filter with
    /// zeroed slots. `numFilters` is truncated to 16 bits and `expansion` is taken as given (not
    /// rounded); sub-filter `i` gets `trunc(numBuckets · expansion^i)` buckets computed in f64.
    /// Nothing is allocated beyond `limits.max_bytes`.
    pub fn from_header(data: &[u8], limits: &LoadLimits) -> Result<Self, CuckooHeaderError> {
        if data.len() != CF_HEADER_LEN {
            return Err(CuckooHeaderError::Length);
        }
        let f = Fields(data);
        let (num_items, num_buckets, num_deletes) = (f.u64(0), f.u64(8), f.u64(16));
        let num_filters = f.u64(24) as u16;
        let (bucket_size, max_iterations, expansion) = (f.u16(32), f.u16(34), f.u16(36));
        if bucket_size == 0 || bucket_size > limits.cf_max_bucket_size {
            return Err(CuckooHeaderError::BucketSize);
        }
        if num_filters == 0 {
            return Err(CuckooHeaderError::NumFilters);
        }
        if max_iterations == 0 {
            return Err(CuckooHeaderError::MaxIterations);
        }
        if expansion > CF_MAX_EXPANSION || (expansion == 0 && num_filters > 1) {
            return Err(CuckooHeaderError::Expansion);
        }
        if num_buckets == 0 || num_buckets > CF_MAX_BUCKETS || !num_buckets.is_power_of_two() {
            return Err(CuckooHeaderError::NumBuckets);
        }
        let mut sizes = Vec::new();
        let mut total = 0u64;
        for i in 0..num_filters as usize {
            // C's pow(), as RedisBloom computes it: f64 and truncation.
            let nb = num_buckets as f64 * (expansion as f64).powf(i as f64);
            if !(1.0..18_446_744_073_709_551_616.0).contains(&nb) {
                return Err(CuckooHeaderError::SubFilterBuckets { index: i });
            }
            let nb = nb as u64;
            total = nb
                .checked_mul(bucket_size as u64)
                .and_then(|b| total.checked_add(b))
                .filter(|&t| t <= limits.max_bytes)
                .ok_or(CuckooHeaderError::OutOfMemory)?;
            sizes.push(nb);
        }
        let mut filters = Vec::with_capacity(sizes.len());
        for nb in sizes {
            let slots = zeroed_slots(nb * bucket_size as u64).ok_or(CuckooHeaderError::OutOfMemory)?;
            filters.push(SubFilter { buckets: nb, slots });
        }
        Ok(CuckooFilter {
            num_buckets,
            num_items,
            num_deletes,
            bucket_size,
            max_iterations,
            expansion,
            filters,
        })
    }

    /// `CF.LOADCHUNK key pos data` on an existing filter (§7.2). A chunk addressed past the end
    /// of the stream lands in the last sub-filter at `o − total`, as in RedisBloom, if it fits.
    pub fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), CuckooChunkError> {
        if data.is_empty() || pos <= 0 || ((pos - 1) as u64) < data.len() as u64 {
            return Err(CuckooChunkError::BadPosition);
        }
        let mut o = (pos - 1) as u64 - data.len() as u64;
        let last = self.filters.len() - 1;
        let mut i = 0;
        while o >= self.filters[i].slots.len() as u64 {
            o -= self.filters[i].slots.len() as u64;
            if i == last {
                break;
            }
            i += 1;
        }
        let f = &mut self.filters[i];
        if o.checked_add(data.len() as u64).is_none_or(|end| end > f.slots.len() as u64) {
            return Err(CuckooChunkError::DoesNotFit);
        }
        f.set_range(o as usize, data);
        Ok(())
    }

    /// Rebuilds a filter from stored fields (an RDB value, §12.4): the sub-filters' bucket counts
    /// and slot arrays are taken as given. Refused: no sub-filter, more than 65535, `numBuckets`
    /// or a sub-filter's bucket count 0 or above 2^56 − 1, bucket size 0, a slot array whose
    /// length is not `buckets · bucketSize`; a slot array that cannot be moved into huge-page
    /// memory (large ones are) gives [`CuckooHeaderError::OutOfMemory`].
    pub fn from_parts(
        num_buckets: u64,
        num_items: u64,
        num_deletes: u64,
        bucket_size: u16,
        max_iterations: u16,
        expansion: u16,
        subfilters: Vec<(u64, Vec<u8>)>,
    ) -> Result<Self, CuckooHeaderError> {
        if subfilters.is_empty() || subfilters.len() > CF_MAX_FILTERS as usize {
            return Err(CuckooHeaderError::NumFilters);
        }
        if bucket_size == 0 {
            return Err(CuckooHeaderError::BucketSize);
        }
        if num_buckets == 0 || num_buckets > CF_MAX_BUCKETS {
            return Err(CuckooHeaderError::NumBuckets);
        }
        let mut filters = Vec::with_capacity(subfilters.len());
        for (index, (buckets, slots)) in subfilters.into_iter().enumerate() {
            if buckets == 0
                || buckets > CF_MAX_BUCKETS
                || buckets.checked_mul(bucket_size as u64) != Some(slots.len() as u64)
            {
                return Err(CuckooHeaderError::SubFilterBuckets { index });
            }
            let slots = Storage::adopt(slots).map_err(|_| CuckooHeaderError::OutOfMemory)?;
            filters.push(SubFilter { buckets, slots });
        }
        Ok(CuckooFilter {
            num_buckets,
            num_items,
            num_deletes,
            bucket_size,
            max_iterations,
            expansion,
            filters,
        })
    }
}

/// A cuckoo filter as it was when [`CuckooFilter::freeze`] was called. Dropping it ends the
/// copy-on-write.
#[derive(Debug)]
pub struct FrozenCuckoo {
    header: [u8; CF_HEADER_LEN],
    filters: Vec<FrozenBytes>,
}

impl FrozenCuckoo {
    /// The number of chunks [`FrozenCuckoo::dump_chunk`] gives, the header included.
    pub fn chunk_count(&self) -> u64 {
        1 + self.filters.iter().map(|f| f.len().div_ceil(MAX_CHUNK) as u64).sum::<u64>()
    }

    /// The filter's dump as frozen, in the chunks a snapshot stores: cursor 0 appends the
    /// 38-byte header to `out` and returns 1; cursor `c ≥ 1` appends the slots from byte `c − 1`
    /// of the sub-filters laid end to end, at most [`MAX_CHUNK`] bytes and never past the end of
    /// a sub-filter, and returns `c` plus their length; `None` after the last chunk. Unlike
    /// [`CuckooFilter::scandump`], a small sub-filter is not returned whole from the middle, and an
    /// empty filter has a dump. Call with 0, then with each cursor returned: every byte is read
    /// once.
    pub fn dump_chunk(&self, cursor: u64, out: &mut Vec<u8>) -> Option<u64> {
        if cursor == 0 {
            out.extend_from_slice(&self.header);
            return Some(1);
        }
        let mut at = usize::try_from(cursor - 1).ok()?;
        for f in &self.filters {
            let n = f.len();
            if at < n {
                let len = (n - at).min(MAX_CHUNK);
                f.read(at, len, out);
                return Some(cursor + len as u64);
            }
            at -= n;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::{COW_PIECE, HUGE_THRESHOLD};

    /// Every chunk of the live filter in the order [`FrozenCuckoo::dump_chunk`] gives them.
    fn live_dump(cf: &CuckooFilter) -> Vec<(u64, Vec<u8>)> {
        let mut out = vec![(1, cf.header().to_vec())];
        let mut cursor = 1u64;
        for f in cf.filters() {
            for piece in f.slots().chunks(MAX_CHUNK) {
                cursor += piece.len() as u64;
                out.push((cursor, piece.to_vec()));
            }
        }
        out
    }

    fn frozen_dump(frozen: &FrozenCuckoo) -> Vec<(u64, Vec<u8>)> {
        let (mut out, mut cursor) = (Vec::new(), 0);
        loop {
            let mut buf = Vec::new();
            let Some(next) = frozen.dump_chunk(cursor, &mut buf) else { break };
            out.push((next, buf));
            cursor = next;
        }
        assert_eq!(out.len() as u64, frozen.chunk_count());
        out
    }

    /// The guard of sub-filter `i` of a frozen filter (huge storage, so Linux only).
    fn guard(frozen: &FrozenCuckoo, i: usize) -> &CowGuard {
        match &frozen.filters[i] {
            FrozenBytes::Guarded(g) => g,
            FrozenBytes::Copied(_) => panic!("sub-filter {i} was copied, not guarded"),
        }
    }

    /// A frozen filter dumps the filter as it was when frozen, though inserts (with long
    /// kick-out chains: one slot per bucket), a growth, deletes with the automatic compaction
    /// they set off (which moves fingerprints back into the frozen sub-filter) and LOADCHUNK
    /// change it afterwards, and though the filter is dropped before the dump is read. The
    /// sub-filters are 4 MiB, 16 copy-on-write pieces, and a kick-out chain wanders across them.
    #[test]
    fn a_frozen_filter_dumps_the_state_it_was_frozen_in() {
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing is guarded (freeze gives None)
        }
        let item = |i: u32| format!("item{i}");
        for drop_first in [false, true] {
            let mut cf = CuckooFilter::new(1 << 22, 1, 500, 1).unwrap();
            assert!(cf.filters()[0].slots().len() >= HUGE_THRESHOLD);
            // Kick-outs only move fingerprints of the newest sub-filter: fill until the filter
            // has grown, and some more, so that the inserts after the freeze kick in a frozen
            // sub-filter.
            let mut n = 0u32;
            let mut fill_until = |cf: &mut CuckooFilter, filters: usize, more: u32| {
                while cf.num_filters() < filters {
                    cf.insert(item(n).as_bytes()).unwrap();
                    n += 1;
                }
                for _ in 0..more {
                    cf.insert(item(n).as_bytes()).unwrap();
                    n += 1;
                }
                n
            };
            fill_until(&mut cf, 2, 300_000);
            let before = live_dump(&cf);
            let (items, deletes) = (cf.len(), cf.num_deletes());
            let frozen = cf.freeze().expect("large sub-filters are frozen");
            let pieces = [0, 1].map(|i| guard(&frozen, i).len() / COW_PIECE);
            assert_eq!(pieces, [16, 16]);
            // Kicks in the frozen newest sub-filter until one fails, then a growth.
            let m = fill_until(&mut cf, 3, 100_000);
            // Deletes past 10% of the items: automatic compactions move fingerprints from the
            // new sub-filter into free slots of the frozen ones.
            let used = |f: &SubFilter| f.slots().iter().filter(|&&s| s != 0).count();
            let in_new = used(&cf.filters()[2]);
            let deleted = (0..m / 2).filter(|&i| cf.delete(item(i).as_bytes())).count();
            assert_eq!(deleted as u32, m / 2, "every added item deletes");
            assert!(cf.num_deletes() < deleted as u64, "the deletes compacted the filter");
            let now_in_new = cf.filters().get(2).map_or(0, used);
            assert!(now_in_new < in_new, "compaction moved {in_new} → {now_in_new}");
            cf.load_chunk(1 + 4096, &[0xAB; 4096]).unwrap();
            assert_ne!(live_dump(&cf)[1], before[1], "the live filter changed");
            let saved = [0, 1].map(|i| guard(&frozen, i).saved_pieces());
            assert_eq!(saved, pieces, "the writes reached every piece");
            if drop_first {
                drop(cf);
                assert!(frozen_dump(&frozen) == before, "the frozen dump changed");
            } else {
                assert!(frozen_dump(&frozen) == before, "the frozen dump changed");
                // Once read, the pieces change without copies.
                cf.insert(b"after").unwrap();
                assert_eq!([0, 1].map(|i| guard(&frozen, i).saved_pieces()), [0, 0]);
            }
            // The frozen chunks load back (through LOADCHUNK) into the filter as it was.
            let mut back = CuckooFilter::from_header(&before[0].1, &LoadLimits::default()).unwrap();
            assert_eq!((back.len(), back.num_deletes()), (items, deletes));
            for (next, data) in &before[1..] {
                back.load_chunk(*next as i64, data).unwrap();
            }
            assert!(live_dump(&back) == before, "the frozen chunks load back");
        }
    }

    /// Each kind of write, alone while the filter is frozen, leaves the frozen dump as it was:
    /// an insert that finds a free slot, one that kicks (the chain's swaps land in other pieces
    /// than its last placement, so a swap that skipped the guard would show), one whose kicks
    /// fail and are rolled back before a growth, a delete, a delete that compacts, a LOADCHUNK.
    /// One write at a time: a write that skips the guard changes a piece no other write saved.
    #[test]
    fn every_write_alone_keeps_the_frozen_dump() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let mut cf = CuckooFilter::new(1 << 22, 1, 500, 1).unwrap();
        let item = |i: u32| format!("item{i}");
        // Filled to 500..1000 inserts before the one whose kicks fail and make the filter grow
        // (at a load of about 0.22 with one slot per bucket, where about one insert in twenty
        // kicks): a copy tries the next thousand first.
        let mut n = 0u32;
        loop {
            let mut probe = cf.clone();
            if (n..n + 1000).any(|i| {
                probe.insert(item(i).as_bytes()).unwrap();
                probe.num_filters() > 1
            }) {
                break;
            }
            for i in n..n + 500 {
                cf.insert(item(i).as_bytes()).unwrap();
            }
            n += 500;
        }
        assert_eq!(cf.num_filters(), 1);
        // Runs `op` with the filter frozen; checks the frozen dump; returns the bytes it changed.
        let alone = |cf: &mut CuckooFilter, op: &mut dyn FnMut(&mut CuckooFilter)| {
            let before = live_dump(cf);
            let frozen = cf.freeze().unwrap();
            op(cf);
            assert!(frozen_dump(&frozen) == before, "the write changed the frozen dump");
            let after = live_dump(cf);
            let changed: usize = before[1..]
                .iter()
                .zip(&after[1..])
                .map(|((_, a), (_, b))| a.iter().zip(b).filter(|(x, y)| x != y).count())
                .sum();
            changed
        };
        // Inserts, each alone, until a kick chain fails and the filter grows.
        let (mut plain, mut kicked) = (0, 0);
        while cf.num_filters() < 2 {
            let changed = alone(&mut cf, &mut |cf| {
                cf.insert(item(n).as_bytes()).unwrap();
            });
            n += 1;
            match changed {
                1 => plain += 1,
                2.. => kicked += 1, // the first bucket's slot and at least one more
                0 => {}
            }
        }
        assert!(plain > 300 && kicked > 10, "{plain} plain inserts, {kicked} kicking ones");
        for i in [3, 5, 8] {
            assert_eq!(alone(&mut cf, &mut |cf| assert!(cf.delete(item(i).as_bytes()))), 1);
        }
        // Items for the new sub-filter, some of which a compaction can move back.
        for i in n..n + 2000 {
            cf.insert(item(i).as_bytes()).unwrap();
        }
        // Deletes up to the one that sets off a compaction (deletes above 10% of the items),
        // that one alone.
        let mut d = 10;
        while (cf.num_deletes() + 1) as f64 <= (cf.len() - 1) as f64 * 0.1 {
            assert!(cf.delete(item(d).as_bytes()));
            d += 1;
        }
        let in_new = cf.filters()[1].slots().iter().filter(|&&s| s != 0).count();
        alone(&mut cf, &mut |cf| {
            assert!(cf.delete(item(d).as_bytes()));
            assert_eq!(cf.num_deletes(), 0, "the delete compacted the filter");
        });
        let now_in_new = cf.filters().get(1).map_or(0, |f| f.slots().iter().filter(|&&s| s != 0).count());
        assert!(now_in_new < in_new, "the compaction moved fingerprints: {in_new} → {now_in_new}");
        assert!(alone(&mut cf, &mut |cf| cf.load_chunk(1 + COW_PIECE as i64 + 10, &[1; 20]).unwrap()) > 0);
    }

    /// While a snapshot reads the filter, a write copies aside the pieces it changes and no
    /// other: at a low load every insert finds a free slot at once (one byte changed), so the
    /// pieces saved are exactly the pieces where the live filter now differs from the frozen
    /// one, at most one more per insert; a delete and a LOADCHUNK save their own pieces too.
    #[test]
    fn a_write_during_a_freeze_copies_only_the_pieces_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let mut cf = CuckooFilter::new(1 << 24, 2, 20, 1).unwrap();
        for i in 0..1000u32 {
            cf.insert(&i.to_le_bytes()).unwrap();
        }
        let at_freeze = cf.filters()[0].slots().to_vec();
        let frozen = cf.freeze().unwrap();
        let g = guard(&frozen, 0);
        assert_eq!(g.len() / COW_PIECE, 64);
        assert_eq!(g.saved_pieces(), 0);
        let changed = |cf: &CuckooFilter| {
            let live = cf.filters()[0].slots();
            crate::bits::pieces_differing(live, &at_freeze).len()
        };
        for i in 1000..1040u32 {
            let saved = g.saved_pieces();
            cf.insert(&i.to_le_bytes()).unwrap();
            assert!(g.saved_pieces() <= saved + 1, "one slot written, one piece at most");
            assert_eq!(g.saved_pieces(), changed(&cf), "after insert {i}");
        }
        assert!(g.saved_pieces() > 20, "40 random slots of 64 pieces hit many: {}", g.saved_pieces());
        let saved = g.saved_pieces();
        assert!(cf.delete(&5u32.to_le_bytes()));
        assert!(g.saved_pieces() <= saved + 1);
        let saved = g.saved_pieces();
        // A chunk over three pieces' boundaries: at most those four pieces.
        let from = 10 * COW_PIECE - 100;
        cf.load_chunk((from + 1 + 3 * COW_PIECE) as i64, &vec![7; 3 * COW_PIECE]).unwrap();
        assert!(g.saved_pieces() <= saved + 4);
        assert_eq!(g.saved_pieces(), changed(&cf));
        let dump = frozen_dump(&frozen);
        assert_eq!(dump[1..].iter().flat_map(|(_, d)| d.iter().copied()).collect::<Vec<u8>>(), at_freeze);
    }

    /// A filter without a large sub-filter is not frozen (the snapshot dumps it at once), and a
    /// rebuilt filter (an RDB load) keeps a large sub-filter in the storage that can be frozen.
    #[test]
    fn only_large_filters_freeze() {
        let mut small = CuckooFilter::new(1000, 2, 20, 1).unwrap();
        small.insert(b"x").unwrap();
        assert!(small.freeze().is_none());
        let big = CuckooFilter::new(1 << 23, 2, 20, 1).unwrap();
        let parts = big.filters().iter().map(|f| (f.buckets(), f.slots().to_vec())).collect();
        let rebuilt = CuckooFilter::from_parts(big.num_buckets(), 0, 0, 2, 20, 1, parts).unwrap();
        assert_eq!(rebuilt, big);
        assert_eq!(rebuilt.freeze().is_some(), cfg!(target_os = "linux"));
    }

    #[test]
    fn contains_many_equals_contains() {
        // Small sub-filters that fill and grow several times; probes half present, half not.
        let mut cf = CuckooFilter::new(64, 2, 20, 2).unwrap();
        for i in 0..600u32 {
            let _ = cf.insert(format!("in{i}").as_bytes());
        }
        assert!(cf.num_filters() > 2);
        let probes: Vec<String> = (0..1200u32)
            .map(|i| if i % 2 == 0 { format!("in{}", i / 2) } else { format!("out{i}") })
            .collect();
        let mut got = Vec::new();
        cf.contains_many(&probes, &mut got);
        let want: Vec<bool> = probes.iter().map(|p| cf.contains(p.as_bytes())).collect();
        assert_eq!(got, want);
        assert!(got.iter().filter(|&&b| b).count() >= 600);
        got.clear();
        cf.contains_many::<&str>(&[], &mut got);
        assert!(got.is_empty());
    }

    #[test]
    fn creation_sizes_of_the_spec() {
        assert_eq!(CuckooFilter::new(1000, 2, 20, 1).unwrap().num_buckets(), 512);
        assert_eq!(CuckooFilter::new(6, 3, 20, 1).unwrap().num_buckets(), 2);
        assert_eq!(CuckooFilter::new(1000, 2, 20, 1).unwrap().info().size, 1080);
        assert_eq!(CuckooFilter::new(4, 2, 20, 0).unwrap().info().size, 60);
        assert_eq!(CuckooFilter::new(100, 2, 20, 1).unwrap().info().size, 184);
        for (e, stored) in [(0u16, 0u16), (1, 1), (3, 4), (5, 8), (32768, 32768)] {
            assert_eq!(CuckooFilter::new(100, 2, 20, e).unwrap().expansion(), stored);
        }
    }

    #[test]
    fn bad_parameters_are_errors() {
        use CuckooCreateError::*;
        assert_eq!(CuckooFilter::new(3, 2, 20, 1), Err(CapacityTooSmall));
        assert_eq!(CuckooFilter::new(0, 1, 20, 1), Err(CapacityTooSmall));
        assert_eq!(CuckooFilter::new(CF_MAX_CAPACITY + 1, 2, 20, 1), Err(CapacityOutOfRange));
        assert_eq!(CuckooFilter::new(u64::MAX, 2, 20, 1), Err(CapacityOutOfRange));
        assert_eq!(CuckooFilter::new(100, 0, 20, 1), Err(BucketSizeOutOfRange));
        assert_eq!(CuckooFilter::new(1000, 256, 20, 1), Err(BucketSizeOutOfRange));
        assert_eq!(CuckooFilter::new(100, 2, 0, 1), Err(MaxIterationsOutOfRange));
        assert_eq!(CuckooFilter::new(100, 2, 20, 32769), Err(ExpansionOutOfRange));
        assert_eq!(CuckooFilter::check_capacity(-5, 2), Err(CapacityTooSmall));
        assert_eq!(CuckooFilter::check_capacity(3, 2), Err(CapacityTooSmall));
        assert_eq!(CuckooFilter::check_capacity(4, 2), Ok(4));
        assert_eq!(CuckooFilter::check_capacity(1 << 30, 2), Ok(1 << 30));
        assert_eq!(CuckooFilter::check_capacity((1 << 30) + 1, 2), Err(CapacityOutOfRange));
    }

    #[test]
    fn offsets_truncate_to_32_bits() {
        assert_eq!(offset32(7, 16, 4), 28);
        assert_eq!(offset32(u64::MAX, 16, 4), 60);
        // 2^33 buckets of 1 slot: bucket 2^32 + 5 has byte offset 5 after truncation.
        assert_eq!(offset32((1 << 32) + 5, 1 << 33, 1), 5);
        // 2^31 buckets of 4 slots: bucket 2^30 + 1 → (2^32 + 4) mod 2^32 = 4.
        assert_eq!(offset32((1 << 30) + 1, 1 << 31, 4), 4);
    }

    #[test]
    fn max_expansions_example() {
        // CF.RESERVE mx 4, one insert of 140 items: 35 sub-filters (expansion 1, 2 buckets × 2).
        let mut cf = CuckooFilter::new(4, 2, 20, 1).unwrap();
        for i in 0..140 {
            cf.insert(format!("{i}").as_bytes()).unwrap();
        }
        assert_eq!(cf.num_filters(), 35);
        assert_eq!(cf.len(), 140);
    }

    #[test]
    fn kick_out_rollback_restores_the_filter() {
        let mut cf = CuckooFilter::new(16, 1, 5, 0).unwrap();
        let mut inserted = 0;
        for i in 0..200 {
            let before = cf.clone();
            match cf.insert(format!("k{i}").as_bytes()) {
                Ok(()) => inserted += 1,
                Err(CuckooInsertError::NoSpace) => assert_eq!(cf, before, "a failed insert changes nothing"),
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(inserted, 16);
        assert!(cf.filters()[0].slots().iter().all(|&s| s != 0));
    }

    #[test]
    fn delete_and_compact_keep_members() {
        let mut cf = CuckooFilter::new(64, 2, 20, 1).unwrap();
        for i in 0..150 {
            cf.insert(format!("{i}").as_bytes()).unwrap();
        }
        assert!(cf.num_filters() > 1);
        for i in 0..100 {
            assert!(cf.delete(format!("{i}").as_bytes()));
        }
        for i in 100..150 {
            assert!(cf.contains(format!("{i}").as_bytes()), "{i}");
        }
        cf.compact(true);
        assert_eq!(cf.num_deletes(), 0);
        for i in 100..150 {
            assert!(cf.contains(format!("{i}").as_bytes()), "{i}");
        }
        assert!(!cf.delete(b"never added, and hopefully no collision"));
    }

    #[test]
    fn header_validation() {
        let limits = LoadLimits::default();
        let mut cf = CuckooFilter::new(64, 2, 20, 1).unwrap();
        cf.insert(b"x").unwrap();
        let good = cf.header();
        assert!(CuckooFilter::from_header(&good, &limits).is_ok());
        let e = |h: &[u8]| CuckooFilter::from_header(h, &limits).unwrap_err();
        assert_eq!(e(&good[..37]), CuckooHeaderError::Length);
        assert_eq!(e(&[]), CuckooHeaderError::Length);
        assert_eq!(e(&[0; 39]), CuckooHeaderError::Length);
        let patch = |at: usize, bytes: &[u8]| {
            let mut h = good;
            h[at..at + bytes.len()].copy_from_slice(bytes);
            h
        };
        assert_eq!(e(&patch(32, &0u16.to_le_bytes())), CuckooHeaderError::BucketSize);
        assert_eq!(e(&patch(32, &256u16.to_le_bytes())), CuckooHeaderError::BucketSize);
        let low = LoadLimits { cf_max_bucket_size: 1, ..limits };
        assert_eq!(CuckooFilter::from_header(&good, &low), Err(CuckooHeaderError::BucketSize));
        assert_eq!(e(&patch(24, &0u64.to_le_bytes())), CuckooHeaderError::NumFilters);
        assert_eq!(e(&patch(24, &65536u64.to_le_bytes())), CuckooHeaderError::NumFilters);
        // 65537 truncates to 1: accepted.
        assert_eq!(
            CuckooFilter::from_header(&patch(24, &65537u64.to_le_bytes()), &limits).unwrap().num_filters(),
            1
        );
        assert_eq!(e(&patch(34, &0u16.to_le_bytes())), CuckooHeaderError::MaxIterations);
        assert_eq!(e(&patch(36, &32769u16.to_le_bytes())), CuckooHeaderError::Expansion);
        let two = patch(24, &2u64.to_le_bytes());
        let mut two0 = two;
        two0[36..38].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(e(&two0), CuckooHeaderError::Expansion);
        assert_eq!(e(&patch(8, &0u64.to_le_bytes())), CuckooHeaderError::NumBuckets);
        assert_eq!(e(&patch(8, &3u64.to_le_bytes())), CuckooHeaderError::NumBuckets);
        assert_eq!(e(&patch(8, &(1u64 << 56).to_le_bytes())), CuckooHeaderError::NumBuckets);
        // Huge but well-formed: refused by the budget, nothing allocated.
        assert_eq!(e(&patch(8, &(1u64 << 55).to_le_bytes())), CuckooHeaderError::OutOfMemory);
        let mut many = patch(24, &65535u64.to_le_bytes());
        many[36..38].copy_from_slice(&32768u16.to_le_bytes());
        assert!(matches!(
            e(&many),
            CuckooHeaderError::OutOfMemory | CuckooHeaderError::SubFilterBuckets { .. }
        ));
        // Expansion 3 is not rounded: 32, 96, 288 buckets.
        let mut three = patch(24, &3u64.to_le_bytes());
        three[36..38].copy_from_slice(&3u16.to_le_bytes());
        let cf3 = CuckooFilter::from_header(&three, &limits).unwrap();
        assert_eq!(cf3.filters().iter().map(|f| f.buckets()).collect::<Vec<_>>(), [32, 96, 288]);
    }

    #[test]
    fn chunk_positions() {
        // Sub-filters of 8, 16 and 32 bytes (§7.2 examples).
        let mut cf = CuckooFilter::from_parts(
            4,
            1,
            0,
            2,
            20,
            2,
            vec![(4, vec![1; 8]), (8, vec![2; 16]), (16, vec![3; 32])],
        )
        .unwrap();
        let n = |cf: &CuckooFilter, p| cf.scandump(p).map(|(n, d)| (n, d.len(), d[0]));
        assert_eq!(n(&cf, 1), Some((9, 8, 1)));
        assert_eq!(n(&cf, 5), Some((13, 8, 1)));
        assert_eq!(n(&cf, 25), Some((57, 32, 3)));
        assert_eq!(n(&cf, 40), Some((72, 32, 3)));
        assert_eq!(n(&cf, 57), None);
        assert_eq!(cf.load_chunk(1, b""), Err(CuckooChunkError::BadPosition));
        assert_eq!(cf.load_chunk(0, b"a"), Err(CuckooChunkError::BadPosition));
        assert_eq!(cf.load_chunk(-1, b"a"), Err(CuckooChunkError::BadPosition));
        assert_eq!(cf.load_chunk(4, b"abcd"), Err(CuckooChunkError::BadPosition));
        assert_eq!(cf.load_chunk(5, b"abcd"), Ok(()));
        assert_eq!(&cf.filters()[0].slots()[..4], b"abcd");
        assert_eq!(cf.load_chunk(12, b"abcd"), Err(CuckooChunkError::DoesNotFit)); // crosses 8
                                                                                   // Past the end: lands in the last sub-filter at o − total (57 + 4 − 56 − 1 … = offset 4).
        assert_eq!(cf.load_chunk(56 + 4 + 4 + 1, b"wxyz"), Ok(()));
        assert_eq!(&cf.filters()[2].slots()[4..8], b"wxyz");
        assert_eq!(cf.load_chunk(56 + 40, b"abcd"), Err(CuckooChunkError::DoesNotFit));
        assert_eq!(cf.load_chunk(i64::MAX, b"abcd"), Err(CuckooChunkError::DoesNotFit));
        // An empty filter has no dump.
        let empty = CuckooFilter::new(100, 2, 20, 1).unwrap();
        assert!(empty.scandump(0).is_none());
    }

    #[test]
    fn garbage_headers_never_panic() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut accepted = 0;
        for _ in 0..20_000 {
            let mut h = [0u8; CF_HEADER_LEN];
            for b in h.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            // Make some of them plausible so the later checks run too.
            if x % 2 == 0 {
                h[8..16].copy_from_slice(&(1u64 << (x % 12)).to_le_bytes());
                h[24..32].copy_from_slice(&(1 + x % 4).to_le_bytes());
                h[32] = 1 + (x % 4) as u8;
                h[33] = 0;
                h[34] = (x % 30) as u8; // a short kick-out limit keeps the test fast
                h[35] = 0;
                h[36] = (x % 5) as u8;
                h[37] = 0;
            }
            if let Ok(mut cf) =
                CuckooFilter::from_header(&h, &LoadLimits { max_bytes: 1 << 20, ..Default::default() })
            {
                accepted += 1;
                for i in 0..20 {
                    let _ = cf.insert(format!("{i}").as_bytes());
                    let _ = cf.delete(format!("{}", i / 2).as_bytes());
                }
                cf.compact(true);
                let _ = cf.scandump(1);
            }
        }
        assert!(accepted > 100, "only {accepted} headers exercised the filter");
    }
}
