//! Whether the tests run in CI, for the checks that compare the repository's fixture copies
//! with the specification's folder beside the repository: `CI` set to anything but empty, `0` or
//! `false` (the workspace's one rule, `sift_testkit::in_ci`). CI runs beside the specification's
//! folder, so there a missing folder fails the copy check instead of letting it pass without
//! comparing.

pub use sift_testkit::in_ci;
