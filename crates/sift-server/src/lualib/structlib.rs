//! `struct`: Roberto Ierusalimschy's struct library as Redis 7 provides it to scripts —
//! `struct.pack(fmt, ...)`, `struct.unpack(fmt, s [, init])`, `struct.size(fmt)` — packing
//! numbers and strings into binary records (checked against redis-server 7.0.15).
//!
//! Format options: `>` big and `<` little endian (the default is the machine's, little on the
//! platforms sift supports); `![n]` the largest alignment (default 1, `!` alone 8; a power of
//! 2); `x` a zero byte; `b`/`B` char, `h`/`H` short, `l`/`L` long, `T` size_t, `i[n]`/`I[n]` an
//! integer of `n` bytes (default 4, at most 32; lower case signed), `f` float, `d` double,
//! `s` a zero-terminated string, `c[n]` a string of `n` bytes (`c0`: the whole string when
//! packing, the previous number as length when unpacking); spaces are ignored. Every item is
//! aligned to the smaller of its size and the largest alignment. Numbers are truncated toward
//! zero into integers, and integers of more than 8 bytes hold a 64-bit value (sign-extended).
//! `unpack` returns the values and then the position after the last byte read; at most
//! [`super::MAX_REFS`] of them strings (more are `stack overflow (too many results)`, which
//! Redis answers from 7999 values on).

use mlua::{Lua, MultiValue, Table, Value, Variadic};

use super::{check_number, check_string, set, Answer, LibErr};

/// Largest integer size (`MAXINTSIZE`).
const MAX_INT_SIZE: usize = 32;
/// Alignment of `!` without a number (`MAXALIGN`).
const MAX_ALIGN: usize = 8;

/// The format's settings so far (`Header`).
struct Header {
    little: bool,
    align: usize,
}

impl Default for Header {
    fn default() -> Header {
        Header { little: cfg!(target_endian = "little"), align: 1 }
    }
}

/// A format string and where its reading is.
struct Format<'a> {
    f: &'a [u8],
    pos: usize,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.f.get(self.pos)?;
        self.pos += 1;
        Some(c)
    }

    /// `getnum`: the digits at the current position, `default` without any.
    fn number(&mut self, default: usize) -> Result<usize, LibErr> {
        if !self.f.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(&c) = self.f.get(self.pos).filter(|c| c.is_ascii_digit()) {
            let d = i64::from(c - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - d {
                return Err(LibErr::Msg("integral size overflow".into()));
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a as usize)
    }

    /// `optsize`: the size of option `opt` (reading its number).
    fn size(&mut self, opt: u8) -> Result<usize, LibErr> {
        Ok(match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let n = self.number(4)?;
                if n > MAX_INT_SIZE {
                    return Err(LibErr::Msg(format!(
                        "integral size {n} is larger than limit of {MAX_INT_SIZE}"
                    )));
                }
                n
            }
            _ => 0,
        })
    }

    /// `controloptions`: the options that set the header, or the error of an unknown one.
    fn control(&mut self, opt: u8, h: &mut Header) -> Result<(), LibErr> {
        match opt {
            b' ' => {}
            b'>' => h.little = false,
            b'<' => h.little = true,
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                // `isp2`: 0 is not a power of 2 either.
                if a == 0 || a & (a - 1) != 0 {
                    return Err(LibErr::Msg(format!("alignment {a} is not a power of 2")));
                }
                h.align = a;
            }
            _ => return Err(LibErr::Arg(1, format!("invalid format option '{}'", opt as char))),
        }
        Ok(())
    }
}

/// `gettoalign`: padding before an item of `size` bytes at offset `len`.
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    // As C computes it with size_t; the alignment is a power of 2, so size ≥ 1.
    size.wrapping_sub(len & (size - 1)) & (size - 1)
}

/// The format string (argument 1); it ends at a NUL byte, as a C string.
fn format_arg(a: &[Value]) -> Result<Vec<u8>, LibErr> {
    let mut f = check_string(a, 0)?;
    if let Some(end) = f.iter().position(|&b| b == 0) {
        f.truncate(end);
    }
    Ok(f)
}

/// C's conversion of a double to the library's 64-bit unsigned integer (`(Uinttype)n`, or
/// `(Uinttype)(Inttype)n` for a negative `n`) as x86-64 code computes it.
fn to_u64(n: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if n < 0.0 {
        super::c_int64(n) as u64
    } else if n < TWO63 {
        n as u64
    } else {
        (super::c_int64(n - TWO63) as u64) ^ (1 << 63)
    }
}

fn too_large() -> mlua::Error {
    mlua::Error::MemoryError("not enough memory".into())
}

/// The `struct` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    set(lua, &t, "pack", |lua, a: Variadic<Value>| Ok(pack(lua, &a)?.map(Value::String)))?;
    set(lua, &t, "unpack", |lua, a: Variadic<Value>| unpack(lua, &a))?;
    set(lua, &t, "size", |_, a: Variadic<Value>| Ok(size(&a).map(|n| Value::Number(n as f64))))?;
    Ok(t)
}

fn pack(lua: &Lua, a: &[Value]) -> Answer<mlua::String> {
    let fmt = match format_arg(a) {
        Ok(f) => f,
        Err(e) => return Ok(Err(e)),
    };
    let mut f = Format { f: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut out: Vec<u8> = Vec::new();
    // Arguments are 1-based; past the last one the C code finds its nil marker.
    let mut arg = 1;
    let number = |lua: &Lua, i: usize| -> Answer<f64> {
        match a.get(i) {
            None => Ok(Err(LibErr::Arg(i + 1, "number expected, got nil".into()))),
            Some(_) => check_number(lua, a, i),
        }
    };
    while let Some(opt) = f.next() {
        let size = match f.size(opt) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        let pad = to_align(out.len(), &h, opt, size);
        if pad > super::cjson::MAX_OUTPUT {
            return Err(too_large());
        }
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = match number(lua, arg)? {
                    Ok(n) => n,
                    Err(e) => return Ok(Err(e)),
                };
                arg += 1;
                let mut v = to_u64(n);
                let mut bytes = vec![0u8; size];
                for i in 0..size {
                    let at = if h.little { i } else { size - 1 - i };
                    bytes[at] = v as u8;
                    v = v.checked_shr(8).unwrap_or(0);
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' | b'd' => {
                let n = match number(lua, arg)? {
                    Ok(n) => n,
                    Err(e) => return Ok(Err(e)),
                };
                arg += 1;
                let mut bytes =
                    if opt == b'f' { (n as f32).to_le_bytes().to_vec() } else { n.to_le_bytes().to_vec() };
                if !h.little {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'c' | b's' => {
                let s = match a.get(arg) {
                    None => return Ok(Err(LibErr::Arg(arg + 1, "string expected, got nil".into()))),
                    Some(_) => match check_string(a, arg) {
                        Ok(s) => s,
                        Err(e) => return Ok(Err(e)),
                    },
                };
                arg += 1;
                let size = if size == 0 { s.len() } else { size };
                if s.len() < size {
                    // The C code checks after moving to the next argument.
                    return Ok(Err(LibErr::Arg(arg + 1, "string too short".into())));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => {
                if let Err(e) = f.control(opt, &mut h) {
                    return Ok(Err(e));
                }
            }
        }
        if out.len() > super::cjson::MAX_OUTPUT {
            return Err(too_large());
        }
    }
    Ok(Ok(lua.create_string(out)?))
}

fn unpack(lua: &Lua, a: &[Value]) -> Answer<MultiValue> {
    let fmt = match format_arg(a) {
        Ok(f) => f,
        Err(e) => return Ok(Err(e)),
    };
    let data = match check_string(a, 1) {
        Ok(d) => d,
        Err(e) => return Ok(Err(e)),
    };
    let init: i64 = match a.get(2) {
        None | Some(Value::Nil) => 1,
        Some(_) => match check_number(lua, a, 2)? {
            Ok(n) => n as i64,
            Err(e) => return Ok(Err(e)),
        },
    };
    let len = data.len();
    // `pos` is a size_t in C: an init below 0 wraps around to a huge position, which the size
    // checks below refuse.
    if init == 0 {
        return Ok(Err(LibErr::Arg(3, "offset must be 1 or greater".into())));
    }
    let mut pos = (init as u64 as usize).wrapping_sub(1);
    let mut f = Format { f: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut values: Vec<Value> = Vec::new();
    let short = || Ok(Err(LibErr::Arg(2, "data string too short".into())));
    let cap = 7999usize.saturating_sub(a.len());
    // Strings among `values` (see `super::MAX_REFS`).
    let mut refs = 0;
    while let Some(opt) = f.next() {
        let size = match f.size(opt) {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if size > len || pos > len - size {
            return short();
        }
        if values.len() + 2 > cap || refs + 1 > super::MAX_REFS {
            return Ok(Err(LibErr::Msg("stack overflow (too many results)".into())));
        }
        let mut size = size;
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let bytes = &data[pos..pos + size];
                let mut l: u64 = 0;
                for i in 0..size {
                    let b = if h.little { bytes[size - 1 - i] } else { bytes[i] };
                    l = (l << 8) | u64::from(b);
                }
                let n = if opt.is_ascii_lowercase() {
                    let shift = (size * 8).wrapping_sub(1) & 63;
                    let mask = u64::MAX << shift;
                    if l & mask != 0 {
                        l |= mask;
                    }
                    l as i64 as f64
                } else {
                    l as f64
                };
                values.push(Value::Number(n));
            }
            b'x' => {}
            b'f' | b'd' => {
                let mut bytes = data[pos..pos + size].to_vec();
                if !h.little {
                    bytes.reverse();
                }
                let n = if opt == b'f' {
                    f64::from(f32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")))
                } else {
                    f64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
                };
                values.push(Value::Number(n));
            }
            b'c' => {
                if size == 0 {
                    let prev = match values.last() {
                        Some(v @ (Value::Number(_) | Value::Integer(_) | Value::String(_))) => {
                            lua.coerce_number(v.clone())?
                        }
                        _ => None,
                    };
                    let Some(n) = prev else {
                        return Ok(Err(LibErr::Msg("format 'c0' needs a previous size".into())));
                    };
                    values.pop();
                    // size_t of a double: a negative size wraps to a huge one.
                    size = if n < 0.0 { usize::MAX } else { n as usize };
                    if size > len || pos > len - size {
                        return short();
                    }
                }
                values.push(Value::String(lua.create_string(&data[pos..pos + size])?));
                refs += 1;
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Ok(Err(LibErr::Msg("unfinished string in data".into())));
                };
                values.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                refs += 1;
                size = end + 1;
            }
            _ => {
                if let Err(e) = f.control(opt, &mut h) {
                    return Ok(Err(e));
                }
            }
        }
        pos = pos.wrapping_add(size);
    }
    values.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(Ok(MultiValue::from_iter(values)))
}

fn size(a: &[Value]) -> Result<usize, LibErr> {
    let fmt = format_arg(a)?;
    let mut f = Format { f: &fmt, pos: 0 };
    let mut h = Header::default();
    let mut pos: usize = 0;
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return Err(LibErr::Arg(1, "option 's' has no fixed size".into()));
        }
        if opt == b'c' && size == 0 {
            return Err(LibErr::Arg(1, "option 'c0' has no fixed size".into()));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn double_to_u64_as_x86_64_c() {
        assert_eq!(to_u64(3.7), 3);
        assert_eq!(to_u64(-3.7), (-3i64) as u64);
        assert_eq!(to_u64(9_223_372_036_854_775_808.0), 1 << 63);
        assert_eq!(to_u64(18_446_744_073_709_551_616.0), 0);
        assert_eq!(to_u64(f64::NAN), 0);
        assert_eq!(to_u64(-1e300), 1 << 63);
    }

    #[test]
    fn format_numbers() {
        let mut f = Format { f: b"12x", pos: 0 };
        assert_eq!(f.number(4).ok(), Some(12));
        assert_eq!(f.number(4).ok(), Some(4));
        let mut f = Format { f: b"99999999999", pos: 0 };
        assert!(matches!(f.number(4), Err(LibErr::Msg(m)) if m == "integral size overflow"));
    }
}
