//! The filter a `sift-filt` key holds: any of the library's families behind one enum, with the
//! operations the commands need, dispatched by kind.

use sift::compat::guava::GuavaBloom;
use sift::format::{self, FilterKind};
use sift::hash::{HashKind, Hasher};
use sift::prelude::*;
use sift::{
    math, AgingBloom, BinaryFuse16, BinaryFuse8, BlockedBloom, Bloom, CountingBloom, Cuckoo, Gcs, Quotient,
    ScalableBloom, ScalableCuckoo, SplitBlockBloom, TimeLimitedBloom, Xor8,
};

/// The kinds `SF.RESERVE` creates (`KIND ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReserveKind {
    /// Blocked Bloom (a scalable chain of blocked layers with `EXPANSION`).
    Blocked,
    /// Counting Bloom: 4-bit counters, deletes.
    Counting,
    /// Cuckoo (a scalable chain of cuckoo tables with `EXPANSION`): deletes.
    Cuckoo,
    /// Rank-and-select quotient filter: deletes.
    Quotient,
    /// Age-partitioned Bloom filter: a sliding window by count (`WINDOW`) or by time (`TTL`).
    Aging,
}

impl ReserveKind {
    /// The kind named `name` (any case).
    pub fn parse(name: &[u8]) -> Option<ReserveKind> {
        let lower = name.to_ascii_lowercase();
        Some(match &lower[..] {
            b"blocked" => ReserveKind::Blocked,
            b"counting" => ReserveKind::Counting,
            b"cuckoo" => ReserveKind::Cuckoo,
            b"quotient" => ReserveKind::Quotient,
            b"aging" => ReserveKind::Aging,
            _ => return None,
        })
    }

    /// Its `KIND` keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            ReserveKind::Blocked => "blocked",
            ReserveKind::Counting => "counting",
            ReserveKind::Cuckoo => "cuckoo",
            ReserveKind::Quotient => "quotient",
            ReserveKind::Aging => "aging",
        }
    }
}

/// A parsed `SF.RESERVE`: what to create.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    /// The kind.
    pub kind: ReserveKind,
    /// The target false-positive rate.
    pub error_rate: f64,
    /// Items the filter is sized for.
    pub capacity: u64,
    /// Cuckoo fingerprint bits, when given.
    pub fingerprint: Option<u32>,
    /// Growth factor of a scalable chain; 0 for a fixed-size filter.
    pub expansion: u32,
    /// The window of an aging filter by count: the last `window` insertions are members.
    pub window: Option<u64>,
    /// The window of an aging filter by time, in milliseconds: items added in the last `ttl_ms`
    /// are members (`capacity` is then the insertions expected per window).
    pub ttl_ms: Option<u64>,
}

/// Tightening ratio of the scalable chains: each new layer at half the previous layer's rate,
/// so the chain's compound rate stays under the target (Almeida et al. 2007).
const TIGHTENING: f64 = 0.5;

impl Spec {
    /// About how many bytes the filter will allocate (its first layer for a chain): what the
    /// memory budget is checked against before anything is allocated.
    pub fn estimated_bytes(&self) -> f64 {
        let n = self.capacity as f64;
        let p = self.error_rate;
        match (self.kind, self.expansion) {
            (ReserveKind::Blocked, 0) => n * math::bloom_bits_per_key(p) * 1.1 / 8.0,
            (ReserveKind::Blocked, _) => {
                n * math::bloom_bits_per_key(math::scalable_first_layer_fpr(p, TIGHTENING)) * 1.1 / 8.0
            }
            (ReserveKind::Counting, _) => n * math::bloom_bits_per_key(p) * 4.0 / 8.0,
            (ReserveKind::Cuckoo, _) => {
                let bits = self.fingerprint.unwrap_or_else(|| math::cuckoo_fingerprint_bits(p).max(8));
                n / sift::filters::cuckoo::DESIGN_LOAD * f64::from(bits) / 8.0
            }
            (ReserveKind::Quotient, _) => {
                let r = (sift::filters::quotient::DESIGN_LOAD / p).log2().ceil().max(1.0);
                n / sift::filters::quotient::DESIGN_LOAD * (r + 2.125) / 8.0
            }
            // The age-partitioned rows take about 2.6 (by count) to 3.5 (by time, sized for 1.25x
            // the rate) times a Bloom filter's bits per item (`sift::math::aging_plan`).
            (ReserveKind::Aging, _) => {
                let items = self.window.map_or(n, |w| w as f64);
                items * math::bloom_bits_per_key(p) * 4.0 / 8.0
            }
        }
    }

    /// Creates the filter (deterministic: the library's constructors and default hash choice).
    pub fn create(&self) -> Result<Native, String> {
        let n = usize::try_from(self.capacity).map_err(|_| "capacity too large".to_string())?;
        let p = self.error_rate;
        let e = |e: sift::Error| e.to_string();
        Ok(match (self.kind, self.expansion) {
            (ReserveKind::Blocked, 0) => Native::Blocked(BlockedBloom::new(n, p).map_err(e)?),
            (ReserveKind::Blocked, g) => {
                Native::Scalable(ScalableBloom::with_options(n, p, f64::from(g), TIGHTENING).map_err(e)?)
            }
            (ReserveKind::Counting, _) => Native::Counting(CountingBloom::new(n, p).map_err(e)?),
            (ReserveKind::Cuckoo, 0) => match self.fingerprint {
                None => Native::Cuckoo(Cuckoo::new(n, p).map_err(e)?),
                Some(bits) => {
                    let at_design = math::cuckoo_fpr(bits, 4.0, sift::filters::cuckoo::DESIGN_LOAD);
                    if at_design > p {
                        return Err(format!(
                            "FINGERPRINT {bits} gives an error rate of {at_design:.3e} at full load, \
                             above the requested {p}: use more fingerprint bits or leave FINGERPRINT out"
                        ));
                    }
                    let slots = n as f64 / sift::filters::cuckoo::DESIGN_LOAD;
                    let buckets = (slots / 4.0).ceil().max(1.0) as u64;
                    let hasher = Hasher::new(HashKind::for_target(self.capacity, p), 0);
                    Native::Cuckoo(Cuckoo::with_params(buckets, bits, hasher).map_err(e)?)
                }
            },
            (ReserveKind::Cuckoo, g) => Native::ScalableCuckoo(
                ScalableCuckoo::with_options(n, p, f64::from(g), TIGHTENING).map_err(e)?,
            ),
            (ReserveKind::Quotient, _) => Native::Quotient(Quotient::new(n, p).map_err(e)?),
            (ReserveKind::Aging, _) => match (self.window, self.ttl_ms) {
                (Some(w), _) => {
                    let w = usize::try_from(w).map_err(|_| "window too large".to_string())?;
                    Native::Aging(AgingBloom::new(w, p).map_err(e)?)
                }
                (None, Some(ttl)) => Native::TimeLimited(TimeLimitedBloom::new(ttl, n, p).map_err(e)?),
                (None, None) => return Err("KIND aging needs WINDOW or TTL".into()),
            },
        })
    }
}

/// A filter of any family a `sift-filt` key serves.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Native {
    /// Classic Bloom.
    Bloom(Bloom),
    /// Blocked Bloom.
    Blocked(BlockedBloom),
    /// Parquet's split-block Bloom.
    SplitBlock(SplitBlockBloom),
    /// Counting Bloom.
    Counting(CountingBloom),
    /// Scalable Bloom (blocked layers).
    Scalable(ScalableBloom),
    /// Cuckoo.
    Cuckoo(Cuckoo),
    /// Scalable cuckoo.
    ScalableCuckoo(ScalableCuckoo),
    /// Quotient.
    Quotient(Quotient),
    /// Xor filter, 8-bit (static).
    Xor8(Xor8),
    /// Binary fuse, 8-bit (static).
    Fuse8(BinaryFuse8),
    /// Binary fuse, 16-bit (static).
    Fuse16(BinaryFuse16),
    /// Golomb-coded set (static).
    Gcs(Gcs),
    /// Age-partitioned Bloom filter, a sliding window by count.
    Aging(AgingBloom),
    /// Time-limited Bloom filter, a sliding window by time (milliseconds).
    TimeLimited(TimeLimitedBloom),
    /// Guava's `BloomFilter`, bit for bit (a `guava-bloom` file: `sift convert --from guava`).
    Guava(GuavaBloom),
}

/// Applies `$body` to the filter inside any variant.
macro_rules! each {
    ($n:expr, $f:ident => $body:expr) => {
        match $n {
            Native::Bloom($f) => $body,
            Native::Blocked($f) => $body,
            Native::SplitBlock($f) => $body,
            Native::Counting($f) => $body,
            Native::Scalable($f) => $body,
            Native::Cuckoo($f) => $body,
            Native::ScalableCuckoo($f) => $body,
            Native::Quotient($f) => $body,
            Native::Xor8($f) => $body,
            Native::Fuse8($f) => $body,
            Native::Fuse16($f) => $body,
            Native::Gcs($f) => $body,
            Native::Aging($f) => $body,
            Native::TimeLimited($f) => $body,
            Native::Guava($f) => $body,
        }
    };
}

/// Bytes `from .. from + len` of a sift file, and whether the file goes on past them.
#[derive(Debug)]
pub struct Piece {
    /// The bytes (fewer than asked at the end of the file, none past it).
    pub bytes: Vec<u8>,
    /// The file has bytes after these.
    pub more: bool,
}

/// Bytes `from .. from + len` of `p`'s sift file: the filter streams its file
/// ([`Persist::write_to`]) into a window that keeps those bytes and stops the stream once past
/// them, so a piece of a large filter never holds a copy of the whole file (for the families
/// that stream; the others encode the file in memory first).
pub fn file_piece<P: Persist>(p: &P, from: usize, len: usize) -> Piece {
    /// Keeps the bytes in `[from, to)` of what is written; fails once a byte past `to` comes.
    struct Window {
        at: usize,
        from: usize,
        to: usize,
        bytes: Vec<u8>,
    }
    impl std::io::Write for Window {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (start, end) = (self.at, self.at + buf.len());
            let keep = &buf[start.max(self.from).min(end) - start..end.min(self.to).max(start) - start];
            self.bytes.extend_from_slice(keep);
            self.at = end;
            if end > self.to {
                return Err(std::io::Error::other("past the piece"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let to = from.saturating_add(len);
    let mut w = Window { at: 0, from, to, bytes: Vec::with_capacity(len.min(1 << 20)) };
    // An error is the window stopping the stream: more bytes follow.
    let more = Persist::write_to(p, &mut w).is_err();
    Piece { bytes: w.bytes, more }
}

/// Why an operation was refused, as the reply's text.
pub type Refusal = String;

impl Native {
    /// The kind in the file format.
    pub fn kind(&self) -> FilterKind {
        fn k<P: Persist>(_: &P) -> FilterKind {
            P::KIND
        }
        each!(self, f => k(f))
    }

    /// A sift file of a kind a `sift-filt` key serves (any native family); an error naming
    /// the problem for anything else (corrupt, truncated, foreign, RedisBloom or Guava kinds).
    pub fn from_bytes(bytes: &[u8]) -> Result<Native, String> {
        let raw = format::decode(bytes).map_err(|e| e.to_string())?;
        let kind = raw.kind().ok_or_else(|| {
            format!("unknown filter kind code {} (written by a newer sift?)", raw.kind_code())
        })?;
        let e = |e: sift::Error| e.to_string();
        Ok(match kind {
            FilterKind::Bloom => Native::Bloom(Bloom::from_bytes(bytes).map_err(e)?),
            FilterKind::BlockedBloom => Native::Blocked(BlockedBloom::from_bytes(bytes).map_err(e)?),
            FilterKind::SplitBlockBloom => Native::SplitBlock(SplitBlockBloom::from_bytes(bytes).map_err(e)?),
            FilterKind::CountingBloom => Native::Counting(CountingBloom::from_bytes(bytes).map_err(e)?),
            FilterKind::ScalableBloom => Native::Scalable(ScalableBloom::from_bytes(bytes).map_err(e)?),
            FilterKind::Cuckoo => Native::Cuckoo(Cuckoo::from_bytes(bytes).map_err(e)?),
            FilterKind::ScalableCuckoo => {
                Native::ScalableCuckoo(ScalableCuckoo::from_bytes(bytes).map_err(e)?)
            }
            FilterKind::Quotient => Native::Quotient(Quotient::from_bytes(bytes).map_err(e)?),
            FilterKind::Xor8 => Native::Xor8(Xor8::from_bytes(bytes).map_err(e)?),
            FilterKind::BinaryFuse8 => Native::Fuse8(BinaryFuse8::from_bytes(bytes).map_err(e)?),
            FilterKind::BinaryFuse16 => Native::Fuse16(BinaryFuse16::from_bytes(bytes).map_err(e)?),
            FilterKind::Gcs => Native::Gcs(Gcs::from_bytes(bytes).map_err(e)?),
            FilterKind::AgingBloom => Native::Aging(AgingBloom::from_bytes(bytes).map_err(e)?),
            FilterKind::TimeLimitedBloom => {
                Native::TimeLimited(TimeLimitedBloom::from_bytes(bytes).map_err(e)?)
            }
            FilterKind::Guava => Native::Guava(GuavaBloom::from_bytes(bytes).map_err(e)?),
            other => return Err(format!("a {other} file is not served by SF keys")),
        })
    }

    /// The sift file.
    pub fn to_bytes(&self) -> Vec<u8> {
        each!(self, f => f.to_bytes())
    }

    /// Bytes `from .. from + len` of the sift file (`file_piece`). A blocked filter (the
    /// kind that grows to gigabytes) is read at the offset, in O(`len`): `SF.DUMP` in pieces is
    /// linear in the file, where streaming from the start made each piece O(offset).
    pub fn file_piece(&self, from: usize, len: usize) -> Piece {
        match self {
            Native::Blocked(f) => {
                let (bytes, total) = f.file_range(from as u64, len);
                Piece { bytes, more: (from as u64).saturating_add(len as u64) < total }
            }
            _ => each!(self, f => file_piece(f, from, len)),
        }
    }

    /// May `item` be in the set (at time `now`, Unix ms, for a window by time: a read that
    /// never moves the filter's clock)?
    pub fn contains(&self, item: &[u8], now: u64) -> bool {
        match self {
            Native::TimeLimited(f) => f.contains_at(item, now),
            _ => each!(self, f => f.contains(item)),
        }
    }

    /// [`Native::contains`] for each item, batched (prefetching in the large families).
    pub fn contains_many(&self, items: &[&[u8]], now: u64) -> Vec<bool> {
        match self {
            Native::TimeLimited(f) => items.iter().map(|i| f.contains_at(i, now)).collect(),
            _ => each!(self, f => f.contains_many(items)),
        }
    }

    /// Hints the CPU to load the cache line `item` maps to, before an add or a query of it a
    /// few requests later (a blocked filter: its one block; the other kinds do nothing).
    #[inline]
    pub fn prefetch(&self, item: &[u8]) {
        if let Native::Blocked(f) = self {
            f.prefetch(item);
        }
    }

    /// Does this filter's content depend on the time of each add (a window by time)?
    pub fn is_timed(&self) -> bool {
        matches!(self, Native::TimeLimited(_))
    }

    /// Adds `item` (at time `now`, for a window by time: the time the primary decided, which
    /// starts and retires slices): `Ok(true)` if it was not reported present before.
    pub fn add(&mut self, item: &[u8], now: u64) -> Result<bool, Refusal> {
        let full = |e: sift::Error| format!("ERR {e}");
        match self {
            Native::Aging(f) => Ok(f.insert(item)),
            Native::TimeLimited(f) => Ok(f.insert_at(item, now)),
            Native::Bloom(f) => Ok(f.insert(item)),
            Native::Blocked(f) => Ok(f.insert(item)),
            Native::SplitBlock(f) => Ok(f.insert(item)),
            Native::Counting(f) => Ok(f.insert(item)),
            Native::Guava(f) => Ok(f.insert(item)),
            Native::Scalable(f) => f.try_insert(item).map_err(full),
            Native::Cuckoo(f) => f.try_insert(item).map_err(full),
            Native::ScalableCuckoo(f) => f.try_insert(item).map_err(full),
            Native::Quotient(f) => f.try_insert(item).map_err(full),
            Native::Xor8(_) | Native::Fuse8(_) | Native::Fuse16(_) | Native::Gcs(_) => Err(format!(
                "ERR a {} filter is static: it cannot add items (build a new one and SF.LOAD it)",
                self.kind()
            )),
        }
    }

    /// Is this a static kind (built once, read-only)?
    pub fn is_static(&self) -> bool {
        matches!(self, Native::Xor8(_) | Native::Fuse8(_) | Native::Fuse16(_) | Native::Gcs(_))
    }

    /// Can this kind delete items?
    pub fn deletes(&self) -> bool {
        matches!(
            self,
            Native::Counting(_) | Native::Cuckoo(_) | Native::ScalableCuckoo(_) | Native::Quotient(_)
        )
    }

    /// Deletes `item`: `Ok(true)` if it was reported present and removed.
    pub fn remove(&mut self, item: &[u8]) -> Result<bool, Refusal> {
        match self {
            Native::Counting(f) => Ok(f.remove(item)),
            Native::Cuckoo(f) => Ok(f.remove(item)),
            Native::ScalableCuckoo(f) => Ok(f.remove(item)),
            Native::Quotient(f) => Ok(f.remove(item)),
            _ => Err(format!(
                "ERR a {} filter cannot delete items (KIND counting, cuckoo and quotient can)",
                self.kind()
            )),
        }
    }

    /// Items in the filter (for Bloom kinds: adds that changed it).
    pub fn len(&self, now: u64) -> u64 {
        match self {
            Native::TimeLimited(f) => f.len_at(now),
            _ => each!(self, f => f.len() as u64),
        }
    }

    /// No items?
    pub fn is_empty(&self) -> bool {
        each!(self, f => f.is_empty())
    }

    /// Bytes of filter storage.
    pub fn size_in_bytes(&self) -> u64 {
        each!(self, f => f.size_in_bytes() as u64)
    }

    /// Bytes the filter has allocated outside the value's own struct, for `MEMORY USAGE`: the
    /// storage, and for the aging filters their per-slice records too.
    pub fn heap_bytes(&self) -> u64 {
        match self {
            Native::Aging(f) => f.heap_bytes() as u64,
            Native::TimeLimited(f) => f.heap_bytes() as u64,
            _ => self.size_in_bytes(),
        }
    }

    /// Items the filter was sized for (the sum of the layers of a chain; a static filter's items).
    pub fn capacity(&self) -> u64 {
        match self {
            Native::Bloom(f) => f.capacity(),
            Native::Blocked(f) => f.capacity(),
            Native::SplitBlock(f) => f.capacity(),
            Native::Counting(f) => f.capacity(),
            Native::Scalable(f) => f.capacity(),
            Native::Cuckoo(f) => f.capacity(),
            Native::ScalableCuckoo(f) => f.capacity(),
            Native::Quotient(f) => f.capacity(),
            Native::Xor8(_) | Native::Fuse8(_) | Native::Fuse16(_) | Native::Gcs(_) => self.len(0),
            Native::Aging(f) => f.window(),
            Native::TimeLimited(f) => f.capacity(),
            // Guava's stream keeps no expected insertions: the count its bits and hashes are
            // optimal for (`k = m/n · ln 2`, Guava's own sizing rule).
            Native::Guava(f) => {
                (f.bit_size() as f64 * std::f64::consts::LN_2 / f64::from(f.num_hashes())) as u64
            }
        }
    }

    /// The rate the filter was created for (a static filter's is fixed by its fingerprint).
    pub fn target(&self) -> f64 {
        match self {
            Native::Bloom(f) => f.target_fpr(),
            Native::Blocked(f) => f.target_fpr(),
            Native::SplitBlock(f) => f.target_fpr(),
            Native::Counting(f) => f.target_fpr(),
            Native::Scalable(f) => f.target_fpr(),
            Native::Cuckoo(f) => f.target_fpr(),
            Native::ScalableCuckoo(f) => f.target_fpr(),
            Native::Quotient(f) => f.target_fpr(),
            Native::Xor8(f) => f.expected_fpr(),
            Native::Fuse8(f) => f.expected_fpr(),
            Native::Fuse16(f) => f.expected_fpr(),
            Native::Gcs(f) => f.expected_fpr(),
            Native::Aging(f) => f.target_fpr(),
            Native::TimeLimited(f) => f.target_fpr(),
            // At the capacity above, Guava's optimal sizing gives 2^-k.
            Native::Guava(f) => 0.5f64.powi(f.num_hashes() as i32),
        }
    }

    /// The rate a never-added item is reported present with now, from the contents: the bits
    /// set for the Bloom kinds (non-zero counters for counting), the load for cuckoo and
    /// quotient (fingerprints stored per slot), the fingerprint size for static filters.
    pub fn estimate(&self, now: u64) -> f64 {
        match self {
            Native::Bloom(f) => f.current_fpr(),
            // Sampled beyond a few MiB: SF.INFO and the monitor read it under the key's lock.
            Native::Blocked(f) => f.sampled_fpr(),
            Native::SplitBlock(f) => {
                math::split_block_fpr(f.num_blocks() as f64, f.estimated_items().max(0.0))
            }
            Native::Counting(f) => f.sampled_fpr(),
            Native::Scalable(f) => math::compound_fpr(f.layers().iter().map(BlockedBloom::sampled_fpr)),
            Native::Cuckoo(f) => f.expected_fpr(),
            Native::ScalableCuckoo(f) => f.expected_fpr(),
            Native::Quotient(f) => f.expected_fpr(),
            Native::Xor8(f) => f.expected_fpr(),
            Native::Fuse8(f) => f.expected_fpr(),
            Native::Fuse16(f) => f.expected_fpr(),
            Native::Gcs(f) => f.expected_fpr(),
            // From the sizes of the live generations (each slice's fill follows its size).
            Native::Aging(f) => f.expected_fpr(),
            Native::TimeLimited(f) => f.expected_fpr_at(now),
            // Guava's `expectedFpp()`: the bits set, to the power k.
            Native::Guava(f) => f.expected_fpp(),
        }
    }

    /// The window of a window by count (insertions).
    pub fn window(&self) -> Option<u64> {
        match self {
            Native::Aging(f) => Some(f.window()),
            _ => None,
        }
    }

    /// The window of a window by time, in seconds.
    pub fn ttl_seconds(&self) -> Option<u64> {
        match self {
            Native::TimeLimited(f) => Some(f.ttl() / 1000),
            _ => None,
        }
    }

    /// The age of the oldest live slice: insertions since it started (window by count), or
    /// milliseconds before `now` (window by time).
    pub fn oldest_slice_age(&self, now: u64) -> Option<u64> {
        match self {
            Native::Aging(f) => Some(f.oldest_slice_age()),
            Native::TimeLimited(f) => Some(f.oldest_slice_age_at(now)),
            _ => None,
        }
    }

    /// The growth factor of a scalable chain.
    pub fn expansion(&self) -> Option<u64> {
        match self {
            Native::Scalable(f) => Some(f.growth().round() as u64),
            Native::ScalableCuckoo(f) => Some(f.growth().round() as u64),
            _ => None,
        }
    }
}
