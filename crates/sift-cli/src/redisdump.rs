//! RedisBloom `SCANDUMP` chunk streams as files.
//!
//! The container is JSON Lines, one line per `BF.SCANDUMP` / `CF.SCANDUMP` reply, in order,
//! starting at iterator 0:
//!
//! ```text
//! [1, "<base64 of the header>"]
//! [9, "<base64 of the next chunk>"]
//! ...
//! [0, ""]          (Bloom; a cuckoo dump ends with [0, null])
//! ```
//!
//! Each line is `[iterator returned, data]`: restoring is `LOADCHUNK key <iterator> <data>` for
//! every line but the last. This is the shape of the captured fixtures in
//! `shared/spec/fixtures/*.scandump.jsonl`; `{"b64": "..."}` is accepted for the data as well.
//! The header's length tells the two types apart (38 bytes: cuckoo; `20 + 53·links`: Bloom).

use anyhow::{bail, Context, Result};
use base64::Engine;
use sift::compat::redisbloom::{BloomChain, CuckooFilter, LoadLimits, CF_HEADER_LEN};

/// A RedisBloom filter read from a chunk stream.
pub enum RedisFilter {
    /// `MBbloom--`.
    Bloom(BloomChain),
    /// `MBbloomCF`.
    Cuckoo(CuckooFilter),
}

/// Whether `bytes` look like a JSON Lines chunk stream (first non-blank byte `[`).
pub fn looks_like(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// Parses the chunk list `(iterator, data)`, end marker excluded.
fn parse_chunks(text: &str) -> Result<Vec<(i64, Vec<u8>)>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = Vec::new();
    let mut ended = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if ended {
            bail!("line {n}: data after the end marker [0, ...]");
        }
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("line {n}: not JSON"))?;
        let arr = v
            .as_array()
            .filter(|a| a.len() == 2)
            .with_context(|| format!("line {n}: expected [iterator, data]"))?;
        let it = arr[0].as_i64().with_context(|| format!("line {n}: the iterator is not an integer"))?;
        let data = match &arr[1] {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.as_str()),
            serde_json::Value::Object(o) => Some(
                o.get("b64")
                    .and_then(|x| x.as_str())
                    .with_context(|| format!("line {n}: expected {{\"b64\": ...}}"))?,
            ),
            _ => bail!("line {n}: the data is not a base64 string"),
        };
        if it == 0 {
            if data.is_some_and(|d| !d.is_empty()) {
                bail!("line {n}: the end marker [0, ...] carries data");
            }
            ended = true;
            continue;
        }
        let data = data.with_context(|| format!("line {n}: null data before the end marker"))?;
        let bytes = b64.decode(data).with_context(|| format!("line {n}: invalid base64"))?;
        out.push((it, bytes));
    }
    if !ended {
        bail!("no end marker [0, \"\"] / [0, null]: the dump is incomplete");
    }
    Ok(out)
}

/// Reads a chunk stream and rebuilds the filter exactly as `LOADCHUNK` would, checking that every
/// byte of the filter was covered by a chunk.
pub fn read(bytes: &[u8]) -> Result<RedisFilter> {
    let text = std::str::from_utf8(bytes).context("a SCANDUMP chunk file is UTF-8 JSON Lines")?;
    let chunks = parse_chunks(text)?;
    let Some(((first_it, header), rest)) = chunks.split_first() else {
        bail!(
            "the dump has no chunks (RedisBloom writes only [0, null] for an empty cuckoo filter): nothing to convert"
        );
    };
    if *first_it != 1 {
        bail!("the first chunk must be the header, returned with iterator 1 (found {first_it})");
    }
    let data_len: u64 = rest.iter().map(|(_, d)| d.len() as u64).sum();
    if header.len() == CF_HEADER_LEN {
        let mut cf =
            CuckooFilter::from_header(header, &LoadLimits::DEFAULT).context("invalid cuckoo header chunk")?;
        for (k, (pos, data)) in rest.iter().enumerate() {
            cf.load_chunk(*pos, data).with_context(|| format!("chunk {} (position {pos})", k + 2))?;
        }
        let total: u64 = cf.filters().iter().map(|f| f.slots().len() as u64).sum();
        if total != data_len {
            bail!("the chunks hold {data_len} bytes but the header declares {total}: the dump is incomplete");
        }
        Ok(RedisFilter::Cuckoo(cf))
    } else {
        let mut bf =
            BloomChain::from_header(header, &LoadLimits::DEFAULT).context("invalid Bloom header chunk")?;
        for (k, (it, data)) in rest.iter().enumerate() {
            bf.load_chunk(*it, data).with_context(|| format!("chunk {} (iterator {it})", k + 2))?;
        }
        let total: u64 = bf.links().iter().map(|l| l.bytes()).sum();
        if total != data_len {
            bail!("the chunks hold {data_len} bytes but the header declares {total}: the dump is incomplete");
        }
        Ok(RedisFilter::Bloom(bf))
    }
}

/// The chunk stream of a filter, in the format [`read`] reads (and RedisBloom's fixtures use).
pub fn write(f: &RedisFilter) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (chunks, end) = match f {
        RedisFilter::Bloom(b) => (b.scandump_all(), "[0, \"\"]\n"),
        RedisFilter::Cuckoo(c) => (c.scandump_all(), "[0, null]\n"),
    };
    let mut out = String::new();
    for (it, data) in chunks {
        out.push_str(&format!("[{it}, \"{}\"]\n", b64.encode(data)));
    }
    out.push_str(end);
    out.into_bytes()
}
