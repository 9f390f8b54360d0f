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

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use sift_testkit::{missing, RedisProcess};
pub use sift_testkit::{temp_dir, TempDir};

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
        missing(
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

    /// How to get it, for the message when it cannot be run.
    fn install(&self) -> &'static str {
        match self {
            Program::Redis => "apt-get install redis-server",
            Program::Valkey(_) => "Valkey 8.0.1 from ../shared/bin, or SIFT_VALKEY_SERVER",
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
        s.own_dir = Some(dir);
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

/// A `redis-server` process with the module loaded.
pub struct RedisServer {
    process: RedisProcess,
    /// Its address.
    pub addr: SocketAddr,
    /// Its working directory (RDB, AOF, log).
    pub dir: PathBuf,
    /// The private directory of [`Program::start`], removed after the process is stopped.
    own_dir: Option<TempDir>,
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
        let args = RedisServer::args(config, module_args);
        match RedisProcess::start(program.command(), dir, &args, program.install()) {
            Ok(process) => RedisServer::new(process, dir),
            Err(last_log) => {
                panic!("{} did not start; last log:\n{last_log}", program.command().to_string_lossy())
            }
        }
    }

    /// One attempt at [`RedisServer::start_program`]: the server once it answers PING, or its
    /// log when it exits (or does not answer) first, e.g. a server refusing the files in `dir`.
    pub fn try_start_program(
        program: &Program,
        dir: &Path,
        config: &[&str],
        module_args: &[&str],
    ) -> Result<RedisServer, String> {
        let args = RedisServer::args(config, module_args);
        RedisProcess::try_start(program.command(), dir, &args, program.install())
            .map(|process| RedisServer::new(process, dir))
    }

    /// DEBUG allowed, the module with its arguments, then `config`.
    fn args(config: &[&str], module_args: &[&str]) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> =
            vec!["--enable-debug-command".into(), "yes".into(), "--loadmodule".into(), module_path().into()];
        args.extend(module_args.iter().chain(config).map(|a| a.into()));
        args
    }

    fn new(process: RedisProcess, dir: &Path) -> RedisServer {
        RedisServer { addr: process.addr, process, dir: dir.to_path_buf(), own_dir: None }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// `SHUTDOWN` (saving when `save` and an RDB is configured; `NOSAVE` otherwise), then waits
    /// for the process to exit. The directory stays (unless it is the private one of
    /// [`Program::start`]).
    pub fn shutdown(mut self, save: bool) {
        self.process.shutdown(save);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // The process first, then its private directory (a field's drop would come after).
        self.process.kill();
    }
}
