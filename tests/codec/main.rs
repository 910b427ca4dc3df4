//! The codec: golden vectors, property tests, rejections, round trips.
//!
//! One test binary; each module was once a test file of its own.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod golden;
mod prop;
mod reject;
mod roundtrip;
