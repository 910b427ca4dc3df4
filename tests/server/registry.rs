//! Registration forms beyond a single env or detached tree: a bare world,
//! a node attached to its world, a wrapper and its base env sharing one
//! world domain (and a plain env with its wrapper), with the same topology
//! and descriptors' links as the reference registers for the same Python
//! objects (`tests/py/registry_forms.py`); per-env `dt` arrays of a batched
//! world; IDs taken twice.

use crate::common;

use common::raw::{code, fields, result, Raw};
use std::cell::RefCell;
use std::rc::Rc;
use unienv_remote::fixtures::{make_composed, CounterEnv, CounterVariant, TickNode, TickWorld};
use unienv_remote::host::{
    Env, HostResult, ResetArgs, ResetResult, Space, StepResult, Tree, World, WorldEnv,
};
use unienv_remote::server::{Hosted, RegisterError, Server, ServerConfig};
use unienv_remote::{Dict, NdArray, Value};

/// A wrapper around a shared `WorldEnv` that forwards the env methods and
/// no tree: the domain is given the tree with `with_tree`.
struct Wrapper(Rc<RefCell<WorldEnv<TickWorld>>>);

impl Env for Wrapper {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.0.borrow_mut().reset(args)
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        self.0.borrow_mut().step(action)
    }
    fn render(&mut self) -> HostResult<Value> {
        self.0.borrow_mut().render()
    }
    fn action_space(&self) -> Option<Space> {
        self.0.borrow().action_space()
    }
    fn observation_space(&self) -> Option<Space> {
        self.0.borrow().observation_space()
    }
    fn context_space(&self) -> Option<Space> {
        self.0.borrow().context_space()
    }
    fn render_mode(&self) -> Option<String> {
        self.0.borrow().render_mode()
    }
    fn batch_size(&self) -> Option<usize> {
        self.0.borrow().batch_size()
    }
    fn close(&mut self) {
        Env::close(&mut *self.0.borrow_mut())
    }
}

/// A wrapper that owns its `WorldEnv` and forwards `as_tree` — the one
/// method through which the server reaches a composed env's world and nodes.
struct Owning(WorldEnv<TickWorld>);

impl Env for Owning {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.0.reset(args)
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        self.0.step(action)
    }
    fn action_space(&self) -> Option<Space> {
        self.0.action_space()
    }
    fn observation_space(&self) -> Option<Space> {
        self.0.observation_space()
    }
    fn as_tree(&mut self) -> Option<&mut dyn Tree> {
        self.0.as_tree()
    }
}

/// A plain env and a wrapper around it (no world).
struct PlainWrapper(Rc<RefCell<CounterEnv>>);

impl Env for PlainWrapper {
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        self.0.borrow_mut().reset(args)
    }
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        self.0.borrow_mut().step(action)
    }
    fn render(&mut self) -> HostResult<Value> {
        self.0.borrow_mut().render()
    }
    fn action_space(&self) -> Option<Space> {
        self.0.borrow().action_space()
    }
    fn observation_space(&self) -> Option<Space> {
        self.0.borrow().observation_space()
    }
    fn context_space(&self) -> Option<Space> {
        self.0.borrow().context_space()
    }
    fn render_mode(&self) -> Option<String> {
        self.0.borrow().render_mode()
    }
}

fn tick_world() -> TickWorld {
    TickWorld { tick: 0, width: 1 }
}

/// The registry of `tests/py/registry_forms.py`, in Rust.
fn forms_server() -> Server {
    let mut b = Server::builder(ServerConfig {
        idle_timeout: None,
        ..ServerConfig::default()
    });
    b.register_world("world", tick_world()).unwrap();
    b.register_attached("sensor", tick_world(), Box::new(TickNode::new("sensor", 1)))
        .unwrap();
    b.register_with("wrapped", || {
        let env = Rc::new(RefCell::new(make_composed("a", 1)?));
        Ok(Hosted::env(Wrapper(env.clone()))
            .with_tree(env.clone())
            .with_env("base", env.clone())
            // Registering the same object again keeps its first ID.
            .with_node("again", &[]))
    })
    .unwrap();
    b.register_with("pbase", || {
        let env = Rc::new(RefCell::new(CounterEnv::new(None, CounterVariant::Plain)));
        Ok(Hosted::env(env.clone()).with_env("pwrap", PlainWrapper(env)))
    })
    .unwrap();
    b.start().expect("a valid server configuration")
}

/// What the reference reports for `tests/py/registry_forms.py`: (id, kind,
/// world_id, node_id, children, domain_id).
type Row = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    &'static [(&'static str, &'static str)],
    &'static str,
);

const EXPECTED: &[Row] = &[
    ("world", "world", None, None, &[], "world"),
    (
        "sensor",
        "node",
        Some("sensor/world"),
        None,
        &[],
        "sensor/world",
    ),
    ("sensor/world", "world", None, None, &[], "sensor/world"),
    (
        "wrapped",
        "env",
        Some("wrapped/world"),
        Some("wrapped/node"),
        &[],
        "wrapped/world",
    ),
    ("wrapped/world", "world", None, None, &[], "wrapped/world"),
    (
        "wrapped/node",
        "node",
        Some("wrapped/world"),
        None,
        &[("a", "wrapped/node/a"), ("b", "wrapped/node/b")],
        "wrapped/world",
    ),
    (
        "wrapped/node/a",
        "node",
        Some("wrapped/world"),
        None,
        &[],
        "wrapped/world",
    ),
    (
        "wrapped/node/b",
        "node",
        Some("wrapped/world"),
        None,
        &[],
        "wrapped/world",
    ),
    (
        "base",
        "env",
        Some("wrapped/world"),
        Some("wrapped/node"),
        &[],
        "wrapped/world",
    ),
    ("pbase", "env", None, None, &[], "pbase"),
    ("pwrap", "env", None, None, &[], "pbase"),
];

fn topology_line(d: &Value) -> String {
    let s = |k: &str| match d.get(k) {
        Some(Value::Str(s)) => format!("{s:?}"),
        _ => "None".to_string(),
    };
    let children: Vec<String> = d
        .get("children")
        .and_then(Value::as_dict)
        .map(|c| {
            c.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "{} {} {} {} [{}] {}",
        s("id"),
        s("kind"),
        s("world_id"),
        s("node_id"),
        children.join(","),
        s("domain_id")
    )
}

fn expected_lines() -> Vec<String> {
    EXPECTED
        .iter()
        .map(|(id, kind, world, node, children, domain)| {
            let o = |v: &Option<&str>| v.map_or("None".to_string(), |s| format!("{s:?}"));
            let c: Vec<String> = children.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(
                "{id:?} {kind:?} {} {} [{}] {domain:?}",
                o(world),
                o(node),
                c.join(",")
            )
        })
        .collect()
}

fn discover(raw_result: &Dict) -> Vec<Value> {
    result(raw_result)
        .as_seq()
        .expect("descriptor list")
        .to_vec()
}

#[tokio::test]
async fn registration_forms_lay_out_as_the_reference() {
    let server = forms_server();
    let mut raw = Raw::connect(&server).await;
    let descriptors = discover(&raw.op("discover", None, Dict::new()).await);
    let ours: Vec<String> = descriptors.iter().map(topology_line).collect();
    assert_eq!(ours, expected_lines());
    // A wrapper that does not implement reload does not export it; the base does.
    let ops = |id: &str| -> Vec<String> {
        descriptors
            .iter()
            .find(|d| d.get("id").and_then(Value::as_str) == Some(id))
            .and_then(|d| d.get("operations"))
            .and_then(Value::as_seq)
            .map(|s| {
                s.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(ops("wrapped"), ["render", "reset", "step"]);
    assert_eq!(ops("base"), ["reload", "render", "reset", "step"]);

    // The same topology and operations as the reference, live.
    if let Some(python) = common::ref_python() {
        let out = common::run_python(&python, "registry_forms.py", &[], None);
        let text = String::from_utf8(out).expect("utf-8");
        let mut lines = text.lines();
        let registered: serde_json::Value =
            serde_json::from_str(lines.next().expect("registered line")).expect("json");
        assert_eq!(
            registered["registered"],
            serde_json::json!(["world", "sensor", "wrapped", "base", "base", "pbase", "pwrap"])
        );
        let mut reference = Vec::new();
        for line in lines {
            let d: serde_json::Value = serde_json::from_str(line).expect("json");
            let o = |k: &str| match &d[k] {
                serde_json::Value::String(s) => format!("{s:?}"),
                _ => "None".to_string(),
            };
            let children: Vec<String> = d["children"]
                .as_object()
                .map(|c| {
                    c.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("?")))
                        .collect()
                })
                .unwrap_or_default();
            reference.push(format!(
                "{} {} {} {} [{}] {}",
                o("id"),
                o("kind"),
                o("world_id"),
                o("node_id"),
                children.join(","),
                o("domain_id")
            ));
            let ref_ops: Vec<String> = d["operations"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let id = d["id"].as_str().unwrap_or_default();
            assert_eq!(ops(id), ref_ops, "operations of {id}");
        }
        assert_eq!(ours, reference);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn shared_world_is_driven_through_either_registration() {
    let server = forms_server();
    let mut raw = Raw::connect(&server).await;
    // Reset through the base, step through the wrapper: one world.
    let seed = fields(&[("seed", Value::Int(3))]);
    result(&raw.env_call("base", "reset", vec![], seed).await);
    let one = || Value::Array(NdArray::from_shape_vec(vec![1], vec![0f32]).unwrap());
    let action = Value::Dict(fields(&[("a", one()), ("b", one())]));
    let stepped = result(
        &raw.env_call("wrapped", "step", vec![action], Dict::new())
            .await,
    );
    // Two world steps per control step (0.5 / 0.125 / 2 substeps): tick 3 -> 7.
    let info = &stepped.get("value").unwrap().as_seq().unwrap()[4];
    let ticks: Vec<i64> = ["a", "b"]
        .iter()
        .filter_map(|n| {
            info.get(n)
                .and_then(|i| i.get("tick"))
                .and_then(Value::as_i64)
        })
        .collect();
    assert_eq!(ticks, vec![7, 7], "{info:?}");
    // One controller per domain: the base's controller owns the wrapper too.
    let mut other = Raw::connect(&server).await;
    let denied = other
        .env_call("wrapped", "step", vec![Value::Null], Dict::new())
        .await;
    assert_eq!(code(&denied), "ownership_conflict");
    result(&raw.op("release", Some("base"), Dict::new()).await);

    // The bare world, driven in components mode.
    result(
        &raw.op(
            "acquire",
            Some("world"),
            fields(&[("mode", Value::from("components"))]),
        )
        .await,
    );
    result(&raw.begin("world", "step", "op1").await);
    let dt = result(
        &raw.call("world", "step", vec![], Dict::new(), Some("op1"))
            .await,
    );
    assert_eq!(dt.get("value"), Some(&Value::Float(0.125)));
    result(&raw.finish("complete", "world", "op1").await);

    // The attached node's world recovers a reset operation.
    result(
        &raw.op(
            "acquire",
            Some("sensor"),
            fields(&[("mode", Value::from("components"))]),
        )
        .await,
    );
    result(&raw.begin("sensor", "reset", "op2").await);
    let seed = fields(&[("seed", Value::Int(5))]);
    result(
        &raw.call("sensor/world", "reset", vec![], seed, Some("op2"))
            .await,
    );
    let done = result(&raw.finish("complete", "sensor", "op2").await);
    let sensor = done
        .as_seq()
        .unwrap()
        .iter()
        .find(|d| d.get("id").and_then(Value::as_str) == Some("sensor"))
        .unwrap();
    let observation = sensor
        .get("snapshot")
        .and_then(|s| s.get("data"))
        .and_then(|d| d.get("observation"))
        .and_then(Value::as_array)
        .unwrap();
    assert_eq!(observation.to_f64_vec(), vec![5.0]);
    server.shutdown().await;
}

/// A batched world whose environments advance by different amounts.
struct Uneven {
    last: Vec<f64>,
}

impl World for Uneven {
    fn step(&mut self) -> HostResult<f64> {
        self.last = vec![0.1, 0.2, 0.3];
        Ok(0.3)
    }
    fn reset(&mut self, _: &ResetArgs) -> HostResult<()> {
        Ok(())
    }
    fn world_timestep(&self) -> Option<f64> {
        None
    }
    fn batch_size(&self) -> Option<usize> {
        Some(3)
    }
    fn last_step_per_env(&self) -> Option<NdArray> {
        NdArray::from_shape_vec(vec![3], self.last.clone()).ok()
    }
}

#[tokio::test]
async fn batched_world_reports_per_env_dt() {
    let mut b = Server::builder(ServerConfig::default());
    b.register_world("uneven", Uneven { last: Vec::new() })
        .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    let sub = fields(&[("subscription_id", Value::from("s"))]);
    result(&raw.op("subscribe", Some("uneven"), sub).await);
    result(&raw.begin("uneven", "step", "op").await);
    let stepped = result(
        &raw.call("uneven", "step", vec![], Dict::new(), Some("op"))
            .await,
    );
    let dt = stepped
        .get("value")
        .and_then(Value::as_array)
        .expect("dt array");
    assert_eq!(
        (dt.shape().to_vec(), dt.to_f64_vec()),
        (vec![3], vec![0.1, 0.2, 0.3])
    );
    let done = result(&raw.finish("complete", "uneven", "op").await);
    let snapshot = done.as_seq().unwrap()[0].get("snapshot").cloned().unwrap();
    let data = snapshot
        .get("data")
        .and_then(|d| d.get("dt"))
        .and_then(Value::as_array);
    assert_eq!(data.map(NdArray::to_f64_vec), Some(vec![0.1, 0.2, 0.3]));
    server.shutdown().await;
}

#[tokio::test]
async fn a_wrapper_forwarding_as_tree_exports_and_drives_the_tree() {
    let mut b = Server::builder(ServerConfig::default());
    b.register_with("owning", || Ok(Hosted::env(Owning(make_composed("a", 1)?))))
        .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    let ids: Vec<String> = discover(&raw.op("discover", None, Dict::new()).await)
        .iter()
        .filter_map(|d| d.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    assert_eq!(
        ids,
        [
            "owning",
            "owning/world",
            "owning/node",
            "owning/node/a",
            "owning/node/b"
        ]
    );
    result(
        &raw.op(
            "acquire",
            Some("owning/world"),
            fields(&[("mode", Value::from("components"))]),
        )
        .await,
    );
    result(&raw.begin("owning/world", "reset", "r").await);
    result(
        &raw.call("owning/world", "reset", vec![], Dict::new(), Some("r"))
            .await,
    );
    let obs = result(
        &raw.call(
            "owning/node/a",
            "get_observation",
            vec![],
            Dict::new(),
            Some("r"),
        )
        .await,
    );
    assert!(
        obs.get("value").and_then(Value::as_array).is_some(),
        "{obs:?}"
    );
    result(&raw.finish("complete", "owning/world", "r").await);
    server.shutdown().await;
}

#[test]
fn ids_taken_twice_are_refused() {
    let mut b = Server::builder(ServerConfig::default());
    b.register_world("w", tick_world()).unwrap();
    // A generated ID that another registration of the domain already took.
    let clash = b.register_with("env", || {
        let env = Rc::new(RefCell::new(make_composed("a", 1)?));
        Ok(Hosted::env(Wrapper(env.clone()))
            .with_tree(env.clone())
            .with_env("env/world", env))
    });
    assert_eq!(clash, Err(RegisterError::Taken("env/world".into())));
    // An ID of another domain.
    let clash = b.register_with("x", || Ok(Hosted::world(tick_world()).with_node("w", &[])));
    assert!(clash.is_err(), "{clash:?}");
    let clash = b.register_with("y", || {
        Ok(Hosted::env(CounterEnv::new(None, CounterVariant::Plain))
            .with_env("w", CounterEnv::new(None, CounterVariant::Plain)))
    });
    assert_eq!(clash, Err(RegisterError::Taken("w".into())));
}

/// An ID with a NUL (or any control character) is refused when it is
/// registered, eagerly or as a factory, not later when the server starts
/// or listens; the rule is public for hosts that register before they
/// build a server.
#[test]
fn ids_with_control_characters_are_refused_at_registration() {
    let mut b = Server::builder(ServerConfig::default());
    for id in ["a\0b", "a\nb", "", "\u{85}"] {
        let eager = b.register_env(id, CounterEnv::new(None, CounterVariant::Plain));
        assert!(
            matches!(eager, Err(RegisterError::InvalidId(_))),
            "{id:?}: {eager:?}"
        );
        let lazy = b.register_factory(id, || {
            Ok(Hosted::env(CounterEnv::new(None, CounterVariant::Plain)))
        });
        assert!(
            matches!(lazy, Err(RegisterError::InvalidId(_))),
            "{id:?}: {lazy:?}"
        );
        assert!(
            unienv_remote::server::check_resource_id(id).is_err(),
            "{id:?}"
        );
    }
    assert!(unienv_remote::server::check_resource_id("arm/grip é").is_ok());
    let server = b.start().expect("nothing was registered");
    assert!(server.roots().is_empty());
}
