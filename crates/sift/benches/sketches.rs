//! Library baselines for RedisBloom's sketches (`sift::compat::redisbloom`), the work under
//! `CMS.INCRBY` / `CMS.QUERY`, `TOPK.ADD` and `TDIGEST.ADD` without any server around it:
//!
//! ```text
//! cargo bench -p sift-filters --bench sketches
//! ```
//!
//! * `cms/incr_by`, `cms/query`: a 2000 × 7 sketch (`CMS.INITBYPROB k 0.001 0.01`), 16-byte
//!   items, one call per item.
//! * `topk/add`: `TOPK.RESERVE k 50 2000 7 0.925` and the default shape `TOPK.RESERVE k 50`
//!   (8 × 7, decay 0.9, where nearly every add collides and draws), items from a skewed
//!   distribution over 10 000 names.
//! * `tdigest/add_100`: 100 values per call into a compression-100 digest (`TDIGEST.ADD k v1 …
//!   v100`), the compressions included.
//!
//! Under `cargo test --benches` every benchmark runs once.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sift::compat::redisbloom::{CRand, CountMinSketch, TDigest, TopK};

const ITEMS: usize = 1 << 16;

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// 16-byte item names; with `skewed`, name `i` is drawn with probability about ∝ 1/i (a
/// log-uniform index), like the heavy hitters Top-K is for.
fn items(skewed: bool) -> Vec<[u8; 16]> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..ITEMS)
        .map(|_| {
            let r = xorshift(&mut x);
            let i = if skewed { (10_000f64.powf((r >> 11) as f64 / (1u64 << 53) as f64)) as u64 } else { r };
            let mut name = *b"item:00000000000";
            name[5..].copy_from_slice(format!("{:011}", i % 100_000_000_000).as_bytes());
            name
        })
        .collect()
}

fn cms(c: &mut Criterion) {
    let items = items(false);
    let mut g = c.benchmark_group("cms");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(ITEMS as u64));
    let mut sketch = CountMinSketch::init_by_prob(0.001, 0.01, u64::MAX).unwrap();
    g.bench_function("incr_by/2000x7", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for it in &items {
                sum += sketch.incr_by(black_box(it), 1) as u64;
            }
            sum
        })
    });
    g.bench_function("query/2000x7", |b| {
        b.iter(|| items.iter().map(|it| sketch.query(black_box(it)) as u64).sum::<u64>())
    });
    g.finish();
}

fn topk(c: &mut Criterion) {
    let items = items(true);
    let mut g = c.benchmark_group("topk");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(ITEMS as u64));
    for (label, w, d, decay) in [("k50_2000x7", 2000, 7, 0.925), ("k50_default_8x7", 8, 7, 0.9)] {
        let mut t = TopK::reserve(50, w, d, decay, u64::MAX).unwrap();
        let mut rng = CRand::default();
        g.bench_function(format!("add/{label}"), |b| {
            b.iter(|| {
                let mut expelled = 0usize;
                for it in &items {
                    expelled += t.add(black_box(it), &mut rng).is_some() as usize;
                }
                expelled
            })
        });
    }
    g.finish();
}

fn tdigest(c: &mut Criterion) {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let values: Vec<f64> = (0..ITEMS).map(|_| (xorshift(&mut x) >> 11) as f64 / 1e9).collect();
    let mut g = c.benchmark_group("tdigest");
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(ITEMS as u64));
    let mut t = TDigest::new(100.0, u64::MAX).unwrap();
    g.bench_function("add_100/compression100", |b| {
        b.iter(|| {
            for call in values.chunks(100) {
                for &v in call {
                    t.add(black_box(v)).unwrap();
                }
            }
        })
    });
    g.finish();
}

criterion_group!(benches, cms, topk, tdigest);
criterion_main!(benches);
