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
//! records the size reached (`Inner::preallocate_locked`; a zero tail is the end of the log for
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
use super::{CommitFuture, PersistError, PersistMetrics, Persistence};
use crate::config::{parse_memory, Params};
use crate::db::{now_ms, BeforeWrite, Locked, Shard, SHARDS};
use crate::shared::Shared;

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
    /// [`Inner::preallocate_locked`]. Changed only under `io`.
    alloc: AtomicU64,
    /// Every write of records ends with a group-end record (`appendfsync always`).
    marked: bool,
    /// Command records written to the file (the segment-end record counts them).
    records: AtomicU64,
    /// The last size claim written to the header: (sequence, size). Changed only under `io`.
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
    cancelled: AtomicBool,
    /// Each shard's entries as of the epoch (a large filter frozen, not copied).
    slots: Vec<Mutex<Option<Section>>>,
}

impl BeforeWrite for SnapJob {
    fn before_write(&self, index: usize, shard: &Shard) {
        if !self.cancelled.load(Ordering::Acquire) {
            *self.slots[index].lock() = Some(snapshot::hold_shard(shard, now_ms()));
        }
    }
}

/// Manifest and job state. Lock order: shard locks, then this, then `pending`.
#[derive(Debug, Default)]
struct State {
    manifest: Manifest,
    next_id: u64,
    job: Option<Arc<SnapJob>>,
    /// BGSAVE asked; the worker starts it.
    requested: bool,
    /// Bumped by every synchronous save: a rewrite prepared before it is void.
    generation: u64,
}

#[derive(Debug)]
struct Inner {
    opts: DiskOptions,
    shared: OnceLock<Weak<Shared>>,
    pending: Mutex<Pending>,
    /// Serialises writing the buffer to the files (lock order: `io`, then `pending`).
    io: Mutex<()>,
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
    bg_active: AtomicBool,
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
                durable_lsn: AtomicU64::new(0),
                appended_lsn: AtomicU64::new(0),
                dir_lock: Mutex::new(None),
                failed: AtomicBool::new(false),
                failure: Mutex::new(None),
                state: Mutex::new(State::default()),
                opened: AtomicBool::new(false),
                loading: AtomicBool::new(false),
                last_save: AtomicU64::new(now_ms() / 1000),
                bg_active: AtomicBool::new(false),
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

/// A snapshot being written is synced every this many bytes.
const SNAPSHOT_SYNC_BYTES: u64 = 32 << 20;

/// Writes a snapshot to `final_path` through a temporary file: header, the sections `sections`
/// yields, trailer, fsync, rename, fsync of the directory. Returns the file size.
fn write_snapshot(
    dir: &Path,
    final_path: &Path,
    mut sections: impl FnMut(&mut dyn FnMut(&[u8], u64) -> std::io::Result<()>) -> std::io::Result<bool>,
) -> std::io::Result<Option<u64>> {
    let tmp = final_path.with_extension("sift.tmp");
    let result = (|| {
        let file = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let head = snapshot::header(now_ms());
        w.write_all(&head)?;
        let mut crc = crc32c::crc32c(&head);
        let (mut entries, mut size, mut synced) = (0u64, head.len() as u64, 0u64);
        let complete = sections(&mut |bytes, n| {
            crc = crc32c::crc32c_append(crc, bytes);
            entries += n;
            size += bytes.len() as u64;
            w.write_all(bytes)?;
            // Synced as it goes (as Redis's rdb-save-incremental-fsync): a gigabyte of dirty
            // pages left for the final fsync makes the kernel throttle every writer of the
            // file system, the log's appends included, for hundreds of milliseconds.
            if size - synced >= SNAPSHOT_SYNC_BYTES {
                w.flush()?;
                w.get_ref().sync_data()?;
                synced = size;
            }
            Ok(())
        })?;
        if !complete {
            return Ok(None);
        }
        let t = snapshot::trailer(entries, crc);
        w.write_all(&t)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(Some(size + t.len() as u64))
    })();
    match result {
        Ok(Some(size)) => {
            fs::rename(&tmp, final_path)?;
            sync_dir(dir)?;
            Ok(Some(size))
        }
        other => {
            let _ = fs::remove_file(&tmp);
            other
        }
    }
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

    /// Moves every buffered record to its file; closes (segment-end record) and fsyncs the
    /// segments the log left, and with `sync` fsyncs the current one. Caller holds `io`.
    fn flush_locked(&self, sync: bool) -> Result<(), PersistError> {
        let (taken, upto) = {
            let mut p = self.pending.lock();
            let Some(current) = p.segs.last().map(|s| s.seg.clone()) else { return Ok(()) };
            (std::mem::replace(&mut p.segs, vec![PendingSeg::new(current)]), p.last_lsn)
        };
        let n = taken.len();
        for (i, mut ps) in taken.into_iter().enumerate() {
            let name = manifest::segment_name(ps.seg.id);
            let sealed = i + 1 < n;
            let at = ps.seg.len.load(Ordering::Relaxed);
            let records = ps.seg.records.load(Ordering::Relaxed) + ps.records;
            // The marks that let recovery prove where the log ends (see `aof`).
            if sealed {
                aof::encode_segment_end(at, records, &mut ps.bytes);
            } else if ps.seg.marked && !ps.bytes.is_empty() {
                aof::encode_group_end(at, &mut ps.bytes);
            }
            if !ps.bytes.is_empty() {
                ps.seg
                    .file
                    .write_all_at(&ps.bytes, at)
                    .map_err(|e| self.fail(format!("writing {name}: {e}")))?;
                ps.seg.len.store(at + ps.bytes.len() as u64, Ordering::Relaxed);
                ps.seg.alloc.fetch_max(at + ps.bytes.len() as u64, Ordering::Relaxed);
                ps.seg.records.store(records, Ordering::Relaxed);
                self.aof_size.fetch_add(ps.bytes.len() as u64, Ordering::Relaxed);
            }
            // A segment the log left is synced in every mode before anything is written to the
            // next one: recovery counts on its segment-end record being on disk whenever a later
            // segment holds records.
            if sealed || sync {
                let t0 = Instant::now();
                ps.seg.file.sync_data().map_err(|e| self.fail(format!("fsync of {name}: {e}")))?;
                self.fsyncs.fetch_add(1, Ordering::Relaxed);
                self.fsync_us.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
                self.last_fsync_ms.store(now_ms(), Ordering::Relaxed);
            }
        }
        let before = self.durable_lsn.fetch_max(upto, Ordering::AcqRel);
        if sync {
            self.fsynced_records.fetch_add(upto.saturating_sub(before), Ordering::Relaxed);
        }
        Ok(())
    }

    /// Writes zeros ahead of the current segment's records when less than [`PREALLOC_LOW`] of
    /// them is left, and syncs them, so the fdatasyncs of the records that follow overwrite
    /// allocated, already sized space; then claims the new size in the header (the next
    /// fdatasync makes the claim durable: a claim never names bytes that are not on disk).
    /// Caller holds `io` (the records are written only under it, so the zeros never land on a
    /// record). A failure only turns preallocation off: the records are then appended, as
    /// without it.
    fn preallocate_locked(&self) {
        if self.prealloc_off.load(Ordering::Relaxed) || self.failed.load(Ordering::Acquire) {
            return;
        }
        let Some(seg) = self.pending.lock().segs.last().map(|p| p.seg.clone()) else { return };
        let (len, alloc) = (seg.len.load(Ordering::Relaxed), seg.alloc.load(Ordering::Relaxed));
        if alloc - len >= PREALLOC_LOW {
            return;
        }
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let target = (len + PREALLOC_CHUNK).next_multiple_of(PREALLOC_CHUNK);
        let result = (|| -> std::io::Result<()> {
            let mut at = alloc;
            while at < target {
                let n = (target - at).min(ZEROS.len() as u64) as usize;
                seg.file.write_all_at(&ZEROS[..n], at)?;
                at += n as u64;
            }
            seg.file.sync_data()?;
            let mut claim = seg.claim.lock();
            let (at, slot) = aof::size_claim(seg.id, claim.0 + 1, target);
            seg.file.write_all_at(&slot, at as u64)?;
            *claim = (claim.0 + 1, target);
            Ok(())
        })();
        match result {
            Ok(()) => seg.alloc.store(target, Ordering::Relaxed),
            Err(e) => {
                tracing::warn!("preallocating {}: {e}; appending without it", manifest::segment_name(seg.id));
                self.prealloc_off.store(true, Ordering::Relaxed);
            }
        }
    }

    fn commit(&self, sync: bool) -> Result<(), PersistError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.failure_error());
        }
        let target = self.pending.lock().last_lsn;
        if self.durable_lsn.load(Ordering::Acquire) >= target && !sync {
            return Ok(());
        }
        let _io = self.io.lock();
        // A commit that ran while this one waited may have covered these records already.
        if self.durable_lsn.load(Ordering::Acquire) >= target && !sync {
            return Ok(());
        }
        self.flush_locked(sync || self.opts.fsync == Fsync::Always)
    }

    fn failure_error(&self) -> PersistError {
        PersistError::Io(std::io::Error::other(self.failure.lock().clone().unwrap_or_default()))
    }

    /// The `sift-sync` thread (`appendfsync always`): whenever a connection waits for an LSN
    /// not yet durable, writes and fdatasyncs everything buffered (every waiting connection's
    /// records, and whatever arrived meanwhile) in one go, then notifies the waiters.
    fn syncer(self: Arc<Self>) {
        let mut wanted = self.sync_wanted.lock();
        loop {
            while !self.stop.load(Ordering::Acquire)
                && (*wanted <= self.durable_lsn.load(Ordering::Acquire)
                    || self.failed.load(Ordering::Acquire))
            {
                self.sync_cv.wait(&mut wanted);
            }
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            drop(wanted);
            {
                let _io = self.io.lock();
                if !self.failed.load(Ordering::Acquire) {
                    // A failure is recorded (sticky) by `flush_locked`; waiters see it.
                    let _ = self.flush_locked(true);
                }
            }
            self.wake_synced();
            // After the waiters are released: the zeros delay only the next group.
            let _io = self.io.lock();
            self.preallocate_locked();
            drop(_io);
            wanted = self.sync_wanted.lock();
        }
        drop(wanted);
        self.wake_synced();
    }

    /// Wakes the waiting connections whose records are durable now (all of them after a
    /// failure or at shutdown: they re-check and return).
    fn wake_synced(&self) {
        let all = self.failed.load(Ordering::Acquire) || self.stop.load(Ordering::Acquire);
        let durable = self.durable_lsn.load(Ordering::Acquire);
        let mut ready = Vec::new();
        {
            let mut waiters = self.waiters.lock();
            let mut i = 0;
            while i < waiters.len() {
                if all || waiters[i].0 <= durable {
                    ready.push(waiters.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
        }
        for waker in ready {
            waker.wake();
        }
    }

    /// Waits until every record up to LSN `target` is durable (`always` with the sync thread
    /// running).
    async fn wait_for(&self, target: u64) -> Result<(), PersistError> {
        if self.durable_lsn.load(Ordering::Acquire) < target && !self.failed.load(Ordering::Acquire) {
            let mut wanted = self.sync_wanted.lock();
            if *wanted < target {
                *wanted = target;
                self.sync_cv.notify_one();
            }
        }
        std::future::poll_fn(|cx| {
            // Checked under the waiters' lock: the sync thread updates `durable_lsn` (or
            // `failed`, `stop`) before it takes this lock to wake, so either this check sees
            // the update or the sync thread sees this waker.
            let mut waiters = self.waiters.lock();
            if self.failed.load(Ordering::Acquire)
                || self.stop.load(Ordering::Acquire)
                || self.durable_lsn.load(Ordering::Acquire) >= target
            {
                return Poll::Ready(());
            }
            waiters.push((target, cx.waker().clone()));
            Poll::Pending
        })
        .await;
        if self.failed.load(Ordering::Acquire) {
            return Err(self.failure_error());
        }
        if self.durable_lsn.load(Ordering::Acquire) >= target {
            return Ok(());
        }
        // Shutting down: the final flush runs on the caller's thread.
        self.commit(true)
    }

    /// Creates the next segment, preallocated and synced, and stores a manifest that appends
    /// it. Holds `st`.
    fn prepare_segment(&self, st: &mut State) -> Result<Arc<SegFile>, PersistError> {
        let id = st.next_id;
        st.next_id += 1;
        let path = self.path(&manifest::segment_name(id));
        let file =
            OpenOptions::new().create_new(true).write(true).open(&path).map_err(|e| io_at(&path, e))?;
        let marked = self.opts.fsync == Fsync::Always;
        let size = PREALLOC_CHUNK;
        let created = (|| {
            let mut head = aof::segment_header(id, marked, size).to_vec();
            head.resize(size as usize, 0);
            file.write_all_at(&head, 0)?;
            file.sync_all()?;
            // The file's name is durable before a manifest names it.
            sync_dir(&self.opts.dir)
        })();
        if let Err(e) = created {
            let _ = fs::remove_file(&path);
            return Err(io_at(&path, e));
        }
        let mut m = st.manifest.clone();
        m.segments.push(id);
        m.store(&self.opts.dir).map_err(|e| io_at(&self.path(MANIFEST), e))?;
        st.manifest = m;
        Ok(SegFile::new(id, file, SEGMENT_HEADER_LEN as u64, size, marked, 0, (1, size)))
    }

    /// Deletes the snapshot and segment files the manifest does not name. Holds the state lock.
    /// At start-up they are leftovers of an interrupted snapshot or rewrite, each logged;
    /// otherwise the files a snapshot just replaced.
    fn cleanup(&self, m: &Manifest, startup: bool) {
        let Ok(dir) = fs::read_dir(&self.opts.dir) else { return };
        for entry in dir.flatten() {
            let name = entry.file_name();
            let Some((is_snap, id)) = name.to_str().and_then(manifest::parse_name) else { continue };
            let named = if is_snap { m.snapshot == Some(id) } else { m.segments.contains(&id) };
            if !named {
                match fs::remove_file(entry.path()) {
                    Err(e) => tracing::warn!("cannot remove {}: {e}", entry.path().display()),
                    Ok(()) if startup => tracing::warn!(
                        "removed {}: not named by the MANIFEST (left by an interrupted snapshot or log rewrite)",
                        entry.path().display()
                    ),
                    Ok(()) => tracing::debug!("removed {} (replaced by the new snapshot)", entry.path().display()),
                }
            }
        }
    }

    fn cancel_job(&self, st: &mut State, keys: &mut Locked<'_>) {
        st.requested = false;
        self.bg_active.store(false, Ordering::Release);
        if let Some(job) = st.job.take() {
            job.cancelled.store(true, Ordering::Release);
            keys.for_each_shard(|_, s| drop(s.take_before_write()));
            tracing::info!("background snapshot cancelled by a synchronous save");
        }
    }

    /// SAVE: everything under the caller's locks on every shard.
    fn save(&self, keys: &mut Locked<'_>) -> Result<(), PersistError> {
        assert!(keys.holds_all(), "SAVE needs every shard");
        let mut st = self.state.lock();
        st.generation += 1;
        self.cancel_job(&mut st, keys);
        let seg = if self.opts.appendonly { Some(self.prepare_segment(&mut st)?) } else { None };
        if let Some(seg) = &seg {
            self.pending.lock().segs.push(PendingSeg::new(seg.clone()));
        }
        let snap_id = st.next_id;
        st.next_id += 1;
        let path = self.path(&manifest::snapshot_name(snap_id));
        let now = keys.now_ms();
        let size = write_snapshot(&self.opts.dir, &path, |sink| {
            let mut result = Ok(());
            keys.for_each_shard(|_, s| {
                if result.is_ok() {
                    let (bytes, n) = snapshot::encode_shard(s, now);
                    result = sink(&bytes, n);
                }
            });
            result.map(|()| true)
        })
        .map_err(|e| io_at(&path, e))?
        .expect("a synchronous save is never interrupted");
        let m = Manifest {
            snapshot: Some(snap_id),
            snapshot_size: Some(size),
            segments: seg.iter().map(|s| s.id).collect(),
        };
        m.store(&self.opts.dir).map_err(|e| io_at(&self.path(MANIFEST), e))?;
        st.manifest = m.clone();
        self.cleanup(&m, false);
        self.saved(size, seg.as_deref());
        Ok(())
    }

    fn saved(&self, snapshot_size: u64, seg: Option<&SegFile>) {
        self.last_save.store(now_ms() / 1000, Ordering::Relaxed);
        self.base_size.store(snapshot_size, Ordering::Relaxed);
        self.aof_size.store(seg.map_or(0, |s| s.len.load(Ordering::Relaxed)), Ordering::Relaxed);
        self.rewrites.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts a background snapshot (steps 1 and 2 of the module documentation).
    fn start_rewrite(self: &Arc<Self>, shared: &Arc<Shared>, why: &str) {
        let (generation, seg) = {
            let mut st = self.state.lock();
            if st.job.is_some() {
                return;
            }
            let seg = if self.opts.appendonly {
                match self.prepare_segment(&mut st) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::error!("background snapshot not started: {e}");
                        st.requested = false;
                        self.bg_active.store(false, Ordering::Release);
                        self.last_bgsave_ok.store(false, Ordering::Relaxed);
                        return;
                    }
                }
            } else {
                None
            };
            (st.generation, seg)
        };
        let mut keys = shared.db.lock_all();
        let mut st = self.state.lock();
        if st.generation != generation || st.job.is_some() {
            return; // a SAVE came in between and wrote its own snapshot
        }
        let mut dirty = 0;
        keys.for_each_shard(|_, s| dirty += s.dirty());
        let job = Arc::new(SnapJob {
            snap_id: st.next_id,
            seg_id: seg.as_ref().map(|s| s.id),
            dirty,
            cancelled: AtomicBool::new(false),
            slots: (0..SHARDS).map(|_| Mutex::new(None)).collect(),
        });
        st.next_id += 1;
        if let Some(seg) = seg {
            self.pending.lock().segs.push(PendingSeg::new(seg));
        }
        let hook: Arc<dyn BeforeWrite> = job.clone();
        keys.for_each_shard(|_, s| s.set_before_write(Some(hook.clone())));
        st.job = Some(job.clone());
        st.requested = false;
        self.bg_active.store(true, Ordering::Release);
        drop(st);
        drop(keys);
        tracing::info!("background snapshot started ({why})");
        let (inner, shared) = (self.clone(), shared.clone());
        let spawned = std::thread::Builder::new()
            .name("sift-snapshot".into())
            .spawn(move || inner.run_job(&shared, &job));
        if let Err(e) = spawned {
            tracing::error!("cannot start the snapshot thread: {e}");
        }
    }

    /// Steps 3 to 5, in the snapshot thread.
    fn run_job(&self, shared: &Shared, job: &Arc<SnapJob>) {
        let path = self.path(&manifest::snapshot_name(job.snap_id));
        let started = Instant::now();
        let result = write_snapshot(&self.opts.dir, &path, |sink| {
            for i in 0..SHARDS {
                if job.cancelled.load(Ordering::Acquire) {
                    return Ok(false);
                }
                shared.db.lock_shards(vec![i]).with_shard(i, |s| match s.take_before_write() {
                    Some(h) if std::ptr::addr_eq(Arc::as_ptr(&h), Arc::as_ptr(job)) => h.before_write(i, s),
                    other => s.set_before_write(other),
                });
                let Some(held) = job.slots[i].lock().take() else {
                    return Ok(false); // cancelled while this shard was visited
                };
                snapshot::write_held(held, sink)?;
            }
            Ok(true)
        });
        let mut st = self.state.lock();
        let current = st.job.as_ref().is_some_and(|j| Arc::ptr_eq(j, job));
        if !current || job.cancelled.load(Ordering::Acquire) {
            if let Ok(Some(_)) = result {
                let _ = fs::remove_file(&path);
            }
            return;
        }
        job.cancelled.store(true, Ordering::Release); // stale hooks become no-ops
        st.job = None;
        self.bg_active.store(false, Ordering::Release);
        let size = match result {
            Ok(Some(size)) => size,
            Ok(None) => return,
            Err(e) => {
                tracing::error!("background snapshot failed: {}: {e}", path.display());
                self.last_bgsave_ok.store(false, Ordering::Relaxed);
                return;
            }
        };
        let segments = match job.seg_id {
            Some(id) => st.manifest.segments.iter().copied().skip_while(|&s| s != id).collect(),
            None => Vec::new(),
        };
        let m = Manifest { snapshot: Some(job.snap_id), snapshot_size: Some(size), segments };
        if let Err(e) = m.store(&self.opts.dir) {
            tracing::error!("background snapshot: storing the manifest failed: {e}");
            self.last_bgsave_ok.store(false, Ordering::Relaxed);
            return;
        }
        st.manifest = m.clone();
        self.cleanup(&m, false);
        let seg = self.pending.lock().segs.last().map(|p| p.seg.clone());
        self.saved(size, seg.as_deref());
        self.last_bgsave_ok.store(true, Ordering::Relaxed);
        shared.dirty_at_save.store(job.dirty, Ordering::Relaxed);
        drop(st);
        tracing::info!(bytes = size, "background snapshot done in {:?}", started.elapsed());
    }

    /// Should the log be rewritten now (size rule, or the `save` rules)?
    fn rewrite_due(&self, shared: &Shared, check_save_rules: bool) -> Option<&'static str> {
        let (pct, min, save) = {
            let c = shared.config.read();
            let pct = c.get("auto-aof-rewrite-percentage").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            let min = c.get("auto-aof-rewrite-min-size").and_then(parse_memory).unwrap_or(u64::MAX);
            (pct, min, c.get("save").unwrap_or("").to_string())
        };
        if self.opts.appendonly && pct > 0 {
            let size = self.aof_size.load(Ordering::Relaxed);
            let base = self.base_size.load(Ordering::Relaxed);
            if size >= min && size.saturating_mul(100) >= base.saturating_mul(pct) {
                return Some("log size");
            }
        }
        if check_save_rules && !save.trim().is_empty() {
            let since = (now_ms() / 1000).saturating_sub(self.last_save.load(Ordering::Relaxed));
            let changes = shared.db.dirty().saturating_sub(shared.dirty_at_save.load(Ordering::Relaxed));
            let nums: Vec<u64> = save.split_whitespace().filter_map(|v| v.parse().ok()).collect();
            if nums.chunks_exact(2).any(|r| changes >= r[1] && r[1] > 0 && since >= r[0]) {
                return Some("save rule");
            }
        }
        None
    }

    /// The background worker: BGSAVE requests, automatic rewrites, `everysec` fsync.
    fn worker(self: Arc<Self>) {
        let tick = Duration::from_millis(50);
        let mut last_fsync = Instant::now();
        let mut last_rules = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            std::thread::sleep(tick);
            if self.opts.appendonly
                && self.opts.fsync == Fsync::EverySec
                && last_fsync.elapsed() >= Duration::from_secs(1)
            {
                last_fsync = Instant::now();
                let seg = self.pending.lock().segs.last().map(|p| p.seg.clone());
                if let Some(seg) = seg {
                    match seg.file.sync_data() {
                        Ok(()) => self.last_fsync_ms.store(now_ms(), Ordering::Relaxed),
                        Err(e) => {
                            self.fail(format!("fsync of {}: {e}", manifest::segment_name(seg.id)));
                        }
                    }
                }
            }
            // With `always` the sync thread preallocates, right after each group.
            if self.opts.appendonly && self.opts.fsync != Fsync::Always && self.opened.load(Ordering::Acquire)
            {
                let _io = self.io.lock();
                self.preallocate_locked();
            }
            let Some(shared) = self.shared() else { continue };
            let (requested, running) = {
                let st = self.state.lock();
                (st.requested, st.job.is_some())
            };
            if running {
                continue;
            }
            let rules = last_rules.elapsed() >= Duration::from_secs(1);
            if rules {
                last_rules = Instant::now();
            }
            let why = if requested { Some("BGSAVE") } else { self.rewrite_due(&shared, rules) };
            if let Some(why) = why {
                self.start_rewrite(&shared, why);
            }
        }
    }

    /// Locks the directory, reads the manifest (or starts a fresh directory) and removes
    /// leftovers.
    fn open(&self) -> Result<Manifest, PersistError> {
        let dir = &self.opts.dir;
        fs::create_dir_all(dir).map_err(|e| io_at(dir, e))?;
        *self.dir_lock.lock() = Some(DirLock::acquire(dir)?);
        let mpath = self.path(MANIFEST);
        let mut found_data = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| io_at(dir, e))?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".tmp") {
                match fs::remove_file(entry.path()) {
                    Ok(()) => tracing::warn!(
                        "removed {}: a temporary file of an interrupted snapshot or manifest update",
                        entry.path().display()
                    ),
                    Err(e) => tracing::warn!("cannot remove {}: {e}", entry.path().display()),
                }
            } else if manifest::parse_name(&name).is_some() {
                found_data.push(name);
            }
        }
        let m = if mpath.exists() {
            Manifest::decode(&read_file(&mpath)?).map_err(|e| corrupt(&mpath, e))?
        } else if !found_data.is_empty() {
            found_data.sort();
            return Err(corrupt(
                &mpath,
                format!(
                    "missing, but the directory holds data files ({}); refusing to guess",
                    found_data.join(", ")
                ),
            ));
        } else {
            Manifest::default()
        };
        for name in m
            .snapshot
            .map(manifest::snapshot_name)
            .into_iter()
            .chain(m.segments.iter().map(|&s| manifest::segment_name(s)))
        {
            if !self.path(&name).exists() {
                return Err(corrupt(&self.path(&name), "named by the MANIFEST but missing"));
            }
        }
        self.cleanup(&m, true);
        Ok(m)
    }

    /// Loads the manifest's snapshot and replays its segments into `keys`, then checks where
    /// the log provably lost records (see the module documentation). At start-up (`startup`)
    /// it also cuts torn tails and closes segments the log left without their segment-end
    /// record. Returns the number of keys loaded and what the last segment holds.
    fn load_into(
        &self,
        m: &Manifest,
        keys: &mut Locked<'_>,
        startup: bool,
    ) -> Result<(usize, Option<SegmentRead>), PersistError> {
        let now = keys.now_ms();
        let mut loaded = 0usize;
        if let Some(id) = m.snapshot {
            let path = self.path(&manifest::snapshot_name(id));
            // Streamed twice (checksum, then entries): a damaged file is refused before a key is
            // loaded, and memory holds the values plus one chunk, never the file itself.
            let open = || File::open(&path).map_err(|e| io_at(&path, e));
            let len = open()?.metadata().map_err(|e| io_at(&path, e))?.len();
            if let Some(size) = m.snapshot_size.filter(|&s| s != len) {
                let what = if len < size { "cut short" } else { "changed" };
                return Err(corrupt(
                    &path,
                    format!("the file is {len} bytes, but it had {size} when it was written: it was {what}"),
                ));
            }
            self.base_size.store(len, Ordering::Relaxed);
            snapshot::verify_stream(open()?, len).map_err(|e| corrupt(&path, e))?;
            snapshot::decode_stream(open()?, len, &LoadLimits::default(), |k, e| {
                if e.expires_at().is_none_or(|t| t > now) {
                    keys.insert_entry(k, e);
                    loaded += 1;
                }
                Ok(())
            })
            .map_err(|e| corrupt(&path, e))?;
        }
        let shared = self.shared();
        let mut reads: Vec<(PathBuf, SegmentRead)> = Vec::new();
        for &id in &m.segments {
            let path = self.path(&manifest::segment_name(id));
            let data = Bytes::from(read_file(&path)?);
            if let Some((tpath, tread)) = reads.iter().find(|(_, r)| r.torn.is_some()) {
                // Only the last segment that holds records may end torn.
                if aof::read_segment(&data, id, |_| {}).is_ok_and(|r| r.holds_records()) {
                    let torn = tread.torn.as_deref().unwrap_or_default();
                    return Err(corrupt(tpath, format!("{torn}, and later segments hold records")));
                }
            }
            let apply = |argv: &[Bytes]| match &shared {
                Some(shared) => {
                    if let Err(e) = crate::cmd::replay(shared, keys, argv) {
                        tracing::warn!("{}: replaying a record failed: {e}", path.display());
                    }
                }
                None => tracing::error!("{}: no server state attached, record not replayed", path.display()),
            };
            let read = aof::read_segment(&data, id, apply)
                .map_err(|e| corrupt(&path, format!("{e}; not loading")))?;
            tracing::debug!(records = read.records, "replayed {}", path.display());
            reads.push((path, read));
        }
        let losses = provable_losses(&reads);
        let at_end = losses.iter().all(|l| l.at_end);
        if !losses.is_empty() {
            let what: Vec<String> = losses.iter().map(|l| l.message.clone()).collect();
            if !(at_end && self.opts.load_truncated) {
                let accept = if at_end {
                    "; to start with what is left, accept the loss with `--aof-load-truncated yes` \
                     (`aof-load-truncated yes` in the config file)"
                } else {
                    ""
                };
                return Err(PersistError::Corrupt(format!("{}; not loading{accept}", what.join("; and "))));
            }
            for w in &what {
                tracing::warn!("{w}; loading what is left (aof-load-truncated yes)");
            }
        }
        if startup {
            let last = reads.len().saturating_sub(1);
            for (i, (path, read)) in reads.iter_mut().enumerate() {
                if let Some(torn) = &read.torn {
                    tracing::warn!(
                        "{}: {torn}, left by a crash during an append that was never acknowledged; cutting the log at offset {} ({} bytes cleared)",
                        path.display(),
                        read.records_end,
                        read.data_end - read.records_end
                    );
                }
                let close = i < last && read.header.version >= 2 && !read.sealed;
                let reclaim = read.missing().is_some();
                if read.torn.is_some() || close || reclaim {
                    fix_segment(path, read, close, reclaim).map_err(|e| io_at(path, e))?;
                }
                if close {
                    tracing::info!(
                        "{}: closed with its segment-end record (the log had moved to the next segment before a crash)",
                        path.display()
                    );
                }
            }
        }
        self.aof_size.store(reads.iter().map(|(_, r)| r.records_end).sum(), Ordering::Relaxed);
        // The keys the snapshot gave, plus those the log created, minus those it deleted: count
        // the keyspace itself (the snapshot's count alone said `keys=0` after a log-only start).
        if !m.segments.is_empty() {
            loaded = 0;
            keys.for_each_shard(|_, s| loaded += s.iter(now).count());
        }
        Ok((loaded, reads.pop().map(|(_, r)| r)))
    }
}

/// A provable loss of log records (see [`provable_losses`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loss {
    /// Index of the segment in the manifest.
    pub index: usize,
    /// No later segment holds records: the loss is at the end of the log.
    pub at_end: bool,
    /// What is missing, naming the file.
    pub message: String,
}

/// Where the segments read (in manifest order) provably lost records: a file shorter than its
/// header's size claim, a closed segment without its segment-end record while a later one holds
/// records.
pub(crate) fn provable_losses(reads: &[(PathBuf, SegmentRead)]) -> Vec<Loss> {
    let last_with_records = reads.iter().rposition(|(_, r)| r.holds_records());
    let mut out = Vec::new();
    for (i, (path, r)) in reads.iter().enumerate() {
        let at_end = last_with_records.is_none_or(|l| l <= i);
        let name = path.display();
        let message = if let Some(missing) = r.missing() {
            format!(
                "{name}: the file is {} bytes, but {} bytes of it had reached the disk: it was cut, and the records of its last {missing} bytes, if any, are lost",
                r.size,
                r.size + missing
            )
        } else if i + 1 < reads.len() && r.header.version >= 2 && !r.sealed && !at_end {
            let next = reads[i + 1..].iter().find(|(_, n)| n.holds_records()).map(|(p, _)| p.display());
            format!(
                "{name}: its segment-end record is missing, though {} after it holds records: its end was cut off after offset {} (the records there are lost)",
                next.map(|n| n.to_string()).unwrap_or_default(),
                r.records_end
            )
        } else {
            continue;
        };
        out.push(Loss { index: i, at_end, message });
    }
    out
}

/// Makes segment `path` (as `read` found it) what recovery keeps: overwrites what follows its
/// kept records with zeros (a torn tail, a transaction without its `EXEC`), with `close` writes
/// its segment-end record there, with `reclaim` lowers its size claim to the file's size (a
/// loss accepted), then syncs.
pub(crate) fn fix_segment(
    path: &Path,
    read: &SegmentRead,
    close: bool,
    reclaim: bool,
) -> std::io::Result<()> {
    let f = OpenOptions::new().write(true).open(path)?;
    let mut at = read.records_end;
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    while at < read.data_end {
        let n = (read.data_end - at).min(ZEROS.len() as u64) as usize;
        f.write_all_at(&ZEROS[..n], at)?;
        at += n as u64;
    }
    if close {
        let mut mark = Vec::new();
        aof::encode_segment_end(read.records_end, read.kept_records, &mut mark);
        f.write_all_at(&mark, read.records_end)?;
    }
    if reclaim {
        let size = f.metadata()?.len();
        let seq = read.header.claim.map_or(1, |(seq, _)| seq + 1);
        let (at, slot) = aof::size_claim(read.header.id, seq, size);
        f.write_all_at(&slot, at as u64)?;
    }
    f.sync_all()
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
        if !self.inner.opts.appendonly {
            return;
        }
        let mut p = self.inner.pending.lock();
        if let Some(last) = p.segs.last_mut() {
            aof::encode_record(argv, &mut last.bytes);
            last.records += 1;
            p.last_lsn += 1;
            self.inner.appended_lsn.store(p.last_lsn, Ordering::Release);
        }
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
        self.inner.save(keys)
    }

    fn bgsave(&self, _keys: &mut Locked<'_>) -> Result<(), PersistError> {
        let mut st = self.inner.state.lock();
        if st.job.is_some() || st.requested {
            return Err(PersistError::Corrupt("Background save already in progress".into()));
        }
        st.requested = true;
        self.inner.bg_active.store(true, Ordering::Release);
        Ok(())
    }

    fn bgsave_in_progress(&self) -> bool {
        self.inner.bg_active.load(Ordering::Acquire)
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
        let running = i.state.lock().job.is_some();
        let ok = |b: bool| if b { "ok".to_string() } else { "err".to_string() };
        vec![
            ("aof_rewrite_in_progress", (running as u8).to_string()),
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
mod tests {
    use super::*;
    use crate::db::Db;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sift-unit-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    fn argv(parts: &[&str]) -> Vec<Bytes> {
        parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
    }

    /// A failed write or fsync fails the commit of its batch and every later one, and makes
    /// `write_error` refuse writes: nothing after it can be acknowledged.
    #[test]
    fn a_failed_log_write_is_sticky() {
        if !Path::new("/dev/full").exists() {
            return;
        }
        let d = dir("full");
        let disk = Disk::new(DiskOptions {
            dir: d.clone(),
            appendonly: true,
            fsync: Fsync::Always,
            load_truncated: false,
        });
        let db = Db::new();
        assert_eq!(disk.load(&mut db.lock_all()).unwrap(), 0);
        disk.record(&argv(&["SET", "a", "1"]));
        disk.commit().unwrap();
        assert!(disk.write_error().is_none());
        // The disk "fills up": writes to the current segment now fail with ENOSPC.
        let full = OpenOptions::new().write(true).open("/dev/full").unwrap();
        disk.inner.pending.lock().segs[0].seg = SegFile::new(99, full, 0, 0, true, 0, (1, 0));
        disk.record(&argv(&["SET", "b", "2"]));
        let e = disk.commit().unwrap_err();
        assert!(e.to_string().contains("log-000000000099.aof"), "{e}");
        assert!(disk.write_error().is_some());
        assert!(disk.commit().is_err(), "the failure is sticky");
        disk.shutdown().unwrap();
        let _ = fs::remove_dir_all(&d);
    }

    /// Records reach the file at commit, in order; a commit with nothing new does no I/O.
    #[test]
    fn group_commit_writes_every_record() {
        let d = dir("group");
        let disk = Disk::new(DiskOptions {
            dir: d.clone(),
            appendonly: true,
            fsync: Fsync::Always,
            load_truncated: false,
        });
        let db = Db::new();
        disk.load(&mut db.lock_all()).unwrap();
        for i in 0..10 {
            disk.record(&argv(&["SET", &format!("k{i}"), "v"]));
        }
        let lsn = disk.inner.pending.lock().last_lsn;
        disk.commit().unwrap();
        assert_eq!(disk.inner.durable_lsn.load(Ordering::Acquire), lsn);
        disk.commit().unwrap();
        let data = Bytes::from(fs::read(d.join(manifest::segment_name(1))).unwrap());
        let mut n = 0;
        let read = aof::read_segment(&data, 1, |a| {
            assert_eq!(a[1], format!("k{n}").as_bytes());
            n += 1;
        })
        .unwrap();
        assert_eq!((read.torn, read.kept_records, n), (None, 10, 10));
        // One write: ten records and the group-end record, in preallocated space.
        assert_eq!(read.size, PREALLOC_CHUNK);
        disk.shutdown().unwrap();
        let _ = fs::remove_dir_all(&d);
    }
}
