//! What the host's step paths share: a step's outcome ([`StepOutcome`]),
//! the conversion of a Python result into it ([`convert_result`]) and the
//! one call shape the fast paths take ([`sole_array`]).

use crate::common::convert::{from_py_bounded, ArrayMode, ConvertError};
use pyo3::prelude::*;
use unienv_remote::{Dict, NdArray, Value};

/// What a step gives the host: `Ok(Ok(value))`, `Ok(Err(too_large))` (it
/// ran, but the result is over the message limit), or the Python error.
pub(crate) type StepOutcome = PyResult<Result<Value, ConvertError>>;

/// A call's Python result converted for the wire as the host converts
/// every result (bounded by `max_message_size`).
pub(crate) fn convert_result(result: &Bound<'_, PyAny>, max_message_size: usize) -> StepOutcome {
    match from_py_bounded(result, ArrayMode::Copy, max_message_size) {
        Ok(value) => Ok(Ok(value)),
        Err(Ok(too_large)) => Ok(Err(too_large)),
        Err(Err(e)) => Err(e),
    }
}

/// The action of `step(action)` called with one array and nothing else:
/// the only call the fast paths take.
pub(crate) fn sole_array<'a>(args: &'a [Value], kwargs: &Dict) -> Option<&'a NdArray> {
    match (args, kwargs.is_empty()) {
        ([Value::Array(action)], true) => Some(action),
        _ => None,
    }
}
