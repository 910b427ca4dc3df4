//! `RemoteWorldEnv`: the crate's WorldEnv composer running client-side over
//! the remote `composed` world and nodes, one operation per reset, reload and
//! step; against our server and the reference server (identical
//! transcripts), and against the server-side composition in env mode.

use crate::support;

use std::time::Duration;
use support::Target;
use unienv_remote::client::blocking::{self, RemoteWorldEnv};
use unienv_remote::client::{ClientConfig, SnapshotEvent};
use unienv_remote::host::{Env, ResetArgs, ResetResult, StepResult};
use unienv_remote::{dict, NdArray, Value};

fn connect(t: &Target) -> blocking::Client {
    blocking::Client::connect(&t.url, ClientConfig::default()).expect("connect")
}

fn action(a: f32, b: f32) -> Value {
    Value::Dict(dict! {
        "a" => NdArray::from_vec(vec![a]),
        "b" => NdArray::from_vec(vec![b]),
    })
}

fn latest(sub: &mut blocking::Subscription, sequence: u64) -> SnapshotEvent {
    loop {
        let event = sub
            .next(Some(Duration::from_secs(5)))
            .expect("an event")
            .expect("open");
        if event.sequence >= sequence {
            assert_eq!(event.sequence, sequence);
            return event;
        }
    }
}

fn results(env: &mut dyn Env, log: &mut Vec<String>) {
    let reset = env.reset(ResetArgs::with_seed(1)).expect("first reset");
    log.push(format!(
        "reset: {} {} {}",
        reset.context,
        reset.observation,
        Value::Dict(reset.info)
    ));
    for (a, b) in [(0.5, 0.25), (1.0, 0.0)] {
        let step = env.step(action(a, b)).expect("step");
        log.push(format!(
            "step: {} {} {} {} {}",
            step.observation,
            step.reward,
            step.terminated,
            step.truncated,
            Value::Dict(step.info)
        ));
    }
    let reset = env.reset(ResetArgs::with_seed(3)).expect("reset");
    log.push(format!(
        "reset: {} {}",
        reset.observation,
        Value::Dict(reset.info)
    ));
    let mut args = ResetArgs::with_seed(2);
    args.kwargs.insert("reload", true);
    let reload = env.reset(args).expect("reset with reload");
    log.push(format!("reset(reload=True): {}", reload.observation));
    log.push(format!("render: {}", env.render().expect("render")));
}

fn composer_scenario(t: &Target) -> Vec<String> {
    let mut log = Vec::new();
    let client = connect(t);
    let observer = connect(t);
    let mut world_events = observer
        .subscribe("composed/world", Some(&["dt"]))
        .expect("subscribe world");
    let mut node_events = observer
        .subscribe("composed/node/a", Some(&["observation", "reward"]))
        .expect("subscribe node");
    let world = client.world("composed/world").expect("world");
    let root = client.node("composed/node").expect("root");
    let names: Vec<&str> = root.children().iter().map(|c| c.name()).collect();
    assert_eq!(names, ["a", "b"]);
    let mut env = RemoteWorldEnv::new(world, root).expect("compose");
    assert_eq!(env.control_timestep(), Some(0.5));
    assert_eq!(env.composer().n_update_substeps(), 2);
    assert_eq!(env.composer().n_world_substeps(), 2);
    log.push(format!(
        "composed: render_fps={:?} action={:?} observation={:?}",
        env.render_fps(),
        env.action_space().map(|s| s.to_string()),
        env.observation_space().map(|s| s.to_string())
    ));

    // Each lifecycle call is one operation: observers see one boundary each.
    let reset = env.reset(ResetArgs::with_seed(1)).expect("first reset");
    log.push(format!(
        "reset: {} {}",
        reset.observation,
        Value::Dict(reset.info)
    ));
    let sequence = client
        .descriptor("composed/world")
        .expect("world")
        .sequence();
    let event = latest(&mut node_events, sequence);
    assert_eq!(
        event.kind, "reload",
        "the first reset takes the reload path"
    );
    log.push(format!(
        "node event: {} {}",
        event.kind,
        Value::Dict(event.data)
    ));
    let step = env.step(action(0.5, 0.25)).expect("step");
    assert_eq!(
        step.info.get("control_step_elapsed_time"),
        Some(&Value::Float(0.5))
    );
    log.push(format!(
        "step: {} {} {}",
        step.observation,
        step.reward,
        Value::Dict(step.info)
    ));
    let sequence = client
        .descriptor("composed/world")
        .expect("world")
        .sequence();
    let event = latest(&mut world_events, sequence);
    assert_eq!(event.kind, "step");
    log.push(format!(
        "world event: {} {}",
        event.kind,
        Value::Dict(event.data)
    ));
    let event = latest(&mut node_events, sequence);
    log.push(format!(
        "node event: {} {}",
        event.kind,
        Value::Dict(event.data)
    ));

    // The boundary cache serves the component getters afterwards.
    let a = client
        .env("composed")
        .expect("env")
        .get_node(["a"])
        .expect("get_node")
        .expect("a");
    let sent = client.requests_sent();
    let observation = a.get_observation().expect("observation");
    assert_eq!(
        client.requests_sent(),
        sent,
        "cached by the step's completion"
    );
    log.push(format!("cached a: {observation}"));

    let reset = env.reset(ResetArgs::with_seed(3)).expect("reset");
    log.push(format!("reset: {}", reset.observation));
    let sequence = client
        .descriptor("composed/world")
        .expect("world")
        .sequence();
    assert_eq!(latest(&mut node_events, sequence).kind, "reset");

    // Another client cannot drive the world meanwhile.
    let other = connect(t);
    let error = other
        .acquire("composed/world", None)
        .expect_err("controlled");
    log.push(format!("other client: {}", error.code()));
    env.close().expect("close");
    let error = env.step(action(0.0, 0.0)).expect_err("closed composer");
    log.push(format!("after close: {}", error.message()));
    other.acquire("composed/world", None).expect("released");
    other.close();
    client.close();
    observer.close();
    log
}

#[test]
fn remote_world_env_matches_the_reference() {
    support::same_transcript_on_both_servers(composer_scenario);
}

#[test]
fn client_side_composition_matches_env_mode() {
    // Two fresh servers: the same calls through the server's composition
    // (env mode) and through the client-side composition (components mode).
    let (_runtime, env_mode) = support::blocking_targets();
    let (_runtime2, component_mode) = support::blocking_targets();
    for (hosted, remote) in env_mode.iter().zip(&component_mode) {
        let client = connect(hosted);
        let mut server_side = ServerSide(client.env("composed").expect("env"));
        let mut expected = Vec::new();
        results(&mut server_side, &mut expected);
        client.close();

        let client = connect(remote);
        let world = client.world("composed/world").expect("world");
        let root = client.node("composed/node").expect("root");
        let mut env = RemoteWorldEnv::new(world, root).expect("compose");
        let mut actual = Vec::new();
        results(&mut env, &mut actual);
        assert_eq!(actual, expected, "{:?}", hosted.kind);
        client.close();
    }
}

/// The env-mode proxy behind the `Env` trait, for [`results`].
struct ServerSide(blocking::EnvProxy);

impl Env for ServerSide {
    fn reset(&mut self, args: ResetArgs) -> unienv_remote::host::HostResult<ResetResult> {
        self.0.reset(args).map_err(|e| e.to_string().into())
    }
    fn step(&mut self, action: Value) -> unienv_remote::host::HostResult<StepResult> {
        self.0.step(action).map_err(|e| e.to_string().into())
    }
    fn render(&mut self) -> unienv_remote::host::HostResult<Value> {
        self.0.render().map_err(|e| e.to_string().into())
    }
    fn action_space(&self) -> Option<unienv_remote::host::Space> {
        self.0.action_space().map(|s| (*s).clone())
    }
    fn observation_space(&self) -> Option<unienv_remote::host::Space> {
        self.0.observation_space().map(|s| (*s).clone())
    }
}

#[test]
fn composition_is_checked() {
    let (_runtime, targets) = support::blocking_targets();
    for t in &targets {
        let client = connect(t);
        let world = client.world("composed/world").expect("world");
        let arm = client.node("arm").expect("arm");
        let error = RemoteWorldEnv::new(world.clone(), arm).expect_err("detached");
        assert_eq!(error.code(), "invalid_use");
        let foreign = client.node("lazy_composed/node").expect("another world");
        let error = RemoteWorldEnv::new(world.clone(), foreign).expect_err("other world");
        assert_eq!(error.code(), "invalid_use");
        let other = connect(t);
        let theirs = other.node("composed/node/a").expect("node");
        let error = RemoteWorldEnv::new(world.clone(), theirs).expect_err("other client");
        assert_eq!(error.code(), "invalid_use");
        let error =
            RemoteWorldEnv::from_nodes(world.clone(), Vec::new(), "auto").expect_err("no nodes");
        assert_eq!(error.code(), "invalid_use");

        // Several nodes of the world, combined client-side.
        let a = client.node("composed/node/a").expect("a");
        let b = client.node("composed/node/b").expect("b");
        let mut env = RemoteWorldEnv::from_nodes(world, vec![a, b], "auto").expect("combined");
        let reset = env.reset(ResetArgs::with_seed(4)).expect("reset");
        let observation = reset.observation.as_dict().expect("a dict").clone();
        assert_eq!(observation.keys().collect::<Vec<_>>(), ["a", "b"]);
        let step = env.step(action(0.0, 0.0)).expect("step");
        assert_eq!(
            step.reward,
            Value::Float(16.0),
            "tick 8, summed over a and b"
        );

        // Nested keys through the env proxy, both APIs.
        let lazy = client.env("lazy_composed").expect("env");
        let node = lazy.get_node(["a/b"]).expect("get_node").expect("a/b");
        assert_eq!(node.id(), "lazy_composed/node/a%2Fb");
        assert!(lazy.get_node(["a"]).expect("get_node").is_none());
        other.close();
        client.close();
    }
}
