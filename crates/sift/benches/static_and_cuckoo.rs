//! Criterion benchmarks of issue 3: sift's static filters (BinaryFuse8/16, Xor8, Gcs), Cuckoo and
//! Quotient side by side with xorf, qfilter, cuckoofilter and scalable_cuckoo_filter.
//!
//! ```text
//! cargo bench -p sift --bench static_and_cuckoo                          # n = 1M
//! SIFT_BENCH_N=10000000 cargo bench -p sift --bench static_and_cuckoo -- query_non_member
//! ```
//!
//! Groups: `build/…` (static filters, from the key slice, hashing included), `insert/…` (dynamic
//! filters, create + one insert per key), `query_member/…`, `query_non_member/…`, each × key type
//! × n, one benchmark per implementation. The implementations and how each peer is hashed are in
//! `common3/mod.rs`; `examples/bench_table3.rs` measures the same list in one process and prints
//! the ratios. Under `cargo test --benches` every benchmark runs once on 10k keys.

mod common3;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};

use common3::{Key, Str20, FPR};

/// Keys per query iteration.
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
    let members = common3::members::<K>(n);
    let others = common3::non_members::<K>(QUERY_BATCH.min(n).max(1));
    let member_probes = &members[..QUERY_BATCH.min(n)];
    let tag = format!("{}/n={}", K::NAME, label(n));

    let statics = common3::static_contenders::<K>();
    {
        let mut g = c.benchmark_group(format!("build/{tag}"));
        g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        g.throughput(Throughput::Elements(n as u64));
        for ct in &statics {
            g.bench_function(BenchmarkId::from_parameter(ct.name), |b| {
                b.iter(|| (ct.build)(black_box(&members)))
            });
        }
        g.finish();
    }
    let dynamics = common3::dynamic_contenders::<K>();
    {
        let mut g = c.benchmark_group(format!("insert/{tag}"));
        g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        g.throughput(Throughput::Elements(n as u64));
        for ct in &dynamics {
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

    let built_static: Vec<_> = statics.iter().map(|ct| (ct.name, (ct.build)(&members))).collect();
    let built_dynamic: Vec<_> = dynamics
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
        for (name, f) in &built_static {
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter(|| f.count_hits(black_box(probes)))
            });
        }
        for (name, f) in &built_dynamic {
            g.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter(|| f.count_hits(black_box(probes)))
            });
        }
        g.finish();
    }
}

fn static_and_cuckoo(c: &mut Criterion) {
    workload::<u64>(c);
    workload::<Str20>(c);
}

criterion_group!(benches, static_and_cuckoo);
criterion_main!(benches);
