//! The metrics endpoint: `GET /metrics` over plain HTTP/1.1, one response
//! per connection.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Longest request head read (a scraper sends a few hundred bytes).
const MAX_HEAD: usize = 8 * 1024;
/// Time a scraper has to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The OpenMetrics text format (which Prometheus scrapes natively; the
/// `prometheus-client` encoder writes it).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A metrics endpoint being served; it stops with the server (or at
/// [`MetricsEndpoint::close`]).
#[derive(Debug)]
pub struct MetricsEndpoint {
    addr: SocketAddr,
    task: tokio::task::AbortHandle,
}

impl MetricsEndpoint {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/metrics`.
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Stops serving.
    pub fn close(&self) {
        self.task.abort();
    }
}

/// Serves `render()` at `/metrics` on `listener` until `stop` turns true,
/// to requests whose `Host` and `Origin` pass `guard` (the main port's
/// DNS-rebinding guard: a page on another site, its name rebound to this
/// address, must not read the metrics).
pub(crate) fn serve(
    listener: TcpListener,
    render: Arc<dyn Fn() -> String + Send + Sync>,
    guard: HostGuard,
    mut stop: watch::Receiver<bool>,
) -> io::Result<MetricsEndpoint> {
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = stop.wait_for(|s| *s) => break,
                a = listener.accept() => a,
            };
            match accepted {
                Ok((stream, _)) => {
                    let render = render.clone();
                    let guard = guard.clone();
                    tokio::spawn(async move {
                        if let Err(e) = answer(stream, &*render, &*guard).await {
                            tracing::debug!(error = %e, "metrics request");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
    Ok(MetricsEndpoint {
        addr: local,
        task: task.abort_handle(),
    })
}

/// What the endpoint checks before it answers: the `Host` header and any
/// `Origin` (the server's DNS-rebinding guard). `Err` holds the status, its
/// reason phrase and the message.
pub(crate) type Guard =
    dyn Fn(Option<&str>, Option<&str>) -> Result<(), (u16, &'static str, String)> + Send + Sync;

/// A shared [`Guard`].
pub(crate) type HostGuard = Arc<Guard>;

async fn answer(
    mut stream: TcpStream,
    render: &(dyn Fn() -> String + Send + Sync),
    guard: &Guard,
) -> io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let read = async {
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            if head.len() >= MAX_HEAD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "request head too large",
                ));
            }
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok(())
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let parsed = request.parse(&head);
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
    };
    let refused = match parsed {
        Ok(httparse::Status::Complete(_)) => guard(header("host"), header("origin")).err(),
        _ => None,
    };
    if let Some((code, reason, message)) = refused {
        let body = format!("{message}\n");
        let response = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).await?;
        return stream.shutdown().await;
    }
    let (status, extra, body) = match (parsed, request.method, request.path) {
        (Ok(httparse::Status::Complete(_)), Some("GET"), Some(path))
            if path == "/metrics" || path.starts_with("/metrics?") =>
        {
            (
                "200 OK",
                format!("Content-Type: {CONTENT_TYPE}\r\n"),
                render(),
            )
        }
        (Ok(httparse::Status::Complete(_)), Some("GET"), Some(_)) => (
            "404 Not Found",
            "Content-Type: text/plain\r\n".to_string(),
            "metrics are at /metrics\n".to_string(),
        ),
        (Ok(httparse::Status::Complete(_)), Some(_), _) => (
            "405 Method Not Allowed",
            "Allow: GET\r\nContent-Type: text/plain\r\n".to_string(),
            "GET /metrics\n".to_string(),
        ),
        _ => (
            "400 Bad Request",
            "Content-Type: text/plain\r\n".to_string(),
            "bad request\n".to_string(),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
