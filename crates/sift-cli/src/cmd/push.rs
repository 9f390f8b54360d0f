//! `sift push`: upload a blocked Bloom filter file into a Redis server's plain strings (no module
//! needed), in the layout of docs/REDIS_LAYOUT.md, where `sift-client` (and any client following
//! that document) uses it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sift::prelude::*;
use sift::BlockedBloom;
use sift_client::transfer::{push_with_progress, split_url, PushOptions};

use crate::input;
use crate::size::human_bytes;

/// Upload a blocked Bloom filter file to Redis: `sift push FILE redis://host:port/name`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift build -o users.sift users.txt && sift push users.sift redis://127.0.0.1:6379/users
  sift push --replace rebuilt.sift redis://cache:6379/2/users     # database 2, replace the live filter
  sift push --cluster users.sift redis://node1:7000/users          # any node of a Redis Cluster

The bits are written under a new generation first (chunked SETRANGE), then published with one
SET NX of the filter's metadata: clients see the old filter or the whole new one, never a part.
A replaced filter's keys expire after --grace seconds. Any Redis-protocol server works (Redis,
Valkey, managed services, sift-server): plain commands only.")]
pub struct Args {
    /// The sift file: a blocked-bloom filter (the default of `sift build`).
    file: PathBuf,
    /// Where: redis://[user:password@]host:port[/db]/name (a name holding `/` is written `%2F`).
    url: String,
    /// Replace the filter of that name if there is one (else refuse).
    #[arg(long)]
    replace: bool,
    /// The server is a node of a Redis Cluster.
    #[arg(long)]
    cluster: bool,
    /// Bytes per sub-bitmap key of a new filter (a multiple of 64).
    #[arg(long, default_value_t = sift_client::DEFAULT_KEY_BYTES)]
    key_bytes: u64,
    /// Seconds a replaced filter's keys remain for requests in flight.
    #[arg(long, default_value_t = 60)]
    grace: u64,
    /// No summary.
    #[arg(short, long)]
    quiet: bool,
}

/// Connects to `server` (one node, or a cluster seed) and runs `f` on the connection.
pub fn with_connection<T>(
    server: &str,
    cluster: bool,
    f: impl FnOnce(&mut dyn Conn) -> sift_client::Result<T>,
) -> Result<T> {
    let timeout = Duration::from_secs(10);
    if cluster {
        let mut c = redis::cluster::ClusterClient::builder(vec![server.to_string()])
            .connection_timeout(timeout)
            .build()
            .and_then(|c| c.get_connection())
            .with_context(|| format!("cannot connect to the cluster at {server}"))?;
        Ok(f(&mut c)?)
    } else {
        let mut c = redis::Client::open(server)
            .and_then(|c| c.get_connection_with_timeout(timeout))
            .with_context(|| format!("cannot connect to {server}"))?;
        Ok(f(&mut c)?)
    }
}

/// The two connection types, behind one object-safe face.
pub trait Conn {
    /// Runs a push.
    fn push(
        &mut self,
        name: &[u8],
        f: &BlockedBloom,
        o: &PushOptions,
        p: &mut (dyn FnMut(u64) + Send),
    ) -> sift_client::Result<sift_client::transfer::PushReport>;
    /// Runs a pull.
    fn pull(
        &mut self,
        name: &[u8],
        p: &mut (dyn FnMut(u64, u64) + Send),
    ) -> sift_client::Result<sift_client::transfer::Pulled>;
}

impl<C: sift_client::Connection + Send> Conn for C {
    fn push(
        &mut self,
        name: &[u8],
        f: &BlockedBloom,
        o: &PushOptions,
        p: &mut (dyn FnMut(u64) + Send),
    ) -> sift_client::Result<sift_client::transfer::PushReport> {
        push_with_progress(self, name, f, o, p)
    }

    fn pull(
        &mut self,
        name: &[u8],
        p: &mut (dyn FnMut(u64, u64) + Send),
    ) -> sift_client::Result<sift_client::transfer::Pulled> {
        sift_client::transfer::pull_with_progress(self, name, &sift_client::Options::new(), p)
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let start = Instant::now();
    let (server, name) = split_url(&a.url)?;
    let bytes = input::read_file(&a.file)?;
    let kind = sift::format::decode(&bytes)
        .map(|raw| raw.kind())
        .with_context(|| format!("{} is not a sift file", a.file.display()))?;
    if kind != Some(sift::format::FilterKind::BlockedBloom) {
        bail!(
            "{} holds a {} filter: only blocked-bloom filters can be pushed (build one with `sift build --family blocked-bloom`)",
            a.file.display(),
            kind.map_or("unknown", |k| k.name())
        );
    }
    let filter =
        BlockedBloom::from_bytes(&bytes).with_context(|| format!("cannot read {}", a.file.display()))?;
    drop(bytes);
    let opts = PushOptions {
        replace: a.replace,
        key_bytes: a.key_bytes,
        grace: Duration::from_secs(a.grace),
        ..PushOptions::default()
    };
    let report = with_connection(&server, a.cluster, |c| c.push(&name, &filter, &opts, &mut |_| {}))
        .with_context(|| format!("cannot push {} to {}", a.file.display(), a.url))?;
    if !a.quiet {
        eprintln!(
            "sift: {} {} to {} ({} keys, {} of {} sent, instance {}, generation {}, revision {}) in {:.1} s",
            if report.replaced { "replaced with" } else { "pushed" },
            a.file.display(),
            a.url,
            report.keys,
            human_bytes(report.bytes_sent as f64),
            human_bytes(filter.size_in_bytes() as f64),
            report.instance,
            report.generation,
            report.rev,
            start.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}
