//! Guava's `com.google.common.hash.BloomFilter`, bit for bit, and its `writeTo` / `readFrom`
//! stream format.
//!
//! Facts taken from Guava's documentation and observed output (Guava 31.1; the golden files in
//! `crates/sift-cli/tests/guava/` were written by the real library); no Guava code was used.
//!
//! * **Sizing** (`BloomFilter.create(funnel, n, p)`): `n = max(n, 1)`,
//!   `bits = ⌊-n·ln p / ln² 2⌋` (Java `(long)` truncation), `k = max(1, round(bits/n · ln 2))`
//!   (Java `Math.round`, half up). The bit array holds `⌈bits/64⌉` 64-bit words and every index is
//!   taken modulo `64·words`, not modulo `bits`.
//! * **Hashing**, strategy `MURMUR128_MITZ_64` (ordinal 1, the default since Guava 12):
//!   `(h1, h2) = MurmurHash3_x64_128(funnelled bytes, seed 0)`; probe `i` (`0 ≤ i < k`) sets bit
//!   `((h1 + i·h2) & i64::MAX) mod bitSize` (64-bit wrapping arithmetic). Strategy
//!   `MURMUR128_MITZ_32` (ordinal 0, older filters) is read too: `x = h1`, `a = x as i32`,
//!   `b = (x >> 32) as i32`, probe `i` (`1 ≤ i ≤ k`) is `c = a + i·b` (32-bit wrapping), `!c` if
//!   negative, `mod bitSize`.
//! * **Bit order**: bit `j` is bit `j mod 64` of word `j / 64`.
//! * **Stream** (`writeTo`, big-endian as Java's `DataOutputStream`): strategy ordinal (1 byte),
//!   `k` (1 unsigned byte), word count (`int`, 4 bytes), then each word as a `long` (8 bytes).
//! * **Funnels**: Guava hashes what a `Funnel` puts into the hasher. `Funnels.byteArrayFunnel()`
//!   puts the bytes and `Funnels.stringFunnel(UTF_8)` the UTF-8 bytes of the string, so for both
//!   the item given to [`GuavaBloom::put`] is those bytes. (`Funnels.unencodedCharsFunnel()` puts
//!   UTF-16 code units, little-endian: pass those bytes to interoperate with it.)
//!
//! ```
//! use sift::compat::guava::GuavaBloom;
//!
//! // BloomFilter.create(Funnels.stringFunnel(UTF_8), 1000, 0.01): 9585 bits → 150 words, k = 7.
//! let mut g = GuavaBloom::new(1000, 0.01)?;
//! assert_eq!((g.num_hashes(), g.bit_size()), (7, 9600));
//! g.put(b"key-0");
//! assert!(g.might_contain(b"key-0"));
//! let bytes = g.write_to();
//! assert_eq!(&bytes[..6], &[1, 7, 0, 0, 0, 150]);
//! assert_eq!(GuavaBloom::read_from(&bytes)?, g);
//! # Ok::<(), sift::Error>(())
//! ```

use crate::bits::{CowGuard, Storage};
use crate::error::{Error, FormatError, Result};
use crate::format::{FrozenFile, FrozenPart};
use crate::hash::murmur3_x64_128;

/// Guava's `BloomFilterStrategies`, by ordinal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// `MURMUR128_MITZ_32` (ordinal 0): 32-bit combined hashes from the low 64 bits.
    Murmur128Mitz32 = 0,
    /// `MURMUR128_MITZ_64` (ordinal 1): 64-bit combined hashes; Guava's default.
    Murmur128Mitz64 = 1,
}

impl Strategy {
    /// The ordinal byte of the stream format.
    pub const fn ordinal(self) -> u8 {
        self as u8
    }
    /// Guava's name of the strategy.
    pub const fn name(self) -> &'static str {
        match self {
            Strategy::Murmur128Mitz32 => "MURMUR128_MITZ_32",
            Strategy::Murmur128Mitz64 => "MURMUR128_MITZ_64",
        }
    }
}

/// Length of the stream header: strategy, k, word count.
pub const HEADER_LEN: usize = 6;
/// Largest `k` the format stores (one unsigned byte).
pub const MAX_HASHES: u32 = 255;
/// Largest word count: Java arrays are indexed by a non-negative `int`.
pub const MAX_WORDS: u64 = i32::MAX as u64;

/// A Guava Bloom filter. See the [module documentation](self).
#[derive(Clone, PartialEq, Eq)]
pub struct GuavaBloom {
    strategy: Strategy,
    k: u32,
    /// The bit array, in memory order (written big-endian, as Java's `long`s); in huge-page
    /// memory when large, so that a snapshot can read it copy-on-write ([`GuavaBloom::freeze`]).
    words: Storage<u64>,
    /// Set bits, kept up to date so `expected_fpp` costs nothing (Guava keeps the same count).
    ones: u64,
}

impl core::fmt::Debug for GuavaBloom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GuavaBloom")
            .field("strategy", &self.strategy)
            .field("k", &self.k)
            .field("words", &self.words.len())
            .field("ones", &self.ones)
            .finish()
    }
}

/// Java's `Math.round(double)` for the non-negative values used here: `floor(x + 0.5)`.
fn java_round(x: f64) -> f64 {
    (x + 0.5).floor()
}

impl GuavaBloom {
    /// `BloomFilter.create(funnel, expected_insertions, fpp)` with strategy `MURMUR128_MITZ_64`:
    /// the same number of words and hashes as Guava. `expected_insertions = 0` is taken as 1, as
    /// Guava does.
    pub fn new(expected_insertions: u64, fpp: f64) -> Result<Self> {
        if !(fpp > 0.0 && fpp < 1.0) {
            return Err(Error::InvalidParameter {
                name: "fpr",
                value: fpp.to_string(),
                expected: "a number strictly between 0 and 1, e.g. 0.01",
            });
        }
        let n = expected_insertions.max(1) as f64;
        let ln2 = core::f64::consts::LN_2;
        let bits_f = -n * fpp.ln() / (ln2 * ln2);
        if bits_f.is_nan() || bits_f >= (MAX_WORDS * 64) as f64 {
            return Err(Error::CapacityExceeded {
                requested_bytes: (bits_f / 8.0).min(u128::MAX as f64) as u128,
                limit_bytes: (MAX_WORDS * 8) as u128,
            });
        }
        let bits = bits_f as u64; // Java's (long) cast truncates.
        let k = java_round(bits as f64 / n * ln2).max(1.0) as u32;
        Self::with_params(bits, k.min(MAX_HASHES), Strategy::Murmur128Mitz64)
    }

    /// A filter of `ceil(num_bits / 64)` words and `hashes` hash functions (1 to 255).
    pub fn with_params(num_bits: u64, hashes: u32, strategy: Strategy) -> Result<Self> {
        if hashes == 0 || hashes > MAX_HASHES {
            return Err(Error::InvalidParameter {
                name: "hashes",
                value: hashes.to_string(),
                expected: "between 1 and 255 (Guava stores k in one byte)",
            });
        }
        let words = num_bits.div_ceil(64);
        if words == 0 || words > MAX_WORDS {
            return Err(Error::InvalidParameter {
                name: "bits",
                value: num_bits.to_string(),
                expected: "between 1 and 2^31 - 1 words of 64 bits (a Java long[])",
            });
        }
        let words = Storage::zeroed(words as usize)?;
        Ok(GuavaBloom { strategy, k: hashes, words, ones: 0 })
    }

    /// The hash strategy.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }
    /// Number of hash functions `k`.
    pub fn num_hashes(&self) -> u32 {
        self.k
    }
    /// `bitSize()`: 64 times the number of words (the modulus of every probe).
    pub fn bit_size(&self) -> u64 {
        self.words.len() as u64 * 64
    }
    /// Number of set bits.
    pub fn bit_count(&self) -> u64 {
        self.ones
    }
    /// The words of the bit array.
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    /// Memory of the bit array in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.words.len() * 8
    }
    /// Guava's `expectedFpp()`: `(bitCount / bitSize)^k`.
    pub fn expected_fpp(&self) -> f64 {
        (self.ones as f64 / self.bit_size() as f64).powi(self.k as i32)
    }
    /// Guava's `approximateElementCount()`: `-bitSize/k · ln(1 - bitCount/bitSize)`, rounded
    /// (Swamidass & Baldi 2007).
    pub fn approximate_element_count(&self) -> u64 {
        let m = self.bit_size() as f64;
        let x = self.ones as f64;
        let est = -m / self.k as f64 * (1.0 - x / m).ln();
        if est.is_finite() {
            java_round(est) as u64
        } else {
            u64::MAX
        }
    }

    /// Calls `f` with each probe position (modulo `m`) of the item whose MurmurHash3_x64_128 is
    /// `(h1, h2)`, until `f` returns `false`.
    #[inline]
    fn probes(strategy: Strategy, k: u32, m: u64, h1: u64, h2: u64, mut f: impl FnMut(u64) -> bool) -> bool {
        match strategy {
            Strategy::Murmur128Mitz64 => {
                let mut c = h1;
                for _ in 0..k {
                    if !f((c & i64::MAX as u64) % m) {
                        return false;
                    }
                    c = c.wrapping_add(h2);
                }
            }
            Strategy::Murmur128Mitz32 => {
                let a = h1 as i32;
                let b = (h1 >> 32) as i32;
                for i in 1..=k as i32 {
                    let mut c = a.wrapping_add(i.wrapping_mul(b));
                    if c < 0 {
                        c = !c;
                    }
                    if !f(c as u64 % m) {
                        return false;
                    }
                }
            }
        }
        true
    }

    /// `put(item)` for the funnelled bytes of an item; `true` if a bit changed (Guava's return).
    pub fn put(&mut self, item: &[u8]) -> bool {
        let (h1, h2) = murmur3_x64_128(item, 0);
        self.put_hash(h1, h2)
    }

    /// Inserts the item whose MurmurHash3_x64_128 (seed 0) is `(h1, h2)`.
    pub fn put_hash(&mut self, h1: u64, h2: u64) -> bool {
        match self.words.cow_guard() {
            None => self.set_probes(h1, h2),
            Some(g) => self.set_probes_guarded(&g, h1, h2),
        }
    }

    /// [`GuavaBloom::put_hash`] while a snapshot reads the words ([`GuavaBloom::freeze`]): the
    /// pieces of the item's `k` words are saved first (the same probes the insert sets), and
    /// the insert happens under the guard's lock.
    #[cold]
    fn set_probes_guarded(&mut self, g: &CowGuard, h1: u64, h2: u64) -> bool {
        let mut w = g.writer();
        let words = &self.words;
        Self::probes(self.strategy, self.k, self.bit_size(), h1, h2, |j| {
            let x = (j >> 6) as usize;
            w.before_write_values(words, x..x + 1);
            true
        });
        self.set_probes(h1, h2)
    }

    /// Sets the item's `k` bits; `true` if one was clear.
    #[inline]
    fn set_probes(&mut self, h1: u64, h2: u64) -> bool {
        let mut changed = 0u64;
        let m = self.bit_size();
        let words = &mut self.words;
        Self::probes(self.strategy, self.k, m, h1, h2, |j| {
            let w = &mut words[(j >> 6) as usize];
            let mask = 1u64 << (j & 63);
            changed += (*w & mask == 0) as u64;
            *w |= mask;
            true
        });
        self.ones += changed;
        changed != 0
    }

    /// `mightContain(item)` for the funnelled bytes of an item.
    pub fn might_contain(&self, item: &[u8]) -> bool {
        let (h1, h2) = murmur3_x64_128(item, 0);
        self.might_contain_hash(h1, h2)
    }

    /// Whether the item whose MurmurHash3_x64_128 (seed 0) is `(h1, h2)` may be present.
    pub fn might_contain_hash(&self, h1: u64, h2: u64) -> bool {
        let w = &self.words;
        Self::probes(self.strategy, self.k, self.bit_size(), h1, h2, |j| {
            w[(j >> 6) as usize] >> (j & 63) & 1 == 1
        })
    }

    /// The stream's header: strategy, `k`, word count.
    fn header(&self) -> [u8; HEADER_LEN] {
        let n = (self.words.len() as u32).to_be_bytes();
        [self.strategy.ordinal(), self.k as u8, n[0], n[1], n[2], n[3]]
    }

    /// `writeTo(out)`: the stream bytes (see the [module documentation](self)).
    pub fn write_to(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + 8 * self.words.len());
        out.extend_from_slice(&self.header());
        for w in self.words.iter() {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out
    }

    /// `BloomFilter.readFrom(in, funnel)` over exactly the bytes of one filter. An unknown
    /// strategy, `k = 0`, a word count of 0 or negative, a truncated stream and trailing bytes are
    /// errors; nothing is allocated beyond what the input holds.
    pub fn read_from(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < HEADER_LEN {
            return Err(FormatError::Truncated {
                what: "guava header",
                needed: HEADER_LEN as u64,
                available: bytes.len() as u64,
            }
            .into());
        }
        let strategy = match bytes[0] {
            0 => Strategy::Murmur128Mitz32,
            1 => Strategy::Murmur128Mitz64,
            _ => {
                return Err(FormatError::InvalidParams(
                    "guava: unknown strategy ordinal (0 = MURMUR128_MITZ_32, 1 = MURMUR128_MITZ_64)",
                )
                .into())
            }
        };
        let k = bytes[1] as u32;
        if k == 0 {
            return Err(FormatError::InvalidParams("guava: zero hash functions").into());
        }
        let words = i32::from_be_bytes(bytes[2..6].try_into().expect("4 bytes"));
        if words <= 0 {
            return Err(FormatError::InvalidParams("guava: word count is zero or negative").into());
        }
        let needed = HEADER_LEN as u64 + 8 * words as u64;
        let avail = bytes.len() as u64;
        if avail < needed {
            return Err(FormatError::Truncated { what: "guava bit array", needed, available: avail }.into());
        }
        if avail > needed {
            return Err(FormatError::TrailingBytes { extra: avail - needed }.into());
        }
        let mut v = Storage::<u64>::zeroed(words as usize)?;
        for (w, b) in v.iter_mut().zip(bytes[HEADER_LEN..].chunks_exact(8)) {
            *w = u64::from_be_bytes(b.try_into().expect("8 bytes"));
        }
        let ones = v.iter().map(|w| w.count_ones() as u64).sum();
        Ok(GuavaBloom { strategy, k, words: v, ones })
    }
}

/// The hash a Guava filter's sift file names: MurmurHash3_x64_128, seed 0.
fn file_hasher() -> crate::hash::Hasher {
    crate::hash::Hasher::new(crate::hash::HashKind::Murmur3_128, 0)
}

impl GuavaBloom {
    /// The parameter block of the sift file: words, hashes, strategy ordinal.
    fn params(&self) -> crate::format::ParamWriter {
        let mut p = crate::format::ParamWriter::new();
        p.u64(self.words.len() as u64).u32(self.k).u32(self.strategy.ordinal() as u32);
        p
    }

    /// The filter's sift file as it is now ([`crate::Persist::to_bytes`]), to be written later
    /// while the filter keeps changing: the stream header is copied, the words are guarded
    /// ([`crate::bits::COW_PIECE`]-sized pieces copied aside by the inserts that reach them
    /// before the file has been written) and written as Guava's big-endian `long`s, so that no
    /// insert waits for a copy of the whole filter. `None` for a filter small enough to copy
    /// (not in its own huge-page allocation) or already frozen.
    pub fn freeze(&self) -> Option<FrozenFile> {
        let g = self.words.freeze()?;
        let parts = vec![FrozenPart::Bytes(self.header().to_vec()), FrozenPart::WordsBigEndian(g)];
        Some(FrozenFile::new(
            crate::format::FilterKind::Guava,
            file_hasher(),
            self.params().as_bytes(),
            parts,
        ))
    }
}

/// Guava's filter through sift's traits, so the tools that serve any filter (the `SF.*` commands)
/// serve it too: items are hashed with MurmurHash3_x64_128, seed 0, as [`GuavaBloom::put`] does.
impl crate::traits::Filter for GuavaBloom {
    fn hasher(&self) -> crate::hash::Hasher {
        file_hasher()
    }

    #[inline]
    fn contains_digest(&self, digest: crate::hash::Digest) -> bool {
        self.might_contain_hash(digest.h1, digest.h2)
    }

    /// Guava keeps no count: [`GuavaBloom::approximate_element_count`], from the bits set.
    fn len(&self) -> usize {
        usize::try_from(self.approximate_element_count()).unwrap_or(usize::MAX)
    }

    fn is_empty(&self) -> bool {
        self.ones == 0
    }

    fn size_in_bytes(&self) -> usize {
        GuavaBloom::size_in_bytes(self)
    }

    /// Guava's `expectedFpp()`.
    fn expected_fpr(&self) -> f64 {
        self.expected_fpp()
    }
}

impl crate::traits::Insert for GuavaBloom {
    #[inline]
    fn insert_digest(&mut self, digest: crate::hash::Digest) -> bool {
        self.put_hash(digest.h1, digest.h2)
    }
}

impl crate::traits::Persist for GuavaBloom {
    const KIND: crate::format::FilterKind = crate::format::FilterKind::Guava;

    /// Parameters: words `u64`, hashes `u32`, strategy ordinal `u32`. Payload: exactly the
    /// `writeTo` bytes (so `tail -c +49 FILE | head -c -4` is a Guava stream: header 32 bytes,
    /// parameters 16, and the CRC32C trailer 4). Hash id 6
    /// (MurmurHash3_x64_128), seed 0.
    fn to_bytes(&self) -> Vec<u8> {
        let body = self.write_to();
        let mut e = crate::format::Encoder::new(
            Self::KIND,
            file_hasher(),
            self.params().as_bytes(),
            body.len() as u64,
        );
        e.payload().extend_from_slice(&body);
        e.finish()
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let raw = crate::format::decode_verified(bytes, Self::KIND)?;
        let mut r = raw.param_reader();
        let (words, k, strategy) = (r.u64("words")?, r.u32("hashes")?, r.u32("strategy")?);
        r.finish()?;
        let g = GuavaBloom::read_from(raw.payload())?;
        if g.words.len() as u64 != words || g.k != k || g.strategy.ordinal() as u32 != strategy {
            return Err(FormatError::InvalidParams("guava: parameters disagree with the payload").into());
        }
        if raw.hasher() != file_hasher() {
            return Err(FormatError::InvalidParams("guava: hash must be murmur3-128 with seed 0").into());
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through the traits, the same bits and answers as through Guava's own methods.
    #[test]
    fn the_traits_hash_as_guava_does() {
        use crate::traits::{Filter, Insert};
        let (mut a, mut b) = (GuavaBloom::new(2000, 0.01).unwrap(), GuavaBloom::new(2000, 0.01).unwrap());
        for i in 0..1000u32 {
            let item = format!("item-{i}");
            assert_eq!(a.put(item.as_bytes()), Insert::insert(&mut b, item.as_bytes()));
        }
        assert_eq!(a, b);
        let probes: Vec<String> = (0..5000u32).map(|i| format!("item-{i}")).collect();
        let many = Filter::contains_many(&b, &probes);
        for (p, m) in probes.iter().zip(many) {
            assert_eq!(a.might_contain(p.as_bytes()), m);
            assert_eq!(a.might_contain(p.as_bytes()), Filter::contains(&b, p.as_bytes()));
        }
        assert_eq!(Filter::len(&b) as u64, a.approximate_element_count());
    }

    fn golden(name: &str) -> Option<(Vec<u8>, String, String)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../sift-cli/tests/guava/");
        let bin = std::fs::read(format!("{dir}{name}.bin")).ok()?;
        let keys = std::fs::read_to_string(format!("{dir}{name}.keys")).ok()?;
        let probes = std::fs::read_to_string(format!("{dir}{name}.probes")).ok()?;
        Some((bin, keys, probes))
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn reproduces_real_guava_bytes() {
        // (case, expected insertions, fpp, keys are hex)
        let cases = [
            ("strings_1000_0.01", 1000, 0.01, false),
            ("strings_100_0.3", 100, 0.3, false),
            ("strings_50_1e-6", 50, 1e-6, false),
            ("bytes_200_0.03", 200, 0.03, true),
        ];
        let mut checked = 0;
        for (name, n, p, hex) in cases {
            let Some((bin, keys, probes)) = golden(name) else { continue };
            let key = |s: &str| if hex { unhex(s) } else { s.as_bytes().to_vec() };
            let mut g = GuavaBloom::new(n, p).unwrap();
            for k in keys.lines() {
                g.put(&key(k));
            }
            assert_eq!(g.write_to(), bin, "{name}: sift writes Guava's bytes");
            let r = GuavaBloom::read_from(&bin).unwrap();
            assert_eq!(r, g, "{name}");
            for line in probes.lines() {
                let (k, want) = line.split_once('\t').unwrap();
                assert_eq!(r.might_contain(&key(k)), want == "true", "{name}: probe {k}");
            }
            checked += 1;
        }
        // The golden files live in the workspace; a crate published alone does not have them.
        if std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../sift-cli")).exists() {
            assert_eq!(checked, 4);
        }
    }

    #[test]
    fn sift_file_round_trip() {
        use crate::traits::Persist;
        let mut g = GuavaBloom::new(500, 0.02).unwrap();
        for i in 0..300u32 {
            g.put(&i.to_le_bytes());
        }
        let b = g.to_bytes();
        assert_eq!(GuavaBloom::from_bytes(&b).unwrap(), g);
        assert!(crate::Bloom::from_bytes(&b).is_err());
        let mut c = b.clone();
        c[40] ^= 1;
        assert!(GuavaBloom::from_bytes(&c).is_err());
    }

    #[test]
    fn mitz32_probes_stay_in_range_and_round_trip() {
        let mut g = GuavaBloom::with_params(1000, 5, Strategy::Murmur128Mitz32).unwrap();
        for i in 0..200u32 {
            g.put(&i.to_le_bytes());
        }
        assert!((0..200u32).all(|i| g.might_contain(&i.to_le_bytes())));
        let b = g.write_to();
        assert_eq!(b[0], 0);
        assert_eq!(GuavaBloom::read_from(&b).unwrap(), g);
    }

    #[test]
    fn bad_streams_are_errors() {
        let g = GuavaBloom::new(100, 0.01).unwrap();
        let b = g.write_to();
        for cut in 0..b.len() {
            assert!(GuavaBloom::read_from(&b[..cut]).is_err(), "cut {cut}");
        }
        let mut t = b.clone();
        t.push(0);
        assert!(GuavaBloom::read_from(&t).is_err());
        for (at, v) in [(0usize, 2u8), (1, 0), (2, 0x80)] {
            let mut c = b.clone();
            c[at] = v;
            assert!(GuavaBloom::read_from(&c).is_err(), "byte {at} = {v}");
        }
        // A header claiming 2^31 - 1 words over 6 bytes: refused before allocating.
        assert!(GuavaBloom::read_from(&[1, 3, 0x7f, 0xff, 0xff, 0xff]).is_err());
        assert!(GuavaBloom::new(10, 0.0).is_err());
        assert!(GuavaBloom::new(10, f64::NAN).is_err());
        assert!(GuavaBloom::new(u64::MAX, 1e-300).is_err());
        assert!(GuavaBloom::with_params(64, 0, Strategy::Murmur128Mitz64).is_err());
        assert!(GuavaBloom::with_params(0, 3, Strategy::Murmur128Mitz64).is_err());
    }

    #[test]
    fn fpp_estimate_is_near_measured() {
        let mut g = GuavaBloom::new(20_000, 0.01).unwrap();
        for i in 0..20_000u32 {
            g.put(&i.to_le_bytes());
        }
        let n = 200_000u32;
        let fp = (1_000_000..1_000_000 + n).filter(|i| g.might_contain(&i.to_le_bytes())).count();
        let p = g.expected_fpp();
        let bound = p + 3.1 * (p * (1.0 - p) / n as f64).sqrt();
        assert!((fp as f64 / n as f64) < bound * 1.05, "measured {fp}/{n}, expected {p}");
        assert!((g.approximate_element_count() as f64 - 20_000.0).abs() < 400.0);
    }

    /// A filter of 8 MiB of words (huge storage on Linux, so it freezes: 32 copy-on-write
    /// pieces) with `strategy`, 7 hashes and 20,000 items.
    fn big_guava(strategy: Strategy) -> GuavaBloom {
        let mut g = GuavaBloom::with_params(64 << 20, 7, strategy).unwrap();
        for i in 0..20_000u32 {
            g.put(&i.to_le_bytes());
        }
        g
    }

    /// Each kind of write, alone while the filter is frozen, changes the live filter and leaves
    /// the frozen file as it was at the freeze (the bytes `to_bytes` gave then, words
    /// big-endian), whether the filter is dropped before the file is written or not: one put
    /// (each strategy), one insert through the traits, a batch insert.
    #[test]
    fn every_write_alone_keeps_the_frozen_file() {
        use crate::format::{assert_each_write_keeps_frozen, NamedWrite};
        use crate::traits::{Filter, Insert, Persist};
        assert!(GuavaBloom::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
        if !cfg!(target_os = "linux") {
            return; // no huge-page storage, so nothing freezes
        }
        let g = big_guava(Strategy::Murmur128Mitz64);
        let frozen = g.freeze().unwrap();
        assert!(frozen.to_vec() == g.to_bytes(), "unchanged: the same bytes as to_bytes");
        drop(frozen);
        let batch: Vec<Vec<u8>> = (0..5000u32).map(|i| format!("batch-{i}").into_bytes()).collect();
        for strategy in [Strategy::Murmur128Mitz64, Strategy::Murmur128Mitz32] {
            let ops: Vec<NamedWrite<'_, GuavaBloom>> = vec![
                ("put", Box::new(|f: &mut GuavaBloom| assert!(f.put(b"one more")))),
                (
                    "insert",
                    Box::new(|f: &mut GuavaBloom| {
                        let d = f.hasher().digest(b"through the traits");
                        assert!(f.insert_digest(d))
                    }),
                ),
                ("batch insert", Box::new(|f: &mut GuavaBloom| assert!(f.insert_many(&batch) > 4900))),
            ];
            assert_each_write_keeps_frozen(
                &|| big_guava(strategy),
                |f| f.to_bytes(),
                GuavaBloom::freeze,
                &ops,
            );
        }
        drop(g.freeze());
        assert!(g.freeze().is_some(), "once written, the frozen file lets go");
    }

    /// While a snapshot reads the filter, a put copies aside only the pieces of the words it
    /// sets (at most `k`): the pieces saved are exactly those where the live words now differ
    /// from the frozen ones.
    #[test]
    fn a_put_during_a_freeze_copies_only_the_pieces_it_touches() {
        if !cfg!(target_os = "linux") {
            return;
        }
        use crate::bits::COW_PIECE;
        use crate::traits::Persist;
        let mut g = big_guava(Strategy::Murmur128Mitz64);
        let at_freeze = g.words().to_vec();
        let want = g.to_bytes();
        let frozen = g.freeze().unwrap();
        let guard = frozen.guard(0);
        assert_eq!(guard.len() / COW_PIECE, 32);
        for i in 0..5u32 {
            let saved = guard.saved_pieces();
            assert!(g.put(format!("new-{i}").as_bytes()));
            assert!(guard.saved_pieces() <= saved + 7, "seven words written, seven pieces at most");
            assert_eq!(
                guard.saved_pieces(),
                crate::bits::pieces_differing(g.words(), &at_freeze).len(),
                "after put {i}"
            );
        }
        assert!(guard.saved_pieces() > 7 && guard.saved_pieces() < 32, "{}", guard.saved_pieces());
        assert!(frozen.to_vec() == want, "the frozen file is the filter at the freeze");
    }
}
