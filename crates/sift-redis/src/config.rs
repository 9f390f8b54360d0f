//! The eight RedisBloom parameters (spec §3) inside Redis: set from the module's load arguments,
//! and exposed as module configs (`CONFIG GET/SET bf.bf-error-rate` ...) where the server has the
//! module-config API (Redis ≥ 7.0).
//!
//! Validation, coupled cuckoo bounds and the stored strings are `sift_commands::FilterConfig`'s,
//! the same as sift-server's `CONFIG SET`.

use std::ffi::{c_char, c_int, c_longlong, c_uint, c_void, CString};
use std::sync::{LazyLock, RwLock};

use redis_module::{raw, Context};
use sift_commands::config::NAMES;
use sift_commands::FilterConfig;

static CONFIG: LazyLock<RwLock<FilterConfig>> = LazyLock::new(|| RwLock::new(FilterConfig::default()));

/// The current parameters (a copy).
pub fn current() -> FilterConfig {
    CONFIG.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The defaults the handlers use (no allocation: read on every BF/CF write).
pub fn defaults() -> sift_commands::Defaults {
    CONFIG.read().unwrap_or_else(|e| e.into_inner()).defaults()
}

/// Sets one parameter (any of its names), as `CONFIG SET` would.
pub fn set(name: &str, value: &[u8]) -> Result<(), sift_commands::config::ConfigError> {
    CONFIG.write().unwrap_or_else(|e| e.into_inner()).set(name, value)
}

/// Applies `name value` pairs given to `--loadmodule` / `MODULE LOAD`.
pub fn load_args(args: &[Vec<u8>]) -> Result<(), String> {
    if args.len() % 2 != 0 {
        return Err("arguments come in name/value pairs".into());
    }
    for pair in args.chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]);
        set(&name, &pair[1]).map_err(|e| e.message())?;
    }
    Ok(())
}

/// `privdata` of a module config: the index of its name in `NAMES`.
fn index_of(privdata: *mut c_void) -> usize {
    privdata as usize
}

fn set_error(err: *mut *mut raw::RedisModuleString, text: &str) {
    // SAFETY: Redis passes a valid out-pointer and takes ownership of the string.
    unsafe {
        if !err.is_null() {
            if let Some(create) = raw::RedisModule_CreateString {
                *err = create(std::ptr::null_mut(), text.as_ptr().cast(), text.len());
            }
        }
    }
}

extern "C" fn get_numeric(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    let c = current();
    c.get(NAMES[index_of(privdata)]).and_then(|s| s.parse().ok()).unwrap_or(0)
}

extern "C" fn set_numeric(
    _name: *const c_char,
    val: c_longlong,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    match set(NAMES[index_of(privdata)], val.to_string().as_bytes()) {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(e) => {
            set_error(err, &e.reason());
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// The last string handed to Redis by [`get_string`] (Redis does not free it; the next call
/// replaces it).
static ERROR_RATE_STRING: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

extern "C" fn get_string(_name: *const c_char, privdata: *mut c_void) -> *mut raw::RedisModuleString {
    let text = current().get(NAMES[index_of(privdata)]).unwrap_or("").to_string();
    let mut slot = ERROR_RATE_STRING.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: strings created with a NULL context are owned by the module until freed; the
    // previous one is no longer referenced by Redis once it asks again.
    unsafe {
        let s = raw::RedisModule_CreateString.expect("CreateString")(
            std::ptr::null_mut(),
            text.as_ptr().cast(),
            text.len(),
        );
        if *slot != 0 {
            raw::RedisModule_FreeString.expect("FreeString")(std::ptr::null_mut(), *slot as *mut _);
        }
        *slot = s as usize;
        s
    }
}

extern "C" fn set_string(
    _name: *const c_char,
    val: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: *mut *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: Redis passes a valid string for the duration of the call.
    let bytes = unsafe { crate::strings::string_bytes(val) }.to_vec();
    match set(NAMES[index_of(privdata)], &bytes) {
        Ok(()) => raw::REDISMODULE_OK as c_int,
        Err(e) => {
            set_error(err, &e.reason());
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// Registers the eight parameters as module configs (`bf.<name>`), with the values the load
/// arguments set as defaults, then loads them (Redis applies `bf.*` lines of its config file).
/// Servers without the module-config API (Redis < 7.0) keep the load arguments only.
pub fn register_module_configs(ctx: &Context) {
    // SAFETY: the API pointers were filled by RedisModule_Init; the names and defaults are
    // NUL-terminated strings that live across each call.
    unsafe {
        let (Some(reg_num), Some(reg_str), Some(load)) = (
            raw::RedisModule_RegisterNumericConfig,
            raw::RedisModule_RegisterStringConfig,
            raw::RedisModule_LoadConfigs,
        ) else {
            ctx.log_notice("sift-redis: no module-config API; parameters are load arguments only");
            return;
        };
        let c = current();
        for (i, name) in NAMES.iter().enumerate() {
            let cname = CString::new(*name).expect("no NUL");
            let privdata = i as *mut c_void;
            let value = c.get(name).unwrap_or("0");
            let rc = if *name == "bf-error-rate" {
                let default = CString::new(value).expect("no NUL");
                reg_str(
                    ctx.ctx,
                    cname.as_ptr(),
                    default.as_ptr(),
                    raw::REDISMODULE_CONFIG_DEFAULT as c_uint,
                    Some(get_string),
                    Some(set_string),
                    None,
                    privdata,
                )
            } else {
                // Redis checks this wide range; `FilterConfig::set` applies the exact (moving)
                // bounds of spec §3 and their texts.
                reg_num(
                    ctx.ctx,
                    cname.as_ptr(),
                    value.parse().unwrap_or(0),
                    raw::REDISMODULE_CONFIG_DEFAULT as c_uint,
                    0,
                    1 << 30,
                    Some(get_numeric),
                    Some(set_numeric),
                    None,
                    privdata,
                )
            };
            if rc != raw::REDISMODULE_OK as c_int {
                ctx.log_warning(&format!("sift-redis: could not register config bf.{name}"));
                return;
            }
        }
        if load(ctx.ctx) != raw::REDISMODULE_OK as c_int {
            ctx.log_warning("sift-redis: loading module configs failed");
        }
    }
}

/// For tests and logs: the parameters as `name value` lines.
pub fn describe() -> String {
    let c = current();
    NAMES.iter().map(|n| format!("{n} {}", c.get(n).unwrap_or(""))).collect::<Vec<_>>().join("\n")
}
