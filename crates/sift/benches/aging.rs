//! Criterion benchmarks of the sliding-window filters side by side with sift's `BlockedBloom` at
//! the same window size (the number of items the window holds), FPR 1%.
//!
//! ```text
//! cargo bench -p sift --bench aging                      # window n = 1M
//! SIFT_BENCH_N=10000000 cargo bench -p sift --bench aging -- query_non_member
//! ```
//!
//! Contenders, each holding a full window of `n` 8-byte keys when measured:
//! * `blocked-bloom`: `BlockedBloom::new(n, 0.01)` holding `n` keys;
//! * `aging-bloom`: `AgingBloom::new(n, 0.01)` after `2n` insertions (the ring has turned, every
//!   generation is in the steady state);
//! * `time-limited-bloom`: `TimeLimitedBloom::new(T, n, 0.01)`, `n` insertions per `T`, after
//!   two `T` of insertions at that rate.
//!
//! Workloads (throughput per key): `insert` (`n` more keys; for the aging filters that includes
//! the generation shifts and, for the timed one, the clock), `query_member` (the last 64k keys
//! inserted), `query_non_member` (64k keys never inserted). Self-contained: it shares no code
//! with the other benches. Under `cargo test --benches` every benchmark runs once on 10k keys.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use sift::prelude::*;
use sift::{AgingBloom, BlockedBloom, TimeLimitedBloom};

const FPR: f64 = 0.01;
/// Keys per query iteration.
const QUERY_BATCH: usize = 1 << 16;
/// The TTL of the timed filter (its clock units per window).
const TTL: u64 = 60_000_000;

fn bench_n() -> usize {
    if !std::env::args().any(|a| a == "--bench") {
        return 10_000;
    }
    std::env::var("SIFT_BENCH_N").ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(1_000_000)
}

fn label(n: usize) -> String {
    match n {
        n if n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

/// Key `i` of stream `s`: 8 bytes, distinct for distinct `(s, i)`.
fn key(s: u64, i: u64) -> [u8; 8] {
    let mut z = (s << 40 | i).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).to_le_bytes()
}

fn keys(s: u64, n: usize) -> Vec<[u8; 8]> {
    (0..n as u64).map(|i| key(s, i)).collect()
}

/// One contender: a full filter and how to insert a stream into it.
trait Subject {
    fn add_all(&mut self, keys: &[[u8; 8]]);
    fn hits(&self, keys: &[[u8; 8]]) -> usize;
}

impl Subject for BlockedBloom {
    #[inline(never)]
    fn add_all(&mut self, keys: &[[u8; 8]]) {
        for k in keys {
            self.insert(black_box(k));
        }
    }
    #[inline(never)]
    fn hits(&self, keys: &[[u8; 8]]) -> usize {
        keys.iter().filter(|k| self.contains(black_box(k))).count()
    }
}

impl Subject for AgingBloom {
    #[inline(never)]
    fn add_all(&mut self, keys: &[[u8; 8]]) {
        for k in keys {
            self.insert(black_box(k));
        }
    }
    #[inline(never)]
    fn hits(&self, keys: &[[u8; 8]]) -> usize {
        keys.iter().filter(|k| self.contains(black_box(k))).count()
    }
}

/// The timed filter with the position of its stream: key `i` of a window of `n` goes in at
/// `i·TTL/n` after the start of that window.
#[derive(Clone)]
struct TimedStream {
    f: TimeLimitedBloom,
    n: u64,
    inserted: u64,
}

impl Subject for TimedStream {
    #[inline(never)]
    fn add_all(&mut self, keys: &[[u8; 8]]) {
        let step = TTL as f64 / self.n as f64;
        for k in keys {
            let now = 1 + (self.inserted as f64 * step) as u64;
            self.f.insert_at(black_box(k), now);
            self.inserted += 1;
        }
    }
    #[inline(never)]
    fn hits(&self, keys: &[[u8; 8]]) -> usize {
        keys.iter().filter(|k| self.f.contains(black_box(k))).count()
    }
}

fn aging(c: &mut Criterion) {
    let n = bench_n();
    let tag = format!("u64/n={}", label(n));
    let (first, second, more) = (keys(1, n), keys(2, n), keys(3, n));
    let others = keys(4, QUERY_BATCH.min(n));
    let recent = &second[n - QUERY_BATCH.min(n)..];

    let mut blocked = BlockedBloom::new(n, FPR).unwrap();
    blocked.add_all(&second);
    let mut aging = AgingBloom::new(n, FPR).unwrap();
    aging.add_all(&first);
    aging.add_all(&second);
    let mut timed = TimedStream { f: TimeLimitedBloom::new(TTL, n, FPR).unwrap(), n: n as u64, inserted: 0 };
    timed.add_all(&first);
    timed.add_all(&second);
    for (name, hits) in [
        ("blocked-bloom", blocked.hits(recent)),
        ("aging-bloom", aging.hits(recent)),
        ("time-limited-bloom", timed.hits(recent)),
    ] {
        assert_eq!(hits, recent.len(), "{name}: a member of the window is missing");
    }

    {
        let mut g = c.benchmark_group(format!("insert/{tag}"));
        g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::from_parameter("blocked-bloom"), |b| {
            b.iter_batched_ref(
                || BlockedBloom::new(n, FPR).unwrap(),
                |f| f.add_all(&more),
                BatchSize::PerIteration,
            )
        });
        g.bench_function(BenchmarkId::from_parameter("aging-bloom"), |b| {
            b.iter_batched_ref(|| aging.clone(), |f| f.add_all(&more), BatchSize::PerIteration)
        });
        g.bench_function(BenchmarkId::from_parameter("time-limited-bloom"), |b| {
            b.iter_batched_ref(|| timed.clone(), |f| f.add_all(&more), BatchSize::PerIteration)
        });
        g.finish();
    }

    let subjects: [(&str, &dyn Subject); 3] =
        [("blocked-bloom", &blocked), ("aging-bloom", &aging), ("time-limited-bloom", &timed)];
    for (group, probes) in [("query_member", recent), ("query_non_member", &others[..])] {
        let mut g = c.benchmark_group(format!("{group}/{tag}"));
        g.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        g.throughput(Throughput::Elements(probes.len() as u64));
        for (name, f) in subjects {
            g.bench_function(BenchmarkId::from_parameter(name), |b| b.iter(|| f.hits(black_box(probes))));
        }
        g.finish();
    }
}

criterion_group!(benches, aging);
criterion_main!(benches);
