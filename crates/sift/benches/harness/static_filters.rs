//! The static-filter workload: sift's BinaryFuse8/16, Xor8 and Gcs, built once from all keys,
//! against xorf, and the ratios and bounds of issue 3.
//!
//! ## Hashing, so that the comparison is fair
//! sift hashes the key's byte image with XXH3-64, seed 0 (its default `Hasher`); xorf takes a
//! precomputed 64-bit hash (`xorf::BinaryFuse8: TryFrom<&[u64]>`) and gets `xxh3_64(key bytes)`,
//! the same hash, computed inside the timed build.

use std::hint::black_box;

use sift::prelude::*;
use xorf::Filter as _;

use super::contender::{from_keys, ratio, ratio_at_most, Bound, Contender, Metric, Ratio, Subject, Workload};
use super::keys::Key;

/// False-positive rate of the GCS row: 2^-8, the same as BinaryFuse8.
pub const GCS_FPR: f64 = 1.0 / 256.0;

/// A sift filter under test (a newtype, to implement [`Subject`] once per type).
pub struct Wrap<F>(pub F);

macro_rules! sift_static {
    ($($t:ty),*) => {$(
        impl<K: Key> Subject<K> for Wrap<$t> {
            fn add(&mut self, _: &K) -> bool {
                false
            }
            #[inline(always)]
            fn has(&self, key: &K) -> bool {
                self.0.contains(black_box(key).bytes())
            }
        }
    )*};
}
sift_static!(sift::BinaryFuse8, sift::BinaryFuse16, sift::Xor8);

impl<K: Key> Subject<K> for Wrap<sift::Gcs> {
    fn add(&mut self, _: &K) -> bool {
        false
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.contains(black_box(key).bytes())
    }
    fn coded_bits_per_key(&self) -> Option<f64> {
        Some(self.0.coded_bits_per_key())
    }
}

/// A sift static filter built by `build` from the keys' byte images (borrowed for 20-byte keys,
/// as a caller holding such keys passes them; converted inside the timed build for `u64`).
fn sift_static<K: Key, F: 'static>(
    name: &'static str,
    build: impl Fn(&[K::Bytes]) -> sift::Result<F> + 'static,
) -> Contender<K>
where
    Wrap<F>: Subject<K>,
{
    from_keys(name, move |keys: &[K]| Wrap(build(&K::images(keys)[..]).expect("valid benchmark parameters")))
}

/// A peer crate's filter under test.
pub struct Peer<F>(pub F);

macro_rules! xorf_peer {
    ($($t:ty),*) => {$(
        impl<K: Key> Subject<K> for Peer<$t> {
            fn add(&mut self, _: &K) -> bool {
                false
            }
            #[inline(always)]
            fn has(&self, key: &K) -> bool {
                self.0.contains(&black_box(key).xxh3())
            }
        }
    )*};
}
xorf_peer!(xorf::BinaryFuse8, xorf::BinaryFuse16, xorf::Xor8);

/// An xorf filter built from the keys' XXH3-64 hashes.
fn xorf<K: Key, F>(name: &'static str) -> Contender<K>
where
    F: for<'a> TryFrom<&'a [u64]> + 'static,
    Peer<F>: Subject<K>,
    for<'a> <F as TryFrom<&'a [u64]>>::Error: std::fmt::Debug,
{
    from_keys(name, |keys: &[K]| {
        let hashes: Vec<u64> = keys.iter().map(|k| k.xxh3()).collect();
        let f = F::try_from(&hashes[..]).expect("xorf construction");
        drop(hashes);
        Peer(f)
    })
}

/// sift's static filters against xorf (issue 3).
pub struct StaticFilters;

impl Workload for StaticFilters {
    const NAME: &'static str = "static";
    const TITLE: &'static str = "Static filters";
    /// Not used by these filters (each has its own FPR: 2^-8 for the 8-bit ones, [`GCS_FPR`]).
    const FPR: f64 = 1.0 / 256.0;
    const RATIOS: &'static [Ratio] = &[
        ratio_at_most("sift BinaryFuse8", "xorf BinaryFuse8", Metric::Build, 0.7),
        ratio_at_most("sift BinaryFuse8", "xorf BinaryFuse8", Metric::QueryMember, 1.0),
        ratio_at_most("sift BinaryFuse8", "xorf BinaryFuse8", Metric::QueryNonMember, 1.0),
        ratio("sift BinaryFuse8", "xorf BinaryFuse8", Metric::BitsPerKey),
        ratio("sift BinaryFuse16", "xorf BinaryFuse16", Metric::Build),
        ratio("sift BinaryFuse16", "xorf BinaryFuse16", Metric::QueryMember),
        ratio("sift BinaryFuse16", "xorf BinaryFuse16", Metric::QueryNonMember),
        ratio("sift Xor8", "xorf Xor8", Metric::Build),
        ratio("sift Xor8", "xorf Xor8", Metric::QueryMember),
        ratio("sift Xor8", "xorf Xor8", Metric::QueryNonMember),
    ];
    const BOUNDS: &'static [Bound] = &[
        Bound {
            row: "sift BinaryFuse8",
            metric: Metric::BitsPerKey,
            max: 9.05,
            label: "BinaryFuse8 ≤ 9.05 bits/key",
        },
        Bound {
            row: "sift BinaryFuse8", metric: Metric::Fpr, max: 0.004, label: "BinaryFuse8 FPR ≤ 0.40%"
        },
        Bound {
            row: "sift BinaryFuse8 4-wise",
            metric: Metric::BitsPerKey,
            max: 8.7,
            label: "BinaryFuse8 4-wise ≤ 8.7 bits/key",
        },
        Bound {
            row: "sift BinaryFuse8 4-wise",
            metric: Metric::Fpr,
            max: 0.004,
            label: "BinaryFuse8 4-wise FPR ≤ 0.40%",
        },
        // log2(1/p) + 1.6 at p = 2^-8; the in-memory size (with the sample index) is in the table.
        Bound {
            row: "sift Gcs p=2^-8",
            metric: Metric::CodedBitsPerKey,
            max: 9.6,
            label: "Gcs coded stream ≤ log2(1/p) + 1.6 = 9.6 bits/key",
        },
        Bound {
            row: "sift Gcs p=2^-8",
            metric: Metric::QueryWorst,
            max: 1000.0,
            label: "Gcs query ≤ 1 µs (worse of member / non-member)",
        },
    ];

    fn contenders<K: Key>() -> Vec<Contender<K>> {
        use sift::{Arity, BinaryFuse16, BinaryFuse8, Gcs, GcsParams, Hasher, Xor8};

        vec![
            sift_static::<K, _>("sift BinaryFuse8", |b| {
                BinaryFuse8::build_with(b, Arity::Three, Hasher::default())
            }),
            xorf::<K, xorf::BinaryFuse8>("xorf BinaryFuse8"),
            sift_static::<K, _>("sift BinaryFuse8 4-wise", |b| {
                BinaryFuse8::build_with(b, Arity::Four, Hasher::default())
            }),
            sift_static::<K, _>("sift BinaryFuse16", |b| {
                BinaryFuse16::build_with(b, Arity::Three, Hasher::default())
            }),
            xorf::<K, xorf::BinaryFuse16>("xorf BinaryFuse16"),
            sift_static::<K, _>("sift Xor8", |b| Xor8::build_with(b, Hasher::default())),
            xorf::<K, xorf::Xor8>("xorf Xor8"),
            sift_static::<K, _>("sift Gcs p=2^-8", |b| {
                Gcs::build_with_params(b, GcsParams::for_fpr(GCS_FPR).expect("valid"))
            }),
        ]
    }
}
