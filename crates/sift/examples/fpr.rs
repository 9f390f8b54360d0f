//! The experiment of seed 003 (Guava's `BloomFilter` with 1M UUIDs), run on every sift filter:
//! insert N random UUID-like keys, probe with keys that were never inserted, and print bits/key,
//! the planned FPR and the measured one.
//!
//! ```text
//! cargo run --release -p sift-filters --example fpr -- [--items 1000000] [--fpr 0.01] [--probes 1000000]
//! ```

use std::time::Instant;

use sift::prelude::*;
use sift::Bloom;

/// Deterministic UUID-shaped keys (splitmix64), so runs are reproducible.
struct Keys(u64);

impl Keys {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn uuid(&mut self) -> String {
        let (a, b) = (self.next_u64(), self.next_u64());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            (b >> 48) & 0x3fff | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }
}

struct Args {
    items: usize,
    fpr: f64,
    probes: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { items: 1_000_000, fpr: 0.01, probes: 1_000_000 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--items" | "-n" => a.items = value()?.parse().map_err(|e| format!("--items: {e}"))?,
            "--fpr" | "-p" => a.fpr = value()?.parse().map_err(|e| format!("--fpr: {e}"))?,
            "--probes" => a.probes = value()?.parse().map_err(|e| format!("--probes: {e}"))?,
            "--help" | "-h" => {
                return Err("usage: fpr [--items N] [--fpr P] [--probes N]".to_string());
            }
            other => return Err(format!("unknown argument {other}; try --help")),
        }
    }
    Ok(a)
}

/// One row of the table.
struct Row {
    name: &'static str,
    bits_per_key: f64,
    expected: f64,
    measured: f64,
    false_negatives: usize,
    build_ns: f64,
    query_ns: f64,
}

fn measure<F: Filter>(
    name: &'static str,
    f: &F,
    build_ns: f64,
    members: &[String],
    probes: &[String],
) -> Row {
    let false_negatives = members.iter().filter(|k| !f.contains(k.as_bytes())).count();
    let t = Instant::now();
    let fp = probes.iter().filter(|k| f.contains(k.as_bytes())).count();
    let query_ns = t.elapsed().as_nanos() as f64 / probes.len() as f64;
    Row {
        name,
        bits_per_key: f.size_in_bytes() as f64 * 8.0 / members.len() as f64,
        expected: f.expected_fpr(),
        measured: fp as f64 / probes.len() as f64,
        false_negatives,
        build_ns,
        query_ns,
    }
}

fn dynamic<F: Insert>(
    name: &'static str,
    make: impl FnOnce() -> sift::Result<F>,
    members: &[String],
    probes: &[String],
) -> sift::Result<Row> {
    let t = Instant::now();
    let mut f = make()?;
    for k in members {
        f.insert(k.as_bytes());
    }
    let build_ns = t.elapsed().as_nanos() as f64 / members.len() as f64;
    Ok(measure(name, &f, build_ns, members, probes))
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut keys = Keys(0x5eed_0003);
    let members: Vec<String> = (0..args.items).map(|_| keys.uuid()).collect();
    // Non-members: a disjoint stream (a different seed; UUID collisions at 2^-122 are ignored).
    let mut other = Keys(0xdead_beef_0003);
    let probes: Vec<String> = (0..args.probes).map(|_| other.uuid()).collect();
    let (n, p) = (args.items, args.fpr);

    println!("sift: {n} UUID keys inserted, {} never-inserted keys probed, target FPR {p}\n", probes.len());
    let rows: Vec<sift::Result<Row>> = vec![dynamic("Bloom", || Bloom::new(n, p), &members, &probes)];

    println!(
        "| filter | bits/key | expected FPR | measured FPR | false negatives | build ns/key | query ns/key |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut failed = false;
    for row in rows {
        match row {
            Ok(r) => {
                failed |= r.false_negatives > 0;
                println!(
                    "| {} | {:.2} | {:.4}% | {:.4}% | {} | {:.1} | {:.1} |",
                    r.name,
                    r.bits_per_key,
                    r.expected * 100.0,
                    r.measured * 100.0,
                    r.false_negatives,
                    r.build_ns,
                    r.query_ns
                );
            }
            Err(e) => {
                failed = true;
                println!("| error | {e} |");
            }
        }
    }
    if failed {
        eprintln!("a filter had false negatives or failed to build");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
