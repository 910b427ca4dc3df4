//! The client against our server and the reference: blocking facade, cache, components, composer, env, errors, observers, protocol, revival, vector.
//!
//! One test binary; each module was once a test file of its own.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod blocking;
mod cache;
mod components;
mod composer;
mod env;
mod errors;
mod observer;
mod protocol;
mod revival;
mod vector;
mod vector_async;
mod vector_reconnect;
