//! The BF.* and CF.* commands against the real binary, checked against the golden data captured
//! from RedisBloom (`tests/fixtures/`, a copy of the spec's fixtures) by the shared suite
//! (`tests/suite/`, which `crates/sift-redis` runs against redis-server with the module too):
//!
//! * the 280-line transcript, byte for byte, in RESP2 and RESP3 (current replies where a line is
//!   marked `differs_in_current`);
//! * every `bf_*` / `cf_*` fixture: setup replies, SCANDUMP chunks, INFO in both protocols, DEBUG,
//!   CARD, and a LOADCHUNK restore into a new key;
//! * the `redis` crate in RESP2 and RESP3, redis-py when installed;
//! * absurd inputs (sizes, rates, dumps) that must give exact errors and leave the server up;
//! * `maxmemory` as the bound of creation, LOADCHUNK headers and growth; configured defaults.

// `common` and `suite` both include `suite/client.rs` (one raw RESP client for every test crate,
// the module's included): two module paths for one file, on purpose.
#![allow(clippy::duplicate_mod)]

mod common;
mod suite;
#[path = "common/suite_target.rs"]
mod suite_target;

use suite_target::SiftServer;

#[test]
fn transcript_resp2_byte_exact() {
    suite::transcript_resp2_byte_exact(&SiftServer);
}

#[test]
fn transcript_resp3_byte_exact() {
    suite::transcript_resp3_byte_exact(&SiftServer);
}

#[test]
fn every_filter_fixture_matches() {
    suite::every_filter_fixture_matches(&SiftServer);
}

#[test]
fn redis_crate_resp2() {
    suite::redis_crate_resp2(&SiftServer);
}

#[test]
fn redis_crate_resp3() {
    suite::redis_crate_resp3(&SiftServer);
}

#[test]
fn redis_py_bloom_commands() {
    suite::redis_py_bloom_commands(&SiftServer);
}

#[test]
fn absurd_inputs_get_exact_errors_and_the_server_stays_up() {
    suite::absurd_inputs_get_exact_errors_and_the_server_stays_up(&SiftServer);
}

#[test]
fn maxmemory_bounds_loadchunk_and_creation() {
    suite::maxmemory_bounds_loadchunk_and_creation(&SiftServer);
}

#[test]
fn command_info_reports_arity_and_key() {
    suite::command_info_reports_arity_and_key(&SiftServer);
}

#[test]
fn configured_defaults_drive_auto_create() {
    suite::configured_defaults_drive_auto_create(&SiftServer);
}

#[test]
fn module_version_as_clients_see_it() {
    suite::module_version_as_clients_see_it(&SiftServer);
}

#[test]
fn sf_redis_crate_resp2() {
    suite::sf::sf_redis_crate(&SiftServer, false);
}

#[test]
fn sf_redis_crate_resp3() {
    suite::sf::sf_redis_crate(&SiftServer, true);
}

#[test]
fn sf_bad_input_changes_nothing() {
    suite::sf::sf_bad_input_changes_nothing(&SiftServer);
}

#[test]
fn sf_pieces_and_foreign_files() {
    suite::sf::sf_pieces_and_foreign_files(&SiftServer);
}

#[test]
fn sf_command_metadata() {
    suite::sf::sf_command_metadata(&SiftServer);
}

#[test]
fn sf_redis_py() {
    suite::sf::sf_redis_py(&SiftServer);
}
