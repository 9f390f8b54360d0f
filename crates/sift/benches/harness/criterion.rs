//! The Criterion groups of a list of contenders: `build/…` (static filters, from the key slice,
//! hashing included), `insert/…` (the others: created empty outside the timing, then one insert
//! per key), `query_member/…` and `query_non_member/…`, each per key type and `n`, one benchmark
//! per implementation, so Criterion's report puts them side by side. Throughput is per key.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};

use super::contender::{Built, Contender, Make};
use super::keys::{members, non_members, Key};

/// Keys per query iteration: enough that loop overhead vanishes, few enough that a sample is quick.
const QUERY_BATCH: usize = 1 << 16;

/// `n` keys: `SIFT_BENCH_N` (default 1M) under `cargo bench`; 10k under `cargo test --benches`
/// (no `--bench` argument), where every benchmark runs once as a smoke test.
pub fn bench_n() -> usize {
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

/// The four groups for `contenders` on `n` keys of type `K` (filters created empty are sized for
/// `fpr`).
pub fn bench_contenders<K: Key>(c: &mut Criterion, contenders: &[Contender<K>], fpr: f64) {
    let n = bench_n();
    let members = members::<K>(n);
    let others = non_members::<K>(QUERY_BATCH.min(n).max(1));
    let member_probes = &members[..QUERY_BATCH.min(n)];
    let tag = format!("{}/n={}", K::NAME, label(n));

    let from_keys: Vec<_> = contenders.iter().filter(|ct| matches!(ct.make, Make::FromKeys(_))).collect();
    if !from_keys.is_empty() {
        let mut g = c.benchmark_group(format!("build/{tag}"));
        g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        g.throughput(Throughput::Elements(n as u64));
        for ct in from_keys {
            let Make::FromKeys(build) = &ct.make else { unreachable!() };
            g.bench_function(BenchmarkId::from_parameter(ct.name), |b| b.iter(|| build(black_box(&members))));
        }
        g.finish();
    }
    let empty: Vec<_> = contenders.iter().filter(|ct| matches!(ct.make, Make::Empty(_))).collect();
    if !empty.is_empty() {
        let mut g = c.benchmark_group(format!("insert/{tag}"));
        g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
        g.throughput(Throughput::Elements(n as u64));
        for ct in empty {
            let Make::Empty(make) = &ct.make else { unreachable!() };
            g.bench_function(BenchmarkId::from_parameter(ct.name), |b| {
                b.iter_batched_ref(
                    || make(n, fpr),
                    |f| f.insert_all(black_box(&members)),
                    BatchSize::PerIteration,
                )
            });
        }
        g.finish();
    }

    // Every filter built once for the query groups.
    let built: Vec<(&str, Box<dyn Built<K>>)> =
        contenders.iter().map(|ct| (ct.name, ct.build(&members, fpr).0)).collect();
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
