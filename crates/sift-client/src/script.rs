//! The Lua scripts of [`crate::Mode::Lua`] and the packed item format they read.
//!
//! `ARGV` carries a batch of items packed in binary, per item: the block inside the sub-bitmap
//! (`u32`, little-endian), the number `n` of the item's bits (`u8`), then each bit's position
//! inside the block in Redis's bit order (`u16` little-endian, 0 to 511). A 7-bit item takes 19
//! bytes, where the plain `BITFIELD` command spends about 260.
//!
//! Both scripts make one `BITFIELD` call per up to about 500 bits (2000 arguments: Redis's
//! `unpack` takes up to 7999 values, sift-server's `redis.call` fails above about 3000
//! arguments), not one call per item: a `redis.call` costs microseconds in Redis 7.

use std::sync::OnceLock;

use crate::layout::Spot;

/// Adds the items of `ARGV[3]` to the sub-bitmap `KEYS[1]`; returns, per item, 1 when one of
/// its bits was clear (the item was new), else 0. `ARGV[1]`: the offset of the key's last bit
/// (an `INCRBY u1 <last> 0` creates the key at its full length in one allocation); `ARGV[2]`:
/// a `PEXPIREAT` time in ms, or 0 for none.
pub const ADD: &str = r#"local key = KEYS[1]
local p = ARGV[3]
local len = #p
local out = {}
local counts = {}
local args = {'INCRBY', 'u1', ARGV[1], 0}
local function flush()
  local olds = redis.call('BITFIELD', key, unpack(args))
  local at = 2
  for _, c in ipairs(counts) do
    local new = 0
    for j = 0, c - 1 do
      if olds[at + j] == 0 then new = 1 end
    end
    at = at + c
    out[#out + 1] = new
  end
  counts = {}
  args = {'INCRBY', 'u1', ARGV[1], 0}
end
local i = 1
while i <= len do
  local b1, b2, b3, b4, n = string.byte(p, i, i + 4)
  local base = (b1 + b2 * 256 + b3 * 65536 + b4 * 16777216) * 512
  i = i + 5
  for _ = 1, n do
    local lo, hi = string.byte(p, i, i + 1)
    i = i + 2
    args[#args + 1] = 'SET'
    args[#args + 1] = 'u1'
    args[#args + 1] = base + lo + hi * 256
    args[#args + 1] = 1
  end
  counts[#counts + 1] = n
  if #args >= 2000 then flush() end
end
if #counts > 0 then flush() end
if ARGV[2] ~= '0' then redis.call('PEXPIREAT', key, ARGV[2]) end
return out
"#;

/// Tests the items of `ARGV[1]` in the sub-bitmap `KEYS[1]`; returns, per item, 1 when all its
/// bits are set, else 0. Reads only (`BITFIELD` with `GET` operations).
pub const CONTAINS: &str = r#"local key = KEYS[1]
local p = ARGV[1]
local len = #p
local out = {}
local counts = {}
local args = {}
local function flush()
  local bits = redis.call('BITFIELD', key, unpack(args))
  local at = 1
  for _, c in ipairs(counts) do
    local found = 1
    for j = 0, c - 1 do
      if bits[at + j] == 0 then found = 0 end
    end
    at = at + c
    out[#out + 1] = found
  end
  counts = {}
  args = {}
end
local i = 1
while i <= len do
  local b1, b2, b3, b4, n = string.byte(p, i, i + 4)
  local base = (b1 + b2 * 256 + b3 * 65536 + b4 * 16777216) * 512
  i = i + 5
  for _ = 1, n do
    local lo, hi = string.byte(p, i, i + 1)
    i = i + 2
    args[#args + 1] = 'GET'
    args[#args + 1] = 'u1'
    args[#args + 1] = base + lo + hi * 256
  end
  counts[#counts + 1] = n
  if #args >= 2000 then flush() end
end
if #counts > 0 then flush() end
return out
"#;

/// A script and its SHA-1 (what `EVALSHA` names it by).
#[derive(Debug)]
pub struct Script {
    /// The source.
    pub body: &'static str,
    /// Lower-case hex SHA-1 of the source.
    pub sha: String,
}

fn sha1_hex(s: &str) -> String {
    redis::Script::new(s).get_hash().to_string()
}

/// The add script.
pub fn add() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| Script { body: ADD, sha: sha1_hex(ADD) })
}

/// The contains script.
pub fn contains() -> &'static Script {
    static S: OnceLock<Script> = OnceLock::new();
    S.get_or_init(|| Script { body: CONTAINS, sha: sha1_hex(CONTAINS) })
}

/// Appends `spot` to a packed batch.
pub fn pack(out: &mut Vec<u8>, spot: &Spot) {
    out.extend_from_slice(&(spot.block as u32).to_le_bytes());
    let n_at = out.len();
    out.push(0);
    let mut n = 0u8;
    for b in spot.redis_bits() {
        out.extend_from_slice(&(b as u16).to_le_bytes());
        n += 1;
    }
    out[n_at] = n;
}
