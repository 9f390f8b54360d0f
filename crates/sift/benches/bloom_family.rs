//! Criterion benchmarks of sift's Bloom family side by side with the peer crates.
//!
//! ```text
//! cargo bench -p sift-filters --bench bloom_family                 # n = 1M keys, FPR 1%
//! SIFT_BENCH_N=10000000 cargo bench -p sift-filters --bench bloom_family -- query_non_member
//! ```
//!
//! The implementations are those of `harness/bloom.rs` (groups: `harness/criterion.rs`);
//! `cargo bench -p sift-filters --bench table -- --workload bloom` measures the same list in one
//! process and prints the ratios the issue asks for. Under `cargo test --benches` (no `--bench`
//! flag) every benchmark runs once on 10k keys.

mod harness;

use criterion::{criterion_group, criterion_main, Criterion};

use harness::bloom::BloomFamily;
use harness::contender::Workload;
use harness::criterion::bench_contenders;
use harness::keys::Str20;

fn bloom_family(c: &mut Criterion) {
    bench_contenders::<u64>(c, &BloomFamily::contenders(), BloomFamily::FPR);
    bench_contenders::<Str20>(c, &BloomFamily::contenders(), BloomFamily::FPR);
}

criterion_group!(benches, bloom_family);
criterion_main!(benches);
