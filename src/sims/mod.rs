//! The built-in simulators that `unienv-remote serve` hosts, real enough to
//! train on through the reference Python client:
//!
//! | ID | what | kind |
//! |---|---|---|
//! | `cartpole` | Gymnasium's CartPole-v1 ([`CartPole`]) | env |
//! | `pointmass` | a 2-D point mass reaching a goal, with a camera ([`pointmass`]) | `WorldEnv` |
//! | `pointmass/world`, `pointmass/node`, `pointmass/node/body`, `pointmass/node/camera` | its world and nodes (components mode) | world, nodes |
//! | `gripper`, `gripper/left`, `gripper/right` | a detached two-finger gripper ([`Gripper`]) | node tree |
//!
//! [`register`] adds them to a server:
//!
//! ```
//! use unienv_remote::server::{Server, ServerConfig};
//! let mut builder = Server::builder(ServerConfig::default());
//! unienv_remote::sims::register(&mut builder).unwrap();
//! let server = builder.start().unwrap();
//! assert_eq!(server.roots(), ["cartpole", "pointmass", "gripper"]);
//! ```

pub mod cartpole;
pub mod gripper;
pub mod pointmass;
mod raster;
mod rng;

pub use cartpole::CartPole;
pub use gripper::{Finger, Gripper};
pub use pointmass::{make_pointmass, PointMassBody, PointMassCamera, PointMassWorld};
pub use rng::SplitMix64;

use crate::server::{Hosted, RegisterError, ServerBuilder};

/// Registers `cartpole`, `pointmass` (with its world and nodes) and
/// `gripper` (with its fingers), each in its own execution domain, built now.
///
/// The built-in simulators declare exact action spaces: serve them with
/// [`ServerConfig::validate_actions`](crate::server::ServerConfig::validate_actions)
/// on (as `unienv-remote serve` does) to refuse a bad action with a message
/// naming the element and the bound.
pub fn register(builder: &mut ServerBuilder) -> Result<(), RegisterError> {
    register_copies(builder, 1)
}

/// The root ID of copy `index` of `count` copies of the simulator `base`:
/// `base` itself when there is one copy, else `base-index`
/// (`cartpole-0`, `cartpole-1`, …).
pub fn copy_id(base: &str, index: usize, count: usize) -> String {
    if count == 1 {
        base.to_string()
    } else {
        format!("{base}-{index}")
    }
}

/// Registers `copies` independent instances of each built-in simulator,
/// under the IDs of [`copy_id`] (their worlds and nodes below them, e.g.
/// `pointmass-1/world`): each copy is its own execution domain with its own
/// controller, so several trainers, or a vector client, each get their own.
/// `copies` of 0 registers nothing.
///
/// ```
/// use unienv_remote::server::{Server, ServerConfig};
/// let mut builder = Server::builder(ServerConfig::default());
/// unienv_remote::sims::register_copies(&mut builder, 2).unwrap();
/// let server = builder.start().unwrap();
/// assert_eq!(
///     server.roots(),
///     ["cartpole-0", "cartpole-1", "pointmass-0", "pointmass-1", "gripper-0", "gripper-1"]
/// );
/// ```
pub fn register_copies(builder: &mut ServerBuilder, copies: usize) -> Result<(), RegisterError> {
    for i in 0..copies {
        builder.register_env(&copy_id("cartpole", i, copies), CartPole::new())?;
    }
    for i in 0..copies {
        builder.register_with(&copy_id("pointmass", i, copies), || {
            make_pointmass().map(Hosted::env)
        })?;
    }
    for i in 0..copies {
        builder.register_node(&copy_id("gripper", i, copies), Gripper::new())?;
    }
    Ok(())
}
