//! The client against one real `redis-server` (Debian's 7.0) on 127.0.0.1: adds and queries in
//! both modes, sync and async; agreement with `sift::BlockedBloom` bit for bit; the FPR; the
//! metadata rules; time windows and migrations; errors, including a server killed mid-batch.

mod support;

use std::sync::Arc;
use std::time::Duration;

use sift::BlockedBloom;
use sift::{Filter as _, Insert as _};
use sift_client::transfer::{pull, push, PushOptions};
use sift_client::{Clock, Error, Filter, ManualClock, Mode, Options, Spec};
use support::*;

fn modes() -> [Options; 2] {
    [Options::new(), Options::new().mode(Mode::Lua)]
}

/// Adds report "new" once per distinct item (repeats in the batch included), every member is
/// found afterwards, and non-members are found at the target FPR (binomial bounds).
fn members_and_fpr(conn: &mut redis::Connection, opts: Options, name: &str) {
    let n = 20_000;
    let p = 0.01;
    // Small sub-bitmaps: the items spread over several keys.
    let spec = Spec::new(n as u64, p).key_bytes(64 * 64);
    let f = Filter::create(conn, name, &spec, opts.clone()).unwrap();
    assert!(f.record().gens[0].blocks > 4 * 64, "several keys");
    let members = items(&format!("{name}-m"), n);
    let mut with_repeats: Vec<&str> = members.iter().map(String::as_str).collect();
    with_repeats.extend(members[..1000].iter().map(String::as_str));
    let news = f.add_many(conn, &with_repeats).unwrap();
    assert_eq!(news.len(), n + 1000);
    // Every repeat is "not new"; a first add is "not new" only if it is a false positive.
    assert!(news[n..].iter().all(|x| !x));
    let first_not_new = news[..n].iter().filter(|x| !**x).count();
    assert!(first_not_new <= binomial_upper(n, p), "{first_not_new} first adds said 'seen'");
    assert!(f.contains_many(conn, &members).unwrap().into_iter().all(|x| x), "false negative");
    let others = items(&format!("{name}-x"), 100_000);
    let fp = f.contains_many(conn, &others).unwrap().into_iter().filter(|x| *x).count();
    // The blocked layout's FPR at exactly n items is below p (the planner's promise).
    assert!(fp <= binomial_upper(100_000, p), "{fp} false positives in 100000");
    assert!(fp >= binomial_lower(100_000, p / 4.0), "{fp}: implausibly few false positives");
    // Single-item calls answer the same.
    assert!(f.contains(conn, &members[7]).unwrap());
    assert!(!f.add(conn, &members[7]).unwrap());
    // Another handle, opened by name, sees the same filter.
    let g = Filter::open(conn, name, opts).unwrap();
    assert!(g.contains_many(conn, &members[..500]).unwrap().into_iter().all(|x| x));
    assert_eq!(g.record(), f.record());
}

#[test]
fn plain_and_lua_on_redis() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    for (i, opts) in modes().into_iter().enumerate() {
        members_and_fpr(&mut conn, opts, &format!("bf{i}"));
    }
}

/// The layout is the file's: a filter built with sift and pushed answers every query as the
/// local filter does, a filter filled through Redis pulls back to the bytes of the same filter
/// built locally, and both modes read each other's bits.
#[test]
fn same_bits_as_blocked_bloom() {
    let server = Server::redis(&[]);
    same_bits(&mut server.conn());
}

fn same_bits(conn: &mut redis::Connection) {
    let n = 30_000;
    for k in [3u32, 7, 12] {
        let mut local = BlockedBloom::with_params(700, k, sift::Hasher::default()).unwrap();
        let members = items(&format!("k{k}"), n);
        for m in &members[..n / 2] {
            local.insert(m);
        }
        let name = format!("pushed{k}");
        let opts = PushOptions { chunk_bytes: 4096, key_bytes: 64 * 100, ..PushOptions::default() };
        let report = push(conn, &name, &local, &opts).unwrap();
        assert_eq!(report.keys, 7);
        for mode in [Mode::Plain, Mode::Lua] {
            let f = Filter::open(conn, &name, Options::new().mode(mode)).unwrap();
            let remote = f.contains_many(conn, &members).unwrap();
            let here: Vec<bool> = members.iter().map(|m| local.contains(m)).collect();
            assert_eq!(remote, here, "k {k} {mode:?}");
        }
        // The rest through Redis (half plain, half Lua), the same locally: same bytes.
        let plain = Filter::open(conn, &name, Options::new()).unwrap();
        let lua = Filter::open(conn, &name, Options::new().mode(Mode::Lua)).unwrap();
        let rest = &members[n / 2..];
        let a = plain.add_many(conn, &rest[..rest.len() / 2]).unwrap();
        let b = lua.add_many(conn, &rest[rest.len() / 2..]).unwrap();
        let want: Vec<bool> = rest.iter().map(|m| local.insert(m)).collect();
        assert_eq!([a, b].concat(), want, "k {k}: 'new' answers");
        let pulled = pull(conn, &name, &Options::new()).unwrap();
        assert!(pulled.filter.words().eq(local.words()), "k {k}: pulled bytes");
        assert_eq!(pulled.other_generations, 0);
        assert_eq!((pulled.filter.num_hashes(), pulled.filter.hasher()), (k, local.hasher()));
    }
}

#[test]
fn async_api_on_redis() {
    let server = Server::redis(&[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = redis::Client::open(server.url()).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let manager = redis::aio::ConnectionManager::new(client.clone()).await.unwrap();
        for mode in [Mode::Plain, Mode::Lua] {
            let name = format!("async-{mode:?}");
            let f = Filter::open_or_create_async(
                &conn,
                &name,
                &Spec::new(5000, 0.01).key_bytes(1024),
                Options::new().mode(mode),
            )
            .await
            .unwrap();
            let xs = items(&name, 5000);
            let news = f.add_many_async(&conn, &xs).await.unwrap();
            assert!(news.iter().filter(|x| !**x).count() <= binomial_upper(5000, 0.01));
            assert!(f.contains_many_async(&manager, &xs).await.unwrap().into_iter().all(|x| x));
            assert!(!f.add_async(&manager, &xs[0]).await.unwrap());
            let g = Filter::open_async(&manager, &name, Options::new()).await.unwrap();
            assert!(g.contains_async(&conn, &xs[4999]).await.unwrap());
            // The futures are Send: a handle in an Arc serves spawned tasks.
            let shared = Arc::new(g);
            let tasks: Vec<_> = (0..4)
                .map(|t| {
                    let (f, c) = (Arc::clone(&shared), conn.clone());
                    tokio::spawn(async move { f.add_many_async(&c, &items(&format!("task{t}"), 500)).await })
                })
                .collect();
            for t in tasks {
                assert!(t.await.unwrap().unwrap().iter().filter(|x| !**x).count() < 50);
            }
            let g = Arc::try_unwrap(shared).unwrap();
            let fill = g.fill_async(&conn).await.unwrap();
            assert!((fill.generations[0].estimated_items - 7000.0).abs() < 350.0, "{fill:?}");
            assert!(Filter::destroy_async(&conn, &name, &Options::new()).await.unwrap());
            assert!(matches!(f.contains_async(&conn, "x").await, Err(Error::Deleted { .. })));
        }
    });
}

/// Creation is atomic and checked; what is not ours is refused with a clear error.
#[test]
fn metadata_rules() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    let spec = Spec::new(1000, 0.01);
    let f = Filter::create(&mut conn, "m", &spec, Options::new()).unwrap();
    assert!(matches!(Filter::create(&mut conn, "m", &spec, Options::new()), Err(Error::Exists { .. })));
    // open_or_create: the same spec opens it; another size, hash, key size or window is refused.
    Filter::open_or_create(&mut conn, "m", &spec, Options::new()).unwrap();
    for (other, field) in [
        (Spec::new(100_000, 0.01), "size"),
        (Spec::new(1000, 0.01).hasher(sift::Hasher::new(sift::HashKind::Xxh3_64, 1)), "hash"),
        (Spec::new(1000, 0.01).key_bytes(1024), "key_bytes"),
        (Spec::new(1000, 0.01).window(Duration::from_secs(60), 2), "window"),
    ] {
        match Filter::open_or_create(&mut conn, "m", &other, Options::new()) {
            Err(Error::Mismatch { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(matches!(Filter::open(&mut conn, "nothing", Options::new()), Err(Error::NotFound { .. })));
    // Someone else's key under the name, of either type.
    let _: () = redis::cmd("SET").arg("plain-string").arg("hello").query(&mut conn).unwrap();
    let _: () = redis::cmd("LPUSH").arg("a-list").arg("x").query(&mut conn).unwrap();
    for name in ["plain-string", "a-list"] {
        assert!(
            matches!(Filter::open(&mut conn, name, Options::new()), Err(Error::Foreign { .. })),
            "{name}"
        );
        assert!(matches!(
            Filter::open_or_create(&mut conn, name, &spec, Options::new()),
            Err(Error::Foreign { .. })
        ));
    }
    // A newer layout version.
    let _: () =
        redis::cmd("SET").arg("future").arg("sift-bitmap-bloom:2:0000000000000001").query(&mut conn).unwrap();
    assert!(matches!(
        Filter::open(&mut conn, "future", Options::new()),
        Err(Error::UnsupportedLayout { found: 2, supported: 1 })
    ));
    // A record rewritten by something else.
    let rec = f.record();
    let key = format!("{{m}}:{}:0", rec.instance);
    let _: () = redis::cmd("SET").arg(&key).arg("{\"format\":\"other\"}").query(&mut conn).unwrap();
    assert!(matches!(Filter::open(&mut conn, "m", Options::new()), Err(Error::Foreign { .. })));
    // Names that cannot be used.
    for bad in ["", "a{b}", "x}"] {
        assert!(matches!(
            Filter::create(&mut conn, bad, &spec, Options::new()),
            Err(Error::InvalidName { .. })
        ));
    }
    // Bad parameters are errors before anything is written.
    for bad in
        [Spec::new(0, 0.01), Spec::new(10, 0.0), Spec::new(10, 1.0), Spec::new(10, 0.01).key_bytes(100)]
    {
        assert!(
            matches!(Filter::create(&mut conn, "bad", &bad, Options::new()), Err(Error::Params(_))),
            "{bad:?}"
        );
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("*bad*").query(&mut conn).unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

/// A key of the filter holding another type is an error naming it; other keys' items still
/// answer (a partial result).
#[test]
fn wrong_type_is_reported() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    let f = Filter::create(&mut conn, "w", &Spec::new(10_000, 0.01).key_bytes(1024), Options::new()).unwrap();
    let rec = f.record();
    let victim = format!("{{w:{}:0:3}}", rec.instance);
    let _: () = redis::cmd("DEL").arg(&victim).query(&mut conn).unwrap();
    let _: () = redis::cmd("LPUSH").arg(&victim).arg("x").query(&mut conn).unwrap();
    let xs = items("w", 2000);
    for mode in [Mode::Plain, Mode::Lua] {
        let f = Filter::open(&mut conn, "w", Options::new().mode(mode)).unwrap();
        for r in [f.add_many(&mut conn, &xs), f.contains_many(&mut conn, &xs)] {
            match r {
                Err(Error::Partial { answers, cause }) => {
                    assert!(matches!(*cause, Error::WrongType { ref key } if *key == victim), "{cause:?}");
                    let known = answers.iter().filter(|a| a.is_some()).count();
                    assert!(known > 1500 && known < 2000, "{known}");
                }
                other => panic!("{mode:?}: {other:?}"),
            }
        }
    }
    assert!(matches!(f.fill(&mut conn), Err(Error::WrongType { .. })));
}

/// Deleting a filter: its keys go, and handles still open fail with `Deleted`, also after the
/// name is created again (another instance).
#[test]
fn destroy_and_recreate() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    let f = Filter::create(&mut conn, "d", &Spec::new(10_000, 0.01).key_bytes(1024), Options::new()).unwrap();
    f.add(&mut conn, "x").unwrap();
    assert!(Filter::destroy(&mut conn, "d", &Options::new()).unwrap());
    assert!(!Filter::destroy(&mut conn, "d", &Options::new()).unwrap());
    let n: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
    assert_eq!(n, 0, "every key deleted");
    assert!(matches!(f.add(&mut conn, "y"), Err(Error::Deleted { .. })));
    let g = Filter::create(&mut conn, "d", &Spec::new(10_000, 0.01).key_bytes(1024), Options::new()).unwrap();
    assert!(matches!(f.contains(&mut conn, "x"), Err(Error::Deleted { .. })));
    assert!(!g.contains(&mut conn, "x").unwrap());
}

/// Time generations: an item is seen for `keep` periods, then forgotten; its generation's keys
/// carry the TTL that removes them; a resize applies from the next period.
#[test]
fn windowed_filter_forgets() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let hour = 3_600_000;
    let start = (now / hour) * hour;
    let clock = Arc::new(ManualClock::new(start));
    for mode in [Mode::Plain, Mode::Lua] {
        let name = format!("recent-{mode:?}");
        let opts = Options::new().mode(mode).clock(clock.clone()).expiry_grace(Duration::from_secs(60));
        clock.set(start);
        let spec = Spec::new(5000, 0.01).window(Duration::from_millis(hour), 3).key_bytes(1024);
        let f = Filter::create(&mut conn, &name, &spec, opts.clone()).unwrap();
        let a = items(&format!("{name}-a"), 3000);
        assert!(f.add_many(&mut conn, &a).unwrap().iter().filter(|x| !**x).count() < 100);
        // The generation's keys expire when it is no longer read, plus the grace.
        let rec = f.record();
        let key = format!("{{{name}:{}:{}:0}}", rec.instance, start / hour);
        let at: i64 = redis::cmd("PEXPIRETIME").arg(&key).query(&mut conn).unwrap();
        assert_eq!(at as u64, start + 3 * hour + 60_000);
        // One and two periods later: still seen, and not new.
        for later in 1..3 {
            clock.set(start + later * hour + 5);
            assert!(f.contains_many(&mut conn, &a).unwrap().into_iter().all(|x| x), "period +{later}");
            assert!(!f.add(&mut conn, &a[0]).unwrap());
        }
        // Re-adding a[0] in period +2 keeps it alive there; the others are forgotten at +3.
        clock.set(start + 3 * hour + 5);
        let seen = f.contains_many(&mut conn, &a).unwrap();
        assert!(seen[0]);
        let fp = seen[1..].iter().filter(|x| **x).count();
        assert!(fp <= binomial_upper(3000, 0.01), "{fp} of the forgotten items still seen");
        // New items again from a fresh generation.
        assert!(f.add(&mut conn, "fresh").unwrap());
        // A larger size from the next period on.
        f.grow(
            &mut conn,
            &Spec::new(50_000, 0.01).window(Duration::from_millis(hour), 3).key_bytes(1024),
            None,
        )
        .unwrap();
        let rec = f.record();
        assert_eq!(rec.gens.len(), 2);
        assert_eq!(rec.gens[1].id, start / hour + 4);
        clock.set(start + 4 * hour + 5);
        assert!(f.add(&mut conn, "bigger").unwrap());
        assert!(f.contains_many(&mut conn, &["fresh", "bigger", &a[0]]).unwrap().into_iter().all(|x| x));
        let big_keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{{{name}:{}:{}:*", rec.instance, start / hour + 4))
            .query(&mut conn)
            .unwrap();
        assert!(!big_keys.is_empty());
        assert!(Filter::destroy(&mut conn, &name, &opts).unwrap());
    }
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// Calls of `command` the server has answered (`INFO commandstats`).
fn calls(conn: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    let prefix = format!("cmdstat_{}:calls=", command.to_ascii_lowercase());
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// A plain-mode batch reads each block it needs once, and neighbouring blocks of a sub-bitmap
/// together: a windowed filter of small generations (one user's day, a few blocks) answers a
/// query of 100 items with one `GETRANGE` per generation, not one per item and generation, and
/// an add with one per older generation; the answers are those of the bits.
#[test]
fn plain_reads_share_getranges() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    let day = 86_400_000;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let start = (now / day) * day;
    let clock = Arc::new(ManualClock::new(start));
    let opts = Options::new().clock(clock.clone());
    let spec = Spec::new(40, 0.01 / 8.0).window(Duration::from_millis(day), 8);
    let f = Filter::create(&mut conn, "shown", &spec, opts).unwrap();
    assert!(f.record().gens[0].blocks > 1, "items spread over several blocks");
    let mut shown = Vec::new();
    for d in 0..8 {
        clock.set(start + d * day + day / 2);
        let today = items(&format!("day{d}"), 40);
        let before = calls(&mut conn, "GETRANGE");
        let news = f.add_many(&mut conn, &today).unwrap();
        // The 7 other generations read, each once (those before the filter's first day too).
        assert_eq!(calls(&mut conn, "GETRANGE") - before, 7, "day {d}");
        let not_new = news.iter().filter(|x| !**x).count();
        assert!(not_new <= binomial_upper(40, 0.01), "{not_new} of 40 new items said 'seen'");
        shown.extend(today);
    }
    let fresh = items("never-shown", 70);
    let mut asked: Vec<&str> = shown[shown.len() - 30..].iter().map(String::as_str).collect();
    asked.extend(fresh.iter().map(String::as_str));
    let before = calls(&mut conn, "GETRANGE");
    let seen = f.contains_many(&mut conn, &asked).unwrap();
    assert_eq!(calls(&mut conn, "GETRANGE") - before, 8, "one GETRANGE per generation read");
    assert!(seen[..30].iter().all(|x| *x), "false negative");
    let fp = seen[30..].iter().filter(|x| **x).count();
    assert!(fp <= binomial_upper(70, 0.01), "{fp} false positives in 70");
    // All 320 items, the first day's too: the oldest generation is still read.
    assert!(f.contains_many(&mut conn, &shown).unwrap().into_iter().all(|x| x), "false negative");
    // In a large static filter, a query reads only the blocks its items fall in.
    let big = Filter::create(&mut conn, "big", &Spec::new(1_000_000, 0.01), Options::new()).unwrap();
    let members = items("big-m", 1000);
    big.add_many(&mut conn, &members).unwrap();
    let before = calls(&mut conn, "GETRANGE");
    assert!(big.contains_many(&mut conn, &members).unwrap().into_iter().all(|x| x), "false negative");
    let used = calls(&mut conn, "GETRANGE") - before;
    assert!(
        (100..=1000).contains(&used),
        "{used} GETRANGEs for 1000 items in {} blocks",
        big.record().gens[0].blocks
    );
}

/// Seed 002's progressive migration: a larger generation takes the writes, the old one answers
/// until it is retired, then its keys expire.
#[test]
fn grow_migrates_progressively() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    let real =
        || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let clock = Arc::new(ManualClock::new(real()));
    let opts = Options::new().clock(clock.clone()).expiry_grace(Duration::ZERO);
    let f = Filter::create(&mut conn, "g", &Spec::new(2000, 0.01).key_bytes(1024), opts.clone()).unwrap();
    let old = items("old", 2000);
    f.add_many(&mut conn, &old).unwrap();
    let before = f.fill(&mut conn).unwrap();
    assert!(before.expected_fpr > 0.002 && before.expected_fpr < 0.02, "{before:?}");
    // Over capacity: grow, keep the old generation readable for 2 seconds.
    f.grow(&mut conn, &Spec::new(20_000, 0.01).key_bytes(1024), Some(Duration::from_secs(2))).unwrap();
    let other = Filter::open(&mut conn, "g", opts.clone()).unwrap();
    let rec = other.record();
    assert_eq!(rec.gens.len(), 2);
    let retire = rec.gens[0].retire_ms;
    assert_eq!(retire, clock.now_ms() + 2000);
    assert!(other.contains_many(&mut conn, &old).unwrap().into_iter().all(|x| x), "old items still found");
    // An old item is not new; a new item goes to the new generation only.
    assert!(!other.add(&mut conn, &old[5]).unwrap());
    let new = items("new", 10_000);
    let news = other.add_many(&mut conn, &new).unwrap();
    assert!(news.iter().filter(|x| !**x).count() < 300);
    let fill = other.fill(&mut conn).unwrap();
    assert_eq!(fill.generations.len(), 2);
    assert!((fill.generations[0].estimated_items - 10_000.0).abs() < 400.0, "{fill:?}");
    // The old keys expire at the retirement (no grace here).
    let pattern = format!("{{g:{}:0:*", rec.instance);
    let old_keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query(&mut conn).unwrap();
    assert!(!old_keys.is_empty());
    for k in &old_keys {
        let at: i64 = redis::cmd("PEXPIRETIME").arg(k).query(&mut conn).unwrap();
        assert_eq!(at as u64, retire, "{k}");
    }
    // After the retirement: the old generation is not read, and Redis dropped its keys.
    clock.set(retire + 1);
    let gone = old.iter().filter(|o| !new.contains(o)).cloned().collect::<Vec<_>>();
    let seen = other.contains_many(&mut conn, &gone).unwrap().into_iter().filter(|x| *x).count();
    assert!(seen <= binomial_upper(gone.len(), 0.01), "{seen}");
    while real() <= retire + 50 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let old_keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query(&mut conn).unwrap();
    assert!(old_keys.is_empty(), "{old_keys:?}");
    assert!(other.contains_many(&mut conn, &new).unwrap().into_iter().all(|x| x));
    // The first handle learns of all this at its next call.
    assert!(f.contains(&mut conn, &new[0]).unwrap());
    assert_eq!(f.record(), other.record());
}

/// The FPR monitor: the estimate tracks the items added and the FPR measured.
#[test]
fn fill_estimates_items_and_fpr() {
    let server = Server::redis(&[]);
    let mut conn = server.conn();
    let f = Filter::create(&mut conn, "fill", &Spec::new(50_000, 0.01).key_bytes(64 * 1024), Options::new())
        .unwrap();
    let empty = f.fill(&mut conn).unwrap();
    assert_eq!((empty.generations[0].bits_set, empty.expected_fpr), (0, 0.0));
    for (round, n) in [(0, 25_000usize), (1, 50_000), (2, 100_000)] {
        let have = items("fill", n);
        f.add_many(&mut conn, &have).unwrap();
        let fill = f.fill(&mut conn).unwrap();
        let g = &fill.generations[0];
        assert!((g.estimated_items - n as f64).abs() < 0.03 * n as f64, "round {round}: {g:?}");
        let probes = items("probe", 50_000);
        let fp = f.contains_many(&mut conn, &probes).unwrap().into_iter().filter(|x| *x).count();
        assert!(
            fp <= binomial_upper(50_000, g.expected_fpr * 1.1),
            "round {round}: {fp} vs {}",
            g.expected_fpr
        );
        assert!(
            fp >= binomial_lower(50_000, g.expected_fpr * 0.9),
            "round {round}: {fp} vs {}",
            g.expected_fpr
        );
    }
}

/// `kill -9` of the server in the middle of a large batch: an error (never a panic), and the
/// items answered before the failure keep their answers.
#[test]
fn server_killed_mid_batch() {
    let mut server = Server::redis(&[]);
    let mut conn = server.conn();
    let opts = Options::new().batch_items(2000);
    let f = Filter::create(&mut conn, "k", &Spec::new(2_000_000, 0.01), opts.clone()).unwrap();
    let xs = items("k", 400_000);
    let pid = server.pid();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let r = f.add_many(&mut conn, &xs);
    killer.join().unwrap();
    server.kill();
    match r {
        Err(Error::Partial { answers, cause }) => {
            assert!(matches!(*cause, Error::Connection(_)), "{cause}");
            let known = answers.iter().take_while(|a| a.is_some()).count();
            assert!(known > 0 && answers[known..].iter().all(Option::is_none), "answers are a prefix");
            assert!(answers.iter().flatten().filter(|x| !**x).count() <= binomial_upper(known, 0.01));
        }
        Err(Error::Connection(_)) => {}
        other => panic!("{:?}", other.map(|v| v.len())),
    }
    assert!(matches!(f.contains(&mut conn, "x"), Err(Error::Connection(_))));
}

/// The same scenarios on the sift-server binary (which keeps its strings with the same
/// commands: BITFIELD, GETRANGE, SETRANGE, EVALSHA, PEXPIREAT, SET NX ...).
#[test]
fn sift_server_runs_the_same_filters() {
    let server = Server::sift();
    let mut conn = server.conn();
    for (i, opts) in modes().into_iter().enumerate() {
        members_and_fpr(&mut conn, opts, &format!("sbf{i}"));
    }
    same_bits(&mut conn);
    // A foreign value at a data key (a Bloom filter of sift-server's own, the only other type).
    let f = Filter::create(&mut conn, "w", &Spec::new(10_000, 0.01).key_bytes(1024), Options::new()).unwrap();
    let victim = format!("{{w:{}:0:3}}", f.record().instance);
    let _: () = redis::cmd("DEL").arg(&victim).query(&mut conn).unwrap();
    let _: i64 = redis::cmd("BF.ADD").arg(&victim).arg("x").query(&mut conn).unwrap();
    match f.add_many(&mut conn, &items("w", 2000)) {
        Err(Error::Partial { cause, .. }) => assert!(matches!(*cause, Error::WrongType { .. })),
        other => panic!("{other:?}"),
    }
    // A time window: keys carry their expiry.
    let hour = 3_600_000u64;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let clock = Arc::new(ManualClock::new(now));
    let opts = Options::new().clock(clock.clone()).expiry_grace(Duration::from_secs(60));
    let spec = Spec::new(5000, 0.01).window(Duration::from_millis(hour), 2).key_bytes(1024);
    let w = Filter::create(&mut conn, "win", &spec, opts).unwrap();
    assert!(w.add(&mut conn, "a").unwrap());
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{win:{}:{}:*", w.record().instance, now / hour))
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys.len(), 1, "one item, one key");
    let pttl: i64 = redis::cmd("PTTL").arg(&keys[0]).query(&mut conn).unwrap();
    let want = ((now / hour + 2) * hour + 60_000 - now) as i64;
    assert!(pttl <= want && pttl > want - 60_000, "{pttl} vs {want}");
    clock.advance(Duration::from_millis(2 * hour));
    assert!(!w.contains(&mut conn, "a").unwrap());
}
