//! Interoperability with the Python reference, both directions.
//!
//! One test binary; each module was once a test file of its own.

#[path = "../common/mod.rs"]
mod common;

mod cartpole;
mod fixtures;
mod host;
mod server;
mod sims;
