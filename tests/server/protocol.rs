//! Protocol tests of the server over the in-memory transport: every rule of
//! sessions, control, operations, faults and errors, checked on the wire.

use crate::common;

use common::envs::{log, RecNode, RecordingEnv, Wrapper};
use common::raw::{code, fields, result, uncertain, Raw};
use unienv_remote::fixtures;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{Dict, NdArray, Value};

fn fixture_server() -> Server {
    let mut b = Server::builder(ServerConfig::default());
    fixtures::register(&mut b).unwrap();
    b.start().expect("a valid server configuration")
}

fn f32s(v: &[f32]) -> Value {
    Value::Array(NdArray::from_vec(v.to_vec()))
}

fn seed(s: i64) -> Dict {
    fields(&[("seed", Value::Int(s))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_negotiates_and_guards_the_session() {
    let server = fixture_server();
    let mut raw = Raw::new(server.connect_memory());
    // A request before hello.
    let r = raw.op("describe", Some("counter"), Dict::new()).await;
    assert_eq!(code(&r), "invalid_session");
    let hello = raw.hello(Some(1 << 20)).await;
    let res = result(&hello);
    assert_eq!(res.get("max_message_size"), Some(&Value::Int(1 << 20)));
    assert_eq!(
        res.get("protocol_versions"),
        Some(&Value::List(vec![Value::Int(1)]))
    );
    assert_eq!(
        res.get("server").and_then(Value::as_str),
        Some("unienv-remote")
    );
    assert_eq!(
        res.get("session_id").and_then(Value::as_str).map(str::len),
        Some(32)
    );
    // hello twice.
    assert_eq!(code(&raw.hello(None).await), "invalid_session");
    // A wrong session ID.
    let mut r = raw.request("describe", Some("counter"), Dict::new());
    r.insert("session_id", "nope");
    assert_eq!(code(&raw.call_raw(r).await), "invalid_session");
    // Version 2.
    let mut r = raw.request("describe", Some("counter"), Dict::new());
    r.insert("version", 2);
    assert_eq!(code(&raw.call_raw(r).await), "version_mismatch");
    // A larger client limit is capped at the server's.
    let mut raw2 = Raw::new(server.connect_memory());
    let hello = raw2.hello(Some(1 << 40)).await;
    assert_eq!(
        result(&hello).get("max_message_size"),
        Some(&Value::Int(64 << 20))
    );
    // An invalid limit.
    let mut raw3 = Raw::new(server.connect_memory());
    assert_eq!(code(&raw3.hello(Some(4)).await), "invalid_request");
    let r = raw3
        .op(
            "hello",
            None,
            fields(&[("max_message_size", Value::Bool(true))]),
        )
        .await;
    assert_eq!(code(&r), "invalid_request");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_structured_errors() {
    let server = fixture_server();
    let mut raw = Raw::connect(&server).await;
    // Not a request dict at all.
    raw.send_value(&Value::List(vec![])).await;
    let r = raw.recv().await.unwrap();
    assert_eq!(code(&r), "invalid_request");
    assert_eq!(r.get("request_id"), Some(&Value::Null));
    // request_id not a string: echoed back.
    let mut r = raw.request("describe", Some("counter"), Dict::new());
    r.insert("request_id", 5);
    raw.send_value(&Value::Dict(r)).await;
    let msg = raw.recv().await.unwrap();
    assert_eq!(code(&msg), "invalid_request");
    assert_eq!(msg.get("request_id"), Some(&Value::Int(5)));
    // op not a string; unknown op; missing resource; unknown resource.
    let mut r = raw.request("describe", Some("counter"), Dict::new());
    r.insert("op", 3);
    assert_eq!(code(&raw.call_raw(r).await), "invalid_request");
    assert_eq!(
        code(&raw.op("frobnicate", Some("counter"), Dict::new()).await),
        "unsupported_operation"
    );
    assert_eq!(
        code(&raw.op("describe", None, Dict::new()).await),
        "invalid_request"
    );
    assert_eq!(
        code(&raw.op("describe", Some("nothing"), Dict::new()).await),
        "not_found"
    );
    // The connection is still fine.
    let d = result(&raw.op("describe", Some("counter"), Dict::new()).await);
    assert_eq!(d.as_seq().map(<[Value]>::len), Some(1));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_envelopes_close_the_connection() {
    let server = fixture_server();
    for bad in [
        vec![0u8, 0],
        vec![0, 0, 0, 9, b'{'],
        b"\0\0\0\x04null\xff".to_vec(),
    ] {
        let mut raw = Raw::connect(&server).await;
        raw.send_raw(bad.clone()).await;
        let got = raw.recv().await;
        assert!(
            got.is_none(),
            "connection should close after {bad:?}, got {got:?}"
        );
    }
    // Over the negotiated limit.
    let mut raw = Raw::new(server.connect_memory());
    raw.hello(Some(1024)).await;
    raw.codec = unienv_remote::Codec::default();
    let r = raw.request(
        "describe",
        Some("counter"),
        fields(&[("pad", Value::from("x".repeat(2000)))]),
    );
    raw.send_value(&Value::Dict(r)).await;
    assert!(
        raw.recv().await.is_none(),
        "an oversized message closes the connection"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_and_describe() {
    let server = fixture_server();
    let mut raw = Raw::connect(&server).await;
    let all = result(&raw.op("discover", None, Dict::new()).await);
    let ids: Vec<&str> = all
        .as_seq()
        .unwrap()
        .iter()
        .filter_map(|d| d.get("id")?.as_str())
        .collect();
    for id in [
        "counter",
        "counter3",
        "arm",
        "devices",
        "devices/arm%2Fgrip",
        "devices/hand",
        "lazy",
        "bench_batch64",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    let devices = result(&raw.op("describe", Some("devices/hand"), Dict::new()).await);
    let devices = devices.as_seq().unwrap();
    assert_eq!(devices.len(), 3, "describe returns the whole domain");
    let root = &devices[0];
    assert_eq!(
        root.get("domain_id").and_then(Value::as_str),
        Some("devices")
    );
    assert_eq!(root.get("world_id"), Some(&Value::Null));
    let children = root.get("children").unwrap().as_dict().unwrap();
    assert_eq!(
        children.get("arm/grip").and_then(Value::as_str),
        Some("devices/arm%2Fgrip")
    );
    assert_eq!(
        root.get("reset_priorities"),
        Some(&Value::List(vec![Value::Int(0)]))
    );
    assert_eq!(
        root.get("supported_render_modes"),
        Some(&Value::Tuple(vec![]))
    );
    let ops = root.get("operations").unwrap().as_seq().unwrap();
    assert_eq!(ops.len(), 14);
    let counter = result(&raw.op("describe", Some("counter"), Dict::new()).await);
    let c = &counter.as_seq().unwrap()[0];
    assert_eq!(
        c.get("operations"),
        Some(&Value::List(vec![
            "render".into(),
            "reset".into(),
            "step".into()
        ]))
    );
    assert_eq!(
        c.get("metadata").and_then(|m| m.get("render_modes")),
        Some(&Value::List(vec![]))
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_snapshots_are_omitted_by_default() {
    let server = fixture_server();
    let mut raw = Raw::connect(&server).await;
    let r = raw.env_call("composed", "reset", vec![], seed(2)).await;
    let res = result(&r);
    let descs = res.get("descriptors").unwrap().as_seq().unwrap();
    assert!(
        descs[0].get("snapshot").is_none(),
        "no env snapshot by default"
    );
    // Worlds and nodes still carry theirs.
    assert!(descs[1..].iter().all(|d| d.get("snapshot").is_some()));
    assert_eq!(
        descs[1].get("snapshot").unwrap().get("data"),
        Some(&Value::Dict(Dict::new()))
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_mode_calls() {
    let mut b = Server::builder(ServerConfig {
        env_boundary_snapshots: true,
        ..ServerConfig::default()
    });
    fixtures::register(&mut b).unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    let r = raw.env_call("counter", "reset", vec![], seed(2)).await;
    let res = result(&r);
    let value = res.get("value").unwrap().as_seq().unwrap();
    assert_eq!(value.len(), 3);
    assert_eq!(value[2].get("seed"), Some(&Value::Int(2)));
    let desc = &res.get("descriptors").unwrap().as_seq().unwrap()[0];
    assert_eq!(desc.get("sequence"), Some(&Value::Int(1)));
    assert_eq!(desc.get("revision"), Some(&Value::Int(1)));
    let snap = desc.get("snapshot").expect("controller snapshot");
    // Every env field but render is selected; only the reset's are present.
    assert_eq!(
        snap.get("fields"),
        Some(&Value::List(
            [
                "context",
                "info",
                "observation",
                "reward",
                "terminated",
                "truncated"
            ]
            .map(Value::from)
            .to_vec()
        ))
    );
    let data = snap.get("data").and_then(Value::as_dict).unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        vec!["context", "info", "observation"]
    );
    // Big-endian actions are normalized before the env sees them.
    let be = NdArray::from_bytes(
        unienv_remote::DType::F32.with_byte_order(unienv_remote::ByteOrder::Big),
        vec![2],
        bytes::Bytes::from(vec![0x3f, 0x80, 0, 0, 0x40, 0, 0, 0]),
    )
    .unwrap();
    let r = raw
        .env_call("counter", "step", vec![Value::Array(be)], Dict::new())
        .await;
    let value = result(&r).get("value").cloned().unwrap();
    let items = value.as_seq().unwrap();
    assert_eq!(items[1], Value::Float(7.0));
    // An env mutation without an operation ID is refused before it runs.
    let r = raw
        .call(
            "counter",
            "step",
            vec![f32s(&[1.0, 1.0])],
            Dict::new(),
            None,
        )
        .await;
    assert_eq!(code(&r), "invalid_request");
    assert!(!uncertain(&r));
    // Only exported methods are callable.
    for m in ["close", "__init__", "reload", "get_observation"] {
        let r = raw.env_call("counter", m, vec![], Dict::new()).await;
        assert_eq!(code(&r), "unsupported_operation", "{m}");
    }
    // Argument errors are invalid_request and do not fault the domain.
    let r = raw.env_call("counter", "step", vec![], Dict::new()).await;
    assert_eq!(code(&r), "invalid_request");
    let r = raw
        .env_call("counter", "reset", vec![Value::Int(1)], Dict::new())
        .await;
    assert_eq!(code(&r), "invalid_request");
    let r = raw.env_call("counter", "render", vec![], Dict::new()).await;
    let frame = result(&r).get("value").cloned().unwrap();
    assert_eq!(frame.as_array().unwrap().shape(), &[3, 4, 3]);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_conflicts_and_release() {
    let server = fixture_server();
    let mut a = Raw::connect(&server).await;
    let mut b = Raw::connect(&server).await;
    result(&a.env_call("counter", "reset", vec![], seed(0)).await);
    // Another session, any mode.
    assert_eq!(
        code(&b.env_call("counter", "reset", vec![], Dict::new()).await),
        "ownership_conflict"
    );
    assert_eq!(
        code(
            &b.op(
                "acquire",
                Some("counter"),
                fields(&[("mode", "env".into())])
            )
            .await
        ),
        "ownership_conflict"
    );
    // The same session in another mode.
    assert_eq!(
        code(
            &a.op(
                "acquire",
                Some("counter"),
                fields(&[("mode", "components".into())])
            )
            .await
        ),
        "ownership_conflict"
    );
    assert_eq!(
        code(
            &a.op(
                "acquire",
                Some("counter"),
                fields(&[("mode", "bogus".into())])
            )
            .await
        ),
        "invalid_request"
    );
    // Release hands control over.
    result(&a.op("release", Some("counter"), Dict::new()).await);
    result(
        &b.op(
            "acquire",
            Some("counter"),
            fields(&[("mode", "env".into())]),
        )
        .await,
    );
    // Disconnecting releases too.
    drop(b);
    let mut ok = false;
    for _ in 0..100 {
        let r = a.env_call("counter", "reset", vec![], Dict::new()).await;
        if r.get("type").and_then(Value::as_str) == Some("response") {
            ok = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(ok, "control released after disconnect");
    // Detached domains accept components mode only.
    assert_eq!(
        code(
            &a.op("acquire", Some("arm"), fields(&[("mode", "env".into())]))
                .await
        ),
        "invalid_request"
    );
    result(
        &a.op(
            "acquire",
            Some("arm"),
            fields(&[("mode", "components".into())]),
        )
        .await,
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn component_operations_and_recovery() {
    let server = fixture_server();
    let mut raw = Raw::connect(&server).await;
    let act = || vec![f32s(&[2.0])];
    // Mutations need a matching operation.
    let r = raw
        .call("devices", "set_next_action", act(), Dict::new(), None)
        .await;
    assert_eq!(code(&r), "invalid_operation");
    // Reads outside an operation are fine.
    result(
        &raw.call("devices", "get_observation", vec![], Dict::new(), None)
            .await,
    );
    result(&raw.begin("devices", "reset", "op1").await);
    assert_eq!(
        code(&raw.begin("devices", "step", "op2").await),
        "operation_in_progress"
    );
    // Reads inside an operation must carry its ID.
    let r = raw
        .call("devices", "get_observation", vec![], Dict::new(), None)
        .await;
    assert_eq!(code(&r), "invalid_operation");
    // Step hooks are refused inside a reset operation.
    let r = raw
        .call(
            "devices",
            "set_next_action",
            act(),
            Dict::new(),
            Some("op1"),
        )
        .await;
    assert_eq!(code(&r), "invalid_operation");
    // Resetting only a child does not satisfy the recovery rule.
    result(
        &raw.call("devices/hand", "reset", vec![], seed(1), Some("op1"))
            .await,
    );
    assert_eq!(
        code(&raw.finish("complete", "devices", "op1").await),
        "invalid_operation"
    );
    // The root's reset does.
    result(
        &raw.call("devices", "reset", vec![], seed(3), Some("op1"))
            .await,
    );
    let done = result(&raw.finish("complete", "devices", "op1").await);
    let descs = done.as_seq().unwrap();
    assert_eq!(descs.len(), 3);
    let snap = descs[0].get("snapshot").expect("boundary snapshot");
    assert_eq!(snap.get("sequence"), Some(&Value::Int(1)));
    assert_eq!(
        snap.get("fields"),
        Some(&Value::List(
            [
                "context",
                "info",
                "observation",
                "reward",
                "terminated",
                "truncated"
            ]
            .map(Value::from)
            .to_vec()
        ))
    );
    assert_eq!(
        snap.get("data").and_then(|d| d.get("reward")),
        Some(&Value::Float(3.0))
    );
    // A step operation: reset hooks refused inside it.
    result(&raw.begin("devices", "step", "op3").await);
    let r = raw
        .call("devices", "reset", vec![], Dict::new(), Some("op3"))
        .await;
    assert_eq!(code(&r), "invalid_operation");
    result(
        &raw.call(
            "devices",
            "set_next_action",
            act(),
            Dict::new(),
            Some("op3"),
        )
        .await,
    );
    result(
        &raw.call(
            "devices",
            "post_environment_step",
            vec![Value::Float(0.1)],
            Dict::new(),
            Some("op3"),
        )
        .await,
    );
    result(&raw.finish("complete", "devices", "op3").await);
    let obs = result(
        &raw.call("devices", "get_observation", vec![], Dict::new(), None)
            .await,
    );
    assert_eq!(
        obs.get("value")
            .and_then(Value::as_array)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![5.0]
    );
    // Abort faults the domain: stepping is refused until a reset operation.
    result(&raw.begin("devices", "step", "op4").await);
    assert_eq!(
        code(&raw.finish("abort", "devices", "wrong").await),
        "invalid_operation"
    );
    result(&raw.finish("abort", "devices", "op4").await);
    assert_eq!(code(&raw.begin("devices", "step", "op5").await), "faulted");
    assert_eq!(
        code(
            &raw.call("devices", "get_observation", vec![], Dict::new(), None)
                .await
        ),
        "faulted"
    );
    result(&raw.begin("devices", "reload", "op6").await);
    result(
        &raw.call("devices", "reload", vec![], seed(0), Some("op6"))
            .await,
    );
    result(&raw.finish("complete", "devices", "op6").await);
    result(&raw.begin("devices", "step", "op7").await);
    result(&raw.finish("complete", "devices", "op7").await);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_mid_operation_faults_the_domain() {
    let server = fixture_server();
    let mut a = Raw::connect(&server).await;
    result(&a.begin("arm", "step", "x").await);
    drop(a);
    let mut b = Raw::connect(&server).await;
    let mut code_seen = String::new();
    for _ in 0..100 {
        let r = b.begin("arm", "step", "y").await;
        code_seen = if r.get("type").and_then(Value::as_str) == Some("error") {
            code(&r)
        } else {
            "ok".into()
        };
        if code_seen != "ownership_conflict" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(code_seen, "faulted");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_and_panicking_simulators_fault_only_their_domain() {
    let events = log();
    let mut b = Server::builder(ServerConfig::default());
    b.register_env("good", RecordingEnv::new("good", events.clone()))
        .unwrap();
    b.register_env("bad", RecordingEnv::new("bad", events.clone()))
        .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    result(&raw.env_call("bad", "reset", vec![], Dict::new()).await);
    result(&raw.env_call("good", "reset", vec![], Dict::new()).await);
    // An error return: execution_error, uncertain, domain faulted.
    let r = raw
        .env_call("bad", "step", vec![Value::Float(-1.0)], Dict::new())
        .await;
    assert_eq!(code(&r), "execution_error");
    assert!(uncertain(&r));
    assert_eq!(
        code(
            &raw.env_call("bad", "step", vec![Value::Float(1.0)], Dict::new())
                .await
        ),
        "faulted"
    );
    // A panic: the same, and the server carries on.
    result(&raw.env_call("bad", "reset", vec![], Dict::new()).await);
    let r = raw
        .env_call("bad", "step", vec![Value::Float(7.0)], Dict::new())
        .await;
    assert_eq!(code(&r), "execution_error");
    assert!(uncertain(&r));
    assert!(r
        .get("error")
        .unwrap()
        .get("message")
        .unwrap()
        .as_str()
        .unwrap()
        .contains("simulator exploded"));
    result(
        &raw.env_call("good", "step", vec![Value::Float(1.0)], Dict::new())
            .await,
    );
    // Reset recovers the panicked domain.
    result(&raw.env_call("bad", "reset", vec![], Dict::new()).await);
    result(
        &raw.env_call("bad", "step", vec![Value::Float(2.0)], Dict::new())
            .await,
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_over_the_limit_are_serialization_errors() {
    let server = fixture_server();
    let mut raw = Raw::new(server.connect_memory());
    raw.hello(Some(100_000)).await;
    result(
        &raw.env_call("large_info", "reset", vec![], Dict::new())
            .await,
    );
    // A mutation whose result does not fit: uncertain, faulted.
    let r = raw
        .env_call("large_info", "step", vec![f32s(&[1.0, 1.0])], Dict::new())
        .await;
    assert_eq!(code(&r), "serialization_error");
    assert!(uncertain(&r));
    assert_eq!(
        code(
            &raw.env_call("large_info", "step", vec![f32s(&[1.0, 1.0])], Dict::new())
                .await
        ),
        "faulted"
    );
    // A read whose result does not fit: certain, nothing faulted.
    result(
        &raw.env_call("large_render", "reset", vec![], Dict::new())
            .await,
    );
    let r = raw
        .env_call("large_render", "render", vec![], Dict::new())
        .await;
    assert_eq!(code(&r), "serialization_error");
    assert!(!uncertain(&r));
    result(
        &raw.env_call("large_render", "step", vec![f32s(&[1.0, 1.0])], Dict::new())
            .await,
    );
    // A failing render is an execution error, certain.
    result(
        &raw.env_call("broken_render", "reset", vec![], Dict::new())
            .await,
    );
    let r = raw
        .env_call("broken_render", "render", vec![], Dict::new())
        .await;
    assert_eq!(code(&r), "execution_error");
    assert!(!uncertain(&r));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_reads_is_disconnected_alone() {
    let server = fixture_server();
    let mut flood = Raw::connect(&server).await;
    let mut other = Raw::connect(&server).await;
    // Pipeline far more requests than the reliable queue holds without
    // reading any response.
    let sent = tokio::spawn(async move {
        let mut n = 0;
        for _ in 0..2000 {
            let r = flood.request("describe", Some("bench_batch64"), Dict::new());
            let bytes = flood.codec.encode(&Value::Dict(r)).unwrap();
            if flood
                .transport
                .send(bytes::Bytes::from(bytes))
                .await
                .is_err()
            {
                break;
            }
            n += 1;
        }
        (n, flood)
    });
    let (n, mut flood) = tokio::time::timeout(std::time::Duration::from_secs(20), sent)
        .await
        .unwrap()
        .unwrap();
    assert!(
        n < 2000,
        "the flooding peer should have been cut off, sent {n}"
    );
    // Its connection is closed: drain until the end.
    let mut received = 0;
    while flood.transport.recv().await.is_ok() {
        received += 1;
    }
    assert!(received <= 64 + 16, "received {received}");
    // Everyone else carries on.
    result(
        &other
            .env_call("counter", "reset", vec![], Dict::new())
            .await,
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_disposes_each_domain_once_wrapper_first() {
    let events = log();
    let mut b = Server::builder(ServerConfig::default());
    b.register_env(
        "wrapped",
        Wrapper {
            inner: RecordingEnv::new("inner", events.clone()),
            log: events.clone(),
        },
    )
    .unwrap();
    let e2 = events.clone();
    b.register_node(
        "tree",
        RecNode::new(
            "root",
            e2.clone(),
            vec![
                RecNode::new("a", e2.clone(), vec![]),
                RecNode::new("b", e2, vec![]),
            ],
        ),
    )
    .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    result(&raw.env_call("wrapped", "reset", vec![], Dict::new()).await);
    drop(raw);
    server.shutdown().await;
    // Domains close in parallel, each on its own thread: check the order
    // within each domain and that every hook ran exactly once.
    let got = events.lock().clone();
    let closes = |names: &[&str]| -> Vec<String> {
        got.iter()
            .filter(|e| names.iter().any(|n| *e == &format!("{n}.close")))
            .cloned()
            .collect()
    };
    assert_eq!(
        closes(&["wrapper", "inner"]),
        vec!["wrapper.close", "inner.close"]
    );
    assert_eq!(
        closes(&["root", "a", "b"]),
        vec!["root.close", "a.close", "b.close"]
    );
    assert_eq!(got.iter().filter(|e| e.ends_with(".close")).count(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_conflicts_are_rejected_whole() {
    let events = log();
    let mut b = Server::builder(ServerConfig::default());
    b.register_env("x", RecordingEnv::new("x", events.clone()))
        .unwrap();
    assert!(b
        .register_env("x", RecordingEnv::new("x2", events.clone()))
        .is_err());
    assert!(b
        .register_env("", RecordingEnv::new("e", events.clone()))
        .is_err());
    // A tree whose child IDs would collide with an existing registration.
    b.register_env("t/a", RecordingEnv::new("ta", events.clone()))
        .unwrap();
    let e = b.register_node(
        "t",
        RecNode::new(
            "t",
            events.clone(),
            vec![RecNode::new("a", events.clone(), vec![])],
        ),
    );
    assert!(e.is_err(), "{e:?}");
    // Duplicate child names.
    let e = b.register_node(
        "dup",
        RecNode::new(
            "dup",
            events.clone(),
            vec![
                RecNode::new("a", events.clone(), vec![]),
                RecNode::new("a", events, vec![]),
            ],
        ),
    );
    assert!(e.is_err());
    let server = b.start().expect("a valid server configuration");
    assert_eq!(server.roots(), &["x".to_string(), "t/a".to_string()]);
    let mut raw = Raw::connect(&server).await;
    assert_eq!(
        code(&raw.op("describe", Some("t"), Dict::new()).await),
        "not_found"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_and_unbuilt_factory_roots_follow_the_reference() {
    let server = fixture_server();
    let mut raw = Raw::connect(&server).await;
    // The reference compares `version != 1` in Python: True and 1.0 are 1.
    for v in [Value::Bool(true), Value::Float(1.0), Value::UInt(1)] {
        let mut r = raw.request("describe", Some("counter"), Dict::new());
        r.insert("version", v.clone());
        let answer = raw.call_raw(r).await;
        assert_eq!(
            answer.get("type").and_then(Value::as_str),
            Some("response"),
            "{v:?}"
        );
    }
    for v in [
        Value::Bool(false),
        Value::Float(1.5),
        Value::from("1"),
        Value::Null,
    ] {
        let mut r = raw.request("describe", Some("counter"), Dict::new());
        r.insert("version", v.clone());
        assert_eq!(code(&raw.call_raw(r).await), "version_mismatch", "{v:?}");
    }
    // Releasing or unsubscribing at a factory root never built is null, as
    // in the reference (nothing is built); unknown IDs under it are not.
    assert!(!server.is_lazy("counter"));
    assert_eq!(
        result(&raw.op("release", Some("lazy"), Dict::new()).await),
        Value::Null
    );
    let unsub = fields(&[("subscription_id", Value::from("nope"))]);
    assert_eq!(
        result(&raw.op("unsubscribe", Some("lazy"), unsub).await),
        Value::Null
    );
    assert_eq!(
        code(&raw.op("release", Some("lazy/nothing"), Dict::new()).await),
        "not_found"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integers_beyond_64_bits_get_a_structured_error_not_a_closed_connection() {
    // `env.reset(seed=2**64)`: the envelope is valid (the reference runs
    // it); a Rust simulator cannot take the seed, so the request is refused
    // and the session carries on.
    let server = fixture_server();
    let mut raw = Raw::connect(&server).await;
    let big = unienv_remote::codec::BigInt::parse("18446744073709551616").unwrap();
    let big_seed = fields(&[("seed", Value::BigInt(big))]);
    let answer = raw.env_call("counter", "reset", vec![], big_seed).await;
    assert_eq!(code(&answer), "invalid_request");
    assert!(!uncertain(&answer));
    result(&raw.env_call("counter", "reset", vec![], seed(3)).await);
    server.shutdown().await;
}
