//! sift's own filters over the wire: the `SF.*` family and its type, `sift-filt`.
//!
//! A `sift-filt` key holds one filter of any of the library's families ([`Native`]): created by
//! `SF.RESERVE` (blocked Bloom, counting Bloom, cuckoo, quotient; scalable chains of blocked or
//! cuckoo layers with `EXPANSION`), or installed whole from a sift file by `SF.LOAD` /
//! `SF.LOADCHUNK` (any native kind, the static xor, binary fuse and Golomb-coded sets that
//! `sift build` makes included). `SF.LOAD` of a RedisBloom file installs a `BF`/`CF` key.
//!
//! * `SF.RESERVE key error_rate capacity [KIND blocked|counting|cuckoo|quotient] [FINGERPRINT 8|12|16] [EXPANSION n]`
//! * `SF.ADD key item`, `SF.MADD key item [item ...]`: a missing key is created as `BF.ADD`
//!   creates one (`bf-error-rate`, `bf-initial-size`, growth `bf-expansion-factor`), as a
//!   blocked filter; the creation is propagated as an explicit `SF.RESERVE`.
//! * `SF.EXISTS`, `SF.MEXISTS`, `SF.CARD`; `SF.DEL`, `SF.MDEL` for the kinds that delete.
//! * `SF.INFO key [field]`: also for `BF` and `CF` keys, with the error rate estimated now.
//! * `SF.LOAD key file`, `SF.LOADCHUNK key iterator bytes` (files past the 512 MB argument
//!   limit, sent in pieces; the filter is swapped in when the last piece arrives), and
//!   `SF.DUMP key [iterator]` (pieces of 16 MiB, in BF.SCANDUMP's iterator convention).
//!
//! The type's dump, RDB value and AOF rewrite are the sift file itself (`docs/FORMAT.md`),
//! with the bytes of an unfinished `SF.LOADCHUNK` upload after it.

mod filter;

use std::borrow::Cow;

use sift::compat::redisbloom::rdb::{FieldReader, FieldWriter, RdbError};
use sift::compat::redisbloom::{BloomChain, CuckooFilter};
use sift::format::{FilterKind, HEADER_LEN, MAGIC, TRAILER_LEN, VERSION};
use sift::Persist;

pub use filter::{Native, ReserveKind, Spec};

use crate::parse::{eq_ignore_case, parse_f64, parse_i64};
use crate::{
    err, owned, wrongtype, Chunk, Command, Data, DataType, Env, ErrorRate, Family, Flags, Frame, Held,
    LoadContext, Lookup, Store, KEY1,
};

/// The most items `SF.RESERVE` sizes a filter for: 2^40 (the memory budget refuses most such
/// filters before this does).
pub const MAX_CAPACITY: u64 = 1 << 40;
/// The largest `EXPANSION`: the library's scalable chains grow by at most 1024.
pub const MAX_EXPANSION: i64 = 1024;
/// Pieces of this size carry a large filter in an AOF rewrite (well under the 512 MB argument
/// limit).
const REWRITE_PIECE: usize = 64 << 20;
/// Pieces of a pending upload in the dump, and of the file `SF.DUMP` returns (RedisBloom's
/// SCANDUMP chunk size).
const DUMP_PIECE: usize = 16 << 20;

/// A `sift-filt` value: the filter it serves, and the bytes of an `SF.LOADCHUNK` upload that
/// will replace it once complete.
#[derive(Debug, Clone, Default)]
pub struct SiftFilter {
    filter: Option<Native>,
    upload: Vec<u8>,
}

impl SiftFilter {
    /// A value serving `filter`.
    pub fn new(filter: Native) -> SiftFilter {
        SiftFilter { filter: Some(filter), upload: Vec::new() }
    }

    /// The filter served, if one is installed (a key created by an unfinished `SF.LOADCHUNK`
    /// has none yet).
    pub fn filter(&self) -> Option<&Native> {
        self.filter.as_ref()
    }

    /// Bytes of the pending upload.
    pub fn upload_len(&self) -> usize {
        self.upload.len()
    }
}

/// The dump's header: magic, version, flags (bit 0: a filter is installed).
const DUMP_MAGIC: &[u8; 4] = b"SFLT";
const DUMP_VERSION: u8 = 1;

impl DataType for SiftFilter {
    const NAME: &'static str = "sift-filt";
    const ENCVER: u32 = 1;
    const TAG: u8 = 4;
    const COPY: Option<fn(&Self) -> Self> = Some(SiftFilter::clone);

    fn mem_usage(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.filter.as_ref().map_or(0, |f| f.heap_bytes() as usize)
            + self.upload.capacity()
    }

    /// The header (pos 0); the sift file of the filter, whole (pos 1); the pending upload in
    /// pieces of 16 MiB (pos 2, 3, ...).
    fn dump_chunk(&self, cursor: u64) -> Option<(Chunk<'_>, u64)> {
        if cursor == 0 {
            return Some((Chunk { pos: 0, data: Cow::Owned(dump_header(self.filter.is_some())) }, 1));
        }
        if cursor == 1 {
            if let Some(f) = &self.filter {
                return Some((Chunk { pos: 1, data: Cow::Owned(f.to_bytes()) }, 2));
            }
        }
        let (piece, data) = upload_piece(&self.upload, cursor)?;
        Some((Chunk { pos: 2 + piece as i64, data: Cow::Borrowed(data) }, 3 + piece as u64))
    }

    /// A blocked, scalable or counting filter with a large array is read by the snapshot later, its
    /// writers copying aside only the pieces they change first ([`Native::freeze`]); the header
    /// and a pending upload are copied now. Other values are dumped at once.
    ///
    /// A static filter (xor, binary fuse, GCS) is never written: the snapshot shares it, and
    /// writes its file when it reaches it.
    fn freeze(&self) -> Option<Box<dyn crate::Frozen>> {
        let f = self.filter.as_ref()?;
        let file = match f.share_static() {
            Some(shared) => FrozenFilter::Static(shared),
            None => FrozenFilter::File(f.freeze()?),
        };
        Some(Box::new(FrozenSift { file, upload: self.upload.clone() }))
    }

    fn restore(header: &[u8], _cx: &LoadContext) -> Result<Self, String> {
        match header {
            [m0, m1, m2, m3, DUMP_VERSION, 0 | 1] if [*m0, *m1, *m2, *m3] == *DUMP_MAGIC => {
                Ok(SiftFilter::default())
            }
            _ => Err("not a sift-filt header".into()),
        }
    }

    fn load_chunk(&mut self, pos: i64, data: &[u8]) -> Result<(), String> {
        match pos {
            1 if self.filter.is_none() && self.upload.is_empty() => {
                self.filter = Some(Native::from_bytes(data)?);
                Ok(())
            }
            p if p >= 2 && self.upload.len() as i64 == (p - 2) * DUMP_PIECE as i64 => {
                self.upload.extend_from_slice(data);
                Ok(())
            }
            _ => Err(format!("sift-filt chunk at position {pos} out of order")),
        }
    }

    /// `filter present (unsigned 0/1)`, `sift file (string)` when present, `upload (string)`.
    fn rdb_save(&self, w: &mut dyn FieldWriter) {
        w.save_unsigned(u64::from(self.filter.is_some()));
        if let Some(f) = &self.filter {
            w.save_string(&f.to_bytes());
        }
        w.save_string(&self.upload);
    }

    fn rdb_load(r: &mut dyn FieldReader, encver: u32, cx: &LoadContext) -> Result<Self, RdbError> {
        if encver > Self::ENCVER {
            return Err(RdbError::Format(format!("sift-filt: unsupported encoding version {encver}")));
        }
        let mut v = SiftFilter::default();
        match r.load_unsigned()? {
            0 => {}
            1 => {
                let file = r.load_string_max(cx.limits.max_bytes, "sift-filt file")?;
                v.filter = Some(Native::from_bytes(&file).map_err(RdbError::Format)?);
            }
            n => return Err(RdbError::Format(format!("sift-filt: bad filter flag {n}"))),
        }
        v.upload = r.load_string_max(cx.limits.max_bytes, "sift-filt upload")?;
        Ok(v)
    }

    /// `SF.LOAD key <file>` (or `SF.LOADCHUNK` pieces past 64 MiB), then `SF.LOADCHUNK` pieces
    /// of the pending upload.
    fn rewrite(&self, key: &[u8], emit: &mut dyn FnMut(&[&[u8]])) {
        if let Some(f) = &self.filter {
            let file = f.to_bytes();
            if file.len() <= REWRITE_PIECE {
                emit(&[b"SF.LOAD", key, &file]);
            } else {
                upload_pieces(key, &file, emit);
            }
        }
        upload_pieces(key, &self.upload, emit);
    }

    fn error_rate(&self) -> Option<ErrorRate> {
        let f = self.filter.as_ref()?;
        // At the filter's own clock (a window by time: its last add); SF.INFO asks at the time
        // of the request.
        Some(ErrorRate { target: Some(f.target()), estimate: f.estimate(0) })
    }
}

/// The dump's first chunk.
fn dump_header(has_filter: bool) -> Vec<u8> {
    let mut h = DUMP_MAGIC.to_vec();
    h.push(DUMP_VERSION);
    h.push(u8::from(has_filter));
    h
}

/// The piece of a pending upload at dump cursor `cursor` (2 and up; 1 too when no filter is
/// installed): its index and its bytes.
fn upload_piece(upload: &[u8], cursor: u64) -> Option<(usize, &[u8])> {
    let piece = usize::try_from(cursor.max(2) - 2).ok()?;
    Some((piece, upload.chunks(DUMP_PIECE).nth(piece)?))
}

/// A `sift-filt` value frozen by [`DataType::freeze`]: its filter's file is written when the
/// snapshot reaches it, as it was at the freeze.
#[derive(Debug)]
struct FrozenSift {
    file: FrozenFilter,
    upload: Vec<u8>,
}

/// The filter of a [`FrozenSift`].
#[derive(Debug)]
enum FrozenFilter {
    /// Its file, with copy-on-write of its large arrays.
    File(sift::format::FrozenFile),
    /// A static filter, shared: nothing writes it.
    Static(std::sync::Arc<sift::AnyFilter>),
}

impl crate::Frozen for FrozenSift {
    fn chunk_count(&self) -> u64 {
        2 + self.upload.len().div_ceil(DUMP_PIECE) as u64
    }

    /// The chunks of [`DataType::dump_chunk`] for a value with a filter.
    fn dump_chunk(&self, cursor: u64, out: &mut Vec<u8>) -> Option<(i64, u64)> {
        match cursor {
            0 => {
                out.extend_from_slice(&dump_header(true));
                Some((0, 1))
            }
            1 => {
                match &self.file {
                    FrozenFilter::File(file) => {
                        // Grown once here, not while a piece is read under a guard's lock.
                        out.reserve(usize::try_from(file.len()).ok()?);
                        file.write_to(&mut *out).ok()?;
                    }
                    FrozenFilter::Static(f) => f.write_to(&mut *out).ok()?,
                }
                Some((1, 2))
            }
            _ => {
                let (piece, data) = upload_piece(&self.upload, cursor)?;
                out.extend_from_slice(data);
                Some((2 + piece as i64, 3 + piece as u64))
            }
        }
    }

    /// The filter's file (gigabytes for a large filter): written in pieces as they are read
    /// from the copy-on-write guards, never built whole beside the filter.
    fn streamed_chunk(&self, cursor: u64) -> Option<(i64, u64, u64)> {
        match (&self.file, cursor) {
            (FrozenFilter::File(file), 1) => Some((1, 2, file.len())),
            _ => None,
        }
    }

    fn write_chunk(&self, cursor: u64, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match (&self.file, cursor) {
            (FrozenFilter::File(file), 1) => file.write_to(out),
            _ => Err(std::io::Error::other(format!("chunk {cursor} is not streamed"))),
        }
    }
}

/// `SF.LOADCHUNK` commands sending `bytes` in pieces of [`REWRITE_PIECE`], each with its
/// iterator (the piece's end offset plus one).
fn upload_pieces(key: &[u8], bytes: &[u8], emit: &mut dyn FnMut(&[&[u8]])) {
    let mut end = 0;
    for piece in bytes.chunks(REWRITE_PIECE) {
        end += piece.len();
        emit(&[b"SF.LOADCHUNK", key, (end + 1).to_string().as_bytes(), piece]);
    }
}

// ---------------------------------------------------------------------------------------------
// Errors.

/// SF.RESERVE: the capacity is outside [1, 2^40].
fn capacity_range() -> String {
    format!("ERR capacity must be in the range [1, {MAX_CAPACITY}]")
}
/// An unknown `KIND`.
const UNKNOWN_KIND: &str = "ERR unknown KIND (blocked, counting, cuckoo, quotient or aging)";
/// `KIND aging` without its window.
const AGING_NEEDS_WINDOW: &str = "ERR KIND aging needs WINDOW count or TTL seconds";
/// Both windows.
const WINDOW_AND_TTL: &str = "ERR WINDOW and TTL cannot be combined";
/// The longest `TTL`: ten years, in seconds.
pub const MAX_TTL: u64 = 10 * 366 * 86_400;
/// A bad `WINDOW`.
fn window_range() -> String {
    format!("ERR WINDOW must be in the range [1, {MAX_CAPACITY}]")
}
/// A bad `TTL`.
fn ttl_range() -> String {
    format!("ERR TTL must be in the range [1, {MAX_TTL}] seconds")
}
/// `WINDOW`/`TTL` on a kind that does not forget.
const WINDOW_NOT_AGING: &str = "ERR WINDOW and TTL apply to KIND aging only";
/// `FINGERPRINT` on a non-cuckoo kind.
const FINGERPRINT_NOT_CUCKOO: &str = "ERR FINGERPRINT applies to KIND cuckoo only";
/// A bad `FINGERPRINT`.
const BAD_FINGERPRINT: &str = "ERR FINGERPRINT must be 8, 12 or 16";
/// A bad `EXPANSION`.
fn bad_expansion() -> String {
    format!("ERR EXPANSION must be in the range [0, {MAX_EXPANSION}]")
}
/// `EXPANSION` on a kind that cannot grow.
fn expansion_kind(kind: ReserveKind) -> String {
    format!("ERR KIND {} cannot expand (EXPANSION applies to KIND blocked and cuckoo)", kind.keyword())
}
/// `FINGERPRINT` and `EXPANSION` together.
const FINGERPRINT_EXPANSION: &str =
    "ERR FINGERPRINT and EXPANSION cannot be combined: a growing cuckoo filter sizes its fingerprints from the error rate";
/// A key created by an unfinished `SF.LOADCHUNK` upload.
fn no_filter_yet(s: &SiftFilter) -> Frame {
    Frame::error(format!(
        "ERR no filter installed yet: an SF.LOADCHUNK upload is in progress ({} bytes received)",
        s.upload.len()
    ))
}

// ---------------------------------------------------------------------------------------------
// Parsing.

/// Parses `SF.RESERVE key error_rate capacity [options]`.
fn parse_reserve(argv: &[&[u8]]) -> Result<Spec, String> {
    let error_rate = parse_f64(argv[2]).ok_or(err::BF_BAD_ERROR_RATE)?;
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(err::BF_ERROR_RATE_RANGE.into());
    }
    let capacity = parse_i64(argv[3]).ok_or(err::BF_BAD_CAPACITY)?;
    let capacity =
        u64::try_from(capacity).ok().filter(|c| (1..=MAX_CAPACITY).contains(c)).ok_or_else(capacity_range)?;
    let mut kind = ReserveKind::Blocked;
    let (mut fingerprint, mut expansion, mut window, mut ttl) = (None, None, None, None);
    let mut i = 4;
    while i < argv.len() {
        let name = argv[i];
        let value = *argv.get(i + 1).ok_or_else(|| err::arity("sf.reserve"))?;
        if eq_ignore_case(name, "KIND") {
            kind = ReserveKind::parse(value).ok_or(UNKNOWN_KIND)?;
        } else if eq_ignore_case(name, "WINDOW") {
            let w = parse_i64(value).and_then(|w| u64::try_from(w).ok());
            window = Some(w.filter(|w| (1..=MAX_CAPACITY).contains(w)).ok_or_else(window_range)?);
        } else if eq_ignore_case(name, "TTL") {
            let t = parse_i64(value).and_then(|t| u64::try_from(t).ok());
            ttl = Some(t.filter(|t| (1..=MAX_TTL).contains(t)).ok_or_else(ttl_range)?);
        } else if eq_ignore_case(name, "FINGERPRINT") {
            let bits = parse_i64(value).filter(|b| matches!(b, 8 | 12 | 16)).ok_or(BAD_FINGERPRINT)?;
            fingerprint = Some(bits as u32);
        } else if eq_ignore_case(name, "EXPANSION") {
            let g = parse_i64(value).filter(|g| (0..=MAX_EXPANSION).contains(g)).ok_or_else(bad_expansion)?;
            expansion = Some(g as u32);
        } else {
            return Err(err::UNKNOWN_ARGUMENT.into());
        }
        i += 2;
    }
    if kind == ReserveKind::Aging {
        match (window, ttl) {
            (None, None) => return Err(AGING_NEEDS_WINDOW.into()),
            (Some(_), Some(_)) => return Err(WINDOW_AND_TTL.into()),
            _ => {}
        }
    } else if window.is_some() || ttl.is_some() {
        return Err(WINDOW_NOT_AGING.into());
    }
    if fingerprint.is_some() && kind != ReserveKind::Cuckoo {
        return Err(FINGERPRINT_NOT_CUCKOO.into());
    }
    let expansion = expansion.unwrap_or(0);
    if expansion > 0 && matches!(kind, ReserveKind::Counting | ReserveKind::Quotient | ReserveKind::Aging) {
        return Err(expansion_kind(kind));
    }
    if expansion > 0 && fingerprint.is_some() {
        return Err(FINGERPRINT_EXPANSION.into());
    }
    let ttl_ms = ttl.map(|t| t * 1000);
    Ok(Spec { kind, error_rate, capacity, fingerprint, expansion, window, ttl_ms })
}

/// Creates the filter of `spec`, refusing one larger than the memory budget up front.
fn create(spec: &Spec, env: &mut dyn Env) -> Result<Native, Frame> {
    if spec.estimated_bytes() > env.memory_budget() as f64 {
        return Err(Frame::error(err::INSUFFICIENT_MEMORY_CREATE));
    }
    spec.create().map_err(|e| Frame::error(format!("ERR could not create filter: {e}")))
}

// ---------------------------------------------------------------------------------------------
// Handlers.

/// `SF.RESERVE key error_rate capacity [KIND k] [FINGERPRINT f] [EXPANSION n]`: deterministic
/// (the library's constructors), so it is propagated as received.
fn reserve(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let spec = match parse_reserve(argv) {
        Ok(s) => s,
        Err(e) => return Frame::error(e),
    };
    match store.get::<SiftFilter>(argv[1]) {
        Lookup::Found(_) => return Frame::error(err::ITEM_EXISTS),
        Lookup::WrongType => return wrongtype(),
        Lookup::Missing => {}
    }
    match create(&spec, env) {
        Ok(f) => {
            store.insert(argv[1], SiftFilter::new(f));
            Frame::ok()
        }
        Err(f) => f,
    }
}

/// The filter at `key` for reading: `Ok(None)` when missing.
fn read<'s>(store: &'s mut dyn Store, key: &[u8]) -> Result<Option<&'s SiftFilter>, Frame> {
    match store.get::<SiftFilter>(key) {
        Lookup::Missing => Ok(None),
        Lookup::Found(s) => Ok(Some(s)),
        Lookup::WrongType => Err(wrongtype()),
    }
}

/// The filter at `argv[1]` for adding, created as `BF.ADD` creates one when missing (the
/// configured defaults, read only then), the creation propagated as an explicit `SF.RESERVE`
/// before the command.
fn for_add<'s>(store: &'s mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Result<&'s mut Native, Frame> {
    let key = argv[1];
    if !store.exists(key) {
        let d = env.defaults().bloom;
        let bad = || Frame::error(err::BF_COULD_NOT_CREATE);
        let spec = Spec {
            kind: ReserveKind::Blocked,
            error_rate: d.error_rate,
            capacity: u64::try_from(d.initial_size).map_err(|_| bad())?,
            fingerprint: None,
            expansion: u32::try_from(d.expansion.min(MAX_EXPANSION)).map_err(|_| bad())?,
            window: None,
            ttl_ms: None,
        };
        let f = create(&spec, env)?;
        let mut reserve = vec![
            b"SF.RESERVE".to_vec(),
            key.to_vec(),
            spec.error_rate.to_string().into_bytes(),
            spec.capacity.to_string().into_bytes(),
        ];
        if spec.expansion > 0 {
            reserve.extend([b"EXPANSION".to_vec(), spec.expansion.to_string().into_bytes()]);
        }
        env.propagate(vec![reserve, owned(argv)]);
        return Ok(store.insert(key, SiftFilter::new(f)).filter.as_mut().expect("just created"));
    }
    match store.get_mut::<SiftFilter>(key) {
        Lookup::Found(s) => match s.filter {
            Some(ref mut f) => Ok(f),
            None => Err(no_filter_yet(s)),
        },
        _ => Err(wrongtype()),
    }
}

/// The filter at `argv[1]` for deleting: `ERR not found` when missing.
fn for_del<'s>(store: &'s mut dyn Store, key: &[u8]) -> Result<&'s mut Native, Frame> {
    match store.get_mut::<SiftFilter>(key) {
        Lookup::Found(s) => match s.filter {
            Some(ref mut f) => Ok(f),
            None => Err(no_filter_yet(s)),
        },
        Lookup::Missing => Err(Frame::error(err::NOT_FOUND)),
        Lookup::WrongType => Err(wrongtype()),
    }
}

fn reply(r: Result<bool, String>) -> Frame {
    match r {
        Ok(b) => Frame::Boolean(b),
        Err(e) => Frame::error(e),
    }
}

/// `SF.ADD key item`: at the time of the request for a window by time, propagated as
/// `SF.MADDAT key <ms> item` so that replicas and the log apply the same time.
fn add(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match for_add(store, env, argv) {
        Ok(f) if f.is_timed() => {
            let now = env.now_ms();
            let r = reply(f.add(argv[2], now));
            env.propagate(vec![add_at(argv, now)]);
            r
        }
        Ok(f) => reply(f.add(argv[2], 0)),
        Err(e) => e,
    }
}

/// `SF.MADDAT key ms items` for the items of `argv` (`SF.ADD`/`SF.MADD key item ...`).
fn add_at(argv: &[&[u8]], ms: u64) -> Vec<Vec<u8>> {
    let mut c = vec![b"SF.MADDAT".to_vec(), argv[1].to_vec(), ms.to_string().into_bytes()];
    c.extend(owned(&argv[2..]));
    c
}

/// Adds `items` at `now`, one reply each; a static kind is refused as a whole.
fn add_many(f: &mut Native, items: &[&[u8]], now: u64) -> Frame {
    if f.is_static() {
        // A static kind refuses every item the same way: one error, not one per item.
        return reply(f.add(items[0], now));
    }
    Frame::Array(items.iter().map(|item| reply(f.add(item, now))).collect())
}

/// `SF.MADD key item [item ...]`: as `SF.ADD`, one reply per item.
fn madd(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match for_add(store, env, argv) {
        Ok(f) if f.is_timed() => {
            let now = env.now_ms();
            let r = add_many(f, &argv[2..], now);
            env.propagate(vec![add_at(argv, now)]);
            r
        }
        Ok(f) => add_many(f, &argv[2..], 0),
        Err(e) => e,
    }
}

/// `SF.MADDAT key ms item [item ...]`: adds at an explicit time (Unix ms): what `SF.ADD` and
/// `SF.MADD` on a window by time are propagated as. The key must exist.
fn maddat(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let Some(ms) = parse_i64(argv[2]).and_then(|v| u64::try_from(v).ok()) else {
        return Frame::error("ERR invalid time");
    };
    match for_del(store, argv[1]) {
        Ok(f) => add_many(f, &argv[3..], ms),
        Err(e) => e,
    }
}

/// The time a read of `f` answers at: the request's for a window by time, else unused (the
/// clock is not read on the common path).
fn now_for(f: &Native, env: &dyn Env) -> u64 {
    if f.is_timed() {
        env.now_ms()
    } else {
        0
    }
}

/// `SF.EXISTS key item`: 0 for a missing key.
fn exists(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match read(store, argv[1]) {
        Ok(s) => {
            let f = s.and_then(|s| s.filter.as_ref());
            Frame::Boolean(f.is_some_and(|f| f.contains(argv[2], now_for(f, env))))
        }
        Err(e) => e,
    }
}

/// `SF.MEXISTS key item [item ...]`.
fn mexists(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let items = &argv[2..];
    match read(store, argv[1]) {
        Ok(s) => {
            let found = match s.and_then(|s| s.filter.as_ref()) {
                Some(f) => f.contains_many(items, now_for(f, env)),
                None => vec![false; items.len()],
            };
            Frame::Array(found.into_iter().map(Frame::Boolean).collect())
        }
        Err(e) => e,
    }
}

/// `SF.CARD key`: 0 for a missing key.
fn card(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match read(store, argv[1]) {
        Ok(s) => {
            Frame::Integer(s.and_then(|s| s.filter.as_ref()).map_or(0, |f| f.len(now_for(f, env)) as i64))
        }
        Err(e) => e,
    }
}

/// `SF.DEL key item`.
fn del(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match for_del(store, argv[1]) {
        Ok(f) => reply(f.remove(argv[2])),
        Err(e) => e,
    }
}

/// `SF.MDEL key item [item ...]`: a kind that cannot delete is refused as a whole.
fn mdel(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    match for_del(store, argv[1]) {
        Ok(f) if !f.deletes() => reply(f.remove(argv[2])),
        Ok(f) => Frame::Array(argv[2..].iter().map(|i| reply(f.remove(i))).collect()),
        Err(e) => e,
    }
}

/// What `SF.INFO` reports, for any filter type.
struct Info {
    kind: String,
    capacity: u64,
    items: u64,
    bytes: u64,
    rate: Option<ErrorRate>,
    expansion: Option<u64>,
    window: Option<u64>,
    ttl: Option<u64>,
    age: Option<u64>,
}

impl Info {
    /// (request keyword, reply name, value).
    fn fields(self) -> Vec<(&'static str, &'static str, Frame)> {
        let int = |v: Option<u64>| v.map_or(Frame::Null, |v| Frame::Integer(v.min(i64::MAX as u64) as i64));
        let target = self.rate.and_then(|r| r.target).map_or(Frame::Null, Frame::Double);
        let estimate = self.rate.map_or(Frame::Null, |r| Frame::Double(r.estimate));
        vec![
            ("kind", "Kind", Frame::Bulk(self.kind.into_bytes().into())),
            ("capacity", "Capacity", int(Some(self.capacity))),
            ("items", "Items", int(Some(self.items))),
            ("bytes", "Bytes", int(Some(self.bytes))),
            ("target", "Target error rate", target),
            ("estimate", "Estimated error rate", estimate),
            ("expansion", "Expansion", int(self.expansion)),
            ("window", "Window", int(self.window)),
            ("ttl", "TTL", int(self.ttl)),
            ("age", "Oldest slice age", int(self.age)),
        ]
    }
}

/// What `SF.INFO` reports of the value `d`, or `None` for a type it does not describe.
fn info_of(d: &dyn Data, now: u64) -> Option<Result<Info, Frame>> {
    if let Some(s) = d.downcast_ref::<SiftFilter>() {
        let Some(f) = &s.filter else { return Some(Err(no_filter_yet(s))) };
        return Some(Ok(Info {
            kind: f.kind().to_string(),
            capacity: f.capacity(),
            items: f.len(now),
            bytes: f.size_in_bytes(),
            rate: Some(ErrorRate { target: Some(f.target()), estimate: f.estimate(now) }),
            expansion: f.expansion(),
            window: f.window(),
            ttl: f.ttl_seconds(),
            age: f.oldest_slice_age(now),
        }));
    }
    if let Some(c) = d.downcast_ref::<BloomChain>() {
        let i = c.info();
        return Some(Ok(Info {
            kind: FilterKind::RedisBloomChain.to_string(),
            capacity: i.capacity,
            items: i.items,
            bytes: i.size,
            rate: d.error_rate(),
            expansion: i.expansion.map(u64::from),
            window: None,
            ttl: None,
            age: None,
        }));
    }
    if let Some(c) = d.downcast_ref::<CuckooFilter>() {
        let i = c.info();
        return Some(Ok(Info {
            kind: FilterKind::RedisBloomCuckoo.to_string(),
            capacity: c.filters().iter().map(|f| f.slots().len() as u64).sum(),
            items: i.items,
            bytes: i.size,
            rate: d.error_rate(),
            expansion: Some(u64::from(i.expansion)),
            window: None,
            ttl: None,
            age: None,
        }));
    }
    None
}

/// `SF.INFO key [field]`: for `sift-filt`, `BF` and `CF` keys. RESP2 `*1 [value]` / RESP3
/// `%1 {name: value}` for one field, as `BF.INFO`.
fn info(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() > 3 {
        return Frame::error(err::arity("sf.info"));
    }
    let now = env.now_ms();
    let info = match store.read(argv[1]) {
        Held::Missing => return Frame::error(err::NOT_FOUND),
        Held::Other => return wrongtype(),
        Held::Data(d) => match info_of(d, now) {
            Some(Ok(i)) => i,
            Some(Err(e)) => return e,
            None => return wrongtype(),
        },
    };
    let fields = info.fields();
    let Some(wanted) = argv.get(2) else {
        return Frame::Map(fields.into_iter().map(|(_, n, v)| (Frame::Simple(n.into()), v)).collect());
    };
    match fields.into_iter().find(|(k, _, _)| eq_ignore_case(wanted, k)) {
        Some((_, name, value)) if env.protocol() >= 3 => {
            Frame::Map(vec![(Frame::Simple(name.into()), value)])
        }
        Some((_, _, value)) => Frame::Array(vec![value]),
        None => Frame::error(err::BF_INVALID_INFO),
    }
}

/// A decoded sift file, as `SF.LOAD` installs it.
enum Loaded {
    Native(Box<Native>),
    Bloom(BloomChain),
    Cuckoo(CuckooFilter),
}

/// `SF.LOAD` of bytes without the SIFT magic: the formats `sift convert` reads without one.
pub const NOT_A_SIFT_FILE: &str = "ERR bad sift file: no SIFT magic. Convert a Guava BloomFilter.writeTo stream, a Parquet split-block bitset, RedisBloom SCANDUMP chunks or a Redis RDB file to a sift file first: `sift convert --from guava filter.bin -o filter.sift` (`--from parquet` for Parquet; the others are detected: `sift convert IN -o filter.sift`), then SF.LOAD the sift file";

fn decode(file: &[u8]) -> Result<Loaded, Frame> {
    let bad = |e: String| Frame::error(format!("ERR bad sift file: {e}"));
    if !file.starts_with(&MAGIC) {
        return Err(Frame::error(NOT_A_SIFT_FILE));
    }
    let kind = sift::format::decode(file).map_err(|e| bad(e.to_string()))?.kind();
    Ok(match kind {
        Some(FilterKind::RedisBloomChain) => {
            Loaded::Bloom(BloomChain::from_bytes(file).map_err(|e| bad(e.to_string()))?)
        }
        Some(FilterKind::RedisBloomCuckoo) => {
            Loaded::Cuckoo(CuckooFilter::from_bytes(file).map_err(|e| bad(e.to_string()))?)
        }
        _ => Loaded::Native(Box::new(Native::from_bytes(file).map_err(bad)?)),
    })
}

/// Replaces the value at `key` with `new`, in place when the key holds the same type (its time
/// to live stays), created when missing; another type is WRONGTYPE. One store operation:
/// readers see the old filter or the new one.
fn install(store: &mut dyn Store, key: &[u8], new: Loaded) -> Frame {
    fn put<T: DataType>(store: &mut dyn Store, key: &[u8], v: T) -> Frame {
        match store.get_mut::<T>(key) {
            Lookup::Found(old) => *old = v,
            Lookup::Missing => {
                store.insert(key, v);
            }
            Lookup::WrongType => return wrongtype(),
        }
        Frame::ok()
    }
    match new {
        Loaded::Native(f) => match store.get_mut::<SiftFilter>(key) {
            Lookup::Found(old) => {
                old.filter = Some(*f);
                old.upload = Vec::new();
                Frame::ok()
            }
            Lookup::Missing => {
                store.insert(key, SiftFilter::new(*f));
                Frame::ok()
            }
            Lookup::WrongType => wrongtype(),
        },
        Loaded::Bloom(c) => put(store, key, c),
        Loaded::Cuckoo(c) => put(store, key, c),
    }
}

/// Is `key` free for a value of type `T` (missing, or a `T`)?
fn type_fits<T: DataType>(store: &mut dyn Store, key: &[u8]) -> bool {
    !matches!(store.get::<T>(key), Lookup::WrongType)
}

/// `SF.LOAD key file`: installs the sift file's filter at `key`, replacing what it held (a
/// native kind into a `sift-filt` key, a RedisBloom chain or cuckoo filter into a `BF`/`CF`
/// key). A corrupt or foreign file, or a key of another type, changes nothing.
fn load(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let file = argv[2];
    if file.len() as u64 > env.memory_budget() {
        return Frame::error(err::INSUFFICIENT_MEMORY_CREATE);
    }
    let new = match decode(file) {
        Ok(n) => n,
        Err(e) => return e,
    };
    let fits = match new {
        Loaded::Native(_) => type_fits::<SiftFilter>(store, argv[1]),
        Loaded::Bloom(_) => type_fits::<BloomChain>(store, argv[1]),
        Loaded::Cuckoo(_) => type_fits::<CuckooFilter>(store, argv[1]),
    };
    if !fits {
        return wrongtype();
    }
    install(store, argv[1], new)
}

/// The length of the sift file whose header starts `head` (at least [`HEADER_LEN`] bytes).
fn file_len(head: &[u8]) -> Result<u64, String> {
    let raw = |at: usize, n: usize| &head[at..at + n];
    if head.len() < HEADER_LEN || raw(0, 4) != MAGIC {
        return Err("the first piece must start with the 32-byte sift header".into());
    }
    if u16::from_le_bytes(raw(4, 2).try_into().expect("2 bytes")) != VERSION {
        return Err("unsupported sift format version".into());
    }
    let params = u64::from(u32::from_le_bytes(raw(12, 4).try_into().expect("4 bytes")));
    let payload = u64::from_le_bytes(raw(24, 8).try_into().expect("8 bytes"));
    (HEADER_LEN as u64 + ((params + 7) & !7))
        .checked_add(payload)
        .and_then(|n| n.checked_add(TRAILER_LEN as u64))
        .ok_or_else(|| "payload length overflows".into())
}

/// The byte offset of the first byte of `piece`, sent with iterator `it` in BF.SCANDUMP's
/// convention (the iterator that comes with a piece addresses the byte just past it, plus one:
/// the piece covers bytes `it - 1 - len .. it - 1`).
fn piece_start(it: i64, piece: &[u8]) -> Option<u64> {
    let start = it.checked_sub(piece.len() as i64)?.checked_sub(1)?;
    u64::try_from(start).ok()
}

/// `SF.LOADCHUNK key iterator bytes`: a sift file sent in pieces, each with the iterator
/// `SF.DUMP` returned with it (BF.SCANDUMP's convention: one past the piece's last byte, plus one,
/// so the piece starts at byte `iterator - 1 - len`). Pieces come in order, each starting where
/// the previous one ended; the first piece (starting at byte 0) starts over. Replies the bytes
/// still expected; with the last piece the file is checked and its filter swapped in (reply 0),
/// or, corrupt, dropped with an error, the installed filter unchanged and a key the upload
/// created deleted. Until then the key serves its old filter.
fn loadchunk(store: &mut dyn Store, env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    let piece = argv[3];
    let Some(offset) = parse_i64(argv[2]).and_then(|it| piece_start(it, piece)) else {
        return Frame::error(
            "ERR bad iterator: SF.LOADCHUNK takes each piece with the iterator SF.DUMP returned with it (the piece's end offset plus one)",
        );
    };
    let key = argv[1];
    let received = match read(store, key) {
        Ok(s) => s.map_or(0, |s| s.upload.len() as u64),
        Err(e) => return e,
    };
    if offset != 0 && offset != received {
        return Frame::error(if received == 0 {
            format!("ERR SF.LOADCHUNK expects the first piece (no upload in progress), got one starting at byte {offset}")
        } else {
            format!(
                "ERR SF.LOADCHUNK expects the piece starting at byte {received} (or the first piece, to start over), got one starting at byte {offset}"
            )
        });
    }
    let head: Vec<u8> = if offset == 0 {
        piece.get(..HEADER_LEN).unwrap_or(piece).to_vec()
    } else {
        let s = read(store, key).ok().flatten().expect("checked above");
        s.upload[..HEADER_LEN].to_vec()
    };
    let total = match file_len(&head) {
        Ok(t) => t,
        Err(e) => return Frame::error(format!("ERR bad sift file: {e}")),
    };
    if matches!(
        sift::format::FilterKind::from_code(u16::from_le_bytes([head[6], head[7]])),
        Some(FilterKind::RedisBloomChain | FilterKind::RedisBloomCuckoo)
    ) {
        return Frame::error("ERR SF.LOADCHUNK takes native kinds; send RedisBloom files with SF.LOAD");
    }
    if total > env.memory_budget() {
        return Frame::error(err::INSUFFICIENT_MEMORY_CREATE);
    }
    let end = offset + piece.len() as u64;
    if end > total {
        return Frame::error(format!("ERR the piece ends at byte {end}, past the file's {total} bytes"));
    }
    if end == total {
        // Complete: decode the whole file, then swap it in, or drop the upload.
        // Whatever was uploaded before is used (offset > 0) or superseded (offset 0).
        let (mut file, installed) = match store.get_mut::<SiftFilter>(key) {
            Lookup::Found(s) => (std::mem::take(&mut s.upload), s.filter.is_some()),
            _ => (Vec::new(), true),
        };
        if offset == 0 {
            file.clear();
        }
        file.extend_from_slice(piece);
        return match Native::from_bytes(&file) {
            Ok(f) => {
                install(store, key, Loaded::Native(Box::new(f)));
                Frame::Integer(0)
            }
            Err(e) => {
                if !installed {
                    // The key exists only for this upload: a failed load leaves no key behind.
                    store.delete(key);
                }
                Frame::error(format!("ERR bad sift file: {e}; the upload was dropped"))
            }
        };
    }
    if store.get::<SiftFilter>(key).is_missing() {
        store.insert(key, SiftFilter::default());
    }
    let Lookup::Found(s) = store.get_mut::<SiftFilter>(key) else { unreachable!("read above") };
    if offset == 0 {
        s.upload.clear();
    }
    s.upload.extend_from_slice(piece);
    Frame::Integer((total - end) as i64)
}

/// `SF.DUMP key`: the sift file of the filter (of a `BF`/`CF` key too), whole, when it fits in
/// one piece of 16 MiB; larger files are read with the iterator form.
///
/// `SF.DUMP key iterator`: the file in pieces, in BF.SCANDUMP's convention: iterator 0 starts,
/// each reply is `[next, piece]` where `next` is one past the piece's last byte, plus one (what
/// `SF.LOADCHUNK` takes with the piece, and the iterator of the next call), and `[0, ""]` ends.
/// A piece is 16 MiB at most; serving one never copies the whole file (the filter streams its
/// file up to the end of the piece).
fn dump(store: &mut dyn Store, _env: &mut dyn Env, argv: &[&[u8]]) -> Frame {
    if argv.len() > 3 {
        return Frame::error(err::arity("sf.dump"));
    }
    let (from, limit) = match argv.get(2) {
        None => (0, DUMP_PIECE),
        Some(it) => match parse_i64(it) {
            Some(0) => (0, DUMP_PIECE),
            Some(it) if it > 0 => (usize::try_from(it - 1).unwrap_or(usize::MAX), DUMP_PIECE),
            Some(_) => return Frame::Array(vec![Frame::Integer(0), Frame::Bulk(Default::default())]),
            None => return Frame::error("ERR the iterator must be an integer"),
        },
    };
    let piece = match store.read(argv[1]) {
        Held::Missing => return Frame::error(err::NOT_FOUND),
        Held::Other => return wrongtype(),
        Held::Data(d) => {
            if let Some(s) = d.downcast_ref::<SiftFilter>() {
                match &s.filter {
                    Some(f) => f.file_piece(from, limit),
                    None => return no_filter_yet(s),
                }
            } else if let Some(c) = d.downcast_ref::<BloomChain>() {
                filter::file_piece(c, from, limit)
            } else if let Some(c) = d.downcast_ref::<CuckooFilter>() {
                filter::file_piece(c, from, limit)
            } else {
                return wrongtype();
            }
        }
    };
    if argv.len() == 2 {
        return if piece.more {
            Frame::error(format!(
                "ERR the sift file is larger than one piece of {DUMP_PIECE} bytes: read it with SF.DUMP key <iterator> (0 first, then each reply's iterator until it is 0), and load it with SF.LOADCHUNK key <iterator> <piece>"
            ))
        } else {
            Frame::Bulk(piece.bytes.into())
        };
    }
    if piece.bytes.is_empty() {
        return Frame::Array(vec![Frame::Integer(0), Frame::Bulk(Default::default())]);
    }
    let next = from as i64 + piece.bytes.len() as i64 + 1;
    Frame::Array(vec![Frame::Integer(next), Frame::Bulk(piece.bytes.into())])
}

// ---------------------------------------------------------------------------------------------
// The family.

/// The `sf` family: sift's own filters (`sift-filt`) and the commands on them.
#[derive(Debug)]
pub struct Sift;

const WRITE: Flags = Flags::WRITE.with(Flags::DENYOOM);
const READ: Flags = Flags::READONLY.with(Flags::FAST);

const fn command(
    name: &'static str,
    arity: i32,
    flags: Flags,
    acl: &'static [&'static str],
    handler: crate::Handler,
    summary: &'static str,
) -> Command {
    Command { name, arity, flags, acl, keys: KEY1, summary, handler }
}

impl Family for Sift {
    const NAME: &'static str = "sf";
    type Type = SiftFilter;
    const COMMANDS: &'static [Command] = &[
        command(
            "sf.reserve",
            -4,
            WRITE,
            &["@write", "@fast", "@bloom"],
            reserve,
            "Creates a sift filter of a chosen kind",
        ),
        command("sf.add", 3, WRITE, &["@write", "@bloom"], add, "Adds an item to a sift filter"),
        command("sf.madd", -3, WRITE, &["@write", "@bloom"], madd, "Adds one or more items to a sift filter"),
        command(
            "sf.maddat",
            -4,
            WRITE,
            &["@write", "@bloom"],
            maddat,
            "Adds items at an explicit time (what SF.ADD on a window by time is propagated as)",
        ),
        command(
            "sf.exists",
            3,
            READ,
            &["@read", "@bloom"],
            exists,
            "Checks whether an item may be in a sift filter",
        ),
        command(
            "sf.mexists",
            -3,
            READ,
            &["@read", "@bloom"],
            mexists,
            "Checks whether one or more items may be in a sift filter",
        ),
        command("sf.card", 2, READ, &["@read", "@fast", "@bloom"], card, "Returns the number of items"),
        command(
            "sf.del",
            3,
            Flags::WRITE.with(Flags::FAST),
            &["@write", "@fast", "@bloom"],
            del,
            "Deletes an item from a counting, cuckoo or quotient sift filter",
        ),
        command(
            "sf.mdel",
            -3,
            Flags::WRITE,
            &["@write", "@bloom"],
            mdel,
            "Deletes items from a counting, cuckoo or quotient sift filter",
        ),
        command(
            "sf.info",
            -2,
            READ,
            &["@read", "@fast", "@bloom"],
            info,
            "Returns the kind, size and error rates (target and estimated now) of a filter",
        ),
        command(
            "sf.load",
            3,
            WRITE,
            &["@write", "@bloom"],
            load,
            "Replaces a key with the filter of a sift file",
        ),
        command(
            "sf.loadchunk",
            4,
            WRITE,
            &["@write", "@bloom"],
            loadchunk,
            "Loads a sift file in pieces, replacing the key's filter with the last one",
        ),
        command("sf.dump", -2, READ, &["@read", "@bloom"], dump, "Returns the sift file of a filter"),
    ];
}

#[cfg(test)]
mod tests;
