//! RedisBloom's t-digest commands (`TDIGEST.*`, sketches spec §7 and §8), on
//! [`sift::compat::redisbloom::TDigest`], and its data type `TDIS-TYPE`.
//!
//! # Queries change the digest
//!
//! QUANTILE, CDF, RANK, REVRANK, BYRANK, BYREVRANK and TRIMMED_MEAN compress the digest's
//! buffered values first (spec §7.4), and when that happens later answers depend on it. They are
//! registered `readonly` as in RedisBloom, but a call that compressed is propagated (logged,
//! replicated) like a write ([`Flags::PROPAGATES`]), so a replica and sift-server's log replay
//! compress at the same moments as the primary. A call on a digest with nothing buffered changes
//! nothing and is not propagated (it answers from a copy, which the library's `&mut` queries
//! need).

use std::borrow::Cow;
use std::ops::Range;

use sift::compat::redisbloom::rdb::{self, FieldReader, ModuleFieldReader, RdbCursor};
use sift::compat::redisbloom::{
    tdigest_merge_compression, FrozenTDigest, TDigest, TDigestMerge, MAX_CHUNK, TDIGEST_DEFAULT_COMPRESSION,
    TDIGEST_NODE_BYTES,
};

use crate::sketch::{double, int};
use crate::{
    err, wrongtype, Chunk, Command, Env, Family, Flags, Frame, KeyFlags, KeySpec, LoadContext, Lookup, Store,
};

/// A missing key.
pub const KEY_MISSING: &str = "ERR T-Digest: key does not exist";
/// TDIGEST.CREATE on an existing digest.
pub const KEY_EXISTS: &str = "ERR T-Digest: key already exists";
/// TDIGEST.CREATE / MERGE: no COMPRESSION (or OVERRIDE) where one is expected.
pub const WRONG_KEYWORD: &str = "ERR T-Digest: wrong keyword";
/// A compression that is not an integer.
pub const PARSE_COMPRESSION: &str = "ERR T-Digest: error parsing compression parameter";
/// A compression ≤ 0.
pub const COMPRESSION_POSITIVE: &str = "ERR T-Digest: compression parameter needs to be a positive integer";
/// TDIGEST.CREATE: the node arrays cannot be allocated.
pub const ALLOCATION_FAILED: &str = "ERR T-Digest: allocation failed";
/// TDIGEST.MERGE: the result's node arrays cannot be allocated.
pub const DEST_ALLOCATION_FAILED: &str = "ERR T-Digest: allocation of destination digest failed";
/// An add that does not fit.
pub const OVERFLOW: &str = "ERR T-Digest: overflow detected";

fn parse_compression(arg: &[u8]) -> Result<f64, Frame> {
    match int(arg) {
        None => Err(Frame::error(PARSE_COMPRESSION)),
        Some(c) if c <= 0 => Err(Frame::error(COMPRESSION_POSITIVE)),
        Some(c) => Ok(c as f64),
    }
}

/// `TDIGEST.CREATE key [COMPRESSION compression]`.
pub fn create(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() != 2 && argv.len() != 4 {
        return Frame::error(err::arity("tdigest.create"));
    }
    match store.get::<TDigest>(argv[1]) {
        Lookup::Found(_) => return Frame::error(KEY_EXISTS),
        Lookup::WrongType => return wrongtype(),
        Lookup::Missing => {}
    }
    let mut compression = TDIGEST_DEFAULT_COMPRESSION;
    if argv.len() == 4 {
        // RedisBloom looks for the keyword in both places and always parses the last argument.
        if !argv[2..].iter().any(|a| a.eq_ignore_ascii_case(b"COMPRESSION")) {
            return Frame::error(WRONG_KEYWORD);
        }
        match parse_compression(argv[3]) {
            Ok(c) => compression = c,
            Err(f) => return f,
        }
    }
    match TDigest::new(compression, env.memory_budget()) {
        Ok(t) => {
            store.insert(argv[1], t);
            Frame::ok()
        }
        Err(_) => Frame::error(ALLOCATION_FAILED),
    }
}

/// The digest at `key` for reading.
fn digest_at<'s>(store: &'s mut dyn Store, key: &[u8]) -> Result<&'s TDigest, Frame> {
    match store.get::<TDigest>(key) {
        Lookup::Found(t) => Ok(t),
        Lookup::Missing => Err(Frame::error(KEY_MISSING)),
        Lookup::WrongType => Err(wrongtype()),
    }
}

/// The digest at `key` for writing (checked for reading first: a miss is no change).
fn digest_mut<'s>(store: &'s mut dyn Store, key: &[u8]) -> Result<&'s mut TDigest, Frame> {
    digest_at(store, key)?;
    Ok(store.get_mut::<TDigest>(key).found().expect("checked above under the same lock"))
}

/// `TDIGEST.RESET key`.
pub fn reset(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match digest_mut(store, argv[1]) {
        Ok(t) => {
            t.reset();
            Frame::ok()
        }
        Err(f) => f,
    }
}

/// `TDIGEST.ADD key value [value ...]`: every value is checked before any is added.
pub fn add(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if let Err(f) = digest_at(store, argv[1]) {
        return f;
    }
    let mut values = Vec::with_capacity(argv.len() - 2);
    for a in &argv[2..] {
        match double(a) {
            None => return Frame::error("ERR T-Digest: error parsing val parameter"),
            Some(v) if !v.is_finite() => {
                return Frame::error("ERR T-Digest: val parameter needs to be a finite number")
            }
            Some(v) => values.push(v),
        }
    }
    let t = store.get_mut::<TDigest>(argv[1]).found().expect("checked above under the same lock");
    for v in values {
        if t.add(v).is_err() {
            return Frame::error(OVERFLOW);
        }
    }
    Frame::ok()
}

/// Runs `query` on the digest at `key` after its arguments were checked: on the digest itself
/// when the query compresses buffered values (a change, propagated), else on a copy.
fn on_digest(store: &mut dyn Store, key: &[u8], query: impl FnOnce(&mut TDigest) -> Frame) -> Frame {
    let buffered = match digest_at(store, key) {
        Ok(t) => t.unmerged_nodes() > 0,
        Err(f) => return f,
    };
    if buffered {
        query(store.get_mut::<TDigest>(key).found().expect("checked above under the same lock"))
    } else {
        let mut copy = digest_at(store, key).expect("checked above").clone();
        query(&mut copy)
    }
}

fn doubles(v: Vec<f64>) -> Frame {
    Frame::Array(v.into_iter().map(Frame::Double).collect())
}

/// Parses every argument from `argv[2]` with `parse`, the first failure deciding the reply.
fn each<T>(argv: &[&[u8]], parse: impl Fn(&[u8]) -> Result<T, &'static str>) -> Result<Vec<T>, Frame> {
    argv[2..].iter().map(|a| parse(a).map_err(Frame::error)).collect()
}

/// The lookup comes before the arguments (spec §8).
fn query_with<T>(
    store: &mut dyn Store,
    argv: &[&[u8]],
    parse: impl Fn(&[u8]) -> Result<T, &'static str>,
    answer: impl FnOnce(&mut TDigest, Vec<T>) -> Frame,
) -> Frame {
    if let Err(f) = digest_at(store, argv[1]) {
        return f;
    }
    match each(argv, parse) {
        Ok(args) => on_digest(store, argv[1], |t| answer(t, args)),
        Err(f) => f,
    }
}

/// `TDIGEST.QUANTILE key quantile [quantile ...]`.
pub fn quantile(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let parse = |a: &[u8]| match double(a) {
        None => Err("ERR T-Digest: error parsing quantile"),
        Some(q) if !(0.0..=1.0).contains(&q) => Err("ERR T-Digest: quantile should be in [0,1]"),
        Some(q) => Ok(q),
    };
    query_with(store, argv, parse, |t, qs| doubles(t.quantiles(&qs)))
}

/// `TDIGEST.CDF key value [value ...]`.
pub fn cdf(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let parse = |a: &[u8]| double(a).ok_or("ERR T-Digest: error parsing cdf");
    query_with(store, argv, parse, |t, xs| doubles(xs.into_iter().map(|x| t.cdf(x)).collect()))
}

fn value(a: &[u8]) -> Result<f64, &'static str> {
    double(a).ok_or("ERR T-Digest: error parsing value")
}

/// `TDIGEST.RANK key value [value ...]`.
pub fn rank(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    query_with(store, argv, value, |t, xs| {
        Frame::Array(xs.into_iter().map(|x| Frame::Integer(t.rank(x))).collect())
    })
}

/// `TDIGEST.REVRANK key value [value ...]`.
pub fn revrank(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    query_with(store, argv, value, |t, xs| {
        Frame::Array(xs.into_iter().map(|x| Frame::Integer(t.rev_rank(x))).collect())
    })
}

fn rank_arg(a: &[u8]) -> Result<i64, &'static str> {
    match int(a) {
        None => Err("ERR T-Digest: error parsing rank"),
        Some(r) if r < 0 => Err("ERR T-Digest: rank needs to be non negative"),
        Some(r) => Ok(r),
    }
}

/// `TDIGEST.BYRANK key rank [rank ...]`.
pub fn byrank(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    query_with(store, argv, rank_arg, |t, rs| doubles(rs.into_iter().map(|r| t.by_rank(r)).collect()))
}

/// `TDIGEST.BYREVRANK key reverse_rank [reverse_rank ...]`.
pub fn byrevrank(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    query_with(store, argv, rank_arg, |t, rs| doubles(rs.into_iter().map(|r| t.by_rev_rank(r)).collect()))
}

/// `TDIGEST.TRIMMED_MEAN key low_cut_quantile high_cut_quantile`.
pub fn trimmed_mean(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if let Err(f) = digest_at(store, argv[1]) {
        return f;
    }
    let Some(lo) = double(argv[2]) else {
        return Frame::error("ERR T-Digest: error parsing low_cut_percentile");
    };
    let Some(hi) = double(argv[3]) else {
        return Frame::error("ERR T-Digest: error parsing high_cut_percentile");
    };
    if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) {
        return Frame::error("ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]");
    }
    if lo >= hi {
        return Frame::error("ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile");
    }
    on_digest(store, argv[1], |t| Frame::Double(t.trimmed_mean(lo, hi)))
}

/// `TDIGEST.MIN key`.
pub fn min(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    digest_at(store, argv[1]).map_or_else(|f| f, |t| Frame::Double(t.min_value()))
}

/// `TDIGEST.MAX key`.
pub fn max(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    digest_at(store, argv[1]).map_or_else(|f| f, |t| Frame::Double(t.max_value()))
}

/// `TDIGEST.INFO key` (current RedisBloom's `Memory usage`, `80 + 16·capacity`).
pub fn info(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let t = match digest_at(store, argv[1]) {
        Ok(t) => t,
        Err(f) => return f,
    };
    let i = t.info();
    let field = |name: &str, v: i64| (Frame::Simple(name.into()), Frame::Integer(v));
    Frame::Map(vec![
        field("Compression", i.compression),
        field("Capacity", i.capacity),
        field("Merged nodes", i.merged_nodes),
        field("Unmerged nodes", i.unmerged_nodes),
        field("Merged weight", i.merged_weight),
        field("Unmerged weight", i.unmerged_weight),
        field("Observations", i.observations),
        field("Total compressions", i.total_compressions),
        field("Memory usage", i.memory_usage),
    ])
}

/// `TDIGEST.MERGE destination-key numkeys source-key [source-key ...] [COMPRESSION compression]
/// [OVERRIDE]` (spec §7.6, §8). The result is built apart and stored only on success; the
/// sources are compressed in place as they are absorbed, as in RedisBloom.
pub fn merge(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let dest = argv[1];
    let dest_old = match store.get::<TDigest>(dest) {
        Lookup::Found(t) => Some(t.compression()),
        Lookup::WrongType => return wrongtype(),
        Lookup::Missing => None,
    };
    let n = match int(argv[2]) {
        None => return Frame::error("ERR T-Digest: error parsing numkeys"),
        Some(n) if n <= 0 => return Frame::error("ERR T-Digest: numkeys needs to be a positive integer"),
        Some(n) if n as u64 > (argv.len() - 3) as u64 => return Frame::error(err::arity("tdigest.merge")),
        Some(n) => n as usize,
    };
    let sources = &argv[3..3 + n];
    let after = &argv[3 + n..];
    let mut explicit = None;
    let mut override_dest = false;
    if !after.is_empty() {
        override_dest = after.iter().any(|a| a.eq_ignore_ascii_case(b"OVERRIDE"));
        match after.iter().position(|a| a.eq_ignore_ascii_case(b"COMPRESSION")) {
            Some(i) if i + 1 == after.len() => return Frame::error(err::arity("tdigest.merge")),
            Some(i) => match parse_compression(after[i + 1]) {
                Ok(c) => explicit = Some(c),
                Err(f) => return f,
            },
            None if !override_dest => return Frame::error(WRONG_KEYWORD),
            None => {}
        }
    }
    let mut compressions = Vec::with_capacity(n);
    for s in sources {
        match digest_at(store, s) {
            Ok(t) => compressions.push(t.compression()),
            Err(f) => return f,
        }
    }
    let compression = tdigest_merge_compression(explicit, override_dest, dest_old, &compressions);
    let Ok(mut result) = TDigestMerge::new(compression, env.memory_budget()) else {
        return Frame::error(DEST_ALLOCATION_FAILED);
    };
    let absorbed = dest_old.is_some() && !override_dest;
    for key in std::iter::once(&dest).filter(|_| absorbed).chain(sources) {
        let source = store.get_mut::<TDigest>(key).found().expect("checked above under the same lock");
        if result.absorb(source).is_err() {
            return Frame::error(OVERFLOW);
        }
    }
    let merged = result.finish();
    match store.get_mut::<TDigest>(dest).found() {
        // Assigned in place, so the destination keeps its time to live.
        Some(d) => *d = merged,
        None => {
            store.insert(dest, merged);
        }
    }
    Frame::ok()
}

/// The `tdigest` family: RedisBloom's t-digest (`TDIS-TYPE`) and its commands.
#[derive(Debug)]
pub struct TDigestFamily;

const WRITE: Flags = Flags::WRITE.with(Flags::DENYOOM);
/// Read-only and fast, but compresses: propagated when it did (see the module docs).
const COMPRESSES: Flags = Flags::READONLY.with(Flags::FAST).with(Flags::PROPAGATES);
const READ_FAST: Flags = Flags::READONLY.with(Flags::FAST);
const WRITE_FAST_ACL: &[&str] = &["@write", "@fast", "@tdigest"];
const WRITE_ACL: &[&str] = &["@write", "@tdigest"];
const READ_FAST_ACL: &[&str] = &["@read", "@fast", "@tdigest"];

use crate::command::key1 as command;

impl Family for TDigestFamily {
    const NAME: &'static str = "tdigest";
    type Type = TDigest;
    /// Arities of spec §2.4, flags and ACL categories of §2.6.
    #[rustfmt::skip]
    const COMMANDS: &'static [Command] = &[
        command("tdigest.create", -2, WRITE, WRITE_FAST_ACL, create, "Allocates memory and initializes a new t-digest sketch"),
        command("tdigest.reset", 2, WRITE, WRITE_FAST_ACL, reset, "Resets a t-digest sketch: empty the sketch and re-initializes it."),
        command("tdigest.add", -3, WRITE, WRITE_ACL, add, "Adds one or more observations to a t-digest sketch"),
        Command {
            name: "tdigest.merge",
            arity: -4,
            flags: WRITE,
            acl: WRITE_ACL,
            keys: &[KeySpec::range(1, 1, 1), KeySpec::keynum(2).with_flags(KeyFlags::RO.with(KeyFlags::ACCESS))],
            summary: "Merges multiple t-digest sketches into a single sketch",
            handler: merge,
        },
        command("tdigest.min", 2, READ_FAST, READ_FAST_ACL, min, "Returns the minimum observation value from a t-digest sketch"),
        command("tdigest.max", 2, READ_FAST, READ_FAST_ACL, max, "Returns the maximum observation value from a t-digest sketch"),
        command("tdigest.quantile", -3, COMPRESSES, READ_FAST_ACL, quantile, "Returns, for each input fraction, an estimation of the value (floating point) that is smaller than the given fraction of observations"),
        command("tdigest.cdf", -3, COMPRESSES, READ_FAST_ACL, cdf, "Returns, for each input value, an estimation of the fraction (floating-point) of (observations smaller than the given value + half the observations equal to the given value)"),
        command("tdigest.trimmed_mean", 4, Flags::READONLY.with(Flags::PROPAGATES), &["@read", "@tdigest"], trimmed_mean, "Returns an estimation of the mean value from the sketch, excluding observation values outside the low and high cutoff quantiles"),
        command("tdigest.rank", -3, COMPRESSES, READ_FAST_ACL, rank, "Returns, for each input value (floating-point), the estimated rank of the value (the number of observations in the sketch that are smaller than the value + half the number of observations that are equal to the value)"),
        command("tdigest.revrank", -3, COMPRESSES, READ_FAST_ACL, revrank, "Returns, for each input value (floating-point), the estimated reverse rank of the value (the number of observations in the sketch that are larger than the value + half the number of observations that are equal to the value)"),
        command("tdigest.byrank", -3, COMPRESSES, READ_FAST_ACL, byrank, "Returns, for each input rank, an estimation of the value (floating-point) with that rank"),
        command("tdigest.byrevrank", -3, COMPRESSES, READ_FAST_ACL, byrevrank, "Returns, for each input reverse rank, an estimation of the value (floating-point) with that reverse rank"),
        command("tdigest.info", 2, READ_FAST, READ_FAST_ACL, info, "Returns information and statistics about a t-digest sketch"),
    ];
}

// `TDIS-TYPE`: RedisBloom's type name and RDB encoding (encver 0 written, any read, spec §10.5),
// memory callback `80 + 16·capacity` (§10.7); in snapshots, tag 7 and the chunks of
// `node_chunk`. Saving compresses the live digest first (RedisBloom compresses before saving,
// spec §7.4 and §10.5: `before_save`), so the digest after a restart is the one that kept
// running, and a digest holding one buffered observation comes back as RedisBloom's does: one
// zeroed node.
crate::sketch::sketch_data_type!(
    chunks: TDigest,
    rdb::TDIGEST_TYPE_NAME,
    7,
    rdb::save_tdigest,
    rdb::load_tdigest,
    {
        /// The header (`save_tdigest_chunked_header`: the nine fields before the centroids),
        /// then the centroids in pieces of at most [`MAX_CHUNK`] bytes (the piece's means, then
        /// its weights), each with the position after its last node plus 1: a snapshot never
        /// builds a buffer of the whole digest, nor a recovery reads one beside the digest it
        /// fills. A digest with buffered nodes (saves compress it first, so only a lone
        /// observation, or a dump not made by a save) is one chunk, its RDB fields, which
        /// compress a copy.
        fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)> {
            if self.unmerged_nodes() > 0 {
                return crate::sketch::dump_chunk(self, cursor, |t, w| rdb::save_tdigest(t, w));
            }
            if cursor == 0 {
                let header = crate::sketch::fields(self, |t, w| rdb::save_tdigest_chunked_header(t, w));
                return Some((Chunk { pos: 0, data: Cow::Owned(header) }, 1));
            }
            let (nodes, next) = node_chunk(self.merged_nodes(), cursor)?;
            let mut data = Vec::new();
            self.node_bytes(nodes, &mut data);
            Some((Chunk { pos: i64::try_from(next).ok()?, data: Cow::Owned(data) }, next))
        }

        /// The header of the chunked dump, whose centroids `load_chunk` fills in; or, from
        /// snapshots written when a digest's dump was one chunk (and digests with buffered
        /// nodes), all its RDB fields.
        fn restore(header: &[u8], cx: &LoadContext) -> Result<Self, String> {
            if is_chunked_header(header) {
                crate::sketch::restore(header, cx, Self::ENCVER, |r, e, l| rdb::load_tdigest_chunked_header(r, e, l))
            } else {
                crate::sketch::restore(header, cx, Self::ENCVER, |r, e, l| rdb::load_tdigest(r, e, l))
            }
        }

        fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String> {
            let nodes = (data.len() / TDIGEST_NODE_BYTES) as u64;
            let at = u64::try_from(pos)
                .ok()
                .and_then(|p| p.checked_sub(1))
                .and_then(|end| end.checked_sub(nodes))
                .and_then(|at| usize::try_from(at).ok());
            let Some(at) = at else {
                return Err(format!("a chunk of {} bytes cannot end at {pos}", data.len()));
            };
            self.load_nodes(at, data).map_err(|e| e.to_string())
        }
    },
    {
        fn changes_before_save(&self) -> bool {
            // Compressing a lone buffered observation of weight 1 leaves it as it is (§7.3).
            let nodes = self.merged_nodes() + self.unmerged_nodes();
            let weight = self.merged_weight() as f64 + self.unmerged_weight() as f64;
            self.unmerged_nodes() > 0 && (nodes > 1 || weight > 1.0)
        }

        fn before_save(&mut self) -> bool {
            let changes = crate::DataType::changes_before_save(self);
            if changes {
                self.compress();
            }
            changes
        }

        /// A large digest's node arrays are read by the snapshot later, its writers copying
        /// aside only the pieces they change first ([`TDigest::freeze`]); a small one is dumped
        /// at once.
        fn freeze(&self) -> Option<Box<dyn crate::Frozen>> {
            TDigest::freeze(self).map(|f| Box::new(f) as Box<dyn crate::Frozen>)
        }

        /// A chunked load that ended before the last piece of centroids is refused: the digest
        /// would otherwise hold zeroed centroids in their place.
        fn finish_load(&mut self) -> Result<(), String> {
            match self.load_missing() {
                0 => Ok(()),
                n => Err(format!("the last {n} of {} centroids are missing", self.merged_nodes())),
            }
        }
    }
);

/// Nodes of one piece: [`MAX_CHUNK`] bytes.
const PIECE_NODES: usize = MAX_CHUNK / TDIGEST_NODE_BYTES;

/// The centroids of the dump chunk at `cursor` ≥ 1 (node `cursor - 1` on, at most
/// [`PIECE_NODES`]) and the cursor after it, which is also the chunk's `pos`; `None` past the
/// last.
fn node_chunk(merged: usize, cursor: u64) -> Option<(Range<usize>, u64)> {
    let at = usize::try_from(cursor.checked_sub(1)?).ok()?;
    if at >= merged {
        return None;
    }
    let end = merged.min(at + PIECE_NODES);
    Some((at..end, cursor + (end - at) as u64))
}

/// Is `header` the chunked dump's header, exactly the nine fields before the centroids? The
/// one-chunk dump has the centroids' fields after them (none when there are no centroids: then
/// the two forms are the same bytes and load the same digest).
fn is_chunked_header(header: &[u8]) -> bool {
    let mut cur = RdbCursor::new(header);
    let mut r = ModuleFieldReader { cur: &mut cur, max_string: 0 };
    let doubles = |r: &mut ModuleFieldReader<'_, '_>, n| (0..n).try_for_each(|_| r.load_double().map(drop));
    let fields = doubles(&mut r, 3)
        .and_then(|()| (0..4).try_for_each(|_| r.load_unsigned().map(drop)))
        .and_then(|()| doubles(&mut r, 2));
    fields.is_ok() && cur.remaining() == 0
}

impl crate::Frozen for FrozenTDigest {
    fn chunk_count(&self) -> u64 {
        1 + self.merged_nodes().div_ceil(PIECE_NODES) as u64
    }

    /// The chunks of the digest's dump at the freeze: the header, then the centroids.
    fn dump_chunk(&self, cursor: u64, out: &mut Vec<u8>) -> Option<(i64, u64)> {
        if cursor == 0 {
            out.extend_from_slice(self.header());
            return Some((0, 1));
        }
        let (nodes, next) = node_chunk(self.merged_nodes(), cursor)?;
        self.node_bytes(nodes, out);
        Some((i64::try_from(next).ok()?, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{frozen_chunks, live_chunks};

    /// A digest of compression 250 000 (1.5 M nodes, 12 MB per array) holding 1.2 M centroids
    /// of weight 1 (two pieces), as a chunked load builds it from a header and pieces made here.
    fn big() -> TDigest {
        use sift::compat::redisbloom::rdb::FieldWriter;
        let n = 1_200_000u64;
        let mut header = Vec::new();
        let mut w = rdb::ModuleFieldWriter { out: &mut header };
        for d in [250_000.0, 0.0, (n - 1) as f64] {
            w.save_double(d);
        }
        for v in [1_500_010, n, 0, 1] {
            w.save_unsigned(v);
        }
        w.save_double(n as f64);
        w.save_double(0.0);
        let mut t = <TDigest as crate::DataType>::restore(&header, &LoadContext::default()).unwrap();
        let mut at = 0;
        while at < n {
            let end = n.min(at + PIECE_NODES as u64);
            let mut piece: Vec<u8> = (at..end).flat_map(|i| (i as f64).to_le_bytes()).collect();
            piece.extend((at..end).flat_map(|_| 1i64.to_le_bytes()));
            crate::DataType::load_chunk(&mut t, end as i64 + 1, &piece).unwrap();
            at = end;
        }
        crate::DataType::finish_load(&mut t).unwrap();
        assert_eq!((t.merged_nodes(), t.size()), (n as usize, n as i64));
        t
    }

    fn load(chunks: &[(i64, Vec<u8>)], cx: &LoadContext) -> Result<TDigest, String> {
        crate::registry::load_as(chunks, cx)
    }

    fn rdb_fields(t: &TDigest) -> Vec<u8> {
        crate::sketch::fields(t, |t, w| rdb::save_tdigest(t, w))
    }

    /// A large digest dumps as its nine header fields and its centroids in pieces of at most
    /// `MAX_CHUNK` bytes, loads back equal from them, and loads from its one-chunk dump of
    /// earlier snapshots (its RDB fields) too; a missing piece is a load error.
    #[test]
    fn a_large_digest_dumps_in_pieces_and_loads_back() {
        let t = big();
        let chunks = live_chunks(&t);
        assert_eq!(chunks.len(), 1 + t.merged_nodes().div_ceil(PIECE_NODES));
        assert!(chunks[0].1.len() < 100);
        assert!(rdb_fields(&t).starts_with(&chunks[0].1), "the RDB fields begin with the header");
        let mut at = 0;
        for (pos, data) in &chunks[1..] {
            assert!(!data.is_empty() && data.len() <= MAX_CHUNK && data.len() % TDIGEST_NODE_BYTES == 0);
            at += data.len() / TDIGEST_NODE_BYTES;
            assert_eq!(*pos, at as i64 + 1);
        }
        assert_eq!(at, t.merged_nodes());
        assert_eq!(load(&chunks, &LoadContext::default()), Ok(t.clone()));
        assert_eq!(load(&[(0, rdb_fields(&t))], &LoadContext::default()), Ok(t.clone()));
        crate::registry::assert_incomplete_dumps_refused::<TDigest>(&chunks, "centroids are missing");
        let mut tight = LoadContext::default();
        tight.limits.max_bytes = 16 * t.capacity() as u64 - 1;
        assert!(load(&chunks[..1], &tight).is_err(), "the header is checked within the load limits");
    }

    /// A digest with buffered nodes (a lone observation, which a compression keeps buffered)
    /// dumps as one chunk, its RDB fields, and is never frozen; so does an empty one.
    #[test]
    fn a_digest_with_buffered_nodes_is_one_chunk() {
        let mut t = TDigest::new(1_000_000.0, u64::MAX).unwrap();
        t.add(5.0).unwrap();
        assert!(!crate::DataType::before_save(&mut t));
        assert_eq!(live_chunks(&t), vec![(0, rdb_fields(&t))]);
        assert!(crate::Data::freeze(&t).is_none());
        let back = load(&live_chunks(&t), &LoadContext::default()).unwrap();
        assert_eq!((back.merged_nodes(), back.unmerged_nodes(), back.size()), (0, 1, 1));
        let empty = TDigest::new(100.0, u64::MAX).unwrap();
        assert_eq!(live_chunks(&empty), vec![(0, rdb_fields(&empty))]);
        assert_eq!(load(&live_chunks(&empty), &LoadContext::default()), Ok(empty));
    }

    /// A frozen large digest gives the chunks a snapshot of the live one stores at the freeze,
    /// byte for byte, though adds (and the compressions they cause) change it before they are
    /// read.
    #[test]
    fn a_frozen_digest_gives_the_snapshot_chunks_of_the_freeze() {
        let mut t = big();
        let live = live_chunks(&t);
        let Some(frozen) = crate::Data::freeze(&t) else {
            if cfg!(target_os = "linux") {
                panic!("a large digest is frozen on Linux");
            }
            return;
        };
        // Scrambled values: the compression's quicksort slows on long sorted runs.
        for i in 0..400_000u32 {
            t.add(f64::from(i.wrapping_mul(7919) % 400_009)).unwrap();
        }
        assert!(t.total_compressions() >= 2, "the buffer filled and was compressed");
        crate::DataType::before_save(&mut t);
        assert_ne!(live_chunks(&t), live);
        assert_eq!(frozen.chunk_count(), live.len() as u64);
        assert!(frozen_chunks(&*frozen) == live, "the frozen chunks are the live chunks at the freeze");
    }
}
