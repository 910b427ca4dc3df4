//! The vector client (`client::vector`): N remote envs over several servers
//! stepped as one, checked against the same envs stepped locally with
//! Gymnasium's autoreset rules written out here; per-env failures (an
//! execution error, a lost reply) reported without losing the others.

use std::time::Duration;
use unienv_remote::client::vector::{AutoresetMode, EnvAddress, VectorEnv, VectorError};
use unienv_remote::client::ClientConfig;
use unienv_remote::fixtures::{CounterEnv, CounterVariant};
use unienv_remote::host::{Env, ResetArgs};
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::{NdArray, Value};

/// A server on 127.0.0.1:0 hosting counters `c0`..`c{n-1}` (also used by
/// `vector_reconnect`).
pub(crate) async fn counters(n: usize) -> (Server, Listener) {
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
    (server, listener)
}

fn action(a: f32, b: f32) -> Value {
    Value::from(NdArray::from_vec(vec![a, b]))
}

fn position(obs: &Value) -> Vec<f64> {
    obs.get("position")
        .and_then(Value::as_array)
        .map(NdArray::to_f64_vec)
        .expect("a position array")
}

/// The same envs, local, under Gymnasium's NEXT_STEP / SAME_STEP rules.
struct Local {
    envs: Vec<CounterEnv>,
    mode: AutoresetMode,
    ended: Vec<bool>,
}

struct LocalStep {
    positions: Vec<Vec<f64>>,
    reward: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    finals: Vec<Option<Vec<f64>>>,
}

impl Local {
    fn new(n: usize, mode: AutoresetMode) -> Local {
        Local {
            envs: (0..n)
                .map(|_| CounterEnv::new(None, CounterVariant::Plain))
                .collect(),
            mode,
            ended: vec![false; n],
        }
    }

    fn reset(&mut self, seed: i64) -> Vec<Vec<f64>> {
        self.ended.iter_mut().for_each(|e| *e = false);
        self.envs
            .iter_mut()
            .enumerate()
            .map(|(i, e)| {
                position(
                    &e.reset(ResetArgs::with_seed(seed + i as i64))
                        .expect("reset")
                        .observation,
                )
            })
            .collect()
    }

    fn step(&mut self, actions: &[Value]) -> LocalStep {
        let n = self.envs.len();
        let mut out = LocalStep {
            positions: Vec::new(),
            reward: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            finals: vec![None; n],
        };
        for (i, env) in self.envs.iter_mut().enumerate() {
            if self.mode == AutoresetMode::NextStep && self.ended[i] {
                let r = env.reset(ResetArgs::default()).expect("reset");
                out.positions.push(position(&r.observation));
                self.ended[i] = false;
                continue;
            }
            let s = env.step(actions[i].clone()).expect("step");
            out.reward[i] = s.reward.as_scalar_f64().expect("reward");
            out.terminated[i] = s.terminated.truthy().expect("terminated");
            out.truncated[i] = s.truncated.truthy().expect("truncated");
            self.ended[i] = out.terminated[i] || out.truncated[i];
            if self.mode == AutoresetMode::SameStep && self.ended[i] {
                out.finals[i] = Some(position(&s.observation));
                let r = env.reset(ResetArgs::default()).expect("reset");
                out.positions.push(position(&r.observation));
            } else {
                out.positions.push(position(&s.observation));
            }
        }
        out
    }
}

fn rows(stacked: &Value, n: usize) -> Vec<Vec<f64>> {
    let a = stacked
        .get("position")
        .and_then(Value::as_array)
        .expect("stacked positions");
    assert_eq!(a.shape(), &[n, 2]);
    a.to_f64_vec().chunks(2).map(<[f64]>::to_vec).collect()
}

/// 7 envs over 3 servers (3 + 2 + 2, interleaved) against the local model,
/// for each autoreset mode, through episodes that end at different steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matches_local_envs_in_every_autoreset_mode() {
    let (s1, l1) = counters(3).await;
    let (s2, l2) = counters(2).await;
    let (s3, l3) = counters(2).await;
    let addresses = vec![
        EnvAddress::new(l1.url(), "c0"),
        EnvAddress::new(l2.url(), "c0"),
        EnvAddress::new(l3.url(), "c0"),
        EnvAddress::new(l1.url(), "c1"),
        EnvAddress::new(l2.url(), "c1"),
        EnvAddress::new(l3.url(), "c1"),
        EnvAddress::new(l1.url(), "c2"),
    ];
    let n = addresses.len();
    for mode in [
        AutoresetMode::NextStep,
        AutoresetMode::SameStep,
        AutoresetMode::Disabled,
    ] {
        let mut remote = VectorEnv::connect(&addresses, ClientConfig::default(), mode)
            .await
            .expect("connect");
        assert_eq!(remote.num_envs(), n);
        assert_eq!(remote.autoreset_mode(), mode);
        let mut local = Local::new(n, mode);
        // Seeds -3..3: the counters start at different values, so their
        // episodes (all components above 3) end at different steps.
        let reset = remote
            .reset(VectorEnv::seeded(Some(-3), n))
            .await
            .expect("reset");
        assert!(reset.errors.iter().all(Option::is_none));
        assert_eq!(rows(&reset.observation, n), local.reset(-3));
        assert_eq!(
            reset.infos[4].get("seed").and_then(Value::as_i64),
            Some(1),
            "env 4's seed is -3 + 4"
        );
        let mut autoresets = 0;
        let mut ended = 0;
        for t in 0..12 {
            let actions: Vec<Value> = (0..n).map(|i| action(((i + t) % 3) as f32, 1.0)).collect();
            let expected = local.step(&actions);
            remote.step_async(actions).expect("step_async");
            assert!(remote.is_step_pending());
            let got = remote.step_wait().await.expect("step_wait");
            assert!(got.errors.iter().all(Option::is_none), "{:?}", got.errors);
            assert_eq!(
                rows(&got.observation, n),
                expected.positions,
                "mode {mode:?} t {t}"
            );
            assert_eq!(got.reward, expected.reward);
            assert_eq!(got.terminated, expected.terminated);
            assert_eq!(got.truncated, expected.truncated);
            let finals: Vec<Option<Vec<f64>>> = got
                .final_observation
                .iter()
                .map(|o| o.as_ref().map(position))
                .collect();
            assert_eq!(finals, expected.finals);
            autoresets += got.autoreset.iter().filter(|a| **a).count();
            ended += got.terminated.iter().filter(|a| **a).count();
            if mode == AutoresetMode::NextStep {
                // An autoreset env reports reward 0 and no ending.
                for i in 0..n {
                    if got.autoreset[i] {
                        assert_eq!(got.reward[i], 0.0);
                        assert!(!got.terminated[i]);
                    }
                }
            }
        }
        assert!(ended > 0, "mode {mode:?}: no episode ended");
        match mode {
            AutoresetMode::NextStep => assert!(autoresets > 0),
            _ => assert_eq!(autoresets, 0),
        }
        remote.close().await;
    }
    for s in [s1, s2, s3] {
        s.shutdown().await;
    }
}

/// 300 single-env resources on one connection, whose requests leave
/// together (one write per vector step) and whose replies arrive together:
/// every step's results are each env's own (distinct seeds and actions, so a
/// reply given to the wrong env or lost shows), with autoresets among them,
/// and exactly one request per env and step goes out, by `step_async` /
/// `step_wait` and by `send` / `recv`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_resources_on_one_connection_get_their_own_replies() {
    const N: usize = 300;
    let (server, listener) = counters(N).await;
    let addresses: Vec<EnvAddress> = (0..N)
        .map(|i| EnvAddress::new(listener.url(), format!("c{i}")))
        .collect();
    let mut remote =
        VectorEnv::connect(&addresses, ClientConfig::default(), AutoresetMode::NextStep)
            .await
            .expect("connect");
    let client = remote.envs()[0].client().clone();
    let mut local = Local::new(N, AutoresetMode::NextStep);
    let seed = -(N as i64) / 2;
    let reset = remote
        .reset(VectorEnv::seeded(Some(seed), N))
        .await
        .expect("reset");
    assert_eq!(rows(&reset.observation, N), local.reset(seed));
    let distinct = |i: usize, t: usize| action(i as f32 / 64.0, 0.5 + t as f32);
    let before = client.requests_sent();
    let mut autoresets = 0;
    let steps = 8;
    for t in 0..steps {
        let actions: Vec<Value> = (0..N).map(|i| distinct(i, t)).collect();
        let expected = local.step(&actions);
        let got = if t % 2 == 0 {
            remote.step_async(actions).expect("step_async");
            remote.step_wait().await.expect("step_wait")
        } else {
            let ids: Vec<usize> = (0..N).collect();
            remote.send(actions, &ids).expect("send");
            remote.recv(N).await.expect("recv")
        };
        assert!(
            got.errors.iter().all(Option::is_none),
            "t {t}: {:?}",
            got.errors
        );
        // Rows in env order (`recv` gives them in arrival order).
        let observed = rows(&got.observation, N);
        let mut by_env: Vec<(usize, Vec<f64>, f64, bool)> = (0..N)
            .map(|p| {
                let row = observed[p].clone();
                (got.env_id[p], row, got.reward[p], got.terminated[p])
            })
            .collect();
        by_env.sort_by_key(|r| r.0);
        let want: Vec<(usize, Vec<f64>, f64, bool)> = (0..N)
            .map(|i| {
                let row = expected.positions[i].clone();
                (i, row, expected.reward[i], expected.terminated[i])
            })
            .collect();
        assert_eq!(by_env, want, "t {t}");
        autoresets += got.autoreset.iter().filter(|a| **a).count();
    }
    assert!(autoresets > 0, "no env was reset in between");
    assert_eq!(
        client.requests_sent() - before,
        (N * steps) as u64,
        "one request per env and step"
    );
    remote.close().await;
    server.shutdown().await;
}

/// One env gets an action its simulator rejects (an uncertain execution
/// error), another's reply never arrives (a timeout on its own connection:
/// uncertain); the other envs' results are complete, and the failed envs are
/// not stepped again until reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_env_failures_keep_the_others_results() {
    let (s1, l1) = counters(2).await;
    let (s2, l2) = counters(1).await;
    let addresses = vec![
        EnvAddress::new(l1.url(), "c0"),
        EnvAddress::new(l1.url(), "c1"),
        EnvAddress::new(l2.url(), "c0"),
    ];
    let config = ClientConfig::default().with_timeout(Some(Duration::from_millis(300)));
    let mut v = VectorEnv::connect(&addresses, config, AutoresetMode::NextStep)
        .await
        .expect("connect");
    v.reset(VectorEnv::seeded(Some(0), 3)).await.expect("reset");
    // env 1: a string is not an action of the counter; env 2: action 99
    // makes the counter sleep 1.5 s, beyond the 300 ms timeout.
    let actions = vec![
        action(1.0, 2.0),
        Value::Str("not an action".into()),
        action(99.0, 99.0),
    ];
    let step = v.step(actions).await.expect("step");
    assert!(step.errors[0].is_none());
    assert_eq!(position_row(&step.observation, 0), vec![1.0, 2.0]);
    assert_eq!(step.reward[0], 3.0);
    let rejected = step.errors[1].as_ref().expect("env 1 failed");
    assert_eq!(rejected.index(), Some(1));
    assert_eq!(
        rejected.client_error().map(|e| e.code().to_string()),
        Some("execution_error".into())
    );
    assert!(rejected.is_uncertain(), "the simulator ran: {rejected}");
    let lost = step.errors[2].as_ref().expect("env 2 failed");
    assert_eq!(
        lost.client_error().map(|e| e.code().to_string()),
        Some("uncertain_outcome".into())
    );
    assert_eq!(
        lost.client_error().map(|e| e.cause().code().to_string()),
        Some("timeout".into())
    );
    assert!(lost.is_uncertain());
    // Failed envs' slots are zeros.
    assert_eq!(position_row(&step.observation, 1), vec![0.0, 0.0]);
    assert_eq!(step.reward[1], 0.0);
    assert_eq!(v.failed(), vec![false, true, true]);

    // The next step sends nothing to the failed envs.
    let step = v
        .step(vec![action(1.0, 1.0), action(1.0, 1.0), action(1.0, 1.0)])
        .await
        .expect("step");
    assert!(step.errors[0].is_none());
    assert_eq!(position_row(&step.observation, 0), vec![2.0, 3.0]);
    for i in [1, 2] {
        match &step.errors[i] {
            Some(e @ VectorError::NeedsReset { index, .. }) => {
                assert_eq!(*index, i);
                assert!(!e.is_uncertain(), "nothing was sent");
            }
            other => panic!("env {i}: {other:?}"),
        }
    }
    // Misuse is refused without touching the envs.
    assert!(matches!(
        v.step(vec![action(1.0, 1.0)]).await,
        Err(VectorError::InvalidUse(_))
    ));
    assert!(matches!(
        v.step_wait().await,
        Err(VectorError::InvalidUse(_))
    ));
    v.close().await;
    s1.shutdown().await;
    s2.shutdown().await;
}

fn position_row(stacked: &Value, i: usize) -> Vec<f64> {
    let a = stacked
        .get("position")
        .and_then(Value::as_array)
        .expect("stacked positions");
    a.to_f64_vec()[i * 2..i * 2 + 2].to_vec()
}

/// Building the vector env refuses duplicates, mismatched spaces and
/// unreachable servers, naming the culprit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn construction_errors() {
    let (s1, l1) = counters(1).await;
    let dup = vec![
        EnvAddress::new(l1.url(), "c0"),
        EnvAddress::new(l1.url(), "c0"),
    ];
    let e = VectorEnv::connect(&dup, ClientConfig::default(), AutoresetMode::NextStep)
        .await
        .expect_err("duplicate");
    assert!(matches!(e, VectorError::InvalidUse(_)), "{e}");
    let missing = vec![EnvAddress::new(l1.url(), "nope")];
    let e = VectorEnv::connect(&missing, ClientConfig::default(), AutoresetMode::NextStep)
        .await
        .expect_err("missing");
    assert!(matches!(e, VectorError::Connect { .. }), "{e}");
    assert!(e.to_string().contains(&l1.url()), "{e}");
    s1.shutdown().await;

    // Spaces must match: counter's and bench_state's differ (counter and
    // counter3, a batch of 3 counters, would mix: 1 + 3 sub-envs).
    let mut builder = Server::builder(ServerConfig::default());
    unienv_remote::fixtures::register(&mut builder).expect("fixtures");
    let server = builder.start().expect("a valid server configuration");
    let l = server.listen("127.0.0.1:0").await.expect("listen");
    let mixed = vec![
        EnvAddress::new(l.url(), "counter"),
        EnvAddress::new(l.url(), "bench_state"),
    ];
    let e = VectorEnv::connect(&mixed, ClientConfig::default(), AutoresetMode::NextStep)
        .await
        .expect_err("mismatched spaces");
    assert!(e.to_string().contains("bench_state"), "{e}");
    server.shutdown().await;
}
