//! Scalable Bloom filter: a chain of [`BlockedBloom`] layers that grows with the set while the
//! compound false-positive rate stays under the target.
//!
//! Almeida, Baquero, Preguiça & Hutchison, "Scalable Bloom filters", Information Processing
//! Letters 101(6), 2007.
//!
//! * **Idea**: start with one layer for `n0` items; when the newest layer is at capacity, add a
//!   layer `growth` times larger with an FPR `tightening` times smaller. Layer `i` holds
//!   `n0·growth^i` items.
//! * **FPR**: a non-member is reported if any layer reports it: `P = 1 - Π(1 - p_i) ≤ Σ p_i`.
//!   Two schedules keep `Σ p_i ≤ p` for every number of layers, so the compound FPR stays below
//!   the target however far the filter grows ([`crate::math::compound_fpr`]):
//!   * *first share* (the default of [`ScalableBloom::new`], share `a` = 0.8): `p_0 = a·p`, then
//!     `p_i = (1 - a)·p·(1 - r)·r^(i-1)`, `r` the tightening ratio;
//!   * *geometric* (Almeida et al., [`ScalableBloom::with_options`]): `p_i = p·(1 - r)·r^i`
//!     ([`crate::math::scalable_first_layer_fpr`]).
//! * **Space**: the price of that guarantee is that every layer is tighter than `p`. At 1% with
//!   growth 2 and tightening 0.5, measured by `bits_per_key_report` (100k items in the first
//!   layer): first share 0.8: 10.46 bits/key at exactly the initial capacity (one layer at
//!   0.8%), 26.6 after growing 10× and 30.1 after growing 100×; geometric: 11.6, 23.3 and 26.6. The
//!   default favours filters that stay near their initial capacity (the usual sizing); pass
//!   `first_share = 1 - r` (or use `with_options`) for the geometric schedule. A fixed-size
//!   [`BlockedBloom`] sized for the final count needs 9.9. The layers also cost one probe each
//!   for a non-member.
//! * **Parameters**: `initial_capacity ≥ 1`, `fpr` in (0, 1), `growth ≥ 1` (at most 1024),
//!   `0 < tightening < 1`, `0 < first_share < 1`; bad values are [`Error::InvalidParameter`].
//! * **Limits**: at most 64 layers; past that (or if memory for a new layer cannot be had),
//!   [`Insert::insert`] keeps filling the newest layer beyond its capacity (the FPR then rises
//!   above the target), while [`ScalableBloom::try_insert`] reports the error. No deletion.
//!
//! ```
//! use sift::prelude::*;
//! use sift::ScalableBloom;
//!
//! let mut f = ScalableBloom::new(1_000, 0.01)?;
//! for i in 0..20_000u32 {
//!     f.insert(i.to_le_bytes());
//! }
//! assert!(f.num_layers() > 1);
//! assert!((0..20_000u32).all(|i| f.contains(i.to_le_bytes())));
//! // 100k non-members: the measured FPR stays within a 99.9% binomial bound of 1%.
//! let fp = (20_000..120_000u32).filter(|i| f.contains(i.to_le_bytes())).count();
//! assert!(fp < 1_100, "{fp} false positives");
//! # Ok::<(), sift::Error>(())
//! ```

use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::format::{
    decode_verified, encode_chain, split_chain, FilterKind, FrozenFile, FrozenPart, ParamWriter,
};
use crate::hash::{Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist};
use crate::BlockedBloom;

/// Most layers a scalable filter adds.
pub const MAX_LAYERS: usize = 64;

/// Largest growth factor accepted.
pub const MAX_GROWTH: f64 = 1024.0;

/// Default growth factor between layers (Almeida et al. recommend 2 for slow growth, 4 for fast).
pub const DEFAULT_GROWTH: f64 = 2.0;

/// Default tightening ratio between layer FPRs.
pub const DEFAULT_TIGHTENING: f64 = 0.5;

/// Default share of the FPR budget given to the first layer by [`ScalableBloom::new`]: its
/// first layer runs at `0.8·p` (10.5 bits/key at 1% instead of 11.6 with `p·(1 - r)`); the
/// later layers share the remaining `0.2·p` with ratio `r` (see [`ScalableBloom::with_first_share`]).
pub const DEFAULT_FIRST_SHARE: f64 = 0.8;

/// How the FPR budget `p` is split over the layers. Both keep `Σ p_i ≤ p` for every number of
/// layers, so the compound FPR `1 - Π(1 - p_i) ≤ Σ p_i` stays under the target however far the
/// filter grows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Schedule {
    /// Almeida et al.: `p_i = p·(1 - r)·r^i` (file schedule id 0).
    Geometric,
    /// `p_0 = a·p`, then `p_i = (1 - a)·p·(1 - r)·r^(i-1)` for `i ≥ 1` (file schedule id 1,
    /// followed by `a`): the first layer, which holds the items of a filter that never grows,
    /// gets most of the budget. `a = 1 - r` is the geometric schedule.
    FirstShare(f64),
}

/// A scalable Bloom filter. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableBloom {
    layers: Vec<BlockedBloom>,
    hasher: Hasher,
    /// `hasher` with its per-seed constants precomputed, for the item paths.
    hot: HotHasher,
    initial_capacity: u64,
    target_fpr: f64,
    growth: f64,
    tightening: f64,
    schedule: Schedule,
    items: u64,
}

/// Capacity and FPR of layer `i`, by repeated multiplication (exactly reproducible, so the
/// decoder can check a file's layers against the schedule).
pub(crate) fn layer_schedule(
    initial: u64,
    fpr: f64,
    growth: f64,
    tightening: f64,
    schedule: Schedule,
    i: usize,
) -> Result<(u64, f64)> {
    let mut cap = initial as f64;
    let mut p = match schedule {
        Schedule::Geometric => math::scalable_first_layer_fpr(fpr, tightening),
        Schedule::FirstShare(a) if i == 0 => fpr * a,
        Schedule::FirstShare(a) => fpr * (1.0 - a) * (1.0 - tightening),
    };
    for j in 0..i {
        cap *= growth;
        if j > 0 || schedule == Schedule::Geometric {
            p *= tightening;
        }
    }
    let cap = cap.ceil();
    if cap >= (1u64 << 53) as f64 || p.is_nan() || p <= 0.0 {
        return Err(Error::CapacityExceeded {
            requested_bytes: u128::MAX,
            limit_bytes: crate::bits::MAX_BYTES,
        });
    }
    Ok((cap as u64, p))
}

pub(crate) fn check_growth(growth: f64) -> Result<()> {
    if !(1.0..=MAX_GROWTH).contains(&growth) {
        return Err(Error::param("growth", growth, "a number from 1 to 1024, e.g. 2"));
    }
    Ok(())
}

fn check_first_share(share: f64) -> Result<()> {
    if !(share > 0.0 && share < 1.0) {
        return Err(Error::param("first_share", share, "a number strictly between 0 and 1, e.g. 0.8"));
    }
    Ok(())
}

pub(crate) fn check_tightening(tightening: f64) -> Result<()> {
    if !(tightening > 0.0 && tightening < 1.0) {
        return Err(Error::param("tightening", tightening, "a number strictly between 0 and 1, e.g. 0.5"));
    }
    Ok(())
}

impl ScalableBloom {
    /// A filter whose first layer holds `expected_items`, with compound FPR ≤ `fpr` however far
    /// it grows: growth 2, tightening 0.5, and [`DEFAULT_FIRST_SHARE`] of the budget for the
    /// first layer ([`ScalableBloom::with_first_share`]).
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        Self::with_first_share(expected_items, fpr, DEFAULT_GROWTH, DEFAULT_TIGHTENING, DEFAULT_FIRST_SHARE)
    }

    /// A filter whose first layer runs at FPR `first_share·fpr` and whose later layers split
    /// the rest geometrically: `p_i = (1 - first_share)·fpr·(1 - r)·r^(i-1)`. The sum is at most
    /// `fpr` for any number of layers, so the compound FPR stays ≤ `fpr` however far it grows.
    ///
    /// The trade-off, at 1% with growth 2 and r = 0.5 (measured by `bits_per_key_report`): a
    /// filter that stays within its initial capacity needs 10.46 bits/key with share 0.8 against
    /// 11.6 with the geometric schedule (`first_share = 1 - r`); after growing 10× it needs 26.6
    /// against 23.3, after 100× 30.1 against 26.6 (the later layers are 2.5× tighter).
    pub fn with_first_share(
        initial_capacity: usize,
        fpr: f64,
        growth: f64,
        tightening: f64,
        first_share: f64,
    ) -> Result<Self> {
        check_items(initial_capacity)?;
        check_fpr(fpr)?;
        check_first_share(first_share)?;
        let kind = HashKind::for_target(
            initial_capacity as u64,
            fpr * first_share.min(1.0 - tightening.clamp(0.0, 1.0)),
        );
        Self::build(
            initial_capacity,
            fpr,
            growth,
            tightening,
            Schedule::FirstShare(first_share),
            Hasher::new(kind, 0),
        )
    }

    /// A filter with chosen growth factor (≥ 1) and tightening ratio (in (0, 1)), with the
    /// geometric schedule of Almeida et al. (`p_i = p·(1 - r)·r^i`).
    pub fn with_options(initial_capacity: usize, fpr: f64, growth: f64, tightening: f64) -> Result<Self> {
        check_items(initial_capacity)?;
        check_fpr(fpr)?;
        let kind = HashKind::for_target(initial_capacity as u64, fpr * (1.0 - tightening.clamp(0.0, 1.0)));
        Self::with_hasher(initial_capacity, fpr, growth, tightening, Hasher::new(kind, 0))
    }

    /// Like [`ScalableBloom::with_options`], with a chosen hash function and seed.
    pub fn with_hasher(
        initial_capacity: usize,
        fpr: f64,
        growth: f64,
        tightening: f64,
        hasher: Hasher,
    ) -> Result<Self> {
        Self::build(initial_capacity, fpr, growth, tightening, Schedule::Geometric, hasher)
    }

    fn build(
        initial_capacity: usize,
        fpr: f64,
        growth: f64,
        tightening: f64,
        schedule: Schedule,
        hasher: Hasher,
    ) -> Result<Self> {
        check_items(initial_capacity)?;
        check_fpr(fpr)?;
        check_growth(growth)?;
        check_tightening(tightening)?;
        if let Schedule::FirstShare(a) = schedule {
            check_first_share(a)?;
        }
        let mut f = ScalableBloom {
            layers: Vec::new(),
            hasher,
            hot: HotHasher::new(hasher),
            initial_capacity: initial_capacity as u64,
            target_fpr: fpr,
            growth,
            tightening,
            schedule,
            items: 0,
        };
        f.grow()?;
        Ok(f)
    }

    /// Adds the next layer.
    fn grow(&mut self) -> Result<()> {
        if self.layers.len() >= MAX_LAYERS {
            return Err(Error::Full { len: self.len() });
        }
        let (cap, p) = layer_schedule(
            self.initial_capacity,
            self.target_fpr,
            self.growth,
            self.tightening,
            self.schedule,
            self.layers.len(),
        )?;
        let cap = usize::try_from(cap).map_err(|_| Error::CapacityExceeded {
            requested_bytes: u128::MAX,
            limit_bytes: crate::bits::MAX_BYTES,
        })?;
        self.layers
            .try_reserve(1)
            .map_err(|_| Error::OutOfMemory { bytes: core::mem::size_of::<BlockedBloom>() })?;
        self.layers.push(BlockedBloom::with_hasher(cap, p, self.hasher)?);
        Ok(())
    }

    /// Inserts the item with this digest, adding a layer when the newest is full. Returns
    /// whether it was new (no layer reported it); an error if a needed layer could not be added
    /// (the item is then not inserted).
    pub fn try_insert_digest(&mut self, d: Digest) -> Result<bool> {
        if self.contains_digest(d) {
            return Ok(false);
        }
        if self.newest().len() as u64 >= self.newest().capacity() {
            self.grow()?;
        }
        self.insert_into_newest(d);
        Ok(true)
    }

    /// [`ScalableBloom::try_insert_digest`] for an item.
    pub fn try_insert<T: AsRef<[u8]>>(&mut self, item: T) -> Result<bool> {
        self.try_insert_digest(self.hot.digest(item.as_ref()))
    }

    /// The file's parameter block.
    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        p.f64(self.growth)
            .f64(self.tightening)
            .f64(self.target_fpr)
            .u64(self.initial_capacity)
            .u64(self.items)
            .u32(self.layers.len() as u32);
        match self.schedule {
            Schedule::Geometric => {
                p.u32(0);
            }
            Schedule::FirstShare(a) => {
                p.u32(1).f64(a);
            }
        }
        p
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing
    /// ([`BlockedBloom::freeze`] for each large layer; the small ones are copied now). `None`
    /// when no layer is large enough to freeze (the caller copies the filter).
    pub fn freeze(&self) -> Option<FrozenFile> {
        let layers: Vec<FrozenFile> = self.layers.iter().map(BlockedBloom::frozen).collect();
        if !layers.iter().any(FrozenFile::is_guarded) {
            return None;
        }
        let members = layers.into_iter().map(FrozenPart::Member).collect();
        Some(FrozenFile::new(Self::KIND, self.hasher, self.params().as_bytes(), members))
    }

    fn newest(&self) -> &BlockedBloom {
        self.layers.last().expect("a scalable filter always has a layer")
    }

    fn insert_into_newest(&mut self, d: Digest) {
        let layer = self.layers.last_mut().expect("a scalable filter always has a layer");
        layer.insert_digest(d);
        self.items += 1;
    }

    /// Number of layers.
    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// The layers, oldest (smallest) first.
    pub fn layers(&self) -> &[BlockedBloom] {
        &self.layers
    }

    /// The item count of the first layer.
    pub fn initial_capacity(&self) -> u64 {
        self.initial_capacity
    }

    /// The compound false-positive rate the filter keeps under.
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Growth factor between layer capacities.
    pub fn growth(&self) -> f64 {
        self.growth
    }

    /// Ratio between the FPRs of consecutive layers.
    pub fn tightening(&self) -> f64 {
        self.tightening
    }

    /// Items the current layers hold before a new one is added.
    pub fn capacity(&self) -> u64 {
        self.layers.iter().map(|l| l.capacity()).sum()
    }

    /// Removes every item and every layer but the first.
    pub fn clear(&mut self) {
        self.layers.truncate(1);
        self.layers[0].clear();
        self.items = 0;
    }
}

impl Filter for ScalableBloom {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// Tests the newest (largest, most likely to hold the item) layer first.
    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        self.layers.iter().rev().any(|l| l.contains_digest(d))
    }

    /// Same answer as the trait's default, hashing through the precomputed state.
    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool {
        self.contains_digest(self.hot.digest(item.as_ref()))
    }

    /// Layer by layer, newest first, each with the prefetching batch kernel; only the items not
    /// yet found go on to the older layers.
    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        assert_eq!(digests.len(), out.len(), "one output slot per digest");
        let mut layers = self.layers.iter().rev();
        let newest = layers.next().expect("a scalable filter always has a layer");
        newest.contains_digests(digests, out);
        let mut rest: Vec<Digest> = Vec::new();
        let mut slots: Vec<usize> = Vec::new();
        let mut found: Vec<bool> = Vec::new();
        for layer in layers {
            rest.clear();
            slots.clear();
            for (i, (d, o)) in digests.iter().zip(out.iter()).enumerate() {
                if !*o {
                    rest.push(*d);
                    slots.push(i);
                }
            }
            if rest.is_empty() {
                break;
            }
            found.clear();
            found.resize(rest.len(), false);
            layer.contains_digests(&rest, &mut found);
            for (&i, &f) in slots.iter().zip(&found) {
                out[i] = f;
            }
        }
    }

    fn len(&self) -> usize {
        self.items.min(usize::MAX as u64) as usize
    }

    fn size_in_bytes(&self) -> usize {
        self.layers.iter().map(|l| l.size_in_bytes()).sum()
    }

    /// Compound FPR of the layers at their current loads: `1 - Π(1 - p_i)`.
    fn expected_fpr(&self) -> f64 {
        math::compound_fpr(self.layers.iter().map(|l| l.expected_fpr()))
    }
}

impl Insert for ScalableBloom {
    /// Inserts unless a layer already reports the item. If a new layer is needed and cannot be
    /// added (64 layers, or no memory), the newest layer takes the item beyond its capacity.
    fn insert_digest(&mut self, d: Digest) -> bool {
        match self.try_insert_digest(d) {
            Ok(new) => new,
            Err(_) => {
                self.insert_into_newest(d);
                true
            }
        }
    }

    /// Same effect as the trait's default, hashing through the precomputed state.
    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool {
        let d = self.hot.digest(item.as_ref());
        self.insert_digest(d)
    }
}

impl Persist for ScalableBloom {
    const KIND: FilterKind = FilterKind::ScalableBloom;

    /// Parameters: growth `f64`, tightening `f64`, target FPR `f64`, initial capacity `u64`,
    /// items `u64`, layer count `u32`, schedule `u32` (0: geometric, `p_i = p·(1-r)·r^i`, the
    /// only value of files written before it existed, where the field was "reserved, 0"; 1:
    /// first share, followed by the share `a` as `f64`, `p_0 = a·p`,
    /// `p_i = (1-a)·p·(1-r)·r^(i-1)`). Payload: for each layer, oldest first, its length `u64`
    /// then its complete [`BlockedBloom`] file (header, parameters, payload, CRC). On decoding,
    /// every layer must match the schedule (capacity `⌈n0·growth^i⌉` and its FPR) and the
    /// file's hasher, and the layers' item counts must add up.
    fn to_bytes(&self) -> Vec<u8> {
        let encoded: Vec<Vec<u8>> = self.layers.iter().map(|l| l.to_bytes()).collect();
        encode_chain(Self::KIND, self.hasher, self.params().as_bytes(), &encoded)
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let growth = r.f64("growth")?;
        let tightening = r.f64("tightening")?;
        let target_fpr = r.fpr("target fpr")?;
        let initial_capacity = r.u64("initial capacity")?;
        let items = r.u64("items")?;
        let count = r.u32("layers")? as usize;
        let schedule = match r.u32("schedule")? {
            0 => Schedule::Geometric,
            1 => {
                let a = r.f64("first share")?;
                if check_first_share(a).is_err() {
                    return Err(FormatError::InvalidParams("scalable bloom: first share out of range").into());
                }
                Schedule::FirstShare(a)
            }
            _ => {
                return Err(FormatError::InvalidParams(
                    "scalable bloom: unknown schedule (this build reads 0 and 1)",
                )
                .into())
            }
        };
        r.finish()?;
        let bad = |what: &'static str| Error::Format(FormatError::InvalidParams(what));
        if check_growth(growth).is_err() || check_tightening(tightening).is_err() {
            return Err(bad("scalable bloom: growth or tightening out of range"));
        }
        if initial_capacity == 0 || count == 0 || count > MAX_LAYERS {
            return Err(bad("scalable bloom: bad initial capacity or layer count"));
        }
        let hasher = raw.hasher();
        let mut layers = Vec::with_capacity(count);
        let mut total = 0u64;
        for (i, bytes) in
            split_chain(raw.payload(), count, ("layer length", "layer"))?.into_iter().enumerate()
        {
            let layer = BlockedBloom::from_bytes(bytes)?;
            let (cap, p) = layer_schedule(initial_capacity, target_fpr, growth, tightening, schedule, i)
                .map_err(|_| bad("scalable bloom: layer schedule overflows"))?;
            if layer.hasher() != hasher || layer.capacity() != cap || layer.target_fpr() != p {
                return Err(bad("scalable bloom: a layer does not match the growth schedule"));
            }
            total = total.saturating_add(layer.len() as u64);
            layers.push(layer);
        }
        if total != items {
            return Err(bad("scalable bloom: item count differs from the layers' sum"));
        }
        Ok(ScalableBloom {
            layers,
            hasher,
            hot: HotHasher::new(hasher),
            initial_capacity,
            target_fpr,
            growth,
            tightening,
            schedule,
            items,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frozen chain writes the file of the moment of the freeze, though inserts fill its large
    /// first layer and add layers afterwards; only the large layer is guarded.
    #[test]
    fn a_frozen_chain_writes_the_file_it_was_frozen_in() {
        assert!(ScalableBloom::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return;
        }
        // About 4.8 MiB in the first layer at 1% / 0.5 tightening: huge storage.
        let mut f = ScalableBloom::with_options(3_000_000, 0.01, 2.0, 0.5).unwrap();
        assert!(f.layers()[0].size_in_bytes() >= crate::bits::HUGE_THRESHOLD);
        for i in 0..1000u32 {
            f.insert(i.to_le_bytes());
        }
        let before = f.to_bytes();
        let frozen = f.freeze().expect("a large layer freezes");
        let mut i = 1000u32;
        while f.num_layers() < 2 {
            f.insert(i.to_le_bytes());
            i += 1;
        }
        for j in i..i + 1000 {
            f.insert(j.to_le_bytes());
        }
        assert_ne!(f.to_bytes(), before);
        assert!(frozen.guard(0).saved_pieces() > 0);
        assert!(frozen.to_vec() == before, "the frozen chain changed");
    }

    #[test]
    fn batch_queries_agree_with_single_over_layers() {
        let mut f = ScalableBloom::new(1000, 0.01).unwrap();
        for i in 0..20_000u32 {
            f.insert(i.to_le_bytes());
        }
        assert!(f.num_layers() >= 4);
        let probes: Vec<[u8; 4]> = (0..60_000u32).map(|i| i.to_le_bytes()).collect();
        let batch = f.contains_many(&probes);
        for (p, b) in probes.iter().zip(&batch) {
            assert_eq!(f.contains(p), *b);
        }
        assert!(batch[..20_000].iter().all(|&b| b), "false negative in a batch");
    }
    use crate::filters::blocked_bloom::tests::{splitmix, upper_bound};

    #[test]
    fn rejects_bad_parameters() {
        assert!(matches!(
            ScalableBloom::new(0, 0.01),
            Err(Error::InvalidParameter { name: "expected_items", .. })
        ));
        for p in [0.0, 1.0, f64::NAN, -1.0] {
            assert!(matches!(ScalableBloom::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })));
        }
        for g in [0.5, 0.0, -2.0, f64::NAN, f64::INFINITY, 2000.0] {
            assert!(
                matches!(
                    ScalableBloom::with_options(10, 0.01, g, 0.5),
                    Err(Error::InvalidParameter { name: "growth", .. })
                ),
                "growth {g}"
            );
        }
        for r in [0.0, 1.0, 1.5, -0.1, f64::NAN] {
            assert!(
                matches!(
                    ScalableBloom::with_options(10, 0.01, 2.0, r),
                    Err(Error::InvalidParameter { name: "tightening", .. })
                ),
                "tightening {r}"
            );
        }
        assert!(ScalableBloom::with_options(10, 0.01, 1.0, 0.9).is_ok());
    }

    #[test]
    fn grows_and_has_no_false_negatives() {
        let mut f = ScalableBloom::new(1000, 0.01).unwrap();
        assert_eq!(f.num_layers(), 1);
        for i in 0..1000u32 {
            assert!(f.insert(i.to_le_bytes()) || f.contains(i.to_le_bytes()));
        }
        assert_eq!(f.num_layers(), 1);
        for i in 1000..100_000u32 {
            f.insert(i.to_le_bytes());
        }
        // 1000·(1 + 2 + … + 64) = 127k ≥ 100k: seven layers.
        assert_eq!(f.num_layers(), 7);
        assert!((0..100_000u32).all(|i| f.contains(i.to_le_bytes())));
        assert!(!f.insert(5u32.to_le_bytes()));
        assert!(f.expected_fpr() <= 0.01);
        // First share 0.8: 0.8%, then 0.2%·(1 - 0.5) = 0.1%, halving.
        let mut sum = 0.0;
        for (i, l) in f.layers().iter().enumerate() {
            assert_eq!(l.capacity(), 1000 << i);
            let want = if i == 0 { 0.008 } else { 0.001 / (1 << (i - 1)) as f64 };
            assert!((l.target_fpr() - want).abs() < 1e-15, "layer {i}: {}", l.target_fpr());
            sum += l.target_fpr();
        }
        assert!(sum < 0.01);
        // The geometric schedule: 0.5%, halving.
        let mut g = ScalableBloom::with_options(1000, 0.01, 2.0, 0.5).unwrap();
        for i in 0..100_000u32 {
            g.insert(i.to_le_bytes());
        }
        assert_eq!(g.num_layers(), 7);
        for (i, l) in g.layers().iter().enumerate() {
            assert_eq!(l.capacity(), 1000 << i);
            assert!((l.target_fpr() - 0.005 / (1 << i) as f64).abs() < 1e-15);
        }
        f.clear();
        assert_eq!((f.num_layers(), f.len()), (1, 0));
        assert!(!f.contains(5u32.to_le_bytes()));
    }

    /// The compound FPR after growing 100× past the initial capacity stays under the target.
    #[test]
    fn measured_fpr_within_bound_after_growth() {
        let (n0, p) = (10_000usize, 0.01);
        let mut f = ScalableBloom::new(n0, p).unwrap();
        let mut st = 23;
        for _ in 0..100 * n0 {
            f.insert_hash(splitmix(&mut st));
        }
        let probes = 1_000_000;
        let fp = (0..probes).filter(|_| f.contains_hash(splitmix(&mut st) ^ (1 << 63))).count();
        let measured = fp as f64 / probes as f64;
        let expected = f.expected_fpr();
        assert!(expected <= p);
        assert!(
            measured <= upper_bound(expected, probes as f64) + 1e-3 * expected,
            "{measured} vs {expected}"
        );
    }

    /// Bits per key at 1% after exactly the initial capacity and after growing 10× and 100×
    /// (the numbers quoted in the module documentation; `--nocapture` prints them).
    #[test]
    fn bits_per_key_report() {
        let first_share = bits_per_key_of(ScalableBloom::new(100_000, 0.01).unwrap());
        assert!(first_share[0] > 9.9 && first_share[0] < 10.5, "{first_share:?}");
        assert!(first_share[1] < 28.0 && first_share[2] < 32.0, "{first_share:?}");
        let geometric = bits_per_key_of(ScalableBloom::with_options(100_000, 0.01, 2.0, 0.5).unwrap());
        assert!(geometric[0] > 9.9 && geometric[0] < 12.5, "{geometric:?}");
        assert!(geometric[1] < 26.0 && geometric[2] < 30.0, "{geometric:?}");
    }

    /// Bits per key of `f` (first layer for 100k items at 1%) at 1×, 10× and 100× that count.
    fn bits_per_key_of(mut f: ScalableBloom) -> Vec<f64> {
        let n0 = 100_000usize;
        let mut st = 1;
        let mut inserted = 0usize;
        let mut bpk = Vec::new();
        for target in [n0, 10 * n0, 100 * n0] {
            while inserted < target {
                f.insert_hash(splitmix(&mut st));
                inserted += 1;
            }
            // Per distinct key offered (a few are refused as false positives of the layers).
            let b = f.size_in_bytes() as f64 * 8.0 / inserted as f64;
            eprintln!(
                "scalable 1%: {:>9} items ({}x), {} layers, {b:.2} bits/key, expected FPR {:.5}",
                f.len(),
                target / n0,
                f.num_layers(),
                f.expected_fpr()
            );
            bpk.push(b);
        }
        bpk
    }

    #[test]
    fn round_trip_and_corruption() {
        let mut f = ScalableBloom::with_options(100, 0.001, 3.0, 0.7).unwrap();
        for i in 0..2000u32 {
            f.insert(i.to_string());
        }
        assert!(f.num_layers() > 2);
        let bytes = f.to_bytes();
        let g = ScalableBloom::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        assert!((0..2000u32).all(|i| g.contains(i.to_string())));
        let n = bytes.len();
        let mut bad = bytes.clone();
        bad[n / 3] ^= 4;
        assert!(ScalableBloom::from_bytes(&bad).is_err());
        for cut in [0, 31, 60, n / 2, n - 1] {
            assert!(ScalableBloom::from_bytes(&bytes[..cut]).is_err());
        }
        assert!(matches!(
            BlockedBloom::from_bytes(&bytes),
            Err(Error::Format(FormatError::WrongKind { .. }))
        ));
    }

    /// Rewrites the parameters or payload of a valid file, with a fresh CRC.
    fn reencode(
        bytes: &[u8],
        params: impl FnOnce(&mut Vec<u8>),
        payload: impl FnOnce(&mut Vec<u8>),
    ) -> Vec<u8> {
        let raw = crate::format::decode(bytes).unwrap();
        let mut p = raw.params().to_vec();
        params(&mut p);
        let mut body = raw.payload().to_vec();
        payload(&mut body);
        let mut e =
            crate::format::Encoder::new(FilterKind::ScalableBloom, raw.hasher(), &p, body.len() as u64);
        e.payload().extend_from_slice(&body);
        e.finish()
    }

    #[test]
    fn inconsistent_files_are_errors() {
        inconsistent_files_of(ScalableBloom::with_options(50, 0.01, 2.0, 0.5).unwrap(), 1);
        inconsistent_files_of(ScalableBloom::new(50, 0.01).unwrap(), 0);
        // The first-share file: a share out of range or different from the layers' is refused.
        let mut f = ScalableBloom::new(50, 0.01).unwrap();
        for i in 0..300u32 {
            f.insert(i.to_le_bytes());
        }
        let bytes = f.to_bytes();
        for a in [0.0f64, 1.0, 1.5, f64::NAN, 0.7] {
            let c = reencode(&bytes, |p| p[48..56].copy_from_slice(&a.to_le_bytes()), |_| {});
            assert!(ScalableBloom::from_bytes(&c).is_err(), "share {a} decoded");
        }
        let c = reencode(&bytes, |p| p[44..48].copy_from_slice(&2u32.to_le_bytes()), |_| {});
        assert!(ScalableBloom::from_bytes(&c).is_err(), "schedule 2 decoded");
    }

    /// Corruptions of the parameters and payload of `f` (after 300 inserts); `other_schedule`
    /// is a schedule id that does not fit the file.
    fn inconsistent_files_of(mut f: ScalableBloom, other_schedule: u32) {
        for i in 0..300u32 {
            f.insert(i.to_le_bytes());
        }
        let bytes = f.to_bytes();
        assert_eq!(ScalableBloom::from_bytes(&reencode(&bytes, |_| {}, |_| {})).unwrap(), f);
        let first_len =
            u64::from_le_bytes(crate::format::decode(&bytes).unwrap().payload()[..8].try_into().unwrap());
        let cases = [
            reencode(&bytes, |p| p[..8].copy_from_slice(&0.5f64.to_le_bytes()), |_| {}), // growth
            reencode(&bytes, |p| p[8..16].copy_from_slice(&1.0f64.to_le_bytes()), |_| {}), // tightening
            reencode(&bytes, |p| p[16..24].copy_from_slice(&0.02f64.to_le_bytes()), |_| {}), // schedule
            reencode(&bytes, |p| p[24..32].copy_from_slice(&0u64.to_le_bytes()), |_| {}), // n0
            reencode(&bytes, |p| p[32..40].copy_from_slice(&7u64.to_le_bytes()), |_| {}), // items
            reencode(&bytes, |p| p[40..44].copy_from_slice(&0u32.to_le_bytes()), |_| {}), // layers
            reencode(&bytes, |p| p[40..44].copy_from_slice(&1000u32.to_le_bytes()), |_| {}), // layers
            reencode(&bytes, |p| p[44..48].copy_from_slice(&other_schedule.to_le_bytes()), |_| {}), // schedule
            reencode(&bytes, |_| {}, |b| b.push(0)), // trailing
            reencode(&bytes, |_| {}, |b| b[..8].copy_from_slice(&u64::MAX.to_le_bytes())), // length
            reencode(&bytes, |_| {}, |b| b[..8].copy_from_slice(&(first_len - 1).to_le_bytes())),
            reencode(&bytes, |_| {}, |b| b[20] ^= 1), // a layer's own CRC
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(ScalableBloom::from_bytes(c).is_err(), "case {i} decoded");
        }
    }
}
