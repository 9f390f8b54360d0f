//! The guard's load generator (see `sift_examples::load`) against a running `cache-guard`.
//!
//! ```text
//! guard-load --url http://127.0.0.1:8080 --existing 1000000 --operations 100000 \
//!     --pg "host=127.0.0.1 user=app dbname=app"     # to check lookups against pg_stat_statements
//! ```

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use sift_examples::load::{measure, LoadConfig};

#[derive(Parser)]
#[command(
    version,
    about = "Mixed load on the cache guard: Zipf reads of existing ids, writes, and an attack of ids that do not exist"
)]
struct Cli {
    /// The service.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Existing ids are 1..=N.
    #[arg(long)]
    existing: u64,
    /// Operations in all.
    #[arg(long, default_value_t = 100_000)]
    operations: u64,
    /// Concurrent connections.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Weights of legitimate reads, writes and attack reads.
    #[arg(long, default_value = "0.80,0.05,0.15")]
    mix: String,
    /// Zipf exponent of legitimate reads.
    #[arg(long, default_value_t = 1.0)]
    zipf: f64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// PostgreSQL, to read pg_stat_statements before and after.
    #[arg(long)]
    pg: Option<String>,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("guard-load: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    let w: Vec<f64> = cli
        .mix
        .split(',')
        .map(|x| x.trim().parse::<f64>())
        .collect::<Result<_, _>>()
        .context("--mix: three numbers, e.g. 0.8,0.05,0.15")?;
    let [legit, write, attack] = w[..] else {
        anyhow::bail!("--mix takes three weights: legit,write,attack")
    };
    let mut cfg = LoadConfig::new(cli.url, cli.existing, cli.operations);
    (cfg.legit, cfg.write, cfg.attack) = (legit, write, attack);
    cfg.concurrency = cli.concurrency;
    cfg.zipf = cli.zipf;
    cfg.seed = cli.seed;
    let db = match &cli.pg {
        Some(url) => {
            let (c, conn) =
                tokio_postgres::connect(url, tokio_postgres::NoTls).await.context("connect to PostgreSQL")?;
            tokio::spawn(conn);
            Some(c)
        }
        None => None,
    };
    let (summary, _) = measure(&cfg, db.as_ref()).await?;
    if cli.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", summary.render());
    }
    Ok(())
}
