//! How the suite sees a filter family: a table of function pointers plus tolerances, built with
//! [`Family::dynamic`] (constructed empty, then `insert`) or [`Family::built`] (static filters,
//! built once from the whole set), and optional hooks for what only some families can do.

// Some constructors and hooks are used only by families not yet wired up.
#![allow(dead_code)]

use std::fmt::Debug;

use sift::prelude::*;

use super::keys::Key;

/// How a filter of the family comes to hold a set.
pub enum Ctor<F> {
    /// `new(n, p)` then one insert per item.
    Dynamic {
        /// `T::new(expected_items, fpr)`.
        new: fn(usize, f64) -> sift::Result<F>,
        /// Inserts one item through `Insert::insert`.
        insert: fn(&mut F, &Key),
        /// Inserts one pre-hashed item through `Insert::insert_hash`.
        insert_hash: fn(&mut F, u64),
    },
    /// Built once from the whole set.
    Static {
        /// `build(fpr, items)`; families without an FPR parameter ignore it.
        build: fn(f64, &[Key]) -> sift::Result<F>,
        /// `build_from_hashes(fpr, hashes)`.
        build_hashes: fn(f64, &[u64]) -> sift::Result<F>,
    },
}

/// Everything the suite needs to know about one family.
pub struct Family<F> {
    /// Test-module name (also the golden file's stem).
    pub name: &'static str,
    /// Construction.
    pub ctor: Ctor<F>,
    /// A constructor taking `(expected_items, fpr)`, checked against bad parameters. Set for
    /// dynamic families; static families with an `(n, p)` constructor set it with
    /// [`Family::params_ctor`].
    pub params_ctor: Option<fn(usize, f64) -> sift::Result<F>>,
    /// `Remove::remove`, for families that delete.
    pub remove: Option<fn(&mut F, &Key) -> bool>,
    /// Union of two filters of the same shape, for families with set algebra.
    pub union: Option<fn(&mut F, &F) -> sift::Result<()>>,
    /// The exact false-positive rate of this very filter, from its contents (e.g. Bloom's
    /// `fill^k`). When present the measured rate is tested against it, which removes the
    /// filter-to-filter variation from the bound, and `expected_fpr()` is tested against it.
    pub exact_fpr: Option<fn(&F) -> f64>,
    /// `PartialEq`, for families that implement it.
    pub eq: Option<fn(&F, &F) -> bool>,
    /// Target false-positive rates to test (default 0.1, 0.01, 0.001). A family with a fixed rate
    /// (xor8: 2^-8) lists just that one.
    pub fpr_targets: Vec<f64>,
    /// Relative model error allowed between the reference rate (`expected_fpr()`, or
    /// `exact_fpr` when given) and the true rate; see `suite::fpr_check`.
    pub model_error: f64,
    /// Relative error allowed between the measured rate and `exact_fpr` (the exact formula still
    /// assumes independent probe positions; double hashing is slightly correlated).
    pub exact_error: f64,
    /// The measured rate after `n` inserts may exceed the target `p` by this fraction (rounding
    /// `k` to an integer, e.g., puts Bloom at `1.008·p` for `p = 0.1`).
    pub target_slack: f64,
    /// The measured rate after `n` inserts must be at least this fraction of the target `p`: a
    /// filter much better than asked for is oversized.
    pub sizing_floor: f64,
    /// Capacity asked for, per insert, in the random-sequence test. Families that store every
    /// copy of a repeated item in that item's own two buckets (cuckoo) reach a lower load with
    /// repeats than with distinct items, so they are sized with headroom there; their capacity
    /// for distinct items is checked at load by the FPR tests.
    pub repeat_headroom: f64,
}

impl<F: Filter + Persist + Debug> Family<F> {
    fn with_ctor(ctor: Ctor<F>, params_ctor: Option<fn(usize, f64) -> sift::Result<F>>) -> Self {
        Family {
            name: "",
            ctor,
            params_ctor,
            remove: None,
            union: None,
            exact_fpr: None,
            eq: None,
            fpr_targets: vec![0.1, 0.01, 0.001],
            model_error: 0.10,
            exact_error: 0.03,
            target_slack: 0.02,
            sizing_floor: 0.5,
            repeat_headroom: 1.0,
        }
    }

    /// A family built empty by `new(n, p)` and filled by `insert`.
    pub fn dynamic(new: fn(usize, f64) -> sift::Result<F>) -> Self
    where
        F: Insert,
    {
        Self::with_ctor(
            Ctor::Dynamic {
                new,
                insert: |f, k| {
                    f.insert(k);
                },
                insert_hash: |f, h| {
                    f.insert_hash(h);
                },
            },
            Some(new),
        )
    }

    /// A static family: `build(p, items)` and `build_from_hashes(p, hashes)`.
    pub fn built(
        build: fn(f64, &[Key]) -> sift::Result<F>,
        build_hashes: fn(f64, &[u64]) -> sift::Result<F>,
    ) -> Self {
        Self::with_ctor(Ctor::Static { build, build_hashes }, None)
    }

    /// Sets the test-module name (done by the `conformance!` macro).
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// Enables the delete checks.
    pub fn removable(mut self) -> Self
    where
        F: Remove,
    {
        self.remove = Some(|f, k| f.remove(k));
        self
    }

    /// Enables the union checks.
    pub fn union(mut self, union: fn(&mut F, &F) -> sift::Result<()>) -> Self {
        self.union = Some(union);
        self
    }

    /// Tests the measured rate against this exact per-filter rate.
    pub fn exact_fpr(mut self, exact: fn(&F) -> f64) -> Self {
        self.exact_fpr = Some(exact);
        self
    }

    /// Compares decoded filters with `==` too.
    pub fn with_eq(mut self) -> Self
    where
        F: PartialEq,
    {
        self.eq = Some(|a, b| a == b);
        self
    }

    /// Checks this `(n, p)` constructor of a static family against bad parameters.
    pub fn params_ctor(mut self, ctor: fn(usize, f64) -> sift::Result<F>) -> Self {
        self.params_ctor = Some(ctor);
        self
    }

    /// Replaces the target rates tested.
    pub fn fpr_targets(mut self, targets: &[f64]) -> Self {
        self.fpr_targets = targets.to_vec();
        self
    }

    /// Replaces the allowed model error of the reference rate (default 10 %).
    pub fn model_error(mut self, e: f64) -> Self {
        self.model_error = e;
        self
    }

    /// Sizes the random-sequence test's filter at `factor` × its number of inserts (default 1).
    pub fn repeat_headroom(mut self, factor: f64) -> Self {
        self.repeat_headroom = factor;
        self
    }

    /// Replaces the sizing floor (default 0.5: at least half the target rate at capacity).
    pub fn sizing_floor(mut self, floor: f64) -> Self {
        self.sizing_floor = floor;
        self
    }

    /// Replaces the allowed excess over the target rate at capacity (default 2 %).
    pub fn target_slack(mut self, slack: f64) -> Self {
        self.target_slack = slack;
        self
    }

    /// Whether the family takes inserts after construction.
    pub fn is_dynamic(&self) -> bool {
        matches!(self.ctor, Ctor::Dynamic { .. })
    }

    /// A filter for about `n` items at rate `p` holding `items`.
    pub fn build(&self, n: usize, p: f64, items: &[Key]) -> sift::Result<F> {
        match &self.ctor {
            Ctor::Dynamic { new, insert, .. } => {
                let mut f = new(n, p)?;
                for k in items {
                    insert(&mut f, k);
                }
                Ok(f)
            }
            Ctor::Static { build, .. } => build(p, items),
        }
    }

    /// A filter for about `n` items at rate `p` holding the pre-hashed `hashes`.
    pub fn build_hashes(&self, n: usize, p: f64, hashes: &[u64]) -> sift::Result<F> {
        match &self.ctor {
            Ctor::Dynamic { new, insert_hash, .. } => {
                let mut f = new(n, p)?;
                for &h in hashes {
                    insert_hash(&mut f, h);
                }
                Ok(f)
            }
            Ctor::Static { build_hashes, .. } => build_hashes(p, hashes),
        }
    }
}

impl<F> Family<F> {
    /// Inserts one item into a filter of a dynamic family.
    ///
    /// # Panics
    /// For a static family (the suite only calls it for dynamic ones).
    pub fn insert(&self, f: &mut F, k: &Key) {
        match &self.ctor {
            Ctor::Dynamic { insert, .. } => insert(f, k),
            Ctor::Static { .. } => panic!("{}: static filters take no inserts", self.name),
        }
    }
}
