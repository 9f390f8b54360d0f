//! The filter a `sift-filt` key holds: any of the library's families behind one enum, with the
//! operations the commands need, dispatched by kind.

use std::sync::Arc;

use sift::format::{self, FilterKind};
use sift::hash::{HashKind, Hasher};
use sift::prelude::*;
use sift::{
    math, AgingBloom, AnyFilter, BlockedBloom, CountingBloom, Cuckoo, Quotient, ScalableBloom,
    ScalableCuckoo, TimeLimitedBloom,
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
        Ok(Native(Arc::new(match (self.kind, self.expansion) {
            (ReserveKind::Blocked, 0) => AnyFilter::Blocked(BlockedBloom::new(n, p).map_err(e)?),
            (ReserveKind::Blocked, g) => {
                AnyFilter::Scalable(ScalableBloom::with_options(n, p, f64::from(g), TIGHTENING).map_err(e)?)
            }
            (ReserveKind::Counting, _) => AnyFilter::Counting(CountingBloom::new(n, p).map_err(e)?),
            (ReserveKind::Cuckoo, 0) => match self.fingerprint {
                None => AnyFilter::Cuckoo(Cuckoo::new(n, p).map_err(e)?),
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
                    AnyFilter::Cuckoo(Cuckoo::with_params(buckets, bits, hasher).map_err(e)?)
                }
            },
            (ReserveKind::Cuckoo, g) => AnyFilter::ScalableCuckoo(
                ScalableCuckoo::with_options(n, p, f64::from(g), TIGHTENING).map_err(e)?,
            ),
            (ReserveKind::Quotient, _) => AnyFilter::Quotient(Quotient::new(n, p).map_err(e)?),
            (ReserveKind::Aging, _) => match (self.window, self.ttl_ms) {
                (Some(w), _) => {
                    let w = usize::try_from(w).map_err(|_| "window too large".to_string())?;
                    AnyFilter::Aging(AgingBloom::new(w, p).map_err(e)?)
                }
                (None, Some(ttl)) => AnyFilter::TimeLimited(TimeLimitedBloom::new(ttl, n, p).map_err(e)?),
                (None, None) => return Err("KIND aging needs WINDOW or TTL".into()),
            },
        })))
    }
}

/// A filter of any family a `sift-filt` key serves: the library's [`AnyFilter`] of any kind but
/// RedisBloom's two (a RedisBloom file makes a `BF` or `CF` key), with the commands' wording of
/// refusals and the per-kind details `SF.INFO` reports.
#[derive(Debug, Clone)]
pub struct Native(Arc<AnyFilter>);

/// Bytes `from .. from + len` of a sift file, and whether the file goes on past them.
#[derive(Debug)]
pub struct Piece {
    /// The bytes (fewer than asked at the end of the file, none past it).
    pub bytes: Vec<u8>,
    /// The file has bytes after these.
    pub more: bool,
}

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

/// Bytes `from .. from + len` of the file `write` streams, into a window that keeps those
/// bytes and stops the stream once past them.
fn piece_of(from: usize, len: usize, write: impl FnOnce(&mut Window) -> std::io::Result<()>) -> Piece {
    let to = from.saturating_add(len);
    let mut w = Window { at: 0, from, to, bytes: Vec::with_capacity(len.min(1 << 20)) };
    // An error is the window stopping the stream: more bytes follow.
    let more = write(&mut w).is_err();
    Piece { bytes: w.bytes, more }
}

/// Bytes `from .. from + len` of `p`'s sift file: the filter streams its file
/// ([`Persist::write_to`]) into a window that keeps those bytes and stops the stream once past
/// them, so a piece of a large filter never holds a copy of the whole file (for the families
/// that stream; the others encode the file in memory first).
pub fn file_piece<P: Persist>(p: &P, from: usize, len: usize) -> Piece {
    piece_of(from, len, |w| Persist::write_to(p, w))
}

/// Why an operation was refused, as the reply's text.
pub type Refusal = String;

impl Native {
    /// A `sift-filt` key's filter of `f`; an error for RedisBloom's kinds (`BF` and `CF` keys).
    pub fn new(f: AnyFilter) -> Result<Native, String> {
        match f.kind() {
            other @ (FilterKind::RedisBloomChain | FilterKind::RedisBloomCuckoo) => {
                Err(format!("a {other} file is not served by SF keys"))
            }
            _ => Ok(Native(Arc::new(f))),
        }
    }

    /// The library's filter inside.
    pub fn as_any(&self) -> &AnyFilter {
        &self.0
    }

    /// The filter's sift file as it is now, to be written later while the filter keeps changing
    /// (copy-on-write of its large array: [`BlockedBloom::freeze`], [`ScalableBloom::freeze`],
    /// [`CountingBloom::freeze`], [`sift::AgingBloom::freeze`], [`sift::TimeLimitedBloom::freeze`],
    /// [`Cuckoo::freeze`], [`sift::ScalableCuckoo::freeze`], [`Quotient::freeze`],
    /// [`sift::Bloom::freeze`], [`sift::SplitBlockBloom::freeze`],
    /// [`sift::compat::guava::GuavaBloom::freeze`]: every kind that takes writes);
    /// `None` for a small filter, which the caller copies whole, and for the static kinds, which
    /// are shared instead ([`Native::share_static`]).
    pub fn freeze(&self) -> Option<sift::format::FrozenFile> {
        match &*self.0 {
            AnyFilter::Bloom(f) => f.freeze(),
            AnyFilter::SplitBlock(f) => f.freeze(),
            AnyFilter::Quotient(f) => f.freeze(),
            AnyFilter::Blocked(f) => f.freeze(),
            AnyFilter::Scalable(f) => f.freeze(),
            AnyFilter::Counting(f) => f.freeze(),
            AnyFilter::Aging(f) => f.freeze(),
            AnyFilter::TimeLimited(f) => f.freeze(),
            AnyFilter::Cuckoo(f) => f.freeze(),
            AnyFilter::ScalableCuckoo(f) => f.freeze(),
            AnyFilter::Guava(f) => f.freeze(),
            _ => None,
        }
    }

    /// A static filter (built once, never written: xor, binary fuse, GCS), shared with a
    /// snapshot instead of copied: replacing or deleting the key leaves the snapshot's share
    /// intact, and nothing else can change it. `None` for the kinds that take writes.
    pub fn share_static(&self) -> Option<Arc<AnyFilter>> {
        self.0.is_static().then(|| self.0.clone())
    }

    /// The kind in the file format.
    pub fn kind(&self) -> FilterKind {
        self.0.kind()
    }

    /// A sift file of a kind a `sift-filt` key serves (any native family); an error naming
    /// the problem for anything else (corrupt, truncated, foreign, RedisBloom kinds).
    pub fn from_bytes(bytes: &[u8]) -> Result<Native, String> {
        // The header first: a RedisBloom file is refused before its body is decoded.
        let kind = format::decode(bytes).map_err(|e| e.to_string())?.kind();
        if let Some(other @ (FilterKind::RedisBloomChain | FilterKind::RedisBloomCuckoo)) = kind {
            return Err(format!("a {other} file is not served by SF keys"));
        }
        AnyFilter::from_bytes(bytes).map(|f| Native(Arc::new(f))).map_err(|e| e.to_string())
    }

    /// The sift file.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.to_bytes()
    }

    /// Bytes `from .. from + len` of the sift file (`file_piece`). A blocked filter (the
    /// kind that grows to gigabytes) is read at the offset, in O(`len`): `SF.DUMP` in pieces is
    /// linear in the file, where streaming from the start made each piece O(offset).
    pub fn file_piece(&self, from: usize, len: usize) -> Piece {
        match &*self.0 {
            AnyFilter::Blocked(f) => {
                let (bytes, total) = f.file_range(from as u64, len);
                Piece { bytes, more: (from as u64).saturating_add(len as u64) < total }
            }
            other => piece_of(from, len, |w| other.write_to(w)),
        }
    }

    /// May `item` be in the set (at time `now`, Unix ms, for a window by time: a read that
    /// never moves the filter's clock)?
    pub fn contains(&self, item: &[u8], now: u64) -> bool {
        self.0.contains_at(item, now)
    }

    /// [`Native::contains`] for each item, batched (prefetching in the large families).
    pub fn contains_many(&self, items: &[&[u8]], now: u64) -> Vec<bool> {
        self.0.contains_many_at(items, now)
    }

    /// Hints the CPU to load the cache line `item` maps to, before an add or a query of it a
    /// few requests later (a blocked filter: its one block; the other kinds do nothing).
    #[inline]
    pub fn prefetch(&self, item: &[u8]) {
        if let AnyFilter::Blocked(f) = &*self.0 {
            f.prefetch(item);
        }
    }

    /// Does this filter's content depend on the time of each add (a window by time)?
    pub fn is_timed(&self) -> bool {
        self.0.is_timed()
    }

    /// Adds `item` (at time `now`, for a window by time: the time the primary decided, which
    /// starts and retires slices): `Ok(true)` if it was not reported present before.
    pub fn add(&mut self, item: &[u8], now: u64) -> Result<bool, Refusal> {
        // A static filter refuses before it is made unique: a snapshot may share it.
        let added = if self.0.is_static() {
            Err(sift::Error::Static { kind: self.0.kind() })
        } else {
            Arc::make_mut(&mut self.0).insert_at(item, now)
        };
        added.map_err(|e| match e {
            sift::Error::Static { kind } => {
                format!("ERR a {kind} filter is static: it cannot add items (build a new one and SF.LOAD it)")
            }
            e => format!("ERR {e}"),
        })
    }

    /// Is this a static kind (built once, read-only)?
    pub fn is_static(&self) -> bool {
        self.0.is_static()
    }

    /// Can this kind delete items?
    pub fn deletes(&self) -> bool {
        self.0.can_remove()
    }

    /// Deletes `item`: `Ok(true)` if it was reported present and removed.
    pub fn remove(&mut self, item: &[u8]) -> Result<bool, Refusal> {
        let removed = if self.0.can_remove() {
            Arc::make_mut(&mut self.0).remove(item)
        } else {
            Err(sift::Error::CannotRemove { kind: self.0.kind() })
        };
        removed.map_err(|e| match e {
            sift::Error::CannotRemove { kind } => {
                format!("ERR a {kind} filter cannot delete items (KIND counting, cuckoo and quotient can)")
            }
            e => format!("ERR {e}"),
        })
    }

    /// Items in the filter (for Bloom kinds: adds that changed it).
    pub fn len(&self, now: u64) -> u64 {
        self.0.len_at(now)
    }

    /// No items?
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Bytes of filter storage.
    pub fn size_in_bytes(&self) -> u64 {
        self.0.size_in_bytes()
    }

    /// Bytes the filter has allocated outside the value's own struct, for `MEMORY USAGE`: the
    /// storage, and for the aging filters their per-slice records too.
    pub fn heap_bytes(&self) -> u64 {
        self.0.heap_bytes()
    }

    /// Items the filter was sized for (the sum of the layers of a chain; a static filter's items).
    pub fn capacity(&self) -> u64 {
        self.0.capacity().unwrap_or_else(|| match &*self.0 {
            // Guava's stream keeps no expected insertions: the count its bits and hashes are
            // optimal for (`k = m/n · ln 2`, Guava's own sizing rule).
            AnyFilter::Guava(f) => {
                (f.bit_size() as f64 * std::f64::consts::LN_2 / f64::from(f.num_hashes())) as u64
            }
            _ => self.len(0),
        })
    }

    /// The rate the filter was created for (a static filter's is fixed by its fingerprint).
    pub fn target(&self) -> f64 {
        self.0.planned_fpr().unwrap_or_else(|| match &*self.0 {
            // At the capacity above, Guava's optimal sizing gives 2^-k.
            AnyFilter::Guava(f) => 0.5f64.powi(f.num_hashes() as i32),
            other => other.expected_fpr(),
        })
    }

    /// The rate a never-added item is reported present with now, from the contents: the bits
    /// set for the Bloom kinds (non-zero counters for counting; sampled beyond a few MiB, as
    /// SF.INFO and the monitor read it under the key's lock), the load for cuckoo and quotient
    /// (fingerprints stored per slot), the fingerprint size for static filters
    /// ([`AnyFilter::sampled_fpr_at`]).
    pub fn estimate(&self, now: u64) -> f64 {
        self.0.sampled_fpr_at(now)
    }

    /// The window of a window by count (insertions).
    pub fn window(&self) -> Option<u64> {
        match &*self.0 {
            AnyFilter::Aging(f) => Some(f.window()),
            _ => None,
        }
    }

    /// The window of a window by time, in seconds.
    pub fn ttl_seconds(&self) -> Option<u64> {
        match &*self.0 {
            AnyFilter::TimeLimited(f) => Some(f.ttl() / 1000),
            _ => None,
        }
    }

    /// The age of the oldest live slice: insertions since it started (window by count), or
    /// milliseconds before `now` (window by time).
    pub fn oldest_slice_age(&self, now: u64) -> Option<u64> {
        match &*self.0 {
            AnyFilter::Aging(f) => Some(f.oldest_slice_age()),
            AnyFilter::TimeLimited(f) => Some(f.oldest_slice_age_at(now)),
            _ => None,
        }
    }

    /// The growth factor of a scalable chain.
    pub fn expansion(&self) -> Option<u64> {
        match &*self.0 {
            AnyFilter::Scalable(f) => Some(f.growth().round() as u64),
            AnyFilter::ScalableCuckoo(f) => Some(f.growth().round() as u64),
            _ => None,
        }
    }
}
