//! `sift-server`: flags and config file named as redis-server's, logging to stderr, then the
//! server. With `--port 0` a free port is chosen; the bound address is printed on stdout as
//! `sift-server listening on <ip>:<port>` so scripts and tests can find it, followed, with
//! `--metrics-port`, by `sift-server metrics on <ip>:<port>`.
//!
//! `sift-server --check-dir DIR [--repair]` is the salvage tool instead: it reports the state of
//! a data directory's files (see `persist::check`) and exits 0 when the server would start on it.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::Parser;
use sift_server::config::Params;
use sift_server::frame::split_args;
use sift_server::persist::disk::{Disk, DiskOptions};
use sift_server::server::Server;

/// A Redis-protocol server with RedisBloom's commands (BF.*, CF.*, CMS.*, TOPK.*, TDIGEST.*), sift's
/// own filters (SF.*) and durable local storage.
///
/// Settings come from the optional config file (redis.conf syntax: `name value` per line),
/// then from these flags, which win.
#[derive(Debug, Parser)]
#[command(name = "sift-server", version)]
struct Args {
    /// Config file in redis.conf syntax.
    config: Option<PathBuf>,
    /// TCP port; 0 picks a free one.
    #[arg(long)]
    port: Option<u16>,
    /// Address to listen on (the metrics endpoint too).
    #[arg(long)]
    bind: Option<String>,
    /// Serve Prometheus metrics (OpenMetrics text) at http://BIND:PORT/metrics; 0 picks a free
    /// port. Off when absent.
    #[arg(long = "metrics-port", value_name = "PORT")]
    metrics_port: Option<u16>,
    /// Data directory: the snapshot, the append-only log segments, MANIFEST [default: ./sift-data].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Append-only log of every write: yes (default) or no (snapshots only: SAVE, BGSAVE,
    /// `save` rules, shutdown).
    #[arg(long)]
    appendonly: Option<String>,
    /// Start even when the end of the log was provably cut off (a segment shorter than it was
    /// on disk), loading what is left: yes, or no (default: refuse, naming what is missing).
    #[arg(long = "aof-load-truncated", value_parser = ["yes", "no"])]
    aof_load_truncated: Option<String>,
    /// When the log is fsynced: always (default; once per pipelined batch, before its replies),
    /// everysec, or no (left to the OS). A killed process loses nothing in any mode; a machine
    /// crash can lose the last second (everysec) or more (no).
    #[arg(long, value_parser = ["always", "everysec", "no"])]
    appendfsync: Option<String>,
    /// Rewrite the log (snapshot + fresh log) when it reaches this % of the last snapshot's
    /// size [default: 100; 0 disables].
    #[arg(long = "auto-aof-rewrite-percentage")]
    auto_aof_rewrite_percentage: Option<String>,
    /// ... and at least this size [default: 64mb].
    #[arg(long = "auto-aof-rewrite-min-size")]
    auto_aof_rewrite_min_size: Option<String>,
    /// Password clients must give with AUTH.
    #[arg(long)]
    requirepass: Option<String>,
    /// Memory limit (bytes, or with k/kb/m/mb/g/gb).
    #[arg(long)]
    maxmemory: Option<String>,
    /// Most simultaneous clients.
    #[arg(long)]
    maxclients: Option<String>,
    /// A Lua script (EVAL) running longer than this many ms is aborted [default: 5000; 0 = never].
    #[arg(long = "busy-reply-threshold", visible_alias = "lua-time-limit")]
    busy_reply_threshold: Option<String>,
    /// Memory cap of the Lua VM (bytes, or with k/kb/m/mb/g/gb) [default: 256mb; 0 = none].
    #[arg(long = "lua-maxmemory")]
    lua_maxmemory: Option<String>,
    /// Default Bloom error rate.
    #[arg(long = "bf-error-rate")]
    bf_error_rate: Option<String>,
    /// Default Bloom capacity.
    #[arg(long = "bf-initial-size")]
    bf_initial_size: Option<String>,
    /// Default Bloom expansion (0 = non-scaling).
    #[arg(long = "bf-expansion-factor")]
    bf_expansion_factor: Option<String>,
    /// Default cuckoo bucket size.
    #[arg(long = "cf-bucket-size")]
    cf_bucket_size: Option<String>,
    /// Default cuckoo capacity.
    #[arg(long = "cf-initial-size")]
    cf_initial_size: Option<String>,
    /// Default cuckoo kick-out limit.
    #[arg(long = "cf-max-iterations")]
    cf_max_iterations: Option<String>,
    /// Default cuckoo expansion.
    #[arg(long = "cf-expansion-factor")]
    cf_expansion_factor: Option<String>,
    /// Most cuckoo sub-filters.
    #[arg(long = "cf-max-expansions")]
    cf_max_expansions: Option<String>,
    /// Do not serve: report the state of every file of data directory DIR (snapshot, log
    /// segments: records, where damage is) and whether the server would start on it; exit 0
    /// if it would, 1 if not. Writes nothing unless --repair is given.
    #[arg(long = "check-dir", value_name = "DIR")]
    check_dir: Option<PathBuf>,
    /// With --check-dir: keep what can be proven intact (the snapshot and the log up to the
    /// first damaged or missing record); damaged files are copied to NAME.damaged and later
    /// segments renamed NAME.dropped first, never deleted. Refused while a server holds DIR.
    #[arg(long, requires = "check_dir")]
    repair: bool,
}

/// Applies a redis.conf-style file: one `name value...` per line, `#` comments.
fn apply_file(params: &mut Params, path: &PathBuf) -> anyhow::Result<()> {
    let text = std::fs::read(path).with_context(|| format!("reading config file {}", path.display()))?;
    for (n, line) in text.split(|&b| b == b'\n').enumerate() {
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() || trimmed.starts_with(b"#") {
            continue;
        }
        let args = split_args(trimmed).map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), n + 1))?;
        let Some((name, values)) = args.split_first() else { continue };
        let name = String::from_utf8_lossy(name);
        // `save 3600 1 300 100` and `bind a b`: values joined as redis-server shows them.
        let joined =
            values.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect::<Vec<_>>().join(" ");
        let value = if name.eq_ignore_ascii_case("bind") {
            values.first().map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default()
        } else {
            joined
        };
        if let Err(e) = params.set(&name, value.as_bytes(), true) {
            bail!("{}:{}: {}", path.display(), n + 1, e.message());
        }
    }
    Ok(())
}

fn build_params(args: &Args) -> anyhow::Result<Params> {
    let mut params = Params::default();
    if let Some(path) = &args.config {
        apply_file(&mut params, path)?;
    }
    let flags: [(&str, Option<String>); 22] = [
        ("auto-aof-rewrite-percentage", args.auto_aof_rewrite_percentage.clone()),
        ("auto-aof-rewrite-min-size", args.auto_aof_rewrite_min_size.clone()),
        ("port", args.port.map(|p| p.to_string())),
        ("bind", args.bind.clone()),
        ("metrics-port", args.metrics_port.map(|p| p.to_string())),
        ("dir", args.dir.as_ref().map(|d| d.display().to_string())),
        ("appendonly", args.appendonly.clone()),
        ("appendfsync", args.appendfsync.clone()),
        ("aof-load-truncated", args.aof_load_truncated.clone()),
        ("requirepass", args.requirepass.clone()),
        ("maxmemory", args.maxmemory.clone()),
        ("maxclients", args.maxclients.clone()),
        ("busy-reply-threshold", args.busy_reply_threshold.clone()),
        ("lua-maxmemory", args.lua_maxmemory.clone()),
        ("bf-error-rate", args.bf_error_rate.clone()),
        ("bf-initial-size", args.bf_initial_size.clone()),
        ("bf-expansion-factor", args.bf_expansion_factor.clone()),
        ("cf-bucket-size", args.cf_bucket_size.clone()),
        ("cf-initial-size", args.cf_initial_size.clone()),
        ("cf-max-iterations", args.cf_max_iterations.clone()),
        ("cf-expansion-factor", args.cf_expansion_factor.clone()),
        ("cf-max-expansions", args.cf_max_expansions.clone()),
    ];
    for (name, value) in flags {
        if let Some(v) = value {
            params.set(name, v.as_bytes(), true).map_err(|e| anyhow::anyhow!("--{name}: {}", e.message()))?;
        }
    }
    Ok(params)
}

/// Installs the SIGINT and SIGTERM handlers now (before the server says it is listening, so a
/// signal sent right after that line is handled, not fatal) and returns the channel that
/// names each one received.
fn stop_signals() -> tokio::sync::mpsc::UnboundedReceiver<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    match signal(SignalKind::interrupt()).and_then(|i| Ok((i, signal(SignalKind::terminate())?))) {
        Ok((mut int, mut term)) => {
            tokio::spawn(async move {
                loop {
                    let name = tokio::select! {
                        _ = int.recv() => "SIGINT",
                        _ = term.recv() => "SIGTERM",
                    };
                    if tx.send(name).is_err() {
                        break;
                    }
                }
            });
        }
        Err(e) => tracing::warn!("cannot listen for SIGINT / SIGTERM: {e}"),
    }
    rx
}

/// `--check-dir`: the report on stdout; Ok(true) when the server would start.
fn check_dir(args: &Args, dir: &std::path::Path) -> anyhow::Result<bool> {
    let params = build_params(args)?;
    let load_truncated = params.get("aof-load-truncated") == Some("yes");
    let mut out = std::io::stdout().lock();
    let starts = sift_server::persist::check::check_dir(dir, args.repair, load_truncated, &mut out)
        .with_context(|| format!("checking {}", dir.display()))?;
    out.flush()?;
    Ok(starts)
}

fn run(args: Args) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let params = build_params(&args)?;
    sift_server::server::tune_allocator();
    // Scripts run on the workers (block_in_place): converting, encoding and freeing a reply
    // nested to the depth limit (1000) recurses, and an unoptimised build overflowed tokio's
    // default 2 MiB there (`local t = {} t[1] = t return t` aborted the process). Reserved
    // address space; only the pages a thread touches are used.
    let runtime =
        tokio::runtime::Builder::new_multi_thread().thread_stack_size(8 << 20).enable_all().build()?;
    runtime.block_on(async {
        let opts = DiskOptions::from_params(&params);
        tracing::info!(
            dir = %opts.dir.display(),
            appendonly = opts.appendonly,
            appendfsync = ?opts.fsync,
            "persistence"
        );
        let server = Server::bind(params, Box::new(Disk::new(opts))).await.context("starting the server")?;
        let stop = stop_signals();
        let addr = server.local_addr()?;
        tracing::info!("listening on {addr}");
        let mut out = std::io::stdout().lock();
        // A closed stdout must not stop the server.
        let _ = writeln!(out, "sift-server listening on {addr}");
        if let Some(metrics) = server.metrics_addr() {
            tracing::info!("metrics on http://{metrics}/metrics");
            let _ = writeln!(out, "sift-server metrics on {metrics}");
        }
        let _ = out.flush();
        drop(out);
        server.run(stop).await?;
        anyhow::Ok(())
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(dir) = args.check_dir.clone() {
        return match check_dir(&args, &dir) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("sift-server: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sift-server: {e:#}");
            ExitCode::FAILURE
        }
    }
}
