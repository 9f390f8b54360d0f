//! Diagnostic micro-benchmarks used while tuning (not part of the published tables).
#[path = "../benches/common/mod.rs"]
mod common;
use common::{Key, Subject};
use sift::prelude::*;
use std::hint::black_box;

fn cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid timespec, constant clock id.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn time(f: &mut dyn FnMut() -> usize, n: usize) -> f64 {
    let t = cpu_ns();
    black_box(f());
    (cpu_ns() - t) / n as f64
}

fn main() {
    let n: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(1_000_000);
    let keys: Vec<u64> = common::members::<u64>(n);
    let others: Vec<u64> = common::non_members::<u64>(n);
    let mut bb = sift::BlockedBloom::new(n, 0.01).unwrap();
    let mut bl = sift::Bloom::new(n, 0.01).unwrap();
    let mut sb = common::Sbbf::new(n, 0.01);
    let mut fb = fastbloom::BloomFilter::with_false_pos(0.01)
        .hasher(foldhash::fast::FixedState::with_seed(1))
        .expected_items(n);
    for k in &keys {
        bb.insert(k.bytes());
        bl.insert(k.bytes());
        Subject::<u64>::add(&mut sb, k);
        fb.insert(k);
    }
    let mut bs = bb.clone();
    bs.force_scalar();
    let khashes: Vec<u64> = keys.iter().map(|k| xxhash_rust::xxh3::xxh3_64(&k.bytes())).collect();
    let hashes: Vec<u64> = others.iter().map(|k| xxhash_rust::xxh3::xxh3_64(&k.bytes())).collect();
    let names = [
        "bb.contains",
        "bb.contains_hash",
        "sbbf",
        "bloom.contains",
        "fastbloom",
        "xxh3 only",
        "bb.insert",
        "bloom.insert",
        "sbbf.insert",
        "bb.insert scalar",
        "bb.insert_hash",
        "bb.contains scalar",
    ];
    let mut res = vec![vec![]; names.len()];
    for round in 0..7 {
        for j in 0..names.len() {
            let i = (j + round) % names.len();
            let v = match i {
                0 => time(&mut || others.iter().filter(|k| bb.contains(black_box(k.bytes()))).count(), n),
                1 => time(&mut || hashes.iter().filter(|h| bb.contains_hash(black_box(**h))).count(), n),
                2 => {
                    time(&mut || others.iter().filter(|k| Subject::<u64>::has(&sb, black_box(k))).count(), n)
                }
                3 => time(&mut || others.iter().filter(|k| bl.contains(black_box(k.bytes()))).count(), n),
                4 => time(&mut || others.iter().filter(|k| fb.contains(black_box(*k))).count(), n),
                5 => time(
                    &mut || {
                        others
                            .iter()
                            .map(|k| xxhash_rust::xxh3::xxh3_64(&black_box(k.bytes())) as usize & 1)
                            .sum()
                    },
                    n,
                ),
                6 => time(
                    &mut || {
                        for k in &keys {
                            bb.insert(black_box(k.bytes()));
                        }
                        0
                    },
                    n,
                ),
                7 => time(
                    &mut || {
                        for k in &keys {
                            bl.insert(black_box(k.bytes()));
                        }
                        0
                    },
                    n,
                ),
                8 => time(
                    &mut || {
                        for k in &keys {
                            Subject::<u64>::add(&mut sb, black_box(k));
                        }
                        0
                    },
                    n,
                ),
                9 => time(
                    &mut || {
                        for k in &keys {
                            bs.insert(black_box(k.bytes()));
                        }
                        0
                    },
                    n,
                ),
                10 => time(
                    &mut || {
                        for h in &khashes {
                            bb.insert_hash(black_box(*h));
                        }
                        0
                    },
                    n,
                ),
                _ => time(&mut || others.iter().filter(|k| bs.contains(black_box(k.bytes()))).count(), n),
            };
            res[i].push(v);
        }
    }
    for (name, mut v) in names.iter().zip(res) {
        v.sort_by(f64::total_cmp);
        println!("{name:20} {:6.1} ns (min {:.1})", v[v.len() / 2], v[0]);
    }
}
