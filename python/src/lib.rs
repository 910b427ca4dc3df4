//! The `unienv_remote._native` extension module.
//!
//! Each layer registers its parts through one `register` function, called
//! here once: adding a part is one line in its layer's `mod.rs`.

use pyo3::prelude::*;

/// Rust allocations of the extension (received frames, encoded requests,
/// the value trees) come from mimalloc, which reuses freed memory instead of
/// returning each large block to the OS (see BENCHMARKS.md: a 1.4 MB
/// message cost hundreds of page faults per step with glibc's malloc).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// Layers, lowest first; a module imports only from its own layer or a
// lower one (scripts/import_cycles.py checks it): `common` (values, logs,
// waits), then `client` (the learner's side), then `host` (the Python host).
pub mod client;
pub mod common;
pub mod host;

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
    common::register(m)?;
    client::register(m)?;
    host::register(m)?;
    Ok(())
}
