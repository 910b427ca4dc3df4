//! What can go wrong on the client side.
//!
//! [`ClientError`] is the one error type of the client; its variants that
//! used to carry only a message carry a structured reason instead
//! ([`CloseReason`], [`ConnectFailure`], [`ProtocolViolation`],
//! [`InvalidUse`], [`ClientConfigError`]), with the underlying error as their
//! [`source`](std::error::Error::source) where there is one. The messages
//! are unchanged.

use super::config::ClientConfigError;
use crate::codec::CodecError;
use crate::host::HostError;
use crate::protocol::{ErrorCode, ProtocolError, ResourceKind};
use crate::transport::{ConnectError, TlsError, TransportError};
use std::sync::Arc;
use std::time::Duration;

/// An error of the client.
///
/// Every error has a stable [`code`](ClientError::code): the server's code for
/// [`Remote`](ClientError::Remote) errors, and a client-side code otherwise.
/// [`is_uncertain`](ClientError::is_uncertain) tells whether a mutation may
/// have executed remotely: the server's `uncertain` flag when it answered,
/// and always `true` for [`Uncertain`](ClientError::Uncertain) (a mutation
/// whose reply never arrived). Mutations are never retried.
///
/// ```
/// use unienv_remote::client::{ClientError, ConnectFailure};
///
/// fn advice(error: &ClientError) -> &'static str {
///     match error {
///         ClientError::Connect(ConnectFailure::Refused { status: 401, .. }) => "pass --token",
///         ClientError::Connect(ConnectFailure::TimedOut { .. }) => "is the server up?",
///         ClientError::Remote(e) if e.code.as_str() == "busy" => "another client controls it",
///         _ => "see the message",
///     }
/// }
/// # let _ = advice;
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with an error (or ended a subscription with one):
    /// its code, message and `uncertain` flag.
    #[error("remote error {0}")]
    Remote(#[from] ProtocolError),
    /// A mutation was sent but its reply never arrived (timeout, connection
    /// failure, or a cancelled request): it may or may not have executed.
    /// The connection is closed. `code()` is `uncertain_outcome`.
    #[error("the remote mutation may have executed; its outcome is unknown: {0}")]
    Uncertain(#[source] Box<ClientError>),
    /// No reply (or no snapshot) arrived in time. A request timeout closes
    /// the connection, so that a late reply can never be taken for another.
    #[error("timed out after {} s", .0.as_secs_f64())]
    Timeout(Duration),
    /// The connection is closed (locally, by the peer, or after a failure).
    #[error("connection closed: {0}")]
    Closed(#[from] CloseReason),
    /// The connection could not be established (handshake, HTTP status,
    /// address, or the client's runtime).
    #[error("cannot connect: {0}")]
    Connect(#[from] ConnectFailure),
    /// The server sent something the protocol does not allow. Violations in
    /// the message stream close the connection.
    #[error("protocol violation: {0}")]
    Protocol(#[from] ProtocolViolation),
    /// A value could not be encoded (nothing was sent), or a received
    /// envelope could not be decoded (the connection is closed).
    #[error("codec error: {0}")]
    Codec(#[from] CodecError),
    /// The call is not valid in the client's current state: an unknown or
    /// mistyped resource for the requested proxy, a nested operation, a
    /// composition that cannot be made.
    #[error("invalid use: {0}")]
    InvalidUse(#[from] InvalidUse),
    /// The [`ClientConfig`](super::ClientConfig) cannot work; nothing was
    /// sent.
    #[error("invalid configuration: {0}")]
    Config(#[from] ClientConfigError),
    /// The wait was interrupted (see [`interrupt`](super::interrupt)): a
    /// mutation in flight then closed the connection, its outcome unknown.
    /// `code()` is `interrupted`.
    #[error("interrupted")]
    Interrupted,
}

/// The code of a [`ClientError`] ([`ClientError::code`]): the server's
/// [`ErrorCode`] when it answered with an error, otherwise the client's own.
/// Compares equal to its spelling (`code == "timeout"`) and, for remote
/// errors, to the server's code (`code == ErrorCode::NotFound`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClientErrorCode {
    /// The server's error code.
    Remote(ErrorCode),
    /// `uncertain_outcome`: a mutation's reply was lost; it may have run.
    UncertainOutcome,
    /// `timeout`: no reply in time (the connection is closed).
    Timeout,
    /// `connection_closed`: the connection is closed.
    ConnectionClosed,
    /// `connection_error`: the connection could not be established.
    ConnectionError,
    /// `protocol_error`: the server broke the protocol.
    ProtocolError,
    /// `serialization_error`: a value could not be encoded or decoded here.
    SerializationError,
    /// `invalid_use`: the call is not valid in the client's state, or the
    /// configuration cannot work.
    InvalidUse,
    /// `interrupted`: the wait was interrupted (Ctrl-C).
    Interrupted,
}

impl ClientErrorCode {
    /// The code's spelling (the server's for remote errors).
    pub fn as_str(&self) -> &str {
        match self {
            ClientErrorCode::Remote(code) => code.as_str(),
            ClientErrorCode::UncertainOutcome => "uncertain_outcome",
            ClientErrorCode::Timeout => "timeout",
            ClientErrorCode::ConnectionClosed => "connection_closed",
            ClientErrorCode::ConnectionError => "connection_error",
            ClientErrorCode::ProtocolError => "protocol_error",
            ClientErrorCode::SerializationError => "serialization_error",
            ClientErrorCode::InvalidUse => "invalid_use",
            ClientErrorCode::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for ClientErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ClientErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ClientErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<ErrorCode> for ClientErrorCode {
    fn eq(&self, other: &ErrorCode) -> bool {
        matches!(self, ClientErrorCode::Remote(code) if code == other)
    }
}

/// Why the connection is closed ([`ClientError::Closed`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// [`Client::close`](super::Client::close) was called.
    #[error("the client was closed")]
    Closed,
    /// The last handle of the client was dropped.
    #[error("the client was dropped")]
    Dropped,
    /// The `hello` exchange failed (its error is the connect error).
    #[error("hello failed")]
    HelloFailed,
    /// The connection's writer task has stopped, so nothing was sent.
    #[error("the connection's writer has stopped")]
    WriterStopped,
    /// A request timed out; the connection was closed so that its late
    /// reply cannot be taken for another.
    #[error("a request timed out after {after:?}; the connection was closed")]
    RequestTimedOut {
        /// The request timeout.
        after: Duration,
    },
    /// A mutation request was cancelled (its future dropped) before its
    /// reply arrived.
    #[error("a mutation request was cancelled before its reply arrived")]
    MutationCancelled,
    /// The server closed the connection.
    #[error("the server closed the connection")]
    ByServer,
    /// The transport failed.
    #[error("transport failure: {source}")]
    Transport {
        /// The transport's error.
        #[source]
        source: TransportError,
    },
    /// A spawned request task ended without a reply (panicked or was
    /// cancelled).
    #[error("the request's task ended: {detail}")]
    TaskEnded {
        /// What the runtime said.
        detail: String,
    },
    /// Another failure closed the connection (a protocol violation or an
    /// undecodable message from the server).
    #[error("{source}")]
    Failed {
        /// The failure.
        #[source]
        source: Box<ClientError>,
    },
    /// Nothing at all, not even a pong to a heartbeat ping, arrived from
    /// the server for the heartbeat timeout: the server is taken as gone.
    #[error("connection lost: nothing received from the server for {:.1} s, not even a pong to a heartbeat ping (ClientConfig::heartbeat_timeout)", .quiet.as_secs_f64())]
    ServerSilent {
        /// How long nothing arrived.
        quiet: Duration,
    },
    /// A vector env's sub-environment was pointed at a new address
    /// ([`VectorEnv::reconnect`](super::vector::VectorEnv::reconnect)); it
    /// must be reset before it is stepped.
    #[error("reconnected to {resource_id} at {url}; reset it before stepping it")]
    Reconnected {
        /// The env's resource ID on its new server.
        resource_id: String,
        /// The new server's URL.
        url: String,
    },
    /// The connection was closed for no recorded reason.
    #[error("client closed")]
    Unknown,
}

/// Why a connection could not be established ([`ClientError::Connect`]).
///
/// The messages are the transport's, with the way out when there is one
/// (`--token` for HTTP 401, `--allow-host` / `--allow-origin` for 403); the
/// transport's [`ConnectError`] is kept as the source
/// ([`ConnectFailure::transport`]), with its `io::Error` where there is one
/// ([`ConnectFailure::io_error`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectFailure {
    /// The URL is not `ws://host[:port][/path]`.
    #[error("{source}")]
    InvalidUrl {
        /// The transport's error.
        source: Arc<ConnectError>,
    },
    /// The TCP connection or its I/O failed (refused, unreachable, reset).
    #[error("{source}")]
    Io {
        /// The transport's error, holding the `io::Error`.
        source: Arc<ConnectError>,
    },
    /// The server answered the handshake with an HTTP status instead of 101.
    #[error("{source}")]
    Refused {
        /// The HTTP status (401: a token is needed; 403: host or origin not
        /// allowed).
        status: u16,
        /// The transport's error: status, reason, body and the way out.
        source: Arc<ConnectError>,
    },
    /// The server's answer violates the WebSocket handshake.
    #[error("{source}")]
    Handshake {
        /// The transport's error.
        source: Arc<ConnectError>,
    },
    /// TLS failed: the client's TLS configuration (an unreadable CA file),
    /// the server's certificate (not trusted: pass `--ca-file`), the TLS
    /// handshake, or a scheme that does not match the server's (`ws://` to
    /// a TLS server).
    #[error("{source}")]
    Tls {
        /// The transport's error, with the way out when there is one.
        source: Arc<ConnectError>,
    },
    /// The handshake did not complete within the configured timeout.
    #[error("handshake timed out after {after:?}")]
    TimedOut {
        /// The timeout.
        after: Duration,
    },
    /// The client's runtime or its idle thread could not be started.
    #[error("cannot start the client{what}: {detail}")]
    Runtime {
        /// `" runtime"` or `"'s idle thread"`.
        what: &'static str,
        /// The operating system's message.
        detail: String,
    },
}

impl ConnectFailure {
    /// The HTTP status when the server refused the handshake.
    pub fn status(&self) -> Option<u16> {
        match self {
            ConnectFailure::Refused { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The transport's error, for every failure but a timeout of the whole
    /// handshake and the client's own runtime.
    pub fn transport(&self) -> Option<&ConnectError> {
        match self {
            ConnectFailure::InvalidUrl { source }
            | ConnectFailure::Io { source }
            | ConnectFailure::Refused { source, .. }
            | ConnectFailure::Handshake { source }
            | ConnectFailure::Tls { source } => Some(source),
            ConnectFailure::TimedOut { .. } | ConnectFailure::Runtime { .. } => None,
        }
    }

    /// The operating system's error, when TCP or the TLS stream failed.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self.transport()? {
            ConnectError::Tcp { source, .. }
            | ConnectError::Io { source, .. }
            | ConnectError::Tls { source, .. } => Some(source),
            _ => None,
        }
    }

    /// Whether the failure is a timeout (of the handshake, or of the TCP
    /// connection as the operating system reports it).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ConnectFailure::TimedOut { .. })
            || self
                .io_error()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
    }

    /// Whether the server's host refused the TCP connection (nothing listens
    /// on the port).
    pub fn is_refused_by_os(&self) -> bool {
        matches!(self, ConnectFailure::Io { .. })
            && self
                .io_error()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
    }

    /// Whether trusting the server takes a CA certificate the client does not
    /// have (`--ca-file`, [`ClientConfig::ca_file`](super::ClientConfig::ca_file)):
    /// the server's certificate was not accepted, or the system has no roots.
    pub fn needs_ca_file(&self) -> bool {
        matches!(
            self.transport(),
            Some(ConnectError::Certificate { .. } | ConnectError::TlsConfig(TlsError::NoRoots))
        )
    }
}

impl From<ConnectError> for ConnectFailure {
    fn from(e: ConnectError) -> ConnectFailure {
        let source = Arc::new(e);
        match &*source {
            ConnectError::Refused { status, .. } => ConnectFailure::Refused {
                status: *status,
                source,
            },
            ConnectError::Url { .. } => ConnectFailure::InvalidUrl { source },
            ConnectError::Tcp { .. } | ConnectError::Io { .. } => ConnectFailure::Io { source },
            ConnectError::TlsConfig(_)
            | ConnectError::Certificate { .. }
            | ConnectError::Tls { .. }
            | ConnectError::ServerWantsTls { .. } => ConnectFailure::Tls { source },
            _ => ConnectFailure::Handshake { source },
        }
    }
}

impl From<TlsError> for ConnectFailure {
    fn from(e: TlsError) -> ConnectFailure {
        ConnectFailure::Tls {
            source: Arc::new(ConnectError::TlsConfig(e)),
        }
    }
}

/// What the server sent that the protocol does not allow
/// ([`ClientError::Protocol`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// A server message that is not a dict.
    #[error("a server message must be a dict")]
    NotADict,
    /// A server message without this protocol's version.
    #[error("invalid response version or envelope")]
    Version,
    /// A server message of another session.
    #[error("a message has the wrong session ID")]
    WrongSession,
    /// A server message of an unknown `type`.
    #[error("unknown server message type")]
    UnknownMessageType,
    /// An error response without a valid `error` member.
    #[error("malformed error response")]
    MalformedError,
    /// A `hello` result without a session ID.
    #[error("hello without a session_id")]
    HelloWithoutSession,
    /// A `hello` result without a usable message size limit.
    #[error("hello without a valid max_message_size")]
    HelloWithoutLimit,
    /// An event without a resource ID.
    #[error("an event without a resource_id")]
    EventWithoutResource,
    /// A snapshot without a valid member.
    #[error("a snapshot without a valid {field}")]
    SnapshotField {
        /// The member.
        field: String,
    },
    /// A `describe` result without the asked-for resource.
    #[error("describe did not return {resource_id}")]
    DescribeMissing {
        /// The resource asked for.
        resource_id: String,
    },
    /// A member of the wrong type.
    #[error("{what} must be {expected}, got {found}")]
    WrongType {
        /// What was received (`descriptors`, `a call result`).
        what: &'static str,
        /// The type expected.
        expected: &'static str,
        /// The type received.
        found: &'static str,
    },
    /// A step's reward that is not a number.
    #[error("the step's reward is not a number but {found}")]
    RewardNotANumber {
        /// The type received.
        found: &'static str,
    },
    /// A step's `terminated` or `truncated` without a truth value.
    #[error("the step's {flag} has no truth value: {value}")]
    FlagNotABool {
        /// `terminated` or `truncated`.
        flag: &'static str,
        /// The value received, as text.
        value: String,
    },
    /// A descriptor or result that cannot be parsed.
    #[error("{detail}")]
    Malformed {
        /// What is wrong with it.
        detail: String,
    },
}

/// A call that is not valid in the client's current state
/// ([`ClientError::InvalidUse`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidUse {
    /// The resource is not of the kind of proxy asked for.
    #[error("resource {resource_id} is a {}, not {wanted}", .kind.as_str())]
    WrongKind {
        /// The resource.
        resource_id: String,
        /// Its kind.
        kind: ResourceKind,
        /// What was asked for (`an env`, `a world`, `a node`).
        wanted: &'static str,
    },
    /// A component operation was begun on a domain that has one open.
    #[error(
        "nested component operations are not supported: {domain} already has an open operation"
    )]
    NestedOperation {
        /// The domain.
        domain: String,
    },
    /// The remote world and nodes cannot be composed (`RemoteWorldEnv`).
    #[error("{detail}")]
    Composition {
        /// Why.
        detail: String,
    },
    /// The composer refused the remote world and nodes.
    #[error("cannot compose: {source}")]
    Composer {
        /// The composer's error.
        #[source]
        source: HostError,
    },
    /// A use refused by the application or binding built on the client.
    #[error("{message}")]
    Other {
        /// The refusal.
        message: String,
    },
}

impl ClientError {
    /// An [`InvalidUse::Other`] error: a refusal by the application built
    /// on the client, with its message.
    pub fn invalid_use(message: impl Into<String>) -> ClientError {
        ClientError::InvalidUse(InvalidUse::Other {
            message: message.into(),
        })
    }

    /// A [`ProtocolViolation::Malformed`] error.
    pub(crate) fn malformed(detail: impl Into<String>) -> ClientError {
        ClientError::Protocol(ProtocolViolation::Malformed {
            detail: detail.into(),
        })
    }

    /// The stable code: the server's code for remote errors
    /// ([`ClientErrorCode::Remote`]), otherwise one of the client's own
    /// (`uncertain_outcome`, `timeout`, `connection_closed`,
    /// `connection_error`, `protocol_error`, `serialization_error`,
    /// `invalid_use`, the last also for [`ClientError::Config`]). It compares
    /// equal to its wire spelling: `e.code() == "timeout"`.
    pub fn code(&self) -> ClientErrorCode {
        match self {
            ClientError::Remote(e) => ClientErrorCode::Remote(e.code.clone()),
            ClientError::Uncertain(_) => ClientErrorCode::UncertainOutcome,
            ClientError::Timeout(_) => ClientErrorCode::Timeout,
            ClientError::Closed(_) => ClientErrorCode::ConnectionClosed,
            ClientError::Connect(_) => ClientErrorCode::ConnectionError,
            ClientError::Protocol(_) => ClientErrorCode::ProtocolError,
            ClientError::Codec(_) => ClientErrorCode::SerializationError,
            ClientError::InvalidUse(_) | ClientError::Config(_) => ClientErrorCode::InvalidUse,
            ClientError::Interrupted => ClientErrorCode::Interrupted,
        }
    }

    /// Whether a mutation may have executed remotely: the server's flag for
    /// remote errors, `true` for [`ClientError::Uncertain`], `false` otherwise.
    pub fn is_uncertain(&self) -> bool {
        match self {
            ClientError::Remote(e) => e.uncertain,
            ClientError::Uncertain(_) => true,
            _ => false,
        }
    }

    /// The server's error, when the server answered with one.
    pub fn remote(&self) -> Option<&ProtocolError> {
        match self {
            ClientError::Remote(e) => Some(e),
            _ => None,
        }
    }

    /// The cause of an [`Uncertain`](ClientError::Uncertain) error (the
    /// timeout or the connection failure); `self` for other errors.
    pub fn cause(&self) -> &ClientError {
        match self {
            ClientError::Uncertain(inner) => inner.cause(),
            other => other,
        }
    }
}

/// The result type of the client.
pub type ClientResult<T> = Result<T, ClientError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_uncertainty() {
        let remote = ClientError::from(ProtocolError::uncertain(ErrorCode::ExecutionError, "boom"));
        assert_eq!(remote.code(), "execution_error");
        assert_eq!(remote.code(), ErrorCode::ExecutionError);
        assert!(matches!(
            remote.code(),
            ClientErrorCode::Remote(ErrorCode::ExecutionError)
        ));
        assert!(remote.is_uncertain());
        // A client code is not the server's code of the same spelling; a
        // server code this crate does not know is kept as received.
        let codec = ClientError::Codec(CodecError::TooShort { len: 1 });
        assert_eq!(codec.code(), ClientErrorCode::SerializationError);
        assert!(codec.code() != ErrorCode::SerializationError);
        let odd = ClientError::from(ProtocolError::new(ErrorCode::new("rate_limited"), "x"));
        assert_eq!(odd.code(), "rate_limited");
        assert_eq!(odd.code().to_string(), "rate_limited");
        let certain = ClientError::from(ProtocolError::new(ErrorCode::Faulted, "x"));
        assert!(!certain.is_uncertain());
        let lost = ClientError::Uncertain(Box::new(ClientError::Timeout(Duration::from_secs(1))));
        assert_eq!(lost.code(), "uncertain_outcome");
        assert!(lost.is_uncertain());
        assert_eq!(lost.cause().code(), "timeout");
        assert!(!ClientError::Timeout(Duration::ZERO).is_uncertain());
    }

    #[test]
    fn causes_are_kept_as_sources() {
        use std::error::Error;
        let closed = ClientError::from(CloseReason::Transport {
            source: TransportError::TooLarge,
        });
        assert_eq!(closed.code(), "connection_closed");
        assert_eq!(
            closed.to_string(),
            "connection closed: transport failure: message exceeds the size limit"
        );
        let reason = closed.source().expect("the close reason");
        let transport = reason.source().expect("the transport error");
        assert!(matches!(
            transport.downcast_ref::<TransportError>(),
            Some(TransportError::TooLarge)
        ));
        // A failure that closed the connection stays reachable, message unchanged.
        let violation = ClientError::from(ProtocolViolation::WrongSession);
        let closed = ClientError::from(CloseReason::Failed {
            source: Box::new(violation.clone()),
        });
        assert_eq!(
            closed.to_string(),
            format!("connection closed: {violation}")
        );
        match &closed {
            ClientError::Closed(CloseReason::Failed { source }) => {
                assert_eq!(source.to_string(), violation.to_string())
            }
            other => panic!("{other:?}"),
        }
        let lost = ClientError::Uncertain(Box::new(closed.clone()));
        assert_eq!(
            lost.source().map(|s| s.to_string()),
            Some(closed.to_string())
        );
    }

    #[test]
    fn connect_failures_keep_the_status_and_the_way_out() {
        use crate::transport::ws::ConnectError;
        let refused = ConnectFailure::from(ConnectError::Refused {
            status: 401,
            reason: "Unauthorized".into(),
            body: String::new(),
        });
        assert_eq!(refused.status(), Some(401));
        assert!(refused.to_string().contains("--token"), "{refused}");
        let error = ClientError::from(refused);
        assert!(matches!(
            error,
            ClientError::Connect(ConnectFailure::Refused { status: 401, .. })
        ));
        assert_eq!(error.code(), "connection_error");
        let io = ConnectFailure::from(ConnectError::Tcp {
            addr: "127.0.0.1:1".into(),
            source: std::io::Error::from_raw_os_error(111),
        });
        assert!(io.is_refused_by_os() && !io.is_timeout() && io.status().is_none());
        let late = ConnectFailure::TimedOut {
            after: Duration::from_secs(2),
        };
        assert!(late.is_timeout());
        assert_eq!(late.to_string(), "handshake timed out after 2s");
        let url = ConnectFailure::from(ConnectError::Url {
            url: "nope".into(),
            reason: "not a ws:// or wss:// URL",
        });
        assert!(matches!(url, ConnectFailure::InvalidUrl { .. }));
    }

    #[test]
    fn invalid_uses_are_matchable_and_keep_their_messages() {
        let wrong = ClientError::from(InvalidUse::WrongKind {
            resource_id: "arm".into(),
            kind: ResourceKind::Node,
            wanted: "an env",
        });
        assert_eq!(
            wrong.to_string(),
            "invalid use: resource arm is a node, not an env"
        );
        assert_eq!(wrong.code(), "invalid_use");
        let own = ClientError::invalid_use("the body gave up");
        assert!(matches!(
            &own,
            ClientError::InvalidUse(InvalidUse::Other { message }) if message == "the body gave up"
        ));
        let config = ClientError::from(ClientConfigError::ZeroTimeout);
        assert_eq!(config.code(), "invalid_use");
    }
}
