//! Observer subscriptions: latest-value streams of boundary snapshots.

use super::descriptor::Descriptor;
use super::error::{ClientError, ClientResult};
use super::Client;
use crate::codec::{Dict, Value};
use crate::protocol::{ErrorCode, Op, ProtocolError};
use futures_util::Stream;
use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
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

#[derive(Default)]
struct SubState {
    latest: Option<Dict>,
    error: Option<ClientError>,
    /// Ended locally: unsubscribed, released with its domain's streams, or
    /// the session closed.
    closed: bool,
    /// The subscription error has been delivered.
    ended: bool,
    waker: Option<Waker>,
}

/// The part of a subscription the client's reader task feeds.
pub(crate) struct SubShared {
    pub id: Arc<str>,
    pub resource_id: Arc<str>,
    state: Mutex<SubState>,
}

impl SubShared {
    pub(crate) fn new(id: Arc<str>, resource_id: Arc<str>) -> Arc<SubShared> {
        Arc::new(SubShared {
            id,
            resource_id,
            state: Mutex::new(SubState::default()),
        })
    }

    /// A snapshot replaces the pending one (latest wins); a subscription
    /// error ends the stream after it is delivered.
    pub(crate) fn push(&self, mut message: Dict, is_error: bool) {
        let waker = {
            let mut st = self.state.lock();
            if st.closed || st.ended {
                return;
            }
            if is_error {
                let error = message
                    .remove("error")
                    .as_ref()
                    .and_then(ProtocolError::from_value)
                    .unwrap_or_else(|| {
                        ProtocolError::new(ErrorCode::SNAPSHOT_ERROR, "subscription error")
                    });
                st.error = Some(ClientError::Remote(error));
                st.latest = None;
            } else {
                st.latest = Some(message);
            }
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Ends the subscription locally; `error` (a closed session) is
    /// delivered before the end. Returns whether it was still open.
    pub(crate) fn finish(&self, error: Option<ClientError>) -> bool {
        let (was_open, waker) = {
            let mut st = self.state.lock();
            let was_open = !st.closed;
            st.closed = true;
            st.latest = None;
            if was_open && !st.ended {
                st.error = error;
            }
            (was_open, st.waker.take())
        };
        if let Some(w) = waker {
            w.wake();
        }
        was_open
    }

    fn poll_message(&self, cx: &mut Context<'_>) -> Poll<Option<Result<Dict, ClientError>>> {
        let mut st = self.state.lock();
        if let Some(e) = st.error.take() {
            st.ended = true;
            return Poll::Ready(Some(Err(e)));
        }
        if st.closed || st.ended {
            return Poll::Ready(None);
        }
        match st.latest.take() {
            Some(m) => Poll::Ready(Some(Ok(m))),
            None => {
                match &st.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => st.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
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
            m.get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| ClientError::Protocol(format!("a snapshot without a valid {key}")))
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
