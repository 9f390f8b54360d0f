//! placeholder
#![allow(missing_docs)]
pub struct Quotient;
