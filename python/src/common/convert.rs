//! The one place where the crate's [`Value`] tree meets Python objects, in
//! both directions, for the client and the server alike.
//!
//! The mapping is the reference codec's (`unienv_interface.remote.codec`):
//!
//! | Python (to the wire) | [`Value`] | Python (from the wire) |
//! | --- | --- | --- |
//! | `None` | `Null` | `None` |
//! | `bool` | `Bool` | `bool` |
//! | `int` (and subclasses) | `Int` / `UInt` / `BigInt` | `int` |
//! | `float` (and subclasses, so `np.float64`) | `Float` | `float` |
//! | `str` (and subclasses) | `Str` | `str` |
//! | `bytes` (and subclasses) | `Bytes` | `bytes` |
//! | `dict` with `str` keys | `Dict` | `dict` |
//! | `list` / `tuple` (and subclasses) | `List` / `Tuple` | `list` / `tuple` |
//! | other NumPy scalars (`np.generic`) | zero-dimensional `Array` | 0-d `np.ndarray` |
//! | numeric `np.ndarray` (any byte order) | `Array` | writable `np.ndarray` of the same dtype and shape |
//! | object `np.ndarray` | `ObjectArray` | object `np.ndarray` |
//! | `GraphInstance` | `Graph` | `GraphInstance` |
//! | any other tensor the reference's backends know | `Array` (via `to_numpy`) | — |
//!
//! Arrays received become NumPy arrays that own their memory (one copy out
//! of the frame, as writability requires). Arrays sent are read in place
//! when they are C-contiguous and read-only ([`ArrayMode::Borrow`]), or copied once
//! ([`ArrayMode::Copy`], for values kept beyond the call that produced them).

use bytes::Bytes;
use numpy::npyffi::{npy_intp, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use unienv_remote::codec::BigInt;
use unienv_remote::{ByteOrder, DType, Dict, Graph, NdArray, ObjectArray, ScalarKind, Value};

pyo3::import_exception!(unienv_interface.remote.codec, CodecError);

/// Deepest nesting the reference accepts: the root is depth 0.
const MAX_DEPTH: usize = 64;

/// Why a Python object could not become a [`Value`] (raised in Python as the
/// reference's `unienv_interface.remote.codec.CodecError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// Nesting deeper than the protocol's 64 levels.
    #[error("Maximum value nesting exceeded")]
    TooDeep,
    /// A dictionary key that is not a string.
    #[error("Dictionary keys must be strings")]
    NonStringKey,
    /// A type the protocol cannot carry.
    #[error("Unsupported value type: {type_name}")]
    UnsupportedType {
        /// The Python type's name.
        type_name: String,
    },
    /// An array whose dtype the protocol cannot carry.
    #[error("Unsupported array dtype: {dtype}")]
    UnsupportedDType {
        /// NumPy's name of the dtype.
        dtype: String,
    },
    /// An integer the value tree cannot carry (more digits than Python's
    /// default int-to-str limit of 4,300).
    #[error("integer {repr} is too large to carry")]
    IntegerRange {
        /// The integer, as Python prints it.
        repr: String,
    },
    /// A string that is not valid Unicode (a lone surrogate).
    #[error("string is not valid UTF-8: {reason}")]
    InvalidString {
        /// Python's explanation.
        reason: String,
    },
    /// An array or object array the crate refused (shape or size).
    #[error("invalid array: {reason}")]
    InvalidArray {
        /// What is wrong.
        reason: String,
    },
    /// The value's arrays, strings and bytes alone are over the limit it
    /// would be encoded against: conversion stopped before copying more.
    #[error("message of at least {size} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The bytes counted when the limit was passed (a lower bound of
        /// the encoded size).
        size: usize,
        /// The limit.
        max: usize,
    },
}

impl From<ConvertError> for PyErr {
    fn from(e: ConvertError) -> PyErr {
        CodecError::new_err(e.to_string())
    }
}

/// How arrays are read from Python objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayMode {
    /// C-contiguous arrays that Python code cannot write (read-only) are
    /// read in place: the [`Value`] keeps the NumPy array alive and shares
    /// its memory. Writeable arrays are copied (with the GIL held): the value
    /// is encoded with the GIL released, while another Python thread could
    /// write the array. For request arguments.
    Borrow,
    /// Every array is copied once into memory of its own. For values kept
    /// after the call returns (a hosted simulator's results, for example).
    Copy,
}

/// Python types looked up once per interpreter.
struct Types {
    generic: Py<PyType>,
    graph: Py<PyType>,
    asarray: Py<PyAny>,
    get_backend_from_tensor: Py<PyAny>,
    /// `np.dtype` for every wire dtype, indexed by [`dtype_slot`].
    descrs: Vec<Py<PyArrayDescr>>,
    object_descr: Py<PyArrayDescr>,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

const KINDS: [(ScalarKind, &[usize]); 5] = [
    (ScalarKind::Bool, &[1]),
    (ScalarKind::Int, &[1, 2, 4, 8]),
    (ScalarKind::UInt, &[1, 2, 4, 8]),
    (ScalarKind::Float, &[2, 4, 8]),
    (ScalarKind::Complex, &[8, 16]),
];

/// Position of a dtype in [`Types::descrs`]: kinds × sizes × (little, big).
fn dtype_slot(dtype: DType) -> usize {
    let mut slot = 0;
    for (kind, sizes) in KINDS {
        for &size in sizes {
            if kind == dtype.kind() && size == dtype.itemsize() {
                let big = dtype.byte_order() == Some(ByteOrder::Big);
                return slot * 2 + usize::from(big);
            }
            slot += 1;
        }
    }
    unreachable!("DType only holds the kinds and sizes listed in KINDS")
}

fn types(py: Python<'_>) -> PyResult<&Types> {
    TYPES.get_or_try_init(py, || {
        let np = py.import("numpy")?;
        let mut descrs = Vec::new();
        for (kind, sizes) in KINDS {
            for &size in sizes {
                for order in [ByteOrder::Little, ByteOrder::Big] {
                    let dtype = DType::new(kind, size, order).ok_or_else(|| {
                        PyValueError::new_err("internal: a listed dtype is not valid")
                    })?;
                    descrs.push(PyArrayDescr::new(py, dtype.as_str())?.unbind());
                }
            }
        }
        Ok::<_, PyErr>(Types {
            generic: np.getattr("generic")?.cast_into::<PyType>()?.unbind(),
            graph: py
                .import("unienv_interface.space.spaces.graph")?
                .getattr("GraphInstance")?
                .cast_into::<PyType>()?
                .unbind(),
            asarray: np.getattr("asarray")?.unbind(),
            get_backend_from_tensor: py
                .import("unienv_interface.backends")?
                .getattr("get_backend_from_tensor")?
                .unbind(),
            descrs,
            object_descr: PyArrayDescr::object(py).unbind(),
        })
    })
}

// ---------------------------------------------------------------- to Python

/// Converts a value into the Python object the reference codec would have
/// decoded: NumPy arrays own their memory and are writable.
pub fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any(),
        Value::BigInt(b) => py.get_type::<PyInt>().call1((b.as_str(),))?,
        Value::Float(f) => PyFloat::new(py, *f).into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::Array(a) => array_to_py(py, a)?,
        Value::List(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Tuple(items) => {
            let items = items
                .iter()
                .map(|v| to_py(py, v))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any()
        }
        Value::Dict(d) => dict_to_py(py, d)?.into_any(),
        Value::ObjectArray(o) => object_array_to_py(py, o)?,
        Value::Graph(g) => {
            let kwargs = PyDict::new(py);
            for (name, field) in g.fields() {
                kwargs.set_item(name, to_py(py, field)?)?;
            }
            types(py)?.graph.bind(py).call((), Some(&kwargs))?
        }
    })
}

/// Converts a dictionary (keys in order).
pub fn dict_to_py<'py>(py: Python<'py>, dict: &Dict) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (k, v) in dict.iter() {
        out.set_item(PyString::new(py, k), to_py(py, v)?)?;
    }
    Ok(out)
}

/// A new C-contiguous NumPy array of the array's dtype (byte order kept)
/// and shape, holding a copy of its bytes.
pub fn array_to_py<'py>(py: Python<'py>, array: &NdArray) -> PyResult<Bound<'py, PyAny>> {
    new_array(py, array.dtype(), array.shape(), array.as_bytes())
}

/// A new C-contiguous NumPy array of `dtype` (byte order kept) and `shape`
/// holding a copy of `data`, which must be exactly product(shape) ×
/// itemsize bytes (refused otherwise).
pub(crate) fn new_array<'py>(
    py: Python<'py>,
    dtype: DType,
    shape: &[usize],
    data: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let expected = shape.iter().product::<usize>() * dtype.itemsize();
    if data.len() != expected {
        return Err(PyValueError::new_err(format!(
            "internal: {} bytes for an array of {expected}",
            data.len()
        )));
    }
    new_array_with(py, dtype, shape, |out| out.copy_from_slice(data))
}

/// A new C-contiguous NumPy array of `dtype` and `shape` whose bytes
/// (product(shape) × itemsize of them, in C order) `fill` writes.
pub(crate) fn new_array_with<'py>(
    py: Python<'py>,
    dtype: DType,
    shape: &[usize],
    fill: impl FnOnce(&mut [u8]),
) -> PyResult<Bound<'py, PyAny>> {
    let nbytes = shape.iter().product::<usize>() * dtype.itemsize();
    let t = types(py)?;
    let descr = t.descrs[dtype_slot(dtype)].bind(py).clone();
    let mut dims: Vec<npy_intp> = shape.iter().map(|&d| d as npy_intp).collect();
    // SAFETY: PyArray_Empty steals the descriptor reference that
    // into_dtype_ptr hands over, and returns a new reference (or null with
    // a Python error set). The new array is C-contiguous, owns exactly
    // product(shape) × itemsize bytes (`nbytes`), and no other code has
    // seen it yet: `fill` gets those bytes, and only them.
    unsafe {
        let raw = PY_ARRAY_API.PyArray_Empty(
            py,
            dims.len() as std::os::raw::c_int,
            dims.as_mut_ptr(),
            descr.into_dtype_ptr(),
            0,
        );
        let obj = Bound::from_owned_ptr_or_err(py, raw)?;
        if nbytes != 0 {
            let arr = obj.as_ptr() as *mut numpy::npyffi::PyArrayObject;
            fill(std::slice::from_raw_parts_mut(
                (*arr).fields.data as *mut u8,
                nbytes,
            ));
        }
        Ok(obj)
    }
}

/// A 1-D `float64` array of `values`, written straight into the NumPy
/// array (what `array_to_py(NdArray::from_vec(values.to_vec()))` gives).
pub(crate) fn f64_column<'py>(py: Python<'py>, values: &[f64]) -> PyResult<Bound<'py, PyAny>> {
    new_array_with(py, DType::F64, &[values.len()], |out| {
        for (o, v) in out.chunks_exact_mut(8).zip(values) {
            o.copy_from_slice(&v.to_ne_bytes());
        }
    })
}

/// A 1-D `bool` array of `values`, written straight into the NumPy array.
pub(crate) fn bool_column<'py>(py: Python<'py>, values: &[bool]) -> PyResult<Bound<'py, PyAny>> {
    new_array_with(py, DType::BOOL, &[values.len()], |out| {
        for (o, &v) in out.iter_mut().zip(values) {
            *o = u8::from(v);
        }
    })
}

fn object_array_to_py<'py>(py: Python<'py>, o: &ObjectArray) -> PyResult<Bound<'py, PyAny>> {
    let t = types(py)?;
    let mut dims: Vec<npy_intp> = o.shape().iter().map(|&d| d as npy_intp).collect();
    // SAFETY: as in array_to_py; an object array from PyArray_Empty holds
    // None in every slot.
    let result = unsafe {
        let raw = PY_ARRAY_API.PyArray_Empty(
            py,
            dims.len() as std::os::raw::c_int,
            dims.as_mut_ptr(),
            t.object_descr.bind(py).clone().into_dtype_ptr(),
            0,
        );
        Bound::from_owned_ptr_or_err(py, raw)?
    };
    // The reference fills it with `result.flat[index] = value`; doing the
    // same keeps NumPy's assignment rules identical.
    let flat = result.getattr("flat")?;
    for (index, value) in o.values().iter().enumerate() {
        flat.set_item(index, to_py(py, value)?)?;
    }
    Ok(result)
}

// ------------------------------------------------------------ from Python

/// Counts, during one conversion, bytes the value will take at least once
/// encoded (array data, bytes, string and key lengths, one per scalar), so
/// that a value over the limit is refused before it is copied in full.
struct Budget {
    counted: usize,
    max: usize,
}

impl Budget {
    /// Counts `n` more bytes, or fails when the total passes the limit.
    fn take(&mut self, n: usize) -> Result<(), ConvertError> {
        self.counted = self.counted.saturating_add(n);
        if self.counted > self.max {
            return Err(ConvertError::TooLarge {
                size: self.counted,
                max: self.max,
            });
        }
        Ok(())
    }
}

/// Converts a Python object into a value exactly as the reference codec
/// would encode it, or fails with the reference's `CodecError`.
pub fn from_py(obj: &Bound<'_, PyAny>, mode: ArrayMode) -> PyResult<Value> {
    let mut budget = Budget {
        counted: 0,
        max: usize::MAX,
    };
    from_py_at(obj, mode, 0, &mut budget)
}

/// [`from_py`], stopping with [`ConvertError::TooLarge`] as soon as the
/// value is known to encode to more than `max_message_size` bytes (its
/// arrays, bytes and strings alone are more), so that no more than that is
/// ever copied. `Err(Ok(e))`: too large; `Err(Err(e))`: any other failure.
pub fn from_py_bounded(
    obj: &Bound<'_, PyAny>,
    mode: ArrayMode,
    max_message_size: usize,
) -> Result<Value, Result<ConvertError, PyErr>> {
    let mut budget = Budget {
        counted: 0,
        max: max_message_size,
    };
    from_py_at(obj, mode, 0, &mut budget).map_err(|e| {
        if budget.counted > budget.max {
            Ok(ConvertError::TooLarge {
                size: budget.counted,
                max: budget.max,
            })
        } else {
            Err(e)
        }
    })
}

/// [`from_py_bounded`] with its refusal raised as any other: the
/// reference's `CodecError` saying the value passed `max_message_size`.
pub fn from_py_limited(
    obj: &Bound<'_, PyAny>,
    mode: ArrayMode,
    max_message_size: usize,
) -> PyResult<Value> {
    from_py_bounded(obj, mode, max_message_size).map_err(|e| match e {
        Ok(too_large) => PyErr::from(too_large),
        Err(other) => other,
    })
}

/// What [`from_py_bounded`] would find converting the Python objects that
/// `value` mirrors (as `from_py` makes it): `Err(TooLarge)`, counted the
/// same way and at the same point, when they are over `max_message_size`.
/// For values built natively in place of a conversion.
pub(crate) fn check_bounded(value: &Value, max_message_size: usize) -> Result<(), ConvertError> {
    fn walk(value: &Value, budget: &mut Budget) -> Result<(), ConvertError> {
        budget.take(1)?;
        match value {
            Value::Str(s) => budget.take(s.len()),
            Value::Bytes(b) => budget.take(b.len()),
            Value::Array(a) => budget.take(a.as_bytes().len()),
            Value::List(items) | Value::Tuple(items) => {
                items.iter().try_for_each(|item| walk(item, budget))
            }
            Value::Dict(d) => d.iter().try_for_each(|(k, v)| {
                budget.take(k.len())?;
                walk(v, budget)
            }),
            Value::ObjectArray(o) => o.values().iter().try_for_each(|item| walk(item, budget)),
            _ => Ok(()),
        }
    }
    let mut budget = Budget {
        counted: 0,
        max: max_message_size,
    };
    walk(value, &mut budget)
}

fn from_py_at(
    obj: &Bound<'_, PyAny>,
    mode: ArrayMode,
    depth: usize,
    budget: &mut Budget,
) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(ConvertError::TooDeep.into());
    }
    let py = obj.py();
    budget.take(1)?;
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // The reference's order of checks: str, bool, int, float, np.generic,
    // GraphInstance, object arrays, dict, list/tuple, bytes, arrays.
    if let Ok(s) = obj.cast::<PyString>() {
        return match s.to_cow() {
            Ok(text) => {
                budget.take(text.len())?;
                Ok(Value::Str(text.into_owned()))
            }
            Err(e) => Err(ConvertError::InvalidString {
                reason: e.to_string(),
            }
            .into()),
        };
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Int(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        // Beyond 64 bits: carried as decimal digits, as the reference's
        // JSON header carries any Python int.
        let repr = obj.str()?.to_cow()?.into_owned();
        return match BigInt::parse(&repr) {
            Some(big) => Ok(Value::BigInt(big)),
            None => Err(ConvertError::IntegerRange { repr }.into()),
        };
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    let t = types(py)?;
    if obj.is_instance(t.generic.bind(py))? {
        let array = t.asarray.bind(py).call1((obj,))?;
        return from_py_at(&array, mode, depth + 1, budget);
    }
    if obj.is_instance(t.graph.bind(py))? {
        if depth + 2 > MAX_DEPTH {
            return Err(ConvertError::TooDeep.into());
        }
        let mut field = |name: &str| from_py_at(&obj.getattr(name)?, mode, depth + 2, budget);
        return Ok(Value::from(Graph {
            n_nodes: field("n_nodes")?,
            n_edges: field("n_edges")?,
            nodes_features: field("nodes_features")?,
            edges_features: field("edges_features")?,
            edges: field("edges")?,
        }));
    }
    if let Ok(array) = obj.cast::<PyUntypedArray>() {
        if array.dtype().is_equiv_to(t.object_descr.bind(py)) {
            return object_array_from_py(array, mode, depth, budget);
        }
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        // Entries are gathered first and the dict built in bulk: `Dict`'s
        // bulk insertion indexes keys past a few entries, where one
        // `insert` per key would compare it with every earlier key
        // (quadratic in a large `info`).
        let mut entries = Vec::with_capacity(d.len());
        for key in d.keys() {
            if key.cast::<PyString>().is_err() {
                return Err(ConvertError::NonStringKey.into());
            }
        }
        for (k, v) in d.iter() {
            let key = match k.cast::<PyString>()?.to_cow() {
                Ok(text) => {
                    budget.take(text.len())?;
                    text.into_owned()
                }
                Err(e) => {
                    return Err(ConvertError::InvalidString {
                        reason: e.to_string(),
                    }
                    .into())
                }
            };
            entries.push((key, from_py_at(&v, mode, depth + 1, budget)?));
        }
        return Ok(Value::Dict(entries.into_iter().collect()));
    }
    if let Ok(list) = obj.cast::<PyList>() {
        let mut items = Vec::with_capacity(list.len());
        for item in list.iter() {
            items.push(from_py_at(&item, mode, depth + 1, budget)?);
        }
        return Ok(Value::List(items));
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        let mut items = Vec::with_capacity(tuple.len());
        for item in tuple.iter() {
            items.push(from_py_at(&item, mode, depth + 1, budget)?);
        }
        return Ok(Value::Tuple(items));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        budget.take(b.as_bytes().len())?;
        return Ok(Value::Bytes(match mode {
            ArrayMode::Copy => Bytes::copy_from_slice(b.as_bytes()),
            ArrayMode::Borrow => share_bytes(b),
        }));
    }
    if let Ok(array) = obj.cast::<PyUntypedArray>() {
        budget.take(array_nbytes(array)?)?;
        return array_from_py(array, mode).map(Value::Array);
    }
    // Any other tensor: the reference asks its backends for a NumPy copy.
    let converted = t
        .get_backend_from_tensor
        .bind(py)
        .call1((obj,))
        .and_then(|backend| backend.call_method1("to_numpy", (obj,)));
    match converted {
        Ok(array) => match array.cast::<PyUntypedArray>() {
            Ok(array) => {
                budget.take(array_nbytes(array)?)?;
                array_from_py(array, mode).map(Value::Array)
            }
            Err(_) => Err(unsupported(obj)),
        },
        Err(_) => Err(unsupported(obj)),
    }
}

fn unsupported(obj: &Bound<'_, PyAny>) -> PyErr {
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    ConvertError::UnsupportedType { type_name }.into()
}

/// The bytes a numeric array's data takes on the wire (its wire dtype's
/// item size times its element count), or the dtype's refusal.
fn array_nbytes(array: &Bound<'_, PyUntypedArray>) -> PyResult<usize> {
    let dtype = wire_dtype(&array.dtype())?;
    Ok(array.len().saturating_mul(dtype.itemsize()))
}

fn object_array_from_py(
    array: &Bound<'_, PyUntypedArray>,
    mode: ArrayMode,
    depth: usize,
    budget: &mut Budget,
) -> PyResult<Value> {
    let shape = array.shape().to_vec();
    let mut values = Vec::with_capacity(array.len());
    for item in array.getattr("flat")?.try_iter()? {
        values.push(from_py_at(&item?, mode, depth + 1, budget)?);
    }
    ObjectArray::new(shape, values)
        .map(Value::ObjectArray)
        .map_err(|e| {
            ConvertError::InvalidArray {
                reason: e.to_string(),
            }
            .into()
        })
}

/// The wire dtype of a NumPy array, or the reference's refusal.
pub(crate) fn wire_dtype(descr: &Bound<'_, PyArrayDescr>) -> PyResult<DType> {
    let refuse = || -> PyErr {
        ConvertError::UnsupportedDType {
            dtype: descr
                .str()
                .map(|s| s.to_string())
                .unwrap_or_else(|_| "?".into()),
        }
        .into()
    };
    if descr.has_fields() || descr.has_subarray() {
        return Err(refuse());
    }
    let kind = match descr.kind() {
        b'b' => ScalarKind::Bool,
        b'i' => ScalarKind::Int,
        b'u' => ScalarKind::UInt,
        b'f' => ScalarKind::Float,
        b'c' => ScalarKind::Complex,
        _ => return Err(refuse()),
    };
    let order = match descr.byteorder() {
        b'>' => ByteOrder::Big,
        b'<' => ByteOrder::Little,
        _ => ByteOrder::NATIVE,
    };
    DType::new(kind, descr.itemsize(), order).ok_or_else(refuse)
}

/// Keeps a Python object (a NumPy array or a `bytes`) alive while a
/// [`Bytes`] shares its memory.
struct PyOwner {
    _obj: Py<PyAny>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the pointer is into memory owned by the object that `_obj` keeps
// alive; it is only read, and `Py<PyAny>` is Send + Sync.
unsafe impl Send for PyOwner {}
unsafe impl Sync for PyOwner {}

impl AsRef<[u8]> for PyOwner {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: ptr..ptr+len is the data of the live object.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A [`Bytes`] sharing the memory of a Python `bytes` (immutable).
fn share_bytes(b: &Bound<'_, PyBytes>) -> Bytes {
    let data = b.as_bytes();
    Bytes::from_owner(PyOwner {
        _obj: b.clone().into_any().unbind(),
        ptr: data.as_ptr(),
        len: data.len(),
    })
}

/// Reads a numeric NumPy array: in place when C-contiguous and
/// [`ArrayMode::Borrow`], otherwise one copy in C order.
pub fn array_from_py(array: &Bound<'_, PyUntypedArray>, mode: ArrayMode) -> PyResult<NdArray> {
    let dtype = wire_dtype(&array.dtype())?;
    let shape = array.shape().to_vec();
    let nbytes = array.len() * dtype.itemsize();
    let data = if array.is_c_contiguous() {
        // SAFETY: a C-contiguous array's data pointer addresses
        // product(shape) × itemsize readable bytes.
        let ptr = unsafe { (*array.as_array_ptr()).fields.data as *const u8 };
        // SAFETY: the array object is alive (borrowed) while its flags are read.
        let flags = unsafe { (*array.as_array_ptr()).fields.flags };
        let read_only = flags & numpy::npyffi::flags::NPY_ARRAY_WRITEABLE == 0;
        if mode == ArrayMode::Borrow && read_only {
            Bytes::from_owner(PyOwner {
                _obj: array.clone().into_any().unbind(),
                ptr,
                len: nbytes,
            })
        } else if nbytes == 0 {
            Bytes::new()
        } else {
            // SAFETY: see above.
            Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(ptr, nbytes) })
        }
    } else {
        let copy = array.call_method1("tobytes", ("C",))?;
        share_bytes(copy.cast::<PyBytes>()?)
    };
    NdArray::from_bytes(dtype, shape, data).map_err(|e| {
        ConvertError::InvalidArray {
            reason: e.to_string(),
        }
        .into()
    })
}

// ------------------------------------------------------------- the module

/// `_native.encode(value, max_message_size=64 MiB) -> bytes`: the crate's
/// codec over [`from_py_bounded`], for tests and tools.
#[pyfunction]
#[pyo3(signature = (value, max_message_size = unienv_remote::codec::DEFAULT_MAX_MESSAGE_SIZE))]
fn encode<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    max_message_size: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let codec = codec(max_message_size)?;
    // Bounded: a value over the limit is refused as soon as that is known,
    // before the rest of it is converted.
    let value = from_py_limited(value, ArrayMode::Borrow, max_message_size)?;
    let frame = codec
        .encode(&value)
        .map_err(|e| CodecError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &frame))
}

/// `_native.decode(payload, max_message_size=64 MiB)`: the crate's codec
/// then [`to_py`].
#[pyfunction]
#[pyo3(signature = (payload, max_message_size = unienv_remote::codec::DEFAULT_MAX_MESSAGE_SIZE))]
fn decode<'py>(
    py: Python<'py>,
    payload: &Bound<'py, PyBytes>,
    max_message_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let codec = codec(max_message_size)?;
    let frame = share_bytes(payload);
    let value = codec
        .decode(frame)
        .map_err(|e| CodecError::new_err(e.to_string()))?;
    to_py(py, &value)
}

fn codec(max_message_size: usize) -> PyResult<unienv_remote::Codec> {
    unienv_remote::Codec::new(max_message_size)
        .map_err(|_| PyValueError::new_err("max_message_size must be at least 8"))
}

/// Registers `encode` and `decode`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    Ok(())
}
