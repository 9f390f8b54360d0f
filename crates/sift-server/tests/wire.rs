//! Byte-exact checks over raw TCP against the real binary.

mod common;

use common::{encode, info_number, wait_until, TestServer};

fn s(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn error_texts_are_exact() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    assert_eq!(
        c.cmd_text(&["nosuch", "a", "b"]),
        "-ERR unknown command 'nosuch', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(c.cmd_text(&["NoSuch"]), "-ERR unknown command 'NoSuch', with args beginning with: \r\n");
    // The BF/CF commands are registered; arity errors use the lower-case registered name.
    assert_eq!(c.cmd_text(&["Bf.Add", "k"]), "-ERR wrong number of arguments for 'bf.add' command\r\n");
    assert_eq!(c.cmd_text(&["GET"]), "-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(
        c.cmd_text(&["Client", "SetName"]),
        "-ERR wrong number of arguments for 'client|setname' command\r\n"
    );
    assert_eq!(c.cmd_text(&["CLIENT", "nope"]), "-ERR unknown subcommand 'nope'. Try CLIENT HELP.\r\n");
    assert_eq!(
        c.cmd_text(&["CLIENT", "SETNAME", "a b"]),
        "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(c.cmd_text(&["SELECT", "0"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["SELECT", "1"]), "-ERR DB index is out of range\r\n");
    assert_eq!(c.cmd_text(&["SELECT", "x"]), "-ERR value is not an integer or out of range\r\n");
    assert_eq!(
        c.cmd_text(&["AUTH", "pw"]),
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
    );
    assert_eq!(c.cmd_text(&["HELLO", "4"]), "-NOPROTO unsupported protocol version\r\n");
    assert_eq!(c.cmd_text(&["RENAME", "missing", "x"]), "-ERR no such key\r\n");
    assert_eq!(
        c.cmd_text(&["CONFIG", "SET", "bf-error-rate", "2"]),
        "-ERR CONFIG SET failed (possibly related to argument 'bf-error-rate') - Value for `bf-error-rate` must be in the range (0.000000, 1.000000)\r\n"
    );
    assert_eq!(
        c.cmd_text(&["CONFIG", "SET", "nosuch", "1"]),
        "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n"
    );
    // An error echoing a client's bytes never breaks the framing.
    assert_eq!(c.cmd_text(&["x\r\ny"]), "-ERR unknown command 'x  y', with args beginning with: \r\n");
    // The connection survived all of that.
    assert_eq!(c.cmd_text(&["PING"]), "+PONG\r\n");
}

#[test]
fn resp2_and_resp3_shapes() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    assert_eq!(
        c.cmd_text(&["CONFIG", "GET", "bf-error-rate"]),
        "*2\r\n$13\r\nbf-error-rate\r\n$4\r\n0.01\r\n"
    );
    let info2 = c.cmd(&["INFO", "server"]);
    assert!(s(&info2).starts_with("$"), "{}", s(&info2));
    assert!(s(&info2).contains("# Server\r\nredis_version:8.0.0\r\n"));
    let hello = c.cmd_text(&["HELLO", "3"]);
    assert!(hello.starts_with("%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n8.0.0\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:"), "{hello}");
    assert!(
        hello.ends_with(
            "$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*1\r\n%4\r\n$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20628\r\n$4\r\npath\r\n$0\r\n\r\n$4\r\nargs\r\n*0\r\n"
        ),
        "{hello}"
    );
    assert_eq!(
        c.cmd_text(&["CONFIG", "GET", "bf-error-rate"]),
        "%1\r\n$13\r\nbf-error-rate\r\n$4\r\n0.01\r\n"
    );
    let info3 = s(&c.cmd(&["INFO", "persistence"]));
    assert!(info3.starts_with("="), "{info3}");
    assert!(info3.contains("\r\ntxt:# Persistence\r\nloading:0\r\n"), "{info3}");
    assert!(info3.contains("rdb_bgsave_in_progress:0\r\n"));
    assert_eq!(c.cmd_text(&["GET", "missing"]), "_\r\n");
    assert_eq!(c.cmd_text(&["SET", "a", "1"]), "+OK\r\n");
    let ks = s(&c.cmd(&["INFO", "keyspace"]));
    assert!(ks.ends_with("# Keyspace\r\ndb0:keys=1,expires=0,avg_ttl=0\r\n\r\n"), "{ks:?}");
    assert_eq!(c.cmd_text(&["SCAN", "0", "MATCH", "a"]), "*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n");
    assert_eq!(c.cmd_text(&["HELLO", "2"]).chars().next(), Some('*'));
    assert_eq!(c.cmd_text(&["GET", "missing"]), "$-1\r\n");
    assert_eq!(c.cmd_text(&["MEMORY", "USAGE", "missing"]), "$-1\r\n");
    assert_eq!(c.cmd_text(&["TYPE", "a"]), "+string\r\n");
    assert_eq!(c.cmd_text(&["TYPE", "missing"]), "+none\r\n");
}

#[test]
fn inline_commands() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.send(b"PING\r\n");
    assert_eq!(s(&c.reply()), "+PONG\r\n");
    c.send(b"SET \"a b\" 'c d'\r\nGET \"a b\"\n\r\n   \r\nECHO \"\\x41\"\r\n");
    assert_eq!(s(&c.reply()), "+OK\r\n");
    assert_eq!(s(&c.reply()), "$3\r\nc d\r\n");
    // Blank lines are skipped without a reply.
    assert_eq!(s(&c.reply()), "$1\r\nA\r\n");
}

#[test]
fn pipelining_1000_commands_in_one_write() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    let mut batch = Vec::new();
    for i in 0..1000 {
        batch.extend(encode(&["SET", &format!("k{i}"), &format!("v{i}")]));
    }
    for i in 0..1000 {
        batch.extend(encode(&["GET", &format!("k{i}")]));
    }
    c.send(&batch);
    for _ in 0..1000 {
        assert_eq!(s(&c.reply()), "+OK\r\n");
    }
    for i in 0..1000 {
        let v = format!("v{i}");
        assert_eq!(s(&c.reply()), format!("${}\r\n{v}\r\n", v.len()));
    }
    assert_eq!(c.cmd_text(&["DBSIZE"]), ":1000\r\n");
}

#[test]
fn protocol_violation_closes_only_that_connection() {
    let srv = TestServer::start(&[]);
    let mut good = srv.raw();
    assert_eq!(good.cmd_text(&["SET", "x", "1"]), "+OK\r\n");
    let mut bad = srv.raw();
    bad.send(b"*1\r\n:1\r\n");
    assert_eq!(s(&bad.reply()), "-ERR Protocol error: expected '$', got ':'\r\n");
    assert!(bad.is_closed());
    let mut bad2 = srv.raw();
    bad2.send(b"*x\r\n");
    assert_eq!(s(&bad2.reply()), "-ERR Protocol error: invalid multibulk length\r\n");
    assert!(bad2.is_closed());
    assert_eq!(good.cmd_text(&["GET", "x"]), "$1\r\n1\r\n");
}

#[test]
fn one_gigabyte_bulk_header_is_refused_without_allocating() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.send(b"*2\r\n$3\r\nSET\r\n$1073741824\r\n");
    assert_eq!(s(&c.reply()), "-ERR Protocol error: invalid bulk length\r\n");
    assert!(c.is_closed());
    let mut c = srv.raw();
    c.send(b"*2000000\r\n");
    assert_eq!(s(&c.reply()), "-ERR Protocol error: invalid multibulk length\r\n");
    assert!(c.is_closed());
    // A header just under the limit is accepted (waits for the data) but nothing is reserved
    // for it up front: the server's peak memory stays small. The server reads the header and
    // the first bytes, then the end of the stream, and only then closes the connection: once
    // it is gone from the client count, the header has been handled.
    let mut c = srv.raw();
    c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$536870912\r\nabc");
    drop(c);
    let mut c = srv.raw();
    wait_until("the half-sent request's connection to close", || {
        info_number(&mut c, "clients", "connected_clients") == 1
    });
    assert_eq!(c.cmd_text(&["EXISTS", "k"]), ":0\r\n");
    if let Some(kb) = srv.peak_rss_kb() {
        assert!(kb < 100 * 1024, "peak RSS {kb} kB");
    }
}

#[test]
fn client_disconnecting_mid_command_loses_only_that_command() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    c.send(&encode(&["SET", "done", "1"]));
    c.send(b"*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$5\r\nhel");
    assert_eq!(s(&c.reply()), "+OK\r\n");
    drop(c);
    let mut c = srv.raw();
    wait_until("the server to see the first connection close", || {
        info_number(&mut c, "clients", "connected_clients") == 1
    });
    assert_eq!(c.cmd_text(&["EXISTS", "done", "half"]), ":1\r\n");
    assert_eq!(c.cmd_text(&["PING"]), "+PONG\r\n");
}

#[test]
fn multi_exec_discard_and_execabort() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd_text(&["MULTI"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["SET", "a", "1"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_text(&["RENAME", "a", "b"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_text(&["KEYS", "*"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_text(&["INFO", "keyspace"]), "+QUEUED\r\n");
    let r = c.cmd_text(&["EXEC"]);
    assert!(r.starts_with("*4\r\n+OK\r\n+OK\r\n*1\r\n$1\r\nb\r\n$"), "{r}");
    assert_eq!(c.cmd_text(&["MULTI"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["MULTI"]), "-ERR MULTI calls can not be nested\r\n");
    assert_eq!(c.cmd_text(&["GET"]), "-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(c.cmd_text(&["SET", "c", "1"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_text(&["EXEC"]), "-EXECABORT Transaction discarded because of previous errors.\r\n");
    assert_eq!(c.cmd_text(&["EXISTS", "c"]), ":0\r\n");
    assert_eq!(c.cmd_text(&["MULTI"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["SET", "c", "1"]), "+QUEUED\r\n");
    assert_eq!(c.cmd_text(&["DISCARD"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["EXISTS", "c"]), ":0\r\n");
    assert_eq!(c.cmd_text(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
    assert_eq!(c.cmd_text(&["DISCARD"]), "-ERR DISCARD without MULTI\r\n");
}

#[test]
fn keys_expiry_rename_copy_scan() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd_text(&["SET", "t", "v"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["TTL", "t"]), ":-1\r\n");
    assert_eq!(c.cmd_text(&["TTL", "nope"]), ":-2\r\n");
    assert_eq!(c.cmd_text(&["EXPIRE", "t", "100"]), ":1\r\n");
    assert_eq!(c.cmd_text(&["TTL", "t"]), ":100\r\n");
    assert_eq!(c.cmd_text(&["EXPIRE", "t", "50", "GT"]), ":0\r\n");
    assert_eq!(c.cmd_text(&["PERSIST", "t"]), ":1\r\n");
    assert_eq!(c.cmd_text(&["PERSIST", "t"]), ":0\r\n");
    assert_eq!(c.cmd_text(&["PEXPIRE", "t", "100"]), ":1\r\n");
    assert_eq!(c.cmd_text(&["COPY", "t", "t2"]), ":1\r\n");
    assert_eq!(c.cmd_text(&["COPY", "t", "t"]), "-ERR source and destination objects are the same\r\n");
    // Actively swept: DBSIZE counts keys not swept yet (as Redis does) and expires none itself,
    // so it reaches 0 only through the sweeper; then they are gone for EXISTS too.
    wait_until("the expired keys to be swept", || c.cmd_text(&["DBSIZE"]) == ":0\r\n");
    assert_eq!(c.cmd_text(&["EXISTS", "t", "t2"]), ":0\r\n");
    assert_eq!(
        c.cmd_text(&["EXPIRE", "x", "notanumber"]),
        "-ERR value is not an integer or out of range\r\n"
    );

    for i in 0..300 {
        c.send_cmd(&["SET", &format!("key:{i}"), "v"]);
    }
    for _ in 0..300 {
        c.reply();
    }
    assert_eq!(c.cmd_text(&["RENAME", "key:0", "moved"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["EXISTS", "key:0", "moved", "moved"]), ":2\r\n");
    // SCAN returns every key exactly once, with a bulk-string cursor.
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut steps = 0;
    loop {
        let r = c.cmd(&["SCAN", &cursor, "MATCH", "key:*", "COUNT", "20"]);
        let text = s(&r);
        assert!(text.starts_with("*2\r\n$"), "{text}");
        let parts: Vec<&str> = text.split("\r\n").collect();
        cursor = parts[2].to_string();
        for w in parts[4..].chunks(2) {
            if w.len() == 2 && !w[1].is_empty() {
                assert!(seen.insert(w[1].to_string()), "duplicate {}", w[1]);
            }
        }
        steps += 1;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 299);
    assert!(steps > 1);
    assert_eq!(c.cmd_text(&["SCAN", "0", "COUNT", "1000", "TYPE", "MBbloom--"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(c.cmd_text(&["SCAN", "abc"]), "-ERR invalid cursor\r\n");
    let keys = s(&c.cmd(&["KEYS", "key:1?"]));
    assert!(keys.starts_with("*10\r\n"), "{keys}");
    assert!(c.cmd_text(&["RANDOMKEY"]).starts_with("$"));
    assert_eq!(c.cmd_text(&["DEL", "moved", "moved", "none"]), ":1\r\n");
    assert_eq!(c.cmd_text(&["FLUSHALL"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["DBSIZE"]), ":0\r\n");
    assert_eq!(c.cmd_text(&["RANDOMKEY"]), "$-1\r\n");
}

#[test]
fn requirepass_and_auth() {
    let srv = TestServer::start(&["--requirepass", "secret"]);
    let mut c = srv.raw();
    assert_eq!(c.cmd_text(&["PING"]), "-NOAUTH Authentication required.\r\n");
    assert_eq!(
        c.cmd_text(&["AUTH", "wrong"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert!(c
        .cmd_text(&["HELLO", "3"])
        .starts_with("-NOAUTH HELLO must be called with the client already authenticated"));
    assert_eq!(c.cmd_text(&["AUTH", "secret"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["PING"]), "+PONG\r\n");
    let mut c = srv.raw();
    assert!(c.cmd_text(&["HELLO", "3", "AUTH", "default", "secret", "SETNAME", "me"]).starts_with("%7\r\n"));
    assert_eq!(c.cmd_text(&["CLIENT", "GETNAME"]), "$2\r\nme\r\n");
}

#[test]
fn maxclients_refuses_extra_connections() {
    let srv = TestServer::start(&["--maxclients", "2"]);
    let mut a = srv.raw();
    let mut b = srv.raw();
    assert_eq!(a.cmd_text(&["PING"]), "+PONG\r\n");
    assert_eq!(b.cmd_text(&["PING"]), "+PONG\r\n");
    let mut c = srv.raw();
    assert_eq!(s(&c.reply()), "-ERR max number of clients reached\r\n");
    assert!(c.is_closed());
    drop(a);
    wait_until("the server to see a close", || info_number(&mut b, "clients", "connected_clients") == 1);
    let mut d = srv.raw();
    assert_eq!(d.cmd_text(&["PING"]), "+PONG\r\n");
}

#[test]
fn command_table_replies() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    let count = c.cmd_text(&["COMMAND", "COUNT"]);
    assert!(count.starts_with(':'), "{count}");
    let get = c.cmd_text(&["COMMAND", "INFO", "get", "nosuch"]);
    assert!(
        get.starts_with("*2\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n*1\r\n"),
        "{get}"
    );
    assert!(get.ends_with("*0\r\n$-1\r\n"), "{get}");
    // The BF/CF rows with the arity, flags and categories of spec §2.3 / §2.5.
    let bf_add = c.cmd_text(&["COMMAND", "INFO", "bf.add"]);
    assert!(
        bf_add.starts_with("*1\r\n*10\r\n$6\r\nbf.add\r\n:3\r\n*3\r\n+write\r\n+denyoom\r\n+module\r\n:1\r\n:1\r\n:1\r\n*2\r\n+@write\r\n+@bloom\r\n"),
        "{bf_add}"
    );
    let compact = c.cmd_text(&["COMMAND", "INFO", "cf.compact"]);
    assert!(
        compact
            .starts_with("*1\r\n*10\r\n$10\r\ncf.compact\r\n:-1\r\n*3\r\n+readonly\r\n+module\r\n+fast\r\n"),
        "{compact}"
    );
    let docs = c.cmd_text(&["COMMAND", "DOCS", "ping"]);
    assert!(docs.starts_with("*2\r\n$4\r\nping\r\n*6\r\n$7\r\nsummary\r\n"), "{docs}");
    let all = c.cmd(&["COMMAND"]);
    assert!(s(&all).contains("$14\r\nclient|setname\r\n"));
    c.cmd_text(&["HELLO", "3"]);
    let get3 = c.cmd_text(&["COMMAND", "INFO", "get"]);
    assert!(get3.starts_with("*1\r\n*10\r\n$3\r\nget\r\n:2\r\n~2\r\n"), "{get3}");
}

#[test]
fn client_commands_and_quit() {
    let srv = TestServer::start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd_text(&["CLIENT", "SETINFO", "LIB-NAME", "mylib"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["CLIENT", "SETNAME", "conn1"]), "+OK\r\n");
    let id = c.cmd_text(&["CLIENT", "ID"]);
    let list = c.cmd_text(&["CLIENT", "LIST"]);
    assert!(list.contains(&format!("id={} ", &id[1..id.len() - 2])), "{list}");
    assert!(list.contains("name=conn1 ") && list.contains("lib-name=mylib"), "{list}");
    assert_eq!(c.cmd_text(&["CLIENT", "GETNAME"]), "$5\r\nconn1\r\n");
    assert_eq!(c.cmd_text(&["ECHO", "hi"]), "$2\r\nhi\r\n");
    assert_eq!(c.cmd_text(&["PING", "hi"]), "$2\r\nhi\r\n");
    assert_eq!(c.cmd_text(&["QUIT"]), "+OK\r\n");
    assert!(c.is_closed());
}

#[test]
fn persistence_commands_and_shutdown() {
    let mut srv = TestServer::start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd_text(&["SET", "a", "1"]), "+OK\r\n");
    assert!(c.cmd_text(&["INFO", "persistence"]).contains("rdb_changes_since_last_save:1\r\n"));
    assert_eq!(c.cmd_text(&["SAVE"]), "+OK\r\n");
    assert!(c.cmd_text(&["INFO", "persistence"]).contains("rdb_changes_since_last_save:0\r\n"));
    assert_eq!(c.cmd_text(&["BGSAVE"]), "+Background saving started\r\n");
    assert!(c.cmd_text(&["LASTSAVE"]).starts_with(':'));
    assert_eq!(c.cmd_text(&["DEBUG", "RELOAD"]), "+OK\r\n");
    assert_eq!(c.cmd_text(&["GET", "a"]), "$1\r\n1\r\n");
    let mut other = srv.raw();
    c.send_cmd(&["SHUTDOWN"]);
    assert!(c.is_closed(), "SHUTDOWN closes without a reply");
    assert!(other.is_closed(), "other clients are disconnected");
    let status = srv.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn sigterm_stops_gracefully() {
    let mut srv = TestServer::start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd_text(&["PING"]), "+PONG\r\n");
    let pid = srv.child.id().to_string();
    let ok = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(ok.success());
    assert!(c.is_closed());
    assert!(srv.child.wait().unwrap().success());
}

/// Clients hammering overlapping keys with multi-key commands and transactions: shard locks
/// are taken in one global order, so this must finish (no deadlock) with consistent counts.
#[test]
fn concurrent_multi_key_commands_do_not_deadlock() {
    let srv = TestServer::start(&[]);
    let addr = srv.addr;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = common::Raw::connect(addr);
                for i in 0..300 {
                    let a = format!("k{}", (i + t) % 7);
                    let b = format!("k{}", (i * 3 + t) % 7);
                    c.cmd(&["SET", &a, "v"]);
                    c.cmd(&["RENAME", &a, &b]);
                    c.cmd(&["COPY", &b, &a, "REPLACE"]);
                    c.send_cmd(&["MULTI"]);
                    c.send_cmd(&["DEL", &a, &b]);
                    c.send_cmd(&["SET", &b, "w"]);
                    c.send_cmd(&["DBSIZE"]);
                    c.send_cmd(&["EXEC"]);
                    for _ in 0..4 {
                        c.reply();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = srv.raw();
    let n = c.cmd_text(&["DBSIZE"]);
    let n: i64 = n[1..n.len() - 2].parse().unwrap();
    assert!((1..=7).contains(&n), "{n}");
}
