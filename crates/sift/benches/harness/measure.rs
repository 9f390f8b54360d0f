//! What the table program and the probes measure with: a counting allocator for the heap a filter
//! holds (and the peak a build needs), a stopwatch on the thread's CPU time, medians, and the
//! same per-tenth fill timing for the probes. One copy, so every program uses the same yardsticks.
//!
//! The allocator counts only where a program installs it:
//! `#[global_allocator] static ALLOC: harness::measure::Counting = harness::measure::Counting;`
//! (the table program and the probes that report memory do; the Criterion benches do not).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::Instant;

/// Counts live heap bytes (and their peak), so that every implementation's memory is measured
/// the same way. Counts nothing unless installed as the program's global allocator.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: isize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the counters
// have no effect on the memory returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is; `ptr` came from this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            grew(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Heap bytes live now (allocated through [`Counting`] and not freed).
pub fn live_bytes() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Starts a new peak measurement at the bytes live now.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// The most heap bytes live at once since [`reset_peak`].
pub fn peak_bytes() -> isize {
    PEAK.load(Ordering::Relaxed)
}

/// This thread's CPU time in ns (Linux: `CLOCK_THREAD_CPUTIME_ID`), `None` where it is missing.
pub fn thread_cpu_ns() -> Option<u128> {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant Linux supports.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 {
            return Some(ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128);
        }
    }
    None
}

/// This thread's CPU time in ns, for the probes' own timing (a thread CPU clock is required).
pub fn cpu_ns() -> f64 {
    thread_cpu_ns().expect("a thread CPU clock (Linux)") as f64
}

static USE_WALL: AtomicBool = AtomicBool::new(false);

/// Measure wall-clock time instead of thread CPU time (`--wall`).
pub fn use_wall_clock() {
    USE_WALL.store(true, Ordering::Relaxed);
}

/// A stopwatch on this thread's CPU time: on a shared machine the time the thread spends
/// descheduled behind other processes is not counted. With [`use_wall_clock`] (or on other
/// systems) it measures wall-clock time.
#[derive(Clone, Copy)]
pub struct Stopwatch {
    wall: Instant,
    cpu_ns: Option<u128>,
}

impl Stopwatch {
    /// Starts now.
    pub fn start() -> Self {
        let cpu_ns = if USE_WALL.load(Ordering::Relaxed) { None } else { thread_cpu_ns() };
        Stopwatch { wall: Instant::now(), cpu_ns }
    }

    /// Nanoseconds since [`Stopwatch::start`].
    pub fn ns(&self) -> f64 {
        match (self.cpu_ns, thread_cpu_ns()) {
            (Some(a), Some(b)) => (b - a) as f64,
            _ => self.wall.elapsed().as_nanos() as f64,
        }
    }

    /// Nanoseconds since [`Stopwatch::start`] per one of `count` operations.
    pub fn ns_per(&self, count: usize) -> f64 {
        self.ns() / count.max(1) as f64
    }
}

/// The clock the tables are in, for their headings.
pub fn clock_name() -> &'static str {
    if !USE_WALL.load(Ordering::Relaxed) && thread_cpu_ns().is_some() {
        "thread CPU time"
    } else {
        "wall time"
    }
}

/// The median; NaN for no values.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// `1000000`, `1_000_000`, `1M`, `10m`, `250k`, `1G` (powers of ten), `2^27`, `1e6`.
pub fn parse_count(s: &str) -> Result<usize, String> {
    let t = s.replace('_', "");
    if let Some((m, e)) = t.split_once(['e', 'E']) {
        let (m, e): (f64, i32) = match (m.parse(), e.parse()) {
            (Ok(m), Ok(e)) => (m, e),
            _ => return Err(format!("bad number {s:?}")),
        };
        let v = m * 10f64.powi(e);
        return if v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(63) {
            Ok(v as usize)
        } else {
            Err(format!("{s}: not a whole count"))
        };
    }
    if let Some((b, e)) = t.split_once('^') {
        let b: u32 = b.parse().map_err(|_| format!("bad number {s:?}"))?;
        let e: u32 = e.parse().map_err(|_| format!("bad number {s:?}"))?;
        return b.checked_pow(e).map(|v| v as usize).ok_or(format!("{s} overflows"));
    }
    let (digits, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1_000),
        Some('m' | 'M') => (&t[..t.len() - 1], 1_000_000),
        Some('g' | 'G') => (&t[..t.len() - 1], 1_000_000_000),
        _ => (&t[..], 1),
    };
    digits.parse::<usize>().ok().and_then(|v| v.checked_mul(mult)).ok_or_else(|| format!("bad number {s:?}"))
}

/// Calls `add` on every item in order, timing each tenth of them: returns the overall ns per item
/// and the tenths as `"0:12 1:13 …"` (ns per item of each tenth), which shows how an insert's cost
/// grows as a table fills (the diagnostic probes print it; the tables do not use it).
pub fn fill_in_tenths<T>(items: &[T], mut add: impl FnMut(&T)) -> (f64, String) {
    let all = Stopwatch::start();
    let mut tenths = Vec::new();
    for (c, chunk) in items.chunks(items.len().div_ceil(10).max(1)).enumerate() {
        let t = Stopwatch::start();
        for item in chunk {
            add(item);
        }
        tenths.push(format!("{}:{:.0}", c, t.ns_per(chunk.len())));
    }
    (all.ns_per(items.len()), tenths.join(" "))
}
