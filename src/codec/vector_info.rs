//! Gymnasium's vector info layout, the one implementation: [`gather`]
//! builds it from one info per env (the Rust host's `BatchedEnv`), [`split`]
//! takes it apart into one info per sub-env (the vector client, for a
//! batched resource's info).
//!
//! The layout is what Gymnasium's `VectorEnv._add_info` gives env by env:
//! key `k` holds one entry per env — a `float64`, `int64` or `bool` array
//! for numbers, the arrays stacked for arrays of one shape, a list (`None`
//! where absent) for anything else, where Gymnasium makes an object array —
//! and `_k` is the bool mask of the envs that reported `k` (zero entries
//! where they did not); keys come in the order they first appear; dicts
//! nest, each with its own masks.
//!
//! Its users: the Rust host's `BatchedEnv` and the Python one (through the
//! extension's `_native.batch_infos`) build the info they send with
//! [`gather`]; the vector client splits a batched resource's info with
//! [`split`] where it needs one dict per sub-env. The one shortcut beside
//! it is the Python host's fast path for a `BatchedEnv` of Gymnasium envs
//! (`python/src/host/batched.rs`), which writes flat float infos straight
//! into this layout (`python/tests/test_batched_fast.py` pins it equal).
//! The learner's dict (Gymnasium's own, with object arrays) is Gymnasium's
//! `_add_info`, shortcut by the extension's `client/vector_infos.rs`.

use crate::codec::stack::{stack_filled, unstack};
use crate::codec::{DType, Dict, NdArray, ScalarKind, Value};

/// Gymnasium's vector info layout for `n` envs from their infos
/// (`infos[k]` is env `indices[k]`'s): key `k` gets one entry per env —
/// a `float64`, `int64` or `bool` array for numbers, the arrays stacked
/// for arrays of one shape, a list (`None` where absent) otherwise — and
/// `_k` the bool mask of the envs that have it; dicts nest.
pub fn gather(n: usize, indices: &[usize], infos: &[Dict]) -> Dict {
    let mut keys: Vec<&str> = Vec::new();
    for d in infos {
        for k in d.keys() {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    let mut out = Dict::with_capacity(2 * keys.len());
    for key in keys {
        let mut values: Vec<Option<&Value>> = vec![None; n];
        for (&i, d) in indices.iter().zip(infos) {
            if let (Some(slot), Some(v)) = (values.get_mut(i), d.get(key)) {
                *slot = Some(v);
            }
        }
        let mask: Vec<bool> = values.iter().map(Option::is_some).collect();
        let present: Vec<&Value> = values.iter().flatten().copied().collect();
        let column = if present.iter().all(|v| matches!(v, Value::Dict(_))) {
            let (idx, dicts): (Vec<usize>, Vec<Dict>) = values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.and_then(Value::as_dict).map(|d| (i, d.clone())))
                .unzip();
            Value::Dict(gather(n, &idx, &dicts))
        } else if present.iter().all(|v| {
            matches!(
                v,
                Value::Float(_) | Value::Int(_) | Value::Bool(_) | Value::Array(_)
            )
        }) && same_kind(&present)
        {
            stack_filled(&values.iter().map(|v| v.cloned()).collect::<Vec<_>>())
        } else {
            Value::List(
                values
                    .iter()
                    .map(|v| v.cloned().unwrap_or(Value::Null))
                    .collect(),
            )
        };
        out.insert(key, column);
        out.insert(format!("_{key}"), NdArray::from_vec(mask));
    }
    out
}

/// Whether the values are all of one scalar kind, or all arrays.
fn same_kind(values: &[&Value]) -> bool {
    let kind = |v: &Value| std::mem::discriminant(v);
    values.windows(2).all(|w| kind(w[0]) == kind(w[1]))
}

/// Splits a batched env's info (Gymnasium's vector layout: key `k` holds
/// one entry per sub-env, `_k` the bool mask of those that have it; dicts
/// nest) into one info per sub-env. A key without a mask of `b` booleans,
/// or whose value cannot be split into `b` entries, is given whole to every
/// sub-env.
pub fn split(info: &Dict, b: usize) -> Vec<Dict> {
    let mut out = vec![Dict::with_capacity(info.len()); b];
    for (key, value) in info.iter() {
        if let Some(base) = key.strip_prefix('_') {
            if info.contains_key(base) {
                continue;
            }
        }
        // `_key`, found without building the string.
        let mask_of = info
            .iter()
            .find(|(k, _)| k.strip_prefix('_') == Some(key))
            .map(|(_, m)| m);
        let mask: Option<Vec<bool>> = mask_of.and_then(|m| mask(m, b));
        let rows: Option<Vec<Value>> = match value {
            Value::Dict(d) => Some(split(d, b).into_iter().map(Value::Dict).collect()),
            Value::Array(_) | Value::List(_) => unstack(value, b)
                .ok()
                .map(|r| r.into_iter().map(scalar).collect()),
            _ => None,
        };
        match (mask, rows) {
            (Some(mask), Some(rows)) => {
                for ((d, row), on) in out.iter_mut().zip(rows).zip(mask) {
                    if on {
                        d.insert(key, row);
                    }
                }
            }
            _ => {
                for d in &mut out {
                    d.insert(key, value.clone());
                }
            }
        }
    }
    out
}

/// A mask of `b` entries (a 1-D array of `b` elements, or a list or tuple
/// of `b` numbers or bools), nonzero meaning set; `None` for anything else.
fn mask(v: &Value, b: usize) -> Option<Vec<bool>> {
    match v {
        Value::Array(a) if a.len() == b && a.ndim() == 1 => Some(
            (0..b)
                .map(|i| a.get_f64(i).is_none_or(|x| x != 0.0))
                .collect(),
        ),
        Value::List(items) | Value::Tuple(items) if items.len() == b => items
            .iter()
            .map(|x| {
                x.as_scalar_f64()
                    .or_else(|| x.as_bool().map(|t| t as u8 as f64))
                    .map(|x| x != 0.0)
            })
            .collect(),
        _ => None,
    }
}

/// A 0-d array as the scalar a single env would have sent (a float64,
/// int64 or bool element); other dtypes stay 0-d arrays.
fn scalar(v: Value) -> Value {
    let Value::Array(a) = &v else { return v };
    if a.ndim() != 0 {
        return v;
    }
    let d = a.dtype().to_native();
    match (d.kind(), d.itemsize()) {
        (ScalarKind::Float, 8) => a.get_f64(0).map_or(v, Value::Float),
        (ScalarKind::Bool, _) => a.get_f64(0).map_or(v, |x| Value::Bool(x != 0.0)),
        (ScalarKind::Int, 8) if d == DType::I64 => a
            .to_vec::<i64>()
            .ok()
            .and_then(|x| x.first().copied())
            .map_or(v, Value::Int),
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`gather`] builds, [`split`] takes apart: every env's info back,
    /// numbers as a single env sends them.
    #[test]
    fn split_undoes_gather() {
        let infos = vec![
            Dict::new().with("x", 1.5).with("n", 3i64),
            Dict::new().with("x", 2.5),
            Dict::new().with("n", 4i64).with("flag", true),
        ];
        let gathered = gather(4, &[0, 2, 3], &infos);
        let keys: Vec<&str> = gathered.keys().collect();
        assert_eq!(keys, ["x", "_x", "n", "_n", "flag", "_flag"]);
        assert_eq!(
            gathered
                .get("_x")
                .and_then(Value::as_array)
                .and_then(|a| a.to_vec::<bool>().ok()),
            Some(vec![true, false, true, false])
        );
        let back = split(&gathered, 4);
        assert_eq!(back[0], infos[0]);
        assert!(back[1].is_empty());
        assert_eq!(back[2], infos[1]);
        assert_eq!(back[3], infos[2]);
    }

    #[test]
    fn masks_read_arrays_and_lists() {
        let array = Value::from(NdArray::from_vec(vec![true, false, true]));
        assert_eq!(mask(&array, 3), Some(vec![true, false, true]));
        assert_eq!(mask(&array, 2), None);
        let list = Value::List(vec![Value::Int(0), Value::Bool(true), Value::Float(2.0)]);
        assert_eq!(mask(&list, 3), Some(vec![false, true, true]));
        assert_eq!(mask(&Value::List(vec![Value::from("x")]), 1), None);
    }
}
