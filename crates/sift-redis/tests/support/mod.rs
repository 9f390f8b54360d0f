//! Starting `redis-server` with the sift-redis module, for tests (and for anyone scripting a
//! cluster or a replica around it).
//!
//! * [`module_path`]: the built `libsift_redis.so`. `SIFT_REDIS_MODULE` wins when set; otherwise
//!   the one `cargo test` built next to this test binary (`target/<profile>/`).
//! * [`RedisServer::start`] / [`RedisServer::start_in`]: `redis-server` on 127.0.0.1 with a free
//!   port, a private (or given) directory, `--loadmodule <module> <module args>` and any extra
//!   configuration, e.g. `&["--appendonly", "yes"]` or `&["--cluster-enabled", "yes"]`; waits
//!   until it answers PING. Killed on drop; [`RedisServer::shutdown`] stops it cleanly.
//!
//! ```ignore
//! let primary = RedisServer::start(&[], &["ERROR_RATE", "0.001"]);
//! let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &primary.port().to_string()], &[]);
//! ```

#![allow(dead_code)]

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
        let dir = temp_dir("redis");
        let mut s = RedisServer::start_in(&dir, config, module_args);
        s.own_dir = true;
        s
    }

    /// Starts redis-server in `dir` (kept: restart on the same directory to test persistence).
    /// Defaults: no RDB snapshots on a timer, no AOF, DEBUG allowed; `config` may override them.
    pub fn start_in(dir: &Path, config: &[&str], module_args: &[&str]) -> RedisServer {
        RedisServer::start_program("redis-server", dir, config, module_args)
    }

    /// [`RedisServer::start_in`] with another server program of the same command line (Valkey's
    /// `valkey-server`).
    pub fn start_program(program: &str, dir: &Path, config: &[&str], module_args: &[&str]) -> RedisServer {
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = free_port();
            let log = dir.join(format!("redis-{port}.log"));
            let child = Command::new(program)
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
                .unwrap_or_else(|e| panic!("spawn {program} (apt-get install redis-server): {e}"));
            let mut s = RedisServer {
                child: Some(child),
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                dir: dir.to_path_buf(),
                own_dir: false,
            };
            if s.wait_ready() {
                return s;
            }
            s.kill();
            last_log = std::fs::read_to_string(&log).unwrap_or_default();
        }
        panic!("{program} did not start; last log:\n{last_log}");
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
