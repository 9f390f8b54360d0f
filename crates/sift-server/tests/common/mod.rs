//! Helpers for driving the real `sift-server` binary on 127.0.0.1 with an ephemeral port.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use sift_testkit::listening_addr;

/// Polls `cond` every 10 ms until it holds, failing after 30 s: for a state the server reaches
/// on its own time (a connection closed, a key expired or swept, a script running), so a test
/// waits for the state itself and not for a guess of how long it takes on a loaded machine.
#[track_caller]
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "waited 30 s for {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A numeric field of `INFO section` (e.g. `connected_clients`), read over `c`.
pub fn info_number(c: &mut Raw, section: &str, field: &str) -> u64 {
    let text = c.cmd_text(&["INFO", section]);
    let line = text
        .split("\r\n")
        .find_map(|l| l.strip_prefix(field).and_then(|v| v.strip_prefix(':')))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {text}"));
    line.parse().unwrap_or_else(|_| panic!("{field}: {line:?}"))
}

/// A running server process, killed on drop (its private data directory is removed too).
pub struct TestServer {
    pub child: Child,
    pub addr: SocketAddr,
    own_dir: Option<TempDir>,
}

/// A fresh, empty directory under the system's temp dir, removed on drop (also when the test
/// fails).
pub use sift_testkit::{temp_dir, TempDir};

impl TestServer {
    /// Starts the binary with `--port 0` plus `args`, and waits for its "listening on" line.
    /// Without a `--dir` in `args`, the server gets a private data directory.
    pub fn start(args: &[&str]) -> TestServer {
        let own_dir = (!args.contains(&"--dir")).then(|| temp_dir("srv"));
        let dir_args: Vec<String> =
            own_dir.iter().flat_map(|d| ["--dir".to_string(), d.display().to_string()]).collect();
        let mut child = Command::new(env!("CARGO_BIN_EXE_sift-server"))
            .args(["--port", "0"])
            .args(&dir_args)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sift-server");
        let addr = listening_addr(&mut child).expect("read address line");
        TestServer { child, addr, own_dir }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.addr)
    }

    pub fn url(&self, resp3: bool) -> String {
        let proto = if resp3 { "?protocol=resp3" } else { "" };
        format!("redis://{}/{proto}", self.addr)
    }

    /// Peak resident memory of the server process, in kB (Linux only).
    pub fn peak_rss_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // `own_dir` (a field) is removed after this, once the process is gone.
    }
}

/// The raw RESP client and request encoder, shared with the BF/CF suite (which the module
/// tests include too).
#[path = "../suite/client.rs"]
mod client;
pub use client::*;

/// Missing external programs: fail under CI, skip elsewhere (shared with the BF/CF suite).
#[path = "../suite/external.rs"]
pub mod external;

/// A server process on a data directory of the test's own (kept across restarts, unlike
/// [`TestServer`]'s), its stderr in a file beside it so the log can be read while it runs and
/// after it is killed; killed on drop.
pub struct Proc {
    pub child: Child,
    pub addr: SocketAddr,
    stderr: std::path::PathBuf,
    /// The directory of `stderr` when [`Proc::start_under`] chose it, removed after the process.
    _log_dir: Option<TempDir>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Starts the server on `dir` with `extra` flags; `Err(status and stderr)` if it exits
    /// instead of listening.
    pub fn start(dir: &std::path::Path, extra: &[&str]) -> Result<Proc, String> {
        Proc::start_under(&[], dir, extra)
    }

    /// [`Proc::start`] under a wrapper program (`wrapper` is its command line, the server's
    /// follows it), e.g. strace: the child process is then the wrapper.
    pub fn start_under(wrapper: &[&str], dir: &std::path::Path, extra: &[&str]) -> Result<Proc, String> {
        // Beside the data directory, not in it: the tests look at what the server writes there.
        let log_dir = temp_dir("stderr");
        let mut p = Proc::start_logged(wrapper, dir, extra, log_dir.join("stderr"))?;
        p._log_dir = Some(log_dir);
        Ok(p)
    }

    /// [`Proc::start_under`] with the server's log in file `stderr` (e.g. off a file system
    /// under test).
    pub fn start_logged(
        wrapper: &[&str],
        dir: &std::path::Path,
        extra: &[&str],
        stderr: std::path::PathBuf,
    ) -> Result<Proc, String> {
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(env!("CARGO_BIN_EXE_sift-server"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_sift-server")),
        };
        let mut child = command
            .args(["--port", "0", "--dir"])
            .arg(dir)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn sift-server");
        let Some(addr) = listening_addr(&mut child) else {
            let status = child.wait().unwrap();
            let text = std::fs::read_to_string(&stderr).unwrap_or_default();
            return Err(format!("exit {status}: {text}"));
        };
        Ok(Proc { child, addr, stderr, _log_dir: None })
    }

    /// [`Proc::start`] with no extra flags, which must succeed.
    pub fn started(dir: &std::path::Path) -> Proc {
        Proc::start(dir, &[]).unwrap_or_else(|e| panic!("the server did not start: {e}"))
    }

    /// Kills the process (SIGKILL) and returns its log.
    pub fn kill9(mut self) -> String {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.log()
    }

    /// What the process logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends signal `sig` (a `kill` name: TERM, INT) to the process.
    pub fn signal(&self, sig: &str) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args([&format!("-{sig}"), &pid]).status().unwrap().success());
    }

    /// Waits until the log contains `text` `times` times (or panics after a minute: the
    /// condition never came).
    pub fn wait_log(&self, text: &str, times: usize) -> String {
        let t = std::time::Instant::now();
        loop {
            let log = self.log();
            if log.matches(text).count() >= times {
                return log;
            }
            assert!(
                t.elapsed() < std::time::Duration::from_secs(60),
                "never logged {text:?} x{times}: {log}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// Runs `sift-server --check-dir dir` with `extra` flags: its exit code and report (stdout,
/// then stderr).
pub fn check_dir(dir: &std::path::Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sift-server"))
        .arg("--check-dir")
        .arg(dir)
        .args(extra)
        .output()
        .expect("run sift-server --check-dir");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

/// Is this a CI run, where a test whose external requirement is missing must fail rather than
/// skip? One rule for every test ([`external::in_ci`]).
pub use external::in_ci;

/// A test's requirement is missing: fails under CI, else says the test is skipped and lets the
/// caller return.
#[track_caller]
pub fn missing(what: &str) {
    assert!(!in_ci(), "{what}: required under CI=true");
    eprintln!("skipped: {what}");
}

/// Where the records of a log segment start (after its header: 24 bytes in version 1, 64 in 2).
pub fn records_start(data: &[u8]) -> usize {
    match u16::from_le_bytes([data[8], data[9]]) {
        1 => 24,
        _ => 64,
    }
}

/// The offsets where records end in log segment `data` (every record boundary after the
/// header, the header's end first), up to the zeros that follow them.
pub fn boundaries(data: &[u8]) -> Vec<usize> {
    let mut off = records_start(data);
    let mut out = vec![off];
    while off + 12 <= data.len() {
        let n = u32::from_le_bytes(data[off..off + 4].try_into().unwrap());
        let check = u32::from_le_bytes(data[off + 4..off + 8].try_into().unwrap());
        if check != !n || off + 12 + n as usize > data.len() {
            break;
        }
        off += 12 + n as usize;
        out.push(off);
    }
    out
}

/// The segment files the data directory's MANIFEST names, in order.
pub fn segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let m = std::fs::read_to_string(dir.join("MANIFEST")).unwrap();
    m.lines().filter_map(|l| l.strip_prefix("segment ")).map(|n| dir.join(n)).collect()
}

/// The snapshot file the MANIFEST names, if any.
pub fn snapshot_file(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let m = std::fs::read_to_string(dir.join("MANIFEST")).unwrap();
    m.lines()
        .filter_map(|l| l.strip_prefix("snapshot "))
        .find(|n| *n != "-")
        .map(|n| dir.join(n.split(' ').next().unwrap()))
}

/// The pid of the only child of process `pid` (the server a wrapper such as strace started:
/// killing the wrapper leaves it running).
pub fn child_of(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// A wrapper ([`Proc::start_under`]) that delays every fdatasync of the server by 500 ms
/// (strace's fault injection): the window in which a record is applied but not yet durable.
pub const SLOW_FDATASYNC: [&str; 9] = [
    "strace",
    "-f",
    "-qq",
    "-o",
    "/dev/null",
    "-e",
    "trace=fdatasync",
    "-e",
    "inject=fdatasync:delay_enter=500000",
];

/// Is strace installed? If not, [`missing`] (which fails under CI).
pub fn has_strace() -> bool {
    let ok = Command::new("strace").arg("-V").output().is_ok();
    if !ok {
        missing("strace (scripts/test.sh installs it)");
    }
    ok
}
