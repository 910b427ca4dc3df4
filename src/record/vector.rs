//! Recording on the learner's side ([`VectorRecorder`](super::VectorRecorder)): the transitions a vector env's
//! sub-envs went through, as the learner saw them, one `ReplayBuffer` per
//! sub-env (`DIR/<index>/`, the sub-env's index in the vector env), in the
//! layout and with the guarantees of the host's recording (see the
//! [module docs](super)) but without `context` (a vector env's learner
//! never sees one).
//!
//! The learner's thread hands over each vector call's results, stacked, in
//! one [`VectorRecord`] (arrays shared, not copied); the writer thread
//! splits them into rows and writes them. What a row is comes from the
//! vector env's autoreset mode, told row by row ([`RowKind`]): a row reset
//! in the call (a `reset`, or `NEXT_STEP`'s autoreset, whose action was
//! ignored) starts an episode and is never a transition; a stepped row is
//! the transition from the sub-env's previous observation to this one (to
//! `final_obs` in `SAME_STEP` mode, the row's observation then starting
//! the next episode).

use super::json;
use super::slot::{end_episode, Slot};
use super::stats::RecordStats;
use crate::codec::Value;
use crate::host::Space;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::buffer::BufferDir;
use super::format::RecordFormat;
use super::transition::{self, Layout, Transition};

/// What one row of a [`VectorRecord`] is.
#[derive(Debug, Clone)]
pub enum RowKind {
    /// Not recorded (an env that was not part of the call).
    Skip,
    /// The sub-env was reset: its observation starts an episode (an open
    /// episode is committed as it stands).
    Reset,
    /// The sub-env was stepped with row `row` of `actions` (the actions
    /// as sent, stacked; shared, not copied): a transition to the row's
    /// observation.
    Step {
        /// The actions of the call that stepped the sub-env, stacked.
        actions: Value,
        /// The sub-env's row in `actions`.
        row: usize,
    },
    /// `SAME_STEP` mode: the sub-env was stepped (as [`RowKind::Step`]),
    /// ended an episode with `final_obs` and was reset in the same call;
    /// the row's observation starts the next episode.
    StepFinal {
        /// The actions of the call that stepped the sub-env, stacked.
        actions: Value,
        /// The sub-env's row in `actions`.
        row: usize,
        /// The episode's last observation.
        final_obs: Value,
    },
    /// The sub-env failed: its open episode is committed as it stands and
    /// nothing more is recorded until it is reset.
    Failed,
}

/// One vector call's results, as the learner got them.
#[derive(Debug, Clone)]
pub struct VectorRecord {
    /// The sub-env of each row.
    pub env_id: Vec<usize>,
    /// The observations, stacked along the first axis (one row per
    /// entry of `env_id`).
    pub observation: Value,
    /// Each row's reward (ignored for rows that are not steps).
    pub reward: Vec<f64>,
    /// Each row's `terminated`.
    pub terminated: Vec<bool>,
    /// Each row's `truncated`.
    pub truncated: Vec<bool>,
    /// What each row is.
    pub kind: Vec<RowKind>,
}

impl VectorRecord {
    /// Whether a row ends an episode (a step that terminates or truncates,
    /// a reset, a failure, `SAME_STEP`'s final observation): the writer is
    /// woken for it at once.
    pub(crate) fn ends_episodes(&self) -> bool {
        self.terminated.iter().chain(&self.truncated).any(|&b| b)
            || self.kind.iter().any(|k| {
                matches!(
                    k,
                    RowKind::Reset | RowKind::Failed | RowKind::StepFinal { .. }
                )
            })
    }
}

/// The state of a vector env's recording, on the writer thread.
pub(crate) struct VectorRecording {
    layout: Layout,
    slots: Vec<Slot>,
    /// Whether a failure was already logged.
    failed: bool,
}

impl VectorRecording {
    /// Creates (or continues, for the same transition space) one buffer per
    /// sub-env under `dir`; `observation` and `action` are one sub-env's
    /// spaces.
    pub(crate) fn open(
        dir: &Path,
        observation: Space,
        action: Space,
        num_envs: usize,
        format: &RecordFormat,
    ) -> Result<VectorRecording, String> {
        let layout = Layout::new(observation, action, None)?;
        let space_json = json::to_string(&layout.space.to_value());
        let leaves = layout.leaf_specs();
        let mut slots = Vec::with_capacity(num_envs);
        for i in 0..num_envs {
            let path = dir.join(i.to_string());
            let buffer = BufferDir::open(
                &path,
                &layout.keys,
                &leaves,
                space_json.clone(),
                layout.flat,
                format,
            )
            .map_err(|e| format!("{}: {e}", path.display()))?;
            slots.push(Slot {
                buffer,
                obs: None,
                context: None,
            });
        }
        Ok(VectorRecording {
            layout,
            slots,
            failed: false,
        })
    }
}

/// What the learner's thread tells the writer.
pub(crate) enum VectorEvent {
    Open(Box<VectorRecording>),
    Record(VectorRecord),
}

impl VectorRecording {
    /// Writes one call's rows.
    pub(super) fn record(&mut self, r: &VectorRecord, stats: &RecordStats) {
        for (k, kind) in r.kind.iter().enumerate() {
            let outcome = self.row(r, k, kind, stats);
            if let Err(e) = outcome {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                if !self.failed {
                    self.failed = true;
                    tracing::warn!(error = %e, "recording: a vector step could not be recorded");
                }
            }
        }
    }

    fn row(
        &mut self,
        r: &VectorRecord,
        k: usize,
        kind: &RowKind,
        stats: &RecordStats,
    ) -> Result<(), String> {
        let Some(&env) = r.env_id.get(k) else {
            return Err(format!("row {k} names no env"));
        };
        let Some(slot) = self.slots.get_mut(env) else {
            return Err(format!("env {env} is beyond the recording"));
        };
        let space = &self.layout.observation;
        match kind {
            RowKind::Skip => Ok(()),
            RowKind::Failed => {
                slot.obs = None;
                end_episode(slot, stats)
            }
            RowKind::Reset => {
                end_episode(slot, stats)?;
                slot.obs = Some(transition::row(space, &r.observation, k, "obs")?);
                Ok(())
            }
            RowKind::Step { actions, row } | RowKind::StepFinal { actions, row, .. } => {
                let action = transition::row(&self.layout.action, actions, *row, "action")?;
                let obs = transition::row(space, &r.observation, k, "obs")?;
                let (next_obs, restart) = match kind {
                    RowKind::StepFinal { final_obs, .. } => (final_obs.clone(), Some(obs)),
                    _ => (obs, None),
                };
                let Some(prev) = slot.obs.take() else {
                    // Stepped without a reset the recording saw (it failed
                    // before): nothing to pair it with.
                    slot.obs = restart.or(Some(next_obs));
                    return Ok(());
                };
                let (terminated, truncated) = (
                    r.terminated.get(k).copied().unwrap_or(false),
                    r.truncated.get(k).copied().unwrap_or(false),
                );
                let t = Transition {
                    obs: prev,
                    action,
                    reward: Value::Float(r.reward.get(k).copied().unwrap_or(0.0)),
                    terminated: Value::Bool(terminated),
                    truncated: Value::Bool(truncated),
                    next_obs,
                    context: None,
                };
                let appended = super::slot::append(slot, &self.layout, &t, stats);
                slot.obs = restart.or(Some(t.next_obs));
                appended?;
                if terminated || truncated {
                    end_episode(slot, stats)?;
                }
                Ok(())
            }
        }
    }

    /// The sub-envs' buffers.
    pub(super) fn buffers(&mut self) -> impl Iterator<Item = &mut BufferDir> {
        self.slots.iter_mut().map(|slot| &mut slot.buffer)
    }

    /// Commits every open episode.
    pub(super) fn close(&mut self, stats: &RecordStats) {
        for slot in &mut self.slots {
            slot.obs = None;
            if let Err(e) = end_episode(slot, stats) {
                tracing::error!(error = %e, "recording: commit failed");
            }
        }
    }
}
