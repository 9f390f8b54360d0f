//! The kinds of filter the file format knows, by their stable code: a leaf module, so that the
//! error type can name a kind without depending on the format ([`crate::format`] re-exports it).

/// The kinds of filter a file can hold, by their stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
#[non_exhaustive]
pub enum FilterKind {
    /// [`crate::Bloom`]: classic bit array.
    Bloom = 1,
    /// [`crate::BlockedBloom`]: 512-bit cache-line blocks (also written by `AtomicBloom`).
    BlockedBloom = 2,
    /// Split-block Bloom filter, bit-compatible with Apache Parquet's SBBF.
    SplitBlockBloom = 3,
    /// [`crate::CountingBloom`]: 4-bit counters.
    CountingBloom = 4,
    /// [`crate::ScalableBloom`]: a growing chain of blocked Bloom layers.
    ScalableBloom = 5,
    /// [`crate::AgingBloom`]: age-partitioned rows, a sliding window by count.
    AgingBloom = 6,
    /// [`crate::TimeLimitedBloom`]: age-partitioned rows, a sliding window by time.
    TimeLimitedBloom = 7,
    /// Cuckoo filter.
    Cuckoo = 16,
    /// Rank-and-select quotient filter.
    Quotient = 17,
    /// Xor filter with 8-bit fingerprints.
    Xor8 = 18,
    /// Binary fuse filter with 8-bit fingerprints.
    BinaryFuse8 = 19,
    /// Binary fuse filter with 16-bit fingerprints.
    BinaryFuse16 = 20,
    /// Golomb-coded set.
    Gcs = 21,
    /// [`crate::ScalableCuckoo`]: a growing chain of cuckoo tables.
    ScalableCuckoo = 22,
    /// RedisBloom's scalable Bloom chain (`MBbloom--`,
    /// [`crate::compat::redisbloom::BloomChain`]), stored as its `SCANDUMP` chunks.
    RedisBloomChain = 32,
    /// RedisBloom's cuckoo filter (`MBbloomCF`, [`crate::compat::redisbloom::CuckooFilter`]),
    /// stored as its `SCANDUMP` chunks.
    RedisBloomCuckoo = 33,
    /// Guava's `BloomFilter` ([`crate::compat::guava::GuavaBloom`]), stored as its `writeTo` bytes.
    Guava = 34,
}

impl FilterKind {
    /// Every kind, in code order.
    pub const ALL: [FilterKind; 17] = [
        FilterKind::Bloom,
        FilterKind::BlockedBloom,
        FilterKind::SplitBlockBloom,
        FilterKind::CountingBloom,
        FilterKind::ScalableBloom,
        FilterKind::AgingBloom,
        FilterKind::TimeLimitedBloom,
        FilterKind::Cuckoo,
        FilterKind::Quotient,
        FilterKind::Xor8,
        FilterKind::BinaryFuse8,
        FilterKind::BinaryFuse16,
        FilterKind::Gcs,
        FilterKind::ScalableCuckoo,
        FilterKind::RedisBloomChain,
        FilterKind::RedisBloomCuckoo,
        FilterKind::Guava,
    ];

    /// The code stored in headers.
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// Looks a header code up.
    pub fn from_code(code: u16) -> Option<FilterKind> {
        FilterKind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// A short, stable name.
    pub const fn name(self) -> &'static str {
        match self {
            FilterKind::Bloom => "bloom",
            FilterKind::BlockedBloom => "blocked-bloom",
            FilterKind::SplitBlockBloom => "split-block-bloom",
            FilterKind::CountingBloom => "counting-bloom",
            FilterKind::ScalableBloom => "scalable-bloom",
            FilterKind::AgingBloom => "aging-bloom",
            FilterKind::TimeLimitedBloom => "time-limited-bloom",
            FilterKind::Cuckoo => "cuckoo",
            FilterKind::Quotient => "quotient",
            FilterKind::Xor8 => "xor8",
            FilterKind::BinaryFuse8 => "binary-fuse8",
            FilterKind::BinaryFuse16 => "binary-fuse16",
            FilterKind::Gcs => "gcs",
            FilterKind::ScalableCuckoo => "scalable-cuckoo",
            FilterKind::RedisBloomChain => "redisbloom-bf",
            FilterKind::RedisBloomCuckoo => "redisbloom-cf",
            FilterKind::Guava => "guava-bloom",
        }
    }
}

impl core::fmt::Display for FilterKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
