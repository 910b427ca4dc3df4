//! The `unienv_remote._native` extension module.
//!
//! Each part registers itself through one `register` function, called here
//! once: adding a part is one line.

use pyo3::prelude::*;

/// Rust allocations of the extension (received frames, encoded requests,
/// the value trees) come from mimalloc, which reuses freed memory instead of
/// returning each large block to the OS (see BENCHMARKS.md: a 1.4 MB
/// message cost hundreds of page faults per step with glibc's malloc).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod actions;
mod batched;
pub mod client;
pub mod convert;
mod descriptor;
mod fast;
pub mod log;
pub mod record;
pub mod server;
pub mod vector;
mod vector_infos;
pub mod wait;

/// The `_native` module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "BUILD_PROFILE",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
    )?;
    // The package's one version (`python/Cargo.toml`; pyproject.toml's is
    // dynamic): `unienv_remote.__version__`.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    convert::register(m)?;
    actions::register(m)?;
    log::register(m)?;
    client::register(m)?;
    server::register(m)?;
    vector::register(m)?;
    record::register(m)?;
    Ok(())
}
