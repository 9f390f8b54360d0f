//! Golden vectors captured from a real RedisBloom 2.6.28 server (see
//! `tests/fixtures/redisbloom/README.md`), replayed on `sift::compat::redisbloom`.
//!
//! For every `bf_*` / `cf_*` fixture, a tiny test-only interpreter runs the `setup` commands on
//! the library types (no server involved), then checks: each setup reply that is an integer, an
//! array of integers or `OK`; the full SCANDUMP, chunk by chunk and byte for byte; INFO, DEBUG and
//! CARD; and that LOADCHUNK of the golden chunks into a fresh value dumps the same bytes and answers
//! EXISTS the same. `murmur64a.json` pins hashing, single-item bit positions and cuckoo slots.

#[path = "support/ci.rs"]
mod ci;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{json, Value};
use sift::compat::redisbloom::{
    BloomAddError, BloomChain, CuckooFilter, CuckooHash, CuckooInsertError, LoadLimits, BF_DEFAULT_CAPACITY,
    BF_DEFAULT_ERROR_RATE, BF_DEFAULT_EXPANSION, CF_DEFAULT_BUCKET_SIZE, CF_DEFAULT_CAPACITY,
    CF_DEFAULT_EXPANSION, CF_DEFAULT_MAX_EXPANSIONS, CF_DEFAULT_MAX_ITERATIONS,
};

/// The in-repo copy of the fixtures (what the tests read).
fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/redisbloom"))
}

/// The specification's own fixture folder, beside the repository (absent in a lone clone).
fn shared_fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/spec/fixtures"))
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).expect("valid base64")
}

fn b64_enc(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A command argument: a plain string or `{"b64": ...}`.
fn arg(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(o) => b64(o["b64"].as_str().expect("b64 string")),
        other => panic!("unexpected argument {other}"),
    }
}

/// Fixture names with the given prefix (`bf_` or `cf_`).
fn names(prefix: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(fixtures())
        .expect("fixture folder")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".meta.json")?;
            stem.starts_with(prefix).then(|| stem.to_string())
        })
        .collect();
    out.sort();
    out
}

// ------------------------------------------------------------------------------------------------
// The test-only interpreter: just the command forms the setups use, with RedisBloom's defaults.

enum Entry {
    Bloom(BloomChain),
    Cuckoo(CuckooFilter),
}

#[derive(Default)]
struct Db {
    keys: HashMap<Vec<u8>, Entry>,
}

fn err(text: &str) -> Value {
    json!({ "error": text })
}

fn int(v: &[u8]) -> i64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

fn float(v: &[u8]) -> f64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

fn bf_add_reply(r: Result<bool, BloomAddError>) -> Value {
    match r {
        Ok(b) => json!(b as i64),
        Err(BloomAddError::NonScalingFull) => err("ERR non scaling filter is full"),
        Err(_) => err("ERR problem inserting into filter"),
    }
}

/// BF.MADD / BF.INSERT reply: one element per item, stopping after "non scaling filter is full".
fn bf_add_many(chain: &mut BloomChain, items: &[Vec<u8>]) -> Value {
    let mut out = Vec::new();
    for item in items {
        let r = chain.add(item);
        out.push(bf_add_reply(r));
        if r == Err(BloomAddError::NonScalingFull) {
            break;
        }
    }
    Value::Array(out)
}

impl Db {
    fn bloom(&mut self, key: &[u8], create: impl FnOnce() -> BloomChain) -> &mut BloomChain {
        match self.keys.entry(key.to_vec()).or_insert_with(|| Entry::Bloom(create())) {
            Entry::Bloom(b) => b,
            Entry::Cuckoo(_) => panic!("wrong type"),
        }
    }

    fn cuckoo(&mut self, key: &[u8], create: impl FnOnce() -> CuckooFilter) -> &mut CuckooFilter {
        match self.keys.entry(key.to_vec()).or_insert_with(|| Entry::Cuckoo(create())) {
            Entry::Cuckoo(c) => c,
            Entry::Bloom(_) => panic!("wrong type"),
        }
    }

    fn run(&mut self, cmd: &[Vec<u8>]) -> Value {
        let name = String::from_utf8_lossy(&cmd[0]).to_ascii_uppercase();
        let key = cmd[1].as_slice();
        let default_bf = || {
            BloomChain::new(BF_DEFAULT_CAPACITY, BF_DEFAULT_ERROR_RATE, BF_DEFAULT_EXPANSION, false).unwrap()
        };
        let default_cf = |capacity| {
            CuckooFilter::new(
                capacity,
                CF_DEFAULT_BUCKET_SIZE,
                CF_DEFAULT_MAX_ITERATIONS,
                CF_DEFAULT_EXPANSION,
            )
            .unwrap()
        };
        let upper = |v: &[u8]| String::from_utf8_lossy(v).to_ascii_uppercase();
        match name.as_str() {
            "BF.RESERVE" => {
                let (p, cap) = (float(&cmd[2]), int(&cmd[3]) as u64);
                let mut nonscaling = cmd.iter().any(|a| upper(a) == "NONSCALING");
                let mut growth = BF_DEFAULT_EXPANSION;
                if let Some(i) = cmd.iter().position(|a| upper(a) == "EXPANSION") {
                    (growth, nonscaling) =
                        BloomChain::resolve_expansion(int(&cmd[i + 1]), nonscaling).unwrap();
                }
                let chain = BloomChain::new(cap, p, growth, nonscaling).unwrap();
                assert!(self.keys.insert(key.to_vec(), Entry::Bloom(chain)).is_none());
                json!("OK")
            }
            "BF.ADD" => bf_add_reply(self.bloom(key, default_bf).add(&cmd[2])),
            "BF.MADD" => bf_add_many(self.bloom(key, default_bf), &cmd[2..]),
            "BF.INSERT" => {
                let (mut cap, mut p, mut growth) =
                    (BF_DEFAULT_CAPACITY, BF_DEFAULT_ERROR_RATE, BF_DEFAULT_EXPANSION);
                let (mut nonscaling, mut i) = (false, 2);
                loop {
                    match upper(&cmd[i]).as_str() {
                        "ITEMS" => break,
                        "CAPACITY" => cap = int(&cmd[i + 1]) as u64,
                        "ERROR" => p = float(&cmd[i + 1]),
                        "EXPANSION" => growth = int(&cmd[i + 1]) as u32,
                        "NONSCALING" => nonscaling = true,
                        other => panic!("BF.INSERT option {other} not used by the fixtures"),
                    }
                    i += if upper(&cmd[i]) == "NONSCALING" { 1 } else { 2 };
                }
                let chain = self.bloom(key, || BloomChain::new(cap, p, growth, nonscaling).unwrap());
                bf_add_many(chain, &cmd[i + 1..])
            }
            "BF.LOADCHUNK" => {
                let (it, data) = (int(&cmd[2]), &cmd[3]);
                match self.keys.get_mut(key) {
                    None => {
                        assert_eq!(it, 1);
                        let chain = BloomChain::from_header(data, &LoadLimits::default()).unwrap();
                        self.keys.insert(key.to_vec(), Entry::Bloom(chain));
                    }
                    Some(Entry::Bloom(b)) => b.load_chunk(it, data).unwrap(),
                    Some(Entry::Cuckoo(_)) => panic!("wrong type"),
                }
                json!("OK")
            }
            "CF.RESERVE" => {
                let cap = int(&cmd[2]) as u64;
                let opt = |name: &str, default: u16| {
                    cmd.iter().position(|a| upper(a) == name).map_or(default, |i| int(&cmd[i + 1]) as u16)
                };
                let cf = CuckooFilter::new(
                    cap,
                    opt("BUCKETSIZE", CF_DEFAULT_BUCKET_SIZE),
                    opt("MAXITERATIONS", CF_DEFAULT_MAX_ITERATIONS),
                    opt("EXPANSION", CF_DEFAULT_EXPANSION),
                )
                .unwrap();
                assert!(self.keys.insert(key.to_vec(), Entry::Cuckoo(cf)).is_none());
                json!("OK")
            }
            "CF.ADD" | "CF.ADDNX" => {
                let cf = self.cuckoo(key, || default_cf(CF_DEFAULT_CAPACITY));
                if cf.num_filters() as u32 >= CF_DEFAULT_MAX_EXPANSIONS {
                    return err("Maximum expansions reached");
                }
                let r = if name == "CF.ADD" {
                    cf.insert(&cmd[2]).map(|()| true)
                } else {
                    cf.insert_unique(&cmd[2])
                };
                match r {
                    Ok(b) => json!(b as i64),
                    Err(CuckooInsertError::NoSpace) => err("Filter is full"),
                    Err(_) => err("ERR Insufficient memory"),
                }
            }
            "CF.INSERT" | "CF.INSERTNX" => {
                let (mut cap, mut nocreate, mut i) = (CF_DEFAULT_CAPACITY, false, 2);
                loop {
                    match upper(&cmd[i]).as_str() {
                        "ITEMS" => break,
                        "CAPACITY" => {
                            cap = int(&cmd[i + 1]) as u64;
                            i += 1;
                        }
                        "NOCREATE" => nocreate = true,
                        other => panic!("CF.INSERT option {other} not used by the fixtures"),
                    }
                    i += 1;
                }
                if nocreate && !self.keys.contains_key(key) {
                    return err("ERR not found");
                }
                let cf = self.cuckoo(key, || default_cf(cap));
                if cf.num_filters() as u32 >= CF_DEFAULT_MAX_EXPANSIONS {
                    return err("Maximum expansions reached");
                }
                let nx = name == "CF.INSERTNX";
                let items = cmd[i + 1..].iter().map(|item| {
                    let r = if nx { cf.insert_unique(item) } else { cf.insert(item).map(|()| true) };
                    match r {
                        Ok(b) => json!(b as i64),
                        Err(_) => json!(-1),
                    }
                });
                Value::Array(items.collect())
            }
            "CF.DEL" => json!(self.cuckoo(key, || panic!("Not found")).delete(&cmd[2]) as i64),
            "CF.COMPACT" => {
                self.cuckoo(key, || panic!("Cuckoo filter was not found")).compact(true);
                json!("OK")
            }
            "PEXPIREAT" => json!(1), // expiry is the server's business, not the filter's
            other => panic!("command {other} not used by the fixtures"),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Dumps.

/// The full SCANDUMP, as the fixture files write it: `[it, base64]` lines, end marker included.
fn bf_scandump(chain: &BloomChain) -> Vec<Value> {
    let mut out = Vec::new();
    let mut it = 0;
    loop {
        match chain.scandump(it) {
            Some((next, data)) => {
                out.push(json!([next, b64_enc(&data)]));
                it = next;
            }
            None => {
                out.push(json!([0, ""]));
                return out;
            }
        }
    }
}

fn cf_scandump(cf: &CuckooFilter) -> Vec<Value> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        match cf.scandump(pos) {
            Some((next, data)) => {
                out.push(json!([next, b64_enc(&data)]));
                pos = next;
            }
            None => {
                out.push(json!([0, null]));
                return out;
            }
        }
    }
}

fn golden_dump(name: &str) -> Vec<Value> {
    let path = fixtures().join(format!("{name}.scandump.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Replays a dump through LOADCHUNK: the first line is the header, the others data chunks.
fn bf_reload(dump: &[Value]) -> BloomChain {
    let (header, chunks) = dump[..dump.len() - 1].split_first().expect("a header line");
    assert_eq!(header[0], json!(1));
    let mut chain =
        BloomChain::from_header(&b64(header[1].as_str().unwrap()), &LoadLimits::default()).unwrap();
    for line in chunks {
        chain.load_chunk(line[0].as_i64().unwrap(), &b64(line[1].as_str().unwrap())).unwrap();
    }
    chain
}

fn cf_reload(dump: &[Value]) -> CuckooFilter {
    let (header, chunks) = dump[..dump.len() - 1].split_first().expect("a header line");
    assert_eq!(header[0], json!(1));
    let mut cf =
        CuckooFilter::from_header(&b64(header[1].as_str().unwrap()), &LoadLimits::default()).unwrap();
    for line in chunks {
        cf.load_chunk(line[0].as_i64().unwrap(), &b64(line[1].as_str().unwrap())).unwrap();
    }
    cf
}

/// Every item argument of the setup commands, plus non-members, for EXISTS comparisons.
fn probe_items(setup: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    let mut items: Vec<Vec<u8>> = setup
        .iter()
        .filter(|c| !c[0].ends_with(b"LOADCHUNK") && !c[0].ends_with(b"RESERVE"))
        .flat_map(|c| c[2..].iter().cloned())
        .collect();
    items.extend((0..2000).map(|i| format!("not-added-{i}").into_bytes()));
    items
}

/// Compares a setup reply with the fixture's, where the fixture's is `OK`, an integer, an error,
/// or an array of those.
fn check_reply(name: &str, i: usize, got: &Value, want: &Value) {
    assert_eq!(got, want, "{name}: reply to setup command {i}");
}

fn setup_of(meta: &Value) -> Vec<Vec<Vec<u8>>> {
    meta["setup"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_array().unwrap().iter().map(arg).collect())
        .collect()
}

fn bloom_info_resp2(c: &BloomChain) -> Value {
    let i = c.info();
    json!([
        "Capacity",
        i.capacity,
        "Size",
        i.size,
        "Number of filters",
        i.filters,
        "Number of items inserted",
        i.items,
        "Expansion rate",
        i.expansion
    ])
}

fn cuckoo_info_resp2(c: &CuckooFilter) -> Value {
    let i = c.info();
    json!([
        "Size",
        i.size,
        "Number of buckets",
        i.buckets,
        "Number of filters",
        i.filters,
        "Number of items inserted",
        i.items,
        "Number of items deleted",
        i.deletes,
        "Bucket size",
        i.bucket_size,
        "Expansion rate",
        i.expansion,
        "Max iterations",
        i.max_iterations
    ])
}

#[test]
fn bloom_fixtures() {
    let all = names("bf_");
    assert_eq!(all.len(), 10, "ten Bloom fixtures: {all:?}");
    for name in &all {
        let meta = read_json(&fixtures().join(format!("{name}.meta.json")));
        let setup = setup_of(&meta);
        let mut db = Db::default();
        for (i, (cmd, want)) in setup.iter().zip(meta["setup_replies_resp2"].as_array().unwrap()).enumerate()
        {
            let got = db.run(cmd);
            check_reply(name, i, &got, want);
        }
        let key = arg(&meta["key"]);
        let Some(Entry::Bloom(chain)) = db.keys.get(&key) else { panic!("{name}: no Bloom key") };

        let golden = golden_dump(name);
        assert_eq!(bf_scandump(chain), golden, "{name}: SCANDUMP");
        assert_eq!(bloom_info_resp2(chain), meta["info_resp2"], "{name}: BF.INFO");
        assert_eq!(json!(chain.debug_lines()), meta["debug"], "{name}: BF.DEBUG");
        assert_eq!(json!(chain.len()), meta["card"], "{name}: BF.CARD");

        if let Some(h) = meta.get("header_decoded").filter(|h| !h.is_null()) {
            assert_eq!(json!(chain.options()), h["options"], "{name}: options");
            assert_eq!(json!(chain.growth()), h["growth"], "{name}: growth");
            for (l, want) in chain.links().iter().zip(h["links"].as_array().unwrap()) {
                assert_eq!(l.bpe(), want["bpe"].as_f64().unwrap(), "{name}: bpe");
                assert_eq!(l.error(), want["error"].as_f64().unwrap(), "{name}: error");
            }
            let total: usize =
                golden[..golden.len() - 1].iter().map(|l| b64(l[1].as_str().unwrap()).len()).sum();
            assert_eq!(json!(total), meta["scandump_total_bytes"], "{name}: total dump bytes");
        }
        if let Some(bits) = meta.get("set_bits") {
            let l = &chain.links()[0];
            let set: Vec<u64> =
                (0..l.bits()).filter(|&x| l.bitmap()[(x >> 3) as usize] & (1 << (x & 7)) != 0).collect();
            assert_eq!(json!(set), *bits, "{name}: set bits");
        }

        // LOADCHUNK the golden dump into a fresh chain: same bytes out, same answers.
        let reloaded = bf_reload(&golden);
        assert_eq!(bf_scandump(&reloaded), golden, "{name}: dump after LOADCHUNK");
        assert_eq!(reloaded, *chain, "{name}: reloaded state");
        for item in probe_items(&setup) {
            assert_eq!(reloaded.contains(&item), chain.contains(&item), "{name}: EXISTS after LOADCHUNK");
        }
        // No false negatives: every item whose add replied 1 or 0 is reported present.
        let replies = meta["setup_replies_resp2"].as_array().unwrap();
        let mut members = 0;
        for (cmd, reply) in setup.iter().zip(replies) {
            let start = match cmd[0].to_ascii_uppercase().as_slice() {
                b"BF.ADD" | b"BF.MADD" => 2,
                b"BF.INSERT" => cmd.iter().position(|a| a.eq_ignore_ascii_case(b"ITEMS")).unwrap() + 1,
                _ => continue,
            };
            let replies: Vec<Value> = reply.as_array().cloned().unwrap_or_else(|| vec![reply.clone()]);
            for (item, r) in cmd[start..].iter().zip(&replies) {
                if r.is_i64() {
                    assert!(reloaded.contains(item), "{name}: member lost after LOADCHUNK");
                    members += 1;
                }
            }
        }
        assert!(members > 0, "{name}: no member checked");
    }
}

#[test]
fn cuckoo_fixtures() {
    let all = names("cf_");
    assert_eq!(all.len(), 10, "ten cuckoo fixtures: {all:?}");
    for name in &all {
        let meta = read_json(&fixtures().join(format!("{name}.meta.json")));
        let setup = setup_of(&meta);
        let mut db = Db::default();
        for (i, (cmd, want)) in setup.iter().zip(meta["setup_replies_resp2"].as_array().unwrap()).enumerate()
        {
            let got = db.run(cmd);
            check_reply(name, i, &got, want);
        }
        let key = arg(&meta["key"]);
        let Some(Entry::Cuckoo(cf)) = db.keys.get(&key) else { panic!("{name}: no cuckoo key") };

        let golden = golden_dump(name);
        assert_eq!(cf_scandump(cf), golden, "{name}: SCANDUMP");
        assert_eq!(cuckoo_info_resp2(cf), meta["info_resp2"], "{name}: CF.INFO");
        assert_eq!(json!(cf.debug_line()), meta["debug"], "{name}: CF.DEBUG");
        if let Some(h) = meta.get("header_decoded").filter(|h| !h.is_null()) {
            let want = json!({
                "numItems": cf.len(), "numBuckets": cf.num_buckets(), "numDeletes": cf.num_deletes(),
                "numFilters": cf.num_filters(), "bucketSize": cf.bucket_size(),
                "maxIterations": cf.max_iterations(), "expansion": cf.expansion()
            });
            assert_eq!(*h, want, "{name}: header fields");
        }

        if golden.len() == 1 {
            // An empty filter has no dump: nothing to reload.
            assert!(cf.is_empty(), "{name}");
            continue;
        }
        let reloaded = cf_reload(&golden);
        assert_eq!(cf_scandump(&reloaded), golden, "{name}: dump after LOADCHUNK");
        assert_eq!(reloaded, *cf, "{name}: reloaded state");
        for item in probe_items(&setup) {
            assert_eq!(reloaded.contains(&item), cf.contains(&item), "{name}: EXISTS after LOADCHUNK");
            assert_eq!(reloaded.count(&item), cf.count(&item), "{name}: COUNT after LOADCHUNK");
        }
    }
}

fn hex64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn murmur_vectors_bit_positions_and_cuckoo_slots() {
    let doc = read_json(&fixtures().join("murmur64a.json"));
    let vectors = doc["vectors"].as_array().unwrap();
    assert_eq!(vectors.len(), 28);
    for v in vectors {
        let hex = v["input_hex"].as_str().unwrap();
        let input: Vec<u8> =
            (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();

        // Bloom: BF.RESERVE m 0.01 1000 NONSCALING (9600 bits, 7 hashes), BF.ADD m <input>.
        let mut bf = BloomChain::new(1000, 0.01, 2, true).unwrap();
        assert_eq!((bf.links()[0].bits(), bf.links()[0].hashes()), (9600, 7));
        assert_eq!(bf.hash(&input), (hex64(&v["bloom_a"]), hex64(&v["bloom_b"])), "{hex}");
        assert_eq!(bf.add(&input), Ok(true));
        let l = &bf.links()[0];
        let set: Vec<u64> =
            (0..l.bits()).filter(|&x| l.bitmap()[(x >> 3) as usize] & (1 << (x & 7)) != 0).collect();
        let mut want: Vec<u64> = v["server_bf_0.01_1000_NONSCALING_set_bits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        want.sort();
        want.dedup();
        assert_eq!(set, want, "bits of {hex}");

        // Cuckoo: CF.RESERVE n 65536 BUCKETSIZE 1, CF.ADD n <input>.
        let h = CuckooHash::new(&input);
        assert_eq!(h.h1, hex64(&v["cuckoo_h1"]), "{hex}");
        assert_eq!(h.h2, hex64(&v["cuckoo_h2"]), "{hex}");
        assert_eq!(json!(h.fp), v["cuckoo_fp"], "{hex}");
        let mut cf = CuckooFilter::new(65536, 1, 20, 1).unwrap();
        cf.insert(&input).unwrap();
        let slots = cf.filters()[0].slots();
        let nonzero: Vec<Value> =
            slots.iter().enumerate().filter(|(_, &s)| s != 0).map(|(i, &s)| json!([i, s])).collect();
        assert_eq!(nonzero, vec![v["server_cf_65536x1_slot_and_fp"].clone()], "slot of {hex}");
    }
}

/// The in-repo copy (which every other test here reads) must stay identical to the
/// specification's fixtures when those are present beside the repository (absent in a lone
/// clone; required in CI).
#[test]
fn fixture_copy_matches_the_spec() {
    let shared = shared_fixtures();
    if !shared.is_dir() {
        assert!(!ci::in_ci(), "{} is missing: CI runs beside the specification's folder", shared.display());
        eprintln!("{} not present: skipping the copy check", shared.display());
        return;
    }
    let mut compared = 0;
    for e in std::fs::read_dir(fixtures()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name == "README.md" || name == "rdb" || name == "d2string" {
            // The copy's README carries an extra provenance paragraph; `d2string/` is sift's own
            // (Redis's double formatting, generated here), not a copy of the spec's.
            continue;
        }
        if name == "sketches" {
            compared += compare_tree(&fixtures().join(&name), &shared.join(&name));
            continue;
        }
        let ours = std::fs::read(fixtures().join(&name)).unwrap();
        let theirs =
            std::fs::read(shared.join(&name)).unwrap_or_else(|_| panic!("{name} missing from the spec"));
        assert!(ours == theirs, "{name} differs from the specification's copy");
        compared += 1;
    }
    // 41 Bloom/cuckoo files and 6 sketch files (README, meta, transcript, three RDB files).
    assert_eq!(compared, 41 + 6);
    // The RDB fixtures (tests/fixtures/rdb/) are compared with the spec's by rdb_fixtures.rs.
}

/// Compares every file under `ours` with the file at the same path under `theirs`; returns how many.
fn compare_tree(ours: &std::path::Path, theirs: &std::path::Path) -> usize {
    let mut compared = 0;
    for e in std::fs::read_dir(ours).unwrap() {
        let e = e.unwrap();
        let (a, b) = (e.path(), theirs.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            compared += compare_tree(&a, &b);
        } else {
            let theirs =
                std::fs::read(&b).unwrap_or_else(|_| panic!("{} missing from the spec", b.display()));
            assert!(
                std::fs::read(&a).unwrap() == theirs,
                "{} differs from the specification's copy",
                a.display()
            );
            compared += 1;
        }
    }
    compared
}

/// The six keys of the RDB golden file (`rdb/keys.json`): built by their setup commands, they
/// must give the captured SCANDUMP, DEBUG and INFO (the RDB encoding itself is the server's).
#[test]
fn rdb_keys_fixtures() {
    let doc = read_json(&fixtures().join("../rdb/keys.json"));
    let keys = doc["keys"].as_object().unwrap();
    assert_eq!(keys.len(), 6);
    for (name, k) in keys {
        let mut db = Db::default();
        for cmd in setup_of(k) {
            db.run(&cmd);
        }
        let dump: Vec<Value> = k["scandump"].as_array().unwrap().clone();
        match db.keys.get(name.as_bytes()).unwrap() {
            Entry::Bloom(c) => {
                assert_eq!(json!(k["type"]), json!("MBbloom--"));
                assert_eq!(bf_scandump(c), dump, "{name}: SCANDUMP");
                assert_eq!(json!(c.debug_lines()), k["debug"], "{name}: BF.DEBUG");
                assert_eq!(bloom_info_resp2(c), k["info_resp2"], "{name}: BF.INFO");
                assert_eq!(bf_reload(&dump), *c, "{name}: LOADCHUNK round trip");
            }
            Entry::Cuckoo(c) => {
                assert_eq!(json!(k["type"]), json!("MBbloomCF"));
                assert_eq!(cf_scandump(c), dump, "{name}: SCANDUMP");
                assert_eq!(json!(c.debug_line()), k["debug"], "{name}: CF.DEBUG");
                assert_eq!(cuckoo_info_resp2(c), k["info_resp2"], "{name}: CF.INFO");
                if dump.len() > 1 {
                    assert_eq!(cf_reload(&dump), *c, "{name}: LOADCHUNK round trip");
                }
            }
        }
    }
}

/// Library-level lines of `shared/spec/fixtures/transcript.jsonl` (line numbers from 0): the
/// SCANDUMP / LOADCHUNK iterator arithmetic, header refusals, and a few filter results. The
/// expected values are copied from the transcript (the current-version reply where it differs).
#[test]
fn transcript_library_lines() {
    use sift::compat::redisbloom::{BloomChunkError, CuckooChunkError, CuckooHeaderError};
    let limits = LoadLimits::default();

    // 134-135: BF.RESERVE sd 0.1 10, BF.ADD sd item1.
    let mut sd = BloomChain::new(10, 0.1, 2, false).unwrap();
    assert_eq!(sd.add(b"item1"), Ok(true));
    let header = b64("AQAAAAAAAAABAAAABQAAAAIAAAAIAAAAAAAAAEAAAAAAAAAAAQAAAAAAAACamZmZmZmpP0r31J7e8BhABQAAAAoAAAAAAAAAAA==");
    let chunk = b64("AQgAgAAEIAA=");
    assert_eq!(sd.scandump(0).map(|(n, d)| (n, d.to_vec())), Some((1, header.clone()))); // 136
    assert_eq!(sd.scandump(1).map(|(n, d)| (n, d.to_vec())), Some((9, chunk.clone()))); // 137
    assert_eq!(sd.scandump(5).map(|(n, d)| (n, d.to_vec())), Some((9, b64("AAQgAA==")))); // 138
    assert!(sd.scandump(9).is_none()); // 139
    assert!(sd.scandump(-1).is_none()); // 140
                                        // 145-147: LOADCHUNK sd2 1 <header>, 9 <chunk>, EXISTS item1.
    let mut sd2 = BloomChain::from_header(&header, &limits).unwrap();
    sd2.load_chunk(9, &chunk).unwrap();
    assert!(sd2.contains(b"item1"));
    assert_eq!(sd2.load_chunk(1, &header), Err(BloomChunkError::BadIterator)); // 148
    assert_eq!(sd2.load_chunk(0, b"x"), Err(BloomChunkError::BadIterator)); // 149
    assert_eq!(sd2.load_chunk(100, b"x"), Err(BloomChunkError::NoLink)); // 150
    assert_eq!(sd2.load_chunk(10, &b64("AQgAgAAEIAAh")), Err(BloomChunkError::TooBig)); // 151
    assert!(BloomChain::from_header(b"garbage", &limits).is_err()); // 154

    // 59-61 (current reply): BF.RESERVE r9 0.5 100 is capped to 0.25; 62-64: r25.
    for (p, want) in [(0.5, "bytes:56 bits:448 hashes:4"), (0.25, "bytes:56 bits:448 hashes:4")] {
        let mut r = BloomChain::new(100, p, 2, false).unwrap();
        assert_eq!(r.add(b"x"), Ok(true));
        assert_eq!(
            r.debug_lines(),
            ["size:1".to_string(), format!("{want} hashwidth:64 capacity:100 size:1 ratio:0.125")]
        );
    }

    // 249-250: CF.RESERVE cs 4, CF.ADD cs a.
    let mut cs = CuckooFilter::new(4, 2, 20, 1).unwrap();
    cs.insert(b"a").unwrap();
    let cf_header = b64("AQAAAAAAAAACAAAAAAAAAAAAAAAAAAAAAQAAAAAAAAACABQAAQA=");
    assert_eq!(cs.scandump(0).map(|(n, d)| (n, d.to_vec())), Some((1, cf_header.clone()))); // 251
    assert_eq!(cs.scandump(1).map(|(n, d)| (n, d.to_vec())), Some((5, b64("AADEAA==")))); // 252
    assert!(cs.scandump(5).is_none()); // 253
    assert_eq!(cs.scandump(3).map(|(n, d)| (n, d.to_vec())), Some((7, b64("AADEAA==")))); // 254
                                                                                          // 247-248: an empty filter has no dump.
    assert!(CuckooFilter::new(100, 2, 20, 1).unwrap().scandump(0).is_none());
    // 256-258, 265-267: CF.LOADCHUNK cs2.
    let mut cs2 = CuckooFilter::from_header(&cf_header, &limits).unwrap();
    cs2.load_chunk(5, b"@@@@").unwrap();
    assert_eq!(
        cs2.debug_line(),
        "bktsize:2 buckets:2 items:1 deletes:0 filters:1 max_iterations:20 expansion:1"
    );
    assert_eq!(cs2.load_chunk(100, b"x"), Err(CuckooChunkError::DoesNotFit)); // 265
    assert_eq!(cs2.load_chunk(6, b"x"), Ok(())); // 266: past the end, lands in the last sub-filter
    assert_eq!(cs2.load_chunk(5, b""), Err(CuckooChunkError::BadPosition)); // 267
                                                                            // 260, 261, 270 (current reply): header refusals.
    assert_eq!(CuckooFilter::from_header(b"short", &limits), Err(CuckooHeaderError::Length));
    let three_buckets = b64("AAAAAAAAAAADAAAAAAAAAAAAAAAAAAAAAQAAAAAAAAACABQAAQA=");
    assert_eq!(CuckooFilter::from_header(&three_buckets, &limits), Err(CuckooHeaderError::NumBuckets));
    let expansion_40000 = b64("AAAAAAAAAAACAAAAAAAAAAAAAAAAAAAAAQAAAAAAAAACABQAQJw=");
    assert_eq!(CuckooFilter::from_header(&expansion_40000, &limits), Err(CuckooHeaderError::Expansion));

    // 216-217: duplicates are stored by INSERT; INSERTNX refuses present items.
    let mut ci = CuckooFilter::new(CF_DEFAULT_CAPACITY, 2, 20, 1).unwrap();
    assert_eq!([ci.insert(b"a"), ci.insert(b"b"), ci.insert(b"a")], [Ok(()); 3]);
    assert_eq!([ci.insert_unique(b"a"), ci.insert_unique(b"c")], [Ok(false), Ok(true)]);
    assert_eq!(ci.count(b"a"), 2);
    // 230-236: CF.RESERVE full 4 EXPANSION 0.
    let mut full = CuckooFilter::new(4, 2, 20, 0).unwrap();
    let r: Vec<_> = [b"1", b"2", b"3", b"4", b"5", b"6"].iter().map(|i| full.insert(*i)).collect();
    let no = Err(CuckooInsertError::NoSpace);
    assert_eq!(r, [Ok(()), Ok(()), Ok(()), Ok(()), no, no]); // 231
    assert_eq!(full.insert(b"7"), no); // 232
    assert_eq!(full.insert_unique(b"1"), Ok(false)); // 233
    assert_eq!(full.insert_unique(b"8"), Err(CuckooInsertError::NoSpace)); // 234
    assert_eq!(
        [full.insert_unique(b"1"), full.insert_unique(b"9")],
        [Ok(false), Err(CuckooInsertError::NoSpace)]
    ); // 235
    assert_eq!((full.info().size, full.len(), full.info().expansion), (60, 4, 0)); // 236
                                                                                   // 237-239: CF.RESERVE mx 4, one CF.INSERT of 0 … 139 grows to 35 sub-filters.
    let mut mx = CuckooFilter::new(4, 2, 20, 1).unwrap();
    for i in 0..140 {
        mx.insert(i.to_string().as_bytes()).unwrap();
    }
    assert_eq!(
        mx.debug_line(),
        "bktsize:2 buckets:2 items:140 deletes:0 filters:35 max_iterations:20 expansion:1"
    );
}
