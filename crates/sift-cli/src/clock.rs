//! The time a window by time (`time-limited-bloom`) is read at.
//!
//! Such a filter never reads a clock: its owner passes the time with every insertion, and what
//! it answers depends on the time asked at (an item inserted at `t` is a member at every time
//! up to `t + TTL`, gone after `t + TTL` plus one generation). The file records the owner's
//! latest time (the filter's clock) but not its unit. sift-server's `SF` filters count Unix
//! milliseconds, and so does the command line: `--at now` (the default) is this machine's
//! time in Unix milliseconds, `--at clock` the file's own clock (as of its last insertion),
//! `--at T` a time in the filter's unit. A time before the clock reads as the clock (the
//! filter never forgets early nor remembers what it already forgot).

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};

/// `--at`: when to read a window by time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// This machine's time, in Unix milliseconds.
    Now,
    /// The filter's own clock: the time of its last insertion.
    Clock,
    /// A time in the filter's unit (Unix milliseconds for sift-server's filters).
    Time(u64),
}

/// The help text of `--at`, shared by the subcommands that take it.
pub const AT_HELP: &str =
    "When to read a time-limited-bloom filter (a window by time): `now` (this machine's \
clock, Unix milliseconds, the unit of sift-server's SF filters), `clock` (the file's own clock: \
the time of its last insertion), or a time in the filter's unit (Unix milliseconds for \
SF.DUMP files). Items inserted more than the TTL before it are forgotten. Other kinds ignore it.";

/// Parses `--at`.
pub fn parse_at(s: &str) -> Result<At, String> {
    match s {
        "now" => Ok(At::Now),
        "clock" => Ok(At::Clock),
        _ => s.parse::<u64>().map(At::Time).map_err(|_| {
            format!("{s:?}: give `now`, `clock` or a time in the filter's unit (Unix milliseconds for sift-server's filters)")
        }),
    }
}

/// 2000-01-01T00:00:00Z in Unix milliseconds: a clock below it (and above 0) is not counting
/// Unix milliseconds.
const Y2000_MS: u64 = 946_684_800_000;

/// A day in milliseconds: how far a file's clock may run ahead of this machine's before it
/// cannot be Unix milliseconds from a machine with a sane clock.
const DAY_MS: u64 = 86_400_000;

/// This machine's time in Unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The time to read a window by time whose clock is `clock` at: `at` resolved. `--at now`
/// refuses a clock that does not look like Unix milliseconds (a library filter with a clock of
/// its own: seconds, a counter, microseconds), since "now" in milliseconds would then forget
/// everything, or nothing, without saying so.
pub fn resolve(at: At, clock: u64, file: &str) -> Result<u64> {
    match at {
        At::Time(t) => Ok(t),
        At::Clock => Ok(clock),
        At::Now => {
            let now = now_ms();
            if clock != 0 && clock < Y2000_MS {
                bail!(
                    "{file}: the filter's clock reads {clock}, which is not Unix milliseconds (sift-server's unit, what --at now means): its owner counts time in another unit; give --at clock (as of its last insertion) or --at T in that unit"
                );
            }
            if clock > now.saturating_add(DAY_MS) {
                bail!(
                    "{file}: the filter's clock reads {clock}, more than a day ahead of this machine's Unix milliseconds ({now}): another unit, or a wrong clock; give --at clock (as of its last insertion) or --at T in the filter's unit"
                );
            }
            Ok(now)
        }
    }
}

/// A time in Unix milliseconds as UTC, `2026-11-27T20:15:03.250Z`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (the proleptic Gregorian calendar, 400-year eras).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// A span of milliseconds for a person: `7d`, `1h 30m`, `2.5s`, `250ms`.
pub fn span(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let mut parts = Vec::new();
    let (d, h, m) = (ms / DAY_MS, ms % DAY_MS / 3_600_000, ms % 3_600_000 / 60_000);
    let s = ms % 60_000;
    if d > 0 {
        parts.push(format!("{d}d"));
    }
    if h > 0 {
        parts.push(format!("{h}h"));
    }
    if m > 0 {
        parts.push(format!("{m}m"));
    }
    if s > 0 {
        parts.push(if s % 1000 == 0 { format!("{}s", s / 1000) } else { format!("{}s", s as f64 / 1000.0) });
    }
    parts.join(" ")
}

/// Whether a clock reads like Unix milliseconds (dates are shown only then).
pub fn is_unix_ms(clock: u64) -> bool {
    (Y2000_MS..=now_ms().saturating_add(DAY_MS)).contains(&clock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_spans() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(utc(4_107_542_399_999), "2100-02-28T23:59:59.999Z");
        assert_eq!(span(604_800_000), "7d");
        assert_eq!(span(5_400_000), "1h 30m");
        assert_eq!(span(2_500), "2.5s");
        assert_eq!(span(250), "250ms");
    }

    #[test]
    fn at_parses_and_resolves() {
        assert_eq!(parse_at("now"), Ok(At::Now));
        assert_eq!(parse_at("clock"), Ok(At::Clock));
        assert_eq!(parse_at("1700000000000"), Ok(At::Time(1_700_000_000_000)));
        assert!(parse_at("yesterday").is_err());
        assert_eq!(resolve(At::Clock, 42, "f").unwrap(), 42);
        assert_eq!(resolve(At::Time(7), 42, "f").unwrap(), 7);
        // A clock in seconds, or far ahead, is refused for `now`; a fresh filter (clock 0) and
        // a Unix-milliseconds one are read now.
        assert!(resolve(At::Now, 1_700_000_000, "f").is_err());
        assert!(resolve(At::Now, now_ms() + 2 * DAY_MS, "f").is_err());
        assert!(resolve(At::Now, 0, "f").unwrap() >= Y2000_MS);
        assert!(resolve(At::Now, now_ms() - 1000, "f").unwrap() >= Y2000_MS);
    }
}
