//! Observation and lifecycle: subscriptions, publication, latest-wins
//! delivery, subscription errors, controller boundary snapshots, factories
//! and idle eviction.

use crate::common;

use common::envs::{log, Log, RecNode, RecordingEnv};
use common::raw::{code, fields, result, Raw};
use std::time::Duration;
use unienv_remote::fixtures;
use unienv_remote::host::{Field, HostError};
use unienv_remote::server::{Hosted, Server, ServerConfig};
use unienv_remote::{Dict, NdArray, Value};

fn f32s(v: &[f32]) -> Value {
    Value::Array(NdArray::from_vec(v.to_vec()))
}

fn sub(id: &str, f: Option<&[&str]>) -> Dict {
    let mut d = fields(&[("subscription_id", Value::from(id))]);
    if let Some(f) = f {
        d.insert(
            "fields",
            Value::List(f.iter().map(|x| Value::from(*x)).collect()),
        );
    }
    d
}

/// Waits for the next snapshot or subscription error.
async fn next_event(raw: &mut Raw) -> Dict {
    if !raw.events.is_empty() {
        return raw.events.remove(0);
    }
    raw.recv().await.expect("an event")
}

fn fixture_server() -> Server {
    let mut b = Server::builder(ServerConfig::default());
    fixtures::register(&mut b).unwrap();
    b.start().expect("a valid server configuration")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_step_publishes_to_observers() {
    let server = fixture_server();
    let mut ctl = Raw::connect(&server).await;
    let mut obs = Raw::connect(&server).await;
    result(
        &ctl.env_call(
            "counter",
            "reset",
            vec![],
            fields(&[("seed", Value::Int(1))]),
        )
        .await,
    );
    // Subscriptions only receive future events.
    assert_eq!(
        result(&obs.op("subscribe", Some("counter"), sub("s1", None)).await),
        Value::from("s1")
    );
    assert_eq!(
        code(&obs.op("subscribe", Some("counter"), sub("s1", None)).await),
        "invalid_request"
    );
    assert_eq!(
        code(&obs.op("subscribe", Some("counter"), sub("", None)).await),
        "invalid_request"
    );
    assert_eq!(
        code(
            &obs.op("subscribe", Some("counter"), sub("s2", Some(&["dt"])))
                .await
        ),
        "invalid_request"
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let r = ctl
        .env_call("counter", "step", vec![f32s(&[1.0, 2.0])], Dict::new())
        .await;
    let seq = result(&r).get("descriptors").unwrap().as_seq().unwrap()[0]
        .get("sequence")
        .cloned();
    let ev = next_event(&mut obs).await;
    let keys: Vec<&str> = ev.keys().collect();
    assert_eq!(
        keys,
        vec![
            "version",
            "type",
            "session_id",
            "subscription_id",
            "resource_id",
            "operation_id",
            "kind",
            "sequence",
            "timestamp_ns",
            "descriptor_revision",
            "data",
            "descriptor"
        ]
    );
    assert_eq!(ev.get("type"), Some(&Value::from("snapshot")));
    assert_eq!(ev.get("kind"), Some(&Value::from("step")));
    assert_eq!(ev.get("sequence"), seq.as_ref());
    assert_eq!(
        ev.get("session_id").and_then(Value::as_str),
        obs.session.as_deref()
    );
    let ts = ev.get("timestamp_ns").and_then(Value::as_i64).unwrap();
    assert!(
        ts >= before && ts < before + 60_000_000_000,
        "wall clock timestamp"
    );
    let data = ev.get("data").unwrap().as_dict().unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        vec!["info", "observation", "reward", "terminated", "truncated"]
    );
    assert_eq!(data.get("reward"), Some(&Value::Float(5.0)));
    assert_eq!(
        ev.get("descriptor").and_then(|d| d.get("id")),
        Some(&Value::from("counter"))
    );
    // Unsubscribe stops the stream.
    result(
        &obs.op("unsubscribe", Some("counter"), sub("s1", None))
            .await,
    );
    result(
        &ctl.env_call("counter", "step", vec![f32s(&[1.0, 2.0])], Dict::new())
            .await,
    );
    result(&obs.op("describe", Some("counter"), Dict::new()).await);
    assert!(
        obs.events.is_empty(),
        "no events after unsubscribe: {:?}",
        obs.events
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_observers_get_the_latest_snapshot_only() {
    let server = fixture_server();
    let mut ctl = Raw::connect(&server).await;
    let mut obs = Raw::connect(&server).await;
    result(&ctl.env_call("counter", "reset", vec![], Dict::new()).await);
    result(
        &obs.op(
            "subscribe",
            Some("counter"),
            sub("s", Some(&["observation"])),
        )
        .await,
    );
    let steps = 200;
    let mut last_seq = 0;
    for _ in 0..steps {
        let r = ctl
            .env_call("counter", "step", vec![f32s(&[1.0, 1.0])], Dict::new())
            .await;
        last_seq = result(&r).get("descriptors").unwrap().as_seq().unwrap()[0]
            .get("sequence")
            .and_then(Value::as_i64)
            .unwrap();
    }
    // The observer read nothing meanwhile: its snapshots were replaced, not queued.
    let mut got = Vec::new();
    loop {
        let ev = next_event(&mut obs).await;
        let seq = ev.get("sequence").and_then(Value::as_i64).unwrap();
        got.push(seq);
        if seq == last_seq {
            let data = ev.get("data").unwrap();
            let pos = data.get("observation").unwrap().get("position").unwrap();
            assert_eq!(
                pos.as_array().unwrap().to_vec::<f32>().unwrap(),
                vec![steps as f32; 2]
            );
            break;
        }
    }
    assert!(
        got.len() < 40,
        "latest-wins: {} snapshots for {steps} boundaries",
        got.len()
    );
    assert!(
        got.windows(2).all(|w| w[0] < w[1]),
        "sequences increase: {got:?}"
    );
    server.shutdown().await;
}

fn tree_server(events: &Log, fail: bool, snapshot_fields: Option<Vec<Field>>) -> Server {
    let mut b = Server::builder(ServerConfig::default());
    let mut child = RecNode::new("a", events.clone(), vec![]);
    child.fail_getter = fail;
    let mut root = RecNode::new("root", events.clone(), vec![child]);
    root.snapshot_fields = snapshot_fields;
    b.register_node("tree", root).unwrap();
    b.start().expect("a valid server configuration")
}

async fn reset_op(raw: &mut Raw, id: &str) -> Dict {
    result(&raw.begin("tree", "reset", id).await);
    result(
        &raw.call("tree", "reset", vec![], Dict::new(), Some(id))
            .await,
    );
    raw.finish("complete", "tree", id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_errors_end_the_subscription_only() {
    let events = log();
    let server = tree_server(&events, true, None);
    let mut ctl = Raw::connect(&server).await;
    let mut obs = Raw::connect(&server).await;
    result(
        &obs.op(
            "subscribe",
            Some("tree/a"),
            sub("bad", Some(&["observation"])),
        )
        .await,
    );
    result(
        &obs.op("subscribe", Some("tree"), sub("good", Some(&["reward"])))
            .await,
    );
    let done = reset_op(&mut ctl, "op1").await;
    // The controller's result stands; only the failing resource lacks a snapshot.
    let descs = result(&done);
    let descs = descs.as_seq().unwrap();
    assert!(descs[0].get("snapshot").is_some());
    assert!(descs[1].get("snapshot").is_none());
    let mut kinds = Vec::new();
    for _ in 0..2 {
        let ev = next_event(&mut obs).await;
        kinds.push((
            ev.get("subscription_id")
                .and_then(Value::as_str)
                .unwrap()
                .to_string(),
            ev.get("type").and_then(Value::as_str).unwrap().to_string(),
        ));
        if ev.get("type") == Some(&Value::from("subscription_error")) {
            let e = ev.get("error").unwrap();
            assert_eq!(e.get("code"), Some(&Value::from("snapshot_error")));
            assert!(e
                .get("message")
                .unwrap()
                .as_str()
                .unwrap()
                .contains("sensor offline"));
            assert!(ev.get("data").is_none() && ev.get("descriptor").is_none());
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            ("bad".to_string(), "subscription_error".to_string()),
            ("good".to_string(), "snapshot".to_string())
        ]
    );
    // The failed read happened once for the boundary, shared by the
    // controller snapshot and the observer.
    let reads = events
        .lock()
        .iter()
        .filter(|e| *e == "a.get_observation")
        .count();
    assert_eq!(reads, 1);
    // The ended subscription receives nothing more; the other continues.
    reset_op(&mut ctl, "op2").await;
    let ev = next_event(&mut obs).await;
    assert_eq!(ev.get("subscription_id"), Some(&Value::from("good")));
    // Its ID is free again.
    result(
        &obs.op("subscribe", Some("tree/a"), sub("bad", Some(&["reward"])))
            .await,
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_shared_and_selection_follows_the_controller() {
    let events = log();
    let server = tree_server(&events, false, None);
    let mut ctl = Raw::connect(&server).await;
    let mut observers = Vec::new();
    for i in 0..3 {
        let mut o = Raw::connect(&server).await;
        result(
            &o.op(
                "subscribe",
                Some("tree/a"),
                sub(&format!("o{i}"), Some(&["observation"])),
            )
            .await,
        );
        observers.push(o);
    }
    // The controller subscribes to reward only: its boundary snapshots carry just that.
    result(
        &ctl.op("subscribe", Some("tree/a"), sub("mine", Some(&["reward"])))
            .await,
    );
    let done = result(&reset_op(&mut ctl, "op").await);
    let a = &done.as_seq().unwrap()[1];
    let snap = a.get("snapshot").unwrap();
    assert_eq!(
        snap.get("fields"),
        Some(&Value::List(vec!["reward".into()]))
    );
    let root = &done.as_seq().unwrap()[0];
    assert_eq!(
        root.get("snapshot")
            .unwrap()
            .get("fields")
            .unwrap()
            .as_seq()
            .unwrap()
            .len(),
        6,
        "defaults elsewhere"
    );
    for o in &mut observers {
        let ev = next_event(o).await;
        assert!(ev.get("data").unwrap().get("observation").is_some());
    }
    let reads = events
        .lock()
        .iter()
        .filter(|e| *e == "a.get_observation")
        .count();
    assert_eq!(
        reads, 1,
        "one read of (tree/a, observation) for the controller and three observers"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_snapshot_fields_limit_proactive_reads() {
    let events = log();
    let server = tree_server(&events, false, Some(vec![]));
    let mut ctl = Raw::connect(&server).await;
    let done = result(&reset_op(&mut ctl, "op").await);
    let root = &done.as_seq().unwrap()[0];
    let snap = root.get("snapshot").unwrap();
    assert_eq!(snap.get("fields"), Some(&Value::List(vec![])));
    assert_eq!(snap.get("data"), Some(&Value::Dict(Dict::new())));
    assert!(!events.lock().iter().any(|e| e == "root.get_observation"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_too_large_for_an_observer_end_its_subscription() {
    let server = fixture_server();
    let mut ctl = Raw::connect(&server).await;
    let mut obs = Raw::new(server.connect_memory());
    obs.hello(Some(50_000)).await;
    result(
        &obs.op(
            "subscribe",
            Some("large_render"),
            sub("r", Some(&["render", "reward"])),
        )
        .await,
    );
    result(
        &ctl.env_call("large_render", "reset", vec![], Dict::new())
            .await,
    );
    let ev = next_event(&mut obs).await;
    assert_eq!(ev.get("type"), Some(&Value::from("subscription_error")));
    assert_eq!(
        ev.get("error").unwrap().get("code"),
        Some(&Value::from("snapshot_error"))
    );
    // The controller was not affected, and no further events come.
    result(
        &ctl.env_call("large_render", "step", vec![f32s(&[1.0, 1.0])], Dict::new())
            .await,
    );
    result(&obs.op("describe", Some("large_render"), Dict::new()).await);
    tokio::time::sleep(Duration::from_millis(50)).await;
    result(&obs.op("describe", Some("large_render"), Dict::new()).await);
    assert!(obs.events.is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_operations_publish_nodes_not_envs() {
    let server = fixture_server();
    let mut ctl = Raw::connect(&server).await;
    let mut obs = Raw::connect(&server).await;
    result(
        &obs.op("subscribe", Some("devices/hand"), sub("hand", None))
            .await,
    );
    result(&ctl.begin("devices", "reset", "r1").await);
    result(
        &ctl.call(
            "devices",
            "reset",
            vec![],
            fields(&[("seed", Value::Int(4))]),
            Some("r1"),
        )
        .await,
    );
    result(&ctl.finish("complete", "devices", "r1").await);
    let ev = next_event(&mut obs).await;
    assert_eq!(ev.get("kind"), Some(&Value::from("reset")));
    assert_eq!(ev.get("operation_id"), Some(&Value::from("r1")));
    assert_eq!(ev.get("resource_id"), Some(&Value::from("devices/hand")));
    let data = ev.get("data").unwrap();
    assert_eq!(
        data.get("observation")
            .unwrap()
            .as_array()
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![4.0]
    );
    assert_eq!(
        data.get("info").unwrap().get("name"),
        Some(&Value::from("hand"))
    );
    server.shutdown().await;
}

// ---- factories ----

fn counting_factory(
    events: Log,
    fail_first: bool,
) -> impl FnMut() -> Result<Hosted, HostError> + Send {
    let mut runs = 0;
    move || {
        runs += 1;
        events.lock().push(format!("factory run {runs}"));
        if fail_first && runs == 1 {
            return Err(HostError::new("GPU not ready"));
        }
        Ok(Hosted::env(RecordingEnv::new("lazy", events.clone())))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factories_run_on_first_access_and_retry_after_failure() {
    let events = log();
    let mut b = Server::builder(ServerConfig::default());
    b.register_factory("lazy", counting_factory(events.clone(), true))
        .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    assert!(events.lock().is_empty(), "hello does not instantiate");
    let r = raw.op("describe", Some("lazy"), Dict::new()).await;
    assert_eq!(code(&r), "execution_error");
    assert!(r
        .get("error")
        .unwrap()
        .get("message")
        .unwrap()
        .as_str()
        .unwrap()
        .contains("GPU not ready"));
    let d = result(&raw.op("describe", Some("lazy"), Dict::new()).await);
    assert_eq!(d.as_seq().unwrap()[0].get("revision"), Some(&Value::Int(0)));
    assert_eq!(
        events.lock().clone(),
        vec!["factory run 1", "factory run 2"]
    );
    server.shutdown().await;
    assert_eq!(events.lock().last().map(String::as_str), Some("lazy.close"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_factories_are_evicted_and_revived() {
    let events = log();
    let config = ServerConfig {
        idle_timeout: Some(Duration::from_millis(150)),
        ..ServerConfig::default()
    };
    let mut b = Server::builder(config);
    b.register_factory("lazy", counting_factory(events.clone(), false))
        .unwrap();
    b.register_env("eager", RecordingEnv::new("eager", events.clone()))
        .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    result(&raw.env_call("lazy", "reset", vec![], Dict::new()).await);
    result(&raw.env_call("eager", "reset", vec![], Dict::new()).await);
    // A control claim prevents eviction.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!events.lock().contains(&"lazy.close".to_string()));
    result(&raw.op("release", Some("lazy"), Dict::new()).await);
    // So does a subscription.
    result(&raw.op("subscribe", Some("lazy"), sub("s", None)).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!events.lock().contains(&"lazy.close".to_string()));
    result(&raw.op("unsubscribe", Some("lazy"), sub("s", None)).await);
    // Idle now: disposed on its thread; the eager env stays.
    let mut evicted = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if events.lock().contains(&"lazy.close".to_string()) {
            evicted = true;
            break;
        }
    }
    assert!(evicted, "idle factory domain evicted: {:?}", events.lock());
    assert!(!events.lock().contains(&"eager.close".to_string()));
    // The next access revives it with a new revision.
    let d = result(&raw.op("describe", Some("lazy"), Dict::new()).await);
    assert_eq!(d.as_seq().unwrap()[0].get("revision"), Some(&Value::Int(2)));
    assert_eq!(
        events
            .lock()
            .iter()
            .filter(|e| e.starts_with("factory run"))
            .count(),
        2
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revival_must_keep_the_topology() {
    let events = log();
    let config = ServerConfig {
        idle_timeout: Some(Duration::from_millis(100)),
        ..ServerConfig::default()
    };
    let mut b = Server::builder(config);
    let e = events.clone();
    let mut runs = 0;
    b.register_factory("tree", move || {
        runs += 1;
        let children = (0..runs)
            .map(|i| RecNode::new(&format!("c{i}"), e.clone(), vec![]))
            .collect();
        Ok(Hosted::detached(RecNode::new("tree", e.clone(), children)))
    })
    .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    let d = result(&raw.op("describe", Some("tree/c0"), Dict::new()).await);
    assert_eq!(d.as_seq().unwrap().len(), 2);
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if events.lock().contains(&"tree.close".to_string()) {
            break;
        }
    }
    let r = raw.op("describe", Some("tree"), Dict::new()).await;
    assert_eq!(code(&r), "execution_error");
    assert!(r
        .get("error")
        .unwrap()
        .get("message")
        .unwrap()
        .as_str()
        .unwrap()
        .contains("topology"));
    // The rejected product was closed, and the domain stays pending.
    assert_eq!(
        events.lock().iter().filter(|e| *e == "tree.close").count(),
        2
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_subscribed_with_no_fields_gets_no_proactive_reads() {
    // As in the reference: the union of the controller's selections is
    // empty, so its boundary snapshot of that resource reads nothing (the
    // way to keep a consumptive sensor from being read).
    let events = log();
    let server = tree_server(&events, false, None);
    let mut ctl = Raw::connect(&server).await;
    result(
        &ctl.op("subscribe", Some("tree/a"), sub("none", Some(&[])))
            .await,
    );
    let done = result(&reset_op(&mut ctl, "op").await);
    let a = done
        .as_seq()
        .unwrap()
        .iter()
        .find(|d| d.get("id") == Some(&Value::from("tree/a")))
        .unwrap();
    let snap = a.get("snapshot").unwrap();
    assert_eq!(snap.get("fields"), Some(&Value::List(vec![])));
    assert_eq!(snap.get("data"), Some(&Value::Dict(Dict::new())));
    assert!(
        !events.lock().iter().any(|e| e.starts_with("a.get_")),
        "{:?}",
        events.lock()
    );
    server.shutdown().await;
}
