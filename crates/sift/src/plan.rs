//! The parameter planner: from any sufficient subset of `n` (items), `p` (false-positive rate),
//! `m` (bits of memory) and `k` (hash functions), compute the rest, for each filter family.
//!
//! ```
//! use sift::plan::{Family, Plan};
//!
//! // Seed 002's example: 100 million items at 1%.
//! let s = Plan::new().items(100_000_000).fpr(0.01).solve(Family::Bloom)?;
//! assert_eq!((s.bits, s.hashes), (958_505_838, 7));
//! assert!((s.bytes as f64 / (1 << 20) as f64 - 114.26).abs() < 0.01);
//!
//! // A memory budget: how many items fit in 64 MiB at 0.1%?
//! let s = Plan::new().bits(64 << 23).fpr(0.001).solve(Family::BlockedBloom)?;
//! assert!(s.items > 30_000_000 && s.fpr <= 0.001);
//!
//! // Every family at once, e.g. to print a comparison table.
//! for s in Plan::new().items(1_000_000).fpr(0.01).solve_all() {
//!     assert!(s.bits_per_key > 9.5);
//! }
//! # Ok::<(), sift::Error>(())
//! ```
//!
//! ## What is solved, and how
//!
//! | given | computed | rule |
//! |---|---|---|
//! | `n, p` | `m, k` | what the family's `new(n, p)` constructor allocates (Bloom, counting); the smallest `m` (best `k`) whose formula FPR is ≤ `p` for the others |
//! | `n, p, k` | `m` | the smallest `m` with formula FPR ≤ `p` at that `k` |
//! | `n, m` | `k, p` | the `k` minimising the FPR, and that FPR |
//! | `n, m, k` | `p` | the formula FPR |
//! | `m, p` | `n, k` | the largest `n` (over `k`) with formula FPR ≤ `p`: a memory budget's capacity |
//! | `m, k, p` | `n` | the largest `n` with formula FPR ≤ `p` at that `k` |
//! | `n, m, p` (`k`) | `k` | as `n, m`, then checked against `p` (an error if `p` is not reached) |
//!
//! For the sliding windows ([`Family::AgingBloom`], [`Family::TimeLimitedBloom`]) `n` is the
//! window (or the insertions per TTL) and the rate is the worst phase of a full window
//! ([`math::aging_fpr`]); the row width and `k` are searched as `n, p` or `m` require.
//!
//! `m` is memory: for [`Family::CountingBloom`] it holds `m / 4` counters; block families round a
//! given `m` down to whole blocks (it is a budget) and computed sizes up. The formulas are those
//! of [`crate::math`]: [`math::bloom_fpr`], [`math::blocked_fpr`], [`math::split_block_fpr`], and
//! for [`Family::ScalableBloom`] the compound bound of the first-share schedule
//! ([`math::scalable_first_share_layer_fpr`]) over a first blocked layer of `n` items.
//!
//! ## Adding a family
//! Add a variant to [`Family`] (and to [`Family::ALL`]), then an arm in `Family::model` describing
//! how its FPR depends on `m`, `n` and `k` (a `Model`); families whose FPR is not of that shape
//! (cuckoo, quotient, xor, binary fuse, GCS: fingerprint bits instead of hash count) get an arm
//! in [`Plan::solve`] calling their own function instead.

use crate::error::{Error, Result};
use crate::math;

/// The filter families the planner knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Family {
    /// [`crate::Bloom`]: one bit array.
    Bloom,
    /// Blocked Bloom filter: 512-bit blocks, all `k` probes in one block.
    BlockedBloom,
    /// [`crate::CountingBloom`]: 4-bit counters (4 bits of memory per position).
    CountingBloom,
    /// Scalable Bloom filter: a chain of blocked layers; the plan is for the first layer.
    ScalableBloom,
    /// [`crate::SplitBlockBloom`]: Parquet's split-block filter, `k = 8`.
    SplitBlockBloom,
    /// [`crate::AgingBloom`]: a sliding window by count; `items` is the window.
    AgingBloom,
    /// [`crate::TimeLimitedBloom`]: a sliding window by time; `items` is the insertions per TTL
    /// (the plan assumes a TTL of many clock units, as `TimeLimitedBloom::new` with a TTL of at
    /// least `l` units builds it).
    TimeLimitedBloom,
}

impl Family {
    /// Every family, in the order [`Plan::solve_all`] reports them.
    pub const ALL: [Family; 7] = [
        Family::Bloom,
        Family::BlockedBloom,
        Family::CountingBloom,
        Family::ScalableBloom,
        Family::SplitBlockBloom,
        Family::AgingBloom,
        Family::TimeLimitedBloom,
    ];

    /// A short, stable name (the one of [`crate::format::FilterKind`]).
    pub const fn name(self) -> &'static str {
        match self {
            Family::Bloom => "bloom",
            Family::BlockedBloom => "blocked-bloom",
            Family::CountingBloom => "counting-bloom",
            Family::ScalableBloom => "scalable-bloom",
            Family::SplitBlockBloom => "split-block-bloom",
            Family::AgingBloom => "aging-bloom",
            Family::TimeLimitedBloom => "time-limited-bloom",
        }
    }

    /// How the FPR of this family depends on its parameters. `None` for families with their own
    /// solver.
    fn model(self) -> Option<Model> {
        Some(match self {
            Family::Bloom => Model {
                unit_bits: 1,
                k_search: (1, crate::filters::bloom::MAX_HASHES),
                fixed_k: None,
                fpr: |m, n, k| math::bloom_fpr(m, n, k as f64),
            },
            Family::CountingBloom => Model {
                unit_bits: COUNTER_BITS,
                k_search: (1, crate::filters::bloom::MAX_HASHES),
                fixed_k: None,
                fpr: |m, n, k| math::bloom_fpr(m / COUNTER_BITS as f64, n, k as f64),
            },
            Family::BlockedBloom => Model {
                unit_bits: BLOCKED_BLOCK_BITS,
                k_search: (1, BLOCKED_MAX_HASHES),
                fixed_k: None,
                fpr: blocked_fpr,
            },
            Family::SplitBlockBloom => Model {
                unit_bits: SPLIT_BLOCK_BITS,
                k_search: (8, 8),
                fixed_k: Some(8),
                fpr: |m, n, _| math::split_block_fpr(m / SPLIT_BLOCK_BITS as f64, n),
            },
            Family::ScalableBloom | Family::AgingBloom | Family::TimeLimitedBloom => return None,
        })
    }
}

impl core::fmt::Display for Family {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Bits of memory per counter of a counting Bloom filter.
const COUNTER_BITS: u64 = 4;
/// Block size of the blocked Bloom filter (one 64-byte cache line).
pub const BLOCKED_BLOCK_BITS: u64 = 512;
/// Largest `k` the planner tries for a blocked filter when `k` is not given (more probes than
/// this in 512 bits never lower the FPR at useful loads).
pub const BLOCKED_MAX_HASHES: u32 = 16;
/// Block size of the split-block filter.
const SPLIT_BLOCK_BITS: u64 = 256;
/// Each later layer of a scalable filter gets this fraction of the previous layer's FPR
/// (Almeida et al. 2007).
pub const SCALABLE_TIGHTENING: f64 = 0.5;
/// Share of the FPR budget the first layer of a scalable filter gets (the default of
/// [`crate::ScalableBloom::new`], [`crate::filters::scalable_bloom::DEFAULT_FIRST_SHARE`]).
pub const SCALABLE_FIRST_SHARE: f64 = crate::filters::scalable_bloom::DEFAULT_FIRST_SHARE;
/// The largest memory the planner proposes, as [`crate::bits::MAX_BYTES`].
const MAX_BITS: u64 = (crate::bits::MAX_BYTES * 8) as u64;

/// The blocked Bloom FPR as the planner uses it; one call site, so a refined formula is a
/// one-line change.
fn blocked_fpr(m: f64, n: f64, k: u32) -> f64 {
    math::blocked_fpr(m, n, k as f64, BLOCKED_BLOCK_BITS as f64)
}

/// How the FPR of a Bloom-like family depends on memory `m` (bits), items `n` and hashes `k`.
#[derive(Clone, Copy)]
struct Model {
    /// Memory comes in units of this many bits (1 bit, a 4-bit counter, a block).
    unit_bits: u64,
    /// The `k` searched when `k` is not given.
    k_search: (u32, u32),
    /// The only `k` the family allows, if it fixes one.
    fixed_k: Option<u32>,
    /// FPR at `m` bits of memory, `n` items, `k` hashes.
    fpr: fn(f64, f64, u32) -> f64,
}

/// A planning request: set what you know, then [`Plan::solve`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Plan {
    items: Option<u64>,
    fpr: Option<f64>,
    bits: Option<u64>,
    hashes: Option<u32>,
}

/// A complete parameter set for one family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Solution {
    /// The family.
    pub family: Family,
    /// Items `n` (the capacity, when it was computed).
    pub items: u64,
    /// The false-positive rate at `items` items, by the family's formula.
    pub fpr: f64,
    /// Memory `m` in bits (whole blocks for block families; 4 bits per counter).
    pub bits: u64,
    /// Hash functions (probes) per item `k`.
    pub hashes: u32,
    /// `bits / items`.
    pub bits_per_key: f64,
    /// Bytes the filter allocates for `bits` (rounded up to 64-bit words).
    pub bytes: u64,
}

impl core::fmt::Display for Solution {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{}: n = {}, p = {:.3e}, m = {} bits ({:.2} MiB), k = {}, {:.2} bits/key",
            self.family,
            self.items,
            self.fpr,
            self.bits,
            self.bytes as f64 / (1u64 << 20) as f64,
            self.hashes,
            self.bits_per_key
        )
    }
}

impl Plan {
    /// An empty request.
    pub fn new() -> Self {
        Plan::default()
    }

    /// The number of items `n`.
    pub fn items(mut self, n: u64) -> Self {
        self.items = Some(n);
        self
    }

    /// The false-positive rate `p`.
    pub fn fpr(mut self, p: f64) -> Self {
        self.fpr = Some(p);
        self
    }

    /// The memory `m` in bits.
    pub fn bits(mut self, m: u64) -> Self {
        self.bits = Some(m);
        self
    }

    /// The memory in bytes (sets `m = 8 · bytes`).
    pub fn bytes(mut self, bytes: u64) -> Self {
        self.bits = Some(bytes.saturating_mul(8));
        self
    }

    /// The number of hash functions `k`.
    pub fn hashes(mut self, k: u32) -> Self {
        self.hashes = Some(k);
        self
    }

    fn validate(&self) -> Result<()> {
        if self.items == Some(0) {
            return Err(Error::param("items", 0, "at least 1"));
        }
        if let Some(p) = self.fpr {
            if !(p > 0.0 && p < 1.0) {
                return Err(Error::param("fpr", p, "a number strictly between 0 and 1, e.g. 0.01"));
            }
        }
        if let Some(m) = self.bits {
            if m == 0 || m > MAX_BITS {
                return Err(Error::param("bits", m, "between 1 and 2^51 (256 TiB)"));
            }
        }
        if let Some(k) = self.hashes {
            if k == 0 || k > crate::filters::bloom::MAX_HASHES {
                return Err(Error::param("hashes", k, "between 1 and 64"));
            }
        }
        let known = [self.items.is_some(), self.fpr.is_some(), self.bits.is_some()];
        match known {
            [true, false, false] => {
                Err(Error::param("fpr", "missing", "with `items`, also give `fpr` or `bits`"))
            }
            [false, true, false] => {
                Err(Error::param("items", "missing", "with `fpr`, also give `items` or `bits`"))
            }
            [false, false, true] => {
                Err(Error::param("fpr", "missing", "with `bits`, also give `fpr` or `items`"))
            }
            [false, false, false] => Err(Error::param(
                "items",
                "missing",
                "give at least two of `items`, `fpr` and `bits` (and optionally `hashes`)",
            )),
            _ => Ok(()),
        }
    }

    /// Computes the missing parameters for `family`.
    ///
    /// Errors: [`Error::InvalidParameter`] naming the missing parameter when fewer than two of
    /// `items`, `fpr`, `bits` are given, an out-of-range value, a `k` the family does not allow,
    /// a memory too small for even one item, or an `fpr` that the given `items` and `bits` cannot
    /// reach; [`Error::CapacityExceeded`] when the answer exceeds the largest filter.
    pub fn solve(&self, family: Family) -> Result<Solution> {
        self.validate()?;
        match family {
            Family::ScalableBloom => self.solve_scalable(),
            Family::AgingBloom | Family::TimeLimitedBloom => self.solve_aging(family),
            _ => {
                let model = family.model().expect("every family but scalable and aging has a model");
                self.solve_model(family, &model)
            }
        }
    }

    /// Solves for every family in [`Family::ALL`], leaving out those for which the request is
    /// invalid (for instance `hashes` other than 8 for the split-block filter).
    pub fn solve_all(&self) -> Vec<Solution> {
        Family::ALL.iter().filter_map(|&f| self.solve(f).ok()).collect()
    }

    /// A scalable filter as [`crate::ScalableBloom::new`] builds it (the first-share schedule):
    /// its first layer is a blocked layer at `a · p` (`a` = [`SCALABLE_FIRST_SHARE`]), the later
    /// layers share `(1 - a) · p`, so its compound FPR bound over any number of layers is the first
    /// layer's FPR plus `(1 - a) · p` (with `p` implied as `f_0 / a` when only `n` and `m` are
    /// given).
    fn solve_scalable(&self) -> Result<Solution> {
        let a = SCALABLE_FIRST_SHARE;
        let layer = Plan { fpr: self.fpr.map(|p| a * p), ..*self };
        let model = Family::BlockedBloom.model().expect("blocked has a model");
        let mut s = layer.solve_model(Family::BlockedBloom, &model)?;
        s.family = Family::ScalableBloom;
        let p = self.fpr.unwrap_or(s.fpr / a);
        s.fpr = (s.fpr + (1.0 - a) * p).min(1.0);
        Ok(s)
    }

    /// An aging filter (window `n` = `items`) as its constructor builds it: the shapes of
    /// [`math::aging_shapes`] (rows of up to 31 slices), generations of `g = ⌈n / l⌉`, rows of
    /// `slices + 1` 32-bit words, and the worst-phase rate of [`math::aging_fpr`] (every live
    /// generation full). With `n, p` the smallest memory (the constructor's
    /// [`math::aging_plan`] when `k` is free), with `n, m` the shape with the lowest rate in that
    /// memory, with `m, p` the largest window.
    fn solve_aging(&self, family: Family) -> Result<Solution> {
        let timed = family == Family::TimeLimitedBloom;
        if let Some(p) = self.fpr.filter(|&p| p < math::AGING_MIN_FPR) {
            return Err(Error::param("fpr", p, "a rate an aging filter can reach: 1e-7 and above"));
        }
        let shapes: Vec<math::AgingShape> = math::aging_shapes(timed, math::AGING_DEFAULT_MAX_SLICES)
            .into_iter()
            .filter(|s| self.hashes.is_none_or(|k| k == s.k))
            .collect();
        if shapes.is_empty() {
            return Err(Error::param(
                "hashes",
                self.hashes.unwrap_or(0),
                "between 1 and 24 for an aging filter",
            ));
        }
        let row_bits =
            |s: &math::AgingShape| math::aging_row_words(s.slices) as u64 * math::AGING_WORD_BITS as u64;
        let rate = |s: &math::AgingShape, n: u64, rows: u64| {
            let load = n.div_ceil(s.l as u64) as f64 / rows as f64;
            math::aging_fpr(s.k, s.live, &vec![load; s.live])
        };
        // (shape, window, rows)
        let (shape, n, rows) = match (self.items, self.bits) {
            (Some(n), None) => {
                let p = self.fpr.expect("validate: two of three are known");
                let plan = if self.hashes.is_none() {
                    let plan = if timed {
                        math::aging_plan_timed(p, math::AGING_DEFAULT_MAX_SLICES)
                    } else {
                        math::aging_plan(p, math::AGING_DEFAULT_MAX_SLICES)
                    };
                    plan.map(|a| {
                        (
                            math::AgingShape {
                                slices: a.slices,
                                k: a.k,
                                l: a.l,
                                live: shapes_live(timed, a.slices),
                            },
                            a.load,
                        )
                    })
                } else {
                    shapes
                        .iter()
                        .map(|s| (*s, math::aging_max_load(s.k, s.live, p)))
                        .filter(|(_, load)| *load > 0.0)
                        .min_by(|a, b| {
                            let bits =
                                |(s, load): &(math::AgingShape, f64)| s.slices as f64 / (s.l as f64 * load);
                            bits(a).total_cmp(&bits(b))
                        })
                };
                let (shape, load) =
                    plan.ok_or(Error::param("fpr", p, "a rate an aging filter can reach: 1e-7 and above"))?;
                let rows = (n.div_ceil(shape.l as u64) as f64 / load).ceil().max(1.0);
                check_bits(rows * row_bits(&shape) as f64)?;
                (shape, n, rows as u64)
            }
            (Some(n), Some(m)) => {
                let best = shapes
                    .iter()
                    .filter(|s| m / row_bits(s) > 0)
                    .map(|s| (*s, rate(s, n, m / row_bits(s))))
                    .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.slices.cmp(&b.0.slices)));
                let (shape, _) = best.ok_or(Error::param("bits", m, "at least one row (512 bits)"))?;
                (shape, n, m / row_bits(&shape))
            }
            (None, Some(m)) => {
                let p = self.fpr.expect("validate: two of three are known");
                let best = shapes
                    .iter()
                    .filter(|s| m / row_bits(s) > 0)
                    .map(|s| {
                        let rows = m / row_bits(s);
                        let load = math::aging_max_load(s.k, s.live, p);
                        let g = (rows as f64 * load).floor().min(u64::MAX as f64 / 64.0) as u64;
                        (*s, g.saturating_mul(s.l as u64), rows)
                    })
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.slices.cmp(&a.0.slices)));
                match best {
                    Some((shape, n, rows)) if n > 0 => (shape, n, rows),
                    _ => {
                        return Err(Error::param(
                            "bits",
                            m,
                            "enough memory for at least one item at this fpr",
                        ))
                    }
                }
            }
            (None, None) => unreachable!("validate: two of three are known"),
        };
        let bits = rows * row_bits(&shape);
        let fpr = rate(&shape, n, rows);
        if let (Some(p), Some(_), Some(_)) = (self.fpr, self.items, self.bits) {
            if fpr > p * (1.0 + 1e-9) {
                return Err(Error::param(
                    "fpr",
                    format!("{p} (the best {family} reaches with these items and bits is {fpr:.4e})"),
                    "an fpr the given items and bits can reach: raise `bits`, lower `items` or drop `fpr`",
                ));
            }
        }
        Ok(Solution {
            family,
            items: n,
            fpr,
            bits,
            hashes: shape.k,
            bits_per_key: bits as f64 / n as f64,
            bytes: bits / 8,
        })
    }

    fn solve_model(&self, family: Family, model: &Model) -> Result<Solution> {
        if let (Some(fixed), Some(k)) = (model.fixed_k, self.hashes) {
            if k != fixed {
                return Err(Error::param("hashes", k, "8: the split-block layout fixes k = 8"));
            }
        }
        let k_given = self.hashes.or(model.fixed_k);
        let ks = || -> Box<dyn Iterator<Item = u32>> {
            match k_given {
                Some(k) => Box::new(core::iter::once(k)),
                None => Box::new(model.k_search.0..=model.k_search.1),
            }
        };
        let (n, m, k) = match (self.items, self.bits) {
            (Some(n), Some(m)) => {
                // A budget: whole units only.
                let m = m / model.unit_bits * model.unit_bits;
                if m == 0 {
                    return Err(Error::param(
                        "bits",
                        self.bits.unwrap_or(0),
                        "at least one block (512 bits blocked, 256 split-block, 4 per counter)",
                    ));
                }
                let k = ks()
                    .map(|k| (k, (model.fpr)(m as f64, n as f64, k)))
                    .fold((0, f64::INFINITY), |best, (k, p)| if p < best.1 { (k, p) } else { best })
                    .0;
                (n, m, k)
            }
            (Some(n), None) => {
                let p = self.fpr.expect("validate: two of three are known");
                let (m, k) = match (family, k_given) {
                    // The constructors' sizing, so the plan is what `new(n, p)` allocates.
                    (Family::Bloom | Family::CountingBloom, None) => {
                        let cells = math::bloom_optimal_bits(n as f64, p).ceil().max(64.0);
                        check_bits(cells * model.unit_bits as f64)?;
                        let k = math::bloom_optimal_k(cells, n as f64).min(crate::filters::bloom::MAX_HASHES);
                        (cells as u64 * model.unit_bits, k)
                    }
                    (Family::BlockedBloom, None) => {
                        check_bits(math::bloom_optimal_bits(n as f64, p))?;
                        let (blocks, k) =
                            math::blocked_plan(n as f64, p, BLOCKED_BLOCK_BITS as f64, BLOCKED_MAX_HASHES);
                        (check_bits(blocks as f64 * BLOCKED_BLOCK_BITS as f64)?, k)
                    }
                    _ => {
                        let mut best: Option<(u64, u32)> = None;
                        let mut last_err = None;
                        for k in ks() {
                            match min_bits(model, n as f64, k, p) {
                                Ok(m) if best.is_none_or(|(b, _)| m < b) => best = Some((m, k)),
                                Ok(_) => {}
                                Err(e) => last_err = Some(e),
                            }
                        }
                        match (best, last_err) {
                            (Some(b), _) => b,
                            (None, Some(e)) => return Err(e),
                            (None, None) => unreachable!("at least one k is tried"),
                        }
                    }
                };
                (n, m, k)
            }
            (None, Some(m)) => {
                let p = self.fpr.expect("validate: two of three are known");
                let m = m / model.unit_bits * model.unit_bits;
                let mut best = (0u64, 0u32);
                for k in ks() {
                    let n = max_items(model, m, k, p);
                    if n > best.0 {
                        best = (n, k);
                    }
                }
                if best.0 == 0 {
                    return Err(Error::param(
                        "bits",
                        self.bits.unwrap_or(0),
                        "enough memory for at least one item at this fpr",
                    ));
                }
                (best.0, m, best.1)
            }
            (None, None) => unreachable!("validate: two of three are known"),
        };
        let fpr = (model.fpr)(m as f64, n as f64, k);
        if let (Some(p), Some(_), Some(_)) = (self.fpr, self.items, self.bits) {
            // Over-determined: the given FPR must be reached (up to rounding of the formula).
            if fpr > p * (1.0 + 1e-9) {
                return Err(Error::param(
                    "fpr",
                    format!("{p} (the best {family} reaches with these items and bits is {fpr:.4e})"),
                    "an fpr the given items and bits can reach: raise `bits`, lower `items` or drop `fpr`",
                ));
            }
        }
        Ok(Solution {
            family,
            items: n,
            fpr,
            bits: m,
            hashes: k,
            bits_per_key: m as f64 / n as f64,
            bytes: m.div_ceil(64) * 8,
        })
    }
}

/// The live slices an aging plan's FPR is computed with (see [`math::AgingShape`]).
fn shapes_live(timed: bool, slices: u32) -> usize {
    if timed {
        slices as usize - 1
    } else {
        slices as usize
    }
}

fn check_bits(bits: f64) -> Result<u64> {
    if bits > MAX_BITS as f64 {
        return Err(Error::CapacityExceeded {
            requested_bytes: (bits / 8.0) as u128,
            limit_bytes: crate::bits::MAX_BYTES,
        });
    }
    Ok(bits as u64)
}

/// The smallest memory (whole units) with `fpr(m, n, k) ≤ p`, by bisection (the FPR falls as
/// memory grows).
fn min_bits(model: &Model, n: f64, k: u32, p: f64) -> Result<u64> {
    let unit = model.unit_bits;
    let max_units = MAX_BITS / unit;
    let fpr = |units: u64| (model.fpr)((units * unit) as f64, n, k);
    // Start near the classic optimum so the bisection never evaluates absurd loads.
    let mut hi = ((math::bloom_optimal_bits(n, p) / unit as f64).ceil() as u64).clamp(1, max_units);
    while fpr(hi) > p {
        if hi == max_units {
            return Err(Error::CapacityExceeded {
                requested_bytes: (max_units * unit / 8) as u128 + 1,
                limit_bytes: crate::bits::MAX_BYTES,
            });
        }
        hi = hi.saturating_mul(2).min(max_units);
    }
    let mut lo = 0u64; // no memory: FPR 1 > p
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fpr(mid) <= p {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi * unit)
}

/// The largest `n` with `fpr(m, n, k) ≤ p` (0 if not even one item fits), by bisection (the FPR
/// grows with the load).
fn max_items(model: &Model, m: u64, k: u32, p: f64) -> u64 {
    if m == 0 {
        return 0;
    }
    let fpr = |n: u64| (model.fpr)(m as f64, n as f64, k);
    if fpr(1) > p {
        return 0;
    }
    let mut lo = 1u64;
    let mut hi = (math::bloom_capacity(m as f64, p).ceil() as u64).max(2);
    let mut doublings = 0;
    while fpr(hi) <= p {
        lo = hi;
        hi = hi.saturating_mul(2);
        doublings += 1;
        if doublings > 64 {
            return lo;
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fpr(mid) <= p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bloom, CountingBloom, Filter, SplitBlockBloom};

    fn invalid(r: Result<Solution>) -> &'static str {
        match r {
            Err(Error::InvalidParameter { name, .. }) => name,
            other => panic!("expected InvalidParameter, got {other:?}"),
        }
    }

    #[test]
    fn seed_002_example() {
        let s = Plan::new().items(100_000_000).fpr(0.01).solve(Family::Bloom).unwrap();
        assert_eq!(s.bits, 958_505_838);
        assert_eq!(s.hashes, 7);
        assert_eq!(s.items, 100_000_000);
        assert_eq!(s.bytes, 119_813_232);
        assert!((s.bytes as f64 / (1u64 << 20) as f64 - 114.26).abs() < 0.01);
        assert!((s.fpr - 0.01).abs() < 1e-4, "fpr {}", s.fpr);
        assert!((s.bits_per_key - 9.585).abs() < 1e-3);
    }

    #[test]
    fn n_p_matches_the_constructors() {
        for (n, p) in [(1000usize, 0.01), (54_321, 0.001), (10_000_000, 0.05)] {
            let s = Plan::new().items(n as u64).fpr(p).solve(Family::Bloom).unwrap();
            let b = Bloom::new(n, p).unwrap();
            assert_eq!((s.bits, s.hashes, s.bytes), (b.num_bits(), b.num_hashes(), b.size_in_bytes() as u64));
            let s = Plan::new().items(n as u64).fpr(p).solve(Family::CountingBloom).unwrap();
            let c = CountingBloom::new(n, p).unwrap();
            assert_eq!(
                (s.bits, s.hashes, s.bytes),
                (4 * c.num_counters(), c.num_hashes(), c.size_in_bytes() as u64)
            );
            // Split-block: the tight size meets p; Parquet's power-of-two size is never smaller.
            let s = Plan::new().items(n as u64).fpr(p).solve(Family::SplitBlockBloom).unwrap();
            assert!(s.fpr <= p && s.hashes == 8 && s.bits % 256 == 0);
            let below = math::split_block_fpr((s.bits / 256 - 1) as f64, n as f64);
            assert!(below > p, "not the smallest: {below}");
            let f = SplitBlockBloom::with_num_bytes(s.bytes as usize).unwrap();
            assert_eq!(f.size_in_bytes() as u64, s.bytes);
            // Blocked and scalable meet p too.
            let bl = Plan::new().items(n as u64).fpr(p).solve(Family::BlockedBloom).unwrap();
            assert!(bl.fpr <= p && bl.bits % 512 == 0 && bl.bits as f64 > 0.99 * b.num_bits() as f64);
            let sc = Plan::new().items(n as u64).fpr(p).solve(Family::ScalableBloom).unwrap();
            assert!(sc.fpr <= p && sc.bits > bl.bits);
            // Aging: what the constructors allocate (a TTL of whole generations for the timed one).
            let ag = Plan::new().items(n as u64).fpr(p).solve(Family::AgingBloom).unwrap();
            let f = crate::AgingBloom::new(n, p).unwrap();
            assert_eq!((ag.bytes, ag.hashes), (f.size_in_bytes() as u64, f.num_hashes()));
            assert!(ag.fpr <= p, "{ag}");
            let tl = Plan::new().items(n as u64).fpr(p).solve(Family::TimeLimitedBloom).unwrap();
            let plan = math::aging_plan_timed(p, math::AGING_DEFAULT_MAX_SLICES).unwrap();
            let t = crate::TimeLimitedBloom::new(plan.l as u64 * 1000, n, p).unwrap();
            assert_eq!((tl.bytes, tl.hashes), (t.size_in_bytes() as u64, t.num_hashes()));
            assert!(tl.fpr <= p && tl.bits > ag.bits);
        }
    }

    #[test]
    fn n_m_gives_best_k_and_its_fpr() {
        let s = Plan::new().items(1_000_000).bits(9_585_059).solve(Family::Bloom).unwrap();
        assert_eq!(s.hashes, 7);
        assert!((s.fpr - 0.01).abs() < 1e-4);
        for k in 1..=20 {
            assert!(math::bloom_fpr(s.bits as f64, 1e6, k as f64) >= s.fpr);
        }
        let c = Plan::new().items(1_000_000).bits(4 * 9_585_059).solve(Family::CountingBloom).unwrap();
        assert_eq!((c.hashes, c.fpr), (s.hashes, s.fpr));
        // Budgets are rounded down to whole blocks.
        let b = Plan::new().items(1000).bits(10_000).solve(Family::BlockedBloom).unwrap();
        assert_eq!(b.bits, 9728);
        let sb = Plan::new().items(1000).bits(10_000).solve(Family::SplitBlockBloom).unwrap();
        assert_eq!((sb.bits, sb.hashes), (9984, 8));
        assert!((sb.fpr - math::split_block_fpr(39.0, 1000.0)).abs() < 1e-15);
    }

    #[test]
    fn m_p_gives_capacity() {
        let s = Plan::new().bits(958_505_838).fpr(0.01).solve(Family::Bloom).unwrap();
        assert!((s.items as f64 - 1e8).abs() < 1e-2 * 1e8, "n = {}", s.items);
        assert!(s.fpr <= 0.01);
        assert!(math::bloom_fpr(s.bits as f64, (s.items + 1) as f64, s.hashes as f64) > 0.01);
        // The bytes shortcut and every family.
        let all = Plan::new().bytes(1 << 20).fpr(0.01).solve_all();
        assert_eq!(all.len(), Family::ALL.len());
        for s in &all {
            assert!(s.fpr <= 0.01, "{s}");
            let model_fpr = |n: u64| match s.family {
                Family::ScalableBloom => {
                    blocked_fpr(s.bits as f64, n as f64, s.hashes) + (1.0 - SCALABLE_FIRST_SHARE) * 0.01
                }
                Family::AgingBloom | Family::TimeLimitedBloom => {
                    Plan::new().items(n).bits(s.bits).hashes(s.hashes).solve(s.family).unwrap().fpr
                }
                f => (f.model().unwrap().fpr)(s.bits as f64, n as f64, s.hashes),
            };
            // Aging windows grow in whole generations: one more item may fit (same generation
            // count); a generation more may not.
            let step = match s.family {
                Family::AgingBloom | Family::TimeLimitedBloom => s.items / 8,
                _ => 1,
            };
            assert!(model_fpr(s.items + step) > 0.01, "{s}");
        }
        let bloom = all[0].items;
        let counting = all.iter().find(|s| s.family == Family::CountingBloom).unwrap().items;
        assert!((counting as f64 - bloom as f64 / 4.0).abs() < 0.01 * bloom as f64);
        // Too little memory for a single item.
        assert_eq!(invalid(Plan::new().bits(10).fpr(1e-9).solve(Family::Bloom)), "bits");
        assert_eq!(invalid(Plan::new().bits(100).fpr(0.01).solve(Family::BlockedBloom)), "bits");
    }

    #[test]
    fn n_m_k_gives_fpr() {
        let s = Plan::new().items(1000).bits(10_000).hashes(3).solve(Family::Bloom).unwrap();
        assert_eq!(s.hashes, 3);
        assert!((s.fpr - math::bloom_fpr(10_000.0, 1000.0, 3.0)).abs() < 1e-15);
        let b = Plan::new().items(1000).bits(10_240).hashes(5).solve(Family::BlockedBloom).unwrap();
        assert!((b.fpr - math::blocked_fpr(10_240.0, 1000.0, 5.0, 512.0)).abs() < 1e-15);
    }

    #[test]
    fn n_p_k_gives_smallest_m() {
        for k in [1u32, 3, 7, 12] {
            let s = Plan::new().items(50_000).fpr(0.01).hashes(k).solve(Family::Bloom).unwrap();
            assert_eq!(s.hashes, k);
            assert!(s.fpr <= 0.01);
            assert!(math::bloom_fpr((s.bits - 1) as f64, 50_000.0, k as f64) > 0.01, "k = {k}");
            // Closed form: m = -k·n / ln(1 - p^(1/k)).
            let closed = -(k as f64) * 50_000.0 / (1.0 - 0.01f64.powf(1.0 / k as f64)).ln();
            assert!((s.bits as f64 - closed).abs() <= 1.0, "{} vs {closed}", s.bits);
        }
        let c = Plan::new().items(50_000).fpr(0.01).hashes(7).solve(Family::CountingBloom).unwrap();
        let b = Plan::new().items(50_000).fpr(0.01).hashes(7).solve(Family::Bloom).unwrap();
        assert_eq!(c.bits, 4 * b.bits);
        let bl = Plan::new().items(50_000).fpr(0.01).hashes(6).solve(Family::BlockedBloom).unwrap();
        assert!(bl.fpr <= 0.01 && blocked_fpr((bl.bits - 512) as f64, 50_000.0, 6) > 0.01);
    }

    #[test]
    fn m_k_p_gives_capacity() {
        let s = Plan::new().bits(1_000_000).hashes(5).fpr(0.02).solve(Family::Bloom).unwrap();
        let closed = math::bloom_capacity_with_k(1e6, 5.0, 0.02);
        assert_eq!(s.items, closed.floor() as u64);
        assert_eq!(s.hashes, 5);
        let sb = Plan::new().bits(1 << 20).hashes(8).fpr(0.01).solve(Family::SplitBlockBloom).unwrap();
        assert!(sb.fpr <= 0.01);
        assert!(math::split_block_fpr(4096.0, (sb.items + 1) as f64) > 0.01);
    }

    #[test]
    fn over_determined_requests_are_checked() {
        let ok = Plan::new().items(1_000_000).bits(10_000_000).fpr(0.01).solve(Family::Bloom).unwrap();
        assert!(ok.fpr <= 0.01);
        assert_eq!(
            invalid(Plan::new().items(1_000_000).bits(5_000_000).fpr(0.01).solve(Family::Bloom)),
            "fpr"
        );
        assert_eq!(
            invalid(Plan::new().items(1_000_000).bits(10_000_000).hashes(1).fpr(0.01).solve(Family::Bloom)),
            "fpr"
        );
    }

    #[test]
    fn insufficient_and_invalid_inputs_are_named() {
        assert_eq!(invalid(Plan::new().solve(Family::Bloom)), "items");
        assert_eq!(invalid(Plan::new().hashes(7).solve(Family::Bloom)), "items");
        assert_eq!(invalid(Plan::new().items(10).solve(Family::Bloom)), "fpr");
        assert_eq!(invalid(Plan::new().items(10).hashes(3).solve(Family::Bloom)), "fpr");
        assert_eq!(invalid(Plan::new().fpr(0.01).solve(Family::Bloom)), "items");
        assert_eq!(invalid(Plan::new().fpr(0.01).hashes(3).solve(Family::Bloom)), "items");
        assert_eq!(invalid(Plan::new().bits(1000).solve(Family::Bloom)), "fpr");
        assert_eq!(invalid(Plan::new().bits(1000).hashes(3).solve(Family::Bloom)), "fpr");
        assert_eq!(invalid(Plan::new().items(0).fpr(0.01).solve(Family::Bloom)), "items");
        for p in [0.0, 1.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(invalid(Plan::new().items(10).fpr(p).solve(Family::Bloom)), "fpr");
        }
        assert_eq!(invalid(Plan::new().items(10).bits(0).solve(Family::Bloom)), "bits");
        assert_eq!(invalid(Plan::new().items(10).bits(u64::MAX).solve(Family::Bloom)), "bits");
        assert_eq!(invalid(Plan::new().items(10).fpr(0.01).hashes(0).solve(Family::Bloom)), "hashes");
        assert_eq!(invalid(Plan::new().items(10).fpr(0.01).hashes(65).solve(Family::Bloom)), "hashes");
        assert_eq!(
            invalid(Plan::new().items(10).fpr(0.01).hashes(7).solve(Family::SplitBlockBloom)),
            "hashes"
        );
        assert!(Plan::new().items(10).fpr(0.01).hashes(8).solve(Family::SplitBlockBloom).is_ok());
        // solve_all leaves out what does not apply.
        let all = Plan::new().items(10).fpr(0.01).hashes(7).solve_all();
        assert_eq!(all.len(), Family::ALL.len() - 1);
        assert!(all.iter().all(|s| s.family != Family::SplitBlockBloom));
        // Too large to build.
        assert!(matches!(
            Plan::new().items(u64::MAX).fpr(1e-12).solve(Family::Bloom),
            Err(Error::CapacityExceeded { .. })
        ));
        assert!(matches!(
            Plan::new().items(u64::MAX).fpr(1e-12).hashes(3).solve(Family::Bloom),
            Err(Error::CapacityExceeded { .. })
        ));
    }

    /// The sliding windows: `n, p` gives the constructor's memory; that memory with `n` gives a
    /// rate at most `p`, and with `p` a window of at least `n`; a given `k` is kept.
    #[test]
    fn aging_windows() {
        for (n, p) in [(10_000u64, 0.01), (1_000_000, 0.001), (50, 0.1)] {
            for fam in [Family::AgingBloom, Family::TimeLimitedBloom] {
                let s = Plan::new().items(n).fpr(p).solve(fam).unwrap();
                assert!(s.fpr <= p && s.bits % 512 == 0, "{s}");
                let back = Plan::new().items(n).bits(s.bits).solve(fam).unwrap();
                assert!(back.fpr <= s.fpr * (1.0 + 1e-9), "{back} vs {s}");
                let cap = Plan::new().bits(s.bits).fpr(p).solve(fam).unwrap();
                assert!(cap.items >= n && cap.fpr <= p, "{cap} vs {s}");
                let k = Plan::new().items(n).fpr(p).hashes(s.hashes + 1).solve(fam).unwrap();
                assert!(k.hashes == s.hashes + 1 && k.fpr <= p && k.bits >= s.bits, "{k} vs {s}");
            }
        }
        assert_eq!(invalid(Plan::new().items(10).fpr(0.01).hashes(30).solve(Family::AgingBloom)), "hashes");
        for fam in [Family::AgingBloom, Family::TimeLimitedBloom] {
            assert_eq!(invalid(Plan::new().items(100).fpr(1e-17).solve(fam)), "fpr");
            assert_eq!(invalid(Plan::new().bits(1 << 30).fpr(1e-8).solve(fam)), "fpr");
        }
        assert_eq!(invalid(Plan::new().bits(100).fpr(0.01).solve(Family::AgingBloom)), "bits");
        assert_eq!(
            invalid(Plan::new().items(1_000_000).bits(1 << 20).fpr(0.01).solve(Family::TimeLimitedBloom)),
            "fpr"
        );
    }
}
