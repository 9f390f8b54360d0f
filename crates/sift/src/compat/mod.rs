//! Bit-exact implementations of other systems' filters.
//!
//! These types reproduce someone else's layout, hashing and counters exactly, so that their dumps
//! move between `sift` and the original in both directions. They do not use the `sift` file
//! format or the [`crate::Filter`] traits: their behaviour is fixed by the system they copy.
//!
//! * [`redisbloom`]: RedisBloom's scalable Bloom chain (`MBbloom--`) and cuckoo filter
//!   (`MBbloomCF`), with their `SCANDUMP` / `LOADCHUNK` formats.

pub mod redisbloom;
