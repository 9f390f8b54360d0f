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
//!
//! ## Other systems' formats
//! [`compat::redisbloom`] reproduces RedisBloom's scalable Bloom chain and cuckoo filter bit for
//! bit (hashing, counters, `SCANDUMP` / `LOADCHUNK` chunks), for a server speaking `BF.*` / `CF.*`.
//!
//! ## Traits
//! [`Filter`] (queries), [`Insert`], [`Remove`] and [`Persist`] (the file format); bring them in
//! scope with `use sift::prelude::*;`.

#![deny(missing_docs)]
#![warn(rust_2018_idioms)]

pub mod bits;
pub mod compat;
pub mod error;
pub mod filters;
pub mod format;
pub mod hash;
pub mod math;
mod traits;

pub use error::{Error, FormatError, Result};
pub use filters::bloom::Bloom;
pub use hash::{Digest, HashKind, Hasher};
pub use traits::{Filter, Insert, Persist, Remove};

/// The traits, for `use sift::prelude::*;`.
pub mod prelude {
    pub use crate::traits::{Filter, Insert, Persist, Remove};
}
