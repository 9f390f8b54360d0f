//! The Lua scripting engine behind `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO` and `SCRIPT`
//! (the commands are in [`crate::cmd::script`]).
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{ChunkMode, Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, Variadic, VmState};
use parking_lot::{Mutex, MutexGuard};
use sha1::{Digest, Sha1};

use crate::frame::{format_double, Frame};

/// Instructions between two clock checks of a running script. Redis uses 100 000, but library
/// calls cost far more than an instruction (`string.rep` of megabytes, ~1 ms), and a loop of
/// them went ~100 000 / 4 calls past the limit and past SCRIPT KILL. A check every 1 000 costs
/// nothing measurable (3M-iteration loops with and without a library call: within 3 %).
/// A single C call is still not interrupted (a pathological `string.find` pattern).
pub const HOOK_EVERY: u32 = 1_000;

/// Nesting depth at which a returned table is cut (Redis's "reached lua stack limit"): a table
/// that contains itself must not recurse forever.
const MAX_DEPTH: usize = 1000;

/// The reply to a script whose return value, flattened into a reply, would exceed
/// [`MAX_REPLY_BYTES`].
pub const REPLY_TOO_LARGE: &str =
    "ERR Script's return value too large: over 512 MB as a reply (tables or strings repeated?)";

/// The most a script's return value may weigh as a reply: the sum of its strings and of a
/// [`Frame`] per element. Lua shares tables and strings, so a value of a few bytes inside the VM
/// (`t[1] = t; t[2] = t`, one string repeated) can flatten into an exponential or huge reply.
pub const MAX_REPLY_BYTES: usize = 512 * 1024 * 1024;

/// The reply to a script the client killed with `SCRIPT KILL` (Redis's text).
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
/// `SCRIPT KILL` with no script running.
pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
/// `SCRIPT KILL` of a script that has written.
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

/// The lower-case hex SHA-1 of `body`: a script's id.
pub fn sha1_hex(body: &[u8]) -> String {
    let digest = Sha1::digest(body);
    let mut s = String::with_capacity(40);
    for b in digest {
        s.push(char::from_digit((b >> 4) as u32, 16).expect("nibble"));
        s.push(char::from_digit((b & 15) as u32, 16).expect("nibble"));
    }
    s
}

/// State of the running script that `SCRIPT KILL` reads without the VM lock.
#[derive(Debug, Default)]
pub struct RunFlags {
    /// A script is running.
    pub running: AtomicBool,
    /// It has run a write command.
    pub wrote: AtomicBool,
    /// `SCRIPT KILL` asked it to stop.
    pub kill: AtomicBool,
}

/// The server's scripting engine: the VM, the script cache, and counters for `INFO`.
pub struct Engine {
    vm: Mutex<Vm>,
    /// Shared with the VM's hook.
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

/// The VM and what lives in it.
pub struct Vm {
    /// The interpreter.
    pub lua: Lua,
    /// Compiled scripts by SHA-1.
    scripts: HashMap<String, Cached>,
    /// Per-run state the Lua side reads: `raw` (the command dispatcher of this run) and `abort`
    /// (set when the script is being aborted).
    pub slot: Table,
    /// `function(f, h) return xpcall(f, h) end`, with the original `xpcall`.
    runner: Function,
    /// What every script starts from (see [`Vm::restore`]).
    baseline: Baseline,
}

/// The shared state of a fresh VM that scripts can reach and change: the globals table, and
/// for each table a script can get at (`_G`, `redis`, the libraries, the metatables of `_G`
/// and of strings) its entries and metatable.
struct Baseline {
    globals: Table,
    tables: Vec<SharedTable>,
    /// A Lua function telling whether any of `tables` differs from its baseline (entries or
    /// metatable): the check after every script, ~100 raw reads inside the VM; the restore
    /// itself runs only when something changed.
    changed: Function,
}

/// A table scripts share: the table, its entries and its metatable as the VM was created.
type SharedTable = (Table, Vec<(Value, Value)>, Option<Table>);

/// The body of [`Baseline::changed`], given `{{table, entries, count, metatable}, ...}`. Only
/// locals: the script cannot reach or alter it.
const CHANGED: &str = r#"
local list = ...
local next, rawequal, getmetatable = next, rawequal, getmetatable
return function()
  -- Which metatables the tables have, then (the list starts with them) the metatables'
  -- contents: once they are known unchanged, no value compared below has an __eq the script
  -- could have planted (it would run here, without the time limit), so `~=` is safe.
  for i = 1, #list do
    local e = list[i]
    if not rawequal(getmetatable(e[1]), e[4]) then return true end
  end
  for i = 1, #list do
    local e = list[i]
    local t, base = e[1], e[2]
    local n = 0
    for k, v in next, t do
      if base[k] ~= v then return true end
      n = n + 1
    end
    if n ~= e[3] then return true end
  end
  return false
end
"#;

impl Baseline {
    fn take(lua: &Lua) -> mlua::Result<Baseline> {
        let globals = lua.globals();
        // The metatables first: [`CHANGED`] relies on it.
        let mut list: Vec<Table> = globals.metatable().into_iter().collect();
        if let Value::Table(t) = lua.load("return getmetatable('')").set_name("=sift").eval::<Value>()? {
            list.push(t);
        }
        list.push(globals.clone());
        globals.for_each(|_: Value, v: Value| {
            if let Value::Table(t) = v {
                list.push(t);
            }
            Ok(())
        })?;
        let mut tables: Vec<SharedTable> = Vec::new();
        for t in list {
            if tables.iter().any(|(u, _, _)| u.to_pointer() == t.to_pointer()) {
                continue;
            }
            let mut entries = Vec::new();
            t.for_each(|k: Value, v: Value| {
                entries.push((k, v));
                Ok(())
            })?;
            let mt = t.metatable();
            tables.push((t, entries, mt));
        }
        let list = lua.create_table()?;
        for (i, (t, entries, mt)) in tables.iter().enumerate() {
            let base = lua.create_table()?;
            for (k, v) in entries {
                base.raw_set(k.clone(), v.clone())?;
            }
            let e = lua.create_sequence_from([
                Value::Table(t.clone()),
                Value::Table(base),
                Value::Integer(entries.len() as i64),
                mt.clone().map_or(Value::Nil, Value::Table),
            ])?;
            list.raw_set(i + 1, e)?;
        }
        let changed = lua.load(CHANGED).set_name("=sift").call::<Function>(list)?;
        Ok(Baseline { globals, tables, changed })
    }
}

impl Engine {
    /// A fresh engine with an empty script cache.
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

    /// Locks the VM (for a run, a load or a lookup).
    pub fn lock(&self) -> MutexGuard<'_, Vm> {
        self.vm.lock()
    }

    /// `SCRIPT FLUSH`: a new VM, no cached script.
    pub fn flush(&self) {
        let vm = Vm::new().expect("the Lua VM starts");
        self.memory.store(vm.lua.used_memory(), Ordering::Relaxed);
        *self.vm.lock() = vm;
        self.cached.store(0, Ordering::Relaxed);
    }
}

/// The Lua side of `redis.call` / `redis.pcall`, the global protection and the `pcall` wrappers
/// that re-raise an abort. Loaded once per VM with `(slot, redis)` as arguments.
const PRELUDE: &str = r#"
local slot = ...
local error, type = error, type
-- A failed redis.call raises a Rust error value; a protected call gives the script Redis's
-- error table instead. An abort (time limit, SCRIPT KILL) must not be swallowed at all.
local function recheck(ok, ...)
  if slot.abort then error(slot.abort) end
  if not ok and type((...)) == 'userdata' then
    return ok, slot.convert((...)), select(2, ...)
  end
  return ok, ...
end
local base_pcall, base_xpcall = pcall, xpcall
pcall = function(...) return recheck(base_pcall(...)) end
-- The message handler, too, sees the error table of a failed redis.call and a library's error
-- string, as in Redis, not the Rust error value.
xpcall = function(f, h)
  return recheck(base_xpcall(f, function(e)
    if type(e) == 'userdata' then e = slot.convert(e) end
    return h(e)
  end))
end
local resume = coroutine.resume
coroutine.resume = function(...) return recheck(resume(...)) end
local runner = function(f, h) return base_xpcall(f, h) end
-- Lua 5.1 loads precompiled chunks, and malformed bytecode escapes the sandbox (Redis's
-- CVE-2015-4335): source text only.
local base_loadstring, sbyte, concat = loadstring, string.byte, table.concat
local function text_only(s, name)
  if type(s) == 'string' and sbyte(s, 1) == 27 then
    return nil, 'loading binary chunks is not allowed'
  end
  return base_loadstring(s, name)
end
loadstring = text_only
load = function(f, name)
  if type(f) ~= 'function' then return text_only(f, name) end
  local parts = {}
  while true do
    local piece = f()
    if piece == nil or piece == '' then break end
    if type(piece) ~= 'string' then return nil, 'reader function must return a string' end
    parts[#parts + 1] = piece
  end
  return text_only(concat(parts), name)
end
setmetatable(_G, {
  __newindex = function(t, k, v) error("Attempt to modify a readonly table", 2) end,
  __index = function(t, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
})
return runner
"#;

impl Vm {
    fn new() -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        let g = lua.globals();
        // Redis 7.0 has none of these (and `setfenv` would get past the read-only globals).
        for name in ["dofile", "loadfile", "print", "getfenv", "setfenv", "newproxy"] {
            g.raw_set(name, Value::Nil)?;
        }
        let redis = lua.create_table()?;
        redis.set("LOG_DEBUG", 0)?;
        redis.set("LOG_VERBOSE", 1)?;
        redis.set("LOG_NOTICE", 2)?;
        redis.set("LOG_WARNING", 3)?;
        redis.set("REDIS_VERSION", crate::version::REDIS_VERSION)?;
        redis.set("REDIS_VERSION_NUM", version_num(crate::version::REDIS_VERSION))?;
        redis.set(
            "sha1hex",
            lua.create_function(|_, args: Variadic<Value>| {
                let [Value::String(s)] = &args[..] else {
                    if args.len() == 1 {
                        // A number is hashed as its string form, as Lua coerces it.
                        if let Value::Integer(_) | Value::Number(_) = &args[0] {
                            let s = value_to_arg(&args[0]).expect("a number");
                            return Ok(sha1_hex(&s));
                        }
                    }
                    return Err(mlua::Error::runtime("wrong number of arguments"));
                };
                Ok(sha1_hex(&s.as_bytes()))
            })?,
        )?;
        redis.set(
            "error_reply",
            lua.create_function(|lua, args: Variadic<Value>| {
                let [Value::String(s)] = &args[..] else {
                    return Err(mlua::Error::runtime("wrong number or type of arguments"));
                };
                let text = String::from_utf8_lossy(&s.as_bytes()).into_owned();
                let with_dash = if text.starts_with('-') { text } else { format!("-{text}") };
                error_table(lua, &reply_error_text(&with_dash[1..]))
            })?,
        )?;
        redis.set(
            "status_reply",
            lua.create_function(|lua, args: Variadic<Value>| {
                let [Value::String(s)] = &args[..] else {
                    return Err(mlua::Error::runtime("wrong number or type of arguments"));
                };
                let t = lua.create_table()?;
                t.raw_set("ok", s.clone())?;
                Ok(t)
            })?,
        )?;
        redis.set(
            "log",
            lua.create_function(|lua, args: Variadic<Value>| {
                if args.len() < 2 {
                    return Err(mlua::Error::runtime("redis.log() requires two arguments or more."));
                }
                let level = match &args[0] {
                    Value::Integer(i) => *i,
                    Value::Number(n) => *n as i64,
                    _ => return Err(mlua::Error::runtime("First argument must be a number")),
                };
                if !(0..=3).contains(&level) {
                    return Err(mlua::Error::runtime("Invalid debug level."));
                }
                let mut msg = String::new();
                for a in args[1..].iter() {
                    if let Some(s) = lua.coerce_string(a.clone())? {
                        if !msg.is_empty() {
                            msg.push(' ');
                        }
                        msg.push_str(&s.to_string_lossy());
                    }
                }
                match level {
                    0 | 1 => tracing::debug!(target: "sift_server::script", "{msg}"),
                    2 => tracing::info!(target: "sift_server::script", "{msg}"),
                    _ => tracing::warn!(target: "sift_server::script", "{msg}"),
                }
                Ok(())
            })?,
        )?;
        redis.set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
        let slot = lua.create_table()?;
        slot.raw_set("resp", 2)?;
        let resp_slot = slot.clone();
        redis.set(
            "setresp",
            lua.create_function(move |_, args: Variadic<Value>| {
                if args.len() != 1 {
                    return Err(mlua::Error::runtime("redis.setresp() requires one argument."));
                }
                let resp = match &args[0] {
                    Value::Integer(i) => *i,
                    Value::Number(n) => *n as i64,
                    _ => 0,
                };
                if resp != 2 && resp != 3 {
                    return Err(mlua::Error::runtime("RESP version must be 2 or 3."));
                }
                resp_slot.raw_set("resp", resp)
            })?,
        )?;
        // redis.call / redis.pcall are Rust functions (a Lua wrapper would be tail-called by
        // `return redis.call(...)`, and the error would lose the script's line). They call this
        // run's dispatcher, `slot.raw`, which answers (kind, value): 0 ok, 1 a command error
        // (`call` raises it, `pcall` returns it), 2 an abort (both raise).
        let dispatch = |slot: Table, pcall: bool| {
            move |_: &Lua, args: Variadic<Value>| -> mlua::Result<Value> {
                let raw: Function = match slot.raw_get::<Value>("raw")? {
                    Value::Function(f) => f,
                    _ => return Err(mlua::Error::runtime("redis.call works only while a script runs")),
                };
                let resp = slot.raw_get::<i64>("resp").unwrap_or(2);
                let (kind, v): (u8, Value) = raw.call((resp, args))?;
                if kind == 0 || (kind == 1 && pcall) {
                    return Ok(v);
                }
                let text = match &v {
                    Value::Table(t) => {
                        t.raw_get::<String>("err").unwrap_or_else(|_| "ERR unknown error".into())
                    }
                    other => value_text(other),
                };
                Err(mlua::Error::external(CallError(text)))
            }
        };
        redis.set("call", lua.create_function(dispatch(slot.clone(), false))?)?;
        redis.set("pcall", lua.create_function(dispatch(slot.clone(), true))?)?;
        slot.raw_set(
            "convert",
            lua.create_function(|lua, v: Value| match &v {
                Value::Error(e) => match (call_error(e), crate::lualib::lib_error(e)) {
                    (Some(text), _) => Ok(Value::Table(error_table(lua, &text)?)),
                    // A library's error (cjson, bit) is a string, as from Redis's C libraries.
                    (None, Some(text)) => Ok(Value::String(lua.create_string(text)?)),
                    (None, None) => Ok(v),
                },
                _ => Ok(v),
            })?,
        )?;
        g.raw_set("redis", redis)?;
        crate::lualib::register(&lua)?;
        let runner: Function = lua.load(PRELUDE).set_name("=sift").call(slot.clone())?;
        let baseline = Baseline::take(&lua)?;
        Ok(Vm { lua, scripts: HashMap::new(), slot, runner, baseline })
    }

    /// The compiled script `sha`, if cached.
    pub fn get(&self, sha: &str) -> Option<Script> {
        let c = self.scripts.get(sha)?;
        Some(Script { function: self.lua.registry_value(&c.function).ok()?, shebang: c.shebang })
    }

    /// Is `sha` cached?
    pub fn contains(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    /// Number of cached scripts.
    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    /// Is the cache empty?
    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// Compiles `body` and caches it under its SHA-1; returns the id and the script, or the
    /// error reply (compile error, bad shebang).
    pub fn load(&mut self, body: &[u8]) -> Result<(String, Script), String> {
        let sha = sha1_hex(body);
        if let Some(s) = self.get(&sha) {
            return Ok((sha, s));
        }
        let shebang = parse_shebang(body)?;
        // The shebang line becomes a comment, so line numbers stay those of the script.
        let source: std::borrow::Cow<'_, [u8]> = match shebang {
            Some(_) => {
                let mut v = body.to_vec();
                v[..2].copy_from_slice(b"--");
                v.into()
            }
            None => body.into(),
        };
        let f = self
            .lua
            .load(&source[..])
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| format!("ERR Error compiling script (new function): {}", error_text(&e)))?;
        let key = self.lua.create_registry_value(f.clone()).map_err(|e| format!("ERR {e}"))?;
        self.scripts.insert(sha.clone(), Cached { function: key, shebang });
        Ok((sha, Script { function: f, shebang }))
    }

    /// Runs `f` with `KEYS`/`ARGV` set, `raw` as the command dispatcher, a deadline and a
    /// memory cap; returns the reply. `flags` is shared with `SCRIPT KILL`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        sha: &str,
        f: Function,
        keys: &[Bytes],
        args: &[Bytes],
        raw: Function,
        limits: RunLimits,
        flags: &Arc<RunFlags>,
    ) -> Frame {
        let lua = &self.lua;
        let setup = || -> mlua::Result<()> {
            let g = lua.globals();
            g.raw_set(
                "KEYS",
                lua.create_sequence_from(
                    keys.iter().map(|k| lua.create_string(k)).collect::<mlua::Result<Vec<_>>>()?,
                )?,
            )?;
            g.raw_set(
                "ARGV",
                lua.create_sequence_from(
                    args.iter().map(|a| lua.create_string(a)).collect::<mlua::Result<Vec<_>>>()?,
                )?,
            )?;
            self.slot.raw_set("raw", raw)?;
            self.slot.raw_set("abort", Value::Nil)?;
            self.slot.raw_set("resp", 2)?;
            Ok(())
        };
        if let Err(e) = setup() {
            return Frame::error(format!("ERR Error running script {sha}, {}", error_text(&e)));
        }
        let started = Instant::now();
        let deadline =
            (limits.time_limit_ms > 0).then(|| started + Duration::from_millis(limits.time_limit_ms));
        let slot = self.slot.clone();
        let hook_flags = flags.clone();
        let threshold = limits.time_limit_ms;
        // Cheap checks first: it runs every HOOK_EVERY instructions.
        let hook_aborted = AtomicBool::new(false);
        let hook = move |lua: &Lua, _: &mlua::Debug| -> mlua::Result<VmState> {
            if hook_aborted.load(Ordering::Relaxed) {
                return Err(mlua::Error::runtime("script aborted"));
            }
            let why = if hook_flags.kill.load(Ordering::Relaxed) {
                KILLED.to_string()
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                format!("ERR Script aborted: it ran longer than busy-reply-threshold ({threshold} ms)")
            } else {
                return Ok(VmState::Continue);
            };
            hook_aborted.store(true, Ordering::Relaxed);
            slot.raw_set("abort", error_table(lua, &why)?)?;
            Err(mlua::Error::runtime("script aborted"))
        };
        // Global: coroutines the script creates inherit the hook.
        let _ = lua.set_global_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), hook);
        let previous_limit = lua.set_memory_limit(limits.memory_limit).unwrap_or(0);
        let handler = lua.create_function(|lua, err: Value| error_handler(lua, err));
        // The cached function's environment, which `setfenv(1, t)` in the script would change.
        let f_env = f.clone();
        let result = match handler {
            Ok(h) => self.runner.call::<(bool, Value)>((f, h)),
            Err(e) => Err(e),
        };
        lua.remove_global_hook();
        let _ = f_env.set_environment(self.baseline.globals.clone());
        let _ = lua.set_memory_limit(previous_limit);
        let abort = self.slot.raw_get::<Value>("abort").unwrap_or(Value::Nil);
        let _ = self.slot.raw_set("raw", Value::Nil);
        let _ = self.slot.raw_set("abort", Value::Nil);
        let reply = if let Value::Table(t) = abort {
            Frame::error(t.raw_get::<String>("err").unwrap_or_else(|_| "ERR script aborted".into()))
        } else {
            match result {
                Ok((true, v)) => lua_to_frame(&v, 0, self.slot.raw_get::<i64>("resp").unwrap_or(2) == 3),
                Ok((false, Value::Table(t))) => script_error_reply(sha, &t),
                Ok((false, other)) => failure(sha, &value_text(&other), limits.memory_limit),
                Err(e) => failure(sha, &error_text(&e), limits.memory_limit),
            }
        };
        // A memory error can leave garbage behind: collect it now rather than at the next run.
        if matches!(&reply, Frame::Error(e) if e.contains("not enough memory")) {
            let _ = lua.gc_collect();
        }
        // Nothing this script changed in the shared tables reaches the next one. `rawset`,
        // `setmetatable` and `setfenv` get past the read-only `_G`, so the tables are put back
        // as they were rather than guarded (Redis 7 patches Lua for read-only tables).
        if let Err(e) = self.restore() {
            tracing::error!("restoring the Lua globals after a script: {e}");
        }
        reply
    }

    /// Puts the globals table and every table of the [`Baseline`] back as they were.
    fn restore(&self) -> mlua::Result<()> {
        self.lua.set_globals(self.baseline.globals.clone())?;
        let g = &self.baseline.globals;
        g.raw_set("KEYS", Value::Nil)?;
        g.raw_set("ARGV", Value::Nil)?;
        if !self.baseline.changed.call::<bool>(())? {
            return Ok(());
        }
        for (t, entries, mt) in &self.baseline.tables {
            t.set_metatable(None)?;
            // Not `Table::clear`: mlua 0.11 leaves the table on the Lua stack (one slot per
            // call, a stack overflow after a few thousand scripts).
            let mut keys = Vec::new();
            t.for_each(|k: Value, _: Value| {
                keys.push(k);
                Ok(())
            })?;
            for k in keys {
                t.raw_set(k, Value::Nil)?;
            }
            for (k, v) in entries {
                t.raw_set(k.clone(), v.clone())?;
            }
            t.set_metatable(mt.clone())?;
        }
        Ok(())
    }
}

/// The error a failed `redis.call` raises (its text is the error table's `err`).
#[derive(Debug)]
struct CallError(String);

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallError {}

/// The text of a [`CallError`] inside an mlua error, if it is one.
fn call_error(e: &mlua::Error) -> Option<String> {
    match e {
        mlua::Error::CallbackError { cause, .. } => call_error(cause),
        mlua::Error::WithContext { cause, .. } => call_error(cause),
        mlua::Error::ExternalError(x) => x.downcast_ref::<CallError>().map(|c| c.0.clone()),
        _ => None,
    }
}

/// A script in the cache: its function kept in the Lua registry. (Held as a [`Function`], it
/// would take a slot of mlua's reference stack for as long as it is cached, and mlua panics
/// past that stack's 8000 slots, see [`crate::lualib::MAX_REFS`]; Redis caches any number.)
struct Cached {
    function: mlua::RegistryKey,
    shebang: Option<bool>,
}

/// A cached script.
#[derive(Clone)]
pub struct Script {
    /// The compiled body.
    pub function: Function,
    /// `Some(no_writes)` when the script starts with a `#!lua` shebang: such a script is a
    /// write script unless it declares `flags=no-writes` (Redis 7).
    pub shebang: Option<bool>,
}

/// Redis 7's script shebang, `#!lua [flags=f1,f2]`: `Ok(None)` without one, `Ok(Some(no_writes))`
/// with one. The flags other than `no-writes` (`allow-oom`, `allow-stale`, `no-cluster`,
/// `allow-cross-slot-keys`) are accepted and have no effect here.
pub fn parse_shebang(body: &[u8]) -> Result<Option<bool>, String> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let line = body.split(|&b| b == b'\n').next().unwrap_or(body);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("#!");
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut no_writes = false;
    for part in parts {
        let Some(flags) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for flag in flags.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => no_writes = true,
                "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    Ok(Some(no_writes))
}

/// What bounds one run.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// `busy-reply-threshold` in ms; 0 = none.
    pub time_limit_ms: u64,
    /// `lua-maxmemory` in bytes; 0 = none.
    pub memory_limit: usize,
}

/// An error that is not an error table (Lua does not call the message handler for memory
/// errors): Redis's "Error running script" form.
fn failure(sha: &str, msg: &str, limit: usize) -> Frame {
    if msg.contains("not enough memory") || msg.contains("memory limit") {
        return Frame::error(format!(
            "ERR Error running script {sha}, not enough memory: the Lua VM reached lua-maxmemory ({limit} bytes)"
        ));
    }
    Frame::error(format!("ERR Error running script {sha}, {msg}"))
}

/// The reply for an error table that ended the script: Redis 7's `<err> script: <sha>, on
/// <source>:<line>.`.
fn script_error_reply(sha: &str, t: &Table) -> Frame {
    let msg = t.raw_get::<Option<String>>("err").ok().flatten().unwrap_or_else(|| "ERR unknown error".into());
    let source = t.raw_get::<Option<String>>("source").ok().flatten();
    let line = t.raw_get::<Option<i64>>("line").ok().flatten();
    match (source, line) {
        (Some(s), Some(l)) => Frame::error(format!("{msg} script: {sha}, on {s}:{l}.")),
        _ => Frame::error(msg),
    }
}

/// The message handler of a script's protected call, as Redis 7's: a non-table error becomes
/// `{err='ERR ' .. tostring(err)}`, and the table gets the script's `source` and `line`.
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let t = match err {
        Value::Table(t) if t.raw_get::<Value>("err").is_ok_and(|v| v.is_string()) => t,
        Value::Error(e) if call_error(&e).is_some() => error_table(lua, &call_error(&e).expect("checked"))?,
        other => error_table(lua, &format!("ERR {}", value_text(&other)))?,
    };
    // The innermost frame of the user's script: the raising function may be a C function
    // (`error`), the `redis.call` wrapper, or a Rust callback.
    for level in 1..64 {
        let Some(found) = lua.inspect_stack(level, |d| {
            let src = d.source();
            (src.source.as_deref() == Some("@user_script")).then(|| d.current_line())
        }) else {
            break;
        };
        if let Some(line) = found {
            t.raw_set("source", "@user_script")?;
            t.raw_set("line", line.map(|l| l as i64).unwrap_or(0))?;
            break;
        }
    }
    Ok(Value::Table(t))
}

/// `{err = text}`.
pub fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", text)?;
    Ok(t)
}

/// Redis's normalisation of an error reply for Lua (`luaPushErrorBuff`): trailing newlines cut,
/// and `ERR ` in front of a message without an error code (a single word).
pub fn reply_error_text(text: &str) -> String {
    let text = text.trim_end_matches(['\r', '\n']);
    if text.contains(' ') {
        text.to_string()
    } else {
        format!("ERR {text}")
    }
}

/// A Lua error value as text.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string_lossy(),
        Value::Error(e) => error_text(e),
        Value::Nil => "nil".into(),
        Value::Boolean(b) => b.to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.type_name().to_string(),
    }
}

/// The message of an mlua error, without the callback wrapping and traceback mlua adds.
pub fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::RuntimeError(s) => s.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::MemoryError(_) => "not enough memory".into(),
        mlua::Error::WithContext { cause, .. } => error_text(cause),
        other => other.to_string(),
    }
}

/// "8.0.0" → 0x080000.
fn version_num(v: &str) -> i64 {
    let mut parts = v.split('.').map(|p| p.parse::<i64>().unwrap_or(0));
    let (a, b, c) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a << 16) | (b << 8) | c
}

/// A `redis.call` argument: a string, or a number as Redis 7 writes it (the shortest text that
/// reads back exactly, integers without a fraction: not Lua's lossy `%.14g`); `None` for any
/// other type.
pub fn value_to_arg(v: &Value) -> Option<Bytes> {
    match v {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(i) => Some(Bytes::from(i.to_string())),
        Value::Number(n) => Some(Bytes::from(format_double(*n))),
        _ => None,
    }
}

/// A reply as the script sees it: RESP2 shapes by default, RESP3 ones after
/// `redis.setresp(3)` (see the module docs).
pub fn frame_to_lua(lua: &Lua, f: &Frame, resp3: bool) -> mlua::Result<Value> {
    Ok(match f {
        Frame::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s.as_str())?;
            Value::Table(t)
        }
        Frame::Error(e) => Value::Table(error_table(lua, &reply_error_text(e))?),
        Frame::Integer(i) => Value::Integer(*i),
        Frame::Bulk(b) => Value::String(lua.create_string(b)?),
        Frame::Verbatim(b) if resp3 => {
            let inner = lua.create_table()?;
            inner.raw_set("format", "txt")?;
            inner.raw_set("string", lua.create_string(b)?)?;
            let t = lua.create_table()?;
            t.raw_set("verbatim_string", inner)?;
            Value::Table(t)
        }
        Frame::Verbatim(b) => Value::String(lua.create_string(b)?),
        Frame::Null | Frame::NullArray if resp3 => Value::Nil,
        Frame::Null | Frame::NullArray => Value::Boolean(false),
        Frame::Set(items) if resp3 => {
            let members = lua.create_table()?;
            for item in items {
                members.raw_set(frame_to_lua(lua, item, resp3)?, true)?;
            }
            let t = lua.create_table()?;
            t.raw_set("set", members)?;
            Value::Table(t)
        }
        Frame::Array(items) | Frame::Set(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, frame_to_lua(lua, item, resp3)?)?;
            }
            Value::Table(t)
        }
        Frame::Map(pairs) if resp3 => {
            let fields = lua.create_table()?;
            for (k, v) in pairs {
                fields.raw_set(frame_to_lua(lua, k, resp3)?, frame_to_lua(lua, v, resp3)?)?;
            }
            let t = lua.create_table()?;
            t.raw_set("map", fields)?;
            Value::Table(t)
        }
        Frame::Map(pairs) => {
            let t = lua.create_table_with_capacity(2 * pairs.len(), 0)?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                t.raw_set(2 * i + 1, frame_to_lua(lua, k, resp3)?)?;
                t.raw_set(2 * i + 2, frame_to_lua(lua, v, resp3)?)?;
            }
            Value::Table(t)
        }
        Frame::Double(d) if resp3 => {
            let t = lua.create_table()?;
            t.raw_set("double", *d)?;
            Value::Table(t)
        }
        Frame::Double(d) => Value::String(lua.create_string(format_double(*d))?),
        Frame::Boolean(b) if resp3 => Value::Boolean(*b),
        Frame::Boolean(b) => Value::Integer(*b as i64),
    })
}

/// A script's return value as a reply (see the module docs). `resp3`: the script called
/// `redis.setresp(3)`, so a boolean is a boolean reply (else `true` → 1, `false` → null).
/// Besides `err` and `ok`, a table may carry Redis 7's RESP3 forms, whatever the protocol:
/// `{double=n}`, `{map={...}}`, `{set={...}}`, `{big_number=s}` (sent as a bulk string),
/// `{verbatim_string={format=..., string=...}}`; the client's protocol decides their bytes.
pub fn lua_to_frame(v: &Value, depth: usize, resp3: bool) -> Frame {
    reply_within(v, depth, resp3, MAX_REPLY_BYTES)
}

/// [`lua_to_frame`] with `max_bytes` in place of [`MAX_REPLY_BYTES`] (the tests' budgets are
/// small, so a refusal costs them little).
fn reply_within(v: &Value, depth: usize, resp3: bool, max_bytes: usize) -> Frame {
    let mut budget = max_bytes;
    convert(v, depth, resp3, &mut budget).unwrap_or_else(|| Frame::error(REPLY_TOO_LARGE))
}

/// [`lua_to_frame`], charging each element (a [`Frame`] plus its bytes) to `budget`: `None` once
/// the reply would outweigh it.
fn convert(v: &Value, depth: usize, resp3: bool, budget: &mut usize) -> Option<Frame> {
    let weight = std::mem::size_of::<Frame>()
        + match v {
            Value::String(s) => s.as_bytes().len(),
            _ => 0,
        };
    *budget = budget.checked_sub(weight)?;
    Some(match v {
        Value::Nil => Frame::Null,
        Value::Boolean(b) if resp3 => Frame::Boolean(*b),
        Value::Boolean(false) => Frame::Null,
        Value::Boolean(true) => Frame::Integer(1),
        Value::Integer(i) => Frame::Integer(*i),
        Value::Number(n) => Frame::Integer(crate::lualib::c_int64(*n)),
        Value::String(s) => Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Some(Frame::error("ERR reached lua stack limit"));
            }
            let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
            if let Value::String(e) = field("err") {
                return Some(Frame::Error(e.to_string_lossy()));
            }
            if let Value::String(s) = field("ok") {
                return Some(Frame::Simple(s.to_string_lossy()));
            }
            match field("double") {
                Value::Number(n) => return Some(Frame::Double(n)),
                Value::Integer(i) => return Some(Frame::Double(i as f64)),
                _ => {}
            }
            if let Value::String(s) = field("big_number") {
                return Some(Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())));
            }
            if let Value::Table(m) = field("map") {
                let mut pairs = Vec::new();
                for (k, v) in m.pairs::<Value, Value>().filter_map(Result::ok) {
                    pairs.push((
                        convert(&k, depth + 1, resp3, budget)?,
                        convert(&v, depth + 1, resp3, budget)?,
                    ));
                }
                return Some(Frame::Map(pairs));
            }
            if let Value::Table(m) = field("set") {
                let mut members = Vec::new();
                for (k, _) in m.pairs::<Value, Value>().filter_map(Result::ok) {
                    members.push(convert(&k, depth + 1, resp3, budget)?);
                }
                return Some(Frame::Set(members));
            }
            if let Value::Table(v) = field("verbatim_string") {
                if let (Ok(Value::String(_)), Ok(Value::String(text))) =
                    (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
                {
                    return Some(Frame::Verbatim(Bytes::copy_from_slice(&text.as_bytes())));
                }
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(item) => items.push(convert(&item, depth + 1, resp3, budget)?),
                }
            }
            Frame::Array(items)
        }
        _ => Frame::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(vm: &mut Vm, body: &str) -> Frame {
        let (sha, f) = match vm.load(body.as_bytes()) {
            Ok((sha, s)) => (sha, s.function),
            Err(e) => return Frame::Error(e),
        };
        let raw = vm
            .lua
            .create_function(|lua, _: Variadic<Value>| Ok((1, error_table(lua, "ERR no keyspace")?)))
            .unwrap();
        let limits = RunLimits { time_limit_ms: 1000, memory_limit: crate::config::LUA_MAXMEMORY_DEFAULT };
        vm.run(
            &sha,
            f,
            &[Bytes::from("k")],
            &[Bytes::from("a"), Bytes::from("b")],
            raw,
            limits,
            &Arc::default(),
        )
    }

    fn bulk(s: &str) -> Frame {
        Frame::bulk(s.to_string())
    }

    #[test]
    fn sha1_of_known_strings() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"return 1"), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }

    #[test]
    fn lua_to_redis_conversions() {
        let mut vm = Vm::new().unwrap();
        assert_eq!(eval(&mut vm, "return 1"), Frame::Integer(1));
        assert_eq!(eval(&mut vm, "return 3.99"), Frame::Integer(3));
        assert_eq!(eval(&mut vm, "return -3.99"), Frame::Integer(-3));
        assert_eq!(eval(&mut vm, "return 'x'"), bulk("x"));
        assert_eq!(eval(&mut vm, "return true"), Frame::Integer(1));
        assert_eq!(eval(&mut vm, "return false"), Frame::Null);
        assert_eq!(eval(&mut vm, "return nil"), Frame::Null);
        assert_eq!(eval(&mut vm, "return"), Frame::Null);
        assert_eq!(
            eval(&mut vm, "return {1, 'a', {2.5, false}, nil, 7}"),
            Frame::Array(vec![
                Frame::Integer(1),
                bulk("a"),
                Frame::Array(vec![Frame::Integer(2), Frame::Null]),
            ])
        );
        assert_eq!(eval(&mut vm, "return {ok='FINE'}"), Frame::Simple("FINE".into()));
        assert_eq!(eval(&mut vm, "return {err='MY bad'}"), Frame::error("MY bad"));
        assert_eq!(eval(&mut vm, "return redis.status_reply('PONG')"), Frame::Simple("PONG".into()));
        assert_eq!(eval(&mut vm, "return redis.error_reply('My Error')"), Frame::error("My Error"));
        assert_eq!(eval(&mut vm, "return redis.error_reply('boom')"), Frame::error("ERR boom"));
        assert_eq!(eval(&mut vm, "return redis.error_reply('-WRONG x')"), Frame::error("WRONG x"));
        assert_eq!(
            eval(&mut vm, "return {KEYS[1], ARGV[1], ARGV[2], #ARGV}"),
            Frame::Array(vec![bulk("k"), bulk("a"), bulk("b"), Frame::Integer(2)])
        );
        assert_eq!(
            eval(&mut vm, "return redis.sha1hex('')"),
            bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")
        );
        // A table that contains itself is cut, not followed forever.
        let Frame::Array(mut a) = eval(&mut vm, "local t = {}; t[1] = t; return t") else { panic!() };
        let mut depth = 1;
        while let Some(Frame::Array(inner)) = a.pop() {
            a = inner;
            depth += 1;
        }
        assert!(depth >= MAX_DEPTH);
    }

    /// A return value whose tables share sub-tables (a cycle, or a DAG doubling at each level)
    /// is a tree of exponential size when flattened into a reply; so is one string repeated
    /// thousands of times. Converting it must end with an error, not run (with every shard
    /// locked) until the server runs out of time or memory. The conversion charges each element
    /// to a byte budget before converting it, so it stops after at most budget / size of a
    /// `Frame` elements: checked with a 1 MiB budget (at most ~32k elements, milliseconds) rather
    /// than the server's 512 MB (some 16 million elements, which took 35 s on a loaded machine),
    /// and the accounting itself exactly, below.
    #[test]
    fn shared_tables_cannot_blow_up_the_reply() {
        const BUDGET: usize = 1 << 20;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let vm = Vm::new().unwrap();
            for body in [
                "local t = {} t[1] = t t[2] = t return t",
                "local a = {1} for i = 1, 64 do a = {a, a} end return a",
                "local s = string.rep('x', 1024 * 1024) local t = {} for i = 1, 4096 do t[i] = s end return t",
            ] {
                let v: Value = vm.lua.load(body).eval().unwrap();
                tx.send((body, reply_within(&v, 0, false, BUDGET))).unwrap();
            }
        });
        for _ in 0..3 {
            // Not a speed limit: a conversion that stops takes milliseconds here; the deadline
            // only turns one that never stops (2^64 elements) into a failure instead of a hang.
            let (body, r) = rx.recv_timeout(Duration::from_secs(120)).expect("the conversion stops");
            // Not assert_eq: a conversion that was not refused is gigabytes to print.
            assert!(r == Frame::error(REPLY_TOO_LARGE), "{body}: not refused");
        }
        // The accounting: a `Frame` per element plus a string's bytes. A reply of exactly the
        // budget is whole; one byte less and it is refused.
        let vm = Vm::new().unwrap();
        let v: Value = vm.lua.load("return {1, 'abc', {2}}").eval().unwrap();
        let weight = 5 * std::mem::size_of::<Frame>() + 3;
        let whole = Frame::Array(vec![Frame::Integer(1), bulk("abc"), Frame::Array(vec![Frame::Integer(2)])]);
        assert_eq!(reply_within(&v, 0, false, weight), whole);
        assert_eq!(reply_within(&v, 0, false, weight - 1), Frame::error(REPLY_TOO_LARGE));
        // Under the server's budget, large replies that fit are still whole.
        let mut vm = Vm::new().unwrap();
        let Frame::Array(a) = eval(&mut vm, "local t = {} for i = 1, 100000 do t[i] = {i, 'x'} end return t")
        else {
            panic!()
        };
        assert_eq!(a.len(), 100000);
    }

    /// One VM serves every client: nothing a script does to the shared tables (`redis`, the
    /// libraries, `_G`, their metatables, the globals table itself) may reach the next script,
    /// or one client could forge `redis.call`'s answers for all others.
    #[test]
    fn scripts_cannot_change_what_later_scripts_see() {
        let mut vm = Vm::new().unwrap();
        for body in [
            "redis.call = function() return 'forged' end",
            "rawset(redis, 'pcall', function() return 'forged' end)",
            "rawset(_G, 'leak', 1)",
            "rawset(_G, 'redis', {pcall = function() return 'forged' end})",
            "string.len = function() return 7 end",
            "getmetatable('').__index = {len = function() return 7 end}",
            "getmetatable(_G).__index = nil getmetatable(_G).__newindex = nil",
            "setmetatable(_G, nil)",
            "setfenv(0, {redis = {pcall = function() return 'forged' end}})",
            "math.floor = nil table.concat = nil coroutine.resume = nil",
            // An __eq planted on a shared metatable must not run (unbounded) in the check.
            "local loop = function() while true do end end getmetatable(_G).__eq = loop \
             rawset(_G, '_G', setmetatable({}, {__eq = loop}))",
            "getmetatable('').__eq = function() while true do end end \
             rawset(_G, 'string', setmetatable({}, getmetatable('')))",
        ] {
            let _ = eval(&mut vm, body);
        }
        assert_eq!(eval(&mut vm, "return redis.pcall('GET', 'x')"), Frame::error("ERR no keyspace"));
        let Frame::Error(e) = eval(&mut vm, "return redis.call('GET', 'x')") else { panic!() };
        assert!(e.starts_with("ERR no keyspace"), "{e}");
        assert_eq!(
            eval(&mut vm, "return {('abc'):len(), string.len('abcd')}"),
            Frame::Array(vec![Frame::Integer(3), Frame::Integer(4)])
        );
        assert_eq!(eval(&mut vm, "return math.floor(2.5) .. table.concat({1, 2})"), bulk("212"));
        let Frame::Error(e) = eval(&mut vm, "return leak") else { panic!("a global leaked") };
        assert!(e.contains("nonexistent global variable 'leak'"), "{e}");
        let Frame::Error(e) = eval(&mut vm, "x = 1") else { panic!("globals became writable") };
        assert!(e.contains("Attempt to modify a readonly table"), "{e}");
        // The same script run twice: what it stored with rawset is not kept either.
        let body = "local n = (rawget(_G, 'n') or 0) + 1 rawset(_G, 'n', n) return n";
        assert_eq!(eval(&mut vm, body), Frame::Integer(1));
        assert_eq!(eval(&mut vm, body), Frame::Integer(1));
    }

    /// Lua 5.1 loads precompiled chunks given to `loadstring` / `load`, and malformed bytecode
    /// reads and writes memory at will (Redis's CVE-2015-4335): text only.
    #[test]
    fn bytecode_is_refused() {
        let mut vm = Vm::new().unwrap();
        for loader in [
            "loadstring(string.dump(function() return 1 end))",
            "load((function() local s, i = string.dump(function() return 1 end), 0 \
             return function() i = i + 1 if i == 1 then return s end end end)())",
        ] {
            assert_eq!(eval(&mut vm, &format!("return type(({loader}))")), bulk("nil"), "{loader}");
        }
        assert_eq!(eval(&mut vm, "return loadstring('return 2')()"), Frame::Integer(2));
    }

    #[test]
    fn redis_to_lua_conversions() {
        let lua = Lua::new();
        let check = |f: Frame, expect: &str| {
            let v = frame_to_lua(&lua, &f, false).unwrap();
            let show: Function = lua
                .load(
                    r#"local function show(v)
                         if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
                         if v.ok then return 'ok:' .. v.ok end
                         if v.err then return 'err:' .. v.err end
                         local out = {}
                         for i = 1, #v do out[i] = show(v[i]) end
                         return '[' .. table.concat(out, ',') .. ']'
                       end
                       return show"#,
                )
                .eval()
                .unwrap();
            assert_eq!(show.call::<String>(v).unwrap(), expect);
        };
        check(Frame::Integer(5), "number:5");
        check(Frame::bulk("x"), "string:x");
        check(Frame::Null, "boolean:false");
        check(Frame::NullArray, "boolean:false");
        check(Frame::ok(), "ok:OK");
        check(Frame::error("WRONGTYPE Operation against a key"), "err:WRONGTYPE Operation against a key");
        check(Frame::error("oops"), "err:ERR oops");
        check(
            Frame::Array(vec![Frame::Integer(1), Frame::Array(vec![Frame::bulk("a")])]),
            "[number:1,[string:a]]",
        );
        check(Frame::Map(vec![(Frame::bulk("k"), Frame::Integer(2))]), "[string:k,number:2]");
        check(Frame::Double(1.5), "string:1.5");
        check(Frame::Boolean(true), "number:1");
        check(Frame::Set(vec![Frame::bulk("m")]), "[string:m]");
    }

    #[test]
    fn errors_compile_runtime_and_sandbox() {
        let mut vm = Vm::new().unwrap();
        let Frame::Error(e) = eval(&mut vm, "return (") else { panic!() };
        assert!(e.starts_with("ERR Error compiling script (new function): user_script:1:"), "{e}");
        let sha = sha1_hex(b"error('boom')");
        assert_eq!(
            eval(&mut vm, "error('boom')"),
            Frame::error(format!("ERR user_script:1: boom script: {sha}, on @user_script:1."))
        );
        let body = "\nreturn redis.call('GET', 'x')";
        assert_eq!(
            eval(&mut vm, body),
            Frame::error(format!(
                "ERR no keyspace script: {}, on @user_script:2.",
                sha1_hex(body.as_bytes())
            ))
        );
        // redis.pcall returns the error table instead of raising it.
        assert_eq!(eval(&mut vm, "return redis.pcall('GET', 'x')"), Frame::error("ERR no keyspace"));
        // Lua's pcall around redis.call gives the script Redis's error table.
        assert_eq!(
            eval(&mut vm, "local ok, e = pcall(redis.call, 'GET', 'x'); return {ok and 1 or 0, e.err}"),
            Frame::Array(vec![Frame::Integer(0), bulk("ERR no keyspace")])
        );
        let Frame::Error(e) = eval(&mut vm, "x = 1") else { panic!() };
        assert!(e.starts_with("ERR user_script:1: Attempt to modify a readonly table"), "{e}");
        let Frame::Error(e) = eval(&mut vm, "return undefined_thing") else { panic!() };
        assert!(
            e.contains("Script attempted to access nonexistent global variable 'undefined_thing'"),
            "{e}"
        );
        for lib in ["os", "io", "package", "debug", "dofile", "loadfile"] {
            let Frame::Error(e) = eval(&mut vm, &format!("return {lib}")) else { panic!("{lib} exists") };
            assert!(e.contains("nonexistent global"), "{e}");
        }
        assert_eq!(eval(&mut vm, "return loadstring('return 2')()"), Frame::Integer(2));
        assert_eq!(
            eval(&mut vm, "return string.rep('a', 3) .. table.concat({1,2}) .. math.floor(2.5)"),
            bulk("aaa122")
        );
        // Bytecode is refused: `bytecode_is_refused`.
    }

    #[test]
    fn runaway_scripts_are_aborted_even_through_pcall() {
        let mut vm = Vm::new().unwrap();
        let limits = RunLimits { time_limit_ms: 50, memory_limit: crate::config::LUA_MAXMEMORY_DEFAULT };
        for body in [
            "while true do end",
            "while true do pcall(function() while true do end end) end",
            "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        ] {
            let (sha, f) = vm.load(body.as_bytes()).map(|(h, s)| (h, s.function)).unwrap();
            let raw = vm.lua.create_function(|_, ()| Ok(0)).unwrap();
            let t = Instant::now();
            let reply = vm.run(&sha, f, &[], &[], raw, limits, &Arc::default());
            assert_eq!(
                reply,
                Frame::error("ERR Script aborted: it ran longer than busy-reply-threshold (50 ms)"),
                "{body}"
            );
            assert!(t.elapsed() < Duration::from_secs(5), "{body}");
        }
        // The VM still works afterwards.
        assert_eq!(eval(&mut vm, "return 1"), Frame::Integer(1));
    }

    /// A loop of slow library calls runs few instructions per call: with the clock checked
    /// every 100 000 instructions (Redis's count), `string.rep` of 4 MB (~1 ms) in a loop saw the
    /// limit every ~25 s; every 1 000 it is ~0.25 s. The bound is in units of one such call,
    /// timed in the same run (a loaded machine stretches both alike): at most 2 000 calls past
    /// the limit, where the 100 000-instruction check allowed ~25 000.
    #[test]
    fn slow_library_calls_do_not_outrun_the_time_limit() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut vm = Vm::new().unwrap();
            let body = b"for i = 1, 1e9 do local s = string.rep('x', 4 * 1024 * 1024) end";
            let (sha, f) = vm.load(body).map(|(h, s)| (h, s.function)).unwrap();
            let raw = vm.lua.create_function(|_, ()| Ok(0)).unwrap();
            // One call's time, now: 20 calls without a limit.
            let calls = b"for i = 1, 20 do local s = string.rep('x', 4 * 1024 * 1024) end";
            let (csha, cf) = vm.load(calls).map(|(h, s)| (h, s.function)).unwrap();
            let unlimited =
                RunLimits { time_limit_ms: 0, memory_limit: crate::config::LUA_MAXMEMORY_DEFAULT };
            let t = Instant::now();
            let done = vm.run(&csha, cf, &[], &[], raw.clone(), unlimited, &Arc::default());
            assert_eq!(done, Frame::Null);
            let per_call = t.elapsed() / 20;
            let limits = RunLimits { time_limit_ms: 100, memory_limit: crate::config::LUA_MAXMEMORY_DEFAULT };
            let t = Instant::now();
            let reply = vm.run(&sha, f, &[], &[], raw, limits, &Arc::default());
            tx.send((reply, t.elapsed(), per_call)).unwrap();
        });
        let (reply, took, per_call) =
            rx.recv_timeout(Duration::from_secs(120)).expect("the script is aborted in time");
        assert_eq!(
            reply,
            Frame::error("ERR Script aborted: it ran longer than busy-reply-threshold (100 ms)")
        );
        let bound = Duration::from_millis(100) + per_call * 2_000;
        assert!(took < bound, "took {took:?}, one call {per_call:?}, bound {bound:?}");
    }

    #[test]
    fn memory_limit_gives_a_clean_error() {
        let mut vm = Vm::new().unwrap();
        let (sha, f) = vm
            .load(b"local t = {} for i = 1, 1e8 do t[i] = string.rep('x', 100) .. i end return #t")
            .map(|(h, s)| (h, s.function))
            .unwrap();
        let raw = vm.lua.create_function(|_, ()| Ok(0)).unwrap();
        let limits = RunLimits { time_limit_ms: 0, memory_limit: 8 * 1024 * 1024 };
        let Frame::Error(e) = vm.run(&sha, f, &[], &[], raw, limits, &Arc::default()) else { panic!() };
        assert!(e.contains("not enough memory"), "{e}");
        assert_eq!(eval(&mut vm, "return 1"), Frame::Integer(1));
    }

    #[test]
    fn resp3_conversions() {
        let mut vm = Vm::new().unwrap();
        assert_eq!(eval(&mut vm, "return {double=3.5}"), Frame::Double(3.5));
        assert_eq!(eval(&mut vm, "return {double=3}"), Frame::Double(3.0));
        assert_eq!(eval(&mut vm, "return {map={a=1}}"), Frame::Map(vec![(bulk("a"), Frame::Integer(1))]));
        assert_eq!(eval(&mut vm, "return {set={x=true}}"), Frame::Set(vec![bulk("x")]));
        assert_eq!(
            eval(&mut vm, "return {big_number='123456789012345678901234567890'}"),
            bulk("123456789012345678901234567890")
        );
        assert_eq!(
            eval(&mut vm, "return {verbatim_string={format='txt', string='v'}}"),
            Frame::Verbatim("v".into())
        );
        assert_eq!(eval(&mut vm, "redis.setresp(3) return true"), Frame::Boolean(true));
        assert_eq!(eval(&mut vm, "redis.setresp(3) return false"), Frame::Boolean(false));
        assert_eq!(eval(&mut vm, "return false"), Frame::Null, "each run starts in RESP2");
        let Frame::Error(e) = eval(&mut vm, "redis.setresp(4)") else { panic!() };
        assert!(e.starts_with("ERR RESP version must be 2 or 3."), "{e}");
        let lua = Lua::new();
        let show: Function = lua
            .load(
                r#"local function show(v)
                     if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
                     if v.double then return 'double:' .. v.double end
                     if v.map then local n = 0 for k, x in pairs(v.map) do n = n + 1 end return 'map:' .. n .. ':' .. show(v.map.k) end
                     if v.set then return 'set:' .. tostring(v.set.m) end
                     if v.verbatim_string then return 'verb:' .. v.verbatim_string.string end
                     return '?'
                   end
                   return show"#,
            )
            .eval()
            .unwrap();
        let check = |f: Frame, expect: &str| {
            let v = frame_to_lua(&lua, &f, true).unwrap();
            assert_eq!(show.call::<String>(v).unwrap(), expect);
        };
        check(Frame::Double(1.5), "double:1.5");
        check(Frame::Map(vec![(Frame::bulk("k"), Frame::Integer(2))]), "map:1:number:2");
        check(Frame::Set(vec![Frame::bulk("m")]), "set:true");
        check(Frame::Boolean(false), "boolean:false");
        check(Frame::Null, "nil:nil");
        check(Frame::Verbatim("t".into()), "verb:t");
    }

    #[test]
    fn shebang_flags() {
        assert_eq!(parse_shebang(b"return 1"), Ok(None));
        assert_eq!(parse_shebang(b"#!lua\nreturn 1"), Ok(Some(false)));
        assert_eq!(parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1"), Ok(Some(true)));
        assert_eq!(parse_shebang(b"#!js\n").unwrap_err(), "ERR Unexpected engine in script shebang: #!js");
        assert_eq!(parse_shebang(b"#!lua name=x\n").unwrap_err(), "ERR Unknown lua shebang option: name=x");
        assert_eq!(
            parse_shebang(b"#!lua flags=bad\n").unwrap_err(),
            "ERR Unexpected flag in script shebang: bad"
        );
        let mut vm = Vm::new().unwrap();
        // Line numbers are the script's own.
        let body = "#!lua\nerror('x')";
        assert_eq!(
            eval(&mut vm, body),
            Frame::error(format!(
                "ERR user_script:2: x script: {}, on @user_script:2.",
                sha1_hex(body.as_bytes())
            ))
        );
    }

    #[test]
    fn numbers_as_command_arguments() {
        let arg = |v: Value| value_to_arg(&v).map(|b| String::from_utf8(b.to_vec()).unwrap());
        assert_eq!(arg(Value::Number(0.1)).as_deref(), Some("0.1"));
        assert_eq!(arg(Value::Number(3.0)).as_deref(), Some("3"));
        assert_eq!(arg(Value::Integer(-7)).as_deref(), Some("-7"));
        assert_eq!(arg(Value::Number(1e14)).as_deref(), Some("100000000000000"));
        assert_eq!(arg(Value::Boolean(true)), None);
        assert_eq!(arg(Value::Nil), None);
    }

    /// mlua holds every Lua value Rust code keeps (a table being filled, a string to return) in
    /// one auxiliary stack of at most 8000 slots for the whole VM, and panics past it. The
    /// libraries' decoders hold one per nesting level (two in a map: the table and its key) and
    /// one per string or table they return: deep maps and thousands of returned strings, which
    /// Redis decodes, answer an error here instead of panicking (the VM goes on working).
    #[test]
    fn library_results_stay_within_mluas_reference_stack() {
        // Scripts run on the server's runtime workers, whose stacks are 8 MiB.
        std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(library_results_stay_within_mluas_reference_stack_on_a_worker_stack)
            .unwrap()
            .join()
            .unwrap();
    }

    fn library_results_stay_within_mluas_reference_stack_on_a_worker_stack() {
        let mut vm = Vm::new().unwrap();
        let cases = [
            // Maps nested in values under string keys, and in keys.
            "string.rep(string.char(0x81, 0xa1, 0x61), 3990) .. string.char(0xc0)",
            "string.rep(string.char(0x81, 0x80), 3990) .. string.char(0xc0)",
            "string.rep(string.char(0x81), 7990) .. string.char(0x01, 0xc0) .. string.rep(string.char(0x01), 7990)",
        ];
        for s in cases {
            let body = format!("local ok, e = pcall(cmsgpack.unpack, {s}) return {{tostring(ok), e}}");
            match eval(&mut vm, &body) {
                Frame::Array(v) if v.first() == Some(&bulk("false")) => {}
                other => panic!("{s}: {other:?}"),
            }
        }
        for body in [
            "return select('#', cmsgpack.unpack(string.rep(string.char(0xa1, 0x61), 7900)))",
            "return select('#', cmsgpack.unpack(string.rep(string.char(0x90), 7900)))",
            "return select('#', struct.unpack(string.rep('c1', 7900), string.rep('a', 7900)))",
        ] {
            let body = format!("local ok, e = pcall(function() {body} end) return {{tostring(ok), e}}");
            match eval(&mut vm, &body) {
                Frame::Array(v) if v.first() == Some(&bulk("false")) => {}
                other => panic!("{body}: {other:?}"),
            }
        }
        // Below the bound, as many as Redis returns.
        let many = "return select('#', cmsgpack.unpack(string.rep(string.char(0xa1, 0x61), 3000)))";
        assert_eq!(eval(&mut vm, many), Frame::Integer(3000));
        assert_eq!(
            eval(&mut vm, "return cjson.encode(cmsgpack.unpack(string.char(0x81, 0xa1, 0x61, 1)))"),
            bulk("{\"a\":1}")
        );
    }

    /// Redis caches any number of scripts. Each cached one held as an mlua `Function` took a
    /// slot of mlua's 8000-slot reference stack (see `crate::lualib::MAX_REFS`) for as long as
    /// it was cached: past about 7700 scripts, loading or running any script panicked.
    #[test]
    fn thousands_of_cached_scripts() {
        let mut vm = Vm::new().unwrap();
        for i in 0..9000 {
            vm.load(format!("return {i}").as_bytes()).unwrap();
        }
        assert_eq!(vm.len(), 9000);
        assert_eq!(eval(&mut vm, "return 8999 + 1"), Frame::Integer(9000));
        let s = vm.get(&sha1_hex(b"return 4711")).unwrap();
        assert_eq!(s.shebang, None);
        assert_eq!(s.function.call::<i64>(()).unwrap(), 4711);
    }
}
