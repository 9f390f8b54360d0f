//! Argument parsing shared by every command group: Redis's strict integer and double parsers
//! (spec §2.4) and case-insensitive keyword tests. They live in `sift-commands`, with the BF/CF
//! handlers, so the generic commands and the filter commands decide "not an integer" and "not a
//! number" alike, in this server and in the Redis module.

pub use sift_commands::parse::*;
