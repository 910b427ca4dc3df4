//! The client commands of the built binary (`discover`, `describe`, `call`,
//! `watch`, `bench`) against our server in this process (the built-in
//! simulators and the fixture registry) and against the Python reference
//! server hosting the same fixture registry.

use crate::common;
use crate::support;

use std::time::{Duration, Instant};
use support::{field, run, Ours, Run, Streaming};
use unienv_remote::client::{blocking, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::ServerConfig;
use unienv_remote::{fixtures, sims, NdArray, Value};

/// Runs `unienv-remote COMMAND URL REST… --timeout 10`.
fn cli(command: &str, url: &str, rest: &[&str]) -> Run {
    let mut args = vec![command, url];
    args.extend_from_slice(rest);
    args.extend_from_slice(&["--timeout", "10"]);
    run(&args)
}

/// The rows of a `discover` table (header and title dropped), as
/// whitespace-separated columns.
fn table_rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .skip(2)
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn discover_describe_and_call_the_builtin_simulators() {
    let ours = Ours::start(sims::register, ServerConfig::default());
    let url = ours.url.as_str();

    let out = cli("discover", url, &[]).ok().to_string();
    assert!(out.starts_with("unienv-remote "), "{out}");
    assert!(out.contains("9 resources"), "{out}");
    let rows = table_rows(&out);
    let ids: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(
        ids,
        [
            "cartpole",
            "pointmass",
            "pointmass/world",
            "pointmass/node",
            "pointmass/node/body",
            "pointmass/node/camera",
            "gripper",
            "gripper/left",
            "gripper/right"
        ]
    );
    // id, kind, domain, revision, sequence, spaces.
    assert_eq!(rows[0][..5], ["cartpole", "env", "cartpole", "0", "0"]);
    assert_eq!(
        rows[5][..3],
        ["pointmass/node/camera", "node", "pointmass/world"]
    );
    let cartpole_row = out.lines().nth(2).expect("cartpole row");
    assert!(
        cartpole_row.ends_with("action Box(int64, []); observation Box(float32, [4])"),
        "{cartpole_row}"
    );

    let out = cli("describe", url, &["cartpole"]).ok().to_string();
    assert_eq!(field(&out, "kind"), Some("env"));
    assert_eq!(
        field(&out, "action_space"),
        Some("Box(int64, []) in [0, 1]")
    );
    assert!(field(&out, "observation_space")
        .is_some_and(|s| s.starts_with("Box(float32, [4]) low [-4.8, -inf,")));
    assert_eq!(field(&out, "context_space"), Some("None"));
    assert_eq!(field(&out, "operations"), Some("render, reset, step"));
    let out = cli("describe", url, &["pointmass/node/camera"])
        .ok()
        .to_string();
    assert_eq!(
        field(&out, "observation_space"),
        Some("Box(uint8, [64, 64, 3]) in [0, 255]")
    );
    assert_eq!(field(&out, "world_id"), Some("pointmass/world"));
    // --json: the tagged value tree, valid JSON.
    let out = cli("describe", url, &["gripper", "--json"])
        .ok()
        .to_string();
    let json: serde_json::Value = serde_json::from_str(&out).expect("describe --json is JSON");
    assert_eq!(json["t"], "dict");
    let entries = json["v"].as_array().expect("entries");
    assert_eq!(entries[0], serde_json::json!(["id", "gripper"]));
    assert!(entries.iter().any(|e| e[0] == "action_space"
        && e[1]["t"] == "dict"
        && e[1].to_string().contains("BoxSpace")));

    // Env calls run directly; the same seed gives the same state.
    let first = cli(
        "call",
        url,
        &["cartpole", "reset", "--kwargs", r#"{"seed": 1}"#],
    );
    let first = first.ok().to_string();
    assert!(first.starts_with("(\n  None,\n  float32 (4,) ["), "{first}");
    let again = cli(
        "call",
        url,
        &["cartpole", "reset", "--kwargs", r#"{"seed": 1}"#],
    );
    assert_eq!(again.ok(), first);
    let other = cli(
        "call",
        url,
        &["cartpole", "reset", "--kwargs", r#"{"seed": 2}"#],
    );
    assert_ne!(other.ok(), first);
    let step = cli("call", url, &["cartpole", "step", "--args", "[1]"]);
    let step = step.ok();
    assert!(step.contains("float32 (4,) [") && step.contains("  1.0,\n  False,\n  False,"));
    // A JSON array for cartpole's action becomes int64 (its action space):
    // the simulator refuses float arrays, so this passing shows the dtype.
    cli("call", url, &["cartpole", "step", "--args", "[[0]]"]).ok();
    // Forcing float32: cartpole refuses it before changing anything, a
    // certain invalid_request; the env stays usable (no fault).
    let forced = cli(
        "call",
        url,
        &[
            "cartpole",
            "step",
            "--args",
            r#"[{"$array": [1], "dtype": "float32"}]"#,
        ],
    );
    let stderr = forced.fails_with("invalid_request");
    assert!(stderr.contains("dtype float32"), "{stderr}");
    assert!(!stderr.contains("(outcome uncertain)"), "{stderr}");
    cli("call", url, &["cartpole", "step", "--args", "[1]"]).ok();

    // Node mutations run inside an operation of the matching kind.
    let reset = cli(
        "call",
        url,
        &["gripper", "reset", "--kwargs", r#"{"seed": 3}"#],
    );
    assert_eq!(reset.ok().trim(), "None");
    assert!(
        reset.stderr.contains("(in a reset operation "),
        "{}",
        reset.stderr
    );
    let action = cli(
        "call",
        url,
        &["gripper/left", "set_next_action", "--args", "[[0.01]]"],
    );
    assert_eq!(action.ok().trim(), "None");
    assert!(
        action.stderr.contains("(in a step operation "),
        "{}",
        action.stderr
    );
    // Both operations completed: one reset (revision 1), two boundaries.
    let out = cli("describe", url, &["gripper/right"]).ok().to_string();
    assert_eq!(field(&out, "revision"), Some("1"));
    assert_eq!(field(&out, "sequence"), Some("2"));
    // Reads run without an operation.
    let obs = cli("call", url, &["gripper", "get_observation"]);
    assert!(obs.ok().starts_with("float32 (1,) ["), "{}", obs.stdout);
    assert!(!obs.stderr.contains("operation"), "{}", obs.stderr);

    // A reset of a child alone cannot complete its operation: the
    // operation is aborted, which faults the world's domain.
    let child = cli("call", url, &["pointmass/node/body", "reset"]);
    let stderr = child.fails_with("invalid_operation");
    assert!(
        stderr.contains("hint: a reset operation completes only"),
        "{stderr}"
    );
    cli(
        "call",
        url,
        &["pointmass", "step", "--args", "[[0.5, -0.5]]"],
    )
    .fails_with("faulted");
    cli(
        "call",
        url,
        &["pointmass/world", "reset", "--kwargs", r#"{"seed": 4}"#],
    )
    .ok();
    let step = cli(
        "call",
        url,
        &["pointmass", "step", "--args", "[[0.5, -0.5]]"],
    );
    assert!(step.ok().contains("uint8 (64, 64, 3)"), "{}", step.stdout);

    // Errors: the protocol's code and message, a non-zero exit.
    let unknown = cli("call", url, &["nope", "reset"]);
    assert!(unknown
        .fails_with("not_found")
        .contains("Unknown resource ID"));
    cli("describe", url, &["nope"]).fails_with("not_found");
    cli("call", url, &["cartpole", "frobnicate"]).fails_with("unsupported_operation");
    let bad = cli("call", url, &["cartpole", "step", "--args", "[1,"]);
    assert!(!bad.status.success());
    assert!(
        bad.stderr.contains("--args is not valid JSON"),
        "{}",
        bad.stderr
    );
    let ragged = cli(
        "call",
        url,
        &["cartpole", "step", "--args", "[[[1], [1, 2]]]"],
    );
    assert!(ragged.fails_with("invalid_use").contains("ragged"));
    // Nothing listens here once the server is gone.
    let gone = {
        let mut ours = ours;
        let url = ours.url.clone();
        ours.stop();
        cli("discover", &url, &[])
    };
    gone.fails_with("connection_error");
}

#[test]
fn a_wrong_token_is_refused_over_http() {
    let config = ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    };
    let ours = Ours::start(sims::register, config);
    for rest in [&[][..], &["--token", "wrong"][..]] {
        let refused = cli("discover", &ours.url, rest);
        let stderr = refused.fails_with("connection_error");
        assert!(stderr.contains("HTTP 401"), "{stderr}");
    }
    let granted = cli("describe", &ours.url, &["cartpole", "--token", "s3cret"]);
    assert_eq!(field(granted.ok(), "id"), Some("cartpole"));
}

/// Steps `env` with `action` until `watch` has printed `count` lines (or the
/// deadline passes), returning them.
fn step_until_lines(
    watch: &mut Streaming,
    env: &blocking::EnvProxy,
    action: &Value,
    count: usize,
) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines = Vec::new();
    while lines.len() < count {
        assert!(
            Instant::now() < deadline,
            "watch printed only {lines:?} within 30 s"
        );
        env.step(action.clone()).expect("step");
        while let Ok(line) = watch.lines.try_recv() {
            lines.push(line);
        }
        if watch.exited() && lines.len() < count {
            lines.extend(watch.lines.try_iter());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    lines
}

/// Checks a snapshot line: `#SEQ KIND RATE/s  field=…`.
fn check_snapshot_line(line: &str, fields: &[&str]) {
    let mut words = line.split_whitespace();
    let sequence = words.next().and_then(|w| w.strip_prefix('#'));
    assert!(sequence.is_some_and(|s| s.parse::<u64>().is_ok()), "{line}");
    assert!(matches!(words.next(), Some("step" | "reset")), "{line}");
    assert!(words.next().is_some_and(|r| r.ends_with("/s")), "{line}");
    for f in fields {
        assert!(line.contains(&format!("  {f}=")), "{f} missing: {line}");
    }
}

#[test]
fn watch_and_bench_cartpole() {
    let mut ours = Ours::start(sims::register, ServerConfig::default());
    let url = ours.url.clone();

    let bench = cli("bench", &url, &["cartpole", "--seconds", "1"]);
    let out = bench.ok();
    let first = out.lines().next().unwrap_or_default();
    let steps: u64 = first
        .split_whitespace()
        .nth(4)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no step count in {first:?}"));
    assert!(steps > 10, "{out}");
    for stat in ["median", "p99", "min", "mean"] {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(stat))
            .unwrap_or_else(|| panic!("no {stat} in {out}"));
        assert!(line.ends_with(" µs"), "{line}");
    }
    let rate = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("steps/s"))
        .and_then(|r| r.trim().parse::<f64>().ok())
        .expect("steps/s");
    assert!(rate > 10.0, "{out}");
    assert!(
        bench.stderr.contains("steps/s"),
        "progress: {}",
        bench.stderr
    );

    // Another client steps while watch prints, and exits after --count.
    let client = blocking::Client::connect(&url, ClientConfig::default()).expect("connect");
    let env = client.env("cartpole").expect("cartpole");
    env.reset(ResetArgs::with_seed(0)).expect("reset");
    let mut watch = Streaming::spawn(&[
        "watch",
        &url,
        "cartpole",
        "--fields",
        "observation,reward",
        "--count",
        "3",
    ]);
    let action = Value::Array(NdArray::scalar(1i64));
    let lines = step_until_lines(&mut watch, &env, &action, 3);
    assert_eq!(lines.len(), 3, "{lines:?}");
    for line in &lines {
        check_snapshot_line(line, &["observation", "reward"]);
        assert!(line.contains("observation=float32 (4,) ["), "{line}");
        assert!(!line.contains("terminated="), "{line}");
    }
    let (status, rest, stderr) = watch.wait(Duration::from_secs(30));
    assert!(status.success(), "{status:?} {stderr}");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(stderr.contains("watching cartpole (env)"), "{stderr}");

    // Ctrl-C ends it cleanly.
    let mut watch = Streaming::spawn(&["watch", &url, "cartpole"]);
    let lines = step_until_lines(&mut watch, &env, &action, 1);
    check_snapshot_line(&lines[0], &["observation", "reward", "terminated"]);
    let status = std::process::Command::new("kill")
        .args(["-INT", &watch.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let (status, _, stderr) = watch.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.trim_end().ends_with("interrupted"), "{stderr}");

    // Without --count, watch ends when the subscription does (here: the
    // server shuts down), saying why.
    let mut watch = Streaming::spawn(&["watch", &url, "pointmass/node/camera"]);
    let pointmass = client.env("pointmass").expect("pointmass");
    pointmass.reset(ResetArgs::with_seed(0)).expect("reset");
    let push = Value::Array(NdArray::from_vec(vec![0.5f32, 0.5]));
    let lines = step_until_lines(&mut watch, &pointmass, &push, 1);
    check_snapshot_line(&lines[0], &["observation", "info"]);
    assert!(
        lines[0].contains("observation=uint8 (64, 64, 3)"),
        "{}",
        lines[0]
    );
    client.close();
    ours.stop();
    let (status, _, stderr) = watch.wait(Duration::from_secs(30));
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("the subscription ended: connection_closed"),
        "{stderr}"
    );
}

/// What the fixture scenario printed, to compare between the servers.
fn fixture_scenario(url: &str) -> Vec<String> {
    let mut transcript = Vec::new();
    let mut log = |what: &str, out: &str| transcript.push(format!("{what}:\n{out}"));

    let out = cli("discover", url, &[]).ok().to_string();
    assert!(out.contains("24 resources"), "{out}");
    let rows = table_rows(&out);
    for id in [
        "counter3",
        "composed/node/a",
        "devices/arm%2Fgrip",
        "bench_batch64",
    ] {
        assert!(rows.iter().any(|r| r[0] == id), "{id} missing:\n{out}");
    }
    log(
        "discover",
        &out.lines().skip(1).collect::<Vec<_>>().join("\n"),
    );

    let out = cli("describe", url, &["counter3"]).ok().to_string();
    assert_eq!(
        field(&out, "action_space"),
        Some("Box(float32, [3, 2]) in [-inf, inf]")
    );
    assert_eq!(field(&out, "batch_size"), Some("3"));
    log("describe counter3", &out);

    let out = cli(
        "call",
        url,
        &["counter", "reset", "--kwargs", r#"{"seed": 1}"#],
    );
    log("reset counter", out.ok());
    let out = cli("call", url, &["counter", "step", "--args", "[[1, 2]]"]);
    assert!(out.ok().contains("\n  5.0,\n"), "{}", out.stdout);
    log("step counter", out.ok());
    let action = "[[[1, 0], [0, 1], [1, 1]]]";
    let out = cli("call", url, &["counter3", "step", "--args", action]);
    assert!(
        out.ok().contains("float32 (3,) [1.0, 1.0, 2.0]"),
        "{}",
        out.stdout
    );
    log("step counter3", out.ok());

    // Detached node: reset and set_next_action in operations; reads direct.
    let out = cli("call", url, &["arm", "reset", "--kwargs", r#"{"seed": 2}"#]);
    assert!(
        out.stderr.contains("(in a reset operation "),
        "{}",
        out.stderr
    );
    log("reset arm", out.ok());
    let out = cli("call", url, &["arm", "get_observation"]);
    assert_eq!(out.ok().trim(), "float32 (1,) [2.0]");
    let out = cli(
        "call",
        url,
        &["arm", "set_next_action", "--args", "[[1.5]]"],
    );
    assert!(
        out.stderr.contains("(in a step operation "),
        "{}",
        out.stderr
    );
    log("set_next_action arm", out.ok());
    let out = cli("describe", url, &["arm"]).ok().to_string();
    assert_eq!(field(&out, "revision"), Some("1"));
    assert_eq!(field(&out, "sequence"), Some("2"));

    // Errors and faults.
    let out = cli("call", url, &["nope", "reset"]);
    log("unknown", out.fails_with("not_found"));
    let out = cli("call", url, &["arm", "frobnicate"]);
    log("unsupported", out.fails_with("unsupported_operation"));
    let out = cli("call", url, &["composed/node/a", "reset"]);
    log("child reset", out.fails_with("invalid_operation"));
    let composed_action = r#"[{"a": [0.5], "b": [0]}]"#;
    let out = cli(
        "call",
        url,
        &["composed", "step", "--args", composed_action],
    );
    log("faulted step", out.fails_with("faulted"));
    let out = cli(
        "call",
        url,
        &["composed/world", "reset", "--kwargs", r#"{"seed": 3}"#],
    );
    log("world reset", out.ok());
    let out = cli(
        "call",
        url,
        &["composed", "step", "--args", composed_action],
    );
    log("recovered step", out.ok());
    let out = cli("call", url, &["counter", "step", "--args", r#"["x"]"#]);
    let stderr = out.fails_with("execution_error");
    assert!(stderr.contains("(outcome uncertain)"), "{stderr}");
    let out = cli("call", url, &["counter", "step", "--args", "[[1, 1]]"]);
    log("faulted env", out.fails_with("faulted"));
    let out = cli("call", url, &["counter", "reset"]);
    log("recovered env", out.ok());

    // bench on a batched env.
    let out = cli("bench", url, &["counter3", "--seconds", "1"]);
    let stats = out.ok();
    assert!(stats.starts_with("bench counter3 on "), "{stats}");
    for stat in ["median", "p99", "min", "mean", "steps/s"] {
        assert!(stats.contains(stat), "{stats}");
    }

    // watch while a client steps.
    let client = blocking::Client::connect(url, ClientConfig::default()).expect("connect");
    let env = client.env("counter").expect("counter");
    env.reset(ResetArgs::with_seed(0)).expect("reset");
    let mut watch = Streaming::spawn(&["watch", url, "counter", "--count", "2"]);
    let action = Value::Array(NdArray::from_vec(vec![0.0f32, 0.0]));
    let lines = step_until_lines(&mut watch, &env, &action, 2);
    for line in &lines {
        check_snapshot_line(line, &["observation", "reward", "info"]);
        assert!(
            line.contains("observation={position: float32 (2,) [0.0, 0.0]}"),
            "{line}"
        );
    }
    let (status, _, stderr) = watch.wait(Duration::from_secs(30));
    assert!(status.success(), "{stderr}");
    client.close();
    transcript
}

#[test]
fn the_fixture_registry_on_both_servers() {
    let ours = Ours::start(fixtures::register, ServerConfig::default());
    let ours_transcript = fixture_scenario(&ours.url);
    let Some(python) = common::ref_python() else {
        return;
    };
    let reference = common::RefServer::start(&python, None);
    let reference_transcript = fixture_scenario(&reference.url);
    // The same outputs (error messages aside: only codes are compared for
    // errors whose messages come from different implementations).
    for (a, b) in ours_transcript.iter().zip(&reference_transcript) {
        let strip = |s: &str| -> String {
            s.lines()
                .map(|l| match l.find("error: ") {
                    Some(i) => l[i..].split(':').take(2).collect::<Vec<_>>().join(":"),
                    None => l.to_string(),
                })
                .filter(|l| !l.starts_with("(in a ") && !l.starts_with("hint: "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(a), strip(b), "ours vs the reference");
    }
    assert_eq!(ours_transcript.len(), reference_transcript.len());
}

/// Ctrl-C ends a client command waiting on a hung simulator at once, with
/// the shell's interrupted status (130, or death by SIGINT), whatever its
/// timeout.
#[cfg(unix)]
#[test]
fn ctrl_c_ends_a_call_waiting_on_a_hung_simulator() {
    use common::faults::{Gate, GatedEnv};
    use std::os::unix::process::ExitStatusExt;
    let gate = Gate::new();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let (server, listener) = runtime.block_on(async {
        let server = common::fixture_server_with(ServerConfig::default(), |b| {
            b.register_env("hung", GatedEnv::new(gate.clone()))
                .map(|_| ())
        });
        common::listen(server).await
    });
    let url = listener.url();
    let child = support::spawn(&[
        "call",
        &url,
        "hung",
        "step",
        "--args",
        "[5]",
        "--timeout",
        "600",
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while gate.reached() == 0 {
        assert!(
            Instant::now() < deadline,
            "the call never reached the simulator"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let done = support::finish(child, Duration::from_secs(5));
    assert!(
        done.status.code() == Some(130) || done.status.signal() == Some(2),
        "{:?} {}",
        done.status,
        done.stderr
    );
    gate.open();
    runtime.block_on(server.shutdown());
}

/// `call … | head` (and `discover`, `describe`): a closed pipe on standard
/// output ends the command quietly, with success, never with a panic.
#[test]
fn a_closed_pipe_on_stdout_is_not_a_panic() {
    let ours = Ours::start(fixtures::register, ServerConfig::default());
    let commands: [&[&str]; 3] = [
        &["call", &ours.url, "bench_image", "reset"],
        &["discover", &ours.url],
        &["describe", &ours.url, "bench_image"],
    ];
    for args in commands {
        // The pipe's reading end is closed before the command writes.
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_unienv-remote"))
            .args(args)
            .args(["--timeout", "10"])
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run unienv-remote");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
    }
    // `load | head -c 10`, and `bench`: the same.
    let commands: [&[&str]; 2] = [
        &["load", "--seconds", "0.2", "--controllers", "1"],
        &["bench", &ours.url, "bench_state", "--seconds", "0.2"],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_unienv-remote"))
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .expect("run unienv-remote");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
    }
}
