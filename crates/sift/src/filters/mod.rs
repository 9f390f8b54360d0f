//! The filter families, one file each.

pub mod binary_fuse;
pub mod bloom;
pub mod gcs;
pub mod peel;
pub mod xor;
