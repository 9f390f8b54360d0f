//! Reading keys: files or stdin, gzip detected by its magic bytes, one key per line (or
//! NUL-separated), with a bound on the line length so that memory never depends on the input.
//!
//! [`spawn_reader`] runs the reading (and optionally the hashing) on its own thread and hands
//! batches of keys to the caller over a bounded channel: at most [`QUEUE`] batches of
//! [`BATCH_LINES`] keys are in flight, so a 10 GB input costs a few megabytes.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use sift::hash::{Digest, Hasher};

/// Keys per batch handed from the reader thread to the consumer.
pub const BATCH_LINES: usize = 8192;
/// Batches in flight between the reader thread and the consumer.
pub const QUEUE: usize = 4;
/// Default longest key accepted; longer lines are skipped with a warning.
pub const DEFAULT_MAX_LINE: usize = 1 << 20;

/// Where keys come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Standard input.
    Stdin,
    /// A file.
    File(PathBuf),
}

impl Source {
    /// The sources named on the command line: `-` or nothing means stdin.
    pub fn from_args(files: &[PathBuf]) -> Vec<Source> {
        if files.is_empty() {
            return vec![Source::Stdin];
        }
        files
            .iter()
            .map(|f| if f.as_os_str() == "-" { Source::Stdin } else { Source::File(f.clone()) })
            .collect()
    }

    /// A name for messages.
    pub fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".to_string(),
            Source::File(p) => p.display().to_string(),
        }
    }

    /// Total bytes on disk, when known (for the progress bar).
    pub fn len(&self) -> Option<u64> {
        match self {
            Source::Stdin => None,
            Source::File(p) => std::fs::metadata(p).ok().filter(|m| m.is_file()).map(|m| m.len()),
        }
    }

    /// Opens the source, decompressing gzip when the first two bytes are its magic `1f 8b`.
    /// `counter` is advanced by the bytes read from disk (compressed), for the progress bar.
    pub fn open(&self, counter: Arc<AtomicU64>) -> Result<Box<dyn BufRead + Send>> {
        let raw: Box<dyn Read + Send> = match self {
            Source::Stdin => Box::new(io::stdin()),
            Source::File(p) => {
                Box::new(File::open(p).with_context(|| format!("cannot open {}", p.display()))?)
            }
        };
        let mut r = BufReader::with_capacity(1 << 16, Counting { inner: raw, counter });
        let head = r.fill_buf().with_context(|| format!("cannot read {}", self.name()))?;
        if head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b {
            Ok(Box::new(BufReader::with_capacity(1 << 16, flate2::bufread::MultiGzDecoder::new(r))))
        } else {
            Ok(Box::new(r))
        }
    }
}

/// Counts the bytes read through it.
struct Counting<R> {
    inner: R,
    counter: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// How input is split into keys.
#[derive(Debug, Clone, Copy)]
pub struct Split {
    /// The separator: `\n` or NUL.
    pub delim: u8,
    /// Longest key accepted (bytes, without the separator).
    pub max_line: usize,
    /// Whether empty keys are skipped (`build`, `query`) or kept (`dedup` keeps blank lines).
    pub skip_empty: bool,
}

/// One line, as [`LineReader::next_line`] reports it.
pub enum Line<'a> {
    /// A key (separator and, in newline mode, a trailing `\r` removed) and the raw line with its
    /// separator as it appeared.
    Key { key: &'a [u8], raw: &'a [u8] },
    /// A line longer than the limit, skipped; its 1-based number.
    TooLong(u64),
}

/// Reads separated records from a `BufRead` with a bounded buffer.
pub struct LineReader<R> {
    inner: R,
    split: Split,
    buf: Vec<u8>,
    line_no: u64,
}

impl<R: BufRead> LineReader<R> {
    /// A reader splitting `inner` as `split` says.
    pub fn new(inner: R, split: Split) -> Self {
        LineReader { inner, split, buf: Vec::new(), line_no: 0 }
    }

    /// The next line, or `None` at the end. Never holds more than `max_line + 1` bytes: an
    /// over-long line is drained without being stored.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.buf.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (take, done) = match chunk.iter().position(|&b| b == self.split.delim) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            if !too_long {
                if self.buf.len() + take > self.split.max_line + 1 {
                    too_long = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(&chunk[..take]);
                }
            }
            self.inner.consume(take);
            if done {
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        self.line_no += 1;
        if too_long {
            return Ok(Some(Line::TooLong(self.line_no)));
        }
        let raw = &self.buf[..];
        let mut key = raw.strip_suffix(&[self.split.delim]).unwrap_or(raw);
        if self.split.delim == b'\n' {
            key = key.strip_suffix(b"\r").unwrap_or(key);
        }
        if key.len() > self.split.max_line {
            return Ok(Some(Line::TooLong(self.line_no)));
        }
        Ok(Some(Line::Key { key, raw }))
    }
}

/// A batch of keys: their bytes back to back, where each ends, the raw lines (for `dedup`), and
/// their digests when a hasher was given.
#[derive(Default)]
pub struct Batch {
    data: Vec<u8>,
    ends: Vec<usize>,
    raw_data: Vec<u8>,
    raw_ends: Vec<usize>,
    /// Digests of the keys, in order (empty when no hasher was given).
    pub digests: Vec<Digest>,
}

impl Batch {
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    /// Key `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.data[start..self.ends[i]]
    }
    /// The raw line `i` with its separator (only when the reader was asked to keep it).
    pub fn raw(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.raw_ends[i - 1] };
        &self.raw_data[start..self.raw_ends[i]]
    }
}

/// What the reader thread reports at the end.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadStats {
    /// Keys delivered.
    pub keys: u64,
    /// Lines skipped for being longer than the limit.
    pub too_long: u64,
    /// Empty lines skipped.
    pub empty: u64,
}

/// The reader thread and its channel.
pub struct Reader {
    /// Batches, in input order.
    pub rx: Receiver<Batch>,
    handle: JoinHandle<Result<ReadStats>>,
    /// Bytes read from disk so far (compressed size for gzip).
    pub bytes_read: Arc<AtomicU64>,
}

impl Reader {
    /// Waits for the reader thread: its statistics, or the first read error.
    pub fn finish(self) -> Result<ReadStats> {
        drop(self.rx);
        match self.handle.join() {
            Ok(r) => r,
            Err(_) => anyhow::bail!("the reader thread panicked"),
        }
    }
}

/// Starts a thread reading `sources` in order, splitting them into keys, hashing each with
/// `hasher` if given, and sending batches of [`BATCH_LINES`] keys. `keep_raw` also keeps the raw
/// lines. Over-long lines are reported on stderr (the first few) and counted.
pub fn spawn_reader(sources: Vec<Source>, split: Split, hasher: Option<Hasher>, keep_raw: bool) -> Reader {
    let (tx, rx) = sync_channel::<Batch>(QUEUE);
    let bytes_read = Arc::new(AtomicU64::new(0));
    let counter = bytes_read.clone();
    let handle = std::thread::spawn(move || -> Result<ReadStats> {
        let mut stats = ReadStats::default();
        let mut batch = Batch::default();
        for src in &sources {
            let r = src.open(counter.clone())?;
            let mut lines = LineReader::new(r, split);
            loop {
                let line = lines.next_line().with_context(|| format!("cannot read {}", src.name()))?;
                match line {
                    None => break,
                    Some(Line::TooLong(n)) => {
                        stats.too_long += 1;
                        if stats.too_long <= 5 {
                            eprintln!(
                                "sift: warning: {} line {n}: longer than {} bytes, skipped (raise --max-line to accept it)",
                                src.name(),
                                split.max_line
                            );
                        }
                    }
                    Some(Line::Key { key, raw }) => {
                        if key.is_empty() && split.skip_empty {
                            stats.empty += 1;
                            continue;
                        }
                        batch.data.extend_from_slice(key);
                        batch.ends.push(batch.data.len());
                        if keep_raw {
                            batch.raw_data.extend_from_slice(raw);
                            batch.raw_ends.push(batch.raw_data.len());
                        }
                        if let Some(h) = hasher {
                            batch.digests.push(h.digest(key));
                        }
                        stats.keys += 1;
                        let full = batch.len() >= BATCH_LINES || batch.data.len() >= 4 << 20;
                        if full && tx.send(std::mem::take(&mut batch)).is_err() {
                            return Ok(stats); // the consumer stopped (an error, or a closed pipe)
                        }
                    }
                }
            }
        }
        if batch.len() > 0 {
            let _ = tx.send(batch);
        }
        if stats.too_long > 5 {
            eprintln!("sift: warning: {} over-long lines skipped in total", stats.too_long);
        }
        Ok(stats)
    });
    Reader { rx, handle, bytes_read }
}

/// Counts the keys of `sources` (a first pass, to size a filter when `--items` is not given).
pub fn count_keys(sources: &[Source], split: Split) -> Result<u64> {
    let mut n = 0u64;
    for src in sources {
        let r = src.open(Arc::new(AtomicU64::new(0)))?;
        let mut lines = LineReader::new(r, split);
        while let Some(line) = lines.next_line().with_context(|| format!("cannot read {}", src.name()))? {
            if let Line::Key { key, .. } = line {
                if !(key.is_empty() && split.skip_empty) {
                    n += 1;
                }
            }
        }
    }
    Ok(n)
}

/// A progress bar on stderr when it is a terminal (and not `quiet`); hidden otherwise.
pub fn progress(total_bytes: Option<u64>, quiet: bool) -> indicatif::ProgressBar {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    if quiet || !io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    }
    match total_bytes {
        Some(t) => {
            let pb = ProgressBar::new(t);
            pb.set_style(
                ProgressStyle::with_template(
                    "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}  {msg}",
                )
                .expect("valid template"),
            );
            pb
        }
        None => {
            let pb = ProgressBar::new_spinner();
            pb.set_style(
                ProgressStyle::with_template("{spinner} {bytes} read, {binary_bytes_per_sec}  {msg}")
                    .expect("valid template"),
            );
            pb
        }
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, flushed to disk,
/// then renamed over the target (a reader never sees a half-written filter).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().with_context(|| format!("{} is not a file name", path.display()))?;
    let tmp = dir.join(format!(".{}.tmp.{}", name.to_string_lossy(), std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.sync_all().with_context(|| format!("cannot flush {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Reads a whole file (filters are loaded whole), with the file name in the error.
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut v = Vec::new();
        io::stdin().read_to_end(&mut v).context("cannot read stdin")?;
        return Ok(v);
    }
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Option<Vec<u8>>> {
        let mut r = LineReader::new(
            BufReader::with_capacity(4, input),
            Split { delim: b'\n', max_line: max, skip_empty: false },
        );
        let mut out = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            out.push(match l {
                Line::Key { key, .. } => Some(key.to_vec()),
                Line::TooLong(_) => None,
            });
        }
        out
    }

    #[test]
    fn splits_and_bounds() {
        assert_eq!(
            lines(b"a\nbb\r\n\nccc", 10),
            vec![Some(b"a".to_vec()), Some(b"bb".to_vec()), Some(vec![]), Some(b"ccc".to_vec())]
        );
        assert_eq!(lines(b"", 10), Vec::<Option<Vec<u8>>>::new());
        assert_eq!(
            lines(b"short\nmuch too long line\nok\n", 5),
            vec![Some(b"short".to_vec()), None, Some(b"ok".to_vec())]
        );
        assert_eq!(lines(b"123456", 5), vec![None]);
    }
}
