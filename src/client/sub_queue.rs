//! The per-subscription mailbox the connection's reader task feeds: the
//! latest undelivered snapshot (or the error that ended the stream) and the
//! waker of the task waiting on it.

use super::error::ClientError;
use crate::codec::Dict;
use crate::protocol::{ErrorCode, ProtocolError};
use parking_lot::Mutex;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub(super) struct SubState {
    pub(super) latest: Option<Dict>,
    pub(super) error: Option<ClientError>,
    /// Ended locally: unsubscribed, released with its domain's streams, or
    /// the session closed.
    pub(super) closed: bool,
    /// The subscription error has been delivered.
    pub(super) ended: bool,
    pub(super) waker: Option<Waker>,
}

/// The part of a subscription the client's reader task feeds.
pub(crate) struct SubShared {
    pub id: Arc<str>,
    pub resource_id: Arc<str>,
    pub(super) state: Mutex<SubState>,
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
                        ProtocolError::new(ErrorCode::SnapshotError, "subscription error")
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

    pub(super) fn poll_message(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Dict, ClientError>>> {
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
