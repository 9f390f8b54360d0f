//! The scripting commands on the Lua engine (with the `lua` feature; see [`super`]).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use mlua::{Value, Variadic};

use super::{off_the_runtime, split_keys, FLUSH_OPTION, NOSCRIPT, RO_WITH_WRITE_FLAG};
use crate::cmd::{err, table, Ctx, Session};
use crate::frame::Frame;
use crate::script::{self, frame_to_lua, value_to_arg, RunLimits};

// Errors of a call from a script (Redis adds `ERR `; the raised error also gets the script's
// id and line).
const SCRIPT_UNKNOWN: &str = "ERR Unknown Redis command called from script";
const SCRIPT_ARITY: &str = "ERR Wrong number of args calling Redis command from script";
const SCRIPT_NOT_ALLOWED: &str = "ERR This Redis command is not allowed from script";
const SCRIPT_WRITE_IN_RO: &str = "ERR Write commands are not allowed from read-only scripts.";
const SCRIPT_NO_ARGS: &str = "ERR Please specify at least one argument for this redis lib call";
const SCRIPT_BAD_ARG: &str = "ERR Lua redis lib command arguments must be strings or integers";

/// EVAL script numkeys [key ...] [arg ...].
pub fn eval(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    run(ctx, argv, false, false)
}

/// EVAL_RO: as EVAL, refusing write commands.
pub fn eval_ro(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    run(ctx, argv, false, true)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...].
pub fn evalsha(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    run(ctx, argv, true, false)
}

/// EVALSHA_RO.
pub fn evalsha_ro(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    run(ctx, argv, true, true)
}

fn run(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], by_sha: bool, read_only: bool) -> Frame {
    let (keys, args) = match split_keys(argv) {
        Ok(x) => x,
        Err(e) => return Frame::error(e),
    };
    debug_assert!(ctx.keys.holds_all(), "EVAL rows are ALL_KEYS: every shard is locked");
    let server = ctx.server;
    let engine = &server.scripting;
    let mut vm = engine.lock();
    let (sha, script) = if by_sha {
        let sha = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
        match vm.get(&sha) {
            Some(s) => (sha, s),
            None => return Frame::error(NOSCRIPT),
        }
    } else {
        let loaded = vm.load(&argv[1]);
        engine.cached.store(vm.len(), Ordering::Relaxed);
        match loaded {
            Ok(x) => x,
            Err(e) => return Frame::error(e),
        }
    };
    // Redis 7: a script with a shebang is a write script unless it says `no-writes`, and the
    // _RO commands refuse it; `no-writes` makes it read-only under EVAL too.
    let read_only = match script.shebang {
        Some(false) if read_only => return Frame::error(RO_WITH_WRITE_FLAG),
        Some(no_writes) => read_only || no_writes,
        None => read_only,
    };
    let f = script.function;
    let vm = &*vm;
    let limits = {
        let c = server.config.read();
        RunLimits { time_limit_ms: c.busy_reply_threshold, memory_limit: c.lua_maxmemory }
    };
    // maxmemory is judged once, before the script (Redis's pre-command OOM state), and refuses
    // only DENYOOM calls made before the script's first write.
    let oom = server.over_maxmemory();
    let flags = engine.flags.clone();
    flags.kill.store(false, Ordering::Relaxed);
    flags.wrote.store(false, Ordering::Relaxed);
    flags.running.store(true, Ordering::Relaxed);
    // Cleared however the run ends (a handler's panic unwinds through here too).
    let _running = Running(&flags);
    let mut session = Session::new(ctx.session.id, true);
    // The script's writes reach the log as one transaction (see `crate::cmd::log_transaction`).
    session.tx_log = Some(Vec::new());
    let keyspace = &mut *ctx.keys;
    let reply = off_the_runtime(|| {
        vm.lua.scope(|scope| {
            let raw = scope.create_function_mut(|lua, (resp, args): (u8, Variadic<Value>)| {
                // redis.setresp: the protocol the called commands answer in.
                session.protocol = resp;
                let (kind, frame) = call(server, &mut session, keyspace, &args, read_only, oom, &flags);
                let v = frame_to_lua(lua, &frame, resp == 3)?;
                Ok((kind, v))
            })?;
            Ok(vm.run(&sha, f, keys, args, raw, limits, &engine.flags))
        })
    });
    drop(_running);
    engine.memory.store(vm.lua.used_memory(), Ordering::Relaxed);
    if session.needs_commit {
        ctx.session.needs_commit = true;
    }
    // Still under every shard lock. Inside an EXEC, the script's records join the EXEC's.
    let records = session.tx_log.take().unwrap_or_default();
    match ctx.session.tx_log.as_mut() {
        Some(outer) => outer.extend(records),
        None => {
            crate::cmd::log_transaction(server, records);
            ctx.keys.stamp_written(server.persistence.appended_lsn());
        }
    }
    match reply {
        Ok(r) => r,
        Err(e) => Frame::error(format!("ERR Error running script {sha}, {}", script::error_text(&e))),
    }
}

/// Marks the script as no longer running when dropped.
struct Running<'a>(&'a script::RunFlags);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Relaxed);
    }
}

/// One `redis.call` / `redis.pcall`: (0, reply) on success, (1, error) for an error `call`
/// raises and `pcall` returns, (2, error) for one both raise (the script is being aborted).
fn call(
    server: &crate::shared::Shared,
    session: &mut Session,
    keys: &mut crate::db::Locked<'_>,
    args: &[Value],
    read_only: bool,
    oom: bool,
    flags: &script::RunFlags,
) -> (u8, Frame) {
    if flags.kill.load(Ordering::Relaxed) {
        return (2, Frame::error(script::KILLED));
    }
    if args.is_empty() {
        return (1, Frame::error(SCRIPT_NO_ARGS));
    }
    let mut argv = Vec::with_capacity(args.len());
    for a in args {
        match value_to_arg(a) {
            Some(b) => argv.push(b),
            None => return (1, Frame::error(SCRIPT_BAD_ARG)),
        }
    }
    let Some(top) = table::lookup(&argv[0]) else {
        return (1, Frame::error(SCRIPT_UNKNOWN));
    };
    if !top.arity_ok(argv.len()) {
        return (1, Frame::error(SCRIPT_ARITY));
    }
    // Subcommands (CLIENT, CONFIG, MEMORY): their own rows decide, with the client's errors.
    let spec = match crate::cmd::resolve(&argv) {
        Ok(s) => s,
        Err(e) => return (1, Frame::Error(e)),
    };
    if spec.flags & table::NOSCRIPT != 0 || top.flags & table::NOSCRIPT != 0 {
        return (1, Frame::error(SCRIPT_NOT_ALLOWED));
    }
    let writes = spec.flags & table::WRITE != 0;
    if read_only && writes {
        return (1, Frame::error(SCRIPT_WRITE_IN_RO));
    }
    // A failed log refuses every write, even after the script's first (Redis lets a script that
    // has written go on): a write that cannot be made durable is not applied.
    if writes {
        if let Some(why) = server.persistence.write_error() {
            return (1, Frame::error(format!("{}: {why}", err::MISCONF_AOF)));
        }
    }
    if oom && spec.flags & table::DENYOOM != 0 && !flags.wrote.load(Ordering::Relaxed) {
        return (1, Frame::error(err::OOM));
    }
    if writes {
        flags.wrote.store(true, Ordering::Relaxed);
    }
    match crate::cmd::run_locked(server, session, spec, &argv, keys) {
        // A command's error reply: `redis.call` raises it, `redis.pcall` returns it.
        e @ Frame::Error(_) => (1, e),
        reply => (0, reply),
    }
}

/// SCRIPT LOAD script.
pub fn script_load(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let engine = &ctx.server.scripting;
    let mut vm = engine.lock();
    let r = vm.load(&argv[2]);
    engine.cached.store(vm.len(), Ordering::Relaxed);
    match r {
        Ok((sha, _)) => Frame::bulk(sha),
        Err(e) => Frame::error(e),
    }
}

/// SCRIPT EXISTS sha1 [sha1 ...].
pub fn script_exists(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let vm = ctx.server.scripting.lock();
    Frame::Array(
        argv[2..]
            .iter()
            .map(|s| Frame::Integer(vm.contains(&String::from_utf8_lossy(s).to_ascii_lowercase()) as i64))
            .collect(),
    )
}

/// SCRIPT FLUSH [ASYNC|SYNC].
pub fn script_flush(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match &argv[2..] {
        [] => {}
        [o] if o.eq_ignore_ascii_case(b"sync") || o.eq_ignore_ascii_case(b"async") => {}
        _ => return Frame::error(FLUSH_OPTION),
    }
    ctx.server.scripting.flush();
    Frame::ok()
}

/// SCRIPT KILL: stops the running script if it has not written (it runs on another
/// connection; this command takes neither the VM nor any shard lock).
pub fn script_kill(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    let flags = &ctx.server.scripting.flags;
    if !flags.running.load(Ordering::Relaxed) {
        return Frame::error(script::NOTBUSY);
    }
    if flags.wrote.load(Ordering::Relaxed) {
        return Frame::error(script::UNKILLABLE);
    }
    flags.kill.store(true, Ordering::Relaxed);
    Frame::ok()
}
