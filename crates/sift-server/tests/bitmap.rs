//! The bitmap commands (SETBIT, GETBIT, BITCOUNT, BITPOS, STRLEN) against the real binary, and
//! the application the seed articles build on them: a Bloom filter kept in a Redis bitmap by
//! the client (k bit positions per item, `SETBIT key pos 1` pipelined to add, `GETBIT` to
//! query), unchanged, including across a clean restart and a `kill -9`.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{encode, temp_dir, TestServer};
use redis::Value;

fn connect(srv: &TestServer) -> redis::Connection {
    redis::Client::open(srv.url(false)).unwrap().get_connection().unwrap()
}

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
const OFFSET: &str = "-ERR bit offset is not an integer or out of range\r\n";
const VALUE: &str = "-ERR bit is not an integer or out of range\r\n";
const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
const SYNTAX: &str = "-ERR syntax error\r\n";

#[test]
fn replies_and_errors_are_redis_exact() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    let mut t = |args: &[&str]| c.cmd_text(args);
    // SETBIT returns the old bit, creates and grows the key, bit 0 = MSB of byte 0.
    assert_eq!(t(&["SETBIT", "bm", "7", "1"]), ":0\r\n");
    assert_eq!(t(&["SETBIT", "bm", "7", "1"]), ":1\r\n");
    assert_eq!(t(&["SETBIT", "bm", "0", "1"]), ":0\r\n");
    assert_eq!(srv.raw().cmd(&["GET", "bm"]), b"$1\r\n\x81\r\n");
    assert_eq!(t(&["SETBIT", "bm", "17", "0"]), ":0\r\n");
    assert_eq!(t(&["STRLEN", "bm"]), ":3\r\n");
    assert_eq!(t(&["GETBIT", "bm", "0"]), ":1\r\n");
    assert_eq!(t(&["GETBIT", "bm", "1"]), ":0\r\n");
    assert_eq!(t(&["GETBIT", "bm", "4294967295"]), ":0\r\n");
    assert_eq!(t(&["GETBIT", "nokey", "3"]), ":0\r\n");
    assert_eq!(t(&["STRLEN", "nokey"]), ":0\r\n");
    // Offsets: 0 ..= 2^32 - 1.
    for bad in ["-1", "4294967296", "1.5", "x", "01"] {
        assert_eq!(t(&["SETBIT", "bm", bad, "1"]), OFFSET, "{bad}");
        assert_eq!(t(&["GETBIT", "bm", bad]), OFFSET, "{bad}");
    }
    for bad in ["2", "-1", "01", "x"] {
        assert_eq!(t(&["SETBIT", "bm", "1", bad]), VALUE, "{bad}");
    }
    // BITCOUNT with Redis's documented example.
    assert_eq!(t(&["SET", "fb", "foobar"]), "+OK\r\n");
    assert_eq!(t(&["BITCOUNT", "fb"]), ":26\r\n");
    assert_eq!(t(&["BITCOUNT", "fb", "0", "0"]), ":4\r\n");
    assert_eq!(t(&["BITCOUNT", "fb", "1", "1"]), ":6\r\n");
    assert_eq!(t(&["BITCOUNT", "fb", "1", "1", "BYTE"]), ":6\r\n");
    assert_eq!(t(&["BITCOUNT", "fb", "5", "30", "bit"]), ":17\r\n");
    assert_eq!(t(&["BITCOUNT", "fb", "-2", "-1"]), ":7\r\n");
    assert_eq!(t(&["BITCOUNT", "fb", "-1", "-2"]), ":0\r\n");
    assert_eq!(t(&["BITCOUNT", "fb", "-100", "100"]), ":26\r\n");
    assert_eq!(t(&["BITCOUNT", "nokey"]), ":0\r\n");
    assert_eq!(t(&["BITCOUNT", "nokey", "0", "-1", "BIT"]), ":0\r\n");
    assert_eq!(t(&["BITCOUNT", "fb", "0"]), SYNTAX);
    assert_eq!(t(&["BITCOUNT", "fb", "0", "1", "WORD"]), SYNTAX);
    assert_eq!(t(&["BITCOUNT", "fb", "a", "1"]), NOT_INT);
    // Arguments are checked before the key is looked up.
    assert_eq!(t(&["BITCOUNT", "nokey", "a", "1"]), NOT_INT);
    // BITPOS with the documented examples and the clear-bit rule.
    assert_eq!(t(&["SET", "p", "\u{0}"]), "+OK\r\n");
    let mut raw = srv.raw();
    let mut set = |k: &str, v: &[u8]| assert_eq!(raw.cmd_bytes(&[&b"SET"[..], k.as_bytes(), v]), b"+OK\r\n");
    set("p1", b"\xff\xf0\x00");
    set("p2", b"\x00\xff\xf0");
    set("ones", b"\xff\xff\xff");
    assert_eq!(t(&["BITPOS", "p1", "0"]), ":12\r\n");
    assert_eq!(t(&["BITPOS", "p2", "1", "0"]), ":8\r\n");
    assert_eq!(t(&["BITPOS", "p2", "1", "2"]), ":16\r\n");
    assert_eq!(t(&["BITPOS", "p2", "1", "2", "-1", "BYTE"]), ":16\r\n");
    assert_eq!(t(&["BITPOS", "p2", "1", "7", "15", "BIT"]), ":8\r\n");
    assert_eq!(t(&["BITPOS", "ones", "0"]), ":24\r\n");
    assert_eq!(t(&["BITPOS", "ones", "0", "1"]), ":24\r\n");
    assert_eq!(t(&["BITPOS", "ones", "0", "0", "-1"]), ":-1\r\n");
    assert_eq!(t(&["BITPOS", "ones", "1", "1", "0"]), ":-1\r\n");
    assert_eq!(t(&["BITPOS", "nokey", "1"]), ":-1\r\n");
    assert_eq!(t(&["BITPOS", "nokey", "0"]), ":0\r\n");
    assert_eq!(t(&["BITPOS", "p", "2"]), "-ERR The bit argument must be 1 or 0.\r\n");
    assert_eq!(t(&["BITPOS", "p", "x"]), NOT_INT);
    assert_eq!(t(&["BITPOS", "p", "1", "0", "1", "WORD"]), SYNTAX);
    assert_eq!(t(&["BITPOS", "p", "1", "0", "1", "BIT", "x"]), SYNTAX);
    assert_eq!(t(&["SETBIT", "bm", "1"]), "-ERR wrong number of arguments for 'setbit' command\r\n");
    // WRONGTYPE both ways.
    assert_eq!(t(&["BF.ADD", "bf", "x"]), ":1\r\n");
    for cmd in [
        &["SETBIT", "bf", "0", "1"][..],
        &["GETBIT", "bf", "0"],
        &["BITCOUNT", "bf"],
        &["BITPOS", "bf", "0"],
        &["STRLEN", "bf"],
        &["BF.ADD", "bm", "x"],
        &["CF.ADD", "bm", "x"],
    ] {
        assert_eq!(t(cmd), WRONGTYPE, "{cmd:?}");
    }
    // As RedisBloom: the EXISTS commands answer "no" for a key of another type, never an error.
    assert_eq!(t(&["BF.EXISTS", "bm", "x"]), ":0\r\n");
    // Generic commands treat a bitmap as the string it is.
    assert_eq!(t(&["TYPE", "bm"]), "+string\r\n");
    assert_eq!(t(&["MEMORY", "USAGE", "bm"]), ":35\r\n", "3 bytes + 32 of key overhead");
    assert_eq!(
        t(&["SCAN", "0", "COUNT", "1000", "TYPE", "string", "MATCH", "b*"]),
        "*2\r\n$1\r\n0\r\n*1\r\n$2\r\nbm\r\n"
    );
    assert_eq!(t(&["EXPIRE", "bm", "1000"]), ":1\r\n");
    assert_eq!(t(&["SETBIT", "bm", "100", "1"]), ":0\r\n");
    assert_eq!(t(&["TTL", "bm"]), ":1000\r\n", "SETBIT keeps the TTL");
    assert_eq!(t(&["RENAME", "bm", "bm2"]), "+OK\r\n");
    assert_eq!(t(&["GETBIT", "bm2", "100"]), ":1\r\n");
    assert_eq!(t(&["BITCOUNT", "bm2"]), ":3\r\n");
    assert_eq!(t(&["DEL", "bm2"]), ":1\r\n");
    assert_eq!(t(&["GETBIT", "bm2", "100"]), ":0\r\n");
    assert!(t(&["COMMAND", "INFO", "setbit"]).starts_with(
        "*1\r\n*10\r\n$6\r\nsetbit\r\n:4\r\n*2\r\n+write\r\n+denyoom\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@bitmap\r\n+@slow\r\n"
    ));
    assert!(t(&["COMMAND", "INFO", "getbit"])
        .starts_with("*1\r\n*10\r\n$6\r\ngetbit\r\n:3\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@bitmap\r\n+@fast\r\n"));
}

#[test]
fn a_huge_offset_on_a_server_at_its_memory_limit_fails_cleanly() {
    let srv = TestServer::start(&["--maxmemory", "1mb"]);
    let mut c = srv.raw();
    let oom = "-OOM command not allowed when used memory > 'maxmemory'.\r\n";
    // 512 MB at once: refused before allocating, for a new key and for an existing one.
    assert_eq!(c.cmd_text(&["SETBIT", "big", "4294967295", "1"]), oom);
    assert_eq!(c.cmd_text(&["SETBIT", "bm", "0", "1"]), ":0\r\n");
    assert_eq!(c.cmd_text(&["SETBIT", "bm", "4294967295", "1"]), oom);
    assert_eq!(c.cmd_text(&["STRLEN", "bm"]), ":1\r\n");
    assert_eq!(c.cmd_text(&["EXISTS", "big"]), ":0\r\n");
    // Growth up to the limit works, past it does not; the server stays up and serves.
    assert_eq!(c.cmd_text(&["SETBIT", "bm", "7000000", "1"]), ":0\r\n");
    assert_eq!(c.cmd_text(&["SETBIT", "bm", "9000000", "1"]), oom);
    assert_eq!(c.cmd_text(&["SETBIT", "bm", "5", "1"]), ":0\r\n");
    assert_eq!(c.cmd_text(&["BITCOUNT", "bm"]), ":3\r\n");
}

// ---- The seed-003 application: a Bloom filter in a Redis bitmap, maintained by the client ----

/// Bits of the filter, as the seed's `BloomFilterHelper.optimalNumOfBits` computes them:
/// `(int) (-n ln p / ln² 2)` for n = 1000 items at p = 1% (9585.06, truncated).
const M: u64 = 9585;
/// Hash functions, as `optimalNumOfHashFunctions`: `max(1, round(m/n ln 2))` = round(6.64).
const K: u64 = 7;
/// Items inserted.
const N: usize = 1000;
/// Non-members queried.
const NON: usize = 100_000;

/// The k bit positions of an item, exactly as the seed's `BloomFilterHelper.murmurHashOffset`
/// (seed 003) computes them in Java: `long hash64 = Hashing.murmur3_128().hashObject(value,
/// stringFunnel).asLong()` (the first 8 bytes of Guava's MurmurHash3_x64_128 of the string's
/// bytes, seed 0: its `h1`), `int hash1 = (int) hash64, hash2 = (int) (hash64 >>> 32)`, then for
/// `i = 1..=k`: `next = hash1 + i * hash2` (32-bit wrapping), `~next` if negative, `% bitSize`.
/// So the offsets sent here are the ones the seed's Java application sends for the same items.
fn positions(item: &str) -> Vec<u64> {
    let (h1, _) = sift::hash::murmur3_x64_128(item.as_bytes(), 0);
    let (hash1, hash2) = (h1 as i32, (h1 >> 32) as i32);
    (1..=K as i32)
        .map(|i| {
            let next = hash1.wrapping_add(i.wrapping_mul(hash2));
            let next = if next < 0 { !next } else { next };
            next as u64 % M
        })
        .collect()
}

fn member(i: usize) -> String {
    format!("user:{i}")
}

fn non_member(i: usize) -> String {
    format!("visitor:{i}")
}

/// `addList`: one pipeline of k SETBITs per item (not a transaction, as Spring's
/// `executePipelined`), every reply read before returning.
fn add_all(con: &mut redis::Connection, key: &str, items: &[String]) {
    let mut p = redis::pipe();
    for item in items {
        for pos in positions(item) {
            p.cmd("SETBIT").arg(key).arg(pos).arg(1);
        }
    }
    let replies: Vec<i64> = p.query(con).unwrap();
    assert_eq!(replies.len(), items.len() * K as usize);
    assert!(replies.iter().all(|&r| r == 0 || r == 1));
}

/// `contains` for every item: k GETBITs each, pipelined in batches; true when all k are set.
fn query_all(con: &mut redis::Connection, key: &str, items: &[String]) -> Vec<bool> {
    let mut out = Vec::with_capacity(items.len());
    for batch in items.chunks(2000) {
        let mut p = redis::pipe();
        for item in batch {
            for pos in positions(item) {
                p.cmd("GETBIT").arg(key).arg(pos);
            }
        }
        let bits: Vec<i64> = p.query(con).unwrap();
        out.extend(bits.chunks(K as usize).map(|b| b.iter().all(|&x| x == 1)));
    }
    out
}

/// Everything a client can observe of the bitmap.
#[derive(Debug, PartialEq)]
struct Observed {
    bytes: Vec<u8>,
    count: i64,
    first_one: i64,
    members: Vec<bool>,
    non_members: Vec<bool>,
}

fn observe(con: &mut redis::Connection, key: &str, members: &[String], non_members: &[String]) -> Observed {
    let bytes: Vec<u8> = redis::cmd("GET").arg(key).query(con).unwrap();
    let count: i64 = redis::cmd("BITCOUNT").arg(key).query(con).unwrap();
    let first_one: i64 = redis::cmd("BITPOS").arg(key).arg(1).query(con).unwrap();
    Observed {
        bytes,
        count,
        first_one,
        members: query_all(con, key, members),
        non_members: query_all(con, key, non_members),
    }
}

/// The checks of the filter itself, against a model the client keeps of the bits it set.
fn check_filter(o: &Observed, model: &BTreeSet<u64>, non_members: &[String]) {
    // Every bit where the client put it: BITCOUNT and BITPOS agree with the model, and the
    // string is exactly the model's bitmap (bit 0 = MSB of byte 0, as long as the highest bit).
    assert_eq!(o.count as usize, model.len());
    assert_eq!(o.first_one as u64, *model.first().unwrap());
    assert!(o.bytes == bitmap_of(model), "the bitmap differs from the bits the client set");
    // No false negative.
    assert!(o.members.iter().all(|&m| m), "a member is missing");
    // False positives. A non-member's k positions are (for a good hash) independent uniform
    // draws, so with a fill fraction f = X/m of the filter, each non-member is a false
    // positive with probability f^k, and the count over NON of them is Binomial(NON, f^k).
    // The design predicts f from T = k n throws into m bits: E[zero bits] = m q1 with
    // q1 = (1 - 1/m)^T, Var = m q1 + m(m - 1) q2 - m² q1², q2 = (1 - 2/m)^T. By the delta
    // method the designed FPR p = (1 - q1)^k has sd(p) = k (1 - q1)^(k-1) sd(zero bits) / m.
    // The count's variance is NON p (1 - p) (binomial) + NON² Var(p) (fill); 99.9% two-sided
    // is ± 3.29 sd. With m = 9585, k = 7, n = 1000: p = 0.01004, E[count] = 1004, sd = 50.
    let (m, k, t) = (M as f64, K as i32, (K as usize * N) as f64);
    let q1 = (1.0 - 1.0 / m).powf(t);
    let q2 = (1.0 - 2.0 / m).powf(t);
    let var_zero = m * q1 + m * (m - 1.0) * q2 - m * m * q1 * q1;
    let p = (1.0 - q1).powi(k);
    let sd_p = k as f64 * (1.0 - q1).powi(k - 1) * var_zero.sqrt() / m;
    let nn = NON as f64;
    let sd = (nn * p * (1.0 - p) + nn * nn * sd_p * sd_p).sqrt();
    let (lo, hi) = (nn * p - 3.29 * sd, nn * p + 3.29 * sd);
    let fp = o.non_members.iter().filter(|&&x| x).count() as f64;
    println!("{fp} false positives of {NON}; designed {:.1}, 99.9% bounds [{lo:.1}, {hi:.1}]", nn * p);
    assert!((lo..=hi).contains(&fp), "{fp} false positives, designed {:.0} in [{lo:.0}, {hi:.0}]", nn * p);
    // And exactly the false positives the model predicts (a misplaced bit would change them).
    assert!(o.non_members == model_answers(model, non_members), "false positives differ from the model");
}

/// The string holding exactly the bits of `model` (as long as its highest bit needs).
fn bitmap_of(model: &BTreeSet<u64>) -> Vec<u8> {
    let mut out = vec![0u8; (*model.last().unwrap() / 8 + 1) as usize];
    for &p in model {
        out[(p / 8) as usize] |= 0x80 >> (p % 8);
    }
    out
}

fn model_answers(model: &BTreeSet<u64>, items: &[String]) -> Vec<bool> {
    items.iter().map(|i| positions(i).iter().all(|p| model.contains(p))).collect()
}

fn info_field(con: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("persistence").query(con).unwrap();
    let line =
        info.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or_else(|| panic!("{field}"));
    line[field.len() + 1..].to_string()
}

fn shutdown(mut srv: TestServer) {
    let mut c = srv.raw();
    c.send(&encode(&["SHUTDOWN"]));
    let t = Instant::now();
    loop {
        if let Some(status) = srv.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "SHUTDOWN did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn seed_003_bloom_filter_in_a_bitmap_survives_restarts_and_kill_9() {
    let members: Vec<String> = (0..N).map(member).collect();
    let non_members: Vec<String> = (0..NON).map(non_member).collect();
    let model: BTreeSet<u64> = members.iter().flat_map(|m| positions(m)).collect();
    let dir = temp_dir("bitmap-seed");
    let d = dir.display().to_string();
    let plain = ["--dir", &d];
    // Phase 1, with a small rewrite threshold so that the log is also rewritten (a new snapshot
    // and segment) while the bits go in: bitmaps survive a snapshot taken by SAVE, one taken by
    // the automatic rewrite, and the log records after each; then kill -9.
    let rewriting =
        ["--dir", &d, "--auto-aof-rewrite-min-size", "16kb", "--auto-aof-rewrite-percentage", "50"];
    let srv = TestServer::start(&rewriting);
    let mut con = connect(&srv);
    add_all(&mut con, "bf:users", &members[..400]);
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    add_all(&mut con, "bf:users", &members[400..800]);
    let t = Instant::now();
    while info_field(&mut con, "aof_rewrites") == "0"
        || info_field(&mut con, "aof_rewrite_in_progress") != "0"
    {
        assert!(t.elapsed() < Duration::from_secs(30), "no automatic log rewrite");
        std::thread::sleep(Duration::from_millis(10));
    }
    add_all(&mut con, "bf:users", &members[800..900]);
    let first: BTreeSet<u64> = members[..900].iter().flat_map(|m| positions(m)).collect();
    let bytes: Vec<u8> = redis::cmd("GET").arg("bf:users").query(&mut con).unwrap();
    assert!(bytes == bitmap_of(&first));
    drop(con);
    drop(srv);
    let srv = TestServer::start(&plain);
    let mut con = connect(&srv);
    let bytes: Vec<u8> = redis::cmd("GET").arg("bf:users").query(&mut con).unwrap();
    assert!(bytes == bitmap_of(&first), "bits lost across snapshots, a rewrite and kill -9");

    // Phase 2, without rewrites: the last bits exist only as log records when the server is
    // killed right after the last pipelined SETBIT was acknowledged (fsync always).
    add_all(&mut con, "bf:users", &members[900..]);
    let before = observe(&mut con, "bf:users", &members, &non_members);
    check_filter(&before, &model, &non_members);
    drop(con);
    drop(srv);

    let srv = TestServer::start(&plain);
    let mut con = connect(&srv);
    let after_kill = observe(&mut con, "bf:users", &members, &non_members);
    assert!(after_kill == before, "GETBIT answers changed across kill -9");
    // Adding the same items again changes nothing.
    add_all(&mut con, "bf:users", &members[..10]);
    drop(con);
    shutdown(srv);

    let srv = TestServer::start(&plain);
    let mut con = connect(&srv);
    let after_restart = observe(&mut con, "bf:users", &members, &non_members);
    assert!(after_restart == before, "GETBIT answers changed across a clean restart");
    // The reset of the seed's application: DEL.
    let n: i64 = redis::cmd("DEL").arg("bf:users").query(&mut con).unwrap();
    assert_eq!(n, 1);
    assert_eq!(query_all(&mut con, "bf:users", &members[..10]), vec![false; 10]);
    let v: Value = redis::cmd("BF.ADD").arg("bf:users").arg("x").query(&mut con).unwrap();
    assert_eq!(v, Value::Int(1), "BF.ADD does it in one round trip");
    drop(con);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
