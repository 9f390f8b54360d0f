//! The cache-penetration guard end to end, in one command: starts PostgreSQL, redis-server with
//! the sift module (the cache, and the BF filter's home), sift-server and a plain redis-server
//! (sift-client's filter, no module), fills the table, then
//! for each guard starts `cache-guard` as its own process, warms the cache, runs `guard-load`'s
//! mixed load and prints one table row; guards alternate round by round.
//!
//! ```text
//! cargo run --release -p sift-examples --bin guard-demo                     # 1M rows
//! cargo run --release -p sift-examples --bin guard-demo -- --rows 10000000 --rounds 3
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use sift_examples::env::{example_bin, PgOptions, Postgres, Server};
use sift_examples::guard::bootstrap;
use sift_examples::load::{measure, LoadConfig, Summary};
use sift_examples::stats::binomial_upper;

#[derive(Parser)]
#[command(
    version,
    about = "The cache-penetration guard on real PostgreSQL, Redis and sift-server, measured with and without the filter"
)]
struct Cli {
    /// Rows in the table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Measured operations per run.
    #[arg(long, default_value_t = 50_000)]
    operations: u64,
    /// Legitimate reads before each run, to warm the cache (not measured).
    #[arg(long, default_value_t = 20_000)]
    warmup: u64,
    /// Concurrent connections of the load.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Weights of legitimate reads, writes and attack reads.
    #[arg(long, default_value = "0.80,0.05,0.15")]
    mix: String,
    /// The filters' false-positive rate.
    #[arg(long, default_value_t = 0.01)]
    fpr: f64,
    /// Rounds; each runs every guard once, in an order rotated by one each round.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Guards to run: off (the control), local, bf-module (BF on redis-server with the sift
    /// module, the cache's own server), bf-sift (BF on sift-server), client-redis (sift-client's
    /// filter in plain strings on a redis-server without the module), client-sift (the same on
    /// sift-server).
    #[arg(long, value_delimiter = ',', default_value = "off,local,bf-module,bf-sift,client-redis")]
    guards: Vec<String>,
    /// Bootstrap the filter from a `sift build` file over a key dump instead of streaming the
    /// table (measures both paths' start-up time).
    #[arg(long)]
    from_file: bool,
    /// Write every run's summary as JSON lines to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// PostgreSQL with fsync and synchronous commits off (faster writes; nothing here needs
    /// the data after the run).
    #[arg(long)]
    no_durability: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("guard-demo: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A `cache-guard serve` process, killed on drop.
struct Service {
    child: Child,
    url: String,
    start_ms: u128,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_service(args: &[String]) -> Result<Service> {
    let t = Instant::now();
    let mut child = Command::new(example_bin("cache-guard")?)
        .arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawn cache-guard")?;
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line)?;
    let Some(url) = line.trim().strip_prefix("listening on ") else {
        let _ = child.kill();
        bail!("cache-guard did not start (it said {line:?})");
    };
    Ok(Service { url: url.to_owned(), start_ms: t.elapsed().as_millis(), child })
}

async fn flush(url: &str) -> Result<()> {
    let mut c = redis::Client::open(url)?.get_multiplexed_async_connection().await?;
    // Each guard starts on empty servers: a cache warmed by another guard would flatter it,
    // and the BF key and sift-client's filter of the same name cannot share a server.
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await?;
    Ok(())
}

async fn run(cli: Cli) -> Result<()> {
    let w: Vec<f64> =
        cli.mix.split(',').map(|x| x.trim().parse::<f64>()).collect::<Result<_, _>>().context("--mix")?;
    let [legit, write, attack] = w[..] else { bail!("--mix takes three weights: legit,write,attack") };
    eprintln!("starting PostgreSQL, redis-server with the sift module, sift-server, plain redis-server ...");
    let pg = Postgres::start(&PgOptions { no_durability: cli.no_durability, ..Default::default() })?;
    let redis = Server::redis_with_module()?;
    let sift = Server::sift()?;
    // sift-client's home: a redis-server with no module loaded.
    let plain = Server::redis(&[])?;
    let (db, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    bootstrap::create_schema(&db).await?;
    let t = Instant::now();
    bootstrap::seed_items(&db, cli.rows).await?;
    eprintln!("{} rows inserted in {:.1} s", cli.rows, t.elapsed().as_secs_f64());

    let mut file_args = Vec::new();
    // Removed on drop, also when the demo stops on an error.
    let temp = sift_examples::env::temp_dir("guard-demo")?;
    let dir = temp.path();
    if cli.from_file {
        let keys = dir.join("keys.txt");
        let (mut c2, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        let t = Instant::now();
        let fill = {
            let mut out = std::io::BufWriter::new(std::fs::File::create(&keys)?);
            bootstrap::dump_keys(&mut c2, &mut out).await?
        };
        std::fs::write(dir.join("keys.txt.snapshot"), &fill.snapshot)?;
        eprintln!("dump-keys: {} ids in {:.1} s", fill.rows, t.elapsed().as_secs_f64());
        let capacity = ((cli.rows as f64) * 1.5).ceil() as u64;
        for family in ["blocked-bloom", "redisbloom-bf"] {
            let t = Instant::now();
            let st = Command::new(sift_examples::env::sift_cli_bin()?)
                .args([
                    "build",
                    "-q",
                    "--family",
                    family,
                    "-n",
                    &capacity.to_string(),
                    "-p",
                    &cli.fpr.to_string(),
                    "-o",
                ])
                .arg(dir.join(format!("{family}.sift")))
                .arg(&keys)
                .status()?;
            if !st.success() {
                bail!("sift build --family {family} failed");
            }
            eprintln!("sift build --family {family}: {:.1} s", t.elapsed().as_secs_f64());
        }
        file_args = vec![dir.display().to_string()];
    }

    let mut rows: Vec<(Summary, u128)> = Vec::new();
    let mut json = match &cli.json {
        Some(p) => Some(std::fs::File::create(p).with_context(|| format!("create {}", p.display()))?),
        None => None,
    };
    for round in 0..cli.rounds {
        let n = cli.guards.len();
        for i in 0..n {
            let guard = &cli.guards[(i + round) % n];
            let mut args = vec![
                "--db".to_string(),
                pg.url(),
                "--cache".into(),
                redis.url(),
                "--fpr".into(),
                cli.fpr.to_string(),
            ];
            let family = match guard.as_str() {
                "off" => {
                    args.extend(["--guard".into(), "off".into()]);
                    None
                }
                "local" => {
                    args.extend(["--guard".into(), "local".into()]);
                    Some("blocked-bloom")
                }
                "bf-module" => {
                    args.extend(["--guard".into(), "bf".into(), "--filter".into(), redis.url()]);
                    Some("redisbloom-bf")
                }
                "bf-sift" => {
                    args.extend(["--guard".into(), "bf".into(), "--filter".into(), sift.url()]);
                    Some("redisbloom-bf")
                }
                "client-redis" => {
                    args.extend(["--guard".into(), "client".into(), "--filter".into(), plain.url()]);
                    Some("blocked-bloom")
                }
                "client-sift" => {
                    args.extend(["--guard".into(), "client".into(), "--filter".into(), sift.url()]);
                    Some("blocked-bloom")
                }
                other => bail!(
                    "unknown guard {other:?} (off, local, bf-module, bf-sift, client-redis, client-sift)"
                ),
            };
            if let (Some(dir), Some(family)) = (file_args.first(), family) {
                args.extend([
                    "--filter-file".into(),
                    format!("{dir}/{family}.sift"),
                    "--snapshot-file".into(),
                    format!("{dir}/keys.txt.snapshot"),
                ]);
            }
            for server in [&redis, &sift, &plain] {
                flush(&server.url()).await?;
            }
            let svc = start_service(&args)?;
            let mut warm = LoadConfig::new(svc.url.clone(), cli.rows, cli.warmup);
            (warm.legit, warm.write, warm.attack) = (1.0, 0.0, 0.0);
            warm.concurrency = cli.concurrency;
            warm.seed = 1000 + round as u64;
            sift_examples::load::run(&warm).await?;
            let mut load = LoadConfig::new(svc.url.clone(), cli.rows, cli.operations);
            (load.legit, load.write, load.attack) = (legit, write, attack);
            load.concurrency = cli.concurrency;
            load.seed = 1 + round as u64;
            let (s, _) = measure(&load, Some(&db)).await?;
            eprintln!("round {} guard {guard} (started in {} ms):\n{}", round + 1, svc.start_ms, s.render());
            if let Some(f) = json.as_mut() {
                use std::io::Write;
                let mut v = serde_json::to_value(&s)?;
                v["name"] = guard.clone().into();
                v["round"] = (round + 1).into();
                v["start_ms"] = (svc.start_ms as u64).into();
                writeln!(f, "{v}")?;
            }
            let mut s = s;
            s.guard = guard.clone();
            rows.push((s, svc.start_ms));
        }
    }
    drop(temp);

    println!("| guard | start ms ({}) | ops/s | legit cache hits p50 / p99 ms | attack p50 ms | attack reaching the DB | bound at p={} | DB lookups (service / pg_stat_statements) | wrong answers |", if cli.from_file { "file" } else { "stream" }, cli.fpr);
    println!("|---|---|---|---|---|---|---|---|---|");
    for (s, start_ms) in &rows {
        let bound = binomial_upper(s.attack_requests, cli.fpr, 1e-6);
        let wrong: u64 = s.classes.values().map(|c| c.wrong + c.errors).sum();
        println!(
            "| {} | {} | {:.0} | {:.3} / {:.3} | {:.3} | {} of {} ({:.2}%) | {} | {} / {} | {} |",
            s.guard,
            start_ms,
            s.throughput,
            s.legit_hit_p50_ms,
            s.legit_hit_p99_ms,
            s.classes["attack"].p50_ms,
            s.attack_db_lookups,
            s.attack_requests,
            100.0 * s.attack_db_share,
            if s.guard == "off" { "n/a".to_string() } else { bound.to_string() },
            s.db_lookups,
            s.pg_lookup_calls.map_or("-".into(), |v| v.to_string()),
            wrong
        );
    }
    Ok(())
}
