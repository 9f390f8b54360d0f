//! Conversions between replies and Lua values, as Redis documents them (see the module docs).

use bytes::Bytes;
use mlua::{Lua, Value};

use super::error::{error_table, reply_error_text};
use sift::compat::redisbloom::{format_double, DoubleFormat};

use crate::frame::Frame;

/// Nesting depth at which a returned table is cut (Redis's "reached lua stack limit"): a table
/// that contains itself must not recurse forever.
pub(super) const MAX_DEPTH: usize = 1000;

/// The reply to a script whose return value, flattened into a reply, would exceed
/// [`MAX_REPLY_BYTES`].
pub const REPLY_TOO_LARGE: &str =
    "ERR Script's return value too large: over 512 MB as a reply (tables or strings repeated?)";

/// The most a script's return value may weigh as a reply: the sum of its strings and of a
/// [`Frame`] per element. Lua shares tables and strings, so a value of a few bytes inside the VM
/// (`t[1] = t; t[2] = t`, one string repeated) can flatten into an exponential or huge reply.
pub const MAX_REPLY_BYTES: usize = 512 * 1024 * 1024;

/// A `redis.call` argument: a string, or a number as Redis 7.0 writes it: C's `%.17g` (not
/// Lua's lossy `%.14g`: `0.1 + 0.2` is `0.30000000000000004`, `1e-7` is
/// `9.9999999999999995e-08`, `1e20` is `1e+20`, `0/0` is `-nan`; checked against redis-server
/// 7.0.15 by the recorded fixture of `lua_libraries_match_redis_byte_for_byte`); `None` for any
/// other type.
pub fn value_to_arg(v: &Value) -> Option<Bytes> {
    match v {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        // Lua 5.1's numbers are all doubles: mlua hands the integral ones over as integers,
        // which Redis formats as the doubles they are (1e17 is `1e+17`).
        Value::Integer(i) => Some(Bytes::from(format_double(*i as f64, DoubleFormat::Printf17g))),
        Value::Number(n) => Some(Bytes::from(format_double(*n, DoubleFormat::Printf17g))),
        _ => None,
    }
}

/// A reply as the script sees it: RESP2 shapes by default, RESP3 ones after
/// `redis.setresp(3)` (see the module docs).
pub fn frame_to_lua(lua: &Lua, f: &Frame, resp3: bool) -> mlua::Result<Value> {
    Ok(match f {
        Frame::Simple(s) => {
            let t = lua.create_table()?;
            t.raw_set("ok", s.as_str())?;
            Value::Table(t)
        }
        Frame::Error(e) => Value::Table(error_table(lua, &reply_error_text(e))?),
        Frame::Integer(i) => Value::Integer(*i),
        Frame::Bulk(b) => Value::String(lua.create_string(b)?),
        Frame::Verbatim(b) if resp3 => {
            let inner = lua.create_table()?;
            inner.raw_set("format", "txt")?;
            inner.raw_set("string", lua.create_string(b)?)?;
            let t = lua.create_table()?;
            t.raw_set("verbatim_string", inner)?;
            Value::Table(t)
        }
        Frame::Verbatim(b) => Value::String(lua.create_string(b)?),
        Frame::Null | Frame::NullArray if resp3 => Value::Nil,
        Frame::Null | Frame::NullArray => Value::Boolean(false),
        Frame::Set(items) if resp3 => {
            let members = lua.create_table()?;
            for item in items {
                members.raw_set(frame_to_lua(lua, item, resp3)?, true)?;
            }
            let t = lua.create_table()?;
            t.raw_set("set", members)?;
            Value::Table(t)
        }
        Frame::Array(items) | Frame::Set(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, frame_to_lua(lua, item, resp3)?)?;
            }
            Value::Table(t)
        }
        Frame::Map(pairs) if resp3 => {
            let fields = lua.create_table()?;
            for (k, v) in pairs {
                fields.raw_set(frame_to_lua(lua, k, resp3)?, frame_to_lua(lua, v, resp3)?)?;
            }
            let t = lua.create_table()?;
            t.raw_set("map", fields)?;
            Value::Table(t)
        }
        Frame::Map(pairs) => {
            let t = lua.create_table_with_capacity(2 * pairs.len(), 0)?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                t.raw_set(2 * i + 1, frame_to_lua(lua, k, resp3)?)?;
                t.raw_set(2 * i + 2, frame_to_lua(lua, v, resp3)?)?;
            }
            Value::Table(t)
        }
        Frame::Double(d) if resp3 => {
            let t = lua.create_table()?;
            t.raw_set("double", *d)?;
            Value::Table(t)
        }
        // RESP2 sends a double as the bulk string a client reads (`Frame`'s encoding): the script
        // sees the same text.
        Frame::Double(d) => Value::String(lua.create_string(format_double(*d, DoubleFormat::D2String))?),
        Frame::Boolean(b) if resp3 => Value::Boolean(*b),
        Frame::Boolean(b) => Value::Integer(*b as i64),
    })
}

/// A script's return value as a reply (see the module docs). `resp3`: the script called
/// `redis.setresp(3)`, so a boolean is a boolean reply (else `true` → 1, `false` → null).
/// Besides `err` and `ok`, a table may carry Redis 7's RESP3 forms, whatever the protocol:
/// `{double=n}`, `{map={...}}`, `{set={...}}`, `{big_number=s}` (sent as a bulk string),
/// `{verbatim_string={format=..., string=...}}`; the client's protocol decides their bytes.
pub fn lua_to_frame(v: &Value, depth: usize, resp3: bool) -> Frame {
    reply_within(v, depth, resp3, MAX_REPLY_BYTES)
}

/// [`lua_to_frame`] with `max_bytes` in place of [`MAX_REPLY_BYTES`] (the tests' budgets are
/// small, so a refusal costs them little).
pub(super) fn reply_within(v: &Value, depth: usize, resp3: bool, max_bytes: usize) -> Frame {
    let mut budget = max_bytes;
    convert(v, depth, resp3, &mut budget).unwrap_or_else(|| Frame::error(REPLY_TOO_LARGE))
}

/// [`lua_to_frame`], charging each element (a [`Frame`] plus its bytes) to `budget`: `None` once
/// the reply would outweigh it.
fn convert(v: &Value, depth: usize, resp3: bool, budget: &mut usize) -> Option<Frame> {
    let weight = std::mem::size_of::<Frame>()
        + match v {
            Value::String(s) => s.as_bytes().len(),
            _ => 0,
        };
    *budget = budget.checked_sub(weight)?;
    Some(match v {
        Value::Nil => Frame::Null,
        Value::Boolean(b) if resp3 => Frame::Boolean(*b),
        Value::Boolean(false) => Frame::Null,
        Value::Boolean(true) => Frame::Integer(1),
        Value::Integer(i) => Frame::Integer(*i),
        Value::Number(n) => Frame::Integer(crate::lualib::c_int64(*n)),
        Value::String(s) => Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Table(t) => {
            if depth >= MAX_DEPTH {
                return Some(Frame::error("ERR reached lua stack limit"));
            }
            let field = |name: &str| t.raw_get::<Value>(name).unwrap_or(Value::Nil);
            if let Value::String(e) = field("err") {
                return Some(Frame::Error(e.to_string_lossy()));
            }
            if let Value::String(s) = field("ok") {
                return Some(Frame::Simple(s.to_string_lossy()));
            }
            match field("double") {
                Value::Number(n) => return Some(Frame::Double(n)),
                Value::Integer(i) => return Some(Frame::Double(i as f64)),
                _ => {}
            }
            if let Value::String(s) = field("big_number") {
                return Some(Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())));
            }
            if let Value::Table(m) = field("map") {
                let mut pairs = Vec::new();
                for (k, v) in m.pairs::<Value, Value>().filter_map(Result::ok) {
                    pairs.push((
                        convert(&k, depth + 1, resp3, budget)?,
                        convert(&v, depth + 1, resp3, budget)?,
                    ));
                }
                return Some(Frame::Map(pairs));
            }
            if let Value::Table(m) = field("set") {
                let mut members = Vec::new();
                for (k, _) in m.pairs::<Value, Value>().filter_map(Result::ok) {
                    members.push(convert(&k, depth + 1, resp3, budget)?);
                }
                return Some(Frame::Set(members));
            }
            if let Value::Table(v) = field("verbatim_string") {
                if let (Ok(Value::String(_)), Ok(Value::String(text))) =
                    (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
                {
                    return Some(Frame::Verbatim(Bytes::copy_from_slice(&text.as_bytes())));
                }
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(item) => items.push(convert(&item, depth + 1, resp3, budget)?),
                }
            }
            Frame::Array(items)
        }
        _ => Frame::Null,
    })
}
