//! The filter families, one file each.

pub mod bloom;
pub mod cuckoo;
pub mod quotient;
