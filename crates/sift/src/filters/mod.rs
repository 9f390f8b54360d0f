//! The filter families, one file each.

pub mod blocked_bloom;
pub mod bloom;
