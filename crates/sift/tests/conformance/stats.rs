//! Exact binomial tail bounds for the false-positive-rate checks.
//!
//! The number of false positives among `N` independent non-member probes of one filter whose
//! false-positive rate is `φ` is Binomial(N, φ). Rather than the normal approximation
//! `Nφ ± 3.09·sqrt(Nφ(1-φ))` (which under-covers the upper tail when `Nφ` is small, as for
//! binary fuse 16 at 2^-16), the bounds below sum the binomial probability mass exactly, using
//! `sift::math::ln_gamma`, so a check at level `ALPHA` fails with probability at most `ALPHA`
//! when the filter is right.

/// One-sided level of every statistical check: 99.9 % (z = 3.09 in the normal approximation).
pub const ALPHA: f64 = 0.001;

fn ln_pmf(n: u64, p: f64, k: u64) -> f64 {
    let (nf, kf) = (n as f64, k as f64);
    let ln_choose =
        sift::math::ln_gamma(nf + 1.0) - sift::math::ln_gamma(kf + 1.0) - sift::math::ln_gamma(nf - kf + 1.0);
    let a = if k == 0 { 0.0 } else { kf * p.ln() };
    let b = if k == n { 0.0 } else { (nf - kf) * (-p).ln_1p() };
    ln_choose + a + b
}

fn window(n: u64, p: f64) -> (u64, u64) {
    let mean = n as f64 * p;
    let sd = (mean * (1.0 - p)).sqrt();
    let lo = (mean - 40.0 * sd - 50.0).floor().max(0.0) as u64;
    let hi = ((mean + 40.0 * sd + 50.0).ceil() as u64).min(n);
    (lo, hi)
}

/// The smallest count `c` with `P(X > c) ≤ alpha` for `X ~ Binomial(n, p)`.
pub fn upper(n: u64, p: f64, alpha: f64) -> u64 {
    assert!((0.0..=1.0).contains(&p), "p = {p}");
    if p == 0.0 {
        return 0;
    }
    let (lo, hi) = window(n, p);
    let mut tail = 0.0; // P(X > c) for the current c
    let mut c = hi;
    while c > lo {
        let next = tail + ln_pmf(n, p, c).exp();
        if next > alpha {
            return c;
        }
        tail = next;
        c -= 1;
    }
    lo
}

/// The largest count `c` with `P(X < c) ≤ alpha` for `X ~ Binomial(n, p)`.
pub fn lower(n: u64, p: f64, alpha: f64) -> u64 {
    assert!((0.0..=1.0).contains(&p), "p = {p}");
    if p == 0.0 {
        return 0;
    }
    let (lo, hi) = window(n, p);
    let mut tail = 0.0; // P(X < c)
    let mut c = lo;
    while c < hi {
        let next = tail + ln_pmf(n, p, c).exp();
        if next > alpha {
            return c;
        }
        tail = next;
        c += 1;
    }
    hi
}

#[test]
fn bounds_match_the_normal_approximation_for_large_counts() {
    // N = 1e6, p = 0.01: mean 10 000, sd 99.5; z(0.999) = 3.09 gives ±307.
    let (n, p) = (1_000_000, 0.01);
    let u = upper(n, p, ALPHA) as f64;
    let l = lower(n, p, ALPHA) as f64;
    assert!((u - 10_307.0).abs() <= 4.0, "upper {u}");
    assert!((l - 9_693.0).abs() <= 4.0, "lower {l}");
}

#[test]
fn bounds_are_exact_for_small_counts() {
    // Binomial(1e6, 1.5e-5): P(X > 28) = 0.00086 and P(X > 27) = 0.00172 (summed in Python
    // with lgamma), so the 99.9 % upper bound is 28 (the normal approximation says 26.97).
    assert_eq!(upper(1_000_000, 1.5e-5, ALPHA), 28);
    // P(X < 5) = 0.00086, P(X < 6) = 0.0028.
    assert_eq!(lower(1_000_000, 1.5e-5, ALPHA), 5);
    assert_eq!(upper(1000, 0.0, ALPHA), 0);
}
