//! Issue 3: sift's static filters (BinaryFuse8/16, Xor8, Gcs), Cuckoo and Quotient side by side
//! with xorf, qfilter, cuckoofilter and scalable_cuckoo_filter, in one process.
//!
//! ```text
//! cargo run --release -p sift --example bench_table3 -- [--n 1M,10M] [--keys u64|str20|both]
//!     [--rounds 3] [--probes 1M] [--section static|dynamic|both] [--only NAME[,NAME..]] [--wall]
//! ```
//!
//! For each key type and `n`: every contender (`benches/common3/mod.rs`) is built from the `n`
//! members (static filters: from the slice, hashing included; dynamic ones: created empty, then
//! one insert per key), then queried with `min(n, probes)` members (every one must be found) and
//! `probes` non-members (the hits give the measured FPR). Rounds rotate the order of the
//! contenders; times are medians over the rounds in thread CPU time (`--wall` for wall time).
//! Memory is the heap the filter holds after construction, from a counting global allocator.
//! Output is markdown, ready for `docs/BENCHMARKS.md`.

#[path = "../benches/common3/mod.rs"]
mod common3;
#[path = "../benches/common/measure.rs"]
mod measure;

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use common3::{Key, Str20};
use measure::{clock_name, live_bytes, median, parse_count, Stopwatch};

struct Args {
    ns: Vec<usize>,
    keys: Vec<&'static str>,
    rounds: usize,
    probes: usize,
    sections: Vec<&'static str>,
    only: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        ns: vec![1_000_000],
        keys: vec!["u64", "str20"],
        rounds: 3,
        probes: 1_000_000,
        sections: vec!["static", "dynamic"],
        only: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--n" => a.ns = value()?.split(',').map(parse_count).collect::<Result<_, _>>()?,
            "--keys" => {
                a.keys = match value()?.as_str() {
                    "u64" => vec!["u64"],
                    "str20" => vec!["str20"],
                    "both" => vec!["u64", "str20"],
                    other => return Err(format!("--keys {other}: expected u64, str20 or both")),
                }
            }
            "--rounds" => a.rounds = parse_count(&value()?)?.max(1),
            "--probes" => a.probes = parse_count(&value()?)?.max(1),
            "--section" => {
                a.sections = match value()?.as_str() {
                    "static" => vec!["static"],
                    "dynamic" => vec!["dynamic"],
                    "both" => vec!["static", "dynamic"],
                    other => return Err(format!("--section {other}: expected static, dynamic or both")),
                }
            }
            "--only" => a.only = Some(value()?),
            "--wall" => measure::use_wall_clock(),
            "-h" | "--help" => {
                return Err("usage: bench_table3 [--n 1M,10M] [--keys u64|str20|both] [--rounds R] \
                            [--probes N] [--section static|dynamic|both] [--only NAME[,NAME..]] [--wall]"
                    .into())
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if a.ns.contains(&0) {
        return Err("--n must be positive".into());
    }
    Ok(a)
}

#[derive(Default)]
struct Row {
    name: &'static str,
    bits_per_key: f64,
    coded_bits_per_key: Option<f64>,
    build: Vec<f64>,
    member: Vec<f64>,
    non_member: Vec<f64>,
    false_positives: usize,
    refused: usize,
}

impl Row {
    fn fpr(&self, probes: usize) -> f64 {
        self.false_positives as f64 / probes as f64
    }
}

#[derive(Clone, Copy)]
enum M {
    Bits,
    Build,
    Member,
    NonMember,
}

impl M {
    fn label(self, dynamic: bool) -> &'static str {
        match self {
            M::Bits => "bits/key",
            M::Build if dynamic => "insert",
            M::Build => "build",
            M::Member => "query member",
            M::NonMember => "query non-member",
        }
    }
}

fn get(rows: &[Row], name: &str, m: M) -> Option<f64> {
    let r = rows.iter().find(|r| r.name == name)?;
    Some(match m {
        M::Bits => r.bits_per_key,
        M::Build => median(&r.build),
        M::Member => median(&r.member),
        M::NonMember => median(&r.non_member),
    })
}

/// (sift row, peer row, metric, target ratio).
type Ratio = (&'static str, &'static str, M, f64);

const STATIC_RATIOS: &[Ratio] = &[
    ("sift BinaryFuse8", "xorf BinaryFuse8", M::Build, 0.7),
    ("sift BinaryFuse8", "xorf BinaryFuse8", M::Member, 1.0),
    ("sift BinaryFuse8", "xorf BinaryFuse8", M::NonMember, 1.0),
    ("sift BinaryFuse8", "xorf BinaryFuse8", M::Bits, f64::NAN),
    ("sift BinaryFuse16", "xorf BinaryFuse16", M::Build, f64::NAN),
    ("sift BinaryFuse16", "xorf BinaryFuse16", M::Member, f64::NAN),
    ("sift BinaryFuse16", "xorf BinaryFuse16", M::NonMember, f64::NAN),
    ("sift Xor8", "xorf Xor8", M::Build, f64::NAN),
    ("sift Xor8", "xorf Xor8", M::Member, f64::NAN),
    ("sift Xor8", "xorf Xor8", M::NonMember, f64::NAN),
];

const DYNAMIC_RATIOS: &[Ratio] = &[
    ("sift Cuckoo", "cuckoofilter+xxh3", M::Build, 0.35),
    ("sift Cuckoo", "cuckoofilter+xxh3", M::Member, 0.3),
    ("sift Cuckoo", "cuckoofilter+xxh3", M::NonMember, 0.3),
    ("sift Cuckoo", "cuckoofilter (SipHash)", M::Build, 0.35),
    ("sift Cuckoo", "cuckoofilter (SipHash)", M::Member, 0.3),
    ("sift Cuckoo", "cuckoofilter (SipHash)", M::NonMember, 0.3),
    ("sift Cuckoo", "scalable_cuckoo_filter (SipHash)", M::Build, f64::NAN),
    ("sift Cuckoo", "scalable_cuckoo_filter (SipHash)", M::Member, f64::NAN),
    ("sift Cuckoo", "scalable_cuckoo_filter (SipHash)", M::NonMember, f64::NAN),
    ("sift Quotient", "qfilter+xxh3", M::Bits, 0.75),
    ("sift Quotient", "qfilter+xxh3", M::Build, 1.0),
    ("sift Quotient", "qfilter+xxh3", M::Member, 1.0),
    ("sift Quotient", "qfilter+xxh3", M::NonMember, 1.0),
    ("sift Quotient at qfilter's load", "qfilter+xxh3", M::Bits, f64::NAN),
    ("sift Quotient at qfilter's load", "qfilter+xxh3", M::Build, 1.0),
    ("sift Quotient at qfilter's load", "qfilter+xxh3", M::Member, 1.0),
    ("sift Quotient at qfilter's load", "qfilter+xxh3", M::NonMember, 1.0),
];

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

fn print_rows(rows: &[Row], probes: usize, dynamic: bool) {
    let op = if dynamic { "insert ns/key" } else { "build ns/key" };
    println!("| implementation | bits/key | {op} | query member ns | query non-member ns | measured FPR |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let bits = match r.coded_bits_per_key {
            Some(c) => format!("{:.2} ({c:.2} coded)", r.bits_per_key),
            None => format!("{:.2}", r.bits_per_key),
        };
        let refused = if r.refused > 0 { format!(" ({} inserts refused)", r.refused) } else { String::new() };
        println!(
            "| {}{refused} | {bits} | {:.1} | {:.1} | {:.1} | {:.4}% |",
            r.name,
            median(&r.build),
            median(&r.member),
            median(&r.non_member),
            r.fpr(probes) * 100.0
        );
    }
}

fn print_ratios(rows: &[Row], ratios: &[Ratio], dynamic: bool) {
    println!("\nRatios (sift / peer; below 1.00 means sift is faster or smaller):\n");
    println!("| sift | vs | metric | sift | peer | ratio | target |");
    println!("|---|---|---|---:|---:|---:|---|");
    for &(a, b, m, target) in ratios {
        match (get(rows, a, m), get(rows, b, m)) {
            (Some(x), Some(y)) => {
                let t = if target.is_nan() {
                    "–".to_string()
                } else {
                    format!("≤ {target} {}", verdict(x / y <= target))
                };
                println!("| {a} | {b} | {} | {x:.2} | {y:.2} | **{:.2}** | {t} |", m.label(dynamic), x / y)
            }
            _ => println!("| {a} | {b} | {} | – | – | – | (row filtered out) |", m.label(dynamic)),
        }
    }
}

fn run_static<K: Key>(args: &Args, n: usize, members: &[K], others: &[K]) {
    let probes = others.len();
    let member_probes = &members[..n.min(args.probes)];
    let list: Vec<_> = common3::static_contenders::<K>()
        .into_iter()
        .filter(|c| args.only.as_ref().is_none_or(|o| o.split(',').any(|x| c.name.contains(x))))
        .collect();
    let mut rows: Vec<Row> = list.iter().map(|c| Row { name: c.name, ..Row::default() }).collect();
    // One small build of each first: what a family sets up once per process is neither counted
    // as the first filter's memory nor timed as its build.
    for c in &list {
        drop((c.build)(&members[..members.len().min(1000)]));
    }
    for round in 0..args.rounds {
        for i in 0..list.len() {
            let idx = (i + round) % list.len();
            let c = &list[idx];
            let before = live_bytes();
            let t = Stopwatch::start();
            let f = (c.build)(black_box(members));
            let build = t.ns_per(n);
            let bytes = live_bytes() - before;
            let t = Stopwatch::start();
            let hits = black_box(f.count_hits(black_box(member_probes)));
            let member = t.ns_per(member_probes.len());
            assert_eq!(hits, member_probes.len(), "{}: false negatives", c.name);
            let t = Stopwatch::start();
            let fp = black_box(f.count_hits(black_box(others)));
            let non_member = t.ns_per(probes);
            let row = &mut rows[idx];
            row.bits_per_key = bytes as f64 * 8.0 / n as f64;
            row.coded_bits_per_key = f.coded_bits_per_key();
            row.build.push(build);
            row.member.push(member);
            row.non_member.push(non_member);
            row.false_positives = fp;
            drop(f);
        }
        eprintln!("[static {} n={n}] round {}/{} done", K::NAME, round + 1, args.rounds);
    }
    println!(
        "\n### Static filters: keys = {}, n = {n}, median of {} rounds ({}), {} member and {probes} non-member probes\n",
        K::NAME,
        args.rounds,
        clock_name(),
        member_probes.len()
    );
    print_rows(&rows, probes, false);
    print_ratios(&rows, STATIC_RATIOS, false);

    println!("\nAbsolute targets:\n");
    println!("| target | measured | verdict |");
    println!("|---|---:|---|");
    if let Some(r) = rows.iter().find(|r| r.name == "sift BinaryFuse8") {
        println!(
            "| BinaryFuse8 ≤ 9.05 bits/key | {:.3} | {} |",
            r.bits_per_key,
            verdict(r.bits_per_key <= 9.05)
        );
        let p = r.fpr(probes);
        println!("| BinaryFuse8 FPR ≤ 0.40% | {:.4}% | {} |", p * 100.0, verdict(p <= 0.004));
    }
    if let Some(r) = rows.iter().find(|r| r.name == "sift BinaryFuse8 4-wise") {
        println!(
            "| BinaryFuse8 4-wise ≤ 8.7 bits/key | {:.3} | {} |",
            r.bits_per_key,
            verdict(r.bits_per_key <= 8.7)
        );
        let p = r.fpr(probes);
        println!("| BinaryFuse8 4-wise FPR ≤ 0.40% | {:.4}% | {} |", p * 100.0, verdict(p <= 0.004));
    }
    if let Some(r) = rows.iter().find(|r| r.name.starts_with("sift Gcs")) {
        let bound = (1.0 / common3::GCS_FPR).log2() + 1.6;
        let coded = r.coded_bits_per_key.unwrap_or(f64::NAN);
        println!(
            "| Gcs ≤ log2(1/p) + 1.6 = {bound:.1} bits/key (coded stream; in memory with the index: {:.2}) | {coded:.3} | {} |",
            r.bits_per_key,
            verdict(coded <= bound)
        );
        let q = median(&r.member).max(median(&r.non_member));
        println!(
            "| Gcs query ≤ 1 µs (worse of member / non-member) | {q:.0} ns | {} |",
            verdict(q <= 1000.0)
        );
    }
}

fn run_dynamic<K: Key>(args: &Args, n: usize, members: &[K], others: &[K]) {
    let probes = others.len();
    let member_probes = &members[..n.min(args.probes)];
    let list: Vec<_> = common3::dynamic_contenders::<K>()
        .into_iter()
        .filter(|c| args.only.as_ref().is_none_or(|o| o.split(',').any(|x| c.name.contains(x))))
        .collect();
    let mut rows: Vec<Row> = list.iter().map(|c| Row { name: c.name, ..Row::default() }).collect();
    // As in `run_static`: set-up done once per process is not the first filter's.
    for c in &list {
        let mut f = (c.make)(members.len().min(1000), common3::FPR);
        f.insert_all(&members[..members.len().min(1000)]);
    }
    for round in 0..args.rounds {
        for i in 0..list.len() {
            let idx = (i + round) % list.len();
            let c = &list[idx];
            let before = live_bytes();
            let t = Stopwatch::start();
            let mut f = (c.make)(n, common3::FPR);
            let refused = f.insert_all(black_box(members));
            let build = t.ns_per(n);
            let bytes = live_bytes() - before;
            let t = Stopwatch::start();
            let hits = black_box(f.count_hits(black_box(member_probes)));
            let member = t.ns_per(member_probes.len());
            if refused == 0 {
                assert_eq!(hits, member_probes.len(), "{}: false negatives", c.name);
            }
            let t = Stopwatch::start();
            let fp = black_box(f.count_hits(black_box(others)));
            let non_member = t.ns_per(probes);
            drop(f);
            let row = &mut rows[idx];
            row.bits_per_key = bytes as f64 * 8.0 / n as f64;
            row.build.push(build);
            row.member.push(member);
            row.non_member.push(non_member);
            row.false_positives = fp;
            row.refused = refused;
        }
        eprintln!("[dynamic {} n={n}] round {}/{} done", K::NAME, round + 1, args.rounds);
    }
    println!(
        "\n### Cuckoo and quotient filters: keys = {}, n = {n}, target FPR {}, median of {} rounds ({}), {} member and {probes} non-member probes\n",
        K::NAME,
        common3::FPR,
        args.rounds,
        clock_name(),
        member_probes.len()
    );
    print_rows(&rows, probes, true);
    print_ratios(&rows, DYNAMIC_RATIOS, true);
    println!("\nAbsolute targets:\n");
    println!("| target | measured | verdict |");
    println!("|---|---:|---|");
    if let Some(r) = rows.iter().find(|r| r.name == "sift Cuckoo") {
        let p = r.fpr(probes);
        println!("| Cuckoo (12-bit fp) FPR ≤ 0.2% | {:.4}% | {} |", p * 100.0, verdict(p <= 0.002));
        println!("| Cuckoo ≤ 13 bits/key | {:.2} | {} |", r.bits_per_key, verdict(r.bits_per_key <= 13.0));
    }
}

fn run_keys<K: Key>(args: &Args) {
    for &n in &args.ns {
        let t = Instant::now();
        let members = common3::members::<K>(n);
        let others = common3::non_members::<K>(args.probes);
        eprintln!(
            "[{}] generated {n} members and {} non-members in {:.1?}",
            K::NAME,
            args.probes,
            t.elapsed()
        );
        for s in &args.sections {
            match *s {
                "static" => run_static::<K>(args, n, &members, &others),
                _ => run_dynamic::<K>(args, n, &members, &others),
            }
        }
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
            "u64" => run_keys::<u64>(&args),
            _ => run_keys::<Str20>(&args),
        }
    }
    ExitCode::SUCCESS
}
