//! A vector step's (or reset's) infos in Gymnasium's vector layout, built
//! here when they allow it, instead of one Python dict per sub-env that the
//! Python side then gathers with Gymnasium's own `_add_info`
//! (`unienv_remote.vector._gather_infos`, the general way). A batched
//! resource's info, which arrives in that layout, is read column by column
//! as it arrived ([`StepInfos::blocks`]), never split into one dict per
//! sub-env.
//!
//! The layout is what Gymnasium's `VectorEnv._add_info` gives env by env:
//! key `k` holds one entry per env (zero where an env did not report it),
//! `_k` the bool mask of the envs that did, keys in the first reporting
//! env's order. Built here only for the regular case, a column at a time:
//! every env that reports has the same keys, no key starts with
//! `_` or is `final_obs`, and each key's values are all floats (a `float64`
//! column, as `numpy.zeros(n, float)`), all ints (`int64`), all bools
//! (`bool`), or all arrays of one dtype and shape (stacked, byte order
//! kept). A batched resource's info is read the same way as the dicts its
//! sub-envs would have had: each key `k` an array of native byte order
//! with one row per sub-env and a `_k` bool mask, the masks of its keys
//! alike (a sub-env has all of its keys or none); a 1-D `float64`, `int64`
//! or `bool` column gives the scalars a single env would have sent.
//! Anything else returns `None` and goes the general way.

use crate::common::convert;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use unienv_remote::client::vector::{InfoBlock, StepInfos};
use unienv_remote::{DType, Dict, NdArray, ScalarKind, Value};

/// What a key holds in one env: a scalar (as its `float64`, `int64` or
/// `bool` column's dtype) or an array of a dtype and shape.
#[derive(PartialEq, Clone, Copy)]
enum Kind<'a> {
    Scalar(DType),
    Array(DType, &'a [usize]),
}

/// An entry's bytes in its column: a scalar's own, or an array's.
enum Entry<'a> {
    Scalar([u8; 8], usize),
    Array(&'a [u8]),
}

impl Entry<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Entry::Scalar(b, len) => &b[..*len],
            Entry::Array(b) => b,
        }
    }
}

/// A single env's value: its kind and its entry in the column.
fn value_cell(v: &Value) -> Option<(Kind<'_>, Entry<'_>)> {
    Some(match v {
        Value::Float(x) => (Kind::Scalar(DType::F64), Entry::Scalar(x.to_ne_bytes(), 8)),
        Value::Int(x) => (Kind::Scalar(DType::I64), Entry::Scalar(x.to_ne_bytes(), 8)),
        Value::Bool(x) => (
            Kind::Scalar(DType::BOOL),
            Entry::Scalar([u8::from(*x), 0, 0, 0, 0, 0, 0, 0], 1),
        ),
        Value::Array(a) => (
            Kind::Array(a.dtype(), a.shape()),
            Entry::Array(a.as_bytes()),
        ),
        _ => return None,
    })
}

/// The kind of each row of a batched info's column `a` (native, one row
/// per sub-env), what the sub-env's own dict would hold (a 1-D `float64`,
/// `int64` or `bool` column's rows are scalars, other rows arrays), and a
/// row's size in bytes.
fn row_kind(a: &NdArray) -> Option<(Kind<'_>, usize)> {
    let (&w, rest) = a.shape().split_first()?;
    let size = a.as_bytes().len().checked_div(w)?;
    let d = a.dtype();
    let scalar = rest.is_empty() && (d == DType::F64 || d == DType::I64 || d == DType::BOOL);
    let kind = if scalar {
        Kind::Scalar(d)
    } else {
        Kind::Array(d, rest)
    };
    Some((kind, size))
}

/// A batched resource's info, checked for reading column by column: its
/// keys (in order) with their columns, and which sub-envs have them.
struct Block<'a> {
    start: usize,
    keys: Vec<(&'a str, &'a NdArray)>,
    present: Vec<bool>,
}

impl<'a> Block<'a> {
    /// `None` when the info cannot be read whole (see the module's docs).
    fn new(b: &'a InfoBlock) -> Option<Block<'a>> {
        let w = b.width;
        let mut keys = Vec::with_capacity(b.info.len() / 2);
        let mut present: Option<Vec<bool>> = None;
        for (key, value) in b.info.iter() {
            if key
                .strip_prefix('_')
                .is_some_and(|base| b.info.contains_key(base))
            {
                continue; // a mask
            }
            let Value::Array(a) = value else { return None };
            if key.starts_with('_')
                || key == "final_obs"
                || !a.dtype().is_native()
                || a.shape().first() != Some(&w)
            {
                return None;
            }
            // `_key`, found without building the string.
            let mask_of = b
                .info
                .iter()
                .find(|(k, _)| k.strip_prefix('_') == Some(key));
            let Some((_, Value::Array(m))) = mask_of else {
                return None;
            };
            if m.dtype().kind() != ScalarKind::Bool || m.shape() != [w] {
                return None;
            }
            let mask: Vec<bool> = m.as_bytes().iter().map(|&x| x != 0).collect();
            match &present {
                Some(p) if *p != mask => return None,
                Some(_) => {}
                None => present = Some(mask),
            }
            keys.push((key, a));
        }
        Some(Block {
            start: b.start,
            keys,
            present: present.unwrap_or_else(|| vec![false; w]),
        })
    }

    fn column(&self, key: &str) -> Option<&'a NdArray> {
        self.keys.iter().find(|(k, _)| *k == key).map(|(_, a)| *a)
    }
}

/// The infos of a step's envs as Gymnasium's vector info dict, or `None`
/// when they need the general way (see the module's docs).
pub(crate) fn gathered<'py>(
    py: Python<'py>,
    infos: &StepInfos,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    gather(py, infos.rows(), infos.blocks(), None)
}

/// A reset's infos (one per env) as Gymnasium's vector info dict, the
/// envs not `used` (not reset) left out, or `None` when they need the
/// general way.
pub(crate) fn gathered_reset<'py>(
    py: Python<'py>,
    rows: &[Dict],
    used: &[bool],
) -> PyResult<Option<Bound<'py, PyDict>>> {
    gather(py, rows, &[], Some(used))
}

fn gather<'py>(
    py: Python<'py>,
    rows: &[Dict],
    blocks: &[InfoBlock],
    used: Option<&[bool]>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(blocks) = blocks
        .iter()
        .map(Block::new)
        .collect::<Option<Vec<Block<'_>>>>()
    else {
        return Ok(None);
    };
    let n = rows.len();
    // Where each env's values are: its row, or a block's row.
    let mut block_of: Vec<Option<(usize, usize)>> = vec![None; n];
    for (k, b) in blocks.iter().enumerate() {
        for j in 0..b.present.len() {
            if let Some(slot) = block_of.get_mut(b.start + j) {
                *slot = Some((k, j));
            }
        }
    }
    let present: Vec<bool> = (0..n)
        .map(|i| {
            used.is_none_or(|u| u.get(i) == Some(&true))
                && match block_of[i] {
                    Some((k, j)) => blocks[k].present[j],
                    None => !rows[i].is_empty(),
                }
        })
        .collect();
    let Some(head) = present.iter().position(|&p| p) else {
        return Ok(None);
    };
    // The keys, in the first reporting env's order.
    let keys: Vec<&str> = match block_of[head] {
        Some((k, _)) => blocks[k].keys.iter().map(|(key, _)| *key).collect(),
        None => rows[head].iter().map(|(key, _)| key).collect(),
    };
    if keys.iter().any(|k| k.starts_with('_') || *k == "final_obs") {
        return Ok(None);
    }
    // Every reporting env has the same keys (equal counts, each found).
    let same_keys = (0..n).filter(|&i| present[i]).all(|i| match block_of[i] {
        Some((k, _)) => blocks[k].keys.len() == keys.len(),
        None => rows[i].len() == keys.len(),
    });
    if !same_keys {
        return Ok(None);
    }
    let mut columns = Vec::with_capacity(keys.len());
    for key in keys {
        let first = match block_of[head] {
            Some((k, _)) => blocks[k].column(key).and_then(row_kind),
            None => rows[head]
                .get(key)
                .and_then(value_cell)
                .map(|(kind, entry)| (kind, entry.bytes().len())),
        };
        let Some((kind, size)) = first else {
            return Ok(None);
        };
        let mut data = vec![0u8; n * size];
        // The batches' rows, a column at a time.
        for b in blocks.iter().filter(|b| b.present.contains(&true)) {
            let Some(col) = b.column(key) else {
                return Ok(None);
            };
            if row_kind(col) != Some((kind, size)) {
                return Ok(None);
            }
            let bytes = col.as_bytes();
            for (j, _) in b.present.iter().enumerate().filter(|(_, &p)| p) {
                let at = (b.start + j) * size;
                if let (Some(to), Some(from)) = (
                    data.get_mut(at..at + size),
                    bytes.get(j * size..(j + 1) * size),
                ) {
                    to.copy_from_slice(from);
                }
            }
        }
        if kind == Kind::Scalar(DType::BOOL) {
            // A bool column's rows are Python bools (what a sub-env's own
            // dict holds): any nonzero byte is true, written as 1.
            for x in &mut data {
                *x = u8::from(*x != 0);
            }
        }
        // The single envs' values.
        for i in (head..n).filter(|&i| present[i] && block_of[i].is_none()) {
            let Some((k, entry)) = rows[i].get(key).and_then(value_cell) else {
                return Ok(None);
            };
            let bytes = entry.bytes();
            if k != kind || bytes.len() != size {
                return Ok(None);
            }
            data[i * size..(i + 1) * size].copy_from_slice(bytes);
        }
        let (dtype, rest) = match kind {
            Kind::Scalar(d) => (d, &[][..]),
            Kind::Array(d, shape) => (d, shape),
        };
        let mut shape = Vec::with_capacity(rest.len() + 1);
        shape.push(n);
        shape.extend_from_slice(rest);
        columns.push((key, convert::new_array(py, dtype, &shape, &data)?));
    }
    let out = PyDict::new(py);
    for (key, values) in columns {
        out.set_item(key, values)?;
        // A mask of its own per key, as Gymnasium's `_add_info` makes.
        out.set_item(format!("_{key}"), convert::bool_column(py, &present)?)?;
    }
    Ok(Some(out))
}
