//! The external programs a test drives (redis-cli, redis-py): a test that finds one missing
//! fails under CI, where a skip would let the run pass without it, and elsewhere says why it
//! skips (`scripts/test.sh` installs them all). The rule is `sift-testkit`'s, one for every crate.

#[allow(unused_imports)]
pub use sift_testkit::{in_ci, missing};
