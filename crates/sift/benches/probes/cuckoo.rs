//! Diagnostic for tuning the cuckoo filter (not part of the published tables): fills
//! `Cuckoo::new(n, 0.01)` with `n` u64 keys and prints the insert time per tenth of the fill and
//! the query times, next to the cuckoofilter crate with its default hasher.
//!
//! `cargo bench -p sift-filters --bench cuckoo_probe -- [--n 1M] [--rounds 3]`
#[path = "../harness/mod.rs"]
mod harness;
use harness::args::{run, Args};
use harness::keys::{self, Key};
use harness::measure::{cpu_ns, fill_in_tenths};
use sift::prelude::*;
use std::hint::black_box;

fn main() -> std::process::ExitCode {
    run(|| {
        let mut a = Args::from_env(
            "usage: cargo bench -p sift-filters --bench cuckoo_probe -- [--n 1M] [--rounds 3]",
        )?;
        let n = a.count("--n", 1_000_000)?.max(1);
        let rounds = a.count("--rounds", 3)?.max(1);
        a.finish()?;
        probe(n, rounds);
        Ok(())
    })
}

fn probe(n: usize, rounds: usize) {
    let keys: Vec<u64> = keys::members::<u64>(n);
    let others: Vec<u64> = keys::non_members::<u64>(n);
    for _ in 0..rounds {
        // The reference of issue 3: the cuckoofilter crate with its default hasher (SipHash-1-3),
        // sized as in the table program (`harness/cuckoo_quotient.rs`).
        let t = cpu_ns();
        let mut c = cuckoofilter::CuckooFilter::<std::collections::hash_map::DefaultHasher>::with_capacity(
            (n as f64 / 0.95).ceil() as usize,
        );
        for k in &keys {
            black_box(c.add(black_box(k)).is_ok());
        }
        let cins = (cpu_ns() - t) / n as f64;
        let t = cpu_ns();
        let chits = keys.iter().filter(|k| c.contains(black_box(*k))).count();
        let cqm = (cpu_ns() - t) / n as f64;
        let t = cpu_ns();
        black_box(others.iter().filter(|k| c.contains(black_box(*k))).count());
        let cqn = (cpu_ns() - t) / n as f64;
        assert_eq!(chits, n);
        drop(c);
        let mut f = sift::Cuckoo::new(n, 0.01).unwrap();
        let (ins, tenths) = fill_in_tenths(&keys, |k| {
            black_box(f.try_insert(black_box(k).bytes()).is_ok());
        });
        let t = cpu_ns();
        let hits = keys.iter().filter(|k| f.contains(black_box(k.bytes()))).count();
        let qm = (cpu_ns() - t) / n as f64;
        let t = cpu_ns();
        let fp = others.iter().filter(|k| f.contains(black_box(k.bytes()))).count();
        let qn = (cpu_ns() - t) / n as f64;
        assert_eq!(hits, n);
        println!(
            "insert {ins:.1} ns/key [{}] query {qm:.1} / {qn:.1} ns fpr {:.4}% load {:.4} stash {}",
            tenths,
            fp as f64 * 100.0 / n as f64,
            f.load_factor(),
            f.stash_len()
        );
        println!(
            "  cuckoofilter (SipHash) insert {cins:.1} query {cqm:.1} / {cqn:.1}; ratios insert {:.2} query {:.2} / {:.2}",
            ins / cins,
            qm / cqm,
            qn / cqn
        );
    }
}
