//! The checks run on every family. Each public function is one `#[test]` of the
//! `conformance!` macro; they are generic over the family and read its hooks.

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use sift::format::FilterKind;
use sift::prelude::*;
use sift::{Error, FormatError, HashKind};

use super::family::Family;
use super::keys::{self, Key};
use super::stats;

/// Non-member probes per `(n, p)` configuration (spread over the filters of the configuration).
pub const PROBES: u64 = 1_000_000;

/// A deterministic proptest runner: fixed seed, fixed number of cases, no failure files.
pub fn runner(cases: u32) -> TestRunner {
    let config = Config { cases, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

fn assert_all_present<F: Filter>(f: &F, items: &[Key], what: &str) {
    for (i, k) in items.iter().enumerate() {
        assert!(f.contains(k), "false negative: member #{i} of {} after {what}", items.len());
    }
}

/// Every inserted item is reported present: while filling (dynamic families, checked at
/// every power of two), after building (static families), through the pre-hashed path and
/// through the batch path.
pub fn no_false_negatives<F: Filter + Persist + Debug>(fam: &Family<F>) {
    for (stream, (n, p)) in
        [(1usize, 0.01), (100, 0.1), (1000, 0.01), (20_000, 0.001), (100_000, 0.01)].into_iter().enumerate()
    {
        let stream = 100 + stream as u32;
        let items = keys::members(stream, n);
        if fam.is_dynamic() {
            let mut f = fam.build(n, p, &[]).expect("valid parameters");
            let mut next_check = 1;
            for (i, k) in items.iter().enumerate() {
                fam.insert(&mut f, k);
                if i + 1 == next_check || i + 1 == n {
                    assert_all_present(&f, &items[..=i], &format!("{} inserts (n = {n}, p = {p})", i + 1));
                    next_check *= 2;
                }
            }
        }
        let f = fam.build(n, p, &items).expect("valid parameters");
        assert_all_present(&f, &items, &format!("build (n = {n}, p = {p})"));
        assert!(f.len() <= n, "len {} > {n} items", f.len());

        // The batch path answers as the single path does.
        let mut probes = items.clone();
        probes.extend((0..n as u64).map(|i| keys::non_member(stream, i)));
        let batch = f.contains_many(&probes);
        for (k, b) in probes.iter().zip(&batch) {
            assert_eq!(f.contains(k), *b, "contains_many disagrees with contains");
        }

        let hashes = keys::member_hashes(stream, n);
        let g = fam.build_hashes(n, p, &hashes).expect("valid parameters");
        for (i, h) in hashes.iter().enumerate() {
            assert!(g.contains_hash(*h), "false negative: hash #{i} (n = {n}, p = {p})");
        }
    }
}

/// Random operation sequences (deterministic proptest): inserts with duplicates, deletes of
/// other items, unions, and for static families random sets and sets with duplicates.
pub fn operations<F: Filter + Persist + Debug>(fam: &Family<F>) {
    let pool = keys::members(7, 1024);
    if fam.is_dynamic() {
        // Any sequence of inserts (with repeats): everything inserted so far is present. The
        // filter is sized for the number of inserts, repeats included: fixed-capacity families
        // (cuckoo, quotient) store a repeat in a slot of its own.
        runner(64)
            .run(&prop::collection::vec(0..pool.len(), 1..300), |seq| {
                let capacity = (seq.len() as f64 * fam.repeat_headroom).ceil() as usize;
                let mut f = fam.build(capacity, 0.01, &[]).expect("valid parameters");
                let mut inserted: Vec<Key> = Vec::new();
                for &i in &seq {
                    fam.insert(&mut f, &pool[i]);
                    inserted.push(pool[i]);
                    for k in &inserted {
                        prop_assert!(f.contains(k), "false negative after inserting {seq:?}");
                    }
                }
                Ok(())
            })
            .unwrap();
    } else {
        // Any set, including one with duplicate keys: the build succeeds and holds every key,
        // or it reports an error; it never panics or hangs.
        runner(64)
            .run(&prop::collection::vec(0..pool.len(), 0..300), |seq| {
                let set: Vec<Key> = seq.iter().map(|&i| pool[i]).collect();
                match fam.build(set.len().max(1), 0.01, &set) {
                    Ok(f) => {
                        for k in &set {
                            prop_assert!(f.contains(k), "false negative for a set of {}", set.len());
                        }
                    }
                    Err(e) => {
                        let mut distinct = set.clone();
                        distinct.sort();
                        distinct.dedup();
                        prop_assert!(distinct.len() < set.len(), "build of distinct keys failed: {e}");
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    if let Some(remove) = fam.remove {
        // Insert distinct items, delete a random subset: the others stay present.
        runner(64)
            .run(&(1usize..400, prop::collection::vec(any::<bool>(), 400)), |(n, drop)| {
                let mut f = fam.build(512, 0.01, &[]).expect("valid parameters");
                for k in &pool[..n] {
                    fam.insert(&mut f, k);
                }
                for (k, _) in pool[..n].iter().zip(&drop).filter(|(_, d)| **d) {
                    prop_assert!(remove(&mut f, k), "remove of an inserted item returned false");
                }
                for (k, _) in pool[..n].iter().zip(&drop).filter(|(_, d)| !**d) {
                    prop_assert!(f.contains(k), "false negative after deleting other items");
                }
                Ok(())
            })
            .unwrap();
    }

    if let Some(union) = fam.union {
        let (a_items, b_items) = (keys::members(8, 3000), keys::members(9, 3000));
        let mut a = fam.build(10_000, 0.01, &a_items).expect("valid parameters");
        let b = fam.build(10_000, 0.01, &b_items).expect("valid parameters");
        union(&mut a, &b).expect("same shape");
        assert_all_present(&a, &a_items, "union (left)");
        assert_all_present(&a, &b_items, "union (right)");
        let c = F::from_bytes(&a.to_bytes()).expect("round trip of a union");
        assert_all_present(&c, &b_items, "union and round trip");
        let other = fam.build(20_000, 0.01, &[]).expect("valid parameters");
        assert!(
            matches!(union(&mut a, &other), Err(Error::Incompatible { .. })),
            "union with a filter of another shape must be refused"
        );
    }
}

/// The outcome of one `(n, p)` false-positive-rate measurement.
#[derive(Debug)]
pub struct FprMeasurement {
    /// Filters built.
    pub filters: u64,
    /// Non-member probes in all.
    pub probes: u64,
    /// False positives counted.
    pub false_positives: u64,
    /// Mean of `expected_fpr()` over the filters.
    pub expected: f64,
    /// Mean of the exact per-filter rate, if the family exposes it.
    pub exact: Option<f64>,
    /// Sample standard deviation of the exact per-filter rate.
    pub exact_sd: f64,
}

/// Measures the false-positive rate of filters of `n` items at target `p`.
///
/// For `n ≤ 10 000` one filter's rate varies noticeably around its expectation (for Bloom at
/// `n = 1000`, `p = 0.001`, the rate `fill^k` has a relative standard deviation of about
/// `k·0.55/sqrt(m)` ≈ 4.6 %), so the probes are spread over 64 independent filters (distinct
/// key streams) and the counts pooled: the pooled count is then a sum of binomials whose rates
/// average out (relative sd ≈ 0.6 %). For larger `n` one filter suffices (≤ 0.5 %).
pub fn measure_fpr<F: Filter + Persist + Debug>(fam: &Family<F>, n: usize, p: f64) -> FprMeasurement {
    let filters: u64 = if n <= 10_000 { 64 } else { 1 };
    let per = PROBES.div_ceil(filters);
    let (mut fp, mut expected, mut exact) = (0u64, 0.0, Vec::new());
    for r in 0..filters as u32 {
        let stream = 1000 + r;
        let items = keys::members(stream, n);
        let f = fam.build(n, p, &items).expect("valid parameters");
        assert_all_present(&f, &items, &format!("building n = {n}, p = {p}"));
        fp += (0..per).filter(|&i| f.contains(keys::non_member(stream, i))).count() as u64;
        expected += f.expected_fpr();
        if let Some(e) = fam.exact_fpr {
            exact.push(e(&f));
        }
    }
    let k = filters as f64;
    let exact_mean = (!exact.is_empty()).then(|| exact.iter().sum::<f64>() / k);
    let exact_sd = match exact_mean {
        Some(m) if exact.len() > 1 => {
            (exact.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (k - 1.0)).sqrt()
        }
        _ => 0.0,
    };
    FprMeasurement {
        filters,
        probes: per * filters,
        false_positives: fp,
        expected: expected / k,
        exact: exact_mean,
        exact_sd,
    }
}

/// The false-positive-rate checks at every target `p` of the family for `n` items.
///
/// With `N` probes of filters whose rate is `φ`, the false-positive count is Binomial(N, φ)
/// (pooled over independent filters, a sum of binomials with mean `N·φ̄` and a smaller
/// variance, so the same bounds are conservative). The checks, each at one-sided 99.9 %
/// (exact binomial tails, `stats`):
///
/// 1. **Against the filter's own rate.** If the family exposes the exact rate of a filter
///    from its contents, `φ` is that (tolerance `exact_error`, default 3 %: the exact formula
///    assumes independent probe positions, double hashing is very slightly correlated);
///    otherwise `φ` is `expected_fpr()` (tolerance `model_error`, default 10 %: the formulas are
///    approximations, e.g. Bloom's `(1 - e^(-kn/m))^k` and `len()` counting only inserts that
///    changed a bit, ~2-5 % low at p = 0.1, plus the ≤ 2 % residual filter-to-filter spread
///    at 3 sd). The count must lie in `[lower(N, φ(1-tol)), upper(N, φ(1+tol))]`: neither too many
///    false positives nor too few (a rate far below the model means the model or the filter is
///    wrong).
/// 2. **`expected_fpr()` against the exact rate** (when exposed): `|E - φ| ≤ model_error·φ +
///    3.09·sd(φ)/sqrt(filters)`.
/// 3. **Sizing against the target `p`.** After `n` inserts the count must be at most
///    `upper(N, p·(1 + target_slack))` (the filter meets the rate it was asked for) and at least
///    `lower(N, p·sizing_floor)` (it is not oversized).
pub fn fpr_check<F: Filter + Persist + Debug>(fam: &Family<F>, n: usize) {
    for &p in &fam.fpr_targets {
        let m = measure_fpr(fam, n, p);
        let measured = m.false_positives as f64 / m.probes as f64;
        let (reference, tol) = match m.exact {
            Some(x) => (x, fam.exact_error),
            None => (m.expected, fam.model_error),
        };
        let hi = stats::upper(m.probes, (reference * (1.0 + tol)).min(1.0), stats::ALPHA);
        let lo = stats::lower(m.probes, reference * (1.0 - tol), stats::ALPHA);
        eprintln!(
            "{:>16} n = {n:>7} p = {p:<6} filters {:>2} probes {} FP {} measured {measured:.6} \
             expected_fpr {:.6} exact {:?} (ratio measured/reference {:.4}) bounds [{lo}, {hi}]",
            fam.name,
            m.filters,
            m.probes,
            m.false_positives,
            m.expected,
            m.exact.map(|x| (x * 1e6).round() / 1e6),
            measured / reference,
        );
        assert!(
            (lo..=hi).contains(&m.false_positives),
            "{}: n = {n}, p = {p}: {} false positives in {} probes, outside [{lo}, {hi}] around the \
             reference rate {reference:.6} (measured {measured:.6})",
            fam.name,
            m.false_positives,
            m.probes,
        );
        if let Some(x) = m.exact {
            let allowed = fam.model_error * x + 3.09 * m.exact_sd / (m.filters as f64).sqrt();
            assert!(
                (m.expected - x).abs() <= allowed,
                "{}: n = {n}, p = {p}: expected_fpr() {:.6} differs from the exact rate {x:.6} by more \
                 than {allowed:.6}",
                fam.name,
                m.expected
            );
        }
        let target_hi = stats::upper(m.probes, p * (1.0 + fam.target_slack), stats::ALPHA);
        let target_lo = stats::lower(m.probes, p * fam.sizing_floor, stats::ALPHA);
        assert!(
            m.false_positives <= target_hi,
            "{}: n = {n}, p = {p}: measured {measured:.6} exceeds the target (bound {target_hi} \
             false positives, counted {})",
            fam.name,
            m.false_positives
        );
        assert!(
            m.false_positives >= target_lo,
            "{}: n = {n}, p = {p}: measured {measured:.6} is far below the target: oversized \
             (bound {target_lo} false positives, counted {})",
            fam.name,
            m.false_positives
        );
    }
}

/// Uses a decoded filter the way a caller would; must not panic, whatever it decoded.
pub fn exercise<F: Filter + Persist>(f: &F) {
    let _ = (f.len(), f.is_empty(), f.size_in_bytes(), f.expected_fpr(), f.hasher());
    for i in 0..32 {
        let _ = f.contains(keys::member(1, i));
        let _ = f.contains_hash(keys::non_member_hash(1, i));
    }
    let _ = f.contains_many(&keys::members(2, 64));
    let again = f.to_bytes();
    assert!(F::from_bytes(&again).is_ok(), "a decoded filter re-encodes to bytes it cannot decode");
}

fn uses_64_bit_hash<F: Filter>(f: &F) -> bool {
    matches!(f.hasher().kind(), HashKind::Xxh3_64 | HashKind::Xxh64)
}

/// `to_bytes` / `from_bytes` give an equal filter that answers the same, re-encodes to the same
/// bytes and (dynamic families) goes on behaving the same after more inserts.
pub fn round_trip<F: Filter + Persist + Debug>(fam: &Family<F>) {
    for (stream, (n, p)) in
        [(0usize, 0.01), (1, 0.5), (10, 0.01), (1000, 0.001), (50_000, 0.01)].into_iter().enumerate()
    {
        let stream = 200 + stream as u32;
        let items = keys::members(stream, n);
        let f = match fam.build(n.max(1), p, &items) {
            Ok(f) => f,
            Err(e) if n == 0 && !fam.is_dynamic() => {
                eprintln!("{}: building from an empty set gives {e}", fam.name);
                continue;
            }
            Err(e) => panic!("{}: n = {n}, p = {p}: {e}", fam.name),
        };
        let bytes = f.to_bytes();
        let mut g =
            F::from_bytes(&bytes).unwrap_or_else(|e| panic!("{}: decoding its own bytes: {e}", fam.name));
        if let Some(eq) = fam.eq {
            assert!(eq(&f, &g), "{}: decoded filter differs: {f:?} vs {g:?}", fam.name);
        }
        assert_eq!(g.to_bytes(), bytes, "re-encoding changes the bytes");
        assert_eq!(g.len(), f.len());
        assert_eq!(g.size_in_bytes(), f.size_in_bytes());
        assert_eq!(g.hasher(), f.hasher());
        assert_eq!(g.expected_fpr().to_bits(), f.expected_fpr().to_bits());
        assert_all_present(&g, &items, "round trip");
        for i in 0..20_000 {
            let k = keys::non_member(stream, i);
            assert_eq!(f.contains(k), g.contains(k), "answers differ after round trip");
        }
        if uses_64_bit_hash(&g) {
            for k in items.iter().take(1000) {
                assert!(
                    g.contains_hash(g.hasher().hash64(k)),
                    "contains_hash(hash64(item)) != contains(item)"
                );
            }
        }
        if fam.is_dynamic() {
            let mut f = f;
            let more = keys::members(stream + 50, 100);
            for k in &more {
                fam.insert(&mut f, k);
                fam.insert(&mut g, k);
            }
            assert_eq!(f.to_bytes(), g.to_bytes(), "decoded filter evolves differently under inserts");
        }
    }
}

/// Recomputes the CRC32C trailer (so that a mutation reaches the parameter validation).
pub fn fix_crc(bytes: &mut [u8]) {
    if bytes.len() < 4 {
        return;
    }
    let end = bytes.len() - 4;
    let crc = crc32c(&bytes[..end]);
    bytes[end..].copy_from_slice(&crc.to_le_bytes());
}

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78, initial value and final xor all ones),
/// written bit by bit from the definition as an independent check of the format description.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

fn small_filters<F: Filter + Persist + Debug>(fam: &Family<F>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (n, p) in [(20usize, 0.01), (3, 0.1)] {
        let f = fam.build(n, p, &keys::members(300, n)).expect("valid parameters");
        out.push(f.to_bytes());
    }
    if fam.is_dynamic() {
        out.push(fam.build(5, 0.01, &[]).expect("valid parameters").to_bytes());
    }
    out
}

/// Every truncation, every single-bit flip and any appended byte of a valid file is an error;
/// a newer version is refused naming both versions; another kind is refused.
pub fn corruption<F: Filter + Persist + Debug>(fam: &Family<F>) {
    for bytes in small_filters(fam) {
        assert_eq!(
            crc32c(&bytes[..bytes.len() - 4]).to_le_bytes(),
            bytes[bytes.len() - 4..],
            "trailer is CRC32C"
        );
        for cut in 0..bytes.len() {
            assert!(
                F::from_bytes(&bytes[..cut]).is_err(),
                "{}: truncation to {cut} bytes accepted",
                fam.name
            );
        }
        for bit in 0..bytes.len() * 8 {
            let mut c = bytes.clone();
            c[bit / 8] ^= 1 << (bit % 8);
            assert!(F::from_bytes(&c).is_err(), "{}: flip of bit {bit} accepted", fam.name);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(F::from_bytes(&longer).is_err(), "{}: a trailing byte accepted", fam.name);

        let mut newer = bytes.clone();
        newer[4..6].copy_from_slice(&2u16.to_le_bytes());
        fix_crc(&mut newer);
        assert_eq!(
            F::from_bytes(&newer).unwrap_err(),
            Error::Format(FormatError::UnsupportedVersion { expected: 1, got: 2 })
        );
        let other = FilterKind::ALL.into_iter().find(|k| *k != F::KIND).expect("another kind");
        let mut wrong = bytes.clone();
        wrong[6..8].copy_from_slice(&other.code().to_le_bytes());
        fix_crc(&mut wrong);
        assert!(
            matches!(F::from_bytes(&wrong), Err(Error::Format(FormatError::WrongKind { expected, .. })) if expected == F::KIND),
            "{}: a file of kind {other} accepted",
            fam.name
        );
    }
}

/// Decoding arbitrary bytes never panics (deterministic proptest): random bytes; valid files
/// with random bytes changed and the CRC recomputed (so the mutation reaches parameter
/// validation); a valid header of this kind over random parameters and payload.
pub fn random_bytes<F: Filter + Persist + Debug>(fam: &Family<F>) {
    runner(512)
        .run(&prop::collection::vec(any::<u8>(), 0..512), |data| {
            if let Ok(f) = F::from_bytes(&data) {
                exercise(&f);
            }
            Ok(())
        })
        .unwrap();

    let valid = small_filters(fam);
    let mutation = (0..valid.len(), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6));
    runner(2048)
        .run(&mutation, |(which, edits)| {
            let mut c = valid[which].clone();
            let body = c.len() - 4;
            for (at, v) in edits {
                c[at.index(body)] = v;
            }
            fix_crc(&mut c);
            if let Ok(f) = F::from_bytes(&c) {
                exercise(&f);
            }
            Ok(())
        })
        .unwrap();

    let header = (0u32..96, 0u64..256, prop::collection::vec(any::<u8>(), 0..352), any::<u8>());
    runner(1024)
        .run(&header, |(params_len, payload_len, body, hash)| {
            let c = synthetic_file(F::KIND, hash % 5, params_len, payload_len, &body);
            if let Ok(f) = F::from_bytes(&c) {
                exercise(&f);
            }
            Ok(())
        })
        .unwrap();
}

/// A file of `kind` with a well-formed header, the given lengths, `body` as parameters and
/// payload (cut or zero-extended to fit, parameter padding zeroed) and a correct CRC.
pub fn synthetic_file(
    kind: FilterKind,
    hash_id: u8,
    params_len: u32,
    payload_len: u64,
    body: &[u8],
) -> Vec<u8> {
    let padded = (params_len as usize).div_ceil(8) * 8;
    let mut c = Vec::new();
    c.extend_from_slice(b"SIFT");
    c.extend_from_slice(&1u16.to_le_bytes());
    c.extend_from_slice(&kind.code().to_le_bytes());
    c.push(hash_id);
    c.push(0);
    c.extend_from_slice(&[0, 0]);
    c.extend_from_slice(&params_len.to_le_bytes());
    c.extend_from_slice(&0u64.to_le_bytes());
    c.extend_from_slice(&payload_len.to_le_bytes());
    let mut rest = body.to_vec();
    rest.resize(padded + payload_len as usize, 0);
    for b in &mut rest[params_len as usize..padded] {
        *b = 0;
    }
    c.extend_from_slice(&rest);
    c.extend_from_slice(&[0; 4]);
    fix_crc(&mut c);
    c
}

/// Bad constructor parameters give `Error` values, never a panic.
pub fn bad_parameters<F: Filter + Persist + Debug>(fam: &Family<F>) {
    let Some(new) = fam.params_ctor else {
        // Static families without an (n, p) constructor: a nonsensical rate and an empty set
        // must not panic either (Ok or Err are both acceptable).
        for p in [0.0, 1.0, -1.0, f64::NAN, f64::INFINITY] {
            let _ = fam.build(1, p, &keys::members(3, 10));
            let _ = fam.build(1, p, &[]);
        }
        return;
    };
    assert!(
        matches!(new(0, 0.01), Err(Error::InvalidParameter { name: "expected_items", .. })),
        "{}: n = 0 must be InvalidParameter(expected_items), got {:?}",
        fam.name,
        new(0, 0.01)
    );
    for p in [0.0, -0.0, 1.0, -1.0, 1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let r = new(1000, p);
        assert!(
            matches!(r, Err(Error::InvalidParameter { name: "fpr", .. })),
            "{}: p = {p} must be InvalidParameter(fpr), got {r:?}",
            fam.name
        );
    }
    for p in [0.5, 0.01, 1e-9] {
        let r = new(usize::MAX, p);
        assert!(
            matches!(
                r,
                Err(Error::CapacityExceeded { .. }
                    | Error::OutOfMemory { .. }
                    | Error::InvalidParameter { .. })
            ),
            "{}: n = usize::MAX, p = {p} must be an error, got {r:?}",
            fam.name
        );
    }
    // Extreme but valid: tiny rates and tiny filters work.
    for (n, p) in [(1, 1e-300), (1, 0.999), (2, f64::MIN_POSITIVE), (1, f64::EPSILON)] {
        if let Ok(mut f) = new(n, p) {
            if let super::family::Ctor::Dynamic { insert, .. } = &fam.ctor {
                insert(&mut f, &keys::member(4, 0));
                assert!(f.contains(keys::member(4, 0)), "{}: n = {n}, p = {p}: false negative", fam.name);
            }
        }
    }
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/decode")
}

/// Whether the golden files are being regenerated (`SIFT_BLESS=1`).
pub fn blessing() -> bool {
    std::env::var_os("SIFT_BLESS").is_some_and(|v| v == "1")
}

/// Number of member keys in each golden filter.
pub const GOLDEN_MEMBERS: usize = 10;
/// Number of non-member queries recorded for each golden filter.
pub const GOLDEN_QUERIES: usize = 64;

/// The golden filter of a family: [`GOLDEN_MEMBERS`] keys `golden-…` at `p = 0.01`.
pub fn golden<F: Filter + Persist + Debug>(fam: &Family<F>) {
    let f = fam.build(GOLDEN_MEMBERS, 0.01, &keys::golden_members(GOLDEN_MEMBERS)).expect("valid parameters");
    golden_file(fam.name, &f);
}

/// Checks (or with `SIFT_BLESS=1` writes) `tests/fixtures/<stem>.sift` and `<stem>.txt`:
/// (a) today's encoder produces exactly the committed bytes; (b) decoding them answers every
/// recorded query as recorded (all members present).
pub fn golden_file<F: Filter + Persist>(stem: &str, f: &F) {
    let bytes = f.to_bytes();
    let queries: Vec<Key> = keys::golden_members(GOLDEN_MEMBERS)
        .into_iter()
        .chain(keys::golden_non_members(GOLDEN_QUERIES))
        .collect();
    let answers: String = queries
        .iter()
        .map(|k| format!("{} {}\n", std::str::from_utf8(k).expect("ASCII"), u8::from(f.contains(k))))
        .collect();
    let (bin, txt) =
        (fixtures_dir().join(format!("{stem}.sift")), fixtures_dir().join(format!("{stem}.txt")));
    if blessing() {
        let header = format!(
            "# Queries of {stem}.sift and the answers it must give (1 = maybe present, 0 = absent).\n\
             # Written by `SIFT_BLESS=1 cargo test -p sift-filters --test conformance`; see README.md.\n"
        );
        std::fs::write(&bin, &bytes).unwrap();
        std::fs::write(&txt, header + &answers).unwrap();
        std::fs::create_dir_all(corpus_dir()).unwrap();
        std::fs::write(corpus_dir().join(format!("{stem}.sift")), &bytes).unwrap();
        eprintln!("wrote {} ({} bytes) and {}", bin.display(), bytes.len(), txt.display());
    }
    let golden = std::fs::read(&bin).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; generate it with `SIFT_BLESS=1 cargo test -p sift-filters --test conformance`",
            bin.display()
        )
    });
    assert!(
        bytes == golden,
        "the encoder no longer writes {}: the file format changed. If that is intended, give the \
         kind a new layout id (or, for a frame change, bump the format version; docs/FORMAT.md \
         \"Versioning\") and regenerate with SIFT_BLESS=1",
        bin.display()
    );
    let decoded = F::from_bytes(&golden).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert_recorded_answers(&txt, |key| decoded.contains(key));
    assert_eq!(decoded.to_bytes(), golden, "{}: decode then encode changes the bytes", bin.display());
}

/// A golden file `<stem>.sift` (and `.txt`) written by an earlier construction of a static family
/// (one that filled the same slots with other fingerprints): it still decodes, answers every
/// recorded query as recorded and re-encodes to the same bytes; today's build of the same keys
/// has the same length, header and parameters (seed, shape, items), and differs only in the
/// payload and its checksum.
pub fn older_golden<F: Filter + Persist + Debug>(fam: &Family<F>, stem: &str) {
    let bin = fixtures_dir().join(format!("{stem}.sift"));
    let old = std::fs::read(&bin).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let f = F::from_bytes(&old).unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert_recorded_answers(&fixtures_dir().join(format!("{stem}.txt")), |key| f.contains(key));
    assert_eq!(f.to_bytes(), old, "{}: decode then encode changes the bytes", bin.display());
    let fresh =
        fam.build(GOLDEN_MEMBERS, 0.01, &keys::golden_members(GOLDEN_MEMBERS)).expect("valid parameters");
    let fresh = fresh.to_bytes();
    let payload = old.len() - 4 - f.size_in_bytes();
    assert_eq!(fresh.len(), old.len(), "{}: today's build has another length", bin.display());
    assert_eq!(fresh[..payload], old[..payload], "{}: today's build has other parameters", bin.display());
}

/// Checks a golden file's recorded queries (`key 0|1` per line, `#` comments; every
/// `golden-` key is a member, recorded present) against `contains`, and their number.
pub fn assert_recorded_answers(txt: &std::path::Path, contains: impl Fn(&str) -> bool) {
    let recorded = std::fs::read_to_string(txt).unwrap_or_else(|e| panic!("{}: {e}", txt.display()));
    let mut checked = 0;
    for line in recorded.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (key, answer) = line.split_once(' ').expect("`key answer` lines");
        let want = answer == "1";
        assert_eq!(contains(key), want, "{}: query {key}", txt.display());
        if key.starts_with("golden-") {
            assert!(want, "{}: member {key} recorded absent", txt.display());
        }
        checked += 1;
    }
    assert_eq!(checked, GOLDEN_MEMBERS + GOLDEN_QUERIES, "{}: wrong number of queries", txt.display());
}

/// The fuzz seed corpus and every golden file, and mutations of them, through
/// `sift::format::decode` + `verify` and this family's `from_bytes`: no panic, and the
/// family's own golden file decodes.
pub fn decode_smoke<F: Filter + Persist + Debug>(fam: &Family<F>) {
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for dir in [fixtures_dir(), corpus_dir()] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_file() && path.extension().is_none_or(|x| x != "txt" && x != "md") {
                inputs.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    let own = fixtures_dir().join(format!("{}.sift", fam.name));
    assert!(
        inputs.iter().any(|(p, _)| *p == own),
        "{} is missing; generate it with SIFT_BLESS=1 (see tests/fixtures/README.md)",
        own.display()
    );
    let mut rng = keys::splitmix64(0x5eed);
    let mut next = || {
        rng = keys::splitmix64(rng);
        rng
    };
    for (path, bytes) in &inputs {
        let raw = sift::format::decode(bytes).and_then(|r| r.verify().map(|()| r));
        let decoded = F::from_bytes(bytes);
        if *path == own {
            raw.expect("own golden file decodes");
            exercise(&decoded.expect("own golden file decodes"));
        } else if let Ok(f) = decoded {
            exercise(&f);
        }
        for round in 0..256 {
            let mut c = bytes.clone();
            if c.is_empty() {
                break;
            }
            match round % 3 {
                0 => c.truncate((next() % c.len() as u64) as usize),
                _ => {
                    for _ in 0..1 + next() % 4 {
                        let at = (next() % c.len() as u64) as usize;
                        c[at] = next() as u8;
                    }
                    fix_crc(&mut c);
                }
            }
            if let Ok(r) = sift::format::decode(&c) {
                let _ = (r.verify(), r.kind(), r.params(), r.payload(), r.param_reader().finish());
            }
            if let Ok(f) = F::from_bytes(&c) {
                exercise(&f);
            }
        }
    }
}
