//! `_native.batch_infos(n, indices, infos)`: the Python `BatchedEnv`'s info
//! in Gymnasium's vector layout, built by the crate's one implementation
//! ([`unienv_remote::codec::vector_info::gather`]), which the Rust host's
//! `BatchedEnv` uses too: both hosts send the same layout for the same infos.

use crate::common::convert::{dict_to_py, from_py, ArrayMode};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use unienv_remote::codec::vector_info::gather;
use unienv_remote::{Dict, Value};

/// The vector info of `n` sub-envs from the infos of those at `indices`
/// (`infos[k]` is sub-env `indices[k]`'s).
#[pyfunction]
fn batch_infos<'py>(
    py: Python<'py>,
    n: usize,
    indices: Vec<usize>,
    infos: Vec<Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    if indices.len() != infos.len() {
        return Err(PyTypeError::new_err(format!(
            "{} indices for {} infos",
            indices.len(),
            infos.len()
        )));
    }
    let mut dicts: Vec<Dict> = Vec::with_capacity(infos.len());
    for info in &infos {
        // The values are converted back into Python at once: read in place.
        match from_py(info.as_any(), ArrayMode::Borrow)? {
            Value::Dict(d) => dicts.push(d),
            other => {
                return Err(PyTypeError::new_err(format!(
                    "an info is a dict, not {}",
                    other.type_name()
                )))
            }
        }
    }
    dict_to_py(py, &gather(n, &indices, &dicts))
}

/// Registers `batch_infos`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(batch_infos, m)?)
}
