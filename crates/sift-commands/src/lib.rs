//! The command layer of sift: RedisBloom's `BF.*`, `CF.*`, `CMS.*`, `TOPK.*` and `TDIGEST.*`
//! commands (and every family added after them) over an abstract key store, and the registry of data types and command families
//! that `sift-server` and the `sift-redis` module are both built from.
//!
//! A handler takes the request's arguments (name included, as `argv[0]`), a [`Store`] (the
//! keyspace) and an [`Env`] (protocol, configuration, memory budget, clock, propagation), checks
//! the arguments in RedisBloom's order (spec §8: the first failing check decides the reply),
//! applies the request and returns the reply as a [`Frame`] in its RESP3 shape. The transport
//! turns the frame into bytes: sift-server with [`Frame::encode`], the module through Redis's
//! reply API, which downgrades RESP3 shapes for RESP2 clients as [`Frame::encode`] does. Where
//! RESP2 is not the mechanical downgrade (BF.INFO with one field, CF.INSERT elements), the
//! handler asks [`Env::protocol`].
//!
//! No async runtime, no socket, no server type: a third consumer (a Valkey module, an embedded
//! store) implements [`Store`] and [`Env`] and gets the same replies byte for byte
//! (`tests/memory_store.rs` does it over a `HashMap`).
//!
//! # The registry
//!
//! Every data type lives in one place, and every command is declared once.
//!
//! * A **data type** is one implementation of [`DataType`]: its Redis type name
//!   ([`DataType::NAME`], also what `TYPE` answers), RDB encoding version ([`DataType::ENCVER`]),
//!   snapshot tag ([`DataType::TAG`]), whether `COPY` may duplicate it ([`DataType::COPY`]),
//!   memory usage, its dump as a stream of chunks and the way back ([`DataType::dump_chunk`],
//!   [`DataType::restore`], [`DataType::load_chunk`]: sift-server's snapshots, `DEBUG RELOAD`,
//!   the module's `DEBUG DIGEST-VALUE`), its RDB encoding through the field reader and writer of
//!   `sift::compat::redisbloom::rdb` (unsigned, signed, double and string fields; the module maps
//!   them onto `RedisModule_Save*` / `RedisModule_Load*`, which also gives `DUMP` / `RESTORE`),
//!   and the commands that rebuild a value for the module's AOF rewrite ([`DataType::rewrite`]).
//!   A store holds values type-erased as [`Data`], one box per value.
//! * The **store** is generic over types: [`Store`] is four methods (read, write, read several,
//!   set), and the typed lookups on `dyn Store` answer missing, found or wrong type:
//!   `store.get::<BloomChain>(key)`, `store.get_mut::<T>(key)`, `store.insert(key, value)`. A
//!   command that answers for any registered type (an `INFO` over every filter kind) reads
//!   [`Store::read`] and asks the [`Data`] it finds, or downcasts it.
//! * A **family** ([`Family`]) is a data type and its commands. A [`Command`] declares its name,
//!   arity, [`Flags`], ACL categories, key positions ([`KeySpec`]: ranges, or a `numkeys` count
//!   as EVAL's), summary and handler. Every key a handler touches must be declared: the server
//!   locks the declared keys before the handler runs, the module opens them and registers the
//!   key specs so that Redis Cluster routes the command and refuses keys of different slots.
//!   Commands that change data open the keys of their first key spec for writing and read the
//!   others, in both transports.
//! * **The family list** is [`families`]: one line per family. From it sift-server builds its
//!   command table, dispatch, `COMMAND` replies and snapshot tags; the module its commands (one
//!   callback that dispatches by name), key specs and data types (one registration per type,
//!   with Redis callbacks instantiated for each type from the list). [`registry()`] is the indexed,
//!   type-erased view of the same list.
//!
//! ## Adding a family
//!
//! One new file, its `mod` line and one line in [`families`]; the worked example is the test
//! family in `src/tally.rs` (behind the `test-family` feature, which the server's and the
//! module's tests enable), a set of items with the time each was first added:
//!
//! 1. The type: `impl DataType for Tally` with a 9-character type name (`siftTally`), an encver,
//!    an unused snapshot tag, and the dump, RDB and rewrite methods. Its encodings are its own,
//!    and must keep reading what was once written (tags 2 and 3 stay `MBbloom--` and
//!    `MBbloomCF`).
//! 2. The commands: handlers `fn(&mut dyn Store, &mut dyn Env, &[&[u8]]) -> Frame`, declared in
//!    a `const COMMANDS: &[Command]` with their key specs (`TALLY.MERGE dest numkeys src ...`
//!    declares `[KeySpec::range(1, 1, 1), KeySpec::keynum(2)]`: the destination, then the counted
//!    sources).
//! 3. `impl Family for TallyFamily`, and `v.visit::<tally::TallyFamily>()` in [`families`].
//!
//! Nothing in sift-server or sift-redis changes: both serve the new commands, store, snapshot,
//! save, load, copy, measure and rewrite the new type (`crates/sift-server/tests/registry.rs` and
//! `crates/sift-redis/tests/registry.rs` check it end to end).
//!
//! ## What a family must respect
//!
//! * **Names and tags** are forever: the type name is stored in RDB files, the tag in snapshots.
//!   [`registry()`] refuses (panics on first use, which every test reaches) a type name that is not
//!   9 characters of `A-Z a-z 0-9 - _`, a reserved tag (0, 1, 255) and any name, tag or command
//!   registered twice.
//! * **Keys**: declare every key the handler touches. A count (`numkeys`) is parsed as
//!   [`parse::parse_i64`] parses it, and keys it claims past the last argument are not declared,
//!   so the handler parses the count the same way and refuses a count that does not match the
//!   arguments before it touches any key. Commands whose keys the legacy `(first, last, step)`
//!   cannot tell (a second spec, a count) are registered in the module with `getkeys-api`: Redis
//!   7.0 routes cluster requests by the module's answer, and reports the key specs.
//! * **Several keys**: [`Store::read_many`] gives shared access to several values at once; a
//!   merge reads its sources with it, computes the result, then writes its destination
//!   ([`Store::set`], or `get_mut` and assignment) — the result is complete before anything
//!   changes, so an error leaves the destination as it was.
//! * **Replacing a key** with a value of any type (a filter swapped in whole) is one
//!   [`Store::set`]: readers see the old value or the new one, never a mix.
//! * **Determinism**: what a replica or a log replay could compute differently — the time, the
//!   configuration, random choices — is decided by the handler on the primary and propagated
//!   explicitly (see Propagation below).
//! * **Dumps** are streams: [`DataType::dump_chunk`] resumes at any cursor it returned and gives
//!   bounded chunks (the filters' are at most 16 MiB), so a large value can be dumped piece by
//!   piece; keep chunk boundaries a function of the value alone.
//!
//! # Propagation
//!
//! A write is propagated (logged, replicated) as received, except when the handler calls
//! [`Env::propagate`] with the commands to propagate instead. Two cases need it:
//!
//! * **Creation with configured options** (BF.RESERVE, CF.RESERVE, and BF.ADD, BF.MADD,
//!   BF.INSERT, CF.ADD, CF.ADDNX, CF.INSERT, CF.INSERTNX on a missing key): the handler
//!   propagates `BF.LOADCHUNK key 1 <header>` (or `CF.LOADCHUNK`) of the filter it just created,
//!   followed by the command when it also adds items. Replaying that builds exactly the same
//!   filter whatever the replica's or the restarted server's configuration is; an explicit
//!   `BF.RESERVE` would not, since its scaling depends on `bf-expansion-factor` at replay and a
//!   non-scaling chain with a stored growth cannot be expressed at all.
//! * **Time**: [`Env::now_ms`] is the time on the server or primary that runs the command. A
//!   handler whose effect depends on it propagates a command that carries the time explicitly
//!   (as Redis turns `EXPIRE` into `PEXPIREAT`; `TALLY.ADD` becomes `TALLY.ADDAT key <ms> ...`),
//!   so a replica, an AOF and sift-server's log replay apply the primary's time and never read
//!   their own clock.

#![deny(missing_docs)]

pub mod bf;
pub mod cf;
pub mod cms;
pub mod command;
pub mod config;
pub mod err;
pub mod frame;
pub mod parse;
pub mod registry;
pub mod sf;
mod sketch;
pub mod store;
#[cfg(feature = "test-family")]
pub mod tally;
pub mod tdigest;
pub mod topk;

pub use command::{Command, FindKeys, Flags, Handler, KeyFlags, KeySpec, KEY1};
pub use config::{BloomDefaults, CuckooDefaults, Defaults, FilterConfig};
pub use frame::Frame;
pub use registry::{
    families, registry, Chunk, Data, DataType, ErrorRate, Family, FamilyInfo, Frozen, LoadContext, Registry,
    TypeInfo, Visitor,
};
pub use store::{Held, Lookup, Store};

/// The RedisBloom version whose commands, replies and encodings this layer reproduces (the spec
/// and its fixtures were captured from RedisBloom 2.6.28), as RedisBloom numbers it:
/// `major·10000 + minor·100 + patch`. Both consumers report it as the version of module `bf`
/// (`MODULE LIST`, `INFO modules`, `HELLO`), because clients gate features on it: redis-py's
/// tests, for one, skip what RedisBloom added after the version they find.
pub const REDISBLOOM_VERSION: i32 = 20628;

use std::sync::LazyLock;

use sift::compat::redisbloom::LoadLimits;

/// The request's surroundings: who asks, with which configuration, within which memory budget,
/// at what time, and what to propagate.
pub trait Env {
    /// RESP version of the client: 2 or 3.
    fn protocol(&self) -> u8;
    /// The configured defaults (spec §3: `bf-error-rate`, `cf-bucket-size`, ...).
    fn defaults(&self) -> Defaults;
    /// The most bytes one new value, Bloom link or cuckoo sub-filter may take. Called only when
    /// something is about to be allocated (a module may find it costly to compute).
    fn memory_budget(&mut self) -> u64;
    /// The time this command runs at, Unix milliseconds, on the server or primary that runs it.
    /// A handler that depends on it propagates the time explicitly (see the crate docs).
    fn now_ms(&self) -> u64;
    /// Propagate (log, replicate) these commands instead of the request as received.
    fn propagate(&mut self, commands: Vec<Vec<Vec<u8>>>);
    /// [`Env::propagate`] of one command given as borrowed arguments: for a command propagated
    /// on every call (a TOPK.ADD that drew), which a transport may copy in one piece instead of
    /// one allocation per argument.
    fn propagate_one(&mut self, argv: &[&[u8]]) {
        self.propagate(vec![owned(argv)]);
    }
}

/// Limits for rebuilding a filter from an untrusted LOADCHUNK header (or RDB value): the payload
/// may not exceed the memory budget, and the cuckoo bucket size is bounded by the current upper
/// bound of `cf-bucket-size` (spec §3, §7.2).
pub fn load_limits(env: &mut dyn Env) -> LoadLimits {
    let max_bytes = env.memory_budget();
    let bucket_max = env.defaults().cuckoo.bucket_size_max;
    LoadLimits { max_bytes, cf_max_bucket_size: bucket_max.clamp(1, 255) as u16 }
}

/// RedisBloom's Bloom and cuckoo commands (the `bf` and `cf` families), in RedisBloom's
/// registration order.
pub static COMMANDS: LazyLock<Vec<&'static Command>> =
    LazyLock::new(|| bf::Bloom::COMMANDS.iter().chain(cf::Cuckoo::COMMANDS).collect());

/// Finds a registered command by name (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Command> {
    registry().command(name)
}

/// Runs `cmd` with its arity check: what a transport that does not check arities itself (a
/// Redis module: Redis 7.0 checks only the arities it was told, and not at all before) calls.
pub fn run(cmd: &Command, store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if !cmd.arity_ok(argv.len()) {
        return Frame::error(err::arity(cmd.name));
    }
    (cmd.handler)(store, env, argv)
}

/// `argv` as owned byte vectors (for [`Env::propagate`]).
pub(crate) fn owned(argv: &[&[u8]]) -> Vec<Vec<u8>> {
    argv.iter().map(|a| a.to_vec()).collect()
}

/// `WRONGTYPE`.
pub(crate) fn wrongtype() -> Frame {
    Frame::error(err::WRONGTYPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_match_handlers_and_spec_flags() {
        assert_eq!(lookup(b"BF.ADD").map(|c| c.name), Some("bf.add"));
        assert_eq!(lookup(b"Cf.Debug").map(|c| c.name), Some("cf.debug"));
        assert_eq!(COMMANDS.len(), 25);
        assert_eq!(COMMANDS[1].name, "bf.add");
        assert_eq!(COMMANDS[24].name, "cf.debug");
        let writes = COMMANDS.iter().filter(|c| c.flags == Flags::WRITE.with(Flags::DENYOOM)).count();
        assert_eq!(writes, 11);
        let compact = lookup(b"cf.compact").unwrap();
        assert!(compact.arity_ok(1) && compact.arity == -1 && compact.flags.changes_data());
        assert!(!lookup(b"bf.add").unwrap().arity_ok(4));
    }
}
