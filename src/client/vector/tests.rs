use super::*;
use crate::codec::{Dict, NdArray, Value};
use crate::host::ResetArgs;

#[test]
fn stack_and_unstack() {
    let a = Value::from(NdArray::from_vec(vec![1.0f32, 2.0]));
    let b = Value::from(NdArray::from_vec(vec![3.0f32, 4.0]));
    let s = stack(&[&a, &b]);
    let arr = s
        .as_array()
        .cloned()
        .unwrap_or_else(|| NdArray::from_vec(vec![0u8]));
    assert_eq!(arr.shape(), &[2, 2]);
    assert_eq!(arr.to_f64_vec(), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(unstack(&s, 2), Ok(vec![a.clone(), b.clone()]));
    let d = Value::Dict(Dict::new().with("x", a.clone()).with("r", 1.5));
    let e = Value::Dict(Dict::new().with("x", b.clone()).with("r", Value::Int(2)));
    let s = stack(&[&d, &e]);
    assert_eq!(
        s.get("r")
            .and_then(Value::as_array)
            .map(NdArray::to_f64_vec),
        Some(vec![1.5, 2.0])
    );
    // Mismatched shapes are gathered, not stacked.
    let c = Value::from(NdArray::from_vec(vec![1.0f32]));
    assert_eq!(stack(&[&a, &c]), Value::List(vec![a.clone(), c]));
    // Missing entries are zeros.
    let s = stack_filled(&[None, Some(b.clone())]);
    assert_eq!(
        s.as_array().map(NdArray::to_f64_vec),
        Some(vec![0.0, 0.0, 3.0, 4.0])
    );
    assert_eq!(stack_filled(&[None, None]), Value::Null);
    assert!(unstack(&a, 3).is_err());
}

#[test]
fn autoreset_names() {
    for m in [
        AutoresetMode::NextStep,
        AutoresetMode::SameStep,
        AutoresetMode::Disabled,
    ] {
        assert_eq!(AutoresetMode::parse(m.as_str()), Some(m));
    }
    assert_eq!(
        AutoresetMode::parse("NEXT_STEP"),
        Some(AutoresetMode::NextStep)
    );
    assert_eq!(AutoresetMode::parse("sometimes"), None);
}

/// EnvPool's `send`/`recv` over 6 counters: each `recv(2)` returns envs in
/// flight, each exactly once per send, with the results their actions give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recv_returns_every_env_once_per_send() {
    use crate::client::ClientConfig;
    use crate::fixtures::{CounterEnv, CounterVariant};
    use crate::server::{Server, ServerConfig};

    let n = 6;
    let mut builder = Server::builder(ServerConfig::default());
    for i in 0..n {
        builder
            .register_env(
                &format!("c{i}"),
                CounterEnv::new(None, CounterVariant::Plain),
            )
            .expect("register");
    }
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    let addresses: Vec<EnvAddress> = (0..n)
        .map(|i| EnvAddress::new(listener.url(), format!("c{i}")))
        .collect();
    let mut envs = VectorEnv::connect(&addresses, ClientConfig::default(), AutoresetMode::Disabled)
        .await
        .expect("connect");
    assert!(envs.recv(2).await.is_err(), "nothing is in flight yet");
    envs.reset(VectorEnv::seeded(Some(0), n))
        .await
        .expect("reset");
    // Each counter's value: its seed (= its index), plus what it was sent.
    let mut value: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut in_flight = vec![true; n];
    let ids: Vec<usize> = (0..n).collect();
    let step = |i: usize| Value::from(NdArray::from_vec(vec![0.5f32 + i as f32, 0.0]));
    envs.send(ids.iter().map(|&i| step(i)).collect(), &ids)
        .expect("send");
    let mut received = vec![0; n];
    for _ in 0..30 {
        let got = envs.recv(2).await.expect("recv");
        assert!(got.env_id.len() >= 2);
        for (pos, &i) in got.env_id.iter().enumerate() {
            assert!(in_flight[i], "env {i} returned twice for one send");
            in_flight[i] = false;
            received[i] += 1;
            value[i] += 0.5 + i as f64;
            let obs = got.observation.get("position").and_then(Value::as_array);
            let row = obs.map(|a| a.to_f64_vec()[pos * 2]);
            assert_eq!(row, Some(value[i]), "env {i}");
            assert!(got.errors[pos].is_none());
        }
        let again = got.env_id.clone();
        envs.send(again.iter().map(|&i| step(i)).collect(), &again)
            .expect("send again");
        again.iter().for_each(|&i| in_flight[i] = true);
    }
    assert!(received.iter().sum::<usize>() >= 60);
    // An env in flight cannot be sent again.
    assert!(matches!(
        envs.send(vec![step(0)], &[0]),
        Err(VectorError::InvalidUse(_))
    ));
    envs.close().await;
    server.shutdown().await;
}

/// A batched resource (`counter3`, batch_size 3) and an unbatched one
/// (`counter`) make 4 sub-envs; one request per resource per step, the
/// batched one's rows split in order; a reset by mask reaches only the
/// masked rows of the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_and_single_resources_mix() {
    use crate::client::ClientConfig;
    use crate::server::{Server, ServerConfig};

    let mut builder = Server::builder(ServerConfig::default());
    crate::fixtures::register(&mut builder).expect("fixtures");
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    let addresses = vec![
        EnvAddress::new(listener.url(), "counter3"),
        EnvAddress::new(listener.url(), "counter"),
    ];
    let mut envs = VectorEnv::connect(&addresses, ClientConfig::default(), AutoresetMode::Disabled)
        .await
        .expect("batched and single counters mix");
    assert_eq!(envs.num_envs(), 4);
    assert_eq!(envs.resource_ranges(), vec![(0, 3), (3, 1)]);
    assert_eq!(
        envs.single_observation_space(),
        envs.envs()[1].observation_space()
    );
    let positions = |v: &Value| {
        v.get("position")
            .and_then(Value::as_array)
            .map(NdArray::to_f64_vec)
            .unwrap_or_default()
    };
    let reset = envs
        .reset(vec![ResetArgs::default(); 4])
        .await
        .expect("reset");
    assert_eq!(positions(&reset.observation), vec![0.0; 8]);
    let actions: Vec<Value> = (0..4)
        .map(|i| Value::from(NdArray::from_vec(vec![i as f32, 1.0])))
        .collect();
    let step = envs.step(actions.clone()).await.expect("step");
    assert!(step.errors.iter().all(Option::is_none), "{:?}", step.errors);
    assert_eq!(
        positions(&step.observation),
        vec![0.0, 1.0, 1.0, 1.0, 2.0, 1.0, 3.0, 1.0]
    );
    assert_eq!(step.reward, vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(step.env_id, vec![0, 1, 2, 3]);
    // Reset rows 1 and 3 (of the batch, and the single env): the others keep
    // their observation.
    let mask = [false, true, false, true];
    let (reset, _) = envs
        .reset_masked(vec![ResetArgs::default(); 4], Some(&mask))
        .await
        .expect("masked reset");
    assert!(
        reset.errors.iter().all(Option::is_none),
        "{:?}",
        reset.errors
    );
    assert_eq!(
        positions(&reset.observation),
        vec![0.0, 1.0, 0.0, 0.0, 2.0, 1.0, 0.0, 0.0]
    );
    // Half a batched resource cannot be sent alone.
    assert!(matches!(
        envs.send(vec![actions[0].clone()], &[0]),
        Err(VectorError::InvalidUse(_))
    ));
    envs.close().await;
    server.shutdown().await;
}

/// A refused action (the wrong shape: a certain `invalid_request`, the env
/// not run) is
/// reported for every sub-env of its resource but fails none: the next step
/// goes on from where they were, as if the refused one never happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_action_fails_no_env() {
    use crate::client::ClientConfig;
    use crate::protocol::ErrorCode;
    use crate::server::{Server, ServerConfig};

    let mut builder = Server::builder(ServerConfig {
        validate_actions: true,
        ..ServerConfig::default()
    });
    crate::fixtures::register(&mut builder).expect("fixtures");
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    let addresses = vec![
        EnvAddress::new(listener.url(), "counter3"),
        EnvAddress::new(listener.url(), "counter"),
    ];
    let mut envs = VectorEnv::connect(&addresses, ClientConfig::default(), AutoresetMode::Disabled)
        .await
        .expect("connect");
    let positions = |v: &Value| {
        v.get("position")
            .and_then(Value::as_array)
            .map(NdArray::to_f64_vec)
            .unwrap_or_default()
    };
    envs.reset(vec![ResetArgs::default(); 4])
        .await
        .expect("reset");
    let actions = |x: f32| -> Vec<Value> {
        (0..4)
            .map(|i| Value::from(NdArray::from_vec(vec![i as f32 * x, 1.0])))
            .collect()
    };
    envs.step(actions(1.0)).await.expect("step");
    let wide: Vec<Value> = (0..4)
        .map(|_| Value::from(NdArray::from_vec(vec![1.0f32; 3])))
        .collect();
    let refused = envs.step(wide).await.expect("a step call");
    for (i, e) in refused.errors.iter().enumerate() {
        match e {
            Some(VectorError::Env { error, .. }) => {
                let remote = error.remote().expect("the server's error");
                assert_eq!(remote.code, ErrorCode::InvalidRequest, "env {i}: {error}");
                assert!(!remote.uncertain);
            }
            other => panic!("env {i}: {other:?}"),
        }
    }
    assert_eq!(envs.failed(), vec![false; 4]);
    let step = envs.step(actions(1.0)).await.expect("step");
    assert!(step.errors.iter().all(Option::is_none), "{:?}", step.errors);
    // Two accepted steps of (i, 1): the refused one changed nothing.
    assert_eq!(
        positions(&step.observation),
        vec![0.0, 2.0, 2.0, 2.0, 4.0, 2.0, 6.0, 2.0]
    );
    envs.close().await;
    server.shutdown().await;
}

/// 6 CartPoles as a [`BatchedEnv`](crate::host::BatchedEnv) of 4 plus 2
/// single ones, against 6 single CartPoles, in every autoreset mode: the
/// same observations, rewards, signals and final observations, step by step
/// through episodes that end at different steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_host_equals_single_envs_in_every_mode() {
    use crate::client::ClientConfig;

    let (server, listener) = informed_server().await;
    let at = |id: &str| EnvAddress::new(listener.url(), id);
    for mode in [
        AutoresetMode::NextStep,
        AutoresetMode::SameStep,
        AutoresetMode::Disabled,
    ] {
        let mixed = [at("batch"), at("c6"), at("c7")];
        let singles: Vec<EnvAddress> = (0..6).map(|i| at(&format!("c{i}"))).collect();
        let config = ClientConfig::default();
        let mut a = VectorEnv::connect(&mixed, config.clone(), mode)
            .await
            .expect("connect");
        let mut b = VectorEnv::connect(&singles, config, mode)
            .await
            .expect("connect");
        assert_eq!((a.num_envs(), b.num_envs()), (6, 6));
        let ra = a
            .reset(VectorEnv::seeded(Some(40), 6))
            .await
            .expect("reset");
        let rb = b
            .reset(VectorEnv::seeded(Some(40), 6))
            .await
            .expect("reset");
        assert_eq!(ra.observation, rb.observation);
        let mut ends = 0;
        for t in 0..60usize {
            let actions: Vec<Value> = (0..6)
                .map(|i| Value::from(NdArray::scalar(((i * 7 + t * 3) % 5 < 2) as i64)))
                .collect();
            let (sa, sb) = step_both(&mut a, &mut b, actions, mode, t).await;
            // The batch's info is kept whole unless one of its sub-envs
            // was reset in the step; split, it is the single envs'.
            let reset = sa.autoreset[..4].iter().any(|&x| x)
                || sa.final_observation[..4].iter().any(Option::is_some);
            assert_eq!(
                sa.infos.blocks().len(),
                usize::from(!reset),
                "{mode:?} t {t}"
            );
            assert!(sb.infos.blocks().is_empty());
            ends += sa.terminated.iter().filter(|&&x| x).count();
        }
        assert!(ends > 2, "{mode:?}: episodes ended");
        a.close().await;
        b.close().await;
    }
    server.shutdown().await;
}

/// Single envs' steps answered by the sink give what the general path
/// (a task and a future per request) gives, in every autoreset mode, with
/// episodes ending (`SameStep`'s resets, `NextStep`'s resets instead of
/// steps); the sink carries every step of a single env that is not a reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_equals_the_general_path_in_every_mode() {
    use crate::client::ClientConfig;

    let (server, listener) = informed_server().await;
    let at = |i: usize| EnvAddress::new(listener.url(), format!("c{i}"));
    for mode in [
        AutoresetMode::NextStep,
        AutoresetMode::SameStep,
        AutoresetMode::Disabled,
    ] {
        let config = ClientConfig::default();
        let first: Vec<EnvAddress> = (0..4).map(at).collect();
        let second: Vec<EnvAddress> = (4..8).map(at).collect();
        let mut a = VectorEnv::connect(&first, config.clone(), mode)
            .await
            .expect("connect");
        let mut b = VectorEnv::connect(&second, config, mode)
            .await
            .expect("connect")
            .without_sink();
        let ra = a.reset(VectorEnv::seeded(Some(7), 4)).await.expect("reset");
        let rb = b.reset(VectorEnv::seeded(Some(7), 4)).await.expect("reset");
        assert_eq!(ra.observation, rb.observation);
        let (mut ends, mut resets) = (0, 0);
        // NextStep: whether an episode ended in the previous step.
        let mut ended = false;
        for t in 0..80usize {
            let actions: Vec<Value> = (0..4)
                .map(|i| Value::from(NdArray::scalar(((i * 5 + t * 3) % 7 < 3) as i64)))
                .collect();
            let carried = a.carried();
            let (sa, _) = step_both(&mut a, &mut b, actions, mode, t).await;
            // Only NextStep's resets take a task on the sink's side.
            assert_eq!(a.carried() - carried, u64::from(ended), "{mode:?} t {t}");
            ended = mode == AutoresetMode::NextStep
                && (0..4).any(|i| sa.terminated[i] || sa.truncated[i]);
            ends += sa.terminated.iter().filter(|&&x| x).count();
            resets += sa.autoreset.iter().filter(|&&x| x).count()
                + sa.final_observation.iter().filter(|o| o.is_some()).count();
        }
        assert!(ends > 2, "{mode:?}: episodes ended");
        if mode != AutoresetMode::Disabled {
            assert!(resets > 2, "{mode:?}: envs were reset");
        }
        a.close().await;
        b.close().await;
    }
    server.shutdown().await;
}

/// A server of a `BatchedEnv` of 4 [`Informed`] (`batch`) and 8 single ones
/// (`c0` to `c7`), and its listener.
async fn informed_server() -> (crate::server::Server, crate::server::Listener) {
    use crate::host::BatchedEnv;
    use crate::server::{Server, ServerConfig};

    let mut builder = Server::builder(ServerConfig::default());
    let batch = BatchedEnv::new((0..4).map(|_| Informed::new()).collect()).expect("a batch");
    builder.register_env("batch", batch).expect("register");
    for i in 0..8 {
        builder
            .register_env(&format!("c{i}"), Informed::new())
            .expect("register");
    }
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    (server, listener)
}

/// Steps `a` and `b` (the same number of envs) with the same actions and
/// checks that they report the same, every env's info included; in
/// `Disabled` mode, then resets the envs that ended in both alike. Returns
/// both steps.
async fn step_both(
    a: &mut VectorEnv,
    b: &mut VectorEnv,
    actions: Vec<Value>,
    mode: AutoresetMode,
    t: usize,
) -> (VectorStep, VectorStep) {
    let sa = a.step(actions.clone()).await.expect("step");
    let sb = b.step(actions).await.expect("step");
    assert!(sa.errors.iter().all(Option::is_none), "{:?}", sa.errors);
    assert_eq!(sa.observation, sb.observation, "{mode:?} t {t}");
    assert_eq!(sa.reward, sb.reward);
    assert_eq!(sa.terminated, sb.terminated);
    assert_eq!(sa.truncated, sb.truncated);
    assert_eq!(sa.autoreset, sb.autoreset);
    assert_eq!(sa.final_observation, sb.final_observation);
    assert_eq!(sa.final_info, sb.final_info);
    assert_eq!(sa.infos.to_vec(), sb.infos.to_vec(), "{mode:?} t {t}");
    if mode == AutoresetMode::Disabled && sa.terminated.iter().any(|&x| x) {
        let mask = sa.terminated.clone();
        let args = VectorEnv::seeded(Some(t as i64), a.num_envs());
        let (ra, _) = a
            .reset_masked(args.clone(), Some(&mask))
            .await
            .expect("reset");
        let (rb, _) = b.reset_masked(args, Some(&mask)).await.expect("reset");
        assert_eq!(ra.observation, rb.observation);
    }
    (sa, sb)
}

/// CartPole reporting an info on two steps of three: its step count (a
/// float) and whether it is even.
struct Informed {
    cartpole: crate::sims::CartPole,
    t: u64,
}

impl Informed {
    fn new() -> Informed {
        Informed {
            cartpole: crate::sims::CartPole::new(),
            t: 0,
        }
    }
}

impl crate::host::Env for Informed {
    fn reset(&mut self, args: ResetArgs) -> crate::host::HostResult<crate::host::ResetResult> {
        self.t = 0;
        self.cartpole.reset(args)
    }

    fn step(&mut self, action: Value) -> crate::host::HostResult<crate::host::StepResult> {
        let mut r = self.cartpole.step(action)?;
        self.t += 1;
        if !self.t.is_multiple_of(3) {
            r.info = Dict::new()
                .with("t", self.t as f64)
                .with("even", self.t.is_multiple_of(2));
        }
        Ok(r)
    }

    fn action_space(&self) -> Option<crate::host::Space> {
        self.cartpole.action_space()
    }

    fn observation_space(&self) -> Option<crate::host::Space> {
        self.cartpole.observation_space()
    }
}

/// An env that reports each step on a channel (from the server's domain
/// thread) before answering it; its observation counts its steps.
struct Reporting {
    steps: f32,
    tx: std::sync::mpsc::Sender<()>,
}

impl crate::host::Env for Reporting {
    fn reset(&mut self, args: ResetArgs) -> crate::host::HostResult<crate::host::ResetResult> {
        self.steps = args.seed.unwrap_or(0) as f32;
        Ok(crate::host::ResetResult::new(
            (),
            NdArray::from_vec(vec![self.steps]),
            Dict::new(),
        ))
    }

    fn step(&mut self, action: Value) -> crate::host::HostResult<crate::host::StepResult> {
        let _ = self.tx.send(());
        self.steps += action.as_scalar_f64().unwrap_or(0.0) as f32;
        Ok(crate::host::StepResult::new(
            NdArray::from_vec(vec![self.steps]),
            self.steps as f64,
            false,
            false,
            Dict::new(),
        ))
    }

    fn action_space(&self) -> Option<crate::host::Space> {
        Some(crate::host::Space::unbounded_f32(vec![]))
    }

    fn observation_space(&self) -> Option<crate::host::Space> {
        Some(crate::host::Space::unbounded_f32(vec![1]))
    }
}

/// `BlockingVectorEnv` runs its runtime on the caller's thread: its
/// `step_async` and `send` must still put every request on its way before
/// they return (the simulators step while nobody waits in `step_wait`),
/// also after the idle thread took the runtime over, and the results are
/// those of the actions sent.
#[test]
fn blocking_step_async_sends_before_returning() {
    use crate::client::ClientConfig;
    use crate::server::{Server, ServerConfig};
    use std::time::Duration;

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (tx, rx) = std::sync::mpsc::channel();
    let n = 4;
    let mut builder = Server::builder(ServerConfig::default());
    // Each phase its own envs: the server releases the first phase's envs
    // when it notices that connection closed, which may come after the
    // second phase's reset (an ownership conflict, seen in about one run
    // in fifty when they shared them).
    for phase in ["r", "s"] {
        for i in 0..n {
            let env = Reporting {
                steps: 0.0,
                tx: tx.clone(),
            };
            builder
                .register_env(&format!("{phase}{i}"), env)
                .expect("register");
        }
    }
    let server = builder.start().expect("a valid server configuration");
    let listener = runtime
        .block_on(server.listen("127.0.0.1:0"))
        .expect("listen");
    let addresses = |phase: &str| -> Vec<EnvAddress> {
        (0..n)
            .map(|i| EnvAddress::new(listener.url(), format!("{phase}{i}")))
            .collect()
    };
    // First with the idle thread out of the way (only the calls drive the
    // runtime), then as configured, with a pause long enough for the idle
    // thread to take over.
    for (phase, idle_after) in [("r", Some(Duration::from_secs(24 * 3600))), ("s", None)] {
        let mut envs = BlockingVectorEnv::connect_idle_after(
            &addresses(phase),
            ClientConfig::default(),
            AutoresetMode::Disabled,
            idle_after,
        )
        .expect("connect");
        lockstep_and_recv(&mut envs, &rx, idle_after.is_none());
        envs.close();
    }
    runtime.block_on(server.shutdown());
}

fn lockstep_and_recv(
    envs: &mut BlockingVectorEnv,
    rx: &std::sync::mpsc::Receiver<()>,
    pause: bool,
) {
    use std::time::Duration;
    let n = envs.num_envs();
    let reset = envs
        .reset(BlockingVectorEnv::seeded(Some(10), n))
        .expect("reset");
    assert!(
        reset.errors.iter().all(Option::is_none),
        "{:?}",
        reset.errors
    );
    let arrived = |rx: &std::sync::mpsc::Receiver<()>| {
        for _ in 0..n {
            // Generous (a loaded machine): a request that step_async did
            // not send never arrives while the idle thread is out of the way.
            rx.recv_timeout(Duration::from_secs(60))
                .expect("every step request reaches its simulator before step_wait");
        }
    };
    let mut expected: Vec<f32> = (0..n).map(|i| 10.0 + i as f32).collect();
    for t in 0..20 {
        if t == 10 && pause {
            // Long enough without calls for the idle thread to drive.
            std::thread::sleep(Duration::from_millis(400));
        }
        let actions: Vec<f32> = (0..n).map(|i| (t * n + i) as f32 * 0.5).collect();
        let stacked = Value::from(NdArray::from_vec(actions.clone()));
        envs.step_async_stacked(&stacked).expect("step_async");
        // Written when step_async returns, whoever drove the runtime.
        assert_eq!(envs.inner().unwritten_frames(), 0, "step {t}");
        arrived(rx);
        let step = envs.step_wait().expect("step_wait");
        for i in 0..n {
            expected[i] += actions[i];
        }
        let obs = step.observation.as_array().map(NdArray::to_f64_vec);
        let want: Vec<f64> = expected.iter().map(|&v| v as f64).collect();
        assert_eq!(obs, Some(want.clone()), "step {t}");
        assert_eq!(step.reward, want);
    }
    // send / recv: the same.
    let ids: Vec<usize> = (0..n).collect();
    let ones = (0..n).map(|_| Value::from(1.0f32)).collect();
    envs.send(ones, &ids).expect("send");
    assert_eq!(envs.inner().unwritten_frames(), 0, "send");
    arrived(rx);
    let mut got = 0;
    while got < n {
        let step = envs.recv(1).expect("recv");
        for (pos, &i) in step.env_id.iter().enumerate() {
            assert_eq!(step.reward[pos], (expected[i] + 1.0) as f64);
        }
        got += step.env_id.len();
    }
}

/// While the idle thread holds the runtime (here: busy in a task for a
/// while), `step_async` returns only once its requests are written, and
/// its thread sleeps meanwhile (a few polls of its wait), not spinning.
#[test]
fn blocking_step_async_waits_for_a_busy_idle_thread() {
    use crate::client::ClientConfig;
    use crate::server::{Server, ServerConfig};
    use std::time::Duration;

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (tx, rx) = std::sync::mpsc::channel();
    let n = 2;
    let mut builder = Server::builder(ServerConfig::default());
    for i in 0..n {
        let env = Reporting {
            steps: 0.0,
            tx: tx.clone(),
        };
        builder
            .register_env(&format!("b{i}"), env)
            .expect("register");
    }
    let server = builder.start().expect("a valid server configuration");
    let listener = runtime
        .block_on(server.listen("127.0.0.1:0"))
        .expect("listen");
    let addresses: Vec<EnvAddress> = (0..n)
        .map(|i| EnvAddress::new(listener.url(), format!("b{i}")))
        .collect();
    let mut envs = BlockingVectorEnv::connect_idle_after(
        &addresses,
        ClientConfig::default(),
        AutoresetMode::Disabled,
        Some(Duration::from_millis(50)),
    )
    .expect("connect");
    let reset = envs
        .reset(BlockingVectorEnv::seeded(Some(0), n))
        .expect("reset");
    assert!(
        reset.errors.iter().all(Option::is_none),
        "{:?}",
        reset.errors
    );
    let mut expected = vec![0.0f64, 1.0];
    for round in 0..3 {
        // The idle thread takes over, then runs a task that keeps it
        // (and so the runtime) busy while step_async is called.
        std::thread::sleep(Duration::from_millis(200));
        let (busy_tx, busy_rx) = std::sync::mpsc::channel();
        envs.inner().runtime_handle().spawn(async move {
            let _ = busy_tx.send(());
            std::thread::sleep(Duration::from_millis(300));
        });
        busy_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the idle thread runs the task");
        let (queued, _) = envs.inner().frames();
        let stacked = Value::from(NdArray::from_vec(vec![1.0f32; n]));
        envs.step_async_stacked(&stacked).expect("step_async");
        let (now, unwritten) = envs.inner().frames();
        assert_eq!(
            now - queued,
            n as u64,
            "round {round}: every request queued"
        );
        assert_eq!(unwritten, 0, "round {round}: and written");
        assert!(
            envs.launch_polls < 20,
            "round {round}: the wait was polled {} times",
            envs.launch_polls
        );
        for _ in 0..n {
            rx.recv_timeout(Duration::from_secs(60))
                .expect("the requests reach the simulators");
        }
        let step = envs.step_wait().expect("step_wait");
        expected.iter_mut().for_each(|e| *e += 1.0);
        assert_eq!(step.reward, expected);
    }
    envs.close();
    runtime.block_on(server.shutdown());
}
