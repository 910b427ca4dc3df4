//! Ctrl-C in every blocking wait of the package.
//!
//! [`detach`] runs a blocking call detached from the interpreter (the GIL
//! released) as `py.detach` does; on Python's main thread (the only one
//! signal handlers run on) it also installs a check that every blocking
//! wait of the crate's client consults every 50 ms
//! ([`unienv_remote::client::interrupt`]): it runs Python's pending signal
//! handlers (`PyErr_CheckSignals`, which briefly takes the GIL), and an
//! exception they raise — `KeyboardInterrupt` for Ctrl-C — stops the wait.
//! The call then returns `ClientError::Interrupted` and [`interrupted`]
//! gives the handler's exception back. A request stopped that way is
//! dropped: a read is simply abandoned (its late answer ignored), a mutation
//! closes the connection as a timeout does, since its outcome is unknown.

use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use std::cell::RefCell;
use unienv_remote::client::interrupt;

thread_local! {
    /// The exception a signal handler raised during this thread's wait.
    static PENDING: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// `threading.main_thread().ident`.
static MAIN_IDENT: PyOnceLock<u64> = PyOnceLock::new();

/// Whether this is Python's main thread.
fn on_main_thread(py: Python<'_>) -> bool {
    let main = MAIN_IDENT.get_or_try_init(py, || -> PyResult<u64> {
        py.import("threading")?
            .call_method0("main_thread")?
            .getattr("ident")?
            .extract()
    });
    // SAFETY: called attached to the interpreter; the ident is
    // threading.get_ident() of this thread.
    let me = unsafe { pyo3::ffi::PyThread_get_thread_ident() } as u64;
    main.is_ok_and(|m| *m == me)
}

/// Runs Python's signal handlers; whether one raised (kept for
/// [`interrupted`]).
fn check_signals() -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            PENDING.with(|p| *p.borrow_mut() = Some(e));
            true
        }
    })
}

/// Runs `f` with the GIL released; on the main thread, Ctrl-C interrupts
/// the client waits inside it (see the module's documentation).
pub fn detach<T, F>(py: Python<'_>, f: F) -> T
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    if !on_main_thread(py) {
        return py.detach(f);
    }
    py.detach(|| interrupt::with_check(check_signals, f))
}

/// The exception that interrupted this thread's last wait (the signal
/// handler's, `KeyboardInterrupt` for Ctrl-C).
pub fn interrupted(py: Python<'_>) -> PyErr {
    let _ = py;
    PENDING
        .with(|p| p.borrow_mut().take())
        .unwrap_or_else(|| PyKeyboardInterrupt::new_err(()))
}

/// [`interrupted`], noting (and logging) that the connection was closed
/// because the interrupted request was a mutation: its outcome is unknown.
pub fn interrupted_mutation(py: Python<'_>, what: &str) -> PyErr {
    let e = interrupted(py);
    let note = format!(
        "{what} was interrupted while its request was in flight: its outcome is uncertain (it may have executed), and the connection was closed, as after a timeout"
    );
    let _ = e.value(py).call_method1("add_note", (note.as_str(),));
    let _ = py
        .import("logging")
        .and_then(|m| m.call_method1("getLogger", ("unienv_remote.client",)))
        .and_then(|l| l.call_method1("warning", (note.as_str(),)));
    e
}

/// Waits for `rx` (a message, or its sender dropped) with the GIL released,
/// in slices between which Python's signal handlers run: an exception they
/// raise (Ctrl-C: `KeyboardInterrupt`) ends the wait.
pub fn recv<T: Send>(py: Python<'_>, rx: std::sync::mpsc::Receiver<T>) -> PyResult<Option<T>> {
    use std::sync::mpsc::RecvTimeoutError;
    let mut rx = rx;
    loop {
        let (got, back) = py.detach(move || (rx.recv_timeout(interrupt::SLICE), rx));
        rx = back;
        match got {
            Ok(v) => return Ok(Some(v)),
            Err(RecvTimeoutError::Disconnected) => return Ok(None),
            Err(RecvTimeoutError::Timeout) => py.check_signals()?,
        }
    }
}

/// A timeout argument, validated the same way everywhere: `None` (or
/// infinity) waits as long as it takes, a non-negative number of seconds is
/// the limit (0: do not wait), NaN or a negative number is a `ValueError`
/// naming the argument.
pub fn timeout_arg(value: Option<f64>, name: &str) -> PyResult<Option<std::time::Duration>> {
    match value {
        None => Ok(None),
        Some(t) if t.is_nan() || t < 0.0 => Err(PyValueError::new_err(format!(
            "{name} must be a non-negative number of seconds or None, not {t}"
        ))),
        Some(t) if t.is_infinite() => Ok(None),
        Some(t) => std::time::Duration::try_from_secs_f64(t)
            .map(Some)
            .map_err(|_| PyValueError::new_err(format!("{name} is too large: {t}"))),
    }
}
