//! RedisBloom's data types, bit for bit: the scalable Bloom chain (`MBbloom--`, the `BF.*`
//! commands), the cuckoo filter (`MBbloomCF`, the `CF.*` commands), the Count-Min Sketch
//! (`CMSk-TYPE`, `CMS.*`), the Top-K (`TopK-TYPE`, `TOPK.*`) and the t-digest (`TDIS-TYPE`,
//! `TDIGEST.*`).
//!
//! Everything here follows `shared/spec/redisbloom.md` (§4–§7) and
//! `shared/spec/redisbloom-sketches.md`, which were derived from observing a real RedisBloom
//! server; RedisBloom's own source was not used. The same items set the same
//! bits, the counters move the same way, and `SCANDUMP` chunks are byte-identical, so a dump taken
//! from RedisBloom loads here and the other way round. The golden vectors in
//! `crates/sift/tests/fixtures/redisbloom/` (captured from RedisBloom 2.6.28) pin all of it.
//!
//! The types are transport-independent: a RESP server or a Redis module parses arguments, calls
//! these methods and turns their results into replies. Nothing here knows an error *string*:
//! every failure is its own enum variant, and §2.2 / §8 of the spec give the exact text each one
//! becomes on the wire.
//!
//! * [`BloomChain`]: create ([`BloomChain::new`]), [`BloomChain::add`] (return codes 1 / 0 / −1 /
//!   −2 of §5.5), [`BloomChain::contains`], [`BloomChain::info`] (BF.INFO / BF.CARD),
//!   [`BloomChain::debug_lines`] (BF.DEBUG), [`BloomChain::scandump`] /
//!   [`BloomChain::from_header`] / [`BloomChain::load_chunk`] (BF.SCANDUMP / BF.LOADCHUNK).
//! * [`CuckooFilter`]: create ([`CuckooFilter::new`]), [`CuckooFilter::insert`],
//!   [`CuckooFilter::insert_unique`], [`CuckooFilter::contains`], [`CuckooFilter::count`],
//!   [`CuckooFilter::delete`], [`CuckooFilter::compact`], [`CuckooFilter::info`],
//!   [`CuckooFilter::debug_line`], [`CuckooFilter::scandump`] / [`CuckooFilter::from_header`] /
//!   [`CuckooFilter::load_chunk`].
//! * [`CountMinSketch`] (sketches spec §5): [`CountMinSketch::init_by_dim`] /
//!   [`CountMinSketch::init_by_prob`], [`CountMinSketch::incr_by`], [`CountMinSketch::query`],
//!   [`CountMinSketch::merge`] (with weights), `width` / `depth` / [`CountMinSketch::info_count`]
//!   (CMS.INFO).
//! * [`TopK`] (§6): [`TopK::reserve`], [`TopK::add`] / [`TopK::incr_by`] with an injectable
//!   [`DecayRandom`] ([`CRand`], the C library's `rand()`, by default), [`TopK::query`],
//!   [`TopK::count`], [`TopK::list`]; [`topk_reply_item`] for the C-string replies.
//! * [`TDigest`] (§7): [`TDigest::new`], [`TDigest::add`], [`TDigest::reset`],
//!   [`TDigestMerge`], [`TDigest::quantiles`], [`TDigest::cdf`], [`TDigest::rank`] /
//!   [`TDigest::rev_rank`], [`TDigest::by_rank`] / [`TDigest::by_rev_rank`],
//!   [`TDigest::trimmed_mean`], [`TDigest::min_value`] / [`TDigest::max_value`],
//!   [`TDigest::info`].
//! * [`format_double`]: the text of a double reply, as Redis 7.0 (`%.17g`) or Redis ≥ 7.2
//!   (`d2string`) writes it (sketches spec §2.2).
//! * [`rdb`]: the RDB encoding of all five types (§12, sketches §10): the module fields of
//!   `rdb_save` / `rdb_load`, `DUMP` payloads, the AOF-rewrite command, and reading and writing
//!   `dump.rdb` files.
//!
//! ```
//! use sift::compat::redisbloom::BloomChain;
//!
//! // BF.RESERVE bf 0.1 10, BF.ADD bf item1: the example of the RedisBloom documentation.
//! let mut bf = BloomChain::new(10, 0.1, 2, false)?;
//! assert_eq!(bf.add(b"item1"), Ok(true));
//! assert_eq!(bf.add(b"item1"), Ok(false));
//! let (next, header) = bf.scandump(0).unwrap();
//! assert_eq!((next, header.len()), (1, 73));
//! let (next, chunk) = bf.scandump(1).unwrap();
//! assert_eq!((next, &chunk[..]), (9, &[0x01, 0x08, 0x00, 0x80, 0x00, 0x04, 0x20, 0x00][..]));
//! assert!(bf.scandump(next).is_none()); // the end marker [0, ""]
//! # Ok::<(), sift::compat::redisbloom::BloomCreateError>(())
//! ```

mod bloom;
mod cms;
mod cuckoo;
mod dump;
mod file;
mod gfmt;
pub mod rdb;
mod reply_double;
mod tdigest;
mod topk;

pub use bloom::{
    options, BloomAddError, BloomChain, BloomChunkError, BloomCreateError, BloomHeaderError, BloomInfo,
    BloomLink, FrozenChain,
};
pub use cms::{
    cms_dims_for_error, CmsCellsError, CmsCreateError, CmsMergeError, CmsSource, CountMinSketch, FrozenCms,
    CMS_COUNTER_MAX, CMS_MAX_CELLS,
};
pub use cuckoo::{
    CuckooChunkError, CuckooCreateError, CuckooFilter, CuckooHash, CuckooHeaderError, CuckooInfo,
    CuckooInsertError, FrozenCuckoo, SubFilter,
};
pub use dump::{LoadLimits, CF_HEADER_LEN, MAX_CHUNK};
pub use gfmt::format_g;
pub use reply_double::{format_double, DoubleFormat};
pub use tdigest::{
    tdigest_capacity, tdigest_merge_compression, FrozenTDigest, TDigest, TDigestCreateError, TDigestInfo,
    TDigestMerge, TDigestNodesError, TDigestOverflow, TDIGEST_DEFAULT_COMPRESSION, TDIGEST_MAX_COMPRESSION,
    TDIGEST_NODE_BYTES,
};
pub use topk::{
    topk_reply_item, CRand, DecayRandom, FrozenTopK, TopK, TopKBucket, TopKBucketsError, TopKCreateError,
    TopKIncrementError, TopKSlot, RAND_MAX, TOPK_BUCKET_BYTES, TOPK_DEFAULT_DECAY, TOPK_DEFAULT_DEPTH,
    TOPK_DEFAULT_WIDTH, TOPK_FINGERPRINT_SEED, TOPK_MAX_BUCKETS, TOPK_MAX_INCREMENT,
};

/// Largest capacity of `BF.RESERVE`, `BF.INSERT` and `bf-initial-size` (§3, §8).
pub const BF_MAX_CAPACITY: u64 = 1 << 30;
/// Largest Bloom expansion factor (§3, §8); 0 means non-scaling.
pub const BF_MAX_EXPANSION: u32 = 32768;
/// Error rates above this are silently capped to it when a filter is created (§3, §8).
pub const BF_ERROR_RATE_CAP: f64 = 0.25;
/// Default `bf-error-rate`.
pub const BF_DEFAULT_ERROR_RATE: f64 = 0.01;
/// Default `bf-initial-size`.
pub const BF_DEFAULT_CAPACITY: u64 = 100;
/// Default `bf-expansion-factor`.
pub const BF_DEFAULT_EXPANSION: u32 = 2;

/// Largest capacity of `CF.RESERVE`, `CF.INSERT` and `cf-initial-size` (§3, §8).
pub const CF_MAX_CAPACITY: u64 = 1 << 30;
/// Largest cuckoo bucket size (slots per bucket) (§3).
pub const CF_MAX_BUCKET_SIZE: u16 = 255;
/// Largest cuckoo kick-out limit (§3).
pub const CF_MAX_ITERATIONS: u16 = 65535;
/// Largest cuckoo expansion factor (§3).
pub const CF_MAX_EXPANSION: u16 = 32768;
/// Hard limit on the number of cuckoo sub-filters (§6.5, §6.8).
pub const CF_MAX_FILTERS: u16 = 65535;
/// Largest bucket count of a cuckoo sub-filter: 2^56 − 1 (§6.5, §7.2).
pub const CF_MAX_BUCKETS: u64 = (1 << 56) - 1;
/// Default `cf-bucket-size`.
pub const CF_DEFAULT_BUCKET_SIZE: u16 = 2;
/// Default `cf-initial-size`.
pub const CF_DEFAULT_CAPACITY: u64 = 1024;
/// Default `cf-max-iterations`.
pub const CF_DEFAULT_MAX_ITERATIONS: u16 = 20;
/// Default `cf-expansion-factor`.
pub const CF_DEFAULT_EXPANSION: u16 = 1;
/// Default `cf-max-expansions`: a CF write fails up front when the filter has this many sub-filters.
pub const CF_DEFAULT_MAX_EXPANSIONS: u32 = 32;
