//! What the viewer and its page say to each other: the page's commands,
//! and the writer of the viewer's messages (JSON headers, binary frames).

use super::frame::Frame;
use crate::client::{ClientError, Descriptor};
use crate::transport::ws;
use crate::transport::TransportError;
use serde_json::{json, Value as Json};
use std::sync::Arc;
use tokio::sync::Mutex;

/// Time a page has to take one message.
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The page's side of a tab: messages are written whole under the lock.
#[derive(Clone)]
pub(super) struct PageWriter(pub(super) Arc<Mutex<ws::WsWriter>>);

impl PageWriter {
    /// Sends one message; a page that does not take it within
    /// [`WRITE_TIMEOUT`] is treated as gone (its tab ends), so that no
    /// task waits forever on a browser that stopped reading.
    pub(super) async fn send(&self, header: &Json, frame: Frame) -> Result<(), TransportError> {
        let (head, blob) = frame.finish(header);
        let write = async {
            let mut w = self.0.lock().await;
            w.feed_parts(&head, &blob).await?;
            w.flush().await
        };
        tokio::time::timeout(WRITE_TIMEOUT, write)
            .await
            .unwrap_or(Err(TransportError::Closed))
    }

    pub(super) async fn json(&self, header: Json) -> Result<(), TransportError> {
        self.send(&header, Frame::new()).await
    }
}

/// One page command.
#[derive(Debug)]
pub(super) enum Command {
    Subscribe {
        panel: u64,
        resource: String,
        fields: Option<Vec<String>>,
    },
    Unsubscribe {
        panel: u64,
    },
    Ready {
        panel: u64,
    },
    Render {
        panel: u64,
        resource: String,
    },
    Refresh,
}

pub(super) fn parse_command(message: &[u8]) -> Result<Command, String> {
    let v: Json = serde_json::from_slice(message).map_err(|e| format!("invalid JSON: {e}"))?;
    let op = v.get("op").and_then(Json::as_str).unwrap_or("");
    let panel = || {
        v.get("panel")
            .and_then(Json::as_u64)
            .ok_or_else(|| format!("{op} needs a numeric panel"))
    };
    let resource = || {
        v.get("resource")
            .and_then(Json::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("{op} needs a resource"))
    };
    Ok(match op {
        "subscribe" => Command::Subscribe {
            panel: panel()?,
            resource: resource()?,
            fields: match v.get("fields") {
                Some(Json::Array(items)) => Some(
                    items
                        .iter()
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect(),
                ),
                _ => None,
            },
        },
        "unsubscribe" => Command::Unsubscribe { panel: panel()? },
        "ready" => Command::Ready { panel: panel()? },
        "render" => Command::Render {
            panel: panel()?,
            resource: resource()?,
        },
        "refresh" => Command::Refresh,
        other => return Err(format!("unknown op {other:?}")),
    })
}

pub(super) fn error_json(e: &ClientError) -> (String, String) {
    match e {
        ClientError::Remote(p) => (p.code.as_str().to_string(), p.message.clone()),
        other => (other.code().to_string(), other.to_string()),
    }
}

pub(super) fn descriptor_json(frame: &mut Frame, d: &Descriptor) -> Json {
    frame.value(&crate::Value::Dict(d.raw().clone()))
}

/// Header members of a snapshot message.
pub(super) fn snapshot_header(
    kind: &str,
    panel: u64,
    event: &crate::client::SnapshotEvent,
    frame: &mut Frame,
) -> Json {
    let data = frame.value(&crate::Value::Dict(event.data.clone()));
    let descriptor = event
        .descriptor
        .as_ref()
        .map(|d| descriptor_json(frame, d))
        .unwrap_or(Json::Null);
    json!({
        "type": kind,
        "panel": panel,
        "resource": event.resource_id,
        "kind": event.kind,
        "sequence": event.sequence,
        "timestamp_ns": event.timestamp_ns,
        "revision": event.descriptor_revision,
        "operation_id": event.operation_id,
        "data": data,
        "descriptor": descriptor,
    })
}
