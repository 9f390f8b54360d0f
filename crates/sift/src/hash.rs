//! Named, stable hash functions.
//!
//! Every hash that decides where bits land in a persisted filter is one of the functions here,
//! identified by a [`HashKind`] id and a 64-bit seed that the file header records. None of them
//! depends on the platform, the process or the Rust version: the same bytes hash to the same value
//! everywhere, forever. (`std`'s `DefaultHasher`, `ahash` and random seeds are never used for
//! anything that reaches disk.)
//!
//! Filters work on a [`Digest`]: two 64-bit words `h1`, `h2` from which they derive their `k`
//! probe positions by enhanced double hashing (Kirsch & Mitzenmacher, "Less hashing, same
//! performance", 2006; Dillinger & Manolios, "Bloom filters in probabilistic verification", 2004).
//! With a 64-bit hash `h2` is a bijective remix of `h1`, so the filter sees at most 2^64 distinct
//! items; with the 128-bit hash the two words are independent. [`HashKind::for_target`] picks the
//! 128-bit hash when `n / 2^64` would be a noticeable fraction of the target false-positive rate.

use crate::error::FormatError;

/// The hash functions `sift` knows, by their stable on-disk id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum HashKind {
    /// XXH3 64-bit (`xxh3_64_with_seed`); the default of every native filter.
    Xxh3_64 = 1,
    /// XXH3 128-bit (`xxh3_128_with_seed`); low word is `h1`, high word `h2`.
    Xxh3_128 = 2,
    /// XXH64 (`xxh64` with seed); the hash Apache Parquet's split-block Bloom filter specifies.
    Xxh64 = 3,
    /// Austin Appleby's MurmurHash64A, as RedisBloom chains it: `h1 = M(item, 0xc6a4a7935bd1e995)`
    /// (the seed field is ignored), `h2 = M(item, h1)`.
    Murmur64A = 4,
    /// SipHash-2-4 (Aumasson & Bernstein 2012) with a 128-bit key `(k0, k1)`, as BIP-158 block
    /// filters hash their items. The header seed holds `k0`; `k1` does not fit the header, so the
    /// one family that writes this id ([`crate::Gcs`]) stores it in its parameter block. Built with
    /// [`Hasher::sip24`]; a file of another kind with this id decodes with `k1 = 0`.
    SipHash24 = 5,
    /// MurmurHash3_x64_128 ([`murmur3_x64_128`], seed = the low 32 bits of the header seed):
    /// `h1`, `h2` are its two words. Guava's Bloom filters hash with it (seed 0); recorded in the
    /// header of files holding a [`crate::compat::guava::GuavaBloom`].
    Murmur3_128 = 6,
}

impl HashKind {
    /// The id stored in file headers.
    pub const fn id(self) -> u8 {
        self as u8
    }

    /// Looks a header id up.
    pub fn from_id(id: u8) -> Result<Self, FormatError> {
        Ok(match id {
            1 => HashKind::Xxh3_64,
            2 => HashKind::Xxh3_128,
            3 => HashKind::Xxh64,
            4 => HashKind::Murmur64A,
            5 => HashKind::SipHash24,
            6 => HashKind::Murmur3_128,
            other => return Err(FormatError::UnknownHash(other)),
        })
    }

    /// A short, stable name (used by `sift inspect`).
    pub const fn name(self) -> &'static str {
        match self {
            HashKind::Xxh3_64 => "xxh3-64",
            HashKind::Xxh3_128 => "xxh3-128",
            HashKind::Xxh64 => "xxh64",
            HashKind::Murmur64A => "murmur64a",
            HashKind::SipHash24 => "siphash24",
            HashKind::Murmur3_128 => "murmur3-128",
        }
    }

    /// The native hash for a filter of `n` items at false-positive rate `fpr`.
    ///
    /// With a 64-bit hash, two distinct items collide with probability 2^-64, so a non-member
    /// collides with one of `n` members with probability about `n / 2^64`: a floor under the FPR no
    /// matter how many bits the filter has. When that floor exceeds 1% of the target, XXH3-128 is
    /// used instead, making the floor `n / 2^128`.
    pub fn for_target(n: u64, fpr: f64) -> HashKind {
        let floor = n as f64 / 18_446_744_073_709_551_616.0;
        if floor > fpr * 0.01 {
            HashKind::Xxh3_128
        } else {
            HashKind::Xxh3_64
        }
    }
}

/// Seed of the first RedisBloom Bloom hash (`MurmurHash64A(item, 0xc6a4a7935bd1e995)`).
pub const REDISBLOOM_SEED: u64 = 0xc6a4_a793_5bd1_e995;

/// A hash function together with its seed: everything needed to reproduce a filter's hashing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hasher {
    kind: HashKind,
    seed: u64,
    /// High half `k1` of a 128-bit SipHash key (0 for every other kind).
    key_hi: u64,
}

impl Default for Hasher {
    fn default() -> Self {
        Hasher::new(HashKind::Xxh3_64, 0)
    }
}

impl Hasher {
    /// A hasher of the given kind and seed.
    pub const fn new(kind: HashKind, seed: u64) -> Self {
        Hasher { kind, seed, key_hi: 0 }
    }

    /// SipHash-2-4 keyed with the 128-bit key `(k0, k1)` (BIP-158's item hash). The header seed
    /// is `k0`; [`Hasher::key_hi`] returns `k1`.
    pub const fn sip24(k0: u64, k1: u64) -> Self {
        Hasher { kind: HashKind::SipHash24, seed: k0, key_hi: k1 }
    }

    /// The high half `k1` of a SipHash key (0 for the other kinds).
    pub const fn key_hi(&self) -> u64 {
        self.key_hi
    }

    /// The hash function.
    pub const fn kind(&self) -> HashKind {
        self.kind
    }

    /// The seed recorded in the file header.
    pub const fn seed(&self) -> u64 {
        self.seed
    }

    /// The 64-bit hash of `bytes`: what [`crate::Filter::contains_hash`] expects for the same item.
    #[inline(always)]
    pub fn hash64(&self, bytes: &[u8]) -> u64 {
        self.digest(bytes).h1
    }

    /// [`Hasher::digest`] with the default kind (XXH3-64) inlined at the call site: the same
    /// bits, but the hot query paths of the filters that use it pay neither the call nor the
    /// dispatch over the other kinds (measured with `benches/table.rs`).
    #[inline(always)]
    pub(crate) fn digest_inline(&self, bytes: &[u8]) -> Digest {
        if self.kind == HashKind::Xxh3_64 {
            Digest::from_u64(xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.seed))
        } else {
            self.digest(bytes)
        }
    }

    /// The digest of `bytes` from which a filter derives its probe positions.
    ///
    /// The default kind (XXH3-64) is inlined into the caller, so that for a key of known length
    /// (an 8-byte integer image, a fixed-size array) XXH3's length dispatch folds away and the
    /// hash overlaps with the surrounding probes; the other kinds take an out-of-line call. (No
    /// speed-up could be separated from the noise of the shared benchmark machine; the change
    /// removes a call and the length branches from every query, see `docs/BENCHMARKS.md`.)
    #[inline(always)]
    pub fn digest(&self, bytes: &[u8]) -> Digest {
        if self.kind == HashKind::Xxh3_64 {
            return Digest::from_u64(xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.seed));
        }
        self.digest_other(bytes)
    }

    #[inline(never)]
    fn digest_other(&self, bytes: &[u8]) -> Digest {
        match self.kind {
            HashKind::Xxh3_64 => Digest::from_u64(xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.seed)),
            HashKind::Xxh3_128 => {
                let h = xxhash_rust::xxh3::xxh3_128_with_seed(bytes, self.seed);
                Digest { h1: h as u64, h2: (h >> 64) as u64 }
            }
            HashKind::Xxh64 => Digest::from_u64(xxhash_rust::xxh64::xxh64(bytes, self.seed)),
            HashKind::Murmur64A => {
                let a = murmur64a(bytes, REDISBLOOM_SEED);
                Digest { h1: a, h2: murmur64a(bytes, a) }
            }
            HashKind::SipHash24 => Digest::from_u64(sip24(self.seed, self.key_hi, bytes)),
            HashKind::Murmur3_128 => {
                let (h1, h2) = murmur3_x64_128(bytes, self.seed as u32);
                Digest { h1, h2 }
            }
        }
    }
}

/// Two 64-bit hash words from which a filter derives its probe positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Digest {
    /// First word: selects the block (blocked filters) or the first probe (classic Bloom).
    pub h1: u64,
    /// Second word: the step of double hashing, or the in-block positions.
    pub h2: u64,
}

impl Digest {
    /// Expands a caller-supplied 64-bit hash into a digest.
    ///
    /// `h2` is a bijective remix of `h1` (rotate, multiply by an odd constant, xor-shift), so
    /// well-distributed 64-bit hashes give well-distributed, practically uncorrelated words.
    #[inline]
    pub const fn from_u64(h: u64) -> Digest {
        let mut x = h.rotate_left(32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^= x >> 29;
        Digest { h1: h, h2: x }
    }
}

/// Maps a uniform 64-bit value to `0..n` without division (Lemire, "Fast random integer
/// generation in an interval", 2019).
#[inline(always)]
pub const fn fastrange(x: u64, n: u64) -> u64 {
    ((x as u128 * n as u128) >> 64) as u64
}

/// Austin Appleby's MurmurHash64A (see `shared/spec/redisbloom.md` §4.1).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("chunks_exact(8) yields 8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (j, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * j);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// SipHash-2-4 of `data` under the 128-bit key `(k0, k1)` (`k0` = key bytes 0..8 read
/// little-endian, `k1` = bytes 8..16).
///
/// Aumasson & Bernstein, "SipHash: a fast short-input PRF", INDOCRYPT 2012: four 64-bit state words
/// initialised from the key and the constants `"somepseudorandomlygeneratedbytes"`, two SipRounds
/// per 8-byte little-endian message word, the final word carrying the message length in its top
/// byte, four SipRounds of finalisation. BIP-158 hashes block-filter items with it.
pub fn sip24(k0: u64, k1: u64, data: &[u8]) -> u64 {
    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13);
        v[1] ^= v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16);
        v[3] ^= v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21);
        v[3] ^= v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17);
        v[1] ^= v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let m = u64::from_le_bytes(w.try_into().expect("chunks_exact(8) yields 8 bytes"));
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    let mut last = (data.len() as u64) << 56;
    for (j, &b) in words.remainder().iter().enumerate() {
        last |= (b as u64) << (8 * j);
    }
    v[3] ^= last;
    round(&mut v);
    round(&mut v);
    v[0] ^= last;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// Austin Appleby's 32-bit MurmurHash2, used only by legacy RedisBloom filters (spec §4.2).
pub fn murmur2_32(key: &[u8], seed: u32) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = seed ^ key.len() as u32;
    let mut blocks = key.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes(block.try_into().expect("chunks_exact(4) yields 4 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        if tail.len() >= 3 {
            h ^= (tail[2] as u32) << 16;
        }
        if tail.len() >= 2 {
            h ^= (tail[1] as u32) << 8;
        }
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// MurmurHash3_x64_128 (Austin Appleby, public domain reference `MurmurHash3.cpp`): two 64-bit
/// lanes over 16-byte little-endian blocks, the tail mixed into both lanes, then `fmix64`.
///
/// Returns `(h1, h2)`; the 16-byte digest is `h1.to_le_bytes() ‖ h2.to_le_bytes()`, which is what
/// Guava's `Hashing.murmur3_128(seed)` returns (`asBytes()`) for the same input bytes. Guava's
/// Bloom filters ([`crate::compat::guava`]) hash with seed 0. The seed is 32 bits as in the
/// reference code (it initialises both lanes, zero-extended).
pub fn murmur3_x64_128(data: &[u8], seed: u32) -> (u64, u64) {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    #[inline(always)]
    fn fmix64(mut k: u64) -> u64 {
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^= k >> 33;
        k
    }
    #[inline(always)]
    fn mix_k1(k1: u64) -> u64 {
        k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2)
    }
    #[inline(always)]
    fn mix_k2(k2: u64) -> u64 {
        k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1)
    }
    let mut h1 = seed as u64;
    let mut h2 = seed as u64;
    let mut blocks = data.chunks_exact(16);
    for b in &mut blocks {
        let k1 = u64::from_le_bytes(b[..8].try_into().expect("16-byte block"));
        let k2 = u64::from_le_bytes(b[8..].try_into().expect("16-byte block"));
        h1 ^= mix_k1(k1);
        h1 = h1.rotate_left(27).wrapping_add(h2).wrapping_mul(5).wrapping_add(0x52dc_e729);
        h2 ^= mix_k2(k2);
        h2 = h2.rotate_left(31).wrapping_add(h1).wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        // Bytes 0..8 of the tail form k1, bytes 8..15 form k2 (little-endian, zero-padded).
        let mut buf = [0u8; 16];
        buf[..tail.len()].copy_from_slice(tail);
        if tail.len() > 8 {
            h2 ^= mix_k2(u64::from_le_bytes(buf[8..].try_into().expect("8 bytes")));
        }
        h1 ^= mix_k1(u64::from_le_bytes(buf[..8].try_into().expect("8 bytes")));
    }
    let len = data.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    (h1, h2)
}

/// XXH3-64's key for inputs of 4 to 8 bytes: `(secret[8..16] ^ secret[16..24]) - seed'`, with
/// `seed' = seed ^ (bswap32(seed) << 32)` (XXH3 specification, `XXH3_len_4to8_64b`; the default
/// secret's words give the constant). It depends only on the seed, so a filter computes it once.
pub(crate) const fn xxh3_len4to8_key(seed: u64) -> u64 {
    let s = seed ^ (((seed as u32).swap_bytes() as u64) << 32);
    0xc73a_b174_c5ec_d5a2u64.wrapping_sub(s)
}

/// XXH3-64 of an input of 4 to 8 bytes whose first and last 4 bytes (little-endian) are `first`
/// and `last`, given [`xxh3_len4to8_key`] of the seed: the same value as `xxh3_64_with_seed`
/// (tested), without recomputing the seed-dependent key on every call.
#[inline(always)]
pub(crate) const fn xxh3_len4to8(first: u32, last: u32, len: u64, key: u64) -> u64 {
    let mut v = ((last as u64).wrapping_add((first as u64) << 32)) ^ key;
    // XXH3's "rrmxmx" finaliser.
    v ^= v.rotate_left(49) ^ v.rotate_left(24);
    v = v.wrapping_mul(0x9fb2_1c65_1e98_df25);
    v ^= (v >> 35).wrapping_add(len);
    v = v.wrapping_mul(0x9fb2_1c65_1e98_df25);
    v ^ (v >> 28)
}

/// XXH3-64 (with `seed`) of an input of 17 to 32 bytes, the same value as `xxh3_64_with_seed`
/// (tested for every length), computed from 4-byte loads only (XXH3 specification,
/// `XXH3_len_17to128_64b`, its first two `mix16B` steps, which are all of it up to 32 bytes).
///
/// Why 4-byte loads: a key built just before the call (a `[u8; 20]` returned by value, a string
/// formatted into a stack buffer) sits in the store buffer as, e.g., one 16-byte and one 4-byte
/// store. XXH3's 8-byte load of the last 8 bytes spans both, so store-to-load forwarding fails
/// and the load waits until the stores retire, i.e. behind the previous operation's cache
/// misses: consecutive queries then no longer overlap. Loads of 4 bytes at 4-aligned offsets fit
/// inside one store for the usual ways of writing 20 bytes (16 + 4, 8 + 8 + 4, two overlapping
/// 16s). Measured with `benches/table.rs` (str20 keys, see `docs/BENCHMARKS.md`).
#[inline(always)]
pub(crate) fn xxh3_len17to32(bytes: &[u8], seed: u64) -> u64 {
    debug_assert!((17..=32).contains(&bytes.len()));
    #[inline(always)]
    fn r32(b: &[u8], o: usize) -> u64 {
        u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as u64
    }
    #[inline(always)]
    fn mix16(b: &[u8], o: usize, s0: u64, s1: u64) -> u64 {
        let lo = (r32(b, o) | r32(b, o + 4) << 32) ^ s0;
        let hi = (r32(b, o + 8) | r32(b, o + 12) << 32) ^ s1;
        let p = lo as u128 * hi as u128;
        (p as u64) ^ ((p >> 64) as u64)
    }
    let n = bytes.len();
    // The default secret's first four little-endian words.
    const S: [u64; 4] =
        [0xbe4b_a423_396c_feb8, 0x1cad_21f7_2c81_017c, 0xdb97_9083_e96d_d4de, 0x1f67_b3b7_a4a4_4072];
    let acc = (n as u64)
        .wrapping_mul(0x9e37_79b1_85eb_ca87)
        .wrapping_add(mix16(bytes, 0, S[0].wrapping_add(seed), S[1].wrapping_sub(seed)))
        .wrapping_add(mix16(bytes, n - 16, S[2].wrapping_add(seed), S[3].wrapping_sub(seed)));
    // XXH3's avalanche.
    let mut h = acc ^ (acc >> 37);
    h = h.wrapping_mul(0x1656_6791_9e37_79f9);
    h ^ (h >> 32)
}

/// A [`Hasher`] with the per-seed constant of the default hash precomputed: the hot query and
/// insert paths of the Bloom-family filters hash through it. Same digests as
/// [`Hasher::digest`] (tested); for the default kind it hashes items of 17 to 32 bytes with
/// [`xxh3_len17to32`] (4-byte loads), and for items of 4 to 8 bytes (integer keys) it
/// skips the seed arithmetic XXH3 redoes on every call, a handful of instructions per query
/// (which matters for queries bound by how many fit in the CPU's reorder window, see
/// `docs/BENCHMARKS.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HotHasher {
    hasher: Hasher,
    /// [`xxh3_len4to8_key`] of the seed (meaningful only for [`HashKind::Xxh3_64`]).
    key4to8: u64,
}

impl HotHasher {
    /// Precomputes the constants of `hasher`.
    pub(crate) const fn new(hasher: Hasher) -> Self {
        HotHasher { hasher, key4to8: xxh3_len4to8_key(hasher.seed) }
    }

    /// The hasher.
    #[cfg(test)]
    pub(crate) const fn hasher(&self) -> Hasher {
        self.hasher
    }

    /// [`Hasher::digest`] of `bytes` (the length test folds away when it is known at compile
    /// time, as for `[u8; 8]` and `[u8; 4]` keys).
    #[inline(always)]
    pub(crate) fn digest(&self, bytes: &[u8]) -> Digest {
        if self.hasher.kind == HashKind::Xxh3_64 && (4..=8).contains(&bytes.len()) {
            let n = bytes.len();
            let first = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            let last = u32::from_le_bytes([bytes[n - 4], bytes[n - 3], bytes[n - 2], bytes[n - 1]]);
            return Digest::from_u64(xxh3_len4to8(first, last, n as u64, self.key4to8));
        }
        if self.hasher.kind == HashKind::Xxh3_64 && (17..=32).contains(&bytes.len()) {
            // Same bits with 4-byte loads: no stall on a key just written to the stack.
            return Digest::from_u64(xxh3_len17to32(bytes, self.hasher.seed));
        }
        self.hasher.digest(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh3_len17to32_matches_xxh3() {
        let mut x = 0x0123_4567_89ab_cdefu64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for len in 17..=32 {
            for _ in 0..2_000 {
                let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                for seed in [0, 1, next(), u64::MAX] {
                    assert_eq!(
                        xxh3_len17to32(&bytes, seed),
                        xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, seed),
                        "len {len} seed {seed}"
                    );
                }
            }
        }
    }

    #[test]
    fn murmur64a_empty_is_zero() {
        assert_eq!(murmur64a(b"", 0), 0);
    }

    #[test]
    fn murmur64a_matches_redisbloom_fixtures() {
        // Vectors captured from RedisBloom: the crate's copy of the specification's
        // fixtures/murmur64a.json (tests/redisbloom_fixtures.rs checks that the copy is equal).
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/redisbloom/murmur64a.json");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut checked = 0;
        for entry in text.split("\"input_hex\"").skip(1) {
            let field = |name: &str| -> Option<String> {
                let at = entry.find(&format!("\"{name}\""))?;
                let rest = &entry[at + name.len() + 2..];
                let start = rest.find('"')? + 1;
                let end = start + rest[start..].find('"')?;
                Some(rest[start..end].to_string())
            };
            let start = entry.find('"').unwrap() + 1;
            let end = start + entry[start..].find('"').unwrap();
            let hex = &entry[start..end];
            let bytes: Vec<u8> =
                (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            let parse = |s: String| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            let h0 = parse(field("murmur64a_seed_0").unwrap());
            let a = parse(field("murmur64a_seed_c6a4a7935bd1e995").unwrap());
            let b = parse(field("bloom_b").unwrap());
            assert_eq!(murmur64a(&bytes, 0), h0, "seed 0, input {hex}");
            assert_eq!(murmur64a(&bytes, REDISBLOOM_SEED), a, "bloom a, input {hex}");
            let d = Hasher::new(HashKind::Murmur64A, 0).digest(&bytes);
            assert_eq!((d.h1, d.h2), (a, b), "bloom chain, input {hex}");
            checked += 1;
        }
        assert_eq!(checked, 28, "fixture file should hold 28 vectors");
    }

    #[test]
    fn sip24_reference_vectors() {
        // Aumasson & Bernstein's reference vectors (the paper's appendix and `vectors.h` of the
        // reference implementation): key = bytes 00..0f, message i = bytes 00..i-1; the outputs
        // are the 8 little-endian bytes of the u64.
        let (k0, k1) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        let msg: Vec<u8> = (0u8..64).collect();
        let expect: [(usize, [u8; 8]); 5] = [
            (0, [0x31, 0x0e, 0x0e, 0xdd, 0x47, 0xdb, 0x6f, 0x72]),
            (1, [0xfd, 0x67, 0xdc, 0x93, 0xc5, 0x39, 0xf8, 0x74]),
            (7, [0x37, 0xd1, 0x01, 0x8b, 0xf5, 0x00, 0x02, 0xab]),
            (8, [0x62, 0x24, 0x93, 0x9a, 0x79, 0xf5, 0xf5, 0x93]),
            (15, [0xe5, 0x45, 0xbe, 0x49, 0x61, 0xca, 0x29, 0xa1]),
        ];
        for (len, bytes) in expect {
            assert_eq!(sip24(k0, k1, &msg[..len]), u64::from_le_bytes(bytes), "length {len}");
        }
        let h = Hasher::sip24(k0, k1);
        assert_eq!(h.hash64(&msg[..15]), 0xa129_ca61_49be_45e5);
        assert_eq!((h.seed(), h.key_hi()), (k0, k1));
        assert_eq!(HashKind::from_id(5).unwrap(), HashKind::SipHash24);
    }

    #[test]
    fn hot_hasher_matches_xxh3_and_every_kind() {
        let mut st = 0x1234_5678u64;
        let mut next = || {
            st = st.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = st;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let mut seeds = vec![0u64, 1, u64::MAX, 0x8000_0000, 0xffff_ffff];
        seeds.extend((0..20).map(|_| next()));
        for seed in seeds {
            for kind in [HashKind::Xxh3_64, HashKind::Xxh3_128, HashKind::Xxh64, HashKind::Murmur64A] {
                let h = Hasher::new(kind, seed);
                let hot = HotHasher::new(h);
                assert_eq!(hot.hasher(), h);
                for len in 0..=24 {
                    for _ in 0..20 {
                        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                        assert_eq!(hot.digest(&bytes), h.digest(&bytes), "{kind:?} seed {seed} len {len}");
                    }
                }
                let w = next();
                assert_eq!(hot.digest(&w.to_le_bytes()), h.digest(&w.to_le_bytes()));
                assert_eq!(hot.digest(&(w as u32).to_le_bytes()), h.digest(&(w as u32).to_le_bytes()));
            }
            assert_eq!(
                HotHasher::new(Hasher::new(HashKind::Xxh3_64, seed)).digest(b"12345678").h1,
                xxhash_rust::xxh3::xxh3_64_with_seed(b"12345678", seed)
            );
        }
    }

    #[test]
    fn xxh3_is_stable() {
        // Pinned values: a change here breaks every file on disk.
        assert_eq!(Hasher::default().hash64(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(Hasher::default().hash64(b"hello"), xxhash_rust::xxh3::xxh3_64(b"hello"));
    }

    #[test]
    fn hash_ids_round_trip() {
        for k in [HashKind::Xxh3_64, HashKind::Xxh3_128, HashKind::Xxh64, HashKind::Murmur64A] {
            assert_eq!(HashKind::from_id(k.id()).unwrap(), k);
        }
        assert_eq!(HashKind::from_id(0), Err(FormatError::UnknownHash(0)));
        assert_eq!(HashKind::from_id(200), Err(FormatError::UnknownHash(200)));
    }

    #[test]
    fn auto_128_bit_only_for_huge_sets() {
        assert_eq!(HashKind::for_target(1_000_000_000, 0.01), HashKind::Xxh3_64);
        assert_eq!(HashKind::for_target(1 << 40, 1e-9), HashKind::Xxh3_128);
    }

    #[test]
    fn fastrange_stays_in_range() {
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            for x in [0u64, 1, u64::MAX / 2, u64::MAX] {
                assert!(fastrange(x, n) < n);
            }
        }
    }
    #[test]
    fn murmur3_x64_128_reference_vectors() {
        // Produced by the real Guava 31.1 (`Hashing.murmur3_128().hashBytes(input).asBytes()`),
        // see crates/sift-cli/tests/guava/murmur3_128.tsv: input bytes 00 01 .. (len-1), and text.
        let hex = |(h1, h2): (u64, u64)| {
            let mut s = String::new();
            for b in h1.to_le_bytes().iter().chain(h2.to_le_bytes().iter()) {
                s.push_str(&format!("{b:02x}"));
            }
            s
        };
        let seq: Vec<u8> = (0u8..=255).collect();
        let cases: [(&[u8], &str); 8] = [
            (&seq[..0], "00000000000000000000000000000000"),
            (&seq[..1], "b55cff6ee5ab10468335f878aa2d6251"),
            (&seq[..2], "4c26ab8dc5f5b37c44e0c26e32013cf0"),
            (&seq[..8], "c82f8ed6bde1a747c7dc31ec02eee660"),
            (&seq[..15], "e92549fd98152347e97dc688ee6d84cd"),
            (&seq[..16], "303f9091b524494445e82f76566490ab"),
            (&seq[..17], "0ec2e79f0ff4765c24a8da9e6b025fc1"),
            (b"The quick brown fox jumps over the lazy dog", "6c1b07bc7bbc4be347939ac4a93c437a"),
        ];
        for (input, want) in cases {
            assert_eq!(hex(murmur3_x64_128(input, 0)), want, "input of {} bytes", input.len());
        }
        assert_eq!(hex(murmur3_x64_128(&seq, 0)), "b9126fdc13c3991c1ecc34ab7f07d670");
    }
}
