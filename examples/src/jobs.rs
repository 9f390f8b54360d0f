//! Idempotent jobs (seed 002's XTimer): a trigger delivers each job at least once, and the
//! consumers must run each job id once.
//!
//! A consumer adds the job's id to the filter, whose atomic add answers "surely new" or "maybe
//! seen":
//!
//! * **surely new** → run it, without asking the database whether it ran;
//! * **maybe seen** → a duplicate, a false positive, or a job whose earlier delivery died
//!   before it was recorded: confirm with the database (`SELECT … FROM job_runs`) and run it
//!   only if it is not there.
//!
//! **The database's unique key is the source of truth.** Running a job is one transaction that
//! claims the id (`INSERT INTO job_runs … ON CONFLICT DO NOTHING`, `job_id` the primary key) and
//! applies the job's effect (here a row in `job_effects`, which has no unique key, so a second
//! run would show). If the claim finds the id taken, the transaction does nothing. So a job
//! never runs twice, also when:
//! * a consumer dies between "the filter said new" and the commit (the filter remembers the id,
//!   the database does not: the redelivery hears "maybe seen", the confirmation finds nothing,
//!   and it runs — a filter trusted alone would have lost that job);
//! * two consumers get the same id at once (one hears "new", the other "maybe seen"; both may
//!   reach the claim, one wins);
//! * the filter says "new" twice (the in-process filter under a race of two threads).
//!
//! **What the filter saves** is the confirmation query of every job that is new: the seeds'
//! design without a filter asks the database before each job. With it, confirmations fall to
//! the duplicates, the redeliveries and the false positives.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use anyhow::{Context, Result};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::guard::filter::Guard;

/// The jobs' tables.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS job_runs (
    job_id   bigint PRIMARY KEY,
    consumer int    NOT NULL
);
CREATE TABLE IF NOT EXISTS job_effects (
    job_id   bigint NOT NULL,
    consumer int    NOT NULL
);
";

/// The confirmation of a "maybe seen" job.
pub const CONFIRM_SQL: &str = "SELECT 1 FROM job_runs WHERE job_id = $1 /* job confirm */";

/// A run's settings.
#[derive(Clone, Debug)]
pub struct JobsConfig {
    /// Distinct job ids.
    pub jobs: u64,
    /// Extra deliveries of already-delivered ids, as a share of `jobs` (0.3: 30% more
    /// deliveries, each a duplicate).
    pub duplicates: f64,
    /// Share of "surely new" deliveries whose consumer dies before running the job (the job is
    /// delivered again).
    pub crash: f64,
    /// Concurrent consumers.
    pub consumers: usize,
    /// The Redis list the trigger fills (`redis://…`, key).
    pub queue_url: String,
    /// The list's key.
    pub queue_key: String,
    /// Seed of the delivery order and the crashes.
    pub seed: u64,
}

/// Counters of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct JobsReport {
    /// The filter (`off` is the control: every delivery confirmed).
    pub filter: String,
    /// Distinct ids.
    pub jobs: u64,
    /// Deliveries, redeliveries after crashes included.
    pub deliveries: u64,
    /// Deliveries of an id delivered before (excluding redeliveries after crashes).
    pub duplicates: u64,
    /// Consumers that died after "surely new", before the commit.
    pub crashes: u64,
    /// "Surely new" answers.
    pub said_new: u64,
    /// Confirmation queries (every "maybe seen"; every delivery without a filter).
    pub confirmations: u64,
    /// Confirmations that found the job already run.
    pub confirmed_seen: u64,
    /// Ids whose first delivery the filter answered "maybe seen": its false positives.
    pub false_positives: u64,
    /// Claims that found the id taken (concurrent deliveries of one id).
    pub claim_conflicts: u64,
    /// Jobs run (`job_effects` rows).
    pub runs: u64,
    /// Ids run more than once (from the database: must be 0).
    pub ran_twice: u64,
    /// Ids never run (from the database: must be 0).
    pub never_ran: u64,
    /// Confirmations per delivery.
    pub confirmation_share: f64,
    /// Jobs per second.
    pub throughput: f64,
}

#[derive(Default)]
struct Counters {
    deliveries: AtomicU64,
    crashes: AtomicU64,
    said_new: AtomicU64,
    confirmations: AtomicU64,
    confirmed_seen: AtomicU64,
    claim_conflicts: AtomicU64,
}

/// Creates the tables (empty).
pub async fn reset(db: &tokio_postgres::Client) -> Result<()> {
    db.batch_execute(SCHEMA).await?;
    db.batch_execute("TRUNCATE job_runs, job_effects").await?;
    Ok(())
}

/// Fills the queue: every id `1..=jobs` once, plus `duplicates × jobs` repeats of random ids,
/// shuffled. Returns the number of duplicate deliveries.
pub async fn fill_queue(cfg: &JobsConfig) -> Result<u64> {
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let extra = (cfg.jobs as f64 * cfg.duplicates).round() as u64;
    let mut ids: Vec<i64> = (1..=cfg.jobs as i64).collect();
    ids.extend((0..extra).map(|_| rng.random_range(1..=cfg.jobs as i64)));
    ids.shuffle(&mut rng);
    let mut q = redis::Client::open(cfg.queue_url.as_str())?.get_multiplexed_async_connection().await?;
    let _: i64 = redis::cmd("DEL").arg(&cfg.queue_key).query_async(&mut q).await?;
    for chunk in ids.chunks(10_000) {
        let _: i64 = redis::cmd("LPUSH").arg(&cfg.queue_key).arg(chunk).query_async(&mut q).await?;
    }
    Ok(extra)
}

/// Runs `consumers` consumers until the queue is empty, then checks the database.
/// `filter: None` is the control (confirm every delivery).
pub async fn run(
    cfg: &JobsConfig,
    db_url: &str,
    filter: Option<Arc<Guard>>,
    name: &str,
) -> Result<JobsReport> {
    let pg: tokio_postgres::Config = db_url.parse()?;
    let mgr = Manager::from_config(
        pg,
        tokio_postgres::NoTls,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    let pool = Pool::builder(mgr).max_size(cfg.consumers).build()?;
    let duplicates = fill_queue(cfg).await?;
    let counters = Arc::new(Counters::default());
    let queue = redis::Client::open(cfg.queue_url.as_str())?.get_multiplexed_async_connection().await?;
    let t = std::time::Instant::now();
    let mut tasks = Vec::new();
    for c in 0..cfg.consumers {
        let (pool, counters, filter, mut queue) =
            (pool.clone(), counters.clone(), filter.clone(), queue.clone());
        let (key, crash, seed) = (cfg.queue_key.clone(), cfg.crash, cfg.seed);
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ (0xC0FFEE + c as u64));
            let db = pool.get().await.context("database connection")?;
            let confirm = db.prepare_cached(CONFIRM_SQL).await?;
            let mut db = db;
            loop {
                let id: Option<i64> = redis::cmd("RPOP").arg(&key).query_async(&mut queue).await?;
                let Some(id) = id else { break };
                counters.deliveries.fetch_add(1, Relaxed);
                let new = match &filter {
                    Some(f) => f.add(id).await?,
                    None => false,
                };
                if new {
                    counters.said_new.fetch_add(1, Relaxed);
                    if rng.random::<f64>() < crash {
                        // Dies here: the filter has the id, the database does not. The trigger
                        // delivers it again (at least once).
                        counters.crashes.fetch_add(1, Relaxed);
                        let _: i64 = redis::cmd("LPUSH").arg(&key).arg(id).query_async(&mut queue).await?;
                        continue;
                    }
                } else {
                    counters.confirmations.fetch_add(1, Relaxed);
                    if db.query_opt(&confirm, &[&id]).await?.is_some() {
                        counters.confirmed_seen.fetch_add(1, Relaxed);
                        continue;
                    }
                }
                // Claim and effect in one transaction: the primary key decides who runs it.
                let tx = db.transaction().await?;
                let claimed = tx
                    .execute(
                        "INSERT INTO job_runs (job_id, consumer) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        &[&id, &(c as i32)],
                    )
                    .await?;
                if claimed == 0 {
                    counters.claim_conflicts.fetch_add(1, Relaxed);
                    continue;
                }
                tx.execute("INSERT INTO job_effects (job_id, consumer) VALUES ($1, $2)", &[&id, &(c as i32)])
                    .await?;
                tx.commit().await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let elapsed = t.elapsed();
    let db = pool.get().await?;
    let ran_twice: i64 = db
        .query_one(
            "SELECT count(*) FROM (SELECT job_id FROM job_effects GROUP BY job_id HAVING count(*) > 1) d",
            &[],
        )
        .await?
        .get(0);
    let runs: i64 = db.query_one("SELECT count(*) FROM job_effects", &[]).await?.get(0);
    let distinct_run: i64 = db.query_one("SELECT count(DISTINCT job_id) FROM job_effects", &[]).await?.get(0);
    let k = &counters;
    let deliveries = k.deliveries.load(Relaxed);
    let said_new = k.said_new.load(Relaxed);
    let confirmations = k.confirmations.load(Relaxed);
    Ok(JobsReport {
        filter: name.to_owned(),
        jobs: cfg.jobs,
        deliveries,
        duplicates,
        crashes: k.crashes.load(Relaxed),
        said_new,
        confirmations,
        confirmed_seen: k.confirmed_seen.load(Relaxed),
        // Each id hears "new" at most once from an atomic filter, so the ids that never did
        // were answered "maybe seen" on their first delivery (the in-process filter may say
        // "new" twice for one id under a race, which this would under-count).
        false_positives: if filter.is_some() { cfg.jobs.saturating_sub(said_new) } else { 0 },
        claim_conflicts: k.claim_conflicts.load(Relaxed),
        runs: runs as u64,
        ran_twice: ran_twice as u64,
        never_ran: cfg.jobs - distinct_run as u64,
        confirmation_share: confirmations as f64 / deliveries.max(1) as f64,
        throughput: deliveries as f64 / elapsed.as_secs_f64(),
    })
}

impl JobsReport {
    /// One line for humans.
    pub fn render(&self) -> String {
        format!(
            "{}: {} jobs, {} deliveries ({} duplicates, {} redelivered after a crash), {} confirmations ({:.2}% of deliveries; {} found the job run), {} false positives, {} claim conflicts, {} runs, {} ran twice, {} never ran, {:.0} deliveries/s",
            self.filter,
            self.jobs,
            self.deliveries,
            self.duplicates,
            self.crashes,
            self.confirmations,
            100.0 * self.confirmation_share,
            self.confirmed_seen,
            self.false_positives,
            self.claim_conflicts,
            self.runs,
            self.ran_twice,
            self.never_ran,
            self.throughput
        )
    }
}
