//! The Lua scripting engine behind `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO` and `SCRIPT`
//! (the commands are in [`crate::cmd::script`]).
//!
//! Everything here but [`Engine`]'s counters is compiled only with the `lua` feature (on by
//! default): without it the server has no VM, the counters stay at 0, and the commands answer
//! [`crate::cmd::script::NOT_COMPILED_IN`].
//!
//! # One VM
//!
//! As Redis, the server has one Lua 5.1 interpreter (`mlua`, built from the C sources), created
//! at start-up and recreated by `SCRIPT FLUSH`. It lives behind a mutex in [`Engine`]; a script
//! runs with that mutex and a lock of **every shard** ([`crate::db::Db::lock_all`]) held, so it
//! is atomic as under Redis's single thread: nothing interleaves with it, and keys it did not
//! declare are reachable (Redis standalone allows that too). Lock order: shards, then the VM
//! (`SCRIPT LOAD` takes the VM alone), so the two locks cannot deadlock.
//!
//! # Sandbox
//!
//! Libraries: base (without `dofile` and `loadfile`; `loadstring` and `load` stay, as in Redis,
//! and refuse precompiled chunks), `table`, `string`, `math`, and the `coroutine` functions Lua
//! 5.1's base library brings, and Redis's extra `bit`, `cjson`, `cmsgpack` and `struct`
//! ([`crate::lualib`]). No `os`, `io`, `package`, `debug`. As in Redis 7, scripts cannot
//! create globals (`Attempt to modify a readonly table`) and reading an undefined global is an
//! error (`Script attempted to access nonexistent global variable 'x'`). `rawset`, `setmetatable`
//! and plain assignment to an existing global (`bit = 1`, `cjson.encode = nil`: an error in Redis)
//! get past that guard (Redis 7 patches Lua for truly read-only tables), so after
//! every script the VM puts back what scripts share — the globals table, `_G`, `redis`, the
//! libraries, the metatables of `_G` and of strings, the script's own environment — as it was
//! when the VM was created (`Baseline`): no script can change what the next one sees (e.g.
//! replace `redis.call` for every client). `loadstring` and `load` refuse precompiled chunks:
//! Lua 5.1 would load them, and crafted bytecode escapes the sandbox (Redis's CVE-2015-4335).
//!
//! The `redis` table: `call`, `pcall`, `error_reply`, `status_reply`, `sha1hex`, `log` with
//! `LOG_DEBUG`/`LOG_VERBOSE`/`LOG_NOTICE`/`LOG_WARNING` (to `tracing`), `replicate_commands`
//! (always true, as Redis 7), `setresp` (2 or 3: the protocol the script's calls are answered
//! in), `REDIS_VERSION`, `REDIS_VERSION_NUM`. Not provided: `set_repl`, `breakpoint`, `debug`,
//! `acl_check_cmd`.
//!
//! A script may start with Redis 7's shebang, `#!lua [flags=...]` ([`parse_shebang`]): it is then a
//! write script unless it declares `no-writes` (which makes it read-only even under EVAL);
//! the other flags are accepted without effect.
//!
//! # Conversions
//!
//! Redis's documented rules ([`frame_to_lua`], [`lua_to_frame`]): a reply becomes a Lua value
//! as a RESP2 client would see it (after `redis.setresp(3)`, RESP3 shapes: map → `{map=...}`,
//! set → `{set=...}`, double → `{double=n}`, boolean → boolean, null → nil) (integer → number, bulk → string, null → `false`, array →
//! table, status → `{ok=...}`, error → `{err=...}`; a RESP3 map is a flat array, a double a
//! string, a boolean 1/0), and the script's return value becomes a reply (number → integer,
//! truncated; string → bulk; table → array up to its first nil, or status / error when it has
//! an `ok` / `err` field; `false`/`nil` → null; `true` → 1).
//!
//! # Runaway scripts
//!
//! An instruction-count hook checks the clock every [`HOOK_EVERY`] instructions: a script that
//! runs longer than `busy-reply-threshold` (alias `lua-time-limit`) is **aborted** with an error
//! reply. Redis keeps such a script running and answers other clients `BUSY` until `SCRIPT
//! KILL`; here every other client waits on the shard locks, so a never-ending script must end.
//! The writes it made before the abort stay applied and logged (Redis has no rollback either:
//! a script that wrote can only be stopped there by `SHUTDOWN NOSAVE`). A hook error caught by
//! the script's own `pcall`, `xpcall` or `coroutine.resume` is raised again, so the abort
//! cannot be swallowed. `SCRIPT KILL` from another connection stops a script that has not
//! written yet, as in Redis (the script runs in `block_in_place`, so the runtime keeps
//! serving other connections). The VM's memory is capped at `lua-maxmemory`: an allocation
//! beyond it fails the script with a `not enough memory` error reply.

use std::sync::atomic::AtomicUsize;
#[cfg(feature = "lua")]
use std::sync::{atomic::Ordering, Arc};

#[cfg(feature = "lua")]
use parking_lot::{Mutex, MutexGuard};

#[cfg(feature = "lua")]
mod baseline;
#[cfg(feature = "lua")]
mod convert;
#[cfg(feature = "lua")]
mod error;
#[cfg(feature = "lua")]
mod vm;

#[cfg(feature = "lua")]
pub use convert::{frame_to_lua, lua_to_frame, value_to_arg, MAX_REPLY_BYTES, REPLY_TOO_LARGE};
#[cfg(feature = "lua")]
pub use error::{error_table, error_text, reply_error_text};
#[cfg(feature = "lua")]
pub use vm::{
    parse_shebang, sha1_hex, RunFlags, RunLimits, Script, Vm, HOOK_EVERY, KILLED, NOTBUSY, UNKILLABLE,
};

/// The server's scripting engine: the VM, the script cache, and counters for `INFO`. Without the
/// `lua` feature only the counters, which stay at 0 (no script runs).
pub struct Engine {
    #[cfg(feature = "lua")]
    vm: Mutex<Vm>,
    /// Shared with the VM's hook.
    #[cfg(feature = "lua")]
    pub flags: Arc<RunFlags>,
    /// Bytes the VM used after the last script (`INFO memory` `used_memory_lua`).
    pub memory: AtomicUsize,
    /// Cached scripts (`INFO memory` `number_of_cached_scripts`).
    pub cached: AtomicUsize,
    /// Script commands (or EXECs holding one) waiting for every shard or running: while
    /// non-zero, a command that cannot take its shards at once waits off the runtime's worker
    /// threads (see `cmd::locking`).
    pub pending: AtomicUsize,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("cached", &self.cached).finish_non_exhaustive()
    }
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new()
    }
}

impl Engine {
    /// A fresh engine with an empty script cache.
    #[cfg(feature = "lua")]
    pub fn new() -> Engine {
        let vm = Vm::new().expect("the Lua VM starts");
        let memory = AtomicUsize::new(vm.lua.used_memory());
        Engine {
            vm: Mutex::new(vm),
            flags: Arc::default(),
            memory,
            cached: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
        }
    }

    /// The counters alone: there is no VM to start.
    #[cfg(not(feature = "lua"))]
    pub fn new() -> Engine {
        Engine { memory: AtomicUsize::new(0), cached: AtomicUsize::new(0), pending: AtomicUsize::new(0) }
    }

    /// Locks the VM (for a run, a load or a lookup).
    #[cfg(feature = "lua")]
    pub fn lock(&self) -> MutexGuard<'_, Vm> {
        self.vm.lock()
    }

    /// `SCRIPT FLUSH`: a new VM, no cached script.
    #[cfg(feature = "lua")]
    pub fn flush(&self) {
        let vm = Vm::new().expect("the Lua VM starts");
        self.memory.store(vm.lua.used_memory(), Ordering::Relaxed);
        *self.vm.lock() = vm;
        self.cached.store(0, Ordering::Relaxed);
    }
}

#[cfg(all(test, feature = "lua"))]
mod tests;
