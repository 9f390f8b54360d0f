//! RedisBloom's Top-K, `TopK-TYPE` (spec `redisbloom-sketches.md` §6, RDB §10.4).
//!
//! HeavyKeeper (Gong, Yang, Zhang et al., "HeavyKeeper: An Accurate Algorithm for Finding Top-k
//! Elephant Flows", USENIX ATC 2018) keeps `depth` rows of `width` buckets, each holding a
//! fingerprint and a counter, and a min-heap of the `k` items with the largest estimates. An
//! item's bucket in a row either belongs to it (the counter grows), is empty (the item takes
//! it), or belongs to another item: then the owner's counter is decremented with probability
//! `decay^count` per unit of the increment ("exponential-weakening decay"), so small flows lose
//! their buckets quickly while large ones keep them almost surely. The item's estimate is the
//! largest counter it owns; it enters the heap when that estimate reaches the heap's minimum,
//! expelling the minimum's item. Estimates never exceed the truth unless two items share a
//! 32-bit fingerprint (decay only removes), so the items reported are truly heavy.
//!
//! RedisBloom's choices, reproduced exactly: 32-bit MurmurHash2 with seed `row` for the bucket,
//! seed 1919 for the fingerprint; u32 counters; decay probabilities from a 256-entry table of
//! `decay^i`; the draw `rand() / RAND_MAX < p` of the C library generator; the heap's exact
//! sift-down (its tie rule decides which of several equal items is expelled next); a stable
//! sort by count for `TOPK.LIST`. Only the decay draws are random: with `decay = 1`, with a
//! decay below 1/(2^31 − 1), or when no two items share a bucket, every result is
//! deterministic (§6.6). The generator is a parameter ([`DecayRandom`]); [`CRand`] is the C
//! library's `rand()`, seeded as an unseeded process starts (seed 1) by default.
//!
//! ```
//! use sift::compat::redisbloom::{CRand, TopK};
//!
//! // TOPK.RESERVE k 2 50 4 1: decay 1 makes every collision decrement, so nothing is random.
//! let mut tk = TopK::reserve(2, 50, 4, 1.0, u64::MAX)?;
//! let mut rng = CRand::default();
//! for item in ["a", "b", "a", "c", "a", "b", "d"] {
//!     tk.add(item.as_bytes(), &mut rng);
//! }
//! let list: Vec<(&[u8], u32)> = tk.list();
//! assert_eq!(list, [(&b"a"[..], 3), (&b"b"[..], 2)]);
//! assert_eq!(tk.count(b"a"), 3);
//! assert!(tk.query(b"b") && !tk.query(b"c"));
//! # Ok::<(), sift::compat::redisbloom::TopKCreateError>(())
//! ```

use std::borrow::Cow;

use crate::bits::{CowHandle, Storage};
use crate::hash::murmur2_32;

/// The C library's `RAND_MAX`: draws are integers in [0, 2^31 − 1].
pub const RAND_MAX: u32 = 0x7fff_ffff;
/// Seed of the fingerprint hash (§4).
pub const TOPK_FINGERPRINT_SEED: u32 = 1919;
/// Default width of `TOPK.RESERVE key k` (§6.1).
pub const TOPK_DEFAULT_WIDTH: i64 = 8;
/// Default depth.
pub const TOPK_DEFAULT_DEPTH: i64 = 7;
/// Default decay.
pub const TOPK_DEFAULT_DECAY: f64 = 0.9;
/// Largest increment of `TOPK.INCRBY` (§8).
pub const TOPK_MAX_INCREMENT: i64 = 100_000;
/// Largest `width · depth`: (2^64 − 1) / 8 (§8).
pub const TOPK_MAX_BUCKETS: u64 = u64::MAX / 8;
/// Bytes of the fixed part of a Top-K in RedisBloom's memory accounting (§6.7).
const TOPK_FIXED_BYTES: u64 = 2088;

/// A source of the decay draws: integers uniform in [0, [`RAND_MAX`]], like C's `rand()`
/// (§6.6). Closures `FnMut() -> u32` implement it, which makes stubs easy in tests.
pub trait DecayRandom {
    /// The next draw, in [0, [`RAND_MAX`]].
    fn next_rand(&mut self) -> u32;
}

impl<F: FnMut() -> u32> DecayRandom for F {
    fn next_rand(&mut self) -> u32 {
        self()
    }
}

/// The GNU C library's `rand()` / `random()` (the additive feedback generator `TYPE_3`:
/// r_i = r_{i−31} + r_{i−3} mod 2^32, output r_i >> 1, after a Lehmer-seeded start and 310
/// discarded values). [`CRand::default`] is seed 1, the state of a process that never called
/// `srand`; RedisBloom's draws come from this generator after Redis's own `srand(time ^ pid)`.
///
/// Seeding is cheap (about a tenth of glibc's `srand` done step by step): sift-commands seeds
/// one generator per `TOPK.ADD` that draws, so the start is on the hot path.
#[derive(Debug, Clone)]
pub struct CRand {
    /// The last 31 values r_{i−31} .. r_{i−1}, in a ring.
    ring: [u32; 31],
    /// Slot of r_{i−31}, which r_i replaces.
    front: usize,
    /// Slot of r_{i−3}.
    rear: usize,
}

impl Default for CRand {
    fn default() -> Self {
        CRand::new(1)
    }
}

/// glibc's Lehmer multiplier and modulus: r_k = 16807 · r_{k−1} mod (2^31 − 1).
const LEHMER_A: u64 = 16_807;
const LEHMER_M: u64 = 0x7fff_ffff;

/// `16807^k mod (2^31 − 1)` for k in 0..31: r_k = seed · 16807^k mod (2^31 − 1) directly, so the
/// 30 start values do not wait for each other.
const LEHMER_POWERS: [u64; 31] = {
    let mut p = [1u64; 31];
    let mut k = 1;
    while k < 31 {
        p[k] = p[k - 1] * LEHMER_A % LEHMER_M;
        k += 1;
    }
    p
};

/// `a · b mod (2^31 − 1)` for `a, b < 2^31 − 1`, by folding the Mersenne modulus.
#[inline]
fn mul_mod_m31(a: u64, b: u64) -> u32 {
    let p = a * b; // < 2^62
    let x = (p & LEHMER_M) + (p >> 31); // < 2^32
    let x = (x & LEHMER_M) + (x >> 31); // <= 2^31
    (if x >= LEHMER_M { x - LEHMER_M } else { x }) as u32
}

impl CRand {
    /// The generator after `srand(seed)` (seed 0 acts as 1, as in glibc).
    pub fn new(seed: u32) -> Self {
        let seed = if seed == 0 { 1 } else { seed };
        // glibc reads the seed as a signed 32-bit value and steps Lehmer's generator with
        // Schrage's method, which computes the exact residue in [0, 2^31 − 1) of 16807 · word
        // at each step, from a negative first word too: so r_k = (seed mod M) · 16807^k mod M.
        let s0 = i64::from(seed as i32).rem_euclid(LEHMER_M as i64) as u64;
        let mut ring = [0u32; 31];
        ring[0] = seed;
        for (r, &a_k) in ring.iter_mut().zip(&LEHMER_POWERS).skip(1) {
            *r = mul_mod_m31(s0, a_k);
        }
        // r_31, r_32, r_33 are copies of r_0, r_1, r_2, which slots 0..3 already hold, so the
        // ring holds r_3 .. r_33 with r_i in slot i mod 31. The 310 discarded values r_34 ..
        // r_343 are exactly 10 turns of the ring, starting at slot 34 mod 31 = 3.
        for _ in 0..10 {
            for s in 3..31 {
                ring[s] = ring[s].wrapping_add(ring[s - 3]);
            }
            for s in 0..3 {
                ring[s] = ring[s].wrapping_add(ring[s + 28]);
            }
        }
        // Next: r_344 = r_313 + r_341, in slots 344 mod 31 = 3 and 341 mod 31 = 0.
        CRand { ring, front: 3, rear: 0 }
    }

    fn step(&mut self) -> u32 {
        let v = self.ring[self.front].wrapping_add(self.ring[self.rear]);
        self.ring[self.front] = v;
        self.front = if self.front == 30 { 0 } else { self.front + 1 };
        self.rear = if self.rear == 30 { 0 } else { self.rear + 1 };
        v
    }
}

impl DecayRandom for CRand {
    #[inline]
    fn next_rand(&mut self) -> u32 {
        self.step() >> 1
    }
}

/// Why a Top-K could not be created (`TOPK.RESERVE`), in the order RedisBloom checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TopKCreateError {
    /// `k` not in [1, 2^32 − 1]. (`TopK: invalid k`.)
    #[error("k must be in [1, 4294967295]")]
    InvalidK,
    /// `width` not in [1, 2^32 − 1]. (`TopK: invalid width`.)
    #[error("width must be in [1, 4294967295]")]
    InvalidWidth,
    /// `depth` not in [1, 2^32 − 1]. (`TopK: invalid depth`.)
    #[error("depth must be in [1, 4294967295]")]
    InvalidDepth,
    /// `decay` not in (0, 1], or NaN. (`TopK: invalid decay value. must be '<= 1' & '> 0'`.)
    #[error("decay must be in (0, 1]")]
    InvalidDecay,
    /// `width · depth` above (2^64 − 1) / 8, the tables above the caller's budget, or the
    /// allocation failed. (`ERR Insufficient memory to create topk data structure`.)
    #[error("not enough memory for the tables")]
    InsufficientMemory,
}

/// A `TOPK.INCRBY` increment outside [0, 100000]. The reply element is
/// `TopK: increment must be an integer greater or equal to 0` + 28 spaces +
/// `and smaller or equal to 100,000`, and the command stops there (§8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("increment must be an integer in [0, 100000]")]
pub struct TopKIncrementError;

/// One bucket of the table: a fingerprint and its counter (both 0 when empty). Laid out as the
/// RDB string stores it (fingerprint, then counter), so that on a little-endian machine the
/// table's memory is its RDB bytes and a snapshot reads it without converting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TopKBucket {
    /// `MurmurHash2(item, 1919)` of the owner.
    pub fp: u32,
    /// The owner's counter.
    pub count: u32,
}

// SAFETY: two `u32`s in `repr(C)`: no padding bytes, and all zeros is a valid (empty) bucket.
unsafe impl crate::bits::Zeroable for TopKBucket {}

/// Bytes of one bucket in the RDB string and in memory.
pub const TOPK_BUCKET_BYTES: usize = 8;

/// A piece of buckets that is not the next one of a chunked load ([`TopK::load_buckets`]): the
/// pieces come in order, each a whole number of buckets, and together exactly the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{len} bytes of buckets at {at}: expected the piece at {expected} of a {table}-byte table, whole buckets"
)]
pub struct TopKBucketsError {
    /// Where the piece starts, in bytes.
    pub at: u64,
    /// Its length.
    pub len: u64,
    /// Where the next piece must start.
    pub expected: u64,
    /// Bytes of the table.
    pub table: u64,
}

/// One slot of the min-heap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopKSlot {
    fp: u32,
    item: Option<Vec<u8>>,
    count: u32,
}

impl TopKSlot {
    /// The item's fingerprint (0 for an empty slot).
    pub fn fp(&self) -> u32 {
        self.fp
    }
    /// The item, `None` for an empty slot.
    pub fn item(&self) -> Option<&[u8]> {
        self.item.as_deref()
    }
    /// The item's count.
    pub fn count(&self) -> u32 {
        self.count
    }
}

/// The bytes a reply shows for an item: those before its first NUL byte (RedisBloom writes
/// items as C strings in `TOPK.ADD`, `TOPK.INCRBY` and `TOPK.LIST` replies, §2.1).
pub fn topk_reply_item(item: &[u8]) -> &[u8] {
    match item.iter().position(|&b| b == 0) {
        Some(n) => &item[..n],
        None => item,
    }
}

/// A HeavyKeeper Top-K with RedisBloom's layout and arithmetic (§6).
#[derive(Clone)]
pub struct TopK {
    k: u32,
    width: u32,
    depth: u32,
    decay: f64,
    /// `depth × width` buckets, row-major. Large tables in huge-page storage, which a snapshot
    /// can read while the buckets change ([`TopK::freeze`]).
    buckets: Storage<TopKBucket>,
    heap: Vec<TopKSlot>,
    /// Bytes of buckets a chunked load has still to fill ([`TopK::load_buckets`]); 0 otherwise.
    /// Not part of equality.
    load_missing: u64,
    /// `decay^i` for i in 0..256: by `pow` at creation, by repeated multiplication after an RDB
    /// load (§6.6). Not part of equality: the two differ at most in the last bit.
    table: Box<[f64; 256]>,
    /// From this `count / 255` on, the decay probability is below `1 / RAND_MAX` with room to
    /// spare (see [`TopK::decays`]); derived from `table`.
    negligible_from: u32,
}

impl PartialEq for TopK {
    fn eq(&self, o: &Self) -> bool {
        (self.k, self.width, self.depth) == (o.k, o.width, o.depth)
            && self.decay.to_bits() == o.decay.to_bits()
            && self.buckets == o.buckets
            && self.heap == o.heap
    }
}

impl core::fmt::Debug for TopK {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TopK")
            .field("k", &self.k)
            .field("width", &self.width)
            .field("depth", &self.depth)
            .field("decay", &self.decay)
            .field("heap", &self.heap)
            .finish_non_exhaustive()
    }
}

fn u32_param(v: i64, err: TopKCreateError) -> Result<u32, TopKCreateError> {
    u32::try_from(v).ok().filter(|&v| v >= 1).ok_or(err)
}

impl TopK {
    /// `TOPK.RESERVE key topk [width depth decay]` after parsing (§8), checks in RedisBloom's
    /// order; for the 3-argument form pass [`TOPK_DEFAULT_WIDTH`], [`TOPK_DEFAULT_DEPTH`],
    /// [`TOPK_DEFAULT_DECAY`]. An argument that did not parse can be passed as 0 (NaN for the
    /// decay): it fails the same check. `max_bytes` caps the tables' memory in RedisBloom's
    /// accounting (`8 · width · depth + 24 · k`); above it, or when the allocation fails, the
    /// result is [`TopKCreateError::InsufficientMemory`], before anything is allocated.
    pub fn reserve(
        k: i64,
        width: i64,
        depth: i64,
        decay: f64,
        max_bytes: u64,
    ) -> Result<Self, TopKCreateError> {
        let k = u32_param(k, TopKCreateError::InvalidK)?;
        let width = u32_param(width, TopKCreateError::InvalidWidth)?;
        let depth = u32_param(depth, TopKCreateError::InvalidDepth)?;
        if !(decay > 0.0 && decay <= 1.0) {
            return Err(TopKCreateError::InvalidDecay);
        }
        let cells = width as u64 * depth as u64;
        if cells > TOPK_MAX_BUCKETS {
            return Err(TopKCreateError::InsufficientMemory);
        }
        let bytes = cells as u128 * 8 + k as u128 * 24;
        if bytes > max_bytes as u128 {
            return Err(TopKCreateError::InsufficientMemory);
        }
        let buckets = usize::try_from(cells)
            .ok()
            .and_then(|n| Storage::zeroed(n).ok())
            .ok_or(TopKCreateError::InsufficientMemory)?;
        let heap = try_filled(k as u64, TopKSlot::default()).ok_or(TopKCreateError::InsufficientMemory)?;
        let mut table = Box::new([0.0; 256]);
        for (i, t) in table.iter_mut().enumerate() {
            *t = decay.powf(i as f64);
        }
        let negligible_from = negligible_from(table[255]);
        Ok(TopK { k, width, depth, decay, buckets, heap, load_missing: 0, table, negligible_from })
    }

    /// Rebuilds a Top-K from its RDB fields (§10.4); the caller checked the shapes. The decay
    /// table is rebuilt by repeated multiplication, as RedisBloom's load does.
    pub(crate) fn from_parts(
        k: u32,
        width: u32,
        depth: u32,
        decay: f64,
        buckets: Storage<TopKBucket>,
        heap: Vec<TopKSlot>,
    ) -> Self {
        debug_assert_eq!(buckets.len() as u64, width as u64 * depth as u64);
        debug_assert_eq!(heap.len() as u64, k as u64);
        let mut table = Box::new([0.0; 256]);
        table[0] = 1.0;
        for i in 1..256 {
            table[i] = table[i - 1] * decay;
        }
        let negligible_from = negligible_from(table[255]);
        TopK { k, width, depth, decay, buckets, heap, load_missing: 0, table, negligible_from }
    }

    /// A Top-K whose buckets are all empty until [`TopK::load_buckets`] fills them, with the
    /// heap given: the header of a chunked dump (`load_topk_chunked_header`, after its checks).
    /// `None` when the allocation fails.
    pub(crate) fn with_buckets_to_load(
        k: u32,
        width: u32,
        depth: u32,
        decay: f64,
        heap: Vec<TopKSlot>,
    ) -> Option<Self> {
        let cells = usize::try_from(width as u64 * depth as u64).ok()?;
        let mut t = TopK::from_parts(k, width, depth, decay, Storage::zeroed(cells).ok()?, heap);
        t.load_missing = (cells * TOPK_BUCKET_BYTES) as u64;
        Some(t)
    }

    /// Sets the buckets of bytes `at..at + data.len()` of the table's RDB string to `data`: the
    /// next piece of a chunked dump, after its header. Pieces must come in order, from the
    /// table's first byte, each a whole number of buckets and within the table; anything else
    /// is refused, and nothing changes.
    pub fn load_buckets(&mut self, at: u64, data: &[u8]) -> Result<(), TopKBucketsError> {
        let table = (self.buckets.len() * TOPK_BUCKET_BYTES) as u64;
        let expected = table - self.load_missing;
        let len = data.len() as u64;
        if at != expected || len > self.load_missing || len % TOPK_BUCKET_BYTES as u64 != 0 {
            return Err(TopKBucketsError { at, len, expected, table });
        }
        let first = at as usize / TOPK_BUCKET_BYTES;
        let range = first..first + data.len() / TOPK_BUCKET_BYTES;
        // A snapshot may be reading the table (a load into a live value): the pieces are saved
        // for it first, as every other write does.
        let guard = self.buckets.cow_guard();
        let mut w = guard.as_ref().map(|g| g.writer());
        if let Some(w) = w.as_mut() {
            w.before_write_values(&self.buckets, range.clone());
        }
        for (b, raw) in self.buckets[range].iter_mut().zip(data.chunks_exact(TOPK_BUCKET_BYTES)) {
            *b = TopKBucket {
                fp: u32::from_le_bytes(raw[..4].try_into().expect("4 bytes")),
                count: u32::from_le_bytes(raw[4..].try_into().expect("4 bytes")),
            };
        }
        drop(w);
        self.load_missing -= len;
        Ok(())
    }

    /// Bytes of buckets a chunked load has not filled yet: not 0 after the last piece means
    /// pieces were missing.
    pub fn load_missing(&self) -> u64 {
        self.load_missing
    }

    /// Bytes `range` of the buckets' RDB string (fingerprint and counter of each bucket,
    /// little-endian): the table's own memory on a little-endian machine.
    pub fn bucket_bytes(&self, range: core::ops::Range<usize>) -> Cow<'_, [u8]> {
        let all = crate::bits::as_bytes(&self.buckets[..]);
        if cfg!(target_endian = "little") {
            Cow::Borrowed(&all[range])
        } else {
            let mut out = all[range].to_vec();
            to_le_words(&mut out);
            Cow::Owned(out)
        }
    }

    /// Bytes of the buckets' RDB string: 8 per bucket.
    pub fn bucket_bytes_len(&self) -> usize {
        self.buckets.len() * TOPK_BUCKET_BYTES
    }

    /// The Top-K as it is now, to be dumped later while it keeps changing: the snapshot's
    /// header (`save_topk_chunked_header`: the shape, the decay and the heap, copied now), and
    /// the buckets guarded, writers copying aside only the [`COW_PIECE`](crate::bits::COW_PIECE)
    /// -sized pieces they change before the snapshot has read them. `None` for a table small
    /// enough to copy.
    pub fn freeze(&self) -> Option<FrozenTopK> {
        let buckets = self.buckets.freeze()?;
        let mut header = Vec::new();
        super::rdb::save_topk_chunked_header(self, &mut super::rdb::ModuleFieldWriter { out: &mut header });
        Some(FrozenTopK { header, buckets })
    }

    pub(crate) fn slot(fp: u32, item: Option<Vec<u8>>, count: u32) -> TopKSlot {
        TopKSlot { fp, item, count }
    }

    /// Heap size.
    pub fn k(&self) -> u32 {
        self.k
    }
    /// Buckets per row.
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Rows.
    pub fn depth(&self) -> u32 {
        self.depth
    }
    /// Decay base (`TOPK.INFO` prints it as a double).
    pub fn decay(&self) -> f64 {
        self.decay
    }
    /// The buckets, row-major.
    pub fn buckets(&self) -> &[TopKBucket] {
        &self.buckets[..]
    }
    /// The heap array, slot 0 (the minimum) first.
    pub fn heap(&self) -> &[TopKSlot] {
        &self.heap
    }
    /// Memory the type's callback reports to `MEMORY USAGE` (§6.7):
    /// `2088 + 8 · width · depth + 24 · k`.
    pub fn memory_usage(&self) -> u64 {
        TOPK_FIXED_BYTES + 8 * self.buckets.len() as u64 + 24 * self.k as u64
    }

    /// `TOPK.ADD`'s step for one item: [`TopK::incr_by`] with increment 1. Returns the item
    /// expelled from the heap, if any (the reply shows [`topk_reply_item`] of it, or null).
    pub fn add(&mut self, item: &[u8], rng: &mut impl DecayRandom) -> Option<Vec<u8>> {
        self.add_units(item, 1, rng)
    }

    /// `TOPK.INCRBY`'s step for one pair (§6.2): an increment outside [0, 100000] (pass −1 for
    /// one that did not parse) is refused without any change; the command then stops.
    pub fn incr_by(
        &mut self,
        item: &[u8],
        increment: i64,
        rng: &mut impl DecayRandom,
    ) -> Result<Option<Vec<u8>>, TopKIncrementError> {
        if !(0..=TOPK_MAX_INCREMENT).contains(&increment) {
            return Err(TopKIncrementError);
        }
        Ok(self.add_units(item, increment as u32, rng))
    }

    /// Probability that one decay attempt decrements a counter of `count` (§6.2).
    fn decay_probability(&self, count: u32) -> f64 {
        if count < 256 {
            self.table[count as usize]
        } else {
            self.table[255].powf((count / 255) as f64) * self.table[(count % 255) as usize]
        }
    }

    /// Whether one decay attempt on a counter of `count` decrements it, given the draw `r`:
    /// `r / RAND_MAX < p(count)` (§6.2). For counts of 255·`negligible_from` and more, `p` is
    /// below `0.5 / RAND_MAX` (a bound that holds with a factor 2 to spare over the rounding of
    /// `pow` and of the product), so only a draw of 0 can decrement and the `pow` call is
    /// skipped for every other draw: the same answers, without `pow` on the hot path of heavy
    /// hitters (it was 20% of `benches/sketches.rs` `topk/add`).
    #[inline]
    fn decays(&self, count: u32, r: u32) -> bool {
        if r != 0 && count >= 256 && count / 255 >= self.negligible_from {
            return false;
        }
        (r as f64) / (RAND_MAX as f64) < self.decay_probability(count)
    }

    fn add_units(&mut self, item: &[u8], incr: u32, rng: &mut impl DecayRandom) -> Option<Vec<u8>> {
        // Every change to the buckets goes through `w` when a snapshot is reading them: the
        // bucket's piece is saved for it first.
        let guard = self.buckets.cow_guard();
        let mut w = guard.as_ref().map(|g| g.writer());
        let fp = murmur2_32(item, TOPK_FINGERPRINT_SEED);
        let heap_min = self.heap[0].count;
        let mut max_count = 0u32;
        for row in 0..self.depth {
            let i = row as usize * self.width as usize + (murmur2_32(item, row) % self.width) as usize;
            let mut b = self.buckets[i];
            if b.count == 0 {
                b.fp = fp;
                b.count = incr;
                max_count = max_count.max(b.count);
            } else if b.fp == fp {
                b.count = b.count.wrapping_add(incr);
                max_count = max_count.max(b.count);
            } else {
                for units in (1..=incr).rev() {
                    let r = rng.next_rand();
                    if self.decays(b.count, r) {
                        b.count -= 1;
                        if b.count == 0 {
                            b.fp = fp;
                            b.count = units;
                            max_count = max_count.max(units);
                            break;
                        }
                    }
                }
            }
            if b != self.buckets[i] {
                if let Some(w) = w.as_mut() {
                    w.before_write_values(&self.buckets, i..i + 1);
                }
                self.buckets[i] = b;
            }
        }
        drop(w);
        if max_count < heap_min {
            return None;
        }
        if let Some(s) = self.lookup(fp, item) {
            self.heap[s].count = max_count;
            sift_down(&mut self.heap, s);
            return None;
        }
        let old = std::mem::replace(
            &mut self.heap[0],
            TopKSlot { fp, item: Some(item.to_vec()), count: max_count },
        );
        sift_down(&mut self.heap, 0);
        old.item
    }

    /// The heap slot holding `item`, scanning from the last slot to slot 0 (§6.4).
    fn lookup(&self, fp: u32, item: &[u8]) -> Option<usize> {
        self.heap.iter().rposition(|s| s.fp == fp && s.item.as_deref() == Some(item))
    }

    /// `TOPK.QUERY`'s answer for one item: whether it is in the heap (§6.4).
    pub fn query(&self, item: &[u8]) -> bool {
        self.lookup(murmur2_32(item, TOPK_FINGERPRINT_SEED), item).is_some()
    }

    /// `TOPK.COUNT`'s answer for one item (§6.4): the largest counter among the buckets holding
    /// its fingerprint, ignoring those below the heap minimum when the item is in the heap.
    pub fn count(&self, item: &[u8]) -> u32 {
        let fp = murmur2_32(item, TOPK_FINGERPRINT_SEED);
        let heap_min = self.heap[0].count;
        let in_heap = self.lookup(fp, item).is_some();
        (0..self.depth)
            .map(|row| {
                self.buckets
                    [row as usize * self.width as usize + (murmur2_32(item, row) % self.width) as usize]
            })
            .filter(|b| b.fp == fp && (!in_heap || b.count >= heap_min))
            .map(|b| b.count)
            .max()
            .unwrap_or(0)
    }

    /// `TOPK.LIST [WITHCOUNT]` (§6.4): the heap's items by count, largest first, ties in heap
    /// order, up to the first count of 0. Items are the full stored bytes; replies show
    /// [`topk_reply_item`] of each.
    pub fn list(&self) -> Vec<(&[u8], u32)> {
        let mut slots: Vec<&TopKSlot> = self.heap.iter().collect();
        slots.sort_by_key(|s| std::cmp::Reverse(s.count)); // stable
        slots
            .iter()
            .take_while(|s| s.count != 0)
            .map(|s| (s.item.as_deref().unwrap_or(b""), s.count))
            .collect()
    }
}

/// Turns the native-endian `u32`s of `bytes` into little-endian ones (a no-op on little-endian
/// machines).
fn to_le_words(bytes: &mut [u8]) {
    for word in bytes.chunks_exact_mut(4) {
        let v = u32::from_ne_bytes(word.try_into().expect("4 bytes"));
        word.copy_from_slice(&v.to_le_bytes());
    }
}

/// A Top-K as it was when [`TopK::freeze`] was called. Dropping it ends the copy-on-write.
#[derive(Debug)]
pub struct FrozenTopK {
    /// `save_topk_chunked_header` at the freeze: the shape, the decay and the heap.
    header: Vec<u8>,
    buckets: CowHandle,
}

impl FrozenTopK {
    /// The snapshot header at the freeze (`save_topk_chunked_header`).
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// Bytes of the buckets' RDB string.
    pub fn buckets_len(&self) -> usize {
        self.buckets.len()
    }

    /// Appends the buckets' RDB bytes `from..from + n` as they were at the freeze (clipped to
    /// [`FrozenTopK::buckets_len`]). Each byte is read once: read them front to back, in pieces
    /// of whole buckets.
    pub fn read_buckets(&self, from: usize, n: usize, out: &mut Vec<u8>) {
        let n = n.min(self.buckets.len().saturating_sub(from));
        // Grown here, not while a piece is read under the guard's lock.
        out.reserve(n);
        let start = out.len();
        self.buckets.read(from, n, out);
        to_le_words(&mut out[start..]);
    }
}

/// The smallest `n >= 1` with `t255^n < 0.5 / RAND_MAX`, where `t255 = decay^255`; `u32::MAX`
/// when there is none (decay 1, or a NaN or above-1 decay loaded from an RDB file). Every
/// probability `t255^m · decay^j` with `m >= n` and `decay <= 1` is then below `1 / RAND_MAX`.
fn negligible_from(t255: f64) -> u32 {
    let limit = 0.5 / RAND_MAX as f64;
    if !(0.0..1.0).contains(&t255) {
        return u32::MAX;
    }
    // Start from the logarithmic estimate and step up past any rounding.
    let mut n = ((limit.ln() / t255.ln()).floor() as u32).max(1);
    while t255.powf(n as f64) >= limit {
        n = match n.checked_add(1) {
            Some(n) => n,
            None => return u32::MAX,
        };
    }
    n
}

/// Allocates `n` copies of `v`, or `None` when the allocator refuses.
fn try_filled<T: Clone>(n: u64, v: T) -> Option<Vec<T>> {
    let n = usize::try_from(n).ok()?;
    let mut out = Vec::new();
    out.try_reserve_exact(n).ok()?;
    out.resize(n, v);
    Some(out)
}

/// RedisBloom's sift-down of slot `s` (§6.3). The first step also passes an equal child, later
/// steps only strictly smaller ones: this decides which of several equal items is expelled.
fn sift_down(heap: &mut [TopKSlot], mut s: usize) {
    let n = heap.len();
    if n < 2 || (n - 2) / 2 < s {
        return;
    }
    let smaller_child = |heap: &[TopKSlot], c: usize| {
        if c + 1 < n && heap[c].count > heap[c + 1].count {
            c + 1
        } else {
            c
        }
    };
    let mut c = smaller_child(heap, 2 * s + 1);
    if heap[c].count > heap[s].count {
        return;
    }
    let moving = std::mem::take(&mut heap[s]);
    loop {
        heap[s] = std::mem::take(&mut heap[c]);
        s = c;
        if (n - 2) / 2 < c {
            break;
        }
        c = smaller_child(heap, 2 * c + 1);
        if heap[c].count >= moving.count {
            break;
        }
    }
    heap[s] = moving;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crand_matches_glibc() {
        // The first outputs of glibc's rand() in a process that never called srand.
        let mut g = CRand::default();
        let want = [
            1804289383, 846930886, 1681692777, 1714636915, 1957747793, 424238335, 719885386, 1649760492,
            596516649, 1189641421,
        ];
        for w in want {
            assert_eq!(g.next_rand(), w);
        }
        // srand(0) is srand(1).
        assert_eq!(CRand::new(0).next_rand(), 1804289383);
        // Many steps through the index wrap-around keep the recurrence.
        let mut a = CRand::new(42);
        let mut b = CRand::new(42);
        let mut ring: Vec<u32> = Vec::new();
        for _ in 0..100_000 {
            ring.push(a.step());
        }
        for w in ring.windows(32) {
            assert_eq!(w[31], w[0].wrapping_add(w[28]));
        }
        for _ in 0..100_000 {
            assert!(b.next_rand() <= RAND_MAX);
        }
    }

    /// glibc's `srandom` and `random` as its manual and source describe them, step by step:
    /// Lehmer's generator by Schrage's method on the seed read as a signed value, the copies
    /// r_31..r_33, the recurrence, and outputs from r_344 on.
    fn reference_draws(seed: u32, n: usize) -> Vec<u32> {
        let seed = if seed == 0 { 1 } else { seed };
        let mut r: Vec<u32> = Vec::with_capacity(344 + n);
        let mut word = seed as i32 as i64;
        r.push(word as u32);
        for _ in 1..31 {
            let hi = word / 127_773;
            let lo = word % 127_773;
            word = 16_807 * lo - 2_836 * hi;
            if word < 0 {
                word += 2_147_483_647;
            }
            r.push(word as u32);
        }
        for i in 31..34 {
            r.push(r[i - 31]);
        }
        for i in 34..344 + n {
            r.push(r[i - 31].wrapping_add(r[i - 3]));
        }
        r[344..].iter().map(|v| v >> 1).collect()
    }

    /// The ring start (powers of 16807, ten turns) gives the step-by-step definition's draws,
    /// for seeds all over the 32-bit range: negative as `i32`, multiples and neighbours of the
    /// modulus, Schrage's quotient, the extremes.
    #[test]
    fn crand_start_matches_the_step_by_step_definition() {
        let special = [
            0u32,
            1,
            2,
            127_773,
            0x7fff_fffe,
            0x7fff_ffff,
            0x8000_0000,
            0x8000_0001,
            0xffff_fffe,
            0xffff_ffff,
            0xdead_beef,
        ];
        let spread = (0..20_000u32).map(|i| i.wrapping_mul(0x9e37_79b9) ^ (i >> 3));
        for seed in special.into_iter().chain(0..2_000).chain(spread) {
            let mut g = CRand::new(seed);
            let got: Vec<u32> = (0..70).map(|_| g.next_rand()).collect();
            assert_eq!(got, reference_draws(seed, 70), "seed {seed:#x}");
        }
    }

    /// The C library itself, where it is glibc: `srand(seed)` then `rand()`.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn crand_matches_glibc_srand() {
        extern "C" {
            fn srand(seed: u32);
            fn rand() -> i32;
        }
        // rand()'s state is the process's; nothing else in this crate's tests calls it, and the
        // lock keeps this test's calls together.
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let seeds = [0u32, 1, 42, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0x1234_5678, 0xcafe_f00d];
        for seed in seeds.into_iter().chain((0..500u32).map(|i| i.wrapping_mul(0x85eb_ca6b))) {
            let mut g = CRand::new(seed);
            // SAFETY: srand and rand take and return plain integers; glibc serialises them with
            // its own lock, and no other code in this process depends on their sequence.
            let want: Vec<u32> = unsafe {
                srand(seed);
                (0..40).map(|_| rand() as u32).collect()
            };
            let got: Vec<u32> = (0..40).map(|_| g.next_rand()).collect();
            assert_eq!(got, want, "seed {seed:#x}");
        }
    }

    #[test]
    fn reserve_checks_in_order() {
        let m = u64::MAX;
        assert_eq!(TopK::reserve(0, 0, 0, f64::NAN, m).unwrap_err(), TopKCreateError::InvalidK);
        assert_eq!(TopK::reserve(1 << 32, 8, 7, 0.9, m).unwrap_err(), TopKCreateError::InvalidK);
        assert_eq!(TopK::reserve(1, 0, 0, 0.9, m).unwrap_err(), TopKCreateError::InvalidWidth);
        assert_eq!(TopK::reserve(1, 1 << 32, 7, 0.9, m).unwrap_err(), TopKCreateError::InvalidWidth);
        assert_eq!(TopK::reserve(1, 8, -1, 0.9, m).unwrap_err(), TopKCreateError::InvalidDepth);
        for d in [0.0, -0.5, 1.0000001, f64::NAN, f64::INFINITY] {
            assert_eq!(TopK::reserve(1, 8, 7, d, m).unwrap_err(), TopKCreateError::InvalidDecay);
        }
        assert_eq!(
            TopK::reserve(1, u32::MAX as i64, u32::MAX as i64, 1.0, m).unwrap_err(),
            TopKCreateError::InsufficientMemory
        );
        assert_eq!(
            TopK::reserve(10, 8, 7, 0.9, 8 * 56 + 239).unwrap_err(),
            TopKCreateError::InsufficientMemory
        );
        let t = TopK::reserve(10, 8, 7, 0.9, 8 * 56 + 240).unwrap();
        assert_eq!(t.memory_usage(), 2088 + 448 + 240);
        assert_eq!(t.table[0], 1.0);
        assert_eq!(t.table[2], 0.9f64.powf(2.0));
    }

    /// The draw is compared as `r / RAND_MAX < p`, exactly.
    #[test]
    fn decay_draw_comparison() {
        for (r, decrements) in [(0u32, true), (RAND_MAX, false)] {
            let mut t = TopK::reserve(1, 1, 1, 1.0, u64::MAX).unwrap();
            let mut rng = move || r;
            t.incr_by(b"owner", 1, &mut rng).unwrap();
            t.add(b"other", &mut rng);
            let b = t.buckets()[0];
            // decay 1: p = 1, so any draw but RAND_MAX decrements (and the newcomer takes over).
            assert_eq!(b.fp == murmur2_32(b"other", TOPK_FINGERPRINT_SEED), decrements);
        }
        // decay 0.5, owner count 1: p = 0.5; draws just below and at RAND_MAX/2 + 1.
        let half = RAND_MAX / 2; // 1073741823: 1073741823 / 2147483647 < 0.5
        for (r, decrements) in [(half, true), (half + 1, false)] {
            let mut t = TopK::reserve(1, 1, 1, 0.5, u64::MAX).unwrap();
            let mut rng = move || r;
            t.add(b"owner", &mut rng);
            t.add(b"other", &mut rng);
            assert_eq!(t.buckets()[0].fp == murmur2_32(b"other", TOPK_FINGERPRINT_SEED), decrements, "{r}");
        }
    }

    #[test]
    fn probability_above_255_uses_the_power_form() {
        let t = TopK::reserve(1, 1, 1, 0.999, u64::MAX).unwrap();
        let p = t.decay_probability(600);
        assert_eq!(p, t.table[255].powf(2.0) * t.table[90]);
        assert!((p - 0.999f64.powi(600)).abs() < 1e-12);
    }

    /// The shortcut of [`TopK::decays`] gives the full comparison's answer for the hardest
    /// non-zero draw (1) and a large one, over counts from 256 to 10^6, for decays near where
    /// `decay^255` crosses `1 / RAND_MAX` and either side of it, with both decay tables.
    #[test]
    fn decay_shortcut_is_exact() {
        for decay in [0.5, 0.9, 0.918, 0.9199, 0.92, 0.925, 0.95, 0.99, 0.999, 0.99999, 1.0] {
            let created = TopK::reserve(1, 1, 1, decay, u64::MAX).unwrap();
            let loaded =
                TopK::from_parts(1, 1, 1, decay, Storage::zeroed(1).unwrap(), vec![TopKSlot::default()]);
            for t in [&created, &loaded] {
                let mut count = 256u32;
                while count < 1_000_000 {
                    for r in [0, 1, 1000, RAND_MAX / 2] {
                        let full = (r as f64) / (RAND_MAX as f64) < t.decay_probability(count);
                        assert_eq!(t.decays(count, r), full, "decay {decay}, count {count}, draw {r}");
                    }
                    count += 1 + count / 64;
                }
            }
        }
        assert_eq!(negligible_from(1.0), u32::MAX);
        assert_eq!(negligible_from(f64::NAN), u32::MAX);
        assert_eq!(negligible_from(5.0), u32::MAX);
        assert_eq!(negligible_from(0.0), 1);
    }

    #[test]
    fn sift_down_tie_rule() {
        // Counts [2, 2, 3]: the first step passes the equal child, so slot 0's item moves down.
        let mut h: Vec<TopKSlot> = [(2, "a"), (2, "b"), (3, "c")]
            .iter()
            .map(|&(c, s)| TopKSlot { fp: 0, item: Some(s.as_bytes().to_vec()), count: c })
            .collect();
        sift_down(&mut h, 0);
        let order: Vec<&[u8]> = h.iter().map(|s| s.item().unwrap()).collect();
        assert_eq!(order, [&b"b"[..], b"a", b"c"]);
        // Slots tagged by their index (as fp), sifted from slot 0: (tag, count) afterwards.
        let sifted = |counts: [u32; 5]| {
            let mut h: Vec<TopKSlot> = counts
                .iter()
                .enumerate()
                .map(|(i, &c)| TopKSlot { fp: i as u32, item: None, count: c })
                .collect();
            sift_down(&mut h, 0);
            h.iter().map(|s| (s.fp, s.count)).collect::<Vec<_>>()
        };
        // Later steps stop at an equal child: 5 sifted down [5, 3, 9, 5, 6] stays above the other 5.
        assert_eq!(sifted([5, 3, 9, 5, 6]), [(1, 3), (0, 5), (2, 9), (3, 5), (4, 6)]);
        // And a strictly smaller grandchild is passed: [5, 3, 9, 4, 6] puts 5 in slot 3.
        assert_eq!(sifted([5, 3, 9, 4, 6]), [(1, 3), (3, 4), (2, 9), (0, 5), (4, 6)]);
    }

    #[test]
    fn reply_items_are_c_strings() {
        assert_eq!(topk_reply_item(b"a\0b"), b"a");
        assert_eq!(topk_reply_item(b"\xff\0"), b"\xff");
        assert_eq!(topk_reply_item(b""), b"");
        assert_eq!(topk_reply_item(b"abc"), b"abc");
    }

    /// The snapshot's view of `t` now: the chunked header, then the buckets' bytes.
    fn dumped(t: &TopK) -> Vec<u8> {
        let mut out = Vec::new();
        super::super::rdb::save_topk_chunked_header(
            t,
            &mut super::super::rdb::ModuleFieldWriter { out: &mut out },
        );
        out.extend_from_slice(&t.bucket_bytes(0..t.bucket_bytes_len()));
        out
    }

    /// The frozen view, read in pieces of 3 MiB (whole buckets) as a snapshot would.
    fn frozen_dump(f: &FrozenTopK) -> Vec<u8> {
        let mut out = f.header().to_vec();
        let mut at = 0;
        while at < f.buckets_len() {
            f.read_buckets(at, 3 << 20, &mut out);
            at += 3 << 20;
        }
        out
    }

    /// A table of 2 rows of 600 000 buckets (9.6 MB: huge storage, 37 copy-on-write pieces),
    /// some items added.
    fn big_topk() -> TopK {
        let mut t = TopK::reserve(5, 600_000, 2, 0.9, u64::MAX).unwrap();
        let mut rng = CRand::default();
        for i in 0..3000u32 {
            t.add(format!("item{}", i % 500).as_bytes(), &mut rng);
        }
        t
    }

    /// Each kind of write, alone while the table is frozen, changes the live Top-K and leaves
    /// the frozen dump as it was, whether the Top-K is dropped before it is read or not: an
    /// add (TOPK.ADD), an increment (TOPK.INCRBY, TOPK.INCRBYSEEDED), a collision that decays
    /// another item's bucket. One write at a time, so that a write skipping its guard fails.
    #[test]
    fn every_write_alone_keeps_the_frozen_dump() {
        assert!(TopK::reserve(5, 100, 3, 0.9, u64::MAX).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let ops: Vec<crate::format::NamedWrite<'_, TopK>> = vec![
            ("add", Box::new(|t: &mut TopK| drop(t.add(b"a new item", &mut CRand::default())))),
            ("incr_by", Box::new(|t: &mut TopK| drop(t.incr_by(b"item7", 50, &mut CRand::new(3)).unwrap()))),
            (
                "decay",
                Box::new(|t: &mut TopK| {
                    // Decay 1 on a bucket another item owns: every draw but RAND_MAX decrements
                    // it (the search ends: 500 items own buckets in row 0).
                    let row0 = (0..).map(|i| format!("c{i}")).find(|c| {
                        let b = t.buckets()[(murmur2_32(c.as_bytes(), 0) % t.width()) as usize];
                        b.count > 0 && b.fp != murmur2_32(c.as_bytes(), TOPK_FINGERPRINT_SEED)
                    });
                    let c = row0.expect("an item colliding with an occupied bucket");
                    t.decay = 1.0;
                    *t.table = [1.0; 256];
                    t.add(c.as_bytes(), &mut || 0u32);
                }),
            ),
        ];
        crate::format::assert_each_write_keeps(&big_topk, &dumped, &TopK::freeze, &frozen_dump, &ops);
    }

    /// An add copies aside only the pieces of the table it changes: at most one per row.
    #[test]
    fn an_add_copies_only_the_pieces_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        use crate::bits::COW_PIECE;
        let mut t = big_topk();
        let at_freeze = t.bucket_bytes(0..t.bucket_bytes_len()).to_vec();
        let frozen = t.freeze().unwrap();
        assert_eq!(frozen.buckets.len().div_ceil(COW_PIECE), 37);
        let changed = |t: &TopK| {
            let live = t.bucket_bytes(0..t.bucket_bytes_len());
            crate::bits::pieces_differing(&live, &at_freeze).len()
        };
        let mut rng = CRand::default();
        for i in 0..10u32 {
            let saved = frozen.buckets.saved_pieces();
            t.add(format!("x{i}").as_bytes(), &mut rng);
            assert!(frozen.buckets.saved_pieces() <= saved + 2, "two rows, two pieces at most");
            assert_eq!(frozen.buckets.saved_pieces(), changed(&t), "after add {i}");
        }
        assert!(frozen.buckets.saved_pieces() >= 5);
    }

    /// A chunked load takes the pieces in order, whole buckets, and counts what is missing.
    #[test]
    fn buckets_load_in_order_and_missing_ones_are_counted() {
        let mut rng = CRand::default();
        let mut t = TopK::reserve(3, 10, 2, 0.9, u64::MAX).unwrap();
        for i in 0..40u32 {
            t.add(&i.to_le_bytes(), &mut rng);
        }
        let bytes = t.bucket_bytes(0..160).to_vec();
        let mut l = TopK::with_buckets_to_load(3, 10, 2, 0.9, t.heap().to_vec()).unwrap();
        assert_eq!(l.load_missing(), 160);
        assert!(l.load_buckets(8, &bytes[8..16]).is_err(), "not the first piece");
        assert!(l.load_buckets(0, &bytes[..12]).is_err(), "not whole buckets");
        l.load_buckets(0, &bytes[..80]).unwrap();
        assert_eq!(l.load_missing(), 80);
        assert!(l.load_buckets(0, &bytes[..8]).is_err(), "again");
        assert!(l.load_buckets(80, &[0; 88]).is_err(), "past the end");
        l.load_buckets(80, &bytes[80..]).unwrap();
        assert_eq!(l.load_missing(), 0);
        assert_eq!(l, t);
    }

    #[test]
    fn increment_range() {
        let mut t = TopK::reserve(3, 8, 7, 0.9, u64::MAX).unwrap();
        let mut rng = CRand::default();
        assert_eq!(t.incr_by(b"x", -1, &mut rng), Err(TopKIncrementError));
        assert_eq!(t.incr_by(b"x", 100_001, &mut rng), Err(TopKIncrementError));
        assert_eq!(t.incr_by(b"x", 100_000, &mut rng), Ok(None));
        assert_eq!(t.count(b"x"), 100_000);
        // Increment 0 of a new item while the heap has room: in the heap with count 0.
        assert_eq!(t.incr_by(b"z", 0, &mut rng), Ok(None));
        assert!(t.query(b"z"));
        assert_eq!(t.count(b"z"), 0);
        assert_eq!(t.list(), [(&b"x"[..], 100_000)]);
    }
}
