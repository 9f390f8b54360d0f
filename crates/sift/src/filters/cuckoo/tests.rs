use super::bucket::first_empty;
use super::eviction::BFS_NODES;
use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

/// One-sided 99.9% binomial upper bound on a measured rate with true rate `p` over `n` trials.
fn upper(p: f64, n: f64) -> f64 {
    p + 3.1 * (p * (1.0 - p) / n).sqrt()
}

#[test]
fn rejects_bad_parameters() {
    assert!(matches!(Cuckoo::new(0, 0.01), Err(Error::InvalidParameter { name: "expected_items", .. })));
    for p in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY, 1e-5] {
        assert!(matches!(Cuckoo::new(10, p), Err(Error::InvalidParameter { name: "fpr", .. })), "p = {p}");
    }
    assert!(matches!(Cuckoo::new(usize::MAX, 0.01), Err(Error::CapacityExceeded { .. })));
    let h = Hasher::default();
    assert!(matches!(Cuckoo::with_params(0, 12, h), Err(Error::InvalidParameter { name: "buckets", .. })));
    for bits in [0, 4, 7, 9, 10, 13, 15, 17, 32] {
        assert!(
            matches!(Cuckoo::with_params(10, bits, h), Err(Error::InvalidParameter { name: "fp_bits", .. })),
            "bits = {bits}"
        );
    }
    assert!(matches!(Cuckoo::with_params(u64::MAX, 16, h), Err(Error::CapacityExceeded { .. })));
}

#[test]
fn sizing() {
    assert_eq!(Cuckoo::new(1000, 0.05).unwrap().fingerprint_bits(), 8);
    assert_eq!(Cuckoo::new(1000, 0.01).unwrap().fingerprint_bits(), 12);
    assert_eq!(Cuckoo::new(1000, 0.001).unwrap().fingerprint_bits(), 16);
    let f = Cuckoo::new(1_000_000, 0.01).unwrap();
    assert_eq!(f.num_buckets(), 263_158); // ⌈1e6 / 3.8⌉, not a power of two
                                          // 12-bit buckets are 48 bits: 263,158 · 6 bytes, plus 8 guard bytes.
    assert_eq!(f.table.len(), 263_158 * 6 + 8);
}

#[test]
fn packed_buckets_round_trip_for_every_width() {
    for bits in FINGERPRINT_BITS {
        let mut f = Cuckoo::with_params(37, bits, Hasher::default()).unwrap();
        let max = (1u64 << bits) - 1;
        let val = |i: u64, j: usize| ((i * 7919 + j as u64 * 104_729) % max + 1) as u16;
        for i in 0..37 {
            let mut b = 0;
            for j in 0..BUCKET_SLOTS {
                b = f.with_slot(b, j, val(i, j));
            }
            f.set_bucket(i, b);
        }
        for i in 0..37 {
            let b = f.bucket(i);
            for j in 0..BUCKET_SLOTS {
                assert_eq!(f.slot_of(b, j), val(i, j), "bits {bits} bucket {i} slot {j}");
            }
        }
        assert!(f.table[f.table.len() - 8..].iter().all(|&b| b == 0), "guard bytes untouched");
    }
}

#[test]
fn swar_probe_agrees_with_slot_by_slot_scan() {
    // Random bucket words with many empty slots and repeated fingerprints (small values),
    // so that zero fields, equal fields and borrows across fields all occur.
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for f in FINGERPRINT_BITS {
        let mask = (1u64 << f) - 1;
        for _ in 0..200_000 {
            let r = next();
            let mut b = 0u64;
            let mut slots = [0u16; 4];
            for (j, s) in slots.iter_mut().enumerate() {
                let v = match (r >> (8 * j)) & 3 {
                    0 => 0,
                    1 => (r >> 40) & 3,
                    _ => (r >> (16 + 8 * j)) & mask,
                };
                *s = v as u16;
                b |= v << (j as u32 * f);
            }
            let fp =
                ((next() & 3) as u16).max(1) | if r & (1 << 60) != 0 { (next() & mask) as u16 } else { 0 };
            assert_eq!(bucket_has(b, fp, f), slots.contains(&fp), "f={f} b={b:#x} fp={fp}");
            assert_eq!(first_empty(b, f), slots.iter().position(|&s| s == 0), "f={f} b={b:#x}");
            let exact: u64 = (0..4).filter(|&j| slots[j] == 0).map(|j| 1u64 << (j as u32 * f + f - 1)).sum();
            assert_eq!(empty_fields(b, f), exact, "f={f} b={b:#x}");
        }
    }
}

/// The breadth-first search as it was before its levels were checked in batches: every child
/// of a level generated, then checked in order.
fn place_bfs_reference<const F: u32>(f: &mut Cuckoo, i1: u64, i2: u64, b1: u64, b2: u64, fp: u16) -> bool {
    // Node `k`: bucket `at[k]` (full), contents `word[k]`, reached from node `from[k]` by
    // moving the fingerprint in slot `via[k]` of that node (roots: `from = NONE`).
    const NONE: u8 = u8::MAX;
    let mut at = [0u64; BFS_NODES];
    let mut word = [0u64; BFS_NODES];
    let mut from = [NONE; BFS_NODES];
    let mut via = [0u8; BFS_NODES];
    at[0] = i1;
    word[0] = b1;
    let mut len = 1;
    if i2 != i1 {
        at[1] = i2;
        word[1] = b2;
        len = 2;
    }
    // Widths are constants here (`F`), so slot extraction and the slot index of an empty
    // field need no run-time shift amounts or division.
    let bb = BUCKET_SLOTS as u64 * F as u64;
    let mask = (1u64 << F) - 1;
    let slot = |b: u64, j: usize| ((b >> (j as u32 * F)) & mask) as u16;
    let with = |b: u64, j: usize, v: u16| (b & !(mask << (j as u32 * F))) | (v as u64) << (j as u32 * F);
    let mut level = 0..len;
    for _ in 0..BFS_DEPTH {
        // Children of this level: every fingerprint's other bucket, skipping buckets already
        // on the node's own path (a chain must not move a fingerprint twice).
        let first_child = len;
        'nodes: for k in level.clone() {
            for j in 0..BUCKET_SLOTS {
                if len == BFS_NODES {
                    break 'nodes;
                }
                let c = f.alt(at[k], slot(word[k], j));
                let mut a = k;
                let on_path = loop {
                    if at[a] == c {
                        break true;
                    }
                    if from[a] == NONE {
                        break false;
                    }
                    a = from[a] as usize;
                };
                if on_path {
                    continue;
                }
                prefetch(&f.table[(c * (bb / 8)) as usize]);
                at[len] = c;
                from[len] = k as u8;
                via[len] = j as u8;
                len += 1;
            }
        }
        for c in first_child..len {
            let b = f.bucket_at(at[c], bb);
            if let Some(e) = first_empty(b, F) {
                // Apply the chain from its end: each fingerprint moves one step down it,
                // and `fp` takes the slot freed in a root.
                let (mut node, mut js, mut dst, mut dst_slot) = (from[c] as usize, via[c] as usize, c, e);
                loop {
                    let v = slot(f.bucket_at(at[node], bb), js);
                    let d = with(f.bucket_at(at[dst], bb), dst_slot, v);
                    f.put_at(at[dst], bb, d);
                    if from[node] == NONE {
                        let r = with(f.bucket_at(at[node], bb), js, fp);
                        f.put_at(at[node], bb, r);
                        return true;
                    }
                    (dst, dst_slot) = (node, js);
                    (node, js) = (from[node] as usize, via[node] as usize);
                }
            }
            word[c] = b;
        }
        level = first_child..len;
        if level.is_empty() {
            break;
        }
    }
    false
}

/// The insert as specified before its fast paths (two-choice placement): the bucket with
/// more empty slots (the primary on a tie) by a slot-by-slot count, its lowest empty slot;
/// both full: the general breadth-first search, then the walk. Written plainly, as the
/// reference the optimised insert must match bit for bit.
fn insert_reference(f: &mut Cuckoo, d: Digest) -> Result<bool> {
    let (i1, fp) = f.locate(d);
    let i2 = f.alt(i1, fp);
    let was_present = f.count_digest(d) > 0;
    let (b1, b2) = (f.bucket(i1), f.bucket(i2));
    let empty = |b: u64| (0..BUCKET_SLOTS).filter(|&j| f.slot_of(b, j) == 0).count();
    let (n1, n2) = (empty(b1), empty(b2));
    if n1 + n2 == 0 {
        let found = match f.fp_bits {
            8 => place_bfs_reference::<8>(f, i1, i2, b1, b2, fp),
            12 => place_bfs_reference::<12>(f, i1, i2, b1, b2, fp),
            _ => place_bfs_reference::<16>(f, i1, i2, b1, b2, fp),
        };
        if !found {
            f.place(i1, fp, d.h1 ^ d.h2.rotate_left(17))?;
        }
    } else {
        assert!(f.try_put(if n2 > n1 { i2 } else { i1 }, fp));
    }
    f.items += 1;
    Ok(!was_present)
}

/// The insert (two-word store, first two search levels inline) leaves exactly the table,
/// stash and answers of the reference insert, for every width and layout, bucket counts
/// from 1 (both buckets the same) and 2-3 (adjacent, overlapping 8-byte windows) up, through
/// searches of every depth, walks, the stash and `Full`, with removes in between.
#[test]
fn insert_matches_the_reference_bit_for_bit() {
    let mut deep = 0;
    for bits in FINGERPRINT_BITS {
        for (nb, layout) in
            [1u64, 2, 3, 5, 37, 1000, 20_000].into_iter().flat_map(|nb| [(nb, LAYOUT_WEYL), (nb, LAYOUT_MIX)])
        {
            let mut f = Cuckoo::with_params(nb, bits, Hasher::new(HashKind::Xxh3_64, nb)).unwrap();
            f.layout = layout;
            let mut g = f.clone();
            // The scalar insert (every insert on other targets) on its own.
            let mut h = f.clone();
            let mut k = 0u64;
            let mut fails = 0;
            while fails < 3 {
                let d = Digest::from_u64(mix64(k ^ (bits as u64) << 40));
                let (a, b) = (f.try_insert_digest(d), insert_reference(&mut g, d));
                let c = match bits {
                    8 => h.insert_scalar::<8>(d),
                    12 => h.insert_scalar::<12>(d),
                    _ => h.insert_scalar::<16>(d),
                };
                assert_eq!(a, b, "bits {bits} nb {nb} layout {layout} key {k}");
                assert_eq!(c, b, "bits {bits} nb {nb} layout {layout} key {k}");
                if nb <= 1000 || k % 1024 == 0 {
                    assert_eq!(f, g, "bits {bits} nb {nb} layout {layout} key {k}");
                    assert_eq!(h, g, "bits {bits} nb {nb} layout {layout} key {k}");
                }
                fails += a.is_err() as u32;
                if k % 7 == 3 {
                    let r = Digest::from_u64(mix64((k / 2) ^ (bits as u64) << 40));
                    let removed = g.remove_digest(r);
                    assert_eq!(f.remove_digest(r), removed);
                    assert_eq!(h.remove_digest(r), removed);
                }
                k += 1;
            }
            assert_eq!(f, g, "bits {bits} nb {nb} layout {layout}");
            assert_eq!(h, g, "bits {bits} nb {nb} layout {layout}");
            deep += (f.stash_len() > 0) as u32;
        }
    }
    assert!(deep > 10, "the stash was reached in only {deep} tables");
}

/// The unchecked bucket words of the x86-64 fast paths against the checked [`Cuckoo::word`]
/// (their safe fallback) at every bucket, last bucket and guard bytes included, for every
/// width and several bucket counts; and a store through `set_bucket_word` lands where the
/// checked slice write would.
#[cfg(target_arch = "x86_64")]
#[test]
fn unchecked_bucket_words_match_the_checked_ones() {
    fn check<const F: u32>(buckets: u64) {
        let mut f = Cuckoo::with_params(buckets, F, Hasher::default()).unwrap();
        let step = BUCKET_SLOTS * F as usize / 8;
        let len = f.table.len();
        assert_eq!(len, buckets as usize * step + 8);
        for (k, b) in f.table[..len - 8].iter_mut().enumerate() {
            *b = (k as u8).wrapping_mul(151).wrapping_add(7);
        }
        for i in 0..buckets {
            assert_eq!(f.bucket_word::<F>(i), f.word(i as usize * step), "F = {F}, bucket {i}");
        }
        let mut g = f.clone();
        for i in [0, buckets / 2, buckets - 1] {
            let v = 0x0123_4567_89ab_cdef_u64.rotate_left(i as u32);
            f.set_bucket_word::<F>(i, v);
            let at = i as usize * step;
            g.table[at..at + 8].copy_from_slice(&v.to_le_bytes());
            assert_eq!(f.table[..], g.table[..], "F = {F}, bucket {i}");
        }
    }
    for buckets in [1, 2, 3, 7, 64, 1000] {
        check::<8>(buckets);
        check::<12>(buckets);
        check::<16>(buckets);
    }
}

/// The SSE2 field arithmetic of the insert and of the query against the scalar one, on words
/// with empty fields, repeated fingerprints and junk past the bucket (the next bucket's bytes).
#[cfg(target_arch = "x86_64")]
#[test]
fn sse2_insert_words_match_the_scalar_fields() {
    fn check<const F: u32>(w1: u64, w2: u64, fp: u16) {
        let (e1, e2) = (empty_fields(w1, F), empty_fields(w2, F));
        let got = sse2::insert_words::<F>(w1, w2, fp);
        if e1 | e2 == 0 {
            assert!(got.is_none(), "F={F} {w1:#x} {w2:#x}");
            return;
        }
        let (v1, v2, present) = got.expect("room");
        let second = e2.count_ones() > e1.count_ones();
        let put = |w: u64, e: u64| w | (fp as u64) << (e.trailing_zeros() + 1 - F);
        let want = if second { (w1, put(w2, e2)) } else { (put(w1, e1), w2) };
        assert_eq!((v1, v2), want, "F={F} {w1:#x} {w2:#x} fp {fp}");
        assert_eq!(present, bucket_has(w1, fp, F) | bucket_has(w2, fp, F), "F={F} {w1:#x} {w2:#x}");
    }
    // The query's test against the scalar one on the buckets alone (junk masked off).
    fn check_has<const F: u32>(w1: u64, w2: u64, fp: u16) -> bool {
        let m = u64::MAX >> (64 - 4 * F);
        let want = bucket_has(w1 & m, fp, F) | bucket_has(w2 & m, fp, F);
        assert_eq!(sse2::has_words::<F>(w1, w2, fp), want, "F={F} {w1:#x} {w2:#x} fp {fp}");
        want
    }
    let mut answers = [0u32; 2];
    let mut x = 0x0123_4567_89ab_cdefu64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..100_000 {
        let (r, junk) = (next(), next());
        let word = |f: u32, r: u64, fp: u64| {
            let mut b = 0u64;
            for j in 0..4 {
                let v = match (r >> (8 * j)) & 3 {
                    0 => 0,
                    1 => fp,
                    _ => (r >> (16 + 8 * j)) & ((1 << f) - 1),
                };
                b |= v << (j as u32 * f);
            }
            b
        };
        for f in FINGERPRINT_BITS {
            let fp = ((junk >> 20) & ((1 << f) - 1)).max(1);
            // Junk in the bits past the bucket (none for F = 16: the bucket is the word).
            let high = |j: u64| if f == 16 { 0 } else { j << (4 * f) };
            let (w1, w2) =
                (word(f, r, fp) | high(junk), word(f, r.rotate_left(29), fp) | high(junk.rotate_left(8)));
            match f {
                8 => check::<8>(w1, w2, fp as u16),
                12 => check::<12>(w1, w2, fp as u16),
                _ => check::<16>(w1, w2, fp as u16),
            }
            let has = match f {
                8 => check_has::<8>(w1, w2, fp as u16),
                12 => check_has::<12>(w1, w2, fp as u16),
                _ => check_has::<16>(w1, w2, fp as u16),
            };
            answers[has as usize] += 1;
        }
    }
    // Both answers are exercised many times.
    assert!(answers.iter().all(|&n| n > 10_000), "{answers:?}");
}

#[test]
fn alternate_bucket_is_an_involution_for_any_count() {
    for (nb, layout) in [1u64, 2, 3, 5, 7, 100, 263_158, (1 << 20) + 1]
        .into_iter()
        .flat_map(|nb| [(nb, LAYOUT_MIX), (nb, LAYOUT_WEYL)])
    {
        let f = Cuckoo::with_params(nb.min(1000), 8, Hasher::default()).unwrap();
        let f = Cuckoo { buckets: nb, layout, ..f };
        for fp in 1..=255u16 {
            for i in [0, 1, nb / 2, nb - 1].into_iter().filter(|&i| i < nb) {
                let j = f.alt(i, fp);
                assert!(j < nb);
                assert_eq!(f.alt(j, fp), i, "nb {nb} fp {fp} i {i}");
            }
        }
    }
}

#[test]
fn duplicates_count_and_remove() {
    let mut f = Cuckoo::new(1000, 0.01).unwrap();
    assert_eq!(f.try_insert("a"), Ok(true));
    assert_eq!(f.try_insert("a"), Ok(false));
    assert_eq!(f.count("a"), 2);
    assert_eq!(f.len(), 2);
    assert!(f.remove("a"));
    assert!(f.contains("a"));
    assert!(f.remove("a"));
    assert!(!f.contains("a"));
    assert!(!f.remove("a"));
    assert!(f.is_empty());
    // 2b copies fill both buckets, 4 more go to the stash, then the filter refuses.
    for _ in 0..2 * BUCKET_SLOTS + STASH_SLOTS {
        f.try_insert("b").unwrap();
    }
    assert_eq!(f.count("b"), 2 * BUCKET_SLOTS + STASH_SLOTS);
    assert!(matches!(f.try_insert("b"), Err(Error::Full { .. })));
    assert!(!f.insert("b"));
    assert_eq!(f.len(), 12);
}

/// Fills a filter of `n` items until it refuses one; checks the load and that nothing was lost.
#[test]
fn full_filter_reaches_95_percent_and_loses_nothing() {
    let mut f = Cuckoo::new(1_000_000, 0.01).unwrap();
    let mut i = 0u64;
    let err = loop {
        match f.try_insert_hash(mix64(i)) {
            Ok(_) => i += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::Full { .. }));
    assert_eq!(f.len() as u64, i);
    assert_eq!(f.stash_len(), STASH_SLOTS);
    let load = f.load_factor();
    println!("cuckoo 12-bit, nb = {}: full at load {load:.4} ({i} items)", f.num_buckets());
    assert!(load >= 0.95, "load {load}");
    assert!(i >= 1_000_000, "sized for 1e6, took {i}");
    let before = f.clone();
    // Further failures leave the filter bit-for-bit unchanged.
    for k in 0..20 {
        if f.try_insert_hash(mix64(u64::MAX - k)).is_ok() {
            break;
        }
        assert_eq!(f, before);
    }
    assert!((0..i).all(|k| f.contains_hash(mix64(k))), "an item was lost");
    // Removing frees room again.
    for k in 0..1000 {
        assert!(f.remove_hash(mix64(k)));
    }
    assert!((1000..i).all(|k| f.contains_hash(mix64(k))));
    f.try_insert_hash(mix64(0)).unwrap();
}

#[test]
fn fpr_within_binomial_bound_for_every_width() {
    const PROBES: u64 = 2_000_000;
    for (bits, nominal) in [(8u32, 0.0294), (12, 0.001_85), (16, 0.000_116)] {
        let mut f = Cuckoo::with_params(50_000, bits, Hasher::new(HashKind::Xxh3_64, 7)).unwrap();
        let n = (f.num_buckets() as f64 * 4.0 * 0.95) as u64;
        for i in 0..n {
            f.try_insert(i.to_le_bytes()).unwrap();
        }
        let fp = (n..n + PROBES).filter(|i| f.contains(i.to_le_bytes())).count();
        let measured = fp as f64 / PROBES as f64;
        let p = f.expected_fpr();
        println!("cuckoo {bits}-bit at load {:.3}: FPR {measured:.6} (formula {p:.6})", f.load_factor());
        assert!((p - nominal).abs() / nominal < 0.03, "formula {p} vs {nominal}");
        // Model error: the formula ignores the variance of the filter's own contents (about 1%
        // relative for these sizes, measured over 6 seeds with 10M probes each).
        assert!(measured <= upper(p * 1.01, PROBES as f64), "{bits} bits: {measured} > bound of {p}");
        // Not vacuous: a filter that never matched would fail this lower bound.
        assert!(measured >= p - 3.1 * (p * (1.0 - p) / PROBES as f64).sqrt() - 0.05 * p, "{measured}");
    }
}

#[test]
fn round_trip_with_stash_and_corruption() {
    let mut f = Cuckoo::with_params(50, 12, Hasher::new(HashKind::Xxh64, 3)).unwrap();
    let mut i = 0u32;
    while f.try_insert(i.to_le_bytes()).is_ok() {
        i += 1;
    }
    assert_eq!(f.stash_len(), STASH_SLOTS);
    for k in 0..10u32 {
        f.remove(k.to_le_bytes());
    }
    let bytes = f.to_bytes();
    let g = Cuckoo::from_bytes(&bytes).unwrap();
    assert_eq!(f, g);
    assert!((10..i).all(|k| g.contains(k.to_le_bytes())));
    for cut in [0, 10, 40, bytes.len() / 2, bytes.len() - 1] {
        assert!(Cuckoo::from_bytes(&bytes[..cut]).is_err(), "cut {cut}");
    }
    for at in (0..bytes.len()).step_by(7) {
        let mut b = bytes.clone();
        b[at] ^= 0x04;
        assert!(Cuckoo::from_bytes(&b).is_err(), "flip at {at}");
    }
    for bits in FINGERPRINT_BITS {
        let mut f = Cuckoo::with_params(13, bits, Hasher::default()).unwrap();
        for k in 0..30u32 {
            f.try_insert(k.to_be_bytes()).unwrap();
        }
        assert_eq!(Cuckoo::from_bytes(&f.to_bytes()).unwrap(), f);
        assert_eq!(f.to_bytes().len(), 32 + 48 + Cuckoo::table_bytes(13, bits) as usize + 4);
    }
}

/// A table of layout 0 (the alternate-bucket function of earlier versions, as decoded from
/// an old file) keeps working: inserts (which move fingerprints with *its* function),
/// queries, removes, and files that keep saying layout 0.
#[test]
fn layout_zero_tables_keep_working() {
    let mut f = Cuckoo::with_params(2_000, 12, Hasher::default()).unwrap();
    f.layout = LAYOUT_MIX;
    let n = 7_600u64; // 95% load: kicks, searches and walks all happen
    for k in 0..n {
        f.try_insert_hash(mix64(k)).unwrap();
    }
    assert!((0..n).all(|k| f.contains_hash(mix64(k))));
    let bytes = f.to_bytes();
    assert_eq!(u32::from_le_bytes(bytes[32 + 44..32 + 48].try_into().unwrap()), LAYOUT_MIX);
    let mut g = Cuckoo::from_bytes(&bytes).unwrap();
    assert_eq!(g, f);
    for k in 0..100 {
        assert!(g.remove_hash(mix64(k)));
    }
    assert!((100..n).all(|k| g.contains_hash(mix64(k))));
    // The same keys in a layout-1 table land elsewhere: the layouts are not interchangeable.
    let mut h = Cuckoo::with_params(2_000, 12, Hasher::default()).unwrap();
    for k in 0..n {
        h.try_insert_hash(mix64(k)).unwrap();
    }
    assert_ne!(h.table, f.table);
}

/// Well-formed files (valid CRC) with inconsistent contents are refused.
#[test]
fn forged_parameters_are_errors() {
    let forge_layout =
        |buckets: u64, bits: u32, slots: u32, items: u64, stash: u32, layout: u32, payload: &[u8]| {
            let mut p = ParamWriter::new();
            p.u64(buckets).u32(bits).u32(slots).u64(items).u64(1).f64(0.01).u32(stash).u32(layout);
            let mut e =
                Encoder::new(FilterKind::Cuckoo, Hasher::default(), p.as_bytes(), payload.len() as u64);
            e.payload().extend_from_slice(payload);
            Cuckoo::from_bytes(&e.finish())
        };
    let forge = |buckets: u64, bits: u32, slots: u32, items: u64, stash: u32, payload: &[u8]| {
        forge_layout(buckets, bits, slots, items, stash, LAYOUT_WEYL, payload)
    };
    let ok = |r: Result<Cuckoo>| r.is_ok();
    assert!(ok(forge_layout(2, 12, 4, 0, 0, LAYOUT_MIX, &[0; 12])));
    assert_eq!(forge_layout(2, 12, 4, 0, 0, LAYOUT_MIX, &[0; 12]).unwrap().layout, LAYOUT_MIX);
    assert!(!ok(forge_layout(2, 12, 4, 0, 0, 2, &[0; 12])), "unknown layout");
    assert!(ok(forge(2, 12, 4, 0, 0, &[0; 12])));
    assert!(!ok(forge(0, 12, 4, 0, 0, &[])));
    assert!(!ok(forge(2, 10, 4, 0, 0, &[0; 10])));
    assert!(!ok(forge(2, 12, 2, 0, 0, &[0; 6])));
    assert!(!ok(forge(2, 12, 4, 0, 0, &[0; 11])), "short table");
    assert!(!ok(forge(u64::MAX, 16, 4, 0, 0, &[0; 12])), "huge table, small payload");
    assert!(!ok(forge(2, 12, 4, 1, 0, &[0; 12])), "item count");
    assert!(ok(forge(2, 12, 4, 1, 0, &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])));
    let mut stash = vec![0u8; 12];
    stash.extend_from_slice(&1u64.to_le_bytes());
    stash.extend_from_slice(&5u32.to_le_bytes());
    stash.extend_from_slice(&0u32.to_le_bytes());
    assert!(ok(forge(2, 12, 4, 1, 1, &stash)));
    assert!(!ok(forge(1, 12, 4, 1, 1, &stash[6..])), "stash bucket out of range");
    assert!(!ok(forge(2, 12, 4, 1, 5, &stash)), "stash too long");
    let mut big_fp = stash.clone();
    big_fp[21] = 0x10; // fingerprint 0x1005 does not fit in 12 bits
    assert!(!ok(forge(2, 12, 4, 1, 1, &big_fp)));
    // 3 buckets of 12 bits: 144 bits = 18 bytes exactly; 1 bucket: 48 bits = 6 bytes.
    assert!(ok(forge(3, 12, 4, 0, 0, &[0; 18])));
    assert!(!ok(forge(3, 12, 4, 0, 0, &[0; 19])), "trailing payload byte");
    // 3 buckets of 8-bit slots: 12 bytes; a set bit past the end is refused via the count.
    assert!(!ok(forge(3, 8, 4, 0, 0, &[0; 8])));
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u16),
    Remove(u16),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![3 => (0u16..300).prop_map(Op::Insert), 2 => (0u16..300).prop_map(Op::Remove)],
        1..600,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, rng_seed: proptest::test_runner::RngSeed::Fixed(0x51f7), ..ProptestConfig::default() })]

    /// Against a multiset model: no false negatives, counts at least the model's, len exact,
    /// a refused insert changes nothing; small tables so that kicks, the stash and
    /// `Full` all happen.
    #[test]
    fn behaves_like_a_multiset(ops in ops(), buckets in 1u64..40, w in 0usize..3) {
        let bits = FINGERPRINT_BITS[w];
        let mut f = Cuckoo::with_params(buckets, bits, Hasher::new(HashKind::Xxh3_64, 11)).unwrap();
        let mut model: HashMap<u16, usize> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert(k) => {
                    let before = f.clone();
                    match f.try_insert(k.to_le_bytes()) {
                        Ok(new) => {
                            if model.get(&k).copied().unwrap_or(0) > 0 {
                                prop_assert!(!new);
                            }
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
            }
            prop_assert_eq!(f.len(), model.values().sum::<usize>());
            for (k, &c) in &model {
                prop_assert!(f.count(k.to_le_bytes()) >= c);
                if c > 0 {
                    prop_assert!(f.contains(k.to_le_bytes()), "false negative for {}", k);
                }
            }
        }
        let g = Cuckoo::from_bytes(&f.to_bytes()).unwrap();
        prop_assert_eq!(g, f);
    }
}

/// A table of 4 MiB (huge storage on Linux, so it freezes: 16 copy-on-write pieces) at 93%
/// load, where most inserts evict.
fn big_cuckoo() -> Cuckoo {
    let mut f = Cuckoo::with_params(1 << 19, 16, Hasher::default()).unwrap();
    for i in 0..1_950_000u32 {
        f.try_insert(i.to_le_bytes()).unwrap();
    }
    f
}

/// An item whose two buckets' 8-byte words overlap (adjacent or equal buckets): its insert
/// takes the scalar path's single write even when its buckets have room.
fn overlapping_item(f: &Cuckoo) -> Vec<u8> {
    let step = BUCKET_SLOTS as u64 * f.fp_bits as u64 / 8;
    (0u64..)
        .map(|i| format!("overlap {i}").into_bytes())
        .find(|item| {
            let (i1, fp) = f.locate(f.hot.digest(item));
            let i2 = f.alt(i1, fp);
            (i1 * step).abs_diff(i2 * step) < 8 && f.matches(i1, 0) + f.matches(i2, 0) > 0
        })
        .expect("some item")
}

/// A kind of write, by name, for the test that runs each alone.
type NamedWrite = (&'static str, fn(&mut Cuckoo));

/// Each kind of write, alone while the table is frozen, changes the live filter and leaves the
/// frozen file as it was at the freeze (table, stash and counts), whether the filter is dropped
/// before the file is written or not: an insert with room in both buckets (on x86-64 and in
/// the scalar code every other target runs), inserts that evict,
/// an insert whose buckets overlap, a remove, a clear. One write at a time, so that a write
/// skipping its guard fails this test.
#[test]
fn every_write_alone_keeps_the_frozen_file() {
    assert!(Cuckoo::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
    if !cfg!(target_os = "linux") {
        return; // no huge-page storage, so nothing freezes
    }
    let ops: [NamedWrite; 7] = [
        ("insert", |f| {
            // The first of these new items with room in both buckets.
            let item = (0u32..)
                .map(|i| format!("roomy {i}"))
                .find(|item| {
                    let (i1, fp) = f.locate(f.hot.digest(item.as_bytes()));
                    f.matches(i1, 0) > 0 && f.matches(f.alt(i1, fp), 0) > 0
                })
                .unwrap();
            assert!(f.try_insert(item).unwrap());
        }),
        ("scalar insert (every insert off x86-64)", |f| {
            let item = (0u32..)
                .map(|i| format!("roomy {i}"))
                .find(|item| {
                    let (i1, fp) = f.locate(f.hot.digest(item.as_bytes()));
                    let i2 = f.alt(i1, fp);
                    i1.abs_diff(i2) > 1 && f.matches(i1, 0) > 0 && f.matches(i2, 0) > 0
                })
                .unwrap();
            assert!(f.insert_scalar::<16>(f.hot.digest(item.as_bytes())).unwrap());
        }),
        ("scalar insert into the alternate bucket", |f| {
            let item = (0u32..)
                .map(|i| format!("second {i}"))
                .find(|item| {
                    let (i1, fp) = f.locate(f.hot.digest(item.as_bytes()));
                    let i2 = f.alt(i1, fp);
                    i1.abs_diff(i2) > 1 && f.matches(i1, 0) == 0 && f.matches(i2, 0) > 0
                })
                .unwrap();
            assert!(f.insert_scalar::<16>(f.hot.digest(item.as_bytes())).unwrap());
        }),
        ("inserts that evict", |f| {
            for i in 0..2_000u32 {
                let _ = f.try_insert(format!("more {i}"));
            }
        }),
        ("insert with overlapping buckets", |f| {
            let item = overlapping_item(f);
            assert!(f.try_insert(item).unwrap());
        }),
        ("remove", |f| assert!(f.remove(7u32.to_le_bytes()))),
        ("clear", |f| f.clear()),
    ];
    let big = big_cuckoo();
    for (name, op) in ops {
        for drop_first in [false, true] {
            let mut f = big.clone();
            let before = f.to_bytes();
            let frozen = f.freeze().expect("a large table freezes");
            assert!(f.freeze().is_none(), "frozen already");
            op(&mut f);
            assert_ne!(f.to_bytes(), before, "{name} changed the filter");
            if drop_first {
                drop(f);
            }
            assert!(frozen.to_vec() == before, "{name} changed the frozen file (drop first: {drop_first})");
        }
    }
}

/// An insert with room copies aside only the pieces of its two buckets: at most 2, and every
/// piece it changes.
#[test]
fn an_insert_during_a_freeze_copies_only_the_pieces_it_touches() {
    if !cfg!(target_os = "linux") {
        return;
    }
    use crate::bits::COW_PIECE;
    let mut f = Cuckoo::with_params(1 << 19, 16, Hasher::default()).unwrap();
    for i in 0..100_000u32 {
        f.try_insert(i.to_le_bytes()).unwrap();
    }
    let at_freeze: Vec<u8> = f.table.to_vec();
    let frozen = f.freeze().unwrap();
    let g = frozen.guard(0);
    assert_eq!(g.len().div_ceil(COW_PIECE), 17, "16 pieces and the guard bytes'");
    let changed = |f: &Cuckoo| crate::bits::pieces_differing(&f.table[..], &at_freeze).len();
    for i in 0..5u32 {
        let saved = g.saved_pieces();
        f.try_insert(format!("x{i}")).unwrap();
        assert!(g.saved_pieces() <= saved + 2, "two buckets, two pieces at most");
        // Both buckets' words are stored, the unchosen one unchanged: a piece may be saved
        // that did not change, never one changed without being saved.
        assert!(changed(&f) <= g.saved_pieces(), "after insert {i}");
    }
    assert!(g.saved_pieces() >= 5);
}

/// A frozen chain whose first table is large: the file of the freeze after inserts into the
/// first table, into a new one, and removes from both.
#[test]
fn a_frozen_scalable_cuckoo_keeps_its_file() {
    use crate::ScalableCuckoo;
    assert!(ScalableCuckoo::new(1000, 0.01).unwrap().freeze().is_none(), "small: copied");
    if !cfg!(target_os = "linux") {
        return;
    }
    // A first table of 4.9 MB (3 million items at 12-bit fingerprints).
    let mut f = ScalableCuckoo::new(3_000_000, 0.01).unwrap();
    for i in 0..100_000u32 {
        f.insert(i.to_le_bytes());
    }
    let before = f.to_bytes();
    let frozen = f.freeze().expect("a large first table freezes");
    for i in 100_000..3_200_000u32 {
        f.insert(i.to_le_bytes());
    }
    assert!(f.num_tables() > 1, "a second table");
    assert!(f.remove(3u32.to_le_bytes()) && f.remove(3_100_000u32.to_le_bytes()));
    assert_ne!(f.to_bytes(), before);
    assert!(frozen.to_vec() == before, "the frozen chain is the chain at the freeze");
}
