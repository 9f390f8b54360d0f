//! [`Disk`]: the durable store of a data directory. Byte layouts: `docs/PERSISTENCE.md`,
//! [`super::aof`], [`super::snapshot`], [`super::manifest`].
//!
//! # Files
//!
//! `MANIFEST` names one snapshot (optional) and the log segments to replay after it, in order.
//! Recovery = load that snapshot, replay those segments. Files not named by the manifest are
//! leftovers of an interrupted operation and are deleted at start-up (each is logged). The
//! directory is locked (`LOCK`, see [`super::lock`]) for as long as the store is open.
//!
//! # Recovery: what is cut, what is refused
//!
//! A torn tail (an append that never completed, hence never acknowledged: see [`super::aof`])
//! is cut at start-up with a warning: the bytes after the kept records are overwritten with
//! zeros (the file keeps its preallocated size). A provable loss — a segment shorter than its
//! header's size claim, or a closed segment without its segment-end record while a later one
//! holds records — stops the start with an error naming the file and what is missing, unless
//! the loss is at the end of the log and `aof-load-truncated yes` accepts it (the claim is then
//! lowered to the file's size, so the next start does not complain again). Corruption that may
//! hide an acknowledged record stops the start too. Every refusal names the salvage tool,
//! `sift-server --check-dir` ([`super::check`]). At start-up, a closed segment that lacks its
//! segment-end record (a crash right after the log moved to a new segment) gets it, and a last
//! segment of another format or fsync policy is closed and a new one started, so the rules above
//! hold for everything appended from then on.
//!
//! # Writes and group commit
//!
//! [`Persistence::record`] (under the command's shard locks) only appends the encoded record to
//! an in-memory buffer and bumps a log sequence number (LSN). [`Persistence::commit`], called by
//! a connection once per pipelined batch before its replies are sent, takes the I/O lock, moves
//! the whole buffer (every connection's records, not only its own) into the segment file with one
//! `write`, and with `appendfsync always` one `fdatasync`; the durable LSN then covers every
//! record taken. A connection whose records a concurrent commit already covered returns without
//! any I/O. With `always` the connection does not do that I/O itself: it asks the `sift-sync`
//! thread for its LSN and awaits a notification, so a runtime thread never blocks in `fdatasync`
//! and every connection waiting meanwhile is covered by the sync thread's next single
//! write + fdatasync (the group); after it, the sync thread wakes only the connections that
//! sync covered. Segments are preallocated with zeros ahead of their records, and the header
//! records the size reached (`Inner::preallocate`; a zero tail is the end of the log for
//! recovery, see [`super::aof`]). With `always` each write of records ends with a group-end
//! record. `everysec` writes at commit (a killed process loses nothing) and a background thread
//! fsyncs once a second; `no` leaves the fsync to the OS (but for the preallocated zeros and a
//! segment's last write, synced once). A failed write or fsync is sticky: the
//! failing batch gets error replies, and every later write command is refused (MISCONF) until a
//! restart, because what the file holds after a failed fsync is unknown.
//!
//! A reply must not reveal a write that is not durable yet: every shard remembers the LSN of
//! the last record written under its lock, a command that reads a shard raises its
//! connection's wait to that LSN, and the connection's replies wait for it
//! ([`Persistence::wait_durable`]), as a writer's wait for its own records.
//!
//! # Snapshots and log rewrite
//!
//! A snapshot also restarts the log, so SAVE, BGSAVE and the automatic rewrite are one operation:
//!
//! 1. create the next segment (header, fsync) and store a manifest naming the old snapshot, the
//!    old segments **and** the new one (still empty);
//! 2. the *epoch*, under every shard lock, O(number of shards): later records go to the new
//!    segment, and every shard gets a copy-on-write hook ([`crate::db::BeforeWrite`]);
//! 3. a background thread visits the shards one at a time; under that shard's lock alone it
//!    takes the shard's state, unless a writer already did: the first write to a shard after
//!    the epoch takes the shard's state first, under the lock it holds anyway. Either way each
//!    shard is stored as it was at the epoch. Taking a shard's state encodes its small values
//!    and freezes the large filters ([`snapshot::hold_shard`]): their bitmaps are read later,
//!    without the lock, a writer copying aside only the 256 KiB pieces it reaches first;
//! 4. the snapshot goes to a temporary file, fsync, rename, fsync of the directory;
//! 5. a manifest naming the new snapshot and the segments from the new one on is stored; the
//!    old files are deleted.
//!
//! A crash before 5 recovers from the old snapshot and every segment (old ones then the new);
//! after 5 from the new snapshot and the new segment. SAVE does the same synchronously under the
//! locks its command holds. The automatic rewrite starts when the log exceeds
//! `auto-aof-rewrite-min-size` and `auto-aof-rewrite-percentage` % of the last snapshot's size;
//! the `save` rules (seconds, changes) trigger it too.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use sift::compat::redisbloom::LoadLimits;

use super::aof::{self, SegmentRead, SEGMENT_HEADER_LEN};
use super::lock::DirLock;
use super::manifest::{self, sync_dir, Manifest, MANIFEST};
use super::snapshot;
use super::{BgsaveStart, BgsaveWhen, CommitFuture, PersistError, PersistMetrics, Persistence, RewriteStart};
use crate::config::{parse_memory, Params};
use crate::db::{now_ms, BeforeWrite, Locked, Shard, SHARDS};
use crate::shared::Shared;

mod recovery;
mod rewrite;
mod writes;

pub(crate) use recovery::{fix_segment, provable_losses};

/// When the log is fsynced (`appendfsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// Before the replies of every batch that wrote (group commit).
    Always,
    /// Once a second, in the background.
    EverySec,
    /// Never explicitly.
    No,
}

/// What [`Disk`] needs from the configuration.
#[derive(Debug, Clone)]
pub struct DiskOptions {
    /// The data directory.
    pub dir: PathBuf,
    /// Append-only log on (`appendonly yes`).
    pub appendonly: bool,
    /// Its fsync policy.
    pub fsync: Fsync,
    /// Start even when the end of the log was provably cut off (`aof-load-truncated yes`).
    pub load_truncated: bool,
}

impl DiskOptions {
    /// From `dir`, `appendonly`, `appendfsync`.
    pub fn from_params(params: &Params) -> DiskOptions {
        let fsync = match params.get("appendfsync") {
            Some("everysec") => Fsync::EverySec,
            Some("no") => Fsync::No,
            _ => Fsync::Always,
        };
        DiskOptions {
            dir: PathBuf::from(params.get("dir").unwrap_or("./sift-data")),
            appendonly: params.get("appendonly") != Some("no"),
            fsync,
            load_truncated: params.get("aof-load-truncated") == Some("yes"),
        }
    }
}

/// An open log segment (always of the current format: see `Disk::load`).
#[derive(Debug)]
struct SegFile {
    id: u64,
    file: File,
    /// Bytes of records (with the header): where the next record is written.
    len: AtomicU64,
    /// Bytes in the file (`>= len`): zeros were written ahead of the records up to here, see
    /// [`Inner::preallocate`]. Only grows.
    alloc: AtomicU64,
    /// Every write of records ends with a group-end record (`appendfsync always`).
    marked: bool,
    /// Command records written to the file (the segment-end record counts them).
    records: AtomicU64,
    /// The last size claim written to the header: (sequence, size). Changed only by
    /// [`Inner::preallocate`], one at a time.
    claim: Mutex<(u32, u64)>,
}

impl SegFile {
    fn new(
        id: u64,
        file: File,
        len: u64,
        alloc: u64,
        marked: bool,
        records: u64,
        claim: (u32, u64),
    ) -> Arc<SegFile> {
        Arc::new(SegFile {
            id,
            file,
            len: AtomicU64::new(len),
            alloc: AtomicU64::new(alloc.max(len)),
            marked,
            records: AtomicU64::new(records),
            claim: Mutex::new(claim),
        })
    }
}

/// How much the log is preallocated at a time, and the room left that triggers the next
/// preallocation. fdatasync after an append that grows the file also commits the new size
/// (an ext4 journal commit: one more device write and flush); over space already written it
/// syncs only data. Zeros are written (not `fallocate`, whose unwritten extents are converted,
/// and journaled, at the first write). Writing and syncing 1 MiB of zeros took 1.5–10 ms here.
const PREALLOC_CHUNK: u64 = 1 << 20;
const PREALLOC_LOW: u64 = PREALLOC_CHUNK / 2;

/// Records not yet written, per segment (more than one only right after an epoch).
#[derive(Debug)]
struct PendingSeg {
    seg: Arc<SegFile>,
    bytes: Vec<u8>,
    /// Command records in `bytes`.
    records: u64,
}

impl PendingSeg {
    fn new(seg: Arc<SegFile>) -> PendingSeg {
        PendingSeg { seg, bytes: Vec::new(), records: 0 }
    }
}

#[derive(Debug, Default)]
struct Pending {
    segs: Vec<PendingSeg>,
    /// LSN of the last record appended.
    last_lsn: u64,
}

/// One shard's entries as of the epoch.
type Section = Vec<snapshot::Held>;

/// A background snapshot in progress.
#[derive(Debug)]
struct SnapJob {
    snap_id: u64,
    /// The segment the log switched to at the epoch (None without a log).
    seg_id: Option<u64>,
    /// `Db::dirty` at the epoch.
    dirty: u64,
    /// The store, to log what preparing a shard's values changed ([`Inner::log_prepared`]).
    log: Weak<Inner>,
    /// Started as a log rewrite (`BGREWRITEAOF`, the log's size), not as a snapshot (`BGSAVE`,
    /// a `save` rule): a `BGREWRITEAOF` meanwhile is "already in progress", not "scheduled".
    rewrite: bool,
    cancelled: AtomicBool,
    /// Each shard's entries as of the epoch (a large filter frozen, not copied).
    slots: Vec<Mutex<Option<Section>>>,
}

impl BeforeWrite for SnapJob {
    fn before_write(&self, index: usize, shard: &mut Shard) {
        if !self.cancelled.load(Ordering::Acquire) {
            let mut changed = Vec::new();
            let held =
                snapshot::hold_shard(shard, now_ms(), &mut |k| changed.push(Bytes::copy_from_slice(k)));
            if let Some(inner) = self.log.upgrade() {
                inner.log_prepared(shard, &changed);
            }
            *self.slots[index].lock() = Some(held);
        }
    }
}

impl Inner {
    /// Appends one record to the buffer (see [`Persistence::record`]); returns its LSN (0
    /// without a log).
    fn append(&self, argv: &[Bytes]) -> u64 {
        if !self.opts.appendonly {
            return 0;
        }
        let mut p = self.pending.lock();
        let Some(last) = p.segs.last_mut() else { return 0 };
        aof::encode_record(argv, &mut last.bytes);
        last.records += 1;
        p.last_lsn += 1;
        self.appended_lsn.store(p.last_lsn, Ordering::Release);
        p.last_lsn
    }

    /// Logs `DUMP key` for each key of `shard` whose value a snapshot's preparation just
    /// changed (a t-digest compressed at the epoch), under the shard's lock: the record lands
    /// in the segment that follows the epoch, before any later write to the shard. If the
    /// snapshot fails, the old snapshot stays the base and the replay prepares the value at
    /// the same point of its history (DUMP prepares it, as a save does); if it succeeds, the
    /// replay finds the value prepared already and DUMP changes nothing. A reply computed from
    /// the prepared value waits for the record to be durable, as for a write.
    fn log_prepared(&self, shard: &mut Shard, keys: &[Bytes]) {
        let dump = Bytes::from_static(b"DUMP");
        for key in keys {
            let lsn = self.append(&[dump.clone(), key.clone()]);
            shard.stamp_written(lsn);
        }
    }
}

/// Manifest and job state. Lock order: shard locks, then this, then `pending`.
#[derive(Debug, Default)]
struct State {
    manifest: Manifest,
    next_id: u64,
    job: Option<Arc<SnapJob>>,
    /// BGSAVE asked; the worker starts it (once the running job, if any, has ended).
    requested: bool,
    /// BGREWRITEAOF asked; the worker starts it (once the running job, if any, has ended).
    rewrite_requested: bool,
    /// The request, of the two above, that was answered "started" (where Redis has forked its
    /// child at once) and that the worker has not started yet: it counts as running. The other
    /// one, if asked, was answered "scheduled".
    started: Option<JobKind>,
    /// Bumped by every synchronous save: a rewrite prepared before it is void.
    generation: u64,
}

/// What a background job is to clients: Redis 7 runs one child at a time, an RDB snapshot
/// (`BGSAVE`, a `save` rule) or an AOF rewrite (`BGREWRITEAOF`, the log's size), and answers
/// `BGSAVE`, `BGREWRITEAOF`, `SAVE` and `INFO persistence` by which one runs. Here both are the
/// same snapshot (every snapshot restarts the log); the kind is what it was asked as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobKind {
    Snapshot,
    Rewrite,
}

impl State {
    /// The job Redis would have a child for: the running one, else the one answered "started".
    fn active(&self) -> Option<JobKind> {
        match &self.job {
            Some(job) if job.rewrite => Some(JobKind::Rewrite),
            Some(_) => Some(JobKind::Snapshot),
            None => self.started,
        }
    }

    /// What the worker starts next, once no job runs: the request answered "started", else a
    /// scheduled rewrite before a scheduled snapshot (Redis's `serverCron` order).
    fn next_request(&self) -> Option<JobKind> {
        if self.job.is_some() {
            return None;
        }
        self.started.or(if self.rewrite_requested {
            Some(JobKind::Rewrite)
        } else if self.requested {
            Some(JobKind::Snapshot)
        } else {
            None
        })
    }
}

#[derive(Debug)]
struct Inner {
    opts: DiskOptions,
    shared: OnceLock<Weak<Shared>>,
    pending: Mutex<Pending>,
    /// Serialises writing the buffer to the files (lock order: `io`, then `pending`).
    io: Mutex<()>,
    /// Held by the one [`Inner::preallocate`] running (taken before `io` and `pending`).
    prealloc: Mutex<()>,
    /// Every record up to this LSN is written (and, with `always`, synced).
    durable_lsn: AtomicU64,
    /// `Pending::last_lsn`, readable without the buffer's lock (see `Disk::appended_lsn`).
    appended_lsn: AtomicU64,
    /// The data directory's lock, held from `open` on.
    dir_lock: Mutex<Option<DirLock>>,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    state: Mutex<State>,
    opened: AtomicBool,
    loading: AtomicBool,
    last_save: AtomicU64,
    last_bgsave_ok: AtomicBool,
    /// Bytes in the log segments the manifest names.
    aof_size: AtomicU64,
    /// Size of the snapshot the log continues.
    base_size: AtomicU64,
    rewrites: AtomicU64,
    /// fdatasyncs of the log's records since start-up, and the records they covered (`INFO
    /// persistence` `aof_fsyncs`, `aof_fsynced_records`: the mean group size of group commit).
    fsyncs: AtomicU64,
    fsynced_records: AtomicU64,
    /// Microseconds spent in those fdatasyncs (`aof_fsync_usec`).
    fsync_us: AtomicU64,
    /// Unix time (ms) of the last successful fdatasync of the log; 0 before the first.
    last_fsync_ms: AtomicU64,
    /// Preallocation failed once: not tried again.
    prealloc_off: AtomicBool,
    stop: AtomicBool,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// `always`: the highest LSN a connection waits for; the sync thread syncs up to it.
    sync_wanted: Mutex<u64>,
    /// Wakes the sync thread when `sync_wanted` grows (or at shutdown).
    sync_cv: Condvar,
    /// Connections waiting for their records to be synced: (the LSN they wait for, their
    /// waker). After a sync, only those it covered are woken (a `Notify::notify_waiters` woke
    /// every waiter, and the half waiting for the next sync went back to sleep).
    waiters: Mutex<Vec<(u64, Waker)>>,
    syncer: Mutex<Option<JoinHandle<()>>>,
}

/// The durable store; see the module documentation.
#[derive(Debug)]
pub struct Disk {
    inner: Arc<Inner>,
}

impl Disk {
    /// A store for `opts.dir`; nothing is touched on disk before [`Persistence::load`].
    pub fn new(opts: DiskOptions) -> Disk {
        Disk {
            inner: Arc::new(Inner {
                opts,
                shared: OnceLock::new(),
                pending: Mutex::new(Pending::default()),
                io: Mutex::new(()),
                prealloc: Mutex::new(()),
                durable_lsn: AtomicU64::new(0),
                appended_lsn: AtomicU64::new(0),
                dir_lock: Mutex::new(None),
                failed: AtomicBool::new(false),
                failure: Mutex::new(None),
                state: Mutex::new(State::default()),
                opened: AtomicBool::new(false),
                loading: AtomicBool::new(false),
                last_save: AtomicU64::new(now_ms() / 1000),
                last_bgsave_ok: AtomicBool::new(true),
                aof_size: AtomicU64::new(0),
                base_size: AtomicU64::new(0),
                rewrites: AtomicU64::new(0),
                fsyncs: AtomicU64::new(0),
                fsynced_records: AtomicU64::new(0),
                fsync_us: AtomicU64::new(0),
                last_fsync_ms: AtomicU64::new(0),
                prealloc_off: AtomicBool::new(false),
                stop: AtomicBool::new(false),
                worker: Mutex::new(None),
                sync_wanted: Mutex::new(0),
                sync_cv: Condvar::new(),
                waiters: Mutex::new(Vec::new()),
                syncer: Mutex::new(None),
            }),
        }
    }
}

/// What a refusal to start says about the salvage tool.
pub fn salvage_hint(dir: &Path) -> String {
    format!(
        "`sift-server --check-dir {0}` shows the state of every file; `sift-server --check-dir {0} --repair` keeps what can be proven intact",
        dir.display()
    )
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> PersistError {
    PersistError::Corrupt(format!("{}: {what}", path.display()))
}

fn io_at(path: &Path, e: std::io::Error) -> PersistError {
    PersistError::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn read_file(path: &Path) -> Result<Vec<u8>, PersistError> {
    let mut data = Vec::new();
    File::open(path).and_then(|mut f| f.read_to_end(&mut data)).map_err(|e| io_at(path, e))?;
    Ok(data)
}

impl Inner {
    fn path(&self, name: &str) -> PathBuf {
        self.opts.dir.join(name)
    }

    fn shared(&self) -> Option<Arc<Shared>> {
        self.shared.get().and_then(Weak::upgrade)
    }

    fn fail(&self, what: String) -> PersistError {
        tracing::error!("append-only log failed, writes are refused until a restart: {what}");
        *self.failure.lock() = Some(what.clone());
        self.failed.store(true, Ordering::Release);
        PersistError::Io(std::io::Error::other(what))
    }
}

impl Persistence for Disk {
    fn name(&self) -> &'static str {
        "disk"
    }

    fn aof_enabled(&self) -> bool {
        self.inner.opts.appendonly
    }

    fn attach(&self, shared: Weak<Shared>) {
        let _ = self.inner.shared.set(shared);
    }

    fn write_error(&self) -> Option<String> {
        if self.inner.failed.load(Ordering::Acquire) {
            self.inner.failure.lock().clone()
        } else {
            None
        }
    }

    fn load(&self, keys: &mut Locked<'_>) -> Result<usize, PersistError> {
        let inner = &self.inner;
        inner.loading.store(true, Ordering::Release);
        let result = (|| {
            if inner.opened.load(Ordering::Acquire) {
                let m = inner.state.lock().manifest.clone();
                return inner.load_into(&m, keys, false).map(|(n, _)| n);
            }
            let m = inner.open()?;
            let (loaded, last) = inner.load_into(&m, keys, true).map_err(|e| match e {
                PersistError::Corrupt(what) => {
                    PersistError::Corrupt(format!("{what}. {}", salvage_hint(&inner.opts.dir)))
                }
                other => other,
            })?;
            let mut st = inner.state.lock();
            st.next_id = m.max_id() + 1;
            st.manifest = m.clone();
            if inner.opts.appendonly {
                let marked = inner.opts.fsync == Fsync::Always;
                let seg = match (m.segments.last(), &last) {
                    // The last segment is appended to when it has the format and marks this
                    // process writes (the rules of recovery depend on both).
                    (Some(&id), Some(read))
                        if read.header.version == aof::SEGMENT_VERSION
                            && read.header.group_marks == marked
                            && !read.sealed =>
                    {
                        let path = inner.path(&manifest::segment_name(id));
                        let file = OpenOptions::new()
                            .read(true)
                            .write(true)
                            .open(&path)
                            .map_err(|e| io_at(&path, e))?;
                        // The claim as the start-up left it (lowered if a loss was accepted).
                        let mut head = [0u8; SEGMENT_HEADER_LEN];
                        let size = std::io::Read::read_exact(&mut &file, &mut head)
                            .and_then(|()| file.metadata())
                            .map_err(|e| io_at(&path, e))?
                            .len();
                        let claim =
                            aof::parse_segment_header(&head).ok().and_then(|h| h.claim).unwrap_or((1, 0));
                        SegFile::new(id, file, read.records_end, size, marked, read.kept_records, claim)
                    }
                    (last_id, last) => {
                        if let (Some(&id), Some(read)) = (last_id, last) {
                            if read.header.version >= 2 && !read.sealed {
                                let path = inner.path(&manifest::segment_name(id));
                                fix_segment(&path, read, true, false).map_err(|e| io_at(&path, e))?;
                            }
                            tracing::info!(
                                "{}: closed (written with another format version or fsync policy); the log continues in a new segment",
                                manifest::segment_name(id)
                            );
                        }
                        inner.prepare_segment(&mut st)?
                    }
                };
                inner.pending.lock().segs = vec![PendingSeg::new(seg)];
            }
            drop(st);
            inner.opened.store(true, Ordering::Release);
            let worker = inner.clone();
            let handle = std::thread::Builder::new()
                .name("sift-persist".into())
                .spawn(move || worker.worker())
                .map_err(PersistError::Io)?;
            *inner.worker.lock() = Some(handle);
            if inner.opts.appendonly && inner.opts.fsync == Fsync::Always {
                let syncer = inner.clone();
                let handle = std::thread::Builder::new()
                    .name("sift-sync".into())
                    .spawn(move || syncer.syncer())
                    .map_err(PersistError::Io)?;
                *inner.syncer.lock() = Some(handle);
            }
            Ok(loaded)
        })();
        inner.loading.store(false, Ordering::Release);
        result
    }

    fn record(&self, argv: &[Bytes]) {
        self.inner.append(argv);
    }

    /// The frame and its records are encoded under one hold of the buffer's lock: they are
    /// contiguous in the buffer, hence in the file, and in one segment.
    fn record_transaction(&self, cmds: &[Vec<Bytes>]) {
        if !self.inner.opts.appendonly {
            return;
        }
        let mut p = self.inner.pending.lock();
        if let Some(last) = p.segs.last_mut() {
            aof::encode_transaction(cmds, &mut last.bytes);
            last.records += cmds.len() as u64 + 2;
            p.last_lsn += cmds.len() as u64 + 2;
            self.inner.appended_lsn.store(p.last_lsn, Ordering::Release);
        }
    }

    fn appended_lsn(&self) -> u64 {
        self.inner.appended_lsn.load(Ordering::Acquire)
    }

    /// `always`: waits for the sync thread (without blocking the task's thread) until `lsn` is
    /// synced. `everysec` / `no`: writes the buffer if `lsn` is not written yet (their promise
    /// is the process's: a killed process loses nothing that was seen).
    fn wait_durable(&self, lsn: u64) -> CommitFuture<'_> {
        let inner = &self.inner;
        if !inner.opts.appendonly || inner.durable_lsn.load(Ordering::Acquire) >= lsn {
            return Box::pin(std::future::ready(Ok(())));
        }
        if inner.opts.fsync == Fsync::Always && inner.syncer.lock().is_some() {
            return Box::pin(inner.wait_for(lsn));
        }
        Box::pin(std::future::ready(inner.commit(false)))
    }

    fn commit(&self) -> Result<(), PersistError> {
        if !self.inner.opts.appendonly {
            return Ok(());
        }
        self.inner.commit(false)
    }

    /// `always` (once loaded): handled by the sync thread, the task waits without blocking its
    /// thread. `everysec` / `no`: the buffer is written in place (a page-cache copy, no fsync),
    /// before the replies, so a killed process loses nothing acknowledged.
    fn commit_async(&self) -> CommitFuture<'_> {
        let inner = &self.inner;
        if !inner.opts.appendonly {
            return Box::pin(std::future::ready(Ok(())));
        }
        if inner.opts.fsync == Fsync::Always && inner.syncer.lock().is_some() {
            let target = inner.pending.lock().last_lsn;
            return Box::pin(inner.wait_for(target));
        }
        Box::pin(std::future::ready(inner.commit(false)))
    }

    fn save(&self, keys: &mut Locked<'_>) -> Result<(), PersistError> {
        // A BGSAVE scheduled behind a rewrite still runs after this save, as in Redis (the
        // synchronous save takes the place of the rewrite, not of the scheduled snapshot).
        let scheduled = {
            let st = self.inner.state.lock();
            st.requested && st.active() != Some(JobKind::Snapshot)
        };
        self.inner.save(keys)?;
        if scheduled {
            self.inner.state.lock().requested = true;
        }
        Ok(())
    }

    fn bgsave(&self, _keys: &mut Locked<'_>, when: BgsaveWhen) -> Result<BgsaveStart, PersistError> {
        let mut st = self.inner.state.lock();
        Ok(match st.active() {
            Some(JobKind::Snapshot) => BgsaveStart::AlreadyRunning,
            Some(JobKind::Rewrite) if when == BgsaveWhen::Now => BgsaveStart::OtherJobRunning,
            None if when != BgsaveWhen::Scheduled => {
                st.requested = true;
                st.started = Some(JobKind::Snapshot);
                BgsaveStart::Started
            }
            _ => {
                st.requested = true;
                BgsaveStart::Scheduled
            }
        })
    }

    fn bgsave_in_progress(&self) -> bool {
        self.inner.state.lock().active() == Some(JobKind::Snapshot)
    }

    /// Every snapshot restarts the log, so a rewrite is a background snapshot started as one;
    /// the worker starts it at its next tick (`aof_rewrite_in_progress` is 1 from here on).
    fn bgrewriteaof(&self, scheduled: bool) -> RewriteStart {
        let mut st = self.inner.state.lock();
        match st.active() {
            Some(JobKind::Rewrite) => RewriteStart::AlreadyRunning,
            None if !scheduled => {
                st.rewrite_requested = true;
                st.started = Some(JobKind::Rewrite);
                RewriteStart::Started
            }
            _ => {
                st.rewrite_requested = true;
                RewriteStart::Scheduled
            }
        }
    }

    fn last_save_unix(&self) -> u64 {
        self.inner.last_save.load(Ordering::Relaxed)
    }

    fn reload(&self, keys: &mut Locked<'_>) -> Result<(), PersistError> {
        self.save(keys)?;
        keys.clear();
        self.load(keys)?;
        Ok(())
    }

    fn shutdown(&self) -> Result<(), PersistError> {
        let inner = &self.inner;
        inner.stop.store(true, Ordering::Release);
        if let Some(h) = inner.worker.lock().take() {
            let _ = h.join();
        }
        {
            let _wanted = inner.sync_wanted.lock();
            inner.sync_cv.notify_all();
        }
        if let Some(h) = inner.syncer.lock().take() {
            let _ = h.join();
        }
        if inner.opts.appendonly
            && inner.opened.load(Ordering::Acquire)
            && !inner.failed.load(Ordering::Acquire)
        {
            let _io = inner.io.lock();
            inner.flush_locked(true)?;
        }
        Ok(())
    }

    fn loading(&self) -> bool {
        self.inner.loading.load(Ordering::Acquire)
    }

    fn metrics(&self) -> PersistMetrics {
        let i = &self.inner;
        PersistMetrics {
            log_bytes: i.aof_size.load(Ordering::Relaxed),
            fsyncs: i.fsyncs.load(Ordering::Relaxed),
            last_fsync_unix_ms: i.last_fsync_ms.load(Ordering::Relaxed),
            last_save_ok: i.last_bgsave_ok.load(Ordering::Relaxed),
        }
    }

    fn info_fields(&self) -> Vec<(&'static str, String)> {
        let i = &self.inner;
        // A rewrite is in progress from its "started" reply on (the worker starts it at its
        // next tick), so a client that polls this after BGREWRITEAOF never sees 0 before it
        // ran. As in Redis, a BGSAVE is not a rewrite here, though its snapshot restarts the log.
        let (running, scheduled) = {
            let st = i.state.lock();
            let rewriting = st.active() == Some(JobKind::Rewrite);
            (rewriting, st.rewrite_requested && !rewriting)
        };
        let ok = |b: bool| if b { "ok".to_string() } else { "err".to_string() };
        vec![
            ("aof_rewrite_in_progress", (running as u8).to_string()),
            ("aof_rewrite_scheduled", (scheduled as u8).to_string()),
            ("aof_rewrites", i.rewrites.load(Ordering::Relaxed).to_string()),
            ("aof_last_write_status", ok(!i.failed.load(Ordering::Acquire))),
            ("aof_current_size", i.aof_size.load(Ordering::Relaxed).to_string()),
            ("aof_base_size", i.base_size.load(Ordering::Relaxed).to_string()),
            ("aof_fsync_usec", i.fsync_us.load(Ordering::Relaxed).to_string()),
            ("aof_fsyncs", i.fsyncs.load(Ordering::Relaxed).to_string()),
            ("aof_fsynced_records", i.fsynced_records.load(Ordering::Relaxed).to_string()),
            ("rdb_last_bgsave_status", ok(i.last_bgsave_ok.load(Ordering::Relaxed))),
            ("appendfsync", format!("{:?}", i.opts.fsync).to_lowercase()),
            ("dir", i.opts.dir.display().to_string()),
        ]
    }
}

#[cfg(test)]
mod tests;
