//! A cuckoo filter that grows: when its newest table is full, it adds a larger one.
//!
//! * **Idea**: a chain of [`Cuckoo`] tables, as [`ScalableBloom`](crate::ScalableBloom) chains
//!   Bloom layers (Almeida et al., "Scalable Bloom filters", 2007, applied to cuckoo tables).
//!   Inserts go to the newest table; when it reports [`Error::Full`] (about 95-97% load), a table
//!   `growth` times larger is added and the item goes there. Nothing is ever moved between
//!   tables, so nothing is rehashed and every earlier item stays present.
//! * **FPR**: table `i` holds `⌈n0·g^i⌉` items at `p_i = p·(1 - r)·r^i` (growth `g`, tightening
//!   `r`), so `Σ p_i ≤ p` however many tables there are, and the compound rate
//!   `1 - Π(1 - p_i)` ([`Filter::expected_fpr`], from each table's actual load) stays below the
//!   target `p`. Each table picks the narrowest fingerprint (8, 12 or 16 bits) that meets its
//!   `p_i`, so later tables take more bits per key.
//! * **Limit**: a cuckoo fingerprint is at most 16 bits, so `p_i` cannot go below
//!   `2b/2^16 = 2^-13 ≈ 1.2e-4`; a table that would need less is not added and the insert returns
//!   [`Error::Full`] (also after [`MAX_TABLES`] tables). With the defaults (`g = 2`, `r = 0.5`)
//!   at `p = 1%` that is 6 tables, 63× the initial capacity; at `p = 10%`, 9 tables (511×). A
//!   set that grows without any bound wants a [`ScalableBloom`](crate::ScalableBloom) (no deletes).
//! * **Queries** probe every table (two buckets each), newest first; a query costs about
//!   `2·t` cache misses for `t` tables, so size `n0` for the expected set and let growth absorb
//!   the surprises.
//! * **Deletes and counts**: [`Remove::remove`] removes one copy from the newest table that holds
//!   the item's fingerprint; [`ScalableCuckoo::count`] adds the copies of every table. As for
//!   [`Cuckoo`], removing an item that was never inserted can remove a colliding item.
//!
//! ```
//! use sift::prelude::*;
//! use sift::ScalableCuckoo;
//!
//! let mut f = ScalableCuckoo::new(1_000, 0.01)?;
//! for i in 0..20_000u32 {
//!     f.try_insert(i.to_le_bytes())?; // grows past the first table's 1 000 items
//! }
//! assert!(f.num_tables() > 1);
//! assert!((0..20_000u32).all(|i| f.contains(i.to_le_bytes())));
//! assert!(f.expected_fpr() <= 0.01);
//! assert!(f.remove(7u32.to_le_bytes()));
//! # Ok::<(), sift::Error>(())
//! ```

use crate::error::{check_fpr, check_items, Error, FormatError, Result};
use crate::filters::cuckoo::{fp_bits_for, Cuckoo};
use crate::filters::scalable_bloom::{check_growth, check_tightening, layer_schedule, Schedule};
use crate::format::{
    decode_verified, encode_chain, split_chain, FilterKind, FrozenFile, FrozenPart, ParamWriter,
};
use crate::hash::{Digest, HashKind, Hasher, HotHasher};
use crate::math;
use crate::traits::{Filter, Insert, Persist, Remove};

/// Most tables a filter holds.
pub const MAX_TABLES: usize = 32;

/// A growing chain of cuckoo tables. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableCuckoo {
    /// Oldest first.
    tables: Vec<Cuckoo>,
    growth: f64,
    tightening: f64,
    target_fpr: f64,
    initial_capacity: u64,
    hasher: Hasher,
    hot: HotHasher,
}

impl ScalableCuckoo {
    /// A filter whose first table holds `expected_items`, with compound FPR ≤ `fpr` while it
    /// grows (growth 2, tightening 0.5).
    pub fn new(expected_items: usize, fpr: f64) -> Result<Self> {
        Self::with_options(expected_items, fpr, 2.0, 0.5)
    }

    /// Like [`ScalableCuckoo::new`], with the growth factor (1 to 1024) and the tightening ratio
    /// (strictly between 0 and 1) chosen.
    pub fn with_options(expected_items: usize, fpr: f64, growth: f64, tightening: f64) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        check_growth(growth)?;
        check_tightening(tightening)?;
        let kind =
            HashKind::for_target(expected_items as u64, math::scalable_first_layer_fpr(fpr, tightening));
        Self::with_hasher(expected_items, fpr, growth, tightening, Hasher::new(kind, 0))
    }

    /// Like [`ScalableCuckoo::with_options`], with a chosen hash function and seed.
    pub fn with_hasher(
        expected_items: usize,
        fpr: f64,
        growth: f64,
        tightening: f64,
        hasher: Hasher,
    ) -> Result<Self> {
        check_items(expected_items)?;
        check_fpr(fpr)?;
        check_growth(growth)?;
        check_tightening(tightening)?;
        // The first table runs at p·(1 - r); 16-bit fingerprints reach 2b/2^16 = 2^-13 at best.
        if fp_bits_for(fpr * (1.0 - tightening)).is_none() {
            return Err(Error::param(
                "fpr",
                fpr,
                "at least 2^-13 / (1 - tightening) (2.44e-4 with the default tightening 0.5) for a \
                 scalable cuckoo filter, whose first table gets p·(1 - tightening); use a Cuckoo \
                 (down to 1.22e-4) or a ScalableBloom for lower rates",
            ));
        }
        let mut f = ScalableCuckoo {
            tables: Vec::new(),
            growth,
            tightening,
            target_fpr: fpr,
            initial_capacity: expected_items as u64,
            hasher,
            hot: HotHasher::new(hasher),
        };
        let first = f.table(0)?;
        f.tables.push(first);
        Ok(f)
    }

    /// Table `i` of the schedule, empty.
    fn table(&self, i: usize) -> Result<Cuckoo> {
        let (cap, p) = self.schedule(i)?;
        let cap = usize::try_from(cap).map_err(|_| Error::CapacityExceeded {
            requested_bytes: u128::MAX,
            limit_bytes: crate::bits::MAX_BYTES,
        })?;
        Cuckoo::with_hasher(cap, p, self.hasher)
    }

    /// Capacity and FPR of table `i`.
    fn schedule(&self, i: usize) -> Result<(u64, f64)> {
        layer_schedule(
            self.initial_capacity,
            self.target_fpr,
            self.growth,
            self.tightening,
            Schedule::Geometric,
            i,
        )
    }

    /// The tables, oldest first.
    pub fn tables(&self) -> &[Cuckoo] {
        &self.tables
    }

    /// Number of tables (1 until the first one fills).
    pub fn num_tables(&self) -> usize {
        self.tables.len()
    }

    /// The items the tables so far were sized for.
    pub fn capacity(&self) -> u64 {
        self.tables.iter().map(Cuckoo::capacity).sum()
    }

    /// The compound FPR bound the filter keeps while it grows.
    pub fn target_fpr(&self) -> f64 {
        self.target_fpr
    }

    /// Growth factor between tables.
    pub fn growth(&self) -> f64 {
        self.growth
    }

    /// Tightening ratio between the tables' FPRs.
    pub fn tightening(&self) -> f64 {
        self.tightening
    }

    /// Number of stored copies of `item` over all tables (at least the number of times it was
    /// inserted and not removed).
    pub fn count<T: AsRef<[u8]>>(&self, item: T) -> usize {
        let d = self.hot.digest(item.as_ref());
        self.tables.iter().map(|t| t.count_digest(d)).sum()
    }

    /// The filter's file as it is now, to be written later while the filter keeps changing:
    /// each table large enough is guarded ([`Cuckoo::freeze`]), the others and every header
    /// are copied now. `None` when no table is large enough (the caller copies the filter).
    pub fn freeze(&self) -> Option<FrozenFile> {
        let tables: Vec<FrozenFile> = self.tables.iter().map(Cuckoo::frozen).collect();
        if !tables.iter().any(FrozenFile::is_guarded) {
            return None;
        }
        let members = tables.into_iter().map(FrozenPart::Member).collect();
        Some(FrozenFile::new(Self::KIND, self.hasher, self.params().as_bytes(), members))
    }

    /// The file's parameter block.
    fn params(&self) -> ParamWriter {
        let mut p = ParamWriter::new();
        p.f64(self.growth)
            .f64(self.tightening)
            .f64(self.target_fpr)
            .u64(self.initial_capacity)
            .u64(self.len() as u64)
            .u32(self.tables.len() as u32)
            .u32(0);
        p
    }

    /// Inserts `item`: `Ok(true)` if it was not reported present before, `Ok(false)` if another
    /// copy was stored. When the newest table is full a new one is added; [`Error::Full`] when
    /// no further table can be added (see the module documentation), and the filter is then
    /// unchanged.
    pub fn try_insert<T: AsRef<[u8]>>(&mut self, item: T) -> Result<bool> {
        self.try_insert_digest(self.hot.digest(item.as_ref()))
    }

    /// [`ScalableCuckoo::try_insert`] for a caller-computed 64-bit hash.
    pub fn try_insert_hash(&mut self, hash: u64) -> Result<bool> {
        self.try_insert_digest(Digest::from_u64(hash))
    }

    /// [`ScalableCuckoo::try_insert`] for a digest.
    pub fn try_insert_digest(&mut self, d: Digest) -> Result<bool> {
        let (newest, older) = self.tables.split_last_mut().expect("at least one table");
        let in_older = older.iter().any(|t| t.contains_digest(d));
        match newest.try_insert_digest(d) {
            Ok(new) => return Ok(new && !in_older),
            Err(Error::Full { .. }) => {}
            Err(e) => return Err(e),
        }
        let present = in_older || newest.contains_digest(d);
        let full = || Error::Full { len: self.len() };
        if self.tables.len() >= MAX_TABLES {
            return Err(full());
        }
        let mut next = match self.table(self.tables.len()) {
            Ok(t) => t,
            // The schedule's next FPR is below what 16-bit fingerprints give: the chain ends.
            Err(Error::InvalidParameter { .. }) => return Err(full()),
            Err(e) => return Err(e),
        };
        // A fresh table sized for at least one item takes it without a kick.
        next.try_insert_digest(d)?;
        self.tables.push(next);
        Ok(!present)
    }
}

impl Filter for ScalableCuckoo {
    fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// Newest table first: recent items are the likeliest queries in most uses (a stream being
    /// de-duplicated), and the newest table is the largest.
    #[inline]
    fn contains_digest(&self, d: Digest) -> bool {
        match self.tables.as_slice() {
            // One table (the filter has not grown): its probe alone, inlined.
            [only] => only.contains_digest(d),
            tables => tables.iter().rev().any(|t| t.contains_digest(d)),
        }
    }

    #[inline]
    fn contains<T: AsRef<[u8]>>(&self, item: T) -> bool
    where
        Self: Sized,
    {
        self.contains_digest(self.hot.digest(item.as_ref()))
    }

    /// Each table's batch query (buckets prefetched ahead), newest first, over the digests
    /// still unanswered.
    fn contains_digests(&self, digests: &[Digest], out: &mut [bool]) {
        assert_eq!(digests.len(), out.len(), "one output slot per digest");
        let (newest, older) = self.tables.split_last().expect("at least one table");
        newest.contains_digests(digests, out);
        if older.is_empty() {
            return;
        }
        let mut rest: Vec<usize> = (0..digests.len()).filter(|&i| !out[i]).collect();
        let mut batch: Vec<Digest> = Vec::with_capacity(rest.len());
        let mut hits: Vec<bool> = Vec::with_capacity(rest.len());
        for t in older.iter().rev() {
            if rest.is_empty() {
                break;
            }
            batch.clear();
            batch.extend(rest.iter().map(|&i| digests[i]));
            hits.clear();
            hits.resize(rest.len(), false);
            t.contains_digests(&batch, &mut hits);
            for (&i, &h) in rest.iter().zip(&hits) {
                out[i] = h;
            }
            let mut k = 0;
            rest.retain(|_| {
                k += 1;
                !hits[k - 1]
            });
        }
    }

    fn len(&self) -> usize {
        self.tables.iter().map(Filter::len).sum()
    }

    fn size_in_bytes(&self) -> usize {
        self.tables.iter().map(Filter::size_in_bytes).sum::<usize>()
            + self.tables.len() * core::mem::size_of::<Cuckoo>()
    }

    /// `1 - Π(1 - p_i)` over the tables' rates at their current loads.
    fn expected_fpr(&self) -> f64 {
        math::compound_fpr(self.tables.iter().map(Filter::expected_fpr))
    }
}

impl Insert for ScalableCuckoo {
    /// Inserts a copy; `false` if the item was already reported present **or no table could be
    /// added** ([`ScalableCuckoo::try_insert_digest`] tells the two apart).
    fn insert_digest(&mut self, d: Digest) -> bool {
        self.try_insert_digest(d).unwrap_or(false)
    }

    #[inline]
    fn insert<T: AsRef<[u8]>>(&mut self, item: T) -> bool
    where
        Self: Sized,
    {
        self.insert_digest(self.hot.digest(item.as_ref()))
    }
}

impl Remove for ScalableCuckoo {
    /// Removes one copy from the newest table holding the item's fingerprint.
    fn remove_digest(&mut self, d: Digest) -> bool {
        self.tables.iter_mut().rev().any(|t| t.remove_digest(d))
    }
}

impl Persist for ScalableCuckoo {
    const KIND: FilterKind = FilterKind::ScalableCuckoo;

    /// Parameters (48 bytes): growth `f64`, tightening `f64`, target FPR `f64`, initial
    /// capacity `u64`, items `u64` (sum over the tables), table count `u32` (1 to 32), reserved
    /// `u32` (0; a reader refuses any other value). Payload: for each table, oldest first, its
    /// length `u64` then its complete [`Cuckoo`] file (header, parameters, payload, CRC). On
    /// decoding, every table must have the file's hasher and the capacity and target FPR of its
    /// place in the schedule (`⌈n0·g^i⌉`, `p·(1 - r)·r^i`), and the item counts must add up.
    fn to_bytes(&self) -> Vec<u8> {
        let p = self.params();
        let encoded: Vec<Vec<u8>> = self.tables.iter().map(Persist::to_bytes).collect();
        encode_chain(Self::KIND, self.hasher, p.as_bytes(), &encoded)
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let growth = r.f64("growth")?;
        let tightening = r.f64("tightening")?;
        let target_fpr = r.fpr("target fpr")?;
        let initial_capacity = r.u64("initial capacity")?;
        let items = r.u64("items")?;
        let count = r.u32("tables")? as usize;
        let reserved = r.u32("reserved")?;
        r.finish()?;
        let bad = |what: &'static str| Error::Format(FormatError::InvalidParams(what));
        if check_growth(growth).is_err() || check_tightening(tightening).is_err() {
            return Err(bad("scalable cuckoo: growth or tightening out of range"));
        }
        if initial_capacity == 0 || count == 0 || count > MAX_TABLES || reserved != 0 {
            return Err(bad("scalable cuckoo: bad initial capacity, table count or reserved field"));
        }
        let hasher = raw.hasher();
        let mut f = ScalableCuckoo {
            tables: Vec::with_capacity(count),
            growth,
            tightening,
            target_fpr,
            initial_capacity,
            hasher,
            hot: HotHasher::new(hasher),
        };
        for (i, bytes) in
            split_chain(raw.payload(), count, ("table length", "table"))?.into_iter().enumerate()
        {
            let table = Cuckoo::from_bytes(bytes)?;
            let (cap, p) = f.schedule(i).map_err(|_| bad("scalable cuckoo: table schedule overflows"))?;
            if table.hasher() != hasher || table.capacity() != cap || table.target_fpr() != p {
                return Err(bad("scalable cuckoo: a table does not match the growth schedule"));
            }
            f.tables.push(table);
        }
        if f.len() as u64 != items {
            return Err(bad("scalable cuckoo: item count does not match the tables"));
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> [u8; 8] {
        i.to_le_bytes()
    }

    #[test]
    fn grows_keeps_every_item_and_the_fpr_bound() {
        let mut f = ScalableCuckoo::new(1000, 0.01).unwrap();
        let n = 30_000u64;
        // An insert reports "present" only for a false positive: at most p = 1% of them (the
        // compound rate stays below p all along), ~0.2% in fact.
        let mut present = 0;
        for i in 0..n {
            present += !f.try_insert(key(i)).unwrap() as u64;
        }
        assert!(present <= n / 100, "{present} of {n} new items reported present");
        // 1000 + 2000 + 4000 + 8000 + 16000 ≥ 30 000 at ~95% load: five tables.
        assert_eq!(f.num_tables(), 5);
        assert_eq!(f.len() as u64, n);
        assert!((0..n).all(|i| f.contains(key(i))));
        assert!(f.expected_fpr() <= 0.01, "compound {}", f.expected_fpr());
        for (i, t) in f.tables().iter().enumerate() {
            assert_eq!(t.capacity(), 1000 << i);
            assert_eq!(t.target_fpr(), 0.01 * 0.5 * 0.5f64.powi(i as i32));
        }
        // 1M non-members: the count of false positives is Binomial(1M, φ) with φ ≤ the
        // compound expected rate (sum of the tables' rates at their loads); 99.9% upper bound.
        let phi = f.expected_fpr();
        let probes = 1_000_000u64;
        let fp = (n..n + probes).filter(|&i| f.contains(key(i))).count() as f64;
        let mean = probes as f64 * phi;
        let bound = mean + 3.09 * (mean * (1.0 - phi)).sqrt() + 1.0;
        assert!(fp <= bound, "{fp} false positives, bound {bound:.0} (rate {phi})");
        // And not far below it: the rate model of the tables is right (99.9% lower bound,
        // with the 10% model tolerance of the conformance suite).
        let low = 0.9 * mean - 3.09 * (mean * (1.0 - phi)).sqrt();
        assert!(fp >= low, "{fp} false positives, lower bound {low:.0} (rate {phi})");
    }

    #[test]
    fn the_chain_ends_with_an_error_and_loses_nothing() {
        // p = 0.001: tables at 5e-4, 2.5e-4 and 1.25e-4 (16-bit fingerprints), then 6.25e-5 is
        // below 16-bit fingerprints' 1.22e-4: three tables, 7× the initial capacity.
        let mut f = ScalableCuckoo::new(100, 0.001).unwrap();
        let mut inserted = 0u64;
        let err = loop {
            match f.try_insert(key(inserted)) {
                Ok(_) => inserted += 1,
                Err(e) => break e,
            }
            assert!(inserted < 10_000, "never reported full");
        };
        assert!(matches!(err, Error::Full { .. }), "{err}");
        assert_eq!(f.num_tables(), 3);
        assert!(inserted >= 650, "full after only {inserted} of 700");
        assert_eq!(f.len() as u64, inserted);
        assert!((0..inserted).all(|i| f.contains(key(i))), "an item was lost");
        let before = f.clone();
        assert!(!f.insert(key(inserted)), "insert on a full chain reports false");
        assert_eq!(f, before, "a refused insert changes nothing");
    }

    #[test]
    fn duplicates_count_and_remove_across_tables() {
        let mut f = ScalableCuckoo::new(50, 0.01).unwrap();
        assert!(f.try_insert(b"dup").unwrap());
        for i in 0..500u64 {
            f.try_insert(key(i)).unwrap();
        }
        assert!(f.num_tables() > 2);
        assert!(!f.try_insert(b"dup").unwrap(), "a copy in an older table is seen");
        assert_eq!(f.count(b"dup"), 2);
        assert!(f.remove(b"dup"));
        assert!(f.contains(b"dup"));
        assert!(f.remove(b"dup"));
        assert_eq!(f.count(b"dup"), 0);
        assert!((0..500u64).all(|i| f.contains(key(i))));
        assert!((0..500u64).all(|i| f.remove(key(i))));
        assert_eq!(f.len(), 0);
    }

    #[test]
    fn round_trip_and_schedule_checks() {
        let mut f = ScalableCuckoo::with_options(64, 0.05, 3.0, 0.6).unwrap();
        for i in 0..1000u64 {
            f.try_insert(key(i)).unwrap();
        }
        let bytes = f.to_bytes();
        let g = ScalableCuckoo::from_bytes(&bytes).unwrap();
        assert_eq!(g, f);
        assert_eq!(g.to_bytes(), bytes);
        // A table moved to another place of the schedule is refused (swap the first two
        // tables' files and fix the CRC): decoding checks capacities, not just CRCs.
        let two = ScalableCuckoo { tables: vec![f.tables[1].clone(), f.tables[0].clone()], ..f.clone() };
        assert!(matches!(ScalableCuckoo::from_bytes(&two.to_bytes()), Err(Error::Format(_))));
    }

    #[test]
    fn batch_query_answers_as_single_queries_across_tables() {
        let mut f = ScalableCuckoo::new(300, 0.05).unwrap();
        for i in 0..3000u64 {
            f.try_insert(key(i)).unwrap();
        }
        assert!(f.num_tables() >= 4);
        // Members of every table, non-members, and a batch longer than the prefetch distance.
        let probes: Vec<[u8; 8]> = (0..3000u64).chain(1_000_000..1_020_000).map(key).collect();
        let batch = f.contains_many(&probes);
        for (p, b) in probes.iter().zip(&batch) {
            assert_eq!(f.contains(p), *b);
        }
        assert!(batch[..3000].iter().all(|&b| b));
        let fp = batch[3000..].iter().filter(|&&b| b).count();
        assert!(fp > 0 && fp < 20_000 / 20, "{fp} false positives in 20 000 (compound p ≤ 5%)");
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(ScalableCuckoo::new(0, 0.01).is_err());
        assert!(ScalableCuckoo::new(10, 0.0).is_err());
        assert!(ScalableCuckoo::new(10, f64::NAN).is_err());
        assert!(ScalableCuckoo::with_options(10, 0.01, 0.5, 0.5).is_err());
        assert!(ScalableCuckoo::with_options(10, 0.01, 2.0, 1.0).is_err());
        // The first table's share p·(1 - r) must be reachable with 16-bit fingerprints.
        assert!(matches!(ScalableCuckoo::new(10, 1e-4), Err(Error::InvalidParameter { .. })));
        assert!(matches!(ScalableCuckoo::new(usize::MAX, 0.01), Err(Error::CapacityExceeded { .. })));
    }
}
