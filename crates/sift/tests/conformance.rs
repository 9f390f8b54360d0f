//! The conformance suite: the same checks on every filter family.
//!
//! Run: `cargo test -p sift-filters --test conformance` (add `-- --nocapture` to see the measured
//! false-positive rates). Regenerate the golden files and fuzz seeds: `SIFT_BLESS=1 cargo test
//! -p sift-filters --test conformance` (see `tests/fixtures/README.md`).
//!
//! Each family is ONE line at the bottom of this file: `conformance!(name: Type = descriptor);`
//! where the descriptor says how to construct it ([`family::Family::dynamic`] for
//! `new(n, p)` + `insert`, [`family::Family::built`] for static filters) and which optional
//! capabilities to check (`.removable()`, `.union(..)`, `.exact_fpr(..)`, `.with_eq()`,
//! `.fpr_targets(..)`, ...). The macro expands to one test module per family with the tests
//! listed in it; each test is a generic function of `conformance/suite.rs`.

#[path = "conformance/family.rs"]
mod family;
#[path = "conformance/keys.rs"]
mod keys;
#[path = "conformance/stats.rs"]
mod stats;
#[path = "conformance/suite.rs"]
mod suite;
#[path = "conformance/window.rs"]
mod window;

#[allow(unused_imports)] // each family module brings its own type in by path
use family::Family;
#[allow(unused_imports)]
use sift::prelude::*;

/// `conformance!(module_name: FilterType = family_descriptor_expression $(; extra test items)*);`
macro_rules! conformance {
    ($name:ident : $ty:ty = $family:expr $(; $($extra:item)*)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn family() -> Family<$ty> {
                $family.named(stringify!($name))
            }

            #[test]
            fn no_false_negatives() {
                suite::no_false_negatives(&family());
            }
            #[test]
            fn operations() {
                suite::operations(&family());
            }
            #[test]
            fn fpr_n1e3() {
                suite::fpr_check(&family(), 1_000);
            }
            #[test]
            fn fpr_n1e5() {
                suite::fpr_check(&family(), 100_000);
            }
            #[test]
            fn fpr_n1e6() {
                suite::fpr_check(&family(), 1_000_000);
            }
            #[test]
            fn round_trip() {
                suite::round_trip(&family());
            }
            #[test]
            fn corruption() {
                suite::corruption(&family());
            }
            #[test]
            fn random_bytes() {
                suite::random_bytes(&family());
            }
            #[test]
            fn bad_parameters() {
                suite::bad_parameters(&family());
            }
            #[test]
            fn golden() {
                suite::golden(&family());
            }
            #[test]
            fn decode_smoke() {
                suite::decode_smoke(&family());
            }

            $($($extra)*)?
        }
    };
}

// ---------------------------------------------------------------------------------------------
// The families: one line each. A family that is not `PartialEq` drops `.with_eq()`; one with a
// fixed rate lists it in `.fpr_targets(..)`; tolerances: `.model_error(..)`, `.target_slack(..)`,
// `.sizing_floor(..)`. Also add the type to `fuzz/fuzz_targets/decode.rs` (one line).
// ---------------------------------------------------------------------------------------------

conformance!(bloom: sift::Bloom = Family::dynamic(sift::Bloom::new)
    .exact_fpr(sift::Bloom::current_fpr)
    .union(sift::Bloom::union)
    .with_eq();

    /// A second golden file pinning a non-default hash id and seed in the header.
    #[test]
    fn golden_xxh3_128_seed() {
        let hasher = sift::Hasher::new(sift::HashKind::Xxh3_128, 0x5eed_0000_0000_002a);
        let mut f = sift::Bloom::with_hasher(suite::GOLDEN_MEMBERS, 0.01, hasher).unwrap();
        for k in keys::golden_members(suite::GOLDEN_MEMBERS) {
            f.insert(k);
        }
        suite::golden_file("bloom_xxh3_128_seed", &f);
    }

    /// Intersection keeps what both operands hold.
    #[test]
    fn intersection_keeps_common_members() {
        let common = keys::members(20, 2000);
        let mut a = family().build(10_000, 0.01, &common).unwrap();
        let mut b = family().build(10_000, 0.01, &common).unwrap();
        for k in keys::members(21, 2000) {
            a.insert(k);
        }
        for k in keys::members(22, 2000) {
            b.insert(k);
        }
        a.intersect(&b).unwrap();
        assert!(common.iter().all(|k| a.contains(k)));
    }
);

/// Hand-made seeds for the decoder fuzz target (`fuzz/seeds/decode/`): for every kind code a
/// structurally valid file with an empty parameter block and payload (so the fuzzer starts past
/// the header checks of every family), a header with an unknown version, and bare magic.
/// Written with `SIFT_BLESS=1`; otherwise the committed seeds must match and decode as stated.
#[test]
fn handmade_fuzz_seeds() {
    use sift::format::{decode, FilterKind};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/decode");
    let mut seeds: Vec<(String, Vec<u8>)> = FilterKind::ALL
        .into_iter()
        .map(|k| (format!("empty-{}.sift", k.name()), suite::synthetic_file(k, 1, 0, 0, &[])))
        .collect();
    let mut newer = suite::synthetic_file(FilterKind::Bloom, 1, 0, 0, &[]);
    newer[4] = 2;
    suite::fix_crc(&mut newer);
    seeds.push(("version-2.sift".into(), newer));
    seeds.push(("magic-only.sift".into(), b"SIFT".to_vec()));
    for (name, bytes) in &seeds {
        let path = dir.join(name);
        if suite::blessing() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(&committed, bytes, "{} differs from what the test generates", path.display());
        let decoded = decode(bytes).and_then(|r| r.verify().map(|()| r));
        match name.as_str() {
            "version-2.sift" => assert_eq!(
                decoded.unwrap_err(),
                sift::FormatError::UnsupportedVersion { expected: 1, got: 2 }
            ),
            "magic-only.sift" => assert!(matches!(decoded, Err(sift::FormatError::Truncated { .. }))),
            _ => assert!(decoded.is_ok(), "{name}: {decoded:?}"),
        }
        // Structurally valid but empty: no family may accept a filter without parameters.
        assert!(sift::Bloom::from_bytes(bytes).is_err(), "{name} decoded as a Bloom filter");
    }
}

/// The test's own CRC32C (used to check trailers independently of the library) has the
/// standard check value of the Castagnoli CRC.
#[test]
fn crc32c_check_value() {
    assert_eq!(suite::crc32c(b"123456789"), 0xe306_9283);
}

// The fingerprint width is picked from p among 8, 12 and 16 bits: test at the rate of each width
// (8·2^-f, the bound `new` compares p against), not at rates between widths.
//
// Layout 1 (the one-multiply alternate bucket, written by the current version) has its own golden
// file, `cuckoo_weyl.sift`; `cuckoo.sift` holds layout 0 (the SplitMix64 alternate bucket and the
// random-walk insert of earlier versions), which is still read (test below).
conformance!(cuckoo_weyl: sift::Cuckoo = Family::dynamic(sift::Cuckoo::new)
    .removable()
    .with_eq()
    .fpr_targets(&[8.0 / 256.0, 8.0 / 4096.0, 8.0 / 65536.0])
    .repeat_headroom(1.25);

    /// `cuckoo.sift`, written with layout 0 by earlier versions, still decodes, answers every
    /// recorded query as recorded, re-encodes to exactly the same bytes (a layout-0 table stays
    /// layout 0: its fingerprints sit where *its* alternate-bucket function put them), and keeps
    /// working after inserts and removes.
    #[test]
    fn cuckoo_layout0_golden_still_decodes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let old = std::fs::read(dir.join("cuckoo.sift")).unwrap();
        assert_eq!(u32::from_le_bytes(old[32 + 44..32 + 48].try_into().unwrap()), 0, "layout 0");
        let mut f = sift::Cuckoo::from_bytes(&old).unwrap();
        suite::assert_recorded_answers(&dir.join("cuckoo.txt"), |key| f.contains(key));
        assert_eq!(f.to_bytes(), old, "layout 0 re-encodes to the same bytes");
        let members = keys::golden_members(suite::GOLDEN_MEMBERS);
        assert!(f.remove(members[0]));
        assert!(members[1..].iter().all(|k| f.contains(k)));
        f.try_insert(members[0]).unwrap();
        assert!(members.iter().all(|k| f.contains(k)));
        let again = sift::Cuckoo::from_bytes(&f.to_bytes()).unwrap();
        assert_eq!(again, f);
    }
);

// The rank-and-select layout (layout 1) has its own golden file, `quotient_rs.sift`;
// `quotient.sift` holds the 3-metadata-bit layout (layout 0) of earlier versions, which is still
// read (test below).
conformance!(quotient_rs: sift::Quotient = Family::dynamic(sift::Quotient::new).removable().with_eq();

    /// `quotient.sift`, written by the 3-metadata-bit quotient filter (layout 0) of earlier
    /// versions, still decodes and answers every recorded query as recorded; re-encoding writes
    /// the rank-and-select layout (layout 1), which decodes to the same filter, and that filter
    /// equals the one today's constructor builds from the same keys.
    #[test]
    fn quotient_classic_golden_still_decodes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let old = std::fs::read(dir.join("quotient.sift")).unwrap();
        assert_eq!(u32::from_le_bytes(old[32 + 12..32 + 16].try_into().unwrap()), 0, "layout 0");
        let f = sift::Quotient::from_bytes(&old).unwrap();
        suite::assert_recorded_answers(&dir.join("quotient.txt"), |key| f.contains(key));
        let again = sift::Quotient::from_bytes(&f.to_bytes()).unwrap();
        assert_eq!(again, f);
        let fresh = family()
            .build(suite::GOLDEN_MEMBERS, 0.01, &keys::golden_members(suite::GOLDEN_MEMBERS))
            .unwrap();
        assert_eq!(fresh, f);
    }
);

conformance!(blocked_bloom: sift::BlockedBloom = Family::dynamic(sift::BlockedBloom::new)
    .exact_fpr(sift::BlockedBloom::current_fpr)
    .union(sift::BlockedBloom::union)
    .with_eq());

// Same bits and file as BlockedBloom; inserted through `insert(&self)`.
conformance!(atomic_bloom: sift::AtomicBloom = Family::dynamic(sift::AtomicBloom::new));

// The geometric schedule of Almeida et al. (`ScalableBloom::new` before the first-share
// schedule existed): its golden file pins files with schedule id 0.
conformance!(scalable_bloom: sift::ScalableBloom =
    Family::dynamic(|n, p| sift::ScalableBloom::with_options(n, p, 2.0, 0.5)).with_eq());

// The default since: 80% of the FPR budget for the first layer (schedule id 1).
conformance!(scalable_bloom_first_share: sift::ScalableBloom =
    Family::dynamic(sift::ScalableBloom::new).with_eq());

// Growth by added cuckoo tables. The first table gets `p·(1 - r)` = p/2 of the budget, so the
// targets are twice the cuckoo rates at the three fingerprint widths (8/256, 8/4096, 8/65536);
// a table at 95% load then measures ~47% of `p`, hence the lower sizing floor.
conformance!(scalable_cuckoo: sift::ScalableCuckoo = Family::dynamic(sift::ScalableCuckoo::new)
    .removable()
    .with_eq()
    .fpr_targets(&[16.0 / 256.0, 16.0 / 4096.0, 16.0 / 65536.0])
    .sizing_floor(0.4));

conformance!(counting_bloom: sift::CountingBloom = Family::dynamic(sift::CountingBloom::new)
    .exact_fpr(sift::CountingBloom::current_fpr)
    .removable()
    .with_eq());

conformance!(split_block_bloom: sift::SplitBlockBloom = Family::dynamic(sift::SplitBlockBloom::new).with_eq());

conformance!(xor8: sift::Xor8 = Family::built(|_, k| sift::Xor8::build(k), |_, h| sift::Xor8::build_from_hashes(h))
    .fpr_targets(&[1.0 / 256.0])
    .with_eq();

    /// `xor8_old_order.sift`: written by the breadth-first peeling of earlier versions (other fingerprints).
    #[test]
    fn old_order_golden_still_decodes() {
        suite::older_golden(&family(), "xor8_old_order");
    }
);

conformance!(binary_fuse8: sift::BinaryFuse8 = Family::built(
        |_, k| sift::BinaryFuse8::build(k),
        |_, h| sift::BinaryFuse8::build_from_hashes(h))
    .fpr_targets(&[1.0 / 256.0])
    .with_eq();

    /// `binary_fuse8_old_order.sift`: written by the breadth-first peeling of earlier versions (other fingerprints).
    #[test]
    fn old_order_golden_still_decodes() {
        suite::older_golden(&family(), "binary_fuse8_old_order");
    }
);

conformance!(binary_fuse8_4wise: sift::BinaryFuse8 = Family::built(
        |_, k| sift::BinaryFuse8::build_with(k, sift::Arity::Four, sift::Hasher::default()),
        |_, h| sift::BinaryFuse8::from_hashes_with(h, sift::Arity::Four, sift::Hasher::default()))
    .fpr_targets(&[1.0 / 256.0])
    .with_eq();

    /// `binary_fuse8_4wise_old_order.sift`: written by the breadth-first peeling of earlier versions (other fingerprints).
    #[test]
    fn old_order_golden_still_decodes() {
        suite::older_golden(&family(), "binary_fuse8_4wise_old_order");
    }
);

conformance!(binary_fuse16: sift::BinaryFuse16 = Family::built(
        |_, k| sift::BinaryFuse16::build(k),
        |_, h| sift::BinaryFuse16::build_from_hashes(h))
    .fpr_targets(&[1.0 / 65536.0])
    .with_eq();

    /// `binary_fuse16_old_order.sift`: written by the breadth-first peeling of earlier versions (other fingerprints).
    #[test]
    fn old_order_golden_still_decodes() {
        suite::older_golden(&family(), "binary_fuse16_old_order");
    }
);

conformance!(gcs: sift::Gcs = Family::built(
        |p, k| sift::Gcs::build_with_params(k, sift::GcsParams::for_fpr(p)?),
        |p, h| sift::Gcs::from_hashes_with_params(h, sift::GcsParams::for_fpr(p)?))
    .with_eq());

// Sliding windows. Sized for the worst phase of a full window: after `n` insertions into an
// empty filter only part of the slices hold items, so the rate is about half the target at
// that point (hence the lower sizing floor); `window::` checks the steady state against `p`.
conformance!(aging_bloom: sift::AgingBloom = Family::dynamic(sift::AgingBloom::new)
    .with_eq()
    .sizing_floor(0.25);

    #[test]
    fn sliding_window_n1e3() {
        window::count_window(1_000, 0.1, 600);
    }
    #[test]
    fn sliding_window_n1e4() {
        window::count_window(10_000, 0.01, 601);
    }
    #[test]
    fn sliding_window_n1e5() {
        window::count_window(100_000, 0.001, 602);
    }
    /// The same checks on a filter filled with `push` (no "already present" answer), which
    /// must also build the file `insert` builds.
    #[test]
    fn sliding_window_push_n1e3() {
        window::count_window_adding(1_000, 0.1, 603, window::Adding::Push);
    }
    #[test]
    fn sliding_window_push_n1e4() {
        window::count_window_adding(10_000, 0.01, 604, window::Adding::Push);
    }
);

// The time-limited filter through `window::TimedAtStep`: insertions one step apart, `n` steps
// per TTL. It is sized to keep `p` up to 1.25× the planned rate with every spare slice in use,
// so at the planned rate, one TTL after starting empty, it measures 15% (n = 1e3, p = 0.001)
// to 60% of `p`: a lower sizing floor again; `window::` checks the steady state.
conformance!(time_limited_bloom: window::TimedAtStep = Family::dynamic(window::TimedAtStep::new)
    .with_eq()
    .sizing_floor(0.1);

    #[test]
    fn sliding_window_n1e3() {
        window::time_window(1_000, 0.1, 610);
    }
    #[test]
    fn sliding_window_n1e4() {
        window::time_window(10_000, 0.01, 611);
    }
    #[test]
    fn sliding_window_n1e5() {
        window::time_window(100_000, 0.001, 612);
    }
    /// The same checks on a filter filled with `push_at`, which must also build the file
    /// `insert_at` builds.
    #[test]
    fn sliding_window_push_n1e3() {
        window::time_window_adding(1_000, 0.1, 613, window::Adding::Push);
    }
    #[test]
    fn sliding_window_push_n1e4() {
        window::time_window_adding(10_000, 0.01, 614, window::Adding::Push);
    }
);
