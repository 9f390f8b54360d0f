//! The RedisBloom cuckoo commands (`CF.*`, spec §8), on
//! [`sift::compat::redisbloom::CuckooFilter`].
//!
//! As in [`crate::bf`]: arguments are checked in RedisBloom's order, replies are built in their
//! RESP3 shape, and where RESP2 differs in more than the mechanical downgrade the protocol
//! decides: CF.INSERT elements are `:1`/`:-1` in RESP2 but `#t`/`#f` in RESP3, while CF.INSERTNX
//! elements are integers in both.

use sift::compat::redisbloom::{CuckooCreateError, CuckooFilter, CuckooHeaderError, CuckooInsertError};

use crate::config::MAX_CAPACITY;
use crate::parse::{eq_ignore_case, parse_i64};
use crate::{err, load_limits, owned, CuckooDefaults, Env, FilterStore, Frame, Slot};

fn wrongtype() -> Frame {
    Frame::error(err::WRONGTYPE)
}

/// The filter at `key` for reading: `Ok(None)` when missing, `Err(WRONGTYPE)` for another type.
fn filter<'c, S: FilterStore>(store: &'c mut S, key: &[u8]) -> Result<Option<&'c CuckooFilter>, Frame> {
    match store.lookup(key) {
        Slot::Missing => Ok(None),
        Slot::Cuckoo(f) => Ok(Some(f)),
        Slot::Bloom(_) | Slot::Other => Err(wrongtype()),
    }
}

/// The filter at `key` for writing, when it holds one (the type is checked first, so a miss does
/// not count as a change).
fn existing_mut<'c, S: FilterStore>(store: &'c mut S, key: &[u8]) -> Option<&'c mut CuckooFilter> {
    if !matches!(store.lookup(key), Slot::Cuckoo(_)) {
        return None;
    }
    match store.lookup_mut(key) {
        Slot::Cuckoo(f) => Some(f),
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
/// the out-of-memory reply. Its size is `nextPow2(capacity / bs) · bs` (spec §6.2).
pub fn new_filter(capacity: u64, bs: u16, mi: u16, exp: u16, budget: u64) -> Result<CuckooFilter, Frame> {
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

/// The filter for an inserting command: created with `capacity` when missing (the creation
/// propagated as a LOADCHUNK of its header before the command), WRONGTYPE for another type, and
/// then the `cf-max-expansions` check of spec §6.8 (once per command, also on a filter this
/// command just created).
fn for_insert<'c, S: FilterStore, A: AsRef<[u8]>>(
    store: &'c mut S,
    env: &mut dyn Env,
    argv: &[A],
    capacity: i64,
    nocreate: bool,
    d: &CuckooDefaults,
) -> Result<&'c mut CuckooFilter, Frame> {
    let key = argv[1].as_ref();
    let f = match store.lookup(key) {
        Slot::Cuckoo(_) => existing_mut(store, key).expect("checked above under the same lock"),
        Slot::Missing if nocreate => return Err(Frame::error(err::NOT_FOUND)),
        Slot::Missing => {
            let f = create_configured(capacity, d, env.memory_budget())?;
            let header = f.header().to_vec();
            env.propagate(vec![
                vec![b"CF.LOADCHUNK".to_vec(), key.to_vec(), b"1".to_vec(), header],
                owned(argv),
            ]);
            store.create_cuckoo(key, f)
        }
        Slot::Bloom(_) | Slot::Other => return Err(wrongtype()),
    };
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
fn keyword_value<A: AsRef<[u8]>>(
    argv: &[A],
    keyword: &str,
    parse_error: &'static str,
) -> Result<Option<i64>, Frame> {
    let Some(pos) = argv[1..].iter().position(|a| eq_ignore_case(a.as_ref(), keyword)).map(|p| p + 1) else {
        return Ok(None);
    };
    argv.get(pos + 1).and_then(|v| parse_i64(v.as_ref())).map(Some).ok_or_else(|| Frame::error(parse_error))
}

fn parse_reserve<A: AsRef<[u8]>>(argv: &[A], d: &CuckooDefaults) -> Result<Reserve, Frame> {
    let capacity = parse_i64(argv[2].as_ref()).ok_or_else(|| Frame::error(err::BAD_CAPACITY))?;
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
pub fn reserve<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, env: &mut dyn Env, argv: &[A]) -> Frame {
    if argv.len() % 2 == 0 {
        return Frame::error(err::arity("cf.reserve"));
    }
    let d = env.cuckoo_defaults();
    let r = match parse_reserve(argv, &d) {
        Ok(r) => r,
        Err(f) => return f,
    };
    let key = argv[1].as_ref();
    match store.lookup(key) {
        Slot::Cuckoo(_) => return Frame::error(err::ITEM_EXISTS),
        Slot::Bloom(_) | Slot::Other => return wrongtype(),
        Slot::Missing => {}
    }
    match new_filter(r.capacity, r.bucket_size, r.max_iterations, r.expansion, env.memory_budget()) {
        Ok(f) => {
            // Options left out take the configuration's values: propagate the filter itself.
            let header = f.header().to_vec();
            env.propagate(vec![vec![b"CF.LOADCHUNK".to_vec(), key.to_vec(), b"1".to_vec(), header]]);
            store.create_cuckoo(key, f);
            Frame::ok()
        }
        Err(f) => f,
    }
}

/// The growth check of an insert: a new sub-filter may take at most the memory budget, the same
/// bound creation has (the budget is asked for only when the filter must grow).
fn within_budget(env: &mut dyn Env) -> impl FnMut(u64) -> bool + '_ {
    move |bytes| bytes <= env.memory_budget()
}

fn add_impl<S: FilterStore, A: AsRef<[u8]>>(
    store: &mut S,
    env: &mut dyn Env,
    argv: &[A],
    unique: bool,
) -> Frame {
    let d = env.cuckoo_defaults();
    let f = match for_insert(store, env, argv, d.initial_size, false, &d) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let item = argv[2].as_ref();
    let mut allow = within_budget(env);
    let r = if unique {
        f.insert_unique_within(item, &mut allow)
    } else {
        f.insert_within(item, &mut allow).map(|()| true)
    };
    match r {
        Ok(added) => Frame::Boolean(added),
        Err(CuckooInsertError::NoSpace) => Frame::error(err::CF_FULL),
        Err(_) => Frame::error(err::CF_INSUFFICIENT_MEMORY),
    }
}

/// CF.ADD key item (duplicates allowed).
pub fn add<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, env: &mut dyn Env, argv: &[A]) -> Frame {
    add_impl(store, env, argv, false)
}

/// CF.ADDNX key item.
pub fn addnx<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, env: &mut dyn Env, argv: &[A]) -> Frame {
    add_impl(store, env, argv, true)
}

/// A parsed `CF.INSERT` / `CF.INSERTNX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insert {
    capacity: i64,
    nocreate: bool,
    items_at: usize,
}

fn parse_insert<A: AsRef<[u8]>>(argv: &[A], name: &str, d: &CuckooDefaults) -> Result<Insert, Frame> {
    let arity = || Frame::error(err::arity(name));
    let mut r = Insert { capacity: d.initial_size, nocreate: false, items_at: 0 };
    let mut i = 2;
    // Tokens are told apart by their first byte only, as RedisBloom does.
    while i < argv.len() {
        match argv[i].as_ref().first().map(u8::to_ascii_lowercase) {
            Some(b'c') => {
                let value = argv.get(i + 1).ok_or_else(arity)?;
                let cap = parse_i64(value.as_ref()).ok_or_else(|| Frame::error(err::BAD_CAPACITY))?;
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

fn insert_impl<S: FilterStore, A: AsRef<[u8]>>(
    store: &mut S,
    env: &mut dyn Env,
    argv: &[A],
    unique: bool,
) -> Frame {
    let name = if unique { "cf.insertnx" } else { "cf.insert" };
    let d = env.cuckoo_defaults();
    let r = match parse_insert(argv, name, &d) {
        Ok(r) => r,
        Err(f) => return f,
    };
    let resp3 = env.protocol() >= 3;
    let f = match for_insert(store, env, argv, r.capacity, r.nocreate, &d) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let mut allow = within_budget(env);
    let items = &argv[r.items_at..];
    let replies = items.iter().map(|item| {
        let item = item.as_ref();
        if unique {
            // 1 added, 0 already present, -1 no room: integers in both protocols (spec §2.1).
            Frame::Integer(match f.insert_unique_within(item, &mut allow) {
                Ok(true) => 1,
                Ok(false) => 0,
                Err(_) => -1,
            })
        } else {
            let added = f.insert_within(item, &mut allow).is_ok();
            match (resp3, added) {
                (true, b) => Frame::Boolean(b),
                (false, true) => Frame::Integer(1),
                (false, false) => Frame::Integer(-1),
            }
        }
    });
    Frame::Array(replies.collect())
}

/// `CF.INSERT key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...]`.
pub fn insert<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, env: &mut dyn Env, argv: &[A]) -> Frame {
    insert_impl(store, env, argv, false)
}

/// `CF.INSERTNX key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...]`.
pub fn insertnx<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, env: &mut dyn Env, argv: &[A]) -> Frame {
    insert_impl(store, env, argv, true)
}

/// The filter for the commands that treat a missing key and another type alike.
fn filter_or_none<'c, S: FilterStore>(store: &'c mut S, key: &[u8]) -> Option<&'c CuckooFilter> {
    filter(store, key).ok().flatten()
}

/// CF.EXISTS key item: a missing key or another type is "no".
pub fn exists<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, _env: &mut dyn Env, argv: &[A]) -> Frame {
    Frame::Boolean(filter_or_none(store, argv[1].as_ref()).is_some_and(|f| f.contains(argv[2].as_ref())))
}

/// CF.MEXISTS key item [item ...].
pub fn mexists<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, _env: &mut dyn Env, argv: &[A]) -> Frame {
    let items = &argv[2..];
    let mut found = Vec::with_capacity(items.len());
    match filter_or_none(store, argv[1].as_ref()) {
        Some(f) => f.contains_many(items, &mut found),
        None => found.resize(items.len(), false),
    }
    Frame::Array(found.into_iter().map(Frame::Boolean).collect())
}

/// CF.COUNT key item: an integer in both protocols; 0 for a missing key or another type.
pub fn count<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, _env: &mut dyn Env, argv: &[A]) -> Frame {
    Frame::Integer(filter_or_none(store, argv[1].as_ref()).map_or(0, |f| f.count(argv[2].as_ref()) as i64))
}

/// CF.DEL key item: `Not found` for a missing key or another type (never WRONGTYPE).
pub fn del<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, _env: &mut dyn Env, argv: &[A]) -> Frame {
    match existing_mut(store, argv[1].as_ref()) {
        Some(f) => Frame::Boolean(f.delete(argv[2].as_ref())),
        None => Frame::error(err::CF_DEL_NOT_FOUND),
    }
}

/// CF.COMPACT key: no arity is registered, so the count is checked here.
pub fn compact<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, _env: &mut dyn Env, argv: &[A]) -> Frame {
    if argv.len() != 2 {
        return Frame::error(err::arity("cf.compact"));
    }
    match existing_mut(store, argv[1].as_ref()) {
        Some(f) => {
            f.compact(true);
            Frame::ok()
        }
        None => Frame::error(err::CF_COMPACT_NOT_FOUND),
    }
}

/// CF.INFO key.
pub fn info<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, _env: &mut dyn Env, argv: &[A]) -> Frame {
    let i = match filter(store, argv[1].as_ref()) {
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
pub fn scandump<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, _env: &mut dyn Env, argv: &[A]) -> Frame {
    let Some(pos) = parse_i64(argv[2].as_ref()).filter(|&p| p >= 0) else {
        return Frame::error(err::CF_INVALID_POSITION);
    };
    let f = match filter(store, argv[1].as_ref()) {
        Ok(Some(f)) => f,
        Ok(None) => return Frame::error(err::NOT_FOUND),
        Err(reply) => return reply,
    };
    match f.scandump(pos) {
        Some((next, data)) => Frame::Array(vec![Frame::Integer(next), Frame::Bulk(data.into_owned().into())]),
        // The end marker (and the whole dump of an empty filter): `[0, null]` (spec §2.1).
        None => Frame::Array(vec![Frame::Integer(0), Frame::Null]),
    }
}

/// CF.LOADCHUNK key position data.
pub fn loadchunk<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, env: &mut dyn Env, argv: &[A]) -> Frame {
    let Some(pos) = parse_i64(argv[2].as_ref()).filter(|&p| p != 0) else {
        return Frame::error(err::CF_INVALID_POSITION);
    };
    let key = argv[1].as_ref();
    let data = argv[3].as_ref();
    let held = match store.lookup(key) {
        Slot::Missing => None,
        Slot::Cuckoo(_) => Some(true),
        Slot::Bloom(_) | Slot::Other => Some(false),
    };
    if pos == 1 {
        return match held {
            Some(true) => Frame::error(err::ITEM_EXISTS),
            Some(false) => wrongtype(),
            None => {
                let limits = load_limits(env);
                match CuckooFilter::from_header(data, &limits) {
                    Ok(f) => {
                        store.create_cuckoo(key, f);
                        Frame::ok()
                    }
                    Err(CuckooHeaderError::Length) => Frame::error(err::CF_INVALID_HEADER),
                    Err(_) => Frame::error(err::CF_COULD_NOT_CREATE_LOAD),
                }
            }
        };
    }
    match held {
        None => Frame::error(err::NOT_FOUND),
        Some(false) => wrongtype(),
        Some(true) => {
            let f = existing_mut(store, key).expect("checked above under the same lock");
            match f.load_chunk(pos, data) {
                Ok(()) => Frame::ok(),
                // Every chunk failure (CuckooChunkError) is the same reply.
                Err(_) => Frame::error(err::CF_COULD_NOT_LOAD_CHUNK),
            }
        }
    }
}

/// CF.DEBUG key.
pub fn debug<S: FilterStore, A: AsRef<[u8]>>(store: &mut S, _env: &mut dyn Env, argv: &[A]) -> Frame {
    match filter(store, argv[1].as_ref()) {
        Ok(Some(f)) => Frame::Bulk(f.debug_line().into()),
        Ok(None) => Frame::error(err::NOT_FOUND),
        Err(reply) => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Vec<u8>> {
        a.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn reserve_checks_in_redisbloom_order() {
        let d = CuckooDefaults::default();
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
        let d = CuckooDefaults::default();
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
}
