//! Errors as the protocol carries them: the stable codes ([`ErrorCode`])
//! and the error member of a response ([`ProtocolError`]).

use crate::codec::{Dict, Value};
use std::fmt;

/// A stable error code (SPEC 3.1). Unknown codes received from a peer are
/// preserved as [`ErrorCode::Other`]. The wire spelling is produced by
/// [`ErrorCode::as_str`] alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// `invalid_request`: the request is malformed or has wrong types.
    InvalidRequest,
    /// `version_mismatch`: the request names another protocol version.
    VersionMismatch,
    /// `invalid_session`: hello missing or repeated, or a wrong session ID.
    InvalidSession,
    /// `not_found`: unknown resource ID.
    NotFound,
    /// `unsupported_operation`: unknown operation, or a method that is not exported.
    UnsupportedOperation,
    /// `ownership_conflict`: another session (or another mode) controls the domain.
    OwnershipConflict,
    /// `operation_in_progress`: a component operation is already open.
    OperationInProgress,
    /// `invalid_operation`: the call does not fit the open operation (or none is open).
    InvalidOperation,
    /// `faulted`: the domain is faulted and needs a reset or reload.
    Faulted,
    /// `serialization_error`: a value could not be encoded, converted or fit
    /// in the message limit.
    SerializationError,
    /// `execution_error`: the hosted simulator failed.
    ExecutionError,
    /// `snapshot_error`: a snapshot could not be captured or delivered
    /// (`subscription_error`).
    SnapshotError,
    /// A code this crate does not know, as received.
    Other(String),
}

impl ErrorCode {
    /// Every known code.
    pub const KNOWN: [ErrorCode; 12] = [
        ErrorCode::InvalidRequest,
        ErrorCode::VersionMismatch,
        ErrorCode::InvalidSession,
        ErrorCode::NotFound,
        ErrorCode::UnsupportedOperation,
        ErrorCode::OwnershipConflict,
        ErrorCode::OperationInProgress,
        ErrorCode::InvalidOperation,
        ErrorCode::Faulted,
        ErrorCode::SerializationError,
        ErrorCode::ExecutionError,
        ErrorCode::SnapshotError,
    ];

    /// A code from its wire spelling (an unknown one is kept as `Other`).
    pub fn new(code: impl Into<String>) -> ErrorCode {
        let code = code.into();
        ErrorCode::KNOWN
            .into_iter()
            .find(|known| known.as_str() == code)
            .unwrap_or(ErrorCode::Other(code))
    }

    /// Whether this is one of the [`KNOWN`](ErrorCode::KNOWN) codes (not a
    /// code received as [`ErrorCode::Other`]).
    pub fn is_known(&self) -> bool {
        !matches!(self, ErrorCode::Other(_))
    }

    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::VersionMismatch => "version_mismatch",
            ErrorCode::InvalidSession => "invalid_session",
            ErrorCode::NotFound => "not_found",
            ErrorCode::UnsupportedOperation => "unsupported_operation",
            ErrorCode::OwnershipConflict => "ownership_conflict",
            ErrorCode::OperationInProgress => "operation_in_progress",
            ErrorCode::InvalidOperation => "invalid_operation",
            ErrorCode::Faulted => "faulted",
            ErrorCode::SerializationError => "serialization_error",
            ErrorCode::ExecutionError => "execution_error",
            ErrorCode::SnapshotError => "snapshot_error",
            ErrorCode::Other(code) => code,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A protocol error: a stable code, a diagnostic message, and whether the
/// outcome of a mutation is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}{}", if *.uncertain { " (outcome uncertain)" } else { "" })]
pub struct ProtocolError {
    /// The stable code.
    pub code: ErrorCode,
    /// Diagnostic text.
    pub message: String,
    /// True when a mutation had started: it may or may not have taken effect.
    pub uncertain: bool,
}

impl ProtocolError {
    /// A certain error (nothing was mutated).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ProtocolError {
        ProtocolError {
            code,
            message: message.into(),
            uncertain: false,
        }
    }

    /// An error after a mutation started.
    pub fn uncertain(code: ErrorCode, message: impl Into<String>) -> ProtocolError {
        ProtocolError {
            code,
            message: message.into(),
            uncertain: true,
        }
    }

    /// The `error` member of an error response.
    pub fn to_value(&self) -> Value {
        let mut d = Dict::with_capacity(3);
        d.insert("code", self.code.as_str());
        d.insert("message", self.message.as_str());
        d.insert("uncertain", self.uncertain);
        Value::Dict(d)
    }

    /// Parses the `error` member of an error response.
    pub fn from_value(v: &Value) -> Option<ProtocolError> {
        let d = v.as_dict()?;
        Some(ProtocolError {
            code: ErrorCode::new(d.get("code")?.as_str()?),
            message: d
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            uncertain: d.get("uncertain").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

/// Shorthand for building errors.
pub(crate) fn err(code: ErrorCode, message: impl Into<String>) -> ProtocolError {
    ProtocolError::new(code, message)
}
