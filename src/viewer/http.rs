//! The viewer's HTTP side: the page's files, the Host and Origin checks
//! (against DNS rebinding), and the upgrade of `/ws` to a tab.

use super::config::ViewerConfig;
use super::tab::Tab;
use crate::transport::ws::{self, RequestHead};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// Largest HTTP request head the viewer reads.
const MAX_HEAD: usize = 16 * 1024;

/// Largest message the page may send (its commands are small JSON objects).
const MAX_PAGE_MESSAGE: usize = 64 * 1024;

/// The page's files, embedded in the binary.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("assets/index.html"),
    ),
    (
        "/viewer.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/viewer.js"),
    ),
    (
        "/viewer.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/viewer.css"),
    ),
    (
        "/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("assets/uPlot.iife.min.js"),
    ),
    (
        "/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("assets/uPlot.min.css"),
    ),
    (
        "/LICENSE.uPlot.txt",
        "text/plain; charset=utf-8",
        include_bytes!("assets/LICENSE.uPlot.txt"),
    ),
];

/// Whether a Host header may be answered: IP literals and `localhost`
/// cannot come from DNS rebinding; other names must be allowed explicitly.
pub(super) fn host_allowed(config: &ViewerConfig, host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = split_host(&host);
    if config
        .allowed_hosts
        .iter()
        .any(|h| h == "*" || h.eq_ignore_ascii_case(&host) || h.eq_ignore_ascii_case(name))
    {
        return true;
    }
    name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok()
}

/// Whether a WebSocket's Origin may connect: the page's own origin
/// (`http://` + the Host header) or one allowed explicitly.
pub(super) fn origin_allowed(config: &ViewerConfig, origin: &str, host: &str) -> bool {
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    if config
        .allowed_origins
        .iter()
        .any(|o| o == "*" || o.trim_end_matches('/').eq_ignore_ascii_case(&origin))
    {
        return true;
    }
    origin == format!("http://{}", host.trim().to_ascii_lowercase())
}

/// The host name of `host[:port]` or `[v6]:port` (brackets removed).
pub(super) fn split_host(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match s.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => s,
    }
}

/// What a request head asks for.
pub(super) struct Head {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) host: Option<String>,
    pub(super) upgrade: bool,
}

/// Looks at the request head without consuming it, so that a WebSocket
/// upgrade can be handed whole to the WebSocket layer. Browsers send the
/// head in one segment; a head that trickles in is waited for (briefly).
pub(super) async fn peek_head(stream: &TcpStream) -> Option<(Head, usize)> {
    let mut buf = vec![0u8; MAX_HEAD];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let n = tokio::time::timeout_at(deadline, stream.peek(&mut buf))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        if let Some(end) = buf[..n].windows(4).position(|w| w == b"\r\n\r\n") {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            let Ok(httparse::Status::Complete(_)) = req.parse(&buf[..end + 4]) else {
                return None;
            };
            let header = |name: &str| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).into_owned())
            };
            let upgrade = header("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
            let head = Head {
                method: req.method.unwrap_or_default().to_string(),
                path: req.path.unwrap_or("/").to_string(),
                host: header("host"),
                upgrade,
            };
            return Some((head, end + 4));
        }
        if n >= MAX_HEAD || tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub(super) async fn handle_connection(mut stream: TcpStream, config: Arc<ViewerConfig>) {
    let Some((head, head_len)) = peek_head(&stream).await else {
        return;
    };
    let path = head.path.split('?').next().unwrap_or("/").to_string();
    if head.upgrade && path == "/ws" {
        let policy = |req: &RequestHead| -> Result<(), ws::Refusal> {
            let host = req.header("host").unwrap_or("");
            if !host_allowed(&config, host) {
                return Err(ws::Refusal::new(403, "Forbidden", "Host not allowed"));
            }
            if let Some(origin) = req.header("origin") {
                if !origin_allowed(&config, origin, host) {
                    return Err(ws::Refusal::new(403, "Forbidden", "Origin not allowed"));
                }
            }
            Ok(())
        };
        if let Ok((reader, writer)) = ws::accept(stream, MAX_HEAD, MAX_PAGE_MESSAGE, policy).await {
            Tab::run(config, reader, writer).await;
        }
        return;
    }
    // A plain HTTP request: consume its head and answer it.
    let mut discard = vec![0u8; head_len];
    if tokio::io::AsyncReadExt::read_exact(&mut stream, &mut discard)
        .await
        .is_err()
    {
        return;
    }
    let response = if !head
        .host
        .as_deref()
        .is_some_and(|h| host_allowed(&config, h))
    {
        plain(403, "Forbidden", "Host not allowed")
    } else if head.method != "GET" && head.method != "HEAD" {
        plain(405, "Method Not Allowed", "only GET")
    } else {
        match ASSETS.iter().find(|(p, _, _)| *p == path) {
            Some((_, content_type, body)) => {
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nContent-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                if head.method == "GET" {
                    r.extend_from_slice(body);
                }
                r
            }
            None => plain(404, "Not Found", "not found"),
        }
    };
    let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, &response).await;
    let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
}

pub(super) fn plain(status: u16, reason: &str, text: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}
