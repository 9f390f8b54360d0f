//! Feeds arbitrary bytes to the file decoder and to every filter's `from_bytes`.
//!
//! Whatever the input, nothing may panic, allocate absurdly or read out of bounds; a filter
//! that decodes must answer queries and re-encode to bytes that decode again.
//!
//! Seeds: `fuzz/seeds/decode/` (the golden files and hand-made headers, written by
//! `SIFT_BLESS=1 cargo test -p sift-filters --test conformance`). Run with a nightly toolchain:
//! `cargo +nightly fuzz run decode fuzz/corpus/decode fuzz/seeds/decode`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sift::prelude::*;

/// Decodes `data` as `F`; if that succeeds, uses the filter as a caller would.
fn try_decode<F: Filter + Persist>(data: &[u8]) {
    let Ok(f) = F::from_bytes(data) else { return };
    let _ = (f.len(), f.is_empty(), f.size_in_bytes(), f.expected_fpr(), f.hasher());
    for probe in [&b""[..], b"a", b"sift", &data[..data.len().min(24)]] {
        let _ = f.contains(probe);
    }
    let _ = f.contains_hash(0x9e37_79b9_7f4a_7c15);
    let _ = f.contains_many(&[b"x", b"y"]);
    let again = f.to_bytes();
    assert!(F::from_bytes(&again).is_ok(), "a decoded filter re-encodes to bytes it cannot decode");
}

fuzz_target!(|data: &[u8]| {
    decode_all(data);
    // The fuzzer cannot forge a CRC32C, so without help it never gets past the checksum: decode a
    // copy with the trailer recomputed too, which reaches every family's parameter validation.
    if data.len() >= 4 {
        let mut fixed = data.to_vec();
        let end = fixed.len() - 4;
        let crc = crc32c::crc32c(&fixed[..end]);
        fixed[end..].copy_from_slice(&crc.to_le_bytes());
        decode_all(&fixed);
    }
});

fn decode_all(data: &[u8]) {
    // The format layer alone: structure, then checksum.
    if let Ok(raw) = sift::format::decode(data) {
        let _ = (raw.kind(), raw.kind_code(), raw.hasher(), raw.params(), raw.payload());
        let _ = raw.verify();
        let _ = raw.param_reader().finish();
    }

    // Every family with a file format: one line each.
    try_decode::<sift::Bloom>(data);
    try_decode::<sift::BlockedBloom>(data);
    try_decode::<sift::SplitBlockBloom>(data);
    try_decode::<sift::CountingBloom>(data);
    try_decode::<sift::ScalableBloom>(data);
    try_decode::<sift::AgingBloom>(data);
    try_decode::<sift::TimeLimitedBloom>(data);
    try_decode::<sift::ScalableCuckoo>(data);
    try_decode::<sift::Cuckoo>(data);
    try_decode::<sift::Quotient>(data);
    try_decode::<sift::Xor8>(data);
    try_decode::<sift::BinaryFuse8>(data);
    try_decode::<sift::BinaryFuse16>(data);
    try_decode::<sift::Gcs>(data);
    // Other systems' filters carried in sift files (no `Filter` trait: their own queries).
    if let Ok(f) = sift::compat::redisbloom::BloomChain::from_bytes(data) {
        let _ = (f.contains(b"a"), f.info(), f.debug_lines());
        assert!(sift::compat::redisbloom::BloomChain::from_bytes(&f.to_bytes()).is_ok());
    }
    if let Ok(f) = sift::compat::redisbloom::CuckooFilter::from_bytes(data) {
        let _ = (f.contains(b"a"), f.info(), f.debug_line());
        assert!(sift::compat::redisbloom::CuckooFilter::from_bytes(&f.to_bytes()).is_ok());
    }
    if let Ok(f) = sift::compat::guava::GuavaBloom::from_bytes(data) {
        let _ = (f.might_contain(b"a"), f.expected_fpp());
        assert!(sift::compat::guava::GuavaBloom::from_bytes(&f.to_bytes()).is_ok());
    }
    let _ = sift::compat::guava::GuavaBloom::read_from(data);
}
