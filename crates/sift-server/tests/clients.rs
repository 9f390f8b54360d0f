//! Real clients against the real binary: the `redis` crate in RESP2 and RESP3, and `redis-cli`
//! (required under CI; skipped with a message elsewhere when it is not installed).

mod common;

use std::collections::HashMap;

use common::TestServer;
use redis::Value;

fn connect(srv: &TestServer, resp3: bool) -> redis::Connection {
    redis::Client::open(srv.url(resp3)).unwrap().get_connection().unwrap()
}

#[test]
fn redis_crate_resp2() {
    let srv = TestServer::start(&[]);
    let mut con = connect(&srv, false);
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut con).unwrap();
    let v: String = redis::cmd("GET").arg("k").query(&mut con).unwrap();
    assert_eq!(v, "v");
    let missing: Option<String> = redis::cmd("GET").arg("nope").query(&mut con).unwrap();
    assert_eq!(missing, None);
    let set: bool = redis::cmd("EXPIRE").arg("k").arg(60).query(&mut con).unwrap();
    assert!(set);
    let ttl: i64 = redis::cmd("TTL").arg("k").query(&mut con).unwrap();
    assert_eq!(ttl, 60);
    let cfg: HashMap<String, String> = redis::cmd("CONFIG").arg("GET").arg("cf-*").query(&mut con).unwrap();
    assert_eq!(cfg.len(), 5);
    assert_eq!(cfg["cf-initial-size"], "1024");
    // redis-rs pipelines are MULTI/EXEC when atomic, as redis-py's default pipeline.
    let (a, b): (String, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("p")
        .arg("1")
        .ignore()
        .cmd("GET")
        .arg("p")
        .cmd("DBSIZE")
        .query(&mut con)
        .unwrap();
    assert_eq!((a.as_str(), b), ("1", 2));
    // "k" holds a string: the BF commands refuse it with WRONGTYPE.
    let err = redis::cmd("BF.ADD").arg("k").arg("x").query::<Value>(&mut con).unwrap_err();
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
    // The redis crate announced itself with CLIENT SETINFO.
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    assert!(list.contains("lib-name=redis-rs"), "{list}");
}

#[test]
fn redis_crate_resp3() {
    let srv = TestServer::start(&[]);
    let mut con = connect(&srv, true);
    let hello: Value = redis::cmd("HELLO").arg(3).query(&mut con).unwrap();
    let Value::Map(fields) = hello else { panic!("HELLO 3 is a map: {hello:?}") };
    assert!(fields.contains(&(Value::BulkString(b"proto".to_vec()), Value::Int(3))));
    let cfg: Value = redis::cmd("CONFIG").arg("GET").arg("bf-error-rate").query(&mut con).unwrap();
    assert_eq!(
        cfg,
        Value::Map(vec![(Value::BulkString(b"bf-error-rate".to_vec()), Value::BulkString(b"0.01".to_vec()))])
    );
    let info: Value = redis::cmd("INFO").arg("server").query(&mut con).unwrap();
    match info {
        Value::VerbatimString { text, .. } => assert!(text.contains("redis_version:8.0.0"), "{text}"),
        other => panic!("INFO is a verbatim string in RESP3: {other:?}"),
    }
    let nil: Value = redis::cmd("GET").arg("none").query(&mut con).unwrap();
    assert_eq!(nil, Value::Nil);
    let _: () = redis::cmd("SET").arg("a").arg("b").query(&mut con).unwrap();
    let t: String = redis::cmd("TYPE").arg("a").query(&mut con).unwrap();
    assert_eq!(t, "string");
}

#[test]
fn redis_cli() {
    let Ok(out) = std::process::Command::new("redis-cli").arg("--version").output() else {
        common::external::missing("redis-cli", "apt-get install redis-tools; scripts/test.sh does it");
        return;
    };
    assert!(out.status.success());
    let srv = TestServer::start(&[]);
    let port = srv.port().to_string();
    let cli = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port])
            .args(args)
            .output()
            .expect("run redis-cli");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(cli(&["PING"]), "PONG\n");
    assert_eq!(cli(&["SET", "a", "b"]), "OK\n");
    assert_eq!(cli(&["GET", "a"]), "b\n");
    assert!(cli(&["INFO", "server"]).contains("redis_version:8.0.0"));
    assert_eq!(cli(&["CONFIG", "GET", "bf-initial-size"]), "bf-initial-size\n100\n");
    assert!(cli(&["nosuch", "x"]).starts_with("ERR unknown command 'nosuch'"));
    assert!(cli(&["-3", "HELLO", "3"]).starts_with("server"));
    // Several commands through one redis-cli session on stdin (pipe mode is not used: that
    // is redis-cli --pipe, a different protocol exchange).
    let mut child = std::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"SET x 1\nEXISTS x a nope\nDBSIZE\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "OK\n2\n2\n");
}
