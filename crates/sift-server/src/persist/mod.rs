//! The persistence boundary: everything the commands and the server need from durable storage,
//! as one trait, so the storage engine (append-only log, snapshots, recovery; designed
//! separately) plugs in without touching command code.
//!
//! # Contract
//!
//! * [`Persistence::load`] runs once at start-up, before the first client is accepted, with
//!   every shard locked, and fills the keyspace.
//! * [`Persistence::record`] is called by the dispatcher after every write command that changed
//!   the keyspace, **while the command's shard locks are still held**, so two commands on the
//!   same key are recorded in the order they were applied. The arguments are the command as
//!   it should be replayed (relative expiries are already rewritten to `PEXPIREAT`). It must not
//!   block on I/O: buffer the record.
//! * [`Persistence::record_transaction`] replaces `record` for the writes of an EXEC or a
//!   script when there are several: they must reach the log as one unit (no other client's
//!   record in between) that recovery applies whole or not at all.
//! * [`Persistence::commit`] is called by a connection once per batch of pipelined requests that
//!   contained a recorded write, before the batch's replies are flushed: the place for group
//!   commit (`appendfsync always` fsyncs here, once for the whole batch).
//! * [`Persistence::save`] (SAVE, DEBUG RELOAD, SHUTDOWN) gets a view holding every shard: a
//!   consistent point-in-time snapshot. [`Persistence::bgsave`] gets the same view and may copy
//!   what it needs and finish in the background.
//! * `DEBUG RELOAD` is `save`, then clear the keyspace, then `load`, all under the same locks.
//! * [`Persistence::attach`] is called once, before `load`, with the server state: an engine
//!   that replays its log through the command code or snapshots in the background keeps it.
//! * [`Persistence::commit_async`] is what the server actually calls: the same guarantee, but a
//!   store that must wait for an fsync lets the connection task yield meanwhile instead of
//!   blocking a runtime thread (the default runs [`Persistence::commit`] in place).
//! * A reply must not reveal a write that is not durable yet (another connection's write still
//!   waiting for its fsync): after recording, the dispatcher stamps the shards it holds with
//!   [`Persistence::appended_lsn`], every command raises its connection's wait to the stamps of
//!   the shards it read, and the connection awaits [`Persistence::wait_durable`] of that LSN
//!   before sending the batch's replies (a batch that wrote awaits `commit_async`, which covers
//!   it).
//! * When [`Persistence::commit`] fails, the connection replaces every reply of the batch by
//!   an error: a write whose record may not be durable is never acknowledged. While
//!   [`Persistence::write_error`] is `Some`, write commands are refused before they run.
//! * [`Persistence::shutdown`] runs last, when the server stops: flush and sync everything.
//!
//! Implementations: [`disk::Disk`], the durable store (append-only log, snapshots, recovery; the
//! byte layout is in `docs/PERSISTENCE.md`), and [`MemoryOnly`], which keeps nothing.

pub mod aof;
pub mod check;
pub mod disk;
pub mod lock;
pub mod manifest;
pub mod snapshot;

use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;

use bytes::Bytes;

use crate::db::Locked;
use crate::shared::Shared;

/// A persistence failure.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The file system refused.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Stored data is unreadable or inconsistent.
    #[error("{0}")]
    Corrupt(String),
    /// Another process uses the data directory.
    #[error(transparent)]
    InUse(#[from] lock::LockError),
}

/// A durable store's state for the metrics endpoint: counters and times it keeps anyway, read
/// with relaxed loads (no lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistMetrics {
    /// Bytes in the append-only log (`INFO persistence` `aof_current_size`).
    pub log_bytes: u64,
    /// fdatasyncs of the log since start-up (`aof_fsyncs`).
    pub fsyncs: u64,
    /// Unix time (ms) of the last successful fdatasync of the log; 0 if none yet.
    pub last_fsync_unix_ms: u64,
    /// Did the last snapshot succeed (`rdb_last_bgsave_status:ok`)?
    pub last_save_ok: bool,
}

impl Default for PersistMetrics {
    fn default() -> Self {
        PersistMetrics { log_bytes: 0, fsyncs: 0, last_fsync_unix_ms: 0, last_save_ok: true }
    }
}

/// How [`Persistence::bgrewriteaof`] took a request (Redis's replies to `BGREWRITEAOF`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteStart {
    /// The rewrite starts now: "Background append only file rewriting started".
    Started,
    /// A snapshot that was not asked for as a rewrite runs; the rewrite starts when it ends:
    /// "Background append only file rewriting scheduled" (`aof_rewrite_scheduled:1`).
    Scheduled,
    /// A rewrite was asked for already and has not ended: "ERR Background append only file
    /// rewriting already in progress".
    AlreadyRunning,
}

/// When [`Persistence::bgsave`] may start the snapshot (Redis's `BGSAVE` forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgsaveWhen {
    /// `BGSAVE`: now, or refused while a log rewrite runs.
    Now,
    /// `BGSAVE SCHEDULE`: now, or once the running log rewrite has ended.
    NowOrScheduled,
    /// `BGSAVE` inside `MULTI`/`EXEC`: Redis 7 never starts a child there, it schedules one.
    Scheduled,
}

/// How [`Persistence::bgsave`] took a request (Redis 7's replies to `BGSAVE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgsaveStart {
    /// "Background saving started" (`rdb_bgsave_in_progress:1` from here on).
    Started,
    /// Starts once the running job has ended: "Background saving scheduled".
    Scheduled,
    /// A snapshot asked as such runs: "ERR Background save already in progress".
    AlreadyRunning,
    /// A log rewrite runs and the request did not say SCHEDULE: "ERR Another child process is
    /// active (AOF?): can't BGSAVE right now. …".
    OtherJobRunning,
}

/// The future [`Persistence::commit_async`] returns.
pub type CommitFuture<'a> = Pin<Box<dyn Future<Output = Result<(), PersistError>> + Send + 'a>>;

/// What a durable store must provide; see the module documentation for when each is called.
pub trait Persistence: Send + Sync + 'static {
    /// A short name for logs and `INFO` (e.g. "memory-only").
    fn name(&self) -> &'static str;
    /// Is an append-only log active (`INFO persistence` `aof_enabled`)?
    fn aof_enabled(&self) -> bool;
    /// Receives the server state once, before [`Persistence::load`].
    fn attach(&self, _shared: Weak<Shared>) {}
    /// Why writes are refused right now (the log failed), if they are.
    fn write_error(&self) -> Option<String> {
        None
    }
    /// Flushes and syncs everything and stops background work (server shutdown).
    fn shutdown(&self) -> Result<(), PersistError> {
        Ok(())
    }
    /// Is the keyspace being loaded (`INFO persistence` `loading`)?
    fn loading(&self) -> bool {
        false
    }
    /// Extra `field:value` lines for `INFO persistence`.
    fn info_fields(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
    /// The figures the metrics endpoint exports (see [`PersistMetrics`]); a store without a
    /// log has none to report beyond the defaults.
    fn metrics(&self) -> PersistMetrics {
        PersistMetrics::default()
    }
    /// Fills the keyspace from storage; returns the number of keys loaded.
    fn load(&self, keys: &mut Locked<'_>) -> Result<usize, PersistError>;
    /// Appends one applied write command to the log buffer.
    fn record(&self, argv: &[Bytes]);
    /// Appends the write commands of one transaction (an EXEC or a script that wrote more than
    /// once) as one contiguous unit that recovery applies whole or not at all. Called under the
    /// transaction's shard locks, as [`Persistence::record`]. The default records them one by
    /// one (for a store without a log, where nothing is replayed).
    fn record_transaction(&self, cmds: &[Vec<Bytes>]) {
        cmds.iter().for_each(|c| self.record(c));
    }
    /// Makes every recorded write durable according to the fsync policy.
    fn commit(&self) -> Result<(), PersistError>;
    /// [`Persistence::commit`] for an async caller: resolves once every write recorded before
    /// the call is durable according to the fsync policy. The default commits in place.
    fn commit_async(&self) -> CommitFuture<'_> {
        Box::pin(std::future::ready(self.commit()))
    }
    /// The LSN of the last record appended (0 for a store without a log). Read under the
    /// shard locks of the command that recorded, right after recording.
    fn appended_lsn(&self) -> u64 {
        0
    }
    /// Resolves once every record up to `lsn` is durable according to the fsync policy (for a
    /// reply that depends on another connection's write). The default has nothing to wait for.
    fn wait_durable(&self, _lsn: u64) -> CommitFuture<'_> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Writes a snapshot of the keyspace durably (`keys` holds every shard).
    fn save(&self, keys: &mut Locked<'_>) -> Result<(), PersistError>;
    /// Starts a snapshot that completes in the background, or schedules it (see
    /// [`BgsaveWhen`]).
    fn bgsave(&self, keys: &mut Locked<'_>, when: BgsaveWhen) -> Result<BgsaveStart, PersistError>;
    /// Is a background snapshot running (or answered "started")? Not a log rewrite: Redis's
    /// `rdb_bgsave_in_progress`.
    fn bgsave_in_progress(&self) -> bool;
    /// `BGREWRITEAOF`: starts a background rewrite of the log (a store without a log, as
    /// Redis 7 without AOF, rewrites all the same: here its snapshot), or schedules it when
    /// `scheduled` (inside `MULTI`/`EXEC`, where Redis 7 never starts a child). The default,
    /// for stores with nothing on disk, has nothing to rewrite.
    fn bgrewriteaof(&self, _scheduled: bool) -> RewriteStart {
        RewriteStart::Started
    }
    /// Unix time (seconds) of the last successful snapshot (start-up time if none).
    fn last_save_unix(&self) -> u64;
    /// `DEBUG RELOAD`: snapshot, empty the keyspace, load the snapshot back (`keys` holds every
    /// shard, so no client sees the keyspace in between).
    fn reload(&self, keys: &mut Locked<'_>) -> Result<(), PersistError> {
        self.save(keys)?;
        keys.clear();
        self.load(keys)?;
        Ok(())
    }
}

/// For unit tests: keeps every recorded command, in order; nothing is durable.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Recorder(pub(crate) std::sync::Arc<parking_lot::Mutex<Vec<Vec<Bytes>>>>);

#[cfg(test)]
impl Persistence for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn aof_enabled(&self) -> bool {
        true
    }
    fn load(&self, _keys: &mut Locked<'_>) -> Result<usize, PersistError> {
        Ok(0)
    }
    fn record(&self, argv: &[Bytes]) {
        self.0.lock().push(argv.to_vec());
    }
    fn commit(&self) -> Result<(), PersistError> {
        Ok(())
    }
    fn save(&self, _keys: &mut Locked<'_>) -> Result<(), PersistError> {
        Ok(())
    }
    fn bgsave(&self, _keys: &mut Locked<'_>, _when: BgsaveWhen) -> Result<BgsaveStart, PersistError> {
        Ok(BgsaveStart::Started)
    }
    fn bgsave_in_progress(&self) -> bool {
        false
    }
    fn last_save_unix(&self) -> u64 {
        0
    }
}

/// **Not durable.** A placeholder until the real store exists: nothing is written or read.
/// `SAVE`, `BGSAVE` and `DEBUG RELOAD` succeed without doing anything (so the keyspace after a
/// "reload" is trivially identical), and the keyspace is lost when the process exits. The
/// server logs a warning at start-up when it runs with this.
#[derive(Debug)]
pub struct MemoryOnly {
    last_save: std::sync::atomic::AtomicU64,
}

impl Default for MemoryOnly {
    fn default() -> Self {
        MemoryOnly { last_save: std::sync::atomic::AtomicU64::new(crate::db::now_ms() / 1000) }
    }
}

impl Persistence for MemoryOnly {
    fn name(&self) -> &'static str {
        "memory-only"
    }
    fn aof_enabled(&self) -> bool {
        false
    }
    fn load(&self, _keys: &mut Locked<'_>) -> Result<usize, PersistError> {
        Ok(0)
    }
    fn record(&self, _argv: &[Bytes]) {}
    fn commit(&self) -> Result<(), PersistError> {
        Ok(())
    }
    fn save(&self, _keys: &mut Locked<'_>) -> Result<(), PersistError> {
        self.last_save.store(crate::db::now_ms() / 1000, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    fn bgsave(&self, keys: &mut Locked<'_>, _when: BgsaveWhen) -> Result<BgsaveStart, PersistError> {
        self.save(keys).map(|()| BgsaveStart::Started)
    }
    fn bgsave_in_progress(&self) -> bool {
        false
    }
    fn last_save_unix(&self) -> u64 {
        self.last_save.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Nothing was saved, so the keyspace is left as it is (clearing it would lose it).
    fn reload(&self, _keys: &mut Locked<'_>) -> Result<(), PersistError> {
        Ok(())
    }
}
