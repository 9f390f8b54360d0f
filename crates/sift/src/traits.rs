//! The small traits every filter implements, split by capability.
//!
//! * [`Filter`]: membership queries and reporting (every family).
//! * [`Insert`]: adding items (dynamic families).
//! * [`Remove`]: deleting items (counting Bloom, cuckoo, quotient).
//! * [`Persist`]: the binary format (`to_bytes` / `from_bytes`).
//!
//! Items are hashed once, at the trait boundary, by the filter's own [`Hasher`]; the families work
//! on the resulting [`Digest`]. Callers who hash themselves use the `*_hash(u64)` methods: for a
//! filter using a 64-bit hash, `f.contains(item) == f.contains_hash(f.hasher().hash64(item))`.

use crate::error::Result;
use crate::hash::{Digest, Hasher};

/// How many items the batch methods hash ahead of the probe they are working on. Large enough to
/// cover a DRAM miss (~80-100 ns) at a few ns per probe, small enough to stay in registers/L1.
pub(crate) const BATCH_AHEAD: usize = 16;

/// Membership queries: the capability every filter has.
pub trait Filter {
    /// The hash function (and seed) this filter applies to items.
    fn hasher(&self) -> Hasher;

    /// Whether the item with this digest may be in the set (`false` means certainly not).
    fn contains_digest(&self, digest: Digest) -> bool;

    /// Whether `item` may be in the set. `false` is certain; `true` is wrong with probability
    /// about [`Filter::expected_fpr`].
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool
    where
        Self: Sized,
    {
        self.contains_digest(self.hasher().digest(item.as_ref()))
    }

    /// Whether the item whose 64-bit hash is `hash` may be in the set.
    #[inline]
    fn contains_hash(&self, hash: u64) -> bool {
        self.contains_digest(Digest::from_u64(hash))
    }

    /// Queries many digests; `out[i]` is set to the answer for `digests[i]`.
    ///
    /// Filters much bigger than the CPU cache override this to prefetch ahead, so that several
    /// memory accesses are in flight at once instead of one.
    ///
    /// # Panics
    /// If `out.len() != digests.len()`.
    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        assert_eq!(digests.len(), out.len(), "one output slot per digest");
        for (d, o) in digests.iter().zip(out.iter_mut()) {
            *o = self.contains_digest(*d);
        }
    }

    /// Queries many items at once; faster per item than [`Filter::contains`] on large filters.
    fn contains_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Vec<bool>
    where
        Self: Sized,
    {
        let hasher = self.hasher();
        let mut out = vec![false; items.len()];
        let mut digests = [Digest::default(); 256];
        for (chunk, out) in items.chunks(256).zip(out.chunks_mut(256)) {
            for (d, item) in digests.iter_mut().zip(chunk) {
                *d = hasher.digest(item.as_ref());
            }
            self.contains_digests(&digests[..chunk.len()], out);
        }
        out
    }

    /// Number of items inserted (for Bloom filters: inserts that changed the filter).
    fn len(&self) -> usize;

    /// Whether no item was inserted.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Memory held by the filter's storage, in bytes.
    fn size_in_bytes(&self) -> usize;

    /// The false-positive rate the filter is expected to have now, from its parameters and the
    /// number of items in it.
    fn expected_fpr(&self) -> f64;
}

/// Adding items.
pub trait Insert: Filter {
    /// Inserts the item with this digest; returns `true` if the filter did not already report it
    /// as present.
    fn insert_digest(&mut self, digest: Digest) -> bool;

    /// Inserts `item`; returns `true` if the filter did not already report it as present.
    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool
    where
        Self: Sized,
    {
        let d = self.hasher().digest(item.as_ref());
        self.insert_digest(d)
    }

    /// Inserts the item whose 64-bit hash is `hash`.
    #[inline]
    fn insert_hash(&mut self, hash: u64) -> bool {
        self.insert_digest(Digest::from_u64(hash))
    }

    /// Inserts many digests; returns how many were new. Large filters override this to prefetch.
    fn insert_digests(&mut self, digests: &[Digest]) -> usize {
        digests.iter().filter(|d| self.insert_digest(**d)).count()
    }

    /// Inserts many items; returns how many were new.
    fn insert_many<T: AsRef<[u8]>>(&mut self, items: &[T]) -> usize
    where
        Self: Sized,
    {
        let hasher = self.hasher();
        let mut digests = [Digest::default(); 256];
        let mut new = 0;
        for chunk in items.chunks(256) {
            for (d, item) in digests.iter_mut().zip(chunk) {
                *d = hasher.digest(item.as_ref());
            }
            new += self.insert_digests(&digests[..chunk.len()]);
        }
        new
    }
}

/// Deleting items.
///
/// Removing an item that was never inserted can remove a different item that shares its hash
/// positions (and create a false negative for it); only remove what you inserted.
pub trait Remove: Filter {
    /// Removes the item with this digest; returns `true` if it was reported present and removed.
    fn remove_digest(&mut self, digest: Digest) -> bool;

    /// Removes `item`; `false` if the filter did not report it as present.
    #[inline]
    fn remove<T: AsRef<[u8]>>(&mut self, item: T) -> bool
    where
        Self: Sized,
    {
        let d = self.hasher().digest(item.as_ref());
        self.remove_digest(d)
    }

    /// Removes the item whose 64-bit hash is `hash`.
    #[inline]
    fn remove_hash(&mut self, hash: u64) -> bool {
        self.remove_digest(Digest::from_u64(hash))
    }
}

/// The stable binary format (`docs/FORMAT.md`).
pub trait Persist: Sized {
    /// The kind code written in the header.
    const KIND: crate::format::FilterKind;

    /// Encodes the filter: header, parameters, payload and CRC32C.
    fn to_bytes(&self) -> Vec<u8>;

    /// Decodes and verifies a filter written by [`Persist::to_bytes`]. Truncated, corrupted or
    /// foreign bytes, another kind and a newer format version are errors, never a panic.
    fn from_bytes(bytes: &[u8]) -> Result<Self>;

    /// Writes the bytes of [`Persist::to_bytes`] to `w` (not flushed). The default encodes the
    /// whole file in memory first; the families with large payloads ([`crate::BlockedBloom`],
    /// [`crate::AtomicBloom`]) stream it through [`crate::format::StreamEncoder`] instead, so
    /// saving a filter does not hold a second copy of it in memory.
    fn write_to<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        w.write_all(&self.to_bytes())
    }
}
