//! Run-time configuration: the eight RedisBloom parameters of spec §3 (validated by the command
//! layer's [`FilterConfig`], the same code the Redis module's `CONFIG SET bf.*` runs) and the
//! server settings clients read or set (`save`, `appendonly`, `databases`, `maxmemory`,
//! `requirepass`, ...).
//!
//! One [`Params`] value holds everything; the server keeps it behind a lock and replaces it as
//! a whole on `CONFIG SET`, so a multi-pair CONFIG SET is all-or-nothing. The same setter is used
//! for start-up flags and the config file, so their validation is byte-for-byte the command's.
//! `CONFIG GET` returns the string last set, byte for byte (spec §3).

use crate::cmd::parse::parse_i64;

// The eight filter parameters, their defaults and their validation are the command layer's (one
// definition for the server and the module); this module adds the server settings.
use sift_commands::config::ALIASES;
pub use sift_commands::config::{BloomDefaults, CuckooDefaults, FilterConfig, MAX_CAPACITY};

/// How a parameter is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// One of the eight RedisBloom parameters: [`FilterConfig`] validates and stores it.
    Filter,
    /// An integer in a range.
    Int(i64, i64),
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
/// Default `lua-maxmemory`: the Lua VM's allocation cap.
pub const LUA_MAXMEMORY_DEFAULT: usize = 256 * 1024 * 1024;

const PARAMS: &[(&str, Kind)] = &[
    ("bf-error-rate", Kind::Filter),
    ("bf-initial-size", Kind::Filter),
    ("bf-expansion-factor", Kind::Filter),
    ("cf-bucket-size", Kind::Filter),
    ("cf-initial-size", Kind::Filter),
    ("cf-max-iterations", Kind::Filter),
    ("cf-expansion-factor", Kind::Filter),
    ("cf-max-expansions", Kind::Filter),
    ("port", Kind::Immutable),
    ("bind", Kind::Immutable),
    // The Prometheus endpoint's port (`--metrics-port`), on the `bind` address; empty = off.
    ("metrics-port", Kind::Immutable),
    ("dir", Kind::Immutable),
    ("databases", Kind::Immutable),
    ("appendonly", Kind::Bool),
    ("appendfsync", Kind::Fsync),
    // Read at start-up: start even when the end of the log was provably cut off.
    ("aof-load-truncated", Kind::Bool),
    ("save", Kind::Text),
    ("auto-aof-rewrite-percentage", Kind::Int(0, i64::MAX)),
    ("auto-aof-rewrite-min-size", Kind::Size),
    ("maxmemory", Kind::Memory),
    ("maxclients", Kind::Clients),
    ("requirepass", Kind::Text),
    // Scripts: the run-time limit after which a script is aborted (ms; 0 = none), and the Lua
    // VM's memory cap (a sift setting, not Redis's).
    ("busy-reply-threshold", Kind::Int(0, i64::MAX)),
    ("lua-maxmemory", Kind::Size),
];

/// Server-only aliases (the filter parameters' aliases are the command layer's).
const SERVER_ALIASES: &[(&str, &str)] = &[("lua-time-limit", "busy-reply-threshold")];

/// A rejected value, rendered by [`ConfigError::message`] as Redis does (the command layer's
/// type: the module's `CONFIG SET` refuses values with the same texts).
pub use sift_commands::config::ConfigError;

/// The server's configuration.
#[derive(Debug, Clone)]
pub struct Params {
    /// The string CONFIG GET returns for each server setting of [`PARAMS`], same order (the
    /// entries of the filter parameters are unused: [`Params::filters`] keeps those).
    strings: Vec<String>,
    /// The eight RedisBloom parameters: BF/CF defaults and bounds, and their strings.
    pub filters: FilterConfig,
    /// `requirepass`; `None` when empty.
    pub requirepass: Option<String>,
    /// `maxmemory` in bytes; 0 = unlimited.
    pub maxmemory: u64,
    /// `maxclients`.
    pub maxclients: usize,
    /// `busy-reply-threshold` (alias `lua-time-limit`): a script running longer is aborted; ms,
    /// 0 = never.
    pub busy_reply_threshold: u64,
    /// `lua-maxmemory`: the Lua VM's allocation cap in bytes; 0 = none.
    pub lua_maxmemory: usize,
}

impl Default for Params {
    fn default() -> Self {
        let strings = PARAMS
            .iter()
            .map(|(n, _)| {
                match *n {
                    "port" => "6379",
                    "bind" => "127.0.0.1",
                    "dir" => "./sift-data",
                    "databases" => "1",
                    "appendonly" => "yes",
                    "appendfsync" => "always",
                    "aof-load-truncated" => "no",
                    "save" => "3600 1 300 100 60 10000",
                    "auto-aof-rewrite-percentage" => "100",
                    "auto-aof-rewrite-min-size" => "64mb",
                    "maxmemory" => "0",
                    "maxclients" => "10000",
                    "requirepass" => "",
                    "busy-reply-threshold" => "5000",
                    "lua-maxmemory" => "256mb",
                    // A filter parameter: its string lives in `filters`.
                    _ => "",
                }
                .to_string()
            })
            .collect();
        Params {
            strings,
            filters: FilterConfig::default(),
            requirepass: None,
            maxmemory: 0,
            maxclients: 10000,
            busy_reply_threshold: 5000,
            lua_maxmemory: LUA_MAXMEMORY_DEFAULT,
        }
    }
}

fn canonical(name: &str) -> Option<(usize, Kind)> {
    let lower = name.to_ascii_lowercase();
    let lower = ALIASES
        .iter()
        .chain(SERVER_ALIASES)
        .find(|(a, _)| *a == lower)
        .map(|(_, c)| c.to_string())
        .unwrap_or(lower);
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
        let int_in = |lo: i64, hi: i64| -> Result<i64, ConfigError> {
            let v = parse_i64(value).ok_or_else(|| invalid(format!("Invalid value for `{canon}`")))?;
            if v < lo || v > hi {
                return Err(invalid(format!("Value for `{canon}` must be in the range [{lo}, {hi}]")));
            }
            Ok(v)
        };
        let mut stored = text.clone();
        match kind {
            // Same validation, coupled bounds and texts as the module's CONFIG SET; the error
            // names the parameter as the client gave it, as Redis does.
            Kind::Filter => return self.filters.set(name, value),
            // Read by persistence where it is used.
            Kind::Int(lo, hi) => {
                let v = int_in(lo, hi)?;
                if canon == "busy-reply-threshold" {
                    self.busy_reply_threshold = v as u64;
                }
            }
            Kind::Memory => {
                self.maxmemory =
                    parse_memory(&text).ok_or_else(|| invalid("argument must be a memory value".into()))?;
            }
            Kind::Size => {
                let v =
                    parse_memory(&text).ok_or_else(|| invalid("argument must be a memory value".into()))?;
                if canon == "lua-maxmemory" {
                    self.lua_maxmemory = usize::try_from(v).unwrap_or(usize::MAX);
                }
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
                let port_or_off = canon == "metrics-port" && text.is_empty();
                if (canon == "port" || canon == "metrics-port")
                    && !port_or_off
                    && text.parse::<u16>().is_err()
                {
                    return Err(invalid("argument couldn't be parsed into an integer".into()));
                }
            }
        }
        self.strings[i] = stored;
        Ok(())
    }

    /// The stored string of a parameter (canonical name or alias).
    pub fn get(&self, name: &str) -> Option<&str> {
        canonical(name).map(|(i, _)| self.value(i))
    }

    /// The string CONFIG GET returns for `PARAMS[i]`.
    fn value(&self, i: usize) -> &str {
        match PARAMS[i].1 {
            Kind::Filter => self.filters.get(PARAMS[i].0).unwrap_or(""),
            _ => self.strings[i].as_str(),
        }
    }

    /// `CONFIG GET` of several patterns: (name, value) pairs, each parameter once, in table
    /// order. A pattern that names an alias exactly returns it under that name.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (i, (name, _)) in PARAMS.iter().enumerate() {
            if patterns.iter().any(|p| crate::glob::matches(p, name.as_bytes(), true)) {
                out.push((name.to_string(), self.value(i).to_string()));
            }
        }
        for p in patterns {
            let lower = String::from_utf8_lossy(p).to_ascii_lowercase();
            if let Some((alias, canon)) = ALIASES.iter().chain(SERVER_ALIASES).find(|(a, _)| *a == lower) {
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
        assert_eq!(p.filters.bloom.error_rate, 0.25);
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
        assert_eq!(p.filters.cuckoo.bucket_size_max, 10);
        assert!(p.set("cf-bucket-size", b"11", false).is_err());
        assert_eq!(
            p.set("nosuch", b"1", false).unwrap_err().message(),
            "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"
        );
        assert_eq!(parse_memory("100mb"), Some(100 * 1024 * 1024));
        assert_eq!(parse_memory("1g"), Some(1_000_000_000));
    }
}
