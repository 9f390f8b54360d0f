//! The keyspace: [`SHARDS`] independently locked hash maps, a key's shard chosen by a stable
//! hash (xxh3) of its bytes.
//!
//! # Locking
//!
//! There is no global lock. Before a command runs, the dispatcher reads the command's key
//! positions from the command table and locks exactly the shards those keys live in, in
//! ascending shard order (so two commands can never deadlock), and hands the command a
//! [`Locked`] view. A command therefore runs atomically with respect to every other command
//! touching its keys. `EXEC` locks the union of its queued commands' shards the same way, which
//! makes a transaction atomic. Commands over the whole keyspace either lock every shard (SAVE,
//! FLUSHALL: atomic) or visit the shards one at a time (KEYS, SCAN, DBSIZE: never block the
//! whole server); see [`Locked::for_each_shard`].
//!
//! Locks are `parking_lot` mutexes held only by synchronous command code, never across an
//! `.await`.
//!
//! # Expiry
//!
//! An entry's deadline is an absolute Unix time in milliseconds (what a snapshot or log can
//! store). Expired keys are removed lazily when a command touches them, and by
//! [`Db::active_expire`], which a server task calls periodically: each shard keeps its deadlines
//! ordered in a `BTreeSet`, so the sweep pops exactly the expired keys without scanning.
//!
//! # Key order (SCAN)
//!
//! Each shard also indexes its keys by their 64-bit xxh3 hash, the same hash whose top bits
//! pick the shard, so "all keys ordered by hash" is shard after shard, and a position in that
//! order is one `u64`: the SCAN cursor ([`Shard::keys_from`]). A key keeps its hash for life, so
//! a cursor stays valid however many keys are added or removed between calls, and every key
//! present for a whole iteration is returned exactly once.
//!
//! # Memory accounting
//!
//! Every entry is charged [`entry_size`] (what `MEMORY USAGE` reports: the value's payload, for
//! a filter its INFO `Size`, plus the per-key overhead) and [`Db::used_memory`] is the sum over
//! all keys, kept in one atomic counter so the `maxmemory` check is a load, not a walk. A value
//! changed in place ([`Locked::get_mut`]: a filter that grows a link) is re-measured when the
//! command's view is dropped, so the total is exact after every command.
//!
//! # Watched keys (WATCH)
//!
//! Each shard keeps a registry of the keys clients WATCH there ([`Watcher`]: the client, its
//! shared dirty flag). Every change to a key goes through `Locked::touched` under the shard's
//! lock, which marks the key's watchers dirty; removing an expired key (lazily or by
//! [`Db::active_expire`]) and emptying the keyspace ([`Locked::clear`]) do too, with Redis 7.0's
//! rules for keys that had already expired when they were watched. With nobody watching, the
//! cost is one `is_empty` test of an empty map per change, on a shard already locked.
//!
//! # Values
//!
//! [`Value`] is what a key holds: the server's own strings (and bitmaps, which are strings), or a
//! value of a data type registered in `sift_commands` (the RedisBloom filters, and every family
//! added there), behind one box. Everything the keyspace needs of such a value — its type name,
//! its size, whether `COPY` may duplicate it — comes from its type ([`sift_commands::Data`]).

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};
use sift_commands::Data;

/// Number of shards. A power of two well above the core count keeps contention low.
pub const SHARDS: usize = 64;

/// The current Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// What a key holds.
#[derive(Debug)]
pub enum Value {
    /// A Redis string: SET/GET, and the bitmaps of SETBIT/GETBIT/BITCOUNT/BITPOS (the seeds'
    /// client-side Bloom filter), which change it in place when it is not shared (see
    /// `cmd::bitmap`). Charged its length; the spare capacity a growing bitmap keeps (at most
    /// min(length, 1 MB)) is not.
    String(Bytes),
    /// A value of a registered data type (`BF.*`, `CF.*`, ...): one box.
    Data(Box<dyn Data>),
}

impl Value {
    /// The name `TYPE` reports and `SCAN ... TYPE` filters on.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Data(d) => d.type_name(),
        }
    }

    /// Bytes of payload the value holds; `MEMORY USAGE` adds the per-key overhead to it. For the
    /// RedisBloom filters this is their INFO `Size` (spec §10).
    pub fn payload_size(&self) -> usize {
        match self {
            Value::String(b) => b.len(),
            Value::Data(d) => d.mem_usage(),
        }
    }

    /// A copy for `COPY`, or `None` for a type that refuses it (the RedisBloom types, as Redis
    /// refuses module types without a copy callback: `ERR not supported for this module key`,
    /// spec §10).
    pub fn copy_value(&self) -> Option<Value> {
        match self {
            Value::String(b) => Some(Value::String(b.clone())),
            Value::Data(d) => d.copy_data().map(Value::Data),
        }
    }
}

/// Per-key overhead that `MEMORY USAGE` adds to a value's payload: Redis's dict entry and
/// object header (24 bytes) plus the key's sds string rounded up to the allocator's 8-byte
/// class. This gives the spec's "Size + 32" for short keys (§10).
pub fn key_overhead(key: &[u8]) -> usize {
    let sds = if key.len() < 32 { 1 + 1 + 1 } else { 2 + 2 + 1 } + key.len();
    24 + sds.div_ceil(8) * 8
}

/// What a key and its value are charged against `maxmemory`, and what `MEMORY USAGE` reports.
pub fn entry_size(key: &[u8], value: &Value) -> usize {
    value.payload_size() + key_overhead(key)
}

/// A key's value and optional deadline.
#[derive(Debug)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Absolute Unix time in ms after which the key no longer exists. Private: it must change
    /// together with the shard's deadline index, through [`Locked::set_expiry`].
    expires_at: Option<u64>,
    /// What this entry is counted for in [`Db::used_memory`] (set when it enters a shard).
    charged: usize,
}

impl Entry {
    /// An entry without a deadline.
    pub fn new(value: Value) -> Entry {
        Entry { value, expires_at: None, charged: 0 }
    }

    /// An entry with a deadline (Unix ms), e.g. when a snapshot is loaded.
    pub fn with_expiry(value: Value, expires_at: Option<u64>) -> Entry {
        Entry { value, expires_at, charged: 0 }
    }

    /// The deadline in Unix ms, if any.
    pub fn expires_at(&self) -> Option<u64> {
        self.expires_at
    }

    fn is_expired(&self, now: u64) -> bool {
        matches!(self.expires_at, Some(t) if t <= now)
    }
}

/// A hook a background snapshot installs on every shard (copy-on-write at shard granularity,
/// see `persist::disk`): called once, with the shard's state as it is just before its first
/// change after the snapshot began, so the snapshot sees every shard as of that moment while
/// only ever holding one shard's lock at a time. Removing an expired key does not run it: such
/// a key is dropped when the snapshot is loaded anyway.
pub trait BeforeWrite: Send + Sync + std::fmt::Debug {
    /// Copies what the snapshot needs of shard number `index`, whose state is `shard`.
    fn before_write(&self, index: usize, shard: &Shard);
}

/// One client's WATCH of one key, kept in the key's shard.
#[derive(Debug)]
pub struct Watcher {
    /// The watching client's id.
    pub client: u64,
    /// The client's flag, set when any of its watched keys is modified: EXEC then fails.
    pub dirty: Arc<AtomicBool>,
    /// The key existed but had already expired when it was watched (Redis 7.0's `expired`):
    /// its removal is then no change, and it does not make EXEC fail for having expired.
    pub expired: bool,
}

/// An existing watched key is removed (it expired) or emptied away (FLUSHALL): its watchers are
/// dirty, except those that watched it already expired, for whom the key did not exist all
/// along (Redis 7.0's `touchWatchedKey`: their `expired` mark is cleared instead).
fn touch_existing(ws: &mut [Watcher]) {
    for w in ws {
        if w.expired {
            w.expired = false;
        } else {
            w.dirty.store(true, Ordering::Release);
        }
    }
}

/// One shard: its map, its deadline index and its change counter.
#[derive(Debug, Default)]
pub struct Shard {
    /// foldhash, randomly seeded per process: a command does several lookups of its key (live
    /// check, read, write, re-measure), and SipHash took 6% of a pipelined BF.ADD's server CPU
    /// (perf, `scripts/bench_server.sh` BF.ADD -P 64).
    map: HashMap<Bytes, Entry, foldhash::fast::RandomState>,
    deadlines: BTreeSet<(u64, Bytes)>,
    dirty: u64,
    /// Sum of the entries' charges (mirrored into [`Db::used_memory`] by the callers).
    mem: usize,
    /// Every key by [`key_hash`], for SCAN's cursor.
    order: BTreeSet<(u64, Bytes)>,
    before_write: Option<std::sync::Arc<dyn BeforeWrite>>,
    /// WATCHed keys of this shard and their watchers (empty when nobody watches here).
    watched: HashMap<Bytes, Vec<Watcher>>,
    /// The log sequence number of the last record written under this shard's lock: a reply
    /// computed from this shard waits until it is durable (see `persist`).
    written_lsn: u64,
}

impl Shard {
    /// Live entries (not yet expired at `now`), in no particular order.
    pub fn iter(&self, now: u64) -> impl Iterator<Item = (&Bytes, &Entry)> {
        self.map.iter().filter(move |(_, e)| !e.is_expired(now))
    }

    /// Number of keys, including expired ones not yet removed (as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Is the shard empty?
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of keys with a deadline.
    pub fn expires_len(&self) -> usize {
        self.deadlines.len()
    }

    /// Changes made to this shard since start-up.
    pub fn dirty(&self) -> u64 {
        self.dirty
    }

    /// Installs (or, with `None`, removes) the hook run before the shard's next change.
    pub fn set_before_write(&mut self, hook: Option<std::sync::Arc<dyn BeforeWrite>>) {
        self.before_write = hook;
    }

    /// Removes and returns the hook, if one is installed.
    pub fn take_before_write(&mut self) -> Option<std::sync::Arc<dyn BeforeWrite>> {
        self.before_write.take()
    }

    /// Runs and removes the hook, if one is installed: every change goes through this first.
    fn run_before_write(&mut self, index: usize) {
        if let Some(hook) = self.before_write.take() {
            hook.before_write(index, self);
        }
    }

    /// Bytes charged for this shard's entries.
    pub fn memory(&self) -> usize {
        self.mem
    }

    /// Keys at or after position `from` of the hash order (see the module docs), with their
    /// positions, including expired ones not yet removed.
    pub fn keys_from(&self, from: u64) -> impl Iterator<Item = (u64, &Bytes)> {
        self.order.range((from, Bytes::new())..).map(|(h, k)| (*h, k))
    }

    /// The live entry of `key`, if any (for SCAN's TYPE filter).
    pub fn get_live(&self, key: &[u8], now: u64) -> Option<&Entry> {
        self.map.get(key).filter(|e| !e.is_expired(now))
    }

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (k, e) = self.detach(key)?;
        self.order.remove(&(key_hash(&k), k));
        Some(e)
    }

    /// Removes `key` from the map, the deadline index and the memory count, but not from the
    /// order index (the caller puts it back or removes it there).
    fn detach(&mut self, key: &[u8]) -> Option<(Bytes, Entry)> {
        let (k, e) = self.map.remove_entry(key)?;
        if let Some(t) = e.expires_at {
            self.deadlines.remove(&(t, k.clone()));
        }
        self.mem -= e.charged;
        Some((k, e))
    }

    /// Re-measures `key`'s entry after an in-place change.
    fn recharge(&mut self, key: &[u8]) {
        if let Some(e) = self.map.get_mut(key) {
            let now = entry_size(key, &e.value);
            self.mem = self.mem - e.charged + now;
            e.charged = now;
        }
    }

    /// Marks the watchers of `key` dirty: it is being changed.
    #[inline]
    fn signal(&mut self, key: &[u8]) {
        if self.watched.is_empty() {
            return;
        }
        if let Some(ws) = self.watched.get(key) {
            ws.iter().for_each(|w| w.dirty.store(true, Ordering::Release));
        }
    }

    /// `key` is being removed because it expired (Redis deletes it and signals it modified):
    /// its watchers are dirty, except those that watched it already expired, for whom the key
    /// did not exist all along (Redis 7.0's `touchWatchedKey`: the flag is cleared instead).
    fn signal_expired(&mut self, key: &[u8]) {
        if self.watched.is_empty() {
            return;
        }
        if let Some(ws) = self.watched.get_mut(key) {
            touch_existing(ws);
        }
    }

    /// Removes `key` if it has expired; returns whether it is (still) present.
    fn expire_if_needed(&mut self, key: &[u8], now: u64) -> bool {
        match self.map.get(key) {
            None => false,
            Some(e) if e.is_expired(now) => {
                self.signal_expired(key);
                self.remove(key);
                false
            }
            Some(_) => true,
        }
    }

    fn insert(&mut self, key: Bytes, mut entry: Entry) -> Option<Entry> {
        let old = self.detach(&key).map(|(_, e)| e);
        if old.is_none() {
            self.order.insert((key_hash(&key), key.clone()));
        }
        if let Some(t) = entry.expires_at {
            self.deadlines.insert((t, key.clone()));
        }
        entry.charged = entry_size(&key, &entry.value);
        self.mem += entry.charged;
        self.map.insert(key, entry);
        old
    }

    fn clear(&mut self) -> usize {
        // FLUSHALL / FLUSHDB touch the watched keys that exist (Redis 7.0's
        // `touchAllWatchedKeysInDb`): present but already expired when watched is no change.
        if !self.watched.is_empty() {
            let map = &self.map;
            for (_, ws) in self.watched.iter_mut().filter(|(k, _)| map.contains_key(&k[..])) {
                touch_existing(ws);
            }
        }
        let n = self.map.len();
        self.map.clear();
        self.deadlines.clear();
        self.order.clear();
        self.mem = 0;
        n
    }
}

/// The keyspace of one database.
pub struct Db {
    shards: Box<[Mutex<Shard>]>,
    /// Sum of every shard's [`Shard::memory`].
    used: AtomicU64,
    /// Number of (client, key) WATCH registrations over all shards: commands that signal a key
    /// modified without changing it (see [`Locked::signal_modified`]) look only when it is > 0.
    /// Read by every BF/CF command, written only by WATCH and its end: kept off the cache line
    /// of `used`, which writes update.
    watches: CacheLine<AtomicUsize>,
}

/// A value alone on its (64-byte) cache line.
#[repr(align(64))]
struct CacheLine<T>(T);

impl Default for Db {
    fn default() -> Self {
        Db::new()
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("shards", &SHARDS).finish()
    }
}

/// Bits of [`key_hash`] below the shard number.
pub const SHARD_SHIFT: u32 = 64 - SHARDS.trailing_zeros();

/// A key's position in the keyspace order: xxh3 (seed 0), stable across runs and platforms.
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// The shards of `keys`, ascending, each once: the argument of [`Db::lock_shards`].
pub fn shards_of<'k>(keys: impl IntoIterator<Item = &'k [u8]>) -> Vec<usize> {
    let mut idx: Vec<usize> = keys.into_iter().map(shard_of).collect();
    idx.sort_unstable();
    idx.dedup();
    idx
}

/// The shard of `key`: the top bits of [`key_hash`] (the low ones also pick the std HashMap's
/// buckets, through its own hash, so this is only a precaution against correlated placement).
/// So the shards split the hash order into consecutive ranges.
pub fn shard_of(key: &[u8]) -> usize {
    (key_hash(key) >> SHARD_SHIFT) as usize
}

impl Db {
    /// An empty keyspace.
    pub fn new() -> Db {
        Db {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            used: AtomicU64::new(0),
            watches: CacheLine(AtomicUsize::new(0)),
        }
    }

    /// A view holding `guards` (ascending shard indexes), its clock not read yet.
    fn view<'a>(&'a self, guards: Vec<(usize, MutexGuard<'a, Shard>)>) -> Locked<'a> {
        Locked {
            db: self,
            guards,
            now: Cell::new(0),
            mutations: 0,
            changed_in_place: Vec::new(),
            seen_lsn: 0,
        }
    }

    /// Is any key WATCHed by anyone?
    #[inline]
    pub fn watched(&self) -> bool {
        self.watches.0.load(Ordering::Relaxed) > 0
    }

    /// Bytes charged for every key and value (the sum of their `MEMORY USAGE`): what
    /// `maxmemory` is compared with.
    pub fn used_memory(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Applies a shard's memory change (`before` → `after`) to the total.
    fn account(&self, before: usize, after: usize) {
        if after > before {
            self.used.fetch_add((after - before) as u64, Ordering::Relaxed);
        } else if before > after {
            self.used.fetch_sub((before - after) as u64, Ordering::Relaxed);
        }
    }

    /// Locks the shards of `keys` (ascending shard order, each once).
    pub fn lock_keys<'a, 'k>(&'a self, keys: impl IntoIterator<Item = &'k [u8]>) -> Locked<'a> {
        self.lock_shards(shards_of(keys))
    }

    /// Locks the given shard indexes (sorted and distinct) if none is held by someone else;
    /// `None` (holding nothing) otherwise.
    pub fn try_lock_shards(&self, idx: Vec<usize>) -> Option<Locked<'_>> {
        debug_assert!(idx.windows(2).all(|w| w[0] < w[1]));
        let mut guards = Vec::with_capacity(idx.len());
        for i in idx {
            guards.push((i, self.shards[i].try_lock()?));
        }
        Some(self.view(guards))
    }

    /// Locks the given shard indexes, which must be sorted and distinct.
    pub fn lock_shards(&self, idx: Vec<usize>) -> Locked<'_> {
        debug_assert!(idx.windows(2).all(|w| w[0] < w[1]));
        let guards = idx.into_iter().map(|i| (i, self.shards[i].lock())).collect();
        self.view(guards)
    }

    /// Locks every shard: an atomic view of the whole keyspace (SAVE, FLUSHALL, EXEC of such).
    pub fn lock_all(&self) -> Locked<'_> {
        self.lock_shards((0..SHARDS).collect())
    }

    /// A view holding no lock, for commands that only visit shards one at a time
    /// ([`Locked::for_each_shard`]) or touch no key.
    pub fn unlocked(&self) -> Locked<'_> {
        self.view(Vec::new())
    }

    /// Removes up to `budget` expired keys from each shard; returns how many were removed.
    /// Each shard is locked on its own and only for its bounded share of work. A shard locked
    /// by someone else is skipped until the next sweep: the sweeper runs on a runtime thread,
    /// which must not wait behind a long holder of every shard (a script, SAVE) — `SCRIPT KILL`
    /// needs a free thread to be served.
    pub fn active_expire(&self, budget: usize) -> usize {
        let now = now_ms();
        let mut removed = 0;
        for shard in self.shards.iter() {
            let Some(mut s) = shard.try_lock() else { continue };
            let before = s.mem;
            for _ in 0..budget {
                let Some((t, key)) = s.deadlines.first().cloned() else { break };
                if t > now {
                    break;
                }
                s.signal_expired(&key);
                s.remove(&key);
                removed += 1;
            }
            self.account(before, s.mem);
        }
        removed
    }

    /// (keys, keys with a deadline) over all shards, one shard locked at a time.
    pub fn counts(&self) -> (usize, usize) {
        self.shards.iter().fold((0, 0), |(k, e), s| {
            let s = s.lock();
            (k + s.len(), e + s.expires_len())
        })
    }

    /// Total changes since start-up (for `rdb_changes_since_last_save`).
    pub fn dirty(&self) -> u64 {
        self.shards.iter().map(|s| s.lock().dirty).sum()
    }
}

/// A command's view of the keyspace: the shards it locked, and the time the command started
/// (one clock reading per command, so a key cannot expire half-way through it).
pub struct Locked<'a> {
    db: &'a Db,
    guards: Vec<(usize, MutexGuard<'a, Shard>)>,
    /// The command's time, read at its first use (0: not yet). Most commands on keys without a
    /// deadline never need it: the clock read was ~3% of the server's CPU for pipelined BF.ADD
    /// (perf, docs/BENCHMARKS.md "Branch srv9").
    now: Cell<u64>,
    mutations: u64,
    /// Keys handed out by [`Locked::get_mut`]: re-measured on drop.
    changed_in_place: Vec<Bytes>,
    /// The highest [`Locked::stamp_written`] of the shards visited one at a time
    /// ([`Locked::for_each_shard`], [`Locked::with_shard`] without holding them).
    seen_lsn: u64,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.settle();
    }
}

impl Locked<'_> {
    /// The Unix time in ms this command runs at.
    pub fn now_ms(&self) -> u64 {
        match self.now.get() {
            0 => {
                let t = now_ms();
                self.now.set(t);
                t
            }
            t => t,
        }
    }

    /// Forgets the time read so far, for a view reused by the next command of a connection's
    /// batch (`cmd::batch`): each command runs at its own time, as with a view of its own.
    pub fn restart_clock(&mut self) {
        self.now.set(0);
    }

    /// The shards this view holds, ascending.
    pub fn shards(&self) -> impl Iterator<Item = usize> + '_ {
        self.guards.iter().map(|(i, _)| *i)
    }

    /// How many changes this view made (the dispatcher logs a write command only when > 0).
    pub fn mutations(&self) -> u64 {
        self.mutations
    }

    /// Re-measures the entries handed out by [`Locked::get_mut`] since the last call, so that
    /// [`Db::used_memory`] includes their in-place changes. Dropping the view does it too; the
    /// dispatcher calls it after each command, because a script, an EXEC and the log replay run
    /// many commands under one view (the next command's `maxmemory` checks must see the earlier
    /// ones' growth, and the list of keys to re-measure must not grow with the whole load).
    pub fn settle(&mut self) {
        for key in std::mem::take(&mut self.changed_in_place) {
            self.with_accounting(&key, |s| s.recharge(&key));
        }
    }

    /// Marks every shard this view holds as written up to log sequence number `lsn` (called
    /// right after the command's records were appended, with the locks still held).
    pub fn stamp_written(&mut self, lsn: u64) {
        for (_, g) in self.guards.iter_mut() {
            g.written_lsn = g.written_lsn.max(lsn);
        }
    }

    /// The highest log sequence number written under the locks of the shards this view holds
    /// or visited: what a reply computed from them depends on.
    pub fn seen_lsn(&self) -> u64 {
        self.guards.iter().map(|(_, g)| g.written_lsn).fold(self.seen_lsn, u64::max)
    }

    /// Does this view hold every shard?
    pub fn holds_all(&self) -> bool {
        self.guards.len() == SHARDS
    }

    fn shard(&mut self, key: &[u8]) -> &mut Shard {
        let i = shard_of(key);
        let pos = self.guards.binary_search_by_key(&i, |(j, _)| *j).unwrap_or_else(|_| {
            panic!("key not locked: the command table must declare every key a command touches")
        });
        &mut self.guards[pos].1
    }

    fn shard_ref(&self, key: &[u8]) -> &Shard {
        let i = shard_of(key);
        let pos = self.guards.binary_search_by_key(&i, |(j, _)| *j).unwrap_or_else(|_| {
            panic!("key not locked: the command table must declare every key a command touches")
        });
        &self.guards[pos].1
    }

    /// Runs `f` on `key`'s shard and applies its memory change to the total.
    fn with_accounting<R>(&mut self, key: &[u8], f: impl FnOnce(&mut Shard) -> R) -> R {
        let db = self.db;
        let s = self.shard(key);
        let before = s.mem;
        let r = f(s);
        let after = s.mem;
        db.account(before, after);
        r
    }

    fn touched(&mut self, key: &[u8]) {
        self.mutations += 1;
        let index = shard_of(key);
        let shard = self.shard(key);
        shard.run_before_write(index);
        shard.dirty += 1;
        shard.signal(key);
    }

    /// Marks `key`'s watchers dirty without changing it: for commands that Redis reports as
    /// modifying their key even when nothing changed (a module's write command that looked its
    /// key up, see `cmd::family::run`). `key`'s shard must be locked.
    pub fn signal_modified(&mut self, key: &[u8]) {
        self.shard(key).signal(key);
    }

    /// Registers `client` (whose dirty flag is `dirty`) as watching `key`; false if it already
    /// did. Notes whether the key exists but has already expired (Redis 7.0's `expired`).
    pub fn watch(&mut self, key: &Bytes, client: u64, dirty: &Arc<AtomicBool>) -> bool {
        let now = self.now_ms();
        let db = self.db;
        let s = self.shard(key);
        let expired = s.map.get(&key[..]).is_some_and(|e| e.is_expired(now));
        let ws = s.watched.entry(key.clone()).or_default();
        if ws.iter().any(|w| w.client == client) {
            return false;
        }
        ws.push(Watcher { client, dirty: dirty.clone(), expired });
        db.watches.0.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Removes `client`'s WATCH of `key`.
    pub fn unwatch(&mut self, key: &[u8], client: u64) {
        let db = self.db;
        let s = self.shard(key);
        if let Some(ws) = s.watched.get_mut(key) {
            let before = ws.len();
            ws.retain(|w| w.client != client);
            db.watches.0.fetch_sub(before - ws.len(), Ordering::Relaxed);
            if ws.is_empty() {
                s.watched.remove(key);
            }
        }
    }

    /// Has `key`, watched by `client`, expired since (Redis 7.0's `isWatchedKeyExpired`: EXEC
    /// fails)? A key that had already expired when it was watched does not count.
    pub fn watched_key_expired(&mut self, key: &[u8], client: u64) -> bool {
        let now = self.now_ms();
        let s = self.shard(key);
        let expired_when_watched = s
            .watched
            .get(key)
            .and_then(|ws| ws.iter().find(|w| w.client == client))
            .is_none_or(|w| w.expired);
        !expired_when_watched && s.map.get(key).is_some_and(|e| e.is_expired(now))
    }

    /// The live entry of `key` (an expired one is removed first).
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        if self.live(key) {
            self.shard(key).map.get(key)
        } else {
            None
        }
    }

    /// The entry of `key`, even an expired one, without removing it or counting a change: for
    /// hints (`cmd::batch` prefetching a filter's cache lines), never for what a command replies.
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        self.shard(key).map.get(key)
    }

    /// The live entries of `keys` at once (expired ones are removed first), for a command that
    /// reads several keys together. A key may appear twice.
    pub fn get_many<'s>(&'s mut self, keys: &[&[u8]]) -> Vec<Option<&'s Entry>> {
        for key in keys {
            self.live(key);
        }
        let this = &*self;
        keys.iter().map(|key| this.shard_ref(key).map.get(*key)).collect()
    }

    /// Removes `key` if it has expired (with its charge); returns whether it is live.
    fn live(&mut self, key: &[u8]) -> bool {
        // Only a key with a deadline needs the clock.
        match self.shard(key).map.get(key) {
            None => return false,
            Some(e) if e.expires_at.is_none() => return true,
            Some(_) => {}
        }
        let now = self.now_ms();
        self.with_accounting(key, |s| s.expire_if_needed(key, now))
    }

    /// The live entry of `key`, to change in place. Counts as a change: call it only to write.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        if !self.live(key) {
            return None;
        }
        self.touched(key);
        let (k, _) = self.shard(key).map.get_key_value(key)?;
        let k = k.clone();
        if !self.changed_in_place.contains(&k) {
            self.changed_in_place.push(k);
        }
        self.shard(key).map.get_mut(key)
    }

    /// Does `key` exist (and is it live)?
    pub fn contains(&mut self, key: &[u8]) -> bool {
        self.live(key)
    }

    /// Sets `key` to `value` with no deadline (as SET does); returns the old live entry.
    pub fn insert(&mut self, key: Bytes, value: Value) -> Option<Entry> {
        self.insert_entry(key, Entry::new(value))
    }

    /// Sets `key` to `entry`, keeping the entry's deadline (RENAME, loading a snapshot).
    pub fn insert_entry(&mut self, key: Bytes, entry: Entry) -> Option<Entry> {
        let live = self.live(&key);
        self.touched(&key);
        let k = key.clone();
        let old = self.with_accounting(&k, |s| s.insert(key, entry));
        if live {
            old
        } else {
            None
        }
    }

    /// Removes `key`; returns its entry if it was live.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        if !self.live(key) {
            return None;
        }
        self.touched(key);
        self.with_accounting(key, |s| s.remove(key))
    }

    /// Sets or clears the deadline of a live key; false if the key does not exist.
    pub fn set_expiry(&mut self, key: &[u8], expires_at: Option<u64>) -> bool {
        if !self.live(key) {
            return false;
        }
        self.touched(key);
        let s = self.shard(key);
        let (k, e) = s.map.get_key_value(key).expect("checked live above");
        let k = k.clone();
        if let Some(t) = e.expires_at {
            s.deadlines.remove(&(t, k.clone()));
        }
        if let Some(t) = expires_at {
            s.deadlines.insert((t, k));
        }
        s.map.get_mut(key).expect("checked live above").expires_at = expires_at;
        true
    }

    /// Calls `f` on every shard: directly if this view holds them all, else locking each shard
    /// in turn for the duration of its call (this view then must hold none, which the dispatcher
    /// guarantees). Not atomic across shards in the second case.
    pub fn for_each_shard(&mut self, mut f: impl FnMut(usize, &mut Shard)) {
        if self.holds_all() {
            for (i, g) in self.guards.iter_mut() {
                f(*i, g);
            }
        } else {
            assert!(self.guards.is_empty(), "for_each_shard with some shards locked could deadlock");
            for (i, shard) in self.db.shards.iter().enumerate() {
                let mut s = shard.lock();
                self.seen_lsn = self.seen_lsn.max(s.written_lsn);
                f(i, &mut s);
            }
        }
    }

    /// Calls `f` on shard `i` alone (SCAN visits one shard per cursor step).
    pub fn with_shard<R>(&mut self, i: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        if let Ok(pos) = self.guards.binary_search_by_key(&i, |(j, _)| *j) {
            f(&mut self.guards[pos].1)
        } else {
            assert!(self.guards.is_empty(), "with_shard with other shards locked could deadlock");
            let mut s = self.db.shards[i].lock();
            self.seen_lsn = self.seen_lsn.max(s.written_lsn);
            f(&mut s)
        }
    }

    /// Removes every key; returns how many there were.
    pub fn clear(&mut self) -> usize {
        let mut n = 0;
        let mut changed = 0;
        let db = self.db;
        self.for_each_shard(|i, s| {
            s.run_before_write(i);
            db.account(s.mem, 0);
            let k = s.clear();
            if k > 0 {
                s.dirty += 1;
                changed += 1;
            }
            n += k;
        });
        self.mutations += changed;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(Bytes::copy_from_slice(v.as_bytes()))
    }

    #[test]
    fn insert_get_remove_and_expiry_index() {
        let db = Db::new();
        let mut l = db.lock_keys([&b"a"[..], b"b"]);
        assert!(l.insert(Bytes::from_static(b"a"), s("1")).is_none());
        assert!(l.insert(Bytes::from_static(b"a"), s("2")).is_some());
        let now = l.now_ms();
        assert!(l.set_expiry(b"a", Some(now + 100_000)));
        assert!(!l.set_expiry(b"b", Some(now)));
        assert!(l.contains(b"a"));
        assert_eq!(l.mutations(), 3);
        drop(l);
        assert_eq!(db.counts(), (1, 1));
        // A deadline in the past: the key is gone on access and from the index.
        let mut l = db.lock_keys([&b"a"[..]]);
        let past = l.now_ms() - 1;
        l.set_expiry(b"a", Some(past));
        assert!(l.get(b"a").is_none());
        drop(l);
        assert_eq!(db.counts(), (0, 0));
    }

    #[test]
    fn active_expire_removes_only_expired() {
        let db = Db::new();
        let mut l = db.lock_all();
        let now = l.now_ms();
        for i in 0..100u32 {
            let k = Bytes::from(format!("k{i}"));
            l.insert(k.clone(), s("v"));
            l.set_expiry(&k, Some(if i % 2 == 0 { now - 1 } else { now + 100_000 }));
        }
        drop(l);
        assert_eq!(db.active_expire(1000), 50);
        assert_eq!(db.counts(), (50, 50));
    }

    #[test]
    fn memory_is_charged_on_every_change() {
        let db = Db::new();
        let (a, b) = (Bytes::from_static(b"a"), Bytes::from_static(b"b"));
        let size = |k: &[u8], v: &str| entry_size(k, &s(v)) as u64;
        let mut l = db.lock_keys([&a[..], &b[..]]);
        l.insert(a.clone(), s("12345"));
        l.insert(b.clone(), s("x"));
        assert_eq!(db.used_memory(), size(b"a", "12345") + size(b"b", "x"));
        l.insert(a.clone(), s("1"));
        assert_eq!(db.used_memory(), size(b"a", "1") + size(b"b", "x"));
        // Changed in place: re-measured when the view is dropped.
        l.get_mut(b"b").unwrap().value = s("a longer value");
        drop(l);
        assert_eq!(db.used_memory(), size(b"a", "1") + size(b"b", "a longer value"));
        let mut l = db.lock_keys([&a[..], &b[..]]);
        l.remove(b"b");
        assert_eq!(db.used_memory(), size(b"a", "1"));
        // An expired key is uncharged when it is found expired, lazily or by the sweep.
        let now = l.now_ms();
        l.set_expiry(b"a", Some(now - 1));
        assert!(!l.contains(b"a"));
        assert_eq!(db.used_memory(), 0);
        l.insert(a.clone(), s("v"));
        l.set_expiry(b"a", Some(now - 1));
        drop(l);
        assert_eq!(db.active_expire(10), 1);
        assert_eq!(db.used_memory(), 0);
        let mut l = db.lock_all();
        for i in 0..100 {
            l.insert(Bytes::from(format!("k{i}")), s("v"));
        }
        assert!(db.used_memory() > 0);
        l.clear();
        assert_eq!(db.used_memory(), 0);
    }

    #[test]
    fn the_order_index_follows_the_map() {
        let db = Db::new();
        let mut l = db.lock_all();
        for i in 0..500 {
            l.insert(Bytes::from(format!("k{i}")), s("v"));
        }
        l.insert(Bytes::from_static(b"k7"), s("again"));
        l.remove(b"k8");
        let mut all = Vec::new();
        l.for_each_shard(|i, sh| {
            assert_eq!(sh.keys_from(0).count(), sh.len());
            for (h, k) in sh.keys_from(0) {
                assert_eq!(shard_of(k), i);
                assert_eq!(h, key_hash(k));
                all.push(h);
            }
        });
        assert_eq!(all.len(), 499);
        assert!(all.windows(2).all(|w| w[0] < w[1]), "shard after shard, in hash order");
    }

    /// WATCH's registry: what marks a watcher dirty (changes, the removal of a key that expired
    /// while watched, FLUSHALL of an existing key) and what does not (reads, other keys, the
    /// removal of a key that had already expired when watched).
    #[test]
    fn watchers_see_changes_expiry_and_clear() {
        let db = Db::new();
        let (a, b) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let take = |f: &AtomicBool| f.swap(false, Ordering::AcqRel);
        let k = Bytes::from_static(b"k");
        let mut l = db.lock_all();
        assert!(!db.watched());
        assert!(l.watch(&k, 1, &a));
        assert!(!l.watch(&k, 1, &a), "once per client");
        assert!(l.watch(&k, 2, &b));
        assert!(db.watched());
        l.get(b"k");
        l.contains(b"k");
        l.insert(Bytes::from_static(b"other"), s("v"));
        l.remove(b"missing");
        assert!(!take(&a) && !take(&b), "reads and other keys are no change");
        l.insert(k.clone(), s("v"));
        assert!(take(&a) && take(&b));
        assert!(l.get_mut(b"k").is_some());
        assert!(take(&a));
        l.signal_modified(b"k");
        assert!(take(&a));
        // Expires while watched: EXEC's check sees it before anyone removes it; the removal is a
        // change.
        let now = l.now_ms();
        l.set_expiry(b"k", Some(now - 1));
        take(&a);
        assert!(l.watched_key_expired(b"k", 1));
        assert!(!l.contains(b"k"));
        assert!(take(&a));
        // Already expired when watched (client 3): neither its removal nor the check count.
        let c = Arc::new(AtomicBool::new(false));
        l.insert(k.clone(), s("v"));
        l.set_expiry(b"k", Some(now - 1));
        take(&a);
        assert!(l.watch(&k, 3, &c));
        assert!(!l.watched_key_expired(b"k", 3));
        assert!(l.watched_key_expired(b"k", 1));
        assert!(!l.contains(b"k"));
        assert!(!take(&c) && take(&a));
        // ... but a write after the removal does.
        l.insert(k.clone(), s("v"));
        assert!(take(&c));
        // FLUSHALL: a watched key that exists is changed; one that does not exist is not.
        l.clear();
        assert!(take(&a) && take(&c));
        l.clear();
        assert!(!take(&a));
        for client in [1, 2, 3] {
            l.unwatch(b"k", client);
        }
        assert!(!db.watched());
        l.insert(k.clone(), s("v"));
        assert!(!take(&a));
        drop(l);
        // The sweep's removal counts too.
        let mut l = db.lock_all();
        l.watch(&k, 1, &a);
        let now = l.now_ms();
        l.set_expiry(b"k", Some(now - 1));
        take(&a);
        drop(l);
        assert_eq!(db.active_expire(10), 1);
        assert!(take(&a));
    }

    /// A value of a registered data type is one box behind the same 32 bytes as a string: the
    /// per-key cost does not grow with the number of registered types.
    #[test]
    fn a_value_is_a_string_or_one_box() {
        assert_eq!(std::mem::size_of::<Value>(), 32);
        let v =
            Value::Data(Box::new(sift::compat::redisbloom::BloomChain::new(100, 0.01, 2, false).unwrap()));
        assert_eq!(v.type_name(), "MBbloom--");
        assert!(v.copy_value().is_none(), "RedisBloom's types refuse COPY");
    }

    #[test]
    #[should_panic(expected = "key not locked")]
    fn touching_an_undeclared_key_is_a_bug() {
        let db = Db::new();
        let mut l = db.unlocked();
        l.contains(b"x");
    }
}
