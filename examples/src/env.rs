//! Real servers on 127.0.0.1 for the examples, their tests and their benchmarks: a PostgreSQL
//! instance made with `initdb` and started with `pg_ctl`, `redis-server` (with or without the
//! sift module) and `sift-server`, each on a free port in a private directory, stopped on drop.
//!
//! The demo binaries (`guard-demo`, `jobs-demo`, `feed-demo`) start these at run time, so they
//! live here and not in the workspace's dev-only `sift-testkit`, whose process helpers are alike
//! (a free port, a directory removed on drop, a redis-server ready once it answers PING): a user
//! running a demo does not build test support. The examples' tests use these same helpers, so
//! the code the demos run is the code the tests check.
//!
//! PostgreSQL refuses to run as root. When this process is root, the instance's directory is
//! given to an unprivileged account (`$SIFT_PG_USER`, else `postgres`, the account Debian's
//! `postgresql` package creates) and `initdb`, `pg_ctl` and the server run under its uid. That
//! account must be able to reach the directory: when the temp dir is private to root (a `TMPDIR`
//! of mode 0700, as `mktemp -d` makes), the instance goes under the account's home directory
//! or `/tmp` instead, and is removed from there on drop like any other.
//!
//! A missing program is an error saying what to install (`scripts/test.sh` installs them all):
//! nothing here skips.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tempfile::TempDir;

/// A fresh, private directory under the system's temp dir (`$TMPDIR`, else `/tmp`), its name
/// starting with `sift-examples-{tag}-`; removed with everything in it when the returned value is
/// dropped (also when the program stops on an error or a test panics).
pub fn temp_dir(tag: &str) -> Result<TempDir> {
    temp_dir_in(&std::env::temp_dir(), tag)
}

fn temp_dir_in(parent: &Path, tag: &str) -> Result<TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("sift-examples-{tag}-"))
        .tempdir_in(parent)
        .with_context(|| format!("create a directory under {}", parent.display()))
}

/// A port that was free a moment ago (the servers retry on a collision).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Where PostgreSQL's server programs are: `$PG_BIN`, else the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian keeps them off `PATH`), else `PATH`.
fn pg_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("PG_BIN") {
        return Ok(PathBuf::from(p));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let found = Command::new("initdb").arg("--version").stdout(Stdio::null()).status();
    if found.map(|s| s.success()).unwrap_or(false) {
        return Ok(PathBuf::new());
    }
    bail!(
        "PostgreSQL's initdb was not found (in $PG_BIN, /usr/lib/postgresql/*/bin or PATH): \
         install it with `apt-get install -y postgresql` (scripts/test.sh does)"
    )
}

/// The unprivileged account PostgreSQL runs under when this process is root.
struct PgAccount {
    uid: u32,
    gid: u32,
    name: String,
    home: Option<PathBuf>,
}

/// The account to run PostgreSQL under when this process is root (`None` when it is not).
fn pg_account() -> Result<Option<PgAccount>> {
    if !is_root() {
        return Ok(None);
    }
    let name = std::env::var("SIFT_PG_USER").unwrap_or_else(|_| "postgres".into());
    // `getent passwd` gives uid, gid and home in one line: NAME:x:UID:GID:GECOS:HOME:SHELL.
    let out = Command::new("getent").args(["passwd", &name]).output().context("run getent passwd")?;
    let line = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().to_string();
    let fields: Vec<&str> = line.split(':').collect();
    if !out.status.success() || fields.len() < 7 {
        bail!(
            "running as root, PostgreSQL needs an unprivileged account and `{name}` does not \
             exist: install the postgresql package (it creates `postgres`) or set SIFT_PG_USER"
        );
    }
    let number = |i: usize, what: &str| -> Result<u32> {
        fields[i].parse().with_context(|| format!("the {what} of `{name}` in {line:?}"))
    };
    let home = Some(PathBuf::from(fields[5])).filter(|h| h.is_absolute() && h.is_dir());
    Ok(Some(PgAccount { uid: number(2, "uid")?, gid: number(3, "gid")?, name, home }))
}

/// A directory of its own for a PostgreSQL instance: under the temp dir when the account it runs
/// under (when root) can reach and write it there, else under the account's home or `/tmp`.
fn pg_dir(account: Option<&PgAccount>) -> Result<TempDir> {
    let Some(account) = account else { return temp_dir("pg") };
    let mut parents: Vec<PathBuf> = Vec::new();
    for p in
        [Some(std::env::temp_dir()), account.home.clone(), Some(PathBuf::from("/tmp"))].into_iter().flatten()
    {
        if !parents.contains(&p) {
            parents.push(p);
        }
    }
    for parent in &parents {
        let Ok(dir) = temp_dir_in(parent, "pg") else { continue };
        std::os::unix::fs::chown(dir.path(), Some(account.uid), Some(account.gid))
            .with_context(|| format!("chown {} to {}", dir.path().display(), account.name))?;
        // Every directory above it must let the account through: ask the account itself.
        let reachable = Command::new("test")
            .arg("-w")
            .arg(dir.path())
            .uid(account.uid)
            .gid(account.gid)
            .status()
            .context("run test -w as the PostgreSQL account")?;
        if reachable.success() {
            return Ok(dir);
        }
    }
    bail!(
        "the account `{}` that runs PostgreSQL cannot reach a directory made under any of {parents:?}",
        account.name
    )
}

fn is_root() -> bool {
    // `id -u` rather than libc: one process start, no unsafe.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A PostgreSQL instance of its own: `initdb` in a temporary directory, `pg_ctl start` on a free
/// port of 127.0.0.1 (socket in the same directory), `pg_stat_statements` preloaded, a
/// superuser `sift` and a database `sift` (trust authentication: it listens only locally and
/// lives as long as this value). `pg_ctl stop -m fast` on drop.
pub struct Postgres {
    dir: TempDir,
    bin: PathBuf,
    account: Option<PgAccount>,
    port: u16,
    running: bool,
}

/// Settings for [`Postgres::start`].
#[derive(Clone, Debug, Default)]
pub struct PgOptions {
    /// `fsync=off`, `synchronous_commit=off`, `full_page_writes=off`: for tests, whose data is
    /// thrown away (a crash of the machine is the only thing these protect against).
    pub no_durability: bool,
    /// More `-c name=value` settings.
    pub settings: Vec<(String, String)>,
}

impl Postgres {
    /// Starts an instance (see the type's docs).
    pub fn start(opts: &PgOptions) -> Result<Postgres> {
        let bin = pg_bin()?;
        let account = pg_account()?;
        let dir = pg_dir(account.as_ref())?;
        let data = dir.path().join("data");
        let mut pg = Postgres { dir, bin, account, port: 0, running: false };
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "sift", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C"])
            .output()
            .context("run initdb")?;
        if !out.status.success() {
            bail!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut settings: Vec<(String, String)> = vec![
            ("listen_addresses".into(), "127.0.0.1".into()),
            ("unix_socket_directories".into(), pg.dir.path().display().to_string()),
            ("shared_preload_libraries".into(), "pg_stat_statements".into()),
            ("pg_stat_statements.track".into(), "all".into()),
            ("max_connections".into(), "200".into()),
        ];
        if opts.no_durability {
            for k in ["fsync", "synchronous_commit", "full_page_writes"] {
                settings.push((k.into(), "off".into()));
            }
        }
        settings.extend(opts.settings.iter().cloned());
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let mut o = format!("-p {port}");
            for (k, v) in &settings {
                o.push_str(&format!(" -c {k}={v}"));
            }
            let log = pg.dir.path().join("server.log");
            let out = pg
                .command("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-o", &o, "-w", "-t", "60", "start"])
                .output()
                .context("run pg_ctl start")?;
            if out.status.success() {
                pg.port = port;
                pg.running = true;
                pg.psql("CREATE DATABASE sift")?;
                return Ok(pg);
            }
            last = format!(
                "{}{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        bail!("PostgreSQL did not start: {last}")
    }

    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(self.bin.join(program));
        c.stdin(Stdio::null());
        if let Some(account) = &self.account {
            c.uid(account.uid).gid(account.gid);
            // The account's own home, not root's (initdb and psql read ~ for nothing we need,
            // but an unreadable HOME makes some of them warn).
            c.env("HOME", self.dir.path());
        }
        c
    }

    /// Runs `sql` with `psql` in the `postgres` database (for set-up statements that cannot run
    /// in a transaction, like `CREATE DATABASE`).
    fn psql(&self, sql: &str) -> Result<()> {
        let psql =
            if self.bin.as_os_str().is_empty() { PathBuf::from("psql") } else { self.bin.join("psql") };
        let out = Command::new(psql)
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "sift", "-d", "postgres", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .context("run psql")?;
        if !out.status.success() {
            bail!("psql {sql:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    /// The connection string of the `sift` database, for `tokio_postgres`.
    pub fn url(&self) -> String {
        format!("host=127.0.0.1 port={} user=sift dbname=sift", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            let _ = self
                .command("pg_ctl")
                .arg("-D")
                .arg(self.dir.path().join("data"))
                .args(["-m", "fast", "-w", "-t", "30", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        // `dir` is removed as the fields drop, after the server has stopped.
    }
}

/// A server process (redis-server or sift-server), killed on drop, its directory removed after.
pub struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    /// redis-server's log file (sift-server's log goes nowhere).
    log: Option<PathBuf>,
    // Declared last: removed after `Drop` has killed the process.
    _dir: TempDir,
}

impl Server {
    /// redis-server on a free port, no snapshots, no AOF, `extra` settings appended (e.g.
    /// `["--loadmodule", path]`). Up to five ports are tried (another process may take one
    /// between the check and the bind).
    pub fn redis(extra: &[OsString]) -> Result<Server> {
        let bin = std::env::var_os("SIFT_REDIS_SERVER").unwrap_or_else(|| "redis-server".into());
        let dir = temp_dir("redis")?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let log = dir.path().join(format!("redis-{port}.log"));
            let mut child = Command::new(&bin)
                .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .arg("--logfile")
                .arg(&log)
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| {
                    format!("spawn {bin:?}: install it with `apt-get install -y redis-server` (scripts/test.sh does)")
                })?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            if wait_ready(&mut child, addr) {
                return Ok(Server { child: Some(child), addr, log: Some(log), _dir: dir });
            }
            let _ = child.kill();
            let _ = child.wait();
            last = std::fs::read_to_string(&log).unwrap_or_default();
        }
        bail!("redis-server did not start; its log:\n{last}")
    }

    /// redis-server with the sift module (`libsift_redis.so`, see [`module_path()`]) loaded.
    pub fn redis_with_module() -> Result<Server> {
        let module = module_path()?;
        Server::redis(&["--loadmodule".into(), module.into_os_string()])
    }

    /// The workspace's `sift-server` ([`sift_server_bin`]) on a free port, data in a private
    /// directory.
    pub fn sift() -> Result<Server> {
        let dir = temp_dir("sift")?;
        let mut child = Command::new(sift_server_bin()?)
            .args(["--port", "0", "--appendfsync", "everysec", "--dir"])
            .arg(dir.path())
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("spawn sift-server")?;
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line);
        let addr = read.ok().and_then(|_| line.trim().rsplit(' ').next()?.parse().ok());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("sift-server did not say where it listens (its first line was {line:?})");
        };
        Ok(Server { child: Some(child), addr, log: None, _dir: dir })
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// The server's log (redis-server only).
    pub fn log(&self) -> String {
        self.log.as_ref().and_then(|l| std::fs::read_to_string(l).ok()).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits up to 20 s for the server at `addr` to answer PING with PONG; `false` when `child`
/// exits first or the time runs out.
fn wait_ready(child: &mut Child, addr: SocketAddr) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 64];
            if s.write_all(b"PING\r\n").is_ok()
                && matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
            {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// The target directory holding this executable (`target/<profile>`, or its parent when this is
/// a test in `target/<profile>/deps`).
fn profile_dir() -> Result<(PathBuf, &'static str)> {
    let exe = std::env::current_exe().context("current exe")?;
    let mut dir = exe.parent().context("exe dir")?.to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    let profile = if dir.file_name().is_some_and(|n| n == "release") { "release" } else { "debug" };
    Ok((dir, profile))
}

/// A binary of this workspace next to the running one, built with cargo when missing
/// (`cargo test --workspace` and `cargo build --workspace` have built it already).
fn workspace_bin(env: &str, name: &str, package: &str) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Ok(PathBuf::from(p));
    }
    let (dir, profile) = profile_dir()?;
    let bin = dir.join(name);
    if !bin.exists() {
        build(package, profile, &["--bin", name])?;
    }
    if !bin.exists() {
        bail!("{} is missing after cargo build", bin.display());
    }
    Ok(bin)
}

fn build(package: &str, profile: &str, extra: &[&str]) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.args(["build", "-q", "-p", package]).args(extra);
    if profile == "release" {
        c.arg("--release");
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    c.arg("--manifest-path").arg(manifest);
    let status = c.status().with_context(|| format!("cargo build -p {package}"))?;
    if !status.success() {
        bail!("cargo build -p {package} failed");
    }
    Ok(())
}

/// A binary of this package (`cache-guard`, …) next to the running one, built when missing.
pub fn example_bin(name: &str) -> Result<PathBuf> {
    workspace_bin("SIFT_EXAMPLES_BIN_UNSET", name, env!("CARGO_PKG_NAME"))
}

/// `sift-server`: `$SIFT_SERVER_BIN`, else next to this executable.
pub fn sift_server_bin() -> Result<PathBuf> {
    workspace_bin("SIFT_SERVER_BIN", "sift-server", "sift-server")
}

/// The `sift` CLI: `$SIFT_BIN`, else next to this executable.
pub fn sift_cli_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("SIFT_BIN") {
        return Ok(PathBuf::from(p));
    }
    let (dir, profile) = profile_dir()?;
    let bin = dir.join("sift");
    if !bin.exists() {
        // The package's name may differ from the binary's; `--bin` finds it in the workspace.
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let mut c = Command::new(cargo);
        c.args(["build", "-q", "--bin", "sift", "--manifest-path"]).arg(manifest);
        if profile == "release" {
            c.arg("--release");
        }
        if !c.status().context("cargo build --bin sift")?.success() {
            bail!("cargo build --bin sift failed");
        }
    }
    Ok(bin)
}

/// `libsift_redis.so`: `$SIFT_REDIS_MODULE`, else the one of this profile (built with cargo
/// when missing).
pub fn module_path() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("SIFT_REDIS_MODULE") {
        return Ok(PathBuf::from(p));
    }
    let (dir, profile) = profile_dir()?;
    // `cargo test --workspace` leaves the module in `deps/` only; building it again here (with
    // the features of `cargo build -p sift-redis`, not those of the module's own tests) would
    // replace the one the module's tests load after these.
    let built = dir.join("deps").join("libsift_redis.so");
    if built.exists() {
        return Ok(built);
    }
    let so = dir.join("libsift_redis.so");
    if !so.exists() {
        build("sift-redis", profile, &["--lib"])?;
    }
    if !so.exists() {
        bail!("{} is missing after cargo build -p sift-redis", so.display());
    }
    Ok(so)
}
