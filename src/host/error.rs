//! Errors raised by hosted simulators.

use std::fmt;

/// What kind of failure a hosted method reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostErrorKind {
    /// The simulator failed while running (`execution_error`).
    Execution,
    /// The request was refused before anything changed: the arguments do not
    /// fit the method's signature or types, the action is out of the action
    /// space, or the call comes in the wrong state (e.g. `step` before
    /// `reset`). The server answers a certain `invalid_request` and the
    /// resource stays usable (no fault).
    ///
    /// Return it only before the method mutates anything. Errors raised
    /// after the simulator started mutating belong to
    /// [`HostErrorKind::Execution`], which faults the domain until a reset.
    /// An object composed of others (a [`WorldEnv`](crate::host::WorldEnv),
    /// a node with children) cannot promise that nothing changed in its
    /// parts, so the server treats an invalid-argument error returned from
    /// inside its running method as an execution failure.
    InvalidArgument,
    /// The method is not implemented by this object (UniEnv's
    /// `NotImplementedError`).
    NotImplemented,
    /// A value the simulator produced cannot be encoded
    /// (`serialization_error`).
    Serialization,
    /// The method ran to completion, but its result was found larger than
    /// the server's message-size limit while it was being converted, so it
    /// was never built in full. The server treats it exactly as a result
    /// that ran and then failed to encode: the call's bookkeeping is that of
    /// a success, then it fails with `serialization_error` (uncertain and
    /// faulting for a mutation, certain for a read).
    ResultTooLarge,
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
    /// An execution failure with a diagnostic message. Returned by a
    /// mutation (`reset`, `step`, …) it means the simulator may be in an
    /// unknown state: the client gets an uncertain `execution_error` and the
    /// domain is faulted until a successful reset or reload.
    pub fn new(message: impl Into<String>) -> HostError {
        HostError {
            kind: HostErrorKind::Execution,
            message: message.into(),
        }
    }

    /// Refuses a call before anything changed: the arguments are wrong
    /// (missing, unexpected, mistyped, outside the action space) or the call
    /// comes in the wrong state (`step` before `reset`). The client gets a
    /// certain `invalid_request` and can go on using the resource; see
    /// [`HostErrorKind::InvalidArgument`] for when it is allowed.
    ///
    /// ```
    /// use unienv_remote::host::{HostError, HostErrorKind};
    /// let e = HostError::invalid_argument("action[1] = 2.5 is above the high bound 1");
    /// assert_eq!(e.kind(), HostErrorKind::InvalidArgument);
    /// ```
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

    /// A result found larger than the server's message-size limit while it
    /// was converted (see [`HostErrorKind::ResultTooLarge`]).
    pub fn result_too_large(message: impl Into<String>) -> HostError {
        HostError {
            kind: HostErrorKind::ResultTooLarge,
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

/// The refusal of `step` before the first `reset` (built-in simulators,
/// `WorldEnv`, [`Env::awaits_reset`]).
pub(crate) const STEP_BEFORE_RESET: &str =
    "step() was called before reset(): call reset() first to start an episode";
