//! Peers that stop reading, over real WebSocket connections: a controller
//! whose responses pile up past the reliable queue is disconnected alone
//! (close code 1008) while other sessions carry on; an observer that never
//! reads costs nothing (latest wins) and, when it reads again, gets the
//! latest snapshot.

use crate::common;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::protocol::request_envelope;
use unienv_remote::{Codec, Dict, Value};

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn request(id: &str, session: &Value, op: &str, resource: Option<&str>, extra: Dict) -> Message {
    let mut d = request_envelope(op, id, session, resource);
    for (k, v) in extra {
        d.insert(k, v);
    }
    Message::Binary(Bytes::from(
        Codec::default().encode(&Value::Dict(d)).unwrap(),
    ))
}

async fn next_message(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a message within 10 s")
            .expect("open")
            .expect("ok");
        if let Message::Binary(b) = m {
            return Codec::default().decode(b).unwrap();
        }
    }
}

/// Connects raw and says hello; returns the socket and the session ID.
async fn raw_session(url: &str) -> (Ws, Value) {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    ws.send(request("h", &Value::Null, "hello", None, Dict::new()))
        .await
        .unwrap();
    let hello = next_message(&mut ws).await;
    let session = hello
        .get("result")
        .and_then(|r| r.get("session_id"))
        .cloned()
        .expect("session");
    (ws, session)
}

fn call(method: &str, args: Vec<Value>, op: &str) -> Dict {
    let mut d = Dict::new();
    d.insert("method", method);
    d.insert("args", Value::Tuple(args));
    d.insert("operation_id", op);
    d
}

fn pair(v: f32) -> Value {
    Value::Array(unienv_remote::NdArray::from_vec(vec![v, v]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_that_never_reads_is_disconnected_alone_over_websocket() {
    let (server, listener) = common::listen(common::fixture_server()).await;
    let url = listener.url();
    let other = Client::connect(&url, ClientConfig::default().with_discover(false))
        .await
        .unwrap();
    let counter = other.env("counter").await.unwrap();
    counter.reset(ResetArgs::with_seed(0)).await.unwrap();

    // 1000 renders of 196 KiB each (196 MB), pipelined, not read: the
    // socket buffers fill (tens of MB on loopback), then the reliable queue
    // (64 messages), then the server hangs up.
    let (mut flood, session) = raw_session(&url).await;
    let mut sent = 0;
    for i in 0..1000 {
        let m = request(
            &format!("r{i}"),
            &session,
            "call",
            Some("large_render"),
            call("render", vec![], &format!("o{i}")),
        );
        if flood.feed(m).await.is_err() {
            break;
        }
        sent += 1;
    }
    let _ = flood.flush().await;
    // The other session is served meanwhile.
    for i in 1..=20 {
        let s = counter.step(pair(1.0)).await.unwrap();
        assert_eq!(s.reward.as_f64(), Some(2.0 * i as f64));
    }
    // Without reading, wait for the server to drop the flooding session
    // (its writer gives a peer that does not read 2 s for the close frame).
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.session_count() > 1 {
        assert!(
            Instant::now() < deadline,
            "the flooder was not disconnected"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its connection is gone: some answers were buffered, then the end (a
    // 1008 close frame if it got through, else EOF or a reset).
    let mut answered = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), flood.next()).await {
            Ok(Some(Ok(Message::Binary(_)))) => answered += 1,
            Ok(Some(Ok(Message::Close(frame)))) => {
                assert_eq!(frame.map(|f| u16::from(f.code)), Some(1008));
                break;
            }
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(_))) | Ok(None) => break,
            Err(_) => panic!("the connection stayed open after {answered} answers"),
        }
    }
    assert!(
        answered < sent,
        "cut off before all {sent} were answered ({answered})"
    );
    // Everyone else carries on, and new sessions are accepted.
    assert_eq!(
        counter.step(pair(1.0)).await.unwrap().reward.as_f64(),
        Some(42.0)
    );
    let late = Client::connect(&url, ClientConfig::default())
        .await
        .unwrap();
    late.describe("large_render").await.unwrap();
    late.close().await;
    other.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_that_never_reads_costs_nothing_and_gets_the_latest() {
    let (server, listener) = common::listen(common::fixture_server()).await;
    let url = listener.url();
    // The observer subscribes to a large observation, then stops reading.
    let (mut observer, session) = raw_session(&url).await;
    let mut sub = Dict::new();
    sub.insert("subscription_id", "s");
    observer
        .send(request(
            "s",
            &session,
            "subscribe",
            Some("bench_batch64"),
            sub,
        ))
        .await
        .unwrap();
    let ack = next_message(&mut observer).await;
    assert_eq!(ack.get("type").and_then(Value::as_str), Some("response"));

    let controller = Client::connect(&url, ClientConfig::default().with_discover(false))
        .await
        .unwrap();
    let env = controller.env("bench_batch64").await.unwrap();
    env.reset(ResetArgs::default()).await.unwrap();
    let action = Value::Array(unienv_remote::NdArray::from_vec(vec![1.0f32; 4]));
    let steps = 300;
    for _ in 0..steps {
        env.step(action.clone()).await.unwrap();
    }
    let final_sequence = steps + 1;
    // Still connected, and the last snapshot it gets is the final one.
    assert_eq!(server.session_count(), 2);
    let mut received = 0;
    let last = loop {
        let m = next_message(&mut observer).await;
        assert_eq!(m.get("type").and_then(Value::as_str), Some("snapshot"));
        received += 1;
        let sequence = m.get("sequence").and_then(Value::as_u64).unwrap();
        if sequence == final_sequence {
            break m;
        }
    };
    assert!(
        received < steps / 2,
        "latest wins: {received} of {steps} snapshots were sent"
    );
    let state = last
        .get("data")
        .and_then(|d| d.get("observation"))
        .and_then(|o| o.get("state"))
        .and_then(Value::as_array)
        .unwrap()
        .to_f64_vec();
    assert_eq!(state[0], steps as f64);
    controller.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_gets_every_pipelined_response_whole_and_in_order() {
    // Responses are written directly by the domain thread while nothing is
    // queued, partly when the socket fills, and through the queue after
    // that; the peer must see each one whole, once, in request order.
    let (server, listener) = common::listen(common::fixture_server()).await;
    let (mut ws, session) = raw_session(&listener.url()).await;
    let n = 48;
    for i in 0..n {
        // Large renders (196 KiB) alternate with small describes, all on
        // one domain, which answers in request order.
        let m = if i % 2 == 0 {
            request(
                &format!("r{i}"),
                &session,
                "call",
                Some("large_render"),
                call("render", vec![], &format!("o{i}")),
            )
        } else {
            request(
                &format!("r{i}"),
                &session,
                "describe",
                Some("large_render"),
                Dict::new(),
            )
        };
        ws.feed(m).await.unwrap();
    }
    ws.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..n {
        let m = next_message(&mut ws).await;
        assert_eq!(
            m.get("request_id").and_then(Value::as_str),
            Some(format!("r{i}").as_str())
        );
        assert_eq!(m.get("type").and_then(Value::as_str), Some("response"));
        if i % 2 == 0 {
            let value = m.get("result").and_then(|r| r.get("value")).unwrap();
            match value {
                Value::Array(a) => assert_eq!(a.shape(), &[256, 256, 3]),
                other => panic!("not an image: {other:?}"),
            }
        }
        if i % 8 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert_eq!(server.session_count(), 1);
    server.shutdown().await;
}
