//! The server built without the `lua` feature (`cargo test -p sift-server --no-default-features`),
//! driven as a client would: every scripting command answers the "not compiled in" error, arity
//! is still checked first, `COMMAND` still lists the rows, and everything around them (MULTI,
//! INFO, the BF commands, the log) works as in the default build.

#![cfg(not(feature = "lua"))]

mod common;

use common::{info_number, Proc, Raw, TestServer};
use redis::Value;
use sift_server::cmd::script::NOT_COMPILED_IN;

fn connect(srv: &TestServer, resp3: bool) -> redis::Connection {
    redis::Client::open(srv.url(resp3)).unwrap().get_connection().unwrap()
}

fn q(c: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c)
}

/// The error text as the server sent it (code and detail joined again).
fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

#[test]
fn every_scripting_command_answers_not_compiled_in() {
    let srv = TestServer::start(&[]);
    let sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";
    for resp3 in [false, true] {
        let mut c = connect(&srv, resp3);
        for argv in [
            &["EVAL", "return 1", "0"][..],
            &["EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k"],
            &["EVALSHA", sha, "0"],
            &["EVAL_RO", "return 1", "0"],
            &["EVALSHA_RO", sha, "0"],
            &["SCRIPT", "LOAD", "return 1"],
            &["SCRIPT", "EXISTS", sha],
            &["SCRIPT", "FLUSH"],
            &["SCRIPT", "KILL"],
        ] {
            let e = q(&mut c, argv).unwrap_err();
            assert_eq!(error_text(&e), NOT_COMPILED_IN, "{argv:?}");
        }
        // Arity comes first, as for any command.
        let e = q(&mut c, &["EVAL", "return 1"]).unwrap_err();
        assert_eq!(error_text(&e), "ERR wrong number of arguments for 'eval' command");
        let e = q(&mut c, &["SCRIPT", "KILL", "now"]).unwrap_err();
        assert_eq!(error_text(&e), "ERR wrong number of arguments for 'script|kill' command");
        // The rows are still in the table: a client's COMMAND lookups see them.
        let Value::Array(rows) = q(&mut c, &["COMMAND", "INFO", "eval", "evalsha"]).unwrap() else {
            panic!("COMMAND INFO is an array")
        };
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| matches!(r, Value::Array(_))), "{rows:?}");
        // The script wrote nothing.
        assert_eq!(q(&mut c, &["EXISTS", "k"]).unwrap(), Value::Int(0));
    }
    let mut raw = Raw::connect(srv.addr);
    assert_eq!(info_number(&mut raw, "memory", "used_memory_lua"), 0);
    assert_eq!(info_number(&mut raw, "memory", "number_of_cached_scripts"), 0);
}

/// Queued in a MULTI, EVAL fails alone: the other commands of the EXEC run, and the server
/// goes on serving (the EVAL rows lock every shard, and release them).
#[test]
fn an_eval_in_a_transaction_fails_alone() {
    let srv = TestServer::start(&[]);
    // Raw bytes: the redis crate turns an EXEC holding an error reply into an Err.
    let mut c = Raw::connect(srv.addr);
    assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
    for argv in [&["SET", "a", "1"][..], &["EVAL", "return 1", "0"], &["BF.ADD", "bf", "x"]] {
        assert_eq!(c.cmd(argv), b"+QUEUED\r\n", "{argv:?}");
    }
    let exec = String::from_utf8(c.cmd(&["EXEC"])).unwrap();
    assert_eq!(exec, format!("*3\r\n+OK\r\n-{NOT_COMPILED_IN}\r\n:1\r\n"));
    let mut other = connect(&srv, false);
    assert_eq!(q(&mut other, &["GET", "a"]).unwrap(), Value::BulkString(b"1".to_vec()));
    assert_eq!(q(&mut other, &["BF.EXISTS", "bf", "x"]).unwrap(), Value::Int(1));
}

/// A refused EVAL leaves nothing in the log: after a kill -9 the keyspace is what the other
/// commands wrote.
#[test]
fn a_refused_eval_is_not_logged() {
    let dir = common::temp_dir("nolua-log");
    let p = Proc::started(&dir);
    let mut c = redis::Client::open(format!("redis://{}/", p.addr)).unwrap().get_connection().unwrap();
    assert_eq!(q(&mut c, &["SET", "before", "1"]).unwrap(), Value::Okay);
    assert!(q(&mut c, &["EVAL", "redis.call('SET', KEYS[1], 'x')", "1", "k"]).is_err());
    assert_eq!(q(&mut c, &["SET", "after", "1"]).unwrap(), Value::Okay);
    p.kill9();
    let p = Proc::started(&dir);
    let mut c = redis::Client::open(format!("redis://{}/", p.addr)).unwrap().get_connection().unwrap();
    assert_eq!(q(&mut c, &["DBSIZE"]).unwrap(), Value::Int(2));
    assert_eq!(q(&mut c, &["EXISTS", "k"]).unwrap(), Value::Int(0));
}
