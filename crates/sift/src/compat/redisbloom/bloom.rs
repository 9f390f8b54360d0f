//! RedisBloom's scalable Bloom filter, `MBbloom--` (spec §5, dump format §7.1).
//!
//! A chain of classic Bloom filters ("links"), oldest first. Items go into the newest link; when it
//! holds `entries` items, a link `growth` times larger with half the error rate is appended
//! (Almeida et al., "Scalable Bloom Filters", 2007, with tightening ratio 0.5). An item is present
//! when any link reports it. Each link hashes with two MurmurHash64A values `a`, `b` and probes
//! `(a + i·b) mod bits` for `i < hashes` (plain double hashing, no fast-range reduction), exactly
//! as RedisBloom does, so dumps are interchangeable.

use std::borrow::Cow;

use super::dump::{Fields, FrozenBytes, LoadLimits, MAX_CHUNK};
use super::gfmt::format_g;
use super::{BF_ERROR_RATE_CAP, BF_MAX_CAPACITY, BF_MAX_EXPANSION};
use crate::bits::{prefetch, CowGuard, Storage};
use crate::hash::{murmur2_32, murmur64a, REDISBLOOM_SEED};

/// The `options` bits of a chain (§5.1).
pub mod options {
    /// Sizes are not rounded to a power of two (every filter created today).
    pub const NOROUND: u32 = 1;
    /// The capacity was given in bits (legacy; only stored).
    pub const ENTS_IS_BITS: u32 = 2;
    /// 64-bit MurmurHash64A hashing; without it, legacy 32-bit MurmurHash2 (§5.4).
    pub const FORCE64: u32 = 4;
    /// The chain never grows: adding to a full link fails (§5.5).
    pub const NO_SCALING: u32 = 8;
    /// Every bit a header may carry.
    pub const ALL: u32 = NOROUND | ENTS_IS_BITS | FORCE64 | NO_SCALING;
}

/// `ln² 2`, the literal RedisBloom divides by (§5.3); do not replace it with a computed value.
const LN2_SQ: f64 = 0.480453013918201;
/// `ln 2`, the literal RedisBloom multiplies by for the hash count (§5.3). It is 3·10^-16 below
/// `core::f64::consts::LN_2`, which changes `ceil` for some error rates: keep the literal.
#[allow(clippy::approx_constant)]
const LN2: f64 = 0.693147180559945;
/// Seed of the legacy 32-bit hash (§5.4).
const LEGACY_SEED: u32 = 0x9747_b28c;
/// Header bytes before the links, and per link (§7.1).
const HEADER_FIXED: usize = 20;
const HEADER_LINK: usize = 53;

/// Why a Bloom chain could not be created (`BF.RESERVE`, auto-create of `BF.ADD` / `BF.MADD` /
/// `BF.INSERT`). Spec §8 gives the reply of each variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BloomCreateError {
    /// The error rate is not in the open interval (0, 1), or is NaN.
    /// (`ERR error rate must be in the range (0.000000, 1.000000)`; `Bad error rate` in BF.INSERT.)
    #[error("error rate must be in (0, 1)")]
    ErrorRateOutOfRange,
    /// The capacity is not in [1, 2^30].
    /// (`ERR capacity must be in the range [1, 1073741824]`; `Bad capacity` in BF.INSERT.)
    #[error("capacity must be in [1, 1073741824]")]
    CapacityOutOfRange,
    /// The expansion is not in [0, 32768].
    /// (`ERR expansion must be in the range [0, 32768]`; `Bad expansion` in BF.INSERT.)
    #[error("expansion must be in [0, 32768]")]
    ExpansionOutOfRange,
    /// A non-zero expansion was given for a non-scaling filter (BF.RESERVE only, see
    /// [`BloomChain::resolve_expansion`]). (`Nonscaling filters cannot expand`.)
    #[error("non-scaling filters cannot expand")]
    NonScalingExpansion,
    /// The first link is invalid (§5.3), e.g. the error rate halved to 0.
    /// (`ERR could not create filter`.)
    #[error("invalid link parameters")]
    InvalidLink,
    /// The bitmap could not be allocated. (`ERR Insufficient memory to create filter`.)
    #[error("could not allocate the bitmap")]
    OutOfMemory,
}

/// Why an item could not be added (§5.5); [`BloomAddError::code`] gives RedisBloom's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BloomAddError {
    /// Code −2: the newest link is full and the chain is non-scaling.
    /// (`ERR non scaling filter is full`; BF.MADD / BF.INSERT stop after it.)
    #[error("non scaling filter is full")]
    NonScalingFull,
    /// Code −1: a new link was needed but is invalid (error rate underflowed to 0) or could not be
    /// allocated; nothing changed. (`ERR problem inserting into filter`; processing continues.)
    #[error("could not grow the filter")]
    CannotGrow,
}

impl BloomAddError {
    /// RedisBloom's return code: −2 or −1.
    pub const fn code(self) -> i64 {
        match self {
            BloomAddError::NonScalingFull => -2,
            BloomAddError::CannotGrow => -1,
        }
    }
}

/// Why a `BF.LOADCHUNK` header was refused (§7.1). Every variant is `ERR received bad data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BloomHeaderError {
    /// Shorter than the 20 fixed bytes.
    #[error("header shorter than 20 bytes")]
    TooShort,
    /// `nfilters == 0`.
    #[error("header has no links")]
    NoLinks,
    /// The length is not `20 + 53·nfilters`.
    #[error("header length does not match its link count")]
    LengthMismatch,
    /// `options` has bits outside {1, 2, 4, 8}.
    #[error("unknown option bits")]
    UnknownOptions,
    /// Link `link`: the error rate is not in (0, 1), or is NaN.
    #[error("link {link}: error rate not in (0, 1)")]
    ErrorRate {
        /// Index of the link, oldest first.
        link: usize,
    },
    /// Link `link`: `n2 > 63`, or `n2 != 0` with fewer than `2^n2` bits.
    #[error("link {link}: bad power-of-two exponent n2")]
    N2 {
        /// Index of the link, oldest first.
        link: usize,
    },
    /// Link `link`: `bits == 0` or `bits != bytes·8`.
    #[error("link {link}: bit count does not match byte count")]
    Bits {
        /// Index of the link, oldest first.
        link: usize,
    },
    /// Link `link`: `hashes != ceil(0.693147180559945·bpe)`.
    #[error("link {link}: hash count does not match bits per entry")]
    Hashes {
        /// Index of the link, oldest first.
        link: usize,
    },
    /// The links' item counts do not add up to the chain's (or their sum overflows).
    #[error("link sizes do not add up to the chain size")]
    SizeMismatch,
    /// The bitmaps exceed [`LoadLimits::max_bytes`] or could not be allocated.
    #[error("bitmaps too large to allocate")]
    OutOfMemory,
}

/// Why a `BF.LOADCHUNK` data chunk was refused (§7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BloomChunkError {
    /// `it <= 0` or `it < len(data)`. (`ERR received bad data`.)
    #[error("bad iterator for this chunk")]
    BadIterator,
    /// The chunk's first byte lies in no link. (`ERR invalid offset - no link found`.)
    #[error("no link at this offset")]
    NoLink,
    /// The chunk runs past the end of its link. (`ERR invalid chunk - Too big for current filter`.)
    #[error("chunk too big for its link")]
    TooBig,
}

/// One Bloom filter of a chain (§5.1).
#[derive(Clone, PartialEq)]
pub struct BloomLink {
    entries: u64,
    error: f64,
    bpe: f64,
    hashes: u32,
    bits: u64,
    n2: u8,
    size: u64,
    /// In huge-page-advised memory when large ([`Storage`]): a probe is a random access into the
    /// whole bitmap, and with 4 KiB pages most of them also miss the TLB.
    bitmap: Storage<u8>,
}

impl core::fmt::Debug for BloomLink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BloomLink")
            .field("entries", &self.entries)
            .field("error", &self.error)
            .field("bpe", &self.bpe)
            .field("hashes", &self.hashes)
            .field("bits", &self.bits)
            .field("n2", &self.n2)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// The shape of a new link, computed as RedisBloom does (§5.3).
struct Shape {
    bpe: f64,
    bits: u64,
    bytes: u64,
    hashes: u32,
}

#[derive(Debug)]
enum SizeError {
    Invalid,
    OutOfMemory,
}

/// `(int)ceil(0.693147180559945 · bpe)`, or `None` where C's conversion is undefined.
fn hashes_for(bpe: f64) -> Option<i64> {
    let h = (LN2 * bpe).ceil();
    (h >= i32::MIN as f64 && h <= i32::MAX as f64).then_some(h as i64)
}

/// Link sizing of §5.3, in the same order of f64 operations as RedisBloom.
fn shape(entries: u64, error: f64) -> Result<Shape, SizeError> {
    if entries < 1 || !(error > 0.0 && error < 1.0) {
        return Err(SizeError::Invalid);
    }
    let mut bpe = -(error.ln() / LN2_SQ);
    if bpe < 0.0 {
        bpe = -bpe;
    }
    let product = entries as f64 * bpe;
    if product.is_nan() || product >= 18_446_744_073_709_551_616.0 {
        return Err(SizeError::OutOfMemory);
    }
    let mut bits = product as u64;
    if bits == 0 {
        bits = 1;
    }
    let bytes = if bits % 64 != 0 { (bits / 64 + 1) * 8 } else { bits / 8 };
    let bits = bytes.checked_mul(8).ok_or(SizeError::OutOfMemory)?;
    // 0 < error < 1 bounds bpe by about 1551 (the smallest subnormal), so this never fails.
    let hashes = hashes_for(bpe).and_then(|h| u32::try_from(h).ok()).ok_or(SizeError::Invalid)?;
    Ok(Shape { bpe, bits, bytes, hashes })
}

/// The bit positions of §5.4, `(a + i·b) mod m` for i = 0, 1, ..., where `a + i·b` wraps at
/// 2^64 as RedisBloom's `uint64_t` arithmetic does, computed with two divisions per item instead
/// of one per position (a 64-bit division is the costliest step of a probe that hits cache).
/// Stepping keeps `x = h mod m` for the running `h`: adding `b` adds `b mod m`, and when `h`
/// wraps, the lost 2^64 is taken back as `2^64 mod m`. Exact for every `m ≥ 1`; the test
/// `probes_match_the_naive_formula` checks it against `h % m`.
#[derive(Debug, Clone, Copy)]
struct Probes {
    /// The running hash `a + i·b` (wrapping).
    h: u64,
    b: u64,
    /// `h mod m`.
    x: u64,
    /// `b mod m`.
    d: u64,
    /// `2^64 mod m`.
    r: u64,
    m: u64,
}

impl Probes {
    #[inline]
    fn new(a: u64, b: u64, m: u64) -> Probes {
        // 2^64 mod m = (2^64 − m) mod m: one division instead of two.
        Probes { h: a, b, x: a % m, d: b % m, r: m.wrapping_neg() % m, m }
    }

    /// The current position, then steps to the next.
    #[inline]
    fn next_position(&mut self) -> u64 {
        let out = self.x;
        let (h, wrapped) = self.h.overflowing_add(self.b);
        self.h = h;
        // x, d < m, so x + d < 2m: one conditional subtraction (the sum may pass 2^64 when
        // m > 2^63, which the wrapping arithmetic absorbs).
        let (sum, over) = self.x.overflowing_add(self.d);
        let mut x = if over || sum >= self.m { sum.wrapping_sub(self.m) } else { sum };
        if wrapped {
            x = if x >= self.r { x - self.r } else { x + (self.m - self.r) };
        }
        self.x = x;
        out
    }
}

impl BloomLink {
    /// A new, empty link for `entries` items at error rate `error` (§5.3).
    fn create(entries: u64, error: f64) -> Result<Self, SizeError> {
        let s = shape(entries, error)?;
        let bitmap = zeroed_bitmap(s.bytes).ok_or(SizeError::OutOfMemory)?;
        Ok(BloomLink { entries, error, bpe: s.bpe, hashes: s.hashes, bits: s.bits, n2: 0, size: 0, bitmap })
    }

    /// Capacity of this link.
    pub fn entries(&self) -> u64 {
        self.entries
    }
    /// Target error rate of this link.
    pub fn error(&self) -> f64 {
        self.error
    }
    /// Bits per entry.
    pub fn bpe(&self) -> f64 {
        self.bpe
    }
    /// Number of hash functions.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }
    /// Number of bits (`bytes · 8`).
    pub fn bits(&self) -> u64 {
        self.bits
    }
    /// Length of the bitmap in bytes.
    pub fn bytes(&self) -> u64 {
        self.bitmap.len() as u64
    }
    /// Power-of-two exponent of legacy links (0 otherwise): positions are taken mod `2^n2`.
    pub fn n2(&self) -> u8 {
        self.n2
    }
    /// Items counted in this link.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The bitmap: bit `x` is bit `x & 7` of byte `x >> 3`.
    pub fn bitmap(&self) -> &[u8] {
        &self.bitmap
    }

    /// The modulus of the bit positions (§5.4).
    #[inline]
    fn modulus(&self) -> u64 {
        if self.n2 > 0 {
            1u64 << self.n2
        } else {
            self.bits
        }
    }

    #[inline]
    fn contains(&self, a: u64, b: u64) -> bool {
        let mut p = Probes::new(a, b, self.modulus());
        for _ in 0..self.hashes {
            let x = p.next_position();
            if self.bitmap[(x >> 3) as usize] & (1 << (x & 7)) == 0 {
                return false;
            }
        }
        true
    }

    /// Sets the item's bits; `true` when at least one was 0 before (the add "counts").
    #[inline]
    fn insert(&mut self, a: u64, b: u64) -> bool {
        if let Some(g) = self.bitmap.cow_guard() {
            return self.insert_guarded(&g, a, b);
        }
        let mut p = Probes::new(a, b, self.modulus());
        let mut fresh = false;
        for _ in 0..self.hashes {
            let x = p.next_position();
            let byte = &mut self.bitmap[(x >> 3) as usize];
            let mask = 1 << (x & 7);
            fresh |= *byte & mask == 0;
            *byte |= mask;
        }
        fresh
    }

    /// [`BloomLink::insert`] while a snapshot reads the bitmap ([`BloomChain::freeze`]): each
    /// byte's piece is saved for the snapshot before its first change.
    #[cold]
    fn insert_guarded(&mut self, g: &CowGuard, a: u64, b: u64) -> bool {
        let mut w = g.writer();
        let mut p = Probes::new(a, b, self.modulus());
        let mut fresh = false;
        for _ in 0..self.hashes {
            let x = p.next_position();
            let i = (x >> 3) as usize;
            w.before_write(&self.bitmap, i..i + 1);
            let mask = 1 << (x & 7);
            fresh |= self.bitmap[i] & mask == 0;
            self.bitmap[i] |= mask;
        }
        fresh
    }

    /// Hints the CPU to load the cache lines of the item's first `limit` positions (see
    /// [`BloomChain::add_many`]). Only a hint: nothing is read or changed.
    #[inline]
    fn prefetch(&self, a: u64, b: u64, limit: u32) {
        let mut p = Probes::new(a, b, self.modulus());
        let base = self.bitmap.as_ptr();
        for _ in 0..self.hashes.min(limit) {
            let x = p.next_position();
            // Positions are below `bits = 8·bytes` (and 2^n2 ≤ bits, checked at load), so the
            // address is inside the bitmap; `wrapping_add` keeps even a wrong one harmless.
            prefetch(base.wrapping_add((x >> 3) as usize));
        }
    }

    fn debug_line(&self, force64: bool) -> String {
        let bits = if self.bits == 0 { format!("2^{}", self.n2) } else { self.bits.to_string() };
        format!(
            "bytes:{} bits:{} hashes:{} hashwidth:{} capacity:{} size:{} ratio:{}",
            self.bytes(),
            bits,
            self.hashes,
            if force64 { 64 } else { 32 },
            self.entries,
            self.size,
            format_g(self.error)
        )
    }
}

/// The numbers of `BF.INFO` and `BF.CARD` (§5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BloomInfo {
    /// `Capacity`: the sum of the links' capacities (wrapping, as RedisBloom's u64 sum).
    pub capacity: u64,
    /// `Size`: `32 + 64·nfilters + Σ bytes`.
    pub size: u64,
    /// `Number of filters`.
    pub filters: u64,
    /// `Number of items inserted` (also `BF.CARD`).
    pub items: u64,
    /// `Expansion rate`: the growth, or `None` (a null reply) for a non-scaling chain.
    pub expansion: Option<u32>,
}

/// A chain as it was when [`BloomChain::freeze`] was called, dumped in the chunks of
/// [`BloomChain::scandump`] (each read once, in order). Dropping it ends the copy-on-write.
#[derive(Debug)]
pub struct FrozenChain {
    header: Vec<u8>,
    links: Vec<FrozenBytes>,
}

impl FrozenChain {
    /// The number of chunks [`FrozenChain::scandump`] gives, the header included.
    pub fn chunk_count(&self) -> u64 {
        1 + self.links.iter().map(|l| l.len().div_ceil(MAX_CHUNK) as u64).sum::<u64>()
    }

    /// [`BloomChain::scandump`] of the chain as frozen: appends the chunk at iterator `it` to
    /// `out` and returns the next iterator, or `None` after the last chunk. Call with 0, then
    /// with each iterator returned: every byte is read once.
    pub fn scandump(&self, it: i64, out: &mut Vec<u8>) -> Option<i64> {
        if it == 0 {
            out.extend_from_slice(&self.header);
            return Some(1);
        }
        let mut p = usize::try_from(it.checked_sub(1)?).ok()?;
        for l in &self.links {
            let n = l.len();
            if p < n {
                let len = (n - p).min(MAX_CHUNK);
                l.read(p, len, out);
                return Some(it + len as i64);
            }
            p -= n;
        }
        None
    }
}

/// RedisBloom's scalable Bloom filter (`MBbloom--`): a chain of Bloom filters ("links"), oldest
/// first. Items go into the newest link; when it is full, a link `growth` times larger with half
/// the error rate is appended (Almeida et al., "Scalable Bloom Filters", 2007). Each link probes
/// `(a + i·b) mod bits` for `i < hashes`, with `a`, `b` from MurmurHash64A (or MurmurHash2 in
/// legacy chains without [`options::FORCE64`]), exactly as RedisBloom does.
#[derive(Debug, Clone, PartialEq)]
pub struct BloomChain {
    size: u64,
    options: u32,
    growth: u32,
    links: Vec<BloomLink>,
}

impl BloomChain {
    /// Creates a chain as `BF.RESERVE key error_rate capacity [EXPANSION growth] [NONSCALING]`
    /// does (§5.2): options `NOROUND|FORCE64` (5), plus `NO_SCALING` (13) when `nonscaling` is set
    /// or `growth` is 0; one link of `capacity` entries at `error_rate / 2` (scaling) or
    /// `error_rate` (non-scaling). `growth` is stored even for non-scaling chains.
    ///
    /// The ranges every creating command enforces are checked: `capacity` in [1, 2^30],
    /// `error_rate` in (0, 1) and then capped to 0.25, `growth` ≤ 32768.
    pub fn new(
        capacity: u64,
        error_rate: f64,
        growth: u32,
        nonscaling: bool,
    ) -> Result<Self, BloomCreateError> {
        let error_rate = Self::check_error_rate(error_rate)?;
        if !(1..=BF_MAX_CAPACITY).contains(&capacity) {
            return Err(BloomCreateError::CapacityOutOfRange);
        }
        if growth > BF_MAX_EXPANSION {
            return Err(BloomCreateError::ExpansionOutOfRange);
        }
        let nonscaling = nonscaling || growth == 0;
        let mut opts = options::NOROUND | options::FORCE64;
        let error = if nonscaling {
            opts |= options::NO_SCALING;
            error_rate
        } else {
            error_rate * 0.5
        };
        let link = BloomLink::create(capacity, error).map_err(|e| match e {
            SizeError::Invalid => BloomCreateError::InvalidLink,
            SizeError::OutOfMemory => BloomCreateError::OutOfMemory,
        })?;
        Ok(BloomChain { size: 0, options: opts, growth, links: vec![link] })
    }

    /// Checks an error rate given to a creating command and applies the 0.25 cap (§3, §8):
    /// values outside (0, 1), and NaN, are [`BloomCreateError::ErrorRateOutOfRange`].
    pub fn check_error_rate(error_rate: f64) -> Result<f64, BloomCreateError> {
        if !(error_rate > 0.0 && error_rate < 1.0) {
            return Err(BloomCreateError::ErrorRateOutOfRange);
        }
        Ok(error_rate.min(BF_ERROR_RATE_CAP))
    }

    /// Checks a capacity as a creating command parsed it (a signed integer): [1, 2^30] (§8).
    pub fn check_capacity(capacity: i64) -> Result<u64, BloomCreateError> {
        match u64::try_from(capacity) {
            Ok(c) if (1..=BF_MAX_CAPACITY).contains(&c) => Ok(c),
            _ => Err(BloomCreateError::CapacityOutOfRange),
        }
    }

    /// `BF.RESERVE`'s handling of an explicit `EXPANSION value` (§8 step 6): returns the growth and
    /// whether the chain is non-scaling. A value of 0 makes the chain non-scaling; any other value
    /// with `nonscaling` already set is [`BloomCreateError::NonScalingExpansion`] (checked before
    /// the range, as RedisBloom does); then the range [0, 32768] is checked.
    pub fn resolve_expansion(value: i64, nonscaling: bool) -> Result<(u32, bool), BloomCreateError> {
        if value == 0 {
            return Ok((0, true));
        }
        if nonscaling {
            return Err(BloomCreateError::NonScalingExpansion);
        }
        match u32::try_from(value) {
            Ok(v) if v <= BF_MAX_EXPANSION => Ok((v, false)),
            _ => Err(BloomCreateError::ExpansionOutOfRange),
        }
    }

    /// The two hash values of an item (§5.4): 64-bit MurmurHash64A with `FORCE64`, legacy 32-bit
    /// MurmurHash2 otherwise.
    #[inline]
    pub fn hash(&self, item: &[u8]) -> (u64, u64) {
        hash_item(self.options, item)
    }

    /// `BF.EXISTS`: whether any link reports the item (§5.5).
    pub fn contains(&self, item: &[u8]) -> bool {
        let (a, b) = self.hash(item);
        self.contains_hashed(a, b)
    }

    fn contains_hashed(&self, a: u64, b: u64) -> bool {
        self.links.iter().rev().any(|l| l.contains(a, b))
    }

    /// `BF.ADD`: adds an item (§5.5). `Ok(true)` (code 1): added and counted; `Ok(false)` (code 0):
    /// already reported present, or every bit was already set; errors are codes −2 / −1.
    pub fn add(&mut self, item: &[u8]) -> Result<bool, BloomAddError> {
        let (a, b) = self.hash(item);
        let (last, older) = self.links.split_last_mut().expect("a chain has at least one link");
        if older.iter().rev().any(|l| l.contains(a, b)) {
            return Ok(false);
        }
        if last.size < last.entries {
            // Room in the newest link: test and set in one pass instead of `contains` then
            // `insert`. Every bit already set is exactly "the newest link contains it", and then
            // setting them changes nothing: the same outcome and the same bits, half the probes.
            if last.insert(a, b) {
                last.size = last.size.wrapping_add(1);
                self.size = self.size.wrapping_add(1);
                return Ok(true);
            }
            return Ok(false);
        }
        if last.contains(a, b) {
            return Ok(false);
        }
        let cur = self.links.last().expect("a chain has at least one link");
        if cur.size >= cur.entries {
            if self.options & options::NO_SCALING != 0 {
                return Err(BloomAddError::NonScalingFull);
            }
            let entries = cur.entries.wrapping_mul(self.growth as u64);
            let link = BloomLink::create(entries, cur.error * 0.5).map_err(|_| BloomAddError::CannotGrow)?;
            self.links.push(link);
        }
        let cur = self.links.last_mut().expect("a chain has at least one link");
        if cur.insert(a, b) {
            cur.size = cur.size.wrapping_add(1);
            self.size = self.size.wrapping_add(1);
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// `BF.MADD` / `BF.INSERT`: adds `items` in order, appending one result per item to `out`,
    /// exactly as calling [`BloomChain::add`] on each would (same results, same bits, same
    /// links), and stops after the first [`BloomAddError::NonScalingFull`], as those commands
    /// do: that error is the last result in `out`, and the items after it are not added.
    ///
    /// Faster than the loop: the items are hashed ahead and the cache lines of item `i + 8` are
    /// requested while item `i` is added (in links of at least 1 MiB; smaller ones stay cached),
    /// so the random misses into a large bitmap overlap instead of being waited for one after
    /// the other: 6.3–7.5 M items/s of CPU time against 2.4–3.2 M for `add` on a 10M-item
    /// chain (`docs/BENCHMARKS.md`, "BF.MADD / BF.MEXISTS in batches"). Items that find the
    /// newest link full (the chain may grow there) go through [`BloomChain::add`] one by one.
    pub fn add_many<I: AsRef<[u8]>>(&mut self, items: &[I], out: &mut Vec<Result<bool, BloomAddError>>) {
        out.reserve(items.len());
        let mut i = 0;
        while i < items.len() {
            i += self.add_many_until_full(&items[i..], out);
            let Some(item) = items.get(i) else { break };
            let r = self.add(item.as_ref());
            out.push(r);
            if r == Err(BloomAddError::NonScalingFull) {
                break;
            }
            i += 1;
        }
    }

    /// The part of [`BloomChain::add_many`] that cannot grow the chain: adds the leading items
    /// for which the newest link still has room (as many as `entries − size` of the newest link:
    /// each add counts at most one item), appends their results to `out` and returns how many it
    /// took. It stops before the first item that may find the newest link full; the caller adds
    /// that one with [`BloomChain::add`] (or its own checks first, such as a memory budget for
    /// the new link) and calls again with the rest. Returns 0 when the newest link is full.
    pub fn add_many_until_full<I: AsRef<[u8]>>(
        &mut self,
        items: &[I],
        out: &mut Vec<Result<bool, BloomAddError>>,
    ) -> usize {
        let opts = self.options;
        let last = self.links.last().expect("a chain has at least one link");
        // Loaded chains may count more items than their capacity: then there is no room.
        let room = last.entries.saturating_sub(last.size);
        let n = usize::try_from(room).map_or(items.len(), |r| r.min(items.len()));
        if n == 0 {
            return 0;
        }
        out.reserve(n);
        let mut ahead = [(0u64, 0u64); BATCH_AHEAD];
        for (slot, item) in ahead.iter_mut().zip(&items[..n]) {
            *slot = prepare(opts, &self.links, item);
        }
        let mut added = 0u64;
        for i in 0..n {
            let (a, b) = ahead[i % BATCH_AHEAD];
            if let Some(next) = items[..n].get(i + BATCH_AHEAD) {
                ahead[i % BATCH_AHEAD] = prepare(opts, &self.links, next);
            }
            let (last, older) = self.links.split_last_mut().expect("a chain has at least one link");
            // The same steps as `add` with room in the newest link (i < room, so there is).
            let fresh = !older.iter().rev().any(|l| l.contains(a, b)) && last.insert(a, b);
            if fresh {
                last.size = last.size.wrapping_add(1);
                added += 1;
            }
            out.push(Ok(fresh));
        }
        self.size = self.size.wrapping_add(added);
        n
    }

    /// Hints the CPU to load the cache lines that adding or testing `item` will touch (in the
    /// newest links of at least 1 MiB, as [`BloomChain::add_many`] does for the items ahead).
    /// Changes nothing. For a caller that adds or tests items one call at a time but knows the
    /// next ones: sift-server runs a pipelined read of `BF.ADD key item` requests one by one,
    /// and requests the lines of the request 8 ahead before each.
    #[inline]
    pub fn prefetch(&self, item: &[u8]) {
        prepare(self.options, &self.links, &item);
    }

    /// `BF.MEXISTS`: appends [`BloomChain::contains`] of each item to `out`, hashing ahead and
    /// prefetching as [`BloomChain::add_many`] does.
    pub fn contains_many<I: AsRef<[u8]>>(&self, items: &[I], out: &mut Vec<bool>) {
        let opts = self.options;
        out.reserve(items.len());
        let mut ahead = [(0u64, 0u64); BATCH_AHEAD];
        for (slot, item) in ahead.iter_mut().zip(items) {
            *slot = prepare(opts, &self.links, item);
        }
        for i in 0..items.len() {
            let (a, b) = ahead[i % BATCH_AHEAD];
            if let Some(next) = items.get(i + BATCH_AHEAD) {
                ahead[i % BATCH_AHEAD] = prepare(opts, &self.links, next);
            }
            out.push(self.contains_hashed(a, b));
        }
    }

    /// Items counted in the chain (`BF.CARD`).
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Whether no item was counted.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The option bits ([`options`]).
    pub fn options(&self) -> u32 {
        self.options
    }

    /// The stored expansion factor (also for non-scaling chains).
    pub fn growth(&self) -> u32 {
        self.growth
    }

    /// The links, oldest first.
    pub fn links(&self) -> &[BloomLink] {
        &self.links
    }

    /// `BF.INFO` (§5.6).
    pub fn info(&self) -> BloomInfo {
        let n = self.links.len() as u64;
        BloomInfo {
            capacity: self.links.iter().fold(0u64, |s, l| s.wrapping_add(l.entries)),
            size: self
                .links
                .iter()
                .fold(32u64.wrapping_add(64u64.wrapping_mul(n)), |s, l| s.wrapping_add(l.bytes())),
            filters: n,
            items: self.size,
            expansion: (self.options & options::NO_SCALING == 0).then_some(self.growth),
        }
    }

    /// `BF.DEBUG` (§5.7): `size:<n>`, then one line per link, oldest first.
    pub fn debug_lines(&self) -> Vec<String> {
        let force64 = self.options & options::FORCE64 != 0;
        let mut out = Vec::with_capacity(1 + self.links.len());
        out.push(format!("size:{}", self.size));
        out.extend(self.links.iter().map(|l| l.debug_line(force64)));
        out
    }

    /// The `SCANDUMP` header: `20 + 53·nfilters` packed little-endian bytes (§7.1).
    pub fn header(&self) -> Vec<u8> {
        let mut h = Vec::with_capacity(HEADER_FIXED + HEADER_LINK * self.links.len());
        h.extend_from_slice(&self.size.to_le_bytes());
        h.extend_from_slice(&(self.links.len() as u32).to_le_bytes());
        h.extend_from_slice(&self.options.to_le_bytes());
        h.extend_from_slice(&self.growth.to_le_bytes());
        for l in &self.links {
            h.extend_from_slice(&l.bytes().to_le_bytes());
            h.extend_from_slice(&l.bits.to_le_bytes());
            h.extend_from_slice(&l.size.to_le_bytes());
            h.extend_from_slice(&l.error.to_le_bytes());
            h.extend_from_slice(&l.bpe.to_le_bytes());
            h.extend_from_slice(&l.hashes.to_le_bytes());
            h.extend_from_slice(&l.entries.to_le_bytes());
            h.push(l.n2);
        }
        h
    }

    /// `BF.SCANDUMP key it` (§7.1): `Some((next_iterator, data))`, or `None` for the end marker
    /// `[0, ""]`. Iterator 0 gives the header; iterator `it ≥ 1` the piece of the concatenated
    /// bitmaps starting at byte `it − 1`, at most 16 MiB and never crossing a link boundary.
    pub fn scandump(&self, it: i64) -> Option<(i64, Cow<'_, [u8]>)> {
        if it == 0 {
            return Some((1, Cow::Owned(self.header())));
        }
        let (link, off) = self.locate(it.checked_sub(1)?)?;
        let bitmap = &self.links[link].bitmap;
        let len = (bitmap.len() - off).min(MAX_CHUNK);
        Some((it + len as i64, Cow::Borrowed(&bitmap[off..off + len])))
    }

    /// The chain as it is now, to dump later while it keeps changing (a background snapshot):
    /// the header and small links are copied now; a large link's bitmap is read later, its
    /// pieces copied aside only when a write reaches them first ([`CowGuard`]), so that the
    /// writer waits for those pieces, never for the whole bitmap.
    pub fn freeze(&self) -> FrozenChain {
        let links = self.links.iter().map(|l| FrozenBytes::of(&l.bitmap)).collect();
        FrozenChain { header: self.header(), links }
    }

    /// The link holding byte `p` of the data stream, and the offset in it.
    fn locate(&self, p: i64) -> Option<(usize, usize)> {
        let mut p = u64::try_from(p).ok()?;
        for (i, l) in self.links.iter().enumerate() {
            if p < l.bytes() {
                return Some((i, p as usize));
            }
            p -= l.bytes();
        }
        None
    }

    /// `BF.LOADCHUNK key 1 header` on a missing key (§7.1): validates the header and builds a
    /// chain with zeroed bitmaps. Nothing is allocated before every field has been checked, and
    /// never more than `limits.max_bytes`.
    pub fn from_header(data: &[u8], limits: &LoadLimits) -> Result<Self, BloomHeaderError> {
        if data.len() < HEADER_FIXED {
            return Err(BloomHeaderError::TooShort);
        }
        let f = Fields(data);
        let size = f.u64(0);
        let nfilters = f.u32(8) as usize;
        let opts = f.u32(12);
        let growth = f.u32(16);
        if nfilters == 0 {
            return Err(BloomHeaderError::NoLinks);
        }
        if (data.len() - HEADER_FIXED) / HEADER_LINK != nfilters
            || (data.len() - HEADER_FIXED) % HEADER_LINK != 0
        {
            return Err(BloomHeaderError::LengthMismatch);
        }
        if opts & !options::ALL != 0 {
            return Err(BloomHeaderError::UnknownOptions);
        }
        let mut shapes = Vec::with_capacity(nfilters);
        let mut total_bytes = 0u64;
        let mut total_size = 0u64;
        for i in 0..nfilters {
            let at = HEADER_FIXED + HEADER_LINK * i;
            let (bytes, bits, lsize, error, bpe) =
                (f.u64(at), f.u64(at + 8), f.u64(at + 16), f.f64(at + 24), f.f64(at + 32));
            let (hashes, entries, n2) = (f.u32(at + 40), f.u64(at + 44), f.u8(at + 52));
            validate_link(i, error, bpe, hashes, bits, bytes, n2)?;
            total_size = total_size.checked_add(lsize).ok_or(BloomHeaderError::SizeMismatch)?;
            total_bytes = total_bytes.saturating_add(bytes);
            shapes.push((entries, error, bpe, hashes, bits, n2, lsize, bytes));
        }
        if total_size != size {
            return Err(BloomHeaderError::SizeMismatch);
        }
        if total_bytes > limits.max_bytes {
            return Err(BloomHeaderError::OutOfMemory);
        }
        let mut links = Vec::with_capacity(nfilters);
        for (entries, error, bpe, hashes, bits, n2, size, bytes) in shapes {
            let bitmap = zeroed_bitmap(bytes).ok_or(BloomHeaderError::OutOfMemory)?;
            links.push(BloomLink { entries, error, bpe, hashes, bits, n2, size, bitmap });
        }
        Ok(BloomChain { size, options: opts, growth, links })
    }

    /// `BF.LOADCHUNK key it data` on an existing chain (§7.1): copies `data` into the link that
    /// holds byte `it − len(data) − 1` of the data stream. Empty data is a no-op when that byte
    /// exists.
    pub fn load_chunk(&mut self, it: i64, data: &[u8]) -> Result<(), BloomChunkError> {
        if it <= 0 || (it as u64) < data.len() as u64 {
            return Err(BloomChunkError::BadIterator);
        }
        let s = it - data.len() as i64;
        if s < 1 {
            return Err(BloomChunkError::NoLink);
        }
        let (link, off) = self.locate(s - 1).ok_or(BloomChunkError::NoLink)?;
        let bitmap = &mut self.links[link].bitmap;
        if data.len() > bitmap.len() - off {
            return Err(BloomChunkError::TooBig);
        }
        let guard = bitmap.cow_guard();
        let mut writer = guard.as_ref().map(|g| g.writer());
        if let Some(w) = &mut writer {
            w.before_write(bitmap, off..off + data.len());
        }
        bitmap[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Rebuilds a chain from stored fields (an RDB value, §12.3): the same checks as a
    /// `LOADCHUNK` header except the option bits and the sum of the link sizes, which RedisBloom's
    /// RDB load does not check either. Each link is `(entries, error, bpe, hashes, bits, n2, size,
    /// bitmap)`; its `bytes` is the bitmap's length.
    #[allow(clippy::type_complexity)]
    pub fn from_parts(
        size: u64,
        options: u32,
        growth: u32,
        links: Vec<(u64, f64, f64, u32, u64, u8, u64, Vec<u8>)>,
    ) -> Result<Self, BloomHeaderError> {
        if links.is_empty() {
            return Err(BloomHeaderError::NoLinks);
        }
        let mut out = Vec::with_capacity(links.len());
        for (i, (entries, error, bpe, hashes, bits, n2, lsize, bitmap)) in links.into_iter().enumerate() {
            validate_link(i, error, bpe, hashes, bits, bitmap.len() as u64, n2)?;
            // Copied into (huge-page) storage one link at a time, the vector freed right after.
            let mut stored = zeroed_bitmap(bitmap.len() as u64).ok_or(BloomHeaderError::OutOfMemory)?;
            stored.copy_from_slice(&bitmap);
            drop(bitmap);
            out.push(BloomLink { entries, error, bpe, hashes, bits, n2, size: lsize, bitmap: stored });
        }
        Ok(BloomChain { size, options, growth, links: out })
    }
}

/// A zeroed bitmap of `bytes` bytes (huge-page-advised when large, see [`Storage`]); `None`
/// when it cannot be allocated.
fn zeroed_bitmap(bytes: u64) -> Option<Storage<u8>> {
    Storage::zeroed(usize::try_from(bytes).ok()?).ok()
}

/// [`BloomChain::hash`] for a chain with these option bits (a free function so the batch methods
/// can hash while the links are borrowed mutably).
#[inline]
fn hash_item(opts: u32, item: &[u8]) -> (u64, u64) {
    if opts & options::FORCE64 != 0 {
        let a = murmur64a(item, REDISBLOOM_SEED);
        (a, murmur64a(item, a))
    } else {
        let a = murmur2_32(item, LEGACY_SEED);
        (a as u64, murmur2_32(item, a) as u64)
    }
}

/// How many items ahead of the one being added or tested the batch methods hash and prefetch.
/// Each item touches `hashes` random cache lines (7 to 8 at the usual error rates), so 8 items
/// ahead keep a few dozen misses in flight, more than a core's line-fill buffers hold: enough to
/// cover a DRAM miss without hashing far ahead of use.
const BATCH_AHEAD: usize = 8;
/// At most this many positions of one item are prefetched per link, and at most
/// `PREFETCH_LINKS` links (newest first) per item: a chain of many links, or a link with a
/// huge hash count (a legacy or underflowed one), is still correct, only less prefetched.
const PREFETCH_POSITIONS: u32 = 16;
const PREFETCH_LINKS: usize = 4;
/// Links smaller than this stay in the CPU caches, where prefetching only repeats the position
/// arithmetic (three 64-bit divisions per item and link): BF.MEXISTS of 100 items on a 1 KB
/// filter spent a third of the server's CPU in it (perf, `redis-benchmark -P 64`).
const PREFETCH_MIN_BYTES: usize = 1 << 20;

/// The hashes of item `i` of a batch, its cache lines requested in every link.
#[inline]
fn prepare<I: AsRef<[u8]>>(opts: u32, links: &[BloomLink], item: &I) -> (u64, u64) {
    let (a, b) = hash_item(opts, item.as_ref());
    for l in links.iter().rev().take(PREFETCH_LINKS) {
        if l.bitmap.len() >= PREFETCH_MIN_BYTES {
            l.prefetch(a, b, PREFETCH_POSITIONS);
        }
    }
    (a, b)
}

/// The per-link integrity test of §7.1 (also RedisBloom's RDB load test, §12.3).
fn validate_link(
    link: usize,
    error: f64,
    bpe: f64,
    hashes: u32,
    bits: u64,
    bytes: u64,
    n2: u8,
) -> Result<(), BloomHeaderError> {
    // NaN fails this comparison too (RedisBloom lets it through; the spec says reject).
    if !(error > 0.0 && error < 1.0) {
        return Err(BloomHeaderError::ErrorRate { link });
    }
    if n2 > 63 || (n2 != 0 && bits < (1u64 << n2)) {
        return Err(BloomHeaderError::N2 { link });
    }
    if bits == 0 || bytes.checked_mul(8) != Some(bits) {
        return Err(BloomHeaderError::Bits { link });
    }
    if hashes_for(bpe) != Some(hashes as i64) {
        return Err(BloomHeaderError::Hashes { link });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every chunk of `frozen`, concatenated in order with their iterators.
    fn frozen_dump(frozen: &FrozenChain) -> Vec<(i64, Vec<u8>)> {
        let (mut out, mut it) = (Vec::new(), 0);
        loop {
            let mut buf = Vec::new();
            let Some(next) = frozen.scandump(it, &mut buf) else { break };
            out.push((next, buf));
            it = next;
        }
        assert_eq!(out.len() as u64, frozen.chunk_count());
        out
    }

    fn live_dump(c: &BloomChain) -> Vec<(i64, Vec<u8>)> {
        let (mut out, mut it) = (Vec::new(), 0);
        while let Some((next, d)) = c.scandump(it) {
            out.push((next, d.into_owned()));
            it = next;
        }
        out
    }

    /// A frozen chain dumps the chain as it was when frozen, though adds (in a huge-page bitmap,
    /// guarded piece by piece) and LOADCHUNK change it afterwards, and though the chain is
    /// dropped before the dump is read.
    #[test]
    fn a_frozen_chain_dumps_the_state_it_was_frozen_in() {
        for drop_first in [false, true] {
            let mut c = BloomChain::new(4_000_000, 0.01, 2, false).unwrap();
            assert!(c.links[0].bitmap.len() >= crate::bits::HUGE_THRESHOLD);
            for i in 0..50_000u32 {
                c.add(&i.to_le_bytes()).unwrap();
            }
            let before = live_dump(&c);
            let frozen = c.freeze();
            assert!(matches!(frozen.links[0], FrozenBytes::Guarded(_)) || !cfg!(target_os = "linux"));
            for i in 50_000..400_000u32 {
                c.add(&i.to_le_bytes()).unwrap();
            }
            let (_, first) = &before[1];
            c.load_chunk(1 + 4096, &vec![0xAB; 4096]).unwrap();
            assert_ne!(&live_dump(&c)[1].1, first, "the live chain changed");
            if drop_first {
                drop(c);
                assert_eq!(frozen_dump(&frozen), before);
            } else {
                assert_eq!(frozen_dump(&frozen), before);
                // Once read, the pieces are free to change without copies.
                c.add(b"after").unwrap();
            }
        }
    }

    fn naive_positions(a: u64, b: u64, m: u64, k: usize) -> Vec<u64> {
        (0..k as u64).map(|i| a.wrapping_add(i.wrapping_mul(b)) % m).collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x9b0b),
            ..proptest::prelude::ProptestConfig::default()
        })]

        #[test]
        fn probes_match_the_naive_formula(
            a in proptest::prelude::any::<u64>(),
            b in proptest::prelude::any::<u64>(),
            m in 1u64..=u64::MAX,
            small in 1u64..5000,
            shift in 0u32..64,
        ) {
            for m in [m, small, 1u64 << shift, (1u64 << shift) + 1, u64::MAX, u64::MAX - small] {
                let mut p = Probes::new(a, b, m);
                let got: Vec<u64> = (0..40).map(|_| p.next_position()).collect();
                proptest::prop_assert_eq!(got, naive_positions(a, b, m, 40), "m = {}", m);
            }
        }
    }

    /// The reference for the batch methods: `add` item by item, stopping after a full
    /// non-scaling chain as BF.MADD does.
    fn add_one_by_one(c: &mut BloomChain, items: &[Vec<u8>]) -> Vec<Result<bool, BloomAddError>> {
        let mut out = Vec::new();
        for item in items {
            let r = c.add(item);
            out.push(r);
            if r == Err(BloomAddError::NonScalingFull) {
                break;
            }
        }
        out
    }

    /// `prefetch` is only a hint: on a chain whose link is large enough to be prefetched, it
    /// changes no bit, count or result.
    #[test]
    fn prefetch_changes_nothing() {
        let mut c = BloomChain::new(1_000_000, 0.01, 2, false).unwrap();
        assert!(c.links()[0].bytes() as usize >= PREFETCH_MIN_BYTES);
        for i in 0..1000u32 {
            c.add(&i.to_le_bytes()).unwrap();
        }
        let before = c.clone();
        for i in 0..5000u32 {
            c.prefetch(&i.to_le_bytes());
        }
        assert!(c == before);
        for i in 0..2000u32 {
            c.prefetch(&(i + 8).to_le_bytes());
            assert_eq!(c.contains(&i.to_le_bytes()), i < 1000 || before.contains(&i.to_le_bytes()));
        }
    }

    /// Runs the same batches through `add_many` on one copy and `add` on another: every result,
    /// the links, the counts and every bit must agree after each batch, and `contains_many`
    /// must agree with `contains`.
    fn check_batches_agree(start: BloomChain, batches: &[Vec<Vec<u8>>], probes: &[Vec<u8>]) {
        let (mut seq, mut bat) = (start.clone(), start);
        for (n, batch) in batches.iter().enumerate() {
            let want = add_one_by_one(&mut seq, batch);
            let mut got = Vec::new();
            bat.add_many(batch, &mut got);
            assert_eq!(got, want, "batch {n}");
            assert!(bat == seq, "batch {n}: chains differ");
            assert_eq!(bat.header(), seq.header());
            let mut found = Vec::new();
            bat.contains_many(probes, &mut found);
            let want: Vec<bool> = probes.iter().map(|p| seq.contains(p)).collect();
            assert_eq!(found, want, "batch {n}: contains_many");
        }
        let (mut it, mut dumped) = (0, 0);
        while let Some((next, data)) = bat.scandump(it) {
            assert_eq!(seq.scandump(it).unwrap().1, data);
            (it, dumped) = (next, dumped + 1);
        }
        assert!(dumped > bat.links().len());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 400,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0xadd5),
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Tiny capacities make links fill, grow, or (non-scaling) reject mid-batch; items from
        /// a small alphabet repeat within a batch and across batches; legacy 32-bit hashing too.
        #[test]
        fn add_many_equals_add_one_by_one(
            capacity in 1u64..12,
            error in proptest::sample::select(vec![0.3, 0.1, 0.01, 0.001]),
            growth in 0u32..4,
            nonscaling in proptest::prelude::any::<bool>(),
            legacy in proptest::prelude::any::<bool>(),
            batches in proptest::collection::vec(
                proptest::collection::vec(0u16..300, 0..40), 1..8),
        ) {
            let mut c = BloomChain::new(capacity, error, growth, nonscaling).unwrap();
            if legacy {
                // Same chain with options NOROUND only: legacy MurmurHash2 hashing.
                let mut h = c.header();
                h[12..16].copy_from_slice(&options::NOROUND.to_le_bytes());
                if c.options() & options::NO_SCALING != 0 {
                    h[12..16].copy_from_slice(&(options::NOROUND | options::NO_SCALING).to_le_bytes());
                }
                c = BloomChain::from_header(&h, &LoadLimits::default()).unwrap();
            }
            let batches: Vec<Vec<Vec<u8>>> = batches
                .iter()
                .map(|b| b.iter().map(|i| format!("item{i}").into_bytes()).collect())
                .collect();
            let probes: Vec<Vec<u8>> = (0..120u16).map(|i| format!("item{}", i * 3).into_bytes()).collect();
            check_batches_agree(c, &batches, &probes);
        }
    }

    #[test]
    fn add_many_equals_add_through_underflow_and_large_batches() {
        // Growth 1 from 0.0001 underflows after ~1060 links: "problem inserting" (code −1)
        // mid-batch, and batches longer than the prefetch distance.
        let items: Vec<Vec<u8>> = (10000..15000).map(|i: i32| i.to_string().into_bytes()).collect();
        let batches: Vec<Vec<Vec<u8>>> = items.chunks(97).map(|c| c.to_vec()).collect();
        let probes: Vec<Vec<u8>> = (9990..10100).map(|i: i32| i.to_string().into_bytes()).collect();
        check_batches_agree(BloomChain::new(1, 0.0001, 1, false).unwrap(), &batches, &probes);
        // One large link, batches of 1000, about half repeats.
        let items: Vec<Vec<u8>> = (0..20_000u32).map(|i| (i % 12_000).to_le_bytes().to_vec()).collect();
        let batches: Vec<Vec<Vec<u8>>> = items.chunks(1000).map(|c| c.to_vec()).collect();
        check_batches_agree(BloomChain::new(5000, 0.01, 2, false).unwrap(), &batches, &items[..3000]);
        // A loaded chain that counts more items than its capacity: every add takes the slow path.
        let mut h = BloomChain::new(4, 0.01, 0, true).unwrap().header();
        h[0..8].copy_from_slice(&9u64.to_le_bytes());
        h[20 + 16..20 + 24].copy_from_slice(&9u64.to_le_bytes());
        let over = BloomChain::from_header(&h, &LoadLimits::default()).unwrap();
        check_batches_agree(over, &batches[..1], &items[..50]);
    }

    #[test]
    fn add_many_until_full_stops_where_the_link_fills() {
        let mut c = BloomChain::new(10, 0.01, 2, false).unwrap();
        let items: Vec<String> = (0..25).map(|i| format!("k{i}")).collect();
        let mut out = Vec::new();
        // Room for 10: exactly 10 are taken, whatever they count as.
        assert_eq!(c.add_many_until_full(&items, &mut out), 10);
        assert_eq!(out.len(), 10);
        if c.links()[0].size() == 10 {
            assert_eq!(c.add_many_until_full(&items[10..], &mut out), 0);
        }
        out.clear();
        c.add_many(&items[10..], &mut out);
        assert_eq!(out.len(), 15);
        assert_eq!(c.links().len(), 2);
        // Non-scaling and full: the batch stops after the first item that does not fit.
        let mut ns = BloomChain::new(3, 0.01, 2, true).unwrap();
        out.clear();
        ns.add_many(&["a", "b", "c", "a", "d", "e"], &mut out);
        assert_eq!(out, [Ok(true), Ok(true), Ok(true), Ok(false), Err(BloomAddError::NonScalingFull)]);
    }

    #[test]
    fn worked_example_of_the_spec() {
        // Error 0.01, capacity 100, scaling: first link 0.005, 1102 bits → 144 bytes, 8 hashes.
        let c = BloomChain::new(100, 0.01, 2, false).unwrap();
        let l = &c.links()[0];
        assert_eq!((l.error(), l.bits(), l.bytes(), l.hashes()), (0.005, 1152, 144, 8));
        assert_eq!(c.options(), 5);
        assert_eq!(c.info().size, 240);
        assert_eq!(BloomChain::new(100, 0.001, 2, false).unwrap().info().size, 296);
        assert_eq!(BloomChain::new(3, 0.01, 2, true).unwrap().info().size, 104);
        assert_eq!(BloomChain::new(3, 0.01, 2, true).unwrap().options(), 13);
    }

    #[test]
    fn error_rate_cap_and_hash_rounding() {
        // 0.5 is capped to 0.25, halved to 0.125, whose 0.693·bpe is just above 3: 4 hashes.
        let c = BloomChain::new(100, 0.5, 2, false).unwrap();
        assert_eq!(c.links()[0].error(), 0.125);
        assert_eq!(c.links()[0].hashes(), 4);
    }

    #[test]
    fn bad_parameters_are_errors() {
        use BloomCreateError::*;
        for (cap, p, g) in [
            (0u64, 0.01, 2u32),
            (BF_MAX_CAPACITY + 1, 0.01, 2),
            (u64::MAX, 0.01, 2),
            (100, 0.0, 2),
            (100, 1.0, 2),
            (100, -0.5, 2),
            (100, f64::NAN, 2),
            (100, f64::INFINITY, 2),
            (100, 0.01, BF_MAX_EXPANSION + 1),
        ] {
            let e = BloomChain::new(cap, p, g, false).unwrap_err();
            assert!(matches!(e, CapacityOutOfRange | ErrorRateOutOfRange | ExpansionOutOfRange), "{e:?}");
        }
        // The smallest subnormal halves to 0: an invalid first link.
        assert_eq!(BloomChain::new(1, f64::from_bits(1), 2, false), Err(InvalidLink));
        assert!(BloomChain::new(1, f64::from_bits(1), 2, true).is_ok());
        assert_eq!(BloomChain::check_capacity(-1), Err(CapacityOutOfRange));
        assert_eq!(BloomChain::check_capacity(0), Err(CapacityOutOfRange));
        assert_eq!(BloomChain::check_capacity(1 << 30), Ok(1 << 30));
        assert_eq!(BloomChain::check_capacity((1 << 30) + 1), Err(CapacityOutOfRange));
        assert_eq!(BloomChain::check_error_rate(0.5), Ok(0.25));
        assert_eq!(BloomChain::check_error_rate(f64::NAN), Err(ErrorRateOutOfRange));
        assert_eq!(BloomChain::resolve_expansion(0, false), Ok((0, true)));
        assert_eq!(BloomChain::resolve_expansion(2, true), Err(NonScalingExpansion));
        assert_eq!(BloomChain::resolve_expansion(-1, false), Err(ExpansionOutOfRange));
        assert_eq!(BloomChain::resolve_expansion(32769, false), Err(ExpansionOutOfRange));
        assert_eq!(BloomChain::resolve_expansion(32768, false), Ok((32768, false)));
    }

    #[test]
    fn link_size_overflow_is_out_of_memory_not_a_panic() {
        assert!(matches!(shape(u64::MAX, 1e-300), Err(SizeError::OutOfMemory)));
        assert!(matches!(shape(0, 0.01), Err(SizeError::Invalid)));
    }

    #[test]
    fn underflow_example_of_the_spec() {
        // BF.RESERVE poc 0.0001 1 EXPANSION 1, BF.MADD 10000 … 14999: 1061 links, the last with
        // ratio 4.94066e-324 and 1075 hashes; 1276 replies are "problem inserting".
        let mut c = BloomChain::new(1, 0.0001, 1, false).unwrap();
        let mut failures = 0;
        for i in 10000..15000 {
            match c.add(i.to_string().as_bytes()) {
                Err(BloomAddError::CannotGrow) => failures += 1,
                Err(e) => panic!("{e:?}"),
                Ok(_) => {}
            }
        }
        assert_eq!(c.links().len(), 1061);
        let last = c.links().last().unwrap();
        assert_eq!((format_g(last.error()), last.hashes()), ("4.94066e-324".to_string(), 1075));
        assert_eq!(failures, 1276);
    }

    #[test]
    fn false_positives_at_insert_are_not_counted() {
        // §5.5: 100 distinct adds to a 0.01/10 filter give size:99 (here the items "0" … "99":
        // one of them is already reported present when it arrives).
        let mut c = BloomChain::new(10, 0.01, 2, false).unwrap();
        let added = (0..100).filter(|i| c.add(i.to_string().as_bytes()) == Ok(true)).count();
        assert_eq!((added, c.len()), (99, 99));
        assert_eq!(c.links().iter().map(|l| l.size()).sum::<u64>(), 99);
    }

    #[test]
    fn large_link_is_split_into_16_mib_chunks() {
        // A link of 17 920 104 bytes: [16777217, 16 MiB], [17920105, 1 142 888 bytes], end.
        let c = BloomChain::from_parts(0, 5, 2, vec![big_link(17_920_104)]).unwrap();
        let (n1, d1) = c.scandump(1).unwrap();
        assert_eq!((n1, d1.len()), (16_777_217, MAX_CHUNK));
        let (n2, d2) = c.scandump(n1).unwrap();
        assert_eq!((n2, d2.len()), (17_920_105, 1_142_888));
        assert!(c.scandump(n2).is_none());
        assert!(c.scandump(-1).is_none());
    }

    fn big_link(bytes: u64) -> (u64, f64, f64, u32, u64, u8, u64, Vec<u8>) {
        let s = shape(1000, 0.01).unwrap();
        (1000, 0.01, s.bpe, s.hashes, bytes * 8, 0, 0, vec![0u8; bytes as usize])
    }

    #[test]
    fn header_validation() {
        let limits = LoadLimits::default();
        let good = BloomChain::new(10, 0.1, 2, false).unwrap().header();
        assert!(BloomChain::from_header(&good, &limits).is_ok());
        let e = |h: &[u8]| BloomChain::from_header(h, &limits).unwrap_err();
        assert_eq!(e(&good[..19]), BloomHeaderError::TooShort);
        assert_eq!(e(&[]), BloomHeaderError::TooShort);
        assert_eq!(e(&good[..72]), BloomHeaderError::LengthMismatch);
        let mut extra = good.clone();
        extra.push(0);
        assert_eq!(e(&extra), BloomHeaderError::LengthMismatch);
        let patch = |at: usize, bytes: &[u8]| {
            let mut h = good.clone();
            h[at..at + bytes.len()].copy_from_slice(bytes);
            h
        };
        assert_eq!(e(&patch(8, &0u32.to_le_bytes())), BloomHeaderError::NoLinks);
        assert_eq!(e(&patch(8, &u32::MAX.to_le_bytes())), BloomHeaderError::LengthMismatch);
        assert_eq!(e(&patch(12, &16u32.to_le_bytes())), BloomHeaderError::UnknownOptions);
        assert_eq!(e(&patch(44, &0f64.to_le_bytes())), BloomHeaderError::ErrorRate { link: 0 });
        assert_eq!(e(&patch(44, &f64::NAN.to_le_bytes())), BloomHeaderError::ErrorRate { link: 0 });
        assert_eq!(e(&patch(72, &[64])), BloomHeaderError::N2 { link: 0 });
        assert_eq!(e(&patch(72, &[7])), BloomHeaderError::N2 { link: 0 }); // 64 bits < 2^7
        assert!(BloomChain::from_header(&patch(72, &[6]), &limits).is_ok()); // 64 bits = 2^6
        assert_eq!(e(&patch(28, &63u64.to_le_bytes())), BloomHeaderError::Bits { link: 0 });
        assert_eq!(e(&patch(28, &0u64.to_le_bytes())), BloomHeaderError::Bits { link: 0 });
        assert_eq!(e(&patch(60, &6u32.to_le_bytes())), BloomHeaderError::Hashes { link: 0 });
        assert_eq!(e(&patch(52, &f64::NAN.to_le_bytes())), BloomHeaderError::Hashes { link: 0 });
        assert_eq!(e(&patch(52, &1e300f64.to_le_bytes())), BloomHeaderError::Hashes { link: 0 });
        assert_eq!(e(&patch(0, &1u64.to_le_bytes())), BloomHeaderError::SizeMismatch);
        // A huge link: refused by the budget before any allocation.
        let huge = patch(20, &(1u64 << 60).to_le_bytes());
        let huge = {
            let mut h = huge;
            h[28..36].copy_from_slice(&(1u64 << 63).to_le_bytes());
            h
        };
        assert_eq!(e(&huge), BloomHeaderError::OutOfMemory);
        // Link sizes whose sum overflows.
        let mut two = BloomChain::new(10, 0.1, 2, false).unwrap();
        for i in 0..40 {
            let _ = two.add(format!("x{i}").as_bytes());
        }
        assert!(two.links().len() >= 2);
        let mut h = two.header();
        h[20 + 53 + 16..20 + 53 + 24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(e(&h), BloomHeaderError::SizeMismatch);
    }

    #[test]
    fn garbage_headers_never_panic() {
        // Deterministic pseudo-random bytes of every length up to a few links.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..300usize {
            for _ in 0..20 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                if let Ok(mut c) = BloomChain::from_header(&bytes, &LoadLimits::default()) {
                    let _ = c.add(b"x");
                    let _ = c.debug_lines();
                }
            }
        }
        // Single-byte corruptions of a valid two-link header: an error or a usable chain.
        let mut two = BloomChain::new(10, 0.1, 2, false).unwrap();
        for i in 0..40 {
            let _ = two.add(format!("x{i}").as_bytes());
        }
        let good = two.header();
        for at in 0..good.len() {
            for v in [0u8, 1, 0x3f, 0x7f, 0x80, 0xff] {
                let mut h = good.clone();
                h[at] = v;
                if let Ok(mut c) = BloomChain::from_header(&h, &LoadLimits::default()) {
                    // Growing a link whose corrupted capacity or growth asks for gigabytes would
                    // really allocate them (as RedisBloom would): keep this test small.
                    let last = c.links().last().unwrap().entries();
                    let rounds = if c.growth() <= 16 && last <= 1000 { 50 } else { 0 };
                    for i in 0..rounds {
                        let _ = c.add(format!("y{i}").as_bytes());
                    }
                    let mut it = 0;
                    while let Some((next, _)) = c.scandump(it) {
                        it = next;
                    }
                }
            }
        }
    }

    #[test]
    fn chunk_offsets() {
        let mut c = BloomChain::new(10, 0.1, 2, false).unwrap(); // one 8-byte link
        assert_eq!(c.load_chunk(0, b""), Err(BloomChunkError::BadIterator));
        assert_eq!(c.load_chunk(-5, b""), Err(BloomChunkError::BadIterator));
        assert_eq!(c.load_chunk(3, b"abcd"), Err(BloomChunkError::BadIterator));
        assert_eq!(c.load_chunk(4, b"abcd"), Err(BloomChunkError::NoLink));
        assert_eq!(c.load_chunk(12, b"abcd"), Err(BloomChunkError::TooBig)); // starts at byte 7
        assert_eq!(c.load_chunk(13, b"abcd"), Err(BloomChunkError::NoLink)); // starts at byte 8
        assert_eq!(c.load_chunk(10, b"abcd"), Err(BloomChunkError::TooBig));
        assert_eq!(c.load_chunk(1, b""), Ok(()));
        assert_eq!(c.load_chunk(8, b""), Ok(()));
        assert_eq!(c.load_chunk(9, b""), Err(BloomChunkError::NoLink));
        assert_eq!(c.load_chunk(9, b"abcdefgh"), Ok(()));
        assert_eq!(c.links()[0].bitmap(), b"abcdefgh");
        assert_eq!(c.load_chunk(i64::MAX, b"abcd"), Err(BloomChunkError::NoLink));
    }
}
