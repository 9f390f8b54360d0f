//! A data type added to `sift_commands` in one file and one line of its family list is served by
//! the module with no change in this crate: the test family `tally` (`sift_commands::tally`,
//! behind the `test-family` feature that this crate's tests enable, so the `libsift_redis.so`
//! they load has it) is registered as a Redis data type (`siftTally`) with its commands and key
//! specs, and Redis saves, loads, dumps, restores, copies, measures, digests, rewrites and
//! replicates it through the callbacks instantiated for it — on redis-server, and on a cluster
//! node, which refuses its multi-key command across slots.

mod cluster_support;
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use cluster_support::{cluster_node, Node};
use support::{temp_dir, RedisServer};

#[path = "../../sift-server/tests/suite/client.rs"]
#[allow(dead_code)]
mod client;
use client::Raw;

fn raw(srv: &RedisServer) -> Raw {
    Raw::connect(srv.addr)
}

fn int(reply: &[u8]) -> i64 {
    let s = String::from_utf8_lossy(reply);
    s.strip_prefix(':')
        .and_then(|s| s.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("not an integer: {s:?}"))
}

/// What a client can observe of the tallies `keys`: type, size and when each item was added.
fn observe(c: &mut Raw, keys: &[&str], items: &[&str]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for k in keys {
        out.push(c.cmd(&["TYPE", k]));
        out.push(c.cmd(&["TALLY.CARD", k]));
        for i in items {
            out.push(c.cmd(&["TALLY.WHEN", k, i]));
        }
    }
    out
}

fn info_field(c: &mut Raw, section: &str, field: &str) -> String {
    let text = c.cmd_text(&["INFO", section]);
    let prefix = format!("{field}:");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).map(|v| v.trim().to_string()).unwrap_or_default()
}

/// Waits until no AOF rewrite is running or scheduled.
fn wait_rewrite(c: &mut Raw) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(c, "persistence", "aof_rewrite_in_progress") != "0"
        || info_field(c, "persistence", "aof_rewrite_scheduled") != "0"
    {
        assert!(Instant::now() < deadline, "AOF rewrite did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every file of Redis 7's multi-part AOF, concatenated (base first).
fn aof_bytes(dir: &Path) -> Vec<u8> {
    let mut files: Vec<_> =
        std::fs::read_dir(dir.join("appendonlydir")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort_by_key(|f| !f.to_string_lossy().contains(".base."));
    files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "aof"))
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

const KEYS: [&str; 4] = ["t", "u", "merged", "copied"];
const ITEMS: [&str; 4] = ["a", "b", "c", "only-u"];

#[test]
fn the_test_family_is_served_saved_loaded_and_rewritten() {
    let dir = temp_dir("registry");
    let aof = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--appendfsync", "always"];
    let srv = RedisServer::start_in(&dir, &aof, &[]);
    let mut c = raw(&srv);
    assert_eq!(c.cmd(&["TALLY.ADD", "t", "a", "b"]), b":2\r\n");
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(c.cmd(&["tally.add", "t", "c"]), b":1\r\n");
    assert_eq!(c.cmd(&["TALLY.ADDAT", "u", "7", "a", "only-u"]), b":2\r\n");
    assert_eq!(c.cmd(&["TYPE", "t"]), b"+siftTally\r\n");
    assert_eq!(c.cmd(&["TALLY.WHEN", "t"]), b"-ERR wrong number of arguments for 'tally.when' command\r\n");
    let wrongtype = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    assert_eq!(c.cmd(&["SET", "s", "v"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["TALLY.ADD", "s", "x"]), wrongtype);
    assert_eq!(c.cmd(&["BF.ADD", "bf", "x"]), b":1\r\n");
    assert_eq!(c.cmd(&["TALLY.CARD", "bf"]), wrongtype);
    assert_eq!(c.cmd(&["BF.ADD", "t", "x"]), wrongtype);
    // Several keys: the sources are read, the destination written (and created).
    assert_eq!(c.cmd(&["TALLY.MERGE", "merged", "2", "t", "u"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["TALLY.WHEN", "merged", "a"]), b":7\r\n", "the earliest time wins");
    assert_eq!(c.cmd(&["TALLY.MERGE", "merged", "2", "t", "s"]), wrongtype);
    // Redis knows every key from the registered key specs (a count, as EVAL's).
    assert_eq!(
        c.cmd_text(&["COMMAND", "GETKEYS", "tally.merge", "d", "2", "a", "b"]),
        "*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    let info = c.cmd_text(&["COMMAND", "INFO", "tally.merge"]);
    assert!(info.contains("+movablekeys\r\n") && info.contains("$6\r\nkeynum\r\n"), "{info}");
    // The type's COPY; BF refuses it, as RedisBloom's type does.
    assert_eq!(c.cmd(&["COPY", "t", "copied"]), b":1\r\n");
    assert_eq!(c.cmd(&["COPY", "bf", "bf2"]), b"-ERR not supported for this module key\r\n");
    // MEMORY USAGE from the type; DEBUG DIGEST-VALUE from its dump chunks.
    let small = int(&c.cmd(&["MEMORY", "USAGE", "u"]));
    assert!(small > 0);
    let digest = |c: &mut Raw, k: &str| c.cmd(&["DEBUG", "DIGEST-VALUE", k]);
    assert_eq!(digest(&mut c, "t"), digest(&mut c, "copied"));
    assert_ne!(digest(&mut c, "t"), digest(&mut c, "u"));
    let before = observe(&mut c, &KEYS, &ITEMS);
    assert!(int(&before[2]) > 1_600_000_000_000, "TALLY.ADD records the time: {:?}", before[2]);
    // DUMP / RESTORE: the type's RDB encoding.
    let dump = c.cmd(&["DUMP", "t"]);
    let payload = &dump[dump.iter().position(|&b| b == b'\n').unwrap() + 1..dump.len() - 2];
    assert_eq!(c.cmd_bytes(&[&b"RESTORE"[..], &b"restored"[..], &b"0"[..], payload]), b"+OK\r\n");
    assert_eq!(observe(&mut c, &["restored"], &ITEMS), before[..6]);
    assert_eq!(c.cmd(&["DEL", "restored"]), b":1\r\n");
    // DEBUG RELOAD: RDB save and load.
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(observe(&mut c, &KEYS, &ITEMS), before, "after DEBUG RELOAD");
    // The AOF: a rewrite emits the type's commands (explicit times), and a TALLY.ADD after it is
    // logged with its time made explicit, never as received.
    assert_eq!(c.cmd(&["BGREWRITEAOF"])[0], b'+');
    wait_rewrite(&mut c);
    assert_eq!(c.cmd(&["TALLY.ADD", "u", "b"]), b":1\r\n");
    let before = observe(&mut c, &KEYS, &ITEMS);
    let log = aof_bytes(&dir);
    assert!(contains(&log, b"$11\r\nTALLY.ADDAT\r\n$1\r\nu\r\n"), "{}", String::from_utf8_lossy(&log));
    assert!(!contains(&log, b"$9\r\nTALLY.ADD\r\n") && !contains(&log, b"$9\r\ntally.add\r\n"));
    drop(c);
    srv.shutdown(false);
    let srv = RedisServer::start_in(&dir, &aof, &[]);
    let mut c = raw(&srv);
    assert_eq!(observe(&mut c, &KEYS, &ITEMS), before, "after a restart from the AOF");
    // SAVE and a restart from the RDB file.
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    drop(c);
    srv.shutdown(false);
    let srv = RedisServer::start_in(&dir, &[], &[]);
    let mut c = raw(&srv);
    assert_eq!(observe(&mut c, &KEYS, &ITEMS), before, "after a restart from dump.rdb");
    drop(c);
    srv.shutdown(false);
}

#[test]
fn a_replica_gets_the_primary_time() {
    let primary = RedisServer::start(&[], &[]);
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &primary.port().to_string()], &[]);
    let mut p = raw(&primary);
    let mut r = raw(&replica);
    assert_eq!(p.cmd(&["TALLY.ADD", "before-sync", "a"]), b":1\r\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(&mut r, "replication", "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The replica is kept busy while the primary adds: it applies the stream at least 200 ms
    // later, by its own clock, so only the time the primary propagates makes the answers agree.
    let mut sleeper = raw(&replica);
    sleeper.send_cmd(&["DEBUG", "SLEEP", "0.3"]);
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..20 {
        assert_eq!(p.cmd(&["TALLY.ADD", "live", &format!("i{i}")]), b":1\r\n");
    }
    assert_eq!(sleeper.reply(), b"+OK\r\n");
    assert_eq!(p.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
    let items: Vec<String> = (0..20).map(|i| format!("i{i}")).collect();
    let items: Vec<&str> = items.iter().map(String::as_str).chain(["a"]).collect();
    let keys = ["before-sync", "live"];
    assert_eq!(observe(&mut r, &keys, &items), observe(&mut p, &keys, &items));
}

/// On a cluster node, the multi-key command's keys must share a slot: the key specs the module
/// registered make Redis check the sources too, not only the destination.
#[test]
fn a_cluster_node_refuses_the_multi_key_command_across_slots() {
    let node = cluster_node();
    let mut c = raw(&node);
    assert_eq!(c.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.cmd_text(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
        assert!(Instant::now() < deadline, "the cluster never became ok: {}", node.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.cmd(&["TALLY.ADD", "{x}a", "1"]), b":1\r\n");
    assert_eq!(c.cmd(&["TALLY.ADD", "{x}b", "2"]), b":1\r\n");
    assert_eq!(c.cmd(&["TALLY.MERGE", "{x}d", "2", "{x}a", "{x}b"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["TALLY.CARD", "{x}d"]), b":2\r\n");
    // `{y}a` hashes to another slot than `{x}d`: only a registered source key spec tells Redis.
    assert_eq!(
        c.cmd(&["TALLY.MERGE", "{x}d", "2", "{x}a", "{y}a"]),
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
}
