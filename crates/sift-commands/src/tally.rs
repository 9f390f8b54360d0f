//! A throwaway family that shows what adding a data type takes: this file, its `mod` line and
//! one line in [`crate::families`]. Compiled only with the `test-family` feature, which the
//! server's and the module's tests enable; both then serve it, persist it and reload it
//! (`crates/sift-server/tests/registry.rs`, `crates/sift-redis/tests/registry.rs`).
//!
//! A tally is a set of items with the time each was first added:
//!
//! * `TALLY.ADD key item [item ...]`: adds the items not present with the current time
//!   ([`Env::now_ms`]), creating the key; replies how many were new. Propagated as `TALLY.ADDAT`
//!   with that time, so a replica or a replayed log records the primary's time.
//! * `TALLY.ADDAT key ms item [item ...]`: the same at an explicit time.
//! * `TALLY.WHEN key item`: the time the item was added, or null.
//! * `TALLY.CARD key`: the number of items (0 for a missing key).
//! * `TALLY.MERGE dest numkeys src [src ...]`: `dest` becomes the union of itself and the
//!   sources (each item at its earliest time), created if missing: a command on several keys,
//!   declared as `dest` then the counted sources; it reads the sources, then writes `dest`.
//!
//! Its type, `siftTally`, can be copied (`COPY`), unlike RedisBloom's.

use std::borrow::Cow;

use sift::compat::redisbloom::rdb::{FieldReader, FieldWriter, RdbError};

use crate::parse::parse_i64;
use crate::{
    err, owned, wrongtype, Chunk, Command, DataType, Env, Family, Flags, Frame, Held, KeySpec, LoadContext,
    Lookup, Store, KEY1,
};

/// Items and the time (Unix ms) each was first added, sorted by item.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    items: Vec<(Vec<u8>, u64)>,
}

/// The dump's header: magic and version.
const HEADER: &[u8] = b"TALLY\x01";
/// Items per dump chunk.
const CHUNK_ITEMS: usize = 1024;

impl Tally {
    /// Adds `item` at time `ms` unless present (an earlier time wins); true if it was new.
    pub fn add(&mut self, item: &[u8], ms: u64) -> bool {
        match self.items.binary_search_by(|(i, _)| i.as_slice().cmp(item)) {
            Ok(at) => {
                self.items[at].1 = self.items[at].1.min(ms);
                false
            }
            Err(at) => {
                self.items.insert(at, (item.to_vec(), ms));
                true
            }
        }
    }

    /// When `item` was added.
    pub fn when(&self, item: &[u8]) -> Option<u64> {
        self.items.binary_search_by(|(i, _)| i.as_slice().cmp(item)).ok().map(|at| self.items[at].1)
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// No items?
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl DataType for Tally {
    const NAME: &'static str = "siftTally";
    const ENCVER: u32 = 1;
    const TAG: u8 = 0xF0;
    const COPY: Option<fn(&Self) -> Self> = Some(Tally::clone);

    fn mem_usage(&self) -> usize {
        std::mem::size_of::<Self>() + self.items.iter().map(|(i, _)| i.len() + 32).sum::<usize>()
    }

    /// The header, then chunks of 1024 items (`len u32, bytes, ms u64` each) whose
    /// position is the number of items dumped after it.
    fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)> {
        if cursor == 0 {
            return Some((Chunk { pos: 0, data: Cow::Borrowed(HEADER) }, 1));
        }
        let from = usize::try_from(cursor - 1).ok().filter(|&f| f < self.items.len())?;
        let mut data = Vec::new();
        let mut n = 0;
        for (item, ms) in self.items[from..].iter().take(CHUNK_ITEMS) {
            data.extend_from_slice(&(item.len() as u32).to_le_bytes());
            data.extend_from_slice(item);
            data.extend_from_slice(&ms.to_le_bytes());
            n += 1;
        }
        let next = cursor + n;
        Some((Chunk { pos: (next - 1) as i64, data: Cow::Owned(data) }, next))
    }

    fn restore(header: &[u8], _cx: &LoadContext) -> Result<Self, String> {
        if header != HEADER {
            return Err("not a tally header".into());
        }
        Ok(Tally::default())
    }

    fn load_chunk(&mut self, pos: i64, mut data: &[u8]) -> Result<(), String> {
        let bad = || "truncated tally chunk".to_string();
        while !data.is_empty() {
            let len =
                u32::from_le_bytes(data.get(..4).ok_or_else(bad)?.try_into().expect("4 bytes")) as usize;
            let item = data.get(4..4 + len).ok_or_else(bad)?;
            let ms = data.get(4 + len..12 + len).ok_or_else(bad)?;
            self.add(item, u64::from_le_bytes(ms.try_into().expect("8 bytes")));
            data = &data[12 + len..];
        }
        if self.items.len() as i64 != pos {
            return Err(format!("tally chunk ends at item {}, its position says {pos}", self.items.len()));
        }
        Ok(())
    }

    fn rdb_save(&self, w: &mut dyn FieldWriter) {
        w.save_unsigned(self.items.len() as u64);
        for (item, ms) in &self.items {
            w.save_string(item);
            w.save_signed(*ms as i64);
        }
    }

    fn rdb_load(r: &mut dyn FieldReader, encver: u32, cx: &LoadContext) -> Result<Self, RdbError> {
        if encver > Self::ENCVER {
            return Err(RdbError::Format(format!("siftTally: unsupported encoding version {encver}")));
        }
        let n = r.load_unsigned()?;
        let mut t = Tally::default();
        let mut total = 0u64;
        for _ in 0..n {
            let item = r.load_string_max(cx.limits.max_bytes.saturating_sub(total), "tally items")?;
            total += item.len() as u64 + 8;
            let ms = u64::try_from(r.load_signed()?)
                .map_err(|_| RdbError::Format("negative tally time".into()))?;
            t.add(&item, ms);
        }
        Ok(t)
    }

    fn rewrite(&self, key: &[u8], emit: &mut dyn FnMut(&[&[u8]])) {
        for (item, ms) in &self.items {
            emit(&[b"TALLY.ADDAT", key, ms.to_string().as_bytes(), item]);
        }
    }
}

/// The tally at `key` for writing, created when missing.
fn tally_mut<'s>(store: &'s mut dyn Store, key: &[u8]) -> Result<&'s mut Tally, Frame> {
    if store.get::<Tally>(key).is_missing() {
        return Ok(store.insert(key, Tally::default()));
    }
    store.get_mut::<Tally>(key).found().ok_or_else(wrongtype)
}

/// `TALLY.ADD key item [item ...]`.
fn add(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let now = env.now_ms();
    let added = match add_at(store, argv[1], now, &argv[2..]) {
        Ok(n) => n,
        Err(f) => return f,
    };
    let mut explicit = vec![b"TALLY.ADDAT".to_vec(), argv[1].to_vec(), now.to_string().into_bytes()];
    explicit.extend(owned(&argv[2..]));
    env.propagate(vec![explicit]);
    Frame::Integer(added)
}

fn add_at(store: &mut dyn Store, key: &[u8], ms: u64, items: &[&[u8]]) -> Result<i64, Frame> {
    let t = tally_mut(store, key)?;
    Ok(items.iter().filter(|i| t.add(i, ms)).count() as i64)
}

/// `TALLY.ADDAT key ms item [item ...]`.
fn addat(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let Some(ms) = parse_i64(argv[2]).and_then(|v| u64::try_from(v).ok()) else {
        return Frame::error("ERR invalid time");
    };
    match add_at(store, argv[1], ms, &argv[3..]) {
        Ok(n) => Frame::Integer(n),
        Err(f) => f,
    }
}

/// `TALLY.WHEN key item`.
fn when(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match store.get::<Tally>(argv[1]) {
        Lookup::Found(t) => t.when(argv[2]).map_or(Frame::Null, |ms| Frame::Integer(ms as i64)),
        Lookup::Missing => Frame::Null,
        Lookup::WrongType => wrongtype(),
    }
}

/// `TALLY.CARD key`.
fn card(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match store.get::<Tally>(argv[1]) {
        Lookup::Found(t) => Frame::Integer(t.len() as i64),
        Lookup::Missing => Frame::Integer(0),
        Lookup::WrongType => wrongtype(),
    }
}

/// `TALLY.MERGE dest numkeys src [src ...]`.
fn merge(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let n = match parse_i64(argv[2]) {
        Some(n) if n > 0 => n as usize,
        _ => return Frame::error("ERR numkeys must be a positive integer"),
    };
    if argv.len() != 3 + n {
        return Frame::error(err::arity("tally.merge"));
    }
    // Read the destination and every source at once, compute, then write.
    let mut keys = vec![argv[1]];
    keys.extend_from_slice(&argv[3..]);
    let mut union = Tally::default();
    for held in store.read_many(&keys) {
        match held {
            Held::Missing => {}
            Held::Data(d) => match d.downcast_ref::<Tally>() {
                Some(t) => {
                    for (item, ms) in &t.items {
                        union.add(item, *ms);
                    }
                }
                None => return wrongtype(),
            },
            Held::Other => return wrongtype(),
        }
    }
    match tally_mut(store, argv[1]) {
        Ok(t) => {
            *t = union;
            Frame::ok()
        }
        Err(f) => f,
    }
}

/// The `tally` family.
#[derive(Debug)]
pub struct TallyFamily;

const WRITE: Flags = Flags::WRITE.with(Flags::DENYOOM);
const READ: Flags = Flags::READONLY.with(Flags::FAST);

impl Family for TallyFamily {
    const NAME: &'static str = "tally";
    type Type = Tally;
    const COMMANDS: &'static [Command] = &[
        Command {
            name: "tally.add",
            arity: -3,
            flags: WRITE,
            acl: &["@write"],
            keys: KEY1,
            summary: "Adds items with the current time",
            handler: add,
        },
        Command {
            name: "tally.addat",
            arity: -4,
            flags: WRITE,
            acl: &["@write"],
            keys: KEY1,
            summary: "Adds items with the given time",
            handler: addat,
        },
        Command {
            name: "tally.when",
            arity: 3,
            flags: READ,
            acl: &["@read", "@fast"],
            keys: KEY1,
            summary: "Returns when an item was added",
            handler: when,
        },
        Command {
            name: "tally.card",
            arity: 2,
            flags: READ,
            acl: &["@read", "@fast"],
            keys: KEY1,
            summary: "Returns the number of items",
            handler: card,
        },
        Command {
            name: "tally.merge",
            arity: -4,
            flags: WRITE,
            acl: &["@write"],
            keys: &[
                KeySpec::range(1, 1, 1),
                KeySpec::keynum(2).with_flags(crate::KeyFlags::RO.with(crate::KeyFlags::ACCESS)),
            ],
            summary: "Merges tallies into the destination",
            handler: merge,
        },
    ];
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Data;

    #[test]
    fn dump_and_restore_in_chunks() {
        let mut t = Tally::default();
        for i in 0..2500u32 {
            t.add(format!("item{i}").as_bytes(), 1000 + i as u64);
        }
        assert!(!t.add(b"item7", 5) && t.when(b"item7") == Some(5));
        let d: &dyn Data = &t;
        let chunks: Vec<_> = d.chunks().collect();
        assert_eq!(chunks.len(), 4, "the header and three chunks of at most 1024 items");
        assert_eq!(chunks.last().unwrap().pos, 2500);
        let info = crate::TypeInfo::of::<Tally>();
        let back =
            info.load_chunks(chunks.iter().map(|c| (c.pos, &c.data[..])), &LoadContext::default()).unwrap();
        assert_eq!(back.downcast_ref::<Tally>(), Some(&t));
        // A chunk cut short, or one whose position disagrees, is refused.
        let mut cut = chunks[1].data.to_vec();
        cut.pop();
        let broken = [(0, HEADER), (chunks[1].pos, &cut[..])];
        assert!(info.load_chunks(broken.into_iter(), &LoadContext::default()).is_err());
        let shifted = [(0, HEADER), (chunks[1].pos + 1, &chunks[1].data[..])];
        assert!(info.load_chunks(shifted.into_iter(), &LoadContext::default()).is_err());
        let empty = Tally::default();
        assert_eq!((&empty as &dyn Data).chunks().count(), 1);
    }
}
