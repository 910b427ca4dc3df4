//! Hosting: refused actions, CombinedNode, WorldEnv.
//!
//! One test binary; each module was once a test file of its own.

mod support;

mod bad_action;
mod combined;
mod worldenv;
