//! Real servers on 127.0.0.1 for the examples, their tests and their benchmarks: a PostgreSQL
//! instance made with `initdb` and started with `pg_ctl`, `redis-server` (with or without the
//! sift module) and `sift-server`, each on a free port in a private directory, stopped on drop.
//!
//! PostgreSQL refuses to run as root. When this process is root, the instance's directory is
//! given to an unprivileged account (`$SIFT_PG_USER`, else `postgres`, the account Debian's
//! `postgresql` package creates) and `initdb`, `pg_ctl` and the server run under its uid.
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

/// A fresh directory under the system's temp dir, unique to this process and call, removed by
/// its owner's `Drop`.
pub fn temp_dir(tag: &str) -> Result<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sift-examples-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
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

/// The uid and gid to run PostgreSQL under when this process is root.
fn pg_account() -> Result<Option<(u32, u32, String)>> {
    if !is_root() {
        return Ok(None);
    }
    let user = std::env::var("SIFT_PG_USER").unwrap_or_else(|_| "postgres".into());
    let id = |flag: &str| -> Result<u32> {
        let out = Command::new("id").args([flag, &user]).output().context("run id")?;
        if !out.status.success() {
            bail!(
                "running as root, PostgreSQL needs an unprivileged account and `{user}` does not \
                 exist: install the postgresql package (it creates `postgres`) or set SIFT_PG_USER"
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
    };
    Ok(Some((id("-u")?, id("-g")?, user)))
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
    dir: PathBuf,
    bin: PathBuf,
    account: Option<(u32, u32, String)>,
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
        let dir = temp_dir("pg")?;
        let data = dir.join("data");
        if let Some((uid, gid, _)) = &account {
            std::os::unix::fs::chown(&dir, Some(*uid), Some(*gid)).context("chown the instance directory")?;
        }
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
            ("unix_socket_directories".into(), pg.dir.display().to_string()),
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
            let log = pg.dir.join("server.log");
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
        if let Some((uid, gid, _)) = &self.account {
            c.uid(*uid).gid(*gid);
            // The account's own home, not root's (initdb and psql read ~ for nothing we need,
            // but an unreadable HOME makes some of them warn).
            c.env("HOME", &self.dir);
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
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            let _ = self
                .command("pg_ctl")
                .arg("-D")
                .arg(self.dir.join("data"))
                .args(["-m", "fast", "-w", "-t", "30", "stop"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server process (redis-server or sift-server), killed on drop.
pub struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    dir: PathBuf,
    log: PathBuf,
}

impl Server {
    /// redis-server on a free port, no snapshots, no AOF, `extra` settings appended (e.g.
    /// `["--loadmodule", path]`).
    pub fn redis(extra: &[OsString]) -> Result<Server> {
        let bin = std::env::var_os("SIFT_REDIS_SERVER").unwrap_or_else(|| "redis-server".into());
        let dir = temp_dir("redis")?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let log = dir.join(format!("redis-{port}.log"));
            let child = Command::new(&bin)
                .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
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
            let mut s = Server {
                child: Some(child),
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                dir: dir.clone(),
                log,
            };
            if s.wait_ready() {
                return Ok(s);
            }
            last = s.log();
            s.kill();
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
            .arg(&dir)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("spawn sift-server")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .context("read sift-server's address")?;
        let addr = line
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .parse()
            .with_context(|| format!("sift-server said {line:?}"))?;
        let log = dir.join("none.log");
        Ok(Server { child: Some(child), addr, dir, log })
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(_)) = c.try_wait() {
                    return false;
                }
            }
            if let Ok(mut s) = TcpStream::connect(self.addr) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                if s.write_all(b"PING\r\n").is_ok() {
                    let mut buf = [0u8; 64];
                    if let Ok(n) = s.read(&mut buf) {
                        if buf[..n].starts_with(b"+PONG") {
                            return true;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
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
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
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
