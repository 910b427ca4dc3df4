//! Batching values along a new leading axis, and splitting them back.

use crate::codec::{DType, Dict, NdArray, Value};
use bytes::Bytes;

/// Stacks values along a new leading axis: arrays of one dtype and shape
/// into one array (native byte order), numbers into a 1-D `float64` array
/// (`int64` when all are integers, `uint64` when all are unsigned),
/// booleans into a `bool` array, dicts with the same keys and tuples (or
/// lists) of the same length field by field. Anything else is gathered into
/// a list of the values.
pub fn stack(items: &[&Value]) -> Value {
    let Some(first) = items.first() else {
        return Value::List(Vec::new());
    };
    let gathered = || Value::List(items.iter().map(|v| (*v).clone()).collect());
    match first {
        Value::Array(_) => {
            let arrays: Option<Vec<&NdArray>> = items.iter().map(|v| v.as_array()).collect();
            match arrays.and_then(|a| stack_arrays(&a)) {
                Some(a) => Value::Array(a),
                None => gathered(),
            }
        }
        Value::Bool(_) => {
            let b: Option<Vec<bool>> = items.iter().map(|v| v.as_bool()).collect();
            b.map_or_else(gathered, |b| Value::Array(NdArray::from_vec(b)))
        }
        Value::Int(_) | Value::UInt(_) | Value::Float(_) => {
            if items.iter().all(|v| matches!(v, Value::Int(_))) {
                let v: Vec<i64> = items.iter().filter_map(|v| v.as_i64()).collect();
                Value::Array(NdArray::from_vec(v))
            } else if items.iter().all(|v| matches!(v, Value::UInt(_))) {
                let v: Vec<u64> = items.iter().filter_map(|v| v.as_u64()).collect();
                Value::Array(NdArray::from_vec(v))
            } else {
                let v: Option<Vec<f64>> = items.iter().map(|v| v.as_f64()).collect();
                v.map_or_else(gathered, |v| Value::Array(NdArray::from_vec(v)))
            }
        }
        Value::Dict(d0) => {
            let dicts: Option<Vec<&Dict>> = items
                .iter()
                .map(|v| v.as_dict().filter(|d| d.keys().eq(d0.keys())))
                .collect();
            let Some(dicts) = dicts else {
                return gathered();
            };
            let mut out = Dict::with_capacity(d0.len());
            for key in d0.keys() {
                let column: Vec<&Value> = dicts.iter().filter_map(|d| d.get(key)).collect();
                out.insert(key, stack(&column));
            }
            Value::Dict(out)
        }
        Value::Tuple(t0) | Value::List(t0) => {
            let seqs: Option<Vec<&[Value]>> = items
                .iter()
                .map(|v| match (first, v) {
                    (Value::Tuple(_), Value::Tuple(t)) | (Value::List(_), Value::List(t))
                        if t.len() == t0.len() =>
                    {
                        Some(t.as_slice())
                    }
                    _ => None,
                })
                .collect();
            let Some(seqs) = seqs else {
                return gathered();
            };
            let columns: Vec<Value> = (0..t0.len())
                .map(|k| stack(&seqs.iter().map(|s| &s[k]).collect::<Vec<_>>()))
                .collect();
            match first {
                Value::Tuple(_) => Value::Tuple(columns),
                _ => Value::List(columns),
            }
        }
        _ => gathered(),
    }
}

fn stack_arrays(arrays: &[&NdArray]) -> Option<NdArray> {
    let first = arrays.first()?;
    let dtype: DType = first.dtype().to_native();
    let row = first.as_bytes().len();
    let mut data = Vec::with_capacity(row.checked_mul(arrays.len())?);
    for a in arrays {
        if a.dtype().to_native() != dtype || a.shape() != first.shape() {
            return None;
        }
        // Native rows are copied as they are (no per-row clone: BENCHMARKS.md,
        // "Vector envs and throughput").
        if a.dtype().is_native() {
            data.extend_from_slice(a.as_bytes());
        } else {
            data.extend_from_slice(a.to_native().as_bytes());
        }
    }
    let mut shape = Vec::with_capacity(first.ndim() + 1);
    shape.push(arrays.len());
    shape.extend_from_slice(first.shape());
    NdArray::from_bytes(dtype, shape, Bytes::from(data)).ok()
}

/// [`stack`] with missing entries (failed envs) filled with zeros shaped
/// like the first present one; `Null` when none is present.
pub fn stack_filled(items: &[Option<Value>]) -> Value {
    let Some(template) = items.iter().flatten().next() else {
        return Value::Null;
    };
    // The zeros are built only when an entry is missing (not on every
    // vector step: BENCHMARKS.md, "Vector envs and throughput").
    let filler = if items.iter().any(Option::is_none) {
        zeros_like(template)
    } else {
        Value::Null
    };
    let refs: Vec<&Value> = items
        .iter()
        .map(|v| v.as_ref().unwrap_or(&filler))
        .collect();
    stack(&refs)
}

/// A value of the same structure with every number zero and every array
/// zero-filled (strings, bytes and other leaves become `Null`).
pub fn zeros_like(value: &Value) -> Value {
    match value {
        Value::Bool(_) => Value::Bool(false),
        Value::Int(_) => Value::Int(0),
        Value::UInt(_) => Value::UInt(0),
        Value::Float(_) => Value::Float(0.0),
        Value::Array(a) => NdArray::zeros(a.dtype().to_native(), a.shape().to_vec())
            .map_or(Value::Null, Value::Array),
        Value::Dict(d) => Value::Dict(d.iter().map(|(k, v)| (k, zeros_like(v))).collect()),
        Value::Tuple(t) => Value::Tuple(t.iter().map(zeros_like).collect()),
        Value::List(t) => Value::List(t.iter().map(zeros_like).collect()),
        _ => Value::Null,
    }
}

/// Splits a stacked value along its first axis into `n` values: an array
/// of leading dimension `n` into its rows (sharing its memory), a dict or
/// tuple field by field, a list of `n` items into its items.
pub fn unstack(value: &Value, n: usize) -> Result<Vec<Value>, String> {
    match value {
        Value::Array(a) => {
            if a.shape().first() != Some(&n) {
                return Err(format!(
                    "an array of shape {:?} cannot be split into {n} actions",
                    a.shape()
                ));
            }
            let row_shape = a.shape()[1..].to_vec();
            let row = a.as_bytes().len() / n.max(1);
            (0..n)
                .map(|i| {
                    NdArray::from_bytes(
                        a.dtype(),
                        row_shape.clone(),
                        a.bytes().slice(i * row..(i + 1) * row),
                    )
                    .map(Value::Array)
                    .map_err(|e| e.to_string())
                })
                .collect()
        }
        Value::Dict(d) => {
            let mut rows = vec![Dict::with_capacity(d.len()); n];
            for (k, v) in d.iter() {
                for (row, item) in rows.iter_mut().zip(unstack(v, n)?) {
                    row.insert(k, item);
                }
            }
            Ok(rows.into_iter().map(Value::Dict).collect())
        }
        Value::Tuple(t) => {
            let mut rows = vec![Vec::with_capacity(t.len()); n];
            for v in t {
                for (row, item) in rows.iter_mut().zip(unstack(v, n)?) {
                    row.push(item);
                }
            }
            Ok(rows.into_iter().map(Value::Tuple).collect())
        }
        Value::List(items) if items.len() == n => Ok(items.clone()),
        other => Err(format!(
            "a {} cannot be split into {n} actions",
            other.type_name()
        )),
    }
}
