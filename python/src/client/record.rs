//! `_native.Recorder`: the learner side's recording of a vector env
//! (`RemoteVectorEnv(..., record_dir=DIR)`), one `unienv_data`
//! `ReplayBuffer` per sub-env, written by the Rust recorder's thread
//! (`unienv_remote::record::VectorRecorder`).
//!
//! The Python hook hands over each call's native results as they are; here
//! they become one queued record (the arrays copied once, with the GIL
//! held, since the learner may write them afterwards); everything else
//! (rows, conversions, files) happens on the writer thread.

use crate::client::vector::PyVectorStep;
use crate::common::convert::{self, ArrayMode};
use numpy::PyReadonlyArray1;
use parking_lot::Mutex;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use unienv_remote::codec::Value;
use unienv_remote::host::Space;
use unienv_remote::record::{ParquetFormat, RecordFormat, RowKind, VectorRecord, VectorRecorder};

/// The [`RecordFormat`] for a `record_format` argument (as
/// `unienv_remote._record.native_format` makes it): the default
/// ([`RecordFormat::parquet`]) for `None` and `"parquet"`, NPZ for `"npz"`, the Parquet
/// format for `("parquet", piece_bytes)` (pieces sized for about
/// `piece_bytes` bytes of rows), written by the recorder's thread.
pub fn format(spec: Option<&Bound<'_, PyAny>>) -> PyResult<RecordFormat> {
    let Some(spec) = spec.filter(|f| !f.is_none()) else {
        return Ok(RecordFormat::default());
    };
    if let Ok(name) = spec.extract::<String>() {
        return match name.as_str() {
            "npz" => Ok(RecordFormat::Npz),
            "parquet" => Ok(RecordFormat::parquet()),
            other => Err(PyValueError::new_err(format!(
                "record_format: no format {other:?}"
            ))),
        };
    }
    let (name, piece_bytes): (String, usize) = spec.extract().map_err(|_| {
        PyValueError::new_err(
            "record_format: expected None, \"npz\", \"parquet\" or (\"parquet\", piece_bytes)",
        )
    })?;
    match name.as_str() {
        "parquet" => Ok(RecordFormat::External(Arc::new(ParquetFormat::new(
            piece_bytes,
        )))),
        other => Err(PyValueError::new_err(format!(
            "record_format: no format {other:?} with a piece size"
        ))),
    }
}

/// A vector env's recording (`_native.Recorder(dir, observation_space,
/// action_space, num_envs, record_format=None)`, the spaces as
/// `space_document` gives them; `record_format` as [`format`] takes it).
#[pyclass(module = "unienv_remote._native", name = "Recorder", frozen)]
pub struct PyRecorder {
    recorder: VectorRecorder,
    dir: PathBuf,
    num_envs: usize,
    /// Each sub-env's step in flight: the stacked actions sent and its row.
    pending: Mutex<Vec<Option<(Value, usize)>>>,
    /// Whether `close()` already warned about a failure.
    warned: AtomicBool,
}

fn space(doc: &Bound<'_, PyAny>, name: &str) -> PyResult<Space> {
    let value = convert::from_py(doc, ArrayMode::Copy)?;
    Space::from_value(&value).map_err(|e| PyValueError::new_err(format!("{name}: {e}")))
}

fn vec1<T: numpy::Element + Copy>(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<T>> {
    let a: PyReadonlyArray1<'_, T> = obj
        .extract()
        .map_err(|_| PyValueError::new_err(format!("{name} is not a 1-D array of its dtype")))?;
    Ok(a.as_array().iter().copied().collect())
}

/// The env indices of a native call's `errors` list (`(index, kind, exc)`):
/// `(failed, refused)`. A refused env (a certain `invalid_request`: its
/// action refused before it ran) is unchanged and goes on where it was, so
/// its episode is neither ended nor recorded in this call.
fn failed(errors: &Bound<'_, PyAny>) -> PyResult<(Vec<usize>, Vec<usize>)> {
    let (mut failed, mut refused) = (Vec::new(), Vec::new());
    for item in errors.cast::<PyList>()?.iter() {
        let index = item.get_item(0)?.extract::<usize>()?;
        let exc = item.get_item(2)?;
        let code = exc.getattr("code").ok();
        let is_refusal = code.is_some_and(|c| c.eq("invalid_request").unwrap_or(false))
            && !exc
                .getattr("uncertain")
                .and_then(|u| u.is_truthy())
                .unwrap_or(true);
        if is_refusal {
            refused.push(index);
        } else {
            failed.push(index);
        }
    }
    Ok((failed, refused))
}

impl PyRecorder {
    /// `"recording failed N time(s), first: ..."` once anything failed.
    fn failure(&self) -> Option<String> {
        let stats = self.recorder.stats();
        let errors = stats.errors.load(Ordering::Relaxed);
        (errors > 0).then(|| {
            let first = stats
                .first_error()
                .unwrap_or_else(|| "(see the log)".to_string());
            let directory = self.dir.display();
            format!("recording to {directory} failed {errors} time(s); the first: {first}")
        })
    }

    /// Queues a record; only when the queue is full (the disk is behind)
    /// does it wait, and then without the GIL.
    fn queue(&self, py: Python<'_>, record: VectorRecord) {
        if let Some(record) = self.recorder.try_record(record) {
            py.detach(move || self.recorder.record(record));
        }
    }
}

#[pymethods]
impl PyRecorder {
    #[new]
    #[pyo3(signature = (dir, observation_space, action_space, num_envs, record_format = None))]
    fn new(
        py: Python<'_>,
        dir: PathBuf,
        observation_space: &Bound<'_, PyAny>,
        action_space: &Bound<'_, PyAny>,
        num_envs: usize,
        record_format: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let observation = space(observation_space, "observation_space")?;
        let action = space(action_space, "action_space")?;
        let format = format(record_format)?;
        let recorder = py
            .detach(|| VectorRecorder::start(&dir, observation, action, num_envs, format))
            .map_err(PyRuntimeError::new_err)?;
        Ok(PyRecorder {
            recorder,
            dir,
            num_envs,
            pending: Mutex::new(vec![None; num_envs]),
            warned: AtomicBool::new(false),
        })
    }

    /// A `reset`'s results: `observation` (stacked, every env), `used`
    /// (the envs that were reset) and the `errors` list.
    fn reset(
        &self,
        py: Python<'_>,
        observation: &Bound<'_, PyAny>,
        used: &Bound<'_, PyAny>,
        errors: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let used: Vec<bool> = match vec1::<bool>(used, "used") {
            Ok(v) => v,
            Err(_) => used.extract()?,
        };
        let (failed, refused) = failed(errors)?;
        let kind = (0..self.num_envs)
            .map(|i| {
                if refused.contains(&i) {
                    RowKind::Skip
                } else if failed.contains(&i) {
                    RowKind::Failed
                } else if used.get(i).copied().unwrap_or(false) {
                    RowKind::Reset
                } else {
                    RowKind::Skip
                }
            })
            .collect();
        let n = self.num_envs;
        let record = VectorRecord {
            env_id: (0..n).collect(),
            observation: convert::from_py(observation, ArrayMode::Copy)?,
            reward: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            kind,
        };
        self.queue(py, record);
        Ok(())
    }

    /// The actions sent to the sub-envs `env_id` (all when `None`), stacked
    /// in that order.
    #[pyo3(signature = (actions, env_id = None))]
    fn sent(&self, actions: &Bound<'_, PyAny>, env_id: Option<Vec<usize>>) -> PyResult<()> {
        let actions = convert::from_py(actions, ArrayMode::Copy)?;
        let ids = env_id.unwrap_or_else(|| (0..self.num_envs).collect());
        let mut pending = self.pending.lock();
        for (row, env) in ids.into_iter().enumerate() {
            if let Some(p) = pending.get_mut(env) {
                *p = Some((actions.clone(), row));
            }
        }
        Ok(())
    }

    /// A step's (or `recv`'s) native results, `VectorEnv.step_wait`'s
    /// `VectorStep`.
    fn stepped(&self, py: Python<'_>, native: &Bound<'_, PyVectorStep>) -> PyResult<()> {
        let native = native.get();
        let observation = native.observation.bind(py).clone();
        let reward: Vec<f64> = vec1(native.reward.bind(py), "rewards")?;
        let terminated: Vec<bool> = vec1(native.terminated.bind(py), "terminations")?;
        let truncated: Vec<bool> = vec1(native.truncated.bind(py), "truncations")?;
        let autoreset: Vec<bool> = vec1(native.autoreset.bind(py), "autoreset")?;
        let mut finals: HashMap<usize, Value> = HashMap::new();
        for item in native.finals.bind(py).cast::<PyList>()?.iter() {
            let position: usize = item.get_item(0)?.extract()?;
            finals.insert(
                position,
                convert::from_py(&item.get_item(1)?, ArrayMode::Copy)?,
            );
        }
        let (failed, refused) = failed(native.errors.bind(py))?;
        let ids: Vec<usize> = vec1::<i64>(native.env_id.bind(py), "env_id")?
            .into_iter()
            .map(|i| usize::try_from(i).unwrap_or(usize::MAX))
            .collect();
        let mut pending = self.pending.lock();
        let mut kind = Vec::with_capacity(ids.len());
        for (k, &env) in ids.iter().enumerate() {
            let sent = pending.get_mut(env).and_then(Option::take);
            kind.push(if refused.contains(&env) {
                RowKind::Skip
            } else if failed.contains(&env) {
                RowKind::Failed
            } else if autoreset.get(k).copied().unwrap_or(false) {
                RowKind::Reset
            } else {
                match (sent, finals.remove(&k)) {
                    (None, _) => RowKind::Reset,
                    (Some((actions, row)), None) => RowKind::Step { actions, row },
                    (Some((actions, row)), Some(final_obs)) => RowKind::StepFinal {
                        actions,
                        row,
                        final_obs,
                    },
                }
            });
        }
        drop(pending);
        let observation = if observation.is_none() {
            Value::Null
        } else {
            convert::from_py(&observation, ArrayMode::Copy)?
        };
        let record = VectorRecord {
            env_id: ids,
            observation,
            reward,
            terminated,
            truncated,
            kind,
        };
        self.queue(py, record);
        Ok(())
    }

    /// Waits until everything recorded before is written.
    fn flush(&self, py: Python<'_>) {
        py.detach(|| self.recorder.flush());
    }

    /// Commits every open episode and stops the writer (idempotent); when
    /// anything could not be recorded, warns once (`RuntimeWarning`) with
    /// the number of failures and the first one (each was logged as it
    /// happened).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.recorder.close());
        if let Some(message) = self.failure() {
            if !self.warned.swap(true, Ordering::Relaxed) {
                let category = py.get_type::<pyo3::exceptions::PyRuntimeWarning>();
                PyErr::warn(py, &category, &std::ffi::CString::new(message)?, 3)?;
            }
        }
        Ok(())
    }

    /// What went wrong, when anything could not be recorded (`None`
    /// otherwise): the number of failures and the first one.
    #[getter]
    fn error(&self) -> Option<String> {
        self.failure()
    }

    /// The counters: `transitions` (committed), `episodes`, `queue_waits`,
    /// `errors`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.recorder.stats();
        let d = PyDict::new(py);
        d.set_item("transitions", s.transitions.load(Ordering::Relaxed))?;
        d.set_item("episodes", s.episodes.load(Ordering::Relaxed))?;
        d.set_item("queue_waits", s.queue_waits.load(Ordering::Relaxed))?;
        d.set_item("errors", s.errors.load(Ordering::Relaxed))?;
        Ok(d)
    }
}

impl Drop for PyRecorder {
    /// A recorder collected without `close()`: the writer thread commits
    /// what is open, waited for with the GIL released.
    fn drop(&mut self) {
        let recorder = &self.recorder;
        if Python::try_attach(|py| py.detach(|| recorder.close())).is_none() {
            recorder.close();
        }
    }
}

/// Registers `Recorder` and `PARQUET_PIECE_BYTES` (the Rust writer's
/// [`unienv_remote::record::PIECE_BYTES`], which Python's default piece
/// size is read from rather than copied).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("PARQUET_PIECE_BYTES", unienv_remote::record::PIECE_BYTES)?;
    m.add_class::<PyRecorder>()
}
