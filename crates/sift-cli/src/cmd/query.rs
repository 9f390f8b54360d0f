//! `sift query`: which keys may be in a filter. Exit 0 if all may be, 1 if any is certainly
//! absent, 2 on error (like grep).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::any::{AnyFilter, AnyFilterExt};
use crate::clock::{self, At};
use crate::input::{self, Source, Split};
use crate::output;

/// Query a filter: print `KEY<TAB>maybe|no` for each key (arguments, or stdin one per line).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift query urls.sift https://example.com/ https://example.org/
  sift query urls.sift < candidates.txt > answers.tsv
  sift query -q urls.sift \"$url\" && echo \"seen (probably)\"
  sift query --count urls.sift < candidates.txt

Exit status: 0 if every key may be present (also for no keys), 1 if any key is certainly absent,
2 on error (unreadable or corrupted filter file). Works with every kind of sift file, including
RedisBloom and Guava filters converted with `sift convert`, and the sliding windows:

  sift query window.sift KEY                    # aging-bloom (by count): among the last N insertions?
  sift query seen.sift KEY                      # time-limited-bloom: inserted within the TTL before now?
  sift query --at clock seen.sift KEY           # … as of the filter's last insertion
  sift query --at 1764270000000 seen.sift KEY   # … as of that time (Unix ms, sift-server's unit)

A time-limited-bloom file (SF.RESERVE ... KIND aging TTL s, saved with SF.DUMP) is read at a
time: by default now, this machine's clock in Unix milliseconds (sift-server's unit). An item
inserted at t is a member at every time up to t + TTL and forgotten (answers like a key never
inserted) after t + TTL plus one generation (up to 1.25x the planned rate of inserts; above
it the filter forgets later, never sooner); the file is not changed. A file whose clock is not
Unix milliseconds (a library filter with a clock of its own) needs --at clock or --at T.")]
pub struct Args {
    /// The sift file.
    file: PathBuf,
    /// Keys to look up (default: read stdin, one per line).
    keys: Vec<std::ffi::OsString>,
    /// Print only the number of keys that may be present.
    #[arg(short, long)]
    count: bool,
    /// Print nothing; only the exit status.
    #[arg(short, long)]
    quiet: bool,
    /// With --count: print {"keys", "maybe", "no"} as JSON.
    #[arg(long)]
    json: bool,
    /// Keys on stdin are NUL-separated.
    #[arg(short = '0', long = "null")]
    null: bool,
    /// Longest key accepted on stdin, in bytes.
    #[arg(long, default_value_t = input::DEFAULT_MAX_LINE)]
    max_line: usize,
    #[arg(long, value_parser = clock::parse_at, default_value = "now", help = clock::AT_HELP)]
    at: At,
}

struct Tally<'a, W: Write> {
    out: &'a mut W,
    list: bool,
    maybe: u64,
    no: u64,
}

impl<W: Write> Tally<'_, W> {
    fn answer(&mut self, key: &[u8], present: bool) -> Result<()> {
        if present {
            self.maybe += 1;
        } else {
            self.no += 1;
        }
        if self.list {
            self.out.write_all(key)?;
            self.out.write_all(if present { b"\tmaybe\n" } else { b"\tno\n" })?;
        }
        Ok(())
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let filter = AnyFilter::load(&a.file)?;
    // The time a window by time is read at (the other kinds ignore it).
    let now = match filter.timed_clock() {
        Some(c) => clock::resolve(a.at, c, &a.file.display().to_string())?,
        None => 0,
    };
    let mut out = output::stdout();
    let mut t = Tally { out: &mut out, list: !a.count && !a.quiet, maybe: 0, no: 0 };
    if !a.keys.is_empty() {
        for k in &a.keys {
            let key = os_bytes(k);
            let present = filter.present_at(&key, now);
            t.answer(&key, present)?;
        }
    } else {
        let split = Split { delim: if a.null { 0 } else { b'\n' }, max_line: a.max_line, skip_empty: true };
        let hasher = filter.hasher();
        let mut pipe = input::Pipeline::start(vec![Source::Stdin], split, hasher, input::default_threads());
        let mut answers = Vec::new();
        while let Some(c) = pipe.next()? {
            answers.clear();
            answers.resize(c.len(), false);
            if hasher.is_some() {
                // Batched: large filters prefetch ahead, overlapping cache misses.
                match &filter {
                    AnyFilter::Bloom(f) => sift::Filter::contains_digests(f, &c.digests, &mut answers),
                    AnyFilter::Blocked(f) => sift::Filter::contains_digests(f, &c.digests, &mut answers),
                    other => {
                        for (o, d) in answers.iter_mut().zip(&c.digests) {
                            *o = other.digest_present(*d, now);
                        }
                    }
                }
            } else {
                for (i, o) in answers.iter_mut().enumerate() {
                    *o = filter.present_at(c.key(i), now);
                }
            }
            for (i, &present) in answers.iter().enumerate() {
                t.answer(c.key(i), present)?;
            }
            // An interactive user sees each answer as the line is read.
            t.out.flush()?;
            pipe.recycle(c);
        }
        pipe.finish();
    }
    let (maybe, no) = (t.maybe, t.no);
    if a.count && !a.quiet {
        if a.json {
            output::json(&mut out, &serde_json::json!({ "keys": maybe + no, "maybe": maybe, "no": no }))?;
        } else {
            writeln!(out, "{maybe}")?;
        }
    }
    out.flush()?;
    Ok(if no == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The bytes of a command-line argument (any bytes on Unix).
fn os_bytes(s: &std::ffi::OsStr) -> Vec<u8> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        s.as_bytes().to_vec()
    }
    #[cfg(not(unix))]
    {
        s.to_string_lossy().into_owned().into_bytes()
    }
}
