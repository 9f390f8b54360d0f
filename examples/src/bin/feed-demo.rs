//! "Already shown" per user (seed 004) in one command: for each design, a fresh server (plain
//! redis-server for the sets and for sift-client's windowed filters, redis-server with the sift
//! module or sift-server for the `BF` filters and the native aging filters, `SF.* KIND aging`),
//! `days` days of items for every user, then memory per user and the rate of "which of these
//! 100 candidates has this user seen?" queries.
//!
//! ```text
//! cargo run --release -p sift-examples --bin feed-demo -- --users 1000000 --per-day 40
//! ```

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Parser;
use sift_examples::env::Server;
use sift_examples::feed::{measure, Design, FeedConfig, FeedReport};

#[derive(Parser)]
#[command(version, about = "Per-user 'already shown' filters against one Redis set per user")]
struct Cli {
    /// Users.
    #[arg(long, default_value_t = 100_000)]
    users: u64,
    /// Items shown to a user a day.
    #[arg(long, default_value_t = 40)]
    per_day: u32,
    /// Days loaded (the window is 7 days).
    #[arg(long, default_value_t = 7)]
    days: u32,
    /// Candidates per query, and how many of them the user has seen.
    #[arg(long, default_value_t = 100)]
    candidates: usize,
    /// Seen candidates per query.
    #[arg(long, default_value_t = 30)]
    seen: usize,
    /// Queries measured.
    #[arg(long, default_value_t = 100_000)]
    queries: u64,
    /// Concurrent queriers (each waits for its answer).
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// The filters' false-positive rate.
    #[arg(long, default_value_t = 0.01)]
    fpr: f64,
    /// Designs: set, bf-module, bf-sift, window-redis (sift-client's windowed filter on plain
    /// redis-server), window-sift (the same on sift-server), sf-module, sf-sift (the native aging
    /// filter, `KIND aging TTL 604800`, on redis-server with the module and on sift-server).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "set,bf-module,bf-sift,window-redis,sf-module,sf-sift"
    )]
    designs: Vec<String>,
    /// Rounds (designs alternate).
    #[arg(long, default_value_t = 1)]
    rounds: usize,
}

#[tokio::main]
async fn main() -> ExitCode {
    match go(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("feed-demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn go(cli: Cli) -> Result<()> {
    let cfg = FeedConfig {
        users: cli.users,
        per_day: cli.per_day,
        days: cli.days,
        candidates: cli.candidates,
        seen_candidates: cli.seen,
        fpr: cli.fpr,
        batch: 500,
        seed: 1,
    };
    let mut rows: Vec<(String, FeedReport)> = Vec::new();
    for round in 0..cli.rounds {
        let n = cli.designs.len();
        for i in 0..n {
            let name = &cli.designs[(i + round) % n];
            let (design, server) = match name.as_str() {
                "set" => (Design::Set, Server::redis(&[])?),
                "bf-module" => (Design::Bf, Server::redis_with_module()?),
                "bf-sift" => (Design::Bf, Server::sift()?),
                "window-redis" => (Design::window(), Server::redis(&[])?),
                "window-sift" => (Design::window(), Server::sift()?),
                "sf-module" => (Design::sf(), Server::redis_with_module()?),
                "sf-sift" => (Design::sf(), Server::sift()?),
                other => bail!("unknown design {other:?}"),
            };
            let mut conn = redis::Client::open(server.url())?.get_multiplexed_async_connection().await?;
            match measure(&design, &cfg, &mut conn, cli.queries, cli.concurrency).await {
                Ok(r) => {
                    eprintln!("round {} {name}: {r:?}", round + 1);
                    rows.push((name.clone(), r));
                }
                Err(e) => eprintln!("round {} {name}: not measured: {e:#}", round + 1),
            }
        }
    }
    println!(
        "| design | users × items | load s | used_memory per user | MEMORY USAGE per user | queries/s ({} candidates) | false negatives | false positives | old items back after the window |",
        cli.candidates
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (name, r) in &rows {
        println!(
            "| {name} | {} × {} | {:.1} | {:.0} B | {:.0} B | {:.0} | {} of {} | {} of {} ({:.3}%) | {} of {} ({:.2}%) |",
            r.users,
            r.items_per_user,
            r.load_s,
            r.bytes_per_user,
            r.memory_usage_per_key,
            r.query.per_second,
            r.query.false_negatives,
            r.query.seen_asked,
            r.query.false_positives,
            r.query.fresh_asked,
            100.0 * r.query.false_positives as f64 / r.query.fresh_asked.max(1) as f64,
            r.after_window.false_negatives,
            r.after_window.seen_asked,
            100.0 * r.after_window.false_negatives as f64 / r.after_window.seen_asked.max(1) as f64
        );
    }
    Ok(())
}
