//! A filter under test and a workload: the adapters every implementation goes through, the
//! list of contenders of a workload, and the ratios and absolute bounds its table prints.

use std::hint::black_box;

use super::keys::Key;

/// One filter implementation, seen through the two operations every workload needs.
pub trait Subject<K: Key> {
    /// Inserts one key; `false` if the filter refused it (full; a static filter refuses every
    /// insert after its build).
    fn add(&mut self, key: &K) -> bool;
    /// Whether the filter may contain `key`.
    fn has(&self, key: &K) -> bool;
    /// For a GCS: bits per key of the coded stream alone (what a file stores), without the
    /// in-memory sample index.
    fn coded_bits_per_key(&self) -> Option<f64> {
        None
    }
}

/// A filter under test, type-erased: the per-key loops are monomorphised inside, so the virtual
/// call is paid once per batch of keys, never per key.
pub trait Built<K> {
    /// Inserts every key, one call per key; returns how many were refused.
    fn insert_all(&mut self, keys: &[K]) -> usize;
    /// Number of keys reported present, one call per key.
    fn count_hits(&self, keys: &[K]) -> usize;
    /// See [`Subject::coded_bits_per_key`].
    fn coded_bits_per_key(&self) -> Option<f64>;
}

impl<K: Key, S: Subject<K>> Built<K> for S {
    #[inline(never)]
    fn insert_all(&mut self, keys: &[K]) -> usize {
        let mut refused = 0usize;
        for k in keys {
            refused += !self.add(black_box(k)) as usize;
        }
        refused
    }

    #[inline(never)]
    fn count_hits(&self, keys: &[K]) -> usize {
        let mut hits = 0usize;
        for k in keys {
            hits += self.has(black_box(k)) as usize;
        }
        hits
    }

    fn coded_bits_per_key(&self) -> Option<f64> {
        Subject::coded_bits_per_key(self)
    }
}

/// Makes an empty filter for `(n, fpr)`.
pub type MakeEmpty<K> = Box<dyn Fn(usize, f64) -> Box<dyn Built<K>>>;
/// Builds a filter from all its keys (distinct) at once, hashing included.
pub type MakeFromKeys<K> = Box<dyn Fn(&[K]) -> Box<dyn Built<K>>>;

/// How a contender comes to hold its keys.
pub enum Make<K> {
    /// Created empty for `(n, fpr)`, then one insert per key (the timed build is both).
    Empty(MakeEmpty<K>),
    /// Built once from the slice of all keys (static filters; the FPR is the filter's own).
    FromKeys(MakeFromKeys<K>),
}

/// An implementation under test: its row name and how to make it.
pub struct Contender<K> {
    /// Row name in tables and Criterion ids (`sift …` for sift's own).
    pub name: &'static str,
    /// How it is made.
    pub make: Make<K>,
}

impl<K: Key> Contender<K> {
    /// The filter holding `keys` and the number of keys it refused.
    pub fn build(&self, keys: &[K], fpr: f64) -> (Box<dyn Built<K>>, usize) {
        match &self.make {
            Make::Empty(make) => {
                let mut f = make(keys.len(), fpr);
                let refused = f.insert_all(keys);
                (f, refused)
            }
            Make::FromKeys(build) => (build(keys), 0),
        }
    }
}

/// A contender created empty for `(n, fpr)` and filled one key at a time.
pub fn empty<K: Key, S: Subject<K> + 'static>(
    name: &'static str,
    make: impl Fn(usize, f64) -> S + 'static,
) -> Contender<K> {
    Contender { name, make: Make::Empty(Box::new(move |n, p| Box::new(make(n, p)) as Box<dyn Built<K>>)) }
}

/// A contender built from the slice of all its keys at once.
pub fn from_keys<K: Key, S: Subject<K> + 'static>(
    name: &'static str,
    build: impl Fn(&[K]) -> S + 'static,
) -> Contender<K> {
    Contender { name, make: Make::FromKeys(Box::new(move |keys| Box::new(build(keys)) as Box<dyn Built<K>>)) }
}

/// One table of the table program (and the contenders of a Criterion bench): the
/// implementations compared, at which FPR, and what to conclude from their numbers.
pub trait Workload {
    /// Its name on the command line (`--workload NAME`).
    const NAME: &'static str;
    /// The table's heading.
    const TITLE: &'static str;
    /// The false-positive rate the filters created empty are sized for (`--fpr` overrides it).
    const FPR: f64;
    /// The comparisons printed under the table.
    const RATIOS: &'static [Ratio] = &[];
    /// The absolute targets printed under the ratios.
    const BOUNDS: &'static [Bound] = &[];
    /// Every implementation, in table order: sift's first, then the peers.
    fn contenders<K: Key>() -> Vec<Contender<K>>;
}

/// A measured quantity of one contender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Heap bytes the filter holds, in bits per key.
    BitsPerKey,
    /// A GCS's coded stream alone, in bits per key.
    CodedBitsPerKey,
    /// Build time (create + insert every key, or the static build), ns per key.
    Build,
    /// Query time for members, ns per key.
    QueryMember,
    /// Query time for non-members, ns per key.
    QueryNonMember,
    /// The slower of the two queries, ns per key.
    QueryWorst,
    /// Measured false-positive rate (a fraction).
    Fpr,
}

impl Metric {
    /// Short label.
    pub fn label(self) -> &'static str {
        match self {
            Metric::BitsPerKey => "bits/key",
            Metric::CodedBitsPerKey => "coded bits/key",
            Metric::Build => "build",
            Metric::QueryMember => "query member",
            Metric::QueryNonMember => "query non-member",
            Metric::QueryWorst => "query (worse of member, non-member)",
            Metric::Fpr => "FPR",
        }
    }

    /// A value of this metric as the tables print it.
    pub fn show(self, v: f64) -> String {
        match self {
            Metric::BitsPerKey | Metric::CodedBitsPerKey => format!("{v:.3}"),
            Metric::Build | Metric::QueryMember | Metric::QueryNonMember | Metric::QueryWorst => {
                format!("{v:.1} ns")
            }
            Metric::Fpr => format!("{:.4}%", v * 100.0),
        }
    }
}

/// `sift / other` of one metric between two contenders (by name), with its target if it has one.
pub struct Ratio {
    /// The sift contender.
    pub sift: &'static str,
    /// The contender it is compared with.
    pub other: &'static str,
    /// What is compared.
    pub metric: Metric,
    /// The ratio the issue asks for (at most), if any.
    pub target: Option<f64>,
}

/// A ratio printed for information.
pub const fn ratio(sift: &'static str, other: &'static str, metric: Metric) -> Ratio {
    Ratio { sift, other, metric, target: None }
}

/// A ratio with a target: met when `sift / other ≤ target`.
pub const fn ratio_at_most(sift: &'static str, other: &'static str, metric: Metric, target: f64) -> Ratio {
    Ratio { sift, other, metric, target: Some(target) }
}

/// An absolute target: met when `metric` of row `row` is at most `max`.
pub struct Bound {
    /// The row it applies to.
    pub row: &'static str,
    /// What is bounded.
    pub metric: Metric,
    /// The largest value that meets it.
    pub max: f64,
    /// How the target reads in the table.
    pub label: &'static str,
}
