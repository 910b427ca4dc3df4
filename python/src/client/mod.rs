//! The learner's side: `_native.Client` ([`remote`]), `_native.VectorEnv`
//! ([`vector`], with Gymnasium's vector info layout in [`vector_infos`]) and
//! the learner's recorder ([`record`]). It builds on [`crate::common`] only.

pub mod record;
pub mod remote;
pub mod vector;
mod vector_infos;

/// Registers this layer's classes and functions in the `_native` module.
pub fn register(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    remote::register(m)?;
    vector::register(m)?;
    record::register(m)?;
    Ok(())
}
