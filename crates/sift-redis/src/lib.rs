//! `libsift_redis.so`: a Redis module with RedisBloom's `BF.*` and `CF.*` commands and its two
//! data types, `MBbloom--` and `MBbloomCF`, on the sift library. A RedisBloom user swaps
//! `--loadmodule redisbloom.so` for `--loadmodule libsift_redis.so`; the data on disk (RDB, AOF),
//! the replies and the errors stay the same.
//!
//! The commands are the ones sift-server runs: `sift_commands` holds their declarations,
//! argument checks, effects and replies over an abstract store, and the data types. This crate
//! registers what `sift_commands::families` lists — every command, with one callback that
//! dispatches by name, and every data type, with Redis callbacks instantiated for each type
//! ([`types`]) — implements that store over Redis keys ([`store`]) and turns replies into Redis
//! reply calls ([`reply`]). A family added there is served here with no change in this crate.
//!
//! It is built against the `redis-module` crate with its default (Redis 6.0-compatible) API and
//! uses the raw API where newer calls are needed, so it loads on Debian's Redis 7.0.15.
//!
//! # Configuration
//!
//! Load arguments as RedisBloom's: `--loadmodule libsift_redis.so ERROR_RATE 0.01 INITIAL_SIZE
//! 100 CF_MAX_EXPANSIONS 32 bf-expansion-factor 2 cf-bucket-size 2 ...` (any of the eight names
//! of spec §3, dashed or RedisBloom's aliases, any case). On Redis ≥ 7.0 the eight parameters are
//! also module configs: `CONFIG GET bf.bf-error-rate`, `CONFIG SET bf.cf-max-expansions 64`.

// The raw Redis API is a set of `static mut` function pointers filled by `RedisModule_Init`.
#![allow(static_mut_refs)]

pub mod config;
pub mod reply;
pub mod store;
pub mod strings;
pub mod types;

use std::ffi::{c_int, CString};
use std::sync::atomic::{AtomicPtr, Ordering};

use redis_module::{raw, redis_module, Context, RedisString, Status};
use sift_commands::{Command, Family, FindKeys, Visitor};

/// The module name Redis reports (`MODULE LIST`, `HELLO`): RedisBloom's, so clients that look
/// for it find it.
pub const MODULE_NAME: &str = "bf";

/// The module version Redis reports (`MODULE LIST`, `INFO modules`, `HELLO`): the RedisBloom
/// version whose behaviour the commands reproduce, the same number sift-server reports.
pub const MODULE_VERSION: i32 = sift_commands::REDISBLOOM_VERSION;

/// The one command callback: every registered command comes here, and runs the command its name
/// (`argv[0]`, in any case) finds in the registry, or, for a command registered with
/// `getkeys-api`, answers Redis's request for its key positions.
unsafe extern "C" fn command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: Redis calls command callbacks with a valid context and `argc` valid strings, the
    // first being the command's name.
    unsafe {
        let name = if argc > 0 { strings::string_bytes(*argv) } else { &[] };
        match find(name) {
            Some(cmd)
                if getkeys_api(cmd)
                    && raw::RedisModule_IsKeysPositionRequest.is_some_and(|f| f(ctx) != 0) =>
            {
                let args: Vec<&[u8]> =
                    (0..argc.max(0) as usize).map(|i| strings::string_bytes(*argv.add(i))).collect();
                let at = raw::RedisModule_KeyAtPos.unwrap();
                for pos in cmd.key_positions(&args) {
                    at(ctx, pos as c_int);
                }
                raw::REDISMODULE_OK as c_int
            }
            Some(cmd) => store::dispatch(cmd, ctx, argv, argc),
            // Only registered names are routed here.
            None => {
                raw::RedisModule_ReplyWithError.unwrap()(ctx, c"ERR unknown command".as_ptr());
                raw::REDISMODULE_OK as c_int
            }
        }
    }
}

/// The command last found by [`find`].
static LAST: AtomicPtr<Command> = AtomicPtr::new(std::ptr::null_mut());

/// The registered command named `name` (any case). A pipelining client repeats one command, so
/// the last one found is compared first: one comparison instead of the registry's hash lookup,
/// which was 2% of redis-server's CPU under pipelined BF.EXISTS (perf).
fn find(name: &[u8]) -> Option<&'static Command> {
    let last = LAST.load(Ordering::Relaxed);
    if !last.is_null() {
        // SAFETY: only `&'static Command`s of the registry are stored.
        let cmd: &'static Command = unsafe { &*last };
        if cmd.name.as_bytes().eq_ignore_ascii_case(name) {
            return Some(cmd);
        }
    }
    let cmd = sift_commands::lookup(name)?;
    LAST.store(std::ptr::from_ref(cmd).cast_mut(), Ordering::Relaxed);
    Some(cmd)
}

/// Is `cmd` registered with `getkeys-api` (its keys are more than the legacy first/last/step)?
fn getkeys_api(cmd: &Command) -> bool {
    cmd.keys.len() > 1 || cmd.movable_keys()
}

/// Registers each family's data type: `RedisModule_CreateDataType` with the callbacks of
/// [`types::methods`] instantiated for the type.
struct RegisterTypes {
    ctx: *mut raw::RedisModuleCtx,
    types: Vec<types::Registered>,
    failed: Option<String>,
}

impl Visitor for RegisterTypes {
    fn visit<F: Family>(&mut self) {
        use sift_commands::DataType;
        if self.failed.is_some() {
            return;
        }
        let name = CString::new(F::Type::NAME).expect("type names have no NUL");
        let mut methods = types::methods::<F::Type>();
        // SAFETY: called during the module's load with its context; Redis copies the methods.
        let t = unsafe {
            raw::RedisModule_CreateDataType.unwrap()(
                self.ctx,
                name.as_ptr(),
                F::Type::ENCVER as c_int,
                &mut methods,
            )
        };
        if t.is_null() {
            self.failed = Some(format!("could not create the data type {}", F::Type::NAME));
        } else {
            self.types.push(types::entry::<F::Type>(t));
        }
    }
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_slice().to_vec()).collect();
    if let Err(e) = config::load_args(&args) {
        ctx.log_warning(&format!("sift-redis: bad module argument: {e}"));
        return Status::Err;
    }
    // SAFETY: the API pointers were filled by RedisModule_Init before `init` runs; every call
    // gets the load context.
    unsafe {
        if let Some(set) = raw::RedisModule_SetModuleOptions {
            set(ctx.ctx, raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS as c_int);
        }
    }
    let mut reg = RegisterTypes { ctx: ctx.ctx, types: Vec::new(), failed: None };
    sift_commands::families(&mut reg);
    if let Some(e) = reg.failed {
        ctx.log_warning(&format!("sift-redis: {e}"));
        return Status::Err;
    }
    types::set_registered(reg.types);
    for cmd in sift_commands::registry().commands() {
        // SAFETY: the load context.
        if let Err(e) = unsafe { register(ctx, cmd) } {
            ctx.log_warning(&format!("sift-redis: could not register {}: {e}", cmd.name));
            return Status::Err;
        }
    }
    config::register_module_configs(ctx);
    Status::Ok
}

/// Creates `cmd` with its flags and legacy key positions, then gives Redis its arity and, when
/// the legacy positions do not tell them, its key specs.
///
/// # Safety
/// `ctx` is the load context.
unsafe fn register(ctx: &Context, cmd: &Command) -> Result<(), String> {
    let name = CString::new(cmd.name).expect("command names have no NUL");
    // Keys the legacy positions cannot tell (a second key spec, a count): Redis 7.0 routes a
    // cluster request by the legacy positions or by the module's answer to a key-position request
    // (`getkeys-api`), not by key specs, which it only reports.
    let mut flags = cmd.flags.redis_flags();
    if getkeys_api(cmd) {
        flags.push_str(" getkeys-api");
    }
    let flags = CString::new(flags).expect("flags have no NUL");
    let (first, last, step) = cmd.legacy_keys();
    // SAFETY: the load context; the strings live across the call.
    let created = unsafe {
        raw::RedisModule_CreateCommand.expect("CreateCommand")(
            ctx.ctx,
            name.as_ptr(),
            Some(command),
            flags.as_ptr(),
            first,
            last,
            step,
        )
    };
    if created != raw::REDISMODULE_OK as c_int {
        return Err("RedisModule_CreateCommand failed".into());
    }
    // SAFETY: a command this module has just created.
    unsafe { set_command_info(ctx, &name, cmd) }
}

/// The version block `RedisModule_SetCommandInfo` checks the struct sizes against
/// (`REDISMODULE_COMMAND_INFO_VERSION` of redismodule.h).
static COMMAND_INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// `cmd`'s key specs as Redis takes them, ended by a zeroed entry.
fn key_specs(cmd: &Command) -> Vec<raw::RedisModuleCommandKeySpec> {
    let mut out: Vec<raw::RedisModuleCommandKeySpec> = cmd
        .keys
        .iter()
        .map(|s| {
            let (find_keys_type, fk) = match s.find {
                FindKeys::Range { lastkey, step } => (
                    raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
                    raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
                        range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                            lastkey,
                            keystep: step,
                            limit: 0,
                        },
                    },
                ),
                FindKeys::Keynum { keynumidx, firstkey, step } => (
                    raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM,
                    raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
                        keynum: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 {
                            keynumidx,
                            firstkey,
                            keystep: step,
                        },
                    },
                ),
            };
            raw::RedisModuleCommandKeySpec {
                notes: std::ptr::null(),
                // sift's key flags are Redis's REDISMODULE_CMD_KEY_* bits.
                flags: s.flags.resolve(cmd.flags).bits() as u64,
                begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
                bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
                    index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: s.begin },
                },
                find_keys_type,
                fk,
            }
        })
        .collect();
    // SAFETY: an all-zero key spec is the terminator Redis looks for (BS_INVALID, null pointers).
    out.push(unsafe { std::mem::zeroed() });
    out
}

/// Registers the command's arity (spec §2.3), so that Redis checks it before the handler, as for
/// RedisBloom, and `COMMAND INFO` reports it (a module command created without it shows -1);
/// and its key specs when the legacy `(first, last, step)` given to `CreateCommand` does not
/// describe them (a second spec, a `numkeys` count), so that Redis Cluster finds every key.
/// The rest is left as `CreateCommand` set it. Commands registered with arity -1 and one plain
/// key range (CF.COMPACT) need no call; servers without it (Redis < 7) keep -1 and the legacy
/// key positions, and the arity is checked before the handler either way.
///
/// # Safety
/// `ctx` is the load context; `name` a command this module has just created.
unsafe fn set_command_info(ctx: &Context, name: &CString, cmd: &Command) -> Result<(), String> {
    let specs = cmd.needs_key_specs();
    if cmd.arity == -1 && !specs {
        return Ok(());
    }
    let (Some(get), Some(set)) = (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) else {
        return if specs { Err("this server cannot register key specs".into()) } else { Ok(()) };
    };
    // SAFETY: the caller passes the load context and a command name it registered.
    let command = unsafe { get(ctx.ctx, name.as_ptr()) };
    if command.is_null() {
        return Err("RedisModule_GetCommand found nothing".into());
    }
    let mut key_specs = if specs { key_specs(cmd) } else { Vec::new() };
    let info = raw::RedisModuleCommandInfo {
        version: &COMMAND_INFO_VERSION,
        summary: std::ptr::null(),
        complexity: std::ptr::null(),
        since: std::ptr::null(),
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: cmd.arity as c_int,
        key_specs: if specs { key_specs.as_mut_ptr() } else { std::ptr::null_mut() },
        args: std::ptr::null_mut(),
    };
    // SAFETY: `command` came from GetCommand; `info` is a fully initialised version-1 struct
    // (null pointers mean "not given") and `key_specs` ends with a zeroed entry; Redis reads them
    // during the call only.
    if unsafe { set(command, &info) } != raw::REDISMODULE_OK as c_int {
        if specs {
            return Err("RedisModule_SetCommandInfo refused the key specs".into());
        }
        // The arity is checked by the handlers' caller anyway: a warning, not a failed load.
        ctx.log_warning(&format!("sift-redis: could not set the arity of {}", cmd.name));
    }
    Ok(())
}

redis_module! {
    name: MODULE_NAME,
    version: MODULE_VERSION,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [],
    init: init,
}
