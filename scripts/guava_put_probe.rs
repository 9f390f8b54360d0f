//! Nanoseconds per `GuavaBloom::put` with no snapshot running, on a filter of 64 MiB of words
//! (huge-page storage: each put checks for a copy-on-write guard) and of 512 KiB (plain
//! storage). Standard library and `sift` only; build it against a `sift` rlib with
//!   rustc -O --edition 2021 scripts/guava_put_probe.rs --extern sift=PATH/libsift-HASH.rlib \
//!     -L dependency=target/debug/deps -o /tmp/guava_put_probe
//! and compare two builds of the library, alternately: `guava_put_probe [ROUNDS]`.
use sift::compat::guava::{GuavaBloom, Strategy};
use std::time::Instant;

fn main() {
    let rounds: usize = std::env::args().nth(1).map_or(3, |s| s.parse().expect("ROUNDS"));
    for (label, bits, puts) in [("64MiB", 64u64 << 23, 4_000_000u64), ("512KiB", 64 << 16, 200_000)] {
        let mut best = f64::MAX;
        for _ in 0..rounds {
            let mut g = GuavaBloom::with_params(bits, 7, Strategy::Murmur128Mitz64).unwrap();
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            let t = Instant::now();
            let mut changed = 0u64;
            for _ in 0..puts {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                changed += g.put(&x.to_le_bytes()) as u64;
            }
            let ns = t.elapsed().as_nanos() as f64 / puts as f64;
            assert!(changed > puts / 2, "{changed}");
            best = best.min(ns);
        }
        println!("{label} ns/put (best of {rounds}): {best:.1}");
    }
}
