//! The stable, versioned binary format of `sift` filters (byte by byte in `docs/FORMAT.md`).
//!
//! ```text
//! offset  size  field
//!      0     4  magic "SIFT"
//!      4     2  format version (u16, currently 1)
//!      6     2  filter kind (u16, see FilterKind)
//!      8     1  hash function id (see HashKind)
//!      9     1  flags (0; reserved)
//!     10     2  reserved (0)
//!     12     4  parameter block length P (u32)
//!     16     8  hash seed (u64)
//!     24     8  payload length L (u64)
//!     32     P  parameters (kind-specific), then zero padding to a multiple of 8
//!   32+P'    L  payload (kind-specific; starts 8-byte aligned relative to the file start)
//!   ...      4  CRC32C (Castagnoli) of every preceding byte (u32)
//! ```
//!
//! Everything is little-endian. [`decode`] checks the structure and borrows the parameter block
//! and the payload from the input without copying (so a memory-mapped file can be queried in
//! place); [`RawFilter::verify`] checks the CRC separately, since it reads every byte. The owning
//! `from_bytes` constructors of the filters always verify.

mod chain;
mod frozen;
mod params;
mod stream;

pub(crate) use chain::{encode_chain, split_chain};
pub use frozen::FrozenFile;
pub(crate) use frozen::Part as FrozenPart;
#[cfg(test)]
pub(crate) use frozen::{assert_each_write_keeps, assert_each_write_keeps_frozen, NamedWrite};
pub use params::{ParamReader, ParamWriter};
pub use stream::StreamEncoder;
pub(crate) use stream::{words_file_range, write_words};

use crate::error::{FormatError, KindCode};
use crate::hash::{HashKind, Hasher};
pub use crate::kind::FilterKind;

/// File magic.
pub const MAGIC: [u8; 4] = *b"SIFT";
/// The format version this build writes and reads.
pub const VERSION: u16 = 1;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 32;
/// Size of the CRC trailer.
pub const TRAILER_LEN: usize = 4;

/// Rounds up to a multiple of 8.
const fn pad8(n: usize) -> usize {
    (n + 7) & !7
}

/// Writes one filter file: header, parameters, payload, CRC.
///
/// ```
/// use sift::format::{Encoder, FilterKind, ParamWriter, decode};
/// use sift::hash::Hasher;
/// let mut p = ParamWriter::new();
/// p.u64(42);
/// let mut enc = Encoder::new(FilterKind::Bloom, Hasher::default(), p.as_bytes(), 3);
/// enc.payload().extend_from_slice(&[1, 2, 3]);
/// let bytes = enc.finish();
/// let raw = decode(&bytes).unwrap();
/// raw.verify().unwrap();
/// assert_eq!(raw.payload(), &[1, 2, 3]);
/// ```
#[derive(Debug)]
pub struct Encoder {
    out: Vec<u8>,
    payload_start: usize,
    payload_len: u64,
}

impl Encoder {
    /// Starts a file of `kind` hashed by `hasher`, with the given parameter block and a payload
    /// of exactly `payload_len` bytes, to be appended through [`Encoder::payload`].
    pub fn new(kind: FilterKind, hasher: Hasher, params: &[u8], payload_len: u64) -> Self {
        let params_len = u32::try_from(params.len()).expect("parameter blocks are small");
        let payload_start = HEADER_LEN + pad8(params.len());
        let mut out = Vec::with_capacity(payload_start + payload_len as usize + TRAILER_LEN);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&kind.code().to_le_bytes());
        out.push(hasher.kind().id());
        out.push(0); // flags
        out.extend_from_slice(&0u16.to_le_bytes()); // reserved
        out.extend_from_slice(&params_len.to_le_bytes());
        out.extend_from_slice(&hasher.seed().to_le_bytes());
        out.extend_from_slice(&payload_len.to_le_bytes());
        debug_assert_eq!(out.len(), HEADER_LEN);
        out.extend_from_slice(params);
        out.resize(payload_start, 0);
        Encoder { out, payload_start, payload_len }
    }

    /// The buffer to append the payload to.
    pub fn payload(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Appends the CRC and returns the file bytes.
    ///
    /// # Panics
    /// If the payload written differs from the length declared in [`Encoder::new`]: that is a
    /// bug in the filter's encoder, never a consequence of input data.
    pub fn finish(mut self) -> Vec<u8> {
        let written = (self.out.len() - self.payload_start) as u64;
        assert_eq!(written, self.payload_len, "encoder wrote a payload of the wrong length");
        let crc = crc32c::crc32c(&self.out);
        self.out.extend_from_slice(&crc.to_le_bytes());
        self.out
    }
}

/// A structurally valid filter file, borrowed from the bytes it was decoded from.
#[derive(Debug, Clone, Copy)]
pub struct RawFilter<'a> {
    version: u16,
    kind: u16,
    hasher: Hasher,
    params: &'a [u8],
    payload: &'a [u8],
    covered: &'a [u8],
    stored_crc: u32,
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Checks the structure of a filter file and borrows its parts. Does not read the payload and
/// does not check the CRC: call [`RawFilter::verify`] for that.
pub fn decode(bytes: &[u8]) -> Result<RawFilter<'_>, FormatError> {
    let avail = bytes.len() as u64;
    if bytes.len() < 4 {
        let mut found = [0u8; 4];
        found[..bytes.len()].copy_from_slice(bytes);
        if bytes != &MAGIC[..bytes.len()] {
            return Err(FormatError::BadMagic { found });
        }
        return Err(FormatError::Truncated { what: "header", needed: HEADER_LEN as u64, available: avail });
    }
    if bytes[..4] != MAGIC {
        return Err(FormatError::BadMagic { found: bytes[..4].try_into().expect("4 bytes") });
    }
    if bytes.len() < HEADER_LEN {
        return Err(FormatError::Truncated { what: "header", needed: HEADER_LEN as u64, available: avail });
    }
    let version = le_u16(bytes, 4);
    if version != VERSION {
        return Err(FormatError::UnsupportedVersion { expected: VERSION, got: version });
    }
    let kind = le_u16(bytes, 6);
    let hash_kind = HashKind::from_id(bytes[8])?;
    if bytes[9] != 0 || le_u16(bytes, 10) != 0 {
        return Err(FormatError::InvalidParams("reserved header bytes are not zero"));
    }
    let params_len = le_u32(bytes, 12) as u64;
    let seed = le_u64(bytes, 16);
    let payload_len = le_u64(bytes, 24);
    let payload_start = HEADER_LEN as u64 + ((params_len + 7) & !7);
    let total = payload_start
        .checked_add(payload_len)
        .and_then(|x| x.checked_add(TRAILER_LEN as u64))
        .ok_or(FormatError::InvalidParams("payload length overflows"))?;
    if avail < total {
        return Err(FormatError::Truncated { what: "filter", needed: total, available: avail });
    }
    if avail > total {
        return Err(FormatError::TrailingBytes { extra: avail - total });
    }
    let payload_start = payload_start as usize;
    let params_end = HEADER_LEN + params_len as usize;
    if bytes[params_end..payload_start].iter().any(|&b| b != 0) {
        return Err(FormatError::InvalidParams("parameter padding is not zero"));
    }
    let end = bytes.len() - TRAILER_LEN;
    Ok(RawFilter {
        version,
        kind,
        hasher: Hasher::new(hash_kind, seed),
        params: &bytes[HEADER_LEN..params_end],
        payload: &bytes[payload_start..end],
        covered: &bytes[..end],
        stored_crc: le_u32(bytes, end),
    })
}

/// [`decode`], then checks that the file holds a filter of `expected` kind.
pub fn decode_kind(bytes: &[u8], expected: FilterKind) -> Result<RawFilter<'_>, FormatError> {
    let raw = decode(bytes)?;
    if raw.kind != expected.code() {
        return Err(FormatError::WrongKind { expected, got: KindCode(raw.kind) });
    }
    Ok(raw)
}

/// [`decode_kind`] and [`RawFilter::verify`]: what owning `from_bytes` constructors call.
pub fn decode_verified(bytes: &[u8], expected: FilterKind) -> Result<RawFilter<'_>, FormatError> {
    let raw = decode_kind(bytes, expected)?;
    raw.verify()?;
    Ok(raw)
}

impl<'a> RawFilter<'a> {
    /// Format version of the file.
    pub fn version(&self) -> u16 {
        self.version
    }
    /// The filter kind, if this build knows it.
    pub fn kind(&self) -> Option<FilterKind> {
        FilterKind::from_code(self.kind)
    }
    /// The raw kind code.
    pub fn kind_code(&self) -> u16 {
        self.kind
    }
    /// Hash function and seed.
    pub fn hasher(&self) -> Hasher {
        self.hasher
    }
    /// The kind-specific parameter block.
    pub fn params(&self) -> &'a [u8] {
        self.params
    }
    /// A reader over the parameter block.
    pub fn param_reader(&self) -> ParamReader<'a> {
        ParamReader::new(self.params)
    }
    /// The payload, borrowed.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }
    /// The CRC stored in the trailer.
    pub fn stored_crc(&self) -> u32 {
        self.stored_crc
    }
    /// Computes the CRC32C of the file and compares it with the trailer.
    pub fn verify(&self) -> Result<(), FormatError> {
        let computed = crc32c::crc32c(self.covered);
        if computed != self.stored_crc {
            return Err(FormatError::ChecksumMismatch { stored: self.stored_crc, computed });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut p = ParamWriter::new();
        p.u64(7).u32(3);
        let mut e = Encoder::new(FilterKind::Bloom, Hasher::new(HashKind::Xxh3_64, 99), p.as_bytes(), 16);
        e.payload().extend_from_slice(&[0xab; 16]);
        e.finish()
    }

    #[test]
    fn layout_is_pinned() {
        let b = sample();
        assert_eq!(&b[..4], b"SIFT");
        assert_eq!(le_u16(&b, 4), 1);
        assert_eq!(le_u16(&b, 6), 1);
        assert_eq!(b[8], 1);
        assert_eq!(le_u32(&b, 12), 12);
        assert_eq!(le_u64(&b, 16), 99);
        assert_eq!(le_u64(&b, 24), 16);
        assert_eq!(b.len(), 32 + 16 + 16 + 4);
        let raw = decode(&b).unwrap();
        assert_eq!(raw.params().len(), 12);
        assert_eq!(raw.payload(), &[0xab; 16]);
        assert_eq!(raw.hasher(), Hasher::new(HashKind::Xxh3_64, 99));
        raw.verify().unwrap();
    }

    #[test]
    fn every_truncation_is_an_error() {
        let b = sample();
        for cut in 0..b.len() {
            assert!(decode(&b[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn every_bit_flip_is_detected() {
        let b = sample();
        for i in 0..b.len() * 8 {
            let mut c = b.clone();
            c[i / 8] ^= 1 << (i % 8);
            let ok = decode(&c).and_then(|r| r.verify());
            assert!(ok.is_err(), "flip of bit {i} went unnoticed");
        }
    }

    #[test]
    fn newer_version_and_other_kind_are_refused() {
        let mut b = sample();
        b[4] = 2;
        assert_eq!(decode(&b).unwrap_err(), FormatError::UnsupportedVersion { expected: 1, got: 2 });
        let b = sample();
        assert!(matches!(
            decode_kind(&b, FilterKind::Cuckoo),
            Err(FormatError::WrongKind { expected: FilterKind::Cuckoo, got: KindCode(1) })
        ));
        let mut c = b.clone();
        c.push(0);
        assert_eq!(decode(&c).unwrap_err(), FormatError::TrailingBytes { extra: 1 });
    }
}
