//! The viewer in front of a relay (`view ws://RELAY/`, `relay --viewer`):
//! its page lists the connected hosts with links to each host's viewer,
//! and a host's page socket (`/hosts/NAME/ws`) lists that host's resources
//! and streams the boundaries of a resource stepped by another client
//! through the relay. The page's side of the socket is spoken here as the
//! page's script speaks it (the page itself is the viewer's, tested in a
//! browser by the viewer's tests).

use super::{action, connect, dialing_host, relay, PATIENCE};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value as Json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::host::ResetArgs;
use unienv_remote::viewer::{Viewer, ViewerConfig};

/// A plain `GET path` of the viewer: the whole response.
async fn get(viewer: &Viewer, path: &str) -> String {
    let addr = viewer.local_addr();
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.expect("request");
    let mut out = Vec::new();
    tokio::time::timeout(PATIENCE, tcp.read_to_end(&mut out))
        .await
        .expect("an answer in time")
        .expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

/// A viewer message's JSON header (binary messages: a 4-byte length, the
/// header, then the arrays).
fn header(bytes: &[u8]) -> Json {
    let n = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    serde_json::from_slice(&bytes[4..4 + n]).expect("a JSON header")
}

type Page =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next message from the viewer for which `wanted` holds.
async fn until(page: &mut Page, what: &str, wanted: impl Fn(&Json) -> bool) -> Json {
    let wait = async {
        while let Some(m) = page.next().await {
            let m = m.expect("the page socket stays open");
            let h = match m {
                Message::Binary(b) => header(&b),
                Message::Text(t) => serde_json::from_str(&t).expect("JSON"),
                _ => continue,
            };
            if wanted(&h) {
                return h;
            }
        }
        panic!("the page socket closed before {what}");
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .unwrap_or_else(|_| panic!("no {what} in time"))
}

#[tokio::test]
async fn the_viewer_of_a_relay_lists_its_hosts_and_watches_one_through_it() {
    let relay = relay().await;
    let (host, dial) = dialing_host(&relay, "fx").await;
    let mut config = ViewerConfig::new(relay.url());
    config.relay = true;
    let viewer = Viewer::start("127.0.0.1:0", config).await.expect("viewer");

    let hosts = get(&viewer, "/").await;
    assert!(hosts.starts_with("HTTP/1.1 200"), "{hosts}");
    assert!(hosts.contains("href=\"/hosts/fx/\""), "{hosts}");
    assert!(
        hosts.contains("href=\"/hosts/fx/?watch=counter\""),
        "{hosts}"
    );
    let slash = get(&viewer, "/hosts/fx?watch=counter").await;
    assert!(
        slash.starts_with("HTTP/1.1 303") && slash.contains("Location: /hosts/fx/?watch=counter"),
        "{slash}"
    );
    let page = get(&viewer, "/hosts/fx/").await;
    assert!(
        page.starts_with("HTTP/1.1 200") && page.contains("unienv-remote viewer"),
        "{page}"
    );
    for missing in ["/hosts/a%2Fb/", "/ws"] {
        let r = get(&viewer, missing).await;
        assert!(r.starts_with("HTTP/1.1 404"), "{missing}: {r}");
    }

    // The host's page socket: its resources, then a panel on `counter`.
    let addr = viewer.local_addr();
    let mut request = format!("ws://{addr}/hosts/fx/ws")
        .into_client_request()
        .expect("request");
    request.headers_mut().insert(
        "Origin",
        format!("http://{addr}").parse().expect("an origin"),
    );
    let (mut page, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("the host's page socket");
    let upstream = until(&mut page, "the upstream session", |h| {
        h["type"] == "upstream" && h["state"] == "connected"
    })
    .await;
    assert_eq!(upstream["url"], relay.host_url("fx"), "{upstream}");
    let resources = until(&mut page, "the resources", |h| h["type"] == "resources").await;
    assert!(
        resources["descriptors"].is_array() && resources.to_string().contains("\"counter\""),
        "{resources}"
    );
    for command in [
        json!({"op": "subscribe", "panel": 1, "resource": "counter"}),
        json!({"op": "ready", "panel": 1}),
    ] {
        page.send(Message::Binary(command.to_string().into_bytes().into()))
            .await
            .expect("a command");
    }
    until(&mut page, "the subscription", |h| h["type"] == "subscribed").await;
    // Another client steps `counter` through the relay: the page sees it.
    let client = connect(&relay.host_url("fx")).await.expect("a client");
    let env = client.env("counter").await.expect("counter");
    env.reset(ResetArgs::with_seed(0)).await.expect("reset");
    let stepping = async {
        loop {
            env.step(action()).await.expect("step");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let seen = tokio::select! {
        h = until(&mut page, "a boundary of counter", |h| {
            h["resource"] == "counter" && h["sequence"].is_u64()
        }) => h,
        _ = stepping => unreachable!(),
    };
    assert_eq!(seen["panel"], 1, "{seen}");
    drop(page);
    env.close().await.expect("release");
    client.close().await;
    viewer.stop();
    dial.stop();
    host.shutdown().await;
    relay.shutdown().await;
}
