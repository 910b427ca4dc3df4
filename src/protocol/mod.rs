//! Protocol messages as plain Rust data: requests, responses, errors,
//! snapshots and the stable error codes. Conversions to and from the value
//! tree live here; nothing here touches bytes or sockets.
//!
//! Files: `error.rs` (the stable error codes, a response's error member),
//! `ops.rs` (operations, control modes, component operation kinds),
//! `methods.rs` (the methods each resource kind exports), `command.rs` (a
//! request read once into its op and members), `head.rs` (the leading
//! members of requests and responses), `attributes.rs` (our servers'
//! attribute extension, carried by `call`).

pub mod attributes;
mod command;
mod error;
mod head;
mod methods;
mod ops;

pub(crate) use command::Command;
pub use command::Request;
pub(crate) use error::err;
pub use error::{ErrorCode, ProtocolError};
pub use head::{request_envelope, response_envelope, PROTOCOL_VERSION};
pub(crate) use head::{request_head, response_head};
pub use methods::{Method, ResourceKind};
pub use ops::{Mode, Op, OperationKind};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Value;

    #[test]
    fn error_codes_round_trip_through_their_wire_spelling() {
        for code in ErrorCode::KNOWN {
            assert_eq!(ErrorCode::new(code.as_str()), code);
            assert_eq!(code.to_string(), code.as_str());
        }
        assert_eq!(ErrorCode::InvalidRequest.as_str(), "invalid_request");
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
