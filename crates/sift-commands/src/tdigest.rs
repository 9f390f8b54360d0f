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

use sift::compat::redisbloom::rdb;
use sift::compat::redisbloom::{
    tdigest_merge_compression, TDigest, TDigestMerge, TDIGEST_DEFAULT_COMPRESSION,
};

use crate::sketch::{double, int};
use crate::{err, wrongtype, Command, Env, Family, Flags, Frame, KeyFlags, KeySpec, Lookup, Store};

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
// memory callback `80 + 16·capacity` (§10.7); in snapshots, tag 7 and one chunk, the RDB fields.
// Saving compresses the live digest first (RedisBloom compresses before saving, spec §7.4 and
// §10.5: `before_save`), so the digest after a restart is the one that kept running, and a
// digest holding one buffered observation comes back as RedisBloom's does: one zeroed node.
crate::sketch::sketch_data_type!(
    TDigest,
    rdb::TDIGEST_TYPE_NAME,
    7,
    rdb::save_tdigest,
    rdb::load_tdigest,
    "t-digest",
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
    }
);
