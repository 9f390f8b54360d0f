//! The RedisBloom Bloom commands (`BF.*`, spec §8): thin adapters from the command table to the
//! shared command layer, `sift_commands::bf`, which the Redis module runs too.
//!
//! This file also holds what both filter families need from this server: the keyspace as a
//! [`FilterStore`] ([`Locked`]) and the server's surroundings as an [`Env`] ([`ServerEnv`]).

use bytes::Bytes;
use sift::compat::redisbloom::{BloomChain, CuckooFilter, LoadLimits};
use sift_commands::{BloomDefaults, CuckooDefaults, Env, FilterStore, Read, Slot, Write};

use super::Ctx;
use crate::db::{Locked, Value};
use crate::frame::Frame;

impl FilterStore for Locked<'_> {
    fn lookup(&mut self, key: &[u8]) -> Read<'_> {
        match self.get(key).map(|e| &e.value) {
            None => Slot::Missing,
            Some(Value::Bloom(b)) => Slot::Bloom(b),
            Some(Value::Cuckoo(c)) => Slot::Cuckoo(c),
            Some(_) => Slot::Other,
        }
    }

    fn lookup_mut(&mut self, key: &[u8]) -> Write<'_> {
        match self.get_mut(key).map(|e| &mut e.value) {
            None => Slot::Missing,
            Some(Value::Bloom(b)) => Slot::Bloom(b),
            Some(Value::Cuckoo(c)) => Slot::Cuckoo(c),
            Some(_) => Slot::Other,
        }
    }

    fn create_bloom(&mut self, key: &[u8], chain: BloomChain) -> &mut BloomChain {
        self.insert(Bytes::copy_from_slice(key), Value::Bloom(Box::new(chain)));
        match self.get_mut(key).map(|e| &mut e.value) {
            Some(Value::Bloom(b)) => b,
            _ => unreachable!("inserted just above under the same lock"),
        }
    }

    fn create_cuckoo(&mut self, key: &[u8], filter: CuckooFilter) -> &mut CuckooFilter {
        self.insert(Bytes::copy_from_slice(key), Value::Cuckoo(Box::new(filter)));
        match self.get_mut(key).map(|e| &mut e.value) {
            Some(Value::Cuckoo(c)) => c,
            _ => unreachable!("inserted just above under the same lock"),
        }
    }
}

/// The server's side of a BF/CF request: the session's protocol, the configuration, the memory
/// budget and the command's propagation slot ([`Ctx::propagate`]).
pub struct ServerEnv<'a> {
    protocol: u8,
    server: &'a crate::shared::Shared,
    propagate: &'a mut Option<Vec<Vec<Bytes>>>,
}

impl Env for ServerEnv<'_> {
    fn protocol(&self) -> u8 {
        self.protocol
    }

    fn bloom_defaults(&self) -> BloomDefaults {
        self.server.config.read().filters.bloom
    }

    fn cuckoo_defaults(&self) -> CuckooDefaults {
        self.server.config.read().filters.cuckoo
    }

    /// `maxmemory` when set, else the library's default LOADCHUNK budget (4 GiB, enough for the
    /// largest realistic RedisBloom filter: 2^30 items at 10^-6 is 3.9 GB). RedisBloom allocates
    /// whatever it is asked (lazily, with calloc); this server zeroes what it allocates, so a
    /// request beyond the budget is refused before allocating, with the reply of a failed
    /// allocation.
    fn memory_budget(&mut self) -> u64 {
        let max = self.server.config.read().maxmemory;
        if max > 0 {
            max
        } else {
            LoadLimits::DEFAULT.max_bytes
        }
    }

    fn propagate(&mut self, commands: Vec<Vec<Vec<u8>>>) {
        *self.propagate =
            Some(commands.into_iter().map(|c| c.into_iter().map(Bytes::from).collect()).collect());
    }
}

/// The keyspace as a handler's store, noting whether the handler reached its key.
pub struct KeyAccess<'a, 'k> {
    keys: &'a mut Locked<'k>,
    reached: bool,
}

impl FilterStore for KeyAccess<'_, '_> {
    fn lookup(&mut self, key: &[u8]) -> Read<'_> {
        self.reached = true;
        self.keys.lookup(key)
    }

    fn lookup_mut(&mut self, key: &[u8]) -> Write<'_> {
        self.reached = true;
        self.keys.lookup_mut(key)
    }

    fn create_bloom(&mut self, key: &[u8], chain: BloomChain) -> &mut BloomChain {
        self.reached = true;
        self.keys.create_bloom(key, chain)
    }

    fn create_cuckoo(&mut self, key: &[u8], filter: CuckooFilter) -> &mut CuckooFilter {
        self.reached = true;
        self.keys.create_cuckoo(key, filter)
    }
}

/// Runs a shared handler on this server's keyspace and surroundings.
///
/// WATCH: a module's write command opens its key for writing when it first looks it up, and
/// Redis signals the key as modified when the module closes it, whatever the command did (an
/// item already present, a filter not found, even an error reply after the lookup). So a write
/// command that reached its key counts as modifying it here too, changed or not (checked
/// against redis-server 7.0.15 with the sift-redis module, which opens keys as RedisBloom does).
/// Keys that do change are signalled by the keyspace itself ([`crate::db`]).
pub(crate) fn run<'k>(
    ctx: &mut Ctx<'_, 'k>,
    argv: &[Bytes],
    handler: impl for<'a> FnOnce(&mut KeyAccess<'a, 'k>, &mut dyn Env, &[Bytes]) -> Frame,
) -> Frame {
    let mut env =
        ServerEnv { protocol: ctx.session.protocol, server: ctx.server, propagate: &mut ctx.propagate };
    let mut store = KeyAccess { keys: ctx.keys, reached: false };
    let reply = handler(&mut store, &mut env, argv);
    if store.reached && ctx.server.db.watched() {
        let writes = super::table::lookup(&argv[0])
            .is_some_and(|s| s.flags & (super::table::WRITE | super::table::PROPAGATE) != 0);
        if writes {
            ctx.keys.signal_modified(&argv[1]);
        }
    }
    reply
}

/// Table handlers (`fn(&mut Ctx, &[Bytes]) -> Frame`) for shared handlers.
macro_rules! adapters {
    ($family:ident: $($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($family), ".", stringify!($name), "`: see `sift_commands::", stringify!($family), "`.")]
            pub fn $name(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
                run(ctx, argv, |keys, env, argv| sift_commands::$family::$name(keys, env, argv))
            }
        )*
    };
}
pub(crate) use adapters;

adapters!(bf: reserve, add, madd, insert, exists, mexists, info, card, scandump, loadchunk, debug);
