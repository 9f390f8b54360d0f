//! `sift dedup`: pass each line through the first time it is seen. Memory is the filter's,
//! whatever the input size; `--state` makes it resumable across runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::{bail, Context, Result};

use super::build::OVERFILL_LIMIT;
use super::FamilyArg;
use crate::any::{AnyFilter, AnyFilterExt};
use crate::clock::{self, At};
use crate::input::{self, Source, Split};
use crate::outfile::OutFile;
use crate::output::{self, pct};
use crate::size::{human_bytes, parse_count, parse_fpr};

/// The default `-p`.
const DEFAULT_FPR: f64 = 0.001;

/// Remove repeated lines from a stream, in constant memory (a line is dropped only when the filter says it was seen).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift dedup < urls.txt > unique.txt                    # scalable filter, grows with the input
  sift dedup -n 1e8 -p 1e-4 big.txt.gz > unique.txt     # sized up front: a blocked Bloom filter
  crawl | sift dedup --state seen.sift > new-urls.txt   # resumable: run again, only new lines pass
  sift dedup urls.txt | head -1                         # a closed pipe is a normal exit

A false positive drops a line that was never seen (with probability about the FPR); a repeated
line is never passed twice. The report on stderr gives the expected number of false drops. With
--state the filter is loaded if the file exists (its own family and sizing win) and saved
atomically at the end; it is not saved when the run fails or its output is closed early, so a
rerun sees those lines again.

A sliding window as --state passes a line unless it was seen recently: an aging-bloom file (a
window by count) drops the lines among its last N insertions, a time-limited-bloom file (a window
by time, such as SF.DUMP of KIND aging TTL) those inserted within its TTL; each passed or dropped
line is inserted again, so a repeat counts as recent. A window by time inserts at this machine's
clock in Unix milliseconds (sift-server's unit), read before each chunk of input.")]
pub struct Args {
    /// Input files (`-` or none: stdin).
    files: Vec<PathBuf>,
    /// Target false-positive rate (the probability of dropping a new line) [default: 0.001].
    #[arg(short = 'p', long, value_parser = parse_fpr)]
    fpr: Option<f64>,
    /// Expected number of distinct lines (default: a scalable filter that grows).
    #[arg(short = 'n', long, value_parser = parse_count)]
    items: Option<u64>,
    /// Filter family for a new filter (default: blocked-bloom with --items, else scalable-bloom).
    #[arg(short, long, value_enum)]
    family: Option<FamilyArg>,
    /// A sift file holding the filter: loaded if it exists, saved at the end (atomically; not
    /// when the run fails). It must not be one of the input files.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Lines are NUL-separated.
    #[arg(short = '0', long = "null")]
    null: bool,
    /// Longest line accepted, in bytes; longer lines are skipped with a warning (not output).
    #[arg(long, default_value_t = input::DEFAULT_MAX_LINE)]
    max_line: usize,
    /// No report on stderr.
    #[arg(short, long)]
    quiet: bool,
    /// Print the final report as JSON on stderr.
    #[arg(long)]
    json: bool,
    /// Threads reading, splitting and hashing the input (default: the cores, at most 4); lines
    /// are tested and written in input order by the main thread, so the output is the same.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: Option<u16>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let inputs: Vec<&Path> =
        if a.files.is_empty() { vec![Path::new("-")] } else { a.files.iter().map(|f| f.as_path()).collect() };
    // Before reading anything: a state that cannot be saved fails now, not after the stream
    // went out (a rerun would pass all its lines again).
    if a.state.as_deref().is_some_and(crate::outfile::is_dash) {
        bail!("--state needs a file: standard output (`-`) carries the new lines");
    }
    let state = a.state.as_deref().map(|p| OutFile::check(p, &inputs)).transpose()?;
    let mut filter = match &a.state {
        Some(p) if p.exists() => {
            let f = AnyFilter::load(p)?;
            if f.is_static() {
                bail!("{}: a {} filter is static and cannot record new lines", p.display(), f.kind());
            }
            if let Some(c) = f.timed_clock() {
                // Refuses a clock that is not Unix milliseconds before any line is read.
                clock::resolve(At::Now, c, &p.display().to_string())?;
            }
            if !a.quiet && (a.fpr.is_some() || a.items.is_some() || a.family.is_some()) {
                eprintln!(
                    "sift: note: {} exists: its own family, size and rate are used; -p, -n and --family apply only to a new state",
                    p.display()
                );
            }
            f
        }
        _ => {
            let family = a.family.unwrap_or(if a.items.is_some() {
                FamilyArg::BlockedBloom
            } else {
                FamilyArg::ScalableBloom
            });
            if family.is_static() {
                bail!(
                    "dedup needs a filter that takes inserts; {} is static (built once from a whole set)",
                    family.name()
                );
            }
            let fpr = super::fpr_for(family, a.fpr, DEFAULT_FPR, a.quiet)?;
            super::new_dynamic(family, a.items, fpr)?
        }
    };
    let sources = Source::from_args(&a.files);
    let total: Option<u64> = sources.iter().map(|s| s.len()).sum();
    let pb = input::progress(total, a.quiet);
    let split = Split { delim: if a.null { 0 } else { b'\n' }, max_line: a.max_line, skip_empty: false };
    let threads = a.threads.map_or_else(input::default_threads, usize::from);
    let mut pipe = input::Pipeline::start(sources, split, filter.hasher(), threads);
    let mut out = output::stdout();
    let (mut lines_in, mut lines_out, mut false_drops) = (0u64, 0u64, 0f64);
    let mut new = Vec::new();
    let result = (|| -> Result<()> {
        while let Some(c) = pipe.next()? {
            // The FPR at the start of the chunk: each new line of the chunk is falsely dropped
            // with about this probability.
            filter.advance_to(clock::now_ms());
            let p = filter.expected_fpr();
            new.clear();
            filter.insert_new_chunk(&c, &mut new)?;
            let new_here = write_new_lines(&mut out, &c, &new)?;
            lines_in += c.len() as u64;
            lines_out += new_here;
            false_drops += p * new_here as f64;
            pb.set_position(pipe.bytes_read.load(Ordering::Relaxed));
            pipe.recycle(c);
        }
        out.flush()?;
        Ok(())
    })();
    pb.finish_and_clear();
    // Stop the workers before reporting.
    let stats = pipe.finish();
    result?;
    if let Some(state) = &state {
        state.write(|w| filter.write_to(w)).context("the state was not saved")?;
    }
    let fpr_now = filter.current_fpr();
    if let (Some(held), Some(cap)) = (filter.estimated_distinct(), filter.capacity()) {
        if held > OVERFILL_LIMIT * cap as f64 {
            eprintln!(
                "sift: warning: the filter was sized for {cap} lines (-n) but holds {} (from its bits): it now drops {} of new lines; start over with a larger -n",
                if held.is_finite() { format!("about {held:.0}") } else { "so many that every bit is set".to_string() },
                pct(fpr_now)
            );
        }
    }
    if !a.quiet {
        let report = serde_json::json!({
            "lines_in": lines_in,
            "lines_out": lines_out,
            "dropped": lines_in - lines_out,
            "skipped_too_long": stats.too_long,
            "filter": filter.kind().name(),
            "filter_items": filter.len(),
            "filter_bytes": filter.size_in_bytes(),
            "fpr_now": fpr_now,
            "expected_false_drops": false_drops,
        });
        if a.json {
            eprintln!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            eprintln!(
                "sift dedup: {lines_in} lines in, {lines_out} out, {} dropped; filter {} {} ({} items, FPR now {}); expected false drops {:.2}{}",
                lines_in - lines_out,
                filter.kind(),
                human_bytes(filter.size_in_bytes() as f64),
                filter.len(),
                pct(fpr_now),
                false_drops,
                if stats.too_long > 0 { format!("; {} over-long lines skipped", stats.too_long) } else { String::new() },
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the raw lines of the chunk marked new, in order, as few writes as possible: adjacent
/// new lines are one slice of the chunk. Returns how many lines were written.
fn write_new_lines(out: &mut impl Write, c: &input::Chunk, new: &[bool]) -> std::io::Result<u64> {
    let bytes = c.bytes();
    let mut written = 0u64;
    let mut run: Option<(usize, usize)> = None;
    for (i, _) in new.iter().enumerate().filter(|(_, &n)| n) {
        let (s, e) = c.raw_range(i);
        written += 1;
        run = match run {
            Some((rs, re)) if re == s => Some((rs, e)),
            Some((rs, re)) => {
                out.write_all(&bytes[rs..re])?;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((rs, re)) = run {
        out.write_all(&bytes[rs..re])?;
    }
    Ok(written)
}
