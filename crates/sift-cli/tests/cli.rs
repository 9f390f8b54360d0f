//! The `sift` binary driven as a user would: real files, pipes and exit codes.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};

use assert_cmd::Command;
use predicates::prelude::*;

fn sift() -> Command {
    Command::cargo_bin("sift").expect("the sift binary is built")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(name)
}

/// Runs, checks that nothing panicked, and returns (status code, stdout, stderr).
fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    (out.status.code().expect("exited normally"), String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
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
    assert!(err.contains("fpr"), "{err}");
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
            .args(["build", "-n", "2000", "-p", "0.01", "--threads", threads, "-o"])
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
