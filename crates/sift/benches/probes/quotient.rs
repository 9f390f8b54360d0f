//! Diagnostic for tuning the quotient filter (not part of the published tables): fills
//! `Quotient::new(n, 0.01)` with `n` keys and prints the insert time per tenth of the fill and
//! the query times, next to qfilter (xxh3-64 of the same bytes) sized to the same quotients.
//!
//! `cargo bench -p sift-filters --bench quotient_probe -- [--n 1M] [--rounds 3] [--keys u64|str20|both]`
#[path = "../harness/mod.rs"]
mod harness;
use harness::args::{run, Args};
use harness::keys::{self, Key, KeyKind, Str20};
use harness::measure::{cpu_ns, fill_in_tenths};
use sift::prelude::*;
use std::hint::black_box;

fn probe<K: Key>(n: usize, rounds: usize) {
    let keys: Vec<K> = keys::members::<K>(n);
    let others: Vec<K> = keys::non_members::<K>(n);
    for _ in 0..rounds {
        let mut f = sift::Quotient::new(n, 0.01).unwrap();
        let (ins, tenths) = fill_in_tenths(&keys, |k| {
            black_box(f.try_insert(black_box(k).bytes()).is_ok());
        });
        // qfilter at the same number of home slots (n / 0.95 rounded up to a power of two:
        // equal load when n = 0.95·2^k), fed xxh3-64 of the same bytes.
        let mut g = qfilter::Filter::new(n as u64, 0.01).unwrap();
        let (_, gtenths) = fill_in_tenths(&keys, |k| {
            let h = xxhash_rust::xxh3::xxh3_64(black_box(k).bytes().as_ref());
            black_box(g.insert_fingerprint(false, h).is_ok());
        });
        println!("  qfilter tenths [{gtenths}]");
        let t = cpu_ns();
        let hits = keys.iter().filter(|k| f.contains(black_box(k.bytes()))).count();
        let qm = (cpu_ns() - t) / n as f64;
        let t = cpu_ns();
        let fp = others.iter().filter(|k| f.contains(black_box(k.bytes()))).count();
        let qn = (cpu_ns() - t) / n as f64;
        assert_eq!(hits, n);
        println!(
            "{}: insert {ins:.1} ns/key [{}] query {qm:.1} / {qn:.1} ns fpr {:.4}% load {:.4}",
            K::NAME,
            tenths,
            fp as f64 * 100.0 / n as f64,
            f.load_factor(),
        );
    }
}

fn main() -> std::process::ExitCode {
    run(|| {
        let mut a = Args::from_env(
            "usage: cargo bench -p sift-filters --bench quotient_probe -- [--n 1M] [--rounds 3] [--keys u64|str20|both]",
        )?;
        let n = a.count("--n", 1_000_000)?.max(1);
        let rounds = a.count("--rounds", 3)?.max(1);
        let kinds = a.keys(&[KeyKind::U64])?;
        a.finish()?;
        for kind in kinds {
            match kind {
                KeyKind::U64 => probe::<u64>(n, rounds),
                KeyKind::Str20 => probe::<Str20>(n, rounds),
            }
        }
        Ok(())
    })
}
