//! The text of a double in a Redis reply (spec `redisbloom-sketches.md` §2.2).
//!
//! RedisBloom hands every double (`TOPK.INFO` decay, the t-digest answers) to the server's reply
//! writer, so the bytes depend on the Redis version, not on RedisBloom. Both texts are here:
//!
//! * [`DoubleFormat::Printf17g`], Redis 7.0 and older: C's `printf("%.17g")`, with `inf` / `-inf`,
//!   and `nan` / `-nan` by the sign bit of the NaN (glibc's spelling).
//! * [`DoubleFormat::D2String`], Redis 7.2 and later (what current RedisBloom answers): `nan` for
//!   every NaN, `inf` / `-inf`, `0` / `-0`, integral values in [−2^62, 2^62] as integers, and
//!   everything else as Grisu2 lays it out (Florian Loitsch, "Printing Floating-Point Numbers
//!   Quickly and Accurately with Integers", PLDI 2010), in the variant Redis ships as
//!   `fpconv_dtoa`: its cached powers of ten, its digit generation and its final "weed" step,
//!   which in about 0.1 % of cases give one digit more than the shortest round trip, or another
//!   last digit. Those outputs are reproduced too, so replies are byte-identical.
//!
//! Both texts parse back to the same `f64` for every finite value.

use std::sync::OnceLock;

use super::gfmt::format_g_precision;

/// Which Redis version's double text to produce (§2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DoubleFormat {
    /// Redis 7.0 (the fixtures' server): `printf("%.17g")`, `inf`, `-inf`, `nan`, `-nan`.
    Printf17g,
    /// Redis 7.2 and later (current RedisBloom): `d2string`, shortest-digit Grisu2 output.
    #[default]
    D2String,
}

/// The text of `v` in a reply, without the RESP framing: RESP2 sends it as a bulk string, RESP3
/// as `,<text>\r\n`.
///
/// ```
/// use sift::compat::redisbloom::{format_double, DoubleFormat};
/// assert_eq!(format_double(0.9, DoubleFormat::Printf17g), "0.90000000000000002");
/// assert_eq!(format_double(0.9, DoubleFormat::D2String), "0.9");
/// assert_eq!(format_double(1e21, DoubleFormat::D2String), "1e+21");
/// assert_eq!(format_double(3.0, DoubleFormat::D2String), "3");
/// assert_eq!(format_double(-f64::NAN, DoubleFormat::Printf17g), "-nan");
/// assert_eq!(format_double(-f64::NAN, DoubleFormat::D2String), "nan");
/// ```
pub fn format_double(v: f64, format: DoubleFormat) -> String {
    match format {
        DoubleFormat::Printf17g => format_g_precision(v, 17),
        DoubleFormat::D2String => d2string(v),
    }
}

/// Redis ≥ 7.2's `d2string`.
fn d2string(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    const LIMIT: f64 = (1u64 << 62) as f64;
    if (-LIMIT..=LIMIT).contains(&v) && v.trunc() == v {
        return (v as i64).to_string();
    }
    let neg = v < 0.0;
    let (digits, k) = grisu2(v.abs());
    let mut out = String::with_capacity(digits.len() + 8);
    if neg {
        out.push('-');
    }
    layout(&mut out, &digits, k, neg);
    out
}

/// Lays out the digits `D` (ASCII) with `|v| = D · 10^k` as `fpconv_dtoa` does.
fn layout(out: &mut String, digits: &[u8], k: i32, neg: bool) {
    let n = digits.len() as i32;
    let first_exp = (k + n - 1).abs();
    let text = |d: &[u8]| std::str::from_utf8(d).expect("ASCII digits").to_owned();
    if k >= 0 && first_exp < n + 7 {
        out.push_str(&text(digits));
        out.extend(std::iter::repeat_n('0', k as usize));
        return;
    }
    if k < 0 && (k > -7 || first_exp < 4) {
        let point = n + k;
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&text(digits));
        } else {
            out.push_str(&text(&digits[..point as usize]));
            out.push('.');
            out.push_str(&text(&digits[point as usize..]));
        }
        return;
    }
    // Scientific. fpconv caps the digits at 18 (17 for negative values); Grisu2 never produces
    // that many for a double, the cap is kept for fidelity.
    let n = (n as usize).min(18 - neg as usize);
    out.push(digits[0] as char);
    if n > 1 {
        out.push('.');
        out.push_str(&text(&digits[1..n]));
    }
    let e = k + n as i32 - 1;
    out.push('e');
    out.push(if e < 0 { '-' } else { '+' });
    out.push_str(&e.unsigned_abs().to_string());
}

/// A "do-it-yourself floating point" value `f · 2^e` (Loitsch's `diy_fp`).
#[derive(Clone, Copy)]
struct Fp {
    f: u64,
    e: i32,
}

impl Fp {
    /// The upper 64 bits of the 128-bit product, rounded half up (the low half's top bit).
    fn mul(self, o: Fp) -> Fp {
        let p = self.f as u128 * o.f as u128 + (1u128 << 63);
        Fp { f: (p >> 64) as u64, e: self.e + o.e + 64 }
    }
}

const HIDDEN: u64 = 1 << 52;
/// Cached powers 10^k for k = −348, −340, …, 340 (87 entries), as fpconv and Grisu use them.
const FIRST_POW: i32 = -348;
const POW_STEP: i32 = 8;
const NPOWERS: usize = 87;

/// The normalised 64-bit significand (top bit set) and binary exponent of 10^k, rounded half up.
/// Computed once, exactly, with a small big-integer routine instead of a table of constants.
fn cached_powers() -> &'static [Fp; NPOWERS] {
    static TABLE: OnceLock<[Fp; NPOWERS]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [Fp { f: 0, e: 0 }; NPOWERS];
        for (i, slot) in t.iter_mut().enumerate() {
            *slot = pow10_fp(FIRST_POW + POW_STEP * i as i32);
        }
        t
    })
}

/// Little-endian base-2^32 natural numbers: just what [`pow10_fp`] needs.
fn big_mul_small(a: &mut Vec<u32>, m: u32) {
    let mut carry = 0u64;
    for limb in a.iter_mut() {
        let v = *limb as u64 * m as u64 + carry;
        *limb = v as u32;
        carry = v >> 32;
    }
    if carry != 0 {
        a.push(carry as u32);
    }
}

fn big_div_small(a: &mut Vec<u32>, d: u32) {
    let mut rem = 0u64;
    for limb in a.iter_mut().rev() {
        let v = (rem << 32) | *limb as u64;
        *limb = (v / d as u64) as u32;
        rem = v % d as u64;
    }
    while a.last() == Some(&0) {
        a.pop();
    }
}

fn big_bits(a: &[u32]) -> u32 {
    match a.last() {
        None => 0,
        Some(&top) => (a.len() as u32 - 1) * 32 + (32 - top.leading_zeros()),
    }
}

/// Bits `[from, from + 65)` of `a`, as a u128 (bit `from` is the lowest).
fn big_window(a: &[u32], from: u32) -> u128 {
    let mut v = 0u128;
    for i in 0..65u32 {
        let bit = from + i;
        let limb = a.get((bit / 32) as usize).copied().unwrap_or(0);
        v |= (((limb >> (bit % 32)) & 1) as u128) << i;
    }
    v
}

/// 10^k as `f · 2^e` with `2^63 <= f < 2^64`, `f` rounded to nearest (ties up).
fn pow10_fp(k: i32) -> Fp {
    // Scale to an integer N = floor(10^k · 2^s) with far more than 65 significant bits, take its
    // top 65 bits and round the last one away (ties up). The floor only drops bits below bit 0,
    // which the top 65 bits never include, so the result is the exactly rounded significand.
    let (n, s) = if k >= 0 {
        let mut n = vec![1u32];
        for _ in 0..k {
            big_mul_small(&mut n, 10);
        }
        (n, 0i32)
    } else {
        // 2^s with s large enough for 128 significant bits after dividing by 10^-k.
        let s = (-k as f64 * std::f64::consts::LOG2_10).ceil() as i32 + 130;
        let mut n = vec![0u32; (s / 32) as usize + 1];
        n[(s / 32) as usize] = 1 << (s % 32);
        for _ in 0..-k {
            big_div_small(&mut n, 10);
        }
        (n, s)
    };
    let bits = big_bits(&n) as i32;
    if bits <= 64 {
        // Small powers are exact: shift up to normalise.
        let mut v = 0u64;
        for (i, limb) in n.iter().enumerate() {
            v |= (*limb as u64) << (32 * i);
        }
        let sh = 64 - bits;
        return Fp { f: v << sh, e: -sh - s };
    }
    let from = (bits - 65) as u32;
    let w = big_window(&n, from);
    // Round half up on the 65th bit, as the Python generator of the original tables did.
    let mut f = (w + 1) >> 1;
    let mut e = from as i32 + 1 - s;
    if f == 1u128 << 64 {
        f >>= 1;
        e += 1;
    }
    Fp { f: f as u64, e }
}

/// The cached power whose product with a value of binary exponent `exp` lands in
/// [−60, −32], and its decimal exponent k (10^k).
fn find_cached_pow10(exp: i32) -> (Fp, i32) {
    const ONE_LOG_TEN: f64 = 0.301_029_995_663_981_14;
    let approx = (-(exp + NPOWERS as i32) as f64 * ONE_LOG_TEN) as i32;
    let mut idx = ((approx - FIRST_POW) / POW_STEP) as usize;
    let powers = cached_powers();
    loop {
        let cur = exp + powers[idx].e + 64;
        if cur < -60 {
            idx += 1;
        } else if cur > -32 {
            idx -= 1;
        } else {
            return (powers[idx], FIRST_POW + idx as i32 * POW_STEP);
        }
    }
}

const TENS: [u64; 20] = {
    let mut t = [0u64; 20];
    let mut i = 0;
    while i < 20 {
        let mut v = 1u64;
        let mut j = 0;
        while j < 19 - i {
            v *= 10;
            j += 1;
        }
        t[i] = v;
        i += 1;
    }
    t
};

/// Grisu2 of a positive finite `d`: the digits and the decimal exponent K, `d ≈ D · 10^K`.
fn grisu2(d: f64) -> (Vec<u8>, i32) {
    let bits = d.to_bits();
    let mut frac = bits & (HIDDEN - 1);
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let exp = if biased != 0 {
        frac += HIDDEN;
        biased - 1075
    } else {
        -1074
    };
    // The upper and lower boundaries of the rounding interval, normalised to the same exponent.
    let mut upper = Fp { f: (frac << 1) + 1, e: exp - 1 };
    while upper.f & (HIDDEN << 1) == 0 {
        upper.f <<= 1;
        upper.e -= 1;
    }
    upper.f <<= 10;
    upper.e -= 10;
    let lshift = if frac == HIDDEN { 2 } else { 1 };
    let mut lower = Fp { f: (frac << lshift) - 1, e: exp - lshift };
    lower.f <<= lower.e - upper.e;
    lower.e = upper.e;
    let mut w = Fp { f: frac, e: exp };
    while w.f & HIDDEN == 0 {
        w.f <<= 1;
        w.e -= 1;
    }
    w.f <<= 11;
    w.e -= 11;

    let (cp, k) = find_cached_pow10(upper.e);
    let w = w.mul(cp);
    let mut upper = upper.mul(cp);
    let mut lower = lower.mul(cp);
    lower.f += 1;
    upper.f -= 1;
    let mut big_k = -k;
    let digits = generate_digits(w, upper, lower, &mut big_k);
    (digits, big_k)
}

fn generate_digits(w: Fp, upper: Fp, lower: Fp, big_k: &mut i32) -> Vec<u8> {
    let wfrac = upper.f.wrapping_sub(w.f);
    let mut delta = upper.f.wrapping_sub(lower.f);
    let shift = (-upper.e) as u32;
    let one = 1u64 << shift;
    let mut part1 = upper.f >> shift;
    let mut part2 = upper.f & (one - 1);
    let mut digits = Vec::with_capacity(20);

    // Integral part: at most 10 digits (part1 < 2^32).
    let mut kappa = 10i32;
    let mut di = 10usize;
    while kappa > 0 {
        let div = TENS[di];
        let digit = part1 / div;
        if digit != 0 || !digits.is_empty() {
            digits.push(b'0' + digit as u8);
        }
        part1 -= digit * div;
        kappa -= 1;
        di += 1;
        let rest = (part1 << shift).wrapping_add(part2);
        if rest <= delta {
            *big_k += kappa;
            weed(&mut digits, delta, rest, div << shift, wfrac);
            return digits;
        }
    }
    // Fractional part.
    let mut unit = 18usize;
    loop {
        part2 = part2.wrapping_mul(10);
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let digit = part2 >> shift;
        if digit != 0 || !digits.is_empty() {
            digits.push(b'0' + digit as u8);
        }
        part2 &= one - 1;
        if part2 < delta {
            *big_k += kappa;
            weed(&mut digits, delta, part2, one, wfrac.wrapping_mul(TENS[unit]));
            return digits;
        }
        unit -= 1;
    }
}

/// Moves the last digit towards the exact value while the result stays inside the interval.
fn weed(digits: &mut [u8], delta: u64, mut rem: u64, kappa: u64, frac: u64) {
    let Some(last) = digits.last_mut() else { return };
    while rem < frac
        && delta - rem >= kappa
        && (rem.wrapping_add(kappa) < frac || frac - rem > rem.wrapping_add(kappa) - frac)
    {
        *last -= 1;
        rem = rem.wrapping_add(kappa);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cur(v: f64) -> String {
        format_double(v, DoubleFormat::D2String)
    }
    fn old(v: f64) -> String {
        format_double(v, DoubleFormat::Printf17g)
    }

    #[test]
    fn spec_examples_redis70() {
        for (v, s) in [
            (0.9, "0.90000000000000002"),
            (1.5, "1.5"),
            (-0.0, "-0"),
            (1e-10, "1e-10"),
            (0.05, "0.050000000000000003"),
            (-1.7e308, "-1.6999999999999999e+308"),
            (f64::NAN, "nan"),
            (-f64::NAN, "-nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (1e17, "1e+17"),
            (1e16, "10000000000000000"),
            (123456.0, "123456"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
        ] {
            assert_eq!(old(v), s, "{v:e}");
        }
    }

    #[test]
    fn spec_examples_current() {
        for (v, s) in [
            (f64::NAN, "nan"),
            (-f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (0.0, "0"),
            (-0.0, "-0"),
            (3.0, "3"),
            (-12.0, "-12"),
            (1_000_000.0, "1000000"),
            (1e21, "1e+21"),
            (123456789012345680000.0, "123456789012345680000"),
            (0.0002, "0.0002"),
            (5.5, "5.5"),
            (0.05, "0.05"),
            (1.7e308, "1.7e+308"),
            (3.92156862745098e-4, "3.92156862745098e-4"),
            (1e-10, "1e-10"),
            (0.9, "0.9"),
            (4611686018427387904.0, "4611686018427387904"),
            (4611686018427387904.0 * 2.0, "9223372036854776000"),
            (-1.7e308, "-1.7e+308"),
            (0.1 + 0.2, "0.30000000000000004"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(cur(v), s, "{v:e}");
        }
    }

    #[test]
    fn cached_powers_are_normalised_and_exact_where_small() {
        let t = cached_powers();
        for (i, p) in t.iter().enumerate() {
            assert!(p.f >> 63 == 1, "entry {i}");
        }
        // The table steps from 10^-4 to 10^4 around 1; 10^4 is exact.
        let i = ((-4 - FIRST_POW) / POW_STEP) as usize;
        assert_eq!((t[i + 1].f, t[i + 1].e), (10_000u64 << 50, -50));
        // 10^-4 · 2^77 = 0xd1b71758e219652b.d3…: rounded up.
        assert_eq!((t[i].f, t[i].e), (0xd1b7_1758_e219_652c, -77));
        // Known entries of the published Grisu tables (10^-348 and 10^340).
        assert_eq!((t[0].f, t[0].e), (0xfa8f_d5a0_081c_0288, -1220));
        assert_eq!((t[NPOWERS - 1].f, t[NPOWERS - 1].e), (0xaf87_023b_9bf0_ee6b, 1066));
    }

    /// Grisu2's digits always read back to the same double; they are never shorter than the
    /// shortest round-trip digits (which Rust's `{:e}` prints), and rarely longer.
    #[test]
    fn round_trips_on_random_doubles() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut longer = 0;
        let n = 200_000;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if !v.is_finite() || v == 0.0 {
                continue;
            }
            let s = cur(v);
            assert_eq!(s.parse::<f64>().unwrap(), v, "{s}");
            let shortest = format!("{:e}", v.abs());
            let sd = shortest.split('e').next().unwrap().replace('.', "").len();
            let (digits, _) = grisu2(v.abs());
            assert!(digits.len() >= sd, "{v:e}: {s}");
            longer += (digits.len() > sd) as u32;
        }
        // About 0.1 % of values get a longer digit string (spec §2.2).
        assert!(longer < n / 100, "{longer}");
    }
}
