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
        let p = path.display();
        if !bytes.starts_with(&format::MAGIC) {
            bail!(
                "{p} is not a sift file (it does not start with SIFT): `sift inspect {p}` tells what it holds, and `sift convert {p} -o F.sift` makes a sift file of a RedisBloom, RDB, Guava or Parquet filter"
            );
        }
        AnyFilter::from_bytes(&bytes).with_context(|| format!("{p}: not a valid sift file"))
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
            anyhow!(
                "the filter is full ({len} items); build a larger one (-n/--items) or use scalable-cuckoo (grows, keeps deletes) or scalable-bloom"
            )
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

    /// The FPR the filter answers with now, measured from its contents: for the Bloom families
    /// from the bits (or counters) actually set, which stays true whatever was inserted (a
    /// filter given far more keys than it was sized for answers yes to nearly everything, while
    /// its count of keys that set a new bit, and so [`AnyFilter::expected_fpr`], stalls). The
    /// fingerprint families store each item and count them exactly, and static filters are exact
    /// by construction: for those it is [`AnyFilter::expected_fpr`]. Reads the whole filter.
    pub fn fpr_now(&self) -> f64 {
        match self {
            AnyFilter::Bloom(f) => f.current_fpr(),
            AnyFilter::Blocked(f) => f.current_fpr(),
            AnyFilter::SplitBlock(f) => split_block_fpr_from_bits(&f.to_parquet_bytes()),
            AnyFilter::Counting(f) => f.current_fpr(),
            AnyFilter::Scalable(f) => sift::math::compound_fpr(f.layers().iter().map(|l| l.current_fpr())),
            AnyFilter::RedisBf(f) => sift::math::compound_fpr(f.links().iter().map(|l| {
                let ones: u64 = l.bitmap().iter().map(|b| u64::from(b.count_ones())).sum();
                sift::math::bloom_fpr_from_fill(ones as f64 / l.bits().max(1) as f64, l.hashes() as f64)
            })),
            // Guava's expected FPP is already `(bits set / bits)^k`.
            other => other.expected_fpr(),
        }
    }

    /// What [`AnyFilter::fpr_now`] is computed from, for `inspect`.
    pub fn fpr_basis(&self) -> &'static str {
        match self {
            AnyFilter::Bloom(_)
            | AnyFilter::Blocked(_)
            | AnyFilter::SplitBlock(_)
            | AnyFilter::Scalable(_)
            | AnyFilter::RedisBf(_)
            | AnyFilter::Guava(_) => "the bits set",
            AnyFilter::Counting(_) => "the counters set",
            AnyFilter::Cuckoo(_)
            | AnyFilter::ScalableCuckoo(_)
            | AnyFilter::Quotient(_)
            | AnyFilter::RedisCf(_) => "the items stored",
            AnyFilter::Xor8(_) | AnyFilter::Fuse8(_) | AnyFilter::Fuse16(_) | AnyFilter::Gcs(_) => {
                "the fingerprint width (static)"
            }
        }
    }

    /// How many distinct keys the bits set say a fixed-size Bloom-family filter holds (Swamidass
    /// & Baldi's estimate; infinite once every bit is set). `None` for the families that store
    /// and count each item (and refuse inserts when full) or grow.
    pub fn estimated_distinct(&self) -> Option<f64> {
        Some(match self {
            AnyFilter::Bloom(f) => f.estimated_items(),
            AnyFilter::Blocked(f) => f.estimated_items(),
            AnyFilter::SplitBlock(f) => f.estimated_items(),
            AnyFilter::Counting(f) => sift::math::bloom_estimate_items(
                f.num_counters() as f64,
                f.num_hashes() as f64,
                f.nonzero_counters() as f64,
            ),
            AnyFilter::Guava(f) => sift::math::bloom_estimate_items(
                f.bit_size() as f64,
                f.num_hashes() as f64,
                f.bit_count() as f64,
            ),
            _ => return None,
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
                ("estimated_items", estimate(f.estimated_items())),
            ],
            AnyFilter::Blocked(f) => vec![
                ("blocks", json!(f.num_blocks())),
                ("bits", json!(f.num_bits())),
                ("hashes", json!(f.num_hashes())),
                ("fill_ratio", json!(f.fill_ratio())),
                ("estimated_items", estimate(f.estimated_items())),
            ],
            AnyFilter::SplitBlock(f) => vec![
                ("blocks", json!(f.num_blocks())),
                ("bytes", json!(f.num_bytes())),
                ("hashes", json!(8)),
                ("parquet_size", json!(f.is_parquet_size())),
                ("estimated_items", estimate(f.estimated_items())),
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

/// An estimate of the distinct items from the bits set: a number, or what an infinite one means.
fn estimate(items: f64) -> serde_json::Value {
    if items.is_finite() {
        serde_json::json!(items.round())
    } else {
        serde_json::json!("every bit is set: more than can be estimated")
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

    /// The FPR from the bits set matches the rate measured on keys never inserted, for every
    /// Bloom family, within a 4.5-sigma binomial bound, in a filter filled to its size and in
    /// one given ten times as many keys (where the count of keys that set a new bit, and the
    /// formula on it, fall far short).
    #[test]
    fn fpr_now_is_what_non_members_measure() {
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
                    let _ = f.insert_new(format!("member-{i}").as_bytes(), None);
                }
                let p = f.fpr_now();
                let hits = (0..probes).filter(|i| f.contains(format!("other-{i}").as_bytes())).count() as f64;
                let sigma = (probes as f64 * p * (1.0 - p)).sqrt();
                assert!(
                    (hits - probes as f64 * p).abs() <= 4.5 * sigma + 1.0,
                    "{} x{overfill}: {hits} hits of {probes}, fpr_now {p}",
                    f.kind()
                );
            }
        }
    }
}
