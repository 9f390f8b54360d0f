//! Diagnostic for the construction of the xor-family filters (not part of the published tables):
//! builds BinaryFuse8 (3- and 4-wise), BinaryFuse16 and Xor8 from `n` 8-byte items with
//! `build_with` (hashing included) and prints, per key, the time of each phase of the successful
//! and failed attempts (hash and place the keys, count, peel, assign, and allocate the scratch
//! arrays; wall clock, median over the rounds), the whole build, and the peak temporary memory: the most heap the build held at
//! once beyond the finished filter (from a counting global allocator), divided by `n`.
//!
//! `cargo bench -p sift-filters --bench fuse_probe -- [--n 1M,10M] [--rounds 3]`

#[path = "../harness/mod.rs"]
mod harness;
use harness::args::{run, Args};
use harness::measure::{live_bytes, median, peak_bytes, reset_peak, Counting};
use std::hint::black_box;
use std::time::Instant;

use sift::filters::peel::{probe_start, probe_take};
use sift::prelude::*;
use sift::{Arity, BinaryFuse16, BinaryFuse8, Hasher, Xor8};

/// Counts the heap, for the peak a build holds.
#[global_allocator]
static ALLOC: Counting = Counting;

/// One build: phase ns, total ns, peak temporary bytes.
type Run = ([u64; 5], u64, usize);

fn measure(build: &dyn Fn() -> usize) -> Run {
    let base = live_bytes();
    reset_peak();
    probe_start();
    let t = Instant::now();
    let size = build();
    let total = t.elapsed().as_nanos() as u64;
    let phases = probe_take().expect("probe on");
    let temp = (peak_bytes() - base) as usize - size;
    (phases, total, temp)
}

fn main() -> std::process::ExitCode {
    run(|| {
        let mut a = Args::from_env(
            "usage: cargo bench -p sift-filters --bench fuse_probe -- [--n 1M,10M] [--rounds 3]",
        )?;
        let ns = a.counts("--n", &[1_000_000, 10_000_000])?;
        let rounds = a.count("--rounds", 3)?.max(1);
        a.finish()?;
        probe(&ns, rounds);
        Ok(())
    })
}

fn probe(ns: &[usize], rounds: usize) {
    let h = Hasher::default();
    println!("| n | filter | hash+place | count | peel | assign | alloc | build ns/key | temp B/key |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for &n in ns {
        let items: Vec<[u8; 8]> =
            (0..n as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes()).collect();
        type Build<'a> = (&'static str, Box<dyn Fn() -> usize + 'a>);
        let builds: Vec<Build> = vec![
            (
                "BinaryFuse8",
                Box::new(|| {
                    black_box(BinaryFuse8::build_with(&items, Arity::Three, h).unwrap()).size_in_bytes()
                }),
            ),
            (
                "BinaryFuse8 4-wise",
                Box::new(|| {
                    black_box(BinaryFuse8::build_with(&items, Arity::Four, h).unwrap()).size_in_bytes()
                }),
            ),
            (
                "BinaryFuse16",
                Box::new(|| {
                    black_box(BinaryFuse16::build_with(&items, Arity::Three, h).unwrap()).size_in_bytes()
                }),
            ),
            ("Xor8", Box::new(|| black_box(Xor8::build_with(&items, h).unwrap()).size_in_bytes())),
        ];
        for (name, build) in &builds {
            let runs: Vec<_> = (0..rounds).map(|_| measure(build.as_ref())).collect();
            let per = |f: &dyn Fn(&Run) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
            let nf = n as f64;
            println!(
                "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
                n,
                name,
                per(&|r| r.0[0] as f64 / nf),
                per(&|r| r.0[1] as f64 / nf),
                per(&|r| r.0[2] as f64 / nf),
                per(&|r| r.0[3] as f64 / nf),
                per(&|r| r.0[4] as f64 / nf),
                per(&|r| r.1 as f64 / nf),
                per(&|r| r.2 as f64 / nf),
            );
        }
    }
}
