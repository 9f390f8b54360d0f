//! Redis RDB files (`dump.rdb`) holding RedisBloom keys: list them, take one out, write one.
//!
//! A RedisBloom user can migrate from an RDB file without running Redis: `sift inspect dump.rdb`
//! lists the `MBbloom--` / `MBbloomCF` keys, `sift convert dump.rdb --key K -o k.sift` takes one
//! out, and `sift convert k.sift --to rdb --key K -o dump.rdb` writes a file that Redis 7.0+ with
//! RedisBloom loads. Keys of other Redis types are counted and ignored (streams make the file
//! unreadable here: the reader cannot step over them).

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use sift::compat::redisbloom::rdb::{self, RdbFile, RdbKey, RdbValue, ReadOptions};

use crate::redisdump::RedisFilter;

/// Whether `bytes` start like an RDB file: `REDIS` and four digits.
pub fn looks_like(bytes: &[u8]) -> bool {
    bytes.len() >= 9 && bytes.starts_with(b"REDIS") && bytes[5..9].iter().all(u8::is_ascii_digit)
}

/// Reads a whole RDB file, checking its CRC64.
pub fn read(bytes: &[u8]) -> Result<RdbFile> {
    Ok(rdb::read_rdb(bytes, &ReadOptions::default())?)
}

fn key_text(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// Picks the filter key `key` (in database `db`, if given) out of the file. With no `key`, the
/// file must hold exactly one filter key.
pub fn select(file: RdbFile, key: Option<&str>, db: Option<u64>) -> Result<(RdbKey, RedisFilter)> {
    let in_db = |k: &RdbKey| db.is_none_or(|d| k.db == d);
    let mut found: Vec<RdbKey> = match key {
        Some(name) => file.keys.into_iter().filter(|k| k.key == name.as_bytes() && in_db(k)).collect(),
        None => file
            .keys
            .into_iter()
            .filter(|k| in_db(k) && matches!(k.value, RdbValue::Bloom(_) | RdbValue::Cuckoo(_)))
            .collect(),
    };
    let k = match (found.len(), key) {
        (1, _) => found.pop().expect("one key"),
        (0, Some(name)) => {
            bail!("no key {name:?} in the file{}", db.map_or(String::new(), |d| format!(" (db {d})")))
        }
        (0, None) => bail!("the file holds no RedisBloom (MBbloom-- / MBbloomCF) key"),
        (_, Some(name)) => bail!("key {name:?} is in several databases: pick one with --db"),
        (_, None) => {
            let names: Vec<String> =
                found.iter().map(|k| format!("db{} {}", k.db, key_text(&k.key))).collect();
            bail!("the file holds {} filter keys, pick one with --key: {}", names.len(), names.join(", "))
        }
    };
    let f = match &k.value {
        RdbValue::Bloom(b) => RedisFilter::Bloom(b.clone()),
        RdbValue::Cuckoo(c) => RedisFilter::Cuckoo(c.clone()),
        RdbValue::String(_) => bail!("key {:?} is a Redis string, not a filter", key_text(&k.key)),
        other => bail!("key {:?} has Redis value type {}, not a filter", key_text(&k.key), other.type_byte()),
    };
    Ok((k, f))
}

/// An RDB file (version 10, loadable by Redis 7.0 and later with RedisBloom) holding one key.
pub fn write(f: RedisFilter, key: &str) -> Vec<u8> {
    let value = match f {
        RedisFilter::Bloom(b) => RdbValue::Bloom(b),
        RedisFilter::Cuckoo(c) => RdbValue::Cuckoo(c),
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    rdb::write_rdb(&[RdbKey { db: 0, key: key.as_bytes().to_vec(), expire_at_ms: None, value }], now)
}

/// `inspect` fields for a whole file, and one JSON object per filter key.
pub fn describe(file: &RdbFile) -> (Vec<(&'static str, Value)>, Vec<Value>) {
    let aux = |name: &[u8]| file.aux.iter().find(|(k, _)| k == name).map(|(_, v)| key_text(v));
    let filters: Vec<Value> = file
        .filter_keys()
        .map(|k| {
            let mut o = json!({ "db": k.db, "key": key_text(&k.key), "expire_at_ms": k.expire_at_ms });
            match &k.value {
                RdbValue::Bloom(b) => {
                    let i = b.info();
                    o["type"] = json!("MBbloom--");
                    o["items"] = json!(i.items);
                    o["capacity"] = json!(i.capacity);
                    o["filters"] = json!(i.filters);
                    o["memory_bytes"] = json!(i.size);
                    o["expansion"] = json!(i.expansion);
                }
                RdbValue::Cuckoo(c) => {
                    let i = c.info();
                    o["type"] = json!("MBbloomCF");
                    o["items"] = json!(i.items);
                    o["deletes"] = json!(i.deletes);
                    o["buckets"] = json!(i.buckets);
                    o["bucket_size"] = json!(i.bucket_size);
                    o["filters"] = json!(i.filters);
                    o["memory_bytes"] = json!(i.size);
                }
                _ => {}
            }
            o
        })
        .collect();
    let others = file.keys.len() - filters.len();
    let fields = vec![
        ("format", json!("redis RDB file")),
        ("rdb_version", json!(file.version)),
        ("redis_ver", json!(aux(b"redis-ver"))),
        (
            "checksum",
            json!(if file.checksum_verified {
                "ok (CRC64)"
            } else {
                "not present (written with rdbchecksum no)"
            }),
        ),
        ("keys", json!(file.keys.len())),
        ("filter_keys", json!(filters.len())),
        ("other_keys", json!(others)),
    ];
    (fields, filters)
}

/// One line per filter key for the text output of `inspect`.
pub fn key_line(v: &Value) -> String {
    let mut s =
        format!("db{} {} {}", v["db"], v["key"].as_str().unwrap_or(""), v["type"].as_str().unwrap_or(""));
    for f in
        ["items", "capacity", "deletes", "buckets", "bucket_size", "filters", "memory_bytes", "expire_at_ms"]
    {
        if !v[f].is_null() {
            s.push_str(&format!(" {f}={}", v[f]));
        }
    }
    s
}

/// Fails unless the bytes are an RDB file (for `--from rdb` on something else).
pub fn check(bytes: &[u8]) -> Result<()> {
    if !looks_like(bytes) {
        bail!("not an RDB file (it does not start with REDIS and four digits)");
    }
    Ok(())
}

/// Reads the file and picks a key (see [`select`]), with the file name in errors.
pub fn load(bytes: &[u8], name: &str, key: Option<&str>, db: Option<u64>) -> Result<RedisFilter> {
    check(bytes).with_context(|| name.to_string())?;
    let file = read(bytes).with_context(|| format!("{name}: not a readable RDB file"))?;
    Ok(select(file, key, db).with_context(|| name.to_string())?.1)
}
