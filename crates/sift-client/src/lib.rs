//! sift's blocked Bloom filter kept in plain Redis strings, for servers that cannot load a module:
//! managed Redis and Valkey, locked-down clusters, any Redis-protocol server (sift-server too).
//!
//! The seed articles build this by hand: hash an item to `k` bit positions, `SETBIT` each
//! (pipelined), `GETBIT` each to query, Lua to make add-and-test atomic, and split a big bitmap
//! into small keys so that one item's bits live in one key. This crate does the same with
//! sift's blocked layout, where all `k` bits of an item fall in one 64-byte block:
//!
//! * **one key and one command per batch and key**: an add is `BITFIELD key SET u1 … SET u1 …`
//!   for all the batch's items in that sub-bitmap (its old bits say, atomically, whether each
//!   item was new); a query is `GETRANGE` of the item's 64-byte block, one `GETRANGE` for
//!   the blocks of the batch's items that lie close together in a sub-bitmap (a small
//!   generation is read whole by one);
//! * **sub-bitmaps** of [`DEFAULT_KEY_BYTES`] (4 MiB - 64) by default, each its own key, whose
//!   hash tags spread them over a cluster's slots while every item touches exactly one;
//! * **metadata** (hash, seed, sizes, layout version) in keys written once with `SET NX`: every
//!   client reads it, refuses what does not match ([`Error::Mismatch`]) or what it does not
//!   know ([`Error::UnsupportedLayout`]), and checks in each round trip that it is still current;
//! * **forgetting** without a module: time generations whose keys expire on their own
//!   ([`Spec::window`]), and seed 002's progressive migration ([`Filter::grow`]);
//! * **sizing** by sift's planner ([`Spec::new`], [`Spec::from_plan`]) and the FPR at the
//!   current fill from `BITCOUNT` ([`Filter::fill`]);
//! * **interoperable**: `docs/REDIS_LAYOUT.md` gives the layout byte by byte, and
//!   `scripts/redis_bitmap_bloom.py` (written from that document only) reads and writes the same
//!   filters; `sift push` / `sift pull` move a filter between a file and a server.
//!
//! ```no_run
//! use sift_client::{Filter, Options, Spec};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut conn = redis::Client::open("redis://127.0.0.1/")?.get_connection()?;
//! let seen = Filter::open_or_create(&mut conn, "jobs:done", &Spec::new(10_000_000, 0.001), Options::new())?;
//! if seen.add(&mut conn, "job-4711")? {
//!     // first time: run the job (seed 002's idempotency check)
//! }
//! assert!(seen.contains(&mut conn, "job-4711")?);
//! let answers = seen.add_many(&mut conn, &["a", "b", "a"])?;   // [true, true, false]
//! println!("FPR now: {:.4}", seen.fill(&mut conn)?.expected_fpr);
//! # let _ = answers;
//! # Ok(()) }
//! ```
//!
//! Async (tokio, the default `tokio` feature): the same methods with `_async`, on a
//! [`redis::aio::MultiplexedConnection`], a [`redis::aio::ConnectionManager`] or the async
//! cluster client. Redis Cluster: [`redis::cluster::ClusterConnection`] (sync) or
//! [`redis::cluster_async::ClusterConnection`]; a batch goes to each node in parallel.
//!
//! # What the calls promise
//!
//! * No false negative: an item whose add returned `Ok` is found by every later query, by any
//!   client, until its generation expires (windowed or retired generations only).
//! * Exactly-once "new": an add's answer comes from the old values of the item's bits, set by
//!   one command, so of all the clients adding one item (at once or not), at most one is told
//!   it was new; "not new" for an item never added happens at the false-positive rate.
//!   (Windowed filters: at most once per generation — see [`Spec::window`].)
//! * Failures: every error is an [`Error`]; nothing panics on what a server returns. A batch
//!   cut short reports which items were answered ([`Error::Partial`]); re-running it is safe
//!   (an add never clears a bit), but items the failed attempt added then answer "not new".
//!
//! # Modes
//!
//! [`Mode::Plain`] (the default) uses `BITFIELD`, `GETRANGE`, `PEXPIREAT`, `SET NX`, `GET`,
//! `EXISTS`, `BITCOUNT` and `DEL` only, so it works where scripting is disabled and on every
//! server since Redis 3.2. Queries read the item's 64-byte block with `GETRANGE` rather than
//! testing its bits with `BITFIELD_RO`: one read-only command of four arguments per item instead
//! of four arguments per bit (2.5× less server CPU, `docs/BENCHMARKS.md`), which every server
//! since Redis 2.4 answers, replicas included, so servers without `BITFIELD_RO` (before 6.2)
//! need nothing special. [`Mode::Lua`] sends the items' bit positions packed in binary to a
//! script (`EVALSHA`, then `EVAL` on `NOSCRIPT`): a ninth of the bytes of an add, a third of a
//! query's, but more server CPU on Redis 7 (see `docs/BENCHMARKS.md`, issue 17).

#![deny(missing_docs)]

mod batch;
mod error;
mod exec;
mod filter;
pub mod layout;
mod script;
mod spec;
pub mod transfer;

pub use error::{Answers, Error, Result};
#[cfg(feature = "tokio")]
pub use exec::AsyncConnection;
pub use exec::Connection;
pub use filter::{Fill, Filter, GenerationFill};
pub use layout::{Record, DEFAULT_KEY_BYTES};
pub use spec::{Clock, ManualClock, Mode, Options, Spec, SystemClock};

/// Internals exposed for the benchmark and the tests (not a stable API).
#[doc(hidden)]
pub mod internals {
    pub use crate::batch::{Batch, Builder};
    pub use crate::exec::Group;
    pub use crate::script::{add as add_script, contains as contains_script, pack, ADD, CONTAINS};
}
