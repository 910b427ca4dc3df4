//! Observer subscriptions: latest-value streams of boundary snapshots.

use super::connection::Client;
use super::descriptor::Descriptor;
use super::error::{ClientError, ClientResult, ProtocolViolation};
use super::sub_queue::SubShared;
use crate::codec::{Dict, Value};
use crate::protocol::Op;
use futures_util::Stream;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// One published boundary, as an observer receives it.
#[derive(Debug, Clone)]
pub struct SnapshotEvent {
    /// The subscription that received it.
    pub subscription_id: String,
    /// The observed resource.
    pub resource_id: String,
    /// The operation (or env call) that completed the boundary.
    pub operation_id: Option<String>,
    /// `reset`, `reload` or `step`.
    pub kind: String,
    /// The boundary sequence of the domain (starts at 1; gaps are allowed).
    pub sequence: u64,
    /// Server wall-clock time of the boundary, in nanoseconds.
    pub timestamp_ns: i64,
    /// The descriptor revision at the boundary.
    pub descriptor_revision: u64,
    /// The resource's descriptor at the boundary (`None` when the event had
    /// none).
    pub descriptor: Option<Arc<Descriptor>>,
    /// The captured fields (unavailable fields are absent).
    pub data: Dict,
}

/// A latest-value stream of a resource's boundary snapshots.
///
/// Only the newest undelivered snapshot is kept (the server also replaces
/// undelivered snapshots): a slow consumer sees the latest boundary, with a
/// gap in `sequence`. The stream ends after [`Subscription::unsubscribe`],
/// after a subscription error (delivered once as
/// [`ClientError::Remote`] with code `snapshot_error`) and when the session
/// closes (the reason is delivered once as an error). Dropping a
/// subscription unsubscribes without waiting for the reply.
///
/// Receiving snapshots refreshes the client's descriptors and invalidates
/// cached boundary fields older than the observed boundary, but never fills
/// the controller's cache.
///
/// It is also a [`Stream`] of `ClientResult<SnapshotEvent>`; since the
/// inherent [`Subscription::next`] takes a timeout, call the stream's as
/// `StreamExt::next(&mut subscription)` (or use any stream combinator).
pub struct Subscription {
    client: Client,
    shared: Arc<SubShared>,
}

impl Subscription {
    pub(crate) fn new(client: Client, shared: Arc<SubShared>) -> Subscription {
        Subscription { client, shared }
    }

    /// The subscription ID.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The observed resource.
    pub fn resource_id(&self) -> &str {
        &self.shared.resource_id
    }

    fn poll_event(&self, cx: &mut Context<'_>) -> Poll<Option<ClientResult<SnapshotEvent>>> {
        self.shared
            .poll_message(cx)
            .map(|m| m.map(|m| m.and_then(|m| self.parse(m))))
    }

    fn parse(&self, mut m: Dict) -> ClientResult<SnapshotEvent> {
        let text = |m: &Dict, key: &str| m.get(key).and_then(Value::as_str).map(str::to_string);
        let number = |m: &Dict, key: &str| {
            m.get(key).and_then(Value::as_u64).ok_or_else(|| {
                ClientError::Protocol(ProtocolViolation::SnapshotField {
                    field: key.to_string(),
                })
            })
        };
        let descriptor = match m.remove("descriptor") {
            Some(d @ Value::Dict(_)) => Some(self.client.shared.apply_observed(d)?),
            _ => None,
        };
        let data = match m.remove("data") {
            Some(Value::Dict(d)) => d,
            _ => Dict::new(),
        };
        Ok(SnapshotEvent {
            subscription_id: text(&m, "subscription_id").unwrap_or_default(),
            resource_id: text(&m, "resource_id").unwrap_or_default(),
            operation_id: text(&m, "operation_id"),
            kind: text(&m, "kind").unwrap_or_default(),
            sequence: number(&m, "sequence")?,
            timestamp_ns: m.get("timestamp_ns").and_then(Value::as_i64).unwrap_or(0),
            descriptor_revision: number(&m, "descriptor_revision")?,
            descriptor,
            data,
        })
    }

    /// The next snapshot: `Ok(Some(..))`, `Ok(None)` once the stream has
    /// ended, or an error (a subscription error, the session's closing, or
    /// [`ClientError::Timeout`] when nothing arrived within `timeout`; a
    /// timeout here does not affect the connection).
    pub async fn next(&mut self, timeout: Option<Duration>) -> ClientResult<Option<SnapshotEvent>> {
        let wait = std::future::poll_fn(|cx| self.poll_event(cx));
        let outcome = match timeout {
            Some(limit) => tokio::time::timeout(limit, wait)
                .await
                .map_err(|_| ClientError::Timeout(limit))?,
            None => wait.await,
        };
        outcome.transpose()
    }

    /// Whether the stream has ended locally (unsubscribed or closed session).
    pub fn is_closed(&self) -> bool {
        let st = self.shared.state.lock();
        st.closed || st.ended
    }

    /// Unsubscribes and waits for the server's acknowledgement. Pending
    /// snapshots are discarded.
    pub async fn unsubscribe(self) -> ClientResult<()> {
        let shared = self.shared.clone();
        let client = self.client.clone();
        // Mark closed first so that Drop sends nothing.
        let was_open = shared.finish(None);
        drop(self);
        if was_open {
            client.unsubscribe_remote(&shared).await
        } else {
            Ok(())
        }
    }
}

impl Stream for Subscription {
    type Item = ClientResult<SnapshotEvent>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.poll_event(cx)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.shared.finish(None) {
            let shared = &self.client.shared;
            shared.state.lock().subscriptions.remove(&self.shared.id);
            let id = Value::from(&*self.shared.id);
            shared.send_detached(
                Op::Unsubscribe,
                &self.shared.resource_id,
                &[("subscription_id", &id)],
                false,
            );
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.shared.id)
            .field("resource_id", &self.shared.resource_id)
            .finish()
    }
}

impl Client {
    /// Subscribes to a resource's boundary snapshots (`fields`: `None` for
    /// the server's default selection). Observers need no control.
    pub async fn subscribe(
        &self,
        resource_id: &str,
        fields: Option<&[&str]>,
    ) -> ClientResult<Subscription> {
        self.ensure_descriptor(resource_id).await?;
        let id: Arc<str> = Arc::from(self.shared.fresh_id());
        let shared = SubShared::new(id.clone(), Arc::from(resource_id));
        self.shared
            .state
            .lock()
            .subscriptions
            .insert(id.clone(), shared.clone());
        let id_value = Value::from(&*id);
        let fields = fields.map(|f| Value::list(f.iter().copied()));
        let mut params: Vec<(&str, &Value)> = vec![("subscription_id", &id_value)];
        if let Some(f) = &fields {
            params.push(("fields", f));
        }
        match self
            .shared
            .request(Op::Subscribe, Some(resource_id), &params, false)
            .await
        {
            Ok(_) => Ok(Subscription::new(self.clone(), shared)),
            Err(e) => {
                self.shared.state.lock().subscriptions.remove(&id);
                shared.finish(None);
                Err(e)
            }
        }
    }
}
