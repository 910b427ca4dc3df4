//! A sub-env's latest observation, kept for masked resets.

use crate::codec::{NdArray, Value};
use std::sync::Arc;

/// A sub-env's latest observation (kept for masked resets): its value, or
/// its row of a batched resource's observation array (split out only if a
/// masked reset needs it).
#[derive(Clone)]
pub(super) enum Latest {
    Value(Value),
    Row(Arc<NdArray>, usize),
}

impl Latest {
    /// The observation as a value.
    pub(super) fn value(&self) -> Value {
        match self {
            Latest::Value(v) => v.clone(),
            Latest::Row(a, i) => row(a, *i),
        }
    }
}

/// Row `i` of an array whose leading dimension is at least `i + 1`: what
/// [`unstack`](crate::codec::stack::unstack) gives for it (a slice sharing
/// the array's memory).
pub(super) fn row(a: &NdArray, i: usize) -> Value {
    let n = a.shape().first().copied().unwrap_or(0).max(1);
    let size = a.as_bytes().len() / n;
    NdArray::from_bytes(
        a.dtype(),
        a.shape()[1..].to_vec(),
        a.bytes().slice(i * size..(i + 1) * size),
    )
    .map_or(Value::Null, Value::Array)
}
