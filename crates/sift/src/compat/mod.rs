//! Bit-exact implementations of other systems' filters.
//!
//! These types reproduce someone else's layout, hashing and counters exactly, so that their dumps
//! move between `sift` and the original in both directions. They do not use the `sift` file
//! format or the [`crate::Filter`] traits: their behaviour is fixed by the system they copy.
//! A `sift` file can still carry them ([`crate::Persist`], kinds `redisbloom-bf`, `redisbloom-cf`,
//! `guava-bloom`): the payload is then the other system's own serialisation, unchanged.
//!
//! * [`redisbloom`]: RedisBloom's scalable Bloom chain (`MBbloom--`) and cuckoo filter
//!   (`MBbloomCF`), with their `SCANDUMP` / `LOADCHUNK` formats; its Count-Min Sketch
//!   (`CMSk-TYPE`), Top-K (`TopK-TYPE`) and t-digest (`TDIS-TYPE`); the RDB encoding of all five.
//! * [`guava`]: Guava's `BloomFilter` (`MURMUR128_MITZ_64`) and its `writeTo` / `readFrom` bytes.

pub mod guava;
pub mod redisbloom;
