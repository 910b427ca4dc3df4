//! The viewer's HTTP side: the page's files, the Host and Origin checks
//! (against DNS rebinding), and the upgrade of `/ws` to a tab.

use super::config::ViewerConfig;
use super::relay::Route;
use super::tab::Tab;
use super::ViewerState;
use crate::transport::ws::{self, RequestHead};
use bytes::BytesMut;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    // The tab's icon: an SVG, also at the address browsers ask for
    // without a <link rel="icon"> (so /favicon.ico is not a 404).
    (
        "/favicon.svg",
        "image/svg+xml",
        include_bytes!("assets/favicon.svg"),
    ),
    (
        "/favicon.ico",
        "image/svg+xml",
        include_bytes!("assets/favicon.svg"),
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
    /// The request target, query included.
    pub(super) target: String,
    pub(super) host: Option<String>,
    pub(super) cookie: Option<String>,
    pub(super) upgrade: bool,
}

/// Time a connection has to send its whole request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Time the viewer gives a plain HTTP response to be written.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads a request head into `buf` (waiting for readability, never
/// polling), at most [`MAX_HEAD`] bytes; the bytes stay in `buf`, so that a
/// WebSocket upgrade is handed whole to the WebSocket layer.
pub(super) async fn read_head(stream: &mut TcpStream, buf: &mut BytesMut) -> Option<Head> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
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
            return Some(Head {
                method: req.method.unwrap_or_default().to_string(),
                target: req.path.unwrap_or("/").to_string(),
                host: header("host"),
                cookie: header("cookie"),
                upgrade,
            });
        }
        if buf.len() >= MAX_HEAD {
            return None;
        }
        buf.reserve(2048);
        let room = (MAX_HEAD - buf.len()) as u64;
        let n = (&mut *stream).take(room).read_buf(buf).await.ok()?;
        if n == 0 {
            return None;
        }
    }
}

pub(super) async fn handle_connection(mut stream: TcpStream, state: Arc<ViewerState>) {
    // A connection that has not sent its head holds a place among the
    // pending heads; when all are taken the oldest is dropped, so silent
    // sockets cannot keep a page out. Its head must come within
    // HEAD_TIMEOUT.
    let mut buf = BytesMut::with_capacity(2048);
    let head = {
        let slot = state.pending.admit();
        tokio::select! {
            r = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream, &mut buf)) => r,
            _ = slot.evicted.notified() => {
                tracing::debug!("viewer: connection dropped: too many pending request heads");
                return;
            }
        }
    };
    let Ok(Some(head)) = head else {
        return;
    };
    let config = &state.config;
    let mut path = head.target.split('?').next().unwrap_or("/").to_string();
    // In front of a relay: `/` lists its hosts, `/hosts/NAME/…` is the
    // host's viewer (its page, its socket), the page's files are shared,
    // and there is no socket at `/ws`.
    let mut host = None;
    let mut relay_page = None;
    if state.hosts.is_some() {
        match super::relay::route(&path) {
            Route::Hosts => relay_page = Some(RelayPage::Hosts),
            Route::Slash => relay_page = Some(RelayPage::Slash),
            Route::Host(name, rest) => {
                host = Some(name.to_string());
                path = rest;
            }
            Route::Invalid => relay_page = Some(RelayPage::NotFound),
            Route::Other if path == "/ws" => relay_page = Some(RelayPage::NotFound),
            Route::Other => {}
        }
    }
    if head.upgrade && path == "/ws" && relay_page.is_none() {
        let mut tab_slot = None;
        let policy = |req: &RequestHead| -> Result<(), ws::Refusal> {
            let host = req.header("host").unwrap_or("");
            if !host_allowed(config, host) {
                return Err(ws::Refusal::new(403, "Forbidden", "Host not allowed"));
            }
            let authorised = state.access.allows(&head.target, req.header("cookie"));
            match req.header("origin") {
                Some(origin) if !origin_allowed(config, origin, host) => {
                    return Err(ws::Refusal::new(403, "Forbidden", "Origin not allowed"));
                }
                Some(_) => {}
                // Not a browser: only with the viewer's key.
                None if state.access.key().is_none() => {
                    return Err(ws::Refusal::new(
                        403,
                        "Forbidden",
                        "Origin required: the viewer's WebSocket serves its page in a browser",
                    ));
                }
                None => {}
            }
            if !authorised {
                return Err(ws::Refusal::new(
                    401,
                    "Unauthorized",
                    "this viewer needs its key: open the URL it printed at start",
                ));
            }
            match state.tabs.clone().try_acquire_owned() {
                Ok(permit) => {
                    tab_slot = Some(permit);
                    Ok(())
                }
                Err(_) => Err(ws::Refusal::new(
                    503,
                    "Service Unavailable",
                    "too many open tabs",
                )),
            }
        };
        let accepted = tokio::time::timeout(
            HEAD_TIMEOUT,
            ws::accept_buffered(stream, buf, MAX_HEAD, MAX_PAGE_MESSAGE, policy),
        )
        .await;
        match accepted {
            Ok(Ok((reader, writer))) => {
                let _tab = tab_slot;
                // A host's tab runs on that host's viewer (its upstream
                // session through the relay).
                let tab_state = host
                    .and_then(|name| state.host(&name))
                    .unwrap_or_else(|| state.clone());
                Tab::run(tab_state, reader, writer).await;
            }
            Ok(Err(e)) => tracing::debug!(reason = %e, "viewer: tab refused"),
            Err(_) => {}
        }
        return;
    }
    // A plain HTTP request: answer it.
    let response = if !head
        .host
        .as_deref()
        .is_some_and(|h| host_allowed(config, h))
    {
        plain(403, "Forbidden", "Host not allowed")
    } else if head.method != "GET" && head.method != "HEAD" {
        with_header(
            plain(405, "Method Not Allowed", "only GET and HEAD"),
            "Allow: GET, HEAD",
        )
    } else if !state.access.allows(&head.target, head.cookie.as_deref()) {
        plain(
            401,
            "Unauthorized",
            "this viewer needs its key: open the URL it printed at start (http://HOST:PORT/?key=...)",
        )
    } else if state.access.key_in_query(&head.target) {
        // Keep the key in a cookie, and take it out of the address bar.
        let mut r = format!(
            "HTTP/1.1 303 See Other\r\nLocation: {}\r\nContent-Length: 0\r\nCache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n",
            super::access::without_key(&head.target)
        );
        if let Some(cookie) = state.access.set_cookie() {
            r.push_str(&format!("Set-Cookie: {cookie}\r\n"));
        }
        r.push_str("\r\n");
        r.into_bytes()
    } else if let Some(page) = relay_page {
        match page {
            RelayPage::Hosts => {
                let body = super::relay::hosts_page(config).await;
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nContent-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                if head.method == "GET" {
                    r.extend_from_slice(body.as_bytes());
                }
                r
            }
            RelayPage::Slash => {
                let query = head
                    .target
                    .split_once('?')
                    .map(|(_, q)| format!("?{q}"))
                    .unwrap_or_default();
                format!(
                    "HTTP/1.1 303 See Other\r\nLocation: {path}/{query}\r\nContent-Length: 0\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
                )
                .into_bytes()
            }
            RelayPage::NotFound => plain(
                404,
                "Not Found",
                "not found: this viewer shows a relay's hosts (/), each at /hosts/NAME/",
            ),
        }
    } else {
        match ASSETS.iter().find(|(p, _, _)| *p == path) {
            Some((_, content_type, body)) => {
                let mut r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nContent-Security-Policy: default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:\r\nConnection: close\r\n\r\n",
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
    let _ = tokio::time::timeout(WRITE_TIMEOUT, async {
        let _ = stream.write_all(&response).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// A viewer in front of a relay answers these itself.
enum RelayPage {
    /// `/`: the hosts.
    Hosts,
    /// `/hosts/NAME`: to `/hosts/NAME/`.
    Slash,
    /// An invalid host name, or `/ws` (there is no root socket).
    NotFound,
}

/// `response` with one more header line (after the status line).
fn with_header(response: Vec<u8>, line: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(&response);
    match text.split_once("\r\n") {
        Some((status, rest)) => format!("{status}\r\n{line}\r\n{rest}").into_bytes(),
        None => response,
    }
}

pub(super) fn plain(status: u16, reason: &str, text: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}
