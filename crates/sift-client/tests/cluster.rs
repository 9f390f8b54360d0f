//! The client on a real 3-node Redis Cluster (Debian's redis-server 7.0, `redis-cli --cluster
//! create`), through the `redis` crate's sync and async cluster clients: the sub-bitmaps spread
//! over the nodes while an item touches one key, every mode answers as a local
//! `sift::BlockedBloom` does, push and pull work across nodes, and errors stay errors.

mod support;

use sift::BlockedBloom;
use sift::{Filter as _, Insert as _};
use sift_client::layout::slot;
use sift_client::transfer::{pull, push, PushOptions};
use sift_client::{Error, Filter, Mode, Options, Spec};
use support::*;

async fn async_client(c: &Cluster) -> redis::cluster_async::ClusterConnection {
    redis::cluster::ClusterClient::new(c.urls()).unwrap().get_async_connection().await.expect("async cluster")
}

#[test]
fn cluster_sync_and_async() {
    let cluster = Cluster::start(3);
    let mut conn = cluster.client();
    // 64 sub-bitmaps of 2 KiB.
    let spec = Spec::with_shape(64 * 32, 7, 20_000, 0.01).key_bytes(64 * 32);
    let f = Filter::create(&mut conn, "users", &spec, Options::new()).unwrap();
    let rec = f.record();
    let keys: Vec<String> = (0..64).map(|i| format!("{{users:{}:0:{i}}}", rec.instance)).collect();
    let mut per_node = [0usize; 3];
    for k in &keys {
        per_node[cluster.owner(slot(k.as_bytes()))] += 1;
    }
    // 64 keys over 3 nodes of a third of the slots each: a node with none has probability
    // 3 · (2/3)^64 < 1e-11.
    assert!(per_node.iter().all(|&n| n > 0), "sub-bitmaps per node: {per_node:?}");
    // The pointer and the records share a slot.
    assert_eq!(slot(b"users"), slot(format!("{{users}}:{}:0", rec.instance).as_bytes()));

    // One item touches exactly one key.
    let counts = |conn: &mut redis::cluster::ClusterConnection| -> Vec<i64> {
        keys.iter().map(|k| redis::cmd("BITCOUNT").arg(k).query(conn).unwrap()).collect()
    };
    let before = counts(&mut conn);
    assert!(f.add(&mut conn, "one item").unwrap());
    let after = counts(&mut conn);
    let changed: Vec<usize> = (0..64).filter(|&i| before[i] != after[i]).collect();
    assert_eq!(changed.len(), 1);
    assert_eq!(after[changed[0]] - before[changed[0]], 7, "k = 7 bits, all new in an empty filter");

    // Sync, both modes, against the same filter built locally.
    let mut local = BlockedBloom::with_params(64 * 32, 7, sift::Hasher::default()).unwrap();
    local.insert("one item");
    let xs = items("c", 20_000);
    let lua = Filter::open(&mut conn, "users", Options::new().mode(Mode::Lua)).unwrap();
    let a = f.add_many(&mut conn, &xs[..10_000]).unwrap();
    let b = lua.add_many(&mut conn, &xs[10_000..]).unwrap();
    let want: Vec<bool> = xs.iter().map(|x| local.insert(x)).collect();
    assert_eq!([a, b].concat(), want);
    let probes = items("probe", 20_000);
    let here: Vec<bool> = probes.iter().map(|x| local.contains(x)).collect();
    assert_eq!(f.contains_many(&mut conn, &probes).unwrap(), here);
    assert_eq!(lua.contains_many(&mut conn, &probes).unwrap(), here);

    // Async cluster client.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ac = async_client(&cluster).await;
        for mode in [Mode::Plain, Mode::Lua] {
            let g = Filter::open_async(&ac, "users", Options::new().mode(mode)).await.unwrap();
            assert_eq!(g.contains_many_async(&ac, &probes).await.unwrap(), here, "{mode:?}");
            assert!(g.contains_many_async(&ac, &xs).await.unwrap().into_iter().all(|x| x));
            let more = items(&format!("async-{mode:?}"), 3000);
            let news = g.add_many_async(&ac, &more).await.unwrap();
            let want: Vec<bool> = more.iter().map(|x| local.insert(x)).collect();
            assert_eq!(news, want, "{mode:?}");
        }
        let fill =
            Filter::open_async(&ac, "users", Options::new()).await.unwrap().fill_async(&ac).await.unwrap();
        let ones: u64 = local.words().map(|w| w.count_ones() as u64).sum();
        assert_eq!(fill.generations[0].bits_set, ones);
    });

    // Pull across the nodes: the local filter's bytes.
    let pulled = pull(&mut conn, "users", &Options::new()).unwrap();
    assert!(pulled.filter.words().eq(local.words()));
    // Push a new filter, and replace it.
    let mut other = BlockedBloom::new(5000, 0.001).unwrap();
    for x in &xs[..5000] {
        other.insert(x);
    }
    let opts = PushOptions { key_bytes: 1024, ..PushOptions::default() };
    let r = push(&mut conn, "pushed", &other, &opts).unwrap();
    assert!(r.keys > 3);
    let p = Filter::open(&mut conn, "pushed", Options::new()).unwrap();
    assert!(p.contains_many(&mut conn, &xs[..5000]).unwrap().into_iter().all(|x| x));
    assert!(matches!(push(&mut conn, "pushed", &other, &opts), Err(Error::Exists { .. })));
    let empty = BlockedBloom::new(5000, 0.001).unwrap();
    push(&mut conn, "pushed", &empty, &PushOptions { replace: true, ..opts }).unwrap();
    assert!(!p.contains(&mut conn, &xs[0]).unwrap(), "the handle follows the replacement");
}

/// Errors on a cluster: a foreign value at a data key fails the call with an error, on the
/// sync client (one error for the whole pipeline) and the async one (per key).
#[test]
fn cluster_errors() {
    let cluster = Cluster::start(3);
    let mut conn = cluster.client();
    let f = Filter::create(&mut conn, "e", &Spec::new(10_000, 0.01).key_bytes(1024), Options::new()).unwrap();
    let rec = f.record();
    let victim = format!("{{e:{}:0:2}}", rec.instance);
    let _: () = redis::cmd("DEL").arg(&victim).query(&mut conn).unwrap();
    let _: () = redis::cmd("LPUSH").arg(&victim).arg("x").query(&mut conn).unwrap();
    let xs = items("e", 3000);
    match f.add_many(&mut conn, &xs) {
        Err(Error::WrongType { .. }) | Err(Error::Partial { .. }) => {}
        other => panic!("{other:?}"),
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ac = async_client(&cluster).await;
        match f.contains_many_async(&ac, &xs).await {
            Err(Error::Partial { answers, cause }) => {
                assert!(matches!(*cause, Error::WrongType { ref key } if *key == victim), "{cause}");
                assert!(answers.iter().filter(|a| a.is_some()).count() > 2000);
            }
            other => panic!("{other:?}"),
        }
    });
}
