//! The filter families, one file each.

pub mod bloom;
pub mod counting_bloom;
pub mod cuckoo;
pub mod quotient;
pub mod split_block;
