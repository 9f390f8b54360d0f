//! Golomb-coded set (GCS): the most compact static filter `sift` has, at the cost of slow queries.
//!
//! Putze, Sanders & Singler, "Cache-, hash- and space-efficient Bloom filters", JEA 14, 2009, §4
//! (the idea goes back to Golomb, "Run-length encodings", IEEE Trans. IT 1966); the BIP-158
//! parameter set from Osuntokun & Akselrod, "BIP 158: Compact block filters for light clients".
//!
//! * **Idea**: hash the `N` items uniformly to `0..N·M`, sort the values, and store the gaps
//!   between consecutive values with Golomb–Rice coding: the quotient `gap >> P` in unary (that many
//!   1 bits, then a 0), then the low `P` bits of the gap, most significant first. A query hashes
//!   the item the same way and looks for its value; a sampled index (the value and bit offset of
//!   every `S`-th element, kept in memory) bounds a lookup to decoding at most `S` gaps.
//! * **FPR**: a non-member's value hits one of the `N` member values with probability `≈ 1/M`
//!   (exactly: distinct member values / `N·M`, what [`Filter::expected_fpr`] reports).
//! * **Space**: `P + 1 + 1/(e^(2^P/M) - 1)` bits per key ([`crate::math::gcs_bits_per_key`]):
//!   `log2(1/p) + 1.58` for the native `M = 2^P`, `log2 M + 1.47` for BIP-158's `M ≈ 1.5·2^P`,
//!   within 0.1 to 0.2 bit of the information-theoretic `log2(1/p) + 1.44`, against `1.44·log2(1/p)`
//!   for a Bloom filter. The in-memory index adds `128/S` bits per key (not stored in files).
//! * **Parameters**: [`GcsParams::for_fpr`] (XXH3, `M = 2^P`, `P = ⌈log2(1/p)⌉`),
//!   [`GcsParams::bip158`] (SipHash-2-4 with a 128-bit key, `P = 19`, `M = 784931`: byte-exact
//!   with Bitcoin's basic block filters through [`Gcs::to_bip158_bytes`]), or any modulus with
//!   [`GcsParams::with_modulus`]; the sampling interval `S` ([`GcsParams::sample_every`]).
//! * **Limits**: static; a query decodes up to `S` gaps (hundreds of nanoseconds, against tens for
//!   a binary fuse filter): use it where bytes on disk or on the wire matter most.
//!
//! ```
//! use sift::prelude::*;
//! use sift::{Gcs, GcsParams};
//!
//! let keys: Vec<String> = (0..20_000).map(|i| format!("doc{i}")).collect();
//! let f = Gcs::build_with_params(&keys, GcsParams::for_fpr(1.0 / 1024.0)?)?;
//! assert!(keys.iter().all(|k| f.contains(k)));
//! // 500k non-members at p = 2^-10: expect 488, 99.9% binomial bound 557.
//! let fp = (0..500_000).filter(|i| f.contains(format!("x{i}"))).count();
//! assert!(fp < 557, "{fp} false positives");
//! assert!(f.coded_bits_per_key() < 10.0 + 1.6);
//! # Ok::<(), sift::Error>(())
//! ```

use crate::error::{check_fpr, Error, FormatError, Result};
use crate::format::{decode_verified, Encoder, FilterKind, ParamWriter};
use crate::hash::{fastrange, Digest, HashKind, Hasher};
use crate::traits::{Filter, Persist};
use crate::traits_static::StaticFilter;

/// Largest Golomb–Rice remainder width.
pub const MAX_P_BITS: u32 = 56;
/// BIP-158 basic filter: remainder bits.
pub const BIP158_P: u32 = 19;
/// BIP-158 basic filter: modulus (FPR `1/M`).
pub const BIP158_M: u64 = 784_931;
/// Default sampling interval of the in-memory index.
pub const DEFAULT_SAMPLE_EVERY: u32 = 128;

/// Parameters of a [`Gcs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcsParams {
    p_bits: u32,
    modulus: u64,
    hasher: Hasher,
    sample_every: u32,
}

impl GcsParams {
    /// The native parameters for FPR `fpr`: `P = ⌈log2(1/fpr)⌉`, `M = 2^P` (so the FPR is `2^-P ≤
    /// fpr`), XXH3-64 with seed 0.
    pub fn for_fpr(fpr: f64) -> Result<Self> {
        check_fpr(fpr)?;
        let p = (-fpr.log2()).ceil().max(1.0);
        if p > MAX_P_BITS as f64 {
            return Err(Error::param("fpr", fpr, "at least 2^-56 for a Golomb-coded set"));
        }
        let p = p as u32;
        Self::with_modulus(p, 1 << p, Hasher::default())
    }

    /// BIP-158's basic filter: SipHash-2-4 keyed with `(k0, k1)` (the first 16 bytes of the block
    /// hash, read as two little-endian words), `P = 19`, `M = 784931`.
    pub fn bip158(k0: u64, k1: u64) -> Self {
        GcsParams {
            p_bits: BIP158_P,
            modulus: BIP158_M,
            hasher: Hasher::sip24(k0, k1),
            sample_every: DEFAULT_SAMPLE_EVERY,
        }
    }

    /// Any modulus `M ≥ 2` (FPR `1/M`) and remainder width `P ≤ 56` with `M < 2^(P+8)` (so a gap's
    /// unary part stays short; `2^P ≈ 0.69·M` is the most compact choice).
    pub fn with_modulus(p_bits: u32, modulus: u64, hasher: Hasher) -> Result<Self> {
        if p_bits > MAX_P_BITS {
            return Err(Error::param("p_bits", p_bits, "at most 56"));
        }
        if modulus < 2 || (p_bits + 8 < 64 && modulus >= 1u64 << (p_bits + 8)) {
            return Err(Error::param("modulus", modulus, "at least 2 and below 2^(p_bits + 8)"));
        }
        Ok(GcsParams { p_bits, modulus, hasher, sample_every: DEFAULT_SAMPLE_EVERY })
    }

    /// Sets the sampling interval `S` of the in-memory index (1 to 65536): lookups decode at
    /// most `S` gaps; the index takes `128/S` bits per key.
    pub fn sample_every(mut self, s: u32) -> Result<Self> {
        if !(1..=65_536).contains(&s) {
            return Err(Error::param("sample_every", s, "between 1 and 65536"));
        }
        self.sample_every = s;
        Ok(self)
    }
}

/// One entry of the sampled index: the value of element `k·S` and the bit offset just after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    value: u64,
    next_bit: u64,
}

/// A Golomb-coded set. See the [module documentation](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gcs {
    params: GcsParams,
    /// Elements `N` (distinct item hashes).
    n: u64,
    /// `N · M`: the range of the hashed values.
    range: u64,
    /// The Golomb–Rice bit stream, most significant bit first, followed by 8 zero bytes so that a
    /// lookup can always read a whole 64-bit window.
    stream: Vec<u8>,
    /// Bits of the stream.
    bit_len: u64,
    index: Vec<Sample>,
    distinct_values: u64,
}

/// Writes bits most-significant first (BIP-158's `write_bits_big_endian`).
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    pending: u32,
    bits: u64,
}

impl BitWriter {
    /// Appends the low `k ≤ 56` bits of `v`.
    #[inline]
    fn write(&mut self, v: u64, k: u32) {
        debug_assert!(k <= 56);
        if k == 0 {
            return;
        }
        self.acc = (self.acc << k) | (v & ((1u64 << k) - 1));
        self.pending += k;
        self.bits += k as u64;
        while self.pending >= 8 {
            self.pending -= 8;
            self.out.push((self.acc >> self.pending) as u8);
        }
        self.acc &= (1u64 << self.pending) - 1;
    }

    /// Golomb–Rice code of `delta`: unary quotient, stop bit, `p` remainder bits.
    #[inline]
    fn rice(&mut self, delta: u64, p: u32) {
        let mut q = delta >> p;
        while q >= 55 {
            self.write(u64::MAX, 55);
            q -= 55;
        }
        self.write(((1u64 << q) - 1) << 1, q as u32 + 1);
        self.write(delta, p);
    }

    /// Pads the last byte with zeros.
    fn finish(mut self) -> (Vec<u8>, u64) {
        if self.pending > 0 {
            self.out.push((self.acc << (8 - self.pending)) as u8);
        }
        (self.out, self.bits)
    }
}

/// Reads bits most-significant first from a stream that has at least 8 bytes after `limit` bits.
struct BitReader<'a> {
    bytes: &'a [u8],
    pos: u64,
}

impl BitReader<'_> {
    /// The 64 bits from `pos` (the top `64 - (pos & 7)` ≥ 57 are stream bits).
    #[inline(always)]
    fn window(&self) -> u64 {
        let at = (self.pos >> 3) as usize;
        let w = match self.bytes.get(at..at + 8) {
            Some(b) => u64::from_be_bytes(b.try_into().expect("8 bytes")),
            None => 0, // only for corrupted input, which `from_bytes` rejects before any query
        };
        w << (self.pos & 7)
    }

    /// Decodes one gap. The common case (quotient and remainder within one 57-bit window) reads
    /// the stream once.
    #[inline(always)]
    fn rice(&mut self, p: u32) -> u64 {
        let w = self.window();
        let ones = w.leading_ones();
        if ones + 1 + p <= 57 {
            self.pos += (ones + 1 + p) as u64;
            let r = if p == 0 { 0 } else { (w << (ones + 1)) >> (64 - p) };
            return ((ones as u64) << p) | r;
        }
        self.rice_slow(p)
    }

    #[cold]
    fn rice_slow(&mut self, p: u32) -> u64 {
        let mut q = 0u64;
        loop {
            let ones = self.window().leading_ones();
            if ones < 57 {
                q += ones as u64;
                self.pos += ones as u64 + 1;
                break;
            }
            q += 56;
            self.pos += 56;
        }
        let r = if p == 0 { 0 } else { self.window() >> (64 - p) };
        self.pos += p as u64;
        (q << p) | r
    }
}

impl Gcs {
    /// Builds the set of `items` with `params` (duplicates allowed).
    pub fn build_with_params<T: AsRef<[u8]>>(items: &[T], params: GcsParams) -> Result<Self> {
        let mut hashes: Vec<u64> = Vec::new();
        hashes
            .try_reserve_exact(items.len())
            .map_err(|_| Error::OutOfMemory { bytes: items.len().saturating_mul(8) })?;
        hashes.extend(items.iter().map(|i| params.hasher.hash64(i.as_ref())));
        Self::from_hashes_with_params(&hashes, params)
    }

    /// Builds the set from the item hashes `params.hasher.hash64(item)` (duplicates allowed:
    /// equal hashes are kept once, so `N` counts distinct hashes).
    pub fn from_hashes_with_params(hashes: &[u64], params: GcsParams) -> Result<Self> {
        let mut sorted: Vec<u64> = Vec::new();
        sorted.try_reserve_exact(hashes.len()).map_err(|_| Error::OutOfMemory { bytes: hashes.len() * 8 })?;
        sorted.extend_from_slice(hashes);
        sorted.sort_unstable();
        sorted.dedup();
        let n = sorted.len() as u64;
        let range = n.checked_mul(params.modulus).ok_or(Error::CapacityExceeded {
            requested_bytes: n as u128 * params.modulus as u128 / 8,
            limit_bytes: u64::MAX as u128 / 8,
        })?;
        let p = params.p_bits;
        let mut w = BitWriter { out: Vec::new(), acc: 0, pending: 0, bits: 0 };
        let expected_bits =
            (n as f64 * crate::math::gcs_bits_per_key(params.modulus as f64, p) * 1.01) as usize;
        w.out
            .try_reserve(expected_bits / 8 + 16)
            .map_err(|_| Error::OutOfMemory { bytes: expected_bits / 8 + 16 })?;
        let mut index = Vec::new();
        let s = params.sample_every as u64;
        let mut last = 0u64;
        let mut distinct = 0u64;
        // Multiply-shift is monotone in the hash, so the sorted hashes give sorted values.
        for (i, &h) in sorted.iter().enumerate() {
            let v = fastrange(h, range);
            distinct += (i == 0 || v != last) as u64;
            w.rice(v - last, p);
            if i as u64 % s == 0 {
                index.push(Sample { value: v, next_bit: w.bits });
            }
            last = v;
        }
        let (mut stream, bit_len) = w.finish();
        stream.extend_from_slice(&[0; 8]);
        Ok(Gcs { params, n, range, stream, bit_len, index, distinct_values: distinct })
    }

    /// Decodes and checks a stream of `n` gaps, building the index. Rejects streams that end
    /// early, values outside the range and nonzero padding.
    fn from_stream(params: GcsParams, n: u64, coded: &[u8], bit_len: u64) -> Result<Self> {
        let bad = |why: &'static str| -> Error { FormatError::InvalidParams(why).into() };
        if bit_len.div_ceil(8) != coded.len() as u64 {
            return Err(bad("gcs: stream length does not match its bit count"));
        }
        let range = n.checked_mul(params.modulus).ok_or_else(|| bad("gcs: N·M overflows"))?;
        // Each element takes at least P + 1 bits: this bounds n by the input size before any
        // allocation proportional to n.
        if n.saturating_mul(params.p_bits as u64 + 1) > bit_len {
            return Err(bad("gcs: stream too short for its element count"));
        }
        let mut stream = Vec::new();
        stream
            .try_reserve_exact(coded.len() + 8)
            .map_err(|_| Error::OutOfMemory { bytes: coded.len() + 8 })?;
        stream.extend_from_slice(coded);
        stream.extend_from_slice(&[0; 8]);
        let p = params.p_bits;
        let s = params.sample_every as u64;
        let mut index = Vec::new();
        let mut r = BitReader { bytes: &stream, pos: 0 };
        let mut last = 0u64;
        let mut distinct = 0u64;
        for i in 0..n {
            // A unary run longer than the rest of the stream is corrupt; the window reads zeros
            // past the end, so the loop ends, and the position check catches it.
            let delta = r.rice(p);
            if r.pos > bit_len {
                return Err(bad("gcs: stream ends inside an element"));
            }
            let v = last
                .checked_add(delta)
                .filter(|&v| v < range)
                .ok_or_else(|| bad("gcs: value out of range"))?;
            distinct += (i == 0 || delta != 0) as u64;
            if i % s == 0 {
                index.push(Sample { value: v, next_bit: r.pos });
            }
            last = v;
        }
        if bit_len - r.pos >= 8 {
            return Err(bad("gcs: bytes after the last element"));
        }
        if bit_len % 8 != 0 {
            let last_byte = coded[coded.len() - 1];
            if last_byte & ((1u8 << (8 - bit_len % 8)) - 1) != 0 {
                return Err(bad("gcs: nonzero padding bits"));
            }
        }
        if r.pos < bit_len {
            // Padding inside bit_len (BIP-158 streams are whole bytes): must be zero.
            let pad = bit_len - r.pos;
            if r.window() >> (64 - pad) != 0 {
                return Err(bad("gcs: nonzero padding bits"));
            }
        }
        Ok(Gcs { params, n, range, stream, bit_len, index, distinct_values: distinct })
    }

    /// The parameters.
    pub fn params(&self) -> GcsParams {
        self.params
    }

    /// Remainder width `P`.
    pub fn p_bits(&self) -> u32 {
        self.params.p_bits
    }

    /// Modulus `M` (FPR ≈ `1/M`).
    pub fn modulus(&self) -> u64 {
        self.params.modulus
    }

    /// The Golomb–Rice bit stream (whole bytes, zero-padded), as BIP-158 transmits it after `N`.
    pub fn coded_bytes(&self) -> &[u8] {
        &self.stream[..self.stream.len() - 8]
    }

    /// Bits of the coded set per element (the stream, without the in-memory index).
    pub fn coded_bits_per_key(&self) -> f64 {
        self.bit_len as f64 / self.n.max(1) as f64
    }

    /// The filter as BIP-158 serialises it: `N` as a Bitcoin CompactSize, then the bit stream
    /// padded to whole bytes.
    pub fn to_bip158_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.coded_bytes().len());
        let n = self.n;
        if n < 0xfd {
            out.push(n as u8);
        } else if n <= 0xffff {
            out.push(0xfd);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xfe);
            out.extend_from_slice(&(n as u32).to_le_bytes());
        } else {
            out.push(0xff);
            out.extend_from_slice(&n.to_le_bytes());
        }
        out.extend_from_slice(self.coded_bytes());
        out
    }

    /// Reads a BIP-158 basic filter (`N` as CompactSize, then the stream) keyed by `(k0, k1)`.
    pub fn from_bip158_bytes(bytes: &[u8], k0: u64, k1: u64) -> Result<Self> {
        let trunc = |needed: usize| -> Error {
            FormatError::Truncated {
                what: "BIP-158 CompactSize",
                needed: needed as u64,
                available: bytes.len() as u64,
            }
            .into()
        };
        let first = *bytes.first().ok_or_else(|| trunc(1))?;
        let (n, at) = match first {
            0xfd => (
                u16::from_le_bytes(bytes.get(1..3).ok_or_else(|| trunc(3))?.try_into().expect("2")) as u64,
                3,
            ),
            0xfe => (
                u32::from_le_bytes(bytes.get(1..5).ok_or_else(|| trunc(5))?.try_into().expect("4")) as u64,
                5,
            ),
            0xff => (u64::from_le_bytes(bytes.get(1..9).ok_or_else(|| trunc(9))?.try_into().expect("8")), 9),
            small => (small as u64, 1),
        };
        let coded = &bytes[at..];
        Self::from_stream(GcsParams::bip158(k0, k1), n, coded, coded.len() as u64 * 8)
    }

    /// Whether the hashed value `v` is in the set.
    #[inline]
    fn lookup(&self, v: u64) -> bool {
        // The last sample whose value is ≤ v.
        let k = self.index.partition_point(|s| s.value <= v);
        if k == 0 {
            return false;
        }
        let sample = self.index[k - 1];
        if sample.value == v {
            return true;
        }
        let s = self.params.sample_every as u64;
        let first = (k as u64 - 1) * s;
        let todo = (self.n - first - 1).min(s - 1);
        let mut r = BitReader { bytes: &self.stream, pos: sample.next_bit };
        let mut cur = sample.value;
        for _ in 0..todo {
            cur += r.rice(self.params.p_bits);
            if cur >= v {
                return cur == v;
            }
        }
        false
    }
}

impl Filter for Gcs {
    fn hasher(&self) -> Hasher {
        self.params.hasher
    }

    #[inline]
    fn contains_digest(&self, digest: Digest) -> bool {
        self.n != 0 && self.lookup(fastrange(digest.h1, self.range))
    }

    #[inline]
    fn contains_hash(&self, hash: u64) -> bool {
        self.n != 0 && self.lookup(fastrange(hash, self.range))
    }

    fn len(&self) -> usize {
        self.n as usize
    }

    /// The bit stream plus the in-memory sampled index.
    fn size_in_bytes(&self) -> usize {
        self.coded_bytes().len() + self.index.len() * core::mem::size_of::<Sample>()
    }

    fn expected_fpr(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.distinct_values as f64 / self.range as f64
        }
    }
}

impl StaticFilter for Gcs {
    /// Native parameters at FPR 2^-8 (the same FPR as [`crate::BinaryFuse8`], in 9.6 bits per key
    /// instead of 9.0, but compressed on disk); use [`Gcs::build_with_params`] to choose.
    fn build_with_hasher<T: AsRef<[u8]>>(items: &[T], hasher: Hasher) -> Result<Self> {
        let params = GcsParams::with_modulus(8, 256, hasher)?;
        Self::build_with_params(items, params)
    }

    fn build_from_hashes_with_hasher(hashes: &[u64], hasher: Hasher) -> Result<Self> {
        Self::from_hashes_with_params(hashes, GcsParams::with_modulus(8, 256, hasher)?)
    }
}

impl Persist for Gcs {
    const KIND: FilterKind = FilterKind::Gcs;

    /// Kind `Gcs` (21). Parameters (40 bytes): remainder bits `P` `u8` (≤ 56), reserved `u8` and
    /// `u16` = 0, sampling interval `S` `u32` (1 to 65536; the index itself is rebuilt on load),
    /// modulus `M` `u64` (2 ≤ M < 2^(P+8)), elements `N` `u64` (N·M must fit in 64 bits), SipHash
    /// key high half `k1` `u64` (hash id 5, SipHash-2-4, whose `k0` is the header seed; 0 for
    /// every other hash), stream bits `u64`. Payload: the Golomb–Rice stream, most significant bit
    /// first, zero-padded to whole bytes (`⌈bits/8⌉` bytes): exactly BIP-158's filter after its
    /// CompactSize `N`. Every element is decoded and checked on load.
    fn to_bytes(&self) -> Vec<u8> {
        let mut p = ParamWriter::new();
        p.u8(self.params.p_bits as u8)
            .u8(0)
            .u16(0)
            .u32(self.params.sample_every)
            .u64(self.params.modulus)
            .u64(self.n)
            .u64(self.params.hasher.key_hi())
            .u64(self.bit_len);
        let coded = self.coded_bytes();
        let mut e = Encoder::new(Self::KIND, self.params.hasher, p.as_bytes(), coded.len() as u64);
        e.payload().extend_from_slice(coded);
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let p_bits = r.u8("p bits")? as u32;
        let reserved = r.u8("reserved")?;
        let reserved2 = r.u16("reserved")?;
        let sample_every = r.u32("sample interval")?;
        let modulus = r.u64("modulus")?;
        let n = r.u64("elements")?;
        let key_hi = r.u64("siphash k1")?;
        let bit_len = r.u64("stream bits")?;
        r.finish()?;
        let bad = |why: &'static str| -> Error { FormatError::InvalidParams(why).into() };
        if reserved != 0 || reserved2 != 0 {
            return Err(bad("gcs: reserved fields are not zero"));
        }
        let h = raw.hasher();
        let hasher = match h.kind() {
            HashKind::SipHash24 => Hasher::sip24(h.seed(), key_hi),
            _ if key_hi != 0 => return Err(bad("gcs: a SipHash key half without SipHash")),
            _ => h,
        };
        let params = GcsParams::with_modulus(p_bits, modulus, hasher)
            .and_then(|p| p.sample_every(sample_every))
            .map_err(|_| bad("gcs: P, M or S out of range"))?;
        Self::from_stream(params, n, raw.payload(), bit_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::peel::mix;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn bip158_testnet_genesis_vector() {
        // BIP-158 test vectors (bip-0158/testnet-19.json), block 0 of testnet3, hash
        // 000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943. The basic filter holds
        // the one output script of the coinbase (the genesis pay-to-pubkey script; the coinbase
        // spends no previous output), keyed by the first 16 bytes of the block hash in internal
        // (reversed) byte order. Expected filter: 019dfca8.
        let block_hash_internal = {
            let mut b = hex("000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943");
            b.reverse();
            b
        };
        let k0 = u64::from_le_bytes(block_hash_internal[0..8].try_into().unwrap());
        let k1 = u64::from_le_bytes(block_hash_internal[8..16].try_into().unwrap());
        let script = hex(
            "4104678afdb0fe5548271967f1a67130b7105cd6a828e03909a67962e0ea1f61deb649f6bc3f4cef38c4f35504e51ec112de5c384df7ba0b8d578a4c702b6bf11d5fac",
        );
        let f = Gcs::build_with_params(&[&script], GcsParams::bip158(k0, k1)).unwrap();
        assert_eq!(f.to_bip158_bytes(), hex("019dfca8"));
        // Decoding by hand: 1 0 | 0111011111110010101 | 000: quotient 1, remainder 245653, so the
        // value is 2^19 + 245653 = 769941 = (siphash · 784931) >> 64.
        let v = fastrange(crate::hash::sip24(k0, k1, &script), BIP158_M);
        assert_eq!(v, 769_941);
        assert!(f.contains(&script));
        let g = Gcs::from_bip158_bytes(&hex("019dfca8"), k0, k1).unwrap();
        assert_eq!(g.to_bip158_bytes(), hex("019dfca8"));
        assert_eq!((g.len(), g.coded_bytes()), (1, f.coded_bytes()));
        assert!(g.contains(&script));
        assert!(!g.contains(b"not in the block"));
    }

    #[test]
    fn rice_coding_small_example() {
        // Hand-computed: P = 2, values 3, 4, 13 (gaps 3, 1, 9): 0|11, 0|01, 110|01 -> bits
        // 011 001 11001 (11 bits) -> 0110_0111 001(0_0000) = 0x67 0x20.
        let mut w = BitWriter { out: Vec::new(), acc: 0, pending: 0, bits: 0 };
        for d in [3u64, 1, 9] {
            w.rice(d, 2);
        }
        let (bytes, bits) = w.finish();
        assert_eq!((bytes.clone(), bits), (vec![0x67, 0x20], 11));
        let mut padded = bytes;
        padded.extend_from_slice(&[0; 8]);
        let mut r = BitReader { bytes: &padded, pos: 0 };
        assert_eq!([r.rice(2), r.rice(2), r.rice(2)], [3, 1, 9]);
        // Long unary runs cross the 56-bit window.
        let mut w = BitWriter { out: Vec::new(), acc: 0, pending: 0, bits: 0 };
        for d in [0u64, 1000, 7, 130 << 3, 5] {
            w.rice(d, 3);
        }
        let (mut b, _) = w.finish();
        b.extend_from_slice(&[0; 8]);
        let mut r = BitReader { bytes: &b, pos: 0 };
        assert_eq!([r.rice(3), r.rice(3), r.rice(3), r.rice(3), r.rice(3)], [0, 1000, 7, 1040, 5]);
    }

    #[test]
    fn native_fpr_size_and_no_false_negatives() {
        for (p_bits, probes) in [(8u32, 2_000_000u64), (12, 4_000_000)] {
            let n = 1_000_000u64;
            let hashes: Vec<u64> = (0..n).map(|i| mix(i, 77)).collect();
            let params = GcsParams::for_fpr(0.5f64.powi(p_bits as i32)).unwrap();
            let f = Gcs::from_hashes_with_params(&hashes, params).unwrap();
            assert_eq!(f.len() as u64, n);
            assert!(hashes.iter().all(|&h| f.contains_hash(h)), "false negative");
            let p = f.expected_fpr();
            assert!(p <= 0.5f64.powi(p_bits as i32));
            let fp = (0..probes).filter(|&i| f.contains_hash(mix(i, 1 << 62))).count() as f64;
            let bound = probes as f64 * (p + 3.1 * (p * (1.0 - p) / probes as f64).sqrt());
            assert!(fp < bound, "P = {p_bits}: {fp} false positives, bound {bound}");
            let bpk = f.coded_bits_per_key();
            assert!(bpk <= p_bits as f64 + 1.6, "P = {p_bits}: {bpk} bits/key");
            let model = crate::math::gcs_bits_per_key(f.modulus() as f64, p_bits);
            assert!((bpk - model).abs() < 0.01, "{bpk} vs model {model}");
        }
    }

    #[test]
    fn bip158_parameters_cost() {
        let hashes: Vec<u64> = (0..200_000u64).map(|i| mix(i, 3)).collect();
        let f = Gcs::from_hashes_with_params(&hashes, GcsParams::bip158(1, 2)).unwrap();
        let bpk = f.coded_bits_per_key();
        assert!((bpk - 21.05).abs() < 0.03, "{bpk}");
        assert!(bpk <= (BIP158_M as f64).log2() + 1.6);
        assert!(hashes.iter().all(|&h| f.contains_hash(h)));
    }

    #[test]
    fn duplicates_empty_and_sampling() {
        let mut items: Vec<String> = (0..10_000).map(|i| i.to_string()).collect();
        items.extend((0..10_000).step_by(7).map(|i| i.to_string()));
        for s in [1, 2, 3, 128, 65_536] {
            let params = GcsParams::for_fpr(0.01).unwrap().sample_every(s).unwrap();
            let f = Gcs::build_with_params(&items, params).unwrap();
            assert_eq!(f.len(), 10_000);
            assert!(items.iter().all(|i| f.contains(i)), "S = {s}");
            assert_eq!(Gcs::from_bytes(&f.to_bytes()).unwrap(), f);
        }
        let e = Gcs::build::<&str>(&[]).unwrap();
        assert!(e.is_empty() && !e.contains("x") && !e.contains_hash(0));
        assert_eq!(e.to_bip158_bytes(), vec![0]);
        assert_eq!(Gcs::from_bytes(&e.to_bytes()).unwrap(), e);
        assert_eq!(Gcs::from_bip158_bytes(&[0], 0, 0).unwrap().len(), 0);
    }

    #[test]
    fn bad_parameters() {
        for p in [0.0, 1.0, f64::NAN, -1.0, 1e-30] {
            assert!(GcsParams::for_fpr(p).is_err(), "{p}");
        }
        assert!(GcsParams::with_modulus(57, 1 << 57, Hasher::default()).is_err());
        assert!(GcsParams::with_modulus(4, 1, Hasher::default()).is_err());
        assert!(GcsParams::with_modulus(4, 1 << 12, Hasher::default()).is_err());
        assert!(GcsParams::for_fpr(0.01).unwrap().sample_every(0).is_err());
        // N·M overflowing 64 bits.
        let huge = GcsParams::with_modulus(56, 1 << 63, Hasher::default()).unwrap();
        let hashes: Vec<u64> = (0..4).collect();
        assert!(matches!(Gcs::from_hashes_with_params(&hashes, huge), Err(Error::CapacityExceeded { .. })));
    }

    #[test]
    fn round_trip_corruption_and_sip_key() {
        let hashes: Vec<u64> = (0..3000u64).map(|i| mix(i, 5)).collect();
        let f = Gcs::from_hashes_with_params(&hashes, GcsParams::bip158(0x1234, 0x5678)).unwrap();
        let bytes = f.to_bytes();
        let g = Gcs::from_bytes(&bytes).unwrap();
        assert_eq!(g, f);
        assert_eq!(g.hasher().key_hi(), 0x5678);
        for cut in (0..bytes.len()).step_by(7) {
            assert!(Gcs::from_bytes(&bytes[..cut]).is_err());
        }
        let mut bad = bytes.clone();
        bad[80] ^= 0x40;
        assert!(Gcs::from_bytes(&bad).is_err());
        // BIP-158 bytes: truncated streams and wrong counts are errors.
        let b = f.to_bip158_bytes();
        for cut in [0, 1, 2, 3, b.len() / 2, b.len() - 1] {
            assert!(Gcs::from_bip158_bytes(&b[..cut], 0x1234, 0x5678).is_err(), "cut {cut}");
        }
        let mut more = b.clone();
        more[1] = more[1].wrapping_add(1); // N = 3000 is 0xfd b8 0b: claim 3001 elements
        assert!(Gcs::from_bip158_bytes(&more, 0x1234, 0x5678).is_err());
        let mut trailing = b.clone();
        trailing.push(0);
        assert!(Gcs::from_bip158_bytes(&trailing, 0x1234, 0x5678).is_err(), "a whole spare byte");
    }

    /// Patches the parameter block and recomputes the CRC, so validation must catch it.
    fn patched(bytes: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        b[32 + at..32 + at + value.len()].copy_from_slice(value);
        let end = b.len() - 4;
        let crc = crc32c::crc32c(&b[..end]);
        b[end..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn inconsistent_parameters_are_errors_not_panics() {
        let hashes: Vec<u64> = (0..2000u64).map(|i| mix(i, 6)).collect();
        let f = Gcs::from_hashes_with_params(&hashes, GcsParams::for_fpr(0.001).unwrap()).unwrap();
        let bytes = f.to_bytes();
        let cases: [(usize, &[u8]); 9] = [
            (0, &[57]),                    // P
            (0, &[3]),                     // P: the stream decodes to other values
            (1, &[1]),                     // reserved
            (4, &0u32.to_le_bytes()),      // S
            (8, &1u64.to_le_bytes()),      // M
            (16, &u64::MAX.to_le_bytes()), // N: overflow, and more than the stream holds
            (16, &2001u64.to_le_bytes()),  // N: one more than coded
            (24, &7u64.to_le_bytes()),     // k1 without SipHash
            (32, &1u64.to_le_bytes()),     // bit count
        ];
        for (at, v) in cases {
            let b = patched(&bytes, at, v);
            assert!(matches!(Gcs::from_bytes(&b), Err(Error::Format(_))), "patch at {at} accepted");
        }
        let mut state = 99u64;
        for _ in 0..3000 {
            state = mix(state, 2);
            let i = 32 + (state % (bytes.len() as u64 - 36)) as usize;
            let mut b = bytes.clone();
            b[i] ^= 1 << (state >> 61);
            let end = b.len() - 4;
            let crc = crc32c::crc32c(&b[..end]);
            b[end..].copy_from_slice(&crc.to_le_bytes());
            let _ = Gcs::from_bytes(&b); // must not panic
        }
    }
}
