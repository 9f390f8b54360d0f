//! Bit and word storage shared by the Bloom family.
//!
//! Storage is allocated with `try_reserve_exact`, so an absurd size is an [`Error`], not an
//! abort. Bits are numbered least-significant first within little-endian 64-bit words, so the
//! byte image of a bit array (what the file format stores) is the same on every platform: bit `x`
//! is bit `x & 7` of byte `x >> 3`.

use crate::error::{Error, Result};

/// The largest filter payload `sift` will allocate: 2^48 bytes (256 TiB). Anything above is
/// certainly a mistake in the parameters, not a real filter.
pub const MAX_BYTES: u128 = 1 << 48;

/// Allocates `len` zeroed values of `T`, failing with a structured error instead of aborting.
pub(crate) fn try_zeroed<T: Copy + Default>(len: usize) -> Result<Vec<T>> {
    let bytes = (len as u128) * core::mem::size_of::<T>() as u128;
    if bytes > MAX_BYTES || bytes > isize::MAX as u128 {
        return Err(Error::CapacityExceeded {
            requested_bytes: bytes,
            limit_bytes: MAX_BYTES.min(isize::MAX as u128),
        });
    }
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory { bytes: bytes as usize })?;
    v.resize(len, T::default());
    Ok(v)
}

/// Converts a bit count that may not fit in `usize` into a word count, with a structured error.
pub(crate) fn words_for_bits(bits: u64) -> Result<usize> {
    let words = bits.div_ceil(64);
    let bytes = words as u128 * 8;
    if bytes > MAX_BYTES || words > usize::MAX as u64 {
        return Err(Error::CapacityExceeded { requested_bytes: bytes, limit_bytes: MAX_BYTES });
    }
    Ok(words as usize)
}

/// A fixed-size array of bits backed by 64-bit words.
#[derive(Clone, PartialEq, Eq)]
pub struct BitVec {
    words: Vec<u64>,
    bits: u64,
}

impl core::fmt::Debug for BitVec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BitVec").field("bits", &self.bits).field("ones", &self.count_ones()).finish()
    }
}

impl BitVec {
    /// `bits` zero bits.
    pub fn zeroed(bits: u64) -> Result<Self> {
        let words = try_zeroed(words_for_bits(bits)?)?;
        Ok(BitVec { words, bits })
    }

    /// Rebuilds from the little-endian byte image written by [`BitVec::write_le`].
    pub fn from_le_bytes(bits: u64, bytes: &[u8]) -> Result<Self> {
        let n = words_for_bits(bits)?;
        if bytes.len() as u128 != n as u128 * 8 {
            return Err(crate::error::FormatError::Truncated {
                what: "bit array",
                needed: n as u64 * 8,
                available: bytes.len() as u64,
            }
            .into());
        }
        let mut words: Vec<u64> = try_zeroed(n)?;
        for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
        }
        let v = BitVec { words, bits };
        // Bits past the end must be zero, or count_ones and equality would see phantom bits.
        if v.tail_garbage() {
            return Err(
                crate::error::FormatError::InvalidParams("bits set past the end of the bit array").into()
            );
        }
        Ok(v)
    }

    fn tail_garbage(&self) -> bool {
        let used = self.bits % 64;
        used != 0 && self.words.last().is_some_and(|w| w >> used != 0)
    }

    /// Appends the little-endian byte image (8 bytes per word) to `out`.
    pub fn write_le(&self, out: &mut Vec<u8>) {
        out.reserve(self.words.len() * 8);
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }

    /// Number of bits.
    #[inline]
    pub fn len(&self) -> u64 {
        self.bits
    }

    /// Whether the array has no bits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bits == 0
    }

    /// The backing words.
    #[inline]
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The backing words, mutably (callers keep bits past `len` zero).
    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Bytes of storage.
    pub fn size_in_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Reads bit `i` (`i < len`).
    #[inline(always)]
    pub fn get(&self, i: u64) -> bool {
        debug_assert!(i < self.bits);
        (self.words[(i >> 6) as usize] >> (i & 63)) & 1 == 1
    }

    /// Sets bit `i` and returns whether it was 0 before.
    #[inline(always)]
    pub fn set(&mut self, i: u64) -> bool {
        debug_assert!(i < self.bits);
        let w = &mut self.words[(i >> 6) as usize];
        let mask = 1u64 << (i & 63);
        let was_clear = *w & mask == 0;
        *w |= mask;
        was_clear
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| w.count_ones() as u64).sum()
    }

    /// `self |= other` (same length).
    pub fn or_assign(&mut self, other: &BitVec) {
        debug_assert_eq!(self.bits, other.bits);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    /// `self &= other` (same length).
    pub fn and_assign(&mut self, other: &BitVec) {
        debug_assert_eq!(self.bits, other.bits);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// Clears every bit.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }
}

/// Hints the CPU to bring the cache line holding `ptr` into L1 ahead of use. A no-op on targets
/// without a prefetch instruction.
#[inline(always)]
pub(crate) fn prefetch<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint: it never faults, whatever the address, and SSE is part of
    // the x86_64 baseline. The fallback on other targets is to do nothing, which is always correct.
    unsafe {
        core::arch::x86_64::_mm_prefetch(ptr as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_count() {
        let mut b = BitVec::zeroed(130).unwrap();
        assert!(b.set(0));
        assert!(!b.set(0));
        assert!(b.set(129));
        assert!(b.get(129) && b.get(0) && !b.get(64));
        assert_eq!(b.count_ones(), 2);
    }

    #[test]
    fn byte_image_round_trip_and_layout() {
        let mut b = BitVec::zeroed(100).unwrap();
        b.set(9);
        let mut out = Vec::new();
        b.write_le(&mut out);
        assert_eq!(out.len(), 16);
        assert_eq!(out[1], 0b10, "bit 9 is bit 1 of byte 1");
        assert_eq!(BitVec::from_le_bytes(100, &out).unwrap(), b);
        out[15] = 0x80; // bit 127, past the end
        assert!(BitVec::from_le_bytes(100, &out).is_err());
        assert!(BitVec::from_le_bytes(100, &out[..8]).is_err());
    }

    #[test]
    fn absurd_sizes_are_errors() {
        assert!(matches!(BitVec::zeroed(u64::MAX), Err(Error::CapacityExceeded { .. })));
        assert!(matches!(try_zeroed::<u64>(usize::MAX / 4), Err(Error::CapacityExceeded { .. })));
    }
}
