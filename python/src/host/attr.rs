//! Attribute lookups on hosted Python objects, as `getattr(obj, name,
//! SENTINEL)` does and without the `AttributeError` that `hasattr` semantics
//! would cost for each absent attribute (the descriptor reads of every step
//! look up about nine absent ones: [`crate::host::descriptor`]).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

/// `builtins.getattr` and a sentinel only this module holds, looked up once
/// (the lookup where the interpreter's own function cannot be found).
static GETATTR_DEFAULT: PyOnceLock<[Py<PyAny>; 2]> = PyOnceLock::new();

fn getattr_default(py: Python<'_>) -> PyResult<&[Py<PyAny>; 2]> {
    GETATTR_DEFAULT.get_or_try_init(py, || {
        let builtins = py.import(intern!(py, "builtins"))?;
        Ok::<_, PyErr>([
            builtins.getattr(intern!(py, "getattr"))?.unbind(),
            builtins.getattr(intern!(py, "object"))?.call0()?.unbind(),
        ])
    })
}

/// `getattr(obj, name)`, `None` when the attribute is missing (as
/// `hasattr`: an `AttributeError`); other exceptions propagate.
pub(crate) fn attr<'py>(
    obj: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if let Some(lookup_attr) = interpreter_lookup_attr() {
        let mut found: *mut pyo3::ffi::PyObject = std::ptr::null_mut();
        // SAFETY: the function has CPython's signature (see
        // `interpreter_lookup_attr`); `obj` and `name` are live objects and
        // the GIL is held (bound references); it stores a new reference or
        // null in `found` and returns -1 only with an exception set.
        return match unsafe { lookup_attr(obj.as_ptr(), name.as_ptr(), &mut found) } {
            r if r < 0 => Err(PyErr::fetch(obj.py())),
            // SAFETY: on success `found` is null (absent) or a new reference.
            _ => Ok(unsafe { Bound::from_owned_ptr_or_opt(obj.py(), found) }),
        };
    }
    let l = getattr_default(obj.py())?;
    let sentinel = l[1].bind(obj.py());
    let v = l[0].bind(obj.py()).call1((obj, name, sentinel))?;
    Ok((!v.is(sentinel)).then_some(v))
}

/// CPython's own `getattr(obj, name, default)` lookup, called directly:
/// `builtins.getattr` with a default is exactly this function followed by
/// returning the default when it finds nothing (`_PyObject_LookupAttr` in
/// Python 3.7 to 3.12, `PyObject_GetOptionalAttr` from 3.13: -1 with an
/// exception set, 0 absent with no exception (no `AttributeError` created
/// for generic attribute lookups), 1 found and a new reference stored).
/// Neither is in the limited API this extension is built against, so it
/// is looked up by name in the running interpreter, once; `None` where it
/// cannot be (another platform, an interpreter without these symbols):
/// [`attr`] calls `builtins.getattr` then, through an argument tuple.
fn interpreter_lookup_attr() -> Option<LookupAttr> {
    static FOUND: std::sync::OnceLock<Option<LookupAttr>> = std::sync::OnceLock::new();
    *FOUND.get_or_init(|| {
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        {
            use std::ffi::{c_char, c_void};
            extern "C" {
                fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
            }
            // RTLD_DEFAULT: every object loaded globally, the interpreter
            // included.
            #[cfg(target_os = "linux")]
            let everywhere = std::ptr::null_mut();
            #[cfg(target_os = "macos")]
            let everywhere = -2isize as *mut c_void;
            for name in [c"PyObject_GetOptionalAttr", c"_PyObject_LookupAttr"] {
                // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
                let found = unsafe { dlsym(everywhere, name.as_ptr()) };
                if !found.is_null() {
                    // SAFETY: both functions are declared in CPython as
                    // `int f(PyObject *, PyObject *, PyObject **)`.
                    return Some(unsafe { std::mem::transmute::<*mut c_void, LookupAttr>(found) });
                }
            }
        }
        None
    })
}

/// The signature of [`interpreter_lookup_attr`]'s function.
type LookupAttr = unsafe extern "C" fn(
    *mut pyo3::ffi::PyObject,
    *mut pyo3::ffi::PyObject,
    *mut *mut pyo3::ffi::PyObject,
) -> std::ffi::c_int;

/// [`attr`] for an attribute that was present last time, and most likely
/// still is: `PyObject_GetAttr`, which gives the same object (or the same
/// exception) as `getattr(obj, name, SENTINEL)` (both run the type's
/// attribute lookup; `builtins.getattr` only suppresses an
/// `AttributeError` earlier, where the generic lookup allows), without
/// calling `builtins.getattr` through an argument tuple. An
/// `AttributeError` (the attribute is gone) means absent, as in [`attr`].
pub(crate) fn attr_present<'py>(
    obj: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    obj.getattr_opt(name)
}

/// [`attr`] by a Rust name.
pub(crate) fn attr_str<'py>(
    obj: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    attr(obj, &PyString::new(obj.py(), name))
}
