//! What every `sift` CLI test target runs the binary with.

use assert_cmd::Command;

/// The `sift` binary of this build.
pub fn sift() -> Command {
    Command::cargo_bin("sift").expect("the sift binary is built")
}

/// Runs, checks that nothing panicked, and returns (status code, stdout, stderr).
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "a panic: {stderr}");
    (out.status.code().expect("exited normally"), String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}
