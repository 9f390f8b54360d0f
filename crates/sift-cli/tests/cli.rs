//! The `sift` binary driven as a user would: real files, pipes and exit codes.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};

use predicates::prelude::*;

mod common;
use common::{run, sift};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(name)
}

fn keys_file(dir: &Path, n: u32) -> PathBuf {
    let p = dir.join("keys.txt");
    let text: String = (0..n).map(|i| format!("key-{i}\n")).collect();
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn plan_reproduces_seed_002_as_text_and_json() {
    let (code, out, _) = run(sift().args(["plan", "-n", "1e8", "-p", "0.01"]));
    assert_eq!(code, 0);
    let bloom = out.lines().find(|l| l.starts_with("bloom ")).expect("a bloom row");
    assert!(bloom.contains("958505838") && bloom.contains("114.26 MiB"), "{bloom}");
    let cols: Vec<&str> = bloom.split_whitespace().collect();
    assert_eq!(cols[6], "7", "k in {bloom}");
    assert!(out.contains("recommended: blocked-bloom"), "{out}");

    let (code, out, _) = run(sift().args(["plan", "--items", "100M", "--fpr", "1%", "--json"]));
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let b = v["families"].as_array().unwrap().iter().find(|f| f["family"] == "bloom").unwrap();
    assert_eq!(b["bits"], 958_505_838u64);
    assert_eq!(b["hashes"], 7);
    assert!((b["mib"].as_f64().unwrap() - 114.26).abs() < 0.01);
    assert_eq!(v["recommendation"]["family"], "blocked-bloom");
}

#[test]
fn plan_from_memory_and_errors() {
    // 114 MiB at 1% holds about 1e8 items in a classic Bloom filter.
    let (code, out, _) = run(sift().args(["plan", "-m", "114MiB", "-p", "0.01", "--json"]));
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let b = v["families"].as_array().unwrap().iter().find(|f| f["family"] == "bloom").unwrap();
    let n = b["items"].as_f64().unwrap();
    assert!((n - 1e8).abs() < 1e6, "{n}");
    let (code, _, err) = run(sift().args(["plan", "-n", "1e8"]));
    assert_eq!(code, 2);
    assert!(err.contains("-p is missing"), "{err}");
    let (code, _, err) = run(sift().args(["plan", "-n", "1e8", "-p", "2"]));
    assert_eq!(code, 2);
    assert!(err.contains("between 0 and 1"), "{err}");
    let (code, _, err) = run(sift().args(["plan", "-m", "12 parsecs", "-p", "0.01"]));
    assert_eq!(code, 2);
    assert!(err.contains("unknown unit"), "{err}");
}

#[test]
fn build_from_file_then_query_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 20_000);
    let out = dir.path().join("k.sift");
    let (code, _, _) = run(sift().arg("build").arg("-q").arg("-o").arg(&out).arg(&keys));
    assert_eq!(code, 0);
    // All present: 0. One absent: 1 (and the answer lines). A bad file: 2.
    sift()
        .arg("query")
        .arg(&out)
        .args(["key-0", "key-19999"])
        .assert()
        .code(0)
        .stdout("key-0\tmaybe\nkey-19999\tmaybe\n");
    sift().arg("query").arg(&out).args(["key-1", "certainly-not-there"]).assert().code(1).stdout(
        predicate::str::contains("key-1\tmaybe\n").and(predicate::str::contains("certainly-not-there\tno\n")),
    );
    sift()
        .arg("query")
        .arg(dir.path().join("missing.sift"))
        .arg("x")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("missing.sift"));
    // Every key from stdin: no false negatives, exit 0.
    let (code, out_text, _) = run(sift().arg("query").arg("--count").arg(&out).pipe_stdin(&keys).unwrap());
    assert_eq!((code, out_text.trim()), (0, "20000"));
    // 20 000 non-members at p = 1%: the count of "maybe" stays within a 99.9% binomial bound.
    let others: String = (0..20_000).map(|i| format!("other-{i}\n")).collect();
    let (code, out_text, _) = run(sift().arg("query").arg("--count").arg(&out).write_stdin(others));
    assert_eq!(code, 1);
    let fp: f64 = out_text.trim().parse().unwrap();
    assert!(fp < 20_000.0 * (0.01 + 3.1 * (0.01f64 * 0.99 / 20_000.0).sqrt()) * 1.1, "{fp} false positives");
}

#[test]
fn build_from_gzip_stdin_uses_a_scalable_filter() {
    let dir = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for i in 0..30_000 {
        writeln!(gz, "url-{i}").unwrap();
    }
    let gz = gz.finish().unwrap();
    let out = dir.path().join("s.sift");
    let (code, _, err) = run(sift().arg("build").arg("-o").arg(&out).write_stdin(gz.clone()));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("scalable-bloom"), "{err}");
    sift().arg("query").arg(&out).args(["url-0", "url-29999"]).assert().code(0);
    let (_, info, _) = run(sift().arg("inspect").arg("--json").arg(&out));
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(v["kind"], "scalable-bloom");
    assert!(v["items"].as_u64().unwrap() > 29_000);
    // A gzip file as an argument is counted first and sized exactly.
    let gz_path = dir.path().join("keys.gz");
    std::fs::write(&gz_path, &gz).unwrap();
    let out2 = dir.path().join("b.sift");
    run(sift().arg("build").arg("-q").arg("-o").arg(&out2).arg(&gz_path));
    let (_, info, _) = run(sift().arg("inspect").arg("--json").arg(&out2));
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!((v["kind"].as_str(), v["capacity"].as_u64()), (Some("blocked-bloom"), Some(30_000)));
}

#[test]
fn a_scalable_cuckoo_filter_grows_past_its_items_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 20_000);
    let out = dir.path().join("c.sift");
    let (code, _, err) = run(sift()
        .args(["build", "-q", "--family", "scalable-cuckoo", "-n", "1000", "-o"])
        .arg(&out)
        .arg(&keys));
    assert_eq!(code, 0, "{err}");
    let (code, count, _) = run(sift().arg("query").arg("--count").arg(&out).pipe_stdin(&keys).unwrap());
    assert_eq!((code, count.trim()), (0, "20000"), "every key present after growth");
    let (_, info, _) = run(sift().arg("inspect").arg("--json").arg(&out));
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(v["kind"], "scalable-cuckoo");
    // `build` skips a key the filter already reports (a false positive): at most p = 1% of them.
    let items = v["items"].as_u64().unwrap();
    assert!((19_800..=20_000).contains(&items), "{items} items stored");
    // 1000 + 2000 + 4000 + 8000 + 16000 items at ~95% load: five tables.
    assert_eq!(v["tables"], 5, "{info}");

    // Without -n, a file is counted first: one table sized for its keys.
    let counted = dir.path().join("counted.sift");
    run(sift().args(["build", "-q", "--family", "scalable-cuckoo", "-o"]).arg(&counted).arg(&keys));
    let (_, info, _) = run(sift().arg("inspect").arg("--json").arg(&counted));
    let v: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!((v["tables"].as_u64(), v["capacity"].as_u64()), (Some(1), Some(20_000)), "{info}");

    // Past its growth limit (p = 0.1%: three tables, 10 + 20 + 40 items) the build stops with
    // an error that says so, and writes no file.
    let stopped = dir.path().join("stopped.sift");
    let (code, _, err) = run(sift()
        .args(["build", "-q", "--family", "scalable-cuckoo", "-n", "10", "-p", "0.001", "-o"])
        .arg(&stopped)
        .pipe_stdin(&keys)
        .unwrap());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("growth limit") && err.contains("3 tables"), "{err}");
    assert!(!stopped.exists());
}

#[test]
fn dedup_with_state_across_two_runs() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.sift");
    let first: String = (0..5000).chain(0..5000).map(|i| format!("line {i}\n")).collect();
    let (code, out, err) = run(sift().arg("dedup").arg("--state").arg(&state).write_stdin(first));
    assert_eq!(code, 0);
    let out_lines: Vec<&str> = out.lines().collect();
    // Never a repeat; at p = 0.1% a few new lines may be falsely dropped.
    let unique: std::collections::HashSet<&str> = out_lines.iter().copied().collect();
    assert_eq!(unique.len(), out_lines.len());
    assert!(out_lines.len() > 4980 && out_lines.len() <= 5000, "{}", out_lines.len());
    assert!(err.contains("10000 lines in") && err.contains("expected false drops"), "{err}");
    assert!(state.exists());
    // Second run: the old lines are dropped, only the new ones pass.
    let second: String = (4000..6000).map(|i| format!("line {i}\n")).collect();
    let (code, out, _) =
        run(sift().arg("dedup").arg("--state").arg(&state).arg("--json").write_stdin(second));
    assert_eq!(code, 0);
    let n = out.lines().count();
    assert!(n > 990 && n <= 1000, "{n}");
    assert!(out.lines().all(|l| l["line ".len()..].parse::<u32>().unwrap() >= 5000));
}

#[test]
fn inspect_good_truncated_corrupted_and_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 1000);
    let good = dir.path().join("g.sift");
    run(sift().arg("build").arg("-q").arg("-o").arg(&good).arg(&keys));
    sift().arg("inspect").arg(&good).assert().code(0).stdout(
        predicate::str::contains("blocked-bloom")
            .and(predicate::str::contains("checksum"))
            .and(predicate::str::contains("ok (CRC32C"))
            .and(predicate::str::contains("fpr_planned"))
            .and(predicate::str::contains("verdict")),
    );
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path().join("t.sift");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let (code, _, err) = run(sift().arg("inspect").arg(&truncated));
    assert_eq!(code, 2);
    assert!(err.contains("t.sift") && err.contains("truncated"), "{err}");
    let corrupted = dir.path().join("c.sift");
    let mut c = bytes.clone();
    c[bytes.len() / 2] ^= 0x40;
    std::fs::write(&corrupted, &c).unwrap();
    let (code, out, err) = run(sift().arg("inspect").arg(&corrupted));
    assert_eq!(code, 2);
    assert!(out.contains("MISMATCH") && err.contains("checksum mismatch"), "{out} / {err}");
    sift().arg("query").arg(&corrupted).arg("key-1").assert().code(2);
    // Every prefix of a valid file: an error, never a panic.
    for cut in [0, 1, 3, 4, 16, 31, 32, 40, bytes.len() - 1] {
        std::fs::write(&truncated, &bytes[..cut]).unwrap();
        assert_eq!(run(sift().arg("inspect").arg(&truncated)).0, 2, "cut {cut}");
        assert_eq!(run(sift().arg("query").arg(&truncated).arg("k")).0, 2, "cut {cut}");
    }
}

#[test]
fn binary_garbage_and_empty_inputs() {
    let dir = tempfile::tempdir().unwrap();
    // Deterministic pseudo-random bytes: NULs, CRs, invalid UTF-8, a few newlines.
    let mut s = 0x1234_5678u32;
    // 200 003 bytes: not a multiple of 32 (any such length is a valid Parquet bitset).
    let garbage: Vec<u8> = (0..200_003)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 24) as u8
        })
        .collect();
    let g = dir.path().join("garbage.bin");
    std::fs::write(&g, &garbage).unwrap();
    for args in [vec!["inspect"], vec!["query"], vec!["convert", "-o", "/dev/null"]] {
        let (code, _, err) = run(sift().args(&args).arg(&g).arg("k"));
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    for fmt in ["guava", "parquet", "redisbloom"] {
        let (code, _, _) = run(sift().args(["inspect", "--format", fmt]).arg(&g));
        assert_eq!(code, 2, "--format {fmt}");
    }
    // Garbage as keys is fine: keys are bytes.
    let out = dir.path().join("g.sift");
    let (code, _, err) = run(sift().arg("build").arg("-o").arg(&out).arg(&g));
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = run(sift().arg("dedup").arg("-q").arg(&g));
    assert_eq!(code, 0);
    // Empty input everywhere.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let e = dir.path().join("e.sift");
    assert_eq!(run(sift().arg("build").arg("-q").arg("-o").arg(&e).arg(&empty)).0, 0);
    assert_eq!(run(sift().arg("build").arg("-q").arg("-o").arg(&e).write_stdin("")).0, 0);
    let (code, out, _) = run(sift().arg("query").arg(&e).write_stdin(""));
    assert_eq!((code, out.as_str()), (0, ""));
    let (code, out, _) = run(sift().arg("dedup").arg("-q").write_stdin(""));
    assert_eq!((code, out.as_str()), (0, ""));
    let (code, _, err) = run(sift().arg("inspect").arg(&empty));
    assert_eq!(code, 2);
    assert!(err.contains("empty"), "{err}");
}

#[test]
fn over_long_lines_are_skipped_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let input = format!("short\n{}\nalso-short\n", "x".repeat(5000));
    let out = dir.path().join("l.sift");
    let (code, _, err) = run(sift()
        .arg("build")
        .args(["--max-line", "100", "-n", "10", "-o"])
        .arg(&out)
        .write_stdin(input.clone()));
    assert_eq!(code, 0);
    assert!(err.contains("line 2") && err.contains("longer than 100 bytes"), "{err}");
    sift().arg("query").arg(&out).args(["short", "also-short"]).assert().code(0);
    let (code, stdout, err) = run(sift().args(["dedup", "--max-line", "100"]).write_stdin(input));
    assert_eq!(code, 0);
    assert_eq!(stdout, "short\nalso-short\n");
    assert!(err.contains("1 over-long lines skipped"), "{err}");
}

#[test]
fn nul_separated_keys() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("z.sift");
    run(sift()
        .args(["build", "-0", "-q", "-n", "3", "-o"])
        .arg(&out)
        .write_stdin(&b"a b\0line\nbreak\0c"[..]));
    sift().arg("query").arg(&out).arg("a b").arg("line\nbreak").arg("c").assert().code(0);
}

#[test]
fn convert_redisbloom_chunks_round_trip_and_query() {
    let dir = tempfile::tempdir().unwrap();
    for (name, items) in [("bf_scaling_3_filters", 40), ("cf_expanded", 200)] {
        let src = fixture(&format!("fixtures/{name}.scandump.jsonl"));
        let s = dir.path().join(format!("{name}.sift"));
        let back = dir.path().join(format!("{name}.jsonl"));
        sift().arg("convert").arg(&src).arg("-o").arg(&s).assert().code(0);
        sift().arg("convert").arg(&s).arg("--to").arg("redisbloom").arg("-o").arg(&back).assert().code(0);
        assert_eq!(
            std::fs::read(&src).unwrap(),
            std::fs::read(&back).unwrap(),
            "{name}: chunks differ after the round trip"
        );
        // The items RedisBloom inserted ("0" .. "items-1") are all found.
        let keys: Vec<String> = (0..items).map(|i| i.to_string()).collect();
        sift().arg("query").arg(&s).args(&keys).assert().code(0);
        let (_, info, _) = run(sift().arg("inspect").arg("--json").arg(&src));
        let v: serde_json::Value = serde_json::from_str(&info).unwrap();
        assert_eq!(v["items"].as_u64(), Some(items as u64), "{name}");
        // A native filter cannot become a RedisBloom one: a clear error.
    }
    let keys = keys_file(dir.path(), 100);
    let native = dir.path().join("n.sift");
    run(sift().arg("build").arg("-q").arg("-o").arg(&native).arg(&keys));
    let (code, _, err) =
        run(sift().arg("convert").arg(&native).args(["--to", "redisbloom", "-o"]).arg(dir.path().join("x")));
    assert_eq!(code, 2);
    assert!(err.contains("rebuild it from the keys"), "{err}");
    // A truncated chunk file is refused with the reason.
    let text = std::fs::read_to_string(fixture("fixtures/bf_scaling_3_filters.scandump.jsonl")).unwrap();
    let cut: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    let (code, _, err) = run(sift().args(["convert", "-", "-o"]).arg(dir.path().join("y")).write_stdin(cut));
    assert_eq!(code, 2);
    assert!(err.contains("end marker"), "{err}");
}

#[test]
fn build_redisbloom_family_then_dump() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 3000);
    let s = dir.path().join("bf.sift");
    run(sift().args(["build", "-q", "--family", "redisbloom-bf", "-n", "1000", "-o"]).arg(&s).arg(&keys));
    let dump = dir.path().join("bf.jsonl");
    sift().arg("convert").arg(&s).arg("-o").arg(&dump).assert().code(0);
    let text = std::fs::read_to_string(&dump).unwrap();
    assert!(text.starts_with("[1, \"") && text.ends_with("[0, \"\"]\n"), "{text}");
    sift().arg("query").arg(&dump).arg("key-0").assert().code(2); // a dump is not a sift file…
    let again = dir.path().join("again.sift");
    sift().arg("convert").arg(&dump).arg("-o").arg(&again).assert().code(0); // …until converted
    assert_eq!(std::fs::read(&s).unwrap(), std::fs::read(&again).unwrap());
    sift().arg("query").arg(&again).args(["key-0", "key-2999"]).assert().code(0);
}

#[test]
fn parquet_bytes_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 5000);
    let s = dir.path().join("s.sift");
    run(sift().args(["build", "-q", "--family", "split-block-bloom", "-o"]).arg(&s).arg(&keys));
    let pq = dir.path().join("s.sbbf");
    sift().arg("convert").arg(&s).arg("-o").arg(&pq).assert().code(0);
    let pq_bytes = std::fs::read(&pq).unwrap();
    assert!(pq_bytes.len().is_power_of_two() && pq_bytes.len() >= 32);
    let s2 = dir.path().join("s2.sift");
    sift().args(["convert", "--from", "parquet"]).arg(&pq).arg("-o").arg(&s2).assert().code(0);
    let pq2 = dir.path().join("s2.sbbf");
    sift().arg("convert").arg(&s2).arg("--to").arg("parquet").arg("-o").arg(&pq2).assert().code(0);
    assert_eq!(pq_bytes, std::fs::read(&pq2).unwrap());
    sift().arg("query").arg(&s2).args(["key-0", "key-4999"]).assert().code(0);
    sift()
        .args(["inspect", "--format", "parquet"])
        .arg(&pq)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("split-block-bloom"));
}

/// Golden bytes written by the real Guava 31.1 (tests/guava/README.md): sift reads them, answers
/// every probe as Guava did, converts them losslessly, and writes the identical bytes for the same
/// inserts.
#[test]
fn guava_golden_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for (name, n, p) in [
        ("strings_1000_0.01", "1000", "0.01"),
        ("strings_100_0.3", "100", "0.3"),
        ("strings_50_1e-6", "50", "1e-6"),
    ] {
        let bin = fixture(&format!("guava/{name}.bin"));
        let keys = fixture(&format!("guava/{name}.keys"));
        let probes = std::fs::read_to_string(fixture(&format!("guava/{name}.probes"))).unwrap();
        let s = dir.path().join(format!("{name}.sift"));
        sift().args(["convert", "--from", "guava"]).arg(&bin).arg("-o").arg(&s).assert().code(0);
        // Membership of the recorded keys.
        sift().arg("query").arg(&s).pipe_stdin(&keys).unwrap().assert().code(0);
        // Every probe answered as Guava answered it.
        let probe_keys: String =
            probes.lines().map(|l| format!("{}\n", l.split('\t').next().unwrap())).collect();
        let (_, out, _) = run(sift().arg("query").arg(&s).write_stdin(probe_keys));
        let want: String = probes
            .lines()
            .map(|l| l.replace("\ttrue", "\tmaybe").replace("\tfalse", "\tno") + "\n")
            .collect();
        assert_eq!(out, want, "{name}");
        // Back to Guava's bytes.
        let back = dir.path().join(format!("{name}.bin"));
        sift().arg("convert").arg(&s).arg("-o").arg(&back).assert().code(0);
        assert_eq!(std::fs::read(&bin).unwrap(), std::fs::read(&back).unwrap(), "{name}: round trip");
        // The same inserts from sift give Guava's bytes.
        let built = dir.path().join(format!("{name}.built.sift"));
        run(sift()
            .args(["build", "-q", "--family", "guava-bloom", "-n", n, "-p", p, "-o"])
            .arg(&built)
            .arg(&keys));
        let built_bin = dir.path().join(format!("{name}.built.bin"));
        sift().arg("convert").arg(&built).arg("--to").arg("guava").arg("-o").arg(&built_bin).assert().code(0);
        assert_eq!(
            std::fs::read(&bin).unwrap(),
            std::fs::read(&built_bin).unwrap(),
            "{name}: sift's bytes differ from Guava's"
        );
        sift()
            .args(["inspect", "--format", "guava"])
            .arg(&bin)
            .assert()
            .code(0)
            .stdout(predicate::str::contains("MURMUR128_MITZ_64"));
    }
}

/// `sift dedup | head -1`: the reader of stdout goes away; sift exits 0 without a panic or an
/// error message, even with much input left.
#[test]
fn broken_pipe_is_a_normal_exit() {
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("sift"))
        .args(["dedup", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for i in 0..2_000_000u32 {
            if writeln!(stdin, "line {i}").is_err() {
                break; // sift stopped reading
            }
        }
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 7];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"line 0\n");
    drop(stdout); // like `head -1` exiting
    let status = child.wait().unwrap();
    feeder.join().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status.code(), Some(0), "stderr: {err}");
    assert!(err.is_empty(), "stderr: {err}");
}

#[test]
fn bench_prints_a_table_and_json() {
    let (code, out, _) =
        run(sift().args(["bench", "-n", "20000", "--family", "bloom", "--family", "binary-fuse8"]));
    assert_eq!(code, 0);
    assert!(out.contains("bloom") && out.contains("binary-fuse8") && out.contains("measured FPR"), "{out}");
    let (_, out, _) = run(sift().args(["bench", "-n", "20000", "--family", "blocked-bloom", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let r = &v["results"][0];
    assert!(r["measured_fpr"].as_f64().unwrap() < 0.02, "{r}");
}

#[test]
fn help_has_examples() {
    for cmd in ["plan", "build", "query", "dedup", "inspect", "convert", "bench"] {
        sift().args([cmd, "--help"]).assert().code(0).stdout(predicate::str::contains("Examples:"));
    }
    sift().arg("--help").assert().code(0).stdout(predicate::str::contains("Exit status"));
    sift().arg("frobnicate").assert().code(2);
}

/// ~4 MB of keys (several 1 MiB chunks): varied lengths, repeats, CRLF endings, blank lines,
/// and no final newline. Returns the bytes and the keys as `build` and `dedup` must see them.
fn mixed_input(lines: u32) -> Vec<u8> {
    let mut v = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for i in 0..lines {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let id = if x % 10 < 3 && i > 0 { (x >> 8) % u64::from(i) } else { u64::from(i) };
        match x % 97 {
            0 => v.extend_from_slice(b"\n"),
            1 => v.extend_from_slice(format!("crlf-{id}\r\n").as_bytes()),
            _ => v.extend_from_slice(
                format!("https://h{}.example/{}/{id}\n", id % 50, "p".repeat((id % 40) as usize)).as_bytes(),
            ),
        }
    }
    v.extend_from_slice(b"last-line-without-newline");
    v
}

/// The lines of `input` split as the CLI does (newline, then a trailing CR removed from the key).
fn split_lines(input: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let end = rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |i| i + 1);
        let (raw, next) = rest.split_at(end);
        let key = raw.strip_suffix(b"\n").unwrap_or(raw);
        out.push((key.strip_suffix(b"\r").unwrap_or(key), raw));
        rest = next;
    }
    out
}

#[test]
fn build_is_the_same_file_for_any_threads_gzip_and_a_sequential_library_build() {
    use sift::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let input = mixed_input(250_000);
    let plain = dir.path().join("keys.txt");
    std::fs::write(&plain, &input).unwrap();
    let gz = dir.path().join("keys.txt.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&input).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();

    // The reference: the library, one key at a time, in input order (blank lines skipped).
    let mut reference = sift::BlockedBloom::new(250_000, 0.01).unwrap();
    for (key, _) in split_lines(&input) {
        if !key.is_empty() {
            reference.insert(key);
        }
    }
    let want = reference.to_bytes();
    for (threads, file) in [("1", &plain), ("2", &plain), ("3", &plain), ("2", &gz)] {
        let out = dir.path().join(format!("t{threads}.sift"));
        let (code, _, err) = run(sift()
            .args(["build", "-q", "-n", "250000", "-p", "0.01", "--threads", threads, "-o"])
            .arg(&out)
            .arg(file));
        assert_eq!(code, 0, "{err}");
        assert!(
            std::fs::read(&out).unwrap() == want,
            "--threads {threads} {}: different bytes",
            file.display()
        );
    }
    // Split over two files, and from stdin: the same keys in the same order, the same file.
    let cut = input.len() / 2 + input[input.len() / 2..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    std::fs::write(&a, &input[..cut]).unwrap();
    std::fs::write(&b, &input[cut..]).unwrap();
    let out = dir.path().join("two.sift");
    run(sift().args(["build", "-q", "-n", "250000", "-o"]).arg(&out).arg(&a).arg(&b));
    assert!(std::fs::read(&out).unwrap() == want, "two files");
    let out = dir.path().join("stdin.sift");
    run(sift().args(["build", "-q", "-n", "250000", "-o"]).arg(&out).write_stdin(input.clone()));
    assert!(std::fs::read(&out).unwrap() == want, "stdin");
}

/// The blocked Bloom filter is filled by one thread per stripe of its blocks; its count of keys
/// that set a bit depends on the insert order (a key whose bits other keys set before it is not
/// counted). In a filter sized for 2,000 keys and given 250,000 (30% repeats), most inserts meet
/// a block that is already crowded, so that count is far from the number of distinct keys and
/// any order other than the input's would change it: the file must still be the sequential one,
/// counter included, for every number of stripes.
#[test]
fn an_overfilled_blocked_build_counts_like_a_sequential_one_for_any_threads() {
    use sift::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let input = mixed_input(250_000);
    let file = dir.path().join("keys.txt");
    std::fs::write(&file, &input).unwrap();
    let mut reference = sift::BlockedBloom::new(2000, 0.01).unwrap();
    let mut distinct = std::collections::HashSet::new();
    for (key, _) in split_lines(&input) {
        if !key.is_empty() {
            reference.insert(key);
            distinct.insert(key);
        }
    }
    // The counter is order-dependent here: well below the distinct keys.
    assert!(reference.len() * 10 < distinct.len() * 9, "{} of {}", reference.len(), distinct.len());
    let want = reference.to_bytes();
    for threads in ["1", "2", "4", "7"] {
        let out = dir.path().join(format!("o{threads}.sift"));
        let (code, _, err) = run(sift()
            .args(["build", "--force", "-n", "2000", "-p", "0.01", "--threads", threads, "-o"])
            .arg(&out)
            .arg(&file));
        assert_eq!(code, 0, "{err}");
        assert!(std::fs::read(&out).unwrap() == want, "--threads {threads}: different bytes");
        assert!(err.contains(&format!("({} distinct by the filter)", reference.len())), "{err}");
    }
}

/// A read error after several chunks have gone to the inserter threads stops the striped build
/// with the error (no hang, no file), for any number of threads.
#[test]
fn a_striped_build_stops_on_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.txt");
    std::fs::write(&good, mixed_input(200_000)).unwrap();
    for threads in ["1", "3"] {
        let out = dir.path().join("out.sift");
        let (code, _, err) = run(sift()
            .args(["build", "-q", "-n", "200000", "--threads", threads, "-o"])
            .arg(&out)
            .arg(&good)
            .arg(dir.path().join("missing.txt")));
        assert_ne!(code, 0);
        assert!(err.contains("missing.txt"), "{err}");
        assert!(!out.exists());
    }
}

#[test]
fn dedup_output_is_a_sequential_test_and_set_for_any_threads() {
    use sift::prelude::*;
    let dir = tempfile::tempdir().unwrap();
    let mut input = mixed_input(200_000);
    // An over-long line in the middle: skipped, not output.
    input.splice(1000..1000, format!("{}\n", "z".repeat(3000)).into_bytes());
    let file = dir.path().join("urls.txt");
    std::fs::write(&file, &input).unwrap();

    // The reference: the library's filter, tested-and-set line by line in input order; each
    // raw line (with its CRLF) is output the first time.
    let mut f = sift::BlockedBloom::new(200_000, 0.001).unwrap();
    let mut want = Vec::new();
    let mut out_lines = 0;
    for (key, raw) in split_lines(&input) {
        if key.len() <= 2048 && f.insert(key) {
            want.extend_from_slice(raw);
            out_lines += 1;
        }
    }
    assert!(out_lines > 100_000);
    for threads in ["1", "2", "3"] {
        let out = sift()
            .args(["dedup", "-q", "-n", "200000", "-p", "0.001", "--max-line", "2048", "--threads", threads])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(out.stdout == want, "--threads {threads}: output differs from the sequential reference");
    }
}

/// The names in a directory, sorted (to see that no temporary file is left).
fn dir_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Runs a program the test needs; its absence fails the test.
fn tool(name: &str) -> StdCommand {
    StdCommand::new(name)
}

fn file_type(p: &Path) -> std::fs::FileType {
    std::fs::symlink_metadata(p).unwrap().file_type()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|euid| euid == "0"))
        .unwrap()
}

/// `-o` on something that is not a regular file: a character device and a FIFO are written in
/// place, a symlink is followed (the link stays, its target gets the filter), `-` is stdout, a
/// directory is refused. Before, each of them was replaced by a regular file (as root, `-o
/// /dev/null` turned /dev/null into one).
#[test]
fn output_to_a_device_a_fifo_a_symlink_or_stdout_is_written_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 3000);
    let reference = dir.path().join("ref.sift");
    assert_eq!(run(sift().args(["build", "-q", "-o"]).arg(&reference).arg(&keys)).0, 0);
    let want = std::fs::read(&reference).unwrap();

    // A null device of our own when we may make one (root: what replaced /dev/null before);
    // otherwise /dev/null itself, which a non-root user could never have replaced.
    let own = dir.path().join("null");
    let null = if is_root() {
        assert!(tool("mknod").arg(&own).args(["c", "1", "3"]).status().unwrap().success());
        own
    } else {
        PathBuf::from("/dev/null")
    };
    let (code, _, err) = run(sift().args(["build", "-q", "-o"]).arg(&null).arg(&keys));
    assert_eq!(code, 0, "{err}");
    assert!(file_type(&null).is_char_device(), "{} is no longer a character device", null.display());

    // A FIFO: its reader gets exactly the file's bytes. (A reader process, not a thread: if
    // the FIFO were replaced, it could be killed instead of waiting forever.)
    let fifo = dir.path().join("fifo");
    assert!(tool("mkfifo").arg(&fifo).status().unwrap().success());
    let mut reader = tool("cat").arg(&fifo).stdout(Stdio::piped()).spawn().unwrap();
    let (code, _, err) = run(sift().args(["build", "-q", "-o"]).arg(&fifo).arg(&keys));
    assert_eq!(code, 0, "{err}");
    let mut got = Vec::new();
    let mut out = reader.stdout.take().unwrap();
    let waited = std::thread::spawn(move || out.read_to_end(&mut got).map(|_| got));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while reader.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let finished = reader.try_wait().unwrap().is_some();
    let _ = reader.kill();
    assert!(finished, "nothing was written to the FIFO");
    assert!(waited.join().unwrap().unwrap() == want, "the FIFO's reader got other bytes");
    assert!(file_type(&fifo).is_fifo());

    // A symlink (relative, to a file in another directory) is followed.
    std::fs::create_dir(dir.path().join("filters")).unwrap();
    let target = dir.path().join("filters").join("v1.sift");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.path().join("current.sift");
    std::os::unix::fs::symlink("filters/v1.sift", &link).unwrap();
    let (code, _, err) = run(sift().args(["build", "-q", "-o"]).arg(&link).arg(&keys));
    assert_eq!(code, 0, "{err}");
    assert!(file_type(&link).is_symlink(), "the link was replaced");
    assert!(std::fs::read(&target).unwrap() == want, "the link's target was not written");
    assert_eq!(dir_names(&dir.path().join("filters")), ["v1.sift"]);

    // `-` is standard output.
    let out = sift().args(["build", "-q", "-o", "-"]).arg(&keys).output().unwrap();
    assert!(out.status.success() && out.stdout == want, "-o - wrote other bytes");
    let out = sift().args(["convert", "-o", "-"]).arg(&reference).output().unwrap();
    assert!(out.status.success() && out.stdout == want);

    // A directory is refused, and named.
    let (code, _, err) = run(sift().args(["build", "-q", "-o"]).arg(dir.path().join("filters")).arg(&keys));
    assert_eq!(code, 2);
    assert!(err.contains("is a directory"), "{err}");
}

/// The output is never an input: by the same name, another spelling, a hard link, a symlink or
/// standard input. The command refuses before reading, and the input is left as it was. Before,
/// `-o e.txt e.txt` replaced the keys with the filter.
#[test]
fn an_input_is_never_overwritten_by_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 100);
    let before = std::fs::read(&keys).unwrap();
    let hard = dir.path().join("hard.txt");
    std::fs::hard_link(&keys, &hard).unwrap();
    let soft = dir.path().join("soft.txt");
    std::os::unix::fs::symlink("keys.txt", &soft).unwrap();
    let spelled = dir.path().join(".").join("keys.txt");
    for out in [&keys, &spelled, &hard, &soft] {
        let (code, _, err) = run(sift().args(["build", "-q", "-o"]).arg(out).arg(&keys));
        assert_eq!(code, 2, "-o {}", out.display());
        assert!(err.contains("keys being read") || err.contains("what is being read"), "{err}");
        assert!(err.contains(&out.display().to_string()), "{err}");
    }
    // Standard input.
    let redirected = StdCommand::new(assert_cmd::cargo::cargo_bin("sift"))
        .args(["build", "-q", "-n", "100", "-o"])
        .arg(&hard)
        .stdin(std::fs::File::open(&keys).unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&redirected.stderr);
    assert_eq!(redirected.status.code(), Some(2), "{err}");
    assert!(err.contains("standard input"), "{err}");
    // convert and dedup --state.
    let (code, _, err) = run(sift().arg("convert").arg(&keys).arg("-o").arg(&soft));
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = run(sift().arg("dedup").arg("--state").arg(&hard).arg(&keys));
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert_eq!(std::fs::read(&keys).unwrap(), before);
    assert!(file_type(&soft).is_symlink());
    assert_eq!(dir_names(dir.path()), ["hard.txt", "keys.txt", "soft.txt"]);
}

/// A build or convert that fails leaves an existing output as it was and no temporary file; a
/// path that cannot be written fails before any input is read, naming what is wrong.
#[test]
fn a_failed_build_or_convert_leaves_the_old_output_and_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 5000);
    let out = dir.path().join("out.sift");
    std::fs::write(&out, b"the previous filter").unwrap();
    let listing = dir_names(dir.path());
    let failures: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        // An input that cannot be read, after one that can.
        (vec!["build".into(), keys.clone().into(), dir.path().join("missing.txt").into()], "missing.txt"),
        // Overfilled: refused.
        (vec!["build".into(), "-n".into(), "100".into(), keys.clone().into()], "--force"),
        // Input that is no filter, or not the format named.
        (vec!["convert".into(), keys.clone().into()], "cannot convert"),
        (vec!["convert".into(), "--from".into(), "parquet".into(), keys.clone().into()], "Parquet"),
    ];
    for (args, says) in failures {
        let (code, _, err) = run(sift().args(&args).arg("-o").arg(&out));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(std::fs::read(&out).unwrap(), b"the previous filter", "{args:?}");
        assert_eq!(dir_names(dir.path()), listing, "{args:?}");
    }
    // No such directory, or a file where a directory should be: refused up front. The input
    // is a FIFO nobody writes to: reading it would hang, so the command cannot have read it.
    let fifo = dir.path().join("never-written");
    assert!(tool("mkfifo").arg(&fifo).status().unwrap().success());
    for (bad, says) in [
        (dir.path().join("no-such-dir").join("x.sift"), "no directory"),
        (keys.join("x.sift"), "is not a directory"),
    ] {
        let (code, err) = run_within(
            StdCommand::new(assert_cmd::cargo::cargo_bin("sift"))
                .args(["build", "-n", "10", "-o"])
                .arg(&bad)
                .arg(&fifo),
            20,
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says) && err.contains(&bad.display().to_string()), "{err}");
    }
}

/// Runs `cmd` (stdout discarded) and returns its exit code and stderr; kills it and fails the
/// test if it still runs after `secs` seconds (a command stuck reading input it should not read).
fn run_within(cmd: &mut StdCommand, secs: u64) -> (i32, String) {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    (child.wait().unwrap().code().unwrap(), err)
}

/// Runs `script` with sh in a private mount namespace (`unshare -rm`: the tmpfs it mounts
/// vanishes with it), with `SIFT` set to the binary. `None` when this machine cannot make
/// namespaces; under CI=true that is a failure.
fn in_mount_namespace(script: &str, envs: &[(&str, &Path)]) -> Option<(i32, String, String)> {
    let mut cmd = tool("unshare");
    cmd.args(["-rm", "sh", "-c", script]).env("SIFT", assert_cmd::cargo::cargo_bin("sift"));
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("unshare (util-linux) runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    if code == 97 {
        assert!(std::env::var("CI").is_err(), "cannot mount a tmpfs in a private namespace: {stderr}");
        eprintln!("NOTICE: skipped: no private mount namespace here ({stderr})");
        return None;
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
    Some((code, String::from_utf8_lossy(&out.stdout).into_owned(), stderr))
}

/// A full disk while the filter is written, and a read-only directory: the old output and the
/// old `dedup --state` stay as they were, no temporary file is left, and the message names the
/// file. The read-only directory is found before any input is read.
#[test]
fn a_full_disk_or_a_read_only_directory_leaves_the_old_files() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 2000);
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let script = r#"
        mount -t tmpfs -o size=256k tmpfs "$MNT" || exit 97
        printf old > "$MNT/out.sift"
        # A 1.2 MB filter on a 256 KiB file system.
        "$SIFT" build -q -n 1000000 -o "$MNT/out.sift" "$KEYS"; echo "build-full=$?"
        # A small state, then the disk filled up, then a run whose state cannot be saved.
        "$SIFT" dedup -q -n 100 --state "$MNT/seen.sift" "$KEYS" > /dev/null; echo "dedup-first=$?"
        cp "$MNT/seen.sift" "$MNT/../seen.before"
        cat /dev/zero > "$MNT/fill" 2>/dev/null
        printf 'new line 1\nnew line 2\n' | "$SIFT" dedup -q --state "$MNT/seen.sift" > /dev/null; echo "dedup-full=$?"
        cmp -s "$MNT/seen.sift" "$MNT/../seen.before" && echo "state-kept"
        rm "$MNT/fill"
        mount -o remount,ro "$MNT" || exit 97
        "$SIFT" build -q -o "$MNT/out.sift" "$KEYS"; echo "build-ro=$?"
        echo "listing: $(ls -A "$MNT" | tr '\n' ' ')"
        echo "out: $(cat "$MNT/out.sift")"
    "#;
    let Some((code, out, err)) = in_mount_namespace(script, &[("MNT", &mnt), ("KEYS", &keys)]) else {
        return;
    };
    assert_eq!(code, 0, "{out}\n{err}");
    for line in ["build-full=2", "dedup-first=0", "dedup-full=2", "state-kept", "build-ro=2", "out: old"] {
        assert!(out.lines().any(|l| l == line), "no `{line}` in:\n{out}\n{err}");
    }
    assert!(out.contains("listing: out.sift seen.sift \n"), "{out}");
    assert!(err.contains("out.sift") && err.contains("No space left on device"), "{err}");
    assert!(err.contains("seen.sift") && err.contains("the state was not saved"), "{err}");
    assert!(err.contains("Read-only file system") && err.contains("cannot create a file in"), "{err}");
}

/// `dedup --state` keeps the old state when the run fails (an unreadable input after a good
/// one) or its output is closed early: a rerun sees those lines again.
#[test]
fn dedup_state_is_not_saved_when_the_run_fails() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("seen.sift");
    let (code, _, _) = run(sift().arg("dedup").arg("-q").arg("--state").arg(&state).write_stdin("a\nb\n"));
    assert_eq!(code, 0);
    let before = std::fs::read(&state).unwrap();
    let good = dir.path().join("good.txt");
    std::fs::write(&good, (0..1000).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
    let (code, out, err) = run(sift()
        .arg("dedup")
        .arg("-q")
        .arg("--state")
        .arg(&state)
        .arg(&good)
        .arg(dir.path().join("missing.txt")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("missing.txt"), "{err}");
    assert!(out.lines().count() > 0, "the good file's lines went out before the failure");
    assert_eq!(std::fs::read(&state).unwrap(), before, "the state was saved by a failed run");
    assert_eq!(dir_names(dir.path()), ["good.txt", "seen.sift"]);

    // Output closed after the first line: a normal exit, and the state is not saved.
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("sift"))
        .args(["dedup", "-q", "--state"])
        .arg(&state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for i in 0..2_000_000u32 {
            if writeln!(stdin, "fresh {i}").is_err() {
                break;
            }
        }
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 8];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let status = child.wait().unwrap();
    feeder.join().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(std::fs::read(&state).unwrap(), before, "the state was saved after the output closed");
    assert_eq!(dir_names(dir.path()), ["good.txt", "seen.sift"]);
}

/// The FPR `build` and `inspect` report is the one the filter answers with: measured on keys
/// never inserted, within a 4.5-sigma binomial bound. A filter given 100 times its -n is
/// refused without --force; with it, it is written, reported at ~100% and judged REBUILD.
/// Before, such a filter was written and reported at 58.66% while it answered yes to everything.
#[test]
fn an_overfilled_filter_is_refused_and_reported_as_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 100_000);
    let probes: String = (0..100_000).map(|i| format!("never-{i}\n")).collect();
    let out = dir.path().join("over.sift");
    let (code, _, err) = run(sift().args(["build", "-n", "1000", "-o"]).arg(&out).arg(&keys));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("sized for 1000 keys") && err.contains("--force") && err.contains("-n 100000"),
        "{err}"
    );
    assert!(!out.exists());
    for (family, n, force) in
        [("blocked-bloom", "1000", true), ("bloom", "40000", true), ("split-block-bloom", "60000", false)]
    {
        let mut cmd = sift();
        cmd.args(["build", "--family", family, "-n", n, "-o"]).arg(&out).arg(&keys);
        if force {
            cmd.arg("--force");
        }
        let (code, _, err) = run(&mut cmd);
        assert_eq!(code, 0, "{family}: {err}");
        let (_, count, _) = run(sift().arg("query").arg("--count").arg(&out).write_stdin(probes.clone()));
        let measured: f64 = count.trim().parse::<f64>().unwrap() / 100_000.0;
        let (_, info, _) = run(sift().arg("inspect").arg("--json").arg(&out));
        let v: serde_json::Value = serde_json::from_str(&info).unwrap();
        let reported = v["fpr_estimated_now"].as_f64().unwrap();
        let sigma = (reported * (1.0 - reported) / 100_000.0).sqrt();
        assert!(
            (measured - reported).abs() <= 4.5 * sigma + 1e-5,
            "{family} -n {n}: inspect says {reported}, {measured} measured"
        );
        let said = err.split("FPR now ").nth(1).unwrap().trim();
        assert_eq!(said, output_pct(reported), "{family}: build said {said}");
        let verdict = v["verdict"].as_str().unwrap();
        assert!(verdict.starts_with("REBUILD") == (reported > 0.02), "{family}: {verdict} at {reported}");
        if family == "blocked-bloom" {
            assert!(measured > 0.999 && verdict.contains("100.00%"), "{measured}: {verdict}");
        }
    }
}

/// `pct` of the CLI: two decimals in percent down to 1%, four below, then scientific.
fn output_pct(p: f64) -> String {
    if p >= 0.01 {
        format!("{:.2}%", p * 100.0)
    } else if p >= 1e-4 {
        format!("{:.4}%", p * 100.0)
    } else {
        format!("{p:.2e}")
    }
}

/// Plans that the formulas answer but nobody can mean: each is refused with what is wrong and
/// what is possible instead. Before, `-p 1e-300` planned 1.34 GiB, `-m 8` recommended a 100%
/// FPR, and `-n 1e20` was "not a whole number of at least 1".
#[test]
fn plans_that_cannot_be_meant_say_what_is_possible() {
    let cases: [(&[&str], &[&str]); 7] = [
        (&["-n", "1e6", "-p", "1e-300"], &["64 bits", "5.42e-14", "-p 6e-13"]),
        (&["-n", "1e6", "-m", "8"], &["100.00%", "9585059 bits (1.14 MiB)", "8 bits hold 0 items"]),
        (&["-n", "1e6", "-m", "8", "-p", "1%"], &["100.00%", "9585059 bits"]),
        (&["-m", "8", "-p", "0.01"], &["hold no item", "9.59 bits per item"]),
        (&["-n", "1e20", "-p", "0.01"], &["larger than sift counts"]),
        (&["-n", "1e18", "-p", "0.1"], &["256.00 TiB", "lower -n or raise -p"]),
        (&["-n", "1e6", "-p", "0.01", "-k", "100"], &["-k 100", "between 1 and 64"]),
    ];
    for (args, says) in cases {
        let (code, out, err) = run(sift().arg("plan").args(args));
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{args:?}: no `{s}` in {err}");
        }
        assert!(!err.contains("whole number"), "{args:?}: {err}");
    }
    // A family that cannot reach -p at any size is named, and flagged in JSON.
    let (code, out, _) = run(sift().args(["plan", "-n", "100", "-p", "1e-17"]));
    assert_eq!(code, 0);
    assert!(out.contains("note: gcs cannot reach -p"), "{out}");
    let (_, out, _) = run(sift().args(["plan", "-n", "100", "-p", "1e-17", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let reach = |f: &str| {
        v["families"].as_array().unwrap().iter().find(|r| r["family"] == f).unwrap()["reaches_fpr"].clone()
    };
    assert_eq!((reach("gcs"), reach("bloom")), (serde_json::json!(false), serde_json::json!(true)));
    // Quotient filters with long remainders are not reported at an FPR of 0.
    let (_, out, _) = run(sift().args(["plan", "-n", "1000", "-p", "1e-16"]));
    let row = out.lines().find(|l| l.starts_with("quotient")).unwrap();
    assert!(!row.split_whitespace().any(|c| c == "0"), "{row}");
}

/// What a newcomer meets: an empty input is a warning, a -p a family cannot reach is refused
/// with the families that can, a -p it beats is noted, errors name the file or stream they are
/// about, and suggest flags the subcommand has.
#[test]
fn messages_a_newcomer_meets() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), 100);
    let out = dir.path().join("o.sift");
    let (code, _, err) = run(sift().args(["build", "-q", "-o"]).arg(&out).write_stdin("\n\n"));
    assert_eq!(code, 0);
    assert!(err.contains("warning: the input holds no keys (2 empty lines skipped)"), "{err}");
    for family in ["redisbloom-cf", "xor8", "binary-fuse16"] {
        let (code, _, err) = run(sift()
            .args(["build", "-q", "-f", family, "-n", "100", "-p", "1e-6", "-o"])
            .arg(&out)
            .arg(&keys));
        assert_eq!(code, 2, "{family}: {err}");
        assert!(err.contains("cannot reach it") && err.contains("use --family"), "{family}: {err}");
    }
    let (code, _, err) = run(sift()
        .args(["build", "-f", "redisbloom-cf", "-n", "100", "-p", "0.05", "-o"])
        .arg(&out)
        .arg(&keys));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("redisbloom-cf does not use -p"), "{err}");
    let (code, _, err) = run(sift().args(["dedup", "-f", "redisbloom-cf", "-p", "1e-4"]).write_stdin("a\n"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot reach it"), "{err}");

    let full = StdCommand::new(assert_cmd::cargo::cargo_bin("sift"))
        .arg("dedup")
        .arg(&keys)
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(2));
    assert!(err.contains("standard output") && err.contains("No space left"), "{err}");
    let (code, _, err) = run(sift().arg("convert").arg(&keys).arg("-o").arg(&out));
    assert_eq!(code, 2);
    assert!(err.contains("--from guava") && !err.contains("--format"), "{err}");
    let (code, _, err) = run(sift().arg("inspect").arg(&keys));
    assert_eq!(code, 2);
    assert!(err.contains("--format guava"), "{err}");
    let (code, out_text, err) = run(sift().args(["dedup", "--state", "-"]).write_stdin("a\n"));
    assert_eq!((code, out_text.as_str()), (2, ""), "{err}");
    assert!(err.contains("--state needs a file"), "{err}");
    let (code, _, err) = run(sift().args(["build", "-f", "cuckoo", "-o"]).arg(&out).write_stdin("a\n"));
    assert_eq!(code, 2);
    assert!(err.contains("cuckoo needs -n/--items"), "{err}");
}
