//! The RedisBloom cuckoo commands (`CF.*`, spec §8), on
//! [`sift::compat::redisbloom::CuckooFilter`].
//!
//! As in [`super::bf`]: arguments are checked in RedisBloom's order, replies are built in their
//! RESP3 shape, and where RESP2 differs in more than the mechanical downgrade the session's
//! protocol decides: CF.INSERT elements are `:1`/`:-1` in RESP2 but `#t`/`#f` in RESP3, while
//! CF.INSERTNX elements are integers in both.

use bytes::Bytes;
use sift::compat::redisbloom::{CuckooCreateError, CuckooFilter, CuckooHeaderError, CuckooInsertError};

use super::bf::{held, load_limits, memory_budget, Held};
use super::parse::{eq_ignore_case, parse_i64};
use super::{err, Ctx};
use crate::config::{CuckooDefaults, MAX_CAPACITY};
use crate::db::{Locked, Value};
use crate::frame::Frame;

fn wrongtype() -> Frame {
    Frame::error(err::WRONGTYPE)
}

/// The filter at `key` for reading: `Ok(None)` when missing, `Err(WRONGTYPE)` for another type.
fn filter<'c>(keys: &'c mut Locked<'_>, key: &[u8]) -> Result<Option<&'c CuckooFilter>, Frame> {
    match keys.get(key).map(|e| &e.value) {
        None => Ok(None),
        Some(Value::Cuckoo(f)) => Ok(Some(f)),
        Some(_) => Err(wrongtype()),
    }
}

/// The filter at `key` for writing, when it holds one (the type is checked first, so a miss does
/// not count as a change).
fn existing_mut<'c>(keys: &'c mut Locked<'_>, key: &[u8]) -> Option<&'c mut CuckooFilter> {
    if held(keys, key) != Held::Cuckoo {
        return None;
    }
    match keys.get_mut(key).map(|e| &mut e.value) {
        Some(Value::Cuckoo(f)) => Some(f),
        _ => None,
    }
}

/// The reply of a failed creation on auto-create (CF.ADD / CF.INSERT, spec §8).
fn create_error(e: CuckooCreateError) -> Frame {
    Frame::error(match e {
        CuckooCreateError::OutOfMemory => err::INSUFFICIENT_MEMORY_CREATE,
        _ => err::CF_COULD_NOT_CREATE,
    })
}

/// [`CuckooFilter::new`], but a slot array larger than `budget` bytes is refused up front with
/// the out-of-memory reply (see [`memory_budget`]). Its size is `nextPow2(capacity / bs) · bs`
/// (spec §6.2).
fn new_filter(capacity: u64, bs: u16, mi: u16, exp: u16, budget: u64) -> Result<CuckooFilter, Frame> {
    if bs > 0 {
        let buckets = (capacity / bs as u64).checked_next_power_of_two().unwrap_or(u64::MAX).max(1);
        if buckets.saturating_mul(bs as u64) > budget {
            return Err(Frame::error(err::INSUFFICIENT_MEMORY_CREATE));
        }
    }
    CuckooFilter::new(capacity, bs, mi, exp).map_err(create_error)
}

/// A filter of `capacity` with the configured bucket size, kick-out limit and expansion.
fn create_configured(capacity: i64, d: &CuckooDefaults, budget: u64) -> Result<CuckooFilter, Frame> {
    let bad = || Frame::error(err::CF_COULD_NOT_CREATE);
    let capacity = u64::try_from(capacity).map_err(|_| bad())?;
    let bs = u16::try_from(d.bucket_size).map_err(|_| bad())?;
    let mi = u16::try_from(d.max_iterations).map_err(|_| bad())?;
    let exp = u16::try_from(d.expansion).map_err(|_| bad())?;
    new_filter(capacity, bs, mi, exp, budget)
}

/// The filter for an inserting command: created with `capacity` when missing, WRONGTYPE for
/// another type, and then the `cf-max-expansions` check of spec §6.8 (once per command, also on
/// a filter this command just created).
fn for_insert<'c>(
    keys: &'c mut Locked<'_>,
    key: &Bytes,
    capacity: i64,
    nocreate: bool,
    d: &CuckooDefaults,
    budget: u64,
) -> Result<&'c mut CuckooFilter, Frame> {
    match held(keys, key) {
        Held::Cuckoo => {}
        Held::Missing if nocreate => return Err(Frame::error(err::NOT_FOUND)),
        Held::Missing => {
            let f = create_configured(capacity, d, budget)?;
            keys.insert(key.clone(), Value::Cuckoo(Box::new(f)));
        }
        Held::Bloom | Held::Other => return Err(wrongtype()),
    }
    let f = existing_mut(keys, key).expect("checked or created above under the same lock");
    if f.num_filters() as i64 >= d.max_expansions {
        return Err(Frame::error(err::CF_MAX_EXPANSIONS));
    }
    Ok(f)
}

/// A parsed `CF.RESERVE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reserve {
    capacity: u64,
    bucket_size: u16,
    max_iterations: u16,
    expansion: u16,
}

/// The value after the first argument equal to `keyword` (any case; the key is searched too):
/// `Ok(None)` when the keyword is absent, `Err(parse_error)` when its value is missing (where
/// RedisBloom reads past the arguments) or not an integer.
fn keyword_value(argv: &[Bytes], keyword: &str, parse_error: &'static str) -> Result<Option<i64>, Frame> {
    let Some(pos) = argv[1..].iter().position(|a| eq_ignore_case(a, keyword)).map(|p| p + 1) else {
        return Ok(None);
    };
    argv.get(pos + 1).and_then(|v| parse_i64(v)).map(Some).ok_or_else(|| Frame::error(parse_error))
}

fn parse_reserve(argv: &[Bytes], d: &CuckooDefaults) -> Result<Reserve, Frame> {
    let capacity = parse_i64(&argv[2]).ok_or_else(|| Frame::error(err::BAD_CAPACITY))?;
    let max_iterations = match keyword_value(argv, "MAXITERATIONS", err::CF_PARSE_MAXITERATIONS)? {
        Some(v) if !(1..=65535).contains(&v) => return Err(Frame::error(err::CF_MAXITERATIONS_RANGE)),
        Some(v) => v,
        None => d.max_iterations,
    };
    let bucket_size = match keyword_value(argv, "BUCKETSIZE", err::CF_PARSE_BUCKETSIZE)? {
        Some(v) if !(1..=d.bucket_size_max).contains(&v) => {
            return Err(Frame::error(err::cf_bucketsize_range(d.bucket_size_max)))
        }
        Some(v) => v,
        None => d.bucket_size,
    };
    let expansion = match keyword_value(argv, "EXPANSION", err::CF_PARSE_EXPANSION)? {
        Some(v) if !(0..=32768).contains(&v) => return Err(Frame::error(err::CF_EXPANSION_RANGE)),
        Some(v) => v,
        None => d.expansion,
    };
    if capacity < 2 * bucket_size || capacity > MAX_CAPACITY {
        return Err(Frame::error(err::CF_RESERVE_CAPACITY_RANGE));
    }
    // Every value is in range of its type now (the configured defaults were validated too).
    let to_u16 = |v: i64| u16::try_from(v).map_err(|_| Frame::error(err::CF_COULD_NOT_CREATE));
    Ok(Reserve {
        capacity: capacity as u64,
        bucket_size: to_u16(bucket_size)?,
        max_iterations: to_u16(max_iterations)?,
        expansion: to_u16(expansion)?,
    })
}

/// CF.RESERVE key capacity [BUCKETSIZE bs] [MAXITERATIONS mi] [EXPANSION e].
pub fn reserve(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if argv.len() % 2 == 0 {
        return Frame::error(err::arity("cf.reserve"));
    }
    let d = ctx.server.config.read().cuckoo;
    let r = match parse_reserve(argv, &d) {
        Ok(r) => r,
        Err(f) => return f,
    };
    match held(ctx.keys, &argv[1]) {
        Held::Cuckoo => return Frame::error(err::ITEM_EXISTS),
        Held::Bloom | Held::Other => return wrongtype(),
        Held::Missing => {}
    }
    match new_filter(r.capacity, r.bucket_size, r.max_iterations, r.expansion, memory_budget(ctx)) {
        Ok(f) => {
            ctx.keys.insert(argv[1].clone(), Value::Cuckoo(Box::new(f)));
            Frame::ok()
        }
        Err(f) => f,
    }
}

fn add_impl(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], unique: bool) -> Frame {
    let d = ctx.server.config.read().cuckoo;
    let budget = memory_budget(ctx);
    let f = match for_insert(ctx.keys, &argv[1], d.initial_size, false, &d, budget) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let r = if unique { f.insert_unique(&argv[2]) } else { f.insert(&argv[2]).map(|()| true) };
    match r {
        Ok(added) => Frame::Boolean(added),
        Err(CuckooInsertError::NoSpace) => Frame::error(err::CF_FULL),
        Err(_) => Frame::error(err::CF_INSUFFICIENT_MEMORY),
    }
}

/// CF.ADD key item (duplicates allowed).
pub fn add(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    add_impl(ctx, argv, false)
}

/// CF.ADDNX key item.
pub fn addnx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    add_impl(ctx, argv, true)
}

/// A parsed `CF.INSERT` / `CF.INSERTNX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insert {
    capacity: i64,
    nocreate: bool,
    items_at: usize,
}

fn parse_insert(argv: &[Bytes], name: &str, d: &CuckooDefaults) -> Result<Insert, Frame> {
    let arity = || Frame::error(err::arity(name));
    let mut r = Insert { capacity: d.initial_size, nocreate: false, items_at: 0 };
    let mut i = 2;
    // Tokens are told apart by their first byte only, as RedisBloom does.
    while i < argv.len() {
        match argv[i].first().map(u8::to_ascii_lowercase) {
            Some(b'c') => {
                let value = argv.get(i + 1).ok_or_else(arity)?;
                let cap = parse_i64(value).ok_or_else(|| Frame::error(err::BAD_CAPACITY))?;
                if !(d.initial_size_min..=MAX_CAPACITY).contains(&cap) {
                    return Err(Frame::error(err::CF_INSERT_CAPACITY_RANGE));
                }
                r.capacity = cap;
                i += 2;
            }
            Some(b'i') => {
                r.items_at = i + 1;
                break;
            }
            Some(b'n') => {
                r.nocreate = true;
                i += 1;
            }
            _ => return Err(Frame::error(err::UNKNOWN_ARGUMENT)),
        }
    }
    if r.items_at == 0 || r.items_at >= argv.len() {
        return Err(arity());
    }
    Ok(r)
}

fn insert_impl(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], unique: bool) -> Frame {
    let name = if unique { "cf.insertnx" } else { "cf.insert" };
    let d = ctx.server.config.read().cuckoo;
    let r = match parse_insert(argv, name, &d) {
        Ok(r) => r,
        Err(f) => return f,
    };
    let resp3 = ctx.session.protocol >= 3;
    let budget = memory_budget(ctx);
    let f = match for_insert(ctx.keys, &argv[1], r.capacity, r.nocreate, &d, budget) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let items = &argv[r.items_at..];
    let replies = items.iter().map(|item| {
        if unique {
            // 1 added, 0 already present, -1 no room: integers in both protocols (spec §2.1).
            Frame::Integer(match f.insert_unique(item) {
                Ok(true) => 1,
                Ok(false) => 0,
                Err(_) => -1,
            })
        } else {
            let added = f.insert(item).is_ok();
            match (resp3, added) {
                (true, b) => Frame::Boolean(b),
                (false, true) => Frame::Integer(1),
                (false, false) => Frame::Integer(-1),
            }
        }
    });
    Frame::Array(replies.collect())
}

/// CF.INSERT key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...].
pub fn insert(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    insert_impl(ctx, argv, false)
}

/// CF.INSERTNX key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...].
pub fn insertnx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    insert_impl(ctx, argv, true)
}

/// The filter for the commands that treat a missing key and another type alike.
fn filter_or_none<'c>(keys: &'c mut Locked<'_>, key: &[u8]) -> Option<&'c CuckooFilter> {
    filter(keys, key).ok().flatten()
}

/// CF.EXISTS key item: a missing key or another type is "no".
pub fn exists(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    Frame::Boolean(filter_or_none(ctx.keys, &argv[1]).is_some_and(|f| f.contains(&argv[2])))
}

/// CF.MEXISTS key item [item ...].
pub fn mexists(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let f = filter_or_none(ctx.keys, &argv[1]);
    Frame::Array(argv[2..].iter().map(|i| Frame::Boolean(f.is_some_and(|f| f.contains(i)))).collect())
}

/// CF.COUNT key item: an integer in both protocols; 0 for a missing key or another type.
pub fn count(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    Frame::Integer(filter_or_none(ctx.keys, &argv[1]).map_or(0, |f| f.count(&argv[2]) as i64))
}

/// CF.DEL key item: `Not found` for a missing key or another type (never WRONGTYPE).
pub fn del(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match existing_mut(ctx.keys, &argv[1]) {
        Some(f) => Frame::Boolean(f.delete(&argv[2])),
        None => Frame::error(err::CF_DEL_NOT_FOUND),
    }
}

/// CF.COMPACT key: no arity is registered, so the count is checked here.
pub fn compact(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if argv.len() != 2 {
        return Frame::error(err::arity("cf.compact"));
    }
    match existing_mut(ctx.keys, &argv[1]) {
        Some(f) => {
            f.compact(true);
            Frame::ok()
        }
        None => Frame::error(err::CF_COMPACT_NOT_FOUND),
    }
}

/// CF.INFO key.
pub fn info(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let i = match filter(ctx.keys, &argv[1]) {
        Ok(Some(f)) => f.info(),
        Ok(None) => return Frame::error(err::NOT_FOUND),
        Err(f) => return f,
    };
    let pair = |name: &str, v: u64| (Frame::Simple(name.into()), Frame::Integer(v as i64));
    Frame::Map(vec![
        pair("Size", i.size),
        pair("Number of buckets", i.buckets),
        pair("Number of filters", i.filters),
        pair("Number of items inserted", i.items),
        pair("Number of items deleted", i.deletes),
        pair("Bucket size", i.bucket_size as u64),
        pair("Expansion rate", i.expansion as u64),
        pair("Max iterations", i.max_iterations as u64),
    ])
}

/// CF.SCANDUMP key position: the position is checked before the key.
pub fn scandump(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let Some(pos) = parse_i64(&argv[2]).filter(|&p| p >= 0) else {
        return Frame::error(err::CF_INVALID_POSITION);
    };
    let f = match filter(ctx.keys, &argv[1]) {
        Ok(Some(f)) => f,
        Ok(None) => return Frame::error(err::NOT_FOUND),
        Err(reply) => return reply,
    };
    match f.scandump(pos) {
        Some((next, data)) => {
            Frame::Array(vec![Frame::Integer(next), Frame::Bulk(Bytes::copy_from_slice(&data))])
        }
        // The end marker (and the whole dump of an empty filter): `[0, null]` (spec §2.1).
        None => Frame::Array(vec![Frame::Integer(0), Frame::Null]),
    }
}

/// CF.LOADCHUNK key position data.
pub fn loadchunk(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let Some(pos) = parse_i64(&argv[2]).filter(|&p| p != 0) else {
        return Frame::error(err::CF_INVALID_POSITION);
    };
    let data = &argv[3];
    let held = held(ctx.keys, &argv[1]);
    if pos == 1 {
        return match held {
            Held::Cuckoo => Frame::error(err::ITEM_EXISTS),
            Held::Bloom | Held::Other => wrongtype(),
            Held::Missing => {
                let limits = load_limits(ctx);
                match CuckooFilter::from_header(data, &limits) {
                    Ok(f) => {
                        ctx.keys.insert(argv[1].clone(), Value::Cuckoo(Box::new(f)));
                        Frame::ok()
                    }
                    Err(CuckooHeaderError::Length) => Frame::error(err::CF_INVALID_HEADER),
                    Err(_) => Frame::error(err::CF_COULD_NOT_CREATE_LOAD),
                }
            }
        };
    }
    match held {
        Held::Missing => Frame::error(err::NOT_FOUND),
        Held::Bloom | Held::Other => wrongtype(),
        Held::Cuckoo => {
            let f = existing_mut(ctx.keys, &argv[1]).expect("checked above under the same lock");
            match f.load_chunk(pos, data) {
                Ok(()) => Frame::ok(),
                // Every chunk failure (CuckooChunkError) is the same reply.
                Err(_) => Frame::error(err::CF_COULD_NOT_LOAD_CHUNK),
            }
        }
    }
}

/// CF.DEBUG key.
pub fn debug(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match filter(ctx.keys, &argv[1]) {
        Ok(Some(f)) => Frame::Bulk(f.debug_line().into()),
        Ok(None) => Frame::error(err::NOT_FOUND),
        Err(reply) => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()
    }

    #[test]
    fn reserve_checks_in_redisbloom_order() {
        let d = crate::config::Params::default().cuckoo;
        let p = |a: &[&str]| parse_reserve(&args(a), &d);
        assert_eq!(
            p(&["CF.RESERVE", "k", "10", "BUCKETSIZE", "x", "MAXITERATIONS", "y"]),
            Err(Frame::error(err::CF_PARSE_MAXITERATIONS))
        );
        // A keyword as the last argument: RedisBloom reads past the list; we refuse it.
        assert_eq!(
            p(&["CF.RESERVE", "k", "100", "x", "MAXITERATIONS"]),
            Err(Frame::error(err::CF_PARSE_MAXITERATIONS))
        );
        assert_eq!(
            p(&["CF.RESERVE", "bucketsize", "100"]),
            Err(Frame::error(err::CF_RESERVE_CAPACITY_RANGE))
        );
        assert_eq!(p(&["CF.RESERVE", "k", "-5"]), Err(Frame::error(err::CF_RESERVE_CAPACITY_RANGE)));
        let r = p(&["CF.RESERVE", "k", "100", "BUCKETSIZE", "4", "EXPANSION", "3"]).unwrap();
        assert_eq!((r.capacity, r.bucket_size, r.max_iterations, r.expansion), (100, 4, 20, 3));
        let mut low = d;
        low.bucket_size_max = 10;
        assert_eq!(
            parse_reserve(&args(&["CF.RESERVE", "k", "100", "BUCKETSIZE", "11"]), &low),
            Err(Frame::error("BUCKETSIZE: value must be in the range [1, 10]"))
        );
    }

    #[test]
    fn insert_tokens_by_first_byte() {
        let d = crate::config::Params::default().cuckoo;
        let p = |a: &[&str]| parse_insert(&args(a), "cf.insert", &d);
        assert!(p(&["CF.INSERT", "k", "nx", "ITEMS", "a"]).unwrap().nocreate);
        assert_eq!(
            p(&["CF.INSERT", "k", "CAPACITY", "3", "ITEMS", "a"]),
            Err(Frame::error(err::CF_INSERT_CAPACITY_RANGE))
        );
        assert_eq!(
            p(&["CF.INSERT", "k", "CAPACITY", "100", "NOCREATE"]),
            Err(Frame::error("ERR wrong number of arguments for 'cf.insert' command"))
        );
    }

    /// Records every write the dispatcher logs, to replay it elsewhere.
    #[derive(Default)]
    struct Recorder(std::sync::Arc<parking_lot::Mutex<Vec<Vec<Bytes>>>>);

    impl crate::persist::Persistence for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn aof_enabled(&self) -> bool {
            true
        }
        fn load(&self, _: &mut Locked<'_>) -> Result<usize, crate::persist::PersistError> {
            Ok(0)
        }
        fn record(&self, argv: &[Bytes]) {
            self.0.lock().push(argv.to_vec());
        }
        fn commit(&self) -> Result<(), crate::persist::PersistError> {
            Ok(())
        }
        fn save(&self, _: &mut Locked<'_>) -> Result<(), crate::persist::PersistError> {
            Ok(())
        }
        fn bgsave(&self, _: &mut Locked<'_>) -> Result<(), crate::persist::PersistError> {
            Ok(())
        }
        fn bgsave_in_progress(&self) -> bool {
            false
        }
        fn last_save_unix(&self) -> u64 {
            0
        }
    }

    fn run(server: &crate::shared::Shared, s: &mut crate::cmd::Session, argv: Vec<Bytes>) -> Frame {
        crate::cmd::execute(server, s, argv).expect("a reply")
    }

    fn full_dump(
        server: &crate::shared::Shared,
        s: &mut crate::cmd::Session,
        p: &str,
        key: &str,
    ) -> Vec<Frame> {
        let mut out = Vec::new();
        let mut it = 0i64;
        loop {
            let r = run(server, s, args(&[&format!("{p}.SCANDUMP"), key, &it.to_string()]));
            let Frame::Array(pair) = &r else { panic!("{r:?}") };
            let Frame::Integer(next) = pair[0] else { panic!("{r:?}") };
            out.push(r.clone());
            if next == 0 {
                return out;
            }
            it = next;
        }
    }

    /// The writes the dispatcher records (CF.COMPACT included, although it is registered
    /// read-only) rebuild every filter exactly when replayed on an empty server: what an
    /// append-only log relies on.
    #[test]
    fn recorded_writes_replay_to_identical_filters() {
        use crate::shared::Shared;
        let rec = Recorder::default();
        let log = rec.0.clone();
        let a = Shared::new(crate::config::Params::default(), Box::new(rec));
        let mut s = crate::cmd::Session::new(1, true);
        let mut cmds: Vec<Vec<String>> = vec![
            vec!["BF.RESERVE".into(), "b".into(), "0.01".into(), "10".into()],
            vec![
                "BF.INSERT".into(),
                "i".into(),
                "NONSCALING".into(),
                "CAPACITY".into(),
                "3".into(),
                "ITEMS".into(),
            ],
            vec!["CF.RESERVE".into(), "c".into(), "8".into(), "EXPANSION".into(), "2".into()],
            vec!["BF.ADD".into(), "auto".into(), "x".into()],
            vec!["BF.RESERVE".into(), "b".into(), "0.01".into(), "10".into()],
        ];
        cmds[1].extend((0..6).map(|i| format!("n{i}")));
        let mut madd = vec!["BF.MADD".to_string(), "b".into()];
        madd.extend((0..50).map(|i| format!("m{i}")));
        cmds.push(madd);
        let mut ins = vec!["CF.INSERT".to_string(), "c".into(), "ITEMS".into()];
        ins.extend((0..60).map(|i| format!("c{i}")));
        cmds.push(ins);
        for i in 0..20 {
            cmds.push(vec!["CF.DEL".into(), "c".into(), format!("c{i}")]);
        }
        cmds.push(vec!["CF.COMPACT".into(), "c".into()]);
        cmds.push(vec!["CF.ADDNX".into(), "c".into(), "c50".into()]);
        for c in &cmds {
            let argv: Vec<&str> = c.iter().map(String::as_str).collect();
            run(&a, &mut s, args(&argv));
        }
        let recorded = log.lock().clone();
        assert!(recorded.iter().any(|c| c[0].eq_ignore_ascii_case(b"CF.COMPACT")), "CF.COMPACT is logged");
        let reserves = recorded.iter().filter(|c| c[0].eq_ignore_ascii_case(b"BF.RESERVE")).count();
        assert_eq!(
            reserves, 1,
            "the refused second BF.RESERVE (item exists) changed nothing and is not logged"
        );
        let b =
            Shared::new(crate::config::Params::default(), Box::new(crate::persist::MemoryOnly::default()));
        let mut t = crate::cmd::Session::new(2, true);
        for argv in recorded {
            run(&b, &mut t, argv);
        }
        for (p, key) in [("BF", "b"), ("BF", "i"), ("BF", "auto"), ("CF", "c")] {
            assert_eq!(full_dump(&a, &mut s, p, key), full_dump(&b, &mut t, p, key), "{key}");
            let debug = args(&[&format!("{p}.DEBUG"), key]);
            assert_eq!(run(&a, &mut s, debug.clone()), run(&b, &mut t, debug), "{key}");
        }
    }
}
