//! Transactions through the `redis` crate against the real binary: WATCH / UNWATCH (optimistic
//! transactions, Redis 7.0's rules, checked byte for byte against redis-server 7.0.15 when they
//! were written), the `redis::transaction` retry loop under contention, and the framing of a
//! transaction's records in the append-only log (a crash in the middle of one loses all of it,
//! never a prefix).

mod common;

use std::fs;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::Bytes;
use common::{temp_dir, wait_until, Proc, TestServer};
use redis::Value;
use sift_server::persist::aof;

fn connect(addr: SocketAddr, resp3: bool) -> redis::Connection {
    let proto = if resp3 { "?protocol=resp3" } else { "" };
    redis::Client::open(format!("redis://{addr}/{proto}")).unwrap().get_connection().unwrap()
}

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

fn ok(c: &mut redis::Connection, args: &[&str]) -> Value {
    q(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn okay() -> Value {
    Value::Okay
}

/// The error text as the server sent it (code and detail joined again).
fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// WATCH k on `c`, run `between` (on another connection `o`), then MULTI / SET k mine / SET
/// side 1 / EXEC on `c`: the EXEC reply. When it is the null reply, checks that neither queued
/// command ran.
fn exec_after(
    c: &mut redis::Connection,
    o: &mut redis::Connection,
    setup: &[&[&str]],
    between: &[&[&str]],
) -> Value {
    ok(o, &["FLUSHALL"]);
    for cmd in setup {
        let _ = q(o, cmd);
    }
    assert_eq!(ok(c, &["WATCH", "k"]), okay());
    for cmd in between {
        let _ = q(o, cmd);
    }
    assert_eq!(ok(c, &["MULTI"]), okay());
    assert_eq!(ok(c, &["SET", "k", "mine"]), Value::SimpleString("QUEUED".into()));
    assert_eq!(ok(c, &["SET", "side", "1"]), Value::SimpleString("QUEUED".into()));
    let reply = ok(c, &["EXEC"]);
    if reply == Value::Nil {
        assert_eq!(ok(c, &["EXISTS", "side"]), Value::Int(0), "{between:?}: a queued command ran");
        assert_ne!(q(c, &["GET", "k"]).ok(), Some(bulk("mine")));
    }
    reply
}

/// A request, its arguments as text.
type Cmd<'a> = &'a [&'a str];
/// (what, setup, what another client does between WATCH and EXEC, does EXEC run?)
type Case<'a> = (&'a str, &'a [Cmd<'a>], &'a [Cmd<'a>], bool);

#[test]
fn exec_fails_when_a_watched_key_was_modified() {
    let srv = TestServer::start(&[]);
    for resp3 in [false, true] {
        let mut c = connect(srv.addr, resp3);
        let mut o = connect(srv.addr, resp3);
        let ran = Value::Array(vec![okay(), okay()]);
        let k1: &[&str] = &["SET", "k", "1"];
        let cases: &[Case] = &[
            ("nothing", &[k1], &[], true),
            (
                "reads only",
                &[k1],
                &[&["GET", "k"], &["EXISTS", "k"], &["TTL", "k"], &["SET", "other", "1"]],
                true,
            ),
            ("SET", &[k1], &[&["SET", "k", "2"]], false),
            ("SET of the same value", &[k1], &[&["SET", "k", "1"]], false),
            ("SET NX that does not set", &[k1], &[&["SET", "k", "2", "NX"]], true),
            ("SET creating the key", &[], &[&["SET", "k", "2"]], false),
            ("DEL", &[k1], &[&["DEL", "k"]], false),
            ("DEL of a missing key", &[], &[&["DEL", "k"]], true),
            ("UNLINK", &[k1], &[&["UNLINK", "k"]], false),
            ("RENAME from", &[k1], &[&["RENAME", "k", "j"]], false),
            ("RENAME to", &[&["SET", "j", "1"]], &[&["RENAME", "j", "k"]], false),
            ("RENAME to itself", &[k1], &[&["RENAME", "k", "k"]], true),
            ("COPY to", &[&["SET", "j", "1"]], &[&["COPY", "j", "k"]], false),
            ("EXPIRE", &[k1], &[&["EXPIRE", "k", "100"]], false),
            ("EXPIRE of a missing key", &[], &[&["EXPIRE", "k", "100"]], true),
            (
                "EXPIRE NX on a key with a TTL",
                &[&["SET", "k", "1", "EX", "100"]],
                &[&["EXPIRE", "k", "50", "NX"]],
                true,
            ),
            ("PERSIST", &[&["SET", "k", "1", "EX", "100"]], &[&["PERSIST", "k"]], false),
            ("PERSIST without a TTL", &[k1], &[&["PERSIST", "k"]], true),
            ("FLUSHALL", &[k1], &[&["FLUSHALL"]], false),
            ("FLUSHDB", &[k1], &[&["FLUSHDB"]], false),
            ("FLUSHALL without the key", &[&["SET", "other", "1"]], &[&["FLUSHALL"]], true),
            ("SETBIT", &[&["SETBIT", "k", "3", "1"]], &[&["SETBIT", "k", "3", "0"]], false),
            ("SETBIT to the same value", &[&["SETBIT", "k", "3", "1"]], &[&["SETBIT", "k", "3", "1"]], true),
            ("SETBIT error", &[k1], &[&["SETBIT", "k", "3", "x"]], true),
            #[cfg(feature = "lua")]
            ("script", &[], &[&["EVAL", "redis.call('SET', KEYS[1], 'x')", "1", "k"]], false),
            #[cfg(feature = "lua")]
            ("read-only script", &[k1], &[&["EVAL", "return redis.call('GET', KEYS[1])", "1", "k"]], true),
            ("another client's EXEC", &[], &[&["MULTI"], &["SET", "k", "2"], &["EXEC"]], false),
            ("BF.ADD", &[], &[&["BF.ADD", "k", "a"]], false),
            // A module's write command counts as modifying its key whenever it looked the key
            // up (Redis signals a key a module opened for writing), even with an error reply;
            // not when it failed on its arguments before (as redis-server 7.0.15 with the
            // sift-redis module, which opens keys as RedisBloom does).
            ("BF.ADD of an item present", &[&["BF.ADD", "k", "a"]], &[&["BF.ADD", "k", "a"]], false),
            (
                "BF.RESERVE of an existing filter",
                &[&["BF.ADD", "k", "a"]],
                &[&["BF.RESERVE", "k", "0.01", "100"]],
                false,
            ),
            (
                "BF.INSERT NOCREATE of a missing filter",
                &[],
                &[&["BF.INSERT", "k", "NOCREATE", "ITEMS", "a"]],
                false,
            ),
            ("BF.ADD on a string", &[k1], &[&["BF.ADD", "k", "a"]], false),
            (
                "BF.RESERVE with a bad error rate",
                &[&["BF.ADD", "k", "a"]],
                &[&["BF.RESERVE", "k", "abc", "100"]],
                true,
            ),
            ("CF.DEL of a missing filter", &[], &[&["CF.DEL", "k", "a"]], false),
            ("CF.COMPACT", &[&["CF.ADD", "k", "a"]], &[&["CF.COMPACT", "k"]], false),
            ("BF.EXISTS", &[&["BF.ADD", "k", "a"]], &[&["BF.EXISTS", "k", "a"]], true),
            ("CF.ADD", &[&["CF.ADD", "k", "a"]], &[&["CF.ADD", "k", "b"]], false),
            ("CF.DEL", &[&["CF.ADD", "k", "a"]], &[&["CF.DEL", "k", "a"]], false),
        ];
        for (what, setup, between, runs) in cases {
            let got = exec_after(&mut c, &mut o, setup, between);
            let want = if *runs { ran.clone() } else { Value::Nil };
            assert_eq!(got, want, "{what} (resp3: {resp3})");
        }
        // The watching client's own write before MULTI counts too.
        ok(&mut c, &["WATCH", "k"]);
        ok(&mut c, &["SET", "k", "own"]);
        ok(&mut c, &["MULTI"]);
        ok(&mut c, &["PING"]);
        assert_eq!(ok(&mut c, &["EXEC"]), Value::Nil);
    }
}

/// The null reply's bytes: `*-1` in RESP2, `_` in RESP3, as redis-server 7.0.15 sends them.
#[test]
fn the_null_reply_in_both_protocols() {
    let srv = TestServer::start(&[]);
    for (hello, reply) in [("2", &b"*-1\r\n"[..]), ("3", &b"_\r\n"[..])] {
        let mut raw = srv.raw();
        let mut other = connect(srv.addr, false);
        raw.cmd(&["HELLO", hello]);
        assert_eq!(raw.cmd(&["WATCH", "n"]), b"+OK\r\n");
        ok(&mut other, &["SET", "n", "1"]);
        assert_eq!(raw.cmd(&["MULTI"]), b"+OK\r\n");
        assert_eq!(raw.cmd(&["SET", "n", "2"]), b"+QUEUED\r\n");
        assert_eq!(raw.cmd(&["EXEC"]), reply, "RESP{hello}");
        assert_eq!(raw.cmd(&["GET", "n"]), b"$1\r\n1\r\n");
    }
}

#[test]
fn unwatch_discard_and_exec_forget_the_watches() {
    let srv = TestServer::start(&[]);
    let mut c = connect(srv.addr, false);
    let mut o = connect(srv.addr, false);
    let tx = |c: &mut redis::Connection| {
        ok(c, &["MULTI"]);
        ok(c, &["PING"]);
        ok(c, &["EXEC"])
    };
    let pong = Value::Array(vec![Value::SimpleString("PONG".into())]);
    // UNWATCH before the change, and after it (it also clears the "modified" state).
    ok(&mut c, &["WATCH", "k"]);
    assert_eq!(ok(&mut c, &["UNWATCH"]), okay());
    ok(&mut o, &["SET", "k", "1"]);
    assert_eq!(tx(&mut c), pong);
    ok(&mut c, &["WATCH", "k"]);
    ok(&mut o, &["SET", "k", "2"]);
    ok(&mut c, &["UNWATCH"]);
    assert_eq!(tx(&mut c), pong);
    // DISCARD.
    ok(&mut c, &["WATCH", "k"]);
    ok(&mut o, &["SET", "k", "3"]);
    ok(&mut c, &["MULTI"]);
    assert_eq!(ok(&mut c, &["DISCARD"]), okay());
    assert_eq!(tx(&mut c), pong);
    // A failed EXEC, and a successful one, unwatch everything.
    ok(&mut c, &["WATCH", "k"]);
    ok(&mut o, &["SET", "k", "4"]);
    assert_eq!(tx(&mut c), Value::Nil);
    ok(&mut o, &["SET", "k", "5"]);
    assert_eq!(tx(&mut c), pong);
    ok(&mut c, &["WATCH", "k"]);
    assert_eq!(tx(&mut c), pong);
    ok(&mut o, &["SET", "k", "6"]);
    assert_eq!(tx(&mut c), pong);
    // EXEC or DISCARD without MULTI do not: the watch still holds.
    ok(&mut c, &["WATCH", "k"]);
    assert_eq!(error_text(&q(&mut c, &["EXEC"]).unwrap_err()), "ERR EXEC without MULTI");
    assert_eq!(error_text(&q(&mut c, &["DISCARD"]).unwrap_err()), "ERR DISCARD without MULTI");
    ok(&mut o, &["SET", "k", "7"]);
    assert_eq!(tx(&mut c), Value::Nil);
    // EXECABORT (a queueing error) unwatches too.
    ok(&mut c, &["WATCH", "k"]);
    ok(&mut c, &["MULTI"]);
    assert!(q(&mut c, &["NOSUCHCOMMAND"]).is_err());
    assert!(error_text(&q(&mut c, &["EXEC"]).unwrap_err()).starts_with("EXECABORT"));
    ok(&mut o, &["SET", "k", "8"]);
    assert_eq!(tx(&mut c), pong);
    // UNWATCH inside MULTI is queued, and runs as a no-op (EXEC unwatched first).
    ok(&mut c, &["WATCH", "k"]);
    ok(&mut c, &["MULTI"]);
    assert_eq!(ok(&mut c, &["UNWATCH"]), Value::SimpleString("QUEUED".into()));
    assert_eq!(ok(&mut c, &["EXEC"]), Value::Array(vec![okay()]));
    // A closed connection's watches are gone: its keys can be written and watched again.
    let mut gone = connect(srv.addr, false);
    ok(&mut gone, &["WATCH", "k", "j"]);
    drop(gone);
    ok(&mut o, &["SET", "k", "9"]);
    ok(&mut c, &["WATCH", "k"]);
    assert_eq!(tx(&mut c), pong);
}

#[test]
fn watch_inside_multi_and_arity_errors() {
    let srv = TestServer::start(&[]);
    let mut c = connect(srv.addr, false);
    assert_eq!(
        error_text(&q(&mut c, &["WATCH"]).unwrap_err()),
        "ERR wrong number of arguments for 'watch' command"
    );
    assert_eq!(
        error_text(&q(&mut c, &["UNWATCH", "x"]).unwrap_err()),
        "ERR wrong number of arguments for 'unwatch' command"
    );
    ok(&mut c, &["MULTI"]);
    assert_eq!(error_text(&q(&mut c, &["WATCH", "k"]).unwrap_err()), "ERR WATCH inside MULTI is not allowed");
    // As in Redis, the error does not abort the transaction.
    ok(&mut c, &["SET", "k", "1"]);
    assert_eq!(ok(&mut c, &["EXEC"]), Value::Array(vec![okay()]));
    // Not from scripts.
    #[cfg(feature = "lua")]
    {
        let e = q(&mut c, &["EVAL", "return redis.call('WATCH', 'k')", "0"]).unwrap_err();
        assert!(error_text(&e).contains("This Redis command is not allowed from script"), "{e}");
    }
    // COMMAND INFO as redis-server 7.0.15 answers it.
    let info = ok(&mut c, &["COMMAND", "INFO", "watch", "unwatch"]);
    let Value::Array(rows) = info else { panic!("{info:?}") };
    let simple = |v: &[&str]| Value::Array(v.iter().map(|s| Value::SimpleString(s.to_string())).collect());
    let Value::Array(watch) = &rows[0] else { panic!("{rows:?}") };
    assert_eq!(watch[0], bulk("watch"));
    assert_eq!(watch[1], Value::Int(-2));
    assert_eq!(watch[2], simple(&["noscript", "loading", "stale", "fast", "allow_busy"]));
    assert_eq!(watch[3..6], [Value::Int(1), Value::Int(-1), Value::Int(1)]);
    assert_eq!(watch[6], simple(&["@fast", "@transaction"]));
    let Value::Array(specs) = &watch[8] else { panic!("{watch:?}") };
    let Value::Array(spec) = &specs[0] else { panic!("{specs:?}") };
    assert_eq!(spec[..2], [bulk("flags"), simple(&["RO"])]);
    let Value::Array(unwatch) = &rows[1] else { panic!("{rows:?}") };
    assert_eq!(
        unwatch[..6],
        [bulk("unwatch"), Value::Int(1), watch[2].clone(), Value::Int(0), Value::Int(0), Value::Int(0)]
    );
}

/// Redis 7.0: a watched key that expires before EXEC fails it (even if nobody touched it and
/// it was not yet removed); one that had already expired when it was watched does not.
///
/// Reading `e` would expire it, so the test waits on a clock key set just after it with the
/// same time to live: once `clock` has expired, `e` has too.
#[test]
fn a_watched_key_that_expires_fails_exec() {
    let srv = TestServer::start(&[]);
    let mut c = connect(srv.addr, false);
    let mut o = connect(srv.addr, false);
    fn wait_for_expiry(o: &mut redis::Connection) {
        wait_until("the clock key to expire", || ok(o, &["EXISTS", "clock"]) == Value::Int(0))
    }
    for touch_it in [false, true] {
        ok(&mut c, &["SET", "e", "1", "PX", "300"]);
        ok(&mut c, &["SET", "clock", "1", "PX", "300"]);
        ok(&mut c, &["WATCH", "e"]);
        wait_for_expiry(&mut o);
        if touch_it {
            // Removed lazily by a read.
            assert_eq!(ok(&mut o, &["GET", "e"]), Value::Nil);
        }
        ok(&mut c, &["MULTI"]);
        ok(&mut c, &["PING"]);
        assert_eq!(ok(&mut c, &["EXEC"]), Value::Nil, "touched: {touch_it}");
    }
    ok(&mut c, &["SET", "e", "1", "PX", "20"]);
    ok(&mut c, &["SET", "clock", "1", "PX", "20"]);
    wait_for_expiry(&mut o);
    ok(&mut c, &["WATCH", "e"]);
    assert_eq!(ok(&mut o, &["GET", "e"]), Value::Nil);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["PING"]);
    assert_eq!(ok(&mut c, &["EXEC"]), Value::Array(vec![Value::SimpleString("PONG".into())]));
}

/// `redis::transaction` (WATCH, read, MULTI ... EXEC, retry on the null reply) from several
/// threads: a counter kept as the number of set bits of a bitmap, each increment setting bit
/// number BITCOUNT. Two increments that read the same count set the same bit, so a lost update
/// shows as a final count below the number of increments.
#[test]
fn redis_transaction_retries_until_no_update_is_lost() {
    const THREADS: usize = 4;
    const EACH: usize = 40;
    let srv = TestServer::start(&[]);
    let addr = srv.addr;
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let mut c = connect(addr, false);
                for _ in 0..EACH {
                    let () = redis::transaction(&mut c, &["ctr"], |con, pipe| {
                        attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let n: u64 = redis::cmd("BITCOUNT").arg("ctr").query(con)?;
                        pipe.cmd("SETBIT").arg("ctr").arg(n).arg(1).ignore().query(con)
                    })
                    .unwrap();
                }
            });
        }
    });
    let mut c = connect(addr, false);
    assert_eq!(ok(&mut c, &["BITCOUNT", "ctr"]), Value::Int((THREADS * EACH) as i64));
    let attempts = attempts.into_inner();
    println!("{} increments took {attempts} attempts", THREADS * EACH);
    assert!(attempts >= THREADS * EACH);
}

// ------------------------------------------------------------------------------------------------
// The log: transactions are framed, a partial one is dropped.

/// The data directory's log segments, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "aof"))
        .collect();
    v.sort();
    v
}

/// Every record of a segment, in order.
fn records(seg: &Path) -> Vec<Vec<String>> {
    let data = Bytes::from(fs::read(seg).unwrap());
    let header = aof::parse_segment_header(&data).unwrap();
    let mut out = Vec::new();
    aof::scan(&data, &header, |_, argv: Vec<Bytes>| {
        out.push(argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect())
    });
    out
}

/// Where the records of a segment end (the log is preallocated with zeros ahead of them).
fn records_end(seg: &Path) -> u64 {
    *common::boundaries(&fs::read(seg).unwrap()).last().unwrap() as u64
}

fn argv(parts: &[&str]) -> Vec<Bytes> {
    parts.iter().map(|p| Bytes::copy_from_slice(p.as_bytes())).collect()
}

fn get(c: &mut redis::Connection, key: &str) -> Value {
    ok(c, &["GET", key])
}

/// An EXEC and a script that write several times are logged as MULTI ... EXEC frames, and
/// replay; one write alone is not framed.
#[test]
#[cfg(feature = "lua")]
fn exec_and_scripts_are_logged_as_frames_and_replayed() {
    let dir = temp_dir("txn-frames");
    let p = Proc::started(&dir);
    let mut c = connect(p.addr, false);
    ok(&mut c, &["SET", "before", "0"]);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["GET", "a"]);
    ok(&mut c, &["EXPIRE", "a", "1000"]);
    ok(&mut c, &["BF.ADD", "bf", "x"]);
    assert_eq!(ok(&mut c, &["EXEC"]).as_sequence().map(|s| s.len()), Some(4));
    ok(
        &mut c,
        &["EVAL", "redis.call('SET', KEYS[1], 'b') redis.call('SETBIT', KEYS[2], 7, 1)", "2", "b", "bits"],
    );
    // One write: no frame.
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "one", "1"]);
    ok(&mut c, &["GET", "one"]);
    ok(&mut c, &["EXEC"]);
    ok(&mut c, &["EVAL", "redis.call('SET', KEYS[1], 'x')", "1", "alone"]);
    // An EXEC holding a script: one frame for all of it.
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "m1", "1"]);
    ok(&mut c, &["EVAL", "redis.call('SET', KEYS[1], '2') redis.call('SET', KEYS[2], '3')", "2", "m2", "m3"]);
    ok(&mut c, &["EXEC"]);
    // One command logged as two records (BF.ADD creating its filter) is framed too.
    ok(&mut c, &["BF.ADD", "bf2", "y"]);
    p.kill9();
    let recs = records(segments(&dir).last().unwrap());
    let names: Vec<String> = recs.iter().map(|r| r[0].to_ascii_uppercase()).collect();
    assert_eq!(
        names,
        [
            "SET",
            "MULTI",
            "SET",
            "PEXPIREAT",
            "BF.LOADCHUNK",
            "BF.ADD",
            "EXEC",
            "MULTI",
            "SET",
            "SETBIT",
            "EXEC",
            "SET",
            "SET",
            "MULTI",
            "SET",
            "SET",
            "SET",
            "EXEC",
            "MULTI",
            "BF.LOADCHUNK",
            "BF.ADD",
            "EXEC"
        ],
        "{recs:?}"
    );
    assert!(recs.iter().filter(|r| r.len() == 1).all(|r| r[0] == "MULTI" || r[0] == "EXEC"));
    let p = Proc::started(&dir);
    let mut c = connect(p.addr, false);
    for (k, v) in [
        ("before", "0"),
        ("a", "1"),
        ("b", "b"),
        ("one", "1"),
        ("alone", "x"),
        ("m1", "1"),
        ("m2", "2"),
        ("m3", "3"),
    ] {
        assert_eq!(get(&mut c, k), bulk(v), "{k}");
    }
    assert!(matches!(ok(&mut c, &["TTL", "a"]), Value::Int(t) if t > 900));
    assert_eq!(ok(&mut c, &["BF.EXISTS", "bf", "x"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["BF.EXISTS", "bf2", "y"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["GETBIT", "bits", "7"]), Value::Int(1));
    assert!(!p.log().contains("no EXEC record"), "{}", p.log());
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// Other clients write while transactions are logged: each frame holds exactly its EXEC's
/// records, never one of theirs (the frame is appended as one unit).
#[test]
fn frames_are_never_interleaved_with_other_clients_records() {
    let dir = temp_dir("txn-interleave");
    let p = Proc::started(&dir);
    let addr = p.addr;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut c = connect(addr, false);
            for i in 0..300 {
                ok(&mut c, &["MULTI"]);
                ok(&mut c, &["SET", &format!("a{i}"), "1"]);
                ok(&mut c, &["SET", &format!("b{i}"), "1"]);
                ok(&mut c, &["EXEC"]);
            }
        });
        for t in 0..2 {
            s.spawn(move || {
                let mut c = connect(addr, false);
                for i in 0..600 {
                    ok(&mut c, &["SET", &format!("c{t}-{i}"), "1"]);
                }
            });
        }
    });
    p.kill9();
    let recs = records(segments(&dir).last().unwrap());
    let mut frames = 0;
    for (i, r) in recs.iter().enumerate() {
        if r[0] == "MULTI" {
            let n = &recs[i + 1][1][1..];
            assert_eq!(recs[i + 1][..2], ["SET".to_string(), format!("a{n}")]);
            assert_eq!(recs[i + 2][..2], ["SET".to_string(), format!("b{n}")]);
            assert_eq!(recs[i + 3], ["EXEC"]);
            frames += 1;
        }
    }
    assert_eq!(frames, 300);
    assert_eq!(recs.len(), 300 * 4 + 1200);
    let _ = fs::remove_dir_all(&dir);
}

/// A log whose tail is a partial transaction (its bytes written up to some point, then a crash)
/// loads without any of the transaction, says so, and is cut back to where the transaction
/// starts; writes after the restart survive the next restart.
#[test]
fn a_partial_transaction_at_the_tail_is_dropped_and_cut() {
    let tx = [argv(&["SET", "x", "1"]), argv(&["SET", "y", "2"]), argv(&["BF.ADD", "z", "item"])];
    let mut full = Vec::new();
    aof::encode_transaction(&tx, &mut full);
    let mut exec_record = Vec::new();
    aof::encode_record(&argv(&["EXEC"]), &mut exec_record);
    let mut multi_record = Vec::new();
    aof::encode_record(&argv(&["MULTI"]), &mut multi_record);
    let without_exec = full.len() - exec_record.len();
    // (case, how many bytes of the framed transaction reached the file)
    let cases = [
        ("only its MULTI record", multi_record.len()),
        ("every record but EXEC", without_exec),
        ("cut inside its second record", multi_record.len() + 30),
        ("cut inside the EXEC record", full.len() - 3),
    ];
    for (case, written) in cases {
        let dir = temp_dir("txn-tail");
        let p = Proc::started(&dir);
        let mut c = connect(p.addr, false);
        ok(&mut c, &["SET", "base", "1"]);
        ok(&mut c, &["MULTI"]);
        ok(&mut c, &["SET", "whole1", "1"]);
        ok(&mut c, &["SET", "whole2", "2"]);
        ok(&mut c, &["EXEC"]);
        p.kill9();
        let seg = segments(&dir).pop().unwrap();
        let len = records_end(&seg);
        let f = fs::OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(&full[..written], len).unwrap();
        drop(f);
        let p = Proc::started(&dir);
        let mut c = connect(p.addr, false);
        for k in ["x", "y", "z"] {
            assert_eq!(ok(&mut c, &["EXISTS", k]), Value::Int(0), "{case}: {k} from the partial transaction");
        }
        assert_eq!(get(&mut c, "base"), bulk("1"), "{case}");
        assert_eq!(get(&mut c, "whole2"), bulk("2"), "{case}");
        let data = fs::read(&seg).unwrap();
        assert!(data[len as usize..].iter().all(|&b| b == 0), "{case}: cut back to the transaction's start");
        let log = p.log();
        assert!(log.contains(&format!("offset {len}")), "{case}: {log}");
        // Writes after the repair: a plain one and a new framed transaction.
        ok(&mut c, &["SET", "after", "1"]);
        ok(&mut c, &["MULTI"]);
        ok(&mut c, &["SET", "x", "new"]);
        ok(&mut c, &["SET", "after2", "2"]);
        ok(&mut c, &["EXEC"]);
        p.kill9();
        let p = Proc::started(&dir);
        let mut c = connect(p.addr, false);
        assert_eq!(get(&mut c, "after"), bulk("1"), "{case}");
        assert_eq!(get(&mut c, "x"), bulk("new"), "{case}");
        assert_eq!(get(&mut c, "after2"), bulk("2"), "{case}");
        assert_eq!(ok(&mut c, &["EXISTS", "y", "z"]), Value::Int(0), "{case}");
        assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(6), "{case}");
        let log = p.log();
        assert!(!log.contains("no EXEC record") && !log.contains("torn last record"), "{case}: {log}");
        drop(p);
        let _ = fs::remove_dir_all(&dir);
    }
}

/// A frame that is not the last thing in the log (an EXEC record without its MULTI, or a
/// MULTI inside an open frame) is corruption: the start is refused.
#[test]
fn a_broken_frame_inside_the_log_refuses_the_start() {
    for (case, records) in [
        ("EXEC without MULTI", vec![argv(&["SET", "a", "1"]), argv(&["EXEC"]), argv(&["SET", "b", "1"])]),
        ("nested MULTI", vec![argv(&["MULTI"]), argv(&["SET", "a", "1"]), argv(&["MULTI"]), argv(&["EXEC"])]),
    ] {
        let dir = temp_dir("txn-broken");
        let p = Proc::started(&dir);
        ok(&mut connect(p.addr, false), &["SET", "base", "1"]);
        p.kill9();
        let seg = segments(&dir).pop().unwrap();
        let mut bytes = Vec::new();
        records.iter().for_each(|r| aof::encode_record(r, &mut bytes));
        let f = fs::OpenOptions::new().write(true).open(&seg).unwrap();
        f.write_all_at(&bytes, records_end(&seg)).unwrap();
        drop(f);
        let mut child = Command::new(env!("CARGO_BIN_EXE_sift-server"))
            .args(["--port", "0", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(!status.success(), "{case}: started");
        assert!(err.contains("transaction"), "{case}: {err}");
        let _ = fs::remove_dir_all(&dir);
    }
}

/// A data directory written by the version before frames (commit 97ee2a3: an EXEC's and a
/// script's records unframed, back to back) loads unchanged.
#[test]
fn a_log_without_frames_still_loads() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/log_unframed");
    let dir = temp_dir("txn-old");
    for e in fs::read_dir(&fixture).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    let recs = records(segments(&dir).last().unwrap());
    assert!(recs.iter().all(|r| r[0] != "MULTI" && r[0] != "EXEC"), "{recs:?}");
    let p = Proc::started(&dir);
    let mut c = connect(p.addr, false);
    for (k, v) in [("plain", "1"), ("tx1", "a"), ("tx2", "b"), ("lua1", "c"), ("lua2", "d")] {
        assert_eq!(get(&mut c, k), bulk(v), "{k}");
    }
    assert_eq!(ok(&mut c, &["BF.EXISTS", "bf", "x"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(6));
    // And it goes on: a framed transaction appended to the old log replays with it.
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["SET", "new1", "1"]);
    ok(&mut c, &["SET", "new2", "2"]);
    ok(&mut c, &["EXEC"]);
    p.kill9();
    let p = Proc::started(&dir);
    let mut c = connect(p.addr, false);
    assert_eq!(ok(&mut c, &["DBSIZE"]), Value::Int(8));
    assert_eq!(get(&mut c, "new2"), bulk("2"));
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}

/// DEBUG RELOAD inside an EXEC (allowed there, as in Redis) writes a snapshot holding the
/// transaction's writes so far and starts a new log segment: those writes must not be logged
/// again after it, or a restart applies them twice (a cuckoo filter then counts an item twice).
#[test]
fn a_reload_inside_exec_does_not_replay_the_writes_before_it() {
    let dir = temp_dir("txn-reload");
    let p = Proc::started(&dir);
    let mut c = connect(p.addr, false);
    ok(&mut c, &["CF.RESERVE", "cf", "1000"]);
    ok(&mut c, &["MULTI"]);
    ok(&mut c, &["CF.ADD", "cf", "x"]);
    ok(&mut c, &["SET", "before", "1"]);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    ok(&mut c, &["CF.ADD", "cf", "y"]);
    ok(&mut c, &["SET", "after", "1"]);
    assert_eq!(ok(&mut c, &["EXEC"]).as_sequence().map(|s| s.len()), Some(5));
    assert_eq!(ok(&mut c, &["CF.COUNT", "cf", "x"]), Value::Int(1));
    p.kill9();
    let p = Proc::started(&dir);
    let mut c = connect(p.addr, false);
    assert_eq!(
        ok(&mut c, &["CF.COUNT", "cf", "x"]),
        Value::Int(1),
        "the write before DEBUG RELOAD replayed twice"
    );
    assert_eq!(ok(&mut c, &["CF.COUNT", "cf", "y"]), Value::Int(1));
    assert_eq!((get(&mut c, "before"), get(&mut c, "after")), (bulk("1"), bulk("1")));
    drop(p);
    let _ = fs::remove_dir_all(&dir);
}
