//! Status codes, the calling thread's last error, and the guard that keeps
//! every Rust panic on this side of the boundary.

use std::cell::RefCell;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Success.
pub const UNIENV_OK: i32 = 0;
/// An argument was refused: a NULL pointer where one is required, text that
/// is not UTF-8, an unknown dtype or threading mode, an array whose byte
/// length does not match its shape, bounds that do not fit a space.
pub const UNIENV_ERR_INVALID_ARGUMENT: i32 = 1;
/// A value accessor was used on a value of another kind (e.g.
/// `unienv_value_get_int` on a string).
pub const UNIENV_ERR_WRONG_TYPE: i32 = 2;
/// No such dictionary key or sequence index.
pub const UNIENV_ERR_NOT_FOUND: i32 = 3;
/// The server configuration is invalid (the message names the field).
pub const UNIENV_ERR_CONFIG: i32 = 4;
/// A resource could not be registered (invalid or taken ID).
pub const UNIENV_ERR_REGISTER: i32 = 5;
/// The server could not listen (address in use, unresolvable, no permission)
/// or its runtime could not start.
pub const UNIENV_ERR_IO: i32 = 6;
/// The call does not fit the object's state (registering after
/// `unienv_server_start`, starting twice, setting a step result in a reset
/// callback).
pub const UNIENV_ERR_STATE: i32 = 7;
/// An internal error of the library (a Rust panic, caught at the boundary).
pub const UNIENV_ERR_INTERNAL: i32 = 8;

/// A failure to report across the boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(UNIENV_ERR_INVALID_ARGUMENT, message)
    }

    pub(crate) fn null(name: &str) -> Failure {
        Failure::invalid(format!("{name} is NULL"))
    }
}

struct LastError {
    code: i32,
    message: CString,
}

thread_local! {
    static LAST: RefCell<LastError> = RefCell::new(LastError {
        code: UNIENV_OK,
        message: CString::default(),
    });
}

/// Records `failure` as this thread's last error and returns its code.
pub(crate) fn record(failure: Failure) -> i32 {
    let code = failure.code;
    let message = CString::new(failure.message.replace('\0', "\\0")).unwrap_or_default();
    // A thread being torn down has no slot any more: the code still returns.
    let _ = LAST.try_with(|l| *l.borrow_mut() = LastError { code, message });
    code
}

/// The text of a caught panic.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".to_string()
    }
}

fn caught(payload: &(dyn std::any::Any + Send)) -> Failure {
    Failure::new(
        UNIENV_ERR_INTERNAL,
        format!("internal error of unienv-remote: {}", panic_text(payload)),
    )
}

/// Runs `f` and returns its status: `UNIENV_OK`, or the code of its failure
/// (recorded as the last error), or `UNIENV_ERR_INTERNAL` if it panicked.
pub(crate) fn status(f: impl FnOnce() -> Result<(), Failure>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => UNIENV_OK,
        Ok(Err(e)) => record(e),
        Err(p) => record(caught(&*p)),
    }
}

/// Runs `f` and returns its value, or `fallback` after recording the failure.
pub(crate) fn guard<T>(fallback: T, f: impl FnOnce() -> Result<T, Failure>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            record(e);
            fallback
        }
        Err(p) => {
            record(caught(&*p));
            fallback
        }
    }
}

/// Runs `f`, which cannot fail but must not unwind, returning `fallback` on
/// a panic.
pub(crate) fn quiet<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    guard(fallback, || Ok(f()))
}

/// The message of the last failed call on the calling thread (`""` when
/// none failed yet). The text stays valid until the next failing call on
/// this thread; copy it to keep it.
#[no_mangle]
pub extern "C" fn unienv_last_error_message() -> *const c_char {
    LAST.try_with(|l| l.borrow().message.as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The code of the last failed call on the calling thread (`UNIENV_OK` when
/// none failed yet).
#[no_mangle]
pub extern "C" fn unienv_last_error_code() -> i32 {
    LAST.try_with(|l| l.borrow().code).unwrap_or(UNIENV_OK)
}

/// A short, static description of a status code (`"invalid argument"`, …).
#[no_mangle]
pub extern "C" fn unienv_status_name(code: i32) -> *const c_char {
    let name: &'static std::ffi::CStr = match code {
        UNIENV_OK => c"ok",
        UNIENV_ERR_INVALID_ARGUMENT => c"invalid argument",
        UNIENV_ERR_WRONG_TYPE => c"wrong type",
        UNIENV_ERR_NOT_FOUND => c"not found",
        UNIENV_ERR_CONFIG => c"invalid configuration",
        UNIENV_ERR_REGISTER => c"registration refused",
        UNIENV_ERR_IO => c"I/O error",
        UNIENV_ERR_STATE => c"wrong state",
        UNIENV_ERR_INTERNAL => c"internal error",
        _ => c"unknown status",
    };
    name.as_ptr()
}

/// Reads a NUL-terminated UTF-8 string argument.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn text<'a>(ptr: *const c_char, name: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    std::ffi::CStr::from_ptr(ptr)
        .to_str()
        .map_err(|_| Failure::invalid(format!("{name} is not valid UTF-8")))
}

/// A required reference argument.
///
/// # Safety
/// `ptr` is NULL or points to a live `T`.
pub(crate) unsafe fn req<'a, T>(ptr: *const T, name: &str) -> Result<&'a T, Failure> {
    ptr.as_ref().ok_or_else(|| Failure::null(name))
}

/// A required mutable reference argument.
///
/// # Safety
/// `ptr` is NULL or points to a live `T` nobody else is using.
pub(crate) unsafe fn req_mut<'a, T>(ptr: *mut T, name: &str) -> Result<&'a mut T, Failure> {
    ptr.as_mut().ok_or_else(|| Failure::null(name))
}

/// Takes ownership of a boxed argument (NULL is refused).
///
/// # Safety
/// `ptr` is NULL or was returned by `Box::into_raw` and not freed.
pub(crate) unsafe fn take<T>(ptr: *mut T, name: &str) -> Result<Box<T>, Failure> {
    if ptr.is_null() {
        return Err(Failure::null(name));
    }
    Ok(Box::from_raw(ptr))
}
