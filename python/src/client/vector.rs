//! `_native.VectorEnv`: the crate's vector client
//! ([`unienv_remote::client::vector`]) as a Python object, for
//! `unienv_remote.RemoteVectorEnv` (`unienv_remote/vector.py`).
//!
//! `step_async` / `send` write the requests from the calling thread before
//! they return; `step_wait` / `recv` read the replies on the calling thread
//! (the vector env's runtime is driven by its callers: no thread hand-off per
//! step), and wait and stack without the GIL. Only the conversion of the
//! stacked arrays into NumPy arrays (and of the small per-env info dicts)
//! holds it.

use crate::client::remote::client_error;
use crate::common::convert::{self, ArrayMode};
use parking_lot::Mutex;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use unienv_remote::client::vector::{
    AutoresetMode, BlockingVectorEnv, EnvAddress, StepInfos, VectorError, VectorReset, VectorStep,
};
use unienv_remote::client::ClientConfig;
use unienv_remote::host::ResetArgs;
use unienv_remote::{DType, Dict, NdArray, Value};

mod attributes;

/// A vector error as `(index, kind, exception)`: `kind` is `"failed"` for a
/// failure in this call (the exception is what the single-env client raises
/// for it, uncertainty included) or `"needs_reset"` for an env that failed
/// earlier and was not stepped.
fn vector_error<'py>(py: Python<'py>, e: &VectorError) -> PyResult<Bound<'py, PyTuple>> {
    let (index, kind, exc) = match e {
        VectorError::Env { index, error, .. } => {
            (*index, "failed", client_error(py, error.clone()))
        }
        VectorError::NeedsReset { index, .. } => (
            *index,
            "needs_reset",
            PyRuntimeError::new_err(e.to_string()),
        ),
        other => return Err(top_error(py, other.clone())),
    };
    PyTuple::new(
        py,
        [
            index.into_pyobject(py)?.into_any(),
            kind.into_pyobject(py)?.into_any(),
            exc.into_value(py).into_bound(py).into_any(),
        ],
    )
}

/// An error of the whole call.
fn top_error(py: Python<'_>, e: VectorError) -> PyErr {
    match e {
        VectorError::Connect { ref error, .. } => {
            let err = client_error(py, error.clone());
            let wrapped = pyo3::exceptions::PyConnectionError::new_err(e.to_string());
            wrapped.set_cause(py, Some(err));
            wrapped
        }
        VectorError::InvalidUse(msg) => PyValueError::new_err(msg),
        VectorError::Interrupted => {
            crate::common::wait::interrupted_mutation(py, "the vector env's call")
        }
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

fn errors_to_py<'py>(
    py: Python<'py>,
    errors: &[Option<VectorError>],
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for e in errors.iter().flatten() {
        out.append(vector_error(py, e)?)?;
    }
    Ok(out)
}

/// The per-env infos as a list of dicts; an empty list when every one is
/// empty (the common case: nothing to convert, nothing to merge).
fn infos_to_py<'py>(py: Python<'py>, infos: &[Dict]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    if infos.iter().all(Dict::is_empty) {
        return Ok(out);
    }
    for d in infos {
        out.append(convert::dict_to_py(py, d)?)?;
    }
    Ok(out)
}

/// A step's infos: Gymnasium's vector info dict when
/// [`crate::client::vector_infos`] can build it, else one dict per env as
/// [`infos_to_py`] gives them.
fn step_infos_to_py<'py>(py: Python<'py>, infos: &StepInfos) -> PyResult<Bound<'py, PyAny>> {
    let empty =
        infos.rows().iter().all(Dict::is_empty) && infos.blocks().iter().all(|b| b.info.is_empty());
    if empty {
        return Ok(PyList::empty(py).into_any());
    }
    Ok(match crate::client::vector_infos::gathered(py, infos)? {
        Some(gathered) => gathered.into_any(),
        None => infos_to_py(py, &infos.to_vec())?.into_any(),
    })
}

fn array_to_py<'py>(py: Python<'py>, a: NdArray) -> PyResult<Bound<'py, PyAny>> {
    convert::array_to_py(py, &a)
}

/// A 1-D `int64` array of the sub-environments' ids.
fn id_column<'py>(py: Python<'py>, ids: &[usize]) -> PyResult<Bound<'py, PyAny>> {
    convert::new_array_with(py, DType::I64, &[ids.len()], |out| {
        for (o, &i) in out.chunks_exact_mut(8).zip(ids) {
            o.copy_from_slice(&(i as i64).to_ne_bytes());
        }
    })
}

/// What `VectorEnv.step_wait` and `recv` return: one vector step's results
/// by name (`_native.VectorStep`), rows in the order of `env_id`.
#[pyclass(module = "unienv_remote._native", name = "VectorStep", frozen, get_all)]
pub struct PyVectorStep {
    /// The stacked observations (`None` when no env returned one).
    pub(crate) observation: Py<PyAny>,
    /// `float64` rewards, one per row.
    pub(crate) reward: Py<PyAny>,
    /// `bool` terminations, one per row.
    pub(crate) terminated: Py<PyAny>,
    /// `bool` truncations, one per row.
    pub(crate) truncated: Py<PyAny>,
    /// One info dict per row, or already Gymnasium's vector layout
    /// (`{k: column, "_k": mask}`); `[]` when every info is empty.
    pub(crate) infos: Py<PyAny>,
    /// `bool`, per row: the row is an autoreset's (NextStep mode).
    pub(crate) autoreset: Py<PyAny>,
    /// `[(position, final_obs, final_info)]` of the rows whose episode ended
    /// (SameStep mode).
    pub(crate) finals: Py<PyAny>,
    /// `[(index, kind, exception)]`: the envs that failed (by env index).
    pub(crate) errors: Py<PyAny>,
    /// `int64`: each row's env index.
    pub(crate) env_id: Py<PyAny>,
}

#[pymethods]
impl PyVectorStep {
    /// A step's results built in Python (a restart's or two `recv`s' merged).
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (observation, reward, terminated, truncated, infos, autoreset, finals, errors, env_id))]
    fn new(
        observation: Py<PyAny>,
        reward: Py<PyAny>,
        terminated: Py<PyAny>,
        truncated: Py<PyAny>,
        infos: Py<PyAny>,
        autoreset: Py<PyAny>,
        finals: Py<PyAny>,
        errors: Py<PyAny>,
        env_id: Py<PyAny>,
    ) -> PyVectorStep {
        PyVectorStep {
            observation,
            reward,
            terminated,
            truncated,
            infos,
            autoreset,
            finals,
            errors,
            env_id,
        }
    }
}

/// A vector step as Python objects (see `PyVectorEnv::step_wait`); its
/// infos already in Gymnasium's vector layout when [`crate::client::vector_infos`]
/// can build it, else one dict per env.
fn step_to_py<'py>(py: Python<'py>, s: &VectorStep) -> PyResult<Bound<'py, PyVectorStep>> {
    let finals = PyList::empty(py);
    for (i, (o, inf)) in s.final_observation.iter().zip(&s.final_info).enumerate() {
        if let Some(o) = o {
            let info = match inf {
                Some(d) => convert::dict_to_py(py, d)?.into_any(),
                None => PyDict::new(py).into_any(),
            };
            finals.append((i, convert::to_py(py, o)?, info))?;
        }
    }
    Bound::new(
        py,
        PyVectorStep {
            observation: convert::to_py(py, &s.observation)?.unbind(),
            reward: convert::f64_column(py, &s.reward)?.unbind(),
            terminated: convert::bool_column(py, &s.terminated)?.unbind(),
            truncated: convert::bool_column(py, &s.truncated)?.unbind(),
            infos: step_infos_to_py(py, &s.infos)?.unbind(),
            autoreset: convert::bool_column(py, &s.autoreset)?.unbind(),
            finals: finals.into_any().unbind(),
            errors: errors_to_py(py, &s.errors)?.into_any().unbind(),
            env_id: id_column(py, &s.env_id)?.unbind(),
        },
    )
}

/// N remote envs stepped together (`_native.VectorEnv(addresses, ...)`).
#[pyclass(module = "unienv_remote._native", name = "VectorEnv", frozen)]
pub struct PyVectorEnv {
    env: Mutex<Option<BlockingVectorEnv>>,
    num_envs: usize,
    /// The connections' settings, for [`PyVectorEnv::reconnect`].
    config: ClientConfig,
}

impl PyVectorEnv {
    fn with<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut BlockingVectorEnv) -> Result<T, VectorError> + Send,
    ) -> PyResult<T>
    where
        T: Send,
    {
        let result = crate::common::wait::detach(py, || {
            let mut guard = self.env.lock();
            match guard.as_mut() {
                Some(env) => Ok(f(env)),
                None => Err(()),
            }
        });
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(top_error(py, e)),
            Err(()) => Err(PyRuntimeError::new_err("the vector env is closed")),
        }
    }

    /// [`with`](Self::with) for calls that never wait (`step_async`,
    /// `send`: they write the requests and return): run with the GIL
    /// held when the vector env is free, so a lockstep vector step releases
    /// the GIL once (in `step_wait`), not twice. When another thread holds
    /// the vector env (waiting in `recv`), wait for it without the GIL.
    fn with_nonblocking<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut BlockingVectorEnv) -> Result<T, VectorError> + Send,
    ) -> PyResult<T>
    where
        T: Send,
    {
        let Some(mut guard) = self.env.try_lock() else {
            return self.with(py, f);
        };
        match guard.as_mut() {
            Some(env) => f(env).map_err(|e| top_error(py, e)),
            None => Err(PyRuntimeError::new_err("the vector env is closed")),
        }
    }
}

#[pymethods]
impl PyVectorEnv {
    /// Connects to every server of `addresses` (`[(url, resource_id)]`);
    /// `ca_file`: CA certificates (PEM) trusted for `wss://` besides the
    /// system's roots.
    #[new]
    #[pyo3(signature = (addresses, autoreset_mode = "NextStep", timeout = Some(30.0), token = None, ca_file = None))]
    fn new(
        py: Python<'_>,
        addresses: Vec<(String, String)>,
        autoreset_mode: &str,
        timeout: Option<f64>,
        token: Option<String>,
        ca_file: Option<std::path::PathBuf>,
    ) -> PyResult<PyVectorEnv> {
        let mode = AutoresetMode::parse(autoreset_mode).ok_or_else(|| {
            PyValueError::new_err(format!("unknown autoreset mode {autoreset_mode:?}"))
        })?;
        let timeout = crate::common::wait::timeout_arg(timeout, "timeout")?;
        let mut config = ClientConfig::default().with_timeout(timeout);
        config.token = token;
        config.ca_file = ca_file;
        let addresses: Vec<EnvAddress> = addresses
            .into_iter()
            .map(|(url, id)| EnvAddress::new(url, id))
            .collect();
        let env = py
            .detach(|| BlockingVectorEnv::connect(&addresses, config.clone(), mode))
            .map_err(|e| top_error(py, e))?;
        Ok(PyVectorEnv {
            num_envs: env.num_envs(),
            env: Mutex::new(Some(env)),
            config,
        })
    }

    /// The number of sub-environments.
    #[getter]
    fn num_envs(&self) -> usize {
        self.num_envs
    }

    /// The serialized form of one sub-environment's space `name`
    /// (`action_space`, `observation_space`; all share it): a batched
    /// resource's space without its batch axis, as unienv's
    /// `unbatch_spaces` gives it.
    fn space_document<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let doc = {
            let guard = self.env.lock();
            let env = guard
                .as_ref()
                .ok_or_else(|| PyRuntimeError::new_err("the vector env is closed"))?;
            let space = match name {
                "action_space" => env.inner().single_action_space(),
                "observation_space" => env.inner().single_observation_space(),
                other => return Err(PyValueError::new_err(format!("no space {other:?}"))),
            };
            space.map_or(Value::Null, |s| s.to_value())
        };
        convert::to_py(py, &doc)
    }

    /// Each resource's first sub-environment and its number of
    /// sub-environments, in order.
    fn resource_ranges(&self) -> Vec<(usize, usize)> {
        self.env
            .lock()
            .as_ref()
            .map_or_else(Vec::new, |e| e.inner().resource_ranges())
    }

    /// Env 0's metadata dict.
    fn env_metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let meta = {
            let guard = self.env.lock();
            let env = guard
                .as_ref()
                .ok_or_else(|| PyRuntimeError::new_err("the vector env is closed"))?;
            env.inner().envs()[0].metadata()
        };
        convert::dict_to_py(py, &meta)
    }

    /// Resets the envs (those where `mask` is true, or all): one seed per
    /// env, `options` passed to every env as the `options` keyword.
    /// Returns `(observation, infos, errors, mask)`, `infos` in Gymnasium's
    /// vector layout when the extension can gather them (the envs not reset
    /// left out), else one dict per env.
    #[pyo3(signature = (seeds, options = None, mask = None))]
    fn reset<'py>(
        &self,
        py: Python<'py>,
        seeds: Vec<Option<i64>>,
        options: Option<&Bound<'py, PyAny>>,
        mask: Option<Vec<bool>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let options = options
            .map(|o| convert::from_py(o, ArrayMode::Copy))
            .transpose()?;
        let args: Vec<ResetArgs> = seeds
            .into_iter()
            .map(|seed| {
                let mut a = ResetArgs {
                    seed,
                    ..ResetArgs::default()
                };
                if let Some(o) = &options {
                    a.kwargs.insert("options", o.clone());
                }
                a
            })
            .collect();
        let (r, mask): (VectorReset, Vec<bool>) =
            self.with(py, |env| env.reset_masked(args, mask.as_deref()))?;
        PyTuple::new(
            py,
            [
                convert::to_py(py, &r.observation)?,
                match crate::client::vector_infos::gathered_reset(py, &r.infos, &mask)? {
                    Some(gathered) => gathered.into_any(),
                    None => infos_to_py(py, &r.infos)?.into_any(),
                },
                errors_to_py(py, &r.errors)?.into_any(),
                array_to_py(py, NdArray::from_vec(mask))?,
            ],
        )
    }

    /// Sends every env's step at once and returns; `actions` is stacked
    /// along the first axis (an array, or a dict/tuple of arrays).
    fn step_async(&self, py: Python<'_>, actions: &Bound<'_, PyAny>) -> PyResult<()> {
        let actions = convert::from_py(actions, ArrayMode::Copy)?;
        self.with_nonblocking(py, move |env| env.step_async_stacked(&actions))
    }

    /// Waits for the pending step and returns its [`PyVectorStep`] (every
    /// env, in order).
    fn step_wait<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyVectorStep>> {
        let s: VectorStep = self.with(py, |env| env.step_wait())?;
        step_to_py(py, &s)
    }

    /// Sends the step of the sub-environments `env_id` (whole resources),
    /// `actions` stacked along the first axis in the order of `env_id`.
    fn send(&self, py: Python<'_>, actions: &Bound<'_, PyAny>, env_id: Vec<usize>) -> PyResult<()> {
        let actions = convert::from_py(actions, ArrayMode::Copy)?;
        self.with_nonblocking(py, move |env| env.send_stacked(&actions, &env_id))
    }

    /// Waits for the results of at least `min` sub-environments (whole
    /// resources, in arrival order): a [`PyVectorStep`] whose `env_id` names
    /// each row's env.
    fn recv<'py>(&self, py: Python<'py>, min: usize) -> PyResult<Bound<'py, PyVectorStep>> {
        let s: VectorStep = self.with(py, move |env| env.recv(min))?;
        step_to_py(py, &s)
    }

    /// Points envs at new addresses (`[(index, url, resource_id)]`), all
    /// or nothing; they must be reset before they are stepped.
    fn reconnect(&self, py: Python<'_>, changes: Vec<(usize, String, String)>) -> PyResult<()> {
        let changes: Vec<(usize, EnvAddress)> = changes
            .into_iter()
            .map(|(i, url, id)| (i, EnvAddress::new(url, id)))
            .collect();
        let config = self.config.clone();
        self.with(py, move |env| env.reconnect(&changes, config))
    }

    /// Which envs must be reset before they are stepped (failed or
    /// reconnected).
    fn failed(&self) -> Vec<bool> {
        self.env
            .lock()
            .as_ref()
            .map_or_else(Vec::new, |e| e.inner().failed())
    }

    /// Whether a step is pending.
    fn step_pending(&self) -> bool {
        self.env
            .lock()
            .as_ref()
            .is_some_and(|e| e.inner().is_step_pending())
    }

    /// Closes every connection (idempotent).
    fn close(&self, py: Python<'_>) {
        let env = self.env.lock().take();
        if let Some(mut env) = env {
            py.detach(move || {
                env.close();
                drop(env);
            });
        }
    }
}

/// Registers `VectorEnv` and `VectorStep`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyVectorEnv>()?;
    attributes::register(m)?;
    m.add_class::<PyVectorStep>()
}
