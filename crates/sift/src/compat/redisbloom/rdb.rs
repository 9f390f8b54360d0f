//! RedisBloom's RDB encoding of its module types: the fields `rdb_save` writes and `rdb_load`
//! reads, for `MBbloom--` (the Bloom chain) and `MBbloomCF` (the cuckoo filter) (spec
//! `redisbloom.md` §12), and for `CMSk-TYPE`, `TopK-TYPE` and `TDIS-TYPE` (the Count-Min
//! Sketch, the Top-K and the t-digest, spec `redisbloom-sketches.md` §10).
//!
//! The field layer is transport-independent. A Redis module implements [`FieldWriter`] /
//! [`FieldReader`] on top of `RedisModule_Save*` / `RedisModule_Load*`, and gets exactly the
//! sequence of calls RedisBloom makes, so RDB files and `DUMP` payloads move between the two in
//! both directions. The byte layer ([`framing`], re-exported here) implements the same traits over
//! Redis's own RDB encoding, so a standalone program can read and write `dump.rdb` files and
//! `DUMP` payloads without Redis.
//!
//! Loading validates every field before it is used and never allocates more than
//! [`LoadLimits::max_bytes`] for bitmaps, slot arrays, counters, tables and node arrays: a
//! hostile value gives an [`RdbError`], never a panic or an abort.
//!
//! ```
//! use sift::compat::redisbloom::BloomChain;
//! use sift::compat::redisbloom::rdb::{load_bloom, save_bloom, FieldBuffer, ENCVER};
//!
//! let mut bf = BloomChain::new(100, 0.01, 2, false).unwrap();
//! bf.add(b"apple").unwrap();
//! let mut fields = FieldBuffer::default();
//! save_bloom(&bf, &mut fields);
//! let back = load_bloom(&mut fields, ENCVER, &Default::default()).unwrap();
//! assert_eq!(back, bf);
//!
//! // A t-digest is saved compressed (RedisBloom compresses before saving); one buffered
//! // observation is not stored and comes back as a node of mean 0 and weight 0 (sketches §10.5).
//! use sift::compat::redisbloom::TDigest;
//! use sift::compat::redisbloom::rdb::{load_tdigest, save_tdigest, SKETCH_ENCVER};
//! let mut td = TDigest::new(100.0, u64::MAX).unwrap();
//! td.add(7.25).unwrap();
//! let mut fields = FieldBuffer::default();
//! save_tdigest(&td, &mut fields);
//! let back = load_tdigest(&mut fields, SKETCH_ENCVER, &Default::default()).unwrap();
//! assert_eq!(back.nodes().collect::<Vec<_>>(), [(0.0, 0)]);
//! assert_eq!((back.min_value(), back.size()), (7.25, 1));
//! ```

use std::collections::VecDeque;

use super::tdigest::f64_to_i64;
use super::{
    tdigest_capacity, BloomChain, BloomHeaderError, CountMinSketch, CuckooFilter, CuckooHeaderError,
    LoadLimits, TDigest, TopK, TopKBucket, TopKSlot, CF_DEFAULT_BUCKET_SIZE, CF_DEFAULT_EXPANSION,
    CF_DEFAULT_MAX_ITERATIONS, CF_MAX_BUCKETS, CF_MAX_FILTERS,
};

pub mod framing;
pub use framing::*;

/// Type name of RedisBloom's scalable Bloom filter.
pub const BLOOM_TYPE_NAME: &str = "MBbloom--";
/// Type name of RedisBloom's cuckoo filter.
pub const CUCKOO_TYPE_NAME: &str = "MBbloomCF";
/// The encoding version both types are saved with (and the newest `rdb_load` accepts).
pub const ENCVER: u32 = 4;
/// Type name of RedisBloom's Count-Min Sketch.
pub const CMS_TYPE_NAME: &str = "CMSk-TYPE";
/// Type name of RedisBloom's Top-K.
pub const TOPK_TYPE_NAME: &str = "TopK-TYPE";
/// Type name of RedisBloom's t-digest.
pub const TDIGEST_TYPE_NAME: &str = "TDIS-TYPE";
/// The encoding version the three sketch types are saved with. `CMSk-TYPE` and `TopK-TYPE`
/// accept only it; `TDIS-TYPE` loads any encver with the same layout (sketches spec §10.1).
pub const SKETCH_ENCVER: u32 = 0;

/// The 64 characters a module type name may use; a character's index is its 6-bit code (§12.1).
const TYPE_CHARSET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// The 64-bit module id Redis derives from a 9-character type name and an encver (§12.1):
/// `None` when the name is not 9 characters of the charset or the encver exceeds 1023.
///
/// ```
/// use sift::compat::redisbloom::rdb::{module_type_id, BLOOM_TYPE_NAME, CUCKOO_TYPE_NAME};
/// assert_eq!(module_type_id(BLOOM_TYPE_NAME, 4), Some(0x3016e5a289bef804));
/// assert_eq!(module_type_id(CUCKOO_TYPE_NAME, 4), Some(0x3016e5a289821404));
/// assert_eq!(module_type_id("MBbloom-", 4), None);
/// ```
pub fn module_type_id(name: &str, encver: u32) -> Option<u64> {
    let name = name.as_bytes();
    if name.len() != 9 || encver > 1023 {
        return None;
    }
    let mut id = 0u64;
    for &c in name {
        let code = TYPE_CHARSET.iter().position(|&x| x == c)?;
        id = (id << 6) | code as u64;
    }
    Some((id << 10) | encver as u64)
}

/// The inverse of [`module_type_id`]: the type name (upper 54 bits) and the encver (low 10 bits).
pub fn module_type_name(id: u64) -> (String, u32) {
    let name = (0..9).map(|i| TYPE_CHARSET[((id >> (10 + 6 * (8 - i))) & 63) as usize] as char).collect();
    (name, (id & 1023) as u32)
}

/// The `Save*` calls of a module's `rdb_save`, in order.
pub trait FieldWriter {
    /// `RedisModule_SaveUnsigned`.
    fn save_unsigned(&mut self, v: u64);
    /// `RedisModule_SaveDouble`.
    fn save_double(&mut self, v: f64);
    /// `RedisModule_SaveStringBuffer`.
    fn save_string(&mut self, bytes: &[u8]);
    /// `RedisModule_SaveSigned`. Redis writes it exactly as an unsigned field (opcode 2)
    /// holding the two's complement (sketches spec §10), which is what this default does.
    fn save_signed(&mut self, v: i64) {
        self.save_unsigned(v as u64);
    }
}

/// The `Load*` calls of a module's `rdb_load`; each may fail (short read, wrong opcode, I/O
/// error).
pub trait FieldReader {
    /// `RedisModule_LoadUnsigned`.
    fn load_unsigned(&mut self) -> Result<u64, RdbError>;
    /// `RedisModule_LoadDouble`.
    fn load_double(&mut self) -> Result<f64, RdbError>;
    /// `RedisModule_LoadStringBuffer`.
    fn load_string(&mut self) -> Result<Vec<u8>, RdbError>;
    /// `RedisModule_LoadSigned`: an unsigned field (opcode 2) read as two's complement.
    fn load_signed(&mut self) -> Result<i64, RdbError> {
        Ok(self.load_unsigned()? as i64)
    }
    /// Loads a string that the caller will refuse if it is longer than `max` bytes. A reader that
    /// sees the length before the bytes (the byte-level reader does) overrides this to refuse
    /// *before* allocating; the default loads the string and checks afterwards.
    fn load_string_max(&mut self, max: u64, field: &'static str) -> Result<Vec<u8>, RdbError> {
        let s = self.load_string()?;
        if s.len() as u64 > max {
            return Err(RdbError::TooLarge { field, len: s.len() as u64, max });
        }
        Ok(s)
    }
}

/// One field as a module saves it: what a [`FieldBuffer`] records.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// `SaveUnsigned`.
    Unsigned(u64),
    /// `SaveDouble`.
    Double(f64),
    /// `SaveStringBuffer`.
    String(Vec<u8>),
}

/// An in-memory [`FieldWriter`] and [`FieldReader`]: records the saved fields and replays them.
/// Useful for tests, and to hand-build values of older encvers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldBuffer {
    /// The fields not yet loaded, oldest first.
    pub fields: VecDeque<Field>,
}

impl FieldWriter for FieldBuffer {
    fn save_unsigned(&mut self, v: u64) {
        self.fields.push_back(Field::Unsigned(v));
    }
    fn save_double(&mut self, v: f64) {
        self.fields.push_back(Field::Double(v));
    }
    fn save_string(&mut self, bytes: &[u8]) {
        self.fields.push_back(Field::String(bytes.to_vec()));
    }
}

impl FieldBuffer {
    fn next(&mut self, want: &'static str) -> Result<Field, RdbError> {
        self.fields.pop_front().ok_or(RdbError::Truncated { what: want })
    }
}

impl FieldReader for FieldBuffer {
    fn load_unsigned(&mut self) -> Result<u64, RdbError> {
        match self.next("unsigned field")? {
            Field::Unsigned(v) => Ok(v),
            f => Err(RdbError::WrongOpcode { expected: OPCODE_UINT, found: field_opcode(&f) }),
        }
    }
    fn load_double(&mut self) -> Result<f64, RdbError> {
        match self.next("double field")? {
            Field::Double(v) => Ok(v),
            f => Err(RdbError::WrongOpcode { expected: OPCODE_DOUBLE, found: field_opcode(&f) }),
        }
    }
    fn load_string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.next("string field")? {
            Field::String(v) => Ok(v),
            f => Err(RdbError::WrongOpcode { expected: OPCODE_STRING, found: field_opcode(&f) }),
        }
    }
}

fn field_opcode(f: &Field) -> u64 {
    match f {
        Field::Unsigned(_) => OPCODE_UINT,
        Field::Double(_) => OPCODE_DOUBLE,
        Field::String(_) => OPCODE_STRING,
    }
}

/// Why an RDB value, a `DUMP` payload or an RDB file could not be read.
///
/// [`RdbError::restore_reply`] gives the reply `RESTORE` sends for each.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RdbError {
    /// The input ended in the middle of `what`.
    #[error("truncated input: it ends inside {what}")]
    Truncated {
        /// What was being read.
        what: &'static str,
    },
    /// A module field had the wrong opcode (e.g. SINT where UINT was expected).
    #[error("module field opcode {found} where opcode {expected} was expected")]
    WrongOpcode {
        /// The opcode the load call expected (2 UINT, 4 DOUBLE, 5 STRING, 0 EOF).
        expected: u64,
        /// The opcode found.
        found: u64,
    },
    /// The transport failed (a module's `RedisModule_IsIOError`, for instance).
    #[error("I/O error: {0}")]
    Io(String),
    /// An encver this version does not know (above 4 for the filters, above 0 for the Count-Min
    /// Sketch and the Top-K).
    #[error("{type_name}: unsupported encoding version {encver} (0..={max} are known)")]
    UnsupportedEncver {
        /// The module type.
        type_name: &'static str,
        /// The encver found.
        encver: u32,
        /// The newest encver known.
        max: u32,
    },
    /// A field is outside the range RedisBloom can hold (it never writes such values).
    #[error("field {field}: value {value} is out of range (at most {max})")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The value found.
        value: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A field RedisBloom's load refuses as zero (`nfilters`, `numFilters`, `numBuckets`, …).
    #[error("field {field} is 0")]
    Zero {
        /// The field.
        field: &'static str,
    },
    /// Link `link`'s bitmap is shorter than `ceil(bits / 8)` bytes.
    #[error("Bloom link {link}: bitmap of {len} bytes is shorter than its {bits} bits")]
    BitmapTooShort {
        /// Index of the link, oldest first.
        link: usize,
        /// Length of the bitmap string.
        len: u64,
        /// The `bits` field.
        bits: u64,
    },
    /// Sub-filter `index`'s slot array is not `bucketSize · nb` bytes long.
    #[error("cuckoo sub-filter {index}: slot array of {len} bytes, expected {expected}")]
    SlotArrayLength {
        /// Index of the sub-filter, oldest first.
        index: usize,
        /// Length of the string.
        len: u64,
        /// `bucketSize · nb`.
        expected: u64,
    },
    /// A bitmap or slot array would take the total past [`LoadLimits::max_bytes`] (or a string
    /// is longer than what the caller accepts).
    #[error("{field}: {len} bytes exceed the limit of {max}")]
    TooLarge {
        /// The field.
        field: &'static str,
        /// Bytes asked for (the running total for bitmaps and slot arrays).
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A string field is not the length the other fields require (a Count-Min Sketch's cells, a
    /// Top-K's buckets or heap, a heap item that is not even its terminating NUL).
    #[error("{field}: string of {len} bytes, expected {expected}")]
    StringLength {
        /// The field.
        field: &'static str,
        /// Length of the string.
        len: u64,
        /// The length required.
        expected: u64,
    },
    /// A double field that cannot be what it claims (a t-digest compression that is not a
    /// positive finite number with a capacity that fits 32 bits).
    #[error("{field}: invalid value {value}")]
    InvalidDouble {
        /// The field.
        field: &'static str,
        /// The value found.
        value: f64,
    },
    /// A t-digest's stored capacity is not `6·⌊compression⌋ + 10`.
    #[error("TDIS-TYPE: stored capacity {stored}, the compression gives {expected}")]
    CapacityMismatch {
        /// The `cap` field (two's complement).
        stored: u64,
        /// `6·⌊compression⌋ + 10`.
        expected: u64,
    },
    /// The Bloom fields fail the per-link integrity test (§7.1, §12.3).
    #[error("MBbloom--: {0}")]
    Bloom(BloomHeaderError),
    /// The cuckoo fields are inconsistent (§12.4).
    #[error("MBbloomCF: {0}")]
    Cuckoo(CuckooHeaderError),
    /// Malformed framing (bad length encoding, bad LZF data, bad magic, …): the message says
    /// what.
    #[error("bad data format: {0}")]
    Format(String),
    /// A value of a module type other than the five of RedisBloom.
    #[error("unknown module type {name} (encver {encver}, module id {id:#018x})")]
    UnknownModuleType {
        /// The type name decoded from the id.
        name: String,
        /// The encver decoded from the id.
        encver: u32,
        /// The module id.
        id: u64,
    },
    /// A value type byte this reader cannot decode or skip (6: pre-release module format,
    /// streams, …).
    #[error("unsupported value type {type_byte}{}", key_suffix(.key))]
    UnsupportedType {
        /// The value type byte.
        type_byte: u8,
        /// The key, when the value is in a file.
        key: Option<Vec<u8>>,
    },
    /// An RDB file or DUMP payload of a newer RDB version than this reader knows.
    #[error("RDB version {found} is newer than the newest supported, {max}")]
    Version {
        /// The version found.
        found: u16,
        /// The newest version this reader accepts.
        max: u16,
    },
    /// The CRC64 does not match.
    #[error("CRC64 mismatch: stored {stored:#018x}, computed {computed:#018x}")]
    Checksum {
        /// The CRC stored in the input.
        stored: u64,
        /// The CRC of the bytes.
        computed: u64,
    },
    /// A `DUMP` payload shorter than its 10-byte footer.
    #[error("DUMP payload of {0} bytes is shorter than its 10-byte footer")]
    PayloadTooShort(u64),
    /// Bytes after the end of a value, payload or file.
    #[error("{0} trailing bytes after the end")]
    TrailingBytes(u64),
}

fn key_suffix(key: &Option<Vec<u8>>) -> String {
    match key {
        Some(k) => format!(" for key {:?}", String::from_utf8_lossy(k)),
        None => String::new(),
    }
}

impl RdbError {
    /// The error reply of `RESTORE` for a payload that fails this way (§12.5): a bad CRC or a
    /// newer RDB version is `ERR DUMP payload version or checksum are wrong`, a value that does
    /// not load is `ERR Bad data format`.
    pub fn restore_reply(&self) -> &'static str {
        match self {
            RdbError::Version { .. } | RdbError::Checksum { .. } | RdbError::PayloadTooShort(_) => {
                "ERR DUMP payload version or checksum are wrong"
            }
            _ => "ERR Bad data format",
        }
    }
}

/// The values RedisBloom fills in for the cuckoo fields encvers 0..3 do not store (§12.4):
/// RedisBloom 2.6 uses 2, 20, 1; current RedisBloom the module's `cf-bucket-size`,
/// `cf-max-iterations` and `cf-expansion-factor`, whose defaults are the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuckooRdbDefaults {
    /// `bucketSize`.
    pub bucket_size: u16,
    /// `maxIterations`.
    pub max_iterations: u16,
    /// `expansion`.
    pub expansion: u16,
}

impl Default for CuckooRdbDefaults {
    fn default() -> Self {
        CuckooRdbDefaults {
            bucket_size: CF_DEFAULT_BUCKET_SIZE,
            max_iterations: CF_DEFAULT_MAX_ITERATIONS,
            expansion: CF_DEFAULT_EXPANSION,
        }
    }
}

/// `rdb_save` of `MBbloom--` at encver 4 (§12.3): size, nfilters, options, growth, then per link
/// (oldest first) entries, error, hashes, bpe, bits, n2, bitmap, size.
pub fn save_bloom(chain: &BloomChain, w: &mut (impl FieldWriter + ?Sized)) {
    w.save_unsigned(chain.len());
    w.save_unsigned(chain.links().len() as u64);
    w.save_unsigned(chain.options() as u64);
    w.save_unsigned(chain.growth() as u64);
    for l in chain.links() {
        w.save_unsigned(l.entries());
        w.save_double(l.error());
        w.save_unsigned(l.hashes() as u64);
        w.save_double(l.bpe());
        w.save_unsigned(l.bits());
        w.save_unsigned(l.n2() as u64);
        w.save_string(l.bitmap());
        w.save_unsigned(l.size());
    }
}

fn check_encver(type_name: &'static str, encver: u32) -> Result<(), RdbError> {
    check_encver_max(type_name, encver, ENCVER)
}

fn check_encver_max(type_name: &'static str, encver: u32, max: u32) -> Result<(), RdbError> {
    if encver > max {
        return Err(RdbError::UnsupportedEncver { type_name, encver, max });
    }
    Ok(())
}

fn narrow(field: &'static str, value: u64, max: u64) -> Result<u64, RdbError> {
    if value > max {
        return Err(RdbError::OutOfRange { field, value, max });
    }
    Ok(value)
}

/// `rdb_load` of `MBbloom--` (§12.3), for encvers 0..=4.
///
/// Checked, as RedisBloom does: `nfilters != 0`, each bitmap at least `ceil(bits / 8)` bytes,
/// and the per-link integrity test of §7.1 with the bitmap's length as `bytes`. Also refused
/// (RedisBloom never writes them): `options`, `growth` or `hashes` above `u32::MAX`, `n2` above
/// 255, and bitmaps totalling more than `limits.max_bytes`. Not checked, like RedisBloom: the sum
/// of the link sizes and the option bits.
pub fn load_bloom(
    r: &mut (impl FieldReader + ?Sized),
    encver: u32,
    limits: &LoadLimits,
) -> Result<BloomChain, RdbError> {
    check_encver(BLOOM_TYPE_NAME, encver)?;
    let size = r.load_unsigned()?;
    let nfilters = r.load_unsigned()?;
    if nfilters == 0 {
        return Err(RdbError::Zero { field: "nfilters" });
    }
    let options =
        if encver >= 2 { narrow("options", r.load_unsigned()?, u32::MAX as u64)? as u32 } else { 0 };
    let growth = if encver >= 4 { narrow("growth", r.load_unsigned()?, u32::MAX as u64)? as u32 } else { 2 };
    // No capacity from `nfilters`: it is untrusted. Every link has a bitmap of at least one byte,
    // so the byte budget bounds the loop too.
    let mut links = Vec::new();
    let mut total = 0u64;
    for link in 0..nfilters {
        let link = link as usize;
        let entries = r.load_unsigned()?;
        let error = r.load_double()?;
        let hashes = narrow("hashes", r.load_unsigned()?, u32::MAX as u64)? as u32;
        let bpe = r.load_double()?;
        let (bits, n2) = if encver >= 1 {
            let bits = r.load_unsigned()?;
            let n2 = narrow("n2", r.load_unsigned()?, u8::MAX as u64)? as u8;
            (bits, n2)
        } else {
            // C's (uint64_t)(double) truncation; out-of-range products fail the checks below.
            ((entries as f64 * bpe) as u64, 0)
        };
        let room = limits.max_bytes.saturating_sub(total);
        let bitmap = r.load_string_max(room, "Bloom bitmaps")?;
        let len = bitmap.len() as u64;
        total += len;
        if len < bits.div_ceil(8) {
            return Err(RdbError::BitmapTooShort { link, len, bits });
        }
        let lsize = r.load_unsigned()?;
        links.push((entries, error, bpe, hashes, bits, n2, lsize, bitmap));
    }
    BloomChain::from_parts(size, options, growth, links).map_err(RdbError::Bloom)
}

/// `rdb_save` of `MBbloomCF` at encver 4 (§12.4): numFilters, numBuckets, numItems, numDeletes,
/// bucketSize, maxIterations, expansion, then per sub-filter its bucket count and slot array.
pub fn save_cuckoo(f: &CuckooFilter, w: &mut (impl FieldWriter + ?Sized)) {
    w.save_unsigned(f.filters().len() as u64);
    w.save_unsigned(f.num_buckets());
    w.save_unsigned(f.len());
    w.save_unsigned(f.num_deletes());
    w.save_unsigned(f.bucket_size() as u64);
    w.save_unsigned(f.max_iterations() as u64);
    w.save_unsigned(f.expansion() as u64);
    for s in f.filters() {
        w.save_unsigned(s.buckets());
        w.save_string(s.slots());
    }
}

/// `rdb_load` of `MBbloomCF` (§12.4), for encvers 0..=4. `defaults` fill `bucketSize`,
/// `maxIterations` and `expansion` for encvers 0..3, which do not store them.
///
/// Checked: `numFilters` in [1, 65535], `numBuckets` and each sub-filter's bucket count in
/// [1, 2^56 − 1], `bucketSize` in [1, 65535], `maxIterations` and `expansion` at most 65535,
/// each slot array exactly `bucketSize · nb_i` bytes (RedisBloom asserts this and aborts; here it
/// is an error), and the slot arrays together at most `limits.max_bytes` (refused before the
/// string is read when the reader can). Not checked, like RedisBloom: `numItems`, `numDeletes`,
/// and `maxIterations` / `expansion` being 0.
pub fn load_cuckoo(
    r: &mut (impl FieldReader + ?Sized),
    encver: u32,
    defaults: CuckooRdbDefaults,
    limits: &LoadLimits,
) -> Result<CuckooFilter, RdbError> {
    check_encver(CUCKOO_TYPE_NAME, encver)?;
    let num_filters = r.load_unsigned()?;
    if num_filters == 0 {
        return Err(RdbError::Zero { field: "numFilters" });
    }
    narrow("numFilters", num_filters, CF_MAX_FILTERS as u64)?;
    let num_buckets = r.load_unsigned()?;
    if num_buckets == 0 {
        return Err(RdbError::Zero { field: "numBuckets" });
    }
    narrow("numBuckets", num_buckets, CF_MAX_BUCKETS)?;
    let num_items = r.load_unsigned()?;
    let (num_deletes, bucket_size, max_iterations, expansion) = if encver >= 4 {
        let deletes = r.load_unsigned()?;
        let bs = narrow("bucketSize", r.load_unsigned()?, u16::MAX as u64)? as u16;
        let mi = narrow("maxIterations", r.load_unsigned()?, u16::MAX as u64)? as u16;
        let ex = narrow("expansion", r.load_unsigned()?, u16::MAX as u64)? as u16;
        (deletes, bs, mi, ex)
    } else {
        (0, defaults.bucket_size, defaults.max_iterations, defaults.expansion)
    };
    if bucket_size == 0 {
        return Err(RdbError::Zero { field: "bucketSize" });
    }
    let mut subs = Vec::new();
    let mut total = 0u64;
    for index in 0..num_filters as usize {
        let nb = if encver >= 4 { r.load_unsigned()? } else { num_buckets };
        if nb == 0 {
            return Err(RdbError::Zero { field: "sub-filter bucket count" });
        }
        narrow("sub-filter bucket count", nb, CF_MAX_BUCKETS)?;
        // nb < 2^56 and bucketSize < 2^16: the product fits in u64.
        let expected = nb * bucket_size as u64;
        let room = limits.max_bytes.saturating_sub(total);
        if expected > room {
            return Err(RdbError::TooLarge {
                field: "cuckoo slot arrays",
                len: total + expected,
                max: limits.max_bytes,
            });
        }
        let slots = r.load_string_max(room, "cuckoo slot arrays")?;
        if slots.len() as u64 != expected {
            return Err(RdbError::SlotArrayLength { index, len: slots.len() as u64, expected });
        }
        total += expected;
        subs.push((nb, slots));
    }
    CuckooFilter::from_parts(
        num_buckets,
        num_items,
        num_deletes,
        bucket_size,
        max_iterations,
        expansion,
        subs,
    )
    .map_err(RdbError::Cuckoo)
}

/// `rdb_save` of `CMSk-TYPE` (sketches spec §10.3): width, depth, count, the cells.
pub fn save_cms(c: &CountMinSketch, w: &mut (impl FieldWriter + ?Sized)) {
    w.save_unsigned(c.width());
    w.save_unsigned(c.depth());
    w.save_unsigned(c.count());
    w.save_string(c.cells_le());
}

/// `rdb_load` of `CMSk-TYPE` (§10.3), encver 0 only.
///
/// Checked, as RedisBloom does: width and depth not 0, the cell string exactly
/// `4 · width · depth` bytes; and, where RedisBloom is fooled by wrap-around, a product that
/// overflows or exceeds `limits.max_bytes` (refused before the string is read).
pub fn load_cms(
    r: &mut (impl FieldReader + ?Sized),
    encver: u32,
    limits: &LoadLimits,
) -> Result<CountMinSketch, RdbError> {
    let (width, depth, count, expected) = load_cms_shape(r, encver, limits)?;
    let cells = load_exact(r, expected, "CMS cells")?;
    Ok(CountMinSketch::from_parts(width, depth, count, cells).expect("shape checked above"))
}

/// The fields of `load_cms` before the cells, checked: width, depth, count and the cells'
/// length in bytes.
fn load_cms_shape(
    r: &mut (impl FieldReader + ?Sized),
    encver: u32,
    limits: &LoadLimits,
) -> Result<(u64, u64, u64, u64), RdbError> {
    check_encver_max(CMS_TYPE_NAME, encver, SKETCH_ENCVER)?;
    let width = r.load_unsigned()?;
    let depth = r.load_unsigned()?;
    let count = r.load_unsigned()?;
    if width == 0 {
        return Err(RdbError::Zero { field: "width" });
    }
    if depth == 0 {
        return Err(RdbError::Zero { field: "depth" });
    }
    let expected = width.checked_mul(depth).and_then(|c| c.checked_mul(4)).unwrap_or(u64::MAX);
    if expected > limits.max_bytes {
        return Err(RdbError::TooLarge { field: "CMS cells", len: expected, max: limits.max_bytes });
    }
    Ok((width, depth, count, expected))
}

/// The fields [`save_cms`] writes before the cells (width, depth, count): the header of a
/// sketch's chunked dump, whose counters follow in pieces (sift's snapshots), so that no
/// buffer of the whole sketch is built to save it.
pub fn save_cms_header(c: &CountMinSketch, w: &mut (impl FieldWriter + ?Sized)) {
    w.save_unsigned(c.width());
    w.save_unsigned(c.depth());
    w.save_unsigned(c.count());
}

/// The inverse of [`save_cms_header`], checked as [`load_cms`]: a sketch of that shape and
/// count whose counters are all 0 until [`CountMinSketch::load_cells`] fills them, allocated
/// only within `limits.max_bytes`.
pub fn load_cms_header(
    r: &mut (impl FieldReader + ?Sized),
    encver: u32,
    limits: &LoadLimits,
) -> Result<CountMinSketch, RdbError> {
    let (width, depth, count, expected) = load_cms_shape(r, encver, limits)?;
    CountMinSketch::zeroed_for_load(width, depth, count).ok_or(RdbError::TooLarge {
        field: "CMS cells (allocation failed)",
        len: expected,
        max: limits.max_bytes,
    })
}

/// Loads a string that must be exactly `len` bytes (refused before allocating when longer).
fn load_exact(
    r: &mut (impl FieldReader + ?Sized),
    len: u64,
    field: &'static str,
) -> Result<Vec<u8>, RdbError> {
    let s = r.load_string_max(len, field)?;
    if s.len() as u64 != len {
        return Err(RdbError::StringLength { field, len: s.len() as u64, expected: len });
    }
    Ok(s)
}

/// Bytes of one heap record in the RDB string: RedisBloom's in-memory struct (§10.4).
const TOPK_HEAP_RECORD: u64 = 24;

/// `rdb_save` of `TopK-TYPE` (§10.4): k, width, depth, decay, the buckets, the heap records,
/// then each slot's item. Items are stored up to their first NUL, plus a NUL; the record's
/// pointer field (an address in RedisBloom) is written as 1 for an occupied slot, 0 otherwise.
pub fn save_topk(t: &TopK, w: &mut (impl FieldWriter + ?Sized)) {
    w.save_unsigned(t.k() as u64);
    w.save_unsigned(t.width() as u64);
    w.save_unsigned(t.depth() as u64);
    w.save_double(t.decay());
    let mut buckets = Vec::with_capacity(t.buckets().len() * 8);
    for b in t.buckets() {
        buckets.extend_from_slice(&b.fp.to_le_bytes());
        buckets.extend_from_slice(&b.count.to_le_bytes());
    }
    w.save_string(&buckets);
    save_topk_heap(t, w);
}

/// The fields of `save_topk` after the buckets: the heap records, then each slot's item.
fn save_topk_heap(t: &TopK, w: &mut (impl FieldWriter + ?Sized)) {
    let mut heap = Vec::with_capacity(t.heap().len() * TOPK_HEAP_RECORD as usize);
    for s in t.heap() {
        heap.extend_from_slice(&s.fp().to_le_bytes());
        heap.extend_from_slice(&(s.item().map_or(0, <[u8]>::len) as u32).to_le_bytes());
        heap.extend_from_slice(&(s.item().is_some() as u64).to_le_bytes());
        heap.extend_from_slice(&s.count().to_le_bytes());
        heap.extend_from_slice(&[0; 4]);
    }
    w.save_string(&heap);
    for s in t.heap() {
        let mut item = super::topk_reply_item(s.item().unwrap_or(b"")).to_vec();
        item.push(0);
        w.save_string(&item);
    }
}

/// The header of a Top-K's chunked dump (sift's snapshots, not an RDB encoding): an unsigned 0
/// (which `load_topk`'s `k` never is, so a one-chunk dump of all the RDB fields is told apart),
/// k, width, depth, decay, then the heap as `save_topk` writes it. The buckets follow in pieces
/// of their RDB string ([`TopK::load_buckets`]), so that no buffer of the whole table is built
/// to save it, nor read beside it to load it.
pub fn save_topk_chunked_header(t: &TopK, w: &mut (impl FieldWriter + ?Sized)) {
    w.save_unsigned(0);
    w.save_unsigned(t.k() as u64);
    w.save_unsigned(t.width() as u64);
    w.save_unsigned(t.depth() as u64);
    w.save_double(t.decay());
    save_topk_heap(t, w);
}

/// The inverse of [`save_topk_chunked_header`], checked as [`load_topk`]: a Top-K of that shape
/// and heap whose buckets are empty until [`TopK::load_buckets`] fills them, allocated only
/// within `limits.max_bytes`.
pub fn load_topk_chunked_header(
    r: &mut (impl FieldReader + ?Sized),
    encver: u32,
    limits: &LoadLimits,
) -> Result<TopK, RdbError> {
    check_encver_max(TOPK_TYPE_NAME, encver, SKETCH_ENCVER)?;
    let marker = r.load_unsigned()?;
    if marker != 0 {
        return Err(RdbError::Format(format!("TopK chunked header: marker {marker}, expected 0")));
    }
    let (k, width, depth, decay, mut total) = load_topk_shape(r, limits)?;
    let heap = load_topk_heap(r, k, limits, &mut total)?;
    TopK::with_buckets_to_load(k, width, depth, decay, heap).ok_or(RdbError::TooLarge {
        field: "TopK buckets (allocation failed)",
        len: total,
        max: limits.max_bytes,
    })
}

/// k, width, depth and decay, checked, and the bytes of the tables (within `limits`).
fn load_topk_shape(
    r: &mut (impl FieldReader + ?Sized),
    limits: &LoadLimits,
) -> Result<(u32, u32, u32, f64, u64), RdbError> {
    let k = u32_field("k", r.load_unsigned()?)?;
    let width = u32_field("width", r.load_unsigned()?)?;
    let depth = u32_field("depth", r.load_unsigned()?)?;
    let decay = r.load_double()?;
    let cells = width as u64 * depth as u64;
    let bucket_bytes = cells.saturating_mul(8);
    let heap_bytes = k as u64 * TOPK_HEAP_RECORD;
    let total = bucket_bytes.saturating_add(heap_bytes);
    if total > limits.max_bytes {
        return Err(RdbError::TooLarge { field: "TopK tables", len: total, max: limits.max_bytes });
    }
    Ok((k, width, depth, decay, total))
}

/// The heap records and items of `save_topk_heap`, `total` the bytes loaded so far (the items
/// count against `limits` too).
fn load_topk_heap(
    r: &mut (impl FieldReader + ?Sized),
    k: u32,
    limits: &LoadLimits,
    total: &mut u64,
) -> Result<Vec<TopKSlot>, RdbError> {
    let records = load_exact(r, k as u64 * TOPK_HEAP_RECORD, "TopK heap")?;
    let mut heap = Vec::with_capacity(k as usize);
    for rec in records.chunks_exact(TOPK_HEAP_RECORD as usize) {
        let fp = u32::from_le_bytes(rec[..4].try_into().expect("4 bytes"));
        let count = u32::from_le_bytes(rec[16..20].try_into().expect("4 bytes"));
        let room = limits.max_bytes.saturating_sub(*total);
        let s = r.load_string_max(room, "TopK heap items")?;
        *total += s.len() as u64;
        let item = match s.len() {
            0 => return Err(RdbError::StringLength { field: "TopK heap item", len: 0, expected: 1 }),
            1 if count == 0 => None,
            n => Some(s[..n - 1].to_vec()),
        };
        heap.push(TopK::slot(fp, item, count));
    }
    Ok(heap)
}

fn u32_field(field: &'static str, v: u64) -> Result<u32, RdbError> {
    if v == 0 {
        return Err(RdbError::Zero { field });
    }
    Ok(narrow(field, v, u32::MAX as u64)? as u32)
}

/// `rdb_load` of `TopK-TYPE` (§10.4), encver 0 only.
///
/// Checked: k, width and depth in [1, 2^32 − 1]; the bucket string exactly `8 · width · depth`
/// bytes and the heap string exactly `24 · k` (with overflow checks, and within
/// `limits.max_bytes` together with the items); every item string at least its NUL byte. Not
/// checked, like RedisBloom: the decay, the heap order, the records' item-length and pointer
/// fields (the item's length is its string's minus one). A one-byte item string is an empty
/// slot when the slot's count is 0, and the empty item otherwise (RedisBloom loads "no item"
/// there and crashes on TOPK.LIST).
pub fn load_topk(
    r: &mut (impl FieldReader + ?Sized),
    encver: u32,
    limits: &LoadLimits,
) -> Result<TopK, RdbError> {
    check_encver_max(TOPK_TYPE_NAME, encver, SKETCH_ENCVER)?;
    let (k, width, depth, decay, mut total) = load_topk_shape(r, limits)?;
    let bucket_bytes = width as u64 * depth as u64 * 8;
    let raw = load_exact(r, bucket_bytes, "TopK buckets")?;
    let buckets: Vec<TopKBucket> = raw
        .chunks_exact(8)
        .map(|c| TopKBucket {
            fp: u32::from_le_bytes(c[..4].try_into().expect("4 bytes")),
            count: u32::from_le_bytes(c[4..].try_into().expect("4 bytes")),
        })
        .collect();
    drop(raw);
    let buckets = crate::bits::Storage::adopt(buckets).map_err(|_| RdbError::TooLarge {
        field: "TopK buckets (allocation failed)",
        len: bucket_bytes,
        max: limits.max_bytes,
    })?;
    let heap = load_topk_heap(r, k, limits, &mut total)?;
    Ok(TopK::from_parts(k, width, depth, decay, buckets, heap))
}

/// `rdb_save` of `TDIS-TYPE` (§10.5): compression, min, max, capacity, merged and unmerged node
/// counts, total compressions, merged and unmerged weights, then the centroids' means and
/// weights. RedisBloom compresses the digest first; this writes the compressed form of `t`
/// without changing it (a compressed copy is made when `t` has buffered nodes). `SAVE` and
/// `DUMP` compress the live key: call [`TDigest::compress`] first for that.
pub fn save_tdigest(t: &TDigest, w: &mut (impl FieldWriter + ?Sized)) {
    if t.unmerged_nodes() > 0 {
        let mut c = t.clone();
        c.compress();
        write_tdigest_fields(&c, w);
    } else {
        write_tdigest_fields(t, w);
    }
}

fn write_tdigest_fields(t: &TDigest, w: &mut (impl FieldWriter + ?Sized)) {
    save_tdigest_chunked_header(t, w);
    let merged: Vec<(f64, i64)> = t.nodes().take(t.merged_nodes()).collect();
    for &(m, _) in &merged {
        w.save_double(m);
    }
    for &(_, wt) in &merged {
        w.save_double(wt as f64);
    }
}

/// The fields `save_tdigest` writes before the centroids (compression … unmerged weight), of
/// `t` as it is (call it on a compressed digest): the header of a digest's chunked dump, whose
/// centroids follow in pieces ([`TDigest::load_nodes`], sift's snapshots), so that no buffer
/// of the whole digest is built to save it.
pub fn save_tdigest_chunked_header(t: &TDigest, w: &mut (impl FieldWriter + ?Sized)) {
    w.save_double(t.compression());
    w.save_double(t.min());
    w.save_double(t.max());
    w.save_signed(t.capacity() as i64);
    w.save_signed(t.merged_nodes() as i64);
    w.save_signed(t.unmerged_nodes() as i64);
    w.save_signed(t.total_compressions());
    w.save_double(t.merged_weight() as f64);
    w.save_double(t.unmerged_weight() as f64);
}

/// `rdb_load` of `TDIS-TYPE` (§10.5), any encver.
///
/// The digest is rebuilt as RedisBloom does, including its loss of buffered nodes: they are
/// counted but not stored, so they come back as nodes of mean 0 and weight 0 (a digest of one
/// observation reloads that way). Checked, beyond RedisBloom's `0 <= merged_nodes <= cap`: the
/// compression is a positive finite number whose capacity fits 32 bits and `limits.max_bytes`
/// (16 bytes per node), the stored capacity is exactly `6·⌊compression⌋ + 10`, and
/// `0 <= unmerged_nodes <= cap − merged_nodes`. Weights are converted from f64 as C does
/// (NaN and out-of-range values become `i64::MIN`).
pub fn load_tdigest(
    r: &mut (impl FieldReader + ?Sized),
    _encver: u32,
    limits: &LoadLimits,
) -> Result<TDigest, RdbError> {
    let mut t = load_tdigest_fields(r, limits, false)?;
    let merged = t.merged_nodes();
    let mut means = Vec::with_capacity(merged.min(1 << 16));
    for _ in 0..merged {
        means.push(r.load_double()?);
    }
    for (i, m) in means.into_iter().enumerate() {
        t.set_node(i, m, f64_to_i64(r.load_double()?));
    }
    Ok(t)
}

/// The inverse of [`save_tdigest_chunked_header`], checked as [`load_tdigest`]: a digest whose
/// centroids are 0 until [`TDigest::load_nodes`] fills them, allocated only within
/// `limits.max_bytes`.
pub fn load_tdigest_chunked_header(
    r: &mut (impl FieldReader + ?Sized),
    _encver: u32,
    limits: &LoadLimits,
) -> Result<TDigest, RdbError> {
    load_tdigest_fields(r, limits, true)
}

/// The fields before the centroids, checked; the digest's centroids to be loaded after.
fn load_tdigest_fields(
    r: &mut (impl FieldReader + ?Sized),
    limits: &LoadLimits,
    chunked: bool,
) -> Result<TDigest, RdbError> {
    let compression = r.load_double()?;
    let cap = tdigest_capacity(compression)
        .map_err(|_| RdbError::InvalidDouble { field: "compression", value: compression })?;
    let bytes = cap as u64 * 16;
    if bytes > limits.max_bytes {
        return Err(RdbError::TooLarge { field: "t-digest nodes", len: bytes, max: limits.max_bytes });
    }
    let min = r.load_double()?;
    let max = r.load_double()?;
    let stored_cap = r.load_unsigned()?;
    let merged = r.load_unsigned()?;
    let unmerged = r.load_unsigned()?;
    let total_compressions = r.load_signed()?;
    let merged_weight = f64_to_i64(r.load_double()?);
    let unmerged_weight = f64_to_i64(r.load_double()?);
    if stored_cap != cap as u64 {
        return Err(RdbError::CapacityMismatch { stored: stored_cap, expected: cap as u64 });
    }
    let merged = narrow("merged_nodes", merged, cap as u64)? as usize;
    let unmerged = narrow("unmerged_nodes", unmerged, (cap - merged) as u64)? as usize;
    let make = if chunked { TDigest::with_nodes_to_load } else { TDigest::from_parts };
    make(
        compression,
        min,
        max,
        merged,
        unmerged,
        total_compressions,
        merged_weight,
        unmerged_weight,
        limits.max_bytes,
    )
    .map_err(|_| RdbError::TooLarge { field: "t-digest nodes", len: bytes, max: limits.max_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_ids_of_the_spec() {
        assert_eq!(module_type_id(BLOOM_TYPE_NAME, 4), Some(0x3016_e5a2_89be_f804));
        assert_eq!(module_type_id(CUCKOO_TYPE_NAME, 4), Some(0x3016_e5a2_8982_1404));
        // The sketch types (sketches spec §10.1).
        assert_eq!(module_type_id(CMS_TYPE_NAME, SKETCH_ENCVER), Some(0x08c4_a4f9_360f_1000));
        assert_eq!(module_type_id(TOPK_TYPE_NAME, SKETCH_ENCVER), Some(0x4e8a_4af9_360f_1000));
        assert_eq!(module_type_id(TDIGEST_TYPE_NAME, SKETCH_ENCVER), Some(0x4c32_12f9_360f_1000));
        assert_eq!(module_type_id(BLOOM_TYPE_NAME, 1024), None);
        assert_eq!(module_type_id("MBbloom-!", 4), None);
        assert_eq!(module_type_id("MBbloom---", 4), None);
        assert_eq!(module_type_name(0x3016_e5a2_89be_f804), ("MBbloom--".to_string(), 4));
        assert_eq!(
            module_type_name(module_type_id("a_z09-ABZ", 1023).unwrap()),
            ("a_z09-ABZ".to_string(), 1023)
        );
    }

    #[test]
    fn field_round_trip_and_order() {
        let mut bf = BloomChain::new(10, 0.01, 2, false).unwrap();
        for i in 0..40 {
            bf.add(format!("s{i}").as_bytes()).unwrap();
        }
        let mut w = FieldBuffer::default();
        save_bloom(&bf, &mut w);
        assert_eq!(w.fields.len(), 4 + 8 * bf.links().len());
        assert_eq!(w.fields[0], Field::Unsigned(40));
        assert!(matches!(w.fields[5], Field::Double(_)));
        assert_eq!(load_bloom(&mut w, ENCVER, &LoadLimits::DEFAULT).unwrap(), bf);
        assert!(w.fields.is_empty());

        let mut cf = CuckooFilter::new(16, 4, 50, 2).unwrap();
        for i in 0..100 {
            cf.insert(format!("d{i}").as_bytes()).unwrap();
        }
        let mut w = FieldBuffer::default();
        save_cuckoo(&cf, &mut w);
        assert_eq!(w.fields.len(), 7 + 2 * cf.filters().len());
        assert_eq!(load_cuckoo(&mut w, ENCVER, Default::default(), &LoadLimits::DEFAULT).unwrap(), cf);
    }

    #[test]
    fn encver_above_4_and_wrong_opcodes_fail() {
        let cf = CuckooFilter::new(8, 2, 20, 1).unwrap();
        let mut w = FieldBuffer::default();
        save_cuckoo(&cf, &mut w);
        let e = load_cuckoo(&mut w.clone(), 5, Default::default(), &LoadLimits::DEFAULT).unwrap_err();
        assert!(matches!(e, RdbError::UnsupportedEncver { encver: 5, .. }));
        assert_eq!(e.restore_reply(), "ERR Bad data format");
        w.fields[2] = Field::Double(0.0);
        let e = load_cuckoo(&mut w, 4, Default::default(), &LoadLimits::DEFAULT).unwrap_err();
        assert_eq!(e, RdbError::WrongOpcode { expected: 2, found: 4 });
    }

    #[test]
    fn budget_is_enforced_before_slot_arrays_are_read() {
        let mut w = FieldBuffer::default();
        for v in [1u64, 1 << 40, 0, 0, 4, 20, 1, 1 << 40] {
            w.save_unsigned(v);
        }
        let e = load_cuckoo(&mut w, 4, Default::default(), &LoadLimits::DEFAULT).unwrap_err();
        assert!(matches!(e, RdbError::TooLarge { .. }), "{e}");
    }
}
