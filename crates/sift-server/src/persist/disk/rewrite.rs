//! Snapshots and log rewrite: SAVE, the background rewrite in its thread, the worker that
//! starts it, new segments and the cleanup of files no manifest names (see "Snapshots and log
//! rewrite" in the module documentation).

use super::*;

/// A snapshot being written is synced every this many bytes.
const SNAPSHOT_SYNC_BYTES: u64 = 32 << 20;

/// Writes a snapshot to `final_path` through a temporary file: header, the sections `sections`
/// yields, trailer, fsync, rename, fsync of the directory. Returns the file size.
pub(super) fn write_snapshot(
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
    /// Creates the next segment, preallocated and synced, and stores a manifest that appends
    /// it. Holds `st`.
    pub(super) fn prepare_segment(&self, st: &mut State) -> Result<Arc<SegFile>, PersistError> {
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
    pub(super) fn cleanup(&self, m: &Manifest, startup: bool) {
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

    pub(super) fn cancel_job(&self, st: &mut State, keys: &mut Locked<'_>) {
        if st.active() == Some(JobKind::Snapshot) {
            st.requested = false; // the synchronous save is that snapshot
        }
        st.rewrite_requested = false; // the synchronous save restarts the log
        st.started = None;
        if let Some(job) = st.job.take() {
            job.cancelled.store(true, Ordering::Release);
            keys.for_each_shard(|_, s| drop(s.take_before_write()));
            tracing::info!("background snapshot cancelled by a synchronous save");
        }
    }

    /// SAVE: everything under the caller's locks on every shard.
    pub(super) fn save(&self, keys: &mut Locked<'_>) -> Result<(), PersistError> {
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
                    let mut changed = Vec::new();
                    let (bytes, n) =
                        snapshot::encode_shard(s, now, &mut |k| changed.push(Bytes::copy_from_slice(k)));
                    self.log_prepared(s, &changed);
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

    pub(super) fn saved(&self, snapshot_size: u64, seg: Option<&SegFile>) {
        self.last_save.store(now_ms() / 1000, Ordering::Relaxed);
        self.base_size.store(snapshot_size, Ordering::Relaxed);
        self.aof_size.store(seg.map_or(0, |s| s.len.load(Ordering::Relaxed)), Ordering::Relaxed);
        self.rewrites.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts a background snapshot (steps 1 and 2 of the module documentation).
    /// `rewrite`: started as a log rewrite (see [`SnapJob::rewrite`]).
    pub(super) fn start_rewrite(self: &Arc<Self>, shared: &Arc<Shared>, why: &str, rewrite: bool) {
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
                        st.rewrite_requested = false;
                        st.started = None;
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
            log: Arc::downgrade(self),
            rewrite,
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
        // Only the request this job answers: the other kind, scheduled, runs after it.
        if rewrite {
            st.rewrite_requested = false;
        } else {
            st.requested = false;
        }
        st.started = None;
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
    pub(super) fn run_job(&self, shared: &Shared, job: &Arc<SnapJob>) {
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
    pub(super) fn rewrite_due(&self, shared: &Shared, check_save_rules: bool) -> Option<&'static str> {
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
    pub(super) fn worker(self: Arc<Self>) {
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
                self.preallocate();
            }
            let Some(shared) = self.shared() else { continue };
            let (next, running) = {
                let st = self.state.lock();
                (st.next_request(), st.job.is_some())
            };
            if running {
                continue;
            }
            let rules = last_rules.elapsed() >= Duration::from_secs(1);
            if rules {
                last_rules = Instant::now();
            }
            let why = match next {
                Some(JobKind::Rewrite) => Some("BGREWRITEAOF"),
                Some(JobKind::Snapshot) => Some("BGSAVE"),
                None => self.rewrite_due(&shared, rules),
            };
            if let Some(why) = why {
                self.start_rewrite(&shared, why, matches!(why, "BGREWRITEAOF" | "log size"));
            }
        }
    }
}
