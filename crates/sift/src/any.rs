//! A filter of any kind the file format knows, behind one enum: read any sift file by the kind
//! in its header, write it back, and query, insert, remove and describe it without naming the
//! family.
//!
//! Callers with needs of their own (a server's replies, a command line's messages) match on the
//! variants for those and leave the rest to these methods.

use crate::compat::guava::GuavaBloom;
use crate::compat::redisbloom::{BloomChain, CuckooFilter};
use crate::error::{Error, FormatError, Result};
use crate::format::{self, FilterKind};
use crate::hash::{Digest, Hasher};
use crate::traits::{Filter, Insert, Persist, Remove, Timed};
use crate::{
    math, AgingBloom, BinaryFuse16, BinaryFuse8, BlockedBloom, Bloom, CountingBloom, Cuckoo, Gcs, Quotient,
    ScalableBloom, ScalableCuckoo, SplitBlockBloom, TimeLimitedBloom, Xor8,
};

/// A filter of any kind a sift file can hold (one variant per [`FilterKind`]).
///
/// ```
/// use sift::prelude::*;
/// use sift::{AnyFilter, Cuckoo};
///
/// let mut cuckoo = Cuckoo::new(1000, 0.01)?;
/// cuckoo.insert("a");
/// let mut any = AnyFilter::from_bytes(&cuckoo.to_bytes())?;
/// assert_eq!(any.kind(), sift::format::FilterKind::Cuckoo);
/// assert!(any.contains(b"a"));
/// assert!(any.remove(b"a")?);
/// assert!(!any.contains(b"a"));
/// # Ok::<(), sift::Error>(())
/// ```
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum AnyFilter {
    /// Classic Bloom ([`FilterKind::Bloom`]).
    Bloom(Bloom),
    /// Blocked Bloom ([`FilterKind::BlockedBloom`], also what [`crate::AtomicBloom`] writes).
    Blocked(BlockedBloom),
    /// Parquet-compatible split-block Bloom ([`FilterKind::SplitBlockBloom`]).
    SplitBlock(SplitBlockBloom),
    /// Counting Bloom ([`FilterKind::CountingBloom`]).
    Counting(CountingBloom),
    /// Scalable Bloom, a growing chain of blocked layers ([`FilterKind::ScalableBloom`]).
    Scalable(ScalableBloom),
    /// Age-partitioned Bloom, a sliding window by count ([`FilterKind::AgingBloom`]).
    Aging(AgingBloom),
    /// Time-limited Bloom, a sliding window by time ([`FilterKind::TimeLimitedBloom`]).
    TimeLimited(TimeLimitedBloom),
    /// Cuckoo ([`FilterKind::Cuckoo`]).
    Cuckoo(Cuckoo),
    /// Scalable cuckoo, a growing chain of cuckoo tables ([`FilterKind::ScalableCuckoo`]).
    ScalableCuckoo(ScalableCuckoo),
    /// Rank-and-select quotient filter ([`FilterKind::Quotient`]).
    Quotient(Quotient),
    /// Xor filter, 8-bit fingerprints, static ([`FilterKind::Xor8`]).
    Xor8(Xor8),
    /// Binary fuse, 8-bit fingerprints, static ([`FilterKind::BinaryFuse8`]).
    Fuse8(BinaryFuse8),
    /// Binary fuse, 16-bit fingerprints, static ([`FilterKind::BinaryFuse16`]).
    Fuse16(BinaryFuse16),
    /// Golomb-coded set, static ([`FilterKind::Gcs`]).
    Gcs(Gcs),
    /// RedisBloom's scalable Bloom chain ([`FilterKind::RedisBloomChain`]).
    RedisBf(BloomChain),
    /// RedisBloom's cuckoo filter ([`FilterKind::RedisBloomCuckoo`]).
    RedisCf(CuckooFilter),
    /// Guava's `BloomFilter`, bit for bit ([`FilterKind::Guava`]).
    Guava(GuavaBloom),
}

/// Applies `$body` to the filter inside every variant whose type implements [`Filter`] and
/// [`Persist`] (all but RedisBloom's two), and the two bodies named after those to theirs.
macro_rules! dispatch {
    ($self:expr, $f:ident => $body:expr, RedisBf($b:pat) => $bf:expr, RedisCf($c:pat) => $cf:expr) => {
        match $self {
            AnyFilter::Bloom($f) => $body,
            AnyFilter::Blocked($f) => $body,
            AnyFilter::SplitBlock($f) => $body,
            AnyFilter::Counting($f) => $body,
            AnyFilter::Scalable($f) => $body,
            AnyFilter::Aging($f) => $body,
            AnyFilter::TimeLimited($f) => $body,
            AnyFilter::Cuckoo($f) => $body,
            AnyFilter::ScalableCuckoo($f) => $body,
            AnyFilter::Quotient($f) => $body,
            AnyFilter::Xor8($f) => $body,
            AnyFilter::Fuse8($f) => $body,
            AnyFilter::Fuse16($f) => $body,
            AnyFilter::Gcs($f) => $body,
            AnyFilter::Guava($f) => $body,
            AnyFilter::RedisBf($b) => $bf,
            AnyFilter::RedisCf($c) => $cf,
        }
    };
}

/// Applies `$body` to the filter inside every variant (all implement [`Persist`]).
macro_rules! persist {
    ($self:expr, $f:ident => $body:expr) => {
        dispatch!($self, $f => $body, RedisBf($f) => $body, RedisCf($f) => $body)
    };
}

impl AnyFilter {
    /// Decodes a sift file of any kind: the header names the kind, whose own verified decoder
    /// reads the rest. Truncated, corrupted or foreign bytes, a kind code this build does not
    /// know ([`FormatError::UnknownKind`]) and a newer format version are errors, never a panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<AnyFilter> {
        let raw = format::decode(bytes)?;
        let kind = raw.kind().ok_or(FormatError::UnknownKind(raw.kind_code()))?;
        Ok(match kind {
            FilterKind::Bloom => AnyFilter::Bloom(Bloom::from_bytes(bytes)?),
            FilterKind::BlockedBloom => AnyFilter::Blocked(BlockedBloom::from_bytes(bytes)?),
            FilterKind::SplitBlockBloom => AnyFilter::SplitBlock(SplitBlockBloom::from_bytes(bytes)?),
            FilterKind::CountingBloom => AnyFilter::Counting(CountingBloom::from_bytes(bytes)?),
            FilterKind::ScalableBloom => AnyFilter::Scalable(ScalableBloom::from_bytes(bytes)?),
            FilterKind::AgingBloom => AnyFilter::Aging(AgingBloom::from_bytes(bytes)?),
            FilterKind::TimeLimitedBloom => AnyFilter::TimeLimited(TimeLimitedBloom::from_bytes(bytes)?),
            FilterKind::Cuckoo => AnyFilter::Cuckoo(Cuckoo::from_bytes(bytes)?),
            FilterKind::ScalableCuckoo => AnyFilter::ScalableCuckoo(ScalableCuckoo::from_bytes(bytes)?),
            FilterKind::Quotient => AnyFilter::Quotient(Quotient::from_bytes(bytes)?),
            FilterKind::Xor8 => AnyFilter::Xor8(Xor8::from_bytes(bytes)?),
            FilterKind::BinaryFuse8 => AnyFilter::Fuse8(BinaryFuse8::from_bytes(bytes)?),
            FilterKind::BinaryFuse16 => AnyFilter::Fuse16(BinaryFuse16::from_bytes(bytes)?),
            FilterKind::Gcs => AnyFilter::Gcs(Gcs::from_bytes(bytes)?),
            FilterKind::RedisBloomChain => AnyFilter::RedisBf(BloomChain::from_bytes(bytes)?),
            FilterKind::RedisBloomCuckoo => AnyFilter::RedisCf(CuckooFilter::from_bytes(bytes)?),
            FilterKind::Guava => AnyFilter::Guava(GuavaBloom::from_bytes(bytes)?),
        })
    }

    /// The sift file: the family's own [`Persist::to_bytes`].
    pub fn to_bytes(&self) -> Vec<u8> {
        persist!(self, f => f.to_bytes())
    }

    /// Writes the bytes of [`AnyFilter::to_bytes`] to `w` (not flushed), through the family's
    /// [`Persist::write_to`]: the families with large payloads stream them, without a second
    /// copy of the filter in memory.
    pub fn write_to<W: std::io::Write + ?Sized>(&self, w: &mut W) -> std::io::Result<()> {
        persist!(self, f => Persist::write_to(f, w))
    }

    /// The kind, as the file's header names it.
    pub fn kind(&self) -> FilterKind {
        fn k<P: Persist>(_: &P) -> FilterKind {
            P::KIND
        }
        persist!(self, f => k(f))
    }

    /// The hasher whose digests the filter takes; `None` for the compatibility kinds
    /// (RedisBloom's two and Guava's), which hash raw keys their own way.
    pub fn hasher(&self) -> Option<Hasher> {
        match self {
            AnyFilter::Guava(_) => None,
            _ => dispatch!(self, f => Some(f.hasher()), RedisBf(_) => None, RedisCf(_) => None),
        }
    }

    /// Whether the key with this digest (from [`AnyFilter::hasher`]) may be in the set; `None`
    /// for the kinds without a hasher there.
    pub fn contains_digest(&self, digest: Digest) -> Option<bool> {
        match self {
            AnyFilter::Guava(_) => None,
            _ => {
                dispatch!(self, f => Some(f.contains_digest(digest)), RedisBf(_) => None, RedisCf(_) => None)
            }
        }
    }

    /// Whether the filter is static: built once from the whole set, it takes no inserts.
    pub fn is_static(&self) -> bool {
        matches!(self, AnyFilter::Xor8(_) | AnyFilter::Fuse8(_) | AnyFilter::Fuse16(_) | AnyFilter::Gcs(_))
    }

    /// Whether the filter can remove items (counting Bloom, the cuckoo kinds, quotient).
    pub fn can_remove(&self) -> bool {
        matches!(
            self,
            AnyFilter::Counting(_)
                | AnyFilter::Cuckoo(_)
                | AnyFilter::ScalableCuckoo(_)
                | AnyFilter::Quotient(_)
                | AnyFilter::RedisCf(_)
        )
    }

    /// Whether the filter's members depend on the time of each insert (a window by time, whose
    /// `*_at` methods take the caller's clock).
    pub fn is_timed(&self) -> bool {
        matches!(self, AnyFilter::TimeLimited(_))
    }

    /// Whether `item` may be in the set (`false` is certain). A window by time answers at its
    /// own clock (the latest time it was given); [`AnyFilter::contains_at`] answers at another.
    pub fn contains(&self, item: &[u8]) -> bool {
        dispatch!(self, f => f.contains(item), RedisBf(f) => f.contains(item), RedisCf(f) => f.contains(item))
    }

    /// [`AnyFilter::contains`] at time `now` for a window by time, without moving its clock
    /// ([`Timed::contains_at`]); the other kinds do not depend on the time.
    pub fn contains_at(&self, item: &[u8], now: u64) -> bool {
        match self {
            AnyFilter::TimeLimited(f) => f.contains_at(item, now),
            _ => self.contains(item),
        }
    }

    /// [`AnyFilter::contains`] for each item, batched (the large families prefetch ahead).
    pub fn contains_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Vec<bool> {
        let mut out = Vec::new();
        dispatch!(self, f => out = f.contains_many(items),
            RedisBf(f) => f.contains_many(items, &mut out),
            RedisCf(f) => f.contains_many(items, &mut out));
        out
    }

    /// [`AnyFilter::contains_at`] for each item, batched.
    pub fn contains_many_at<T: AsRef<[u8]>>(&self, items: &[T], now: u64) -> Vec<bool> {
        match self {
            AnyFilter::TimeLimited(f) => items.iter().map(|i| f.contains_at(i, now)).collect(),
            _ => self.contains_many(items),
        }
    }

    /// Inserts `item`: `Ok(true)` if the filter did not report it present before. A window by
    /// time inserts at its own clock ([`AnyFilter::insert_at`] takes the time).
    ///
    /// Errors: [`Error::Static`] for the static kinds; [`Error::Full`] (or another error of
    /// the family) when a fixed-size or capped filter has no room; [`Error::InsertRefused`]
    /// with RedisBloom's reason when one of its filters refuses.
    pub fn insert(&mut self, item: &[u8]) -> Result<bool> {
        let clock = match self {
            AnyFilter::TimeLimited(f) => f.clock(),
            _ => 0,
        };
        self.insert_at(item, clock)
    }

    /// [`AnyFilter::insert`] at time `now` for a window by time ([`Timed::insert_at`]: starts
    /// and retires its slices); the other kinds do not depend on the time.
    pub fn insert_at(&mut self, item: &[u8], now: u64) -> Result<bool> {
        let kind = self.kind();
        let refused = |e: &dyn core::fmt::Display| Error::InsertRefused { kind, reason: e.to_string() };
        match self {
            AnyFilter::Bloom(f) => Ok(f.insert(item)),
            AnyFilter::Blocked(f) => Ok(f.insert(item)),
            AnyFilter::SplitBlock(f) => Ok(f.insert(item)),
            AnyFilter::Counting(f) => Ok(f.insert(item)),
            AnyFilter::Aging(f) => Ok(f.insert(item)),
            AnyFilter::TimeLimited(f) => Ok(f.insert_at(item, now)),
            AnyFilter::Guava(f) => Ok(f.insert(item)),
            AnyFilter::Scalable(f) => f.try_insert(item),
            AnyFilter::Cuckoo(f) => f.try_insert(item),
            AnyFilter::ScalableCuckoo(f) => f.try_insert(item),
            AnyFilter::Quotient(f) => f.try_insert(item),
            AnyFilter::RedisBf(f) => f.add(item).map_err(|e| refused(&e)),
            AnyFilter::RedisCf(f) => {
                // CF.ADD: a copy even when present, as the native cuckoo filter inserts one.
                let present = f.contains(item);
                f.insert(item).map_err(|e| refused(&e))?;
                Ok(!present)
            }
            AnyFilter::Xor8(_) | AnyFilter::Fuse8(_) | AnyFilter::Fuse16(_) | AnyFilter::Gcs(_) => {
                Err(Error::Static { kind })
            }
        }
    }

    /// Removes `item`: `Ok(true)` if it was reported present and removed. Only remove what was
    /// inserted ([`Remove`]). [`Error::CannotRemove`] naming the kind for the kinds that cannot
    /// ([`AnyFilter::can_remove`] is false).
    pub fn remove(&mut self, item: &[u8]) -> Result<bool> {
        match self {
            AnyFilter::Counting(f) => Ok(f.remove(item)),
            AnyFilter::Cuckoo(f) => Ok(f.remove(item)),
            AnyFilter::ScalableCuckoo(f) => Ok(f.remove(item)),
            AnyFilter::Quotient(f) => Ok(f.remove(item)),
            AnyFilter::RedisCf(f) => Ok(f.delete(item)),
            _ => Err(Error::CannotRemove { kind: self.kind() }),
        }
    }

    /// Items in the filter, as the family counts them (for Bloom kinds: inserts that changed
    /// the filter; Guava's: its estimate from the bits set). A window by time counts at its
    /// own clock.
    pub fn len(&self) -> u64 {
        dispatch!(self, f => f.len() as u64, RedisBf(f) => f.len(), RedisCf(f) => f.len())
    }

    /// [`AnyFilter::len`] at time `now` for a window by time.
    pub fn len_at(&self, now: u64) -> u64 {
        match self {
            AnyFilter::TimeLimited(f) => f.len_at(now),
            _ => self.len(),
        }
    }

    /// Whether nothing was inserted.
    pub fn is_empty(&self) -> bool {
        dispatch!(self, f => f.is_empty(), RedisBf(f) => f.len() == 0, RedisCf(f) => f.len() == 0)
    }

    /// Memory held by the filter's storage, in bytes.
    pub fn size_in_bytes(&self) -> u64 {
        dispatch!(self, f => f.size_in_bytes() as u64, RedisBf(f) => f.info().size, RedisCf(f) => f.info().size)
    }

    /// Bytes the filter has allocated outside its own struct: the storage, and for the aging
    /// filters their per-slice records too (what a server's `MEMORY USAGE` must count).
    pub fn heap_bytes(&self) -> u64 {
        match self {
            AnyFilter::Aging(f) => f.heap_bytes() as u64,
            AnyFilter::TimeLimited(f) => f.heap_bytes() as u64,
            _ => self.size_in_bytes(),
        }
    }

    /// The false-positive rate expected now from the filter's own model ([`Filter::expected_fpr`];
    /// for RedisBloom's kinds, the Bloom formula on each link's count compounded over the
    /// chain, and the fingerprint collisions at the cuckoo filter's load).
    pub fn expected_fpr(&self) -> f64 {
        dispatch!(self, f => f.expected_fpr(),
            RedisBf(f) => math::compound_fpr(
                f.links().iter().map(|l| math::bloom_fpr(l.bits() as f64, l.size() as f64, l.hashes() as f64)),
            ),
            RedisCf(f) => {
                // A query compares the 8-bit fingerprint (255 values) with the occupied slots of
                // two buckets in every sub-filter: p ≈ 1 - (1 - 1/255)^(occupied slots probed).
                let slots: u64 = f.filters().iter().map(|s| s.slots().len() as u64).sum();
                let load = if slots == 0 { 0.0 } else { (f.len() as f64 / slots as f64).min(1.0) };
                let probed = 2.0 * f.bucket_size() as f64 * f.filters().len() as f64 * load;
                1.0 - (1.0 - 1.0 / 255.0f64).powf(probed)
            }
        )
    }

    /// The false-positive rate the filter answers with now, measured from its contents: for the
    /// Bloom kinds from every bit (or counter) set, which stays true whatever was inserted (a
    /// filter given far more keys than it was sized for answers yes to nearly everything, while
    /// its count of keys that set a new bit, and so [`AnyFilter::expected_fpr`], stalls). The
    /// fingerprint kinds store and count each item, the static ones are exact by construction,
    /// and the aging ones model their live slices: for those it is [`AnyFilter::expected_fpr`].
    /// Reads the whole filter ([`AnyFilter::sampled_fpr_at`] samples a large one).
    pub fn current_fpr(&self) -> f64 {
        match self {
            AnyFilter::Bloom(f) => f.current_fpr(),
            AnyFilter::Blocked(f) => f.current_fpr(),
            AnyFilter::SplitBlock(f) => split_block_fpr_from_bits(&f.to_parquet_bytes()),
            AnyFilter::Counting(f) => f.current_fpr(),
            AnyFilter::Scalable(f) => math::compound_fpr(f.layers().iter().map(|l| l.current_fpr())),
            AnyFilter::RedisBf(f) => math::compound_fpr(f.links().iter().map(|l| {
                let ones: u64 = l.bitmap().iter().map(|b| u64::from(b.count_ones())).sum();
                math::bloom_fpr_from_fill(ones as f64 / l.bits().max(1) as f64, l.hashes() as f64)
            })),
            // Guava's expected FPP is already `(bits set / bits)^k`.
            other => other.expected_fpr(),
        }
    }

    /// The false-positive rate a never-inserted item is reported present with at time `now`
    /// (a window by time; the other kinds do not depend on it), estimated cheaply enough to ask
    /// often: the bits set, sampled beyond a few MiB, for the blocked and counting kinds; the
    /// split-block formula at the items the bits estimate; the load for cuckoo and quotient
    /// (fingerprints stored per slot); the fingerprint size for static filters; the sizes of
    /// the live generations for the aging kinds; RedisBloom's by [`AnyFilter::expected_fpr`].
    pub fn sampled_fpr_at(&self, now: u64) -> f64 {
        match self {
            AnyFilter::Bloom(f) => f.current_fpr(),
            AnyFilter::Blocked(f) => f.sampled_fpr(),
            AnyFilter::SplitBlock(f) => {
                math::split_block_fpr(f.num_blocks() as f64, f.estimated_items().max(0.0))
            }
            AnyFilter::Counting(f) => f.sampled_fpr(),
            AnyFilter::Scalable(f) => math::compound_fpr(f.layers().iter().map(BlockedBloom::sampled_fpr)),
            AnyFilter::TimeLimited(f) => f.expected_fpr_at(now),
            other => other.expected_fpr(),
        }
    }

    /// The false-positive rate the filter was planned for, when its file records one (the
    /// static kinds and Guava's record none; RedisBloom's chain records its first link's,
    /// from which the chain's is undone).
    pub fn planned_fpr(&self) -> Option<f64> {
        match self {
            AnyFilter::Bloom(f) => Some(f.target_fpr()),
            AnyFilter::Blocked(f) => Some(f.target_fpr()),
            AnyFilter::SplitBlock(f) => Some(f.target_fpr()),
            AnyFilter::Counting(f) => Some(f.target_fpr()),
            AnyFilter::Scalable(f) => Some(f.target_fpr()),
            AnyFilter::Aging(f) => Some(f.target_fpr()),
            AnyFilter::TimeLimited(f) => Some(f.target_fpr()),
            AnyFilter::Cuckoo(f) => Some(f.target_fpr()),
            AnyFilter::ScalableCuckoo(f) => Some(f.target_fpr()),
            AnyFilter::Quotient(f) => Some(f.target_fpr()),
            AnyFilter::RedisBf(f) => f.links().first().map(|l| {
                // The chain's error rate: the first link's, undone by the 0.5 tightening of
                // scaling chains.
                if f.info().expansion.is_some() {
                    l.error() * 2.0
                } else {
                    l.error()
                }
            }),
            _ => None,
        }
    }

    /// The items the filter was sized for, when its file records them (the sum of the layers
    /// of a chain; an aging filter's window by count; a window by time's items per window).
    pub fn capacity(&self) -> Option<u64> {
        match self {
            AnyFilter::Bloom(f) => Some(f.capacity()),
            AnyFilter::Blocked(f) => Some(f.capacity()),
            AnyFilter::SplitBlock(f) => Some(f.capacity()),
            AnyFilter::Counting(f) => Some(f.capacity()),
            AnyFilter::Scalable(f) => Some(f.capacity()),
            AnyFilter::Aging(f) => Some(f.window()),
            AnyFilter::TimeLimited(f) => Some(f.capacity()),
            AnyFilter::Cuckoo(f) => Some(f.capacity()),
            AnyFilter::ScalableCuckoo(f) => Some(f.capacity()),
            AnyFilter::Quotient(f) => Some(f.capacity()),
            AnyFilter::RedisBf(f) => Some(f.info().capacity),
            _ => None,
        }
    }
}

/// The FPR of a split-block Bloom filter from its bitset (Parquet's bytes: 32-byte blocks of
/// eight little-endian 32-bit words): a query picks one block and one bit in each of its eight
/// words, so it is answered "maybe" with probability `Π (bits set in word / 32)` for its block,
/// averaged over the blocks.
fn split_block_fpr_from_bits(bitset: &[u8]) -> f64 {
    let blocks = bitset.chunks_exact(32);
    let n = blocks.len();
    if n == 0 {
        return 0.0;
    }
    let total: f64 = blocks
        .map(|b| {
            b.chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]).count_ones() as f64 / 32.0)
                .product::<f64>()
        })
        .sum();
    total / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traits_static::StaticFilter;

    const MEMBERS: usize = 500;

    fn member(i: usize) -> Vec<u8> {
        format!("member-{i}").into_bytes()
    }

    /// One filter of every kind, the dynamic ones holding `MEMBERS` members inserted through
    /// [`AnyFilter::insert`], the static ones built from them.
    fn one_of_each() -> Vec<AnyFilter> {
        let keys: Vec<Vec<u8>> = (0..MEMBERS).map(member).collect();
        let mut filters = vec![
            AnyFilter::Bloom(Bloom::new(1000, 0.01).unwrap()),
            AnyFilter::Blocked(BlockedBloom::new(1000, 0.01).unwrap()),
            AnyFilter::SplitBlock(SplitBlockBloom::new(1000, 0.01).unwrap()),
            AnyFilter::Counting(CountingBloom::new(1000, 0.01).unwrap()),
            AnyFilter::Scalable(ScalableBloom::new(100, 0.01).unwrap()),
            AnyFilter::Aging(AgingBloom::new(1000, 0.01).unwrap()),
            AnyFilter::TimeLimited(TimeLimitedBloom::new(60_000, 1000, 0.01).unwrap()),
            AnyFilter::Cuckoo(Cuckoo::new(1000, 0.01).unwrap()),
            AnyFilter::ScalableCuckoo(ScalableCuckoo::new(100, 0.01).unwrap()),
            AnyFilter::Quotient(Quotient::new(1000, 0.01).unwrap()),
            AnyFilter::RedisBf(BloomChain::new(100, 0.01, 2, false).unwrap()),
            AnyFilter::RedisCf(CuckooFilter::new(1000, 2, 20, 1).unwrap()),
            AnyFilter::Guava(GuavaBloom::new(1000, 0.01).unwrap()),
        ];
        for f in &mut filters {
            for (i, k) in keys.iter().enumerate() {
                f.insert_at(k, i as u64).unwrap_or_else(|e| panic!("{}: {e}", f.kind()));
            }
        }
        filters.extend([
            AnyFilter::Xor8(Xor8::build(&keys).unwrap()),
            AnyFilter::Fuse8(BinaryFuse8::build(&keys).unwrap()),
            AnyFilter::Fuse16(BinaryFuse16::build(&keys).unwrap()),
            AnyFilter::Gcs(Gcs::build(&keys).unwrap()),
        ]);
        filters
    }

    /// Every kind of the format is read back as itself, with the same bytes, the same answers
    /// and the same counts; `write_to` writes the bytes of `to_bytes`.
    #[test]
    fn every_kind_round_trips_through_its_file() {
        let filters = one_of_each();
        let mut kinds: Vec<FilterKind> = filters.iter().map(AnyFilter::kind).collect();
        kinds.sort_by_key(|k| k.code());
        assert_eq!(kinds, FilterKind::ALL, "one filter of every kind");
        let probes: Vec<Vec<u8>> =
            (0..MEMBERS).map(member).chain((0..2000).map(|i| format!("other-{i}").into_bytes())).collect();
        for f in &filters {
            let bytes = f.to_bytes();
            let mut streamed = Vec::new();
            f.write_to(&mut streamed).unwrap();
            assert_eq!(streamed, bytes, "{}: write_to", f.kind());
            let back = AnyFilter::from_bytes(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.kind()));
            assert_eq!(back.kind(), f.kind());
            assert_eq!(back.to_bytes(), bytes, "{}: bytes after the round trip", f.kind());
            assert_eq!(back.contains_many(&probes), f.contains_many(&probes), "{}", f.kind());
            assert_eq!(back.len(), f.len(), "{}", f.kind());
            assert_eq!(back.size_in_bytes(), f.size_in_bytes(), "{}", f.kind());
            assert_eq!(back.capacity(), f.capacity(), "{}", f.kind());
            // No false negatives, and the batch answers are the single ones.
            for (i, p) in probes.iter().enumerate() {
                let one = back.contains_at(p, MEMBERS as u64);
                assert_eq!(one, back.contains_many_at(&probes[i..=i], MEMBERS as u64)[0], "{}", f.kind());
                if i < MEMBERS {
                    assert!(one, "{}: member {i} lost", f.kind());
                }
            }
            assert!(!back.is_empty(), "{}", f.kind());
            // Digests answer as keys do, in the kinds that take them.
            match back.hasher() {
                Some(h) => {
                    for p in &probes {
                        assert_eq!(back.contains_digest(h.digest(p)), Some(back.contains(p)), "{}", f.kind());
                    }
                }
                None => assert_eq!(back.contains_digest(Default::default()), None, "{}", f.kind()),
            }
        }
    }

    /// A file of a kind code this build does not know is a typed error, never a panic.
    #[test]
    fn an_unknown_kind_code_is_a_format_error() {
        let mut bytes = Bloom::new(10, 0.01).unwrap().to_bytes();
        bytes[6..8].copy_from_slice(&999u16.to_le_bytes());
        let e = AnyFilter::from_bytes(&bytes).unwrap_err();
        assert_eq!(e, Error::Format(FormatError::UnknownKind(999)));
        assert_eq!(e.to_string(), "unknown filter kind code 999 (written by a newer sift?)");
    }

    /// Removing from a kind that cannot is a typed error naming the kind, and changes nothing;
    /// the kinds that can remove do.
    #[test]
    fn remove_is_refused_by_name_where_the_kind_cannot() {
        for mut f in one_of_each() {
            let before = f.to_bytes();
            let kind = f.kind();
            match f.remove(&member(0)) {
                Ok(removed) => {
                    assert!(f.can_remove(), "{kind} removed");
                    assert!(removed, "{kind}: a member was not removed");
                }
                Err(e) => {
                    assert!(!f.can_remove(), "{kind}: {e}");
                    assert_eq!(e, Error::CannotRemove { kind });
                    assert!(e.to_string().contains(kind.name()), "{e}");
                    assert_eq!(f.to_bytes(), before, "{kind}: a refused remove changed the filter");
                }
            }
        }
    }

    /// Inserting into a static kind is a typed error naming the kind; the other kinds insert.
    #[test]
    fn insert_is_refused_by_name_in_static_kinds() {
        for mut f in one_of_each() {
            let kind = f.kind();
            match f.insert(b"new item") {
                Ok(_) => assert!(!f.is_static(), "{kind} inserted"),
                Err(e) => {
                    assert!(f.is_static(), "{kind}: {e}");
                    assert_eq!(e, Error::Static { kind });
                }
            }
        }
    }

    /// A non-scaling RedisBloom chain that is full refuses with RedisBloom's reason.
    #[test]
    fn a_full_redisbloom_chain_refuses_with_its_reason() {
        let mut f = AnyFilter::RedisBf(BloomChain::new(10, 0.01, 2, true).unwrap());
        let mut refused = None;
        for i in 0..100 {
            if let Err(e) = f.insert(&member(i)) {
                refused = Some(e);
                break;
            }
        }
        let e = refused.expect("a non-scaling chain of 10 fills within 100 inserts");
        assert!(matches!(&e, Error::InsertRefused { kind: FilterKind::RedisBloomChain, .. }), "{e}");
        assert!(e.to_string().ends_with("non scaling filter is full"), "{e}");
    }

    /// Guava's filter answers through the library's digests as through its own murmur probes.
    #[test]
    fn guava_answers_as_might_contain() {
        let mut g = GuavaBloom::new(1000, 0.03).unwrap();
        for i in 0..700 {
            g.put(&member(i));
        }
        let any = AnyFilter::Guava(g.clone());
        for i in 0..5000 {
            let k = format!("probe-{i}");
            assert_eq!(any.contains(k.as_bytes()), g.might_contain(k.as_bytes()));
        }
    }

    /// The FPR from the bits set matches the rate measured on keys never inserted, for every
    /// Bloom family, within a 4.5-sigma binomial bound, in a filter filled to its size and in
    /// one given ten times as many keys (where the count of keys that set a new bit, and the
    /// formula on it, fall far short).
    #[test]
    fn current_fpr_is_what_non_members_measure() {
        let probes = 200_000u32;
        for overfill in [1u32, 10] {
            let filters: Vec<AnyFilter> = vec![
                AnyFilter::Bloom(Bloom::new(2000, 0.01).unwrap()),
                AnyFilter::Blocked(BlockedBloom::new(2000, 0.01).unwrap()),
                AnyFilter::SplitBlock(SplitBlockBloom::new(2000, 0.01).unwrap()),
                AnyFilter::Counting(CountingBloom::new(2000, 0.01).unwrap()),
                AnyFilter::RedisBf(BloomChain::new(2000, 0.01, 2, true).unwrap()),
            ];
            for mut f in filters {
                for i in 0..2000 * overfill {
                    // A non-scaling RedisBloom link refuses inserts once full: that is fine here.
                    let _ = f.insert(format!("member-{i}").as_bytes());
                }
                let p = f.current_fpr();
                let hits = (0..probes).filter(|i| f.contains(format!("other-{i}").as_bytes())).count() as f64;
                let sigma = (probes as f64 * p * (1.0 - p)).sqrt();
                assert!(
                    (hits - probes as f64 * p).abs() <= 4.5 * sigma + 1.0,
                    "{} x{overfill}: {hits} hits of {probes}, current_fpr {p}",
                    f.kind()
                );
            }
        }
    }
}
