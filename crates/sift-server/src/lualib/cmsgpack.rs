//! `cmsgpack`: lua-cmsgpack 0.4.0 (MessagePack) as Redis 7 provides it to scripts —
//! `cmsgpack.pack(...)`, `cmsgpack.unpack(s)`, `cmsgpack.unpack_one(s [, offset])`,
//! `cmsgpack.unpack_limit(s, limit [, offset])`.
//!
//! Behaviour kept from Redis's build (checked against redis-server 7.0.15):
//!
//! * **pack** encodes each argument and concatenates them. A number equal to a 64-bit integer is
//!   an integer in the smallest MessagePack form; any other number is a float 32 if that holds it
//!   exactly, else a float 64. Strings use fixstr / str 8 / 16 / 32. A table whose keys are
//!   exactly `1..n` is an array; any other table is a map (keys and values in Lua's `next`
//!   order). Tables nested more than 16 deep, functions, threads, userdata and `nil` are `nil`
//!   (0xc0). An encoding past [`MAX_OUTPUT`] bytes fails as an out-of-memory error as soon as
//!   it passes it (tables sharing subtables can encode to far more than they hold).
//! * **unpack** decodes every value (integers of all widths and floats become Lua numbers — an
//!   unsigned 64-bit value is read as signed, as Redis does — str becomes strings (the bin types, like ext, are not supported), arrays
//!   tables from 1, maps tables) and returns them all; truncated input is `Missing bytes in
//!   input.`, ext types and 0xc1 are `Bad data format in input.`. `unpack_one` / `unpack_limit`
//!   decode one / `limit` values from a 0-based byte `offset` and return first the offset of the
//!   next value (-1 at the end).
//! * Redis's Lua stack (8000 slots) bounds how many values one call returns and how deep arrays
//!   nest; the same bounds give the same `stack overflow (...)` errors here, and they also keep
//!   the recursion of this decoder bounded. Differences: a call can return at most 7999 minus
//!   its argument count values here (mlua's callback limit), where Redis returns 7999; a call
//!   holds at most [`MAX_REFS`] strings and tables at once (returned, being filled, or keys
//!   waiting for their value), so more strings or tables than that, or maps nested deeper than
//!   3000 levels under string keys, give the same `stack overflow (...)` errors; nested keys
//!   count against the stack like values.

use mlua::{Lua, MultiValue, Table, Value, Variadic};

use super::{check_integer, check_string, is_ref, opt_integer, set, Answer, Fail, LibErr, MAX_REFS};

/// Tables nested deeper are packed as nil (`LUACMSGPACK_MAX_NESTING`).
const MAX_NESTING: usize = 16;
/// Lua 5.1's `LUAI_MAXCSTACK`: the slots a C function may use.
const MAX_STACK: usize = 8000;
/// Values one call with `nargs` arguments can return through mlua (whose callbacks keep their
/// arguments on the stack): one fewer than Redis's 7999 for `unpack`.
fn max_return(nargs: usize) -> usize {
    7999 - nargs.min(7999)
}
/// Largest packed string.
pub const MAX_OUTPUT: usize = super::cjson::MAX_OUTPUT;

/// The `cmsgpack` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    set(lua, &t, "pack", |lua, a: Variadic<Value>| {
        if a.is_empty() {
            return Ok(Err(LibErr::Arg(0, "MessagePack pack needs input.".into())));
        }
        let mut out = Vec::new();
        for v in a.iter() {
            encode(&mut out, v, 0, MAX_OUTPUT)?;
        }
        Ok(Ok(Value::String(lua.create_string(out)?)))
    })?;
    set(lua, &t, "unpack", |lua, a: Variadic<Value>| {
        let s = match check_string(&a, 0) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        unpack_full(lua, &s, 0, 0, a.len())
    })?;
    set(lua, &t, "unpack_one", |lua, a: Variadic<Value>| {
        let offset = match opt_integer(lua, &a, 1, 0)? {
            Ok(o) => o,
            Err(e) => return Ok(Err(e)),
        };
        let s = match check_string(&a, 0) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        unpack_full(lua, &s, 1, offset, a.len())
    })?;
    set(lua, &t, "unpack_limit", |lua, a: Variadic<Value>| {
        let limit = match check_integer(lua, &a, 1)? {
            Ok(l) => l,
            Err(e) => return Ok(Err(e)),
        };
        let offset = match opt_integer(lua, &a, 2, 0)? {
            Ok(o) => o,
            Err(e) => return Ok(Err(e)),
        };
        let s = match check_string(&a, 0) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        unpack_full(lua, &s, limit, offset, a.len())
    })?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Appends `v`'s encoding to `out`; an out-of-memory error once `out` holds more than `limit`
/// bytes (checked at every value: tables that share subtables can encode to far more bytes
/// than they hold).
fn encode(out: &mut Vec<u8>, v: &Value, level: usize, limit: usize) -> mlua::Result<()> {
    if out.len() > limit {
        return Err(mlua::Error::MemoryError("not enough memory".into()));
    }
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n <= 0xff {
                out.extend_from_slice(&[0xd9, n as u8]);
            } else if n <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => number(out, *i as f64),
        Value::Number(n) => number(out, *n),
        Value::Table(t) if level < MAX_NESTING => table(out, t, level, limit)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn number(out: &mut Vec<u8>, n: f64) {
    let i = super::c_int64(n);
    if !n.is_infinite() && i as f64 == n {
        integer(out, i);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_bits().to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_bits().to_be_bytes());
    }
}

fn integer(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Array (0x90 / 0xdc / 0xdd) or map (0x80 / 0xde / 0xdf) header.
fn header(out: &mut Vec<u8>, n: usize, fix: u8, wide: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(wide);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(wide + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn table(out: &mut Vec<u8>, t: &Table, level: usize, limit: usize) -> mlua::Result<()> {
    // An array when every key is a number equal to a C int ≥ 1 and there are as many keys as
    // the largest one (so exactly 1..n).
    let mut count: i64 = 0;
    let mut max: i64 = 0;
    let mut array = true;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => {
                array = false;
                break;
            }
        };
        if n <= 0.0 || n > f64::from(i32::MAX) || n.fract() != 0.0 {
            array = false;
            break;
        }
        max = max.max(n as i64);
        count += 1;
    }
    if array && max == count {
        let len = t.raw_len();
        header(out, len, 0x90, 0xdc);
        for i in 1..=len {
            let v: Value = t.raw_get(i)?;
            encode(out, &v, level + 1, limit)?;
        }
    } else {
        let pairs: Vec<(Value, Value)> = t.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
        header(out, pairs.len(), 0x80, 0xde);
        for (k, v) in &pairs {
            encode(out, k, level + 1, limit)?;
            encode(out, v, level + 1, limit)?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// `mp_unpack_full`: `limit == 0 && offset == 0` decodes everything and returns the values only.
/// `limit` and `offset` are compared as the 64-bit integers Lua gives (as Redis's build does),
/// and printed as C's `%d` prints them: their low 32 bits.
fn unpack_full(lua: &Lua, s: &[u8], limit: i64, offset: i64, nargs: usize) -> Answer<MultiValue> {
    let len = s.len();
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        // Redis's message prints the input length where it says "limit".
        return Ok(Err(LibErr::Msg(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32, len as i32
        ))));
    }
    if offset as u64 > len as u64 {
        return Ok(Err(LibErr::Msg(format!(
            "Start offset {} greater than input length {}.",
            offset as i32, len as i32
        ))));
    }
    let limit = if decode_all { i64::from(i32::MAX) } else { limit };
    let mut d = Decoder { s, pos: offset as usize, stack: 1, refs: 0, mem: super::Unlimited::new(lua) };
    let mut values = Vec::new();
    let mut count = 0;
    while d.pos < len && count < limit {
        if d.stack + 1 > MAX_STACK || d.refs + 1 > MAX_REFS {
            return Ok(Err(too_many()));
        }
        match super::answer(d.value(lua))? {
            Ok(v) => {
                d.refs += usize::from(is_ref(&v));
                values.push(v)
            }
            Err(e) => return Ok(Err(e)),
        }
        d.stack += 1;
        count += 1;
    }
    if decode_all && values.len() > max_return(nargs) {
        return Ok(Err(too_many()));
    }
    if !decode_all {
        if d.stack + 1 > MAX_STACK || values.len() + 1 > max_return(nargs) {
            return Ok(Err(LibErr::Msg("stack overflow (in function mp_unpack_full)".into())));
        }
        let next = if d.pos == len { -1 } else { d.pos as i64 };
        values.insert(0, Value::Integer(next));
    }
    Ok(Ok(MultiValue::from_iter(values)))
}

fn too_many() -> LibErr {
    LibErr::Msg(
        "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)".into(),
    )
}

struct Decoder<'a> {
    s: &'a [u8],
    pos: usize,
    /// Lua stack slots Redis's decoder would hold at this point (see the module docs).
    stack: usize,
    /// mlua references held at this point: values decoded so far, tables being filled, keys
    /// waiting for their value ([`MAX_REFS`]: deep maps reach it before the stack bound).
    refs: usize,
    /// The memory limit, enforced here while mlua creates values unprotected.
    mem: super::Unlimited<'a>,
}

fn missing() -> Fail {
    Fail::msg("Missing bytes in input.")
}

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Fail> {
        if self.s.len() - self.pos < n {
            return Err(missing());
        }
        let b = &self.s[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn be(&mut self, n: usize) -> Result<u64, Fail> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b)))
    }

    fn value(&mut self, lua: &Lua) -> Result<Value, Fail> {
        self.mem.tick()?;
        let tag = self.take(1)?[0];
        let num = |x: f64| Ok(Value::Number(x));
        match tag {
            0x00..=0x7f => num(f64::from(tag)),
            0xe0..=0xff => num(f64::from(tag as i8)),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xcc => num(self.be(1)? as f64),
            0xcd => num(self.be(2)? as f64),
            0xce => num(self.be(4)? as f64),
            // Read as a signed 64-bit integer, as Redis's build does.
            0xcf => num(self.be(8)? as i64 as f64),
            0xd0 => num(f64::from(self.be(1)? as u8 as i8)),
            0xd1 => num(f64::from(self.be(2)? as u16 as i16)),
            0xd2 => num(f64::from(self.be(4)? as u32 as i32)),
            0xd3 => num(self.be(8)? as i64 as f64),
            0xca => num(f64::from(f32::from_bits(self.be(4)? as u32))),
            0xcb => num(f64::from_bits(self.be(8)?)),
            0xa0..=0xbf => self.string(lua, usize::from(tag & 0x1f)),
            0xd9 => {
                let n = self.be(1)? as usize;
                self.string(lua, n)
            }
            0xda => {
                let n = self.be(2)? as usize;
                self.string(lua, n)
            }
            0xdb => {
                let n = self.be(4)? as usize;
                self.string(lua, n)
            }
            0x90..=0x9f => self.array(lua, u64::from(tag & 0x0f)),
            0xdc => {
                let n = self.be(2)?;
                self.array(lua, n)
            }
            0xdd => {
                let n = self.be(4)?;
                self.array(lua, n)
            }
            0x80..=0x8f => self.map(lua, u64::from(tag & 0x0f)),
            0xde => {
                let n = self.be(2)?;
                self.map(lua, n)
            }
            0xdf => {
                let n = self.be(4)?;
                self.map(lua, n)
            }
            _ => Err(Fail::msg("Bad data format in input.")),
        }
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<Value, Fail> {
        let b = self.take(n)?;
        Ok(Value::String(lua.create_string(b)?))
    }

    fn array(&mut self, lua: &Lua, n: u64) -> Result<Value, Fail> {
        // The new table, then `luaL_checkstack(L, 1, ...)`.
        self.stack += 1;
        if self.stack + 1 > MAX_STACK || self.refs + 1 > MAX_REFS {
            return Err(LibErr::Msg("stack overflow (in function mp_decode_to_lua_array)".into()).into());
        }
        self.refs += 1;
        let t = lua.create_table()?;
        for i in 1..=n {
            self.stack += 1; // the index
            let v = self.value(lua)?;
            self.stack -= 1;
            t.raw_set(i, v)?;
        }
        self.stack -= 1;
        self.refs -= 1;
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: u64) -> Result<Value, Fail> {
        self.stack += 1;
        // Redis's map decoder does not check the stack; past the array decoder's bound its
        // behaviour is not defined, so the bound applies here too (with the next check's
        // message), which also bounds this recursion.
        if self.stack + 1 > MAX_STACK || self.refs + 1 > MAX_REFS {
            return Err(too_many().into());
        }
        self.refs += 1;
        let t = lua.create_table()?;
        for _ in 0..n {
            // A key nests like a value: beyond the arrays' depth Redis pushes nested keys past
            // its Lua stack unchecked, and this recursion stays within that depth.
            self.stack += 1;
            let k = self.value(lua)?;
            self.stack -= 1;
            let held = usize::from(is_ref(&k));
            if self.refs + held > MAX_REFS {
                return Err(too_many().into());
            }
            self.refs += held;
            self.stack += 1;
            let v = self.value(lua)?;
            self.stack -= 1;
            self.refs -= held;
            match &k {
                Value::Nil => return Err(LibErr::Raw("table index is nil".into()).into()),
                Value::Number(x) if x.is_nan() => return Err(LibErr::Raw("table index is NaN".into()).into()),
                _ => {}
            }
            t.raw_set(k, v)?;
        }
        self.stack -= 1;
        self.refs -= 1;
        Ok(Value::Table(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table that shares its subtables encodes to far more than it holds (here 64 MiB from
    /// one 1 KiB string): the size bound stops the encoding as soon as it is passed, not after
    /// the whole argument was encoded.
    #[test]
    fn the_output_bound_holds_inside_one_argument() {
        let lua = Lua::new();
        let t: Value = lua
            .load("local t = string.rep('x', 1024) for _ = 1, 4 do local u = {} for i = 1, 16 do u[i] = t end t = u end return t")
            .eval()
            .unwrap();
        let mut out = Vec::new();
        let limit = 1 << 20;
        assert!(matches!(encode(&mut out, &t, 0, limit), Err(mlua::Error::MemoryError(_))));
        assert!(out.len() <= limit + 1024 + 8, "{} bytes", out.len());
        let mut out = Vec::new();
        encode(&mut out, &t, 0, usize::MAX).unwrap();
        assert_eq!(out.len(), (16 * 16 * 16 * 16) * (1024 + 3) + 3 * (16 * 16 * 16 + 16 * 16 + 16 + 1));
    }
}
