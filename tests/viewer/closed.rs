//! The viewer is as closed as the server it shows: with a token upstream it
//! needs its own key (in the printed URL, then a cookie), page sockets
//! without it get nothing; tabs are capped and share one upstream session,
//! so no number of tabs refuses a token holder; a vanished page is dropped
//! by the heartbeat; partial request heads are capped; a tab's panels are
//! capped and refused ones dropped.

use crate::support::{self, Hosts, PageMessage, PageSocket, DEADLINE};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::server::{Listener, Server, ServerConfig};
use unienv_remote::viewer::{ViewerConfig, MAX_PANELS};

const TOKEN: &str = "s3cret";

/// A server with the fixtures, listening.
async fn server(config: ServerConfig) -> (Server, Listener) {
    support::serve(config, Hosts::Fixtures).await
}

fn with_token() -> ServerConfig {
    support::with_token(TOKEN)
}

fn viewer_config(url: String) -> ViewerConfig {
    let mut config = ViewerConfig::new(url);
    config.client = ClientConfig::default().with_token(TOKEN);
    config
}

async fn http(addr: SocketAddr, request: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(DEADLINE, s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// The next message of type `kind` (others skipped).
async fn next_of(page: &mut PageSocket, kind: &str) -> PageMessage {
    let wait = async {
        loop {
            match page.next().await {
                Some(Ok(Message::Binary(b))) => {
                    let m = PageMessage::decode(&b);
                    if m.kind() == kind {
                        return m;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("the viewer's socket ended: {other:?}"),
            }
        }
    };
    tokio::time::timeout(DEADLINE, wait)
        .await
        .unwrap_or_else(|_| panic!("no {kind} message"))
}

async fn send(page: &mut PageSocket, command: serde_json::Value) {
    page.send(Message::binary(command.to_string().into_bytes()))
        .await
        .expect("send to the viewer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_key_the_viewer_gives_nothing() {
    let (server, listener) = server(with_token()).await;
    let viewer = support::viewer(viewer_config(listener.url())).await;
    let key = viewer
        .key()
        .expect("a key, the server having a token")
        .to_string();
    assert!(viewer.url().ends_with(&format!("/?key={key}")));
    let addr = viewer.local_addr();
    // No file, no socket without the key.
    for path in ["/", "/viewer.js", "/?key=wrong"] {
        let r = http(
            addr,
            &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 401"), "{path}: {r}");
        assert!(!r.contains("<html") && !r.contains("viewerState"), "{r}");
    }
    let keyless = format!("http://{addr}/");
    assert!(support::open_page(&keyless).await.is_err());
    let ws = format!("ws://{addr}/ws");
    let mut wrong = ws.as_str().into_client_request().expect("request");
    wrong.headers_mut().insert(
        "Cookie",
        format!("unienv_viewer_key_{}=nope", addr.port())
            .parse()
            .expect("header"),
    );
    wrong
        .headers_mut()
        .insert("Origin", format!("http://{addr}").parse().expect("header"));
    assert!(tokio_tungstenite::connect_async(wrong).await.is_err());
    // The printed URL: the key moves into a cookie, out of the address bar.
    let r = http(
        addr,
        &format!("GET /?key={key}&run=2 HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 303"), "{r}");
    assert!(r.contains("\r\nLocation: /?run=2\r\n"), "{r}");
    let cookie = format!("unienv_viewer_key_{}={key}", addr.port());
    assert!(
        r.contains(&format!(
            "Set-Cookie: {cookie}; Path=/; HttpOnly; SameSite=Strict"
        )),
        "{r}"
    );
    // With the cookie: the page and its socket.
    let page = http(
        addr,
        &format!("GET / HTTP/1.1\r\nHost: {addr}\r\nCookie: a=1; {cookie}\r\n\r\n"),
    )
    .await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page:.300}");
    let mut request = ws.as_str().into_client_request().expect("request");
    request
        .headers_mut()
        .insert("Cookie", cookie.parse().expect("header"));
    request
        .headers_mut()
        .insert("Origin", format!("http://{addr}").parse().expect("header"));
    let (mut tab, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("the page's socket with the cookie");
    let hello = next_of(&mut tab, "upstream").await;
    assert_eq!(hello.header["state"], "connected", "{}", hello.header);
    next_of(&mut tab, "resources").await;
    // A tool holding the key needs no Origin.
    let (mut tool, _) = tokio_tungstenite::connect_async(format!("{ws}?key={key}"))
        .await
        .expect("a tool with the key");
    next_of(&mut tool, "resources").await;
    drop((tab, tool));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_process_viewer_of_a_server_with_a_token_has_a_key() {
    let (server, listener) = server(with_token()).await;
    let viewer = support::viewer(support::in_process(&server, &listener)).await;
    assert!(viewer.key().is_some());
    let keyless = format!("http://{}/", viewer.local_addr());
    assert!(support::open_page(&keyless).await.is_err());
    let mut page = support::open_page(&viewer.url())
        .await
        .expect("with the key");
    next_of(&mut page, "resources").await;
    drop(page);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tabs_are_capped_share_one_session_and_never_refuse_a_token_holder() {
    let (server, listener) = server(ServerConfig {
        max_connections: 3,
        ..with_token()
    })
    .await;
    let mut config = viewer_config(listener.url());
    config.max_tabs = 4;
    let viewer = support::viewer(config).await;
    let mut tabs = Vec::new();
    for _ in 0..4 {
        let mut tab = support::open_page(&viewer.url()).await.expect("a tab");
        next_of(&mut tab, "resources").await;
        tabs.push(tab);
    }
    // Four tabs, one upstream session.
    assert_eq!(server.session_count(), 1);
    // A flood of tabs beyond the cap is refused, and takes no slot.
    for _ in 0..50 {
        assert!(support::open_page(&viewer.url()).await.is_err());
    }
    assert_eq!(server.session_count(), 1);
    // Two token holders still get in (3 slots: the viewer's and theirs).
    let config = ClientConfig::default().with_token(TOKEN);
    let a = Client::connect(&listener.url(), config.clone())
        .await
        .expect("a token holder");
    let b = Client::connect(&listener.url(), config)
        .await
        .expect("another token holder");
    // A closed tab frees its place.
    drop(tabs.pop());
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let mut tab = loop {
        match support::open_page(&viewer.url()).await {
            Ok(tab) => break tab,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("the closed tab's place was not freed: {e}"),
        }
    };
    next_of(&mut tab, "resources").await;
    a.close().await;
    b.close().await;
    drop((tab, tabs));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_stops_answering_is_dropped_by_the_heartbeat() {
    let (server, listener) = server(ServerConfig::default()).await;
    let mut config = ViewerConfig::new(listener.url());
    config.max_tabs = 1;
    config.heartbeat_interval = Some(Duration::from_millis(100));
    config.heartbeat_timeout = Duration::from_millis(500);
    let viewer = support::viewer(config).await;
    let addr = viewer.local_addr();
    // A raw page: the upgrade, then silence (no pong, nothing read).
    let mut raw = tokio::net::TcpStream::connect(addr).await.expect("connect");
    raw.write_all(
        format!(
            "GET /ws HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://{addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .expect("write");
    // The viewer pings, hears nothing, and closes the socket.
    let mut got = Vec::new();
    tokio::time::timeout(DEADLINE, raw.read_to_end(&mut got))
        .await
        .expect("the viewer closed the silent page")
        .expect("read");
    assert!(
        got.starts_with(b"HTTP/1.1 101"),
        "{:?}",
        &got[..got.len().min(64)]
    );
    // Its place (the only one) is free again.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match support::open_page(&viewer.url()).await {
            Ok(_) => break,
            Err(e) if tokio::time::Instant::now() >= deadline => panic!("{e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_request_heads_cannot_keep_the_page_out() {
    let (server, listener) = server(ServerConfig::default()).await;
    let viewer = support::viewer(ViewerConfig::new(listener.url())).await;
    let addr = viewer.local_addr();
    // 100 connections holding 8 KB partial heads: more than the viewer
    // keeps (64); the oldest are dropped.
    let filler = "x".repeat(8000);
    let mut partial = Vec::new();
    for _ in 0..100 {
        let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
        s.write_all(format!("GET / HTTP/1.1\r\nHost: {addr}\r\nX-Fill: {filler}").as_bytes())
            .await
            .expect("write");
        partial.push(s);
    }
    // The page is still served at once.
    let page = http(addr, &format!("GET / HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page:.200}");
    // And the first of the partial heads were dropped.
    let mut dropped = 0;
    for s in partial.iter_mut().take(30) {
        let mut b = [0u8; 16];
        if let Ok(Ok(0)) = tokio::time::timeout(DEADLINE, s.read(&mut b)).await {
            dropped += 1;
        }
    }
    assert_eq!(dropped, 30);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panels_are_capped_and_refused_ones_dropped() {
    let (server, listener) = server(ServerConfig::default()).await;
    let viewer = support::viewer(ViewerConfig::new(listener.url())).await;
    let mut page = support::open_page(&viewer.url()).await.expect("a tab");
    next_of(&mut page, "resources").await;
    // Refused subscriptions do not stay as panels...
    for panel in 0..(2 * MAX_PANELS as u64) {
        send(
            &mut page,
            json!({ "op": "subscribe", "panel": panel, "resource": format!("missing_{panel}") }),
        )
        .await;
        let e = next_of(&mut page, "subscription_error").await;
        assert_eq!(e.header["panel"], panel);
        assert_ne!(e.header["code"], "too_many_panels", "{}", e.header);
    }
    // ...so the tab still has room for MAX_PANELS, and no more.
    for panel in 1000..(1000 + MAX_PANELS as u64) {
        send(
            &mut page,
            json!({ "op": "subscribe", "panel": panel, "resource": "counter" }),
        )
        .await;
        let s = next_of(&mut page, "subscribed").await;
        assert_eq!(s.header["panel"], panel);
    }
    send(
        &mut page,
        json!({ "op": "subscribe", "panel": 5000, "resource": "counter" }),
    )
    .await;
    let e = next_of(&mut page, "subscription_error").await;
    assert_eq!(e.header["code"], "too_many_panels", "{}", e.header);
    drop(page);
    server.shutdown().await;
}
