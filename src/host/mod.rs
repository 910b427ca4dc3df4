//! What a simulator implements: the [`Env`], [`World`] and [`Node`] traits,
//! the [`WorldEnv`] composer and [`CombinedNode`] that reproduce UniEnv's
//! lifecycle, and the [`Space`] types with UniEnv's JSON schema.
//!
//! Hosted objects live on their domain's worker thread. A node reaches its
//! world through the `world` argument of every node method: the world and the
//! node tree are owned side by side by the domain, so no lock or shared
//! pointer is needed. Detached node trees use `W = ()`.
//!
//! Methods return [`HostResult`]. What an `Err` does depends on its kind:
//!
//! - [`HostError::invalid_argument`], returned *before* the method changed
//!   anything (a bad action, a wrong keyword, `step` before `reset`), is a
//!   certain `invalid_request`: the resource stays usable, as a Gymnasium
//!   user expects of a rejected action.
//! - Any other error ([`HostError::new`]), and a panic (which the server
//!   catches on the worker thread), is an `execution_error`; from a mutation
//!   (`reset`, `step`, lifecycle hooks) it is *uncertain* and faults the
//!   domain until a successful reset or reload, as in the reference.
//!
//! `step` before the first `reset` is refused with an invalid-argument error
//! naming `reset` by every built-in simulator (a [`WorldEnv`] does it when
//! built with [`WorldEnv::refusing_step_before_reset`]); a hosted [`Env`]
//! should do the same.
//!
//! A server can also check actions against the declared action space before
//! the simulator sees them (`ServerConfig::validate_actions`).

mod args;
pub mod batched;
mod combined;
mod composer;
mod erased;
mod error;
mod phase;
mod pyops;
mod shared;
pub mod space;
mod traits;
pub mod tree;

pub use args::{CallArgs, ResetArgs, ResetResult, StepResult};
pub use batched::{BatchError, BatchResult, BatchedCore, BatchedEnv, ResetRows, Seeds, SubEnv};
pub use combined::{find_node, find_node_mut, CombinedNode, CombinedNodeBuilder, RenderModeArg};
pub use composer::WorldEnv;
pub(crate) use error::STEP_BEFORE_RESET;
pub use error::{HostError, HostErrorKind, HostResult};
pub use phase::{Field, Phase, RESERVED_PRIORITY};
pub use space::Space;
pub use traits::{Env, Node, World};
pub use tree::{Attached, Detached, Tree, WorldOnly};
