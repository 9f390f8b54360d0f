//! The filter families, one file each.

pub mod atomic_bloom;
pub mod blocked_bloom;
pub mod bloom;
pub mod counting_bloom;
pub mod cuckoo;
pub mod quotient;
pub mod scalable_bloom;
pub mod split_block;
