//! `RemoteVectorEnv.call` / `get_attr` / `set_attr` over our servers'
//! attribute extension (SPEC.md, "Extension: sub-env attributes"): one
//! request per resource, on the vector env's own connection.

use super::PyVectorEnv;
use crate::client::remote::client_error;
use crate::common::convert::{self, ArrayMode};
use pyo3::exceptions::{PyIndexError, PyNotImplementedError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use unienv_remote::client::vector::{AttributeError, BlockingVectorEnv};
use unienv_remote::{Dict, Value};

/// Runs `f` on the vector env without the GIL.
fn with_env<T: Send>(
    py: Python<'_>,
    env: &PyVectorEnv,
    f: impl FnOnce(&mut BlockingVectorEnv) -> Result<T, AttributeError> + Send,
) -> PyResult<T> {
    let result = py.detach(|| env.env.lock().as_mut().map(f));
    match result {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(attribute_error(py, e)),
        None => Err(PyRuntimeError::new_err("the vector env is closed")),
    }
}

fn attribute_error(py: Python<'_>, e: AttributeError) -> PyErr {
    match e {
        AttributeError::Client(e) => client_error(py, e),
        e @ AttributeError::Unsupported { .. } => PyNotImplementedError::new_err(e.to_string()),
        e @ AttributeError::NoResource { .. } => PyIndexError::new_err(e.to_string()),
        e => PyRuntimeError::new_err(e.to_string()),
    }
}

/// Whether resource `index`'s server lists the attribute extension.
#[pyfunction]
fn vector_supports_attributes(env: &PyVectorEnv, index: usize) -> bool {
    env.env
        .lock()
        .as_ref()
        .is_some_and(|e| e.supports_attributes(index))
}

/// `ext:call` on resource `index`: one result per sub-env.
#[pyfunction]
fn vector_call_attribute<'py>(
    py: Python<'py>,
    env: &PyVectorEnv,
    index: usize,
    name: String,
    args: &Bound<'py, PyList>,
    kwargs: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyList>> {
    let args: Vec<Value> = args
        .iter()
        .map(|a| convert::from_py(&a, ArrayMode::Copy))
        .collect::<PyResult<_>>()?;
    let mut call_kwargs = Dict::new();
    for (k, v) in kwargs.iter() {
        call_kwargs.insert(
            k.extract::<String>()?,
            convert::from_py(&v, ArrayMode::Copy)?,
        );
    }
    let values = with_env(py, env, move |e| {
        e.call_attribute(index, &name, args, call_kwargs)
    })?;
    let items = values
        .iter()
        .map(|v| convert::to_py(py, v))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// `ext:set_attr` on resource `index`: `values` one per sub-env.
#[pyfunction]
fn vector_set_attribute(
    py: Python<'_>,
    env: &PyVectorEnv,
    index: usize,
    name: String,
    values: &Bound<'_, PyList>,
) -> PyResult<()> {
    let values: Vec<Value> = values
        .iter()
        .map(|a| convert::from_py(&a, ArrayMode::Copy))
        .collect::<PyResult<_>>()?;
    with_env(py, env, move |e| e.set_attribute(index, &name, values))
}

/// Protocol v1's `render` call on resource `index`.
#[pyfunction]
fn vector_render<'py>(
    py: Python<'py>,
    env: &PyVectorEnv,
    index: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let value = with_env(py, env, move |e| e.render_resource(index))?;
    convert::to_py(py, &value)
}

/// Registers the functions.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(vector_supports_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(vector_call_attribute, m)?)?;
    m.add_function(wrap_pyfunction!(vector_render, m)?)?;
    m.add_function(wrap_pyfunction!(vector_set_attribute, m)?)
}
