//! Writing whole server frames from any thread, without waiting: a domain
//! worker's response goes straight to the socket when it can take it.

use super::{frame, Role, Shared, Sink};
use crate::transport::frame::OP_BINARY;
use bytes::Bytes;
use std::sync::Arc;

/// What became of a message offered to [`WsDirect::try_send`].
pub(crate) enum Direct {
    /// Written whole.
    Sent,
    /// Partly written: these framed bytes must be written next, before
    /// anything else.
    Partial(Bytes),
    /// Nothing written (socket full, or the writer busy): queue it.
    NotNow,
}

/// Writes whole server frames without waiting, from any thread (a domain
/// worker answering a request), when the socket can take them at once; this
/// saves waking the writer task for the common small response.
#[derive(Clone)]
pub(crate) struct WsDirect {
    pub(super) shared: Arc<Shared>,
}

impl WsDirect {
    /// Tries to write one binary message now (one `writev`).
    pub(crate) fn try_send(&self, message: &[u8]) -> Direct {
        self.try_send_all(&[message])
    }

    /// Tries to write binary messages now, each as one frame, all in one
    /// `writev` (at most [`MAX_DIRECT_BATCH`]; more are refused). Nothing is
    /// allocated unless the socket takes only part of them.
    pub(crate) fn try_send_all<M: AsRef<[u8]>>(&self, messages: &[M]) -> Direct {
        if self.shared.role != Role::Server
            || messages.is_empty()
            || messages.len() > MAX_DIRECT_BATCH
        {
            return Direct::NotNow;
        }
        let Ok(mut w) = self.shared.write.try_lock() else {
            return Direct::NotNow;
        };
        if w.torn || w.close_sent {
            return Direct::NotNow;
        }
        // Arrays as small as the common case needs (one reply): zeroing
        // room for a whole batch would cost a lone reply more than its
        // framing.
        if messages.len() == 1 {
            write_frames::<1, 2, M>(&mut w, messages)
        } else {
            write_frames::<MAX_DIRECT_BATCH, { 2 * MAX_DIRECT_BATCH }, M>(&mut w, messages)
        }
    }
}

/// Writes up to `N` messages as binary frames in one `writev` (`S` = 2 `N`
/// slices: each frame's header and payload) without waiting.
fn write_frames<const N: usize, const S: usize, M: AsRef<[u8]>>(
    w: &mut Sink,
    messages: &[M],
) -> Direct {
    let mut headers = [([0u8; 10], 0usize); N];
    for (header, m) in headers.iter_mut().zip(messages) {
        *header = frame::header(OP_BINARY, m.as_ref().len());
    }
    let mut slices = [std::io::IoSlice::new(&[]); S];
    let mut total = 0;
    for (i, ((header, n), m)) in headers.iter().zip(messages).enumerate() {
        slices[2 * i] = std::io::IoSlice::new(&header[..*n]);
        slices[2 * i + 1] = std::io::IoSlice::new(m.as_ref());
        total += n + m.as_ref().len();
    }
    let parts = &slices[..2 * messages.len().min(N)];
    match w.half.try_write_vectored(parts) {
        Ok(0) | Err(_) => Direct::NotNow,
        Ok(k) if k >= total => Direct::Sent,
        Ok(mut k) => {
            w.torn = true;
            // The framed bytes after the first `k`.
            let mut rest = Vec::with_capacity(total - k);
            for part in parts {
                if k >= part.len() {
                    k -= part.len();
                } else {
                    rest.extend_from_slice(&part[k..]);
                    k = 0;
                }
            }
            Direct::Partial(Bytes::from(rest))
        }
    }
}

/// Most messages [`WsDirect::try_send_all`] writes at once (twice as many
/// slices: well under every system's `IOV_MAX`).
pub(crate) const MAX_DIRECT_BATCH: usize = 64;
