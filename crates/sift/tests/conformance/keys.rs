//! Deterministic keys: members and non-members that are disjoint by construction.
//!
//! A 20-byte key is `[tag][stream: 3 bytes LE][index: 8 bytes LE][splitmix64(stream, index): 8 bytes LE]`.
//! Members carry tag `b'M'`, non-members `b'N'`, so no non-member can equal a member, whatever the
//! stream and index. The last 8 bytes only add entropy (real keys are not counters).
//!
//! A 64-bit key (for the `*_hash` paths) is `splitmix64` of `[class: 1 bit][stream: 23 bits][index: 40 bits]`;
//! `splitmix64`'s finaliser is a bijection of `u64`, so distinct inputs give distinct keys and the
//! member class (0) and non-member class (1) never meet.

/// A 20-byte key.
pub type Key = [u8; 20];

const MEMBER: u8 = b'M';
const NON_MEMBER: u8 = b'N';

/// The splitmix64 finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): a bijection of `u64` with good avalanche.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key(tag: u8, stream: u32, index: u64) -> Key {
    assert!(stream < 1 << 23, "stream fits in 23 bits");
    let mut k = [0u8; 20];
    k[0] = tag;
    k[1..4].copy_from_slice(&stream.to_le_bytes()[..3]);
    k[4..12].copy_from_slice(&index.to_le_bytes());
    let salt = splitmix64(((stream as u64) << 40) ^ index ^ ((tag as u64) << 63));
    k[12..20].copy_from_slice(&salt.to_le_bytes());
    k
}

/// The `i`-th member key of `stream`.
pub fn member(stream: u32, i: u64) -> Key {
    key(MEMBER, stream, i)
}

/// The `i`-th non-member key of `stream`; never equal to any member key.
pub fn non_member(stream: u32, i: u64) -> Key {
    key(NON_MEMBER, stream, i)
}

/// `count` member keys of `stream`.
pub fn members(stream: u32, count: usize) -> Vec<Key> {
    (0..count as u64).map(|i| member(stream, i)).collect()
}

fn hash_key(class: u64, stream: u32, index: u64) -> u64 {
    assert!(stream < 1 << 23 && index < 1 << 40);
    splitmix64((class << 63) | ((stream as u64) << 40) | index)
}

/// `count` 64-bit member hashes of `stream`.
pub fn member_hashes(stream: u32, count: usize) -> Vec<u64> {
    (0..count as u64).map(|i| hash_key(0, stream, i)).collect()
}

/// The `i`-th 64-bit non-member hash of `stream`.
pub fn non_member_hash(stream: u32, i: u64) -> u64 {
    hash_key(1, stream, i)
}

/// The golden-file keys: `golden-0000000000000` ... (20 ASCII bytes each).
pub fn golden_members(count: usize) -> Vec<Key> {
    (0..count).map(|i| ascii_key("golden", i)).collect()
}

/// The golden-file non-member queries: `absent-0000000000000` ...
pub fn golden_non_members(count: usize) -> Vec<Key> {
    (0..count).map(|i| ascii_key("absent", i)).collect()
}

fn ascii_key(prefix: &str, i: usize) -> Key {
    let s = format!("{prefix}-{i:013}");
    s.as_bytes().try_into().expect("20 ASCII bytes")
}

#[test]
fn keys_are_disjoint_and_distinct() {
    use std::collections::HashSet;
    let mut seen = HashSet::new();
    for s in 0..3 {
        for i in 0..10_000 {
            assert!(seen.insert(member(s, i)));
            assert!(seen.insert(non_member(s, i)));
        }
    }
    let mut h = HashSet::new();
    for s in 0..3 {
        for x in member_hashes(s, 10_000) {
            assert!(h.insert(x));
        }
        for i in 0..10_000 {
            assert!(h.insert(non_member_hash(s, i)));
        }
    }
    assert_eq!(&golden_members(1)[0], b"golden-0000000000000");
}
