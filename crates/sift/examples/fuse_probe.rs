//! Diagnostic for the construction of the xor-family filters (not part of the published tables):
//! builds BinaryFuse8 (3- and 4-wise), BinaryFuse16 and Xor8 from `n` 8-byte items with
//! `build_with` (hashing included) and prints, per key, the time of each phase of the successful
//! and failed attempts (hash and place the keys, count, peel, assign, and allocate the scratch arrays; wall clock, median over
//! the rounds), the whole build, and the peak temporary memory: the most heap the build held at
//! once beyond the finished filter (from a counting global allocator), divided by `n`.
//!
//! `cargo run --release -p sift --example fuse_probe -- [--n 1M,10M] [--rounds 3]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use sift::filters::peel::{probe_start, probe_take};
use sift::prelude::*;
use sift::{Arity, BinaryFuse16, BinaryFuse8, Hasher, Xor8};

struct Peak;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counters are only statistics.
unsafe impl GlobalAlloc for Peak {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            let now = LIVE.fetch_add(new_size, Ordering::Relaxed) + new_size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Peak = Peak;

fn parse_count(s: &str) -> usize {
    let (num, mul) = match s.chars().last() {
        Some('M') => (&s[..s.len() - 1], 1_000_000),
        Some('K') | Some('k') => (&s[..s.len() - 1], 1_000),
        _ => (s, 1),
    };
    num.parse::<usize>().expect("a count like 1M or 250000") * mul
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One build: phase ns, total ns, peak temporary bytes.
type Run = ([u64; 5], u64, usize);

fn measure(build: &dyn Fn() -> usize) -> Run {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    probe_start();
    let t = Instant::now();
    let size = build();
    let total = t.elapsed().as_nanos() as u64;
    let phases = probe_take().expect("probe on");
    let temp = PEAK.load(Ordering::Relaxed) - base - size;
    (phases, total, temp)
}

fn main() {
    let mut ns = vec![1_000_000usize, 10_000_000];
    let mut rounds = 3usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--n" => ns = args.next().expect("--n N[,N..]").split(',').map(parse_count).collect(),
            "--rounds" => rounds = parse_count(&args.next().expect("--rounds R")).max(1),
            other => panic!("unknown argument {other:?}"),
        }
    }
    let h = Hasher::default();
    println!("| n | filter | hash+place | count | peel | assign | alloc | build ns/key | temp B/key |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &ns {
        let items: Vec<[u8; 8]> =
            (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes()).collect();
        type Build<'a> = (&'static str, Box<dyn Fn() -> usize + 'a>);
        let builds: Vec<Build> = vec![
            (
                "BinaryFuse8",
                Box::new(|| {
                    black_box(BinaryFuse8::build_with(&items, Arity::Three, h).unwrap()).size_in_bytes()
                }),
            ),
            (
                "BinaryFuse8 4-wise",
                Box::new(|| {
                    black_box(BinaryFuse8::build_with(&items, Arity::Four, h).unwrap()).size_in_bytes()
                }),
            ),
            (
                "BinaryFuse16",
                Box::new(|| {
                    black_box(BinaryFuse16::build_with(&items, Arity::Three, h).unwrap()).size_in_bytes()
                }),
            ),
            ("Xor8", Box::new(|| black_box(Xor8::build_with(&items, h).unwrap()).size_in_bytes())),
        ];
        for (name, build) in &builds {
            let runs: Vec<_> = (0..rounds).map(|_| measure(build.as_ref())).collect();
            let per = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
            let nf = n as f64;
            println!(
                "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
                n,
                name,
                per(&|r| r.0[0] as f64 / nf),
                per(&|r| r.0[1] as f64 / nf),
                per(&|r| r.0[2] as f64 / nf),
                per(&|r| r.0[3] as f64 / nf),
                per(&|r| r.0[4] as f64 / nf),
                per(&|r| r.1 as f64 / nf),
                per(&|r| r.2 as f64 / nf),
            );
        }
    }
}
