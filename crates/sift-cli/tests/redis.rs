//! `sift push` and `sift pull` against a real redis-server (and a 3-node Redis Cluster): a filter
//! built offline goes live under a name, comes back byte for byte, replaces a live filter, and
//! bad input fails with a clear message and exit status 2, never a panic.

#[path = "../../sift-client/tests/support/mod.rs"]
mod support;

use std::path::Path;

use sift::prelude::*;
use sift::BlockedBloom;
use support::*;

mod common;
use common::{run, sift};

fn build(dir: &Path, name: &str, keys: &[String]) -> std::path::PathBuf {
    let input = dir.join(format!("{name}.txt"));
    std::fs::write(&input, keys.join("\n")).unwrap();
    let out = dir.join(format!("{name}.sift"));
    let (code, _, err) = run(sift().args(["build", "-q", "-p", "0.001", "-o"]).arg(&out).arg(&input));
    assert_eq!(code, 0, "{err}");
    out
}

#[test]
fn push_pull_query_replace() {
    let server = Server::redis(&[]);
    let dir = temp_dir("cli");
    let keys = items("user", 50_000);
    let file = build(&dir, "users", &keys);
    let url = format!("redis://{}/users", server.addr);
    let (code, _, err) = run(sift().arg("push").arg(&file).arg(&url));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("pushed") && err.contains("generation 0"), "{err}");
    // The client library sees it.
    let mut conn = server.conn();
    let f = sift_client::Filter::open(&mut conn, "users", sift_client::Options::new()).unwrap();
    assert!(f.contains_many(&mut conn, &keys).unwrap().into_iter().all(|x| x));
    f.add(&mut conn, "added-live").unwrap();
    // Back into a file: the built filter plus the item added live, which `sift query` finds.
    let pulled = dir.join("pulled.sift");
    let (code, _, err) = run(sift().arg("pull").arg(&url).arg("-o").arg(&pulled));
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = run(sift().arg("query").arg(&pulled).args(["user-7", "added-live"]));
    assert_eq!(code, 0, "{out}");
    let built = BlockedBloom::from_bytes(&std::fs::read(&file).unwrap()).unwrap();
    let mut want = built.clone();
    want.insert("added-live");
    let got = BlockedBloom::from_bytes(&std::fs::read(&pulled).unwrap()).unwrap();
    assert!(got.words().eq(want.words()));
    assert_eq!((got.num_hashes(), got.hasher()), (built.num_hashes(), built.hasher()));
    // `-o -`: the same file on standard output.
    let out = sift().args(["pull", "-q"]).arg(&url).args(["-o", "-"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(out.stdout, std::fs::read(&pulled).unwrap());
    // Pushing again: refused without --replace; with it, the live handle follows.
    let (code, _, err) = run(sift().arg("push").arg(&file).arg(&url));
    assert_eq!(code, 2);
    assert!(err.contains("already exists"), "{err}");
    let other = build(&dir, "other", &items("other", 1000));
    let (code, _, err) = run(sift().args(["push", "--replace", "--grace", "1"]).arg(&other).arg(&url));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("replaced"), "{err}");
    assert!(f.contains(&mut conn, "other-5").unwrap());
    assert!(!f.contains(&mut conn, "added-live").unwrap());
    // A database number in the URL.
    let url3 = format!("redis://{}/3/users", server.addr);
    let (code, _, err) = run(sift().arg("push").arg(&other).arg(&url3));
    assert_eq!(code, 0, "{err}");
    let n: i64 = redis::cmd("EXISTS").arg("users").query(&mut server.conn()).unwrap();
    assert_eq!(n, 1);
    let mut db3 =
        redis::Client::open(format!("redis://{}/3", server.addr)).unwrap().get_connection().unwrap();
    let g = sift_client::Filter::open(&mut db3, "users", sift_client::Options::new()).unwrap();
    assert!(g.contains(&mut db3, "other-5").unwrap());
}

#[test]
fn push_and_pull_on_a_cluster() {
    let cluster = Cluster::start(3);
    let dir = temp_dir("cli-cluster");
    let keys = items("c", 200_000);
    let file = build(&dir, "big", &keys);
    let url = format!("redis://{}/big", cluster.nodes[1].addr);
    let (code, _, err) = run(sift().args(["push", "--cluster", "--key-bytes", "65536"]).arg(&file).arg(&url));
    assert_eq!(code, 0, "{err}");
    let pulled = dir.join("back.sift");
    let url0 = format!("redis://{}/big", cluster.nodes[0].addr);
    let (code, _, err) = run(sift().args(["pull", "--cluster", "-o"]).arg(&pulled).arg(&url0));
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&pulled).unwrap().len(), std::fs::read(&file).unwrap().len());
    let a = BlockedBloom::from_bytes(&std::fs::read(&file).unwrap()).unwrap();
    let b = BlockedBloom::from_bytes(&std::fs::read(&pulled).unwrap()).unwrap();
    assert!(a.words().eq(b.words()));
}

#[test]
fn bad_input_is_a_clear_error() {
    let server = Server::redis(&[]);
    let dir = temp_dir("cli-bad");
    let file = build(&dir, "f", &items("x", 100));
    let url = format!("redis://{}/f", server.addr);
    // Not a blocked Bloom filter.
    let scalable = dir.join("s.sift");
    let input = dir.join("f.txt");
    let (code, _, _) =
        run(sift().args(["build", "-q", "--family", "cuckoo", "-n", "100", "-o"]).arg(&scalable).arg(&input));
    assert_eq!(code, 0);
    for (args, want) in [
        (
            vec!["push".into(), scalable.display().to_string(), url.clone()],
            "only blocked-bloom filters can be pushed",
        ),
        (vec!["push".into(), dir.join("missing.sift").display().to_string(), url.clone()], "cannot read"),
        (vec!["push".into(), input.display().to_string(), url.clone()], "is not a sift file"),
        (vec!["push".into(), file.display().to_string(), "http://x/y".into()], "not redis://host:port"),
        (
            vec!["push".into(), file.display().to_string(), format!("redis://{}/a{{b", server.addr)],
            "hash tag",
        ),
        (vec!["push".into(), file.display().to_string(), "redis://127.0.0.1:1/f".into()], "cannot connect"),
        (
            vec![
                "pull".into(),
                format!("redis://{}/nothing", server.addr),
                "-o".into(),
                dir.join("o").display().to_string(),
            ],
            "no filter named",
        ),
    ] {
        let (code, _, err) = run(sift().args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert!(!dir.join("o").exists(), "no file written by a failed pull");
    // The output path is checked before anything is downloaded.
    let (code, _, err) = run(sift().arg("pull").arg(&url).arg("-o").arg(&dir));
    assert_eq!(code, 2);
    assert!(err.contains("is a directory"), "{err}");
    let (code, _, err) = run(sift().arg("pull").arg(&url).arg("-o").arg(dir.join("missing/x.sift")));
    assert_eq!(code, 2);
    assert!(err.contains("no directory"), "{err}");
    // A key of another kind under the name.
    let _: () = redis::cmd("SET").arg("taken").arg("hello").query(&mut server.conn()).unwrap();
    let (code, _, err) = run(sift().arg("push").arg(&file).arg(format!("redis://{}/taken", server.addr)));
    assert_eq!(code, 2);
    assert!(err.contains("not a sift filter pointer"), "{err}");
}
