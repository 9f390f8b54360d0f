//! The module data types: one Redis type per registered data type (`sift_commands::families`),
//! each value a plain `Box<T>` that Redis holds, and the Redis callbacks, instantiated for each
//! type from `sift_commands::DataType`:
//!
//! * RDB save/load: the type's field sequence over `RedisModule_Save*` / `RedisModule_Load*`
//!   ([`IoWriter`], [`IoReader`]), which also gives `DUMP` / `RESTORE` and `DEBUG RELOAD`. For
//!   `MBbloom--` and `MBbloomCF` that is RedisBloom's encoding (encver 4, spec §12.3 / §12.4),
//!   under RedisBloom's type names, so Redis stores and finds them under the same module ids as
//!   RedisBloom (spec §12.1). Loads fail (a NULL value, which Redis reports as a load error or
//!   `ERR Bad data format`) on anything invalid, never abort: the module sets `HANDLE_IO_ERRORS`
//!   and checks `RedisModule_IsIOError` after every read.
//! * AOF rewrite: the commands the type emits ([`sift_commands::DataType::rewrite`]; for BF and CF
//!   the `LOADCHUNK` sequence RedisBloom emits, spec §12.6).
//! * Memory usage: the type's; digest (`DEBUG DIGEST-VALUE`): the chunks of its dump; copy: the
//!   type's `COPY`, when it has one (else Redis refuses COPY); free: drop the box.

use std::any::TypeId;
use std::ffi::{c_int, c_void, CString};
use std::sync::OnceLock;

use redis_module::raw;
use sift::compat::redisbloom::rdb::{FieldReader, FieldWriter, RdbError};
use sift::compat::redisbloom::LoadLimits;
use sift_commands::{Data, DataType, LoadContext};

use crate::strings::{string_bytes, OwnedStrings};

/// A registered Redis type and how to reach its values.
pub struct Registered {
    /// The type name.
    pub name: &'static str,
    raw: RawType,
    /// The Rust type of its values.
    pub type_id: TypeId,
    /// A value pointer Redis holds, as the value.
    pub as_dyn: unsafe fn(*mut c_void) -> *mut dyn Data,
    /// A value of this type, as the pointer Redis will hold.
    pub into_raw: fn(Box<dyn Data>) -> *mut c_void,
}

impl Registered {
    /// Redis's handle of the type.
    pub fn raw(&self) -> *mut raw::RedisModuleType {
        self.raw.0
    }
}

/// A type handle, written once during the module's load and only read afterwards.
struct RawType(*mut raw::RedisModuleType);

// SAFETY: the handle is an opaque pointer Redis keeps for the life of the module; it is only
// passed back to Redis, from its own threads.
unsafe impl Send for RawType {}
// SAFETY: as above.
unsafe impl Sync for RawType {}

static TYPES: OnceLock<Vec<Registered>> = OnceLock::new();

/// Every registered type (empty before the module's load registered them).
pub fn registered() -> &'static [Registered] {
    TYPES.get().map_or(&[], |t| t.as_slice())
}

/// The registered type whose Redis handle is `t`.
pub fn by_raw(t: *mut raw::RedisModuleType) -> Option<&'static Registered> {
    registered().iter().find(|r| r.raw.0 == t)
}

/// The registered type of Rust type `id`.
pub fn by_type_id(id: TypeId) -> Option<&'static Registered> {
    registered().iter().find(|r| r.type_id == id)
}

/// Records the registered types (once, during the load).
pub fn set_registered(types: Vec<Registered>) {
    let _ = TYPES.set(types);
}

/// The entry of type `T`, whose Redis handle is `raw`.
pub fn entry<T: DataType>(raw: *mut raw::RedisModuleType) -> Registered {
    Registered {
        name: T::NAME,
        raw: RawType(raw),
        type_id: TypeId::of::<T>(),
        as_dyn: as_dyn::<T>,
        into_raw: into_raw::<T>,
    }
}

/// # Safety
/// `p` is a value of type `T` that this module gave Redis.
unsafe fn as_dyn<T: DataType>(p: *mut c_void) -> *mut dyn Data {
    p.cast::<T>() as *mut dyn Data
}

fn into_raw<T: DataType>(value: Box<dyn Data>) -> *mut c_void {
    let value = value.into_any().downcast::<T>().unwrap_or_else(|_| panic!("a {} value", T::NAME));
    Box::into_raw(value).cast()
}

/// The callbacks of type `T`: version 1 of the struct (understood by every Redis since 4.0),
/// or version 3 when the type can be copied (the `copy` callback).
pub const fn methods<T: DataType>() -> raw::RedisModuleTypeMethods {
    raw::RedisModuleTypeMethods {
        version: if T::COPY.is_some() { 3 } else { 1 },
        rdb_load: Some(rdb_load::<T>),
        rdb_save: Some(rdb_save::<T>),
        aof_rewrite: Some(aof_rewrite::<T>),
        mem_usage: Some(mem_usage::<T>),
        digest: Some(digest::<T>),
        free: Some(free::<T>),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: match T::COPY {
            Some(_) => Some(copy::<T>),
            None => None,
        },
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    }
}

/// [`FieldWriter`] over `RedisModule_Save*`.
pub struct IoWriter(pub *mut raw::RedisModuleIO);

impl FieldWriter for IoWriter {
    fn save_unsigned(&mut self, v: u64) {
        // SAFETY: `self.0` is the RDB handle Redis passed to the save callback.
        unsafe { raw::RedisModule_SaveUnsigned.unwrap()(self.0, v) }
    }

    fn save_signed(&mut self, v: i64) {
        // SAFETY: as above.
        unsafe { raw::RedisModule_SaveSigned.unwrap()(self.0, v) }
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

    fn load_signed(&mut self) -> Result<i64, RdbError> {
        // SAFETY: see `check`.
        let v = unsafe { raw::RedisModule_LoadSigned.unwrap()(self.0) };
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
            if p.is_null() {
                self.check(())?;
                return Err(RdbError::Io("RedisModule_LoadStringBuffer returned NULL".into()));
            }
            let out = std::slice::from_raw_parts(p.cast::<u8>(), len).to_vec();
            raw::RedisModule_Free.unwrap()(p.cast());
            self.check(out)
        }
    }
}

fn log_load_error(what: &str, e: &RdbError) {
    // A NULL context logs to the server log (RedisModule_Log accepts it).
    // SAFETY: both strings are NUL-terminated and live across the call.
    unsafe {
        if let Some(log) = raw::RedisModule_Log {
            let msg = CString::new(format!("sift-redis: cannot load {what}: {e}")).unwrap_or_default();
            log(std::ptr::null_mut(), c"warning".as_ptr(), c"%s".as_ptr(), msg.as_ptr());
        }
    }
}

/// Payload limits for an RDB load: the library's default (4 GiB of bitmaps), as for LOADCHUNK
/// without `maxmemory` (no command context to ask for `maxmemory` during a load); the configured
/// defaults for what old encodings leave out.
fn load_context() -> LoadContext {
    LoadContext { limits: LoadLimits::DEFAULT, defaults: crate::config::defaults() }
}

unsafe extern "C" fn rdb_load<T: DataType>(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    match T::rdb_load(&mut IoReader(rdb), encver.max(0) as u32, &load_context()) {
        Ok(v) => Box::into_raw(Box::new(v)).cast(),
        Err(e) => {
            log_load_error(T::NAME, &e);
            std::ptr::null_mut()
        }
    }
}

// Saving (SAVE, DEBUG RELOAD, DUMP, BGSAVE's child, the AOF rewrite) prepares the value it is
// given first (`DataType::before_save`: a t-digest compresses), as RedisBloom does (sketches spec
// §10.5): the live key in the main process, the child's copy in a fork.
unsafe extern "C" fn rdb_save<T: DataType>(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: `value` is one of our boxed `T`s; Redis calls this with its lock held and no
    // other access to the value in progress, so it may be borrowed for writing.
    let v = unsafe { &mut *value.cast::<T>() };
    v.before_save();
    v.rdb_save(&mut IoWriter(rdb));
}

unsafe extern "C" fn aof_rewrite<T: DataType>(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: `value` is one of our boxed `T`s, not otherwise accessed during this call (see
    // `rdb_save`); `aof` and `key` are Redis's for this call.
    unsafe {
        let v = &mut *value.cast::<T>();
        v.before_save();
        v.rewrite(string_bytes(key), &mut |cmd| {
            let Some((name, args)) = cmd.split_first() else { return };
            let name = CString::new(name.to_vec()).unwrap_or_default();
            let args = OwnedStrings::new(args);
            // "v": a vector of module strings and its length.
            raw::RedisModule_EmitAOF.unwrap()(
                aof,
                name.as_ptr(),
                c"v".as_ptr(),
                args.0.as_ptr(),
                args.0.len(),
            );
        });
    }
}

unsafe extern "C" fn mem_usage<T: DataType>(value: *const c_void) -> usize {
    // SAFETY: `value` is one of our boxed `T`s.
    unsafe { (*value.cast::<T>()).mem_usage() }
}

unsafe extern "C" fn digest<T: DataType>(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: `value` is one of our boxed `T`s; `md` is Redis's digest handle and every buffer is
    // valid for its length.
    unsafe {
        let v: &dyn Data = &*value.cast::<T>();
        let add = raw::RedisModule_DigestAddStringBuffer.unwrap();
        for chunk in v.chunks() {
            add(md, chunk.data.as_ptr().cast(), chunk.data.len());
        }
        raw::RedisModule_DigestEndSequence.unwrap()(md);
    }
}

unsafe extern "C" fn copy<T: DataType>(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: `value` is one of our boxed `T`s; registered only when `T::COPY` is set.
    let v = unsafe { &*value.cast::<T>() };
    match T::COPY {
        Some(copy) => Box::into_raw(Box::new(copy(v))).cast(),
        None => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn free<T: DataType>(value: *mut c_void) {
    // SAFETY: Redis frees each value once; it is a box we made.
    drop(unsafe { Box::from_raw(value.cast::<T>()) });
}
