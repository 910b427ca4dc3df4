//! Regression tests for bugs found by the reliability work (fuzzing, fault
//! and load tests, probes), one per bug, each named after what broke.

use crate::common;

use common::raw::{code, fields, result, Raw};
use std::time::Duration;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::transport::TransportError;
use unienv_remote::{Dict, Value};

/// An observer whose negotiated limit holds its hello and subscribe answers
/// but not even a `subscription_error` (limits of 470 and 500 bytes here:
/// a long subscription ID makes that error 508, past hello's 422) was sent an empty frame,
/// an invalid envelope, when a snapshot did not fit. It must be
/// disconnected instead, and nobody else affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_error_that_cannot_fit_closes_the_session() {
    let server = common::fixture_server();
    let mut controller = Raw::connect(&server).await;
    let id = "s".repeat(100);
    for limit in [470, 500] {
        let mut observer = Raw::new(server.connect_memory());
        result(&observer.hello(Some(limit)).await);
        let sub = fields(&[("subscription_id", Value::from(id.as_str()))]);
        result(&observer.op("subscribe", Some("counter"), sub).await);
        result(
            &controller
                .env_call("counter", "reset", vec![], Dict::new())
                .await,
        );
        let next = tokio::time::timeout(Duration::from_secs(10), observer.transport.recv())
            .await
            .expect("the observer hears something");
        match next {
            Err(TransportError::Closed) => {}
            Ok(frame) => panic!("limit {limit}: sent a frame of {} bytes", frame.len()),
            Err(e) => panic!("{e}"),
        }
    }
    result(
        &controller
            .env_call("counter", "reset", vec![], Dict::new())
            .await,
    );
    server.shutdown().await;
}

/// The first crash of the requests fuzzer (`hello` asking for a 49-byte
/// limit) was the harness's mistake, not the server's: the limit a hello
/// asks for applies to its own answer, which cannot fit, so the session is
/// closed as the spec says. Pinned here: closed, never answered over the
/// limit, and the server carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_whose_own_answer_cannot_fit_closes_the_session() {
    let server = common::fixture_server();
    for limit in [8, 49, 200] {
        let mut raw = Raw::new(server.connect_memory());
        let hello = raw.request(
            "hello",
            None,
            fields(&[("max_message_size", Value::Int(limit))]),
        );
        raw.send_value(&Value::Dict(hello)).await;
        let next = tokio::time::timeout(Duration::from_secs(10), raw.transport.recv())
            .await
            .expect("an answer or the end");
        assert!(
            matches!(next, Err(TransportError::Closed)),
            "limit {limit}: {next:?}"
        );
    }
    let mut raw = Raw::connect(&server).await;
    result(&raw.op("describe", Some("counter"), Dict::new()).await);
    server.shutdown().await;
}

/// The second crash of the requests fuzzer was the harness's mistake too: a
/// hello asking for a limit that holds an error but not its own answer is
/// accepted (the session is ready with that limit, as in the reference) and
/// answered with `serialization_error`, which names the session. Pinned
/// here: closed below some limit, then such errors, then plain answers; after
/// the error, the session is ready (a second hello is `invalid_session`)
/// and a message over its limit closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hello_whose_answer_only_fits_as_an_error_leaves_the_session_ready() {
    let server = common::fixture_server();
    let mut seen = Vec::new();
    for limit in (200..=600).step_by(8) {
        let mut raw = Raw::new(server.connect_memory());
        let hello = raw.request(
            "hello",
            None,
            fields(&[("max_message_size", Value::Int(limit))]),
        );
        raw.send_value(&Value::Dict(hello)).await;
        let Some(answer) = raw.recv().await else {
            seen.push(0);
            continue;
        };
        if answer.get("type").and_then(Value::as_str) == Some("response") {
            seen.push(2);
            continue;
        }
        assert_eq!(code(&answer), "serialization_error", "limit {limit}");
        seen.push(1);
        let session = answer
            .get("session_id")
            .and_then(Value::as_str)
            .expect("the error names the session")
            .to_string();
        assert_eq!(session.len(), 32);
        raw.session = Some(session);
        raw.codec = unienv_remote::Codec::new(limit as usize).unwrap();
        let again = raw.op("hello", None, Dict::new()).await;
        assert_eq!(code(&again), "invalid_session", "limit {limit}");
        let big = raw.request(
            "describe",
            Some("counter"),
            fields(&[("padding", Value::from("x".repeat(limit as usize)))]),
        );
        let bytes = unienv_remote::Codec::default()
            .encode(&Value::Dict(big))
            .unwrap();
        raw.send_raw(bytes).await;
        assert!(raw.recv().await.is_none(), "limit {limit}: not closed");
    }
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen.contains(&1) && seen.contains(&2), "{seen:?}");
    let mut raw = Raw::connect(&server).await;
    result(&raw.op("describe", Some("counter"), Dict::new()).await);
    server.shutdown().await;
}

/// A session that started after shutdown had begun (an in-memory connect,
/// or a WebSocket handshake that completed late) never saw the shutdown
/// signal: it answered hello, then sent its requests to stopped domains,
/// where they were dropped unanswered, and the connection stayed open. It
/// must be closed at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_starts_during_shutdown_is_closed() {
    let server = common::fixture_server();
    server.shutdown().await;
    let mut raw = Raw::new(server.connect_memory());
    let hello = raw.request("hello", None, Dict::new());
    let _ = raw.transport.send(encode(&hello)).await;
    let describe = raw.request("describe", Some("counter"), Dict::new());
    let _ = raw.transport.send(encode(&describe)).await;
    // Whatever was answered, the connection ends; nothing waits forever.
    loop {
        match tokio::time::timeout(Duration::from_secs(5), raw.transport.recv()).await {
            Ok(Err(TransportError::Closed)) => break,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("{e}"),
            Err(_) => panic!("the session outlived the server"),
        }
    }
}

/// A session with more requests queued at a hung domain than it may have
/// in flight (64) waits for a slot before reading on; that wait ignored
/// shutdown, so the session was never closed and its peer waited forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_a_session_waiting_for_an_in_flight_slot() {
    let gate = common::faults::Gate::new();
    let config = ServerConfig {
        shutdown_timeout: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let mut b = Server::builder(config);
    b.register_env("hung", common::faults::GatedEnv::new(gate.clone()))
        .unwrap();
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    for i in 0..70 {
        let r = raw.request(
            "call",
            Some("hung"),
            fields(&[
                ("method", Value::from("step")),
                ("args", Value::Tuple(vec![Value::Float(5.0)])),
                ("operation_id", Value::from(format!("o{i}"))),
            ]),
        );
        raw.send_value(&Value::Dict(r)).await;
    }
    gate.wait_reached(1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    tokio::time::timeout(Duration::from_secs(15), server.shutdown())
        .await
        .expect("shutdown returns");
    match tokio::time::timeout(Duration::from_secs(5), raw.transport.recv()).await {
        Ok(Err(TransportError::Closed)) => {}
        Ok(Ok(frame)) => panic!("answered a request of a hung domain: {frame:?}"),
        Ok(Err(e)) => panic!("{e}"),
        Err(_) => panic!("the session was not closed by shutdown"),
    }
    gate.open();
}

fn encode(d: &Dict) -> bytes::Bytes {
    bytes::Bytes::from(
        unienv_remote::Codec::default()
            .encode(&Value::Dict(d.clone()))
            .unwrap(),
    )
}
