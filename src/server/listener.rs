//! The WebSocket listener: connection cap, handshake limits (size, time),
//! DNS-rebinding checks on `Host` and `Origin`, the optional bearer token,
//! and no compression (the permessage-deflate offer is never accepted).

use super::session;
use super::ServerShared;
use crate::transport::split_ws;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// A running WebSocket listener.
pub struct Listener {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `ws://HOST:PORT` for clients.
    pub fn url(&self) -> String {
        match self.local_addr.ip() {
            IpAddr::V6(ip) => format!("ws://[{ip}]:{}", self.local_addr.port()),
            IpAddr::V4(ip) => format!("ws://{ip}:{}", self.local_addr.port()),
        }
    }

    /// Stops accepting connections (open sessions are not affected).
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}

pub(crate) async fn listen(
    shared: Arc<ServerShared>,
    addr: impl tokio::net::ToSocketAddrs,
) -> io::Result<Listener> {
    let tcp = TcpListener::bind(addr).await?;
    let local_addr = tcp.local_addr()?;
    let (stop, mut stop_rx) = watch::channel(false);
    let mut shutdown_rx = shared.shutdown.subscribe();
    let task = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = stop_rx.changed() => break,
                _ = shutdown_rx.changed() => break,
                a = tcp.accept() => a,
            };
            let Ok((stream, _peer)) = accepted else {
                // Out of file descriptors or similar: back off briefly.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                serve_connection(shared, stream).await;
            });
        }
    });
    Ok(Listener {
        local_addr,
        stop,
        task,
    })
}

async fn serve_connection(shared: Arc<ServerShared>, mut stream: TcpStream) {
    let Ok(_permit) = shared.connections.clone().try_acquire_owned() else {
        let _ = stream
            .write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
        return;
    };
    let _ = stream.set_nodelay(true);
    let config = &shared.core.config;
    let limited = Limited {
        inner: stream,
        remaining: Some(config.max_handshake_bytes),
    };
    let ws_config = WebSocketConfig::default()
        .max_message_size(Some(config.max_message_size))
        .max_frame_size(Some(config.max_message_size))
        .write_buffer_size(0);
    let policy = Policy::from_config(config);
    #[allow(clippy::result_large_err)] // the error type is tungstenite's
    let callback = move |req: &Request, resp: Response| policy.check(req, resp);
    let handshake =
        tokio_tungstenite::accept_hdr_async_with_config(limited, callback, Some(ws_config));
    let mut ws = match tokio::time::timeout(config.handshake_timeout, handshake).await {
        Ok(Ok(ws)) => ws,
        _ => return,
    };
    ws.get_mut().remaining = None;
    let (reader, writer) = split_ws(ws);
    session::run(shared, reader, writer).await;
}

/// Who may connect.
#[derive(Clone)]
struct Policy {
    token: Option<String>,
    origins: Vec<String>,
    hosts: Vec<String>,
}

#[allow(clippy::result_large_err)]
fn reject(status: StatusCode, message: &str) -> ErrorResponse {
    let mut r = ErrorResponse::new(Some(message.to_string()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("Connection", HeaderValue::from_static("close"));
    r
}

impl Policy {
    fn from_config(c: &super::ServerConfig) -> Policy {
        Policy {
            token: c.token.clone(),
            origins: c
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            hosts: c
                .allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
        }
    }

    #[allow(clippy::result_large_err)] // the error type is tungstenite's
    fn check(&self, req: &Request, resp: Response) -> Result<Response, ErrorResponse> {
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
        match header("host") {
            Some(host) if self.host_allowed(host) => {}
            _ => return Err(reject(StatusCode::FORBIDDEN, "Host not allowed")),
        }
        if let Some(origin) = req.headers().get("origin") {
            let ok = origin.to_str().is_ok_and(|o| self.origin_allowed(o));
            if !ok {
                return Err(reject(StatusCode::FORBIDDEN, "Origin not allowed"));
            }
        }
        if let Some(token) = &self.token {
            let given = header("authorization")
                .and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
                .unwrap_or("");
            if !constant_time_eq(given.trim().as_bytes(), token.as_bytes()) {
                let mut r = reject(StatusCode::UNAUTHORIZED, "missing or wrong bearer token");
                r.headers_mut()
                    .insert("WWW-Authenticate", HeaderValue::from_static("Bearer"));
                return Err(r);
            }
        }
        Ok(resp)
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        if self.hosts.iter().any(|h| h == "*" || *h == host) {
            return true;
        }
        let name = split_host(&host);
        if self.hosts.iter().any(|h| h == name) {
            return true;
        }
        // DNS rebinding needs a DNS name: IP literals and localhost are safe.
        name == "localhost" || name.ends_with(".localhost") || name.parse::<IpAddr>().is_ok()
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        if self.origins.iter().any(|o| o == "*" || *o == origin) {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        if !matches!(scheme, "http" | "https") {
            return false;
        }
        let name = split_host(rest);
        name == "localhost"
            || name.ends_with(".localhost")
            || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// The host name of `host[:port]` or `[v6]:port` (brackets removed).
fn split_host(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match s.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => s,
    }
}

/// Compares secrets without an early exit on the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..n {
        diff |= (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0)) as u64;
    }
    std::hint::black_box(diff) == 0
}

/// A TCP stream that refuses to read more than `remaining` bytes while the
/// handshake is in progress.
struct Limited {
    inner: TcpStream,
    remaining: Option<usize>,
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.remaining {
            None => Pin::new(&mut this.inner).poll_read(cx, buf),
            Some(0) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "handshake too large",
            ))),
            Some(left) => {
                // During the handshake only: read through a small bounded buffer.
                let mut tmp = [0u8; 2048];
                let cap = left.min(tmp.len()).min(buf.remaining());
                let mut rb = ReadBuf::new(&mut tmp[..cap]);
                let poll = Pin::new(&mut this.inner).poll_read(cx, &mut rb);
                let n = rb.filled().len();
                buf.put_slice(rb.filled());
                this.remaining = Some(left - n);
                poll
            }
        }
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            token: None,
            origins: vec!["https://dash.example".into()],
            hosts: vec!["sim.lan".into()],
        }
    }

    #[test]
    fn hosts() {
        let p = policy();
        for ok in [
            "127.0.0.1:80",
            "localhost:9",
            "[::1]:1",
            "10.0.0.2:5",
            "sim.lan:7",
            "SIM.LAN",
        ] {
            assert!(p.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example:80",
            "localhost.evil.example",
            "rebind.attacker.test:1",
        ] {
            assert!(!p.host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn origins() {
        let p = policy();
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8",
            "https://dash.example/",
        ] {
            assert!(p.origin_allowed(ok), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://10.0.0.2:80",
            "file://localhost",
            "http://localhost.evil.test",
        ] {
            assert!(!p.origin_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn constant_time() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
