//! The small traits every filter implements, split by capability.
//!
//! * [`Filter`]: membership queries and reporting (every family).
//! * [`Insert`]: adding items (dynamic families).
//! * [`Remove`]: deleting items (counting Bloom, cuckoo, quotient).
//! * [`Persist`]: the binary format (`to_bytes` / `from_bytes`).
//! * [`Timed`]: inserts and queries on the caller's clock, for filters whose items expire after
//!   a time ([`crate::TimeLimitedBloom`]).
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

/// Inserts and queries on the caller's clock, for filters whose items expire after a time
/// ([`crate::TimeLimitedBloom`]).
///
/// The filter never reads a clock: every operation that can move time takes `now`, in whatever
/// unit the filter's time-to-live was given in (milliseconds, say). The filter's clock is the
/// largest `now` it has been given; a smaller `now` (time going backwards, a late replica, a
/// clock step) acts as that clock, so an item is never forgotten early and the state depends
/// only on the sequence of operations and their arguments: replaying the same calls with the
/// same `now` values gives the same filter, bit for bit, which is what replicas and tests need.
///
/// Why a trait of its own rather than [`Insert`]: an insert without a time would have to guess
/// one (the last `now`, freezing time for callers who forget to pass it, or the system clock,
/// which breaks determinism). The [`Filter`] queries of such a filter answer at its clock.
pub trait Timed: Filter {
    /// The filter's clock: the largest `now` given to it so far (0 before any).
    fn clock(&self) -> u64;

    /// Moves the clock to `now` (no-op if `now` is not later): generations started by the time
    /// that passed are started and slices whose items all left the window are retired. The
    /// work is bounded by the number of slices, however long the gap.
    fn advance(&mut self, now: u64);

    /// Inserts the item with this digest at time `now` (after [`Timed::advance`]`(now)`);
    /// returns `true` if the filter did not already report it as present.
    fn insert_digest_at(&mut self, digest: Digest, now: u64) -> bool;

    /// Whether the item with this digest may have been inserted within the window that ends at
    /// `now`, without moving the clock (a `now` before the clock answers at the clock).
    fn contains_digest_at(&self, digest: Digest, now: u64) -> bool;

    /// Inserts `item` at time `now`; returns `true` if the filter did not already report it.
    #[inline]
    fn insert_at<T: AsRef<[u8]>>(&mut self, item: T, now: u64) -> bool
    where
        Self: Sized,
    {
        let d = self.hasher().digest(item.as_ref());
        self.insert_digest_at(d, now)
    }

    /// Whether `item` may have been inserted within the window that ends at `now`.
    #[inline]
    fn contains_at<T: AsRef<[u8]>>(&self, item: T, now: u64) -> bool
    where
        Self: Sized,
    {
        self.contains_digest_at(self.hasher().digest(item.as_ref()), now)
    }

    /// Inserts the item whose 64-bit hash is `hash` at time `now`.
    #[inline]
    fn insert_hash_at(&mut self, hash: u64, now: u64) -> bool {
        self.insert_digest_at(Digest::from_u64(hash), now)
    }

    /// Inserts many items at time `now`; returns how many were new.
    fn insert_many_at<T: AsRef<[u8]>>(&mut self, items: &[T], now: u64) -> usize
    where
        Self: Sized,
    {
        let hasher = self.hasher();
        items.iter().filter(|i| self.insert_digest_at(hasher.digest(i.as_ref()), now)).count()
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
