//! `sift bench`: a quick comparison of the families on synthetic keys on this machine.

use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use serde_json::json;

use super::FamilyArg;
use crate::any::AnyFilterExt;
use crate::output::{self, pct, Table};
use crate::size::{parse_count, parse_fpr};

/// Compare the families on synthetic keys: bits/key, build ns/key, query ns, measured FPR.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  sift bench                       # 1M keys at p = 1%
  sift bench -n 10M -p 0.001 --json
  sift bench --family bloom --family blocked-bloom

Keys are 16-byte strings from a fixed-seed generator; members and non-members are disjoint, so the
measured FPR is the fraction of non-member queries answered 'maybe'. Timings include hashing and
are wall-clock on a possibly shared machine: use `cargo bench` for careful numbers.")]
pub struct Args {
    /// Number of keys inserted (the same number of non-members is queried).
    #[arg(short = 'n', long, default_value = "1000000", value_parser = parse_count)]
    items: u64,
    /// Target false-positive rate.
    #[arg(short = 'p', long, default_value = "0.01", value_parser = parse_fpr)]
    fpr: f64,
    /// Families to run (default: all native families).
    #[arg(short, long, value_enum)]
    family: Vec<FamilyArg>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn keys(n: usize, seed: u64) -> Vec<[u8; 16]> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&splitmix(&mut s).to_le_bytes());
            k[8..].copy_from_slice(&splitmix(&mut s).to_le_bytes());
            k
        })
        .collect()
}

pub fn run(a: Args) -> Result<ExitCode> {
    let n = usize::try_from(a.items)?;
    let families = if a.family.is_empty() {
        vec![
            FamilyArg::Bloom,
            FamilyArg::BlockedBloom,
            FamilyArg::SplitBlockBloom,
            FamilyArg::CountingBloom,
            FamilyArg::ScalableBloom,
            FamilyArg::Cuckoo,
            FamilyArg::ScalableCuckoo,
            FamilyArg::Quotient,
            FamilyArg::Xor8,
            FamilyArg::BinaryFuse8,
            FamilyArg::BinaryFuse16,
            FamilyArg::Gcs,
        ]
    } else {
        a.family.clone()
    };
    let members = keys(n, 1);
    let others = keys(n, 2);
    let mut rows = Vec::new();
    for fam in families {
        let t0 = Instant::now();
        let filter = if fam.is_static() {
            let h = sift::Hasher::default();
            let hashes: Vec<u64> = members.iter().map(|k| h.hash64(k)).collect();
            super::build_static(fam, &hashes, a.fpr)?
        } else {
            let mut f = super::new_dynamic(fam, Some(a.items), a.fpr)?;
            for k in &members {
                f.insert_new(k, None)?;
            }
            f
        };
        let build_ns = t0.elapsed().as_nanos() as f64 / n as f64;
        let t1 = Instant::now();
        let fp = others.iter().filter(|k| filter.contains(&k[..])).count();
        let query_ns = t1.elapsed().as_nanos() as f64 / n as f64;
        let missing = members.iter().take(10_000).filter(|k| !filter.contains(&k[..])).count();
        anyhow::ensure!(missing == 0, "{fam:?}: {missing} false negatives: this is a bug");
        rows.push((
            filter.kind().name(),
            filter.size_in_bytes() as f64 * 8.0 / n as f64,
            build_ns,
            query_ns,
            fp as f64 / n as f64,
            filter.expected_fpr(),
        ));
        drop(filter);
    }
    let mut out = output::stdout();
    if a.json {
        let v: Vec<_> = rows
            .iter()
            .map(|r| json!({"family": r.0, "bits_per_key": r.1, "build_ns_per_key": r.2, "query_ns": r.3, "measured_fpr": r.4, "expected_fpr": r.5}))
            .collect();
        output::json(&mut out, &json!({"items": n, "fpr": a.fpr, "results": v}))?;
    } else {
        writeln!(out, "n = {n}, target p = {}", pct(a.fpr))?;
        let mut t =
            Table::new(&["family", "bits/key", "build ns/key", "query ns", "measured FPR", "expected FPR"]);
        for r in &rows {
            t.row(vec![
                r.0.to_string(),
                format!("{:.2}", r.1),
                format!("{:.1}", r.2),
                format!("{:.1}", r.3),
                pct(r.4),
                pct(r.5),
            ]);
        }
        t.write(&mut out)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
