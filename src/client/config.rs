//! Client settings.

use crate::codec::{DEFAULT_MAX_MESSAGE_SIZE, MIN_MAX_MESSAGE_SIZE};
use std::sync::Arc;
use std::time::Duration;

/// Client settings. Every field has a documented default.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long a request (and the connection handshake) may take before
    /// the connection is closed (default 30 s; `None` waits forever).
    pub timeout: Option<Duration>,
    /// Largest message in either direction (default 64 MiB); `hello` lowers
    /// it to the server's limit when that is smaller.
    pub max_message_size: usize,
    /// Whether to `discover` every descriptor on connect (default `true`,
    /// as the reference). Without it, descriptors are fetched on first use
    /// of a resource (`describe`).
    pub discover: bool,
    /// Sent as `Authorization: Bearer <token>` on WebSocket connections.
    pub token: Option<String>,
    /// Additional HTTP headers for the WebSocket handshake.
    pub headers: Vec<(String, String)>,
    /// Receives every envelope the server sends, as its raw bytes, before
    /// it is decoded (default none): for saving envelopes that
    /// `unienv-remote inspect` reads.
    pub capture: Option<Capture>,
    // [transport: TLS hook]
    /// Extra trusted CA certificates (a PEM file) for `wss://` URLs, besides
    /// the system's root certificates (default none): for servers whose
    /// certificate a private CA issued, or a self-signed one
    /// (`--ca-file FILE`). Read when connecting.
    pub ca_file: Option<std::path::PathBuf>,
    /// A complete rustls configuration for `wss://` URLs, used instead of the
    /// system roots and [`ClientConfig::ca_file`] (default none).
    pub tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    // [transport: heartbeat hook]
    /// After this long without receiving anything, the client pings the
    /// server (WebSocket ping; default 10 s; `None` disables heartbeats).
    pub heartbeat_interval: Option<Duration>,
    /// When nothing at all (not even a pong) arrived for this long, the
    /// server is taken as gone: the connection is closed as lost, requests
    /// in flight fail (mutations with [`ClientError::Uncertain`](super::ClientError::Uncertain)), whatever
    /// [`ClientConfig::timeout`] says (default 30 s; only with an interval,
    /// and meant to be longer than it).
    pub heartbeat_timeout: Duration,
}

/// A sink for received envelopes (see [`ClientConfig::capture`]).
#[derive(Clone)]
pub struct Capture(Arc<dyn Fn(&bytes::Bytes) + Send + Sync>);

impl Capture {
    /// Calls `sink` with every received envelope, on the connection's reader
    /// task (keep it short).
    pub fn new(sink: impl Fn(&bytes::Bytes) + Send + Sync + 'static) -> Capture {
        Capture(Arc::new(sink))
    }

    pub(crate) fn record(&self, frame: &bytes::Bytes) {
        (self.0)(frame)
    }
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Capture(..)")
    }
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            timeout: Some(Duration::from_secs(30)),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            discover: true,
            token: None,
            headers: Vec::new(),
            capture: None,
            ca_file: None,
            tls: None,
            heartbeat_interval: Some(Duration::from_secs(10)),
            heartbeat_timeout: Duration::from_secs(30),
        }
    }
}

impl ClientConfig {
    /// Sets [`ClientConfig::timeout`].
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> ClientConfig {
        self.timeout = timeout;
        self
    }

    /// Sets [`ClientConfig::max_message_size`].
    pub fn with_max_message_size(mut self, bytes: usize) -> ClientConfig {
        self.max_message_size = bytes;
        self
    }

    /// Sets [`ClientConfig::discover`].
    pub fn with_discover(mut self, discover: bool) -> ClientConfig {
        self.discover = discover;
        self
    }

    /// Sets [`ClientConfig::token`].
    pub fn with_token(mut self, token: impl Into<String>) -> ClientConfig {
        self.token = Some(token.into());
        self
    }

    /// Sets [`ClientConfig::ca_file`].
    pub fn with_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> ClientConfig {
        self.ca_file = Some(path.into());
        self
    }

    /// Sets [`ClientConfig::heartbeat_interval`] and
    /// [`ClientConfig::heartbeat_timeout`].
    pub fn with_heartbeat(mut self, interval: Option<Duration>, timeout: Duration) -> ClientConfig {
        self.heartbeat_interval = interval;
        self.heartbeat_timeout = timeout;
        self
    }

    /// Adds a handshake header.
    pub fn with_header(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> ClientConfig {
        self.headers.push((name.into(), value.into()));
        self
    }
}

impl ClientConfig {
    /// Checks that the settings can work: a message limit of at least
    /// [`MIN_MAX_MESSAGE_SIZE`] bytes, a timeout longer than zero (`None`
    /// waits forever), and a token and headers that fit in an HTTP header
    /// (a header name is a non-empty token; no value contains a line
    /// break). [`Client::connect`](super::Client::connect) and
    /// [`Client::over_memory`](super::Client::over_memory) call it before
    /// anything is sent.
    pub fn validate(&self) -> Result<(), ClientConfigError> {
        if self.max_message_size < MIN_MAX_MESSAGE_SIZE {
            return Err(ClientConfigError::MessageSizeTooSmall {
                size: self.max_message_size,
                min: MIN_MAX_MESSAGE_SIZE,
            });
        }
        if self.timeout == Some(Duration::ZERO) {
            return Err(ClientConfigError::ZeroTimeout);
        }
        if let Some(token) = &self.token {
            if token.is_empty() || !is_header_value(token) {
                return Err(ClientConfigError::InvalidToken);
            }
        }
        for (name, value) in &self.headers {
            if !is_header_name(name) {
                return Err(ClientConfigError::InvalidHeaderName { name: name.clone() });
            }
            if !is_header_value(value) {
                return Err(ClientConfigError::InvalidHeaderValue { name: name.clone() });
            }
        }
        Ok(())
    }
}

/// An HTTP token (RFC 9110 `tchar`s, at least one).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header value without control characters other than tab (so without
/// line breaks that would end the header early).
fn is_header_value(value: &str) -> bool {
    value.bytes().all(|b| b == b'\t' || !b.is_ascii_control())
}

/// Why a [`ClientConfig`] cannot work ([`ClientConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientConfigError {
    /// `max_message_size` is below the protocol's minimum.
    #[error("max_message_size must be at least {min} bytes")]
    MessageSizeTooSmall {
        /// The configured limit.
        size: usize,
        /// The smallest allowed ([`MIN_MAX_MESSAGE_SIZE`]).
        min: usize,
    },
    /// A zero timeout would fail every request before it is answered.
    #[error("the timeout must be longer than zero (no timeout: None)")]
    ZeroTimeout,
    /// The bearer token is empty or contains control characters.
    #[error("the token must be non-empty and free of control characters (line breaks)")]
    InvalidToken,
    /// A handshake header name that is not an HTTP token.
    #[error("invalid header name {name:?}: expected letters, digits or !#$%&'*+-.^_`|~")]
    InvalidHeaderName {
        /// The name.
        name: String,
    },
    /// A handshake header value with control characters (line breaks).
    #[error("the value of header {name} contains control characters (line breaks)")]
    InvalidHeaderValue {
        /// The header's name.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_configuration_is_valid() {
        assert_eq!(ClientConfig::default().validate(), Ok(()));
        let config = ClientConfig::default()
            .with_timeout(None)
            .with_max_message_size(MIN_MAX_MESSAGE_SIZE)
            .with_token("s3cret")
            .with_header("X-Trace", "a\tb");
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn unworkable_settings_are_refused_with_their_reason() {
        let tiny = ClientConfig::default().with_max_message_size(7);
        assert_eq!(
            tiny.validate(),
            Err(ClientConfigError::MessageSizeTooSmall { size: 7, min: 8 })
        );
        assert_eq!(
            tiny.validate().unwrap_err().to_string(),
            "max_message_size must be at least 8 bytes"
        );
        let zero = ClientConfig::default().with_timeout(Some(Duration::ZERO));
        assert_eq!(zero.validate(), Err(ClientConfigError::ZeroTimeout));
        let token = ClientConfig::default().with_token("a\r\nX-Evil: 1");
        assert_eq!(token.validate(), Err(ClientConfigError::InvalidToken));
        assert_eq!(
            ClientConfig::default().with_token("").validate(),
            Err(ClientConfigError::InvalidToken)
        );
        let name = ClientConfig::default().with_header("bad header name", "x");
        assert_eq!(
            name.validate(),
            Err(ClientConfigError::InvalidHeaderName {
                name: "bad header name".into()
            })
        );
        let value = ClientConfig::default().with_header("X-Trace", "a\nb");
        assert_eq!(
            value.validate(),
            Err(ClientConfigError::InvalidHeaderValue {
                name: "X-Trace".into()
            })
        );
    }
}
