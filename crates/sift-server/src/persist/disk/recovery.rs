//! Recovery: opening the directory, loading the snapshot and replaying the log, and the proofs
//! of loss the salvage tool uses (see "Recovery" in the module documentation).

use super::*;

impl Inner {
    /// Locks the directory, reads the manifest (or starts a fresh directory) and removes
    /// leftovers.
    pub(super) fn open(&self) -> Result<Manifest, PersistError> {
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
    pub(super) fn load_into(
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
