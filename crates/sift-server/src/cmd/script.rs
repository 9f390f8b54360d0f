//! Scripting commands: `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO` and `SCRIPT LOAD | EXISTS |
//! FLUSH | KILL`, on the engine of [`crate::script`].
//!
//! A script's `redis.call` / `redis.pcall` go through the same command table and handlers as a
//! client's request (`resolve`, `run_locked` in [`super`]): arity, the `noscript` flag,
//! read-only scripts, `maxmemory` and a failed log are checked per call, with Redis's script
//! error texts. The EVAL rows are registered with [`super::table::ALL_KEYS`], so the dispatcher (or
//! EXEC) hands the handler a view holding every shard: the script is atomic.
//!
//! # Persistence
//!
//! EVAL itself is never logged. Every write command the script runs that changed the keyspace
//! is recorded by `run_locked`, in order, with its `propagate` rewrite (EXPIRE as
//! PEXPIREAT): Redis 7's effects replication. The caller's session is marked for commit, so
//! with `appendfsync always` the effects are durable before the EVAL reply is sent.
//!
//! # Without the `lua` feature
//!
//! A server built with `--no-default-features` has no Lua VM (neither mlua nor Lua's C sources):
//! the rows stay in the command table (`COMMAND` lists them, arity is checked as usual) and
//! every one of them answers [`NOT_COMPILED_IN`], so a client learns why instead of reading an
//! "unknown command" error that suggests a typo. The rest of the server does not change.

use bytes::Bytes;

use super::err;
#[cfg(not(feature = "lua"))]
use super::Ctx;
#[cfg(not(feature = "lua"))]
use crate::frame::Frame;

#[cfg(feature = "lua")]
mod lua;
#[cfg(feature = "lua")]
pub use lua::{eval, eval_ro, evalsha, evalsha_ro, script_exists, script_flush, script_kill, script_load};

/// `EVALSHA` of an unknown script.
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
/// numkeys larger than the arguments.
pub const TOO_MANY_KEYS: &str = "ERR Number of keys can't be greater than number of args";
/// Negative numkeys.
pub const NEGATIVE_KEYS: &str = "ERR Number of keys can't be negative";
/// EVAL_RO of a script whose shebang does not declare `no-writes`.
pub const RO_WITH_WRITE_FLAG: &str = "ERR Can not execute a script with write flag using *_ro command.";
/// SCRIPT FLUSH with a bad option.
pub const FLUSH_OPTION: &str = "ERR SCRIPT FLUSH only support SYNC|ASYNC option";
/// The reply of every scripting command in a server built without the `lua` feature.
pub const NOT_COMPILED_IN: &str =
    "ERR scripting is not compiled in: this sift-server was built without its `lua` feature";

/// `numkeys` of an EVAL-family request: the keys and the other arguments.
pub fn split_keys(argv: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), &'static str> {
    let n = super::parse::parse_i64(&argv[2]).ok_or(err::NOT_INTEGER)?;
    let rest = &argv[3..];
    if n > rest.len() as i64 {
        return Err(TOO_MANY_KEYS);
    }
    if n < 0 {
        return Err(NEGATIVE_KEYS);
    }
    Ok(rest.split_at(n as usize))
}

/// Runs `f`, which may take long (a script runs up to `busy-reply-threshold`), telling a
/// multi-threaded tokio runtime to move this worker's other tasks and its I/O duties to another
/// thread meanwhile: otherwise a parked worker may never poll the I/O driver, and `SCRIPT KILL`
/// from another connection would not be read until the script ends.
pub(crate) fn off_the_runtime<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Every scripting command of a server built without the `lua` feature: [`NOT_COMPILED_IN`].
#[cfg(not(feature = "lua"))]
pub fn not_compiled_in(_ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    Frame::error(NOT_COMPILED_IN)
}

#[cfg(not(feature = "lua"))]
pub use self::{
    not_compiled_in as eval, not_compiled_in as eval_ro, not_compiled_in as evalsha,
    not_compiled_in as evalsha_ro, not_compiled_in as script_exists, not_compiled_in as script_flush,
    not_compiled_in as script_kill, not_compiled_in as script_load,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()
    }

    #[test]
    fn numkeys_errors() {
        assert_eq!(split_keys(&argv(&["EVAL", "s", "x"])).unwrap_err(), err::NOT_INTEGER);
        assert_eq!(split_keys(&argv(&["EVAL", "s", "2", "a"])).unwrap_err(), TOO_MANY_KEYS);
        assert_eq!(split_keys(&argv(&["EVAL", "s", "-1"])).unwrap_err(), NEGATIVE_KEYS);
        let a = argv(&["EVAL", "s", "1", "k", "v", "w"]);
        let (k, v) = split_keys(&a).unwrap();
        assert_eq!((k.len(), v.len()), (1, 2));
        let a = argv(&["EVAL", "s", "0"]);
        assert_eq!(split_keys(&a).unwrap().0.len(), 0);
    }
}
