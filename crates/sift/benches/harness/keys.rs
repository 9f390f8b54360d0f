//! The benchmark keys: `u64` and 20-byte ASCII strings, members and non-members (disjoint by
//! construction), the same stream in every program.

use std::hash::Hash;

/// A benchmark key type. Hash-based peers hash the key itself (a `u64` goes through
/// `Hasher::write_u64`, their fast path); sift and sbbf-rs hash its byte image with XXH3.
pub trait Key: Hash + Copy + Send + Sync + 'static {
    /// The byte image handed to byte-oriented APIs.
    type Bytes: AsRef<[u8]> + Clone;
    /// Name used in group and table titles.
    const NAME: &'static str;
    /// The byte image of this key.
    fn bytes(&self) -> Self::Bytes;
    /// The byte images of `keys`, for APIs that take a slice of items: borrowed when a key is its
    /// own byte image (what a caller holding such keys passes), a copy otherwise (`u64`: the
    /// `to_le_bytes` of each key, which is then part of the timed work).
    fn images(keys: &[Self]) -> std::borrow::Cow<'_, [Self::Bytes]> {
        std::borrow::Cow::Owned(keys.iter().map(|k| k.bytes()).collect())
    }
    /// Key number `i` of a stream; distinct `i` give distinct keys.
    fn nth(i: u64) -> Self;
    /// XXH3-64 (seed 0) of the byte image: sift's default hash, handed to peers that take a
    /// precomputed hash.
    #[inline(always)]
    fn xxh3(&self) -> u64 {
        xxhash_rust::xxh3::xxh3_64(self.bytes().as_ref())
    }
}

/// SplitMix64's finaliser: a bijection of `u64`, so distinct inputs give distinct outputs.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Key for u64 {
    type Bytes = [u8; 8];
    const NAME: &'static str = "u64";
    #[inline(always)]
    fn bytes(&self) -> [u8; 8] {
        self.to_le_bytes()
    }
    fn nth(i: u64) -> u64 {
        mix64(i)
    }
}

/// A 20-byte ASCII string key (lowercase letters and digits), stored inline.
pub type Str20 = [u8; 20];

impl Key for Str20 {
    type Bytes = [u8; 20];
    const NAME: &'static str = "str20";
    #[inline(always)]
    fn bytes(&self) -> [u8; 20] {
        *self
    }
    fn images(keys: &[Self]) -> std::borrow::Cow<'_, [[u8; 20]]> {
        std::borrow::Cow::Borrowed(keys)
    }
    fn nth(i: u64) -> Str20 {
        const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        // 20 symbols of 36 from three mixed words: ~103 bits, so two keys collide with
        // probability ~2^-103, negligible even for 10^9 keys.
        let words = [mix64(i), mix64(i ^ 0x5555_5555_5555_5555), mix64(i ^ 0xaaaa_aaaa_aaaa_aaaa)];
        let mut out = [0u8; 20];
        for (j, b) in out.iter_mut().enumerate() {
            let w = words[j / 7] >> ((j % 7) * 9);
            *b = ALPHABET[(w & 0x1ff) as usize % 36];
        }
        out
    }
}

/// Members are keys `0..n` of the stream, non-members keys `2^63..2^63+m`: the two sets are
/// disjoint by construction (for `u64` exactly, for `Str20` up to a ~2^-103 collision).
pub fn members<K: Key>(n: usize) -> Vec<K> {
    (0..n as u64).map(K::nth).collect()
}

/// `m` keys that were never inserted (see [`members`]).
pub fn non_members<K: Key>(m: usize) -> Vec<K> {
    (0..m as u64).map(|i| K::nth(i | 1 << 63)).collect()
}

/// The key types on a command line (`--keys u64|str20|both`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// [`u64`] keys.
    U64,
    /// [`Str20`] keys.
    Str20,
}

impl KeyKind {
    /// `u64`, `str20` or `both`.
    pub fn parse_list(s: &str) -> Result<Vec<KeyKind>, String> {
        match s {
            "u64" => Ok(vec![KeyKind::U64]),
            "str20" => Ok(vec![KeyKind::Str20]),
            "both" => Ok(vec![KeyKind::U64, KeyKind::Str20]),
            other => Err(format!("--keys {other}: expected u64, str20 or both")),
        }
    }
}
