//! The BF.* / CF.* conformance suite, run against every server that serves RedisBloom's
//! commands: sift-server (`tests/bloom_commands.rs`) and redis-server with the sift-redis module
//! (`crates/sift-redis/tests/module.rs`, which includes this folder with `#[path]`). One suite,
//! two targets: the same transcript, fixtures, client checks and error cases, byte for byte.
//!
//! A target starts a fresh server ([`Target::start`]) and says how it differs where a server is
//! allowed to: the names of the filter parameters in `CONFIG SET` (module configs are prefixed
//! `bf.` on Redis 7) and how much memory `maxmemory` must leave to the server itself.

#![allow(dead_code)]

pub mod client;
pub mod external;
pub mod sf;
pub mod sketches;

pub use client::Raw;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A running server under test (stopped on drop).
pub trait Server {
    /// Its address on 127.0.0.1.
    fn addr(&self) -> SocketAddr;
    /// Its process id (for peak memory).
    fn pid(&self) -> u32;
    /// A raw RESP connection.
    fn raw(&self) -> Raw {
        Raw::connect(self.addr())
    }
    /// Its TCP port.
    fn port(&self) -> u16 {
        self.addr().port()
    }
    /// A `redis` crate URL.
    fn url(&self, resp3: bool) -> String {
        let proto = if resp3 { "?protocol=resp3" } else { "" };
        format!("redis://{}/{proto}", self.addr())
    }
    /// Peak resident memory of the server process, in kB (Linux only).
    fn peak_rss_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

/// A kind of server the suite runs against.
pub trait Target {
    /// Starts a fresh, empty server.
    fn start(&self) -> Box<dyn Server>;
    /// The `CONFIG SET` name of a filter parameter of spec §3 (`bf-error-rate` ...).
    fn config_name(&self, name: &str) -> String {
        name.to_string()
    }
    /// Are the filter parameters prefixed module configs (`bf.bf-error-rate`, Redis 7)?
    fn module_configs_prefixed(&self) -> bool {
        false
    }
    /// `maxmemory` in MiB for the memory-bound test (1 for a server whose memory is its filters).
    fn memory_scale(&self) -> u64 {
        1
    }
    /// Does the server run Lua scripts (sift-server without its `lua` feature does not)?
    fn scripting(&self) -> bool {
        true
    }
}

// ------------------------------------------------------------------------------------------------
// The suite.

use base64::Engine;
use serde_json::Value as J;

/// The golden data, in sift-server's tests (a copy of the spec's fixtures); found from either
/// crate that includes this suite.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift-server/tests/fixtures")
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).expect("valid base64 in a fixture")
}

/// A command argument or bulk value of the fixtures: a string, or `{"b64": ...}`.
fn bytes_of(v: &J) -> Vec<u8> {
    match v {
        J::String(s) => s.as_bytes().to_vec(),
        J::Object(o) if o.contains_key("b64") => b64(o["b64"].as_str().unwrap()),
        J::Number(n) => n.to_string().into_bytes(),
        other => panic!("not an argument: {other}"),
    }
}

/// The `*_wire` fields map each byte to the code point of the same value.
fn latin1(s: &str) -> Vec<u8> {
    s.chars().map(|c| u8::try_from(c as u32).expect("a byte per char")).collect()
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).escape_debug().to_string()
}

/// How a JSON string of a fixture goes on the wire.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Str {
    Simple,
    Bulk,
}

/// Encodes a decoded fixture reply (README conventions) for protocol `proto`. The top level
/// string is sent as `top`; strings inside arrays and maps are bulk strings, except INFO field
/// names (`info`: even positions of a flat array, keys of a map), which are simple strings.
pub fn wire(v: &J, proto: u8, top: Str, info: bool) -> Vec<u8> {
    let mut out = Vec::new();
    wire_into(&mut out, v, proto, top, info);
    out
}

fn wire_into(out: &mut Vec<u8>, v: &J, proto: u8, kind: Str, info: bool) {
    let bulk = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
        out.extend_from_slice(b);
        out.extend_from_slice(b"\r\n");
    };
    match v {
        J::Null if proto >= 3 => out.extend_from_slice(b"_\r\n"),
        J::Null => out.extend_from_slice(b"$-1\r\n"),
        J::Bool(b) => {
            assert!(proto >= 3, "booleans appear only in RESP3 replies");
            out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
        }
        J::Number(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        J::String(s) if kind == Str::Simple => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
        J::String(s) => bulk(out, s.as_bytes()),
        J::Array(items) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            for (i, item) in items.iter().enumerate() {
                let k = if info && i % 2 == 0 { Str::Simple } else { Str::Bulk };
                wire_into(out, item, proto, k, false);
            }
        }
        J::Object(o) if o.contains_key("error") => {
            out.extend_from_slice(format!("-{}\r\n", o["error"].as_str().unwrap()).as_bytes())
        }
        J::Object(o) if o.contains_key("b64") => bulk(out, &b64(o["b64"].as_str().unwrap())),
        J::Object(o) if o.contains_key("map") => {
            let pairs = o["map"].as_array().unwrap();
            assert!(proto >= 3, "maps appear only in RESP3 replies");
            out.extend_from_slice(format!("%{}\r\n", pairs.len()).as_bytes());
            for pair in pairs {
                let key_kind = if info { Str::Simple } else { Str::Bulk };
                wire_into(out, &pair[0], proto, key_kind, false);
                wire_into(out, &pair[1], proto, Str::Bulk, false);
            }
        }
        other => panic!("unknown fixture value {other}"),
    }
}

/// Top-level strings of the transcript and setup replies are status replies (`+OK`).
pub fn top_kind(v: &J) -> Str {
    if v.is_string() {
        Str::Simple
    } else {
        Str::Bulk
    }
}

fn args_of(cmd: &J) -> Vec<Vec<u8>> {
    cmd.as_array().expect("a command is a list").iter().map(bytes_of).collect()
}

fn hello3(c: &mut Raw) {
    let r = c.cmd(&["HELLO", "3"]);
    assert_eq!(r[0], b'%', "{}", show(&r));
}

// ------------------------------------------------------------------------------------------------
// (a) The transcript.

/// Replays every transcript line on one connection; returns (lines passed, failures).
fn replay_transcript(t: &dyn Target, proto: u8) -> (usize, usize, Vec<String>) {
    let text = std::fs::read_to_string(fixtures().join("transcript.jsonl")).unwrap();
    let srv = t.start();
    let mut c = srv.raw();
    if proto == 3 {
        hello3(&mut c);
    }
    let (mut passed, mut current) = (0, 0);
    let mut failures = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let d: J = serde_json::from_str(line).unwrap();
        let got = c.cmd_bytes(&args_of(&d["cmd"]));
        let wire_field = if proto == 2 { "resp2_wire" } else { "resp3_wire" };
        // Unprefixed module configs (`CONFIG GET bf-error-rate`) need Redis 8; on Redis 7 the
        // module's are `bf.bf-error-rate` and these lines answer as with RedisBloom 2.6.
        let old_config = t.module_configs_prefixed() && d["cmd"][0] == "CONFIG";
        let expected = match d.get("differs_in_current") {
            _ if old_config => latin1(d[wire_field].as_str().unwrap()),
            None => latin1(d[wire_field].as_str().unwrap()),
            Some(cur) => {
                current += 1;
                // The encoder must reproduce the recorded 2.6 bytes of this very line, so the
                // bytes it builds for the current reply are trustworthy.
                let old = &d[if proto == 2 { "resp2" } else { "resp3" }];
                assert_eq!(
                    show(&wire(old, proto, top_kind(old), false)),
                    show(&latin1(d[wire_field].as_str().unwrap())),
                    "encoder self-check on line {}",
                    n + 1
                );
                let cur = if proto == 3 { d.get("differs_in_current_resp3").unwrap_or(cur) } else { cur };
                wire(cur, proto, top_kind(cur), false)
            }
        };
        if got == expected {
            passed += 1;
        } else {
            failures.push(format!(
                "line {} {}: expected {} got {}",
                n + 1,
                d["cmd"],
                show(&expected),
                show(&got)
            ));
        }
    }
    // The server is still up and the connection still usable after every error of the transcript.
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    (passed, current, failures)
}

pub fn transcript_resp2_byte_exact(t: &dyn Target) {
    let (passed, current, failures) = replay_transcript(t, 2);
    println!("transcript RESP2: {passed}/280 lines byte-exact ({current} with the current RedisBloom reply)");
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(passed, 280);
}

pub fn transcript_resp3_byte_exact(t: &dyn Target) {
    let (passed, current, failures) = replay_transcript(t, 3);
    println!("transcript RESP3: {passed}/280 lines byte-exact ({current} with the current RedisBloom reply)");
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(passed, 280);
}

// ------------------------------------------------------------------------------------------------
// (b) The filter fixtures.

fn scandump_line_wire(line: &J, proto: u8) -> Vec<u8> {
    let mut out = format!("*2\r\n:{}\r\n", line[0]).into_bytes();
    match &line[1] {
        J::Null if proto >= 3 => out.extend_from_slice(b"_\r\n"),
        J::Null => out.extend_from_slice(b"$-1\r\n"),
        J::String(s) => {
            let data = b64(s);
            out.extend_from_slice(format!("${}\r\n", data.len()).as_bytes());
            out.extend_from_slice(&data);
            out.extend_from_slice(b"\r\n");
        }
        other => panic!("bad scandump line {other}"),
    }
    out
}

/// The items a setup command wrote (to compare EXISTS on the original and the restored key).
fn items_of(cmd: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
    match name.as_str() {
        "BF.ADD" | "BF.MADD" | "CF.ADD" | "CF.ADDNX" | "CF.DEL" => cmd[2..].to_vec(),
        "BF.INSERT" | "CF.INSERT" | "CF.INSERTNX" => {
            let at = cmd[2..].iter().position(|a| a.eq_ignore_ascii_case(b"ITEMS")).unwrap() + 3;
            cmd[at..].to_vec()
        }
        _ => vec![],
    }
}

/// Checks one fixture on a fresh keyspace; returns the problems found.
fn check_fixture(srv: &dyn Server, name: &str) -> Vec<String> {
    let dir = fixtures();
    let meta: J =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.meta.json"))).unwrap())
            .unwrap();
    let dump: Vec<J> = std::fs::read_to_string(dir.join(format!("{name}.scandump.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bf = name.starts_with("bf_");
    let p = if bf { "BF" } else { "CF" };
    let key = meta["key"].as_str().unwrap();
    let mut problems = Vec::new();
    let mut check = |what: &str, expected: Vec<u8>, got: Vec<u8>| {
        if expected != got {
            problems.push(format!("{name} {what}: expected {} got {}", show(&expected), show(&got)));
        }
    };
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    let mut items = Vec::new();
    for (cmd, reply) in
        meta["setup"].as_array().unwrap().iter().zip(meta["setup_replies_resp2"].as_array().unwrap())
    {
        let args = args_of(cmd);
        items.extend(items_of(&args));
        let got = c.cmd_bytes(&args);
        check(
            &format!("setup {}", String::from_utf8_lossy(&args[0])),
            wire(reply, 2, top_kind(reply), false),
            got,
        );
    }
    // SCANDUMP, chunk by chunk, in both protocols.
    let mut c3 = srv.raw();
    hello3(&mut c3);
    for (conn, proto) in [(&mut c, 2u8), (&mut c3, 3)] {
        let mut it = 0i64;
        for (i, line) in dump.iter().enumerate() {
            let got = conn.cmd_bytes(&[format!("{p}.SCANDUMP"), key.into(), it.to_string()]);
            check(&format!("SCANDUMP #{i} (RESP{proto})"), scandump_line_wire(line, proto), got);
            it = line[0].as_i64().unwrap();
        }
    }
    check("INFO RESP2", wire(&meta["info_resp2"], 2, Str::Bulk, true), c.cmd(&[&format!("{p}.INFO"), key]));
    check("INFO RESP3", wire(&meta["info_resp3"], 3, Str::Bulk, true), c3.cmd(&[&format!("{p}.INFO"), key]));
    for (conn, proto) in [(&mut c, 2u8), (&mut c3, 3)] {
        check(
            "DEBUG",
            wire(&meta["debug"], proto, Str::Bulk, false),
            conn.cmd(&[&format!("{p}.DEBUG"), key]),
        );
    }
    if bf {
        check("CARD", format!(":{}\r\n", meta["card"]).into_bytes(), c.cmd(&["BF.CARD", key]));
    }
    // Restore into a new key with LOADCHUNK (every line but the end marker), then compare.
    let restored = format!("{key}:restored");
    let chunks = &dump[..dump.len() - 1];
    for line in chunks {
        let got = c.cmd_bytes(&[
            format!("{p}.LOADCHUNK").into_bytes(),
            restored.clone().into_bytes(),
            line[0].to_string().into_bytes(),
            b64(line[1].as_str().unwrap()),
        ]);
        check("LOADCHUNK", b"+OK\r\n".to_vec(), got);
    }
    if chunks.is_empty() {
        // An empty cuckoo filter has no dump: nothing to restore.
        check("empty dump", b"*2\r\n:0\r\n$-1\r\n".to_vec(), c.cmd(&["CF.SCANDUMP", key, "0"]));
        return problems;
    }
    let mut it = 0i64;
    for (i, line) in dump.iter().enumerate() {
        let got = c.cmd_bytes(&[format!("{p}.SCANDUMP"), restored.clone(), it.to_string()]);
        check(&format!("restored SCANDUMP #{i}"), scandump_line_wire(line, 2), got);
        it = line[0].as_i64().unwrap();
    }
    for cmd in ["INFO", "DEBUG"] {
        let a = c.cmd(&[&format!("{p}.{cmd}"), key]);
        let b = c.cmd(&[&format!("{p}.{cmd}"), &restored]);
        check(&format!("restored {cmd}"), a, b);
    }
    if !items.is_empty() {
        let mexists = |k: &str| {
            let mut args = vec![format!("{p}.MEXISTS").into_bytes(), k.as_bytes().to_vec()];
            args.extend(items.iter().cloned());
            args
        };
        let a = c.cmd_bytes(&mexists(key));
        let b = c.cmd_bytes(&mexists(&restored));
        check("restored MEXISTS", a.clone(), b);
        if bf && meta["setup_replies_resp2"].to_string().matches("error").count() == 0 {
            // No item was refused: a Bloom filter has no false negatives.
            let ones = format!("*{}\r\n{}", items.len(), ":1\r\n".repeat(items.len()));
            check("MEXISTS of every added item", ones.into_bytes(), a);
        }
    }
    problems
}

pub fn every_filter_fixture_matches(t: &dyn Target) {
    let mut names: Vec<String> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".meta.json").map(str::to_string))
        .filter(|n| n.starts_with("bf_") || n.starts_with("cf_"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 20, "{names:?}");
    let srv = t.start();
    let mut failed = Vec::new();
    let mut passed = 0;
    for name in &names {
        let problems = check_fixture(&*srv, name);
        if problems.is_empty() {
            passed += 1;
        } else {
            failed.extend(problems);
        }
    }
    println!(
        "filter fixtures: {passed}/{} match (SCANDUMP, INFO RESP2/RESP3, DEBUG, CARD, restore)",
        names.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ------------------------------------------------------------------------------------------------
// (c) The `redis` crate.

fn connect(srv: &dyn Server, resp3: bool) -> redis::Connection {
    redis::Client::open(srv.url(resp3)).unwrap().get_connection().unwrap()
}

fn typical_client_use(t: &dyn Target, resp3: bool) {
    use redis::Value;
    let srv = t.start();
    let mut con = connect(&*srv, resp3);
    let q = |con: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<Value> {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(con)
    };
    let ok: String = redis::cmd("BF.RESERVE").arg("bf").arg(0.01).arg(1000).query(&mut con).unwrap();
    assert_eq!(ok, "OK");
    let added: bool = redis::cmd("BF.ADD").arg("bf").arg("a").query(&mut con).unwrap();
    assert!(added);
    let again: bool = redis::cmd("BF.ADD").arg("bf").arg("a").query(&mut con).unwrap();
    assert!(!again);
    let many: Vec<bool> = redis::cmd("BF.MADD").arg("bf").arg(&["a", "b", "c"]).query(&mut con).unwrap();
    assert_eq!(many, [false, true, true]);
    let ex: Vec<bool> = redis::cmd("BF.MEXISTS").arg("bf").arg(&["a", "zz"]).query(&mut con).unwrap();
    assert_eq!(ex, [true, false]);
    let card: i64 = redis::cmd("BF.CARD").arg("bf").query(&mut con).unwrap();
    assert_eq!(card, 3);
    let info: std::collections::HashMap<String, i64> =
        redis::cmd("BF.INFO").arg("bf").query(&mut con).unwrap();
    assert_eq!(info["Capacity"], 1000);
    assert_eq!(info["Number of items inserted"], 3);
    let one = q(&mut con, &["BF.INFO", "bf", "CAPACITY"]).unwrap();
    if resp3 {
        assert_eq!(one, Value::Map(vec![(Value::SimpleString("Capacity".into()), Value::Int(1000))]));
    } else {
        assert_eq!(one, Value::Array(vec![Value::Int(1000)]));
    }
    // An error element inside the array: the redis crate turns the whole reply into that error.
    let ns = q(&mut con, &["BF.INSERT", "ns", "NONSCALING", "CAPACITY", "1", "ITEMS", "x", "y"]).unwrap_err();
    assert_eq!(ns.detail(), Some("non scaling filter is full"), "{ns}");
    assert_eq!(q(&mut con, &["BF.CARD", "ns"]).unwrap(), Value::Int(1), "x went in before the error");
    // SCANDUMP / LOADCHUNK round trip through the client's types.
    let mut it = 0i64;
    let mut chunks = Vec::new();
    loop {
        let (next, data): (i64, Vec<u8>) =
            redis::cmd("BF.SCANDUMP").arg("bf").arg(it).query(&mut con).unwrap();
        if next == 0 {
            break;
        }
        chunks.push((next, data));
        it = next;
    }
    assert_eq!(chunks.len(), 2);
    for (it, data) in &chunks {
        let _: () =
            redis::cmd("BF.LOADCHUNK").arg("copy").arg(*it).arg(data.as_slice()).query(&mut con).unwrap();
    }
    let ex: Vec<bool> = redis::cmd("BF.MEXISTS").arg("copy").arg(&["a", "b", "c"]).query(&mut con).unwrap();
    assert_eq!(ex, [true, true, true]);
    let e = q(&mut con, &["BF.INFO", "nosuch"]).unwrap_err();
    assert!(e.to_string().contains("not found"), "{e}");
    let e = q(&mut con, &["BF.RESERVE", "x", "0", "10"]).unwrap_err();
    assert!(e.to_string().contains("error rate must be in the range (0.000000, 1.000000)"), "{e}");

    // Cuckoo.
    let _: () = redis::cmd("CF.RESERVE").arg("cf").arg(1000).query(&mut con).unwrap();
    let a: bool = redis::cmd("CF.ADD").arg("cf").arg("a").query(&mut con).unwrap();
    let nx: bool = redis::cmd("CF.ADDNX").arg("cf").arg("a").query(&mut con).unwrap();
    assert!(a && !nx);
    let ins = q(&mut con, &["CF.INSERT", "cf", "ITEMS", "b", "c"]).unwrap();
    if resp3 {
        assert_eq!(ins, Value::Array(vec![Value::Boolean(true), Value::Boolean(true)]));
    } else {
        assert_eq!(ins, Value::Array(vec![Value::Int(1), Value::Int(1)]));
    }
    let insnx = q(&mut con, &["CF.INSERTNX", "cf", "ITEMS", "b", "d"]).unwrap();
    assert_eq!(insnx, Value::Array(vec![Value::Int(0), Value::Int(1)]));
    let count: i64 = redis::cmd("CF.COUNT").arg("cf").arg("a").query(&mut con).unwrap();
    assert_eq!(count, 1);
    let del: bool = redis::cmd("CF.DEL").arg("cf").arg("a").query(&mut con).unwrap();
    assert!(del);
    let exists: bool = redis::cmd("CF.EXISTS").arg("cf").arg("a").query(&mut con).unwrap();
    assert!(!exists);
    let info: std::collections::HashMap<String, i64> =
        redis::cmd("CF.INFO").arg("cf").query(&mut con).unwrap();
    assert_eq!((info["Number of items inserted"], info["Number of items deleted"]), (3, 1));
    let _: () = redis::cmd("CF.COMPACT").arg("cf").query(&mut con).unwrap();
    let debug: String = redis::cmd("CF.DEBUG").arg("cf").query(&mut con).unwrap();
    assert_eq!(debug, "bktsize:2 buckets:512 items:3 deletes:0 filters:1 max_iterations:20 expansion:1");
    let end = q(&mut con, &["CF.SCANDUMP", "empty", "0"]);
    assert!(end.is_err());
    let _: () = redis::cmd("CF.RESERVE").arg("empty").arg(100).query(&mut con).unwrap();
    let end: (i64, Option<Vec<u8>>) = redis::cmd("CF.SCANDUMP").arg("empty").arg(0).query(&mut con).unwrap();
    assert_eq!(end, (0, None));
    let ty: String = redis::cmd("TYPE").arg("cf").query(&mut con).unwrap();
    assert_eq!(ty, "MBbloomCF");
    // A transaction mixing both types.
    let (a, b): (bool, i64) = redis::pipe()
        .atomic()
        .cmd("BF.ADD")
        .arg("bf")
        .arg("tx")
        .cmd("CF.COUNT")
        .arg("cf")
        .arg("b")
        .query(&mut con)
        .unwrap();
    assert_eq!((a, b), (true, 1));
}

pub fn redis_crate_resp2(t: &dyn Target) {
    typical_client_use(t, false);
}

pub fn redis_crate_resp3(t: &dyn Target) {
    typical_client_use(t, true);
}

// ------------------------------------------------------------------------------------------------
// (d) redis-py.

pub fn redis_py_bloom_commands(t: &dyn Target) {
    let have = std::process::Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .is_ok_and(|s| s.success());
    if !have {
        external::missing("python3 with the `redis` module", "pip install redis; scripts/test.sh does it");
        return;
    }
    run_python_client(t, "bloom_client.py", "redis-py OK");
}

/// Runs `tests/py/<script> <port> <2|3>` against a fresh server in both protocols; each run must
/// succeed and print `marker`.
pub fn run_python_client(t: &dyn Target, script: &str, marker: &str) {
    let srv = t.start();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift-server/tests/py").join(script);
    for proto in ["2", "3"] {
        let out = std::process::Command::new("python3")
            .arg(&script)
            .arg(srv.port().to_string())
            .arg(proto)
            .arg(if t.scripting() { "lua" } else { "no-lua" })
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        print!("{stdout}");
        assert!(
            out.status.success() && stdout.contains(marker),
            "{} RESP{proto} failed:\n{stdout}\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A program a test needs: present, or the test fails under CI; elsewhere that part is skipped
/// with a message (see `external`).
pub fn have_program(check: &mut std::process::Command, what: &str) -> bool {
    if check.output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    external::missing(what, "scripts/test.sh installs it");
    false
}

/// The version of module `bf` as clients see it: `MODULE LIST` (RESP2 and RESP3 shapes),
/// `INFO modules` and `HELLO` all report the RedisBloom version the commands reproduce
/// (RedisBloom 2.6.28, the version the spec's fixtures were captured from: 20628), the same on
/// sift-server and on the module; redis-cli shows it, and redis-py's test harness reads the INFO
/// it needs and gates its module tests on that version without skipping or aborting.
pub fn module_version_as_clients_see_it(t: &dyn Target) {
    assert_eq!(sift_commands::REDISBLOOM_VERSION, 20628);
    let srv = t.start();
    let mut c = srv.raw();
    let list = c.cmd(&["MODULE", "LIST"]);
    let head = b"*1\r\n*8\r\n$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20628\r\n$4\r\npath\r\n";
    assert!(
        list.starts_with(head) && list.ends_with(b"$4\r\nargs\r\n*0\r\n"),
        "{}",
        String::from_utf8_lossy(&list)
    );
    let info = c.cmd_text(&["INFO", "modules"]);
    assert!(info.contains("# Modules\r\nmodule:name=bf,ver=20628,api=1,"), "{info}");
    let hello = c.cmd(&["HELLO", "3"]);
    let hello = String::from_utf8_lossy(&hello);
    assert!(
        hello.contains("$7\r\nmodules\r\n*1\r\n%4\r\n$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20628\r\n"),
        "{hello}"
    );
    let list = c.cmd(&["MODULE", "LIST"]);
    assert!(
        list.starts_with(b"*1\r\n%4\r\n$4\r\nname\r\n$2\r\nbf\r\n$3\r\nver\r\n:20628\r\n"),
        "{}",
        String::from_utf8_lossy(&list)
    );

    let port = srv.port().to_string();
    if have_program(std::process::Command::new("redis-cli").arg("--version"), "redis-cli") {
        let out =
            std::process::Command::new("redis-cli").args(["-p", &port, "MODULE", "LIST"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("name\nbf\nver\n20628\npath\n"), "{text}");
        let out =
            std::process::Command::new("redis-cli").args(["-p", &port, "INFO", "modules"]).output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("module:name=bf,ver=20628,"));
    }
    if have_program(
        std::process::Command::new("python3").args(["-c", "import redis"]),
        "redis-py (python3 -m pip install redis)",
    ) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift-server/tests/py/probe_client.py");
        for proto in ["2", "3"] {
            let out = std::process::Command::new("python3")
                .arg(&script)
                .args([&port, proto, "20628"])
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains("redis-py probes OK"),
                "redis-py RESP{proto}:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

// ------------------------------------------------------------------------------------------------
// (e) Absurd inputs.

fn bf_header(nfilters: u32, links: &[(u64, f64, u64)]) -> Vec<u8> {
    // (bytes, error, entries) per link; the other fields made consistent so only size matters.
    let mut h = Vec::new();
    h.extend_from_slice(&0u64.to_le_bytes());
    h.extend_from_slice(&nfilters.to_le_bytes());
    h.extend_from_slice(&5u32.to_le_bytes());
    h.extend_from_slice(&2u32.to_le_bytes());
    for &(bytes, error, entries) in links {
        let bpe = -(error.ln() / 0.480453013918201);
        // RedisBloom's literal for ln 2 (spec §5.3), which the header check compares against.
        #[allow(clippy::approx_constant)]
        let hashes = (0.693147180559945 * bpe).ceil() as u32;
        h.extend_from_slice(&bytes.to_le_bytes());
        h.extend_from_slice(&(bytes * 8).to_le_bytes());
        h.extend_from_slice(&0u64.to_le_bytes());
        h.extend_from_slice(&error.to_le_bytes());
        h.extend_from_slice(&bpe.to_le_bytes());
        h.extend_from_slice(&hashes.to_le_bytes());
        h.extend_from_slice(&entries.to_le_bytes());
        h.push(0);
    }
    h
}

fn cf_header(num_buckets: u64, num_filters: u64, bucket_size: u16, expansion: u16) -> Vec<u8> {
    let mut h = Vec::new();
    for v in [1u64, num_buckets, 0, num_filters] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    for v in [bucket_size, 20, expansion] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    h
}

pub fn absurd_inputs_get_exact_errors_and_the_server_stays_up(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    let e = |s: &str| format!("-{s}\r\n").into_bytes();
    let cases: &[(&[&str], &str)] = &[
        (&["BF.RESERVE", "k", "0.01", "1099511627776"], "ERR capacity must be in the range [1, 1073741824]"),
        (
            &["BF.RESERVE", "k", "0.01", "9223372036854775807"],
            "ERR capacity must be in the range [1, 1073741824]",
        ),
        (&["BF.RESERVE", "k", "0", "100"], "ERR error rate must be in the range (0.000000, 1.000000)"),
        (&["BF.RESERVE", "k", "NaN", "100"], "ERR bad error rate"),
        (&["BF.RESERVE", "k", "inf", "100"], "ERR error rate must be in the range (0.000000, 1.000000)"),
        (&["BF.RESERVE", "k", "-inf", "100"], "ERR error rate must be in the range (0.000000, 1.000000)"),
        (&["BF.RESERVE", "k", "1.5", "100"], "ERR error rate must be in the range (0.000000, 1.000000)"),
        (&["BF.RESERVE", "k", "1e-400", "100"], "ERR error rate must be in the range (0.000000, 1.000000)"),
        (&["BF.RESERVE", "k", "0x1p-7", "100"], "ERR bad error rate"),
        (
            &["BF.RESERVE", "k", "0.01", "100", "EXPANSION", "4294967297"],
            "ERR expansion must be in the range [0, 32768]",
        ),
        // 2^30 items at 1e-300 would be 193 GB: refused before allocating.
        (&["BF.RESERVE", "k", "1e-300", "1073741824"], "ERR Insufficient memory to create filter"),
        (&["BF.INSERT", "k", "ERROR", "nan", "ITEMS", "a"], "Bad error rate"),
        (&["BF.INSERT", "k", "ERROR", "inf", "ITEMS", "a"], "Bad error rate"),
        (&["BF.INSERT", "k", "ERROR", "0", "ITEMS", "a"], "Bad error rate"),
        (&["BF.INSERT", "k", "CAPACITY", "1099511627776", "ITEMS", "a"], "Bad capacity"),
        (
            &["BF.INSERT", "k", "ERROR", "1e-300", "CAPACITY", "1073741824", "ITEMS", "a"],
            "ERR Insufficient memory to create filter",
        ),
        (&["CF.RESERVE", "k", "1099511627776"], "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]"),
        (
            &["CF.RESERVE", "k", "-9223372036854775808"],
            "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]",
        ),
        (
            &["CF.RESERVE", "k", "100", "BUCKETSIZE", "65536"],
            "BUCKETSIZE: value must be in the range [1, 255]",
        ),
        (&["CF.RESERVE", "k", "100", "x", "EXPANSION"], "Couldn't parse EXPANSION"),
        (
            &["CF.INSERT", "k", "CAPACITY", "1099511627776", "ITEMS", "a"],
            "Capacity must be in the range [cf-bucket-size * 2, 1073741824]",
        ),
        (&["CF.SCANDUMP", "k", "-9223372036854775808"], "Invalid position"),
    ];
    for (args, err) in cases {
        assert_eq!(show(&c.cmd(args)), show(&e(err)), "{args:?}");
    }
    assert_eq!(c.cmd(&["EXISTS", "k"]), b":0\r\n", "no failed command created the key");

    // Headers that declare absurd sizes are refused without allocating.
    let huge = bf_header(1, &[(1 << 40, 0.01, 1 << 40)]);
    assert_eq!(
        show(&c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"h", b"1", &huge])),
        show(&e("ERR received bad data"))
    );
    let many = bf_header(3, &[(1 << 31, 0.01, 1), (1 << 31, 0.01, 1), (1 << 31, 0.01, 1)]);
    assert_eq!(
        show(&c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"h", b"1", &many])),
        show(&e("ERR received bad data"))
    );
    let cf = cf_header(1 << 50, 1, 255, 1);
    assert_eq!(
        show(&c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"h", b"1", &cf])),
        show(&e("Couldn't create filter!"))
    );
    let cf = cf_header(1 << 20, 65535, 255, 32768);
    assert_eq!(
        show(&c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"h", b"1", &cf])),
        show(&e("Couldn't create filter!"))
    );
    assert_eq!(c.cmd(&["EXISTS", "h"]), b":0\r\n");

    // Huge data chunks: refused by the link / sub-filter bounds.
    assert_eq!(c.cmd(&["BF.RESERVE", "small", "0.1", "10"]), b"+OK\r\n");
    let big = vec![0xffu8; 20 << 20];
    let it = (big.len() + 1).to_string();
    assert_eq!(
        show(&c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"small", it.as_bytes(), &big])),
        show(&e("ERR invalid chunk - Too big for current filter"))
    );
    assert_eq!(
        show(&c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"small", b"5", &big])),
        show(&e("ERR received bad data"))
    );
    assert_eq!(c.cmd(&["CF.RESERVE", "csmall", "4"]), b"+OK\r\n");
    assert_eq!(
        show(&c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"csmall", it.as_bytes(), &big])),
        show(&e("Couldn't load chunk!"))
    );
    assert_eq!(
        show(&c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"csmall", b"9223372036854775807", b"x"])),
        show(&e("Couldn't load chunk!"))
    );

    // Wrong iterator order: data before the header, the header twice.
    assert_eq!(c.cmd(&["BF.LOADCHUNK", "w", "9", "x"]), e("ERR not found"));
    assert_eq!(c.cmd(&["CF.LOADCHUNK", "w", "5", "x"]), e("ERR not found"));
    assert_eq!(c.cmd(&["BF.RESERVE", "src", "0.01", "10", "EXPANSION", "1"]), b"+OK\r\n");
    for i in 0..40 {
        c.cmd(&["BF.ADD", "src", &format!("i{i}")]);
    }
    let mut chunks = Vec::new();
    let mut it = 0i64;
    loop {
        let r = c.cmd(&["BF.SCANDUMP", "src", &it.to_string()]);
        let (next, data) = parse_pair(&r);
        if next == 0 {
            break;
        }
        chunks.push((next, data));
        it = next;
    }
    assert!(chunks.len() > 3, "several links: {}", chunks.len());
    let header = chunks[0].1.clone();
    // Data chunks may arrive in any order after the header (spec §7.1).
    assert_eq!(c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"dst", b"1", &header]), b"+OK\r\n");
    assert_eq!(c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"dst", b"1", &header]), e("ERR received bad data"));
    for (it, data) in chunks[1..].iter().rev() {
        assert_eq!(
            c.cmd_bytes(&[
                b"BF.LOADCHUNK".to_vec(),
                b"dst".to_vec(),
                it.to_string().into_bytes(),
                data.clone()
            ]),
            b"+OK\r\n"
        );
    }
    assert_eq!(c.cmd(&["BF.DEBUG", "dst"]), c.cmd(&["BF.DEBUG", "src"]));
    assert_eq!(c.cmd(&["BF.EXISTS", "dst", "i7"]), b":1\r\n");
    // A data chunk for the wrong iterator: lands at the wrong offset or is refused, never a crash.
    let (it1, d1) = &chunks[1];
    let shifted = (it1 + 1).to_string();
    assert_eq!(
        c.cmd_bytes(&[b"BF.LOADCHUNK".to_vec(), b"dst".to_vec(), shifted.into_bytes(), d1.clone()]),
        e("ERR invalid chunk - Too big for current filter")
    );

    // The cuckoo header sent twice, and chunks to a Bloom key.
    assert_eq!(c.cmd(&["CF.RESERVE", "csrc", "64", "EXPANSION", "2"]), b"+OK\r\n");
    c.cmd(&["CF.INSERT", "csrc", "ITEMS", "a", "b", "c"]);
    let (_, cfh) = parse_pair(&c.cmd(&["CF.SCANDUMP", "csrc", "0"]));
    assert_eq!(c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"cdst", b"1", &cfh]), b"+OK\r\n");
    assert_eq!(c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"cdst", b"1", &cfh]), e("ERR item exists"));
    assert_eq!(c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"src", b"1", &cfh]), e(common_wrongtype()));
    assert_eq!(c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"cdst", b"1", &header]), e(common_wrongtype()));

    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    // Nothing above allocated a large filter: the server stayed small (20 MB chunks were sent).
    if let Some(kb) = srv.peak_rss_kb() {
        assert!(kb < 512 * 1024, "peak RSS {kb} kB");
    }
}

fn common_wrongtype() -> &'static str {
    "WRONGTYPE Operation against a key holding the wrong kind of value"
}

/// Parses `*2 :<n> $<len> <data>` (a SCANDUMP reply) into (n, data).
fn parse_pair(r: &[u8]) -> (i64, Vec<u8>) {
    let text = String::from_utf8_lossy(r);
    assert!(text.starts_with("*2\r\n:"), "{}", show(r));
    let rest = &r[5..];
    let nl = rest.iter().position(|&b| b == b'\r').unwrap();
    let n: i64 = std::str::from_utf8(&rest[..nl]).unwrap().parse().unwrap();
    let rest = &rest[nl + 2..];
    if rest.starts_with(b"$-1") || rest.starts_with(b"_") {
        return (n, vec![]);
    }
    let nl = rest.iter().position(|&b| b == b'\r').unwrap();
    let len: usize = std::str::from_utf8(&rest[1..nl]).unwrap().parse().unwrap();
    (n, rest[nl + 2..nl + 2 + len].to_vec())
}

pub fn maxmemory_bounds_loadchunk_and_creation(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    // The per-filter budget is `maxmemory` (k MiB); sizes below scale with it. A real Redis
    // needs room for itself under `maxmemory`, so its target uses a larger k.
    let k = t.memory_scale();
    let maxmemory = format!("{k}mb");
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &maxmemory]), b"+OK\r\n");
    let two_mb = bf_header(1, &[((2 * k) << 20, 0.01, 1_000_000 * k)]);
    assert_eq!(c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"a", b"1", &two_mb]), b"-ERR received bad data\r\n");
    let half_mb = bf_header(1, &[((k << 20) / 2, 0.01, 400_000 * k)]);
    assert_eq!(c.cmd_bytes(&[&b"BF.LOADCHUNK"[..], b"a", b"1", &half_mb]), b"+OK\r\n");
    let cf = cf_header((1 << 20) * k, 1, 2, 1);
    assert_eq!(c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"b", b"1", &cf]), b"-Couldn't create filter!\r\n");
    assert_eq!(
        c.cmd(&["BF.RESERVE", "c", "0.001", "10000000"]),
        b"-ERR Insufficient memory to create filter\r\n"
    );
    assert_eq!(c.cmd(&["CF.RESERVE", "c", "10000000"]), b"-ERR Insufficient memory to create filter\r\n");
    assert_eq!(c.cmd(&["BF.RESERVE", "c", "0.001", "1000"]), b"+OK\r\n");
    // Growth has the same bound: a link or sub-filter beyond the budget is refused with the
    // failed-growth replies, and the filter keeps working.
    // 1000 items, then a link of 32768000 items (over 20 MB): more than any k's budget.
    assert_eq!(c.cmd(&["BF.RESERVE", "g", "0.01", "1000", "EXPANSION", "32768"]), b"+OK\r\n");
    let mut full = 0;
    for i in 0..100_000 {
        let r = c.cmd(&["BF.ADD", "g", &format!("i{i}")]);
        if r == b"-ERR problem inserting into filter\r\n" {
            full += 1;
            break;
        }
        assert!(r == b":1\r\n" || r == b":0\r\n", "{}", show(&r));
    }
    assert_eq!(full, 1, "the chain could not grow past the budget");
    assert_eq!(c.cmd(&["BF.INFO", "g", "FILTERS"]), b"*1\r\n:1\r\n");
    assert_eq!(c.cmd(&["BF.EXISTS", "g", "i0"]), b":1\r\n");
    assert_eq!(c.cmd(&["CF.RESERVE", "cg", "1000", "BUCKETSIZE", "1", "EXPANSION", "32768"]), b"+OK\r\n");
    let mut refused = false;
    for i in 0..1_000_000 {
        let r = c.cmd(&["CF.ADD", "cg", &format!("i{i}")]);
        if r == b"-ERR Insufficient memory\r\n" {
            refused = true;
            break;
        }
        assert_eq!(r, b":1\r\n", "{}", show(&r));
    }
    assert!(refused, "the cuckoo filter could not grow past the budget");
    assert_eq!(c.cmd(&["CF.EXISTS", "cg", "i0"]), b":1\r\n");
    // The cuckoo header bound follows cf-bucket-size's moving upper bound (spec §3).
    let cf_initial = t.config_name("cf-initial-size");
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0", &cf_initial, "20"]), b"+OK\r\n");
    assert_eq!(
        c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"d", b"1", &cf_header(8, 1, 11, 1)]),
        b"-Couldn't create filter!\r\n"
    );
    assert_eq!(c.cmd_bytes(&[&b"CF.LOADCHUNK"[..], b"d", b"1", &cf_header(8, 1, 10, 1)]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["CF.RESERVE", "e", "100", "BUCKETSIZE", "11"]),
        b"-BUCKETSIZE: value must be in the range [1, 10]\r\n"
    );
}

/// `CONFIG SET` of filter parameters, under the target's names.
fn config_set(t: &dyn Target, c: &mut Raw, pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut args = vec!["CONFIG".to_string(), "SET".to_string()];
    for (n, v) in pairs {
        args.push(t.config_name(n));
        args.push(v.to_string());
    }
    c.cmd_bytes(&args)
}

pub fn configured_defaults_drive_auto_create(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    assert_eq!(
        config_set(
            t,
            &mut c,
            &[("bf-error-rate", "0.001"), ("bf-initial-size", "500"), ("bf-expansion-factor", "0")]
        ),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["BF.ADD", "b", "x"]), b":1\r\n");
    assert_eq!(
        show(&c.cmd(&["BF.DEBUG", "b"])),
        show(b"*2\r\n$6\r\nsize:1\r\n$74\r\nbytes:904 bits:7232 hashes:10 hashwidth:64 capacity:500 size:1 ratio:0.001\r\n")
    );
    assert_eq!(c.cmd(&["BF.INFO", "b", "EXPANSION"]), b"*1\r\n$-1\r\n");
    // bf-expansion-factor 0: BF.RESERVE is non-scaling by default and refuses EXPANSION 2.
    assert_eq!(
        c.cmd(&["BF.RESERVE", "r", "0.01", "10", "EXPANSION", "2"]),
        b"-Nonscaling filters cannot expand\r\n"
    );
    assert_eq!(
        config_set(
            t,
            &mut c,
            &[
                ("cf-bucket-size", "4"),
                ("cf-initial-size", "64"),
                ("cf-max-iterations", "7"),
                ("cf-expansion-factor", "3")
            ]
        ),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["CF.ADD", "c", "x"]), b":1\r\n");
    assert_eq!(
        show(&c.cmd(&["CF.DEBUG", "c"])),
        show(b"$77\r\nbktsize:4 buckets:16 items:1 deletes:0 filters:1 max_iterations:7 expansion:4\r\n")
    );
    // CF.INSERT CAPACITY's lower bound is 2 x cf-bucket-size now.
    assert_eq!(
        c.cmd(&["CF.INSERT", "d", "CAPACITY", "7", "ITEMS", "a"]),
        b"-Capacity must be in the range [cf-bucket-size * 2, 1073741824]\r\n"
    );
    assert_eq!(c.cmd(&["CF.INSERT", "d", "CAPACITY", "8", "ITEMS", "a"]), b"*1\r\n:1\r\n");
    // cf-max-expansions 1: every insert into any filter is refused, even right after creating it.
    assert_eq!(config_set(t, &mut c, &[("cf-max-expansions", "1")]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CF.ADD", "new", "x"]), b"-Maximum expansions reached\r\n");
    assert_eq!(c.cmd(&["TYPE", "new"]), b"+MBbloomCF\r\n");
    assert_eq!(c.cmd(&["CF.INSERTNX", "c", "ITEMS", "x"]), b"-Maximum expansions reached\r\n");
}

/// `COMMAND INFO` of every BF/CF command names it, reports its registered arity (spec §2.3;
/// CF.COMPACT registers none: -1) and its one key at position 1, and `COMMAND GETKEYS` finds
/// that key: what cluster clients and proxies read to route a command.
pub fn command_info_reports_arity_and_key(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    for cmd in sift_commands::COMMANDS.iter() {
        let arity = if cmd.arity == 0 { -1 } else { cmd.arity };
        let reply = c.cmd(&["COMMAND", "INFO", cmd.name]);
        let head = format!("*1\r\n*10\r\n${}\r\n{}\r\n:{arity}\r\n", cmd.name.len(), cmd.name);
        assert!(reply.starts_with(head.as_bytes()), "{}: {}", cmd.name, String::from_utf8_lossy(&reply));
        // First key, last key, step: after the flags array.
        let text = String::from_utf8_lossy(&reply).into_owned();
        assert!(text.contains("\r\n:1\r\n:1\r\n:1\r\n"), "{}: key positions in {text}", cmd.name);
        // A request of the smallest accepted size: its key is argv[1].
        let n = if cmd.arity == 0 { 2 } else { cmd.arity.unsigned_abs() as usize };
        let mut args: Vec<&str> = vec!["COMMAND", "GETKEYS", cmd.name, "thekey"];
        args.extend(std::iter::repeat_n("x", n.saturating_sub(2)));
        assert_eq!(c.cmd(&args), b"*1\r\n$6\r\nthekey\r\n", "{}", cmd.name);
    }
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "bf.add", "k"]),
        b"-ERR Invalid number of arguments specified for command\r\n"
    );
    assert_eq!(c.cmd(&["COMMAND", "GETKEYS", "bf.nosuch", "k"]), b"-ERR Invalid command specified\r\n");
}
