//! `sift pull`: download a filter kept in Redis strings (`sift push`, `sift-client`) into a sift
//! file that `sift query`, `sift inspect` and the library read.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use sift::prelude::*;
use sift_client::transfer::split_url;

use super::push::with_connection;
use crate::outfile::OutFile;
use crate::size::human_bytes;

/// Download a filter from Redis into a sift file: `sift pull redis://host:port/name -o FILE`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift pull redis://127.0.0.1:6379/users -o users.sift && sift query users.sift alice
  sift pull --cluster redis://node1:7000/users -o users.sift

The generation taking the writes is downloaded (a static filter's; a filter in the middle of a
migration also has older generations, which are named, not downloaded). Bits are only ever set,
so the file holds every item added before the pull began, even with writers active.")]
pub struct Args {
    /// Where: redis://[user:password@]host:port[/db]/name.
    url: String,
    /// The sift file to write: a regular file is replaced atomically (temporary file, fsync,
    /// rename); `-` is standard output; a device or FIFO is written in place.
    #[arg(short, long)]
    output: PathBuf,
    /// The server is a node of a Redis Cluster.
    #[arg(long)]
    cluster: bool,
    /// No summary.
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let start = Instant::now();
    let (server, name) = split_url(&a.url)?;
    // The output path is checked before the download, which may be long.
    let output = OutFile::check(&a.output, &[])?;
    let pulled = with_connection(&server, a.cluster, |c| c.pull(&name, &mut |_, _| {}))
        .with_context(|| format!("cannot pull {}", a.url))?;
    let f = &pulled.filter;
    output.write(|w| f.write_to(w))?;
    if !a.quiet {
        eprintln!(
            "sift: pulled {} (generation {}: {} blocks, k = {}, about {} items, FPR now {:.3e}) into {} ({}) in {:.1} s",
            a.url,
            pulled.generation,
            f.num_blocks(),
            f.num_hashes(),
            f.len(),
            f.current_fpr(),
            output.display(),
            human_bytes(f.size_in_bytes() as f64),
            start.elapsed().as_secs_f64()
        );
        if pulled.other_generations > 0 {
            eprintln!(
                "sift: {} older generation(s) of this filter are still read by its clients and were not pulled",
                pulled.other_generations
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
