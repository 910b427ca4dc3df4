//! `inspect`'s protocol checks: beyond codec validity, whether a decoded
//! envelope is a well-formed protocol v1 message.

use crate::codec::Value;
use crate::protocol::{ErrorCode, Op, PROTOCOL_VERSION};

/// The protocol-level problems of a decoded envelope (empty when it is a
/// well-formed v1 message): version, type, op, and the members its type
/// requires.
pub fn protocol_problems(message: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Value::Dict(d) = message else {
        return vec![format!(
            "the envelope's value is a {}, not a dict: protocol messages are dicts",
            message.type_name()
        )];
    };
    match d.get("version") {
        Some(Value::Int(v)) if *v == PROTOCOL_VERSION => {}
        Some(Value::Int(v)) => problems.push(format!(
            "version is {v}: protocol v1 requires exactly {PROTOCOL_VERSION}"
        )),
        Some(other) => problems.push(format!(
            "version is a {}, not the integer {PROTOCOL_VERSION}",
            other.type_name()
        )),
        None => problems.push("the version member is missing".into()),
    }
    let require = |name: &str, problems: &mut Vec<String>| {
        if !d.contains_key(name) {
            problems.push(format!("the {name} member is missing"));
        }
    };
    let kind = d.get("type").and_then(Value::as_str);
    match kind {
        Some("request") => {
            require("request_id", &mut problems);
            require("session_id", &mut problems);
            match d.get("op").and_then(Value::as_str) {
                None => problems.push("a request needs an op (a string)".into()),
                Some(op) => match Op::parse(op) {
                    None => problems.push(format!(
                        "unknown op '{op}': v1 ops are hello, discover, describe, acquire, release, begin, complete, abort, call, subscribe, unsubscribe"
                    )),
                    Some(Op::Hello | Op::Discover) => {}
                    Some(op) => {
                        if d.get("resource_id").and_then(Value::as_str).is_none() {
                            problems.push(format!(
                                "a {} request needs a resource_id (a string)",
                                op.as_str()
                            ));
                        }
                        if op == Op::Call && d.get("method").and_then(Value::as_str).is_none() {
                            problems.push("a call request needs a method (a string)".into());
                        }
                    }
                },
            }
        }
        Some("response") => {
            require("request_id", &mut problems);
            require("session_id", &mut problems);
            require("result", &mut problems);
        }
        Some("error") => {
            require("request_id", &mut problems);
            require("session_id", &mut problems);
            error_member(d.get("error"), &mut problems);
        }
        Some("snapshot") | Some("subscription_error") => {
            for name in [
                "session_id",
                "subscription_id",
                "resource_id",
                "operation_id",
                "kind",
                "sequence",
                "timestamp_ns",
                "descriptor_revision",
                "descriptor",
            ] {
                require(name, &mut problems);
            }
            if kind == Some("snapshot") {
                require("data", &mut problems);
            } else {
                error_member(d.get("error"), &mut problems);
            }
        }
        Some(other) => problems.push(format!(
            "unknown type '{other}': v1 types are request, response, error, snapshot, subscription_error"
        )),
        None => problems.push("the type member is missing (or not a string)".into()),
    }
    problems
}

fn error_member(error: Option<&Value>, problems: &mut Vec<String>) {
    let Some(Value::Dict(e)) = error else {
        problems.push("an error message needs an error dict {code, message, uncertain}".into());
        return;
    };
    match e.get("code").and_then(Value::as_str) {
        Some(code) if ErrorCode::new(code).is_known() => {}
        Some(code) => problems.push(format!(
            "error code '{code}' is not one of the protocol's: {}",
            ErrorCode::KNOWN.map(|c| c.as_str().to_owned()).join(", ")
        )),
        None => problems.push("error.code is missing (or not a string)".into()),
    }
    if e.get("message").and_then(Value::as_str).is_none() {
        problems.push("error.message is missing (or not a string)".into());
    }
    if !matches!(e.get("uncertain"), Some(Value::Bool(_))) {
        problems.push("error.uncertain is missing (or not a boolean)".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict;

    #[test]
    fn names_protocol_problems() {
        let ok = dict! {
            "version" => 1, "type" => "request", "request_id" => "r", "session_id" => (),
            "op" => "hello", "resource_id" => (),
        };
        assert!(protocol_problems(&Value::Dict(ok)).is_empty());
        let bad = dict! { "version" => 2, "type" => "request", "op" => "jump" };
        let problems = protocol_problems(&Value::Dict(bad));
        assert!(
            problems.iter().any(|p| p.contains("version is 2")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("unknown op 'jump'")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("request_id")),
            "{problems:?}"
        );
    }
}
