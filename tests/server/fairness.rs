//! Fair domain queues (SPEC §6, "Fair queues"): a domain serves the
//! sessions with requests waiting at it in turn, one request each, so a
//! pile of another session's requests delays a controller's call by at most
//! one of them; a session may have at most `max_queued_per_domain` requests
//! waiting at one domain, and one more is refused at once.

use crate::common;

use common::faults::{Gate, GatedEnv};
use common::raw::{code, fields, result, Raw};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{Dict, Value};

fn gated_server(config: ServerConfig) -> (std::sync::Arc<Gate>, Server) {
    let gate = Gate::new();
    let server = common::fixture_server_with(config, |b| {
        b.register_env("gated", GatedEnv::new(gate.clone()))
            .map(|_| ())
    });
    (gate, server)
}

/// Sends `gated`'s step with `action` without waiting for its answer.
async fn send_step(raw: &mut Raw, action: f64) -> Option<Value> {
    let args = ("args", Value::Tuple(vec![Value::Float(action)]));
    let op = ("operation_id", Value::from(format!("step-{action}")));
    let request = raw.request(
        "call",
        Some("gated"),
        fields(&[("method", "step".into()), args, op]),
    );
    let id = request.get("request_id").cloned();
    raw.send_value(&Value::Dict(request)).await;
    id
}

/// Sends `op` on `gated` without waiting; returns its request ID.
async fn send_op(raw: &mut Raw, op: &str, extra: Dict) -> Option<Value> {
    let request = raw.request(op, Some("gated"), extra);
    let id = request.get("request_id").cloned();
    raw.send_value(&Value::Dict(request)).await;
    id
}

/// A describe of another domain, answered once the session has handed
/// every earlier message to its domain (a session reads its messages in
/// order): after it, everything sent before is queued.
async fn all_queued(raw: &mut Raw) {
    result(&raw.op("describe", Some("counter"), Dict::new()).await);
}

/// The `sequence` of the `gated` descriptor in a describe result.
fn sequence(msg: &Dict) -> u64 {
    let Value::List(list) = result(msg) else {
        panic!("not a descriptor list: {msg:?}");
    };
    list.iter()
        .find(|d| d.get("id").and_then(Value::as_str) == Some("gated"))
        .and_then(|d| d.get("sequence"))
        .and_then(Value::as_u64)
        .expect("gated's sequence")
}

/// A session with 20 requests waiting at a domain does not hold up the
/// controller's next step behind all of them: the domain alternates
/// sessions, so at most one of the 20 runs between the controller's
/// steps. (First come, first served, all 20 ran first.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controllers_call_is_not_behind_another_sessions_pile() {
    let (gate, server) = gated_server(ServerConfig::default());
    let mut a = Raw::connect(&server).await;
    result(
        &a.env_call(
            "gated",
            "reset",
            vec![],
            fields(&[("seed", Value::Int(10))]),
        )
        .await,
    );
    // The controller's step waits at the gate: the domain is busy.
    let first = send_step(&mut a, 5.0).await;
    gate.wait_reached(1).await;

    // Another session piles up requests at the domain: a call (refused
    // when it runs: another session controls the domain) and, behind it,
    // describes that must follow it in order, so they wait at the domain.
    let mut b = Raw::connect(&server).await;
    let mut waiting = vec![send_op(&mut b, "call", fields(&[("method", "render".into())])).await];
    for _ in 0..20 {
        waiting.push(send_op(&mut b, "describe", Dict::new()).await);
    }
    all_queued(&mut b).await;
    // Then the controller's next step.
    let second = send_step(&mut a, 1.0).await;
    all_queued(&mut a).await;

    gate.open();
    for expected in [first, second] {
        let r = a.recv().await.expect("the controller's answer");
        assert_eq!(r.get("request_id").cloned(), expected, "{r:?}");
        result(&r);
    }
    let mut before_second = 0;
    let mut described = 0;
    for expected in waiting {
        let r = b.recv().await.expect("an answer");
        assert_eq!(r.get("request_id").cloned(), expected, "{r:?}");
        if r.get("type").and_then(Value::as_str) == Some("error") {
            assert_eq!(code(&r), "ownership_conflict");
            continue;
        }
        described += 1;
        // Sequence 2: after the first step (reset 1, step 2), before the
        // second.
        if sequence(&r) == 2 {
            before_second += 1;
        }
    }
    assert_eq!(described, 20);
    assert!(
        before_second <= 1,
        "{before_second} of the other session's requests ran before the controller's step"
    );
}

/// Past `max_queued_per_domain` requests waiting at one domain, a
/// session's next request there is refused at once with a certain
/// `invalid_request`; those waiting are answered when the domain is free,
/// and other domains still serve the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_the_per_domain_cap_are_refused() {
    let config = ServerConfig {
        max_queued_per_domain: 4,
        ..ServerConfig::default()
    };
    let (gate, server) = gated_server(config);
    let mut a = Raw::connect(&server).await;
    result(&a.env_call("gated", "reset", vec![], Dict::new()).await);
    send_step(&mut a, 5.0).await;
    gate.wait_reached(1).await;

    let mut b = Raw::connect(&server).await;
    let mut sent = vec![send_op(&mut b, "call", fields(&[("method", "render".into())])).await];
    for _ in 0..5 {
        sent.push(send_op(&mut b, "describe", Dict::new()).await);
    }
    // Four wait at the busy domain; the fifth and sixth are refused now,
    // while the domain is still busy.
    for expected in &sent[4..] {
        let r = b.recv().await.expect("a refusal");
        assert_eq!(r.get("request_id"), expected.as_ref(), "{r:?}");
        assert_eq!(code(&r), "invalid_request");
        let error = r.get("error").expect("an error");
        assert_eq!(error.get("uncertain"), Some(&Value::Bool(false)), "{r:?}");
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        assert!(message.contains("max_queued_per_domain"), "{message}");
    }
    assert_eq!(gate.reached(), 1, "the domain ran something else meanwhile");
    // Other domains still answer.
    all_queued(&mut b).await;

    gate.open();
    for expected in &sent[..4] {
        let r = b.recv().await.expect("an answer");
        assert_eq!(r.get("request_id"), expected.as_ref(), "{r:?}");
    }
    // With nothing waiting, the session's requests are taken again.
    result(&b.op("describe", Some("gated"), Dict::new()).await);
}

/// A response held for the session's other requests at domains
/// (`ServerConfig::reply_hold`) is written once its hold is up, whatever
/// they do: a simulator hung on the same connection delays another env's
/// replies by at most the hold, never until it returns (without the hold's
/// deadline every step below would wait for the gate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_env_does_not_hold_another_envs_replies_on_the_same_connection() {
    use std::time::Duration;
    use unienv_remote::client::{Client, ClientConfig};
    use unienv_remote::host::ResetArgs;
    let config = ServerConfig {
        reply_hold: Some(Duration::from_millis(20)),
        ..Default::default()
    };
    let (gate, server) = gated_server(config);
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    let client_config = ClientConfig::default()
        .with_timeout(Some(Duration::from_secs(30)))
        .with_discover(false);
    let client = Client::connect(&listener.url(), client_config)
        .await
        .expect("connect");
    let gated = client.env("gated").await.expect("gated");
    gated.reset(ResetArgs::with_seed(1)).await.expect("reset");
    let hung = tokio::spawn(async move { gated.step(Value::Float(5.0)).await });
    gate.wait_reached(1).await;
    let counter = client.env("counter").await.expect("counter");
    let steps = async {
        counter.reset(ResetArgs::with_seed(0)).await.expect("reset");
        for i in 1..=20 {
            let s = counter
                .step(common::faults::pair(1.0))
                .await
                .expect("a step beside the hung one");
            assert_eq!(
                common::faults::numbers(s.observation.get("position")),
                vec![i as f64; 2]
            );
        }
    };
    tokio::time::timeout(Duration::from_secs(60), steps)
        .await
        .expect("the steps were answered while the other env hung");
    assert!(!hung.is_finished(), "the gated step is still running");
    gate.open();
    hung.await.expect("the task").expect("the gated step");
}
