//! A descriptor attribute's value as it was read, kept so that the next
//! check can tell it is unchanged without converting it again.
//!
//! [`Snapshot::take`] copies the containers of a value (lists, tuples,
//! dicts) and keeps the scalars it holds (`None`, `bool`, `int`, `float`,
//! `str` of exactly those types, which never change) and copies NumPy
//! arrays' bytes. [`Snapshot::matches`] then walks the current object
//! beside it: it answers `true` only when [`crate::common::convert::from_py`] would
//! give the current object exactly the value the snapshot was taken from,
//! byte for byte once encoded:
//!
//! - types are compared exactly (`1`, `1.0`, `True`, a subclass of `dict`
//!   are all different from one another), so the type `from_py` dispatches
//!   on is the same;
//! - scalars are the same object, or equal objects of the same exact type:
//!   `int`s and `str`s by value (an `int`'s value decides its encoding, a
//!   `str`'s code points its UTF-8), `float`s by their bits (`0.0` and
//!   `-0.0` differ, so do NaNs of other payloads);
//! - lists, tuples and dicts by length and item by item, dicts in order
//!   (their keys exact `str`s);
//! - arrays (exact `np.ndarray`, numeric) by wire dtype (byte order
//!   included), shape and C-order bytes.
//!
//! Anything else (NumPy scalars, subclasses, bytes, object arrays, graphs,
//! other tensors) takes no snapshot: the caller converts such values as
//! before. Nothing here runs Python code (no `__eq__` of a user type is
//! called: only `int` and `str` comparisons), so a value cannot change
//! while it is walked.

use crate::common::convert::{array_from_py, wire_dtype, ArrayMode};
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use unienv_remote::NdArray;

/// Deepest nesting a snapshot follows (the protocol's limit: a value that
/// converted is never deeper).
const MAX_DEPTH: usize = 64;

/// A value's structure and contents at the time it was read.
pub(crate) enum Snapshot {
    /// An object of exactly `NoneType`, `bool`, `int`, `float` or `str`.
    Scalar(Py<PyAny>),
    /// An exact `list`, item by item.
    List(Vec<Snapshot>),
    /// An exact `tuple`, item by item.
    Tuple(Vec<Snapshot>),
    /// An exact `dict` with exact `str` keys, in order.
    Dict(Vec<(Py<PyString>, Snapshot)>),
    /// An exact numeric `np.ndarray`: its wire dtype, shape and bytes.
    Array(NdArray),
}

/// Whether `obj` is exactly of one of the scalar types whose instances
/// never change.
fn is_scalar(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_none()
        || obj.is_exact_instance_of::<PyBool>()
        || obj.is_exact_instance_of::<PyInt>()
        || obj.is_exact_instance_of::<PyFloat>()
        || obj.is_exact_instance_of::<PyString>()
}

impl Snapshot {
    /// A snapshot of `obj`, or `None` when it holds anything but the types
    /// listed in the module's documentation.
    pub(crate) fn take(obj: &Bound<'_, PyAny>) -> Option<Snapshot> {
        Self::take_at(obj, 0)
    }

    fn take_at(obj: &Bound<'_, PyAny>, depth: usize) -> Option<Snapshot> {
        if depth > MAX_DEPTH {
            return None;
        }
        if is_scalar(obj) {
            return Some(Snapshot::Scalar(obj.clone().unbind()));
        }
        if let Ok(list) = obj.cast_exact::<PyList>() {
            let items = list.iter().map(|item| Self::take_at(&item, depth + 1));
            return items.collect::<Option<Vec<_>>>().map(Snapshot::List);
        }
        if let Ok(tuple) = obj.cast_exact::<PyTuple>() {
            let items = tuple.iter().map(|item| Self::take_at(&item, depth + 1));
            return items.collect::<Option<Vec<_>>>().map(Snapshot::Tuple);
        }
        if let Ok(dict) = obj.cast_exact::<PyDict>() {
            let mut entries = Vec::with_capacity(dict.len());
            for (k, v) in dict.iter() {
                let key = k.cast_exact::<PyString>().ok()?.clone().unbind();
                entries.push((key, Self::take_at(&v, depth + 1)?));
            }
            return Some(Snapshot::Dict(entries));
        }
        if obj.is_exact_instance_of::<PyUntypedArray>() {
            let array = obj.cast::<PyUntypedArray>().ok()?;
            // Refuses object and other non-numeric dtypes, as `from_py`
            // (which converts object arrays item by item instead).
            return array_from_py(array, ArrayMode::Copy)
                .ok()
                .map(Snapshot::Array);
        }
        None
    }

    /// Whether `obj` converts to exactly what the snapshot's object did
    /// when it was taken (see the module's documentation). `false` may also
    /// mean "not provably the same".
    pub(crate) fn matches(&self, obj: &Bound<'_, PyAny>) -> bool {
        match self {
            Snapshot::Scalar(seen) => {
                let seen = seen.bind(obj.py());
                obj.is(seen) || same_scalar(obj, seen)
            }
            Snapshot::List(items) => obj.cast_exact::<PyList>().is_ok_and(|list| {
                list.len() == items.len()
                    && items
                        .iter()
                        .zip(list.iter())
                        .all(|(s, item)| s.matches(&item))
            }),
            Snapshot::Tuple(items) => obj.cast_exact::<PyTuple>().is_ok_and(|tuple| {
                tuple.len() == items.len()
                    && items
                        .iter()
                        .zip(tuple.iter())
                        .all(|(s, item)| s.matches(&item))
            }),
            Snapshot::Dict(entries) => obj.cast_exact::<PyDict>().is_ok_and(|dict| {
                dict.len() == entries.len()
                    && entries.iter().zip(dict.iter()).all(|((key, s), (k, v))| {
                        let key = key.bind(obj.py());
                        (k.is(key) || (k.is_exact_instance_of::<PyString>() && equal(&k, key)))
                            && s.matches(&v)
                    })
            }),
            Snapshot::Array(seen) => {
                obj.is_exact_instance_of::<PyUntypedArray>()
                    && obj
                        .cast::<PyUntypedArray>()
                        .is_ok_and(|array| same_array(array, seen))
            }
        }
    }
}

/// Two scalars (see [`is_scalar`]) that are not the same object: the same
/// exact type and an equal `int` or `str`, or a `float` of the same bits.
/// `None` and the two `bool`s are singletons: another object is another
/// value.
fn same_scalar(obj: &Bound<'_, PyAny>, seen: &Bound<'_, PyAny>) -> bool {
    if !obj.get_type().is(seen.get_type()) {
        return false;
    }
    if let (Ok(a), Ok(b)) = (obj.cast_exact::<PyFloat>(), seen.cast_exact::<PyFloat>()) {
        return a.value().to_bits() == b.value().to_bits();
    }
    (obj.is_exact_instance_of::<PyInt>() || obj.is_exact_instance_of::<PyString>())
        && equal(obj, seen)
}

/// `a == b` for two exact `int`s or two exact `str`s (no Python code runs);
/// an error counts as different.
fn equal(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> bool {
    a.eq(b).unwrap_or(false)
}

/// Whether `array` converts to `seen`: the same wire dtype (a refused dtype
/// is different), shape and C-order bytes. A non-contiguous array is not
/// compared (different: the caller rebuilds).
fn same_array(array: &Bound<'_, PyUntypedArray>, seen: &NdArray) -> bool {
    let Ok(dtype) = wire_dtype(&array.dtype()) else {
        return false;
    };
    if dtype != seen.dtype() || array.shape() != seen.shape() || !array.is_c_contiguous() {
        return false;
    }
    let expected = seen.as_bytes();
    if expected.is_empty() {
        return true;
    }
    // SAFETY: a C-contiguous array of this dtype and shape has
    // product(shape) × itemsize readable bytes at its data pointer, which is
    // the length of `expected` (the same dtype and shape); the array is
    // alive (borrowed) and no Python code runs while the slice is read.
    let data = unsafe {
        let ptr = (*array.as_array_ptr()).fields.data as *const u8;
        std::slice::from_raw_parts(ptr, expected.len())
    };
    data == expected
}
