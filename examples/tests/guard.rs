//! The cache-penetration guard on real PostgreSQL, redis-server (the cache, and the sift module
//! for the BF guard), sift-server and a redis-server without the module (sift-client's filter in
//! plain strings), driven by the load generator over HTTP.

use std::sync::Arc;

use sift_examples::env::{sift_cli_bin, PgOptions, Postgres, Server};
use sift_examples::guard::{bootstrap, App, Bootstrap, Config, GuardKind};
use sift_examples::load::{measure, LoadConfig};
use sift_examples::stats::binomial_upper;

const ROWS: u64 = 3_000;
const FPR: f64 = 0.01;

struct Running {
    app: Arc<App>,
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    async fn start(cfg: Config) -> Running {
        let app = App::start(cfg).await.expect("start the service");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(sift_examples::guard::serve(app.clone(), listener, async {
            let _ = rx.await;
        }));
        Running { app, url, stop: Some(tx), task }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap().unwrap();
    }
}

async fn pg_client(pg: &Postgres) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c
}

async fn flush(servers: &[&Server]) {
    for s in servers {
        flush_one(s).await;
    }
}

async fn flush_one(redis: &Server) {
    let mut c = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await.unwrap();
}

/// Every guard under the mixed load: no legitimate read or new row rejected, the attack kept off
/// the database at the filter's rate (or, without a guard, all of it reaching the database), and
/// the service's lookup count equal to PostgreSQL's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn guards_under_mixed_load() {
    let pg = Postgres::start(&PgOptions { no_durability: true, ..Default::default() }).unwrap();
    let redis = Server::redis_with_module().unwrap();
    let sift = Server::sift().unwrap();
    let plain = Server::redis(&[]).unwrap();
    let db = pg_client(&pg).await;
    bootstrap::create_schema(&db).await.unwrap();
    bootstrap::seed_items(&db, ROWS).await.unwrap();

    let guards = [
        GuardKind::Off,
        GuardKind::Local,
        GuardKind::Bf { url: redis.url(), key: "items:ids".into() },
        GuardKind::Bf { url: sift.url(), key: "items:ids".into() },
        GuardKind::Client { url: plain.url(), name: "items:ids".into() },
        GuardKind::Client { url: sift.url(), name: "items:ids".into() },
    ];
    for (i, kind) in guards.into_iter().enumerate() {
        flush(&[&redis, &sift, &plain]).await;
        let mut cfg = Config::new(pg.url(), redis.url(), kind.clone());
        cfg.fpr = FPR;
        let svc = Running::start(cfg).await;
        let mut load = LoadConfig::new(svc.url.clone(), ROWS, 2_000);
        load.concurrency = 4;
        load.legit = 0.5;
        load.write = 0.1;
        load.attack = 0.4;
        load.seed = 7 + i as u64;
        let (s, _) = measure(&load, Some(&db)).await.unwrap();
        let where_ = format!("guard {kind:?}:\n{}", s.render());
        for (class, c) in &s.classes {
            assert_eq!(c.errors, 0, "{class} errors, {where_}");
            assert_eq!(c.wrong, 0, "{class} answered wrongly, {where_}");
            assert!(c.count > 0, "{class} never ran, {where_}");
        }
        assert_eq!(s.pg_lookup_calls, Some(s.db_lookups), "service and PostgreSQL disagree, {where_}");
        assert!(s.attack_requests > 500, "{where_}");
        if kind == GuardKind::Off {
            assert_eq!(
                s.attack_db_lookups, s.attack_requests,
                "the control: every attack reaches the database, {where_}"
            );
        } else {
            // Each attack id is new, so each false positive is one lookup: at most the binomial
            // bound of the configured rate (the filter is below capacity, so its real rate is lower).
            let bound = binomial_upper(s.attack_requests, FPR, 1e-6);
            assert!(s.attack_db_lookups <= bound, "{} lookups > {bound}, {where_}", s.attack_db_lookups);
            assert!(
                s.classes["attack"].sources.get("filter").copied().unwrap_or(0) >= s.attack_requests - bound,
                "{where_}"
            );
        }
        svc.stop().await;
    }
}

/// Filters rebuilt and swapped in — from the table (COPY in one snapshot) and from a `sift build`
/// file over `dump-keys`' output — while writers insert rows: afterwards every row, old or new, is
/// in the live filter, and no write's read-back was rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rebuild_while_writing_loses_no_row() {
    let pg = Postgres::start(&PgOptions { no_durability: true, ..Default::default() }).unwrap();
    let redis = Server::redis_with_module().unwrap();
    let plain = Server::redis(&[]).unwrap();
    let mut db = pg_client(&pg).await;
    bootstrap::create_schema(&db).await.unwrap();
    bootstrap::seed_items(&db, ROWS).await.unwrap();
    let sift = sift_cli_bin().unwrap();
    let dir = sift_testkit::temp_dir("rebuild");

    for (kind, family) in [
        (GuardKind::Local, "blocked-bloom"),
        (GuardKind::Bf { url: redis.url(), key: "items:ids".into() }, "redisbloom-bf"),
        (GuardKind::Client { url: plain.url(), name: "items:ids".into() }, "blocked-bloom"),
    ] {
        flush(&[&redis, &plain]).await;
        let svc = Running::start(Config::new(pg.url(), redis.url(), kind.clone())).await;
        // A key dump and its filter file, made while nobody writes; the rows written after it
        // are the install's to catch up.
        let keys = dir.join(format!("keys-{family}.txt"));
        let fill = {
            let mut out = std::io::BufWriter::new(std::fs::File::create(&keys).unwrap());
            bootstrap::dump_keys(&mut db, &mut out).await.unwrap()
        };
        let filter = dir.join(format!("items-{family}.sift"));
        let st = std::process::Command::new(&sift)
            .args(["build", "-q", "--family", family, "-n", "10000", "-p", "0.01", "-o"])
            .arg(&filter)
            .arg(&keys)
            .status()
            .unwrap();
        assert!(st.success(), "sift build failed");

        let mut load = LoadConfig::new(svc.url.clone(), ROWS, 600);
        load.concurrency = 6;
        load.legit = 0.2;
        load.write = 0.8;
        load.attack = 0.0;
        let writer = tokio::spawn(async move { sift_examples::load::run(&load).await });
        // The rebuilds start once the writers have committed rows the dump did not see, so the
        // file's install has rows to catch up however the scheduler orders the tasks.
        let started = std::time::Instant::now();
        loop {
            let n: i64 = db.query_one("SELECT count(*) FROM items", &[]).await.unwrap().get(0);
            if n as u64 >= fill.rows + 50 {
                break;
            }
            assert!(
                started.elapsed().as_secs() < 60,
                "{kind:?}: the writers wrote {} rows in 60 s",
                n as u64 - fill.rows
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let mut reports = Vec::new();
        for round in 0..4 {
            let source = if round % 2 == 0 {
                Bootstrap::Stream
            } else {
                Bootstrap::File { path: filter.clone(), snapshot: fill.snapshot.clone() }
            };
            reports.push(svc.app.rebuild(&source).await.unwrap());
        }
        let result = writer.await.unwrap().unwrap();
        for (class, c) in &result.classes {
            assert_eq!((c.errors, c.wrong), (0, 0), "{kind:?}: {class}");
        }
        assert!(result.written.len() > 300, "{kind:?}");
        // The file's rounds caught up every row written since the dump.
        assert!(reports[1].caught_up + reports[1].caught_up_locked > 0, "{kind:?}: {reports:?}");
        let ids: Vec<i64> =
            db.query("SELECT id FROM items", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
        assert!(ids.len() as u64 >= ROWS + result.written.len() as u64, "{kind:?}");
        for id in ids {
            assert!(
                svc.app.guard().may_contain(id).await.unwrap(),
                "{kind:?}: row {id} missing from the filter"
            );
        }
        svc.stop().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}
