//! Hostile RDB input through a real `redis-server` with the module loaded, over the wire only:
//! `RESTORE` payloads with a correct RDB version and CRC64 footer (so Redis hands the value to
//! the module) whose module value is truncated, has an encver the module does not know, or
//! claims absurd sizes; and `dump.rdb` files with the same values and a correct file checksum,
//! loaded at start. The server must refuse each cleanly: `RESTORE` answers an error, leaves no
//! key and the server keeps answering; a bad file makes redis-server stop loading and exit
//! after logging why, never die of a signal or a Rust panic. The library's own decoder
//! (`sift::compat::redisbloom::rdb`) is the oracle for which payloads are hostile, and a valid
//! value built the same way is the control that the crafting itself is right.

mod support;

#[path = "../../sift-server/tests/suite/client.rs"]
#[allow(dead_code)]
mod client;

use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use client::Raw;
use sift::compat::redisbloom::rdb::{
    crc64, module_type_id, read_rdb, read_value, restore_payload, write_length, write_rdb, write_string,
    RdbCursor, RdbKey, RdbValue, ReadOptions, BLOOM_TYPE_NAME, CUCKOO_TYPE_NAME, ENCVER, OPCODE_DOUBLE,
    OPCODE_EOF, OPCODE_STRING, OPCODE_UINT,
};
use sift::compat::redisbloom::BloomChain;
use support::{module_path, temp_dir, RedisServer};

/// The value type byte of a module value (`RDB_TYPE_MODULE_2`).
const TYPE_MODULE: u8 = 7;
/// The RDB version Redis 7.0 writes and reads.
const RDB_VERSION: u16 = 10;

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).escape_debug().to_string()
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).expect("base64")
}

/// The golden DUMP payloads of RedisBloom (`keys.json` of the RDB fixtures): (name, payload).
fn golden_payloads() -> Vec<(String, Vec<u8>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift/tests/fixtures/rdb/keys.json");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["keys"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, k)| (name.clone(), b64(k["dump_b64"].as_str().unwrap())))
        .collect()
}

/// `value` (type byte and body) with a DUMP footer: RDB version 10 and the CRC64 of all before it.
fn payload(value: &[u8]) -> Vec<u8> {
    let mut out = value.to_vec();
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// One field of a module value, as `RedisModule_Save*` frames it in RDB version 10.
enum F<'a> {
    U(u64),
    D(f64),
    S(&'a [u8]),
    /// A string field's header claiming `n` bytes, with none of them after it.
    StringHeader(u64),
}

/// A module value: type byte, module id (type name and encver), fields, EOF opcode.
fn module_value(type_name: &str, encver: u32, fields: &[F<'_>]) -> Vec<u8> {
    let mut out = vec![TYPE_MODULE];
    write_length(&mut out, module_type_id(type_name, encver).expect("valid name and encver"));
    for f in fields {
        match f {
            F::U(v) => {
                write_length(&mut out, OPCODE_UINT);
                write_length(&mut out, *v);
            }
            F::D(v) => {
                write_length(&mut out, OPCODE_DOUBLE);
                out.extend_from_slice(&v.to_le_bytes());
            }
            F::S(s) => {
                write_length(&mut out, OPCODE_STRING);
                write_string(&mut out, s);
            }
            F::StringHeader(n) => {
                write_length(&mut out, OPCODE_STRING);
                write_length(&mut out, *n);
            }
        }
    }
    write_length(&mut out, OPCODE_EOF);
    out
}

/// The golden value `value` (type byte, module id, fields, EOF) with its encver replaced.
fn with_encver(value: &[u8], encver: u32) -> Vec<u8> {
    assert_eq!(value[0], TYPE_MODULE);
    // The module id is a 64-bit length (0x81 then 8 big-endian bytes); encver is its low 10 bits.
    assert_eq!(value[1], 0x81, "module id encoded as a 64-bit length");
    let mut id = u64::from_be_bytes(value[2..10].try_into().unwrap());
    id = (id & !1023) | encver as u64;
    let mut out = value.to_vec();
    out[2..10].copy_from_slice(&id.to_be_bytes());
    out
}

/// A Bloom link's fields (encver 4): entries, error, hashes, bpe, bits, n2, bitmap, size.
fn bloom_link<'a>(bits: u64, bitmap: F<'a>, hashes: u64, n2: u64) -> Vec<F<'a>> {
    vec![
        F::U(0),
        F::D(0.01),
        F::U(hashes),
        F::D(9.585_058_377_700_372),
        F::U(bits),
        F::U(n2),
        bitmap,
        F::U(100),
    ]
}

/// Hostile `MBbloom--` and `MBbloomCF` values at encver 4 with sizes no filter has: (what, value).
fn absurd_values() -> Vec<(&'static str, Vec<u8>)> {
    let bitmap = [0u8; 128];
    let bloom = |head: Vec<F<'static>>, link: Vec<F<'_>>| {
        let mut fields = head;
        fields.extend(link);
        module_value(BLOOM_TYPE_NAME, ENCVER, &fields)
    };
    let head = |nfilters: u64| vec![F::U(0), F::U(nfilters), F::U(0), F::U(2)];
    let cuckoo = |num_filters: u64, num_buckets: u64, bucket_size: u64, nb: u64, slots: F<'_>| {
        module_value(
            CUCKOO_TYPE_NAME,
            ENCVER,
            &[
                F::U(num_filters),
                F::U(num_buckets),
                F::U(0),
                F::U(0),
                F::U(bucket_size),
                F::U(20),
                F::U(1),
                F::U(nb),
                slots,
            ],
        )
    };
    vec![
        ("bloom: no links", module_value(BLOOM_TYPE_NAME, ENCVER, &head(0))),
        ("bloom: 2^64-1 links, one present", bloom(head(u64::MAX), bloom_link(1024, F::S(&bitmap), 7, 10))),
        (
            "bloom: 2^63 bits over a 128-byte bitmap",
            bloom(head(1), bloom_link(1 << 63, F::S(&bitmap), 7, 10)),
        ),
        (
            "bloom: a bitmap of 2^40 bytes announced",
            bloom(head(1), bloom_link(1 << 43, F::StringHeader(1 << 40), 7, 40)),
        ),
        (
            "bloom: a bitmap of 2^62 bytes announced",
            bloom(head(1), bloom_link(1 << 60, F::StringHeader(1 << 62), 7, 60)),
        ),
        ("bloom: 2^40 hash functions", bloom(head(1), bloom_link(1024, F::S(&bitmap), 1 << 40, 10))),
        ("bloom: n2 = 300", bloom(head(1), bloom_link(1024, F::S(&bitmap), 7, 300))),
        ("cuckoo: no sub-filters", cuckoo(0, 64, 2, 64, F::S(&bitmap))),
        ("cuckoo: 70000 sub-filters", cuckoo(70_000, 64, 2, 64, F::S(&bitmap))),
        ("cuckoo: 2^60 buckets", cuckoo(1, 1 << 60, 2, 1 << 60, F::S(&bitmap))),
        ("cuckoo: bucket size 0", cuckoo(1, 64, 0, 64, F::S(&bitmap))),
        ("cuckoo: 2^50 buckets over 128 bytes of slots", cuckoo(1, 1 << 50, 2, 1 << 50, F::S(&bitmap))),
        ("cuckoo: slots of 2^40 bytes announced", cuckoo(1, 1 << 39, 2, 1 << 39, F::StringHeader(1 << 40))),
    ]
}

/// RESTOREs `payload` as `key` and checks the refusal: an error reply (the library's text), no
/// key, the server still answering.
fn assert_refused(c: &mut Raw, key: &str, payload: &[u8], what: &str) {
    let oracle = restore_payload(payload).expect_err(what);
    let r = c.cmd_bytes(&[b"RESTORE".as_slice(), key.as_bytes(), b"0", payload]);
    assert_eq!(show(&r), show(format!("-{}\r\n", oracle.restore_reply()).as_bytes()), "{what}");
    assert_eq!(c.cmd_text(&["EXISTS", key]), ":0\r\n", "{what}");
    assert_eq!(c.cmd_text(&["PING"]), "+PONG\r\n", "{what}");
}

/// The control: a value crafted by `module_value` that the library accepts RESTOREs.
fn valid_bloom_value() -> Vec<u8> {
    let mut chain = BloomChain::new(100, 0.01, 2, false).unwrap();
    chain.add(b"apple").unwrap();
    let mut fields =
        vec![F::U(chain.len()), F::U(1), F::U(chain.options() as u64), F::U(chain.growth() as u64)];
    let l = &chain.links()[0];
    fields.extend([
        F::U(l.entries()),
        F::D(l.error()),
        F::U(l.hashes() as u64),
        F::D(l.bpe()),
        F::U(l.bits()),
        F::U(l.n2() as u64),
        F::S(l.bitmap()),
        F::U(l.size()),
    ]);
    module_value(BLOOM_TYPE_NAME, ENCVER, &fields)
}

#[test]
fn a_crafted_valid_value_restores() {
    let srv = RedisServer::start(&[], &[]);
    let mut c = Raw::connect(srv.addr);
    let p = payload(&valid_bloom_value());
    assert!(matches!(restore_payload(&p), Ok(RdbValue::Bloom(_))));
    assert_eq!(c.cmd_bytes(&[b"RESTORE".as_slice(), b"ok", b"0", &p]), b"+OK\r\n");
    assert_eq!(c.cmd_text(&["BF.EXISTS", "ok", "apple"]), ":1\r\n");
    assert_eq!(c.cmd_text(&["BF.EXISTS", "ok", "pear"]), ":0\r\n");
}

/// Whether Redis 7.0's RESTORE can load `payload`: it checks the footer, then reads the value
/// from the whole payload, footer included, and does not require the value to end where the
/// footer starts. So a value cut just before its last field or its EOF opcode can be completed
/// by the footer's bytes (the RDB version 10 is `0a 00`: an integer 10, then the EOF opcode 0).
/// The module sees only the fields Redis hands it and cannot tell.
fn redis_restore_reads(payload: &[u8]) -> bool {
    let mut cur = RdbCursor::new(payload);
    let Ok(type_byte) = cur.read_u8("value type") else { return false };
    read_value(&mut cur, type_byte, &ReadOptions::default(), None).is_ok()
}

#[test]
fn truncated_values_are_refused() {
    let srv = RedisServer::start(&[], &[]);
    let mut c = Raw::connect(srv.addr);
    let (mut refused, mut completed_by_the_footer) = (0, 0);
    for (name, golden) in golden_payloads() {
        let value = &golden[..golden.len() - 10];
        // Every cut after the type byte and the module id, footer recomputed: the module sees
        // a value that ends early (inside a field, a string, or before the EOF opcode).
        for len in 10..value.len() {
            let p = payload(&value[..len]);
            let what = format!("{name} cut to {len}");
            if redis_restore_reads(&p) {
                // Completed by the footer (see redis_restore_reads): Redis loads what it reads.
                let r = c.cmd_bytes(&[b"RESTORE".as_slice(), b"f", b"0", &p, b"REPLACE"]);
                assert_eq!(show(&r), "+OK\\r\\n", "{what}");
                completed_by_the_footer += 1;
                eprintln!("{what}: completed by the footer, loaded");
            } else {
                assert_refused(&mut c, "t", &p, &what);
                refused += 1;
            }
        }
    }
    // 730 cuts of the six golden values; the footer completes a handful.
    assert!(
        refused > 700 && completed_by_the_footer < 20,
        "{refused} refused, {completed_by_the_footer} completed"
    );
    eprintln!("{refused} truncations refused, {completed_by_the_footer} completed by the footer's bytes");
}

#[test]
fn unknown_encvers_are_refused() {
    let srv = RedisServer::start(&[], &[]);
    let mut c = Raw::connect(srv.addr);
    for (name, golden) in golden_payloads() {
        let value = &golden[..golden.len() - 10];
        for encver in (ENCVER + 1..=64).chain([255, 1023]) {
            let p = payload(&with_encver(value, encver));
            assert_refused(&mut c, "e", &p, &format!("{name} at encver {encver}"));
        }
        // Older encvers read fewer fields: today's fields then misparse, and the value is
        // refused (or, if the library reads it, RESTORE agrees); never a crash.
        for encver in 0..ENCVER {
            let p = payload(&with_encver(value, encver));
            match restore_payload(&p) {
                Err(_) => assert_refused(&mut c, "e", &p, &format!("{name} at encver {encver}")),
                Ok(_) => {
                    let r = c.cmd_bytes(&[b"RESTORE".as_slice(), b"e", b"0", &p, b"REPLACE"]);
                    assert_eq!(show(&r), "+OK\\r\\n", "{name} at encver {encver}");
                }
            }
            assert_eq!(c.cmd_text(&["PING"]), "+PONG\r\n");
        }
    }
}

#[test]
fn absurd_sizes_are_refused_without_allocating_them() {
    let srv = RedisServer::start(&[], &[]);
    let mut c = Raw::connect(srv.addr);
    for (what, value) in absurd_values() {
        assert_refused(&mut c, "a", &payload(&value), what);
    }
    // None of the announced sizes was allocated: the server's peak resident memory stays small.
    let status = std::fs::read_to_string(format!("/proc/{}/status", srv.pid())).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    assert!(peak_kb < 256 * 1024, "redis-server peak RSS {peak_kb} kB");
}

/// Starts redis-server on `dir/dump.rdb` and waits for it to exit (it must: the file is bad),
/// returning its exit status and log. Redis ends a failed load through its built-in
/// redis-check-rdb, which exits 0 when its own, module-blind check of the file passes (the
/// module values it steps over), so a refusal exits 0 or 1; a crash is a signal.
fn load_bad_file(dir: &Path) -> (ExitStatus, String) {
    let log = dir.join("redis.log");
    let port = sift_testkit::free_port();
    let mut child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .arg("--dir")
        .arg(dir)
        .args(["--dbfilename", "dump.rdb", "--save", "", "--appendonly", "no"])
        .arg("--logfile")
        .arg(&log)
        .arg("--loadmodule")
        .arg(module_path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server (apt-get install redis-server)");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "redis-server kept running on a bad dump.rdb:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, std::fs::read_to_string(&log).unwrap_or_default())
}

/// A `dump.rdb` (correct header, EOF and file checksum) holding `value` as key `k`, which may be
/// any bytes after the type byte.
fn rdb_file(value: &[u8]) -> Vec<u8> {
    let v = RdbValue::Other { type_byte: value[0], raw: value[1..].to_vec() };
    write_rdb(&[RdbKey { db: 0, key: b"k".to_vec(), expire_at_ms: None, value: v }], 0)
}

#[test]
fn bad_values_in_dump_rdb_stop_the_load_cleanly() {
    // The control: the same file with a valid value loads and answers.
    let dir = temp_dir("rdbok");
    std::fs::write(dir.join("dump.rdb"), rdb_file(&valid_bloom_value())).unwrap();
    let srv = RedisServer::start_in(&dir, &["--dbfilename", "dump.rdb"], &[]);
    let mut c = Raw::connect(srv.addr);
    assert_eq!(c.cmd_text(&["BF.EXISTS", "k", "apple"]), ":1\r\n");
    srv.shutdown(false);
    drop(dir);

    let golden = golden_payloads();
    let (_, bf) = golden.iter().find(|(n, _)| n == "bf_default").unwrap();
    let bf = &bf[..bf.len() - 10];
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("bloom value cut inside its bitmap".into(), bf[..bf.len() - 20].to_vec()),
        ("bloom value cut before its EOF opcode".into(), bf[..bf.len() - 1].to_vec()),
        ("bloom value at encver 5".into(), with_encver(bf, 5)),
    ];
    cases.extend(absurd_values().into_iter().map(|(w, v)| (w.to_string(), v)));
    for (what, value) in cases {
        let file = rdb_file(&value);
        // The oracle: the library refuses the file too (and its checksum is right).
        assert!(read_rdb(&file, &Default::default()).is_err(), "{what}: the library reads it");
        let dir = temp_dir("rdbbad");
        std::fs::write(dir.join("dump.rdb"), &file).unwrap();
        let (status, log) = load_bad_file(&dir);
        assert!(
            matches!(status.code(), Some(0 | 1)),
            "{what}: redis-server ended with {status} (a signal is a crash):\n{log}"
        );
        assert!(!log.contains("panicked") && !log.contains("crashed by signal"), "{what}:\n{log}");
        let why = log
            .lines()
            .find(|l| l.contains("Internal error in RDB reading") || l.contains("Short read"))
            .unwrap_or_else(|| panic!("{what}: the log does not say why the load stopped:\n{log}"));
        eprintln!("{what}: {status}, {}", why.split(" # ").nth(1).unwrap_or(why));
    }
}
