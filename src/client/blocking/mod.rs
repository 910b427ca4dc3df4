//! A blocking facade over the async client, for plain training loops.
//!
//! [`Client`] owns a small current-thread tokio runtime. Every method blocks
//! the calling thread until the async operation completes, and the calling
//! thread itself runs the connection's writer and reader tasks meanwhile: a
//! request costs no thread handoff on the client side. When no call has been
//! made for a short while (200 ms), an idle thread drives the connection
//! instead (answering pings, receiving snapshots, noticing closure) until the
//! next call takes over. Several threads may share one client. The semantics
//! are exactly those of the async [`client`](super) module. Do not call these
//! methods from async code (blocking inside a runtime panics): use the async
//! client there.
//!
//! [`WorldProxy`] implements the crate's [`World`](crate::host::World) trait and [`NodeProxy`]
//! implements [`Node<W>`](crate::host::Node) for any world type `W` (the world argument is
//! ignored: the node's world is remote), so that remote components can be
//! driven by code written against the host traits — in particular by the
//! crate's [`WorldEnv`](crate::host::WorldEnv) composer, which
//! [`RemoteWorldEnv`] runs client-side with one operation per reset, reload
//! and step.
//!
//! ```
//! use unienv_remote::client::{blocking, ClientConfig, OperationKind};
//! use unienv_remote::host::ResetArgs;
//! use unienv_remote::server::{Server, ServerConfig};
//! use unienv_remote::{fixtures, NdArray};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A server in this process (any `ws://` URL works with `connect`).
//! let runtime = tokio::runtime::Runtime::new()?;
//! let mut builder = Server::builder(ServerConfig::default());
//! fixtures::register(&mut builder)?;
//! let server = builder.start()?;
//! let listener = runtime.block_on(server.listen("127.0.0.1:0"))?;
//!
//! let client = blocking::Client::connect(&listener.url(), ClientConfig::default())?;
//! let env = client.env("counter")?;
//! env.reset(ResetArgs::with_seed(0))?;
//! for _ in 0..3 {
//!     let step = env.step(NdArray::from_vec(vec![1.0f32, 1.0]))?;
//!     println!("reward {}", step.reward);
//! }
//! let arm = client.node("arm")?;
//! client.with_operation("arm", OperationKind::Reset, |_op| {
//!     arm.reset(0, &ResetArgs::with_seed(1))
//! })?;
//! assert_eq!(arm.get_reward()?.as_f64(), Some(1.0));
//! client.close();
//! runtime.block_on(server.shutdown());
//! # Ok(()) }
//! ```

mod connection;
pub(crate) mod driver;
mod handles;
mod proxy;
mod remote_env;

pub use connection::Client;
pub use handles::{Operation, Subscription};
pub use proxy::{EnvProxy, NodeProxy, Resource, WorldProxy};
pub use remote_env::RemoteWorldEnv;
