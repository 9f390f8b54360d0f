//! Little-endian readers and writers for the kind-specific parameter blocks.

use crate::error::FormatError;

/// Builds a parameter block, field by field, little-endian.
#[derive(Debug, Default, Clone)]
pub struct ParamWriter(Vec<u8>);

impl ParamWriter {
    /// An empty block.
    pub fn new() -> Self {
        ParamWriter(Vec::new())
    }
    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// Appends a `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// Appends an `f64` (IEEE-754 binary64 bits).
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.u64(v.to_bits())
    }
    /// The block.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Reads a parameter block written by [`ParamWriter`]; every read past the end is a
/// [`FormatError::Truncated`], and [`ParamReader::finish`] refuses leftover bytes.
#[derive(Debug, Clone)]
pub struct ParamReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> ParamReader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        ParamReader { bytes, at: 0 }
    }

    fn take<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], FormatError> {
        let end = self.at + N;
        if end > self.bytes.len() {
            return Err(FormatError::Truncated {
                what,
                needed: end as u64,
                available: self.bytes.len() as u64,
            });
        }
        let out = self.bytes[self.at..end].try_into().expect("N bytes");
        self.at = end;
        Ok(out)
    }

    /// Reads a `u8` field named `what`.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, FormatError> {
        Ok(self.take::<1>(what)?[0])
    }
    /// Reads a `u16` field.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.take(what)?))
    }
    /// Reads a `u32` field.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.take(what)?))
    }
    /// Reads a `u64` field.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.take(what)?))
    }
    /// Reads an `f64` field.
    pub fn f64(&mut self, what: &'static str) -> Result<f64, FormatError> {
        Ok(f64::from_bits(self.u64(what)?))
    }
    /// Reads a false-positive rate: must be a number in (0, 1).
    pub fn fpr(&mut self, what: &'static str) -> Result<f64, FormatError> {
        let p = self.f64(what)?;
        if !(p > 0.0 && p < 1.0) {
            return Err(FormatError::InvalidParams("false-positive rate outside (0, 1)"));
        }
        Ok(p)
    }
    /// Checks that every byte was read.
    pub fn finish(self) -> Result<(), FormatError> {
        if self.at != self.bytes.len() {
            return Err(FormatError::InvalidParams("parameter block longer than this kind defines"));
        }
        Ok(())
    }
}
