//! The Bloom-family workload: sift's Bloom families and the peer crates (fastbloom, bloomfilter,
//! sbbf-rs, growable-bloom-filter), one adapter each, and the ratios of issue 2.
//!
//! A new Bloom-type family with the usual API (`T::new(n, fpr)`, `insert`, `contains`): add the
//! type to the `sift_subjects!` invocation and an `empty(..)` line to
//! [`BloomFamily::contenders`]; the ratios in `RATIOS` that name it fill in by themselves. A peer
//! crate: implement [`Subject`] for its filter type (or a newtype around it) and add a line.

use sift::prelude::*;

use super::contender::{empty, ratio, Contender, Metric, Ratio, Subject, Workload};
use super::keys::Key;

/// sift's Bloom families all have the same API, so one macro adapts them all.
macro_rules! sift_subjects {
    ($($t:ty),* $(,)?) => {$(
        impl<K: Key> Subject<K> for $t {
            #[inline(always)]
            fn add(&mut self, key: &K) -> bool {
                self.insert(key.bytes());
                true
            }
            #[inline(always)]
            fn has(&self, key: &K) -> bool {
                self.contains(key.bytes())
            }
        }
    )*};
}

/// `AtomicBloom` filled through its shared insert (`&self`). Through `&mut self` (the macro's
/// impl, and the batch experiment's) it takes the exclusive path with plain stores instead.
pub struct SharedAtomic(sift::AtomicBloom);

impl<K: Key> Subject<K> for SharedAtomic {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        sift::AtomicBloom::insert(&self.0, key.bytes());
        true
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.contains(key.bytes())
    }
}

// The sift families under test. Add each new family here and in `BloomFamily::contenders`
// (and in `bloom_batch` for the batch experiment).
sift_subjects!(
    sift::Bloom,
    sift::BlockedBloom,
    sift::ScalableBloom,
    sift::AtomicBloom,
    sift::CountingBloom,
    sift::SplitBlockBloom,
);

/// sift's Bloom family against the Bloom crates (issue 2): classic, blocked, scalable, atomic,
/// counting and split-block filters, created empty and filled one key at a time.
pub struct BloomFamily;

impl Workload for BloomFamily {
    const NAME: &'static str = "bloom";
    const TITLE: &'static str = "Bloom family";
    const FPR: f64 = 0.01;
    const RATIOS: &'static [Ratio] = RATIOS;

    fn contenders<K: Key>() -> Vec<Contender<K>> {
        vec![
            // sift's families (one line each).
            empty::<K, _>("sift Bloom", |n, p| sift::Bloom::new(n, p).expect("valid benchmark parameters")),
            empty::<K, _>("sift BlockedBloom", |n, p| {
                sift::BlockedBloom::new(n, p).expect("valid benchmark parameters")
            }),
            empty::<K, _>("sift ScalableBloom", |n, p| {
                sift::ScalableBloom::new(n, p).expect("valid benchmark parameters")
            }),
            // The "AtomicBloom insert on one thread": the shared insert (`&self`, locked
            // `fetch_or`s), which is what many threads would call.
            empty::<K, _>("sift AtomicBloom", |n, p| {
                SharedAtomic(sift::AtomicBloom::new(n, p).expect("valid benchmark parameters"))
            }),
            // Extra information (no ratio target): scalable filters with the geometric schedule
            // (tightening 0.5: first layer at 0.5%; tightening 0.2: at 0.8%), the counting and
            // Parquet split-block variants.
            empty::<K, _>("sift ScalableBloom geometric", |n, p| {
                // The geometric schedule p·(1-r)·r^i with r = 0.5 (`ScalableBloom::new` before the
                // first-share schedule became the default).
                sift::ScalableBloom::with_options(n, p, 2.0, 0.5).expect("valid benchmark parameters")
            }),
            empty::<K, _>("sift ScalableBloom r=0.2", |n, p| {
                sift::ScalableBloom::with_options(n, p, 2.0, 0.2).expect("valid benchmark parameters")
            }),
            empty::<K, _>("sift CountingBloom", |n, p| {
                sift::CountingBloom::new(n, p).expect("valid benchmark parameters")
            }),
            empty::<K, _>("sift SplitBlockBloom", |n, p| {
                sift::SplitBlockBloom::new(n, p).expect("valid benchmark parameters")
            }),
            // Peers.
            empty::<K, _>("fastbloom", |n, p| {
                // Default hasher (SipHash-1-3), seeded for reproducibility.
                fastbloom::BloomFilter::with_false_pos(p).seed(&1).expected_items(n)
            }),
            empty::<K, _>("fastbloom+foldhash", |n, p| {
                fastbloom::BloomFilter::with_false_pos(p).hasher(foldhash_state()).expected_items(n)
            }),
            empty::<K, _>("fastbloom+foldhash @ sift Bloom m,k", |n, p| {
                // Same number of bits and hashes as sift's Bloom for (n, p): "equal bits and FPR".
                let s = sift::Bloom::new(n, p).expect("valid benchmark parameters");
                let bits = usize::try_from(s.num_bits()).expect("fits in memory");
                fastbloom::BloomFilter::with_num_bits(bits).hasher(foldhash_state()).hashes(s.num_hashes())
            }),
            empty::<K, _>("bloomfilter", |n, p| {
                BloomfilterCrate(
                    bloomfilter::Bloom::new_for_fp_rate_with_seed(n, p, &BLOOMFILTER_SEED)
                        .expect("valid benchmark parameters"),
                )
            }),
            empty::<K, _>("sbbf-rs", Sbbf::new),
            // sbbf-rs sized by the exact FPR of its layout, so that it measures the target FPR (1%
            // in every table) like sift's filters, instead of the ~1.48% of the Parquet formula.
            empty::<K, _>("sbbf-rs @ 1%", Sbbf::at_fpr),
            empty::<K, _>("growable-bloom-filter", |n, p| growable_bloom_filter::GrowableBloom::new(p, n)),
        ]
    }
}

fn foldhash_state() -> foldhash::fast::FixedState {
    foldhash::fast::FixedState::with_seed(1)
}

impl<K: Key, S: std::hash::BuildHasher> Subject<K> for fastbloom::BloomFilter<S> {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.insert(key);
        true
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.contains(key)
    }
}

/// bloomfilter derives its two SipHash keys from the two halves of the seed: they must differ, or
/// its double hashing degenerates (both hashes equal) and the FPR explodes.
const BLOOMFILTER_SEED: [u8; 32] = *b"sift-bench-bloomfilter-seed-0123";

/// `bloomfilter::Bloom<T>` is typed by its item; the newtype fixes `T = K`.
pub struct BloomfilterCrate<K>(bloomfilter::Bloom<K>);

impl<K: Key> Subject<K> for BloomfilterCrate<K> {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.0.set(key);
        true
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.check(key)
    }
}

impl<K: Key> Subject<K> for growable_bloom_filter::GrowableBloom {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        self.insert(key);
        true
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.contains(key)
    }
}

/// sbbf-rs (Parquet's split-block Bloom filter) over a 64-byte-aligned buffer it does not own.
/// Keys are hashed with XXH3-64, seed 0, like sift's default hasher.
pub struct Sbbf {
    filter: sbbf_rs::FilterFn,
    buf: *mut u8,
    layout: std::alloc::Layout,
    buckets: usize,
}

impl Sbbf {
    /// Sized with the Parquet spec's formula for `k = 8` bits in 256-bit blocks:
    /// `m = -8·n / ln(1 - p^(1/8))` bits (9.68 bits/key at 1%), rounded up to whole blocks, not to
    /// a power of two (sbbf-rs maps hashes to blocks by multiply-shift).
    pub fn new(n: usize, fpr: f64) -> Sbbf {
        let bits = -8.0 * n as f64 / (1.0 - fpr.powf(1.0 / 8.0)).ln();
        let buckets = ((bits / (sbbf_rs::BUCKET_SIZE * 8) as f64).ceil() as usize).max(1);
        Sbbf::with_buckets(buckets)
    }

    /// Sized so that the exact FPR of the split-block layout is `fpr`: bucket loads are
    /// Poisson(λ = 256/b) at `b` bits per key, and a non-member finds its 8 bits (one per 32-bit
    /// word, each set with probability `1 - (31/32)^j` in a bucket of `j` items) with probability
    /// `Σ_j P(j)·(1 - (31/32)^j)^8`. At 1% this gives 10.53 bits/key (the Parquet formula, 9.68,
    /// gives 1.46% by the same sum; 1.48% measured).
    pub fn at_fpr(n: usize, fpr: f64) -> Sbbf {
        let (mut lo, mut hi) = (1.0f64, 256.0f64);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if sbbf_fpr(mid) > fpr {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let buckets = ((hi * n as f64 / (sbbf_rs::BUCKET_SIZE * 8) as f64).ceil() as usize).max(1);
        Sbbf::with_buckets(buckets)
    }

    fn with_buckets(buckets: usize) -> Sbbf {
        let layout = std::alloc::Layout::from_size_align(buckets * sbbf_rs::BUCKET_SIZE, sbbf_rs::ALIGNMENT)
            .expect("valid layout");
        // SAFETY: the layout has a non-zero size (buckets ≥ 1).
        let buf = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!buf.is_null(), "allocation of {} bytes failed", layout.size());
        Sbbf { filter: sbbf_rs::FilterFn::new(), buf, layout, buckets }
    }
}

/// The FPR of sbbf-rs's layout at `bits_per_key` (see [`Sbbf::at_fpr`]).
fn sbbf_fpr(bits_per_key: f64) -> f64 {
    let lambda = 256.0 / bits_per_key;
    let (mut p, mut sum) = ((-lambda).exp(), 0.0);
    for j in 0..2000 {
        if j > 0 {
            p *= lambda / j as f64;
        }
        sum += p * (1.0 - (31.0f64 / 32.0).powi(j)).powi(8);
        if j as f64 > lambda && p < 1e-18 {
            break;
        }
    }
    sum
}

impl Drop for Sbbf {
    fn drop(&mut self) {
        // SAFETY: `buf` was allocated in `new` with exactly this layout and is freed only here.
        unsafe { std::alloc::dealloc(self.buf, self.layout) }
    }
}

impl<K: Key> Subject<K> for Sbbf {
    #[inline(always)]
    fn add(&mut self, key: &K) -> bool {
        let h = xxhash_rust::xxh3::xxh3_64(key.bytes().as_ref());
        // SAFETY: `buf` is 64-byte aligned (ALIGNMENT) and holds `buckets * BUCKET_SIZE` bytes,
        // `buckets ≥ 1`, and `&mut self` gives exclusive access.
        unsafe { self.filter.insert(self.buf, self.buckets, h) };
        true
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        let h = xxhash_rust::xxh3::xxh3_64(key.bytes().as_ref());
        // SAFETY: as in `add`; reading needs only shared access.
        unsafe { self.filter.contains(self.buf, self.buckets, h) }
    }
}

/// The comparisons issue 2 asks for. A ratio whose contender is filtered out (`--only`) prints
/// as such.
const RATIOS: &[Ratio] = &[
    ratio("sift BlockedBloom", "sbbf-rs", Metric::QueryMember),
    ratio("sift BlockedBloom", "sbbf-rs", Metric::QueryNonMember),
    ratio("sift BlockedBloom", "fastbloom+foldhash", Metric::QueryMember),
    ratio("sift BlockedBloom", "fastbloom+foldhash", Metric::QueryNonMember),
    ratio("sift BlockedBloom", "sbbf-rs", Metric::Build),
    // The same, against sbbf-rs sized to measure the target FPR (extra information: the issue's
    // targets are the rows above).
    ratio("sift BlockedBloom", "sbbf-rs @ 1%", Metric::QueryMember),
    ratio("sift BlockedBloom", "sbbf-rs @ 1%", Metric::QueryNonMember),
    ratio("sift BlockedBloom", "sbbf-rs @ 1%", Metric::Build),
    ratio("sift BlockedBloom", "sbbf-rs @ 1%", Metric::BitsPerKey),
    ratio("sift Bloom", "fastbloom+foldhash @ sift Bloom m,k", Metric::QueryMember),
    ratio("sift Bloom", "fastbloom+foldhash @ sift Bloom m,k", Metric::QueryNonMember),
    ratio("sift Bloom", "fastbloom+foldhash @ sift Bloom m,k", Metric::Build),
    ratio("sift Bloom", "fastbloom+foldhash", Metric::QueryMember),
    ratio("sift Bloom", "fastbloom+foldhash", Metric::QueryNonMember),
    ratio("sift ScalableBloom", "growable-bloom-filter", Metric::QueryMember),
    ratio("sift ScalableBloom", "growable-bloom-filter", Metric::QueryNonMember),
    ratio("sift ScalableBloom", "growable-bloom-filter", Metric::BitsPerKey),
    ratio("sift AtomicBloom", "sift BlockedBloom", Metric::Build),
];
