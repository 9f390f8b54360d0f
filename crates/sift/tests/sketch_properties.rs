//! Invariants of RedisBloom's Count-Min Sketch, Top-K and t-digest (`sift::compat::redisbloom`),
//! checked with seeded property tests, the statistics of the Top-K decay draw, and the RDB loaders
//! on hostile field streams.

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use sift::compat::redisbloom::rdb::{
    load_cms, load_tdigest, load_topk, save_cms, save_tdigest, save_topk, Field, FieldBuffer, RdbError,
};
use sift::compat::redisbloom::{
    CRand, CmsMergeError, CmsSource, CountMinSketch, DecayRandom, LoadLimits, TDigest, TDigestMerge, TopK,
    RAND_MAX, TOPK_FINGERPRINT_SEED,
};
use sift::hash::murmur2_32;

fn config(cases: u32, seed: u64) -> ProptestConfig {
    ProptestConfig {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn item(i: u32) -> Vec<u8> {
    format!("item:{i}").into_bytes()
}

proptest! {
    #![proptest_config(config(128, 0xc35))]

    /// Estimates never fall below the truth (no counter reaches saturation here), and `count`
    /// is the sum of the increments.
    #[test]
    fn cms_never_under_counts(
        width in 1i64..64,
        depth in 1i64..6,
        ops in proptest::collection::vec((0u32..50, 0u64..1000), 0..300),
    ) {
        let mut c = CountMinSketch::init_by_dim(width, depth, u64::MAX).unwrap();
        let mut truth = [0u64; 50];
        for &(i, v) in &ops {
            let est = c.incr_by(&item(i), v);
            truth[i as usize] += v;
            prop_assert!(est as u64 >= truth[i as usize]);
        }
        for (i, &t) in truth.iter().enumerate() {
            prop_assert!(c.query(&item(i as u32)) as u64 >= t);
        }
        prop_assert_eq!(c.count(), ops.iter().map(|o| o.1).sum::<u64>());
        let mut f = FieldBuffer::default();
        save_cms(&c, &mut f);
        prop_assert_eq!(load_cms(&mut f, 0, &LoadLimits::DEFAULT).unwrap(), c);
    }

    /// A merge is the weighted sum of the sources, cell by cell and for the count, or fails
    /// exactly when a sum is out of range, leaving the destination as it was.
    #[test]
    fn cms_merge_is_the_weighted_sum(
        ops in proptest::collection::vec(proptest::collection::vec((0u32..20, 0u64..50), 0..40), 3),
        weights in proptest::collection::vec(-3i64..4, 1..4),
        with_destination in any::<bool>(),
    ) {
        let sketches: Vec<CountMinSketch> = ops
            .iter()
            .map(|o| {
                let mut c = CountMinSketch::init_by_dim(8, 3, u64::MAX).unwrap();
                for &(i, v) in o {
                    c.incr_by(&item(i), v);
                }
                c
            })
            .collect();
        let mut dest = sketches[2].clone();
        let before = dest.clone();
        let mut sources: Vec<(CmsSource<'_>, i64)> =
            weights.iter().enumerate().map(|(k, &w)| (CmsSource::Sketch(&sketches[k % 2]), w)).collect();
        if with_destination {
            sources.push((CmsSource::Destination, 2));
        }
        let value = |s: &CmsSource<'_>, row: u64, col: u64| match s {
            CmsSource::Destination => before.cell(row, col) as i64,
            CmsSource::Sketch(c) => c.cell(row, col) as i64,
        };
        let mut in_range = true;
        for row in 0..3 {
            for col in 0..8 {
                let sum: i64 = sources.iter().map(|(s, w)| value(s, row, col) * w).sum();
                in_range &= (0..=u32::MAX as i64).contains(&sum);
            }
        }
        let count: i64 = sources
            .iter()
            .map(|(s, w)| w * match s { CmsSource::Destination => before.count(), CmsSource::Sketch(c) => c.count() } as i64)
            .sum();
        in_range &= count >= 0;
        match dest.merge(&sources) {
            Ok(()) => {
                prop_assert!(in_range);
                prop_assert_eq!(dest.count() as i64, count);
                for row in 0..3 {
                    for col in 0..8 {
                        let sum: i64 = sources.iter().map(|(s, w)| value(s, row, col) * w).sum();
                        prop_assert_eq!(dest.cell(row, col) as i64, sum);
                    }
                }
            }
            Err(e) => {
                prop_assert_eq!(e, CmsMergeError::Overflow);
                prop_assert!(!in_range);
                prop_assert_eq!(&dest, &before);
            }
        }
    }

    /// Top-K: estimates never exceed the truth (decay only removes; the items' fingerprints are
    /// distinct), LIST is sorted and only shows heap members, and the state survives an RDB
    /// round trip.
    #[test]
    fn topk_invariants(
        k in 1i64..6,
        width in 1i64..20,
        depth in 1i64..5,
        decay in prop_oneof![Just(1.0), 0.5f64..1.0],
        ops in proptest::collection::vec((0u32..30, 0i64..20), 0..200),
        seed in any::<u32>(),
    ) {
        let mut t = TopK::reserve(k, width, depth, decay, u64::MAX).unwrap();
        let mut rng = CRand::new(seed);
        let mut truth = [0u64; 30];
        for &(i, n) in &ops {
            t.incr_by(&item(i), n, &mut rng).unwrap();
            truth[i as usize] += n as u64;
        }
        let list = t.list();
        prop_assert!(list.len() <= k as usize);
        prop_assert!(list.windows(2).all(|w| w[0].1 >= w[1].1));
        for (it, count) in &list {
            prop_assert!(t.query(it));
            let i: usize = std::str::from_utf8(&it[5..]).unwrap().parse().unwrap();
            prop_assert!(*count as u64 <= truth[i]);
        }
        for (i, &tr) in truth.iter().enumerate() {
            prop_assert!(t.count(&item(i as u32)) as u64 <= tr);
        }
        let mut f = FieldBuffer::default();
        save_topk(&t, &mut f);
        prop_assert_eq!(load_topk(&mut f, 0, &LoadLimits::DEFAULT).unwrap(), t);
    }

    /// t-digest: quantiles are non-decreasing in q and within [min, max] for digests built by
    /// adds, the CDF is non-decreasing in x and within [0, 1], the weight is the number of adds
    /// whatever compressions happen, and a compressed digest survives an RDB round trip.
    #[test]
    fn tdigest_invariants(
        compression in 1i64..300,
        values in proptest::collection::vec(prop_oneof![-1e6f64..1e6, (0i32..20).prop_map(f64::from)], 2..3000),
    ) {
        let mut t = TDigest::new(compression as f64, u64::MAX).unwrap();
        for &v in &values {
            t.add(v).unwrap();
        }
        prop_assert_eq!(t.size(), values.len() as i64);
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        prop_assert_eq!((t.min_value(), t.max_value()), (lo, hi));
        let qs: Vec<f64> = (0..=50).map(|i| i as f64 / 50.0).collect();
        let answers = t.quantiles(&qs);
        prop_assert!(answers.windows(2).all(|w| w[0] <= w[1]), "{:?}", answers);
        prop_assert!(answers.iter().all(|&a| lo <= a && a <= hi));
        let node_weight: i64 = t.nodes().map(|n| n.1).sum();
        prop_assert_eq!(node_weight, values.len() as i64);
        prop_assert_eq!(t.merged_weight(), values.len() as i64);
        let xs: Vec<f64> = (0..=40).map(|i| lo + (hi - lo) * i as f64 / 40.0).collect();
        let cdfs: Vec<f64> = xs.iter().map(|&x| t.cdf(x)).collect();
        prop_assert!(cdfs.windows(2).all(|w| w[0] <= w[1]), "{:?}", cdfs);
        prop_assert!(cdfs.iter().all(|&c| (0.0..=1.0).contains(&c)));
        let ranks: Vec<i64> = xs.iter().map(|&x| t.rank(x)).collect();
        prop_assert!(ranks.windows(2).all(|w| w[0] <= w[1]));
        let mut f = FieldBuffer::default();
        save_tdigest(&t, &mut f);
        prop_assert_eq!(load_tdigest(&mut f, 0, &LoadLimits::DEFAULT).unwrap(), t);
    }

    /// Merging keeps every observation: the result's weight is the sum of the sources'.
    #[test]
    fn tdigest_merge_keeps_the_weight(
        parts in proptest::collection::vec(proptest::collection::vec(-100f64..100.0, 0..400), 1..5),
        compression in 1i64..200,
    ) {
        let mut digests: Vec<TDigest> = parts
            .iter()
            .map(|vs| {
                let mut t = TDigest::new(50.0, u64::MAX).unwrap();
                vs.iter().for_each(|&v| t.add(v).unwrap());
                t
            })
            .collect();
        let mut m = TDigestMerge::new(compression as f64, u64::MAX).unwrap();
        for d in &mut digests {
            m.absorb(d).unwrap();
        }
        let mut r = m.finish();
        let total: usize = parts.iter().map(Vec::len).sum();
        prop_assert_eq!(r.size(), total as i64);
        r.compress();
        if total > 1 {
            prop_assert_eq!(r.merged_weight(), total as i64);
        }
    }
}

/// One decay attempt on a bucket of count `c` owned by another item decrements it with
/// probability `decay^c` (spec §6.2). 20 000 seeded trials per case; the bound is 6 binomial
/// standard deviations, so the test cannot flake and a wrong probability (even `decay^(c+1)`)
/// fails.
#[test]
fn decay_probability_matches_the_spec() {
    let mut rng = CRand::new(12345);
    let newcomer_fp = murmur2_32(b"newcomer", TOPK_FINGERPRINT_SEED);
    for (decay, c) in [(0.9, 1u32), (0.9, 3), (0.9, 10), (0.5, 2), (0.999, 300), (0.999, 700)] {
        let trials = 20_000;
        let mut decremented = 0;
        for _ in 0..trials {
            let mut t = TopK::reserve(1, 1, 1, decay, u64::MAX).unwrap();
            t.incr_by(b"owner", c as i64, &mut rng).unwrap();
            t.add(b"newcomer", &mut rng);
            let b = t.buckets()[0];
            // A decrement to 0 hands the bucket to the newcomer with the remaining unit.
            let taken = b.fp == newcomer_fp;
            decremented += if c == 1 { taken } else { b.count == c - 1 } as u32;
        }
        let p = decay.powi(c as i32);
        let sd = (trials as f64 * p * (1.0 - p)).sqrt();
        let expected = trials as f64 * p;
        assert!(
            (decremented as f64 - expected).abs() <= 6.0 * sd + 1.0,
            "decay {decay}, count {c}: {decremented} of {trials}, expected {expected:.0} ± {:.0}",
            6.0 * sd
        );
        // For the strong decays the neighbouring exponent is far outside the bound.
        if decay <= 0.9 {
            let wrong = trials as f64 * decay.powi(c as i32 + 1);
            assert!((decremented as f64 - wrong).abs() > 6.0 * sd, "decay {decay}, count {c}");
        }
    }
}

/// A decay below 1/RAND_MAX decrements only on a draw of 0; decay 1 on every draw but
/// RAND_MAX (spec §6.6).
#[test]
fn deterministic_decays() {
    for (decay, draw, decrements) in
        [(1e-10, 0, true), (1e-10, 1, false), (1.0, RAND_MAX - 1, true), (1.0, RAND_MAX, false)]
    {
        let mut t = TopK::reserve(1, 1, 1, decay, u64::MAX).unwrap();
        let mut stub = move || draw;
        t.add(b"owner", &mut stub);
        t.incr_by(b"owner", 1, &mut stub).unwrap();
        t.add(b"newcomer", &mut stub);
        assert_eq!(t.buckets()[0].count == 1, decrements, "decay {decay}, draw {draw}");
    }
    // The trait is object-safe enough for a boxed generator too.
    let mut boxed: Box<dyn FnMut() -> u32> = Box::new(|| 0);
    assert_eq!(boxed.next_rand(), 0);
}

/// The C library generator is uniform: 16 bins of 200 000 draws, a chi-square bound far in the
/// tail (the 1e-9 quantile of χ²(15) is about 70).
#[test]
fn crand_is_uniform() {
    let mut g = CRand::new(99);
    let mut bins = [0u32; 16];
    let n = 200_000;
    for _ in 0..n {
        bins[(g.next_rand() >> 27) as usize] += 1;
    }
    let e = n as f64 / 16.0;
    let chi2: f64 = bins.iter().map(|&b| (b as f64 - e).powi(2) / e).sum();
    assert!(chi2 < 70.0, "{chi2}");
}

// ---------------------------------------------------------------------------------------------
// Hostile RDB fields

fn fields(v: Vec<Field>) -> FieldBuffer {
    FieldBuffer { fields: v.into() }
}

#[test]
fn cms_load_checks() {
    let l = LoadLimits::DEFAULT;
    let cms = |w: u64, d: u64, cells: usize| {
        fields(vec![
            Field::Unsigned(w),
            Field::Unsigned(d),
            Field::Unsigned(5),
            Field::String(vec![0; cells]),
        ])
    };
    assert!(load_cms(&mut cms(3, 2, 24), 0, &l).is_ok());
    assert!(matches!(load_cms(&mut cms(3, 2, 24), 1, &l), Err(RdbError::UnsupportedEncver { .. })));
    assert_eq!(load_cms(&mut cms(0, 2, 0), 0, &l), Err(RdbError::Zero { field: "width" }));
    assert_eq!(load_cms(&mut cms(3, 0, 0), 0, &l), Err(RdbError::Zero { field: "depth" }));
    assert!(matches!(load_cms(&mut cms(3, 2, 23), 0, &l), Err(RdbError::StringLength { .. })));
    // RedisBloom 2.6 loads this (4·2^62·4 wraps to 0) and keeps a sketch without cells.
    assert!(matches!(load_cms(&mut cms(1 << 62, 4, 0), 0, &l), Err(RdbError::TooLarge { .. })));
    assert!(matches!(load_cms(&mut cms(1 << 20, 1 << 20, 0), 0, &l), Err(RdbError::TooLarge { .. })));
}

fn topk_fields(k: u64, w: u64, d: u64, buckets: usize, heap: Vec<u8>, items: Vec<Vec<u8>>) -> FieldBuffer {
    let mut v = vec![Field::Unsigned(k), Field::Unsigned(w), Field::Unsigned(d), Field::Double(0.9)];
    v.push(Field::String(vec![0; buckets]));
    v.push(Field::String(heap));
    v.extend(items.into_iter().map(Field::String));
    fields(v)
}

fn heap_record(fp: u32, len: u32, count: u32) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&fp.to_le_bytes());
    r.extend_from_slice(&len.to_le_bytes());
    r.extend_from_slice(&0xdead_beefu64.to_le_bytes());
    r.extend_from_slice(&count.to_le_bytes());
    r.extend_from_slice(&[0; 4]);
    r
}

#[test]
fn topk_load_checks() {
    let l = LoadLimits::DEFAULT;
    let heap = [heap_record(7, 3, 5), heap_record(0, 0, 0), heap_record(9, 0, 4)].concat();
    let items = vec![b"abc\0".to_vec(), b"\0".to_vec(), b"\0".to_vec()];
    let t = load_topk(&mut topk_fields(3, 2, 2, 32, heap.clone(), items.clone()), 0, &l).unwrap();
    // Item length from the string, pointer ignored; a one-byte string is an empty slot at count
    // 0 and the empty item otherwise.
    assert_eq!(t.heap()[0].item(), Some(&b"abc"[..]));
    assert_eq!(t.heap()[1].item(), None);
    assert_eq!(t.heap()[2].item(), Some(&b""[..]));
    assert_eq!(t.list(), [(&b"abc"[..], 5), (&b""[..], 4)]);
    let bad: Vec<(&str, FieldBuffer)> = vec![
        ("k 0", topk_fields(0, 2, 2, 32, vec![], vec![])),
        ("width 0", topk_fields(3, 0, 2, 0, heap.clone(), items.clone())),
        ("k > u32", topk_fields(1 << 32, 2, 2, 32, heap.clone(), items.clone())),
        ("buckets short", topk_fields(3, 2, 2, 31, heap.clone(), items.clone())),
        ("heap short", topk_fields(3, 2, 2, 32, heap[..71].to_vec(), items.clone())),
        ("heap long", topk_fields(3, 2, 2, 32, [heap.clone(), vec![0]].concat(), items.clone())),
        (
            "empty item string",
            topk_fields(3, 2, 2, 32, heap.clone(), vec![b"a\0".to_vec(), vec![], b"\0".to_vec()]),
        ),
        ("missing item", topk_fields(3, 2, 2, 32, heap.clone(), items[..2].to_vec())),
        ("huge table", topk_fields(3, u32::MAX as u64, u32::MAX as u64, 0, heap.clone(), items.clone())),
    ];
    for (what, mut f) in bad {
        assert!(load_topk(&mut f, 0, &l).is_err(), "{what}");
    }
    assert!(load_topk(&mut topk_fields(3, 2, 2, 32, heap, items), 1, &l).is_err(), "encver 1");
}

fn td_fields(compression: f64, cap: i64, merged: i64, unmerged: i64, nodes: usize) -> FieldBuffer {
    let mut v = vec![Field::Double(compression), Field::Double(1.0), Field::Double(9.0)];
    for x in [cap, merged, unmerged, 3] {
        v.push(Field::Unsigned(x as u64));
    }
    v.push(Field::Double(nodes as f64));
    v.push(Field::Double(unmerged as f64));
    v.extend((0..nodes).map(|i| Field::Double(i as f64)));
    v.extend((0..nodes).map(|_| Field::Double(1.0)));
    fields(v)
}

#[test]
fn tdigest_load_checks() {
    let l = LoadLimits::DEFAULT;
    let t = load_tdigest(&mut td_fields(10.0, 70, 3, 0, 3), 0, &l).unwrap();
    assert_eq!((t.merged_nodes(), t.size()), (3, 3));
    // Any encver loads.
    assert!(load_tdigest(&mut td_fields(10.0, 70, 3, 0, 3), 1023, &l).is_ok());
    // The buffered node comes back as (0, 0).
    let t = load_tdigest(&mut td_fields(10.0, 70, 2, 1, 2), 0, &l).unwrap();
    assert_eq!(t.nodes().collect::<Vec<_>>(), [(0.0, 1), (1.0, 1), (0.0, 0)]);
    let bad = [
        ("compression 0", td_fields(0.0, 10, 0, 0, 0)),
        ("compression NaN", td_fields(f64::NAN, 10, 0, 0, 0)),
        ("compression inf", td_fields(f64::INFINITY, 10, 0, 0, 0)),
        ("compression negative", td_fields(-5.0, 10, 0, 0, 0)),
        ("capacity overflow", td_fields(4e8, 10, 0, 0, 0)),
        ("over the budget", td_fields(3e8, 1_800_000_010, 0, 0, 0)),
        ("cap above the arrays", td_fields(10.0, 71, 3, 0, 3)),
        ("cap below", td_fields(10.0, 69, 3, 0, 3)),
        ("merged > cap", td_fields(10.0, 70, 71, 0, 71)),
        ("merged < 0", td_fields(10.0, 70, -1, 0, 0)),
        ("unmerged < 0", td_fields(10.0, 70, 3, -1, 3)),
        ("merged + unmerged > cap", td_fields(10.0, 70, 60, 11, 60)),
        ("missing node", {
            let mut f = td_fields(10.0, 70, 3, 0, 3);
            f.fields.pop_back();
            f
        }),
    ];
    for (what, mut f) in bad {
        assert!(load_tdigest(&mut f, 0, &l).is_err(), "{what}");
    }
}

fn arb_field() -> impl Strategy<Value = Field> {
    prop_oneof![
        prop_oneof![0u64..8, 0u64..100_000, any::<u64>(), Just(u64::MAX), Just(1 << 62)]
            .prop_map(Field::Unsigned),
        prop_oneof![
            -10.0f64..1000.0,
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(-0.0),
            Just(1e300),
            any::<f64>()
        ]
        .prop_map(Field::Double),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Field::String),
    ]
}

proptest! {
    #![proptest_config(config(3000, 0xf122))]

    /// Random field streams: a value or an error from every loader, never a panic, and what
    /// loads can be queried and saved.
    #[test]
    fn loaders_never_panic(stream in proptest::collection::vec(arb_field(), 0..24), encver in 0u32..2) {
        let limits = LoadLimits { max_bytes: 1 << 14, cf_max_bucket_size: 255 };
        let mut rng = CRand::new(1);
        if let Ok(mut c) = load_cms(&mut fields(stream.clone()), encver, &limits) {
            c.incr_by(b"a", 1);
            c.query(b"b");
            save_cms(&c, &mut FieldBuffer::default());
        }
        if let Ok(mut t) = load_topk(&mut fields(stream.clone()), encver, &limits) {
            t.add(b"a", &mut rng);
            t.list();
            t.count(b"a");
            save_topk(&t, &mut FieldBuffer::default());
        }
        if let Ok(mut t) = load_tdigest(&mut fields(stream), encver, &limits) {
            let _ = t.add(2.0);
            t.quantiles(&[0.0, 0.5, 1.0]);
            t.cdf(1.0);
            t.rank(1.0);
            t.by_rank(1);
            t.trimmed_mean(0.0, 1.0);
            save_tdigest(&t, &mut FieldBuffer::default());
        }
    }
}

/// Valid streams cut short or with one field replaced: errors or values, never a panic.
#[test]
fn damaged_valid_streams_never_panic() {
    let limits = LoadLimits { max_bytes: 1 << 16, cf_max_bucket_size: 255 };
    let mut rng = CRand::default();
    let mut c = CountMinSketch::init_by_dim(7, 3, u64::MAX).unwrap();
    c.incr_by(b"x", 9);
    let mut t = TopK::reserve(3, 5, 2, 0.9, u64::MAX).unwrap();
    for i in 0..20 {
        t.add(&item(i % 7), &mut rng);
    }
    let mut d = TDigest::new(5.0, u64::MAX).unwrap();
    for i in 0..100 {
        d.add(i as f64).unwrap();
    }
    let mut streams = Vec::new();
    let mut f = FieldBuffer::default();
    save_cms(&c, &mut f);
    streams.push(f);
    let mut f = FieldBuffer::default();
    save_topk(&t, &mut f);
    streams.push(f);
    let mut f = FieldBuffer::default();
    save_tdigest(&d, &mut f);
    streams.push(f);
    let replacements = [
        Field::Unsigned(0),
        Field::Unsigned(u64::MAX),
        Field::Double(f64::NAN),
        Field::Double(-1.0),
        Field::String(vec![]),
    ];
    for s in &streams {
        let all: Vec<Field> = s.fields.iter().cloned().collect();
        let mut variants: Vec<Vec<Field>> = (0..all.len()).map(|n| all[..n].to_vec()).collect();
        for i in 0..all.len() {
            for r in &replacements {
                let mut v = all.clone();
                v[i] = r.clone();
                variants.push(v);
            }
        }
        for v in variants {
            let _ = load_cms(&mut fields(v.clone()), 0, &limits).map(|mut c| c.incr_by(b"q", 1));
            let _ = load_topk(&mut fields(v.clone()), 0, &limits).map(|mut t| t.add(b"q", &mut rng));
            let _ = load_tdigest(&mut fields(v), 0, &limits).map(|mut t| t.quantiles(&[0.5]));
        }
    }
}
