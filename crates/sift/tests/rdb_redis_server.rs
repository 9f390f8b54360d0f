//! The RDB primitives against a real `redis-server` (7.0, `/usr/bin/redis-server`; CI installs
//! it): Redis cannot load RedisBloom's types without the module, but it writes and reads the same
//! framing for its own strings. Redis writes a `dump.rdb` with strings of every encoding (short,
//! integer forms, LZF-compressed, long), expiries, several databases, other types and a function
//! library; `read_rdb` must decode it. Then Redis loads a file written by `write_rdb`, and
//! `RESTORE`s our `DUMP` payloads, so CRC64, lengths and string forms are checked both ways.
//!
//! The server listens on a Unix socket in a fresh temporary directory (no TCP port is opened).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sift::compat::redisbloom::rdb::{
    dump_payload, read_rdb, restore_payload, write_rdb, RdbKey, RdbValue, ReadOptions, RDB_VERSION,
};
use sift_testkit::temp_dir;

const REDIS_SERVER: &str = "/usr/bin/redis-server";

#[derive(Debug, PartialEq)]
enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

struct Server {
    child: Child,
    dir: PathBuf,
    conn: BufReader<UnixStream>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts redis-server in `dir`, loading `dir/dump.rdb` if it exists.
    fn start(dir: &Path) -> Server {
        assert!(
            Path::new(REDIS_SERVER).exists(),
            "{REDIS_SERVER} is required (Debian package redis-server; .ci/run installs it)"
        );
        let sock = dir.join("redis.sock");
        let child = Command::new(REDIS_SERVER)
            .args(["--port", "0", "--unixsocket"])
            .arg(&sock)
            .arg("--dir")
            .arg(dir)
            .args(["--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--logfile", "redis.log"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let start = Instant::now();
        let stream = loop {
            match UnixStream::connect(&sock) {
                Ok(s) => break s,
                Err(_) if start.elapsed() < Duration::from_secs(20) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => {
                    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
                    panic!("redis-server did not start: {e}\n{log}");
                }
            }
        };
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut s = Server { child, dir: dir.to_path_buf(), conn: BufReader::new(stream) };
        // Loading a file happens before the socket accepts, but be sure it is done.
        while s.cmd(&["PING"]) != Reply::Status("PONG".into()) {
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn cmd_bytes(&mut self, args: &[&[u8]]) -> Reply {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.conn.get_mut().write_all(&out).unwrap();
        self.reply()
    }

    fn cmd(&mut self, args: &[&str]) -> Reply {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.cmd_bytes(&args)
    }

    fn reply(&mut self) -> Reply {
        let mut line = String::new();
        self.conn.read_line(&mut line).unwrap();
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Reply::Status(rest.into()),
            "-" => Reply::Error(rest.into()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Bulk(None);
                }
                let mut buf = vec![0; n as usize + 2];
                self.conn.read_exact(&mut buf).unwrap();
                buf.truncate(n as usize);
                Reply::Bulk(Some(buf))
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                Reply::Array((0..n).map(|_| self.reply()).collect())
            }
            _ => panic!("bad reply line {line:?}"),
        }
    }

    fn ok(&mut self, args: &[&str]) {
        let r = self.cmd(args);
        assert!(matches!(r, Reply::Status(_) | Reply::Int(_) | Reply::Bulk(Some(_))), "{args:?}: {r:?}");
    }
}

/// Deterministic bytes: `alphabet` letters from a xorshift generator.
fn pseudo_random(n: usize, alphabet: u8, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if alphabet == 0 {
                x as u8
            } else {
                b'a' + (x % alphabet as u64) as u8
            }
        })
        .collect()
}

fn strings() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = [
        "hello",
        "",
        "7",
        "-5",
        "127",
        "-128",
        "128",
        "12345",
        "-32769",
        "2147483647",
        "-2147483648",
        "2147483648",
        "9223372036854775807",
        "007",
        "+1",
        "1.5",
        "12345678901",
    ]
    .iter()
    .enumerate()
    .map(|(i, s)| (format!("s{i}"), s.as_bytes().to_vec()))
    .collect();
    v.push(("bin".into(), b"\x00\r\n\xff binary".to_vec()));
    v.push(("abc1500".into(), b"abc".repeat(500)));
    v.push(("rand200".into(), pseudo_random(200, 0, 1)));
    v.push(("len20000".into(), pseudo_random(20000, 4, 2)));
    v.push(("rand70000".into(), pseudo_random(70000, 0, 3)));
    v.push(("zeros100000".into(), vec![0; 100000]));
    v.push(("exactly20".into(), b"a".repeat(20)));
    v.push(("exactly21".into(), b"a".repeat(21)));
    v
}

#[test]
fn redis_written_rdb_reads_and_our_payloads_restore() {
    let dir = temp_dir("redis-writes");
    let mut r = Server::start(&dir);
    let strings = strings();
    for (k, v) in &strings {
        assert_eq!(r.cmd_bytes(&[b"SET", k.as_bytes(), v]), Reply::Status("OK".into()));
    }
    r.ok(&["SET", "with_px", "v", "PX", "100000000"]);
    r.ok(&["PEXPIREAT", "s0", "4102444800000"]);
    r.ok(&["RPUSH", "list", "a", "b", "c"]);
    r.ok(&["HSET", "hash", "f", "v"]);
    r.ok(&["SADD", "intset", "1", "2", "3"]);
    r.ok(&["SADD", "set", "a", "b"]);
    r.ok(&["ZADD", "zset", "1", "a", "2.5", "b"]);
    for i in 0..200 {
        let (f, s) = (format!("field{i}"), format!("{i}"));
        r.ok(&["HSET", "bighash", &f, &s]);
        r.ok(&["ZADD", "bigzset", &s, &f]);
        r.ok(&["RPUSH", "biglist", &"x".repeat(100 + i)]);
    }
    // A value over hash-max-listpack-value (64) makes it a real hash table (type 4).
    r.ok(&["HSET", "bighash", "long", &"y".repeat(100)]);
    r.ok(&["FUNCTION", "LOAD", "#!lua name=mylib\nredis.register_function('f', function() return 1 end)"]);
    r.ok(&["SELECT", "3"]);
    r.ok(&["SET", "in_db3", "three"]);
    r.ok(&["SELECT", "0"]);
    assert_eq!(r.cmd(&["SAVE"]), Reply::Status("OK".into()));

    let bytes = std::fs::read(dir.join("dump.rdb")).unwrap();
    // 100 000 zeros and a 20 000-byte four-letter text beside 70 000 random bytes: the file is
    // this small only if Redis stored the first two LZF-compressed, which read_rdb must expand.
    assert!(bytes.len() < 100_000, "{} bytes", bytes.len());
    let file = read_rdb(&bytes, &ReadOptions::default()).unwrap();
    assert_eq!(file.version, RDB_VERSION);
    assert!(file.checksum_verified);
    assert_eq!(file.functions, 1);
    assert!(file.aux.iter().any(|(k, v)| k == b"redis-ver" && v == b"7.0.15"), "{:?}", file.aux);
    let find =
        |key: &str| file.keys.iter().find(|k| k.key == key.as_bytes()).unwrap_or_else(|| panic!("{key}"));
    for (k, v) in &strings {
        assert_eq!(find(k).value, RdbValue::String(v.clone()), "{k}");
        assert_eq!(find(k).db, 0);
    }
    assert_eq!(find("s0").expire_at_ms, Some(4_102_444_800_000));
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let px = find("with_px").expire_at_ms.unwrap();
    assert!((px - now_ms - 100_000_000).abs() < 600_000, "{px}");
    assert_eq!(find("s1").expire_at_ms, None);
    assert_eq!((find("in_db3").db, &find("in_db3").value), (3, &RdbValue::String(b"three".to_vec())));
    let mut other_types: Vec<(String, u8)> = file
        .keys
        .iter()
        .filter_map(|k| match k.value {
            RdbValue::Other { type_byte, .. } => Some((String::from_utf8(k.key.clone()).unwrap(), type_byte)),
            _ => None,
        })
        .collect();
    other_types.sort();
    // Redis 7.0: quicklist 2 (18), hash listpack (16) / table (4), intset (11), set table (2),
    // zset listpack (17) / skiplist (5).
    assert_eq!(
        other_types,
        [
            ("bighash".into(), 4),
            ("biglist".into(), 18),
            ("bigzset".into(), 5),
            ("hash".into(), 16),
            ("intset".into(), 11),
            ("list".into(), 18),
            ("set".into(), 2),
            ("zset".into(), 17)
        ]
    );
    assert_eq!(file.keys.len(), strings.len() + 2 + other_types.len());
    // Skipping the others is optional.
    let strict = ReadOptions { skip_other_types: false, ..Default::default() };
    assert!(read_rdb(&bytes, &strict).unwrap_err().to_string().contains("unsupported value type"));

    // DUMP payloads: Redis's decode here; ours restore there (strings, and the stepped-over values
    // copied verbatim).
    for k in &file.keys {
        let name = String::from_utf8(k.key.clone()).unwrap();
        if k.db != 0 {
            continue;
        }
        let Reply::Bulk(Some(theirs)) = r.cmd_bytes(&[b"DUMP", &k.key]) else { panic!("DUMP {name}") };
        assert_eq!(restore_payload(&theirs).unwrap(), k.value, "{name}: Redis's DUMP payload");
        let ours = dump_payload(&k.value);
        if let RdbValue::String(_) = k.value {
            // Same bytes, except where Redis compressed with LZF (which we never write).
            if theirs.len() == ours.len() {
                assert_eq!(theirs, ours, "{name}");
            }
        }
        let copy = format!("copy_{name}");
        let reply = r.cmd_bytes(&[b"RESTORE", copy.as_bytes(), b"0", &ours]);
        assert_eq!(reply, Reply::Status("OK".into()), "RESTORE of our payload for {name}");
        let Reply::Bulk(Some(again)) = r.cmd_bytes(&[b"DUMP", copy.as_bytes()]) else { panic!() };
        let again = restore_payload(&again).unwrap();
        match k.value {
            // Hash tables may come back in another order: compare the type only.
            RdbValue::Other { type_byte, .. } => assert_eq!(again.type_byte(), type_byte, "{name}"),
            _ => assert_eq!(again, k.value, "{name}: round trip through Redis"),
        }
    }
    let mut bad = dump_payload(&RdbValue::String(b"x".to_vec()));
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(
        r.cmd_bytes(&[b"RESTORE", b"bad", b"0", &bad]),
        Reply::Error("ERR DUMP payload version or checksum are wrong".into())
    );
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redis_loads_a_file_we_wrote() {
    let dir = temp_dir("sift-writes");
    let strings = strings();
    let mut keys: Vec<RdbKey> = strings
        .iter()
        .map(|(k, v)| RdbKey {
            db: 0,
            key: k.as_bytes().to_vec(),
            expire_at_ms: None,
            value: RdbValue::String(v.clone()),
        })
        .collect();
    keys[0].expire_at_ms = Some(4_102_444_800_000);
    keys.push(RdbKey {
        db: 5,
        key: b"five".to_vec(),
        expire_at_ms: None,
        value: RdbValue::String(b"5".to_vec()),
    });
    keys.push(RdbKey {
        db: 5,
        key: b"expired".to_vec(),
        expire_at_ms: Some(1000),
        value: RdbValue::String(b"x".to_vec()),
    });
    std::fs::write(dir.join("dump.rdb"), write_rdb(&keys, 1_700_000_000)).unwrap();
    let mut r = Server::start(&dir);
    assert_eq!(r.cmd(&["DBSIZE"]), Reply::Int(strings.len() as i64));
    for (k, v) in &strings {
        assert_eq!(r.cmd(&["GET", k]), Reply::Bulk(Some(v.clone())), "{k}");
    }
    assert_eq!(r.cmd(&["PEXPIRETIME", "s0"]), Reply::Int(4_102_444_800_000));
    assert_eq!(r.cmd(&["TTL", "s1"]), Reply::Int(-1));
    r.ok(&["SELECT", "5"]);
    assert_eq!(r.cmd(&["GET", "five"]), Reply::Bulk(Some(b"5".to_vec())));
    // An expiry in the past: Redis drops the key while loading.
    assert_eq!(r.cmd(&["GET", "expired"]), Reply::Bulk(None));
    let log = std::fs::read_to_string(r.dir.join("redis.log")).unwrap_or_default();
    assert!(log.contains("DB loaded from disk"), "{log}");
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
}
