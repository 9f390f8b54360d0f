//! The salvage tool, `sift-server --check-dir DIR [--repair] [--aof-load-truncated yes]`:
//! reports the state of every file of a data directory as recovery sees it (the same reading
//! code: [`super::aof::read_segment`] and the same rules of provable loss) and whether the server
//! would start. Without `--repair` nothing is written.
//!
//! It lives in `sift-server` rather than the `sift` CLI because the file formats are the
//! server's (the CLI knows the library's filter files only), and because whoever runs the
//! server has it at hand, as `redis-check-aof` ships with Redis.
//!
//! `--repair` keeps the longest prefix of the history that can be proven intact, as
//! `redis-check-aof --fix` does: the snapshot, then every record up to the first one that is
//! damaged or missing. It never deletes: a segment whose damaged end it cuts is first copied to
//! `<name>.damaged`, and the segments after the damage are renamed `<name>.dropped` (names the
//! server ignores) and removed from the manifest. A loss at the end of the log is accepted as
//! `aof-load-truncated yes` accepts it (the size claim is lowered). A damaged manifest or
//! snapshot is not repaired: nothing after it can be proven; the report says so.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use sift::compat::redisbloom::LoadLimits;

use super::aof::{self, SegmentError, SegmentRead};
use super::disk::{fix_segment, provable_losses};
use super::lock::{DirLock, LockError};
use super::manifest::{self, Manifest, MANIFEST};
use super::snapshot;

/// What reading one segment gave.
enum SegState {
    Read(SegmentRead),
    Damaged(SegmentError),
    Missing,
}

/// Checks `dir` and writes the report to `out`; with `repair`, first repairs it (see the module
/// documentation). `load_truncated` is the server's `aof-load-truncated`: the verdict and the
/// repair treat a loss at the end of the log as accepted. Returns whether the server would start
/// on the directory as it is left.
pub fn check_dir(
    dir: &Path,
    repair: bool,
    load_truncated: bool,
    out: &mut dyn Write,
) -> std::io::Result<bool> {
    if !dir.is_dir() {
        writeln!(out, "{}: not a directory", dir.display())?;
        return Ok(false);
    }
    writeln!(out, "data directory {}", dir.display())?;
    let _lock = if repair {
        match DirLock::acquire(dir) {
            Ok(lock) => Some(lock),
            Err(e @ LockError::Held { .. }) => {
                writeln!(out, "not repairing: {e}")?;
                return Ok(false);
            }
            Err(e) => return Err(std::io::Error::other(e.to_string())),
        }
    } else {
        match DirLock::holder(dir) {
            Ok(Some(pid)) => writeln!(
                out,
                "in use by {}: the report is a moment of files that may be changing",
                pid.map_or("another process".to_string(), |p| format!("pid {p}"))
            )?,
            Ok(None) => {}
            Err(e) => writeln!(out, "lock: {e}")?,
        }
        None
    };
    let verdict = report(dir, load_truncated, out)?;
    if !repair {
        return Ok(verdict.starts);
    }
    writeln!(out)?;
    if !repair_dir(dir, &verdict, out)? {
        return Ok(false);
    }
    writeln!(out, "\nafter the repair:")?;
    Ok(report(dir, load_truncated, out)?.starts)
}

/// What [`report`] found.
struct Verdict {
    /// The server would start (cutting torn tails as it does).
    starts: bool,
    manifest: Option<Manifest>,
    /// The manifest or the snapshot is damaged or missing: nothing can be repaired.
    base_broken: bool,
    segments: Vec<(PathBuf, SegState)>,
}

fn report(dir: &Path, load_truncated: bool, out: &mut dyn Write) -> std::io::Result<Verdict> {
    let mut verdict = Verdict { starts: true, manifest: None, base_broken: false, segments: Vec::new() };
    let mut reasons: Vec<String> = Vec::new();
    let mpath = dir.join(MANIFEST);
    let mut names: Vec<String> =
        fs::read_dir(dir)?.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let data_files: Vec<&String> = names.iter().filter(|n| manifest::parse_name(n).is_some()).collect();
    let m = match fs::read(&mpath) {
        Ok(bytes) => match Manifest::decode(&bytes) {
            Ok(m) => {
                let segs: Vec<String> = m.segments.iter().map(|&s| manifest::segment_name(s)).collect();
                writeln!(
                    out,
                    "{MANIFEST}: ok; snapshot {}; segments {}",
                    m.snapshot.map_or("none".to_string(), manifest::snapshot_name),
                    if segs.is_empty() { "none".to_string() } else { segs.join(" ") }
                )?;
                Some(m)
            }
            Err(e) => {
                writeln!(out, "{MANIFEST}: DAMAGED: {e}")?;
                reasons.push(format!("{MANIFEST} is damaged"));
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if data_files.is_empty() {
                writeln!(out, "{MANIFEST}: none (an empty directory: the server starts fresh)")?;
                Some(Manifest::default())
            } else {
                writeln!(out, "{MANIFEST}: MISSING, but the directory holds data files")?;
                reasons.push(format!("{MANIFEST} is missing"));
                None
            }
        }
        Err(e) => return Err(e),
    };
    let Some(m) = m else {
        verdict.base_broken = true;
        verdict.starts = false;
        verdict_line(out, &reasons.join("; "))?;
        return Ok(verdict);
    };
    if let Some(id) = m.snapshot {
        let name = manifest::snapshot_name(id);
        let path = dir.join(&name);
        match fs::metadata(&path)
            .and_then(|md| Ok((md.len(), fs::File::open(&path)?, fs::File::open(&path)?)))
        {
            Ok((len, first, second)) => {
                let size_ok = m.snapshot_size.is_none_or(|s| s == len);
                let decoded = if size_ok {
                    snapshot::verify_stream(first, len).and_then(|()| {
                        snapshot::decode_stream(second, len, &LoadLimits::default(), |_, _| Ok(()))
                    })
                } else {
                    Err(format!(
                        "the file is {len} bytes, but it had {} when it was written",
                        m.snapshot_size.unwrap_or_default()
                    ))
                };
                match decoded {
                    Ok(n) => writeln!(out, "{name}: ok; {}, {} bytes", plural(n, "key"), len)?,
                    Err(e) => {
                        writeln!(out, "{name}: DAMAGED: {e}")?;
                        reasons.push(format!("the snapshot {name} is damaged"));
                        verdict.base_broken = true;
                    }
                }
            }
            Err(e) => {
                writeln!(out, "{name}: MISSING ({e})")?;
                reasons.push(format!("the snapshot {name} is missing"));
                verdict.base_broken = true;
            }
        }
    }
    let mut seq = 0u64;
    let mut broken = false;
    for &id in &m.segments {
        let name = manifest::segment_name(id);
        let path = dir.join(&name);
        let state = match fs::read(&path) {
            Ok(data) => match aof::read_segment(&Bytes::from(data), id, |_| {}) {
                Ok(r) => SegState::Read(r),
                Err(e) => SegState::Damaged(e),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => SegState::Missing,
            Err(e) => return Err(e),
        };
        match &state {
            SegState::Read(r) => {
                let first = seq + 1;
                seq += r.kept_records;
                write!(out, "{name}: {}; {}", describe_header(r), plural(r.kept_records, "record"))?;
                if r.kept_records > 0 {
                    write!(out, " (sequence {first}..{seq})")?;
                }
                if let Some(at) = r.last_record_at {
                    write!(out, ", the last at offset {at}")?;
                }
                write!(out, "; records end at {} of {} bytes", r.records_end, r.size)?;
                if r.sealed {
                    write!(out, "; closed (segment-end record)")?;
                }
                writeln!(out)?;
                if let Some(torn) = &r.torn {
                    writeln!(
                        out,
                        "  {torn}: an append that never completed; the server cuts it at start-up ({} bytes)",
                        r.data_end - r.records_end
                    )?;
                }
                if broken {
                    writeln!(out, "  (after damage: not replayed)")?;
                }
            }
            SegState::Damaged(e) => {
                writeln!(out, "{name}: DAMAGED: {e}")?;
                if let Some(i) = &e.intact {
                    writeln!(
                        out,
                        "  intact before the damage: {} records, ending at offset {}",
                        i.kept_records, i.records_end
                    )?;
                }
                reasons.push(format!("{name} is damaged"));
                broken = true;
            }
            SegState::Missing => {
                writeln!(out, "{name}: MISSING")?;
                reasons.push(format!("{name} is missing"));
                broken = true;
            }
        }
        verdict.segments.push((path, state));
    }
    if !broken {
        let reads = readable(&verdict.segments);
        let last_with_records = reads.iter().rposition(|(_, r)| r.holds_records());
        if let Some(i) = reads.iter().position(|(_, r)| r.torn.is_some()) {
            if last_with_records.is_some_and(|l| l > i) {
                let name = file_name(&reads[i].0);
                writeln!(
                    out,
                    "{name}: a torn tail followed by segments holding records: damage, not a torn append"
                )?;
                reasons.push(format!("{name} is damaged"));
            }
        }
        for loss in provable_losses(&reads) {
            writeln!(out, "LOSS: {}", loss.message)?;
            if !(loss.at_end && load_truncated) {
                reasons.push(if loss.at_end {
                    "records at the end of the log are provably lost (aof-load-truncated yes accepts it)"
                        .to_string()
                } else {
                    "records in the middle of the log are provably lost".to_string()
                });
            }
        }
    }
    let named: Vec<String> = m
        .snapshot
        .map(manifest::snapshot_name)
        .into_iter()
        .chain(m.segments.iter().map(|&s| manifest::segment_name(s)))
        .collect();
    for n in &names {
        if (manifest::parse_name(n).is_some() && !named.contains(n)) || n.ends_with(".tmp") {
            writeln!(out, "{n}: leftover of an interrupted operation (the server deletes it at start-up)")?;
        } else if n.ends_with(".damaged") || n.ends_with(".dropped") {
            writeln!(out, "{n}: set aside by a repair (ignored by the server; delete it when done with it)")?;
        }
    }
    verdict.manifest = Some(m);
    if reasons.is_empty() {
        writeln!(out, "verdict: the server starts")?;
    } else {
        verdict.starts = false;
        verdict_line(out, &reasons.join("; "))?;
    }
    Ok(verdict)
}

/// The segments that were read (all of them when none is damaged or missing).
fn readable(segments: &[(PathBuf, SegState)]) -> Vec<(PathBuf, SegmentRead)> {
    segments
        .iter()
        .filter_map(|(p, s)| match s {
            SegState::Read(r) => Some((p.clone(), r.clone())),
            _ => None,
        })
        .collect()
}

fn plural(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn verdict_line(out: &mut dyn Write, why: &str) -> std::io::Result<()> {
    writeln!(out, "verdict: the server refuses to start: {why}")
}

fn describe_header(r: &SegmentRead) -> String {
    let mut s = format!("version {}", r.header.version);
    if r.header.group_marks {
        s.push_str(", group marks");
    }
    if let Some((_, claim)) = r.header.claim {
        s.push_str(&format!(", {claim} bytes reached the disk"));
    }
    s
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Keeps the intact prefix (see the module documentation). Returns false when nothing can be
/// done.
fn repair_dir(dir: &Path, verdict: &Verdict, out: &mut dyn Write) -> std::io::Result<bool> {
    let Some(m) = verdict.manifest.as_ref().filter(|_| !verdict.base_broken) else {
        writeln!(
            out,
            "repair: not possible: the manifest or the snapshot is damaged or missing, so nothing after it can be proven; restore it from a backup"
        )?;
        return Ok(false);
    };
    let reads = readable(&verdict.segments);
    // The segment where the intact history ends, and what is kept of it.
    let mut keep: Option<(usize, Option<SegmentRead>)> = None;
    for (i, (_, state)) in verdict.segments.iter().enumerate() {
        match state {
            SegState::Damaged(e) => {
                keep = Some((i, e.intact.as_deref().cloned()));
                break;
            }
            SegState::Missing => {
                keep = Some((i, None));
                break;
            }
            SegState::Read(_) => {}
        }
    }
    if keep.is_none() {
        let last_with_records = reads.iter().rposition(|(_, r)| r.holds_records());
        if let Some(i) = reads.iter().position(|(_, r)| r.torn.is_some()) {
            if last_with_records.is_some_and(|l| l > i) {
                keep = Some((i, Some(reads[i].1.clone())));
            }
        }
        if keep.is_none() {
            if let Some(loss) = provable_losses(&reads).into_iter().find(|l| !l.at_end) {
                keep = Some((loss.index, Some(reads[loss.index].1.clone())));
            }
        }
    }
    let mut changed = false;
    let mut segments = m.segments.clone();
    let fixed = keep.as_ref().map(|(i, _)| *i);
    if let Some((i, kept)) = keep {
        let drop_from = if kept.is_some() { i + 1 } else { i };
        if let Some(read) = &kept {
            let path = &verdict.segments[i].0;
            let name = file_name(path);
            if read.data_end > read.records_end {
                let backup = dir.join(format!("{name}.damaged"));
                fs::copy(path, &backup)?;
                writeln!(out, "repair: copied {name} to {}", file_name(&backup))?;
            }
            fix_segment(path, read, false, true)?;
            writeln!(
                out,
                "repair: {name} keeps its {} intact records (up to offset {}); the rest is cleared",
                read.kept_records, read.records_end
            )?;
        }
        for (path, _) in &verdict.segments[drop_from..] {
            let name = file_name(path);
            if path.exists() {
                let to = dir.join(format!("{name}.dropped"));
                fs::rename(path, &to)?;
                writeln!(
                    out,
                    "repair: {name} comes after the damage: renamed {} and left out of the log",
                    file_name(&to)
                )?;
            }
        }
        segments.truncate(drop_from);
        changed = true;
    }
    // What the server itself does at start-up: cut torn tails; and accept a loss at the end.
    for (i, (path, state)) in verdict.segments.iter().enumerate().take(segments.len()) {
        let SegState::Read(read) = state else { continue };
        if fixed == Some(i) {
            continue;
        }
        let reclaim = read.missing().is_some();
        if read.torn.is_some() || reclaim {
            if let Some(torn) = &read.torn {
                writeln!(out, "repair: {}: cutting the {torn}", file_name(path))?;
            }
            if reclaim {
                writeln!(out, "repair: {}: accepting the loss of its missing end", file_name(path))?;
            }
            fix_segment(path, read, false, reclaim)?;
            changed = true;
        }
    }
    if segments != m.segments {
        let new = Manifest { segments, ..m.clone() };
        new.store(dir)?;
        writeln!(out, "repair: {MANIFEST} rewritten")?;
    }
    if !changed {
        writeln!(out, "repair: nothing to repair")?;
    }
    Ok(true)
}
