//! Transitions in the layout of `ReplayBufferCollectionWrapper`'s default
//! builder: a dict of `action`, `context` (when the env has one),
//! `next_obs`, `obs`, `reward`, `terminated` and `truncated`, each leaf an
//! array of its space's dtype; batched values split into one value per
//! sub-env.

use crate::codec::{DType, NdArray, ScalarKind, Value};
use crate::host::Space;
use half::f16;

/// The transition space of one (sub-)env and its leaves.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// The single-instance space: a `DictSpace` document.
    pub space: Space,
    /// The `DictStorage` keys of the leaves (`obs`, `obs/pos`, ...), in the
    /// order [`Layout::leaves`] produces their arrays.
    pub keys: Vec<String>,
    pub observation: Space,
    pub action: Space,
    pub context: Option<Space>,
    /// Whether every leaf converts to float64 exactly (float, bool and up to
    /// 32-bit integer dtypes): the element is then stored flattened.
    pub flat: bool,
}

impl Layout {
    /// The layout for one env's spaces (unbatched ones).
    pub(crate) fn new(
        observation: Space,
        action: Space,
        context: Option<Space>,
    ) -> Result<Layout, String> {
        let mut entries = vec![
            ("action".to_string(), action.clone()),
            ("next_obs".to_string(), observation.clone()),
            ("obs".to_string(), observation.clone()),
            (
                "reward".to_string(),
                Space::boxed(DType::F64, Vec::new(), f64::NEG_INFINITY, f64::INFINITY),
            ),
            ("terminated".to_string(), Space::binary(Vec::new())),
            ("truncated".to_string(), Space::binary(Vec::new())),
        ];
        if let Some(c) = &context {
            entries.push(("context".to_string(), c.clone()));
        }
        let space = Space::dict(entries);
        let mut keys = Vec::new();
        collect_keys(&space, "", &mut keys)?;
        let mut dtypes = Vec::new();
        leaf_dtypes(&space, &mut dtypes);
        let flat = dtypes.iter().all(|d| match d.kind() {
            ScalarKind::Bool | ScalarKind::Float => true,
            ScalarKind::Int | ScalarKind::UInt => d.itemsize() <= 4,
            ScalarKind::Complex => false,
        });
        Ok(Layout {
            space,
            keys,
            flat,
            observation,
            action,
            context,
        })
    }

    /// The leaves of one transition, in key order.
    pub(crate) fn leaves(&self, t: &Transition) -> Result<Vec<NdArray>, String> {
        let mut out = Vec::with_capacity(self.keys.len());
        // Dict entries are sorted: action, context, next_obs, obs, reward,
        // terminated, truncated.
        leaves(&self.action, &t.action, "action", &mut out)?;
        if let (Some(space), Some(value)) = (&self.context, &t.context) {
            leaves(space, value, "context", &mut out)?;
        }
        leaves(&self.observation, &t.next_obs, "next_obs", &mut out)?;
        leaves(&self.observation, &t.obs, "obs", &mut out)?;
        out.push(cast_owned(scalar(&t.reward, "reward")?, DType::F64)?);
        out.push(cast_owned(
            scalar(&t.terminated, "terminated")?,
            DType::BOOL,
        )?);
        out.push(cast_owned(scalar(&t.truncated, "truncated")?, DType::BOOL)?);
        if out.len() != self.keys.len() {
            return Err("the transition does not match its space".into());
        }
        Ok(out)
    }
}

impl Layout {
    /// Appends a transition's flattened element to `out` (for a `flat`
    /// layout): the bytes `push_f64` appends of each array of
    /// [`Layout::leaves`], in key order, without building those arrays
    /// when a leaf already is an array of its space's dtype and shape, or a
    /// float reward and bool flags (a transition's usual leaves); the same
    /// checks and errors. On error `out` is as it was.
    pub(crate) fn push_flat(&self, t: &Transition, out: &mut Vec<u8>) -> Result<(), String> {
        let start = out.len();
        let outcome = self.push_flat_leaves(t, out);
        if outcome.is_err() {
            out.truncate(start);
        }
        outcome
    }

    fn push_flat_leaves(&self, t: &Transition, out: &mut Vec<u8>) -> Result<(), String> {
        let mut count = 0;
        flat_leaves(&self.action, &t.action, "action", out, &mut count)?;
        if let (Some(space), Some(value)) = (&self.context, &t.context) {
            flat_leaves(space, value, "context", out, &mut count)?;
        }
        flat_leaves(&self.observation, &t.next_obs, "next_obs", out, &mut count)?;
        flat_leaves(&self.observation, &t.obs, "obs", out, &mut count)?;
        match &t.reward {
            Value::Float(x) => out.extend_from_slice(&x.to_ne_bytes()),
            other => push_f64(&cast_owned(scalar(other, "reward")?, DType::F64)?, out)?,
        }
        for (flag, at) in [(&t.terminated, "terminated"), (&t.truncated, "truncated")] {
            match flag {
                Value::Bool(b) => out.extend_from_slice(&f64::from(u8::from(*b)).to_ne_bytes()),
                other => push_f64(&cast_owned(scalar(other, at)?, DType::BOOL)?, out)?,
            }
        }
        if count + 3 != self.keys.len() {
            return Err("the transition does not match its space".into());
        }
        Ok(())
    }
}

/// [`leaves`], each leaf appended to `out` as float64 (see
/// [`Layout::push_flat`]) and counted in `count`.
fn flat_leaves(
    space: &Space,
    value: &Value,
    at: &str,
    out: &mut Vec<u8>,
    count: &mut usize,
) -> Result<(), String> {
    each_leaf(space, value, at, &mut |dtype, shape, value, at| {
        *count += 1;
        flat_leaf(dtype, shape, value, at, out)
    })
}

/// `value` (of `space`) appended as float64 as [`Layout::push_flat`]
/// appends each part of a transition (on error `out` may hold part of it).
pub(crate) fn push_flat_value(
    space: &Space,
    value: &Value,
    at: &str,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    flat_leaves(space, value, at, out, &mut 0)
}

/// One leaf of [`flat_leaves`]: `value` as an array of `dtype` and `shape`
/// ([`leaf_array`]'s checks and casts), appended as float64.
pub(crate) fn flat_leaf(
    dtype: DType,
    shape: &[usize],
    value: &Value,
    at: &str,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    if let Value::Array(a) = value {
        if a.dtype() == dtype && dtype.is_native() && a.shape() == shape {
            return push_f64(a, out);
        }
    }
    push_f64(&leaf_array(value, at, dtype, shape)?, out)
}

/// One transition of one (sub-)env.
#[derive(Debug, Clone)]
pub(crate) struct Transition {
    pub obs: Value,
    pub action: Value,
    pub reward: Value,
    pub terminated: Value,
    pub truncated: Value,
    pub next_obs: Value,
    pub context: Option<Value>,
}

impl Layout {
    /// Each leaf's dtype and shape, in key order.
    pub(crate) fn leaf_specs(&self) -> Vec<(DType, Vec<usize>)> {
        let mut out = Vec::with_capacity(self.keys.len());
        leaf_specs(&self.space, &mut out);
        out
    }
}

fn leaf_specs(space: &Space, out: &mut Vec<(DType, Vec<usize>)>) {
    match space {
        Space::Dict(d) => d.entries().iter().for_each(|(_, s)| leaf_specs(s, out)),
        Space::Box(b) => out.push((b.dtype, b.shape.clone())),
        Space::Binary(b) => out.push((b.dtype, b.shape.clone())),
        _ => {}
    }
}

fn leaf_dtypes(space: &Space, out: &mut Vec<DType>) {
    match space {
        Space::Dict(d) => d.entries().iter().for_each(|(_, s)| leaf_dtypes(s, out)),
        Space::Box(b) => out.push(b.dtype),
        Space::Binary(b) => out.push(b.dtype),
        _ => {}
    }
}

fn collect_keys(space: &Space, prefix: &str, out: &mut Vec<String>) -> Result<(), String> {
    match space {
        Space::Dict(d) => {
            for (k, s) in d.entries() {
                if k.contains('/') || k.is_empty() {
                    return Err(format!("the dict key {k:?} cannot name a storage"));
                }
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}/{k}")
                };
                collect_keys(s, &key, out)?;
            }
            Ok(())
        }
        Space::Box(_) | Space::Binary(_) => {
            out.push(prefix.to_string());
            Ok(())
        }
        other => Err(format!(
            "{prefix} is a {}: unienv_data's NPZStorage holds BoxSpace and BinarySpace leaves only",
            other.type_name()
        )),
    }
}

fn leaves(space: &Space, value: &Value, at: &str, out: &mut Vec<NdArray>) -> Result<(), String> {
    each_leaf(space, value, at, &mut |dtype, shape, value, at| {
        out.push(leaf_array(value, at, dtype, shape)?);
        Ok(())
    })
}

/// Calls `part` with each part of `space` that is not a dict (dict keys in
/// the space's order), the matching part of `value` and its path
/// (`at/key/...`); a `value` that is not a dict where `space` is one, or
/// lacks one of its keys, is an error, and the first error ends the walk.
pub(crate) fn each_part(
    space: &Space,
    value: &Value,
    at: &str,
    part: &mut impl FnMut(&Space, &Value, &str) -> Result<(), String>,
) -> Result<(), String> {
    match space {
        Space::Dict(d) => {
            let Some(v) = value.as_dict() else {
                return Err(format!("{at} is a {}, not a dict", value.type_name()));
            };
            for (k, s) in d.entries() {
                let item = v.get(k).ok_or_else(|| format!("{at} has no key {k:?}"))?;
                each_part(s, item, &format!("{at}/{k}"), part)?;
            }
            Ok(())
        }
        _ => part(space, value, at),
    }
}

/// Calls `leaf` with each Box or Binary leaf of `space` ([`each_part`]), its
/// dtype and shape, the matching part of `value` and its path; any other
/// leaf is an error.
fn each_leaf(
    space: &Space,
    value: &Value,
    at: &str,
    leaf: &mut impl FnMut(DType, &[usize], &Value, &str) -> Result<(), String>,
) -> Result<(), String> {
    each_part(space, value, at, &mut |space, value, at| match space {
        Space::Box(b) => leaf(b.dtype, &b.shape, value, at),
        Space::Binary(b) => leaf(b.dtype, &b.shape, value, at),
        _ => Err(format!("{at}: unsupported space")),
    })
}

/// A leaf's value as an array of its space's dtype, checked against the
/// space's shape.
fn leaf_array(value: &Value, at: &str, dtype: DType, shape: &[usize]) -> Result<NdArray, String> {
    let a = cast_owned(scalar(value, at)?, dtype)?;
    if a.shape() != shape {
        return Err(format!(
            "{at} has shape {:?}, its space {:?}",
            a.shape(),
            shape
        ));
    }
    Ok(a)
}

/// A numeric value as an array: arrays as they are, Python scalars as
/// zero-dimensional arrays.
fn scalar(value: &Value, at: &str) -> Result<NdArray, String> {
    Ok(match value {
        Value::Array(a) => a.clone(),
        Value::Bool(b) => NdArray::scalar(*b),
        Value::Int(i) => NdArray::scalar(*i),
        Value::UInt(u) => NdArray::scalar(*u),
        Value::Float(f) => NdArray::scalar(*f),
        other => return Err(format!("{at} is a {}, not a number", other.type_name())),
    })
}

/// A number read exactly enough to convert it to any real dtype.
#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

/// [`cast`] of an array the caller owns: the array itself when it is
/// already native and of `dtype` (no clone of its shape and bytes handle).
fn cast_owned(a: NdArray, dtype: DType) -> Result<NdArray, String> {
    if a.dtype() == dtype && dtype.is_native() {
        return Ok(a);
    }
    cast(&a, dtype)
}

/// `a` in native byte order and of `dtype` (a copy only when it differs).
/// Integers convert exactly where the target holds them (as NumPy's
/// `astype` wraps otherwise); complex values are refused.
pub(crate) fn cast(a: &NdArray, dtype: DType) -> Result<NdArray, String> {
    if a.dtype() == dtype && dtype.is_native() {
        return Ok(a.clone());
    }
    let native = a.to_native();
    if native.dtype() == dtype {
        return Ok(native);
    }
    let shape = a.shape().to_vec();
    let bad = |e: crate::codec::ArrayError| e.to_string();
    let nums: Vec<Num> = match (native.dtype().kind(), native.dtype().itemsize()) {
        (ScalarKind::Bool, _) => native
            .to_vec::<bool>()
            .map_err(bad)?
            .into_iter()
            .map(|b| Num::Int(b as i128))
            .collect(),
        (ScalarKind::Int, 1) => ints(native.to_vec::<i8>().map_err(bad)?),
        (ScalarKind::Int, 2) => ints(native.to_vec::<i16>().map_err(bad)?),
        (ScalarKind::Int, 4) => ints(native.to_vec::<i32>().map_err(bad)?),
        (ScalarKind::Int, _) => ints(native.to_vec::<i64>().map_err(bad)?),
        (ScalarKind::UInt, 1) => ints(native.to_vec::<u8>().map_err(bad)?),
        (ScalarKind::UInt, 2) => ints(native.to_vec::<u16>().map_err(bad)?),
        (ScalarKind::UInt, 4) => ints(native.to_vec::<u32>().map_err(bad)?),
        (ScalarKind::UInt, _) => ints(native.to_vec::<u64>().map_err(bad)?),
        (ScalarKind::Float, _) => native.to_f64_vec().into_iter().map(Num::Float).collect(),
        (ScalarKind::Complex, _) => return Err("complex values cannot be recorded".into()),
    };
    let f = |n: Num| match n {
        Num::Int(i) => i as f64,
        Num::Float(x) => x,
    };
    let i = |n: Num| match n {
        Num::Int(i) => i,
        Num::Float(x) => x as i128,
    };
    let built = match (dtype.kind(), dtype.itemsize()) {
        (ScalarKind::Bool, _) => build(shape, nums.iter().map(|&n| f(n) != 0.0).collect()),
        (ScalarKind::Int, 1) => build(shape, nums.iter().map(|&n| i(n) as i8).collect()),
        (ScalarKind::Int, 2) => build(shape, nums.iter().map(|&n| i(n) as i16).collect()),
        (ScalarKind::Int, 4) => build(shape, nums.iter().map(|&n| i(n) as i32).collect()),
        (ScalarKind::Int, _) => build(shape, nums.iter().map(|&n| i(n) as i64).collect()),
        (ScalarKind::UInt, 1) => build(shape, nums.iter().map(|&n| i(n) as u8).collect()),
        (ScalarKind::UInt, 2) => build(shape, nums.iter().map(|&n| i(n) as u16).collect()),
        (ScalarKind::UInt, 4) => build(shape, nums.iter().map(|&n| i(n) as u32).collect()),
        (ScalarKind::UInt, _) => build(shape, nums.iter().map(|&n| i(n) as u64).collect()),
        (ScalarKind::Float, 2) => build(shape, nums.iter().map(|&n| f16::from_f64(f(n))).collect()),
        (ScalarKind::Float, 4) => build(shape, nums.iter().map(|&n| f(n) as f32).collect()),
        (ScalarKind::Float, _) => build(shape, nums.iter().map(|&n| f(n)).collect()),
        (ScalarKind::Complex, _) => return Err("complex spaces cannot be recorded".into()),
    };
    built.map_err(bad)
}

/// Appends `a`'s elements to `out` as native float64 bytes: exactly what
/// `cast(a, DType::F64)` holds, without the intermediate vectors and array
/// for native float, bool and up-to-32-bit integer leaves (a transition's
/// usual ones; others go through [`cast`]).
pub(crate) fn push_f64(a: &NdArray, out: &mut Vec<u8>) -> Result<(), String> {
    if push_f64_native(a.dtype(), a.as_bytes(), out) {
        return Ok(());
    }
    let f = cast(a, DType::F64)?;
    out.extend_from_slice(f.as_bytes());
    Ok(())
}

/// [`push_f64`] of the elements `b` holds, of dtype `d`, for the dtypes
/// it converts itself (native float64, float32, bool, int32); false
/// (nothing appended) for others.
pub(crate) fn push_f64_native(d: DType, b: &[u8], out: &mut Vec<u8>) -> bool {
    if !d.is_native() {
        return false;
    }
    let n = b.len() / d.itemsize().max(1);
    match (d.kind(), d.itemsize()) {
        (ScalarKind::Float, 8) => out.extend_from_slice(b),
        (ScalarKind::Float, 4) => {
            out.reserve(n * 8);
            for c in b.chunks_exact(4) {
                let x = f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                out.extend_from_slice(&f64::from(x).to_ne_bytes());
            }
        }
        (ScalarKind::Bool, 1) => {
            out.reserve(n * 8);
            for &x in b {
                out.extend_from_slice(&f64::from(u8::from(x != 0)).to_ne_bytes());
            }
        }
        (ScalarKind::Int, 4) => {
            out.reserve(n * 8);
            for c in b.chunks_exact(4) {
                let x = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                out.extend_from_slice(&f64::from(x).to_ne_bytes());
            }
        }
        _ => return false,
    }
    true
}

fn ints<T: Into<i128>>(v: Vec<T>) -> Vec<Num> {
    v.into_iter().map(|x| Num::Int(x.into())).collect()
}

fn build<T: crate::codec::Element>(
    shape: Vec<usize>,
    values: Vec<T>,
) -> Result<NdArray, crate::codec::ArrayError> {
    NdArray::from_shape_vec(shape, values)
}

/// Row `i` of a batched value (each leaf array's `i`-th row along its
/// first axis), shaped by `space` (the batched space).
pub(crate) fn row(space: &Space, value: &Value, i: usize, at: &str) -> Result<Value, String> {
    match space {
        Space::Dict(d) => {
            let Some(v) = value.as_dict() else {
                return Err(format!("{at} is a {}, not a dict", value.type_name()));
            };
            let mut out = crate::codec::Dict::with_capacity(d.len());
            for (k, s) in d.entries() {
                let item = v.get(k).ok_or_else(|| format!("{at} has no key {k:?}"))?;
                out.insert(k.clone(), row(s, item, i, &format!("{at}/{k}"))?);
            }
            Ok(Value::Dict(out))
        }
        _ => array_row(value, i, at).map(Value::Array),
    }
}

/// Row `i` of a batched leaf: an array of one dimension less, sharing the
/// bytes; list items of a sequence (a reward list).
pub(crate) fn array_row(value: &Value, i: usize, at: &str) -> Result<NdArray, String> {
    match value {
        Value::Array(a) => {
            let Some((&n, rest)) = a.shape().split_first() else {
                return Err(format!("{at} is not batched"));
            };
            if i >= n {
                return Err(format!("{at} has {n} rows, not {}", i + 1));
            }
            let size = rest.iter().product::<usize>() * a.dtype().itemsize();
            NdArray::from_bytes(
                a.dtype(),
                rest.to_vec(),
                a.bytes().slice(i * size..(i + 1) * size),
            )
            .map_err(|e| e.to_string())
        }
        Value::List(items) | Value::Tuple(items) => match items.get(i) {
            Some(v) => scalar(v, at),
            None => Err(format!("{at} has {} items, not {}", items.len(), i + 1)),
        },
        other => Err(format!("{at} is a {}, not a batch", other.type_name())),
    }
}

/// The space of sub-env `i` of a batched space (leading dimension removed;
/// the bounds of row `i`, or of the broadcast row).
pub(crate) fn unbatch_space(space: &Space, i: usize) -> Result<Space, String> {
    match space {
        Space::Dict(d) => Ok(Space::dict(
            d.entries()
                .iter()
                .map(|(k, s)| unbatch_space(s, i).map(|s| (k.clone(), s)))
                .collect::<Result<Vec<_>, String>>()?,
        )),
        Space::Box(b) => {
            if b.shape.is_empty() {
                return Err("a batched BoxSpace has no batch dimension".into());
            }
            let bound = |a: &NdArray| -> Result<NdArray, String> {
                let r = if a.shape().first() == Some(&1) { 0 } else { i };
                array_row(&Value::Array(a.clone()), r, "bound")
            };
            let mut out = b.clone();
            out.shape = b.shape[1..].to_vec();
            out.low = bound(&b.low)?;
            out.high = bound(&b.high)?;
            Ok(Space::Box(out))
        }
        Space::Binary(b) => {
            if b.shape.is_empty() {
                return Err("a batched BinarySpace has no batch dimension".into());
            }
            let mut out = b.clone();
            out.shape = b.shape[1..].to_vec();
            Ok(Space::Binary(out))
        }
        other => Err(format!(
            "a batched {} cannot be split per sub-env",
            other.type_name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Dict;

    #[test]
    fn layout_keys_are_sorted_leaves() {
        let obs = Space::dict([
            ("pos", Space::unbounded_f32(vec![2])),
            ("hit", Space::binary(vec![])),
        ]);
        let l = Layout::new(obs, Space::unbounded_f32(vec![1]), None).unwrap();
        assert_eq!(
            l.keys,
            [
                "action",
                "next_obs/hit",
                "next_obs/pos",
                "obs/hit",
                "obs/pos",
                "reward",
                "terminated",
                "truncated"
            ]
        );
        let o = Value::Dict(
            Dict::new()
                .with("pos", NdArray::from_vec(vec![1.0f32, 2.0]))
                .with("hit", true),
        );
        let t = Transition {
            obs: o.clone(),
            action: Value::Array(NdArray::from_vec(vec![0.5f64])),
            reward: Value::Int(1),
            terminated: Value::Bool(false),
            truncated: Value::Array(NdArray::scalar(true)),
            next_obs: o,
            context: None,
        };
        let leaves = l.leaves(&t).unwrap();
        assert_eq!(leaves[0].dtype(), DType::F32);
        assert_eq!(leaves[0].to_vec::<f32>().unwrap(), [0.5]);
        assert_eq!(leaves[5].to_vec::<f64>().unwrap(), [1.0]);
        assert_eq!(leaves[7].to_vec::<bool>().unwrap(), [true]);
    }

    /// The flattened element written straight ([`Layout::push_flat`]) is
    /// byte for byte `push_f64` of each of [`Layout::leaves`]'s arrays, for
    /// leaves of the space's dtype and of others (cast), Python scalars and
    /// 0-d arrays, a dict observation, a context and a big-endian leaf;
    /// and it refuses what `leaves` refuses, leaving `out` as it was.
    #[test]
    fn push_flat_is_leaves_pushed_as_f64() {
        let obs = Space::dict([
            ("pos", Space::boxed(DType::F32, vec![2], -1.0, 1.0)),
            ("hit", Space::binary(vec![])),
            ("n", Space::boxed(DType::I32, vec![3], -9.0, 9.0)),
        ]);
        let context = Space::boxed(DType::F64, vec![1], 0.0, 1.0);
        let l = Layout::new(obs, Space::unbounded_f32(vec![2]), Some(context)).unwrap();
        assert!(l.flat);
        let big = NdArray::from_bytes(
            DType::F32.with_byte_order(crate::codec::ByteOrder::Big),
            vec![2],
            bytes::Bytes::from(vec![0x3f, 0x80, 0, 0, 0x40, 0, 0, 0]),
        )
        .unwrap();
        let o = |pos: NdArray, hit: Value, n: NdArray| {
            Value::Dict(Dict::new().with("pos", pos).with("hit", hit).with("n", n))
        };
        let cases = [
            Transition {
                obs: o(
                    NdArray::from_vec(vec![0.25f32, -0.5]),
                    Value::Bool(true),
                    NdArray::from_vec(vec![1i32, -2, 3]),
                ),
                action: Value::Array(NdArray::from_vec(vec![0.125f32, 7.0])),
                reward: Value::Float(-1.75),
                terminated: Value::Bool(false),
                truncated: Value::Bool(true),
                next_obs: o(
                    big.clone(),
                    Value::Array(NdArray::scalar(false)),
                    NdArray::from_vec(vec![4i32, 5, 6]),
                ),
                context: Some(Value::Array(NdArray::from_vec(vec![0.5f64]))),
            },
            Transition {
                // Other dtypes than the space's: cast as `leaves` casts.
                obs: o(
                    NdArray::from_vec(vec![0.1f64, 0.2]),
                    Value::Int(1),
                    NdArray::from_vec(vec![1i64, 2, 3]),
                ),
                action: Value::Array(NdArray::from_vec(vec![1.0f64 / 3.0, 2.0])),
                reward: Value::Int(3),
                terminated: Value::Array(NdArray::scalar(1.0f32)),
                truncated: Value::Array(NdArray::scalar(false)),
                next_obs: o(
                    NdArray::from_vec(vec![1u8, 2]),
                    Value::Float(0.0),
                    NdArray::from_vec(vec![7u16, 8, 9]),
                ),
                context: Some(Value::Array(NdArray::from_vec(vec![0.75f32]))),
            },
        ];
        for t in &cases {
            let mut want = vec![1u8, 2];
            for leaf in l.leaves(t).unwrap() {
                push_f64(&leaf, &mut want).unwrap();
            }
            let mut got = vec![1u8, 2];
            l.push_flat(t, &mut got).unwrap();
            assert_eq!(got, want);
        }
        let mut bad = cases[0].clone();
        bad.action = Value::Array(NdArray::from_vec(vec![1.0f32, 2.0, 3.0]));
        let mut out = vec![1u8, 2];
        assert_eq!(
            l.push_flat(&bad, &mut out).unwrap_err(),
            l.leaves(&bad).unwrap_err()
        );
        assert_eq!(out, [1, 2]);
        bad = cases[0].clone();
        bad.obs = Value::Array(NdArray::from_vec(vec![1.0f32]));
        assert_eq!(
            l.push_flat(&bad, &mut out).unwrap_err(),
            l.leaves(&bad).unwrap_err()
        );
        assert_eq!(out, [1, 2]);
    }

    #[test]
    fn push_f64_matches_cast() {
        let arrays = [
            NdArray::from_vec(vec![1.5f32, -2.25, f32::MAX, f32::NAN]),
            NdArray::from_vec(vec![0.1f64, -7.0]),
            NdArray::from_vec(vec![true, false, true]),
            NdArray::from_vec(vec![i32::MIN, 0, i32::MAX]),
            NdArray::from_vec(vec![3u16, 65535]),
            NdArray::from_vec(vec![-5i8, 127]),
            NdArray::scalar(1.0f64),
            NdArray::from_bytes(
                DType::F32.with_byte_order(crate::codec::ByteOrder::Big),
                vec![2],
                bytes::Bytes::from(vec![0x3f, 0x80, 0, 0, 0x40, 0, 0, 0]),
            )
            .unwrap(),
        ];
        for a in &arrays {
            let mut out = vec![9u8];
            push_f64(a, &mut out).unwrap();
            let want = cast(a, DType::F64).unwrap();
            assert_eq!(&out[1..], want.as_bytes(), "{:?}", a.dtype());
        }
    }

    #[test]
    fn rows_split_batches_and_refuse_text() {
        let b = NdArray::from_shape_vec(vec![2, 2], vec![1i32, 2, 3, 4]).unwrap();
        let r = array_row(&Value::Array(b), 1, "x").unwrap();
        assert_eq!(
            (r.shape(), r.to_vec::<i32>().unwrap()),
            (&[2usize][..], vec![3, 4])
        );
        let s = unbatch_space(&Space::boxed(DType::F32, vec![4, 3], -1.0, 1.0), 2).unwrap();
        assert_eq!(s.shape(), Some(vec![3]));
        let text = Space::Text(crate::host::space::TextSpace {
            min_length: 0,
            max_length: 4,
            charset: None,
        });
        assert!(Layout::new(text, Space::binary(vec![]), None).is_err());
    }
}
