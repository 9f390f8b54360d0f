//! The Cuckoo and Quotient workload: sift's fingerprint tables with deletes against
//! cuckoofilter, scalable_cuckoo_filter and qfilter, and the ratios and bounds of issue 3.
//!
//! ## Hashing, so that the comparison is fair
//! * sift hashes the key's byte image with XXH3-64, seed 0 (its default `Hasher`).
//! * qfilter takes a precomputed 64-bit hash (`qfilter::Filter::{insert,contains}_fingerprint`):
//!   it gets `xxh3_64(key bytes)`, the same hash.
//! * cuckoofilter and scalable_cuckoo_filter only take `T: Hash` with their own `Hasher`: they
//!   appear twice where it matters, with their default hasher (SipHash, their normal API) and
//!   with [`Xxh3Pass`], a `Hasher` that passes a `u64` through, fed `xxh3_64(key bytes)`.

use sift::prelude::*;

use super::contender::{empty, ratio, ratio_at_most, Bound, Contender, Metric, Ratio, Subject, Workload};
use super::keys::{mix64, Key};

/// A `std::hash::Hasher` that returns the `u64` written to it unchanged (what cuckoofilter and
/// scalable_cuckoo_filter see when handed `xxh3_64(key)`); other writes (cuckoofilter hashes its
/// 1-byte fingerprint to find the alternate bucket) are mixed in with XXH3.
#[derive(Default, Clone, Copy)]
pub struct Xxh3Pass(u64);

impl std::hash::Hasher for Xxh3Pass {
    #[inline(always)]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline(always)]
    fn write_u64(&mut self, x: u64) {
        self.0 = if self.0 == 0 { x } else { mix64(self.0 ^ x) };
    }
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }
}

/// sift's fingerprint tables: `try_insert` refuses an insert when the table is full.
macro_rules! sift_tables {
    ($($t:ty),*) => {$(
        impl<K: Key> Subject<K> for $t {
            #[inline(always)]
            fn add(&mut self, key: &K) -> bool {
                self.try_insert(key.bytes()).is_ok()
            }
            #[inline(always)]
            fn has(&self, key: &K) -> bool {
                self.contains(key.bytes())
            }
        }
    )*};
}
sift_tables!(sift::Cuckoo, sift::Quotient);

/// qfilter fed `xxh3_64(key)` through its fingerprint API; inserts like its `insert` (no
/// duplicate copy when already present), as sift's `try_insert` checks presence too.
pub struct QFilterXxh3(pub qfilter::Filter);

impl<K: Key> Subject<K> for QFilterXxh3 {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.0.insert_fingerprint(false, key.xxh3()).is_ok()
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.contains_fingerprint(key.xxh3())
    }
}

/// cuckoofilter with its default hasher (SipHash-1-3 via `DefaultHasher`), hashing the key.
pub struct CuckooSip<K>(
    pub cuckoofilter::CuckooFilter<std::collections::hash_map::DefaultHasher>,
    std::marker::PhantomData<K>,
);

impl<K: Key> Subject<K> for CuckooSip<K> {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.0.add(key).is_ok()
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.contains(key)
    }
}

/// cuckoofilter fed `xxh3_64(key)` through [`Xxh3Pass`].
pub struct CuckooXxh3(pub cuckoofilter::CuckooFilter<Xxh3Pass>);

impl<K: Key> Subject<K> for CuckooXxh3 {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.0.add(&key.xxh3()).is_ok()
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.contains(&key.xxh3())
    }
}

/// scalable_cuckoo_filter with its defaults (SipHash-1-3), hashing the key.
pub struct ScalableCuckoo<K: Key>(pub scalable_cuckoo_filter::ScalableCuckooFilter<K>);

impl<K: Key> Subject<K> for ScalableCuckoo<K> {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.0.insert(key);
        true
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.contains(key)
    }
}

/// Capacity handed to cuckoofilter: it rounds the bucket count up to a power of two, and at
/// exactly `n` it would run at 95.4% load for n = 1M and lose items; `n / 0.95` (its designers'
/// load) leaves it the same headroom sift plans for.
fn cuckoofilter_capacity(n: usize) -> usize {
    (n as f64 / 0.95).ceil() as usize
}

/// `sift::Quotient` with as many home slots as qfilter has (it rounds `n / 0.95` up to a power
/// of two: 48% load at n = 1M, 60% at 10M) and the remainder width, hash and seed of
/// `Quotient::new(n, p)`: the two tables at equal load.
fn quotient_at_qfilter_load(n: usize, p: f64) -> sift::Quotient {
    let q = qfilter::Filter::new(n as u64, p).expect("valid parameters");
    // qfilter's capacity is ⌊19·slots / 20⌋ for a power-of-two slot count ≥ 64.
    let slots = q.capacity().next_power_of_two().max(64);
    let f = sift::Quotient::new(n, p).expect("valid parameters");
    sift::Quotient::with_params(slots, f.remainder_bits(), f.hasher()).expect("valid parameters")
}

/// sift's Cuckoo and Quotient filters against cuckoofilter, scalable_cuckoo_filter and qfilter
/// (issue 3): fingerprint tables with deletes, created empty and filled one key at a time.
pub struct CuckooQuotient;

impl Workload for CuckooQuotient {
    const NAME: &'static str = "cuckoo-quotient";
    const TITLE: &'static str = "Cuckoo and quotient filters";
    /// Cuckoo: 12-bit fingerprints; Quotient: r = 7.
    const FPR: f64 = 0.01;
    const RATIOS: &'static [Ratio] = &[
        ratio_at_most("sift Cuckoo", "cuckoofilter+xxh3", Metric::Build, 0.35),
        ratio_at_most("sift Cuckoo", "cuckoofilter+xxh3", Metric::QueryMember, 0.3),
        ratio_at_most("sift Cuckoo", "cuckoofilter+xxh3", Metric::QueryNonMember, 0.3),
        ratio_at_most("sift Cuckoo", "cuckoofilter (SipHash)", Metric::Build, 0.35),
        ratio_at_most("sift Cuckoo", "cuckoofilter (SipHash)", Metric::QueryMember, 0.3),
        ratio_at_most("sift Cuckoo", "cuckoofilter (SipHash)", Metric::QueryNonMember, 0.3),
        ratio("sift Cuckoo", "scalable_cuckoo_filter (SipHash)", Metric::Build),
        ratio("sift Cuckoo", "scalable_cuckoo_filter (SipHash)", Metric::QueryMember),
        ratio("sift Cuckoo", "scalable_cuckoo_filter (SipHash)", Metric::QueryNonMember),
        ratio_at_most("sift Quotient", "qfilter+xxh3", Metric::BitsPerKey, 0.75),
        ratio_at_most("sift Quotient", "qfilter+xxh3", Metric::Build, 1.0),
        ratio_at_most("sift Quotient", "qfilter+xxh3", Metric::QueryMember, 1.0),
        ratio_at_most("sift Quotient", "qfilter+xxh3", Metric::QueryNonMember, 1.0),
        ratio("sift Quotient at qfilter's load", "qfilter+xxh3", Metric::BitsPerKey),
        ratio_at_most("sift Quotient at qfilter's load", "qfilter+xxh3", Metric::Build, 1.0),
        ratio_at_most("sift Quotient at qfilter's load", "qfilter+xxh3", Metric::QueryMember, 1.0),
        ratio_at_most("sift Quotient at qfilter's load", "qfilter+xxh3", Metric::QueryNonMember, 1.0),
    ];
    const BOUNDS: &'static [Bound] = &[
        Bound {
            row: "sift Cuckoo", metric: Metric::Fpr, max: 0.002, label: "Cuckoo (12-bit fp) FPR ≤ 0.2%"
        },
        Bound { row: "sift Cuckoo", metric: Metric::BitsPerKey, max: 13.0, label: "Cuckoo ≤ 13 bits/key" },
    ];

    fn contenders<K: Key>() -> Vec<Contender<K>> {
        vec![
            empty::<K, _>("sift Cuckoo", |n, p| sift::Cuckoo::new(n, p).expect("valid parameters")),
            empty::<K, _>("cuckoofilter+xxh3", |n, _| {
                CuckooXxh3(cuckoofilter::CuckooFilter::with_capacity(cuckoofilter_capacity(n)))
            }),
            empty::<K, _>("cuckoofilter (SipHash)", |n, _| {
                CuckooSip(
                    cuckoofilter::CuckooFilter::with_capacity(cuckoofilter_capacity(n)),
                    std::marker::PhantomData,
                )
            }),
            empty::<K, _>("scalable_cuckoo_filter (SipHash)", |n, p| {
                ScalableCuckoo(scalable_cuckoo_filter::ScalableCuckooFilter::new(n, p))
            }),
            empty::<K, _>("sift Quotient", |n, p| sift::Quotient::new(n, p).expect("valid parameters")),
            empty::<K, _>("qfilter+xxh3", |n, p| {
                QFilterXxh3(qfilter::Filter::new(n as u64, p).expect("valid parameters"))
            }),
            empty::<K, _>("sift Quotient at qfilter's load", quotient_at_qfilter_load),
        ]
    }
}
