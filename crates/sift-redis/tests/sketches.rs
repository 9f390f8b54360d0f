//! The CMS.*, TOPK.* and TDIGEST.* commands in redis-server (Debian's 7.0.15 in CI) with
//! `libsift_redis.so`: the golden transcript of RedisBloom's sketches, byte for byte in RESP2 and
//! RESP3 (the shared `suite/sketches.rs`, which sift-server passes too). Redis 7.0 prints the
//! doubles (`%.17g`), so those are the recorded bytes; everything else is current RedisBloom's.
//!
//! Valkey 8.0.1 (`valkey_*`, server from `../shared/bin` or `$SIFT_VALKEY_SERVER`; a missing one
//! fails under `CI=true`) runs the same bodies for: the transcript in RESP2 and RESP3 (with
//! current RedisBloom's doubles, as Valkey prints them like Redis ≥ 7.2), the golden DUMP
//! payloads and redis-py's helpers, RedisBloom's `dump.rdb` loaded and saved back as RDB 11, the
//! AOF rewrite of every database, and Top-K's seeded decay through a replica and an AOF replay.
//! Left to Redis only: the absurd-input checks (the module's own argument checks, whatever the
//! server), MEMORY USAGE against RedisBloom's recorded numbers (the per-key overhead is the
//! server's), and the five-types RDB (the golden `dump.rdb` covers loading on Valkey).

#[path = "../../sift-server/tests/suite/mod.rs"]
mod suite;
#[macro_use]
mod support;
#[path = "support/suite_target.rs"]
mod suite_target;

use suite::sketches::{sketch_transcript_byte_exact, Doubles};
use suite::Server;
use suite_target::{wait_aof_rewrite, WithModule, AOF, REDIS};
use support::{Program, RedisServer};

/// How the server prints doubles: Redis 7.0 with `%.17g`, Valkey 8 as Redis ≥ 7.2 does.
fn doubles(p: &Program) -> Doubles {
    match p {
        Program::Redis => Doubles::Redis70,
        Program::Valkey(_) => Doubles::Current,
    }
}

on_redis_and_valkey!(
    transcript_resp2:
    sketch_transcript_resp2_byte_exact,
    valkey_sketch_transcript_resp2_byte_exact
);
on_redis_and_valkey!(
    transcript_resp3:
    sketch_transcript_resp3_byte_exact,
    valkey_sketch_transcript_resp3_byte_exact
);
on_redis_and_valkey!(redis_py: redis_py_sketch_commands, valkey_redis_py_sketch_commands);
on_redis_and_valkey!(golden_payloads: golden_sketch_payloads_restore, valkey_golden_sketch_payloads_restore);

on_redis_and_valkey!(saving_compresses: saving_compresses_the_live_digest, valkey_saving_compresses_the_live_digest);

fn saving_compresses(p: &Program) {
    suite::sketches::saving_compresses_the_live_digest(&WithModule(p.clone()));
}

fn transcript_resp2(p: &Program) {
    sketch_transcript_byte_exact(&WithModule(p.clone()), 2, doubles(p));
}

fn transcript_resp3(p: &Program) {
    sketch_transcript_byte_exact(&WithModule(p.clone()), 3, doubles(p));
}

fn redis_py(p: &Program) {
    suite::sketches::redis_py_sketch_commands(&WithModule(p.clone()));
}

fn golden_payloads(p: &Program) {
    suite::sketches::golden_sketch_payloads_restore(&WithModule(p.clone()), doubles(p));
}

#[test]
fn absurd_sketch_inputs_are_refused() {
    suite::sketches::absurd_sketch_inputs_are_refused(&REDIS);
}

// ------------------------------------------------------------------------------------------------
// Persistence through Redis.

use std::path::Path;
use std::time::{Duration, Instant};

use sift::compat::redisbloom::rdb::{read_rdb, write_rdb, RdbKey, RdbValue, ReadOptions};
use suite::sketches::{check_after_load, show, sketch_fixtures};
use suite::Raw;
use support::temp_dir;

fn info_field(c: &mut Raw, section: &str, field: &str) -> String {
    let r = c.cmd(&["INFO", section]);
    let text = String::from_utf8_lossy(&r).into_owned();
    let prefix = format!("{field}:");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap_or_default().trim().to_string()
}

fn integer(r: &[u8]) -> i64 {
    assert_eq!(r[0], b':', "{}", show(r));
    std::str::from_utf8(&r[1..r.len() - 2]).unwrap().parse().unwrap()
}

/// The keys of an RDB file, by name (values compared as the library reads them).
fn rdb_values(path: &Path) -> Vec<(Vec<u8>, u64, RdbValue)> {
    let file = read_rdb(&std::fs::read(path).unwrap(), &ReadOptions::default()).unwrap();
    let mut keys: Vec<_> = file.keys.into_iter().map(|k| (k.key, k.db, k.value)).collect();
    keys.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    keys
}

/// RedisBloom's `dump.rdb` with its 11 sketches loads into redis-server with the module and
/// answers every recorded after-load reply; MEMORY USAGE is current RedisBloom's callback plus
/// Redis's 40 bytes per key; and a SAVE by the module writes the same values back.
#[test]
fn golden_sketch_dump_rdb_loads_answers_and_saves_back() {
    let dir = temp_dir("sketch-rdb");
    let golden = sketch_fixtures().join("rdb/dump.rdb");
    std::fs::copy(&golden, dir.join("dump.rdb")).unwrap();
    let srv = RedisServer::start_in(&dir, &[], &[]);
    let mut c = srv.raw();
    assert_eq!(integer(&c.cmd(&["DBSIZE"])), 11);
    // MEMORY USAGE, from each key's own INFO (spec §10.7).
    let k = suite::sketches::keys_json();
    for (name, v) in k["keys"].as_object().unwrap() {
        let info = String::from_utf8_lossy(
            &c.cmd(&[&format!("{}.INFO", type_prefix(v["type"].as_str().unwrap())), name]),
        )
        .into_owned();
        let num = |field: &str| -> u64 {
            let at = info.find(&format!("+{field}\r\n:")).unwrap_or_else(|| panic!("{field} in {info}"));
            let rest = &info[at + field.len() + 4..];
            rest[..rest.find('\r').unwrap()].parse().unwrap()
        };
        // (current callback, 2.6's): only the CMS and t-digest ones changed (spec §9).
        let (callback, callback_26) = match v["type"].as_str().unwrap() {
            "CMSk-TYPE" => (32 + 4 * num("width") * num("depth"), 8 + 8 * num("width") * num("depth")),
            "TopK-TYPE" => {
                let t = 2088 + 8 * num("width") * num("depth") + 24 * num("k");
                (t, t)
            }
            _ => (80 + 16 * num("Capacity"), 8 + 16 * num("Capacity")),
        };
        // Redis's per-key overhead is what RedisBloom's recorded number has beyond its callback.
        let overhead = v["memory_usage_after_load"].as_u64().unwrap() - callback_26;
        assert!(overhead == 32 || overhead == 40, "{name}: {overhead}");
        assert_eq!(integer(&c.cmd(&["MEMORY", "USAGE", name])) as u64, callback + overhead, "{name}");
    }
    // The module's SAVE holds the same values as RedisBloom's file.
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert_eq!(rdb_values(&dir.join("dump.rdb")), rdb_values(&golden));
    let problems = check_after_load(&mut c, Doubles::Redis70, &|k| k.to_string());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // DEBUG RELOAD: saved by the module and loaded back, the keys answer as RedisBloom's did.
    drop(c);
    drop(srv);
    std::fs::copy(&golden, dir.join("dump.rdb")).unwrap();
    let srv = RedisServer::start_in(&dir, &[], &[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    let problems = check_after_load(&mut c, Doubles::Redis70, &|k| k.to_string());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    drop(c);
    srv.shutdown(false);
}

fn type_prefix(ty: &str) -> &'static str {
    match ty {
        "CMSk-TYPE" => "CMS",
        "TopK-TYPE" => "TOPK",
        _ => "TDIGEST",
    }
}

/// An RDB file with all five RedisBloom types (the Bloom and cuckoo golden files' keys and the
/// sketches', written by the library in RedisBloom's encoding) loads into redis-server with the
/// module; SAVE writes every value back unchanged.
#[test]
fn rdb_with_all_five_types_round_trips() {
    let dir = temp_dir("five-types");
    let mut keys: Vec<RdbKey> = Vec::new();
    let filters = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift/tests/fixtures/rdb/dump.rdb");
    for path in [filters, sketch_fixtures().join("rdb/dump.rdb")] {
        let file = read_rdb(&std::fs::read(&path).unwrap(), &ReadOptions::default()).unwrap();
        keys.extend(file.keys);
    }
    let kinds = |keys: &[RdbKey]| {
        let mut k: Vec<&str> = keys
            .iter()
            .map(|k| match &k.value {
                RdbValue::Bloom(_) => "MBbloom--",
                RdbValue::Cuckoo(_) => "MBbloomCF",
                RdbValue::Cms(_) => "CMSk-TYPE",
                RdbValue::TopK(_) => "TopK-TYPE",
                RdbValue::TDigest(_) => "TDIS-TYPE",
                _ => "other",
            })
            .collect();
        k.sort();
        k.dedup();
        k
    };
    assert_eq!(kinds(&keys), ["CMSk-TYPE", "MBbloom--", "MBbloomCF", "TDIS-TYPE", "TopK-TYPE"]);
    std::fs::write(dir.join("dump.rdb"), write_rdb(&keys, 1_700_000_000)).unwrap();
    let before = rdb_values(&dir.join("dump.rdb"));
    let srv = RedisServer::start_in(&dir, &[], &[]);
    let mut c = srv.raw();
    assert_eq!(integer(&c.cmd(&["DBSIZE"])) as usize, keys.len());
    for k in &keys {
        let ty = c.cmd_bytes(&[&b"TYPE"[..], &k.key]);
        assert_ne!(ty, b"+none\r\n", "{}", show(&k.key));
    }
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert_eq!(rdb_values(&dir.join("dump.rdb")), before);
    drop(c);
    srv.shutdown(false);
}

on_redis_and_valkey!(
    aof_rewrite_keeps_every_database:
    aof_rewrite_keeps_sketches_of_every_database,
    valkey_aof_rewrite_keeps_sketches_of_every_database
);

/// The plain AOF rewrite keeps sketches of every database (RedisBloom's rewrite looks keys up in
/// database 0 and loses the others, spec §10.6), as `RESTORE` of each key's own value; a restart
/// from the rewritten AOF gives the same values.
fn aof_rewrite_keeps_every_database(p: &Program) {
    let dir = temp_dir("sketch-aof");
    let srv = p.start_in(&dir, AOF, &[]);
    let mut c = srv.raw();
    let setup: &[&[&str]] = &[
        &["CMS.INITBYDIM", "cms", "50", "4"],
        &["CMS.INCRBY", "cms", "a", "5", "b", "7"],
        &["TOPK.RESERVE", "tk", "3", "8", "3", "0.9"],
        &["TOPK.ADD", "tk", "a", "b", "c", "d", "e", "f", "a", "a", "b", "g", "h", "a"],
        &["TDIGEST.CREATE", "td", "COMPRESSION", "20"],
        &["TDIGEST.ADD", "td", "1", "2", "3", "4.5", "100"],
        &["TDIGEST.CREATE", "td1"],
        &["TDIGEST.ADD", "td1", "7.25"],
    ];
    for db in ["0", "1"] {
        assert_eq!(c.cmd(&["SELECT", db]), b"+OK\r\n");
        for cmd in setup {
            let r = c.cmd(cmd);
            assert!(r[0] != b'-', "{cmd:?}: {}", show(&r));
        }
    }
    assert_eq!(c.cmd(&["CMS.INCRBY", "cms", "only-in-1", "3"]), b"*1\r\n:3\r\n");
    let snapshot = |c: &mut Raw| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for db in ["0", "1"] {
            c.cmd(&["SELECT", db]);
            for key in ["cms", "tk", "td", "td1"] {
                out.push(c.cmd(&["DUMP", key]));
            }
            out.push(c.cmd(&["CMS.QUERY", "cms", "a", "b", "only-in-1"]));
            out.push(c.cmd(&["TOPK.LIST", "tk", "WITHCOUNT"]));
            // (Not TDIGEST.INFO: the rewrite stores the digest compressed, as RedisBloom's does.)
            out.push(c.cmd(&["TDIGEST.CDF", "td", "2", "50"]));
        }
        out
    };
    let before = snapshot(&mut c);
    assert_eq!(c.cmd(&["BGREWRITEAOF"])[0], b'+');
    wait_aof_rewrite(&mut c);
    let base = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".base.aof"))
        .unwrap();
    let text = std::fs::read(&base).unwrap();
    let restores = text.windows(9).filter(|w| w == b"\r\nRESTORE").count();
    assert_eq!(restores, 8, "one RESTORE per key of each database");
    drop(c);
    srv.shutdown(false);
    let srv = p.start_in(&dir, AOF, &[]);
    let mut c = srv.raw();
    assert_eq!(snapshot(&mut c), before);
    drop(c);
    srv.shutdown(false);
}

on_redis_and_valkey!(
    topk_decay_replicates_and_replays:
    topk_decay_replicates_and_replays_deterministically,
    valkey_topk_decay_replicates_and_replays_deterministically
);

/// TOPK.ADD on a table where items collide makes random decay draws; the replica and the AOF
/// replay make the primary's (the call is propagated with its seed), so both hold exactly the
/// primary's table and heap.
fn topk_decay_replicates_and_replays(program: &Program) {
    let dir = temp_dir("topk-repl");
    let primary = program.start_in(&dir, AOF, &[]);
    let port = primary.port().to_string();
    let replica = program.start(&["--replicaof", "127.0.0.1", &port], &[]);
    let mut p = primary.raw();
    let mut r = replica.raw();
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut r, "replication", "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "replica did not connect");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(p.cmd(&["TOPK.RESERVE", "tk", "5", "4", "3", "0.9"]), b"+OK\r\n");
    // 600 adds over 40 items on a 4x3 table: thousands of decay attempts.
    for round in 0..20 {
        let mut args = vec!["TOPK.ADD".to_string(), "tk".into()];
        args.extend((0..30).map(|i| format!("i{}", (i * 7 + round * 13) % 40)));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(p.cmd(&a)[0], b'*');
    }
    let incr = ["TOPK.INCRBY", "tk", "i1", "50", "i2", "30", "i3", "x"];
    assert_eq!(p.cmd(&incr)[..4], *b"*3\r\n");
    assert_eq!(integer(&p.cmd(&["WAIT", "1", "5000"])), 1);
    let dump = p.cmd(&["DUMP", "tk"]);
    assert_eq!(r.cmd(&["DUMP", "tk"]), dump, "the replica holds the primary's Top-K");
    let list = p.cmd(&["TOPK.LIST", "tk", "WITHCOUNT"]);
    drop(p);
    primary.shutdown(false);
    let primary = program.start_in(&dir, AOF, &[]);
    let mut p = primary.raw();
    assert_eq!(p.cmd(&["DUMP", "tk"]), dump, "the AOF replay holds the same Top-K");
    assert_eq!(p.cmd(&["TOPK.LIST", "tk", "WITHCOUNT"]), list);
    drop(p);
    primary.shutdown(false);
}

// ------------------------------------------------------------------------------------------------
// Valkey 8.0.1 only.

/// RedisBloom's `dump.rdb` (RDB 10) with all its sketches loads into Valkey with the module, and
/// the module's SAVE there (Valkey writes RDB 11, which Redis 7.0 cannot read) holds the same
/// values.
#[test]
fn valkey_sketch_rdb_round_trip() {
    let Some(valkey) = Program::valkey() else { return };
    let dir = temp_dir("valkey-rdb");
    let golden = sketch_fixtures().join("rdb/dump.rdb");
    std::fs::copy(&golden, dir.join("dump.rdb")).unwrap();
    let srv = valkey.start_in(&dir, &[], &[]);
    let mut c = srv.raw();
    assert_eq!(integer(&c.cmd(&["DBSIZE"])), 11);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let saved = std::fs::read(dir.join("dump.rdb")).unwrap();
    assert_eq!(show(&saved[..9]), format!("REDIS{:04}", valkey.rdb_version()));
    assert_eq!(rdb_values(&dir.join("dump.rdb")), rdb_values(&golden));
    let problems = check_after_load(&mut c, doubles(&valkey), &|k| k.to_string());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    drop(c);
    srv.shutdown(false);
}
