//! The `SF.*` family (sift's own filters), the same checks against sift-server and against
//! redis-server with the module: the `redis` crate in RESP2 and RESP3, redis-py's
//! `execute_command`, exact replies on the wire, bad input that changes nothing, `EXPIRE`, and
//! `COMMAND` metadata.

use std::collections::HashMap;
use std::path::Path;

use redis::Value;
use sift::prelude::*;

use super::{Raw, Target};

fn q(con: &mut redis::Connection, args: &[&[u8]]) -> redis::RedisResult<Value> {
    let mut cmd = redis::cmd(std::str::from_utf8(args[0]).unwrap());
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(con)
}

fn s(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

fn qs(con: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<Value> {
    let v = s(args);
    let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
    q(con, &refs)
}

/// A static xor filter of `n` items `item-i`, as `sift build` writes it.
pub fn xor_file(n: u32) -> Vec<u8> {
    let items: Vec<String> = (0..n).map(|i| format!("item-{i}")).collect();
    sift::Xor8::build_with(&items, sift::Hasher::default()).unwrap().to_bytes()
}

/// SF.INFO as a name → value map, from either protocol's shape.
fn info_map(v: Value) -> HashMap<String, Value> {
    let pairs: Vec<(Value, Value)> = match v {
        Value::Map(p) => p,
        Value::Array(flat) => {
            let mut it = flat.into_iter();
            std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect()
        }
        other => panic!("SF.INFO is not a map: {other:?}"),
    };
    pairs
        .into_iter()
        .map(|(k, v)| {
            let k = match k {
                Value::SimpleString(s) => s,
                Value::BulkString(b) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            };
            (k, v)
        })
        .collect()
}

fn float(v: &Value) -> f64 {
    match v {
        Value::Double(d) => *d,
        Value::BulkString(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("not a double: {other:?}"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

/// Every command of the family through the `redis` crate, in `resp3` or RESP2.
pub fn sf_redis_crate(t: &dyn Target, resp3: bool) {
    let srv = t.start();
    let mut con = redis::Client::open(srv.url(resp3)).unwrap().get_connection().unwrap();
    let con = &mut con;
    // A window by time: the SF.INFO fields of the aging kinds.
    let ok: String = redis::cmd("SF.RESERVE")
        .arg("w")
        .arg(0.01)
        .arg(1000)
        .arg("KIND")
        .arg("aging")
        .arg("TTL")
        .arg(86400)
        .query(con)
        .unwrap();
    assert_eq!(ok, "OK");
    let added: Vec<bool> = redis::cmd("SF.MADD").arg("w").arg(&["a", "b"]).query(con).unwrap();
    assert_eq!(added, [true, true]);
    let ex: Vec<bool> = redis::cmd("SF.MEXISTS").arg("w").arg(&["a", "zz"]).query(con).unwrap();
    assert_eq!(ex, [true, false]);
    let info = info_map(qs(con, &["SF.INFO", "w"]).unwrap());
    assert_eq!(text(&info["Kind"]), "time-limited-bloom");
    assert_eq!(info["TTL"], Value::Int(86400));
    assert_eq!(info["Items"], Value::Int(2));
    assert!(matches!(info["Oldest slice age"], Value::Int(a) if a >= 0));
    for (key, kind) in [("b", "blocked"), ("n", "counting"), ("c", "cuckoo"), ("q", "quotient")] {
        let ok: String =
            redis::cmd("SF.RESERVE").arg(key).arg(0.01).arg(1000).arg("KIND").arg(kind).query(con).unwrap();
        assert_eq!(ok, "OK");
        let added: bool = redis::cmd("SF.ADD").arg(key).arg("a").query(con).unwrap();
        let again: bool = redis::cmd("SF.ADD").arg(key).arg("a").query(con).unwrap();
        assert!(added && !again, "{kind}");
        let many: Vec<bool> = redis::cmd("SF.MADD").arg(key).arg(&["b", "c", "d"]).query(con).unwrap();
        assert_eq!(many, [true, true, true], "{kind}");
        let ex: Vec<bool> = redis::cmd("SF.MEXISTS").arg(key).arg(&["a", "d", "zz"]).query(con).unwrap();
        assert_eq!(ex, [true, true, false], "{kind}");
        let one: bool = redis::cmd("SF.EXISTS").arg(key).arg("b").query(con).unwrap();
        assert!(one);
        // The deletable kinds keep a copy per add (as CF.ADD does), so that one SF.DEL undoes
        // one SF.ADD: the second "a" counts.
        let n = if kind == "blocked" { 4 } else { 5 };
        let card: i64 = redis::cmd("SF.CARD").arg(key).query(con).unwrap();
        assert_eq!(card, n, "{kind}");
        let info = info_map(qs(con, &["SF.INFO", key]).unwrap());
        assert_eq!(info["Items"], Value::Int(n), "{kind}");
        assert!(matches!(info["Capacity"], Value::Int(c) if c >= 1000), "{kind}: {info:?}");
        assert!(matches!(info["Bytes"], Value::Int(b) if b > 0), "{kind}");
        let target = float(&info["Target error rate"]);
        let estimate = float(&info["Estimated error rate"]);
        assert!(target <= 0.01 && target > 0.0, "{kind}: {target}");
        assert!(estimate >= 0.0 && estimate < target, "{kind}: {estimate}");
        assert_eq!(info["Window"], Value::Nil);
        if kind == "blocked" {
            let del = qs(con, &["SF.DEL", key, "a"]).unwrap_err();
            assert_eq!(
                del.to_string(),
                "An error was signalled by the server - ResponseError: a blocked-bloom filter cannot delete items (KIND counting, cuckoo and quotient can)"
            );
        } else {
            let gone: bool = redis::cmd("SF.DEL").arg(key).arg("a").query(con).unwrap();
            let still: bool = redis::cmd("SF.EXISTS").arg(key).arg("a").query(con).unwrap();
            assert!(gone && still, "{kind}: one copy of a is left");
            let not: Vec<bool> = redis::cmd("SF.MDEL").arg(key).arg(&["a", "b", "zz"]).query(con).unwrap();
            assert_eq!(not, [true, true, false], "{kind}");
            let ex: Vec<bool> = redis::cmd("SF.MEXISTS").arg(key).arg(&["a", "b", "c"]).query(con).unwrap();
            assert_eq!(ex, [false, false, true], "{kind}");
            let card: i64 = redis::cmd("SF.CARD").arg(key).query(con).unwrap();
            assert_eq!(card, 2, "{kind}");
        }
    }
    // One field: RESP2 `*1 [value]`, RESP3 `%1 {name: value}`, as BF.INFO.
    let one = qs(con, &["SF.INFO", "b", "KIND"]).unwrap();
    let want = Value::BulkString(b"blocked-bloom".to_vec());
    if resp3 {
        assert_eq!(one, Value::Map(vec![(Value::SimpleString("Kind".into()), want)]));
    } else {
        assert_eq!(one, Value::Array(vec![want]));
    }
    // SF.INFO answers for BF and CF keys (BF.INFO unchanged), with the estimate.
    let _: bool = redis::cmd("BF.ADD").arg("bf").arg("x").query(con).unwrap();
    let _: bool = redis::cmd("CF.ADD").arg("cf").arg("x").query(con).unwrap();
    let bf = info_map(qs(con, &["SF.INFO", "bf"]).unwrap());
    assert_eq!(text(&bf["Kind"]), "redisbloom-bf");
    assert_eq!(float(&bf["Target error rate"]), 0.01);
    let cf = info_map(qs(con, &["SF.INFO", "cf"]).unwrap());
    assert_eq!(text(&cf["Kind"]), "redisbloom-cf");
    assert_eq!(cf["Target error rate"], Value::Nil);
    assert!(float(&cf["Estimated error rate"]) > 0.0);
    let bf_info: HashMap<String, i64> = redis::cmd("BF.INFO").arg("bf").query(con).unwrap();
    assert_eq!(bf_info.len(), 5, "BF.INFO keeps its five fields");

    // SF.LOAD of a static xor filter built offline; SF.DUMP gives the file back.
    let file = xor_file(500);
    let ok: String = redis::cmd("SF.LOAD").arg("x").arg(&file[..]).query(con).unwrap();
    assert_eq!(ok, "OK");
    let ex: Vec<bool> = redis::cmd("SF.MEXISTS").arg("x").arg(&["item-0", "item-499"]).query(con).unwrap();
    assert_eq!(ex, [true, true]);
    let back: Vec<u8> = redis::cmd("SF.DUMP").arg("x").query(con).unwrap();
    assert_eq!(back, file);
    let (next, piece): (i64, Vec<u8>) = redis::cmd("SF.DUMP").arg("x").arg(0).query(con).unwrap();
    assert_eq!((next as usize, &piece[..]), (file.len() + 1, &file[..]), "one piece: the whole file");
    let (next, piece): (i64, Vec<u8>) = redis::cmd("SF.DUMP").arg("x").arg(11).query(con).unwrap();
    assert_eq!((next as usize, &piece[..]), (file.len() + 1, &file[10..]), "from byte 10");
    let (next, piece): (i64, Vec<u8>) = redis::cmd("SF.DUMP").arg("x").arg(next).query(con).unwrap();
    assert_eq!((next, piece.len()), (0, 0), "the end marker");
    let err = qs(con, &["SF.ADD", "x", "new"]).unwrap_err();
    assert!(err.to_string().contains("xor8 filter is static"), "{err}");
    // A dump of one kind loads over a key of another: the swap is whole.
    let cuckoo: Vec<u8> = redis::cmd("SF.DUMP").arg("c").query(con).unwrap();
    let ok: String = redis::cmd("SF.LOAD").arg("x").arg(&cuckoo[..]).query(con).unwrap();
    assert_eq!(ok, "OK");
    let info = info_map(qs(con, &["SF.INFO", "x"]).unwrap());
    assert_eq!(text(&info["Kind"]), "cuckoo");
    // In pieces.
    let mut left = -1i64;
    for (i, piece) in file.chunks(100).enumerate() {
        // The iterator of a piece: its end offset plus one (BF.SCANDUMP's convention).
        let it = i * 100 + piece.len() + 1;
        left = redis::cmd("SF.LOADCHUNK").arg("pieces").arg(it).arg(piece).query(con).unwrap();
    }
    assert_eq!(left, 0);
    let back: Vec<u8> = redis::cmd("SF.DUMP").arg("pieces").query(con).unwrap();
    assert_eq!(back, file);
    // EXPIRE works on the keys, and an in-place SF.LOAD keeps the time to live.
    let set: i64 = redis::cmd("EXPIRE").arg("pieces").arg(1000).query(con).unwrap();
    assert_eq!(set, 1);
    let _: String = redis::cmd("SF.LOAD").arg("pieces").arg(&file[..]).query(con).unwrap();
    let ttl: i64 = redis::cmd("TTL").arg("pieces").query(con).unwrap();
    assert!((1..=1000).contains(&ttl), "{ttl}");
    let typ: String = redis::cmd("TYPE").arg("pieces").query(con).unwrap();
    assert_eq!(typ, "sift-filt");
    let _: i64 = redis::cmd("PEXPIRE").arg("pieces").arg(1).query(con).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let gone: bool = redis::cmd("SF.EXISTS").arg("pieces").arg("item-1").query(con).unwrap();
    assert!(!gone);
}

/// Bad input: an exact error, and the keys as they were.
pub fn sf_bad_input_changes_nothing(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["SF.RESERVE", "k", "0.01", "1000", "KIND", "counting"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SF.ADD", "k", "kept"]), b":1\r\n");
    let snapshot = |c: &mut Raw| c.cmd(&["SF.DUMP", "k"]);
    let before = snapshot(&mut c);
    let err = |c: &mut Raw, args: &[&str]| c.cmd_text(args);
    let not_sift = format!("-{}\r\n", sift_commands::sf::NOT_A_SIFT_FILE);
    let bad_iterator = "-ERR bad iterator: SF.LOADCHUNK takes each piece with the iterator SF.DUMP returned with it (the piece's end offset plus one)\r\n";
    let cases: &[(&[&str], &str)] = &[
        (
            &["SF.RESERVE", "n", "0.01", "1099511627777"],
            "-ERR capacity must be in the range [1, 1099511627776]\r\n",
        ),
        (&["SF.RESERVE", "n", "0.01", "1000000000000"], "-ERR Insufficient memory to create filter\r\n"),
        (&["SF.RESERVE", "n", "0.01", "-5"], "-ERR capacity must be in the range [1, 1099511627776]\r\n"),
        (&["SF.RESERVE", "n", "0.01", "abc"], "-ERR bad capacity\r\n"),
        (&["SF.RESERVE", "n", "nan", "10"], "-ERR bad error rate\r\n"),
        (&["SF.RESERVE", "n", "1.5", "10"], "-ERR error rate must be in the range (0.000000, 1.000000)\r\n"),
        (
            &["SF.RESERVE", "n", "0.01", "10", "KIND", "bogus"],
            "-ERR unknown KIND (blocked, counting, cuckoo, quotient or aging)\r\n",
        ),
        (
            &["SF.RESERVE", "n", "0.01", "10", "WINDOW", "100"],
            "-ERR WINDOW and TTL apply to KIND aging only\r\n",
        ),
        (
            &["SF.RESERVE", "n", "0.01", "10", "KIND", "blocked", "TTL", "60"],
            "-ERR WINDOW and TTL apply to KIND aging only\r\n",
        ),
        (
            &["SF.RESERVE", "n", "0.01", "10", "FINGERPRINT", "12"],
            "-ERR FINGERPRINT applies to KIND cuckoo only\r\n",
        ),
        (
            &["SF.RESERVE", "n", "0.01", "10", "KIND", "cuckoo", "FINGERPRINT", "9"],
            "-ERR FINGERPRINT must be 8, 12 or 16\r\n",
        ),
        (
            &["SF.RESERVE", "n", "0.01", "10", "KIND"],
            "-ERR wrong number of arguments for 'sf.reserve' command\r\n",
        ),
        (&["SF.RESERVE", "n", "0.01"], "-ERR wrong number of arguments for 'sf.reserve' command\r\n"),
        (&["SF.RESERVE", "k", "0.01", "10"], "-ERR item exists\r\n"),
        (&["SF.ADD", "k"], "-ERR wrong number of arguments for 'sf.add' command\r\n"),
        (&["SF.INFO", "k", "nosuch"], "-Invalid information value\r\n"),
        (&["SF.INFO", "missing"], "-ERR not found\r\n"),
        (&["SF.DEL", "missing", "x"], "-ERR not found\r\n"),
        (&["SF.LOAD", "k", "not a sift file"], &not_sift),
        (
            &["SF.LOADCHUNK", "k", "5", "x"],
            "-ERR SF.LOADCHUNK expects the first piece (no upload in progress), got one starting at byte 3\r\n",
        ),
        (&["SF.LOADCHUNK", "k", "1", "x"], bad_iterator),
        (&["SF.LOADCHUNK", "k", "-1", "x"], bad_iterator),
        (&["SF.DUMP", "k", "x"], "-ERR the iterator must be an integer\r\n"),
        (&["SF.DUMP", "k", "0", "10"], "-ERR wrong number of arguments for 'sf.dump' command\r\n"),
    ];
    for (args, want) in cases {
        let got = err(&mut c, args);
        assert_eq!(got, *want, "{args:?}");
    }
    assert_eq!(c.cmd(&["EXISTS", "n"]), b":0\r\n", "no refused SF.RESERVE created its key");
    // A corrupt file: one flipped bit, a cut, an appended byte, a RedisBloom SCANDUMP chunk.
    let file = xor_file(100);
    let mut flipped = file.clone();
    flipped[file.len() / 2] ^= 4;
    let cut = &file[..file.len() - 1];
    let mut long = file.clone();
    long.push(0);
    for bad in [&flipped[..], cut, &long[..]] {
        let r = c.cmd_bytes(&[&b"SF.LOAD"[..], b"k", bad]);
        assert!(r.starts_with(b"-ERR bad sift file: "), "{}", String::from_utf8_lossy(&r));
        let r = c.cmd_bytes(&[&b"SF.LOAD"[..], b"fresh", bad]);
        assert!(r.starts_with(b"-ERR bad sift file: "), "{}", String::from_utf8_lossy(&r));
    }
    assert_eq!(c.cmd(&["EXISTS", "fresh"]), b":0\r\n");
    // A chunked load whose last piece is corrupt: the error, and the old filter still served.
    let first_it = b"41";
    let last_it = (file.len() + 1).to_string();
    assert_eq!(
        c.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"k", first_it, &flipped[..40]]),
        format!(":{}\r\n", file.len() - 40).as_bytes()
    );
    assert_eq!(c.cmd(&["SF.EXISTS", "k", "kept"]), b":1\r\n", "served while the upload runs");
    let r = c.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"k", last_it.as_bytes(), &flipped[40..]]);
    assert!(r.starts_with(b"-ERR bad sift file: "), "{}", String::from_utf8_lossy(&r));
    // The same into a missing key: the first piece creates it (the upload in progress), the
    // corrupt last piece deletes it again.
    assert_eq!(
        c.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"fresh", first_it, &flipped[..40]]),
        format!(":{}\r\n", file.len() - 40).as_bytes()
    );
    assert_eq!(c.cmd(&["EXISTS", "fresh"]), b":1\r\n");
    let r = c.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"fresh", last_it.as_bytes(), &flipped[40..]]);
    assert!(r.starts_with(b"-ERR bad sift file: "), "{}", String::from_utf8_lossy(&r));
    assert_eq!(c.cmd(&["EXISTS", "fresh"]), b":0\r\n", "a failed load left its key behind");
    // Wrong types both ways.
    assert_eq!(c.cmd(&["SET", "str", "v"]), b"+OK\r\n");
    let wrongtype = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    assert_eq!(c.cmd(&["SF.ADD", "str", "x"]), wrongtype);
    assert_eq!(c.cmd(&["SF.INFO", "str"]), wrongtype);
    assert_eq!(c.cmd_bytes(&[&b"SF.LOAD"[..], b"str", &file[..]]), wrongtype);
    assert_eq!(c.cmd(&["BF.ADD", "k", "x"]), wrongtype);
    assert_eq!(c.cmd(&["GET", "str"]), b"$1\r\nv\r\n");
    assert_eq!(snapshot(&mut c), before, "the key is as it was");
    // Still up.
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}

/// A filter larger than one 16 MiB piece: `SF.DUMP key` refuses to answer it whole, `SF.DUMP key
/// <iterator>` gives it in pieces (BF.SCANDUMP's convention) that `SF.LOADCHUNK` loads into
/// another key as the same file; a Guava filter converted to a sift file loads and answers as
/// Guava, its raw `writeTo` bytes are refused with how to convert them.
pub fn sf_pieces_and_foreign_files(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    // About 41 MB: three pieces.
    assert_eq!(c.cmd(&["SF.RESERVE", "big", "0.01", "30000000"]), b"+OK\r\n");
    let mut add = vec!["SF.MADD".to_string(), "big".into()];
    add.extend((0..1000).map(|i| format!("i{i}")));
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    c.cmd(&add);
    let whole = c.cmd_text(&["SF.DUMP", "big"]);
    assert!(whole.starts_with("-ERR the sift file is larger than one piece"), "{whole}");
    let mut pieces: Vec<(i64, Vec<u8>)> = Vec::new();
    let mut it = 0i64;
    let mut received = 0usize;
    loop {
        let reply = c.cmd(&["SF.DUMP", "big", &it.to_string()]);
        let (next, data) = parse_pair(&reply);
        if next == 0 {
            assert!(data.is_empty());
            break;
        }
        assert!(data.len() <= 16 << 20);
        received += data.len();
        assert_eq!(next as usize, received + 1);
        it = next;
        pieces.push((next, data));
    }
    assert_eq!(pieces.len(), 3, "{received} bytes");
    let mut left = received;
    for (next, data) in &pieces {
        left -= data.len();
        let r = c.cmd_bytes(&[&b"SF.LOADCHUNK"[..], b"copy", next.to_string().as_bytes(), data]);
        assert_eq!(r, format!(":{left}\r\n").as_bytes());
    }
    for (next, data) in &pieces {
        let first = (*next as usize - data.len()).to_string();
        assert_eq!(parse_pair(&c.cmd(&["SF.DUMP", "copy", &first])).1, *data);
    }
    assert_eq!(c.cmd(&["SF.EXISTS", "copy", "i999"]), b":1\r\n");
    assert_eq!(c.cmd(&["DEL", "big", "copy"]), b":2\r\n");

    let mut g = sift::compat::guava::GuavaBloom::new(1000, 0.01).unwrap();
    for i in 0..500 {
        g.put(format!("in-{i}").as_bytes());
    }
    let r = c.cmd_bytes(&[&b"SF.LOAD"[..], b"g", &g.write_to()]);
    assert_eq!(r, format!("-{}\r\n", sift_commands::sf::NOT_A_SIFT_FILE).as_bytes());
    assert_eq!(c.cmd(&["EXISTS", "g"]), b":0\r\n");
    assert_eq!(c.cmd_bytes(&[&b"SF.LOAD"[..], b"g", &Persist::to_bytes(&g)]), b"+OK\r\n");
    for i in (0..2000).step_by(7) {
        let item = format!("in-{i}");
        let want = if g.might_contain(item.as_bytes()) { &b":1\r\n"[..] } else { b":0\r\n" };
        assert_eq!(c.cmd(&["SF.EXISTS", "g", &item]), want, "{item}");
    }
    assert_eq!(c.cmd(&["SF.ADD", "g", "new"]), b":1\r\n");
    g.put(b"new");
    assert_eq!(c.cmd(&["SF.DUMP", "g"]), bulk_reply(&Persist::to_bytes(&g)));
    assert_eq!(c.cmd(&["SF.INFO", "g", "kind"]), b"*1\r\n$11\r\nguava-bloom\r\n");
}

/// `[next, data]` of an `SF.DUMP key <iterator>` reply (RESP2).
fn parse_pair(reply: &[u8]) -> (i64, Vec<u8>) {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(reply.starts_with(b"*2\r\n:"), "{}", text(&reply[..reply.len().min(80)]));
    let rest = &reply[4..];
    let eol = rest.windows(2).position(|w| w == b"\r\n").unwrap();
    let next: i64 = text(&rest[1..eol]).parse().unwrap();
    let rest = &rest[eol + 2..];
    let eol = rest.windows(2).position(|w| w == b"\r\n").unwrap();
    let len: usize = text(&rest[1..eol]).parse().unwrap();
    (next, rest[eol + 2..eol + 2 + len].to_vec())
}

/// A RESP2 bulk string.
fn bulk_reply(data: &[u8]) -> Vec<u8> {
    let mut r = format!("${}\r\n", data.len()).into_bytes();
    r.extend_from_slice(data);
    r.extend_from_slice(b"\r\n");
    r
}

/// `COMMAND INFO`: arity, flags, the key, and the ACL categories.
pub fn sf_command_metadata(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    let info = c.cmd_text(&["COMMAND", "INFO", "sf.add", "sf.exists"]);
    assert!(
        info.starts_with(
            "*2\r\n*10\r\n$6\r\nsf.add\r\n:3\r\n*3\r\n+write\r\n+denyoom\r\n+module\r\n:1\r\n:1\r\n:1\r\n"
        ),
        "{info}"
    );
    assert!(info.contains("$9\r\nsf.exists\r\n:3\r\n*3\r\n+readonly\r\n+module\r\n+fast\r\n"), "{info}");
    // ACL categories after the key triple: sift-server reports them; Redis before 7.2 has no
    // module ACL categories, so the module's are empty there.
    let acl = info.split_once(":1\r\n:1\r\n:1\r\n").map(|(_, rest)| rest).unwrap_or("");
    assert!(acl.starts_with("*2\r\n+@write\r\n+@bloom\r\n") || acl.starts_with("*0\r\n"), "{info}");
    assert_eq!(c.cmd_text(&["COMMAND", "GETKEYS", "sf.add", "k", "x"]), "*1\r\n$1\r\nk\r\n");
}

/// redis-py's `execute_command`, RESP2 and RESP3 (`tests/py/sf_client.py`).
pub fn sf_redis_py(t: &dyn Target) {
    let have = std::process::Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        super::external::missing(
            "python3 with the `redis` module",
            "pip install redis; scripts/test.sh does it",
        );
        return;
    }
    let srv = t.start();
    let dir = sift_testkit::temp_dir("sf-py");
    let file = dir.join("xor.sift");
    std::fs::write(&file, xor_file(300)).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift-server/tests/py/sf_client.py");
    for proto in ["2", "3"] {
        let out = std::process::Command::new("python3")
            .arg(&script)
            .arg(srv.port().to_string())
            .arg(proto)
            .arg(&file)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("redis-py SF OK"),
            "redis-py RESP{proto} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
