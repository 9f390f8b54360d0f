//! RedisBloom's t-digest, `TDIS-TYPE` (spec `redisbloom-sketches.md` §7, RDB §10.5).
//!
//! Ted Dunning's t-digest (Dunning and Ertl, "Computing Extremely Accurate Quantiles Using
//! t-Digests", 2019) summarises a distribution by a sorted list of centroids (mean, weight).
//! Centroids near the median may hold many observations, those near the tails few, which is
//! what makes extreme quantiles accurate; the size bound comes from a scale function of the
//! quantile and the compression parameter δ, and a digest keeps O(δ) centroids whatever the
//! number of observations. Quantiles and the CDF interpolate between neighbouring centroids,
//! using the exact minimum and maximum at the ends.
//!
//! This is RedisBloom's "merging digest", reproduced exactly: new observations go to a buffer
//! after the centroids (capacity `6·⌊δ⌋ + 10` nodes); a compression sorts everything with one
//! particular quicksort, then merges neighbours left to right while the merged weight `w` keeps
//! `δ·w / (2π·W·ln W) <= q(1 − q)` at both ends of the new centroid (W the total weight, q the
//! quantile at that end): a size limit of the `q(1 − q)` form of Dunning's original digest. Compression happens when the buffer is full, before every quantile-type
//! query and before a save, and changes later answers, so it is reproduced to the bit, with
//! RedisBloom's interpolation rules and its rounding of ranks. A digest of a single observation
//! is never compressed (§7.3); its value is lost across an RDB reload, as in RedisBloom (§10.5).
//!
//! ```
//! use sift::compat::redisbloom::TDigest;
//!
//! // TDIGEST.CREATE t COMPRESSION 250; TDIGEST.ADD t 1 2 … 10 (spec §7.7).
//! let mut td = TDigest::new(250.0, u64::MAX)?;
//! for v in 1..=10 {
//!     td.add(v as f64).unwrap();
//! }
//! assert_eq!(td.quantiles(&[0.0, 0.5, 1.0]), [1.0, 6.0, 10.0]);
//! assert_eq!(td.cdf(5.0), 0.45);
//! assert_eq!(td.rank(2.5), 2);
//! assert_eq!(td.rev_rank(2.5), 8);
//! assert_eq!(td.trimmed_mean(0.1, 0.9), 5.5);
//!
//! // Accuracy on 10 000 seeded uniform values: the median is within 1 % of the truth.
//! let mut big = TDigest::new(100.0, u64::MAX)?;
//! let mut x = 0x9e37_79b9_7f4a_7c15u64;
//! for _ in 0..10_000 {
//!     x ^= x << 13; x ^= x >> 7; x ^= x << 17;
//!     big.add((x >> 11) as f64 / (1u64 << 53) as f64).unwrap();
//! }
//! assert!((big.quantiles(&[0.5])[0] - 0.5).abs() < 0.01);
//! # Ok::<(), sift::compat::redisbloom::TDigestCreateError>(())
//! ```

use std::f64::consts::PI;

use crate::bits::{CowHandle, CowWriter, Storage};

/// Default compression of `TDIGEST.CREATE` (§3).
pub const TDIGEST_DEFAULT_COMPRESSION: f64 = 100.0;
/// Largest compression whose capacity `6·c + 10` fits RedisBloom's 32-bit node count (§7.1).
pub const TDIGEST_MAX_COMPRESSION: f64 = 357_913_939.0;

/// The NaN RedisBloom returns as a constant (empty digest, single unmerged observation): the
/// positive one, printed `nan` by Redis 7.0.
const CONSTANT_NAN: f64 = f64::NAN;
/// The NaN x86-64 arithmetic produces (`0/0`, `inf − inf`): sign bit set, printed `-nan` by
/// Redis 7.0. Results of arithmetic that are NaN are given this one on every platform (§7.8).
const ARITHMETIC_NAN: f64 = f64::from_bits(0xfff8_0000_0000_0000);

fn arithmetic(v: f64) -> f64 {
    if v.is_nan() {
        ARITHMETIC_NAN
    } else {
        v
    }
}

/// C's `(long long)` of a double as x86-64 does it: truncation, and `i64::MIN` for NaN,
/// infinities and values out of range (§7.8).
pub(crate) fn f64_to_i64(v: f64) -> i64 {
    if v.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&v) {
        i64::MIN
    } else {
        v as i64
    }
}

fn min2(a: f64, b: f64) -> f64 {
    if a < b {
        a
    } else {
        b
    }
}

fn max2(a: f64, b: f64) -> f64 {
    if a > b {
        a
    } else {
        b
    }
}

/// The weighted average of two values, clamped between them (§7.5).
fn wavg(x1: f64, w1: f64, x2: f64, w2: f64) -> f64 {
    let s = |a: f64, wa: f64, b: f64, wb: f64| max2(a, min2((a * wa + b * wb) / (wa + wb), b));
    if x1 <= x2 {
        s(x1, w1, x2, w2)
    } else {
        s(x2, w2, x1, w1)
    }
}

/// Why a digest could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TDigestCreateError {
    /// The compression is not a positive finite number. (TDIGEST.CREATE and TDIGEST.MERGE check
    /// their integer argument first: `ERR T-Digest: compression parameter needs to be a positive
    /// integer`.)
    #[error("compression must be a positive finite number")]
    InvalidCompression,
    /// The capacity `6·⌊c⌋ + 10` does not fit 32 bits, the node arrays exceed the caller's byte
    /// budget, or the allocation failed. (`ERR T-Digest: allocation failed` in TDIGEST.CREATE,
    /// `ERR T-Digest: allocation of destination digest failed` in TDIGEST.MERGE.)
    #[error("could not allocate the node arrays")]
    AllocationFailed,
}

/// An add that does not fit: no room after compressing, or a total weight beyond i64
/// (`ERR T-Digest: overflow detected`, §7.2). Earlier adds of the same command stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("t-digest overflow: no room for the node or the total weight exceeds i64")]
pub struct TDigestOverflow;

/// The numbers of `TDIGEST.INFO`, in its order (§8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TDigestInfo {
    /// `Compression`: the compression truncated to an integer.
    pub compression: i64,
    /// `Capacity`: node capacity.
    pub capacity: i64,
    /// `Merged nodes`.
    pub merged_nodes: i64,
    /// `Unmerged nodes`.
    pub unmerged_nodes: i64,
    /// `Merged weight`.
    pub merged_weight: i64,
    /// `Unmerged weight`.
    pub unmerged_weight: i64,
    /// `Observations`: merged + unmerged weight.
    pub observations: i64,
    /// `Total compressions`.
    pub total_compressions: i64,
    /// `Memory usage`: `80 + 16·capacity` (current RedisBloom; 2.6 said `8 + 16·capacity`).
    pub memory_usage: i64,
}

/// A merging t-digest with RedisBloom's layout and arithmetic (§7).
#[derive(Clone)]
pub struct TDigest {
    compression: f64,
    cap: usize,
    min: f64,
    max: f64,
    merged_nodes: usize,
    unmerged_nodes: usize,
    merged_weight: i64,
    unmerged_weight: i64,
    total_compressions: i64,
    /// The nodes' means and weights, `cap` each: centroids first, then buffered nodes. Large
    /// ones in huge-page storage, which a snapshot can read while the digest changes
    /// ([`TDigest::freeze`]).
    mean: Storage<f64>,
    weight: Storage<i64>,
    /// Centroids a chunked load has still to fill ([`TDigest::load_nodes`]); 0 otherwise. Not
    /// part of equality.
    load_missing: usize,
}

/// A piece of centroids that is not the next one of a chunked load ([`TDigest::load_nodes`]):
/// pieces come in order from the first centroid, each whole nodes (16 bytes: the means, then
/// the weights), and together exactly the centroids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{len} bytes of centroids at node {at}: expected whole nodes from node {expected} of {merged}")]
pub struct TDigestNodesError {
    /// The first node of the piece.
    pub at: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The node the next piece must start at.
    pub expected: u64,
    /// Centroids of the digest.
    pub merged: u64,
}

/// Bytes of one node in a chunked dump's piece: its mean and its weight.
pub const TDIGEST_NODE_BYTES: usize = 16;

impl PartialEq for TDigest {
    /// Equal state, doubles compared bit for bit, nodes past the used ones ignored (they are
    /// never read).
    fn eq(&self, o: &Self) -> bool {
        let n = self.merged_nodes + self.unmerged_nodes;
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        self.compression.to_bits() == o.compression.to_bits()
            && self.cap == o.cap
            && self.min.to_bits() == o.min.to_bits()
            && self.max.to_bits() == o.max.to_bits()
            && (self.merged_nodes, self.unmerged_nodes) == (o.merged_nodes, o.unmerged_nodes)
            && (self.merged_weight, self.unmerged_weight, self.total_compressions)
                == (o.merged_weight, o.unmerged_weight, o.total_compressions)
            && bits(&self.mean[..n]) == bits(&o.mean[..n])
            && self.weight[..n] == o.weight[..n]
    }
}

impl core::fmt::Debug for TDigest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TDigest")
            .field("compression", &self.compression)
            .field("cap", &self.cap)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("merged_nodes", &self.merged_nodes)
            .field("unmerged_nodes", &self.unmerged_nodes)
            .field("merged_weight", &self.merged_weight)
            .field("unmerged_weight", &self.unmerged_weight)
            .field("total_compressions", &self.total_compressions)
            .finish_non_exhaustive()
    }
}

/// Node capacity of a compression: `6·⌊c⌋ + 10`, if the compression is positive and finite and
/// the capacity fits RedisBloom's 32-bit count.
pub fn tdigest_capacity(compression: f64) -> Result<usize, TDigestCreateError> {
    if !(compression > 0.0 && compression.is_finite()) {
        return Err(TDigestCreateError::InvalidCompression);
    }
    let cap = 6.0 * compression.floor() + 10.0;
    if cap > i32::MAX as f64 {
        return Err(TDigestCreateError::AllocationFailed);
    }
    Ok(cap as usize)
}

/// The compression of `TDIGEST.MERGE`'s result (§7.6): `explicit` (the COMPRESSION argument)
/// if given; else, with OVERRIDE or no existing destination, the largest compression among the
/// listed sources (each listed occurrence; the destination only if listed); else the existing
/// destination's.
pub fn tdigest_merge_compression(
    explicit: Option<f64>,
    override_destination: bool,
    destination: Option<f64>,
    sources: &[f64],
) -> f64 {
    if let Some(c) = explicit {
        return c;
    }
    match destination {
        Some(d) if !override_destination => d,
        _ => sources.iter().copied().fold(0.0, max2),
    }
}

impl TDigest {
    /// An empty digest (`TDIGEST.CREATE`, §7.1). `max_bytes` caps the node arrays
    /// (`16 · capacity` bytes): a larger digest is refused before anything is allocated.
    pub fn new(compression: f64, max_bytes: u64) -> Result<Self, TDigestCreateError> {
        let cap = tdigest_capacity(compression)?;
        if cap as u64 * 16 > max_bytes {
            return Err(TDigestCreateError::AllocationFailed);
        }
        let mean = Storage::zeroed(cap).map_err(|_| TDigestCreateError::AllocationFailed)?;
        let weight = Storage::zeroed(cap).map_err(|_| TDigestCreateError::AllocationFailed)?;
        Ok(TDigest {
            compression,
            cap,
            min: f64::MAX,
            max: -f64::MAX,
            merged_nodes: 0,
            unmerged_nodes: 0,
            merged_weight: 0,
            unmerged_weight: 0,
            total_compressions: 0,
            mean,
            weight,
            load_missing: 0,
        })
    }

    /// `TDIGEST.RESET` (§7.1): empty again; compression and capacity stay.
    pub fn reset(&mut self) {
        self.min = f64::MAX;
        self.max = -f64::MAX;
        self.merged_nodes = 0;
        self.unmerged_nodes = 0;
        self.merged_weight = 0;
        self.unmerged_weight = 0;
        self.total_compressions = 0;
    }

    /// The compression δ.
    pub fn compression(&self) -> f64 {
        self.compression
    }
    /// Node capacity, `6·⌊δ⌋ + 10`.
    pub fn capacity(&self) -> usize {
        self.cap
    }
    /// Number of observations: merged plus unmerged weight.
    pub fn size(&self) -> i64 {
        self.merged_weight.wrapping_add(self.unmerged_weight)
    }
    /// Smallest value added (`f64::MAX` when empty): `TDIGEST.MIN` answers NaN for an empty
    /// digest, see [`TDigest::min_value`].
    pub fn min(&self) -> f64 {
        self.min
    }
    /// Largest value added (`-f64::MAX` when empty).
    pub fn max(&self) -> f64 {
        self.max
    }
    /// Centroids (mean, weight) followed by buffered nodes: `merged_nodes + unmerged_nodes`
    /// entries.
    pub fn nodes(&self) -> impl Iterator<Item = (f64, i64)> + '_ {
        let n = self.merged_nodes + self.unmerged_nodes;
        self.mean[..n].iter().copied().zip(self.weight[..n].iter().copied())
    }
    /// Centroids at the front of the node array.
    pub fn merged_nodes(&self) -> usize {
        self.merged_nodes
    }
    /// Buffered nodes after them.
    pub fn unmerged_nodes(&self) -> usize {
        self.unmerged_nodes
    }
    /// Total weight of the centroids.
    pub fn merged_weight(&self) -> i64 {
        self.merged_weight
    }
    /// Total weight of the buffered nodes.
    pub fn unmerged_weight(&self) -> i64 {
        self.unmerged_weight
    }
    /// Completed compressions.
    pub fn total_compressions(&self) -> i64 {
        self.total_compressions
    }
    /// Memory the type's callback reports to `MEMORY USAGE`, also INFO's `Memory usage`
    /// (§10.7): `80 + 16 · capacity`.
    pub fn memory_usage(&self) -> u64 {
        80 + 16 * self.cap as u64
    }

    /// `TDIGEST.INFO` (§8); it does not compress.
    pub fn info(&self) -> TDigestInfo {
        TDigestInfo {
            compression: f64_to_i64(self.compression),
            capacity: self.cap as i64,
            merged_nodes: self.merged_nodes as i64,
            unmerged_nodes: self.unmerged_nodes as i64,
            merged_weight: self.merged_weight,
            unmerged_weight: self.unmerged_weight,
            observations: self.size(),
            total_compressions: self.total_compressions,
            memory_usage: self.memory_usage() as i64,
        }
    }

    /// Rebuilds a digest from its RDB fields (§10.5); the caller checked the counts.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        compression: f64,
        min: f64,
        max: f64,
        merged_nodes: usize,
        unmerged_nodes: usize,
        total_compressions: i64,
        merged_weight: i64,
        unmerged_weight: i64,
        max_bytes: u64,
    ) -> Result<Self, TDigestCreateError> {
        let mut td = TDigest::new(compression, max_bytes)?;
        td.min = min;
        td.max = max;
        td.merged_nodes = merged_nodes;
        td.unmerged_nodes = unmerged_nodes;
        td.total_compressions = total_compressions;
        td.merged_weight = merged_weight;
        td.unmerged_weight = unmerged_weight;
        Ok(td)
    }

    pub(crate) fn set_node(&mut self, i: usize, mean: f64, weight: i64) {
        let (gm, gw) = (self.mean.cow_guard(), self.weight.cow_guard());
        let (mut wm, mut ww) = (gm.as_ref().map(|g| g.writer()), gw.as_ref().map(|g| g.writer()));
        self.write_node(wm.as_mut(), ww.as_mut(), i, mean, weight);
    }

    /// Sets node `i`; `wm` and `ww` are the locks of a snapshot reading the means and the
    /// weights, if one is: the node's pieces are saved for it first.
    #[inline]
    fn write_node(
        &mut self,
        wm: Option<&mut CowWriter<'_>>,
        ww: Option<&mut CowWriter<'_>>,
        i: usize,
        mean: f64,
        weight: i64,
    ) {
        if let Some(w) = wm {
            w.before_write_values(&self.mean, i..i + 1);
        }
        if let Some(w) = ww {
            w.before_write_values(&self.weight, i..i + 1);
        }
        self.mean[i] = mean;
        self.weight[i] = weight;
    }

    /// A digest with the given fields whose `merged_nodes` centroids are all 0 until
    /// [`TDigest::load_nodes`] fills them: the header of a chunked dump.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn with_nodes_to_load(
        compression: f64,
        min: f64,
        max: f64,
        merged_nodes: usize,
        unmerged_nodes: usize,
        total_compressions: i64,
        merged_weight: i64,
        unmerged_weight: i64,
        max_bytes: u64,
    ) -> Result<Self, TDigestCreateError> {
        let mut t = TDigest::from_parts(
            compression,
            min,
            max,
            merged_nodes,
            unmerged_nodes,
            total_compressions,
            merged_weight,
            unmerged_weight,
            max_bytes,
        )?;
        t.load_missing = merged_nodes;
        Ok(t)
    }

    /// Sets centroids `at..at + n` from a piece of a chunked dump: `n` means, then `n` weights,
    /// 8 little-endian bytes each ([`TDigest::node_bytes`]). Pieces come in order from the
    /// first centroid; one that is not the next, is not whole nodes, or goes past the
    /// centroids is refused, and nothing changes.
    pub fn load_nodes(&mut self, at: usize, data: &[u8]) -> Result<(), TDigestNodesError> {
        let expected = self.merged_nodes - self.load_missing;
        let n = data.len() / TDIGEST_NODE_BYTES;
        if at != expected || data.len() % TDIGEST_NODE_BYTES != 0 || n > self.load_missing {
            return Err(TDigestNodesError {
                at: at as u64,
                len: data.len() as u64,
                expected: expected as u64,
                merged: self.merged_nodes as u64,
            });
        }
        let (means, weights) = data.split_at(8 * n);
        let (gm, gw) = (self.mean.cow_guard(), self.weight.cow_guard());
        let (mut wm, mut ww) = (gm.as_ref().map(|g| g.writer()), gw.as_ref().map(|g| g.writer()));
        for (i, (m, w)) in means.chunks_exact(8).zip(weights.chunks_exact(8)).enumerate() {
            let m = f64::from_le_bytes(m.try_into().expect("8 bytes"));
            let w = i64::from_le_bytes(w.try_into().expect("8 bytes"));
            self.write_node(wm.as_mut(), ww.as_mut(), at + i, m, w);
        }
        self.load_missing -= n;
        Ok(())
    }

    /// Centroids a chunked load has not filled yet: not 0 after the last piece means pieces
    /// were missing.
    pub fn load_missing(&self) -> usize {
        self.load_missing
    }

    /// Appends the piece of a chunked dump holding nodes `range`: their means, then their
    /// weights, 8 little-endian bytes each (the weights exact, not as the RDB's doubles).
    pub fn node_bytes(&self, range: core::ops::Range<usize>, out: &mut Vec<u8>) {
        out.reserve(range.len() * TDIGEST_NODE_BYTES);
        for m in &self.mean[range.clone()] {
            out.extend_from_slice(&m.to_le_bytes());
        }
        for w in &self.weight[range] {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// The digest as it is now, to be dumped later while it keeps changing: the header of its
    /// chunked dump (`save_tdigest_chunked_header`, made now), and the node arrays guarded,
    /// writers copying aside only the [`COW_PIECE`](crate::bits::COW_PIECE)-sized pieces they
    /// change before the snapshot has read them. Between compressions an add writes one node
    /// past the centroids, so it saves at most one piece of each array; a compression rewrites
    /// every node and saves every piece the snapshot has not read yet (a copy of the centroids,
    /// beside the sort it does anyway). `None` for small arrays (copied) and for a digest with
    /// buffered nodes (its dump is the one-chunk RDB form, see the command layer).
    pub fn freeze(&self) -> Option<FrozenTDigest> {
        if self.unmerged_nodes > 0 {
            return None;
        }
        let mean = self.mean.freeze()?;
        let Some(weight) = self.weight.freeze() else {
            return None; // the arrays are the same size: both are huge or neither
        };
        let mut header = Vec::new();
        super::rdb::save_tdigest_chunked_header(
            self,
            &mut super::rdb::ModuleFieldWriter { out: &mut header },
        );
        Some(FrozenTDigest { header, merged: self.merged_nodes, mean, weight })
    }

    /// `TDIGEST.ADD`'s step for one value: one observation of weight 1 (§7.2). The command
    /// refuses NaN and infinities before adding anything.
    pub fn add(&mut self, value: f64) -> Result<(), TDigestOverflow> {
        self.add_weighted(value, 1)
    }

    /// Adds a node of weight `weight` (§7.2): compresses first when the array is full but one,
    /// then fails if there is still no room or a total weight would overflow i64.
    pub fn add_weighted(&mut self, value: f64, weight: i64) -> Result<(), TDigestOverflow> {
        if self.merged_nodes + self.unmerged_nodes + 1 >= self.cap {
            self.compress();
        }
        let pos = self.merged_nodes + self.unmerged_nodes;
        if pos >= self.cap {
            return Err(TDigestOverflow);
        }
        let unmerged = self.unmerged_weight.checked_add(weight).ok_or(TDigestOverflow)?;
        unmerged.checked_add(self.merged_weight).ok_or(TDigestOverflow)?;
        if value < self.min {
            self.min = value;
        }
        if value > self.max {
            self.max = value;
        }
        self.set_node(pos, value, weight);
        self.unmerged_nodes += 1;
        self.unmerged_weight = unmerged;
        Ok(())
    }

    /// Merges the buffered nodes into the centroids (§7.3). A digest whose total weight is at
    /// most 1 is sorted but otherwise left as it is.
    pub fn compress(&mut self) {
        if self.unmerged_nodes == 0 {
            return;
        }
        let n = self.merged_nodes + self.unmerged_nodes;
        // The sort and the merge rewrite nodes 0..n: a snapshot reading them gets its pieces
        // saved first, all at once.
        let (gm, gw) = (self.mean.cow_guard(), self.weight.cow_guard());
        if let Some(g) = &gm {
            g.writer().before_write_values(&self.mean, 0..n);
        }
        if let Some(g) = &gw {
            g.writer().before_write_values(&self.weight, 0..n);
        }
        quicksort(&mut self.mean[..n], &mut self.weight[..n]);
        let total = self.merged_weight as f64 + self.unmerged_weight as f64;
        if total <= 1.0 {
            return;
        }
        let normalizer = self.compression / (((2.0 * PI) * total) * total.ln());
        let (mean, weight) = (&mut self.mean[..], &mut self.weight[..]);
        let mut cur = 0;
        let mut so_far = 0.0;
        for i in 1..n {
            let proposed = weight[cur] as f64 + weight[i] as f64;
            let z = proposed * normalizer;
            let q0 = so_far / total;
            let q2 = (so_far + proposed) / total;
            if z <= q0 * (1.0 - q0) && z <= q2 * (1.0 - q2) {
                weight[cur] = weight[cur].wrapping_add(weight[i]);
                mean[cur] += ((mean[i] - mean[cur]) * weight[i] as f64) / weight[cur] as f64;
            } else {
                so_far += weight[cur] as f64;
                cur += 1;
                weight[cur] = weight[i];
                mean[cur] = mean[i];
            }
            if cur != i {
                weight[i] = 0;
                mean[i] = 0.0;
            }
        }
        self.merged_nodes = cur + 1;
        self.merged_weight = f64_to_i64(total);
        self.unmerged_nodes = 0;
        self.unmerged_weight = 0;
        self.total_compressions = self.total_compressions.wrapping_add(1);
    }

    /// `TDIGEST.MIN`: the smallest value, NaN when empty. Does not compress.
    pub fn min_value(&self) -> f64 {
        if self.size() > 0 {
            self.min
        } else {
            CONSTANT_NAN
        }
    }

    /// `TDIGEST.MAX`: the largest value, NaN when empty. Does not compress.
    pub fn max_value(&self) -> f64 {
        if self.size() > 0 {
            self.max
        } else {
            CONSTANT_NAN
        }
    }

    /// The quantile walk of §7.5 from state `(so_far, pos)`.
    fn walk(&self, index: f64, so_far: &mut f64, pos: &mut usize) -> f64 {
        let n = self.merged_nodes;
        let total = self.merged_weight as f64;
        let (mean, weight) = (&self.mean[..], &self.weight[..]);
        let lw = weight[0] as f64;
        let rw = weight[n - 1] as f64;
        let rm = mean[n - 1];
        if lw > 1.0 && index < lw / 2.0 {
            return self.min + ((index - 1.0) / (lw / 2.0 - 1.0)) * (mean[0] - self.min);
        }
        if index > self.merged_weight.wrapping_sub(1) as f64 {
            return self.max;
        }
        if rw > 1.0 && total - index <= rw / 2.0 {
            return self.max - (((total - index) - 1.0) / (rw / 2.0 - 1.0)) * (self.max - rm);
        }
        while *pos < n - 1 {
            let a = weight[*pos] as f64;
            let b = weight[*pos + 1] as f64;
            let (ma, mb) = (mean[*pos], mean[*pos + 1]);
            let dw = (a + b) / 2.0;
            if *so_far + dw > index {
                let mut left = 0.0;
                if a == 1.0 {
                    if index - *so_far < 0.5 {
                        return ma;
                    }
                    left = 0.5;
                }
                let mut right = 0.0;
                if b == 1.0 {
                    if (*so_far + dw) - index <= 0.5 {
                        return mb;
                    }
                    right = 0.5;
                }
                let z1 = (index - *so_far) - left;
                let z2 = ((*so_far + dw) - index) - right;
                return wavg(ma, z2, mb, z1);
            }
            *so_far += dw;
            *pos += 1;
        }
        let z1 = (index - total) - rw / 2.0;
        let z2 = rw / 2.0 - z1;
        wavg(rm, z1, self.max, z2)
    }

    /// `TDIGEST.QUANTILE q…` after the arguments were checked to be in [0, 1] (§7.5):
    /// compresses, then one answer per quantile, in argument order.
    pub fn quantiles(&mut self, qs: &[f64]) -> Vec<f64> {
        self.compress();
        let n = self.merged_nodes;
        if n == 0 {
            return vec![CONSTANT_NAN; qs.len()];
        }
        if n == 1 {
            return vec![self.mean[0]; qs.len()];
        }
        let total = self.merged_weight as f64;
        let fresh = || (self.weight[0] as f64 / 2.0, 0usize);
        let (mut so_far, mut pos) = fresh();
        let mut prev = f64::NEG_INFINITY;
        // Within a non-decreasing run the walk's state carries over (each index is at least the
        // previous one), which gives the answers of a fresh walk per quantile, faster.
        qs.iter()
            .map(|&q| {
                let index = q * total;
                if index < prev {
                    (so_far, pos) = fresh();
                }
                prev = index;
                arithmetic(self.walk(index, &mut so_far, &mut pos))
            })
            .collect()
    }

    /// The single-quantile form used by BYRANK / BYREVRANK (§7.5).
    fn quantile_single(&mut self, q: f64) -> f64 {
        self.compress();
        let n = self.merged_nodes;
        if !(0.0..=1.0).contains(&q) || n == 0 {
            return CONSTANT_NAN;
        }
        if n == 1 {
            return self.mean[0];
        }
        let index = q * self.merged_weight as f64;
        if index < 1.0 {
            return self.min;
        }
        let (mut so_far, mut pos) = (self.weight[0] as f64 / 2.0, 0usize);
        arithmetic(self.walk(index, &mut so_far, &mut pos))
    }

    /// `TDIGEST.CDF`'s answer for one value (§7.5); compresses first.
    pub fn cdf(&mut self, x: f64) -> f64 {
        self.compress();
        let n = self.merged_nodes;
        if n == 0 {
            return CONSTANT_NAN;
        }
        arithmetic(self.cdf_compressed(x))
    }

    fn cdf_compressed(&self, x: f64) -> f64 {
        let n = self.merged_nodes;
        let total = self.merged_weight as f64;
        let (mean, weight, min, max) = (&self.mean[..], &self.weight[..], self.min, self.max);
        if x < min {
            return 0.0;
        }
        if x > max {
            return 1.0;
        }
        if n == 1 {
            if x - min <= max - min {
                return 0.5;
            }
            return (x - min) / (max - min);
        }
        if x < mean[0] {
            let width = mean[0] - min;
            if width > 0.0 {
                if x == min {
                    return 0.5 / total;
                }
                return (1.0 + ((x - min) / width) * (weight[0] as f64 / 2.0 - 1.0)) / total;
            }
            return 0.0;
        }
        if x > mean[n - 1] {
            let width = max - mean[n - 1];
            if width > 0.0 {
                if x == max {
                    return 1.0 - 0.5 / total;
                }
                return 1.0 - (1.0 + ((max - x) / width) * (weight[n - 1] as f64 / 2.0 - 1.0)) / total;
            }
            return 1.0;
        }
        let mut so_far = 0.0;
        for it in 0..n - 1 {
            if mean[it] == x {
                let mut dw = 0.0;
                let mut j = it;
                while j < n && mean[j] == x {
                    dw += weight[j] as f64;
                    j += 1;
                }
                return (so_far + dw / 2.0) / total;
            }
            if mean[it] <= x && x < mean[it + 1] {
                let a = weight[it] as f64;
                let b = weight[it + 1] as f64;
                let (ma, mb) = (mean[it], mean[it + 1]);
                if mb - ma > 0.0 {
                    let mut le = 0.0;
                    let mut re = 0.0;
                    if a == 1.0 {
                        if b == 1.0 {
                            return (so_far + 1.0) / total;
                        }
                        le = 0.5;
                    } else if b == 1.0 {
                        re = 0.5;
                    }
                    let dw = (a + b) / 2.0;
                    return ((so_far + a / 2.0 + le) + ((dw - le - re) * (x - ma)) / (mb - ma)) / total;
                }
                return (so_far + (a + b) / 2.0) / total;
            }
            so_far += weight[it] as f64;
        }
        1.0 - 0.5 / total
    }

    /// `TDIGEST.RANK`'s answer for one value (§7.5): −2 when empty, −1 below the minimum, the
    /// size above the maximum, else the CDF times the size, rounded half down.
    pub fn rank(&mut self, x: f64) -> i64 {
        let (size, min, max) = (self.size() as f64, self.min, self.max);
        if size == 0.0 {
            return -2;
        }
        if x < min {
            return -1;
        }
        if x > max {
            return f64_to_i64(size);
        }
        let t = self.cdf(x) * size;
        f64_to_i64(half_down(t))
    }

    /// `TDIGEST.REVRANK`'s answer for one value (§7.5).
    pub fn rev_rank(&mut self, x: f64) -> i64 {
        let (size, min, max) = (self.size() as f64, self.min, self.max);
        if size == 0.0 {
            return -2;
        }
        if x < min {
            return f64_to_i64(size);
        }
        if x > max {
            return -1;
        }
        let t = self.cdf(x) * size;
        f64_to_i64((size - t.round()).round())
    }

    /// `TDIGEST.BYRANK`'s answer for one rank (≥ 0, checked by the command) (§7.5).
    pub fn by_rank(&mut self, rank: i64) -> f64 {
        let (size, min) = (self.size() as f64, self.min);
        if size == 0.0 {
            return CONSTANT_NAN;
        }
        if rank == 0 {
            return min;
        }
        let r = rank as f64;
        if r >= size {
            return f64::INFINITY;
        }
        self.quantile_single(r / size)
    }

    /// `TDIGEST.BYREVRANK`'s answer for one reverse rank (≥ 0) (§7.5).
    pub fn by_rev_rank(&mut self, rank: i64) -> f64 {
        let (size, max) = (self.size() as f64, self.max);
        if size == 0.0 {
            return CONSTANT_NAN;
        }
        if rank == 0 {
            return max;
        }
        let r = rank as f64;
        if r >= size {
            return f64::NEG_INFINITY;
        }
        self.quantile_single(((size - r) - 1.0) / size)
    }

    /// `TDIGEST.TRIMMED_MEAN low high` after the arguments were checked (0 ≤ low < high ≤ 1)
    /// (§7.5); compresses first.
    pub fn trimmed_mean(&mut self, low: f64, high: f64) -> f64 {
        self.compress();
        let n = self.merged_nodes;
        if n == 0 {
            return CONSTANT_NAN;
        }
        if n == 1 {
            return self.mean[0];
        }
        let total = self.merged_weight as f64;
        let left = (total * low).floor();
        let right = (total * high).ceil();
        let (mut done, mut sum, mut cnt) = (0.0, 0.0, 0.0);
        for i in 0..n {
            let w = self.weight[i] as f64;
            let mut add = w;
            add -= min2(max2(0.0, left - done), add);
            add = min2(max2(0.0, right - done), add);
            done += w;
            sum += self.mean[i] * add;
            cnt += add;
            if done >= right {
                break;
            }
        }
        arithmetic(sum / cnt)
    }
}

/// Rounds half down in magnitude, as RedisBloom's RANK does: 2.5 → 2, 2.51 → 3 (§7.5).
fn half_down(t: f64) -> f64 {
    let ip = t.trunc();
    let fp = t - ip;
    if fp.abs() <= 0.5 {
        ip
    } else if ip >= 0.0 {
        ip + 1.0
    } else {
        ip - 1.0
    }
}

/// RedisBloom's quicksort of the nodes by mean (§7.3), with an explicit stack instead of
/// recursion (runs of equal means make it quadratic and deep). Independent sub-ranges are
/// sorted in another order than the recursive version, which does not change the result.
fn quicksort(mean: &mut [f64], weight: &mut [i64]) {
    if mean.len() < 2 {
        return;
    }
    let mut stack = vec![(0usize, mean.len() - 1)];
    while let Some((lo, hi)) = stack.pop() {
        if lo >= hi {
            continue;
        }
        if hi - lo == 1 {
            if mean[lo] > mean[hi] {
                mean.swap(lo, hi);
                weight.swap(lo, hi);
            }
            continue;
        }
        let p = (lo + hi) / 2;
        let pivot = mean[p];
        mean.swap(p, hi);
        weight.swap(p, hi);
        // `store` is the C code's `i + 1`: the next slot for a mean below the pivot.
        let mut store = lo;
        for j in lo..hi {
            if mean[j] < pivot {
                mean.swap(store, j);
                weight.swap(store, j);
                store += 1;
            }
        }
        mean.swap(store, hi);
        weight.swap(store, hi);
        if store > lo {
            stack.push((lo, store - 1));
        }
        stack.push((store + 1, hi));
    }
}

/// A digest as it was when [`TDigest::freeze`] was called. Dropping it ends the copy-on-write.
#[derive(Debug)]
pub struct FrozenTDigest {
    /// `save_tdigest_chunked_header` at the freeze.
    header: Vec<u8>,
    /// Centroids at the freeze.
    merged: usize,
    mean: CowHandle,
    weight: CowHandle,
}

impl FrozenTDigest {
    /// The chunked dump's header at the freeze.
    pub fn header(&self) -> &[u8] {
        &self.header
    }

    /// Centroids at the freeze.
    pub fn merged_nodes(&self) -> usize {
        self.merged
    }

    /// Appends the piece holding centroids `range` as they were at the freeze, as
    /// [`TDigest::node_bytes`] gives it. Each node is read once: read them front to back.
    pub fn node_bytes(&self, range: core::ops::Range<usize>, out: &mut Vec<u8>) {
        let range = range.start.min(self.merged)..range.end.min(self.merged);
        // Grown here, not while a piece is read under the guard's lock.
        out.reserve(range.len() * TDIGEST_NODE_BYTES);
        let start = out.len();
        self.mean.read(8 * range.start, 8 * range.len(), out);
        self.weight.read(8 * range.start, 8 * range.len(), out);
        if cfg!(target_endian = "big") {
            for word in out[start..].chunks_exact_mut(8) {
                word.reverse();
            }
        }
    }
}

/// Builds `TDIGEST.MERGE`'s result (§7.6): [`TDigestMerge::new`] with the compression of
/// [`tdigest_merge_compression`], [`TDigestMerge::absorb`] the old destination (unless
/// OVERRIDE) and then every listed source in order, [`TDigestMerge::finish`]. Absorbing
/// compresses the source in place, as RedisBloom does to the source keys, even if a later
/// absorb fails.
#[derive(Debug)]
pub struct TDigestMerge {
    result: TDigest,
}

impl TDigestMerge {
    /// Starts an empty result with `compression`; `max_bytes` as in [`TDigest::new`].
    pub fn new(compression: f64, max_bytes: u64) -> Result<Self, TDigestCreateError> {
        Ok(TDigestMerge { result: TDigest::new(compression, max_bytes)? })
    }

    /// Compresses the result and `source`, then adds every node of `source` to the result.
    pub fn absorb(&mut self, source: &mut TDigest) -> Result<(), TDigestOverflow> {
        self.result.compress();
        source.compress();
        for (m, w) in source.nodes() {
            self.result.add_weighted(m, w)?;
        }
        Ok(())
    }

    /// The merged digest (not compressed: its last absorbed nodes are still buffered).
    pub fn finish(self) -> TDigest {
        self.result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(c: f64, values: &[f64]) -> TDigest {
        let mut t = TDigest::new(c, u64::MAX).unwrap();
        for &v in values {
            t.add(v).unwrap();
        }
        t
    }

    #[test]
    fn capacities_of_the_spec() {
        for (c, cap) in
            [(1.0, 16), (5.0, 40), (10.0, 70), (37.0, 232), (100.0, 610), (500.0, 3010), (1000.0, 6010)]
        {
            assert_eq!(tdigest_capacity(c), Ok(cap));
        }
        assert_eq!(tdigest_capacity(TDIGEST_MAX_COMPRESSION), Ok(2_147_483_644));
        assert_eq!(
            tdigest_capacity(TDIGEST_MAX_COMPRESSION + 1.0),
            Err(TDigestCreateError::AllocationFailed)
        );
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(tdigest_capacity(bad), Err(TDigestCreateError::InvalidCompression));
        }
        // Refused by the budget before allocating 34 GB.
        assert_eq!(
            TDigest::new(TDIGEST_MAX_COMPRESSION, 1 << 30).unwrap_err(),
            TDigestCreateError::AllocationFailed
        );
        let t = TDigest::new(100.0, 9760).unwrap();
        assert_eq!(t.info().memory_usage, 9840);
        assert_eq!(TDigest::new(100.0, 9759).unwrap_err(), TDigestCreateError::AllocationFailed);
    }

    #[test]
    fn worked_examples_of_the_spec() {
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        let mut t = digest(250.0, &values);
        let qs: Vec<f64> = (0..=20).map(|i| i as f64 * 0.05).collect();
        let want = [1., 1., 2., 2., 3., 3., 4., 4., 5., 5., 6., 6., 7., 7., 8., 8., 9., 9., 10., 10., 10.];
        assert_eq!(t.quantiles(&qs), want);
        assert_eq!((t.cdf(1.0), t.cdf(1.5), t.cdf(5.0)), (0.05, 0.1, 0.45));
        assert_eq!((t.rank(2.5), t.rev_rank(2.5)), (2, 8));
        let by: Vec<f64> = (0..10).map(|r| t.by_rank(r)).collect();
        assert_eq!(by, values);
        assert_eq!(t.trimmed_mean(0.1, 0.9), 5.5);

        let mut t = digest(100.0, &[1.5, 3.5]);
        assert_eq!(t.quantiles(&[0.49, 0.5]), [1.5, 3.5]);
        assert_eq!((t.cdf(2.0), t.cdf(3.5)), (0.5, 0.75));
        assert_eq!(t.trimmed_mean(0.0, 1.0), 2.5);

        let mut t = digest(1.0, &[-1.7e308, -1.7e308, 1.7e308, 1.7e308, 1e308, -1e308, 0.0, 0.0, 0.0, 5.0]);
        assert_eq!(t.quantiles(&[0.1]), [f64::INFINITY]);
        let c = t.cdf(0.0);
        assert!(c.is_nan() && c.is_sign_negative(), "{c}");
        assert_eq!(t.rank(0.0), i64::MIN);
    }

    #[test]
    fn single_observation_is_never_compressed() {
        let mut t = digest(100.0, &[42.0]);
        assert!(t.quantiles(&[0.5])[0].is_nan());
        assert!(t.cdf(42.0).is_nan());
        assert_eq!((t.merged_nodes(), t.unmerged_nodes(), t.total_compressions()), (0, 1, 0));
        assert_eq!((t.min_value(), t.max_value()), (42.0, 42.0));
        assert_eq!(t.rank(42.0), i64::MIN);
        assert!(t.by_rank(1).is_infinite());
        assert!(t.by_rank(0) == 42.0);
        let r = TDigest::new(100.0, u64::MAX).unwrap();
        assert!(r.min_value().is_nan() && r.min_value().is_sign_positive());
    }

    #[test]
    fn signed_zero_keeps_the_first() {
        let t = digest(100.0, &[-0.0, 0.0]);
        assert!(t.min_value().is_sign_negative() && t.max_value().is_sign_negative());
        let t = digest(100.0, &[0.0, -0.0]);
        assert!(t.min_value().is_sign_positive());
    }

    #[test]
    fn quicksort_order_of_equal_means() {
        // Weights tag the nodes; equal means keep the order this quicksort produces.
        let mut m = [2.0, 1.0, 2.0, 0.0, 2.0];
        let mut w = [0i64, 1, 2, 3, 4];
        quicksort(&mut m, &mut w);
        assert_eq!(m, [0.0, 1.0, 2.0, 2.0, 2.0]);
        assert_eq!(w, [3, 1, 2, 0, 4]);
        // Quadratic but stack-safe on a long run of equal values.
        let mut m = vec![7.0; 20_000];
        let mut w: Vec<i64> = (0..20_000).collect();
        quicksort(&mut m, &mut w);
        assert!(m.iter().all(|&v| v == 7.0));
    }

    #[test]
    fn half_down_rounding() {
        assert_eq!(half_down(2.5), 2.0);
        assert_eq!(half_down(2.51), 3.0);
        assert_eq!(half_down(-2.51), -3.0);
        assert!(half_down(f64::NAN).is_nan());
        assert_eq!(f64_to_i64(f64::NAN), i64::MIN);
        assert_eq!(f64_to_i64(9.3e18), i64::MIN);
        assert_eq!(f64_to_i64(-2.9), -2);
    }

    #[test]
    fn merge_compression_rule() {
        assert_eq!(tdigest_merge_compression(Some(30.0), true, Some(5.0), &[100.0]), 30.0);
        assert_eq!(tdigest_merge_compression(None, false, Some(5.0), &[100.0, 200.0]), 5.0);
        assert_eq!(tdigest_merge_compression(None, true, Some(5.0), &[100.0, 200.0]), 200.0);
        assert_eq!(tdigest_merge_compression(None, false, None, &[100.0, 20.0]), 100.0);
    }

    #[test]
    fn self_merge_overflows_at_the_21st() {
        // Fixture `tdov`: compression 1, values 1 2 3, then `TDIGEST.MERGE tdov 4 tdov tdov tdov
        // tdov` again and again: the old destination and the four listed copies are absorbed.
        let mut d = digest(1.0, &[1.0, 2.0, 3.0]);
        let mut ok = 0;
        for _ in 0..33 {
            let mut m = TDigestMerge::new(d.compression(), u64::MAX).unwrap();
            if (0..5).try_for_each(|_| m.absorb(&mut d)).is_ok() {
                d = m.finish();
                ok += 1;
            }
        }
        assert_eq!(ok, 20);
        let i = d.info();
        assert_eq!((i.merged_nodes, i.unmerged_nodes, i.merged_weight), (14, 0, 286102294921875));
        assert_eq!(i.total_compressions, 57);
        assert_eq!(d.rank(2.0), 145414387265993);
    }

    /// The snapshot's view of a compressed digest now: the chunked header, then its centroids
    /// in pieces of 100 000 nodes.
    fn dumped(t: &TDigest) -> Vec<u8> {
        let mut out = Vec::new();
        super::super::rdb::save_tdigest_chunked_header(
            t,
            &mut super::super::rdb::ModuleFieldWriter { out: &mut out },
        );
        for at in (0..t.merged_nodes).step_by(100_000) {
            t.node_bytes(at..t.merged_nodes.min(at + 100_000), &mut out);
        }
        out
    }

    /// The frozen view, read in pieces of 100 000 nodes as a snapshot would.
    fn frozen_dump(f: &FrozenTDigest) -> Vec<u8> {
        let mut out = f.header().to_vec();
        let mut at = 0;
        while at < f.merged_nodes() {
            f.node_bytes(at..at + 100_000, &mut out);
            at += 100_000;
        }
        out
    }

    /// A digest of compression 200 000 (1.2 M nodes, 9.6 MB per array: huge storage, 37
    /// copy-on-write pieces each) holding 500 000 centroids of weight 1 (16 pieces of each
    /// array), as a chunked load builds it.
    fn big_digest() -> TDigest {
        let n = 500_000;
        let mut t =
            TDigest::with_nodes_to_load(200_000.0, 0.0, (n - 1) as f64, n, 0, 1, n as i64, 0, u64::MAX)
                .unwrap();
        let mut piece = Vec::new();
        piece.extend((0..n).flat_map(|i| (i as f64).to_le_bytes()));
        piece.extend((0..n).flat_map(|_| 1i64.to_le_bytes()));
        t.load_nodes(0, &piece).unwrap();
        t
    }

    /// Each kind of write, alone while the digest is frozen, changes the live digest and leaves
    /// the frozen dump as it was, whether the digest is dropped before it is read or not: an add
    /// (buffered), a compression (a quantile query, TDIGEST.MERGE's sources, a save), an add
    /// that fills the buffer and compresses, a reset followed by an add, a chunked load. One
    /// write at a time, so that a write skipping its guard fails.
    #[test]
    fn every_write_alone_keeps_the_frozen_dump() {
        assert!(TDigest::new(100.0, u64::MAX).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let ops: Vec<crate::format::NamedWrite<'_, TDigest>> = vec![
            ("add", Box::new(|t: &mut TDigest| t.add(-5.0).unwrap())),
            (
                "compress",
                Box::new(|t: &mut TDigest| {
                    t.add(-5.0).unwrap();
                    t.add(1e30).unwrap();
                    t.quantiles(&[0.5]);
                }),
            ),
            (
                "add that compresses",
                Box::new(|t: &mut TDigest| {
                    // Distinct values: the quicksort is quadratic on long runs of equal means.
                    let mut k = 0u64;
                    while t.merged_nodes + t.unmerged_nodes + 2 < t.cap {
                        k += 1;
                        t.add((k * 7919 % 1_000_003) as f64 + 0.5).unwrap();
                    }
                    let before = t.total_compressions;
                    t.add_weighted(7.0, 1).unwrap();
                    t.add_weighted(7.0, 1).unwrap();
                    assert_eq!(t.total_compressions, before + 1);
                }),
            ),
            (
                "reset and add",
                Box::new(|t: &mut TDigest| {
                    t.reset();
                    t.add(1.5).unwrap();
                    t.add(2.5).unwrap();
                    t.compress();
                }),
            ),
            ("set_node", Box::new(|t: &mut TDigest| t.set_node(0, -1.0, 1))),
        ];
        // An add leaves its node buffered: compare what a save (which compresses) would write.
        let saved = |t: &TDigest| {
            if t.unmerged_nodes == 0 {
                return dumped(t);
            }
            let mut c = t.clone();
            c.compress();
            dumped(&c)
        };
        crate::format::assert_each_write_keeps(&big_digest, &saved, &TDigest::freeze, &frozen_dump, &ops);
    }

    /// Between compressions an add saves at most one piece of each array (the one its node
    /// lies in), not the centroids.
    #[test]
    fn an_add_copies_only_the_pieces_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let mut t = big_digest();
        let frozen = t.freeze().unwrap();
        for i in 0..1000 {
            t.add(i as f64).unwrap();
        }
        assert!(frozen.mean.saved_pieces() <= 2 && frozen.weight.saved_pieces() <= 2);
        assert!(frozen.mean.saved_pieces() >= 1 && frozen.weight.saved_pieces() >= 1);
    }

    /// A chunked load takes the centroids in order, whole nodes, and counts what is missing.
    #[test]
    fn centroids_load_in_order_and_missing_ones_are_counted() {
        let t = digest(100.0, &(1..=500).map(f64::from).collect::<Vec<_>>());
        let mut t = t;
        t.compress();
        let n = t.merged_nodes;
        let mut bytes = Vec::new();
        t.node_bytes(0..10, &mut bytes);
        let mut rest = Vec::new();
        t.node_bytes(10..n, &mut rest);
        let mut l = TDigest::with_nodes_to_load(
            100.0,
            t.min,
            t.max,
            n,
            0,
            t.total_compressions,
            t.merged_weight,
            0,
            u64::MAX,
        )
        .unwrap();
        assert_eq!(l.load_missing(), n);
        assert!(l.load_nodes(1, &bytes).is_err(), "not the first piece");
        assert!(l.load_nodes(0, &bytes[..17]).is_err(), "not whole nodes");
        l.load_nodes(0, &bytes).unwrap();
        assert!(l.load_nodes(0, &bytes).is_err(), "again");
        let mut too_long = rest.clone();
        too_long.extend_from_slice(&[0; 16]);
        assert!(l.load_nodes(10, &too_long).is_err(), "past the centroids");
        assert_eq!(l.load_missing(), n - 10);
        l.load_nodes(10, &rest).unwrap();
        assert_eq!(l.load_missing(), 0);
        assert_eq!(l, t);
    }
}
