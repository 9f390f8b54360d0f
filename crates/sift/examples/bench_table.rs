//! Side-by-side comparison of sift's Bloom family with the peer crates, in one process.
//!
//! ```text
//! cargo run --release -p sift --example bench_table -- [--n 1000000] [--keys u64|str20|both]
//!     [--rounds 5] [--fpr 0.01] [--batch-keys 134217728] [--batch-probes 4000000] [--only NAME[,NAME..]]
//!     [--wall]
//! ```
//!
//! For each key type it builds every contender (`benches/common/mod.rs`) with `n` keys, queries
//! all `n` members and `max(n, 1M)` non-members, and repeats this `--rounds` times, rotating the
//! order of the contenders each round so that none always runs first (or right after the same
//! neighbour). Times are medians over the rounds, in thread CPU time (wall time with `--wall`):
//! the machines this runs on are shared, and time spent descheduled is not the filter's. Memory is what the filter holds on the heap,
//! measured by a counting global allocator, so it is the same yardstick for every crate.
//!
//! Then the batch experiment: a sift filter of `--batch-keys` u64 keys (default 2^27, ~160 MB for
//! Bloom; `SIFT_BATCH_KEYS` also sets it, `0` skips it) queried with `contains` per key and with
//! `contains_many`. `--batch-keys 1000000000` gives a 1.2 GB Bloom filter (takes minutes).
//!
//! Output is markdown, ready for `docs/BENCHMARKS.md`.

#[path = "../benches/common/mod.rs"]
mod common;
#[path = "../benches/common/measure.rs"]
mod measure;

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use common::{Contender, Key, Metric, Str20, RATIOS};
use measure::{clock_name, live_bytes, median, parse_count, Stopwatch};

struct Args {
    n: usize,
    keys: Vec<&'static str>,
    rounds: usize,
    fpr: f64,
    batch_keys: usize,
    batch_probes: usize,
    only: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        n: 1_000_000,
        keys: vec!["u64", "str20"],
        rounds: 5,
        fpr: common::FPR,
        batch_keys: match std::env::var("SIFT_BATCH_KEYS") {
            Ok(v) => parse_count(&v)?,
            Err(_) => 1 << 27,
        },
        batch_probes: 4_000_000,
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--n" => a.n = parse_count(&value()?)?,
            "--keys" => {
                a.keys = match value()?.as_str() {
                    "u64" => vec!["u64"],
                    "str20" => vec!["str20"],
                    "both" => vec!["u64", "str20"],
                    other => return Err(format!("--keys {other}: expected u64, str20 or both")),
                }
            }
            "--rounds" => a.rounds = parse_count(&value()?)?.max(1),
            "--fpr" => {
                a.fpr = value()?.parse().map_err(|_| "bad --fpr".to_string())?;
                if !(a.fpr > 0.0 && a.fpr < 1.0) {
                    return Err("--fpr must be in (0, 1)".into());
                }
            }
            "--batch-keys" => a.batch_keys = parse_count(&value()?)?,
            "--batch-probes" => a.batch_probes = parse_count(&value()?)?.max(1),
            "--only" => a.only = Some(value()?),
            "--wall" => measure::use_wall_clock(),
            "-h" | "--help" => {
                return Err("usage: bench_table [--n N] [--keys u64|str20|both] [--rounds R] [--fpr P] \
                     [--batch-keys N|0] [--batch-probes N] [--only NAME-SUBSTRING] [--wall]"
                    .into())
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if a.n == 0 {
        return Err("--n must be positive".into());
    }
    Ok(a)
}

/// Results of one contender on one workload.
struct Row {
    name: &'static str,
    bits_per_key: f64,
    build: Vec<f64>,
    member: Vec<f64>,
    non_member: Vec<f64>,
    false_positives: usize,
    probes: usize,
}

impl Row {
    fn get(&self, m: Metric) -> f64 {
        match m {
            Metric::BitsPerKey => self.bits_per_key,
            Metric::Build => median(&self.build),
            Metric::QueryMember => median(&self.member),
            Metric::QueryNonMember => median(&self.non_member),
        }
    }
}

fn run_workload<K: Key>(args: &Args) {
    let n = args.n;
    let probes = n.max(1_000_000);
    let t = Instant::now();
    let members = common::members::<K>(n);
    let others = common::non_members::<K>(probes);
    eprintln!("[{}] generated {n} members and {probes} non-members in {:.1?}", K::NAME, t.elapsed());

    let list: Vec<Contender<K>> = common::contenders::<K>()
        .into_iter()
        .filter(|c| args.only.as_ref().is_none_or(|o| o.split(',').any(|x| c.name.contains(x))))
        .collect();
    let mut rows: Vec<Row> = list
        .iter()
        .map(|c| Row {
            name: c.name,
            bits_per_key: 0.0,
            build: vec![],
            member: vec![],
            non_member: vec![],
            false_positives: 0,
            probes,
        })
        .collect();

    // One small build of each first, so that what a family sets up once per process (the
    // blocked planner's cached tables, the SIMD kernel choice) is neither counted as the first
    // filter's memory nor timed as its build.
    for c in &list {
        let mut f = (c.make)(members.len().min(1000), args.fpr);
        f.insert_all(&members[..members.len().min(1000)]);
    }
    for round in 0..args.rounds {
        for i in 0..list.len() {
            let idx = (i + round) % list.len();
            let c = &list[idx];
            let before = live_bytes();
            let t = Stopwatch::start();
            let mut f = (c.make)(n, args.fpr);
            f.insert_all(black_box(&members));
            let build = t.ns_per(n);
            let bytes = live_bytes() - before;

            let t = Stopwatch::start();
            let hits = black_box(f.count_hits(black_box(&members)));
            let member = t.ns_per(n);
            assert_eq!(hits, n, "{}: false negatives ({} of {n} members found)", c.name, hits);

            let t = Stopwatch::start();
            let fp = black_box(f.count_hits(black_box(&others)));
            let non_member = t.ns_per(probes);
            drop(f);

            let row = &mut rows[idx];
            row.bits_per_key = bytes as f64 * 8.0 / n as f64;
            row.build.push(build);
            row.member.push(member);
            row.non_member.push(non_member);
            row.false_positives = fp; // deterministic: the same in every round
        }
        eprintln!("[{}] round {}/{} done", K::NAME, round + 1, args.rounds);
    }

    println!(
        "\n### keys = {}, n = {n}, target FPR = {}, median of {} rounds ({}), {probes} non-member probes\n",
        K::NAME,
        args.fpr,
        args.rounds,
        clock_name()
    );
    println!(
        "| implementation | bits/key | build ns/key | query member ns | query non-member ns | measured FPR |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        let fpr = r.false_positives as f64 / r.probes as f64;
        println!(
            "| {} | {:.2} | {:.1} | {:.1} | {:.1} | {:.3}% |",
            r.name,
            r.bits_per_key,
            r.get(Metric::Build),
            r.get(Metric::QueryMember),
            r.get(Metric::QueryNonMember),
            fpr * 100.0
        );
    }

    println!("\nRatios (sift / other; below 1.00 means sift is faster or smaller):\n");
    println!("| sift | vs | metric | sift | other | ratio |");
    println!("|---|---|---|---:|---:|---:|");
    for ratio in RATIOS {
        let value = |name: &str| rows.iter().find(|r| r.name == name).map(|r| r.get(ratio.metric));
        let (a, b) = (value(ratio.sift), value(ratio.other));
        match (a, b) {
            (Some(a), Some(b)) => println!(
                "| {} | {} | {} | {a:.2} | {b:.2} | **{:.2}** |",
                ratio.sift,
                ratio.other,
                ratio.metric.label(),
                a / b
            ),
            _ => println!(
                "| {} | {} | {} | – | – | pending ({} not in this build) |",
                ratio.sift,
                ratio.other,
                ratio.metric.label(),
                if a.is_none() { ratio.sift } else { ratio.other }
            ),
        }
    }
}

fn run_batch(args: &Args) {
    let n = args.batch_keys;
    let m = args.batch_probes;
    // Half members (spread over the whole key range), half non-members.
    let probes: Vec<[u8; 8]> = (0..m as u64)
        .map(|i| {
            let j = if i % 2 == 0 { common::mix64(i) % n as u64 } else { i | 1 << 63 };
            u64::nth(j).bytes()
        })
        .collect();
    println!("\n### Batch: `contains_many` vs one `contains` per key, u64 keys, n = {n}, {m} probes (half members)\n");
    println!("| filter | memory MB | build s (wall) | contains ns/probe | contains_many ns/probe | single / batch |");
    println!("|---|---:|---:|---:|---:|---:|");
    for c in common::batch_contenders() {
        if args.only.as_ref().is_some_and(|o| !c.name.contains(o.as_str())) {
            continue;
        }
        let t = Instant::now();
        let f = (c.build)(n, args.fpr);
        let build = t.elapsed();
        eprintln!("[batch] {} built with {n} keys in {build:.1?}", c.name);
        let (mut single, mut batch) = (vec![], vec![]);
        for round in 0..args.rounds {
            // Alternate which goes first, so neither always runs on a warmer cache/TLB.
            let order: [bool; 2] = if round % 2 == 0 { [false, true] } else { [true, false] };
            for is_batch in order {
                let t = Stopwatch::start();
                let hits = if is_batch {
                    f.count_batch(black_box(&probes))
                } else {
                    f.count_single(black_box(&probes))
                };
                let ns = t.ns_per(m);
                black_box(hits);
                if is_batch {
                    batch.push(ns)
                } else {
                    single.push(ns)
                }
            }
        }
        let (s, b) = (median(&single), median(&batch));
        println!(
            "| {} | {:.1} | {:.1} | {s:.1} | {b:.1} | **{:.2}** |",
            c.name,
            f.bytes() as f64 / 1e6,
            build.as_secs_f64(),
            s / b
        );
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    if cfg!(debug_assertions) {
        eprintln!("warning: built without optimisations; use `cargo run --release`");
    }
    for k in &args.keys {
        match *k {
            "u64" => run_workload::<u64>(&args),
            _ => run_workload::<Str20>(&args),
        }
    }
    if args.batch_keys > 0 {
        run_batch(&args);
    }
    ExitCode::SUCCESS
}
