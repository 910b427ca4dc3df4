//! The viewer's command line: `serve --viewer` and `view --token`, as
//! processes; the page's socket is a plain WebSocket client.

use crate::cli_support;
use crate::support;

use cli_support::Streaming;
use futures_util::StreamExt;
use support::PageMessage;
use tokio_tungstenite::tungstenite::Message;
use unienv_remote::server::{Server, ServerConfig};

/// The first line of `process` containing `http://`, as the URL it names.
fn viewer_url(process: &Streaming) -> String {
    for _ in 0..200 {
        let Some(line) = process.next_line(support::DEADLINE) else {
            break;
        };
        if let Some(at) = line.find("http://") {
            let url = line[at..].split_whitespace().next().unwrap_or("");
            return url.trim_end_matches('/').to_string();
        }
    }
    panic!("no viewer URL printed");
}

/// The viewer's first upstream and resources messages.
async fn first_messages(http_url: &str) -> (serde_json::Value, Option<serde_json::Value>) {
    let mut page = support::open_page(http_url)
        .await
        .expect("connect to the viewer");
    let mut upstream = None;
    loop {
        let message = tokio::time::timeout(support::DEADLINE, page.next())
            .await
            .expect("a message from the viewer");
        let Some(Ok(Message::Binary(b))) = message else {
            panic!("the viewer's socket ended: {message:?}");
        };
        let m = PageMessage::decode(&b);
        match m.kind() {
            "upstream" if m.header["state"] == "connected" => upstream = Some(m.header),
            "upstream" => return (m.header, None),
            "resources" => return (upstream.expect("connected first"), Some(m.header)),
            _ => {}
        }
    }
}

#[tokio::test]
async fn serve_offers_the_viewer_beside_the_server() {
    let serve = Streaming::spawn(&[
        "serve",
        "--fixtures",
        "--addr",
        "127.0.0.1:0",
        "--viewer",
        "127.0.0.1:0",
    ]);
    let url = viewer_url(&serve);
    let (upstream, resources) = first_messages(&url).await;
    assert_eq!(upstream["server"], "unienv-remote");
    let resources = resources.expect("resources");
    let ids: Vec<&str> = resources["descriptors"]
        .as_array()
        .expect("descriptors")
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert!(ids.contains(&"bench_image"), "{ids:?}");
}

#[tokio::test]
async fn view_holds_the_token() {
    let mut builder = Server::builder(ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    });
    unienv_remote::fixtures::register(&mut builder).expect("fixtures");
    let server = builder.start().expect("a valid server configuration");
    let listener = server.listen("127.0.0.1:0").await.expect("listen");
    let upstream = listener.url();
    let good = Streaming::spawn(&[
        "view",
        &upstream,
        "--listen",
        "127.0.0.1:0",
        "--token",
        "s3cret",
    ]);
    let page_url = viewer_url(&good);
    // The viewer of a server with a token has a key of its own: its URL
    // carries it, and the page's socket is refused without it.
    assert!(page_url.contains("/?key="), "{page_url}");
    let keyless = page_url.split('?').next().unwrap_or_default();
    assert!(support::open_page(keyless).await.is_err());
    let (state, resources) = first_messages(&page_url).await;
    assert_eq!(state["state"], "connected");
    assert!(resources.is_some());
    let bad = Streaming::spawn(&[
        "view",
        &upstream,
        "--listen",
        "127.0.0.1:0",
        "--token",
        "wrong",
    ]);
    let (state, resources) = first_messages(&viewer_url(&bad)).await;
    assert_eq!(state["state"], "unreachable", "{state}");
    assert!(
        state["message"].as_str().is_some_and(|m| m.contains("401")),
        "{state}"
    );
    assert!(resources.is_none());
    drop((good, bad));
    server.shutdown().await;
}

#[tokio::test]
async fn view_trusts_a_private_ca_with_ca_file() {
    let pki = crate::common::pki::make_pki("viewer");
    let (server, listener) = crate::common::pki::tls_server(&pki).await;
    let upstream = listener.url();
    assert!(upstream.starts_with("wss://"), "{upstream}");
    let ca = pki.ca.to_string_lossy().into_owned();
    let trusting = Streaming::spawn(&[
        "view",
        &upstream,
        "--listen",
        "127.0.0.1:0",
        "--ca-file",
        &ca,
    ]);
    let (state, resources) = first_messages(&viewer_url(&trusting)).await;
    assert_eq!(state["state"], "connected", "{state}");
    assert!(resources.is_some());
    // Without the CA file the certificate is refused, and the page is told
    // the way out.
    let plain = Streaming::spawn(&["view", &upstream, "--listen", "127.0.0.1:0"]);
    let (state, resources) = first_messages(&viewer_url(&plain)).await;
    assert_eq!(state["state"], "unreachable", "{state}");
    assert!(
        state["message"]
            .as_str()
            .is_some_and(|m| m.contains("--ca-file")),
        "{state}"
    );
    assert!(resources.is_none());
    drop((trusting, plain));
    server.shutdown().await;
}

#[tokio::test]
async fn serve_with_tls_offers_a_viewer_that_reaches_its_own_server() {
    // A certificate from a private CA that serve's process was never told
    // to trust: the viewer reaches the server in process.
    let pki = crate::common::pki::make_pki("serve-viewer");
    let (cert, key) = (
        pki.cert.to_string_lossy().into_owned(),
        pki.key.to_string_lossy().into_owned(),
    );
    let serve = Streaming::spawn(&[
        "serve",
        "--fixtures",
        "--addr",
        "127.0.0.1:0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--viewer",
        "127.0.0.1:0",
    ]);
    let (upstream, resources) = first_messages(&viewer_url(&serve)).await;
    assert_eq!(upstream["state"], "connected", "{upstream}");
    assert!(
        upstream["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("wss://127.0.0.1:")),
        "{upstream}"
    );
    assert!(resources.is_some());
}
