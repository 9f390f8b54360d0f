//! Idempotent jobs on real PostgreSQL and Redis: concurrent consumers over a queue with
//! duplicates and crashes run every job exactly once (checked in the database), and confirm with
//! the database only the duplicates, the redeliveries and the filter's false positives.

use std::sync::Arc;

use sift_examples::env::{PgOptions, Postgres, Server};
use sift_examples::guard::{Guard, GuardKind};
use sift_examples::jobs::{reset, run, JobsConfig};
use sift_examples::stats::binomial_upper;

const FPR: f64 = 0.01;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_job_runs_once() {
    let pg = Postgres::start(&PgOptions { no_durability: true, ..Default::default() }).unwrap();
    let redis = Server::redis_with_module().unwrap();
    let sift = Server::sift().unwrap();
    let (db, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let cfg = JobsConfig {
        jobs: 3_000,
        duplicates: 0.3,
        crash: 0.02,
        consumers: 8,
        queue_url: redis.url(),
        queue_key: "jobs:queue".into(),
        seed: 11,
    };
    let mut control_share = None;
    for (name, kind) in [
        ("off", None),
        ("bf-module", Some(GuardKind::Bf { url: redis.url(), key: "jobs:seen".into() })),
        ("bf-sift", Some(GuardKind::Bf { url: sift.url(), key: "jobs:seen".into() })),
        ("local", Some(GuardKind::Local)),
    ] {
        reset(&db).await.unwrap();
        let filter = match &kind {
            Some(k) => Some(Arc::new(Guard::fresh(k, cfg.jobs, FPR).await.unwrap())),
            None => None,
        };
        let r = run(&cfg, &pg.url(), filter, name).await.unwrap();
        let at = r.render();
        assert_eq!((r.ran_twice, r.never_ran, r.runs), (0, 0, cfg.jobs), "{at}");
        assert_eq!(r.deliveries, cfg.jobs + r.duplicates + r.crashes, "{at}");
        assert!(r.duplicates > 800, "{at}");
        match kind {
            None => {
                assert_eq!(r.confirmations, r.deliveries, "the control confirms every delivery: {at}");
                control_share = Some(r.confirmation_share);
            }
            Some(k) => {
                assert!(r.crashes > 20, "the crash window is exercised: {at}");
                assert!(r.false_positives <= binomial_upper(cfg.jobs, FPR, 1e-6), "{at}");
                if k != GuardKind::Local {
                    // An atomic add says "new" at most once per id: every confirmation is a
                    // duplicate, a redelivery or a false positive.
                    assert_eq!(r.confirmations, r.duplicates + r.crashes + r.false_positives, "{at}");
                }
                assert!(r.confirmation_share < control_share.unwrap() * 0.5, "{at}");
            }
        }
    }
}
