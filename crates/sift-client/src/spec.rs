//! What a filter is created with ([`Spec`]) and how a client uses it ([`Options`], [`Clock`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sift::plan::{Family, Solution};
use sift::Hasher;

use crate::error::{param, Error, Result};
use crate::layout::{
    check_hasher, Generation, Window, BLOCK_BYTES, DEFAULT_KEY_BYTES, MAX_JSON_INT, MAX_KEY_BYTES,
};

/// The largest filter this crate creates: 2^40 bytes (1 TiB) of bitmaps.
pub const MAX_FILTER_BYTES: u64 = 1 << 40;

/// The parameters a filter is created with.
///
/// ```
/// use std::time::Duration;
/// use sift_client::Spec;
///
/// // 10 million items at 1%: 11.9 MB of bitmaps in 4 MiB keys.
/// let spec = Spec::new(10_000_000, 0.01);
/// // "Seen in the last 24 hours", hour by hour (an item stays visible 24 to 25 hours).
/// let recent = Spec::new(1_000_000, 0.01).window(Duration::from_secs(3600), 25);
/// # let _ = (spec, recent);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    capacity: u64,
    fpr: f64,
    shape: Option<(u64, u32)>,
    key_bytes: u64,
    hasher: Hasher,
    window: Option<Window>,
}

impl Spec {
    /// A filter for `capacity` items at false-positive rate `fpr`, sized as `sift`'s
    /// `BlockedBloom::new(capacity, fpr)` is (the fewest blocks and their best `k`, from the exact
    /// FPR of the layout: [`sift::math::blocked_words_plan`]), so a filter built offline with the
    /// same numbers has the same shape. XXH3-64 with seed 0, [`DEFAULT_KEY_BYTES`] per key.
    pub fn new(capacity: u64, fpr: f64) -> Spec {
        Spec {
            capacity,
            fpr,
            shape: None,
            key_bytes: DEFAULT_KEY_BYTES,
            hasher: Hasher::default(),
            window: None,
        }
    }

    /// The shape of a [`sift::plan`] solution for the blocked Bloom family (`bits` rounded up to
    /// whole 512-bit blocks, `hashes` bits per item), e.g. the capacity of a memory budget:
    /// `Plan::new().bytes(64 << 20).fpr(0.01).solve(Family::BlockedBloom)`.
    pub fn from_plan(s: &Solution) -> Result<Spec> {
        if s.family != Family::BlockedBloom {
            return Err(Error::Unsupported(format!(
                "a {} plan: only blocked-bloom plans describe this layout",
                s.family
            )));
        }
        let blocks = s.bits.div_ceil(512);
        Ok(Spec {
            shape: Some((blocks, s.hashes)),
            ..Spec::new(s.items.max(1), s.fpr.clamp(f64::MIN_POSITIVE, 0.5))
        })
    }

    /// Exactly `blocks` blocks of 512 bits and `k` bits per item (1 to 16); `capacity` and `fpr`
    /// are recorded as given (for [`crate::Fill`] and the mismatch check of
    /// [`crate::Filter::open_or_create`]).
    pub fn with_shape(blocks: u64, k: u32, capacity: u64, fpr: f64) -> Spec {
        Spec { shape: Some((blocks, k)), ..Spec::new(capacity, fpr) }
    }

    /// Bytes per sub-bitmap key: a multiple of 64 up to 512 MB - 64 (default
    /// [`DEFAULT_KEY_BYTES`], 4 MiB - 64).
    pub fn key_bytes(mut self, bytes: u64) -> Spec {
        self.key_bytes = bytes;
        self
    }

    /// The hash function and seed (default XXH3-64, seed 0).
    pub fn hasher(mut self, h: Hasher) -> Spec {
        self.hasher = h;
        self
    }

    /// Time generations of `period` each; reads look at the last `keep` generations (the current
    /// one included), so an item stays visible at least `(keep - 1) · period` and at most `keep ·
    /// period` after it was added, and the keys of older generations expire on their own.
    ///
    /// An add answers "new" at most once per generation: near a period boundary two clients may
    /// write one item to two generations (their clocks disagree, or one request was slow) and
    /// each be told "new". Use a static filter where "new" must be said once in all.
    pub fn window(mut self, period: Duration, keep: u32) -> Spec {
        self.window = Some(Window { period_ms: period.as_millis().min(u64::MAX as u128) as u64, keep });
        self
    }

    /// The capacity asked for.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The false-positive rate asked for.
    pub fn fpr(&self) -> f64 {
        self.fpr
    }

    pub(crate) fn key_bytes_value(&self) -> u64 {
        self.key_bytes
    }

    pub(crate) fn hasher_value(&self) -> Hasher {
        self.hasher
    }

    pub(crate) fn window_value(&self) -> Option<Window> {
        self.window
    }

    /// Checks the parameters and returns the generation they describe, with id `id`.
    pub(crate) fn generation(&self, id: u64) -> Result<Generation> {
        if self.capacity == 0 {
            return Err(param("capacity", 0, "at least 1"));
        }
        if !(self.fpr > 0.0 && self.fpr < 1.0) {
            return Err(param("fpr", self.fpr, "a number strictly between 0 and 1, e.g. 0.01"));
        }
        if self.key_bytes == 0 || self.key_bytes % BLOCK_BYTES != 0 || self.key_bytes > MAX_KEY_BYTES {
            return Err(param("key_bytes", self.key_bytes, "a multiple of 64 between 64 and 536870848"));
        }
        check_hasher(self.hasher)?;
        if let Some(w) = self.window {
            if w.period_ms == 0 || w.keep == 0 || w.keep > 100_000 {
                return Err(param(
                    "window",
                    format!("{} ms × {}", w.period_ms, w.keep),
                    "a period of at least 1 ms and between 1 and 100000 generations",
                ));
            }
        }
        let (blocks, k) = match self.shape {
            Some(s) => s,
            None => sift::math::blocked_words_plan(self.capacity as f64, self.fpr, 16),
        };
        if !(1..=16).contains(&k) {
            return Err(param("hashes", k, "between 1 and 16"));
        }
        if blocks == 0 || blocks.saturating_mul(BLOCK_BYTES) > MAX_FILTER_BYTES {
            return Err(sift::Error::CapacityExceeded {
                requested_bytes: blocks as u128 * BLOCK_BYTES as u128,
                limit_bytes: MAX_FILTER_BYTES as u128,
            }
            .into());
        }
        if self.capacity >= MAX_JSON_INT {
            return Err(param("capacity", self.capacity, "below 2^53"));
        }
        Ok(Generation { id, blocks, k, capacity: self.capacity, fpr: self.fpr, retire_ms: 0 })
    }
}

/// Where a client's notion of time comes from (milliseconds since the Unix epoch). Windowed
/// filters pick the generation to write from it; static filters retire generations by it.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis().min(u64::MAX as u128) as u64)
    }
}

/// A clock that moves only when told to (tests, simulations).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock showing `ms`.
    pub fn new(ms: u64) -> ManualClock {
        ManualClock(AtomicU64::new(ms))
    }

    /// Sets the time.
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    /// Moves the time forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// How the commands set and test bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Plain commands only, so it works where scripting is disabled: `BITFIELD … SET u1` to add
    /// (one command per sub-bitmap and batch; its old bits say whether the item was new), and
    /// `GETRANGE` of the item's 64-byte block to test (one for the batch's blocks that lie
    /// within 1 KiB of each other in a sub-bitmap, up to 64 KiB: each block is read once).
    #[default]
    Plain,
    /// A Lua script per sub-bitmap and batch (`EVALSHA`, `EVAL` on `NOSCRIPT`), with the items'
    /// bit positions packed in binary: a ninth of the bytes of an add on the wire, one integer
    /// per item back; more server CPU than [`Mode::Plain`] on Redis 7.
    Lua,
}

/// How a client uses a filter (not stored in the filter; each client picks its own).
#[derive(Debug, Clone)]
pub struct Options {
    pub(crate) mode: Mode,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) batch_items: usize,
    pub(crate) items_per_command: usize,
    pub(crate) expiry_grace: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Plain,
            clock: Arc::new(SystemClock),
            batch_items: 8192,
            items_per_command: 16,
            expiry_grace: Duration::from_secs(60),
        }
    }
}

impl Options {
    /// The defaults: [`Mode::Plain`], the system clock, 8192 items per round trip, 16 items per
    /// command (Redis 7 grows a `BITFIELD`'s operation list one entry at a time, so very long
    /// commands cost more per bit: 8 to 32 items was cheapest, `docs/BENCHMARKS.md`), 60 s of
    /// expiry grace.
    pub fn new() -> Options {
        Options::default()
    }

    /// Plain commands or a Lua script.
    pub fn mode(mut self, mode: Mode) -> Options {
        self.mode = mode;
        self
    }

    /// The clock (for windowed filters and retired generations).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Options {
        self.clock = clock;
        self
    }

    /// Items sent per round trip by the `*_many` calls (at least 1); longer inputs take several.
    pub fn batch_items(mut self, n: usize) -> Options {
        self.batch_items = n.max(1);
        self
    }

    /// Items per `BITFIELD` command or script call (at least 1).
    pub fn items_per_command(mut self, n: usize) -> Options {
        self.items_per_command = n.max(1);
        self
    }

    /// How long keys outlive the time they stop being read: clock differences between clients,
    /// and requests in flight when a generation is retired.
    pub fn expiry_grace(mut self, grace: Duration) -> Options {
        self.expiry_grace = grace;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift::plan::Plan;
    use sift::BlockedBloom;

    /// A filter created for (n, p) has the shape `BlockedBloom::new(n, p)` has, so files built
    /// offline with the same numbers push into it; a plan for a memory budget is kept as given.
    #[test]
    fn sizing_follows_the_library() {
        for (n, p) in [(1_000u64, 0.01), (1_000_000, 0.01), (10_000_000, 0.001), (50_000, 0.1)] {
            let g = Spec::new(n, p).generation(0).unwrap();
            let local = BlockedBloom::new(n as usize, p).unwrap();
            assert_eq!((g.blocks, g.k), (local.num_blocks(), local.num_hashes()), "n {n} p {p}");
            assert!(sift::math::blocked_words_fpr(g.blocks as f64 * 512.0, n as f64, g.k) <= p);
        }
        let plan = Plan::new().bytes(64 << 20).fpr(0.01).solve(Family::BlockedBloom).unwrap();
        let g = Spec::from_plan(&plan).unwrap().generation(0).unwrap();
        assert_eq!((g.blocks * 512, g.k, g.capacity), (plan.bits, plan.hashes, plan.items));
        let bloom = Plan::new().items(1000).fpr(0.01).solve(Family::Bloom).unwrap();
        assert!(matches!(Spec::from_plan(&bloom), Err(Error::Unsupported(_))));
        // Bad parameters are refused before anything is sized.
        for bad in [
            Spec::new(0, 0.01),
            Spec::new(10, f64::NAN),
            Spec::new(10, 0.01).key_bytes(0),
            Spec::new(10, 0.01).key_bytes(1 << 30),
            Spec::with_shape(0, 7, 10, 0.01),
            Spec::with_shape(10, 17, 10, 0.01),
            Spec::with_shape(1 << 40, 7, 10, 0.01),
            Spec::new(10, 0.01).window(Duration::ZERO, 3),
            Spec::new(10, 0.01).window(Duration::from_secs(1), 0),
            Spec::new(10, 0.01).hasher(Hasher::sip24(1, 2)),
        ] {
            assert!(bad.generation(0).is_err(), "{bad:?}");
        }
    }
}
