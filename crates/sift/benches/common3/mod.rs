//! What the Criterion bench `benches/static_and_cuckoo.rs` and the table program
//! `examples/bench_table3.rs` share: key workloads, adapters for sift's static filters, Cuckoo and
//! Quotient and for their peer crates (xorf, qfilter, cuckoofilter, scalable_cuckoo_filter), and
//! the ratios of issue 3.
//!
//! Kept apart from `benches/common/mod.rs` (the Bloom family's) on purpose; the key workloads are
//! the same file (`benches/common/keys.rs`).
//!
//! ## Hashing, so that the comparison is fair
//! * sift hashes the key's byte image with XXH3-64, seed 0 (its default `Hasher`).
//! * xorf and qfilter take a precomputed 64-bit hash in their API (`xorf::BinaryFuse8: From<&[u64]>`,
//!   `qfilter::Filter::{insert,contains}_fingerprint`): they get `xxh3_64(key bytes)`, the same hash.
//! * cuckoofilter and scalable_cuckoo_filter only take `T: Hash` with their own `Hasher`: they
//!   appear twice where it matters, with their default hasher (SipHash, their normal API) and
//!   with [`Xxh3Pass`], a `Hasher` that passes a `u64` through, fed `xxh3_64(key bytes)`.
#![allow(dead_code)]

use std::hint::black_box;

use sift::prelude::*;
use xorf::Filter as _;

/// False-positive rate of the dynamic workloads (Cuckoo: 12-bit fingerprints; Quotient: r = 7).
pub const FPR: f64 = 0.01;
/// False-positive rate of the GCS row: 2^-8, the same as BinaryFuse8.
pub const GCS_FPR: f64 = 1.0 / 256.0;

// ---------------------------------------------------------------------------------------------
// Keys (the same as the Bloom family's)
// ---------------------------------------------------------------------------------------------

#[path = "../common/keys.rs"]
mod keys;
pub use keys::*;

// ---------------------------------------------------------------------------------------------
// A pass-through Hasher for the Hash-only peers
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Static filters: built once from a slice of keys
// ---------------------------------------------------------------------------------------------

/// A static filter, built from all keys at once.
pub trait StaticBuilt<K> {
    /// Number of keys reported present, one call per key.
    fn count_hits(&self, keys: &[K]) -> usize;
    /// Bytes the filter reports for itself (the table program measures the heap independently).
    fn reported_bytes(&self) -> usize;
    /// For a GCS: bits per key of the coded stream alone (what a file stores), without the
    /// in-memory sample index.
    fn coded_bits_per_key(&self) -> Option<f64> {
        None
    }
}

/// Builds a static filter from the keys (distinct), hashing included.
pub type BuildFn<K> = Box<dyn Fn(&[K]) -> Box<dyn StaticBuilt<K>>>;

/// A static contender: a name and how to build it from the keys (hashing included).
pub struct StaticContender<K> {
    /// Row name.
    pub name: &'static str,
    /// Builds the filter of `keys` (distinct).
    pub build: BuildFn<K>,
}

/// A newtype for sift's filters, to implement `StaticBuilt` once per type.
pub struct Wrap<F>(pub F);

macro_rules! sift_static {
    ($($t:ty),*) => {$(
        impl<K: Key> StaticBuilt<K> for Wrap<$t> {
            #[inline(never)]
            fn count_hits(&self, keys: &[K]) -> usize {
                let mut hits = 0usize;
                for k in keys {
                    hits += self.0.contains(black_box(k).bytes()) as usize;
                }
                hits
            }
            fn reported_bytes(&self) -> usize {
                self.0.size_in_bytes()
            }
        }
    )*};
}
sift_static!(sift::BinaryFuse8, sift::BinaryFuse16, sift::Xor8);

impl<K: Key> StaticBuilt<K> for Wrap<sift::Gcs> {
    #[inline(never)]
    fn count_hits(&self, keys: &[K]) -> usize {
        let mut hits = 0usize;
        for k in keys {
            hits += self.0.contains(black_box(k).bytes()) as usize;
        }
        hits
    }
    fn reported_bytes(&self) -> usize {
        self.0.size_in_bytes()
    }
    fn coded_bits_per_key(&self) -> Option<f64> {
        Some(self.0.coded_bits_per_key())
    }
}

fn sift_static<K: Key, F: 'static>(
    name: &'static str,
    build: impl Fn(&[K::Bytes]) -> sift::Result<F> + 'static,
) -> StaticContender<K>
where
    Wrap<F>: StaticBuilt<K>,
{
    StaticContender {
        name,
        build: Box::new(move |keys: &[K]| {
            let f = build(&K::images(keys)[..]).expect("valid benchmark parameters");
            Box::new(Wrap(f)) as Box<dyn StaticBuilt<K>>
        }),
    }
}

/// A newtype for the peers, to implement `StaticBuilt` on foreign types.
pub struct Peer<F>(pub F);

macro_rules! xorf_peer {
    ($t:ty) => {
        impl<K: Key> StaticBuilt<K> for Peer<$t> {
            #[inline(never)]
            fn count_hits(&self, keys: &[K]) -> usize {
                let mut hits = 0usize;
                for k in keys {
                    hits += self.0.contains(&black_box(k).xxh3()) as usize;
                }
                hits
            }
            fn reported_bytes(&self) -> usize {
                self.0.fingerprints.len() * core::mem::size_of_val(&self.0.fingerprints[0])
            }
        }
    };
}
xorf_peer!(xorf::BinaryFuse8);
xorf_peer!(xorf::BinaryFuse16);
xorf_peer!(xorf::Xor8);

fn xorf_build<K: Key, F>(keys: &[K]) -> Box<dyn StaticBuilt<K>>
where
    F: for<'a> TryFrom<&'a [u64]> + 'static,
    Peer<F>: StaticBuilt<K>,
    for<'a> <F as TryFrom<&'a [u64]>>::Error: std::fmt::Debug,
{
    let hashes: Vec<u64> = keys.iter().map(|k| k.xxh3()).collect();
    let f = F::try_from(&hashes[..]).expect("xorf construction");
    drop(hashes);
    Box::new(Peer(f))
}

/// The static filters, sift's first, then the peers.
pub fn static_contenders<K: Key>() -> Vec<StaticContender<K>> {
    use sift::{Arity, BinaryFuse16, BinaryFuse8, Gcs, GcsParams, Hasher, Xor8};

    vec![
        sift_static::<K, _>("sift BinaryFuse8", |b| {
            BinaryFuse8::build_with(b, Arity::Three, Hasher::default())
        }),
        StaticContender { name: "xorf BinaryFuse8", build: Box::new(xorf_build::<K, xorf::BinaryFuse8>) },
        sift_static::<K, _>("sift BinaryFuse8 4-wise", |b| {
            BinaryFuse8::build_with(b, Arity::Four, Hasher::default())
        }),
        sift_static::<K, _>("sift BinaryFuse16", |b| {
            BinaryFuse16::build_with(b, Arity::Three, Hasher::default())
        }),
        StaticContender { name: "xorf BinaryFuse16", build: Box::new(xorf_build::<K, xorf::BinaryFuse16>) },
        sift_static::<K, _>("sift Xor8", |b| Xor8::build_with(b, Hasher::default())),
        StaticContender { name: "xorf Xor8", build: Box::new(xorf_build::<K, xorf::Xor8>) },
        sift_static::<K, _>("sift Gcs p=2^-8", |b| {
            Gcs::build_with_params(b, GcsParams::for_fpr(GCS_FPR).expect("valid"))
        }),
    ]
}

// ---------------------------------------------------------------------------------------------
// Dynamic filters: created empty, then one insert per key
// ---------------------------------------------------------------------------------------------

/// One dynamic filter implementation.
pub trait Subject<K: Key> {
    /// Inserts one key; `false` if the filter refused it (full).
    fn add(&mut self, key: &K) -> bool;
    /// Whether the filter may contain `key`.
    fn has(&self, key: &K) -> bool;
}

/// Type-erased dynamic filter; the per-key loops are monomorphised inside.
pub trait Built<K> {
    /// Inserts every key; returns the number refused.
    fn insert_all(&mut self, keys: &[K]) -> usize;
    /// Number of keys reported present.
    fn count_hits(&self, keys: &[K]) -> usize;
}

impl<K: Key, S: Subject<K>> Built<K> for S {
    #[inline(never)]
    fn insert_all(&mut self, keys: &[K]) -> usize {
        let mut refused = 0usize;
        for k in keys {
            refused += !self.add(black_box(k)) as usize;
        }
        refused
    }
    #[inline(never)]
    fn count_hits(&self, keys: &[K]) -> usize {
        let mut hits = 0usize;
        for k in keys {
            hits += self.has(black_box(k)) as usize;
        }
        hits
    }
}

/// A dynamic contender: name and constructor for `(n, fpr)`.
pub struct Contender<K> {
    /// Row name.
    pub name: &'static str,
    /// Makes an empty filter.
    pub make: Box<dyn Fn(usize, f64) -> Box<dyn Built<K>>>,
}

fn contender<K: Key, S: Subject<K> + 'static>(
    name: &'static str,
    make: impl Fn(usize, f64) -> S + 'static,
) -> Contender<K> {
    Contender { name, make: Box::new(move |n, p| Box::new(make(n, p)) as Box<dyn Built<K>>) }
}

impl<K: Key> Subject<K> for sift::Cuckoo {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.try_insert(key.bytes()).is_ok()
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.contains(key.bytes())
    }
}

impl<K: Key> Subject<K> for sift::Quotient {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.try_insert(key.bytes()).is_ok()
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.contains(key.bytes())
    }
}

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

/// The dynamic filters, sift's first.
pub fn dynamic_contenders<K: Key>() -> Vec<Contender<K>> {
    vec![
        contender::<K, _>("sift Cuckoo", |n, p| sift::Cuckoo::new(n, p).expect("valid parameters")),
        contender::<K, _>("cuckoofilter+xxh3", |n, _| {
            CuckooXxh3(cuckoofilter::CuckooFilter::with_capacity(cuckoofilter_capacity(n)))
        }),
        contender::<K, _>("cuckoofilter (SipHash)", |n, _| {
            CuckooSip(
                cuckoofilter::CuckooFilter::with_capacity(cuckoofilter_capacity(n)),
                std::marker::PhantomData,
            )
        }),
        contender::<K, _>("scalable_cuckoo_filter (SipHash)", |n, p| {
            ScalableCuckoo(scalable_cuckoo_filter::ScalableCuckooFilter::new(n, p))
        }),
        contender::<K, _>("sift Quotient", |n, p| sift::Quotient::new(n, p).expect("valid parameters")),
        contender::<K, _>("qfilter+xxh3", |n, p| {
            QFilterXxh3(qfilter::Filter::new(n as u64, p).expect("valid parameters"))
        }),
        contender::<K, _>("sift Quotient at qfilter's load", quotient_at_qfilter_load),
    ]
}
