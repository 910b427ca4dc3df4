//! A decoded request read once into its operation and members
//! ([`Command`]), and the request as received ([`Request`]).

use super::ops::{Mode, Op, OperationKind};
use crate::codec::{Dict, Value};

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
