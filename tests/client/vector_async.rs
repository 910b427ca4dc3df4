//! The vector client's asynchronous paths: `recv` returns the sub-envs whose
//! results arrived without waiting for a straggler, every env exactly once
//! per `send`; in `NextStep` mode the reset of a batched resource's finished
//! sub-envs leaves right behind the step (pipelined), not after its reply.

use crate::common::faults::Gate;
use std::sync::Arc;
use std::time::Duration;
use unienv_remote::client::vector::{AutoresetMode, EnvAddress, VectorEnv, VectorStep};
use unienv_remote::client::ClientConfig;
use unienv_remote::host::{
    BatchedEnv, Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult,
};
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::{Dict, NdArray, Value};

/// One number of state: reset sets it to the seed, step adds the action
/// and terminates the episode when the action is 9; action 5 waits at the
/// gate first.
struct Held {
    gate: Arc<Gate>,
    value: f64,
}

impl Env for Held {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.value = args.seed.unwrap_or(100) as f64;
        Ok(ResetResult::new(
            (),
            NdArray::from_vec(vec![self.value]),
            Dict::new(),
        ))
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        let a = action
            .as_scalar_f64()
            .or_else(|| action.as_array().and_then(|x| x.get_f64(0)))
            .ok_or_else(|| HostError::new("action must be a number"))?;
        if a == 5.0 {
            self.gate.pass();
        }
        self.value += a;
        Ok(StepResult::new(
            NdArray::from_vec(vec![self.value]),
            self.value,
            a == 9.0,
            false,
            Dict::new(),
        ))
    }
    fn action_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![]))
    }
    fn observation_space(&self) -> Option<Space> {
        Some(Space::unbounded_f32(vec![1]))
    }
}

fn numbers(actions: &[f32]) -> Vec<Value> {
    actions
        .iter()
        .map(|&a| Value::from(NdArray::scalar(a)))
        .collect()
}

fn observations(s: &VectorStep) -> Vec<f64> {
    s.observation
        .as_array()
        .map(NdArray::to_f64_vec)
        .expect("stacked observations")
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not return"))
}

/// A server of `n` held envs `h0`, `h1`, ... sharing `gate`, and its
/// listener (listening while it is kept).
async fn held_server(gate: &Arc<Gate>, n: usize) -> (Server, Listener) {
    let mut builder = Server::builder(ServerConfig::default());
    for i in 0..n {
        let env = Held {
            gate: gate.clone(),
            value: 0.0,
        };
        builder
            .register_env(&format!("h{i}"), env)
            .expect("register");
    }
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    (server, listener)
}

/// Env 0 is held at the gate: `recv(3)` returns the other three (it would
/// never return if it waited for env 0), then env 0 once the gate opens;
/// each env once per send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recv_does_not_wait_for_a_straggler() {
    let gate = Gate::new();
    let (server, listener) = held_server(&gate, 4).await;
    let addresses: Vec<EnvAddress> = (0..4)
        .map(|i| EnvAddress::new(listener.url(), format!("h{i}")))
        .collect();
    let mut envs = VectorEnv::connect(&addresses, ClientConfig::default(), AutoresetMode::Disabled)
        .await
        .expect("connect");
    envs.reset(VectorEnv::seeded(Some(0), 4))
        .await
        .expect("reset");
    envs.send(numbers(&[5.0, 1.0, 1.0, 1.0]), &[0, 1, 2, 3])
        .expect("send");
    let first = within("recv(3) with env 0 held", envs.recv(3))
        .await
        .expect("recv");
    let mut ids = first.env_id.clone();
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3]);
    for (pos, &i) in first.env_id.iter().enumerate() {
        assert_eq!(observations(&first)[pos], i as f64 + 1.0, "env {i}");
    }
    // recv(3) returns when the other three replied, which may be before env
    // 0's step has reached the gate on its server: wait for it (bounded).
    gate.wait_reached(1).await;
    assert_eq!(gate.reached(), 1);
    // The three go again while env 0 is still held.
    envs.send(numbers(&[2.0, 2.0, 2.0]), &first.env_id)
        .expect("send again");
    let second = within("recv(3) again", envs.recv(3)).await.expect("recv");
    let mut ids = second.env_id.clone();
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3]);
    gate.open();
    let last = within("recv of env 0", envs.recv(1)).await.expect("recv");
    assert_eq!(last.env_id, vec![0]);
    assert_eq!(observations(&last), vec![5.0]);
    envs.close().await;
    server.shutdown().await;
}

/// A batched resource of 3 whose sub-env 1 ended: in the next step (sub-env
/// 0 held at the gate inside the batched step) the client has already sent
/// the masked reset as well: two requests before the step's reply. The
/// results are Gymnasium's `NEXT_STEP`: sub-env 1 reports its reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_step_reset_of_a_batch_is_pipelined() {
    let gate = Gate::new();
    let held = |_| Held {
        gate: gate.clone(),
        value: 0.0,
    };
    let batch = BatchedEnv::new((0..3).map(held).collect()).expect("a batch");
    let mut builder = Server::builder(ServerConfig::default());
    builder.register_env("batch", batch).expect("register");
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    let mut envs = VectorEnv::connect(
        &[EnvAddress::new(listener.url(), "batch")],
        ClientConfig::default(),
        AutoresetMode::NextStep,
    )
    .await
    .expect("connect");
    envs.reset(VectorEnv::seeded(Some(10), 3))
        .await
        .expect("reset");
    let ended = envs.step(numbers(&[1.0, 9.0, 1.0])).await.expect("step");
    assert_eq!(ended.terminated, vec![false, true, false]);
    assert_eq!(observations(&ended), vec![11.0, 20.0, 13.0]);
    let client = envs.envs()[0].client().clone();
    let before = client.requests_sent();
    envs.step_async(numbers(&[5.0, 1.0, 1.0])).expect("send");
    within("the batched step at the gate", gate.wait_reached(1)).await;
    assert_eq!(
        client.requests_sent() - before,
        2,
        "the step and the masked reset, before the step's reply"
    );
    gate.open();
    let next = within("step_wait", envs.step_wait())
        .await
        .expect("step_wait");
    assert!(next.errors.iter().all(Option::is_none), "{:?}", next.errors);
    assert_eq!(next.autoreset, vec![false, true, false]);
    // Sub-env 1 was reset without a seed (Held resets to 100).
    assert_eq!(observations(&next), vec![16.0, 100.0, 14.0]);
    assert_eq!(next.reward, vec![16.0, 0.0, 14.0]);
    assert_eq!(client.requests_sent() - before, 2);
    envs.close().await;
    server.shutdown().await;
}

/// Four held envs on one connection, env 0 stuck at the gate. What its step
/// comes to, how the others on the connection learn of it, and the
/// connection's state.
async fn stuck_step(config: ClientConfig, close_early: bool) -> (VectorStep, bool, Option<String>) {
    let gate = Gate::new();
    let (server, listener) = held_server(&gate, 4).await;
    let client = unienv_remote::client::Client::connect(&listener.url(), config)
        .await
        .expect("connect");
    let mut proxies = Vec::new();
    for i in 0..4 {
        proxies.push(client.env(&format!("h{i}")).await.expect("an env"));
    }
    let mut envs = VectorEnv::from_envs(proxies, AutoresetMode::Disabled).expect("a vector env");
    envs.reset(VectorEnv::seeded(Some(0), 4))
        .await
        .expect("reset");
    envs.send(numbers(&[5.0, 1.0, 1.0, 1.0]), &[0, 1, 2, 3])
        .expect("send");
    let others = within("the others' steps", envs.recv(3))
        .await
        .expect("recv");
    assert!(
        others.errors.iter().all(Option::is_none),
        "{:?}",
        others.errors
    );
    within("env 0 at the gate", gate.wait_reached(1)).await;
    let (stuck, reason) = if close_early {
        envs.close().await;
        let after = client.env("h1").await.expect("a proxy").render().await;
        (others, after.err().map(|e| e.to_string()))
    } else {
        let stuck = within("env 0's timeout", envs.recv(1)).await.expect("recv");
        let after = client.env("h1").await.expect("a proxy").render().await;
        envs.close().await;
        (stuck, after.err().map(|e| e.to_string()))
    };
    let closed = client.is_closed();
    gate.open();
    server.shutdown().await;
    (stuck, closed, reason)
}

/// A single env's step that is never answered times out as any call does
/// (the connection's deadline watch times it, not a timer of its own): an
/// uncertain timeout for the env, the connection closed because of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_single_env_step_times_out_as_a_call_does() {
    let timeout = Duration::from_millis(300);
    let config = ClientConfig::default().with_timeout(Some(timeout));
    let (stuck, closed, later) = stuck_step(config, false).await;
    assert_eq!(stuck.env_id, vec![0]);
    let error = stuck.errors[0].as_ref().expect("env 0 failed");
    assert!(error.is_uncertain(), "{error}");
    match error.client_error() {
        Some(unienv_remote::client::ClientError::Uncertain(inner)) => assert!(
            matches!(**inner, unienv_remote::client::ClientError::Timeout(d) if d == timeout),
            "{inner}"
        ),
        other => panic!("an uncertain timeout, not {other:?}"),
    }
    assert!(closed, "the connection closed");
    let later = later.expect("a later call fails");
    assert!(later.contains("timed out"), "{later}");
}

/// Closing a vector env whose single env's step is unanswered abandons the
/// step: its outcome is unknown, so the connection closes, as when a
/// request's future is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_vector_env_abandons_an_unanswered_step() {
    let (_, closed, later) = stuck_step(ClientConfig::default(), true).await;
    assert!(closed, "the connection closed");
    let later = later.expect("a later call fails");
    assert!(later.contains("cancel"), "{later}");
}
