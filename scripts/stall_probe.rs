//! How long a writer of one big value waits while a snapshot or a log rewrite runs (issue 15
//! item 7): the client half of `scripts/bench_snapshot_stall.sh`, in Rust so that the timing
//! is the probe's own (no interpreter lock, no garbage collector between two timestamps).
//! Standard library only: the script compiles it with `rustc -O`, without the workspace's
//! dependencies.
//!
//! One thread sends the write given by `--write` (its `{}` replaced by a fresh random item)
//! in a loop, unpipelined, and timestamps each; after `--warmup` seconds another connection
//! sends `--snapshot` (`BGSAVE` or `BGREWRITEAOF`) and polls `INFO persistence` every 10 ms
//! until neither a snapshot nor a rewrite is in progress; the writer goes on `--after` seconds
//! more. With `--snapshot none` nothing is sent and the "during" window is `--window` seconds
//! long: the same writer's waits with no snapshot at all, the machine's own.
//!
//! Prints one Markdown row: the worst write before the window (from one second after the
//! start, the connection warm), the worst, p99 and p99.9 during it, the worst per GB of
//! `--bytes`, the window's length, and, on stderr, the five worst writes with their times
//! relative to the window's start.
//!
//! ```text
//! stall_probe --port 6379 --write "CMS.INCRBY big {} 1" --snapshot bgsave --bytes 1200000000
//! ```
//!
//! Run it (and the server) under real-time scheduling (`chrt -f 10`) on a shared machine, so
//! that another user's compile does not preempt either between two timestamps.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    port: u16,
    write: Vec<String>,
    snapshot: String,
    warmup: f64,
    after: f64,
    window: f64,
    bytes: u64,
    label: String,
    schedstat: bool,
    server_pid: u32,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        port: 0,
        write: Vec::new(),
        snapshot: "bgsave".into(),
        warmup: 2.0,
        after: 0.5,
        window: 10.0,
        bytes: 0,
        label: "sift-server".into(),
        schedstat: false,
        server_pid: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<f64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--port" => a.port = v.parse().map_err(|e| format!("--port {v}: {e}"))?,
            "--write" => a.write = v.split_whitespace().map(str::to_owned).collect(),
            "--snapshot" => a.snapshot = v.to_ascii_lowercase(),
            "--warmup" => a.warmup = num(&v)?,
            "--after" => a.after = num(&v)?,
            "--window" => a.window = num(&v)?,
            "--bytes" => a.bytes = v.parse().map_err(|e| format!("--bytes {v}: {e}"))?,
            "--label" => a.label = v,
            "--schedstat" => a.schedstat = v == "1",
            "--server-pid" => a.server_pid = v.parse().map_err(|e| format!("--server-pid {v}: {e}"))?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.port == 0 || a.write.is_empty() || a.bytes == 0 {
        return Err("--port, --write and --bytes are required".into());
    }
    if !["bgsave", "bgrewriteaof", "none"].contains(&a.snapshot.as_str()) {
        return Err(format!("--snapshot must be bgsave, bgrewriteaof or none, not {}", a.snapshot));
    }
    Ok(a)
}

/// One RESP connection: commands out as arrays of bulk strings, replies read whole.
struct Conn {
    out: TcpStream,
    inp: BufReader<TcpStream>,
    buf: Vec<u8>,
}

/// A reply, as far as the probe needs one.
enum Reply {
    Line,
    Error(String),
    Bulk(Vec<u8>),
    Other,
}

impl Conn {
    fn open(port: u16) -> std::io::Result<Conn> {
        let s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_nodelay(true)?;
        Ok(Conn { inp: BufReader::new(s.try_clone()?), out: s, buf: Vec::new() })
    }

    fn call<S: AsRef<[u8]>>(&mut self, argv: &[S]) -> std::io::Result<Reply> {
        self.buf.clear();
        write!(self.buf, "*{}\r\n", argv.len())?;
        for a in argv {
            let a = a.as_ref();
            write!(self.buf, "${}\r\n", a.len())?;
            self.buf.extend_from_slice(a);
            self.buf.extend_from_slice(b"\r\n");
        }
        self.out.write_all(&self.buf)?;
        self.read()
    }

    fn line(&mut self) -> std::io::Result<String> {
        let mut l = String::new();
        if self.inp.read_line(&mut l)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        Ok(l.trim_end().to_owned())
    }

    fn read(&mut self) -> std::io::Result<Reply> {
        let l = self.line()?;
        let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad reply {l:?}"));
        let (kind, rest) = (l.as_bytes().first().copied().ok_or_else(bad)?, &l[1..]);
        match kind {
            b'+' | b':' | b',' | b'#' => Ok(Reply::Line),
            b'-' => Ok(Reply::Error(rest.to_owned())),
            b'$' | b'=' => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    return Ok(Reply::Other);
                }
                let mut b = vec![0; n as usize + 2];
                std::io::Read::read_exact(&mut self.inp, &mut b)?;
                b.truncate(n as usize);
                Ok(Reply::Bulk(b))
            }
            b'*' | b'%' | b'~' => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                let per = if kind == b'%' { 2 } else { 1 };
                for _ in 0..n.max(0) * per {
                    if let Reply::Error(e) = self.read()? {
                        return Ok(Reply::Error(e));
                    }
                }
                Ok(Reply::Other)
            }
            b'_' => Ok(Reply::Other),
            _ => Err(bad()),
        }
    }
}

/// Whether `INFO persistence` says a snapshot or a log rewrite is in progress.
fn busy(c: &mut Conn) -> std::io::Result<bool> {
    let Reply::Bulk(info) = c.call(&["INFO", "persistence"])? else {
        return Err(std::io::Error::other("INFO persistence did not answer a bulk string"));
    };
    let info = String::from_utf8_lossy(&info);
    Ok(info.lines().any(|l| l == "rdb_bgsave_in_progress:1" || l == "aof_rewrite_in_progress:1"))
}

/// The items written: splitmix64 from a fixed seed, so every run writes the same sequence.
struct Items(u64);

impl Items {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// `CLOCK_MONOTONIC` now, in seconds: the clock of `perf record -k CLOCK_MONOTONIC`, so the
/// worst writes printed can be found in a trace of the server.
fn monotonic() -> f64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec (two 64-bit fields on 64-bit Linux, the only
    // platform this probe is built for); clock 1 is CLOCK_MONOTONIC, which always exists.
    let ok = unsafe { clock_gettime(1, &mut ts) };
    if ok != 0 {
        return f64::NAN;
    }
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("stall_probe: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&a) {
        eprintln!("stall_probe: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), String> {
    let t0 = Instant::now();
    let t0_mono = monotonic();
    let stop = Arc::new(AtomicBool::new(false));
    // (sent at, seconds after t0; latency, seconds), pre-sized so the writer never reallocates
    // a large buffer between two timestamps.
    let lat = Arc::new(Mutex::new(Vec::<(f64, f64)>::with_capacity(1 << 23)));
    // With `--schedstat 1`, per write: the writer thread's time on a CPU and time runnable but
    // waiting for one (/proc/thread-self/schedstat), to tell a wait for the server from the
    // probe's own wait for a CPU.
    let sched = Arc::new(Mutex::new(Vec::<(f64, f64)>::new()));
    // With `--server-pid` too: for each write slower than 5 ms, every server thread's (name,
    // time on a CPU, time runnable) during it, by the write's index.
    type ThreadTimes = Vec<(String, f64, f64)>;
    let server_sched = Arc::new(Mutex::new(std::collections::HashMap::<usize, ThreadTimes>::new()));
    let writer = {
        let (stop, lat, write, port) = (stop.clone(), lat.clone(), a.write.clone(), a.port);
        let (sched, want_sched) = (sched.clone(), a.schedstat);
        let (server_sched, server_pid) = (server_sched.clone(), a.server_pid);
        std::thread::spawn(move || -> Result<(), String> {
            let mut c = Conn::open(port).map_err(|e| format!("connect: {e}"))?;
            let mut items = Items(7);
            let mut argv: Vec<Vec<u8>> = write.iter().map(|w| w.as_bytes().to_vec()).collect();
            let slot = write.iter().position(|w| w == "{}").ok_or("--write has no {} for the item")?;
            let mut mine = Vec::with_capacity(1 << 23);
            let stat = if want_sched {
                Some(
                    std::fs::File::open("/proc/thread-self/schedstat")
                        .map_err(|e| format!("schedstat: {e}"))?,
                )
            } else {
                None
            };
            let mut mine_sched = Vec::with_capacity(if want_sched { 1 << 23 } else { 0 });
            let mut slow = std::collections::HashMap::new();
            let threads: Vec<(String, std::fs::File)> = if server_pid == 0 {
                Vec::new()
            } else {
                std::fs::read_dir(format!("/proc/{server_pid}/task"))
                    .map_err(|e| format!("/proc/{server_pid}/task: {e}"))?
                    .filter_map(|t| {
                        let t = t.ok()?.path();
                        let name = std::fs::read_to_string(t.join("comm")).ok()?;
                        let f = std::fs::File::open(t.join("schedstat")).ok()?;
                        Some((format!("{}/{}", name.trim(), t.file_name()?.to_string_lossy()), f))
                    })
                    .collect()
            };
            let read_stat = |f: &std::fs::File| -> (f64, f64) {
                let mut b = [0u8; 96];
                let n = std::os::unix::fs::FileExt::read_at(f, &mut b, 0).unwrap_or(0);
                let mut it = std::str::from_utf8(&b[..n]).unwrap_or("").split_whitespace();
                let mut next = || it.next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN) * 1e-9;
                (next(), next())
            };
            while !stop.load(Ordering::Relaxed) {
                argv[slot] = format!("k{}", items.next() >> 16).into_bytes();
                let s0 = stat.as_ref().map(read_stat);
                let t0s: Vec<(f64, f64)> = threads.iter().map(|(_, f)| read_stat(f)).collect();
                let sent = Instant::now();
                let r = c.call(&argv).map_err(|e| format!("write: {e}"))?;
                let took = sent.elapsed().as_secs_f64();
                if let (Some(f), Some((run0, wait0))) = (stat.as_ref(), s0) {
                    let (run1, wait1) = read_stat(f);
                    mine_sched.push((run1 - run0, wait1 - wait0));
                }
                if took > 0.005 && !threads.is_empty() {
                    let times = threads
                        .iter()
                        .zip(&t0s)
                        .map(|((name, f), &(r0, w0))| {
                            let (r1, w1) = read_stat(f);
                            (name.clone(), r1 - r0, w1 - w0)
                        })
                        .collect::<Vec<_>>();
                    slow.insert(mine.len(), times);
                }
                if let Reply::Error(e) = r {
                    return Err(format!("the write answered an error: {e}"));
                }
                mine.push(((sent - t0).as_secs_f64(), took));
            }
            *lat.lock().unwrap() = mine;
            *sched.lock().unwrap() = mine_sched;
            *server_sched.lock().unwrap() = slow;
            Ok(())
        })
    };
    std::thread::sleep(Duration::from_secs_f64(a.warmup));
    let mut c = Conn::open(a.port).map_err(|e| format!("connect: {e}"))?;
    let start = t0.elapsed().as_secs_f64();
    if a.snapshot == "none" {
        std::thread::sleep(Duration::from_secs_f64(a.window));
    } else {
        match c.call(&[a.snapshot.as_str()]).map_err(|e| e.to_string())? {
            Reply::Error(e) => return Err(format!("{} answered {e}", a.snapshot)),
            _ => {
                while busy(&mut c).map_err(|e| e.to_string())? {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
    let end = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs_f64(a.after));
    stop.store(true, Ordering::Relaxed);
    writer.join().map_err(|_| "the writer panicked".to_string())??;
    let lat = lat.lock().unwrap();
    let sched = sched.lock().unwrap();
    let server_sched = server_sched.lock().unwrap();
    // A write overlaps the window when it ended after its start and began before its end.
    let mut during: Vec<(f64, f64, usize)> = lat
        .iter()
        .enumerate()
        .filter(|&(_, &(t, l))| t + l >= start && t <= end)
        .map(|(i, &(t, l))| (t, l, i))
        .collect();
    let before = lat.iter().filter(|&&(t, l)| t >= 1.0 && t + l < start).map(|&(_, l)| l).fold(0.0, f64::max);
    during.sort_by(|x, y| x.1.total_cmp(&y.1));
    let q = |p: f64| {
        during
            .get(((during.len() as f64 * p) as usize).min(during.len().saturating_sub(1)))
            .map_or(f64::NAN, |x| x.1)
    };
    let worst = during.last().map_or(f64::NAN, |x| x.1);
    let gb = a.bytes as f64 / 1e9;
    println!(
        "| {} | {} | {} | {:.2} | {:.2} | {:.3} | {:.3} | {:.2} | {:.2} | {} |",
        a.label,
        a.snapshot,
        a.bytes,
        before * 1e3,
        worst * 1e3,
        q(0.99) * 1e3,
        q(0.999) * 1e3,
        worst * 1e3 / gb,
        end - start,
        during.len(),
    );
    let top: Vec<String> = during
        .iter()
        .rev()
        .take(5)
        .map(|&(t, l, i)| {
            let own = sched.get(i).map_or(String::new(), |&(run, wait)| {
                format!(", probe on a CPU {:.2} ms, runnable {:.2} ms", run * 1e3, wait * 1e3)
            });
            let server = server_sched.get(&i).map_or(String::new(), |times| {
                let busy: Vec<String> = times
                    .iter()
                    .filter(|t| t.1 + t.2 > 0.5e-3)
                    .map(|(n, r, w)| format!("{n} on a CPU {:.2} ms, runnable {:.2} ms", r * 1e3, w * 1e3))
                    .collect();
                format!("; server: {}", busy.join("; "))
            });
            format!("{:.2} ms at {:+.3} s (monotonic {:.6}{own}{server})", l * 1e3, t - start, t0_mono + t)
        })
        .collect();
    eprintln!("{}: worst during: {}", a.label, top.join(", "));
    Ok(())
}
