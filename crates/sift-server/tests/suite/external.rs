//! The external programs a test drives (redis-cli, redis-py): a test that finds one missing
//! fails under CI, where a skip would let the run pass without it, and elsewhere says why it
//! skips (`scripts/test.sh` installs them all).

/// Whether this is a CI run: `CI` set to anything but empty, `0` or `false` (CI systems set
/// `CI=true`; `.ci/run` runs with it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// For a test that cannot run because `what` is missing: fails the test under CI (with how to
/// install it), else prints that it is skipped, and the caller returns.
#[track_caller]
pub fn missing(what: &str, install: &str) {
    assert!(!in_ci(), "{what} is missing ({install}); under CI every test must run, none may skip");
    eprintln!("skipped: {what} is missing ({install})");
}
