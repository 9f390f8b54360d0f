//! The filter families, one file each.

pub mod aging;
pub mod atomic_bloom;
pub mod binary_fuse;
pub mod blocked_bloom;
pub mod bloom;
pub mod counting_bloom;
pub mod cuckoo;
pub mod gcs;
pub mod peel;
pub mod quotient;
pub mod scalable_bloom;
pub mod scalable_cuckoo;
pub mod split_block;
pub mod time_limited;
pub mod xor;
