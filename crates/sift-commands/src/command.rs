//! What a command declares, once: name, arity, flags, ACL categories, key positions, summary and
//! handler ([`Command`]). The server builds its command table and its `COMMAND` replies from
//! these declarations, the module its `RedisModule_CreateCommand` calls and key specs.

use crate::parse::parse_i64;
use crate::{Env, Frame, Store};

/// A handler: `(store, env, argv) → reply`, `argv[0]` being the command name as sent.
pub type Handler = fn(&mut dyn Store, &mut dyn Env, &[&[u8]]) -> Frame;

/// Command flags, as Redis registers them (spec §2.5), plus one of sift's own
/// ([`Flags::PROPAGATES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags(u8);

impl Flags {
    /// `write`: may change data.
    pub const WRITE: Flags = Flags(1);
    /// `readonly`: only reads data.
    pub const READONLY: Flags = Flags(1 << 1);
    /// `deny-oom`: may grow memory use, refused while over `maxmemory`.
    pub const DENYOOM: Flags = Flags(1 << 2);
    /// `fast`.
    pub const FAST: Flags = Flags(1 << 3);
    /// Not a Redis flag: the command is registered `readonly` (as RedisBloom registers
    /// CF.COMPACT) but moves data, so a call that changed its key is propagated (logged,
    /// replicated) like a write, and opens its keys for writing.
    pub const PROPAGATES: Flags = Flags(1 << 4);

    /// Both sets.
    pub const fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// Does this set hold every flag of `other`?
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Does a call change data that must be propagated (`write`, or [`Flags::PROPAGATES`])?
    pub const fn changes_data(self) -> bool {
        self.0 & (Flags::WRITE.0 | Flags::PROPAGATES.0) != 0
    }

    /// The flags string of `RedisModule_CreateCommand` (`"write deny-oom"`, `"readonly fast"`).
    pub fn redis_flags(self) -> String {
        let names = [
            (Flags::WRITE, "write"),
            (Flags::READONLY, "readonly"),
            (Flags::DENYOOM, "deny-oom"),
            (Flags::FAST, "fast"),
        ];
        let set: Vec<&str> = names.iter().filter(|(f, _)| self.contains(*f)).map(|(_, n)| *n).collect();
        set.join(" ")
    }
}

/// How a command uses the keys of one key spec: Redis's key-spec flags (`COMMAND INFO`, and
/// `RedisModule_SetCommandInfo` for the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFlags(u16);

impl KeyFlags {
    /// Taken from the command: `RW UPDATE` for a `write` command, `RO ACCESS` otherwise (what
    /// the BF/CF commands report).
    pub const FROM_COMMAND: KeyFlags = KeyFlags(0);
    /// `RO`: read only.
    pub const RO: KeyFlags = KeyFlags(1);
    /// `RW`: read and written.
    pub const RW: KeyFlags = KeyFlags(1 << 1);
    /// `OW`: overwritten without being read.
    pub const OW: KeyFlags = KeyFlags(1 << 2);
    /// `RM`: deleted.
    pub const RM: KeyFlags = KeyFlags(1 << 3);
    /// `ACCESS`: the value is returned or read.
    pub const ACCESS: KeyFlags = KeyFlags(1 << 4);
    /// `UPDATE`: the value is updated.
    pub const UPDATE: KeyFlags = KeyFlags(1 << 5);
    /// `INSERT`: the value is added to.
    pub const INSERT: KeyFlags = KeyFlags(1 << 6);
    /// `DELETE`: part of the value is removed.
    pub const DELETE: KeyFlags = KeyFlags(1 << 7);

    /// The flags in the order Redis reports them.
    pub const NAMES: [(KeyFlags, &'static str); 8] = [
        (KeyFlags::RO, "RO"),
        (KeyFlags::RW, "RW"),
        (KeyFlags::OW, "OW"),
        (KeyFlags::RM, "RM"),
        (KeyFlags::ACCESS, "ACCESS"),
        (KeyFlags::UPDATE, "UPDATE"),
        (KeyFlags::INSERT, "INSERT"),
        (KeyFlags::DELETE, "DELETE"),
    ];

    /// The bits, which are Redis's `REDISMODULE_CMD_KEY_*` flags (RO 1, RW 2, OW 4, RM 8,
    /// ACCESS 16, UPDATE 32, INSERT 64, DELETE 128).
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Both sets.
    pub const fn with(self, other: KeyFlags) -> KeyFlags {
        KeyFlags(self.0 | other.0)
    }

    /// Does this set hold every flag of `other`?
    pub const fn contains(self, other: KeyFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The flags themselves, [`KeyFlags::FROM_COMMAND`] resolved against `command`'s flags.
    pub fn resolve(self, command: Flags) -> KeyFlags {
        if self != KeyFlags::FROM_COMMAND {
            self
        } else if command.contains(Flags::WRITE) {
            KeyFlags::RW.with(KeyFlags::UPDATE)
        } else {
            KeyFlags::RO.with(KeyFlags::ACCESS)
        }
    }

    /// The names of the flags set, in Redis's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        KeyFlags::NAMES.into_iter().filter(move |(f, _)| self.contains(*f)).map(|(_, n)| n)
    }
}

/// How the keys of a key spec are found from where the search begins (Redis's `find_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindKeys {
    /// Keys from the begin position up to `lastkey` (relative to the begin position when ≥ 0;
    /// counted from the end of the arguments when < 0, -1 being the last), every `step`.
    Range {
        /// Last key, relative to the begin position (≥ 0) or from the end (< 0).
        lastkey: i32,
        /// Distance between keys.
        step: i32,
    },
    /// A count at `begin + keynumidx` (a non-negative integer, parsed as
    /// [`crate::parse::parse_i64`] does), then that many keys from `begin + firstkey`, every
    /// `step` (EVAL's `numkeys key [key ...]`).
    Keynum {
        /// Position of the count, relative to the begin position.
        keynumidx: i32,
        /// Position of the first key, relative to the begin position.
        firstkey: i32,
        /// Distance between keys.
        step: i32,
    },
}

/// Where a command's keys are: Redis's key spec (begin search by index, then [`FindKeys`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    /// How the keys are used.
    pub flags: KeyFlags,
    /// The argument where the search begins.
    pub begin: i32,
    /// How the keys are found from there.
    pub find: FindKeys,
}

impl KeySpec {
    /// Keys `argv[first..=last]` every `step`, in Redis's legacy notation (`last` < 0 counts from
    /// the end), with [`KeyFlags::FROM_COMMAND`].
    pub const fn range(first: i32, last: i32, step: i32) -> KeySpec {
        let lastkey = if last < 0 { last } else { last - first };
        KeySpec { flags: KeyFlags::FROM_COMMAND, begin: first, find: FindKeys::Range { lastkey, step } }
    }

    /// `numkeys key [key ...]` with the count at `argv[at]`, with [`KeyFlags::FROM_COMMAND`].
    pub const fn keynum(at: i32) -> KeySpec {
        KeySpec {
            flags: KeyFlags::FROM_COMMAND,
            begin: at,
            find: FindKeys::Keynum { keynumidx: 0, firstkey: 1, step: 1 },
        }
    }

    /// This spec with explicit flags.
    pub const fn with_flags(mut self, flags: KeyFlags) -> KeySpec {
        self.flags = flags;
        self
    }

    /// The positions of this spec's keys in a request of `argv` (name included). Positions past
    /// the end are not given; neither are the keys of a count that is not a non-negative integer
    /// (the handler refuses such a request, parsing the count the same way).
    pub fn positions<A: AsRef<[u8]>>(&self, argv: &[A]) -> std::iter::StepBy<std::ops::Range<usize>> {
        let argc = argv.len() as i64;
        let begin = self.begin as i64;
        let (first, last, step) = match self.find {
            FindKeys::Range { lastkey, step } => {
                let last = if lastkey < 0 { argc + lastkey as i64 } else { begin + lastkey as i64 };
                (begin, last, step.max(1) as i64)
            }
            FindKeys::Keynum { keynumidx, firstkey, step } => {
                let count = usize::try_from(begin + keynumidx as i64)
                    .ok()
                    .and_then(|at| argv.get(at))
                    .and_then(|a| parse_i64(a.as_ref()))
                    .unwrap_or(0);
                if count <= 0 {
                    return (0..0).step_by(1);
                }
                let first = begin + firstkey as i64;
                let step = step.max(1) as i64;
                (first, first.saturating_add((count - 1).saturating_mul(step)), step)
            }
        };
        let last = last.min(argc - 1);
        if first < 1 || first > last {
            return (0..0).step_by(1);
        }
        (first as usize..last as usize + 1).step_by(step as usize)
    }
}

/// One command, declared once.
#[derive(Debug, Clone, Copy)]
pub struct Command {
    /// Lower-case registered name.
    pub name: &'static str,
    /// Redis arity: n > 0 exactly n arguments (name included), n < 0 at least -n. Checked before
    /// the handler runs; further counting rules (BF.RESERVE at most 7 arguments, CF.COMPACT
    /// exactly 2 although it registers -1) are the handler's.
    pub arity: i32,
    /// Flags.
    pub flags: Flags,
    /// ACL categories, with their `@`.
    pub acl: &'static [&'static str],
    /// Where its keys are. Every key the handler touches must be found by one of these: the
    /// server locks exactly these keys, the module opens them and Redis Cluster routes by them.
    pub keys: &'static [KeySpec],
    /// `COMMAND DOCS` summary.
    pub summary: &'static str,
    /// The implementation.
    pub handler: Handler,
}

impl Command {
    /// Does a request of `argc` arguments (name included) satisfy the registered arity?
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity as i64;
        let n = argc as i64;
        if a >= 0 {
            n == a
        } else {
            n >= -a
        }
    }

    /// Every key position of a request, in key-spec order (a key found by two specs twice).
    pub fn key_positions<'a, A: AsRef<[u8]>>(&'a self, argv: &'a [A]) -> impl Iterator<Item = usize> + 'a {
        self.keys.iter().flat_map(move |s| s.positions(argv))
    }

    /// Positions of the keys of the first key spec: the keys a command that changes data opens
    /// for writing (the others it only reads).
    pub fn main_key_positions<A: AsRef<[u8]>>(&self, argv: &[A]) -> impl Iterator<Item = usize> {
        self.keys.first().map(|s| s.positions(argv)).unwrap_or_else(|| (0..0).step_by(1))
    }

    /// Redis's legacy `(first key, last key, step)`: the first key spec when it is a range,
    /// else `(0, 0, 0)`.
    pub fn legacy_keys(&self) -> (i32, i32, i32) {
        match self.keys.first() {
            Some(KeySpec { begin, find: FindKeys::Range { lastkey, step }, .. }) => {
                let last = if *lastkey < 0 { *lastkey } else { begin + lastkey };
                (*begin, last, *step)
            }
            _ => (0, 0, 0),
        }
    }

    /// Are the key specs more than the legacy triple tells (a second spec, a count, explicit
    /// flags)? Then the module registers them with `RedisModule_SetCommandInfo`, and Redis and
    /// the server report the command `movablekeys` when one has a count.
    pub fn needs_key_specs(&self) -> bool {
        self.keys.len() > 1
            || self
                .keys
                .iter()
                .any(|s| s.flags != KeyFlags::FROM_COMMAND || matches!(s.find, FindKeys::Keynum { .. }))
    }

    /// Does one of the key specs count its keys (`numkeys`)?
    pub fn movable_keys(&self) -> bool {
        self.keys.iter().any(|s| matches!(s.find, FindKeys::Keynum { .. }))
    }
}

/// The key spec of the BF/CF commands and most others: `argv[1]`.
pub const KEY1: &[KeySpec] = &[KeySpec::range(1, 1, 1)];

/// A command whose one key is `argv[1]` ([`KEY1`]), as most are.
pub const fn key1(
    name: &'static str,
    arity: i32,
    flags: Flags,
    acl: &'static [&'static str],
    handler: Handler,
    summary: &'static str,
) -> Command {
    Command { name, arity, flags, acl, keys: KEY1, summary, handler }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<Vec<u8>> {
        a.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn positions_of_ranges_and_counts() {
        let r = KeySpec::range(1, 1, 1);
        assert_eq!(r.positions(&args(&["X", "k", "a"])).collect::<Vec<_>>(), [1]);
        assert_eq!(r.positions(&args(&["X"])).count(), 0);
        let all = KeySpec::range(1, -1, 1);
        assert_eq!(all.positions(&args(&["DEL", "a", "b", "c"])).collect::<Vec<_>>(), [1, 2, 3]);
        let pairs = KeySpec::range(1, -1, 2);
        assert_eq!(pairs.positions(&args(&["MSET", "a", "1", "b", "2"])).collect::<Vec<_>>(), [1, 3]);
        let n = KeySpec::keynum(2);
        let merge = args(&["M", "dest", "2", "s1", "s2", "WEIGHTS", "1", "2"]);
        assert_eq!(n.positions(&merge).collect::<Vec<_>>(), [3, 4]);
        // A count past the arguments gives the keys there are; a bad count gives none.
        assert_eq!(n.positions(&args(&["M", "d", "5", "s1"])).collect::<Vec<_>>(), [3]);
        for bad in ["x", "-1", "0", "01", ""] {
            assert_eq!(n.positions(&args(&["M", "d", bad, "s1"])).count(), 0, "{bad:?}");
        }
        assert_eq!(n.positions(&args(&["M", "d"])).count(), 0);
    }

    #[test]
    fn legacy_triple_and_flags() {
        fn h(_: &mut dyn Store, _: &mut dyn Env, _: &[&[u8]]) -> Frame {
            Frame::ok()
        }
        let c = |keys: &'static [KeySpec]| Command {
            name: "x",
            arity: -2,
            flags: Flags::WRITE.with(Flags::DENYOOM),
            acl: &[],
            keys,
            summary: "",
            handler: h,
        };
        assert_eq!(c(KEY1).legacy_keys(), (1, 1, 1));
        assert!(!c(KEY1).needs_key_specs());
        const PAIRS: &[KeySpec] = &[KeySpec::range(1, -1, 2)];
        const MERGE: &[KeySpec] = &[KeySpec::range(1, 1, 1), KeySpec::keynum(2)];
        assert_eq!(c(PAIRS).legacy_keys(), (1, -1, 2));
        let merge = c(MERGE);
        assert!(merge.needs_key_specs() && merge.movable_keys());
        let argv = args(&["M", "d", "2", "a", "b"]);
        assert_eq!(merge.key_positions(&argv).collect::<Vec<_>>(), [1, 3, 4]);
        assert_eq!(merge.main_key_positions(&argv).collect::<Vec<_>>(), [1]);
        assert_eq!(Flags::WRITE.with(Flags::DENYOOM).redis_flags(), "write deny-oom");
        assert_eq!(Flags::READONLY.with(Flags::FAST).with(Flags::PROPAGATES).redis_flags(), "readonly fast");
        let rw: Vec<_> = KeyFlags::FROM_COMMAND.resolve(Flags::WRITE).names().collect();
        assert_eq!(rw, ["RW", "UPDATE"]);
        let ro: Vec<_> =
            KeyFlags::FROM_COMMAND.resolve(Flags::READONLY.with(Flags::PROPAGATES)).names().collect();
        assert_eq!(ro, ["RO", "ACCESS"]);
    }
}
