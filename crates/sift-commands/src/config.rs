//! The eight RedisBloom parameters of spec §3: the defaults the BF/CF commands use when an option
//! is omitted, their validation (with the coupled cuckoo bounds) and their reply texts.
//!
//! sift-server keeps them inside its own configuration (with its server settings) and hands the
//! handlers a [`FilterConfig`] copy; the Redis module keeps one [`FilterConfig`] set from its load
//! arguments and its `CONFIG SET bf.*` parameters.

use crate::parse::{parse_f64, parse_i64};

/// Upper bound of the size parameters and capacities (2^30).
pub const MAX_CAPACITY: i64 = 1 << 30;

/// Defaults the BF commands use when an option is omitted (spec §3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BloomDefaults {
    /// `bf-error-rate`, already capped at 0.25.
    pub error_rate: f64,
    /// `bf-initial-size`.
    pub initial_size: i64,
    /// `bf-expansion-factor`; 0 means non-scaling.
    pub expansion: i64,
}

/// Defaults and bounds the CF commands use (spec §3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CuckooDefaults {
    /// `cf-bucket-size`.
    pub bucket_size: i64,
    /// `cf-initial-size`.
    pub initial_size: i64,
    /// `cf-max-iterations`.
    pub max_iterations: i64,
    /// `cf-expansion-factor`.
    pub expansion: i64,
    /// `cf-max-expansions`.
    pub max_expansions: i64,
    /// Current upper bound of `cf-bucket-size`: `min(cf-initial-size / 2, 255)` after a
    /// `CONFIG SET cf-initial-size`, else 255. CF.RESERVE BUCKETSIZE checks against it.
    pub bucket_size_max: i64,
    /// Current lower bound of `cf-initial-size`: `2 · cf-bucket-size` after a
    /// `CONFIG SET cf-bucket-size`, else 4. CF.INSERT CAPACITY checks against it.
    pub initial_size_min: i64,
}

impl Default for BloomDefaults {
    fn default() -> Self {
        BloomDefaults { error_rate: 0.01, initial_size: 100, expansion: 2 }
    }
}

impl Default for CuckooDefaults {
    fn default() -> Self {
        CuckooDefaults {
            bucket_size: 2,
            initial_size: 1024,
            max_iterations: 20,
            expansion: 1,
            max_expansions: 32,
            bucket_size_max: 255,
            initial_size_min: 4,
        }
    }
}

/// Every default a handler may need, as [`crate::Env::defaults`] gives them: a copy, cheap
/// enough to take on every command.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Defaults {
    /// BF defaults.
    pub bloom: BloomDefaults,
    /// CF defaults and bounds.
    pub cuckoo: CuckooDefaults,
}

/// The canonical parameter names, in `CONFIG GET` order.
pub const NAMES: [&str; 8] = [
    "bf-error-rate",
    "bf-initial-size",
    "bf-expansion-factor",
    "cf-bucket-size",
    "cf-initial-size",
    "cf-max-iterations",
    "cf-expansion-factor",
    "cf-max-expansions",
];

/// Older load-time names RedisBloom still accepts (spec §3), lower case: (alias, canonical name).
pub const ALIASES: [(&str, &str); 3] = [
    ("error_rate", "bf-error-rate"),
    ("initial_size", "bf-initial-size"),
    ("cf_max_expansions", "cf-max-expansions"),
];

/// The canonical name of a parameter given by any case of its name, its RedisBloom load-argument
/// spelling (`BF_ERROR_RATE`-style underscores are not RedisBloom's; `ERROR_RATE`,
/// `INITIAL_SIZE`, `CF_MAX_EXPANSIONS` and the dashed names are).
pub fn canonical(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if let Some((_, c)) = ALIASES.iter().find(|(a, _)| *a == lower) {
        return Some(c);
    }
    NAMES.iter().copied().find(|n| *n == lower)
}

/// All eight parameters, with the string each `CONFIG GET` returns.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterConfig {
    /// BF defaults.
    pub bloom: BloomDefaults,
    /// CF defaults and bounds.
    pub cuckoo: CuckooDefaults,
    /// The string last set for each of [`NAMES`], same order (spec §3: read back byte for byte).
    strings: [String; 8],
}

impl Default for FilterConfig {
    fn default() -> Self {
        FilterConfig {
            bloom: BloomDefaults::default(),
            cuckoo: CuckooDefaults::default(),
            strings: ["0.01", "100", "2", "2", "1024", "20", "1", "32"].map(String::from),
        }
    }
}

/// Why a value was refused: the `<reason>` part of spec §3's CONFIG SET error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// No such parameter.
    Unknown(String),
    /// (name as given, reason).
    Invalid(String, String),
}

impl ConfigError {
    /// The reply text of a failed `CONFIG SET` (spec §3).
    pub fn message(&self) -> String {
        match self {
            ConfigError::Unknown(n) => {
                format!("ERR Unknown option or number of arguments for CONFIG SET - '{n}'")
            }
            ConfigError::Invalid(n, reason) => {
                format!("ERR CONFIG SET failed (possibly related to argument '{n}') - {reason}")
            }
        }
    }

    /// The reason alone (what a Redis module config setter reports).
    pub fn reason(&self) -> String {
        match self {
            ConfigError::Unknown(n) => format!("unknown parameter '{n}'"),
            ConfigError::Invalid(_, r) => r.clone(),
        }
    }
}

impl FilterConfig {
    /// The defaults the handlers use.
    pub fn defaults(&self) -> Defaults {
        Defaults { bloom: self.bloom, cuckoo: self.cuckoo }
    }

    /// Sets one parameter (canonical name, alias, any case), validated as spec §3 says.
    pub fn set(&mut self, name: &str, value: &[u8]) -> Result<(), ConfigError> {
        let canon = canonical(name).ok_or_else(|| ConfigError::Unknown(name.to_string()))?;
        let i = NAMES.iter().position(|n| *n == canon).expect("canonical names are in NAMES");
        let invalid = |reason: String| ConfigError::Invalid(name.to_string(), reason);
        let not_a_number = || invalid(format!("Invalid value for `{canon}`"));
        let int_in = |lo: i64, hi: i64| -> Result<i64, ConfigError> {
            let v = parse_i64(value).ok_or_else(not_a_number)?;
            if v < lo || v > hi {
                return Err(invalid(format!("Value for `{canon}` must be in the range [{lo}, {hi}]")));
            }
            Ok(v)
        };
        let mut stored = String::from_utf8_lossy(value).into_owned();
        match canon {
            "bf-error-rate" => {
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
            "bf-initial-size" => self.bloom.initial_size = int_in(1, MAX_CAPACITY)?,
            "bf-expansion-factor" => self.bloom.expansion = int_in(0, 32768)?,
            "cf-bucket-size" => {
                let v = int_in(1, self.cuckoo.bucket_size_max)?;
                self.cuckoo.bucket_size = v;
                self.cuckoo.initial_size_min = 2 * v;
            }
            "cf-initial-size" => {
                let v = int_in(self.cuckoo.initial_size_min, MAX_CAPACITY)?;
                self.cuckoo.initial_size = v;
                self.cuckoo.bucket_size_max = (v / 2).min(255);
            }
            "cf-max-iterations" => self.cuckoo.max_iterations = int_in(1, 65535)?,
            "cf-expansion-factor" => self.cuckoo.expansion = int_in(0, 32768)?,
            "cf-max-expansions" => self.cuckoo.max_expansions = int_in(1, 65536)?,
            _ => unreachable!("every canonical name is handled"),
        }
        self.strings[i] = stored;
        Ok(())
    }

    /// The string `CONFIG GET` returns for a parameter (canonical name or alias, any case).
    pub fn get(&self, name: &str) -> Option<&str> {
        let canon = canonical(name)?;
        NAMES.iter().position(|n| *n == canon).map(|i| self.strings[i].as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_and_coupled_bounds_of_the_spec() {
        let mut c = FilterConfig::default();
        assert_eq!(c.get("BF-ERROR-RATE"), Some("0.01"));
        c.set("ERROR_RATE", b"0.5").unwrap();
        assert_eq!((c.bloom.error_rate, c.get("bf-error-rate")), (0.25, Some("0.25")));
        assert_eq!(
            c.set("bf-error-rate", b"2").unwrap_err().message(),
            "ERR CONFIG SET failed (possibly related to argument 'bf-error-rate') - Value for `bf-error-rate` must be in the range (0.000000, 1.000000)"
        );
        c.set("cf-initial-size", b"20").unwrap();
        assert_eq!(c.cuckoo.bucket_size_max, 10);
        assert_eq!(
            c.set("cf-bucket-size", b"11").unwrap_err().reason(),
            "Value for `cf-bucket-size` must be in the range [1, 10]"
        );
        c.set("cf-bucket-size", b"4").unwrap();
        assert_eq!(c.cuckoo.initial_size_min, 8);
        assert!(matches!(c.set("nosuch", b"1"), Err(ConfigError::Unknown(_))));
        c.set("initial_size", b"0100").unwrap_err();
        c.set("INITIAL_SIZE", b"1000").unwrap();
        assert_eq!(c.bloom.initial_size, 1000);
    }
}
