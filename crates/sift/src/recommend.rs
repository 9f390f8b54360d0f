//! Which filter family to use: a decision table over what the application needs.
//!
//! ```
//! use sift::{recommend, Needs};
//! use sift::format::FilterKind;
//!
//! // A set known in advance (a dictionary, the keys of an immutable table): binary fuse.
//! let r = recommend(1_000_000, 0.004, Needs { static_set: true, ..Needs::default() })?;
//! assert_eq!(r.family, FilterKind::BinaryFuse8);
//! assert!(r.bits_per_key < 9.1);
//!
//! // Items come and go: cuckoo.
//! let r = recommend(1_000_000, 0.001, Needs { deletes: true, ..Needs::default() })?;
//! assert_eq!(r.family, FilterKind::Cuckoo);
//! # Ok::<(), sift::Error>(())
//! ```
//!
//! The table, in order of precedence:
//!
//! | needs | family | why |
//! |---|---|---|
//! | deletes and growth, FPR from 2^-12 to 10% | scalable cuckoo | cuckoo tables added as it fills, up to `2^t - 1` times the expected count (63× at 1%) |
//! | deletes, FPR < 10% | cuckoo | deletes at `(log2(1/p) + 3)/0.95` bits/key, fewer than a Bloom filter below p ≈ 0.5% |
//! | deletes, FPR ≥ 10% | counting Bloom | cuckoo fingerprints would be under 7 bits (see [`recommend`]) |
//! | forgets (a sliding window) | aging Bloom | the last `n` insertions always present, older ones gone: 25.3 bits/key at 1% (by time: [`crate::TimeLimitedBloom`]) |
//! | grows without a known bound | scalable Bloom | layers added as needed, compound FPR bounded |
//! | static set, FPR ≥ 2^-16 | binary fuse (8 or 16 bits) | smallest fast filter: `1.125·f` bits/key, 3 loads per query |
//! | static set, memory-starved | the smaller of GCS and binary fuse | GCS: `log2(1/p) + 1.6` bits/key, slow queries |
//! | dynamic, memory-starved | the smaller of cuckoo and classic Bloom | |
//! | anything else | blocked Bloom | one cache miss per query, simple, mergeable |

use crate::error::{check_fpr, check_items, Result};
use crate::format::FilterKind;
use crate::math;

/// What the application needs from its filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// The whole set is known before the first query and never changes (rebuild to update).
    pub static_set: bool,
    /// Items must be removable.
    pub deletes: bool,
    /// The number of items can exceed `expected_items` by an unknown factor.
    pub grows: bool,
    /// Memory (or bytes on disk / on the wire) matters more than query speed.
    pub memory_starved: bool,
    /// Items must leave the filter after a window: it holds the last `expected_items`
    /// insertions ([`crate::AgingBloom`]), or the insertions of the last TTL when
    /// `expected_items` is the number per TTL ([`crate::TimeLimitedBloom`], same rows).
    pub forgets: bool,
}

/// How fast a query is, in memory accesses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SpeedClass {
    /// One cache line per query (blocked Bloom), or a few independent loads (binary fuse).
    VeryFast,
    /// Two cache lines (cuckoo), or a few loads per layer.
    Fast,
    /// `k` scattered cache lines (classic and counting Bloom), or several layers.
    Moderate,
    /// Decoding up to a few hundred compressed entries (GCS): hundreds of nanoseconds.
    Slow,
}

/// The parameters of the recommended family, as its constructor takes them.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Params {
    /// [`crate::BinaryFuse8`] / [`crate::BinaryFuse16`].
    BinaryFuse {
        /// Fingerprint bits (8 or 16): FPR `2^-f`.
        fingerprint_bits: u32,
        /// Slots per key (3 or 4).
        arity: u32,
    },
    /// [`crate::Gcs`] with [`crate::GcsParams::for_fpr`].
    Gcs {
        /// Remainder bits `P`.
        p_bits: u32,
        /// Modulus `M = 2^P` (FPR `1/M`).
        modulus: u64,
    },
    /// Cuckoo filter with buckets of 4.
    Cuckoo {
        /// Fingerprint bits: `⌈log2(1/p) + 3⌉`.
        fingerprint_bits: u32,
        /// Entries per bucket.
        bucket_size: u32,
    },
    /// [`crate::ScalableCuckoo`] (growth 2, tightening 0.5).
    ScalableCuckoo {
        /// Items of the first table.
        initial_capacity: u64,
        /// Fingerprint bits of the first table (8, 12 or 16); later tables may use more.
        fingerprint_bits: u32,
        /// How many times `initial_capacity` the chain holds before it refuses inserts (the
        /// tables' FPRs halve until 16-bit fingerprints cannot meet them).
        max_growth: u64,
    },
    /// Counting Bloom filter.
    CountingBloom {
        /// Number of counters.
        counters: u64,
        /// Bits per counter.
        counter_bits: u32,
        /// Hash functions.
        hashes: u32,
    },
    /// Scalable Bloom filter.
    ScalableBloom {
        /// Items of the first layer.
        initial_capacity: u64,
        /// Each layer holds this many times more items than the previous one.
        growth: u32,
        /// Each layer's FPR is this fraction of the previous one's.
        tightening: f64,
        /// FPR of the first layer, `p·(1 - tightening)`.
        first_layer_fpr: f64,
    },
    /// Blocked Bloom filter.
    BlockedBloom {
        /// Number of blocks.
        blocks: u64,
        /// Bits per block.
        block_bits: u32,
        /// Bits set per item (all in one block).
        hashes: u32,
    },
    /// Classic Bloom filter.
    Bloom {
        /// Bits `m`.
        bits: u64,
        /// Hash functions `k`.
        hashes: u32,
    },
    /// [`crate::AgingBloom`] (or [`crate::TimeLimitedBloom`]), as [`math::aging_plan`] sizes it.
    AgingBloom {
        /// Slices per row (15 or 31).
        slices: u32,
        /// Slices each item is written into, `k`.
        hashes: u32,
        /// Generations per window, `l` (a generation is `⌈n / l⌉` insertions).
        generations: u32,
        /// Items of a generation per row.
        load: f64,
    },
}

/// What [`recommend`] suggests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recommendation {
    /// The family (its file kind).
    pub family: FilterKind,
    /// Its parameters.
    pub params: Params,
    /// Bits of memory per item at `expected_items`.
    pub bits_per_key: f64,
    /// The false-positive rate these parameters give (at most the one asked for).
    pub expected_fpr: f64,
    /// Query speed class.
    pub speed_class: SpeedClass,
    /// Why this family, in one sentence.
    pub reason: &'static str,
}

impl Recommendation {
    /// Total memory for `items` items, in bytes.
    pub fn bytes_for(&self, items: usize) -> u64 {
        (self.bits_per_key * items as f64 / 8.0).ceil() as u64
    }
}

/// Bits per block of the blocked Bloom filter (a 64-byte cache line).
const BLOCK_BITS: u32 = 512;
/// Largest `k` considered for a blocked Bloom filter.
const BLOCKED_MAX_K: u32 = 16;
/// Above this FPR a cuckoo filter's fingerprints would be shorter than 7 bits.
const CUCKOO_MAX_FPR: f64 = 0.1;

fn blocked(n: f64, p: f64, reason: &'static str) -> Recommendation {
    let (blocks, k) = math::blocked_plan(n, p, BLOCK_BITS as f64, BLOCKED_MAX_K);
    let m = blocks as f64 * BLOCK_BITS as f64;
    Recommendation {
        family: FilterKind::BlockedBloom,
        params: Params::BlockedBloom { blocks, block_bits: BLOCK_BITS, hashes: k },
        bits_per_key: m / n,
        expected_fpr: math::blocked_fpr(m, n, k as f64, BLOCK_BITS as f64),
        speed_class: SpeedClass::VeryFast,
        reason,
    }
}

fn cuckoo(p: f64, reason: &'static str) -> Recommendation {
    let f = math::cuckoo_fingerprint_bits(p);
    Recommendation {
        family: FilterKind::Cuckoo,
        params: Params::Cuckoo { fingerprint_bits: f, bucket_size: 4 },
        bits_per_key: f as f64 / 0.95,
        // Fan et al. 2014 §5.1: p ≤ 2b / 2^f.
        expected_fpr: 8.0 / 2f64.powi(f as i32),
        speed_class: SpeedClass::Fast,
        reason,
    }
}

/// What `ScalableCuckoo::new(n, p)` builds, if its first table can meet `p/2` (fingerprints of at
/// most 16 bits): that table's width, and how far the chain grows (tables `n·2^i` at `p/2^(i+1)`
/// while 16 bits suffice).
fn scalable_cuckoo(n: f64, p: f64) -> Option<Recommendation> {
    use crate::filters::cuckoo::{fp_bits_for, DESIGN_LOAD};
    let f = fp_bits_for(p / 2.0)?;
    let tables = (0..crate::filters::scalable_cuckoo::MAX_TABLES as i32)
        .take_while(|&i| fp_bits_for(p / 2f64.powi(i + 1)).is_some())
        .count() as u32;
    Some(Recommendation {
        family: FilterKind::ScalableCuckoo,
        params: Params::ScalableCuckoo {
            initial_capacity: n as u64,
            fingerprint_bits: f,
            max_growth: (1u64 << tables) - 1,
        },
        bits_per_key: f as f64 / DESIGN_LOAD,
        expected_fpr: p / 2.0,
        speed_class: SpeedClass::Fast,
        reason: "deletes and growth: a scalable cuckoo filter removes items and adds cuckoo tables as it \
                 fills, keeping the compound FPR below p; it grows up to a bound set by p (63x the expected \
                 count at p = 1%)",
    })
}

/// Bits and hashes of a classic Bloom filter meeting `p`: the optimal `m`, grown by 0.2% steps
/// while the integer `k` leaves the FPR above `p`.
fn bloom_shape(n: f64, p: f64) -> (f64, u32) {
    let mut m = math::bloom_optimal_bits(n, p).ceil().max(64.0);
    let mut k = math::bloom_optimal_k(m, n);
    for _ in 0..1000 {
        if math::bloom_fpr(m, n, k as f64) <= p {
            break;
        }
        m = (m * 1.002).ceil();
        k = math::bloom_optimal_k(m, n);
    }
    (m, k)
}

fn bloom(n: f64, p: f64, reason: &'static str) -> Recommendation {
    let (m, k) = bloom_shape(n, p);
    Recommendation {
        family: FilterKind::Bloom,
        params: Params::Bloom { bits: m as u64, hashes: k },
        bits_per_key: m / n,
        expected_fpr: math::bloom_fpr(m, n, k as f64),
        speed_class: SpeedClass::Moderate,
        reason,
    }
}

fn gcs(p: f64, reason: &'static str) -> Recommendation {
    let p_bits = (-p.log2()).ceil().clamp(1.0, 56.0) as u32;
    let modulus = 1u64 << p_bits;
    Recommendation {
        family: FilterKind::Gcs,
        params: Params::Gcs { p_bits, modulus },
        bits_per_key: math::gcs_bits_per_key(modulus as f64, p_bits),
        expected_fpr: 1.0 / modulus as f64,
        speed_class: SpeedClass::Slow,
        reason,
    }
}

fn fuse(p: f64, reason: &'static str) -> Option<Recommendation> {
    let (family, f) = if p >= 1.0 / 256.0 {
        (FilterKind::BinaryFuse8, 8)
    } else if p >= 1.0 / 65_536.0 {
        (FilterKind::BinaryFuse16, 16)
    } else {
        return None;
    };
    Some(Recommendation {
        family,
        params: Params::BinaryFuse { fingerprint_bits: f, arity: 3 },
        bits_per_key: math::fuse_bits_per_key(3, f),
        expected_fpr: 0.5f64.powi(f as i32),
        speed_class: SpeedClass::VeryFast,
        reason,
    })
}

/// Recommends a filter family and its parameters for `expected_items` items at false-positive
/// rate `fpr`, given what the application `needs`.
///
/// Precedence (the module table): deletes (with growth: a scalable cuckoo filter, which grows
/// up to a bound set by the FPR; below its FPR range a cuckoo filter sized for the largest count),
/// then unbounded growth, then a static set, then memory, then the default, a blocked Bloom
/// filter.
///
/// With deletes at `fpr ≥ 10%` the answer is a counting Bloom filter rather than a cuckoo filter:
/// the cuckoo fingerprint would be under 7 bits, and with short fingerprints partial-key cuckoo
/// hashing can only reach `2^f` alternate buckets, so large tables stop accepting inserts well below
/// their 95% load (Fan et al. 2014, §4); a counting Bloom filter never refuses an insert, and at
/// such a high FPR its `4·1.44·log2(1/p)` bits per key (≤ 19) are affordable.
///
/// Bits per key come from [`crate::math`]: binary fuse `1.125·f`, GCS `P + 1.58`, cuckoo
/// `f/0.95`, blocked Bloom from [`math::blocked_plan`], scalable Bloom from its layers.
pub fn recommend(expected_items: usize, fpr: f64, needs: Needs) -> Result<Recommendation> {
    check_items(expected_items)?;
    check_fpr(fpr)?;
    let n = expected_items as f64;
    let p = fpr;

    if needs.deletes {
        if p >= CUCKOO_MAX_FPR {
            let (m, k) = bloom_shape(n, p);
            return Ok(Recommendation {
                family: FilterKind::CountingBloom,
                params: Params::CountingBloom { counters: m as u64, counter_bits: 4, hashes: k },
                bits_per_key: 4.0 * m / n,
                expected_fpr: math::bloom_fpr(m, n, k as f64),
                speed_class: SpeedClass::Moderate,
                reason:
                    "deletes at a high FPR: cuckoo fingerprints would be too short to reach a high load; \
                         4-bit counters never refuse an insert",
            });
        }
        if needs.grows {
            if let Some(r) = scalable_cuckoo(n, p) {
                return Ok(r);
            }
        }
        let reason = if needs.grows {
            "deletes and growth at an FPR below what a growing chain of cuckoo tables reaches \
             (2^-12): a cuckoo filter deletes, size it for the largest count"
        } else {
            "deletes: a cuckoo filter removes items and is smaller than a counting Bloom filter"
        };
        return Ok(cuckoo(p, reason));
    }

    if needs.forgets {
        let plan = math::aging_plan(p, math::AGING_DEFAULT_MAX_SLICES).ok_or(crate::Error::param(
            "fpr",
            p,
            "a rate an aging filter can reach: 1e-7 and above",
        ))?;
        let live = plan.slices as usize;
        let rows = (n / plan.l as f64).ceil() / plan.load;
        let load = (n / plan.l as f64).ceil() / rows.ceil().max(1.0);
        return Ok(Recommendation {
            family: FilterKind::AgingBloom,
            params: Params::AgingBloom {
                slices: plan.slices,
                hashes: plan.k,
                generations: plan.l,
                load: plan.load,
            },
            bits_per_key: rows.ceil().max(1.0)
                * math::aging_row_words(plan.slices) as f64
                * math::AGING_WORD_BITS
                / n,
            expected_fpr: math::aging_fpr(plan.k, live, &vec![load; live]),
            speed_class: SpeedClass::Fast,
            reason: "forgets: an age-partitioned filter keeps the last n insertions (a window by time with \
                     TimeLimitedBloom) and forgets older ones, one or two cache lines per operation",
        });
    }

    if needs.grows {
        // What `ScalableBloom::new` builds: growth 2, tightening 0.5, first share 0.8.
        let (growth, tightening, share) = (2u32, 0.5, crate::filters::scalable_bloom::DEFAULT_FIRST_SHARE);
        let first = math::scalable_first_share_layer_fpr(p, share, tightening, 0);
        return Ok(Recommendation {
            family: FilterKind::ScalableBloom,
            params: Params::ScalableBloom {
                initial_capacity: expected_items as u64,
                growth,
                tightening,
                first_layer_fpr: first,
            },
            bits_per_key: math::scalable_first_share_bits_per_key(n, p, n, growth as f64, tightening, share),
            expected_fpr: first,
            speed_class: SpeedClass::Moderate,
            reason: "grows without a known bound: a scalable Bloom filter adds layers and keeps the compound FPR below p",
        });
    }

    if needs.static_set {
        let f = fuse(p, "static set: a binary fuse filter is the smallest fast filter (1.125·f bits/key)");
        if needs.memory_starved {
            let g = gcs(
                p,
                "static set, memory first: a Golomb-coded set is within 0.2 bit/key of the entropy bound",
            );
            return Ok(match f {
                Some(f) if f.bits_per_key <= g.bits_per_key => f,
                _ => g,
            });
        }
        return Ok(f.unwrap_or_else(|| {
            blocked(n, p, "static set below 2^-16 FPR: beyond binary fuse fingerprints; a blocked Bloom filter stays fast")
        }));
    }

    if needs.memory_starved {
        let c = cuckoo(p, "memory first, dynamic: a cuckoo filter beats Bloom filters below about 0.5% FPR");
        let b = bloom(n, p, "memory first, dynamic, high FPR: a classic Bloom filter is the smallest");
        return Ok(if c.bits_per_key < b.bits_per_key { c } else { b });
    }

    Ok(blocked(n, p, "dynamic set: a blocked Bloom filter answers with one cache miss"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_table() {
        let n = 1_000_000;
        let st = Needs { static_set: true, ..Needs::default() };
        assert_eq!(recommend(n, 0.01, st).unwrap().family, FilterKind::BinaryFuse8);
        assert_eq!(recommend(n, 0.0001, st).unwrap().family, FilterKind::BinaryFuse16);
        assert_eq!(recommend(n, 1e-7, st).unwrap().family, FilterKind::BlockedBloom);
        let starved = Needs { static_set: true, memory_starved: true, ..Needs::default() };
        // p = 2^-8: fuse 9.0 beats GCS 9.58; p = 0.001: GCS 11.6 beats fuse16 18.
        assert_eq!(recommend(n, 1.0 / 256.0, starved).unwrap().family, FilterKind::BinaryFuse8);
        let g = recommend(n, 0.001, starved).unwrap();
        assert_eq!(g.family, FilterKind::Gcs);
        assert!(g.bits_per_key <= (1000f64).log2() + 1.6 + 0.4, "{}", g.bits_per_key);

        let del = Needs { deletes: true, ..Needs::default() };
        let c = recommend(n, 0.01, del).unwrap();
        assert_eq!(c.family, FilterKind::Cuckoo);
        assert_eq!(c.params, Params::Cuckoo { fingerprint_bits: 10, bucket_size: 4 });
        assert!(c.expected_fpr <= 0.01);
        assert_eq!(recommend(n, 0.2, del).unwrap().family, FilterKind::CountingBloom);
        let both = Needs { deletes: true, grows: true, ..Needs::default() };
        let sc = recommend(n, 0.01, both).unwrap();
        assert_eq!(sc.family, FilterKind::ScalableCuckoo);
        // p/2 = 0.5%: 12-bit fingerprints; tables at 0.5%, 0.25%, ... 0.016% (six meet 2^-13).
        assert_eq!(
            sc.params,
            Params::ScalableCuckoo { initial_capacity: n as u64, fingerprint_bits: 12, max_growth: 63 }
        );
        // The same chain as the library builds: it refuses its first insert past 63 tables' worth.
        let built = crate::ScalableCuckoo::new(1000, 0.01).unwrap();
        assert_eq!(built.tables()[0].fingerprint_bits(), 12);
        // Below 2·2^-13 the first table cannot be built: a plain cuckoo filter, sized by hand.
        assert_eq!(recommend(n, 1e-4, both).unwrap().family, FilterKind::Cuckoo);

        let grows = Needs { grows: true, ..Needs::default() };
        let s = recommend(n, 0.01, grows).unwrap();
        assert_eq!(s.family, FilterKind::ScalableBloom);
        assert!(s.expected_fpr <= 0.01);

        let d = recommend(n, 0.01, Needs::default()).unwrap();
        assert_eq!(d.family, FilterKind::BlockedBloom);
        assert!(d.expected_fpr <= 0.01 && d.bits_per_key > math::bloom_bits_per_key(0.01));

        let mem = Needs { memory_starved: true, ..Needs::default() };
        assert_eq!(recommend(n, 0.0001, mem).unwrap().family, FilterKind::Cuckoo);
        assert_eq!(recommend(n, 0.05, mem).unwrap().family, FilterKind::Bloom);

        let window = Needs { forgets: true, ..Needs::default() };
        let a = recommend(n, 0.01, window).unwrap();
        assert_eq!(a.family, FilterKind::AgingBloom);
        let f = crate::AgingBloom::new(n, 0.01).unwrap();
        assert!((a.bytes_for(n) as f64 - crate::Filter::size_in_bytes(&f) as f64).abs() <= 1.0, "{a:?}");
        assert!(matches!(a.params, Params::AgingBloom { slices: 31, .. }), "{a:?}");
    }

    #[test]
    fn every_recommendation_meets_the_target() {
        let all = [
            Needs::default(),
            Needs { static_set: true, ..Needs::default() },
            Needs { static_set: true, memory_starved: true, ..Needs::default() },
            Needs { deletes: true, ..Needs::default() },
            Needs { grows: true, ..Needs::default() },
            Needs { memory_starved: true, ..Needs::default() },
            Needs { forgets: true, ..Needs::default() },
        ];
        for needs in all {
            for p in [0.3, 0.1, 0.01, 0.004, 0.001, 1e-5, 1e-9] {
                if needs.forgets && p < math::AGING_MIN_FPR {
                    assert!(
                        matches!(
                            recommend(10_000, p, needs),
                            Err(crate::Error::InvalidParameter { name: "fpr", .. })
                        ),
                        "p = {p}: below what an aging filter reaches"
                    );
                    continue;
                }
                let r = recommend(10_000, p, needs).unwrap();
                assert!(r.expected_fpr <= p * 1.000_001, "{needs:?} p = {p}: {r:?}");
                assert!(r.bits_per_key > 0.0 && r.bits_per_key.is_finite());
                assert!(!r.reason.is_empty());
            }
        }
    }

    #[test]
    fn bad_parameters() {
        assert!(recommend(0, 0.01, Needs::default()).is_err());
        for p in [0.0, 1.0, f64::NAN, -0.1] {
            assert!(recommend(10, p, Needs::default()).is_err());
        }
    }
}
