//! What the host's and the learner's recordings share: one
//! (sub-)env's buffer with the observation its next transition starts from.

use super::buffer::{BufferDir, Ended};
use super::stats::RecordStats;
use crate::codec::Value;
use std::sync::atomic::Ordering;

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
