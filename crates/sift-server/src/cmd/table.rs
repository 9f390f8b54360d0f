//! The command table: the one place that says, for every command, its name, arity, flags, key
//! positions, ACL categories and handler. It drives dispatch ([`lookup`]), arity errors, shard
//! locking (which keys a command touches) and the `COMMAND` replies.
//!
//! # The family rows
//!
//! The commands of the registered families (`BF.*`, `CF.*`, and every family of
//! `sift_commands::families`) are not written here: each is declared once in `sift_commands`
//! (arity, flags, ACL categories, key specs, summary, handler), and [`commands`] turns each
//! declaration into a row, ahead of the server's own rows ([`SERVER_COMMANDS`]). They report the
//! `module` flag, and `COMMAND DOCS` names their module `bf`, as for RedisBloom's commands. The
//! dispatcher locks the keys their key specs find before calling the handler; extra
//! argument-count rules (BF.RESERVE at most 7, CF.RESERVE odd, CF.COMPACT exactly 2, BF.INFO at
//! most 3) are checked by the handlers. A command registered read-only that moves data (CF.COMPACT,
//! as RedisBloom registers it) has the internal [`PROPAGATE`] flag, so its changes still reach
//! persistence.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use sift_commands::{FindKeys, KeyFlags, KeySpec};

use super::Handler;
use super::{bitmap, keys, script, server};
use crate::frame::Frame;

/// Changes data.
pub const WRITE: u32 = 1 << 0;
/// Only reads data.
pub const READONLY: u32 = 1 << 1;
/// May grow memory use (refused when over `maxmemory`).
pub const DENYOOM: u32 = 1 << 2;
/// Administrative.
pub const ADMIN: u32 = 1 << 3;
/// O(1) or O(log n).
pub const FAST: u32 = 1 << 4;
/// Allowed before AUTH.
pub const NO_AUTH: u32 = 1 << 5;
/// Allowed while loading.
pub const LOADING: u32 = 1 << 6;
/// Allowed on a stale replica.
pub const STALE: u32 = 1 << 7;
/// Not allowed in scripts.
pub const NOSCRIPT: u32 = 1 << 8;
/// Implemented by a module (RedisBloom's commands report it).
pub const MODULE: u32 = 1 << 9;
/// Not allowed inside MULTI.
pub const NO_MULTI: u32 = 1 << 10;
/// May cause a replicated write without being a write command (EVAL, SCRIPT LOAD).
pub const MAY_REPLICATE: u32 = 1 << 11;
/// May be called without any key (EVAL with numkeys 0).
pub const NO_MANDATORY_KEYS: u32 = 1 << 12;
/// Not shown to MONITOR.
pub const SKIP_MONITOR: u32 = 1 << 13;
/// The keys' positions depend on the arguments (EVAL's numkeys): `COMMAND` reports a `keynum`
/// key spec (keys counted by `argv[2]`, starting at `argv[3]`) and first/last/step 0.
pub const MOVABLE_KEYS: u32 = 1 << 14;
/// Allowed while a script is running (SCRIPT KILL).
pub const ALLOW_BUSY: u32 = 1 << 15;
/// Internal: runs immediately even inside MULTI (MULTI, EXEC, DISCARD, QUIT).
pub const NO_QUEUE: u32 = 1 << 16;
/// Internal: needs every shard locked (SAVE, FLUSHALL, DEBUG RELOAD).
pub const ALL_KEYS: u32 = 1 << 17;
/// Internal: visits the shards one at a time (KEYS, SCAN, DBSIZE).
pub const EACH_SHARD: u32 = 1 << 18;
/// Internal: registered read-only (as RedisBloom registers CF.COMPACT, spec §2.5) but moves data,
/// so persistence must record it when it changed the keyspace.
pub const PROPAGATE: u32 = 1 << 19;

/// Refused while a replica loads its data in the background (Redis's `no_async_loading`; sift
/// never loads asynchronously, so only `COMMAND` shows it).
pub const NO_ASYNC_LOADING: u32 = 1 << 20;

/// Flag names as `COMMAND` reports them.
const FLAG_NAMES: &[(u32, &str)] = &[
    (WRITE, "write"),
    (READONLY, "readonly"),
    (DENYOOM, "denyoom"),
    (MODULE, "module"),
    (ADMIN, "admin"),
    (NOSCRIPT, "noscript"),
    (LOADING, "loading"),
    (STALE, "stale"),
    (FAST, "fast"),
    (NO_AUTH, "no_auth"),
    (NO_MULTI, "no_multi"),
    (SKIP_MONITOR, "skip_monitor"),
    (MAY_REPLICATE, "may_replicate"),
    (NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (NO_ASYNC_LOADING, "no_async_loading"),
    (ALLOW_BUSY, "allow_busy"),
    (MOVABLE_KEYS, "movablekeys"),
];

/// How the dispatcher locks the keyspace for a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockPlan {
    /// Touches no key.
    None,
    /// The shards of the keys at `first_key..=last_key` step `step`.
    Keys,
    /// Every shard at once.
    All,
    /// Shards one at a time.
    EachShard,
}

/// The positions of a request's keys ([`CommandSpec::key_positions`]).
pub enum KeyPositions<'a> {
    /// One range of positions.
    One(std::iter::StepBy<std::ops::Range<usize>>),
    /// Several key specs.
    Many(Box<dyn Iterator<Item = usize> + 'a>),
}

impl Iterator for KeyPositions<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        match self {
            KeyPositions::One(r) => r.next(),
            KeyPositions::Many(it) => it.next(),
        }
    }
}

/// How a row's command runs.
#[derive(Debug, Clone, Copy)]
pub enum Run {
    /// A command of the server's own.
    Server(Handler),
    /// A command of a registered family, run by `cmd::family::run`.
    Family(&'static sift_commands::Command),
}

/// One command (or subcommand: `name` is then `container|sub`).
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// Lower-case registered name.
    pub name: &'static str,
    /// Redis arity: n > 0 exactly n arguments (name included), n < 0 at least -n.
    pub arity: i32,
    /// Bit set of the flag constants above.
    pub flags: u32,
    /// Position of the first key (0: no key).
    pub first_key: i32,
    /// Position of the last key; -1 = the last argument.
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// ACL categories, with their `@`.
    pub acl: &'static [&'static str],
    /// The implementation; `None` = not available (yet).
    pub handler: Option<Run>,
    /// A family command's key specs (they then replace `first_key`, `last_key` and `step` for
    /// locking, `COMMAND GETKEYS` and `COMMAND INFO`'s key specs); empty for the server's rows.
    pub key_specs: &'static [KeySpec],
    /// Subcommands of a container command (CLIENT, CONFIG, MEMORY).
    pub subcommands: &'static [CommandSpec],
    /// `COMMAND DOCS` group.
    pub group: &'static str,
    /// `COMMAND DOCS` summary.
    pub summary: &'static str,
}

#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    acl: &'static [&'static str],
    handler: Option<Handler>,
    group: &'static str,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
        acl,
        handler: match handler {
            Some(h) => Some(Run::Server(h)),
            None => None,
        },
        key_specs: &[],
        subcommands: &[],
        group,
        summary,
    }
}

/// The row of a family's command.
fn family_row(c: &'static sift_commands::Command) -> CommandSpec {
    use sift_commands::Flags;
    let mut flags = MODULE;
    for (f, bit) in [
        (Flags::WRITE, WRITE),
        (Flags::READONLY, READONLY),
        (Flags::DENYOOM, DENYOOM),
        (Flags::FAST, FAST),
        (Flags::PROPAGATES, PROPAGATE),
    ] {
        if c.flags.contains(f) {
            flags |= bit;
        }
    }
    if c.movable_keys() {
        flags |= MOVABLE_KEYS;
    }
    let (first_key, last_key, step) = c.legacy_keys();
    CommandSpec {
        name: c.name,
        arity: c.arity,
        flags,
        first_key,
        last_key,
        step,
        acl: c.acl,
        handler: Some(Run::Family(c)),
        key_specs: c.keys,
        subcommands: &[],
        group: "bf",
        summary: c.summary,
    }
}

impl CommandSpec {
    const fn with_subcommands(mut self, subs: &'static [CommandSpec]) -> CommandSpec {
        self.subcommands = subs;
        self
    }

    /// Does a request of `argc` arguments (name included) satisfy the arity?
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity as i64;
        let n = argc as i64;
        if a >= 0 {
            n == a
        } else {
            n >= -a
        }
    }

    /// Is this row available (has a handler, or is a container with one available sub)?
    pub fn available(&self) -> bool {
        self.handler.is_some() || self.subcommands.iter().any(|s| s.handler.is_some())
    }

    /// The subcommand named by `arg` (any case), if available.
    pub fn subcommand(&self, arg: &[u8]) -> Option<&'static CommandSpec> {
        let subs: &'static [CommandSpec] = self.subcommands;
        subs.iter().find(|s| {
            s.handler.is_some()
                && s.name.rsplit('|').next().is_some_and(|n| n.as_bytes().eq_ignore_ascii_case(arg))
        })
    }

    /// How to lock the keyspace for this command.
    pub fn lock_plan(&self) -> LockPlan {
        if self.flags & ALL_KEYS != 0 {
            LockPlan::All
        } else if self.flags & EACH_SHARD != 0 {
            LockPlan::EachShard
        } else if self.first_key > 0 || !self.key_specs.is_empty() {
            LockPlan::Keys
        } else {
            LockPlan::None
        }
    }

    /// The positions of a request's keys: from the key specs of a family command, else from
    /// the row's key positions. One range (nearly every command) needs no more than the range.
    pub fn key_positions<'a>(&'a self, argv: &'a [Bytes]) -> KeyPositions<'a> {
        match self.key_specs {
            [] if self.first_key > 0 => KeyPositions::One(
                KeySpec::range(self.first_key, self.last_key, self.step.max(1)).positions(argv),
            ),
            [] => KeyPositions::One((0..0).step_by(1)),
            [one] => KeyPositions::One(one.positions(argv)),
            specs => KeyPositions::Many(Box::new(specs.iter().flat_map(move |s| s.positions(argv)))),
        }
    }

    /// The keys of a request.
    pub fn keys<'a>(&'a self, argv: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> + 'a {
        self.key_positions(argv).map(move |i| &argv[i])
    }

    /// This command's `COMMAND INFO` entry: `[name, arity, flags, first key, last key, step,
    /// acl categories, tips, key specs, subcommands]`.
    pub fn info_frame(&self) -> Frame {
        let flags = FLAG_NAMES
            .iter()
            .filter(|(bit, _)| self.flags & bit != 0)
            .map(|(_, n)| Frame::Simple(n.to_string()))
            .collect();
        let acl = self.acl.iter().map(|c| Frame::Simple(c.to_string())).collect();
        let subs = self.subcommands.iter().filter(|s| s.handler.is_some()).map(|s| s.info_frame()).collect();
        Frame::Array(vec![
            Frame::bulk(self.name),
            Frame::Integer(self.arity as i64),
            Frame::Set(flags),
            Frame::Integer(self.first_key as i64),
            Frame::Integer(self.last_key as i64),
            Frame::Integer(self.step as i64),
            Frame::Set(acl),
            Frame::Set(vec![]),
            Frame::Array(self.key_specs()),
            Frame::Array(subs),
        ])
    }

    fn key_specs(&self) -> Vec<Frame> {
        let b = |s: &str| Frame::bulk(s.to_string());
        if let Some(Run::Family(c)) = self.handler {
            return self.key_specs.iter().map(|s| key_spec_frame(s, s.flags.resolve(c.flags))).collect();
        }
        if self.flags & MOVABLE_KEYS != 0 {
            // EVAL-family: numkeys at argv[2], keys from argv[3] (Redis's keynum spec).
            let flags: &[&str] =
                if self.flags & READONLY != 0 { &["RO", "ACCESS"] } else { &["RW", "ACCESS", "UPDATE"] };
            return vec![Frame::Map(vec![
                (
                    b("notes"),
                    b("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE"),
                ),
                (b("flags"), Frame::Set(flags.iter().map(|f| Frame::Simple(f.to_string())).collect())),
                (
                    b("begin_search"),
                    Frame::Map(vec![
                        (b("type"), b("index")),
                        (b("spec"), Frame::Map(vec![(b("index"), Frame::Integer(2))])),
                    ]),
                ),
                (
                    b("find_keys"),
                    Frame::Map(vec![
                        (b("type"), b("keynum")),
                        (
                            b("spec"),
                            Frame::Map(vec![
                                (b("keynumidx"), Frame::Integer(0)),
                                (b("firstkey"), Frame::Integer(1)),
                                (b("keystep"), Frame::Integer(1)),
                            ]),
                        ),
                    ]),
                ),
            ])];
        }
        if self.first_key <= 0 {
            return vec![];
        }
        let flags: &[&str] = if self.flags & WRITE != 0 {
            &["RW", "UPDATE"]
        } else if self.name == "watch" {
            // WATCH neither reads nor writes its keys' values: Redis's key spec says RO only.
            &["RO"]
        } else {
            &["RO", "ACCESS"]
        };
        let lastkey = if self.last_key < 0 { self.last_key } else { self.last_key - self.first_key };
        vec![Frame::Map(vec![
            (b("flags"), Frame::Set(flags.iter().map(|f| Frame::Simple(f.to_string())).collect())),
            (
                b("begin_search"),
                Frame::Map(vec![
                    (b("type"), b("index")),
                    (b("spec"), Frame::Map(vec![(b("index"), Frame::Integer(self.first_key as i64))])),
                ]),
            ),
            (
                b("find_keys"),
                Frame::Map(vec![
                    (b("type"), b("range")),
                    (
                        b("spec"),
                        Frame::Map(vec![
                            (b("lastkey"), Frame::Integer(lastkey as i64)),
                            (b("keystep"), Frame::Integer(self.step as i64)),
                            (b("limit"), Frame::Integer(0)),
                        ]),
                    ),
                ]),
            ),
        ])]
    }

    /// This command's `COMMAND DOCS` entry (the value; the key is the name).
    pub fn docs_frame(&self) -> Frame {
        let b = |s: &str| Frame::bulk(s.to_string());
        let mut m = vec![(b("summary"), b(self.summary)), (b("since"), b("1.0.0"))];
        if self.flags & MODULE != 0 {
            m.push((b("group"), b("module")));
            m.push((b("module"), b(self.group)));
        } else {
            m.push((b("group"), b(self.group)));
        }
        let subs: Vec<(Frame, Frame)> = self
            .subcommands
            .iter()
            .filter(|s| s.handler.is_some())
            .map(|s| (b(s.name), s.docs_frame()))
            .collect();
        if !subs.is_empty() {
            m.push((b("subcommands"), Frame::Map(subs)));
        }
        Frame::Map(m)
    }
}

/// A family command's key spec as `COMMAND INFO` reports it.
fn key_spec_frame(spec: &KeySpec, flags: KeyFlags) -> Frame {
    let b = |s: &str| Frame::bulk(s.to_string());
    let int = |v: i32| Frame::Integer(v as i64);
    let find = match spec.find {
        FindKeys::Range { lastkey, step } => {
            (b("range"), vec![(b("lastkey"), int(lastkey)), (b("keystep"), int(step)), (b("limit"), int(0))])
        }
        FindKeys::Keynum { keynumidx, firstkey, step } => (
            b("keynum"),
            vec![(b("keynumidx"), int(keynumidx)), (b("firstkey"), int(firstkey)), (b("keystep"), int(step))],
        ),
    };
    Frame::Map(vec![
        (b("flags"), Frame::Set(flags.names().map(|f| Frame::Simple(f.to_string())).collect())),
        (
            b("begin_search"),
            Frame::Map(vec![
                (b("type"), b("index")),
                (b("spec"), Frame::Map(vec![(b("index"), int(spec.begin))])),
            ]),
        ),
        (b("find_keys"), Frame::Map(vec![(b("type"), find.0), (b("spec"), Frame::Map(find.1))])),
    ])
}

const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const KEY1: (i32, i32, i32) = (1, 1, 1);
const ALL_ARGS_KEYS: (i32, i32, i32) = (1, -1, 1);

/// The server's own commands: everything but the families' (see [`commands`]).
#[rustfmt::skip]
pub static SERVER_COMMANDS: &[CommandSpec] = &[
    // --- connection ---
    row("ping", -1, FAST | STALE, NO_KEYS, &["@fast", "@connection"], Some(server::ping), "connection", "Returns the server's liveliness response."),
    row("echo", 2, FAST | STALE | LOADING, NO_KEYS, &["@fast", "@connection"], Some(server::echo), "connection", "Returns the given string."),
    row("hello", -1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH, NO_KEYS, &["@fast", "@connection"], Some(server::hello), "connection", "Handshakes with the Redis server."),
    row("auth", -2, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH, NO_KEYS, &["@fast", "@connection"], Some(server::auth), "connection", "Authenticates the connection."),
    row("select", 2, LOADING | STALE | FAST, NO_KEYS, &["@fast", "@connection"], Some(server::select), "connection", "Changes the selected database."),
    row("quit", -1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | NO_QUEUE, NO_KEYS, &["@fast", "@connection"], Some(server::quit), "connection", "Closes the connection."),
    row("client", -2, 0, NO_KEYS, &["@slow"], None, "connection", "A container for client connection commands.").with_subcommands(&[
        row("client|setname", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, &["@slow", "@connection"], Some(server::client_setname), "connection", "Sets the connection name."),
        row("client|getname", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, &["@slow", "@connection"], Some(server::client_getname), "connection", "Returns the name of the connection."),
        row("client|id", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, &["@slow", "@connection"], Some(server::client_id), "connection", "Returns the unique client ID of the connection."),
        row("client|list", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, &["@admin", "@slow", "@dangerous", "@connection"], Some(server::client_list), "connection", "Lists open connections."),
        row("client|info", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, &["@slow", "@connection"], Some(server::client_info), "connection", "Returns information about the connection."),
        row("client|setinfo", 4, NOSCRIPT | LOADING | STALE, NO_KEYS, &["@slow", "@connection"], Some(server::client_setinfo), "connection", "Sets information specific to the client or connection."),
        row("client|no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, &["@admin", "@slow", "@dangerous", "@connection"], Some(server::client_on_off), "connection", "Sets the client eviction mode of the connection."),
        row("client|no-touch", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, &["@slow", "@connection"], Some(server::client_on_off), "connection", "Controls whether commands sent by the client affect the LRU/LFU of accessed keys."),
    ]),
    // --- keyspace ---
    row("type", 2, READONLY | FAST, KEY1, &["@keyspace", "@read", "@fast"], Some(keys::type_), "generic", "Determines the type of value stored at a key."),
    row("del", -2, WRITE, ALL_ARGS_KEYS, &["@keyspace", "@write", "@slow"], Some(keys::del), "generic", "Deletes one or more keys."),
    row("unlink", -2, WRITE | FAST, ALL_ARGS_KEYS, &["@keyspace", "@write", "@fast"], Some(keys::del), "generic", "Asynchronously deletes one or more keys."),
    row("exists", -2, READONLY | FAST, ALL_ARGS_KEYS, &["@keyspace", "@read", "@fast"], Some(keys::exists), "generic", "Determines whether one or more keys exist."),
    row("expire", -3, WRITE | FAST, KEY1, &["@keyspace", "@write", "@fast"], Some(keys::expire), "generic", "Sets the expiration time of a key in seconds."),
    row("pexpire", -3, WRITE | FAST, KEY1, &["@keyspace", "@write", "@fast"], Some(keys::pexpire), "generic", "Sets the expiration time of a key in milliseconds."),
    row("expireat", -3, WRITE | FAST, KEY1, &["@keyspace", "@write", "@fast"], Some(keys::expireat), "generic", "Sets the expiration time of a key to a Unix timestamp."),
    row("pexpireat", -3, WRITE | FAST, KEY1, &["@keyspace", "@write", "@fast"], Some(keys::pexpireat), "generic", "Sets the expiration time of a key to a Unix milliseconds timestamp."),
    row("ttl", 2, READONLY | FAST, KEY1, &["@keyspace", "@read", "@fast"], Some(keys::ttl), "generic", "Returns the expiration time in seconds of a key."),
    row("pttl", 2, READONLY | FAST, KEY1, &["@keyspace", "@read", "@fast"], Some(keys::pttl), "generic", "Returns the expiration time in milliseconds of a key."),
    row("persist", 2, WRITE | FAST, KEY1, &["@keyspace", "@write", "@fast"], Some(keys::persist), "generic", "Removes the expiration time of a key."),
    row("rename", 3, WRITE, (1, 2, 1), &["@keyspace", "@write", "@slow"], Some(keys::rename), "generic", "Renames a key and overwrites the destination."),
    row("renamenx", 3, WRITE | FAST, (1, 2, 1), &["@keyspace", "@write", "@fast"], Some(keys::renamenx), "generic", "Renames a key only when the target key name doesn't exist."),
    row("copy", -3, WRITE | DENYOOM, (1, 2, 1), &["@keyspace", "@write", "@slow"], Some(keys::copy), "generic", "Copies the value of a key to a new key."),
    row("dump", 2, READONLY | PROPAGATE, KEY1, &["@keyspace", "@read", "@slow"], Some(keys::dump), "generic", "Returns a serialized representation of the value stored at a key."),
    row("restore", -4, WRITE | DENYOOM, KEY1, &["@keyspace", "@write", "@slow", "@dangerous"], Some(keys::restore), "generic", "Creates a key from the serialized representation of a value."),
    row("keys", 2, READONLY | EACH_SHARD, NO_KEYS, &["@keyspace", "@read", "@slow", "@dangerous"], Some(keys::keys), "generic", "Returns all key names that match a pattern."),
    row("scan", -2, READONLY | EACH_SHARD, NO_KEYS, &["@keyspace", "@read", "@slow"], Some(keys::scan), "generic", "Iterates over the key names in the database."),
    row("dbsize", 1, READONLY | FAST | EACH_SHARD, NO_KEYS, &["@keyspace", "@read", "@fast"], Some(keys::dbsize), "server", "Returns the number of keys in the database."),
    row("randomkey", 1, READONLY | EACH_SHARD, NO_KEYS, &["@keyspace", "@read", "@slow"], Some(keys::randomkey), "generic", "Returns a random key name from the database."),
    row("flushdb", -1, WRITE | ALL_KEYS, NO_KEYS, &["@keyspace", "@write", "@slow", "@dangerous"], Some(keys::flush), "server", "Removes all keys from the current database."),
    row("flushall", -1, WRITE | ALL_KEYS, NO_KEYS, &["@keyspace", "@write", "@slow", "@dangerous"], Some(keys::flush), "server", "Removes all keys from all databases."),
    row("set", -3, WRITE | DENYOOM, KEY1, &["@write", "@string", "@slow"], Some(keys::set), "string", "Sets the string value of a key."),
    row("get", 2, READONLY | FAST, KEY1, &["@read", "@string", "@fast"], Some(keys::get), "string", "Returns the string value of a key."),
    row("strlen", 2, READONLY | FAST, KEY1, &["@read", "@string", "@fast"], Some(bitmap::strlen), "string", "Returns the length of a string value."),
    // --- bitmap (on string values) ---
    row("setbit", 4, WRITE | DENYOOM, KEY1, &["@write", "@bitmap", "@slow"], Some(bitmap::setbit), "bitmap", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist."),
    row("getbit", 3, READONLY | FAST, KEY1, &["@read", "@bitmap", "@fast"], Some(bitmap::getbit), "bitmap", "Returns a bit value by offset."),
    row("bitcount", -2, READONLY, KEY1, &["@read", "@bitmap", "@slow"], Some(bitmap::bitcount), "bitmap", "Counts the number of set bits (population counting) in a string."),
    row("bitpos", -3, READONLY, KEY1, &["@read", "@bitmap", "@slow"], Some(bitmap::bitpos), "bitmap", "Finds the first set (1) or clear (0) bit in a string."),
    row("bitfield", -2, WRITE | DENYOOM, KEY1, &["@write", "@bitmap", "@slow"], Some(bitmap::bitfield), "bitmap", "Performs arbitrary bitfield integer operations on strings."),
    row("bitfield_ro", -2, READONLY | FAST, KEY1, &["@read", "@bitmap", "@fast"], Some(bitmap::bitfield_ro), "bitmap", "Performs arbitrary read-only bitfield integer operations on strings."),
    row("getrange", 4, READONLY, KEY1, &["@read", "@string", "@slow"], Some(bitmap::getrange), "string", "Returns a substring of the string stored at a key."),
    row("setrange", 4, WRITE | DENYOOM, KEY1, &["@write", "@string", "@slow"], Some(bitmap::setrange), "string", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist."),
    row("memory", -2, 0, NO_KEYS, &["@slow"], None, "server", "A container for memory diagnostics commands.").with_subcommands(&[
        row("memory|usage", -3, READONLY, (2, 2, 1), &["@read", "@slow"], Some(keys::memory_usage), "server", "Estimates the memory usage of a key."),
    ]),
    // --- server ---
    row("info", -1, LOADING | STALE | EACH_SHARD, NO_KEYS, &["@slow", "@dangerous"], Some(server::info), "server", "Returns information and statistics about the server."),
    row("config", -2, 0, NO_KEYS, &["@slow"], None, "server", "A container for server configuration commands.").with_subcommands(&[
        row("config|get", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::config_get), "server", "Returns the effective values of configuration parameters."),
        row("config|set", -4, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::config_set), "server", "Sets configuration parameters in-flight."),
        row("config|resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::config_resetstat), "server", "Resets the server's statistics."),
    ]),
    row("command", -1, LOADING | STALE, NO_KEYS, &["@slow", "@connection"], Some(server::command), "server", "Returns detailed information about all commands."),
    row("module", -2, 0, NO_KEYS, &["@slow"], None, "server", "A container for module commands.").with_subcommands(&[
        row("module|list", 2, ADMIN | NOSCRIPT, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::module_list), "server", "Returns all loaded modules."),
        row("module|help", 2, LOADING | STALE, NO_KEYS, &["@slow"], Some(server::module_help), "server", "Returns helpful text about the different subcommands."),
        row("module|load", -3, ADMIN | NOSCRIPT, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::module_load), "server", "Loads a module (refused: sift-server cannot load modules)."),
        row("module|loadex", -3, ADMIN | NOSCRIPT, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::module_load), "server", "Loads a module with configuration (refused: sift-server cannot load modules)."),
        row("module|unload", 3, ADMIN | NOSCRIPT, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::module_load), "server", "Unloads a module (refused: the bf module is built in)."),
    ]),
    row("save", 1, ADMIN | NOSCRIPT | NO_MULTI | ALL_KEYS, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::save), "server", "Synchronously saves the database(s) to disk."),
    row("bgsave", -1, ADMIN | NOSCRIPT | ALL_KEYS, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::bgsave), "server", "Asynchronously saves the database(s) to disk."),
    row("bgrewriteaof", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::bgrewriteaof), "server", "Asynchronously rewrites the append-only file to disk."),
    row("time", 1, LOADING | STALE | FAST, NO_KEYS, &["@fast"], Some(server::time), "server", "Returns the server time."),
    row("lastsave", 1, LOADING | STALE | FAST, NO_KEYS, &["@admin", "@fast", "@dangerous"], Some(server::lastsave), "server", "Returns the Unix timestamp of the last successful save to disk."),
    row("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | ALL_KEYS, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::debug), "server", "A container for debugging commands."),
    row("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALL_KEYS, NO_KEYS, &["@admin", "@slow", "@dangerous"], Some(server::shutdown), "server", "Synchronously saves the database(s) to disk and shuts down the Redis server."),
    // --- scripting (cmd::script) ---
    // Redis declares the keys with a keynum spec (numkeys at argv[2]); the table's
    // first/last/step cannot express that, so they are 0 (as Redis reports them too) and
    // MOVABLE_KEYS makes COMMAND report the keynum spec. ALL_KEYS: a script locks every shard.
    row("eval", -3, NOSCRIPT | STALE | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | MOVABLE_KEYS | ALL_KEYS, NO_KEYS, &["@slow", "@scripting"], Some(script::eval), "scripting", "Executes a server-side Lua script."),
    row("evalsha", -3, NOSCRIPT | STALE | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | MOVABLE_KEYS | ALL_KEYS, NO_KEYS, &["@slow", "@scripting"], Some(script::evalsha), "scripting", "Executes a server-side Lua script by SHA1 digest."),
    row("eval_ro", -3, NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | READONLY | MOVABLE_KEYS | ALL_KEYS, NO_KEYS, &["@slow", "@scripting"], Some(script::eval_ro), "scripting", "Executes a read-only server-side Lua script."),
    row("evalsha_ro", -3, NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | READONLY | MOVABLE_KEYS | ALL_KEYS, NO_KEYS, &["@slow", "@scripting"], Some(script::evalsha_ro), "scripting", "Executes a read-only server-side Lua script by SHA1 digest."),
    row("script", -2, 0, NO_KEYS, &["@slow"], None, "scripting", "A container for Lua scripts management commands.").with_subcommands(&[
        row("script|load", 3, NOSCRIPT | STALE | MAY_REPLICATE, NO_KEYS, &["@slow", "@scripting"], Some(script::script_load), "scripting", "Loads a server-side Lua script to the script cache."),
        row("script|exists", -3, NOSCRIPT, NO_KEYS, &["@slow", "@scripting"], Some(script::script_exists), "scripting", "Determines whether server-side Lua scripts exist in the script cache."),
        row("script|flush", -2, NOSCRIPT | MAY_REPLICATE, NO_KEYS, &["@slow", "@scripting"], Some(script::script_flush), "scripting", "Removes all server-side Lua scripts from the script cache."),
        row("script|kill", 2, NOSCRIPT | ALLOW_BUSY, NO_KEYS, &["@slow", "@scripting"], Some(script::script_kill), "scripting", "Terminates a server-side Lua script during execution."),
    ]),
    // --- transactions ---
    row("multi", 1, NOSCRIPT | LOADING | STALE | FAST | NO_MULTI | NO_QUEUE, NO_KEYS, &["@fast", "@transaction"], Some(super::multi), "transactions", "Starts a transaction."),
    row("exec", 1, NOSCRIPT | LOADING | STALE | NO_QUEUE, NO_KEYS, &["@slow", "@transaction"], Some(super::exec_placeholder), "transactions", "Executes all commands in a transaction."),
    row("discard", 1, NOSCRIPT | LOADING | STALE | FAST | NO_MULTI | NO_QUEUE, NO_KEYS, &["@fast", "@transaction"], Some(super::discard), "transactions", "Discards a transaction."),
    // WATCH runs at once inside MULTI (NO_QUEUE), to answer its error there, as Redis does;
    // UNWATCH is queued like any command.
    row("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | NO_QUEUE, ALL_ARGS_KEYS, &["@fast", "@transaction"], Some(super::watch), "transactions", "Watch the given keys to determine execution of the MULTI/EXEC block"),
    row("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, &["@fast", "@transaction"], Some(super::unwatch), "transactions", "Forget about all watched keys"),
];

/// Every command: the registered families' (in family order), then the server's own.
pub fn commands() -> &'static [CommandSpec] {
    static ALL: OnceLock<Vec<CommandSpec>> = OnceLock::new();
    ALL.get_or_init(|| {
        let families = sift_commands::registry().commands().map(family_row);
        families.chain(SERVER_COMMANDS.iter().copied()).collect()
    })
}

/// The command names, hashed with foldhash: SipHash of the name was most of
/// [`lookup`]'s cost, itself ~2% of a pipelined BF.ADD's server CPU (perf; the names are ours, so
/// no attacker chooses them).
type Index = HashMap<&'static str, &'static CommandSpec, foldhash::fast::FixedState>;

fn index() -> &'static Index {
    static INDEX: OnceLock<Index> = OnceLock::new();
    INDEX.get_or_init(|| commands().iter().filter(|c| c.available()).map(|c| (c.name, c)).collect())
}

/// The available command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    // Lower-case into a stack buffer: no allocation per request. Longer names are unknown.
    let mut buf = [0u8; 32];
    if name.len() > buf.len() {
        return None;
    }
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let lower = std::str::from_utf8(lower).ok()?;
    index().get(lower).copied()
}

/// Every available top-level command, in table order.
pub fn available() -> impl Iterator<Item = &'static CommandSpec> {
    commands().iter().filter(|c| c.available())
}

/// A table row by name whether or not it is available (for tests and tooling).
pub fn row_named(name: &str) -> Option<&'static CommandSpec> {
    commands().iter().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lower_case_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in commands() {
            assert_eq!(c.name, c.name.to_ascii_lowercase());
            assert!(seen.insert(c.name), "duplicate {}", c.name);
            for s in c.subcommands {
                assert!(s.name.starts_with(&format!("{}|", c.name)));
            }
        }
    }

    #[test]
    fn redisbloom_rows_match_the_spec() {
        // (name, arity, write?) from spec §2.3 / §2.5.
        let expect: &[(&str, i32, bool)] = &[
            ("bf.reserve", -4, true),
            ("bf.add", 3, true),
            ("bf.madd", -3, true),
            ("bf.insert", -4, true),
            ("bf.exists", 3, false),
            ("bf.mexists", -3, false),
            ("bf.info", -2, false),
            ("bf.card", 2, false),
            ("bf.scandump", 3, false),
            ("bf.loadchunk", 4, true),
            ("bf.debug", 2, false),
            ("cf.reserve", -3, true),
            ("cf.add", 3, true),
            ("cf.addnx", 3, true),
            ("cf.insert", -4, true),
            ("cf.insertnx", -4, true),
            ("cf.exists", 3, false),
            ("cf.mexists", -3, false),
            ("cf.count", 3, false),
            ("cf.del", 3, true),
            ("cf.compact", -1, false),
            ("cf.info", 2, false),
            ("cf.scandump", 3, false),
            ("cf.loadchunk", 4, true),
            ("cf.debug", 2, false),
        ];
        for &(name, arity, write) in expect {
            let r = row_named(name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(r.arity, arity, "{name}");
            assert_eq!(r.flags & WRITE != 0, write, "{name}");
            assert_eq!(r.flags & READONLY != 0, !write, "{name}");
            assert_eq!((r.first_key, r.last_key, r.step), (1, 1, 1), "{name}");
            let family = if name.starts_with("bf.") { "@bloom" } else { "@cuckoo" };
            assert!(r.acl.contains(&family), "{name}");
        }
        assert_eq!(row_named("cf.del").unwrap().flags & (FAST | DENYOOM), FAST);
        assert!(row_named("bf.info").unwrap().acl.contains(&"@fast"));
        assert!(!row_named("bf.exists").unwrap().acl.contains(&"@fast"));
    }

    #[test]
    fn lookup_and_keys() {
        assert_eq!(lookup(b"PiNg").unwrap().name, "ping");
        assert!(lookup(b"nosuch").is_none());
        let del = lookup(b"del").unwrap();
        let argv: Vec<Bytes> = ["DEL", "a", "b", "c"].iter().map(|s| Bytes::from(*s)).collect();
        assert_eq!(del.keys(&argv).count(), 3);
        let copy = lookup(b"copy").unwrap();
        let argv: Vec<Bytes> = ["COPY", "a", "b", "REPLACE"].iter().map(|s| Bytes::from(*s)).collect();
        assert_eq!(copy.keys(&argv).map(|k| &k[..]).collect::<Vec<_>>(), [&b"a"[..], b"b"]);
        assert!(lookup(b"client").unwrap().subcommand(b"SETNAME").is_some());
    }
}
