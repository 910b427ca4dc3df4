//! # unienv-remote
//!
//! A server and client for UniEnv's remote environment protocol v1,
//! byte-compatible with the Python reference implementation
//! (`unienv==0.0.1b14`, module `unienv_interface.remote`).
//!
//! Data flows down the layers and back up; no layer reaches around another.
//!
//! # Layout
//! - [`codec`]: the value tree ([`Value`], [`Dict`], [`NdArray`]) and the
//!   envelope codec: zero-copy decoding, one-buffer encoding, strict
//!   validation before allocation. Pure, no I/O.
//! - [`protocol`]: requests, responses, errors and the stable error codes as
//!   plain data.
//! - [`transport`]: whole envelopes over WebSocket (the crate's own RFC 6455
//!   framing and handshakes) or in-memory pairs with bounded queues.
//! - [`host`]: what a simulator implements: [`host::Env`], [`host::World`],
//!   [`host::Node`]; the [`host::WorldEnv`] composer and
//!   [`host::CombinedNode`] reproducing UniEnv's lifecycle; the spaces.
//! - [`server`]: the registry, one OS thread per execution domain, sessions
//!   with bounded queues, snapshot publication, the WebSocket listener.
//! - [`client`]: the async client, its proxies, operations, subscriptions and
//!   boundary cache, and a blocking facade ([`client::blocking`]).
//! - [`sims`]: the built-in simulators (`cartpole`, `pointmass`, `gripper`).
//! - `cli` (feature `cli`, on by default): the `unienv-remote` command line.
//!   Without it (`default-features = false`) the library builds without clap.
//! - [`viewer`]: the browser viewer (`unienv-remote view`, `serve --viewer`).
//! - [`relay`]: hosts that dial out register at a relay; clients reach them
//!   through it (`unienv-remote relay`, `serve --dial`).
//!
//! # Wire format
//! Each message is one envelope: a 4-byte big-endian header length, a JSON
//! header holding the tagged value tree, then the raw bytes of every array
//! and byte string, in traversal order. `SPEC.md` states the whole protocol
//! as this crate implements it.
//!
//! # Hosting a simulator
//! A complete program (`cargo add unienv-remote tokio --features tokio/full`)
//! that serves one env until Ctrl-C. A bad action is refused before the env
//! sees it, and `step` before `reset` is refused by the env itself, both as
//! a certain `invalid_request` that leaves the env usable; any other error
//! from `step` faults the env until the next `reset`.
//! ```no_run
//! use unienv_remote::host::{Env, HostError, HostResult, ResetArgs, ResetResult, Space, StepResult};
//! use unienv_remote::server::{Server, ServerConfig};
//! use unienv_remote::{DType, Dict, NdArray, Value};
//!
//! struct Walker { x: Option<f32> }
//!
//! impl Env for Walker {
//!     fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
//!         let x = args.seed.unwrap_or(0) as f32;
//!         self.x = Some(x);
//!         Ok(ResetResult::new((), NdArray::from_vec(vec![x]), Dict::new()))
//!     }
//!     fn step(&mut self, action: Value) -> HostResult<StepResult> {
//!         // Refusals first, before anything changes.
//!         let x = self.x.ok_or_else(|| HostError::invalid_argument("call reset() first"))?;
//!         let a = action.as_scalar_f64().ok_or_else(|| HostError::invalid_argument("the action is a number"))?;
//!         let x = x + a as f32;
//!         self.x = Some(x);
//!         let done = x.abs() > 10.0;
//!         Ok(StepResult::new(NdArray::from_vec(vec![x]), -x.abs() as f64, done, false, Dict::new()))
//!     }
//!     fn action_space(&self) -> Option<Space> { Some(Space::boxed(DType::F32, vec![], -1.0, 1.0)) }
//!     fn observation_space(&self) -> Option<Space> { Some(Space::unbounded_f32(vec![1])) }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Check actions against the action space before the env sees them.
//!     let config = ServerConfig { validate_actions: true, ..ServerConfig::default() };
//!     let mut builder = Server::builder(config);
//!     builder.register_env("walker", Walker { x: None })?;
//!     let server = builder.start()?;
//!     let listener = server.listen("127.0.0.1:8765").await?;
//!     println!("Python: RemoteClient.connect(\"{}\").env(\"walker\"); Ctrl-C stops", listener.url());
//!     tokio::signal::ctrl_c().await?;
//!     server.shutdown().await; // closes the env, joins its thread
//!     Ok(())
//! }
//! ```
//!
//! Logging uses [`tracing`](https://docs.rs/tracing) (target `unienv_remote`):
//! install a subscriber (e.g. `tracing_subscriber::fmt::init()`) to see
//! sessions, refusals, faults, evictions and slow calls.
#![deny(missing_docs)]
#![forbid(unsafe_op_in_unsafe_fn)]

// Our WebSocket layer alone, for benches/ws_layers.rs; only with the
// `bench-internals` feature, which the benches turn on.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod bench_ws;
// Byte budgets (per connection, per server): charged by the transport as
// frames arrive and by the server for decoded trees and queued responses.
// Neutral, so that the transport never imports the server.
pub(crate) mod budget;
#[cfg(feature = "cli")]
pub mod cli;
pub mod client;
pub mod codec;
// The conformance fixture registry is for this crate's own tests, benches,
// fuzz targets and `unienv-remote serve --fixtures`: public so that they can
// reach it, hidden from the documentation because it is no API for users.
#[doc(hidden)]
pub mod fixtures;
pub mod host;
pub mod metrics;
pub mod protocol;
pub mod record;
pub mod relay;
pub mod server;
pub mod sims;
pub mod transport;
pub mod viewer;

pub use codec::{
    ByteOrder, Codec, CodecError, DType, Dict, Element, Graph, NdArray, ObjectArray, ScalarKind,
    Value,
};
