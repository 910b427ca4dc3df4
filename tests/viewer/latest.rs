//! The viewer's delivery to its page is latest-wins: without the page's
//! credit nothing is sent, however many boundaries pass, and the next credit
//! brings the newest snapshot, not a backlog. Also: the page's files are
//! served, foreign Host and Origin headers are refused. The page here is a
//! plain WebSocket client (tokio-tungstenite), no browser needed.

use crate::support;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use std::time::Duration;
use support::{Hosts, PageMessage, DEADLINE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::client::{Client, ClientConfig};
use unienv_remote::host::ResetArgs;
use unienv_remote::server::{Server, ServerConfig};
use unienv_remote::viewer::{Viewer, ViewerConfig};
use unienv_remote::{NdArray, Value};

type Page =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn setup() -> (Server, unienv_remote::server::Listener, String, Viewer) {
    let (server, listener) = support::serve(ServerConfig::default(), Hosts::Fixtures).await;
    let url = listener.url();
    let viewer = support::viewer(ViewerConfig::new(url.clone())).await;
    (server, listener, url, viewer)
}

async fn send(page: &mut Page, command: serde_json::Value) {
    page.send(Message::binary(command.to_string().into_bytes()))
        .await
        .expect("send to the viewer");
}

/// The next message of type `kind` (others are skipped).
async fn next_of(page: &mut Page, kind: &str) -> PageMessage {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_without_credit_gets_nothing_then_only_the_latest() {
    let (server, _listener, url, viewer) = setup().await;
    let mut page = support::open_page(&viewer.url())
        .await
        .expect("connect to the viewer");
    let hello = next_of(&mut page, "upstream").await;
    assert_eq!(hello.header["state"], "connected", "{}", hello.header);
    let resources = next_of(&mut page, "resources").await;
    let ids: Vec<&str> = resources.header["descriptors"]
        .as_array()
        .expect("descriptors")
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert!(ids.contains(&"bench_image"), "{ids:?}");

    send(
        &mut page,
        json!({ "op": "subscribe", "panel": 7, "resource": "bench_image" }),
    )
    .await;
    let subscribed = next_of(&mut page, "subscribed").await;
    assert_eq!(subscribed.header["panel"], 7);
    assert_eq!(subscribed.header["descriptor"]["id"], "bench_image");
    send(&mut page, json!({ "op": "ready", "panel": 7 })).await;

    let controller = Client::connect(&url, ClientConfig::default())
        .await
        .expect("controller");
    let bench = controller.env("bench_image").await.expect("env");
    bench.reset(ResetArgs::default()).await.expect("reset");
    // One credit: the first snapshot comes.
    let action = Value::Array(NdArray::from_vec(vec![1.0f32; 4]));
    bench.step(action.clone()).await.expect("step");
    let first = next_of(&mut page, "snapshot").await;
    let first_seq = first.header["sequence"].as_u64().expect("sequence");
    // The image arrives whole in the blob.
    let image = &first.header["data"]["observation"]["image"]["$nd"];
    assert_eq!(image["shape"], json!([84, 84, 3]));
    let at = image["offset"].as_u64().expect("offset") as usize;
    let pixels = &first.blob[at..at + 84 * 84 * 3];
    assert!(pixels
        .iter()
        .enumerate()
        .all(|(i, &p)| p as usize == i % 251));

    // No credit: 300 or more boundaries, and nothing is sent to the page.
    // They come in bursts until their rate since the first boundary (as the
    // panel will measure it, between the two snapshots it delivers) is well
    // above the gating rate (150/s), however loaded the machine: the rate
    // below, taken at "now", is at most the one the panel measures.
    let first_ns = first.header["timestamp_ns"].as_i64().expect("timestamp");
    let mut steps = 0u64;
    let rate = loop {
        for _ in 0..100 {
            bench.step(action.clone()).await.expect("step");
        }
        steps += 100;
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos() as i64;
        let rate = steps as f64 / ((now_ns - first_ns) as f64 / 1e9);
        if (steps >= 300 && rate > 250.0) || steps >= 3000 {
            break rate;
        }
    };
    let last_seq = controller.descriptor("bench_image").expect("d").sequence();
    assert!(last_seq >= first_seq + steps);
    let quiet = tokio::time::timeout(Duration::from_millis(500), page.next()).await;
    assert!(
        quiet.is_err(),
        "the viewer sent without credit: {:?}",
        quiet.map(|m| m.map(|m| m.map(|m| PageMessage::decode(&m.into_data()).header)))
    );
    // The next credit brings the newest boundary, skipping the rest.
    send(&mut page, json!({ "op": "ready", "panel": 7 })).await;
    let latest = next_of(&mut page, "snapshot").await;
    assert_eq!(latest.header["sequence"].as_u64(), Some(last_seq));
    // The state component 0 grew by one per step: steps + 1 since reset.
    let state = &latest.header["data"]["observation"]["state"]["$nd"];
    assert_eq!(state["type"], "f32");
    let at = state["offset"].as_u64().expect("offset") as usize;
    let x = f32::from_le_bytes(latest.blob[at..at + 4].try_into().expect("4 bytes"));
    assert_eq!(x, steps as f32 + 1.0);
    // Boundaries above the gating rate: the panel now subscribes only while
    // the page waits for a frame.
    assert_eq!(
        latest.header["gated"],
        json!(true),
        "{rate:.0} boundaries/s: {}",
        latest.header
    );
    // A boundary while unsubscribed between frames is missed; the next
    // credit subscribes again, nothing comes, and the page is told how far
    // behind its frame is.
    bench.step(action.clone()).await.expect("step");
    send(&mut page, json!({ "op": "ready", "panel": 7 })).await;
    let stale = next_of(&mut page, "stale").await;
    assert_eq!(stale.header["sequence"].as_u64(), Some(last_seq + 1));
    assert_eq!(stale.header["shown"].as_u64(), Some(last_seq));
    // From then on the subscription is kept: the next boundary arrives.
    bench.step(action.clone()).await.expect("step");
    let next = next_of(&mut page, "snapshot").await;
    assert_eq!(next.header["sequence"].as_u64(), Some(last_seq + 2));

    // A subscription error reaches the page plainly.
    send(
        &mut page,
        json!({ "op": "subscribe", "panel": 8, "resource": "no_such_resource" }),
    )
    .await;
    let error = next_of(&mut page, "subscription_error").await;
    assert_eq!(error.header["panel"], 8);
    assert!(error.header["code"].as_str().is_some_and(|c| !c.is_empty()));

    // Render on demand through a one-shot subscription.
    send(
        &mut page,
        json!({ "op": "render", "panel": 9, "resource": "counter" }),
    )
    .await;
    let counter = controller.env("counter").await.expect("counter");
    counter.reset(ResetArgs::with_seed(2)).await.expect("reset");
    let render = loop {
        counter
            .step(Value::Array(NdArray::from_vec(vec![0.0f32, 0.0])))
            .await
            .expect("step");
        if let Ok(Some(Ok(Message::Binary(b)))) =
            tokio::time::timeout(Duration::from_millis(200), page.next()).await
        {
            let m = PageMessage::decode(&b);
            if m.kind() == "render" {
                break m;
            }
        }
    };
    assert_eq!(
        render.header["data"]["render"]["$nd"]["shape"],
        json!([3, 4, 3])
    );

    controller.close().await;
    server.shutdown().await;
    let lost = next_of(&mut page, "upstream").await;
    assert!(
        matches!(lost.header["state"].as_str(), Some("lost" | "unreachable")),
        "{}",
        lost.header
    );
    // A server back on the same address: the viewer reconnects, lists the
    // resources again and subscribes the page's panels again.
    let addr = url.trim_start_matches("ws://").to_string();
    let revived = support::builder(ServerConfig::default(), Hosts::Fixtures)
        .start()
        .expect("a valid server configuration");
    let _listener = revived.listen(addr.as_str()).await.expect("listen again");
    let back = loop {
        let m = next_of(&mut page, "upstream").await;
        if m.header["state"] == "connected" {
            break m;
        }
    };
    assert_ne!(back.header["session_id"], hello.header["session_id"]);
    next_of(&mut page, "resources").await;
    let again = next_of(&mut page, "subscribed").await;
    assert_eq!(again.header["panel"], 7);
    // The new server's bench_image starts over: its revision and sequence
    // are those of a fresh domain, and snapshots flow again.
    let controller = Client::connect(&url, ClientConfig::default())
        .await
        .expect("controller");
    let bench = controller.env("bench_image").await.expect("env");
    bench.reset(ResetArgs::default()).await.expect("reset");
    let fresh = next_of(&mut page, "snapshot").await;
    assert_eq!(fresh.header["kind"], "reset");
    assert_eq!(fresh.header["sequence"].as_u64(), Some(1));
    assert_eq!(fresh.header["revision"].as_u64(), Some(1));
    send(&mut page, json!({ "op": "ready", "panel": 7 })).await;
    bench.step(action.clone()).await.expect("step");
    let step = next_of(&mut page, "snapshot").await;
    assert_eq!(step.header["sequence"].as_u64(), Some(2));
    controller.close().await;
    revived.shutdown().await;
}

async fn http(addr: std::net::SocketAddr, request: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn page_files_and_host_origin_checks() {
    let (_server, _listener, _url, viewer) = setup().await;
    let addr = viewer.local_addr();
    let page = http(
        addr,
        &format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("uPlot.iife.min.js") && page.contains("viewer.js"));
    for path in [
        "/viewer.js",
        "/viewer.css",
        "/uPlot.iife.min.js",
        "/uPlot.min.css",
        "/LICENSE.uPlot.txt",
        // The tab's icon, also where browsers look without a link to it.
        "/favicon.svg",
        "/favicon.ico",
    ] {
        let r = http(
            addr,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: localhost:{}\r\n\r\n",
                addr.port()
            ),
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 200"), "{path}: {r:.200}");
    }
    let license = http(
        addr,
        &format!("GET /LICENSE.uPlot.txt HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    )
    .await;
    assert!(license.contains("MIT") && license.contains("Leon Sorokin"));
    let missing = http(addr, &format!("GET /nope HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
    assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
    // DNS rebinding: a foreign name in Host is refused, for files and the socket.
    let rebound = http(addr, "GET / HTTP/1.1\r\nHost: evil.example:8766\r\n\r\n").await;
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    let ws_url = format!("ws://{addr}/ws");
    let mut request = ws_url.as_str().into_client_request().expect("request");
    request
        .headers_mut()
        .insert("Host", "evil.example".parse().expect("header"));
    assert!(tokio_tungstenite::connect_async(request).await.is_err());
    // Another origin's page may not use the viewer's socket.
    let mut request = ws_url.as_str().into_client_request().expect("request");
    request
        .headers_mut()
        .insert("Origin", "http://evil.example".parse().expect("header"));
    assert!(tokio_tungstenite::connect_async(request).await.is_err());
    // A request without Origin is not a browser's: refused (without a key).
    let request = ws_url.as_str().into_client_request().expect("request");
    assert!(tokio_tungstenite::connect_async(request).await.is_err());
    // A method other than GET and HEAD: 405, with Allow.
    let post = http(addr, &format!("POST / HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
    assert!(
        post.starts_with("HTTP/1.1 405") && post.contains("\r\nAllow: GET, HEAD\r\n"),
        "{post}"
    );
    // The page's own origin may.
    let mut request = ws_url.as_str().into_client_request().expect("request");
    request
        .headers_mut()
        .insert("Origin", format!("http://{addr}").parse().expect("header"));
    assert!(tokio_tungstenite::connect_async(request).await.is_ok());
}

/// The server's count of answered `discover`s (its metrics endpoint).
async fn discovers(metrics: &unienv_remote::metrics::MetricsEndpoint) -> u64 {
    let mut stream = tokio::net::TcpStream::connect(metrics.local_addr())
        .await
        .expect("connect to the metrics endpoint");
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        metrics.local_addr()
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut text = String::new();
    stream.read_to_string(&mut text).await.expect("read");
    text.lines()
        .filter(|l| {
            l.starts_with("unienv_requests_total{")
                && l.contains("op=\"discover\"")
                && l.contains("code=\"ok\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_flood_costs_the_server_one_discover_a_second() {
    let (server, _listener, _url, viewer) = setup().await;
    let metrics = server
        .serve_metrics("127.0.0.1:0")
        .await
        .expect("metrics endpoint");
    let start = std::time::Instant::now();
    let before = discovers(&metrics).await;
    // Two tabs, each sending 500 refreshes as fast as it can.
    let mut pages = Vec::new();
    for _ in 0..2 {
        let mut page = support::open_page(&viewer.url())
            .await
            .expect("connect to the viewer");
        next_of(&mut page, "resources").await;
        for _ in 0..500 {
            send(&mut page, json!({ "op": "refresh" })).await;
        }
        pages.push(page);
    }
    // Each tab's flood is answered: by one list at once or after the
    // spacing, however many refreshes it coalesces.
    let mut lists = 0u64;
    for page in &mut pages {
        next_of(page, "resources").await;
        lists += 1;
        while let Ok(Some(Ok(Message::Binary(b)))) =
            tokio::time::timeout(Duration::from_millis(1500), page.next()).await
        {
            if PageMessage::decode(&b).kind() == "resources" {
                lists += 1;
            }
        }
    }
    let asked = discovers(&metrics).await - before;
    // At most one discover per second (all tabs), one list per second per
    // tab, beside the first ones; a second is REFRESH_SPACING.
    let seconds = start.elapsed().as_secs() + 1;
    assert!(
        asked <= seconds + 1,
        "{asked} discovers in about {seconds} s for 1,000 refreshes"
    );
    assert!(
        lists <= 2 * (seconds + 1),
        "{lists} lists in about {seconds} s for 1,000 refreshes"
    );
    drop(pages);
    server.shutdown().await;
}
