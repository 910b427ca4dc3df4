//! Errors raised by hosted simulators.

use std::fmt;

/// What kind of failure a hosted method reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostErrorKind {
    /// The simulator failed while running (`execution_error`).
    Execution,
    /// The arguments do not fit the method's signature or types; nothing ran.
    InvalidArgument,
    /// The method is not implemented by this object (UniEnv's
    /// `NotImplementedError`).
    NotImplemented,
    /// A value the simulator produced cannot be encoded
    /// (`serialization_error`).
    Serialization,
}

/// An error returned by a hosted simulator method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError {
    kind: HostErrorKind,
    message: String,
}

/// The result of a hosted method.
pub type HostResult<T> = Result<T, HostError>;

impl HostError {
    /// An execution failure with a diagnostic message.
    pub fn new(message: impl Into<String>) -> HostError {
        HostError {
            kind: HostErrorKind::Execution,
            message: message.into(),
        }
    }

    /// The arguments are wrong (missing, unexpected or mistyped).
    pub fn invalid_argument(message: impl Into<String>) -> HostError {
        HostError {
            kind: HostErrorKind::InvalidArgument,
            message: message.into(),
        }
    }

    /// A value that cannot be encoded on the wire (`serialization_error`).
    pub fn serialization(message: impl Into<String>) -> HostError {
        HostError {
            kind: HostErrorKind::Serialization,
            message: message.into(),
        }
    }

    /// The named method is not implemented.
    pub fn not_implemented(method: &str) -> HostError {
        HostError {
            kind: HostErrorKind::NotImplemented,
            message: format!("{method} is not implemented"),
        }
    }

    /// Wraps any error as an execution failure.
    pub fn from_error(error: impl std::error::Error) -> HostError {
        HostError::new(error.to_string())
    }

    /// The kind of failure.
    pub fn kind(&self) -> HostErrorKind {
        self.kind
    }

    /// The diagnostic message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HostError {}

impl From<String> for HostError {
    fn from(message: String) -> HostError {
        HostError::new(message)
    }
}

impl From<&str> for HostError {
    fn from(message: &str) -> HostError {
        HostError::new(message)
    }
}

impl From<crate::codec::ArrayError> for HostError {
    fn from(e: crate::codec::ArrayError) -> HostError {
        HostError::from_error(e)
    }
}
