//! The value API: what callbacks receive (actions, reset keywords) and
//! return (observations, infos, frames). Arrays are a dtype, a shape and a
//! data pointer; received arrays are lent to C without a copy, and C can
//! lend an array of its own to the server with a release callback.

use crate::error::{guard, quiet, req, req_mut, status, take, text, Failure};
use crate::error::{UNIENV_ERR_NOT_FOUND, UNIENV_ERR_WRONG_TYPE};
use bytes::Bytes;
use std::ffi::{c_char, c_void};
use unienv_remote::{DType, Dict, NdArray, ScalarKind, Value};

/// `bool` (one byte, 0 or 1).
pub const UNIENV_DTYPE_BOOL: i32 = 1;
/// `int8_t`.
pub const UNIENV_DTYPE_INT8: i32 = 2;
/// `int16_t`.
pub const UNIENV_DTYPE_INT16: i32 = 3;
/// `int32_t`.
pub const UNIENV_DTYPE_INT32: i32 = 4;
/// `int64_t`.
pub const UNIENV_DTYPE_INT64: i32 = 5;
/// `uint8_t` (images).
pub const UNIENV_DTYPE_UINT8: i32 = 6;
/// `uint16_t`.
pub const UNIENV_DTYPE_UINT16: i32 = 7;
/// `uint32_t`.
pub const UNIENV_DTYPE_UINT32: i32 = 8;
/// `uint64_t`.
pub const UNIENV_DTYPE_UINT64: i32 = 9;
/// IEEE half precision (two bytes).
pub const UNIENV_DTYPE_FLOAT16: i32 = 10;
/// `float`.
pub const UNIENV_DTYPE_FLOAT32: i32 = 11;
/// `double`.
pub const UNIENV_DTYPE_FLOAT64: i32 = 12;
/// Two `float`s (real, imaginary).
pub const UNIENV_DTYPE_COMPLEX64: i32 = 13;
/// Two `double`s (real, imaginary).
pub const UNIENV_DTYPE_COMPLEX128: i32 = 14;

/// Python `None`.
pub const UNIENV_VALUE_NULL: i32 = 0;
/// A boolean.
pub const UNIENV_VALUE_BOOL: i32 = 1;
/// An integer.
pub const UNIENV_VALUE_INT: i32 = 2;
/// A float.
pub const UNIENV_VALUE_FLOAT: i32 = 3;
/// A UTF-8 string.
pub const UNIENV_VALUE_STRING: i32 = 4;
/// A byte string.
pub const UNIENV_VALUE_BYTES: i32 = 5;
/// A numeric array (NumPy scalars travel as zero-dimensional arrays).
pub const UNIENV_VALUE_ARRAY: i32 = 6;
/// A list.
pub const UNIENV_VALUE_LIST: i32 = 7;
/// A tuple.
pub const UNIENV_VALUE_TUPLE: i32 = 8;
/// A dictionary with string keys, in insertion order.
pub const UNIENV_VALUE_DICT: i32 = 9;
/// Anything else the protocol carries (big integers, object arrays, graphs).
pub const UNIENV_VALUE_OTHER: i32 = 10;

/// A value: owned when a constructor returned it (free it with
/// `unienv_value_free`, or pass it to a function that takes it), borrowed
/// when an accessor returned it (`const UnienvValue *`, valid as long as
/// its owner).
#[repr(transparent)]
pub struct UnienvValue(pub(crate) Value);

impl UnienvValue {
    pub(crate) fn boxed(v: Value) -> *mut UnienvValue {
        Box::into_raw(Box::new(UnienvValue(v)))
    }

    pub(crate) fn borrowed(v: &Value) -> *const UnienvValue {
        // `repr(transparent)`: a `&Value` is a `&UnienvValue`.
        (v as *const Value).cast()
    }
}

/// A borrowed view of an array value. `data` points at `nbytes` bytes in C
/// order and native byte order; it is *not* guaranteed to be aligned for
/// the element type (received arrays point into the message): read
/// elements with `memcpy`, or copy the whole array out.
#[repr(C)]
pub struct UnienvArrayView {
    /// One of the `UNIENV_DTYPE_*` codes.
    pub dtype: i32,
    /// Number of dimensions (0 for a NumPy scalar).
    pub ndim: usize,
    /// `ndim` extents.
    pub shape: *const usize,
    /// The elements.
    pub data: *const c_void,
    /// Byte length of `data` (elements × item size).
    pub nbytes: usize,
}

pub(crate) fn dtype_of(code: i32) -> Result<DType, Failure> {
    Ok(match code {
        UNIENV_DTYPE_BOOL => DType::BOOL,
        UNIENV_DTYPE_INT8 => DType::I8,
        UNIENV_DTYPE_INT16 => DType::I16,
        UNIENV_DTYPE_INT32 => DType::I32,
        UNIENV_DTYPE_INT64 => DType::I64,
        UNIENV_DTYPE_UINT8 => DType::U8,
        UNIENV_DTYPE_UINT16 => DType::U16,
        UNIENV_DTYPE_UINT32 => DType::U32,
        UNIENV_DTYPE_UINT64 => DType::U64,
        UNIENV_DTYPE_FLOAT16 => DType::F16,
        UNIENV_DTYPE_FLOAT32 => DType::F32,
        UNIENV_DTYPE_FLOAT64 => DType::F64,
        UNIENV_DTYPE_COMPLEX64 => DType::C64,
        UNIENV_DTYPE_COMPLEX128 => DType::C128,
        other => return Err(Failure::invalid(format!("unknown dtype code {other}"))),
    })
}

pub(crate) fn code_of(dtype: DType) -> i32 {
    match (dtype.kind(), dtype.itemsize()) {
        (ScalarKind::Bool, _) => UNIENV_DTYPE_BOOL,
        (ScalarKind::Int, 1) => UNIENV_DTYPE_INT8,
        (ScalarKind::Int, 2) => UNIENV_DTYPE_INT16,
        (ScalarKind::Int, 4) => UNIENV_DTYPE_INT32,
        (ScalarKind::Int, _) => UNIENV_DTYPE_INT64,
        (ScalarKind::UInt, 1) => UNIENV_DTYPE_UINT8,
        (ScalarKind::UInt, 2) => UNIENV_DTYPE_UINT16,
        (ScalarKind::UInt, 4) => UNIENV_DTYPE_UINT32,
        (ScalarKind::UInt, _) => UNIENV_DTYPE_UINT64,
        (ScalarKind::Float, 2) => UNIENV_DTYPE_FLOAT16,
        (ScalarKind::Float, 4) => UNIENV_DTYPE_FLOAT32,
        (ScalarKind::Float, _) => UNIENV_DTYPE_FLOAT64,
        (ScalarKind::Complex, 8) => UNIENV_DTYPE_COMPLEX64,
        (ScalarKind::Complex, _) => UNIENV_DTYPE_COMPLEX128,
    }
}

/// Reads a shape argument (`ndim` extents; `shape` may be NULL when `ndim`
/// is 0).
///
/// # Safety
/// `shape` points to `ndim` readable `size_t`s, or `ndim` is 0.
pub(crate) unsafe fn shape_arg(shape: *const usize, ndim: usize) -> Result<Vec<usize>, Failure> {
    if ndim == 0 {
        return Ok(Vec::new());
    }
    if shape.is_null() {
        return Err(Failure::null("shape"));
    }
    if ndim > unienv_remote::codec::MAX_DIMS {
        return Err(Failure::invalid(format!(
            "ndim is {ndim}: at most {} dimensions",
            unienv_remote::codec::MAX_DIMS
        )));
    }
    Ok(std::slice::from_raw_parts(shape, ndim).to_vec())
}

/// Converts every array of a received value to native byte order (a no-op,
/// without allocation, when it already is), so views lend native data.
pub(crate) fn native(value: Value) -> Value {
    match value {
        Value::Array(a) if !a.dtype().is_native() => Value::Array(a.to_native()),
        Value::List(v) => Value::List(v.into_iter().map(native).collect()),
        Value::Tuple(v) => Value::Tuple(v.into_iter().map(native).collect()),
        Value::Dict(d) => {
            if d.values().any(needs_native) {
                let mut out = Dict::with_capacity(d.len());
                for (k, v) in d.iter() {
                    out.insert(k, native(v.clone()));
                }
                Value::Dict(out)
            } else {
                Value::Dict(d)
            }
        }
        other => other,
    }
}

fn needs_native(v: &Value) -> bool {
    match v {
        Value::Array(a) => !a.dtype().is_native(),
        Value::List(v) | Value::Tuple(v) => v.iter().any(needs_native),
        Value::Dict(d) => d.values().any(needs_native),
        _ => false,
    }
}

// ---- constructors ----

/// A new `None`.
#[no_mangle]
pub extern "C" fn unienv_value_null() -> *mut UnienvValue {
    quiet(std::ptr::null_mut(), || UnienvValue::boxed(Value::Null))
}

/// A new boolean.
#[no_mangle]
pub extern "C" fn unienv_value_bool(value: bool) -> *mut UnienvValue {
    quiet(std::ptr::null_mut(), || {
        UnienvValue::boxed(Value::Bool(value))
    })
}

/// A new integer.
#[no_mangle]
pub extern "C" fn unienv_value_int(value: i64) -> *mut UnienvValue {
    quiet(std::ptr::null_mut(), || {
        UnienvValue::boxed(Value::Int(value))
    })
}

/// A new float.
#[no_mangle]
pub extern "C" fn unienv_value_float(value: f64) -> *mut UnienvValue {
    quiet(std::ptr::null_mut(), || {
        UnienvValue::boxed(Value::Float(value))
    })
}

/// A new string, copied from NUL-terminated UTF-8 text (NULL on failure).
///
/// # Safety
/// `text` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_string(text_: *const c_char) -> *mut UnienvValue {
    guard(std::ptr::null_mut(), || {
        Ok(UnienvValue::boxed(Value::Str(text(text_, "text")?.into())))
    })
}

/// A new array, copied from `nbytes` bytes at `data` (C order, native byte
/// order; `nbytes` must be the product of `shape` times the item size).
/// NULL on failure.
///
/// # Safety
/// `shape` points to `ndim` extents; `data` to `nbytes` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_array(
    dtype: i32,
    shape: *const usize,
    ndim: usize,
    data: *const c_void,
    nbytes: usize,
) -> *mut UnienvValue {
    guard(std::ptr::null_mut(), || {
        let dtype = dtype_of(dtype)?;
        let shape = shape_arg(shape, ndim)?;
        let bytes = if nbytes == 0 {
            Bytes::new()
        } else if data.is_null() {
            return Err(Failure::null("data"));
        } else {
            Bytes::copy_from_slice(std::slice::from_raw_parts(data.cast::<u8>(), nbytes))
        };
        array(dtype, shape, bytes)
    })
}

fn array(dtype: DType, shape: Vec<usize>, bytes: Bytes) -> Result<*mut UnienvValue, Failure> {
    NdArray::from_bytes(dtype, shape, bytes)
        .map(|a| UnienvValue::boxed(Value::Array(a)))
        .map_err(|e| Failure::invalid(e.to_string()))
}

/// Called once when the server no longer needs memory lent with
/// `unienv_value_array_lent` (on any thread: after the response is sent).
pub type UnienvReleaseFn = Option<unsafe extern "C" fn(context: *mut c_void, data: *const c_void)>;

struct Lent {
    data: *const u8,
    len: usize,
    release: UnienvReleaseFn,
    context: *mut c_void,
}

// The lender promised (unienv_value_array_lent's contract) that the memory
// stays valid and unchanged until `release`, and that `release` may run on
// any thread.
unsafe impl Send for Lent {}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the lender guarantees `len` readable bytes until release.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: the lender's callback, called once.
            unsafe { release(self.context, self.data.cast()) }
        }
    }
}

/// A new array over memory lent by the caller, without a copy: the server
/// reads `data` until it calls `release(context, data)` (once, on any
/// thread, possibly after the callback that returned the value has ended);
/// until then the memory must stay valid and unchanged. `release` may be
/// NULL for memory that lives for the whole program. NULL on failure (then
/// `release` is called at once).
///
/// # Safety
/// `shape` points to `ndim` extents; `data` to `nbytes` bytes that stay
/// valid and unchanged until `release` is called.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_array_lent(
    dtype: i32,
    shape: *const usize,
    ndim: usize,
    data: *const c_void,
    nbytes: usize,
    release: UnienvReleaseFn,
    context: *mut c_void,
) -> *mut UnienvValue {
    let lent = Lent {
        data: data.cast(),
        len: nbytes,
        release,
        context,
    };
    guard(std::ptr::null_mut(), move || {
        let dtype = dtype_of(dtype)?;
        let shape = shape_arg(shape, ndim)?;
        if nbytes > 0 && data.is_null() {
            return Err(Failure::null("data"));
        }
        array(dtype, shape, Bytes::from_owner(lent))
    })
}

/// A new, empty list.
#[no_mangle]
pub extern "C" fn unienv_value_list() -> *mut UnienvValue {
    quiet(std::ptr::null_mut(), || {
        UnienvValue::boxed(Value::List(Vec::new()))
    })
}

/// A new, empty tuple.
#[no_mangle]
pub extern "C" fn unienv_value_tuple() -> *mut UnienvValue {
    quiet(std::ptr::null_mut(), || {
        UnienvValue::boxed(Value::Tuple(Vec::new()))
    })
}

/// A new, empty dictionary.
#[no_mangle]
pub extern "C" fn unienv_value_dict() -> *mut UnienvValue {
    quiet(std::ptr::null_mut(), || {
        UnienvValue::boxed(Value::Dict(Dict::new()))
    })
}

/// Appends `item` (taken, even on failure) to a list or tuple.
///
/// # Safety
/// `sequence` is a live owned value; `item` an owned value or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_push(
    sequence: *mut UnienvValue,
    item: *mut UnienvValue,
) -> i32 {
    let item = item.as_mut().map(|i| Box::from_raw(i));
    status(|| {
        let item = item.ok_or_else(|| Failure::null("item"))?;
        match &mut req_mut(sequence, "sequence")?.0 {
            Value::List(v) | Value::Tuple(v) => {
                v.push(item.0);
                Ok(())
            }
            other => Err(wrong("a list or tuple", other)),
        }
    })
}

/// Sets `key` (NUL-terminated UTF-8) of a dictionary to `item` (taken, even
/// on failure), replacing an existing entry in place.
///
/// # Safety
/// `dict` is a live owned value; `key` a NUL-terminated string; `item` an
/// owned value or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_dict_set(
    dict: *mut UnienvValue,
    key: *const c_char,
    item: *mut UnienvValue,
) -> i32 {
    let item = item.as_mut().map(|i| Box::from_raw(i));
    status(|| {
        let item = item.ok_or_else(|| Failure::null("item"))?;
        let key = text(key, "key")?;
        match &mut req_mut(dict, "dict")?.0 {
            Value::Dict(d) => {
                d.insert(key, item.0);
                Ok(())
            }
            other => Err(wrong("a dict", other)),
        }
    })
}

/// A deep copy of `value` (arrays share their memory), owned by the caller.
///
/// # Safety
/// `value` is a live value.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_clone(value: *const UnienvValue) -> *mut UnienvValue {
    guard(std::ptr::null_mut(), || {
        Ok(UnienvValue::boxed(req(value, "value")?.0.clone()))
    })
}

/// Frees an owned value (NULL is ignored). Never free a borrowed value.
///
/// # Safety
/// `value` is NULL or an owned value not freed yet.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_free(value: *mut UnienvValue) {
    if let Ok(v) = take(value, "value") {
        quiet((), move || drop(v));
    }
}

// ---- accessors ----

fn wrong(expected: &str, got: &Value) -> Failure {
    Failure::new(
        UNIENV_ERR_WRONG_TYPE,
        format!("expected {expected}, got {}", got.type_name()),
    )
}

/// The kind of `value` (`UNIENV_VALUE_*`; `UNIENV_VALUE_NULL` for NULL).
///
/// # Safety
/// `value` is NULL or a live value.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_kind(value: *const UnienvValue) -> i32 {
    let Some(value) = value.as_ref() else {
        return UNIENV_VALUE_NULL;
    };
    quiet(UNIENV_VALUE_OTHER, || match value.0 {
        Value::Null => UNIENV_VALUE_NULL,
        Value::Bool(_) => UNIENV_VALUE_BOOL,
        Value::Int(_) | Value::UInt(_) => UNIENV_VALUE_INT,
        Value::Float(_) => UNIENV_VALUE_FLOAT,
        Value::Str(_) => UNIENV_VALUE_STRING,
        Value::Bytes(_) => UNIENV_VALUE_BYTES,
        Value::Array(_) => UNIENV_VALUE_ARRAY,
        Value::List(_) => UNIENV_VALUE_LIST,
        Value::Tuple(_) => UNIENV_VALUE_TUPLE,
        Value::Dict(_) => UNIENV_VALUE_DICT,
        _ => UNIENV_VALUE_OTHER,
    })
}

/// Reads a boolean: a bool, or a one-element bool array.
///
/// # Safety
/// `value` is a live value; `out` points to a writable `bool`.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_get_bool(value: *const UnienvValue, out: *mut bool) -> i32 {
    status(|| {
        let v = &req(value, "value")?.0;
        let out = req_mut(out, "out")?;
        *out = match v {
            Value::Bool(b) => *b,
            Value::Array(a) if a.len() == 1 && a.dtype().kind() == ScalarKind::Bool => {
                a.get_f64(0).is_some_and(|x| x != 0.0)
            }
            other => return Err(wrong("a bool", other)),
        };
        Ok(())
    })
}

/// Reads an integer: an int in the `int64_t` range, or a one-element integer
/// array (NumPy integers travel as zero-dimensional arrays). Floats and
/// bools are refused (`UNIENV_ERR_WRONG_TYPE`).
///
/// # Safety
/// `value` is a live value; `out` points to a writable `int64_t`.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_get_int(value: *const UnienvValue, out: *mut i64) -> i32 {
    status(|| {
        let v = &req(value, "value")?.0;
        let out = req_mut(out, "out")?;
        let got = match v {
            Value::Int(i) => Some(*i),
            Value::UInt(u) => i64::try_from(*u).ok(),
            Value::Array(a)
                if a.len() == 1
                    && matches!(a.dtype().kind(), ScalarKind::Int | ScalarKind::UInt) =>
            {
                a.format_element(0).and_then(|s| s.parse().ok())
            }
            other => return Err(wrong("an integer", other)),
        };
        *out = got.ok_or_else(|| {
            Failure::new(
                UNIENV_ERR_WRONG_TYPE,
                "the integer is outside the int64_t range",
            )
        })?;
        Ok(())
    })
}

/// Reads a number as a double: an int, a float, or a one-element real
/// array. Bools are refused.
///
/// # Safety
/// `value` is a live value; `out` points to a writable `double`.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_get_float(value: *const UnienvValue, out: *mut f64) -> i32 {
    status(|| {
        let v = &req(value, "value")?.0;
        let out = req_mut(out, "out")?;
        *out = match v {
            Value::Bool(_) => None,
            Value::Array(a) if a.dtype().kind() == ScalarKind::Complex => None,
            other => other.as_scalar_f64(),
        }
        .ok_or_else(|| wrong("a number", v))?;
        Ok(())
    })
}

/// Lends a string's UTF-8 bytes (not NUL-terminated) as `*data`, `*len`.
///
/// # Safety
/// `value` is a live value; `data` and `len` are writable.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_get_string(
    value: *const UnienvValue,
    data: *mut *const c_char,
    len: *mut usize,
) -> i32 {
    status(|| {
        let v = &req(value, "value")?.0;
        let (data, len) = (req_mut(data, "data")?, req_mut(len, "len")?);
        let s = v.as_str().ok_or_else(|| wrong("a string", v))?;
        *data = s.as_ptr().cast();
        *len = s.len();
        Ok(())
    })
}

/// Lends an array's dtype, shape and data (see `UnienvArrayView`), valid
/// while `value` lives; nothing is copied.
///
/// # Safety
/// `value` is a live value; `view` points to a writable view.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_array_view(
    value: *const UnienvValue,
    view: *mut UnienvArrayView,
) -> i32 {
    status(|| {
        let v = &req(value, "value")?.0;
        let view = req_mut(view, "view")?;
        let a = v.as_array().ok_or_else(|| wrong("an array", v))?;
        if !a.dtype().is_native() {
            return Err(Failure::new(
                UNIENV_ERR_WRONG_TYPE,
                "the array is not in native byte order",
            ));
        }
        *view = UnienvArrayView {
            dtype: code_of(a.dtype()),
            ndim: a.ndim(),
            shape: a.shape().as_ptr(),
            data: a.as_bytes().as_ptr().cast(),
            nbytes: a.as_bytes().len(),
        };
        Ok(())
    })
}

/// Number of items of a list, tuple or dictionary (0 for other kinds or NULL).
///
/// # Safety
/// `value` is NULL or a live value.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_len(value: *const UnienvValue) -> usize {
    let Some(value) = value.as_ref() else {
        return 0;
    };
    quiet(0, || match &value.0 {
        Value::List(v) | Value::Tuple(v) => v.len(),
        Value::Dict(d) => d.len(),
        _ => 0,
    })
}

/// Item `index` of a list or tuple, or the value of entry `index` of a
/// dictionary, borrowed from `value` (NULL, with the last error set, when
/// out of range or of another kind).
///
/// # Safety
/// `value` is a live value.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_item(
    value: *const UnienvValue,
    index: usize,
) -> *const UnienvValue {
    guard(std::ptr::null(), || {
        let v = &req(value, "value")?.0;
        let item = match v {
            Value::List(items) | Value::Tuple(items) => items.get(index),
            Value::Dict(d) => d.values().nth(index),
            other => return Err(wrong("a list, tuple or dict", other)),
        };
        item.map(UnienvValue::borrowed).ok_or_else(|| {
            Failure::new(
                UNIENV_ERR_NOT_FOUND,
                format!("index {index} is out of range"),
            )
        })
    })
}

/// The key of entry `index` of a dictionary, lent as UTF-8 bytes (not
/// NUL-terminated) in `*data`, `*len`.
///
/// # Safety
/// `value` is a live value; `data` and `len` are writable.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_dict_key(
    value: *const UnienvValue,
    index: usize,
    data: *mut *const c_char,
    len: *mut usize,
) -> i32 {
    status(|| {
        let v = &req(value, "value")?.0;
        let (data, len) = (req_mut(data, "data")?, req_mut(len, "len")?);
        let d = v.as_dict().ok_or_else(|| wrong("a dict", v))?;
        let key = d.keys().nth(index).ok_or_else(|| {
            Failure::new(
                UNIENV_ERR_NOT_FOUND,
                format!("index {index} is out of range"),
            )
        })?;
        *data = key.as_ptr().cast();
        *len = key.len();
        Ok(())
    })
}

/// The value of `key` in a dictionary, borrowed (NULL, with the last error
/// `UNIENV_ERR_NOT_FOUND`, when missing).
///
/// # Safety
/// `value` is a live value; `key` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn unienv_value_dict_get(
    value: *const UnienvValue,
    key: *const c_char,
) -> *const UnienvValue {
    guard(std::ptr::null(), || {
        let v = &req(value, "value")?.0;
        let key = text(key, "key")?;
        let d = v.as_dict().ok_or_else(|| wrong("a dict", v))?;
        d.get(key)
            .map(UnienvValue::borrowed)
            .ok_or_else(|| Failure::new(UNIENV_ERR_NOT_FOUND, format!("no key {key:?}")))
    })
}
