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
    assert_eq!(c.cmd(&["PING"]), if proto == 3 { b"+PONG\r\n".to_vec() } else { b"+PONG\r\n".to_vec() });
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
