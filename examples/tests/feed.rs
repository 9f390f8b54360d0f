//! Per-user "already shown" filters against one Redis set per user, on a real redis-server (the
//! sets, the sift module's BF and SF aging filters, sift-client's windowed filters without the
//! module) and sift-server: no item seen in the window ever missed, false positives within the binomial
//! bound, old items back after the window only where the design forgets, and the memory each
//! design costs a user.

use sift_examples::env::Server;
use sift_examples::feed::{measure, Design, FeedConfig};
use sift_examples::stats::binomial_upper;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sets_and_filters_per_user() {
    let cfg = FeedConfig {
        users: 2_000,
        per_day: 40,
        days: 7,
        candidates: 100,
        seen_candidates: 30,
        fpr: 0.01,
        batch: 200,
        seed: 5,
    };
    let mut set_bytes = None;
    for (design, server) in [
        (Design::Set, Server::redis(&[]).unwrap()),
        (Design::Bf, Server::redis_with_module().unwrap()),
        (Design::Bf, Server::sift().unwrap()),
        (Design::window(), Server::redis(&[]).unwrap()),
        (Design::window(), Server::sift().unwrap()),
        (Design::sf(), Server::redis_with_module().unwrap()),
        (Design::sf(), Server::sift().unwrap()),
    ] {
        let mut conn =
            redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
        let r = measure(&design, &cfg, &mut conn, 2_000, 4).await.unwrap();
        let at = format!("{r:?}");
        assert_eq!(r.query.queries, 2_000, "{at}");
        assert_eq!(r.query.seen_asked, 2_000 * 30, "{at}");
        assert_eq!(r.query.false_negatives, 0, "a seen item reported unseen: {at}");
        assert!(r.memory_usage_per_key > 0.0, "{at}");
        let old = &r.after_window;
        assert_eq!(old.seen_asked, 2_000 * 30, "{at}");
        match design {
            // Forgets: every old item comes back but for the false positives (at most fpr
            // over the generations a query reads, the empty ones included).
            Design::Window(_) | Design::Sf(_) => assert!(
                old.seen_asked - old.false_negatives <= binomial_upper(old.seen_asked, cfg.fpr, 1e-6),
                "old items still seen after the window: {at}"
            ),
            // Never forgets: no old item comes back.
            Design::Set | Design::Bf => assert_eq!(old.false_negatives, 0, "{at}"),
        }
        match design {
            Design::Set => {
                assert_eq!(r.query.false_positives, 0, "sets are exact: {at}");
                // 280 ids of 8 bytes in an intset, and the key's overhead.
                assert!(r.memory_usage_per_key >= 280.0 * 8.0, "{at}");
                set_bytes = Some(r.memory_usage_per_key);
            }
            Design::Bf | Design::Window(_) | Design::Sf(_) => {
                assert!(
                    r.query.false_positives <= binomial_upper(r.query.fresh_asked, cfg.fpr, 1e-6),
                    "{at}"
                );
                // A BF is one key; a windowed filter pays a key (and its overhead) per day plus
                // its metadata, so only the BF is held to a third of the set. An aging filter
                // (33.6 bits an item at 1%, and a slice of spare) stays below the set.
                match design {
                    Design::Bf => assert!(r.memory_usage_per_key < set_bytes.unwrap() / 3.0, "{at}"),
                    Design::Sf(_) => assert!(r.memory_usage_per_key < set_bytes.unwrap(), "{at}"),
                    _ => {}
                }
            }
        }
    }
}

/// The path the harness does not take: `SF.MADD` on a `TTL` filter at the server's own clock,
/// with a real window of one second (the shortest `SF.RESERVE` takes). Every item is a member
/// at once, and none is once more than the window (and its last slice) has passed: a gap
/// longer than the window leaves no slice live, so the answer is exact, not statistical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aging_filters_forget_by_the_servers_clock() {
    for server in [Server::redis_with_module().unwrap(), Server::sift().unwrap()] {
        let mut conn =
            redis::Client::open(server.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
        let items: Vec<String> = (0..200).map(|i| format!("item-{i}")).collect();
        let _: () = redis::cmd("SF.RESERVE")
            .arg("seen:{1}")
            .arg(0.01)
            .arg(400)
            .arg(&["KIND", "aging", "TTL", "1"])
            .query_async(&mut conn)
            .await
            .unwrap();
        let added: Vec<i64> =
            redis::cmd("SF.MADD").arg("seen:{1}").arg(&items).query_async(&mut conn).await.unwrap();
        assert_eq!(added.len(), items.len());
        let seen: Vec<i64> =
            redis::cmd("SF.MEXISTS").arg("seen:{1}").arg(&items).query_async(&mut conn).await.unwrap();
        assert!(seen.iter().all(|&s| s == 1), "{}: an item added now is not seen: {seen:?}", server.url());
        tokio::time::sleep(std::time::Duration::from_millis(2_200)).await;
        let seen: Vec<i64> =
            redis::cmd("SF.MEXISTS").arg("seen:{1}").arg(&items).query_async(&mut conn).await.unwrap();
        assert!(seen.iter().all(|&s| s == 0), "{}: items 2.2 s old in a 1 s window: {seen:?}", server.url());
    }
}
