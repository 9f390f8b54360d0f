//! The Count-Min Sketch, Top-K and t-digest part of the suite: the golden transcript of
//! RedisBloom's `CMS.*`, `TOPK.*` and `TDIGEST.*` (`redisbloom-sketches.md` §11, 844 lines,
//! captured from RedisBloom 2.6.28 on Redis 7.0.15) replayed over the wire on one connection,
//! every reply compared byte for byte in RESP2 and RESP3.
//!
//! What a target answers is the current RedisBloom reply (`differs_in_current` where a line has
//! one: TDIGEST.INFO's `Memory usage`, current Redis's double parsing), with its doubles printed
//! the way the server prints doubles ([`Doubles`]): sift-server like Redis ≥ 7.2 (`d2string`),
//! redis-server 7.0 with the module like Redis 7.0 (`%.17g`, the recorded bytes). The 6 lines
//! whose reply depends on `rand()` (spec §6.6) are checked for their shape only.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value as J;

use super::{Raw, Target};

/// How a server prints a double reply (spec §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doubles {
    /// Redis 7.0: `%.17g`.
    Redis70,
    /// Redis ≥ 7.2 and sift-server: `d2string`.
    Current,
}

/// The spec's sketch fixtures (a copy in the library's tests).
pub fn sketch_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift/tests/fixtures/redisbloom/sketches")
}

pub fn transcript() -> Vec<J> {
    std::fs::read_to_string(sketch_fixtures().join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).expect("valid base64 in a fixture")
}

pub fn args_of(cmd: &J) -> Vec<Vec<u8>> {
    cmd.as_array()
        .expect("a command is a list")
        .iter()
        .map(|v| match v {
            J::String(s) => s.as_bytes().to_vec(),
            J::Object(o) if o.contains_key("b64") => b64(o["b64"].as_str().unwrap()),
            J::Number(n) => n.to_string().into_bytes(),
            other => panic!("not an argument: {other}"),
        })
        .collect()
}

fn latin1(s: &str) -> Vec<u8> {
    s.chars().map(|c| u8::try_from(c as u32).expect("a byte per char")).collect()
}

pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).escape_debug().to_string()
}

/// Encodes a decoded RESP3 fixture reply (fixture README conventions) for `proto`: top-level
/// strings are status replies, nested ones bulk strings, map keys (INFO field names) status
/// replies; RESP2 gets Redis's downgrades (maps flat, booleans 1/0, doubles as bulk strings).
pub fn encode(v: &J, proto: u8) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(&mut out, v, proto, true);
    out
}

fn encode_into(out: &mut Vec<u8>, v: &J, proto: u8, simple: bool) {
    let bulk = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
        out.extend_from_slice(b);
        out.extend_from_slice(b"\r\n");
    };
    let resp3 = proto >= 3;
    match v {
        J::Null if resp3 => out.extend_from_slice(b"_\r\n"),
        J::Null => out.extend_from_slice(b"$-1\r\n"),
        J::Bool(b) if resp3 => out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
        J::Bool(b) => out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" }),
        J::Number(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
        J::String(s) if simple => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
        J::String(s) => bulk(out, s.as_bytes()),
        J::Array(items) => {
            out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
            for item in items {
                encode_into(out, item, proto, false);
            }
        }
        J::Object(o) if o.contains_key("error") => {
            out.extend_from_slice(format!("-{}\r\n", o["error"].as_str().unwrap()).as_bytes())
        }
        J::Object(o) if o.contains_key("b64") => bulk(out, &b64(o["b64"].as_str().unwrap())),
        J::Object(o) if o.contains_key("double") => {
            let t = o["double"].as_str().unwrap();
            if resp3 {
                out.extend_from_slice(format!(",{t}\r\n").as_bytes());
            } else {
                bulk(out, t.as_bytes());
            }
        }
        J::Object(o) if o.contains_key("map") => {
            let pairs = o["map"].as_array().unwrap();
            let head =
                if resp3 { format!("%{}\r\n", pairs.len()) } else { format!("*{}\r\n", 2 * pairs.len()) };
            out.extend_from_slice(head.as_bytes());
            for pair in pairs {
                encode_into(out, &pair[0], proto, true);
                encode_into(out, &pair[1], proto, false);
            }
        }
        other => panic!("unknown fixture value {other}"),
    }
}

/// The current reply in RESP3 (spec §11: `differs_in_current_resp3`, else the RESP2 one when it
/// is an error, else the recorded one).
fn current3(line: &J) -> J {
    match line.get("differs_in_current") {
        None => line["resp3"].clone(),
        Some(cur) => line.get("differs_in_current_resp3").unwrap_or(cur).clone(),
    }
}

/// `cur` with the doubles of `old` where both have a double at the same place: the current reply
/// as Redis 7.0 prints it (only double texts changed between the two where both have doubles).
fn with_old_doubles(old: &J, cur: &J) -> J {
    match (old, cur) {
        (J::Object(o), J::Object(c)) if o.contains_key("double") && c.contains_key("double") => old.clone(),
        (J::Array(a), J::Array(b)) if a.len() == b.len() => {
            J::Array(a.iter().zip(b).map(|(x, y)| with_old_doubles(x, y)).collect())
        }
        (J::Object(o), J::Object(c)) if o.contains_key("map") && c.contains_key("map") => {
            let (a, b) = (o["map"].as_array().unwrap(), c["map"].as_array().unwrap());
            if a.len() != b.len() {
                return cur.clone();
            }
            let pairs =
                a.iter().zip(b).map(|(x, y)| J::Array(vec![y[0].clone(), with_old_doubles(&x[1], &y[1])]));
            serde_json::json!({ "map": pairs.collect::<Vec<_>>() })
        }
        _ => cur.clone(),
    }
}

/// What `line` must answer on a server printing doubles as `doubles`, in RESP3 form.
pub fn expected3(line: &J, doubles: Doubles) -> J {
    let cur = current3(line);
    match doubles {
        Doubles::Current => cur,
        Doubles::Redis70 => with_old_doubles(&line["resp3"], &cur),
    }
}

fn hello3(c: &mut Raw) {
    let r = c.cmd(&["HELLO", "3"]);
    assert_eq!(r[0], b'%', "{}", show(&r));
}

/// The reply's type byte and, for an aggregate, its element count (the shape of a random line).
fn shape(r: &[u8]) -> (u8, String) {
    let end = r.iter().position(|&b| b == b'\r').unwrap_or(r.len());
    let head = String::from_utf8_lossy(&r[1..end]).into_owned();
    (r[0], if matches!(r[0], b'*' | b'%' | b'~') { head } else { String::new() })
}

/// Replays the transcript in `proto`; returns (lines compared byte for byte, failures).
pub fn replay(t: &dyn Target, proto: u8, doubles: Doubles) -> (usize, Vec<String>) {
    let srv = t.start();
    let mut c = srv.raw();
    if proto == 3 {
        hello3(&mut c);
    }
    let mut failures = Vec::new();
    let mut compared = 0;
    for (n, line) in transcript().iter().enumerate() {
        let wire_field = if proto == 2 { "resp2_wire" } else { "resp3_wire" };
        let recorded = latin1(line[wire_field].as_str().unwrap());
        if line.get("differs_in_current").is_none() && line["random"] != true {
            // The encoder reproduces the recorded bytes, so what it builds for the current replies
            // is trustworthy.
            assert_eq!(
                show(&encode(&line["resp3"], proto)),
                show(&recorded),
                "encoder self-check on line {}",
                n + 1
            );
        }
        let got = c.cmd_bytes(&args_of(&line["cmd"]));
        let expected = if line["random"] == true {
            if shape(&got) != shape(&recorded) {
                failures.push(format!(
                    "line {} (random) {}: shape of {} vs {}",
                    n + 1,
                    line["cmd"],
                    show(&got),
                    show(&recorded)
                ));
            }
            continue;
        } else {
            encode(&expected3(line, doubles), proto)
        };
        compared += 1;
        if got != expected {
            let cmd = line["cmd"].to_string();
            let cmd = if cmd.len() > 200 { format!("{}...", &cmd[..200]) } else { cmd };
            failures.push(format!("line {} {cmd}: expected {} got {}", n + 1, show(&expected), show(&got)));
        }
    }
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "the connection is still usable");
    (compared, failures)
}

/// The whole transcript, byte for byte, in `proto`.
pub fn sketch_transcript_byte_exact(t: &dyn Target, proto: u8, doubles: Doubles) {
    let (compared, failures) = replay(t, proto, doubles);
    println!("sketch transcript RESP{proto}: {compared}/838 deterministic lines compared");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures[..failures.len().min(40)].join("\n")
    );
    assert_eq!(compared, 838);
}

/// redis-py's `r.cms()`, `r.topk()` and `r.tdigest()` helpers in RESP2 and RESP3
/// (`tests/py/sketch_client.py`).
pub fn redis_py_sketch_commands(t: &dyn Target) {
    let mut check = std::process::Command::new("python3");
    check.args(["-c", "import redis"]);
    if !super::have_program(&mut check, "python3 with redis-py") {
        return;
    }
    super::run_python_client(t, "sketch_client.py", "redis-py sketches OK");
}

/// Absurd sizes are refused with RedisBloom's errors before anything is allocated (with and
/// without `maxmemory`), bad numbers with theirs, and the server stays up with its memory low.
pub fn absurd_sketch_inputs_are_refused(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    let cases: &[(&[&str], &str)] = &[
        (
            &["CMS.INITBYDIM", "a", "4611686018427387904", "1"],
            "-CMS: Insufficient memory to create the key\r\n",
        ),
        (&["CMS.INITBYDIM", "a", "1000000000", "1000"], "-CMS: Insufficient memory to create the key\r\n"),
        (&["CMS.INITBYDIM", "a", "9223372036854775807", "2"], "-CMS: invalid init arguments\r\n"),
        (&["CMS.INITBYPROB", "a", "1e-300", "0.5"], "-CMS: invalid init arguments\r\n"),
        (&["CMS.INITBYPROB", "a", "nan", "0.5"], "-CMS: invalid overestimation value\r\n"),
        (&["CMS.INITBYPROB", "a", "0.1", "inf"], "-CMS: invalid prob value\r\n"),
        (
            &["TOPK.RESERVE", "a", "4294967295", "4294967295", "4294967295", "0.9"],
            "-ERR Insufficient memory to create topk data structure\r\n",
        ),
        (&["TOPK.RESERVE", "a", "4294967296"], "-TopK: invalid k\r\n"),
        (
            &["TOPK.RESERVE", "a", "10", "10", "10", "nan"],
            "-TopK: invalid decay value. must be '<= 1' & '> 0'\r\n",
        ),
        (
            &["TDIGEST.CREATE", "a", "COMPRESSION", "9223372036854775807"],
            "-ERR T-Digest: allocation failed\r\n",
        ),
        (&["TDIGEST.CREATE", "a", "COMPRESSION", "357913940"], "-ERR T-Digest: allocation failed\r\n"),
        (
            &["TDIGEST.CREATE", "a", "COMPRESSION", "0"],
            "-ERR T-Digest: compression parameter needs to be a positive integer\r\n",
        ),
    ];
    for maxmemory in ["0", "64mb"] {
        c.cmd(&["CONFIG", "SET", "maxmemory", maxmemory]);
        for (args, want) in cases {
            assert_eq!(show(&c.cmd(args)), show(want.as_bytes()), "{args:?} with maxmemory {maxmemory}");
        }
        assert_eq!(c.cmd(&["EXISTS", "a"]), b":0\r\n");
    }
    // Within maxmemory: a sketch of 128 MiB of counters is refused under a 64 MiB limit.
    assert_eq!(
        show(&c.cmd(&["CMS.INITBYDIM", "a", "33554432", "1"])),
        show(b"-CMS: Insufficient memory to create the key\r\n")
    );
    assert_eq!(
        show(&c.cmd(&["TDIGEST.CREATE", "d", "COMPRESSION", "10000000"])),
        show(b"-ERR T-Digest: allocation failed\r\n")
    );
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(c.cmd(&["CMS.INITBYDIM", "a", "1000", "5"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["TDIGEST.CREATE", "d"]), b"+OK\r\n");
    for bad in ["nan", "inf", "-inf", "1e400", "0x10", ""] {
        let r = c.cmd(&["TDIGEST.ADD", "d", "1", bad]);
        assert!(r.starts_with(b"-ERR T-Digest: "), "{bad}: {}", show(&r));
    }
    // Every value is checked before any is added.
    let info = show(&c.cmd(&["TDIGEST.INFO", "d"]));
    assert!(info.contains(&show(b"+Observations\r\n:0\r\n")), "{info}");
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    if let Some(kb) = srv.peak_rss_kb() {
        assert!(kb < 512 * 1024, "peak RSS {kb} kB: something was allocated");
    }
}

pub fn keys_json() -> J {
    serde_json::from_str(&std::fs::read_to_string(sketch_fixtures().join("rdb/keys.json")).unwrap()).unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// A Redis 7.0 double text as `doubles` prints the same value.
fn redouble(text: &str, doubles: Doubles) -> String {
    use sift::compat::redisbloom::{format_double, DoubleFormat};
    let v = match text {
        "nan" | "-nan" => f64::NAN,
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        t => t.parse().unwrap(),
    };
    match doubles {
        Doubles::Redis70 => text.to_string(),
        Doubles::Current => format_double(v, DoubleFormat::D2String),
    }
}

/// The RESP2 bytes a recorded after-load reply (`keys.json`, 2.6.28 on Redis 7.0) is on a current
/// server printing doubles as `doubles`: TDIGEST.INFO's `Memory usage` is `80 + 16·capacity`
/// (spec §9) and double texts are re-rendered.
fn after_load_wire(cmd: &J, reply: &J, doubles: Doubles) -> Vec<u8> {
    let name = cmd[0].as_str().unwrap().to_ascii_uppercase();
    let mut reply = reply.clone();
    let info = name.ends_with(".INFO");
    if let J::Array(items) = &mut reply {
        if name == "TDIGEST.INFO" {
            let cap = items[3].as_i64().unwrap();
            items[17] = J::from(80 + 16 * cap);
        } else if name == "TOPK.INFO" {
            items[7] = J::from(redouble(items[7].as_str().unwrap(), doubles));
        } else if name.starts_with("TDIGEST.") {
            for v in items.iter_mut().filter(|v| v.is_string()) {
                *v = J::from(redouble(v.as_str().unwrap(), doubles));
            }
        }
    }
    if let J::String(s) = &reply {
        if name.starts_with("TDIGEST.") && s != "OK" {
            // A single double (MIN, MAX, TRIMMED_MEAN): a bulk string in RESP2.
            return super::wire(&J::from(redouble(s, doubles)), 2, super::Str::Bulk, false);
        }
    }
    super::wire(&reply, 2, super::top_kind(&reply), info)
}

/// Checks every recorded after-load reply of `keys.json` on keys named `rename(key)`; returns the
/// problems.
pub fn check_after_load(c: &mut Raw, doubles: Doubles, rename: &dyn Fn(&str) -> String) -> Vec<String> {
    let k = keys_json();
    let mut problems = Vec::new();
    let mut check = |cmd: &J, reply: &J| {
        let mut args = args_of(cmd);
        let key = String::from_utf8(args[1].clone()).unwrap();
        args[1] = rename(&key).into_bytes();
        let got = c.cmd_bytes(&args);
        let want = after_load_wire(cmd, reply, doubles);
        if got != want {
            problems.push(format!("{cmd} on {}: expected {} got {}", rename(&key), show(&want), show(&got)));
        }
    };
    for v in k["keys"].as_object().unwrap().values() {
        for step in v["after_load_resp2"].as_array().unwrap() {
            check(&step["cmd"], &step["reply"]);
        }
    }
    for step in k["after_load_followups"].as_array().unwrap() {
        check(&step["cmd"], &step["reply"]);
    }
    problems
}

/// Each golden DUMP payload of `keys.json` (RedisBloom 2.6.28's) RESTOREs and answers as
/// recorded after a load; each restored key DUMPs to a payload that RESTOREs to a key answering
/// the same, and TYPE names the RedisBloom type.
pub fn golden_sketch_payloads_restore(t: &dyn Target, doubles: Doubles) {
    let srv = t.start();
    let mut c = srv.raw();
    let k = keys_json();
    for (name, v) in k["keys"].as_object().unwrap() {
        let payload = unhex(v["dump_hex"].as_str().unwrap());
        let r = c.cmd_bytes(&[&b"RESTORE"[..], name.as_bytes(), b"0", &payload]);
        assert_eq!(show(&r), "+OK\\r\\n", "{name}");
        let ty = c.cmd(&["TYPE", name]);
        assert_eq!(show(&ty), show(format!("+{}\r\n", v["type"].as_str().unwrap()).as_bytes()), "{name}");
    }
    // Dump every key before any follow-up changes it, then restore the copies.
    let names: Vec<String> = k["keys"].as_object().unwrap().keys().cloned().collect();
    for name in &names {
        let dump = c.cmd(&["DUMP", name]);
        assert_eq!(dump[0], b'$', "{name}");
        let start = dump.iter().position(|&b| b == b'\n').unwrap() + 1;
        let payload = &dump[start..dump.len() - 2];
        let copy = format!("{name}:copy");
        assert_eq!(c.cmd_bytes(&[&b"RESTORE"[..], copy.as_bytes(), b"0", payload]), b"+OK\r\n", "{name}");
        assert_eq!(
            show(&c.cmd_bytes(&[&b"RESTORE"[..], copy.as_bytes(), b"0", payload])),
            show(b"-BUSYKEY Target key name already exists.\r\n")
        );
    }
    let mut problems = check_after_load(&mut c, doubles, &|k| k.to_string());
    problems.extend(check_after_load(&mut c, doubles, &|k| format!("{k}:copy")));
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n"));
    // A payload whose checksum is wrong, and one that is not a value.
    let mut bad = unhex(k["keys"]["cms_dim"]["dump_hex"].as_str().unwrap());
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert_eq!(
        show(&c.cmd_bytes(&[&b"RESTORE"[..], b"x", b"0", &bad])),
        show(b"-ERR DUMP payload version or checksum are wrong\r\n")
    );
}

/// Saving compresses the live t-digest first, as RedisBloom does (sketches spec §7.4, §10.5):
/// after `DUMP` and after `SAVE`, `TDIGEST.INFO` shows the buffered observations merged and one
/// compression more, and the answers that follow are those of the compressed digest.
pub fn saving_compresses_the_live_digest(t: &dyn Target) {
    let srv = t.start();
    let mut c = srv.raw();
    let info = |c: &mut Raw, key: &str| String::from_utf8_lossy(&c.cmd(&["TDIGEST.INFO", key])).into_owned();
    for (key, save) in [("by-dump", &["DUMP", "by-dump"][..]), ("by-save", &["SAVE"][..])] {
        assert_eq!(c.cmd(&["TDIGEST.CREATE", key, "COMPRESSION", "100"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["TDIGEST.ADD", key, "1", "2", "3"]), b"+OK\r\n");
        let before = info(&mut c, key);
        assert!(
            before.contains("Unmerged nodes\r\n:3\r\n") && before.contains("Total compressions\r\n:0\r\n"),
            "{before}"
        );
        assert_ne!(c.cmd(save)[0], b'-', "{save:?}");
        let after = info(&mut c, key);
        assert!(
            after.contains("Merged nodes\r\n:3\r\n")
                && after.contains("Unmerged nodes\r\n:0\r\n")
                && after.contains("Total compressions\r\n:1\r\n"),
            "{save:?} did not compress the live digest: {after}"
        );
    }
}
