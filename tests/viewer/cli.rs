//! The viewer's command line: `serve --viewer` and `view --token`, as
//! processes; the page's socket is a plain WebSocket client.

use crate::cli_support;
use crate::support;

use cli_support::Streaming;
use futures_util::StreamExt;
use support::{Hosts, PageMessage};
use tokio_tungstenite::tungstenite::Message;

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
    let (server, listener) = support::serve(support::with_token("s3cret"), Hosts::Fixtures).await;
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

/// The next line of `process` containing `needle`.
fn line_with(process: &Streaming, needle: &str) -> String {
    for _ in 0..200 {
        let Some(line) = process.next_line(support::DEADLINE) else {
            break;
        };
        if line.contains(needle) {
            return line;
        }
    }
    panic!("no line with {needle:?} printed");
}

/// The HTTP status and `Location` header of a GET of `url`
/// (`http://HOST:PORT/PATH`).
async fn get(url: &str) -> (u16, Option<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = tokio::net::TcpStream::connect(host)
        .await
        .expect("connect to the viewer");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(support::DEADLINE, stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {answer:?}"));
    let location = answer
        .lines()
        .find_map(|l| l.strip_prefix("Location: "))
        .map(str::to_string);
    (status, location)
}

/// A deep link with the key opens: the key goes into the cookie and the
/// browser is sent on to the same panels (a malformed link is a 401).
async fn assert_opens(link: &str) {
    let (status, location) = get(link).await;
    assert_eq!(status, 303, "{link}");
    let location = location.expect("a Location header");
    assert!(!location.contains("key="), "{location}");
    assert_eq!(watched(&location), watched(link), "{location}");
}

/// The `watch` ids of a deep link.
fn watched(link: &str) -> Vec<String> {
    let query = link.split_once('?').map(|(_, q)| q).unwrap_or_default();
    query
        .split('&')
        .find_map(|p| p.strip_prefix("watch="))
        .unwrap_or_else(|| panic!("no watch parameter in {link}"))
        .split(',')
        .map(str::to_string)
        .collect()
}

// Two workers: the test's blocking reads of the process's lines leave one
// to the in-process server, which `view` asks for its ids at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_links_carry_the_key_and_hosted_ids() {
    // A server with a token: the viewer has a key.
    let (server, listener) = support::serve(support::with_token("s3cret"), Hosts::Fixtures).await;
    let hosted: Vec<String> = server.roots().to_vec();
    let view = Streaming::spawn(&[
        "view",
        &listener.url(),
        "--listen",
        "127.0.0.1:0",
        "--token",
        "s3cret",
    ]);
    let line = line_with(&view, "Open panels directly:");
    let link = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a link");
    // `?key=K&watch=…`, not `?key=K?watch=…` (which the viewer refuses).
    assert!(
        link.contains("/?key=") && link.contains("&watch="),
        "{line}"
    );
    assert_eq!(link.matches('?').count(), 1, "{line}");
    let ids = watched(link);
    assert!(!ids.is_empty() && ids.len() <= 3, "{line}");
    for id in &ids {
        assert!(
            hosted.contains(id),
            "{id} is not hosted ({hosted:?}): {line}"
        );
    }
    assert_opens(link).await;
    drop(view);
    server.shutdown().await;

    // `serve --token --viewer` prints the same kind of link.
    let serve = Streaming::spawn(&[
        "serve",
        "--fixtures",
        "--addr",
        "127.0.0.1:0",
        "--token",
        "s3cret",
        "--viewer",
        "127.0.0.1:0",
    ]);
    let line = line_with(&serve, "panels directly:");
    let link = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a link");
    assert!(
        link.contains("/?key=") && link.contains("&watch="),
        "{line}"
    );
    assert_eq!(link.matches('?').count(), 1, "{line}");
    assert_opens(link).await;
}
