//! Writes: the record buffer, group commit, the `appendfsync always` sync thread, preallocation
//! (see "Writes and group commit" in the module documentation).

use super::*;

impl Inner {
    /// Moves every buffered record to its file; closes (segment-end record) and fsyncs the
    /// segments the log left, and with `sync` fsyncs the current one. Caller holds `io`.
    pub(super) fn flush_locked(&self, sync: bool) -> Result<(), PersistError> {
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
    /// A failure only turns preallocation off: the records are then appended, as without it.
    ///
    /// Writers are not held up by it: `io` (which every commit takes) is held only while one
    /// 64 KiB piece of zeros is copied to the page cache, never across the fdatasync, which
    /// takes a hundred milliseconds and more while a snapshot writes its gigabytes to the same
    /// disk. Each piece starts at the records' end read under `io` (records are written only
    /// under it), so the zeros never land on a record; records written meanwhile into space
    /// not yet zeroed are appended as without preallocation, and the claim stays a lower bound
    /// of the file's size.
    pub(super) fn preallocate(&self) {
        if self.prealloc_off.load(Ordering::Relaxed) || self.failed.load(Ordering::Acquire) {
            return;
        }
        // One preallocation at a time: the worker's and, with `always`, the sync thread's.
        let _one = self.prealloc.lock();
        let Some(seg) = self.pending.lock().segs.last().map(|p| p.seg.clone()) else { return };
        let (len, alloc) = (seg.len.load(Ordering::Acquire), seg.alloc.load(Ordering::Acquire));
        if alloc.saturating_sub(len) >= PREALLOC_LOW {
            return;
        }
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let target = (len + PREALLOC_CHUNK).next_multiple_of(PREALLOC_CHUNK);
        let result = (|| -> std::io::Result<()> {
            let mut at = alloc.max(len);
            while at < target {
                let n = (target - at).min(ZEROS.len() as u64);
                let io = self.io.lock();
                let from = at.max(seg.len.load(Ordering::Acquire));
                if from < at + n {
                    seg.file.write_all_at(&ZEROS[(from - at) as usize..n as usize], from)?;
                }
                drop(io);
                at += n;
            }
            #[cfg(test)]
            tests::before_prealloc_sync(self);
            seg.file.sync_data()?;
            let mut claim = seg.claim.lock();
            let (at, slot) = aof::size_claim(seg.id, claim.0 + 1, target);
            seg.file.write_all_at(&slot, at as u64)?;
            *claim = (claim.0 + 1, target);
            Ok(())
        })();
        match result {
            Ok(()) => {
                seg.alloc.fetch_max(target, Ordering::AcqRel);
            }
            Err(e) => {
                tracing::warn!("preallocating {}: {e}; appending without it", manifest::segment_name(seg.id));
                self.prealloc_off.store(true, Ordering::Relaxed);
            }
        }
    }

    pub(super) fn commit(&self, sync: bool) -> Result<(), PersistError> {
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

    pub(super) fn failure_error(&self) -> PersistError {
        PersistError::Io(std::io::Error::other(self.failure.lock().clone().unwrap_or_default()))
    }

    /// The `sift-sync` thread (`appendfsync always`): whenever a connection waits for an LSN
    /// not yet durable, writes and fdatasyncs everything buffered (every waiting connection's
    /// records, and whatever arrived meanwhile) in one go, then notifies the waiters.
    pub(super) fn syncer(self: Arc<Self>) {
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
            // After the waiters are released; it takes `io` only to copy zeros, so the next
            // group does not wait for the zeros' fdatasync.
            self.preallocate();
            wanted = self.sync_wanted.lock();
        }
        drop(wanted);
        self.wake_synced();
    }

    /// Wakes the waiting connections whose records are durable now (all of them after a
    /// failure or at shutdown: they re-check and return).
    pub(super) fn wake_synced(&self) {
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
    pub(super) async fn wait_for(&self, target: u64) -> Result<(), PersistError> {
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
}
