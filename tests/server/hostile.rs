//! Hostile peers (RELIABILITY.md, "Hostile peers"), over real WebSocket connections on loopback:
//! deadlines for hello and idle sessions, handshakes that cannot lock out a
//! token holder, byte budgets (per connection, per server, per decoded tree,
//! per ID), the message timeout, WebSocket close and opcode rules, and pongs
//! answered while a session waits for a slow domain. Every peer here speaks
//! raw frames, so close codes are checked exactly.

use crate::common;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use unienv_remote::fixtures::{CounterEnv, CounterVariant};
use unienv_remote::protocol::request_envelope;
use unienv_remote::server::{Hosted, Listener, Server, ServerConfig};
use unienv_remote::{Codec, Dict, Value};

async fn serve(config: ServerConfig) -> (Server, Listener) {
    common::listen(common::fixture_server_with(config, |_| Ok(()))).await
}

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn upgrade(extra: &str) -> String {
    format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

/// Sends `request` and returns the response head (up to 5 s).
async fn http_answer(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// A raw WebSocket client.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

enum Frame {
    Data(u8, Vec<u8>),
    Closed,
    Timeout,
}

impl Raw {
    async fn connect(addr: SocketAddr, extra: &str) -> Raw {
        Raw::upgrade(TcpStream::connect(addr).await.unwrap(), extra).await
    }

    /// Connects with a small, fixed receive buffer (64 KiB, no autotuning),
    /// so that what the server cannot send waits in its own memory rather
    /// than in the kernel's socket buffers.
    async fn connect_small_window(addr: SocketAddr) -> Raw {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(64 << 10).unwrap();
        Raw::upgrade(socket.connect(addr).await.unwrap(), "").await
    }

    async fn upgrade(mut s: TcpStream, extra: &str) -> Raw {
        s.write_all(upgrade(extra).as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(s.read(&mut byte).await.unwrap(), 1, "handshake answer");
            head.push(byte[0]);
        }
        assert!(
            head.starts_with(b"HTTP/1.1 101"),
            "{}",
            String::from_utf8_lossy(&head)
        );
        Raw { s, buf: Vec::new() }
    }

    /// The header of a masked client frame declaring `len` payload bytes.
    fn header(fin: bool, opcode: u8, len: usize) -> Vec<u8> {
        let mut out = vec![(u8::from(fin) << 7) | opcode];
        match len {
            n if n < 126 => out.push(0x80 | n as u8),
            n if n <= 0xFFFF => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        // A zero key: the payload goes unchanged.
        out.extend_from_slice(&[0, 0, 0, 0]);
        out
    }

    async fn send_frame(&mut self, fin: bool, opcode: u8, payload: &[u8]) {
        let mut f = Raw::header(fin, opcode, payload.len());
        f.extend_from_slice(payload);
        let _ = self.s.write_all(&f).await;
    }

    async fn send(&mut self, request: Dict) {
        let bytes = Codec::default().encode(&Value::Dict(request)).unwrap();
        self.send_frame(true, 0x2, &bytes).await;
    }

    async fn frame(&mut self, secs: u64) -> Frame {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            if self.buf.len() >= 2 {
                let (len, ext) = match self.buf[1] & 0x7F {
                    126 if self.buf.len() >= 4 => {
                        (u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize, 2)
                    }
                    127 if self.buf.len() >= 10 => (
                        u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize,
                        8,
                    ),
                    126 | 127 => (usize::MAX, 0),
                    n => (n as usize, 0),
                };
                if len != usize::MAX && self.buf.len() >= 2 + ext + len {
                    let opcode = self.buf[0] & 0x0F;
                    let payload = self.buf[2 + ext..2 + ext + len].to_vec();
                    self.buf.drain(..2 + ext + len);
                    return Frame::Data(opcode, payload);
                }
            }
            let mut chunk = [0u8; 65536];
            match tokio::time::timeout_at(deadline, self.s.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return Frame::Closed,
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => return Frame::Timeout,
            }
        }
    }

    /// The next protocol message (skipping control frames).
    async fn message(&mut self) -> Value {
        loop {
            match self.frame(10).await {
                Frame::Data(0x2, payload) => {
                    return Codec::default().decode(payload.into()).unwrap()
                }
                Frame::Data(..) => {}
                Frame::Closed => panic!("closed while waiting for a message"),
                Frame::Timeout => panic!("no message within 10 s"),
            }
        }
    }

    /// The close code the server sends within `secs` (skipping other
    /// frames); `None` if the connection ends without one or stays open.
    async fn close_code(&mut self, secs: u64) -> Option<u16> {
        loop {
            match self.frame(secs).await {
                Frame::Data(0x8, payload) if payload.len() >= 2 => {
                    return Some(u16::from_be_bytes([payload[0], payload[1]]))
                }
                Frame::Data(0x8, _) => return Some(1005),
                Frame::Data(..) => {}
                Frame::Closed | Frame::Timeout => return None,
            }
        }
    }

    async fn hello(&mut self, max_message_size: Option<u64>) -> Value {
        let mut d = request_envelope("hello", "h", &Value::Null, None);
        if let Some(m) = max_message_size {
            d.insert("max_message_size", m);
        }
        self.send(d).await;
        let answer = self.message().await;
        answer
            .get("result")
            .and_then(|r| r.get("session_id"))
            .cloned()
            .unwrap_or_else(|| panic!("hello failed: {answer:?}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_deadline_and_idle_sessions() {
    let config = ServerConfig {
        hello_timeout: Duration::from_millis(300),
        idle_session_timeout: Some(Duration::from_millis(400)),
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let addr = l.local_addr();
    // Upgraded, never says hello: closed at the deadline (1008).
    let mut silent = Raw::connect(addr, "").await;
    assert_eq!(silent.close_code(10).await, Some(1008));
    // Says hello, then holds nothing and says nothing: closed as idle.
    let mut idle = Raw::connect(addr, "").await;
    idle.hello(None).await;
    assert_eq!(idle.close_code(10).await, Some(1001));
    // A session that only pings (keepalive) is not idle either: it pings
    // for three idle timeouts, each pong awaited and the next ping sent
    // 50 ms later (an eighth of the timeout: a slow machine stretches the
    // gaps, rarely eightfold).
    let mut pinger = Raw::connect(addr, "").await;
    pinger.hello(None).await;
    let until = tokio::time::Instant::now() + Duration::from_millis(1200);
    while tokio::time::Instant::now() < until {
        pinger.send_frame(true, 0x9, b"ka").await;
        match pinger.frame(10).await {
            Frame::Data(0xA, p) => assert_eq!(p, b"ka"),
            _ => panic!("a session that pings was closed as idle"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // An observer holds a subscription: never idle.
    let mut observer = Raw::connect(addr, "").await;
    let session = observer.hello(None).await;
    let mut sub = request_envelope("subscribe", "s", &session, Some("counter"));
    sub.insert("subscription_id", "sub");
    observer.send(sub).await;
    let answer = observer.message().await;
    assert_eq!(answer.get("type").and_then(Value::as_str), Some("response"));
    // A session that says hello after the observer's last message is
    // closed as idle: the observer, silent for longer, was past its idle
    // deadline too (no fixed wait against the timeout).
    let mut later = Raw::connect(addr, "").await;
    later.hello(None).await;
    assert_eq!(later.close_code(10).await, Some(1001));
    observer.send_frame(true, 0x9, b"still").await;
    loop {
        match observer.frame(10).await {
            Frame::Data(0xA, p) => {
                assert_eq!(p, b"still");
                break;
            }
            Frame::Data(0x8, _) | Frame::Closed | Frame::Timeout => {
                panic!("a session holding a subscription was closed as idle")
            }
            Frame::Data(..) => {}
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sockets_never_lock_out_a_token_holder() {
    let config = ServerConfig {
        token: Some("s3cret".into()),
        max_connections: 2,
        max_pending_handshakes: 4,
        handshake_timeout: Duration::from_secs(60),
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let addr = l.local_addr();
    // Ten sockets that open and send part of a head, then nothing, from a
    // peer without the token. Each is held by a task that reports when the
    // server drops it.
    let (ended_tx, mut ended) = tokio::sync::mpsc::unbounded_channel();
    let mut silent = Vec::new();
    for _ in 0..10 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let ended_tx = ended_tx.clone();
        silent.push(tokio::spawn(async move {
            let mut buf = [0u8; 256];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
            let _ = ended_tx.send(());
        }));
    }
    // All ten were taken in: six of them were dropped for newer ones (four
    // pending handshakes at most).
    for _ in 0..6 {
        tokio::time::timeout(Duration::from_secs(10), ended.recv())
            .await
            .expect("old pending handshakes are dropped for newer ones");
    }
    // The token holder gets in at once, twice (the connection cap).
    let mut a = Raw::connect(addr, "Authorization: Bearer s3cret\r\n").await;
    let _b = Raw::connect(addr, "Authorization: Bearer s3cret\r\n").await;
    a.hello(None).await;
    // Without the token: 401; over the cap: 503.
    let head = http_answer(addr, &upgrade("")).await;
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let head = http_answer(addr, &upgrade("Authorization: Bearer s3cret\r\n")).await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    server.shutdown().await;
    for task in silent {
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_token_is_refused_at_startup() {
    for token in ["", "  "] {
        let config = ServerConfig {
            token: Some(token.into()),
            ..ServerConfig::default()
        };
        let server = Server::builder(config)
            .start()
            .expect("a valid server configuration");
        match server.listen("127.0.0.1:0").await {
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput),
            Ok(_) => panic!("listening with the empty token {token:?}"),
        }
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_opcodes_close_frames_keys_and_heads() {
    let config = ServerConfig {
        handshake_timeout: Duration::from_secs(60),
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let addr = l.local_addr();
    // Reserved control opcodes are protocol errors, not closes.
    for opcode in 0xB..=0xF {
        let mut s = Raw::connect(addr, "").await;
        s.send_frame(true, opcode, &[0x03, 0xE8]).await;
        assert_eq!(s.close_code(5).await, Some(1002), "opcode {opcode:#x}");
    }
    // Close frames: valid codes are echoed; reserved, unassigned or
    // out-of-range codes, a 1-byte payload and a reason that is not UTF-8
    // are protocol errors.
    let cases: [(&[u8], u16); 11] = [
        (&[], 1000),
        (&[0x03, 0xE8], 1000),
        (&[0x0F, 0xA0, b'o', b'k'], 4000),
        (&[0x00, 0x00], 1002),
        (&[0x03, 0xE7], 1002),
        (&[0x03, 0xED], 1002),
        (&[0x03, 0xEE], 1002),
        (&[0x03, 0xF7], 1002),
        (&[0x13, 0x88], 1002),
        (&[0x03], 1002),
        (&[0x03, 0xE8, 0xFF, 0xFE], 1002),
    ];
    for (payload, expected) in cases {
        let mut s = Raw::connect(addr, "").await;
        s.send_frame(true, 0x8, payload).await;
        assert_eq!(s.close_code(5).await, Some(expected), "close {payload:?}");
    }
    // A malformed Sec-WebSocket-Key is refused.
    for key in ["abc", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZ!=="] {
        let request = upgrade("").replace(KEY, key);
        let head = http_answer(addr, &request).await;
        assert!(head.starts_with("HTTP/1.1 400"), "{key}: {head}");
    }
    // A head written with bare LFs is answered at once (not after the
    // 60 s handshake timeout).
    let head = http_answer(addr, &upgrade("").replace("\r\n", "\n")).await;
    assert!(head.starts_with("HTTP/1.1 "), "no answer: {head:?}");
    // Over the limit negotiated in hello (under the server's): refused from
    // the frame header, before any payload, with 1009.
    let mut s = Raw::connect(addr, "").await;
    s.hello(Some(4096)).await;
    let header = Raw::header(true, 0x2, 5000);
    s.s.write_all(&header).await.unwrap();
    assert_eq!(s.close_code(5).await, Some(1009));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_bounded_and_not_echoed() {
    let (server, l) = serve(ServerConfig::default()).await;
    let mut s = Raw::connect(l.local_addr(), "").await;
    let session = s.hello(None).await;
    let long = "r".repeat(300);
    s.send(request_envelope(
        "describe",
        &long,
        &session,
        Some("counter"),
    ))
    .await;
    let answer = s.message().await;
    assert_eq!(answer.get("type").and_then(Value::as_str), Some("error"));
    assert_eq!(answer.get("request_id"), Some(&Value::Null));
    assert_eq!(
        answer.get("error").and_then(|e| e.get("code")),
        Some(&Value::from("invalid_request"))
    );
    let mut sub = request_envelope("subscribe", "s1", &session, Some("counter"));
    sub.insert("subscription_id", "x".repeat(300));
    s.send(sub).await;
    let answer = s.message().await;
    assert_eq!(answer.get("request_id"), Some(&Value::from("s1")));
    assert_eq!(
        answer.get("error").and_then(|e| e.get("code")),
        Some(&Value::from("invalid_request"))
    );
    // 256 bytes is fine.
    let mut sub = request_envelope("subscribe", "s2", &session, Some("counter"));
    sub.insert("subscription_id", "x".repeat(256));
    s.send(sub).await;
    let answer = s.message().await;
    assert_eq!(answer.get("type").and_then(Value::as_str), Some("response"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_budgets_refuse_the_peer_that_exceeds_them() {
    let config = ServerConfig {
        message_timeout: Duration::from_secs(2),
        max_connection_bytes: 6 << 20,
        max_server_bytes: 6 << 20,
        max_decoded_bytes: 64 << 10,
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let addr = l.local_addr();
    // A frame that declares more than a connection may hold: refused from
    // its header.
    let mut s = Raw::connect(addr, "").await;
    s.s.write_all(&Raw::header(true, 0x2, 7 << 20))
        .await
        .unwrap();
    assert_eq!(s.close_code(5).await, Some(1008));
    // A message that stalls part-way: closed at the message timeout.
    let mut s = Raw::connect(addr, "").await;
    s.s.write_all(&Raw::header(true, 0x2, 100_000))
        .await
        .unwrap();
    s.s.write_all(&[0u8; 1000]).await.unwrap();
    assert_eq!(s.close_code(5).await, Some(1008));
    // Two peers each holding 5 MiB of unfinished messages would take 4 MiB
    // each from the server's 6 MiB pool (the first MiB is each connection's
    // own): the second is refused (1013) and the pool never overdraws.
    let mut a = Raw::connect(addr, "").await;
    a.s.write_all(&Raw::header(true, 0x2, 5 << 20))
        .await
        .unwrap();
    a.s.write_all(&[0u8; 4096]).await.unwrap();
    let mut waited = 0;
    while server.pooled_bytes() < 4 << 20 && waited < 500 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert_eq!(server.pooled_bytes(), 4 << 20);
    let mut b = Raw::connect(addr, "").await;
    b.s.write_all(&Raw::header(true, 0x2, 5 << 20))
        .await
        .unwrap();
    assert_eq!(b.close_code(5).await, Some(1013));
    assert_eq!(server.pooled_bytes(), 4 << 20);
    // a's stalled message times out; its bytes go back to the pool.
    assert_eq!(a.close_code(5).await, Some(1008));
    let mut waited = 0;
    while server.pooled_bytes() > 0 && waited < 500 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert_eq!(server.pooled_bytes(), 0);
    // A small message whose decoded tree is too large: an invalid envelope.
    let mut s = Raw::connect(addr, "").await;
    let zeros = format!(r#"{{"t":"list","v":[{}]}}"#, vec!["0"; 10_000].join(","));
    let mut frame = (zeros.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(zeros.as_bytes());
    s.send_frame(true, 0x2, &frame).await;
    assert_eq!(s.close_code(5).await, Some(1007));
    server.shutdown().await;
}

/// Runs `hostile::queued_responses_probe` in a child process of its own:
/// there the capture of the server's log events is the only subscriber the
/// process ever has (tracing caches each event's interest when it is first
/// hit, so events another test's server hit first, on a thread without the
/// capture, were sometimes never captured here).
#[test]
fn queued_responses_are_counted_in_bytes() {
    common::run_alone_in_a_child("hostile::queued_responses_probe");
}

// One thread: the server's sessions run on the test's thread, where their
// log events are captured (why the session closed).
#[tokio::test(flavor = "current_thread")]
#[ignore = "run in a child process by queued_responses_are_counted_in_bytes"]
async fn queued_responses_probe() {
    let logs = common::logs::Logs::capture();
    let config = ServerConfig {
        max_connection_bytes: 2 << 20,
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let mut s = Raw::connect_small_window(l.local_addr()).await;
    let session = s.hello(None).await;
    // 60 renders of 196 KiB (under the 64-message queue limit), never
    // read: more than the socket buffers (the server's send buffer, at most
    // 4 MiB with Linux's defaults, and our 64 KiB) and 2 MiB hold.
    for i in 0..60 {
        let mut d = request_envelope("call", &format!("r{i}"), &session, Some("large_render"));
        d.insert("method", "render");
        d.insert("args", Value::Tuple(vec![]));
        d.insert("operation_id", format!("o{i}"));
        s.send(d).await;
    }
    // The session is closed for the connection's byte budget (not the
    // reliable queue's 64 messages, nor anything else)...
    let closed = logs
        .wait_for("session closed", |e| e.field("reason").is_some())
        .await;
    let reason = closed.field("reason").unwrap_or_default();
    assert!(
        reason.starts_with("connection memory budget exceeded"),
        "closed for another reason: {reason}"
    );
    assert_eq!(logs.all("session closed").len(), 1);
    // ...and the connection ends (without a close frame if it ends
    // mid-message) before every answer was sent.
    let mut answers = 0;
    loop {
        match s.frame(10).await {
            Frame::Data(0x2, _) => answers += 1,
            Frame::Data(..) => {}
            Frame::Closed => break,
            Frame::Timeout => panic!("not disconnected: {answers} answers read"),
        }
    }
    assert!(answers < 60, "{answers}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pongs_are_answered_while_a_discover_waits_for_a_slow_factory() {
    let gate = common::faults::Gate::new();
    let factory_gate = gate.clone();
    let mut b = Server::builder(ServerConfig::default());
    b.register_factory("slow", move || {
        factory_gate.pass();
        Ok(Hosted::env(CounterEnv::new(None, CounterVariant::Plain)))
    })
    .unwrap();
    let server = b.start().expect("a valid server configuration");
    let l = server.listen("127.0.0.1:0").await.unwrap();
    let mut s = Raw::connect(l.local_addr(), "").await;
    let session = s.hello(None).await;
    s.send(request_envelope("discover", "d", &session, None))
        .await;
    // The discover is waiting: the factory is running, held at the gate
    // until the pong has come back.
    gate.wait_reached(1).await;
    s.send_frame(true, 0x9, b"ka").await;
    match s.frame(10).await {
        Frame::Data(0xA, payload) => assert_eq!(payload, b"ka"),
        Frame::Data(op, _) => panic!("frame {op:#x} before the pong"),
        _ => panic!("no pong"),
    }
    gate.open();
    let answer = s.message().await;
    assert_eq!(answer.get("request_id"), Some(&Value::from("d")));
    assert_eq!(answer.get("type").and_then(Value::as_str), Some("response"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_follows_the_servers_close_frame() {
    // Found by the `frames` fuzz target: the reader echoed the peer's close
    // and the session's writer then sent a second (empty) close frame.
    let (server, l) = serve(ServerConfig::default()).await;
    for hello_first in [false, true] {
        let mut s = Raw::connect(l.local_addr(), "").await;
        if hello_first {
            s.hello(None).await;
        }
        s.send_frame(true, 0x8, &[0x03, 0xE8]).await;
        let mut closes = Vec::new();
        loop {
            match s.frame(5).await {
                Frame::Data(0x8, p) => closes.push(p),
                Frame::Data(op, _) => {
                    assert!(closes.is_empty(), "frame {op:#x} after the close frame")
                }
                Frame::Closed => break,
                Frame::Timeout => panic!("the connection stayed open"),
            }
        }
        assert_eq!(closes, vec![vec![0x03, 0xE8]], "one close frame, the echo");
    }
    server.shutdown().await;
}
