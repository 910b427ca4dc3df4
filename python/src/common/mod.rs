//! The lowest layer of the extension, shared by the client and the host:
//! values between Python and the crate's [`unienv_remote::Value`] tree
//! ([`convert`]), the crate's `tracing` events forwarded to Python's
//! `logging` ([`log`]) and the GIL-free blocking waits that Ctrl-C can stop
//! ([`wait`]). Nothing here imports [`crate::client`] or [`crate::host`].

pub mod convert;
pub mod log;
pub mod wait;

/// Registers this layer's classes and functions in the `_native` module.
pub fn register(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    convert::register(m)?;
    log::register(m)?;
    Ok(())
}
