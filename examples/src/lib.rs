//! The seed articles' three systems, end to end on real components, each with a load generator:
//!
//! * [`guard`]: the cache-penetration guard (seeds 000, 003, 004) — an HTTP service in front of
//!   a Redis cache and PostgreSQL, a filter of the table's ids in front of both; [`load`] is its
//!   load generator (legitimate Zipf reads, writes, an attack of ids that do not exist).
//! * [`jobs`]: idempotent jobs (seed 002's XTimer) — consumers that run each job id once, the
//!   filter's atomic add sparing the database lookup for new ids.
//! * [`feed`]: "already shown" per user (seed 004) — one filter per user against one Redis set
//!   per user, in memory and speed.
//!
//! [`env`](mod@env) starts the real servers they run on (PostgreSQL, redis-server, sift-server) for the
//! demos, the tests and the benchmarks. `examples/README.md` tells how to run each.

#![deny(missing_docs)]

pub mod env;
pub mod feed;
pub mod guard;
pub mod jobs;
pub mod load;
pub mod stats;
