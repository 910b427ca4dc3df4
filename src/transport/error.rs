//! Why a transport stopped ([`TransportError`]), and the close code each
//! reason closes a WebSocket connection with.

use super::frame;

/// Why a transport stopped.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The peer closed the connection (or it was closed locally).
    #[error("connection closed")]
    Closed,
    /// The peer sent a text message; v1 carries binary messages only (1003).
    #[error("text message received: the protocol uses binary messages only")]
    TextMessage,
    /// A message exceeded the size limit (1009).
    #[error("message exceeds the size limit")]
    TooLarge,
    /// The peer broke RFC 6455 framing (1002).
    #[error("WebSocket protocol error: {0}")]
    Protocol(#[from] frame::FrameError),
    /// A message did not complete within this time of its first byte (1008).
    #[error("message not completed within {} s of its first byte", .0.as_secs_f64())]
    MessageTimeout(std::time::Duration),
    /// The connection would hold more bytes than its budget (1008).
    #[error(
        "connection memory budget exceeded: {wanted} more bytes with {held} held, at most {cap}"
    )]
    ConnectionBudget {
        /// Bytes asked for.
        wanted: usize,
        /// Bytes already held.
        held: usize,
        /// The connection's cap.
        cap: usize,
    },
    /// The server's shared pool of bytes is exhausted (1013, try again later).
    #[error("server memory budget exhausted: {wanted} bytes wanted, {used} of {limit} in use")]
    ServerBudget {
        /// Bytes asked for.
        wanted: usize,
        /// Bytes in use by all connections.
        used: usize,
        /// The pool's size.
        limit: usize,
    },
    /// The opening handshake's request is not HTTP (or is TLS on a plain
    /// endpoint).
    #[error("invalid handshake: {0}")]
    Handshake(&'static str),
    /// The opening handshake was refused with this HTTP status.
    #[error("handshake refused: {status} {message}")]
    Refused {
        /// The HTTP status sent.
        status: u16,
        /// The body sent.
        message: String,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake failed: {0}")]
    Tls(#[source] std::sync::Arc<std::io::Error>),
    /// Reading or writing the stream failed.
    #[error("transport I/O failure: {0}")]
    Io(#[source] std::sync::Arc<std::io::Error>),
}

impl TransportError {
    pub(crate) fn io(e: std::io::Error) -> TransportError {
        TransportError::Io(std::sync::Arc::new(e))
    }

    /// The WebSocket close code this error closes the connection with:
    /// 1002 framing, 1003 text, 1008 policy (budget, slow message), 1009 too
    /// large, 1013 server budget; `None` where no close frame is due.
    pub fn close_code(&self) -> Option<u16> {
        match self {
            TransportError::TextMessage => Some(1003),
            TransportError::TooLarge => Some(1009),
            TransportError::Protocol(e) => Some(e.close_code()),
            TransportError::MessageTimeout(_) | TransportError::ConnectionBudget { .. } => {
                Some(1008)
            }
            TransportError::ServerBudget { .. } => Some(1013),
            TransportError::Closed
            | TransportError::Handshake(_)
            | TransportError::Refused { .. }
            | TransportError::Tls(_)
            | TransportError::Io(_) => None,
        }
    }
}

impl From<crate::server::budget::BudgetError> for TransportError {
    fn from(e: crate::server::budget::BudgetError) -> TransportError {
        use crate::server::budget::BudgetError;
        match e {
            BudgetError::Connection { wanted, held, cap } => {
                TransportError::ConnectionBudget { wanted, held, cap }
            }
            BudgetError::Server {
                wanted,
                used,
                limit,
            } => TransportError::ServerBudget {
                wanted,
                used,
                limit,
            },
        }
    }
}
