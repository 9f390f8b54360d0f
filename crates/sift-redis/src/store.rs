//! The shared command layer's store and environment over Redis: a command's keys are opened with
//! `RedisModule_OpenKey` (lazily, once each), their values are the boxed values of our data types
//! ([`crate::types`]), and the reply, replication, clock and memory budget go through the module
//! API.

use std::ffi::{c_int, CString};

use redis_module::raw;
use sift::compat::redisbloom::LoadLimits;
use sift_commands::{Command, Data, Defaults, Env, Held, Store};

use crate::strings::{string_bytes, OwnedStrings};
use crate::types;

/// One key this command opened.
struct Open {
    /// The key's name: an argument of the command, or a string this store created.
    name: *mut raw::RedisModuleString,
    /// The open key (null when Redis refused to open it).
    key: *mut raw::RedisModuleKey,
    /// Opened for writing.
    write: bool,
}

/// The keys of one command: opened on first use and closed on drop. A key is opened for writing
/// when the command changes data and the key is one of its first key spec's (the keys a
/// RedisBloom command opens `READ|WRITE` even to read them), or when the handler writes it; the
/// others are opened for reading.
pub struct KeyStore<'a> {
    ctx: *mut raw::RedisModuleCtx,
    cmd: &'a Command,
    argv: &'a [*mut raw::RedisModuleString],
    args: &'a [&'a [u8]],
    /// Does the command change data?
    writes: bool,
    /// The first key opened (most commands open one: no allocation for it), then the others.
    first: Option<Open>,
    more: Vec<Open>,
    /// Names created for keys that are not arguments (freed on drop).
    created: Vec<OwnedStrings>,
    /// A value was written or created: the command changed (or may have changed) data and must
    /// be replicated.
    pub dirty: bool,
}

impl<'a> KeyStore<'a> {
    /// The store of `cmd` called with `argv` (whose bytes are `args`).
    pub fn new(
        ctx: *mut raw::RedisModuleCtx,
        cmd: &'a Command,
        argv: &'a [*mut raw::RedisModuleString],
        args: &'a [&'a [u8]],
    ) -> KeyStore<'a> {
        let writes = cmd.flags.changes_data();
        KeyStore {
            ctx,
            cmd,
            argv,
            args,
            writes,
            first: None,
            more: Vec::new(),
            created: Vec::new(),
            dirty: false,
        }
    }

    /// The open key named `key` (opening it, or reopening it for writing when `write` and it was
    /// opened for reading).
    fn key(&mut self, key: &[u8], write: bool) -> *mut raw::RedisModuleKey {
        // SAFETY: every name is an argument of this command or a string this store owns.
        let same = |o: &Open| unsafe { string_bytes(o.name) == key };
        let found = self.first.iter_mut().chain(self.more.iter_mut()).find(|o| same(o));
        if let Some(o) = found {
            if write && !o.write {
                // SAFETY: opened by this store and not closed; no borrow of its value outlives
                // the `&mut self` call that made it.
                unsafe { raw::RedisModule_CloseKey.unwrap()(o.key) };
                o.key = open_raw(self.ctx, o.name, true);
                o.write = true;
            }
            return o.key;
        }
        // The argument holding the key, a position of the first key spec first (opened for
        // writing by a command that changes data).
        let main = self.cmd.main_key_positions(self.args).find(|&p| self.args[p] == key);
        let position = main.or_else(|| (1..self.args.len()).find(|&p| self.args[p] == key));
        let write = write || (self.writes && main.is_some());
        let name = match position {
            Some(p) => self.argv[p],
            None => {
                // A key that is not an argument (a handler deriving a key name): a string of our
                // own, freed when the store is.
                // SAFETY: the module is loaded; the bytes are valid for the call.
                let s = unsafe { OwnedStrings::new(&[key]) };
                let name = s.0[0];
                self.created.push(s);
                name
            }
        };
        let handle = open_raw(self.ctx, name, write);
        let open = Open { name, key: handle, write };
        if self.first.is_none() {
            self.first = Some(open);
        } else {
            self.more.push(open);
        }
        handle
    }

    /// What an open key holds, as a raw value pointer.
    fn probe(key: *mut raw::RedisModuleKey) -> Held<*mut dyn Data> {
        if key.is_null() {
            return Held::Missing;
        }
        // SAFETY: `key` is an open key of this context.
        unsafe {
            let kt = raw::RedisModule_KeyType.unwrap()(key);
            if kt == raw::REDISMODULE_KEYTYPE_EMPTY as c_int {
                return Held::Missing;
            }
            if kt != raw::REDISMODULE_KEYTYPE_MODULE as c_int {
                return Held::Other;
            }
            let t = raw::RedisModule_ModuleTypeGetType.unwrap()(key);
            match types::by_raw(t) {
                Some(reg) => Held::Data((reg.as_dyn)(raw::RedisModule_ModuleTypeGetValue.unwrap()(key))),
                None => Held::Other,
            }
        }
    }
}

impl Drop for KeyStore<'_> {
    fn drop(&mut self) {
        for o in self.first.iter().chain(&self.more) {
            if !o.key.is_null() {
                // SAFETY: opened by this store and not closed yet.
                unsafe { raw::RedisModule_CloseKey.unwrap()(o.key) };
            }
        }
    }
}

// The values behind the pointers are boxes owned by Redis's keyspace; they live while their key
// is open, which is as long as `self` is borrowed, and no key is closed while a borrow lasts.
impl Store for KeyStore<'_> {
    fn read(&mut self, key: &[u8]) -> Held<&dyn Data> {
        let k = self.key(key, false);
        match Self::probe(k) {
            Held::Missing => Held::Missing,
            // SAFETY: see above; the value is one of our boxes, of the type Redis reports.
            Held::Data(d) => Held::Data(unsafe { &*d }),
            Held::Other => Held::Other,
        }
    }

    fn write(&mut self, key: &[u8]) -> Held<&mut dyn Data> {
        let k = self.key(key, self.writes);
        match Self::probe(k) {
            Held::Missing => Held::Missing,
            Held::Data(d) => {
                self.dirty = true;
                // SAFETY: as in `read`; `&mut self` makes the borrow exclusive.
                Held::Data(unsafe { &mut *d })
            }
            Held::Other => Held::Other,
        }
    }

    fn read_many<'s>(&'s mut self, keys: &[&[u8]]) -> Vec<Held<&'s dyn Data>> {
        let handles: Vec<_> = keys.iter().map(|k| self.key(k, false)).collect();
        handles
            .into_iter()
            .map(|k| match Self::probe(k) {
                Held::Missing => Held::Missing,
                // SAFETY: as in `read`; the values are only read while `self` is borrowed.
                Held::Data(d) => Held::Data(unsafe { &*d }),
                Held::Other => Held::Other,
            })
            .collect()
    }

    fn set(&mut self, key: &[u8], value: Box<dyn Data>) -> &mut dyn Data {
        let k = self.key(key, true);
        let reg = types::by_type_id(value.as_any().type_id())
            .unwrap_or_else(|| panic!("{} is not a registered data type", value.type_name()));
        let raw_value = (reg.into_raw)(value);
        // SAFETY: the key is open for writing; Redis deletes what it held (any type) and takes
        // ownership of `raw_value`, freed with the type's `free` callback.
        let stored = unsafe { raw::RedisModule_ModuleTypeSetValue.unwrap()(k, reg.raw(), raw_value) };
        assert_eq!(stored, raw::REDISMODULE_OK as c_int, "RedisModule_ModuleTypeSetValue failed");
        self.dirty = true;
        // SAFETY: Redis now owns the box and keeps it while the key is open.
        unsafe { &mut *(reg.as_dyn)(raw_value) }
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        let k = self.key(key, true);
        if matches!(Self::probe(k), Held::Missing) {
            return false;
        }
        // SAFETY: the key is open for writing and no borrow of its value outlives the `&mut
        // self` call that made it; Redis frees the value (our type's `free` callback) and the
        // handle stays open on an empty key until the store closes it.
        let deleted = unsafe { raw::RedisModule_DeleteKey.unwrap()(k) };
        assert_eq!(
            deleted,
            raw::REDISMODULE_OK as c_int,
            "RedisModule_DeleteKey failed on a key open for writing"
        );
        self.dirty = true;
        true
    }
}

fn open_raw(
    ctx: *mut raw::RedisModuleCtx,
    name: *mut raw::RedisModuleString,
    write: bool,
) -> *mut raw::RedisModuleKey {
    let mode = raw::REDISMODULE_READ as c_int | if write { raw::REDISMODULE_WRITE as c_int } else { 0 };
    // SAFETY: `ctx` is the running command's and `name` a valid string.
    unsafe { raw::RedisModule_OpenKey.unwrap()(ctx, name, mode).cast() }
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

    fn defaults(&self) -> Defaults {
        crate::config::defaults()
    }

    /// `maxmemory` when set, else the library's default LOADCHUNK budget (4 GiB), as in
    /// sift-server: a request beyond it is refused before allocating.
    fn memory_budget(&mut self) -> u64 {
        match maxmemory(self.ctx) {
            0 => LoadLimits::DEFAULT.max_bytes,
            m => m,
        }
    }

    /// Redis's clock. A command replicated from a primary or replayed from the AOF carries its
    /// time explicitly (the handlers propagate it so), so only the primary's clock is read.
    fn now_ms(&self) -> u64 {
        // SAFETY: the module is loaded.
        unsafe { raw::RedisModule_Milliseconds.unwrap()() }.max(0) as u64
    }

    fn propagate(&mut self, commands: Vec<Vec<Vec<u8>>>) {
        self.propagate = Some(commands);
    }
}

/// Replicates (and feeds the AOF) one command given as byte strings.
unsafe fn replicate(ctx: *mut raw::RedisModuleCtx, cmd: &[Vec<u8>]) {
    let Some((name, args)) = cmd.split_first() else { return };
    let args: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
    // SAFETY: `ctx` is the running command's; Redis retains what it keeps of the strings ("v": a
    // vector of module strings and its length), which are freed when `strings` drops.
    unsafe {
        let strings = OwnedStrings::new(&args);
        let name = CString::new(name.clone()).unwrap_or_default();
        raw::RedisModule_Replicate.unwrap()(
            ctx,
            name.as_ptr(),
            c"v".as_ptr(),
            strings.0.as_ptr(),
            strings.0.len(),
        );
    }
}

/// Runs a registered command: opens its keys, calls the shared handler (after the arity check),
/// replies, and replicates a call that changed data (verbatim, or the handler's explicit
/// commands: an auto-create's header, a time made explicit).
///
/// # Safety
/// Called from a command callback, with Redis's valid context and `argc` valid strings in `argv`.
pub unsafe fn dispatch(
    cmd: &Command,
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let argc = argc.max(0) as usize;
    // SAFETY: per the contract, `argv[0..argc]` are valid for the whole call.
    let strings: &[*mut raw::RedisModuleString] =
        if argc == 0 { &[] } else { unsafe { std::slice::from_raw_parts(argv, argc) } };
    // SAFETY: as above.
    let args: Vec<&[u8]> = strings.iter().map(|&s| unsafe { string_bytes(s) }).collect();
    let mut store = KeyStore::new(ctx, cmd, strings, &args);
    let mut env = ModuleEnv { ctx, propagate: None };
    let reply = sift_commands::run(cmd, &mut store, &mut env, &args);
    // SAFETY: `ctx` is the running command's.
    unsafe {
        crate::reply::send(ctx, &reply);
        if cmd.flags.changes_data() && store.dirty {
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
