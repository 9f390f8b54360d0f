//! The benchmark harness: what the Criterion benches (`benches/bloom_family.rs`,
//! `benches/static_and_cuckoo.rs`), the table program (`benches/table.rs`) and the diagnostic
//! probes (`benches/probes/`) share, so that they measure the same implementations on the same
//! keys with the same yardsticks.
//!
//! * [`keys`]: the key streams (`u64`, 20-byte strings), members and non-members.
//! * [`contender`]: a filter under test ([`contender::Subject`]), how it is made, a
//!   [`contender::Workload`] (its contenders, FPR, ratios and absolute targets).
//! * The workloads: [`bloom`] (sift's Bloom family and the Bloom crates), [`bloom_batch`]
//!   (`contains_many` on a filter far larger than the caches), [`static_filters`] (binary fuse,
//!   xor, GCS against xorf), [`cuckoo_quotient`] (Cuckoo and Quotient against cuckoofilter,
//!   scalable_cuckoo_filter and qfilter).
//! * [`table`]: the table program's measurement and markdown output; [`criterion`]: the Criterion
//!   groups of a list of contenders.
//! * [`measure`]: the counting allocator, the thread-CPU stopwatch, medians; [`args`]: the one
//!   command-line parser of the table program and the probes.
//!
//! Every program includes this folder as `mod harness;` (the probes with
//! `#[path = "../harness/mod.rs"]`) and uses part of it.
//!
//! ## Adding a workload (a new family and its peers)
//! 1. A module here, e.g. `harness/aging.rs`, with a unit struct implementing
//!    [`contender::Workload`]: its `--workload` name and heading, the FPR filters are sized for,
//!    its contenders (sift's first, then the peers; one [`contender::empty`] or
//!    [`contender::from_keys`] line each, with [`contender::Subject`] implemented for each filter
//!    type), and the ratios and absolute bounds its table prints.
//! 2. `pub mod aging;` below and one line in `WORKLOADS` of `benches/table.rs`
//!    (`Entry::of::<aging::Aging>()`): `cargo bench -p sift-filters --bench table -- --workload
//!    aging` then prints its table like the others'. A workload that is not a table of contenders
//!    (like [`bloom_batch`]) gives its own `run` function to an [`table::Entry`] instead.
//! 3. Criterion, if wanted: a `benches/NAME.rs` calling [`criterion::bench_contenders`] with
//!    `W::contenders::<K>()` for each key type, and a `[[bench]]` entry with `harness = false` in
//!    `crates/sift/Cargo.toml`.
//!
//! ## Adding a probe (a diagnostic program)
//! `benches/probes/NAME.rs` with `#[path = "../harness/mod.rs"] mod harness;`, flags read with
//! [`args::Args`] and its body run through [`args::run`], and a `[[bench]]` entry
//! (`name = "NAME_probe"`, `path`, `harness = false`) in `crates/sift/Cargo.toml`. Run it with
//! `cargo bench -p sift-filters --bench NAME_probe -- [flags]`.
#![allow(dead_code)]

pub mod args;
pub mod bloom;
pub mod bloom_batch;
pub mod contender;
pub mod criterion;
pub mod cuckoo_quotient;
pub mod keys;
pub mod measure;
pub mod static_filters;
pub mod table;
