//! `bit`: LuaBitOp 1.0's operations on 32-bit integers, as Redis 7 provides them to scripts.
//!
//! A number becomes a 32-bit integer as LuaBitOp does it: add 2^52 + 2^51 to the double and
//! keep the low 32 bits of its representation (so values wrap modulo 2^32 and fractions round
//! to nearest, ties to even; NaN gives 0). Results are signed 32-bit numbers. Shift counts use
//! their low 5 bits. Arguments may be numbers or numeric strings; anything else is
//! `bad argument #i to 'f' (number expected, got T)`.

use mlua::{Lua, Table, Value, Variadic};

use super::{check_number, set, Answer};

/// LuaBitOp's conversion of a number to 32 bits.
pub fn tobit(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

/// Argument `i` (0-based) as 32 bits.
fn arg(lua: &Lua, args: &[Value], i: usize) -> Answer<u32> {
    Ok(check_number(lua, args, i)?.map(tobit))
}

fn out(b: u32) -> Value {
    Value::Number(b as i32 as f64)
}

/// `bit.tohex(x [, n])`: the low `|n|` (at most 8, default 8) hex digits, upper case if `n < 0`.
pub fn tohex(b: u32, n: i32) -> String {
    let digits: &[u8; 16] = if n < 0 { b"0123456789ABCDEF" } else { b"0123456789abcdef" };
    let n = n.unsigned_abs().min(8);
    (0..n).rev().map(|i| digits[((b >> (4 * i)) & 15) as usize] as char).collect()
}

/// The `bit` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    set(lua, &t, "tobit", |lua, a: Variadic<Value>| Ok(arg(lua, &a, 0)?.map(out)))?;
    set(lua, &t, "bnot", |lua, a: Variadic<Value>| Ok(arg(lua, &a, 0)?.map(|b| out(!b))))?;
    set(lua, &t, "bswap", |lua, a: Variadic<Value>| Ok(arg(lua, &a, 0)?.map(|b| out(b.swap_bytes()))))?;
    type Fold = fn(u32, u32) -> u32;
    let folds: [(&'static str, Fold); 3] =
        [("band", |x, y| x & y), ("bor", |x, y| x | y), ("bxor", |x, y| x ^ y)];
    for (name, op) in folds {
        set(lua, &t, name, move |lua, a: Variadic<Value>| {
            let mut acc = match arg(lua, &a, 0)? {
                Ok(b) => b,
                Err(e) => return Ok(Err(e)),
            };
            for i in 1..a.len() {
                match arg(lua, &a, i)? {
                    Ok(b) => acc = op(acc, b),
                    Err(e) => return Ok(Err(e)),
                }
            }
            Ok(Ok(out(acc)))
        })?;
    }
    let shifts: [(&'static str, Fold); 5] = [
        ("lshift", |b, n| b << n),
        ("rshift", |b, n| b >> n),
        ("arshift", |b, n| ((b as i32) >> n) as u32),
        ("rol", |b, n| b.rotate_left(n)),
        ("ror", |b, n| b.rotate_right(n)),
    ];
    for (name, op) in shifts {
        set(lua, &t, name, move |lua, a: Variadic<Value>| {
            let b = match arg(lua, &a, 0)? {
                Ok(b) => b,
                Err(e) => return Ok(Err(e)),
            };
            Ok(arg(lua, &a, 1)?.map(|n| out(op(b, n & 31))))
        })?;
    }
    set(lua, &t, "tohex", |lua, a: Variadic<Value>| {
        let b = match arg(lua, &a, 0)? {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        let n = if a.len() < 2 {
            8
        } else {
            match arg(lua, &a, 1)? {
                Ok(n) => n as i32,
                Err(e) => return Ok(Err(e)),
            }
        };
        Ok(Ok(Value::String(lua.create_string(tohex(b, n))?)))
    })?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_wraps_and_rounds_like_luabitop() {
        // Values from redis-server 7.0.15 (`bit.tobit`).
        assert_eq!(tobit(2f64.powi(32) + 5.0) as i32, 5);
        assert_eq!(tobit(1.5) as i32, 2);
        assert_eq!(tobit(2.5) as i32, 2);
        assert_eq!(tobit(-1.5) as i32, -2);
        assert_eq!(tobit(f64::NAN), 0);
        assert_eq!(tobit(1e300) as i32, -2_013_235_812);
        assert_eq!(tobit(2f64.powi(31)) as i32, i32::MIN);
        assert_eq!(tobit(-1.0), u32::MAX);
    }

    #[test]
    fn tohex_widths() {
        assert_eq!(tohex(255, 8), "000000ff");
        assert_eq!(tohex(u32::MAX, -4), "FFFF");
        assert_eq!(tohex(255, 2), "ff");
        assert_eq!(tohex(1, 0), "");
        assert_eq!(tohex(0x7fff_ffff, 9), "7fffffff");
        assert_eq!(tohex(0x7fff_ffff, -9), "7FFFFFFF");
        assert_eq!(tohex(1, i32::MIN), "00000001");
    }
}
