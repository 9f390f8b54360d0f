//! Diagnostic for the quotient filter's query (not part of the published tables): fills
//! `Quotient::new(n, 0.01)`, a `Quotient` with qfilter's slot count (equal load),
//! and qfilter (xxh3-64 of the same bytes) with the same `n` u64 keys, then times member and
//! non-member queries of the three, interleaved, `--rounds` times, and prints the medians.
//! Each timed pass queries every key `--repeat` times (in order; the keys are random, so the
//! probes are random slots).
//!
//! `cargo bench -p sift-filters --bench quotient_query_probe -- [--n 1M] [--rounds 5] [--repeat 1]`
#[path = "../harness/mod.rs"]
mod harness;
use harness::args::{run, Args};
use harness::keys::{self, Key};
use harness::measure::{self, cpu_ns};
use sift::prelude::*;
use std::hint::black_box;

fn time(keys: &[u64], repeat: usize, mut has: impl FnMut(&u64) -> bool) -> (f64, usize) {
    let t = cpu_ns();
    let mut hits = 0;
    for _ in 0..repeat {
        hits += keys.iter().filter(|k| has(black_box(k))).count();
    }
    ((cpu_ns() - t) / (keys.len() * repeat) as f64, hits / repeat)
}

fn main() -> std::process::ExitCode {
    run(|| {
        let mut a = Args::from_env(
            "usage: cargo bench -p sift-filters --bench quotient_query_probe -- [--n 1M] [--rounds 5] [--repeat 1]",
        )?;
        let n = a.count("--n", 1_000_000)?.max(1);
        let rounds = a.count("--rounds", 5)?.max(1);
        let repeat = a.count("--repeat", 1)?.max(1);
        a.finish()?;
        probe(n, rounds, repeat);
        Ok(())
    })
}

fn probe(n: usize, rounds: usize, repeat: usize) {
    let keys: Vec<u64> = keys::members::<u64>(n);
    let others: Vec<u64> = keys::non_members::<u64>(n);
    let mut f = sift::Quotient::new(n, 0.01).unwrap();
    let mut g = qfilter::Filter::new(n as u64, 0.01).unwrap();
    let slots = g.capacity().next_power_of_two().max(64);
    let mut e = sift::Quotient::with_params(slots, f.remainder_bits(), f.hasher()).unwrap();
    for k in &keys {
        f.try_insert(k.bytes()).unwrap();
        e.try_insert(k.bytes()).unwrap();
        g.insert_fingerprint(false, k.xxh3()).unwrap();
    }
    let mut t: [Vec<f64>; 6] = Default::default();
    let mut fp = [0usize; 3];
    for _ in 0..rounds {
        let (a, h) = time(&keys, repeat, |k| f.contains(k.bytes()));
        assert_eq!(h, n);
        t[0].push(a);
        let (a, h) = time(&others, repeat, |k| f.contains(k.bytes()));
        t[1].push(a);
        fp[0] = h;
        let (a, h) = time(&keys, repeat, |k| e.contains(k.bytes()));
        assert_eq!(h, n);
        t[2].push(a);
        let (a, h) = time(&others, repeat, |k| e.contains(k.bytes()));
        t[3].push(a);
        fp[1] = h;
        let (a, h) = time(&keys, repeat, |k| g.contains_fingerprint(k.xxh3()));
        assert_eq!(h, n);
        t[4].push(a);
        let (a, h) = time(&others, repeat, |k| g.contains_fingerprint(k.xxh3()));
        t[5].push(a);
        fp[2] = h;
    }
    let m: Vec<f64> = t.iter().map(|v| measure::median(v)).collect();
    println!(
        "n {n}: sift {:.1} / {:.1} ns ({:.3}%, {:.2} bits/key); at qfilter's load {:.1} / {:.1} ({:.3}%); \
         qfilter {:.1} / {:.1} ({:.3}%); ratios {:.2} / {:.2}, equal load {:.2} / {:.2}",
        m[0],
        m[1],
        fp[0] as f64 * 100.0 / n as f64,
        f.size_in_bytes() as f64 * 8.0 / n as f64,
        m[2],
        m[3],
        fp[1] as f64 * 100.0 / n as f64,
        m[4],
        m[5],
        fp[2] as f64 * 100.0 / n as f64,
        m[0] / m[4],
        m[1] / m[5],
        m[2] / m[4],
        m[3] / m[5],
    );
}
