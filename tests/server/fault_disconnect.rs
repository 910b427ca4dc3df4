//! A peer that disconnects at every point of a component operation (after
//! begin, after a mutation, before complete, after complete) and in the
//! middle of an env call. Each case checks the documented outcome (an open
//! operation faults the domain; a completed one does not; a call already
//! running finishes and publishes, requests queued behind it for the gone
//! session never run) and that every other session carries on: an observer
//! of the same domain, a bystander on another domain, the next controller.

use crate::common;

use common::faults::{numbers, pair, revision_of, Gate, GatedEnv};
use common::raw::{code, fields, result, Raw};
use std::time::{Duration, Instant};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::{Dict, Value};

fn seed(s: i64) -> Dict {
    fields(&[("seed", Value::Int(s))])
}

use common::fixture_server;

/// Waits until the server has `n` sessions (a dropped peer's session ends
/// and tells its domains to detach).
async fn wait_sessions(server: &Server, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.session_count() != n {
        assert!(
            Instant::now() < deadline,
            "sessions: {}",
            server.session_count()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The next snapshot of at least `sequence` (older ones are skipped).
async fn snapshot_at_least(raw: &mut Raw, sequence: u64) -> Dict {
    loop {
        let m = raw.recv().await.expect("observer connection open");
        if m.get("type").and_then(Value::as_str) == Some("snapshot")
            && m.get("sequence").and_then(Value::as_u64).unwrap_or(0) >= sequence
        {
            return m;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Point {
    AfterBegin,
    AfterMutation,
    BeforeComplete,
    AfterComplete,
}

/// One case: `domain` is the resource that begins and resets (a world, or
/// a detached root), `watched` a node of the same domain for the observer.
async fn disconnect_at(point: Point, domain: &str, watched: &str) {
    let server = fixture_server();
    let mut observer = Raw::connect(&server).await;
    result(
        &observer
            .op(
                "subscribe",
                Some(watched),
                fields(&[("subscription_id", Value::from("o"))]),
            )
            .await,
    );
    let mut bystander = Raw::connect(&server).await;
    result(
        &bystander
            .env_call("counter", "reset", vec![], seed(3))
            .await,
    );

    // The controller gets as far as `point`, then its connection drops.
    let mut a = Raw::connect(&server).await;
    let mut resets_by_a = 0;
    result(&a.begin(domain, "reset", "a1").await);
    if point != Point::AfterBegin {
        result(&a.call(domain, "reset", vec![], seed(4), Some("a1")).await);
        resets_by_a += 1;
    }
    if matches!(point, Point::BeforeComplete | Point::AfterComplete) {
        result(
            &a.call(domain, "after_reset", vec![], Dict::new(), Some("a1"))
                .await,
        );
        resets_by_a += 1;
    }
    let mut completed = 0;
    if point == Point::AfterComplete {
        result(&a.finish("complete", domain, "a1").await);
        completed += 1;
    }
    drop(a);
    wait_sessions(&server, 2).await;

    // The bystander on another domain carries on.
    let r = result(
        &bystander
            .env_call("counter", "step", vec![pair(1.0)], Dict::new())
            .await,
    );
    let obs = r.get("value").unwrap().as_seq().unwrap()[0].clone();
    assert_eq!(numbers(obs.get("position")), vec![4.0, 4.0], "{point:?}");

    // The next controller: an open operation left the domain faulted.
    let mut c = Raw::connect(&server).await;
    let r = c.begin(domain, "step", "c1").await;
    if point == Point::AfterComplete {
        result(&r);
        result(&c.finish("complete", domain, "c1").await);
        completed += 1;
    } else {
        assert_eq!(code(&r), "faulted", "{point:?}: {r:?}");
    }
    // Recovery (or a plain reset) works, with a consistent revision.
    result(&c.begin(domain, "reset", "c2").await);
    result(&c.call(domain, "reset", vec![], seed(9), Some("c2")).await);
    let done = result(&c.finish("complete", domain, "c2").await);
    completed += 1;
    assert_eq!(
        revision_of(&done, domain),
        (resets_by_a + 1, completed),
        "{point:?}: (revision, sequence)"
    );
    // The observer of the domain sees the new controller's boundary.
    let snap = snapshot_at_least(&mut observer, completed).await;
    assert_eq!(
        snap.get("sequence").and_then(Value::as_u64),
        Some(completed)
    );
    assert_eq!(
        numbers(snap.get("data").and_then(|d| d.get("observation"))),
        vec![9.0],
        "{point:?}"
    );
    result(&c.begin(domain, "step", "c3").await);
    result(&c.finish("complete", domain, "c3").await);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_at_every_point_of_a_world_operation() {
    for point in [
        Point::AfterBegin,
        Point::AfterMutation,
        Point::BeforeComplete,
        Point::AfterComplete,
    ] {
        disconnect_at(point, "composed/world", "composed/node/b").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_at_every_point_of_a_detached_operation() {
    for point in [
        Point::AfterBegin,
        Point::AfterMutation,
        Point::BeforeComplete,
        Point::AfterComplete,
    ] {
        disconnect_at(point, "arm", "arm").await;
    }
}

/// The fixtures and `gated` (an env whose step waits at `gate`).
fn gated_server() -> (std::sync::Arc<Gate>, Server) {
    let gate = Gate::new();
    let server = common::fixture_server_with(ServerConfig::default(), |b| {
        b.register_env("gated", GatedEnv::new(gate.clone()))
            .map(|_| ())
    });
    (gate, server)
}

/// Sends a call of `gated`'s `method` without waiting for its answer;
/// returns its request ID.
async fn send_gated_call(
    raw: &mut Raw,
    method: &str,
    extra: &[(&str, Value)],
    op: &str,
) -> Option<Value> {
    let mut pairs = vec![("method", Value::from(method))];
    pairs.extend(extra.iter().cloned());
    pairs.push(("operation_id", Value::from(op)));
    let request = raw.request("call", Some("gated"), fields(&pairs));
    let id = request.get("request_id").cloned();
    raw.send_value(&Value::Dict(request)).await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_mid_env_call() {
    let (gate, server) = gated_server();
    let mut observer = Raw::connect(&server).await;
    result(
        &observer
            .op(
                "subscribe",
                Some("gated"),
                fields(&[("subscription_id", Value::from("o"))]),
            )
            .await,
    );
    let mut bystander = Raw::connect(&server).await;
    let mut a = Raw::connect(&server).await;
    result(&a.env_call("gated", "reset", vec![], seed(10)).await);
    // step(5) waits at the gate; step(1) is queued behind it.
    for (action, op) in [(5.0, "a5"), (1.0, "a1")] {
        let args = ("args", Value::Tuple(vec![Value::Float(action)]));
        send_gated_call(&mut a, "step", &[args], op).await;
    }
    gate.wait_reached(1).await;
    // A describe of another domain, sent after both steps: its answer
    // proves that the session read step(1) and queued it at the gated
    // domain (a session reads its messages in order and hands each to its
    // domain before reading the next), so the step below that never runs
    // was there to run.
    let probe = a.request("describe", Some("counter"), Dict::new());
    let probe = a.call_raw(probe).await;
    result(&probe);
    drop(a);
    wait_sessions(&server, 2).await;

    // Other domains answer while this one is busy.
    result(
        &bystander
            .env_call("counter", "reset", vec![], seed(1))
            .await,
    );
    // Another session's request waits its turn behind the running call:
    // a describe of another domain sent after it is answered first.
    let mut c = Raw::connect(&server).await;
    let render_id = send_gated_call(&mut c, "render", &[], "c1").await;
    let probe = c.request("describe", Some("counter"), Dict::new());
    let probe_id = probe.get("request_id").cloned();
    c.send_value(&Value::Dict(probe)).await;
    let first = c.recv().await.expect("an answer");
    assert_eq!(
        first.get("request_id").cloned(),
        probe_id,
        "the domain is still busy: {first:?}"
    );
    gate.open();
    let r = c.recv().await.expect("the render's answer");
    assert_eq!(r.get("request_id").cloned(), render_id, "{r:?}");
    // The running step finished (10 + 5); the one queued for the gone
    // session never ran.
    assert_eq!(result(&r).get("value"), Some(&Value::Float(15.0)));
    let snap = snapshot_at_least(&mut observer, 2).await;
    assert_eq!(snap.get("sequence").and_then(Value::as_u64), Some(2));
    assert_eq!(snap.get("kind").and_then(Value::as_str), Some("step"));
    assert_eq!(
        numbers(snap.get("data").and_then(|d| d.get("observation"))),
        vec![15.0]
    );
    // Not faulted: the next controller steps on.
    let r = result(
        &c.env_call("gated", "step", vec![Value::Float(1.0)], Dict::new())
            .await,
    );
    assert_eq!(revision_of(&r, "gated"), (1, 3));
    let snap = snapshot_at_least(&mut observer, 3).await;
    assert_eq!(
        numbers(snap.get("data").and_then(|d| d.get("observation"))),
        vec![16.0]
    );
    server.shutdown().await;
}

/// Another session's reset, queued at a domain while its controller's step
/// runs, and the controller then disconnects: when the step finishes, the
/// reset takes control (the controller's session is closed, so its control
/// is given up at the next request) rather than being refused as
/// `ownership_conflict` because the gone session's cleanup (its detach) is
/// queued behind it. The same holds for a peer that closes its connection
/// and reconnects at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_queued_before_the_controller_disconnected_takes_control() {
    let (gate, server) = gated_server();
    let mut a = Raw::connect(&server).await;
    result(&a.env_call("gated", "reset", vec![], seed(10)).await);
    let args = ("args", Value::Tuple(vec![Value::Float(5.0)]));
    send_gated_call(&mut a, "step", &[args], "a5").await;
    gate.wait_reached(1).await;

    let mut b = Raw::connect(&server).await;
    let kwargs = ("kwargs", Value::Dict(seed(20)));
    let reset_id = send_gated_call(&mut b, "reset", &[kwargs], "b-reset").await;
    // A describe of another domain, sent after the reset: its answer proves
    // that b's session handed the reset to the gated domain already.
    let probe = b.request("describe", Some("counter"), Dict::new());
    result(&b.call_raw(probe).await);
    drop(a);
    // a's session ended: its detach is queued behind b's reset.
    wait_sessions(&server, 1).await;
    gate.open();
    let r = b.recv().await.expect("the reset's answer");
    assert_eq!(r.get("request_id").cloned(), reset_id, "{r:?}");
    let Some(Value::Tuple(reset)) = result(&r).get("value").cloned() else {
        panic!("a reset's value: {r:?}");
    };
    assert_eq!(numbers(reset.get(1)), vec![20.0]);
    // b controls the domain, unfaulted (a's step had finished): it steps on.
    result(
        &b.env_call("gated", "step", vec![Value::Float(1.0)], Dict::new())
            .await,
    );
    let render = b.env_call("gated", "render", vec![], Dict::new()).await;
    assert_eq!(result(&render).get("value"), Some(&Value::Float(21.0)));
    server.shutdown().await;
}
