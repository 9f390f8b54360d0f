//! The type registry: what a data type implements ([`DataType`]), its type-erased form as a
//! store holds it ([`Data`]), what a family is ([`Family`]), and the one list of families
//! ([`families`]) from which the server and the module build everything else ([`registry`]).

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

use sift::compat::redisbloom::rdb::{FieldReader, FieldWriter, RdbError};
use sift::compat::redisbloom::LoadLimits;

use crate::command::Command;
use crate::config::Defaults;

/// One piece of a value's dump: the value is rebuilt from the first chunk (its header, `pos` 0)
/// by [`DataType::restore`], then from each following chunk, in order, by
/// [`DataType::load_chunk`] with the same `pos`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk<'a> {
    /// Where the chunk goes, in the type's own terms (RedisBloom's `SCANDUMP` iterator for the
    /// BF/CF types); 0 for the header.
    pub pos: i64,
    /// The bytes.
    pub data: Cow<'a, [u8]>,
}

/// What loading a value may use: the byte budget, and the configuration (the cuckoo RDB
/// encodings 0..3 leave fields to the configured defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadContext {
    /// At most this much payload is allocated.
    pub limits: LoadLimits,
    /// The configured defaults.
    pub defaults: Defaults,
}

impl Default for LoadContext {
    fn default() -> Self {
        LoadContext { limits: LoadLimits::DEFAULT, defaults: Defaults::default() }
    }
}

/// A filter's false-positive rate: the one it was sized for, and the one its fill gives now
/// (seed 002's monitor: a filter filled past its design answers "maybe" more often than planned).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorRate {
    /// The rate the filter was created for; `None` for a type sized without one (a cuckoo
    /// filter is sized by capacity and bucket size).
    pub target: Option<f64>,
    /// The rate a never-added item is reported present with now, from the filter's contents
    /// (bits set, slots used), not from its item count.
    pub estimate: f64,
}

impl ErrorRate {
    /// Is the estimate above the target?
    pub fn over_target(&self) -> bool {
        self.target.is_some_and(|t| self.estimate > t)
    }
}

/// A data type: one implementation per type, the only place that knows how its values are named,
/// measured, dumped, saved, loaded and rebuilt. Everything the server and the module do with a
/// value generically (`TYPE`, `MEMORY USAGE`, `COPY`, snapshots, `DEBUG RELOAD`, RDB and `DUMP` /
/// `RESTORE`, AOF rewrite, `DEBUG DIGEST-VALUE`) comes from here.
///
/// Loading is from untrusted bytes (a snapshot, an RDB file, a `RESTORE` payload): every
/// constructor validates what it reads, allocates at most [`LoadContext::limits`], and answers
/// an error, never a panic.
pub trait DataType: Any + Send + Sync + fmt::Debug + Sized {
    /// The type's name: what `TYPE` answers, and the Redis module type name (9 characters of
    /// `A-Z a-z 0-9 - _`, unique among all modules: Redis stores it in RDB files).
    const NAME: &'static str;
    /// The RDB encoding version [`DataType::rdb_save`] writes (0..=1023).
    const ENCVER: u32;
    /// The tag of the type's entries in sift-server snapshots: unique, never 0, 1 (strings) or
    /// 255 (the end of entries), and never reused for another encoding once files exist.
    const TAG: u8;
    /// How `COPY` duplicates a value, or `None` to refuse it with `ERR not supported for this
    /// module key`, as Redis does for a module type without a copy callback.
    const COPY: Option<fn(&Self) -> Self> = None;

    /// Bytes the value uses, for `MEMORY USAGE` (the server adds its per-key overhead) and for
    /// the `maxmemory` accounting.
    fn mem_usage(&self) -> usize;

    /// The dump, one chunk per call: `cursor` 0 gives the header (with `pos` 0), and each call
    /// returns its chunk and the cursor of the next; `None` after the last. Chunks borrow the
    /// value where they can, and a caller may stop between any two calls: a snapshot dumps a
    /// large value piece by piece. Snapshots, digests and SCANDUMP-style commands use it.
    fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)>;

    /// A value from the header of its dump (the first chunk).
    fn restore(header: &[u8], cx: &LoadContext) -> Result<Self, String>;

    /// Applies one further chunk of the dump.
    fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String>;

    /// The RDB encoding (`rdb_save`): the module maps the writer onto `RedisModule_Save*`.
    fn rdb_save(&self, w: &mut dyn FieldWriter);

    /// The inverse of [`DataType::rdb_save`] for an RDB value written with `encver`.
    fn rdb_load(r: &mut dyn FieldReader, encver: u32, cx: &LoadContext) -> Result<Self, RdbError>;

    /// The commands that rebuild the value at `key` from nothing, for the module's AOF rewrite:
    /// each call of `emit` is one command, its name first.
    fn rewrite(&self, key: &[u8], emit: &mut dyn FnMut(&[&[u8]]));

    /// The false-positive rate, for the types that are membership filters (`None` for others).
    /// May read the whole value (a popcount of a Bloom filter's bits): callers that watch many
    /// keys pace themselves.
    fn error_rate(&self) -> Option<ErrorRate> {
        None
    }

    /// The value as it is now, to be dumped later while it keeps changing: a background
    /// snapshot calls it under the lock of the value's key and dumps the result without that
    /// lock. A type whose values can be large implements it so that the snapshot does not copy
    /// them whole while a writer waits (the Bloom filter: copy-on-write of the bitmap's pieces);
    /// `None` (the default) makes the snapshot dump the value at once.
    fn freeze(&self) -> Option<Box<dyn Frozen>> {
        None
    }

    /// Would [`DataType::before_save`] change the value? Lets a caller that must record a change
    /// (sift-server's `DUMP`, logged when it changed its key) take the value for writing only
    /// when it will.
    fn changes_before_save(&self) -> bool {
        false
    }

    /// Prepares the value to be saved, in place: every save (a snapshot at its epoch, `SAVE`,
    /// `DEBUG RELOAD`, `DUMP`, an AOF rewrite) calls it on the live value before the value is
    /// dumped or frozen, so that the value after a restart is the value that kept running.
    /// Returns whether it changed the value (exactly when [`DataType::changes_before_save`]
    /// said it would). It must not change [`DataType::mem_usage`]: a snapshot calls it without
    /// re-measuring. The t-digest compresses its buffered observations, as RedisBloom does
    /// before saving (sketches spec §10.5). The default changes nothing.
    fn before_save(&mut self) -> bool {
        false
    }

    /// Checks, after the last chunk of a load ([`DataType::restore`] then every
    /// [`DataType::load_chunk`]), that the chunks made the whole value: a type whose dump is a
    /// header and pieces refuses a value whose later pieces never came, which would otherwise
    /// load as a silently emptier value. The default accepts (a one-chunk dump is whole).
    fn finish_load(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// A value frozen by [`DataType::freeze`]: its dump as [`DataType::dump_chunk`] would have
/// given it at that moment.
pub trait Frozen: Send + Sync {
    /// Number of chunks, the header included.
    fn chunk_count(&self) -> u64;
    /// Appends the chunk at `cursor` to `out` (0: the header) and returns its `pos` and the next
    /// cursor, or `None` after the last. Each chunk is read once, in order.
    fn dump_chunk(&self, cursor: u64, out: &mut Vec<u8>) -> Option<(i64, u64)>;
    /// For a chunk too large to hold in memory at once (a large filter's whole file): its `pos`,
    /// the next cursor and its length in bytes, the chunk then being written in pieces by
    /// [`Frozen::write_chunk`]; `None` (the default) for a chunk taken whole with
    /// [`Frozen::dump_chunk`].
    fn streamed_chunk(&self, _cursor: u64) -> Option<(i64, u64, u64)> {
        None
    }
    /// Writes the chunk at `cursor` that [`Frozen::streamed_chunk`] announced to `out`, in
    /// pieces: exactly the length it gave.
    fn write_chunk(&self, cursor: u64, _out: &mut dyn std::io::Write) -> std::io::Result<()> {
        Err(std::io::Error::other(format!("chunk {cursor} is not streamed")))
    }
}

/// A value of a registered data type, as a store holds it: [`DataType`] without its static
/// parts. Implemented for every data type; reach the concrete type with
/// [`Data::as_any`] (or the typed lookups of [`crate::Store`]).
pub trait Data: Any + Send + Sync + fmt::Debug {
    /// [`DataType::NAME`].
    fn type_name(&self) -> &'static str;
    /// [`DataType::TAG`].
    fn snapshot_tag(&self) -> u8;
    /// [`DataType::mem_usage`].
    fn mem_usage(&self) -> usize;
    /// [`DataType::freeze`].
    fn freeze(&self) -> Option<Box<dyn Frozen>>;
    /// [`DataType::changes_before_save`].
    fn changes_before_save(&self) -> bool;
    /// [`DataType::before_save`].
    fn before_save(&mut self) -> bool;
    /// [`DataType::dump_chunk`].
    fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)>;
    /// [`DataType::load_chunk`].
    fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String>;
    /// [`DataType::finish_load`].
    fn finish_load(&mut self) -> Result<(), String>;
    /// [`DataType::COPY`]: the copy, or `None` when the type refuses `COPY`.
    fn copy_data(&self) -> Option<Box<dyn Data>>;
    /// [`DataType::rdb_save`].
    fn rdb_save(&self, w: &mut dyn FieldWriter);
    /// [`DataType::rewrite`].
    fn rewrite(&self, key: &[u8], emit: &mut dyn FnMut(&[&[u8]]));
    /// [`DataType::error_rate`].
    fn error_rate(&self) -> Option<ErrorRate>;
    /// The value, to downcast.
    fn as_any(&self) -> &dyn Any;
    /// The value, to downcast for writing.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// The box, to downcast (the module keeps a value as a plain `Box<T>`).
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: DataType> Data for T {
    fn type_name(&self) -> &'static str {
        T::NAME
    }
    fn snapshot_tag(&self) -> u8 {
        T::TAG
    }
    fn mem_usage(&self) -> usize {
        DataType::mem_usage(self)
    }
    fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)> {
        DataType::dump_chunk(self, cursor)
    }
    fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String> {
        DataType::load_chunk(self, pos, data)
    }
    fn finish_load(&mut self) -> Result<(), String> {
        DataType::finish_load(self)
    }
    fn copy_data(&self) -> Option<Box<dyn Data>> {
        T::COPY.map(|copy| Box::new(copy(self)) as Box<dyn Data>)
    }
    fn rdb_save(&self, w: &mut dyn FieldWriter) {
        DataType::rdb_save(self, w)
    }
    fn rewrite(&self, key: &[u8], emit: &mut dyn FnMut(&[&[u8]])) {
        DataType::rewrite(self, key, emit)
    }
    fn error_rate(&self) -> Option<ErrorRate> {
        DataType::error_rate(self)
    }
    fn freeze(&self) -> Option<Box<dyn Frozen>> {
        DataType::freeze(self)
    }
    fn changes_before_save(&self) -> bool {
        DataType::changes_before_save(self)
    }
    fn before_save(&mut self) -> bool {
        DataType::before_save(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl dyn Data {
    /// The value as a `T`, if it is one.
    pub fn downcast_ref<T: DataType>(&self) -> Option<&T> {
        self.as_any().downcast_ref()
    }

    /// The value as a `T` for writing, if it is one.
    pub fn downcast_mut<T: DataType>(&mut self) -> Option<&mut T> {
        self.as_any_mut().downcast_mut()
    }

    /// Every chunk of the dump, in order (see [`DataType::dump_chunk`]).
    pub fn chunks(&self) -> impl Iterator<Item = Chunk<'_>> {
        let mut cursor = Some(0u64);
        std::iter::from_fn(move || {
            let (chunk, next) = self.dump_chunk(cursor?)?;
            cursor = Some(next);
            Some(chunk)
        })
    }
}

/// A command family: a data type and the commands on it, each declared once.
pub trait Family: 'static {
    /// Short name (`"bf"`), for messages and docs.
    const NAME: &'static str;
    /// Its data type.
    type Type: DataType;
    /// Its commands, in registration order.
    const COMMANDS: &'static [Command];
}

/// Something built from every family in turn, statically typed: the module instantiates its
/// per-type Redis callbacks this way ([`families`]).
pub trait Visitor {
    /// Called once per family, in list order.
    fn visit<F: Family>(&mut self);
}

/// **The family list.** Every registered family, in order (the order of `COMMAND`'s listing and
/// of the module's registrations). Adding a family is one line here; everything else —
/// the server's command table, dispatch, `COMMAND` replies, snapshots, the module's commands,
/// data types and key specs — is built from it.
pub fn families(v: &mut impl Visitor) {
    v.visit::<crate::bf::Bloom>();
    v.visit::<crate::cf::Cuckoo>();
    v.visit::<crate::sf::Sift>();
    v.visit::<crate::cms::Cms>();
    v.visit::<crate::topk::TopKFamily>();
    v.visit::<crate::tdigest::TDigestFamily>();
    #[cfg(feature = "test-family")]
    v.visit::<crate::tally::TallyFamily>();
}

/// [`DataType::restore`], type-erased.
pub type RestoreFn = fn(&[u8], &LoadContext) -> Result<Box<dyn Data>, String>;

/// [`DataType::rdb_load`], type-erased.
pub type RdbLoadFn = fn(&mut dyn FieldReader, u32, &LoadContext) -> Result<Box<dyn Data>, RdbError>;

/// The static parts of a registered data type, and its constructors, type-erased.
#[derive(Debug, Clone, Copy)]
pub struct TypeInfo {
    /// [`DataType::NAME`].
    pub name: &'static str,
    /// [`DataType::ENCVER`].
    pub encver: u32,
    /// [`DataType::TAG`].
    pub tag: u8,
    /// Rust's id of the type.
    pub type_id: TypeId,
    /// [`DataType::restore`], boxed.
    pub restore: RestoreFn,
    /// [`DataType::rdb_load`], boxed.
    pub rdb_load: RdbLoadFn,
}

impl TypeInfo {
    /// The information of `T`.
    pub fn of<T: DataType>() -> TypeInfo {
        TypeInfo {
            name: T::NAME,
            encver: T::ENCVER,
            tag: T::TAG,
            type_id: TypeId::of::<T>(),
            restore: |h, cx| T::restore(h, cx).map(|v| Box::new(v) as Box<dyn Data>),
            rdb_load: |r, encver, cx| T::rdb_load(r, encver, cx).map(|v| Box::new(v) as Box<dyn Data>),
        }
    }

    /// Rebuilds a value from its dump chunks (the header first), and checks it is whole
    /// ([`DataType::finish_load`]): what a snapshot load does.
    pub fn load_chunks<'c>(
        &self,
        mut chunks: impl Iterator<Item = (i64, &'c [u8])>,
        cx: &LoadContext,
    ) -> Result<Box<dyn Data>, String> {
        let Some((0, header)) = chunks.next() else {
            return Err("the first chunk is not the header".into());
        };
        let mut value = (self.restore)(header, cx)?;
        for (pos, data) in chunks {
            value.load_chunk(pos, data)?;
        }
        value.finish_load()?;
        Ok(value)
    }
}

/// One registered family, type-erased.
#[derive(Debug, Clone, Copy)]
pub struct FamilyInfo {
    /// [`Family::NAME`].
    pub name: &'static str,
    /// Its data type.
    pub data_type: TypeInfo,
    /// [`Family::COMMANDS`].
    pub commands: &'static [Command],
}

/// Everything registered, indexed: built once from [`families`].
#[derive(Debug)]
pub struct Registry {
    families: Vec<FamilyInfo>,
    /// Hashed with foldhash: the module looks every call's name up here, and SipHash would be
    /// most of that cost (the names are ours, so no attacker chooses them).
    by_name: HashMap<&'static str, &'static Command, foldhash::fast::FixedState>,
}

struct Collect(Vec<FamilyInfo>);

impl Visitor for Collect {
    fn visit<F: Family>(&mut self) {
        self.0.push(FamilyInfo {
            name: F::NAME,
            data_type: TypeInfo::of::<F::Type>(),
            commands: F::COMMANDS,
        });
    }
}

impl Registry {
    fn build() -> Registry {
        let mut c = Collect(Vec::new());
        families(&mut c);
        let families = c.0;
        let mut by_name = HashMap::with_hasher(foldhash::fast::FixedState::default());
        for (i, f) in families.iter().enumerate() {
            let t = &f.data_type;
            assert!(
                valid_type_name(t.name),
                "{}: type name {:?} is not 9 characters of A-Z a-z 0-9 - _",
                f.name,
                t.name
            );
            assert!(t.encver <= 1023, "{}: encver {} above 1023", f.name, t.encver);
            assert!(!matches!(t.tag, 0 | 1 | 255), "{}: snapshot tag {} is reserved", f.name, t.tag);
            for g in &families[..i] {
                assert!(g.data_type.name != t.name, "type name {} registered twice", t.name);
                assert!(g.data_type.tag != t.tag, "snapshot tag {} registered twice", t.tag);
            }
            for c in f.commands {
                assert_eq!(c.name, c.name.to_ascii_lowercase(), "command names are lower case");
                assert!(by_name.insert(c.name, c).is_none(), "command {} registered twice", c.name);
            }
        }
        Registry { families, by_name }
    }

    /// Every family, in list order.
    pub fn families(&self) -> &[FamilyInfo] {
        &self.families
    }

    /// Every command, family after family.
    pub fn commands(&self) -> impl Iterator<Item = &'static Command> + '_ {
        self.families.iter().flat_map(|f| f.commands.iter())
    }

    /// The command named `name` (any case).
    pub fn command(&self, name: &[u8]) -> Option<&'static Command> {
        let mut buf = [0u8; 32];
        let lower = buf.get_mut(..name.len())?;
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        self.by_name.get(std::str::from_utf8(lower).ok()?).copied()
    }

    /// The data type stored in snapshots with `tag`.
    pub fn type_by_tag(&self, tag: u8) -> Option<&TypeInfo> {
        self.families.iter().map(|f| &f.data_type).find(|t| t.tag == tag)
    }

    /// The data type named `name` (what `TYPE` answers).
    pub fn type_by_name(&self, name: &str) -> Option<&TypeInfo> {
        self.families.iter().map(|f| &f.data_type).find(|t| t.name == name)
    }
}

/// Is `name` a valid Redis module type name (9 characters of `A-Z a-z 0-9 - _`)?
fn valid_type_name(name: &str) -> bool {
    name.len() == 9 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The registry of [`families`], built on first use (and checked then: names and tags unique,
/// type names valid; a mistake there is a programming error and panics on first use, which
/// every test run reaches).
pub fn registry() -> &'static Registry {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::build);
    &REGISTRY
}

/// Every chunk of a value's dump, with its position (the tests of frozen values compare these).
#[cfg(test)]
pub(crate) fn live_chunks(v: &dyn Data) -> Vec<(i64, Vec<u8>)> {
    v.chunks().map(|c| (c.pos, c.data.into_owned())).collect()
}

/// Every chunk a frozen value gives, with its position; as many as it announced.
#[cfg(test)]
pub(crate) fn frozen_chunks(frozen: &dyn Frozen) -> Vec<(i64, Vec<u8>)> {
    let (mut got, mut cursor) = (Vec::new(), 0);
    loop {
        let mut buf = Vec::new();
        let Some((pos, next)) = frozen.dump_chunk(cursor, &mut buf) else { break };
        got.push((pos, buf));
        cursor = next;
    }
    assert_eq!(got.len() as u64, frozen.chunk_count());
    got
}

/// A value of type `T` loaded from `chunks` through the registry, as a snapshot's loader does.
#[cfg(test)]
pub(crate) fn load_as<T: DataType>(chunks: &[(i64, Vec<u8>)], cx: &LoadContext) -> Result<T, String> {
    let v = TypeInfo::of::<T>().load_chunks(chunks.iter().map(|(p, d)| (*p, &d[..])), cx)?;
    Ok(*v.into_any().downcast::<T>().expect("the type loaded"))
}

/// The chunked loaders' completeness test: every dump of `chunks` cut short is a load error
/// naming what is `missing`, and one with two pieces swapped or a piece given twice is refused.
#[cfg(test)]
pub(crate) fn assert_incomplete_dumps_refused<T: DataType>(chunks: &[(i64, Vec<u8>)], missing: &str) {
    assert!(chunks.len() >= 3, "a header and two pieces at least");
    let cx = LoadContext::default();
    for keep in 1..chunks.len() {
        let e = load_as::<T>(&chunks[..keep], &cx).unwrap_err();
        assert!(e.contains(missing), "{keep} chunks: {e}");
    }
    let mut swapped = chunks.to_vec();
    swapped.swap(1, 2);
    assert!(load_as::<T>(&swapped, &cx).is_err(), "two pieces swapped");
    let mut again = chunks.to_vec();
    again.insert(2, chunks[1].clone());
    assert!(load_as::<T>(&again, &cx).is_err(), "a piece twice");
    assert!(load_as::<T>(chunks, &cx).is_ok(), "the whole dump loads");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_is_consistent() {
        let r = registry();
        assert!(r.families().len() >= 2);
        assert_eq!(r.type_by_tag(2).map(|t| t.name), Some("MBbloom--"));
        assert_eq!(r.type_by_tag(3).map(|t| t.name), Some("MBbloomCF"));
        assert_eq!(r.command(b"BF.ADD").map(|c| c.name), Some("bf.add"));
        assert_eq!(r.command(b"cF.dEbUg").map(|c| c.name), Some("cf.debug"));
        assert!(r.command(b"bf.nosuch").is_none());
        assert!(r.command(&[b'a'; 40]).is_none());
        assert!(
            valid_type_name("MBbloom--") && !valid_type_name("MBbloom-") && !valid_type_name("MBbloom-+")
        );
    }
}
