//! Asking a relay which hosts are connected (what `discover` prints for a
//! relay's URL).

use super::wire::{self, HostIdentity, HostInfo};
use crate::transport::{ConnectError, Reader, TransportError};
use std::sync::Arc;
use std::time::Duration;

/// Why the listing could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListError {
    /// The connection failed or was refused.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The relay closed before sending the listing.
    #[error("the relay sent no listing: {0}")]
    Transport(#[from] TransportError),
    /// What was sent is not a relay's listing.
    #[error("not a relay's listing: {0}")]
    Invalid(String),
    /// No answer within the timeout.
    #[error("no listing within {0:?}")]
    TimedOut(Duration),
}

impl ListError {
    /// Whether the server at the URL refused because it is a relay's root
    /// (a relay's URL given where a host's was expected).
    pub fn is_relay_root(e: &ConnectError) -> bool {
        matches!(e, ConnectError::Refused { status: 404, body, .. } if body.starts_with("this is a unienv-remote relay"))
    }
}

/// The hosts connected to the relay at `url` (`ws://RELAY` or `wss://`,
/// with or without a trailing `/`): a WebSocket to `/hosts` that is sent
/// the listing. `token` is the relay's client token.
pub async fn list_hosts(
    url: &str,
    token: Option<&str>,
    tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    timeout: Duration,
) -> Result<Vec<HostInfo>, ListError> {
    let run = async {
        let headers: Vec<(String, String)> = token
            .map(|t| vec![("Authorization".to_string(), format!("Bearer {t}"))])
            .unwrap_or_default();
        let target = wire::join(url, wire::LIST_PATH);
        let (r, _w) = crate::transport::ws::connect_with(&target, &headers, 16 << 20, tls).await?;
        let mut reader = Reader::Ws(r);
        let message = reader.recv().await?;
        parse_listing(&message)
    };
    tokio::time::timeout(timeout, run)
        .await
        .map_err(|_| ListError::TimedOut(timeout))?
}

/// Reads the listing's JSON (`GET /hosts`).
pub(crate) fn parse_listing(bytes: &[u8]) -> Result<Vec<HostInfo>, ListError> {
    let bad = |why: &str| ListError::Invalid(why.to_string());
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| ListError::Invalid(e.to_string()))?;
    let hosts = value
        .get("hosts")
        .and_then(|h| h.as_array())
        .ok_or_else(|| bad("no 'hosts' list"))?;
    hosts
        .iter()
        .map(|h| {
            let text = |k: &str| {
                h.get(k)
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .ok_or_else(|| bad(k))
            };
            let resources = h
                .get("resources")
                .and_then(|r| r.as_array())
                .ok_or_else(|| bad("resources"))?
                .iter()
                .map(|r| {
                    r.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad("resources"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(HostInfo {
                identity: HostIdentity {
                    name: text("name")?,
                    server: text("server")?,
                    version: text("version")?,
                    resources,
                },
                clients: h.get("clients").and_then(|c| c.as_u64()).unwrap_or(0) as usize,
                connected_for: Duration::from_secs_f64(
                    h.get("connected_s")
                        .and_then(|c| c.as_f64())
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .unwrap_or(0.0),
                ),
            })
        })
        .collect()
}
