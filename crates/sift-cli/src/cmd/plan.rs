//! `sift plan`: from any sufficient subset of n, p, m, k, the rest for every family, and a
//! recommendation.

use std::process::ExitCode;

use anyhow::{bail, Result};
use serde_json::json;
use sift::plan::{Family, Plan, Solution};
use sift::{math, recommend, Needs};

use crate::output::{self, pct, Table};
use crate::size::{human_bytes, parse_bits, parse_count, parse_fpr};

/// Compute filter parameters: give at least two of --items, --fpr, --bits (and optionally --hashes).
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift plan -n 1e8 -p 0.01            # seed 002: 958,505,838 bits = 114.26 MiB, k = 7 (classic Bloom)
  sift plan -m 64MiB -p 0.001         # how many items fit in 64 MiB at 0.1%?
  sift plan -n 1M -m 1MB              # the best FPR 1 MB gives a million items
  sift plan -n 1e6 -m 10Mbit -k 5     # Mbit is not a unit: sizes in bits are plain numbers
  sift plan -n 1e6 -p 1% --deletes    # recommend a family that supports deletes
  sift plan -n 1e8 -p 0.01 --json

Sizes: a plain number is bits; B, KB, MB, GB, TB (powers of 1000) and KiB, MiB, GiB, TiB are bytes.
Counts accept 1e8, 100M, 1_000_000. Rates accept 0.01, 1%, 1/128.")]
pub struct Args {
    /// Number of items n.
    #[arg(short = 'n', long = "items", value_parser = parse_count)]
    items: Option<u64>,
    /// False-positive rate p.
    #[arg(short = 'p', long = "fpr", value_parser = parse_fpr)]
    fpr: Option<f64>,
    /// Memory m (a plain number is bits; 114MiB, 1.5GB are bytes).
    #[arg(short = 'm', long = "bits", value_parser = parse_bits)]
    bits: Option<u64>,
    /// Hash functions k (Bloom families).
    #[arg(short = 'k', long = "hashes")]
    hashes: Option<u32>,
    /// The set is known in advance and never changes.
    #[arg(long = "static")]
    static_set: bool,
    /// Items must be removable.
    #[arg(long)]
    deletes: bool,
    /// The number of items can grow beyond --items by an unknown factor.
    #[arg(long)]
    grows: bool,
    /// Memory matters more than query speed.
    #[arg(long)]
    small: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One row of the table.
struct Row {
    family: &'static str,
    items: u64,
    bits: u64,
    bits_per_key: f64,
    hashes: Option<u32>,
    fpr: f64,
    speed: &'static str,
    note: &'static str,
}

fn speed_of(f: Family) -> &'static str {
    match f {
        Family::BlockedBloom | Family::SplitBlockBloom => "very fast",
        Family::ScalableBloom => "moderate",
        _ => "moderate",
    }
}

fn bloom_row(s: &Solution) -> Row {
    Row {
        family: s.family.name(),
        items: s.items,
        bits: s.bits,
        bits_per_key: s.bits_per_key,
        hashes: Some(s.hashes),
        fpr: s.fpr,
        speed: speed_of(s.family),
        note: match s.family {
            Family::ScalableBloom => "first layer; grows",
            Family::CountingBloom => "4-bit counters; deletes",
            Family::SplitBlockBloom => "Parquet SBBF, k = 8",
            _ => "",
        },
    }
}

/// Rows for the fingerprint families, whose size is fixed per key by p: when n and p are known,
/// or m and p (then n is the capacity).
fn fingerprint_rows(n: Option<u64>, p: f64, m: Option<u64>) -> Vec<Row> {
    // (family, bits per key, fpr, speed, note); families that cannot reach p are left out.
    let mut specs: Vec<(&'static str, f64, f64, &'static str, &'static str)> = Vec::new();
    let f = math::cuckoo_fingerprint_bits(p);
    let cuckoo_f = [8u32, 12, 16].into_iter().find(|&w| 8.0 / 2f64.powi(w as i32) <= p);
    if let Some(w) = cuckoo_f {
        specs.push(("cuckoo", w as f64 / 0.95, 8.0 / 2f64.powi(w as i32), "fast", "deletes, counts"));
    }
    let _ = f;
    let r = (0.95 / p).log2().ceil().max(1.0) as u32;
    if r <= 56 {
        specs.push((
            "quotient",
            (r + 3) as f64 / 0.95,
            math::quotient_fpr(r, 0.95),
            "fast",
            "deletes, merge, resize",
        ));
    }
    let n_f = n.map(|n| n as f64).unwrap_or(1e6);
    if p >= 1.0 / 256.0 {
        specs.push(("xor8", math::xor_bits_per_key(n_f, 8), 1.0 / 256.0, "very fast", "static"));
        specs.push(("binary-fuse8", math::fuse_bits_per_key(3, 8), 1.0 / 256.0, "very fast", "static"));
    }
    if p >= 1.0 / 65536.0 {
        specs.push(("binary-fuse16", math::fuse_bits_per_key(3, 16), 1.0 / 65536.0, "very fast", "static"));
    }
    let pb = (-p.log2()).ceil().clamp(1.0, 56.0) as u32;
    specs.push((
        "gcs",
        math::gcs_bits_per_key(2f64.powi(pb as i32), pb),
        0.5f64.powi(pb as i32),
        "slow",
        "static, compressed",
    ));
    specs
        .into_iter()
        .filter_map(|(family, bpk, fpr, speed, note)| {
            let (items, bits) = match (n, m) {
                (Some(n), _) => (n, (bpk * n as f64).ceil() as u64),
                (None, Some(m)) => ((m as f64 / bpk).floor() as u64, m),
                (None, None) => return None,
            };
            (items > 0).then_some(Row {
                family,
                items,
                bits,
                bits_per_key: bpk,
                hashes: None,
                fpr,
                speed,
                note,
            })
        })
        .collect()
}

pub fn run(a: Args) -> Result<ExitCode> {
    let mut plan = Plan::new();
    if let Some(n) = a.items {
        plan = plan.items(n);
    }
    if let Some(p) = a.fpr {
        plan = plan.fpr(p);
    }
    if let Some(m) = a.bits {
        plan = plan.bits(m);
    }
    if let Some(k) = a.hashes {
        plan = plan.hashes(k);
    }
    // The classic Bloom solution first: it validates the request and gives the error message.
    let bloom = plan.solve(Family::Bloom);
    let mut rows: Vec<Row> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for f in Family::ALL {
        match plan.solve(f) {
            Ok(s) => rows.push(bloom_row(&s)),
            Err(e) => errors.push(format!("{}: {e}", f.name())),
        }
    }
    if rows.is_empty() {
        match bloom {
            Err(e) => bail!("cannot plan: {e}"),
            Ok(_) => bail!("cannot plan: {}", errors.join("; ")),
        }
    }
    if let (Some(p), None) = (a.fpr, a.hashes) {
        rows.extend(fingerprint_rows(a.items, p, if a.items.is_none() { a.bits } else { None }));
    }

    // The recommendation needs n and p: the given ones, or the classic Bloom solution's.
    let reference = bloom
        .as_ref()
        .ok()
        .copied()
        .unwrap_or_else(|| plan.solve(Family::BlockedBloom).expect("at least one family solved"));
    let (rn, rp) = (a.items.unwrap_or(reference.items), a.fpr.unwrap_or(reference.fpr));
    let needs =
        Needs { static_set: a.static_set, deletes: a.deletes, grows: a.grows, memory_starved: a.small };
    let rec =
        recommend(usize::try_from(rn).unwrap_or(usize::MAX), rp.clamp(f64::MIN_POSITIVE, 0.999_999), needs)
            .ok();

    let mut out = output::stdout();
    if a.json {
        let fams: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({
                    "family": r.family,
                    "items": r.items,
                    "bits": r.bits,
                    "bytes": r.bits.div_ceil(64) * 8,
                    "mib": (r.bits.div_ceil(64) * 8) as f64 / (1u64 << 20) as f64,
                    "bits_per_key": r.bits_per_key,
                    "hashes": r.hashes,
                    "fpr": r.fpr,
                    "speed": r.speed,
                    "note": r.note,
                })
            })
            .collect();
        let rec_json = rec.map(|r| {
            json!({
                "family": r.family.name(),
                "bits_per_key": r.bits_per_key,
                "expected_fpr": r.expected_fpr,
                "bytes": r.bytes_for(rn as usize),
                "speed": format!("{:?}", r.speed_class),
                "reason": r.reason,
            })
        });
        let v = json!({
            "given": { "items": a.items, "fpr": a.fpr, "bits": a.bits, "hashes": a.hashes },
            "families": fams,
            "recommendation": rec_json,
        });
        output::json(&mut out, &v)?;
    } else {
        let mut t =
            Table::new(&["family", "items", "bits", "memory", "bits/key", "k", "FPR", "speed", "note"]);
        for r in &rows {
            t.row(vec![
                r.family.to_string(),
                r.items.to_string(),
                r.bits.to_string(),
                human_bytes((r.bits.div_ceil(64) * 8) as f64),
                format!("{:.2}", r.bits_per_key),
                r.hashes.map_or("-".to_string(), |k| k.to_string()),
                pct(r.fpr),
                r.speed.to_string(),
                r.note.to_string(),
            ]);
        }
        use std::io::Write;
        t.write(&mut out)?;
        if let Some(r) = rec {
            writeln!(
                out,
                "\nrecommended: {} ({:.2} bits/key, {} for {} items, FPR {}): {}",
                r.family.name(),
                r.bits_per_key,
                human_bytes(r.bytes_for(rn as usize) as f64),
                rn,
                pct(r.expected_fpr),
                r.reason
            )?;
        }
    }
    use std::io::Write;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
