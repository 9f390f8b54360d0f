//! Construction of static filters: built once from a complete set, queried many times, never
//! updated ([`crate::Xor8`], [`crate::BinaryFuse8`], [`crate::BinaryFuse16`], [`crate::Gcs`]).
//!
//! These families do not implement [`crate::Insert`]: their layout is solved for the whole set at
//! once (peeling a hypergraph, sorting and compressing), which is what makes them smaller than any
//! dynamic filter. Rebuild to change the set.
//!
//! As everywhere in `sift`, an item is hashed once by the filter's [`Hasher`] and the family works
//! on the 64-bit hash `Digest::h1`, so `F::build_from_hashes` with `hasher.hash64(item)` for every
//! item builds the same filter as `F::build_with_hasher(items, hasher)`.

use crate::error::{Error, Result};
use crate::hash::Hasher;
use crate::traits::Filter;

/// A filter built once from a whole set of items.
pub trait StaticFilter: Filter + Sized {
    /// Builds the filter of `items` with the family's default hasher (XXH3-64, seed 0).
    /// Duplicate items are allowed; an empty slice gives a filter that contains nothing.
    fn build<T: AsRef<[u8]>>(items: &[T]) -> Result<Self> {
        Self::build_with_hasher(items, Hasher::default())
    }

    /// Builds the filter of `items` hashed by `hasher`.
    fn build_with_hasher<T: AsRef<[u8]>>(items: &[T], hasher: Hasher) -> Result<Self> {
        let mut hashes: Vec<u64> = Vec::new();
        hashes
            .try_reserve_exact(items.len())
            .map_err(|_| Error::OutOfMemory { bytes: items.len().saturating_mul(8) })?;
        hashes.extend(items.iter().map(|i| hasher.hash64(i.as_ref())));
        Self::build_from_hashes_with_hasher(&hashes, hasher)
    }

    /// Builds the filter from 64-bit item hashes computed by the default hasher (or any
    /// well-distributed 64-bit hash, if the caller only ever queries with
    /// [`Filter::contains_hash`]). Duplicate hashes are allowed.
    fn build_from_hashes(hashes: &[u64]) -> Result<Self> {
        Self::build_from_hashes_with_hasher(hashes, Hasher::default())
    }

    /// Builds the filter from 64-bit hashes that `hasher` produced (`hasher.hash64(item)`);
    /// the hasher is recorded so that [`Filter::contains`] hashes queries the same way.
    fn build_from_hashes_with_hasher(hashes: &[u64], hasher: Hasher) -> Result<Self>;
}
