//! The RedisBloom cuckoo commands (`CF.*`, spec §8), on
//! [`sift::compat::redisbloom::CuckooFilter`].
//!
//! As in [`crate::bf`]: arguments are checked in RedisBloom's order, replies are built in their
//! RESP3 shape, and where RESP2 differs in more than the mechanical downgrade the protocol
//! decides: CF.INSERT elements are `:1`/`:-1` in RESP2 but `#t`/`#f` in RESP3, while CF.INSERTNX
//! elements are integers in both.

use std::borrow::Cow;

use sift::compat::redisbloom::rdb::{self, CuckooRdbDefaults, FieldReader, FieldWriter, RdbError};
use sift::compat::redisbloom::{
    CuckooCreateError, CuckooFilter, CuckooHeaderError, CuckooInsertError, FrozenCuckoo, MAX_CHUNK,
};

use crate::config::MAX_CAPACITY;
use crate::parse::{eq_ignore_case, parse_i64};
use crate::{
    err, load_limits, owned, wrongtype, Chunk, Command, CuckooDefaults, DataType, Env, ErrorRate, Family,
    Flags, Frame, LoadContext, Lookup, Store,
};

/// The filter at `key` for reading: `Ok(None)` when missing, `Err(WRONGTYPE)` for another type.
fn filter<'c>(store: &'c mut dyn Store, key: &[u8]) -> Result<Option<&'c CuckooFilter>, Frame> {
    match store.get::<CuckooFilter>(key) {
        Lookup::Missing => Ok(None),
        Lookup::Found(f) => Ok(Some(f)),
        Lookup::WrongType => Err(wrongtype()),
    }
}

/// The filter at `key` for writing, when it holds one (the type is checked first, so a miss does
/// not count as a change).
fn existing_mut<'c>(store: &'c mut dyn Store, key: &[u8]) -> Option<&'c mut CuckooFilter> {
    store.get::<CuckooFilter>(key).found()?;
    store.get_mut::<CuckooFilter>(key).found()
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
fn for_insert<'c>(
    store: &'c mut dyn Store,
    env: &mut dyn Env,
    argv: &[&[u8]],
    capacity: i64,
    nocreate: bool,
    d: &CuckooDefaults,
) -> Result<&'c mut CuckooFilter, Frame> {
    let key = argv[1];
    let f = match store.get::<CuckooFilter>(key) {
        Lookup::Found(_) => existing_mut(store, key).expect("checked above under the same lock"),
        Lookup::Missing if nocreate => return Err(Frame::error(err::NOT_FOUND)),
        Lookup::Missing => {
            let f = create_configured(capacity, d, env.memory_budget())?;
            let header = f.header().to_vec();
            env.propagate(vec![
                vec![b"CF.LOADCHUNK".to_vec(), key.to_vec(), b"1".to_vec(), header],
                owned(argv),
            ]);
            store.insert(key, f)
        }
        Lookup::WrongType => return Err(wrongtype()),
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
pub fn reserve(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() % 2 == 0 {
        return Frame::error(err::arity("cf.reserve"));
    }
    let d = env.defaults().cuckoo;
    let r = match parse_reserve(argv, &d) {
        Ok(r) => r,
        Err(f) => return f,
    };
    let key = argv[1];
    match store.get::<CuckooFilter>(key) {
        Lookup::Found(_) => return Frame::error(err::ITEM_EXISTS),
        Lookup::WrongType => return wrongtype(),
        Lookup::Missing => {}
    }
    match new_filter(r.capacity, r.bucket_size, r.max_iterations, r.expansion, env.memory_budget()) {
        Ok(f) => {
            // Options left out take the configuration's values: propagate the filter itself.
            let header = f.header().to_vec();
            env.propagate(vec![vec![b"CF.LOADCHUNK".to_vec(), key.to_vec(), b"1".to_vec(), header]]);
            store.insert(key, f);
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

fn add_impl(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]], unique: bool) -> Frame {
    let d = env.defaults().cuckoo;
    let f = match for_insert(store, env, argv, d.initial_size, false, &d) {
        Ok(f) => f,
        Err(reply) => return reply,
    };
    let item = argv[2];
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
pub fn add(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    add_impl(store, env, argv, false)
}

/// CF.ADDNX key item.
pub fn addnx(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
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

fn insert_impl(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]], unique: bool) -> Frame {
    let name = if unique { "cf.insertnx" } else { "cf.insert" };
    let d = env.defaults().cuckoo;
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
pub fn insert(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    insert_impl(store, env, argv, false)
}

/// `CF.INSERTNX key [CAPACITY capacity] [NOCREATE] ITEMS item [item ...]`.
pub fn insertnx(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    insert_impl(store, env, argv, true)
}

/// The filter for the commands that treat a missing key and another type alike.
fn filter_or_none<'c>(store: &'c mut dyn Store, key: &[u8]) -> Option<&'c CuckooFilter> {
    filter(store, key).ok().flatten()
}

/// CF.EXISTS key item: a missing key or another type is "no".
pub fn exists(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    Frame::Boolean(filter_or_none(store, argv[1]).is_some_and(|f| f.contains(argv[2])))
}

/// CF.MEXISTS key item [item ...].
pub fn mexists(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let items = &argv[2..];
    let mut found = Vec::with_capacity(items.len());
    match filter_or_none(store, argv[1]) {
        Some(f) => f.contains_many(items, &mut found),
        None => found.resize(items.len(), false),
    }
    Frame::Array(found.into_iter().map(Frame::Boolean).collect())
}

/// CF.COUNT key item: an integer in both protocols; 0 for a missing key or another type.
pub fn count(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    Frame::Integer(filter_or_none(store, argv[1]).map_or(0, |f| f.count(argv[2]) as i64))
}

/// CF.DEL key item: `Not found` for a missing key or another type (never WRONGTYPE).
pub fn del(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match existing_mut(store, argv[1]) {
        Some(f) => Frame::Boolean(f.delete(argv[2])),
        None => Frame::error(err::CF_DEL_NOT_FOUND),
    }
}

/// CF.COMPACT key: no arity is registered, so the count is checked here.
pub fn compact(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() != 2 {
        return Frame::error(err::arity("cf.compact"));
    }
    match existing_mut(store, argv[1]) {
        Some(f) => {
            f.compact(true);
            Frame::ok()
        }
        None => Frame::error(err::CF_COMPACT_NOT_FOUND),
    }
}

/// CF.INFO key.
pub fn info(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let i = match filter(store, argv[1]) {
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
pub fn scandump(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let Some(pos) = parse_i64(argv[2]).filter(|&p| p >= 0) else {
        return Frame::error(err::CF_INVALID_POSITION);
    };
    let f = match filter(store, argv[1]) {
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
pub fn loadchunk(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let Some(pos) = parse_i64(argv[2]).filter(|&p| p != 0) else {
        return Frame::error(err::CF_INVALID_POSITION);
    };
    let key = argv[1];
    let data = argv[3];
    let held = match store.get::<CuckooFilter>(key) {
        Lookup::Missing => None,
        Lookup::Found(_) => Some(true),
        Lookup::WrongType => Some(false),
    };
    if pos == 1 {
        return match held {
            Some(true) => Frame::error(err::ITEM_EXISTS),
            Some(false) => wrongtype(),
            None => {
                let limits = load_limits(env);
                match CuckooFilter::from_header(data, &limits) {
                    Ok(f) => {
                        store.insert(key, f);
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
pub fn debug(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match filter(store, argv[1]) {
        Ok(Some(f)) => Frame::Bulk(f.debug_line().into()),
        Ok(None) => Frame::error(err::NOT_FOUND),
        Err(reply) => reply,
    }
}

// ---------------------------------------------------------------------------------------------
// The family: the data type and the commands.

/// The `cf` family: RedisBloom's cuckoo filter (`MBbloomCF`) and its commands.
#[derive(Debug)]
pub struct Cuckoo;

const WRITE: Flags = Flags::WRITE.with(Flags::DENYOOM);
const READ: Flags = Flags::READONLY.with(Flags::FAST);

use crate::command::key1 as command;

impl Family for Cuckoo {
    const NAME: &'static str = "cf";
    type Type = CuckooFilter;
    /// Arities of spec §2.3, flags and ACL categories of §2.5, in RedisBloom's order.
    const COMMANDS: &'static [Command] = &[
        command("cf.reserve", -3, WRITE, &["@write", "@fast", "@cuckoo"], reserve, "Creates a new Cuckoo Filter"),
        command("cf.add", 3, WRITE, &["@write", "@cuckoo"], add, "Adds an item to a Cuckoo Filter"),
        command("cf.addnx", 3, WRITE, &["@write", "@cuckoo"], addnx, "Adds an item to a Cuckoo Filter if the item did not exist previously."),
        command("cf.insert", -4, WRITE, &["@write", "@cuckoo"], insert, "Adds one or more items to a Cuckoo Filter. A filter will be created if it does not exist"),
        command("cf.insertnx", -4, WRITE, &["@write", "@cuckoo"], insertnx, "Adds one or more items to a Cuckoo Filter if the items did not exist previously. A filter will be created if it does not exist"),
        command("cf.exists", 3, READ, &["@read", "@cuckoo"], exists, "Checks whether one or more items exist in a Cuckoo Filter"),
        command("cf.mexists", -3, READ, &["@read", "@cuckoo"], mexists, "Checks whether one or more items exist in a Cuckoo Filter"),
        command("cf.count", 3, READ, &["@read", "@cuckoo"], count, "Return the number of times an item might be in a Cuckoo Filter"),
        command("cf.del", 3, Flags::WRITE.with(Flags::FAST), &["@write", "@cuckoo"], del, "Deletes an item from a Cuckoo Filter"),
        // RedisBloom registers no arity (COMMAND reports -1) and the command read-only; it moves
        // data, so it propagates its changes. The handler checks argc == 2.
        command("cf.compact", -1, READ.with(Flags::PROPAGATES), &["@read", "@cuckoo"], compact, "Compacts a Cuckoo Filter"),
        command("cf.info", 2, READ, &["@read", "@fast", "@cuckoo"], info, "Returns information about a Cuckoo Filter"),
        command("cf.scandump", 3, READ, &["@read", "@cuckoo"], scandump, "Begins an incremental save of the bloom filter"),
        command("cf.loadchunk", 4, WRITE, &["@write", "@cuckoo"], loadchunk, "Restores a filter previously saved using SCANDUMP"),
        command("cf.debug", 2, READ, &["@read", "@cuckoo"], debug, "Returns the internal layout of a Cuckoo filter"),
    ];
}

/// `MBbloomCF`: RedisBloom's type name and RDB encoding (encver 4, spec §12.4); in snapshots,
/// tag 3 and the chunks of `CF.SCANDUMP` (header, then each sub-filter in pieces of at most
/// 16 MiB with the position after it), also for an empty filter, which `CF.SCANDUMP` does not
/// dump at all.
impl DataType for CuckooFilter {
    const NAME: &'static str = rdb::CUCKOO_TYPE_NAME;
    const ENCVER: u32 = rdb::ENCVER;
    const TAG: u8 = 3;

    /// The INFO `Size` (spec §10).
    fn mem_usage(&self) -> usize {
        self.info().size as usize
    }

    fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)> {
        if cursor == 0 {
            return Some((Chunk { pos: 0, data: Cow::Owned(self.header().to_vec()) }, 1));
        }
        // Byte `cursor - 1` of the sub-filters' slots, one after the other.
        let mut at = cursor - 1;
        for f in self.filters() {
            let slots = f.slots();
            if at < slots.len() as u64 {
                let piece = &slots[at as usize..slots.len().min(at as usize + MAX_CHUNK)];
                let next = cursor + piece.len() as u64;
                return Some((Chunk { pos: i64::try_from(next).ok()?, data: Cow::Borrowed(piece) }, next));
            }
            at -= slots.len() as u64;
        }
        None
    }

    fn restore(header: &[u8], cx: &LoadContext) -> Result<Self, String> {
        CuckooFilter::from_header(header, &cx.limits).map_err(|e| e.to_string())
    }

    fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String> {
        CuckooFilter::load_chunk(self, pos, data).map_err(|e| e.to_string())
    }

    fn rdb_save(&self, w: &mut dyn FieldWriter) {
        rdb::save_cuckoo(self, w);
    }

    /// Encvers 0..3 do not store the bucket size, kick-out limit and expansion: current
    /// RedisBloom takes the configured values (spec §12.4).
    fn rdb_load(r: &mut dyn FieldReader, encver: u32, cx: &LoadContext) -> Result<Self, RdbError> {
        let c = cx.defaults.cuckoo;
        let defaults = CuckooRdbDefaults {
            bucket_size: u16::try_from(c.bucket_size).unwrap_or(2),
            max_iterations: u16::try_from(c.max_iterations).unwrap_or(20),
            expansion: u16::try_from(c.expansion).unwrap_or(1),
        };
        rdb::load_cuckoo(r, encver, defaults, &cx.limits)
    }

    /// RedisBloom's sequence (spec §12.6): `CF.LOADCHUNK key 1 <header>`, then every sub-filter
    /// with `CF.SCANDUMP`'s positions and pieces, also when the filter is empty (whose
    /// `CF.SCANDUMP` is empty).
    fn rewrite(&self, key: &[u8], emit: &mut dyn FnMut(&[&[u8]])) {
        emit(&[b"CF.LOADCHUNK", key, b"1", &self.header()]);
        let mut pos = 1i64;
        for s in self.filters() {
            for piece in s.slots().chunks(MAX_CHUNK) {
                pos += piece.len() as i64;
                emit(&[b"CF.LOADCHUNK", key, pos.to_string().as_bytes(), piece]);
            }
        }
    }

    /// No target (a cuckoo filter is sized by capacity and bucket size). Estimate: a lookup
    /// compares the item's 8-bit fingerprint (1..=255) with every used slot of its two buckets in
    /// each sub-filter; with `u` of a sub-filter's slots used, it matches a never-added item's
    /// fingerprint with probability 1 - (1 - 1/255)^(2 · bucket size · u). A sub-filter larger
    /// than [`FILL_SAMPLE_BYTES`](sift::bits::FILL_SAMPLE_BYTES) is measured on a sample
    /// (`used_share`).
    fn error_rate(&self) -> Option<ErrorRate> {
        let per_lookup = 2.0 * f64::from(self.bucket_size());
        let mut miss = 1.0f64;
        for f in self.filters() {
            let slots = f.slots();
            if slots.is_empty() {
                continue;
            }
            miss *= (1.0 - 1.0 / 255.0f64).powf(per_lookup * used_share(slots));
        }
        Some(ErrorRate { target: None, estimate: 1.0 - miss })
    }

    /// A filter with a large sub-filter is read by the snapshot later, piece by piece, its
    /// writers copying aside only the pieces they change first ([`CuckooFilter::freeze`]); a
    /// small one is dumped at once.
    fn freeze(&self) -> Option<Box<dyn crate::Frozen>> {
        CuckooFilter::freeze(self).map(|f| Box::new(f) as Box<dyn crate::Frozen>)
    }
}

/// The share of `slots` in use: exact up to [`FILL_SAMPLE_BYTES`](sift::bits::FILL_SAMPLE_BYTES),
/// from an evenly spaced sample of that many slots beyond ([`sample_runs`](sift::bits::sample_runs)):
/// the monitor reads it under the key's lock, and counting a gigabyte of slots held the writers
/// of the key for a tenth of a second or more. Fingerprints go to buckets drawn uniformly by
/// their hash, so every run of the sample has the whole's share in expectation.
fn used_share(slots: &[u8]) -> f64 {
    let (mut used, mut seen) = (0usize, 0usize);
    for r in sift::bits::sample_runs(slots.len(), sift::bits::FILL_SAMPLE_RUN, sift::bits::FILL_SAMPLE_BYTES)
    {
        seen += r.len();
        used += slots[r].iter().filter(|&&s| s != 0).count();
    }
    if seen == 0 {
        0.0
    } else {
        used as f64 / seen as f64
    }
}

impl crate::Frozen for FrozenCuckoo {
    fn chunk_count(&self) -> u64 {
        FrozenCuckoo::chunk_count(self)
    }

    fn dump_chunk(&self, cursor: u64, out: &mut Vec<u8>) -> Option<(i64, u64)> {
        let next = FrozenCuckoo::dump_chunk(self, cursor, out)?;
        // The header's `pos` is 0, a data chunk's the cursor after it (as `dump_chunk`).
        Some((if cursor == 0 { 0 } else { i64::try_from(next).ok()? }, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic: empty gives 0; a filter with a known share of used slots gives the formula's
    /// value for that share, and more items a higher estimate.
    #[test]
    fn error_rate_follows_the_load() {
        let mut f = new_filter(4096, 2, 20, 1, u64::MAX).unwrap();
        assert_eq!(DataType::error_rate(&f).unwrap(), ErrorRate { target: None, estimate: 0.0 });
        for i in 0..2048u32 {
            f.insert(&i.to_le_bytes()).unwrap();
        }
        let used: usize = f.filters().iter().map(|s| s.slots().iter().filter(|&&b| b != 0).count()).sum();
        let total: usize = f.filters().iter().map(|s| s.slots().len()).sum();
        let want = 1.0 - (1.0 - 1.0 / 255.0f64).powf(4.0 * used as f64 / total as f64);
        let half = DataType::error_rate(&f).unwrap().estimate;
        assert!((half - want).abs() < 1e-12 && (0.007..0.009).contains(&half), "{half} vs {want}");
        for i in 2048..4000u32 {
            f.insert(&i.to_le_bytes()).unwrap();
        }
        assert!(DataType::error_rate(&f).unwrap().estimate > half);
    }

    /// Pseudo-random slots, about `used_per_256 / 256` of them non-zero (xorshift, fixed seed).
    fn random_slots(len: usize, used_per_256: u64, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 256 < used_per_256 {
                    1 + (x >> 8) as u8 % 255
                } else {
                    0
                }
            })
            .collect()
    }

    /// A frozen filter gives the chunks a snapshot of the live filter stores, byte for byte and
    /// with the same positions: the header, a 20 MiB sub-filter in a 16 MiB and a 4 MiB chunk,
    /// a small sub-filter whole, and a 4 MiB sub-filter, one after the other. Then the filter
    /// changes (inserts, a delete, a LOADCHUNK over the boundary of two chunks): the frozen
    /// chunks stay those of the moment of the freeze.
    #[test]
    fn a_frozen_filter_gives_the_snapshot_chunks() {
        let parts = vec![
            (20 << 20, random_slots(20 << 20, 64, 1)),
            (1024, random_slots(1024, 64, 2)),
            (4 << 20, random_slots(4 << 20, 64, 3)),
        ];
        let mut f = CuckooFilter::from_parts(20 << 20, 1000, 3, 1, 20, 0, parts).unwrap();
        let live: Vec<(i64, Vec<u8>)> =
            (&f as &dyn crate::Data).chunks().map(|c| (c.pos, c.data.into_owned())).collect();
        assert_eq!(
            live.iter().map(|(_, d)| d.len()).collect::<Vec<_>>(),
            [38, 16 << 20, 4 << 20, 1024, 4 << 20]
        );
        let Some(frozen) = crate::Data::freeze(&f) else {
            if cfg!(target_os = "linux") {
                panic!("large sub-filters are frozen on Linux");
            }
            return;
        };
        for i in 0..20_000u32 {
            let _ = f.insert(&i.to_le_bytes());
        }
        assert!(f.delete(&7u32.to_le_bytes()));
        f.load_chunk(1 + (16 << 20) + 100, &[9; 200]).unwrap();
        let changed: Vec<(i64, Vec<u8>)> =
            (&f as &dyn crate::Data).chunks().map(|c| (c.pos, c.data.into_owned())).collect();
        assert_ne!(changed, live);
        assert_eq!(frozen.chunk_count(), live.len() as u64);
        let got = crate::registry::frozen_chunks(&*frozen);
        assert!(got == live, "the frozen chunks are the live chunks at the freeze");
        // A small filter is not frozen: the snapshot encodes it at once.
        let small = CuckooFilter::new(1000, 2, 20, 1).unwrap();
        assert!(crate::Data::freeze(&small).is_none());
    }

    /// A 16 MiB sub-filter, a quarter of it sampled (4 Mi slots): with a used share p ≈ 0.25 the
    /// sample's share has a standard deviation of at most sqrt(p(1−p)/2^22) ≈ 2.1e-4 around the
    /// whole's, so 2.5e-3 is more than ten of them. Up to the sample's size the count is exact.
    #[test]
    fn a_large_sub_filter_is_measured_on_a_sample() {
        let slots = random_slots(16 << 20, 64, 9);
        let exact = slots.iter().filter(|&&s| s != 0).count() as f64 / slots.len() as f64;
        assert!((0.24..0.26).contains(&exact), "{exact}");
        let sampled = used_share(&slots);
        assert!((sampled - exact).abs() < 2.5e-3, "sampled {sampled} vs exact {exact}");
        let small = &slots[..sift::bits::FILL_SAMPLE_BYTES];
        let exact_small = small.iter().filter(|&&s| s != 0).count() as f64 / small.len() as f64;
        assert_eq!(used_share(small), exact_small);
        assert_eq!(used_share(&[]), 0.0);
    }

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
