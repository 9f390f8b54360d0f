//! The batch experiment (`--workload bloom-batch`): `contains_many` against one `contains` per
//! key, on a filter far larger than the caches (default 2^27 keys, ~160 MB for Bloom;
//! `--batch-keys 1G` gives a 1.2 GB Bloom filter and takes minutes to build).

use std::hint::black_box;
use std::time::Instant;

use sift::prelude::*;

use super::keys::{mix64, Key};
use super::measure::{median, Stopwatch};
use super::table::Options;

/// Adapts sift's Bloom families with a batch query.
macro_rules! batch_subjects {
    ($($t:ty),* $(,)?) => {$(
        impl BatchSubject for $t {
            fn make(n: usize, fpr: f64) -> Self {
                <$t>::new(n, fpr).expect("valid benchmark parameters")
            }
            fn insert_batch(&mut self, keys: &[[u8; 8]]) {
                self.insert_many(keys);
            }
            fn count_single(&self, keys: &[[u8; 8]]) -> usize {
                let mut hits = 0usize;
                for k in keys {
                    hits += self.contains(black_box(k)) as usize;
                }
                hits
            }
            fn count_batch(&self, keys: &[[u8; 8]]) -> usize {
                self.contains_many(black_box(keys)).into_iter().filter(|&b| b).count()
            }
            fn bytes(&self) -> usize {
                self.size_in_bytes()
            }
        }
    )*};
}

batch_subjects!(sift::Bloom, sift::BlockedBloom, sift::AtomicBloom);

/// A sift filter in the batch experiment (u64 keys as their 8-byte little-endian image).
pub trait BatchSubject: Sized {
    /// An empty filter for `n` keys at `fpr`.
    fn make(n: usize, fpr: f64) -> Self;
    /// Bulk insert (the fastest way to fill a large filter; not what is measured).
    fn insert_batch(&mut self, keys: &[[u8; 8]]);
    /// Hits counted with one `contains` per key.
    fn count_single(&self, keys: &[[u8; 8]]) -> usize;
    /// Hits counted with `contains_many`.
    fn count_batch(&self, keys: &[[u8; 8]]) -> usize;
    /// Memory of the filter.
    fn bytes(&self) -> usize;
}

/// A sift family in the batch experiment.
pub struct BatchContender {
    /// Row name.
    pub name: &'static str,
    /// Builds a filter holding keys `0..n` and returns it type-erased.
    pub build: fn(usize, f64) -> Box<dyn BatchBuilt>,
}

/// A built filter of the batch experiment.
pub trait BatchBuilt {
    /// See [`BatchSubject::count_single`].
    fn count_single(&self, keys: &[[u8; 8]]) -> usize;
    /// See [`BatchSubject::count_batch`].
    fn count_batch(&self, keys: &[[u8; 8]]) -> usize;
    /// See [`BatchSubject::bytes`].
    fn bytes(&self) -> usize;
}

impl<T: BatchSubject> BatchBuilt for T {
    fn count_single(&self, keys: &[[u8; 8]]) -> usize {
        BatchSubject::count_single(self, keys)
    }
    fn count_batch(&self, keys: &[[u8; 8]]) -> usize {
        BatchSubject::count_batch(self, keys)
    }
    fn bytes(&self) -> usize {
        BatchSubject::bytes(self)
    }
}

/// Makes a filter of `n` u64 members, inserted in chunks so that the keys never all exist at once
/// (a 1-billion-key run would otherwise need 8 GB of keys).
pub fn build_batch<T: BatchSubject + 'static>(n: usize, fpr: f64) -> Box<dyn BatchBuilt> {
    let mut f = T::make(n, fpr);
    let mut chunk = Vec::with_capacity(1 << 20);
    let mut i = 0u64;
    while i < n as u64 {
        let end = (i + (1 << 20)).min(n as u64);
        chunk.clear();
        chunk.extend((i..end).map(|j| u64::nth(j).bytes()));
        f.insert_batch(&chunk);
        i = end;
    }
    Box::new(f)
}

/// The sift families in the batch experiment. A new family: add it to `batch_subjects!` and here.
pub fn batch_contenders() -> Vec<BatchContender> {
    vec![
        BatchContender { name: "sift Bloom", build: build_batch::<sift::Bloom> },
        BatchContender { name: "sift BlockedBloom", build: build_batch::<sift::BlockedBloom> },
        BatchContender { name: "sift AtomicBloom", build: build_batch::<sift::AtomicBloom> },
    ]
}

/// Runs the batch experiment: for each family, a filter of `--batch-keys` u64 keys queried with
/// `--batch-probes` keys (half members), with `contains` per key and with `contains_many`,
/// alternating which goes first.
pub fn run(args: &Options) -> Result<(), String> {
    let n = args.batch_keys;
    let m = args.batch_probes;
    // Half members (spread over the whole key range), half non-members.
    let probes: Vec<[u8; 8]> = (0..m as u64)
        .map(|i| {
            let j = if i % 2 == 0 { mix64(i) % n as u64 } else { i | 1 << 63 };
            u64::nth(j).bytes()
        })
        .collect();
    println!("\n### Batch: `contains_many` vs one `contains` per key, u64 keys, n = {n}, {m} probes (half members)\n");
    println!("| filter | memory MB | build s (wall) | contains ns/probe | contains_many ns/probe | single / batch |");
    println!("|---|---:|---:|---:|---:|---:|");
    for c in batch_contenders() {
        if !args.selects(c.name) {
            continue;
        }
        let t = Instant::now();
        let f =
            (c.build)(n, args.fpr.unwrap_or(<super::bloom::BloomFamily as super::contender::Workload>::FPR));
        let build = t.elapsed();
        eprintln!("[batch] {} built with {n} keys in {build:.1?}", c.name);
        let (mut single, mut batch) = (vec![], vec![]);
        for round in 0..args.rounds {
            // Alternate which goes first, so neither always runs on a warmer cache/TLB.
            let order: [bool; 2] = if round % 2 == 0 { [false, true] } else { [true, false] };
            for is_batch in order {
                let t = Stopwatch::start();
                let hits = if is_batch {
                    f.count_batch(black_box(&probes))
                } else {
                    f.count_single(black_box(&probes))
                };
                let ns = t.ns_per(m);
                black_box(hits);
                if is_batch {
                    batch.push(ns)
                } else {
                    single.push(ns)
                }
            }
        }
        let (s, b) = (median(&single), median(&batch));
        println!(
            "| {} | {:.1} | {:.1} | {s:.1} | {b:.1} | **{:.2}** |",
            c.name,
            f.bytes() as f64 / 1e6,
            build.as_secs_f64(),
            s / b
        );
    }
    Ok(())
}
