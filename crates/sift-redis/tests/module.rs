//! redis-server (Debian's 7.0.15 in CI) with `libsift_redis.so` loaded, on loopback:
//!
//! * the shared BF/CF suite that sift-server passes (transcript, fixtures, clients, errors,
//!   memory bounds, configured defaults), byte for byte;
//! * persistence through Redis: SAVE + restart, DEBUG RELOAD and AOF rewrite + restart keep every
//!   filter byte-identical; the golden RedisBloom `dump.rdb` loads and answers its golden
//!   SCANDUMPs; each golden DUMP payload RESTOREs (and DUMPs back to the same bytes); the AOF
//!   rewrite emits RedisBloom's LOADCHUNK sequence; an auto-create reaches the AOF as an explicit
//!   LOADCHUNK of the header used, so replay does not depend on the configuration;
//! * TYPE and MEMORY USAGE.
//!
//! The module is the `libsift_redis.so` that `cargo test` builds next to this binary, or
//! `$SIFT_REDIS_MODULE` (see `support/mod.rs`).
//!
//! Valkey 8.0.1 (`valkey_*`, server from `../shared/bin` or `$SIFT_VALKEY_SERVER`; a missing one
//! fails under `CI=true`) runs a representative share of the same bodies, one per area, with the
//! module built once for both: the BF and CF transcripts in RESP2 and RESP3 and redis-py's
//! RedisBloom tests; RedisBloom's golden `dump.rdb` loaded and its SCANDUMPs answered, then saved
//! as RDB 11; SAVE + restart + DEBUG RELOAD; BGREWRITEAOF + restart; a replica with another
//! configuration; and, across the two servers, Valkey's RDB 11 refused by Redis 7.0 while its
//! plain AOF rewrite replays there. Left to Redis only: the rest of the suite (commands and
//! errors the transcript already covers on Valkey, run by the same command code), the golden DUMP
//! payloads dumped back byte for byte (Valkey's DUMP carries RDB version 11, so the bytes differ
//! by design), the golden AOF rewrite sequence, the SF.* commands. TYPE, MEMORY USAGE (with
//! Valkey's per-key overhead) and the module configs run on both. The sketches' Valkey tests are
//! in `sketches.rs`.

#[path = "../../sift-server/tests/suite/mod.rs"]
mod suite;
#[macro_use]
mod support;
#[path = "support/suite_target.rs"]
mod suite_target;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value as J;
use suite::{Raw, Server};
use suite_target::{wait_aof_rewrite, WithModule, AOF, REDIS};
use support::{temp_dir, Program, RedisServer};

on_redis_and_valkey!(transcript_resp2: transcript_resp2_byte_exact, valkey_transcript_resp2_byte_exact);
on_redis_and_valkey!(transcript_resp3: transcript_resp3_byte_exact, valkey_transcript_resp3_byte_exact);

fn transcript_resp2(p: &Program) {
    suite::transcript_resp2_byte_exact(&WithModule(p.clone()));
}

fn transcript_resp3(p: &Program) {
    suite::transcript_resp3_byte_exact(&WithModule(p.clone()));
}

#[test]
fn every_filter_fixture_matches() {
    suite::every_filter_fixture_matches(&REDIS);
}

#[test]
fn redis_crate_resp2() {
    suite::redis_crate_resp2(&REDIS);
}

#[test]
fn redis_crate_resp3() {
    suite::redis_crate_resp3(&REDIS);
}

on_redis_and_valkey!(redis_py_bloom: redis_py_bloom_commands, valkey_redis_py_bloom_commands);

fn redis_py_bloom(p: &Program) {
    suite::redis_py_bloom_commands(&WithModule(p.clone()));
}

#[test]
fn absurd_inputs_get_exact_errors_and_the_server_stays_up() {
    suite::absurd_inputs_get_exact_errors_and_the_server_stays_up(&REDIS);
}

#[test]
fn maxmemory_bounds_loadchunk_and_creation() {
    suite::maxmemory_bounds_loadchunk_and_creation(&REDIS);
}

#[test]
fn command_info_reports_arity_and_key() {
    suite::command_info_reports_arity_and_key(&REDIS);
}

#[test]
fn configured_defaults_drive_auto_create() {
    suite::configured_defaults_drive_auto_create(&REDIS);
}

#[test]
fn module_version_as_clients_see_it() {
    suite::module_version_as_clients_see_it(&REDIS);
}

// ------------------------------------------------------------------------------------------------
// Helpers.

fn rdb_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift/tests/fixtures/rdb")
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).expect("base64")
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).escape_debug().to_string()
}

fn cmd(c: &mut Raw, args: &[&str]) -> Vec<u8> {
    c.cmd(args)
}

/// Parses `*2 :<n> $<len> <data>` / `*2 :0 $-1` (a SCANDUMP reply).
fn pair(r: &[u8]) -> (i64, Option<Vec<u8>>) {
    assert!(r.starts_with(b"*2\r\n:"), "{}", show(r));
    let rest = &r[5..];
    let nl = rest.iter().position(|&b| b == b'\r').unwrap();
    let n: i64 = std::str::from_utf8(&rest[..nl]).unwrap().parse().unwrap();
    let rest = &rest[nl + 2..];
    if rest.starts_with(b"$-1") {
        return (n, None);
    }
    let nl = rest.iter().position(|&b| b == b'\r').unwrap();
    let len: usize = std::str::from_utf8(&rest[1..nl]).unwrap().parse().unwrap();
    (n, Some(rest[nl + 2..nl + 2 + len].to_vec()))
}

/// Everything observable about a filter key: TYPE, the whole SCANDUMP, INFO, DEBUG.
fn snapshot(c: &mut Raw, key: &str) -> Vec<Vec<u8>> {
    let ty = cmd(c, &["TYPE", key]);
    let p = if ty == b"+MBbloom--\r\n" { "BF" } else { "CF" };
    let mut out = vec![ty];
    let mut it = 0i64;
    loop {
        let r = cmd(c, &[&format!("{p}.SCANDUMP"), key, &it.to_string()]);
        let (next, _) = pair(&r);
        out.push(r);
        if next == 0 {
            break;
        }
        it = next;
    }
    out.push(cmd(c, &[&format!("{p}.INFO"), key]));
    out.push(cmd(c, &[&format!("{p}.DEBUG"), key]));
    out
}

/// A varied set of filters: every chain shape and cuckoo state the fixtures have.
fn populate(c: &mut Raw) -> Vec<&'static str> {
    let mut run = |args: Vec<String>| {
        let r = c.cmd_bytes(&args);
        assert!(!r.starts_with(b"-"), "{args:?}: {}", show(&r));
    };
    let items = |prefix: &'static str, n: usize| (0..n).map(move |i| format!("{prefix}{i}"));
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    run([s(&["BF.MADD", "bf_auto"]), items("a", 50).collect()].concat());
    run(s(&["BF.RESERVE", "bf_scaling", "0.01", "10", "EXPANSION", "2"]));
    run([s(&["BF.MADD", "bf_scaling"]), items("s", 200).collect()].concat());
    run(s(&["BF.RESERVE", "bf_ns", "0.001", "50", "NONSCALING"]));
    run([s(&["BF.MADD", "bf_ns"]), items("n", 20).collect()].concat());
    run([
        s(&["BF.INSERT", "bf_ins", "CAPACITY", "7", "ERROR", "0.2", "EXPANSION", "3", "ITEMS"]),
        items("x", 60).collect(),
    ]
    .concat());
    run(s(&["CF.RESERVE", "cf_grow", "16", "BUCKETSIZE", "4", "EXPANSION", "2", "MAXITERATIONS", "50"]));
    run([s(&["CF.INSERT", "cf_grow", "ITEMS"]), items("d", 150).collect()].concat());
    for i in 0..10 {
        run(s(&["CF.DEL", "cf_grow", &format!("d{i}")]));
    }
    run(s(&["CF.ADD", "cf_auto", "x"]));
    run(s(&["CF.RESERVE", "cf_empty", "8"]));
    run(s(&["PEXPIREAT", "bf_ns", "4102444800000"]));
    vec!["bf_auto", "bf_scaling", "bf_ns", "bf_ins", "cf_grow", "cf_auto", "cf_empty"]
}

fn snapshots(c: &mut Raw, keys: &[&str]) -> BTreeMap<String, Vec<Vec<u8>>> {
    keys.iter().map(|k| (k.to_string(), snapshot(c, k))).collect()
}

fn info_field(c: &mut Raw, section: &str, field: &str) -> String {
    let r = String::from_utf8_lossy(&cmd(c, &["INFO", section])).into_owned();
    r.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .to_string()
}

/// The RDB file at `path` has the format version `p` writes (its `REDIS00nn` magic).
fn assert_rdb_version(path: &Path, p: &Program) {
    let data = std::fs::read(path).unwrap();
    assert_eq!(show(&data[..9]), format!("REDIS{:04}", p.rdb_version()), "{}", path.display());
}

// ------------------------------------------------------------------------------------------------
// Persistence.

on_redis_and_valkey!(
    save_restart_and_debug_reload:
    save_restart_and_debug_reload_keep_every_filter_identical,
    valkey_save_restart_and_debug_reload_keep_every_filter_identical
);

fn save_restart_and_debug_reload(p: &Program) {
    let dir = temp_dir("save");
    let srv = p.start_in(&dir, &[], &[]);
    let mut c = srv.raw();
    let keys = populate(&mut c);
    let before = snapshots(&mut c, &keys);
    assert_eq!(cmd(&mut c, &["SAVE"]), b"+OK\r\n");
    assert_rdb_version(&dir.join("dump.rdb"), p);
    srv.shutdown(false);
    // A different configuration at restart changes nothing in stored filters.
    let srv = p.start_in(&dir, &[], &["ERROR_RATE", "0.2", "cf-bucket-size", "4"]);
    let mut c = srv.raw();
    assert_eq!(snapshots(&mut c, &keys), before, "after SAVE + restart");
    assert_eq!(cmd(&mut c, &["PEXPIRETIME", "bf_ns"]), b":4102444800000\r\n");
    assert_eq!(cmd(&mut c, &["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(snapshots(&mut c, &keys), before, "after DEBUG RELOAD");
    // DEBUG DIGEST-VALUE uses the digest callback: equal filters, equal digests.
    let d1 = cmd(&mut c, &["DEBUG", "DIGEST-VALUE", "bf_scaling", "cf_grow"]);
    assert_eq!(cmd(&mut c, &["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(cmd(&mut c, &["DEBUG", "DIGEST-VALUE", "bf_scaling", "cf_grow"]), d1);
    assert!(!d1.windows(40).any(|w| w == [b'0'; 40]), "digests are not empty: {}", show(&d1));
    srv.shutdown(false);
}

/// Commands, each a list of arguments.
type Commands = Vec<Vec<Vec<u8>>>;

/// The commands of a plain (no RDB preamble) AOF file.
fn parse_aof(data: &[u8]) -> Commands {
    let mut out = Vec::new();
    let mut i = 0;
    let line = |i: &mut usize| -> Vec<u8> {
        let end = data[*i..].windows(2).position(|w| w == b"\r\n").unwrap() + *i;
        let l = data[*i..end].to_vec();
        *i = end + 2;
        l
    };
    while i < data.len() {
        let head = line(&mut i);
        assert_eq!(head[0], b'*', "plain AOF: {}", show(&head));
        let n: usize = std::str::from_utf8(&head[1..]).unwrap().parse().unwrap();
        let mut cmd = Vec::new();
        for _ in 0..n {
            let h = line(&mut i);
            let len: usize = std::str::from_utf8(&h[1..]).unwrap().parse().unwrap();
            cmd.push(data[i..i + len].to_vec());
            i += len + 2;
        }
        out.push(cmd);
    }
    out
}

/// The base and incremental files of Redis 7's multi-part AOF, in order.
fn aof_commands(dir: &Path) -> (Commands, Commands) {
    let aofdir = dir.join("appendonlydir");
    let mut base = Vec::new();
    let mut incr = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&aofdir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".base.aof") {
            base = parse_aof(&std::fs::read(&f).unwrap());
        } else if name.ends_with(".incr.aof") {
            incr.extend(parse_aof(&std::fs::read(&f).unwrap()));
        }
    }
    (base, incr)
}

on_redis_and_valkey!(
    aof_rewrite_and_restart:
    aof_rewrite_and_restart_keep_every_filter_identical,
    valkey_aof_rewrite_and_restart_keep_every_filter_identical
);

fn aof_rewrite_and_restart(p: &Program) {
    let dir = temp_dir("aof");
    let srv = p.start_in(&dir, AOF, &[]);
    let mut c = srv.raw();
    let keys = populate(&mut c);
    let before = snapshots(&mut c, &keys);
    assert!(cmd(&mut c, &["BGREWRITEAOF"]).starts_with(b"+"));
    wait_aof_rewrite(&mut c);
    let (base, _) = aof_commands(&dir);
    let loadchunks = base.iter().filter(|c| c[0].ends_with(b".LOADCHUNK")).count();
    assert!(loadchunks >= keys.len() * 2, "the base holds LOADCHUNK commands: {loadchunks}");
    // Writes after the rewrite go to the incremental file and replay on top of the base.
    assert_eq!(cmd(&mut c, &["BF.ADD", "bf_auto", "after-rewrite"]), b":1\r\n");
    let after = snapshot(&mut c, "bf_auto");
    srv.shutdown(false);
    let srv = p.start_in(&dir, AOF, &["ERROR_RATE", "0.2"]);
    let mut c = srv.raw();
    let mut expected = before.clone();
    expected.insert("bf_auto".into(), after);
    assert_eq!(snapshots(&mut c, &keys), expected, "after AOF rewrite + restart");
    srv.shutdown(false);
}

/// A DUMP reply's payload without its trailer (RDB version and CRC64): the value as the module
/// encoded it, comparable between servers that write different RDB versions.
fn dump_body(c: &mut Raw, key: &str) -> Vec<u8> {
    let r = cmd(c, &["DUMP", key]);
    assert_eq!(r[0], b'$', "DUMP {key}: {}", show(&r));
    let start = r.iter().position(|&b| b == b'\n').unwrap() + 1;
    r[start..r.len() - 2 - 10].to_vec()
}

/// Valkey 8 saves RDB version 11, which redis-server 7.0 refuses to load (it exits); a plain
/// AOF (no RDB preamble) rewritten on Valkey replays on Redis 7.0 with every filter and sketch
/// as it was (the way back the README gives).
#[test]
fn valkey_rdb_is_refused_by_redis_70_and_its_plain_aof_replays_there() {
    let Some(valkey) = Program::valkey() else { return };
    let dir = temp_dir("valkey-to-redis");
    let srv = valkey.start_in(&dir, AOF, &[]);
    let mut c = srv.raw();
    let keys = populate(&mut c);
    let sketches: &[&[&str]] = &[
        &["CMS.INITBYDIM", "cms", "40", "3"],
        &["CMS.INCRBY", "cms", "a", "5", "b", "7"],
        &["TOPK.RESERVE", "tk", "3", "8", "3", "0.9"],
        &["TOPK.ADD", "tk", "a", "b", "c", "a", "d", "a", "b"],
        &["TDIGEST.CREATE", "td", "COMPRESSION", "50"],
        &["TDIGEST.ADD", "td", "0.1", "0.2", "3", "4.5", "100"],
    ];
    for args in sketches {
        let r = cmd(&mut c, args);
        assert!(!r.starts_with(b"-"), "{args:?}: {}", show(&r));
    }
    let before = snapshots(&mut c, &keys);
    let sketch_bodies: Vec<Vec<u8>> = ["cms", "tk", "td"].iter().map(|k| dump_body(&mut c, k)).collect();
    assert_eq!(cmd(&mut c, &["SAVE"]), b"+OK\r\n");
    assert_rdb_version(&dir.join("dump.rdb"), &valkey);
    assert!(cmd(&mut c, &["BGREWRITEAOF"]).starts_with(b"+"));
    wait_aof_rewrite(&mut c);
    drop(c);
    srv.shutdown(false);
    // Without the AOF, redis-server loads dump.rdb: it refuses the version and exits.
    let refused = RedisServer::try_start_program(&Program::Redis, &dir, &[], &[]);
    let log = refused.err().expect("redis-server 7.0 started on Valkey's RDB 11 file");
    assert!(log.contains("Can't handle RDB format version 11"), "{log}");
    // With it, the rewritten base (LOADCHUNK and RESTORE of RDB 10 payloads) replays.
    let srv = Program::Redis.start_in(&dir, AOF, &[]);
    let mut c = srv.raw();
    assert_eq!(snapshots(&mut c, &keys), before, "Valkey's plain AOF replayed by Redis 7.0");
    let after: Vec<Vec<u8>> = ["cms", "tk", "td"].iter().map(|k| dump_body(&mut c, k)).collect();
    assert_eq!(after, sketch_bodies);
    drop(c);
    srv.shutdown(false);
}

/// An auto-created filter reaches the AOF (and replicas) as `LOADCHUNK <header>` + the command:
/// replayed under another configuration, it is the same filter.
#[test]
fn auto_create_is_logged_with_the_parameters_used() {
    let dir = temp_dir("autocreate");
    let srv = RedisServer::start_in(
        &dir,
        AOF,
        &["ERROR_RATE", "0.001", "INITIAL_SIZE", "500", "bf-expansion-factor", "0"],
    );
    let mut c = srv.raw();
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "bf.cf-initial-size", "64", "bf.cf-expansion-factor", "3"]),
        b"+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["BF.ADD", "b", "x"]), b":1\r\n");
    assert_eq!(cmd(&mut c, &["BF.MADD", "m", "x", "y"]), b"*2\r\n:1\r\n:1\r\n");
    assert_eq!(cmd(&mut c, &["CF.ADD", "c", "x"]), b":1\r\n");
    assert_eq!(cmd(&mut c, &["CF.INSERTNX", "d", "ITEMS", "x"]), b"*1\r\n:1\r\n");
    assert_eq!(cmd(&mut c, &["BF.ADD", "b", "y"]), b":1\r\n");
    let keys = ["b", "m", "c", "d"];
    let before = snapshots(&mut c, &keys);
    let (_, incr) = aof_commands(&dir);
    let names: Vec<String> = incr
        .iter()
        .map(|c| String::from_utf8_lossy(&c[0]).to_ascii_uppercase())
        .filter(|n| n != "SELECT")
        .collect();
    let expected = [
        "MULTI",
        "BF.LOADCHUNK",
        "BF.ADD",
        "EXEC",
        "MULTI",
        "BF.LOADCHUNK",
        "BF.MADD",
        "EXEC",
        "MULTI",
        "CF.LOADCHUNK",
        "CF.ADD",
        "EXEC",
        "MULTI",
        "CF.LOADCHUNK",
        "CF.INSERTNX",
        "EXEC",
        "BF.ADD",
    ];
    let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    assert_eq!(names, expected, "{incr:?}");
    srv.shutdown(false);
    // Default configuration at restart: the logged headers rebuild the same filters.
    let srv = RedisServer::start_in(&dir, AOF, &[]);
    let mut c = srv.raw();
    assert_eq!(snapshots(&mut c, &keys), before);
    srv.shutdown(false);
}

// ------------------------------------------------------------------------------------------------
// RedisBloom's own files.

fn keys_json() -> J {
    serde_json::from_str(&std::fs::read_to_string(rdb_fixtures().join("keys.json")).unwrap()).unwrap()
}

/// The SCANDUMP wire bytes of a golden `scandump` list.
fn golden_scandump(list: &J) -> Vec<Vec<u8>> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let mut out = format!("*2\r\n:{}\r\n", l[0]).into_bytes();
            match &l[1] {
                J::Null => out.extend_from_slice(b"$-1\r\n"),
                J::String(s) => {
                    let d = b64(s);
                    out.extend_from_slice(format!("${}\r\n", d.len()).as_bytes());
                    out.extend_from_slice(&d);
                    out.extend_from_slice(b"\r\n");
                }
                J::Object(o) => {
                    let d = b64(o["b64"].as_str().unwrap());
                    out.extend_from_slice(format!("${}\r\n", d.len()).as_bytes());
                    out.extend_from_slice(&d);
                    out.extend_from_slice(b"\r\n");
                }
                other => panic!("scandump element {other}"),
            }
            out
        })
        .collect()
}

fn full_scandump(c: &mut Raw, p: &str, key: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut it = 0i64;
    loop {
        let r = cmd(c, &[&format!("{p}.SCANDUMP"), key, &it.to_string()]);
        let (next, _) = pair(&r);
        out.push(r);
        if next == 0 {
            return out;
        }
        it = next;
    }
}

fn check_golden_key(c: &mut Raw, name: &str, k: &J, as_key: &str) {
    let p = if k["type"] == "MBbloom--" { "BF" } else { "CF" };
    assert_eq!(cmd(c, &["TYPE", as_key]), format!("+{}\r\n", k["type"].as_str().unwrap()).into_bytes());
    let got = full_scandump(c, p, as_key);
    let want = golden_scandump(&k["scandump"]);
    assert_eq!(
        got.iter().map(|g| show(g)).collect::<Vec<_>>(),
        want.iter().map(|g| show(g)).collect::<Vec<_>>(),
        "{name}"
    );
    let debug = cmd(c, &[&format!("{p}.DEBUG"), as_key]);
    let want_debug = match &k["debug"] {
        J::String(s) => s.clone(),
        J::Array(a) => a.iter().map(|l| l.as_str().unwrap().to_string()).collect::<Vec<_>>().join("\n"),
        other => panic!("{other}"),
    };
    for line in want_debug.lines() {
        assert!(show(&debug).contains(line), "{name} DEBUG {} lacks {line}", show(&debug));
    }
}

on_redis_and_valkey!(
    golden_dump_rdb_loads_and_answers:
    golden_redisbloom_dump_rdb_loads_and_answers_its_scandumps,
    valkey_golden_redisbloom_dump_rdb_loads_and_answers_its_scandumps
);

/// RedisBloom's `dump.rdb` (RDB 10) loads with the module and answers its golden SCANDUMPs;
/// saved again (RDB 10 by Redis 7.0, 11 by Valkey 8) it holds the same keys and fields.
fn golden_dump_rdb_loads_and_answers(p: &Program) {
    let dir = temp_dir("golden");
    std::fs::copy(rdb_fixtures().join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let srv = p.start_in(&dir, &["--dbfilename", "dump.rdb"], &[]);
    let mut c = srv.raw();
    let keys = keys_json();
    let keys = keys["keys"].as_object().unwrap();
    assert_eq!(cmd(&mut c, &["DBSIZE"]), format!(":{}\r\n", keys.len()).into_bytes());
    for (name, k) in keys {
        check_golden_key(&mut c, name, k, name);
        if let Some(at) = k["expire_at_ms"].as_i64() {
            assert_eq!(cmd(&mut c, &["PEXPIRETIME", name]), format!(":{at}\r\n").into_bytes());
        }
    }
    // Saved again by sift-redis, the file decodes to the same keys and fields.
    let golden = sift::compat::redisbloom::rdb::read_rdb(
        &std::fs::read(rdb_fixtures().join("dump.rdb")).unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(cmd(&mut c, &["SAVE"]), b"+OK\r\n");
    assert_rdb_version(&dir.join("dump.rdb"), p);
    let ours = sift::compat::redisbloom::rdb::read_rdb(
        &std::fs::read(dir.join("dump.rdb")).unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert!(ours.checksum_verified);
    let by_key = |f: &sift::compat::redisbloom::rdb::RdbFile| {
        f.keys.iter().map(|k| (k.key.clone(), (k.expire_at_ms, k.value.clone()))).collect::<BTreeMap<_, _>>()
    };
    assert_eq!(by_key(&ours), by_key(&golden));
    srv.shutdown(false);
}

#[test]
fn golden_dump_payloads_restore_and_dump_back_identically() {
    let srv = RedisServer::start(&[], &[]);
    let mut c = srv.raw();
    let keys = keys_json();
    for (name, k) in keys["keys"].as_object().unwrap() {
        let payload = b64(k["dump_b64"].as_str().unwrap());
        let as_key = format!("restored:{name}");
        let r =
            c.cmd_bytes(&[b"RESTORE".to_vec(), as_key.clone().into_bytes(), b"0".to_vec(), payload.clone()]);
        assert_eq!(r, b"+OK\r\n", "{name}: {}", show(&r));
        check_golden_key(&mut c, name, k, &as_key);
        // Same fields, same Redis: DUMP gives RedisBloom's bytes back.
        let dumped = cmd(&mut c, &["DUMP", &as_key]);
        let mut want = format!("${}\r\n", payload.len()).into_bytes();
        want.extend_from_slice(&payload);
        want.extend_from_slice(b"\r\n");
        assert_eq!(show(&dumped), show(&want), "{name}");
    }
    // A corrupted value (its encver raised to 5) is refused, and the server stays up.
    let mut bad = b64(keys["keys"]["bf_default"]["dump_b64"].as_str().unwrap());
    bad[9] = (bad[9] & !0x03) | 0x01; // encver 4 → 5 in the module id's low bits
    let n = bad.len() - 8;
    let crc = sift::compat::redisbloom::rdb::crc64(0, &bad[..n]);
    bad[n..].copy_from_slice(&crc.to_le_bytes());
    let r = c.cmd_bytes(&[b"RESTORE".to_vec(), b"bad".to_vec(), b"0".to_vec(), bad]);
    assert_eq!(show(&r), show(b"-ERR Bad data format\r\n"));
    assert_eq!(cmd(&mut c, &["PING"]), b"+PONG\r\n");
}

#[test]
fn aof_rewrite_emits_redisbloom_loadchunk_sequence() {
    let dir = temp_dir("aofgolden");
    std::fs::copy(rdb_fixtures().join("dump.rdb"), dir.join("dump.rdb")).unwrap();
    let srv = RedisServer::start_in(&dir, &["--dbfilename", "dump.rdb", "--aof-use-rdb-preamble", "no"], &[]);
    let mut c = srv.raw();
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "appendonly", "yes"]), b"+OK\r\n");
    wait_aof_rewrite(&mut c);
    std::thread::sleep(Duration::from_millis(200));
    wait_aof_rewrite(&mut c);
    let (base, _) = aof_commands(&dir);
    let golden: J =
        serde_json::from_str(&std::fs::read_to_string(rdb_fixtures().join("aof_rewrite.json")).unwrap())
            .unwrap();
    let want: Vec<Vec<Vec<u8>>> = golden["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cmd| {
            cmd.as_array()
                .unwrap()
                .iter()
                .map(|a| match a {
                    J::String(s) => s.as_bytes().to_vec(),
                    J::Object(o) => b64(o["b64"].as_str().unwrap()),
                    J::Number(n) => n.to_string().into_bytes(),
                    other => panic!("{other}"),
                })
                .collect()
        })
        .collect();
    // Key order in a rewrite follows the hash table; compare per key, in order within a key.
    let group = |cmds: &[Vec<Vec<u8>>]| {
        let mut m: BTreeMap<Vec<u8>, Vec<Vec<Vec<u8>>>> = BTreeMap::new();
        for c in cmds {
            if c.len() > 1 && c[0] != b"SELECT" {
                m.entry(c[1].clone()).or_default().push(c.clone());
            }
        }
        m
    };
    assert_eq!(group(&base), group(&want));
    srv.shutdown(false);
}

// ------------------------------------------------------------------------------------------------
// Introspection.

on_redis_and_valkey!(type_memory_usage_and_configs: type_and_memory_usage, valkey_type_and_memory_usage);

/// The same types, module listing and configs; MEMORY USAGE with Valkey's per-key overhead.
fn type_memory_usage_and_configs(p: &Program) {
    let srv = p.start(&[], &[]);
    let mut c = srv.raw();
    // MEMORY USAGE is the module's callback plus the server's own cost of a key, 8 bytes less on
    // Valkey 8 than on Redis 7.0 for these short keys.
    let usage = |redis_70: u64| {
        let n = if *p == Program::Redis { redis_70 } else { redis_70 - 8 };
        format!(":{n}\r\n").into_bytes()
    };
    assert_eq!(cmd(&mut c, &["BF.ADD", "bf", "x"]), b":1\r\n");
    assert_eq!(cmd(&mut c, &["CF.ADD", "cf", "x"]), b":1\r\n");
    assert_eq!(cmd(&mut c, &["TYPE", "bf"]), b"+MBbloom--\r\n");
    assert_eq!(cmd(&mut c, &["TYPE", "cf"]), b"+MBbloomCF\r\n");
    assert_eq!(cmd(&mut c, &["TYPE", "none"]), b"+none\r\n");
    // Redis 7.0.15 with RedisBloom: INFO Size + 32 for short keys (spec §10).
    assert_eq!(cmd(&mut c, &["MEMORY", "USAGE", "bf"]), usage(272));
    assert_eq!(cmd(&mut c, &["BF.RESERVE", "bf2", "0.05", "1000"]), b"+OK\r\n");
    assert_eq!(cmd(&mut c, &["MEMORY", "USAGE", "bf2"]), usage(1088));
    assert_eq!(cmd(&mut c, &["CF.RESERVE", "cf2", "1000"]), b"+OK\r\n");
    assert_eq!(cmd(&mut c, &["MEMORY", "USAGE", "cf2"]), usage(1112));
    assert_eq!(cmd(&mut c, &["MEMORY", "USAGE", "missing"]), b"$-1\r\n");
    // Module listing and configs.
    let modules = String::from_utf8_lossy(&cmd(&mut c, &["MODULE", "LIST"])).into_owned();
    assert!(modules.contains("\r\nbf\r\n"), "{modules}");
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "bf.bf-error-rate"]),
        b"*2\r\n$16\r\nbf.bf-error-rate\r\n$4\r\n0.01\r\n"
    );
    let e = String::from_utf8_lossy(&cmd(&mut c, &["CONFIG", "SET", "bf.bf-error-rate", "2"])).into_owned();
    assert!(e.contains("must be in the range (0.000000, 1.000000)"), "{e}");
    assert_eq!(cmd(&mut c, &["CONFIG", "SET", "bf.bf-error-rate", "0.5"]), b"+OK\r\n");
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "bf.bf-error-rate"]),
        b"*2\r\n$16\r\nbf.bf-error-rate\r\n$4\r\n0.25\r\n"
    );
}

#[test]
fn load_arguments_set_the_defaults() {
    let srv =
        RedisServer::start(&[], &["ERROR_RATE", "0.001", "INITIAL_SIZE", "500", "bf-expansion-factor", "0"]);
    let mut c = srv.raw();
    assert_eq!(cmd(&mut c, &["BF.ADD", "b", "x"]), b":1\r\n");
    assert_eq!(
        show(&cmd(&mut c, &["BF.DEBUG", "b"])),
        show(b"*2\r\n$6\r\nsize:1\r\n$74\r\nbytes:904 bits:7232 hashes:10 hashwidth:64 capacity:500 size:1 ratio:0.001\r\n")
    );
    assert_eq!(
        cmd(&mut c, &["CONFIG", "GET", "bf.bf-initial-size"]),
        b"*2\r\n$18\r\nbf.bf-initial-size\r\n$3\r\n500\r\n"
    );
}

on_redis_and_valkey!(
    replica_holds_the_primary_filters:
    replica_holds_the_primary_filters_whatever_its_configuration,
    valkey_replica_holds_the_primary_filters_whatever_its_configuration
);

/// A replica with another configuration receives the explicit header of every auto-created
/// filter, so it holds exactly its primary's filters.
fn replica_holds_the_primary_filters(p: &Program) {
    let primary = p.start(
        &[],
        &[
            "ERROR_RATE",
            "0.001",
            "bf-expansion-factor",
            "3",
            "cf-max-iterations",
            "9",
            "cf-expansion-factor",
            "2",
        ],
    );
    let port = primary.port().to_string();
    let replica = p.start(&["--replicaof", "127.0.0.1", &port], &["cf-bucket-size", "4"]);
    let mut p = primary.raw();
    let mut r = replica.raw();
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut r, "replication", "master_link_status") != "up" {
        assert!(Instant::now() < deadline, "replica did not connect");
        std::thread::sleep(Duration::from_millis(50));
    }
    let keys = populate(&mut p);
    assert_eq!(cmd(&mut p, &["CF.ADDNX", "cf_auto2", "y"]), b":1\r\n");
    // Options left out of a RESERVE take the primary's configuration too.
    assert_eq!(cmd(&mut p, &["BF.RESERVE", "bf_res", "0.01", "100"]), b"+OK\r\n");
    assert_eq!(cmd(&mut p, &["CF.RESERVE", "cf_res", "100"]), b"+OK\r\n");
    assert_eq!(cmd(&mut p, &["WAIT", "1", "5000"]), b":1\r\n");
    let mut all = keys.clone();
    all.extend(["cf_auto2", "bf_res", "cf_res"]);
    assert_eq!(snapshots(&mut r, &all), snapshots(&mut p, &all));
    assert_eq!(cmd(&mut r, &["BF.EXISTS", "bf_auto", "a7"]), b":1\r\n");
}

#[test]
fn sf_redis_crate_resp2() {
    suite::sf::sf_redis_crate(&REDIS, false);
}

#[test]
fn sf_redis_crate_resp3() {
    suite::sf::sf_redis_crate(&REDIS, true);
}

#[test]
fn sf_bad_input_changes_nothing() {
    suite::sf::sf_bad_input_changes_nothing(&REDIS);
}

#[test]
fn sf_pieces_and_foreign_files() {
    suite::sf::sf_pieces_and_foreign_files(&REDIS);
}

#[test]
fn sf_command_metadata() {
    suite::sf::sf_command_metadata(&REDIS);
}

#[test]
fn sf_redis_py() {
    suite::sf::sf_redis_py(&REDIS);
}
