//! Reading keys: files or stdin, gzip detected by its magic bytes, one key per line (or
//! NUL-separated), with a bound on the line length so that memory never depends on the input.
//!
//! [`Pipeline`] reads big chunks of whole lines on worker threads, splits them with `memchr`
//! and hashes the keys there, and hands the chunks to the caller in input order over bounded
//! channels: a fixed pool of 1 MiB chunks is in flight, so a 10 GB input costs a few megabytes.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use sift::hash::{Digest, Hasher};

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
    /// Also says whether reads should fill whole chunks (files, gzip) or hand out what one read
    /// gave (a plain stdin, which may be a person typing keys to `sift query`).
    pub fn open_stream(&self, counter: Arc<AtomicU64>) -> Result<(Box<dyn Read + Send>, bool)> {
        let raw: Box<dyn Read + Send> = match self {
            Source::Stdin => Box::new(io::stdin()),
            Source::File(p) => {
                Box::new(File::open(p).with_context(|| format!("cannot open {}", p.display()))?)
            }
        };
        let mut r = BufReader::with_capacity(1 << 16, Counting { inner: raw, counter });
        let head = r.fill_buf().with_context(|| format!("cannot read {}", self.name()))?;
        if head.len() >= 2 && head[0] == 0x1f && head[1] == 0x8b {
            Ok((Box::new(flate2::bufread::MultiGzDecoder::new(r)), true))
        } else {
            // Reads of a chunk's size bypass the BufReader's buffer once its first 64 KiB are out.
            Ok((Box::new(r), matches!(self, Source::File(_))))
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
        self.counter.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
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

/// Where one key sits in its chunk: `start..key_end` is the key (separator and, in newline mode,
/// a trailing `\r` removed), `start..raw_end` the line as it appeared, with its separator.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    key_end: usize,
    raw_end: usize,
}

/// A run of whole lines read from one source, split into keys and (when a hasher was given)
/// hashed. Chunks are recycled: their buffers are allocated once per pipeline.
pub struct Chunk {
    seq: u64,
    src: usize,
    /// The bytes read; `data[..len]` holds whole lines (the last one without separator only at
    /// the end of a source). Kept at its full (initialised) size so reads need no zeroing.
    data: Vec<u8>,
    len: usize,
    /// Over-long lines skipped by the reader just before this chunk's first line.
    leading_too_long: u64,
    spans: Vec<Span>,
    /// Digests of the keys, in order (empty when no hasher was given).
    pub digests: Vec<Digest>,
    /// Indexes (among all the lines of the chunk, skipped ones included) of over-long lines.
    too_long_at: Vec<u64>,
    /// Lines in the chunk, skipped ones included.
    lines: u64,
    empty: u64,
}

impl Chunk {
    fn new(capacity: usize) -> Chunk {
        Chunk {
            seq: 0,
            src: 0,
            data: vec![0; capacity],
            len: 0,
            leading_too_long: 0,
            spans: Vec::new(),
            digests: Vec::new(),
            too_long_at: Vec::new(),
            lines: 0,
            empty: 0,
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Key `i`.
    pub fn key(&self, i: usize) -> &[u8] {
        let s = self.spans[i];
        &self.data[s.start..s.key_end]
    }

    /// Where the raw line `i` (with its separator) starts and ends in [`Chunk::bytes`].
    pub fn raw_range(&self, i: usize) -> (usize, usize) {
        let s = self.spans[i];
        (s.start, s.raw_end)
    }

    /// The bytes of the chunk (raw lines back to back, skipped ones included).
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// Splits `data[..len]` into keys and hashes them, by the same rules as a line-by-line
    /// reader: a line longer than `max_line` is skipped (and counted), an empty key is skipped
    /// when `skip_empty`, a trailing `\r` is removed in newline mode.
    fn split(&mut self, split: Split, hasher: Option<Hasher>) {
        self.spans.clear();
        self.digests.clear();
        self.too_long_at.clear();
        self.empty = 0;
        self.too_long_at.extend(0..self.leading_too_long);
        let mut line = self.leading_too_long;
        let data = &self.data[..self.len];
        let mut one = |start: usize, end: usize, raw_end: usize| {
            let mut key_end = end;
            if split.delim == b'\n' && key_end > start && data[key_end - 1] == b'\r' {
                key_end -= 1;
            }
            if raw_end - start > split.max_line.saturating_add(1) || key_end - start > split.max_line {
                self.too_long_at.push(line);
            } else if key_end == start && split.skip_empty {
                self.empty += 1;
            } else {
                self.spans.push(Span { start, key_end, raw_end });
                if let Some(h) = hasher {
                    self.digests.push(h.digest(&data[start..key_end]));
                }
            }
            line += 1;
        };
        let mut start = 0;
        for_each_byte(data, split.delim, |end| {
            one(start, end, end + 1);
            start = end + 1;
        });
        if start < data.len() {
            one(start, data.len(), data.len());
        }
        self.lines = line;
    }
}

/// Calls `f` with the position of every `byte` in `data`, in order. Safe SWAR: each 8-byte word
/// gives the high bit of its bytes equal to `byte`, eight words are packed into one 64-bit mask
/// (a multiply gathers a word's eight high bits into one byte), and the set bits of the mask are
/// the positions. One branch per 64 bytes plus one per hit; for keys of a few dozen bytes this is
/// cheaper than a `memchr` call per line, whose set-up outweighs the short scan.
fn for_each_byte(data: &[u8], byte: u8, mut f: impl FnMut(usize)) {
    let pattern = LO * byte as u64;
    let mut blocks = data.chunks_exact(64);
    let mut base = 0;
    for b in &mut blocks {
        let mut mask = 0u64;
        for (i, w) in b.chunks_exact(8).enumerate() {
            let x = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            mask |= movemask(eq_bytes(x, pattern)) << (8 * i);
        }
        while mask != 0 {
            f(base + mask.trailing_zeros() as usize);
            mask &= mask - 1;
        }
        base += 64;
    }
    for (i, &b) in blocks.remainder().iter().enumerate() {
        if b == byte {
            f(base + i);
        }
    }
}

const LO: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// The high bit of each byte of `x` that equals the matching byte of `pattern`, nothing else.
#[inline(always)]
fn eq_bytes(x: u64, pattern: u64) -> u64 {
    let y = x ^ pattern;
    // Per byte b of y: (b & 0x7f) + 0x7f has its high bit set iff b & 0x7f != 0 and never carries
    // into the next byte; or-ed with b, the high bit is set iff b != 0.
    !(((y & LOW7) + LOW7) | y | LOW7)
}

/// Packs the high bits of the eight bytes of `h` (only high bits set) into the low byte, byte `i`
/// to bit `i`: `(h >> 7)` has bit `8i` for byte `i`; the multiply by Σ 2^(7i) sends bit `8i` to
/// bit `56 + i` without collisions (every other product lands elsewhere, and no carries occur).
#[inline(always)]
fn movemask(h: u64) -> u64 {
    ((h >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56
}

/// Bytes per chunk read from a source (grown for a longer line, up to `max_line`).
pub const CHUNK_BYTES: usize = 1 << 20;

/// The reading side, shared by the workers behind a mutex: the sources, the one open now, the
/// partial line carried over to the next chunk, and the free chunks.
struct ReadState {
    sources: Vec<Source>,
    next_src: usize,
    open: Option<(usize, Box<dyn Read + Send>, bool)>,
    carry: Vec<u8>,
    /// In the middle of an over-long line: drop bytes up to the next separator.
    skipping: bool,
    /// Over-long lines dropped since the last chunk was handed out.
    pending_too_long: u64,
    next_seq: u64,
    done: bool,
    counter: Arc<AtomicU64>,
    free: Receiver<Chunk>,
    split: Split,
    chunk_bytes: usize,
}

fn read_retry(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

impl ReadState {
    /// Fills `c` with the next run of whole lines; `false` when every source is read.
    fn fill(&mut self, c: &mut Chunk) -> Result<bool> {
        let delim = self.split.delim;
        let limit = self.split.max_line.saturating_add(1);
        loop {
            if self.open.is_none() {
                if self.next_src >= self.sources.len() {
                    return Ok(false);
                }
                let i = self.next_src;
                self.next_src += 1;
                let (r, fill_whole) = self.sources[i].open_stream(self.counter.clone())?;
                self.open = Some((i, r, fill_whole));
                self.carry.clear();
                self.skipping = false;
                self.pending_too_long = 0;
            }
            let (src, reader, fill_whole) = self.open.as_mut().expect("opened above");
            let (src, fill_whole) = (*src, *fill_whole);
            c.src = src;
            c.len = self.carry.len();
            if c.data.len() < c.len + self.chunk_bytes {
                c.data.resize(c.len + self.chunk_bytes, 0);
            }
            c.data[..c.len].copy_from_slice(&self.carry);
            self.carry.clear();
            // `data[..searched]` is known to hold no separator (the carried bytes have none).
            let mut searched = c.len;
            loop {
                if c.len == c.data.len() {
                    // Full, and no separator in it (or it would have been handed out): one
                    // partial line, within the limit so far. Make room for the rest of it.
                    let grow = self.chunk_bytes.max(c.data.len() / 2);
                    c.data.resize(c.data.len() + grow, 0);
                }
                let n = read_retry(reader.as_mut(), &mut c.data[c.len..])
                    .with_context(|| format!("cannot read {}", self.sources[src].name()))?;
                if n == 0 {
                    // End of this source: what is left is its last line, without a separator.
                    self.open = None;
                    if self.skipping {
                        self.skipping = false;
                        self.pending_too_long += 1;
                        c.len = 0;
                    }
                    if c.len == 0 && self.pending_too_long == 0 {
                        break; // nothing left: on to the next source
                    }
                    return Ok(self.hand_out(c));
                }
                let new_start = c.len;
                c.len += n;
                if self.skipping {
                    match memchr::memchr(delim, &c.data[new_start..c.len]) {
                        Some(p) => {
                            // The over-long line ends here; keep what follows it.
                            self.skipping = false;
                            self.pending_too_long += 1;
                            let from = new_start + p + 1;
                            c.data.copy_within(from..c.len, 0);
                            c.len -= from;
                            searched = 0;
                        }
                        None => {
                            c.len = 0;
                            continue;
                        }
                    }
                }
                if fill_whole && c.len < c.data.len() {
                    continue; // files and gzip: fill the whole chunk first
                }
                match memchr::memrchr(delim, &c.data[searched..c.len]) {
                    Some(p) => {
                        let end = searched + p + 1;
                        self.carry.extend_from_slice(&c.data[end..c.len]);
                        c.len = end;
                        return Ok(self.hand_out(c));
                    }
                    None if c.len > limit => {
                        // One partial line, already over the limit: drop it up to its end.
                        self.skipping = true;
                        c.len = 0;
                        searched = 0;
                    }
                    None => searched = c.len,
                }
            }
        }
    }

    fn hand_out(&mut self, c: &mut Chunk) -> bool {
        c.leading_too_long = std::mem::take(&mut self.pending_too_long);
        c.seq = self.next_seq;
        self.next_seq += 1;
        true
    }
}

/// What the pipeline reports at the end.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadStats {
    /// Keys delivered.
    pub keys: u64,
    /// Lines skipped for being longer than the limit.
    pub too_long: u64,
    /// Empty lines skipped.
    pub empty: u64,
}

/// Reads `sources` on worker threads and hands the chunks to the caller **in input order**.
///
/// Each worker takes the reader lock, reads the next chunk of whole lines (1 MiB; the partial
/// line at its end is carried over to the next chunk), releases the lock, then splits the chunk
/// into keys (`memchr`) and hashes them, while the other workers read and the caller consumes
/// (inserts, tests, writes). The caller reorders chunks by sequence number, so what it sees is
/// exactly the line order of the input, whatever the number of workers. Memory is bounded by the
/// fixed pool of chunks (`threads + QUEUE` of them, 1 MiB each, or longer for a longer line up to
/// `--max-line`), never by the input.
pub struct Pipeline {
    rx: Option<Receiver<(u64, Result<Chunk>)>>,
    free: Option<SyncSender<Chunk>>,
    handles: Vec<JoinHandle<()>>,
    pending: BTreeMap<u64, Result<Chunk>>,
    next_seq: u64,
    names: Vec<String>,
    split: Split,
    cur_src: usize,
    line_base: u64,
    /// Statistics of the chunks handed out so far.
    pub stats: ReadStats,
    /// Bytes read from disk so far (compressed size for gzip).
    pub bytes_read: Arc<AtomicU64>,
}

/// Chunks in flight beyond one per worker (read ahead while the caller works).
pub const QUEUE: usize = 3;

/// Worker threads by default: the cores of the machine, at most 4 (past that the consumer,
/// which must go in order, is the limit).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 4)
}

impl Pipeline {
    /// Starts `threads` workers (at least one) reading `sources` in order, splitting them as
    /// `split` says and hashing each key with `hasher` if given.
    pub fn start(sources: Vec<Source>, split: Split, hasher: Option<Hasher>, threads: usize) -> Pipeline {
        Self::with_chunk_bytes(sources, split, hasher, threads, CHUNK_BYTES)
    }

    /// [`Pipeline::start`] with a chosen chunk size (the tests use tiny ones to cross many
    /// chunk boundaries).
    pub fn with_chunk_bytes(
        sources: Vec<Source>,
        split: Split,
        hasher: Option<Hasher>,
        threads: usize,
        chunk_bytes: usize,
    ) -> Pipeline {
        Self::with_pool(sources, split, hasher, threads, chunk_bytes, 0)
    }

    /// [`Pipeline::with_chunk_bytes`] with `extra` chunks in the pool beyond `threads + QUEUE`,
    /// for a caller that keeps up to `extra + QUEUE - 1` chunks out at once (the striped build
    /// hands each chunk to several inserters before recycling it). A caller must never hold
    /// the whole pool: the workers would have no chunk to read into.
    pub fn with_pool(
        sources: Vec<Source>,
        split: Split,
        hasher: Option<Hasher>,
        threads: usize,
        chunk_bytes: usize,
        extra: usize,
    ) -> Pipeline {
        let threads = threads.max(1);
        let chunk_bytes = chunk_bytes.max(1);
        let names = sources.iter().map(|s| s.name()).collect();
        let pool = threads + QUEUE + extra;
        let (free_tx, free_rx) = sync_channel::<Chunk>(pool);
        for _ in 0..pool {
            free_tx.send(Chunk::new(0)).expect("the receiver is here");
        }
        let bytes_read = Arc::new(AtomicU64::new(0));
        let state = Arc::new(Mutex::new(ReadState {
            sources,
            next_src: 0,
            open: None,
            carry: Vec::new(),
            skipping: false,
            pending_too_long: 0,
            next_seq: 0,
            done: false,
            counter: bytes_read.clone(),
            free: free_rx,
            split,
            chunk_bytes,
        }));
        let (tx, rx) = sync_channel::<(u64, Result<Chunk>)>(pool);
        let handles = (0..threads)
            .map(|_| {
                let state = state.clone();
                let tx = tx.clone();
                // Named, so that profiles (`perf report --sort comm`) tell readers from inserters.
                std::thread::Builder::new()
                    .name("sift-read".into())
                    .spawn(move || worker(&state, &tx, split, hasher))
                    .expect("cannot start a reader thread")
            })
            .collect();
        Pipeline {
            rx: Some(rx),
            free: Some(free_tx),
            handles,
            pending: BTreeMap::new(),
            next_seq: 0,
            names,
            split,
            cur_src: usize::MAX,
            line_base: 0,
            stats: ReadStats::default(),
            bytes_read,
        }
    }

    /// The next chunk in input order, `None` at the end; the first read error, in order.
    /// Over-long lines are reported on stderr (the first five) as the chunk holding them is
    /// handed out. Give the chunk back with [`Pipeline::recycle`].
    pub fn next(&mut self) -> Result<Option<Chunk>> {
        loop {
            if let Some(r) = self.pending.remove(&self.next_seq) {
                self.next_seq += 1;
                let c = r?;
                self.account(&c);
                return Ok(Some(c));
            }
            let Some(rx) = &self.rx else { return Ok(None) };
            match rx.recv() {
                Ok((seq, r)) => {
                    self.pending.insert(seq, r);
                }
                // Every worker is gone and nothing is pending: the end.
                Err(_) => return Ok(None),
            }
        }
    }

    fn account(&mut self, c: &Chunk) {
        if c.src != self.cur_src {
            self.cur_src = c.src;
            self.line_base = 0;
        }
        for &i in &c.too_long_at {
            self.stats.too_long += 1;
            if self.stats.too_long <= 5 {
                eprintln!(
                    "sift: warning: {} line {}: longer than {} bytes, skipped (raise --max-line to accept it)",
                    self.names[c.src],
                    self.line_base + i + 1,
                    self.split.max_line
                );
            }
        }
        self.line_base += c.lines;
        self.stats.keys += c.len() as u64;
        self.stats.empty += c.empty;
    }

    /// Gives a chunk back to the pool.
    pub fn recycle(&mut self, c: Chunk) {
        if let Some(f) = &self.free {
            let _ = f.send(c);
        }
    }

    /// Stops the workers (if the caller stopped early) and waits for them; the statistics.
    pub fn finish(mut self) -> ReadStats {
        self.stop();
        if self.stats.too_long > 5 {
            eprintln!("sift: warning: {} over-long lines skipped in total", self.stats.too_long);
        }
        self.stats
    }

    fn stop(&mut self) {
        // Closing both channels wakes a worker blocked on either; then they exit.
        self.rx = None;
        self.free = None;
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A worker: under the lock take a free chunk and fill it; outside the lock split and hash it;
/// send it with its sequence number. A read error is sent with the next sequence number (so the
/// caller meets it after every chunk before it) and stops every worker.
fn worker(
    state: &Mutex<ReadState>,
    tx: &SyncSender<(u64, Result<Chunk>)>,
    split: Split,
    hasher: Option<Hasher>,
) {
    loop {
        let mut c;
        {
            let mut st = match state.lock() {
                Ok(s) => s,
                Err(_) => return,
            };
            if st.done {
                return;
            }
            c = match st.free.recv() {
                Ok(c) => c,
                Err(_) => return, // the caller is gone
            };
            match st.fill(&mut c) {
                Ok(true) => {}
                Ok(false) => {
                    st.done = true;
                    return;
                }
                Err(e) => {
                    st.done = true;
                    let seq = st.next_seq;
                    let _ = tx.send((seq, Err(e)));
                    return;
                }
            }
        }
        c.split(split, hasher);
        if tx.send((c.seq, Ok(c))).is_err() {
            return;
        }
    }
}

/// Counts the keys of `sources` (a first pass, to size a filter when `--items` is not given).
pub fn count_keys(sources: &[Source], split: Split, threads: usize) -> Result<u64> {
    let mut p = Pipeline::start(sources.to_vec(), split, None, threads);
    let mut n = 0u64;
    while let Some(c) = p.next()? {
        n += c.len() as u64;
        p.recycle(c);
    }
    p.finish();
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

    /// Per line: `Some((key, raw line))`, or `None` for an over-long line.
    type Lines = Vec<Option<(Vec<u8>, Vec<u8>)>>;

    /// The line-by-line reader the pipeline replaced, kept as the reference for its rules:
    /// `Some(key)` per key, `None` per over-long line, empty keys included.
    fn reference(input: &[u8], delim: u8, max_line: usize) -> Lines {
        let mut out = Vec::new();
        let mut rest = input;
        while !rest.is_empty() {
            let (raw, next) = match rest.iter().position(|&b| b == delim) {
                Some(i) => rest.split_at(i + 1),
                None => (rest, &rest[rest.len()..]),
            };
            rest = next;
            let mut key = raw.strip_suffix(&[delim]).unwrap_or(raw);
            if delim == b'\n' {
                key = key.strip_suffix(b"\r").unwrap_or(key);
            }
            if raw.len() > max_line + 1 || key.len() > max_line {
                out.push(None);
            } else {
                out.push(Some((key.to_vec(), raw.to_vec())));
            }
        }
        out
    }

    /// What the pipeline gives for `input` as one file: keys with their raw lines, and `None`
    /// where the warnings put an over-long line (by its line number).
    fn piped(
        dir: &Path,
        inputs: &[&[u8]],
        delim: u8,
        max_line: usize,
        threads: usize,
        chunk: usize,
    ) -> (Vec<Lines>, ReadStats) {
        let sources: Vec<Source> = inputs
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let p = dir.join(format!("in{i}"));
                std::fs::write(&p, bytes).unwrap();
                Source::File(p)
            })
            .collect();
        let hasher = Hasher::default();
        let split = Split { delim, max_line, skip_empty: false };
        let mut p = Pipeline::with_chunk_bytes(sources, split, Some(hasher), threads, chunk);
        let mut per_src: Vec<Lines> = vec![Vec::new(); inputs.len()];
        while let Some(c) = p.next().unwrap() {
            let out = &mut per_src[c.src];
            // Rebuild the line sequence: keys in order, over-long lines at their indexes.
            let mut keys = (0..c.len()).map(|i| {
                let (a, b) = c.raw_range(i);
                assert_eq!(c.digests[i], hasher.digest(c.key(i)));
                Some((c.key(i).to_vec(), c.bytes()[a..b].to_vec()))
            });
            let mut long = c.too_long_at.iter().peekable();
            for line in 0..c.lines {
                if long.peek() == Some(&&line) {
                    long.next();
                    out.push(None);
                } else {
                    out.push(keys.next().unwrap());
                }
            }
            assert!(keys.next().is_none());
            p.recycle(c);
        }
        let stats = p.finish();
        (per_src, stats)
    }

    #[test]
    fn chunks_split_like_the_line_reader() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for round in 0..300 {
            // Lines of 0 to ~40 bytes, now and then a long one, CRs, blank lines, and inputs
            // with and without a final separator; chunk sizes from 1 byte up.
            let delim = if round % 5 == 4 { 0 } else { b'\n' };
            let mut inputs = Vec::new();
            for _ in 0..1 + next() % 3 {
                let mut v = Vec::new();
                for _ in 0..next() % 60 {
                    let len = if next() % 17 == 0 { next() % 300 } else { next() % 40 };
                    v.extend((0..len).map(|_| b"ab\r\n\0xyz"[(next() % 8) as usize]).filter(|&b| b != delim));
                    if next() % 9 == 0 {
                        v.push(b'\r');
                    }
                    v.push(delim);
                }
                if next() % 2 == 0 {
                    v.extend_from_slice(b"tail");
                }
                inputs.push(v);
            }
            let max_line = [0usize, 1, 5, 20, 64, 1000][(next() % 6) as usize];
            let chunk = [1usize, 2, 7, 64, 1000, 1 << 20][(next() % 6) as usize];
            let threads = 1 + (next() % 3) as usize;
            let refs: Vec<&[u8]> = inputs.iter().map(|v| &v[..]).collect();
            let (got, stats) = piped(dir.path(), &refs, delim, max_line, threads, chunk);
            let mut too_long = 0;
            for (i, input) in inputs.iter().enumerate() {
                let want = reference(input, delim, max_line);
                too_long += want.iter().filter(|l| l.is_none()).count() as u64;
                assert_eq!(got[i], want, "round {round}, source {i}, max {max_line}, chunk {chunk}");
            }
            assert_eq!(stats.too_long, too_long);
        }
    }

    #[test]
    fn swar_finds_every_byte() {
        let mut rng = 99u64;
        for len in 0..200usize {
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    [0u8, 10, 13, 0x80, 0x8a, 0xff, 0x7f, 9][(rng >> 61) as usize]
                })
                .collect();
            for byte in [0u8, 10, 0x80, 0xff, 0x7f, 1] {
                let mut got = Vec::new();
                for_each_byte(&data, byte, |i| got.push(i));
                let want: Vec<usize> = (0..len).filter(|&i| data[i] == byte).collect();
                assert_eq!(got, want, "len {len} byte {byte}");
            }
        }
    }

    #[test]
    fn skips_empty_keys_and_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, b"a\n\n\r\nb\r\n\n").unwrap();
        let split = Split { delim: b'\n', max_line: 10, skip_empty: true };
        let mut pipe = Pipeline::with_chunk_bytes(vec![Source::File(p)], split, None, 2, 3);
        let mut keys = Vec::new();
        while let Some(c) = pipe.next().unwrap() {
            keys.extend((0..c.len()).map(|i| c.key(i).to_vec()));
            pipe.recycle(c);
        }
        let stats = pipe.finish();
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!((stats.keys, stats.empty, stats.too_long), (2, 3, 0));
    }

    #[test]
    fn a_missing_file_is_an_error_after_the_good_ones() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, b"x\ny\n").unwrap();
        let split = Split { delim: b'\n', max_line: 10, skip_empty: true };
        let sources = vec![Source::File(good), Source::File(dir.path().join("missing"))];
        let mut pipe = Pipeline::start(sources, split, None, 2);
        let first = pipe.next().unwrap().expect("the good file's chunk");
        assert_eq!(first.len(), 2);
        pipe.recycle(first);
        let err = pipe.next().err().expect("then the error");
        assert!(format!("{err:#}").contains("missing"), "{err:#}");
    }
}
