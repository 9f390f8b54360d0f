//! Damaged and contested data directories against the real binary: the directory lock, a log
//! cut at a record boundary (live and closed segments), a truncated snapshot, a torn last group,
//! the salvage tool (`--check-dir`, `--repair`), leftovers logged at start-up, and the shutdown
//! that must not exit when its final snapshot fails.

mod common;

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{boundaries, check_dir, missing, records_start, segments, snapshot_file, temp_dir, Proc, Raw};

/// Does the segment's record at `off` hold the command `SET key ...`? (A record payload:
/// argc, then each argument as length and bytes.)
fn sets_key(data: &[u8], off: usize) -> Option<String> {
    let p = &data[off + 12..];
    let argc = u32::from_le_bytes(p[0..4].try_into().unwrap());
    let len0 = u32::from_le_bytes(p[4..8].try_into().unwrap()) as usize;
    if argc < 3 || &p[8..8 + len0] != b"SET" {
        return None;
    }
    let at = 8 + len0;
    let len1 = u32::from_le_bytes(p[at..at + 4].try_into().unwrap()) as usize;
    Some(String::from_utf8_lossy(&p[at + 4..at + 4 + len1]).into_owned())
}

fn set_batch(c: &mut Raw, keys: std::ops::Range<usize>) {
    let mut out = Vec::new();
    let n = keys.len();
    for i in keys {
        out.extend_from_slice(&common::encode(&["SET", &format!("k{i}"), &format!("v{i}")]));
    }
    c.send(&out);
    for _ in 0..n {
        assert_eq!(c.reply(), b"+OK\r\n");
    }
}

fn dbsize(c: &mut Raw) -> i64 {
    let r = c.cmd_text(&["DBSIZE"]);
    r.trim().trim_start_matches(':').parse().unwrap_or_else(|_| panic!("DBSIZE: {r}"))
}

#[test]
fn a_second_server_on_a_directory_in_use_refuses_and_a_killed_holder_leaves_no_lock() {
    let dir = temp_dir("lock");
    let first = Proc::start(&dir, &[]).unwrap();
    assert_eq!(Raw::connect(first.addr).cmd_text(&["SET", "a", "1"]), "+OK\r\n");
    let err = Proc::start(&dir, &[]).err().expect("a second server on the same directory must not start");
    let pid = first.child.id();
    assert!(err.contains(&dir.display().to_string()) && err.contains(&format!("pid {pid}")), "{err}");
    assert!(err.contains("in use"), "{err}");
    // The salvage tool reports the holder and refuses to repair under it.
    let (code, report) = check_dir(&dir, &[]);
    assert!(report.contains(&format!("in use by pid {pid}")) && code == Some(0), "{report}");
    let (code, report) = check_dir(&dir, &["--repair"]);
    assert!(code == Some(1) && report.contains("not repairing"), "{report}");
    // kill -9: the kernel drops the lock with the process.
    first.kill9();
    let again = Proc::start(&dir, &[]).unwrap_or_else(|e| panic!("a stale lock after kill -9: {e}"));
    assert_eq!(Raw::connect(again.addr).cmd_text(&["GET", "a"]), "$1\r\n1\r\n");
    drop(again);
    let _ = fs::remove_dir_all(&dir);
}

/// `truncate -s <record boundary>` of the live segment (at the end of its records, in the
/// middle, down to its header) is refused, naming the file; `--aof-load-truncated yes` starts
/// with what is left, and the next start is clean.
#[test]
fn a_live_segment_cut_at_a_record_boundary_is_refused() {
    let dir = temp_dir("cut-live");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    set_batch(&mut c, 0..100);
    set_batch(&mut c, 100..200);
    p.kill9();
    let seg = segments(&dir).pop().unwrap();
    let name = seg.file_name().unwrap().to_str().unwrap().to_string();
    let data = fs::read(&seg).unwrap();
    let bounds = boundaries(&data);
    assert!(bounds.len() > 200, "{} boundaries", bounds.len());
    let keys_before =
        |cut: usize| bounds.iter().filter(|&&b| b < cut).filter(|&&b| sets_key(&data, b).is_some()).count();
    for (case, cut) in [
        ("at the end of the records", *bounds.last().unwrap()),
        ("in the middle", bounds[bounds.len() / 2]),
        ("down to the header", records_start(&data)),
    ] {
        let copy = temp_dir("cut-live-copy");
        for f in fs::read_dir(&dir).unwrap().flatten() {
            fs::copy(f.path(), copy.join(f.file_name())).unwrap();
        }
        let target = copy.join(&name);
        fs::OpenOptions::new().write(true).open(&target).unwrap().set_len(cut as u64).unwrap();
        let err = Proc::start(&copy, &[]).err().unwrap_or_else(|| panic!("{case}: started on a cut log"));
        assert!(
            err.contains(&name) && err.contains("cut") && err.contains("aof-load-truncated"),
            "{case}: {err}"
        );
        assert!(err.contains("--check-dir"), "{case}: the refusal names the salvage tool: {err}");
        let (code, report) = check_dir(&copy, &[]);
        assert!(code == Some(1) && report.contains("LOSS") && report.contains(&name), "{case}: {report}");
        // Accepted on purpose: what is left loads, with a warning, and the next start is clean.
        let p =
            Proc::start(&copy, &["--aof-load-truncated", "yes"]).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert!(p.log().contains("aof-load-truncated yes"), "{case}: {}", p.log());
        let mut c = Raw::connect(p.addr);
        assert_eq!(dbsize(&mut c), keys_before(cut) as i64, "{case}");
        assert_eq!(c.cmd_text(&["SET", "after", "1"]), "+OK\r\n");
        p.kill9();
        let p = Proc::start(&copy, &[]).unwrap_or_else(|e| panic!("{case}: after accepting: {e}"));
        assert_eq!(dbsize(&mut Raw::connect(p.addr)), keys_before(cut) as i64 + 1, "{case}");
        drop(p);
        let _ = fs::remove_dir_all(&copy);
    }
    // The untouched directory still starts with everything.
    let p = Proc::start(&dir, &[]).unwrap();
    assert_eq!(dbsize(&mut Raw::connect(p.addr)), 200);
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// A closed segment (the log moved on: here because the fsync policy changed) cut before its
/// segment-end record, while the next segment holds records: refused even with
/// `aof-load-truncated yes` (records are missing in the middle of the history); `--repair`
/// keeps the intact prefix and sets the rest aside.
#[test]
fn a_closed_segment_cut_short_is_refused_and_repair_keeps_the_prefix() {
    let dir = temp_dir("cut-closed");
    let p = Proc::start(&dir, &["--appendfsync", "everysec"]).unwrap();
    set_batch(&mut Raw::connect(p.addr), 0..100);
    p.kill9();
    let p = Proc::start(&dir, &[]).unwrap();
    assert!(p.log().contains("continues in a new segment"), "{}", p.log());
    set_batch(&mut Raw::connect(p.addr), 100..200);
    p.kill9();
    let segs = segments(&dir);
    assert_eq!(segs.len(), 2, "the log moved to a new segment");
    let first = &segs[0];
    let name = first.file_name().unwrap().to_str().unwrap().to_string();
    let data = fs::read(first).unwrap();
    let bounds = boundaries(&data);
    // Cut 10 records and the segment-end record off the end.
    let cut = bounds[bounds.len() - 12];
    fs::OpenOptions::new().write(true).open(first).unwrap().set_len(cut as u64).unwrap();
    for extra in [&[][..], &["--aof-load-truncated", "yes"][..]] {
        let err = Proc::start(&dir, extra).err().expect("must refuse");
        assert!(err.contains(&name) && err.contains("--check-dir"), "{err}");
    }
    let before: Vec<u8> = fs::read(first).unwrap();
    let (code, report) = check_dir(&dir, &[]);
    assert!(code == Some(1) && report.contains("LOSS") && report.contains("middle"), "{report}");
    assert_eq!(fs::read(first).unwrap(), before, "--check-dir without --repair writes nothing");
    let (code, report) = check_dir(&dir, &["--repair"]);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains(".dropped") && report.contains("the server starts"), "{report}");
    let second = segs[1].file_name().unwrap().to_str().unwrap();
    assert!(dir.join(format!("{second}.dropped")).exists(), "set aside, not deleted");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    assert_eq!(dbsize(&mut c), 90, "the intact prefix: the first 90 keys");
    assert_eq!(c.cmd_text(&["GET", "k89"]), "$3\r\nv89\r\n");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_truncated_snapshot_is_refused_and_not_repaired() {
    let dir = temp_dir("cut-snapshot");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    set_batch(&mut c, 0..500);
    assert_eq!(c.cmd_text(&["SAVE"]), "+OK\r\n");
    p.kill9();
    let snap = snapshot_file(&dir).expect("a snapshot");
    let name = snap.file_name().unwrap().to_str().unwrap().to_string();
    let len = fs::metadata(&snap).unwrap().len();
    for cut in [len - 1, len / 2, 10] {
        fs::OpenOptions::new().write(true).open(&snap).unwrap().set_len(cut).unwrap();
        let err = Proc::start(&dir, &[]).err().expect("started on a cut snapshot");
        assert!(err.contains(&name) && err.contains("cut short"), "cut to {cut}: {err}");
        let (code, report) = check_dir(&dir, &[]);
        assert!(code == Some(1) && report.contains(&format!("{name}: DAMAGED")), "{report}");
        let (code, report) = check_dir(&dir, &["--repair"]);
        assert!(code == Some(1) && report.contains("restore it from a backup"), "{report}");
        assert_eq!(fs::metadata(&snap).unwrap().len(), cut, "nothing was touched");
    }
    let _ = fs::remove_dir_all(&dir);
}

/// A flipped byte in the middle of the live segment: refused; `--check-dir` names the offset
/// and what is intact before it; `--repair` copies the file aside and keeps that prefix.
#[test]
fn repair_keeps_the_records_before_the_damage() {
    let dir = temp_dir("repair-corrupt");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    for b in 0..10 {
        set_batch(&mut c, b * 10..b * 10 + 10);
    }
    p.kill9();
    let seg = segments(&dir).pop().unwrap();
    let name = seg.file_name().unwrap().to_str().unwrap().to_string();
    let mut data = fs::read(&seg).unwrap();
    let bounds = boundaries(&data);
    // Damage the record holding k50.
    let at = bounds.iter().copied().find(|&b| sets_key(&data, b).as_deref() == Some("k50")).unwrap();
    data[at + 20] ^= 0x40;
    fs::write(&seg, &data).unwrap();
    let err = Proc::start(&dir, &[]).err().expect("must refuse");
    assert!(
        err.contains(&name) && err.contains(&format!("offset {at}")) && err.contains("--check-dir"),
        "{err}"
    );
    let (code, report) = check_dir(&dir, &[]);
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains(&format!("corrupted record at offset {at}")), "{report}");
    assert!(report.contains(&format!("ending at offset {at}")), "{report}");
    assert_eq!(fs::read(&seg).unwrap(), data, "nothing written without --repair");
    let (code, report) = check_dir(&dir, &["--repair"]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(fs::read(dir.join(format!("{name}.damaged"))).unwrap(), data, "the damaged file is kept");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    assert_eq!(dbsize(&mut c), 50);
    assert_eq!(c.cmd_text(&["GET", "k49"]), "$3\r\nv49\r\n");
    assert_eq!(c.cmd_text(&["SET", "k50", "again"]), "+OK\r\n");
    p.kill9();
    let p = Proc::start(&dir, &[]).unwrap();
    assert_eq!(dbsize(&mut Raw::connect(p.addr)), 51);
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// A record laid out as the log writes it.
fn record(args: &[&[u8]]) -> Vec<u8> {
    let mut payload = (args.len() as u32).to_le_bytes().to_vec();
    for a in args {
        payload.extend_from_slice(&(a.len() as u32).to_le_bytes());
        payload.extend_from_slice(a);
    }
    let n = payload.len() as u32;
    let mut out = n.to_le_bytes().to_vec();
    out.extend_from_slice(&(!n).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// What LazyFS's torn-op fault leaves (the first part of the last, unsynced write lost, a later
/// part on disk whole): with `appendfsync always` the group marks place the damage in the last
/// group written, so the start cuts it with a warning instead of refusing. That group was never
/// acknowledged, so nothing acknowledged is lost.
#[test]
fn a_torn_last_group_with_a_whole_record_after_the_hole_is_cut() {
    let dir = temp_dir("torn-group");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    set_batch(&mut c, 0..100);
    p.kill9();
    let seg = segments(&dir).pop().unwrap();
    let mut data = fs::read(&seg).unwrap();
    let end = *boundaries(&data).last().unwrap();
    // The torn group: three SETs (their group-end record never written), the first one lost.
    let mut group = Vec::new();
    for k in ["t1", "t2", "t3"] {
        group.extend_from_slice(&record(&[b"SET", k.as_bytes(), b"x"]));
    }
    let lost = record(&[b"SET", b"t1", b"x"]).len();
    group[..lost].fill(0);
    data[end..end + group.len()].copy_from_slice(&group);
    fs::write(&seg, &data).unwrap();
    let p = Proc::start(&dir, &[])
        .unwrap_or_else(|e| panic!("a torn, never acknowledged group blocked the start: {e}"));
    let log = p.log();
    let name = seg.file_name().unwrap().to_str().unwrap();
    assert!(log.contains(name) && log.contains(&format!("cutting the log at offset {end}")), "{log}");
    let mut c = Raw::connect(p.addr);
    assert_eq!(dbsize(&mut c), 100);
    assert_eq!(c.cmd_text(&["EXISTS", "t2"]), ":0\r\n");
    assert_eq!(fs::metadata(&seg).unwrap().len(), data.len() as u64, "cut by zeroing: the size claim holds");
    assert_eq!(c.cmd_text(&["SET", "after", "1"]), "+OK\r\n");
    p.kill9();
    let p = Proc::start(&dir, &[]).unwrap();
    assert_eq!(dbsize(&mut Raw::connect(p.addr)), 101);
    assert!(!p.log().contains("cutting the log"), "{}", p.log());
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn leftovers_removed_at_start_up_are_logged_one_by_one() {
    let dir = temp_dir("leftovers");
    let p = Proc::start(&dir, &[]).unwrap();
    assert_eq!(Raw::connect(p.addr).cmd_text(&["SET", "a", "1"]), "+OK\r\n");
    p.kill9();
    let names = [
        "log-000000000077.aof",
        "snapshot-000000000078.sift",
        "snapshot-000000000079.sift.tmp",
        "MANIFEST.tmp",
    ];
    for n in names {
        fs::write(dir.join(n), b"left by a crash").unwrap();
    }
    let p = Proc::start(&dir, &[]).unwrap();
    let log = p.log();
    for n in names {
        assert!(log.lines().any(|l| l.contains("removed") && l.contains(n)), "{n} not logged: {log}");
        assert!(!dir.join(n).exists());
    }
    assert_eq!(Raw::connect(p.addr).cmd_text(&["GET", "a"]), "$1\r\n1\r\n");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// A small tmpfs, unmounted on drop.
struct Tmpfs(common::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = temp_dir("tmpfs");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            missing("mounting a tmpfs (the full-disk test needs root)");
            return None;
        }
        Some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // The directory (the field) is removed after this, once unmounted.
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The lines of a server log that report a failed save's cause (a full disk). The log's
/// preallocation may warn of the same full disk as it happens; that is another event.
fn save_failures(log: &str) -> usize {
    log.lines().filter(|l| l.contains("No space left on device") && !l.contains("preallocating")).count()
}

/// The server's log once it reports `n` failed saves.
fn wait_save_failures(p: &Proc, n: usize) -> String {
    let t = Instant::now();
    loop {
        let log = p.log();
        if save_failures(&log) >= n {
            return log;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "never logged {n} failed saves: {log}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A full disk at shutdown: the final snapshot fails. `SHUTDOWN` answers an error and the
/// server keeps running; SIGTERM does the same (one log line for the cause each time); a
/// second SIGTERM exits with status 1, and every acknowledged write is in the log.
#[test]
fn a_failed_final_snapshot_keeps_the_server_up_for_shutdown_and_sigterm_alike() {
    let Some(fs_) = Tmpfs::mount("8m") else { return };
    // The data directory is the mount itself: the server's log file (beside it) stays off it.
    let dir = fs_.0.to_path_buf();
    let p = Proc::start(&dir, &["--auto-aof-rewrite-percentage", "0"]).unwrap();
    let mut c = Raw::connect(p.addr);
    let big = "x".repeat(2 << 20);
    assert_eq!(c.cmd_text(&["SET", "big", &big]), "+OK\r\n");
    // Fill the rest of the disk.
    let filler = fs_.0.join("filler");
    let _ = fs::write(&filler, vec![1u8; 8 << 20]);
    assert_eq!(c.cmd_text(&["SET", "small", "1"]), "+OK\r\n", "the log still has room");
    assert_eq!(c.cmd_text(&["SHUTDOWN"]), "-ERR Errors trying to SHUTDOWN. Check logs.\r\n");
    assert_eq!(c.cmd_text(&["PING"]), "+PONG\r\n");
    let log = wait_save_failures(&p, 1);
    assert_eq!(save_failures(&log), 1, "the cause logged once: {log}");
    p.signal("TERM");
    let log = wait_save_failures(&p, 2);
    assert!(log.contains("keeps running"), "{log}");
    assert_eq!(c.cmd_text(&["PING"]), "+PONG\r\n", "still serving after a failed SIGTERM snapshot");
    assert_eq!(c.cmd_text(&["SET", "after", "2"]), "+OK\r\n");
    assert_eq!(save_failures(&p.log()), 2, "once per attempt: {}", p.log());
    let mut p = p;
    p.signal("TERM");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "the second SIGTERM did not stop it");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(1), "{}", p.log());
    assert_eq!(save_failures(&p.log()), 2, "{}", p.log());
    drop(p);
    fs::remove_file(&filler).unwrap();
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    assert_eq!(c.cmd_text(&["STRLEN", "big"]), format!(":{}\r\n", big.len()));
    assert_eq!(c.cmd_text(&["GET", "after"]), "$1\r\n2\r\n");
    drop(p);
}

/// The flags the docs name are in `--help` (`--lua-time-limit` was accepted but hidden).
#[test]
fn help_lists_the_flags_the_docs_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_sift-server")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--lua-time-limit", "--aof-load-truncated", "--check-dir", "--repair"] {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
    }
}

/// As docs/PERSISTENCE.md shows: a snapshot creates the segment the log continues in first, so
/// the segment's id is below the snapshot's.
#[test]
fn file_names_are_ordered_as_the_docs_show() {
    let dir = temp_dir("names");
    let p = Proc::start(&dir, &[]).unwrap();
    assert_eq!(Raw::connect(p.addr).cmd_text(&["SAVE"]), "+OK\r\n");
    drop(p);
    let id = |p: &std::path::Path| -> u64 {
        let name = p.file_name().unwrap().to_str().unwrap();
        name.trim_start_matches(|c: char| !c.is_ascii_digit()).split('.').next().unwrap().parse().unwrap()
    };
    let (snap, segs) = (snapshot_file(&dir).unwrap(), segments(&dir));
    assert_eq!(segs.len(), 1);
    assert_eq!(id(&snap), id(&segs[0]) + 1, "{} and {}", snap.display(), segs[0].display());
    let _ = fs::remove_dir_all(&dir);
}

/// A process's `field` (VmHWM, VmRSS) from /proc, in kB.
fn proc_kb(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Recovery streams the snapshot (issue 15 item 8): a server restarting on a snapshot of one
/// ~72 MB filter peaks at no more than 1.2× what it holds once it serves. Reading the file whole
/// peaked near 2× (the file and the filter built from it side by side).
#[test]
fn recovering_a_snapshot_does_not_hold_the_file_in_memory() {
    let dir = temp_dir("stream-load");
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(c.cmd_text(&["BF.RESERVE", "big", "0.01", "60000000"]), "+OK\r\n");
    for i in 0..2000 {
        c.send_cmd(&["BF.ADD", "big", &format!("item{i}")]);
    }
    for _ in 0..2000 {
        c.reply();
    }
    assert_eq!(c.cmd_text(&["SAVE"]), "+OK\r\n");
    let before = c.cmd_text(&["BF.SCANDUMP", "big", "1"]);
    p.kill9();
    let snap = fs::metadata(snapshot_file(&dir).expect("a snapshot")).unwrap().len();
    assert!(snap > 70 << 20, "{snap} bytes");
    let p = Proc::started(&dir);
    let mut c = Raw::connect(p.addr);
    assert_eq!(c.cmd_text(&["BF.SCANDUMP", "big", "1"]), before, "the filter came back");
    let (peak, steady) = (proc_kb(p.child.id(), "VmHWM:"), proc_kb(p.child.id(), "VmRSS:"));
    assert!(steady * 1024 > snap, "steady {steady} kB holds the filter");
    assert!(peak * 10 <= steady * 12, "peak {peak} kB, steady {steady} kB");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// A large Count-Min Sketch is snapshotted and recovered in pieces, like a filter (issue 15
/// item 8): after `BGSAVE` and kill -9, a server restarting on the snapshot of one 96 MB sketch
/// (every counter written) gives the same `DUMP` and peaks at no more than 1.2× what it holds
/// once it serves. With the sketch's dump one chunk, recovery read the whole chunk beside the
/// sketch it built (peak near 2×).
#[test]
fn recovering_a_large_sketch_does_not_hold_its_dump_in_memory() {
    let dir = temp_dir("cms-stream-load");
    let p = Proc::start(&dir, &["--appendonly", "no"]).unwrap();
    let mut c = Raw::connect(p.addr);
    assert_eq!(c.cmd_text(&["CMS.INITBYDIM", "big", "12000000", "2"]), "+OK\r\n");
    for i in 0..2000 {
        c.send_cmd(&["CMS.INCRBY", "big", &format!("item{i}"), &(i % 13 + 1).to_string()]);
    }
    for _ in 0..2000 {
        c.reply();
    }
    // A merge writes every counter: the whole sketch is resident, before and after the restart.
    assert_eq!(c.cmd_text(&["CMS.MERGE", "big", "1", "big"]), "+OK\r\n");
    bgsave_and_wait(&mut c);
    let before = c.cmd(&["DUMP", "big"]);
    assert!(before.len() > 96_000_000, "{} bytes", before.len());
    p.kill9();
    let snap = fs::metadata(snapshot_file(&dir).expect("a snapshot")).unwrap().len();
    assert!(snap > 96_000_000, "{snap} bytes");
    let p = Proc::start(&dir, &["--appendonly", "no"]).unwrap();
    let mut c = Raw::connect(p.addr);
    assert!(c.cmd_text(&["CMS.INFO", "big"]).contains(":12000000"), "the sketch is loaded");
    // Measured before `DUMP`, which builds the whole payload.
    let (peak, steady) = (proc_kb(p.child.id(), "VmHWM:"), proc_kb(p.child.id(), "VmRSS:"));
    assert!(c.cmd(&["DUMP", "big"]) == before, "the sketch came back");
    assert!(steady * 1024 > snap, "steady {steady} kB holds the sketch");
    assert!(peak * 10 <= steady * 12, "peak {peak} kB, steady {steady} kB");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// Every `SCANDUMP` reply of `key` (`cmd` is `BF.SCANDUMP` or `CF.SCANDUMP`), raw, from the
/// first to the one that ends the dump.
fn scandump(c: &mut Raw, cmd: &str, key: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut it = 0i64;
    loop {
        let reply = c.cmd(&[cmd, key, &it.to_string()]);
        let text = String::from_utf8_lossy(&reply[..reply.len().min(40)]).into_owned();
        let rest = text.strip_prefix("*2\r\n:").unwrap_or_else(|| panic!("reply {text:?}"));
        it = rest[..rest.find('\r').unwrap()].parse().unwrap();
        if it == 0 {
            return out;
        }
        out.push(reply);
    }
}

/// An integer reply's value.
fn int(reply: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(reply);
    text.trim_start_matches(':').trim_end().parse().unwrap_or_else(|_| panic!("reply {text:?}"))
}

/// Starts a client sending `op(0)`, `op(1)`, … to key `big` in pipelined batches of 200 (each
/// reply passed to `check`), asks `BGSAVE` on `c` 300 ms later, waits for the snapshot to end
/// and succeed, lets the writer go on 200 ms more, stops it and returns how many operations it
/// Starts a background snapshot and waits (at most 2 minutes) until it has ended well.
fn bgsave_and_wait(c: &mut Raw) {
    assert!(c.cmd_text(&["BGSAVE"]).starts_with("+Background saving started"));
    let t = Instant::now();
    while c.cmd_text(&["INFO", "persistence"]).contains("rdb_bgsave_in_progress:1") {
        assert!(t.elapsed() < Duration::from_secs(120), "the snapshot never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(c.cmd_text(&["INFO", "persistence"]).contains("rdb_last_bgsave_status:ok"));
}

/// sent.
fn bgsave_under_writes(
    c: &mut Raw,
    addr: std::net::SocketAddr,
    op: fn(u64) -> (&'static str, String),
    check: fn(&[u8]),
) -> u64 {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let writer = std::thread::spawn(move || {
        let mut w = Raw::connect(addr);
        let mut n = 0u64;
        while !flag.load(Ordering::Relaxed) {
            for j in n..n + 200 {
                let (cmd, item) = op(j);
                if cmd == "CMS.INCRBY" {
                    w.send_cmd(&[cmd, "big", &item, "1"]);
                } else if cmd == "TOPK.INCRBYSEEDED" {
                    w.send_cmd(&[cmd, "big", &j.to_string(), "counter", "1", &item, "1"]);
                } else {
                    w.send_cmd(&[cmd, "big", &item]);
                }
            }
            for _ in 0..200 {
                check(&w.reply());
            }
            n += 200;
        }
        n
    });
    std::thread::sleep(Duration::from_millis(300));
    bgsave_and_wait(c);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap()
}

/// The four snapshot-under-writes tests' start: a server on a new directory `name` without the
/// log, `big` made by `make`, a background snapshot while one client sends `op` after `op`
/// ([`bgsave_under_writes`], each reply passed to `check`), then kill -9 and a restart from that
/// snapshot alone. Returns the restarted server, a client of it, the operations sent, and the
/// directory.
fn restart_from_a_snapshot_under_writes(
    name: &str,
    make: &dyn Fn(&mut Raw, &str),
    op: fn(u64) -> (&'static str, String),
    check: fn(&[u8]),
) -> (Proc, Raw, u64, common::TempDir) {
    let dir = temp_dir(name);
    let p = Proc::start(&dir, &["--appendonly", "no"]).unwrap();
    let mut c = Raw::connect(p.addr);
    make(&mut c, "big");
    let written = bgsave_under_writes(&mut c, p.addr, op, check);
    p.kill9();
    let p = Proc::start(&dir, &["--appendonly", "no"]).unwrap();
    let c = Raw::connect(p.addr);
    (p, c, written, dir)
}

/// The check after a restart from a snapshot taken under adds of `item0, item1, …` to `big`
/// (`add`, `card` and `dump` are the type's add, count and piecewise dump commands): `big`
/// counts some but not all of the `written` adds, and a `ref` made by `reserve` and fed the same
/// items until it counts as many dumps byte for byte as `big`. Returns `big`'s dump pieces.
fn assert_state_between_two_adds(
    c: &mut Raw,
    [add, card, dump]: [&str; 3],
    written: u64,
    reserve: impl Fn(&mut Raw, &str),
) -> Vec<Vec<u8>> {
    let card = int(&c.cmd(&[card, "big"]));
    assert!(
        card > 0 && (card as u64) < written,
        "{card} counted of {written} written: the epoch fell among the writes"
    );
    reserve(c, "ref");
    let (mut fed, mut counted) = (0u64, 0i64);
    while counted < card {
        // Each add counts at most once, so this many cannot overshoot.
        let batch = (card - counted) as u64;
        for i in fed..fed + batch {
            c.send_cmd(&[add, "ref", &format!("item{i}")]);
        }
        for _ in 0..batch {
            counted += int(&c.reply());
        }
        fed += batch;
    }
    let (restored, reference) = (scandump(c, dump, "big"), scandump(c, dump, "ref"));
    assert_eq!(restored.len(), reference.len());
    for (i, (a, b)) in restored.iter().zip(&reference).enumerate() {
        assert!(a == b, "dump piece {i} differs from the state after {fed} adds");
    }
    restored
}

/// A background snapshot taken while one client keeps adding to a 48 MB filter (three dump
/// chunks) holds the filter exactly as it was at one moment between two of those adds: restarted
/// from that snapshot alone (`--appendonly no`), the filter is byte for byte a fresh filter fed
/// the same items in the same order until it counts as many. A snapshot that took some parts of
/// the filter from before a write and some from after would differ.
#[test]
fn a_snapshot_taken_under_writes_is_the_state_at_its_epoch() {
    let reserve = |c: &mut Raw, key: &str| {
        assert_eq!(c.cmd_text(&["BF.RESERVE", key, "0.01", "40000000"]), "+OK\r\n");
    };
    let (p, mut c, written, dir) =
        restart_from_a_snapshot_under_writes("epoch", &reserve, |i| ("BF.ADD", format!("item{i}")), |_| {});
    assert_state_between_two_adds(&mut c, ["BF.ADD", "BF.CARD", "BF.SCANDUMP"], written, reserve);
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// A sift blocked filter's version of the test above: a background snapshot taken while a
/// client adds to a 16 MB `SF.RESERVE ... KIND blocked` filter (its blocks read after the epoch,
/// piece by piece, while the writer goes on: its sift file is written with the CRC computed as
/// it streams) holds the filter as it was between two adds: restarted from it, the filter's
/// sift file is byte for byte a fresh filter's fed the same items until it counts as many.
#[test]
fn a_sift_blocked_snapshot_taken_under_writes_is_the_state_at_its_epoch() {
    let reserve = |c: &mut Raw, key: &str| {
        assert_eq!(c.cmd_text(&["SF.RESERVE", key, "0.01", "12000000", "KIND", "blocked"]), "+OK\r\n");
    };
    let (p, mut c, written, dir) = restart_from_a_snapshot_under_writes(
        "sf-epoch",
        &reserve,
        |i| ("SF.ADD", format!("item{i}")),
        |_| {},
    );
    let restored = assert_state_between_two_adds(&mut c, ["SF.ADD", "SF.CARD", "SF.DUMP"], written, reserve);
    assert!(restored.iter().map(Vec::len).sum::<usize>() > 8 << 20, "the whole file, large enough to freeze");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// The Count-Min Sketch's version: a background snapshot taken while a client increments a
/// 16 MiB sketch (`CMS.INITBYDIM big 1048576 4`, its counters read after the epoch) holds the
/// sketch as it was between two increments: restarted from it, its `DUMP` is byte for byte a
/// fresh sketch's given the same increments up to the same count.
#[test]
fn a_cms_snapshot_taken_under_writes_is_the_state_at_its_epoch() {
    let init = |c: &mut Raw, key: &str| {
        assert_eq!(c.cmd_text(&["CMS.INITBYDIM", key, "1048576", "4"]), "+OK\r\n");
    };
    let (p, mut c, written, dir) = restart_from_a_snapshot_under_writes(
        "cms-epoch",
        &init,
        |i| ("CMS.INCRBY", format!("item{}", i % 100_000)),
        |_| {},
    );
    let info = c.cmd_text(&["CMS.INFO", "big"]);
    let at = info.find("count\r\n:").unwrap_or_else(|| panic!("count in {info:?}"));
    let k: u64 = info[at + 8..].split('\r').next().unwrap().parse().unwrap();
    assert!(k > 0 && k < written, "{k} increments of {written}: the epoch fell among the writes");
    init(&mut c, "ref");
    for from in (0..k).step_by(1000) {
        let to = (from + 1000).min(k);
        for j in from..to {
            c.send_cmd(&["CMS.INCRBY", "ref", &format!("item{}", j % 100_000), "1"]);
        }
        for _ in from..to {
            c.reply();
        }
    }
    assert!(c.cmd(&["DUMP", "big"]) == c.cmd(&["DUMP", "ref"]), "the sketch after {k} increments");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// The Top-K's version: a background snapshot taken while a client adds to a 32 MB Top-K
/// (`TOPK.RESERVE big 10 2000000 2 0.9`: two pieces of buckets, read after the epoch while the
/// writer goes on) holds it as it was between two adds: restarted from it, its `DUMP` is byte for
/// byte a fresh Top-K's given the same adds up to the same count. The adds are TOPK.ADD's own
/// path with the seed of their decay draws given (`TOPK.INCRBYSEEDED big j counter 1 itemJ 1`,
/// what a TOPK.ADD that drew is logged as), so that the reference draws the same numbers; the
/// `counter` item, given 100 000 first, never decays and counts the adds.
#[test]
fn a_topk_snapshot_taken_under_writes_is_the_state_at_its_epoch() {
    let reserve = |c: &mut Raw, key: &str| {
        assert_eq!(c.cmd_text(&["TOPK.RESERVE", key, "10", "2000000", "2", "0.9"]), "+OK\r\n");
        assert!(c.cmd_text(&["TOPK.INCRBY", key, "counter", "100000"]).starts_with("*1\r\n"));
    };
    let (p, mut c, written, dir) = restart_from_a_snapshot_under_writes(
        "topk-epoch",
        &reserve,
        |i| ("TOPK.INCRBYSEEDED", format!("item{}", i % 200_000)),
        |r| assert!(r.starts_with(b"*2\r\n"), "{}", String::from_utf8_lossy(r)),
    );
    let counted = |c: &mut Raw, key: &str| int(&c.cmd(&["TOPK.COUNT", key, "counter"])[4..]) as u64 - 100_000;
    let k = counted(&mut c, "big");
    assert!(k > 0 && k < written, "{k} adds of {written}: the epoch fell among the writes");
    reserve(&mut c, "ref");
    for from in (0..k).step_by(1000) {
        let to = (from + 1000).min(k);
        for j in from..to {
            let item = format!("item{}", j % 200_000);
            c.send_cmd(&["TOPK.INCRBYSEEDED", "ref", &j.to_string(), "counter", "1", &item, "1"]);
        }
        for _ in from..to {
            c.reply();
        }
    }
    assert_eq!(counted(&mut c, "ref"), k);
    assert!(c.cmd(&["DUMP", "big"]) == c.cmd(&["DUMP", "ref"]), "the Top-K after {k} adds");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// A field of a `CF.INFO` reply (RESP2: name, integer, …).
fn cf_info(c: &mut Raw, key: &str, field: &str) -> i64 {
    let text = c.cmd_text(&["CF.INFO", key]);
    let at = text.find(&format!("{field}\r\n:")).unwrap_or_else(|| panic!("{field} in {text:?}"));
    let rest = &text[at + field.len() + 3..];
    rest[..rest.find('\r').unwrap()].parse().unwrap()
}

/// The writer's operations on the cuckoo filter, in order: every tenth deletes the item added
/// five operations before, the others add an item of their own (deletes of present items
/// always succeed, so the state after `k` operations is a function of `k`).
fn cf_op(j: u64) -> (&'static str, String) {
    if j % 10 == 9 {
        ("CF.DEL", format!("item{}", j - 5))
    } else {
        ("CF.ADD", format!("item{j}"))
    }
}

/// The cuckoo filter's version of the test above: a background snapshot taken while a client
/// adds to and deletes from a 32 MiB filter (two dump chunks; its slots are read after the
/// epoch, piece by piece, while the writer goes on) holds the filter exactly as it was between
/// two operations: restarted from it, the filter is byte for byte a fresh one given the same
/// operations up to the same counts of adds and deletes.
#[test]
fn a_cuckoo_snapshot_taken_under_writes_is_the_state_at_its_epoch() {
    let reserve = |c: &mut Raw, key: &str| {
        assert_eq!(c.cmd_text(&["CF.RESERVE", key, "67108864", "BUCKETSIZE", "2"]), "+OK\r\n");
    };
    let (p, mut c, written, dir) =
        restart_from_a_snapshot_under_writes("cf-epoch", &reserve, cf_op, |r| assert_eq!(r, b":1\r\n"));
    let (items, deleted) = (
        cf_info(&mut c, "big", "Number of items inserted"),
        cf_info(&mut c, "big", "Number of items deleted"),
    );
    assert_eq!(
        cf_info(&mut c, "big", "Number of filters"),
        1,
        "no growth, so no compaction resets the deletes"
    );
    let (adds, dels) = ((items + deleted) as u64, deleted as u64);
    // The number of operations that gives these counts.
    let (mut k, mut a, mut d) = (0u64, 0u64, 0u64);
    while (a, d) != (adds, dels) {
        assert!(
            a <= adds && d <= dels && k < written,
            "no prefix of the operations has {adds} adds, {dels} deletes"
        );
        if cf_op(k).0 == "CF.ADD" {
            a += 1
        } else {
            d += 1
        }
        k += 1;
    }
    assert!(k > 0 && k < written, "{k} operations of {written}: the epoch fell among the writes");
    reserve(&mut c, "ref");
    for from in (0..k).step_by(1000) {
        let to = (from + 1000).min(k);
        for j in from..to {
            let (cmd, item) = cf_op(j);
            c.send_cmd(&[cmd, "ref", &item]);
        }
        for _ in from..to {
            assert_eq!(c.reply(), b":1\r\n");
        }
    }
    let (restored, reference) =
        (scandump(&mut c, "CF.SCANDUMP", "big"), scandump(&mut c, "CF.SCANDUMP", "ref"));
    assert_eq!(restored.len(), reference.len());
    assert!(restored.len() >= 3, "the header and two chunks: {}", restored.len());
    for (i, (a, b)) in restored.iter().zip(&reference).enumerate() {
        assert!(a == b, "dump chunk {i} differs from the state after {k} operations");
    }
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// The writer's operations on the quotient filter, in order: every tenth deletes the item
/// added five operations before, the others add an item of their own. Every operation stores
/// or removes one fingerprint (an add stores a copy even when its fingerprint is there, a
/// delete of an added item always finds one), so `SF.CARD` after `k` of them is the adds minus
/// the deletes among them.
fn quotient_op(j: u64) -> (&'static str, String) {
    if j % 10 == 9 {
        ("SF.DEL", format!("item{}", j - 5))
    } else {
        ("SF.ADD", format!("item{j}"))
    }
}

fn quotient_reserve(c: &mut Raw, key: &str) {
    // 12.6 million quotients at 7-bit remainders: a table of 14 MB.
    assert_eq!(c.cmd_text(&["SF.RESERVE", key, "0.01", "12000000", "KIND", "quotient"]), "+OK\r\n");
}

/// The quotient filter's version: a background snapshot taken while a client adds to and
/// deletes from a 14 MB `SF.RESERVE ... KIND quotient` filter (its table read after the epoch,
/// piece by piece, while inserts and deletes shift runs in it) holds the filter exactly as it
/// was between two operations: restarted from it, its sift file is byte for byte a fresh
/// filter's given the same operations up to the same count.
#[test]
fn a_sift_quotient_snapshot_taken_under_writes_is_the_state_at_its_epoch() {
    let (p, mut c, written, dir) =
        restart_from_a_snapshot_under_writes("sf-quotient-epoch", &quotient_reserve, quotient_op, |r| {
            assert!(r == b":1\r\n" || r == b":0\r\n", "{:?}", String::from_utf8_lossy(r))
        });
    let card = int(&c.cmd(&["SF.CARD", "big"]));
    let restored = scandump(&mut c, "SF.DUMP", "big");
    assert!(
        restored.iter().map(Vec::len).sum::<usize>() > 12 << 20,
        "the whole file, large enough to freeze"
    );
    // The counts of the prefixes go up by one per add and down by one per delete: at most two
    // prefixes (around a delete) have `card` items. The state is one of them.
    quotient_reserve(&mut c, "ref");
    let (mut k, mut items, mut matched) = (0u64, 0i64, None);
    let step = |j: u64| if quotient_op(j).0 == "SF.ADD" { 1 } else { -1 };
    // Pipelined while the count stays below `card - 1` whatever the operations (each adds at
    // most one), then one at a time, comparing the dumps where the count is `card`.
    while card - items > 2 && k < written {
        let n = ((card - items - 2) as u64).min(1000).min(written - k);
        for j in k..k + n {
            let (cmd, item) = quotient_op(j);
            c.send_cmd(&[cmd, "ref", &item]);
        }
        for j in k..k + n {
            c.reply();
            items += step(j);
        }
        k += n;
    }
    while k < written && matched.is_none() {
        let (cmd, item) = quotient_op(k);
        c.cmd(&[cmd, "ref", &item]);
        items += step(k);
        k += 1;
        if items == card && scandump(&mut c, "SF.DUMP", "ref") == restored {
            matched = Some(k);
        }
        assert!(items <= card + 1, "no prefix of the operations leaves {card} items");
    }
    let k =
        matched.unwrap_or_else(|| panic!("no prefix of the {written} operations gives the restored filter"));
    assert!(k > 0 && k < written, "{k} operations of {written}: the epoch fell among the writes");
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// With the log on (`appendfsync always`, the default), a background snapshot taken while a
/// client adds to and deletes from a 14 MB quotient filter loses nothing: killed with SIGKILL
/// right after, the server restarts with every acknowledged add that was not deleted, and
/// exactly as many items as the acknowledged adds minus deletes.
#[test]
fn a_sift_quotient_keeps_every_acknowledged_write_across_a_snapshot_and_kill9() {
    let dir = temp_dir("sf-quotient-acked");
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    quotient_reserve(&mut c, "big");
    let written = bgsave_under_writes(&mut c, p.addr, quotient_op, |r| {
        assert!(r == b":1\r\n" || r == b":0\r\n", "{:?}", String::from_utf8_lossy(r))
    });
    p.kill9();
    let p = Proc::start(&dir, &[]).unwrap();
    let mut c = Raw::connect(p.addr);
    let deletes = (0..written).filter(|j| j % 10 == 9).count() as i64;
    assert_eq!(int(&c.cmd(&["SF.CARD", "big"])), written as i64 - 2 * deletes, "adds minus deletes");
    let kept: Vec<u64> = (0..written).filter(|&j| j % 10 != 9 && j % 10 != 4).collect();
    for batch in kept.chunks(1000) {
        for j in batch {
            c.send_cmd(&["SF.EXISTS", "big", &format!("item{j}")]);
        }
        for j in batch {
            assert_eq!(c.reply(), b":1\r\n", "item{j} was acknowledged and not deleted");
        }
    }
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// A snapshot prepares a live t-digest at its epoch (it compresses its buffered observations,
/// as Redis does before saving). When the snapshot then fails (a full disk), the old snapshot
/// stays the base the log replays onto: the compression must be in the log, at its place among
/// the writes, or a restart answers from another digest than the one that kept running.
#[test]
fn a_failed_snapshot_logs_the_digest_compression_it_made() {
    for (cmd, background) in [("SAVE", false), ("BGSAVE", true)] {
        let Some(fs_) = Tmpfs::mount("8m") else { return };
        let dir = fs_.0.to_path_buf();
        let p = Proc::start(&dir, &["--auto-aof-rewrite-percentage", "0"]).unwrap();
        let mut c = Raw::connect(p.addr);
        // A value too large for the room left: the snapshot fails, the log goes on. The
        // snapshot visits the shards in order and stops at the failure: the digest's shard
        // comes first, the large value's last.
        use sift_server::db::{shard_of, SHARDS};
        let name = |shard: usize| {
            (0..).map(|i| format!("key{i}")).find(|k| shard_of(k.as_bytes()) == shard).unwrap()
        };
        let (td, big) = (name(0), name(SHARDS - 1));
        assert_eq!(c.cmd_text(&["SET", &big, &"x".repeat(3 << 20)]), "+OK\r\n");
        assert_eq!(c.cmd_text(&["TDIGEST.CREATE", &td, "COMPRESSION", "100"]), "+OK\r\n");
        let mut args: Vec<String> = vec!["TDIGEST.ADD".into(), td.clone()];
        args.extend((0..40).map(|i| format!("{}", (i * 37) % 101)));
        assert_eq!(c.cmd_text(&args.iter().map(String::as_str).collect::<Vec<_>>()), "+OK\r\n");
        // Leave 2.5 MiB: room for the segment the snapshot starts (1 MiB) and for the log's
        // preallocation ahead (1 MiB), not for the snapshot (3 MiB).
        let filler = dir.join("filler");
        let _ = fs::write(&filler, vec![1u8; 8 << 20]);
        let filled = fs::metadata(&filler).unwrap().len();
        fs::OpenOptions::new().write(true).open(&filler).unwrap().set_len(filled - (5 << 19)).unwrap();
        let reply = c.cmd_text(&[cmd]);
        if background {
            assert_eq!(reply, "+Background saving started\r\n");
            common::wait_until("the background snapshot to end", || {
                common::info_number(&mut c, "persistence", "rdb_bgsave_in_progress") == 0
            });
            assert!(c.cmd_text(&["INFO", "persistence"]).contains("rdb_last_bgsave_status:err"));
        } else {
            assert!(reply.starts_with("-ERR"), "{cmd} must fail on the full disk: {reply}");
        }
        assert_eq!(c.cmd_text(&["TDIGEST.ADD", &td, "1000", "2000", "-5"]), "+OK\r\n", "{cmd}");
        let info = c.cmd_text(&["TDIGEST.INFO", &td]);
        assert!(
            info.contains("Total compressions\r\n:1\r\n"),
            "{cmd} ({reply}) compressed the digest: {info}\n{}",
            p.log()
        );
        // QUANTILE compresses the buffer too (and is logged for it): INFO after the reads.
        let answers = |c: &mut Raw| {
            [
                c.cmd_text(&["TDIGEST.QUANTILE", &td, "0.01", "0.1", "0.5", "0.9", "0.99"]),
                c.cmd_text(&["TDIGEST.CDF", &td, "-5", "3", "50", "99", "1500"]),
                c.cmd_text(&["TDIGEST.INFO", &td]),
            ]
        };
        let live = answers(&mut c);
        p.kill9();
        fs::remove_file(&filler).unwrap();
        let p = Proc::started(&dir);
        let mut c = Raw::connect(p.addr);
        assert_eq!(answers(&mut c), live, "{cmd}: the digest after a restart from the log");
        drop(p);
    }
}
