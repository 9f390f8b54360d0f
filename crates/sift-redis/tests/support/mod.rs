//! Starting `redis-server` (or Valkey's `valkey-server`) with the sift-redis module, for tests
//! (and for anyone scripting a cluster or a replica around it).
//!
//! * [`module_path`]: the built `libsift_redis.so`. `SIFT_REDIS_MODULE` wins when set; otherwise
//!   the one `cargo test` built next to this test binary (`target/<profile>/`).
//! * [`RedisServer::start`] / [`RedisServer::start_in`]: `redis-server` on 127.0.0.1 with a free
//!   port, a private (or given) directory, `--loadmodule <module> <module args>` and any extra
//!   configuration, e.g. `&["--appendonly", "yes"]` or `&["--cluster-enabled", "yes"]`; waits
//!   until it answers PING. Killed on drop; [`RedisServer::shutdown`] stops it cleanly.
//! * [`Program`]: which server program loads the module. [`Program::start`] and
//!   [`Program::start_in`] are the two above for a given program; [`Program::valkey`] finds
//!   Valkey 8.0.1 (`../shared/bin/valkey-server` beside the repository, or
//!   `$SIFT_VALKEY_SERVER`), so a test body written against a `&Program` runs on both.
//!
//! ```ignore
//! let primary = RedisServer::start(&[], &["ERROR_RATE", "0.001"]);
//! let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &primary.port().to_string()], &[]);
//! if let Some(valkey) = Program::valkey() {
//!     let node = valkey.start(&["--appendonly", "yes"], &[]);
//! }
//! ```

#![allow(dead_code)]

// The CI rule for a missing external program (fail under `CI=true`, else skip and say so), shared
// with the suite in sift-server's tests. Test binaries that include that suite load this file a
// second time (as `suite::external`): two copies of three small functions, one rule.
#[allow(clippy::duplicate_mod)]
#[path = "../../../sift-server/tests/suite/external.rs"]
mod external;

use std::ffi::OsStr;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The module to load: `$SIFT_REDIS_MODULE`, else `libsift_redis.so` of this build.
pub fn module_path() -> PathBuf {
    if let Some(p) = std::env::var_os("SIFT_REDIS_MODULE") {
        return PathBuf::from(p);
    }
    // This binary is target/<profile>/deps/<test>-<hash>; the cdylib is built by the same
    // `cargo test` (the crate is a cdylib + rlib) into target/<profile>/deps and copied up.
    let exe = std::env::current_exe().expect("current exe");
    let deps = exe.parent().expect("deps dir");
    let candidates =
        [deps.join("libsift_redis.so"), deps.parent().expect("profile dir").join("libsift_redis.so")];
    let newest = candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone())))
        .max()
        .map(|(_, p)| p);
    newest.unwrap_or_else(|| {
        panic!(
            "libsift_redis.so not found next to {} (run `cargo build -p sift-redis`, or set SIFT_REDIS_MODULE)",
            exe.display()
        )
    })
}

/// A fresh, empty directory under the system's temp dir, unique to this process and call.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sift-redis-test-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// A server program that loads the module with redis-server's command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Program {
    /// `redis-server` from `PATH` (Debian's 7.0.15, installed by `scripts/test.sh`).
    Redis,
    /// Valkey's `valkey-server` at this path (8.0.1; Debian 12 has no package, so it comes from
    /// `../shared/bin`, see [`Program::valkey`]).
    Valkey(PathBuf),
}

impl Program {
    /// Where Valkey's server is looked for: `$SIFT_VALKEY_SERVER`, else `bin/valkey-server` in
    /// the `shared` folder beside the repository (CI clones the repository next to it).
    pub fn valkey_path() -> PathBuf {
        match std::env::var_os("SIFT_VALKEY_SERVER") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            // crates/sift-redis → crates → the repository → the folder that holds both.
            _ => Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .nth(3)
                .expect("the repository has a parent folder")
                .join("shared/bin/valkey-server"),
        }
    }

    /// Valkey, when its server is there. When it is not: under `CI=true` the calling test fails
    /// (a skip would let CI pass without running the module on Valkey); elsewhere it prints a
    /// notice and the caller returns.
    #[track_caller]
    pub fn valkey() -> Option<Program> {
        let path = Program::valkey_path();
        if path.is_file() {
            return Some(Program::Valkey(path));
        }
        external::missing(
            &format!("valkey-server (Valkey 8.0.1) at {}", path.display()),
            "it comes from ../shared/bin beside the repository; set SIFT_VALKEY_SERVER to another build",
        );
        None
    }

    /// The program to run.
    pub fn command(&self) -> &OsStr {
        match self {
            Program::Redis => OsStr::new("redis-server"),
            Program::Valkey(path) => path.as_os_str(),
        }
    }

    /// A short name for messages and temporary directories.
    pub fn name(&self) -> &'static str {
        match self {
            Program::Redis => "redis",
            Program::Valkey(_) => "valkey",
        }
    }

    /// The RDB format version its SAVE writes (the `REDIS00nn` magic): Redis 7.0 writes 10,
    /// Valkey 8 writes 11 (which Redis 7.0 refuses to load).
    pub fn rdb_version(&self) -> u32 {
        match self {
            Program::Redis => 10,
            Program::Valkey(_) => 11,
        }
    }

    /// Starts it in a private directory (removed on drop).
    pub fn start(&self, config: &[&str], module_args: &[&str]) -> RedisServer {
        let dir = temp_dir(self.name());
        let mut s = self.start_in(&dir, config, module_args);
        s.own_dir = true;
        s
    }

    /// Starts it in `dir` (kept: restart on the same directory to test persistence).
    /// Defaults: no RDB snapshots on a timer, no AOF, DEBUG allowed; `config` may override them.
    pub fn start_in(&self, dir: &Path, config: &[&str], module_args: &[&str]) -> RedisServer {
        RedisServer::start_program(self, dir, config, module_args)
    }
}

/// Two tests of one body `fn(&Program)`: `$redis` runs it on redis-server, `$valkey` on Valkey
/// (which fails under `CI=true` and is skipped elsewhere when valkey-server is missing, see
/// [`Program::valkey`]). For a test binary that declares `#[macro_use] mod support;`.
#[allow(unused_macros)]
macro_rules! on_redis_and_valkey {
    ($body:path: $redis:ident, $valkey:ident) => {
        #[test]
        fn $redis() {
            $body(&$crate::support::Program::Redis);
        }

        #[test]
        fn $valkey() {
            if let Some(valkey) = $crate::support::Program::valkey() {
                $body(&valkey);
            }
        }
    };
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().unwrap().port()
}

/// A `redis-server` process with the module loaded.
pub struct RedisServer {
    child: Option<Child>,
    /// Its address.
    pub addr: SocketAddr,
    /// Its working directory (RDB, AOF, log).
    pub dir: PathBuf,
    own_dir: bool,
}

impl RedisServer {
    /// Starts redis-server in a private directory (removed on drop).
    pub fn start(config: &[&str], module_args: &[&str]) -> RedisServer {
        Program::Redis.start(config, module_args)
    }

    /// Starts redis-server in `dir` (kept: restart on the same directory to test persistence).
    /// Defaults: no RDB snapshots on a timer, no AOF, DEBUG allowed; `config` may override them.
    pub fn start_in(dir: &Path, config: &[&str], module_args: &[&str]) -> RedisServer {
        Program::Redis.start_in(dir, config, module_args)
    }

    /// [`RedisServer::start_in`] with the given server program (Valkey's `valkey-server` takes
    /// the same command line). Tries up to five free ports (another process may take one
    /// between the check and the bind).
    pub fn start_program(
        program: &Program,
        dir: &Path,
        config: &[&str],
        module_args: &[&str],
    ) -> RedisServer {
        let mut last_log = String::new();
        for _ in 0..5 {
            match RedisServer::try_start_program(program, dir, config, module_args) {
                Ok(s) => return s,
                Err(log) => last_log = log,
            }
        }
        panic!("{} did not start; last log:\n{last_log}", program.command().to_string_lossy());
    }

    /// One attempt at [`RedisServer::start_program`]: the server once it answers PING, or its
    /// log when it exits (or does not answer) first, e.g. a server refusing the files in `dir`.
    pub fn try_start_program(
        program: &Program,
        dir: &Path,
        config: &[&str],
        module_args: &[&str],
    ) -> Result<RedisServer, String> {
        let install = match program {
            Program::Redis => "apt-get install redis-server",
            Program::Valkey(_) => "Valkey 8.0.1 from ../shared/bin, or SIFT_VALKEY_SERVER",
        };
        let port = free_port();
        let log = dir.join(format!("redis-{port}.log"));
        let child = Command::new(program.command())
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(dir)
            .args(["--save", "", "--appendonly", "no", "--enable-debug-command", "yes"])
            .arg("--logfile")
            .arg(&log)
            .arg("--loadmodule")
            .arg(module_path())
            .args(module_args)
            .args(config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {} ({install}): {e}", program.command().to_string_lossy()));
        let mut s = RedisServer {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir: dir.to_path_buf(),
            own_dir: false,
        };
        if s.wait_ready() {
            return Ok(s);
        }
        s.kill();
        Err(std::fs::read_to_string(&log).unwrap_or_default())
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
            if let Ok(mut s) = TcpStream::connect(self.addr) {
                use std::io::{Read, Write};
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

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// `SHUTDOWN` (saving when `save` and an RDB is configured; `NOSAVE` otherwise), then waits
    /// for the process to exit. The directory stays.
    pub fn shutdown(mut self, save: bool) {
        if let Ok(mut s) = TcpStream::connect(self.addr) {
            use std::io::{Read, Write};
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

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if self.own_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
