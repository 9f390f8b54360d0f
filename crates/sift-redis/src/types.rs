//! The two module data types, `MBbloom--` (a [`BloomChain`]) and `MBbloomCF` (a
//! [`CuckooFilter`]), with RedisBloom's type names and encver 4, so Redis stores and finds them
//! under the same module ids as RedisBloom (spec §12.1).
//!
//! * RDB save/load: the field sequence of spec §12.3 / §12.4, written by the library's
//!   `redisbloom::rdb` over `RedisModule_Save*` / `RedisModule_Load*` ([`IoWriter`],
//!   [`IoReader`]). Loads accept encvers 0..=4 and fail (a NULL value, which Redis reports as a
//!   load error or `ERR Bad data format`) on anything invalid, never abort: the module sets
//!   `HANDLE_IO_ERRORS` and checks `RedisModule_IsIOError` after every read.
//! * AOF rewrite: `BF.LOADCHUNK` / `CF.LOADCHUNK` commands exactly as RedisBloom emits them
//!   (spec §12.6).
//! * Memory usage: the filter's INFO `Size`; digest: the dump chunks; free: drop the box.

use std::ffi::{c_int, c_longlong, c_void};

use redis_module::native_types::RedisType;
use redis_module::raw;
use sift::compat::redisbloom::rdb::{
    load_bloom, load_cuckoo, save_bloom, save_cuckoo, CuckooRdbDefaults, FieldReader, FieldWriter, RdbError,
};
use sift::compat::redisbloom::{BloomChain, CuckooFilter, LoadLimits, MAX_CHUNK};

/// The encoding version written (RedisBloom's current one).
pub const ENCVER: i32 = 4;

const fn methods(
    rdb_load: raw::RedisModuleTypeLoadFunc,
    rdb_save: raw::RedisModuleTypeSaveFunc,
    aof_rewrite: raw::RedisModuleTypeRewriteFunc,
    mem_usage: raw::RedisModuleTypeMemUsageFunc,
    digest: raw::RedisModuleTypeDigestFunc,
    free: raw::RedisModuleTypeFreeFunc,
) -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        // Version 1 fields only (plus nothing newer): understood by every Redis since 4.0.
        version: 1,
        rdb_load,
        rdb_save,
        aof_rewrite,
        mem_usage,
        digest,
        free,
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: None,
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    }
}

/// `MBbloom--`: RedisBloom's scalable Bloom filter type.
pub static BLOOM_TYPE: RedisType = RedisType::new(
    "MBbloom--",
    ENCVER,
    methods(
        Some(bloom_rdb_load),
        Some(bloom_rdb_save),
        Some(bloom_aof_rewrite),
        Some(bloom_mem_usage),
        Some(bloom_digest),
        Some(bloom_free),
    ),
);

/// `MBbloomCF`: RedisBloom's cuckoo filter type.
pub static CUCKOO_TYPE: RedisType = RedisType::new(
    "MBbloomCF",
    ENCVER,
    methods(
        Some(cuckoo_rdb_load),
        Some(cuckoo_rdb_save),
        Some(cuckoo_aof_rewrite),
        Some(cuckoo_mem_usage),
        Some(cuckoo_digest),
        Some(cuckoo_free),
    ),
);

/// The registered `MBbloom--` type.
pub fn bloom_type() -> *mut raw::RedisModuleType {
    *BLOOM_TYPE.raw_type.borrow()
}

/// The registered `MBbloomCF` type.
pub fn cuckoo_type() -> *mut raw::RedisModuleType {
    *CUCKOO_TYPE.raw_type.borrow()
}

/// [`FieldWriter`] over `RedisModule_Save*`.
pub struct IoWriter(pub *mut raw::RedisModuleIO);

impl FieldWriter for IoWriter {
    fn save_unsigned(&mut self, v: u64) {
        // SAFETY: `self.0` is the RDB handle Redis passed to the save callback.
        unsafe { raw::RedisModule_SaveUnsigned.unwrap()(self.0, v) }
    }

    fn save_double(&mut self, v: f64) {
        // SAFETY: as above.
        unsafe { raw::RedisModule_SaveDouble.unwrap()(self.0, v) }
    }

    fn save_string(&mut self, bytes: &[u8]) {
        // SAFETY: as above; the buffer is valid for its length.
        unsafe { raw::RedisModule_SaveStringBuffer.unwrap()(self.0, bytes.as_ptr().cast(), bytes.len()) }
    }
}

/// [`FieldReader`] over `RedisModule_Load*`, checking `RedisModule_IsIOError` after each call
/// (with `HANDLE_IO_ERRORS` set, a failed read returns a dummy value instead of aborting).
pub struct IoReader(pub *mut raw::RedisModuleIO);

impl IoReader {
    fn check<T>(&self, v: T) -> Result<T, RdbError> {
        // SAFETY: `self.0` is the RDB handle Redis passed to the load callback.
        let failed = unsafe { raw::RedisModule_IsIOError.map(|f| f(self.0) != 0).unwrap_or(false) };
        if failed {
            Err(RdbError::Io("RedisModule_IsIOError".into()))
        } else {
            Ok(v)
        }
    }
}

impl FieldReader for IoReader {
    fn load_unsigned(&mut self) -> Result<u64, RdbError> {
        // SAFETY: see `check`.
        let v = unsafe { raw::RedisModule_LoadUnsigned.unwrap()(self.0) };
        self.check(v)
    }

    fn load_double(&mut self) -> Result<f64, RdbError> {
        // SAFETY: see `check`.
        let v = unsafe { raw::RedisModule_LoadDouble.unwrap()(self.0) };
        self.check(v)
    }

    fn load_string(&mut self) -> Result<Vec<u8>, RdbError> {
        let mut len = 0usize;
        // SAFETY: Redis returns a buffer of `len` bytes allocated with RedisModule_Alloc (or
        // NULL on error), which we copy and free.
        unsafe {
            let p = raw::RedisModule_LoadStringBuffer.unwrap()(self.0, &mut len);
            let out = if p.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec()
            };
            if !p.is_null() {
                raw::RedisModule_Free.unwrap()(p.cast());
            }
            if p.is_null() {
                self.check(())?;
                return Err(RdbError::Io("RedisModule_LoadStringBuffer returned NULL".into()));
            }
            self.check(out)
        }
    }
}

/// Payload limits for an RDB load: the library's default (4 GiB of bitmaps), as for LOADCHUNK
/// without `maxmemory` (no command context to ask for `maxmemory` during a load).
fn rdb_limits() -> LoadLimits {
    LoadLimits::DEFAULT
}

fn log_load_error(what: &str, e: &RdbError) {
    // A NULL context logs to the server log (RedisModule_Log accepts it).
    // SAFETY: both strings are NUL-terminated and live across the call.
    unsafe {
        if let Some(log) = raw::RedisModule_Log {
            let msg =
                std::ffi::CString::new(format!("sift-redis: cannot load {what}: {e}")).unwrap_or_default();
            log(std::ptr::null_mut(), c"warning".as_ptr(), c"%s".as_ptr(), msg.as_ptr());
        }
    }
}

unsafe extern "C" fn bloom_rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    match load_bloom(&mut IoReader(rdb), encver.max(0) as u32, &rdb_limits()) {
        Ok(c) => Box::into_raw(Box::new(c)).cast(),
        Err(e) => {
            log_load_error("MBbloom--", &e);
            std::ptr::null_mut()
        }
    }
}

unsafe extern "C" fn bloom_rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: `value` is one of our boxed chains.
    let chain = unsafe { &*(value as *const BloomChain) };
    save_bloom(chain, &mut IoWriter(rdb));
}

unsafe extern "C" fn cuckoo_rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    let c = crate::config::current().cuckoo;
    // Encvers 0..3 do not store these: current RedisBloom takes the configured values (§12.4).
    let defaults = CuckooRdbDefaults {
        bucket_size: u16::try_from(c.bucket_size).unwrap_or(2),
        max_iterations: u16::try_from(c.max_iterations).unwrap_or(20),
        expansion: u16::try_from(c.expansion).unwrap_or(1),
    };
    match load_cuckoo(&mut IoReader(rdb), encver.max(0) as u32, defaults, &rdb_limits()) {
        Ok(f) => Box::into_raw(Box::new(f)).cast(),
        Err(e) => {
            log_load_error("MBbloomCF", &e);
            std::ptr::null_mut()
        }
    }
}

unsafe extern "C" fn cuckoo_rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: `value` is one of our boxed filters.
    let f = unsafe { &*(value as *const CuckooFilter) };
    save_cuckoo(f, &mut IoWriter(rdb));
}

/// `<cmd> key <it> <data>` into the AOF.
unsafe fn emit(
    aof: *mut raw::RedisModuleIO,
    cmd: &std::ffi::CStr,
    key: *mut raw::RedisModuleString,
    it: i64,
    data: &[u8],
) {
    // SAFETY: "slb" = a module string, a long long, a buffer and its length.
    unsafe {
        raw::RedisModule_EmitAOF.unwrap()(
            aof,
            cmd.as_ptr(),
            c"slb".as_ptr(),
            key,
            it as c_longlong,
            data.as_ptr(),
            data.len(),
        );
    }
}

unsafe extern "C" fn bloom_aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: `value` is one of our boxed chains; `aof` and `key` are Redis's.
    unsafe {
        let chain = &*(value as *const BloomChain);
        // The header at iterator 1, then each SCANDUMP chunk with the iterator SCANDUMP returns
        // with it (spec §12.6).
        emit(aof, c"BF.LOADCHUNK", key, 1, &chain.header());
        let mut it = 0i64;
        while let Some((next, data)) = chain.scandump(it) {
            if it > 0 {
                emit(aof, c"BF.LOADCHUNK", key, next, &data);
            }
            it = next;
        }
    }
}

unsafe extern "C" fn cuckoo_aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: `value` is one of our boxed filters.
    unsafe {
        let f = &*(value as *const CuckooFilter);
        // Always the header and every sub-filter, also when the filter is empty (whose SCANDUMP
        // is empty): positions and pieces as SCANDUMP's (spec §12.6).
        emit(aof, c"CF.LOADCHUNK", key, 1, &f.header());
        let mut pos = 1i64;
        for s in f.filters() {
            for piece in s.slots().chunks(MAX_CHUNK) {
                pos += piece.len() as i64;
                emit(aof, c"CF.LOADCHUNK", key, pos, piece);
            }
        }
    }
}

unsafe extern "C" fn bloom_mem_usage(value: *const c_void) -> usize {
    // SAFETY: `value` is one of our boxed chains.
    unsafe { (*(value as *const BloomChain)).info().size as usize }
}

unsafe extern "C" fn cuckoo_mem_usage(value: *const c_void) -> usize {
    // SAFETY: `value` is one of our boxed filters.
    unsafe { (*(value as *const CuckooFilter)).info().size as usize }
}

unsafe fn digest_chunks(
    md: *mut raw::RedisModuleDigest,
    header: &[u8],
    chunks: impl Iterator<Item = Vec<u8>>,
) {
    // SAFETY: `md` is Redis's digest handle; buffers are valid for their lengths.
    unsafe {
        let add = raw::RedisModule_DigestAddStringBuffer.unwrap();
        add(md, header.as_ptr().cast(), header.len());
        for c in chunks {
            add(md, c.as_ptr().cast(), c.len());
        }
        raw::RedisModule_DigestEndSequence.unwrap()(md);
    }
}

unsafe extern "C" fn bloom_digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: `value` is one of our boxed chains.
    unsafe {
        let c = &*(value as *const BloomChain);
        digest_chunks(md, &c.header(), c.links().iter().map(|l| l.bitmap().to_vec()));
    }
}

unsafe extern "C" fn cuckoo_digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: `value` is one of our boxed filters.
    unsafe {
        let f = &*(value as *const CuckooFilter);
        digest_chunks(md, &f.header(), f.filters().iter().map(|s| s.slots().to_vec()));
    }
}

unsafe extern "C" fn bloom_free(value: *mut c_void) {
    // SAFETY: Redis frees each value once; it is a box we made.
    drop(unsafe { Box::from_raw(value as *mut BloomChain) });
}

unsafe extern "C" fn cuckoo_free(value: *mut c_void) {
    // SAFETY: as above.
    drop(unsafe { Box::from_raw(value as *mut CuckooFilter) });
}
