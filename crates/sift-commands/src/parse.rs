//! Argument parsing: Redis's strict integer and double parsers (spec §2.4) and
//! case-insensitive keyword tests, shared by the BF/CF handlers and sift-server's generic commands.

/// Redis's `string2ll`: an optional `-`, then digits with no leading zero (`0` alone is fine,
/// `-0`, `00`, `+5`, ` 5`, `1.0` are not), at most 20 characters, fitting in an `i64`.
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    if arg.is_empty() || arg.len() > 20 {
        return None;
    }
    if arg == b"0" {
        return Some(0);
    }
    let (neg, digits) = match arg.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, arg),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    // Accumulate negatively so i64::MIN parses.
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub((d - b'0') as i64)?;
    }
    if neg {
        Some(v)
    } else {
        v.checked_neg()
    }
}

/// A non-negative integer that fits in `u64`-sized counts (cursors, counts): [`parse_i64`] ≥ 0.
pub fn parse_u64(arg: &[u8]) -> Option<u64> {
    parse_i64(arg).and_then(|v| u64::try_from(v).ok())
}

/// Redis 8's double parser (spec §2.4): the whole argument must be a decimal float (optional
/// sign, digits with an optional `.`, optional exponent) or `inf`/`infinity` in any case.
/// NaN, hex floats, spaces and trailing bytes are refused. Overflow gives ±infinity and
/// underflow 0; callers' range checks then reject them with the range error.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if body.is_empty() {
        return None;
    }
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return s.parse::<f64>().ok();
    }
    // Only the decimal grammar: Rust's parser would also take "nan" and "inf" spellings that
    // were handled above, so check the characters first.
    if !body.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')) {
        return None;
    }
    s.parse::<f64>().ok()
}

/// ASCII case-insensitive comparison with a keyword given in any case.
pub fn eq_ignore_case(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}

/// The argument as lossy UTF-8, for error messages that quote it.
pub fn lossy(arg: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(arg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_strict() {
        for (s, v) in [("0", 0), ("1", 1), ("-1", -1), ("9223372036854775807", i64::MAX)] {
            assert_eq!(parse_i64(s.as_bytes()), Some(v), "{s}");
        }
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for s in [
            "",
            "-",
            "-0",
            "00",
            "0100",
            "+5",
            " 5",
            "5 ",
            "1.5",
            "1e3",
            "99999999999999999999",
            "9223372036854775808",
        ] {
            assert_eq!(parse_i64(s.as_bytes()), None, "{s:?}");
        }
    }

    #[test]
    fn doubles_follow_redis8() {
        for (s, v) in
            [("0.01", 0.01), (".5", 0.5), ("5.", 5.0), ("+1e-3", 1e-3), ("-2", -2.0), ("1E2", 100.0)]
        {
            assert_eq!(parse_f64(s.as_bytes()), Some(v), "{s}");
        }
        assert_eq!(parse_f64(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1e-400"), Some(0.0));
        for s in ["", " 1", "1 ", "nan", "NaN", "0x1p-7", "1e", ".", "abc", "1.5x", "infin", "+"] {
            assert_eq!(parse_f64(s.as_bytes()), None, "{s:?}");
        }
    }
}
