//! Helpers for the cluster and replication tests: real `redis-server` processes on 127.0.0.1
//! with `libsift_redis.so` loaded, each in its own temp directory, killed on drop.
//!
//! The module file is the one cargo builds for these very tests: the library target is a
//! `cdylib` and an `rlib`, so compiling it as the tests' dependency writes `libsift_redis.so`
//! next to the test binary (`target/<profile>/deps/`). If it is not there (an unusual cargo
//! layout), the helper runs `cargo build -p sift-redis` and takes the one it builds.

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::Value;

/// The `redis-server` binary: `$SIFT_REDIS_SERVER` or `redis-server` on the PATH. Missing, the
/// test fails with what to install (CI installs it); it never skips.
pub fn redis_server_bin() -> String {
    let bin = std::env::var("SIFT_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string());
    require_tool(&bin, "redis-server");
    bin
}

/// The `redis-cli` binary (same rule as [`redis_server_bin`]).
pub fn redis_cli_bin() -> String {
    let bin = std::env::var("SIFT_REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_string());
    require_tool(&bin, "redis-cli");
    bin
}

fn require_tool(bin: &str, what: &str) {
    let ok = Command::new(bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`{bin} --version` failed: these tests need a real {what} (Debian: apt-get install -y \
         redis-server, which brings redis-server and redis-cli; .ci/run installs it)"
    );
}

/// Path of `libsift_redis.so` built from this source tree.
pub fn module_path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        let deps = exe.parent().expect("test binary dir");
        for dir in [deps.to_path_buf(), deps.join("..")] {
            let so = dir.join("libsift_redis.so");
            if so.is_file() {
                return so.canonicalize().unwrap();
            }
        }
        build_module()
    })
}

/// Builds the module with cargo (the fallback of [`module_path`]) and returns its path.
fn build_module() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(&cargo)
        .args(["build", "-p", "sift-redis", "--message-format", "json-render-diagnostics"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build -p sift-redis");
    assert!(out.status.success(), "cargo build -p sift-redis failed");
    let text = String::from_utf8_lossy(&out.stdout);
    // The compiler-artifact message of the library lists its files; take the .so.
    text.lines()
        .filter(|l| l.contains("\"compiler-artifact\"") && l.contains("sift_redis"))
        .flat_map(|l| l.split('"'))
        .find(|s| s.ends_with("libsift_redis.so"))
        .map(PathBuf::from)
        .expect("cargo build -p sift-redis reported no libsift_redis.so")
}

/// A free TCP port on 127.0.0.1 (bound and released; the caller starts a server on it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port").local_addr().unwrap().port()
}

/// A fresh, empty directory under the system's temp dir, unique to this process and call.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("sift-redis-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

/// One `redis-server` process with the module loaded, no persistence, killed on drop.
pub struct RedisNode {
    child: Child,
    /// Client port on 127.0.0.1.
    pub port: u16,
    /// Its working directory (`dir`, log file, cluster config).
    pub dir: PathBuf,
}

impl RedisNode {
    /// Starts `redis-server --port <free> --loadmodule libsift_redis.so` plus `extra` and
    /// waits until it answers PING. `tag` names the temp dir.
    pub fn start(tag: &str, extra: &[String]) -> RedisNode {
        RedisNode::start_with(tag, |_| extra.to_vec())
    }

    /// [`RedisNode::start`] with arguments made per attempt from the node's directory (a cluster
    /// node's config file and bus port).
    pub fn start_with(tag: &str, extra: impl Fn(&Path) -> Vec<String>) -> RedisNode {
        RedisNode::start_full(tag, &[], extra)
    }

    /// [`RedisNode::start_with`] with module load arguments (`--loadmodule <so> <module_args>`).
    pub fn start_full(tag: &str, module_args: &[&str], extra: impl Fn(&Path) -> Vec<String>) -> RedisNode {
        let server = redis_server_bin();
        let module = module_path();
        let mut last_log = String::new();
        // A port picked free can be taken before the server binds it: try a few.
        for _ in 0..5 {
            let port = free_port();
            let dir = temp_dir(tag);
            let log = dir.join("redis.log");
            let mut args: Vec<String> = vec![
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
                "--dir".into(),
                dir.display().to_string(),
                "--logfile".into(),
                log.display().to_string(),
                "--save".into(),
                String::new(),
                "--appendonly".into(),
                "no".into(),
                "--daemonize".into(),
                "no".into(),
            ];
            args.extend(extra(&dir));
            args.extend(["--loadmodule".to_string(), module.display().to_string()]);
            args.extend(module_args.iter().map(|a| a.to_string()));
            let child = Command::new(&server)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let mut node = RedisNode { child, port, dir };
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = node.child.try_wait() {
                    break;
                }
                if let Ok(mut c) = node.try_conn() {
                    if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                        return node;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            last_log = std::fs::read_to_string(&log).unwrap_or_default();
            drop(node);
        }
        panic!("redis-server with {} did not start; its log:\n{last_log}", module.display());
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        TcpStream::connect(("127.0.0.1", self.port))?;
        let client = redis::Client::open(self.url())?;
        client.get_connection_with_timeout(Duration::from_secs(5))
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A plain (non-cluster) connection to this node.
    pub fn conn(&self) -> redis::Connection {
        let c = self.try_conn().unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr()));
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// The `field:value` lines of `INFO <section>`, as a map.
    pub fn info(&self, section: &str) -> std::collections::BTreeMap<String, String> {
        let text: String = redis::cmd("INFO").arg(section).query(&mut self.conn()).unwrap();
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect()
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs `redis-cli` with `args` and returns (success, stdout + stderr).
pub fn redis_cli(args: &[&str]) -> (bool, String) {
    let out = Command::new(redis_cli_bin()).args(args).output().expect("run redis-cli");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Sends one command, returning its reply, or the error as `Err(text)` (`MOVED ...`, `ERR ...`).
pub fn call<C: redis::ConnectionLike>(conn: &mut C, args: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<Value>(conn).map_err(server_error_text)
}

/// A server error as the server sent it (`MOVED 3999 127.0.0.1:6381`, `READONLY ...`), rather
/// than the crate's rewording; other errors as the crate prints them.
pub fn server_error_text(e: redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// [`call`] with text arguments.
pub fn call_str<C: redis::ConnectionLike>(conn: &mut C, args: &[&str]) -> Result<Value, String> {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    call(conn, &args)
}

/// The full `BF.SCANDUMP`/`CF.SCANDUMP` chunk sequence of `key` (`cmd` is the command name):
/// (iterator, data) pairs until the terminating iterator 0.
pub fn scandump<C: redis::ConnectionLike>(conn: &mut C, cmd: &str, key: &str) -> Vec<(i64, Vec<u8>)> {
    let mut chunks = Vec::new();
    let mut iter = 0i64;
    loop {
        let (next, data): (i64, Vec<u8>) = redis::cmd(cmd)
            .arg(key)
            .arg(iter)
            .query(conn)
            .unwrap_or_else(|e| panic!("{cmd} {key} {iter}: {e}"));
        if next == 0 {
            return chunks;
        }
        chunks.push((next, data));
        iter = next;
        assert!(chunks.len() < 100_000, "{cmd} {key}: the iterator never ends");
    }
}

/// A Redis Cluster of primaries on 127.0.0.1, the module on every node, every slot assigned.
pub struct Cluster {
    /// The nodes, in `redis-cli --cluster create` order.
    pub nodes: Vec<RedisNode>,
}

/// One slot range of `CLUSTER SLOTS`: first and last slot, and the primary's port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlotRange {
    pub first: u16,
    pub last: u16,
    pub port: u16,
}

/// Starts one cluster-enabled node (not yet part of any cluster).
pub fn cluster_node(tag: &str) -> RedisNode {
    RedisNode::start_with(tag, |dir| {
        vec![
            "--cluster-enabled".into(),
            "yes".into(),
            "--cluster-config-file".into(),
            dir.join("nodes.conf").display().to_string(),
            // The bus port explicitly (Redis >= 7.0), so it too is a free one rather than
            // port + 10000.
            "--cluster-port".into(),
            free_port().to_string(),
            "--cluster-node-timeout".into(),
            "5000".into(),
        ]
    })
}

impl Cluster {
    /// Starts `n` cluster-enabled nodes, joins them with `redis-cli --cluster create ...
    /// --cluster-replicas 0 --cluster-yes`, and waits until every node reports
    /// `cluster_state:ok` and all agree on the slot map.
    pub fn start(n: usize) -> Cluster {
        let nodes: Vec<RedisNode> = (0..n).map(|i| cluster_node(&format!("cluster{i}"))).collect();
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
        let mut args: Vec<&str> = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        let (ok, out) = redis_cli(&args);
        assert!(ok, "redis-cli --cluster create failed:\n{out}");
        let cluster = Cluster { nodes };
        cluster.wait_stable();
        cluster
    }

    /// Waits until every node says `cluster_state:ok` and `CLUSTER SLOTS` is the same on all.
    pub fn wait_stable(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let states: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut n.conn()).unwrap();
                    info.lines().find(|l| l.starts_with("cluster_state:")).unwrap_or("").trim().to_string()
                })
                .collect();
            let maps: Vec<Vec<SlotRange>> = self.nodes.iter().map(|n| self.slots_seen_by(n)).collect();
            let covered: u32 = maps[0].iter().map(|r| (r.last - r.first) as u32 + 1).sum();
            if states.iter().all(|s| s == "cluster_state:ok")
                && maps.iter().all(|m| *m == maps[0])
                && covered == 16384
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "cluster not stable after 60 s: states {states:?}, slot maps {maps:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `CLUSTER SLOTS` as seen by `node`, sorted.
    pub fn slots_seen_by(&self, node: &RedisNode) -> Vec<SlotRange> {
        let v: Vec<Value> = redis::cmd("CLUSTER").arg("SLOTS").query(&mut node.conn()).unwrap();
        let mut out: Vec<SlotRange> = v
            .iter()
            .map(|r| {
                let Value::Array(r) = r else { panic!("CLUSTER SLOTS entry {r:?}") };
                let int = |v: &Value| match v {
                    Value::Int(i) => *i,
                    other => panic!("CLUSTER SLOTS field {other:?}"),
                };
                let Value::Array(primary) = &r[2] else { panic!("CLUSTER SLOTS primary {:?}", r[2]) };
                SlotRange { first: int(&r[0]) as u16, last: int(&r[1]) as u16, port: int(&primary[1]) as u16 }
            })
            .collect();
        out.sort();
        out
    }

    /// Adds a new node as a replica of `self.nodes[i]` (`redis-cli --cluster add-node ...
    /// --cluster-slave --cluster-master-id`) and waits until its replication link is up.
    pub fn add_replica(&self, i: usize) -> RedisNode {
        let replica = cluster_node("cluster-replica");
        let id = self.id(i);
        let (new, existing) = (replica.addr(), self.nodes[i].addr());
        let (ok, out) = redis_cli(&[
            "--cluster",
            "add-node",
            &new,
            &existing,
            "--cluster-slave",
            "--cluster-master-id",
            &id,
        ]);
        assert!(ok, "redis-cli --cluster add-node failed:\n{out}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while replica.info("replication").get("master_link_status").map(String::as_str) != Some("up") {
            assert!(Instant::now() < deadline, "cluster replica never synced; its log:\n{}", replica.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        replica
    }

    /// The node id (`CLUSTER MYID`) of `self.nodes[i]`.
    pub fn id(&self, i: usize) -> String {
        redis::cmd("CLUSTER").arg("MYID").query(&mut self.nodes[i].conn()).unwrap()
    }

    /// `CLUSTER KEYSLOT key`.
    pub fn keyslot(&self, key: &str) -> u16 {
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut self.nodes[0].conn()).unwrap()
    }

    /// Index of the node owning `slot`, by node 0's map.
    pub fn owner(&self, slot: u16) -> usize {
        let map = self.slots_seen_by(&self.nodes[0]);
        let port = map.iter().find(|r| r.first <= slot && slot <= r.last).expect("slot covered").port;
        self.nodes.iter().position(|n| n.port == port).expect("owner is one of ours")
    }

    /// The crate's cluster client, seeded with every node.
    pub fn client(&self) -> redis::cluster::ClusterConnection {
        let urls: Vec<String> = self.nodes.iter().map(|n| n.url()).collect();
        redis::cluster::ClusterClient::new(urls)
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    }
}
