//! RedisBloom's Top-K commands (`TOPK.*`, sketches spec §6 and §8), on
//! [`sift::compat::redisbloom::TopK`], and its data type `TopK-TYPE`.
//!
//! # Randomness and replication
//!
//! HeavyKeeper decays a colliding bucket with random draws (spec §6.2, §6.6). RedisBloom draws
//! from the process's `rand()`, so its replicas and its AOF replay draw their own numbers and
//! drift from the primary. Here every `TOPK.ADD` / `TOPK.INCRBY` draws from a generator seeded
//! afresh for the call (the C library's `rand()` algorithm, [`CRand`]), and a call that used a
//! draw is propagated (replicated, logged) as `TOPK.INCRBYSEEDED key seed item increment ...`
//! with its seed and the pairs it applied: a replica, an AOF and sift-server's log replay make
//! exactly the primary's draws and reach the same table and heap. A call without any draw (no
//! collision) is propagated as received, which any RedisBloom replays identically.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use std::borrow::Cow;

use sift::compat::redisbloom::rdb::{self, FieldReader, ModuleFieldReader, RdbCursor};
use sift::compat::redisbloom::{
    topk_reply_item, CRand, DecayRandom, FrozenTopK, TopK, TopKCreateError, MAX_CHUNK, TOPK_DEFAULT_DECAY,
    TOPK_DEFAULT_DEPTH, TOPK_DEFAULT_WIDTH,
};

use crate::frame::itoa;
use crate::sketch::{double, int, piece_chunk, piece_start};
use crate::{err, wrongtype, Chunk, Command, Env, Family, Flags, Frame, LoadContext, Lookup, Store};

/// The key exists already (any type).
pub const KEY_EXISTS: &str = "TopK: key already exists";
/// A missing key.
pub const KEY_MISSING: &str = "TopK: key does not exist";
/// TOPK.INCRBY: an increment outside [0, 100000] (RedisBloom's text, with its run of spaces).
pub const BAD_INCREMENT: &str = "TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000";
/// TOPK.LIST: a third argument that is not (a prefix of) WITHCOUNT.
pub const WITHCOUNT_EXPECTED: &str = "WITHCOUNT keyword expected";

fn create_error(e: TopKCreateError) -> Frame {
    Frame::error(match e {
        TopKCreateError::InvalidK => "TopK: invalid k",
        TopKCreateError::InvalidWidth => "TopK: invalid width",
        TopKCreateError::InvalidDepth => "TopK: invalid depth",
        TopKCreateError::InvalidDecay => "TopK: invalid decay value. must be '<= 1' & '> 0'",
        _ => "ERR Insufficient memory to create topk data structure",
    })
}

/// The Top-K at `key` for reading.
fn topk_at<'s>(store: &'s mut dyn Store, key: &[u8]) -> Result<&'s TopK, Frame> {
    match store.get::<TopK>(key) {
        Lookup::Found(t) => Ok(t),
        Lookup::Missing => Err(Frame::error(KEY_MISSING)),
        Lookup::WrongType => Err(wrongtype()),
    }
}

/// `TOPK.RESERVE key topk [width depth decay]`.
pub fn reserve(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() != 3 && argv.len() != 6 {
        return Frame::error(err::arity("topk.reserve"));
    }
    if store.exists(argv[1]) {
        return Frame::error(KEY_EXISTS);
    }
    // An argument that does not parse fails the same check as an out-of-range one.
    let k = int(argv[2]).unwrap_or(0);
    let (w, d, decay) = if argv.len() == 6 {
        (int(argv[3]).unwrap_or(0), int(argv[4]).unwrap_or(0), double(argv[5]).unwrap_or(f64::NAN))
    } else {
        (TOPK_DEFAULT_WIDTH, TOPK_DEFAULT_DEPTH, TOPK_DEFAULT_DECAY)
    };
    match TopK::reserve(k, w, d, decay, env.memory_budget()) {
        Ok(t) => {
            store.insert(argv[1], t);
            Frame::ok()
        }
        Err(e) => create_error(e),
    }
}

/// The decay draws of one call: `rand()` seeded with the call's seed, started only when a first
/// draw is needed (most calls on a wide table draw nothing).
struct Draws {
    seed: u32,
    rng: Option<CRand>,
}

impl DecayRandom for Draws {
    fn next_rand(&mut self) -> u32 {
        let seed = self.seed;
        self.rng.get_or_insert_with(|| CRand::new(seed)).next_rand()
    }
}

/// A fresh seed on the primary: a process-wide Weyl sequence started from the time and process
/// id at first use, finished by SplitMix64. Only its spread matters; replicas receive it. (The
/// time and id are read once: `getpid` is a system call, and a call per TOPK.ADD was 5% of the
/// server's time under pipelined adds.)
fn fresh_seed() -> u32 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static START: OnceLock<u64> = OnceLock::new();
    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
    let start = *START.get_or_init(|| {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        since_epoch.rotate_left(17) ^ (u64::from(std::process::id()) << 32)
    });
    let mut z = NEXT.fetch_add(GOLDEN, Ordering::Relaxed) ^ start;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

/// The expelled item of one step, as a C string (spec §2.1), or null. The item's own bytes
/// become the reply (cut at a NUL), without a copy.
fn expelled(e: Option<Vec<u8>>) -> Frame {
    e.map_or(Frame::Null, |mut item| {
        let shown = topk_reply_item(&item).len();
        item.truncate(shown);
        Frame::bulk(item)
    })
}

/// The (item, increment) pairs of a call, as its arguments give them.
#[derive(Clone, Copy)]
enum Pairs<'a> {
    /// TOPK.ADD's items, each with increment 1.
    Items(&'a [&'a [u8]]),
    /// TOPK.INCRBY's (and TOPK.INCRBYSEEDED's) `item increment` pairs. An increment that is not
    /// an integer is −1, which the range check refuses when its turn comes (RedisBloom does not
    /// check them in advance).
    Increments(&'a [&'a [u8]]),
}

impl<'a> Pairs<'a> {
    fn len(self) -> usize {
        match self {
            Pairs::Items(a) => a.len(),
            Pairs::Increments(a) => a.len() / 2,
        }
    }

    /// Pair `i`: the item, the increment, and the increment's text. An increment that parses
    /// is Redis's strict integer syntax, so its text is its canonical decimal form.
    fn get(self, i: usize) -> (&'a [u8], i64, &'a [u8]) {
        match self {
            Pairs::Items(a) => (a[i], 1, b"1"),
            Pairs::Increments(a) => (a[2 * i], int(a[2 * i + 1]).unwrap_or(-1), a[2 * i + 1]),
        }
    }
}

/// Applies `pairs` in order with draws from `seed`, stopping at the first bad increment (whose
/// error ends the reply). Returns the reply elements, how many pairs were applied, and whether
/// any draw was made.
fn apply(t: &mut TopK, pairs: Pairs<'_>, seed: u32) -> (Vec<Frame>, usize, bool) {
    let mut draws = Draws { seed, rng: None };
    let mut out = Vec::with_capacity(pairs.len());
    let mut applied = 0;
    for i in 0..pairs.len() {
        let (item, incr, _) = pairs.get(i);
        match t.incr_by(item, incr, &mut draws) {
            Ok(e) => {
                out.push(expelled(e));
                applied += 1;
            }
            Err(_) => {
                out.push(Frame::error(BAD_INCREMENT));
                break;
            }
        }
    }
    (out, applied, draws.rng.is_some())
}

/// TOPK.ADD and TOPK.INCRBY: the pairs applied with a fresh seed, and, when a draw was made, the
/// seeded command propagated instead of the request.
fn add_pairs(store: &mut dyn Store, env: &mut dyn Env, key: &[u8], pairs: Pairs<'_>) -> Frame {
    if let Err(f) = topk_at(store, key) {
        return f;
    }
    let seed = fresh_seed();
    let Some(t) = store.get_mut::<TopK>(key).found() else {
        unreachable!("checked above under the same lock")
    };
    let (out, applied, drew) = apply(t, pairs, seed);
    if drew {
        let seed_text = itoa(i64::from(seed));
        let mut cmd: Vec<&[u8]> = Vec::with_capacity(3 + 2 * applied);
        cmd.extend([&b"TOPK.INCRBYSEEDED"[..], key, seed_text.as_bytes()]);
        for i in 0..applied {
            let (item, _, incr) = pairs.get(i);
            cmd.extend([item, incr]);
        }
        env.propagate_one(&cmd);
    }
    Frame::Array(out)
}

/// `TOPK.ADD key item [item ...]`.
pub fn add(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    add_pairs(store, env, argv[1], Pairs::Items(&argv[2..]))
}

/// `TOPK.INCRBY key item increment [item increment ...]`. A bad increment ends the reply with
/// its error, the pairs before it applied; RedisBloom announces one element per pair and sends
/// fewer when the bad pair is not the last (spec §8), this reply is always well formed.
pub fn incrby(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() % 2 != 0 {
        return Frame::error(err::arity("topk.incrby"));
    }
    add_pairs(store, env, argv[1], Pairs::Increments(&argv[2..]))
}

/// `TOPK.INCRBYSEEDED key seed item increment [item increment ...]`: sift's own, what a
/// TOPK.ADD or TOPK.INCRBY that drew random numbers is propagated as (see the module docs).
pub fn incrbyseeded(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() % 2 == 0 {
        return Frame::error(err::arity("topk.incrbyseeded"));
    }
    let Some(seed) = int(argv[2]).and_then(|s| u32::try_from(s).ok()) else {
        return Frame::error("ERR invalid seed");
    };
    if let Err(f) = topk_at(store, argv[1]) {
        return f;
    }
    let Some(t) = store.get_mut::<TopK>(argv[1]).found() else { unreachable!("checked above") };
    Frame::Array(apply(t, Pairs::Increments(&argv[3..]), seed).0)
}

/// `TOPK.QUERY key item [item ...]`.
pub fn query(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match topk_at(store, argv[1]) {
        Ok(t) => Frame::Array(argv[2..].iter().map(|i| Frame::Boolean(t.query(i))).collect()),
        Err(f) => f,
    }
}

/// `TOPK.COUNT key item [item ...]`.
pub fn count(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match topk_at(store, argv[1]) {
        Ok(t) => Frame::Array(argv[2..].iter().map(|i| Frame::Integer(t.count(i) as i64)).collect()),
        Err(f) => f,
    }
}

/// `TOPK.LIST`'s keyword: C's `strncasecmp(arg, "WITHCOUNT", strlen(arg)) == 0` (spec §8): any
/// prefix, and anything after a NUL that both strings reach.
fn withcount_keyword(arg: &[u8]) -> bool {
    const W: &[u8] = b"WITHCOUNT";
    for (i, &a) in arg.iter().enumerate() {
        let b = W.get(i).copied().unwrap_or(0);
        if !a.eq_ignore_ascii_case(&b) {
            return false;
        }
        if a == 0 {
            return true;
        }
    }
    true
}

/// `TOPK.LIST key [WITHCOUNT]`.
pub fn list(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() > 3 {
        return Frame::error(err::arity("topk.list"));
    }
    let with_count = match argv.get(2) {
        None => false,
        Some(a) if withcount_keyword(a) => true,
        Some(_) => return Frame::error(WITHCOUNT_EXPECTED),
    };
    match topk_at(store, argv[1]) {
        Ok(t) => {
            let mut out = Vec::new();
            for (item, count) in t.list() {
                out.push(Frame::bulk(topk_reply_item(item).to_vec()));
                if with_count {
                    out.push(Frame::Integer(count as i64));
                }
            }
            Frame::Array(out)
        }
        Err(f) => f,
    }
}

/// `TOPK.INFO key`.
pub fn info(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match topk_at(store, argv[1]) {
        Ok(t) => Frame::Map(vec![
            (Frame::Simple("k".into()), Frame::Integer(t.k() as i64)),
            (Frame::Simple("width".into()), Frame::Integer(t.width() as i64)),
            (Frame::Simple("depth".into()), Frame::Integer(t.depth() as i64)),
            (Frame::Simple("decay".into()), Frame::Double(t.decay())),
        ]),
        Err(f) => f,
    }
}

/// The `topk` family: RedisBloom's Top-K (`TopK-TYPE`) and its commands.
#[derive(Debug)]
pub struct TopKFamily;

const WRITE: Flags = Flags::WRITE.with(Flags::DENYOOM);

use crate::command::key1 as command;

impl Family for TopKFamily {
    const NAME: &'static str = "topk";
    type Type = TopK;
    /// Arities of spec §2.4, flags and ACL categories of §2.6, in RedisBloom's order; then sift's
    /// seeded form.
    #[rustfmt::skip]
    const COMMANDS: &'static [Command] = &[
        command("topk.reserve", -3, WRITE, &["@write", "@fast", "@topk"], reserve, "Initializes a TopK with specified parameters"),
        command("topk.add", -3, WRITE, &["@write", "@topk"], add, "Adds an item to a Top-k sketch. Multiple items can be added at the same time."),
        command("topk.incrby", -4, WRITE, &["@write", "@topk"], incrby, "Increases the count of one or more items by increment"),
        command("topk.query", -3, Flags::READONLY, &["@read", "@topk"], query, "Checks whether one or more items are in a sketch"),
        command("topk.count", -3, Flags::READONLY, &["@read", "@topk"], count, "Return the count for one or more items are in a sketch"),
        command("topk.list", -2, Flags::READONLY, &["@read", "@topk"], list, "Return the full list of items in Top-K sketch"),
        command("topk.info", 2, Flags::READONLY.with(Flags::FAST), &["@read", "@fast", "@topk"], info, "Returns information about a sketch"),
        command("topk.incrbyseeded", -5, WRITE, &["@write", "@topk"], incrbyseeded, "TOPK.INCRBY with the seed of its decay draws: how a call that drew random numbers is replicated"),
    ];
}

// `TopK-TYPE`: RedisBloom's type name and RDB encoding (encver 0, spec §10.4), memory callback
// `2088 + 8·width·depth + 24·k` (§10.7); in snapshots, tag 6 and the chunks of `bucket_chunk`.
crate::sketch::sketch_data_type!(
    chunks: TopK,
    rdb::TOPK_TYPE_NAME,
    6,
    rdb::save_topk,
    rdb::load_topk,
    {
        /// The header (`save_topk_chunked_header`: the shape, the decay and the heap), then the
        /// buckets' RDB string in pieces of at most [`MAX_CHUNK`] bytes, each with the position
        /// after it (as the Count-Min Sketch's counters): a snapshot never builds a buffer of
        /// the whole table, nor a recovery reads one beside the table it fills.
        fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)> {
            if cursor == 0 {
                let header = crate::sketch::fields(self, |t, w| rdb::save_topk_chunked_header(t, w));
                return Some((Chunk { pos: 0, data: Cow::Owned(header) }, 1));
            }
            let (piece, next) = piece_chunk(self.bucket_bytes_len(), cursor)?;
            Some((Chunk { pos: i64::try_from(next).ok()?, data: self.bucket_bytes(piece) }, next))
        }

        /// The header of the chunked dump, whose buckets `load_chunk` fills in; or, from
        /// snapshots written when a Top-K's dump was one chunk, all its RDB fields.
        fn restore(header: &[u8], cx: &LoadContext) -> Result<Self, String> {
            if starts_with_zero(header) {
                crate::sketch::restore(header, cx, Self::ENCVER, |r, e, l| rdb::load_topk_chunked_header(r, e, l))
            } else {
                crate::sketch::restore(header, cx, Self::ENCVER, |r, e, l| rdb::load_topk(r, e, l))
            }
        }

        fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String> {
            let at = piece_start(pos, data.len())?;
            self.load_buckets(at, data).map_err(|e| e.to_string())
        }
    },
    {
        /// A large table's buckets are read by the snapshot later, its writers copying aside
        /// only the pieces they change first ([`TopK::freeze`]; the heap is copied at the
        /// freeze); a small one is dumped at once.
        fn freeze(&self) -> Option<Box<dyn crate::Frozen>> {
            TopK::freeze(self).map(|f| Box::new(f) as Box<dyn crate::Frozen>)
        }

        /// A chunked load that ended before the last piece of buckets is refused: the table
        /// would otherwise be silently emptier than the one saved.
        fn finish_load(&mut self) -> Result<(), String> {
            match self.load_missing() {
                0 => Ok(()),
                n => Err(format!(
                    "the last {n} of {} bytes of buckets are missing",
                    self.bucket_bytes_len()
                )),
            }
        }
    }
);

impl crate::Frozen for FrozenTopK {
    fn chunk_count(&self) -> u64 {
        1 + self.buckets_len().div_ceil(MAX_CHUNK) as u64
    }

    /// The chunks of the Top-K's dump at the freeze: the header, then the buckets.
    fn dump_chunk(&self, cursor: u64, out: &mut Vec<u8>) -> Option<(i64, u64)> {
        if cursor == 0 {
            out.extend_from_slice(self.header());
            return Some((0, 1));
        }
        let (piece, next) = piece_chunk(self.buckets_len(), cursor)?;
        self.read_buckets(piece.start, piece.len(), out);
        Some((i64::try_from(next).ok()?, next))
    }
}

/// Does the header begin with an unsigned 0, the chunked header's marker? A one-chunk dump
/// begins with `k`, at least 1.
fn starts_with_zero(header: &[u8]) -> bool {
    let mut cur = RdbCursor::new(header);
    let mut r = ModuleFieldReader { cur: &mut cur, max_string: 0 };
    r.load_unsigned() == Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch;

    #[test]
    fn withcount_is_a_c_prefix_comparison() {
        for ok in [&b"WITHCOUNT"[..], b"withcount", b"with", b"W", b"", b"WITHCOUNT\0junk"] {
            assert!(withcount_keyword(ok), "{ok:?}");
        }
        for bad in [&b"WITHCOUNTS"[..], b"x", b"with\0"] {
            assert!(!withcount_keyword(bad), "{bad:?}");
        }
    }

    /// The same seed gives the same table and heap; a call that drew reports it.
    #[test]
    fn seeded_calls_are_reproducible() {
        let mut a = TopK::reserve(3, 2, 2, 0.9, 1 << 20).unwrap();
        let items: Vec<Vec<u8>> = (0..200).map(|i| format!("i{}", i % 17).into_bytes()).collect();
        let args: Vec<&[u8]> = items.iter().flat_map(|i| [&i[..], b"3"]).collect();
        let pairs = Pairs::Increments(&args);
        let mut b = a.clone();
        let (ra, na, drew) = apply(&mut a, pairs, 42);
        let (rb, nb, _) = apply(&mut b, pairs, 42);
        assert!(drew, "a 2x2 table with 17 items collides");
        assert_eq!((ra, na), (rb, nb));
        assert_eq!(rdb_fields(&a), rdb_fields(&b));
        assert_ne!(fresh_seed(), fresh_seed(), "successive seeds differ");
    }

    fn rdb_fields(t: &TopK) -> Vec<u8> {
        sketch::fields(t, |t, w| rdb::save_topk(t, w))
    }

    /// A table of 2 rows of 2.5 M buckets (40 MB: three pieces of buckets), some items added.
    fn forty_mb() -> TopK {
        let mut t = TopK::reserve(10, 2_500_000, 2, 0.9, u64::MAX).unwrap();
        let items: Vec<Vec<u8>> = (0..5000u32).map(|i| format!("i{}", i % 700).into_bytes()).collect();
        let args: Vec<&[u8]> = items.iter().map(|i| &i[..]).collect();
        apply(&mut t, Pairs::Items(&args), 7);
        t
    }

    fn load(chunks: &[(i64, Vec<u8>)], cx: &LoadContext) -> Result<TopK, String> {
        crate::registry::load_as(chunks, cx)
    }

    /// A 40 MB Top-K dumps as a small header (the shape and the heap) and its buckets in pieces
    /// of at most `MAX_CHUNK` bytes, and loads back equal from them. Its RDB fields are still
    /// RedisBloom's.
    #[test]
    fn a_large_topk_dumps_in_pieces_and_loads_back() {
        let t = forty_mb();
        let chunks = crate::registry::live_chunks(&t);
        assert_eq!(chunks.len(), 1 + 40_000_000usize.div_ceil(MAX_CHUNK));
        assert_eq!(chunks[0], (0, sketch::fields(&t, |t, w| rdb::save_topk_chunked_header(t, w))));
        assert!(chunks[0].1.len() < 1000, "{} header bytes", chunks[0].1.len());
        let rdb = rdb_fields(&t);
        let mut at = 0usize;
        for (pos, data) in &chunks[1..] {
            assert!(!data.is_empty() && data.len() <= MAX_CHUNK, "{} bytes", data.len());
            assert_eq!(&t.bucket_bytes(at..at + data.len())[..], &data[..]);
            at += data.len();
            assert_eq!(*pos, at as i64 + 1, "the position after the piece");
        }
        assert_eq!(at, t.bucket_bytes_len());
        // The pieces are the RDB's bucket string, byte for byte.
        let buckets: Vec<u8> = chunks[1..].iter().flat_map(|(_, d)| d.iter().copied()).collect();
        let mut head = Vec::new();
        {
            use sift::compat::redisbloom::rdb::FieldWriter;
            let mut w = rdb::ModuleFieldWriter { out: &mut head };
            for v in [10, 2_500_000, 2] {
                w.save_unsigned(v);
            }
            w.save_double(0.9);
        }
        rdb::write_length(&mut head, rdb::OPCODE_STRING);
        rdb::write_length(&mut head, buckets.len() as u64);
        assert!(rdb[..head.len()] == head[..] && rdb[head.len()..][..buckets.len()] == buckets[..]);
        assert_eq!(load(&chunks, &LoadContext::default()), Ok(t.clone()));
        let mut tight = LoadContext::default();
        tight.limits.max_bytes = 40_000_000 - 1;
        assert!(load(&chunks[..1], &tight).is_err(), "the header is checked within the load limits");
    }

    /// A snapshot written when a Top-K's dump was one chunk (all its RDB fields) still loads.
    #[test]
    fn a_one_chunk_dump_of_earlier_snapshots_loads() {
        let t = forty_mb();
        assert_eq!(load(&[(0, rdb_fields(&t))], &LoadContext::default()), Ok(t));
        let mut small = TopK::reserve(1, 2, 1, 1.0, u64::MAX).unwrap();
        small.add(b"x", &mut CRand::default());
        // k 1, width 2, depth 1, decay 1.0, the 16 bucket bytes, the 24-byte heap record, the
        // item "x\0": `save_topk`, RedisBloom's fields.
        let fp = sift::hash::murmur2_32(b"x", 1919).to_le_bytes();
        let col = sift::hash::murmur2_32(b"x", 0) % 2;
        let mut bucket_bytes = vec![0u8; 16];
        bucket_bytes[8 * col as usize..8 * col as usize + 4].copy_from_slice(&fp);
        bucket_bytes[8 * col as usize + 4] = 1;
        let mut fixed = vec![2u8, 1, 2, 2, 2, 1, 4];
        fixed.extend_from_slice(&1.0f64.to_le_bytes());
        fixed.extend_from_slice(&[5, 16]);
        fixed.extend_from_slice(&bucket_bytes);
        fixed.extend_from_slice(&[5, 24]);
        fixed.extend_from_slice(&fp);
        fixed.extend_from_slice(&[1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        fixed.extend_from_slice(&[5, 2, b'x', 0]);
        assert_eq!(fixed, rdb_fields(&small));
        assert_eq!(load(&[(0, fixed)], &LoadContext::default()), Ok(small));
    }

    /// A frozen large Top-K gives the chunks a snapshot of the live one stores at the freeze,
    /// byte for byte, though adds change it before they are read; a small one is dumped at once.
    #[test]
    fn a_frozen_topk_gives_the_snapshot_chunks_of_the_freeze() {
        let mut t = forty_mb();
        let live = crate::registry::live_chunks(&t);
        let Some(frozen) = crate::Data::freeze(&t) else {
            if cfg!(target_os = "linux") {
                panic!("a large Top-K is frozen on Linux");
            }
            return;
        };
        let items: Vec<Vec<u8>> = (0..20_000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let args: Vec<&[u8]> = items.iter().map(|i| &i[..]).collect();
        apply(&mut t, Pairs::Items(&args), 9);
        assert_ne!(crate::registry::live_chunks(&t), live);
        assert_eq!(frozen.chunk_count(), 4);
        assert!(
            crate::registry::frozen_chunks(&*frozen) == live,
            "the frozen chunks are the live chunks at the freeze"
        );
        assert!(crate::Data::freeze(&TopK::reserve(3, 100, 5, 0.9, u64::MAX).unwrap()).is_none());
    }

    /// A dump whose later pieces are missing is a load error naming what is missing, not a
    /// Top-K with empty buckets; pieces out of order or outside the table are refused.
    #[test]
    fn missing_or_misplaced_pieces_are_refused() {
        let t = forty_mb();
        let chunks = crate::registry::live_chunks(&t);
        crate::registry::assert_incomplete_dumps_refused::<TopK>(&chunks, "bytes of buckets are missing");
        let small = TopK::reserve(2, 10, 2, 0.9, u64::MAX).unwrap();
        let header = crate::registry::live_chunks(&small).remove(0);
        for (pos, data) in [(1i64, vec![0u8; 8]), (162, vec![0; 8]), (9, vec![0; 7]), (i64::MIN, vec![])] {
            assert!(load(&[header.clone(), (pos, data.clone())], &LoadContext::default()).is_err(), "{pos}");
        }
        assert_eq!(load(&[header.clone(), (161, vec![0; 160])], &LoadContext::default()), Ok(small));
    }
}
