//! `cjson`: Lua CJSON 2.1.0 as Redis 7 provides it to scripts — `cjson.encode`, `cjson.decode`,
//! `cjson.null`, the configuration functions and `cjson.new`.
//!
//! Behaviour kept from Redis's build (every case below was checked against redis-server 7.0.15):
//!
//! * **encode**: `nil` and `cjson.null` → `null`; numbers with `%.14g` (`encode_number_precision`,
//!   1 to 14); NaN and ±Inf are an error unless `encode_invalid_numbers` is `true` (`nan`, `inf`)
//!   or `"null"`; strings escape `"`, `\`, `/`, control characters and DEL, other bytes go out
//!   unchanged; a table whose keys are all integers ≥ 1 is an array up to its largest key (holes
//!   are `null`) unless it is excessively sparse (`encode_sparse_array`: largest key above 10 and
//!   above twice the number of keys is an error, or an object when conversion is on); other tables
//!   (and `{}`) are objects in Lua's `next` order, with number keys written as strings; nesting
//!   deeper than `encode_max_depth` (1000) is an error; functions, userdata and threads cannot be
//!   serialised.
//! * **decode**: JSON → tables, strings, numbers, booleans, `cjson.null`; `\uXXXX` escapes
//!   (with surrogate pairs) become UTF-8; numbers are read as C's `strtod` reads them, so with
//!   `decode_invalid_numbers` (on by default) hexadecimal numbers, leading zeros, `Infinity` and
//!   `NaN` are accepted; the input ends at its first NUL byte; nesting deeper than
//!   `decode_max_depth` (1000) is an error; syntax errors name what was expected and the
//!   character position, as in `Expected comma or array end but found T_END at character 7`.
//! * The configuration set by one script stays for the following ones (the VM is shared, as in
//!   Redis) until `SCRIPT FLUSH`.
//!
//! Beyond the configured depths, nesting is also capped at [`HARD_DEPTH`] levels (Redis's C code
//! is bounded by the Lua stack, here the recursion is bounded by the thread's stack), and an
//! encoding larger than [`MAX_OUTPUT`] fails as an out-of-memory error.

use std::sync::Arc;

use mlua::{LightUserData, Lua, Table, Value, Variadic};
use parking_lot::Mutex;

use super::{answer, check_string, format_g, set, type_name, Answer, Fail, LibErr, Unlimited};

/// Nesting limit whatever `encode_max_depth` / `decode_max_depth` say.
pub const HARD_DEPTH: i32 = 2000;
/// Largest encoding produced (the server's largest bulk string).
pub const MAX_OUTPUT: usize = 512 << 20;

/// One `cjson` instance's settings (`cjson.new()` makes another).
#[derive(Debug, Clone, Copy)]
struct Config {
    sparse_convert: i32,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    /// 0 off (error), 1 on, 2 "null".
    encode_invalid_numbers: i32,
    decode_invalid_numbers: i32,
    keep_buffer: i32,
    precision: i32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            sparse_convert: 0,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: 1,
            keep_buffer: 1,
            precision: 14,
        }
    }
}

/// `cjson.null`: a NULL light userdata.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// The `cjson` table (also what `cjson.new()` returns: a fresh configuration).
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let cfg = Arc::new(Mutex::new(Config::default()));
    let t = lua.create_table()?;
    let c = cfg.clone();
    set(lua, &t, "encode", move |lua, a: Variadic<Value>| {
        if a.len() != 1 {
            return Ok(Err(LibErr::Arg(1, "expected 1 argument".into())));
        }
        let cfg = *c.lock();
        answer(encode(lua, &cfg, &a[0]).and_then(|out| Ok(Value::String(lua.create_string(out)?))))
    })?;
    let c = cfg.clone();
    set(lua, &t, "decode", move |lua, a: Variadic<Value>| {
        if a.len() != 1 {
            return Ok(Err(LibErr::Arg(1, "expected 1 argument".into())));
        }
        let text = match check_string(&a, 0) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let cfg = *c.lock();
        answer(decode(lua, &cfg, &text))
    })?;
    type Field = fn(&mut Config) -> &mut i32;
    let integers: [(&'static str, Field, i32, i32); 3] = [
        ("encode_max_depth", |c| &mut c.encode_max_depth, 1, i32::MAX),
        ("decode_max_depth", |c| &mut c.decode_max_depth, 1, i32::MAX),
        ("encode_number_precision", |c| &mut c.precision, 1, 14),
    ];
    for (name, field, min, max) in integers {
        let c = cfg.clone();
        set(lua, &t, name, move |lua, a: Variadic<Value>| {
            if let Err(e) = arg_count(&a, 1) {
                return Ok(Err(e));
            }
            let mut cfg = c.lock();
            Ok(integer_option(lua, &a, 0, field(&mut cfg), min, max)?.map(|v| Value::Integer(v.into())))
        })?;
    }
    let enums: [(&'static str, Field, &'static [&'static str]); 3] = [
        ("encode_keep_buffer", |c| &mut c.keep_buffer, &["off", "on"]),
        ("encode_invalid_numbers", |c| &mut c.encode_invalid_numbers, &["off", "on", "null"]),
        ("decode_invalid_numbers", |c| &mut c.decode_invalid_numbers, &["off", "on"]),
    ];
    for (name, field, options) in enums {
        let c = cfg.clone();
        set(lua, &t, name, move |lua, a: Variadic<Value>| {
            if let Err(e) = arg_count(&a, 1) {
                return Ok(Err(e));
            }
            let mut cfg = c.lock();
            enum_option(lua, &a, 0, field(&mut cfg), options)
        })?;
    }
    let c = cfg.clone();
    set(lua, &t, "encode_sparse_array", move |lua, a: Variadic<Value>| {
        if let Err(e) = arg_count(&a, 3) {
            return Ok(Err(e));
        }
        let mut cfg = c.lock();
        let convert = match enum_option(lua, &a, 0, &mut cfg.sparse_convert, &["off", "on"])? {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        let ratio = match integer_option(lua, &a, 1, &mut cfg.sparse_ratio, 0, i32::MAX)? {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        let safe = match integer_option(lua, &a, 2, &mut cfg.sparse_safe, 0, i32::MAX)? {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        Ok(Ok((convert, Value::Integer(ratio.into()), Value::Integer(safe.into()))))
    })?;
    set(lua, &t, "new", |lua, _a: Variadic<Value>| Ok(Ok(Value::Table(library(lua)?))))?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

/// At most `n` arguments (`json_verify_arg_count`).
fn arg_count(a: &[Value], n: usize) -> Result<(), LibErr> {
    if a.len() > n {
        return Err(LibErr::Arg(n + 1, "found too many arguments".into()));
    }
    Ok(())
}

/// An integer setting: argument `i` (absent or nil: unchanged) within `min..=max`; answers the
/// setting. The range error names argument 1 whatever `i` is, as Lua CJSON does.
fn integer_option(lua: &Lua, a: &[Value], i: usize, setting: &mut i32, min: i32, max: i32) -> Answer<i32> {
    match a.get(i) {
        None | Some(Value::Nil) => {}
        Some(_) => {
            let n = match super::check_number(lua, a, i)? {
                Ok(n) => n,
                Err(e) => return Ok(Err(e)),
            };
            // lua_tointeger truncates; the C code keeps the low 32 bits in an int.
            let value = n as i64 as i32;
            if value < min || value > max {
                return Ok(Err(LibErr::Arg(1, format!("expected integer between {min} and {max}"))));
            }
            *setting = value;
        }
    }
    Ok(Ok(*setting))
}

/// An option setting (`json_enum_option`): a boolean (off / on) or one of `options` by name;
/// answers `true`/`false` for settings 0 and 1, else the option's name.
fn enum_option(lua: &Lua, a: &[Value], i: usize, setting: &mut i32, options: &[&str]) -> Answer<Value> {
    match a.get(i) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = i32::from(*b),
        Some(v) => {
            let text = match v {
                Value::String(s) => s.to_string_lossy(),
                Value::Integer(n) => format_g(*n as f64, 14),
                Value::Number(n) => format_g(*n, 14),
                other => {
                    let msg = format!("string expected, got {}", type_name(Some(other)));
                    return Ok(Err(LibErr::Arg(i + 1, msg)));
                }
            };
            match options.iter().position(|o| *o == text) {
                Some(p) => *setting = p as i32,
                None => return Ok(Err(LibErr::Arg(i + 1, format!("invalid option '{text}'")))),
            }
        }
    }
    Ok(Ok(match *setting {
        0 => Value::Boolean(false),
        1 => Value::Boolean(true),
        s => Value::String(lua.create_string(options[s as usize])?),
    }))
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// `cjson.encode(v)`.
fn encode(lua: &Lua, cfg: &Config, v: &Value) -> Result<Vec<u8>, Fail> {
    // Reading tables creates no Lua value, but mlua protects its table iteration under a limit.
    let _unprotected = Unlimited::new(lua);
    let mut e = Encoder { cfg, out: Vec::new(), depth: 0 };
    e.value(lua, v)?;
    Ok(e.out)
}

struct Encoder<'a> {
    cfg: &'a Config,
    out: Vec<u8>,
    depth: i32,
}

impl Encoder<'_> {
    fn value(&mut self, lua: &Lua, v: &Value) -> Result<(), Fail> {
        if self.out.len() > MAX_OUTPUT {
            return Err(Fail::Vm(mlua::Error::MemoryError("not enough memory".into())));
        }
        match v {
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::Boolean(b) => self.out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Integer(i) => self.number(*i as f64)?,
            Value::Number(n) => self.number(*n)?,
            Value::String(s) => self.string(&s.as_bytes()),
            Value::Table(t) => self.table(lua, t)?,
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            other => {
                return Err(Fail::msg(format!(
                    "Cannot serialise {}: type not supported",
                    type_name(Some(other))
                )))
            }
        }
        Ok(())
    }

    fn number(&mut self, n: f64) -> Result<(), Fail> {
        if !n.is_finite() {
            match self.cfg.encode_invalid_numbers {
                0 => return Err(Fail::msg("Cannot serialise number: must not be NaN or Inf")),
                1 => {
                    let text: &[u8] = if n.is_nan() {
                        b"nan"
                    } else if n < 0.0 {
                        b"-inf"
                    } else {
                        b"inf"
                    };
                    self.out.extend_from_slice(text);
                    return Ok(());
                }
                _ => {
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
            }
        }
        self.out.extend_from_slice(format_g(n, self.cfg.precision as usize).as_bytes());
        Ok(())
    }

    fn string(&mut self, s: &[u8]) {
        self.out.reserve(s.len() + 2);
        self.out.push(b'"');
        for &c in s {
            match c {
                b'"' => self.out.extend_from_slice(b"\\\""),
                b'\\' => self.out.extend_from_slice(b"\\\\"),
                b'/' => self.out.extend_from_slice(b"\\/"),
                8 => self.out.extend_from_slice(b"\\b"),
                9 => self.out.extend_from_slice(b"\\t"),
                10 => self.out.extend_from_slice(b"\\n"),
                12 => self.out.extend_from_slice(b"\\f"),
                13 => self.out.extend_from_slice(b"\\r"),
                0..=31 | 127 => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.out.extend_from_slice(b"\\u00");
                    self.out.push(HEX[(c >> 4) as usize]);
                    self.out.push(HEX[(c & 15) as usize]);
                }
                _ => self.out.push(c),
            }
        }
        self.out.push(b'"');
    }

    fn table(&mut self, lua: &Lua, t: &Table) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth > self.cfg.encode_max_depth || self.depth > HARD_DEPTH {
            return Err(Fail::msg(format!("Cannot serialise, excessive nesting ({})", self.depth)));
        }
        let len = self.array_length(t)?;
        if len > 0 {
            self.out.push(b'[');
            for i in 1..=len {
                if i > 1 {
                    self.out.push(b',');
                }
                let v: Value = t.raw_get(i)?;
                self.value(lua, &v)?;
            }
            self.out.push(b']');
        } else {
            self.out.push(b'{');
            let mut first = true;
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                if !first {
                    self.out.push(b',');
                }
                first = false;
                match &k {
                    Value::Integer(_) | Value::Number(_) => {
                        let n = match k {
                            Value::Integer(i) => i as f64,
                            Value::Number(n) => n,
                            _ => unreachable!("matched above"),
                        };
                        self.out.push(b'"');
                        self.number(n)?;
                        self.out.extend_from_slice(b"\":");
                    }
                    Value::String(s) => {
                        self.string(&s.as_bytes());
                        self.out.push(b':');
                    }
                    other => {
                        return Err(Fail::msg(format!(
                            "Cannot serialise {}: table key must be a number or string",
                            type_name(Some(other))
                        )))
                    }
                }
                self.value(lua, &v)?;
            }
            self.out.push(b'}');
        }
        self.depth -= 1;
        Ok(())
    }

    /// The largest key if every key is an integer ≥ 1 and the table is not too sparse; 0 or
    /// less for an object (`lua_array_length`, including its conversion of a key ≥ 2^31 to
    /// C's `INT_MIN`).
    fn array_length(&self, t: &Table) -> Result<i64, Fail> {
        let mut max: i32 = 0;
        let mut items: i64 = 0;
        for pair in t.pairs::<Value, Value>() {
            let (k, _) = pair?;
            let k = match k {
                Value::Integer(i) => i as f64,
                Value::Number(n) => n,
                _ => return Ok(-1),
            };
            if k == 0.0 || k.floor() != k || k < 1.0 {
                return Ok(-1);
            }
            if k > f64::from(max) {
                max = if k >= 2_147_483_648.0 { i32::MIN } else { k as i32 };
            }
            items += 1;
        }
        let cfg = self.cfg;
        if cfg.sparse_ratio > 0
            && i64::from(max) > items * i64::from(cfg.sparse_ratio)
            && max > cfg.sparse_safe
        {
            if cfg.sparse_convert == 0 {
                return Err(Fail::msg("Cannot serialise table: excessively sparse array"));
            }
            return Ok(-1);
        }
        Ok(i64::from(max))
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// `cjson.decode(text)`.
fn decode(lua: &Lua, cfg: &Config, text: &[u8]) -> Result<Value, Fail> {
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err(Fail::msg("JSON parser does not support UTF-16 or UTF-32"));
    }
    // The C parser reads a NUL-terminated string: it ends at the first NUL.
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    let mut d = Decoder { s: &text[..end], pos: 0, cfg, depth: 0, mem: Unlimited::new(lua) };
    let tok = d.next_token();
    let v = d.value(lua, tok)?;
    let tok = d.next_token();
    if !matches!(tok.kind, Kind::End) {
        return Err(d.expected("the end", &tok));
    }
    Ok(v)
}

enum Kind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

struct Token {
    kind: Kind,
    /// 0-based position (errors print it 1-based).
    index: usize,
}

struct Decoder<'a> {
    s: &'a [u8],
    pos: usize,
    cfg: &'a Config,
    depth: i32,
    mem: Unlimited<'a>,
}

impl Decoder<'_> {
    fn expected(&self, what: &str, tok: &Token) -> Fail {
        let found = match &tok.kind {
            Kind::ObjBegin => "T_OBJ_BEGIN",
            Kind::ObjEnd => "T_OBJ_END",
            Kind::ArrBegin => "T_ARR_BEGIN",
            Kind::ArrEnd => "T_ARR_END",
            Kind::Str(_) => "T_STRING",
            Kind::Num(_) => "T_NUMBER",
            Kind::Bool(_) => "T_BOOLEAN",
            Kind::Null => "T_NULL",
            Kind::Colon => "T_COLON",
            Kind::Comma => "T_COMMA",
            Kind::End => "T_END",
            Kind::Error(m) => m,
        };
        Fail::msg(format!("Expected {what} but found {found} at character {}", tok.index + 1))
    }

    fn descend(&mut self) -> Result<(), Fail> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth || self.depth > HARD_DEPTH {
            return Err(Fail::msg(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.pos
            )));
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua, tok: Token) -> Result<Value, Fail> {
        self.mem.tick()?;
        Ok(match tok.kind {
            Kind::Str(s) => Value::String(lua.create_string(s)?),
            Kind::Num(n) => Value::Number(n),
            Kind::Bool(b) => Value::Boolean(b),
            Kind::Null => null(),
            Kind::ObjBegin => self.object(lua)?,
            Kind::ArrBegin => self.array(lua)?,
            _ => return Err(self.expected("value", &tok)),
        })
    }

    fn object(&mut self, lua: &Lua) -> Result<Value, Fail> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next_token();
        if matches!(tok.kind, Kind::ObjEnd) {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        loop {
            let Kind::Str(key) = tok.kind else {
                return Err(self.expected("object key string", &tok));
            };
            let key = lua.create_string(key)?;
            let colon = self.next_token();
            if !matches!(colon.kind, Kind::Colon) {
                return Err(self.expected("colon", &colon));
            }
            let vtok = self.next_token();
            let v = self.value(lua, vtok)?;
            t.raw_set(key, v)?;
            tok = self.next_token();
            match tok.kind {
                Kind::ObjEnd => {
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                Kind::Comma => tok = self.next_token(),
                _ => return Err(self.expected("comma or object end", &tok)),
            }
        }
    }

    fn array(&mut self, lua: &Lua) -> Result<Value, Fail> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next_token();
        if matches!(tok.kind, Kind::ArrEnd) {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        for i in 1.. {
            let v = self.value(lua, tok)?;
            t.raw_set(i, v)?;
            tok = self.next_token();
            match tok.kind {
                Kind::ArrEnd => break,
                Kind::Comma => tok = self.next_token(),
                _ => return Err(self.expected("comma or array end", &tok)),
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.s.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
        let index = self.pos;
        let Some(&c) = self.s.get(self.pos) else {
            return Token { kind: Kind::End, index };
        };
        let single = match c {
            b'{' => Some(Kind::ObjBegin),
            b'}' => Some(Kind::ObjEnd),
            b'[' => Some(Kind::ArrBegin),
            b']' => Some(Kind::ArrEnd),
            b',' => Some(Kind::Comma),
            b':' => Some(Kind::Colon),
            _ => None,
        };
        if let Some(kind) = single {
            self.pos += 1;
            return Token { kind, index };
        }
        let rest = &self.s[self.pos..];
        if c == b'"' {
            return self.string_token();
        }
        if c == b'-' || c.is_ascii_digit() {
            if self.cfg.decode_invalid_numbers == 0 && is_invalid_number(rest) {
                return Token { kind: Kind::Error("invalid number"), index };
            }
            return self.number_token();
        }
        for (word, kind) in
            [(&b"true"[..], Kind::Bool(true)), (b"false", Kind::Bool(false)), (b"null", Kind::Null)]
        {
            if rest.starts_with(word) {
                self.pos += word.len();
                return Token { kind, index };
            }
        }
        if self.cfg.decode_invalid_numbers != 0 && is_invalid_number(rest) {
            return self.number_token();
        }
        Token { kind: Kind::Error("invalid token"), index }
    }

    fn number_token(&mut self) -> Token {
        let index = self.pos;
        match strtod(&self.s[self.pos..]) {
            Some((n, used)) => {
                self.pos += used;
                Token { kind: Kind::Num(n), index }
            }
            None => Token { kind: Kind::Error("invalid number"), index },
        }
    }

    fn string_token(&mut self) -> Token {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                return Token { kind: Kind::Error("unexpected end of string"), index: self.pos };
            };
            match c {
                b'"' => break,
                b'\\' => {
                    let esc = self.s.get(self.pos + 1).copied().unwrap_or(0);
                    let byte = match esc {
                        b'"' | b'\\' | b'/' => esc,
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => match self.unicode_escape(&mut out) {
                            Some(len) => {
                                self.pos += len;
                                continue;
                            }
                            None => {
                                return Token {
                                    kind: Kind::Error("invalid unicode escape code"),
                                    index: self.pos,
                                }
                            }
                        },
                        _ => return Token { kind: Kind::Error("invalid escape code"), index: self.pos },
                    };
                    out.push(byte);
                    self.pos += 2;
                }
                _ => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
        self.pos += 1;
        Token { kind: Kind::Str(out), index: start }
    }

    /// `\uXXXX` (and its low surrogate `\uXXXX` when it is a high one) at `self.pos`: appends the
    /// UTF-8 bytes, answers the escape's length.
    fn unicode_escape(&self, out: &mut Vec<u8>) -> Option<usize> {
        let hex4 = |at: usize| -> Option<u32> {
            let digits = self.s.get(at..at + 4)?;
            let text = std::str::from_utf8(digits).ok()?;
            if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(text, 16).ok()
        };
        let mut cp = hex4(self.pos + 2)?;
        let mut len = 6;
        if (0xDC00..=0xDFFF).contains(&cp) {
            return None;
        }
        if (0xD800..=0xDBFF).contains(&cp) {
            if self.s.get(self.pos + 6..self.pos + 8) != Some(b"\\u") {
                return None;
            }
            let low = hex4(self.pos + 8)?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let ch = char::from_u32(cp)?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        Some(len)
    }
}

/// Lua CJSON's test (in Redis's build) for numbers JSON does not allow: a leading `+`, and after
/// an optional `-`: hexadecimal, leading zeros, `inf…`, `nan…`.
fn is_invalid_number(p: &[u8]) -> bool {
    let p = match p.first() {
        Some(b'+') => return true,
        Some(b'-') => &p[1..],
        _ => p,
    };
    match p.first() {
        Some(b'0') => matches!(p.get(1), Some(c) if (c | 0x20) == b'x' || c.is_ascii_digit()),
        Some(&c) if c <= b'9' => false,
        _ => p.len() >= 3 && (p[..3].eq_ignore_ascii_case(b"inf") || p[..3].eq_ignore_ascii_case(b"nan")),
    }
}

/// C's `strtod` on the start of `s`: the number and how many bytes it used, `None` when no
/// number starts there. Decimal (with exponent), hexadecimal (`0x1.8p3`), `inf`, `infinity`,
/// `nan`, `nan(chars)`, each with an optional sign.
pub fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let mut i = 0;
    let negative = match s.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let signed = |x: f64| if negative { -x } else { x };
    let rest = &s[i..];
    let starts = |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts(b"inf") {
        let used = if starts(b"infinity") { 8 } else { 3 };
        return Some((signed(f64::INFINITY), i + used));
    }
    if starts(b"nan") {
        let mut used = 3;
        if rest.get(3) == Some(&b'(') {
            let close = rest[4..].iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'));
            if let Some(n) = close {
                if rest[4 + n] == b')' {
                    used = 4 + n + 1;
                }
            }
        }
        return Some((signed(f64::NAN), i + used));
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((x, used)) = hex_float(&rest[2..]) {
            return Some((signed(x), i + 2 + used));
        }
    }
    let digits = |from: usize| rest[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int = digits(0);
    let mut j = int;
    let mut frac = 0;
    if rest.get(j) == Some(&b'.') {
        frac = digits(j + 1);
        if int + frac > 0 {
            j += 1 + frac;
        }
    }
    if int + frac == 0 {
        return None;
    }
    let mantissa_end = j;
    if matches!(rest.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(rest.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let e = digits(k);
        if e > 0 {
            j = k + e;
        }
    }
    // Rust's parser is correctly rounded, as glibc's; give it the canonical form.
    let text = std::str::from_utf8(&rest[..j]).ok()?;
    let (mant, exp) = text.split_at(mantissa_end);
    let (ip, fp) = mant.split_once('.').unwrap_or((mant, ""));
    let canonical =
        format!("{}.{}{}", if ip.is_empty() { "0" } else { ip }, if fp.is_empty() { "0" } else { fp }, exp);
    let x: f64 = canonical.parse().ok()?;
    Some((signed(x), i + j))
}

/// The part of a hexadecimal float after `0x`: `None` without a hex digit.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let mut mantissa: u64 = 0;
    let mut exp: i64 = 0;
    let mut any = false;
    let mut j = 0;
    let mut seen_point = false;
    while j < s.len() {
        let c = s[j];
        if c == b'.' && !seen_point {
            seen_point = true;
            j += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else { break };
        any = true;
        if mantissa < (1 << 59) {
            mantissa = mantissa * 16 + u64::from(d);
            if seen_point {
                exp -= 4;
            }
        } else if !seen_point {
            exp += 4;
        }
        j += 1;
    }
    if !any {
        return None;
    }
    if matches!(s.get(j), Some(b'p' | b'P')) {
        let mut k = j + 1;
        let neg = match s.get(k) {
            Some(b'-') => {
                k += 1;
                true
            }
            Some(b'+') => {
                k += 1;
                false
            }
            _ => false,
        };
        let n = s[k..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n > 0 {
            let e = s[k..k + n].iter().fold(0i64, |a, &c| (a * 10 + i64::from(c - b'0')).min(100_000));
            exp += if neg { -e } else { e };
            j = k + n;
        }
    }
    let mut x = mantissa as f64;
    let mut e = exp.clamp(-5000, 5000) as i32;
    while e != 0 && x != 0.0 && x.is_finite() {
        let step = e.clamp(-1000, 1000);
        x *= 2f64.powi(step);
        e -= step;
    }
    Some((x, j))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_reads_what_glibc_reads() {
        let cases: &[(&str, f64, usize)] = &[
            ("1", 1.0, 1),
            ("-0", -0.0, 2),
            ("+1", 1.0, 2),
            ("1.", 1.0, 2),
            ("1.e5", 1e5, 4),
            ("00", 0.0, 2),
            ("1E+2", 100.0, 4),
            ("1e", 1.0, 1),
            ("1e+", 1.0, 1),
            ("0x", 0.0, 1),
            ("0X1A", 26.0, 4),
            ("0x.8", 0.5, 4),
            ("0x1.8p1", 3.0, 7),
            ("0x1p4", 16.0, 5),
            ("4.9e-324", f64::from_bits(1), 8),
            ("1_0", 1.0, 1),
            ("12abc", 12.0, 2),
            ("1e400", f64::INFINITY, 5),
            ("infinity", f64::INFINITY, 8),
            ("infinit", f64::INFINITY, 3),
            ("-Infinity", f64::NEG_INFINITY, 9),
            ("0.1", 0.1, 3),
        ];
        for &(s, want, used) in cases {
            let (x, n) = strtod(s.as_bytes()).unwrap_or_else(|| panic!("{s} is a number"));
            assert_eq!((x.to_bits(), n), (want.to_bits(), used), "strtod({s:?})");
        }
        for s in ["", "-", "+", "-+1", "- 1", ".", "e5", "x"] {
            assert_eq!(strtod(s.as_bytes()), None, "strtod({s:?})");
        }
        let (x, n) = strtod(b"nan(123)x").expect("nan");
        assert!(x.is_nan() && n == 8);
        let (x, n) = strtod(b"-nan(").expect("nan");
        assert!(x.is_nan() && x.is_sign_negative() && n == 4);
    }
}
