//! Real servers on 127.0.0.1 for the tests: Debian's `redis-server` (a single node, with or
//! without the sift module, and a 3-node cluster made by `redis-cli --cluster create`) and the
//! `sift-server` binary. Each runs on a free port in a private directory and is killed on drop.
//! A missing program fails the test with what to install: these tests never skip. (The CLI's
//! tests of `sift push` / `sift pull` include this file too.)

#![allow(dead_code)]

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use sift_testkit::{free_port, temp_dir, TempDir};
use sift_testkit::{listening_addr, require_program, RedisProcess};

/// Fails, saying what to install, unless `bin --version` runs.
pub fn require_tool(bin: &str) {
    require_program(bin, "scripts/test.sh installs it: apt-get install -y redis-server");
}

/// `libsift_redis.so` for the module comparisons: `$SIFT_REDIS_MODULE`, else the newest one in
/// this target directory (`cargo build -p sift-redis`; `cargo test --workspace` builds it).
pub fn module_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SIFT_REDIS_MODULE") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let target = exe.parent()?.parent()?.parent()?.to_path_buf();
    ["debug", "release"]
        .iter()
        .flat_map(|p| [target.join(p).join("libsift_redis.so"), target.join(p).join("deps/libsift_redis.so")])
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max()
        .map(|(_, p)| p)
}

/// A server process (redis-server or sift-server), killed on drop.
pub struct Server {
    redis: Option<RedisProcess>,
    sift: Option<Child>,
    pub addr: SocketAddr,
    pub dir: PathBuf,
    /// The private directory, removed after the process is killed.
    _temp: TempDir,
}

impl Server {
    /// redis-server on a free port with `config` (e.g. `["--cluster-enabled", "yes"]`), no
    /// snapshots, no AOF.
    pub fn redis(config: &[&str]) -> Server {
        require_tool("redis-server");
        let temp = temp_dir("redis");
        let process =
            RedisProcess::start(OsStr::new("redis-server"), &temp, config, "apt-get install -y redis-server")
                .unwrap_or_else(|last| panic!("redis-server did not start; its log:\n{last}"));
        Server { addr: process.addr, redis: Some(process), sift: None, dir: temp.to_path_buf(), _temp: temp }
    }

    /// The `sift-server` binary of this workspace on a free port, data in a private directory.
    pub fn sift() -> Server {
        let temp = temp_dir("sift");
        let mut child = Command::new(sift_server_bin())
            .args(["--port", "0", "--dir"])
            .arg(&temp)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sift-server");
        let addr = listening_addr(&mut child).expect("read the address line");
        Server { addr, redis: None, sift: Some(child), dir: temp.to_path_buf(), _temp: temp }
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn pid(&self) -> u32 {
        match (&self.redis, &self.sift) {
            (Some(r), _) => r.pid(),
            (_, Some(c)) => c.id(),
            _ => 0,
        }
    }

    /// redis-server's log (sift-server's goes nowhere).
    pub fn log(&self) -> String {
        self.redis.as_ref().map(RedisProcess::log).unwrap_or_default()
    }

    /// A plain connection.
    pub fn conn(&self) -> redis::Connection {
        let c = redis::Client::open(self.url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr));
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        c
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut r) = self.redis.take() {
            r.kill();
        }
        if let Some(mut c) = self.sift.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `sift-server` binary: `$SIFT_SERVER_BIN`, else `target/debug/sift-server`, built with
/// `cargo build -p sift-server` only when missing: `cargo test --workspace` has built it already,
/// with the features of the server's own tests (the test data type), and a rebuild here with
/// other features would replace that binary under the server's tests that run after these.
pub fn sift_server_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("SIFT_SERVER_BIN") {
            return PathBuf::from(p);
        }
        let exe = std::env::current_exe().expect("current exe");
        let target =
            exe.parent().and_then(Path::parent).and_then(Path::parent).expect("target dir").to_path_buf();
        let bin = target.join("debug").join("sift-server");
        if bin.exists() {
            return bin;
        }
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-q", "-p", "sift-server", "--bin", "sift-server"])
            .args(["--features", "sift-commands/test-family"])
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .expect("run cargo build -p sift-server");
        assert!(status.success(), "cargo build -p sift-server failed");
        assert!(bin.exists(), "{} missing after cargo build", bin.display());
        bin
    })
    .clone()
}

/// A Redis Cluster of `n` primaries on 127.0.0.1, every slot assigned.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        require_tool("redis-cli");
        let nodes: Vec<Server> = (0..n)
            .map(|_| {
                let bus = free_port().to_string();
                Server::redis(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-port",
                    &bus,
                    "--cluster-node-timeout",
                    "15000",
                ])
            })
            .collect();
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(nodes.iter().map(|n| n.addr.to_string()));
        args.extend(["--cluster-replicas".into(), "0".into(), "--cluster-yes".into()]);
        let out = Command::new("redis-cli").args(&args).output().expect("run redis-cli");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let c = Cluster { nodes };
        c.wait_stable();
        c
    }

    fn wait_stable(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = self.nodes.iter().all(|n| {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut n.conn()).unwrap_or_default();
                info.contains("cluster_state:ok")
            });
            let maps: Vec<Vec<(i64, i64, i64)>> = self.nodes.iter().map(|n| self.slots(n)).collect();
            if ok
                && maps.iter().all(|m| *m == maps[0])
                && maps[0].iter().map(|r| r.1 - r.0 + 1).sum::<i64>() == 16384
            {
                return;
            }
            assert!(Instant::now() < deadline, "cluster not stable after 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `CLUSTER SLOTS` as (first, last, primary port), sorted.
    pub fn slots(&self, node: &Server) -> Vec<(i64, i64, i64)> {
        let v: Vec<redis::Value> =
            redis::cmd("CLUSTER").arg("SLOTS").query(&mut node.conn()).unwrap_or_default();
        let mut out: Vec<(i64, i64, i64)> = v
            .iter()
            .filter_map(|r| {
                let redis::Value::Array(r) = r else { return None };
                let int = |v: &redis::Value| if let redis::Value::Int(i) = v { Some(*i) } else { None };
                let redis::Value::Array(p) = &r[2] else { return None };
                Some((int(&r[0])?, int(&r[1])?, int(&p[1])?))
            })
            .collect();
        out.sort();
        out
    }

    /// Index of the node owning `slot`.
    pub fn owner(&self, slot: u16) -> usize {
        let map = self.slots(&self.nodes[0]);
        let port = map.iter().find(|r| r.0 <= slot as i64 && slot as i64 <= r.1).expect("covered").2;
        self.nodes.iter().position(|n| n.port() as i64 == port).expect("ours")
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    pub fn client(&self) -> redis::cluster::ClusterConnection {
        redis::cluster::ClusterClient::new(self.urls()).unwrap().get_connection().expect("cluster connection")
    }
}

/// SplitMix64: the tests' items come from fixed seeds.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `n` distinct items named `prefix-i`.
pub fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// Upper bound on a binomial count of `n` trials at `p` that a correct implementation exceeds
/// with probability below about 1e-9 (mean + 6 standard deviations + 6: the normal tail, with
/// room for the skew at small means).
pub fn binomial_upper(n: usize, p: f64) -> usize {
    let mean = n as f64 * p;
    (mean + 6.0 * (mean * (1.0 - p)).sqrt() + 6.0).ceil() as usize
}

/// The lower bound matching [`binomial_upper`].
pub fn binomial_lower(n: usize, p: f64) -> usize {
    let mean = n as f64 * p;
    (mean - 6.0 * (mean * (1.0 - p)).sqrt() - 6.0).max(0.0).floor() as usize
}
