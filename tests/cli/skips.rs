//! The skip policy of the test suite (`common::skipped`): a group of tests
//! skipped on purpose (`UNIENV_SKIP_INTEROP=1`, `UNIENV_SKIP_BROWSER=1`)
//! says so, and with `CI=true` the skip is a failure that names its reason,
//! so CI on a fresh machine never passes by leaving the comparisons with the
//! reference out. Checked by running this test binary's probe in a child.

use crate::common;
use std::process::Command;

/// Asks for the reference interpreter as every interop test does; run only
/// by `a_skip_fails_on_ci` (in a child process, with its environment).
#[test]
#[ignore = "a probe: run by a_skip_fails_on_ci with UNIENV_SKIP_INTEROP=1"]
fn skip_probe() {
    assert!(
        common::ref_python().is_none(),
        "the probe runs with UNIENV_SKIP_INTEROP=1"
    );
}

fn run_probe(ci: Option<&str>) -> (bool, String) {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--ignored", "--exact", "skips::skip_probe", "--nocapture"])
        .env("UNIENV_SKIP_INTEROP", "1")
        .env_remove("CI");
    if let Some(ci) = ci {
        command.env("CI", ci);
    }
    let out = command.output().expect("the test binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_skip_fails_on_ci() {
    let (ok, text) = run_probe(None);
    assert!(ok, "without CI the skip passes: {text}");
    assert!(text.contains("UNIENV_SKIP_INTEROP=1: skipping"), "{text}");
    let (ok, text) = run_probe(Some("true"));
    assert!(!ok, "with CI=true the skip must fail: {text}");
    assert!(
        text.contains("UNIENV_SKIP_INTEROP=1 with CI=true: CI must not skip"),
        "{text}"
    );
}
