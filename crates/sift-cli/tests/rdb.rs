//! `sift inspect` / `sift convert` on Redis RDB files: the golden `dump.rdb` of RedisBloom 2.6.28
//! (crates/sift/tests/fixtures/rdb/) listed, its keys taken out as sift files and SCANDUMP chunks
//! identical to RedisBloom's, and RDB files written back.

use std::path::PathBuf;

mod common;
use common::{run, sift};

fn rdb_fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../sift/tests/fixtures/rdb")).join(name)
}

fn keys_json() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(rdb_fixture("keys.json")).unwrap()).unwrap()
}

fn jsonl(text: &str) -> Vec<serde_json::Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn inspect_lists_the_filter_keys() {
    let (code, out, err) = run(sift().arg("inspect").arg(rdb_fixture("dump.rdb")));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("redis RDB file") && out.contains("ok (CRC64)"), "{out}");
    assert!(out.contains("db0 bf_nonscaling MBbloom-- items=20 capacity=50"), "{out}");
    assert!(out.contains("expire_at_ms=4102444800000"), "{out}");
    assert!(
        out.contains("db0 cf_deletes MBbloomCF items=97 deletes=3 buckets=4 bucket_size=4 filters=3"),
        "{out}"
    );

    let (code, out, _) = run(sift().args(["inspect", "--json"]).arg(rdb_fixture("dump.rdb")));
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["rdb_version"].as_u64(), v["filter_keys"].as_u64(), v["other_keys"].as_u64()),
        (Some(10), Some(6), Some(0))
    );
    assert_eq!(v["redis_ver"], "7.0.15");
    let filters = v["filters"].as_array().unwrap();
    let names: Vec<&str> = filters.iter().map(|f| f["key"].as_str().unwrap()).collect();
    assert_eq!(names, ["cf_default", "cf_deletes", "bf_default", "bf_scaling3", "cf_empty", "bf_nonscaling"]);
    assert_eq!(filters[3]["memory_bytes"], 344);
}

#[test]
fn convert_keys_to_chunks_identical_to_redisbloom() {
    let dir = tempfile::tempdir().unwrap();
    let doc = keys_json();
    for name in ["bf_default", "bf_scaling3", "bf_nonscaling", "cf_default", "cf_deletes"] {
        let out = dir.path().join(format!("{name}.jsonl"));
        let (code, _, err) = run(sift()
            .arg("convert")
            .arg(rdb_fixture("dump.rdb"))
            .args(["--key", name, "--to", "redisbloom", "-o"])
            .arg(&out));
        assert_eq!(code, 0, "{name}: {err}");
        let got = jsonl(&std::fs::read_to_string(&out).unwrap());
        assert_eq!(got, doc["keys"][name]["scandump"].as_array().unwrap().clone(), "{name}");
    }
}

#[test]
fn convert_to_sift_query_and_back_to_rdb() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("bf.sift");
    let (code, _, err) =
        run(sift().arg("convert").arg(rdb_fixture("dump.rdb")).args(["--key", "bf_default", "-o"]).arg(&s));
    assert_eq!(code, 0, "{err}");
    assert_eq!(run(sift().arg("query").arg(&s).arg("banana")).0, 0);
    // Back to an RDB file under another name, then out again: the same chunks.
    let r = dir.path().join("dump.rdb");
    let (code, _, err) =
        run(sift().arg("convert").arg(&s).args(["--to", "rdb", "--key", "renamed", "-o"]).arg(&r));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&r).unwrap().starts_with(b"REDIS0010"));
    let (code, out, _) = run(sift().args(["inspect", "--json"]).arg(&r));
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["filters"][0]["key"], "renamed");
    // A single filter key needs no --key.
    let chunks = dir.path().join("c.jsonl");
    let (code, _, err) = run(sift().arg("convert").arg(&r).args(["--to", "redisbloom", "-o"]).arg(&chunks));
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        jsonl(&std::fs::read_to_string(&chunks).unwrap()),
        keys_json()["keys"]["bf_default"]["scandump"].as_array().unwrap().clone()
    );
    // --to rdb without --key is refused.
    let (code, _, err) =
        run(sift().arg("convert").arg(&s).args(["--to", "rdb", "-o"]).arg(dir.path().join("x")));
    assert_eq!(code, 2);
    assert!(err.contains("--key"), "{err}");
}

#[test]
fn rdb_errors_are_clear_and_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let dump = rdb_fixture("dump.rdb");
    let (code, _, err) = run(sift().arg("convert").arg(&dump).arg("-o").arg(&out));
    assert_eq!(code, 2);
    assert!(err.contains("6 filter keys") && err.contains("db0 cf_empty"), "{err}");
    let (code, _, err) = run(sift().arg("convert").arg(&dump).args(["--key", "nope", "-o"]).arg(&out));
    assert_eq!(code, 2);
    assert!(err.contains("no key \"nope\""), "{err}");
    let (code, _, err) =
        run(sift().arg("convert").arg(&dump).args(["--key", "bf_default", "--db", "1", "-o"]).arg(&out));
    assert_eq!(code, 2);
    assert!(err.contains("(db 1)"), "{err}");
    // Corrupted and truncated files.
    let bytes = std::fs::read(&dump).unwrap();
    let mut bad = bytes.clone();
    bad[500] ^= 0x10;
    let p = dir.path().join("bad.rdb");
    std::fs::write(&p, &bad).unwrap();
    let (code, _, err) = run(sift().arg("inspect").arg(&p));
    assert_eq!(code, 2);
    assert!(err.contains("CRC64 mismatch"), "{err}");
    std::fs::write(&p, &bytes[..600]).unwrap();
    let (code, _, err) = run(sift().arg("convert").arg(&p).args(["--key", "bf_default", "-o"]).arg(&out));
    assert_eq!(code, 2);
    assert!(err.contains("truncated"), "{err}");
}
