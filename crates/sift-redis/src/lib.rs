//! `libsift_redis.so`: a Redis module with RedisBloom's `BF.*` and `CF.*` commands and its two
//! data types, `MBbloom--` and `MBbloomCF`, on the sift library. A RedisBloom user swaps
//! `--loadmodule redisbloom.so` for `--loadmodule libsift_redis.so`; the data on disk (RDB, AOF),
//! the replies and the errors stay the same.
//!
//! The commands are the ones sift-server runs: `sift_commands` holds their argument checks,
//! effects and replies over an abstract store; this crate only implements that store over Redis
//! keys ([`store`]), turns replies into Redis reply calls ([`reply`]), and provides the data type
//! callbacks (RDB in RedisBloom's encoding, AOF rewrite as LOADCHUNK commands, memory usage,
//! digest; [`types`]).
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

use redis_module::{raw, redis_module, Context, RedisString, Status};

/// The module name Redis reports (`MODULE LIST`, `HELLO`): RedisBloom's, so clients that look
/// for it find it.
pub const MODULE_NAME: &str = "bf";

/// The module version Redis reports (`MODULE LIST`, `INFO modules`, `HELLO`): the RedisBloom
/// version whose behaviour the commands reproduce, the same number sift-server reports.
pub const MODULE_VERSION: i32 = sift_commands::REDISBLOOM_VERSION;

/// The command callbacks, one `extern "C"` function per entry of `sift_commands::COMMANDS`
/// (Redis passes no user data to a command callback).
macro_rules! callbacks {
    ($($i:literal => $f:ident),* $(,)?) => {
        $(
            unsafe extern "C" fn $f(
                ctx: *mut raw::RedisModuleCtx,
                argv: *mut *mut raw::RedisModuleString,
                argc: c_int,
            ) -> c_int {
                // SAFETY: Redis calls command callbacks with a valid context and `argc` strings.
                unsafe { store::dispatch(sift_commands::COMMANDS[$i], ctx, argv, argc) }
            }
        )*
        const CALLBACKS: [unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int; 25] = [$($f),*];
    };
}

callbacks!(
    0 => c0, 1 => c1, 2 => c2, 3 => c3, 4 => c4, 5 => c5, 6 => c6, 7 => c7, 8 => c8, 9 => c9,
    10 => c10, 11 => c11, 12 => c12, 13 => c13, 14 => c14, 15 => c15, 16 => c16, 17 => c17,
    18 => c18, 19 => c19, 20 => c20, 21 => c21, 22 => c22, 23 => c23, 24 => c24,
);

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
        types::set_registered(vec![
            types::entry::<BloomChain>(*BLOOM_TYPE.raw_type.borrow()),
            types::entry::<CuckooFilter>(*CUCKOO_TYPE.raw_type.borrow()),
        ]);
        for (i, cmd) in sift_commands::COMMANDS.iter().enumerate() {
            let name = CString::new(cmd.name).expect("command names have no NUL");
            let flags = CString::new(cmd.flags.redis_flags()).expect("flags have no NUL");
            let created = raw::RedisModule_CreateCommand.expect("CreateCommand")(
                ctx.ctx,
                name.as_ptr(),
                Some(CALLBACKS[i]),
                flags.as_ptr(),
                1,
                1,
                1,
            );
            if created != raw::REDISMODULE_OK as c_int {
                ctx.log_warning(&format!("sift-redis: could not register {}", cmd.name));
                return Status::Err;
            }
            set_arity(ctx, &name, cmd.arity);
        }
    }
    config::register_module_configs(ctx);
    Status::Ok
}

/// The version block `RedisModule_SetCommandInfo` checks the struct sizes against
/// (`REDISMODULE_COMMAND_INFO_VERSION` of redismodule.h).
static COMMAND_INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// Registers the command's arity (spec §2.3) so that Redis checks it before the handler, as for
/// RedisBloom, and `COMMAND INFO` reports it (a module command created without it shows -1).
/// Everything else is left as `CreateCommand` set it (flags, key positions 1 1 1). Commands
/// registered with arity -1 (CF.COMPACT) need no call, and servers without it (Redis < 7) keep
/// -1; the arity is checked before the handler either way, with the same error text.
///
/// # Safety
/// `ctx` is the load context; `name` a command this module has just created.
unsafe fn set_arity(ctx: &Context, name: &CString, arity: i32) {
    if arity == -1 {
        return;
    }
    let (Some(get), Some(set)) = (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) else {
        return;
    };
    // SAFETY: the caller passes the load context and a command name it registered.
    let command = unsafe { get(ctx.ctx, name.as_ptr()) };
    if command.is_null() {
        return;
    }
    let info = raw::RedisModuleCommandInfo {
        version: &COMMAND_INFO_VERSION,
        summary: std::ptr::null(),
        complexity: std::ptr::null(),
        since: std::ptr::null(),
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: arity as c_int,
        key_specs: std::ptr::null_mut(),
        args: std::ptr::null_mut(),
    };
    // SAFETY: `command` came from GetCommand; `info` is a fully initialised version-1 struct
    // (null pointers mean "not given") that Redis reads during the call only.
    if unsafe { set(command, &info) } != raw::REDISMODULE_OK as c_int {
        ctx.log_warning(&format!("sift-redis: could not set the arity of {}", name.to_string_lossy()));
    }
}

redis_module! {
    name: MODULE_NAME,
    version: MODULE_VERSION,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [BLOOM_TYPE, CUCKOO_TYPE],
    init: init,
}

use sift::compat::redisbloom::{BloomChain, CuckooFilter};

/// `MBbloom--`: RedisBloom's scalable Bloom filter type.
pub static BLOOM_TYPE: redis_module::native_types::RedisType =
    redis_module::native_types::RedisType::new("MBbloom--", 4, types::methods::<BloomChain>());

/// `MBbloomCF`: RedisBloom's cuckoo filter type.
pub static CUCKOO_TYPE: redis_module::native_types::RedisType =
    redis_module::native_types::RedisType::new("MBbloomCF", 4, types::methods::<CuckooFilter>());
