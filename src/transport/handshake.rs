//! The opening handshakes: HTTP upgrade requests and answers (RFC 6455
//! section 4), the accept key, refusals with their status and a body that
//! names the way out, `ws://`/`wss://` URLs, and the TLS handshake before
//! them.

use super::connection::{pair, WsReader, WsWriter};
use super::error::TransportError;
use super::frame::{random_u64, Role};
use super::tls::Stream;
use bytes::BytesMut;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

/// The GUID of RFC 6455 section 1.3.
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Standard base64 with padding.
pub(crate) fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// `Sec-WebSocket-Accept` for a key.
pub(crate) fn accept_key(key: &str) -> String {
    let mut input = key.trim().as_bytes().to_vec();
    input.extend_from_slice(ACCEPT_GUID);
    base64(&sha1(&input))
}

/// SHA-1 (only for the handshake's accept key, as RFC 6455 requires).
fn sha1(data: &[u8]) -> [u8; 20] {
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, data);
    let mut out = [0u8; 20];
    out.copy_from_slice(digest.as_ref());
    out
}

/// A parsed HTTP request head (what the server's handshake needs).
pub(crate) struct RequestHead {
    pub method: String,
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The first value of a header (case-insensitive name).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a handshake was refused: the HTTP status and a short text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: u16,
    pub reason: &'static str,
    pub message: String,
    pub extra_headers: Vec<(&'static str, &'static str)>,
}

impl Refusal {
    pub(crate) fn new(status: u16, reason: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason,
            message: message.into(),
            extra_headers: Vec::new(),
        }
    }
}

/// Reads an HTTP head (up to the blank line), at most `max` bytes.
async fn read_head<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut BytesMut,
    max: usize,
) -> Result<usize, TransportError> {
    loop {
        if let Some(end) = head_end(buf) {
            return Ok(end);
        }
        if buf.len() >= max {
            return Err(TransportError::TooLarge);
        }
        buf.reserve(1024);
        let room = max - buf.len();
        let n = {
            let mut limited = (&mut *stream).take(room as u64);
            limited.read_buf(buf).await.map_err(TransportError::io)?
        };
        if n == 0 {
            return Err(TransportError::Closed);
        }
        if buf.first() == Some(&TLS_HANDSHAKE_RECORD) {
            return Err(TransportError::Handshake(
                "a TLS handshake where HTTP was expected",
            ));
        }
    }
}

/// The first byte of a TLS handshake record (a client or server hello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The length of an HTTP head ending in a blank line: CRLF CRLF, or a bare
/// LF where a line ends (the head parser accepts both, so a head written
/// with bare LFs is answered at once instead of waiting for more).
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = buf[from..].iter().position(|&b| b == b'\n') {
        let at = from + i;
        match &buf[at + 1..] {
            [b'\n', ..] => return Some(at + 2),
            [b'\r', b'\n', ..] => return Some(at + 3),
            _ => from = at + 1,
        }
    }
    None
}

/// Whether a `Sec-WebSocket-Key` is what RFC 6455 section 4.1 requires:
/// the base64 encoding of 16 bytes (22 base64 digits and `==`).
fn valid_key(key: &str) -> bool {
    let key = key.trim().as_bytes();
    key.len() == 24
        && key[22..] == *b"=="
        && key[..22]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

pub(crate) async fn write_refusal<S: AsyncWrite + Unpin>(stream: &mut S, r: &Refusal) {
    let mut text = format!(
        "HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n",
        r.status,
        r.reason,
        r.message.len()
    );
    for (k, v) in &r.extra_headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(&r.message);
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The server side of a connection's handshakes: TLS first when `tls` is
/// given, then the WebSocket upgrade ([`accept`]).
pub(crate) async fn accept_over(
    tcp: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    max_head: usize,
    max_message: usize,
    policy: impl FnOnce(&RequestHead) -> Result<(), Refusal>,
) -> Result<(WsReader, WsWriter), TransportError> {
    let stream = match tls {
        None => Stream::Tcp(tcp),
        Some(acceptor) => {
            if !super::tls::starts_with_tls(&tcp).await? {
                return refuse_plain_on_tls(Stream::Tcp(tcp), max_head).await;
            }
            let s = acceptor
                .accept(tcp)
                .await
                .map_err(|e| TransportError::Tls(Arc::new(e)))?;
            Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(s)))
        }
    };
    accept(stream, max_head, max_message, policy).await
}

/// A plain HTTP request (a `ws://` client) on a TLS endpoint: its head is
/// read (so that closing does not reset the answer away), then answered in
/// plain HTTP with 400 and a body saying to use `wss://`.
async fn refuse_plain_on_tls(
    mut stream: Stream,
    max_head: usize,
) -> Result<(WsReader, WsWriter), TransportError> {
    let mut buf = BytesMut::with_capacity(1024);
    let _ = read_head(&mut stream, &mut buf, max_head).await;
    write_refusal(
        &mut stream,
        &Refusal::new(
            400,
            "Bad Request",
            "this endpoint speaks TLS: connect with a wss:// URL",
        ),
    )
    .await;
    Err(TransportError::Handshake(
        "plain HTTP where a TLS handshake was expected",
    ))
}

/// The server side of the opening handshake: reads the request (at most
/// `max_head` bytes), validates it as a WebSocket upgrade, asks `policy`, and
/// answers 101 (without any extension: compression is never negotiated) or
/// the refusal.
pub(crate) async fn accept(
    stream: impl Into<Stream>,
    max_head: usize,
    max_message: usize,
    policy: impl FnOnce(&RequestHead) -> Result<(), Refusal>,
) -> Result<(WsReader, WsWriter), TransportError> {
    accept_buffered(
        stream,
        BytesMut::with_capacity(2048),
        max_head,
        max_message,
        policy,
    )
    .await
}

/// [`accept`] for a stream whose first bytes were already read into `buf`
/// (the viewer reads a request head before knowing whether it is an
/// upgrade): the handshake goes on from them.
pub(crate) async fn accept_buffered(
    stream: impl Into<Stream>,
    buf: BytesMut,
    max_head: usize,
    max_message: usize,
    policy: impl FnOnce(&RequestHead) -> Result<(), Refusal>,
) -> Result<(WsReader, WsWriter), TransportError> {
    accept_framed(stream, buf, max_head, max_message, Role::Server, policy).await
}

/// [`accept_buffered`] with the frames of `framing` after the upgrade:
/// `Role::Client` makes the accepting end frame as a client (it masks what
/// it sends and takes unmasked frames). The relay's tunnels use it, so that
/// the host that dialed them frames as a server (SPEC.md, "Relay and
/// dial-out hosts").
pub(crate) async fn accept_framed(
    stream: impl Into<Stream>,
    mut buf: BytesMut,
    max_head: usize,
    max_message: usize,
    framing: Role,
    policy: impl FnOnce(&RequestHead) -> Result<(), Refusal>,
) -> Result<(WsReader, WsWriter), TransportError> {
    let mut stream = stream.into();
    let head_len = match read_head(&mut stream, &mut buf, max_head).await {
        Ok(n) => n,
        Err(TransportError::TooLarge) => {
            write_refusal(
                &mut stream,
                &Refusal::new(
                    431,
                    "Request Header Fields Too Large",
                    "handshake too large",
                ),
            )
            .await;
            return Err(TransportError::TooLarge);
        }
        Err(e) if buf.first() == Some(&TLS_HANDSHAKE_RECORD) => {
            // A TLS client hello on a plain endpoint: answered in plain
            // HTTP, which the client's TLS layer reports as not TLS.
            write_refusal(
                &mut stream,
                &Refusal::new(
                    400,
                    "Bad Request",
                    "this endpoint does not speak TLS: connect with a ws:// URL",
                ),
            )
            .await;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let head = buf.split_to(head_len);
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let parsed = match req.parse(&head) {
        Ok(httparse::Status::Complete(_)) => RequestHead {
            method: req.method.unwrap_or_default().to_string(),
            headers: req
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_string(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect(),
        },
        _ => {
            write_refusal(
                &mut stream,
                &Refusal::new(400, "Bad Request", "malformed HTTP request"),
            )
            .await;
            return Err(TransportError::Handshake("malformed HTTP request"));
        }
    };
    let has_token = |name: &str, token: &str| {
        parsed
            .header(name)
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    let check = || -> Result<String, Refusal> {
        if parsed.method != "GET" || req.version != Some(1) {
            return Err(Refusal::new(
                400,
                "Bad Request",
                "a WebSocket upgrade is a GET over HTTP/1.1",
            ));
        }
        if !has_token("upgrade", "websocket") || !has_token("connection", "upgrade") {
            let mut r = Refusal::new(
                426,
                "Upgrade Required",
                "this endpoint speaks WebSocket only",
            );
            r.extra_headers.push(("Upgrade", "websocket"));
            return Err(r);
        }
        if parsed.header("sec-websocket-version").map(str::trim) != Some("13") {
            let mut r = Refusal::new(426, "Upgrade Required", "WebSocket version 13 is required");
            r.extra_headers.push(("Sec-WebSocket-Version", "13"));
            return Err(r);
        }
        match parsed.header("sec-websocket-key") {
            Some(k) if valid_key(k) => Ok(accept_key(k)),
            Some(_) => Err(Refusal::new(
                400,
                "Bad Request",
                "Sec-WebSocket-Key must be the base64 encoding of 16 bytes",
            )),
            None => Err(Refusal::new(
                400,
                "Bad Request",
                "Sec-WebSocket-Key is missing",
            )),
        }
    };
    let accept = match check().and_then(|a| policy(&parsed).map(|_| a)) {
        Ok(a) => a,
        Err(r) => {
            write_refusal(&mut stream, &r).await;
            return Err(TransportError::Refused {
                status: r.status,
                message: r.message,
            });
        }
    };
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream
        .write_all(response.as_bytes())
        .await
        .map_err(TransportError::io)?;
    Ok(pair(stream, buf, framing, max_message))
}

/// Why a client could not connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not `ws://host[:port][/path]`, `wss://host[:port][/path]`
    /// or `ws+unix://PATH`.
    #[error("invalid URL {url:?}: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A handshake header is not a valid HTTP header.
    #[error("invalid header {name:?}")]
    Header {
        /// The header's name.
        name: String,
    },
    /// The TCP connection (or, for `ws+unix://`, the Unix socket
    /// connection) failed.
    #[error("cannot connect to {addr}: {source}")]
    Tcp {
        /// The address connected to (`unix:PATH` for a Unix socket).
        addr: String,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The client's TLS configuration could not be built (an unreadable CA
    /// file, no root certificates).
    #[error(transparent)]
    TlsConfig(#[from] super::tls::TlsError),
    /// The server's certificate was not accepted (unknown issuer, expired,
    /// not valid for the host name).
    #[error("the TLS certificate of {host} was not accepted: {source}; if the server's certificate is issued by a private CA (or is self-signed), pass that CA's certificate with --ca-file FILE (ClientConfig::ca_file)")]
    Certificate {
        /// The host name verified.
        host: String,
        /// rustls's verdict.
        source: rustls::Error,
    },
    /// The TLS handshake failed for another reason.
    #[error("TLS handshake with {host} failed: {source}{}", tls_hint(source))]
    Tls {
        /// The host name.
        host: String,
        /// The failure.
        source: std::io::Error,
    },
    /// The server answered a plain `ws://` handshake with TLS.
    #[error("the server at {host} speaks TLS: connect with a wss:// URL")]
    ServerWantsTls {
        /// The host.
        host: String,
    },
    /// An I/O failure during the HTTP upgrade.
    #[error("{during}: {source}")]
    Io {
        /// What was being done.
        during: &'static str,
        /// The failure.
        source: std::io::Error,
    },
    /// The server answered with this HTTP status instead of 101.
    #[error("server refused the WebSocket handshake: HTTP {status} {reason}{}", refusal_detail(*status, body))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The status line's reason phrase.
        reason: String,
        /// The response body (at most 4 KiB), often saying why.
        body: String,
    },
    /// The server's answer violates the handshake.
    #[error("invalid handshake response: {reason}")]
    Handshake {
        /// What is wrong.
        reason: &'static str,
    },
}

/// A hint for TLS failures that usually mean a wrong scheme.
fn tls_hint(e: &std::io::Error) -> &'static str {
    match super::tls::rustls_error(e) {
        Some(rustls::Error::InvalidMessage(_)) => {
            " (is the server serving TLS? a plain server is reached with ws://)"
        }
        _ if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            " (the server closed the connection: is it serving TLS? a plain server is reached with ws://)"
        }
        _ => "",
    }
}

/// The body of a refusal and, when the body does not already say it, the
/// way out.
fn refusal_detail(status: u16, body: &str) -> String {
    let mut out = String::new();
    if !body.is_empty() {
        out.push_str(&format!(" ({})", body.trim()));
    }
    match status {
        401 if !body.contains("--token") => out.push_str(
            "; the server requires a bearer token: pass it with --token TOKEN (ClientConfig::token)",
        ),
        403 if !body.contains("--allow-") => out.push_str(
            "; the server refused this Host or Origin: start it with --allow-host NAME or --allow-origin ORIGIN",
        ),
        _ => {}
    }
    out
}

/// Where a `ws://`, `wss://` or `ws+unix://` URL leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `host:port` for TCP (`unix:PATH` for a Unix socket, in messages).
    pub addr: String,
    /// The socket file of a `ws+unix://PATH` URL.
    pub unix: Option<std::path::PathBuf>,
    /// The `Host` header (the URL's authority).
    pub authority: String,
    /// The host name alone (brackets removed), for TLS.
    pub host: String,
    /// The request path and query.
    pub path: String,
    /// `wss://`.
    pub secure: bool,
}

/// The `Host` header sent over a Unix socket (SPEC.md, "Unix domain
/// sockets"): a socket file has no host name, and our server does not check
/// `Host` on a Unix listener.
pub(crate) const UNIX_HOST: &str = "localhost";

/// Parses `ws://host[:port][/path]` (port 80 by default), `wss://…` (443)
/// or `ws+unix://PATH` (everything after the scheme is the socket file's
/// path, absolute as in `ws+unix:///run/sim.sock` or relative to the
/// working directory; the request path is `/`).
pub(crate) fn parse_target(url: &str) -> Result<Target, ConnectError> {
    let bad = |reason| ConnectError::Url {
        url: url.to_string(),
        reason,
    };
    if let Some(path) = url.strip_prefix(UNIX_SCHEME) {
        if path.is_empty() {
            return Err(bad("expected ws+unix://PATH, the path of a socket file"));
        }
        return Ok(Target {
            addr: format!("unix:{path}"),
            unix: Some(std::path::PathBuf::from(path)),
            authority: UNIX_HOST.to_string(),
            host: UNIX_HOST.to_string(),
            path: "/".to_string(),
            secure: false,
        });
    }
    let (rest, secure) = if let Some(rest) = url.strip_prefix("ws://") {
        (rest, false)
    } else if let Some(rest) = url.strip_prefix("wss://") {
        (rest, true)
    } else {
        return Err(bad(
            "expected ws://host[:port][/path], wss://host[:port][/path] or ws+unix://PATH",
        ));
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(bad("expected a host (without user information)"));
    }
    let (host, has_port) = if let Some(v6) = authority.strip_prefix('[') {
        let (ip, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
        (ip, after.starts_with(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) => (h, true),
            None => (authority, false),
        }
    };
    let addr = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{}", if secure { 443 } else { 80 })
    };
    Ok(Target {
        addr,
        unix: None,
        authority: authority.to_string(),
        host: host.to_string(),
        path,
        secure,
    })
}

/// The scheme of a Unix domain socket URL.
pub(crate) const UNIX_SCHEME: &str = "ws+unix://";

/// The byte stream of a TCP connection to `target`: the TCP stream itself
/// for `ws://`, after the TLS handshake for `wss://`.
async fn connect_over_tcp(
    url: &str,
    target: &Target,
    tcp: TcpStream,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Stream, ConnectError> {
    if !target.secure {
        return Ok(Stream::Tcp(tcp));
    }
    let config = match tls {
        Some(c) => c,
        None => super::tls::client_config(None)?,
    };
    let name = rustls::pki_types::ServerName::try_from(target.host.clone()).map_err(|_| {
        ConnectError::Url {
            url: url.to_string(),
            reason: "the host is not a valid DNS name or IP address for TLS",
        }
    })?;
    let tls_stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|source| match super::tls::rustls_error(&source) {
            Some(e @ rustls::Error::InvalidCertificate(_)) => ConnectError::Certificate {
                host: target.host.clone(),
                source: e.clone(),
            },
            _ => ConnectError::Tls {
                host: target.host.clone(),
                source,
            },
        })?;
    Ok(Stream::Tls(Box::new(tokio_rustls::TlsStream::Client(
        tls_stream,
    ))))
}

/// Splits a URL into (host for TCP, Host header, path).
#[cfg(any(feature = "cli", test))]
pub(crate) fn parse_url(url: &str) -> Result<(String, String, String), ConnectError> {
    let t = parse_target(url)?;
    Ok((t.addr, t.authority, t.path))
}

/// The client side of the opening handshake, with a TLS configuration for
/// `wss://` URLs (`None`: the system's root certificates).
pub(crate) async fn connect_with(
    url: &str,
    headers: &[(String, String)],
    max_message: usize,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<(WsReader, WsWriter), ConnectError> {
    connect_framed(url, headers, max_message, tls, Role::Client).await
}

/// [`connect_with`] with the frames of `framing` after the upgrade:
/// `Role::Server` makes the dialing end frame as a server (unmasked frames
/// out, masked ones in), for a host's tunnel to a relay that accepted it
/// with [`accept_framed`].
pub(crate) async fn connect_framed(
    url: &str,
    headers: &[(String, String)],
    max_message: usize,
    tls: Option<Arc<rustls::ClientConfig>>,
    framing: Role,
) -> Result<(WsReader, WsWriter), ConnectError> {
    let target = parse_target(url)?;
    for (name, value) in headers {
        if name.contains(['\r', '\n', ':']) || value.contains(['\r', '\n']) {
            return Err(ConnectError::Header { name: name.clone() });
        }
    }
    let connect_error = |source| ConnectError::Tcp {
        addr: target.addr.clone(),
        source,
    };
    let mut stream = if let Some(path) = &target.unix {
        Stream::Unix(
            tokio::net::UnixStream::connect(path)
                .await
                .map_err(connect_error)?,
        )
    } else {
        let tcp = TcpStream::connect(target.addr.as_str())
            .await
            .map_err(connect_error)?;
        let _ = tcp.set_nodelay(true);
        connect_over_tcp(url, &target, tcp, tls).await?
    };
    let key = base64(
        &random_u64()
            .to_ne_bytes()
            .iter()
            .chain(random_u64().to_ne_bytes().iter())
            .copied()
            .collect::<Vec<u8>>(),
    );
    let mut request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n",
        target.path, target.authority
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let sent = async {
        stream.write_all(request.as_bytes()).await?;
        stream.flush().await
    };
    sent.await.map_err(|source| ConnectError::Io {
        during: "sending the handshake request",
        source,
    })?;
    let mut buf = BytesMut::with_capacity(1024);
    let head_len = match read_head(&mut stream, &mut buf, 16 * 1024).await {
        Ok(n) => n,
        // A TLS record (an alert, or a server hello) where HTTP was expected.
        Err(_) if !target.secure && matches!(buf.first(), Some(0x15 | 0x16)) => {
            return Err(ConnectError::ServerWantsTls { host: target.host });
        }
        Err(e) => {
            return Err(ConnectError::Io {
                during: "reading the handshake response",
                source: std::io::Error::other(e),
            })
        }
    };
    let head = buf.split_to(head_len);
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut hs);
    match resp.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => {
            return Err(ConnectError::Handshake {
                reason: "malformed HTTP response",
            })
        }
    }
    let status = resp.code.unwrap_or(0);
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
    };
    if status != 101 {
        let reason = resp.reason.unwrap_or("").to_string();
        let body_len: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
            .min(4096);
        while buf.len() < body_len {
            let mut limited = (&mut stream).take((body_len - buf.len()) as u64);
            match limited.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let body = String::from_utf8_lossy(&buf[..buf.len().min(body_len)]).into_owned();
        return Err(ConnectError::Refused {
            status,
            reason,
            body,
        });
    }
    if header("sec-websocket-accept").as_deref() != Some(accept_key(&key).as_str()) {
        return Err(ConnectError::Handshake {
            reason: "wrong Sec-WebSocket-Accept",
        });
    }
    if header("sec-websocket-extensions").is_some() {
        return Err(ConnectError::Handshake {
            reason: "the server enabled an extension we did not offer",
        });
    }
    Ok(pair(stream, buf, framing, max_message))
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
