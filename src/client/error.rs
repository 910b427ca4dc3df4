//! What can go wrong on the client side.

use crate::codec::CodecError;
use crate::protocol::ProtocolError;
use std::time::Duration;

/// An error of the client.
///
/// Every error has a stable [`code`](ClientError::code): the server's code for
/// [`Remote`](ClientError::Remote) errors, and a client-side code otherwise.
/// [`is_uncertain`](ClientError::is_uncertain) tells whether a mutation may
/// have executed remotely: the server's `uncertain` flag when it answered,
/// and always `true` for [`Uncertain`](ClientError::Uncertain) (a mutation
/// whose reply never arrived). Mutations are never retried.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with an error (or ended a subscription with one).
    #[error("remote error {0}")]
    Remote(#[from] ProtocolError),
    /// A mutation was sent but its reply never arrived (timeout, connection
    /// failure, or a cancelled request): it may or may not have executed.
    /// The connection is closed. `code()` is `uncertain_outcome`.
    #[error("the remote mutation may have executed; its outcome is unknown: {0}")]
    Uncertain(Box<ClientError>),
    /// No reply (or no snapshot) arrived in time. A request timeout closes
    /// the connection, so that a late reply can never be taken for another.
    #[error("timed out after {} s", .0.as_secs_f64())]
    Timeout(Duration),
    /// The connection is closed (locally, by the peer, or after a failure).
    #[error("connection closed: {0}")]
    Closed(String),
    /// The connection could not be established (handshake, HTTP status,
    /// address, or the hello exchange).
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The server sent something the protocol does not allow. Violations in
    /// the message stream close the connection.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// A value could not be encoded (nothing was sent), or a received
    /// envelope could not be decoded (the connection is closed).
    #[error("codec error: {0}")]
    Codec(#[from] CodecError),
    /// The call is not valid in the client's current state: an unknown or
    /// mistyped resource for the requested proxy, a nested operation, a
    /// method that the resource's kind does not have.
    #[error("invalid use: {0}")]
    InvalidUse(String),
}

impl ClientError {
    /// The stable code: the server's code for remote errors, otherwise
    /// `uncertain_outcome`, `timeout`, `connection_closed`,
    /// `connection_error`, `protocol_error`, `serialization_error` or
    /// `invalid_use`.
    pub fn code(&self) -> &str {
        match self {
            ClientError::Remote(e) => e.code.as_str(),
            ClientError::Uncertain(_) => "uncertain_outcome",
            ClientError::Timeout(_) => "timeout",
            ClientError::Closed(_) => "connection_closed",
            ClientError::Connect(_) => "connection_error",
            ClientError::Protocol(_) => "protocol_error",
            ClientError::Codec(_) => "serialization_error",
            ClientError::InvalidUse(_) => "invalid_use",
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
    use crate::protocol::ErrorCode;

    #[test]
    fn codes_and_uncertainty() {
        let remote =
            ClientError::from(ProtocolError::uncertain(ErrorCode::EXECUTION_ERROR, "boom"));
        assert_eq!(remote.code(), "execution_error");
        assert!(remote.is_uncertain());
        let certain = ClientError::from(ProtocolError::new(ErrorCode::FAULTED, "x"));
        assert!(!certain.is_uncertain());
        let lost = ClientError::Uncertain(Box::new(ClientError::Timeout(Duration::from_secs(1))));
        assert_eq!(lost.code(), "uncertain_outcome");
        assert!(lost.is_uncertain());
        assert_eq!(lost.cause().code(), "timeout");
        assert!(!ClientError::Timeout(Duration::ZERO).is_uncertain());
    }
}
