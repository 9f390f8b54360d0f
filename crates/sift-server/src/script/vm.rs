//! The VM: its creation (the `redis` table, the libraries, the sandbox's [`Baseline`]), the
//! script cache, and one run under its time and memory limits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{ChunkMode, Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, Variadic, VmState};
use sha1::{Digest, Sha1};

use super::baseline::Baseline;
use super::convert::{lua_to_frame, value_to_arg};
use super::error::{
    call_error, error_handler, error_table, error_text, failure, reply_error_text, script_error_reply,
    value_text, CallError,
};
use crate::frame::Frame;

/// Instructions between two clock checks of a running script. Redis uses 100 000, but library
/// calls cost far more than an instruction (`string.rep` of megabytes, ~1 ms), and a loop of
/// them went ~100 000 / 4 calls past the limit and past SCRIPT KILL. A check every 1 000 costs
/// nothing measurable (3M-iteration loops with and without a library call: within 3 %).
/// A single C call is still not interrupted (a pathological `string.find` pattern).
pub const HOOK_EVERY: u32 = 1_000;

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
    pub(super) fn new() -> mlua::Result<Vm> {
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

/// "8.0.0" → 0x080000.
fn version_num(v: &str) -> i64 {
    let mut parts = v.split('.').map(|p| p.parse::<i64>().unwrap_or(0));
    let (a, b, c) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (a << 16) | (b << 8) | c
}
