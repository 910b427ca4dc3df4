//! What the host's and the learner's recordings share: one
//! (sub-)env's buffer with the observation its next transition starts from.

use super::buffer::{Appended, BufferDir, Ended};
use super::stats::RecordStats;
use super::transition::{Layout, Transition};
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
            let committed = slot.buffer.newly_committed();
            stats.transitions.fetch_add(committed, Ordering::Relaxed);
        }
        Ended::Staged => stats.staged.store(true, Ordering::Relaxed),
    }
    Ok(())
}

/// Appends transition `t` (laid out by `layout`) to the slot's buffer (it
/// is counted once its episode is committed). A flattened element in an external format is written
/// straight into the rows waiting ([`Layout::push_flat`]); otherwise its
/// leaves are built ([`Layout::leaves`]). An element that does not fit its
/// space is an error and nothing more; a failed write also aborts the open
/// episode.
pub(crate) fn append(
    slot: &mut Slot,
    layout: &Layout,
    t: &Transition,
    stats: &RecordStats,
) -> Result<(), String> {
    if slot.buffer.takes_flat_rows() {
        match slot
            .buffer
            .append_flat(|out| layout.push_flat(t, out), stats)
        {
            Ok(()) => {}
            Err(Appended::Element(e)) => return Err(e),
            Err(Appended::Io(e)) => {
                slot.buffer.abort_segment();
                return Err(e.to_string());
            }
        }
    } else {
        let leaves = layout.leaves(t)?;
        if let Err(e) = slot.buffer.append(&leaves, stats) {
            slot.buffer.abort_segment();
            return Err(e.to_string());
        }
    }
    Ok(())
}
