//! One module per subcommand, and what they share: the family names and filter construction.

pub mod bench;
pub mod build;
pub mod convert;
pub mod dedup;
pub mod inspect;
pub mod plan;
pub mod pull;
pub mod push;
pub mod query;

use anyhow::{bail, Context, Result};
use sift::compat::guava::GuavaBloom;
use sift::compat::redisbloom::{BloomChain, CuckooFilter, BF_MAX_CAPACITY, CF_MAX_CAPACITY};
use sift::{
    AgingBloom, BlockedBloom, Bloom, CountingBloom, Cuckoo, Quotient, ScalableBloom, ScalableCuckoo,
    SplitBlockBloom,
};

use crate::any::AnyFilter;

/// The families `build`, `dedup` and `bench` can make (the names of the file kinds).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyArg {
    /// Classic Bloom filter.
    Bloom,
    /// Blocked Bloom filter: one cache line per key (the default).
    BlockedBloom,
    /// Apache Parquet's split-block Bloom filter (XXH64, convertible to Parquet bytes).
    SplitBlockBloom,
    /// Counting Bloom filter (4-bit counters).
    CountingBloom,
    /// Scalable Bloom filter: grows with the input.
    ScalableBloom,
    /// Cuckoo filter.
    Cuckoo,
    /// Scalable cuckoo filter: cuckoo tables added as it fills (deletes; grows up to 63× at 1%).
    ScalableCuckoo,
    /// Quotient filter.
    Quotient,
    /// Aging Bloom filter, a sliding window by count: remembers the last -n insertions, forgets
    /// older ones (sift-server's SF KIND aging WINDOW n).
    AgingBloom,
    /// Xor filter, 8-bit fingerprints (static: p = 1/256).
    Xor8,
    /// Binary fuse filter, 8-bit (static: p = 1/256).
    BinaryFuse8,
    /// Binary fuse filter, 16-bit (static: p = 1/65536).
    BinaryFuse16,
    /// Golomb-coded set (static, compressed).
    Gcs,
    /// RedisBloom's BF type, bit-exact (convert to SCANDUMP chunks for BF.LOADCHUNK).
    RedisbloomBf,
    /// RedisBloom's CF type, bit-exact (convert to SCANDUMP chunks for CF.LOADCHUNK).
    RedisbloomCf,
    /// Guava's BloomFilter (MURMUR128_MITZ_64), bit-exact (convert to its writeTo bytes).
    GuavaBloom,
}

impl FamilyArg {
    /// The name on the command line (`blocked-bloom`).
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value().map_or_else(|| format!("{self:?}"), |v| v.get_name().to_string())
    }

    /// The false-positive rate of a family whose rate its layout fixes, not `-p`: 8- and 16-bit
    /// fingerprints for xor and binary fuse filters, and for RedisBloom's cuckoo filter (8-bit
    /// fingerprints, two buckets of two slots, as CF.RESERVE makes it) its rate when full,
    /// `1 - (1 - 1/255)^4`.
    pub fn fixed_fpr(self) -> Option<f64> {
        match self {
            FamilyArg::Xor8 | FamilyArg::BinaryFuse8 => Some(1.0 / 256.0),
            FamilyArg::BinaryFuse16 => Some(1.0 / 65536.0),
            FamilyArg::RedisbloomCf => Some(1.0 - (1.0 - 1.0 / 255.0f64).powi(4)),
            _ => None,
        }
    }

    /// The families that reach a rate `fixed_fpr` cannot, for the message that refuses it.
    fn instead(self) -> &'static str {
        match self {
            FamilyArg::Xor8 | FamilyArg::BinaryFuse8 => "binary-fuse16 (1/65536) or gcs (any rate)",
            FamilyArg::BinaryFuse16 => "gcs (any rate, static) or blocked-bloom",
            _ => "redisbloom-bf (RedisBloom's Bloom filter, any rate) or cuckoo (sift's, fingerprints sized for -p)",
        }
    }

    /// Static families are built once from the whole set.
    pub fn is_static(self) -> bool {
        matches!(self, FamilyArg::Xor8 | FamilyArg::BinaryFuse8 | FamilyArg::BinaryFuse16 | FamilyArg::Gcs)
    }

    /// Whether the family needs the item count up front.
    pub fn needs_items(self) -> bool {
        !self.is_static() && !matches!(self, FamilyArg::ScalableBloom | FamilyArg::ScalableCuckoo)
    }
}

/// The rate to build `family` for: `given` (`-p` on the command line) or `default`. A family
/// whose rate is fixed by its layout ([`FamilyArg::fixed_fpr`]) refuses a `-p` it cannot reach,
/// naming the families that can; a `-p` it beats is noted on stderr (unless `quiet`), since the
/// flag then changes nothing.
pub fn fpr_for(family: FamilyArg, given: Option<f64>, default: f64, quiet: bool) -> Result<f64> {
    let (Some(p), Some(fixed)) = (given, family.fixed_fpr()) else {
        return Ok(given.unwrap_or(default));
    };
    let fixed_text = crate::output::pct(fixed);
    if p < fixed * (1.0 - 1e-9) {
        bail!(
            "-p {p}: {} cannot reach it: its false-positive rate is fixed at {fixed_text} by its layout, whatever -p says; use --family {} for this rate",
            family.name(),
            family.instead()
        );
    }
    if !quiet {
        eprintln!(
            "sift: note: {} does not use -p: its false-positive rate is {fixed_text} (below the {} asked for)",
            family.name(),
            crate::output::pct(p)
        );
    }
    Ok(p)
}

/// Initial layer of a scalable filter when the item count is unknown.
pub const SCALABLE_INITIAL: u64 = 100_000;

/// The library's "too large" error in sizes a person reads.
pub fn too_large(requested_bytes: u128, limit_bytes: u128) -> String {
    format!(
        "the filter would need {}, more than the largest sift makes ({})",
        crate::size::human_bytes(requested_bytes as f64),
        crate::size::human_bytes(limit_bytes as f64)
    )
}

/// An empty dynamic filter of `family` for `items` items at `fpr`.
pub fn new_dynamic(family: FamilyArg, items: Option<u64>, fpr: f64) -> Result<AnyFilter> {
    make_dynamic(family, items, fpr).map_err(|e| match e.downcast_ref::<sift::Error>() {
        Some(&sift::Error::CapacityExceeded { requested_bytes, limit_bytes }) => anyhow::anyhow!(
            "{} for -n {} at -p {}: {}; lower -n or raise -p",
            family.name(),
            items.unwrap_or(0),
            crate::output::pct(fpr),
            too_large(requested_bytes, limit_bytes)
        ),
        _ => e,
    })
}

fn make_dynamic(family: FamilyArg, items: Option<u64>, fpr: f64) -> Result<AnyFilter> {
    let need = || -> Result<usize> {
        let n = items.with_context(|| format!("{} needs -n/--items (the number of keys)", family.name()))?;
        usize::try_from(n).context("--items is too large for this platform")
    };
    Ok(match family {
        FamilyArg::Bloom => AnyFilter::Bloom(Bloom::new(need()?, fpr)?),
        FamilyArg::BlockedBloom => AnyFilter::Blocked(BlockedBloom::new(need()?, fpr)?),
        FamilyArg::SplitBlockBloom => {
            // Parquet's hash (XXH64, seed 0), so the filter converts to Parquet bytes.
            // Parquet writers' exact (power-of-two) size, so the bytes can go into a Parquet file.
            AnyFilter::SplitBlock(SplitBlockBloom::for_parquet(need()?, fpr)?)
        }
        FamilyArg::CountingBloom => AnyFilter::Counting(CountingBloom::new(need()?, fpr)?),
        FamilyArg::ScalableBloom => {
            let n = items.unwrap_or(SCALABLE_INITIAL).max(1);
            AnyFilter::Scalable(ScalableBloom::new(usize::try_from(n).unwrap_or(usize::MAX), fpr)?)
        }
        FamilyArg::Cuckoo => AnyFilter::Cuckoo(Cuckoo::new(need()?, fpr)?),
        FamilyArg::ScalableCuckoo => {
            let n = items.unwrap_or(SCALABLE_INITIAL).max(1);
            AnyFilter::ScalableCuckoo(ScalableCuckoo::new(usize::try_from(n).unwrap_or(usize::MAX), fpr)?)
        }
        FamilyArg::Quotient => AnyFilter::Quotient(Quotient::new(need()?, fpr)?),
        FamilyArg::AgingBloom => AnyFilter::Aging(AgingBloom::new(need()?, fpr)?),
        FamilyArg::RedisbloomBf => {
            let n = need()? as u64;
            if n > BF_MAX_CAPACITY {
                bail!("-n {n}: RedisBloom's first link holds at most {BF_MAX_CAPACITY} items; give a smaller -n (the chain adds links as it fills)");
            }
            AnyFilter::RedisBf(
                BloomChain::new(n, fpr, 2, false).map_err(|e| anyhow::anyhow!("RedisBloom BF: {e}"))?,
            )
        }
        FamilyArg::RedisbloomCf => {
            let n = (need()? as u64).max(4);
            if n > CF_MAX_CAPACITY {
                bail!("-n {n}: RedisBloom's cuckoo filter holds at most {CF_MAX_CAPACITY} items; give a smaller -n");
            }
            // CF.RESERVE defaults: bucket size 2, 20 iterations, expansion 1.
            AnyFilter::RedisCf(
                CuckooFilter::new(n, 2, 20, 1).map_err(|e| anyhow::anyhow!("RedisBloom CF: {e}"))?,
            )
        }
        FamilyArg::GuavaBloom => AnyFilter::Guava(GuavaBloom::new(need()? as u64, fpr)?),
        FamilyArg::Xor8 | FamilyArg::BinaryFuse8 | FamilyArg::BinaryFuse16 | FamilyArg::Gcs => {
            bail!("{} is static: it is built once from the whole set", family.name())
        }
    })
}

/// A static filter of `family` from the 64-bit hashes of its keys (by the default hasher).
pub fn build_static(family: FamilyArg, hashes: &[u64], fpr: f64) -> Result<AnyFilter> {
    use sift::prelude::StaticFilter;
    let h = sift::Hasher::default();
    Ok(match family {
        FamilyArg::Xor8 => AnyFilter::Xor8(sift::Xor8::build_from_hashes_with_hasher(hashes, h)?),
        FamilyArg::BinaryFuse8 => {
            AnyFilter::Fuse8(sift::BinaryFuse8::build_from_hashes_with_hasher(hashes, h)?)
        }
        FamilyArg::BinaryFuse16 => {
            AnyFilter::Fuse16(sift::BinaryFuse16::build_from_hashes_with_hasher(hashes, h)?)
        }
        FamilyArg::Gcs => {
            AnyFilter::Gcs(sift::Gcs::from_hashes_with_params(hashes, sift::GcsParams::for_fpr(fpr)?)?)
        }
        other => bail!("{} is not a static family", other.name()),
    })
}
