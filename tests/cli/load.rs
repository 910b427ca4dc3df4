//! The `load` subcommand, short: an in-process server under N controllers
//! and M observers, and a running server targeted by URL. Each run must
//! report every check passed (nothing lost, misrouted or wrong; observers
//! converged; memory bounded). The long run is in RELIABILITY.md.

use crate::common;
use std::process::Command;

fn load(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_unienv-remote"))
        .arg("load")
        .args(args)
        .output()
        .expect("run unienv-remote load");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn assert_passed(ok: bool, text: &str) {
    assert!(ok, "{text}");
    assert!(text.trim_end().ends_with("PASS"), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
    assert!(text.contains(" 0 lost"), "{text}");
}

#[test]
fn load_in_process_short() {
    let (ok, text) = load(&[
        "--seconds",
        "3",
        "--controllers",
        "4",
        "--observers",
        "8",
        "--pipeline",
        "8",
    ]);
    assert_passed(ok, &text);
    assert!(text.contains("8/8 converged"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_a_running_server_by_url() {
    let (server, listener) = common::listen(common::fixture_server()).await;
    let url = listener.url();
    let (ok, text) = tokio::task::spawn_blocking(move || {
        load(&[
            "--seconds",
            "2",
            "--controllers",
            "3",
            "--observers",
            "3",
            "--url",
            &url,
            "--env",
            "counter",
            "--env",
            "counter3",
            "--env",
            "lazy",
        ])
    })
    .await
    .unwrap();
    assert_passed(ok, &text);
    assert!(text.contains("external server"), "{text}");
    server.shutdown().await;
}

#[test]
fn load_refuses_non_loopback_targets_and_unbounded_runs() {
    for args in [
        &[
            "--seconds",
            "1",
            "--controllers",
            "1",
            "--url",
            "ws://192.0.2.1:8765",
            "--env",
            "counter",
        ][..],
        &[
            "--seconds",
            "1",
            "--controllers",
            "1",
            "--url",
            "ws://example.com:80",
            "--env",
            "counter",
        ][..],
        &["--seconds", "100000", "--controllers", "1"][..],
        &["--seconds", "1", "--controllers", "100000"][..],
        &["--controllers", "1"][..],
    ] {
        let (ok, text) = load(args);
        assert!(!ok, "{args:?} was accepted: {text}");
        assert!(!text.contains("PASS"), "{text}");
    }
}
