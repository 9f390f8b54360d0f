//! sift-server: a Redis-protocol (RESP2/RESP3) server whose BF.* and CF.* commands behave as
//! RedisBloom's, on the sift library.
//!
//! Layers, bottom up (as in tokio's mini-redis): [`frame`] (RESP values, incremental parsing and
//! encoding), then connection, command parsing, commands and the keyspace.

#![deny(missing_docs)]

pub mod frame;
