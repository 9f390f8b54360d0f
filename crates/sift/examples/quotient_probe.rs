//! Diagnostic for tuning the quotient filter (not part of the published tables): fills
//! `Quotient::new(n, 0.01)` with `n` keys and prints the insert time per tenth of the fill and
//! the query times, next to qfilter (xxh3-64 of the same bytes) sized to the same quotients.
//! `cargo run --release -p sift --example quotient_probe -- [n] [rounds] [u64|str20]`.
#[path = "../benches/common/keys.rs"]
#[allow(dead_code)]
mod keys;
use keys::{Key, Str20};
use sift::prelude::*;
use std::hint::black_box;

#[path = "../benches/common/measure.rs"]
#[allow(dead_code)] // the table programs' helpers
mod measure;
use measure::fill_in_tenths;

/// This thread's CPU time in ns.
fn cpu_ns() -> f64 {
    measure::thread_cpu_ns().expect("a thread CPU clock (Linux)") as f64
}

fn run<K: Key>(n: usize, rounds: usize) {
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

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|s| s.parse().unwrap()).unwrap_or(1_000_000);
    let rounds: usize = args.next().map(|s| s.parse().unwrap()).unwrap_or(3);
    match args.next().as_deref() {
        Some("str20") => run::<Str20>(n, rounds),
        _ => run::<u64>(n, rounds),
    }
}
