//! RedisBloom's `BF.*` and `CF.*` commands over an abstract key store: the one command layer that
//! both `sift-server` and the `sift-redis` module run.
//!
//! A handler takes the request's arguments (name included, as `argv[0]`), a [`FilterStore`] (the
//! keyspace, as far as filters care) and an [`Env`] (protocol, configuration, memory budget,
//! propagation), checks the arguments in RedisBloom's order (spec §8: the first failing check
//! decides the reply), applies the request and returns the reply as a [`Frame`] in its RESP3
//! shape. The transport turns the frame into bytes: sift-server with [`Frame::encode`], the
//! module through Redis's reply API, which downgrades RESP3 shapes for RESP2 clients as
//! [`Frame::encode`] does. Where RESP2 is not the mechanical downgrade (BF.INFO with one field,
//! CF.INSERT elements), the handler asks [`Env::protocol`].
//!
//! No async runtime, no socket, no server type: a third consumer (a Valkey module, an embedded
//! store) implements the two traits and gets the same replies byte for byte.
//!
//! # Propagation
//!
//! A write is propagated (logged, replicated) as received, except when a handler creates a filter,
//! whose options left out take the configuration's values (BF.RESERVE, CF.RESERVE, and BF.ADD,
//! BF.MADD, BF.INSERT, CF.ADD, CF.ADDNX, CF.INSERT, CF.INSERTNX on a missing key): the handler
//! then calls [`Env::propagate`] with `BF.LOADCHUNK key 1 <header>` (or `CF.LOADCHUNK`) of the
//! filter it just created, followed by the command when it also adds items. Replaying that builds
//! exactly the same filter whatever the replica's or the restarted server's configuration is; an
//! explicit `BF.RESERVE` would not, since its scaling depends on `bf-expansion-factor` at replay
//! and a non-scaling chain with a stored growth cannot be expressed at all.

#![deny(missing_docs)]

pub mod bf;
pub mod cf;
pub mod config;
pub mod err;
pub mod frame;
pub mod parse;

pub use config::{BloomDefaults, CuckooDefaults, FilterConfig};
pub use frame::Frame;

/// The RedisBloom version whose commands, replies and encodings this layer reproduces (the spec
/// and its fixtures were captured from RedisBloom 2.6.28), as RedisBloom numbers it:
/// `major·10000 + minor·100 + patch`. Both consumers report it as the version of module `bf`
/// (`MODULE LIST`, `INFO modules`, `HELLO`), because clients gate features on it: redis-py's
/// tests, for one, skip what RedisBloom added after the version they find.
pub const REDISBLOOM_VERSION: i32 = 20628;

use sift::compat::redisbloom::{BloomChain, CuckooFilter, LoadLimits};

/// What a key holds, as the BF/CF commands see it: `B` / `C` are references to the filter,
/// shared ([`Read`]) or exclusive ([`Write`]).
#[derive(Debug)]
pub enum Slot<B, C> {
    /// No (live) key.
    Missing,
    /// A Bloom chain (`MBbloom--`).
    Bloom(B),
    /// A cuckoo filter (`MBbloomCF`).
    Cuckoo(C),
    /// Any other type.
    Other,
}

/// A key looked up to read it.
pub type Read<'a> = Slot<&'a BloomChain, &'a CuckooFilter>;
/// A key looked up to change it.
pub type Write<'a> = Slot<&'a mut BloomChain, &'a mut CuckooFilter>;

/// The keyspace, as far as the filter commands need it. Every command has exactly one key,
/// `argv[1]`, which the transport has locked or opened before calling the handler.
pub trait FilterStore {
    /// Looks `key` up to read it: must not count as a change.
    fn lookup(&mut self, key: &[u8]) -> Read<'_>;
    /// Looks `key` up to change it (the store may count a change, open the key for writing).
    fn lookup_mut(&mut self, key: &[u8]) -> Write<'_>;
    /// Stores a new Bloom chain at `key`, which [`FilterStore::lookup`] just reported missing.
    fn create_bloom(&mut self, key: &[u8], chain: BloomChain) -> &mut BloomChain;
    /// Stores a new cuckoo filter at `key`, which was just reported missing.
    fn create_cuckoo(&mut self, key: &[u8], filter: CuckooFilter) -> &mut CuckooFilter;
}

/// The request's surroundings: who asks, with which configuration, within which memory budget,
/// and what to propagate.
pub trait Env {
    /// RESP version of the client: 2 or 3.
    fn protocol(&self) -> u8;
    /// The BF parameters of spec §3 (`bf-error-rate`, `bf-initial-size`, `bf-expansion-factor`).
    fn bloom_defaults(&self) -> BloomDefaults;
    /// The CF parameters of spec §3, with the current coupled bounds.
    fn cuckoo_defaults(&self) -> CuckooDefaults;
    /// The most bytes one new filter, Bloom link or cuckoo sub-filter may take. Called only when
    /// something is about to be allocated (a module may find it costly to compute).
    fn memory_budget(&mut self) -> u64;
    /// Propagate (log, replicate) these commands instead of the request as received.
    fn propagate(&mut self, commands: Vec<Vec<Vec<u8>>>);
}

/// Limits for rebuilding a filter from an untrusted LOADCHUNK header (or RDB value): the payload
/// may not exceed the memory budget, and the cuckoo bucket size is bounded by the current upper
/// bound of `cf-bucket-size` (spec §3, §7.2).
pub fn load_limits(env: &mut dyn Env) -> LoadLimits {
    let max_bytes = env.memory_budget();
    let bucket_max = env.cuckoo_defaults().bucket_size_max;
    LoadLimits { max_bytes, cf_max_bucket_size: bucket_max.clamp(1, 255) as u16 }
}

/// Flags a command is registered with in Redis (spec §2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `write deny-oom`.
    Write,
    /// `write fast` (CF.DEL).
    WriteFast,
    /// `readonly fast`.
    Read,
    /// `readonly fast`, but the command moves data and must be propagated when it changed the
    /// filter (CF.COMPACT, registered read-only as RedisBloom does).
    ReadPropagates,
}

impl Access {
    /// The flags string of `RedisModule_CreateCommand`.
    pub fn redis_flags(self) -> &'static str {
        match self {
            Access::Write => "write deny-oom",
            Access::WriteFast => "write fast",
            Access::Read | Access::ReadPropagates => "readonly fast",
        }
    }

    /// Does a successful call change data that must be propagated?
    pub fn propagates(self) -> bool {
        !matches!(self, Access::Read)
    }
}

/// A handler over any store: `(store, env, argv) → reply`. Generic over the argument type so the
/// server passes its `Bytes` and the module borrowed `&[u8]` without copying.
pub type Handler<S, A> = fn(&mut S, &mut dyn Env, &[A]) -> Frame;

/// One BF/CF command: name, registered arity (spec §2.3), access, handler.
#[derive(Debug, Clone, Copy)]
pub struct Command {
    /// Lower-case registered name.
    pub name: &'static str,
    /// Redis arity (n > 0: exactly n arguments, name included; n < 0: at least -n; 0: none
    /// registered, the handler checks).
    pub arity: i32,
    /// Flags.
    pub access: Access,
}

impl Command {
    /// Does a request of `argc` arguments (name included) satisfy the registered arity?
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity as i64;
        let n = argc as i64;
        match a {
            0 => true,
            a if a > 0 => n == a,
            a => n >= -a,
        }
    }
}

/// Every BF/CF command, in RedisBloom's registration order.
pub const COMMANDS: [Command; 25] = {
    const fn c(name: &'static str, arity: i32, access: Access) -> Command {
        Command { name, arity, access }
    }
    use Access::*;
    [
        c("bf.reserve", -4, Write),
        c("bf.add", 3, Write),
        c("bf.madd", -3, Write),
        c("bf.insert", -4, Write),
        c("bf.exists", 3, Read),
        c("bf.mexists", -3, Read),
        c("bf.info", -2, Read),
        c("bf.card", 2, Read),
        c("bf.scandump", 3, Read),
        c("bf.loadchunk", 4, Write),
        c("bf.debug", 2, Read),
        c("cf.reserve", -3, Write),
        c("cf.add", 3, Write),
        c("cf.addnx", 3, Write),
        c("cf.insert", -4, Write),
        c("cf.insertnx", -4, Write),
        c("cf.exists", 3, Read),
        c("cf.mexists", -3, Read),
        c("cf.count", 3, Read),
        c("cf.del", 3, WriteFast),
        c("cf.compact", 0, ReadPropagates),
        c("cf.info", 2, Read),
        c("cf.scandump", 3, Read),
        c("cf.loadchunk", 4, Write),
        c("cf.debug", 2, Read),
    ]
};

/// The handler of `COMMANDS[i]`, for a store `S` and argument type `A`.
pub fn handler<S: FilterStore, A: AsRef<[u8]>>(i: usize) -> Handler<S, A> {
    const H: usize = 25;
    let table: [Handler<S, A>; H] = [
        bf::reserve,
        bf::add,
        bf::madd,
        bf::insert,
        bf::exists,
        bf::mexists,
        bf::info,
        bf::card,
        bf::scandump,
        bf::loadchunk,
        bf::debug,
        cf::reserve,
        cf::add,
        cf::addnx,
        cf::insert,
        cf::insertnx,
        cf::exists,
        cf::mexists,
        cf::count,
        cf::del,
        cf::compact,
        cf::info,
        cf::scandump,
        cf::loadchunk,
        cf::debug,
    ];
    table[i]
}

/// Finds a command by name (any case).
pub fn lookup(name: &[u8]) -> Option<(usize, &'static Command)> {
    COMMANDS.iter().enumerate().find(|(_, c)| c.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Runs command `i` with its arity check: what a transport that does not check arities itself
/// (a Redis module: Redis registers module commands without one) calls.
pub fn run<S: FilterStore, A: AsRef<[u8]>>(i: usize, store: &mut S, env: &mut dyn Env, argv: &[A]) -> Frame {
    let cmd = &COMMANDS[i];
    if !cmd.arity_ok(argv.len()) {
        return Frame::error(err::arity(cmd.name));
    }
    handler::<S, A>(i)(store, env, argv)
}

/// `argv` as owned byte vectors (for [`Env::propagate`]).
pub(crate) fn owned<A: AsRef<[u8]>>(argv: &[A]) -> Vec<Vec<u8>> {
    argv.iter().map(|a| a.as_ref().to_vec()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_match_handlers_and_spec_flags() {
        assert_eq!(lookup(b"BF.ADD").map(|(i, _)| i), Some(1));
        assert_eq!(lookup(b"Cf.Debug").map(|(i, _)| i), Some(24));
        assert_eq!(COMMANDS.iter().filter(|c| c.access == Access::Write).count(), 11);
        assert!(COMMANDS[20].arity_ok(1) && COMMANDS[20].name == "cf.compact");
        assert!(!COMMANDS[1].arity_ok(4));
    }
}
