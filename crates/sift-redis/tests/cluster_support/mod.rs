//! Cluster and replication helpers over `support::RedisServer` (redis-server on 127.0.0.1 with
//! `libsift_redis.so` loaded, see `support/mod.rs`): plain and cluster connections, INFO, a
//! 3-node cluster made by `redis-cli --cluster create`, a cluster replica, slot ownership.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use redis::Value;

use crate::support::RedisServer;

/// Fails, saying what to install, unless `bin --version` runs (CI installs redis-server, which
/// brings redis-cli): these tests never skip.
pub fn require_tool(bin: &str) {
    sift_testkit::require_program(
        bin,
        "Debian: apt-get install -y redis-server, which brings redis-server and redis-cli; .ci/run installs it",
    );
}

pub use sift_testkit::free_port;

/// Starts redis-server with the module (`module_args`) and `config`, in a private directory.
pub fn start_node(config: &[&str], module_args: &[&str]) -> RedisServer {
    require_tool("redis-server");
    RedisServer::start(config, module_args)
}

/// What the tests ask of a running node, beyond `support::RedisServer`.
pub trait Node {
    /// `redis://127.0.0.1:<port>/`.
    fn url(&self) -> String;
    /// `127.0.0.1:<port>`.
    fn host_port(&self) -> String;
    /// A plain (non-cluster) connection.
    fn conn(&self) -> redis::Connection;
    /// The `field:value` lines of `INFO <section>`.
    fn info(&self, section: &str) -> BTreeMap<String, String>;
    /// The server's log so far (for failure messages).
    fn log(&self) -> String;
}

impl Node for RedisServer {
    fn url(&self) -> String {
        format!("redis://{}/", self.addr)
    }

    fn host_port(&self) -> String {
        self.addr.to_string()
    }

    fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).unwrap();
        let c = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.addr));
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c
    }

    fn info(&self, section: &str) -> BTreeMap<String, String> {
        let text: String = redis::cmd("INFO").arg(section).query(&mut self.conn()).unwrap();
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.trim().to_string()))
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join(format!("redis-{}.log", self.port()))).unwrap_or_default()
    }
}

/// Runs `redis-cli` with `args` and returns (success, stdout + stderr).
pub fn redis_cli(args: &[&str]) -> (bool, String) {
    require_tool("redis-cli");
    let out = Command::new("redis-cli").args(args).output().expect("run redis-cli");
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
    pub nodes: Vec<RedisServer>,
}

/// One slot range of `CLUSTER SLOTS`: first and last slot, and the primary's port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlotRange {
    pub first: u16,
    pub last: u16,
    pub port: u16,
}

/// Starts one cluster-enabled node (not yet part of any cluster), its cluster config file in its
/// own directory (a relative path is relative to `dir`) and its bus port a free one
/// (`cluster-port`, Redis >= 7.0) rather than port + 10000.
pub fn cluster_node() -> RedisServer {
    let bus = free_port().to_string();
    let config = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-port",
        &bus,
        // A loaded CI machine can stall a node for seconds: a short timeout would let a replica
        // fail over in the middle of a test, and the test would compare the wrong pair of nodes.
        // Failovers are not under test here, so none may happen.
        "--cluster-node-timeout",
        "15000",
        "--cluster-replica-no-failover",
        "yes",
    ];
    start_node(&config, &[])
}

impl Cluster {
    /// Starts `n` cluster-enabled nodes, joins them with `redis-cli --cluster create ...
    /// --cluster-replicas 0 --cluster-yes`, and waits until every node reports
    /// `cluster_state:ok` and all agree on the slot map.
    pub fn start(n: usize) -> Cluster {
        let nodes: Vec<RedisServer> = (0..n).map(|_| cluster_node()).collect();
        let addrs: Vec<String> = nodes.iter().map(|n| n.host_port()).collect();
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
    pub fn slots_seen_by(&self, node: &RedisServer) -> Vec<SlotRange> {
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
    pub fn add_replica(&self, i: usize) -> RedisServer {
        let replica = cluster_node();
        let id = self.id(i);
        let (new, existing) = (replica.host_port(), self.nodes[i].host_port());
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
        self.nodes.iter().position(|n| n.port() == port).expect("owner is one of ours")
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
