//! What a simulator implements: the [`Env`], [`World`] and [`Node`] traits,
//! the [`WorldEnv`] composer and [`CombinedNode`] that reproduce UniEnv's
//! lifecycle, and the [`Space`] types with UniEnv's JSON schema.
//!
//! Hosted objects live on their domain's worker thread. A node reaches its
//! world through the `world` argument of every node method: the world and the
//! node tree are owned side by side by the domain, so no lock or shared
//! pointer is needed. Detached node trees use `W = ()`.
//!
//! Methods return [`HostResult`]; an `Err` becomes the protocol's
//! `execution_error` (and faults the domain for mutations), and so does a
//! panic, which the server catches on the worker thread.

mod args;
mod combined;
mod composer;
mod error;
mod shared;
pub mod space;
mod traits;
pub mod tree;

pub use args::{CallArgs, ResetArgs, ResetResult, StepResult};
pub use combined::{find_node, find_node_mut, CombinedNode, CombinedNodeBuilder, RenderModeArg};
pub use composer::WorldEnv;
pub use error::{HostError, HostErrorKind, HostResult};
pub use space::Space;
pub use traits::{Env, Field, Node, Phase, World, RESERVED_PRIORITY};
pub use tree::{Attached, Detached, Tree, WorldOnly};
