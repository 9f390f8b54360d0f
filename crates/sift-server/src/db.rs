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
//! # Values
//!
//! [`Value`] is the enum of what a key can hold. The BF/CF engineer adds the filter variants
//! (`Bloom(BloomChain)`, `Cuckoo(CuckooFilter)`); every `match` on it below then fails to compile
//! until the new variant's type name, memory usage and COPY behaviour are given.

use sift::compat::redisbloom::{BloomChain, CuckooFilter};
use std::collections::{BTreeSet, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::{Mutex, MutexGuard};

/// Number of shards. A power of two well above the core count keeps contention low.
pub const SHARDS: usize = 64;

/// The current Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// What a key holds.
#[derive(Debug)]
pub enum Value {
    /// A Redis string (SET/GET), kept mainly so tests can create keys of another type.
    String(Bytes),
    /// A RedisBloom scalable Bloom filter (`BF.*`).
    Bloom(Box<BloomChain>),
    /// A RedisBloom cuckoo filter (`CF.*`).
    Cuckoo(Box<CuckooFilter>),
}

impl Value {
    /// The name `TYPE` reports and `SCAN ... TYPE` filters on.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "string",
            Value::Bloom(_) => "MBbloom--",
            Value::Cuckoo(_) => "MBbloomCF",
        }
    }

    /// Bytes of payload the value holds; `MEMORY USAGE` adds the per-key overhead to it. For the
    /// filters this is their INFO `Size` (spec §10).
    pub fn payload_size(&self) -> usize {
        match self {
            Value::String(b) => b.len(),
            Value::Bloom(f) => f.info().size as usize,
            Value::Cuckoo(f) => f.info().size as usize,
        }
    }

    /// A copy for `COPY`, or `None` for module types, which Redis refuses to copy
    /// (`ERR not supported for this module key`, spec §10).
    pub fn copy_value(&self) -> Option<Value> {
        match self {
            Value::String(b) => Some(Value::String(b.clone())),
            Value::Bloom(_) | Value::Cuckoo(_) => None,
        }
    }
}

/// A key's value and optional deadline.
#[derive(Debug)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Absolute Unix time in ms after which the key no longer exists. Private: it must change
    /// together with the shard's deadline index, through [`Locked::set_expiry`].
    expires_at: Option<u64>,
}

impl Entry {
    /// An entry without a deadline.
    pub fn new(value: Value) -> Entry {
        Entry { value, expires_at: None }
    }

    /// An entry with a deadline (Unix ms), e.g. when a snapshot is loaded.
    pub fn with_expiry(value: Value, expires_at: Option<u64>) -> Entry {
        Entry { value, expires_at }
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

/// One shard: its map, its deadline index and its change counter.
#[derive(Debug, Default)]
pub struct Shard {
    map: HashMap<Bytes, Entry>,
    deadlines: BTreeSet<(u64, Bytes)>,
    dirty: u64,
    before_write: Option<std::sync::Arc<dyn BeforeWrite>>,
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

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let (k, e) = self.map.remove_entry(key)?;
        if let Some(t) = e.expires_at {
            self.deadlines.remove(&(t, k));
        }
        Some(e)
    }

    /// Removes `key` if it has expired; returns whether it is (still) present.
    fn expire_if_needed(&mut self, key: &[u8], now: u64) -> bool {
        match self.map.get(key) {
            None => false,
            Some(e) if e.is_expired(now) => {
                self.remove(key);
                false
            }
            Some(_) => true,
        }
    }

    fn insert(&mut self, key: Bytes, entry: Entry) -> Option<Entry> {
        let old = self.remove(&key);
        if let Some(t) = entry.expires_at {
            self.deadlines.insert((t, key.clone()));
        }
        self.map.insert(key, entry);
        old
    }

    fn clear(&mut self) -> usize {
        let n = self.map.len();
        self.map.clear();
        self.deadlines.clear();
        n
    }
}

/// The keyspace of one database.
pub struct Db {
    shards: Box<[Mutex<Shard>]>,
}

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

/// The shard of `key`: stable across runs and platforms (xxh3, seed 0).
pub fn shard_of(key: &[u8]) -> usize {
    // The top bits: the low ones also pick the std HashMap's buckets (through its own hash, so
    // this is only a precaution against correlated placement).
    (xxhash_rust::xxh3::xxh3_64(key) >> 58) as usize % SHARDS
}

impl Db {
    /// An empty keyspace.
    pub fn new() -> Db {
        Db { shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect() }
    }

    /// Locks the shards of `keys` (ascending shard order, each once).
    pub fn lock_keys<'a, 'k>(&'a self, keys: impl IntoIterator<Item = &'k [u8]>) -> Locked<'a> {
        let mut idx: Vec<usize> = keys.into_iter().map(shard_of).collect();
        idx.sort_unstable();
        idx.dedup();
        self.lock_shards(idx)
    }

    /// Locks the given shard indexes, which must be sorted and distinct.
    pub fn lock_shards(&self, idx: Vec<usize>) -> Locked<'_> {
        debug_assert!(idx.windows(2).all(|w| w[0] < w[1]));
        let guards = idx.into_iter().map(|i| (i, self.shards[i].lock())).collect();
        Locked { db: self, guards, now: now_ms(), mutations: 0 }
    }

    /// Locks every shard: an atomic view of the whole keyspace (SAVE, FLUSHALL, EXEC of such).
    pub fn lock_all(&self) -> Locked<'_> {
        self.lock_shards((0..SHARDS).collect())
    }

    /// A view holding no lock, for commands that only visit shards one at a time
    /// ([`Locked::for_each_shard`]) or touch no key.
    pub fn unlocked(&self) -> Locked<'_> {
        Locked { db: self, guards: Vec::new(), now: now_ms(), mutations: 0 }
    }

    /// Removes up to `budget` expired keys from each shard; returns how many were removed.
    /// Each shard is locked on its own and only for its bounded share of work.
    pub fn active_expire(&self, budget: usize) -> usize {
        let now = now_ms();
        let mut removed = 0;
        for shard in self.shards.iter() {
            let mut s = shard.lock();
            for _ in 0..budget {
                let Some((t, key)) = s.deadlines.first().cloned() else { break };
                if t > now {
                    break;
                }
                s.remove(&key);
                removed += 1;
            }
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
    now: u64,
    mutations: u64,
}

impl Locked<'_> {
    /// The Unix time in ms this command runs at.
    pub fn now_ms(&self) -> u64 {
        self.now
    }

    /// How many changes this view made (the dispatcher logs a write command only when > 0).
    pub fn mutations(&self) -> u64 {
        self.mutations
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

    fn touched(&mut self, key: &[u8]) {
        self.mutations += 1;
        let index = shard_of(key);
        let shard = self.shard(key);
        shard.run_before_write(index);
        shard.dirty += 1;
    }

    /// The live entry of `key` (an expired one is removed first).
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        let now = self.now;
        let s = self.shard(key);
        if s.expire_if_needed(key, now) {
            s.map.get(key)
        } else {
            None
        }
    }

    /// The live entry of `key`, to change in place. Counts as a change: call it only to write.
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let now = self.now;
        if !self.shard(key).expire_if_needed(key, now) {
            return None;
        }
        self.touched(key);
        self.shard(key).map.get_mut(key)
    }

    /// Does `key` exist (and is it live)?
    pub fn contains(&mut self, key: &[u8]) -> bool {
        let now = self.now;
        self.shard(key).expire_if_needed(key, now)
    }

    /// Sets `key` to `value` with no deadline (as SET does); returns the old live entry.
    pub fn insert(&mut self, key: Bytes, value: Value) -> Option<Entry> {
        self.insert_entry(key, Entry::new(value))
    }

    /// Sets `key` to `entry`, keeping the entry's deadline (RENAME, loading a snapshot).
    pub fn insert_entry(&mut self, key: Bytes, entry: Entry) -> Option<Entry> {
        let now = self.now;
        self.touched(&key);
        let s = self.shard(&key);
        let live = s.expire_if_needed(&key, now);
        let old = s.insert(key, entry);
        if live {
            old
        } else {
            None
        }
    }

    /// Removes `key`; returns its entry if it was live.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let now = self.now;
        if !self.shard(key).expire_if_needed(key, now) {
            return None;
        }
        self.touched(key);
        self.shard(key).remove(key)
    }

    /// Sets or clears the deadline of a live key; false if the key does not exist.
    pub fn set_expiry(&mut self, key: &[u8], expires_at: Option<u64>) -> bool {
        let now = self.now;
        if !self.shard(key).expire_if_needed(key, now) {
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
                f(i, &mut shard.lock());
            }
        }
    }

    /// Calls `f` on shard `i` alone (SCAN visits one shard per cursor step).
    pub fn with_shard<R>(&mut self, i: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        if let Ok(pos) = self.guards.binary_search_by_key(&i, |(j, _)| *j) {
            f(&mut self.guards[pos].1)
        } else {
            assert!(self.guards.is_empty(), "with_shard with other shards locked could deadlock");
            f(&mut self.db.shards[i].lock())
        }
    }

    /// Removes every key; returns how many there were.
    pub fn clear(&mut self) -> usize {
        let mut n = 0;
        let mut changed = 0;
        self.for_each_shard(|i, s| {
            s.run_before_write(i);
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
    #[should_panic(expected = "key not locked")]
    fn touching_an_undeclared_key_is_a_bug() {
        let db = Db::new();
        let mut l = db.unlocked();
        l.contains(b"x");
    }
}
