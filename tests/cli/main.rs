//! The `unienv-remote` command line, run as a process.
//!
//! One test binary; each module was once a test file of its own.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod client;
mod first_hour;
mod layout;
mod load;
mod local;
mod placement;
mod skips;
mod tls;
