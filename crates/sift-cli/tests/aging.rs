//! `sift` on the sliding windows: aging-bloom (by count) and time-limited-bloom (by time) files
//! made by a real sift-server (`SF.RESERVE ... KIND aging`, filled with `SF.MADD` /
//! `SF.MADDAT`, saved with `SF.DUMP`) and by the library. Every answer of `sift query` is
//! checked against the server's own `SF.MEXISTS` or the library's `contains_at` for the same
//! file, and against what the window promises: the keys inside it are all found, keys never
//! added and keys long forgotten are found at the rate the filter's model gives, within
//! binomial bounds.

#[path = "../../sift-client/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use sift::prelude::*;
use sift::{AgingBloom, TimeLimitedBloom};
use support::*;

mod common;
use common::{run, sift};

/// `sift query [extra] FILE` of `keys` on stdin: each key's answer, in order.
fn answers(file: &Path, keys: &[String], extra: &[&str]) -> Vec<bool> {
    let (code, out, err) = run(sift().arg("query").args(extra).arg(file).write_stdin(keys.join("\n") + "\n"));
    assert!(code == 0 || code == 1, "exit {code}: {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), keys.len(), "{err}");
    lines
        .iter()
        .zip(keys)
        .map(|(l, k)| match l.strip_prefix(k.as_str()) {
            Some("\tmaybe") => true,
            Some("\tno") => false,
            _ => panic!("{l:?} for {k}"),
        })
        .collect()
}

/// `sift inspect --json [extra] FILE`.
fn inspect(file: &Path, extra: &[&str]) -> Value {
    let (code, out, err) = run(sift().args(["inspect", "--json"]).args(extra).arg(file));
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn count(v: &[bool]) -> usize {
    v.iter().filter(|&&b| b).count()
}

/// `n` answers for keys never inserted (or forgotten) at the rate `p` the filter's model gives:
/// within the binomial bounds of `p`.
fn assert_rate(what: &str, v: &[bool], p: f64) {
    let (n, hits) = (v.len(), count(v));
    let (lo, hi) = (binomial_lower(n, p), binomial_upper(n, p));
    assert!((lo..=hi).contains(&hits), "{what}: {hits} of {n} found, expected {lo}..={hi} at p = {p}");
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn dump(conn: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("SF.DUMP").arg(key).query(conn).unwrap()
}

/// A window by count from sift-server: the CLI answers exactly as `SF.MEXISTS` does, every key
/// of the window is found, never-added and long-forgotten keys are found at the model's rate,
/// and `inspect` tells the window.
#[test]
fn a_server_window_by_count() {
    let server = Server::sift();
    let mut conn = server.conn();
    let (window, added) = (1_000usize, 30_000usize);
    let _: () = redis::cmd("SF.RESERVE")
        .arg("w")
        .arg(0.01)
        .arg(window)
        .arg("KIND")
        .arg("aging")
        .arg("WINDOW")
        .arg(window)
        .query(&mut conn)
        .unwrap();
    let keys = items("seen", added);
    for chunk in keys.chunks(1000) {
        let _: Vec<i64> = redis::cmd("SF.MADD").arg("w").arg(chunk).query(&mut conn).unwrap();
    }
    let dir = temp_dir("cli-aging");
    let file = write(dir.path(), "w.sift", &dump(&mut conn, "w"));

    let never = items("never", 20_000);
    let all: Vec<String> = keys.iter().chain(&never).cloned().collect();
    let cli = answers(&file, &all, &[]);
    let mut server_says = Vec::new();
    for chunk in all.chunks(1000) {
        let v: Vec<i64> = redis::cmd("SF.MEXISTS").arg("w").arg(chunk).query(&mut conn).unwrap();
        server_says.extend(v.into_iter().map(|x| x == 1));
    }
    assert!(cli == server_says, "the CLI and SF.MEXISTS disagree on the same filter");

    let info = inspect(&file, &[]);
    assert_eq!(info["kind"], "aging-bloom");
    assert_eq!(info["window"], window);
    assert!(info["forgets"].as_str().unwrap().contains("always members"), "{info}");
    let p = info["fpr_estimated_now"].as_f64().unwrap();
    assert!(p > 0.0 && p <= 0.01, "{p}");
    // The window: all found (the query's exit status says so too).
    assert_eq!(count(&cli[added - window..added]), window);
    let (code, _, _) = run(sift().args(["query", "-q"]).arg(&file).args(&keys[added - window..]));
    assert_eq!(code, 0);
    // Never added, and added 10,000+ insertions ago (past the window plus its generations):
    // both at the model's rate.
    assert_rate("never added", &cli[added..], p);
    assert_rate("forgotten", &cli[..20_000], p);
    // The same answers one key at a time (arguments, not stdin).
    let (code, out, _) = run(sift().arg("query").arg(&file).args([&keys[added - 1], &never[0]]));
    assert_eq!(
        out,
        format!("{}\tmaybe\n{}\t{}\n", keys[added - 1], never[0], if cli[added] { "maybe" } else { "no" })
    );
    assert_eq!(code, if cli[added] { 0 } else { 1 });
}

/// `SF.MADDAT` adds at explicit times, one every 60 ms for 5 minutes, into a 60-second window.
fn server_window_by_time(start: u64) -> (Vec<u8>, Vec<String>, Vec<u64>) {
    let server = Server::sift();
    let mut conn = server.conn();
    let _: () = redis::cmd("SF.RESERVE")
        .arg("t")
        .arg(0.01)
        .arg(1_000)
        .arg("KIND")
        .arg("aging")
        .arg("TTL")
        .arg(60)
        .query(&mut conn)
        .unwrap();
    let keys = items("event", 5_000);
    let times: Vec<u64> = (0..keys.len() as u64).map(|i| start + i * 60).collect();
    for (chunk, ts) in keys.chunks(500).zip(times.chunks(500)) {
        let mut pipe = redis::pipe();
        for (k, t) in chunk.iter().zip(ts) {
            pipe.cmd("SF.MADDAT").arg("t").arg(*t).arg(k);
        }
        let _: Vec<Vec<i64>> = pipe.query(&mut conn).unwrap();
    }
    (dump(&mut conn, "t"), keys, times)
}

/// A window by time from sift-server (Unix milliseconds): read at its clock, half a TTL later
/// and now (years later), the CLI answers as the library does for the same file at the same
/// time; the keys of the last TTL are all found, keys older than the TTL plus a generation and
/// never-added keys at the model's rate; now, nothing at all.
#[test]
fn a_server_window_by_time() {
    let start = 1_700_000_000_000u64; // 2023-11-14, Unix ms as the server counts.
    let (bytes, keys, times) = server_window_by_time(start);
    let dir = temp_dir("cli-aging");
    let file = write(dir.path(), "t.sift", &bytes);
    let lib = TimeLimitedBloom::from_bytes(&bytes).unwrap();
    let clock = *times.last().unwrap();
    assert_eq!(lib.clock(), clock);
    let (ttl, span) = (lib.ttl(), lib.generation_span());
    assert_eq!(ttl, 60_000);
    let never = items("never", 20_000);
    let all: Vec<String> = keys.iter().chain(&never).cloned().collect();

    for at in [clock, clock + 30_000] {
        let at_arg = at.to_string();
        let flag: &[&str] = if at == clock { &["--at", "clock"] } else { &["--at", &at_arg] };
        let cli = answers(&file, &all, flag);
        let want: Vec<bool> = all.iter().map(|k| lib.contains_at(k, at)).collect();
        assert!(cli == want, "the CLI and the library disagree at {at}");
        let info = inspect(&file, flag);
        assert_eq!(info["kind"], "time-limited-bloom");
        assert!(info["read_at"].as_str().unwrap().starts_with(&at.to_string()), "{info}");
        assert!(info["ttl"].as_str().unwrap().contains("(1m)"), "{info}");
        assert!(info["forgets"].as_str().unwrap().contains(&(at - ttl).to_string()), "{info}");
        assert_eq!(info["items"], lib.len_at(at));
        let p = info["fpr_estimated_now"].as_f64().unwrap();
        assert_eq!(p, lib.expected_fpr_at(at));
        // Inserted within the TTL before `at`: all found.
        let recent: Vec<bool> = (0..keys.len()).filter(|&i| times[i] + ttl >= at).map(|i| cli[i]).collect();
        assert!(recent.len() >= 500 && recent.iter().all(|&b| b), "{} recent", recent.len());
        // Older than the TTL plus a generation: forgotten, found only as never-added keys are.
        let old: Vec<bool> =
            (0..keys.len()).filter(|&i| times[i] + ttl + span < at).map(|i| cli[i]).collect();
        assert!(old.len() >= 3_000, "{}", old.len());
        assert_rate("forgotten", &old, p);
        assert_rate("never added", &cli[keys.len()..], p);
    }

    // Now (this machine's clock, years after the last insertion): everything is forgotten.
    let cli = answers(&file, &keys[4_000..], &[]);
    assert_eq!(count(&cli), 0);
    let (code, _, _) = run(sift().args(["query", "-q"]).arg(&file).arg(&keys[4_999]));
    assert_eq!(code, 1);
    let info = inspect(&file, &[]);
    assert_eq!(info["items"], 0);
    assert_eq!(info["fpr_estimated_now"], 0.0);
    // A time before the clock reads as the clock (nothing forgotten is remembered again).
    assert_eq!(
        answers(&file, &keys, &["--at", &start.to_string()]),
        answers(&file, &keys, &["--at", "clock"])
    );
    assert!(inspect(&file, &["--at", "0"])["note"].as_str().unwrap().contains("before the filter's clock"));
}

/// Library files: a window by count answers as the library's `contains`; a window by time whose
/// clock is not Unix milliseconds is refused with `--at now` (it would silently forget
/// everything) and read with `--at clock` or `--at T`.
#[test]
fn library_windows() {
    let dir = temp_dir("cli-aging");
    let mut count = AgingBloom::new(500, 0.01).unwrap();
    let keys = items("k", 5_000);
    for k in &keys {
        count.insert(k);
    }
    let file = write(dir.path(), "count.sift", &count.to_bytes());
    let never = items("never", 5_000);
    let all: Vec<String> = keys.iter().chain(&never).cloned().collect();
    let cli = answers(&file, &all, &[]);
    assert!(cli == all.iter().map(|k| count.contains(k)).collect::<Vec<_>>());
    assert_eq!(count_of(&cli[4_500..5_000]), 500);
    let info = inspect(&file, &[]);
    assert_eq!(info["window"], 500);
    assert_eq!(info["live_slices"], count.live_slices());

    // A clock in seconds, one insertion a second (within the planned rate, so slices retire on
    // time: read 2000 s later, the first 3000 items are gone).
    let mut timed = TimeLimitedBloom::new(3_600, 4_000, 0.01).unwrap();
    for (i, k) in keys.iter().enumerate() {
        timed.insert_at(k, 1_700_000_000 + i as u64);
    }
    let file = write(dir.path(), "seconds.sift", &timed.to_bytes());
    for args in [vec!["query", "FILE", "x"], vec!["inspect", "FILE"]] {
        let args: Vec<&std::ffi::OsStr> =
            args.iter().map(|&a| if a == "FILE" { file.as_os_str() } else { a.as_ref() }).collect();
        let (code, _, err) = run(sift().args(args));
        assert_eq!(code, 2);
        assert!(err.contains("not Unix milliseconds") && err.contains("--at clock"), "{err}");
    }
    let at = timed.clock();
    let cli = answers(&file, &all, &["--at", "clock"]);
    assert!(cli == all.iter().map(|k| timed.contains_at(k, at)).collect::<Vec<_>>());
    assert_eq!(count_of(&cli[5_000 - 3_600..5_000]), 3_600);
    let cli = answers(&file, &all, &["--at", &(at + 2_000).to_string()]);
    assert!(cli == all.iter().map(|k| timed.contains_at(k, at + 2_000)).collect::<Vec<_>>());
    let p = timed.expected_fpr_at(at + 2_000);
    assert_rate("forgotten 2000 s later", &cli[..3_000], p);
    let (code, _, err) = run(sift().args(["query", "--at", "yesterday"]).arg(&file).arg("x"));
    assert_eq!(code, 2);
    assert!(err.contains("`now`, `clock` or a time"), "{err}");
}

fn count_of(v: &[bool]) -> usize {
    count(v)
}

/// `build --family aging-bloom` keeps the last -n keys of its input (the library's filter, byte
/// for byte); `dedup --state` on a window drops the lines seen recently and passes again those
/// it forgot; `convert` keeps a window a sift file and refuses the foreign formats; `push`
/// refuses it.
#[test]
fn build_dedup_convert_and_push() {
    let dir = temp_dir("cli-aging");
    let keys = items("line", 3_000);
    let input = write(dir.path(), "in.txt", (keys.join("\n") + "\n").as_bytes());
    let out = dir.path().join("w.sift");
    let (code, _, err) =
        run(sift().args(["build", "-q", "--family", "aging-bloom", "-n", "200", "-o"]).arg(&out).arg(&input));
    assert_eq!(code, 0, "{err}");
    let mut lib = AgingBloom::new(200, 0.01).unwrap();
    for k in &keys {
        lib.insert(k);
    }
    assert!(std::fs::read(&out).unwrap() == lib.to_bytes(), "not the library's filter");
    assert_eq!(count_of(&answers(&out, &keys[2_800..], &[])), 200);

    // dedup: 3,000 lines, then the last 100 again (dropped: in the window) and the first 1,000
    // again (passed, but for the model's rate of false drops: forgotten long ago).
    let state = dir.path().join("state.sift");
    std::fs::copy(&out, &state).unwrap();
    let p = inspect(&state, &[])["fpr_planned"].as_f64().unwrap();
    let again: Vec<String> = keys[2_900..].iter().chain(&keys[..1_000]).cloned().collect();
    let (code, passed, err) =
        run(sift().args(["dedup", "-q", "--state"]).arg(&state).write_stdin(again.join("\n") + "\n"));
    assert_eq!(code, 0, "{err}");
    let passed: Vec<&str> = passed.lines().collect();
    assert!(passed.iter().all(|l| keys[..1_000].iter().any(|k| k == l)), "a recent line passed");
    let dropped = 1_000 - passed.len();
    assert!(dropped <= binomial_upper(1_000, p), "{dropped} forgotten lines dropped at a planned {p}");
    assert_eq!(inspect(&state, &[])["kind"], "aging-bloom");

    // convert: to a sift file, the same bytes; to a foreign format, a clear refusal.
    let copy = dir.path().join("copy.sift");
    let (code, _, err) = run(sift().arg("convert").arg(&out).arg("-o").arg(&copy));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&copy).unwrap() == std::fs::read(&out).unwrap());
    for to in ["redisbloom", "guava", "parquet", "rdb"] {
        let target = dir.path().join(format!("x.{to}"));
        let (code, _, err) =
            run(sift().arg("convert").arg(&out).args(["--to", to, "--key", "k", "-o"]).arg(&target));
        assert_eq!(code, 2);
        assert!(err.contains("sliding window") && !target.exists(), "{err}");
    }
    let (code, _, err) = run(sift().arg("push").arg(&out).arg("redis://127.0.0.1:1/w"));
    assert_eq!(code, 2);
    assert!(err.contains("aging-bloom") && err.contains("only blocked-bloom"), "{err}");
}

/// The library's golden window files (`crates/sift/tests/fixtures`): `sift query` gives every
/// answer their `.txt` files record (the time-limited one at its clock: it counts its own
/// time, 1000 to 10 000, so `--at now` refuses it).
#[test]
fn golden_window_files() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sift/tests/fixtures");
    for (name, flags) in [("aging_bloom", vec![]), ("time_limited_bloom", vec!["--at", "clock"])] {
        let file = fixtures.join(format!("{name}.sift"));
        let text = std::fs::read_to_string(fixtures.join(format!("{name}.txt"))).unwrap();
        let (keys, want): (Vec<String>, Vec<bool>) = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (k, a) = l.rsplit_once(' ').unwrap();
                (k.to_string(), a == "1")
            })
            .unzip();
        assert!(keys.len() >= 20 && want.iter().any(|&w| w) && want.iter().any(|&w| !w), "{name}");
        assert_eq!(answers(&file, &keys, &flags), want, "{name}");
    }
    let (code, _, err) = run(sift().arg("query").arg(fixtures.join("time_limited_bloom.sift")).arg("x"));
    assert_eq!(code, 2);
    assert!(err.contains("not Unix milliseconds"), "{err}");
}
