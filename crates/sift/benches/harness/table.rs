//! The table program's measurement and output: every contender of a workload built from the same
//! keys and queried with the same probes, in one process, interleaved and repeated, printed as
//! markdown for `docs/BENCHMARKS.md`.
//!
//! For each key type and `n`, each round builds every contender (a static filter from the key
//! slice, hashing included; the others created empty, then one insert per key), queries
//! `min(n, probes)` members (every one must be found, unless the filter refused inserts) and
//! `probes` non-members (their hits give the measured FPR). Rounds rotate the order of the
//! contenders, so none always runs first or after the same neighbour; times are medians over the
//! rounds, in thread CPU time (`--wall`: wall time), since the machines this runs on are shared
//! and time spent descheduled is not the filter's. Memory is the heap the filter holds after its
//! build, from the counting global allocator (the same yardstick for every crate).

use std::hint::black_box;
use std::time::Instant;

use super::args::Args;
use super::contender::{Contender, Make, Metric, Workload};
use super::keys::{members, non_members, Key, KeyKind, Str20};
use super::measure::{clock_name, live_bytes, median, use_wall_clock, Stopwatch};

/// A workload of the table program: its name, what it measures, and how it runs.
pub struct Entry {
    /// The name `--workload` takes.
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// Runs it with the parsed options.
    pub run: fn(&Options) -> Result<(), String>,
}

impl Entry {
    /// The entry of a [`Workload`]: its table for each key type and `n` of the options.
    pub const fn of<W: Workload>() -> Entry {
        Entry { name: W::NAME, about: W::TITLE, run: run_workload::<W> }
    }
}

/// The options of the table program.
pub struct Options {
    /// Key counts, one table each.
    pub ns: Vec<usize>,
    /// Key types, one table each.
    pub keys: Vec<KeyKind>,
    /// Rounds; times are medians over them.
    pub rounds: usize,
    /// Non-member probes; `None`: `max(n, 1M)`. Members probed: `min(n, probes)`.
    pub probes: Option<usize>,
    /// The FPR filters created empty are sized for; `None`: the workload's.
    pub fpr: Option<f64>,
    /// Keys of the batch experiment's filter.
    pub batch_keys: usize,
    /// Probes of the batch experiment.
    pub batch_probes: usize,
    /// Row-name substrings; only matching contenders run.
    pub only: Option<Vec<String>>,
}

impl Options {
    /// Reads the table program's options (everything but `--workload`).
    pub fn parse(a: &mut Args) -> Result<Options, String> {
        let fpr = match a.value("--fpr")? {
            Some(v) => match v.parse::<f64>() {
                Ok(p) if p > 0.0 && p < 1.0 => Some(p),
                _ => return Err(format!("--fpr {v}: expected a rate in (0, 1)")),
            },
            None => None,
        };
        let batch_keys = match std::env::var("SIFT_BATCH_KEYS") {
            Ok(v) => super::measure::parse_count(&v).map_err(|e| format!("SIFT_BATCH_KEYS: {e}"))?,
            Err(_) => 1 << 27,
        };
        let o = Options {
            ns: a.counts("--n", &[1_000_000])?,
            keys: a.keys(&[KeyKind::U64, KeyKind::Str20])?,
            rounds: a.count("--rounds", 3)?.max(1),
            probes: match a.value("--probes")? {
                Some(v) => Some(super::measure::parse_count(&v)?.max(1)),
                None => None,
            },
            fpr,
            batch_keys: a.count("--batch-keys", batch_keys)?,
            batch_probes: a.count("--batch-probes", 4_000_000)?.max(1),
            only: a.value("--only")?.map(|v| v.split(',').map(str::to_string).collect()),
        };
        if o.batch_keys == 0 {
            return Err("--batch-keys must be positive".into());
        }
        if a.switch("--wall") {
            use_wall_clock();
        }
        Ok(o)
    }

    /// Whether `--only` lets the contender named `name` run.
    pub fn selects(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.iter().any(|x| name.contains(x.as_str())))
    }
}

/// Runs a [`Workload`]'s table for every key type and `n` of the options.
pub fn run_workload<W: Workload>(o: &Options) -> Result<(), String> {
    for &kind in &o.keys {
        match kind {
            KeyKind::U64 => table::<W, u64>(o),
            KeyKind::Str20 => table::<W, Str20>(o),
        }
    }
    Ok(())
}

/// Results of one contender.
#[derive(Default)]
struct Row {
    name: &'static str,
    bits_per_key: f64,
    coded_bits_per_key: Option<f64>,
    build: Vec<f64>,
    member: Vec<f64>,
    non_member: Vec<f64>,
    false_positives: usize,
    probes: usize,
    refused: usize,
}

impl Row {
    fn get(&self, m: Metric) -> Option<f64> {
        Some(match m {
            Metric::BitsPerKey => self.bits_per_key,
            Metric::CodedBitsPerKey => self.coded_bits_per_key?,
            Metric::Build => median(&self.build),
            Metric::QueryMember => median(&self.member),
            Metric::QueryNonMember => median(&self.non_member),
            Metric::QueryWorst => median(&self.member).max(median(&self.non_member)),
            Metric::Fpr => self.false_positives as f64 / self.probes as f64,
        })
    }
}

fn table<W: Workload, K: Key>(o: &Options) {
    let fpr = o.fpr.unwrap_or(W::FPR);
    for &n in &o.ns {
        let probes = o.probes.unwrap_or(n.max(1_000_000));
        let t = Instant::now();
        let members = members::<K>(n);
        let others = non_members::<K>(probes);
        let member_probes = &members[..n.min(probes)];
        eprintln!("[{} {} n={n}] generated the keys in {:.1?}", W::NAME, K::NAME, t.elapsed());

        let list: Vec<Contender<K>> =
            W::contenders::<K>().into_iter().filter(|c| o.selects(c.name)).collect();
        let mut rows: Vec<Row> =
            list.iter().map(|c| Row { name: c.name, probes, ..Row::default() }).collect();
        // One small build of each first, so that what a family sets up once per process (the
        // blocked planner's cached tables, the SIMD kernel choice) is neither counted as the
        // first filter's memory nor timed as its build.
        for c in &list {
            drop(c.build(&members[..members.len().min(1000)], fpr));
        }
        for round in 0..o.rounds {
            for i in 0..list.len() {
                let idx = (i + round) % list.len();
                let c = &list[idx];
                let before = live_bytes();
                let t = Stopwatch::start();
                let (f, refused) = c.build(black_box(&members), fpr);
                let build = t.ns_per(n);
                let bytes = live_bytes() - before;

                let t = Stopwatch::start();
                let hits = black_box(f.count_hits(black_box(member_probes)));
                let member = t.ns_per(member_probes.len());
                if refused == 0 {
                    assert_eq!(hits, member_probes.len(), "{}: false negatives", c.name);
                }

                let t = Stopwatch::start();
                let fp = black_box(f.count_hits(black_box(&others)));
                let non_member = t.ns_per(probes);

                let row = &mut rows[idx];
                row.bits_per_key = bytes as f64 * 8.0 / n as f64;
                row.coded_bits_per_key = f.coded_bits_per_key();
                row.build.push(build);
                row.member.push(member);
                row.non_member.push(non_member);
                row.false_positives = fp; // deterministic: the same in every round
                row.refused = refused;
                drop(f);
            }
            eprintln!("[{} {} n={n}] round {}/{} done", W::NAME, K::NAME, round + 1, o.rounds);
        }
        // The FPR only sizes the filters created empty (a static filter has its own).
        let sized = list.iter().any(|c| matches!(c.make, Make::Empty(_))).then_some(fpr);
        print::<W>(&rows, K::NAME, n, sized, o.rounds, member_probes.len(), probes);
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

fn print<W: Workload>(
    rows: &[Row],
    keys: &str,
    n: usize,
    fpr: Option<f64>,
    rounds: usize,
    members: usize,
    probes: usize,
) {
    let fpr = fpr.map(|p| format!("target FPR = {p}, ")).unwrap_or_default();
    println!(
        "\n### {}: keys = {keys}, n = {n}, {fpr}median of {rounds} rounds ({}), \
         {members} member and {probes} non-member probes\n",
        W::TITLE,
        clock_name(),
    );
    println!(
        "| implementation | bits/key | build ns/key | query member ns | query non-member ns | measured FPR |"
    );
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
            r.get(Metric::Fpr).unwrap_or(f64::NAN) * 100.0
        );
    }
    println!(
        "\nbuild: created empty and one insert per key (static filters: built from the key slice), \
         hashing included.",
    );

    let value = |name: &str, m: Metric| rows.iter().find(|r| r.name == name).and_then(|r| r.get(m));
    if !W::RATIOS.is_empty() {
        println!("\nRatios (sift / other; below 1.00 means sift is faster or smaller):\n");
        println!("| sift | vs | metric | sift | other | ratio | target |");
        println!("|---|---|---|---:|---:|---:|---|");
        for r in W::RATIOS {
            let label = r.metric.label();
            match (value(r.sift, r.metric), value(r.other, r.metric)) {
                (Some(a), Some(b)) => {
                    let target = match r.target {
                        Some(t) => format!("≤ {t} {}", verdict(a / b <= t)),
                        None => "–".to_string(),
                    };
                    println!(
                        "| {} | {} | {label} | {a:.2} | {b:.2} | **{:.2}** | {target} |",
                        r.sift,
                        r.other,
                        a / b
                    )
                }
                _ => println!("| {} | {} | {label} | – | – | – | (row filtered out) |", r.sift, r.other),
            }
        }
    }
    if !W::BOUNDS.is_empty() {
        println!("\nAbsolute targets:\n");
        println!("| target | measured | verdict |");
        println!("|---|---:|---|");
        for b in W::BOUNDS {
            match value(b.row, b.metric) {
                Some(v) => println!("| {} | {} | {} |", b.label, b.metric.show(v), verdict(v <= b.max)),
                None => println!("| {} | – | (row filtered out) |", b.label),
            }
        }
    }
}
