//! The RDB golden file of RedisBloom 2.6.28 on Redis 7.0.15 (`tests/fixtures/rdb/`, spec §12.8)
//! read and written by `sift::compat::redisbloom::rdb`: every key's SCANDUMP rebuilt from the
//! decoded RDB value, the DUMP payloads, re-encoding, hand-built values of older encvers, and
//! corruption (every truncation, every single bit flip) that must give an error and never a
//! panic.

#[path = "support/ci.rs"]
mod ci;
#[path = "support/rdb_body.rs"]
mod rdb_body;

use std::path::PathBuf;

use base64::Engine as _;
use rdb_body::normalize_body;
use serde_json::{json, Value};
use sift::compat::redisbloom::rdb::{
    crc64, dump_payload, load_bloom, load_cuckoo, module_type_id, read_rdb, restore_payload, write_length,
    write_rdb, write_string, CuckooRdbDefaults, Field, FieldBuffer, RdbError, RdbKey, RdbValue, ReadOptions,
    BLOOM_TYPE_NAME, CUCKOO_TYPE_NAME, OPCODE_DOUBLE, OPCODE_STRING, OPCODE_UINT,
};
use sift::compat::redisbloom::{BloomChain, CuckooFilter, LoadLimits};

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rdb"))
}

fn dump_rdb() -> Vec<u8> {
    std::fs::read(fixtures().join("dump.rdb")).unwrap()
}

fn keys_json() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("keys.json")).unwrap()).unwrap()
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn b64_enc(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn bf_scandump(chain: &BloomChain) -> Vec<Value> {
    let mut out = Vec::new();
    let mut it = 0;
    while let Some((next, data)) = chain.scandump(it) {
        out.push(json!([next, b64_enc(&data)]));
        it = next;
    }
    out.push(json!([0, ""]));
    out
}

fn cf_scandump(cf: &CuckooFilter) -> Vec<Value> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some((next, data)) = cf.scandump(pos) {
        out.push(json!([next, b64_enc(&data)]));
        pos = next;
    }
    out.push(json!([0, null]));
    out
}

/// The in-repo copy (which every other test here reads) must equal the specification's fixture
/// folder beside the repository when that is present (absent in a lone clone; required in CI).
#[test]
fn fixture_copy_matches_the_spec() {
    let shared = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/spec/fixtures/rdb"));
    if !shared.is_dir() {
        assert!(!ci::in_ci(), "{} is missing: CI runs beside the specification's folder", shared.display());
        eprintln!("{} not present: skipping the copy check", shared.display());
        return;
    }
    for name in ["README.md", "dump.rdb", "keys.json", "aof_rewrite.json"] {
        assert!(
            std::fs::read(fixtures().join(name)).unwrap() == std::fs::read(shared.join(name)).unwrap(),
            "{name} differs from the specification's copy"
        );
    }
}

#[test]
fn dump_rdb_decodes_to_the_six_keys_and_their_scandumps() {
    let file = read_rdb(&dump_rdb(), &ReadOptions::default()).unwrap();
    assert_eq!(file.version, 10);
    assert!(file.checksum_verified);
    assert_eq!(file.aux[0], (b"redis-ver".to_vec(), b"7.0.15".to_vec()));
    assert!(file.aux.contains(&(b"redis-bits".to_vec(), b"64".to_vec())));
    assert!(file.aux.contains(&(b"aof-base".to_vec(), b"0".to_vec())));
    let order: Vec<&[u8]> = file.keys.iter().map(|k| &k.key[..]).collect();
    assert_eq!(
        order,
        [&b"cf_default"[..], b"cf_deletes", b"bf_default", b"bf_scaling3", b"cf_empty", b"bf_nonscaling"]
    );
    assert_eq!(file.filter_keys().count(), 6);
    let doc = keys_json();
    for k in &file.keys {
        let name = std::str::from_utf8(&k.key).unwrap();
        let want = &doc["keys"][name];
        assert_eq!(k.db, 0);
        assert_eq!(
            k.expire_at_ms.map(|v| json!(v)).unwrap_or(Value::Null),
            want["expire_at_ms"],
            "{name}: expiry"
        );
        let dump = want["scandump"].as_array().unwrap().clone();
        match &k.value {
            RdbValue::Bloom(c) => {
                assert_eq!(want["type"], "MBbloom--");
                assert_eq!(bf_scandump(c), dump, "{name}: SCANDUMP");
                assert_eq!(json!(c.debug_lines()), want["debug"], "{name}: BF.DEBUG");
            }
            RdbValue::Cuckoo(c) => {
                assert_eq!(want["type"], "MBbloomCF");
                assert_eq!(json!(c.debug_line()), want["debug"], "{name}: CF.DEBUG");
                assert_eq!(cf_scandump(c), dump, "{name}: SCANDUMP");
                if name == "cf_empty" {
                    assert_eq!(dump, vec![json!([0, null])]);
                    assert_eq!((c.num_buckets(), c.filters()[0].slots().len()), (4, 8));
                }
            }
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
    assert_eq!(file.keys[5].expire_at_ms, Some(4_102_444_800_000));
}

#[test]
fn dump_payloads_decode_and_reencode() {
    let rdb = dump_rdb();
    let file = read_rdb(&rdb, &ReadOptions::default()).unwrap();
    let doc = keys_json();
    let mut compressed = Vec::new();
    for k in &file.keys {
        let name = std::str::from_utf8(&k.key).unwrap();
        let payload = b64(doc["keys"][name]["dump_b64"].as_str().unwrap());
        let n = payload.len();
        // Footer: RDB version 10, then the CRC64 of everything before it.
        assert_eq!(&payload[n - 10..n - 8], &[0x0a, 0x00], "{name}");
        assert_eq!(u64::from_le_bytes(payload[n - 8..].try_into().unwrap()), crc64(0, &payload[..n - 8]));
        assert_eq!(restore_payload(&payload).unwrap(), k.value, "{name}: DUMP value");
        // The value body in the payload is the one in the file, after the key.
        let body = &payload[1..n - 10];
        assert!(rdb.windows(body.len()).any(|w| w == body), "{name}: DUMP body not in dump.rdb");
        // Our encoding equals RedisBloom's once its LZF strings are expanded.
        let ours = dump_payload(&k.value);
        let ours_body = &ours[..ours.len() - 10];
        let theirs = normalize_body(&payload[..n - 10]);
        assert_eq!(ours_body, &theirs[..], "{name}: re-encoded body");
        if theirs != payload[..n - 10] {
            compressed.push(name.to_string());
        } else {
            assert_eq!(ours, payload, "{name}: byte-identical DUMP payload");
        }
        assert_eq!(restore_payload(&ours).unwrap(), k.value);
    }
    // The README: exactly these two hold an LZF string (and every other payload is identical).
    compressed.sort();
    assert_eq!(compressed, ["bf_default", "cf_default"]);
}

#[test]
fn written_file_reads_back() {
    let file = read_rdb(&dump_rdb(), &ReadOptions::default()).unwrap();
    let mut keys = file.keys.clone();
    keys[1].db = 2;
    keys.push(RdbKey {
        db: 0,
        key: b"plain".to_vec(),
        expire_at_ms: Some(-1),
        value: RdbValue::String(b"-42".to_vec()),
    });
    let bytes = write_rdb(&keys, 1_700_000_000);
    assert_eq!(&bytes[..9], b"REDIS0010");
    let back = read_rdb(&bytes, &ReadOptions::default()).unwrap();
    assert!(back.checksum_verified);
    let mut want = keys.clone();
    want.sort_by_key(|k| k.db);
    assert_eq!(back.keys, want);
    // Without the redisbloom values' compression, the body is exactly ours again.
    assert_eq!(write_rdb(&back.keys, 1_700_000_000), write_rdb(&want, 1_700_000_000));
}

/// A named change to a value's fields.
type Edit = Box<dyn Fn(&mut FieldBuffer)>;

fn bloom_of(name: &str) -> BloomChain {
    let file = read_rdb(&dump_rdb(), &ReadOptions::default()).unwrap();
    match &file.keys.iter().find(|k| k.key == name.as_bytes()).unwrap().value {
        RdbValue::Bloom(b) => b.clone(),
        _ => unreachable!(),
    }
}

fn cuckoo_of(name: &str) -> CuckooFilter {
    let file = read_rdb(&dump_rdb(), &ReadOptions::default()).unwrap();
    match &file.keys.iter().find(|k| k.key == name.as_bytes()).unwrap().value {
        RdbValue::Cuckoo(c) => c.clone(),
        _ => unreachable!(),
    }
}

/// The fields of a Bloom chain as an older encver stores them (§12.3).
fn bloom_fields(c: &BloomChain, encver: u32) -> FieldBuffer {
    let mut f = FieldBuffer::default();
    let u = |f: &mut FieldBuffer, v: u64| f.fields.push_back(Field::Unsigned(v));
    u(&mut f, c.len());
    u(&mut f, c.links().len() as u64);
    if encver >= 2 {
        u(&mut f, c.options() as u64);
    }
    if encver >= 4 {
        u(&mut f, c.growth() as u64);
    }
    for l in c.links() {
        u(&mut f, l.entries());
        f.fields.push_back(Field::Double(l.error()));
        u(&mut f, l.hashes() as u64);
        f.fields.push_back(Field::Double(l.bpe()));
        if encver >= 1 {
            u(&mut f, l.bits());
            u(&mut f, l.n2() as u64);
        }
        f.fields.push_back(Field::String(l.bitmap().to_vec()));
        u(&mut f, l.size());
    }
    f
}

/// A DUMP payload of `fields` as module `name` at `encver`.
fn payload_of(name: &str, encver: u32, fields: &FieldBuffer) -> Vec<u8> {
    let mut out = vec![7u8];
    write_length(&mut out, module_type_id(name, encver).unwrap());
    for f in &fields.fields {
        match f {
            Field::Unsigned(v) => {
                write_length(&mut out, OPCODE_UINT);
                write_length(&mut out, *v);
            }
            Field::Double(v) => {
                write_length(&mut out, OPCODE_DOUBLE);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Field::String(s) => {
                write_length(&mut out, OPCODE_STRING);
                write_string(&mut out, s);
            }
        }
    }
    out.push(0);
    out.extend_from_slice(&[10, 0]);
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn older_bloom_encvers() {
    let limits = LoadLimits::DEFAULT;
    let c = bloom_of("bf_scaling3");
    // encver 4 through the byte layer is the current format.
    assert_eq!(
        restore_payload(&payload_of(BLOOM_TYPE_NAME, 4, &bloom_fields(&c, 4))).unwrap(),
        RdbValue::Bloom(c.clone())
    );
    for encver in [2, 3] {
        let got = load_bloom(&mut bloom_fields(&c, encver), encver, &limits).unwrap();
        assert_eq!(got, c, "encver {encver}: growth 2, everything else stored");
        let p = payload_of(BLOOM_TYPE_NAME, encver, &bloom_fields(&c, encver));
        assert_eq!(restore_payload(&p).unwrap(), RdbValue::Bloom(c.clone()));
    }
    // encver 1: no options (0: 32-bit legacy hashing), growth 2.
    let p = payload_of(BLOOM_TYPE_NAME, 1, &bloom_fields(&c, 1));
    let RdbValue::Bloom(got) = restore_payload(&p).unwrap() else { panic!() };
    assert_eq!((got.options(), got.growth(), got.len()), (0, 2, 40));
    assert_eq!(got.links().len(), 3);
    for (a, b) in got.links().iter().zip(c.links()) {
        assert_eq!(
            (a.bits(), a.bitmap(), a.hashes(), a.size()),
            (b.bits(), b.bitmap(), b.hashes(), b.size())
        );
    }
    assert_eq!(
        got.debug_lines()[1],
        "bytes:16 bits:128 hashes:8 hashwidth:32 capacity:10 size:10 ratio:0.005"
    );
    // A growth other than 2 is lost at encvers below 4.
    let mut g = bloom_fields(&c, 4);
    g.fields[3] = Field::Unsigned(3);
    assert_eq!(load_bloom(&mut g, 4, &limits).unwrap().growth(), 3);
    // encver 0: bits = trunc(entries · bpe) must be exactly bytes · 8. The fixture's links are not
    // (10 · 11.98… = 119), so they fail; a link of 8 entries at 8 bits each loads.
    let e = load_bloom(&mut bloom_fields(&c, 0), 0, &limits).unwrap_err();
    assert!(matches!(e, RdbError::Bloom(_) | RdbError::BitmapTooShort { .. }), "{e}");
    let mut f = FieldBuffer::default();
    for v in [
        Field::Unsigned(3),
        Field::Unsigned(1),
        Field::Unsigned(8),
        Field::Double(0.01),
        Field::Unsigned(6),
        Field::Double(8.0),
        Field::String(vec![0xA5; 8]),
        Field::Unsigned(3),
    ] {
        f.fields.push_back(v);
    }
    let p = payload_of(BLOOM_TYPE_NAME, 0, &f);
    let RdbValue::Bloom(got) = restore_payload(&p).unwrap() else { panic!() };
    assert_eq!((got.options(), got.growth(), got.len()), (0, 2, 3));
    let l = &got.links()[0];
    assert_eq!((l.bits(), l.n2(), l.hashes(), l.bytes()), (64, 0, 6, 8));
    // encver 5: refused, and RESTORE says "Bad data format".
    let p = payload_of(BLOOM_TYPE_NAME, 5, &bloom_fields(&c, 4));
    let e = restore_payload(&p).unwrap_err();
    assert!(matches!(e, RdbError::UnsupportedEncver { encver: 5, .. }), "{e}");
    assert_eq!(e.restore_reply(), "ERR Bad data format");
}

#[test]
fn bloom_load_checks() {
    let limits = LoadLimits::DEFAULT;
    let c = bloom_of("bf_default");
    let check = |edit: &dyn Fn(&mut FieldBuffer)| {
        let mut f = bloom_fields(&c, 4);
        edit(&mut f);
        load_bloom(&mut f, 4, &limits)
    };
    assert!(check(&|_| {}).is_ok());
    // Fields: 0 size, 1 nfilters, 2 options, 3 growth, 4 entries, 5 error, 6 hashes, 7 bpe, 8 bits,
    // 9 n2, 10 bitmap, 11 link size.
    let cases: Vec<(&str, Edit)> = vec![
        ("nfilters 0", Box::new(|f| f.fields[1] = Field::Unsigned(0))),
        ("error 0", Box::new(|f| f.fields[5] = Field::Double(0.0))),
        ("error 1", Box::new(|f| f.fields[5] = Field::Double(1.0))),
        ("error NaN", Box::new(|f| f.fields[5] = Field::Double(f64::NAN))),
        ("hashes", Box::new(|f| f.fields[6] = Field::Unsigned(9))),
        ("hashes > u32", Box::new(|f| f.fields[6] = Field::Unsigned(1 << 32 | 8))),
        ("bits 0", Box::new(|f| f.fields[8] = Field::Unsigned(0))),
        ("bits != bytes*8", Box::new(|f| f.fields[8] = Field::Unsigned(1144))),
        ("bitmap short", Box::new(|f| f.fields[10] = Field::String(vec![0; 143]))),
        ("bitmap long", Box::new(|f| f.fields[10] = Field::String(vec![0; 145]))),
        ("n2 > 63", Box::new(|f| f.fields[9] = Field::Unsigned(64))),
        ("n2 > 255", Box::new(|f| f.fields[9] = Field::Unsigned(256 + 10))),
        ("bits < 2^n2", Box::new(|f| f.fields[9] = Field::Unsigned(11))),
        ("options > u32", Box::new(|f| f.fields[2] = Field::Unsigned(1 << 32 | 5))),
        ("growth > u32", Box::new(|f| f.fields[3] = Field::Unsigned(1 << 32 | 2))),
        ("wrong opcode", Box::new(|f| f.fields[7] = Field::Unsigned(11))),
        ("missing field", Box::new(|f| drop(f.fields.pop_back()))),
    ];
    for (what, edit) in &cases {
        assert!(check(edit.as_ref()).is_err(), "{what} must fail the load");
    }
    // Not checked, as in RedisBloom: the sum of link sizes, the option bits, n2 within range.
    assert!(check(&|f| f.fields[0] = Field::Unsigned(999)).is_ok());
    assert!(check(&|f| f.fields[2] = Field::Unsigned(0xF0)).is_ok());
    assert_eq!(check(&|f| f.fields[9] = Field::Unsigned(10)).unwrap().links()[0].n2(), 10);
    // The budget is enforced.
    let small = LoadLimits { max_bytes: 100, ..LoadLimits::DEFAULT };
    assert!(matches!(load_bloom(&mut bloom_fields(&c, 4), 4, &small), Err(RdbError::TooLarge { .. })));
}

/// The fields of a cuckoo filter as encver 4 or an older one stores them (§12.4).
fn cuckoo_fields(c: &CuckooFilter, encver: u32) -> FieldBuffer {
    let mut f = FieldBuffer::default();
    let u = |f: &mut FieldBuffer, v: u64| f.fields.push_back(Field::Unsigned(v));
    u(&mut f, c.filters().len() as u64);
    u(&mut f, c.num_buckets());
    u(&mut f, c.len());
    if encver >= 4 {
        u(&mut f, c.num_deletes());
        u(&mut f, c.bucket_size() as u64);
        u(&mut f, c.max_iterations() as u64);
        u(&mut f, c.expansion() as u64);
    }
    for s in c.filters() {
        if encver >= 4 {
            u(&mut f, s.buckets());
        }
        f.fields.push_back(Field::String(s.slots().to_vec()));
    }
    f
}

#[test]
fn older_cuckoo_encvers_and_checks() {
    let limits = LoadLimits::DEFAULT;
    let d = CuckooRdbDefaults::default();
    assert_eq!((d.bucket_size, d.max_iterations, d.expansion), (2, 20, 1));
    let c = cuckoo_of("cf_default");
    for encver in 0..=3 {
        let p = payload_of(CUCKOO_TYPE_NAME, encver, &cuckoo_fields(&c, encver));
        assert_eq!(restore_payload(&p).unwrap(), RdbValue::Cuckoo(c.clone()), "encver {encver}");
    }
    // Configured defaults fill the missing fields.
    let conf = CuckooRdbDefaults { bucket_size: 4, max_iterations: 7, expansion: 2 };
    let mut f = FieldBuffer::default();
    for v in [1u64, 2, 5] {
        f.fields.push_back(Field::Unsigned(v));
    }
    f.fields.push_back(Field::String(vec![9; 8]));
    let got = load_cuckoo(&mut f, 3, conf, &limits).unwrap();
    assert_eq!(
        got.debug_line(),
        "bktsize:4 buckets:2 items:5 deletes:0 filters:1 max_iterations:7 expansion:2"
    );
    // A grown filter cannot be stored by encvers below 4 (every sub-filter gets numBuckets).
    let g = cuckoo_of("cf_deletes");
    let e = load_cuckoo(&mut cuckoo_fields(&g, 3), 3, conf, &limits).unwrap_err();
    assert!(matches!(e, RdbError::SlotArrayLength { index: 1, len: 32, expected: 16 }), "{e}");
    assert_eq!(load_cuckoo(&mut cuckoo_fields(&g, 4), 4, d, &limits).unwrap(), g);

    // Fields: 0 numFilters, 1 numBuckets, 2 numItems, 3 numDeletes, 4 bucketSize, 5 maxIterations,
    // 6 expansion, then (nb, slots) per sub-filter.
    let check = |edit: &dyn Fn(&mut FieldBuffer)| {
        let mut f = cuckoo_fields(&g, 4);
        edit(&mut f);
        load_cuckoo(&mut f, 4, d, &limits)
    };
    let cases: Vec<(&str, Edit)> = vec![
        ("numFilters 0", Box::new(|f| f.fields[0] = Field::Unsigned(0))),
        ("numFilters > u16", Box::new(|f| f.fields[0] = Field::Unsigned(65536 + 3))),
        ("numBuckets 0", Box::new(|f| f.fields[1] = Field::Unsigned(0))),
        ("numBuckets ≥ 2^56", Box::new(|f| f.fields[1] = Field::Unsigned(1 << 56))),
        ("bucketSize 0", Box::new(|f| f.fields[4] = Field::Unsigned(0))),
        ("bucketSize > u16", Box::new(|f| f.fields[4] = Field::Unsigned(65536 + 4))),
        ("maxIterations > u16", Box::new(|f| f.fields[5] = Field::Unsigned(65536 + 50))),
        ("expansion > u16", Box::new(|f| f.fields[6] = Field::Unsigned(65536 + 2))),
        ("nb 0", Box::new(|f| f.fields[7] = Field::Unsigned(0))),
        ("nb ≥ 2^56", Box::new(|f| f.fields[7] = Field::Unsigned(1 << 56))),
        ("nb mismatch", Box::new(|f| f.fields[7] = Field::Unsigned(5))),
        ("slots short", Box::new(|f| f.fields[8] = Field::String(vec![0; 15]))),
        ("slots long", Box::new(|f| f.fields[8] = Field::String(vec![0; 17]))),
        ("numFilters > stored", Box::new(|f| f.fields[0] = Field::Unsigned(4))),
        ("wrong opcode", Box::new(|f| f.fields[2] = Field::Double(97.0))),
    ];
    for (what, edit) in &cases {
        assert!(check(edit.as_ref()).is_err(), "{what} must fail the load");
    }
    // Not checked, as in RedisBloom.
    assert!(check(&|f| f.fields[2] = Field::Unsigned(u64::MAX)).is_ok());
    assert!(check(&|f| f.fields[3] = Field::Unsigned(u64::MAX)).is_ok());
    assert!(check(&|f| f.fields[5] = Field::Unsigned(0)).is_ok());
    // encver 5.
    let p = payload_of(CUCKOO_TYPE_NAME, 5, &cuckoo_fields(&g, 4));
    assert_eq!(restore_payload(&p).unwrap_err().restore_reply(), "ERR Bad data format");
}

#[test]
fn sint_where_uint_is_expected_is_bad_data_format() {
    let c = cuckoo_of("cf_empty");
    let mut p = payload_of(CUCKOO_TYPE_NAME, 4, &cuckoo_fields(&c, 4));
    // The first field's opcode follows the 9-byte module id.
    assert_eq!(p[10], OPCODE_UINT as u8);
    p[10] = 1;
    let n = p.len();
    let crc = crc64(0, &p[..n - 8]);
    p[n - 8..].copy_from_slice(&crc.to_le_bytes());
    let e = restore_payload(&p).unwrap_err();
    assert_eq!(e, RdbError::WrongOpcode { expected: 2, found: 1 });
    assert_eq!(e.restore_reply(), "ERR Bad data format");
}

/// Every truncation and every single bit flip of the golden file and of each DUMP payload is an
/// error (the CRC catches what the parser does not), never a panic.
#[test]
fn corruption_is_an_error_never_a_panic() {
    let opts = ReadOptions::default();
    let rdb = dump_rdb();
    for n in 0..rdb.len() {
        assert!(read_rdb(&rdb[..n], &opts).is_err(), "truncated to {n}");
    }
    let mut extended = rdb.clone();
    extended.push(0);
    assert!(matches!(read_rdb(&extended, &opts), Err(RdbError::TrailingBytes(1))));
    let mut flipped = rdb.clone();
    for i in 0..rdb.len() * 8 {
        flipped[i / 8] ^= 1 << (i % 8);
        assert!(read_rdb(&flipped, &opts).is_err(), "bit {i} flipped");
        flipped[i / 8] ^= 1 << (i % 8);
    }
    let doc = keys_json();
    for (name, k) in doc["keys"].as_object().unwrap() {
        let p = b64(k["dump_b64"].as_str().unwrap());
        for n in 0..p.len() {
            assert!(restore_payload(&p[..n]).is_err(), "{name} truncated to {n}");
        }
        let mut q = p.clone();
        for i in 0..p.len() * 8 {
            q[i / 8] ^= 1 << (i % 8);
            let e = restore_payload(&q).unwrap_err();
            // Flips in the version bytes above the version's bits may read as an older version;
            // then the CRC still fails.
            assert!(matches!(e, RdbError::Checksum { .. } | RdbError::Version { .. }), "{name} bit {i}: {e}");
            q[i / 8] ^= 1 << (i % 8);
        }
    }
}

/// The parser itself on hostile input: bit flips, byte changes and truncations *with the CRC
/// fixed up*, so every one reaches the value decoder. Any result is fine except a panic; the
/// small budget shows that declared sizes cannot force large allocations.
#[test]
fn hostile_values_with_valid_crc_do_not_panic() {
    let opts =
        ReadOptions { limits: LoadLimits { max_bytes: 4096, cf_max_bucket_size: 255 }, ..Default::default() };
    let doc = keys_json();
    let fix = |mut body: Vec<u8>| {
        body.extend_from_slice(&[10, 0]);
        let crc = crc64(0, &body);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    };
    let mut loaded = 0;
    let mut refused = 0;
    for k in doc["keys"].as_object().unwrap().values() {
        let p = b64(k["dump_b64"].as_str().unwrap());
        let body = p[..p.len() - 10].to_vec();
        let mut count = |r: Result<RdbValue, RdbError>| match r {
            Ok(_) => loaded += 1,
            Err(_) => refused += 1,
        };
        for i in 0..body.len() * 8 {
            let mut b = body.clone();
            b[i / 8] ^= 1 << (i % 8);
            count(restore_payload_opts(&fix(b), &opts));
        }
        for i in 0..body.len() {
            for v in [0x00, 0x3f, 0x7f, 0x80, 0x81, 0xc3, 0xff] {
                let mut b = body.clone();
                b[i] = v;
                count(restore_payload_opts(&fix(b), &opts));
            }
        }
        for n in 0..body.len() {
            assert!(restore_payload_opts(&fix(body[..n].to_vec()), &opts).is_err(), "truncated body {n}");
        }
    }
    // Flips inside bitmaps load (they are just other bits); header flips mostly do not.
    assert!(loaded > 1000 && refused > 1000, "loaded {loaded}, refused {refused}");
}

fn restore_payload_opts(p: &[u8], opts: &ReadOptions) -> Result<RdbValue, RdbError> {
    sift::compat::redisbloom::rdb::restore_payload_with(p, opts)
}

/// With an all-zero CRC (a file saved with `rdbchecksum no`) nothing guards the file parser:
/// every bit flip and byte change must still give a value or an error, never a panic, and the
/// budget must hold whatever lengths the damage declares.
#[test]
fn unchecked_file_with_damage_does_not_panic() {
    let opts = ReadOptions {
        limits: LoadLimits { max_bytes: 1 << 16, cf_max_bucket_size: 255 },
        ..Default::default()
    };
    let mut rdb = dump_rdb();
    let n = rdb.len();
    rdb[n - 8..].fill(0);
    let file = read_rdb(&rdb, &opts).unwrap();
    assert!(!file.checksum_verified);
    assert_eq!(file.keys.len(), 6);
    let (mut loaded, mut refused) = (0, 0);
    let mut tally = |r: Result<_, RdbError>| match r {
        Ok(_) => loaded += 1,
        Err(_) => refused += 1,
    };
    for i in 0..(n - 9) * 8 {
        let mut b = rdb.clone();
        b[i / 8] ^= 1 << (i % 8);
        tally(read_rdb(&b, &opts));
    }
    for i in 0..n - 9 {
        for v in [0x00, 0x06, 0x07, 0x3f, 0x7f, 0x80, 0x81, 0xc3, 0xf5, 0xf7, 0xfe, 0xff] {
            let mut b = rdb.clone();
            b[i] = v;
            tally(read_rdb(&b, &opts));
        }
    }
    assert!(loaded > 1000 && refused > 1000, "loaded {loaded}, refused {refused}");
}
