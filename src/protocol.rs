//! Protocol messages as plain Rust data: requests, responses, errors,
//! snapshots and the stable error codes. Conversions to and from the value
//! tree live here; nothing here touches bytes or sockets.

use crate::codec::{Dict, Value};
use std::fmt;

/// The one protocol version this crate speaks.
pub const PROTOCOL_VERSION: i64 = 1;

/// A stable error code (SPEC 3.1). Unknown codes received from a peer are
/// preserved as [`ErrorCode::Other`]. The wire spelling is produced by
/// [`ErrorCode::as_str`] alone; the upper-case constants name the same
/// variants.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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
    /// The request is malformed or has wrong types.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode::InvalidRequest;
    /// The request names another protocol version.
    pub const VERSION_MISMATCH: ErrorCode = ErrorCode::VersionMismatch;
    /// hello missing or repeated, or a wrong session ID.
    pub const INVALID_SESSION: ErrorCode = ErrorCode::InvalidSession;
    /// Unknown resource ID.
    pub const NOT_FOUND: ErrorCode = ErrorCode::NotFound;
    /// Unknown operation, or a method that is not exported.
    pub const UNSUPPORTED_OPERATION: ErrorCode = ErrorCode::UnsupportedOperation;
    /// Another session (or another mode) controls the domain.
    pub const OWNERSHIP_CONFLICT: ErrorCode = ErrorCode::OwnershipConflict;
    /// A component operation is already open.
    pub const OPERATION_IN_PROGRESS: ErrorCode = ErrorCode::OperationInProgress;
    /// The call does not fit the open operation (or none is open).
    pub const INVALID_OPERATION: ErrorCode = ErrorCode::InvalidOperation;
    /// The domain is faulted and needs a reset or reload.
    pub const FAULTED: ErrorCode = ErrorCode::Faulted;
    /// A value could not be encoded, converted or fit in the message limit.
    pub const SERIALIZATION_ERROR: ErrorCode = ErrorCode::SerializationError;
    /// The hosted simulator failed.
    pub const EXECUTION_ERROR: ErrorCode = ErrorCode::ExecutionError;
    /// A snapshot could not be captured or delivered (`subscription_error`).
    pub const SNAPSHOT_ERROR: ErrorCode = ErrorCode::SnapshotError;

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

/// Protocol operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `hello`
    Hello,
    /// `discover`
    Discover,
    /// `describe`
    Describe,
    /// `acquire`
    Acquire,
    /// `release`
    Release,
    /// `begin`
    Begin,
    /// `complete`
    Complete,
    /// `abort`
    Abort,
    /// `call`
    Call,
    /// `subscribe`
    Subscribe,
    /// `unsubscribe`
    Unsubscribe,
}

impl Op {
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "hello" => Op::Hello,
            "discover" => Op::Discover,
            "describe" => Op::Describe,
            "acquire" => Op::Acquire,
            "release" => Op::Release,
            "begin" => Op::Begin,
            "complete" => Op::Complete,
            "abort" => Op::Abort,
            "call" => Op::Call,
            "subscribe" => Op::Subscribe,
            "unsubscribe" => Op::Unsubscribe,
            _ => return None,
        })
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Hello => "hello",
            Op::Discover => "discover",
            Op::Describe => "describe",
            Op::Acquire => "acquire",
            Op::Release => "release",
            Op::Begin => "begin",
            Op::Complete => "complete",
            Op::Abort => "abort",
            Op::Call => "call",
            Op::Subscribe => "subscribe",
            Op::Unsubscribe => "unsubscribe",
        }
    }
}

/// A request's operation and its op-specific members, read once from the
/// decoded request (as mini-redis's `Command::from_frame`). A member of the
/// wrong type reads as absent: each op refuses what it needs at the point
/// (and with the error) the reference does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Command<'a> {
    Hello {
        max_message_size: Option<&'a Value>,
    },
    Discover,
    Describe,
    Acquire {
        mode: Option<Mode>,
    },
    Release,
    Begin {
        kind: Option<OperationKind>,
        operation_id: Option<&'a str>,
    },
    Complete {
        operation_id: Option<&'a str>,
    },
    Abort {
        operation_id: Option<&'a str>,
    },
    Call {
        method: Option<&'a str>,
        /// As received (echoed on the boundary it publishes).
        operation_id: Option<&'a Value>,
        args: Option<&'a Value>,
        kwargs: Option<&'a Value>,
    },
    Subscribe {
        subscription_id: Option<&'a str>,
        fields: Option<&'a Value>,
    },
    Unsubscribe {
        subscription_id: Option<&'a str>,
    },
}

impl<'a> Command<'a> {
    /// The command of a request (`None`: no `op`, or an unknown one).
    pub(crate) fn from_request(request: &'a Dict) -> Option<Command<'a>> {
        let text = |key: &str| request.get(key).and_then(Value::as_str);
        let op = Op::parse(text("op")?)?;
        Some(match op {
            Op::Hello => Command::Hello {
                max_message_size: request.get("max_message_size"),
            },
            Op::Discover => Command::Discover,
            Op::Describe => Command::Describe,
            Op::Acquire => Command::Acquire {
                mode: text("mode").and_then(Mode::parse),
            },
            Op::Release => Command::Release,
            Op::Begin => Command::Begin {
                kind: text("kind").and_then(OperationKind::parse),
                operation_id: text("operation_id"),
            },
            Op::Complete => Command::Complete {
                operation_id: text("operation_id"),
            },
            Op::Abort => Command::Abort {
                operation_id: text("operation_id"),
            },
            Op::Call => Command::Call {
                method: text("method"),
                operation_id: request.get("operation_id"),
                args: request.get("args"),
                kwargs: request.get("kwargs"),
            },
            Op::Subscribe => Command::Subscribe {
                subscription_id: text("subscription_id"),
                fields: request.get("fields"),
            },
            Op::Unsubscribe => Command::Unsubscribe {
                subscription_id: text("subscription_id"),
            },
        })
    }

    /// The operation.
    pub(crate) fn op(&self) -> Op {
        match self {
            Command::Hello { .. } => Op::Hello,
            Command::Discover => Op::Discover,
            Command::Describe => Op::Describe,
            Command::Acquire { .. } => Op::Acquire,
            Command::Release => Op::Release,
            Command::Begin { .. } => Op::Begin,
            Command::Complete { .. } => Op::Complete,
            Command::Abort { .. } => Op::Abort,
            Command::Call { .. } => Op::Call,
            Command::Subscribe { .. } => Op::Subscribe,
            Command::Unsubscribe { .. } => Op::Unsubscribe,
        }
    }
}

/// Control modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Whole env methods.
    Env,
    /// World and node methods inside explicit operations.
    Components,
}

impl Mode {
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "env" => Some(Mode::Env),
            "components" => Some(Mode::Components),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Env => "env",
            Mode::Components => "components",
        }
    }
}

/// Component operation kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperationKind {
    /// `reset`
    Reset,
    /// `reload`
    Reload,
    /// `step`
    Step,
}

impl OperationKind {
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<OperationKind> {
        match s {
            "reset" => Some(OperationKind::Reset),
            "reload" => Some(OperationKind::Reload),
            "step" => Some(OperationKind::Step),
            _ => None,
        }
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            OperationKind::Reset => "reset",
            OperationKind::Reload => "reload",
            OperationKind::Step => "step",
        }
    }

    /// Whether this is a reset or reload operation.
    pub fn is_reset_family(self) -> bool {
        !matches!(self, OperationKind::Step)
    }
}

/// The protocol methods of every resource kind (see
/// [`ResourceKind::methods`] for which kind exports which).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `reset`
    Reset,
    /// `step`
    Step,
    /// `render`
    Render,
    /// `reload`
    Reload,
    /// `after_reset`
    AfterReset,
    /// `after_reload`
    AfterReload,
    /// `pre_environment_step`
    PreEnvironmentStep,
    /// `post_environment_step`
    PostEnvironmentStep,
    /// `set_next_action`
    SetNextAction,
    /// `get_context`
    GetContext,
    /// `get_observation`
    GetObservation,
    /// `get_reward`
    GetReward,
    /// `get_termination`
    GetTermination,
    /// `get_truncation`
    GetTruncation,
    /// `get_info`
    GetInfo,
}

impl Method {
    /// Every method, in no particular order.
    pub const ALL: [Method; 15] = [
        Method::Reset,
        Method::Step,
        Method::Render,
        Method::Reload,
        Method::AfterReset,
        Method::AfterReload,
        Method::PreEnvironmentStep,
        Method::PostEnvironmentStep,
        Method::SetNextAction,
        Method::GetContext,
        Method::GetObservation,
        Method::GetReward,
        Method::GetTermination,
        Method::GetTruncation,
        Method::GetInfo,
    ];

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Reset => "reset",
            Method::Step => "step",
            Method::Render => "render",
            Method::Reload => "reload",
            Method::AfterReset => "after_reset",
            Method::AfterReload => "after_reload",
            Method::PreEnvironmentStep => "pre_environment_step",
            Method::PostEnvironmentStep => "post_environment_step",
            Method::SetNextAction => "set_next_action",
            Method::GetContext => "get_context",
            Method::GetObservation => "get_observation",
            Method::GetReward => "get_reward",
            Method::GetTermination => "get_termination",
            Method::GetTruncation => "get_truncation",
            Method::GetInfo => "get_info",
        }
    }

    /// `reset` or `reload`: the calls that recover a faulted domain.
    pub fn is_reset_or_reload(self) -> bool {
        matches!(self, Method::Reset | Method::Reload)
    }

    /// The reset/reload lifecycle (`reset`, `reload` and their after-hooks):
    /// not allowed inside a step operation; each advances the revision.
    pub fn is_reset_lifecycle(self) -> bool {
        matches!(
            self,
            Method::Reset | Method::Reload | Method::AfterReset | Method::AfterReload
        )
    }

    /// Stepping and action hooks: not allowed inside a reset/reload operation.
    pub fn is_step_lifecycle(self) -> bool {
        matches!(
            self,
            Method::Step
                | Method::SetNextAction
                | Method::PreEnvironmentStep
                | Method::PostEnvironmentStep
        )
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Resource kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResourceKind {
    /// An environment.
    Env,
    /// A world.
    World,
    /// A node.
    Node,
}

impl ResourceKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Env => "env",
            ResourceKind::World => "world",
            ResourceKind::Node => "node",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<ResourceKind> {
        match s {
            "env" => Some(ResourceKind::Env),
            "world" => Some(ResourceKind::World),
            "node" => Some(ResourceKind::Node),
            _ => None,
        }
    }

    /// The exported methods of this kind, with whether each mutates.
    /// Env `reload` is exported only when the env implements it.
    pub fn methods(self) -> &'static [(&'static str, bool)] {
        match self {
            ResourceKind::Env => &[
                ("reset", true),
                ("step", true),
                ("render", false),
                ("reload", true),
            ],
            ResourceKind::World => &[
                ("step", true),
                ("reset", true),
                ("reload", true),
                ("after_reset", true),
                ("after_reload", true),
            ],
            ResourceKind::Node => &[
                ("reset", true),
                ("reload", true),
                ("after_reset", true),
                ("after_reload", true),
                ("pre_environment_step", true),
                ("post_environment_step", true),
                ("set_next_action", true),
                ("get_context", false),
                ("get_observation", false),
                ("get_reward", false),
                ("get_termination", false),
                ("get_truncation", false),
                ("get_info", false),
                ("render", false),
            ],
        }
    }

    /// Whether `method` of this kind mutates (`None` when not a method of the kind).
    pub fn is_mutation(self, method: &str) -> Option<bool> {
        self.methods()
            .iter()
            .find(|(m, _)| *m == method)
            .map(|(_, mutation)| *mutation)
    }

    /// Whether this kind exports `method` at all (env `reload` only when
    /// implemented, which the hosted object decides).
    pub fn has_method(self, method: Method) -> bool {
        self.is_mutation(method.as_str()).is_some()
    }

    /// The snapshot fields of this kind.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            ResourceKind::World => &["dt"],
            _ => &[
                "context",
                "info",
                "observation",
                "render",
                "reward",
                "terminated",
                "truncated",
            ],
        }
    }
}

/// A decoded request, before op-specific validation.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request dictionary as received.
    pub body: Dict,
}

impl Request {
    /// A string member, if present and a string.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.body.get(key).and_then(Value::as_str)
    }

    /// The request ID (validated to be a string before dispatch).
    pub fn request_id(&self) -> Value {
        self.body.get("request_id").cloned().unwrap_or_default()
    }
}

/// The members every request starts with, in the reference's order:
/// `version`, `type`, `request_id`, `session_id` (null before hello), `op`
/// and `resource_id` (null where the op has none). Op-specific members
/// follow them. The one place requests' heads are built.
pub(crate) fn request_head(
    op: &str,
    request_id: Value,
    session_id: Value,
    resource_id: Option<&str>,
) -> [(&'static str, Value); 6] {
    [
        ("version", Value::Int(PROTOCOL_VERSION)),
        ("type", Value::from("request")),
        ("request_id", request_id),
        ("session_id", session_id),
        ("op", Value::from(op)),
        ("resource_id", resource_id.map_or(Value::Null, Value::from)),
    ]
}

/// A request dict holding the members every request starts with, in the
/// reference's order: `version`, `type`, `request_id`, `session_id` (null
/// before hello), `op` and `resource_id` (null where the op has none).
/// Op-specific members are inserted after these.
pub fn request_envelope(
    op: &str,
    request_id: &str,
    session_id: &Value,
    resource_id: Option<&str>,
) -> Dict {
    let mut d = Dict::with_capacity(10);
    for (k, v) in request_head(op, Value::from(request_id), session_id.clone(), resource_id) {
        d.insert(k, v);
    }
    d
}

/// The leading members of a response (`ok`) or an error, in the
/// reference's order; the `result` or `error` member follows them.
pub(crate) fn response_head(
    ok: bool,
    session_id: &str,
    request_id: Value,
    resource_id: Value,
    operation_id: Value,
) -> [(&'static str, Value); 6] {
    [
        ("version", Value::Int(PROTOCOL_VERSION)),
        ("type", Value::from(if ok { "response" } else { "error" })),
        ("session_id", Value::from(session_id)),
        ("request_id", request_id),
        ("resource_id", resource_id),
        ("operation_id", operation_id),
    ]
}

/// Builds the envelope of a response or an error for a request whose
/// correlation fields are `request_id`, `resource_id` and `operation_id`,
/// in the reference's member order.
pub fn response_envelope(
    session_id: &str,
    request_id: Value,
    resource_id: Value,
    operation_id: Value,
    outcome: Result<Value, &ProtocolError>,
) -> Value {
    let head = response_head(
        outcome.is_ok(),
        session_id,
        request_id,
        resource_id,
        operation_id,
    );
    let mut d = Dict::with_capacity(7);
    for (k, v) in head {
        d.insert(k, v);
    }
    match outcome {
        Ok(result) => d.insert("result", result),
        Err(e) => d.insert("error", e.to_value()),
    };
    Value::Dict(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip_through_their_wire_spelling() {
        for code in ErrorCode::KNOWN {
            assert_eq!(ErrorCode::new(code.as_str()), code);
            assert_eq!(code.to_string(), code.as_str());
        }
        assert_eq!(ErrorCode::INVALID_REQUEST.as_str(), "invalid_request");
        let odd = ErrorCode::new("rate_limited");
        assert_eq!(odd, ErrorCode::Other("rate_limited".into()));
        assert_eq!(odd.as_str(), "rate_limited");
    }

    #[test]
    fn commands_are_read_once_with_their_members() {
        let mut d = request_envelope("begin", "r1", &Value::from("s"), Some("w"));
        d.insert("kind", "reset");
        d.insert("operation_id", "op1");
        assert_eq!(
            Command::from_request(&d),
            Some(Command::Begin {
                kind: Some(OperationKind::Reset),
                operation_id: Some("op1")
            })
        );
        d.insert("kind", 3);
        let begin = Command::from_request(&d).unwrap();
        assert_eq!(begin.op(), Op::Begin);
        assert!(matches!(begin, Command::Begin { kind: None, .. }));
        for op in [
            Op::Hello,
            Op::Discover,
            Op::Describe,
            Op::Acquire,
            Op::Release,
            Op::Begin,
            Op::Complete,
            Op::Abort,
            Op::Call,
            Op::Subscribe,
            Op::Unsubscribe,
        ] {
            let d = request_envelope(op.as_str(), "r", &Value::Null, None);
            assert_eq!(Command::from_request(&d).map(|c| c.op()), Some(op));
        }
        let d = request_envelope("teleport", "r", &Value::Null, None);
        assert_eq!(Command::from_request(&d), None);
    }

    #[test]
    fn methods_parse_their_wire_names() {
        for m in Method::ALL {
            assert_eq!(Method::parse(m.as_str()), Some(m));
        }
        assert_eq!(Method::parse("__init__"), None);
        for kind in [ResourceKind::Env, ResourceKind::World, ResourceKind::Node] {
            for (name, _) in kind.methods() {
                assert!(
                    Method::parse(name).is_some_and(|m| kind.has_method(m)),
                    "{name}"
                );
            }
        }
    }
}
