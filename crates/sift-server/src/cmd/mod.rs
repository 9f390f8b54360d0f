//! Commands: parsing arguments, applying them to the keyspace, building the reply.
//!
//! Command code never touches a socket. [`execute`] takes a request's arguments and a
//! [`Session`], looks the command up in the one [`table`], checks arity and authentication,
//! queues it when a MULTI is open, locks the shards of the keys the table says it touches, and
//! calls the handler with a [`Ctx`]; the handler returns a [`Frame`]. The connection layer (or,
//! later, a Redis module shim) only moves bytes.
//!
//! Transactions: MULTI queues, EXEC runs the queue under one lock of every shard it touches
//! (plus the shards of the keys the client WATCHes, so the check that none of them was modified
//! and the commands are one atomic step), and the records of its writes reach persistence as one
//! transaction (`log_transaction`). WATCH registers keys in their shards ([`crate::db`]),
//! where every change marks the watchers; EXEC, DISCARD, UNWATCH and the connection's end
//! ([`unwatch_all`]) unregister them.
//!
//! Handlers have the type [`Handler`]. Command groups: [`keys`] (generic key commands),
//! [`server`] (connection, server, transactions, config), [`bitmap`] (SETBIT, GETBIT, BITCOUNT,
//! BITPOS, STRLEN on strings), and [`family`] for the commands of the families registered in
//! `sift_commands` (the RedisBloom commands and the others), which run there.

pub mod batch;
pub mod bitmap;
pub mod err;
pub mod family;
pub mod keys;
pub mod parse;
pub mod script;
pub mod server;
pub mod table;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::db::Locked;
use crate::frame::Frame;
use crate::shared::Shared;
use table::{CommandSpec, LockPlan, Run};

/// A command implementation: arguments (name included, as `argv[0]`) to reply.
pub type Handler = fn(&mut Ctx<'_, '_>, &[Bytes]) -> Frame;

/// What the connection must do after sending the reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum After {
    /// Keep serving.
    #[default]
    Continue,
    /// Flush the reply, then close (QUIT).
    Close,
    /// Close without sending this reply (SHUTDOWN: the server is going away).
    CloseSilently,
}

/// A MULTI being queued.
#[derive(Debug, Default)]
pub struct Multi {
    queued: Vec<(&'static CommandSpec, Vec<Bytes>)>,
    /// A queueing error happened: EXEC will answer EXECABORT.
    aborted: bool,
}

/// Per-connection state that commands read and change.
#[derive(Debug)]
pub struct Session {
    /// Client id (`CLIENT ID`, HELLO `id`).
    pub id: u64,
    /// RESP version of replies: 2 or 3.
    pub protocol: u8,
    /// `CLIENT SETNAME`; empty = none.
    pub name: Bytes,
    /// Passed AUTH (or no password is configured).
    pub authenticated: bool,
    /// Selected database (always 0: this server has one).
    pub db: usize,
    /// Open MULTI, if any.
    pub multi: Option<Multi>,
    /// Set by QUIT / SHUTDOWN.
    pub after: After,
    /// A write was recorded for persistence since the last flush: commit before replying.
    pub needs_commit: bool,
    /// The replies since the last flush were computed from state up to this log sequence
    /// number (another connection's write, perhaps not durable yet): they wait until it is.
    pub wait_lsn: u64,
    /// The commands come from the log being replayed at start-up (Redis's "must obey" AOF
    /// client): they were accepted once, so limits that depend on the moment (`maxmemory`) do
    /// not refuse them again.
    pub replaying: bool,
    /// Keys this connection WATCHes (each registered once in its shard, see [`crate::db`]).
    pub watching: Vec<Bytes>,
    /// Set (by whoever changes one of [`Session::watching`]) when a watched key is modified:
    /// Redis's `CLIENT_DIRTY_CAS`, EXEC then answers a null reply.
    pub watch_dirty: Arc<AtomicBool>,
    /// While an EXEC or a script runs: the log records of its writes, collected to be handed
    /// to persistence as one transaction ([`crate::persist::Persistence::record_transaction`]).
    pub tx_log: Option<Vec<Vec<Bytes>>>,
}

impl Session {
    /// A new RESP2 session; `authenticated` is false when a password is required.
    pub fn new(id: u64, authenticated: bool) -> Session {
        Session {
            id,
            protocol: 2,
            name: Bytes::new(),
            authenticated,
            db: 0,
            multi: None,
            after: After::Continue,
            needs_commit: false,
            wait_lsn: 0,
            replaying: false,
            watching: Vec::new(),
            watch_dirty: Arc::new(AtomicBool::new(false)),
            tx_log: None,
        }
    }
}

/// What a handler works with.
pub struct Ctx<'a, 'k> {
    /// The connection's session.
    pub session: &'a mut Session,
    /// Server-wide state (configuration, persistence, clients).
    pub server: &'a Shared,
    /// The keyspace, with the shards of this command's keys locked.
    pub keys: &'a mut Locked<'k>,
    /// When set, persistence records these commands instead of the arguments as received
    /// (EXPIRE is recorded as PEXPIREAT so a replay does not restart the clock).
    pub propagate: Option<Vec<Vec<Bytes>>>,
}

/// Runs one request. `None` for an empty request (`*0`, a blank inline line): no reply.
pub fn execute(server: &Shared, session: &mut Session, argv: Vec<Bytes>) -> Option<Frame> {
    if argv.is_empty() {
        return None;
    }
    let in_multi = session.multi.is_some();
    let spec = match resolve(&argv) {
        Ok(spec) => spec,
        Err(e) => {
            server.commands.reject(table::lookup(&argv[0]));
            if let Some(m) = session.multi.as_mut() {
                m.aborted = true;
            }
            return Some(Frame::Error(e));
        }
    };
    if !session.authenticated && spec.flags & table::NO_AUTH == 0 {
        server.commands.reject(Some(spec));
        if let Some(m) = session.multi.as_mut() {
            m.aborted = true;
        }
        return Some(Frame::error(err::NOAUTH));
    }
    // maxmemory: a command that may add memory is refused while the keyspace is over the limit,
    // and so is EXEC of a transaction holding one; refusing it while queueing aborts the MULTI.
    let may_grow = spec.flags & table::DENYOOM != 0
        || (spec.name == "exec"
            && session
                .multi
                .as_ref()
                .is_some_and(|m| m.queued.iter().any(|(s, _)| s.flags & table::DENYOOM != 0)));
    if may_grow && server.over_maxmemory() {
        server.commands.reject(Some(spec));
        if spec.name == "exec" {
            // Redis aborts the whole transaction, naming the reason.
            session.multi = None;
            unwatch_all(server, session);
            return Some(Frame::error(format!("EXECABORT Transaction discarded because of: {}", err::OOM)));
        }
        if let Some(m) = session.multi.as_mut() {
            m.aborted = true;
        }
        return Some(Frame::error(err::OOM));
    }
    let writes = spec.flags & table::WRITE != 0
        || (spec.name == "exec"
            && session
                .multi
                .as_ref()
                .is_some_and(|m| m.queued.iter().any(|(s, _)| s.flags & table::WRITE != 0)));
    if writes {
        // The log failed: applying the write in memory would make it visible, but not durable.
        if let Some(why) = server.persistence.write_error() {
            server.commands.reject(Some(spec));
            if let Some(m) = session.multi.as_mut() {
                m.aborted = true;
            }
            return Some(Frame::error(format!("{}: {why}", err::MISCONF_AOF)));
        }
    }
    if in_multi && spec.flags & table::NO_QUEUE == 0 {
        session.multi.as_mut().expect("in multi").queued.push((spec, argv));
        return Some(Frame::Simple("QUEUED".into()));
    }
    Some(match spec.name {
        "exec" => {
            let started = server.commands.now();
            let reply = exec(server, session);
            if !session.replaying {
                server.stats.commands_processed.incr(session.id);
                server.commands.record(spec, started, matches!(reply, Frame::Error(_)));
            }
            reply
        }
        _ => run(server, session, spec, &argv),
    })
}

/// Finds the command (and subcommand) and checks arity. Rows without a handler do not exist.
pub(crate) fn resolve(argv: &[Bytes]) -> Result<&'static CommandSpec, String> {
    let name = &argv[0];
    let Some(spec) = table::lookup(name) else {
        return Err(err::unknown_command(name, &argv[1..]));
    };
    if !spec.arity_ok(argv.len()) {
        return Err(err::arity(spec.name));
    }
    if spec.subcommands.is_empty() {
        return Ok(spec);
    }
    let Some(sub) = spec.subcommand(&argv[1]) else {
        return Err(err::unknown_subcommand(&argv[1], spec.name));
    };
    if !sub.arity_ok(argv.len()) {
        return Err(err::arity(sub.name));
    }
    Ok(sub)
}

fn lock_plan<'d>(server: &'d Shared, spec: &CommandSpec, argv: &[Bytes]) -> Locked<'d> {
    match spec.lock_plan() {
        LockPlan::None | LockPlan::EachShard => server.db.unlocked(),
        LockPlan::All => server.db.lock_all(),
        LockPlan::Keys => server.db.lock_keys(spec.keys(argv).map(|k| &k[..])),
    }
}

/// The shards of `spec`'s plan if they are all free now; `None` if one is held by someone else
/// (or the plan locks shards one by one inside the handler).
fn try_lock_plan<'d>(server: &'d Shared, spec: &CommandSpec, argv: &[Bytes]) -> Option<Locked<'d>> {
    match spec.lock_plan() {
        LockPlan::None => Some(server.db.unlocked()),
        LockPlan::EachShard => None,
        LockPlan::All => server.db.try_lock_shards((0..crate::db::SHARDS).collect()),
        LockPlan::Keys => server.db.try_lock_shards(crate::db::shards_of(spec.keys(argv).map(|k| &k[..]))),
    }
}

/// Is `spec` one of the script commands (which hold every shard for up to
/// `busy-reply-threshold`)?
fn is_script(spec: &CommandSpec) -> bool {
    matches!(spec.name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro")
}

/// Counts a script command in [`crate::script::Engine::pending`] while it lives.
struct Pending<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Pending<'a> {
    fn new(server: &'a Shared) -> Pending<'a> {
        server.scripting.pending.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Pending(&server.scripting.pending)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Runs `f`, which takes shard locks (`f` gets them when `try_first` could take them): on the
/// calling thread when no script is waiting or running (locks are then held briefly), else,
/// unless `try_first` gets every lock at once, off the runtime's worker threads. A worker
/// parked on a lock a script holds serves nothing: with as many waiting clients as workers,
/// SCRIPT KILL (which takes no lock) and new connections would not be read until the script
/// ended by itself.
fn locking<'d, R>(
    server: &'d Shared,
    try_first: impl FnOnce() -> Option<Locked<'d>>,
    f: impl FnOnce(Option<Locked<'d>>) -> R,
) -> R {
    if server.scripting.pending.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        return f(None);
    }
    match try_first() {
        Some(keys) => f(Some(keys)),
        None => script::off_the_runtime(|| f(None)),
    }
}

/// [`locking`] of the shards `shards` (ascending, distinct): `f` runs with all of them held.
fn locking_shards<R>(server: &Shared, shards: Vec<usize>, f: impl FnOnce(&mut Locked<'_>) -> R) -> R {
    locking(
        server,
        || server.db.try_lock_shards(shards.clone()),
        |keys| f(&mut keys.unwrap_or_else(|| server.db.lock_shards(shards.clone()))),
    )
}

/// Does `spec` take the Lua VM's lock, which a running script holds (SCRIPT LOAD, EXISTS,
/// FLUSH; not KILL)?
fn takes_vm(spec: &CommandSpec) -> bool {
    matches!(spec.name, "script|load" | "script|exists" | "script|flush")
}

fn run(server: &Shared, session: &mut Session, spec: &'static CommandSpec, argv: &[Bytes]) -> Frame {
    if spec.lock_plan() == LockPlan::None {
        let mut run = || run_locked(server, session, spec, argv, &mut server.db.unlocked());
        // The VM is busy while a script runs: wait for it as for the shards (see `locking`).
        if takes_vm(spec) && server.scripting.pending.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            return script::off_the_runtime(run);
        }
        return run();
    }
    let _pending = is_script(spec).then(|| Pending::new(server));
    locking(
        server,
        || try_lock_plan(server, spec, argv),
        |keys| {
            let mut keys = keys.unwrap_or_else(|| lock_plan(server, spec, argv));
            run_locked(server, session, spec, argv, &mut keys)
        },
    )
}

/// Runs a resolved command with its shards already locked, and records it for persistence if
/// it changed the keyspace (while the locks are still held, so the log order is the apply order).
pub(crate) fn run_locked(
    server: &Shared,
    session: &mut Session,
    spec: &'static CommandSpec,
    argv: &[Bytes],
    keys: &mut Locked<'_>,
) -> Frame {
    if (spec.flags & table::WRITE != 0 || is_script(spec))
        && session.tx_log.is_none()
        && server.is_shutting_down()
    {
        return stopped(session);
    }
    let before = keys.mutations();
    let mut ctx = Ctx { session, server, keys, propagate: None };
    let started = server.commands.now();
    let reply = call(spec, &mut ctx, argv);
    // Counted once it ran, as Redis does: INFO does not count itself, CONFIG RESETSTAT does.
    if !ctx.session.replaying {
        server.commands.record(spec, started, matches!(reply, Frame::Error(_)));
        server.stats.commands_processed.incr(ctx.session.id);
    }
    let propagate = ctx.propagate.take();
    keys.settle();
    if spec.flags & (table::WRITE | table::PROPAGATE) != 0 && keys.mutations() > before {
        match propagate {
            // One command logged as several records (BF.ADD creating its filter: LOADCHUNK,
            // then the add) is a transaction of its own.
            Some(cmds) if cmds.len() > 1 && session.tx_log.is_none() => log_transaction(server, cmds),
            Some(cmds) => cmds.iter().for_each(|c| log(server, session, c)),
            None => log(server, session, argv),
        }
        if session.tx_log.is_none() {
            keys.stamp_written(server.persistence.appended_lsn());
        }
        session.needs_commit = true;
    }
    // INFO reports counters (keys, changes), not data: a monitoring poll never waits for
    // another connection's fsync.
    if spec.name != "info" {
        session.wait_lsn = session.wait_lsn.max(keys.seen_lsn());
    }
    reply
}

/// A write that comes after the final snapshot of a shutdown is not run: the connection closes
/// without a reply, as if the server had already exited (Redis exits right after that
/// snapshot), so nothing acknowledged is missing from it.
fn stopped(session: &mut Session) -> Frame {
    session.after = After::CloseSilently;
    Frame::Null
}

/// Calls a resolved command's handler.
fn call(spec: &'static CommandSpec, ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match spec.handler.expect("resolve returns only rows with a handler") {
        Run::Server(handler) => handler(ctx, argv),
        Run::Family(cmd) => family::run(ctx, cmd, argv),
    }
}

/// Hands one write's record to persistence, or to the transaction being collected
/// ([`Session::tx_log`]).
fn log(server: &Shared, session: &mut Session, argv: &[Bytes]) {
    match session.tx_log.as_mut() {
        Some(records) => records.push(argv.to_vec()),
        None => server.persistence.record(argv),
    }
}

/// Hands the records an EXEC or a script collected to persistence: one record alone, several
/// as one transaction (framed in the log, so recovery applies all of them or none). Called with
/// the transaction's shard locks still held, as [`crate::persist::Persistence::record`] is.
pub(crate) fn log_transaction(server: &Shared, records: Vec<Vec<Bytes>>) {
    match records.len() {
        0 => {}
        1 => server.persistence.record(&records[0]),
        _ => server.persistence.record_transaction(&records),
    }
}

/// Applies one logged write command to `keys` (which must hold every shard), without recording
/// it: how persistence replays its log at start-up. Returns the command's reply (an error reply
/// is not a failure of the replay: e.g. RENAME of a key that has expired since it was logged).
pub fn replay(server: &Shared, keys: &mut Locked<'_>, argv: &[Bytes]) -> Result<Frame, String> {
    debug_assert!(keys.holds_all());
    let spec = resolve(argv)?;
    let mut session = Session::new(0, true);
    session.replaying = true;
    let mut ctx = Ctx { session: &mut session, server, keys, propagate: None };
    let reply = call(spec, &mut ctx, argv);
    keys.settle();
    Ok(reply)
}

/// EXEC: runs the queued commands under one lock of the union of their shards, so no other
/// client sees a state in between (every shard if one of them works on the whole keyspace).
fn exec(server: &Shared, session: &mut Session) -> Frame {
    let Some(multi) = session.multi.take() else {
        return Frame::error(err::EXEC_WITHOUT_MULTI);
    };
    if multi.aborted {
        unwatch_all(server, session);
        return Frame::error(err::EXECABORT);
    }
    let whole =
        multi.queued.iter().any(|(s, _)| matches!(s.lock_plan(), LockPlan::All | LockPlan::EachShard));
    // The watched keys' shards too: their check and the commands are one atomic step.
    let shards: Vec<usize> = if whole {
        (0..crate::db::SHARDS).collect()
    } else {
        let queued = multi.queued.iter().flat_map(|(s, a)| s.keys(a));
        crate::db::shards_of(queued.chain(&session.watching).map(|k| &k[..]))
    };
    let _pending = multi.queued.iter().any(|(s, _)| is_script(s)).then(|| Pending::new(server));
    locking_shards(server, shards, |keys| {
        // Redis 7.0: a watched key that expired since it was watched fails the EXEC too.
        let id = session.id;
        let failed = session.watch_dirty.load(Ordering::Acquire)
            || session.watching.iter().any(|k| keys.watched_key_expired(k, id));
        // EXEC unwatches everything first, whatever the outcome (a queued UNWATCH is then
        // a no-op, as in Redis).
        unwatch_locked(session, keys);
        if failed {
            return Frame::NullArray;
        }
        if server.is_shutting_down() && multi.queued.iter().any(|(s, _)| s.flags & table::WRITE != 0) {
            return stopped(session);
        }
        session.tx_log = Some(Vec::new());
        let mut replies = Vec::with_capacity(multi.queued.len());
        for (spec, argv) in &multi.queued {
            replies.push(run_locked(server, session, spec, argv, keys));
        }
        log_transaction(server, session.tx_log.take().unwrap_or_default());
        keys.stamp_written(server.persistence.appended_lsn());
        session.wait_lsn = session.wait_lsn.max(keys.seen_lsn());
        Frame::Array(replies)
    })
}

/// Forgets every key `session` WATCHes; `keys` holds their shards.
fn unwatch_locked(session: &mut Session, keys: &mut Locked<'_>) {
    for key in std::mem::take(&mut session.watching) {
        keys.unwatch(&key, session.id);
    }
    // Nobody can set the flag any more: it was registered only with the keys just removed.
    session.watch_dirty.store(false, Ordering::Release);
}

/// Forgets every key `session` WATCHes (UNWATCH, DISCARD, EXEC, the connection's end), locking
/// their shards (the caller holds none).
pub fn unwatch_all(server: &Shared, session: &mut Session) {
    if session.watching.is_empty() {
        session.watch_dirty.store(false, Ordering::Release);
        return;
    }
    let shards = crate::db::shards_of(session.watching.iter().map(|k| &k[..]));
    locking_shards(server, shards, |keys| unwatch_locked(session, keys))
}

/// WATCH key [key ...]: registers the keys in their shards (locked by the dispatcher).
pub(crate) fn watch(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    if ctx.session.multi.is_some() {
        return Frame::error(err::WATCH_IN_MULTI);
    }
    // As Redis: no point in watching more once a watched key was modified.
    if ctx.session.watch_dirty.load(Ordering::Acquire) {
        return Frame::ok();
    }
    let (id, dirty) = (ctx.session.id, ctx.session.watch_dirty.clone());
    for key in &argv[1..] {
        if ctx.keys.watch(key, id, &dirty) {
            ctx.session.watching.push(key.clone());
        }
    }
    Frame::ok()
}

/// UNWATCH.
pub(crate) fn unwatch(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    unwatch_all(ctx.server, ctx.session);
    Frame::ok()
}

/// MULTI.
pub(crate) fn multi(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    if ctx.session.multi.is_some() {
        return Frame::error(err::MULTI_NESTED);
    }
    ctx.session.multi = Some(Multi::default());
    Frame::ok()
}

/// DISCARD.
pub(crate) fn discard(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    match ctx.session.multi.take() {
        Some(_) => {
            unwatch_all(ctx.server, ctx.session);
            Frame::ok()
        }
        None => Frame::error(err::DISCARD_WITHOUT_MULTI),
    }
}

/// EXEC's table row points here; [`execute`] intercepts EXEC before, because it needs to run
/// other commands under its own locks.
pub(crate) fn exec_placeholder(_ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    Frame::error(err::EXEC_WITHOUT_MULTI)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Params;
    use crate::persist::MemoryOnly;

    fn run(server: &Shared, session: &mut Session, args: &[&str]) -> Frame {
        let argv = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        execute(server, session, argv).expect("non-empty request")
    }

    /// TIME: two bulk strings, seconds and microseconds, bracketed by the clock read before and
    /// after; arity as Redis's.
    #[test]
    fn time_is_seconds_and_microseconds() {
        let server = Shared::new(Params::default(), Box::new(MemoryOnly::default()));
        let mut s = Session::new(1, true);
        let micros =
            || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros();
        let before = micros();
        let reply = run(&server, &mut s, &["TIME"]);
        let after = micros();
        let Frame::Array(parts) = reply else { panic!("{reply:?}") };
        let num = |f: &Frame| match f {
            Frame::Bulk(b) => std::str::from_utf8(b).unwrap().parse::<u128>().unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(parts.len(), 2);
        let (secs, us) = (num(&parts[0]), num(&parts[1]));
        assert!(us < 1_000_000, "{us}");
        assert!((before..=after).contains(&(secs * 1_000_000 + us)), "{before} {secs}.{us} {after}");
        assert_eq!(
            run(&server, &mut s, &["TIME", "x"]),
            Frame::Error("ERR wrong number of arguments for 'time' command".into())
        );
    }

    /// WATCH, then a change by another session: EXEC answers the null reply and runs nothing;
    /// every way out (EXEC, DISCARD, UNWATCH, the connection's end) leaves no registration.
    #[test]
    fn watch_then_exec_and_every_way_out_unregisters() {
        let server = Shared::new(Params::default(), Box::new(MemoryOnly::default()));
        let (mut s, mut o) = (Session::new(1, true), Session::new(2, true));
        assert_eq!(run(&server, &mut s, &["WATCH", "a", "b", "a"]), Frame::ok());
        assert_eq!(s.watching.len(), 2);
        assert!(server.db.watched());
        run(&server, &mut o, &["SET", "b", "1"]);
        run(&server, &mut s, &["MULTI"]);
        run(&server, &mut s, &["SET", "a", "1"]);
        assert_eq!(run(&server, &mut s, &["EXEC"]), Frame::NullArray);
        assert!(!server.db.watched() && s.watching.is_empty());
        assert_eq!(run(&server, &mut s, &["EXISTS", "a"]), Frame::Integer(0));
        for way_out in [&[&["UNWATCH"][..]][..], &[&["MULTI"], &["DISCARD"]], &[&["MULTI"], &["EXEC"]]] {
            run(&server, &mut s, &["WATCH", "a"]);
            way_out.iter().for_each(|c| drop(run(&server, &mut s, c)));
            assert!(!server.db.watched(), "{way_out:?}");
        }
        // EXEC without MULTI keeps the watch, as in Redis.
        run(&server, &mut s, &["WATCH", "a"]);
        run(&server, &mut s, &["EXEC"]);
        assert!(server.db.watched());
        run(&server, &mut s, &["WATCH", "a"]);
        unwatch_all(&server, &mut s);
        assert!(!server.db.watched());
    }

    /// The command layer runs without any socket: what a module shim would do.
    #[test]
    fn commands_run_without_a_transport() {
        let server = Shared::new(Params::default(), Box::new(MemoryOnly::default()));
        let mut s = Session::new(1, true);
        assert_eq!(run(&server, &mut s, &["SET", "a", "1"]), Frame::ok());
        assert_eq!(run(&server, &mut s, &["get", "a"]), Frame::bulk("1"));
        assert_eq!(run(&server, &mut s, &["MULTI"]), Frame::ok());
        assert_eq!(run(&server, &mut s, &["RENAME", "a", "b"]), Frame::Simple("QUEUED".into()));
        assert_eq!(run(&server, &mut s, &["DBSIZE"]), Frame::Simple("QUEUED".into()));
        assert_eq!(run(&server, &mut s, &["EXEC"]), Frame::Array(vec![Frame::ok(), Frame::Integer(1)]));
        assert_eq!(run(&server, &mut s, &["HELLO", "3"]).clone(), run(&server, &mut s, &["HELLO"]));
        assert_eq!(s.protocol, 3);
        assert!(execute(&server, &mut s, vec![]).is_none());
    }
}
