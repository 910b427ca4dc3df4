//! The parts of a `call` that need no domain state: its arguments, the
//! optional action check, and the encoding of a response around a result.

use super::hosted::{Hosted, ResourceMeta};
use super::outbound::SessionShared;
use crate::codec::{Dict, DictText, NdArray, Value};
use crate::protocol::{err, ErrorCode, ProtocolError};

/// A call's `args` and `kwargs`, arrays in native byte order.
pub(crate) fn arguments(
    args: Option<&Value>,
    kwargs: Option<&Value>,
) -> Result<(Vec<Value>, Dict), ProtocolError> {
    let shape = || {
        err(
            ErrorCode::InvalidRequest,
            "Expected args sequence and kwargs dictionary",
        )
    };
    let args = match args {
        None => Vec::new(),
        Some(Value::List(a) | Value::Tuple(a)) => a.iter().map(native).collect(),
        Some(_) => return Err(shape()),
    };
    let kwargs = match kwargs {
        None => Dict::new(),
        Some(Value::Dict(d)) => d.iter().map(|(k, v)| (k.to_string(), native(v))).collect(),
        Some(_) => return Err(shape()),
    };
    Ok((args, kwargs))
}

/// Checks a well-formed call's action against the declared action space (a
/// wrong argument count is left to the binding, which names what was given).
pub(crate) fn check_action(
    hosted: &mut Hosted,
    meta: &ResourceMeta,
    method: &str,
    args: &[Value],
    kwargs: &Dict,
) -> Result<(), ProtocolError> {
    let action = match args.len() {
        0 => kwargs.get("action"),
        1 if !kwargs.contains_key("action") => args.first(),
        _ => None,
    };
    if let (Some(action), Some(space)) = (action, hosted.action_space(meta)) {
        if let Err(problem) = space.check(action, "action") {
            tracing::debug!(resource = %meta.id, method, %problem, "action refused");
            return Err(err(
                ErrorCode::InvalidRequest,
                format!("{method}() on '{}' refused the action: {problem}", meta.id),
            ));
        }
    }
    Ok(())
}

/// Arrays in arguments are normalized to native byte order before invocation
/// (lossless for every supported dtype).
fn native(v: &Value) -> Value {
    match v {
        Value::Array(a) if !a.dtype().is_native() => Value::Array(NdArray::to_native(a)),
        Value::List(items) => Value::List(items.iter().map(native).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(native).collect()),
        Value::Dict(d) => Value::Dict(d.iter().map(|(k, v)| (k.to_string(), native(v))).collect()),
        Value::ObjectArray(o) => crate::codec::ObjectArray::new(
            o.shape().to_vec(),
            o.values().iter().map(native).collect(),
        )
        .map(Value::ObjectArray)
        .unwrap_or_else(|_| v.clone()),
        Value::Graph(g) => Value::Graph(Box::new(crate::codec::Graph {
            n_nodes: native(&g.n_nodes),
            n_edges: native(&g.n_edges),
            nodes_features: native(&g.nodes_features),
            edges_features: native(&g.edges_features),
            edges: native(&g.edges),
        })),
        other => other.clone(),
    }
}

/// Encodes a response envelope around `result` without copying it; if it
/// does not fit, drops the optional snapshots from its descriptors and tries
/// again. `texts` are the kept texts of the result's descriptors, by index,
/// which are written instead of encoding a descriptor that still fits its
/// text (the same bytes).
pub(crate) fn encode_response(
    session: &SessionShared,
    request: &Dict,
    result: &mut Value,
    texts: &[Option<&DictText>],
) -> Result<Vec<u8>, String> {
    let codec = session.codec();
    // The session's kept head, the echoed IDs borrowed from the request
    // (null where absent): the members `response_head` builds, in its order.
    static NULL: Value = Value::Null;
    let attempt = |result: &Value| {
        let mut entries: [(&str, &Value); 7] = [("result", result); 7];
        for (slot, (key, kept)) in entries.iter_mut().zip(&session.ok_head) {
            let echoed = matches!(*key, "request_id" | "resource_id" | "operation_id");
            *slot = match echoed {
                true => (*key, request.get(key).unwrap_or(&NULL)),
                false => (*key, kept),
            };
        }
        let kept: Vec<(&Value, &DictText)> = match descriptor_list(result) {
            Some(list) if list.len() == texts.len() => list
                .iter()
                .zip(texts)
                .filter_map(|(d, t)| Some((d, (*t)?)))
                .collect(),
            _ => Vec::new(),
        };
        codec.encode_entries_with(&entries, &kept)
    };
    match attempt(result) {
        Ok(bytes) => Ok(bytes),
        Err(e) => {
            if !strip_snapshots(result) {
                return Err(e.to_string());
            }
            attempt(result).map_err(|e| e.to_string())
        }
    }
}

/// A result's descriptors: the result itself (a boundary's list) or its
/// `descriptors` member (a call's).
fn descriptor_list(result: &Value) -> Option<&[Value]> {
    match result {
        Value::List(d) => Some(d),
        Value::Dict(d) => match d.get("descriptors") {
            Some(Value::List(d)) => Some(d),
            _ => None,
        },
        _ => None,
    }
}

/// Removes every boundary snapshot from a result's descriptors; whether
/// there was any.
fn strip_snapshots(result: &mut Value) -> bool {
    let descriptors = match result {
        Value::List(d) => d,
        Value::Dict(d) => match d.get_mut("descriptors") {
            Some(Value::List(d)) => d,
            _ => return false,
        },
        _ => return false,
    };
    let mut any = false;
    for d in descriptors {
        if let Some(d) = d.as_dict_mut() {
            any |= d.remove("snapshot").is_some();
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::{Account, Pool};
    use crate::codec::Codec;
    use crate::protocol::response_head;
    use std::sync::Arc;

    /// The response as built before the session kept its head: the head
    /// from `response_head` with the echoed IDs cloned, then the result.
    fn plain(session: &SessionShared, request: &Dict, result: &Value) -> Vec<u8> {
        let echo = |k: &str| request.get(k).cloned().unwrap_or_default();
        let head = response_head(
            true,
            &session.id,
            echo("request_id"),
            echo("resource_id"),
            echo("operation_id"),
        );
        let mut entries: Vec<(&str, &Value)> = head.iter().map(|(k, v)| (*k, v)).collect();
        entries.push(("result", result));
        Codec::new(1 << 20)
            .unwrap()
            .encode_entries(&entries)
            .unwrap()
    }

    #[test]
    fn a_response_from_the_kept_head_is_the_plain_responses_bytes() {
        let session = SessionShared::new(
            Arc::from("5e55105e55105e55105e55105e55105e"),
            1 << 20,
            Account::new(Pool::new(1 << 30), 1 << 30),
            Arc::new(crate::metrics::Metrics::new(None)),
            None,
        );
        let full = Dict::new()
            .with("request_id", "1f")
            .with("resource_id", "env")
            .with("operation_id", "0123456789abcdef0123456789abcdef");
        let absent = Dict::new().with("request_id", "2");
        let odd = Dict::new()
            .with("operation_id", Value::Null)
            .with("request_id", "quote\" and é")
            .with("resource_id", 7i64);
        let results = [
            Value::Null,
            Value::from(1.5),
            Value::Dict(
                Dict::new()
                    .with(
                        "value",
                        Value::Tuple(vec![Value::from(0.25), Value::from(true)]),
                    )
                    .with("descriptors", Value::List(Vec::new())),
            ),
        ];
        for request in [&full, &absent, &odd] {
            for result in &results {
                let mut r = result.clone();
                let kept = encode_response(&session, request, &mut r, &[]).unwrap();
                assert_eq!(
                    kept,
                    plain(&session, request, result),
                    "{request:?} {result:?}"
                );
            }
        }
    }
}
