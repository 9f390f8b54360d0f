//! Idempotent jobs (seed 002) end to end, in one command: starts PostgreSQL, redis-server with
//! the sift module (the queue, and the BF filter) and sift-server, then runs the same queue of
//! jobs with duplicates and consumer crashes through each filter and the control, and prints a
//! table: every job run once (from the database) and the database confirmations each needed.
//!
//! ```text
//! cargo run --release -p sift-examples --bin jobs-demo -- --jobs 200000 --rounds 3
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Result};
use clap::Parser;
use sift_examples::env::{PgOptions, Postgres, Server};
use sift_examples::guard::{Guard, GuardKind};
use sift_examples::jobs::{reset, run, JobsConfig, JobsReport};
use sift_examples::stats::binomial_upper;

#[derive(Parser)]
#[command(
    version,
    about = "Idempotent jobs: concurrent consumers, duplicates and crashes, each job run once"
)]
struct Cli {
    /// Distinct job ids.
    #[arg(long, default_value_t = 100_000)]
    jobs: u64,
    /// Duplicate deliveries, as a share of the jobs.
    #[arg(long, default_value_t = 0.3)]
    duplicates: f64,
    /// Share of "surely new" deliveries whose consumer dies before running the job.
    #[arg(long, default_value_t = 0.01)]
    crash: f64,
    /// Concurrent consumers.
    #[arg(long, default_value_t = 16)]
    consumers: usize,
    /// The filters' false-positive rate.
    #[arg(long, default_value_t = 0.01)]
    fpr: f64,
    /// Rounds, each running every filter once (order rotated).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Filters: off (confirm every delivery), bf-module, bf-sift, local.
    #[arg(long, value_delimiter = ',', default_value = "off,bf-module,bf-sift,local")]
    filters: Vec<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    match go(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jobs-demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn go(cli: Cli) -> Result<()> {
    eprintln!("starting PostgreSQL, redis-server with the sift module, sift-server ...");
    let pg = Postgres::start(&PgOptions::default())?;
    let redis = Server::redis_with_module()?;
    let sift = Server::sift()?;
    let (db, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    let cfg = JobsConfig {
        jobs: cli.jobs,
        duplicates: cli.duplicates,
        crash: cli.crash,
        consumers: cli.consumers,
        queue_url: redis.url(),
        queue_key: "jobs:queue".into(),
        seed: 1,
    };
    let mut rows: Vec<JobsReport> = Vec::new();
    for round in 0..cli.rounds {
        let n = cli.filters.len();
        for i in 0..n {
            let name = &cli.filters[(i + round) % n];
            let kind = match name.as_str() {
                "off" => None,
                "bf-module" => Some(GuardKind::Bf { url: redis.url(), key: "jobs:seen".into() }),
                "bf-sift" => Some(GuardKind::Bf { url: sift.url(), key: "jobs:seen".into() }),
                "local" => Some(GuardKind::Local),
                other => bail!("unknown filter {other:?} (off, bf-module, bf-sift, local)"),
            };
            reset(&db).await?;
            let filter = match &kind {
                Some(k) => Some(Arc::new(Guard::fresh(k, cli.jobs, cli.fpr).await?)),
                None => None,
            };
            let r =
                run(&JobsConfig { seed: 1 + round as u64, ..cfg.clone() }, &pg.url(), filter, name).await?;
            eprintln!("round {}: {}", round + 1, r.render());
            rows.push(r);
        }
    }
    println!("| filter | deliveries | duplicates | crashes | confirmations (share) | false positives (bound at p={}) | ran twice | never ran | deliveries/s |", cli.fpr);
    println!("|---|---|---|---|---|---|---|---|---|");
    let bound = binomial_upper(cli.jobs, cli.fpr, 1e-6);
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} ({:.2}%) | {} | {} | {} | {:.0} |",
            r.filter,
            r.deliveries,
            r.duplicates,
            r.crashes,
            r.confirmations,
            100.0 * r.confirmation_share,
            if r.filter == "off" { "n/a".into() } else { format!("{} ({bound})", r.false_positives) },
            r.ran_twice,
            r.never_ran,
            r.throughput
        );
    }
    Ok(())
}
