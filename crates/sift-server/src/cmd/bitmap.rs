//! Redis's bitmap commands on string values — SETBIT, GETBIT, BITCOUNT, BITPOS, BITFIELD,
//! BITFIELD_RO — and STRLEN, GETRANGE, SETRANGE:
//! what the classic "Bloom filter in a Redis bitmap" of the seed articles runs on (the client
//! computes k bit positions, sends `SETBIT key offset 1` for each, one by one or pipelined,
//! queries with GETBIT, resets with DEL).
//!
//! # Semantics (Redis 7.2 / 8, reply for reply)
//!
//! * Bit 0 is the most significant bit of byte 0. An offset is an integer in `0..2^32` (Redis's
//!   `proto-max-bulk-len` of 512 MB, in bits), else [`err::BIT_OFFSET`].
//! * SETBIT's value is parsed as Redis parses integers (`string2ll`: no sign but `-`, no leading
//!   zero, no space) and must then be 0 or 1: `"01"`, `"+1"`, `"1.0"` and `"2"` are all
//!   [`err::BIT_VALUE`]. It creates the key (zero bytes up to the offset) even to clear a bit,
//!   grows the string zero-filled, keeps an existing TTL, and returns the old bit.
//! * BITCOUNT and BITPOS take an inclusive range in bytes (default) or bits: negative indexes
//!   count from the end, then both ends are clamped to the string; an empty range counts 0 (finds
//!   -1). Their arguments are checked before the key is looked up (Redis ≥ 7.2).
//! * BITPOS on a missing key: -1 looking for 1, 0 looking for 0. Looking for 0 without an
//!   explicit end and finding none gives the first bit past the searched bytes (the string is
//!   taken as followed by zeros); with an explicit end, -1.
//!
//! # Writes, persistence and memory
//!
//! A SETBIT that neither grows the string nor changes the bit changes nothing and is not logged
//! (Redis 7 does not propagate it either); every other one is, as received. A string is a
//! [`Bytes`]: SETBIT changes it in place when the key holds the only reference
//! ([`Bytes::try_into_mut`], O(1)), and copies it once when a reply or a snapshot still shares
//! it (copy-on-write), so GET stays a reference-count increment. A string that must grow gets
//! Redis's greedy capacity (twice the length below 1 MB, 1 MB more above), so SETBITs at
//! increasing offsets cost amortised O(1) each; that slack (at most min(length, 1 MB)) is not
//! charged, the length is, as for every string.
//!
//! `maxmemory`: SETBIT is `denyoom`, so the dispatcher refuses it while the keyspace is over the
//! limit. A growth is also checked in advance here: a SETBIT whose string would grow past the
//! limit is refused with the same OOM reply (Redis only checks before the command, so one SETBIT
//! at offset 2^32-1 could add 512 MB to a full server). Growth is allocated fallibly: a failed
//! allocation is the OOM reply with nothing changed, never an abort. Commands replayed from
//! the log are not refused (they were accepted once).

use bytes::Bytes;

use super::parse::{eq_ignore_case, parse_i64};
use super::{err, Ctx};
use crate::db::Value;
use crate::frame::Frame;
use crate::shared::Shared;

/// The longest string a bit offset may address, in bytes (Redis's default `proto-max-bulk-len`).
pub const MAX_STRING: u64 = 512 * 1024 * 1024;

/// Above this length a growing string gets this much slack instead of doubling (Redis's
/// `SDS_MAX_PREALLOC`).
const MAX_PREALLOC: usize = 1024 * 1024;

/// A SETBIT/GETBIT offset: a Redis integer in `0..MAX_STRING * 8`.
pub fn parse_offset(arg: &[u8]) -> Option<u64> {
    let v = u64::try_from(parse_i64(arg)?).ok()?;
    (v >> 3 < MAX_STRING).then_some(v)
}

/// SETBIT's value: a Redis integer (so `"01"` and `"+1"` are not) equal to 0 or 1.
pub fn parse_bit_value(arg: &[u8]) -> Option<bool> {
    match parse_i64(arg)? {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// The byte of `offset` and the mask of its bit in that byte (bit 0 = most significant).
fn locate(offset: u64) -> (usize, u8) {
    ((offset >> 3) as usize, 0x80 >> (offset & 7))
}

/// The bit at `offset`; 0 past the end.
pub fn bit_at(data: &[u8], offset: u64) -> bool {
    let (byte, mask) = locate(offset);
    data.get(byte).is_some_and(|b| b & mask != 0)
}

/// The capacity a string growing to `need` bytes is given (Redis's greedy `sdsMakeRoomFor`).
fn grown_capacity(need: usize) -> usize {
    let greedy = if need < MAX_PREALLOC { need * 2 } else { need + MAX_PREALLOC };
    greedy.min(MAX_STRING as usize).max(need)
}

/// The allocation behind a growing string failed.
#[derive(Debug)]
struct AllocFailed;

/// Sets or clears the bit `mask` of byte `byte` of `b`, growing it zero-filled to `byte + 1`
/// bytes first if needed. In place when `b` is its buffer's only owner; on a failed allocation
/// `b` is left as it was.
fn write_bit(b: &mut Bytes, byte: usize, mask: u8, on: bool) -> Result<(), AllocFailed> {
    edit_string(b, byte + 1, |buf| if on { buf[byte] |= mask } else { buf[byte] &= !mask })
}

/// Grows `b` zero-filled to at least `len` bytes (Redis's greedy capacity), then lets `edit`
/// change its bytes. In place when `b` is its buffer's only owner (a reply or a snapshot sharing
/// it gets a copy made here: copy-on-write); on a failed allocation `b` is left as it was.
fn edit_string(b: &mut Bytes, len: usize, edit: impl FnOnce(&mut [u8])) -> Result<(), AllocFailed> {
    let mut m = match std::mem::take(b).try_into_mut() {
        Ok(m) => m,
        Err(shared) => {
            // Shared with a reply or a snapshot: this write copies it (fallibly too: a copy of
            // a 512 MB string must not abort the process).
            let mut v = Vec::new();
            let need = if len > shared.len() { grown_capacity(len) } else { shared.len() };
            if v.try_reserve_exact(need).is_err() {
                *b = shared;
                return Err(AllocFailed);
            }
            v.extend_from_slice(&shared);
            if len > v.len() {
                v.resize(len, 0);
            }
            edit(&mut v);
            *b = Bytes::from(v);
            return Ok(());
        }
    };
    if len > m.len() && len > m.capacity() {
        // A new buffer with room to spare: later growths fit in it.
        let mut v = Vec::new();
        if v.try_reserve_exact(grown_capacity(len)).is_err() {
            *b = m.freeze();
            return Err(AllocFailed);
        }
        v.extend_from_slice(&m);
        v.resize(len, 0);
        edit(&mut v);
        *b = Bytes::from(v);
        return Ok(());
    }
    if len > m.len() {
        m.resize(len, 0);
    }
    edit(&mut m);
    *b = m.freeze();
    Ok(())
}

/// Would growing the keyspace by `grow` bytes take it past `maxmemory` (when set)?
fn growth_refused(server: &Shared, grow: usize) -> bool {
    let max = server.config.read().maxmemory;
    max > 0 && server.db.used_memory().saturating_add(grow as u64) > max
}

fn int(v: bool) -> Frame {
    Frame::Integer(v as i64)
}

/// SETBIT key offset value: the bit's previous value.
pub fn setbit(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let Some(offset) = parse_offset(&argv[2]) else {
        return Frame::error(err::BIT_OFFSET);
    };
    let Some(on) = parse_bit_value(&argv[3]) else {
        return Frame::error(err::BIT_VALUE);
    };
    let key = &argv[1];
    let (byte, mask) = locate(offset);
    // Read first: a SETBIT that changes nothing is not a write (not logged, not dirty).
    let (len, was) = match ctx.keys.get(key).map(|e| &e.value) {
        None => (None, false),
        Some(Value::String(b)) => {
            let was = bit_at(b, offset);
            if byte < b.len() && was == on {
                return int(was);
            }
            (Some(b.len()), was)
        }
        Some(_) => return Frame::error(err::WRONGTYPE),
    };
    let grow = (byte + 1).saturating_sub(len.unwrap_or(0));
    if grow > 0 && !ctx.session.replaying && growth_refused(ctx.server, grow) {
        return Frame::error(err::OOM);
    }
    match len {
        None => {
            let mut v = Vec::new();
            if v.try_reserve_exact(byte + 1).is_err() {
                return Frame::error(err::OOM);
            }
            v.resize(byte + 1, 0);
            if on {
                v[byte] |= mask;
            }
            ctx.keys.insert(key.clone(), Value::String(Bytes::from(v)));
        }
        Some(_) => {
            let entry = ctx.keys.get_mut(key).expect("read above under the same lock");
            let Value::String(b) = &mut entry.value else { unreachable!("a string, read above") };
            if write_bit(b, byte, mask, on).is_err() {
                // Nothing changed: record nothing.
                ctx.propagate = Some(Vec::new());
                return Frame::error(err::OOM);
            }
        }
    }
    int(was)
}

/// GETBIT key offset: 0 for a missing key or an offset past the end.
pub fn getbit(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let Some(offset) = parse_offset(&argv[2]) else {
        return Frame::error(err::BIT_OFFSET);
    };
    match ctx.keys.get(&argv[1]).map(|e| &e.value) {
        None => int(false),
        Some(Value::String(b)) => int(bit_at(b, offset)),
        Some(_) => Frame::error(err::WRONGTYPE),
    }
}

/// STRLEN key: 0 for a missing key.
pub fn strlen(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match ctx.keys.get(&argv[1]).map(|e| &e.value) {
        None => Frame::Integer(0),
        Some(Value::String(b)) => Frame::Integer(b.len() as i64),
        Some(_) => Frame::error(err::WRONGTYPE),
    }
}

/// The unit of a BITCOUNT / BITPOS range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Byte indexes (the default).
    Byte,
    /// Bit indexes.
    Bit,
}

fn parse_unit(arg: &[u8]) -> Option<Unit> {
    if eq_ignore_case(arg, "byte") {
        Some(Unit::Byte)
    } else if eq_ignore_case(arg, "bit") {
        Some(Unit::Bit)
    } else {
        None
    }
}

/// Redis's index rule over `total` units: a negative index counts from the end, then both ends
/// are clamped to `0..total`. `None` when the range is empty.
pub fn clamp_range(start: i64, end: i64, total: i64) -> Option<(i64, i64)> {
    let from_end = |i: i64| if i < 0 { total + i } else { i };
    let start = from_end(start).max(0);
    let end = from_end(end).max(0).min(total - 1);
    (start <= end).then_some((start, end))
}

/// The range `start..=end` in `unit`s of a `len`-byte string as bit positions `first..=last`.
pub fn bit_range(start: i64, end: i64, unit: Unit, len: usize) -> Option<(u64, u64)> {
    let len = len as i64;
    match unit {
        Unit::Byte => clamp_range(start, end, len).map(|(s, e)| (s as u64 * 8, e as u64 * 8 + 7)),
        Unit::Bit => clamp_range(start, end, len * 8).map(|(s, e)| (s as u64, e as u64)),
    }
}

/// Set bits of a byte slice, eight bytes at a time.
fn popcount(data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    let mut n: u64 =
        (&mut chunks).map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")).count_ones() as u64).sum();
    n += chunks.remainder().iter().map(|b| b.count_ones() as u64).sum::<u64>();
    n
}

/// The masks of byte `first / 8` keeping positions ≥ `first`, and of byte `last / 8` keeping
/// positions ≤ `last`.
fn edge_masks(first: u64, last: u64) -> (u8, u8) {
    (0xFF >> (first & 7), 0xFF << (7 - (last & 7)))
}

/// Bits set at positions `first..=last`, which must lie within `data`.
pub fn count_bits(data: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let (head, tail) = edge_masks(first, last);
    if fb == lb {
        return (data[fb] & head & tail).count_ones() as u64;
    }
    (data[fb] & head).count_ones() as u64
        + popcount(&data[fb + 1..lb])
        + (data[lb] & tail).count_ones() as u64
}

/// The first position in `first..=last` (within `data`) whose bit is `bit`.
pub fn find_bit(data: &[u8], first: u64, last: u64, bit: bool) -> Option<u64> {
    // Looking for a 0 is looking for a 1 in the complement.
    let flip: u8 = if bit { 0 } else { 0xFF };
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let (head, tail) = edge_masks(first, last);
    let at = |i: usize, x: u8| Some(i as u64 * 8 + x.leading_zeros() as u64);
    let x = (data[fb] ^ flip) & head & if fb == lb { tail } else { 0xFF };
    if x != 0 {
        return at(fb, x);
    }
    if fb == lb {
        return None;
    }
    let mid = &data[fb + 1..lb];
    // Skip whole words holding only the bit not looked for.
    let skip = u64::from_ne_bytes([flip; 8]);
    let words =
        mid.chunks_exact(8).take_while(|c| u64::from_ne_bytes((*c).try_into().expect("8 bytes")) == skip);
    let from = words.count() * 8;
    if let Some(p) = mid[from..].iter().position(|&b| b != flip) {
        let i = fb + 1 + from + p;
        return at(i, data[i] ^ flip);
    }
    let x = (data[lb] ^ flip) & tail;
    if x != 0 {
        return at(lb, x);
    }
    None
}

/// BITCOUNT's answer for an existing string: `range` is `(start, end, unit)`, `None` = whole.
pub fn count(data: &[u8], range: Option<(i64, i64, Unit)>) -> i64 {
    let bits = match range {
        None => (!data.is_empty()).then(|| (0, data.len() as u64 * 8 - 1)),
        // Both from the end and in the wrong order: empty, whatever the length (Redis checks
        // this before clamping, which could otherwise turn it into the first byte).
        Some((s, e, _)) if s < 0 && e < 0 && s > e => None,
        Some((s, e, unit)) => bit_range(s, e, unit, data.len()),
    };
    bits.map_or(0, |(a, b)| count_bits(data, a, b) as i64)
}

/// BITPOS's answer for an existing string. `end: None` = not given (the end of the string).
pub fn position(data: &[u8], bit: bool, start: i64, end: Option<i64>, unit: Unit) -> i64 {
    let Some((first, last)) = bit_range(start, end.unwrap_or(-1), unit, data.len()) else {
        return -1;
    };
    match find_bit(data, first, last, bit) {
        Some(p) => p as i64,
        // No explicit end: the string reads as followed by zeros, so the first clear bit is the
        // one just past the searched bytes.
        None if !bit && end.is_none() => last as i64 + 1,
        None => -1,
    }
}

/// BITCOUNT key [start end [BYTE | BIT]].
pub fn bitcount(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let range = match argv.len() {
        2 => None,
        4 | 5 => {
            let (Some(start), Some(end)) = (parse_i64(&argv[2]), parse_i64(&argv[3])) else {
                return Frame::error(err::NOT_INTEGER);
            };
            let unit = match argv.get(4) {
                None => Unit::Byte,
                Some(u) => match parse_unit(u) {
                    Some(u) => u,
                    None => return Frame::error(err::SYNTAX),
                },
            };
            Some((start, end, unit))
        }
        _ => return Frame::error(err::SYNTAX),
    };
    match ctx.keys.get(&argv[1]).map(|e| &e.value) {
        None => Frame::Integer(0),
        Some(Value::String(b)) => Frame::Integer(count(b, range)),
        Some(_) => Frame::error(err::WRONGTYPE),
    }
}

/// BITPOS key bit [start [end [BYTE | BIT]]].
pub fn bitpos(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let bit = match parse_i64(&argv[2]) {
        None => return Frame::error(err::NOT_INTEGER),
        Some(0) => false,
        Some(1) => true,
        Some(_) => return Frame::error(err::BITPOS_BIT),
    };
    if argv.len() > 6 {
        return Frame::error(err::SYNTAX);
    }
    // Redis's order: start, then the unit, then end.
    let start = match argv.get(3) {
        None => 0,
        Some(s) => match parse_i64(s) {
            Some(s) => s,
            None => return Frame::error(err::NOT_INTEGER),
        },
    };
    let unit = match argv.get(5) {
        None => Unit::Byte,
        Some(u) => match parse_unit(u) {
            Some(u) => u,
            None => return Frame::error(err::SYNTAX),
        },
    };
    let end = match argv.get(4) {
        None => None,
        Some(e) => match parse_i64(e) {
            Some(e) => Some(e),
            None => return Frame::error(err::NOT_INTEGER),
        },
    };
    match ctx.keys.get(&argv[1]).map(|e| &e.value) {
        // A missing key is an endless run of zeros.
        None => Frame::Integer(if bit { -1 } else { 0 }),
        Some(Value::String(b)) => Frame::Integer(position(b, bit, start, end, unit)),
        Some(_) => Frame::error(err::WRONGTYPE),
    }
}

/// Error of an invalid BITFIELD type.
pub const BITFIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
/// Error of an invalid OVERFLOW behaviour.
pub const BITFIELD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
/// Error of a write operation in BITFIELD_RO.
pub const BITFIELD_RO_WRITE: &str = "ERR BITFIELD_RO only supports the GET subcommand";
/// SETRANGE's error for a negative offset.
pub const SETRANGE_OFFSET: &str = "ERR offset is out of range";
/// SETRANGE's error for a result longer than `proto-max-bulk-len`.
pub const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// What a BITFIELD operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// What SET and INCRBY do when the value does not fit the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// One BITFIELD operation: a field of `bits` bits (signed or not) at bit `offset`.
#[derive(Debug, Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

/// A field type, `i1`..`i64` or `u1`..`u63` (lower-case, as Redis reads it).
fn parse_field_type(arg: &[u8]) -> Option<(bool, u32)> {
    let signed = match arg.first()? {
        b'i' => true,
        b'u' => false,
        _ => return None,
    };
    let bits = parse_i64(&arg[1..])?;
    let max = if signed { 64 } else { 63 };
    (1..=max).contains(&bits).then_some((signed, bits as u32))
}

/// A field offset: a bit offset, or `#n` for the n-th field of this width (`n · bits`), whose
/// byte is below 512 MB.
fn parse_field_offset(arg: &[u8], bits: u32) -> Option<u64> {
    let (hash, digits) = match arg.first() {
        Some(b'#') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let mut v = parse_i64(digits)?;
    if hash {
        v = v.checked_mul(bits as i64)?;
    }
    let v = u64::try_from(v).ok()?;
    (v >> 3 < MAX_STRING).then_some(v)
}

/// Parses BITFIELD's operations (Redis's order of checks: each operation's name and argument
/// count, then its type, its offset, and for SET and INCRBY its value).
fn parse_bitfield(argv: &[Bytes]) -> Result<Vec<Field>, Frame> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < argv.len() {
        let remaining = argv.len() - j - 1;
        let sub = &argv[j];
        let op = if eq_ignore_case(sub, "get") && remaining >= 2 {
            FieldOp::Get
        } else if eq_ignore_case(sub, "set") && remaining >= 3 {
            FieldOp::Set(0)
        } else if eq_ignore_case(sub, "incrby") && remaining >= 3 {
            FieldOp::IncrBy(0)
        } else if eq_ignore_case(sub, "overflow") && remaining >= 1 {
            let kind = &argv[j + 1];
            overflow = if eq_ignore_case(kind, "wrap") {
                Overflow::Wrap
            } else if eq_ignore_case(kind, "sat") {
                Overflow::Sat
            } else if eq_ignore_case(kind, "fail") {
                Overflow::Fail
            } else {
                return Err(Frame::error(BITFIELD_OVERFLOW));
            };
            j += 2;
            continue;
        } else {
            return Err(Frame::error(err::SYNTAX));
        };
        let Some((signed, bits)) = parse_field_type(&argv[j + 1]) else {
            return Err(Frame::error(BITFIELD_TYPE));
        };
        let Some(offset) = parse_field_offset(&argv[j + 2], bits) else {
            return Err(Frame::error(err::BIT_OFFSET));
        };
        let op = match op {
            FieldOp::Get => FieldOp::Get,
            _ => {
                let Some(v) = parse_i64(&argv[j + 3]) else {
                    return Err(Frame::error(err::NOT_INTEGER));
                };
                if matches!(op, FieldOp::Set(_)) {
                    FieldOp::Set(v)
                } else {
                    FieldOp::IncrBy(v)
                }
            }
        };
        ops.push(Field { op, signed, bits, offset, overflow });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok(ops)
}

/// `n` bits from bit `offset` of `bit` (most significant first), as an unsigned number.
fn get_unsigned(bit: &impl Fn(u64) -> bool, offset: u64, bits: u32) -> u64 {
    (0..bits as u64).fold(0, |v, j| (v << 1) | bit(offset + j) as u64)
}

/// The same bits read as a two's complement number.
fn get_signed(bit: &impl Fn(u64) -> bool, offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(bit, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Whether `value + incr` leaves an unsigned field of `bits` bits, and the value to store
/// instead (wrapped or saturated; `None` for FAIL). Redis's `checkUnsignedBitfieldOverflow`.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> (bool, Option<u64>) {
    let max = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = (value as i64).wrapping_neg();
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX.checked_shl(bits).unwrap_or(0));
    if value > max || (incr > 0 && incr > maxincr) {
        (
            true,
            match ow {
                Overflow::Wrap => Some(wrap()),
                Overflow::Sat => Some(max),
                Overflow::Fail => None,
            },
        )
    } else if incr < 0 && incr < minincr {
        (
            true,
            match ow {
                Overflow::Wrap => Some(wrap()),
                Overflow::Sat => Some(0),
                Overflow::Fail => None,
            },
        )
    } else {
        (false, None)
    }
}

/// The signed counterpart, Redis's `checkSignedBitfieldOverflow`.
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> (bool, Option<i64>) {
    let max = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let msb = 1u64 << (bits - 1);
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & msb != 0 {
                c |= mask
            } else {
                c &= !mask
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        (
            true,
            match ow {
                Overflow::Wrap => Some(wrap()),
                Overflow::Sat => Some(max),
                Overflow::Fail => None,
            },
        )
    } else if value < min || (bits != 64 && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
        (
            true,
            match ow {
                Overflow::Wrap => Some(wrap()),
                Overflow::Sat => Some(min),
                Overflow::Fail => None,
            },
        )
    } else {
        (false, None)
    }
}

/// Runs BITFIELD's operations over `base` (the string, `None` if missing), in order, with their
/// writes kept in an overlay of the bytes they change: returns the replies and the changed bytes
/// (index, new value), so that a command that changes nothing writes (and logs) nothing.
fn run_fields(base: Option<&[u8]>, ops: &[Field]) -> (Vec<Frame>, std::collections::BTreeMap<usize, u8>) {
    let mut overlay: std::collections::BTreeMap<usize, u8> = std::collections::BTreeMap::new();
    let byte_at = |overlay: &std::collections::BTreeMap<usize, u8>, i: usize| -> u8 {
        overlay.get(&i).copied().unwrap_or_else(|| base.and_then(|b| b.get(i)).copied().unwrap_or(0))
    };
    let mut replies = Vec::with_capacity(ops.len());
    for f in ops {
        let read = |overlay: &std::collections::BTreeMap<usize, u8>| {
            let bit = |o: u64| byte_at(overlay, (o >> 3) as usize) & (0x80 >> (o & 7)) != 0;
            if f.signed {
                get_signed(&bit, f.offset, f.bits) as u64
            } else {
                get_unsigned(&bit, f.offset, f.bits)
            }
        };
        let old = read(&overlay);
        let (reply, new) = match f.op {
            FieldOp::Get => (Frame::Integer(old as i64), None),
            FieldOp::Set(v) => {
                let (over, limit) = if f.signed {
                    let (o, l) = signed_overflow(v, 0, f.bits, f.overflow);
                    (o, l.map(|x| x as u64))
                } else {
                    unsigned_overflow(v as u64, 0, f.bits, f.overflow)
                };
                match (over, limit) {
                    (true, None) => (Frame::Null, None),
                    (true, Some(l)) => (Frame::Integer(old as i64), Some(l)),
                    (false, _) => (Frame::Integer(old as i64), Some(v as u64)),
                }
            }
            FieldOp::IncrBy(d) => {
                let (over, limit) = if f.signed {
                    let (o, l) = signed_overflow(old as i64, d, f.bits, f.overflow);
                    (o, l.map(|x| x as u64))
                } else {
                    unsigned_overflow(old, d, f.bits, f.overflow)
                };
                let new = match (over, limit) {
                    (true, None) => None,
                    (true, Some(l)) => Some(l),
                    (false, _) => Some(old.wrapping_add(d as u64)),
                };
                match new {
                    None => (Frame::Null, None),
                    // The new value: in range (sign-extended for a signed field) by now.
                    Some(n) => (Frame::Integer(n as i64), Some(n)),
                }
            }
        };
        if let Some(n) = new {
            for j in 0..f.bits as u64 {
                let o = f.offset + j;
                let on = (n >> (f.bits as u64 - 1 - j)) & 1 == 1;
                let i = (o >> 3) as usize;
                let mask = 0x80u8 >> (o & 7);
                let b = byte_at(&overlay, i);
                overlay.insert(i, if on { b | mask } else { b & !mask });
            }
        }
        replies.push(reply);
    }
    // Keep only the bytes that differ from the string (or are non-zero past its end).
    overlay.retain(|&i, v| *v != base.and_then(|b| b.get(i)).copied().unwrap_or(0));
    (replies, overlay)
}

/// BITFIELD key [GET type offset | [OVERFLOW WRAP|SAT|FAIL] SET type offset value |
/// INCRBY type offset increment] ...: the replies of each operation, in order (SET: the old
/// value; INCRBY: the new one; nil when OVERFLOW FAIL refused the write). A command with a SET
/// or INCRBY creates the key, or grows it zero-filled, up to the highest bit it writes (even
/// if no value changes); it is logged as received when it changed the string.
pub fn bitfield(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    bitfield_generic(ctx, argv, false)
}

/// BITFIELD_RO key [GET type offset ...]: BITFIELD's GET operations on a read-only command.
pub fn bitfield_ro(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    bitfield_generic(ctx, argv, true)
}

fn bitfield_generic(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], read_only_command: bool) -> Frame {
    let ops = match parse_bitfield(argv) {
        Ok(ops) => ops,
        Err(e) => return e,
    };
    let key = &argv[1];
    let highest = ops.iter().filter(|f| f.op != FieldOp::Get).map(|f| f.offset + f.bits as u64 - 1).max();
    let (existing, replies, changes) = match ctx.keys.get(key).map(|e| &e.value) {
        Some(Value::String(b)) => {
            if highest.is_some() && read_only_command {
                return Frame::error(BITFIELD_RO_WRITE);
            }
            let (r, c) = run_fields(Some(b), &ops);
            (Some(b.len()), r, c)
        }
        Some(_) => return Frame::error(err::WRONGTYPE),
        None => {
            if highest.is_some() && read_only_command {
                return Frame::error(BITFIELD_RO_WRITE);
            }
            let (r, c) = run_fields(None, &ops);
            (None, r, c)
        }
    };
    let Some(highest) = highest else {
        return Frame::Array(replies);
    };
    let need = usize::try_from((highest >> 3) + 1).unwrap_or(usize::MAX);
    let grow = need.saturating_sub(existing.unwrap_or(0));
    if grow == 0 && changes.is_empty() {
        return Frame::Array(replies);
    }
    if grow > 0 && !ctx.session.replaying && growth_refused(ctx.server, grow) {
        return Frame::error(err::OOM);
    }
    let apply = |buf: &mut [u8]| {
        for (&i, &v) in &changes {
            buf[i] = v;
        }
    };
    match existing {
        None => {
            let mut v = Vec::new();
            if v.try_reserve_exact(need).is_err() {
                return Frame::error(err::OOM);
            }
            v.resize(need, 0);
            apply(&mut v);
            ctx.keys.insert(key.clone(), Value::String(Bytes::from(v)));
        }
        Some(_) => {
            let entry = ctx.keys.get_mut(key).expect("read above under the same lock");
            let Value::String(b) = &mut entry.value else { unreachable!("a string, read above") };
            if edit_string(b, need, apply).is_err() {
                ctx.propagate = Some(Vec::new());
                return Frame::error(err::OOM);
            }
        }
    }
    Frame::Array(replies)
}

/// GETRANGE key start end: the bytes `start..=end` (Redis's index rules: negative from the end,
/// clamped; an empty string when the range is empty or the key missing).
pub fn getrange(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let (Some(start), Some(end)) = (parse_i64(&argv[2]), parse_i64(&argv[3])) else {
        return Frame::error(err::NOT_INTEGER);
    };
    let data = match ctx.keys.get(&argv[1]).map(|e| &e.value) {
        None => return Frame::bulk(Bytes::new()),
        Some(Value::String(b)) => b.clone(),
        Some(_) => return Frame::error(err::WRONGTYPE),
    };
    if start < 0 && end < 0 && start > end {
        return Frame::bulk(Bytes::new());
    }
    match clamp_range(start, end, data.len() as i64) {
        Some((s, e)) => Frame::bulk(data.slice(s as usize..=e as usize)),
        None => Frame::bulk(Bytes::new()),
    }
}

/// SETRANGE key offset value: overwrites the string from byte `offset`, growing it zero-filled
/// as needed; the new length. An empty value changes nothing (and creates no key).
pub fn setrange(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let Some(offset) = parse_i64(&argv[2]) else {
        return Frame::error(err::NOT_INTEGER);
    };
    if offset < 0 {
        return Frame::error(SETRANGE_OFFSET);
    }
    let value = &argv[3];
    let key = &argv[1];
    let len = match ctx.keys.get(key).map(|e| &e.value) {
        None => None,
        Some(Value::String(b)) => Some(b.len()),
        Some(_) => return Frame::error(err::WRONGTYPE),
    };
    if value.is_empty() {
        return Frame::Integer(len.unwrap_or(0) as i64);
    }
    let end = (offset as u64).saturating_add(value.len() as u64);
    if end > MAX_STRING {
        return Frame::error(STRING_TOO_LONG);
    }
    let (offset, end) = (offset as usize, end as usize);
    match len {
        Some(l) if end <= l && argv_matches(ctx, key, offset, value) => return Frame::Integer(l as i64),
        _ => {}
    }
    let grow = end.saturating_sub(len.unwrap_or(0));
    if grow > 0 && !ctx.session.replaying && growth_refused(ctx.server, grow) {
        return Frame::error(err::OOM);
    }
    match len {
        None => {
            let mut v = Vec::new();
            if v.try_reserve_exact(end).is_err() {
                return Frame::error(err::OOM);
            }
            v.resize(end, 0);
            v[offset..end].copy_from_slice(value);
            ctx.keys.insert(key.clone(), Value::String(Bytes::from(v)));
            Frame::Integer(end as i64)
        }
        Some(l) => {
            let entry = ctx.keys.get_mut(key).expect("read above under the same lock");
            let Value::String(b) = &mut entry.value else { unreachable!("a string, read above") };
            if edit_string(b, end, |buf| buf[offset..end].copy_from_slice(value)).is_err() {
                ctx.propagate = Some(Vec::new());
                return Frame::error(err::OOM);
            }
            Frame::Integer(l.max(end) as i64)
        }
    }
}

/// Whether the string at `key` already holds `value` at `offset` (a SETRANGE that would change
/// nothing is not a write: not logged, not dirty).
fn argv_matches(ctx: &mut Ctx<'_, '_>, key: &[u8], offset: usize, value: &[u8]) -> bool {
    match ctx.keys.get(key).map(|e| &e.value) {
        Some(Value::String(b)) => b.get(offset..offset + value.len()) == Some(value),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic byte generator (splitmix64).
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = s;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                (z ^ (z >> 31)) as u8
            })
            .collect()
    }

    fn naive_bit(data: &[u8], i: u64) -> bool {
        data[(i / 8) as usize] >> (7 - i % 8) & 1 == 1
    }

    #[test]
    fn offsets_and_values_parse_as_redis() {
        assert_eq!(parse_offset(b"0"), Some(0));
        assert_eq!(parse_offset(b"4294967295"), Some((1 << 32) - 1));
        for bad in ["4294967296", "-1", "1.5", "01", "+1", " 1", "", "abc", "99999999999999999999"] {
            assert_eq!(parse_offset(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_bit_value(b"0"), Some(false));
        assert_eq!(parse_bit_value(b"1"), Some(true));
        // string2ll refuses leading zeros, '+', '-0' and spaces; then only 0 and 1 are bits.
        for bad in ["2", "-1", "01", "+1", "-0", "1 ", "true", ""] {
            assert_eq!(parse_bit_value(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn bit_zero_is_the_most_significant_bit() {
        assert!(bit_at(&[0x80], 0));
        assert!(!bit_at(&[0x80], 1));
        assert!(bit_at(&[0x00, 0x01], 15));
        assert!(!bit_at(&[0xFF], 8));
        let mut b = Bytes::new();
        write_bit(&mut b, 2, 0x80 >> 3, true).unwrap();
        assert_eq!(&b[..], &[0, 0, 0x10]);
        write_bit(&mut b, 0, 0x80, true).unwrap();
        write_bit(&mut b, 2, 0x80 >> 3, false).unwrap();
        assert_eq!(&b[..], &[0x80, 0, 0]);
    }

    #[test]
    fn writes_are_in_place_unless_shared() {
        let mut b = Bytes::new();
        write_bit(&mut b, 100, 1, true).unwrap();
        let p = b.as_ptr();
        // Within the greedy capacity (2 × 101 bytes): same buffer.
        write_bit(&mut b, 150, 1, true).unwrap();
        write_bit(&mut b, 3, 1, true).unwrap();
        assert_eq!(b.as_ptr(), p);
        assert_eq!(b.len(), 151);
        // A reader holds the buffer: the write copies, the reader's view is unchanged.
        let reader = b.clone();
        write_bit(&mut b, 5, 1, true).unwrap();
        assert_ne!(b.as_ptr(), reader.as_ptr());
        assert_eq!(reader[5], 0);
        assert_eq!(b[5], 1);
        assert_eq!(&b[..5], &reader[..5]);
        // A static (never unique) buffer is copied too.
        let mut s = Bytes::from_static(b"\x00\x00");
        write_bit(&mut s, 1, 0x80, true).unwrap();
        assert_eq!(&s[..], &[0, 0x80]);
    }

    #[test]
    fn growth_is_greedy_like_redis() {
        assert_eq!(grown_capacity(1), 2);
        assert_eq!(grown_capacity(1000), 2000);
        assert_eq!(grown_capacity(MAX_PREALLOC), 2 * MAX_PREALLOC);
        assert_eq!(grown_capacity(10 * MAX_PREALLOC), 11 * MAX_PREALLOC);
        assert_eq!(grown_capacity(MAX_STRING as usize), MAX_STRING as usize);
        // A run of increasing offsets reallocates O(log n + n / 1 MB) times, not once per byte.
        let mut b = Bytes::new();
        let mut moves = 0;
        let mut p = b.as_ptr();
        for byte in 0..100_000 {
            write_bit(&mut b, byte, 1, true).unwrap();
            if b.as_ptr() != p {
                moves += 1;
                p = b.as_ptr();
            }
        }
        assert!(moves <= 18, "{moves} reallocations");
        assert_eq!(popcount(&b), 100_000);
    }

    #[test]
    fn ranges_follow_redis_index_rules() {
        assert_eq!(clamp_range(0, -1, 6), Some((0, 5)));
        assert_eq!(clamp_range(-2, -1, 6), Some((4, 5)));
        assert_eq!(clamp_range(-100, 100, 6), Some((0, 5)));
        assert_eq!(clamp_range(3, 2, 6), None);
        assert_eq!(clamp_range(6, 10, 6), None);
        assert_eq!(clamp_range(0, -1, 0), None);
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 6), Some((0, 5)));
        assert_eq!(bit_range(1, 1, Unit::Byte, 3), Some((8, 15)));
        assert_eq!(bit_range(-3, -1, Unit::Bit, 3), Some((21, 23)));
        assert_eq!(bit_range(5, 100, Unit::Bit, 1), Some((5, 7)));
    }

    /// The examples of the Redis documentation.
    #[test]
    fn redis_doc_examples() {
        let foobar = b"foobar";
        assert_eq!(count(foobar, None), 26);
        assert_eq!(count(foobar, Some((0, 0, Unit::Byte))), 4);
        assert_eq!(count(foobar, Some((1, 1, Unit::Byte))), 6);
        assert_eq!(count(foobar, Some((5, 30, Unit::Bit))), 17);
        assert_eq!(count(b"", None), 0);
        // Both negative and reversed: 0, though clamping alone would count byte 0.
        assert_eq!(count(b"\xff", Some((-1, -5, Unit::Byte))), 0);
        assert_eq!(count(b"\xff", Some((-5, -9, Unit::Byte))), 0);
        assert_eq!(count(b"\xff", Some((-5, -1, Unit::Byte))), 8);
        assert_eq!(count(b"\xff\xff", Some((3, 1, Unit::Byte))), 0);

        let b = Unit::Bit;
        assert_eq!(position(b"\xff\xf0\x00", false, 0, None, Unit::Byte), 12);
        let s = b"\x00\xff\xf0";
        assert_eq!(position(s, true, 0, None, Unit::Byte), 8);
        assert_eq!(position(s, true, 2, None, Unit::Byte), 16);
        assert_eq!(position(s, true, 2, Some(-1), Unit::Byte), 16);
        assert_eq!(position(s, true, 7, Some(15), b), 8);
        let z = b"\x00\x00\x00";
        assert_eq!(position(z, true, 0, None, Unit::Byte), -1);
        assert_eq!(position(z, true, 7, Some(-3), b), -1);
    }

    #[test]
    fn bitpos_clear_bit_rule() {
        let ones = b"\xff\xff\xff";
        // No explicit end: the bit just past the string.
        assert_eq!(position(ones, false, 0, None, Unit::Byte), 24);
        assert_eq!(position(ones, false, 1, None, Unit::Byte), 24);
        assert_eq!(position(ones, false, -1, None, Unit::Byte), 24);
        // An explicit end: none in the range.
        assert_eq!(position(ones, false, 0, Some(-1), Unit::Byte), -1);
        assert_eq!(position(ones, false, 0, Some(2), Unit::Byte), -1);
        assert_eq!(position(ones, false, 0, Some(23), Unit::Bit), -1);
        // An empty string holds neither; an empty range neither.
        assert_eq!(position(b"", false, 0, None, Unit::Byte), -1);
        assert_eq!(position(b"", true, 0, None, Unit::Byte), -1);
        assert_eq!(position(b"\x00", false, 2, None, Unit::Byte), -1);
        assert_eq!(position(b"\x0f", false, 0, None, Unit::Byte), 0);
        assert_eq!(position(b"\x0f", false, 4, Some(7), Unit::Bit), -1);
        assert_eq!(position(b"\x0f", true, 4, Some(7), Unit::Bit), 4);
    }

    /// Counting and searching agree with a bit-by-bit reference on every range of random
    /// strings, in both units (word skipping, partial edge bytes, one-byte ranges).
    #[test]
    fn count_and_find_match_a_naive_reference() {
        for (seed, len) in [(1, 0), (2, 1), (3, 7), (4, 19), (5, 40)] {
            let mut data = bytes(seed, len);
            // Long runs of ones and zeros exercise the word skipping.
            if len >= 40 {
                data[2..20].fill(0xFF);
                data[22..38].fill(0);
            }
            let nbits = len as i64 * 8;
            for unit in [Unit::Byte, Unit::Bit] {
                let total = if unit == Unit::Byte { len as i64 } else { nbits };
                for s in -total - 2..total + 2 {
                    for e in -total - 2..total + 2 {
                        let bits = bit_range(s, e, unit, len);
                        let expect_count = match bits {
                            _ if s < 0 && e < 0 && s > e => 0,
                            None => 0,
                            Some((a, b)) => (a..=b).filter(|&i| naive_bit(&data, i)).count() as i64,
                        };
                        assert_eq!(count(&data, Some((s, e, unit))), expect_count, "{s} {e} {unit:?}");
                        for bit in [false, true] {
                            let found = bits.and_then(|(a, b)| (a..=b).find(|&i| naive_bit(&data, i) == bit));
                            let expect = match (bits, found) {
                                (None, _) => -1,
                                (_, Some(p)) => p as i64,
                                (_, None) => -1,
                            };
                            assert_eq!(
                                position(&data, bit, s, Some(e), unit),
                                expect,
                                "{s} {e} {unit:?} {bit}"
                            );
                        }
                    }
                }
            }
            for bit in [false, true] {
                let found = (0..nbits as u64).find(|&i| naive_bit(&data, i) == bit);
                let expect = match found {
                    Some(p) => p as i64,
                    None if !bit && len > 0 => nbits,
                    None => -1,
                };
                assert_eq!(position(&data, bit, 0, None, Unit::Byte), expect);
            }
        }
    }

    /// The commands through the dispatcher: replies, error texts, what is logged, `maxmemory`.
    mod commands {
        use std::sync::Arc;

        use parking_lot::Mutex;

        use bytes::Bytes;

        use crate::cmd::{execute, replay, Session};
        use crate::config::Params;
        use crate::frame::Frame;
        use crate::persist::Recorder;
        use crate::shared::Shared;

        struct T {
            server: Shared,
            session: Session,
            log: Arc<Mutex<Vec<Vec<Bytes>>>>,
        }

        impl T {
            fn new() -> T {
                let log = Arc::default();
                let server = Shared::new(Params::default(), Box::new(Recorder(Arc::clone(&log))));
                T { server, session: Session::new(1, true), log }
            }
            fn run(&mut self, args: &[&str]) -> Frame {
                let argv = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
                execute(&self.server, &mut self.session, argv).expect("non-empty request")
            }
            fn int(&mut self, args: &[&str]) -> i64 {
                match self.run(args) {
                    Frame::Integer(i) => i,
                    other => panic!("{args:?}: {other:?}"),
                }
            }
            fn err(&mut self, args: &[&str]) -> String {
                match self.run(args) {
                    Frame::Error(e) => e,
                    other => panic!("{args:?}: {other:?}"),
                }
            }
            /// The commands logged since the last call, space-joined.
            fn logged(&mut self) -> Vec<String> {
                let mut log = self.log.lock();
                let out = log
                    .iter()
                    .map(|c| {
                        c.iter()
                            .map(|a| String::from_utf8_lossy(a).into_owned())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect();
                log.clear();
                out
            }
        }

        #[test]
        fn error_replies_are_redis_exact() {
            let mut t = T::new();
            for off in ["-1", "4294967296", "x", "1.0", "01", "+1", ""] {
                assert_eq!(
                    t.err(&["SETBIT", "k", off, "1"]),
                    "ERR bit offset is not an integer or out of range"
                );
                assert_eq!(t.err(&["GETBIT", "k", off]), "ERR bit offset is not an integer or out of range");
            }
            for v in ["2", "-1", "01", "+1", "x", "1.0", ""] {
                assert_eq!(t.err(&["SETBIT", "k", "0", v]), "ERR bit is not an integer or out of range");
            }
            // The offset is checked before the value.
            assert_eq!(
                t.err(&["SETBIT", "k", "-1", "2"]),
                "ERR bit offset is not an integer or out of range"
            );
            assert_eq!(t.err(&["BITPOS", "k", "2"]), "ERR The bit argument must be 1 or 0.");
            assert_eq!(t.err(&["BITPOS", "k", "x"]), "ERR value is not an integer or out of range");
            assert_eq!(t.err(&["BITPOS", "k", "1", "x"]), "ERR value is not an integer or out of range");
            assert_eq!(t.err(&["BITPOS", "k", "1", "0", "x"]), "ERR value is not an integer or out of range");
            // Redis reads the unit before the end.
            assert_eq!(t.err(&["BITPOS", "k", "1", "0", "x", "WORD"]), "ERR syntax error");
            assert_eq!(t.err(&["BITPOS", "k", "1", "0", "1", "BIT", "x"]), "ERR syntax error");
            assert_eq!(t.err(&["BITCOUNT", "k", "0"]), "ERR syntax error");
            assert_eq!(t.err(&["BITCOUNT", "k", "0", "x"]), "ERR value is not an integer or out of range");
            assert_eq!(t.err(&["BITCOUNT", "k", "0", "1", "WORD"]), "ERR syntax error");
            assert_eq!(t.err(&["BITCOUNT", "k", "0", "1", "BIT", "x"]), "ERR syntax error");
            assert_eq!(t.err(&["SETBIT", "k", "1"]), "ERR wrong number of arguments for 'setbit' command");
            assert_eq!(t.err(&["GETBIT", "k"]), "ERR wrong number of arguments for 'getbit' command");
            assert_eq!(t.err(&["BITPOS", "k"]), "ERR wrong number of arguments for 'bitpos' command");
            assert_eq!(t.err(&["STRLEN", "k", "x"]), "ERR wrong number of arguments for 'strlen' command");
            // Nothing was created by any of them.
            assert_eq!(t.int(&["EXISTS", "k"]), 0);
            assert!(t.logged().is_empty());
            // Filters are the wrong type for every command, and bitmaps for BF.ADD.
            assert!(!matches!(t.run(&["BF.ADD", "bf", "x"]), Frame::Error(_)));
            let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
            for cmd in [
                &["SETBIT", "bf", "0", "1"][..],
                &["GETBIT", "bf", "0"],
                &["BITCOUNT", "bf"],
                &["BITCOUNT", "bf", "0", "-1"],
                &["BITPOS", "bf", "1"],
                &["STRLEN", "bf"],
            ] {
                assert_eq!(t.err(cmd), wrong, "{cmd:?}");
            }
            assert_eq!(t.int(&["SETBIT", "bm", "7", "1"]), 0);
            assert_eq!(t.err(&["BF.ADD", "bm", "x"]), wrong);
            assert_eq!(t.err(&["CF.ADD", "bm", "x"]), wrong);
        }

        #[test]
        fn setbit_creates_grows_keeps_ttl_and_logs_only_changes() {
            let mut t = T::new();
            assert_eq!(t.int(&["GETBIT", "k", "5"]), 0);
            assert_eq!(t.int(&["BITCOUNT", "k"]), 0);
            assert_eq!(t.int(&["BITPOS", "k", "1"]), -1);
            assert_eq!(t.int(&["BITPOS", "k", "0"]), 0);
            assert_eq!(t.int(&["STRLEN", "k"]), 0);
            // Clearing a bit of a missing key creates it, zero-filled.
            assert_eq!(t.int(&["SETBIT", "k", "9", "0"]), 0);
            assert_eq!(t.int(&["STRLEN", "k"]), 2);
            assert_eq!(t.logged(), ["SETBIT k 9 0"]);
            assert_eq!(t.int(&["SETBIT", "k", "9", "1"]), 0);
            assert_eq!(t.int(&["SETBIT", "k", "9", "1"]), 1);
            assert_eq!(t.int(&["SETBIT", "k", "3", "0"]), 0);
            // Only the first changed the string.
            assert_eq!(t.logged(), ["SETBIT k 9 1"]);
            // Clearing past the end grows the string: a change.
            assert_eq!(t.int(&["SETBIT", "k", "100", "0"]), 0);
            assert_eq!(t.logged(), ["SETBIT k 100 0"]);
            assert_eq!(t.int(&["STRLEN", "k"]), 13);
            assert_eq!(
                t.run(&["GET", "k"]),
                Frame::bulk(Bytes::from(vec![0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))
            );
            assert_eq!(t.int(&["SETBIT", "k", "9", "0"]), 1);
            assert_eq!(t.int(&["BITCOUNT", "k"]), 0);
            // A TTL survives SETBIT.
            assert_eq!(t.run(&["SET", "s", "a", "PX", "100000"]), Frame::ok());
            assert_eq!(t.int(&["SETBIT", "s", "100", "1"]), 0);
            assert!(t.int(&["PTTL", "s"]) > 0);
            assert_eq!(t.int(&["GETBIT", "s", "1"]), 1, "'a' is 0x61");
            assert_eq!(t.run(&["TYPE", "s"]), Frame::Simple("string".into()));
            // COPY shares the buffer: a SETBIT on either copies it first, the other is unchanged.
            assert_eq!(t.int(&["COPY", "s", "c"]), 1);
            assert_eq!(t.int(&["SETBIT", "c", "0", "1"]), 0);
            assert_eq!(t.int(&["GETBIT", "s", "0"]), 0);
            assert_eq!(t.int(&["SETBIT", "s", "7", "0"]), 1);
            assert_eq!(t.int(&["GETBIT", "c", "7"]), 1);
            // 'a' is 0x61 (bits 1, 2, 7), plus bit 100.
            assert_eq!(t.int(&["BITCOUNT", "c"]), 5);
            assert_eq!(t.int(&["BITCOUNT", "s"]), 3);
            // A shared string that also grows: copied into a larger buffer, the other unchanged.
            assert_eq!(t.int(&["COPY", "s", "g"]), 1);
            assert_eq!(t.int(&["SETBIT", "g", "300", "1"]), 0);
            assert_eq!((t.int(&["STRLEN", "g"]), t.int(&["BITCOUNT", "g"])), (38, 4));
            assert_eq!((t.int(&["STRLEN", "s"]), t.int(&["BITCOUNT", "s"])), (13, 3));
        }

        #[test]
        fn growth_past_maxmemory_is_refused_cleanly() {
            let mut t = T::new();
            assert_eq!(t.int(&["SETBIT", "k", "0", "1"]), 0);
            let used = t.server.db.used_memory();
            t.server.config.write().maxmemory = used + 1000;
            t.logged();
            let oom = "OOM command not allowed when used memory > 'maxmemory'.";
            // 512 MB more: refused before allocating, nothing changed or logged.
            assert_eq!(t.err(&["SETBIT", "k", "4294967295", "1"]), oom);
            assert_eq!(t.err(&["SETBIT", "new", "4294967295", "1"]), oom);
            assert_eq!(t.int(&["STRLEN", "k"]), 1);
            assert_eq!(t.int(&["EXISTS", "new"]), 0);
            assert!(t.logged().is_empty());
            // Up to the limit exactly: 1001 bytes is 1000 more than `used`; 1002 is refused.
            assert_eq!(t.int(&["SETBIT", "k", "8007", "1"]), 0);
            assert_eq!(t.err(&["SETBIT", "k", "8008", "1"]), oom);
            // Writes that do not grow still run at the limit.
            assert_eq!(t.int(&["SETBIT", "k", "5", "1"]), 0);
            assert_eq!(t.logged(), ["SETBIT k 8007 1", "SETBIT k 5 1"]);
            // Replaying the log is not refused: it was accepted once.
            let argv: Vec<Bytes> = ["SETBIT", "k", "80000", "1"].iter().map(|a| Bytes::from(*a)).collect();
            let mut keys = t.server.db.lock_all();
            assert_eq!(replay(&t.server, &mut keys, &argv).unwrap(), Frame::Integer(0));
            drop(keys);
            assert_eq!(t.int(&["STRLEN", "k"]), 10001);
            // Now over the limit: the dispatcher refuses every SETBIT, even one that does not grow.
            assert_eq!(t.err(&["SETBIT", "k", "5", "0"]), oom);
            assert_eq!(t.int(&["GETBIT", "k", "80000"]), 1);
            assert_eq!(t.int(&["DEL", "k"]), 1);
            assert_eq!(t.int(&["SETBIT", "k", "5", "1"]), 0);
        }

        /// BITFIELD and SETRANGE are logged as received when they change the string (or create
        /// or grow it), and not at all when they change nothing; growth past `maxmemory` is
        /// refused before anything is allocated.
        #[test]
        fn bitfield_and_setrange_log_only_changes() {
            let mut t = T::new();
            let set = |t: &mut T, args: &[&str]| match t.run(args) {
                Frame::Array(v) => v,
                other => panic!("{args:?}: {other:?}"),
            };
            // Creation by INCRBY 0 alone: a change (the key appears, at its full length).
            assert_eq!(set(&mut t, &["BITFIELD", "b", "INCRBY", "u1", "8191", "0"]), [Frame::Integer(0)]);
            assert_eq!(t.int(&["STRLEN", "b"]), 1024);
            assert_eq!(t.logged(), ["BITFIELD b INCRBY u1 8191 0"]);
            // Bits set: logged; the same again: not.
            let add = [
                "BITFIELD", "b", "INCRBY", "u1", "8191", "0", "SET", "u1", "5", "1", "SET", "u1", "700", "1",
            ];
            assert_eq!(set(&mut t, &add), [Frame::Integer(0), Frame::Integer(0), Frame::Integer(0)]);
            assert_eq!(t.logged().len(), 1);
            assert_eq!(set(&mut t, &add), [Frame::Integer(0), Frame::Integer(1), Frame::Integer(1)]);
            assert!(t.logged().is_empty());
            // Reads, a refused write (FAIL), a SET of the value there: nothing logged.
            set(
                &mut t,
                &["BITFIELD", "b", "GET", "u8", "0", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1000"],
            );
            set(&mut t, &["BITFIELD_RO", "b", "GET", "u8", "0"]);
            set(&mut t, &["BITFIELD", "b", "SET", "u1", "5", "1"]);
            assert!(t.logged().is_empty());
            // A change that an INCRBY later undoes in the same command: nothing changed.
            set(&mut t, &["BITFIELD", "b", "INCRBY", "u8", "#5", "3", "INCRBY", "u8", "#5", "-3"]);
            assert!(t.logged().is_empty());
            // Growing the string counts even with no bit changed.
            set(&mut t, &["BITFIELD", "b", "SET", "u1", "9000", "0"]);
            assert_eq!(t.int(&["STRLEN", "b"]), 1126);
            assert_eq!(t.logged().len(), 1);
            // SETRANGE: a change, then the same bytes again (not logged), then an empty value.
            assert_eq!(t.int(&["SETRANGE", "s", "2", "ab"]), 4);
            assert_eq!(t.int(&["SETRANGE", "s", "2", "ab"]), 4);
            assert_eq!(t.int(&["SETRANGE", "s", "9", ""]), 4);
            assert_eq!(t.int(&["SETRANGE", "none", "9", ""]), 0);
            assert_eq!(t.logged(), ["SETRANGE s 2 ab"]);
            assert_eq!(t.int(&["EXISTS", "none"]), 0);
            // maxmemory: a growth past the limit is refused with nothing changed.
            let used = t.server.db.used_memory();
            t.server.config.write().maxmemory = used + 1000;
            let oom = "OOM command not allowed when used memory > 'maxmemory'.";
            assert_eq!(t.err(&["BITFIELD", "b", "SET", "u1", "4000000", "1"]), oom);
            assert_eq!(t.err(&["SETRANGE", "s", "5000", "x"]), oom);
            assert_eq!(t.err(&["BITFIELD", "new", "INCRBY", "u1", "100000", "0"]), oom);
            assert_eq!(
                (t.int(&["STRLEN", "b"]), t.int(&["STRLEN", "s"]), t.int(&["EXISTS", "new"])),
                (1126, 4, 0)
            );
            assert!(t.logged().is_empty());
            // Within the limit, and in place: fine.
            set(&mut t, &["BITFIELD", "b", "SET", "u1", "6", "1"]);
            assert_eq!(t.int(&["SETRANGE", "s", "0", "xy"]), 4);
            assert_eq!(t.logged().len(), 2);
        }

        /// A string grown in place is charged as soon as its command ends, not when the view of
        /// the keyspace is dropped: a script, an EXEC and the log replay run many commands
        /// under one view, and the growth check of the next SETBIT must see the earlier ones.
        #[test]
        fn growth_is_charged_per_command_in_scripts_exec_and_replay() {
            let mut t = T::new();
            assert_eq!(t.int(&["SETBIT", "k", "0", "1"]), 0);
            let used = t.server.db.used_memory();
            t.server.config.write().maxmemory = used + 1000;
            let oom = "OOM command not allowed when used memory > 'maxmemory'.";
            // Two growths of 600 bytes: the second would take the keyspace past the limit.
            #[cfg(feature = "lua")]
            {
                let script =
                    "redis.call('SETBIT', KEYS[1], 8 * 600, 1) return redis.pcall('SETBIT', KEYS[1], 8 * 1200, 1)";
                assert_eq!(t.run(&["EVAL", script, "1", "k"]), Frame::error(oom));
                assert_eq!(t.int(&["STRLEN", "k"]), 601);
                assert_eq!(t.server.db.used_memory(), used + 600);
                assert_eq!(t.int(&["DEL", "k"]), 1);
                assert_eq!(t.int(&["SETBIT", "k", "0", "1"]), 0);
                assert_eq!(t.server.db.used_memory(), used);
            }
            assert_eq!(t.run(&["MULTI"]), Frame::ok());
            t.run(&["SETBIT", "k", "4800", "1"]);
            t.run(&["SETBIT", "k", "9600", "1"]);
            assert_eq!(t.run(&["EXEC"]), Frame::Array(vec![Frame::Integer(0), Frame::error(oom)]));
            assert_eq!(t.int(&["STRLEN", "k"]), 601);
            assert_eq!(t.server.db.used_memory(), used + 600);
            // The log replay holds every shard for the whole load: still charged per command.
            let mut keys = t.server.db.lock_all();
            for off in ["80000", "160000"] {
                let argv: Vec<Bytes> = ["SETBIT", "k", off, "1"].iter().map(|a| Bytes::from(*a)).collect();
                assert_eq!(replay(&t.server, &mut keys, &argv).unwrap(), Frame::Integer(0));
            }
            assert_eq!(t.server.db.used_memory(), used + 20000);
            drop(keys);
            assert_eq!(t.server.db.used_memory(), used + 20000);
        }
    }
}
