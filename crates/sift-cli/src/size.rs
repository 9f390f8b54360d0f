//! Parsing of sizes (`114MiB`, `1.5GB`, `958505838` bits) and counts (`1e8`, `100M`, `2_000`).

use anyhow::{bail, Context, Result};

/// Splits `s` into its number and its unit suffix.
fn split_unit(s: &str) -> (&str, &str) {
    let at = s
        .char_indices()
        .find(|&(i, c)| c.is_ascii_alphabetic() && !is_exponent(s, i))
        .map_or(s.len(), |(i, _)| i);
    (s[..at].trim(), s[at..].trim())
}

/// An `e`/`E` between digits (`1e8`, `1.5e-3`) is an exponent, not a unit.
fn is_exponent(s: &str, i: usize) -> bool {
    let b = s.as_bytes();
    matches!(b[i], b'e' | b'E')
        && i > 0
        && b[i - 1].is_ascii_digit()
        && b.get(i + 1).is_some_and(|c| c.is_ascii_digit() || *c == b'-' || *c == b'+')
}

fn number(s: &str) -> Result<f64> {
    let clean: String = s.chars().filter(|c| *c != '_' && *c != ',').collect();
    let v: f64 = clean.parse().with_context(|| format!("`{s}` is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        bail!("`{s}` must be a finite, non-negative number");
    }
    Ok(v)
}

/// A memory size in **bits**. A bare number is bits; `bit`/`bits` too. Byte units
/// (case-insensitive): `B`, `KB`/`K`, `MB`/`M`, `GB`/`G`, `TB`/`T` (powers of 1000) and `KiB`,
/// `MiB`, `GiB`, `TiB` (powers of 1024).
pub fn parse_bits(s: &str) -> Result<u64> {
    let (num, unit) = split_unit(s.trim());
    let v = number(num).with_context(|| format!("invalid size `{s}`"))?;
    let bytes_per_unit: Option<f64> = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bits" => None,
        "b" | "byte" | "bytes" => Some(1.0),
        "k" | "kb" => Some(1e3),
        "m" | "mb" => Some(1e6),
        "g" | "gb" => Some(1e9),
        "t" | "tb" => Some(1e12),
        "kib" => Some(1024.0),
        "mib" => Some(1024.0 * 1024.0),
        "gib" => Some(1024.0 * 1024.0 * 1024.0),
        "tib" => Some(1024.0 * 1024.0 * 1024.0 * 1024.0),
        other => bail!(
            "invalid size `{s}`: unknown unit `{other}` (use bits, B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
        ),
    };
    let bits = match bytes_per_unit {
        None => v,
        Some(b) => v * b * 8.0,
    };
    if bits < 1.0 || bits >= 2f64.powi(63) {
        bail!("invalid size `{s}`: must be between 1 bit and 2^63 bits");
    }
    Ok(bits.round() as u64)
}

/// An item count: `1000000`, `1e6`, `1_000_000`, `1.5M` (`k`, `M`, `G`, `T`: powers of 1000).
pub fn parse_count(s: &str) -> Result<u64> {
    let (num, unit) = split_unit(s.trim());
    let v = number(num).with_context(|| format!("invalid count `{s}`"))?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" | "b" => 1e9,
        "t" => 1e12,
        other => bail!("invalid count `{s}`: unknown suffix `{other}` (use k, M, G, T)"),
    };
    let n = v * mult;
    if n < 1.0 {
        bail!("invalid count `{s}`: must be at least 1");
    }
    if n.fract() != 0.0 {
        bail!("invalid count `{s}`: must be a whole number");
    }
    if n >= 2f64.powi(63) {
        bail!("invalid count `{s}`: larger than sift counts (2^63 - 1, about 9.2e18)");
    }
    Ok(n as u64)
}

/// A false-positive rate: `0.01`, `1%`, `1e-3`, `1/128`.
pub fn parse_fpr(s: &str) -> Result<f64> {
    let t = s.trim();
    let p = if let Some(pct) = t.strip_suffix('%') {
        number(pct).with_context(|| format!("invalid rate `{s}`"))? / 100.0
    } else if let Some((a, b)) = t.split_once('/') {
        number(a).with_context(|| format!("invalid rate `{s}`"))?
            / number(b).with_context(|| format!("invalid rate `{s}`"))?
    } else {
        number(t).with_context(|| format!("invalid rate `{s}`"))?
    };
    if !(p > 0.0 && p < 1.0) {
        bail!("invalid false-positive rate `{s}`: must be strictly between 0 and 1 (e.g. 0.01 or 1%)");
    }
    Ok(p)
}

/// Bytes for humans: `114.26 MiB`.
pub fn human_bytes(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bits("958505838").unwrap(), 958_505_838);
        assert_eq!(parse_bits("114MiB").unwrap(), 114 * 1024 * 1024 * 8);
        assert_eq!(parse_bits("1.5GB").unwrap(), 12_000_000_000);
        assert_eq!(parse_bits("64 bits").unwrap(), 64);
        assert_eq!(parse_bits("8B").unwrap(), 64);
        assert!(parse_bits("12 parsecs").is_err());
        assert!(parse_bits("-5").is_err());
        assert!(parse_bits("0").is_err());
        assert!(parse_bits("").is_err());
    }

    #[test]
    fn counts_and_rates() {
        assert_eq!(parse_count("1e8").unwrap(), 100_000_000);
        assert_eq!(parse_count("100M").unwrap(), 100_000_000);
        assert_eq!(parse_count("1_000").unwrap(), 1000);
        assert!(parse_count("0").is_err());
        assert!(parse_count("1.5").is_err());
        assert_eq!(parse_fpr("1%").unwrap(), 0.01);
        assert_eq!(parse_fpr("1/128").unwrap(), 1.0 / 128.0);
        assert_eq!(parse_fpr("1e-3").unwrap(), 0.001);
        assert!(parse_fpr("1").is_err());
        assert!(parse_fpr("nan").is_err());
        assert_eq!(human_bytes(119_813_232.0), "114.26 MiB");
    }
}
