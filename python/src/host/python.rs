//! Calling into Python from a domain's worker thread: [`with_python`]
//! attaches the thread to the interpreter (keeping its thread state), and
//! [`host_error`] turns the exception a hosted object raised into the
//! reference's error.

use pyo3::prelude::*;
use unienv_remote::host::HostError;

pyo3::import_exception!(unienv_interface.remote.codec, CodecError);

thread_local! {
    /// Whether this worker thread keeps a Python thread state for its life.
    static THREAD_STATE_KEPT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` attached to the interpreter (holding the GIL), from a domain's
/// worker thread. The first call on a thread creates its Python thread
/// state and keeps it (with the GIL released): otherwise every call would
/// create and destroy one, which takes the interpreter-wide head lock that
/// all domains share.
pub(crate) fn with_python<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> R {
    THREAD_STATE_KEPT.with(|kept| {
        // SAFETY: Py_IsInitialized may be called at any time.
        if !kept.get() && unsafe { pyo3::ffi::Py_IsInitialized() } != 0 {
            // SAFETY: the interpreter is initialized (checked above). This
            // thread holds no GIL here (domain workers only attach through
            // this function, and `kept` is false on first use): Ensure
            // creates its thread state and takes the GIL, SaveThread releases
            // the GIL keeping the state registered as the thread's own.
            unsafe {
                let _ = pyo3::ffi::PyGILState_Ensure();
                let _ = pyo3::ffi::PyEval_SaveThread();
            }
            kept.set(true);
        }
    });
    Python::attach(f)
}

/// A Python exception as a host error: `str(exc)`, and the reference's
/// `CodecError` as a serialization error.
pub(crate) fn host_error(py: Python<'_>, e: PyErr) -> HostError {
    let message = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
    if crate::host::hooks::is_refusal(py, &e) {
        HostError::invalid_argument(message)
    } else if e.is_instance_of::<CodecError>(py) {
        HostError::serialization(message)
    } else {
        HostError::new(message)
    }
}
