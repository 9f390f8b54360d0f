//! `sift plan`: from any sufficient subset of n, p, m, k, the rest for every family, and a
//! recommendation.

use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
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
        Family::AgingBloom | Family::TimeLimitedBloom => "fast",
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
            Family::AgingBloom => "sliding window: the last n insertions",
            Family::TimeLimitedBloom => "sliding window: n insertions per TTL",
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

/// A 64-bit hash: the probability that a key never inserted has the hash of one of `n` inserted
/// keys, `n / 2^64`, is a floor under every filter's FPR that no size or `k` lowers.
fn hash_floor(n: u64) -> f64 {
    n as f64 / 2f64.powi(64)
}

/// The first significant digit of `x`, rounded up: `5.42e-13` → `6e-13`.
fn round_up_1(x: f64) -> f64 {
    let e = x.log10().floor();
    let scale = 10f64.powf(e);
    (x / scale).ceil() * scale
}

/// The command-line flag of a planner parameter.
fn flag(name: &str) -> &str {
    match name {
        "items" => "-n",
        "fpr" => "-p",
        "bits" => "-m",
        "hashes" => "-k",
        other => other,
    }
}

/// A planner error in the command line's terms: flags instead of parameter names, sizes for
/// humans, and what would fit.
fn explain(e: sift::Error, fpr: Option<f64>) -> anyhow::Error {
    match e {
        sift::Error::InvalidParameter { name, value, expected } => {
            let expected = expected
                .replace("`items`", "-n")
                .replace("`fpr`", "-p")
                .replace("`bits`", "-m")
                .replace("`hashes`", "-k");
            if value == "missing" {
                anyhow!("{} is missing: {expected}", flag(name))
            } else {
                anyhow!("{} {value}: must be {expected}", flag(name))
            }
        }
        sift::Error::CapacityExceeded { requested_bytes, limit_bytes } => {
            let fits = fpr
                .and_then(|p| Plan::new().bits(limit_bytes as u64 * 8).fpr(p).solve(Family::Bloom).ok())
                .map_or(String::new(), |s| {
                    format!("; at -p {} it holds about {} items", pct(s.fpr), s.items)
                });
            anyhow!("{}{fits}: lower -n or raise -p", super::too_large(requested_bytes, limit_bytes))
        }
        other => anyhow!(other),
    }
}

/// Requests that have an answer by the formulas but cannot be meant: say what is wrong and what
/// is possible instead.
fn check_request(a: &Args) -> Result<()> {
    let bloom_with = |plan: Plan| {
        let plan = if let Some(k) = a.hashes { plan.hashes(k) } else { plan };
        plan.solve(Family::Bloom)
    };
    if let (Some(n), Some(m)) = (a.items, a.bits) {
        // The classic Bloom filter gets the lowest FPR from n and m among the Bloom families.
        if let Ok(best) = bloom_with(Plan::new().items(n).bits(m)) {
            if best.fpr >= USELESS_FPR {
                let p = a.fpr.unwrap_or(0.01);
                let need = Plan::new().items(n).fpr(p).solve(Family::Bloom).ok();
                let hold = Plan::new().bits(m).fpr(p).solve(Family::Bloom).map_or(0, |s| s.items);
                bail!(
                    "-m {m} bits for -n {n} items is {:.2} bits per item: the best filter would answer yes to {} of keys never inserted. {n} items at -p {} need {}; {m} bits hold {hold} items at that rate",
                    m as f64 / n as f64,
                    pct(best.fpr),
                    pct(p),
                    need.map_or("more than sift makes".to_string(), |s| format!(
                        "{} bits ({})",
                        s.bits,
                        human_bytes(s.bytes as f64)
                    )),
                );
            }
        }
    }
    let Some(p) = a.fpr else { return Ok(()) };
    // The items: given, or what the memory holds.
    let n = match (a.items, a.bits) {
        (Some(n), _) => Some(n),
        (None, Some(m)) => match bloom_with(Plan::new().bits(m).fpr(p)) {
            Ok(s) => Some(s.items),
            Err(sift::Error::InvalidParameter { name: "bits", .. }) => {
                let one = Plan::new().items(1_000_000).fpr(p).solve(Family::Bloom).ok();
                bail!(
                    "-m {m} bits hold no item at -p {}: {}",
                    pct(p),
                    one.map_or("ask for a higher -p".to_string(), |s| format!(
                        "a classic Bloom filter needs {:.2} bits per item at this rate, and 64 bits at least",
                        s.bits_per_key
                    ))
                );
            }
            Err(_) => None,
        },
        (None, None) => None,
    };
    if let Some(n) = n {
        let floor = hash_floor(n);
        if p < floor {
            let items =
                if a.items.is_some() { format!("{n} items") } else { format!("the {n} items -m holds") };
            let instead = round_up_1(10.0 * floor);
            let instead = if instead < USELESS_FPR {
                format!("Ask for -p {instead:.0e} or more (where hash collisions add at most a tenth)")
            } else {
                "Split the keys over several filters".to_string()
            };
            bail!(
                "-p {} is below what any filter of {items} can answer: sift hashes each key to 64 bits, so a key never inserted shares the hash of an inserted one with probability n/2^64 = {}, whatever the filter's size. {instead}",
                pct(p),
                pct(floor)
            );
        }
    }
    if p >= USELESS_FPR {
        eprintln!(
            "sift: warning: -p {}: a filter that answers yes to {} of keys never inserted keeps few of them out",
            pct(p),
            pct(p)
        );
    }
    Ok(())
}

/// A row reaches `-p` when its FPR is at most this multiple of it (the planners round sizes and
/// `k` to whole units).
const REACHED: f64 = 1.05;

/// An FPR from which a filter tells little apart: it answers yes to half the keys it never saw.
const USELESS_FPR: f64 = 0.5;

pub fn run(a: Args) -> Result<ExitCode> {
    check_request(&a)?;
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
            Err(e) => errors.push(format!("{}: {:#}", f.name(), explain(e, a.fpr))),
        }
    }
    if rows.is_empty() {
        match bloom {
            Err(e) => return Err(explain(e, a.fpr).context("cannot plan")),
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
    let needs = Needs {
        static_set: a.static_set,
        deletes: a.deletes,
        grows: a.grows,
        memory_starved: a.small,
        ..Needs::default()
    };
    let rec =
        recommend(usize::try_from(rn).unwrap_or(usize::MAX), rp.clamp(f64::MIN_POSITIVE, 0.999_999), needs)
            .ok();

    // With n and p given, a family whose layout caps k or the fingerprint (gcs: 56 bits) may not
    // reach p at any size the planner proposes: its row shows the rate it does reach.
    let short_of =
        |fpr: f64| matches!((a.items, a.fpr, a.bits), (Some(_), Some(p), None) if fpr > p * REACHED);
    let unreachable: Vec<&str> = rows.iter().filter(|r| short_of(r.fpr)).map(|r| r.family).collect();

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
                    "reaches_fpr": !short_of(r.fpr),
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
        if !unreachable.is_empty() {
            writeln!(
                out,
                "\nnote: {} cannot reach -p {} at any size (their layout caps the hashes or fingerprint bits per key); the FPR column shows the rate each reaches",
                unreachable.join(", "),
                pct(rp)
            )?;
        }
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
