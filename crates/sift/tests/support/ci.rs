//! Whether the tests run in CI, for the checks that compare the repository's fixture copies
//! with the specification's folder beside the repository.

/// `CI` set to anything but empty, `0` or `false`. CI runs beside the specification's folder,
/// so there a missing folder fails the copy check instead of letting it pass without comparing.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}
