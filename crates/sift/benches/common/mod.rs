//! What the Criterion bench (`benches/bloom_family.rs`) and the table program
//! (`examples/bench_table.rs`) share: the key workloads, one adapter per implementation, and the
//! list of contenders and of the ratios that count.
//!
//! ## Adding an implementation
//! * A sift family with the usual API (`T::new(n, fpr)`, `insert`, `contains`, `contains_many`):
//!   add the type to the `sift_subjects!` invocation and a `contender(..)` line to
//!   [`contenders`]. The ratios in [`RATIOS`] that name it fill in by themselves.
//! * A peer crate: implement [`Subject`] for its filter type (or a newtype around it) and add a
//!   `contender(..)` line.
//!
//! Both binaries include this file with `mod common;` / `#[path]`, and each uses only part of it.
#![allow(dead_code)]

use std::hint::black_box;

use sift::prelude::*;

/// False-positive rate of every workload (from the issue).
pub const FPR: f64 = 0.01;

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

mod keys;
pub use keys::*;

// ---------------------------------------------------------------------------------------------
// Adapters
// ---------------------------------------------------------------------------------------------

/// One filter implementation, seen through the two operations every workload needs.
pub trait Subject<K: Key> {
    /// Inserts one key.
    fn add(&mut self, key: &K);
    /// Whether the filter may contain `key`.
    fn has(&self, key: &K) -> bool;
}

/// Type-erased filter: the loops are monomorphised inside, so the virtual call is paid once per
/// batch, never per key.
pub trait Built<K> {
    /// Inserts every key, one call per key.
    fn insert_all(&mut self, keys: &[K]);
    /// Number of keys reported present, one call per key.
    fn count_hits(&self, keys: &[K]) -> usize;
}

impl<K: Key, S: Subject<K>> Built<K> for S {
    #[inline(never)]
    fn insert_all(&mut self, keys: &[K]) {
        for k in keys {
            self.add(black_box(k));
        }
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

/// An implementation under test: a name and how to make an empty filter for `n` keys at `fpr`.
pub struct Contender<K> {
    /// Row name in tables and Criterion ids.
    pub name: &'static str,
    /// Makes an empty filter sized for `(n, fpr)`.
    pub make: Box<dyn Fn(usize, f64) -> Box<dyn Built<K>>>,
}

/// A [`Contender`] from a constructor.
pub fn contender<K: Key, S: Subject<K> + 'static>(
    name: &'static str,
    make: impl Fn(usize, f64) -> S + 'static,
) -> Contender<K> {
    Contender { name, make: Box::new(move |n, p| Box::new(make(n, p)) as Box<dyn Built<K>>) }
}

/// sift's families all have the same API, so one macro adapts them all, for both the per-key
/// workloads ([`Subject`]) and the batch experiment ([`BatchSubject`]).
macro_rules! sift_subjects {
    ($($t:ty),* $(,)?) => {$(
        impl<K: Key> Subject<K> for $t {
            #[inline(always)]
            fn add(&mut self, key: &K) {
                self.insert(key.bytes());
            }
            #[inline(always)]
            fn has(&self, key: &K) -> bool {
                self.contains(key.bytes())
            }
        }

        impl BatchSubject for $t {
            fn make(n: usize, fpr: f64) -> Self {
                <$t>::new(n, fpr).expect("valid benchmark parameters")
            }
            fn insert_batch(&mut self, keys: &[[u8; 8]]) {
                self.insert_many(keys);
            }
            fn count_single(&self, keys: &[[u8; 8]]) -> usize {
                let mut hits = 0usize;
                for k in keys {
                    hits += self.contains(black_box(k)) as usize;
                }
                hits
            }
            fn count_batch(&self, keys: &[[u8; 8]]) -> usize {
                self.contains_many(black_box(keys)).into_iter().filter(|&b| b).count()
            }
            fn bytes(&self) -> usize {
                self.size_in_bytes()
            }
        }
    )*};
}

/// `AtomicBloom` filled through its shared insert (`&self`). Through `&mut self` (the macro's
/// impl, used by the batch experiment) it takes the exclusive path with plain stores instead.
pub struct SharedAtomic(sift::AtomicBloom);

impl<K: Key> Subject<K> for SharedAtomic {
    #[inline(always)]
    fn add(&mut self, key: &K) {
        sift::AtomicBloom::insert(&self.0, key.bytes());
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.contains(key.bytes())
    }
}

// The sift families under test. Add each new family here and in `contenders`/`batch_contenders`.
sift_subjects!(
    sift::Bloom,
    sift::BlockedBloom,
    sift::ScalableBloom,
    sift::AtomicBloom,
    sift::CountingBloom,
    sift::SplitBlockBloom,
);

/// Every implementation, in table order. sift's families first, then the peers.
pub fn contenders<K: Key>() -> Vec<Contender<K>> {
    vec![
        // sift's families (one line each).
        contender::<K, _>("sift Bloom", |n, p| sift::Bloom::new(n, p).expect("valid benchmark parameters")),
        contender::<K, _>("sift BlockedBloom", |n, p| {
            sift::BlockedBloom::new(n, p).expect("valid benchmark parameters")
        }),
        contender::<K, _>("sift ScalableBloom", |n, p| {
            sift::ScalableBloom::new(n, p).expect("valid benchmark parameters")
        }),
        // The "AtomicBloom insert on one thread": the shared insert (`&self`, locked
        // `fetch_or`s), which is what many threads would call.
        contender::<K, _>("sift AtomicBloom", |n, p| {
            SharedAtomic(sift::AtomicBloom::new(n, p).expect("valid benchmark parameters"))
        }),
        // Extra information (no ratio target): scalable filters with the geometric schedule
        // (tightening 0.5: first layer at 0.5%; tightening 0.2: at 0.8%), the counting and
        // Parquet split-block variants.
        contender::<K, _>("sift ScalableBloom geometric", |n, p| {
            // The geometric schedule p·(1-r)·r^i with r = 0.5 (`ScalableBloom::new` before the
            // first-share schedule became the default).
            sift::ScalableBloom::with_options(n, p, 2.0, 0.5).expect("valid benchmark parameters")
        }),
        contender::<K, _>("sift ScalableBloom r=0.2", |n, p| {
            sift::ScalableBloom::with_options(n, p, 2.0, 0.2).expect("valid benchmark parameters")
        }),
        contender::<K, _>("sift CountingBloom", |n, p| {
            sift::CountingBloom::new(n, p).expect("valid benchmark parameters")
        }),
        contender::<K, _>("sift SplitBlockBloom", |n, p| {
            sift::SplitBlockBloom::new(n, p).expect("valid benchmark parameters")
        }),
        // Peers.
        contender::<K, _>("fastbloom", |n, p| {
            // Default hasher (SipHash-1-3), seeded for reproducibility.
            fastbloom::BloomFilter::with_false_pos(p).seed(&1).expected_items(n)
        }),
        contender::<K, _>("fastbloom+foldhash", |n, p| {
            fastbloom::BloomFilter::with_false_pos(p).hasher(foldhash_state()).expected_items(n)
        }),
        contender::<K, _>("fastbloom+foldhash @ sift Bloom m,k", |n, p| {
            // Same number of bits and hashes as sift's Bloom for (n, p): "equal bits and FPR".
            let s = sift::Bloom::new(n, p).expect("valid benchmark parameters");
            let bits = usize::try_from(s.num_bits()).expect("fits in memory");
            fastbloom::BloomFilter::with_num_bits(bits).hasher(foldhash_state()).hashes(s.num_hashes())
        }),
        contender::<K, _>("bloomfilter", |n, p| {
            BloomfilterCrate(
                bloomfilter::Bloom::new_for_fp_rate_with_seed(n, p, &BLOOMFILTER_SEED)
                    .expect("valid benchmark parameters"),
            )
        }),
        contender::<K, _>("sbbf-rs", Sbbf::new),
        // sbbf-rs sized by the exact FPR of its layout, so that it measures the target FPR (1%
        // in every table) like sift's filters, instead of the ~1.48% of the Parquet formula.
        contender::<K, _>("sbbf-rs @ 1%", Sbbf::at_fpr),
        contender::<K, _>("growable-bloom-filter", |n, p| growable_bloom_filter::GrowableBloom::new(p, n)),
    ]
}

fn foldhash_state() -> foldhash::fast::FixedState {
    foldhash::fast::FixedState::with_seed(1)
}

impl<K: Key, S: std::hash::BuildHasher> Subject<K> for fastbloom::BloomFilter<S> {
    #[inline(always)]
    fn add(&mut self, key: &K) {
        self.insert(key);
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
    fn add(&mut self, key: &K) {
        self.0.set(key);
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        self.0.check(key)
    }
}

impl<K: Key> Subject<K> for growable_bloom_filter::GrowableBloom {
    #[inline(always)]
    fn add(&mut self, key: &K) {
        self.insert(key);
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
    fn add(&mut self, key: &K) {
        let h = xxhash_rust::xxh3::xxh3_64(key.bytes().as_ref());
        // SAFETY: `buf` is 64-byte aligned (ALIGNMENT) and holds `buckets * BUCKET_SIZE` bytes,
        // `buckets ≥ 1`, and `&mut self` gives exclusive access.
        unsafe { self.filter.insert(self.buf, self.buckets, h) };
    }
    #[inline(always)]
    fn has(&self, key: &K) -> bool {
        let h = xxhash_rust::xxh3::xxh3_64(key.bytes().as_ref());
        // SAFETY: as in `add`; reading needs only shared access.
        unsafe { self.filter.contains(self.buf, self.buckets, h) }
    }
}

// ---------------------------------------------------------------------------------------------
// Batch experiment: `contains_many` against one `contains` per key, on a large filter
// ---------------------------------------------------------------------------------------------

/// A sift filter in the batch experiment (u64 keys as their 8-byte little-endian image).
pub trait BatchSubject: Sized {
    /// An empty filter for `n` keys at `fpr`.
    fn make(n: usize, fpr: f64) -> Self;
    /// Bulk insert (the fastest way to fill a large filter; not what is measured).
    fn insert_batch(&mut self, keys: &[[u8; 8]]);
    /// Hits counted with one `contains` per key.
    fn count_single(&self, keys: &[[u8; 8]]) -> usize;
    /// Hits counted with `contains_many`.
    fn count_batch(&self, keys: &[[u8; 8]]) -> usize;
    /// Memory of the filter.
    fn bytes(&self) -> usize;
}

/// A sift family in the batch experiment.
pub struct BatchContender {
    /// Row name.
    pub name: &'static str,
    /// Builds a filter holding keys `0..n` and returns it type-erased.
    pub build: fn(usize, f64) -> Box<dyn BatchBuilt>,
}

/// A built filter of the batch experiment.
pub trait BatchBuilt {
    /// See [`BatchSubject::count_single`].
    fn count_single(&self, keys: &[[u8; 8]]) -> usize;
    /// See [`BatchSubject::count_batch`].
    fn count_batch(&self, keys: &[[u8; 8]]) -> usize;
    /// See [`BatchSubject::bytes`].
    fn bytes(&self) -> usize;
}

impl<T: BatchSubject> BatchBuilt for T {
    fn count_single(&self, keys: &[[u8; 8]]) -> usize {
        BatchSubject::count_single(self, keys)
    }
    fn count_batch(&self, keys: &[[u8; 8]]) -> usize {
        BatchSubject::count_batch(self, keys)
    }
    fn bytes(&self) -> usize {
        BatchSubject::bytes(self)
    }
}

/// Makes a filter of `n` u64 members, inserted in chunks so that the keys never all exist at once
/// (a 1-billion-key run would otherwise need 8 GB of keys).
pub fn build_batch<T: BatchSubject + 'static>(n: usize, fpr: f64) -> Box<dyn BatchBuilt> {
    let mut f = T::make(n, fpr);
    let mut chunk = Vec::with_capacity(1 << 20);
    let mut i = 0u64;
    while i < n as u64 {
        let end = (i + (1 << 20)).min(n as u64);
        chunk.clear();
        chunk.extend((i..end).map(|j| u64::nth(j).bytes()));
        f.insert_batch(&chunk);
        i = end;
    }
    Box::new(f)
}

/// The sift families in the batch experiment. Add each new family here too.
pub fn batch_contenders() -> Vec<BatchContender> {
    vec![
        BatchContender { name: "sift Bloom", build: build_batch::<sift::Bloom> },
        BatchContender { name: "sift BlockedBloom", build: build_batch::<sift::BlockedBloom> },
        BatchContender { name: "sift AtomicBloom", build: build_batch::<sift::AtomicBloom> },
    ]
}

// ---------------------------------------------------------------------------------------------
// Ratios that count (from the issue)
// ---------------------------------------------------------------------------------------------

/// A measured quantity of one contender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Bits of memory per key.
    BitsPerKey,
    /// Build time (create + insert every key), ns per key.
    Build,
    /// Query time for members, ns per key.
    QueryMember,
    /// Query time for non-members, ns per key.
    QueryNonMember,
}

impl Metric {
    /// Short label.
    pub fn label(self) -> &'static str {
        match self {
            Metric::BitsPerKey => "bits/key",
            Metric::Build => "build",
            Metric::QueryMember => "query member",
            Metric::QueryNonMember => "query non-member",
        }
    }
}

/// `numerator / denominator` of one metric between two contenders (by name).
pub struct Ratio {
    /// The sift contender.
    pub sift: &'static str,
    /// The contender it is compared with.
    pub other: &'static str,
    /// What is compared.
    pub metric: Metric,
}

const fn ratio(sift: &'static str, other: &'static str, metric: Metric) -> Ratio {
    Ratio { sift, other, metric }
}

/// The comparisons the issue asks for. A ratio whose contender is not in this build is printed as
/// pending; it fills in once that family is added to [`contenders`] under the name used here.
pub const RATIOS: &[Ratio] = &[
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
