//! What the three sketch types (`CMSk-TYPE`, `TopK-TYPE`, `TDIS-TYPE`) share: their dump is their
//! RDB encoding, and their AOF rewrite is a `RESTORE` of it (sketches spec §10.6).

use std::borrow::Cow;
use std::ops::Range;

use sift::compat::redisbloom::rdb::{
    crc64, module_type_id, write_length, FieldReader, FieldWriter, ModuleFieldReader, ModuleFieldWriter,
    RdbCursor, RdbError, OPCODE_EOF, RDB_VERSION,
};
use sift::compat::redisbloom::{LoadLimits, MAX_CHUNK};

use crate::{Chunk, LoadContext};

/// The module fields of `save`, as RDB bytes.
pub(crate) fn fields<T: ?Sized>(value: &T, save: impl Fn(&T, &mut dyn FieldWriter)) -> Vec<u8> {
    let mut out = Vec::new();
    save(value, &mut ModuleFieldWriter { out: &mut out });
    out
}

/// The dump of a sketch: one chunk (the header), its RDB module fields. A sketch is one
/// allocation that RedisBloom's RDB encoding already stores in a few strings.
pub(crate) fn dump_chunk<T: ?Sized>(
    value: &T,
    cursor: u64,
    save: impl Fn(&T, &mut dyn FieldWriter),
) -> Option<(Chunk<'static>, u64)> {
    (cursor == 0).then(|| (Chunk { pos: 0, data: Cow::Owned(fields(value, save)) }, 1))
}

/// The inverse of [`dump_chunk`]: the fields must be exactly the value's.
pub(crate) fn restore<T>(
    header: &[u8],
    cx: &LoadContext,
    encver: u32,
    load: impl FnOnce(&mut dyn FieldReader, u32, &LoadLimits) -> Result<T, RdbError>,
) -> Result<T, String> {
    let mut cur = RdbCursor::new(header);
    let mut r = ModuleFieldReader { cur: &mut cur, max_string: cx.limits.max_bytes };
    let v = load(&mut r, encver, &cx.limits).map_err(|e| e.to_string())?;
    if cur.remaining() != 0 {
        return Err(format!("{} bytes after the value's fields", cur.remaining()));
    }
    Ok(v)
}

/// `RESTORE key 0 <payload>` of a value of module type `name` whose fields `save` writes: the
/// AOF rewrite of the three sketch types (spec §10.6). Unlike RedisBloom, whose rewrite looks the
/// key up in database 0 and so drops or swaps keys of other databases, this is the value itself.
pub(crate) fn restore_command<T: ?Sized>(
    value: &T,
    key: &[u8],
    name: &str,
    encver: u32,
    save: impl Fn(&T, &mut dyn FieldWriter),
    emit: &mut dyn FnMut(&[&[u8]]),
) {
    let mut payload = vec![7u8]; // RDB_TYPE_MODULE_2
    write_length(&mut payload, module_type_id(name, encver).expect("a registered type name"));
    save(value, &mut ModuleFieldWriter { out: &mut payload });
    write_length(&mut payload, OPCODE_EOF);
    payload.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &payload);
    payload.extend_from_slice(&crc.to_le_bytes());
    emit(&[b"RESTORE", key, b"0", &payload]);
}

/// `impl DataType` for a sketch: RedisBloom's type name, encver 0, a snapshot tag, RedisBloom's
/// memory callback (`memory_usage`), and its RDB fields (`save` / `load`) as the RDB encoding and
/// the `RESTORE` of the AOF rewrite. The dump is one chunk, the RDB fields, unless the `chunks:`
/// form gives `dump_chunk`, `restore` and `load_chunk` (a sketch that can be large).
macro_rules! sketch_data_type {
    ($ty:ty, $name:expr, $tag:expr, $save:path, $load:path, $what:literal) => {
        $crate::sketch::sketch_data_type!($ty, $name, $tag, $save, $load, $what, {});
    };
    // `$extra`: further items of the impl (the t-digest's `before_save`).
    ($ty:ty, $name:expr, $tag:expr, $save:path, $load:path, $what:literal, { $($extra:tt)* }) => {
        $crate::sketch::sketch_data_type!(chunks: $ty, $name, $tag, $save, $load, {
            fn dump_chunk(&self, cursor: u64) -> Option<($crate::Chunk<'_>, u64)> {
                $crate::sketch::dump_chunk(self, cursor, |v, w| $save(v, w))
            }

            fn restore(header: &[u8], cx: &$crate::LoadContext) -> Result<Self, String> {
                $crate::sketch::restore(header, cx, Self::ENCVER, |r, e, l| $load(r, e, l))
            }

            fn load_chunk(&mut self, pos: i64, _data: &[u8]) -> Result<(), String> {
                Err(format!(concat!("a ", $what, " dump has one chunk (found one at {})"), pos))
            }
        }, { $($extra)* });
    };
    // `$dump`: the type's own `dump_chunk`, `restore` and `load_chunk`.
    (chunks: $ty:ty, $name:expr, $tag:expr, $save:path, $load:path, { $($dump:tt)* }, { $($extra:tt)* }) => {
        impl $crate::DataType for $ty {
            $($dump)*

            $($extra)*

            const NAME: &'static str = $name;
            const ENCVER: u32 = sift::compat::redisbloom::rdb::SKETCH_ENCVER;
            const TAG: u8 = $tag;

            fn mem_usage(&self) -> usize {
                self.memory_usage() as usize
            }

            fn rdb_save(&self, w: &mut dyn sift::compat::redisbloom::rdb::FieldWriter) {
                $save(self, w)
            }

            fn rdb_load(
                r: &mut dyn sift::compat::redisbloom::rdb::FieldReader,
                encver: u32,
                cx: &$crate::LoadContext,
            ) -> Result<Self, sift::compat::redisbloom::rdb::RdbError> {
                $load(r, encver, &cx.limits)
            }

            fn rewrite(&self, key: &[u8], emit: &mut dyn FnMut(&[&[u8]])) {
                $crate::sketch::restore_command(self, key, Self::NAME, Self::ENCVER, |v, w| $save(v, w), emit)
            }
        }
    };
}
pub(crate) use sketch_data_type;

/// The byte range of the piece of a large array (a Count-Min Sketch's counters, a Top-K's
/// buckets) that the dump chunk at `cursor` ≥ 1 holds: byte `cursor - 1` on, at most
/// [`MAX_CHUNK`] bytes; and the cursor after it, which is also the chunk's `pos`. `None` past
/// the last. [`MAX_CHUNK`] is a multiple of every element size, so pieces hold whole elements.
pub(crate) fn piece_chunk(len: usize, cursor: u64) -> Option<(Range<usize>, u64)> {
    let at = usize::try_from(cursor.checked_sub(1)?).ok()?;
    if at >= len {
        return None;
    }
    let end = len.min(at + MAX_CHUNK);
    Some((at..end, cursor + (end - at) as u64))
}

/// Where a piece of `len` bytes loaded with `pos` starts (the inverse of [`piece_chunk`]'s
/// `pos`: the position after it, plus 1).
pub(crate) fn piece_start(pos: i64, len: usize) -> Result<u64, String> {
    u64::try_from(pos)
        .ok()
        .and_then(|p| p.checked_sub(1))
        .and_then(|end| end.checked_sub(len as u64))
        .ok_or_else(|| format!("a chunk of {len} bytes cannot end at {pos}"))
}

/// A double argument as current Redis parses it (spec §2.5).
pub(crate) use crate::parse::parse_f64 as double;
/// An integer argument (Redis's strict parser).
pub(crate) use crate::parse::parse_i64 as int;

#[cfg(test)]
mod tests {
    use sift::compat::redisbloom::rdb::{restore_payload, save_cms, RdbValue, CMS_TYPE_NAME, SKETCH_ENCVER};
    use sift::compat::redisbloom::CountMinSketch;

    use super::*;

    #[test]
    fn the_rewrite_is_a_restorable_dump() {
        let mut c = CountMinSketch::init_by_dim(5, 3, 1 << 20).unwrap();
        c.incr_by(b"x", 7);
        let mut cmds = Vec::new();
        restore_command(&c, b"k", CMS_TYPE_NAME, SKETCH_ENCVER, |c, w| save_cms(c, w), &mut |a| {
            cmds.push(a.iter().map(|x| x.to_vec()).collect::<Vec<_>>())
        });
        assert_eq!(cmds.len(), 1);
        assert_eq!(&cmds[0][..3], &[b"RESTORE".to_vec(), b"k".to_vec(), b"0".to_vec()]);
        assert_eq!(restore_payload(&cmds[0][3]), Ok(RdbValue::Cms(c.clone())));
        let header = fields(&c, |c, w| save_cms(c, w));
        let back = restore(&header, &LoadContext::default(), 0, |r, e, l| {
            sift::compat::redisbloom::rdb::load_cms(r, e, l)
        });
        assert_eq!(back.as_ref(), Ok(&c));
        let mut long = header.clone();
        long.push(0);
        assert!(restore(&long, &LoadContext::default(), 0, |r, e, l| {
            sift::compat::redisbloom::rdb::load_cms(r, e, l)
        })
        .is_err());
    }
}
