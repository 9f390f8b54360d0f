//! Another language on the same live filters: `scripts/redis_bitmap_bloom.py` (written from
//! docs/REDIS_LAYOUT.md alone, with redis-py and xxhash) against the Rust crate, on a real
//! redis-server. Every answer must be the same, bit for bit: filters made by Rust and read and
//! written by Python, made by Python and used by Rust (k > 8 too), and windowed.

mod support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use sift::Insert as _;
use sift_client::transfer::pull;
use sift_client::{Filter, Mode, Options, Spec};
use support::*;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis_bitmap_bloom.py")
}

/// Fails, saying what to install, unless python3 with redis-py and xxhash runs.
fn require_python() {
    let ok = Command::new("python3")
        .args(["-c", "import redis, xxhash"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "python3 with redis-py and xxhash is needed (scripts/test.sh installs them: pip install redis xxhash)");
}

/// Runs the script: `op` on filter `name` with `items` on stdin; the 0/1 answers.
fn py(server: &Server, name: &str, op: &str, items: &[String], extra: &[&str]) -> Vec<bool> {
    let mut child = Command::new("python3")
        .arg(script())
        .args(["--url", &server.url(), name, op])
        .args(if items.is_empty() { vec![] } else { vec!["-"] })
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let mut input = Vec::new();
    for i in items {
        input.extend_from_slice(i.as_bytes());
        input.push(b'\n');
    }
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the script failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| l == "1").collect()
}

#[test]
fn python_and_rust_share_filters() {
    require_python();
    let server = Server::redis(&[]);
    let mut conn = server.conn();

    // Made by Rust (both modes write), read and written by Python.
    let f = Filter::create(&mut conn, "shared", &Spec::new(20_000, 0.01).key_bytes(64 * 64), Options::new())
        .unwrap();
    let lua = Filter::open(&mut conn, "shared", Options::new().mode(Mode::Lua)).unwrap();
    let a = items("a", 10_000);
    f.add_many(&mut conn, &a[..5000]).unwrap();
    lua.add_many(&mut conn, &a[5000..]).unwrap();
    let probes: Vec<String> = a.iter().cloned().chain(items("never", 10_000)).collect();
    let rust = f.contains_many(&mut conn, &probes).unwrap();
    assert_eq!(py(&server, "shared", "contains", &probes, &[]), rust);
    // Python adds: its "new" answers are those of the same filter held locally.
    let mut local = pull(&mut conn, "shared", &Options::new()).unwrap().filter;
    let b: Vec<String> = items("b", 5000).into_iter().chain(a[..100].iter().cloned()).collect();
    let want: Vec<bool> = b.iter().map(|x| local.insert(x)).collect();
    assert_eq!(py(&server, "shared", "add", &b, &[]), want);
    assert!(f.contains_many(&mut conn, &b).unwrap().into_iter().all(|x| x));
    assert!(pull(&mut conn, "shared", &Options::new()).unwrap().filter.words().eq(local.words()));

    // Made by Python (k = 9: a second round of bits), used by Rust.
    py(
        &server,
        "made-by-python",
        "create",
        &[],
        &["--blocks", "3000", "--k", "9", "--capacity", "15000", "--key-bytes", "16384"],
    );
    let g = Filter::open(&mut conn, "made-by-python", Options::new()).unwrap();
    assert_eq!((g.record().gens[0].blocks, g.record().gens[0].k), (3000, 9));
    let c = items("c", 15_000);
    let mut local = sift::BlockedBloom::with_params(3000, 9, sift::Hasher::default()).unwrap();
    let want: Vec<bool> = c.iter().map(|x| local.insert(x)).collect();
    assert_eq!(g.add_many(&mut conn, &c).unwrap(), want);
    let probes: Vec<String> = c.iter().cloned().chain(items("d", 15_000)).collect();
    let here: Vec<bool> = probes.iter().map(|x| sift::Filter::contains(&local, x)).collect();
    assert_eq!(py(&server, "made-by-python", "contains", &probes, &[]), here);
    assert_eq!(g.contains_many(&mut conn, &probes).unwrap(), here);

    // A windowed filter: both pick the generation of the current hour.
    let w = Filter::create(
        &mut conn,
        "recent",
        &Spec::new(10_000, 0.01).window(Duration::from_secs(3600), 24).key_bytes(4096),
        Options::new(),
    )
    .unwrap();
    let e = items("e", 3000);
    w.add_many(&mut conn, &e).unwrap();
    let probes: Vec<String> = e.iter().cloned().chain(items("f", 3000)).collect();
    assert_eq!(py(&server, "recent", "contains", &probes, &[]), w.contains_many(&mut conn, &probes).unwrap());
    let more = items("g", 2000);
    let news = py(&server, "recent", "add", &more, &[]);
    assert!(news.iter().filter(|x| !**x).count() <= binomial_upper(2000, 0.01));
    assert!(w.contains_many(&mut conn, &more).unwrap().into_iter().all(|x| x));
}
