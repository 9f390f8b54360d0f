//! Diagnostic: cost of the blocked planner and of `BlockedBloom::new` (not a published table):
//! three times, the mean of 200 calls each of `blocked_words_plan(n, 1%, 16)`,
//! `blocked_words_max_load`, `blocked_words_fpr_at_load`, `BlockedBloom::new(n, 1%)` and
//! `Bloom::new(n, 1%)`, warm (one plan first).
//!
//! `cargo bench -p sift-filters --bench plan_probe -- [--n 1e6]`
#[path = "../harness/mod.rs"]
mod harness;
use harness::args::{run, Args};
use std::hint::black_box;
use std::time::Instant;

fn main() -> std::process::ExitCode {
    run(|| {
        let mut a = Args::from_env("usage: cargo bench -p sift-filters --bench plan_probe -- [--n 1e6]")?;
        let n = a.count("--n", 1_000_000)?.max(1);
        a.finish()?;
        probe(n as f64);
        Ok(())
    })
}

fn probe(n: f64) {
    let _ = sift::math::blocked_words_plan(1000.0, 0.01, 16);
    for _ in 0..3 {
        let t = Instant::now();
        let r = 200;
        for _ in 0..r {
            black_box(sift::math::blocked_words_plan(black_box(n), 0.01, 16));
        }
        let plan = t.elapsed().as_secs_f64() / r as f64 * 1e6;
        let t = Instant::now();
        for _ in 0..r {
            black_box(sift::math::blocked_words_max_load(black_box(6), 0.01));
        }
        let ml = t.elapsed().as_secs_f64() / r as f64 * 1e6;
        let t = Instant::now();
        for _ in 0..r {
            black_box(sift::math::blocked_words_fpr_at_load(black_box(50.0), black_box(12)));
        }
        let f12 = t.elapsed().as_secs_f64() / r as f64 * 1e6;
        let t = Instant::now();
        for _ in 0..r {
            black_box(sift::BlockedBloom::new(black_box(n as usize), 0.01).unwrap());
        }
        let new = t.elapsed().as_secs_f64() / r as f64 * 1e6;
        let t = Instant::now();
        for _ in 0..r {
            black_box(sift::Bloom::new(black_box(n as usize), 0.01).unwrap());
        }
        let bl = t.elapsed().as_secs_f64() / r as f64 * 1e6;
        println!("plan {plan:.1} us, max_load(6) {ml:.2} us, fpr_at_load(k=12) {f12:.2} us, BlockedBloom::new {new:.1} us, Bloom::new {bl:.1} us");
    }
}
