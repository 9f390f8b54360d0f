//! Any filter a `sift` file can hold, behind one enum: load by decoding the header and
//! dispatching on its kind, then query, insert and describe without knowing the family.

use anyhow::{anyhow, bail, Context, Result};
use sift::compat::guava::GuavaBloom;
use sift::compat::redisbloom::{BloomChain, CuckooFilter};
use sift::format::{self, FilterKind};
use sift::hash::{Digest, Hasher};
use sift::prelude::*;
use sift::{
    BinaryFuse16, BinaryFuse8, BlockedBloom, Bloom, CountingBloom, Cuckoo, Gcs, Quotient, ScalableBloom,
    ScalableCuckoo, SplitBlockBloom, Xor8,
};

/// A filter of any kind.
#[allow(clippy::large_enum_variant)]
pub enum AnyFilter {
    /// Classic Bloom.
    Bloom(Bloom),
    /// Blocked Bloom (also what `AtomicBloom` writes).
    Blocked(BlockedBloom),
    /// Parquet-compatible split-block Bloom.
    SplitBlock(SplitBlockBloom),
    /// Counting Bloom.
    Counting(CountingBloom),
    /// Scalable Bloom.
    Scalable(ScalableBloom),
    /// Cuckoo.
    Cuckoo(Cuckoo),
    /// Scalable cuckoo (a growing chain of cuckoo tables).
    ScalableCuckoo(ScalableCuckoo),
    /// Quotient.
    Quotient(Quotient),
    /// Xor, 8-bit fingerprints.
    Xor8(Xor8),
    /// Binary fuse, 8-bit.
    Fuse8(BinaryFuse8),
    /// Binary fuse, 16-bit.
    Fuse16(BinaryFuse16),
    /// Golomb-coded set.
    Gcs(Gcs),
    /// RedisBloom's Bloom chain.
    RedisBf(BloomChain),
    /// RedisBloom's cuckoo filter.
    RedisCf(CuckooFilter),
    /// Guava's Bloom filter.
    Guava(GuavaBloom),
}

/// Applies `$body` to the filter inside any of the native (trait-implementing) variants, and
/// `$compat` to the three compatibility types.
macro_rules! native {
    ($self:expr, $f:ident => $body:expr, $c:pat => $compat:expr) => {
        match $self {
            AnyFilter::Bloom($f) => $body,
            AnyFilter::Blocked($f) => $body,
            AnyFilter::SplitBlock($f) => $body,
            AnyFilter::Counting($f) => $body,
            AnyFilter::Scalable($f) => $body,
            AnyFilter::Cuckoo($f) => $body,
            AnyFilter::ScalableCuckoo($f) => $body,
            AnyFilter::Quotient($f) => $body,
            AnyFilter::Xor8($f) => $body,
            AnyFilter::Fuse8($f) => $body,
            AnyFilter::Fuse16($f) => $body,
            AnyFilter::Gcs($f) => $body,
            $c => $compat,
        }
    };
}

impl AnyFilter {
    /// Decodes a `sift` file of any kind (header first, then the family's own verified decoder).
    pub fn from_bytes(bytes: &[u8]) -> Result<AnyFilter> {
        let raw = format::decode(bytes)?;
        let kind = raw.kind().ok_or_else(|| {
            anyhow!("unknown filter kind code {} (written by a newer sift?)", raw.kind_code())
        })?;
        Ok(match kind {
            FilterKind::Bloom => AnyFilter::Bloom(Bloom::from_bytes(bytes)?),
            FilterKind::BlockedBloom => AnyFilter::Blocked(BlockedBloom::from_bytes(bytes)?),
            FilterKind::SplitBlockBloom => AnyFilter::SplitBlock(SplitBlockBloom::from_bytes(bytes)?),
            FilterKind::CountingBloom => AnyFilter::Counting(CountingBloom::from_bytes(bytes)?),
            FilterKind::ScalableBloom => AnyFilter::Scalable(ScalableBloom::from_bytes(bytes)?),
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
            other => bail!("this build of sift cannot load {other} filters"),
        })
    }

    /// Loads a `sift` file.
    pub fn load(path: &std::path::Path) -> Result<AnyFilter> {
        let bytes = crate::input::read_file(path)?;
        AnyFilter::from_bytes(&bytes)
            .with_context(|| format!("{} is not a valid sift filter", path.display()))
    }

    /// The file bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            AnyFilter::Bloom(f) => f.to_bytes(),
            AnyFilter::Blocked(f) => f.to_bytes(),
            AnyFilter::SplitBlock(f) => f.to_bytes(),
            AnyFilter::Counting(f) => f.to_bytes(),
            AnyFilter::Scalable(f) => f.to_bytes(),
            AnyFilter::Cuckoo(f) => f.to_bytes(),
            AnyFilter::ScalableCuckoo(f) => f.to_bytes(),
            AnyFilter::Quotient(f) => f.to_bytes(),
            AnyFilter::Xor8(f) => f.to_bytes(),
            AnyFilter::Fuse8(f) => f.to_bytes(),
            AnyFilter::Fuse16(f) => f.to_bytes(),
            AnyFilter::Gcs(f) => f.to_bytes(),
            AnyFilter::RedisBf(f) => f.to_bytes(),
            AnyFilter::RedisCf(f) => f.to_bytes(),
            AnyFilter::Guava(f) => f.to_bytes(),
        }
    }

    /// Writes the bytes of [`AnyFilter::to_bytes`] to `w`; the blocked Bloom filter streams
    /// them (no second copy of the filter in memory), the others encode in memory first.
    pub fn write_to(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        match self {
            AnyFilter::Blocked(f) => f.write_to(w),
            other => w.write_all(&other.to_bytes()),
        }
    }

    /// The kind.
    pub fn kind(&self) -> FilterKind {
        match self {
            AnyFilter::Bloom(_) => FilterKind::Bloom,
            AnyFilter::Blocked(_) => FilterKind::BlockedBloom,
            AnyFilter::SplitBlock(_) => FilterKind::SplitBlockBloom,
            AnyFilter::Counting(_) => FilterKind::CountingBloom,
            AnyFilter::Scalable(_) => FilterKind::ScalableBloom,
            AnyFilter::Cuckoo(_) => FilterKind::Cuckoo,
            AnyFilter::ScalableCuckoo(_) => FilterKind::ScalableCuckoo,
            AnyFilter::Quotient(_) => FilterKind::Quotient,
            AnyFilter::Xor8(_) => FilterKind::Xor8,
            AnyFilter::Fuse8(_) => FilterKind::BinaryFuse8,
            AnyFilter::Fuse16(_) => FilterKind::BinaryFuse16,
            AnyFilter::Gcs(_) => FilterKind::Gcs,
            AnyFilter::RedisBf(_) => FilterKind::RedisBloomChain,
            AnyFilter::RedisCf(_) => FilterKind::RedisBloomCuckoo,
            AnyFilter::Guava(_) => FilterKind::Guava,
        }
    }

    /// The hasher of a native filter (`None` for the compatibility types, which hash raw keys
    /// their own way).
    pub fn hasher(&self) -> Option<Hasher> {
        native!(self, f => Some(f.hasher()), _ => None)
    }

    /// Whether `key` may be in the set.
    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            AnyFilter::RedisBf(f) => f.contains(key),
            AnyFilter::RedisCf(f) => f.contains(key),
            AnyFilter::Guava(f) => f.might_contain(key),
            other => native!(other, f => f.contains(key), _ => unreachable!("compat handled above")),
        }
    }

    /// Whether the key with this digest (from [`AnyFilter::hasher`]) may be present.
    pub fn contains_digest(&self, d: Digest) -> bool {
        native!(self, f => f.contains_digest(d), _ => unreachable!("digests only for native filters"))
    }

    /// Whether the filter takes inserts (static filters are built once from the whole set).
    pub fn is_dynamic(&self) -> bool {
        !matches!(self, AnyFilter::Xor8(_) | AnyFilter::Fuse8(_) | AnyFilter::Fuse16(_) | AnyFilter::Gcs(_))
    }

    /// Inserts the key unless the filter already reports it: `Ok(true)` if it was new. A full
    /// fixed-size filter is an error.
    pub fn insert_new(&mut self, key: &[u8], digest: Option<Digest>) -> Result<bool> {
        let d = match (digest, self.hasher()) {
            (Some(d), _) => Some(d),
            (None, Some(h)) => Some(h.digest(key)),
            (None, None) => None,
        };
        let full = |len: usize| {
            anyhow!("the filter is full ({len} items); build a larger one (--items) or use scalable-bloom")
        };
        Ok(match self {
            AnyFilter::Bloom(f) => f.insert_digest(d.expect("native")),
            AnyFilter::Blocked(f) => f.insert_digest(d.expect("native")),
            AnyFilter::SplitBlock(f) => f.insert_digest(d.expect("native")),
            AnyFilter::Counting(f) => {
                let d = d.expect("native");
                !f.contains_digest(d) && f.insert_digest(d)
            }
            AnyFilter::Scalable(f) => f.try_insert_digest(d.expect("native"))?,
            AnyFilter::Cuckoo(f) => {
                let d = d.expect("native");
                if f.contains_digest(d) {
                    false
                } else {
                    f.try_insert_digest(d).map_err(|_| full(f.len()))?
                }
            }
            AnyFilter::ScalableCuckoo(f) => {
                let d = d.expect("native");
                if f.contains_digest(d) {
                    false
                } else {
                    f.try_insert_digest(d).map_err(|e| match e {
                        sift::Error::Full { len } => anyhow!(
                            "the scalable cuckoo filter reached its growth limit ({len} items, {} tables); \
                             give a larger --items or use scalable-bloom (no deletes, no limit)",
                            f.num_tables()
                        ),
                        e => anyhow!("{e}"),
                    })?
                }
            }
            AnyFilter::Quotient(f) => {
                let d = d.expect("native");
                if f.contains_digest(d) {
                    false
                } else {
                    f.try_insert_digest(d).map_err(|_| full(f.len()))?
                }
            }
            AnyFilter::RedisBf(f) => f.add(key).map_err(|e| anyhow!("RedisBloom filter: {e}"))?,
            AnyFilter::RedisCf(f) => {
                f.insert_unique(key).map_err(|e| anyhow!("RedisBloom cuckoo filter: {e}"))?
            }
            AnyFilter::Guava(f) => !f.might_contain(key) && f.put(key),
            AnyFilter::Xor8(_) | AnyFilter::Fuse8(_) | AnyFilter::Fuse16(_) | AnyFilter::Gcs(_) => {
                bail!("{} filters are static: they are built once from the whole set", self.kind())
            }
        })
    }

    /// [`AnyFilter::insert_new`] for every key of a chunk, in order, appending to `out` whether
    /// each was new. The same answers as calling `insert_new` key by key (the family is matched
    /// once per chunk, not once per key).
    pub fn insert_new_chunk(&mut self, c: &crate::input::Chunk, out: &mut Vec<bool>) -> Result<()> {
        out.reserve(c.len());
        match self {
            AnyFilter::Bloom(f) => out.extend(c.digests.iter().map(|&d| f.insert_digest(d))),
            AnyFilter::Blocked(f) => out.extend(c.digests.iter().map(|&d| f.insert_digest(d))),
            AnyFilter::SplitBlock(f) => out.extend(c.digests.iter().map(|&d| f.insert_digest(d))),
            AnyFilter::Scalable(f) => {
                for &d in &c.digests {
                    out.push(f.try_insert_digest(d)?);
                }
            }
            other => {
                for i in 0..c.len() {
                    out.push(other.insert_new(c.key(i), c.digests.get(i).copied())?);
                }
            }
        }
        Ok(())
    }

    /// Items in the filter (as the filter counts them).
    pub fn len(&self) -> u64 {
        native!(self, f => f.len() as u64, c => match c {
            AnyFilter::RedisBf(f) => f.len(),
            AnyFilter::RedisCf(f) => f.len(),
            AnyFilter::Guava(f) => f.approximate_element_count(),
            _ => unreachable!(),
        })
    }

    /// Memory held by the filter, in bytes.
    pub fn size_in_bytes(&self) -> u64 {
        native!(self, f => f.size_in_bytes() as u64, c => match c {
            AnyFilter::RedisBf(f) => f.info().size,
            AnyFilter::RedisCf(f) => f.info().size,
            AnyFilter::Guava(f) => f.size_in_bytes() as u64,
            _ => unreachable!(),
        })
    }

    /// The FPR expected now, from the filter's own model.
    pub fn expected_fpr(&self) -> f64 {
        native!(self, f => f.expected_fpr(), c => match c {
            AnyFilter::RedisBf(f) => {
                // Each link by the Bloom formula at its item count (cheap: dedup asks often);
                // compound over the links.
                sift::math::compound_fpr(f.links().iter().map(|l| {
                    sift::math::bloom_fpr(l.bits() as f64, l.size() as f64, l.hashes() as f64)
                }))
            }
            AnyFilter::RedisCf(f) => {
                // A query compares the 8-bit fingerprint (255 values) with the occupied slots of
                // two buckets in every sub-filter: p ≈ 1 - (1 - 1/255)^(occupied slots probed).
                let slots: u64 = f.filters().iter().map(|s| s.slots().len() as u64).sum();
                let load = if slots == 0 { 0.0 } else { (f.len() as f64 / slots as f64).min(1.0) };
                let probed = 2.0 * f.bucket_size() as f64 * f.filters().len() as f64 * load;
                1.0 - (1.0 - 1.0 / 255.0f64).powf(probed)
            }
            AnyFilter::Guava(f) => f.expected_fpp(),
            _ => unreachable!(),
        })
    }

    /// The FPR the filter was planned for, when it records one.
    pub fn planned_fpr(&self) -> Option<f64> {
        match self {
            AnyFilter::Bloom(f) => Some(f.target_fpr()),
            AnyFilter::Blocked(f) => Some(f.target_fpr()),
            AnyFilter::SplitBlock(f) => Some(f.target_fpr()),
            AnyFilter::Counting(f) => Some(f.target_fpr()),
            AnyFilter::Scalable(f) => Some(f.target_fpr()),
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

    /// The capacity the filter was sized for, when it records one.
    pub fn capacity(&self) -> Option<u64> {
        match self {
            AnyFilter::Bloom(f) => Some(f.capacity()),
            AnyFilter::Blocked(f) => Some(f.capacity()),
            AnyFilter::SplitBlock(f) => Some(f.capacity()),
            AnyFilter::Counting(f) => Some(f.capacity()),
            AnyFilter::Scalable(f) => Some(f.capacity()),
            AnyFilter::Cuckoo(f) => Some(f.capacity()),
            AnyFilter::ScalableCuckoo(f) => Some(f.capacity()),
            AnyFilter::Quotient(f) => Some(f.capacity()),
            AnyFilter::RedisBf(f) => Some(f.info().capacity),
            _ => None,
        }
    }

    /// Kind-specific parameters and state, as `(name, value)` pairs for `inspect`.
    pub fn details(&self) -> Vec<(&'static str, serde_json::Value)> {
        use serde_json::json;
        match self {
            AnyFilter::Bloom(f) => vec![
                ("bits", json!(f.num_bits())),
                ("hashes", json!(f.num_hashes())),
                ("fill_ratio", json!(f.fill_ratio())),
                ("estimated_items", json!(f.estimated_items())),
            ],
            AnyFilter::Blocked(f) => vec![
                ("blocks", json!(f.num_blocks())),
                ("bits", json!(f.num_bits())),
                ("hashes", json!(f.num_hashes())),
                ("fill_ratio", json!(f.fill_ratio())),
                ("estimated_items", json!(f.estimated_items())),
                ("current_fpr_from_bits", json!(f.current_fpr())),
            ],
            AnyFilter::SplitBlock(f) => vec![
                ("blocks", json!(f.num_blocks())),
                ("bytes", json!(f.num_bytes())),
                ("hashes", json!(8)),
                ("parquet_size", json!(f.is_parquet_size())),
                ("estimated_items", json!(f.estimated_items())),
            ],
            AnyFilter::Counting(f) => vec![
                ("counters", json!(f.num_counters())),
                ("hashes", json!(f.num_hashes())),
                ("nonzero_counters", json!(f.nonzero_counters())),
                ("fill_ratio", json!(f.nonzero_counters() as f64 / f.num_counters() as f64)),
                ("saturated_counters", json!(f.saturated_counters())),
            ],
            AnyFilter::Scalable(f) => vec![
                ("layers", json!(f.num_layers())),
                ("initial_capacity", json!(f.initial_capacity())),
                ("growth", json!(f.growth())),
                ("tightening", json!(f.tightening())),
                ("layer_fill_ratios", json!(f.layers().iter().map(|l| l.fill_ratio()).collect::<Vec<_>>())),
            ],
            AnyFilter::Cuckoo(f) => vec![
                ("buckets", json!(f.num_buckets())),
                ("fingerprint_bits", json!(f.fingerprint_bits())),
                ("load_factor", json!(f.load_factor())),
                ("stash", json!(f.stash_len())),
            ],
            AnyFilter::ScalableCuckoo(f) => vec![
                ("tables", json!(f.num_tables())),
                ("growth", json!(f.growth())),
                ("tightening", json!(f.tightening())),
                (
                    "table_fingerprint_bits",
                    json!(f.tables().iter().map(|t| t.fingerprint_bits()).collect::<Vec<_>>()),
                ),
                ("table_load_factors", json!(f.tables().iter().map(|t| t.load_factor()).collect::<Vec<_>>())),
            ],
            AnyFilter::Quotient(f) => vec![
                ("quotients", json!(f.num_quotients())),
                ("slots", json!(f.num_slots())),
                ("remainder_bits", json!(f.remainder_bits())),
                ("load_factor", json!(f.load_factor())),
            ],
            AnyFilter::Xor8(f) => vec![
                ("fingerprints", json!(f.fingerprints().len())),
                ("bits_per_key", json!(f.bits_per_key())),
            ],
            AnyFilter::Fuse8(f) => vec![
                ("fingerprints", json!(f.fingerprints().len())),
                ("segment_length", json!(f.segment_length())),
                ("segments", json!(f.segment_count())),
                ("bits_per_key", json!(f.bits_per_key())),
            ],
            AnyFilter::Fuse16(f) => vec![
                ("fingerprints", json!(f.fingerprints().len())),
                ("segment_length", json!(f.segment_length())),
                ("segments", json!(f.segment_count())),
                ("bits_per_key", json!(f.bits_per_key())),
            ],
            AnyFilter::Gcs(f) => vec![
                ("p_bits", json!(f.p_bits())),
                ("modulus", json!(f.modulus())),
                ("coded_bytes", json!(f.coded_bytes().len())),
                ("coded_bits_per_key", json!(f.coded_bits_per_key())),
            ],
            AnyFilter::RedisBf(f) => {
                let i = f.info();
                vec![
                    ("links", json!(i.filters)),
                    ("capacity", json!(i.capacity)),
                    ("expansion", json!(i.expansion)),
                    ("options", json!(f.options())),
                    ("bf_debug", json!(f.debug_lines())),
                ]
            }
            AnyFilter::RedisCf(f) => {
                let i = f.info();
                vec![
                    ("sub_filters", json!(i.filters)),
                    ("buckets", json!(i.buckets)),
                    ("bucket_size", json!(i.bucket_size)),
                    ("deletes", json!(i.deletes)),
                    ("expansion", json!(i.expansion)),
                    ("max_iterations", json!(i.max_iterations)),
                    ("cf_debug", json!(f.debug_line())),
                ]
            }
            AnyFilter::Guava(f) => vec![
                ("strategy", json!(f.strategy().name())),
                ("hashes", json!(f.num_hashes())),
                ("bit_size", json!(f.bit_size())),
                ("bit_count", json!(f.bit_count())),
                ("fill_ratio", json!(f.bit_count() as f64 / f.bit_size() as f64)),
            ],
        }
    }
}
