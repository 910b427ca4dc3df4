//! `serve` (started as a process, driven by our client, stopped with
//! SIGINT) and `inspect` (golden envelopes written by the reference, and
//! corrupted copies of them).

use crate::support;

use std::path::PathBuf;
use std::time::Duration;
use support::{run, run_env, Streaming};
use unienv_remote::client::{blocking, ClientConfig};
use unienv_remote::host::ResetArgs;

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Reads the banner's first line and returns the URL it announces.
fn banner_url(serve: &Streaming, what: &str) -> String {
    let line = serve
        .next_line(Duration::from_secs(30))
        .expect("the serve banner");
    assert!(line.contains(&format!("serving {what} on ws://")), "{line}");
    let url = line.split_whitespace().last().expect("URL").to_string();
    assert!(
        url.starts_with("ws://127.0.0.1:") && !url.ends_with(":0"),
        "{url}"
    );
    url
}

/// Sends SIGINT to a process we started.
fn interrupt(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

#[cfg(unix)]
#[test]
fn serve_hosts_the_simulators_and_stops_on_sigint() {
    let serve = Streaming::spawn(&["serve", "--addr", "127.0.0.1:0", "--idle-timeout", "0"]);
    let url = banner_url(&serve, "the built-in simulators");
    let mut banner = Vec::new();
    while let Some(line) = serve.next_line(Duration::from_secs(10)) {
        let done = line.starts_with("Press Ctrl-C");
        banner.push(line);
        if done {
            break;
        }
    }
    let banner = banner.join("\n");
    assert!(banner.contains("env   cartpole"), "{banner}");
    assert!(banner.contains("node  pointmass/node/camera"), "{banner}");
    assert!(
        banner.contains(&format!("Watch: unienv-remote watch {url} cartpole")),
        "{banner}"
    );

    let client = blocking::Client::connect(&url, ClientConfig::default()).expect("connect");
    assert_eq!(client.server_info().server, "unienv-remote");
    let env = client.env("cartpole").expect("cartpole");
    let reset = env.reset(ResetArgs::with_seed(0)).expect("reset");
    assert!(reset.observation.as_array().is_some());
    env.step(1i64).expect("step");

    interrupt(serve.pid());
    let (status, _, stderr) = serve.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("shutting down: closing simulators"),
        "{stderr}"
    );
    assert!(stderr.trim_end().ends_with("stopped"), "{stderr}");
    // The server closed the session.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !client.is_closed() {
        assert!(
            std::time::Instant::now() < deadline,
            "the session is still open"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = env.step(1i64).expect_err("the server is gone");
    assert_eq!(after.code(), "connection_closed", "{after}");
}

#[cfg(unix)]
#[test]
fn serve_fixtures_with_a_token() {
    let serve = Streaming::spawn(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--fixtures",
        "--token",
        "t0ken",
    ]);
    let url = banner_url(&serve, "the conformance fixture registry");
    let refused = run(&["discover", &url, "--timeout", "10"]);
    assert!(refused.fails_with("connection_error").contains("HTTP 401"));
    let out = run(&["discover", &url, "--token", "t0ken", "--timeout", "10"]);
    assert!(out.ok().contains("\ncounter3 "), "{}", out.stdout);
    interrupt(serve.pid());
    let (status, _, stderr) = serve.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// The token from a file (`--token-file`) and from the environment
/// (`UNIENV_TOKEN`), for `serve` and for the client commands, so that it
/// need not appear on a command line that `ps` shows every local user.
#[cfg(unix)]
#[test]
fn the_token_comes_from_a_file_or_the_environment() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("token");
    std::fs::write(&file, "t0ken-from-file\n").expect("write the token file");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let file = file.to_str().expect("a UTF-8 path");
    let serve = Streaming::spawn(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--fixtures",
        "--token-file",
        file,
    ]);
    let url = banner_url(&serve, "the conformance fixture registry");
    let refused = run(&["discover", &url, "--timeout", "10"]);
    assert!(refused.fails_with("connection_error").contains("HTTP 401"));
    let wrong = run_env(
        &["discover", &url, "--timeout", "10"],
        &[("UNIENV_TOKEN", "wrong")],
    );
    assert!(wrong.fails_with("connection_error").contains("HTTP 401"));
    let from_env = run_env(
        &["discover", &url, "--timeout", "10"],
        &[("UNIENV_TOKEN", "t0ken-from-file")],
    );
    assert!(from_env.ok().contains("\ncounter3 "), "{}", from_env.stdout);
    let from_file = run(&["discover", &url, "--token-file", file, "--timeout", "10"]);
    assert!(
        from_file.ok().contains("\ncounter3 "),
        "{}",
        from_file.stdout
    );
    // --token wins over the environment.
    let flag = run_env(
        &[
            "discover",
            &url,
            "--token",
            "t0ken-from-file",
            "--timeout",
            "10",
        ],
        &[("UNIENV_TOKEN", "wrong")],
    );
    flag.ok();
    // Both flags at once: a usage error.
    let both = run(&["discover", &url, "--token", "a", "--token-file", file]);
    assert_eq!(both.status.code(), Some(2), "{}", both.stderr);
    interrupt(serve.pid());
    let (status, _, stderr) = serve.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");

    // `serve` takes UNIENV_TOKEN too; an empty one is refused, not taken
    // as no token.
    let serve = Streaming::spawn_env(
        &["serve", "--addr", "127.0.0.1:0", "--fixtures"],
        &[("UNIENV_TOKEN", "t0ken-from-env")],
    );
    let url = banner_url(&serve, "the conformance fixture registry");
    let refused = run(&["discover", &url, "--timeout", "10"]);
    assert!(refused.fails_with("connection_error").contains("HTTP 401"));
    run_env(
        &["discover", &url, "--timeout", "10"],
        &[("UNIENV_TOKEN", "t0ken-from-env")],
    )
    .ok();
    interrupt(serve.pid());
    let (status, _, stderr) = serve.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
    let empty = run_env(&["serve", "--addr", "127.0.0.1:0"], &[("UNIENV_TOKEN", "")]);
    assert_eq!(empty.status.code(), Some(1), "{}", empty.stderr);
    assert!(
        empty.stderr.contains("UNIENV_TOKEN") && empty.stderr.contains("empty"),
        "{}",
        empty.stderr
    );
}

#[test]
fn call_help_documents_the_json_conventions() {
    let out = run(&["call", "--help"]);
    let help = out.ok();
    for form in [
        "\"$array\"",
        "\"dtype\"",
        "\"$tuple\"",
        "\"$bytes\"",
        "float32",
        "operation",
    ] {
        assert!(help.contains(form), "{form} missing:\n{help}");
    }
}

#[test]
fn serve_reports_an_address_it_cannot_use() {
    let out = run(&["serve", "--addr", "not-an-address"]);
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("cannot listen on not-an-address"),
        "{}",
        out.stderr
    );
}

#[test]
fn inspect_reads_golden_files_and_names_problems() {
    let path = golden("step_result.bin");
    let size = std::fs::metadata(&path).expect("golden file").len();
    let out = run(&["inspect", path.to_str().expect("path")]);
    let text = out.ok();
    assert!(text.contains("\"request_id\": \"r42\""), "{text}");
    assert!(text.contains("\"type\": \"response\""), "{text}");
    assert!(
        text.trim_end().ends_with(&format!(
            "-- valid envelope and protocol v1 message, {size} bytes"
        )),
        "{text}"
    );
    let json = run(&["inspect", "--json", path.to_str().expect("path")]);
    assert!(json.ok().contains("\"t\": \"dict\""), "{}", json.stdout);

    let bytes = std::fs::read(&path).expect("read");
    let dir = std::env::temp_dir().join(format!("unienv-cli-inspect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut renamed = bytes.clone();
    let tag = renamed
        .windows(3)
        .position(|w| w == b"\"t\"")
        .expect("a tag");
    renamed[tag + 1] = b'T';
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "truncated",
            bytes[..100].to_vec(),
            "header length 566 exceeds the 96 bytes after the prefix",
        ),
        (
            "trailing",
            [bytes.as_slice(), b"x"].concat(),
            "1 trailing attachment bytes are not referenced",
        ),
        ("member", renamed, "unexpected member \"T\""),
        ("empty", Vec::new(), "invalid envelope"),
    ];
    for (name, corrupted, problem) in cases {
        let file = dir.join(format!("{name}.bin"));
        std::fs::write(&file, corrupted).expect("write");
        let out = run(&["inspect", file.to_str().expect("path")]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", out.stderr);
        assert!(
            out.stderr.starts_with("error: invalid envelope: ") && out.stderr.contains(problem),
            "{name}: {}",
            out.stderr
        );
    }
    let missing = run(&["inspect", dir.join("missing.bin").to_str().expect("path")]);
    assert!(missing.stderr.contains("cannot read"), "{}", missing.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}
