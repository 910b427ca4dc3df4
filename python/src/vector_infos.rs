//! A vector step's infos in Gymnasium's vector layout, built here when they
//! allow it, instead of one Python dict per sub-env that the Python side
//! then gathers again (`unienv_remote.vector._gather_infos`).
//!
//! The layout is what Gymnasium's `VectorEnv._add_info` gives env by env:
//! key `k` holds one entry per env (zero where an env did not report it),
//! `_k` the bool mask of the envs that did, keys in the first reporting
//! env's order. Built here only for the case `_gather_infos` writes a column
//! at a time: every env that reports has the same keys, no key starts with
//! `_` or is `final_obs`, and each key's values are all floats (a `float64`
//! column, as `numpy.zeros(n, float)`), all ints (`int64`), all bools
//! (`bool`), or all arrays of one dtype and shape (stacked, byte order
//! kept). Anything else returns `None` and goes the general way.

use crate::convert;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use unienv_remote::{DType, Dict, NdArray, Value};

/// One gathered column: the values of every env, zero where one did not
/// report.
enum Column {
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
    Array {
        dtype: DType,
        shape: Vec<usize>,
        data: Vec<u8>,
    },
}

/// The scalars `pick` reads from `key`'s value of each env in `present`,
/// at their env's place among `infos.len()` (the default elsewhere); `None`
/// when one is missing or not of `pick`'s kind.
fn scalars<T: Copy + Default>(
    infos: &[Dict],
    present: &[usize],
    key: &str,
    pick: fn(&Value) -> Option<T>,
) -> Option<Vec<T>> {
    let mut out = vec![T::default(); infos.len()];
    for &i in present {
        out[i] = pick(infos[i].get(key)?)?;
    }
    Some(out)
}

/// The column of `key` over the envs in `present` (`infos.len()` envs in
/// all), when every one holds a value of `first`'s kind (and, for arrays,
/// its dtype and shape).
fn column(infos: &[Dict], present: &[usize], key: &str, first: &Value) -> Option<Column> {
    match first {
        Value::Float(_) => scalars(infos, present, key, |v| match v {
            Value::Float(x) => Some(*x),
            _ => None,
        })
        .map(Column::F64),
        Value::Int(_) => scalars(infos, present, key, |v| match v {
            Value::Int(x) => Some(*x),
            _ => None,
        })
        .map(Column::I64),
        Value::Bool(_) => scalars(infos, present, key, |v| match v {
            Value::Bool(x) => Some(*x),
            _ => None,
        })
        .map(Column::Bool),
        Value::Array(a) => {
            let (dtype, shape) = (a.dtype(), a.shape().to_vec());
            let size = a.as_bytes().len();
            let mut data = vec![0u8; infos.len() * size];
            for &i in present {
                let Some(Value::Array(b)) = infos[i].get(key) else {
                    return None;
                };
                if b.dtype() != dtype || b.shape() != shape.as_slice() {
                    return None;
                }
                data[i * size..(i + 1) * size].copy_from_slice(b.as_bytes());
            }
            Some(Column::Array { dtype, shape, data })
        }
        _ => None,
    }
}

/// The infos of a step's envs as Gymnasium's vector info dict, or `None`
/// when they need the general way (see the module's docs). Not for a reset,
/// whose unused envs' infos the Python side leaves out.
pub(crate) fn gathered<'py>(
    py: Python<'py>,
    infos: &[Dict],
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let present: Vec<usize> = (0..infos.len()).filter(|&i| !infos[i].is_empty()).collect();
    let Some(&head) = present.first() else {
        return Ok(None);
    };
    let first = &infos[head];
    if first.contains_key("final_obs") || present.iter().any(|&i| infos[i].len() != first.len()) {
        return Ok(None);
    }
    let mut columns = Vec::with_capacity(first.len());
    for (key, value) in first.iter() {
        if key.starts_with('_') {
            return Ok(None);
        }
        // Equal lengths and every key found: the same keys.
        let Some(c) = column(infos, &present, key, value) else {
            return Ok(None);
        };
        columns.push((key, c));
    }
    let n = infos.len();
    let mask: Vec<bool> = infos.iter().map(|d| !d.is_empty()).collect();
    let out = PyDict::new(py);
    for (key, c) in columns {
        let values = match c {
            Column::F64(v) => convert::f64_column(py, &v)?,
            Column::I64(v) => convert::array_to_py(py, &NdArray::from_vec(v))?,
            Column::Bool(v) => convert::bool_column(py, &v)?,
            Column::Array { dtype, shape, data } => {
                let mut full = Vec::with_capacity(shape.len() + 1);
                full.push(n);
                full.extend_from_slice(&shape);
                convert::new_array(py, dtype, &full, &data)?
            }
        };
        out.set_item(key, values)?;
        out.set_item(format!("_{key}"), convert::bool_column(py, &mask)?)?;
    }
    Ok(Some(out))
}
