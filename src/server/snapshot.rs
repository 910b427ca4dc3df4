//! Observer snapshots: what a boundary publishes, and its lazy encoding.
//!
//! A domain worker captures each (resource, field) once per boundary and
//! hands every subscription a [`PendingSnapshot`] that shares the captured
//! values. The subscriber's session writer encodes it only when it is about to
//! be sent, so a slow observer whose snapshot is replaced never costs an
//! encode, and the controller's worker never waits for observers. The part of
//! the message every observer of a (resource, fields) pair has in common —
//! `data` and `descriptor`, with their attachments — is encoded once, by the
//! first writer that needs it; each observer then adds only its own leading
//! members, and the attachments are written from the shared buffer.

use crate::codec::{Codec, Dict, Fragment, Value};
use crate::protocol::PROTOCOL_VERSION;
use bytes::Bytes;
use std::sync::{Arc, OnceLock};

/// What identifies a publication boundary.
#[derive(Debug)]
pub(crate) struct Boundary {
    pub operation_id: Value,
    pub kind: Value,
    pub sequence: u64,
    pub timestamp_ns: i64,
    pub revision: u64,
}

/// What every observer of one (resource, fields) pair receives at a
/// boundary: `data` and `descriptor`, encoded at most once.
pub(crate) struct SharedTail {
    pub data: Value,
    pub descriptor: Value,
    encoded: OnceLock<Result<Fragment, String>>,
}

impl SharedTail {
    pub(crate) fn new(data: Value, descriptor: Value) -> SharedTail {
        SharedTail {
            data,
            descriptor,
            encoded: OnceLock::new(),
        }
    }

    fn fragment(&self) -> &Result<Fragment, String> {
        self.encoded.get_or_init(|| {
            Codec::new(usize::MAX)
                .unwrap_or_default()
                .encode_fragment(&[("data", &self.data), ("descriptor", &self.descriptor)])
                .map_err(|e| e.to_string())
        })
    }
}

/// A snapshot waiting in a session's latest-wins slot.
pub(crate) struct PendingSnapshot {
    /// The index of the publishing domain (told when the subscription ends).
    pub domain: usize,
    pub subscription_id: Arc<str>,
    pub resource_id: Arc<str>,
    pub boundary: Arc<Boundary>,
    pub tail: Arc<SharedTail>,
}

/// What a pending snapshot becomes for one session.
pub(crate) enum Encoded {
    /// The envelope up to the end of its header, and the (shared) attachments.
    Snapshot(Bytes, Bytes),
    /// The `subscription_error` to send instead (over the session's limit):
    /// the subscription ends.
    Error(Bytes),
}

impl PendingSnapshot {
    fn header(&self, session_id: &str, kind: &'static str) -> [(&'static str, Value); 10] {
        header(
            session_id,
            kind,
            &self.subscription_id,
            &self.resource_id,
            &self.boundary,
        )
    }

    /// The snapshot message for a session with this codec, or the error to
    /// send instead; `Err` when not even the error fits the session's limit
    /// (the session must close).
    pub(crate) fn encode(&self, codec: &Codec, session_id: &str) -> Result<Encoded, String> {
        let failed = |message: &str| {
            let head = self.header(session_id, "subscription_error");
            subscription_error(codec, head, message).map(Encoded::Error)
        };
        let tail = match self.tail.fragment() {
            Ok(tail) => tail,
            Err(e) => return failed(e),
        };
        let head = self.header(session_id, "snapshot");
        let entries: Vec<(&str, &Value)> = head.iter().map(|(k, v)| (*k, v)).collect();
        match codec.assemble(&entries, tail) {
            Ok((header, attachments)) => Ok(Encoded::Snapshot(Bytes::from(header), attachments)),
            Err(e) => failed(&e.to_string()),
        }
    }
}

/// Encodes a `subscription_error` with the given correlation members; `Err`
/// when not even that fits the session's limit.
pub(crate) fn subscription_error(
    codec: &Codec,
    head: [(&'static str, Value); 10],
    message: &str,
) -> Result<Bytes, String> {
    let mut error = Dict::with_capacity(2);
    error.insert("code", crate::protocol::ErrorCode::SnapshotError.as_str());
    error.insert("message", message.chars().take(512).collect::<String>());
    let error = Value::Dict(error);
    let mut entries: Vec<(&str, &Value)> = head.iter().map(|(k, v)| (*k, v)).collect();
    entries.push(("error", &error));
    codec
        .encode_entries(&entries)
        .map(Bytes::from)
        .map_err(|e| format!("cannot encode even a subscription_error: {e}"))
}

/// The correlation members of a snapshot or subscription error.
pub(crate) fn header(
    session_id: &str,
    kind: &'static str,
    subscription_id: &str,
    resource_id: &str,
    boundary: &Boundary,
) -> [(&'static str, Value); 10] {
    [
        ("version", Value::Int(PROTOCOL_VERSION)),
        ("type", Value::from(kind)),
        ("session_id", Value::from(session_id)),
        ("subscription_id", Value::from(subscription_id)),
        ("resource_id", Value::from(resource_id)),
        ("operation_id", boundary.operation_id.clone()),
        ("kind", boundary.kind.clone()),
        ("sequence", Value::from(boundary.sequence)),
        ("timestamp_ns", Value::Int(boundary.timestamp_ns)),
        ("descriptor_revision", Value::from(boundary.revision)),
    ]
}
