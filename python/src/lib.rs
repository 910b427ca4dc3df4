//! The `unienv_remote._native` extension module.
//!
//! Each part registers itself through one `register` function, called here
//! once: adding a part is one line.

use pyo3::prelude::*;

pub mod client;
pub mod convert;
pub mod vector;

/// The `_native` module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    convert::register(m)?;
    client::register(m)?;
    vector::register(m)?;
    Ok(())
}
