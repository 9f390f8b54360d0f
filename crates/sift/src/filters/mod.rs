//! The filter families, one file each.

pub mod atomic_bloom;
pub mod blocked_bloom;
pub mod bloom;
pub mod scalable_bloom;
