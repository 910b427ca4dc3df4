//! The leading members of requests and responses, in the reference's
//! order: the one place they are built.

use super::error::ProtocolError;
use crate::codec::{Dict, Value};

/// The one protocol version this crate speaks.
pub const PROTOCOL_VERSION: i64 = 1;

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
