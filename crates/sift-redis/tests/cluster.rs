//! sift-redis on Redis Cluster and under replication, with real `redis-server` processes on
//! 127.0.0.1 (Debian's 7.0.15 in CI) and `libsift_redis.so` loaded on every node:
//!
//! - a 3-node cluster spreads BF/CF keys over its nodes, and clients follow MOVED
//!   (`redis-cli -c` and the `redis` crate's cluster client);
//! - a slot holding filters migrates to another node (`MIGRATE` = DUMP + RESTORE, so the
//!   module's RDB save and load) and every filter answers exactly as before;
//! - a replica (full sync by RDB, then the command stream) answers exactly like its primary.
//!
//! A missing `redis-server` fails the tests with what to install; they never skip.

mod cluster_support;
mod support;

use cluster_support::*;
use redis::Value;

/// Items that were added to a filter.
fn members(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-member-{i}")).collect()
}

/// A fixed set of items never added anywhere: their answers (mostly 0, a few false positives)
/// must match too.
fn non_members() -> Vec<String> {
    (0..2000).map(|i| format!("never-added-{i}")).collect()
}

/// Everything a client can observe of one filter key, labelled for readable failures:
/// TYPE, INFO, CARD/COUNT, the SCANDUMP chunks, and MEXISTS over members and non-members.
fn observe<C: redis::ConnectionLike>(
    c: &mut C,
    key: &str,
    items: &[String],
) -> Vec<(String, Result<Value, String>)> {
    let mut out = Vec::new();
    let ty = call_str(c, &["TYPE", key]);
    let bloom = match &ty {
        Ok(Value::SimpleString(s)) if s == "MBbloom--" => true,
        Ok(Value::SimpleString(s)) if s == "MBbloomCF" => false,
        other => panic!("TYPE {key}: {other:?}"),
    };
    out.push((format!("TYPE {key}"), ty));
    let (p, info) = if bloom { ("BF", "BF.INFO") } else { ("CF", "CF.INFO") };
    out.push((format!("{info} {key}"), call_str(c, &[info, key])));
    if bloom {
        out.push((format!("BF.CARD {key}"), call_str(c, &["BF.CARD", key])));
    }
    let dump = scandump(c, &format!("{p}.SCANDUMP"), key);
    assert!(!dump.is_empty(), "{p}.SCANDUMP {key}: no chunks");
    for (i, (iter, data)) in dump.into_iter().enumerate() {
        out.push((
            format!("{p}.SCANDUMP {key} chunk {i}"),
            Ok(Value::Array(vec![Value::Int(iter), Value::BulkString(data)])),
        ));
    }
    let all: Vec<String> = items.iter().cloned().chain(non_members()).collect();
    for (i, batch) in all.chunks(500).enumerate() {
        let mut args: Vec<&str> = vec![if bloom { "BF.MEXISTS" } else { "CF.MEXISTS" }, key];
        args.extend(batch.iter().map(String::as_str));
        out.push((format!("{p}.MEXISTS {key} batch {i}"), call_str(c, &args)));
    }
    if !bloom {
        for item in items.iter().take(20) {
            out.push((format!("CF.COUNT {key} {item}"), call_str(c, &["CF.COUNT", key, item])));
        }
    }
    out
}

/// Asserts two observations are equal entry by entry (naming the first difference).
fn assert_same(what: &str, a: &[(String, Result<Value, String>)], b: &[(String, Result<Value, String>)]) {
    assert_eq!(a.len(), b.len(), "{what}: different number of observations");
    for ((la, va), (lb, vb)) in a.iter().zip(b) {
        assert_eq!(la, lb);
        assert!(va == vb, "{what}: {la} differs:\n before/primary: {va:?}\n after/replica: {vb:?}");
    }
}

/// Adds `items` with `cmd` (BF.MADD, or one CF.ADD each) and checks every reply says "added".
fn add_all<C: redis::ConnectionLike>(c: &mut C, cmd: &str, key: &str, items: &[String]) {
    if cmd == "BF.MADD" {
        for batch in items.chunks(200) {
            let mut args: Vec<&str> = vec!["BF.MADD", key];
            args.extend(batch.iter().map(String::as_str));
            let r = call_str(c, &args).unwrap_or_else(|e| panic!("BF.MADD {key}: {e}"));
            let Value::Array(v) = r else { panic!("BF.MADD reply {r:?}") };
            assert_eq!(v.len(), batch.len());
        }
    } else {
        for item in items {
            let r = call_str(c, &[cmd, key, item]);
            assert!(matches!(r, Ok(Value::Int(_))), "{cmd} {key} {item}: {r:?}");
        }
    }
}

fn int(v: Result<Value, String>) -> i64 {
    match v {
        Ok(Value::Int(i)) => i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

#[test]
fn keys_spread_over_the_nodes_and_clients_follow_moved() {
    let cluster = Cluster::start(3);
    let map = cluster.slots_seen_by(&cluster.nodes[0]);
    let owner = |slot: u16| {
        let port = map.iter().find(|r| r.first <= slot && slot <= r.last).unwrap().port;
        cluster.nodes.iter().position(|n| n.port() == port).unwrap()
    };

    // The crate's cluster client routes every BF/CF command by its key.
    let mut cc = cluster.client();
    let n = 300;
    for i in 0..n {
        let item = format!("item-{i}");
        assert_eq!(call_str(&mut cc, &["BF.ADD", &format!("spread:bf:{i}"), &item]), Ok(Value::Int(1)));
        assert_eq!(call_str(&mut cc, &["CF.ADD", &format!("spread:cf:{i}"), &item]), Ok(Value::Int(1)));
    }

    // Each node holds a share of the keys, only keys of its own slots, of the module's types.
    let mut total = 0;
    for (idx, node) in cluster.nodes.iter().enumerate() {
        let mut c = node.conn();
        let keys: Vec<String> = redis::cmd("KEYS").arg("spread:*").query(&mut c).unwrap();
        // 600 keys over three equal slot ranges: each gets ~200; 100 is far below any chance.
        assert!(keys.len() >= 100, "node {idx} holds only {} of {} keys", keys.len(), 2 * n);
        for k in &keys {
            assert_eq!(owner(cluster.keyslot(k)), idx, "{k} is on node {idx}, not its slot's owner");
            let want = if k.starts_with("spread:bf:") { "MBbloom--" } else { "MBbloomCF" };
            assert_eq!(call_str(&mut c, &["TYPE", k]), Ok(Value::SimpleString(want.into())));
        }
        total += keys.len();
    }
    assert_eq!(total, 2 * n);

    // Every key answers through the cluster client.
    for i in 0..n {
        let item = format!("item-{i}");
        assert_eq!(call_str(&mut cc, &["BF.EXISTS", &format!("spread:bf:{i}"), &item]), Ok(Value::Int(1)));
        assert_eq!(call_str(&mut cc, &["CF.EXISTS", &format!("spread:cf:{i}"), &item]), Ok(Value::Int(1)));
        assert_eq!(call_str(&mut cc, &["BF.CARD", &format!("spread:bf:{i}")]), Ok(Value::Int(1)));
    }

    // A key on another node: a plain connection to node 0 gets MOVED to its owner...
    let (key, i) =
        (0..n).map(|i| (format!("spread:bf:{i}"), i)).find(|(k, _)| owner(cluster.keyslot(k)) != 0).unwrap();
    let item = format!("item-{i}");
    let slot = cluster.keyslot(&key);
    let home = &cluster.nodes[owner(slot)];
    let moved = call_str(&mut cluster.nodes[0].conn(), &["BF.EXISTS", &key, &item]);
    let err = moved.expect_err("a key of another node's slot must not answer on node 0");
    assert!(
        err.contains("MOVED") && err.contains(&slot.to_string()) && err.contains(&home.host_port()),
        "{err}"
    );
    // ... and so does redis-cli without -c,
    let p0 = cluster.nodes[0].port().to_string();
    let (_, out) = redis_cli(&["-p", &p0, "BF.EXISTS", &key, &item]);
    assert!(out.contains("MOVED"), "redis-cli without -c: {out:?}");
    // while redis-cli -c follows it, for reads and writes of both types.
    let cli_c = |args: &[&str]| {
        let mut a = vec!["-c", "-p", &p0];
        a.extend_from_slice(args);
        let (ok, out) = redis_cli(&a);
        assert!(ok, "redis-cli -c {args:?}: {out}");
        out.trim().to_string()
    };
    assert_eq!(cli_c(&["BF.EXISTS", &key, &item]), "1");
    assert_eq!(cli_c(&["BF.EXISTS", &key, "not-there"]), "0");
    let mut remote = 0;
    for i in 0..40 {
        let (bf, cf) = (format!("cli:bf:{i}"), format!("cli:cf:{i}"));
        assert_eq!(cli_c(&["BF.ADD", &bf, "via-cli"]), "1");
        assert_eq!(cli_c(&["CF.ADD", &cf, "via-cli"]), "1");
        assert_eq!(cli_c(&["BF.MEXISTS", &bf, "via-cli", "other"]), "1\n0");
        assert_eq!(cli_c(&["CF.EXISTS", &cf, "via-cli"]), "1");
        // The write landed on the owner of the key's slot, checked there directly.
        for k in [&bf, &cf] {
            let o = owner(cluster.keyslot(k));
            remote += usize::from(o != 0);
            let cmd = if k.starts_with("cli:bf") { "BF.EXISTS" } else { "CF.EXISTS" };
            assert_eq!(call_str(&mut cluster.nodes[o].conn(), &[cmd, k, "via-cli"]), Ok(Value::Int(1)));
        }
    }
    assert!(remote > 0, "no redis-cli -c write had to follow a redirect");
    // The cluster client sees redis-cli's writes too.
    assert_eq!(call_str(&mut cc, &["BF.EXISTS", "cli:bf:7", "via-cli"]), Ok(Value::Int(1)));
}

#[test]
fn a_migrated_slot_keeps_its_filters_identical() {
    let cluster = Cluster::start(3);
    // Connected now: its slot map goes stale when the slot moves, so it must follow MOVED.
    let mut cc = cluster.client();
    let slot = cluster.keyslot("{mig}");
    let src = cluster.owner(slot);
    let dst = (src + 1) % 3;

    // Filters of every shape in one slot (one hash tag): fixed-size, scaled over several
    // sub-filters, non-scaling, auto-created, cuckoo with deletions, cuckoo grown.
    let mut keys: Vec<(&str, Vec<String>)> = Vec::new();
    let c = &mut cc;
    assert_eq!(call_str(c, &["BF.RESERVE", "{mig}bf", "0.001", "2000"]), Ok(Value::Okay));
    keys.push(("{mig}bf", members("bf", 1000)));
    assert_eq!(
        call_str(c, &["BF.RESERVE", "{mig}bf-scaled", "0.01", "100", "EXPANSION", "2"]),
        Ok(Value::Okay)
    );
    keys.push(("{mig}bf-scaled", members("scaled", 1500)));
    assert_eq!(call_str(c, &["BF.RESERVE", "{mig}bf-fixed", "0.05", "1000", "NONSCALING"]), Ok(Value::Okay));
    keys.push(("{mig}bf-fixed", members("fixed", 600)));
    keys.push(("{mig}bf-auto", members("auto", 300)));
    assert_eq!(call_str(c, &["CF.RESERVE", "{mig}cf", "2000", "BUCKETSIZE", "4"]), Ok(Value::Okay));
    keys.push(("{mig}cf", members("cf", 1200)));
    assert_eq!(call_str(c, &["CF.RESERVE", "{mig}cf-grown", "64", "EXPANSION", "2"]), Ok(Value::Okay));
    keys.push(("{mig}cf-grown", members("grown", 700)));
    for (key, items) in &keys {
        let cmd = if key.contains("cf") { "CF.ADD" } else { "BF.MADD" };
        add_all(c, cmd, key, items);
    }
    // Deletions leave the cuckoo filter's buckets in a state only a faithful copy reproduces.
    for item in keys[4].1.iter().step_by(3) {
        assert_eq!(call_str(c, &["CF.DEL", "{mig}cf", item]), Ok(Value::Int(1)));
    }
    let info = format!("{:?}", call_str(c, &["BF.INFO", "{mig}bf-scaled", "FILTERS"]));
    assert!(!info.contains("Int(1)"), "{{mig}}bf-scaled should have grown past one sub-filter: {info}");

    let mut src_conn = cluster.nodes[src].conn();
    let before: Vec<_> = keys.iter().map(|(k, items)| observe(&mut src_conn, k, items)).collect();

    // Move the slot: IMPORTING on the target, MIGRATING on the source, MIGRATE the keys (DUMP
    // + RESTORE: the module's RDB save and load), then SETSLOT NODE everywhere.
    let (src_id, dst_id) = (cluster.id(src), cluster.id(dst));
    let mut dst_conn = cluster.nodes[dst].conn();
    let s = slot.to_string();
    assert_eq!(call_str(&mut dst_conn, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &src_id]), Ok(Value::Okay));
    assert_eq!(call_str(&mut src_conn, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst_id]), Ok(Value::Okay));
    let in_slot: Vec<String> =
        redis::cmd("CLUSTER").arg("GETKEYSINSLOT").arg(slot).arg(1000).query(&mut src_conn).unwrap();
    assert_eq!(in_slot.len(), keys.len(), "keys in slot {slot}: {in_slot:?}");
    let dst_port = cluster.nodes[dst].port().to_string();
    let mut migrate: Vec<&str> = vec!["MIGRATE", "127.0.0.1", &dst_port, "", "0", "10000", "KEYS"];
    migrate.extend(in_slot.iter().map(String::as_str));
    let r = call_str(&mut src_conn, &migrate);
    assert_eq!(r, Ok(Value::Okay), "MIGRATE; target log:\n{}", cluster.nodes[dst].log());
    for i in [dst, src, 3 - src - dst] {
        let r = call_str(&mut cluster.nodes[i].conn(), &["CLUSTER", "SETSLOT", &s, "NODE", &dst_id]);
        assert_eq!(r, Ok(Value::Okay), "SETSLOT NODE on node {i}");
    }
    cluster.wait_stable();
    assert_eq!(cluster.owner(slot), dst);
    assert_eq!(int(call_str(&mut src_conn, &["CLUSTER", "COUNTKEYSINSLOT", &s])), 0);
    assert_eq!(int(call_str(&mut dst_conn, &["CLUSTER", "COUNTKEYSINSLOT", &s])), keys.len() as i64);

    // The target answers exactly as the source did: same TYPE, INFO, SCANDUMP bytes, and the
    // same answer for every member and every fixed non-member.
    for ((key, items), was) in keys.iter().zip(&before) {
        assert_same(&format!("{key} after migration"), was, &observe(&mut dst_conn, key, items));
    }
    // The source now redirects; the stale cluster client follows and sees the same filters.
    let err = call_str(&mut src_conn, &["BF.EXISTS", "{mig}bf", "bf-member-0"]).unwrap_err();
    assert!(err.contains("MOVED") && err.contains(&cluster.nodes[dst].host_port()), "{err}");
    for ((key, items), was) in keys.iter().zip(&before) {
        assert_same(&format!("{key} via the cluster client"), was, &observe(&mut cc, key, items));
    }
    let p = cluster.nodes[src].port().to_string();
    let (_, out) = redis_cli(&["-c", "-p", &p, "CF.EXISTS", "{mig}cf-grown", "grown-member-1"]);
    assert_eq!(out.trim(), "1");
    // The migrated filters keep working for writes.
    assert_eq!(call_str(&mut cc, &["BF.ADD", "{mig}bf", "after-move"]), Ok(Value::Int(1)));
    assert_eq!(call_str(&mut dst_conn, &["BF.EXISTS", "{mig}bf", "after-move"]), Ok(Value::Int(1)));
    assert_eq!(call_str(&mut cc, &["CF.DEL", "{mig}cf-grown", "grown-member-1"]), Ok(Value::Int(1)));
}

#[test]
fn a_replica_answers_like_its_primary() {
    let primary = start_node(&[], &[]);
    let mut p = primary.conn();

    // Written before the replica exists: it gets these by the full sync (an RDB).
    assert_eq!(
        call_str(&mut p, &["BF.RESERVE", "rep:bf", "0.001", "500", "EXPANSION", "2"]),
        Ok(Value::Okay)
    );
    add_all(&mut p, "BF.MADD", "rep:bf", &members("rdb-bf", 1200));
    assert_eq!(call_str(&mut p, &["CF.RESERVE", "rep:cf", "256", "EXPANSION", "2"]), Ok(Value::Okay));
    add_all(&mut p, "CF.ADD", "rep:cf", &members("rdb-cf", 600));

    // The replica loads the module with other defaults: auto-created filters must still come
    // out as the primary made them (the module propagates their parameters explicitly).
    let port = primary.port().to_string();
    let replica = start_node(
        &["--replicaof", "127.0.0.1", &port],
        &["ERROR_RATE", "0.2", "INITIAL_SIZE", "7", "CF_MAX_EXPANSIONS", "5"],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while replica.info("replication").get("master_link_status").map(String::as_str) != Some("up") {
        assert!(std::time::Instant::now() < deadline, "replica never synced; its log:\n{}", replica.log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // The replica's defaults really differ (else the check below would prove nothing).
    let rate = |n: &support::RedisServer| -> Vec<String> {
        redis::cmd("CONFIG").arg("GET").arg("bf.bf-error-rate").query(&mut n.conn()).unwrap()
    };
    assert_eq!(rate(&primary), ["bf.bf-error-rate", "0.01"]);
    assert_eq!(rate(&replica), ["bf.bf-error-rate", "0.2"]);

    // Written after: they reach the replica through the replication stream.
    let mut keys: Vec<(&str, Vec<String>)> = Vec::new();
    let bf_more = members("stream-bf", 400);
    for item in &bf_more[..200] {
        assert!(matches!(call_str(&mut p, &["BF.ADD", "rep:bf", item]), Ok(Value::Int(_))));
    }
    add_all(&mut p, "BF.MADD", "rep:bf", &bf_more[200..]);
    let mut bf_items = members("rdb-bf", 1200);
    bf_items.extend(bf_more);
    keys.push(("rep:bf", bf_items));
    // BF.ADD and BF.INSERT creating their filter with the (primary's) defaults.
    add_all(&mut p, "BF.ADD", "rep:bf-auto", &members("auto", 350));
    keys.push(("rep:bf-auto", members("auto", 350)));
    let ins = members("insert", 300);
    let mut args = vec!["BF.INSERT", "rep:bf-insert", "ITEMS"];
    args.extend(ins.iter().map(String::as_str));
    assert!(matches!(call_str(&mut p, &args), Ok(Value::Array(_))));
    keys.push(("rep:bf-insert", ins));
    let ins2 = members("insert2", 100);
    let mut args =
        vec!["BF.INSERT", "rep:bf-insert2", "CAPACITY", "50", "ERROR", "0.02", "EXPANSION", "3", "ITEMS"];
    args.extend(ins2.iter().map(String::as_str));
    assert!(matches!(call_str(&mut p, &args), Ok(Value::Array(_))));
    keys.push(("rep:bf-insert2", ins2));
    // Cuckoo: adds, ADDNX, auto-created by CF.ADD and CF.INSERT, deletions, growth.
    let cf_more = members("stream-cf", 500);
    add_all(&mut p, "CF.ADD", "rep:cf", &cf_more);
    add_all(&mut p, "CF.ADDNX", "rep:cf", &members("rdb-cf", 50));
    let mut cf_items = members("rdb-cf", 600);
    cf_items.extend(cf_more);
    for item in cf_items.iter().step_by(4) {
        assert_eq!(call_str(&mut p, &["CF.DEL", "rep:cf", item]), Ok(Value::Int(1)));
    }
    keys.push(("rep:cf", cf_items));
    add_all(&mut p, "CF.ADD", "rep:cf-auto", &members("cf-auto", 2500));
    keys.push(("rep:cf-auto", members("cf-auto", 2500)));
    let cfi = members("cf-insert", 200);
    let mut args = vec!["CF.INSERT", "rep:cf-insert", "CAPACITY", "100", "ITEMS"];
    args.extend(cfi.iter().map(String::as_str));
    assert!(matches!(call_str(&mut p, &args), Ok(Value::Array(_))));
    keys.push(("rep:cf-insert", cfi));
    // LOADCHUNK: copies of the two big filters, chunk by chunk.
    for (from, to, pfx) in [("rep:bf", "rep:bf-copy", "BF"), ("rep:cf", "rep:cf-copy", "CF")] {
        for (iter, data) in scandump(&mut p, &format!("{pfx}.SCANDUMP"), from) {
            let r = call(
                &mut p,
                &[format!("{pfx}.LOADCHUNK").as_bytes(), to.as_bytes(), iter.to_string().as_bytes(), &data],
            );
            assert_eq!(r, Ok(Value::Okay), "{pfx}.LOADCHUNK {to} {iter}");
        }
        let items = keys.iter().find(|(k, _)| *k == from).unwrap().1.clone();
        keys.push((to, items));
    }

    assert_eq!(call_str(&mut p, &["WAIT", "1", "5000"]), Ok(Value::Int(1)), "WAIT: the replica did not ack");
    let mut r = replica.conn();
    assert_eq!(call_str(&mut r, &["DBSIZE"]), call_str(&mut p, &["DBSIZE"]));
    for (key, items) in &keys {
        assert_same(
            &format!("{key} on the replica"),
            &observe(&mut p, key, items),
            &observe(&mut r, key, items),
        );
    }
    // The replica is read-only for clients.
    let err = call_str(&mut r, &["BF.ADD", "rep:bf", "x"]).unwrap_err();
    assert!(err.contains("READONLY"), "{err}");
}

#[test]
fn a_cluster_replica_answers_like_its_primary() {
    let cluster = Cluster::start(3);
    let mut cc = cluster.client();
    // Keys of node 0's slots (one hash tag owned by node 0).
    let tag = (0..).map(|i| format!("{{r{i}}}")).find(|t| cluster.owner(cluster.keyslot(t)) == 0).unwrap();
    let (bf, cf) = (format!("{tag}bf"), format!("{tag}cf"));
    let (bf_items, cf_items) = (members("cr-bf", 1500), members("cr-cf", 1500));

    // Half before the replica joins (full sync), half after (replication stream).
    add_all(&mut cc, "BF.MADD", &bf, &bf_items[..700]);
    add_all(&mut cc, "CF.ADD", &cf, &cf_items[..700]);
    let replica = cluster.add_replica(0);
    add_all(&mut cc, "BF.MADD", &bf, &bf_items[700..]);
    add_all(&mut cc, "CF.ADD", &cf, &cf_items[700..]);
    for item in cf_items.iter().step_by(5) {
        assert_eq!(call_str(&mut cc, &["CF.DEL", &cf, item]), Ok(Value::Int(1)));
    }
    let mut p = cluster.nodes[0].conn();
    // WAIT waits for this connection's own last write, and the writes above went through the
    // cluster client: write once here (same slot, after them in the replication stream), so
    // that the replica's ack covers every earlier write too.
    let sync_key = format!("{tag}sync");
    assert_eq!(call_str(&mut p, &["SET", &sync_key, "1"]), Ok(Value::Okay));
    assert_eq!(call_str(&mut p, &["WAIT", "1", "5000"]), Ok(Value::Int(1)), "WAIT: the replica did not ack");
    assert_eq!(replica.info("replication").get("role").map(String::as_str), Some("slave"), "roles changed");
    assert_eq!(cluster.nodes[0].info("replication").get("role").map(String::as_str), Some("master"));

    // Without READONLY a cluster replica redirects to its primary ...
    let mut r = replica.conn();
    let err = call_str(&mut r, &["BF.EXISTS", &bf, &bf_items[0]]).unwrap_err();
    assert!(err.contains("MOVED") && err.contains(&cluster.nodes[0].host_port()), "{err}");
    // ... with it, it serves the module's read commands (flagged readonly) exactly as the primary.
    assert_eq!(call_str(&mut r, &["READONLY"]), Ok(Value::Okay));
    for (key, items) in [(&bf, &bf_items), (&cf, &cf_items)] {
        assert_same(
            &format!("{key} on the cluster replica"),
            &observe(&mut p, key, items),
            &observe(&mut r, key, items),
        );
    }
    // Writes still go to the primary.
    let err = call_str(&mut r, &["BF.ADD", &bf, "x"]).unwrap_err();
    assert!(err.contains("MOVED"), "{err}");
}
