//! What the host's and the learner's recordings share: the counters and one
//! (sub-)env's buffer with the observation its next transition starts from.

use super::buffer::{BufferDir, Ended};
use crate::codec::Value;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

/// One sub-env (or the env): its buffer and the observation and context
/// the next transition starts from.
pub(crate) struct Slot {
    pub buffer: BufferDir,
    pub obs: Option<Value>,
    pub context: Option<Value>,
}

/// Ends the slot's open episode, if any, and commits it (or stages it for
/// the writer's next batched commit: `buffer::commit_staged`).
pub(crate) fn end_episode(slot: &mut Slot, stats: &RecordStats) -> Result<(), String> {
    match slot.buffer.end_segment().map_err(|e| e.to_string())? {
        Ended::Nothing => {}
        Ended::Committed => {
            stats.episodes.fetch_add(1, Ordering::Relaxed);
        }
        Ended::Staged => stats.staged.store(true, Ordering::Relaxed),
    }
    Ok(())
}
