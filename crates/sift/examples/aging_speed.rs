//! Quick timing of AgingBloom against BlockedBloom (ns per operation, thread CPU time is not
//! used: wall clock, best of 3). `cargo run --release -p sift --example aging_speed [n]`.
use std::time::Instant;

use sift::prelude::*;
use sift::{AgingBloom, BlockedBloom, TimeLimitedBloom};

fn keys(seed: u64, n: usize) -> Vec<[u8; 8]> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)).to_le_bytes()
        })
        .collect()
}

fn best<F: FnMut() -> usize>(n: usize, mut f: F) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let members = keys(1, n);
    let others = keys(2, n.min(1 << 20));
    let mut b = BlockedBloom::new(n, 0.01).unwrap();
    let ins_b = best(n, || {
        b.clear();
        members.iter().filter(|k| b.insert(k)).count()
    });
    let mut a = AgingBloom::new(n, 0.01).unwrap();
    for k in &keys(3, n) {
        a.insert(k);
    }
    let ins_a = best(n, || members.iter().filter(|k| a.insert(k)).count());
    let mut t = TimeLimitedBloom::new(60_000, n, 0.01).unwrap();
    let mut now = 1u64;
    let step = 60_000.0 / n as f64;
    let ins_t = best(n, || {
        let mut c = 0;
        for (i, k) in members.iter().enumerate() {
            c += t.insert_at(k, now + (i as f64 * step) as u64) as usize;
        }
        now += 60_000;
        c
    });
    let qm = |f: &dyn Fn(&[u8; 8]) -> bool| {
        best(others.len(), || members[..others.len()].iter().filter(|k| f(k)).count())
    };
    let qn = |f: &dyn Fn(&[u8; 8]) -> bool| best(others.len(), || others.iter().filter(|k| f(k)).count());
    let (bm, bn) = (qm(&|k| b.contains(k)), qn(&|k| b.contains(k)));
    let (am, an) = (qm(&|k| a.contains(k)), qn(&|k| a.contains(k)));
    let (tm, tn) = (qm(&|k| t.contains(k)), qn(&|k| t.contains(k)));
    println!(
        "n {n}: bytes blocked {} aging {} timed {} (kernel {})",
        b.size_in_bytes(),
        a.size_in_bytes(),
        t.size_in_bytes(),
        a.kernel_name()
    );
    println!(
        "insert  ns: blocked {ins_b:.1} aging {ins_a:.1} ({:.2}x) timed {ins_t:.1} ({:.2}x)",
        ins_a / ins_b,
        ins_t / ins_b
    );
    println!("member  ns: blocked {bm:.1} aging {am:.1} ({:.2}x) timed {tm:.1} ({:.2}x)", am / bm, tm / bm);
    println!("absent  ns: blocked {bn:.1} aging {an:.1} ({:.2}x) timed {tn:.1} ({:.2}x)", an / bn, tn / bn);
}
