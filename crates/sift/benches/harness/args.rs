//! The one command-line parser of the table program and the probes: `--name value` (or
//! `--name=value`) options and `--name` switches, read by name, and an error for anything left
//! over, so a mistyped flag stops the run instead of measuring the defaults.
//!
//! ```text
//! let mut a = Args::from_env(USAGE)?;            // `-h`/`--help` prints USAGE and exits
//! let ns = a.counts("--n", &[1_000_000])?;       // --n 1M,10M
//! let rounds = a.count("--rounds", 3)?.max(1);
//! let wall = a.switch("--wall");
//! a.finish()?;                                   // "unknown argument ..." for the rest
//! ```
//!
//! `cargo bench` appends `--bench` to every bench target's arguments; it is dropped here.

use super::keys::KeyKind;
use super::measure::parse_count;

/// The arguments not read yet.
pub struct Args {
    rest: Vec<String>,
    usage: &'static str,
}

impl Args {
    /// The process's arguments. With `-h` or `--help` among them, prints `usage` and exits.
    pub fn from_env(usage: &'static str) -> Result<Args, String> {
        Args::new(std::env::args().skip(1), usage)
    }

    /// Arguments from a list (the program name excluded).
    pub fn new(args: impl IntoIterator<Item = String>, usage: &'static str) -> Result<Args, String> {
        let mut rest = Vec::new();
        for a in args {
            if a == "--bench" {
                continue;
            }
            if a == "-h" || a == "--help" {
                println!("{usage}");
                std::process::exit(0);
            }
            // `--name=value` is `--name value`.
            match a.split_once('=') {
                Some((name, value)) if name.starts_with("--") => {
                    rest.push(name.to_string());
                    rest.push(value.to_string());
                }
                _ => rest.push(a),
            }
        }
        Ok(Args { rest, usage })
    }

    /// The value of option `name` (the last one if given twice), removed from the arguments.
    pub fn value(&mut self, name: &str) -> Result<Option<String>, String> {
        let mut found = None;
        while let Some(i) = self.rest.iter().position(|a| a == name) {
            if i + 1 >= self.rest.len() || self.rest[i + 1].starts_with("--") {
                return Err(format!("{name} needs a value\n\n{}", self.usage));
            }
            found = Some(self.rest.remove(i + 1));
            self.rest.remove(i);
        }
        Ok(found)
    }

    /// Whether switch `name` was given (removed from the arguments).
    pub fn switch(&mut self, name: &str) -> bool {
        let before = self.rest.len();
        self.rest.retain(|a| a != name);
        self.rest.len() != before
    }

    /// A count (`1000`, `1M`, `2^27`, `1e6`: see [`parse_count`]), `default` if absent.
    pub fn count(&mut self, name: &str, default: usize) -> Result<usize, String> {
        match self.value(name)? {
            Some(v) => parse_count(&v).map_err(|e| format!("{name}: {e}")),
            None => Ok(default),
        }
    }

    /// A comma-separated list of positive counts (`1M,10M`), `default` if absent.
    pub fn counts(&mut self, name: &str, default: &[usize]) -> Result<Vec<usize>, String> {
        let Some(v) = self.value(name)? else { return Ok(default.to_vec()) };
        let list = v
            .split(',')
            .map(parse_count)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{name}: {e}"))?;
        if list.is_empty() || list.contains(&0) {
            return Err(format!("{name} must be positive"));
        }
        Ok(list)
    }

    /// A number parsed with `FromStr` (e.g. an FPR), `default` if absent.
    pub fn number<T: std::str::FromStr>(&mut self, name: &str, default: T) -> Result<T, String> {
        match self.value(name)? {
            Some(v) => v.parse().map_err(|_| format!("{name}: bad value {v:?}")),
            None => Ok(default),
        }
    }

    /// `--keys u64|str20|both`, `default` if absent.
    pub fn keys(&mut self, default: &[KeyKind]) -> Result<Vec<KeyKind>, String> {
        match self.value("--keys")? {
            Some(v) => KeyKind::parse_list(&v),
            None => Ok(default.to_vec()),
        }
    }

    /// Fails on any argument not read.
    pub fn finish(self) -> Result<(), String> {
        match self.rest.first() {
            None => Ok(()),
            Some(a) => Err(format!("unknown argument {a:?}\n\n{}", self.usage)),
        }
    }
}

/// Runs a program's body and turns its error into a message and a failing exit status.
pub fn run(body: impl FnOnce() -> Result<(), String>) -> std::process::ExitCode {
    if cfg!(debug_assertions) {
        eprintln!("warning: built without optimisations; run it through `cargo bench`");
    }
    match body() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}
