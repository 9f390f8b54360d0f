//! Criterion benchmarks of issue 3: sift's static filters (BinaryFuse8/16, Xor8, Gcs), Cuckoo and
//! Quotient side by side with xorf, qfilter, cuckoofilter and scalable_cuckoo_filter.
//!
//! ```text
//! cargo bench -p sift-filters --bench static_and_cuckoo                          # n = 1M
//! SIFT_BENCH_N=10000000 cargo bench -p sift-filters --bench static_and_cuckoo -- query_non_member
//! ```
//!
//! The implementations and how each peer is hashed are in `harness/static_filters.rs` and
//! `harness/cuckoo_quotient.rs` (groups: `harness/criterion.rs`); `cargo bench -p sift-filters
//! --bench table -- --workload static,cuckoo-quotient` measures the same lists in one process and
//! prints the ratios. Under `cargo test --benches` every benchmark runs once on 10k keys.

mod harness;

use criterion::{criterion_group, criterion_main, Criterion};

use harness::contender::{Contender, Workload};
use harness::criterion::bench_contenders;
use harness::cuckoo_quotient::CuckooQuotient;
use harness::keys::{Key, Str20};
use harness::static_filters::StaticFilters;

fn contenders<K: Key>() -> Vec<Contender<K>> {
    let mut list = StaticFilters::contenders::<K>();
    list.extend(CuckooQuotient::contenders::<K>());
    list
}

fn static_and_cuckoo(c: &mut Criterion) {
    // The static filters ignore the FPR (each has its own); Cuckoo and Quotient are sized for it.
    bench_contenders::<u64>(c, &contenders(), CuckooQuotient::FPR);
    bench_contenders::<Str20>(c, &contenders(), CuckooQuotient::FPR);
}

criterion_group!(benches, static_and_cuckoo);
criterion_main!(benches);
