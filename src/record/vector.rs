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

use super::buffer::{Appended, BufferDir};
use super::format::RecordFormat;
use super::straight::{self, Converted};
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
    /// Whether rows are written straight from the stacked arrays
    /// ([`straight`]: a flattened layout in an external format); each
    /// sub-env's observation its next transition starts from is then
    /// `prev` (`Slot::obs` unused).
    straight: bool,
    prev: Vec<Option<Converted>>,
    /// Row buffers to reuse.
    spare: Vec<Vec<u8>>,
    action: Vec<u8>,
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
            straight: layout.flat && slots.iter().all(|s| s.buffer.takes_flat_rows()),
            prev: (0..num_envs).map(|_| None).collect(),
            spare: Vec::new(),
            action: Vec::new(),
            layout,
            slots,
            failed: false,
        })
    }

    /// The same recording on the plain path (for the tests that compare
    /// both paths).
    #[cfg(test)]
    fn plain(mut self) -> VectorRecording {
        self.straight = false;
        self
    }
}

/// What the learner's thread tells the writer.
pub(crate) enum VectorEvent {
    Open(Box<VectorRecording>),
    Record(VectorRecord),
}

/// The sub-env row `k` of `r` belongs to, and its slot.
fn slot_of<'s>(
    slots: &'s mut [Slot],
    r: &VectorRecord,
    k: usize,
) -> Result<(usize, &'s mut Slot), String> {
    let Some(&env) = r.env_id.get(k) else {
        return Err(format!("row {k} names no env"));
    };
    match slots.get_mut(env) {
        Some(slot) => Ok((env, slot)),
        None => Err(format!("env {env} is beyond the recording")),
    }
}

/// Row `k`'s `(terminated, truncated)` (false where the call sent none).
fn flags(r: &VectorRecord, k: usize) -> (bool, bool) {
    (
        r.terminated.get(k).copied().unwrap_or(false),
        r.truncated.get(k).copied().unwrap_or(false),
    )
}

impl VectorRecording {
    /// Writes one call's rows.
    pub(super) fn record(&mut self, r: &VectorRecord, stats: &RecordStats) {
        for (k, kind) in r.kind.iter().enumerate() {
            let outcome = if self.straight {
                self.row_straight(r, k, kind, stats)
            } else {
                self.row(r, k, kind, stats)
            };
            if let Err(e) = outcome {
                stats.fail(&format!("a vector step could not be recorded: {e}"));
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
        let (_, slot) = slot_of(&mut self.slots, r, k)?;
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
                let (terminated, truncated) = flags(r, k);
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

    /// [`VectorRecording::row`] with rows written straight from the
    /// stacked arrays ([`straight`]): the same transitions, bytes, errors
    /// and episodes.
    fn row_straight(
        &mut self,
        r: &VectorRecord,
        k: usize,
        kind: &RowKind,
        stats: &RecordStats,
    ) -> Result<(), String> {
        let (env, slot) = slot_of(&mut self.slots, r, k)?;
        let space = &self.layout.observation;
        let spare = &mut self.spare;
        let mut buffer = || spare.pop().unwrap_or_default();
        match kind {
            RowKind::Skip => Ok(()),
            RowKind::Failed => {
                recycle(&mut self.spare, self.prev[env].take());
                end_episode(slot, stats)
            }
            RowKind::Reset => {
                end_episode(slot, stats)?;
                let obs = straight::row(space, &r.observation, k, "obs", buffer())?;
                recycle(&mut self.spare, self.prev[env].replace(obs));
                Ok(())
            }
            RowKind::Step { actions, row } | RowKind::StepFinal { actions, row, .. } => {
                let action = std::mem::take(&mut self.action);
                let action = straight::row(&self.layout.action, actions, *row, "action", action)?;
                let obs = straight::row(space, &r.observation, k, "obs", buffer())?;
                let (next_obs, restart) = match kind {
                    RowKind::StepFinal { final_obs, .. } => (
                        straight::value(space, final_obs, "next_obs", buffer()),
                        Some(obs),
                    ),
                    _ => (obs, None),
                };
                let prev = self.prev[env].take();
                let (terminated, truncated) = flags(r, k);
                let reward = r.reward.get(k).copied().unwrap_or(0.0);
                let appended = match (&action, &next_obs, &prev) {
                    // Stepped without a reset the recording saw.
                    (_, _, None) => Ok(false),
                    // The first part that does not fit, in key order.
                    (Converted::Unfit(e), _, _)
                    | (_, Converted::Unfit(e), _)
                    | (_, _, Some(Converted::Unfit(e))) => Err(e.clone()),
                    (Converted::Row(a), Converted::Row(next), Some(Converted::Row(prev))) => {
                        let flag = |b: bool| f64::from(u8::from(b)).to_ne_bytes();
                        let written = slot.buffer.append_flat(
                            |out| {
                                out.extend_from_slice(a);
                                out.extend_from_slice(next);
                                out.extend_from_slice(prev);
                                out.extend_from_slice(&reward.to_ne_bytes());
                                out.extend_from_slice(&flag(terminated));
                                out.extend_from_slice(&flag(truncated));
                                Ok(())
                            },
                            stats,
                        );
                        match written {
                            Ok(()) => Ok(true),
                            Err(Appended::Element(e)) => Err(e),
                            Err(Appended::Io(e)) => {
                                slot.buffer.abort_segment();
                                Err(e.to_string())
                            }
                        }
                    }
                };
                if let Converted::Row(a) = action {
                    self.action = a;
                }
                recycle(&mut self.spare, prev);
                self.prev[env] = restart.or(Some(next_obs));
                if appended? && (terminated || truncated) {
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
        self.prev.iter_mut().for_each(|p| *p = None);
        for slot in &mut self.slots {
            slot.obs = None;
            if let Err(e) = end_episode(slot, stats) {
                stats.fail(&format!("commit failed: {e}"));
                tracing::error!(error = %e, "recording: commit failed");
            }
        }
    }
}

/// Keeps a converted row's buffer for reuse (a few at most).
fn recycle(spare: &mut Vec<Vec<u8>>, converted: Option<Converted>) {
    if let Some(Converted::Row(buffer)) = converted {
        if spare.len() < 4 {
            spare.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{ByteOrder, DType, Dict, NdArray};
    use crate::record::parquet::ParquetFormat;
    use std::collections::BTreeMap;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    const N: usize = 3;

    fn obs(rows: Vec<f32>, hit: Vec<bool>, n: Vec<i32>) -> Value {
        Value::Dict(
            Dict::new()
                .with(
                    "pos",
                    NdArray::from_shape_vec(vec![rows.len() / 2, 2], rows).unwrap(),
                )
                .with("hit", NdArray::from_vec(hit))
                .with(
                    "n",
                    NdArray::from_shape_vec(vec![n.len() / 3, 3], n).unwrap(),
                ),
        )
    }

    fn stacked(t: usize) -> Value {
        let f = |i: usize| (t * 10 + i) as f32 * 0.25;
        obs(
            (0..2 * N).map(f).collect(),
            (0..N).map(|i| (t + i).is_multiple_of(3)).collect(),
            (0..3 * N).map(|i| (t * 7 + i) as i32 - 5).collect(),
        )
    }

    fn actions(t: usize) -> Value {
        let a: Vec<f32> = (0..N).map(|i| (t + i) as f32 * -0.5).collect();
        Value::Array(NdArray::from_shape_vec(vec![N, 1], a).unwrap())
    }

    fn step(
        t: usize,
        observation: Value,
        truncated: Vec<bool>,
        kind: Vec<RowKind>,
    ) -> VectorRecord {
        VectorRecord {
            env_id: (0..kind.len()).collect(),
            observation,
            reward: (0..kind.len()).map(|i| t as f64 - i as f64 * 0.5).collect(),
            terminated: vec![false; kind.len()],
            truncated,
            kind,
        }
    }

    fn steps(a: &Value) -> Vec<RowKind> {
        (0..N)
            .map(|row| RowKind::Step {
                actions: a.clone(),
                row,
            })
            .collect()
    }

    /// Every case the learner side meets, and the ones it should not:
    /// plain steps, episodes that end, masked resets, `SAME_STEP`'s final
    /// observations, skipped and failed sub-envs, leaves of other dtypes
    /// (cast) and byte orders, a leaf that does not fit (the transitions
    /// it is part of fail), and values that are not batches.
    fn records() -> Vec<VectorRecord> {
        let mut out = vec![step(0, stacked(0), vec![false; N], vec![RowKind::Reset; N])];
        for t in 1..60 {
            let a = actions(t);
            let ended = t.is_multiple_of(7);
            out.push(step(t, stacked(t), vec![ended; N], steps(&a)));
            if ended {
                out.push(step(
                    t,
                    stacked(t + 100),
                    vec![false; N],
                    vec![RowKind::Reset; N],
                ));
            }
        }
        let a = actions(61);
        // SAME_STEP: sub-env 1 ends with a final observation and restarts.
        let mut kinds = steps(&a);
        let final_obs = Value::Dict(
            Dict::new()
                .with("pos", NdArray::from_vec(vec![9.0f32, 8.0]))
                .with("hit", NdArray::scalar(true))
                .with("n", NdArray::from_vec(vec![1i32, 2, 3])),
        );
        kinds[1] = RowKind::StepFinal {
            actions: a.clone(),
            row: 1,
            final_obs,
        };
        out.push(step(61, stacked(61), vec![false, true, false], kinds));
        // Sub-env 0 skipped, 2 failed, then stepped without a reset.
        let mut kinds = steps(&a);
        kinds[0] = RowKind::Skip;
        kinds[2] = RowKind::Failed;
        out.push(step(62, stacked(62), vec![false; N], kinds));
        out.push(step(63, stacked(63), vec![false; N], steps(&a)));
        // Positions as float64 (cast), counts big-endian (another byte order).
        let mut o = stacked(64);
        if let Value::Dict(d) = &mut o {
            let pos: Vec<f64> = (0..2 * N).map(|i| i as f64 / 3.0).collect();
            d.insert("pos", NdArray::from_shape_vec(vec![N, 2], pos).unwrap());
            let n: Vec<u8> = (0..3 * N as u32).flat_map(|i| i.to_be_bytes()).collect();
            let big = DType::I32.with_byte_order(ByteOrder::Big);
            d.insert("n", NdArray::from_bytes(big, vec![N, 3], n.into()).unwrap());
        }
        out.push(step(64, o, vec![false; N], steps(&a)));
        // A position of the wrong shape (3, not 2): this and the next
        // transition fail.
        let mut bad = stacked(65);
        if let Value::Dict(d) = &mut bad {
            let wide = NdArray::from_shape_vec(vec![N, 3], vec![1.0f32; 3 * N]).unwrap();
            d.insert("pos", wide);
        }
        out.push(step(65, bad, vec![false; N], steps(&a)));
        out.push(step(66, stacked(66), vec![false; N], steps(&a)));
        // Actions of the wrong shape (a leaf error), then not a batch and
        // not a dict (refused before anything changes).
        let wide = Value::Array(NdArray::from_shape_vec(vec![N, 2], vec![0.5f32; 2 * N]).unwrap());
        out.push(step(67, stacked(67), vec![false; N], steps(&wide)));
        out.push(step(
            68,
            stacked(68),
            vec![false; N],
            steps(&Value::Float(1.0)),
        ));
        out.push(step(69, Value::Float(2.0), vec![false; N], steps(&a)));
        for t in 70..100 {
            let a = actions(t);
            out.push(step(
                t,
                stacked(t),
                vec![t.is_multiple_of(11); N],
                steps(&a),
            ));
        }
        out
    }

    fn files(dir: &Path, out: &mut BTreeMap<String, Vec<u8>>, root: &Path) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out, root);
            } else {
                let name = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }

    /// One recording of [`records`], on the straight path or the plain one:
    /// its files, and its counters.
    fn record(straight: bool) -> (BTreeMap<String, Vec<u8>>, [u64; 3]) {
        let dir = tempfile::tempdir().unwrap();
        let observation = Space::dict([
            ("pos", Space::boxed(DType::F32, vec![2], -9.0, 9.0)),
            ("hit", Space::binary(vec![])),
            ("n", Space::boxed(DType::I32, vec![3], -99.0, 99.0)),
        ]);
        let action = Space::boxed(DType::F32, vec![1], -60.0, 60.0);
        // 16-row pieces: episodes span pieces.
        let format = RecordFormat::External(Arc::new(ParquetFormat::new(1)));
        let RecordFormat::External(external) = &format else {
            unreachable!()
        };
        let mut rec = VectorRecording::open(dir.path(), observation, action, N, &format).unwrap();
        assert!(rec.straight);
        if !straight {
            rec = rec.plain();
        }
        let stats = RecordStats::default();
        for r in records() {
            rec.record(&r, &stats);
            super::super::buffer::commit_staged(external.as_ref(), rec.buffers(), &stats);
        }
        rec.close(&stats);
        super::super::buffer::commit_staged(external.as_ref(), rec.buffers(), &stats);
        drop(rec); // (removes the temporary files)
        let mut out = BTreeMap::new();
        files(dir.path(), &mut out, dir.path());
        let counters =
            [&stats.transitions, &stats.episodes, &stats.errors].map(|c| c.load(Ordering::Relaxed));
        (out, counters)
    }

    /// `transitions` counts what was committed (an episode whose
    /// `metadata.json` was replaced), not rows appended: an episode whose
    /// files cannot be written is never counted, and the failure is kept.
    #[test]
    fn only_committed_transitions_are_counted_and_the_first_failure_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let observation = Space::boxed(DType::F32, vec![2], -9.0, 9.0);
        let action = Space::boxed(DType::F32, vec![1], -60.0, 60.0);
        let mut rec =
            VectorRecording::open(dir.path(), observation, action, 1, &RecordFormat::Npz).unwrap();
        let stats = RecordStats::default();
        let a = Value::Array(NdArray::from_shape_vec(vec![1, 1], vec![0.5f32]).unwrap());
        let call = |t: usize, ended: bool, kind: RowKind| VectorRecord {
            env_id: vec![0],
            observation: NdArray::from_shape_vec(vec![1, 2], vec![t as f32; 2])
                .unwrap()
                .into(),
            reward: vec![1.0],
            terminated: vec![ended],
            truncated: vec![false],
            kind: vec![kind],
        };
        let step = |t: usize, ended: bool| {
            call(
                t,
                ended,
                RowKind::Step {
                    actions: a.clone(),
                    row: 0,
                },
            )
        };
        let counters = || {
            [&stats.transitions, &stats.episodes, &stats.errors].map(|c| c.load(Ordering::Relaxed))
        };
        rec.record(&call(0, false, RowKind::Reset), &stats);
        for t in 1..=3 {
            rec.record(&step(t, t == 3), &stats);
        }
        assert_eq!(counters(), [3, 1, 0]);
        rec.record(&call(0, false, RowKind::Reset), &stats);
        rec.record(&step(1, false), &stats);
        rec.record(&step(2, false), &stats);
        assert_eq!(counters(), [3, 1, 0], "an open episode is not counted");
        // The disk refuses the next episode's files.
        let storage = dir.path().join("0").join("storage");
        std::fs::remove_dir_all(&storage).unwrap();
        std::fs::write(&storage, b"not a directory").unwrap();
        rec.record(&step(3, true), &stats);
        assert_eq!(counters(), [3, 1, 1]);
        let first = stats.first_error().unwrap();
        assert!(first.contains("could not be recorded"), "{first}");
        rec.record(&call(0, false, RowKind::Reset), &stats);
        rec.record(&step(1, true), &stats);
        assert_eq!(counters(), [3, 1, 2]);
        assert_eq!(
            stats.first_error().unwrap(),
            first,
            "the first failure is kept"
        );
    }

    /// Rows written straight from the stacked arrays make the plain path's
    /// recording, file for file and byte for byte, with the same counters.
    #[test]
    fn straight_rows_record_what_the_plain_path_records() {
        let (straight, counts) = record(true);
        let (plain, plain_counts) = record(false);
        assert_eq!(counts, plain_counts);
        assert!(
            counts[0] > 200 && counts[1] > 20 && counts[2] > 0,
            "{counts:?}"
        );
        assert_eq!(
            straight.keys().collect::<Vec<_>>(),
            plain.keys().collect::<Vec<_>>()
        );
        assert!(straight.keys().any(|k| k.contains("part-000002.parquet")));
        for (name, bytes) in &plain {
            assert!(straight[name] == *bytes, "{name} differs");
        }
    }
}
