//! The Python host's side of the attribute extension (SPEC.md, "Extension:
//! sub-env attributes"): `ext:call` / `ext:set_attr` on a hosted env's
//! sub-envs (a `BatchedEnv`'s, or the env itself), through
//! `unienv_remote.server`'s `_call_attribute` / `_set_attribute`, which
//! reach them as Gymnasium's vector envs do (`get_wrapper_attr`,
//! `set_wrapper_attr` on a Gymnasium env).

use super::PyHost;
use crate::common::convert::to_py;
use crate::host::outcome::convert_result;
use crate::host::python::{host_error, with_python};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use unienv_remote::host::{HostError, HostResult};
use unienv_remote::{Dict, Value};

/// What `ext:call` gives: one value per sub-env.
pub(super) type AttrResult = HostResult<Vec<Value>>;

/// `unienv_remote.server.<function>`.
fn helper<'py>(py: Python<'py>, function: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import(intern!(py, "unienv_remote.server"))?
        .getattr(function)
}

fn values_to_py<'py>(py: Python<'py>, values: &[Value]) -> PyResult<Bound<'py, PyList>> {
    let items = values
        .iter()
        .map(|v| to_py(py, v))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// `ext:call` on resource `index`: one value per sub-env, each bounded by
/// the server's `max_message_size`.
pub(super) fn call(
    host: &mut PyHost,
    index: usize,
    name: &str,
    args: &[Value],
    kwargs: &Dict,
) -> AttrResult {
    host.after_call.clear();
    let max_message_size = host.max_message_size;
    let r = host.resource(index)?;
    with_python(|py| call_in(py, r.obj.bind(py), name, args, kwargs, max_message_size))
}

fn call_in(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    name: &str,
    args: &[Value],
    kwargs: &Dict,
    max_message_size: usize,
) -> AttrResult {
    let run = || -> PyResult<Bound<'_, PyAny>> {
        let pkwargs = PyDict::new(py);
        for (k, v) in kwargs.iter() {
            pkwargs.set_item(k, to_py(py, v)?)?;
        }
        helper(py, "_call_attribute")?.call1((obj, name, values_to_py(py, args)?, pkwargs))
    };
    let results = run().map_err(|e| failed(py, name, e))?;
    let mut values = Vec::new();
    for (i, result) in results
        .try_iter()
        .map_err(|e| failed(py, name, e))?
        .enumerate()
    {
        let result = result.map_err(|e| failed(py, name, e))?;
        let value = match convert_result(&result, max_message_size) {
            Ok(Ok(v)) => v,
            Ok(Err(too_large)) => return Err(HostError::result_too_large(too_large.to_string())),
            Err(e) => {
                let why = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
                let kind = result
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default();
                return Err(HostError::serialization(format!(
                    "the value of '{name}' from sub-env {i} (a {kind}) cannot travel: the codec carries arrays, \
                     numbers, bools, strings, bytes, None, lists, tuples and str-keyed dicts of them ({why})"
                )));
            }
        };
        values.push(value);
    }
    Ok(values)
}

/// `ext:set_attr` on resource `index`: `values[i]` to sub-env `i`.
pub(super) fn set(host: &mut PyHost, index: usize, name: &str, values: &[Value]) -> HostResult<()> {
    host.after_call.clear();
    let r = host.resource(index)?;
    with_python(|py| set_in(py, r.obj.bind(py), name, values))
}

fn set_in(py: Python<'_>, obj: &Bound<'_, PyAny>, name: &str, values: &[Value]) -> HostResult<()> {
    let run = || -> PyResult<()> {
        helper(py, "_set_attribute")?.call1((obj, name, values_to_py(py, values)?))?;
        Ok(())
    };
    run().map_err(|e| failed(py, name, e))
}

/// A Python exception: logged with its traceback, then the host's error
/// (a `RequestRefused` is a certain refusal).
fn failed(py: Python<'_>, name: &str, e: PyErr) -> HostError {
    crate::common::log::exception(py, &format!("attribute '{name}'"), true, &e);
    host_error(py, e)
}
