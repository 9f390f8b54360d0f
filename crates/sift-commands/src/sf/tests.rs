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
    for (kind, expansion, fp) in [
        (ReserveKind::Blocked, 0, None),
        (ReserveKind::Blocked, 2, None),
        (ReserveKind::Counting, 0, None),
        (ReserveKind::Cuckoo, 0, None),
        (ReserveKind::Cuckoo, 0, Some(16)),
        (ReserveKind::Cuckoo, 2, None),
        (ReserveKind::Quotient, 0, None),
    ] {
        let spec = Spec { kind, error_rate: 0.01, capacity: 500, fingerprint: fp, expansion };
        let mut f = spec.create().unwrap();
        for i in 0..700u32 {
            let _ = f.add(&i.to_le_bytes());
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
        let spec = Spec { kind, error_rate: 0.01, capacity: 20_000, fingerprint: None, expansion: 0 };
        let mut v = SiftFilter::new(spec.create().unwrap());
        let rate = |v: &SiftFilter| DataType::error_rate(v).unwrap();
        assert_eq!(rate(&v).estimate, 0.0, "{kind:?}");
        let target = rate(&v).target.unwrap();
        assert!(target <= 0.01, "{kind:?}: {target}");
        for i in 0..20_000u32 {
            v.filter.as_mut().unwrap().add(&i.to_le_bytes()).unwrap();
        }
        let full = rate(&v).estimate;
        assert!(full > 0.001 && full <= 0.0125, "{kind:?}: {full}");
        if kind != ReserveKind::Cuckoo && kind != ReserveKind::Quotient {
            for i in 20_000..40_000u32 {
                v.filter.as_mut().unwrap().add(&i.to_le_bytes()).unwrap();
            }
            assert!(rate(&v).over_target(), "{kind:?}: {:?}", rate(&v));
        }
    }
}
