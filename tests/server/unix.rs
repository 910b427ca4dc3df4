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
use unienv_remote::{NdArray, Value};

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
