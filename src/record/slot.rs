//! What the host's and the learner's recordings share: the counters and one
//! (sub-)env's buffer with the observation its next transition starts from.

use super::buffer::BufferDir;
use crate::codec::Value;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

/// One sub-env (or the env): its buffer and the observation and context
/// the next transition starts from.
pub(crate) struct Slot {
    pub buffer: BufferDir,
    pub obs: Option<Value>,
    pub context: Option<Value>,
}

/// Ends the slot's open episode, if any, and commits it.
pub(crate) fn end_episode(slot: &mut Slot, stats: &RecordStats) -> Result<(), String> {
    if slot.buffer.is_open() {
        slot.buffer.end_segment().map_err(|e| e.to_string())?;
        stats.episodes.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}
