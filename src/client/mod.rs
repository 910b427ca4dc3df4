//! The client: connect to a UniEnv remote server (this crate's or the
//! Python reference), drive environments, worlds and nodes through proxies,
//! observe boundaries through subscriptions.
//!
//! The core is async (tokio); [`blocking`] wraps it for plain training loops.
//! Semantics follow the reference client (`unienv_interface.remote.client`):
//!
//! - **Connection.** [`Client::connect`] (WebSocket, binary messages, no
//!   compression, TCP_NODELAY, optional bearer token and extra headers) or
//!   [`Client::over_memory`]. `hello` negotiates the message limit (the
//!   smaller of both wins) and, by default, `discover` loads every
//!   descriptor. One reader task and one writer task serve the connection;
//!   requests carry fresh IDs and are answered through their own channel.
//! - **Failures.** A request timeout or a transport failure closes the
//!   connection, so a late reply can never be taken for a later request. A
//!   mutation whose reply never arrived fails with
//!   [`ClientError::Uncertain`]; nothing is retried. Server errors keep their
//!   code, message and `uncertain` flag ([`ClientError::Remote`]). Unknown
//!   result fields are ignored.
//! - **Proxies.** [`EnvProxy`], [`WorldProxy`] and [`NodeProxy`] read their
//!   attributes and spaces from the latest descriptor, which every response
//!   refreshes; a descriptor is never replaced by one of an older
//!   `(revision, sequence)`, and parsed spaces are kept while their
//!   serialized form is unchanged.
//! - **Control.** The first control call claims the domain; [`Client::acquire`]
//!   claims it explicitly and [`Client::release`] gives it back (keeping
//!   subscriptions unless asked). Component mutations run inside an
//!   [`Operation`] ([`Client::with_operation`] or [`Client::operation`]).
//!   [`blocking::RemoteWorldEnv`] runs the crate's `WorldEnv` composer
//!   client-side over a remote world and its nodes, one operation per
//!   reset, reload and step.
//! - **Boundary snapshot cache.** Completed boundaries (env mutations and
//!   completed operations) bring the captured fields of the domain's
//!   resources; outside operations, node getters are served from them
//!   without a request. See [`Client::boundary_snapshot`] for the rules.
//!
//! Values returned to the caller never alias the cache in a mutable way:
//! [`Value`](crate::codec::Value) trees are cloned, and arrays are immutable reference-counted
//! [`Bytes`](bytes::Bytes) (copy-on-write by construction), so the caller
//! cannot alter what the cache holds, and clones are independent.
//!
//! ```
//! use unienv_remote::client::{Client, ClientConfig, OperationKind};
//! use unienv_remote::host::ResetArgs;
//! use unienv_remote::server::{Server, ServerConfig};
//! use unienv_remote::{fixtures, NdArray};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut builder = Server::builder(ServerConfig::default());
//! fixtures::register(&mut builder)?;
//! let server = builder.start()?;
//! // Client::connect("ws://127.0.0.1:PORT", ..) works the same way.
//! let client = Client::over_memory(server.connect_memory(), ClientConfig::default()).await?;
//!
//! // Env mode: whole reset/step calls.
//! let env = client.env("counter").await?;
//! env.reset(ResetArgs::with_seed(1)).await?;
//! let step = env.step(NdArray::from_vec(vec![1.0f32, 2.0])).await?;
//! assert_eq!(step.reward.as_f64(), Some(5.0));
//!
//! // Component mode: an explicit operation around node calls.
//! let arm = client.node("arm").await?;
//! client
//!     .with_operation("arm", OperationKind::Reset, async |_op| {
//!         arm.reset(0, &ResetArgs::with_seed(3)).await
//!     })
//!     .await?;
//! // Served from the boundary snapshot cache: no request is sent.
//! let sent = client.requests_sent();
//! let observation = arm.get_observation().await?;
//! assert_eq!(client.requests_sent(), sent);
//! assert_eq!(observation.as_array().map(|a| a.to_f64_vec()), Some(vec![3.0]));
//!
//! client.close().await;
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod blocking;
mod config;
mod connection;
mod descriptor;
mod error;
mod ids;
pub mod interrupt;
mod known;
mod operation;
mod pending;
mod proxy;
mod shared;
mod state;
mod sub_queue;
mod subscription;
mod template;
pub mod vector;

pub use crate::protocol::{Mode, OperationKind};
pub use config::{Capture, ClientConfig, ClientConfigError};
pub use connection::{Client, ServerInfo};
pub use descriptor::{BoundarySnapshot, Descriptor};
pub use error::{
    ClientError, ClientErrorCode, ClientResult, CloseReason, ConnectFailure, InvalidUse,
    ProtocolViolation,
};
pub use operation::Operation;
pub use proxy::{EnvProxy, NodeProxy, Resource, WorldProxy};
pub use subscription::{SnapshotEvent, Subscription};
