//! Criterion benchmarks of sift's Bloom family side by side with the peer crates.
//!
//! ```text
//! cargo bench -p sift --bench bloom_family                 # n = 1M keys, FPR 1%
//! SIFT_BENCH_N=10000000 cargo bench -p sift --bench bloom_family -- query_non_member
//! ```
//!
//! One Criterion group per workload (operation × key type × n), with one benchmark per
//! implementation, so Criterion's report puts them side by side. Throughput is per key.
//! The implementations are the list in `common/mod.rs`; `examples/bench_table.rs` measures the
//! same list in one process and prints the ratios the issue asks for.
//!
//! Under `cargo test --benches` (no `--bench` flag) every benchmark runs once on 10k keys.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};

use common::{Built, Key, Str20, FPR};

/// Keys per query iteration: enough that loop overhead vanishes, few enough that a sample is quick.
const QUERY_BATCH: usize = 1 << 16;

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

fn workload<K: Key>(c: &mut Criterion) {
    let n = bench_n();
    let members = common::members::<K>(n);
    let others = common::non_members::<K>(QUERY_BATCH.min(n).max(1));
    let member_probes = &members[..QUERY_BATCH.min(n)];
    let contenders = common::contenders::<K>();
    let tag = format!("{}/n={}", K::NAME, label(n));

    {
        let mut g = c.benchmark_group(format!("insert/{tag}"));
        g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        g.throughput(Throughput::Elements(n as u64));
        for ct in &contenders {
            g.bench_function(BenchmarkId::from_parameter(ct.name), |b| {
                b.iter_batched_ref(
                    || (ct.make)(n, FPR),
                    |f| f.insert_all(black_box(&members)),
                    BatchSize::PerIteration,
                )
            });
        }
        g.finish();
    }

    // Build every filter once for the query groups.
    let built: Vec<(&str, Box<dyn Built<K>>)> = contenders
        .iter()
        .map(|ct| {
            let mut f = (ct.make)(n, FPR);
            f.insert_all(&members);
            (ct.name, f)
        })
        .collect();

    for (group, probes) in [("query_member", member_probes), ("query_non_member", &others[..])] {
        let mut g = c.benchmark_group(format!("{group}/{tag}"));
        g.sample_size(20).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        g.throughput(Throughput::Elements(probes.len() as u64));
        for (name, f) in &built {
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter(|| f.count_hits(black_box(probes)))
            });
        }
        g.finish();
    }
}

fn bloom_family(c: &mut Criterion) {
    workload::<u64>(c);
    workload::<Str20>(c);
}

criterion_group!(benches, bloom_family);
criterion_main!(benches);
