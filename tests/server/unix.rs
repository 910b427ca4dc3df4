//! Unix domain sockets (`serve --unix`, `Server::listen_unix`, `ws+unix://`):
//! the same sessions as over TCP, a stale socket file replaced, a live one or
//! a non-socket file left alone, owner-only permissions, the file removed
//! when the listener ends, any `Host` accepted and the token still required.

use crate::common;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{ListenError, ServerConfig};
use unienv_remote::{Dict, NdArray, Value};

/// A fresh directory for socket files, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "unienv-unix-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Reset and two steps of `counter`, as text.
async fn transcript(url: &str) -> Vec<String> {
    let client = Client::connect(url, ClientConfig::default())
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    let env = client.env("counter").await.expect("counter");
    let reset = env.reset(ResetArgs::with_seed(3)).await.expect("reset");
    let mut log = vec![format!("reset {} {}", reset.context, reset.observation)];
    for _ in 0..2 {
        let step = env
            .step(NdArray::from_vec(vec![1.0f32, 2.0]))
            .await
            .expect("step");
        log.push(format!(
            "step {} {} {} {}",
            step.observation,
            step.reward,
            step.terminated,
            Value::Dict(step.info)
        ));
    }
    // Released by a request the domain answers once control is gone: a
    // connection's close alone frees control only after the server has seen
    // the close, and the next transcript may reach `counter` first.
    env.close().await.expect("release");
    client.close().await;
    log
}

#[tokio::test]
async fn a_unix_socket_serves_what_tcp_serves() {
    let dir = TempDir::new();
    let path = dir.path("sim.sock");
    let server = common::fixture_server();
    let unix = server.listen_unix(&path).await.expect("listen_unix");
    let tcp = server.listen("127.0.0.1:0").await.expect("listen");
    assert_eq!(unix.url(), format!("ws+unix://{}", path.display()));
    assert_eq!(unix.unix_path(), Some(path.as_path()));
    assert!(!unix.is_tls());
    let meta = std::fs::metadata(&path).expect("the socket file");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "owner-only");
    let over_unix = transcript(&unix.url()).await;
    assert_eq!(over_unix, transcript(&tcp.url()).await);
    assert_eq!(over_unix.len(), 3);
    unix.stop().await;
    assert!(!path.exists(), "the socket file goes with its listener");
    tcp.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_stale_socket_is_replaced_and_a_live_one_or_a_file_left_alone() {
    let dir = TempDir::new();
    let server = common::fixture_server();

    // A socket whose server is gone: connecting is refused.
    let stale = dir.path("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    assert!(stale.exists());
    let listener = server.listen_unix(&stale).await.expect("replaces it");
    assert_eq!(transcript(&listener.url()).await.len(), 3);

    // A second server on the live socket: refused, the first one unharmed.
    let Err(e) = server.listen_unix(&stale).await else {
        panic!("in use");
    };
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    assert!(matches!(
        ListenError::of(&e),
        Some(ListenError::BindUnix { .. })
    ));
    assert!(e.to_string().contains("a server is accepting on it"), "{e}");
    assert_eq!(transcript(&listener.url()).await.len(), 3);

    // A file that is not a socket is never removed.
    let file = dir.path("notes.txt");
    std::fs::write(&file, b"keep me").expect("write");
    let Err(e) = server.listen_unix(&file).await else {
        panic!("not a socket");
    };
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    assert!(e.to_string().contains("is not a socket"), "{e}");
    assert_eq!(std::fs::read(&file).expect("still there"), b"keep me");

    // Shutdown removes the socket file too.
    server.shutdown().await;
    let gone = async {
        while stale.exists() {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), gone)
        .await
        .expect("the socket file removed at shutdown");
    drop(listener);
}

#[tokio::test]
async fn a_newer_servers_socket_at_the_same_path_is_not_removed() {
    let dir = TempDir::new();
    let path = dir.path("sim.sock");
    let server = common::fixture_server();
    let old = server.listen_unix(&path).await.expect("listen_unix");
    // Someone replaced the file (e.g. removed it and bound their own).
    std::fs::remove_file(&path).expect("remove");
    let theirs = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    old.stop().await;
    assert!(path.exists(), "the newer socket stays");
    drop(theirs);
    server.shutdown().await;
}

/// Sends a handshake over the socket and returns the status line.
async fn handshake_status(path: &std::path::Path, headers: &str) -> String {
    let mut s = tokio::net::UnixStream::connect(path)
        .await
        .expect("connect");
    let request = format!(
        "GET / HTTP/1.1\r\n{headers}Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    s.write_all(request.as_bytes()).await.expect("write");
    let mut buf = vec![0u8; 512];
    let n = s.read(&mut buf).await.expect("read");
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    text.lines().next().unwrap_or("").to_string()
}

#[tokio::test]
async fn any_host_is_accepted_and_the_token_still_required() {
    let dir = TempDir::new();
    let path = dir.path("sim.sock");
    let server = common::fixture_server_with(
        ServerConfig {
            token: Some("s3cret".into()),
            ..ServerConfig::default()
        },
        |_| Ok(()),
    );
    let listener = server.listen_unix(&path).await.expect("listen_unix");
    // A DNS name a loopback TCP listener refuses (DNS-rebinding guard).
    let ok = handshake_status(
        &path,
        "Host: rebind.attacker.test\r\nAuthorization: Bearer s3cret\r\n",
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 101"), "{ok}");
    let no_host = handshake_status(&path, "Authorization: Bearer s3cret\r\n").await;
    assert!(no_host.starts_with("HTTP/1.1 101"), "{no_host}");
    let no_token = handshake_status(&path, "Host: localhost\r\n").await;
    assert!(no_token.starts_with("HTTP/1.1 401"), "{no_token}");
    let origin = handshake_status(
        &path,
        "Host: localhost\r\nOrigin: http://evil.example\r\nAuthorization: Bearer s3cret\r\n",
    )
    .await;
    assert!(origin.starts_with("HTTP/1.1 403"), "{origin}");
    // Our client with the token.
    let config = ClientConfig {
        token: Some("s3cret".into()),
        ..ClientConfig::default()
    };
    let client = Client::connect(&listener.url(), config)
        .await
        .expect("connect with the token");
    client.close().await;
    listener.stop().await;
    server.shutdown().await;
}

#[tokio::test]
async fn a_missing_socket_is_a_connection_error_naming_it() {
    let dir = TempDir::new();
    let url = format!("ws+unix://{}", dir.path("nobody.sock").display());
    let Err(e) = Client::connect(&url, ClientConfig::default()).await else {
        panic!("nothing listens there");
    };
    let text = e.to_string();
    assert!(text.contains("nobody.sock"), "{text}");
    let Err(empty) = Client::connect("ws+unix://", ClientConfig::default()).await else {
        panic!("no path");
    };
    assert!(empty.to_string().contains("ws+unix://PATH"), "{empty}");
}

type UnixWs = tokio_tungstenite::WebSocketStream<tokio::net::UnixStream>;

/// A raw WebSocket over the Unix socket at `path`, after hello; the session ID.
async fn raw_unix(path: &std::path::Path) -> (UnixWs, Value) {
    use futures_util::SinkExt;
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .expect("connect");
    let (mut ws, _) = tokio_tungstenite::client_async("ws://localhost/", stream)
        .await
        .expect("upgrade");
    ws.send(raw_request("h", &Value::Null, "hello", None, Dict::new()))
        .await
        .unwrap();
    let (hello, _) = next_binary(&mut ws).await;
    let session = hello
        .get("result")
        .and_then(|r| r.get("session_id"))
        .cloned()
        .expect("a session");
    (ws, session)
}

fn raw_request(
    id: &str,
    session: &Value,
    op: &str,
    resource: Option<&str>,
    extra: Dict,
) -> tokio_tungstenite::tungstenite::Message {
    let mut d = unienv_remote::protocol::request_envelope(op, id, session, resource);
    for (k, v) in extra {
        d.insert(k, v);
    }
    let bytes = unienv_remote::Codec::default()
        .encode(&Value::Dict(d))
        .unwrap();
    tokio_tungstenite::tungstenite::Message::Binary(bytes.into())
}

fn raw_call(method: &str, args: Vec<Value>, operation: &str) -> Dict {
    let mut d = Dict::new();
    d.insert("method", method);
    d.insert("args", Value::Tuple(args));
    d.insert("operation_id", operation);
    d
}

/// The next binary message (every frame arrives whole, or tungstenite
/// fails), and how many pings came before it.
async fn next_binary(ws: &mut UnixWs) -> (Value, usize) {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let mut pings = 0;
    loop {
        let m = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
            .await
            .expect("a message within 10 s")
            .expect("open")
            .expect("a valid frame");
        match m {
            Message::Binary(b) => {
                return (unienv_remote::Codec::default().decode(b).unwrap(), pings)
            }
            Message::Ping(_) => pings += 1,
            _ => {}
        }
    }
}

/// Over Unix sockets (whose halves register for writability only while a
/// write waits): a controller's pipelined responses, written by the domain
/// thread while nothing is queued, partly when the socket fills and by the
/// writer after that, arrive whole and in request order with heartbeat
/// pings between them; an observer that reads late gets whole snapshots in
/// increasing order, the last boundary's last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_unix_responses_snapshots_and_pings_keep_their_order() {
    use futures_util::SinkExt;
    let dir = TempDir::new();
    let path = dir.path("order.sock");
    let config = ServerConfig {
        heartbeat_interval: Some(std::time::Duration::from_millis(30)),
        heartbeat_timeout: std::time::Duration::from_secs(30),
        ..ServerConfig::default()
    };
    let server = common::fixture_server_with(config, |_| Ok(()));
    let unix = server.listen_unix(&path).await.expect("listen_unix");
    let (mut ctl, ctl_session) = raw_unix(&path).await;
    let (mut obs, obs_session) = raw_unix(&path).await;
    ctl.send(raw_request(
        "reset",
        &ctl_session,
        "call",
        Some("counter"),
        raw_call("reset", vec![], "o-reset"),
    ))
    .await
    .unwrap();
    next_binary(&mut ctl).await;
    let mut sub = Dict::new();
    sub.insert("subscription_id", "s");
    sub.insert("fields", Value::List(vec![Value::from("observation")]));
    obs.send(raw_request(
        "sub",
        &obs_session,
        "subscribe",
        Some("counter"),
        sub,
    ))
    .await
    .unwrap();
    let (subscribed, _) = next_binary(&mut obs).await;
    assert_eq!(
        subscribed.get("type").and_then(Value::as_str),
        Some("response")
    );
    let n = 48;
    for i in 0..n {
        // Large renders (196 KiB, more than a Unix socket buffers) alternate
        // with describes of the same domain, and with steps of another
        // (each a boundary published to the observer).
        let m = match i % 4 {
            0 | 2 => {
                let render = raw_call("render", vec![], &format!("o{i}"));
                raw_request(
                    &format!("r{i}"),
                    &ctl_session,
                    "call",
                    Some("large_render"),
                    render,
                )
            }
            1 => raw_request(
                &format!("r{i}"),
                &ctl_session,
                "describe",
                Some("large_render"),
                Dict::new(),
            ),
            _ => {
                let action = Value::Array(NdArray::from_vec(vec![1.0f32, 1.0]));
                let step = raw_call("step", vec![action], &format!("o{i}"));
                raw_request(
                    &format!("r{i}"),
                    &ctl_session,
                    "call",
                    Some("counter"),
                    step,
                )
            }
        };
        ctl.feed(m).await.unwrap();
    }
    ctl.flush().await.unwrap();
    // Neither reads for a while: the controller's socket fills, and both
    // sessions are pinged.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut pings = 0;
    let mut last_sequence = 0;
    // Each domain answers in request order; the two domains interleave.
    let mut large = (0..n).filter(|i| i % 4 != 3);
    let mut counter = (0..n).filter(|i| i % 4 == 3);
    for k in 0..n {
        let (m, p) = next_binary(&mut ctl).await;
        pings += p;
        assert_eq!(
            m.get("type").and_then(Value::as_str),
            Some("response"),
            "{m:?}"
        );
        let id = m.get("request_id").and_then(Value::as_str).unwrap();
        let i: usize = id[1..].parse().unwrap();
        let expected = if i % 4 == 3 {
            counter.next()
        } else {
            large.next()
        };
        assert_eq!(Some(i), expected, "{id} out of order");
        let result = m.get("result").expect("a result");
        match i % 4 {
            0 | 2 => match result.get("value") {
                Some(Value::Array(a)) => assert_eq!(a.shape(), &[256, 256, 3]),
                other => panic!("not an image: {other:?}"),
            },
            1 => assert!(result.as_seq().is_some(), "descriptors: {result:?}"),
            _ => {
                last_sequence = result.get("descriptors").unwrap().as_seq().unwrap()[0]
                    .get("sequence")
                    .and_then(Value::as_i64)
                    .unwrap();
            }
        }
        if k % 8 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    assert!(pings > 0, "no heartbeat ping reached the silent controller");
    let mut sequences = Vec::new();
    loop {
        let (ev, _) = next_binary(&mut obs).await;
        assert_eq!(
            ev.get("type").and_then(Value::as_str),
            Some("snapshot"),
            "{ev:?}"
        );
        let sequence = ev.get("sequence").and_then(Value::as_i64).unwrap();
        sequences.push(sequence);
        if sequence == last_sequence {
            let position = ev.get("data").and_then(|d| d.get("observation"));
            let position = position.and_then(|o| o.get("position")).unwrap();
            let position = position.as_array().unwrap().to_vec::<f32>().unwrap();
            assert_eq!(position, vec![(n / 4) as f32; 2]);
            break;
        }
    }
    assert!(
        sequences.windows(2).all(|w| w[0] < w[1]),
        "sequences increase: {sequences:?}"
    );
    assert_eq!(server.session_count(), 2);
    unix.stop().await;
    server.shutdown().await;
}
