//! The WebSocket listener: connection cap, handshake limits (size, time),
//! DNS-rebinding checks on `Host` and `Origin`, the optional bearer token,
//! and no compression (the permessage-deflate offer is never accepted).

use super::session;
use super::ServerShared;
use crate::transport::ws::{self, Refusal, RequestHead};
use crate::transport::{Reader, Writer};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

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
    check_config(&shared)?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("cannot resolve the listen address: {e}")))?
        .collect();
    let shown: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
    let tcp = TcpListener::bind(&addrs[..]).await.map_err(|e| {
        let hint = if e.kind() == io::ErrorKind::AddrInUse {
            " (another server is using it: stop it, or choose another port, e.g. port 0 for any free one)"
        } else {
            ""
        };
        io::Error::new(
            e.kind(),
            format!("cannot listen on {}: {e}{hint}", shown.join(", ")),
        )
    })?;
    serve(shared, tcp)
}

/// A configuration the server cannot run with, as an `InvalidInput` error.
fn check_config(shared: &ServerShared) -> io::Result<()> {
    shared
        .core
        .config
        .validate_for_websocket()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Accepts connections on a bound listener until stopped or shut down.
pub(crate) fn serve(shared: Arc<ServerShared>, tcp: TcpListener) -> io::Result<Listener> {
    check_config(&shared)?;
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
            let Ok((stream, peer)) = accepted else {
                // Out of file descriptors or similar: back off briefly.
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                serve_connection(shared, stream, peer).await;
            });
        }
    });
    Ok(Listener {
        local_addr,
        stop,
        task,
    })
}

async fn serve_connection(shared: Arc<ServerShared>, stream: TcpStream, peer: SocketAddr) {
    // A handshake in progress holds a handshake place, not a connection
    // slot: when all places are taken, the oldest pending handshake is
    // dropped for the newcomer, so silent sockets cannot keep out a peer that
    // completes its handshake at once. The connection slot is taken only
    // once the request has passed the Host, Origin and token checks.
    let slot = shared.guards.handshakes.admit();
    let _ = stream.set_nodelay(true);
    let config = &shared.core.config;
    let policy = Policy::from_config(config);
    let mut connection = None;
    let handshake = ws::accept(
        stream,
        config.max_handshake_bytes,
        config.max_message_size,
        |req| {
            policy.check(req)?;
            match shared.connections.clone().try_acquire_owned() {
                Ok(permit) => {
                    connection = Some(permit);
                    Ok(())
                }
                Err(_) => Err(Refusal::new(
                    503,
                    "Service Unavailable",
                    "too many connections",
                )),
            }
        },
    );
    let accepted = tokio::select! {
        r = tokio::time::timeout(config.handshake_timeout, handshake) => r,
        _ = slot.evicted.notified() => {
            tracing::info!(%peer, "connection dropped: too many pending handshakes");
            return;
        }
    };
    drop(slot);
    let (reader, writer) = match accepted {
        Ok(Ok(halves)) => halves,
        Ok(Err(e)) => {
            tracing::info!(%peer, reason = %e, "connection refused");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, "connection refused: handshake timed out");
            return;
        }
    };
    tracing::debug!(%peer, "connection accepted");
    let _connection = connection;
    session::run(shared, Reader::Ws(reader), Writer::Ws(writer)).await;
}

/// Who may connect.
#[derive(Clone)]
struct Policy {
    token: Option<String>,
    origins: Vec<String>,
    hosts: Vec<String>,
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

    /// Host, Origin and token checks, before the upgrade.
    fn check(&self, req: &RequestHead) -> Result<(), Refusal> {
        match req.header("host") {
            Some(host) if self.host_allowed(host) => {}
            host => {
                let shown: String = host.unwrap_or("").chars().take(200).collect();
                return Err(Refusal::new(
                    403,
                    "Forbidden",
                    format!(
                        "Host not allowed: '{shown}' is neither a loopback name nor an IP address (a DNS-rebinding guard); start the server with --allow-host NAME (ServerConfig::allowed_hosts) to accept it"
                    ),
                ));
            }
        }
        if let Some(origin) = req.header("origin") {
            if !self.origin_allowed(origin) {
                let shown: String = origin.chars().take(200).collect();
                return Err(Refusal::new(
                    403,
                    "Forbidden",
                    format!(
                        "Origin not allowed: '{shown}' is not a loopback origin; start the server with --allow-origin ORIGIN (ServerConfig::allowed_origins) to accept it"
                    ),
                ));
            }
        }
        if let Some(token) = &self.token {
            let given = req
                .header("authorization")
                .and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
                .unwrap_or("");
            if !constant_time_eq(given.trim().as_bytes(), token.as_bytes()) {
                let what = if given.is_empty() { "missing" } else { "wrong" };
                let mut r = Refusal::new(
                    401,
                    "Unauthorized",
                    format!(
                        "{what} bearer token: this server requires the header 'Authorization: Bearer TOKEN' with the token it was started with (unienv-remote clients: --token TOKEN)"
                    ),
                );
                r.extra_headers.push(("WWW-Authenticate", "Bearer"));
                return Err(r);
            }
        }
        Ok(())
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
