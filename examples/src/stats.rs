//! The binomial bounds the examples' checks and benchmark verdicts use.

/// The smallest `k` with `P(X > k) ≤ alpha` for `X ~ Binomial(n, p)`: a count of false
/// positives above it, out of `n` trials at rate `p`, happens with probability at most `alpha`.
pub fn binomial_upper(n: u64, p: f64, alpha: f64) -> u64 {
    assert!((0.0..=1.0).contains(&p) && alpha > 0.0 && alpha < 1.0);
    if p == 0.0 || n == 0 {
        return 0;
    }
    if p == 1.0 {
        return n;
    }
    // The pmf from k = 0 upwards, in log space (n up to millions underflows otherwise).
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let mut log_pmf = n as f64 * lq;
    let mut cdf = 0.0f64;
    for k in 0..=n {
        cdf += log_pmf.exp();
        if 1.0 - cdf <= alpha {
            return k;
        }
        // pmf(k+1) = pmf(k) · (n-k)/(k+1) · p/q
        log_pmf += ((n - k) as f64).ln() - ((k + 1) as f64).ln() + lp - lq;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_quantiles() {
        // Binomial(100, 0.5): P(X > 60) = 0.0176, P(X > 61) = 0.0105, P(X > 62) = 0.0060.
        assert_eq!(binomial_upper(100, 0.5, 0.01), 62);
        // Binomial(10000, 0.01): mean 100, sd 9.95; the 1e-6 tail starts near 100 + 4.75 sd.
        let k = binomial_upper(10_000, 0.01, 1e-6);
        assert!((140..=155).contains(&k), "{k}");
        assert_eq!(binomial_upper(0, 0.3, 0.01), 0);
        assert_eq!(binomial_upper(10, 1.0, 0.01), 10);
    }
}
