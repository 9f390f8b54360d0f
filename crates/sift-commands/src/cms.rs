//! RedisBloom's Count-Min Sketch commands (`CMS.*`, sketches spec §5 and §8), on
//! [`sift::compat::redisbloom::CountMinSketch`], and its data type `CMSk-TYPE`.
//!
//! Arguments are checked in RedisBloom's order and the error texts are RedisBloom's, byte for
//! byte (most without an `ERR ` prefix). A sketch is allocated only within the memory budget
//! (`maxmemory`): an absurd `CMS.INITBYDIM` is refused with RedisBloom's out-of-memory reply
//! before anything is allocated.

use std::borrow::Cow;

use sift::compat::redisbloom::rdb::{self, FieldReader, ModuleFieldReader, RdbCursor};
use sift::compat::redisbloom::MAX_CHUNK;
use sift::compat::redisbloom::{CmsCreateError, CmsMergeError, CmsSource, CountMinSketch, CMS_COUNTER_MAX};

use crate::sketch::{double, int, piece_chunk, piece_start};
use crate::{
    err, wrongtype, Chunk, Command, Env, Family, Flags, Frame, Held, KeyFlags, KeySpec, LoadContext, Lookup,
    Store, KEY1,
};

/// The destination exists already (any type).
pub const KEY_EXISTS: &str = "CMS: key already exists";
/// A missing key.
pub const KEY_MISSING: &str = "CMS: key does not exist";
/// CMS.INCRBY: an increment that is not an integer.
pub const CANNOT_PARSE: &str = "CMS: Cannot parse number";
/// CMS.INCRBY: a negative increment.
pub const NEGATIVE: &str = "CMS: Number cannot be negative";
/// CMS.INCRBY: an item whose counters are saturated.
pub const INCRBY_OVERFLOW: &str = "CMS: INCRBY overflow";
/// CMS.MERGE: `numKeys` is not an integer.
pub const INVALID_NUMKEYS: &str = "CMS: invalid numkeys";
/// CMS.MERGE: `numKeys` ≤ 0.
pub const NUMKEYS_POSITIVE: &str = "CMS: Number of keys must be positive";
/// CMS.MERGE: the sources do not match `numKeys` (no WEIGHTS).
pub const WRONG_KEYS: &str = "CMS: wrong number of keys";
/// CMS.MERGE: the sources or weights do not match `numKeys`.
pub const WRONG_KEYS_WEIGHTS: &str = "CMS: wrong number of keys/weights";
/// CMS.MERGE: a weight that is not an integer.
pub const INVALID_WEIGHT: &str = "CMS: invalid weight value";
/// CMS.MERGE: a source of another shape.
pub const SHAPE_DIFFERS: &str = "CMS: width/depth is not equal";
/// CMS.MERGE: a cell or the count would leave its range.
pub const MERGE_OVERFLOW: &str = "CMS: MERGE overflow";

/// The reply of a failed creation (spec §8).
fn create_error(e: CmsCreateError) -> Frame {
    Frame::error(match e {
        CmsCreateError::InvalidWidth => "CMS: invalid width",
        CmsCreateError::InvalidDepth => "CMS: invalid depth",
        CmsCreateError::InvalidOverestimation => "CMS: invalid overestimation value",
        CmsCreateError::InvalidProbability => "CMS: invalid prob value",
        CmsCreateError::InvalidDimensions => "CMS: invalid init arguments",
        _ => "CMS: Insufficient memory to create the key",
    })
}

/// The sketch at `key` for reading.
fn sketch_at<'s>(store: &'s mut dyn Store, key: &[u8]) -> Result<&'s CountMinSketch, Frame> {
    match store.get::<CountMinSketch>(key) {
        Lookup::Found(c) => Ok(c),
        Lookup::Missing => Err(Frame::error(KEY_MISSING)),
        Lookup::WrongType => Err(wrongtype()),
    }
}

fn init(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]], by_dim: bool) -> Frame {
    if store.exists(argv[1]) {
        return Frame::error(KEY_EXISTS);
    }
    let budget = env.memory_budget();
    // An argument that does not parse fails the same check as an out-of-range one.
    let made = if by_dim {
        CountMinSketch::init_by_dim(int(argv[2]).unwrap_or(0), int(argv[3]).unwrap_or(0), budget)
    } else {
        let e = double(argv[2]).unwrap_or(f64::NAN);
        let p = double(argv[3]).unwrap_or(f64::NAN);
        CountMinSketch::init_by_prob(e, p, budget)
    };
    match made {
        Ok(c) => {
            store.insert(argv[1], c);
            Frame::ok()
        }
        Err(e) => create_error(e),
    }
}

/// `CMS.INITBYDIM key width depth`.
pub fn initbydim(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    init(store, env, argv, true)
}

/// `CMS.INITBYPROB key error probability`.
pub fn initbyprob(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    init(store, env, argv, false)
}

/// `CMS.INCRBY key item increment [item increment ...]`: every increment is parsed before any is
/// applied.
pub fn incrby(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() % 2 != 0 {
        return Frame::error(err::arity("cms.incrby"));
    }
    if let Err(f) = sketch_at(store, argv[1]) {
        return f;
    }
    let mut pairs = Vec::with_capacity((argv.len() - 2) / 2);
    for p in argv[2..].chunks_exact(2) {
        match int(p[1]) {
            None => return Frame::error(CANNOT_PARSE),
            Some(v) if v < 0 => return Frame::error(NEGATIVE),
            Some(v) => pairs.push((p[0], v as u64)),
        }
    }
    let Some(c) = store.get_mut::<CountMinSketch>(argv[1]).found() else {
        unreachable!("checked above under the same lock")
    };
    Frame::Array(
        pairs
            .into_iter()
            .map(|(item, v)| match c.incr_by(item, v) {
                CMS_COUNTER_MAX => Frame::error(INCRBY_OVERFLOW),
                n => Frame::Integer(n as i64),
            })
            .collect(),
    )
}

/// `CMS.QUERY key item [item ...]`.
pub fn query(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match sketch_at(store, argv[1]) {
        Ok(c) => Frame::Array(argv[2..].iter().map(|i| Frame::Integer(c.query(i) as i64)).collect()),
        Err(f) => f,
    }
}

/// `CMS.INFO key`.
pub fn info(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match sketch_at(store, argv[1]) {
        Ok(c) => Frame::Map(vec![
            (Frame::Simple("width".into()), Frame::Integer(c.width() as i64)),
            (Frame::Simple("depth".into()), Frame::Integer(c.depth() as i64)),
            (Frame::Simple("count".into()), Frame::Integer(c.info_count())),
        ]),
        Err(f) => f,
    }
}

/// `CMS.MERGE destination numKeys source [source ...] [WEIGHTS weight [weight ...]]`.
///
/// The destination must exist; its contents are replaced by the weighted sum, computed in full
/// before anything is stored (an overflow changes nothing). The sources are declared keys (a
/// `numKeys` key spec), unlike RedisBloom's registration, so that the server locks them and
/// Redis Cluster refuses sources in other slots.
pub fn merge(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let dest = argv[1];
    let (width, depth) = match sketch_at(store, dest) {
        Ok(c) => (c.width(), c.depth()),
        Err(f) => return f,
    };
    let Some(numkeys) = int(argv[2]) else { return Frame::error(INVALID_NUMKEYS) };
    if numkeys <= 0 {
        return Frame::error(NUMKEYS_POSITIVE);
    }
    let rest = &argv[3..];
    let weights_at = rest.iter().position(|a| a.eq_ignore_ascii_case(b"WEIGHTS"));
    let n = match usize::try_from(numkeys) {
        Ok(n) if weights_at.is_none() && n == rest.len() => n,
        _ if weights_at.is_none() => return Frame::error(WRONG_KEYS),
        Ok(n) if weights_at == Some(n) && rest.len() == 1 + 2 * n => n,
        _ => return Frame::error(WRONG_KEYS_WEIGHTS),
    };
    let sources = &rest[..n];
    let mut weights = Vec::with_capacity(n);
    {
        let held = store.read_many(sources);
        for (i, h) in held.iter().enumerate() {
            let w = match weights_at {
                Some(_) => match int(rest[n + 1 + i]) {
                    Some(w) => w,
                    None => return Frame::error(INVALID_WEIGHT),
                },
                None => 1,
            };
            match h {
                Held::Missing => return Frame::error(KEY_MISSING),
                Held::Data(d) => match d.downcast_ref::<CountMinSketch>() {
                    Some(s) if (s.width(), s.depth()) != (width, depth) => {
                        return Frame::error(SHAPE_DIFFERS)
                    }
                    Some(_) => {}
                    None => return wrongtype(),
                },
                Held::Other => return wrongtype(),
            }
            weights.push(w);
        }
    }
    // The sum goes to a fresh sketch of the same shape (a merge replaces every cell), computed
    // from the sources as they are (the destination among them with its old contents).
    let mut result = match CountMinSketch::init_by_dim(width as i64, depth as i64, env.memory_budget()) {
        Ok(c) => c,
        Err(e) => return create_error(e),
    };
    let outcome = {
        let held = store.read_many(sources);
        let inputs: Vec<(CmsSource<'_>, i64)> = held
            .iter()
            .zip(&weights)
            .map(|(h, &w)| match h {
                Held::Data(d) => (CmsSource::Sketch(d.downcast_ref().expect("checked above")), w),
                _ => unreachable!("checked above under the same lock"),
            })
            .collect();
        result.merge(&inputs)
    };
    match outcome {
        Ok(()) => {
            // Assigned in place, so the destination keeps its time to live.
            if let Some(d) = store.get_mut::<CountMinSketch>(dest).found() {
                *d = result;
            }
            Frame::ok()
        }
        Err(CmsMergeError::Overflow) => Frame::error(MERGE_OVERFLOW),
        Err(e) => Frame::error(format!("ERR {e}")),
    }
}

/// The `cms` family: RedisBloom's Count-Min Sketch (`CMSk-TYPE`) and its commands.
#[derive(Debug)]
pub struct Cms;

const WRITE: Flags = Flags::WRITE.with(Flags::DENYOOM);

impl Family for Cms {
    const NAME: &'static str = "cms";
    type Type = CountMinSketch;
    /// Arities of spec §2.4, flags and ACL categories of §2.6, in RedisBloom's order.
    const COMMANDS: &'static [Command] = &[
        Command {
            name: "cms.initbydim",
            arity: 4,
            flags: WRITE,
            acl: &["@write", "@fast", "@cms"],
            keys: KEY1,
            summary: "Initializes a Count-Min Sketch to dimensions specified by user",
            handler: initbydim,
        },
        Command {
            name: "cms.initbyprob",
            arity: 4,
            flags: WRITE,
            acl: &["@write", "@fast", "@cms"],
            keys: KEY1,
            summary: "Initializes a Count-Min Sketch to accommodate requested tolerances.",
            handler: initbyprob,
        },
        Command {
            name: "cms.incrby",
            arity: -4,
            flags: WRITE,
            acl: &["@write", "@cms"],
            keys: KEY1,
            summary: "Increases the count of one or more items by increment",
            handler: incrby,
        },
        Command {
            name: "cms.query",
            arity: -3,
            flags: Flags::READONLY,
            acl: &["@read", "@cms"],
            keys: KEY1,
            summary: "Returns the count for one or more items in a sketch",
            handler: query,
        },
        Command {
            name: "cms.merge",
            arity: -4,
            flags: WRITE,
            acl: &["@write", "@cms"],
            keys: &[
                KeySpec::range(1, 1, 1),
                KeySpec::keynum(2).with_flags(KeyFlags::RO.with(KeyFlags::ACCESS)),
            ],
            summary: "Merges several sketches into one sketch",
            handler: merge,
        },
        Command {
            name: "cms.info",
            arity: 2,
            flags: Flags::READONLY.with(Flags::FAST),
            acl: &["@read", "@fast", "@cms"],
            keys: KEY1,
            summary: "Returns information about a sketch",
            handler: info,
        },
    ];
}

// `CMSk-TYPE`: RedisBloom's type name and RDB encoding (encver 0, spec §10.3), memory callback
// `32 + 4·width·depth` (§10.7); in snapshots, tag 5 and the chunks of `piece_chunk`.
crate::sketch::sketch_data_type!(
    chunks: CountMinSketch,
    rdb::CMS_TYPE_NAME,
    5,
    rdb::save_cms,
    rdb::load_cms,
    {
        /// The header (`save_cms_header`: width, depth, count), then the counters in pieces of
        /// at most [`MAX_CHUNK`] bytes, each with the position after it (as the cuckoo filter's
        /// slots): a snapshot never builds a buffer of the whole sketch, nor a recovery reads one
        /// beside the sketch it fills.
        fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)> {
            if cursor == 0 {
                let header = crate::sketch::fields(self, |c, w| rdb::save_cms_header(c, w));
                return Some((Chunk { pos: 0, data: Cow::Owned(header) }, 1));
            }
            let (piece, next) = piece_chunk(self.cells_le().len(), cursor)?;
            Some((Chunk { pos: i64::try_from(next).ok()?, data: Cow::Borrowed(&self.cells_le()[piece]) }, next))
        }

        /// The header of the chunked dump, whose counters `load_chunk` fills in; or, from
        /// snapshots written when a sketch's dump was one chunk, all its RDB fields.
        fn restore(header: &[u8], cx: &LoadContext) -> Result<Self, String> {
            if is_chunked_header(header) {
                crate::sketch::restore(header, cx, Self::ENCVER, |r, e, l| rdb::load_cms_header(r, e, l))
            } else {
                crate::sketch::restore(header, cx, Self::ENCVER, |r, e, l| rdb::load_cms(r, e, l))
            }
        }

        fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String> {
            let at = piece_start(pos, data.len())?;
            self.load_cells(at, data).map_err(|e| e.to_string())
        }
    },
    {
        /// A large sketch's counters are read by the snapshot later, its writers copying aside
        /// only the pieces they change first ([`CountMinSketch::freeze`]); a small one is dumped
        /// at once.
        fn freeze(&self) -> Option<Box<dyn crate::Frozen>> {
            CountMinSketch::freeze(self).map(|f| Box::new(f) as Box<dyn crate::Frozen>)
        }

        /// A chunked load that ended before the last piece of counters is refused: the
        /// sketch would otherwise be silently emptier than the one saved.
        fn finish_load(&mut self) -> Result<(), String> {
            match self.load_missing() {
                0 => Ok(()),
                n => Err(format!("the last {n} of {} bytes of counters are missing", self.cells_le().len())),
            }
        }
    }
);

/// Is `header` the chunked dump's header, exactly three unsigned fields? The one-chunk dump
/// has the counters' string after them.
fn is_chunked_header(header: &[u8]) -> bool {
    let mut cur = RdbCursor::new(header);
    let mut r = ModuleFieldReader { cur: &mut cur, max_string: 0 };
    let fields = (0..3).try_for_each(|_| r.load_unsigned().map(drop));
    fields.is_ok() && cur.remaining() == 0
}

impl crate::Frozen for sift::compat::redisbloom::FrozenCms {
    fn chunk_count(&self) -> u64 {
        1 + self.cells_len().div_ceil(MAX_CHUNK) as u64
    }

    /// The chunks of the sketch's dump at the freeze: the header, then the counters.
    fn dump_chunk(&self, cursor: u64, out: &mut Vec<u8>) -> Option<(i64, u64)> {
        if cursor == 0 {
            out.extend_from_slice(self.header());
            return Some((0, 1));
        }
        let (piece, next) = piece_chunk(self.cells_len(), cursor)?;
        self.read_cells(piece.start, piece.len(), out);
        Some((i64::try_from(next).ok()?, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frozen large sketch gives the chunks a snapshot of the live sketch stores at the
    /// freeze, byte for byte (the header, then three pieces of counters), though increments
    /// change the sketch before they are read; a small sketch is dumped at once.
    #[test]
    fn a_frozen_sketch_gives_the_snapshot_chunks_of_the_freeze() {
        let mut c = forty_mb();
        let live = chunks_of(&c);
        assert_eq!(live.len(), 4);
        let Some(frozen) = crate::Data::freeze(&c) else {
            if cfg!(target_os = "linux") {
                panic!("a large sketch is frozen on Linux");
            }
            return;
        };
        for i in 0..100_000u32 {
            c.incr_by(&i.to_be_bytes(), 1);
        }
        assert_ne!(chunks_of(&c), live);
        assert_eq!(frozen.chunk_count(), 4);
        let got = crate::registry::frozen_chunks(&*frozen);
        assert!(got == live, "the frozen chunks are the live chunks at the freeze");
        assert!(crate::Data::freeze(&CountMinSketch::init_by_dim(100, 5, u64::MAX).unwrap()).is_none());
    }

    /// The dump chunks of `c`, owned.
    fn chunks_of(c: &CountMinSketch) -> Vec<(i64, Vec<u8>)> {
        (c as &dyn crate::Data).chunks().map(|c| (c.pos, c.data.into_owned())).collect()
    }

    /// A sketch of 2 rows of 5 M counters (40 MB: three pieces of counters) with some counts.
    fn forty_mb() -> CountMinSketch {
        let mut c = CountMinSketch::init_by_dim(5_000_000, 2, u64::MAX).unwrap();
        for i in 0..1000u32 {
            c.incr_by(&i.to_le_bytes(), u64::from(i % 7) + 1);
        }
        c
    }

    fn load(chunks: &[(i64, Vec<u8>)], cx: &LoadContext) -> Result<CountMinSketch, String> {
        crate::registry::load_as(chunks, cx)
    }

    /// A 40 MB sketch dumps as a small header and its counters in pieces of at most
    /// `MAX_CHUNK` bytes, and loads back equal from them. Its RDB fields are still RedisBloom's
    /// (the header's three fields, then the counters as one string).
    #[test]
    fn a_large_sketch_dumps_in_pieces_and_loads_back() {
        let c = forty_mb();
        let chunks = chunks_of(&c);
        assert_eq!(chunks.len(), 1 + 40_000_000usize.div_ceil(MAX_CHUNK));
        let header = crate::sketch::fields(&c, |c, w| rdb::save_cms_header(c, w));
        assert_eq!(chunks[0], (0, header.clone()));
        assert!(header.len() < 32, "{} header bytes", header.len());
        let mut at = 0usize;
        for (pos, data) in &chunks[1..] {
            assert!(!data.is_empty() && data.len() <= MAX_CHUNK, "{} bytes", data.len());
            assert_eq!(&c.cells_le()[at..at + data.len()], &data[..]);
            at += data.len();
            assert_eq!(*pos, at as i64 + 1, "the position after the piece");
        }
        assert_eq!(at, c.cells_le().len());
        assert_eq!(load(&chunks, &LoadContext::default()), Ok(c.clone()));
        let fields = crate::sketch::fields(&c, |c, w| rdb::save_cms(c, w));
        assert!(fields.starts_with(&header), "the RDB fields begin with the header");
        // The header alone is checked as the RDB fields are: within the load limits.
        let mut tight = LoadContext::default();
        tight.limits.max_bytes = 40_000_000 - 1;
        assert!(load(&chunks[..1], &tight).is_err());
    }

    /// A snapshot written when a sketch's dump was one chunk (all its RDB fields) still loads.
    #[test]
    fn a_one_chunk_dump_of_earlier_snapshots_loads() {
        let c = forty_mb();
        let old = vec![(0, crate::sketch::fields(&c, |c, w| rdb::save_cms(c, w)))];
        assert_eq!(load(&old, &LoadContext::default()), Ok(c.clone()));
        let small = {
            let mut s = CountMinSketch::init_by_dim(7, 3, u64::MAX).unwrap();
            s.incr_by(b"x", 3);
            s
        };
        // Width 7, depth 3, count 3, then a string of the 84 counter bytes (its length in the
        // 14-bit form): `save_cms`, RedisBloom's fields.
        let mut fixed = vec![2u8, 7, 2, 3, 2, 3, 5, 0x40, 84];
        fixed.extend_from_slice(small.cells_le());
        assert_eq!(fixed, crate::sketch::fields(&small, |c, w| rdb::save_cms(c, w)));
        assert_eq!(load(&[(0, fixed)], &LoadContext::default()), Ok(small));
    }

    /// A dump whose later pieces are missing is a load error naming what is missing, not a
    /// sketch whose last counters are silently 0; pieces out of order are refused too.
    #[test]
    fn missing_or_reordered_pieces_are_refused() {
        let c = forty_mb();
        let chunks = chunks_of(&c);
        crate::registry::assert_incomplete_dumps_refused::<CountMinSketch>(
            &chunks,
            "bytes of counters are missing",
        );
        assert_eq!(load(&chunks, &LoadContext::default()), Ok(c));
    }

    /// A piece outside the counters is refused, naming it, and a truncated header too.
    #[test]
    fn pieces_outside_the_counters_are_refused() {
        let c = CountMinSketch::init_by_dim(10, 2, u64::MAX).unwrap();
        let header = chunks_of(&c).remove(0).1;
        let bad: [(i64, &[u8]); 4] = [(0, b"ab"), (1, b"ab"), (82, b"ab"), (i64::MIN, b"")];
        for (pos, data) in bad {
            let chunks = vec![(0, header.clone()), (pos, data.to_vec())];
            assert!(load(&chunks, &LoadContext::default()).is_err(), "{pos} {data:?}");
        }
        let good = vec![(0, header.clone()), (81, vec![9; 80])];
        assert_eq!(load(&good, &LoadContext::default()).unwrap().cell(1, 9), 0x0909_0909);
        assert!(load(&[(0, header[..header.len() - 1].to_vec())], &LoadContext::default()).is_err());
    }
}
