//! # sift: have we seen this key before?
//!
//! Probabilistic membership filters for huge sets in little memory: every family of the field
//! behind one small trait API, a parameter planner and a stable, versioned binary format.
//!
//! ```
//! use sift::prelude::*;
//! use sift::Bloom;
//!
//! let mut seen = Bloom::new(1_000_000, 0.01)?;
//! assert!(seen.insert("https://example.com/"));
//! assert!(seen.contains("https://example.com/"));
//! assert!(!seen.contains("https://example.com/other")); // certainly never inserted (p ≈ 99%)
//! let bytes = seen.to_bytes();
//! assert_eq!(Bloom::from_bytes(&bytes)?, seen);
//! # Ok::<(), sift::Error>(())
//! ```
//!
//! ## Which filter when
//!
//! | family | bits/key at 1% | insert | delete | grows | best for |
//! |---|---|---|---|---|---|
//! | [`Bloom`] | 9.6 | yes | no | no | simple, set algebra (union, intersect) |
//! | [`Cuckoo`] | 12.6 | yes | yes | no | deletes and duplicate counts, fast lookups (2 buckets) |
//! | [`Quotient`] | 9.7 | yes | yes | ×2 | deletes, counts, merge and resize from stored hashes |
//! | [`CountingBloom`] | 38.3 (4-bit counters) | yes | yes | no | deletions with Bloom probing; count-min estimates |
//! | [`SplitBlockBloom`] | 10.5 (9.7 to 19.4 in Parquet's power-of-two sizes) | yes | no | no | Apache Parquet column filters, bit-compatible |
//! | [`BlockedBloom`] | 9.9 | yes | no | no | fastest queries (one cache line, AVX2), set algebra |
//! | [`AtomicBloom`] | 9.9 | yes, from many threads | no | no | concurrent inserts without locks (same bits and file as `BlockedBloom`) |
//! | [`ScalableBloom`] | 10.5 (26.6 at 10×, 30.1 at 100× growth; geometric schedule 11.6 / 23.3 / 26.6) | yes | no | yes | unknown set size, FPR bound kept while growing |
//! | [`ScalableCuckoo`] | 12.6 while in its first table, more as it grows (later tables use 16-bit fingerprints) | yes | yes | up to 63× at 1% | deletes and counts when the set size is uncertain |
//! | [`AgingBloom`] | 25.3 per window item (36.9 at 0.1%) | yes | no: items expire | no | a sliding window by count: the last `N` insertions always present, older ones answer like never-seen items |
//! | [`TimeLimitedBloom`] | 33.6 per item per TTL (sized for 1.25× the rate) | yes, at the caller's `now` ([`Timed`]) | no: items expire | no | a sliding window by time ("seen in the last 24 hours"), deterministic for replicas |
//! | [`BinaryFuse8`] | 9.0 (p = 0.39%) | build once | no | no | static sets: smallest fast filter, 3 loads per query |
//! | [`BinaryFuse16`] | 18.0 (p = 0.0015%) | build once | no | no | static sets at a low FPR |
//! | [`Xor8`] | 9.84 (p = 0.39%) | build once | no | no | static sets; compatibility (prefer binary fuse) |
//! | [`Gcs`] | 8.6 (p = 1/128) | build once | no | no | static sets on disk or the wire (BIP-158); slow queries |
//!
//! [`recommend()`] picks a family and its parameters from what you need (static, deletes, growth,
//! memory).
//!
//! ## Other systems' formats
//! [`compat::redisbloom`] reproduces RedisBloom's scalable Bloom chain and cuckoo filter bit for
//! bit (hashing, counters, `SCANDUMP` / `LOADCHUNK` chunks), for a server speaking `BF.*` / `CF.*`,
//! and its other three types for `CMS.*`, `TOPK.*` and `TDIGEST.*`: the Count-Min Sketch
//! (Cormode–Muthukrishnan), the HeavyKeeper Top-K (Gong et al.) and the merging t-digest
//! (Dunning), with the same hashing and arithmetic, RedisBloom's RDB encodings of all five types,
//! and the reply text of doubles.
//!
//! ## Traits
//! [`Filter`] (queries), [`Insert`], [`Remove`] and [`Persist`] (the file format), and [`Timed`]
//! for filters on the caller's clock; bring them in scope with `use sift::prelude::*;`. Static
//! filters are built once from a set through [`StaticFilter`] (`build`, `build_from_hashes`).
//! [`AnyFilter`] holds a filter of any kind: it reads any sift file by the kind its header names
//! ([`AnyFilter::from_bytes`]) and dispatches the traits' methods, refusing what a kind cannot do
//! with an error that names the kind ([`Error::Static`], [`Error::CannotRemove`]).

#![deny(missing_docs)]
#![warn(rust_2018_idioms)]

mod any;
pub mod bits;
pub mod compat;
pub mod error;
pub mod filters;
pub mod format;
pub mod hash;
mod kind;
pub mod math;
pub mod plan;
pub mod recommend;
mod simd;
mod traits;
mod traits_static;

pub use any::AnyFilter;
pub use error::{Error, FormatError, Result};
pub use filters::aging::AgingBloom;
pub use filters::atomic_bloom::AtomicBloom;
pub use filters::blocked_bloom::BlockedBloom;
pub use filters::blocked_bloom::Stripe;
pub use filters::bloom::Bloom;
pub use filters::counting_bloom::CountingBloom;
pub use filters::cuckoo::Cuckoo;
pub use filters::quotient::Quotient;
pub use filters::scalable_bloom::ScalableBloom;
pub use filters::scalable_cuckoo::ScalableCuckoo;
pub use filters::split_block::SplitBlockBloom;
pub use filters::time_limited::TimeLimitedBloom;
pub use hash::{Digest, HashKind, Hasher};
pub use traits::{Filter, Insert, Persist, Remove, Timed};

// Static filters (built once from a set) and the family planner.
pub use filters::binary_fuse::{Arity, BinaryFuse, BinaryFuse16, BinaryFuse8};
pub use filters::gcs::{Gcs, GcsParams};
pub use filters::xor::Xor8;
pub use recommend::{recommend, Needs, Recommendation};
pub use traits_static::StaticFilter;

/// The traits, for `use sift::prelude::*;`.
pub mod prelude {
    pub use crate::traits::{Filter, Insert, Persist, Remove, Timed};
    pub use crate::traits_static::StaticFilter;
}
