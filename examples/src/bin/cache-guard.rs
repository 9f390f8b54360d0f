//! The cache-penetration guard service (see `sift_examples::guard`), and the key dump for an
//! offline filter build.
//!
//! ```text
//! cache-guard serve --db "host=127.0.0.1 user=app dbname=app" --cache redis://127.0.0.1:6379/ \
//!     --guard bf --filter redis://127.0.0.1:6380/          # BF.* on sift-server (or the module)
//! cache-guard dump-keys --db … -o keys.txt                  # ids + keys.txt.snapshot
//! sift build --family redisbloom-bf -n 15000000 -o items.sift keys.txt
//! cache-guard serve … --filter-file items.sift --snapshot-file keys.txt.snapshot
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use sift_examples::guard::{self, bootstrap, App, Bootstrap, Config, GuardKind};

#[derive(Parser)]
#[command(
    version,
    about = "An HTTP service in front of a Redis cache and PostgreSQL, guarded by a filter of the table's ids"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum Which {
    /// No filter (the control: every miss reaches the database).
    Off,
    /// A filter in this process.
    Local,
    /// A BF key on sift-server or on redis-server with the sift module (--filter URL).
    Bf,
    /// sift's blocked Bloom filter in plain Redis strings (sift-client): any Redis-protocol
    /// server, no module (--filter URL, --key names it).
    Client,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve GET /items/{id}, POST /items, GET /stats, POST /admin/rebuild.
    Serve {
        /// PostgreSQL connection string.
        #[arg(long)]
        db: String,
        /// The cache.
        #[arg(long, default_value = "redis://127.0.0.1:6379/")]
        cache: String,
        /// The filter.
        #[arg(long, value_enum, default_value = "local")]
        guard: Which,
        /// The filter's server (--guard bf, --guard client).
        #[arg(long)]
        filter: Option<String>,
        /// The filter's key (--guard bf) or name (--guard client).
        #[arg(long, default_value = "items:ids")]
        key: String,
        /// The filter's false-positive rate.
        #[arg(long, default_value_t = 0.01)]
        fpr: f64,
        /// Capacity = the rows at start × this.
        #[arg(long, default_value_t = 1.5)]
        headroom: f64,
        /// A filter file built by `sift build` from `dump-keys`' output, instead of streaming
        /// the table (needs --snapshot-file).
        #[arg(long, requires = "snapshot_file")]
        filter_file: Option<PathBuf>,
        /// The snapshot `dump-keys` wrote next to the keys.
        #[arg(long)]
        snapshot_file: Option<PathBuf>,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
        /// Database connections.
        #[arg(long, default_value_t = 16)]
        pool: usize,
        /// TTL of the null marker cached after a database miss, ms.
        #[arg(long, default_value_t = 5000)]
        null_ttl_ms: u64,
    },
    /// Write the table's ids, one per line, and the snapshot they were read in (OUTPUT.snapshot).
    DumpKeys {
        /// PostgreSQL connection string.
        #[arg(long)]
        db: String,
        /// The keys file.
        #[arg(short, long)]
        output: PathBuf,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cache-guard: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::DumpKeys { db, output } => {
            let (mut client, conn) =
                tokio_postgres::connect(&db, tokio_postgres::NoTls).await.context("connect to PostgreSQL")?;
            tokio::spawn(conn);
            let file =
                std::fs::File::create(&output).with_context(|| format!("create {}", output.display()))?;
            let mut out = std::io::BufWriter::new(file);
            let fill = bootstrap::dump_keys(&mut client, &mut out).await?;
            let snap = PathBuf::from(format!("{}.snapshot", output.display()));
            std::fs::write(&snap, format!("{}\n", fill.snapshot))
                .with_context(|| format!("write {}", snap.display()))?;
            eprintln!(
                "{} ids to {}, snapshot {} to {}",
                fill.rows,
                output.display(),
                fill.snapshot,
                snap.display()
            );
            Ok(())
        }
        Cmd::Serve {
            db,
            cache,
            guard,
            filter,
            key,
            fpr,
            headroom,
            filter_file,
            snapshot_file,
            listen,
            pool,
            null_ttl_ms,
        } => {
            let kind = match guard {
                Which::Off => GuardKind::Off,
                Which::Local => GuardKind::Local,
                Which::Bf => GuardKind::Bf {
                    url: filter.context("--guard bf needs --filter redis://host:port/")?,
                    key,
                },
                Which::Client => GuardKind::Client {
                    url: filter.context("--guard client needs --filter redis://host:port/")?,
                    name: key,
                },
            };
            let mut cfg = Config::new(db, cache, kind);
            cfg.fpr = fpr;
            cfg.headroom = headroom;
            cfg.pool_size = pool;
            cfg.null_ttl_ms = null_ttl_ms;
            if let (Some(path), Some(snap)) = (filter_file, snapshot_file) {
                cfg.bootstrap = Bootstrap::File { path, snapshot: bootstrap::read_snapshot(&snap)? };
            }
            let app = App::start(cfg).await?;
            let listener = tokio::net::TcpListener::bind(&listen)
                .await
                .with_context(|| format!("listen on {listen}"))?;
            // The first line names the address (the demos read it: --listen may say port 0).
            println!("listening on http://{}", listener.local_addr()?);
            guard::serve(app, listener, async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
        }
    }
}
