//! The shared command layer's store and environment over Redis: a command's key is opened with
//! `RedisModule_OpenKey` (lazily, once), its value is the boxed filter of our data types, and the
//! reply, replication and memory budget go through the module API.

use std::ffi::{c_int, c_void, CString};

use redis_module::raw;
use sift::compat::redisbloom::{BloomChain, CuckooFilter, LoadLimits};
use sift_commands::{Access, BloomDefaults, CuckooDefaults, Env, FilterStore, Read, Slot, Write, COMMANDS};

use crate::types::{bloom_type, cuckoo_type};

/// The bytes of a Redis string (valid while the string is).
///
/// # Safety
/// `s` is a valid Redis module string that outlives the returned slice.
pub unsafe fn string_bytes<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: per the caller, `s` is valid; Redis returns a pointer to `len` bytes.
    unsafe {
        let p = raw::RedisModule_StringPtrLen.unwrap()(s, &mut len);
        if p.is_null() || len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(p.cast(), len)
    }
}

/// The one key of a BF/CF command (`argv[1]`), opened on first use and closed on drop.
pub struct KeyStore {
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    key: *mut raw::RedisModuleKey,
    mode: c_int,
    /// A filter was created or looked up for writing: the command changed (or may have changed)
    /// data and must be replicated.
    pub dirty: bool,
}

impl KeyStore {
    fn key(&mut self) -> *mut raw::RedisModuleKey {
        if self.key.is_null() && !self.name.is_null() {
            // SAFETY: `ctx` and `name` are the running command's (see `dispatch`).
            self.key = unsafe { raw::RedisModule_OpenKey.unwrap()(self.ctx, self.name, self.mode) };
        }
        self.key
    }

    /// What the key holds, as a raw value pointer tagged with its type.
    fn probe(&mut self) -> Slot<*mut BloomChain, *mut CuckooFilter> {
        let key = self.key();
        if key.is_null() {
            return Slot::Missing;
        }
        // SAFETY: `key` is an open key of this context.
        unsafe {
            let kt = raw::RedisModule_KeyType.unwrap()(key);
            if kt == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
                return Slot::Missing;
            }
            if kt != raw::REDISMODULE_KEYTYPE_MODULE as c_int {
                return Slot::Other;
            }
            let t = raw::RedisModule_ModuleTypeGetType.unwrap()(key);
            let v = raw::RedisModule_ModuleTypeGetValue.unwrap()(key);
            if t == bloom_type() {
                Slot::Bloom(v.cast())
            } else if t == cuckoo_type() {
                Slot::Cuckoo(v.cast())
            } else {
                Slot::Other
            }
        }
    }

    fn set_value(&mut self, t: *mut raw::RedisModuleType, value: *mut c_void) {
        let key = self.key();
        // SAFETY: the key is open for writing (write commands only create) and empty; Redis
        // takes ownership of `value` and frees it with the type's `free` callback.
        unsafe {
            raw::RedisModule_ModuleTypeSetValue.unwrap()(key, t, value);
        }
        self.dirty = true;
    }
}

impl Drop for KeyStore {
    fn drop(&mut self) {
        if !self.key.is_null() {
            // SAFETY: the key was opened by this store and not closed yet.
            unsafe { raw::RedisModule_CloseKey.unwrap()(self.key) };
        }
    }
}

// The values behind the pointers are boxes owned by Redis's keyspace; they live while the key is
// open, which is as long as `self` is borrowed.
impl FilterStore for KeyStore {
    fn lookup(&mut self, _key: &[u8]) -> Read<'_> {
        match self.probe() {
            Slot::Missing => Slot::Missing,
            // SAFETY: see above; the value is one of our boxes, of the type Redis reports.
            Slot::Bloom(b) => Slot::Bloom(unsafe { &*b }),
            Slot::Cuckoo(c) => Slot::Cuckoo(unsafe { &*c }),
            Slot::Other => Slot::Other,
        }
    }

    fn lookup_mut(&mut self, _key: &[u8]) -> Write<'_> {
        match self.probe() {
            Slot::Missing => Slot::Missing,
            Slot::Bloom(b) => {
                self.dirty = true;
                // SAFETY: as in `lookup`; `&mut self` makes the borrow exclusive.
                Slot::Bloom(unsafe { &mut *b })
            }
            Slot::Cuckoo(c) => {
                self.dirty = true;
                // SAFETY: as above.
                Slot::Cuckoo(unsafe { &mut *c })
            }
            Slot::Other => Slot::Other,
        }
    }

    fn create_bloom(&mut self, _key: &[u8], chain: BloomChain) -> &mut BloomChain {
        let p = Box::into_raw(Box::new(chain));
        self.set_value(bloom_type(), p.cast());
        // SAFETY: Redis now owns the box and keeps it while the key is open.
        unsafe { &mut *p }
    }

    fn create_cuckoo(&mut self, _key: &[u8], filter: CuckooFilter) -> &mut CuckooFilter {
        let p = Box::into_raw(Box::new(filter));
        self.set_value(cuckoo_type(), p.cast());
        // SAFETY: as above.
        unsafe { &mut *p }
    }
}

/// `maxmemory`, read with `CONFIG GET` (only when a filter, link or sub-filter is about to be
/// allocated, so it is never on the path of an ordinary add or lookup).
fn maxmemory(ctx: *mut raw::RedisModuleCtx) -> u64 {
    // SAFETY: `ctx` is the running command's; the call reply is freed before returning.
    unsafe {
        let reply = raw::RedisModule_Call.unwrap()(
            ctx,
            c"CONFIG".as_ptr(),
            c"cc".as_ptr(),
            c"GET".as_ptr(),
            c"maxmemory".as_ptr(),
        );
        let mut value = 0u64;
        if !reply.is_null() {
            let v = raw::RedisModule_CallReplyArrayElement.unwrap()(reply, 1);
            if !v.is_null() {
                let mut len = 0usize;
                let p = raw::RedisModule_CallReplyStringPtr.unwrap()(v, &mut len);
                if !p.is_null() {
                    let s = std::slice::from_raw_parts(p.cast::<u8>(), len);
                    value = std::str::from_utf8(s).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
                }
            }
            raw::RedisModule_FreeCallReply.unwrap()(reply);
        }
        value
    }
}

/// The module's side of a request.
pub struct ModuleEnv {
    ctx: *mut raw::RedisModuleCtx,
    /// What to replicate instead of the command as received.
    pub propagate: Option<Vec<Vec<Vec<u8>>>>,
}

impl Env for ModuleEnv {
    fn protocol(&self) -> u8 {
        // SAFETY: `ctx` is the running command's.
        let flags = unsafe { raw::RedisModule_GetContextFlags.unwrap()(self.ctx) } as u32;
        if flags & raw::REDISMODULE_CTX_FLAGS_RESP3 != 0 {
            3
        } else {
            2
        }
    }

    fn bloom_defaults(&self) -> BloomDefaults {
        crate::config::bloom()
    }

    fn cuckoo_defaults(&self) -> CuckooDefaults {
        crate::config::cuckoo()
    }

    /// `maxmemory` when set, else the library's default LOADCHUNK budget (4 GiB), as in
    /// sift-server: a request beyond it is refused before allocating.
    fn memory_budget(&mut self) -> u64 {
        match maxmemory(self.ctx) {
            0 => LoadLimits::DEFAULT.max_bytes,
            m => m,
        }
    }

    fn propagate(&mut self, commands: Vec<Vec<Vec<u8>>>) {
        self.propagate = Some(commands);
    }
}

/// Replicates (and feeds the AOF) one command given as byte strings.
unsafe fn replicate(ctx: *mut raw::RedisModuleCtx, cmd: &[Vec<u8>]) {
    let Some((name, args)) = cmd.split_first() else { return };
    // SAFETY: `ctx` is the running command's; the strings are created and freed here, and
    // Redis retains what it keeps ("v": a vector of module strings and its length).
    unsafe {
        let create = raw::RedisModule_CreateString.unwrap();
        let strings: Vec<*mut raw::RedisModuleString> =
            args.iter().map(|a| create(std::ptr::null_mut(), a.as_ptr().cast(), a.len())).collect();
        let name = CString::new(name.clone()).unwrap_or_default();
        raw::RedisModule_Replicate.unwrap()(
            ctx,
            name.as_ptr(),
            c"v".as_ptr(),
            strings.as_ptr(),
            strings.len(),
        );
        for s in strings {
            raw::RedisModule_FreeString.unwrap()(std::ptr::null_mut(), s);
        }
    }
}

/// Runs `COMMANDS[i]`: opens its key, calls the shared handler, replies, and replicates a write
/// that changed data (verbatim, or the handler's explicit commands after an auto-create).
///
/// # Safety
/// Called by Redis with a valid context and `argc` valid strings in `argv`.
pub unsafe fn dispatch(
    i: usize,
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let argc = argc.max(0) as usize;
    // SAFETY: per the contract, `argv[0..argc]` are valid for the whole call.
    let args: Vec<&[u8]> = (0..argc).map(|j| unsafe { string_bytes(*argv.add(j)) }).collect();
    let cmd = &COMMANDS[i];
    let writes = cmd.access != Access::Read;
    let mode = raw::REDISMODULE_READ as c_int | if writes { raw::REDISMODULE_WRITE as c_int } else { 0 };
    // CF.COMPACT registers no arity: `argv[1]` may be missing, and the handler refuses that
    // before it looks anything up.
    let name = if argc > 1 { unsafe { *argv.add(1) } } else { std::ptr::null_mut() };
    let mut store = KeyStore { ctx, name, key: std::ptr::null_mut(), mode, dirty: false };
    let mut env = ModuleEnv { ctx, propagate: None };
    let reply = sift_commands::run::<KeyStore, &[u8]>(i, &mut store, &mut env, &args);
    // SAFETY: `ctx` is the running command's.
    unsafe {
        crate::reply::send(ctx, &reply);
        if writes && store.dirty {
            match env.propagate.take() {
                Some(cmds) => cmds.iter().for_each(|c| replicate(ctx, c)),
                None => {
                    raw::RedisModule_ReplicateVerbatim.unwrap()(ctx);
                }
            }
        }
    }
    drop(store);
    raw::REDISMODULE_OK as c_int
}
