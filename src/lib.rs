//! # unienv-remote
//!
//! A server and client for UniEnv's remote environment protocol v1,
//! byte-compatible with the Python reference implementation
//! (`unienv==0.0.1b14`, module `unienv_interface.remote`).
//!
//! # Layout
//! - [`codec`]: the value tree and the envelope codec (pure, no I/O).
//! - [`client`]: the async client, its proxies, subscriptions and boundary
//!   cache, and a blocking facade ([`client::blocking`]).
//! - [`sims`]: the built-in simulators (`cartpole`, `pointmass`, `gripper`).
#![deny(missing_docs)]
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod cli;
pub mod client;
pub mod codec;
pub mod fixtures;
pub mod host;
pub mod protocol;
pub mod server;
pub mod sims;
pub mod transport;

pub use codec::{
    ByteOrder, Codec, CodecError, DType, Dict, Element, Graph, NdArray, ObjectArray, ScalarKind,
    Value,
};
