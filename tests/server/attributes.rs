//! The attribute extension of our server (SPEC.md, "Extension: sub-env
//! attributes"): `hello` lists it; `call` with `ext:call` / `ext:set_attr`
//! reaches a Rust env's `call_attribute` / `set_attribute`, with the name
//! guard, the control rules, the error codes and no lifecycle effect.

use crate::common;

use common::envs::{log, RecordingEnv};
use common::raw::{code, fields, result, uncertain, Raw};
use unienv_remote::host::{Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{Dict, NdArray, Value};

/// An env with one public attribute (`max_count`) and one method
/// (`scaled(x)`: `x * max_count`); `explode()` fails after it ran.
struct Counter {
    max_count: i64,
    count: i64,
}

impl Env for Counter {
    fn reset(&mut self, _: ResetArgs) -> HostResult<ResetResult> {
        self.count = 0;
        Ok(ResetResult::new(
            (),
            NdArray::from_vec(vec![0.0f32]),
            Dict::new(),
        ))
    }
    fn step(&mut self, _: Value) -> HostResult<StepResult> {
        self.count += 1;
        Ok(StepResult::new(
            NdArray::from_vec(vec![self.count as f32]),
            1.0,
            self.count >= self.max_count,
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
    fn call_attribute(&mut self, name: &str, args: Vec<Value>, _: Dict) -> HostResult<Vec<Value>> {
        match name {
            "max_count" => Ok(vec![Value::Int(self.max_count)]),
            "scaled" => {
                let x = args
                    .first()
                    .and_then(Value::as_i64)
                    .ok_or_else(|| HostError::invalid_argument("scaled(x) takes an int"))?;
                Ok(vec![Value::Int(x * self.max_count)])
            }
            "explode" => Err(HostError::new("the attribute's method failed")),
            other => Err(HostError::invalid_argument(format!(
                "no attribute '{other}'"
            ))),
        }
    }
    fn set_attribute(&mut self, name: &str, values: Vec<Value>) -> HostResult<()> {
        match (name, values.as_slice()) {
            ("max_count", [v]) => {
                self.max_count = v
                    .as_i64()
                    .ok_or_else(|| HostError::invalid_argument("max_count is an int"))?;
                Ok(())
            }
            ("max_count", _) => Err(HostError::invalid_argument("one value per sub-env (1)")),
            (other, _) => Err(HostError::invalid_argument(format!(
                "no attribute '{other}'"
            ))),
        }
    }
}

fn server() -> Server {
    let mut b = Server::builder(ServerConfig::default());
    b.register_env(
        "counter",
        Counter {
            max_count: 5,
            count: 0,
        },
    )
    .unwrap();
    b.register_env("plain", RecordingEnv::new("plain", log()))
        .unwrap();
    b.start().expect("a valid server configuration")
}

async fn ext_call(raw: &mut Raw, resource: &str, name: &str, args: Vec<Value>) -> Dict {
    let kwargs = fields(&[("name", Value::from(name)), ("args", Value::List(args))]);
    raw.env_call(resource, "ext:call", Vec::new(), kwargs).await
}

async fn ext_set(raw: &mut Raw, resource: &str, name: &str, values: Vec<Value>) -> Dict {
    let kwargs = fields(&[("name", Value::from(name)), ("values", Value::List(values))]);
    raw.env_call(resource, "ext:set_attr", Vec::new(), kwargs)
        .await
}

fn value(msg: &Dict) -> Value {
    result(msg).get("value").cloned().unwrap_or_default()
}

/// `(revision, sequence)` of a resource, from `describe`.
async fn marks(raw: &mut Raw, resource: &str) -> (Option<i64>, Option<i64>) {
    let r = raw.op("describe", Some(resource), Dict::new()).await;
    let d = result(&r);
    let first = d
        .as_seq()
        .and_then(|s| s.first().cloned())
        .unwrap_or_default();
    (
        first.get("revision").and_then(Value::as_i64),
        first.get("sequence").and_then(Value::as_i64),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_lists_the_extension() {
    let server = server();
    let mut raw = Raw::new(server.connect_memory());
    let hello = raw.hello(None).await;
    assert_eq!(
        result(&hello).get("extensions"),
        Some(&Value::List(vec![Value::from("env_attributes")]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_then_call_reaches_the_env_without_a_boundary() {
    let server = server();
    let mut raw = Raw::new(server.connect_memory());
    raw.hello(None).await;
    raw.env_call("counter", "reset", vec![], Dict::new()).await;
    let before = marks(&mut raw, "counter").await;
    let r = ext_call(&mut raw, "counter", "max_count", vec![]).await;
    assert_eq!(value(&r), Value::List(vec![Value::Int(5)]), "{r:?}");
    let r = ext_set(&mut raw, "counter", "max_count", vec![Value::Int(2)]).await;
    assert_eq!(value(&r), Value::Null, "{r:?}");
    assert!(result(&r).get("descriptors").is_some());
    let r = ext_call(&mut raw, "counter", "scaled", vec![Value::Int(3)]).await;
    assert_eq!(value(&r), Value::List(vec![Value::Int(6)]));
    // No revision, no boundary.
    assert_eq!(marks(&mut raw, "counter").await, before);
    // The attribute set is the env's: the episode now ends at 2.
    raw.env_call("counter", "step", vec![Value::Float(0.0)], Dict::new())
        .await;
    let r = raw
        .env_call("counter", "step", vec![Value::Float(0.0)], Dict::new())
        .await;
    let terminated = result(&r)
        .get("value")
        .and_then(|v| v.as_seq().map(|s| s[2].clone()));
    assert_eq!(terminated, Some(Value::Bool(true)), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_and_requests_are_certain_refusals() {
    let server = server();
    let mut raw = Raw::new(server.connect_memory());
    raw.hello(None).await;
    for (name, says) in [
        ("_private", "private"),
        ("__class__", "private"),
        ("a.b", "identifier"),
        ("step", "own request"),
        ("reset", "own request"),
        ("missing", "no attribute"),
    ] {
        let r = ext_call(&mut raw, "counter", name, vec![]).await;
        assert_eq!(code(&r), "invalid_request", "{name}: {r:?}");
        assert!(!uncertain(&r), "{name}");
        let message = format!("{r:?}");
        assert!(message.contains(says), "{name}: {message}");
    }
    let r = ext_set(
        &mut raw,
        "counter",
        "max_count",
        vec![Value::Int(1), Value::Int(2)],
    )
    .await;
    assert_eq!(code(&r), "invalid_request", "{r:?}");
    // A set without values, an unexpected member.
    let r = raw
        .env_call(
            "counter",
            "ext:set_attr",
            vec![],
            fields(&[("name", Value::from("max_count"))]),
        )
        .await;
    assert_eq!(code(&r), "invalid_request", "{r:?}");
    let r = raw
        .env_call(
            "counter",
            "ext:call",
            vec![],
            fields(&[("name", Value::from("max_count")), ("other", Value::Null)]),
        )
        .await;
    assert_eq!(code(&r), "invalid_request", "{r:?}");
    // Nothing was changed by the refusals.
    let r = ext_call(&mut raw, "counter", "max_count", vec![]).await;
    assert_eq!(value(&r), Value::List(vec![Value::Int(5)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_env_without_attributes_is_unsupported_and_a_failure_is_uncertain_without_fault() {
    let server = server();
    let mut raw = Raw::new(server.connect_memory());
    raw.hello(None).await;
    let r = ext_call(&mut raw, "plain", "value", vec![]).await;
    assert_eq!(code(&r), "unsupported_operation", "{r:?}");
    assert!(format!("{r:?}").contains("env_attributes"));
    let r = ext_set(&mut raw, "plain", "value", vec![Value::Int(1)]).await;
    assert_eq!(code(&r), "unsupported_operation", "{r:?}");
    // A method that fails after it ran: uncertain, the domain not faulted.
    raw.env_call("counter", "reset", vec![], Dict::new()).await;
    let r = ext_call(&mut raw, "counter", "explode", vec![]).await;
    assert_eq!(code(&r), "execution_error", "{r:?}");
    assert!(uncertain(&r));
    let r = raw
        .env_call("counter", "step", vec![Value::Float(0.0)], Dict::new())
        .await;
    assert!(r.get("result").is_some(), "still steps: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extension_claims_control_as_an_env_call() {
    let server = server();
    let mut a = Raw::new(server.connect_memory());
    a.hello(None).await;
    let mut b = Raw::new(server.connect_memory());
    b.hello(None).await;
    let r = ext_call(&mut a, "counter", "max_count", vec![]).await;
    assert!(r.get("result").is_some(), "{r:?}");
    let r = ext_call(&mut b, "counter", "max_count", vec![]).await;
    assert_eq!(code(&r), "ownership_conflict", "{r:?}");
    let r = ext_set(&mut b, "counter", "max_count", vec![Value::Int(9)]).await;
    assert_eq!(code(&r), "ownership_conflict", "{r:?}");
    let r = ext_call(&mut a, "counter", "max_count", vec![]).await;
    assert_eq!(value(&r), Value::List(vec![Value::Int(5)]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_not_an_env_and_the_fixture_envs_have_no_attributes() {
    let mut b = Server::builder(ServerConfig::default());
    unienv_remote::fixtures::register(&mut b).unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::new(server.connect_memory());
    raw.hello(None).await;
    let kwargs = fields(&[("name", Value::from("name"))]);
    let r = raw.call("arm", "ext:call", Vec::new(), kwargs, None).await;
    assert_eq!(code(&r), "unsupported_operation", "{r:?}");
    assert!(
        format!("{r:?}").contains("applies to env resources"),
        "{r:?}"
    );
    let r = ext_call(&mut raw, "counter3", "batch_size", vec![]).await;
    assert_eq!(code(&r), "unsupported_operation", "{r:?}");
}
