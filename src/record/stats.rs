//! A recorder's counters, shared by the host's and the learner's recordings
//! and by the buffers they write.

use std::sync::atomic::{AtomicBool, AtomicU64};

/// Counters of a recorder.
#[derive(Debug, Default)]
pub struct RecordStats {
    /// Transitions written (one per sub-env step).
    pub transitions: AtomicU64,
    /// Episodes committed.
    pub episodes: AtomicU64,
    /// Times a domain thread (or the learner) waited for room in the queue.
    pub queue_waits: AtomicU64,
    /// Events that could not be recorded (logged).
    pub errors: AtomicU64,
    /// Whether an episode was staged since the writer last committed the
    /// staged ones (external formats, see `buffer::Ended::Staged`).
    pub(crate) staged: AtomicBool,
}
