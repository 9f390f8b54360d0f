//! sift-server: a Redis-protocol (RESP2/RESP3) server whose BF.* and CF.* commands behave as
//! RedisBloom's, on the sift library.
//!
//! Layers, bottom up (as in tokio's mini-redis):
//!
//! * [`frame`]: RESP values, two-step request parsing with limits, reply encoding;
//! * [`connection`]: buffered reads and batched writes on a socket;
//! * [`cmd`]: the command table, dispatch, and the commands themselves, which never touch a
//!   socket (parse arguments → apply to the keyspace → reply [`frame::Frame`]);
//! * [`db`]: the sharded keyspace and its locking;
//! * [`persist`]: the boundary to durable storage;
//! * [`script`]: the Lua engine behind EVAL and SCRIPT, and `lualib` Redis's `bit`, `cjson`,
//!   `cmsgpack` and `struct` for it (both with the default `lua` feature; without it the
//!   scripting commands answer an error, see [`cmd::script`]);
//! * [`server`]: accept loop, limits, graceful shutdown;
//! * [`metrics`]: per-command counters and the Prometheus endpoint (`--metrics-port`), and
//!   [`monitor`], which estimates the filters' error rates in the background.
//!
//! The RedisBloom commands, and every other family registered in `sift_commands`, are not
//! written here: their commands and data types are declared there once, and [`cmd::table`],
//! [`cmd::family`], the keyspace's [`db::Value::Data`] and [`persist::snapshot`] serve, store and
//! persist any registered type without naming it.

#![deny(missing_docs)]

pub mod cmd;
pub mod config;
pub mod connection;
pub mod db;
pub mod frame;
pub mod glob;
#[cfg(feature = "lua")]
pub mod lualib;
pub mod metrics;
pub mod monitor;
pub mod persist;
pub mod script;
pub mod server;
pub mod shared;
pub mod version;
