//! What the workspace's integration tests share when they drive real processes, written once:
//!
//! * [`in_ci`] and [`missing`]: the rule for a missing external program (fail under `CI=true`,
//!   where a skip would let the run pass without it; elsewhere say why the test is skipped);
//! * [`temp_dir`]: a private directory, removed when the test is done with it (also when the test
//!   fails and unwinds);
//! * [`free_port`], and [`require_program`] for the programs a test never runs without;
//! * [`RedisProcess`]: `redis-server` (or Valkey's `valkey-server`) on a free port of 127.0.0.1,
//!   ready once it answers PING, killed on drop;
//! * [`listening_addr`]: the address from `sift-server`'s first stdout line.
//!
//! Only a dev-dependency, never published (`publish = false`).

#![deny(missing_docs)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether this is a CI run: `CI` set to anything but empty, `0` or `false` (CI systems set
/// `CI=true`; `.ci/run` runs with it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// For a test that cannot run because `what` is missing: fails the test under CI (with how to
/// install it), else prints that it is skipped, and the caller returns.
#[track_caller]
pub fn missing(what: &str, install: &str) {
    assert!(!in_ci(), "{what} is missing ({install}); under CI every test must run, none may skip");
    eprintln!("skipped: {what} is missing ({install})");
}

/// Fails the test, with `install` (how to get it), unless `bin --version` runs: for the
/// programs a crate's tests never skip without.
#[track_caller]
pub fn require_program(bin: &str, install: &str) {
    let ok = Command::new(bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "`{bin} --version` failed: these tests need a real {bin} ({install})");
}

/// A free TCP port on 127.0.0.1 (bound and released: the caller starts a server on it, and
/// retries when another process took it in between).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port").local_addr().unwrap().port()
}

/// A fresh, empty directory under the system's temp dir, its name starting with `tag`; removed
/// with everything in it when dropped.
pub fn temp_dir(tag: &str) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("sift-test-{tag}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("create a temp dir under {}: {e}", std::env::temp_dir().display()));
    TempDir(dir)
}

/// A directory from [`temp_dir`], removed on drop; reads as its `Path`.
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Keeps the directory (no longer removed on drop) and returns its path.
    pub fn keep(self) -> PathBuf {
        self.0.keep()
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<OsStr> for TempDir {
    fn as_ref(&self) -> &OsStr {
        self.0.path().as_os_str()
    }
}

/// Whether a server on `addr` answers `PING` with `+PONG` (within two seconds).
pub fn answers_ping(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// The address at the end of the first line `child` writes to its (piped) stdout:
/// `sift-server listening on 127.0.0.1:PORT`. `None` when it exits (or closes stdout) first.
pub fn listening_addr(child: &mut Child) -> Option<SocketAddr> {
    let stdout = child.stdout.take().expect("the child's stdout is piped");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).ok()?;
    if line.is_empty() {
        return None;
    }
    Some(line.trim().rsplit(' ').next().unwrap().parse().unwrap_or_else(|_| panic!("bad line {line:?}")))
}

/// `redis-server` (or a program with its command line, such as Valkey's `valkey-server`) on a
/// free port of 127.0.0.1, killed on drop.
pub struct RedisProcess {
    child: Option<Child>,
    /// Its address.
    pub addr: SocketAddr,
    /// Its log file (`redis-<port>.log` in its directory).
    pub log: PathBuf,
}

impl RedisProcess {
    /// Starts `program` with `--dir dir`, no RDB snapshots on a timer, no AOF, its log in `dir`,
    /// then `args` (which may override those), and waits until it answers PING. Tries up to five
    /// free ports (another process may take one between the check and the bind); `Err` holds
    /// the last attempt's log. Panics, with `install`, when the program cannot be run.
    pub fn start<S: AsRef<OsStr>>(
        program: &OsStr,
        dir: &Path,
        args: &[S],
        install: &str,
    ) -> Result<RedisProcess, String> {
        let mut last_log = String::new();
        for _ in 0..5 {
            match RedisProcess::try_start(program, dir, args, install) {
                Ok(p) => return Ok(p),
                Err(log) => last_log = log,
            }
        }
        Err(last_log)
    }

    /// One attempt at [`RedisProcess::start`]: the server once it answers PING, or its log when
    /// it exits (or does not answer within 20 s) first, e.g. a server refusing the files in `dir`.
    pub fn try_start<S: AsRef<OsStr>>(
        program: &OsStr,
        dir: &Path,
        args: &[S],
        install: &str,
    ) -> Result<RedisProcess, String> {
        let port = free_port();
        let log = dir.join(format!("redis-{port}.log"));
        let child = Command::new(program)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(dir)
            .args(["--save", "", "--appendonly", "no"])
            .arg("--logfile")
            .arg(&log)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {} ({install}): {e}", program.to_string_lossy()));
        let mut p = RedisProcess { child: Some(child), addr: SocketAddr::from(([127, 0, 0, 1], port)), log };
        if p.wait_ready() {
            return Ok(p);
        }
        p.kill();
        Err(p.log())
    }

    /// Waits until the server answers PING (and has finished loading) or exits.
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    return false;
                }
            }
            if answers_ping(self.addr) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Its process id (0 once it is stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `SHUTDOWN SAVE` (when `save`) or `SHUTDOWN NOSAVE`, then waits up to 20 s for the process
    /// to exit (and kills it after that).
    pub fn shutdown(&mut self, save: bool) {
        if let Ok(mut s) = TcpStream::connect(self.addr) {
            let cmd: &[u8] = if save { b"SHUTDOWN SAVE\r\n" } else { b"SHUTDOWN NOSAVE\r\n" };
            let _ = s.write_all(cmd);
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
        }
        if let Some(mut c) = self.child.take() {
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `kill -9`, and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
