//! Run-time configuration: the eight RedisBloom parameters of spec §3 (with their validation
//! and coupled cuckoo bounds) and the server settings clients read or set (`save`,
//! `appendonly`, `databases`, `maxmemory`, `requirepass`, ...).
//!
//! One [`Params`] value holds everything; the server keeps it behind a lock and replaces it as
//! a whole on `CONFIG SET`, so a multi-pair CONFIG SET is all-or-nothing. The same setter is used
//! for start-up flags and the config file, so their validation is byte-for-byte the command's.
//! `CONFIG GET` returns the string last set, byte for byte (spec §3).

use crate::cmd::parse::{parse_f64, parse_i64};

// The defaults the BF/CF handlers read are the command layer's own types (one definition for
// both consumers); this module adds their validation and the server settings.
pub use sift_commands::config::{BloomDefaults, CuckooDefaults, MAX_CAPACITY};

/// How a parameter is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// bf-error-rate.
    ErrorRate,
    /// An integer in a range; the cuckoo ones have moving bounds.
    Int(i64, i64),
    CfBucketSize,
    CfInitialSize,
    /// `maxmemory`: a size with an optional unit.
    Memory,
    /// Another size with an optional unit, kept as its string (read where it is used).
    Size,
    /// `maxclients`.
    Clients,
    /// `yes`/`no`.
    Bool,
    /// `appendfsync`.
    Fsync,
    /// Any string (save, requirepass).
    Text,
    /// Set only at start-up.
    Immutable,
}

/// (canonical name, kind). The order is CONFIG GET's order.
const PARAMS: &[(&str, Kind)] = &[
    ("bf-error-rate", Kind::ErrorRate),
    ("bf-initial-size", Kind::Int(1, MAX_CAPACITY)),
    ("bf-expansion-factor", Kind::Int(0, 32768)),
    ("cf-bucket-size", Kind::CfBucketSize),
    ("cf-initial-size", Kind::CfInitialSize),
    ("cf-max-iterations", Kind::Int(1, 65535)),
    ("cf-expansion-factor", Kind::Int(0, 32768)),
    ("cf-max-expansions", Kind::Int(1, 65536)),
    ("port", Kind::Immutable),
    ("bind", Kind::Immutable),
    ("dir", Kind::Immutable),
    ("databases", Kind::Immutable),
    ("appendonly", Kind::Bool),
    ("appendfsync", Kind::Fsync),
    ("save", Kind::Text),
    ("auto-aof-rewrite-percentage", Kind::Int(0, i64::MAX)),
    ("auto-aof-rewrite-min-size", Kind::Size),
    ("maxmemory", Kind::Memory),
    ("maxclients", Kind::Clients),
    ("requirepass", Kind::Text),
];

/// Older load-time names RedisBloom still accepts (spec §3).
const ALIASES: &[(&str, &str)] = &[
    ("error_rate", "bf-error-rate"),
    ("initial_size", "bf-initial-size"),
    ("cf_max_expansions", "cf-max-expansions"),
];

/// A rejected value, rendered by [`ConfigError::message`] as Redis does (the command layer's
/// type: the module's `CONFIG SET` refuses values with the same texts).
pub use sift_commands::config::ConfigError;

/// The server's configuration.
#[derive(Debug, Clone)]
pub struct Params {
    /// The string CONFIG GET returns for each of [`PARAMS`], same order.
    strings: Vec<String>,
    /// BF defaults.
    pub bloom: BloomDefaults,
    /// CF defaults and bounds.
    pub cuckoo: CuckooDefaults,
    /// `requirepass`; `None` when empty.
    pub requirepass: Option<String>,
    /// `maxmemory` in bytes; 0 = unlimited.
    pub maxmemory: u64,
    /// `maxclients`.
    pub maxclients: usize,
}

impl Default for Params {
    fn default() -> Self {
        let strings = PARAMS
            .iter()
            .map(|(n, _)| {
                match *n {
                    "bf-error-rate" => "0.01",
                    "bf-initial-size" => "100",
                    "bf-expansion-factor" => "2",
                    "cf-bucket-size" => "2",
                    "cf-initial-size" => "1024",
                    "cf-max-iterations" => "20",
                    "cf-expansion-factor" => "1",
                    "cf-max-expansions" => "32",
                    "port" => "6379",
                    "bind" => "127.0.0.1",
                    "dir" => "./sift-data",
                    "databases" => "1",
                    "appendonly" => "yes",
                    "appendfsync" => "always",
                    "save" => "3600 1 300 100 60 10000",
                    "auto-aof-rewrite-percentage" => "100",
                    "auto-aof-rewrite-min-size" => "64mb",
                    "maxmemory" => "0",
                    "maxclients" => "10000",
                    "requirepass" => "",
                    _ => unreachable!("every parameter has a default"),
                }
                .to_string()
            })
            .collect();
        Params {
            strings,
            bloom: BloomDefaults::default(),
            cuckoo: CuckooDefaults::default(),
            requirepass: None,
            maxmemory: 0,
            maxclients: 10000,
        }
    }
}

fn canonical(name: &str) -> Option<(usize, Kind)> {
    let lower = name.to_ascii_lowercase();
    let lower = ALIASES.iter().find(|(a, _)| *a == lower).map(|(_, c)| c.to_string()).unwrap_or(lower);
    PARAMS.iter().position(|(n, _)| *n == lower).map(|i| (i, PARAMS[i].1))
}

/// Parses a memory size as redis.conf does: bytes, or with `k`/`kb`/`m`/`mb`/`g`/`gb` (any case;
/// `k` = 1000, `kb` = 1024).
pub fn parse_memory(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let split = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let mul: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mul)
}

impl Params {
    /// Sets one parameter. `startup` allows the immutable ones (flags, config file).
    pub fn set(&mut self, name: &str, value: &[u8], startup: bool) -> Result<(), ConfigError> {
        let (i, kind) = canonical(name).ok_or_else(|| ConfigError::Unknown(name.to_string()))?;
        let canon = PARAMS[i].0;
        let text = String::from_utf8_lossy(value).into_owned();
        let invalid = |reason: String| ConfigError::Invalid(name.to_string(), reason);
        let not_a_number = || invalid(format!("Invalid value for `{canon}`"));
        let int_in = |lo: i64, hi: i64| -> Result<i64, ConfigError> {
            let v = parse_i64(value).ok_or_else(not_a_number)?;
            if v < lo || v > hi {
                return Err(invalid(format!("Value for `{canon}` must be in the range [{lo}, {hi}]")));
            }
            Ok(v)
        };
        let mut stored = text.clone();
        match kind {
            Kind::ErrorRate => {
                let v = parse_f64(value).ok_or_else(not_a_number)?;
                if !(v > 0.0 && v < 1.0) {
                    return Err(invalid(format!(
                        "Value for `{canon}` must be in the range (0.000000, 1.000000)"
                    )));
                }
                if v > 0.25 {
                    self.bloom.error_rate = 0.25;
                    stored = "0.25".into();
                } else {
                    self.bloom.error_rate = v;
                }
            }
            Kind::Int(lo, hi) => {
                let v = int_in(lo, hi)?;
                match canon {
                    "bf-initial-size" => self.bloom.initial_size = v,
                    "bf-expansion-factor" => self.bloom.expansion = v,
                    "cf-max-iterations" => self.cuckoo.max_iterations = v,
                    "cf-expansion-factor" => self.cuckoo.expansion = v,
                    "cf-max-expansions" => self.cuckoo.max_expansions = v,
                    // Read by persistence where it is used.
                    "auto-aof-rewrite-percentage" => {}
                    _ => unreachable!("every Int parameter is handled"),
                }
            }
            Kind::CfBucketSize => {
                let v = int_in(1, self.cuckoo.bucket_size_max)?;
                self.cuckoo.bucket_size = v;
                self.cuckoo.initial_size_min = 2 * v;
            }
            Kind::CfInitialSize => {
                let v = int_in(self.cuckoo.initial_size_min, MAX_CAPACITY)?;
                self.cuckoo.initial_size = v;
                self.cuckoo.bucket_size_max = (v / 2).min(255);
            }
            Kind::Memory => {
                self.maxmemory =
                    parse_memory(&text).ok_or_else(|| invalid("argument must be a memory value".into()))?;
            }
            Kind::Size => {
                parse_memory(&text).ok_or_else(|| invalid("argument must be a memory value".into()))?;
            }
            Kind::Clients => {
                let v = int_in(1, 1_000_000)?;
                self.maxclients = v as usize;
            }
            Kind::Bool => {
                stored = text.to_ascii_lowercase();
                if stored != "yes" && stored != "no" {
                    return Err(invalid("argument must be 'yes' or 'no'".into()));
                }
                if !startup {
                    return Err(invalid("can't set immutable config".into()));
                }
            }
            Kind::Fsync => {
                stored = text.to_ascii_lowercase();
                if !matches!(stored.as_str(), "always" | "everysec" | "no") {
                    return Err(invalid(
                        "argument(s) must be one of the following: always, everysec, no".into(),
                    ));
                }
                if !startup {
                    return Err(invalid("can't set immutable config".into()));
                }
            }
            Kind::Text => {
                if canon == "requirepass" {
                    self.requirepass = if text.is_empty() { None } else { Some(text.clone()) };
                }
            }
            Kind::Immutable => {
                if !startup {
                    return Err(invalid("can't set immutable config".into()));
                }
                if canon == "databases" && text != "1" {
                    return Err(invalid("this server has exactly one database".into()));
                }
                if canon == "port" && text.parse::<u16>().is_err() {
                    return Err(invalid("argument couldn't be parsed into an integer".into()));
                }
            }
        }
        self.strings[i] = stored;
        Ok(())
    }

    /// The stored string of a parameter (canonical name or alias).
    pub fn get(&self, name: &str) -> Option<&str> {
        canonical(name).map(|(i, _)| self.strings[i].as_str())
    }

    /// `CONFIG GET` of several patterns: (name, value) pairs, each parameter once, in table
    /// order. A pattern that names an alias exactly returns it under that name.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (i, (name, _)) in PARAMS.iter().enumerate() {
            if patterns.iter().any(|p| crate::glob::matches(p, name.as_bytes(), true)) {
                out.push((name.to_string(), self.strings[i].clone()));
            }
        }
        for p in patterns {
            let lower = String::from_utf8_lossy(p).to_ascii_lowercase();
            if let Some((alias, canon)) = ALIASES.iter().find(|(a, _)| *a == lower) {
                if !out.iter().any(|(n, _)| n == alias) {
                    out.push((alias.to_string(), self.get(canon).unwrap_or("").to_string()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_read_back() {
        let p = Params::default();
        let got = p.get_matching(&[b"bf-*", b"CF-*"]);
        let vals: Vec<&str> = got.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(vals, ["0.01", "100", "2", "2", "1024", "20", "1", "32"]);
    }

    #[test]
    fn error_rate_validation_and_cap() {
        let mut p = Params::default();
        assert_eq!(
            p.set("bf-error-rate", b"2", false).unwrap_err().message(),
            "ERR CONFIG SET failed (possibly related to argument 'bf-error-rate') - Value for `bf-error-rate` must be in the range (0.000000, 1.000000)"
        );
        assert_eq!(
            p.set("bf-error-rate", b"abc", false).unwrap_err().message(),
            "ERR CONFIG SET failed (possibly related to argument 'bf-error-rate') - Invalid value for `bf-error-rate`"
        );
        p.set("bf-error-rate", b"0.0100", false).unwrap();
        assert_eq!(p.get("bf-error-rate"), Some("0.0100"));
        p.set("ERROR_RATE", b"0.5", false).unwrap();
        assert_eq!(p.get("bf-error-rate"), Some("0.25"));
        assert_eq!(p.bloom.error_rate, 0.25);
    }

    #[test]
    fn coupled_cuckoo_bounds() {
        let mut p = Params::default();
        p.set("cf-bucket-size", b"10", false).unwrap();
        assert_eq!(
            p.set("cf-initial-size", b"19", false).unwrap_err().message(),
            "ERR CONFIG SET failed (possibly related to argument 'cf-initial-size') - Value for `cf-initial-size` must be in the range [20, 1073741824]"
        );
        p.set("cf-initial-size", b"20", false).unwrap();
        assert_eq!(p.cuckoo.bucket_size_max, 10);
        assert!(p.set("cf-bucket-size", b"11", false).is_err());
        assert_eq!(
            p.set("nosuch", b"1", false).unwrap_err().message(),
            "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
        );
        assert_eq!(parse_memory("100mb"), Some(100 * 1024 * 1024));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
    }
}
