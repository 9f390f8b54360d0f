use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

fn upper(p: f64, n: f64) -> f64 {
    p + 3.1 * (p * (1.0 - p) / n).sqrt()
}

fn key(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

/// Every offset kept up to date by inserts and deletes is exact or saturated, and every
/// offset computed from scratch at or above the cap is saturated.
fn offsets_consistent(f: &Quotient) -> bool {
    let mut g = f.clone();
    g.rebuild_offsets();
    g.offsets.iter().zip(&f.offsets).all(|(&want, &have)| have == want || have == f.offset_cap)
}

/// The POPCNT/BMI2 instantiations of insert, query and remove give the same tables and
/// answers as the portable ones, on heavy loads (long clusters spanning blocks), duplicates
/// and saturated offsets (the slow offset path).
#[test]
fn fast_and_portable_paths_agree() {
    #[cfg(target_arch = "x86_64")]
    assert!(
        Quotient::fast_bits(),
        "the test machine has POPCNT, BMI1 and BMI2; else this test checks nothing"
    );
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (nq, r, cap) in [(5_000u64, 7u32, OFFSET_SATURATED), (3_000, 3, 40), (700, 12, 5)] {
        let mut fast = Quotient::with_params(nq, r, Hasher::default()).unwrap();
        fast.set_offset_cap(cap);
        let mut slow = fast.clone();
        let mut stored = Vec::new();
        for i in 0..nq {
            // Some duplicates: every 7th value repeats an earlier one.
            let v = if i % 7 == 6 { stored[(next() % stored.len() as u64) as usize] } else { next() };
            let v = fast.fingerprint(Digest::from_u64(v));
            assert_eq!(fast.insert_fingerprint(v), slow.insert_fingerprint_body::<true>(v));
            stored.push(v);
        }
        assert!(fast == slow && fast.offsets == slow.offsets, "nq {nq} r {r}: tables differ after inserts");
        for _ in 0..4 * nq {
            let v = fast.fingerprint(Digest::from_u64(next()));
            assert_eq!(fast.contains_fingerprint(v), slow.contains_fingerprint_body(v));
        }
        for &v in &stored {
            assert!(fast.contains_fingerprint(v) && slow.contains_fingerprint_body(v));
        }
        for (i, &v) in stored.iter().enumerate() {
            let w = if i % 3 == 0 { fast.fingerprint(Digest::from_u64(next())) } else { v };
            assert_eq!(fast.remove_fingerprint(w), slow.remove_fingerprint_body(w));
        }
        assert!(fast == slow && fast.offsets == slow.offsets, "nq {nq} r {r}: tables differ after removes");
        assert!(offsets_consistent(&fast));
    }
}

/// `try_insert` and `contains` on keys: the POPCNT/BMI2 functions (hash and table in one)
/// and the portable ones (`fast` off) build the same table and give the same answers, with
/// duplicates, up to 95% load.
#[test]
fn item_paths_fast_and_portable_agree() {
    let mut fast = Quotient::new(20_000, 0.01).unwrap();
    #[cfg(target_arch = "x86_64")]
    assert!(fast.fast, "the test machine has POPCNT, BMI1 and BMI2; else this test checks nothing");
    let mut portable = fast.clone();
    portable.fast = false;
    for i in 0..10_000u64 {
        let k = key(if i % 10 == 9 { i / 3 } else { i });
        assert_eq!(fast.try_insert(k).unwrap(), portable.try_insert(k).unwrap());
        assert_eq!(fast.insert(k), portable.insert(k));
    }
    assert!(fast == portable && fast.offsets == portable.offsets);
    assert!(fast.load_factor() > 0.9);
    for i in 0..60_000u64 {
        assert_eq!(fast.contains(key(i)), portable.contains(key(i)), "key {i}");
    }
}

/// The insert/query hash path gives the trait's digest for every key length and hash kind
/// (so files and `insert_hash` callers see the same fingerprints).
#[test]
fn hot_digest_is_the_hashers_digest() {
    for kind in [HashKind::Xxh3_64, HashKind::Xxh3_128, HashKind::Xxh64] {
        for seed in [0u64, 7, u64::MAX] {
            let f = Quotient::with_params(100, 7, Hasher::new(kind, seed)).unwrap();
            for len in 0..=40usize {
                let bytes: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(37) ^ seed as u8).collect();
                assert_eq!(f.hot_digest(&bytes), f.hasher.digest(&bytes), "{kind:?} seed {seed} len {len}");
            }
        }
    }
}

#[test]
fn rejects_bad_parameters() {
    assert!(matches!(Quotient::new(0, 0.01), Err(Error::InvalidParameter { name: "expected_items", .. })));
    for p in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(Quotient::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })), "p = {p}");
    }
    assert!(matches!(Quotient::new(10, 1e-30), Err(Error::InvalidParameter { name: "fpr", .. })));
    assert!(matches!(Quotient::new(usize::MAX, 0.01), Err(Error::CapacityExceeded { .. })));
    let h = Hasher::default();
    assert!(matches!(Quotient::with_params(0, 7, h), Err(Error::InvalidParameter { name: "quotients", .. })));
    for r in [0, 57, 64] {
        assert!(matches!(
            Quotient::with_params(100, r, h),
            Err(Error::InvalidParameter { name: "remainder_bits", .. })
        ));
    }
    assert!(matches!(
        Quotient::with_params(1 << 60, 8, h),
        Err(Error::InvalidParameter { name: "remainder_bits", .. })
    ));
    assert!(matches!(Quotient::with_params(1 << 56, 8, h), Err(Error::CapacityExceeded { .. })));
    let mut f = Quotient::with_params(10, 1, h).unwrap();
    assert!(matches!(f.resize(), Err(Error::InvalidParameter { .. })));
}

#[test]
fn sizing_and_bits_per_key() {
    let f = Quotient::new(1_000_000, 0.01).unwrap();
    assert_eq!(f.remainder_bits(), 7);
    assert_eq!(f.num_quotients(), 1_052_632);
    assert_eq!(f.num_slots(), (1_052_632u64 + 64 + 8 * 1025).div_ceil(64) * 64);
    let bits_per_key = f.size_in_bytes() as f64 * 8.0 / 1e6;
    println!("quotient n = 1e6, p = 1%: {bits_per_key:.2} bits/key");
    // 72-byte blocks of 64 slots at r = 7 and one offset byte per block: 9.68.
    assert!(bits_per_key < 9.69, "{bits_per_key}");
}

/// Reference for the word-wide shifts: slot by slot.
fn shifted_by_slots(f: &Quotient, from: u64, to: u64, up: bool) -> Quotient {
    let mut g = f.clone();
    if up {
        for i in (from..to).rev() {
            g.set_rem(i + 1, f.rem(i));
            g.set_runend(i + 1, f.is_runend(i));
        }
    } else {
        for i in from + 1..=to {
            g.set_rem(i - 1, f.rem(i));
            g.set_runend(i - 1, f.is_runend(i));
        }
        g.set_rem(to, 0);
        g.set_runend(to, false);
    }
    g
}

#[test]
fn packed_slots_and_shifts_for_every_width() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for r in 1..=MAX_REMAINDER_BITS {
        let mut f = Quotient::with_params(200, r, Hasher::default()).unwrap();
        let val = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7 & low_mask(r);
        for i in 0..f.slots {
            f.set_rem(i, val(i));
            f.set_runend(i, val(i) & 1 == 1);
        }
        for i in 0..f.slots {
            assert_eq!(f.rem(i), val(i), "r {r} slot {i}");
        }
        assert_eq!(*f.blocks.last().unwrap(), 0, "guard word");
        for _ in 0..40 {
            let a = next() % f.slots;
            let b = a + next() % (f.slots - a);
            let mut up = f.clone();
            up.shift_up(a, b);
            let want = shifted_by_slots(&f, a, b, true);
            // Slot a is stale after shift_up: compare everything else.
            up.set_rem(a, want.rem(a));
            up.set_runend(a, want.is_runend(a));
            assert!(up.blocks == want.blocks, "shift_up r {r} {a}..{b}");
            let mut down = f.clone();
            down.shift_down(a, b);
            assert!(down.blocks == shifted_by_slots(&f, a, b, false).blocks, "shift_down r {r} {a}..{b}");
        }
    }
}

/// The one-word run comparison (`contains_in_window`) gives the slot-by-slot scan's answer
/// whenever it gives one, for every remainder width, at 50% and 95% load with duplicates
/// (long runs, runs crossing blocks): members, their neighbours (same quotient, remainder
/// ± 1) and random fingerprints. It fails when a lane of the run is masked off or one before
/// the run is not (checked by hand once each: the mask one lane short, one lane too long).
#[test]
fn window_and_scan_agree() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut windowed = 0u64;
    for r in (1..=MAX_REMAINDER_BITS).filter(|r| r % 5 == 1 || [7, 8, 9, 16, 32, 33, 56].contains(r)) {
        for load in [0.5, 0.95] {
            let nq = 3_000u64.min(1 << (64 - r));
            let mut f = Quotient::with_params(nq, r, Hasher::default()).unwrap();
            let mut stored = Vec::new();
            while (f.len() as f64) < nq as f64 * load {
                // Every 5th value repeats an earlier one; every 9th is a near neighbour.
                let v = match stored.len() % 45 {
                    i if i % 5 == 4 => stored[(next() % stored.len() as u64) as usize],
                    i if i % 9 == 8 => stored[(next() % stored.len() as u64) as usize] ^ 1,
                    _ => f.fingerprint(Digest::from_u64(next())),
                };
                f.insert_fingerprint(v).unwrap();
                stored.push(v);
            }
            let probes = stored
                .iter()
                .flat_map(|&v| [v, v.wrapping_add(1), v.wrapping_sub(1)])
                .chain((0..20_000).map(|_| f.fingerprint(Digest::from_u64(next()))));
            for v in probes {
                let (q, rem) = f.split(v);
                let want = f.count_fingerprint(v) > 0;
                assert_eq!(f.contains_fingerprint_body(v), want, "r {r} load {load} v {v:#x}");
                if q >= f.quotients {
                    continue;
                }
                let Some(end) = f.run_end(q) else { continue };
                assert_eq!(f.contains_in_run(q, rem, end), want);
                if let Some(got) = f.contains_in_window(q, rem, end) {
                    assert_eq!(got, want, "r {r} load {load} v {v:#x}: window");
                    windowed += 1;
                }
            }
        }
    }
    assert!(windowed > 300_000, "{windowed} probes answered by the window");
}

#[test]
fn duplicates_count_and_remove() {
    let mut f = Quotient::new(1000, 0.01).unwrap();
    assert_eq!(f.try_insert("a"), Ok(true));
    assert_eq!(f.try_insert("a"), Ok(false));
    assert_eq!(f.count("a"), 2);
    assert!(f.remove("a"));
    assert!(f.contains("a"));
    assert!(f.remove("a"));
    assert!(!f.contains("a") && !f.remove("a") && f.is_empty());
    assert_eq!(f.check_layout(), Ok(()));
}

/// The one-multiply fingerprint is `⌊h1 · nq · 2^r / 2^64⌋` computed in 128 bits (the
/// definition the stored bytes follow), also at `nq · 2^r = 2^64` and for odd `nq`.
#[test]
fn fingerprint_is_the_wide_product() {
    let mut x = 0x0123_4567_89ab_cdefu64;
    for (nq, r) in [(1u64, 1u32), (1_052_632, 7), (256, 56), (255, 56), (1 << 20, 44), (3, 2), (99_991, 40)] {
        let f = Quotient::with_params(nq, r, Hasher::default()).unwrap();
        for h in [0, 1, u64::MAX, u64::MAX - 1, 1 << 63] {
            let want = ((h as u128 * ((nq as u128) << r)) >> 64) as u64;
            assert_eq!(f.fingerprint(Digest::from_u64(h)), want, "nq {nq} r {r} h {h:#x}");
        }
        for _ in 0..1000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let h = x ^ x >> 29;
            let want = ((h as u128 * ((nq as u128) << r)) >> 64) as u64;
            assert_eq!(f.fingerprint(Digest::from_u64(h)), want, "nq {nq} r {r} h {h:#x}");
        }
    }
}

/// FNV-1a of a byte string (a fixed digest of a table for the test below).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// The fast path (home slot free) and the general path give the same table: inserting with
/// both, with the general path alone (`insert_fingerprint_body::<false>`), and building from
/// the sorted fingerprints (`build_sorted`, which shares no code with the insert) give
/// identical blocks and offsets, at every tenth of the fill up to 95% load, with duplicates,
/// for several widths and saturated offsets. Then random inserts, removes and counts against
/// a `HashMap` of fingerprints at loads held between 80% and 95%: `count` is exact on
/// fingerprints, and the table stays the one `build_sorted` makes from the model.
#[test]
fn fast_and_general_insert_paths_agree_with_a_model() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (nq, r, cap) in [
        (4_000u64, 7u32, OFFSET_SATURATED),
        (2_500, 2, OFFSET_SATURATED),
        (1_500, 10, 3),
        (130, 5, OFFSET_SATURATED),
    ] {
        let mut both = Quotient::with_params(nq, r, Hasher::default()).unwrap();
        both.set_offset_cap(cap);
        let mut general = both.clone();
        let mut model: HashMap<u64, usize> = HashMap::new();
        let sorted_table = |model: &HashMap<u64, usize>| {
            let mut v: Vec<u64> = model.iter().flat_map(|(&v, &c)| std::iter::repeat_n(v, c)).collect();
            v.sort_unstable();
            let mut g = Quotient::with_params(nq, r, Hasher::default()).unwrap();
            g.offset_cap = cap;
            g.build_sorted(&v).unwrap();
            g
        };
        let target = (nq as f64 * 0.95) as u64;
        let mut stored = Vec::new();
        let mut fast_hits = 0;
        for i in 0..target {
            let v = if i % 11 == 10 {
                stored[(next() % stored.len() as u64) as usize]
            } else {
                both.fingerprint(Digest::from_u64(next()))
            };
            let (items, blocks) = (both.items, both.blocks.clone());
            let present = both.insert_fingerprint(v).unwrap();
            // The fast path changes exactly one remainder and two metadata bits, no shift.
            let (q, _) = both.split(v);
            let b = (q >> 6) as usize * both.stride;
            let changed = (0..blocks.len()).filter(|&k| blocks[k] != both.blocks[k]).count();
            fast_hits += (items + 1 == both.items && changed <= 3 && blocks[b] != both.blocks[b]) as usize;
            assert_eq!(present, general.insert_fingerprint_body::<false>(v).unwrap());
            assert_eq!(present, model.get(&v).is_some_and(|&c| c > 0));
            *model.entry(v).or_default() += 1;
            stored.push(v);
            if (i + 1) % (target / 10).max(1) == 0 || i + 1 == target {
                let want = sorted_table(&model);
                assert!(both.blocks == want.blocks && both.offsets == want.offsets, "nq {nq} r {r}: at {i}");
                assert!(
                    general.blocks == want.blocks && general.offsets == want.offsets,
                    "nq {nq} r {r}: at {i}"
                );
                assert_eq!(both.check_layout(), Ok(()));
            }
        }
        // The fast path is taken (about half the inserts of a fill to 95%: e^-α at load α).
        assert!(fast_hits as u64 > target / 4, "nq {nq} r {r}: fast path taken {fast_hits} times");
        // Churn at 80-95% load: remove a stored or a random fingerprint, insert a new one or
        // a copy, check counts.
        for step in 0..6 * nq {
            let load = both.items as f64 / nq as f64;
            let v = if load > 0.8 && (load >= 0.95 || next() % 2 == 0) {
                let v = if next() % 4 == 0 {
                    both.fingerprint(Digest::from_u64(next()))
                } else {
                    stored[(next() % stored.len() as u64) as usize]
                };
                let had = model.get(&v).copied().unwrap_or(0);
                let removed = both.remove_fingerprint(v);
                assert_eq!(removed, general.remove_fingerprint_body(v));
                assert_eq!(removed, had > 0);
                if removed {
                    *model.get_mut(&v).unwrap() -= 1;
                }
                v
            } else {
                let v = if next() % 8 == 0 {
                    stored[(next() % stored.len() as u64) as usize]
                } else {
                    both.fingerprint(Digest::from_u64(next()))
                };
                let present = both.insert_fingerprint(v).unwrap();
                assert_eq!(present, general.insert_fingerprint_body::<false>(v).unwrap());
                assert_eq!(present, model.get(&v).is_some_and(|&c| c > 0));
                *model.entry(v).or_default() += 1;
                stored.push(v);
                v
            };
            let counted = both.count_fingerprint(v);
            assert_eq!(counted, model.get(&v).copied().unwrap_or(0), "nq {nq} r {r}: count at step {step}");
            if step % nq == nq - 1 {
                let want = sorted_table(&model);
                // (A removal leaves a saturated offset saturated: exact or saturated, checked below.)
                assert!(both.blocks == want.blocks, "nq {nq} r {r}: churn {step}");
                assert!(general.blocks == want.blocks, "nq {nq} r {r}: churn {step}");
                assert!(offsets_consistent(&both));
            }
        }
    }
}

/// The bytes of a filter built item by item are those the code before the insert fast path
/// (commit `b29d330`) wrote: FNV-1a of `to_bytes()` of `Quotient::new(20_000, 0.01)` filled
/// to its capacity with the keys `0..20_000` (little-endian u64), then 1,000 of them again
/// (duplicates). The constant was printed by this same test compiled into `b29d330`'s
/// quotient.rs (the code then inserted through rank-and-select and `first_unused` only).
#[test]
fn bytes_match_the_code_before_the_fast_path() {
    let mut f = Quotient::new(20_000, 0.01).unwrap();
    for i in 0..20_000u64 {
        f.try_insert(key(i)).unwrap();
    }
    for i in 0..1_000u64 {
        f.try_insert(key(i * 7)).unwrap();
    }
    assert_eq!(fnv1a(&f.to_bytes()), 0x2e9a_fa6a_9437_954d);
}

/// A run longer than the offsets can hold (many copies of one item) saturates them; queries,
/// inserts and deletes behind it stay exact.
#[test]
fn saturated_offsets_stay_correct() {
    // Hash 0 has fingerprint 0: the copies form one run from slot 0.
    let many = Digest::from_u64(0);
    for (cap, copies) in [(u8::MAX, 2_000), (3, 2_000)] {
        let mut f = Quotient::with_params(300_000, 8, Hasher::default()).unwrap();
        f.set_offset_cap(cap);
        for _ in 0..copies {
            f.try_insert_digest(many).unwrap();
        }
        for i in 0..100_000u64 {
            f.try_insert(key(i)).unwrap();
        }
        assert!(f.offsets.iter().any(|&o| o >= f.offset_cap), "some offset saturates");
        assert!(offsets_consistent(&f));
        assert_eq!(f.count_digest(many), copies);
        assert!((0..100_000u64).all(|i| f.contains(key(i))));
        for i in (0..100_000u64).step_by(2) {
            assert!(f.remove(key(i)));
        }
        for _ in 10..copies {
            assert!(f.remove_digest(many));
        }
        assert!(offsets_consistent(&f));
        assert_eq!(f.count_digest(many), 10);
        assert!((1..100_000u64).step_by(2).all(|i| f.contains(key(i))));
        assert_eq!(f.check_layout(), Ok(()));
    }
}

#[test]
fn fpr_within_binomial_bound() {
    const PROBES: u64 = 2_000_000;
    for (n, p) in [(200_000usize, 0.01), (100_000, 0.001), (100_000, 0.1)] {
        let mut f = Quotient::with_hasher(n, p, Hasher::new(HashKind::Xxh3_64, 5)).unwrap();
        for i in 0..n as u64 {
            f.try_insert(key(i)).unwrap();
        }
        let fp = (n as u64..n as u64 + PROBES).filter(|&i| f.contains(key(i))).count();
        let measured = fp as f64 / PROBES as f64;
        let e = f.expected_fpr();
        println!(
            "quotient n {n} r {} load {:.3}: FPR {measured:.6} (formula {e:.6}, target {p})",
            f.remainder_bits(),
            f.load_factor()
        );
        assert!(e <= p);
        assert!(measured <= upper(e * 1.01, PROBES as f64), "{measured} > bound of {e}");
        assert!(measured >= e - 3.1 * (e / PROBES as f64).sqrt() - 0.05 * e, "{measured} ≪ {e}");
        assert!(offsets_consistent(&f));
    }
}

#[test]
fn full_filter_refuses_and_loses_nothing() {
    let mut f = Quotient::with_params(100_000, 8, Hasher::default()).unwrap();
    let mut i = 0u64;
    let err = loop {
        match f.try_insert(key(i)) {
            Ok(_) => i += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::Full { .. }));
    println!("quotient nq = 100000: full after {i} items (load {:.4})", f.load_factor());
    assert!(f.load_factor() >= 0.99, "load {}", f.load_factor());
    let before = f.clone();
    assert!(f.try_insert(key(u64::MAX)).is_err());
    assert_eq!(f, before);
    assert!((0..i).all(|k| f.contains(key(k))));
    assert_eq!(f.check_layout(), Ok(()));
    assert!(offsets_consistent(&f));
    for k in 0..i / 2 {
        assert!(f.remove(key(k)));
    }
    assert!((i / 2..i).all(|k| f.contains(key(k))));
    assert_eq!(f.check_layout(), Ok(()));
    assert!(offsets_consistent(&f));
    f.resize().unwrap();
    assert!((i / 2..i).all(|k| f.contains(key(k))));
    assert_eq!(f.check_layout(), Ok(()));
}

#[test]
fn resize_keeps_items_and_fpr() {
    const PROBES: u64 = 1_000_000;
    let mut f = Quotient::with_hasher(100_000, 0.01, Hasher::new(HashKind::Xxh3_64, 9)).unwrap();
    for i in 0..100_000u64 {
        f.try_insert(key(i)).unwrap();
    }
    let before: Vec<u64> = f.iter_hashes().collect();
    f.resize().unwrap();
    assert_eq!(f.remainder_bits(), 6);
    assert_eq!(f.num_quotients(), 2 * 105_264);
    assert_eq!(f.check_layout(), Ok(()));
    assert_eq!(f.iter_hashes().collect::<Vec<_>>(), before, "fingerprints are unchanged");
    assert!((0..100_000u64).all(|i| f.contains(key(i))));
    for i in 100_000..200_000u64 {
        f.try_insert(key(i)).unwrap();
    }
    let fp = (1u64 << 40..(1 << 40) + PROBES).filter(|&i| f.contains(key(i))).count();
    let e = f.expected_fpr();
    assert!((fp as f64 / PROBES as f64) <= upper(e * 1.01, PROBES as f64), "{fp} vs {e}");
}

#[test]
fn merge_and_incompatible() {
    let h = Hasher::new(HashKind::Xxh3_64, 1);
    let mut a = Quotient::with_hasher(10_000, 0.01, h).unwrap();
    let mut b = a.clone();
    for i in 0..4000u64 {
        a.try_insert(key(i)).unwrap();
    }
    for i in 3000..8000u64 {
        b.try_insert(key(i)).unwrap();
    }
    let mut m = a.clone();
    m.merge(&b).unwrap();
    assert_eq!(m.len(), 9000);
    assert!((0..8000u64).all(|i| m.contains(key(i))));
    assert_eq!(m.count(key(3500)), 2);
    assert_eq!(m.check_layout(), Ok(()));
    // Full: unchanged.
    let before = m.clone();
    assert!(matches!(m.merge(&b), Err(Error::Full { .. })));
    assert_eq!(m, before);
    // A resized copy shares the fingerprint space.
    let mut big = b.clone();
    big.resize().unwrap();
    let mut a2 = a.clone();
    a2.merge(&big).unwrap();
    assert_eq!(a2.iter_hashes().collect::<Vec<_>>(), m.iter_hashes().collect::<Vec<_>>());
    let other_seed = Quotient::with_hasher(10_000, 0.01, Hasher::new(HashKind::Xxh3_64, 2)).unwrap();
    assert!(matches!(a.merge(&other_seed), Err(Error::Incompatible { .. })));
    let other_shape = Quotient::with_hasher(20_000, 0.01, h).unwrap();
    assert!(matches!(a.merge(&other_shape), Err(Error::Incompatible { .. })));
}

#[test]
fn round_trip_and_corruption() {
    for r in [1u32, 5, 7, 13, 29, 52] {
        let mut f = Quotient::with_params(3000, r, Hasher::new(HashKind::Xxh64, 4)).unwrap();
        for i in 0..2800u64 {
            f.try_insert(key(i % 2000)).unwrap();
        }
        let bytes = f.to_bytes();
        let g = Quotient::from_bytes(&bytes).unwrap();
        assert_eq!(f, g);
        assert_eq!(f.offsets, g.offsets);
        for cut in [0, 20, 60, bytes.len() / 2, bytes.len() - 1] {
            assert!(Quotient::from_bytes(&bytes[..cut]).is_err(), "cut {cut}");
        }
        for at in (0..bytes.len()).step_by(13) {
            let mut b = bytes.clone();
            b[at] ^= 0x20;
            assert!(Quotient::from_bytes(&b).is_err(), "flip at {at}");
        }
    }
}

/// Encodes a file around a chosen parameter block and payload, with a valid CRC.
fn forge(quotients: u64, r: u32, layout: u32, slots: u64, items: u64, payload: &[u8]) -> Result<Quotient> {
    let mut p = ParamWriter::new();
    p.u64(quotients).u32(r).u32(layout).u64(slots).u64(items).u64(1).f64(0.01);
    let mut e = Encoder::new(FilterKind::Quotient, Hasher::default(), p.as_bytes(), payload.len() as u64);
    e.payload().extend_from_slice(payload);
    Quotient::from_bytes(&e.finish())
}

/// Files with a valid CRC whose rank-and-select table breaks a layout invariant are refused.
#[test]
fn forged_tables_are_errors() {
    let f0 = Quotient::with_params(10, 5, Hasher::default()).unwrap();
    let slots = f0.slots;
    let n = |f: &Quotient, items: u64| {
        let payload: Vec<u8> = f.blocks[..f.blocks.len() - 1].iter().flat_map(|w| w.to_le_bytes()).collect();
        forge(10, 5, 1, slots, items, &payload)
    };
    let mut ok = f0.clone();
    for i in 0..6u64 {
        ok.try_insert(key(i)).unwrap();
    }
    assert!(n(&ok, 6).is_ok());
    assert!(n(&ok, 5).is_err(), "item count");
    let payload: Vec<u8> = ok.to_bytes()[32 + 48..ok.to_bytes().len() - 4].to_vec();
    assert!(forge(10, 5, 1, slots, 6, &payload).is_ok());
    assert!(forge(10, 5, 1, slots + 64, 6, &payload).is_err(), "slot count");
    assert!(forge(10, 5, 2, slots, 6, &payload).is_err(), "layout");
    assert!(forge(0, 5, 1, slots, 6, &payload).is_err());
    assert!(forge(10, 6, 1, slots, 6, &payload).is_err(), "payload length");
    assert!(forge(10, 0, 1, slots, 6, &payload).is_err());
    let with = |edit: &dyn Fn(&mut Quotient)| {
        let mut f = f0.clone();
        edit(&mut f);
        f
    };
    // A run at slot 3 holding remainder 9.
    let one = |f: &mut Quotient| {
        f.set_occupied(3, true);
        f.set_runend(3, true);
        f.set_rem(3, 9);
    };
    assert!(n(&with(&one), 1).is_ok());
    assert!(n(&with(&|f| f.set_rem(3, 9)), 0).is_err(), "remainder in an unused slot");
    assert!(n(&with(&|f| f.set_occupied(3, true)), 0).is_err(), "occupied without a run");
    assert!(n(&with(&|f| f.set_runend(3, true)), 1).is_err(), "run end without a quotient");
    assert!(n(&with(&|f| f.set_occupied(12, true)), 0).is_err(), "occupied overflow slot");
    let unsorted = |f: &mut Quotient| {
        one(f);
        f.set_runend(3, false);
        f.set_runend(4, true);
        f.set_rem(4, 2);
    };
    assert!(n(&with(&unsorted), 2).is_err(), "unsorted run");
    let sorted = |f: &mut Quotient| {
        unsorted(f);
        f.set_rem(4, 10);
    };
    assert!(n(&with(&sorted), 2).is_ok());
    // Two quotients, the second run placed before its home slot.
    let early = |f: &mut Quotient| {
        one(f);
        f.set_occupied(6, true);
        f.set_runend(4, true);
        f.set_rem(4, 1);
    };
    assert!(n(&with(&early), 2).is_err(), "run before its quotient");
}

/// Files of the earlier 3-metadata-bit layout (layout 0) decode into the same set of
/// fingerprints; broken ones are refused. The committed golden file of that layout is
/// checked by the conformance suite (`quotient_classic_golden_still_decodes`).
#[test]
fn classic_layout_files_decode() {
    use classic::Table;
    let (quotients, r) = (10u64, 5u32);
    let slots = quotients + overflow_slots(quotients);
    let empty = || Table {
        bitmaps: [
            vec![0; slots.div_ceil(64) as usize],
            vec![0; slots.div_ceil(64) as usize],
            vec![0; slots.div_ceil(64) as usize],
        ],
        words: vec![0; (slots * r as u64).div_ceil(64) as usize + 1],
        r,
        slots,
        quotients,
    };
    let payload = |t: &Table| {
        let mut out = Vec::new();
        for v in &t.bitmaps {
            out.extend(v.iter().flat_map(|w| w.to_le_bytes()));
        }
        let mut left = (slots * r as u64).div_ceil(8) as usize;
        for w in &t.words {
            let k = left.min(8);
            out.extend_from_slice(&w.to_le_bytes()[..k]);
            left -= k;
        }
        out
    };
    let cells = |c: &[(u64, u64)]| {
        let mut t = empty();
        for &(i, x) in c {
            t.set(i, x);
        }
        forge(quotients, r, 0, slots, c.len() as u64, &payload(&t))
    };
    // Quotient 3: remainders 9 then 1 (unsorted in that layout), quotient 4 shifted to 5.
    let f = cells(&[(3, 9 << 3 | 1), (4, 1 << 3 | 2 | 4 | 1), (5, 7 << 3 | 4)]).unwrap();
    assert_eq!(f.iter_hashes().collect::<Vec<_>>(), vec![3 << r | 1, 3 << r | 9, 4 << r | 7]);
    assert_eq!(f.check_layout(), Ok(()));
    assert_eq!(Quotient::from_bytes(&f.to_bytes()).unwrap(), f);
    assert!(cells(&[(0, 9 << 3 | 4)]).is_err(), "shifted at slot 0");
    assert!(cells(&[(3, 9 << 3)]).is_err(), "remainder in an empty slot");
    assert!(cells(&[(3, 9 << 3 | 2 | 4)]).is_err(), "continuation first");
    assert!(cells(&[(3, 9 << 3 | 1 | 4)]).is_err(), "shifted at home");
    assert!(cells(&[(3, 9 << 3 | 1), (4, 1 << 3 | 2)]).is_err(), "unshifted continuation");
    assert!(cells(&[(3, 9 << 3 | 1), (5, 1 << 3 | 4)]).is_err(), "run without quotient");
    assert!(cells(&[(12, 1)]).is_err(), "occupied overflow slot");
    let t = empty();
    assert!(forge(quotients, r, 0, slots, 1, &payload(&t)).is_err(), "item count");
    assert!(forge(quotients, r, 0, slots + 1, 0, &payload(&t)).is_err(), "slot count");
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u16),
    Remove(u16),
    Resize,
    Merge(Vec<u16>),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            30 => (0u16..400).prop_map(Op::Insert),
            20 => (0u16..400).prop_map(Op::Remove),
            1 => Just(Op::Resize),
            1 => prop::collection::vec(0u16..400, 0..30).prop_map(Op::Merge),
        ],
        1..500,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, rng_seed: proptest::test_runner::RngSeed::Fixed(0x9f1e), ..ProptestConfig::default() })]

    /// Against a multiset model: no false negatives, exact len, and the stored fingerprints
    /// are exactly those of the model's items; `Full` changes nothing; the layout invariants
    /// hold and the offsets are exact after every operation (also when they saturate at a
    /// small cap, which exercises their slow path).
    #[test]
    fn behaves_like_a_multiset(ops in ops(), quotients in 1u64..300, r in 1u32..9, cap in prop_oneof![Just(u8::MAX), 1u8..6]) {
        let h = Hasher::new(HashKind::Xxh3_64, 3);
        let mut f = Quotient::with_params(quotients, r, h).unwrap();
        f.set_offset_cap(cap);
        let mut model: HashMap<u16, usize> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert(k) => {
                    let before = f.clone();
                    match f.try_insert(k.to_le_bytes()) {
                        Ok(new) => {
                            prop_assert!(new || f.count(k.to_le_bytes()) > 1);
                            *model.entry(k).or_default() += 1;
                        }
                        Err(Error::Full { .. }) => prop_assert_eq!(&f, &before),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
                Op::Remove(k) => {
                    if let Some(c) = model.get_mut(&k).filter(|c| **c > 0) {
                        prop_assert!(f.remove(k.to_le_bytes()));
                        *c -= 1;
                    }
                }
                Op::Resize => {
                    if f.remainder_bits() > 1 {
                        f.resize().unwrap();
                    }
                }
                Op::Merge(keys) => {
                    let mut g = Quotient::with_params(f.num_quotients(), f.remainder_bits(), h).unwrap();
                    let added: Vec<u16> =
                        keys.into_iter().filter(|k| g.try_insert(k.to_le_bytes()).is_ok()).collect();
                    let before = f.clone();
                    match f.merge(&g) {
                        Ok(()) => {
                            for k in added {
                                *model.entry(k).or_default() += 1;
                            }
                        }
                        Err(Error::Full { .. }) => prop_assert_eq!(&f, &before),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    }
                }
            }
            prop_assert_eq!(f.check_layout(), Ok(()));
            prop_assert!(offsets_consistent(&f));
            prop_assert_eq!(f.len(), model.values().sum::<usize>());
            let mut want: Vec<u64> = model
                .iter()
                .flat_map(|(k, &c)| {
                    let v = f.fingerprint(h.digest(&k.to_le_bytes()));
                    std::iter::repeat_n(v, c)
                })
                .collect();
            want.sort_unstable();
            prop_assert_eq!(f.iter_hashes().collect::<Vec<_>>(), want);
            for (k, &c) in &model {
                prop_assert!(f.count(k.to_le_bytes()) >= c);
                if c > 0 {
                    prop_assert!(f.contains(k.to_le_bytes()), "false negative for {}", k);
                }
            }
        }
        let g = Quotient::from_bytes(&f.to_bytes()).unwrap();
        prop_assert_eq!(g, f);
    }
}

/// Quotients of the large test filter: 2^22 at `r = 7`, a table of 4.7 MB (huge storage on
/// Linux, so it freezes: 19 copy-on-write pieces).
const BIG_NQ: u64 = 1 << 22;
/// Quotients `GAP..GAP + 1000` hold nothing in the large test filter: the runs spilling from
/// below reach a few dozen slots into the gap at most, so slot `GAP + 900` is free and an
/// insert there takes the free-slot path.
const GAP: u64 = 1_000_000;

/// The stored fingerprints of the large test filter: 90% load (clusters of dozens of slots, so
/// inserts and deletes shift runs), nothing in the gap, sorted.
fn big_fingerprints() -> Vec<u64> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut v: Vec<u64> = (0..BIG_NQ * 9 / 10)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let q = (x >> 7) % (BIG_NQ - 1000);
            let q = if q >= GAP { q + 1000 } else { q };
            q << 7 | (x & 127)
        })
        .collect();
    v.sort_unstable();
    v
}

fn big_quotient(v: &[u64]) -> Quotient {
    let mut f = Quotient::with_params(BIG_NQ, 7, Hasher::default()).unwrap();
    f.build_sorted(v).unwrap();
    f
}

/// Each kind of write, alone while the filter is frozen, changes the live filter and leaves the
/// frozen file as it was at the freeze, whether the filter is dropped before the file is
/// written or not: an insert into a free slot (no shift), an insert shifting runs, one shifting
/// the runs across a piece boundary, a delete shifting runs down, a delete emptying its
/// quotient, a clear, a merge and a resize (both build a new table: the frozen one stays).
#[test]
fn every_write_alone_keeps_the_frozen_file() {
    assert!(Quotient::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
    if !cfg!(target_os = "linux") {
        return; // no huge-page storage, so nothing freezes
    }
    let v = big_fingerprints();
    let base = big_quotient(&v);
    // A member of a long cluster, and the last member below a piece boundary's slot.
    let dense = v[v.len() / 3];
    let per_piece = crate::bits::COW_PIECE as u64 / 8 / base.stride as u64 * 64;
    let boundary = v[v.partition_point(|&x| x >> 7 < 5 * per_piece) - 1];
    // A quotient with a single item, away from the gap.
    let single = v.windows(3).find(|w| w[0] >> 7 != w[1] >> 7 && w[1] >> 7 != w[2] >> 7).unwrap()[1];
    let mut other = Quotient::with_params(BIG_NQ, 7, Hasher::default()).unwrap();
    other.build_sorted(&v[..5000].iter().map(|x| x ^ 1).collect::<Vec<_>>()).unwrap();
    let ops: Vec<crate::format::NamedWrite<'_, Quotient>> = vec![
        (
            "insert into a free slot",
            Box::new(|f: &mut Quotient| {
                let q = GAP + 900;
                assert!(!f.is_runend(q) && f.rem(q) == 0, "slot {q} is free");
                assert_eq!(f.insert_fingerprint(q << 7 | 5), Ok(false));
            }),
        ),
        (
            "insert shifting runs",
            Box::new(|f: &mut Quotient| assert_eq!(f.insert_fingerprint(dense), Ok(true))),
        ),
        (
            "insert at a piece boundary",
            Box::new(|f: &mut Quotient| assert_eq!(f.insert_fingerprint(boundary ^ 3), Ok(false))),
        ),
        ("delete", Box::new(|f: &mut Quotient| assert!(f.remove_fingerprint(dense)))),
        ("delete a quotient's only item", Box::new(|f: &mut Quotient| assert!(f.remove_fingerprint(single)))),
        ("clear", Box::new(|f: &mut Quotient| f.clear())),
        ("merge", Box::new(|f: &mut Quotient| f.merge(&other).unwrap())),
        ("resize", Box::new(|f: &mut Quotient| f.resize().unwrap())),
    ];
    crate::format::assert_each_write_keeps_frozen(&|| base.clone(), |f| f.to_bytes(), Quotient::freeze, &ops);
    // Once written, the frozen file lets go: the filter freezes again.
    let f = base.clone();
    drop(f.freeze());
    assert!(f.freeze().is_some());
}

/// While a snapshot reads the table, an insert or a delete copies aside only the pieces of the
/// slots it shifts: after each, the pieces saved are exactly those where the live table now
/// differs from the frozen one; a shift across a piece boundary saves both pieces.
#[test]
fn a_write_during_a_freeze_copies_only_the_pieces_it_touches() {
    if !cfg!(target_os = "linux") {
        return;
    }
    use crate::bits::COW_PIECE;
    let v = big_fingerprints();
    let mut f = big_quotient(&v);
    // The same writes go to an unfrozen copy, where a candidate write is tried first.
    let mut mirror = f.clone();
    let bytes = |f: &Quotient| f.blocks.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>();
    let pieces = crate::bits::pieces_differing::<u8>;
    let at_freeze = bytes(&f);
    let want_file = f.to_bytes();
    let frozen = f.freeze().unwrap();
    let g = frozen.guard(0);
    assert_eq!(g.len().div_ceil(COW_PIECE), 19);
    // Near each piece boundary: inserts of a copy of members whose runs end just before it
    // (the shift reaches across when a run follows), and deletes of members there.
    let (mut crossed, mut writes) = (0, 0);
    for k in 1..19u64 {
        // The first slot whose remainder bits start in piece k (its block's runend word is in
        // piece k - 1 when the boundary falls among the block's remainder words).
        let word = k * COW_PIECE as u64 / 8;
        let (b, j) = (word / f.stride as u64, word % f.stride as u64);
        let slot = b * 64 + if j >= 2 { ((j - 2) * 64).div_ceil(7) } else { 0 };
        let lo = v.partition_point(|&x| x >> 7 < slot - 120);
        let hi = v.partition_point(|&x| x >> 7 < (b + 1) * 64 + 8);
        // The first candidate write that changes two pieces of the unfrozen copy, else the last.
        let mut pick = None;
        'search: for &x in &v[lo..hi] {
            for insert in [true, false] {
                let mut t = mirror.clone();
                let ok = if insert { t.insert_fingerprint(x | 127).is_ok() } else { t.remove_fingerprint(x) };
                if ok {
                    let two = pieces(&bytes(&mirror), &bytes(&t)).len() == 2;
                    pick = Some((x, insert, two));
                    if two {
                        break 'search;
                    }
                }
            }
        }
        let (x, insert, two) = pick.expect("members near every boundary");
        let saved = g.saved_pieces();
        for q in [&mut f, &mut mirror] {
            if insert {
                assert!(q.insert_fingerprint(x | 127).is_ok());
            } else {
                assert!(q.remove_fingerprint(x));
            }
        }
        writes += 1;
        assert!(g.saved_pieces() <= saved + 2, "one shift, two pieces at most");
        // The pieces saved so far are those changed so far, whichever write changed them first.
        crossed += two as usize;
        assert_eq!(g.saved_pieces(), pieces(&at_freeze, &bytes(&f)).len(), "boundary {k}, insert {insert}");
    }
    assert_eq!(writes, 18);
    assert!(crossed >= 9, "{crossed} of 18 writes shifted runs across a piece boundary");
    assert!(frozen.to_vec() == want_file, "the frozen file is the filter at the freeze");
}
