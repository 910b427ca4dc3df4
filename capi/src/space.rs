//! Spaces described from C: boxes with a dtype, a shape and bounds,
//! discrete ranges, binary arrays, and dict and tuple nesting.

use crate::error::{guard, req_mut, status, take, text, Failure};
use crate::value::{dtype_of, shape_arg};
use bytes::Bytes;
use std::ffi::{c_char, c_void};
use unienv_remote::host::Space;
use unienv_remote::{DType, NdArray, ScalarKind};

/// A space under construction, owned by the caller until a function takes
/// it (`unienv_env_set_*_space`, `unienv_space_dict_set`,
/// `unienv_space_tuple_push`) or `unienv_space_free` frees it.
pub struct UnienvSpace(pub(crate) Space);

fn boxed(space: Space) -> *mut UnienvSpace {
    Box::into_raw(Box::new(UnienvSpace(space)))
}

fn real(dtype: DType) -> Result<DType, Failure> {
    match dtype.kind() {
        ScalarKind::Int | ScalarKind::UInt | ScalarKind::Float => Ok(dtype),
        _ => Err(Failure::invalid(format!(
            "a box space needs a real number dtype, not {}",
            dtype.name()
        ))),
    }
}

/// A box of `dtype` and `shape` with the same bounds for every element
/// (`-INFINITY` / `INFINITY` allowed; for integer dtypes they become the
/// dtype's minimum and maximum, as in UniEnv). NULL on failure.
///
/// # Safety
/// `shape` points to `ndim` extents (or `ndim` is 0).
#[no_mangle]
pub unsafe extern "C" fn unienv_space_box(
    dtype: i32,
    shape: *const usize,
    ndim: usize,
    low: f64,
    high: f64,
) -> *mut UnienvSpace {
    guard(std::ptr::null_mut(), || {
        let dtype = real(dtype_of(dtype)?)?;
        let shape = shape_arg(shape, ndim)?;
        if low.is_nan() || high.is_nan() || low > high {
            return Err(Failure::invalid(format!(
                "the bounds [{low}, {high}] are not an interval"
            )));
        }
        Ok(boxed(Space::boxed(dtype, shape, low, high)))
    })
}

/// A box of `dtype` and `shape` with a bound per element: `low` and `high`
/// each point to product(shape) elements of `dtype` (C order, native byte
/// order). NULL on failure.
///
/// # Safety
/// `shape` points to `ndim` extents; `low` and `high` to product(shape)
/// elements of `dtype` each.
#[no_mangle]
pub unsafe extern "C" fn unienv_space_box_bounds(
    dtype: i32,
    shape: *const usize,
    ndim: usize,
    low: *const c_void,
    high: *const c_void,
) -> *mut UnienvSpace {
    guard(std::ptr::null_mut(), || {
        let dtype = real(dtype_of(dtype)?)?;
        let shape = shape_arg(shape, ndim)?;
        let n = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.itemsize()))
            .ok_or_else(|| Failure::invalid("the shape is too large"))?;
        let bound = |p: *const c_void, name: &str| -> Result<NdArray, Failure> {
            if n > 0 && p.is_null() {
                return Err(Failure::null(name));
            }
            let bytes = if n == 0 {
                Bytes::new()
            } else {
                Bytes::copy_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), n))
            };
            NdArray::from_bytes(dtype, shape.clone(), bytes)
                .map_err(|e| Failure::invalid(format!("{name}: {e}")))
        };
        let (lo, hi) = (bound(low, "low")?, bound(high, "high")?);
        let (l, h) = (lo.to_f64_vec(), hi.to_f64_vec());
        if let Some(i) = (0..l.len()).find(|&i| l[i].is_nan() || h[i].is_nan() || l[i] > h[i]) {
            return Err(Failure::invalid(format!(
                "element {i}: the bounds [{}, {}] are not an interval",
                l[i], h[i]
            )));
        }
        Space::box_with_bounds(dtype, shape, lo, hi)
            .map(boxed)
            .map_err(|e| Failure::invalid(e.to_string()))
    })
}

/// The integers `0 .. n-1`: Gymnasium's `Discrete(n)`. UniEnv has no
/// discrete space: it is an int64 box of shape `()` from 0 to `n - 1`, as
/// the crate's built-in `cartpole` declares its action space. NULL when
/// `n < 1`.
#[no_mangle]
pub extern "C" fn unienv_space_discrete(n: i64) -> *mut UnienvSpace {
    guard(std::ptr::null_mut(), || {
        if n < 1 {
            return Err(Failure::invalid(format!(
                "a discrete space needs n >= 1, got {n}"
            )));
        }
        Ok(boxed(Space::boxed(
            DType::I64,
            Vec::new(),
            0.0,
            (n - 1) as f64,
        )))
    })
}

/// A boolean array space of `shape` (UniEnv's `BinarySpace`).
///
/// # Safety
/// `shape` points to `ndim` extents (or `ndim` is 0).
#[no_mangle]
pub unsafe extern "C" fn unienv_space_binary(shape: *const usize, ndim: usize) -> *mut UnienvSpace {
    guard(std::ptr::null_mut(), || {
        Ok(boxed(Space::binary(shape_arg(shape, ndim)?)))
    })
}

/// A new, empty dict space; add entries with `unienv_space_dict_set` (keys
/// are kept sorted, as UniEnv does).
#[no_mangle]
pub extern "C" fn unienv_space_dict() -> *mut UnienvSpace {
    guard(std::ptr::null_mut(), || {
        Ok(boxed(Space::dict(Vec::<(String, Space)>::new())))
    })
}

/// A new, empty tuple space; add items with `unienv_space_tuple_push`.
#[no_mangle]
pub extern "C" fn unienv_space_tuple() -> *mut UnienvSpace {
    guard(std::ptr::null_mut(), || Ok(boxed(Space::tuple(Vec::new()))))
}

/// Sets entry `key` of a dict space to `child` (taken, even on failure).
///
/// # Safety
/// `dict` is a live space; `key` a NUL-terminated string; `child` an owned
/// space or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_space_dict_set(
    dict: *mut UnienvSpace,
    key: *const c_char,
    child: *mut UnienvSpace,
) -> i32 {
    let child = take(child, "child");
    status(|| {
        let child = child?;
        let key = text(key, "key")?;
        let dict = req_mut(dict, "dict")?;
        let Space::Dict(d) = &dict.0 else {
            return Err(Failure::invalid(format!(
                "dict is a {}, not a dict space",
                dict.0.type_name()
            )));
        };
        let mut entries: Vec<(String, Space)> = d
            .entries()
            .iter()
            .filter(|(k, _)| k != key)
            .cloned()
            .collect();
        entries.push((key.to_string(), child.0));
        dict.0 = Space::dict(entries);
        Ok(())
    })
}

/// Appends `child` (taken, even on failure) to a tuple space.
///
/// # Safety
/// `tuple` is a live space; `child` an owned space or NULL.
#[no_mangle]
pub unsafe extern "C" fn unienv_space_tuple_push(
    tuple: *mut UnienvSpace,
    child: *mut UnienvSpace,
) -> i32 {
    let child = take(child, "child");
    status(|| {
        let child = child?;
        match &mut req_mut(tuple, "tuple")?.0 {
            Space::Tuple(items) => {
                items.push(child.0);
                Ok(())
            }
            other => Err(Failure::invalid(format!(
                "tuple is a {}, not a tuple space",
                other.type_name()
            ))),
        }
    })
}

/// Frees a space the caller still owns (NULL is ignored).
///
/// # Safety
/// `space` is NULL or an owned space not freed or taken yet.
#[no_mangle]
pub unsafe extern "C" fn unienv_space_free(space: *mut UnienvSpace) {
    if let Ok(s) = take(space, "space") {
        crate::error::quiet((), move || drop(s));
    }
}
