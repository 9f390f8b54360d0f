//! `sift inspect`: what a filter file holds, whether it is intact, and whether it needs rebuilding.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use sift::compat::guava::GuavaBloom;
use sift::format;
use sift::SplitBlockBloom;

use crate::any::{AnyFilter, AnyFilterExt};
use crate::clock::{self, At};
use crate::input;
use crate::output::{self, pct};
use crate::rdbfile;
use crate::redisdump::{self, RedisFilter};
use crate::size::human_bytes;

/// The formats `inspect` and `convert` read and write.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A sift filter file.
    Sift,
    /// RedisBloom SCANDUMP chunks, JSON Lines: `[iterator, "base64"]` per line, then `[0, ""]` / `[0, null]`.
    Redisbloom,
    /// Guava's `BloomFilter.writeTo` bytes.
    Guava,
    /// Apache Parquet split-block Bloom filter bitset (the bytes after the BloomFilterHeader).
    Parquet,
    /// A Redis RDB file (`dump.rdb`) holding RedisBloom keys (`MBbloom--`, `MBbloomCF`).
    Rdb,
}

/// Detects the format: the SIFT magic, or JSON Lines; Guava and Parquet bytes have no magic and
/// must be named with `flag` (the subcommand's option for the input format).
pub fn detect(bytes: &[u8], given: Option<Format>, flag: &str) -> Result<Format> {
    if let Some(f) = given {
        return Ok(f);
    }
    if bytes.starts_with(&format::MAGIC) {
        Ok(Format::Sift)
    } else if redisdump::looks_like(bytes) {
        Ok(Format::Redisbloom)
    } else if rdbfile::looks_like(bytes) {
        Ok(Format::Rdb)
    } else if bytes.is_empty() {
        bail!("the file is empty")
    } else {
        bail!(
            "not a sift file (no SIFT magic), a RedisBloom chunk file nor a Redis RDB file; for Guava or Parquet bytes pass {flag} guava or {flag} parquet"
        )
    }
}

/// Show a filter file: header, kind, hash, parameters, items, fill, FPR now vs planned, checksum.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift inspect urls.sift
  sift inspect --json urls.sift
  sift inspect dump.scandump.jsonl              # RedisBloom SCANDUMP chunks (BF or CF)
  sift inspect --format parquet column.sbbf     # a Parquet split-block Bloom filter bitset
  sift inspect --format guava filter.bin        # Guava BloomFilter.writeTo bytes
  sift inspect dump.rdb                         # a Redis RDB file: its RedisBloom keys, one a line
  sift inspect seen.sift                        # a window by time (SF.DUMP of KIND aging TTL), read now
  sift inspect --at clock seen.sift             # … as of its last insertion

The verdict compares the FPR estimated now (from the bits set for the Bloom families, from the
items stored for cuckoo and quotient filters) with the FPR the filter
was planned for: past --threshold times the plan it says REBUILD (seed 002: monitor the FPR and
rebuild past a threshold). The sliding windows show what they remember: aging-bloom (a window by
count) the insertions it always holds and when one is forgotten, time-limited-bloom (a window by
time) its TTL, clock and which insertion times are members, forgotten, or fading, as of the time
--at gives (default now, Unix milliseconds: sift-server's unit); their items and FPR are those
of the slices live then. Exit status: 0 intact, 2 unreadable or corrupted (checksum mismatch).")]
pub struct Args {
    /// The file.
    file: PathBuf,
    /// The file's format (default: detected from its first bytes).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Rebuild when the estimated FPR exceeds this multiple of the planned FPR.
    #[arg(long, default_value_t = 2.0)]
    threshold: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[arg(long, value_parser = clock::parse_at, default_value = "now", help = clock::AT_HELP)]
    at: At,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let bytes = input::read_file(&a.file)?;
    let name = a.file.display().to_string();
    let fmt = detect(&bytes, a.format, "--format").with_context(|| format!("{name}: cannot inspect"))?;
    let mut fields: Vec<(&'static str, Value)> =
        vec![("file", json!(name)), ("file_bytes", json!(bytes.len()))];
    let filter: AnyFilter = match fmt {
        Format::Sift => {
            let raw = format::decode(&bytes).with_context(|| format!("{name}: not a valid sift file"))?;
            fields.push(("format", json!("sift")));
            fields.push(("version", json!(raw.version())));
            fields.push(("kind", json!(raw.kind().map_or("unknown".to_string(), |k| k.name().to_string()))));
            fields.push(("kind_code", json!(raw.kind_code())));
            fields.push(("hash", json!(raw.hasher().kind().name())));
            fields.push(("hash_id", json!(raw.hasher().kind().id())));
            fields.push(("seed", json!(format!("{:#x}", raw.hasher().seed()))));
            fields.push(("params_bytes", json!(raw.params().len())));
            fields.push(("payload_bytes", json!(raw.payload().len())));
            match raw.verify() {
                Ok(()) => fields.push(("checksum", json!(format!("ok (CRC32C {:#010x})", raw.stored_crc())))),
                Err(e) => {
                    fields.push(("checksum", json!(format!("MISMATCH: {e}"))));
                    print(&a, &fields)?;
                    bail!("{name}: {e}");
                }
            }
            match AnyFilter::decode(&bytes) {
                Ok(f) => f,
                Err(e) => {
                    print(&a, &fields)?;
                    return Err(
                        e.context(format!("{name}: the header is intact but the filter is not valid"))
                    );
                }
            }
        }
        Format::Redisbloom => {
            fields.push(("format", json!("redisbloom SCANDUMP chunks (JSON Lines)")));
            match redisdump::read(&bytes)
                .with_context(|| format!("{name}: not a valid RedisBloom chunk file"))?
            {
                RedisFilter::Bloom(b) => AnyFilter::RedisBf(b),
                RedisFilter::Cuckoo(c) => AnyFilter::RedisCf(c),
            }
        }
        Format::Rdb => {
            let file = rdbfile::read(&bytes).with_context(|| format!("{name}: not a readable RDB file"))?;
            let (more, keys) = rdbfile::describe(&file);
            fields.extend(more);
            if a.json {
                fields.push(("filters", json!(keys)));
                print(&a, &fields)?;
            } else {
                print(&a, &fields)?;
                let mut out = output::stdout();
                for k in &keys {
                    writeln!(out, "{}", rdbfile::key_line(k))?;
                }
                out.flush()?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        Format::Guava => {
            fields.push(("format", json!("guava BloomFilter.writeTo")));
            AnyFilter::Guava(
                GuavaBloom::read_from(&bytes)
                    .with_context(|| format!("{name}: not a valid Guava Bloom filter"))?,
            )
        }
        Format::Parquet => {
            fields.push(("format", json!("parquet split-block Bloom filter bitset")));
            AnyFilter::SplitBlock(SplitBlockBloom::from_parquet_bytes(&bytes).with_context(|| {
                format!("{name}: not a Parquet SBBF bitset (its length must be a positive multiple of 32)")
            })?)
        }
    };
    if fmt != Format::Sift {
        fields.push(("kind", json!(filter.kind().name())));
    }
    // A window by time answers as of a time (the other kinds ignore it).
    let at = match filter.timed_clock() {
        Some(c) => clock::resolve(a.at, c, &name)?,
        None => 0,
    };
    fields.push(("items", json!(filter.len_at(at))));
    if let Some(c) = filter.capacity() {
        fields.push(("capacity", json!(c)));
    }
    fields.push(("memory_bytes", json!(filter.size_in_bytes())));
    fields.extend(filter.details(at));
    // Measured from the contents (bits set, items stored), so an overfilled filter shows the
    // rate it answers with, not the formula at its count of keys that set a new bit; a window
    // by time from the generations still live at the time read.
    let now = match &filter {
        AnyFilter::TimeLimited(f) => f.expected_fpr_at(at),
        other => other.current_fpr(),
    };
    fields.push(("fpr_estimated_now", json!(now)));
    fields.push(("fpr_estimated_from", json!(filter.fpr_basis())));
    match filter.planned_fpr() {
        Some(planned) => {
            fields.push(("fpr_planned", json!(planned)));
            let ratio = now / planned;
            let verdict = if ratio > a.threshold {
                format!(
                    "REBUILD: it answers yes to {} of keys never inserted, {ratio:.2}× the planned {} (threshold {}×); build a larger filter",
                    pct(now),
                    pct(planned),
                    a.threshold
                )
            } else {
                format!("ok: {ratio:.2}× the planned FPR (threshold {}×)", a.threshold)
            };
            fields.push(("verdict", json!(verdict)));
        }
        None => fields.push(("verdict", json!("no planned FPR recorded (static or foreign filter)"))),
    }
    print(&a, &fields)?;
    Ok(ExitCode::SUCCESS)
}

fn print(a: &Args, fields: &[(&'static str, Value)]) -> Result<()> {
    let mut out = output::stdout();
    if a.json {
        let map: serde_json::Map<String, Value> =
            fields.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        output::json(&mut out, &Value::Object(map))?;
    } else {
        let w = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in fields {
            let text = match (k, v) {
                (k, Value::Number(n)) if k.contains("fpr") => pct(n.as_f64().unwrap_or(f64::NAN)),
                (k, Value::Number(n)) if k.ends_with("bytes") => {
                    let b = n.as_f64().unwrap_or(0.0);
                    format!("{} ({})", n, human_bytes(b))
                }
                (_, Value::String(s)) => s.clone(),
                (_, Value::Array(items)) => items
                    .iter()
                    .map(|i| i.as_str().map_or(i.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join("; "),
                (_, v) => v.to_string(),
            };
            writeln!(out, "{k:<w$}  {text}")?;
        }
    }
    out.flush()?;
    Ok(())
}
