//! The Python host's side: `_native.Server` ([`server`]) hosting Python
//! objects, their descriptors ([`descriptor`], with attribute lookups in
//! [`attr`]), the action checks ([`actions`]), `BatchedEnv`'s stepping
//! core ([`batched`], on the crate's `BatchedCore`), the fast stepping
//! paths ([`fast`], sharing [`outcome`] with [`batched`]), the calls back into the
//! package ([`hooks`], the one way Rust reaches Python code by name),
//! Python exceptions as host errors ([`python`]), `BatchedEnv`'s info
//! layout ([`infos`]) and dialing out to a relay ([`dial`]). It
//! builds on [`crate::common`], and on [`crate::client`] for the one in-memory
//! client a server hands out (`Server.connect_memory`); the client never
//! imports the host.
//!
//! Its `tracing` events name their targets (`unienv_remote_native::server`,
//! `::actions`, `::descriptor`), so that their Python loggers
//! (`unienv_remote.server`, …) do not depend on this folder layout.

pub mod actions;
mod attr;
mod batched;
mod descriptor;
pub mod dial;
mod fast;
mod hooks;
mod infos;
mod outcome;
mod python;
pub mod server;

/// Registers this layer's classes and functions in the `_native` module.
pub fn register(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    actions::register(m)?;
    batched::register(m)?;
    hooks::register(m)?;
    infos::register(m)?;
    server::register(m)?;
    dial::register(m)?;
    Ok(())
}
