//! A test-only interpreter of the `CMS.*`, `TOPK.*` and `TDIGEST.*` commands (spec
//! `redisbloom-sketches.md` §8) over the library's structures, with just enough of the generic
//! commands (SET, DEL, EXISTS, TYPE, RESTORE, DEBUG RELOAD) to replay the spec's transcript. It
//! exists to check the library's numbers and state against the recorded replies; the real
//! command layer (crates/sift-commands) replaces it. Replies are kept abstract ([`Reply`]) and
//! compared with the transcript's decoded JSON by [`matches`].

use std::collections::HashMap;

use base64::Engine as _;
use serde_json::Value;
use sift::compat::redisbloom::rdb::{read_rdb, restore_payload, write_rdb, RdbKey, RdbValue, ReadOptions};
use sift::compat::redisbloom::{
    format_double, tdigest_merge_compression, topk_reply_item, CRand, CmsCreateError, CmsMergeError,
    CmsSource, CountMinSketch, DoubleFormat, TDigest, TDigestMerge, TopK, TopKCreateError, CMS_COUNTER_MAX,
    TDIGEST_DEFAULT_COMPRESSION, TOPK_DEFAULT_DECAY, TOPK_DEFAULT_DEPTH, TOPK_DEFAULT_WIDTH,
};

/// A reply before it is encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Simple(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Double(f64),
    Bool(bool),
    Array(Vec<Reply>),
    /// RESP3 map; RESP2 flat array of simple-string names and values.
    Map(Vec<(String, Reply)>),
    Error(String),
}

fn ok() -> Reply {
    Reply::Simple("OK".into())
}
fn err(s: &str) -> Reply {
    Reply::Error(s.into())
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const TOPK_INCR_ERR: &str = "TopK: increment must be an integer greater or equal to 0                            and smaller or equal to 100,000";

/// Which server the replies are those of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// RedisBloom 2.6.28 on Redis 7.0.15: `%.17g` doubles, hex floats accepted, overflowing
    /// doubles refused, TDIGEST.INFO memory `8 + 16·cap`.
    Redis70,
    /// Current RedisBloom on current Redis (`differs_in_current`).
    Current,
}

impl Target {
    pub fn doubles(self) -> DoubleFormat {
        match self {
            Target::Redis70 => DoubleFormat::Printf17g,
            Target::Current => DoubleFormat::D2String,
        }
    }
}

/// Redis's strict integer parser (`string2ll`).
pub fn parse_int(s: &[u8]) -> Option<i64> {
    let t = std::str::from_utf8(s).ok()?;
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') || t == "-0" {
        return None;
    }
    t.parse().ok()
}

/// A C99 hexadecimal float (`0x1p-3`, `0x10`), as `strtod` reads it.
fn parse_hex_float(t: &str) -> Option<f64> {
    let (neg, rest) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let rest = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X"))?;
    let (mant, exp) = match rest.find(['p', 'P']) {
        Some(i) => (&rest[..i], rest[i + 1..].parse::<i32>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += c.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    let v = v * 2f64.powi(exp);
    Some(if neg { -v } else { v })
}

impl Target {
    /// Redis's double argument parser: the whole string, no leading space, NaN refused;
    /// Redis 7.0 reads hex floats and refuses overflow and underflow, current Redis refuses hex
    /// and turns them into ±inf / 0 (`redisbloom.md` §2.4).
    pub fn parse_double(self, s: &[u8]) -> Option<f64> {
        let t = std::str::from_utf8(s).ok()?;
        if t.is_empty() || t.starts_with(|c: char| c.is_ascii_whitespace()) {
            return None;
        }
        let lower = t.to_ascii_lowercase();
        let hex = lower.trim_start_matches(['-', '+']).starts_with("0x");
        let v = if hex {
            match self {
                Target::Redis70 => parse_hex_float(t)?,
                Target::Current => return None,
            }
        } else {
            t.parse::<f64>().ok()?
        };
        if v.is_nan() {
            return None;
        }
        if self == Target::Redis70 && !hex {
            let word = lower.trim_start_matches(['-', '+']);
            let literal_inf = word == "inf" || word == "infinity";
            let mantissa = lower.split('e').next().unwrap_or("");
            if (v.is_infinite() && !literal_inf)
                || (v == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b)))
            {
                return None; // strtod's ERANGE
            }
        }
        Some(v)
    }
}

/// The commands' registered arity (spec §2.4).
fn arity(name: &str) -> Option<i64> {
    Some(match name {
        "cms.initbydim" | "cms.initbyprob" => 4,
        "cms.incrby" => -4,
        "cms.query" => -3,
        "cms.merge" => -4,
        "cms.info" | "topk.info" => 2,
        "topk.reserve" | "topk.add" | "topk.query" | "topk.count" => -3,
        "topk.incrby" => -4,
        "topk.list" | "tdigest.create" => -2,
        "tdigest.reset" | "tdigest.min" | "tdigest.max" | "tdigest.info" => 2,
        "tdigest.add" | "tdigest.quantile" | "tdigest.cdf" | "tdigest.rank" | "tdigest.revrank"
        | "tdigest.byrank" | "tdigest.byrevrank" => -3,
        "tdigest.merge" => -4,
        "tdigest.trimmed_mean" => 4,
        _ => return None,
    })
}

fn arity_error(name: &str) -> Reply {
    Reply::Error(format!("ERR wrong number of arguments for '{name}' command"))
}

fn cms_create_reply(e: CmsCreateError) -> Reply {
    err(match e {
        CmsCreateError::InvalidWidth => "CMS: invalid width",
        CmsCreateError::InvalidDepth => "CMS: invalid depth",
        CmsCreateError::InvalidOverestimation => "CMS: invalid overestimation value",
        CmsCreateError::InvalidProbability => "CMS: invalid prob value",
        CmsCreateError::InvalidDimensions => "CMS: invalid init arguments",
        _ => "CMS: Insufficient memory to create the key",
    })
}

fn topk_create_reply(e: TopKCreateError) -> Reply {
    err(match e {
        TopKCreateError::InvalidK => "TopK: invalid k",
        TopKCreateError::InvalidWidth => "TopK: invalid width",
        TopKCreateError::InvalidDepth => "TopK: invalid depth",
        TopKCreateError::InvalidDecay => "TopK: invalid decay value. must be '<= 1' & '> 0'",
        _ => "ERR Insufficient memory to create topk data structure",
    })
}

/// The memory budget the interpreter gives each new structure.
const BUDGET: u64 = 1 << 30;

/// The keyspace (one database) and the Top-K random source.
pub struct Server {
    pub target: Target,
    pub db: HashMap<Vec<u8>, RdbValue>,
    pub rng: CRand,
}

enum Lookup<'a, T> {
    Missing,
    Other,
    Found(&'a mut T),
}

macro_rules! getter {
    ($name:ident, $variant:ident, $ty:ty) => {
        fn $name(&mut self, key: &[u8]) -> Lookup<'_, $ty> {
            match self.db.get_mut(key) {
                None => Lookup::Missing,
                Some(RdbValue::$variant(v)) => Lookup::Found(v),
                Some(_) => Lookup::Other,
            }
        }
    };
}

impl Server {
    pub fn new(target: Target) -> Self {
        Server { target, db: HashMap::new(), rng: CRand::default() }
    }

    getter!(cms, Cms, CountMinSketch);
    getter!(topk, TopK, TopK);
    getter!(tdigest, TDigest, TDigest);

    fn double(&self, s: &[u8]) -> Option<f64> {
        self.target.parse_double(s)
    }

    pub fn call(&mut self, argv: &[Vec<u8>]) -> Reply {
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
        if let Some(a) = arity(&name) {
            let n = argv.len() as i64;
            if (a > 0 && n != a) || (a < 0 && n < -a) {
                return arity_error(&name);
            }
            let extra_ok = match name.as_str() {
                "cms.incrby" | "topk.incrby" => n % 2 == 0,
                "topk.reserve" => n == 3 || n == 6,
                "topk.list" => n == 2 || n == 3,
                "tdigest.create" => n == 2 || n == 4,
                _ => true,
            };
            if !extra_ok {
                return arity_error(&name);
            }
        }
        let key = argv.get(1).cloned().unwrap_or_default();
        let args = &argv[2.min(argv.len())..];
        match name.as_str() {
            "flushall" => {
                self.db.clear();
                ok()
            }
            "ping" => Reply::Simple("PONG".into()),
            "set" => {
                self.db.insert(key, RdbValue::String(argv[2].clone()));
                ok()
            }
            "del" | "exists" => {
                let keys = &argv[1..];
                let n = keys
                    .iter()
                    .filter(|k| {
                        if name == "del" {
                            self.db.remove(*k).is_some()
                        } else {
                            self.db.contains_key(*k)
                        }
                    })
                    .count();
                Reply::Int(n as i64)
            }
            "type" => Reply::Simple(
                match self.db.get(&key) {
                    None => "none",
                    Some(RdbValue::String(_)) => "string",
                    Some(RdbValue::Cms(_)) => "CMSk-TYPE",
                    Some(RdbValue::TopK(_)) => "TopK-TYPE",
                    Some(RdbValue::TDigest(_)) => "TDIS-TYPE",
                    Some(_) => "other",
                }
                .into(),
            ),
            "restore" => {
                if self.db.contains_key(&key) {
                    return err("BUSYKEY Target key name already exists.");
                }
                match restore_payload(&argv[3]) {
                    Ok(v) => {
                        self.db.insert(key, v);
                        ok()
                    }
                    Err(e) => err(e.restore_reply()),
                }
            }
            "debug" => {
                // DEBUG RELOAD: SAVE (t-digests compress first) and load the file back.
                let keys: Vec<RdbKey> = self
                    .db
                    .drain()
                    .map(|(key, value)| RdbKey { db: 0, key, expire_at_ms: None, value })
                    .collect();
                let bytes = write_rdb(&keys, 1_700_000_000);
                let file = read_rdb(&bytes, &ReadOptions::default()).expect("our own RDB file loads");
                self.db = file.keys.into_iter().map(|k| (k.key, k.value)).collect();
                ok()
            }
            "cms.initbydim" | "cms.initbyprob" => self.cms_init(&name, key, args),
            "cms.incrby" => self.cms_incrby(&key, args),
            "cms.query" => match self.cms(&key) {
                Lookup::Missing => err("CMS: key does not exist"),
                Lookup::Other => err(WRONGTYPE),
                Lookup::Found(c) => {
                    Reply::Array(args.iter().map(|i| Reply::Int(c.query(i) as i64)).collect())
                }
            },
            "cms.merge" => self.cms_merge(&key, args),
            "cms.info" => match self.cms(&key) {
                Lookup::Missing => err("CMS: key does not exist"),
                Lookup::Other => err(WRONGTYPE),
                Lookup::Found(c) => Reply::Map(vec![
                    ("width".into(), Reply::Int(c.width() as i64)),
                    ("depth".into(), Reply::Int(c.depth() as i64)),
                    ("count".into(), Reply::Int(c.info_count())),
                ]),
            },
            "topk.reserve" => self.topk_reserve(key, args),
            "topk.add" | "topk.incrby" => self.topk_add(&name, &key, args),
            "topk.query" | "topk.count" => {
                let query = name == "topk.query";
                match self.topk(&key) {
                    Lookup::Missing => err("TopK: key does not exist"),
                    Lookup::Other => err(WRONGTYPE),
                    Lookup::Found(t) => {
                        Reply::Array(
                            args.iter()
                                .map(|i| {
                                    if query {
                                        Reply::Bool(t.query(i))
                                    } else {
                                        Reply::Int(t.count(i) as i64)
                                    }
                                })
                                .collect(),
                        )
                    }
                }
            }
            "topk.list" => {
                let with_count = match args.first() {
                    None => false,
                    Some(a) if withcount_keyword(a) => true,
                    Some(_) => return err("WITHCOUNT keyword expected"),
                };
                match self.topk(&key) {
                    Lookup::Missing => err("TopK: key does not exist"),
                    Lookup::Other => err(WRONGTYPE),
                    Lookup::Found(t) => {
                        let mut out = Vec::new();
                        for (item, count) in t.list() {
                            out.push(Reply::Bulk(topk_reply_item(item).to_vec()));
                            if with_count {
                                out.push(Reply::Int(count as i64));
                            }
                        }
                        Reply::Array(out)
                    }
                }
            }
            "topk.info" => match self.topk(&key) {
                Lookup::Missing => err("TopK: key does not exist"),
                Lookup::Other => err(WRONGTYPE),
                Lookup::Found(t) => Reply::Map(vec![
                    ("k".into(), Reply::Int(t.k() as i64)),
                    ("width".into(), Reply::Int(t.width() as i64)),
                    ("depth".into(), Reply::Int(t.depth() as i64)),
                    ("decay".into(), Reply::Double(t.decay())),
                ]),
            },
            n if n.starts_with("tdigest.") => self.tdigest_cmd(n, key, args),
            other => panic!("the interpreter does not know {other}"),
        }
    }

    fn cms_init(&mut self, name: &str, key: Vec<u8>, args: &[Vec<u8>]) -> Reply {
        if self.db.contains_key(&key) {
            return err("CMS: key already exists");
        }
        let made = if name == "cms.initbydim" {
            // An argument that is not an integer fails the same check as a value below 1.
            let w = parse_int(&args[0]).unwrap_or(0);
            let d = parse_int(&args[1]).unwrap_or(0);
            CountMinSketch::init_by_dim(w, d, BUDGET)
        } else {
            let e = self.double(&args[0]).unwrap_or(f64::NAN);
            let p = self.double(&args[1]).unwrap_or(f64::NAN);
            CountMinSketch::init_by_prob(e, p, BUDGET)
        };
        match made {
            Ok(c) => {
                self.db.insert(key, RdbValue::Cms(c));
                ok()
            }
            Err(e) => cms_create_reply(e),
        }
    }

    fn cms_incrby(&mut self, key: &[u8], args: &[Vec<u8>]) -> Reply {
        let c = match self.cms(key) {
            Lookup::Missing => return err("CMS: key does not exist"),
            Lookup::Other => return err(WRONGTYPE),
            Lookup::Found(c) => c,
        };
        let mut pairs = Vec::new();
        for p in args.chunks(2) {
            match parse_int(&p[1]) {
                None => return err("CMS: Cannot parse number"),
                Some(v) if v < 0 => return err("CMS: Number cannot be negative"),
                Some(v) => pairs.push((&p[0], v as u64)),
            }
        }
        Reply::Array(
            pairs
                .into_iter()
                .map(|(item, v)| match c.incr_by(item, v) {
                    CMS_COUNTER_MAX => err("CMS: INCRBY overflow"),
                    n => Reply::Int(n as i64),
                })
                .collect(),
        )
    }

    fn cms_merge(&mut self, key: &[u8], args: &[Vec<u8>]) -> Reply {
        match self.cms(key) {
            Lookup::Missing => return err("CMS: key does not exist"),
            Lookup::Other => return err(WRONGTYPE),
            Lookup::Found(_) => {}
        }
        let Some(numkeys) = parse_int(&args[0]) else { return err("CMS: invalid numkeys") };
        if numkeys <= 0 {
            return err("CMS: Number of keys must be positive");
        }
        let rest = &args[1..];
        let nk = numkeys as usize;
        let weights_at = rest.iter().position(|a| a.eq_ignore_ascii_case(b"WEIGHTS"));
        match weights_at {
            None if nk != rest.len() => return err("CMS: wrong number of keys"),
            Some(p) if p != nk || rest.len() != 1 + 2 * nk => {
                return err("CMS: wrong number of keys/weights")
            }
            _ => {}
        }
        let (dw, dd) = match self.db.get(key) {
            Some(RdbValue::Cms(d)) => (d.width(), d.depth()),
            _ => unreachable!(),
        };
        let mut weights = Vec::new();
        for i in 0..nk {
            let w = match weights_at {
                Some(_) => match parse_int(&rest[nk + 1 + i]) {
                    Some(w) => w,
                    None => return err("CMS: invalid weight value"),
                },
                None => 1,
            };
            match self.db.get(&rest[i]) {
                None => return err("CMS: key does not exist"),
                Some(RdbValue::Cms(s)) if (s.width(), s.depth()) != (dw, dd) => {
                    return err("CMS: width/depth is not equal")
                }
                Some(RdbValue::Cms(_)) => {}
                Some(_) => return err(WRONGTYPE),
            }
            weights.push(w);
        }
        // Take the destination out so that sources can be borrowed beside it.
        let Some(RdbValue::Cms(mut dest)) = self.db.remove(key) else { unreachable!() };
        let result = {
            let sources: Vec<(CmsSource<'_>, i64)> = rest[..nk]
                .iter()
                .zip(&weights)
                .map(|(k, &w)| match self.db.get(k) {
                    Some(RdbValue::Cms(s)) => (CmsSource::Sketch(s), w),
                    _ => (CmsSource::Destination, w),
                })
                .collect();
            dest.merge(&sources)
        };
        self.db.insert(key.to_vec(), RdbValue::Cms(dest));
        match result {
            Ok(()) => ok(),
            Err(CmsMergeError::Overflow) => err("CMS: MERGE overflow"),
            Err(e) => panic!("checked before: {e}"),
        }
    }

    fn topk_reserve(&mut self, key: Vec<u8>, args: &[Vec<u8>]) -> Reply {
        if self.db.contains_key(&key) {
            return err("TopK: key already exists");
        }
        let k = parse_int(&args[0]).unwrap_or(0);
        let (w, d, decay) = if args.len() == 4 {
            (
                parse_int(&args[1]).unwrap_or(0),
                parse_int(&args[2]).unwrap_or(0),
                self.double(&args[3]).unwrap_or(f64::NAN),
            )
        } else {
            (TOPK_DEFAULT_WIDTH, TOPK_DEFAULT_DEPTH, TOPK_DEFAULT_DECAY)
        };
        match TopK::reserve(k, w, d, decay, BUDGET) {
            Ok(t) => {
                self.db.insert(key, RdbValue::TopK(t));
                ok()
            }
            Err(e) => topk_create_reply(e),
        }
    }

    fn topk_add(&mut self, name: &str, key: &[u8], args: &[Vec<u8>]) -> Reply {
        let rng = &mut self.rng;
        let t = match self.db.get_mut(key) {
            None => return err("TopK: key does not exist"),
            Some(RdbValue::TopK(t)) => t,
            Some(_) => return err(WRONGTYPE),
        };
        let expelled =
            |e: Option<Vec<u8>>| e.map_or(Reply::Null, |i| Reply::Bulk(topk_reply_item(&i).to_vec()));
        if name == "topk.add" {
            return Reply::Array(args.iter().map(|i| expelled(t.add(i, rng))).collect());
        }
        let mut out = Vec::new();
        for p in args.chunks(2) {
            match t.incr_by(&p[0], parse_int(&p[1]).unwrap_or(-1), rng) {
                Ok(e) => out.push(expelled(e)),
                Err(_) => {
                    out.push(err(TOPK_INCR_ERR));
                    break;
                }
            }
        }
        Reply::Array(out)
    }

    fn tdigest_cmd(&mut self, name: &str, key: Vec<u8>, args: &[Vec<u8>]) -> Reply {
        match name {
            "tdigest.create" => {
                match self.db.get(&key) {
                    Some(RdbValue::TDigest(_)) => return err("ERR T-Digest: key already exists"),
                    Some(_) => return err(WRONGTYPE),
                    None => {}
                }
                let mut compression = TDIGEST_DEFAULT_COMPRESSION;
                if args.len() == 2 {
                    if !args.iter().any(|a| a.eq_ignore_ascii_case(b"COMPRESSION")) {
                        return err("ERR T-Digest: wrong keyword");
                    }
                    match parse_compression(&args[1]) {
                        Ok(c) => compression = c,
                        Err(r) => return r,
                    }
                }
                match TDigest::new(compression, BUDGET) {
                    Ok(t) => {
                        self.db.insert(key, RdbValue::TDigest(t));
                        ok()
                    }
                    Err(_) => err("ERR T-Digest: allocation failed"),
                }
            }
            "tdigest.merge" => self.tdigest_merge(key, args),
            _ => {
                let target = self.target;
                let t = match self.tdigest(&key) {
                    Lookup::Missing => return err("ERR T-Digest: key does not exist"),
                    Lookup::Other => return err(WRONGTYPE),
                    Lookup::Found(t) => t,
                };
                tdigest_on_key(target, name, t, args)
            }
        }
    }

    fn tdigest_merge(&mut self, dest: Vec<u8>, args: &[Vec<u8>]) -> Reply {
        let dest_old = match self.db.get(&dest) {
            Some(RdbValue::TDigest(t)) => Some(t.compression()),
            Some(_) => return err(WRONGTYPE),
            None => None,
        };
        let numkeys = match parse_int(&args[0]) {
            None => return err("ERR T-Digest: error parsing numkeys"),
            Some(n) if n <= 0 => return err("ERR T-Digest: numkeys needs to be a positive integer"),
            Some(n) if n as usize > args.len() - 1 => return arity_error("tdigest.merge"),
            Some(n) => n as usize,
        };
        let sources = &args[1..1 + numkeys];
        let after = &args[1 + numkeys..];
        let mut explicit = None;
        let mut override_dest = false;
        if !after.is_empty() {
            let comp = after.iter().position(|a| a.eq_ignore_ascii_case(b"COMPRESSION"));
            override_dest = after.iter().any(|a| a.eq_ignore_ascii_case(b"OVERRIDE"));
            match comp {
                Some(i) if i + 1 == after.len() => return arity_error("tdigest.merge"),
                Some(i) => match parse_compression(&after[i + 1]) {
                    Ok(c) => explicit = Some(c),
                    Err(r) => return r,
                },
                None if !override_dest => return err("ERR T-Digest: wrong keyword"),
                None => {}
            }
        }
        let mut compressions = Vec::new();
        for s in sources {
            match self.db.get(s) {
                Some(RdbValue::TDigest(t)) => compressions.push(t.compression()),
                None => return err("ERR T-Digest: key does not exist"),
                Some(_) => return err(WRONGTYPE),
            }
        }
        let compression = tdigest_merge_compression(explicit, override_dest, dest_old, &compressions);
        let Ok(mut merge) = TDigestMerge::new(compression, BUDGET) else {
            return err("ERR T-Digest: allocation of destination digest failed");
        };
        let mut absorb = |key: &[u8], db: &mut HashMap<Vec<u8>, RdbValue>| match db.get_mut(key) {
            Some(RdbValue::TDigest(t)) => merge.absorb(t),
            _ => unreachable!(),
        };
        let mut result = Ok(());
        if dest_old.is_some() && !override_dest {
            result = absorb(&dest, &mut self.db);
        }
        for s in sources {
            if result.is_err() {
                break;
            }
            result = absorb(s, &mut self.db);
        }
        match result {
            Ok(()) => {
                self.db.insert(dest, RdbValue::TDigest(merge.finish()));
                ok()
            }
            Err(_) => err("ERR T-Digest: overflow detected"),
        }
    }
}

fn parse_compression(s: &[u8]) -> Result<f64, Reply> {
    match parse_int(s) {
        None => Err(err("ERR T-Digest: error parsing compression parameter")),
        Some(c) if c <= 0 => Err(err("ERR T-Digest: compression parameter needs to be a positive integer")),
        Some(c) => Ok(c as f64),
    }
}

/// `TOPK.LIST`'s keyword: a C `strncasecmp(arg, "WITHCOUNT", len(arg)) == 0`.
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

fn tdigest_on_key(target: Target, name: &str, t: &mut TDigest, args: &[Vec<u8>]) -> Reply {
    let dbl = |s: &[u8]| target.parse_double(s);
    let doubles = |v: Vec<f64>| Reply::Array(v.into_iter().map(Reply::Double).collect());
    match name {
        "tdigest.reset" => {
            t.reset();
            ok()
        }
        "tdigest.add" => {
            let mut values = Vec::new();
            for a in args {
                match dbl(a) {
                    None => return err("ERR T-Digest: error parsing val parameter"),
                    Some(v) if !v.is_finite() => {
                        return err("ERR T-Digest: val parameter needs to be a finite number")
                    }
                    Some(v) => values.push(v),
                }
            }
            for v in values {
                if t.add(v).is_err() {
                    return err("ERR T-Digest: overflow detected");
                }
            }
            ok()
        }
        "tdigest.min" => Reply::Double(t.min_value()),
        "tdigest.max" => Reply::Double(t.max_value()),
        "tdigest.info" => {
            let i = t.info();
            let memory = match target {
                Target::Redis70 => 8 + 16 * i.capacity,
                Target::Current => i.memory_usage,
            };
            Reply::Map(vec![
                ("Compression".into(), Reply::Int(i.compression)),
                ("Capacity".into(), Reply::Int(i.capacity)),
                ("Merged nodes".into(), Reply::Int(i.merged_nodes)),
                ("Unmerged nodes".into(), Reply::Int(i.unmerged_nodes)),
                ("Merged weight".into(), Reply::Int(i.merged_weight)),
                ("Unmerged weight".into(), Reply::Int(i.unmerged_weight)),
                ("Observations".into(), Reply::Int(i.observations)),
                ("Total compressions".into(), Reply::Int(i.total_compressions)),
                ("Memory usage".into(), Reply::Int(memory)),
            ])
        }
        "tdigest.quantile" => {
            let mut qs = Vec::new();
            for a in args {
                match dbl(a) {
                    None => return err("ERR T-Digest: error parsing quantile"),
                    Some(q) if !(0.0..=1.0).contains(&q) => {
                        return err("ERR T-Digest: quantile should be in [0,1]")
                    }
                    Some(q) => qs.push(q),
                }
            }
            doubles(t.quantiles(&qs))
        }
        "tdigest.cdf" | "tdigest.rank" | "tdigest.revrank" => {
            let mut xs = Vec::new();
            for a in args {
                match dbl(a) {
                    None if name == "tdigest.cdf" => return err("ERR T-Digest: error parsing cdf"),
                    None => return err("ERR T-Digest: error parsing value"),
                    Some(x) => xs.push(x),
                }
            }
            match name {
                "tdigest.cdf" => doubles(xs.into_iter().map(|x| t.cdf(x)).collect()),
                "tdigest.rank" => Reply::Array(xs.into_iter().map(|x| Reply::Int(t.rank(x))).collect()),
                _ => Reply::Array(xs.into_iter().map(|x| Reply::Int(t.rev_rank(x))).collect()),
            }
        }
        "tdigest.byrank" | "tdigest.byrevrank" => {
            let mut rs = Vec::new();
            for a in args {
                match parse_int(a) {
                    None => return err("ERR T-Digest: error parsing rank"),
                    Some(r) if r < 0 => return err("ERR T-Digest: rank needs to be non negative"),
                    Some(r) => rs.push(r),
                }
            }
            if name == "tdigest.byrank" {
                doubles(rs.into_iter().map(|r| t.by_rank(r)).collect())
            } else {
                doubles(rs.into_iter().map(|r| t.by_rev_rank(r)).collect())
            }
        }
        "tdigest.trimmed_mean" => {
            let Some(lo) = dbl(&args[0]) else {
                return err("ERR T-Digest: error parsing low_cut_percentile");
            };
            let Some(hi) = dbl(&args[1]) else {
                return err("ERR T-Digest: error parsing high_cut_percentile");
            };
            if !(0.0..=1.0).contains(&lo) || !(0.0..=1.0).contains(&hi) {
                return err("ERR T-Digest: low_cut_percentile and high_cut_percentile should be in [0,1]");
            }
            if lo >= hi {
                return err("ERR T-Digest: low_cut_percentile should be lower than high_cut_percentile");
            }
            Reply::Double(t.trimmed_mean(lo, hi))
        }
        other => panic!("unknown t-digest command {other}"),
    }
}

/// Whether `ours` is the reply `want` (the transcript's decoded JSON) in RESP3 (`resp3`) or
/// RESP2, doubles printed as `fmt`. `Err` says where they differ.
pub fn matches(ours: &Reply, want: &Value, resp3: bool, fmt: DoubleFormat) -> Result<(), String> {
    let fail = || Err(format!("ours {ours:?}, want {want}"));
    let bytes_of = |v: &Value| -> Option<Vec<u8>> {
        match v {
            Value::String(s) => Some(s.as_bytes().to_vec()),
            Value::Object(o) => o
                .get("b64")
                .and_then(Value::as_str)
                .map(|b| base64::engine::general_purpose::STANDARD.decode(b).unwrap()),
            _ => None,
        }
    };
    match ours {
        Reply::Simple(s) => (want.as_str() == Some(s)).then_some(()).ok_or(()).or_else(|_| fail()),
        Reply::Int(n) => (want.as_i64() == Some(*n)).then_some(()).ok_or(()).or_else(|_| fail()),
        Reply::Bool(b) if resp3 => (want.as_bool() == Some(*b)).then_some(()).ok_or(()).or_else(|_| fail()),
        Reply::Bool(b) => (want.as_i64() == Some(*b as i64)).then_some(()).ok_or(()).or_else(|_| fail()),
        Reply::Null => want.is_null().then_some(()).ok_or(()).or_else(|_| fail()),
        Reply::Bulk(b) => {
            (bytes_of(want).as_deref() == Some(&b[..])).then_some(()).ok_or(()).or_else(|_| fail())
        }
        Reply::Error(e) => {
            (want.get("error").and_then(Value::as_str) == Some(e)).then_some(()).ok_or(()).or_else(|_| fail())
        }
        Reply::Double(d) => {
            let text = format_double(*d, fmt);
            let got = if resp3 { want.get("double").and_then(Value::as_str) } else { want.as_str() };
            if got == Some(text.as_str()) {
                Ok(())
            } else {
                Err(format!("double {d:e} printed {text:?}, want {want}"))
            }
        }
        Reply::Array(items) => {
            let Some(w) = want.as_array() else { return fail() };
            if w.len() != items.len() {
                return fail();
            }
            for (o, w) in items.iter().zip(w) {
                matches(o, w, resp3, fmt)?;
            }
            Ok(())
        }
        Reply::Map(pairs) => {
            if resp3 {
                let Some(w) = want.get("map").and_then(Value::as_array) else { return fail() };
                if w.len() != pairs.len() {
                    return fail();
                }
                for ((k, v), w) in pairs.iter().zip(w) {
                    if w[0].as_str() != Some(k) {
                        return fail();
                    }
                    matches(v, &w[1], resp3, fmt)?;
                }
                Ok(())
            } else {
                let flat: Vec<Reply> =
                    pairs.iter().flat_map(|(k, v)| [Reply::Simple(k.clone()), v.clone()]).collect();
                matches(&Reply::Array(flat), want, resp3, fmt)
            }
        }
    }
}

/// The arguments of a transcript line.
pub fn argv(cmd: &Value) -> Vec<Vec<u8>> {
    cmd.as_array()
        .unwrap()
        .iter()
        .map(|a| match a {
            Value::String(s) => s.as_bytes().to_vec(),
            Value::Object(o) => {
                base64::engine::general_purpose::STANDARD.decode(o["b64"].as_str().unwrap()).unwrap()
            }
            other => panic!("argument {other}"),
        })
        .collect()
}
