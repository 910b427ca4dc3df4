//! `_native.BatchedCore`: the Python host's `unienv_remote.BatchedEnv` on
//! the crate's one stepping core ([`unienv_remote::host::BatchedCore`]),
//! its sub-envs held as Python objects ([`PySubEnv`]).
//!
//! `BatchedEnv` (Python) splits an action into rows and assembles the rows'
//! results; this core does everything between: refusing a faulted batch,
//! the rows of a reset mask and their seeds, stepping every row in turn or
//! on threads, and failing the batch on a sub-env's exception (the first,
//! by index: `RuntimeError("sub-env i raised T: ...")` from it).
//!
//! The host steps a hosted `BatchedEnv` of Gymnasium sub-envs with Box
//! spaces through the same core without Python in between
//! ([`PyBatchedCore::step_hosted`]): the rows of the wire's action become
//! NumPy arrays here, each sub-env's `step` is called with its
//! row, and a batch of regular results (NumPy observations of one dtype and
//! shape, `float` rewards, no infos or flat infos of scalars) is built
//! straight into the value tree ([`Builder`]); anything else goes to the
//! `BatchedEnv`'s own assembly (the `complete` callable it gave), so that
//! the value is the one `BatchedEnv.step`'s result converts to, bit for bit
//! (`python/tests/test_batched_fast.py`).

use crate::common::convert::{check_bounded, new_array, wire_dtype, ConvertError};
use crate::host::outcome::{convert_result, sole_array, StepOutcome};
use bytes::Bytes;
use numpy::{PyArrayDescr, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};
use std::sync::Arc;
use unienv_remote::host::{BatchError, BatchedCore, Seeds, SubEnv};
use unienv_remote::{DType, Dict, NdArray, Value};

/// One sub-env of a Python `BatchedEnv`: its `_Sub` (the conversions its
/// data needs: `step(row)`, `finish(result)`, `reset(seed, kwargs)`) and the
/// env itself (`env`), whose `step` the host calls directly.
struct PySubEnv {
    sub: Py<PyAny>,
    env: Py<PyAny>,
}

/// A row of an action: row `index` of the Python `action` as `split(action,
/// index)` makes it, for the sub-env's `step` (`Split`: a failure to split
/// is the row's failure, as a failure to step); or an array of the wire
/// handed to the env's own `step` (`Raw`: its bytes, `dtype` and shape,
/// made a new NumPy array only when its sub-env steps, so that one row is
/// alive at a time).
enum Row {
    Split {
        action: Py<PyAny>,
        index: usize,
        split: Py<PyAny>,
    },
    Raw {
        data: Bytes,
        dtype: DType,
        shape: Arc<[usize]>,
    },
}

impl SubEnv for PySubEnv {
    type Action = Row;
    type Step = Py<PyAny>;
    type Reset = Py<PyAny>;
    type Options = Py<PyDict>;
    type Error = PyErr;

    fn step_row(&mut self, action: Row) -> PyResult<Py<PyAny>> {
        Python::attach(|py| {
            let sub = self.sub.bind(py);
            let row = match action {
                Row::Split {
                    action,
                    index,
                    split,
                } => {
                    let row = split.bind(py).call1((action, index))?;
                    return Ok(sub.call_method1(intern!(py, "step"), (row,))?.unbind());
                }
                Row::Raw { data, dtype, shape } => new_array(py, dtype, &shape, &data)?,
            };
            let result = self
                .env
                .bind(py)
                .call_method1(intern!(py, "step"), (row,))?;
            // `_Sub.step` of a Box sub-env: a tuple of five with a NumPy
            // observation as it is, anything else finished.
            if let Ok(t) = result.cast_exact::<PyTuple>() {
                if t.len() == 5 && t.get_borrowed_item(0)?.cast::<PyUntypedArray>().is_ok() {
                    return Ok(result.unbind());
                }
            }
            Ok(sub.call_method1(intern!(py, "finish"), (result,))?.unbind())
        })
    }

    fn reset_row(&mut self, seed: Option<i64>, options: &Py<PyDict>) -> PyResult<Py<PyAny>> {
        Python::attach(|py| {
            self.sub
                .bind(py)
                .call_method1(intern!(py, "reset"), (seed, options.bind(py)))
                .map(Bound::unbind)
        })
    }

    /// An exception that is no `Exception` (`KeyboardInterrupt`,
    /// `SystemExit`) propagates at once, the batch not failed by it.
    fn interrupts(error: &PyErr) -> bool {
        Python::attach(|py| !error.is_instance_of::<PyException>(py))
    }
}

/// A core error as `BatchedEnv` raises it.
fn py_error(py: Python<'_>, e: BatchError<PyErr>) -> PyErr {
    match e {
        BatchError::Faulted { pending } => PyRuntimeError::new_err(format!(
            "a sub-env raised: reset sub-envs {pending:?} before stepping the batch"
        )),
        BatchError::Failed { index, error } => {
            let name = error
                .get_type(py)
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default();
            let message = error
                .value(py)
                .str()
                .map(|s| s.to_string())
                .unwrap_or_default();
            let raised =
                PyRuntimeError::new_err(format!("sub-env {index} raised {name}: {message}"));
            raised.set_cause(py, Some(error));
            raised
        }
        BatchError::Interrupted { error, .. } => error,
        BatchError::Rows { .. } | BatchError::Seeds { .. } => PyValueError::new_err(e.to_string()),
    }
}

/// `BatchedCore(subs, threads, complete)`: the stepping core of a Python
/// `BatchedEnv` (see the [module docs](self)).
#[pyclass(name = "BatchedCore", module = "unienv_remote._native")]
pub(crate) struct PyBatchedCore {
    core: BatchedCore<PySubEnv>,
    threads: usize,
    /// `complete(results)`: the `BatchedEnv`'s result of its sub-envs'
    /// step results (the host's irregular steps); `None` once cleared by
    /// the garbage collector (it refers back to the `BatchedEnv`).
    complete: Option<Py<PyAny>>,
}

#[pymethods]
impl PyBatchedCore {
    #[new]
    fn new(subs: Vec<Bound<'_, PyAny>>, threads: usize, complete: Py<PyAny>) -> PyResult<Self> {
        if subs.is_empty() {
            return Err(PyValueError::new_err(
                "a BatchedEnv needs at least one factory",
            ));
        }
        let subs = subs
            .into_iter()
            .map(|sub| {
                let env = sub.getattr(intern!(sub.py(), "env"))?.unbind();
                Ok(PySubEnv {
                    sub: sub.unbind(),
                    env,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyBatchedCore {
            core: BatchedCore::new(subs),
            threads: threads.max(1),
            complete: Some(complete),
        })
    }

    /// Whether a sub-env raised and the batch was not reset since.
    #[getter]
    fn faulted(&self) -> bool {
        self.core.faulted()
    }

    /// Every sub-env's `step(row(action, i))`; the results, in order.
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        action: &Bound<'py, PyAny>,
        row: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let rows = (0..self.core.len())
            .map(|index| Row::Split {
                action: action.clone().unbind(),
                index,
                split: row.clone().unbind(),
            })
            .collect();
        let results = self.step_rows(py, rows)?;
        PyList::new(py, results)
    }

    /// Resets the sub-envs of `mask` (a list of N bools; all when `None`),
    /// each with its seed (`seed`: `None`, an `int` `s` giving row `i`
    /// `s + i`, or N seeds) and `kwargs`; their indices and results.
    fn reset<'py>(
        &mut self,
        py: Python<'py>,
        mask: Option<Vec<bool>>,
        seed: &Bound<'py, PyAny>,
        kwargs: Bound<'py, PyDict>,
    ) -> PyResult<(Vec<usize>, Bound<'py, PyList>)> {
        let seeds = if seed.is_none() {
            Seeds::None
        } else if seed.is_instance_of::<PyInt>() {
            Seeds::Base(seed.extract()?)
        } else {
            Seeds::Each(seed.extract()?)
        };
        let kwargs = kwargs.unbind();
        let threads = self.threads;
        let core = &mut self.core;
        let done = if threads > 1 {
            py.detach(|| core.reset_on(mask.as_deref(), &seeds, &kwargs, threads))
        } else {
            core.reset(mask.as_deref(), &seeds, &kwargs)
        };
        let (indices, results) = done.map_err(|e| py_error(py, e))?;
        Ok((indices, PyList::new(py, results)?))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(complete) = &self.complete {
            visit.call(complete)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.complete = None;
    }
}

impl PyBatchedCore {
    fn step_rows(&mut self, py: Python<'_>, rows: Vec<Row>) -> PyResult<Vec<Py<PyAny>>> {
        let threads = self.threads;
        let core = &mut self.core;
        let done = if threads > 1 {
            py.detach(|| core.step_on(rows, threads))
        } else {
            core.step(rows)
        };
        done.map_err(|e| py_error(py, e))
    }

    /// `step(*args, **kwargs)` of the hosted `BatchedEnv` done here; `None`
    /// when the call is not one this path takes (then the host calls the
    /// `BatchedEnv`'s `step` as usual).
    pub(crate) fn step_hosted(
        &mut self,
        py: Python<'_>,
        args: &[Value],
        kwargs: &Dict,
        max_message_size: usize,
    ) -> Option<StepOutcome> {
        let n = self.core.len();
        let action = sole_array(args, kwargs)?;
        if action.shape().first() != Some(&n) {
            return None;
        }
        Some(self.run_hosted(py, action, max_message_size))
    }

    fn run_hosted(
        &mut self,
        py: Python<'_>,
        action: &NdArray,
        max_message_size: usize,
    ) -> StepOutcome {
        let n = self.core.len();
        self.core.ready().map_err(|e| py_error(py, e))?;
        let (dtype, shape) = (action.dtype(), Arc::<[usize]>::from(&action.shape()[1..]));
        let row_bytes = action.as_bytes().len() / n;
        let raw = (0..n)
            .map(|i| Row::Raw {
                data: action.bytes().slice(i * row_bytes..(i + 1) * row_bytes),
                dtype,
                shape: Arc::clone(&shape),
            })
            .collect();
        let results = self.step_rows(py, raw)?;
        let mut builder = Builder::new(n);
        let mut regular = true;
        for (i, result) in results.iter().enumerate() {
            if !builder.take(i, result.bind(py))? {
                regular = false;
                break;
            }
        }
        if regular {
            let value = builder.finish()?;
            return Ok(check_bounded(&value, max_message_size).map(|()| value));
        }
        let Some(complete) = &self.complete else {
            return Err(PyRuntimeError::new_err(
                "the BatchedEnv of this core is gone",
            ));
        };
        let result = complete.bind(py).call1((PyList::new(py, results)?,))?;
        convert_result(&result, max_message_size)
    }
}

/// NumPy's scalar types an info value may have, looked up once:
/// `float64`, `float32`, `int64`.
static SCALARS: PyOnceLock<[Py<PyType>; 3]> = PyOnceLock::new();

fn scalars(py: Python<'_>) -> PyResult<&[Py<PyType>; 3]> {
    SCALARS.get_or_try_init(py, || {
        let np = py.import(intern!(py, "numpy"))?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(np.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok([get("float64")?, get("float32")?, get("int64")?])
    })
}

/// The values of one info key over the batch (0 where a sub-env did not
/// report it), of the dtype Gymnasium's `_add_info` gives the column: the
/// type of the first value reported (`float` and `numpy.float64`: float64;
/// `numpy.float32`; `int` and `numpy.int64`: int64; `bool`: bool).
enum Values {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// One info value, by the column kind it belongs to.
enum Scalar {
    F64(f64),
    F32(f32),
    I64(i64),
    Bool(bool),
}

impl Scalar {
    /// The value, when it is one of the types above (`None` otherwise,
    /// or for an `int` beyond 64 bits).
    fn of(v: &Bound<'_, PyAny>) -> PyResult<Option<Scalar>> {
        let [f64_type, f32_type, i64_type] = scalars(v.py())?;
        let t = v.get_type();
        Ok(if v.is_exact_instance_of::<PyFloat>() || t.is(f64_type) {
            Some(Scalar::F64(v.extract::<f64>()?))
        } else if t.is(f32_type) {
            // A float32 widened to f64 and narrowed back: exact.
            Some(Scalar::F32(v.extract::<f64>()? as f32))
        } else if v.is_exact_instance_of::<PyBool>() {
            // Not `numpy.bool_`, which is no `numpy.number`: `_add_info`
            // puts those in a list.
            Some(Scalar::Bool(v.is_truthy()?))
        } else if v.is_exact_instance_of::<PyInt>() || t.is(i64_type) {
            v.extract::<i64>().ok().map(Scalar::I64)
        } else {
            None
        })
    }

    fn column(&self, n: usize) -> Values {
        match self {
            Scalar::F64(_) => Values::F64(vec![0.0; n]),
            Scalar::F32(_) => Values::F32(vec![0.0; n]),
            Scalar::I64(_) => Values::I64(vec![0; n]),
            Scalar::Bool(_) => Values::Bool(vec![false; n]),
        }
    }

    /// Stores the value at `i` when the column is of its kind.
    fn store(self, values: &mut Values, i: usize) -> bool {
        match (values, self) {
            (Values::F64(c), Scalar::F64(x)) => c[i] = x,
            (Values::F32(c), Scalar::F32(x)) => c[i] = x,
            (Values::I64(c), Scalar::I64(x)) => c[i] = x,
            (Values::Bool(c), Scalar::Bool(x)) => c[i] = x,
            _ => return false,
        }
        true
    }
}

/// One info key over the batch and its mask, as Gymnasium's `_add_info`
/// builds them.
struct InfoColumn {
    key: String,
    values: Values,
    mask: Vec<bool>,
}

/// The sub-results seen so far, while every one is regular.
struct Builder<'py> {
    n: usize,
    /// The first observation's dtype object: a later observation whose
    /// dtype is that same object has the same wire dtype, without
    /// [`wire_dtype`] reading it again (NumPy keeps one object per builtin
    /// dtype; another object equal to it still goes through `wire_dtype`).
    obs_descr: Option<Bound<'py, PyArrayDescr>>,
    obs_dtype: Option<DType>,
    obs_shape: Vec<usize>,
    obs: Vec<u8>,
    rewards: Vec<f64>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    infos: Vec<InfoColumn>,
}

impl<'py> Builder<'py> {
    fn new(n: usize) -> Self {
        Builder {
            n,
            obs_descr: None,
            obs_dtype: None,
            obs_shape: Vec::new(),
            obs: Vec::new(),
            rewards: Vec::with_capacity(n),
            terminated: Vec::with_capacity(n),
            truncated: Vec::with_capacity(n),
            infos: Vec::new(),
        }
    }

    /// Takes sub-env `i`'s `(obs, reward, terminated, truncated, info)`;
    /// `Ok(false)` when it is not regular (nothing of it taken).
    fn take(&mut self, i: usize, result: &Bound<'py, PyAny>) -> PyResult<bool> {
        let Ok(t) = result.cast_exact::<PyTuple>() else {
            return Ok(false);
        };
        if t.len() != 5 {
            return Ok(false);
        }
        // Borrowed from the tuple, which `result` keeps alive.
        let (obs, reward, terminated, truncated, info) = (
            t.get_borrowed_item(0)?,
            t.get_borrowed_item(1)?,
            t.get_borrowed_item(2)?,
            t.get_borrowed_item(3)?,
            t.get_borrowed_item(4)?,
        );
        let Ok(array) = obs.cast_exact::<PyUntypedArray>() else {
            return Ok(false);
        };
        let Ok(reward) = reward.cast::<PyFloat>() else {
            return Ok(false);
        };
        let (Ok(terminated), Ok(truncated)) = (terminated.is_truthy(), truncated.is_truthy())
        else {
            return Ok(false);
        };
        let Ok(info) = info.cast_exact::<PyDict>() else {
            return Ok(false);
        };
        let descr = array.dtype();
        let dtype = match (&self.obs_descr, self.obs_dtype) {
            (Some(first), Some(d)) if first.is(&descr) => d,
            _ => match wire_dtype(&descr) {
                Ok(d) => d,
                Err(_) => return Ok(false),
            },
        };
        if !array.is_c_contiguous() {
            return Ok(false);
        }
        match self.obs_dtype {
            None => {
                self.obs_dtype = Some(dtype);
                self.obs_descr = Some(descr);
                self.obs_shape = array.shape().to_vec();
                self.obs
                    .reserve_exact(self.n * array.len() * dtype.itemsize());
            }
            Some(d) if d == dtype && self.obs_shape == array.shape() => {}
            Some(_) => return Ok(false),
        }
        if !info.is_empty() && !self.take_info(i, &info)? {
            return Ok(false);
        }
        let nbytes = array.len() * dtype.itemsize();
        if nbytes > 0 {
            // SAFETY: a C-contiguous array's data pointer addresses
            // product(shape) × itemsize readable bytes; the array is alive
            // (borrowed) and this thread holds the GIL.
            let data = unsafe {
                std::slice::from_raw_parts((*array.as_array_ptr()).fields.data as *const u8, nbytes)
            };
            self.obs.extend_from_slice(data);
        }
        self.rewards.push(reward.value());
        self.terminated.push(terminated);
        self.truncated.push(truncated);
        Ok(true)
    }

    /// Sub-env `i`'s info, when flat: `str` keys (not starting with `_`,
    /// which Gymnasium's layout uses for masks) and [`Scalar`] values, each
    /// of its key's column kind. `Ok(false)` otherwise, with nothing of it
    /// taken.
    fn take_info(&mut self, i: usize, info: &Bound<'_, PyDict>) -> PyResult<bool> {
        let mut row: Vec<(usize, Scalar)> = Vec::with_capacity(info.len());
        let mut new: Vec<(String, Scalar)> = Vec::new();
        for (k, v) in info.iter() {
            let Ok(key) = k.cast_exact::<PyString>() else {
                return Ok(false);
            };
            let Ok(key) = key.to_cow() else {
                return Ok(false);
            };
            let Some(value) = Scalar::of(&v)? else {
                return Ok(false);
            };
            if key.starts_with('_') {
                return Ok(false);
            }
            match self.infos.iter().position(|c| c.key == key) {
                Some(column) => row.push((column, value)),
                None => new.push((key.into_owned(), value)),
            }
        }
        // Every kind checked before anything is stored.
        let fits = row.iter().all(|(c, v)| {
            matches!(
                (&self.infos[*c].values, v),
                (Values::F64(_), Scalar::F64(_))
                    | (Values::F32(_), Scalar::F32(_))
                    | (Values::I64(_), Scalar::I64(_))
                    | (Values::Bool(_), Scalar::Bool(_))
            )
        });
        if !fits {
            return Ok(false);
        }
        for (column, value) in row {
            let c = &mut self.infos[column];
            value.store(&mut c.values, i);
            c.mask[i] = true;
        }
        for (key, value) in new {
            let mut values = value.column(self.n);
            value.store(&mut values, i);
            let mut mask = vec![false; self.n];
            mask[i] = true;
            self.infos.push(InfoColumn { key, values, mask });
        }
        Ok(true)
    }

    /// The batched result, as `BatchedEnv.step`'s converts.
    fn finish(self) -> PyResult<Value> {
        let n = self.n;
        let dtype = self.obs_dtype.unwrap_or(DType::F64);
        let mut shape = Vec::with_capacity(self.obs_shape.len() + 1);
        shape.push(n);
        shape.extend_from_slice(&self.obs_shape);
        let obs = NdArray::from_bytes(dtype, shape, self.obs.into()).map_err(|e| {
            ConvertError::InvalidArray {
                reason: e.to_string(),
            }
        })?;
        let mut infos = Dict::with_capacity(2 * self.infos.len());
        for column in self.infos {
            let values = match column.values {
                Values::F64(v) => NdArray::from_vec(v),
                Values::F32(v) => NdArray::from_vec(v),
                Values::I64(v) => NdArray::from_vec(v),
                Values::Bool(v) => NdArray::from_vec(v),
            };
            infos.insert(column.key.clone(), values);
            infos.insert(format!("_{}", column.key), NdArray::from_vec(column.mask));
        }
        Ok(Value::Tuple(vec![
            Value::Array(obs),
            Value::Array(NdArray::from_vec(self.rewards)),
            Value::Array(NdArray::from_vec(self.terminated)),
            Value::Array(NdArray::from_vec(self.truncated)),
            Value::Dict(infos),
        ]))
    }
}

/// Registers `BatchedCore`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBatchedCore>()
}
