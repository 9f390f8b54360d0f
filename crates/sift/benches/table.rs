//! sift against the peer crates, every implementation of a workload in one process, interleaved
//! and repeated, as markdown tables ready for `docs/BENCHMARKS.md` (method: `harness/table.rs`).
//!
//! ```text
//! cargo bench -p sift-filters --bench table -- [--workload NAME[,NAME..]] [--n 1M[,10M..]]
//!     [--keys u64|str20|both] [--rounds 3] [--probes N] [--fpr P] [--only NAME[,NAME..]] [--wall]
//!     [--batch-keys 2^27] [--batch-probes 4M]
//! ```
//!
//! Workloads (default: `bloom,static,cuckoo-quotient`; the list below): each prints one table per
//! key type and `n`, then its ratios and absolute targets. To add one, see `harness/mod.rs`.

mod harness;

use harness::args::{run, Args};
use harness::bloom::BloomFamily;
use harness::cuckoo_quotient::CuckooQuotient;
use harness::measure::Counting;
use harness::static_filters::StaticFilters;
use harness::table::{Entry, Options};

/// Counts the heap each filter holds.
#[global_allocator]
static ALLOC: Counting = Counting;

/// Every workload, in the order `--workload all` runs them.
const WORKLOADS: &[Entry] = &[
    Entry::of::<BloomFamily>(),
    Entry {
        name: "bloom-batch",
        about:
            "Bloom batch query: contains_many against one contains per key, on a filter of --batch-keys keys",
        run: harness::bloom_batch::run,
    },
    Entry::of::<StaticFilters>(),
    Entry::of::<CuckooQuotient>(),
];

/// What runs without `--workload`.
const DEFAULT: &str = "bloom,static,cuckoo-quotient";

const USAGE: &str = "\
usage: cargo bench -p sift-filters --bench table -- [options]

  --workload NAME[,NAME..]  bloom, bloom-batch, static, cuckoo-quotient, or all
                            (default: bloom,static,cuckoo-quotient)
  --n N[,N..]               keys per filter, e.g. 1M,10M (default 1M)
  --keys u64|str20|both     key types (default both)
  --rounds R                rounds; times are medians (default 3)
  --probes N                non-member probes (default max(n, 1M)); members probed: min(n, N)
  --fpr P                   FPR of the filters created empty (default: the workload's, 1%)
  --only NAME[,NAME..]      only the rows whose name contains one of these
  --wall                    wall-clock time instead of thread CPU time
  --batch-keys N            bloom-batch: keys in the filter (default 2^27; SIFT_BATCH_KEYS)
  --batch-probes N          bloom-batch: probes, half members (default 4M)";

fn main() -> std::process::ExitCode {
    run(|| {
        let mut a = Args::from_env(USAGE)?;
        let names = a.value("--workload")?.unwrap_or_else(|| DEFAULT.to_string());
        let options = Options::parse(&mut a)?;
        a.finish()?;
        let mut chosen = Vec::new();
        for name in names.split(',') {
            match WORKLOADS.iter().find(|w| w.name == name) {
                Some(w) => chosen.push(w),
                None if name == "all" => chosen.extend(WORKLOADS),
                None => {
                    let known: Vec<_> =
                        WORKLOADS.iter().map(|w| format!("{} ({})", w.name, w.about)).collect();
                    return Err(format!(
                        "--workload {name}: expected all or one of:\n  {}",
                        known.join("\n  ")
                    ));
                }
            }
        }
        for w in chosen {
            (w.run)(&options)?;
        }
        Ok(())
    })
}
