//! The golden files of RedisBloom's Count-Min Sketch, Top-K and t-digest (spec
//! `redisbloom-sketches.md`, captured from RedisBloom 2.6.28 on Redis 7.0.15), checked against
//! `sift::compat::redisbloom`:
//!
//! * `transcript.jsonl`: every line replayed through a small test-only interpreter
//!   (`sketch_fixtures/interp.rs`) over the library's structures, every reply compared with the
//!   recorded one in RESP2 and RESP3, as Redis 7.0 printed it and as current Redis does;
//! * every double text of the fixtures printed by [`format_double`] in both styles;
//! * `rdb/dump.rdb` and the `DUMP` payloads of `rdb/keys.json`: every key decoded, its fields
//!   compared with the recorded decoding, re-encoded and compared byte for byte (after expanding
//!   RedisBloom's LZF strings and ignoring the Top-K heap's pointer bytes), the replies after a
//!   load, and the setup commands replayed to the same state;
//! * `rdb/aof_rewrite.json`: the `RESTORE` commands of the AOF rewrite;
//! * the worked examples of spec §7.7 are unit tests in the library.
//!
//! The files are copies (`tests/fixtures/redisbloom/sketches/`) of the specification's, so the
//! tests run from a clean clone; `fixture_copies_match_the_spec` keeps them equal.

#[path = "support/ci.rs"]
mod ci;
#[path = "sketch_fixtures/interp.rs"]
mod interp;
#[path = "support/rdb_body.rs"]
mod rdb_body;

use std::path::PathBuf;

use interp::{argv, matches, Reply, Server, Target};
use rdb_body::normalize_body;
use serde_json::Value;
use sift::compat::redisbloom::rdb::{
    aof_rewrite_command, crc64, dump_payload, read_rdb, restore_payload, restore_payload_with, RdbError,
    RdbValue, ReadOptions,
};
use sift::compat::redisbloom::{format_double, DoubleFormat, LoadLimits};

fn dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/redisbloom/sketches"))
}

fn json(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join(path)).unwrap()).unwrap()
}

fn transcript() -> Vec<Value> {
    std::fs::read_to_string(dir().join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

const FILES: [&str; 6] =
    ["README.md", "meta.json", "transcript.jsonl", "rdb/keys.json", "rdb/dump.rdb", "rdb/aof_rewrite.json"];

/// The in-repo copies (which every other test here reads) must equal the specification's fixture
/// folder beside the repository when that is present (absent in a lone clone; required in CI).
#[test]
fn fixture_copies_match_the_spec() {
    let shared =
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/spec/fixtures/sketches"));
    if !shared.is_dir() {
        assert!(!ci::in_ci(), "{} is missing: CI runs beside the specification's folder", shared.display());
        eprintln!("{} not present: skipping the copy check", shared.display());
        return;
    }
    for name in FILES {
        assert!(
            std::fs::read(dir().join(name)).unwrap() == std::fs::read(shared.join(name)).unwrap(),
            "{name} differs from the specification's copy"
        );
    }
}

#[test]
fn meta_counts_agree_with_the_transcript() {
    let meta = json("meta.json");
    let lines = transcript();
    assert_eq!(lines.len() as u64, meta["transcript"]["lines"].as_u64().unwrap());
    let random = lines.iter().filter(|l| l["random"] == true).count();
    assert_eq!(random as u64, meta["transcript"]["random_lines"].as_u64().unwrap());
    let differs = lines.iter().filter(|l| l.get("differs_in_current").is_some()).count();
    assert_eq!(differs as u64, meta["transcript"]["lines_with_differs_in_current"].as_u64().unwrap());
    for (cmd, n) in meta["transcript"]["commands"].as_object().unwrap() {
        let got = lines.iter().filter(|l| l["cmd"][0].as_str().unwrap().eq_ignore_ascii_case(cmd)).count();
        assert_eq!(got as u64, n.as_u64().unwrap(), "{cmd}");
    }
}

/// The replies a line expects from `target`, RESP2 and RESP3.
fn expected(line: &Value, target: Target) -> (Value, Value) {
    match (target, line.get("differs_in_current")) {
        (Target::Current, Some(cur)) => {
            let r3 = line.get("differs_in_current_resp3").cloned().unwrap_or_else(|| {
                assert!(cur.get("error").is_some(), "a current RESP3 reply is given unless it is an error");
                cur.clone()
            });
            (cur.clone(), r3)
        }
        _ => (line["resp2"].clone(), line["resp3"].clone()),
    }
}

/// Replays the whole transcript and returns (lines compared, doubles compared).
fn replay(target: Target) -> (usize, usize) {
    let mut server = Server::new(target);
    let mut failures = Vec::new();
    let (mut compared, mut doubles) = (0, 0);
    for (n, line) in transcript().iter().enumerate() {
        let reply = server.call(&argv(&line["cmd"]));
        if line["random"] == true {
            continue;
        }
        let (r2, r3) = expected(line, target);
        for (resp3, want) in [(false, &r2), (true, &r3)] {
            if let Err(e) = matches(&reply, want, resp3, target.doubles()) {
                failures.push(format!(
                    "line {} {} (RESP{}): {e}",
                    n + 1,
                    line["cmd"],
                    if resp3 { 3 } else { 2 }
                ));
            }
        }
        compared += 1;
        doubles += count_doubles(&reply);
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures[..failures.len().min(30)].join("\n")
    );
    (compared, doubles)
}

fn count_doubles(r: &Reply) -> usize {
    match r {
        Reply::Double(_) => 1,
        Reply::Array(v) => v.iter().map(count_doubles).sum(),
        Reply::Map(v) => v.iter().map(|(_, r)| count_doubles(r)).sum(),
        _ => 0,
    }
}

#[test]
fn transcript_as_redis_7_0_replied() {
    let (lines, doubles) = replay(Target::Redis70);
    assert_eq!(lines, 838);
    // Spec §11: 1410 doubles from the t-digest commands, plus TOPK.INFO's decays.
    assert!(doubles >= 1410, "{doubles}");
}

#[test]
fn transcript_as_current_redis_replies() {
    let (lines, _) = replay(Target::Current);
    assert_eq!(lines, 838);
}

/// `meta.json`'s observation: TOPK.INCRBY whose bad increment is not in the last pair. RedisBloom
/// announces two elements and sends one (spec §8); the pairs after the bad one are not applied,
/// and the well-formed reply a server should send instead ends with the error element.
#[test]
fn topk_incrby_stops_at_the_bad_pair() {
    let meta = json("meta.json");
    let obs = &meta["observations"]["topk_incrby_short_reply"];
    let mut server = Server::new(Target::Redis70);
    assert_eq!(server.call(&argv(&obs["reserve"]["cmd"])), Reply::Simple("OK".into()));
    let reply = server.call(&argv(&obs["incrby_bad_first_of_two"]["cmd"]));
    let wire = obs["incrby_bad_first_of_two"]["wire"].as_str().unwrap();
    let text = wire.strip_prefix("*2\r\n-").unwrap().strip_suffix("\r\n").unwrap();
    assert_eq!(reply, Reply::Array(vec![Reply::Error(text.into())]));
    let query = server.call(&argv(&serde_json::json!(["TOPK.QUERY", "short_reply", "a", "b"])));
    assert_eq!(query, Reply::Array(vec![Reply::Bool(false), Reply::Bool(false)]));
}

/// The RESP3 doubles of a reply, in order.
fn doubles_of(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) if o.contains_key("double") => out.push(o["double"].as_str().unwrap().to_string()),
        Value::Object(o) if o.contains_key("map") => {
            for pair in o["map"].as_array().unwrap() {
                doubles_of(&pair[1], out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| doubles_of(x, out)),
        _ => {}
    }
}

/// The f64 a `%.17g` text stands for (`-nan` keeps its sign).
fn parse_c(text: &str) -> f64 {
    match text {
        "nan" => f64::NAN,
        "-nan" => -f64::NAN,
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        t => t.parse().unwrap(),
    }
}

/// Every double text of the transcript and of `rdb/keys.json`, printed back from its value in
/// both styles: Redis 7.0's (`resp3`) and current Redis's (`differs_in_current_resp3`, or the
/// same text where the line does not differ).
#[test]
fn every_double_text_of_the_fixtures() {
    let mut checked = 0;
    let mut current_differs = 0;
    for line in transcript() {
        let mut old = Vec::new();
        doubles_of(&line["resp3"], &mut old);
        let mut cur = Vec::new();
        match (line.get("differs_in_current"), line.get("differs_in_current_resp3")) {
            (Some(_), Some(c3)) => doubles_of(c3, &mut cur),
            (Some(_), None) => continue, // the current reply is an error: no double is printed
            (None, _) => cur = old.clone(),
        }
        if line["random"] == true {
            continue;
        }
        assert_eq!(old.len(), cur.len(), "{}", line["cmd"]);
        for (o, c) in old.iter().zip(&cur) {
            let v = parse_c(o);
            assert_eq!(&format_double(v, DoubleFormat::Printf17g), o, "{}", line["cmd"]);
            assert_eq!(&format_double(v, DoubleFormat::D2String), c, "{} ({o})", line["cmd"]);
            current_differs += (o != c) as usize;
            checked += 1;
        }
    }
    let keys = json("rdb/keys.json");
    for k in keys["keys"].as_object().unwrap().values() {
        for r in k["after_load_resp3"].as_array().unwrap() {
            let mut old = Vec::new();
            doubles_of(&r["reply"], &mut old);
            for o in old {
                assert_eq!(format_double(parse_c(&o), DoubleFormat::Printf17g), o);
                checked += 1;
            }
        }
    }
    assert_eq!((checked, current_differs), (1417, 724), "doubles checked, texts that differ");
}

/// 10 656 doubles and Redis ≥ 7.2's text for each (`tests/fixtures/redisbloom/d2string/`,
/// written by its `generate.py` with the specification's port of Redis's C code), 4 656 of them
/// cases where Grisu2 does not give the shortest digits.
#[test]
fn d2string_vectors() {
    let path =
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/redisbloom/d2string/vectors.txt"));
    let text = std::fs::read_to_string(path).unwrap();
    let mut n = 0;
    let mut not_shortest = 0;
    for line in text.lines() {
        let (bits, want) = line.split_once(' ').unwrap();
        let v = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
        assert_eq!(format_double(v, DoubleFormat::D2String), want, "{bits}");
        assert_eq!(want.parse::<f64>().unwrap(), v);
        let shortest = format!("{:e}", v.abs());
        let digits = |s: &str| s.split('e').next().unwrap().replace(['.', '-'], "").trim_matches('0').len();
        not_shortest += (digits(want) > digits(&shortest)) as usize;
        n += 1;
    }
    assert_eq!(n, 10_656);
    assert!(not_shortest > 3000, "{not_shortest}");
}

// ---------------------------------------------------------------------------------------------
// RDB

fn dump_rdb() -> Vec<u8> {
    std::fs::read(dir().join("rdb/dump.rdb")).unwrap()
}

fn keys_json() -> Value {
    json("rdb/keys.json")
}

fn f(v: &Value) -> f64 {
    match v {
        Value::String(s) => s.parse().unwrap(),
        v => v.as_f64().unwrap(),
    }
}

/// Checks a decoded value against the `decoded` object of `keys.json`.
fn check_decoded(name: &str, v: &RdbValue, want: &Value) {
    assert_eq!(want["encver"], 0);
    match v {
        RdbValue::Cms(c) => {
            assert_eq!(want["type_name"], "CMSk-TYPE");
            assert_eq!(
                (c.width(), c.depth(), c.count()),
                (
                    want["width"].as_u64().unwrap(),
                    want["depth"].as_u64().unwrap(),
                    want["counter"].as_u64().unwrap()
                )
            );
            for (row, cells) in want["counters"].as_array().unwrap().iter().enumerate() {
                for (col, cell) in cells.as_array().unwrap().iter().enumerate() {
                    assert_eq!(
                        c.cell(row as u64, col as u64) as u64,
                        cell.as_u64().unwrap(),
                        "{name} ({row},{col})"
                    );
                }
            }
        }
        RdbValue::TopK(t) => {
            assert_eq!(want["type_name"], "TopK-TYPE");
            assert_eq!(
                (t.k(), t.width(), t.depth()),
                (
                    want["k"].as_u64().unwrap() as u32,
                    want["width"].as_u64().unwrap() as u32,
                    want["depth"].as_u64().unwrap() as u32
                )
            );
            assert_eq!(t.decay(), f(&want["decay"]));
            let nonzero: Vec<Value> = t
                .buckets()
                .iter()
                .enumerate()
                .filter(|(_, b)| b.fp != 0 || b.count != 0)
                .map(|(i, b)| serde_json::json!([i, b.fp, b.count]))
                .collect();
            assert_eq!(Value::Array(nonzero), want["buckets_nonzero"], "{name}");
            for ((slot, rec), item) in t
                .heap()
                .iter()
                .zip(want["heap"].as_array().unwrap())
                .zip(want["heap_item_strings"].as_array().unwrap())
            {
                assert_eq!(slot.fp() as u64, rec["fp"].as_u64().unwrap());
                assert_eq!(slot.count() as u64, rec["count"].as_u64().unwrap());
                assert_eq!(slot.item().is_some(), rec["item_pointer_nonzero"].as_bool().unwrap());
                assert_eq!(slot.item().map_or(0, <[u8]>::len) as u64, rec["itemlen"].as_u64().unwrap());
                let mut stored = slot.item().unwrap_or(b"").to_vec();
                stored.push(0);
                assert!(matches(&Reply::Bulk(stored), item, false, DoubleFormat::D2String).is_ok(), "{name}");
            }
        }
        RdbValue::TDigest(t) => {
            assert_eq!(want["type_name"], "TDIS-TYPE");
            assert_eq!(t.compression(), f(&want["compression"]));
            assert_eq!(t.min().to_bits(), f(&want["min"]).to_bits(), "{name} min");
            assert_eq!(t.max().to_bits(), f(&want["max"]).to_bits(), "{name} max");
            assert_eq!(t.capacity() as u64, want["cap"].as_u64().unwrap());
            assert_eq!(t.merged_nodes() as u64, want["merged_nodes"].as_u64().unwrap());
            assert_eq!(t.unmerged_nodes() as u64, want["unmerged_nodes"].as_u64().unwrap());
            assert_eq!(t.total_compressions() as u64, want["total_compressions"].as_u64().unwrap());
            assert_eq!(t.merged_weight() as f64, f(&want["merged_weight"]));
            assert_eq!(t.unmerged_weight() as f64, f(&want["unmerged_weight"]));
            let nodes: Vec<(f64, i64)> = t.nodes().take(t.merged_nodes()).collect();
            let means = want["means"].as_array().unwrap();
            let weights = want["weights"].as_array().unwrap();
            assert_eq!(nodes.len(), means.len());
            for ((m, w), (wm, ww)) in nodes.iter().zip(means.iter().zip(weights)) {
                assert_eq!(m.to_bits(), f(wm).to_bits(), "{name} mean");
                assert_eq!(*w as f64, f(ww), "{name} weight");
            }
        }
        other => panic!("{name}: unexpected {other:?}"),
    }
}

#[test]
fn dump_rdb_decodes_every_key() {
    let file = read_rdb(&dump_rdb(), &ReadOptions::default()).unwrap();
    assert!(file.checksum_verified);
    assert_eq!(file.version, 10);
    let doc = keys_json();
    let order: Vec<String> = file.keys.iter().map(|k| String::from_utf8(k.key.clone()).unwrap()).collect();
    let want: Vec<String> = serde_json::from_value(doc["dump_rdb"]["keys_in_file_order"].clone()).unwrap();
    assert_eq!(order, want);
    for k in &file.keys {
        let name = std::str::from_utf8(&k.key).unwrap();
        let entry = &doc["keys"][name];
        check_decoded(name, &k.value, &entry["decoded"]);
        // The DUMP payload holds the same value.
        assert_eq!(restore_payload(&hex(entry["dump_hex"].as_str().unwrap())).unwrap(), k.value, "{name}");
    }
}

#[test]
fn payloads_reencode_to_redisbloom_bytes() {
    let doc = keys_json();
    let mut identical = Vec::new();
    for (name, k) in doc["keys"].as_object().unwrap() {
        let payload = hex(k["dump_hex"].as_str().unwrap());
        let n = payload.len();
        assert_eq!(&payload[n - 10..n - 8], &[0x0a, 0x00], "{name}: RDB version 10");
        assert_eq!(u64::from_le_bytes(payload[n - 8..].try_into().unwrap()), crc64(0, &payload[..n - 8]));
        let value = restore_payload(&payload).unwrap();
        let ours = dump_payload(&value);
        assert_eq!(
            &ours[..ours.len() - 10],
            &normalize_body(&payload[..n - 10])[..],
            "{name}: re-encoded body"
        );
        if ours == payload {
            identical.push(name.as_str());
        }
        assert_eq!(restore_payload(&ours).unwrap(), value, "{name}");
    }
    // The t-digests have no strings (nothing for LZF, no pointers): their payloads are
    // RedisBloom's own bytes, CRC included.
    identical.sort();
    assert_eq!(identical, ["td_empty", "td_main", "td_merged", "td_reset", "td_single", "td_src"]);
}

/// The replies recorded after a fresh server loaded `dump.rdb`, in both protocols, and the
/// follow-ups on `td_single` that show the zeroed node of spec §10.5.
#[test]
fn replies_after_loading_the_file() {
    let file = read_rdb(&dump_rdb(), &ReadOptions::default()).unwrap();
    let doc = keys_json();
    for target in [Target::Redis70, Target::Current] {
        let mut server = Server::new(target);
        server.db = file.keys.iter().map(|k| (k.key.clone(), k.value.clone())).collect();
        let mut checked = 0;
        for (name, k) in doc["keys"].as_object().unwrap() {
            // Memory: Redis 7.0's per-key overhead (24 bytes and the key's sdshdr5 allocation in
            // jemalloc's 8/16-byte classes: 40 for the 7..14-byte names, 32 for `td_src`) plus
            // RedisBloom 2.6's callback (§10.7).
            let overhead = 24 + if name.len() + 2 <= 8 { 8 } else { 16 };
            let value = &server.db[name.as_bytes()];
            let callback_26 = match value {
                RdbValue::Cms(c) => 8 + 8 * c.width() * c.depth(),
                RdbValue::TopK(t) => t.memory_usage(),
                RdbValue::TDigest(t) => t.memory_usage() - 72,
                _ => unreachable!(),
            };
            assert_eq!(overhead + callback_26, k["memory_usage_after_load"].as_u64().unwrap(), "{name}");
            assert_eq!(k["memory_usage_before_dump"], k["memory_usage_after_load"]);
            for (proto, field) in [(false, "after_load_resp2"), (true, "after_load_resp3")] {
                for r in k[field].as_array().unwrap() {
                    let reply = server.call(&argv(&r["cmd"]));
                    let want = if target == Target::Current {
                        current_text(&r["reply"], proto)
                    } else {
                        r["reply"].clone()
                    };
                    matches(&reply, &want, proto, target.doubles())
                        .unwrap_or_else(|e| panic!("{name} {}: {e}", r["cmd"]));
                    checked += 1;
                }
            }
        }
        for r in doc["after_load_followups"].as_array().unwrap() {
            let reply = server.call(&argv(&r["cmd"]));
            let want =
                if target == Target::Current { current_text(&r["reply"], false) } else { r["reply"].clone() };
            matches(&reply, &want, false, target.doubles()).unwrap_or_else(|e| panic!("{}: {e}", r["cmd"]));
            checked += 1;
        }
        // Spec §11: the 83 recorded after-load replies.
        assert_eq!(checked, 83);
    }
}

/// A recorded Redis 7.0 reply as current RedisBloom sends it: doubles re-printed (their texts
/// are checked against `format_double` elsewhere) and TDIGEST.INFO's memory as `80 + 16·cap`.
fn current_text(v: &Value, resp3: bool) -> Value {
    match v {
        Value::Object(o) if o.contains_key("double") => {
            serde_json::json!({"double": format_double(parse_c(o["double"].as_str().unwrap()), DoubleFormat::D2String)})
        }
        Value::Object(o) if o.contains_key("map") => {
            let pairs: Vec<Value> = o["map"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    if p[0] == "Memory usage" {
                        serde_json::json!([p[0], p[1].as_i64().unwrap() + 72])
                    } else {
                        serde_json::json!([p[0], current_text(&p[1], resp3)])
                    }
                })
                .collect();
            serde_json::json!({ "map": pairs })
        }
        Value::Array(a) => {
            let mut out: Vec<Value> = a.iter().map(|x| current_text(x, resp3)).collect();
            // RESP2: a flat INFO array, or doubles as plain strings.
            if let Some(i) = a.iter().position(|x| x == "Memory usage") {
                out[i + 1] = Value::from(a[i + 1].as_i64().unwrap() + 72);
            }
            Value::Array(out)
        }
        Value::String(s)
            if !resp3 && (s.parse::<f64>().is_ok() || s.ends_with("nan") || s.ends_with("inf")) =>
        {
            Value::String(format_double(parse_c(s), DoubleFormat::D2String))
        }
        other => other.clone(),
    }
}

/// The keys' setup commands replayed on an empty server give every recorded reply, INFO before
/// and after the `DUMP` (which compresses a t-digest), and the recorded value: t-digests and
/// the raw-string keys byte for byte, the others field by field.
#[test]
fn setup_commands_rebuild_the_recorded_values() {
    let doc = keys_json();
    let mut server = Server::new(Target::Redis70);
    let setup = doc["setup_all"].as_array().unwrap();
    let replies = doc["setup_replies"].as_array().unwrap();
    assert_eq!(setup.len(), replies.len());
    for (cmd, want) in setup.iter().zip(replies) {
        let reply = server.call(&argv(cmd));
        matches(&reply, want, false, DoubleFormat::Printf17g).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    }
    for (name, k) in doc["keys"].as_object().unwrap() {
        let info = match k["type"].as_str().unwrap() {
            "CMSk-TYPE" => "CMS.INFO",
            "TopK-TYPE" => "TOPK.INFO",
            _ => "TDIGEST.INFO",
        };
        let info_cmd = vec![info.as_bytes().to_vec(), name.as_bytes().to_vec()];
        let before = server.call(&info_cmd);
        matches(&before, &k["info_before_dump_resp2"], false, DoubleFormat::Printf17g).unwrap();
        // DUMP: a t-digest is compressed in place, then encoded.
        let value = server.db.get_mut(name.as_bytes()).unwrap();
        if let RdbValue::TDigest(t) = value {
            t.compress();
        }
        let payload = hex(k["dump_hex"].as_str().unwrap());
        let ours = dump_payload(value);
        assert_eq!(&ours[..ours.len() - 10], &normalize_body(&payload[..payload.len() - 10])[..], "{name}");
        check_decoded(name, value, &k["decoded"]);
        let after = server.call(&info_cmd);
        matches(&after, &k["info_after_dump_resp2"], false, DoubleFormat::Printf17g).unwrap();
    }
}

/// The plain AOF rewrite: one `RESTORE key 0 <payload>` per key of database 0, decoding to the
/// file's values; our command for each carries the same value (RedisBloom's keys of database 1
/// are missing from its rewrite, spec §10.6; a server using [`aof_rewrite_command`] per database
/// keeps them).
#[test]
fn aof_rewrite_restores_the_same_values() {
    let doc = json("rdb/aof_rewrite.json");
    let file = read_rdb(&dump_rdb(), &ReadOptions::default()).unwrap();
    let cmds = doc["commands"].as_array().unwrap();
    assert_eq!(cmds[0], serde_json::json!(["SELECT", "0"]));
    assert_eq!(cmds.last().unwrap(), &serde_json::json!(["SELECT", "1"]));
    let mut restored = Vec::new();
    for c in &cmds[1..cmds.len() - 1] {
        assert_eq!((c[0].as_str(), c[2].as_str()), (Some("RESTORE"), Some("0")));
        let key = c[1].as_str().unwrap();
        let payload = hex(c[3]["hex"].as_str().unwrap());
        let value = restore_payload(&payload).unwrap();
        let k = file.keys.iter().find(|k| k.key == key.as_bytes()).unwrap();
        assert_eq!(value, k.value, "{key}");
        let ours = aof_rewrite_command(key.as_bytes(), &k.value);
        assert_eq!(&ours[..3], &[b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec()]);
        assert_eq!(
            &ours[3][..ours[3].len() - 10],
            &normalize_body(&payload[..payload.len() - 10])[..],
            "{key}"
        );
        restored.push(key.to_string());
    }
    restored.sort();
    let mut all: Vec<String> = file.keys.iter().map(|k| String::from_utf8(k.key.clone()).unwrap()).collect();
    all.sort();
    assert_eq!(restored, all);
    assert_eq!(doc["setup_extra_db1"].as_array().unwrap().len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Hostile input

/// Every truncation and bit flip of each sketch payload is an error (the CRC catches it), and
/// with the CRC recomputed every flip, byte change and truncation reaches the decoders: a
/// value or an error, never a panic, and never an allocation beyond the small budget.
#[test]
fn damaged_payloads_never_panic() {
    let doc = keys_json();
    let opts = ReadOptions {
        limits: LoadLimits { max_bytes: 1 << 16, cf_max_bucket_size: 255 },
        ..Default::default()
    };
    let fix = |mut body: Vec<u8>| {
        body.extend_from_slice(&[10, 0]);
        let crc = crc64(0, &body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    };
    let (mut loaded, mut refused) = (0, 0);
    for (name, k) in doc["keys"].as_object().unwrap() {
        let p = hex(k["dump_hex"].as_str().unwrap());
        for n in 0..p.len() {
            assert!(restore_payload(&p[..n]).is_err(), "{name} truncated to {n}");
        }
        let body = p[..p.len() - 10].to_vec();
        let mut tally = |r: Result<RdbValue, RdbError>| match r {
            Ok(v) => {
                // Whatever loads can be used and saved again.
                exercise(v);
                loaded += 1
            }
            Err(_) => refused += 1,
        };
        for i in 0..body.len() * 8 {
            let mut b = body.clone();
            b[i / 8] ^= 1 << (i % 8);
            tally(restore_payload_with(&fix(b), &opts));
        }
        for i in 0..body.len() {
            for v in [0x00, 0x01, 0x3f, 0x7f, 0x80, 0x81, 0xc3, 0xff] {
                let mut b = body.clone();
                b[i] = v;
                tally(restore_payload_with(&fix(b), &opts));
            }
        }
        for n in 0..body.len() {
            assert!(restore_payload_with(&fix(body[..n].to_vec()), &opts).is_err(), "{name} body cut at {n}");
        }
    }
    assert!(loaded > 1000 && refused > 1000, "loaded {loaded}, refused {refused}");
}

/// Runs every query and a few updates on a loaded value: none may panic.
fn exercise(v: RdbValue) {
    let mut rng = sift::compat::redisbloom::CRand::new(7);
    match v {
        RdbValue::Cms(mut c) => {
            c.incr_by(b"x", 3);
            c.query(b"y");
            let _ = dump_payload(&RdbValue::Cms(c));
        }
        RdbValue::TopK(mut t) => {
            for item in [&b"a"[..], b"b", b"only", b""] {
                t.add(item, &mut rng);
                t.query(item);
                t.count(item);
            }
            t.list();
            let _ = dump_payload(&RdbValue::TopK(t));
        }
        RdbValue::TDigest(mut t) => {
            let _ = t.add(1.5);
            t.quantiles(&[0.0, 0.3, 1.0]);
            for x in [f64::NEG_INFINITY, -1.0, 0.0, 5.0, f64::INFINITY] {
                t.cdf(x);
                t.rank(x);
                t.rev_rank(x);
            }
            t.by_rank(1);
            t.by_rev_rank(2);
            t.trimmed_mean(0.1, 0.9);
            t.info();
            let _ = dump_payload(&RdbValue::TDigest(t));
        }
        _ => {}
    }
}
