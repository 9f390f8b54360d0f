//! Time-limited Bloom filter: a sliding window over the last `T` units of the caller's clock.
//!
//! Rodrigues, Shtul, Baquero & Almeida, "Time-limited Bloom Filter", ACM SAC 2023 (arXiv
//! 2306.06742), built on the age-partitioned rows of [`crate::AgingBloom`] (Shtul, Baquero &
//! Almeida, arXiv 2001.03147).
//!
//! * **Idea**: the slices of an age-partitioned filter, with generations that end with *time*
//!   instead of with a count. An item inserted at time `t` is written into the `k` youngest
//!   slices; a new generation starts every `T/l`; a slice is retired once the last insertion
//!   it took is more than `T` old. So an item inserted at `t` is reported present at every
//!   `now ≤ t + T`, always, and is gone (answers like a never-seen item) once `now > t + T +
//!   T/l`.
//! * **The clock is an argument** ([`Timed`]): `insert_at(item, now)`, `contains_at(item,
//!   now)`, `advance(now)`, in any unit (milliseconds, say) as long as the TTL is in the same
//!   one. The filter never reads a clock, so tests and replicas are deterministic: the same
//!   calls with the same `now` give the same filter, bit for bit. Its clock is the largest `now`
//!   seen; an earlier `now` (time going backwards) counts as that clock, so nothing is forgotten
//!   early. A gap longer than `T` forgets everything at once (the epoch jumps past every row's
//!   stamp: no memory is written); shorter gaps start the missed generations one by one, at
//!   most one per slice: the work of a call is bounded by the number of slices, however much
//!   time passed.
//! * **Replication**: slices are started and retired only by [`Timed::advance`] and
//!   [`Timed::insert_at`] (which advances first), from the `now` they are given. A primary
//!   decides the time (its own clock), applies `insert_at(item, now)` or `advance(now)`, and
//!   sends the replicas the same call with the same `now`: they reach the same filter, bit for
//!   bit (and [`Persist::to_bytes`] of it is the same file). Reads never move the clock:
//!   [`Timed::contains_at`], [`len_at`](TimeLimitedBloom::len_at),
//!   [`expected_fpr_at`](TimeLimitedBloom::expected_fpr_at) and
//!   [`oldest_slice_age_at`](TimeLimitedBloom::oldest_slice_age_at) answer as the filter would
//!   after `advance(now)` without changing it, so a replica (or an `INFO` command) may ask at
//!   its own time and still never retire anything itself.
//! * **Sizing** ([`crate::math::aging_plan_timed`]): from `(T, capacity, p)`, where `capacity`
//!   is the number of insertions expected per `T` (the planned rate). Each generation takes up
//!   to `g = capacity/l` insertions at its design load. In the steady state `k + l` slices are
//!   live; the row has `k + l + 1` slices plus [`crate::math::aging_spare_slices`] spares
//!   (rounded up to whole cache lines), and the FPR bound `p` is computed with all but one slice
//!   live: 33.6 bits per planned item at 1% (k = 10, l = 16, 31 slices), 20.5 at 10%, 48.0 at
//!   0.1%. That case is reached, not a loose bound: at [`crate::math::AGING_RATE_HEADROOM`]
//!   times the planned rate a generation fills in `0.8·T/l`, a slice stays live `0.8·k·T/l + T`
//!   after its birth, so right before a shift `k + 1.25·l` slices are live (30 of 31 at 1%),
//!   every generation full, and the formula gives `p` itself (0.967% at 1% in
//!   `fpr_at_the_worst_moment_of_the_cycle`, measured 0.944%). At the planned rate the worst
//!   moment has `k + l` live slices (0.72% at 1%); planning for that instead would save 4.6% of
//!   the bits at the same shape (32.1 bits per item at 1%), or about 20% without spare slices
//!   (`l = 20`), and give up the headroom. A filter younger than `T + k·T/l` is below both: its
//!   oldest slices hold fewer than `k` generations.
//! * **Above the planned rate**: when a generation has taken its `g` insertions before its time
//!   is up, the next one starts early in a spare slice: more slices, each at its design load,
//!   rather than fuller ones (the paper's filter "supports variable insertion rates while
//!   striving to keep a target false positive rate"; these spares are `sift`'s way, within a
//!   fixed memory). The target `p` holds up to
//!   [`crate::math::AGING_RATE_HEADROOM`] (1.25) times the planned rate. Past that no spare
//!   slice is free, and the filter keeps the promise that matters: it never retires a slice
//!   holding items younger than `T` (no false negative inside the window, ever); the current
//!   generation goes on filling past its design load, the FPR rises, and
//!   [`Filter::expected_fpr`] reports it (computed from the actual generation sizes). Memory
//!   stays what was reserved; reserve for the peak rate when the FPR must hold then too.
//! * **Counting**: as in [`crate::AgingBloom`], an insertion counts toward its generation only
//!   if it set a bit in the youngest slices, so repeats cannot force early generations.
//! * **Limits**: as [`crate::AgingBloom`] (no deletion, rates from 1e-7); `T` is at least
//!   one unit of the clock, and generations last at least one unit.
//!
//! ```
//! use sift::prelude::*;
//! use sift::TimeLimitedBloom;
//!
//! // Items seen in the last 60 s (clock in ms), about 1000 insertions per minute, at 1%.
//! let mut f = TimeLimitedBloom::new(60_000, 1_000, 0.01)?;
//! let start = 1_700_000_000_000u64;
//! // Ten minutes of insertions, one every 60 ms.
//! for i in 0..10_000u64 {
//!     f.insert_at(i.to_le_bytes(), start + i * 60);
//! }
//! let now = start + 9_999 * 60;
//! // Everything from the last 60 s is present, always.
//! assert!((9_000..10_000u64).all(|i| f.contains_at(i.to_le_bytes(), now)));
//! // Items older than 60 s plus a generation are gone: 8 000 of them, and 100 000 never-seen
//! // items, report present at most at a 99.9% binomial bound of 1%.
//! let old = (0..8_000u64).filter(|i| f.contains_at(i.to_le_bytes(), now)).count();
//! assert!(old < 112, "{old} old items still present");
//! let fp = (1_000_000..1_100_000u64).filter(|i| f.contains_at(i.to_le_bytes(), now)).count();
//! assert!(fp < 1_100, "{fp} false positives");
//! # Ok::<(), sift::Error>(())
//! ```

use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::filters::aging::{check_shape, rows_for, Ring, SliceMeta, LAYOUT};
use crate::format::{decode_verified, FilterKind, FrozenFile, ParamWriter};
use crate::hash::{Digest, HashKind, Hasher, HotHasher};
use crate::math::{self, AGING_DEFAULT_MAX_SLICES};
use crate::traits::{Filter, Persist, Timed};

/// A sliding-window Bloom filter over the last `T` units of the caller's clock. See the
/// [module documentation](self).
#[derive(Clone)]
pub struct TimeLimitedBloom {
    ring: Ring,
    hasher: Hasher,
    /// `hasher` with its per-seed constants precomputed, for the hot paths.
    hot: HotHasher,
    /// Counted insertions a generation takes at its design load, `g`.
    generation: u64,
    /// Insertions per `ttl` the filter was sized for.
    capacity: u64,
    /// The window `T`.
    ttl: u64,
    /// The time a generation lasts, `T/l` rounded up.
    span: u64,
    /// The largest `now` seen.
    clock: u64,
    /// When the current generation started.
    gen_start: u64,
    target_fpr: f64,
}

impl PartialEq for TimeLimitedBloom {
    fn eq(&self, other: &Self) -> bool {
        self.ring == other.ring
            && self.hasher == other.hasher
            && self.generation == other.generation
            && self.capacity == other.capacity
            && self.ttl == other.ttl
            && self.span == other.span
            && self.clock == other.clock
            && self.gen_start == other.gen_start
            && self.target_fpr == other.target_fpr
    }
}

impl core::fmt::Debug for TimeLimitedBloom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TimeLimitedBloom")
            .field("ttl", &self.ttl)
            .field("span", &self.span)
            .field("capacity", &self.capacity)
            .field("generation", &self.generation)
            .field("rows", &self.ring.rows())
            .field("slices", &self.ring.slices())
            .field("k", &self.ring.k())
            .field("live", &self.ring.live())
            .field("clock", &self.clock)
            .field("items", &self.ring.held(self.ring.live()))
            .field("hasher", &self.hasher)
            .field("target_fpr", &self.target_fpr)
            .finish()
    }
}

impl TimeLimitedBloom {
    /// A filter whose items inserted within the last `ttl` units of the caller's clock are
    /// always members, sized for `capacity` insertions per `ttl` at false-positive rate `fpr`
    /// ([`math::aging_plan_timed`]), with the default hash. The clock starts at 0; the first
    /// `now` given sets it.
    pub fn new(ttl: u64, capacity: usize, fpr: f64) -> Result<Self> {
        check_items(capacity)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(capacity as u64, fpr);
        Self::with_hasher(ttl, capacity, fpr, Hasher::new(kind, 0))
    }

    /// Like [`TimeLimitedBloom::new`], with a chosen hash function and seed.
    pub fn with_hasher(ttl: u64, capacity: usize, fpr: f64, hasher: Hasher) -> Result<Self> {
        check_items(capacity)?;
        check_fpr(fpr)?;
        if ttl == 0 {
            return Err(Error::param("ttl", ttl, "at least 1 unit of the clock"));
        }
        let plan = math::aging_plan_timed(fpr, AGING_DEFAULT_MAX_SLICES).ok_or(Error::param(
            "fpr",
            fpr,
            "a rate an aging filter can reach: 1e-7 and above",
        ))?;
        // With a TTL of fewer clock units than generations, generations last one unit.
        let l = (plan.l as u64).min(ttl);
        let span = ttl.div_ceil(l);
        // Insertions one generation receives at the planned rate.
        let generation = ((capacity as u128 * span as u128).div_ceil(ttl as u128)).max(1);
        let generation = u64::try_from(generation).map_err(|_| Error::CapacityExceeded {
            requested_bytes: u128::MAX,
            limit_bytes: crate::bits::MAX_BYTES,
        })?;
        let rows = rows_for(generation, plan.load)?;
        let mut f = Self::with_params(rows, plan.slices, plan.k, generation, ttl, span, hasher)?;
        f.capacity = capacity as u64;
        f.target_fpr = fpr;
        Ok(f)
    }

    /// A filter of exactly `rows` rows of `slices` slices (15 or 31: rows of 16 or 32 words),
    /// writing each item into `hashes` slices (1 to 24, fewer than `slices`), whose generations
    /// last `span` units of the clock or `generation` counted insertions, and whose window is
    /// `ttl`. Its [`target_fpr`](TimeLimitedBloom::target_fpr) is the rate with every slice but
    /// one live and full generations.
    pub fn with_params(
        rows: u64,
        slices: u32,
        hashes: u32,
        generation: u64,
        ttl: u64,
        span: u64,
        hasher: Hasher,
    ) -> Result<Self> {
        if generation == 0 {
            return Err(Error::param("generation", generation, "at least 1"));
        }
        if ttl == 0 {
            return Err(Error::param("ttl", ttl, "at least 1 unit of the clock"));
        }
        if span == 0 || span > ttl {
            return Err(Error::param("span", span, "between 1 and the ttl"));
        }
        check_shape(rows, slices, hashes)?;
        let ring = Ring::new(rows, slices, hashes, hashes as usize)?;
        let live = slices as usize - 1;
        let load = generation as f64 / rows as f64;
        let target = math::aging_fpr(hashes, live, &vec![load; live]);
        let per_ttl = (generation as u128 * ttl as u128 / span as u128).min(u64::MAX as u128) as u64;
        let mut f = TimeLimitedBloom {
            ring,
            hasher,
            hot: HotHasher::new(hasher),
            generation,
            capacity: per_ttl.max(1),
            ttl,
            span,
            clock: 0,
            gen_start: 0,
            target_fpr: target.clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON),
        };
        f.refresh_due();
        Ok(f)
    }

    /// The window `T`: items inserted at `t` are members at every `now ≤ t + T`.
    pub fn ttl(&self) -> u64 {
        self.ttl
    }

    /// How long a generation lasts (when it is not ended early by its count), `T/l` rounded up;
    /// an item is gone once it is older than `T` plus this.
    pub fn generation_span(&self) -> u64 {
        self.span
    }

    /// Counted insertions a generation takes at its design load, `g`.
    pub fn generation_size(&self) -> u64 {
        self.generation
    }

    /// Insertions per `ttl` the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Slices per row.
    pub fn num_slices(&self) -> u32 {
        self.ring.slices() as u32
    }

    /// Slices each item is written into, `k`.
    pub fn num_hashes(&self) -> u32 {
        self.ring.k() as u32
    }

    /// Rows (each one word per slice).
    pub fn num_rows(&self) -> u64 {
        self.ring.rows()
    }

    /// Slices queried at the clock (the `k` youngest and those holding items younger than the
    /// window).
    pub fn live_slices(&self) -> u32 {
        self.ring.live() as u32
    }

    /// The false-positive rate the filter was sized for (up to the rate headroom).
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Bytes the filter has allocated outside its own struct: the rows
    /// ([`Filter::size_in_bytes`]) and one record per slice (its generation's size and its
    /// birth, 16 bytes). A filter in memory takes this plus `size_of::<TimeLimitedBloom>()`.
    pub fn heap_bytes(&self) -> usize {
        self.ring.heap_bytes()
    }

    /// The probe kernel in use: `"avx2"` or `"scalar"`.
    pub fn kernel_name(&self) -> &'static str {
        self.ring.kernel_name()
    }

    /// Switches to the portable kernel (tests cover both; the bits are the same).
    #[doc(hidden)]
    pub fn force_scalar(&mut self) {
        self.ring.force_scalar();
    }

    /// How long ago (at the clock) the oldest live slice became the youngest: how far back the
    /// filter can still remember (between `T` and `T` plus a generation in the steady state).
    pub fn oldest_slice_age(&self) -> u64 {
        let oldest = self.ring.meta_at(self.ring.live() - 1);
        self.clock.saturating_sub(oldest.born)
    }

    /// [`Filter::len`] as of `now`, without moving the clock: the counted insertions of the
    /// generations still inside the window then (a `now` before the clock answers at the clock).
    pub fn len_at(&self, now: u64) -> u64 {
        self.ring.held(self.live_at(now))
    }

    /// [`Filter::expected_fpr`] as of `now`, without moving the clock: the rate for never-seen
    /// items with the slices still live then. For a reader that must not write (a replica, an
    /// `INFO` command): the clock only moves by [`Timed::advance`] and the insertions.
    pub fn expected_fpr_at(&self, now: u64) -> f64 {
        self.ring.expected_fpr(self.live_at(now))
    }

    /// [`oldest_slice_age`](Self::oldest_slice_age) as of `now`, without moving the clock: how
    /// long before `now` the oldest slice still live then became the youngest (0 when nothing
    /// is left: a gap longer than the TTL).
    pub fn oldest_slice_age_at(&self, now: u64) -> u64 {
        let now = now.max(self.clock);
        match self.live_at(now) {
            0 => 0,
            live => now.saturating_sub(self.ring.meta_at(live - 1).born),
        }
    }

    /// Counted insertions of the current generation (the window moves on when it reaches
    /// [`generation_size`](Self::generation_size), or, for a window by time, when its time is up).
    pub fn current_generation(&self) -> u64 {
        self.ring.current_items()
    }

    /// Fraction of the bits of the `i`-th youngest slice that are set (reads one word per row).
    ///
    /// # Panics
    /// If `i` is not below [`TimeLimitedBloom::num_slices`].
    pub fn slice_fill(&self, i: usize) -> f64 {
        assert!(i < self.ring.slices(), "slice {i} of {}", self.ring.slices());
        self.ring.slice_fill(i)
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// the parameters, clock and slice records are copied now, the rows are guarded (pieces of
    /// [`crate::bits::COW_PIECE`] bytes copied aside by the writes that reach them before the
    /// file has been written), so that no write waits for a copy of the whole filter. `None` for
    /// a filter small enough to copy (not in its own huge-page allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        self.ring.freeze(Self::KIND, self.hasher, &self.params())
    }

    /// Forgets everything (the clock stays).
    pub fn clear(&mut self) {
        let k = self.ring.k();
        self.ring.reset(k, self.clock);
        self.gen_start = self.clock;
        self.refresh_due();
    }

    /// Inserts `item` at `now` without answering whether it was present: the filter afterwards
    /// is the one [`Timed::insert_at`] leaves, bit for bit (same clock, same generations), but
    /// only the item's `k` youngest slices are read, where `insert_at` reads every slice of the
    /// row to answer. For streams that only need the window kept (a replica applying its
    /// primary's insertions at the primary's `now`, a log replayed), not a reply per item.
    // Always inlined, as `AgingBloom::push`.
    #[inline(always)]
    pub fn push_at<T: AsRef<[u8]>>(&mut self, item: T, now: u64) {
        let d = self.hot.digest(item.as_ref());
        self.push_digest_at(d, now);
    }

    /// [`TimeLimitedBloom::push_at`] of the item with this digest.
    #[inline(always)]
    pub fn push_digest_at(&mut self, d: Digest, now: u64) {
        self.before_insert(now);
        self.ring.push(d);
    }

    /// [`TimeLimitedBloom::push_at`] of many items, all at `now`.
    pub fn push_many_at<T: AsRef<[u8]>>(&mut self, items: &[T], now: u64) {
        for item in items {
            self.push_at(item, now);
        }
    }

    /// Moves the clock to `now` and, when the current generation is full before its time,
    /// starts the next one in a free slice: what precedes every insertion.
    #[inline(always)]
    fn before_insert(&mut self, now: u64) {
        self.advance(now);
        if self.ring.current_items() >= self.generation && self.ring.live() < self.ring.slices() {
            self.ring.shift(self.clock);
            self.gen_start = self.clock;
            self.refresh_due();
        }
    }

    /// The first time at which moving the clock has work to do: the current generation's time
    /// is up (`gen_start + span`), or the oldest live slice beyond the `k` youngest expires
    /// (its last insertion plus the TTL, plus one). Moving the clock from `old` past the TTL
    /// needs no test of its own: `gen_start ≤ old` and `span ≤ ttl`, so such a `now` is past
    /// `gen_start + span` too.
    fn due_in_full(&self) -> u64 {
        let due = self.gen_start.saturating_add(self.span);
        let (live, k) = (self.ring.live(), self.ring.k());
        if live > k {
            due.min(self.ring.left_at(live - 1).saturating_add(self.ttl).saturating_add(1))
        } else {
            due
        }
    }

    /// Caches [`TimeLimitedBloom::due_in_full`] in the ring, as an offset from the generation's
    /// start (`u32::MAX`: too far to cache, computed in full at every move of the clock).
    /// Called after every change of what it reads: a generation started, a slice retired, a
    /// reset, a decode.
    fn refresh_due(&mut self) {
        let ahead = self.due_in_full().saturating_sub(self.gen_start);
        self.ring.due = u32::try_from(ahead).unwrap_or(u32::MAX);
    }

    /// [`TimeLimitedBloom::due_in_full`], from the cache when it holds it: one addition instead
    /// of reading the oldest slice's retirement time (a bit of the ring and the birth of the
    /// slice `k` younger) at every insertion.
    #[inline(always)]
    fn due(&self) -> u64 {
        match self.ring.due {
            u32::MAX => self.due_in_full(),
            ahead => self.gen_start + u64::from(ahead),
        }
    }

    /// Whether the slice's last insertion is more than `ttl` before `now`.
    fn expired(ttl: u64, now: u64, left: u64) -> bool {
        now > left.saturating_add(ttl)
    }

    fn retire_at(&mut self, now: u64) {
        let ttl = self.ttl;
        self.ring.retire(|left| Self::expired(ttl, now, left));
    }

    /// Live slices as of `now` (at or after the clock), without changing the filter: the
    /// young slices cannot expire before `clock + ttl` (they take insertions until the next
    /// generation, which starts no earlier than the clock), and past that everything has.
    fn live_at(&self, now: u64) -> usize {
        let live = self.ring.live();
        if now <= self.clock {
            return live;
        }
        if now - self.clock > self.ttl {
            return 0;
        }
        let k = self.ring.k();
        let mut l = live;
        while l > k && Self::expired(self.ttl, now, self.ring.left_at(l - 1)) {
            l -= 1;
        }
        l
    }

    /// [`Timed::advance`] past its fast path: the clock moved from `old` to `now`.
    #[inline(never)]
    fn catch_up(&mut self, old: u64, now: u64) {
        if now - old > self.ttl {
            // Everything inserted so far is older than the window: start afresh.
            let k = self.ring.k();
            self.ring.reset(k, now);
            self.gen_start = now;
            self.refresh_due();
            return;
        }
        // Start the generations whose time came, each at its due time (no insertion happened
        // since `old`, so any time from `old` on is a faithful stamp). At most one per slice.
        loop {
            let due = self.gen_start.saturating_add(self.span);
            if due > now {
                break;
            }
            let mut t = due.max(old);
            self.retire_at(t);
            if self.ring.live() >= self.ring.slices() {
                // Every slice holds items of the window (the rate overran the spares): the
                // oldest frees when its last insertion leaves the window.
                let left = self.ring.left_at(self.ring.live() - 1);
                t = left.saturating_add(self.ttl).saturating_add(1).max(t);
                if t > now {
                    break;
                }
                self.retire_at(t);
                if self.ring.live() >= self.ring.slices() {
                    break;
                }
            }
            self.ring.shift(t);
            self.gen_start = t;
        }
        self.retire_at(now);
        self.refresh_due();
    }

    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        self.ring.write_shape(&mut p);
        p.u64(self.generation)
            .u64(self.capacity)
            .u64(self.ttl)
            .u64(self.span)
            .f64(self.target_fpr)
            .u64(self.clock)
            .u64(self.gen_start)
            .u32(self.ring.head() as u32)
            .u32(self.ring.live() as u32)
            .u32(LAYOUT)
            .u32(self.ring.epoch());
        for (i, m) in self.ring.meta().iter().enumerate() {
            p.u64(m.items).u64(m.born).u64(self.ring.left_of(i));
        }
        p
    }
}

impl Filter for TimeLimitedBloom {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// At the filter's clock.
    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        self.ring.contains(d, self.ring.live())
    }

    /// Same answer as the trait's default; reads the hasher in place instead of copying it out.
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.ring.contains(self.hot.digest(item.as_ref()), self.ring.live())
    }

    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        self.ring.contains_batch(digests, self.ring.live(), out);
    }

    /// Counted insertions of the generations the window holds, at the clock.
    fn len(&self) -> usize {
        self.ring.held(self.ring.live()).min(usize::MAX as u64) as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.ring.size_in_bytes()
    }

    /// [`math::aging_fpr`] with the sizes of the live generations at the clock: below the
    /// target at or under the planned rate, above it when the rate overran the spare slices.
    fn expected_fpr(&self) -> f64 {
        self.ring.expected_fpr(self.ring.live())
    }
}

impl Timed for TimeLimitedBloom {
    fn clock(&self) -> u64 {
        self.clock
    }

    #[inline]
    fn advance(&mut self, now: u64) {
        if now <= self.clock {
            return;
        }
        let old = self.clock;
        self.clock = now;
        // Most calls (an insertion a moment after the last one) have nothing to start or
        // retire: one comparison with the cached due time, and the rest stays out of line.
        if now >= self.due() {
            self.catch_up(old, now);
        }
    }

    #[inline]
    fn insert_digest_at(&mut self, d: Digest, now: u64) -> bool {
        self.before_insert(now);
        !self.ring.insert(d).0
    }

    #[inline]
    fn contains_digest_at(&self, d: Digest, now: u64) -> bool {
        let live = self.live_at(now);
        live >= self.ring.k() && self.ring.contains(d, live)
    }

    /// Same effect as the trait's default, without copying the hasher out.
    #[inline]
    fn insert_at<T: AsRef<[u8]>>(&mut self, item: T, now: u64) -> bool {
        let d = self.hot.digest(item.as_ref());
        self.insert_digest_at(d, now)
    }

    /// Same answer as the trait's default, without copying the hasher out.
    #[inline]
    fn contains_at<T: AsRef<[u8]>>(&self, item: T, now: u64) -> bool {
        self.contains_digest_at(self.hot.digest(item.as_ref()), now)
    }
}

impl Persist for TimeLimitedBloom {
    const KIND: FilterKind = FilterKind::TimeLimitedBloom;

    /// Parameters: rows `u64`, slices `u32`, hashes `u32`, generation `u64`, capacity `u64`,
    /// ttl `u64`, span `u64`, target FPR `f64`, clock `u64`, generation start `u64`, head `u32`,
    /// live `u32`, layout `u32` (1), epoch `u32`, then per slice (physical order) its
    /// generation's counted insertions, birth time and retirement time, `u64` each. Payload:
    /// the rows, as for [`crate::AgingBloom`] (`docs/FORMAT.md`).
    fn to_bytes(&self) -> Vec<u8> {
        self.ring.encode(Self::KIND, self.hasher, &self.params())
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let shape = Ring::read_shape(&mut r, "time-limited bloom: bad shape")?;
        let generation = r.u64("generation")?;
        let capacity = r.u64("capacity")?;
        let ttl = r.u64("ttl")?;
        let span = r.u64("span")?;
        let target_fpr = r.fpr("target fpr")?;
        let clock = r.u64("clock")?;
        let gen_start = r.u64("generation start")?;
        let head = r.u32("head")?;
        let live = r.u32("live")?;
        let layout = r.u32("layout")?;
        let epoch = r.u32("epoch")?;
        let mut meta = Vec::with_capacity(shape.1 as usize);
        let mut lefts = Vec::with_capacity(shape.1 as usize);
        for _ in 0..shape.1 {
            let items = r.u64("generation items")?;
            let born = r.u64("born")?;
            lefts.push(r.u64("left")?);
            meta.push(SliceMeta { items, born });
        }
        r.finish()?;
        let bad = |what| Err(Error::from(FormatError::InvalidParams(what)));
        if layout != LAYOUT {
            return bad("time-limited bloom: unknown row layout");
        }
        if generation == 0 || capacity == 0 || ttl == 0 || span == 0 || span > ttl {
            return bad("time-limited bloom: zero generation, capacity, ttl or span, or span past the ttl");
        }
        if gen_start > clock || meta.iter().any(|m| m.born > clock) || lefts.iter().any(|&t| t > clock) {
            return bad("time-limited bloom: a time past the clock");
        }
        let ring = Ring::decode(shape, head, live, epoch, meta, &lefts, raw.payload())?;
        let mut f = TimeLimitedBloom {
            ring,
            hasher: raw.hasher(),
            hot: HotHasher::new(raw.hasher()),
            generation,
            capacity,
            ttl,
            span,
            clock,
            gen_start,
            target_fpr,
        };
        f.refresh_due();
        Ok(f)
    }

    /// The bytes of [`Persist::to_bytes`], streamed.
    fn write_to<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        self.ring.write_to(w, Self::KIND, self.hasher, &self.params())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::blocked_bloom::tests::{digest, splitmix, upper_bound};
    use crate::format::{assert_each_write_keeps_frozen, NamedWrite};

    /// The due time cached in the ring is the one computed in full after every kind of step
    /// (steady insertions, a rate above the plan filling the spares, gaps shorter and longer
    /// than the TTL, `clear`, a decoded file), and a span too long to cache (past `u32::MAX`
    /// units) falls back to the full computation and keeps the window.
    #[test]
    fn the_cached_due_time_is_the_full_one() {
        let check = |f: &TimeLimitedBloom, at: &str| {
            assert_eq!(f.due(), f.due_in_full(), "{at}");
            assert_ne!(f.ring.due, u32::MAX, "{at}: a short span is cached");
        };
        let ttl = 10_000u64;
        let mut f = TimeLimitedBloom::new(ttl, 500, 0.01).unwrap();
        check(&f, "new");
        let mut st = 5;
        let mut now = 1_000_000u64;
        for i in 0..40_000u64 {
            now += match i {
                0..=9_999 => splitmix(&mut st) % 40,
                10_000..=19_999 => splitmix(&mut st) % 6,
                _ if i % 5_000 == 0 => ttl + 1 + splitmix(&mut st) % ttl,
                _ if i % 700 == 0 => ttl / 3,
                _ => splitmix(&mut st) % 40,
            };
            if i % 2 == 0 {
                f.insert_digest_at(digest(&mut st), now);
            } else {
                f.push_digest_at(digest(&mut st), now);
            }
            check(&f, &format!("step {i}"));
            if i % 9_999 == 0 {
                let g = TimeLimitedBloom::from_bytes(&f.to_bytes()).unwrap();
                check(&g, "decoded");
                assert_eq!(g.ring.due, f.ring.due);
            }
        }
        f.clear();
        check(&f, "clear");

        let ttl = 1u64 << 40;
        let mut f = TimeLimitedBloom::new(ttl, 1_000, 0.01).unwrap();
        assert_eq!(f.ring.due, u32::MAX);
        let step = ttl / 1_000;
        let ds: Vec<Digest> = (0..6_000).map(|_| digest(&mut st)).collect();
        for (i, &d) in ds.iter().enumerate() {
            f.insert_digest_at(d, i as u64 * step);
            assert_eq!(f.due(), f.due_in_full());
        }
        let now = 5_999 * step;
        assert!(ds[4_999..].iter().all(|&d| f.contains_digest_at(d, now)), "the window");
        // Older than the TTL plus a generation: at the 1% rate, far below 5%.
        let old = ds[..4_900].iter().filter(|&&d| f.contains_digest_at(d, now)).count();
        assert!(old < 4_900 / 20, "{old} of 4900 expired items still present");
    }

    /// The struct sizes a server's `MEMORY USAGE` of an `SF` key counts (with `AnyFilter`, whose
    /// largest variant this is): what the hot path caches must fit in what was already there.
    #[test]
    fn struct_sizes_stay() {
        use core::mem::size_of;
        let sizes =
            (size_of::<TimeLimitedBloom>(), size_of::<crate::AgingBloom>(), size_of::<crate::AnyFilter>());
        assert_eq!(sizes, (520, 488, 520), "measured before the due time was cached");
    }

    /// `push_at` builds the filter `insert_at` builds, bit for bit, at the planned rate, above
    /// it (early generations in spare slices), across gaps longer than a generation and longer
    /// than the TTL, on both kernels; and it keeps the window.
    #[test]
    fn push_builds_what_insert_builds() {
        for scalar in [false, true] {
            let ttl = 100_000u64;
            let mut a = TimeLimitedBloom::new(ttl, 2_000, 0.01).unwrap();
            if scalar {
                a.force_scalar();
            }
            let mut b = a.clone();
            let mut st = 21;
            let mut now = 1_000u64;
            let mut times: Vec<(u64, Digest)> = Vec::new();
            for i in 0..30_000u64 {
                // Steady, then three times the planned rate, then gaps.
                now += match i {
                    0..=9_999 => 25 + splitmix(&mut st) % 50,
                    10_000..=19_999 => 5 + splitmix(&mut st) % 20,
                    _ if i % 4_000 == 0 => ttl + 1,
                    _ if i % 1_000 == 0 => ttl / 10,
                    _ => 25 + splitmix(&mut st) % 50,
                };
                let d = if i % 7 == 6 { times[times.len() - 3].1 } else { digest(&mut st) };
                a.insert_digest_at(d, now);
                b.push_digest_at(d, now);
                times.push((now, d));
                if i % 97 == 0 {
                    assert!(a == b, "apart after {i}");
                }
                let oldest = times.partition_point(|&(t, _)| now - t > ttl);
                assert!(b.contains_digest_at(times[oldest].1, now), "item {oldest} missing at {i}");
            }
            assert!(a == b);
            assert_eq!(a.to_bytes(), b.to_bytes());
        }
        let mut a = TimeLimitedBloom::new(1_000, 100, 0.01).unwrap();
        let mut b = a.clone();
        let items: Vec<[u8; 4]> = (0..1000u32).map(|i| i.to_le_bytes()).collect();
        for (t, chunk) in items.chunks(10).enumerate() {
            a.insert_many_at(chunk, t as u64 * 7);
            b.push_many_at(chunk, t as u64 * 7);
        }
        assert_eq!(a.to_bytes(), b.to_bytes());
    }

    /// Insertions at a steady rate with jittered times: every item younger than the TTL is
    /// present at every later step, on both kernels.
    #[test]
    fn window_is_always_present() {
        for (ttl, capacity, p) in [(1_000u64, 500usize, 0.01), (60_000, 2_000, 0.1), (7, 50, 0.001)] {
            for scalar in [false, true] {
                let mut f = TimeLimitedBloom::new(ttl, capacity, p).unwrap();
                if scalar {
                    f.force_scalar();
                }
                let mut st = ttl ^ capacity as u64;
                let mut now = 1_000_000u64;
                let mut log: Vec<(u64, Digest)> = Vec::new();
                for i in 0..capacity * 8 {
                    // Mean interval ttl/capacity, jittered ±50%, sometimes equal times.
                    let mean = (ttl as f64 / capacity as f64).max(0.0);
                    now += (mean * (0.5 + (splitmix(&mut st) % 1000) as f64 / 1000.0)) as u64;
                    let d = digest(&mut st);
                    f.insert_digest_at(d, now);
                    log.push((now, d));
                    let first = log.partition_point(|(t, _)| now - t > ttl);
                    assert!(f.contains_digest_at(log[first].1, now), "ttl {ttl}: step {i}");
                    if i % 499 == 0 {
                        assert!(
                            log[first..].iter().all(|(_, d)| f.contains_digest(*d)),
                            "ttl {ttl} step {i}"
                        );
                        // Queries in the future (without moving the clock) forget only by age.
                        let later = now + ttl / 2;
                        let first_later = log.partition_point(|(t, _)| later - t > ttl);
                        assert!(log[first_later..].iter().all(|(_, d)| f.contains_digest_at(*d, later)));
                    }
                }
            }
        }
    }

    /// Old items and never-seen items report present at most at the target rate; the formula
    /// matches the measured rate.
    #[test]
    fn fpr_over_a_stream() {
        for (capacity, p) in [(20_000usize, 0.1), (20_000, 0.01), (50_000, 0.001)] {
            let ttl = 100_000u64;
            let mut f = TimeLimitedBloom::new(ttl, capacity, p).unwrap();
            let mut st = 99;
            let step = ttl / capacity as u64;
            let ds: Vec<Digest> = (0..capacity * 5).map(|_| digest(&mut st)).collect();
            let start = 5u64;
            for (i, d) in ds.iter().enumerate() {
                f.insert_digest_at(*d, start + i as u64 * step);
            }
            let now = f.clock();
            let gone_before = (now - ttl - f.generation_span() - start) / step;
            let old = ds[..gone_before as usize].iter().filter(|d| f.contains_digest(**d)).count();
            let probes = 400_000;
            let fp = (0..probes).filter(|_| f.contains_digest(digest(&mut st))).count();
            let rate = fp as f64 / probes as f64;
            let expected = f.expected_fpr();
            eprintln!(
                "ttl {ttl} capacity {capacity} p {p}: {:.2} bits/item, k {} slices {} live {}, measured {rate:.5}, \
                 old {:.5}, expected {expected:.5}",
                f.size_in_bytes() as f64 * 8.0 / capacity as f64,
                f.num_hashes(),
                f.num_slices(),
                f.live_slices(),
                old as f64 / gone_before as f64
            );
            assert!(expected <= p, "expected {expected}");
            assert!(fp as f64 <= probes as f64 * upper_bound(p, probes as f64), "measured {rate}");
            assert!(old as f64 <= gone_before as f64 * upper_bound(p, gone_before as f64), "old {old}");
            let sd = (expected * (1.0 - expected) / probes as f64).sqrt();
            assert!((rate - expected).abs() <= 3.3 * sd + 0.03 * expected, "measured {rate} vs {expected}");
        }
    }

    /// The worst moment of the slice cycle the plan covers: the steady state at the highest
    /// rate the target holds for ([`math::AGING_RATE_HEADROOM`] times the planned one), right
    /// before a shift, with every generation full: every slice but the free one is live, the
    /// case `aging_plan_timed` sizes for, and it is reached (the formula then gives the target
    /// itself, so the plan is not loose); never-seen items report present within the binomial
    /// bound of `p` there. At the planned rate the same moment has `k + l` live slices only.
    #[test]
    fn fpr_at_the_worst_moment_of_the_cycle() {
        let (ttl, capacity, p) = (1_000_000u64, 4_000usize, 0.01);
        for (factor, all_but_one) in [(1.0, false), (math::AGING_RATE_HEADROOM, true)] {
            let mut f = TimeLimitedBloom::new(ttl, capacity, p).unwrap();
            let mut st = 41;
            let step = ttl as f64 / (capacity as f64 * factor);
            let (mut i, mut worst) = (0u64, None);
            // Three windows to reach the steady state, then the end of the next full generation.
            while worst.is_none() {
                let now = 1 + (i as f64 * step) as u64;
                let before = f.clone();
                f.insert_digest_at(digest(&mut st), now);
                if i as f64 * step > 3.0 * ttl as f64 && f.current_generation() == 1 {
                    // That insertion started a generation: the filter just before it was at the
                    // end of the previous one.
                    worst = Some(before);
                }
                i += 1;
            }
            let f = worst.unwrap();
            let plan = math::aging_plan_timed(p, math::AGING_DEFAULT_MAX_SLICES).unwrap();
            let live = f.live_slices();
            if all_but_one {
                assert_eq!(live, f.num_slices() - 1, "factor {factor}");
            } else {
                assert!(live <= plan.k + plan.l + 1, "factor {factor}: live {live}");
            }
            let expected = f.expected_fpr();
            let probes = 400_000;
            let fp = (0..probes).filter(|_| f.contains_digest(digest(&mut st))).count();
            let rate = fp as f64 / probes as f64;
            eprintln!(
                "factor {factor}: live {live} of {}, expected {expected:.5}, measured {rate:.5}",
                f.num_slices()
            );
            assert!(fp as f64 <= probes as f64 * upper_bound(p, probes as f64), "factor {factor}: {rate}");
            let sd = (expected * (1.0 - expected) / probes as f64).sqrt();
            assert!((rate - expected).abs() <= 3.3 * sd + 0.05 * expected, "measured {rate} vs {expected}");
            if all_but_one {
                assert!(
                    expected > 0.9 * p && expected <= p * 1.000_001,
                    "factor {factor}: expected {expected}"
                );
            }
        }
    }

    /// The read-only `*_at(now)` answers are those of the filter after `advance(now)`, at
    /// every phase: inside a generation, across shifts and retirements, past a gap longer than
    /// the TTL, and before the clock.
    #[test]
    fn answers_at_a_time_are_those_after_advancing() {
        let mut f = TimeLimitedBloom::new(10_000, 500, 0.01).unwrap();
        let mut st = 17;
        let mut items = Vec::new();
        for i in 0..3_000u64 {
            let d = digest(&mut st);
            f.insert_digest_at(d, 1_000 + i * 20 + splitmix(&mut st) % 15);
            items.push(d);
            if i % 97 != 0 {
                continue;
            }
            let clock = f.clock();
            for later in
                [0, 1, 7, f.generation_span(), 3_333, 10_000, 10_001, 10_000 + f.generation_span(), 25_000]
            {
                let now = clock + later;
                let mut g = f.clone();
                g.advance(now);
                assert_eq!(f.len_at(now), g.len() as u64, "len at +{later}");
                // The same generations, but advancing adds the new, empty ones at the young
                // end: the formula's rounding (about 1e-11, `math::AGING_MIN_FPR`) may differ.
                let (at, after) = (f.expected_fpr_at(now), g.expected_fpr());
                assert!((at - after).abs() <= 1e-9 * (1.0 + after), "fpr at +{later}: {at} vs {after}");
                assert_eq!(f.oldest_slice_age_at(now), g.oldest_slice_age(), "age at +{later}");
                let recent = &items[items.len().saturating_sub(600)..];
                assert!(recent.iter().all(|d| f.contains_digest_at(*d, now) == g.contains_digest(*d)));
            }
            assert_eq!(f.len_at(0), f.len() as u64);
            assert_eq!(f.expected_fpr_at(0), f.expected_fpr());
            assert_eq!(f.oldest_slice_age_at(0), f.oldest_slice_age());
        }
    }

    /// Time going backwards never forgets: an earlier `now` acts as the clock.
    #[test]
    fn time_going_backwards_forgets_nothing() {
        let mut f = TimeLimitedBloom::new(1000, 100, 0.01).unwrap();
        let mut st = 4;
        let a = digest(&mut st);
        f.insert_digest_at(a, 10_000);
        let b = digest(&mut st);
        f.insert_digest_at(b, 5_000); // a late clock: stamped 10 000
        assert_eq!(f.clock(), 10_000);
        f.advance(3);
        assert!(f.contains_digest_at(a, 11_000) && f.contains_digest_at(b, 11_000));
        assert!(f.contains_digest_at(b, 0), "a query in the past answers at the clock");
        f.advance(11_000);
        assert!(f.contains_digest(a) && f.contains_digest(b));
    }

    /// A gap longer than the TTL forgets everything in one step; a gap of many generations but
    /// less than the TTL keeps the window and costs at most one shift per slice.
    #[test]
    fn gaps() {
        let mut f = TimeLimitedBloom::new(10_000, 1000, 0.01).unwrap();
        let mut st = 6;
        let ds: Vec<Digest> = (0..1000).map(|_| digest(&mut st)).collect();
        for (i, d) in ds.iter().enumerate() {
            f.insert_digest_at(*d, 1 + i as u64 * 10);
        }
        let last = f.clock();
        // Just under the TTL after the last insertion: the last items are still there, and
        // stay at every time up to their insertion plus the TTL.
        f.advance(last + 9_000);
        assert!(ds[950..].iter().all(|d| f.contains_digest(*d)));
        assert!(f.contains_digest_at(ds[999], last + 10_000));
        // One generation later every item is gone: they answer like never-seen items.
        let after = last + 10_000 + f.generation_span() + 1;
        let left = ds.iter().filter(|d| f.contains_digest_at(**d, after)).count();
        assert!(left as f64 <= 1000.0 * upper_bound(0.01, 1000.0), "{left} still present");
        f.advance(after);
        assert_eq!(ds.iter().filter(|d| f.contains_digest(**d)).count(), left);
        // A huge jump (u64 range): all gone, filter empty, usable.
        f.advance(u64::MAX / 2);
        assert!(f.is_empty() && f.expected_fpr() == 0.0);
        assert_eq!(f.oldest_slice_age(), 0, "nothing older than the jump is remembered");
        assert!(ds.iter().all(|d| !f.contains_digest(*d)));
        let d = digest(&mut st);
        f.insert_digest_at(d, u64::MAX / 2 + 1);
        assert!(f.contains_digest(d));
        // The end of the clock's range saturates instead of overflowing.
        f.insert_digest_at(d, u64::MAX);
        assert!(f.contains_digest_at(d, u64::MAX));
    }

    /// Above the planned rate: spare slices first (the FPR stays at the target up to the
    /// headroom), then the generations overfill: never a false negative inside the window, and
    /// `expected_fpr` reports the rise.
    #[test]
    fn rate_above_the_plan() {
        let (ttl, capacity, p) = (10_000u64, 2_000usize, 0.01);
        for factor in [1.2f64, 3.0, 10.0] {
            let mut f = TimeLimitedBloom::new(ttl, capacity, p).unwrap();
            let mut st = 12;
            let n = (capacity as f64 * factor * 3.0) as usize;
            let step = ttl as f64 / (capacity as f64 * factor);
            let mut log = Vec::with_capacity(n);
            for i in 0..n {
                let now = (i as f64 * step) as u64 + 1;
                let d = digest(&mut st);
                f.insert_digest_at(d, now);
                log.push((now, d));
            }
            let now = f.clock();
            let first = log.partition_point(|(t, _)| now - t > ttl);
            assert!(
                log[first..].iter().all(|(_, d)| f.contains_digest(*d)),
                "factor {factor}: false negative"
            );
            let probes = 200_000;
            let fp = (0..probes).filter(|_| f.contains_digest(digest(&mut st))).count();
            let rate = fp as f64 / probes as f64;
            let expected = f.expected_fpr();
            eprintln!("factor {factor}: live {} measured {rate:.5} expected {expected:.5}", f.live_slices());
            let sd = (expected * (1.0 - expected) / probes as f64).sqrt();
            if factor <= math::AGING_RATE_HEADROOM {
                assert!(fp as f64 <= probes as f64 * upper_bound(p, probes as f64), "{rate}");
                assert!(
                    (rate - expected).abs() <= 3.3 * sd + 0.05 * expected,
                    "measured {rate} vs {expected}"
                );
            } else {
                // Saturated generations: many insertions set no new bit and go uncounted, so
                // the estimate runs a little low (8% at 3×); it still shows the rise.
                assert!(expected > 10.0 * p, "the rise is reported: {expected}");
                assert_eq!(f.live_slices(), f.num_slices(), "every slice in use");
                assert!(
                    (rate - expected).abs() <= 3.3 * sd + 0.15 * expected,
                    "measured {rate} vs {expected}"
                );
            }
        }
    }

    /// Repeats do not start generations early.
    #[test]
    fn repeats_do_not_start_generations() {
        let mut f = TimeLimitedBloom::new(1000, 100, 0.01).unwrap();
        let mut st = 2;
        let d = digest(&mut st);
        for t in 0..10_000 {
            f.insert_digest_at(d, 1 + t / 100);
        }
        assert!(f.live_slices() <= f.num_hashes() + 2, "live {}", f.live_slices());
    }

    /// The same calls with the same times give the same bytes; a decoded filter goes on
    /// exactly as the original.
    #[test]
    fn deterministic_and_round_trips() {
        let run = || {
            let mut f = TimeLimitedBloom::new(5_000, 1_000, 0.01).unwrap();
            let mut st = 31;
            for i in 0..4_000u64 {
                f.insert_digest_at(digest(&mut st), 100 + i * 7 + (i % 3));
            }
            f
        };
        let (a, b) = (run(), run());
        assert_eq!(a.to_bytes(), b.to_bytes());
        let mut c = TimeLimitedBloom::from_bytes(&a.to_bytes()).unwrap();
        assert_eq!(c, a);
        let mut a = a;
        let mut st = 32;
        for i in 0..3_000u64 {
            let d = digest(&mut st);
            let now = 30_000 + i * 11;
            assert_eq!(a.insert_digest_at(d, now), c.insert_digest_at(d, now));
        }
        assert_eq!(a.to_bytes(), c.to_bytes());
        let mut streamed = Vec::new();
        a.write_to(&mut streamed).unwrap();
        assert_eq!(streamed, a.to_bytes());
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            TimeLimitedBloom::new(0, 10, 0.01),
            Err(Error::InvalidParameter { name: "ttl", .. })
        ));
        assert!(matches!(
            TimeLimitedBloom::new(10, 0, 0.01),
            Err(Error::InvalidParameter { name: "expected_items", .. })
        ));
        assert!(matches!(
            TimeLimitedBloom::new(10, 10, 1.0),
            Err(Error::InvalidParameter { name: "fpr", .. })
        ));
        assert!(matches!(TimeLimitedBloom::new(1, usize::MAX, 0.01), Err(Error::CapacityExceeded { .. })));
        let h = Hasher::default();
        assert!(TimeLimitedBloom::with_params(1, 15, 4, 1, 10, 0, h).is_err());
        assert!(TimeLimitedBloom::with_params(1, 15, 4, 1, 10, 11, h).is_err());
        assert!(TimeLimitedBloom::with_params(1, 15, 4, 0, 10, 1, h).is_err());
        assert!(TimeLimitedBloom::with_params(1, 15, 4, 1, 10, 1, h).is_ok());
        // A TTL shorter than the planned generations: one-unit generations.
        let f = TimeLimitedBloom::new(3, 100, 0.01).unwrap();
        assert_eq!(f.generation_span(), 1);
    }

    fn reencode(bytes: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let raw = crate::format::decode(bytes).unwrap();
        let mut params = raw.params().to_vec();
        edit(&mut params);
        let mut e = crate::format::Encoder::new(
            FilterKind::TimeLimitedBloom,
            raw.hasher(),
            &params,
            raw.payload().len() as u64,
        );
        e.payload().extend_from_slice(raw.payload());
        e.finish()
    }

    #[test]
    fn inconsistent_parameters_are_errors() {
        let mut f = TimeLimitedBloom::new(1000, 200, 0.01).unwrap();
        let mut st = 1;
        for i in 0..1000u64 {
            f.insert_digest_at(digest(&mut st), 50 + i * 3);
        }
        let bytes = f.to_bytes();
        assert_eq!(TimeLimitedBloom::from_bytes(&reencode(&bytes, |_| {})).unwrap(), f);
        let set32 =
            |at: usize, v: u32| move |p: &mut Vec<u8>| p[at..at + 4].copy_from_slice(&v.to_le_bytes());
        let set64 =
            |at: usize, v: u64| move |p: &mut Vec<u8>| p[at..at + 8].copy_from_slice(&v.to_le_bytes());
        let cases: Vec<Vec<u8>> = vec![
            reencode(&bytes, set64(16, 0)),                  // generation
            reencode(&bytes, set64(24, 0)),                  // capacity
            reencode(&bytes, set64(32, 0)),                  // ttl
            reencode(&bytes, set64(40, 0)),                  // span
            reencode(&bytes, set64(40, 1_001)),              // span past the ttl
            reencode(&bytes, set64(48, f64::NAN.to_bits())), // fpr
            reencode(&bytes, set64(64, u64::MAX)),           // generation start past the clock
            reencode(&bytes, set32(72, 64)),                 // head
            reencode(&bytes, set32(76, 0)),                  // live below k
            reencode(&bytes, set32(76, 33)),                 // live above the slices
            reencode(&bytes, set32(80, 7)),                  // layout
            reencode(&bytes, set64(88 + 8, u64::MAX)),       // a birth past the clock
            reencode(&bytes, set64(88 + 16, 1)),             // a retirement that is no younger slice's birth
            reencode(&bytes, |p| p.truncate(100)),           // short
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(
                matches!(TimeLimitedBloom::from_bytes(c), Err(Error::Format(_))),
                "case {i}: {:?}",
                TimeLimitedBloom::from_bytes(c)
            );
        }
    }

    /// A filter of 8 MiB of rows (huge storage on Linux, so it freezes) with 17,500 items
    /// inserted one per clock unit (generations of 5,000 over a span of 5,000, TTL 15,000).
    fn big_time_limited() -> TimeLimitedBloom {
        let mut f =
            TimeLimitedBloom::with_params(1 << 16, 31, 8, 5_000, 15_000, 5_000, Hasher::default()).unwrap();
        for i in 0..17_500u64 {
            f.insert_at(i.to_le_bytes(), i);
        }
        f
    }

    /// Each kind of write, alone while the filter is frozen, changes the live filter and leaves
    /// the frozen file as it was at the freeze (rows, clock and slice records), whether the
    /// filter is dropped before the file is written or not: an insert, a push, a batch of pushes
    /// across a shift, time moving on (retiring slices), a clear.
    #[test]
    fn every_write_alone_keeps_the_frozen_file() {
        assert!(TimeLimitedBloom::new(1000, 1000, 0.01).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let ops: [NamedWrite<'_, TimeLimitedBloom>; 5] = [
            ("insert", Box::new(|f| assert!(f.insert_at(b"new item", 17_500)))),
            ("push", Box::new(|f| f.push_at(b"new item", 17_500))),
            (
                "push batch past a shift",
                Box::new(|f| {
                    let items: Vec<[u8; 8]> = (100_000..103_000u64).map(|i| i.to_le_bytes()).collect();
                    f.push_many_at(&items, 20_001);
                }),
            ),
            ("advance", Box::new(|f| f.advance(40_000))),
            ("clear", Box::new(|f| f.clear())),
        ];
        assert_each_write_keeps_frozen(&big_time_limited, |f| f.to_bytes(), TimeLimitedBloom::freeze, &ops);
    }
}
