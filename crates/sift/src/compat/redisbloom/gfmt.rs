//! C's `printf("%g")`, as `BF.DEBUG` prints the error rate of each link (spec §5.7), and
//! `printf("%.17g")`, as Redis 7.0 prints a double reply (sketches spec §2.2).

/// Formats `v` exactly as C's `printf("%g", v)` does (precision 6).
///
/// The value is rounded to 6 significant digits (correctly, ties to even on the exact binary
/// value); with decimal exponent `X`, fixed notation is used when `-4 <= X < 6`, otherwise
/// `d.ddddde±XX`; trailing zeros of the fraction, and a point with nothing after it, are removed.
///
/// ```
/// use sift::compat::redisbloom::format_g;
/// assert_eq!(format_g(0.005), "0.005");
/// assert_eq!(format_g(7.8125e-05), "7.8125e-05");
/// assert_eq!(format_g(0.01 / 512.0), "1.95313e-05");
/// assert_eq!(format_g(f64::from_bits(1)), "4.94066e-324");
/// assert_eq!(format_g(100000.0), "100000");
/// assert_eq!(format_g(1e6), "1e+06");
/// ```
pub fn format_g(v: f64) -> String {
    format_g_precision(v, 6)
}

/// C's `printf("%.Pg", v)` for a precision `P` in 1..=17, with glibc's spellings of the special
/// values (`inf`, `-inf`, `nan`, `-nan` by the NaN's sign bit).
pub(crate) fn format_g_precision(v: f64, precision: usize) -> String {
    debug_assert!((1..=17).contains(&precision));
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    let sign = if v.is_sign_negative() { "-" } else { "" };
    if v.is_infinite() {
        return format!("{sign}inf");
    }
    if v == 0.0 {
        return format!("{sign}0");
    }
    // Rust's `{:.Ne}` rounds the exact binary value to N + 1 significant digits, ties to even,
    // like glibc's printf; only the layout differs ("1.95313e-5").
    let sci = format!("{:.*e}", precision - 1, v.abs());
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` output has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    debug_assert_eq!(digits.len(), precision);
    let body = if (-4..precision as i32).contains(&exp) {
        let fixed = if exp >= 0 {
            let point = exp as usize + 1;
            format!("{}.{}", &digits[..point], &digits[point..])
        } else {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        };
        strip_fraction(&fixed).to_string()
    } else {
        let m = strip_fraction(mantissa);
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{esign}{:02}", exp.unsigned_abs())
    };
    format!("{sign}{body}")
}

/// Removes trailing zeros after a decimal point, then the point itself if nothing follows it.
fn strip_fraction(s: &str) -> &str {
    if !s.contains('.') {
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.')
}

#[cfg(test)]
mod tests {
    use super::format_g;

    #[test]
    fn spec_examples() {
        for (v, s) in [
            (0.005, "0.005"),
            (0.0025, "0.0025"),
            (0.000625, "0.000625"),
            (0.00015625, "0.00015625"),
            (7.8125e-05, "7.8125e-05"),
            (6.25e-05, "6.25e-05"),
            (0.25, "0.25"),
            (0.1, "0.1"),
            (f64::from_bits(1), "4.94066e-324"),
            (0.0, "0"),
            (1.0, "1"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (999999.5, "1e+06"),
            (9.999995e-5, "0.0001"),
            (1e100, "1e+100"),
            (-0.5, "-0.5"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(format_g(v), s, "{v:e}");
        }
    }

    #[test]
    fn halving_sequence_matches_c() {
        // The ratios of a chain that starts at 0.01 and halves per link (expansion fixture).
        assert_eq!(format_g(0.01 / 2.0f64.powi(9)), "1.95313e-05");
        assert_eq!(format_g(0.01 / 2.0f64.powi(4)), "0.000625");
        assert_eq!(format_g(0.01 / 2.0f64.powi(7)), "7.8125e-05");
    }

    #[test]
    fn ties_round_to_even_on_the_exact_value() {
        assert_eq!(format_g(1.000005), "1.00001"); // binary value just above the tie
        assert_eq!(format_g(0.1234565), "0.123456"); // binary value just below the tie
        assert_eq!(format_g(1.0000025e10), "1e+10");
        assert_eq!(format_g(2.0000050e10), "2e+10"); // exact tie: even digit (0) wins
        assert_eq!(format_g(2.0000150e10), "2.00002e+10"); // exact tie: even digit (2) wins
    }

    #[test]
    fn agrees_with_c_printf() {
        // (f64 bits, C printf("%g") output), generated with CPython's correctly rounded '%g',
        // which glibc agrees with: random magnitudes from 1e-330 to 1e30 and halving sequences.
        for (bits, s) in [
            (0x1dabf26aa05d2081, "9.47865e-166"),
            (0x25520c5af4784fa2, "6.50934e-129"),
            (0x0314fb1bdd178010, "8.21274e-294"),
            (0x054b3074a9b3e082, "3.65689e-283"),
            (0x016f3132efb3b56e, "9.09704e-302"),
            (0x11c159469091cdd0, "3.74957e-223"),
            (0x296f6d52b6620f7d, "4.18172e-109"),
            (0x14bdd29abd57c7a4, "9.0713e-209"),
            (0x28374a6cf89e0619, "5.91105e-115"),
            (0x373b9bd7b072ad6c, "1.23802e-42"),
            (0x130bd395e6eeafc1, "6.30626e-217"),
            (0x39489a9b35e08355, "9.47709e-33"),
            (0x389f21fa12c78fa9, "5.85541e-36"),
            (0x009b6c0745896055, "9.76255e-306"),
            (0x002403a61ad72f6d, "5.56665e-308"),
            (0x096d2ea786d518b3, "2.89609e-263"),
            (0x0a84c87c51338604, "5.40686e-258"),
            (0x37f0cb9bede1e35b, "3.08482e-39"),
            (0x43b914b0d9a115f8, "1.80726e+18"),
            (0x3907ba1642293fc3, "5.71204e-34"),
            (0x0f42f1e81846ea5b, "3.72398e-235"),
            (0x3585508869e04fcb, "7.12111e-51"),
            (0x36f5443351e3a439, "5.96012e-44"),
            (0x11278508f84a9512, "4.96414e-226"),
            (0x33d12d8823e73d28, "4.27592e-59"),
            (0x1c91fe4cc3601217, "4.65602e-171"),
            (0x2b7fa28595127ada, "3.61582e-99"),
            (0x15c3ecc3026ab28f, "7.94379e-204"),
            (0x4584287ac7dbf4ac, "7.7983e+26"),
            (0x03e1e9d4fcd2412b, "5.74424e-290"),
            (0x33004b58da105127, "4.95116e-63"),
            (0x1fb90997bccd8acf, "7.29445e-156"),
            (0x19e4b343045d68e7, "6.08959e-184"),
            (0x02e8212c385daa3d, "1.18066e-294"),
            (0x27b0a3bbd516b618, "1.64962e-117"),
            (0x1f94ddeaa39aed49, "1.51985e-156"),
            (0x2f400019f3c26a1b, "4.21698e-81"),
            (0x4232128a9084cba8, "7.76205e+10"),
            (0x368a2bd3a9234603, "5.73026e-46"),
            (0x1c8a49cedb22f4a6, "3.40122e-171"),
            (0x3f847ae147ae147b, "0.01"),
            (0x3d347ae147ae147b, "7.27596e-14"),
            (0x3ae47ae147ae147b, "5.29396e-25"),
            (0x38947ae147ae147b, "3.85186e-36"),
            (0x36447ae147ae147b, "2.8026e-47"),
            (0x33f47ae147ae147b, "2.03916e-58"),
            (0x31a47ae147ae147b, "1.48368e-69"),
            (0x2f547ae147ae147b, "1.07952e-80"),
            (0x2d047ae147ae147b, "7.85455e-92"),
            (0x2ab47ae147ae147b, "5.71494e-103"),
            (0x28647ae147ae147b, "4.15816e-114"),
            (0x26147ae147ae147b, "3.02546e-125"),
            (0x23c47ae147ae147b, "2.20131e-136"),
            (0x21747ae147ae147b, "1.60167e-147"),
            (0x1f247ae147ae147b, "1.16537e-158"),
            (0x1cd47ae147ae147b, "8.47915e-170"),
            (0x1a847ae147ae147b, "6.16939e-181"),
            (0x18347ae147ae147b, "4.48883e-192"),
            (0x15e47ae147ae147b, "3.26605e-203"),
            (0x13947ae147ae147b, "2.37636e-214"),
            (0x11447ae147ae147b, "1.72903e-225"),
            (0x0ef47ae147ae147b, "1.25804e-236"),
            (0x0ca47ae147ae147b, "9.15342e-248"),
            (0x0a547ae147ae147b, "6.65999e-259"),
            (0x08047ae147ae147b, "4.84578e-270"),
            (0x05b47ae147ae147b, "3.52577e-281"),
            (0x03647ae147ae147b, "2.56534e-292"),
            (0x01147ae147ae147b, "1.86653e-303"),
            (0x00000000a3d70a3d, "1.35808e-314"),
            (0x0000000000000000, "0"),
            (0x3f00624dd2f1a9fc, "3.125e-05"),
            (0x3ea0624dd2f1a9fc, "4.88281e-07"),
            (0x3b90624dd2f1a9fc, "8.67362e-22"),
            (0x32d0624dd2f1a9fc, "6.22302e-64"),
        ] {
            let v = f64::from_bits(bits);
            assert_eq!(format_g(v), s, "{v:e}");
        }
    }
}
