//! The filter families, one file each.

pub mod bloom;
