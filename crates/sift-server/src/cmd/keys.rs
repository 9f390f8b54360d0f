//! Generic key commands (spec §10): TYPE, DEL/UNLINK, EXISTS, the EXPIRE family, TTL/PTTL,
//! PERSIST, RENAME(NX), COPY, KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHDB/FLUSHALL, a minimal
//! SET/GET, MEMORY USAGE. They work on any [`Value`] through its type-independent methods, so
//! they need no change when the filter types are added.

use bytes::Bytes;

use super::parse::{eq_ignore_case, parse_i64};
use super::{err, Ctx};
use crate::db::{entry_size, Entry, Value, SHARDS, SHARD_SHIFT};
use crate::frame::Frame;
use crate::glob;

fn int(v: usize) -> Frame {
    Frame::Integer(v as i64)
}

/// TYPE key.
pub fn type_(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let name = ctx.keys.get(&argv[1]).map_or("none", |e| e.value.type_name());
    Frame::Simple(name.to_string())
}

/// DEL / UNLINK key [key ...].
pub fn del(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    int(argv[1..].iter().filter(|k| ctx.keys.remove(k).is_some()).count())
}

/// EXISTS key [key ...]: a key named twice counts twice.
pub fn exists(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    int(argv[1..].iter().filter(|k| ctx.keys.contains(k)).count())
}

/// EXPIRE key seconds [NX|XX|GT|LT].
pub fn expire(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    set_deadline(ctx, argv, "expire", 1000, false)
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT].
pub fn pexpire(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    set_deadline(ctx, argv, "pexpire", 1, false)
}

/// EXPIREAT key unix-seconds [NX|XX|GT|LT].
pub fn expireat(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    set_deadline(ctx, argv, "expireat", 1000, true)
}

/// PEXPIREAT key unix-ms [NX|XX|GT|LT].
pub fn pexpireat(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    set_deadline(ctx, argv, "pexpireat", 1, true)
}

fn set_deadline(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], name: &str, unit: i64, absolute: bool) -> Frame {
    let Some(v) = parse_i64(&argv[2]) else {
        return Frame::error(err::NOT_INTEGER);
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &argv[3..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => return Frame::error(format!("ERR Unsupported option {}", String::from_utf8_lossy(opt))),
        }
    }
    if nx && (xx || gt || lt) {
        return Frame::error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Frame::error("ERR GT and LT options at the same time are not compatible");
    }
    let now = ctx.keys.now_ms() as i64;
    let when = v.checked_mul(unit).and_then(|ms| if absolute { Some(ms) } else { ms.checked_add(now) });
    let Some(when) = when else {
        return Frame::error(err::invalid_expire(name));
    };
    let key = &argv[1];
    let Some(entry) = ctx.keys.get(key) else {
        return Frame::Integer(0);
    };
    // A key without a deadline lives forever: GT never beats it, LT always does.
    let current = entry.expires_at().map(|t| t as i64);
    let allowed = match current {
        None => !xx && !gt,
        Some(cur) => !nx && (!gt || when > cur) && (!lt || when < cur),
    };
    if !allowed {
        return Frame::Integer(0);
    }
    if when <= now {
        ctx.keys.remove(key);
        ctx.propagate = Some(vec![vec![Bytes::from_static(b"DEL"), key.clone()]]);
    } else {
        ctx.keys.set_expiry(key, Some(when as u64));
        ctx.propagate =
            Some(vec![vec![Bytes::from_static(b"PEXPIREAT"), key.clone(), Bytes::from(when.to_string())]]);
    }
    Frame::Integer(1)
}

fn remaining_ms(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<Option<i64>, ()> {
    let now = ctx.keys.now_ms();
    match ctx.keys.get(key) {
        None => Err(()),
        Some(e) => Ok(e.expires_at().map(|t| t.saturating_sub(now) as i64)),
    }
}

/// TTL key: seconds left (rounded), -1 without deadline, -2 when missing.
pub fn ttl(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    Frame::Integer(match remaining_ms(ctx, &argv[1]) {
        Err(()) => -2,
        Ok(None) => -1,
        Ok(Some(ms)) => (ms + 500) / 1000,
    })
}

/// PTTL key.
pub fn pttl(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    Frame::Integer(match remaining_ms(ctx, &argv[1]) {
        Err(()) => -2,
        Ok(None) => -1,
        Ok(Some(ms)) => ms,
    })
}

/// PERSIST key.
pub fn persist(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match ctx.keys.get(&argv[1]) {
        Some(e) if e.expires_at().is_some() => {
            ctx.keys.set_expiry(&argv[1], None);
            Frame::Integer(1)
        }
        _ => Frame::Integer(0),
    }
}

/// RENAME key newkey: moves the value and its deadline, replacing newkey.
pub fn rename(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    rename_impl(ctx, argv, false)
}

/// RENAMENX key newkey.
pub fn renamenx(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    rename_impl(ctx, argv, true)
}

fn rename_impl(ctx: &mut Ctx<'_, '_>, argv: &[Bytes], nx: bool) -> Frame {
    let (src, dst) = (&argv[1], &argv[2]);
    if !ctx.keys.contains(src) {
        return Frame::error(err::NO_SUCH_KEY);
    }
    if src == dst {
        return if nx { Frame::Integer(0) } else { Frame::ok() };
    }
    if nx && ctx.keys.contains(dst) {
        return Frame::Integer(0);
    }
    let entry = ctx.keys.remove(src).expect("checked above");
    ctx.keys.insert_entry(dst.clone(), entry);
    if nx {
        Frame::Integer(1)
    } else {
        Frame::ok()
    }
}

/// `COPY source destination [DB db] [REPLACE]`. Filter keys cannot be copied (spec §10).
pub fn copy(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let (src, dst) = (&argv[1], &argv[2]);
    let mut replace = false;
    let mut i = 3;
    while i < argv.len() {
        if eq_ignore_case(&argv[i], "replace") {
            replace = true;
        } else if eq_ignore_case(&argv[i], "db") && i + 1 < argv.len() {
            match parse_i64(&argv[i + 1]) {
                None => return Frame::error(err::NOT_INTEGER),
                Some(0) => {}
                Some(_) => return Frame::error(err::DB_OUT_OF_RANGE),
            }
            i += 1;
        } else {
            return Frame::error(err::SYNTAX);
        }
        i += 1;
    }
    if src == dst {
        return Frame::error(err::SAME_OBJECT);
    }
    let Some(entry) = ctx.keys.get(src) else {
        return Frame::Integer(0);
    };
    let Some(value) = entry.value.copy_value() else {
        return Frame::error(err::MODULE_KEY_COPY);
    };
    let expires = entry.expires_at();
    if !replace && ctx.keys.contains(dst) {
        return Frame::Integer(0);
    }
    ctx.keys.insert_entry(dst.clone(), Entry::with_expiry(value, expires));
    Frame::Integer(1)
}

/// KEYS pattern.
pub fn keys(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let pattern = &argv[1];
    let now = ctx.keys.now_ms();
    let mut out = Vec::new();
    ctx.keys.for_each_shard(|_, shard| {
        out.extend(
            shard
                .iter(now)
                .filter(|(k, _)| glob::matches(pattern, k, false))
                .map(|(k, _)| Frame::Bulk(Bytes::copy_from_slice(k))),
        );
    });
    Frame::Array(out)
}

/// A SCAN cursor: decimal digits up to `u64::MAX` (positions use all 64 bits, beyond what
/// `parse_u64` takes).
fn parse_cursor(arg: &[u8]) -> Option<u64> {
    if arg.is_empty() || arg.len() > 20 {
        return None;
    }
    arg.iter().try_fold(0u64, |v, &d| {
        d.is_ascii_digit().then_some(())?;
        v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
///
/// The cursor is a position in the keyspace's hash order (see `db`, "Key order"): a step visits
/// about COUNT keys from there, shard after shard, each shard read under its own lock, and
/// returns the position after the last one visited (0 at the end). Keys keep their position, so
/// keys added or removed between steps never shift others: every key present for the whole
/// iteration is returned exactly once. As in Redis, COUNT is the work per step, not the number
/// of matches: with MATCH or TYPE a step can return fewer keys, or none, before the end. Keys
/// that share a 64-bit hash are never split across steps, so a step can exceed COUNT by them.
pub fn scan(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let Some(cursor) = parse_cursor(&argv[1]) else {
        return Frame::error(err::INVALID_CURSOR);
    };
    let mut pattern: Option<&Bytes> = None;
    let mut count: usize = 10;
    let mut type_filter: Option<&Bytes> = None;
    let mut i = 2;
    while i < argv.len() {
        if i + 1 >= argv.len() {
            return Frame::error(err::SYNTAX);
        }
        let value = &argv[i + 1];
        if eq_ignore_case(&argv[i], "match") {
            pattern = Some(value);
        } else if eq_ignore_case(&argv[i], "count") {
            match parse_i64(value) {
                None => return Frame::error(err::NOT_INTEGER),
                Some(n) if n < 1 => return Frame::error(err::SYNTAX),
                Some(n) => count = n as usize,
            }
        } else if eq_ignore_case(&argv[i], "type") {
            type_filter = Some(value);
        } else {
            return Frame::error(err::SYNTAX);
        }
        i += 2;
    }
    let now = ctx.keys.now_ms();
    let mut out = Vec::new();
    let mut visited = 0usize;
    let mut pos = cursor;
    // The position to resume from, once COUNT keys are visited; None = the end.
    let mut next: Option<u64> = None;
    let mut shard = (pos >> SHARD_SHIFT) as usize;
    while shard < SHARDS {
        let stop = ctx.keys.with_shard(shard, |s| {
            let mut last: Option<u64> = None;
            for (h, k) in s.keys_from(pos) {
                if visited >= count && last != Some(h) {
                    return Some(h);
                }
                visited += 1;
                last = Some(h);
                let Some(e) = s.get_live(k, now) else { continue };
                if pattern.is_some_and(|p| !glob::matches(p, k, false)) {
                    continue;
                }
                if type_filter.is_some_and(|t| !t.eq_ignore_ascii_case(e.value.type_name().as_bytes())) {
                    continue;
                }
                out.push(Frame::Bulk(Bytes::copy_from_slice(k)));
            }
            None
        });
        if stop.is_some() {
            next = stop;
            break;
        }
        shard += 1;
        pos = (shard as u64) << SHARD_SHIFT;
        if visited >= count && shard < SHARDS {
            next = Some(pos);
            break;
        }
    }
    let next = next.unwrap_or(0);
    Frame::Array(vec![Frame::bulk(next.to_string()), Frame::Array(out)])
}

/// DBSIZE.
pub fn dbsize(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    let mut n = 0;
    ctx.keys.for_each_shard(|_, s| n += s.len());
    int(n)
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(crate::db::now_ms());
    h.finish()
}

/// RANDOMKEY: a live key from a random shard, or null.
pub fn randomkey(ctx: &mut Ctx<'_, '_>, _argv: &[Bytes]) -> Frame {
    let r = random_u64();
    let now = ctx.keys.now_ms();
    for step in 0..SHARDS {
        let shard = (r as usize).wrapping_add(step) % SHARDS;
        let found = ctx.keys.with_shard(shard, |s| {
            let live = s.iter(now).count();
            if live == 0 {
                return None;
            }
            let pick = (r >> 8) as usize % live;
            s.iter(now).nth(pick).map(|(k, _)| Bytes::copy_from_slice(k))
        });
        if let Some(k) = found {
            return Frame::Bulk(k);
        }
    }
    Frame::Null
}

/// FLUSHDB / FLUSHALL [ASYNC|SYNC].
pub fn flush(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match argv.len() {
        1 => {}
        2 if eq_ignore_case(&argv[1], "async") || eq_ignore_case(&argv[1], "sync") => {}
        _ => return Frame::error(err::SYNTAX),
    }
    ctx.keys.clear();
    Frame::ok()
}

/// SET key value [NX|XX] [EX seconds|PX milliseconds|EXAT unix-s|PXAT unix-ms|KEEPTTL]: enough
/// for tests that need keys of another type, and for clients' smoke tests.
pub fn set(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let (key, value) = (&argv[1], &argv[2]);
    let (mut nx, mut xx, mut keepttl) = (false, false, false);
    let mut deadline: Option<u64> = None;
    let mut i = 3;
    while i < argv.len() {
        let opt = argv[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"KEEPTTL" if deadline.is_none() => keepttl = true,
            b"EX" | b"PX" if deadline.is_none() && !keepttl && i + 1 < argv.len() => {
                let unit = if opt == b"EX" { 1000 } else { 1 };
                let Some(v) = parse_i64(&argv[i + 1]) else {
                    return Frame::error(err::NOT_INTEGER);
                };
                let ms = v.checked_mul(unit).and_then(|ms| ms.checked_add(ctx.keys.now_ms() as i64));
                match ms {
                    Some(ms) if v > 0 => deadline = Some(ms as u64),
                    _ => return Frame::error(err::invalid_expire("set")),
                }
                i += 1;
            }
            // Absolute deadlines: what persistence records for EX/PX, so a replay keeps the clock.
            b"EXAT" | b"PXAT" if deadline.is_none() && !keepttl && i + 1 < argv.len() => {
                let unit = if opt == b"EXAT" { 1000 } else { 1 };
                let Some(v) = parse_i64(&argv[i + 1]) else {
                    return Frame::error(err::NOT_INTEGER);
                };
                match v.checked_mul(unit) {
                    Some(ms) if v > 0 => deadline = Some(ms as u64),
                    _ => return Frame::error(err::invalid_expire("set")),
                }
                i += 1;
            }
            _ => return Frame::error(err::SYNTAX),
        }
        i += 1;
    }
    let exists = ctx.keys.contains(key);
    if (nx && exists) || (xx && !exists) {
        return Frame::Null;
    }
    let old_deadline = if keepttl { ctx.keys.get(key).and_then(|e| e.expires_at()) } else { None };
    let entry = Entry::with_expiry(Value::String(value.clone()), deadline.or(old_deadline));
    ctx.keys.insert_entry(key.clone(), entry);
    if let Some(ms) = deadline {
        ctx.propagate = Some(vec![vec![
            Bytes::from_static(b"SET"),
            key.clone(),
            value.clone(),
            Bytes::from_static(b"PXAT"),
            Bytes::from(ms.to_string()),
        ]]);
    }
    Frame::ok()
}

/// GET key.
pub fn get(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match ctx.keys.get(&argv[1]).map(|e| &e.value) {
        None => Frame::Null,
        Some(Value::String(b)) => Frame::Bulk(b.clone()),
        #[allow(unreachable_patterns)]
        Some(_) => Frame::error(err::WRONGTYPE),
    }
}

/// MEMORY USAGE key [SAMPLES count].
pub fn memory_usage(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    match argv.len() {
        3 => {}
        5 if eq_ignore_case(&argv[3], "samples") => {
            if parse_i64(&argv[4]).is_none() {
                return Frame::error(err::NOT_INTEGER);
            }
        }
        _ => return Frame::error(err::SYNTAX),
    }
    let key = &argv[2];
    match ctx.keys.get(key) {
        None => Frame::Null,
        Some(e) => int(entry_size(key, &e.value)),
    }
}

/// `DUMP key`: Redis's serialization (`redisbloom.md` §12.5): the value in its RDB encoding
/// (a string, or a module value of its registered type with RedisBloom's fields), RDB version 10
/// and a CRC64, which RESTORE here, in Redis with the module or with RedisBloom loads.
///
/// Saving prepares the live value first, as in Redis ([`sift_commands::DataType::before_save`]:
/// a t-digest compresses, sketches spec §10.5). When that changed the value it is a change of
/// the key: counted, and logged (DUMP's row has the internal `PROPAGATE` flag), so that the log
/// replays it before the writes that follow.
pub fn dump(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let changes = match ctx.keys.get(&argv[1]) {
        None => return Frame::Null,
        Some(e) => matches!(&e.value, Value::Data(d) if d.changes_before_save()),
    };
    if changes {
        if let Some(Value::Data(d)) = ctx.keys.get_mut(&argv[1]).map(|e| &mut e.value) {
            d.before_save();
        }
    }
    match ctx.keys.get(&argv[1]) {
        None => Frame::Null,
        Some(e) => Frame::Bulk(dump_payload(&e.value).into()),
    }
}

/// The `DUMP` payload of a value.
pub fn dump_payload(value: &Value) -> Vec<u8> {
    use sift::compat::redisbloom::rdb::{
        crc64, module_type_id, write_length, write_string, ModuleFieldWriter, OPCODE_EOF, RDB_VERSION,
    };
    let mut out = Vec::new();
    match value {
        Value::String(s) => {
            out.push(0); // RDB_TYPE_STRING
            write_string(&mut out, s);
        }
        Value::Data(d) => {
            let encver = sift_commands::registry().type_by_name(d.type_name()).map_or(0, |t| t.encver);
            out.push(7); // RDB_TYPE_MODULE_2
            write_length(&mut out, module_type_id(d.type_name(), encver).expect("a registered type name"));
            d.rdb_save(&mut ModuleFieldWriter { out: &mut out });
            write_length(&mut out, OPCODE_EOF);
        }
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A `DUMP` payload as a value: a string, or a value of a registered module type, read within the
/// memory budget. `Err` is RESTORE's reply (`ERR DUMP payload version or checksum are wrong`,
/// `ERR Bad data format`).
pub fn restore_value(ctx: &Ctx<'_, '_>, payload: &[u8]) -> Result<Value, &'static str> {
    use sift::compat::redisbloom::rdb::{
        crc64, module_type_name, ModuleFieldReader, RdbCursor, OPCODE_EOF, RDB_VERSION_MAX,
    };
    use sift::compat::redisbloom::LoadLimits;
    const BAD: &str = "ERR Bad data format";
    const VERSION_OR_CRC: &str = "ERR DUMP payload version or checksum are wrong";
    // The trailer, as Redis checks it: RDB version (u16) and CRC64 of everything before the CRC.
    let Some(body_len) = payload.len().checked_sub(10) else { return Err(VERSION_OR_CRC) };
    let version = u16::from_le_bytes([payload[body_len], payload[body_len + 1]]);
    let crc = u64::from_le_bytes(payload[body_len + 2..].try_into().expect("8 bytes"));
    if version > RDB_VERSION_MAX || crc64(0, &payload[..body_len + 2]) != crc {
        return Err(VERSION_OR_CRC);
    }
    let (limits, defaults) = {
        let c = ctx.server.config.read();
        let max = if c.maxmemory > 0 { c.maxmemory } else { LoadLimits::DEFAULT.max_bytes };
        (LoadLimits { max_bytes: max, ..Default::default() }, c.filters.defaults())
    };
    let mut cur = RdbCursor::new(&payload[..body_len]);
    let value = match cur.read_u8("value type").map_err(|_| BAD)? {
        0 => Value::String(cur.read_string(limits.max_bytes, "string value").map_err(|_| BAD)?.into()),
        7 => {
            // A module value of a registered type, rebuilt through the registry.
            let id = cur.read_length("module id").map_err(|_| BAD)?;
            let (name, encver) = module_type_name(id);
            let info = sift_commands::registry().type_by_name(&name).ok_or(BAD)?;
            let cx = sift_commands::LoadContext { limits, defaults };
            let mut fields = ModuleFieldReader { cur: &mut cur, max_string: limits.max_bytes };
            let value = (info.rdb_load)(&mut fields, encver, &cx).map_err(|_| BAD)?;
            if cur.read_length("module EOF").ok() != Some(OPCODE_EOF) {
                return Err(BAD);
            }
            Value::Data(value)
        }
        _ => return Err(BAD),
    };
    if cur.remaining() != 0 {
        return Err(BAD);
    }
    Ok(value)
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`, with
/// Redis's checks in Redis's order. A relative TTL is propagated as an absolute one (`ABSTTL`), as
/// Redis does, so a log replay gives the key the same deadline.
pub fn restore(ctx: &mut Ctx<'_, '_>, argv: &[Bytes]) -> Frame {
    let (mut replace, mut absttl) = (false, false);
    let mut i = 4;
    while i < argv.len() {
        let more = i + 1 < argv.len();
        if eq_ignore_case(&argv[i], "replace") {
            replace = true;
        } else if eq_ignore_case(&argv[i], "absttl") {
            absttl = true;
        } else if (eq_ignore_case(&argv[i], "idletime") || eq_ignore_case(&argv[i], "freq")) && more {
            let idle = eq_ignore_case(&argv[i], "idletime");
            match parse_i64(&argv[i + 1]) {
                None => return Frame::error(err::NOT_INTEGER),
                Some(v) if v < 0 && idle => return Frame::error("ERR Invalid IDLETIME value, must be >= 0"),
                Some(v) if !(0..=255).contains(&v) && !idle => {
                    return Frame::error("ERR Invalid FREQ value, must be >= 0 and <= 255")
                }
                Some(_) => {}
            }
            i += 1;
        } else {
            return Frame::error(err::SYNTAX);
        }
        i += 1;
    }
    let ttl = match parse_i64(&argv[2]) {
        None => return Frame::error(err::NOT_INTEGER),
        Some(t) if t < 0 => return Frame::error("ERR Invalid TTL value, must be >= 0"),
        Some(t) => t as u64,
    };
    let key = &argv[1];
    if !replace && ctx.keys.contains(key) {
        return Frame::error("BUSYKEY Target key name already exists.");
    }
    let value = match restore_value(ctx, &argv[3]) {
        Ok(v) => v,
        Err(e) => return Frame::error(e),
    };
    let deadline = match ttl {
        0 => None,
        t if absttl => Some(t),
        t => Some(ctx.keys.now_ms().saturating_add(t)),
    };
    if deadline.is_some_and(|d| d <= ctx.keys.now_ms()) {
        // Already expired: the key is deleted, as in Redis.
        ctx.keys.remove(key);
        return Frame::ok();
    }
    ctx.keys.insert_entry(key.clone(), Entry::with_expiry(value, deadline));
    if let (Some(d), false) = (deadline, absttl) {
        let mut cmd =
            vec![Bytes::from_static(b"RESTORE"), key.clone(), Bytes::from(d.to_string()), argv[3].clone()];
        cmd.push(Bytes::from_static(b"REPLACE"));
        cmd.push(Bytes::from_static(b"ABSTTL"));
        ctx.propagate = Some(vec![cmd]);
    }
    Frame::ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_key_overhead_is_32() {
        assert_eq!(crate::db::key_overhead(b"bf"), 32);
        assert_eq!(crate::db::key_overhead(b"cf"), 32);
    }
}
