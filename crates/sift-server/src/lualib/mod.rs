//! The extra Lua libraries Redis 7 gives scripts: [`bit`] (LuaBitOp's 32-bit operations),
//! [`cjson`] (JSON), [`cmsgpack`] (MessagePack) and [`structlib`] (`struct`, binary records),
//! written for sift from their documented behaviour and checked reply for reply against
//! Debian's redis-server 7.0.15: the cases recorded by `scripts/lua_libs_fixture.py` are
//! replayed byte for byte by `tests/scripting.rs`.
//!
//! # How a library function fails
//!
//! Redis's libraries are C functions that fail with `luaL_error` / `luaL_argerror`: the error is
//! a Lua *string*, prefixed with the calling line (`user_script:3: Cannot serialise ...`, nothing
//! when the caller is a C function such as `pcall`), and an argument error names the function as
//! the call site does (`bad argument #1 to 'band'`; `'?'` through `pcall(bit.band, ...)`). A core
//! here answers [`LibErr`]; [`set`] turns it into that text ([`raise`], from Lua's own debug
//! information) inside a [`LibError`], which the script engine gives a script's `pcall` as the
//! plain string (see `crate::script`). Errors of the VM itself (out of memory) stay as they are.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod structlib;

use mlua::{IntoLuaMulti, Lua, Table, Value, Variadic};

/// Why a library call failed.
#[derive(Debug)]
pub enum LibErr {
    /// `luaL_argerror(n, msg)`: argument `n` (1-based; 0 for "the call itself").
    Arg(usize, String),
    /// `luaL_error(msg)`.
    Msg(String),
    /// An error the Lua core raises from inside a C function (`table index is nil`): no position.
    Raw(String),
}

/// What a core answers: `Ok(Ok(values))`, `Ok(Err(why))` for an error the script sees as a C
/// library's, `Err` for a VM error.
pub type Answer<T> = mlua::Result<std::result::Result<T, LibErr>>;

/// A failed library call inside a core: the script's error, or the VM's (`?` converts both).
pub enum Fail {
    /// An error the script sees.
    Script(LibErr),
    /// An error of the VM (out of memory).
    Vm(mlua::Error),
}

impl Fail {
    /// `luaL_error(msg)`.
    pub fn msg(m: impl Into<String>) -> Fail {
        Fail::Script(LibErr::Msg(m.into()))
    }
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Fail {
        Fail::Vm(e)
    }
}

impl From<LibErr> for Fail {
    fn from(e: LibErr) -> Fail {
        Fail::Script(e)
    }
}

/// A core's [`Fail`] as an [`Answer`].
pub fn answer<T>(r: std::result::Result<T, Fail>) -> Answer<T> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(Fail::Script(e)) => Ok(Err(e)),
        Err(Fail::Vm(e)) => Err(e),
    }
}

/// A library error as the script sees it (the full message, position included).
#[derive(Debug)]
pub struct LibError(pub String);

impl std::fmt::Display for LibError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LibError {}

/// The text of a [`LibError`] inside an mlua error, if it is one.
pub fn lib_error(e: &mlua::Error) -> Option<String> {
    match e {
        mlua::Error::CallbackError { cause, .. } => lib_error(cause),
        mlua::Error::WithContext { cause, .. } => lib_error(cause),
        mlua::Error::ExternalError(x) => x.downcast_ref::<LibError>().map(|l| l.0.clone()),
        _ => None,
    }
}

/// The error `luaL_error` / `luaL_argerror` would raise from the running C function.
pub fn raise(lua: &Lua, why: LibErr) -> mlua::Error {
    let msg = match why {
        LibErr::Raw(m) => return mlua::Error::external(LibError(m)),
        LibErr::Msg(m) => m,
        LibErr::Arg(n, m) => {
            // Level 0 is the running (Rust, i.e. C) function; Lua names it from the call site.
            let (name, method) = lua
                .inspect_stack(0, |d| {
                    let names = d.names();
                    (names.name.map(|s| s.into_owned()), names.name_what == Some("method"))
                })
                .unwrap_or((None, false));
            let name = name.unwrap_or_else(|| "?".into());
            let n = n as i64 - i64::from(method);
            if method && n == 0 {
                format!("calling '{name}' on bad self ({m})")
            } else {
                format!("bad argument #{n} to '{name}' ({m})")
            }
        }
    };
    // luaL_where(1): the caller's position when it is a Lua function with line information.
    let place = lua
        .inspect_stack(1, |d| {
            let line = d.current_line()?;
            let src = d.source().short_src?.into_owned();
            Some(format!("{src}:{line}: "))
        })
        .flatten()
        .unwrap_or_default();
    mlua::Error::external(LibError(format!("{place}{msg}")))
}

/// Lua values (strings, tables) one library call may hold at once. mlua keeps every value Rust
/// code holds in one auxiliary stack of at most 8000 slots (Lua's `LUAI_MAXCSTACK`) for the
/// whole VM, and panics past it; the rest is left to the VM itself (its baseline, the cached
/// scripts, the call's arguments). Redis's C libraries hold them on the Lua stack, up to 8000:
/// a call that would hold more than this here answers the error Redis gives at its own bound.
pub const MAX_REFS: usize = 6000;

/// Is `v` held through an mlua reference (see [`MAX_REFS`])?
pub fn is_ref(v: &Value) -> bool {
    !matches!(
        v,
        Value::Nil | Value::Boolean(_) | Value::Integer(_) | Value::Number(_) | Value::LightUserData(_)
    )
}

/// The VM's memory limit lifted while a library call creates many values, and enforced by the
/// call itself instead ([`Unlimited::tick`]).
///
/// With a limit set, mlua makes every value it creates (a string, a table, a `raw_set`) in a
/// protected call through a fresh C closure: one allocation, one `lua_pcall` and more garbage for
/// the collector per value. That made `cjson.decode` of 13 MB ~9× slower than Redis's, and ten
/// of them in a row ran past a minute. Without a limit mlua calls Lua directly. The limit comes
/// back when this is dropped; meanwhile `tick` fails the call with Lua's memory error once the VM
/// uses more than it, so a decode passes the limit by at most [`Unlimited::EVERY`] values (each
/// no larger than the call's input, which is already in memory).
pub struct Unlimited<'a> {
    lua: &'a Lua,
    limit: usize,
    count: usize,
}

impl<'a> Unlimited<'a> {
    /// How many values between two looks at the VM's memory.
    pub const EVERY: usize = 256;

    /// Lifts `lua`'s memory limit until the result is dropped.
    pub fn new(lua: &'a Lua) -> Unlimited<'a> {
        let limit = lua.set_memory_limit(0).unwrap_or(0);
        Unlimited { lua, limit, count: 0 }
    }

    /// One more value made: an error once the VM uses more than its limit.
    #[inline]
    pub fn tick(&mut self) -> mlua::Result<()> {
        self.count += 1;
        if self.count % Self::EVERY == 0 && self.limit != 0 && self.lua.used_memory() > self.limit {
            return Err(mlua::Error::MemoryError("not enough memory".into()));
        }
        Ok(())
    }
}

impl Drop for Unlimited<'_> {
    fn drop(&mut self) {
        let _ = self.lua.set_memory_limit(self.limit);
    }
}

/// Installs `bit`, `cjson`, `cmsgpack` and `struct` as globals of `lua` (before the VM's baseline is taken, so they are
/// protected like the other libraries).
pub fn register(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    g.raw_set("bit", bit::library(lua)?)?;
    g.raw_set("cjson", cjson::library(lua)?)?;
    g.raw_set("cmsgpack", cmsgpack::library(lua)?)?;
    g.raw_set("struct", structlib::library(lua)?)?;
    Ok(())
}

/// Sets `table[name]` to the library function with core `f`.
pub fn set<F, R>(lua: &Lua, table: &Table, name: &str, f: F) -> mlua::Result<()>
where
    F: Fn(&Lua, Variadic<Value>) -> Answer<R> + Send + 'static,
    R: IntoLuaMulti,
{
    let func = lua.create_function(move |lua, args: Variadic<Value>| match f(lua, args)? {
        Ok(v) => Ok(v),
        Err(why) => Err(raise(lua, why)),
    })?;
    table.raw_set(name, func)
}

/// Lua's name of a value's type, as `luaL_typename` (`None`: a missing argument).
pub fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// `luaL_checknumber`: argument `i` (0-based) as a number; numeric strings convert as in Lua.
pub fn check_number(lua: &Lua, args: &[Value], i: usize) -> Answer<f64> {
    let v = args.get(i);
    let n = match v {
        Some(Value::Integer(n)) => Some(*n as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(s @ Value::String(_)) => lua.coerce_number(s.clone())?,
        _ => None,
    };
    Ok(n.ok_or_else(|| LibErr::Arg(i + 1, format!("number expected, got {}", type_name(v)))))
}

/// `luaL_checklstring`: argument `i` (0-based) as bytes; a number converts as Lua writes it.
pub fn check_string(args: &[Value], i: usize) -> std::result::Result<Vec<u8>, LibErr> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => Ok(format_g(*n as f64, 14).into_bytes()),
        Some(Value::Number(n)) => Ok(format_g(*n, 14).into_bytes()),
        v => Err(LibErr::Arg(i + 1, format!("string expected, got {}", type_name(v)))),
    }
}

/// C's `(int64_t)` / `(long long)` cast of a double on x86-64: truncation toward zero, and
/// `i64::MIN` (`cvttsd2si`'s "integer indefinite") for NaN and for values out of range, where
/// Rust's `as` saturates. How Redis turns a Lua number into an integer reply, and how its C
/// libraries read integer arguments.
pub fn c_int64(n: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if n.is_nan() || !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// `luaL_checkinteger`: argument `i` (0-based) as a `lua_Integer` (64 bits), converted as C
/// casts a double on x86-64 ([`c_int64`]).
pub fn check_integer(lua: &Lua, args: &[Value], i: usize) -> Answer<i64> {
    Ok(check_number(lua, args, i)?.map(c_int64))
}

/// `luaL_optinteger`: `default` when argument `i` is absent or nil.
pub fn opt_integer(lua: &Lua, args: &[Value], i: usize, default: i64) -> Answer<i64> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(Ok(default)),
        Some(_) => check_integer(lua, args, i),
    }
}

/// C's `%.<precision>g` (1 ≤ precision ≤ 17) of a double, as glibc prints it: how Lua and cjson
/// write numbers.
pub fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let p = precision.clamp(1, 17);
    // An integer of at most `p` digits prints as itself (the common case, and Rust's exact
    // `{:e}` below is slow: a bignum fallback for many values).
    if x.fract() == 0.0 && x.abs() < 10f64.powi(p as i32) {
        return format!("{}", x as i64);
    }
    // The exponent after rounding to p significant digits decides the style.
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    if exp < -4 || exp >= p as i32 {
        let mantissa = trim_fraction(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim_fraction(&format!("{x:.decimals$}")).to_string()
    }
}

/// `1.2300` → `1.23`, `5.000` → `5`, `12` → `12`.
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_g_matches_c() {
        // Expected strings: glibc's printf("%.14g") / ("%.17g") for the same doubles.
        let cases: &[(f64, usize, &str)] = &[
            (0.1, 14, "0.1"),
            (1e15, 14, "1e+15"),
            (1e14, 14, "1e+14"),
            (123456789012345.0, 14, "1.2345678901234e+14"),
            (std::f64::consts::PI, 14, "3.1415926535898"),
            (-0.0, 14, "-0"),
            (9007199254740992.0, 14, "9.007199254741e+15"),
            (1e-5, 14, "1e-05"),
            (0.0001, 14, "0.0001"),
            (100.0, 14, "100"),
            (2.5, 1, "2"),
            (3.14158, 3, "3.14"),
            (1e300, 14, "1e+300"),
            (-1.5e-300, 14, "-1.5e-300"),
            (0.1, 17, "0.10000000000000001"),
            (f64::from_bits(1), 17, "4.9406564584124654e-324"),
            (f64::NAN, 14, "nan"),
            (f64::NEG_INFINITY, 14, "-inf"),
            (99999999999999.5, 14, "1e+14"),
            (12345.678, 14, "12345.678"),
            (99999999999999.0, 14, "99999999999999"),
            (100000000000000.0, 14, "1e+14"),
            (-42.0, 14, "-42"),
            (123.0, 2, "1.2e+02"),
            (99.0, 2, "99"),
            (0.125, 2, "0.12"),
            (0.375, 2, "0.38"),
        ];
        for &(x, p, want) in cases {
            assert_eq!(format_g(x, p), want, "%.{p}g of {x:e}");
        }
    }
}
