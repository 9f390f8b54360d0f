//! `sift build`: a filter of every key of the input, written atomically to a sift file.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use sift::prelude::*;
use sift::BlockedBloom;

use super::FamilyArg;
use crate::any::{AnyFilter, AnyFilterExt};
use crate::input::{self, Source, Split};
use crate::outfile::OutFile;
use crate::output::pct;
use crate::size::{human_bytes, parse_count, parse_fpr};

/// The default `-p`.
const DEFAULT_FPR: f64 = 0.01;

/// Build a filter from keys, one per line (or NUL-separated), from files or stdin.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift build -o urls.sift urls.txt                  # counts the lines first, then builds
  sift build -o urls.sift -n 1e8 -p 0.001 urls.txt.gz
  zcat urls.gz | sift build -o seen.sift            # stdin, unknown count: scalable-bloom
  find . -print0 | sift build -0 -o paths.sift -n 1M
  sift build --family binary-fuse8 -o dict.sift words.txt
  sift build --family redisbloom-bf -n 1e6 -o bf.sift keys.txt && sift convert bf.sift --to redisbloom -o bf.jsonl

A fixed-size filter given more than twice the keys of -n is not written (it would not have the
planned rate; --force writes it). Gzip input (files or stdin) is detected by its magic bytes. A trailing \\r is removed from each line;
empty lines are skipped; lines longer than --max-line bytes are skipped with a warning.")]
pub struct Args {
    /// Input files (`-` or none: stdin).
    files: Vec<PathBuf>,
    /// The sift file to write: a regular file is replaced atomically (temporary file, fsync,
    /// rename); a symlink is followed; /dev/null, a FIFO or `-` (stdout) is written in place. An
    /// input file is never overwritten.
    #[arg(short, long)]
    output: PathBuf,
    /// Filter family.
    #[arg(short, long, value_enum)]
    family: Option<FamilyArg>,
    /// Target false-positive rate [default: 0.01]. xor8, binary-fuse8/16 and redisbloom-cf have
    /// a rate fixed by their layout and refuse a lower one.
    #[arg(short = 'p', long, value_parser = parse_fpr)]
    fpr: Option<f64>,
    /// Expected number of keys (default: count the input files first; scalable-bloom on stdin).
    #[arg(short = 'n', long, value_parser = parse_count)]
    items: Option<u64>,
    /// Keys are separated by NUL bytes instead of newlines.
    #[arg(short = '0', long = "null")]
    null: bool,
    /// Longest key accepted, in bytes; longer lines are skipped with a warning.
    #[arg(long, default_value_t = input::DEFAULT_MAX_LINE)]
    max_line: usize,
    /// No progress bar and no summary (warnings are still printed).
    #[arg(short, long)]
    quiet: bool,
    /// Write the filter even when it holds more than twice the keys it was sized for (-n), where
    /// it no longer has the planned false-positive rate.
    #[arg(long)]
    force: bool,
    /// Threads reading, splitting and hashing the input (default: the cores, at most 4). The
    /// blocked Bloom filter (the default family) is filled by as many threads again, each
    /// owning a stripe of its blocks and inserting, in input order, the keys that fall there;
    /// the other families are filled in input order by the main thread. Either way the file is
    /// byte for byte the same for any value, the count of keys new to the filter included.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: Option<u16>,
}

/// How far past its planned item count a fixed-size filter may be filled before `build` refuses
/// to write it (without `--force`): at twice the items, a filter planned for 1% answers yes to
/// about 16% of non-members; past that it is a different filter from the one asked for.
pub const OVERFILL_LIMIT: f64 = 2.0;

pub fn run(a: Args) -> Result<ExitCode> {
    let start = Instant::now();
    let threads = a.threads.map_or_else(input::default_threads, usize::from);
    let sources = Source::from_args(&a.files);
    let inputs: Vec<&Path> =
        if a.files.is_empty() { vec![Path::new("-")] } else { a.files.iter().map(|f| f.as_path()).collect() };
    // Before reading anything: a path that cannot be written fails now, not after the build.
    let output = OutFile::check(&a.output, &inputs)?;
    let split = Split { delim: if a.null { 0 } else { b'\n' }, max_line: a.max_line, skip_empty: true };
    let from_stdin = sources.iter().any(|s| matches!(s, Source::Stdin));
    let mut family = a.family.unwrap_or(FamilyArg::BlockedBloom);
    let fpr = super::fpr_for(family, a.fpr, DEFAULT_FPR, a.quiet)?;
    let mut items = a.items;
    // A scalable cuckoo filter grows only to a bound (63x its first table at 1%): files are
    // counted for it too, so its first table is sized for the keys there are (stdin cannot be
    // counted ahead: it gets the default first table).
    let needs_count = family.needs_items() || (family == FamilyArg::ScalableCuckoo && !from_stdin);
    if items.is_none() && needs_count {
        if from_stdin {
            if a.family.is_some() {
                bail!(
                    "{} needs -n/--items (the number of keys) when reading stdin, which cannot be counted ahead; or use --family scalable-bloom",
                    family.name()
                );
            }
            family = FamilyArg::ScalableBloom;
            if !a.quiet {
                eprintln!("sift: stdin with no --items: building a scalable-bloom filter");
            }
        } else {
            let n = input::count_keys(&sources, split, threads)?;
            items = Some(n.max(1));
        }
    }

    let total: Option<u64> = sources.iter().map(|s| s.len()).sum();
    let pb = input::progress(total, a.quiet);
    let (filter, stats, inserted) = if family.is_static() {
        let mut pipe = input::Pipeline::start(sources, split, Some(sift::Hasher::default()), threads);
        let mut hashes: Vec<u64> = Vec::new();
        while let Some(c) = pipe.next()? {
            hashes.try_reserve(c.digests.len()).context("out of memory collecting key hashes")?;
            hashes.extend(c.digests.iter().map(|d| d.h1));
            pb.set_position(pipe.bytes_read.load(Ordering::Relaxed));
            pipe.recycle(c);
        }
        pb.set_position(pipe.bytes_read.load(Ordering::Relaxed));
        let stats = pipe.finish();
        pb.set_message("building");
        let n = hashes.len() as u64;
        (super::build_static(family, &hashes, fpr)?, stats, n)
    } else {
        let mut filter = super::new_dynamic(family, items, fpr)?;
        if let AnyFilter::Blocked(f) = &mut filter {
            let (stats, inserted) = insert_striped(f, sources, split, threads, &pb)?;
            (filter, stats, inserted)
        } else {
            let mut pipe = input::Pipeline::start(sources, split, filter.hasher(), threads);
            let mut inserted = 0u64;
            while let Some(c) = pipe.next()? {
                inserted += insert_chunk(&mut filter, &c)?;
                pb.set_position(pipe.bytes_read.load(Ordering::Relaxed));
                pipe.recycle(c);
            }
            (filter, pipe.finish(), inserted)
        }
    };
    pb.finish_and_clear();

    let fpr_now = filter.current_fpr();
    if stats.keys == 0 {
        eprintln!(
            "sift: warning: the input holds no keys{}: {} is an empty filter, which answers no to everything",
            if stats.empty > 0 { format!(" ({} empty lines skipped)", stats.empty) } else { String::new() },
            output.display()
        );
    }
    // A fixed-size filter given far more keys than planned: its bits say how many it holds.
    if let (Some(held), Some(cap)) = (filter.estimated_distinct(), filter.capacity()) {
        if held > OVERFILL_LIMIT * cap as f64 {
            let held_text = if held.is_finite() {
                format!("about {held:.0} distinct keys")
            } else {
                "so many keys that every bit is set".to_string()
            };
            let planned =
                filter.planned_fpr().map_or(String::new(), |p| format!(" instead of the planned {}", pct(p)));
            let msg = format!(
                "the filter was sized for {cap} keys (-n) but holds {held_text} (from its bits; {} keys read): it answers yes to {} of keys never inserted{planned}",
                stats.keys,
                pct(fpr_now)
            );
            if !a.force {
                bail!(
                    "{msg}. Nothing was written to {}. Build with -n {} (the keys read), leave -n out to count the input, or pass --force to write this filter anyway",
                    output.display(),
                    stats.keys
                );
            }
            eprintln!("sift: warning: {msg}; written anyway (--force)");
        } else if let Some(planned) = filter.planned_fpr().filter(|&p| fpr_now > 2.0 * p) {
            eprintln!(
                "sift: warning: the filter holds about {held:.0} distinct keys (from its bits), more than the {cap} it was sized for (-n): its FPR is {} instead of the planned {}; rebuild with a larger -n",
                pct(fpr_now),
                pct(planned)
            );
        }
    }

    // Streamed: the blocked Bloom filter is not copied into a file image first.
    output.write(|w| filter.write_to(w))?;
    if !a.quiet {
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "sift: built {} ({}) from {} keys ({} distinct by the filter) in {:.2}s ({:.0} keys/s): {} in memory, FPR now {}",
            output.display(),
            filter.kind(),
            stats.keys,
            inserted,
            secs,
            stats.keys as f64 / secs.max(1e-9),
            human_bytes(filter.size_in_bytes() as f64),
            pct(fpr_now),
        );
        if stats.empty > 0 && stats.keys > 0 {
            eprintln!("sift: {} empty lines skipped", stats.empty);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Inserts the keys of a chunk, in order; returns how many were new to the filter. Bloom
/// families take the whole chunk of digests at once (they prefetch ahead); the others go key by
/// key.
pub fn insert_chunk(filter: &mut AnyFilter, c: &input::Chunk) -> Result<u64> {
    Ok(match filter {
        AnyFilter::Bloom(f) => f.insert_digests(&c.digests) as u64,
        AnyFilter::Blocked(f) => f.insert_digests(&c.digests) as u64,
        AnyFilter::SplitBlock(f) => f.insert_digests(&c.digests) as u64,
        other => {
            let mut new = 0;
            for i in 0..c.len() {
                let d = c.digests.get(i).copied();
                new += other.insert_new(c.key(i), d)? as u64;
            }
            new
        }
    })
}

/// Chunks in the pipeline's pool for [`insert_striped`] beyond the usual ones: the inserters
/// work on up to `STRIPED_EXTRA + QUEUE - 1` chunks while the readers fill the others.
const STRIPED_EXTRA: usize = 4;

/// Fills a blocked Bloom filter from `threads` inserter threads, one per stripe of its blocks
/// ([`BlockedBloom::with_stripes`]): the main thread takes the chunks from the pipeline in
/// input order and hands each (shared, not copied) to every inserter; each inserter inserts the
/// keys whose block is in its stripe, chunk after chunk, in that order. The filter, and its
/// count of keys that set a bit, are then exactly those of inserting every key in input order
/// on one thread, whatever `threads` is, with no lock and no atomic instruction on the filter.
/// Returns the reading statistics and the number of keys new to the filter.
fn insert_striped(
    f: &mut BlockedBloom,
    sources: Vec<Source>,
    split: Split,
    threads: usize,
    pb: &indicatif::ProgressBar,
) -> Result<(input::ReadStats, u64)> {
    let mut pipe = input::Pipeline::with_pool(
        sources,
        split,
        Some(f.hasher()),
        threads,
        input::CHUNK_BYTES,
        STRIPED_EXTRA,
    );
    // The main thread holds at most this many chunks (the inserters' queues): fewer than the
    // pool, so that the readers always have a chunk to fill.
    let max_out = STRIPED_EXTRA + input::QUEUE - 1;
    let inserted = f.with_stripes(threads, |stripes| -> Result<u64> {
        std::thread::scope(|s| {
            let (done_tx, done_rx) = mpsc::channel::<()>();
            let mut queues = Vec::with_capacity(stripes.len());
            let mut inserters = Vec::with_capacity(stripes.len());
            for stripe in stripes.iter_mut() {
                let (tx, rx) = mpsc::channel::<Arc<input::Chunk>>();
                let done = done_tx.clone();
                let inserter =
                    std::thread::Builder::new().name("sift-insert".into()).spawn_scoped(s, move || {
                        let mut new = 0u64;
                        for c in rx {
                            new += stripe.insert_digests(&c.digests) as u64;
                            // Drop the chunk before saying so: the main thread recycles it once
                            // every inserter has.
                            drop(c);
                            let _ = done.send(());
                        }
                        new
                    });
                inserters.push(inserter.context("cannot start an inserter thread")?);
                queues.push(tx);
            }
            drop(done_tx);
            let mut out: VecDeque<Arc<input::Chunk>> = VecDeque::new();
            let fed = (|| -> Result<()> {
                while let Some(c) = pipe.next()? {
                    let c = Arc::new(c);
                    for q in &queues {
                        q.send(c.clone()).map_err(|_| anyhow!("an inserter thread stopped"))?;
                    }
                    out.push_back(c);
                    pb.set_position(pipe.bytes_read.load(Ordering::Relaxed));
                    loop {
                        // Recycle, in order, the chunks every inserter is done with.
                        while let Some(front) = out.pop_front() {
                            match Arc::try_unwrap(front) {
                                Ok(c) => pipe.recycle(c),
                                Err(front) => {
                                    out.push_front(front);
                                    break;
                                }
                            }
                        }
                        if out.len() < max_out {
                            break;
                        }
                        done_rx.recv().map_err(|_| anyhow!("the inserter threads stopped"))?;
                    }
                }
                Ok(())
            })();
            // Closing the queues lets the inserters finish what they hold and return.
            drop(queues);
            let mut new = 0;
            for h in inserters {
                new += h.join().map_err(|_| anyhow!("an inserter thread panicked"))?;
            }
            fed.map(|()| new)
        })
    })?;
    Ok((pipe.finish(), inserted))
}
