//! `maxmemory` (the OOM refusal of Redis's `noeviction` policy), the SCAN cursor and the memory
//! numbers, through the `redis` crate against the real binary.

mod common;

use std::collections::{HashMap, HashSet};

use common::TestServer;
use redis::Value;

fn connect(srv: &TestServer) -> redis::Connection {
    redis::Client::open(srv.url(false)).unwrap().get_connection().unwrap()
}

fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"));
    line.trim().parse().unwrap()
}

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn assert_oom(r: redis::RedisResult<Value>) {
    let e = r.expect_err("over maxmemory, a denyoom command must be refused");
    // The redis crate splits "OOM ..." into a code and the rest of the text.
    assert_eq!(e.code(), Some("OOM"), "{e:?}");
    assert!(OOM.ends_with(e.detail().unwrap_or("")), "{e:?}");
}

#[test]
fn maxmemory_refuses_writes_with_redis_oom_error() {
    let srv = TestServer::start(&["--maxmemory", "100kb"]);
    let mut c = connect(&srv);
    assert_eq!(info_field(&mut c, "memory", "used_memory"), 0);
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), 100 * 1024);
    // Below the limit: writes run, and may take the total over it (Redis checks before a
    // command, not its outcome).
    let big = vec![b'x'; 60 * 1024];
    let _: () = redis::cmd("SET").arg("a").arg(&big[..]).query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("b").arg(&big[..]).query(&mut c).unwrap();
    let used = info_field(&mut c, "memory", "used_memory");
    let usage_a: u64 = redis::cmd("MEMORY").arg("USAGE").arg("a").query(&mut c).unwrap();
    let usage_b: u64 = redis::cmd("MEMORY").arg("USAGE").arg("b").query(&mut c).unwrap();
    assert_eq!(used, usage_a + usage_b, "used_memory is the sum of MEMORY USAGE");
    assert!(used > 100 * 1024);
    // Over it: every command that may grow memory is refused, the keyspace is unchanged.
    assert_oom(redis::cmd("SET").arg("c").arg("1").query(&mut c));
    assert_oom(redis::cmd("BF.ADD").arg("bf").arg("item").query(&mut c));
    assert_oom(redis::cmd("CF.RESERVE").arg("cf").arg(100).query(&mut c));
    assert_oom(redis::cmd("COPY").arg("a").arg("a2").query(&mut c));
    let n: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 2);
    // Reads, deletes, expiry and errors Redis gives first still work.
    let got: Vec<u8> = redis::cmd("GET").arg("a").query(&mut c).unwrap();
    assert_eq!(got.len(), big.len());
    let e = redis::cmd("SET").arg("only-key").query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("wrong number of arguments"), "{e}");
    let e = redis::cmd("NOSUCH").arg("x").query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("unknown command"), "{e}");
    // In a transaction: queueing a denyoom command is refused and aborts the MULTI; a
    // transaction queued before the limit was passed is discarded at EXEC, naming the reason.
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    assert_oom(redis::cmd("SET").arg("c").arg("1").query(&mut c));
    let e = redis::cmd("EXEC").query::<Value>(&mut c).unwrap_err();
    assert_eq!(e.code(), Some("EXECABORT"), "{e:?}");
    let _: i64 = redis::cmd("DEL").arg("b").query(&mut c).unwrap();
    let _: () = redis::cmd("MULTI").query(&mut c).unwrap();
    let queued: String = redis::cmd("SET").arg("b").arg(&big[..]).query(&mut c).unwrap();
    assert_eq!(queued, "QUEUED");
    let mut other = connect(&srv);
    let _: () = redis::cmd("SET").arg("b").arg(&big[..]).query(&mut other).unwrap();
    let e = redis::cmd("EXEC").query::<Value>(&mut c).unwrap_err();
    assert_eq!(e.code(), Some("EXECABORT"), "{e:?}");
    assert!(e.to_string().contains("OOM command not allowed"), "{e}");
    let n: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 2, "the discarded transaction changed nothing");
    let _: i64 = redis::cmd("DEL").arg("b").query(&mut c).unwrap();
    assert_eq!(info_field(&mut c, "memory", "used_memory"), usage_a);
    // Back under the limit: writes run again, a filter is charged its Size + key overhead.
    let added: bool = redis::cmd("BF.ADD").arg("bf").arg("item").query(&mut c).unwrap();
    assert!(added);
    let bf_usage: u64 = redis::cmd("MEMORY").arg("USAGE").arg("bf").query(&mut c).unwrap();
    assert_eq!(bf_usage, 240 + 32, "default 0.01/100 filter: Size 240 + 32 (spec §10)");
    assert_eq!(info_field(&mut c, "memory", "used_memory"), usage_a + bf_usage);
    // A raised limit (CONFIG SET) applies at once; FLUSHALL empties the count.
    let _: () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg("0").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("b").arg(&big[..]).query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("c").arg(&big[..]).query(&mut c).unwrap();
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(info_field(&mut c, "memory", "used_memory"), 0);
    assert!(info_field(&mut c, "memory", "used_memory_rss") > 0);
}

#[test]
fn a_filter_that_grows_is_charged_its_new_size() {
    let srv = TestServer::start(&[]);
    let mut c = connect(&srv);
    let _: () = redis::cmd("BF.RESERVE").arg("bf").arg(0.01).arg(10).query(&mut c).unwrap();
    let before = info_field(&mut c, "memory", "used_memory");
    // 100 items into a 10-item scalable filter: it adds links (BF.MADD changes it in place).
    let items: Vec<String> = (0..100).map(|i| format!("item{i}")).collect();
    let _: Vec<bool> = redis::cmd("BF.MADD").arg("bf").arg(&items).query(&mut c).unwrap();
    let size: Vec<u64> = redis::cmd("BF.INFO").arg("bf").arg("SIZE").query(&mut c).unwrap();
    let size = size[0];
    let usage: u64 = redis::cmd("MEMORY").arg("USAGE").arg("bf").query(&mut c).unwrap();
    assert_eq!(usage, size + 32);
    let after = info_field(&mut c, "memory", "used_memory");
    assert!(after > before);
    assert_eq!(after, usage);
}

/// SCAN with a cursor: COUNT is roughly honoured, and every key present for the whole
/// iteration is returned once, although keys are added and removed between the steps.
#[test]
fn scan_cursor_is_stable_under_concurrent_writes() {
    let srv = TestServer::start(&[]);
    let mut c = connect(&srv);
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET").arg(format!("stable:{i}")).arg("v").ignore();
        pipe.cmd("SET").arg(format!("doomed:{i}")).arg("v").ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    // A second client writes between the steps.
    let mut writer = connect(&srv);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut cursor = 0u64;
    let (mut steps, mut largest) = (0usize, 0usize);
    loop {
        let (next, keys): (u64, Vec<String>) =
            redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(25).query(&mut c).unwrap();
        largest = largest.max(keys.len());
        for k in keys {
            *seen.entry(k).or_default() += 1;
        }
        let mut pipe = redis::pipe();
        for j in 0..20 {
            pipe.cmd("SET").arg(format!("new:{steps}:{j}")).arg("v").ignore();
            pipe.cmd("DEL").arg(format!("doomed:{}", steps * 20 + j)).ignore();
        }
        let _: () = pipe.query(&mut writer).unwrap();
        steps += 1;
        cursor = next;
        if cursor == 0 {
            break;
        }
        assert!(steps < 10_000, "SCAN does not terminate");
    }
    for i in 0..2000 {
        let k = format!("stable:{i}");
        assert_eq!(seen.get(&k), Some(&1), "{k} returned {:?} times", seen.get(&k));
    }
    assert!(seen.values().all(|&n| n == 1), "a key was returned twice");
    // At most COUNT keys per step (more only for keys sharing a 64-bit hash).
    assert!(largest <= 25, "a step returned {largest} keys for COUNT 25");
    assert!(steps >= 2000 / 25, "{steps} steps");

    // MATCH and TYPE filter what a step visits; an invalid cursor is an error.
    let _: () = redis::cmd("BF.RESERVE").arg("bloom").arg(0.01).arg(100).query(&mut c).unwrap();
    let mut found = HashSet::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("*oo*")
            .arg("TYPE")
            .arg("mbbloom--")
            .arg("COUNT")
            .arg(1000)
            .query(&mut c)
            .unwrap();
        found.extend(keys);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!(found, HashSet::from(["bloom".to_string()]));
    let e = redis::cmd("SCAN").arg("12x").query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("invalid cursor"), "{e}");
    let (next, _): (u64, Vec<String>) = redis::cmd("SCAN").arg(u64::MAX.to_string()).query(&mut c).unwrap();
    assert_eq!(next, 0, "the last position");
}
