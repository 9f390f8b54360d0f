use super::*;
use crate::TypeInfo;

fn reserve_args(a: &[&str]) -> Result<Spec, String> {
    let argv: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
    parse_reserve(&argv)
}

#[test]
fn reserve_options_and_their_errors() {
    let s = reserve_args(&["SF.RESERVE", "k", "0.01", "1000"]).unwrap();
    assert_eq!((s.kind, s.capacity, s.expansion, s.fingerprint), (ReserveKind::Blocked, 1000, 0, None));
    let s =
        reserve_args(&["SF.RESERVE", "k", "0.01", "1000", "kind", "CUCKOO", "FINGERPRINT", "16"]).unwrap();
    assert_eq!((s.kind, s.fingerprint), (ReserveKind::Cuckoo, Some(16)));
    let e = |a: &[&str]| reserve_args(a).unwrap_err();
    assert_eq!(e(&["SF.RESERVE", "k", "x", "10"]), err::BF_BAD_ERROR_RATE);
    assert_eq!(e(&["SF.RESERVE", "k", "1", "10"]), err::BF_ERROR_RATE_RANGE);
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "0"]), capacity_range());
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "1099511627777"]), capacity_range());
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "KIND", "bogus"]), UNKNOWN_KIND);
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "WINDOW", "100"]), WINDOW_NOT_AGING);
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "KIND", "aging"]), AGING_NEEDS_WINDOW);
    assert_eq!(
        e(&["SF.RESERVE", "k", "0.01", "10", "KIND", "aging", "TTL", "5", "WINDOW", "5"]),
        WINDOW_AND_TTL
    );
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "KIND", "aging", "TTL", "0"]), ttl_range());
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "KIND", "aging", "WINDOW", "-1"]), window_range());
    let s = reserve_args(&["SF.RESERVE", "k", "0.01", "1000", "KIND", "aging", "TTL", "86400"]).unwrap();
    assert_eq!((s.kind, s.ttl_ms, s.window), (ReserveKind::Aging, Some(86_400_000), None));
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "KIND", "cuckoo", "TTL", "60"]), WINDOW_NOT_AGING);
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "FINGERPRINT", "12"]), FINGERPRINT_NOT_CUCKOO);
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "KIND", "cuckoo", "FINGERPRINT", "10"]), BAD_FINGERPRINT);
    assert_eq!(
        e(&["SF.RESERVE", "k", "0.01", "10", "KIND", "quotient", "EXPANSION", "2"]),
        expansion_kind(ReserveKind::Quotient)
    );
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "EXPANSION", "5000"]), bad_expansion());
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "KIND"]), err::arity("sf.reserve"));
    assert_eq!(e(&["SF.RESERVE", "k", "0.01", "10", "NOPE", "1"]), err::UNKNOWN_ARGUMENT);
}

/// Every kind SF.RESERVE makes survives its dump (header, file, upload pieces) and its RDB value
/// unchanged, answers included.
#[test]
fn dump_and_rdb_round_trips() {
    for (kind, expansion, fp, window, ttl_ms) in [
        (ReserveKind::Blocked, 0, None, None, None),
        (ReserveKind::Blocked, 2, None, None, None),
        (ReserveKind::Counting, 0, None, None, None),
        (ReserveKind::Cuckoo, 0, None, None, None),
        (ReserveKind::Cuckoo, 0, Some(16), None, None),
        (ReserveKind::Cuckoo, 2, None, None, None),
        (ReserveKind::Quotient, 0, None, None, None),
        (ReserveKind::Aging, 0, None, Some(300), None),
        (ReserveKind::Aging, 0, None, None, Some(60_000)),
    ] {
        let spec = Spec { kind, error_rate: 0.01, capacity: 500, fingerprint: fp, expansion, window, ttl_ms };
        let mut f = spec.create().unwrap();
        for i in 0..700u32 {
            let _ = f.add(&i.to_le_bytes(), 1_000_000 + u64::from(i) * 100);
        }
        let mut v = SiftFilter::new(f);
        v.upload = vec![7u8; DUMP_PIECE + 10];
        let d: &dyn Data = &v;
        let chunks: Vec<_> = d.chunks().collect();
        assert_eq!(chunks.len(), 4, "{kind:?}: header, file, two upload pieces");
        let back = TypeInfo::of::<SiftFilter>()
            .load_chunks(chunks.iter().map(|c| (c.pos, &c.data[..])), &LoadContext::default())
            .unwrap();
        let back = back.downcast_ref::<SiftFilter>().unwrap();
        assert_eq!(back.filter.as_ref().unwrap().to_bytes(), v.filter.as_ref().unwrap().to_bytes());
        assert_eq!(back.upload, v.upload);
        // Chunks out of order are refused.
        let swapped = [(0, &chunks[0].data[..]), (2, &chunks[2].data[..]), (1, &chunks[1].data[..])];
        assert!(TypeInfo::of::<SiftFilter>()
            .load_chunks(swapped.into_iter(), &LoadContext::default())
            .is_err());
        let mut buf = sift::compat::redisbloom::rdb::FieldBuffer::default();
        DataType::rdb_save(&v, &mut buf);
        let back = SiftFilter::rdb_load(&mut buf, 1, &LoadContext::default()).unwrap();
        assert_eq!(back.filter.unwrap().to_bytes(), v.filter.as_ref().unwrap().to_bytes());
    }
}

/// The estimate follows the fill: 0 empty, about the target at capacity, above it past it.
#[test]
fn error_rate_follows_the_fill() {
    for kind in [ReserveKind::Blocked, ReserveKind::Counting, ReserveKind::Cuckoo, ReserveKind::Quotient] {
        let spec = Spec {
            kind,
            error_rate: 0.01,
            capacity: 20_000,
            fingerprint: None,
            expansion: 0,
            window: None,
            ttl_ms: None,
        };
        let mut v = SiftFilter::new(spec.create().unwrap());
        let rate = |v: &SiftFilter| DataType::error_rate(v).unwrap();
        assert_eq!(rate(&v).estimate, 0.0, "{kind:?}");
        let target = rate(&v).target.unwrap();
        assert!(target <= 0.01, "{kind:?}: {target}");
        for i in 0..20_000u32 {
            v.filter.as_mut().unwrap().add(&i.to_le_bytes(), 0).unwrap();
        }
        let full = rate(&v).estimate;
        assert!(full > 0.001 && full <= 0.0125, "{kind:?}: {full}");
        if kind != ReserveKind::Cuckoo && kind != ReserveKind::Quotient {
            for i in 20_000..40_000u32 {
                v.filter.as_mut().unwrap().add(&i.to_le_bytes(), 0).unwrap();
            }
            assert!(rate(&v).over_target(), "{kind:?}: {:?}", rate(&v));
        }
    }
}

/// A window by time: the primary's time decides; the same adds at the same times give the same
/// filter, bit for bit, and an item older than the window (plus a generation) is forgotten when
/// asked at a later time, without the read changing the filter.
#[test]
fn a_window_by_time_follows_the_times_it_is_given() {
    let spec = Spec {
        kind: ReserveKind::Aging,
        error_rate: 0.01,
        capacity: 1000,
        fingerprint: None,
        expansion: 0,
        window: None,
        ttl_ms: Some(60_000),
    };
    let (mut a, mut b) = (spec.create().unwrap(), spec.create().unwrap());
    let t0 = 1_700_000_000_000u64;
    for i in 0..1000u64 {
        let item = format!("i{i}");
        assert_eq!(a.add(item.as_bytes(), t0 + i * 150), b.add(item.as_bytes(), t0 + i * 150));
    }
    assert_eq!(a.to_bytes(), b.to_bytes());
    let end = t0 + 999 * 150;
    assert!((600..1000).all(|i| a.contains(format!("i{i}").as_bytes(), end)));
    let file = a.to_bytes();
    // Two windows later, everything is gone for a reader, and the read changed nothing.
    let later = end + 130_000;
    let still = (0..1000).filter(|i| a.contains(format!("i{i}").as_bytes(), later)).count();
    assert!(still < 30, "{still} of 1000 items older than the window still present");
    assert_eq!(a.to_bytes(), file);
    assert_eq!(a.ttl_seconds(), Some(60));
    assert!(a.oldest_slice_age(end).unwrap() >= 60_000);
}

/// A blocked filter's file is read at the offset of each piece (not streamed from the start):
/// the pieces `SF.DUMP` serves, 16 MiB each, concatenate to exactly the sift file, and any
/// range (in the header, across the header and the payload, across words, into the CRC
/// trailer, past the end) is the same bytes as the file's, with `more` as the file goes on.
#[test]
fn blocked_pieces_are_the_bytes_of_the_file() {
    use sift::prelude::*;
    // 30 million items at 1%: about 41 MB, three pieces.
    let mut big = sift::BlockedBloom::new(30_000_000, 0.01).unwrap();
    for i in 0..1000u32 {
        big.insert(i.to_le_bytes());
    }
    let big = Native::new(sift::AnyFilter::Blocked(big)).unwrap();
    let file = big.to_bytes();
    let (mut joined, mut from, mut pieces) = (Vec::new(), 0, 0);
    loop {
        let piece = big.file_piece(from, DUMP_PIECE);
        if piece.bytes.is_empty() {
            assert!(!piece.more);
            break;
        }
        assert!(piece.bytes.len() <= DUMP_PIECE);
        from += piece.bytes.len();
        joined.extend_from_slice(&piece.bytes);
        pieces += 1;
        assert_eq!(piece.more, from < file.len(), "piece {pieces}");
    }
    assert_eq!(pieces, 3);
    assert!(joined == file, "the pieces are not the file ({} and {} bytes)", joined.len(), file.len());

    let mut small = sift::BlockedBloom::new(1000, 0.01).unwrap();
    for i in 0..700u32 {
        small.insert(i.to_le_bytes());
    }
    let small = Native::new(sift::AnyFilter::Blocked(small)).unwrap();
    let file = small.to_bytes();
    let n = file.len();
    for from in
        [0, 1, 7, 31, 32, 33, 60, 63, 64, 65, 71, 72, 100, n - 5, n - 4, n - 3, n - 1, n, n + 1, n + 100]
    {
        for len in [0, 1, 3, 8, 9, 31, 64, 100, 1000, n] {
            let piece = small.file_piece(from, len);
            let want = &file[from.min(n)..(from + len).min(n)];
            assert!(piece.bytes == want, "bytes {from}..{}", from + len);
            assert_eq!(piece.more, from + len < n, "bytes {from}..{}", from + len);
        }
    }
}

/// `MEMORY USAGE` of a `sift-filt` value counts what it allocates: its struct, the filter's
/// storage and, for the aging filters, their per-slice records (they were left out). A per-user
/// aging filter of a week (`SF.RESERVE key 0.01 282 KIND aging TTL 604800`) takes its bits and
/// about 1 KiB more (the struct was 776 B with the kernels' tables at 532 B, which every
/// `sift-filt` value paid for, whatever its kind; the records were 744 B).
#[test]
fn memory_usage_counts_what_the_value_allocates() {
    let spec = Spec {
        kind: ReserveKind::Aging,
        error_rate: 0.01,
        capacity: 282,
        fingerprint: None,
        expansion: 0,
        window: None,
        ttl_ms: Some(604_800_000),
    };
    let f = spec.create().unwrap();
    let sift::AnyFilter::TimeLimited(tl) = f.as_any() else {
        panic!("a TTL spec makes a time-limited filter")
    };
    let records = tl.num_slices() as usize * 2 * 8;
    let bits = f.size_in_bytes() as usize;
    let usage = DataType::mem_usage(&SiftFilter::new(f));
    eprintln!(
        "struct {} B, bits {bits} B, records {records} B: {usage} B",
        std::mem::size_of::<SiftFilter>()
    );
    assert_eq!(usage, std::mem::size_of::<SiftFilter>() + bits + records);
    assert!(std::mem::size_of::<SiftFilter>() <= 560, "{} B", std::mem::size_of::<SiftFilter>());
    assert!(usage - bits <= 1_100, "{} B besides {bits} B of bits", usage - bits);
}

/// Every chunk of a value's dump, with its position.
fn live_chunks(v: &SiftFilter) -> Vec<(i64, Vec<u8>)> {
    crate::registry::live_chunks(v)
}

use crate::registry::frozen_chunks;

/// A frozen blocked filter, a frozen scalable chain (with a pending upload after it), a frozen
/// counting filter, frozen aging filters (by count and by time), frozen cuckoo filters (one
/// table and a chain), a frozen quotient filter, and the classic, split-block and Guava Bloom
/// filters `SF.LOAD` makes, give the chunks a snapshot of the live value stores at the freeze, byte for
/// byte (the sift file with its CRC), though inserts change the filter before they are read.
/// Small filters are not frozen.
#[test]
fn a_frozen_value_gives_the_snapshot_chunks_of_the_freeze() {
    use sift::Persist;
    let blocked = Spec {
        kind: ReserveKind::Blocked,
        error_rate: 0.01,
        capacity: 5_000_000,
        fingerprint: None,
        expansion: 0,
        window: None,
        ttl_ms: None,
    };
    let scalable = Spec { expansion: 2, ..blocked };
    let counting = Spec { kind: ReserveKind::Counting, capacity: 2_000_000, ..blocked };
    // Over 4 MiB of rows each: a window of 2 million insertions, and of a minute at 2 million.
    let aging = Spec { kind: ReserveKind::Aging, capacity: 0, window: Some(2_000_000), ..blocked };
    let timed = Spec { kind: ReserveKind::Aging, capacity: 2_000_000, ttl_ms: Some(60_000), ..blocked };
    // Tables of 4.9 MB: 3 million items at 12-bit fingerprints.
    let cuckoo = Spec { kind: ReserveKind::Cuckoo, capacity: 3_000_000, ..blocked };
    let scalable_cuckoo = Spec { expansion: 2, ..cuckoo };
    // A table of 5.9 MB: 5 million items at 7-bit remainders.
    let quotient = Spec { kind: ReserveKind::Quotient, capacity: 5_000_000, ..blocked };
    let specs = [
        (blocked, 0),
        (scalable, DUMP_PIECE + 10),
        (counting, 0),
        (aging, 0),
        (timed, 0),
        (cuckoo, 0),
        (scalable_cuckoo, 0),
        (quotient, 0),
    ];
    // The kinds only `SF.LOAD` makes: a classic, a split-block and a Guava Bloom filter of 6 MB
    // each (Guava's file keeps its words big-endian: the frozen file must too).
    use sift::compat::guava::{GuavaBloom, Strategy};
    let loaded = [
        sift::Bloom::with_params(48 << 20, 7, sift::hash::Hasher::default()).unwrap().to_bytes(),
        sift::SplitBlockBloom::with_num_bytes(6 << 20).unwrap().to_bytes(),
        GuavaBloom::with_params(48 << 20, 7, Strategy::Murmur128Mitz64).unwrap().to_bytes(),
    ];
    let values = specs
        .iter()
        .map(|(spec, upload)| (spec.create().unwrap(), *upload))
        .chain(loaded.iter().map(|file| (Native::from_bytes(file).unwrap(), 0)));
    for (native, upload) in values {
        let mut v = SiftFilter::new(native);
        v.upload = (0..upload).map(|i| i as u8).collect();
        let insert = |v: &mut SiftFilter, from: u32, n: u32| {
            let f = v.filter.as_mut().unwrap();
            for i in from..from + n {
                f.add(&i.to_le_bytes(), 0).unwrap();
            }
        };
        insert(&mut v, 0, 1000);
        let live = live_chunks(&v);
        let Some(frozen) = crate::Data::freeze(&v) else {
            if cfg!(target_os = "linux") {
                panic!("a large filter is frozen on Linux");
            }
            return;
        };
        insert(&mut v, 1000, 5000);
        assert_ne!(live_chunks(&v), live);
        assert!(frozen_chunks(&*frozen) == live, "the frozen chunks are the live chunks at the freeze");
    }
    let small = SiftFilter::new(Spec { capacity: 1000, ..blocked }.create().unwrap());
    assert!(crate::Data::freeze(&small).is_none());
    let counting =
        SiftFilter::new(Spec { kind: ReserveKind::Counting, capacity: 1000, ..blocked }.create().unwrap());
    assert!(crate::Data::freeze(&counting).is_none());
    let quotient =
        SiftFilter::new(Spec { kind: ReserveKind::Quotient, capacity: 1000, ..blocked }.create().unwrap());
    assert!(crate::Data::freeze(&quotient).is_none(), "a small quotient filter is copied");
    let guava = GuavaBloom::new(1000, 0.01).unwrap().to_bytes();
    let guava = SiftFilter::new(Native::from_bytes(&guava).unwrap());
    assert!(crate::Data::freeze(&guava).is_none(), "a small Guava filter is copied");
}

/// A static filter (here an xor filter) is frozen by sharing it, whatever its size: the frozen
/// chunks are the value's at the freeze after the key's filter is replaced (as `SF.LOAD`
/// does) and the old one dropped, and the replacement copied nothing (the snapshot holds the
/// only other reference).
#[test]
fn a_static_value_is_shared_with_the_snapshot_not_copied() {
    use sift::Persist;
    let items: Vec<[u8; 4]> = (0..10_000u32).map(|i| i.to_le_bytes()).collect();
    let xor = sift::Xor8::build_with(&items, sift::hash::Hasher::default()).unwrap();
    let mut v = SiftFilter::new(Native::from_bytes(&xor.to_bytes()).unwrap());
    assert!(v.filter.as_mut().unwrap().add(b"x", 0).is_err(), "static: refused");
    let live = live_chunks(&v);
    let frozen = crate::Data::freeze(&v).expect("a static filter is shared");
    let shared = v.filter.as_ref().unwrap().share_static().unwrap();
    assert_eq!(std::sync::Arc::strong_count(&shared), 3, "the value, the snapshot, this test");
    drop(shared);
    assert!(v.filter.as_mut().unwrap().add(b"x", 0).is_err(), "refused while shared");
    let other: Vec<[u8; 4]> = (20_000..21_000u32).map(|i| i.to_le_bytes()).collect();
    let replacement = sift::Xor8::build_with(&other, sift::hash::Hasher::default()).unwrap();
    v.filter = Some(Native::from_bytes(&replacement.to_bytes()).unwrap());
    assert_ne!(live_chunks(&v), live);
    drop(v);
    assert!(frozen_chunks(&*frozen) == live, "the frozen chunks are the value's at the freeze");
}
