//! The RedisBloom Bloom commands (`BF.*`, spec §8), on [`sift::compat::redisbloom::BloomChain`].
//!
//! Each handler checks its arguments in the order RedisBloom does (the first failing check decides
//! the reply), turns them into a typed request, applies it to the store's entry and builds the
//! reply in its RESP3 shape. Where RESP2 is not the mechanical downgrade of that shape (BF.INFO
//! with one field is `*1 [value]` in RESP2 but `%1 {name: value}` in RESP3), the reply is built
//! from [`Env::protocol`]. Error texts come from [`crate::err`].

use std::borrow::Cow;

use sift::compat::redisbloom::rdb::{self, FieldReader, FieldWriter, RdbError};
use sift::compat::redisbloom::{
    options, BloomAddError, BloomChain, BloomChunkError, BloomCreateError, BloomInfo, BF_MAX_EXPANSION,
};

use crate::parse::{eq_ignore_case, parse_f64, parse_i64};
use crate::{
    err, load_limits, owned, wrongtype, BloomDefaults, Chunk, Command, DataType, Env, ErrorRate, Family,
    Flags, Frame, LoadContext, Lookup, Store,
};

/// Bits per entry of a link of error rate `error` (spec §5.3): `|ln error| / ln² 2`.
fn bits_per_entry(error: f64) -> f64 {
    (error.ln() / 0.480453013918201).abs()
}

/// [`BloomChain::new`], but a first link larger than `budget` bytes is refused up front with the
/// out-of-memory reply. The estimate follows the link sizing of spec §5.3.
pub fn new_chain(
    capacity: u64,
    error_rate: f64,
    growth: u32,
    nonscaling: bool,
    budget: u64,
) -> Result<BloomChain, Frame> {
    if let Ok(rate) = BloomChain::check_error_rate(error_rate) {
        let error = if nonscaling || growth == 0 { rate } else { rate * 0.5 };
        // An error rate that halves to 0 is an invalid link, which `new` reports itself.
        if error > 0.0 && capacity as f64 * bits_per_entry(error) / 8.0 > budget as f64 {
            return Err(Frame::error(err::INSUFFICIENT_MEMORY_CREATE));
        }
    }
    BloomChain::new(capacity, error_rate, growth, nonscaling).map_err(create_error)
}

/// The size in bytes of the link that adding a new item to `chain` would append, if it would
/// append one (the newest link is full and the chain scales; spec §5.5).
fn growth_bytes(chain: &BloomChain) -> Option<f64> {
    let last = chain.links().last()?;
    if last.size() < last.entries() || chain.options() & options::NO_SCALING != 0 {
        return None;
    }
    let entries = last.entries() as f64 * chain.growth() as f64;
    Some(entries * bits_per_entry(last.error() * 0.5) / 8.0)
}

/// Adds one item, refusing (as a failed growth, code −1) to append a link larger than the memory
/// budget, the same bound creation has. The budget is asked for only when a link would be added.
fn add_within(chain: &mut BloomChain, env: &mut dyn Env, item: &[u8]) -> Result<bool, BloomAddError> {
    if let Some(bytes) = growth_bytes(chain) {
        if !chain.contains(item) && bytes > env.memory_budget() as f64 {
            return Err(BloomAddError::CannotGrow);
        }
    }
    chain.add(item)
}

/// The chain at `key` for reading: `Ok(None)` when missing, `Err(WRONGTYPE)` for another type.
fn chain<'c>(store: &'c mut dyn Store, key: &[u8]) -> Result<Option<&'c BloomChain>, Frame> {
    match store.get::<BloomChain>(key) {
        Lookup::Missing => Ok(None),
        Lookup::Found(b) => Ok(Some(b)),
        Lookup::WrongType => Err(wrongtype()),
    }
}

/// The chain at `key` for writing, created by `create` when missing (and the creation propagated
/// as a LOADCHUNK of its header before the command, see the crate docs); `Err(WRONGTYPE)` for
/// another type.
fn chain_mut<'c>(
    store: &'c mut dyn Store,
    env: &mut dyn Env,
    argv: &[&[u8]],
    create: impl FnOnce(&mut dyn Env) -> Result<BloomChain, Frame>,
) -> Result<&'c mut BloomChain, Frame> {
    let key = argv[1];
    // Two lookups: the borrow checker cannot see that the first one ended on the Missing arm.
    if !store.exists(key) {
        let c = create(env)?;
        let header = c.header();
        env.propagate(vec![vec![b"BF.LOADCHUNK".to_vec(), key.to_vec(), b"1".to_vec(), header], owned(argv)]);
        return Ok(store.insert(key, c));
    }
    match store.get_mut::<BloomChain>(key) {
        Lookup::Found(b) => Ok(b),
        _ => Err(wrongtype()),
    }
}

/// The reply of a failed creation (BF.RESERVE step 9, and the auto-creating commands).
fn create_error(e: BloomCreateError) -> Frame {
    Frame::error(match e {
        BloomCreateError::OutOfMemory => err::INSUFFICIENT_MEMORY_CREATE,
        BloomCreateError::ErrorRateOutOfRange => err::BF_ERROR_RATE_RANGE,
        BloomCreateError::CapacityOutOfRange => err::BF_CAPACITY_RANGE,
        BloomCreateError::ExpansionOutOfRange => err::BF_EXPANSION_RANGE,
        BloomCreateError::NonScalingExpansion => err::BF_NONSCALING_EXPAND,
        _ => err::BF_COULD_NOT_CREATE,
    })
}

/// One add's reply element: a boolean, or an error element. `true` in the second place means
/// "stop here" (the non-scaling filter is full: BF.MADD / BF.INSERT process no further item).
fn add_reply(r: Result<bool, BloomAddError>) -> (Frame, bool) {
    match r {
        Ok(added) => (Frame::Boolean(added), false),
        Err(BloomAddError::NonScalingFull) => (Frame::error(err::BF_NONSCALING_FULL), true),
        Err(_) => (Frame::error(err::BF_PROBLEM_INSERTING), false),
    }
}

/// Adds `items` in order, as BF.MADD and BF.INSERT reply: one element per item, cut short after
/// `ERR non scaling filter is full`.
///
/// The same results as [`add_within`] item by item: the runs of items that cannot grow the chain
/// go through the library's prefetching batch ([`BloomChain::add_many_until_full`]); each item
/// that finds the newest link full goes through [`add_within`], which checks the new link's size
/// against the memory budget before the chain grows.
fn add_many<A: AsRef<[u8]>>(chain: &mut BloomChain, env: &mut dyn Env, items: &[A]) -> Frame {
    let mut results = Vec::with_capacity(items.len());
    let mut i = 0;
    while i < items.len() {
        i += chain.add_many_until_full(&items[i..], &mut results);
        let Some(item) = items.get(i) else { break };
        let r = add_within(chain, env, item.as_ref());
        results.push(r);
        if r == Err(BloomAddError::NonScalingFull) {
            break;
        }
        i += 1;
    }
    Frame::Array(results.into_iter().map(|r| add_reply(r).0).collect())
}

/// A parsed `BF.RESERVE`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reserve {
    error_rate: f64,
    capacity: u64,
    growth: u32,
    nonscaling: bool,
}

fn parse_reserve<A: AsRef<[u8]>>(argv: &[A], default_expansion: i64) -> Result<Reserve, &'static str> {
    let error_rate = parse_f64(argv[2].as_ref()).ok_or(err::BF_BAD_ERROR_RATE)?;
    BloomChain::check_error_rate(error_rate).map_err(|_| err::BF_ERROR_RATE_RANGE)?;
    let capacity = parse_i64(argv[3].as_ref()).ok_or(err::BF_BAD_CAPACITY)?;
    let capacity = BloomChain::check_capacity(capacity).map_err(|_| err::BF_CAPACITY_RANGE)?;
    // RedisBloom searches every argument, the key included, for both keywords.
    let mut nonscaling =
        default_expansion == 0 || argv[1..].iter().any(|a| eq_ignore_case(a.as_ref(), "NONSCALING"));
    let mut growth = u32::try_from(default_expansion).unwrap_or(0);
    if let Some(pos) = argv[1..].iter().position(|a| eq_ignore_case(a.as_ref(), "EXPANSION")).map(|p| p + 1) {
        let value = argv.get(pos + 1).ok_or(err::BF_NO_EXPANSION)?;
        let value = parse_i64(value.as_ref()).ok_or(err::BF_BAD_EXPANSION)?;
        let (g, ns) = BloomChain::resolve_expansion(value, nonscaling).map_err(|e| match e {
            BloomCreateError::NonScalingExpansion => err::BF_NONSCALING_EXPAND,
            _ => err::BF_EXPANSION_RANGE,
        })?;
        growth = g;
        nonscaling = ns;
    }
    Ok(Reserve { error_rate, capacity, growth, nonscaling })
}

/// `BF.RESERVE key error_rate capacity [EXPANSION expansion] [NONSCALING]`.
pub fn reserve(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() > 7 {
        return Frame::error(err::arity("bf.reserve"));
    }
    let default_expansion = env.defaults().bloom.expansion;
    let r = match parse_reserve(argv, default_expansion) {
        Ok(r) => r,
        Err(e) => return Frame::error(e),
    };
    let key = argv[1];
    match store.get::<BloomChain>(key) {
        Lookup::Found(_) => return Frame::error(err::ITEM_EXISTS),
        Lookup::WrongType => return wrongtype(),
        Lookup::Missing => {}
    }
    match new_chain(r.capacity, r.error_rate, r.growth, r.nonscaling, env.memory_budget()) {
        Ok(c) => {
            // Options left out take the configuration's values: propagate the filter itself.
            env.propagate(vec![vec![b"BF.LOADCHUNK".to_vec(), key.to_vec(), b"1".to_vec(), c.header()]]);
            store.insert(key, c);
            Frame::ok()
        }
        Err(f) => f,
    }
}

/// The auto-create of BF.ADD / BF.MADD (spec §8): `bf-initial-size`, `bf-error-rate`, growth
/// `bf-expansion-factor` (non-scaling when 0). The configuration is read only when the key is
/// missing: on the common path (the filter exists) nothing is asked of [`Env`].
fn create_default(env: &mut dyn Env) -> Result<BloomChain, Frame> {
    let d = env.defaults().bloom;
    let bad = || Frame::error(err::BF_COULD_NOT_CREATE);
    let growth = u32::try_from(d.expansion).map_err(|_| bad())?;
    let capacity = u64::try_from(d.initial_size).map_err(|_| bad())?;
    new_chain(capacity, d.error_rate, growth, growth == 0, env.memory_budget())
}

/// BF.ADD key item.
pub fn add(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match chain_mut(store, env, argv, create_default) {
        Ok(c) => add_reply(add_within(c, env, argv[2])).0,
        Err(f) => f,
    }
}

/// BF.MADD key item [item ...].
pub fn madd(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match chain_mut(store, env, argv, create_default) {
        Ok(c) => add_many(c, env, &argv[2..]),
        Err(f) => f,
    }
}

/// A parsed `BF.INSERT`: creation options and where the items start.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Insert {
    capacity: u64,
    error_rate: f64,
    growth: u32,
    nonscaling: bool,
    nocreate: bool,
    items_at: usize,
}

fn parse_insert<A: AsRef<[u8]>>(argv: &[A], d: BloomDefaults) -> Result<Insert, Frame> {
    let arity = || Frame::error(err::arity("bf.insert"));
    let mut r = Insert {
        capacity: u64::try_from(d.initial_size).unwrap_or(0),
        error_rate: d.error_rate,
        growth: u32::try_from(d.expansion).unwrap_or(0),
        nonscaling: d.expansion == 0,
        nocreate: false,
        items_at: 0,
    };
    let mut i = 2;
    // Tokens are told apart by their first byte (and ERROR/EXPANSION by the second, NOCREATE /
    // NONSCALING by the third), as RedisBloom does; the rest of the token is not compared.
    while i < argv.len() {
        let tok = argv[i].as_ref();
        let lower = |n: usize| tok.get(n).map(u8::to_ascii_lowercase);
        match lower(0) {
            Some(b'i') => {
                r.items_at = i + 1;
                break;
            }
            Some(b'e') => {
                let value = argv.get(i + 1).ok_or_else(arity)?.as_ref();
                if lower(1) == Some(b'r') {
                    let rate = parse_f64(value)
                        .and_then(|v| BloomChain::check_error_rate(v).ok())
                        .ok_or_else(|| Frame::error(err::BF_INSERT_BAD_ERROR_RATE))?;
                    r.error_rate = rate;
                } else {
                    let exp = parse_i64(value)
                        .and_then(|v| u32::try_from(v).ok())
                        .filter(|&v| v <= BF_MAX_EXPANSION)
                        .ok_or_else(|| Frame::error(err::BF_INSERT_BAD_EXPANSION))?;
                    r.growth = exp;
                }
                i += 2;
            }
            Some(b'c') => {
                let value = argv.get(i + 1).ok_or_else(arity)?.as_ref();
                r.capacity = parse_i64(value)
                    .and_then(|v| BloomChain::check_capacity(v).ok())
                    .ok_or_else(|| Frame::error(err::BAD_CAPACITY))?;
                i += 2;
            }
            Some(b'n') => {
                if lower(2) == Some(b'c') {
                    r.nocreate = true;
                } else {
                    r.nonscaling = true;
                }
                i += 1;
            }
            _ => return Err(Frame::error(err::UNKNOWN_ARGUMENT)),
        }
    }
    if r.growth == 0 {
        r.nonscaling = true;
    }
    if r.items_at == 0 || r.items_at >= argv.len() {
        return Err(arity());
    }
    Ok(r)
}

/// `BF.INSERT key [CAPACITY cap] [ERROR rate] [EXPANSION exp] [NOCREATE] [NONSCALING] ITEMS item...`
pub fn insert(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let d = env.defaults().bloom;
    let r = match parse_insert(argv, d) {
        Ok(r) => r,
        Err(f) => return f,
    };
    if r.nocreate && !store.exists(argv[1]) {
        return Frame::error(err::NOT_FOUND);
    }
    let create =
        |env: &mut dyn Env| new_chain(r.capacity, r.error_rate, r.growth, r.nonscaling, env.memory_budget());
    match chain_mut(store, env, argv, create) {
        Ok(c) => add_many(c, env, &argv[r.items_at..]),
        Err(f) => f,
    }
}

/// BF.EXISTS key item: a missing key or another type is simply "no".
pub fn exists(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let found = matches!(chain(store, argv[1]), Ok(Some(c)) if c.contains(argv[2]));
    Frame::Boolean(found)
}

/// BF.MEXISTS key item [item ...]: a missing key or another type answers "no" for every item.
pub fn mexists(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let items = &argv[2..];
    let mut found = Vec::with_capacity(items.len());
    match chain(store, argv[1]) {
        Ok(Some(c)) => c.contains_many(items, &mut found),
        _ => found.resize(items.len(), false),
    }
    Frame::Array(found.into_iter().map(Frame::Boolean).collect())
}

/// The five BF.INFO fields: (request keyword, reply name, value).
fn info_fields(i: &BloomInfo) -> [(&'static str, &'static str, Frame); 5] {
    let int = |v: u64| Frame::Integer(v as i64);
    [
        ("capacity", "Capacity", int(i.capacity)),
        ("size", "Size", int(i.size)),
        ("filters", "Number of filters", int(i.filters)),
        ("items", "Number of items inserted", int(i.items)),
        ("expansion", "Expansion rate", i.expansion.map_or(Frame::Null, |g| Frame::Integer(g as i64))),
    ]
}

/// BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION].
pub fn info(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() > 3 {
        return Frame::error(err::arity("bf.info"));
    }
    let resp3 = env.protocol() >= 3;
    let info = match chain(store, argv[1]) {
        Ok(Some(c)) => c.info(),
        Ok(None) => return Frame::error(err::NOT_FOUND),
        Err(f) => return f,
    };
    let fields = info_fields(&info);
    let Some(wanted) = argv.get(2) else {
        return Frame::Map(fields.into_iter().map(|(_, n, v)| (Frame::Simple(n.into()), v)).collect());
    };
    match fields.into_iter().find(|(k, _, _)| eq_ignore_case(wanted, k)) {
        // RESP2: a one-element array; RESP3: a one-entry map (spec §2.1).
        Some((_, name, value)) if resp3 => Frame::Map(vec![(Frame::Simple(name.into()), value)]),
        Some((_, _, value)) => Frame::Array(vec![value]),
        None => Frame::error(err::BF_INVALID_INFO),
    }
}

/// BF.CARD key: 0 for a missing key.
pub fn card(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match chain(store, argv[1]) {
        Ok(c) => Frame::Integer(c.map_or(0, |c| c.len() as i64)),
        Err(f) => f,
    }
}

/// BF.SCANDUMP key iterator: the key is looked up before the iterator is parsed.
pub fn scandump(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let c = match chain(store, argv[1]) {
        Ok(Some(c)) => c,
        Ok(None) => return Frame::error(err::NOT_FOUND),
        Err(f) => return f,
    };
    let Some(it) = parse_i64(argv[2]) else {
        return Frame::error(err::BF_SCANDUMP_NOT_NUMERIC);
    };
    let chunk = if it < 0 { None } else { c.scandump(it) };
    match chunk {
        Some((next, data)) => Frame::Array(vec![Frame::Integer(next), Frame::Bulk(data.into_owned().into())]),
        // The end marker is an empty bulk string, not a null (spec §2.1).
        None => Frame::Array(vec![Frame::Integer(0), Frame::Bulk(Default::default())]),
    }
}

/// BF.LOADCHUNK key iterator data: the iterator is parsed before the key is looked up.
pub fn loadchunk(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let Some(it) = parse_i64(argv[2]) else {
        return Frame::error(err::BF_LOADCHUNK_NOT_NUMERIC);
    };
    let key = argv[1];
    let data = argv[3];
    match store.get::<BloomChain>(key) {
        Lookup::Missing if it == 1 => {
            let limits = load_limits(env);
            match BloomChain::from_header(data, &limits) {
                Ok(c) => {
                    store.insert(key, c);
                    Frame::ok()
                }
                Err(_) => Frame::error(err::BF_BAD_DATA),
            }
        }
        Lookup::Missing => Frame::error(err::NOT_FOUND),
        Lookup::WrongType => wrongtype(),
        Lookup::Found(_) => {
            let Lookup::Found(c) = store.get_mut::<BloomChain>(key) else {
                unreachable!("checked above under the same lock")
            };
            match c.load_chunk(it, data) {
                Ok(()) => Frame::ok(),
                Err(BloomChunkError::NoLink) => Frame::error(err::BF_NO_LINK),
                Err(BloomChunkError::TooBig) => Frame::error(err::BF_CHUNK_TOO_BIG),
                Err(_) => Frame::error(err::BF_BAD_DATA),
            }
        }
    }
}

/// BF.DEBUG key.
pub fn debug(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match chain(store, argv[1]) {
        Ok(Some(c)) => Frame::Array(c.debug_lines().into_iter().map(|l| Frame::Bulk(l.into())).collect()),
        Ok(None) => Frame::error(err::NOT_FOUND),
        Err(f) => f,
    }
}

// ---------------------------------------------------------------------------------------------
// The family: the data type and the commands.

/// The `bf` family: RedisBloom's scalable Bloom filter (`MBbloom--`) and its commands.
#[derive(Debug)]
pub struct Bloom;

const WRITE: Flags = Flags::WRITE.with(Flags::DENYOOM);
const READ: Flags = Flags::READONLY.with(Flags::FAST);

use crate::command::key1 as command;

impl Family for Bloom {
    const NAME: &'static str = "bf";
    type Type = BloomChain;
    /// Arities of spec §2.3, flags and ACL categories of §2.5, in RedisBloom's order.
    const COMMANDS: &'static [Command] = &[
        command(
            "bf.reserve",
            -4,
            WRITE,
            &["@write", "@fast", "@bloom"],
            reserve,
            "Creates a new Bloom Filter",
        ),
        command("bf.add", 3, WRITE, &["@write", "@bloom"], add, "Adds an item to a Bloom Filter"),
        command(
            "bf.madd",
            -3,
            WRITE,
            &["@write", "@bloom"],
            madd,
            "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
        ),
        command(
            "bf.insert",
            -4,
            WRITE,
            &["@write", "@bloom"],
            insert,
            "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
        ),
        command(
            "bf.exists",
            3,
            READ,
            &["@read", "@bloom"],
            exists,
            "Checks whether an item exists in a Bloom Filter",
        ),
        command(
            "bf.mexists",
            -3,
            READ,
            &["@read", "@bloom"],
            mexists,
            "Checks whether one or more items exist in a Bloom Filter",
        ),
        command(
            "bf.info",
            -2,
            READ,
            &["@read", "@fast", "@bloom"],
            info,
            "Returns information about a Bloom Filter",
        ),
        command(
            "bf.card",
            2,
            READ,
            &["@read", "@fast", "@bloom"],
            card,
            "Returns the cardinality of a Bloom filter",
        ),
        command(
            "bf.scandump",
            3,
            READ,
            &["@read", "@bloom"],
            scandump,
            "Begins an incremental save of the bloom filter",
        ),
        command(
            "bf.loadchunk",
            4,
            WRITE,
            &["@write", "@bloom"],
            loadchunk,
            "Restores a filter previously saved using SCANDUMP",
        ),
        command(
            "bf.debug",
            2,
            READ,
            &["@read", "@bloom"],
            debug,
            "Returns the internal layout of a Bloom filter",
        ),
    ];
}

/// Bits set in `bytes`, eight bytes per step (a byte at a time is several times slower where the
/// build has no `popcnt`: the monitor reads every filter this way).
/// The fraction of a link's `bits` (its positions' modulus) set in its `bitmap`: exact up to
/// [`FILL_SAMPLE_BYTES`](sift::bits::FILL_SAMPLE_BYTES), from an evenly spaced sample of that
/// many bytes beyond ([`sample_runs`](sift::bits::sample_runs)). The monitor and `SF.INFO` read
/// it under the key's lock: a whole gigabyte's popcount held writers of a 1.2 GB filter for
/// about 0.1 s (every few seconds, from the monitor), the sample for about half a millisecond.
fn fill_of(bitmap: &[u8], bits: u64) -> f64 {
    if bits == 0 {
        return 0.0;
    }
    // Positions are below `bits`: the bytes past them stay zero and are not sampled.
    let bitmap = &bitmap[..bitmap.len().min(usize::try_from(bits.div_ceil(8)).unwrap_or(usize::MAX))];
    if bitmap.len() <= sift::bits::FILL_SAMPLE_BYTES {
        return (count_ones(bitmap) as f64 / bits as f64).min(1.0);
    }
    let (mut set, mut bytes) = (0u64, 0usize);
    for r in sift::bits::sample_runs(bitmap.len(), sift::bits::FILL_SAMPLE_RUN, sift::bits::FILL_SAMPLE_BYTES)
    {
        bytes += r.len();
        set += count_ones(&bitmap[r]);
    }
    // Every sampled byte holds 8 positions (the one byte holding the last position aside):
    // the sample's density stands for the whole's.
    (set as f64 / (bytes as f64 * 8.0)).min(1.0)
}

fn count_ones(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let mut n: u64 =
        words.by_ref().map(|w| u64::from(u64::from_le_bytes(w.try_into().unwrap()).count_ones())).sum();
    n += words.remainder().iter().map(|b| u64::from(b.count_ones())).sum::<u64>();
    n
}

/// `MBbloom--`: RedisBloom's type name and RDB encoding (encver 4, spec §12.3); in snapshots,
/// tag 2 and the `SCANDUMP` chunks (header, then each piece with the iterator `SCANDUMP` gives
/// it), so a reload gives byte-identical `SCANDUMP`s.
impl DataType for BloomChain {
    const NAME: &'static str = rdb::BLOOM_TYPE_NAME;
    const ENCVER: u32 = rdb::ENCVER;
    const TAG: u8 = 2;

    /// The INFO `Size` (spec §10).
    fn mem_usage(&self) -> usize {
        self.info().size as usize
    }

    fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)> {
        if cursor == 0 {
            return Some((Chunk { pos: 0, data: Cow::Owned(self.header()) }, 1));
        }
        let (next, data) = self.scandump(i64::try_from(cursor).ok()?)?;
        Some((Chunk { pos: next, data }, next as u64))
    }

    fn restore(header: &[u8], cx: &LoadContext) -> Result<Self, String> {
        BloomChain::from_header(header, &cx.limits).map_err(|e| e.to_string())
    }

    fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String> {
        BloomChain::load_chunk(self, pos, data).map_err(|e| e.to_string())
    }

    fn rdb_save(&self, w: &mut dyn FieldWriter) {
        rdb::save_bloom(self, w);
    }

    fn rdb_load(r: &mut dyn FieldReader, encver: u32, cx: &LoadContext) -> Result<Self, RdbError> {
        rdb::load_bloom(r, encver, &cx.limits)
    }

    /// RedisBloom's sequence (spec §12.6): `BF.LOADCHUNK key 1 <header>`, then each `SCANDUMP`
    /// chunk with the iterator `SCANDUMP` returns with it.
    fn rewrite(&self, key: &[u8], emit: &mut dyn FnMut(&[&[u8]])) {
        emit(&[b"BF.LOADCHUNK", key, b"1", &self.header()]);
        let mut it = 1;
        while let Some((next, data)) = self.scandump(it) {
            emit(&[b"BF.LOADCHUNK", key, next.to_string().as_bytes(), &data]);
            it = next;
        }
    }

    /// Target: the rate the chain was reserved with (its first link's, which a scaling chain
    /// halves so that the links together stay under it, spec §5.3). Estimate: each link
    /// answers a never-added item present with probability (bits set / bits)^hashes; the chain
    /// answers present when any link does. A link larger than
    /// [`FILL_SAMPLE_BYTES`](sift::bits::FILL_SAMPLE_BYTES) is measured on a sample
    /// (`fill_of`).
    fn error_rate(&self) -> Option<ErrorRate> {
        let mut miss = 1.0f64;
        for link in self.links() {
            // Legacy links take positions mod 2^n2 (spec §5.4), the others mod `bits`.
            let modulus = if link.n2() > 0 { 1u64 << link.n2() } else { link.bits() };
            let fill = fill_of(link.bitmap(), modulus);
            miss *= 1.0 - fill.powi(link.hashes() as i32);
        }
        let scaling = self.options() & options::NO_SCALING == 0;
        let target = self.links().first().map(|l| if scaling { l.error() * 2.0 } else { l.error() });
        Some(ErrorRate { target, estimate: 1.0 - miss })
    }

    fn freeze(&self) -> Option<Box<dyn crate::Frozen>> {
        Some(Box::new(BloomChain::freeze(self)))
    }
}

impl crate::Frozen for sift::compat::redisbloom::FrozenChain {
    fn chunk_count(&self) -> u64 {
        sift::compat::redisbloom::FrozenChain::chunk_count(self)
    }

    fn dump_chunk(&self, cursor: u64, out: &mut Vec<u8>) -> Option<(i64, u64)> {
        let next = self.scandump(i64::try_from(cursor).ok()?, out)?;
        // The header's `pos` is 0, a data chunk's the iterator after it (as `dump_chunk`).
        Some((if cursor == 0 { 0 } else { next }, next as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift::compat::redisbloom::BF_MAX_CAPACITY;

    fn args(a: &[&str]) -> Vec<Vec<u8>> {
        a.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    /// Deterministic (fixed items, fixed hash): at capacity the fill gives about the target (the
    /// sizing's point: half the bits set), and an empty filter 0.
    #[test]
    fn count_ones_counts_every_byte() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 999, 1000] {
            let want: u64 = bytes[..len].iter().map(|b| u64::from(b.count_ones())).sum();
            assert_eq!(count_ones(&bytes[..len]), want, "{len} bytes");
        }
    }

    /// A 16 MB link, about a quarter of it sampled (32 Mi bits): the sampled fill's standard
    /// deviation is at most sqrt(f(1−f)/2^25) ≈ 5e-5 around the exact one (f ≈ 0.1 here), so
    /// 5e-4 is ten of them. A link of at most the sample's size is counted exactly.
    #[test]
    fn a_large_link_is_measured_on_a_sample() {
        let mut c = new_chain(14_000_000, 0.01, 2, true, u64::MAX).unwrap();
        for i in 0..2_000_000u32 {
            c.add(&i.to_le_bytes()).unwrap();
        }
        let link = &c.links()[0];
        assert!(link.bitmap().len() > 3 * sift::bits::FILL_SAMPLE_BYTES, "{}", link.bitmap().len());
        let exact = count_ones(link.bitmap()) as f64 / link.bits() as f64;
        let sampled = fill_of(link.bitmap(), link.bits());
        assert!(exact > 0.05, "{exact}");
        assert!((sampled - exact).abs() < 5e-4, "sampled {sampled} vs exact {exact}");
        let small = vec![0b1010_1010u8; 1000];
        assert_eq!(fill_of(&small, 7999), 4000.0 / 7999.0, "exact below the sample's size");
        assert_eq!(fill_of(&small, 4000), 2000.0 / 4000.0, "bytes past the positions are not counted");
    }

    #[test]
    fn error_rate_follows_the_fill() {
        let rate = |c: &BloomChain| DataType::error_rate(c).unwrap();
        let mut c = new_chain(10_000, 0.01, 2, true, u64::MAX).unwrap();
        assert_eq!(rate(&c), ErrorRate { target: Some(0.01), estimate: 0.0 });
        for i in 0..10_000u32 {
            c.add(&i.to_le_bytes()).unwrap();
        }
        let at_capacity = rate(&c);
        assert!((0.007..0.013).contains(&at_capacity.estimate), "{at_capacity:?}");
        let scaling = new_chain(1000, 0.01, 2, false, u64::MAX).unwrap();
        assert_eq!(rate(&scaling).target, Some(0.01), "a scaling chain's target is the reserved rate");
    }

    #[test]
    fn reserve_parsing_follows_current_redisbloom() {
        let p = |a: &[&str]| parse_reserve(&args(a), 2);
        let ok = p(&["BF.RESERVE", "k", "0.5", "100"]).unwrap();
        assert_eq!((ok.capacity, ok.growth, ok.nonscaling), (100, 2, false));
        assert_eq!(p(&["BF.RESERVE", "k", "0x1p-7", "100"]), Err(err::BF_BAD_ERROR_RATE));
        assert_eq!(p(&["BF.RESERVE", "k", "1e400", "100"]), Err(err::BF_ERROR_RATE_RANGE));
        assert_eq!(p(&["BF.RESERVE", "k", "0.01", "1099511627776"]), Err(err::BF_CAPACITY_RANGE));
        assert_eq!(p(&["BF.RESERVE", "expansion", "0.01", "100"]), Err(err::BF_BAD_EXPANSION));
        let ns = p(&["BF.RESERVE", "nonscaling", "0.01", "100"]).unwrap();
        assert!(ns.nonscaling);
        let e0 = p(&["BF.RESERVE", "k", "0.01", "100", "NONSCALING", "EXPANSION", "0"]).unwrap();
        assert_eq!((e0.growth, e0.nonscaling), (0, true));
        // bf-expansion-factor 0: non-scaling by default, an explicit EXPANSION 2 is refused.
        assert_eq!(
            parse_reserve(&args(&["BF.RESERVE", "k", "0.01", "100", "EXPANSION", "2"]), 0),
            Err(err::BF_NONSCALING_EXPAND)
        );
        assert_eq!(BF_MAX_CAPACITY, 1 << 30);
    }

    #[test]
    fn insert_tokens_by_first_byte() {
        let d = BloomDefaults::default();
        let p = |a: &[&str]| parse_insert(&args(a), d);
        let r = p(&["BF.INSERT", "k", "n", "ITEMS", "a"]).unwrap();
        assert!(r.nonscaling && !r.nocreate);
        let r = p(&["BF.INSERT", "k", "noc", "ITEMS", "a"]).unwrap();
        assert!(r.nocreate && !r.nonscaling);
        let r = p(&["BF.INSERT", "k", "EXPANSION", "0", "ITEMS", "a"]).unwrap();
        assert!(r.nonscaling);
        assert_eq!(p(&["BF.INSERT", "k", "", "ITEMS", "a"]), Err(Frame::error(err::UNKNOWN_ARGUMENT)));
        assert_eq!(p(&["BF.INSERT", "k", "ERROR", "inf", "ITEMS", "a"]), Err(Frame::error("Bad error rate")));
        assert_eq!(p(&["BF.INSERT", "k", "CAPACITY", "abc"]), Err(Frame::error("Bad capacity")));
        assert_eq!(
            p(&["BF.INSERT", "k", "CAPACITY"]),
            Err(Frame::error("ERR wrong number of arguments for 'bf.insert' command"))
        );
    }

    struct Budget(u64);

    impl Env for Budget {
        fn protocol(&self) -> u8 {
            2
        }
        fn defaults(&self) -> crate::Defaults {
            crate::Defaults::default()
        }
        fn memory_budget(&mut self) -> u64 {
            self.0
        }
        fn now_ms(&self) -> u64 {
            0
        }
        fn propagate(&mut self, _commands: Vec<Vec<Vec<u8>>>) {}
    }

    /// The batched `add_many` gives the replies and the chain of `add_within` item by item,
    /// also when the budget refuses a growth mid-batch and when a non-scaling chain fills.
    #[test]
    fn batched_add_many_equals_add_within_one_by_one() {
        let items: Vec<Vec<u8>> = (0..400u32).map(|i| format!("x{}", i % 150).into_bytes()).collect();
        for (capacity, growth, nonscaling, budget) in [
            (7, 2, false, 1 << 30),
            (7, 2, false, 40),
            (5, 3, false, 200),
            (9, 2, true, 1 << 30),
            (300, 2, false, 1),
        ] {
            let start = BloomChain::new(capacity, 0.01, growth, nonscaling).unwrap();
            for chunk in [1, 3, 50, 400] {
                let (mut seq, mut bat) = (start.clone(), start.clone());
                let mut env = Budget(budget);
                for batch in items.chunks(chunk) {
                    let mut want = Vec::new();
                    for item in batch {
                        let (reply, stop) = add_reply(add_within(&mut seq, &mut env, item));
                        want.push(reply);
                        if stop {
                            break;
                        }
                    }
                    assert_eq!(add_many(&mut bat, &mut env, batch), Frame::Array(want));
                    assert!(bat == seq, "capacity {capacity}, budget {budget}, chunk {chunk}");
                }
            }
        }
    }

    #[test]
    fn growth_size_follows_link_sizing() {
        let mut c = BloomChain::new(10, 0.01, 2, false).unwrap();
        assert_eq!(growth_bytes(&c), None);
        for i in 0..10 {
            c.add(format!("i{i}").as_bytes()).unwrap();
        }
        let est = growth_bytes(&c).unwrap();
        c.add(b"one more").unwrap();
        let real = c.links()[1].bytes() as f64;
        assert!((est - real).abs() <= 8.0 + real * 0.01, "estimate {est} vs {real}");
    }
}
