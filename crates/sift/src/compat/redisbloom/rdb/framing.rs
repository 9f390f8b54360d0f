//! Redis's byte-level RDB framing (spec §12.2, §12.5): length encoding, strings (plain, integer,
//! LZF), CRC64, module values, `DUMP` payloads and whole RDB files.
//!
//! Byte order differs by field, as in Redis: lengths are big-endian, integer strings, doubles,
//! expiry times and the CRC64 little-endian.
//!
//! What the file reader does with keys of other Redis types: plain strings (type 0) are decoded
//! to [`RdbValue::String`]; the five RedisBloom module types to their structures; the types whose layout is a sequence of lengths and strings (lists,
//! sets, hashes, sorted sets, and their ziplist / listpack / intset / quicklist encodings) and the
//! values of other modules are stepped over and kept verbatim as [`RdbValue::Other`], so a tool
//! can count or copy them. Streams (types 15, 19, 21), the pre-release module format (6) and types
//! newer than 21 are refused with [`RdbError::UnsupportedType`] naming the key. With
//! [`ReadOptions::skip_other_types`] off, every type but strings and the RedisBloom types is
//! refused that way.

use super::{
    load_bloom, load_cms, load_cuckoo, load_tdigest, load_topk, module_type_id, module_type_name, save_bloom,
    save_cms, save_cuckoo, save_tdigest, save_topk, CuckooRdbDefaults, FieldReader, FieldWriter, RdbError,
    BLOOM_TYPE_NAME, CMS_TYPE_NAME, CUCKOO_TYPE_NAME, ENCVER, SKETCH_ENCVER, TDIGEST_TYPE_NAME,
    TOPK_TYPE_NAME,
};
use crate::compat::redisbloom::{BloomChain, CountMinSketch, CuckooFilter, LoadLimits, TDigest, TopK};

/// Module field opcode: end of the value (`RDB_MODULE_OPCODE_EOF`).
pub const OPCODE_EOF: u64 = 0;
/// Module field opcode: `SaveSigned`.
pub const OPCODE_SINT: u64 = 1;
/// Module field opcode: `SaveUnsigned`.
pub const OPCODE_UINT: u64 = 2;
/// Module field opcode: `SaveFloat`.
pub const OPCODE_FLOAT: u64 = 3;
/// Module field opcode: `SaveDouble`.
pub const OPCODE_DOUBLE: u64 = 4;
/// Module field opcode: `SaveStringBuffer`.
pub const OPCODE_STRING: u64 = 5;

/// Value type byte of a plain string.
pub const TYPE_STRING: u8 = 0;
/// Value type byte of the pre-release module format (no opcodes): always refused.
pub const TYPE_MODULE_PRE: u8 = 6;
/// Value type byte of a module value (`RDB_TYPE_MODULE_2`).
pub const TYPE_MODULE: u8 = 7;

/// The RDB version this writer puts in files and `DUMP` payloads: 10, Redis 7.0's, which every
/// Redis from 7.0 on loads.
pub const RDB_VERSION: u16 = 10;
/// The newest RDB version the readers accept (Redis 7.4 and 8.x write 12). Module values are
/// encoded the same way in versions 10 to 12.
pub const RDB_VERSION_MAX: u16 = 12;

const OP_FUNCTION_PRE: u8 = 0xF6;
const OP_FUNCTION: u8 = 0xF5;
const OP_MODULE_AUX: u8 = 0xF7;
const OP_IDLE: u8 = 0xF8;
const OP_FREQ: u8 = 0xF9;
const OP_AUX: u8 = 0xFA;
const OP_RESIZEDB: u8 = 0xFB;
const OP_EXPIRETIME_MS: u8 = 0xFC;
const OP_EXPIRETIME: u8 = 0xFD;
const OP_SELECTDB: u8 = 0xFE;
const OP_EOF: u8 = 0xFF;

// ---------------------------------------------------------------------------------------------
// CRC64 (Jones)

/// The reflected form of the Jones polynomial `0xad93d23594c935a9`.
const CRC64_POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const fn crc64_table() -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ CRC64_POLY_REFLECTED } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC64_TABLE: [u64; 256] = crc64_table();

/// Redis's CRC64 (Jones polynomial, reflected, no final XOR), continuing from `crc` (start with
/// 0).
///
/// ```
/// assert_eq!(sift::compat::redisbloom::rdb::crc64(0, b"123456789"), 0xe9c6d914c4b8d9ca);
/// ```
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    data.iter().fold(crc, |c, &b| CRC64_TABLE[((c ^ b as u64) & 0xff) as usize] ^ (c >> 8))
}

// ---------------------------------------------------------------------------------------------
// LZF

/// The most output one byte of LZF input can produce: a back-reference of 3 bytes copies at most
/// 7 + 255 + 2 = 264 bytes.
const LZF_MAX_RATIO: u64 = 88;

/// Decompresses LZF data (§12.2) that must expand to exactly `ulen` bytes.
pub fn lzf_decompress(input: &[u8], ulen: usize) -> Result<Vec<u8>, RdbError> {
    let bad = |what: &str| RdbError::Format(format!("corrupt LZF data: {what}"));
    if ulen as u64 > (input.len() as u64).saturating_mul(LZF_MAX_RATIO) {
        return Err(bad("declared length larger than the data can expand to"));
    }
    let mut out = Vec::with_capacity(ulen);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            let lit = input.get(i..i + n).ok_or_else(|| bad("literal run past the end of the input"))?;
            if out.len() + n > ulen {
                return Err(bad("output longer than declared"));
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i).ok_or_else(|| bad("back-reference past the end of the input"))? as usize;
                i += 1;
            }
            let low = *input.get(i).ok_or_else(|| bad("back-reference past the end of the input"))? as usize;
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            if back > out.len() {
                return Err(bad("back-reference before the start of the output"));
            }
            let len = len + 2;
            if out.len() + len > ulen {
                return Err(bad("output longer than declared"));
            }
            let start = out.len() - back;
            // Byte by byte: the source may overlap the bytes being written.
            for k in start..start + len {
                let b = out[k];
                out.push(b);
            }
        }
    }
    if out.len() != ulen {
        return Err(bad("output shorter than declared"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Writing primitives

/// Appends `v` in the shortest RDB length encoding.
pub fn write_length(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&[0x40 | (v >> 8) as u8, v as u8]);
    } else if v <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(v as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// The integer a string is the canonical decimal text of, if it has at most 11 bytes and fits in
/// 32 bits: the strings Redis stores in the integer forms.
fn as_small_int(s: &[u8]) -> Option<i32> {
    if s.is_empty() || s.len() > 11 {
        return None;
    }
    let v: i64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    // Canonical: no '+', no leading zeros, no "-0".
    if v.to_string().as_bytes() != s {
        return None;
    }
    i32::try_from(v).ok()
}

/// Appends an RDB string: the integer forms for the canonical decimal text of an integer that
/// fits in 32 bits (as Redis writes them), otherwise a length and the bytes. Nothing is
/// LZF-compressed (a reader accepts both).
pub fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    match as_small_int(s) {
        Some(v) if i8::try_from(v).is_ok() => out.extend_from_slice(&[0xC0, v as i8 as u8]),
        Some(v) if i16::try_from(v).is_ok() => {
            out.push(0xC1);
            out.extend_from_slice(&(v as i16).to_le_bytes());
        }
        Some(v) => {
            out.push(0xC2);
            out.extend_from_slice(&v.to_le_bytes());
        }
        None => {
            write_length(out, s.len() as u64);
            out.extend_from_slice(s);
        }
    }
}

/// A [`FieldWriter`] that appends module fields (opcode + payload, §12.2) to a byte buffer.
#[derive(Debug)]
pub struct ModuleFieldWriter<'o> {
    /// The buffer written to.
    pub out: &'o mut Vec<u8>,
}

impl FieldWriter for ModuleFieldWriter<'_> {
    fn save_unsigned(&mut self, v: u64) {
        write_length(self.out, OPCODE_UINT);
        write_length(self.out, v);
    }
    fn save_double(&mut self, v: f64) {
        write_length(self.out, OPCODE_DOUBLE);
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    fn save_string(&mut self, bytes: &[u8]) {
        write_length(self.out, OPCODE_STRING);
        write_string(self.out, bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// Reading primitives

/// A position in RDB bytes, with the reading primitives. Every read checks the remaining length
/// first: a short input is [`RdbError::Truncated`], never a panic.
#[derive(Debug, Clone)]
pub struct RdbCursor<'a> {
    data: &'a [u8],
    pos: usize,
}

/// A length or, for strings, a special encoding (`11xxxxxx`).
enum Len {
    Plain(u64),
    Special(u8),
}

impl<'a> RdbCursor<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        RdbCursor { data, pos: 0 }
    }
    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Reads `n` bytes.
    pub fn read_bytes(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], RdbError> {
        if n > self.remaining() as u64 {
            return Err(RdbError::Truncated { what });
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }
    /// Reads one byte.
    pub fn read_u8(&mut self, what: &'static str) -> Result<u8, RdbError> {
        Ok(self.read_bytes(1, what)?[0])
    }
    fn read_array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], RdbError> {
        Ok(self.read_bytes(N as u64, what)?.try_into().expect("N bytes"))
    }

    fn read_len_or_special(&mut self, what: &'static str) -> Result<Len, RdbError> {
        let b = self.read_u8(what)?;
        Ok(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => Len::Plain(((b as u64 & 0x3f) << 8) | self.read_u8(what)? as u64),
            2 if b == 0x80 => Len::Plain(u32::from_be_bytes(self.read_array(what)?) as u64),
            2 if b == 0x81 => Len::Plain(u64::from_be_bytes(self.read_array(what)?)),
            2 => return Err(RdbError::Format(format!("{what}: bad length byte {b:#04x}"))),
            _ => Len::Special(b & 0x3f),
        })
    }

    /// Reads a length in any of the four forms.
    pub fn read_length(&mut self, what: &'static str) -> Result<u64, RdbError> {
        match self.read_len_or_special(what)? {
            Len::Plain(v) => Ok(v),
            Len::Special(_) => {
                Err(RdbError::Format(format!("{what}: a string encoding where a length belongs")))
            }
        }
    }

    /// Reads a string in any of the five forms, refusing (before allocating) one longer than
    /// `max` bytes.
    pub fn read_string(&mut self, max: u64, what: &'static str) -> Result<Vec<u8>, RdbError> {
        match self.read_len_or_special(what)? {
            Len::Plain(len) => {
                if len > max {
                    return Err(RdbError::TooLarge { field: what, len, max });
                }
                Ok(self.read_bytes(len, what)?.to_vec())
            }
            Len::Special(0) => Ok((self.read_u8(what)? as i8).to_string().into_bytes()),
            Len::Special(1) => Ok(i16::from_le_bytes(self.read_array(what)?).to_string().into_bytes()),
            Len::Special(2) => Ok(i32::from_le_bytes(self.read_array(what)?).to_string().into_bytes()),
            Len::Special(3) => {
                let clen = self.read_length(what)?;
                let ulen = self.read_length(what)?;
                if ulen > max {
                    return Err(RdbError::TooLarge { field: what, len: ulen, max });
                }
                let data = self.read_bytes(clen, what)?;
                lzf_decompress(data, ulen as usize)
            }
            Len::Special(e) => Err(RdbError::Format(format!("{what}: unknown string encoding {e}"))),
        }
    }

    /// Steps over a string without decoding it (LZF data is not expanded).
    fn skip_string(&mut self, what: &'static str) -> Result<(), RdbError> {
        match self.read_len_or_special(what)? {
            Len::Plain(len) => self.read_bytes(len, what).map(drop),
            Len::Special(0) => self.read_bytes(1, what).map(drop),
            Len::Special(1) => self.read_bytes(2, what).map(drop),
            Len::Special(2) => self.read_bytes(4, what).map(drop),
            Len::Special(3) => {
                let clen = self.read_length(what)?;
                self.read_length(what)?;
                self.read_bytes(clen, what).map(drop)
            }
            Len::Special(e) => Err(RdbError::Format(format!("{what}: unknown string encoding {e}"))),
        }
    }

    /// Steps over module fields up to and including the EOF opcode.
    fn skip_module_fields(&mut self) -> Result<(), RdbError> {
        loop {
            match self.read_length("module opcode")? {
                OPCODE_EOF => return Ok(()),
                OPCODE_SINT | OPCODE_UINT => self.read_length("module integer field").map(drop)?,
                OPCODE_FLOAT => self.read_bytes(4, "module float field").map(drop)?,
                OPCODE_DOUBLE => self.read_bytes(8, "module double field").map(drop)?,
                OPCODE_STRING => self.skip_string("module string field")?,
                op => return Err(RdbError::Format(format!("unknown module opcode {op}"))),
            }
        }
    }

    fn expect_opcode(&mut self, expected: u64) -> Result<(), RdbError> {
        let found = self.read_length("module opcode")?;
        if found != expected {
            return Err(RdbError::WrongOpcode { expected, found });
        }
        Ok(())
    }
}

/// A [`FieldReader`] over module fields in RDB bytes (§12.2): each load checks the opcode.
#[derive(Debug)]
pub struct ModuleFieldReader<'c, 'a> {
    /// The bytes read from.
    pub cur: &'c mut RdbCursor<'a>,
    /// Longest string accepted (checked before allocating).
    pub max_string: u64,
}

impl FieldReader for ModuleFieldReader<'_, '_> {
    fn load_unsigned(&mut self) -> Result<u64, RdbError> {
        self.cur.expect_opcode(OPCODE_UINT)?;
        self.cur.read_length("module unsigned field")
    }
    fn load_double(&mut self) -> Result<f64, RdbError> {
        self.cur.expect_opcode(OPCODE_DOUBLE)?;
        Ok(f64::from_le_bytes(self.cur.read_array("module double field")?))
    }
    fn load_string(&mut self) -> Result<Vec<u8>, RdbError> {
        self.load_string_max(u64::MAX, "module string field")
    }
    fn load_string_max(&mut self, max: u64, field: &'static str) -> Result<Vec<u8>, RdbError> {
        self.cur.expect_opcode(OPCODE_STRING)?;
        self.cur.read_string(max.min(self.max_string), field)
    }
}

// ---------------------------------------------------------------------------------------------
// Values

/// One value of an RDB file or `DUMP` payload.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RdbValue {
    /// A `MBbloom--` value.
    Bloom(BloomChain),
    /// A `MBbloomCF` value.
    Cuckoo(CuckooFilter),
    /// A `CMSk-TYPE` value.
    Cms(CountMinSketch),
    /// A `TopK-TYPE` value.
    TopK(TopK),
    /// A `TDIS-TYPE` value.
    TDigest(TDigest),
    /// A plain Redis string (value type 0).
    String(Vec<u8>),
    /// A value of another type, stepped over and kept as it was encoded (without its type byte).
    /// See the module documentation for which types are.
    Other {
        /// The value type byte.
        type_byte: u8,
        /// The encoded value, as in the input.
        raw: Vec<u8>,
    },
}

impl RdbValue {
    /// The value type byte.
    pub fn type_byte(&self) -> u8 {
        match self {
            RdbValue::Bloom(_)
            | RdbValue::Cuckoo(_)
            | RdbValue::Cms(_)
            | RdbValue::TopK(_)
            | RdbValue::TDigest(_) => TYPE_MODULE,
            RdbValue::String(_) => TYPE_STRING,
            RdbValue::Other { type_byte, .. } => *type_byte,
        }
    }
}

/// How to read values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Allocation budget: bitmaps and slot arrays per value, and any single string.
    pub limits: LoadLimits,
    /// The cuckoo fields of encvers 0..3 (§12.4).
    pub cuckoo_defaults: CuckooRdbDefaults,
    /// Step over values of other types ([`RdbValue::Other`]) instead of refusing them.
    pub skip_other_types: bool,
    /// The newest RDB version accepted (a newer file or payload is [`RdbError::Version`]).
    pub max_version: u16,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            limits: LoadLimits::DEFAULT,
            cuckoo_defaults: CuckooRdbDefaults::default(),
            skip_other_types: true,
            max_version: RDB_VERSION_MAX,
        }
    }
}

/// Reads the body of a module value (after its type byte 7): the module id, the fields, the EOF
/// opcode. The five RedisBloom types are decoded; other modules' values are stepped over when
/// `opts.skip_other_types` is set, and refused otherwise.
pub fn read_module_value(cur: &mut RdbCursor<'_>, opts: &ReadOptions) -> Result<RdbValue, RdbError> {
    let start = cur.position();
    let id = cur.read_length("module id")?;
    let (name, encver) = module_type_name(id);
    let mut fields = ModuleFieldReader { cur, max_string: opts.limits.max_bytes };
    let value = if name == BLOOM_TYPE_NAME {
        RdbValue::Bloom(load_bloom(&mut fields, encver, &opts.limits)?)
    } else if name == CUCKOO_TYPE_NAME {
        RdbValue::Cuckoo(load_cuckoo(&mut fields, encver, opts.cuckoo_defaults, &opts.limits)?)
    } else if name == CMS_TYPE_NAME {
        RdbValue::Cms(load_cms(&mut fields, encver, &opts.limits)?)
    } else if name == TOPK_TYPE_NAME {
        RdbValue::TopK(load_topk(&mut fields, encver, &opts.limits)?)
    } else if name == TDIGEST_TYPE_NAME {
        RdbValue::TDigest(load_tdigest(&mut fields, encver, &opts.limits)?)
    } else if opts.skip_other_types {
        fields.cur.skip_module_fields()?;
        return Ok(RdbValue::Other {
            type_byte: TYPE_MODULE,
            raw: fields.cur.data[start..fields.cur.pos].to_vec(),
        });
    } else {
        return Err(RdbError::UnknownModuleType { name, encver, id });
    };
    fields.cur.expect_opcode(OPCODE_EOF)?;
    Ok(value)
}

/// Reads a value of type `type_byte` (already consumed). `key` names the key in errors.
pub fn read_value(
    cur: &mut RdbCursor<'_>,
    type_byte: u8,
    opts: &ReadOptions,
    key: Option<&[u8]>,
) -> Result<RdbValue, RdbError> {
    let unsupported = || RdbError::UnsupportedType { type_byte, key: key.map(<[u8]>::to_vec) };
    match type_byte {
        TYPE_STRING => return Ok(RdbValue::String(cur.read_string(opts.limits.max_bytes, "string value")?)),
        TYPE_MODULE => return read_module_value(cur, opts),
        _ if !opts.skip_other_types => return Err(unsupported()),
        _ => {}
    }
    let start = cur.position();
    const W: &str = "collection element";
    match type_byte {
        // list, set: a count of strings.
        1 | 2 => {
            for _ in 0..cur.read_length("collection length")? {
                cur.skip_string(W)?;
            }
        }
        // sorted set with doubles as text: 253 NaN, 254 +inf, 255 -inf, else that many bytes.
        3 => {
            for _ in 0..cur.read_length("collection length")? {
                cur.skip_string(W)?;
                let n = cur.read_u8("score")?;
                if n < 253 {
                    cur.read_bytes(n as u64, "score")?;
                }
            }
        }
        // hash: a count of field/value pairs.
        4 => {
            for _ in 0..cur.read_length("collection length")? {
                cur.skip_string(W)?;
                cur.skip_string(W)?;
            }
        }
        // sorted set with binary doubles.
        5 => {
            for _ in 0..cur.read_length("collection length")? {
                cur.skip_string(W)?;
                cur.read_bytes(8, "score")?;
            }
        }
        // zipmap, ziplist, intset, zset/hash ziplist, hash/zset/set listpack: one string blob.
        9..=13 | 16 | 17 | 20 => cur.skip_string("encoded collection")?,
        // quicklist: a count of ziplists.
        14 => {
            for _ in 0..cur.read_length("quicklist length")? {
                cur.skip_string("quicklist node")?;
            }
        }
        // quicklist 2: a count of (container kind, listpack).
        18 => {
            for _ in 0..cur.read_length("quicklist length")? {
                cur.read_length("quicklist container")?;
                cur.skip_string("quicklist node")?;
            }
        }
        _ => return Err(unsupported()),
    }
    Ok(RdbValue::Other { type_byte, raw: cur.data[start..cur.pos].to_vec() })
}

/// Appends a value's body (without its type byte): module id, fields, EOF for the module types
/// (a t-digest is written compressed, see [`save_tdigest`]); the string for strings; the stored bytes for [`RdbValue::Other`] (copied as read, so a
/// value of a type newer than RDB version 10, such as Redis 7.2's set listpack, 20, needs a Redis
/// that knows it).
pub fn write_value_body(out: &mut Vec<u8>, value: &RdbValue) {
    match value {
        RdbValue::Bloom(b) => {
            write_length(out, module_type_id(BLOOM_TYPE_NAME, ENCVER).expect("valid name"));
            save_bloom(b, &mut ModuleFieldWriter { out: &mut *out });
            write_length(out, OPCODE_EOF);
        }
        RdbValue::Cuckoo(c) => {
            write_length(out, module_type_id(CUCKOO_TYPE_NAME, ENCVER).expect("valid name"));
            save_cuckoo(c, &mut ModuleFieldWriter { out: &mut *out });
            write_length(out, OPCODE_EOF);
        }
        RdbValue::Cms(c) => {
            write_length(out, module_type_id(CMS_TYPE_NAME, SKETCH_ENCVER).expect("valid name"));
            save_cms(c, &mut ModuleFieldWriter { out: &mut *out });
            write_length(out, OPCODE_EOF);
        }
        RdbValue::TopK(t) => {
            write_length(out, module_type_id(TOPK_TYPE_NAME, SKETCH_ENCVER).expect("valid name"));
            save_topk(t, &mut ModuleFieldWriter { out: &mut *out });
            write_length(out, OPCODE_EOF);
        }
        RdbValue::TDigest(t) => {
            write_length(out, module_type_id(TDIGEST_TYPE_NAME, SKETCH_ENCVER).expect("valid name"));
            save_tdigest(t, &mut ModuleFieldWriter { out: &mut *out });
            write_length(out, OPCODE_EOF);
        }
        RdbValue::String(s) => write_string(out, s),
        RdbValue::Other { raw, .. } => out.extend_from_slice(raw),
    }
}

// ---------------------------------------------------------------------------------------------
// DUMP payloads

/// The `DUMP` payload of a value (§12.5): type byte, body, RDB version 10 (little-endian u16),
/// CRC64 of everything before it (little-endian).
pub fn dump_payload(value: &RdbValue) -> Vec<u8> {
    let mut out = vec![value.type_byte()];
    write_value_body(&mut out, value);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The command RedisBloom's AOF rewrite emits for a Count-Min Sketch, Top-K or t-digest key
/// (sketches spec §10.6): `RESTORE key 0 <DUMP payload>`. A t-digest's payload is its
/// compressed form; the value itself is not changed (the rewrite runs in a fork in Redis).
///
/// RedisBloom looks the key up in database 0 whatever database it is in, so keys of other
/// databases are dropped from its rewrite (or replaced by database 0's namesake). A server
/// emitting this for each key of each database, after that database's `SELECT`, does what the
/// spec says a correct one should.
pub fn aof_rewrite_command(key: &[u8], value: &RdbValue) -> Vec<Vec<u8>> {
    vec![b"RESTORE".to_vec(), key.to_vec(), b"0".to_vec(), dump_payload(value)]
}

/// Decodes a `DUMP` payload as `RESTORE` does (§12.5) with the default [`ReadOptions`].
pub fn restore_payload(payload: &[u8]) -> Result<RdbValue, RdbError> {
    restore_payload_with(payload, &ReadOptions::default())
}

/// Decodes a `DUMP` payload: first the RDB version (at most `opts.max_version`) and the CRC64
/// ([`RdbError::Version`] / [`RdbError::Checksum`], which `RESTORE` reports as `ERR DUMP payload
/// version or checksum are wrong`), then the value, which must use every byte (any other error is
/// `ERR Bad data format`, see [`RdbError::restore_reply`]).
pub fn restore_payload_with(payload: &[u8], opts: &ReadOptions) -> Result<RdbValue, RdbError> {
    if payload.len() < 10 {
        return Err(RdbError::PayloadTooShort(payload.len() as u64));
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > opts.max_version {
        return Err(RdbError::Version { found: version, max: opts.max_version });
    }
    let stored = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    let computed = crc64(0, &payload[..payload.len() - 8]);
    if stored != computed {
        return Err(RdbError::Checksum { stored, computed });
    }
    let mut cur = RdbCursor::new(body);
    let type_byte = cur.read_u8("value type")?;
    let value = read_value(&mut cur, type_byte, opts, None)?;
    if cur.remaining() != 0 {
        return Err(RdbError::TrailingBytes(cur.remaining() as u64));
    }
    Ok(value)
}

// ---------------------------------------------------------------------------------------------
// RDB files

/// One key of an RDB file.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbKey {
    /// The database number (`SELECTDB`).
    pub db: u64,
    /// The key.
    pub key: Vec<u8>,
    /// Absolute expiry, unix time in milliseconds, if the key has one.
    pub expire_at_ms: Option<i64>,
    /// The value.
    pub value: RdbValue,
}

/// The contents of an RDB file.
#[derive(Debug, Clone, PartialEq)]
pub struct RdbFile {
    /// The RDB version of the magic (`REDIS0010` → 10).
    pub version: u16,
    /// The aux fields (`redis-ver`, `ctime`, …), in file order.
    pub aux: Vec<(Vec<u8>, Vec<u8>)>,
    /// Every key, in file order. Keys of types other than the five RedisBloom types and strings are
    /// [`RdbValue::Other`].
    pub keys: Vec<RdbKey>,
    /// Number of function libraries stepped over (`0xF5` records).
    pub functions: u64,
    /// Number of module aux records stepped over (`0xF7`).
    pub module_aux: u64,
    /// Whether a CRC64 was present and checked (`false` for an all-zero CRC, written with
    /// `rdbchecksum no`, and for RDB versions before 5, which have none).
    pub checksum_verified: bool,
}

impl RdbFile {
    /// The keys holding a `MBbloom--` or `MBbloomCF` value.
    pub fn filter_keys(&self) -> impl Iterator<Item = &RdbKey> {
        self.keys.iter().filter(|k| matches!(k.value, RdbValue::Bloom(_) | RdbValue::Cuckoo(_)))
    }
}

/// Reads a whole RDB file (§12.5): magic and version, aux fields, `SELECTDB`, `RESIZEDB`, expiry
/// and LRU/LFU records, function libraries and module aux data (stepped over), keys, `0xFF`, and
/// the CRC64, which is verified unless it is all zero. Bytes after the CRC are an error.
pub fn read_rdb(data: &[u8], opts: &ReadOptions) -> Result<RdbFile, RdbError> {
    let mut cur = RdbCursor::new(data);
    let magic = cur.read_bytes(9, "RDB magic")?;
    if &magic[..5] != b"REDIS" || !magic[5..].iter().all(u8::is_ascii_digit) {
        return Err(RdbError::Format("not an RDB file (the magic is not REDIS + 4 digits)".into()));
    }
    let version: u16 = std::str::from_utf8(&magic[5..]).expect("digits").parse().expect("4 digits");
    if version == 0 {
        return Err(RdbError::Format("RDB version 0 does not exist".into()));
    }
    if version > opts.max_version {
        return Err(RdbError::Version { found: version, max: opts.max_version });
    }
    let max = opts.limits.max_bytes;
    let mut file = RdbFile {
        version,
        aux: Vec::new(),
        keys: Vec::new(),
        functions: 0,
        module_aux: 0,
        checksum_verified: false,
    };
    let mut db = 0u64;
    let mut expire: Option<i64> = None;
    loop {
        let op = cur.read_u8("record opcode")?;
        match op {
            OP_EOF => break,
            OP_AUX => {
                let k = cur.read_string(max, "aux field name")?;
                let v = cur.read_string(max, "aux field value")?;
                file.aux.push((k, v));
            }
            OP_SELECTDB => db = cur.read_length("SELECTDB")?,
            OP_RESIZEDB => {
                cur.read_length("RESIZEDB")?;
                cur.read_length("RESIZEDB")?;
            }
            OP_EXPIRETIME_MS => expire = Some(i64::from_le_bytes(cur.read_array("expiry")?)),
            OP_EXPIRETIME => expire = Some(i32::from_le_bytes(cur.read_array("expiry")?) as i64 * 1000),
            OP_IDLE => drop(cur.read_length("LRU idle time")?),
            OP_FREQ => drop(cur.read_u8("LFU frequency")?),
            OP_FUNCTION => {
                cur.skip_string("function library")?;
                file.functions += 1;
            }
            OP_FUNCTION_PRE => {
                return Err(RdbError::Format(
                    "pre-release function record (0xF6, Redis 7.0 release candidates) is not supported"
                        .into(),
                ))
            }
            OP_MODULE_AUX => {
                cur.read_length("module aux id")?;
                let when_op = cur.read_length("module aux opcode")?;
                if when_op != OPCODE_UINT {
                    return Err(RdbError::WrongOpcode { expected: OPCODE_UINT, found: when_op });
                }
                cur.read_length("module aux when")?;
                cur.skip_module_fields()?;
                file.module_aux += 1;
            }
            0xF0..=0xF7 => return Err(RdbError::Format(format!("unsupported RDB record opcode {op:#04x}"))),
            type_byte => {
                let key = cur.read_string(max, "key")?;
                let value = read_value(&mut cur, type_byte, opts, Some(&key))?;
                file.keys.push(RdbKey { db, key, expire_at_ms: expire.take(), value });
            }
        }
    }
    if version >= 5 {
        let end = cur.position();
        let stored = u64::from_le_bytes(cur.read_array("CRC64")?);
        if stored != 0 {
            let computed = crc64(0, &data[..end]);
            if stored != computed {
                return Err(RdbError::Checksum { stored, computed });
            }
            file.checksum_verified = true;
        }
    }
    if cur.remaining() != 0 {
        return Err(RdbError::TrailingBytes(cur.remaining() as u64));
    }
    Ok(file)
}

/// Writes an RDB file key by key: magic `REDIS0010` and aux fields, then [`RdbWriter::key`] for
/// each key (a `SELECTDB` / `RESIZEDB` pair is written whenever the database changes), then
/// [`RdbWriter::finish`] for `0xFF` and the CRC64. Redis 7.0 and later load the result.
#[derive(Debug)]
pub struct RdbWriter {
    out: Vec<u8>,
    db: Option<u64>,
}

impl RdbWriter {
    /// Starts a file with the given aux fields. Redis writes `redis-ver`, `redis-bits`, `ctime`,
    /// `used-mem` and `aof-base`; none is required to load a file.
    pub fn new(aux: &[(&[u8], &[u8])]) -> Self {
        let mut out = format!("REDIS{RDB_VERSION:04}").into_bytes();
        for (k, v) in aux {
            out.push(OP_AUX);
            write_string(&mut out, k);
            write_string(&mut out, v);
        }
        RdbWriter { out, db: None }
    }

    /// Starts database `db` with size hints (`RESIZEDB`: number of keys, number with an expiry).
    pub fn select_db(&mut self, db: u64, keys: u64, expires: u64) {
        self.out.push(OP_SELECTDB);
        write_length(&mut self.out, db);
        self.out.push(OP_RESIZEDB);
        write_length(&mut self.out, keys);
        write_length(&mut self.out, expires);
        self.db = Some(db);
    }

    /// Appends a key of the current database (database 0 with no size hints if none was selected).
    pub fn key(&mut self, key: &[u8], expire_at_ms: Option<i64>, value: &RdbValue) {
        if self.db.is_none() {
            self.select_db(0, 0, 0);
        }
        if let Some(ms) = expire_at_ms {
            self.out.push(OP_EXPIRETIME_MS);
            self.out.extend_from_slice(&ms.to_le_bytes());
        }
        self.out.push(value.type_byte());
        write_string(&mut self.out, key);
        write_value_body(&mut self.out, value);
    }

    /// Ends the file: `0xFF` and the CRC64 of everything before it.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(OP_EOF);
        let crc = crc64(0, &self.out);
        self.out.extend_from_slice(&crc.to_le_bytes());
        self.out
    }
}

/// Writes `keys` as an RDB file (version 10), grouped by database in ascending order (keys keep
/// their relative order), with aux fields `redis-ver` (7.0.0, the oldest Redis that reads
/// version 10), `redis-bits` 64, `ctime` (`ctime`, unix seconds), `aof-base` 0.
pub fn write_rdb(keys: &[RdbKey], ctime: u64) -> Vec<u8> {
    let ctime = ctime.to_string();
    let mut w = RdbWriter::new(&[
        (b"redis-ver", b"7.0.0"),
        (b"redis-bits", b"64"),
        (b"ctime", ctime.as_bytes()),
        (b"aof-base", b"0"),
    ]);
    let mut order: Vec<&RdbKey> = keys.iter().collect();
    order.sort_by_key(|k| k.db);
    for group in order.chunk_by(|a, b| a.db == b.db) {
        let expires = group.iter().filter(|k| k.expire_at_ms.is_some()).count() as u64;
        w.select_db(group[0].db, group.len() as u64, expires);
        for k in group {
            w.key(&k.key, k.expire_at_ms, &k.value);
        }
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(crc64(0, b"1234"), b"56789"), 0xe9c6_d914_c4b8_d9ca);
    }

    /// `SaveSigned` is an unsigned field (opcode 2) of the two's-complement bits, as Redis writes
    /// it (the t-digest counters of `TDIS-TYPE` are saved so): -1 is opcode 2, then the 9-byte
    /// length form of `u64::MAX`.
    #[test]
    fn signed_fields_are_opcode_2_twos_complement() {
        let mut out = Vec::new();
        let mut w = ModuleFieldWriter { out: &mut out };
        w.save_signed(-1);
        w.save_signed(i64::MIN);
        w.save_signed(7);
        assert_eq!(&out[..10], &[OPCODE_UINT as u8, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        let mut cur = RdbCursor::new(&out);
        let mut r = ModuleFieldReader { cur: &mut cur, max_string: 0 };
        assert_eq!(r.load_signed().unwrap(), -1);
        assert_eq!(r.load_signed().unwrap(), i64::MIN);
        assert_eq!(r.load_unsigned().unwrap(), 7);
    }

    #[test]
    fn lengths_all_forms() {
        for (v, len) in
            [(0u64, 1), (63, 1), (64, 2), (16383, 2), (16384, 5), (u32::MAX as u64, 5), (1 << 32, 9)]
        {
            let mut out = Vec::new();
            write_length(&mut out, v);
            assert_eq!(out.len(), len, "{v}");
            assert_eq!(RdbCursor::new(&out).read_length("t").unwrap(), v);
        }
        // Non-shortest forms are accepted.
        for bytes in [&[0x40, 5][..], &[0x80, 0, 0, 0, 5], &[0x81, 0, 0, 0, 0, 0, 0, 0, 5]] {
            assert_eq!(RdbCursor::new(bytes).read_length("t").unwrap(), 5);
        }
        assert!(matches!(RdbCursor::new(&[0x82]).read_length("t"), Err(RdbError::Format(_))));
        assert!(matches!(RdbCursor::new(&[0x80, 0]).read_length("t"), Err(RdbError::Truncated { .. })));
    }

    #[test]
    fn strings_all_forms() {
        let read = |b: &[u8]| RdbCursor::new(b).read_string(1 << 20, "t");
        assert_eq!(read(&[0xC0, 0xFB]).unwrap(), b"-5");
        assert_eq!(read(&[0xC1, 0x39, 0x30]).unwrap(), b"12345");
        assert_eq!(read(&[0xC2, 0xFF, 0xFF, 0xFF, 0x7F]).unwrap(), b"2147483647");
        assert_eq!(read(&[0x03, b'a', b'b', b'c']).unwrap(), b"abc");
        // LZF: literal "ab", then copy 4 bytes from 2 back (overlapping): "ababab".
        assert_eq!(read(&[0xC3, 5, 6, 0x01, b'a', b'b', 0x40, 0x01]).unwrap(), b"ababab");
        assert!(read(&[0xC3, 5, 7, 0x01, b'a', b'b', 0x40, 0x01]).is_err());
        assert!(read(&[0xC3, 2, 6, 0x20, 0x05]).is_err()); // reference before the start
        assert!(matches!(read(&[0x80, 0x10, 0, 0, 0]), Err(RdbError::TooLarge { .. })));
        for s in [
            &b"7"[..],
            b"-128",
            b"127",
            b"128",
            b"-32768",
            b"40000",
            b"-2147483648",
            b"2147483648",
            b"007",
            b"-0",
            b"+1",
            b"",
        ] {
            let mut out = Vec::new();
            write_string(&mut out, s);
            assert_eq!(read(&out).unwrap(), s);
        }
        let mut out = Vec::new();
        write_string(&mut out, b"7");
        assert_eq!(out, [0xC0, 0x07]);
    }

    #[test]
    fn dump_round_trip_and_errors() {
        let mut cf = CuckooFilter::new(8, 2, 20, 1).unwrap();
        cf.insert(b"x").unwrap();
        let v = RdbValue::Cuckoo(cf);
        let p = dump_payload(&v);
        assert_eq!(restore_payload(&p).unwrap(), v);
        let mut bad = p.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert_eq!(
            restore_payload(&bad).unwrap_err().restore_reply(),
            "ERR DUMP payload version or checksum are wrong"
        );
        let opts = ReadOptions { max_version: 9, ..Default::default() };
        assert!(matches!(restore_payload_with(&p, &opts), Err(RdbError::Version { found: 10, max: 9 })));
        assert!(restore_payload(&p[..5]).is_err());
        // Type 6 is refused.
        let mut six = p.clone();
        six[0] = TYPE_MODULE_PRE;
        let n = six.len();
        let crc = crc64(0, &six[..n - 8]);
        six[n - 8..].copy_from_slice(&crc.to_le_bytes());
        let e = restore_payload(&six).unwrap_err();
        assert!(matches!(e, RdbError::UnsupportedType { type_byte: 6, .. }), "{e}");
        assert_eq!(e.restore_reply(), "ERR Bad data format");
    }

    #[test]
    fn file_round_trip() {
        let bf = BloomChain::new(100, 0.01, 2, false).unwrap();
        let keys = vec![
            RdbKey {
                db: 3,
                key: b"b".to_vec(),
                expire_at_ms: Some(4102444800000),
                value: RdbValue::Bloom(bf),
            },
            RdbKey { db: 0, key: b"s".to_vec(), expire_at_ms: None, value: RdbValue::String(b"12".to_vec()) },
        ];
        let bytes = write_rdb(&keys, 1_700_000_000);
        let f = read_rdb(&bytes, &ReadOptions::default()).unwrap();
        assert!(f.checksum_verified);
        assert_eq!(f.version, RDB_VERSION);
        assert_eq!(f.keys, vec![keys[1].clone(), keys[0].clone()]);
    }
}
