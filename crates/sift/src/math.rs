//! Formulas for sizing filters, kept apart from the storage and algorithms (as RocksDB keeps
//! `BloomMath` apart from its filter implementations).
//!
//! Notation: `n` items, `m` bits, `k` hash functions, `p` false-positive rate (FPR).
//! All functions work in `f64` and never panic; callers validate their inputs.

use core::f64::consts::LN_2;

/// `ln(2)^2`.
pub const LN2_SQUARED: f64 = LN_2 * LN_2;

/// Expected FPR of a classic Bloom filter: `p = (1 - e^(-k·n/m))^k`.
///
/// Bloom, "Space/time trade-offs in hash coding with allowable errors", CACM 1970; the
/// exponential form is the standard approximation of `(1 - (1 - 1/m)^(k·n))^k`, accurate for
/// `m` larger than a few hundred bits (Broder & Mitzenmacher, "Network applications of Bloom
/// filters: a survey", 2004, §2.1).
pub fn bloom_fpr(m: f64, n: f64, k: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    if m <= 0.0 {
        return 1.0;
    }
    (1.0 - (-k * n / m).exp()).powf(k)
}

/// Bits that minimise memory for `n` items at FPR `p`: `m = -n·ln(p) / ln(2)^2`.
///
/// At this `m` and the optimal `k`, half of the bits are set and `p = 2^-k`
/// (Broder & Mitzenmacher 2004, §2.2). Seed 002's worked example: `n = 1e8, p = 0.01` gives
/// `m ≈ 958,505,838` bits (≈ 114 MiB) and `k = 7`.
pub fn bloom_optimal_bits(n: f64, p: f64) -> f64 {
    -n * p.ln() / LN2_SQUARED
}

/// Bits per key of an optimally sized classic Bloom filter: `-ln(p) / ln(2)^2 ≈ 1.44·log2(1/p)`.
pub fn bloom_bits_per_key(p: f64) -> f64 {
    -p.ln() / LN2_SQUARED
}

/// The `k` that minimises the FPR for `m` bits and `n` items: `k = (m/n)·ln 2`, rounded to the
/// better of the two neighbouring integers, at least 1.
pub fn bloom_optimal_k(m: f64, n: f64) -> u32 {
    if n <= 0.0 || m <= 0.0 {
        return 1;
    }
    let real = (m / n) * LN_2;
    let lo = real.floor().max(1.0);
    let hi = lo + 1.0;
    let k = if bloom_fpr(m, n, hi) < bloom_fpr(m, n, lo) { hi } else { lo };
    k.min(64.0) as u32
}

/// The `k` for a target FPR when `m` is chosen optimally: `k = log2(1/p)` rounded up.
pub fn bloom_k_for_fpr(p: f64) -> u32 {
    (-p.log2()).ceil().clamp(1.0, 64.0) as u32
}

/// Items an `m`-bit classic Bloom filter holds at FPR `p` with optimal `k`:
/// `n = -m·ln(2)^2 / ln(p)` (the inverse of [`bloom_optimal_bits`]).
pub fn bloom_capacity(m: f64, p: f64) -> f64 {
    -m * LN2_SQUARED / p.ln()
}

/// Items an `m`-bit Bloom filter with `k` hashes holds before its FPR reaches `p`:
/// `n = -(m/k)·ln(1 - p^(1/k))`, the inverse of [`bloom_fpr`] in `n`.
pub fn bloom_capacity_with_k(m: f64, k: f64, p: f64) -> f64 {
    -(m / k) * (1.0 - p.powf(1.0 / k)).ln()
}

/// Estimated number of distinct items in a Bloom filter with `set` of its `m` bits set:
/// `n* = -(m/k)·ln(1 - X/m)`.
///
/// Swamidass & Baldi, "Mathematical correction for fingerprint similarity measures to improve
/// chemical retrieval", J. Chem. Inf. Model. 2007. Returns `f64::INFINITY` for a full filter.
pub fn bloom_estimate_items(m: f64, k: f64, set: f64) -> f64 {
    if set >= m {
        return f64::INFINITY;
    }
    -(m / k) * (1.0 - set / m).ln()
}

/// FPR of a Bloom filter whose fraction `fill` of bits is set: `fill^k` (what `inspect` reports as
/// the current FPR, measured rather than predicted).
pub fn bloom_fpr_from_fill(fill: f64, k: f64) -> f64 {
    fill.powf(k)
}

/// Expected FPR of a blocked Bloom filter: `n` items, `m` bits in blocks of `block_bits`, `k`
/// probes inside one block per item.
///
/// The number of items landing in a given block is Binomial(n, B/m) ≈ Poisson(λ = n·B/m), and a
/// block holding `i` items behaves as a classic `B`-bit filter with `i` items, so
/// `p = Σ_i Poisson(i; λ) · (1 - e^(-k·i/B))^k` (Putze, Sanders & Singler, "Cache-, hash- and
/// space-efficient Bloom filters", JEA 2009, §3). The sum is taken over `λ ± 12σ`.
pub fn blocked_fpr(m: f64, n: f64, k: f64, block_bits: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    if m < block_bits {
        return 1.0;
    }
    let lambda = n * block_bits / m;
    poisson_mean(lambda, |i| bloom_fpr(block_bits, i, k))
}

/// `E[f(X)]` for `X ~ Poisson(λ)`, summed over `λ ± 12σ`. Past 4096 terms the sum strides
/// over the range (the distribution is then smooth on the scale of a stride), so the cost is
/// bounded whatever `λ` is — a decoded file may claim any load.
pub fn poisson_mean(lambda: f64, f: impl Fn(f64) -> f64) -> f64 {
    if lambda.is_nan() || lambda <= 0.0 {
        return f(0.0);
    }
    if !lambda.is_finite() {
        return f(f64::MAX);
    }
    let sigma = lambda.sqrt();
    let lo = (lambda - 12.0 * sigma - 2.0).floor().max(0.0);
    let hi = (lambda + 12.0 * sigma + 12.0).ceil();
    let stride = ((hi - lo) / 4096.0).ceil().max(1.0);
    let ln_lambda = lambda.ln();
    let mut total = 0.0;
    let mut weight = 0.0;
    let mut x = lo;
    while x <= hi {
        // ln Poisson(i; λ) = i·ln λ - λ - ln Γ(i + 1)
        let w = (x * ln_lambda - lambda - ln_gamma(x + 1.0)).exp();
        weight += w;
        total += w * f(x);
        x += stride;
    }
    if weight > 0.0 {
        total / weight
    } else {
        f(lambda)
    }
}

/// `ln Γ(x)` for `x ≥ 1` (Stirling series with five correction terms; error below 1e-12 for
/// `x ≥ 7`, exact recurrence below that).
pub fn ln_gamma(x: f64) -> f64 {
    if x < 7.0 {
        // Γ(x) = Γ(x + j) / (x (x+1) ... (x+j-1))
        let mut shift = 0.0;
        let mut y = x;
        while y < 7.0 {
            shift += y.ln();
            y += 1.0;
        }
        return ln_gamma(y) - shift;
    }
    let inv = 1.0 / x;
    let inv2 = inv * inv;
    (x - 0.5) * x.ln() - x
        + 0.5 * (2.0 * core::f64::consts::PI).ln()
        + inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0))))
}

/// Smallest number of `block_bits` blocks (and the best `k ≤ max_k`) for which a blocked Bloom
/// filter of `n` items meets FPR `p`. Returns `(blocks, k)`.
///
/// A blocked filter needs more bits than a classic one for the same FPR because block loads vary
/// (the Poisson term in [`blocked_fpr`]); this searches `m` by bisection for each `k`.
pub fn blocked_plan(n: f64, p: f64, block_bits: f64, max_k: u32) -> (u64, u32) {
    let classic = bloom_optimal_bits(n, p).max(block_bits);
    let mut best: Option<(u64, u32)> = None;
    for k in 1..=max_k {
        // Upper bound: grow until the target is met (at most ~8x the classic size).
        let mut hi = (classic / block_bits).ceil().max(1.0);
        let mut tries = 0;
        while blocked_fpr(hi * block_bits, n, k as f64, block_bits) > p && tries < 12 {
            hi = (hi * 1.5).ceil(); // whole blocks: a fractional `hi` stalls the bisection below
            tries += 1;
        }
        if blocked_fpr(hi * block_bits, n, k as f64, block_bits) > p {
            continue;
        }
        let mut lo = 1.0f64;
        while hi - lo > 1.0 && hi / lo > 1.0 + 1e-4 {
            let mid = ((lo + hi) / 2.0).floor();
            if blocked_fpr(mid * block_bits, n, k as f64, block_bits) <= p {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let blocks = hi as u64;
        if best.is_none_or(|(b, _)| blocks < b) {
            best = Some((blocks, k));
        }
    }
    best.unwrap_or(((classic * 8.0 / block_bits).ceil() as u64, max_k))
}

/// Compound FPR bound of a scalable Bloom filter whose first layer has FPR `p0` and each next one
/// `r` times the previous: `P ≤ Σ p0·r^i = p0 / (1 - r)`.
///
/// Almeida, Baquero, Preguiça & Hutchison, "Scalable Bloom filters", IPL 2007, §4. To keep the
/// compound FPR ≤ `p` for every number of layers, the first layer gets `p0 = p·(1 - r)`.
pub fn scalable_first_layer_fpr(p: f64, tightening: f64) -> f64 {
    p * (1.0 - tightening)
}

/// Compound FPR of independent layers with FPRs `ps`: `1 - Π(1 - p_i)`.
pub fn compound_fpr(ps: impl IntoIterator<Item = f64>) -> f64 {
    1.0 - ps.into_iter().fold(1.0, |acc, p| acc * (1.0 - p))
}

/// Expected FPR of a cuckoo filter with `fp_bits`-bit fingerprints (zero reserved for "empty", so
/// `2^f - 1` values), buckets of `bucket_slots` slots and a fraction `load` of its slots used:
/// `p = 1 - (1 - 1/(2^f - 1))^(2·b·load)`.
///
/// A query compares its fingerprint with the `2·b` slots of its two buckets, each of which holds a
/// uniformly random non-zero fingerprint with probability `load` (Fan, Andersen, Kaminsky &
/// Mitzenmacher, "Cuckoo filter: practically better than Bloom", CoNEXT 2014, §5.1, whose upper
/// bound is `2b/2^f`).
pub fn cuckoo_fpr(fp_bits: u32, bucket_slots: f64, load: f64) -> f64 {
    if load <= 0.0 {
        return 0.0;
    }
    let values = (2.0f64).powi(fp_bits as i32) - 1.0;
    1.0 - (1.0 - 1.0 / values).powf(2.0 * bucket_slots * load)
}

/// Expected FPR of a quotient filter with `remainder_bits`-bit remainders and `load` items per
/// quotient: `p = 1 - e^(-load / 2^r) ≈ load · 2^-r`.
///
/// The number of stored items sharing the query's quotient is Poisson(`load`), and each matches
/// the query's remainder with probability `2^-r` (Bender et al., "Don't thrash: how to cache your
/// hash on flash", VLDB 2012, §2; Pandey, Bender, Johnson & Patro, "A general-purpose counting
/// filter: making every bit count", SIGMOD 2017, §3).
pub fn quotient_fpr(remainder_bits: u32, load: f64) -> f64 {
    if load <= 0.0 {
        return 0.0;
    }
    // `-expm1(-x)`, not `1 - exp(-x)`: for long remainders `x` is below f64's epsilon and the
    // difference would round to 0.
    -(-load * (0.5f64).powi(remainder_bits as i32)).exp_m1()
}

/// Expected FPR of a split-block Bloom filter (Apache Parquet's SBBF): `n` items in `blocks`
/// blocks of eight 32-bit words, each item setting one bit in each word of one block.
///
/// The block Bloom filter of Putze, Sanders & Singler ("Cache-, hash- and space-efficient Bloom
/// filters", JEA 2009, §3) with the "split" layout inside the block (one bit per 32-bit lane,
/// Broder & Mitzenmacher 2004, §2.1), as the Parquet format's `BloomFilter.md` specifies. A block
/// holding `i` items answers a non-member with probability `(1 - (31/32)^i)^8`, and block loads
/// are Poisson(λ = n / blocks), so `p = Σ_i Poisson(i; λ) · (1 - (31/32)^i)^8`, summed over
/// `λ ± 12σ`. (The spec's sizing formula below ignores both the lanes and the load spread and so
/// underestimates this FPR.)
pub fn split_block_fpr(blocks: f64, n: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    if blocks < 1.0 {
        return 1.0;
    }
    let ln_keep = (31.0f64 / 32.0).ln();
    poisson_mean(n / blocks, |i| (1.0 - (i * ln_keep).exp()).powi(8))
}

/// Bits per distinct value that the Parquet format specifies for a split-block Bloom filter at
/// FPR `p`: `c = -8 / ln(1 - p^(1/8))` (parquet-format `BloomFilter.md`, "Build a Bloom filter";
/// the classic Bloom formula with `k = 8`).
pub fn parquet_sbbf_bits_per_value(p: f64) -> f64 {
    -8.0 / (1.0 - p.powf(0.125)).ln()
}

/// The bitset size in bytes that Parquet writers (parquet-mr, arrow-rs) choose for `ndv` distinct
/// values at FPR `fpp`: `floor(ndv · c) / 8` bytes with `c` from [`parquet_sbbf_bits_per_value`],
/// clamped to `[32 B, 128 MiB]`, then rounded up to a power of two.
pub fn parquet_sbbf_bytes(ndv: f64, fpp: f64) -> u64 {
    let bits = (ndv * parquet_sbbf_bits_per_value(fpp)).min(u64::MAX as f64) as u64;
    (bits / 8).clamp(32, 128 << 20).next_power_of_two()
}

/// Smallest number of blocks for which a split-block Bloom filter of `n` items has FPR ≤ `p`
/// by [`split_block_fpr`] (bisection; the FPR decreases with the block count).
pub fn split_block_blocks_for(n: f64, p: f64) -> u64 {
    // Past 2^48 blocks (8 PiB) nobody's filter lies: return that and let the caller's size limit
    // refuse it, rather than search further (p = 1e-300 can never be met).
    const CAP: f64 = (1u64 << 48) as f64;
    let mut hi = (n * parquet_sbbf_bits_per_value(p) / 256.0).ceil().clamp(1.0, CAP);
    while split_block_fpr(hi, n) > p {
        if hi >= CAP {
            return CAP as u64;
        }
        // Whole blocks only, or the bisection below could stall between two integers.
        hi = (hi * 1.5).ceil().min(CAP);
    }
    let mut lo = 0.0f64; // FPR(0 blocks) = 1 > p
    while hi - lo > 1.0 {
        let mid = ((lo + hi) / 2.0).floor();
        if split_block_fpr(mid, n) <= p {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi as u64
}

/// Expected FPR of `sift`'s blocked layout ([`crate::BlockedBloom`]) when the block a query lands
/// in holds Poisson(`lambda`) items: 512-bit blocks of eight 64-bit words, an item sets one bit in
/// each of `min(k, 8)` consecutive words (cyclically, from a uniform start word) and, if `k > 8`,
/// one more bit in each of `k - 8` consecutive words from a second uniform start.
///
/// Exact for this layout, not an approximation by independent bits. As in Putze, Sanders &
/// Singler ("Cache-, hash- and space-efficient Bloom filters", JEA 2009, §3) the load of the
/// block is Poisson(λ) with `λ = n / blocks`. By inclusion–exclusion over the subsets `S` of the
/// query's bits, `P(all set | i items) = Σ_S (-1)^|S| q_S^i`, where `q_S` is the probability that
/// one random item misses every bit of `S`; averaging over `i ~ Poisson(λ)` turns `q_S^i` into
/// `e^(-λ(1 - q_S))`, so
///
/// `p = Σ_S (-1)^|S| · exp(-λ·(1 - q_S))`,  `q_S = E_start[ Π_w ((64 - d_w)/64)^(c_w) ]`,
///
/// with `d_w` the bits of `S` in word `w` and `c_w` the bits a random item puts in word `w` (which
/// depend on its start words). `q_S` depends only on the vector `d`, so the sum runs over at most
/// 3^8 vectors; a query's two bits in one word (k > 8) coincide with probability 1/64, which the
/// coefficients average over. For `k = 1` it reduces to `1 - e^(-λ/512)`. The terms are computed
/// once per `k` and cached; absolute rounding error is below 1e-13.
pub fn blocked_words_fpr_at_load(lambda: f64, k: u32) -> f64 {
    if lambda <= 0.0 {
        return 0.0;
    }
    if !(1..=16).contains(&k) {
        return 1.0;
    }
    let terms = blocked_words_terms(k);
    let p: f64 = terms.iter().map(|&(coef, miss)| coef * (-lambda * miss).exp()).sum();
    p.clamp(0.0, 1.0)
}

/// [`blocked_words_fpr_at_load`] for `n` items in `m` bits (`m / 512` blocks).
pub fn blocked_words_fpr(m: f64, n: f64, k: u32) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    if m < 512.0 {
        return 1.0;
    }
    blocked_words_fpr_at_load(n * 512.0 / m, k)
}

/// The largest block load `λ` (items per block) at which the layout of
/// [`blocked_words_fpr_at_load`] with `k` bits keeps its FPR ≤ `p` (bisection; the FPR grows
/// with `λ`).
///
/// Results are remembered per `(k, p)` (a few dozen pairs): applications that create many filters
/// at one FPR (a filter per user, the layers of a scalable filter) pay the search once.
pub fn blocked_words_max_load(k: u32, p: f64) -> f64 {
    if p.is_nan() || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    type Memo = std::sync::Mutex<Vec<((u32, u64), f64)>>;
    static MEMO: std::sync::OnceLock<Memo> = std::sync::OnceLock::new();
    const MEMO_PAIRS: usize = 64;
    let memo = MEMO.get_or_init(|| std::sync::Mutex::new(Vec::with_capacity(MEMO_PAIRS)));
    let key = (k, p.to_bits());
    // A poisoned lock only means another thread panicked mid-update of a plain Vec of pairs, each
    // written whole: the entries are still valid.
    if let Some(&(_, load)) = memo.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(q, _)| *q == key) {
        return load;
    }
    let mut hi = 1.0f64;
    while blocked_words_fpr_at_load(hi, k) <= p && hi < 1e6 {
        hi *= 2.0;
    }
    let mut lo = 0.0f64;
    // Bisect until the bracket is within a few ulps of its upper end (at most 80 halvings): the
    // callers round to whole blocks and settle the last step with the exact FPR.
    for _ in 0..80 {
        if hi - lo <= hi * 4.0 * f64::EPSILON {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if blocked_words_fpr_at_load(mid, k) <= p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let mut pairs = memo.lock().unwrap_or_else(|e| e.into_inner());
    if pairs.len() == MEMO_PAIRS {
        pairs.remove(0);
    }
    pairs.push((key, lo));
    lo
}

/// Smallest number of 512-bit blocks (and the `k ≤ max_k`, at most 16, achieving it) for which
/// `sift`'s blocked layout holds `n` items at FPR ≤ `p` ([`blocked_words_fpr`]). Returns
/// `(blocks, k)`; ties go to the smaller `k` (fewer bits to set and test). `blocks` saturates at
/// `u64::MAX` for absurd inputs; callers check it against their size limit.
///
/// The answer is the lexicographic minimum of `(blocks_k, k)` over `k`, where `blocks_k` is the
/// integer settled from the (memoised) [`blocked_words_max_load`]. Settling costs a few exact FPR
/// evaluations per `k` (up to a few hundred exponentials each for `k > 8`), so only the `k` that
/// can still win are settled: a `k` is skipped when its settle provably cannot end at or below
/// the best count so far (`settle_can_reach`: at most one FPR evaluation, none when its estimate
/// is more than `SETTLE_STEPS` above). Same result as settling every `k` (tests
/// `plan_matches_the_exhaustive_*`).
pub fn blocked_words_plan(n: f64, p: f64, max_k: u32) -> (u64, u32) {
    // (k, ceil(n / load_k)) for every usable k, cheapest first (ties: smaller k first).
    let mut cands: [(f64, u32); 16] = [(f64::INFINITY, 0); 16];
    let mut len = 0;
    for k in 1..=max_k.clamp(1, 16) {
        let load = blocked_words_max_load(k, p);
        if load.is_nan() || load <= 0.0 {
            continue;
        }
        cands[len] = ((n / load).ceil().max(1.0), k);
        len += 1;
    }
    let cands = &mut cands[..len];
    cands.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut best: Option<(u64, u32)> = None;
    for &(estimate, k) in cands.iter() {
        if let Some((b, bk)) = best {
            // To win, `k` must settle at or below `b` (ties go to the smaller `k`): below it if
            // `k` is the larger.
            let target = if k > bk { b - 1 } else { b };
            if target == 0 || !settle_can_reach(n, p, k, estimate, target) {
                continue;
            }
        }
        let blocks = settle_blocks(n, p, k, estimate);
        if best.is_none_or(|(b, bk)| (blocks, k) < (b, bk)) {
            best = Some((blocks, k));
        }
    }
    best.unwrap_or((u64::MAX, 16))
}

/// Steps `settle_blocks` takes at most in each direction.
const SETTLE_STEPS: usize = 64;

/// Estimates from which `settle_blocks` keeps the estimate as it is (`+1` is lost in rounding
/// above 2^52).
const SETTLE_BELOW: f64 = 4.5e15;

/// Whether `settle_blocks(n, p, k, estimate)` can end at or below `target` (≥ 1). Exact for
/// "no": the settle first steps up from the estimate while the FPR is above `p`, and if it did,
/// it stops there (the count below it failed); otherwise it steps down from the estimate, at
/// most `SETTLE_STEPS` times, a step from `b + 1` to `b` only if the FPR at `n / b` is ≤ `p`.
/// So a `target` below the estimate is reached only if it is within `SETTLE_STEPS` and the FPR
/// at `n / target` passes, which is the very evaluation the settle would make (same `f64`
/// arguments: counts below 2^52 are exact). Above `SETTLE_BELOW` the settle keeps the estimate.
///
/// No margin is assumed on how far the settle moves: where the exact FPR's absolute rounding
/// error (~1e-13) is a large fraction of `p` (small `p`), the computed FPR is not monotone over
/// a relative range of 1e-8 and more of the load, and the settle can use all its steps (a margin
/// of 4 blocks chose (3087589523, 16) instead of (3087589522, 15) at n = 43047648550,
/// p = 1.7064001807148654e-6).
fn settle_can_reach(n: f64, p: f64, k: u32, estimate: f64, target: u64) -> bool {
    if estimate >= SETTLE_BELOW {
        // Saturating, as `settle_blocks` is.
        return estimate as u64 <= target;
    }
    let estimate = estimate as u64;
    if target >= estimate {
        return true;
    }
    target + SETTLE_STEPS as u64 >= estimate && blocked_words_fpr_at_load(n / target as f64, k) <= p
}

/// The exact number of blocks for `k` near the estimate `ceil(n / load_k)` (the settle step of
/// [`blocked_words_plan`]).
fn settle_blocks(n: f64, p: f64, k: u32, estimate: f64) -> u64 {
    let mut blocks = estimate;
    if blocks >= u64::MAX as f64 {
        return u64::MAX;
    }
    // The bisection leaves `load` a hair under the exact limit; settle the integer (a few steps
    // at most; above 2^52 blocks `+1` is lost in rounding, and such sizes are refused by every
    // constructor anyway).
    if blocks < SETTLE_BELOW {
        for _ in 0..SETTLE_STEPS {
            if blocked_words_fpr_at_load(n / blocks, k) <= p {
                break;
            }
            blocks += 1.0;
        }
        for _ in 0..SETTLE_STEPS {
            if blocks <= 1.0 || blocked_words_fpr_at_load(n / (blocks - 1.0), k) > p {
                break;
            }
            blocks -= 1.0;
        }
    }
    blocks as u64
}

/// The planner as it was before the pruning of [`blocked_words_plan`] (every `k` settled): the
/// reference its tests compare with.
#[cfg(test)]
pub(crate) fn blocked_words_plan_exhaustive(n: f64, p: f64, max_k: u32) -> (u64, u32) {
    let mut best: Option<(u64, u32)> = None;
    for k in 1..=max_k.clamp(1, 16) {
        let load = blocked_words_max_load(k, p);
        if load.is_nan() || load <= 0.0 {
            continue;
        }
        let mut blocks = (n / load).ceil().max(1.0);
        if blocks >= u64::MAX as f64 {
            best = best.or(Some((u64::MAX, k)));
            continue;
        }
        // The bisection leaves `load` a hair under the exact limit; settle the integer (a few
        // steps at most; above 2^52 blocks `+1` is lost in rounding, and such sizes are refused
        // by every constructor anyway).
        if blocks < 4.5e15 {
            for _ in 0..64 {
                if blocked_words_fpr_at_load(n / blocks, k) <= p {
                    break;
                }
                blocks += 1.0;
            }
            for _ in 0..64 {
                if blocks <= 1.0 || blocked_words_fpr_at_load(n / (blocks - 1.0), k) > p {
                    break;
                }
                blocks -= 1.0;
            }
        }
        let blocks = blocks as u64;
        if best.is_none_or(|(b, _)| blocks < b) {
            best = Some((blocks, k));
        }
    }
    best.unwrap_or((u64::MAX, 16))
}

/// The inclusion–exclusion terms `(coefficient, 1 - q)` of [`blocked_words_fpr_at_load`] for
/// `k` (1 ≤ k ≤ 16), computed once and cached; equal `1 - q` values are merged.
fn blocked_words_terms(k: u32) -> &'static [(f64, f64)] {
    static TERMS: std::sync::OnceLock<Vec<Vec<(f64, f64)>>> = std::sync::OnceLock::new();
    let all = TERMS.get_or_init(|| (0..=16).map(blocked_words_compute_terms).collect());
    &all[k as usize]
}

fn blocked_words_compute_terms(k: u32) -> Vec<(f64, f64)> {
    if k == 0 {
        return Vec::new();
    }
    let (first, second) = (k.min(8) as usize, k.saturating_sub(8) as usize);
    // Bits a random item puts in word w, for each of the 8 equally likely start words of the
    // round that has fewer than 8 bits (for k ≥ 8 round 1 covers every word).
    let cover: Vec<[u32; 8]> = (0..8)
        .map(|s| {
            let mut c = [0u32; 8];
            for (w, cw) in c.iter_mut().enumerate() {
                let off = (w + 8 - s) % 8;
                *cw = if k <= 8 { (off < first) as u32 } else { 1 + (off < second) as u32 };
            }
            c
        })
        .collect();
    // The query sits at start word 0 (rotation symmetry). Per word, the choices of d_w with
    // their expected signed binomial coefficients.
    let choices: Vec<Vec<(u32, f64)>> = (0..8)
        .map(|w| {
            if k <= 8 {
                if w < first {
                    vec![(0, 1.0), (1, -1.0)]
                } else {
                    vec![(0, 1.0)]
                }
            } else if w < second {
                // Two query bits in this word, distinct with probability 63/64:
                // E[C(b,1)] = 2·63/64 + 1/64, E[C(b,2)] = 63/64.
                vec![(0, 1.0), (1, -127.0 / 64.0), (2, 63.0 / 64.0)]
            } else {
                vec![(0, 1.0), (1, -1.0)]
            }
        })
        .collect();
    let mut terms = Vec::new();
    let mut d = [0u32; 8];
    fn walk(
        w: usize,
        coef: f64,
        d: &mut [u32; 8],
        choices: &[Vec<(u32, f64)>],
        cover: &[[u32; 8]],
        out: &mut Vec<(f64, f64)>,
    ) {
        if w == 8 {
            // 1 - q = E_start[1 - Π ((64-d_w)/64)^c_w], computed as -expm1(Σ c_w·ln(1 - d_w/64))
            // so that small values keep their relative precision; LN[d] = ln(1 - d/64).
            let miss: f64 = cover
                .iter()
                .map(|c| {
                    const LN: [f64; 3] = [0.0, -0.015748356968139168, -0.0317486983145803];
                    let l: f64 = (0..8).map(|i| c[i] as f64 * LN[d[i] as usize]).sum();
                    -l.exp_m1()
                })
                .sum::<f64>()
                / cover.len() as f64;
            out.push((coef, miss));
            return;
        }
        for &(dw, cw) in &choices[w] {
            d[w] = dw;
            walk(w + 1, coef * cw, d, choices, cover, out);
        }
        d[w] = 0;
    }
    walk(0, 1.0, &mut d, &choices, &cover, &mut terms);
    terms.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(terms.len());
    for (coef, miss) in terms {
        match merged.last_mut() {
            Some(last) if (miss - last.1).abs() <= 1e-15 * miss.max(1e-300) => last.0 += coef,
            _ => merged.push((coef, miss)),
        }
    }
    merged.retain(|&(coef, _)| coef != 0.0);
    merged
}

/// Segment length of a binary fuse filter of `n` keys with `arity` (3 or 4) slots per key: a power
/// of two, `2^⌊ln n / ln 3.33 + 2.25⌋` for arity 3 and `2^⌊ln n / ln 2.91 - 0.5⌋` for arity 4,
/// clamped to `4..=2^18`.
///
/// Graf & Lemire, "Binary fuse filters: fast and smaller than xor filters", JEA 27, 2022, §4 (the
/// empirical fit of their reference implementation): short segments make peeling succeed at a
/// lower size factor for small sets, long ones keep the per-key overhead down for large sets.
pub fn fuse_segment_length(arity: u32, n: f64) -> u32 {
    let n = n.max(2.0);
    let e = if arity == 4 { n.ln() / 2.91f64.ln() - 0.5 } else { n.ln() / 3.33f64.ln() + 2.25 };
    let e = e.floor().clamp(2.0, 18.0);
    1u32 << (e as u32)
}

/// Slots per key a binary fuse filter allocates so that peeling succeeds with high probability:
/// `max(1.125, 0.875 + 0.25·ln 10^6 / ln n)` for arity 3, `max(1.075, 0.77 + 0.305·ln 600000 /
/// ln n)` for arity 4 (Graf & Lemire 2022, §4; the extra room for small `n` is their empirical
/// fit). Times the fingerprint bits this is the bits per key, e.g. 9.0 for 8-bit 3-wise at 1M.
pub fn fuse_size_factor(arity: u32, n: f64) -> f64 {
    let n = n.max(2.0);
    if arity == 4 {
        (0.77 + 0.305 * 600_000f64.ln() / n.ln()).max(1.075)
    } else {
        (0.875 + 0.25 * 1_000_000f64.ln() / n.ln()).max(1.125)
    }
}

/// Asymptotic bits per key of a binary fuse filter with `fingerprint_bits`-bit fingerprints:
/// `1.125·f` (3-wise) or `1.075·f` (4-wise) (Graf & Lemire 2022, Table 3); its FPR is `2^-f`.
pub fn fuse_bits_per_key(arity: u32, fingerprint_bits: u32) -> f64 {
    let factor = if arity == 4 { 1.075 } else { 1.125 };
    factor * fingerprint_bits as f64
}

/// Bits per key of an xor filter: `1.23·f + 32/n` (Graf & Lemire, "Xor filters: faster and smaller
/// than Bloom and cuckoo filters", JEA 25, 2020, §3: the array has `⌊1.23·n⌋ + 32` slots).
pub fn xor_bits_per_key(n: f64, fingerprint_bits: u32) -> f64 {
    (1.23 + 32.0 / n.max(1.0)) * fingerprint_bits as f64
}

/// Bits per key of a cuckoo filter at FPR `p` with buckets of 4 and load 95%:
/// `(log2(1/p) + 3) / 0.95` (Fan, Andersen, Kaminsky & Mitzenmacher, "Cuckoo filter: practically
/// better than Bloom", CoNEXT 2014, §5.1: `f ≥ log2(2b/p) = log2(1/p) + 3` fingerprint bits for
/// `b = 4`, divided by the load factor α = 0.955).
pub fn cuckoo_bits_per_key(p: f64) -> f64 {
    (-p.log2() + 3.0) / 0.95
}

/// Fingerprint bits a cuckoo filter with buckets of 4 needs for FPR `p`: `⌈log2(1/p) + 3⌉`.
pub fn cuckoo_fingerprint_bits(p: f64) -> u32 {
    (-p.log2() + 3.0).ceil().clamp(1.0, 64.0) as u32
}

/// Expected bits per element of a Golomb–Rice coded set with modulus `m` (FPR `1/m`) and `p_bits`
/// remainder bits: `P + 1 + 1/(e^(2^P/m) - 1)`.
///
/// Gaps between sorted values uniform on `0..n·m` are close to exponential with mean `m`
/// (Golomb, "Run-length encodings", IEEE Trans. IT 1966; Putze, Sanders & Singler 2009 §2 for
/// GCS). A gap costs `P` remainder bits, one stop bit and `⌊gap / 2^P⌋` unary bits, whose mean is
/// `Σ_{k≥1} e^(-k·2^P/m) = 1/(e^(2^P/m) - 1)`. For `m = 2^P` this is `P + 1.582`; with
/// `2^P ≈ m·ln 2` (BIP-158: `P = 19, m = 784931`) it is `log2 m + 1.47`, close to the entropy bound
/// `log2(e·m)`.
pub fn gcs_bits_per_key(modulus: f64, p_bits: u32) -> f64 {
    let r = 2f64.powi(p_bits as i32) / modulus;
    p_bits as f64 + 1.0 + 1.0 / (r.exp() - 1.0)
}

/// Layers a scalable Bloom filter needs to hold `n` items when its first layer holds
/// `initial` and each next one `growth` times more: the least `L` with
/// `initial·(growth^L - 1)/(growth - 1) ≥ n` (Almeida et al. 2007, §4).
pub fn scalable_layers(n: f64, initial: f64, growth: f64) -> u32 {
    let mut held = 0.0;
    let mut layer = initial.max(1.0);
    let mut layers = 0;
    while held < n && layers < 64 {
        held += layer;
        layer *= growth.max(1.0 + 1e-9);
        layers += 1;
    }
    layers.max(1)
}

/// FPR of layer `i` of a scalable filter with the *first share* schedule (the default of
/// [`crate::ScalableBloom::new`]): `p_0 = a·p`, `p_i = (1 - a)·p·(1 - r)·r^(i-1)` for `i ≥ 1`, so
/// `Σ p_i ≤ a·p + (1 - a)·p = p` over any number of layers (a geometric series after the first).
pub fn scalable_first_share_layer_fpr(p: f64, share: f64, tightening: f64, i: u32) -> f64 {
    if i == 0 {
        share * p
    } else {
        (1.0 - share) * p * (1.0 - tightening) * tightening.powi(i as i32 - 1)
    }
}

/// Bits per key of a scalable Bloom filter holding `n` items with the first-share schedule
/// ([`scalable_first_share_layer_fpr`]): layer `i` sized for `initial·growth^i` items (classic
/// Bloom size, as [`scalable_bits_per_key`]); the total bits over the items held.
pub fn scalable_first_share_bits_per_key(
    n: f64,
    p: f64,
    initial: f64,
    growth: f64,
    tightening: f64,
    share: f64,
) -> f64 {
    let layers = scalable_layers(n, initial, growth);
    let mut bits = 0.0;
    let mut cap = initial.max(1.0);
    for i in 0..layers {
        bits += bloom_optimal_bits(cap, scalable_first_share_layer_fpr(p, share, tightening, i));
        cap *= growth;
    }
    bits / n.max(1.0)
}

/// Bits per key of a scalable Bloom filter holding `n` items: layers of classic Bloom filters,
/// layer `i` sized for `initial·growth^i` items at FPR `p0·r^i` with `p0 = p·(1 - r)`, so the
/// compound FPR stays below `p` ([`scalable_first_layer_fpr`]); the total bits over the items held.
pub fn scalable_bits_per_key(n: f64, p: f64, initial: f64, growth: f64, tightening: f64) -> f64 {
    let layers = scalable_layers(n, initial, growth);
    let p0 = scalable_first_layer_fpr(p, tightening);
    let mut bits = 0.0;
    let mut cap = initial.max(1.0);
    let mut pi = p0;
    for _ in 0..layers {
        bits += bloom_optimal_bits(cap, pi);
        cap *= growth;
        pi *= tightening;
    }
    bits / n.max(1.0)
}

// ---------------------------------------------------------------------------------------------
// Age-partitioned Bloom filters: sliding windows by count and by time
// ---------------------------------------------------------------------------------------------

/// Largest number of slices `k` an item is written into that the aging formulas and filters
/// ([`crate::AgingBloom`], [`crate::TimeLimitedBloom`]) accept. [`aging_fpr`] sums signed terms
/// whose magnitudes add up to about `1.5^(k+1)` per alignment, so its absolute rounding error
/// stays around 1e-11 up to `k = 24`.
pub const AGING_MAX_K: u32 = 24;

/// The lowest false-positive rate the aging planners ([`aging_plan`], [`aging_plan_timed`]) and
/// constructors accept: four orders of magnitude above the rounding error of [`aging_fpr`], so
/// that the rate a plan is checked against is the filter's, not noise. (Asked for 1e-17, the
/// search had settled on a shape whose true rate was 5.6e-11.)
pub const AGING_MIN_FPR: f64 = 1e-7;

/// Largest number of slices of an aging filter: a row of 32 words of 32 bits, two cache lines
/// (the Age-Partitioned Blocked Bloom Filter's "2-3 cache-line accesses per insertion"), one
/// of which is the row's generation stamp.
pub const AGING_MAX_SLICES: u32 = 31;

/// Slices per row the planner considers by default (15 or 31).
pub const AGING_DEFAULT_MAX_SLICES: u32 = 31;

/// Words of a row of `slices` slices: one per slice and the row's stamp.
pub const fn aging_row_words(slices: u32) -> u32 {
    slices + 1
}

/// Bits of one slice in one row of the aging layout (a 32-bit word).
pub const AGING_WORD_BITS: f64 = 32.0;

/// Probability that a query finds `k` consecutive slices reporting its bit, when slice `i`
/// (youngest first) reports it independently with probability `fills[i]`: a run-length
/// recurrence over the slices, `O(len·k)`.
///
/// The setting of Shtul, Baquero & Almeida's "Age-Partitioned Bloom Filters" (arXiv
/// 2001.03147, 2020): each slice a classic bit array, the slices independent, a query a false
/// positive when some `k` consecutive slices all have its bit set. [`apbf_fpr`] evaluates it at
/// that paper's steady state.
pub fn apbf_fpr_from_fills(k: usize, fills: &[f64]) -> f64 {
    if k == 0 {
        return 1.0;
    }
    if fills.len() < k {
        return 0.0;
    }
    // run[r]: probability that no run of k was found yet and the current run has length r.
    let mut run = vec![0.0; k];
    run[0] = 1.0;
    let mut found = 0.0;
    for &f in fills {
        let f = if f.is_nan() { 1.0 } else { f.clamp(0.0, 1.0) };
        let mut next = vec![0.0; k];
        for (r, &pr) in run.iter().enumerate() {
            next[0] += pr * (1.0 - f);
            if r + 1 == k {
                found += pr * f;
            } else {
                next[r + 1] += pr * f;
            }
        }
        run = next;
    }
    found.clamp(0.0, 1.0)
}

/// The false-positive rate of an age-partitioned filter of independent slices (the APBF
/// paper's setting, Shtul, Baquero & Almeida 2020) with `k + l` slices right before a
/// generation shift, when every slice is sized to be half full after `k` generations (`m =
/// k·g/ln 2` bits): the `k` youngest slices are filled to `(i + 1)/(2k)` (`i = 0` the youngest,
/// a linear approximation of the fill) and the `l` older ones to 1/2
/// ([`apbf_fpr_from_fills`]). This is the recurrence `CalculateFalsePositiveRate` of
/// CrowdStrike's implementation of the paper (github.com/CrowdStrike/apbf, MIT), from which the
/// fills are taken.
pub fn apbf_fpr(k: u32, l: u32) -> f64 {
    let k = k as usize;
    let fills: Vec<f64> =
        (0..k + l as usize).map(|i| if i < k { (i + 1) as f64 / (2 * k) as f64 } else { 0.5 }).collect();
    apbf_fpr_from_fills(k, &fills)
}

/// [`aging_fpr`] as if the slices were independent: slice `i` (youngest first) holds the items
/// of generations `i+1-k ..= i` and a row's word of it is filled to `1 - e^(-load/32)`; the rate
/// is `1 - Π(1 - P_a)` over alignments `a` of the products `P_a` of their `k` fills. Below
/// [`aging_fpr`] (the row layout correlates the slices of a row); used to bracket it.
pub fn aging_fpr_independent(k: u32, live: usize, gens: &[f64]) -> f64 {
    let k = k as usize;
    if k == 0 || live < k {
        return if k == 0 { 1.0 } else { 0.0 };
    }
    let fills: Vec<f64> = (0..live)
        .map(|i| {
            let load: f64 = (i.saturating_sub(k - 1)..=i).map(|a| gen_load(gens, a as isize)).sum();
            1.0 - (-load / AGING_WORD_BITS).exp()
        })
        .collect();
    let miss: f64 = fills.windows(k).map(|w| (-w.iter().product::<f64>().min(1.0)).ln_1p()).sum();
    (-miss.exp_m1()).clamp(0.0, 1.0)
}

/// The mean load of generation `a` per row (0 outside the slice, NaN or negative).
fn gen_load(gens: &[f64], a: isize) -> f64 {
    if a < 0 {
        return 0.0;
    }
    match gens.get(a as usize) {
        Some(&x) if x > 0.0 => x.min(1e12),
        _ => 0.0,
    }
}

/// False-positive rate of `sift`'s age-partitioned row layout ([`crate::AgingBloom`],
/// [`crate::TimeLimitedBloom`]), exact per alignment under Poisson row loads.
///
/// The layout is `sift`'s blocked age-partitioned filter (Shtul, Baquero & Almeida, arXiv
/// 2001.03147, describe an Age-Partitioned Blocked Bloom Filter with 2-3 cache-line accesses per
/// insertion; this is `sift`'s own design to that end): an item lives in one row (chosen by its
/// hash, the same row in every slice), a row holds one 32-bit word per slice, and the item sets
/// one bit in the word of each
/// of the `k` youngest slices; `sift` makes that bit depend on the slice's offset in the run
/// (`src/simd/rows.rs`), so a query tests, at each *alignment* `a` (`0 ..= live - k`), one
/// specific bit in each of the slices `a .. a+k`. `live` slices are queried (youngest first);
/// generation `a` (0 = the current one) put `gens[a]` items per row on average into slices
/// `a ..= a+k-1`.
///
/// Two items of one generation set bits in the same `k` words, so the slices of a row are
/// positively correlated, and the independent-slice product ([`aging_fpr_independent`], the
/// paper's analysis for separate bit arrays) is too low: by 1.6× at 1% and more at lower rates.
/// Per alignment this formula is exact under the Poisson model: with `S` a subset of the
/// alignment's slices and `c_a(S)` the slices of `S` generation `a` wrote to, the probability
/// that every slice of `S` misses the query's bit is `Π_a exp(-λ_a·(1 - (31/32)^c_a(S)))` (a
/// Poisson number of items, each hitting the queried bit of each of its words with probability
/// 1/32), and inclusion–exclusion over `S` gives the probability that all `k` bits are set.
/// Each generation covers a prefix or a suffix of the alignment's slices, so the sum over `S`
/// runs as a dynamic program over prefix counts in `O(k^3)`. Different alignments test
/// different bits, so their events are nearly independent: the rate is `1 - Π(1 - P_a)` over the
/// alignments' probabilities `P_a`, an upper bound since the events are positively associated
/// (they all grow with the loads; Harris's inequality), tight to a fraction of a percent.
///
/// Offsets cost about a factor of 2 in rate at equal memory against the paper's plain runs,
/// whose overlapping windows share bits ([`apbf_fpr_from_fills`]); the sizing pays it with a
/// few percent more memory, in exchange for items leaving the filter sharply (see
/// [`crate::AgingBloom`]).
pub fn aging_fpr(k: u32, live: usize, gens: &[f64]) -> f64 {
    let k = k as usize;
    if k == 0 {
        return 1.0;
    }
    if k > AGING_MAX_K as usize || live < k {
        return if live < k { 0.0 } else { 1.0 };
    }
    // ln Π(1 - P_a), summed with ln_1p so that small rates keep their precision.
    let mut miss = 0.0;
    // Alignments whose generations carry the same loads have the same probability: in a steady
    // state all alignments away from the young end do, so remember the last one.
    let mut last: Option<(Vec<f64>, f64)> = None;
    for a in 0..=live - k {
        let v = a + k - 1;
        let sig: Vec<f64> = (a as isize - k as isize + 1..=v as isize).map(|g| gen_load(gens, g)).collect();
        let term = match &last {
            Some((s, t)) if *s == sig => *t,
            _ => {
                let t = aging_all_set(k, a, v, &|g| gen_load(gens, g)).clamp(0.0, 1.0);
                last = Some((sig, t));
                t
            }
        };
        miss += (-term).ln_1p();
    }
    (-miss.exp_m1()).clamp(0.0, 1.0)
}

/// `P(every slice u..=v has the query's bit)` under Poisson loads (see [`aging_fpr`]);
/// `v - u ≤ k`.
fn aging_all_set(k: usize, u: usize, v: usize, lam: &dyn Fn(isize) -> f64) -> f64 {
    const MAXW: usize = AGING_MAX_K as usize + 2;
    let w = v - u + 1;
    debug_assert!(w <= k + 1 && w < MAXW);
    let q = 1.0 - 1.0 / AGING_WORD_BITS;
    let mut qpow = [1.0f64; MAXW];
    for c in 1..=w {
        qpow[c] = qpow[c - 1] * q;
    }
    // pre[j][c]: product of the factors of the generations covering slices u..u+j-1 of the
    // window (a prefix of length j), at c of them in S; suf[j][c] likewise for those covering
    // u+j..=v (a suffix starting at j ≥ 1).
    let mut pre = [[1.0f64; MAXW]; MAXW];
    let mut suf = [[1.0f64; MAXW]; MAXW];
    let (ui, vi, ki) = (u as isize, v as isize, k as isize);
    for a in ui - ki + 1..=vi {
        let l = lam(a);
        if l <= 0.0 {
            continue;
        }
        let s = (a.max(ui) - ui) as usize;
        let e = ((a + ki - 1).min(vi) - ui) as usize;
        let table = if s == 0 { &mut pre[e + 1] } else { &mut suf[s] };
        debug_assert!(s == 0 || e == w - 1, "a window of at most k+1 slices");
        for c in 0..=w {
            table[c] *= (-l * (1.0 - qpow[c])).exp();
        }
    }
    let mut total = 0.0;
    for t in 0..=w {
        let mut dp = [0.0f64; MAXW];
        dp[0] = 1.0;
        for j in 0..w {
            let top = j.min(t);
            if j >= 1 {
                for p in 0..=top {
                    dp[p] *= suf[j][t - p];
                }
            }
            for p in (1..=(j + 1).min(t)).rev() {
                dp[p] += dp[p - 1];
            }
            for p in 0..=(j + 1).min(t) {
                dp[p] *= pre[j + 1][p];
            }
        }
        if t % 2 == 0 {
            total += dp[t];
        } else {
            total -= dp[t];
        }
    }
    total
}

/// The largest per-row generation load at which an aging filter with `k` and `live` slices,
/// every generation equally loaded (the steady state right before a shift), keeps
/// [`aging_fpr`] ≤ `p`. 0 if none does.
pub fn aging_max_load(k: u32, live: usize, p: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) || k == 0 || k > AGING_MAX_K || live < k as usize {
        return 0.0;
    }
    let steady = |lambda: f64| vec![lambda; live];
    // The independent-slice formula is below the exact one at every load that matters (the
    // slices of a row are positively correlated), so its load is a good upper end: bisect it
    // first (cheap), then settle the exact load from there.
    let indep = |l: f64| aging_fpr_independent(k, live, &steady(l));
    let exact = |l: f64| aging_fpr(k, live, &steady(l));
    let mut hi = AGING_WORD_BITS;
    while indep(hi) <= p && hi < 1e9 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if indep(mid) <= p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo <= 0.0 {
        return 0.0;
    }
    // Bracket [a, b] with exact(a) ≤ p < exact(b).
    let (mut a, mut b) = (lo, lo);
    if exact(b) <= p {
        while exact(b) <= p {
            a = b;
            b *= 1.25;
            if b > 1e9 {
                return a;
            }
        }
    } else {
        while exact(a) > p {
            b = a;
            a *= 0.5;
            if a < 1e-12 {
                return 0.0;
            }
        }
    }
    // Bracketed secant on ln(rate) - ln(p) (smooth and increasing in the load), with the
    // Illinois modification so that both ends move.
    let f = |x: f64| exact(x).max(f64::MIN_POSITIVE).ln() - p.ln();
    let (mut fa, mut fb) = (f(a), f(b));
    let mut side = 0;
    for _ in 0..100 {
        if b - a <= 1e-9 * b {
            break;
        }
        let mut x = b - fb * (b - a) / (fb - fa);
        if !(x > a && x < b) {
            x = 0.5 * (a + b);
        }
        let fx = f(x);
        if fx <= 0.0 {
            a = x;
            fa = fx;
            if side == -1 {
                fb *= 0.5;
            }
            side = -1;
        } else {
            b = x;
            fb = fx;
            if side == 1 {
                fa *= 0.5;
            }
            side = 1;
        }
    }
    a
}

/// A sizing of an aging filter ([`aging_plan`], [`aging_plan_timed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgingPlan {
    /// Slices per row (15 or 31).
    pub slices: u32,
    /// Slices an item is written into, `k`.
    pub k: u32,
    /// Generations a window holds, `l`: the count window is `l·g` items for generations of
    /// `g`; the time window `T` is `l` generations of `T/l`.
    pub l: u32,
    /// Items of one generation per row: rows = `⌈g / load⌉`.
    pub load: f64,
    /// Bits of memory per item of the window, `32·(slices + 1) / (l·load)`.
    pub bits_per_item: f64,
}

/// Slices a time-limited filter keeps free beyond `k + l + 1`, so that a rate up to
/// [`AGING_RATE_HEADROOM`] times the planned one can end generations early (keeping every
/// slice at its design load) without retiring slices still inside the window.
pub fn aging_spare_slices(l: u32) -> u32 {
    l.div_ceil(4)
}

/// The insertion rate, relative to the planned one, up to which a time-limited filter sized by
/// [`aging_plan_timed`] keeps its target FPR ([`aging_spare_slices`]).
pub const AGING_RATE_HEADROOM: f64 = 1.25;

/// The smallest aging filter, per item of its window, whose FPR stays ≤ `p` in the steady
/// state: for each row width (15 or 31 slices, up to `max_slices`) and each `k` with `l =
/// slices - k ≥ 1`, the largest generation load [`aging_max_load`] allows, and of those the
/// plan with the fewest bits per window item (ties: fewer slices, then smaller `k`).
///
/// For a window of `n` items the generation size is `g = ⌈n / l⌉` and the rows
/// `⌈g / load⌉`: the APBF paper's sizing (each slice half full after its `k` generations, `m =
/// k·g/ln 2` bits) with the fill replaced by the exact formula of the row layout, which also
/// chooses `k` and `l`. `None` if `p` is not in [[`AGING_MIN_FPR`], 1) or `max_slices < 15`.
/// Results are remembered per `(p, max_slices)`.
pub fn aging_plan(p: f64, max_slices: u32) -> Option<AgingPlan> {
    aging_plan_memo(p, max_slices, false)
}

/// [`aging_plan`] for a time-limited filter: `k + l` slices live in the steady state of the
/// planned rate, and the row has at least `k + l + 1 + `[`aging_spare_slices`]`(l)` slices
/// (a free one for the shift, the others for rates up to [`AGING_RATE_HEADROOM`] times the
/// plan). The FPR bound holds with every slot but one live, so it holds up to that headroom.
pub fn aging_plan_timed(p: f64, max_slices: u32) -> Option<AgingPlan> {
    aging_plan_memo(p, max_slices, true)
}

fn aging_plan_memo(p: f64, max_slices: u32, timed: bool) -> Option<AgingPlan> {
    if !(AGING_MIN_FPR..1.0).contains(&p) {
        return None;
    }
    if max_slices < 15 {
        return None;
    }
    let max_slices = if max_slices >= AGING_MAX_SLICES { AGING_MAX_SLICES } else { 15 };
    type Memo = std::sync::Mutex<Vec<((u64, u32, bool), Option<AgingPlan>)>>;
    static MEMO: std::sync::OnceLock<Memo> = std::sync::OnceLock::new();
    let memo = MEMO.get_or_init(|| std::sync::Mutex::new(Vec::new()));
    let key = (p.to_bits(), max_slices, timed);
    // A poisoned lock only means another thread panicked while pushing a whole entry.
    if let Some(&(_, plan)) = memo.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(q, _)| *q == key) {
        return plan;
    }
    let plan = aging_plan_search(p, max_slices, timed);
    let mut entries = memo.lock().unwrap_or_else(|e| e.into_inner());
    if entries.len() == 64 {
        entries.remove(0);
    }
    entries.push((key, plan));
    plan
}

/// The slices of a time-limited filter with `k` and `l`: room for `k + l + 1` slices and the
/// spares, rounded up so that a row (with its stamp) is whole cache lines.
pub fn aging_timed_slices(k: u32, l: u32) -> u32 {
    aging_row_words(k + l + 1 + aging_spare_slices(l)).div_ceil(16) * 16 - 1
}

/// A shape an aging filter can have, for the planners: `slices` per row, `k`, `l` generations
/// per window, and the slices live in the worst case the FPR bound covers (`slices` for a
/// window by count; all but the free one for a window by time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgingShape {
    /// Slices per row (15 or 31).
    pub slices: u32,
    /// Slices an item is written into.
    pub k: u32,
    /// Generations per window.
    pub l: u32,
    /// Live slices the FPR is computed with.
    pub live: usize,
}

/// Every shape [`aging_plan`] (`timed = false`) or [`aging_plan_timed`] chooses from, with rows
/// of at most `max_slices` slices: for a window by count each row width with each `k` (and
/// `l = slices - k`); for a window by time each `k` with the largest `l` of each row width
/// ([`aging_timed_slices`]).
pub fn aging_shapes(timed: bool, max_slices: u32) -> Vec<AgingShape> {
    let max_slices = max_slices.min(AGING_MAX_SLICES);
    let mut out = Vec::new();
    for k in 1..=AGING_MAX_K {
        if timed {
            for l in 1..max_slices {
                let slices = aging_timed_slices(k, l);
                if slices > max_slices {
                    break;
                }
                // Keep only the largest l for each row width: more generations per window at
                // the same memory.
                if aging_timed_slices(k, l + 1) == slices {
                    continue;
                }
                out.push(AgingShape { slices, k, l, live: slices as usize - 1 });
            }
        } else {
            for slices in [15, AGING_MAX_SLICES].into_iter().filter(|&s| s <= max_slices) {
                if k < slices {
                    out.push(AgingShape { slices, k, l: slices - k, live: slices as usize });
                }
            }
        }
    }
    out
}

fn aging_plan_search(p: f64, max_slices: u32, timed: bool) -> Option<AgingPlan> {
    let cands: Vec<(u32, u32, u32, usize)> =
        aging_shapes(timed, max_slices).into_iter().map(|c| (c.k, c.l, c.slices, c.live)).collect();
    let bits =
        |slices: u32, l: u32, load: f64| AGING_WORD_BITS * aging_row_words(slices) as f64 / (l as f64 * load);
    // Rank by the independent-slice load (above the exact one, so its bits are below the exact
    // bits), then settle the exact load in that order until the next candidate's lower estimate
    // is no better than the best settled plan.
    let mut ranked: Vec<(f64, (u32, u32, u32, usize))> = cands
        .into_iter()
        .filter_map(|c @ (k, l, slices, live)| {
            let steady = |x: f64| vec![x; live];
            let (mut lo, mut hi) = (0.0, AGING_WORD_BITS);
            while aging_fpr_independent(k, live, &steady(hi)) <= p && hi < 1e9 {
                hi *= 2.0;
            }
            for _ in 0..60 {
                let mid = 0.5 * (lo + hi);
                if aging_fpr_independent(k, live, &steady(mid)) <= p {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            (lo > 0.0).then(|| (bits(slices, l, lo), c))
        })
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1 .2.cmp(&b.1 .2)).then(a.1 .0.cmp(&b.1 .0)));
    let mut best: Option<AgingPlan> = None;
    for (lower_bound, (k, l, slices, live)) in ranked {
        if best.is_some_and(|b| lower_bound >= b.bits_per_item) {
            break;
        }
        let load = aging_max_load(k, live, p);
        if load <= 0.0 {
            continue;
        }
        let plan = AgingPlan { slices, k, l, load, bits_per_item: bits(slices, l, load) };
        let better = match best {
            None => true,
            Some(b) => (plan.bits_per_item, plan.slices, plan.k) < (b.bits_per_item, b.slices, b.k),
        };
        if better {
            best = Some(plan);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long remainders give rates below f64's epsilon: still positive, `load · 2^-r` to first
    /// order, never rounded to 0.
    #[test]
    fn quotient_fpr_of_long_remainders_is_not_zero() {
        for r in [20u32, 54, 60] {
            let p = quotient_fpr(r, 0.95);
            let first_order = 0.95 * 0.5f64.powi(r as i32);
            assert!((p / first_order - 1.0).abs() < 1e-6, "r = {r}: {p} vs {first_order}");
        }
    }

    #[test]
    fn seed_002_worked_example() {
        let m = bloom_optimal_bits(1e8, 0.01);
        // The seed prints 958,505,832 (rounded ln values); the exact value is 958,505,837.7.
        assert!((m - 958_505_837.74).abs() < 0.01, "m = {m}");
        assert!((m / 8.0 / 1024.0 / 1024.0 - 114.26).abs() < 0.01);
        assert_eq!(bloom_optimal_k(m, 1e8), 7);
        assert_eq!(bloom_k_for_fpr(0.01), 7);
    }

    /// The pruned planner chooses exactly the `(blocks, k)` of the exhaustive one (every `k`
    /// settled) over a grid of sizes (1 to 1e14 items, 5 per decade, plus exact powers of ten and
    /// their neighbours) and FPRs (0.5 down to 1e-7), for `max_k` 16, 8 and 3.
    #[test]
    fn plan_matches_the_exhaustive_planner() {
        let mut ps: Vec<f64> = vec![0.5, 0.3, 0.1, 0.05, 0.02, 0.01, 0.005, 0.001, 1e-4, 1e-5, 1e-6, 1e-7];
        ps.extend((1..=12).map(|i| 0.0007 * 1.71f64.powi(i)));
        let mut ns: Vec<f64> = (0..=70).map(|i| 10f64.powf(i as f64 / 5.0).round()).collect();
        for e in 0..=12 {
            let x = 10f64.powi(e);
            ns.extend([x - 1.0, x + 1.0, x + 12_345.0]);
        }
        ns.extend([2.0, 3.0, 7.0, 511.0, 513.0, 19_402.0 * 51.0, 123_456_789.0]);
        let mut checked = 0;
        for &p in &ps {
            for max_k in [16, 8, 3] {
                for &n in &ns {
                    if n < 1.0 {
                        continue;
                    }
                    assert_eq!(
                        blocked_words_plan(n, p, max_k),
                        blocked_words_plan_exhaustive(n, p, max_k),
                        "n {n} p {p} max_k {max_k}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 3000, "{checked}");
    }

    /// The edges of the pruned planner, against the exhaustive one: tiny `n` (1 to 40), FPRs
    /// near 0.5 and down to 1e-300 (where the exact FPR's rounding noise dominates), every
    /// `max_k` from 1 to 16, and `n` around the size limit (2^42 blocks at each `k`'s load,
    /// where `BlockedBloom::new` must return the same `CapacityExceeded`) and beyond it up to
    /// `usize::MAX`, where `blocks` saturates at `u64::MAX` and the tie still goes to the
    /// smaller `k`.
    #[test]
    fn plan_matches_the_exhaustive_planner_at_the_edges() {
        let mut ps: Vec<f64> = vec![0.5 - 1e-12, 0.4999, 0.49, 0.45, 0.4, 0.25, 0.9, 1.0 - 1e-12];
        for e in [7.0f64, 8.0, 9.0, 10.0, 12.0, 15.0, 20.0, 50.0, 300.0] {
            for f in [1.0, 1.1, 0.9, 0.5] {
                ps.push(f * 10f64.powf(-e));
            }
        }
        let mut ns: Vec<f64> = (1..=40).map(|i| i as f64).collect();
        ns.extend([1e3, 1e6, 1e9, 1e12, 1e15, 1e16, 1e17, 1e18, 1e19, u64::MAX as f64, usize::MAX as f64]);
        let limit_blocks = (crate::bits::MAX_BYTES / 64) as f64;
        let mut checked = 0;
        for &p in &ps {
            let mut ns = ns.clone();
            for k in 1..=16 {
                let at_limit = limit_blocks * blocked_words_max_load(k, p);
                if at_limit.is_finite() && at_limit >= 1.0 {
                    ns.extend([1.0 - 1e-9, 1.0, 1.0 + 1e-9, 0.999, 1.001].map(|f| (at_limit * f).round()));
                }
            }
            for max_k in 1..=16 {
                for &n in &ns {
                    let want = blocked_words_plan_exhaustive(n, p, max_k);
                    assert_eq!(blocked_words_plan(n, p, max_k), want, "n {n} p {p} max_k {max_k}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 50_000, "{checked}");
        // Above the limit at every k, the constructor refuses with the error the exhaustive plan
        // gives (the plan's bytes), saturated or not.
        for &p in &[0.01, 1e-7, 1e-9] {
            let at_limit = (1..=16).map(|k| limit_blocks * blocked_words_max_load(k, p)).fold(0.0, f64::max);
            for n in [at_limit * 1.001, at_limit * 1e3, 1e18, usize::MAX as f64] {
                let n = n.round().min(usize::MAX as f64) as usize;
                let (blocks, _) = blocked_words_plan_exhaustive(n as f64, p, 16);
                let bytes = blocks as u128 * 64;
                assert!(bytes > crate::bits::MAX_BYTES, "n {n} p {p}");
                match crate::BlockedBloom::with_hasher(n, p, crate::Hasher::default()) {
                    Err(crate::Error::CapacityExceeded { requested_bytes, .. }) => {
                        assert_eq!(requested_bytes, bytes, "n {n} p {p}")
                    }
                    other => panic!("n {n} p {p}: {:?}", other.map(|f| f.num_bits())),
                }
            }
        }
    }

    /// Where the exact FPR is noisy (small `p`: its absolute rounding error, ~1e-13, is a large
    /// fraction of `p`), `settle_blocks` can move a `k`'s estimate by up to its 64 steps, not
    /// the "few blocks" a pruning margin of 4 assumed; the pruned planner must still choose what
    /// the exhaustive one chooses. The sizes that show it are near the `p` at which two `k` have
    /// the same load (their block counts within the noise of each other): the first case was
    /// (3087589523, 16) instead of (3087589522, 15).
    #[test]
    fn plan_matches_the_exhaustive_planner_where_the_fpr_is_noisy() {
        let (n, p) = (43_047_648_550.0, 1.7064001807148654e-6);
        assert_eq!(blocked_words_plan(n, p, 16), blocked_words_plan_exhaustive(n, p, 16));
        // Near the k = 14/15 and 15/16 crossovers (where load_14 = load_15, load_15 = load_16),
        // sizes of 1e7 to 1e11 blocks.
        let mut st = 1u64;
        let mut next = || crate::filters::blocked_bloom::tests::splitmix(&mut st);
        for crossover in [5.566922276703176e-6, 1.7064002489708754e-6] {
            for j in -30i32..=30 {
                let p = crossover * (1.0 + j as f64 * 2e-8);
                let load = blocked_words_max_load(15, p);
                for _ in 0..8 {
                    let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
                    let n = (load * 10f64.powf(7.0 + 4.0 * u)).round();
                    assert_eq!(
                        blocked_words_plan(n, p, 16),
                        blocked_words_plan_exhaustive(n, p, 16),
                        "n {n} p {p:e}"
                    );
                }
            }
        }
        // What the pruning relies on: `settle_can_reach` never says "no" to a count the settle
        // ends at or below.
        for p in [1e-5, 1e-7, 1e-9] {
            for k in 1..=16 {
                let load = blocked_words_max_load(k, p);
                if load <= 0.0 {
                    continue;
                }
                for _ in 0..20 {
                    let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
                    let n = (load * 10f64.powf(12.6 * u)).round().max(1.0);
                    let estimate = (n / load).ceil().max(1.0);
                    let settled = settle_blocks(n, p, k, estimate);
                    for target in (settled.saturating_sub(2).max(1))..settled + 70 {
                        assert!(
                            settle_can_reach(n, p, k, estimate, target) || target < settled,
                            "n {n} p {p} k {k} target {target} settled {settled}"
                        );
                    }
                }
            }
        }
    }

    /// The remembered search gives the edge of the FPR bound: at the returned load the layout
    /// meets `p`, a millionth above it it does not; asked again (from the memo) the same value.
    #[test]
    fn blocked_max_load_is_the_edge_and_remembered() {
        for (k, p) in [(6, 0.01), (7, 0.01), (3, 0.1), (10, 0.001), (16, 1e-6)] {
            let load = blocked_words_max_load(k, p);
            assert!(blocked_words_fpr_at_load(load, k) <= p, "k {k} p {p}");
            assert!(blocked_words_fpr_at_load(load * (1.0 + 1e-6), k) > p, "k {k} p {p}");
            assert_eq!(blocked_words_max_load(k, p).to_bits(), load.to_bits());
        }
        // More pairs than the memo keeps: still exact.
        for i in 0..100 {
            let p = 0.001 + i as f64 * 1e-4;
            let load = blocked_words_max_load(7, p);
            assert!(blocked_words_fpr_at_load(load, 7) <= p);
            assert!(blocked_words_fpr_at_load(load * (1.0 + 1e-6), 7) > p);
        }
    }

    #[test]
    fn fpr_and_capacity_are_inverse() {
        for p in [0.1, 0.01, 0.001, 1e-6] {
            let m = bloom_optimal_bits(1e6, p);
            let n = bloom_capacity(m, p);
            assert!((n - 1e6).abs() < 1.0);
            let k = (m / 1e6) * LN_2;
            assert!((bloom_fpr(m, 1e6, k) - p).abs() / p < 1e-9);
            let n2 = bloom_capacity_with_k(m, k, p);
            assert!((n2 - 1e6).abs() / 1e6 < 1e-9);
        }
    }

    #[test]
    fn swamidass_baldi_inverts_expected_fill() {
        let (m, k, n): (f64, f64, f64) = (1e6, 7.0, 1e5);
        let expected_set = m * (1.0 - (-k * n / m).exp());
        assert!((bloom_estimate_items(m, k, expected_set) - n).abs() < 1e-6 * n);
        assert!(bloom_estimate_items(m, k, m).is_infinite());
    }

    #[test]
    fn ln_gamma_matches_factorials() {
        let mut fact = 1.0f64;
        for i in 1..30u32 {
            fact *= i as f64;
            assert!((ln_gamma(i as f64 + 1.0) - fact.ln()).abs() < 1e-9, "i = {i}");
        }
    }

    #[test]
    fn blocked_needs_more_bits_than_classic() {
        let n = 1e6;
        for p in [0.1, 0.01, 0.001] {
            let (blocks, k) = blocked_plan(n, p, 512.0, 16);
            let m = blocks as f64 * 512.0;
            assert!(blocked_fpr(m, n, k as f64, 512.0) <= p);
            assert!(blocked_fpr((blocks - 1) as f64 * 512.0, n, k as f64, 512.0) > p * 0.999);
            assert!(m > bloom_optimal_bits(n, p));
            assert!(m < 1.6 * bloom_optimal_bits(n, p), "p = {p}, bits/key {}", m / n);
        }
    }

    #[test]
    fn blocked_converges_to_classic_for_huge_blocks() {
        let (m, n, k) = (1e6, 1e5, 7.0);
        let a = blocked_fpr(m, n, k, 1e6);
        let b = bloom_fpr(m, n, k);
        // Only the Poisson spread of the load separates them: well under 1%.
        assert!((a - b).abs() / b < 1e-2, "{a} vs {b}");
    }

    #[test]
    fn scalable_bound() {
        let p0 = scalable_first_layer_fpr(0.01, 0.5);
        let total = compound_fpr((0..60).map(|i| p0 * 0.5f64.powi(i)));
        assert!(total <= 0.01);
    }

    #[test]
    fn split_block_formulas() {
        // One item per block on average: (1 - (31/32))^8 dominated by the loaded blocks.
        assert!(split_block_fpr(1000.0, 0.0) == 0.0);
        assert!(split_block_fpr(0.0, 10.0) == 1.0);
        // The spec's "about 11.54 bits per value at about 0.5%" is where k = 8 is optimal for the
        // classic formula: m/n = 8 / ln 2, p = 2^-8 ≈ 0.39%.
        assert!((parquet_sbbf_bits_per_value(0.5f64.powi(8)) - 8.0 / core::f64::consts::LN_2).abs() < 1e-9);
        assert!((parquet_sbbf_bits_per_value(0.01) - 9.6815).abs() < 1e-4);
        // arrow-rs/parquet-mr sizes (n, p) -> bytes.
        assert_eq!(parquet_sbbf_bytes(10_000.0, 0.01), 16 * 1024);
        assert_eq!(parquet_sbbf_bytes(1_000_000.0, 0.01), 2 * 1024 * 1024);
        assert_eq!(parquet_sbbf_bytes(1.0, 0.5), 32);
        assert_eq!(parquet_sbbf_bytes(1e12, 0.01), 128 << 20);
        // The real FPR at the spec's unrounded size is above the target (the formula ignores
        // the lanes and the block-load spread); the tight size needs more blocks.
        let n = 1e6;
        let spec_blocks = n * parquet_sbbf_bits_per_value(0.01) / 256.0;
        assert!(split_block_fpr(spec_blocks, n) > 0.01);
        let b = split_block_blocks_for(n, 0.01);
        assert!(split_block_fpr(b as f64, n) <= 0.01);
        assert!(split_block_fpr(b as f64 - 1.0, n) > 0.01);
        assert!(b as f64 > spec_blocks);
        // Tiny sets, where the growth loop starts from a single block.
        for (n, p) in [(1.0, 0.5), (10.0, 1e-4), (3.0, 1e-9)] {
            let b = split_block_blocks_for(n, p);
            assert!(split_block_fpr(b as f64, n) <= p);
            assert!(b == 1 || split_block_fpr(b as f64 - 1.0, n) > p);
        }
    }

    #[test]
    fn fuse_sizes_match_the_paper() {
        assert_eq!(fuse_segment_length(3, 1e6), 8192);
        assert_eq!(fuse_segment_length(4, 1e6), 4096);
        assert_eq!(fuse_segment_length(3, 1e9), 1 << 18);
        assert!((fuse_size_factor(3, 1e6) - 1.125).abs() < 1e-12);
        assert!((fuse_size_factor(4, 1e7) - 1.075).abs() < 1e-12);
        assert!((fuse_size_factor(3, 1000.0) - 1.375).abs() < 1e-9);
        assert!((fuse_bits_per_key(3, 8) - 9.0).abs() < 1e-12);
    }

    #[test]
    fn golomb_rice_cost() {
        // m = 2^P: P + 1/(1 - 1/e) = P + 1.582.
        assert!((gcs_bits_per_key(1024.0, 10) - 11.582).abs() < 1e-3);
        // BIP-158's parameters: about 21.05 bits per element, 1.47 over log2(m).
        let b = gcs_bits_per_key(784_931.0, 19);
        assert!((b - 784_931f64.log2() - 1.47).abs() < 0.01, "{b}");
    }

    #[test]
    fn cuckoo_and_scalable() {
        assert!((cuckoo_bits_per_key(0.01) - 10.1515).abs() < 1e-3);
        assert_eq!(cuckoo_fingerprint_bits(0.01), 10);
        assert_eq!(scalable_layers(1000.0, 1000.0, 2.0), 1);
        assert_eq!(scalable_layers(3001.0, 1000.0, 2.0), 3);
        let b = scalable_bits_per_key(1e6, 0.01, 1e6, 2.0, 0.5);
        assert!((b - bloom_bits_per_key(0.005)).abs() < 1e-9);
    }

    #[test]
    fn blocked_plan_terminates_when_the_first_guess_is_too_small() {
        // The first guess (the classic size) misses p = 0.3 at k = 1, so the upper bound grows by
        // 1.5x; it used to become fractional and the bisection never ended.
        let (blocks, k) = blocked_plan(1e4, 0.3, 512.0, 16);
        assert!(blocked_fpr(blocks as f64 * 512.0, 1e4, k as f64, 512.0) <= 0.3);
    }

    /// A direct simulation of the row layout with truly independent bit positions (a model,
    /// not the filter): the false-positive rate of `aging_fpr` is the measured one, within
    /// 99.9% binomial bounds (plus 2% for the finite number of rows), for shapes at and around
    /// the planner's loads; the independent-slice formula is below it.
    #[test]
    fn aging_fpr_matches_a_simulation_of_the_layout() {
        fn next(st: &mut u64) -> u64 {
            *st = st.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = *st;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        let mut st = 17;
        for (k, live, load) in [
            (5usize, 16usize, 3.5f64),
            (8, 32, 2.0),
            (9, 32, 2.1),
            (12, 24, 1.25),
            (6, 27, 3.0),
            (10, 32, 1.6),
        ] {
            let rows = 4000usize;
            let g = (load * rows as f64) as usize;
            // words[row][slice], slice = age (no ring needed: a snapshot right before a shift).
            let mut words = vec![vec![0u32; live]; rows];
            for gen in 0..live {
                for _ in 0..g {
                    let r = (next(&mut st) % rows as u64) as usize;
                    for j in 0..k {
                        let s = gen + j;
                        if s < live {
                            // Offset j of a run starting at `gen`: the bit is independent per
                            // (item, slice, offset) in this model.
                            words[r][s] |= 1 << (next(&mut st) >> 59);
                        }
                    }
                }
            }
            let probes = 300_000u64;
            let mut fp = 0u64;
            for _ in 0..probes {
                let r = (next(&mut st) % rows as u64) as usize;
                let mut hit = false;
                for a in 0..=live - k {
                    if (0..k).all(|j| words[r][a + j] >> (next(&mut st) >> 59) & 1 == 1) {
                        hit = true;
                    }
                }
                fp += hit as u64;
            }
            let gens = vec![g as f64 / rows as f64; live];
            let formula = aging_fpr(k as u32, live, &gens);
            let indep = aging_fpr_independent(k as u32, live, &gens);
            let measured = fp as f64 / probes as f64;
            let sd = (formula * (1.0 - formula) / probes as f64).sqrt();
            eprintln!("k {k} live {live} load {load}: measured {measured:.6} formula {formula:.6} independent {indep:.6}");
            assert!(
                (measured - formula).abs() <= 3.3 * sd + 0.02 * formula,
                "k {k}: {measured} vs {formula}"
            );
            assert!(indep < formula);
        }
    }

    /// The run-length recurrence is the exact probability for independent slices: checked by
    /// enumerating every pattern of set slices for small shapes; the paper's steady state grows
    /// with `l` and falls with `k`.
    #[test]
    fn apbf_recurrence_matches_enumeration() {
        for (k, l) in [(1usize, 1usize), (2, 3), (3, 5), (4, 7), (5, 9)] {
            let fills: Vec<f64> = (0..k + l).map(|i| 0.2 + 0.6 * ((i * 7 % 11) as f64 / 11.0)).collect();
            let mut exact = 0.0;
            for pattern in 0u32..1 << (k + l) {
                let run = (0..=l).any(|a| (a..a + k).all(|i| pattern >> i & 1 == 1));
                if run {
                    exact += (0..k + l)
                        .map(|i| if pattern >> i & 1 == 1 { fills[i] } else { 1.0 - fills[i] })
                        .product::<f64>();
                }
            }
            let dp = apbf_fpr_from_fills(k, &fills);
            assert!((dp - exact).abs() < 1e-12, "k {k} l {l}: {dp} vs {exact}");
        }
        for k in 2..12u32 {
            for l in 1..20u32 {
                assert!(apbf_fpr(k, l + 1) > apbf_fpr(k, l), "k {k} l {l}");
                assert!(apbf_fpr(k + 1, l) < apbf_fpr(k, l), "k {k} l {l}");
            }
        }
    }
}
