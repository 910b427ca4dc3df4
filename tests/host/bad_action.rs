//! What a bad action does to a hosted env: a refusal before any
//! change (`HostError::invalid_argument`, the server's action-space check,
//! `step` before `reset`) is a certain `invalid_request` and leaves the env
//! usable; a failure after the simulator started changing its state keeps
//! the reference's semantics (uncertain `execution_error`, then `faulted`
//! until a reset), with a `faulted` message that names the env, the cause
//! and the way out.

use std::time::Duration;
use unienv_remote::client::{Client, ClientConfig, ClientError};
use unienv_remote::host::{Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{DType, Dict, NdArray, Value};

/// A counter: `step(a)` adds `a` (an integer in [0, 10]). It refuses a
/// negative action before changing anything, and fails on 7 after it has
/// already changed its state.
struct Picky {
    value: Option<i64>,
}

impl Env for Picky {
    fn reset(&mut self, _: ResetArgs) -> HostResult<ResetResult> {
        self.value = Some(0);
        Ok(ResetResult::new((), Value::Int(0), Dict::new()))
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        let Some(value) = self.value else {
            return Err(HostError::invalid_argument(
                "step() was called before reset(): call reset() first",
            ));
        };
        let a = action
            .as_i64()
            .ok_or_else(|| HostError::invalid_argument("the action is an integer"))?;
        if a < 0 {
            return Err(HostError::invalid_argument(format!("negative action {a}")));
        }
        self.value = Some(value + a);
        if a == 7 {
            return Err(HostError::new("the motor driver crashed"));
        }
        Ok(StepResult::new(
            Value::Int(value + a),
            0.0,
            false,
            false,
            Dict::new(),
        ))
    }
    fn action_space(&self) -> Option<Space> {
        Some(Space::boxed(DType::I64, vec![], 0.0, 10.0))
    }
    fn observation_space(&self) -> Option<Space> {
        None
    }
}

fn server(validate_actions: bool) -> Server {
    let mut b = Server::builder(ServerConfig {
        validate_actions,
        ..ServerConfig::default()
    });
    b.register_env("picky", Picky { value: None }).unwrap();
    unienv_remote::sims::register(&mut b).unwrap();
    b.start().expect("a valid server configuration")
}

async fn client(server: &Server) -> Client {
    let config = ClientConfig::default()
        .with_timeout(Some(Duration::from_secs(30)))
        .with_discover(false);
    Client::over_memory(server.connect_memory(), config)
        .await
        .unwrap()
}

fn remote(e: &ClientError) -> (String, String, bool) {
    let r = e
        .remote()
        .unwrap_or_else(|| panic!("not a remote error: {e}"));
    (r.code.as_str().to_string(), r.message.clone(), r.uncertain)
}

fn f32s(values: &[f32]) -> Value {
    Value::Array(NdArray::from_vec(values.to_vec()))
}

#[tokio::test]
async fn a_refused_action_is_certain_and_leaves_the_env_usable() {
    let server = server(false);
    let c = client(&server).await;
    let env = c.env("picky").await.unwrap();

    // step before reset: a certain refusal naming reset, no fault.
    let e = env.step(Value::Int(1)).await.unwrap_err();
    let (code, message, uncertain) = remote(&e);
    assert_eq!(
        (code.as_str(), uncertain),
        ("invalid_request", false),
        "{e}"
    );
    assert!(message.contains("reset()"), "{message}");

    env.reset(ResetArgs::with_seed(0)).await.unwrap();
    let e = env.step(Value::Int(-3)).await.unwrap_err();
    assert_eq!(
        remote(&e),
        ("invalid_request".into(), "negative action -3".into(), false)
    );
    // Not faulted: the next step runs, from the unchanged state.
    let s = env.step(Value::Int(2)).await.unwrap();
    assert_eq!(s.observation, Value::Int(2));

    // A failure after the state changed: the reference's fault.
    let e = env.step(Value::Int(7)).await.unwrap_err();
    let (code, message, uncertain) = remote(&e);
    assert_eq!((code.as_str(), uncertain), ("execution_error", true), "{e}");
    assert_eq!(message, "the motor driver crashed");
    let e = env.step(Value::Int(1)).await.unwrap_err();
    let (code, message, uncertain) = remote(&e);
    assert_eq!((code.as_str(), uncertain), ("faulted", false), "{e}");
    for part in [
        "Env 'picky' is faulted",
        "step() on 'picky' failed after it started (the motor driver crashed)",
        "Call reset() (or reload()) on 'picky' to recover",
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
    assert!(
        !message.contains("world"),
        "a plain env has no world: {message}"
    );
    // The way out works.
    env.reset(ResetArgs::with_seed(0)).await.unwrap();
    assert_eq!(
        env.step(Value::Int(1)).await.unwrap().observation,
        Value::Int(1)
    );
    c.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn built_in_simulators_refuse_step_before_reset_without_a_fault() {
    let server = server(false);
    let c = client(&server).await;
    for (id, action) in [
        ("cartpole", Value::Int(1)),
        ("pointmass", f32s(&[0.5, -0.5])),
    ] {
        let env = c.env(id).await.unwrap();
        let e = env.step(action.clone()).await.unwrap_err();
        let (code, message, uncertain) = remote(&e);
        assert_eq!(
            (code.as_str(), uncertain),
            ("invalid_request", false),
            "{id}: {e}"
        );
        assert!(message.contains("call reset() first"), "{id}: {message}");
        env.reset(ResetArgs::with_seed(1)).await.unwrap();
        env.step(action).await.unwrap();
    }
    c.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn the_action_space_check_names_the_element_and_the_bound() {
    let server = server(true);
    let c = client(&server).await;
    let pointmass = c.env("pointmass").await.unwrap();
    pointmass.reset(ResetArgs::with_seed(1)).await.unwrap();
    let cases = [
        (
            f32s(&[0.5, 2.5]),
            "step() on 'pointmass' refused the action: action[1] = 2.5 is above the high bound 1 of the action space",
        ),
        (
            f32s(&[f32::NAN, 0.0]),
            "step() on 'pointmass' refused the action: action[0] is NaN: actions must be finite numbers",
        ),
        (
            f32s(&[0.5, 0.5, 0.5]),
            "step() on 'pointmass' refused the action: action has shape (3,) but the action space Box(float32, [2]) has shape (2,)",
        ),
    ];
    for (action, expected) in cases {
        let e = pointmass.step(action).await.unwrap_err();
        assert_eq!(
            remote(&e),
            ("invalid_request".into(), expected.into(), false)
        );
    }
    // Still usable, never faulted.
    pointmass.step(f32s(&[0.5, -0.5])).await.unwrap();

    let cartpole = c.env("cartpole").await.unwrap();
    cartpole.reset(ResetArgs::with_seed(1)).await.unwrap();
    let e = cartpole.step(Value::Int(2)).await.unwrap_err();
    assert_eq!(
        remote(&e),
        (
            "invalid_request".into(),
            "step() on 'cartpole' refused the action: action = 2 is above the high bound 1 of the action space".into(),
            false
        )
    );
    cartpole.step(Value::Int(1)).await.unwrap();

    // The custom env's own fault semantics are untouched by the check.
    let picky = c.env("picky").await.unwrap();
    picky.reset(ResetArgs::default()).await.unwrap();
    let e = picky.step(Value::Int(11)).await.unwrap_err();
    assert!(
        remote(&e)
            .1
            .contains("action = 11 is above the high bound 10"),
        "{e}"
    );
    let e = picky.step(Value::Int(7)).await.unwrap_err();
    assert_eq!(remote(&e).0, "execution_error");
    c.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn without_the_check_a_failing_composite_still_faults_and_says_how_to_recover() {
    let server = server(false);
    let c = client(&server).await;
    let pointmass = c.env("pointmass").await.unwrap();
    pointmass.reset(ResetArgs::with_seed(1)).await.unwrap();
    // The body node refuses NaN inside the WorldEnv: a composite cannot
    // promise that nothing changed, so this stays the reference's fault.
    let e = pointmass.step(f32s(&[f32::NAN, 0.0])).await.unwrap_err();
    let (code, message, uncertain) = remote(&e);
    assert_eq!((code.as_str(), uncertain), ("execution_error", true), "{e}");
    assert!(message.contains("action[0] is NaN"), "{message}");
    let e = pointmass.step(f32s(&[0.0, 0.0])).await.unwrap_err();
    let (code, message, _) = remote(&e);
    assert_eq!(code, "faulted");
    assert!(
        message.starts_with("World 'pointmass/world' is faulted"),
        "{message}"
    );
    assert!(
        message.contains("call reset() on env 'pointmass'"),
        "{message}"
    );
    pointmass.reset(ResetArgs::with_seed(1)).await.unwrap();
    pointmass.step(f32s(&[0.0, 0.0])).await.unwrap();
    c.close().await;
    server.shutdown().await;
}

#[tokio::test]
async fn refusals_name_what_was_asked_and_what_exists() {
    let server = server(true);
    let a = client(&server).await;
    let b = client(&server).await;

    let e = a.describe("cartpol").await.unwrap_err();
    let (code, message, _) = remote(&e);
    assert_eq!(code, "not_found");
    assert!(
        message.starts_with("Unknown resource ID 'cartpol'; did you mean 'cartpole'? Valid: "),
        "{message}"
    );
    assert!(message.contains("'gripper/left'"), "{message}");

    let e = a
        .call("cartpole", "reload", Vec::new(), Dict::new())
        .await
        .unwrap_err();
    let (code, message, _) = remote(&e);
    assert_eq!(code, "unsupported_operation");
    assert_eq!(
        message,
        "Method is not exported: env 'cartpole' has no method 'reload'; valid: 'reset', 'step', 'render'"
    );

    let e = a
        .subscribe("cartpole", Some(&["observaton"]))
        .await
        .unwrap_err();
    let (code, message, _) = remote(&e);
    assert_eq!(code, "invalid_request");
    assert!(
        message.starts_with(
            "Unsupported snapshot fields: env 'cartpole' has no field 'observaton'; did you mean 'observation'?"
        ),
        "{message}"
    );

    // Ownership on a plain env speaks of the env, not of a world.
    let cartpole_a = a.env("cartpole").await.unwrap();
    cartpole_a.reset(ResetArgs::with_seed(0)).await.unwrap();
    let cartpole_b = b.env("cartpole").await.unwrap();
    let e = cartpole_b.reset(ResetArgs::with_seed(0)).await.unwrap_err();
    let (code, message, _) = remote(&e);
    assert_eq!(code, "ownership_conflict");
    assert!(
        message.starts_with("env 'cartpole' is controlled by another session (env mode)"),
        "{message}"
    );
    assert!(!message.contains("world"), "{message}");
    a.close().await;
    b.close().await;
    server.shutdown().await;
}
