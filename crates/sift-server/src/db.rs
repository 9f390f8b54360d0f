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
//! order is one `u64`: the SCAN cursor ([`Shard::keys_from`]). The index holds only the hashes;
//! the keys at a position are found through the shard's table, which is keyed by the same hash. A key keeps its hash for life, so
//! a cursor stays valid however many keys are added or removed between calls, and every key
//! present for a whole iteration is returned exactly once.
//!
//! # Memory accounting
//!
//! Every entry is charged [`entry_size`] (what `MEMORY USAGE` reports: the value's payload, for
//! a filter its INFO `Size`, plus the per-key overhead) and [`Db::used_memory`] is the sum over
//! all keys, kept in one atomic counter so the `maxmemory` check is a load, not a walk. A value
//! changed in place ([`Locked::get_mut`]: a filter that grows a link) is re-measured when the
//! command's view is dropped, so the total is exact after every command. An entry does not
//! store its charge (it is computed again when the entry leaves): the view remembers what the
//! keys it handed out for writing were charged, and settles them before any entry is removed or
//! replaced.
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

/// No deadline, in [`Entry`]'s deadline field: later than any deadline a command can set
/// (those are at most `i64::MAX` ms), so "expired at `now`" needs no separate test.
const NO_DEADLINE: u64 = u64::MAX;

/// A key's value and optional deadline.
#[derive(Debug)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// Absolute Unix time in ms after which the key no longer exists, or [`NO_DEADLINE`] (an
    /// `Option<u64>` would take 16 bytes: every key pays for this field). Private: it must change
    /// together with the shard's deadline index, through [`Locked::set_expiry`].
    deadline: u64,
}

impl Entry {
    /// An entry without a deadline.
    pub fn new(value: Value) -> Entry {
        Entry { value, deadline: NO_DEADLINE }
    }

    /// An entry with a deadline (Unix ms), e.g. when a snapshot is loaded.
    pub fn with_expiry(value: Value, expires_at: Option<u64>) -> Entry {
        Entry { value, deadline: expires_at.unwrap_or(NO_DEADLINE) }
    }

    /// The deadline in Unix ms, if any.
    pub fn expires_at(&self) -> Option<u64> {
        (self.deadline != NO_DEADLINE).then_some(self.deadline)
    }

    #[inline]
    fn is_expired(&self, now: u64) -> bool {
        self.deadline <= now
    }
}

/// Key bytes up to this length are stored inside the key's node, longer ones in an allocation
/// of their own: most keys are short, and an allocation costs its header and rounding on top
/// of the bytes.
const KEY_INLINE: usize = 15;

/// The length of an inline key: an enum rather than a `u8`, so that its unused values give
/// [`Key`] its discriminant and the whole key stays 16 bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[repr(u8)]
#[rustfmt::skip]
enum InlineLen { L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15 }

impl InlineLen {
    const ALL: [InlineLen; KEY_INLINE + 1] = {
        use InlineLen::*;
        [L0, L1, L2, L3, L4, L5, L6, L7, L8, L9, L10, L11, L12, L13, L14, L15]
    };
}

/// A key as the keyspace stores it (16 bytes).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    /// Length and bytes (zero after the length, so equal keys are equal values).
    Inline(InlineLen, [u8; KEY_INLINE]),
    /// A longer key, behind a thin pointer.
    Heap(Box<Box<[u8]>>),
}

const _: () = assert!(std::mem::size_of::<Key>() == 16);

impl Key {
    fn new(key: &[u8]) -> Key {
        if key.len() <= KEY_INLINE {
            let mut buf = [0u8; KEY_INLINE];
            buf[..key.len()].copy_from_slice(key);
            Key::Inline(InlineLen::ALL[key.len()], buf)
        } else {
            Key::Heap(Box::new(key.into()))
        }
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline(n, buf) => &buf[..*n as usize],
            Key::Heap(b) => b,
        }
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// One key and its entry: what the shard's table points to (one allocation per key; the
/// table itself holds a pointer per slot, so its unused slots cost 8 bytes, not a whole entry).
/// 56 bytes, which the allocator serves from 64-byte blocks.
#[derive(Debug)]
struct Node {
    key: Key,
    entry: Entry,
}

const _: () = assert!(std::mem::size_of::<Node>() == 56);

impl Node {
    /// What this entry is charged (see [`entry_size`]).
    fn charge(&self) -> usize {
        entry_size(self.key.as_bytes(), &self.entry.value)
    }
}

/// A hook a background snapshot installs on every shard (copy-on-write at shard granularity,
/// see `persist::disk`): called once, with the shard's state as it is just before its first
/// change after the snapshot began, so the snapshot sees every shard as of that moment while
/// only ever holding one shard's lock at a time. Removing an expired key does not run it: such
/// a key is dropped when the snapshot is loaded anyway.
pub trait BeforeWrite: Send + Sync + std::fmt::Debug {
    /// Copies what the snapshot needs of shard number `index`, whose state is `shard` (which
    /// it prepares to be saved first, see [`Shard::prepare_for_save`]).
    fn before_write(&self, index: usize, shard: &mut Shard);
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

/// Hashes per leaf of [`Order`]: 2 KiB, so that inserting moves at most that much.
const ORDER_LEAF: usize = 256;

/// A set of `u64`s (a shard's key hashes) in ascending order, for SCAN: sorted leaves of at most
/// [`ORDER_LEAF`] values, each allocated once at full size. A full leaf passes a value to a
/// neighbour with room before it splits, which keeps leaves about 85% full: ~10 bytes a key,
/// where std's `BTreeSet<u64>` (11 values a node, ~69% full after random inserts) takes ~18.
#[derive(Debug, Default)]
struct Order {
    /// Non-empty, each sorted, every value of a leaf below every value of the next.
    leaves: Vec<Vec<u64>>,
}

impl Order {
    fn new_leaf() -> Vec<u64> {
        Vec::with_capacity(ORDER_LEAF)
    }

    /// The leaf that holds `h` or would: the last whose first value is ≤ `h` (or the first).
    fn leaf_of(&self, h: u64) -> usize {
        self.leaves.partition_point(|l| l[0] <= h).saturating_sub(1)
    }

    fn insert(&mut self, h: u64) {
        if self.leaves.is_empty() {
            let mut leaf = Self::new_leaf();
            leaf.push(h);
            self.leaves.push(leaf);
            return;
        }
        let i = self.leaf_of(h);
        let Err(mut at) = self.leaves[i].binary_search(&h) else { return };
        if self.leaves[i].len() == ORDER_LEAF {
            if at > 0 && i > 0 && self.leaves[i - 1].len() < ORDER_LEAF {
                // The smallest value moves to the end of the previous leaf.
                let first = self.leaves[i].remove(0);
                self.leaves[i - 1].push(first);
                at -= 1;
            } else if at < ORDER_LEAF && i + 1 < self.leaves.len() && self.leaves[i + 1].len() < ORDER_LEAF {
                // The largest value moves to the front of the next leaf.
                let last = self.leaves[i].pop().expect("a full leaf");
                self.leaves[i + 1].insert(0, last);
            } else {
                let mut right = Self::new_leaf();
                right.extend_from_slice(&self.leaves[i][ORDER_LEAF / 2..]);
                self.leaves[i].truncate(ORDER_LEAF / 2);
                self.leaves.insert(i + 1, right);
                if at > ORDER_LEAF / 2 {
                    self.leaves[i + 1].insert(at - ORDER_LEAF / 2, h);
                    return;
                }
            }
        }
        self.leaves[i].insert(at, h);
    }

    fn remove(&mut self, h: u64) {
        if self.leaves.is_empty() {
            return;
        }
        let i = self.leaf_of(h);
        let Ok(at) = self.leaves[i].binary_search(&h) else { return };
        self.leaves[i].remove(at);
        // Sparse leaves merge into their successor, so deleting keys gives the memory back.
        if self.leaves[i].is_empty() {
            self.leaves.remove(i);
        } else if i + 1 < self.leaves.len()
            && self.leaves[i].len() + self.leaves[i + 1].len() <= ORDER_LEAF / 2
        {
            let next = self.leaves.remove(i + 1);
            self.leaves[i].extend_from_slice(&next);
        }
    }

    /// The values ≥ `from`, ascending.
    fn from(&self, from: u64) -> impl Iterator<Item = u64> + '_ {
        let i = if self.leaves.is_empty() { 0 } else { self.leaf_of(from) };
        self.leaves[i..].iter().flatten().copied().skip_while(move |&h| h < from)
    }

    fn clear(&mut self) {
        self.leaves = Vec::new();
    }
}

/// One shard: its keys, its deadline index and its change counter.
///
/// # Memory
///
/// Issue 15 (item 9) asks for a million small filters to cost at most 1.10× their payload, so
/// the per-key structures are kept small: the table holds one pointer per slot (a hash table is
/// between 44% and 87% full, so inline entries of 88 bytes cost up to 200 bytes a key), the
/// node holds the key inline when it is short and the deadline in 8 bytes, and the SCAN order
/// index holds only the 8-byte position (the key is found again through the table, see
/// [`Shard::keys_from`]). `scripts/bench_small_keys.sh` measures it.
#[derive(Debug, Default)]
pub struct Shard {
    /// The nodes, found by [`Shard::slot_hash`] of the key's [`key_hash`]: the hash the shard
    /// and the SCAN order use anyway, mixed with this process's random seed so that a client
    /// cannot choose keys that pile up in one probe sequence without full 64-bit xxh3
    /// collisions (SipHash took 6% of a pipelined BF.ADD's server CPU, so no keyed hash of the
    /// key bytes themselves).
    table: hashbrown::HashTable<Box<Node>>,
    seed: foldhash::fast::RandomState,
    deadlines: BTreeSet<(u64, Key)>,
    dirty: u64,
    /// Sum of the entries' charges (mirrored into [`Db::used_memory`] by the callers).
    mem: usize,
    /// The distinct [`key_hash`]es of the keys, for SCAN's cursor.
    order: Order,
    before_write: Option<std::sync::Arc<dyn BeforeWrite>>,
    /// WATCHed keys of this shard and their watchers (empty when nobody watches here).
    watched: HashMap<Bytes, Vec<Watcher>>,
    /// The log sequence number of the last record written under this shard's lock: a reply
    /// computed from this shard waits until it is durable (see `persist`).
    written_lsn: u64,
}

impl Shard {
    /// The table's hash for a key whose [`key_hash`] is `h`.
    #[inline]
    fn slot_hash(&self, h: u64) -> u64 {
        use std::hash::BuildHasher as _;
        self.seed.hash_one(h)
    }

    #[inline]
    fn node(&self, key: &[u8]) -> Option<&Node> {
        self.table.find(self.slot_hash(key_hash(key)), |n| n.key.as_bytes() == key).map(|n| &**n)
    }

    #[inline]
    fn node_mut(&mut self, key: &[u8]) -> Option<&mut Node> {
        let h = self.slot_hash(key_hash(key));
        self.table.find_mut(h, |n| n.key.as_bytes() == key).map(|n| &mut **n)
    }

    /// The nodes whose key hashes to `h` (one, but for 64-bit xxh3 collisions).
    fn nodes_with_hash(&self, h: u64) -> impl Iterator<Item = &Node> {
        self.table.iter_hash(self.slot_hash(h)).map(|n| &**n).filter(move |n| key_hash(n.key.as_bytes()) == h)
    }

    fn entry(&self, key: &[u8]) -> Option<&Entry> {
        self.node(key).map(|n| &n.entry)
    }

    /// Prepares every value live at `now` to be saved, in place
    /// ([`sift_commands::DataType::before_save`]: a t-digest compresses its buffered
    /// observations). Every snapshot calls it at its epoch, under the shard's lock, before it
    /// encodes or freezes the values: the snapshot is the base the log replays onto, so the
    /// state it holds must be the state that keeps running. Not a change a client sees (no
    /// watcher), but a change of the value the log must replay when the snapshot fails and the
    /// old one stays the base: `changed` gets the key of each value it changed, for the caller
    /// to log (as `DUMP`, which replays the same preparation).
    pub fn prepare_for_save(&mut self, now: u64, changed: &mut dyn FnMut(&[u8])) {
        for n in self.table.iter_mut() {
            if n.entry.is_expired(now) {
                continue;
            }
            if let Value::Data(d) = &mut n.entry.value {
                let charge = d.mem_usage();
                if d.before_save() {
                    debug_assert_eq!(d.mem_usage(), charge, "before_save must keep the value's size");
                    changed(n.key.as_bytes());
                }
            }
        }
    }

    /// Raises the log sequence number of the last record written under this shard's lock to
    /// `lsn` (a record the caller appended under it outside a command: see `persist::disk`).
    pub fn stamp_written(&mut self, lsn: u64) {
        self.written_lsn = self.written_lsn.max(lsn);
    }

    /// Live entries (not yet expired at `now`), in no particular order.
    pub fn iter(&self, now: u64) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.table.iter().filter(move |n| !n.entry.is_expired(now)).map(|n| (n.key.as_bytes(), &n.entry))
    }

    /// Number of keys, including expired ones not yet removed (as Redis's DBSIZE).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Is the shard empty?
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
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
    /// positions, including expired ones not yet removed. Keys sharing a position (an xxh3
    /// collision) come one after the other, in byte order.
    pub fn keys_from(&self, from: u64) -> impl Iterator<Item = (u64, &[u8])> {
        self.order.from(from).flat_map(move |h| {
            let mut nodes = self.nodes_with_hash(h).map(|n| n.key.as_bytes());
            let first = nodes.next();
            // Collisions only allocate (an empty `collect` does not).
            let mut group: Vec<&[u8]> = nodes.collect();
            let single = if group.is_empty() {
                first
            } else {
                group.extend(first);
                group.sort_unstable();
                None
            };
            single.into_iter().chain(group).map(move |k| (h, k))
        })
    }

    /// The live entry of `key`, if any (for SCAN's TYPE filter).
    pub fn get_live(&self, key: &[u8], now: u64) -> Option<&Entry> {
        self.entry(key).filter(|e| !e.is_expired(now))
    }

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let node = self.detach(key)?;
        let h = key_hash(key);
        if self.nodes_with_hash(h).next().is_none() {
            self.order.remove(h);
        }
        Some(node.entry)
    }

    /// Removes `key` from the table, the deadline index and the memory count, but not from the
    /// order index (the caller puts it back or removes it there).
    fn detach(&mut self, key: &[u8]) -> Option<Box<Node>> {
        let h = self.slot_hash(key_hash(key));
        let found = self.table.find_entry(h, |n| n.key.as_bytes() == key).ok()?;
        let (node, _) = found.remove();
        if node.entry.deadline != NO_DEADLINE {
            self.deadlines.remove(&(node.entry.deadline, node.key.clone()));
        }
        self.mem -= node.charge();
        Some(node)
    }

    /// What the entries of the keys hashing to `h` are charged (one key, but for xxh3
    /// collisions).
    fn charge_of_hash(&self, h: u64) -> usize {
        self.nodes_with_hash(h).map(Node::charge).sum()
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
        match self.entry(key) {
            None => false,
            Some(e) if e.is_expired(now) => {
                self.signal_expired(key);
                self.remove(key);
                false
            }
            Some(_) => true,
        }
    }

    fn insert(&mut self, key: &[u8], entry: Entry) -> Option<Entry> {
        let old = self.detach(key).map(|n| n.entry);
        let h = key_hash(key);
        if old.is_none() {
            self.order.insert(h);
        }
        let key = Key::new(key);
        if entry.deadline != NO_DEADLINE {
            self.deadlines.insert((entry.deadline, key.clone()));
        }
        self.mem += entry_size(key.as_bytes(), &entry.value);
        let slot = self.slot_hash(h);
        let seed = &self.seed;
        #[allow(clippy::borrowed_box)] // hashbrown hands the table's element, the box
        let rehash = |n: &Box<Node>| {
            use std::hash::BuildHasher as _;
            seed.hash_one(key_hash(n.key.as_bytes()))
        };
        self.table.insert_unique(slot, Box::new(Node { key, entry }), rehash);
        old
    }

    fn clear(&mut self) -> usize {
        // FLUSHALL / FLUSHDB touch the watched keys that exist (Redis 7.0's
        // `touchAllWatchedKeysInDb`): present but already expired when watched is no change.
        if !self.watched.is_empty() {
            let mut watched = std::mem::take(&mut self.watched);
            for (_, ws) in watched.iter_mut().filter(|(k, _)| self.node(k).is_some()) {
                touch_existing(ws);
            }
            self.watched = watched;
        }
        let n = self.table.len();
        self.table = hashbrown::HashTable::new();
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
                s.signal_expired(key.as_bytes());
                s.remove(key.as_bytes());
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
    /// The keys handed out by [`Locked::get_mut`], by [`key_hash`], with what they were charged
    /// then: re-measured on drop. An entry's charge is not stored (8 bytes a key), so every
    /// change that removes or replaces an entry first settles these ([`Locked::with_accounting`]).
    changed_in_place: Vec<(u64, usize)>,
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
        for (h, old) in std::mem::take(&mut self.changed_in_place) {
            let db = self.db;
            let i = (h >> SHARD_SHIFT) as usize;
            let Ok(pos) = self.guards.binary_search_by_key(&i, |(j, _)| *j) else { continue };
            let s = &mut self.guards[pos].1;
            let before = s.mem;
            s.mem = s.mem - old + s.charge_of_hash(h);
            db.account(before, s.mem);
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
        if !self.changed_in_place.is_empty() {
            self.settle();
        }
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
        let expired = s.entry(key).is_some_and(|e| e.is_expired(now));
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
        !expired_when_watched && s.entry(key).is_some_and(|e| e.is_expired(now))
    }

    /// The live entry of `key` (an expired one is removed first).
    pub fn get(&mut self, key: &[u8]) -> Option<&Entry> {
        if self.live(key) {
            self.shard(key).entry(key)
        } else {
            None
        }
    }

    /// The entry of `key`, even an expired one, without removing it or counting a change: for
    /// hints (`cmd::batch` prefetching a filter's cache lines), never for what a command replies.
    pub fn peek(&mut self, key: &[u8]) -> Option<&Entry> {
        self.shard(key).entry(key)
    }

    /// The live entries of `keys` at once (expired ones are removed first), for a command that
    /// reads several keys together. A key may appear twice.
    pub fn get_many<'s>(&'s mut self, keys: &[&[u8]]) -> Vec<Option<&'s Entry>> {
        for key in keys {
            self.live(key);
        }
        let this = &*self;
        keys.iter().map(|key| this.shard_ref(key).entry(key)).collect()
    }

    /// Removes `key` if it has expired (with its charge); returns whether it is live.
    fn live(&mut self, key: &[u8]) -> bool {
        // Only a key with a deadline needs the clock.
        match self.shard(key).entry(key) {
            None => return false,
            Some(e) if e.deadline == NO_DEADLINE => return true,
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
        let h = key_hash(key);
        if !self.changed_in_place.iter().any(|&(c, _)| c == h) {
            let charged = self.shard(key).charge_of_hash(h);
            self.changed_in_place.push((h, charged));
        }
        self.shard(key).node_mut(key).map(|n| &mut n.entry)
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
        let old = self.with_accounting(&key, |s| s.insert(&key, entry));
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
        let old = s.entry(key).expect("checked live above").deadline;
        let new = expires_at.unwrap_or(NO_DEADLINE);
        if old != new {
            let k = Key::new(key);
            if old != NO_DEADLINE {
                s.deadlines.remove(&(old, k.clone()));
            }
            if new != NO_DEADLINE {
                s.deadlines.insert((new, k));
            }
            s.node_mut(key).expect("checked live above").entry.deadline = new;
        }
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
        self.settle();
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
mod tests;
