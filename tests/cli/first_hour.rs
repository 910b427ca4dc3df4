//! A new user's first hour with the command line: errors that
//! name the problem and the way out, output for scripts, envelopes for
//! `inspect`, a server that survives a closed stdout and says what happens.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::{run, Ours, Streaming, BIN};
use unienv_remote::server::ServerConfig;
use unienv_remote::sims;

fn cli(args: &[&str]) -> support::Run {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--timeout", "10"]);
    run(&all)
}

fn checked() -> ServerConfig {
    ServerConfig {
        validate_actions: true,
        ..ServerConfig::default()
    }
}

#[test]
fn call_errors_name_the_problem_and_the_way_out() {
    let ours = Ours::start(sims::register, checked());
    let url = ours.url.as_str();
    cli(&["call", url, "pointmass", "reset"]).ok();
    // Two numbers for a one-argument step: counted right, with the fix.
    let out = cli(&["call", url, "pointmass", "step", "--args", "[0.5, -0.5]"]);
    let stderr = out.fails_with("invalid_request");
    assert!(
        stderr.contains("step() takes 1 positional argument ('action') but 2 were given"),
        "{stderr}"
    );
    assert!(stderr.contains("--args '[[0.5, -0.5]]'"), "{stderr}");
    // Out of bounds: the element and the bound, and the env stays usable.
    let out = cli(&["call", url, "pointmass", "step", "--args", "[[0.5, 3]]"]);
    let stderr = out.fails_with("invalid_request");
    assert!(
        stderr.contains("action[1] = 3 is above the high bound 1 of the action space"),
        "{stderr}"
    );
    cli(&["call", url, "pointmass", "step", "--args", "[[0.5, -0.5]]"]).ok();
    // Unknown names: what was asked and the closest.
    let stderr = cli(&["call", url, "cartpol", "reset"])
        .fails_with("not_found")
        .to_string();
    assert!(
        stderr.contains("Unknown resource ID 'cartpol'; did you mean 'cartpole'?"),
        "{stderr}"
    );
    let out = cli(&["call", url, "cartpole", "reload"]);
    let stderr = out.fails_with("unsupported_operation");
    assert!(
        stderr.contains("env 'cartpole' has no method 'reload'; valid: 'reset', 'step', 'render'"),
        "{stderr}"
    );
    // No Rust debug text in what the user reads.
    assert!(
        !stderr.contains("Some(") && !stderr.contains("Connect(\""),
        "{stderr}"
    );
}

#[test]
fn handshake_refusals_name_the_flag_that_fixes_them() {
    let ours = Ours::start(
        sims::register,
        ServerConfig {
            token: Some("s3cret".into()),
            ..ServerConfig::default()
        },
    );
    let out = cli(&["discover", &ours.url]);
    let stderr = out.fails_with("connection_error");
    assert!(stderr.contains("401"), "{stderr}");
    assert!(stderr.contains("missing bearer token"), "{stderr}");
    assert!(stderr.contains("--token TOKEN"), "{stderr}");
    assert!(!stderr.contains("Connect(\""), "{stderr}");
    let out = cli(&["discover", &ours.url, "--token", "wrong"]);
    assert!(out
        .fails_with("connection_error")
        .contains("wrong bearer token"));
    cli(&["discover", &ours.url, "--token", "s3cret"]).ok();
}

#[test]
fn json_output_and_saved_envelopes_for_scripts_and_inspect() {
    let ours = Ours::start(sims::register, checked());
    let url = ours.url.as_str();
    let out = cli(&["discover", url, "--json"]);
    let list: serde_json::Value = serde_json::from_str(out.ok()).expect("discover --json is JSON");
    let ids: Vec<&str> = list
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 9, "{ids:?}");
    assert_eq!(list[0]["action_space"]["type"], "BoxSpace", "{}", list[0]);

    let out = cli(&[
        "call",
        url,
        "cartpole",
        "reset",
        "--kwargs",
        r#"{"seed": 1}"#,
        "--json",
    ]);
    let reset: serde_json::Value = serde_json::from_str(out.ok()).expect("call --json is JSON");
    assert_eq!(reset.as_array().map(Vec::len), Some(3), "{reset}");
    assert_eq!(reset[1].as_array().map(Vec::len), Some(4), "{reset}");

    let dir = std::env::temp_dir().join(format!("unienv-first-hour-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("step.bin");
    let file_arg = file.to_str().expect("path");
    let out = cli(&[
        "call", url, "cartpole", "step", "--args", "[1]", "--save", file_arg,
    ]);
    out.ok();
    assert!(
        out.stderr.contains("unienv-remote inspect"),
        "{}",
        out.stderr
    );
    let inspected = run(&["inspect", file_arg]);
    let text = inspected.ok();
    assert!(text.contains("\"type\": \"response\""), "{text}");
    assert!(
        text.contains("valid envelope and protocol v1 message"),
        "{text}"
    );
    // An error reply is saved too, and is a valid protocol message.
    let out = cli(&[
        "call", url, "cartpole", "step", "--args", "[5]", "--save", file_arg,
    ]);
    out.fails_with("invalid_request");
    let text = run(&["inspect", file_arg]).ok().to_string();
    assert!(text.contains("\"type\": \"error\""), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_copies_and_shows_action_spaces() {
    let mut serve = Streaming::spawn(&["serve", "--addr", "127.0.0.1:0", "--copies", "2"]);
    let mut banner = Vec::new();
    while let Some(line) = serve.next_line(Duration::from_secs(60)) {
        let done = line.starts_with("Press Ctrl-C");
        banner.push(line);
        if done {
            break;
        }
    }
    let text = banner.join("\n");
    for id in [
        "cartpole-0",
        "cartpole-1",
        "pointmass-1/node/body",
        "gripper-1",
    ] {
        assert!(text.contains(id), "{id} missing:\n{text}");
    }
    assert!(
        text.contains("env   cartpole-0  action Box(int64, [])  observation Box(float32, [4])"),
        "{text}"
    );
    assert!(!serve.exited());
}

#[test]
fn serve_survives_a_closed_stdout_and_logs_what_happens() {
    // `serve | head -1`: stdout is closed before the banner is written.
    let mut child = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "-v"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start serve");
    drop(child.stdout.take());
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut lines = stderr.lines();
    let mut log = Vec::new();
    // The "serving" event comes after the banner: the server got past it.
    let url = loop {
        let line = lines.next().expect("serve exited early").expect("stderr");
        log.push(line.clone());
        if let Some(rest) = line
            .split("url=")
            .nth(1)
            .filter(|_| line.contains("serving"))
        {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        }
    };
    assert!(url.starts_with("ws://127.0.0.1:"), "{url}");
    // Still serving: a client works, and its session is logged inside
    // spans: connection{peer}:session{id}, and the call (at -v, debug)
    // inside domain{root}:call{request_id, method, ...}.
    cli(&["call", &url, "cartpole", "reset"]).ok();
    let (mut opened, mut called) = (false, false);
    for line in lines.by_ref().map_while(Result::ok) {
        log.push(line.clone());
        opened |= line.contains("session opened")
            && line.contains("connection{peer=127.0.0.1:")
            && line.contains("}:session{id=");
        called |= line.contains("domain{root=cartpole}:call{")
            && line.contains("request_id=")
            && line.contains("method=\"reset\"");
        // The call's events come before its reply, so before the session
        // closes.
        // (serve's own in-memory session, for the banner, has no peer.)
        if line.contains("session closed") && line.contains("connection{peer=") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(opened && called, "{}", log.join("\n"));
    assert!(
        !log.iter().any(|l| l.contains("panicked")),
        "{}",
        log.join("\n")
    );
}
