//! The `SF.*` family on redis-server with the module, beyond the shared suite: the `sift-filt`
//! type saved and loaded by RDB (`DEBUG RELOAD`, `SAVE` and a restart), `DUMP`/`RESTORE`, the
//! AOF rewrite (a restart from the AOF), `COPY`, `MEMORY USAGE`, `DEBUG DIGEST-VALUE`, a replica
//! that answers as its primary, and a 3-node cluster serving the keys on every node.

mod cluster_support;
mod support;

use std::time::{Duration, Instant};

use cluster_support::{call, call_str, Cluster, Node};
use redis::Value;
use sift::Persist;
use support::{temp_dir, RedisServer};

#[path = "../../sift-server/tests/suite/client.rs"]
#[allow(dead_code)]
mod client;
use client::Raw;

fn raw(srv: &RedisServer) -> Raw {
    Raw::connect(srv.addr)
}

fn xor_file(n: u32) -> Vec<u8> {
    let items: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    sift::Xor8::build_with(&items, sift::Hasher::default()).unwrap().to_bytes()
}

const KEYS: [&str; 6] = ["b", "grow", "n", "c", "q", "x"];

/// Everything observable of the keys: type, the sift file, cardinality, TTL set or not, and
/// the answers for 200 items (added ones and others).
fn observe(c: &mut Raw) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let items: Vec<String> =
        (0..100).map(|i| format!("item-{i}")).chain((0..100).map(|i| format!("s{i}"))).collect();
    for k in KEYS {
        out.push(c.cmd(&["TYPE", k]));
        out.push(c.cmd(&["SF.DUMP", k]));
        out.push(c.cmd(&["SF.CARD", k]));
        let ttl = c.cmd_text(&["TTL", k]);
        out.push(if ttl.starts_with(":-") { ttl.into_bytes() } else { b"ttl set".to_vec() });
        let mut args = vec!["SF.MEXISTS", k];
        args.extend(items.iter().map(String::as_str));
        out.push(c.cmd(&args));
    }
    out
}

fn fill(c: &mut Raw) {
    for (k, extra) in [
        ("b", &["KIND", "blocked"][..]),
        ("grow", &["EXPANSION", "2"][..]),
        ("n", &["KIND", "counting"][..]),
        ("c", &["KIND", "cuckoo"][..]),
        ("q", &["KIND", "quotient"][..]),
    ] {
        let mut args = vec!["SF.RESERVE", k, "0.01", "40"];
        args.extend_from_slice(extra);
        assert_eq!(c.cmd(&args), b"+OK\r\n", "{k}");
    }
    for k in ["b", "grow", "n", "c", "q"] {
        let mut args = vec!["SF.MADD".to_string(), k.to_string()];
        args.extend((0..40).map(|i| format!("item-{i}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert!(c.cmd(&args).starts_with(b"*40\r\n"), "{k}");
    }
    assert_eq!(c.cmd(&["SF.DEL", "q", "item-3"]), b":1\r\n");
    assert_eq!(c.cmd_bytes(&[&b"SF.LOAD"[..], b"x", &xor_file(100)]), b"+OK\r\n");
    assert_eq!(c.cmd(&["EXPIRE", "c", "100000"]), b":1\r\n");
}

fn info_field(c: &mut Raw, section: &str, field: &str) -> String {
    let text = c.cmd_text(&["INFO", section]);
    let prefix = format!("{field}:");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).map(|v| v.trim().to_string()).unwrap_or_default()
}

#[test]
fn sf_keys_are_saved_loaded_dumped_and_rewritten() {
    let dir = temp_dir("sf-module");
    let aof = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--appendfsync", "always"];
    let srv = RedisServer::start_in(&dir, &aof, &[]);
    let mut c = raw(&srv);
    fill(&mut c);
    assert_eq!(c.cmd(&["TYPE", "b"]), b"+sift-filt\r\n");
    let before = observe(&mut c);
    // COPY, DEBUG DIGEST-VALUE, MEMORY USAGE.
    assert_eq!(c.cmd(&["COPY", "q", "q2"]), b":1\r\n");
    let digest = |c: &mut Raw, k: &str| c.cmd(&["DEBUG", "DIGEST-VALUE", k]);
    assert_eq!(digest(&mut c, "q"), digest(&mut c, "q2"));
    assert_ne!(digest(&mut c, "q"), digest(&mut c, "n"));
    assert_eq!(c.cmd(&["DEL", "q2"]), b":1\r\n");
    let usage = c.cmd_text(&["MEMORY", "USAGE", "grow"]);
    assert!(usage.trim_start_matches(':').trim().parse::<i64>().unwrap() > 40, "{usage}");
    // DUMP / RESTORE: the RDB encoding.
    let dump = c.cmd(&["DUMP", "c"]);
    let payload = &dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..dump.len() - 2];
    assert_eq!(c.cmd_bytes(&[&b"RESTORE"[..], b"restored", b"0", payload]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SF.DUMP", "restored"]), c.cmd(&["SF.DUMP", "c"]));
    assert_eq!(c.cmd(&["DEL", "restored"]), b":1\r\n");
    // DEBUG RELOAD: RDB save and load.
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(observe(&mut c), before, "after DEBUG RELOAD");
    // An AOF rewrite, then a restart from the AOF alone.
    assert_eq!(c.cmd(&["BGREWRITEAOF"])[0], b'+');
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(&mut c, "persistence", "aof_rewrite_in_progress") != "0"
        || info_field(&mut c, "persistence", "aof_rewrite_scheduled") != "0"
    {
        assert!(Instant::now() < deadline, "AOF rewrite did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.cmd(&["SF.ADD", "b", "after-rewrite"]), b":1\r\n");
    let before = observe(&mut c);
    drop(c);
    srv.shutdown(false);
    let srv = RedisServer::start_in(&dir, &aof, &[]);
    let mut c = raw(&srv);
    assert_eq!(observe(&mut c), before, "after a restart from the AOF");
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    drop(c);
    srv.shutdown(false);
    let srv = RedisServer::start_in(&dir, &[], &[]);
    let mut c = raw(&srv);
    assert_eq!(observe(&mut c), before, "after a restart from dump.rdb");
    drop(c);
    srv.shutdown(false);
}

#[test]
fn a_replica_answers_as_its_primary() {
    let primary = RedisServer::start(&[], &[]);
    let mut p = raw(&primary);
    fill(&mut p);
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &primary.port().to_string()], &[]);
    let mut r = raw(&replica);
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut r, "replication", "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(50));
    }
    // After the full sync, the command stream: an auto-created key (propagated as an explicit
    // SF.RESERVE), adds, deletes, a whole-file load and a chunked one.
    assert_eq!(p.cmd(&["SF.ADD", "auto", "a"]), b":1\r\n");
    assert_eq!(p.cmd(&["SF.MADD", "b", "late-1", "late-2"]), b"*2\r\n:1\r\n:1\r\n");
    assert_eq!(p.cmd(&["SF.MDEL", "n", "item-5", "item-6"]), b"*2\r\n:1\r\n:1\r\n");
    let file = xor_file(300);
    assert_eq!(
        p.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"x", b"101", &file[..100]]),
        format!(":{}\r\n", file.len() - 100).as_bytes()
    );
    let last = (file.len() + 1).to_string();
    assert_eq!(p.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"x", last.as_bytes(), &file[100..]]), b":0\r\n");
    // A window by time: the replica is kept busy while the primary adds, so it applies the
    // stream later by its own clock; only the time the primary propagates (SF.MADDAT) makes the
    // filters the same, bit for bit.
    assert_eq!(p.cmd(&["SF.RESERVE", "w", "0.01", "1000", "KIND", "aging", "TTL", "1"]), b"+OK\r\n");
    assert_eq!(p.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
    let mut sleeper = raw(&replica);
    sleeper.send_cmd(&["DEBUG", "SLEEP", "0.5"]);
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..40 {
        assert_eq!(p.cmd(&["SF.ADD", "w", &format!("w{i}")]), b":1\r\n");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sleeper.reply(), b"+OK\r\n");
    assert_eq!(p.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
    assert_eq!(r.cmd(&["SF.DUMP", "w"]), p.cmd(&["SF.DUMP", "w"]));
    assert_eq!(observe(&mut r), observe(&mut p));
    assert_eq!(r.cmd(&["SF.DUMP", "auto"]), p.cmd(&["SF.DUMP", "auto"]));
}

/// A 3-node cluster: keys on every node through the cluster client, each node serving its own.
#[test]
fn a_cluster_serves_sf_keys_on_every_node() {
    let cluster = Cluster::start(3);
    let mut con = cluster.client();
    let file = xor_file(200);
    let mut owners = std::collections::BTreeSet::new();
    for i in 0..30 {
        let key = format!("sf-{i}");
        owners.insert(cluster.owner(cluster.keyslot(&key)));
        assert_eq!(
            call_str(&mut con, &["SF.RESERVE", &key, "0.01", "100", "KIND", "cuckoo"]),
            Ok(Value::Okay)
        );
        assert_eq!(call_str(&mut con, &["SF.ADD", &key, "a"]), Ok(Value::Int(1)));
        assert_eq!(call_str(&mut con, &["SF.DEL", &key, "a"]), Ok(Value::Int(1)));
        let loaded = format!("loaded-{i}");
        assert_eq!(call(&mut con, &[b"SF.LOAD", loaded.as_bytes(), &file]), Ok(Value::Okay));
        assert_eq!(call_str(&mut con, &["SF.EXISTS", &loaded, "s7"]), Ok(Value::Int(1)));
        assert_eq!(call_str(&mut con, &["SF.CARD", &key]), Ok(Value::Int(0)));
    }
    assert_eq!(owners.len(), 3, "the keys landed on every node");
    for n in &cluster.nodes {
        let keys: i64 = redis::cmd("DBSIZE").query(&mut n.conn()).unwrap();
        assert!(keys > 0, "{} holds no key", n.host_port());
    }
}
