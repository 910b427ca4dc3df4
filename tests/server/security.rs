//! The WebSocket listener's defences: Host and Origin checks against DNS
//! rebinding, the bearer token (checked before the upgrade), handshake size
//! and time limits, no compression, binary messages only, the message size
//! limit and the connection cap.

use futures_util::{SinkExt, StreamExt};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use unienv_remote::server::{Listener, Server, ServerConfig};

async fn serve(config: ServerConfig) -> (Server, Listener) {
    let mut b = Server::builder(config);
    unienv_remote::fixtures::register(&mut b).unwrap();
    let server = b.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.unwrap();
    (server, listener)
}

async fn connect(
    url: &str,
    headers: &[(&str, &str)],
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>,
    tungstenite::Error,
> {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    tokio_tungstenite::connect_async(req)
        .await
        .map(|(ws, _)| ws)
}

fn status(e: &tungstenite::Error) -> u16 {
    match e {
        tungstenite::Error::Http(resp) => resp.status().as_u16(),
        other => panic!("expected an HTTP refusal, got {other:?}"),
    }
}

/// Reads a raw HTTP response head.
async fn raw_handshake(addr: std::net::SocketAddr, request: String) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Ok(Err(_)) => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn upgrade_request(host: &str, extra: &str) -> String {
    format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origins_and_hosts_are_checked() {
    let config = ServerConfig {
        allowed_origins: vec!["https://dashboard.example".into()],
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let url = l.url();
    // Non-browser clients send no Origin.
    assert!(connect(&url, &[]).await.is_ok());
    assert!(connect(&url, &[("Origin", "http://localhost:3000")])
        .await
        .is_ok());
    assert!(connect(&url, &[("Origin", "https://dashboard.example")])
        .await
        .is_ok());
    let e = connect(&url, &[("Origin", "https://evil.example")])
        .await
        .unwrap_err();
    assert_eq!(status(&e), 403);
    let e = connect(&url, &[("Origin", "null")]).await.unwrap_err();
    assert_eq!(status(&e), 403);
    // A DNS name that rebinds to loopback.
    let head = raw_handshake(
        l.local_addr(),
        upgrade_request("rebind.attacker.test:80", ""),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let head = raw_handshake(
        l.local_addr(),
        upgrade_request(&format!("localhost:{}", l.local_addr().port()), ""),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_is_required_before_the_upgrade() {
    let config = ServerConfig {
        token: Some("correct horse".into()),
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let url = l.url();
    assert_eq!(status(&connect(&url, &[]).await.unwrap_err()), 401);
    assert_eq!(
        status(
            &connect(&url, &[("Authorization", "Bearer wrong")])
                .await
                .unwrap_err()
        ),
        401
    );
    assert_eq!(
        status(
            &connect(&url, &[("Authorization", "Basic Y29ycmVjdCBob3JzZQ==")])
                .await
                .unwrap_err()
        ),
        401
    );
    let _ws = connect(&url, &[("Authorization", "Bearer correct horse")])
        .await
        .expect("the right token is accepted");
    // The session is registered by the server's task after the upgrade.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.session_count() != 1 {
        assert!(std::time::Instant::now() < deadline, "no session");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compression_offers_are_not_accepted() {
    let (server, l) = serve(ServerConfig::default()).await;
    let head = raw_handshake(
        l.local_addr(),
        upgrade_request(
            "127.0.0.1",
            "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n",
        ),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("sec-websocket-extensions"),
        "{head}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_stalled_handshakes_are_dropped() {
    let config = ServerConfig {
        handshake_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let big = format!("X-Padding: {}\r\n", "a".repeat(20_000));
    let head = raw_handshake(l.local_addr(), upgrade_request("127.0.0.1", &big)).await;
    assert!(
        !head.contains("101"),
        "an oversized handshake must not be upgraded: {head:.80}"
    );
    // A connection that never completes its handshake is closed.
    let mut s = TcpStream::connect(l.local_addr()).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let started = std::time::Instant::now();
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "closed without a response");
    assert!(started.elapsed() < Duration::from_secs(4));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_oversized_messages_close_the_connection() {
    let config = ServerConfig {
        max_message_size: 4096,
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let mut ws = connect(&l.url(), &[]).await.unwrap();
    ws.send(Message::text("{\"op\":\"hello\"}")).await.unwrap();
    let mut closed = false;
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_secs(5), ws.next()).await {
        match msg {
            Ok(Message::Close(frame)) => {
                assert_eq!(frame.map(|f| u16::from(f.code)), Some(1003));
                closed = true;
                break;
            }
            Err(_) => {
                closed = true;
                break;
            }
            Ok(_) => {}
        }
    }
    assert!(closed, "a text message closes the connection");
    let mut ws = connect(&l.url(), &[]).await.unwrap();
    let _ = ws.send(Message::binary(vec![0u8; 8192])).await;
    let next = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap();
    assert!(
        matches!(next, None | Some(Err(_)) | Some(Ok(Message::Close(_)))),
        "an oversized message closes the connection: {next:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_capped() {
    let config = ServerConfig {
        max_connections: 2,
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let a = connect(&l.url(), &[]).await.unwrap();
    let _b = connect(&l.url(), &[]).await.unwrap();
    let e = connect(&l.url(), &[]).await.unwrap_err();
    assert_eq!(status(&e), 503);
    drop(a);
    // The slot frees once the first connection is gone.
    let mut ok = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if connect(&l.url(), &[]).await.is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok);
    server.shutdown().await;
}

/// Completes a WebSocket handshake by hand and returns the raw stream.
async fn raw_ws(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(upgrade_request("127.0.0.1", "").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).await.unwrap(), 1, "handshake answer");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101"));
    s
}

/// A client frame: FIN bit, opcode, optional mask (zero key), payload.
fn ws_frame(fin: bool, opcode: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | opcode];
    let mask_bit = if masked { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xFFFF => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    if masked {
        out.extend_from_slice(&[0, 0, 0, 0]);
    }
    out.extend_from_slice(payload);
    out
}

/// Whether the server ends the connection within `secs` (a close frame,
/// EOF or a reset), reading and discarding whatever comes first.
async fn closed_within(s: &mut TcpStream, secs: u64) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_close_only_their_connection() {
    let config = ServerConfig {
        max_message_size: 4096,
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let mut bystander = connect(&l.url(), &[]).await.unwrap();
    // A frame header declaring 1 TiB, with nothing after it: refused on the
    // header, before anything is buffered.
    let mut s = raw_ws(l.local_addr()).await;
    let mut header = vec![0x82, 0x80 | 127];
    header.extend_from_slice(&(1u64 << 40).to_be_bytes());
    header.extend_from_slice(&[0, 0, 0, 0]);
    s.write_all(&header).await.unwrap();
    assert!(closed_within(&mut s, 5).await, "a 1 TiB frame header");
    // Fragments each under the limit whose message is over it.
    let mut s = raw_ws(l.local_addr()).await;
    s.write_all(&ws_frame(false, 0x2, &[0; 3000], true))
        .await
        .unwrap();
    let _ = s.write_all(&ws_frame(true, 0x0, &[0; 3000], true)).await;
    assert!(
        closed_within(&mut s, 5).await,
        "a fragmented 6000-byte message"
    );
    // An unmasked client frame is a protocol violation.
    let mut s = raw_ws(l.local_addr()).await;
    s.write_all(&ws_frame(true, 0x2, b"\x00\x00\x00\x02{}", false))
        .await
        .unwrap();
    assert!(closed_within(&mut s, 5).await, "an unmasked frame");
    // A continuation frame with no message to continue.
    let mut s = raw_ws(l.local_addr()).await;
    s.write_all(&ws_frame(true, 0x0, b"abc", true))
        .await
        .unwrap();
    assert!(closed_within(&mut s, 5).await, "a stray continuation frame");
    // The bystander's connection is untouched: a ping is answered.
    bystander.send(Message::Ping(vec![1].into())).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(5), bystander.next())
        .await
        .unwrap();
    assert!(matches!(pong, Some(Ok(Message::Pong(_)))), "{pong:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_hold_no_connection_slot() {
    // Handshakes in progress take places of their own (a newcomer evicts
    // the oldest when they are all taken), never a connection slot.
    let config = ServerConfig {
        max_connections: 2,
        max_pending_handshakes: 2,
        handshake_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(l.local_addr()).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        stalled.push(s);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let first = connect(&l.url(), &[]).await.expect("a newcomer gets in");
    let _second = connect(&l.url(), &[]).await.expect("both slots are free");
    let e = connect(&l.url(), &[]).await.unwrap_err();
    assert_eq!(status(&e), 503, "two sessions take both slots");
    for s in &mut stalled {
        assert!(closed_within(s, 5).await, "a stalled handshake is dropped");
    }
    drop(first);
    let mut ok = false;
    for _ in 0..100 {
        if connect(&l.url(), &[]).await.is_ok() {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(ok, "a slot is free again");
    server.shutdown().await;
}

/// This machine's host name when it resolves to loopback (as Debian's
/// `/etc/hosts` makes it), so that a client can connect by it on loopback.
fn loopback_host_name() -> Option<String> {
    use std::net::ToSocketAddrs;
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    let name = name.trim().to_ascii_lowercase();
    let resolved: Vec<_> = (name.as_str(), 0).to_socket_addrs().ok()?.collect();
    (!name.is_empty() && !resolved.is_empty() && resolved.iter().all(|a| a.ip().is_loopback()))
        .then_some(name)
}

/// A loopback bind keeps the DNS-rebinding guard even for this machine's own
/// names (non-loopback binds accept those: see the listener's unit tests,
/// since tests bind loopback only); every refusal names the flag that fixes
/// it, in the 403 body and in the client's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_refusals_name_the_flag_that_accepts_the_name() {
    let (server, l) = serve(ServerConfig::default()).await;
    assert!(l.host_names().is_empty(), "{:?}", l.host_names());
    // The whole refusal: the server closes the connection after it.
    let mut s = TcpStream::connect(l.local_addr()).await.unwrap();
    s.write_all(upgrade_request("sim7.lab.example:8765", "").as_bytes())
        .await
        .unwrap();
    let mut all = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut all)).await;
    let body = String::from_utf8_lossy(&all).into_owned();
    assert!(body.starts_with("HTTP/1.1 403"), "{body}");
    assert!(
        body.contains("--allow-host sim7.lab.example ") && body.contains("bound to loopback"),
        "{body}"
    );

    // The client's error carries the body's way out, for an Origin too.
    let config = unienv_remote::client::ClientConfig {
        headers: vec![("Origin".into(), "https://dash.lab.example".into())],
        ..Default::default()
    };
    let e = unienv_remote::client::Client::connect(&l.url(), config)
        .await
        .expect_err("a foreign origin is refused");
    let msg = e.to_string();
    assert!(
        msg.contains("HTTP 403") && msg.contains("--allow-origin https://dash.lab.example "),
        "{msg}"
    );

    if let Some(name) = loopback_host_name() {
        let url = format!("ws://{name}:{}", l.local_addr().port());
        let e = unienv_remote::client::Client::connect(&url, Default::default())
            .await
            .expect_err("the host name is refused on a loopback bind");
        assert!(
            e.to_string().contains(&format!("--allow-host {name} ")),
            "{e}"
        );
        let (server2, l2) = serve(ServerConfig {
            allowed_hosts: vec![name.clone()],
            ..ServerConfig::default()
        })
        .await;
        let url = format!("ws://{name}:{}", l2.local_addr().port());
        let client = unienv_remote::client::Client::connect(&url, Default::default())
            .await
            .expect("--allow-host accepts the name");
        client.close().await;
        server2.shutdown().await;
    }
    server.shutdown().await;
}

/// One plain HTTP request to the metrics endpoint at `addr` with `headers`;
/// the status line and the body.
async fn metrics_get(addr: std::net::SocketAddr, headers: &[(&str, &str)]) -> (String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = "GET /metrics HTTP/1.1\r\n".to_string();
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
        .await
        .expect("an answer in time")
        .unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

/// The metrics endpoint keeps the main port's DNS-rebinding guard: a DNS
/// name in `Host` (an attacker's, rebound to loopback) or a foreign
/// `Origin` is refused with 403; IP literals, localhost, loopback origins
/// and `allowed_hosts` / `allowed_origins` are answered.
#[tokio::test]
async fn the_metrics_endpoint_refuses_rebound_hosts_and_foreign_origins() {
    let config = ServerConfig {
        allowed_hosts: vec!["metrics.lan".into()],
        allowed_origins: vec!["http://dash.lan".into()],
        ..ServerConfig::default()
    };
    let (server, _listener) = serve(config).await;
    let endpoint = server.serve_metrics("127.0.0.1:0").await.unwrap();
    let addr = endpoint.local_addr();
    let own = addr.to_string();
    for headers in [
        vec![("Host", own.as_str())],
        vec![("Host", "localhost")],
        vec![("Host", "metrics.lan:9464")],
        vec![("Host", own.as_str()), ("Origin", "http://localhost:3000")],
        vec![("Host", own.as_str()), ("Origin", "http://dash.lan")],
    ] {
        let (status, body) = metrics_get(addr, &headers).await;
        assert!(status.contains(" 200 "), "{headers:?}: {status}");
        assert!(body.contains("unienv_"), "{body}");
    }
    for (headers, why) in [
        (vec![("Host", "evil.example")], "Host not allowed"),
        (vec![], "no Host header"),
        (
            vec![("Host", own.as_str()), ("Origin", "http://evil.example")],
            "Origin not allowed",
        ),
    ] {
        let (status, body) = metrics_get(addr, &headers).await;
        assert!(status.contains(" 403 "), "{headers:?}: {status}");
        assert!(body.contains(why), "{body}");
        assert!(!body.contains("unienv_"), "{body}");
    }
    server.shutdown().await;
}

/// More handshakes at once than `max_pending_handshakes`: the oldest
/// pending one is evicted for the newcomer and told so, `503 Service
/// Unavailable` with `Retry-After`, never closed in silence; the others
/// complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_handshake_is_answered_503() {
    let config = ServerConfig {
        max_pending_handshakes: 2,
        handshake_timeout: Duration::from_secs(60),
        ..ServerConfig::default()
    };
    let (server, l) = serve(config).await;
    let (tx, mut answers) = tokio::sync::mpsc::unbounded_channel();
    let mut writers = Vec::new();
    for i in 0..3 {
        let s = TcpStream::connect(l.local_addr()).await.unwrap();
        let (mut r, mut w) = s.into_split();
        w.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        writers.push(w);
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match r.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = tx.send((i, String::from_utf8_lossy(&got).into_owned()));
        });
    }
    let (evicted, head) = tokio::time::timeout(Duration::from_secs(10), answers.recv())
        .await
        .expect("an answer to the evicted handshake")
        .expect("an answer");
    assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
    assert!(head.contains("Retry-After: 1"), "{head}");
    // The two still pending complete their upgrade.
    for (i, w) in writers.iter_mut().enumerate() {
        if i == evicted {
            continue;
        }
        w.write_all(
            b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        .await
        .unwrap();
    }
    for _ in 0..2 {
        let (i, head) = tokio::time::timeout(Duration::from_secs(10), answers.recv())
            .await
            .expect("the upgrade's answer")
            .expect("an answer");
        assert_ne!(i, evicted);
        assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    }
    server.shutdown().await;
}
