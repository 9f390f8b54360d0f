//! Several processes adding the same items to one filter at once, on a real redis-server, a
//! real 3-node Redis Cluster and the sift-server binary:
//!
//! * no false negative, ever: each writer checks every item right after its add returned, and
//!   the parent checks all of them at the end;
//! * "new" at most once per distinct item across all writers (the idempotency promise);
//! * "already seen" on the first add of an item (no writer told "new") only at the
//!   false-positive rate: a binomial bound at the filter's target FPR, which bounds the FPR at
//!   every fill up to capacity.
//!
//! The writers are this test binary run again (`child_writer`, driven by environment
//! variables), so they are separate processes with their own connections; they mix plain and
//! Lua modes, sync and async clients, batch sizes, and single adds.

mod support;

use std::path::PathBuf;
use std::process::Command;

use sift_client::{Filter, Mode, Options, Spec};
use support::*;

const ITEMS: usize = 20_000;
const FPR: f64 = 0.01;
const WRITERS: usize = 4;

/// Where a writer connects.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    Single,
    Cluster,
}

fn shuffled(seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..ITEMS).collect();
    let mut s = seed;
    for i in (1..v.len()).rev() {
        let j = (splitmix(&mut s) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

fn item(i: usize) -> String {
    format!("shared-item-{i}")
}

/// One writer: adds every item in its own order, checks each right after, and writes one line
/// per item: `index new`.
fn writer(urls: Vec<String>, target: Target, name: String, id: usize, out: PathBuf) {
    let mode = if id % 2 == 0 { Mode::Plain } else { Mode::Lua };
    let batch = [1, 7, 100, 1000][id % 4];
    let opts = Options::new().mode(mode).batch_items(batch.max(1));
    let order = shuffled(id as u64 + 1);
    let mut lines = String::new();
    let mut record = |idx: &[usize], news: &[bool], found: &[bool]| {
        assert!(found.iter().all(|x| *x), "writer {id}: an item added is not found (false negative)");
        for (i, n) in idx.iter().zip(news) {
            lines.push_str(&format!("{i} {}\n", *n as u8));
        }
    };
    let chunks: Vec<&[usize]> = order.chunks(batch).collect();
    let async_client = id >= 2;
    if !async_client {
        enum Conn {
            Single(redis::Connection),
            Cluster(Box<redis::cluster::ClusterConnection>),
        }
        let mut conn = match target {
            Target::Single => {
                Conn::Single(redis::Client::open(urls[0].as_str()).unwrap().get_connection().unwrap())
            }
            Target::Cluster => Conn::Cluster(Box::new(
                redis::cluster::ClusterClient::new(urls.clone()).unwrap().get_connection().unwrap(),
            )),
        };
        let f = match &mut conn {
            Conn::Single(c) => Filter::open(c, &name, opts).unwrap(),
            Conn::Cluster(c) => Filter::open(c.as_mut(), &name, opts).unwrap(),
        };
        for idx in chunks {
            let xs: Vec<String> = idx.iter().map(|&i| item(i)).collect();
            let (news, found) = match &mut conn {
                Conn::Single(c) => (f.add_many(c, &xs).unwrap(), f.contains_many(c, &xs).unwrap()),
                Conn::Cluster(c) => {
                    (f.add_many(c.as_mut(), &xs).unwrap(), f.contains_many(c.as_mut(), &xs).unwrap())
                }
            };
            record(idx, &news, &found);
        }
    } else {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            macro_rules! run {
                ($conn:expr) => {{
                    let conn = $conn;
                    let f = Filter::open_async(&conn, &name, opts.clone()).await.unwrap();
                    for idx in &chunks {
                        let xs: Vec<String> = idx.iter().map(|&i| item(i)).collect();
                        let news = if xs.len() == 1 {
                            vec![f.add_async(&conn, &xs[0]).await.unwrap()]
                        } else {
                            f.add_many_async(&conn, &xs).await.unwrap()
                        };
                        let found = f.contains_many_async(&conn, &xs).await.unwrap();
                        record(idx, &news, &found);
                    }
                }};
            }
            match target {
                Target::Single => {
                    run!(redis::Client::open(urls[0].as_str())
                        .unwrap()
                        .get_multiplexed_async_connection()
                        .await
                        .unwrap())
                }
                Target::Cluster => {
                    run!(redis::cluster::ClusterClient::new(urls.clone())
                        .unwrap()
                        .get_async_connection()
                        .await
                        .unwrap())
                }
            }
        });
    }
    std::fs::write(out, lines).unwrap();
}

/// The writer process's entry point: does nothing unless run by [`run_writers`].
#[test]
fn child_writer() {
    let Ok(spec) = std::env::var("SIFT_CLIENT_TEST_WRITER") else { return };
    let parts: Vec<&str> = spec.split('|').collect();
    let target = if parts[0] == "cluster" { Target::Cluster } else { Target::Single };
    let urls = parts[1].split(',').map(String::from).collect();
    writer(urls, target, parts[2].to_string(), parts[3].parse().unwrap(), PathBuf::from(parts[4]));
}

/// Starts the writers, waits for them, and checks what they answered.
fn run_writers(urls: &[String], target: Target, name: &str, check: &mut dyn FnMut(&[String]) -> Vec<bool>) {
    let dir = temp_dir("writers");
    let exe = std::env::current_exe().unwrap();
    let kind = if target == Target::Cluster { "cluster" } else { "single" };
    let children: Vec<_> = (0..WRITERS)
        .map(|id| {
            let out = dir.join(format!("w{id}"));
            let spec = format!("{kind}|{}|{name}|{id}|{}", urls.join(","), out.display());
            let child = Command::new(&exe)
                .args(["--exact", "child_writer", "--nocapture", "--test-threads", "1"])
                .env("SIFT_CLIENT_TEST_WRITER", spec)
                .spawn()
                .expect("spawn a writer");
            (child, out)
        })
        .collect();
    let mut news = vec![0u32; ITEMS];
    for (mut child, out) in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a writer failed: {status}");
        let text = std::fs::read_to_string(&out).unwrap();
        let mut seen = vec![false; ITEMS];
        for line in text.lines() {
            let (i, n) = line.split_once(' ').unwrap();
            let i: usize = i.parse().unwrap();
            assert!(!seen[i], "an item answered twice by one writer");
            seen[i] = true;
            news[i] += (n == "1") as u32;
        }
        assert!(seen.iter().all(|x| *x), "a writer skipped items");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let twice = news.iter().filter(|&&n| n > 1).count();
    assert_eq!(twice, 0, "{twice} items were 'new' for more than one writer");
    let never = news.iter().filter(|&&n| n == 0).count();
    assert!(never <= binomial_upper(ITEMS, FPR), "{never} items were 'already seen' on their first add");
    let all: Vec<String> = (0..ITEMS).map(item).collect();
    assert!(check(&all).into_iter().all(|x| x), "false negative after all writers");
    eprintln!("{target:?} {name}: {never} of {ITEMS} items never 'new' (false positives at first add)");
}

fn spec() -> Spec {
    // Small keys: the items spread over many sub-bitmaps (and, in the cluster, nodes).
    Spec::new(ITEMS as u64, FPR).key_bytes(64 * 32)
}

#[test]
fn writers_on_redis() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    let f = Filter::create(&mut conn, "shared", &spec(), Options::new()).unwrap();
    run_writers(&[server.url()], Target::Single, "shared", &mut |xs| f.contains_many(&mut conn, xs).unwrap());
}

#[test]
fn writers_on_a_cluster() {
    let cluster = Cluster::start(3);
    let mut conn = cluster.client();
    let f = Filter::create(&mut conn, "shared", &spec(), Options::new()).unwrap();
    run_writers(&cluster.urls(), Target::Cluster, "shared", &mut |xs| {
        f.contains_many(&mut conn, xs).unwrap()
    });
}

#[test]
fn writers_on_sift_server() {
    let server = Server::sift();
    let mut conn = server.conn();
    let f = Filter::create(&mut conn, "shared", &spec(), Options::new()).unwrap();
    run_writers(&[server.url()], Target::Single, "shared", &mut |xs| f.contains_many(&mut conn, xs).unwrap());
}
