//! Power loss, not just a killed process: the data directory lives on LazyFS
//! (<https://github.com/dsrhaslab/lazyfs>, MIT), a FUSE file system that keeps written data in
//! its own cache until it is fsynced and drops everything unsynced on `lazyfs::clear-cache`.
//! A `kill -9` alone proves only that replies follow writes: the page cache survives it.
//!
//! Each round: writers pipeline `BF.ADD`s of unique items and record which were answered; at a
//! moment where ordering bugs hide (plain writes, a snapshot file being written by `BGSAVE` or
//! `SAVE`, a log rewrite, the log just switched to a new segment, `SHUTDOWN`) — reached by
//! watching the directory and the server, not a clock — the server is killed, LazyFS drops
//! the unsynced data, and the server must start again on what is left, with every acknowledged
//! item of every round so far. Then a torn append (LazyFS's `torn-op`: a later part of one
//! unsynced write reaches the disk, an earlier one does not) must not block the start, and a
//! read that saw a write still waiting for its fsync must not be taken back by a power loss.
//!
//! LazyFS is built once into `target/tmp/lazyfs` by `scripts/build_lazyfs.sh` from its source
//! beside the clone (`../shared/tools/lazyfs`, or `SIFT_LAZYFS_SRC`); `scripts/test.sh`
//! installs the packages it needs. Needs root and /dev/fuse. Under `CI=true` a missing piece
//! fails the test; elsewhere it is skipped with a notice.

mod common;

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{child_of, encode, missing, temp_dir, Proc};

/// One mount at a time: the tests of this file run one after the other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The LazyFS source: `SIFT_LAZYFS_SRC`, or `shared/tools/lazyfs` beside the clone (or beside
/// a directory above it, for a worktree).
fn lazyfs_source() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("SIFT_LAZYFS_SRC") {
        return Some(PathBuf::from(p));
    }
    workspace()
        .ancestors()
        .skip(1)
        .map(|a| a.join("shared/tools/lazyfs"))
        .find(|p| p.join("lazyfs/src").is_dir())
}

/// The LazyFS binary, built once; `Err` says what is missing.
fn lazyfs_binary() -> Result<PathBuf, String> {
    if !Path::new("/dev/fuse").exists() {
        return Err("/dev/fuse does not exist".into());
    }
    if Command::new("fusermount3").arg("-V").output().is_err() {
        return Err("fusermount3 is not installed (scripts/test.sh installs fuse3)".into());
    }
    let src = lazyfs_source()
        .ok_or("no LazyFS source (../shared/tools/lazyfs beside the clone, or SIFT_LAZYFS_SRC)")?;
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lazyfs");
    let bin = out.join("bin/lazyfs");
    if !bin.exists() {
        let status = Command::new(workspace().join("scripts/build_lazyfs.sh"))
            .arg(&src)
            .arg(&out)
            .status()
            .map_err(|e| format!("running scripts/build_lazyfs.sh: {e}"))?;
        if !status.success() {
            return Err(format!("scripts/build_lazyfs.sh {} failed ({status})", src.display()));
        }
    }
    Ok(bin)
}

fn mounted(mnt: &Path) -> bool {
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mnt = mnt.to_str().unwrap();
    mounts.lines().any(|l| l.split(' ').nth(1) == Some(mnt))
}

/// A LazyFS mount of a backing directory, unmounted on drop.
struct LazyFs {
    bin: PathBuf,
    work: PathBuf,
    mnt: PathBuf,
    root: PathBuf,
    fifo: PathBuf,
    proc: Option<Child>,
    /// The read end of LazyFS's "fault done" FIFO (it waits for a reader before it serves).
    done: Option<File>,
}

impl LazyFs {
    fn new(bin: PathBuf) -> LazyFs {
        // Kept after a failure (for its logs): `Drop` removes it only when the test passed.
        // LazyFS takes `--config-path P` only when P does not contain "-o" in any case (it reads
        // such a P as a FUSE option and falls back to config/default.toml), so a directory whose
        // random name starts with an o is drawn again.
        let work = (0..100)
            .map(|_| temp_dir("lazyfs"))
            .find(|d| !d.path().to_string_lossy().to_ascii_lowercase().contains("-o"))
            .expect("a temp directory whose path LazyFS takes (no \"-o\" in TMPDIR)")
            .keep();
        let (mnt, root) = (work.join("mnt"), work.join("root"));
        fs::create_dir_all(&mnt).unwrap();
        fs::create_dir_all(&root).unwrap();
        LazyFs { bin, fifo: work.join("faults.fifo"), work, mnt, root, proc: None, done: None }
    }

    /// Mounts it (no eviction, 1 GB cache), with an optional `[[injection]]` fault.
    fn mount(&mut self, injection: Option<&str>) {
        let done = self.work.join("done.fifo");
        let config = self.work.join("lazyfs.toml");
        let mut text = format!(
            "[faults]\nfifo_path=\"{}\"\nfifo_path_completed=\"{}\"\n[cache]\napply_eviction=false\n\
             [cache.simple]\ncustom_size=\"1gb\"\nblocks_per_page=1\n[filesystem]\n\
             log_all_operations=false\nlogfile=\"{}\"\n",
            self.fifo.display(),
            done.display(),
            self.work.join("lazyfs.log").display()
        );
        if let Some(i) = injection {
            text.push_str(i);
        }
        fs::write(&config, text).unwrap();
        let out = File::create(self.work.join("lazyfs.out")).unwrap();
        let child = Command::new(&self.bin)
            .arg(&self.mnt)
            .arg("--config-path")
            .arg(&config)
            .args(["-o", "allow_other", "-o", "modules=subdir", "-o"])
            .arg(format!("subdir={}", self.root.display()))
            .arg("-f")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start lazyfs");
        self.proc = Some(child);
        let t = Instant::now();
        while !mounted(&self.mnt) {
            if let Some(status) = self.proc.as_mut().unwrap().try_wait().unwrap() {
                let out = fs::read_to_string(self.work.join("lazyfs.out")).unwrap_or_default();
                panic!("lazyfs exited ({status}): {out}");
            }
            assert!(t.elapsed() < Duration::from_secs(30), "LazyFS did not mount");
            std::thread::sleep(Duration::from_millis(20));
        }
        while !done.exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.done = Some(OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&done).unwrap());
    }

    /// The power loss, part two: every byte not fsynced is gone.
    fn clear_cache(&mut self) {
        let done = self.done.as_mut().expect("mounted");
        let mut buf = [0u8; 4096];
        while done.read(&mut buf).is_ok_and(|n| n > 0) {}
        OpenOptions::new().write(true).open(&self.fifo).unwrap().write_all(b"lazyfs::clear-cache\n").unwrap();
        let mut got = Vec::new();
        let t = Instant::now();
        while !String::from_utf8_lossy(&got).contains("finished::clear-cache") {
            assert!(t.elapsed() < Duration::from_secs(120), "LazyFS did not confirm clear-cache");
            match done.read(&mut buf) {
                Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    }

    /// Has LazyFS crashed itself (after an injected fault)?
    fn crashed(&mut self) -> bool {
        fs::metadata(&self.mnt).is_err()
            || self.proc.as_mut().is_some_and(|p| p.try_wait().unwrap().is_some())
    }

    fn unmount(&mut self) {
        self.done = None;
        if mounted(&self.mnt) {
            let _ = Command::new("fusermount3").arg("-u").arg(&self.mnt).stderr(Stdio::null()).status();
        }
        if let Some(mut p) = self.proc.take() {
            let t = Instant::now();
            while p.try_wait().unwrap().is_none() {
                if t.elapsed() > Duration::from_secs(10) {
                    let _ = p.kill();
                    let _ = p.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let t = Instant::now();
        while mounted(&self.mnt) && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for LazyFs {
    fn drop(&mut self) {
        self.unmount();
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.work);
        }
    }
}

/// Takes the lock and a LazyFS binary, or `None` (after `missing`, which fails under CI).
fn setup() -> Option<(std::sync::MutexGuard<'static, ()>, PathBuf)> {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    match lazyfs_binary() {
        Ok(bin) => Some((guard, bin)),
        Err(why) => {
            missing(&format!("the power-loss test needs LazyFS: {why}"));
            None
        }
    }
}

/// Starts the server on `dir` (on the mount), its log off the mount.
fn start(dir: &Path, logs: &Path, extra: &[&str]) -> Result<Proc, String> {
    static N: AtomicUsize = AtomicUsize::new(0);
    let log = logs.join(format!("server-{}.log", N.fetch_add(1, Ordering::Relaxed)));
    let mut args = vec!["--appendfsync", "always"];
    args.extend_from_slice(extra);
    Proc::start_logged(&[], dir, &args, log)
}

fn read_line(r: &mut BufReader<TcpStream>) -> std::io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 || !line.ends_with("\r\n") {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

/// Pipelines `BF.ADD key prefix-N` in batches of 50 until `stop` or the connection breaks;
/// returns the items whose reply came (`1`, or `0`: already there — either way acknowledged
/// as in the filter). An error reply does not acknowledge its item.
fn writer(
    addr: SocketAddr,
    key: String,
    prefix: String,
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(stream) = TcpStream::connect(addr) else { return out };
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut w = stream;
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let items: Vec<String> = (n..n + 50).map(|i| format!("{prefix}-{i}")).collect();
        n += 50;
        let mut req = Vec::new();
        for it in &items {
            req.extend_from_slice(&encode(&["BF.ADD", &key, it]));
        }
        if w.write_all(&req).is_err() {
            break;
        }
        for it in items {
            match read_line(&mut r) {
                Ok(l) if l == ":1" || l == ":0" => {
                    out.push(it);
                    acked.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) => {}
                Err(_) => return out,
            }
        }
    }
    out
}

/// Acknowledged items missing from the server at `addr`.
fn lost(addr: SocketAddr, expected: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut w = stream;
    let mut missing = Vec::new();
    for (key, items) in expected {
        for chunk in items.chunks(1000) {
            let mut args = vec!["BF.MEXISTS", key.as_str()];
            args.extend(chunk.iter().map(String::as_str));
            w.write_all(&encode(&args)).unwrap();
            let head = read_line(&mut r).unwrap();
            assert_eq!(head, format!("*{}", chunk.len()), "BF.MEXISTS {key}");
            for it in chunk {
                if read_line(&mut r).unwrap() != ":1" {
                    missing.push(it.clone());
                }
            }
        }
    }
    missing
}

fn info(addr: SocketAddr, field: &str) -> Option<String> {
    let stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut w = stream;
    w.write_all(&encode(&["INFO", "persistence"])).ok()?;
    let head = read_line(&mut r).ok()?;
    let len: usize = head.strip_prefix('$')?.parse().ok()?;
    let mut body = vec![0; len + 2];
    r.read_exact(&mut body).ok()?;
    let text = String::from_utf8_lossy(&body).into_owned();
    let prefix = format!("{field}:");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).map(str::to_string)
}

/// One command on a fresh connection, its first reply line.
fn call(addr: SocketAddr, args: &[&str]) -> std::io::Result<String> {
    let stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut r = BufReader::new(stream.try_clone()?);
    (&stream).write_all(&encode(args))?;
    read_line(&mut r)
}

fn names(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map_or(Vec::new(), |d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
}

/// Waits until `cond` holds (polled), or `limit` passes: a safety net for a moment that
/// never comes, not the condition itself. Returns whether it held.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// The moments a round ends at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moment {
    /// Writes only.
    Writes,
    /// A BGSAVE's snapshot file is being written.
    Bgsave,
    /// A SAVE's snapshot file is being written.
    Save,
    /// An automatic log rewrite is writing its snapshot.
    Rewrite,
    /// The log has just moved to a new segment (a manifest names it), its snapshot not done.
    Switch,
    /// SHUTDOWN (the process exits by itself, status 0).
    Shutdown,
}

/// A snapshot file is being written in `dir`.
fn snapshot_in_flight(dir: &Path) -> bool {
    names(dir).iter().any(|n| n.starts_with("snapshot-") && n.ends_with(".sift.tmp"))
}

/// The manifest names more than one segment: the log moved on, the snapshot not installed.
fn switched(dir: &Path) -> bool {
    fs::read_to_string(dir.join("MANIFEST"))
        .is_ok_and(|m| m.lines().filter(|l| l.starts_with("segment ")).count() > 1)
}

#[test]
fn acknowledged_writes_survive_power_loss_at_every_moment() {
    let Some((_guard, bin)) = setup() else { return };
    let started = Instant::now();
    let mut fs_ = LazyFs::new(bin);
    fs_.mount(None);
    let dir = fs_.mnt.join("data");
    let logs = fs_.work.join("logs");
    fs::create_dir_all(&logs).unwrap();
    // A big filter makes every snapshot take a while (its file is written and synced through
    // FUSE), so that its moments last long enough to be caught by watching the directory.
    let rewrite_args = ["--auto-aof-rewrite-min-size", "64kb", "--auto-aof-rewrite-percentage", "1"];
    let quiet_args = ["--auto-aof-rewrite-percentage", "0"];
    let p = start(&dir, &logs, &quiet_args).unwrap();
    assert_eq!(call(p.addr, &["BF.RESERVE", "big", "0.001", "4000000"]).unwrap(), "+OK");
    drop(p);
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut total_acked, mut rounds) = (0usize, 0usize);
    let mut hits: BTreeMap<String, usize> = BTreeMap::new();
    let moments =
        [Moment::Writes, Moment::Bgsave, Moment::Save, Moment::Rewrite, Moment::Switch, Moment::Shutdown];
    for round in 0..48 {
        let moment = moments[round % moments.len()];
        let extra: &[&str] = if moment == Moment::Rewrite { &rewrite_args } else { &quiet_args };
        let p = start(&dir, &logs, extra).unwrap_or_else(|e| panic!("round {round}: start refused: {e}"));
        let missing_now = lost(p.addr, &expected);
        assert!(
            missing_now.is_empty(),
            "before round {round}: {} acknowledged items lost: {:?}",
            missing_now.len(),
            &missing_now[..missing_now.len().min(5)]
        );
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let (key, prefix) = (format!("k:r{round}:w{w}"), format!("r{round}w{w}"));
                let (stop, acked, addr) = (stop.clone(), acked.clone(), p.addr);
                let k = key.clone();
                (key, std::thread::spawn(move || writer(addr, k, prefix, stop, acked)))
            })
            .collect();
        assert!(
            wait_until(Duration::from_secs(60), || acked.load(Ordering::Relaxed) >= 2000),
            "round {round}: writes stalled"
        );
        let hit = match moment {
            Moment::Writes => true,
            Moment::Bgsave => {
                // (An automatic snapshot of the `save` rules may be running already: fine.)
                let _ = call(p.addr, &["BGSAVE"]);
                wait_until(Duration::from_secs(60), || snapshot_in_flight(&dir))
            }
            Moment::Save => {
                // SAVE blocks its connection until the snapshot is done: sent from a thread.
                let addr = p.addr;
                std::thread::spawn(move || call(addr, &["SAVE"]));
                wait_until(Duration::from_secs(60), || snapshot_in_flight(&dir))
            }
            Moment::Rewrite => wait_until(Duration::from_secs(60), || {
                info(p.addr, "aof_rewrite_in_progress").as_deref() == Some("1") && snapshot_in_flight(&dir)
            }),
            Moment::Switch => {
                let _ = call(p.addr, &["BGSAVE"]);
                wait_until(Duration::from_secs(60), || switched(&dir))
            }
            Moment::Shutdown => true,
        };
        let status: Option<ExitStatus> = if moment == Moment::Shutdown {
            let _ = call(p.addr, &["SHUTDOWN"]);
            let mut p = p;
            let mut status = None;
            assert!(wait_until(Duration::from_secs(120), || {
                status = p.child.try_wait().unwrap();
                status.is_some()
            }));
            status
        } else {
            p.kill9();
            None
        };
        stop.store(true, Ordering::Relaxed);
        let mut round_acked = 0;
        for (key, h) in writers {
            let items = h.join().unwrap();
            round_acked += items.len();
            expected.entry(key).or_default().extend(items);
        }
        fs_.clear_cache();
        if let Some(s) = status {
            assert!(s.success(), "round {round}: SHUTDOWN exited with {s}");
        }
        total_acked += round_acked;
        rounds += 1;
        if hit {
            *hits.entry(format!("{moment:?}")).or_default() += 1;
        }
    }
    let p = start(&dir, &logs, &quiet_args).unwrap_or_else(|e| panic!("final start refused: {e}"));
    let missing_now = lost(p.addr, &expected);
    drop(p);
    eprintln!(
        "power loss: {rounds} rounds, lost={} of acked={total_acked}, starts refused: 0, moments reached: {hits:?}, {:.1} s",
        missing_now.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        missing_now.is_empty(),
        "{} acknowledged items lost: {:?}",
        missing_now.len(),
        &missing_now[..missing_now.len().min(5)]
    );
    for m in ["Bgsave", "Save", "Switch", "Rewrite"] {
        assert!(hits.get(m).is_some_and(|&n| n >= 1), "the {m} moment was never reached: {hits:?}");
    }
}

/// LazyFS's torn-op fault on the live log segment: the `occurrence`-th write to it is cut into
/// three parts, those in `persist` reach the disk, and LazyFS crashes (every other unsynced
/// byte is lost). That write was never synced, so nothing in it was acknowledged: the server
/// must start, cut it with a warning, and keep every acknowledged item.
#[test]
fn a_torn_append_does_not_block_the_start() {
    let Some((_guard, bin)) = setup() else { return };
    for (occurrence, persist) in [(60, "2,3"), (90, "1,3"), (120, "3")] {
        let mut fs_ = LazyFs::new(bin.clone());
        let logs = fs_.work.join("logs");
        fs::create_dir_all(&logs).unwrap();
        let name = format!("torn-{occurrence}");
        let seg = fs_.root.join(&name).join("log-000000000001.aof");
        let fault = format!(
            "[[injection]]\ntype=\"torn-op\"\nfile=\"{}\"\noccurrence={occurrence}\nparts=3\npersist=[{persist}]\n",
            seg.display()
        );
        fs_.mount(Some(&fault));
        let dir = fs_.mnt.join(&name);
        let p = start(&dir, &logs, &[]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let key = format!("k:w{w}");
                let (stop, acked, addr, k) = (stop.clone(), acked.clone(), p.addr, key.clone());
                (key, std::thread::spawn(move || writer(addr, k, format!("w{w}"), stop, acked)))
            })
            .collect();
        let fired = wait_until(Duration::from_secs(120), || fs_.crashed());
        p.kill9();
        stop.store(true, Ordering::Relaxed);
        let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, h) in writers {
            expected.insert(key, h.join().unwrap());
        }
        assert!(fired, "occurrence {occurrence}: the torn-op fault never fired");
        fs_.unmount();
        fs_.mount(None);
        let p = start(&dir, &logs, &[])
            .unwrap_or_else(|e| panic!("occurrence {occurrence}, persist [{persist}]: a torn, unacknowledged append blocked the start: {e}"));
        let missing_now = lost(p.addr, &expected);
        let n: usize = expected.values().map(Vec::len).sum();
        eprintln!(
            "torn-op occurrence {occurrence} persist [{persist}]: lost={} of acked={n}; {}",
            missing_now.len(),
            p.log().lines().find(|l| l.contains("cutting the log")).unwrap_or("no cut needed")
        );
        assert!(missing_now.is_empty(), "{} acknowledged items lost", missing_now.len());
        drop(p);
    }
}

/// Connection A's BF.ADD waits for its fdatasync (slowed to 500 ms by strace); connection C
/// asks whether the item exists. If C is told yes, a power loss must not take the item back
/// (C's answer waits for A's fdatasync).
#[test]
fn what_a_read_saw_survives_power_loss() {
    let Some((_guard, bin)) = setup() else { return };
    if !common::has_strace() {
        return;
    }
    let mut fs_ = LazyFs::new(bin);
    fs_.mount(None);
    let dir = fs_.mnt.join("dirty-read");
    let logs = fs_.work.join("logs");
    fs::create_dir_all(&logs).unwrap();
    let p = Proc::start_logged(
        &common::SLOW_FDATASYNC,
        &dir,
        &["--appendfsync", "always"],
        logs.join("traced.log"),
    )
    .unwrap();
    let server = child_of(p.child.id()).expect("the server under strace");
    assert_eq!(call(p.addr, &["BF.ADD", "k", "warmup"]).unwrap(), ":1");
    let changes = || info(p.addr, "rdb_changes_since_last_save").unwrap();
    let before = changes();
    let a = TcpStream::connect(p.addr).unwrap();
    (&a).write_all(&encode(&["BF.ADD", "k", "X"])).unwrap();
    assert!(wait_until(Duration::from_secs(30), || changes() != before), "A's add never ran");
    let seen = call(p.addr, &["BF.EXISTS", "k", "X"]).unwrap();
    let _ = Command::new("kill").args(["-9", &server.to_string()]).status();
    drop(p);
    fs_.clear_cache();
    let p = start(&dir, &logs, &[]).unwrap();
    let after = call(p.addr, &["BF.EXISTS", "k", "X"]).unwrap();
    eprintln!("dirty read check: C saw {seen}, after the power loss {after}");
    assert_eq!(seen, ":1", "C's answer came after A's add was applied (and synced)");
    assert_eq!(after, ":1", "C was told X exists, and a power loss took it back");
}
