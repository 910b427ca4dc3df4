//! Server shutdown with requests in flight on several sessions (memory and
//! WebSocket, one of them waiting on a hung simulator): every request is
//! answered or its connection closed, never answered twice or for another
//! request; nothing hangs; shutdown returns within its timeout although a
//! simulator never returns; a simulator whose close panics does not keep
//! the others from being closed.

use crate::common;

use bytes::Bytes;
use common::faults::{numbers, pair, CountClose, Gate, GatedEnv};
use common::raw::{fields, result, Raw};
use futures_util::{SinkExt, StreamExt};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::fixtures::{CounterEnv, CounterVariant};
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::transport::TransportError;
use unienv_remote::{Codec, Dict, Value};

fn call(method: &str, args: Vec<Value>, op: &str) -> Dict {
    fields(&[
        ("method", Value::from(method)),
        ("args", Value::Tuple(args)),
        ("operation_id", Value::from(op)),
    ])
}

/// Pipelines `n` requests without reading; returns the IDs sent.
async fn pipeline(raw: &mut Raw, n: usize, make: impl Fn(&mut Raw, usize) -> Dict) -> Vec<Value> {
    let mut ids = Vec::new();
    for i in 0..n {
        let r = make(raw, i);
        ids.push(r.get("request_id").cloned().unwrap());
        raw.send_value(&Value::Dict(r)).await;
    }
    ids
}

/// Reads until the connection closes; checks that every answer is for a
/// request sent and none is answered twice. Returns the answers (snapshots
/// left out) in the order they arrived.
async fn drain(raw: &mut Raw, sent: &[Value]) -> Vec<Dict> {
    let sent: HashSet<String> = sent
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let mut seen = HashSet::new();
    let mut answers = Vec::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), raw.transport.recv())
            .await
            .expect("the connection closes within 10 s");
        let frame = match frame {
            Ok(f) => f,
            Err(TransportError::Closed) => return answers,
            Err(e) => panic!("{e}"),
        };
        let Value::Dict(m) = raw.codec.decode(frame).unwrap() else {
            panic!("an answer that is not a dict")
        };
        if m.get("type").and_then(Value::as_str) == Some("snapshot") {
            continue;
        }
        let id = m
            .get("request_id")
            .and_then(Value::as_str)
            .unwrap()
            .to_string();
        assert!(
            sent.contains(&id),
            "an answer for a request never sent: {id}"
        );
        assert!(seen.insert(id.clone()), "answered twice: {id}");
        answers.push(m);
    }
}

/// The answers of one session's pipelined requests to one domain are the
/// first of them, in the order sent: none skipped, none run out of turn.
fn assert_answered_in_order(answers: &[Dict], sent: &[Value]) {
    let answered: Vec<&Value> = answers
        .iter()
        .map(|m| m.get("request_id").expect("a request_id"))
        .collect();
    let first: Vec<&Value> = sent.iter().take(answers.len()).collect();
    assert_eq!(answered, first, "not the first requests, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_requests_in_flight_answers_or_closes_each() {
    let gate = Gate::new();
    let config = ServerConfig {
        shutdown_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let mut b = Server::builder(config);
    unienv_remote::fixtures::register(&mut b).unwrap();
    b.register_env("hung", GatedEnv::new(gate.clone())).unwrap();
    let server = b.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.unwrap();

    // Three memory sessions with pipelined work on three domains; the third
    // is stuck behind a step that never returns.
    let mut a = Raw::connect(&server).await;
    let mut c = Raw::connect(&server).await;
    let mut h = Raw::connect(&server).await;
    let a_ids = pipeline(&mut a, 40, |r, i| {
        r.request(
            "call",
            Some("counter"),
            call("step", vec![pair(1.0)], &format!("a{i}")),
        )
    })
    .await;
    let c_ids = pipeline(&mut c, 40, |r, _| {
        r.request("describe", Some("bench_batch64"), Dict::new())
    })
    .await;
    let h_ids = pipeline(&mut h, 10, |r, i| {
        r.request(
            "call",
            Some("hung"),
            call("step", vec![Value::Float(5.0)], &format!("h{i}")),
        )
    })
    .await;
    // A WebSocket session with pipelined requests, and our client waiting
    // on the hung domain.
    let (mut ws, _) = tokio_tungstenite::connect_async(listener.url())
        .await
        .unwrap();
    let codec = Codec::default();
    let mut hello = Dict::new();
    hello.insert("version", 1);
    hello.insert("type", "request");
    hello.insert("request_id", "w-hello");
    hello.insert("session_id", Value::Null);
    hello.insert("op", "hello");
    hello.insert("resource_id", Value::Null);
    ws.send(Message::Binary(Bytes::from(
        codec.encode(&Value::Dict(hello)).unwrap(),
    )))
    .await
    .unwrap();
    let client = Client::connect(
        &listener.url(),
        ClientConfig::default().with_discover(false),
    )
    .await
    .unwrap();
    // A call queues behind the hung step (a describe would be answered at
    // once, from the domain's last committed boundary).
    let waiting =
        tokio::spawn(async move { client.call("hung", "render", vec![], Dict::new()).await });
    gate.wait_reached(1).await;
    tokio::time::sleep(Duration::from_millis(20)).await;

    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .expect("shutdown returns although a simulator hangs");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");

    // Each session's answers are a prefix of its requests, in order; the
    // counter's steps each ran once, in turn (the k-th answer holds the sum
    // of k steps of 1), so none was lost before another ran.
    let answers_a = drain(&mut a, &a_ids).await;
    assert_answered_in_order(&answers_a, &a_ids);
    for (k, m) in answers_a.iter().enumerate() {
        let value = result(m);
        let obs = value
            .get("value")
            .and_then(Value::as_seq)
            .expect("a step result")[0]
            .clone();
        let n = (k + 1) as f64;
        assert_eq!(numbers(obs.get("position")), vec![n, n], "step {k}");
    }
    for m in drain(&mut c, &c_ids).await {
        result(&m);
    }
    let answers_h = drain(&mut h, &h_ids).await;
    assert!(
        answers_h.is_empty(),
        "the hung domain answered: {answers_h:?}"
    );
    // The WebSocket session was closed with 1001 (after its hello answer).
    let mut close = None;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
        match m {
            Ok(Message::Close(f)) => {
                close = f.map(|f| u16::from(f.code));
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert_eq!(close, Some(1001));
    // Our client's pending request failed at once, not at its 30 s timeout.
    let r = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting request ends with the connection")
        .unwrap();
    assert_eq!(r.unwrap_err().code(), "connection_closed");
    // New connections are refused after shutdown.
    assert!(tokio_tungstenite::connect_async(listener.url())
        .await
        .is_err());
    gate.open();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_close_does_not_stop_the_others() {
    let counts: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let mut b = Server::builder(ServerConfig::default());
    for (i, closes) in counts.iter().enumerate() {
        b.register_env(
            &format!("env{i}"),
            CountClose {
                inner: CounterEnv::new(None, CounterVariant::Plain),
                closes: closes.clone(),
                panic_on_close: i == 1,
            },
        )
        .unwrap();
    }
    let server = b.start().expect("a valid server configuration");
    let mut raw = Raw::connect(&server).await;
    for i in 0..3 {
        let r = raw
            .env_call(&format!("env{i}"), "reset", vec![], Dict::new())
            .await;
        common::raw::result(&r);
    }
    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .expect("shutdown returns");
    let closes: Vec<usize> = counts.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert_eq!(closes, vec![1, 1, 1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_a_pending_handshake_and_leaves_no_task() {
    use tokio::io::AsyncReadExt;
    let mut b = Server::builder(ServerConfig {
        handshake_timeout: Duration::from_secs(60),
        shutdown_timeout: Duration::from_millis(500),
        ..ServerConfig::default()
    });
    b.register_env("env", CounterEnv::new(None, CounterVariant::Plain))
        .unwrap();
    let server = b.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    // A peer that opens a TCP connection and never sends its request.
    let mut silent = tokio::net::TcpStream::connect(listener.local_addr())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.live_tasks() == 0 {
        assert!(
            Instant::now() < deadline,
            "the connection was never tracked"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .expect("shutdown returns");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown waited on the handshake's 60 s timeout"
    );
    assert_eq!(server.live_tasks(), 0);
    // The socket is closed without an HTTP response.
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf))
        .await
        .expect("the socket is closed")
        .unwrap_or(0);
    assert_eq!(n, 0, "no bytes are sent to an unfinished handshake");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_no_session_task_behind() {
    let mut b = Server::builder(ServerConfig::default());
    b.register_env("env", CounterEnv::new(None, CounterVariant::Plain))
        .unwrap();
    let server = b.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    let ws = Client::connect(&listener.url(), ClientConfig::default())
        .await
        .unwrap();
    let memory = Client::over_memory(server.connect_memory(), ClientConfig::default())
        .await
        .unwrap();
    assert_eq!(server.session_count(), 2);
    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .expect("shutdown returns");
    assert_eq!(server.session_count(), 0);
    assert_eq!(server.live_tasks(), 0);
    drop((ws, memory));
}
