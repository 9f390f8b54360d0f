//! `sift`: plan, build, query, deduplicate, inspect and convert probabilistic filters.
//!
//! A thin shell over the `sift` library: every subcommand is one file under `cmd/`, parses its
//! flags with clap, and calls the library. Exit codes: 0 success, 1 "not all present" (`query`,
//! like grep), 2 any error. A closed pipe on stdout (`sift dedup | head -1`) is a normal exit.

mod any;
mod clock;
mod cmd;
mod input;
mod outfile;
mod output;
mod rdbfile;
mod redisdump;
mod size;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Have we seen this key before? Probabilistic membership filters from the command line.
#[derive(Parser, Debug)]
#[command(
    name = "sift",
    version,
    about,
    long_about = "Have we seen this key before? Plan, build, query, deduplicate, inspect and convert \
probabilistic membership filters (Bloom family, cuckoo, quotient, xor/binary fuse, GCS), and move \
filters to and from RedisBloom (SCANDUMP chunks), Guava (BloomFilter.writeTo) and Apache Parquet \
(split-block Bloom filter bytes).",
    after_help = "Examples:
  sift plan -n 1e8 -p 0.01                      # bits, memory and k for every family
  sift build -o urls.sift urls.txt              # a blocked Bloom filter of every line
  zcat big.gz | sift build -o seen.sift         # stdin (gzip accepted too): a scalable filter
  sift query urls.sift https://example.com/     # exit 0 if present, 1 if absent
  crawl | sift dedup --state seen.sift > new    # resumable deduplication
  sift inspect urls.sift                        # parameters, fill, FPR now vs planned, checksum
  sift convert dump.scandump.jsonl -o bf.sift   # RedisBloom SCANDUMP chunks to a sift file
  sift inspect dump.rdb                         # the RedisBloom keys of a Redis RDB file
  sift convert dump.rdb --key bf -o bf.sift     # one of them to a sift file
  sift bench -n 1000000                         # compare the families on this machine
  sift push urls.sift redis://127.0.0.1:6379/urls  # into plain Redis strings (no module)
  sift pull redis://127.0.0.1:6379/urls -o urls.sift

Exit status: 0 success; 1 some key absent (query); 2 error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Plan(cmd::plan::Args),
    Build(cmd::build::Args),
    Query(cmd::query::Args),
    Dedup(cmd::dedup::Args),
    Inspect(cmd::inspect::Args),
    Convert(cmd::convert::Args),
    Bench(cmd::bench::Args),
    Push(cmd::push::Args),
    Pull(cmd::pull::Args),
}

/// Whether the error is, somewhere in its chain, a closed pipe on output.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // --help and --version go to stdout with status 0; usage errors to stderr with 2.
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Plan(a) => cmd::plan::run(a),
        Command::Build(a) => cmd::build::run(a),
        Command::Query(a) => cmd::query::run(a),
        Command::Dedup(a) => cmd::dedup::run(a),
        Command::Inspect(a) => cmd::inspect::run(a),
        Command::Convert(a) => cmd::convert::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Push(a) => cmd::push::run(a),
        Command::Pull(a) => cmd::pull::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sift: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
