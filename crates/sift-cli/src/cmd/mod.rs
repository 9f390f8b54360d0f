//! One module per subcommand, and what they share: the family names and filter construction.

pub mod bench;
pub mod build;
pub mod convert;
pub mod dedup;
pub mod inspect;
pub mod plan;
pub mod query;

use anyhow::{bail, Context, Result};
use sift::compat::guava::GuavaBloom;
use sift::compat::redisbloom::{BloomChain, CuckooFilter, BF_MAX_CAPACITY, CF_MAX_CAPACITY};
use sift::{
    BlockedBloom, Bloom, CountingBloom, Cuckoo, Quotient, ScalableBloom, ScalableCuckoo, SplitBlockBloom,
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
    /// Static families are built once from the whole set.
    pub fn is_static(self) -> bool {
        matches!(self, FamilyArg::Xor8 | FamilyArg::BinaryFuse8 | FamilyArg::BinaryFuse16 | FamilyArg::Gcs)
    }

    /// Whether the family needs the item count up front.
    pub fn needs_items(self) -> bool {
        !self.is_static() && !matches!(self, FamilyArg::ScalableBloom | FamilyArg::ScalableCuckoo)
    }
}

/// Initial layer of a scalable filter when the item count is unknown.
pub const SCALABLE_INITIAL: u64 = 100_000;

/// An empty dynamic filter of `family` for `items` items at `fpr`.
pub fn new_dynamic(family: FamilyArg, items: Option<u64>, fpr: f64) -> Result<AnyFilter> {
    let need = || -> Result<usize> {
        let n = items.with_context(|| format!("{family:?} needs --items (the number of keys)"))?;
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
        FamilyArg::RedisbloomBf => {
            let n = need()? as u64;
            if n > BF_MAX_CAPACITY {
                bail!("RedisBloom's capacity limit is {BF_MAX_CAPACITY}; the chain grows past it on its own, give a smaller --items");
            }
            AnyFilter::RedisBf(
                BloomChain::new(n, fpr, 2, false).map_err(|e| anyhow::anyhow!("RedisBloom BF: {e}"))?,
            )
        }
        FamilyArg::RedisbloomCf => {
            let n = (need()? as u64).max(4);
            if n > CF_MAX_CAPACITY {
                bail!("RedisBloom's cuckoo capacity limit is {CF_MAX_CAPACITY}");
            }
            // CF.RESERVE defaults: bucket size 2, 20 iterations, expansion 1.
            AnyFilter::RedisCf(
                CuckooFilter::new(n, 2, 20, 1).map_err(|e| anyhow::anyhow!("RedisBloom CF: {e}"))?,
            )
        }
        FamilyArg::GuavaBloom => AnyFilter::Guava(GuavaBloom::new(need()? as u64, fpr)?),
        FamilyArg::Xor8 | FamilyArg::BinaryFuse8 | FamilyArg::BinaryFuse16 | FamilyArg::Gcs => {
            bail!("{family:?} is static: it is built once from the whole set")
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
        other => bail!("{other:?} is not a static family"),
    })
}
