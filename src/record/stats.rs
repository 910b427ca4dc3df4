//! A recorder's counters, shared by the host's and the learner's recordings
//! and by the buffers they write.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters of a recorder.
#[derive(Debug, Default)]
pub struct RecordStats {
    /// Transitions committed (one per sub-env step whose episode's
    /// `metadata.json` was replaced: what `ReplayBuffer.load_from` reads;
    /// transitions lost to a failed write are never counted).
    pub transitions: AtomicU64,
    /// Episodes committed.
    pub episodes: AtomicU64,
    /// Times a domain thread (or the learner) waited for room in the queue.
    pub queue_waits: AtomicU64,
    /// Events that could not be recorded and commits that failed (logged).
    pub errors: AtomicU64,
    /// The first failure's description (see [`RecordStats::fail`]).
    first_error: Mutex<Option<String>>,
    /// Whether an episode was staged since the writer last committed the
    /// staged ones (external formats, see `buffer::Ended::Staged`).
    pub(crate) staged: AtomicBool,
}

impl RecordStats {
    /// Counts a failure in `errors`, keeping its description when it is the
    /// first.
    pub(crate) fn fail(&self, error: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_error.lock();
        if first.is_none() {
            *first = Some(error.to_string());
        }
    }

    /// The first failure's description, if anything failed.
    pub fn first_error(&self) -> Option<String> {
        self.first_error.lock().clone()
    }
}
