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
//! let server = builder.start();
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
pub fn register(builder: &mut ServerBuilder) -> Result<(), RegisterError> {
    builder.register_env("cartpole", CartPole::new())?;
    builder.register_with("pointmass", || make_pointmass().map(Hosted::env))?;
    builder.register_node("gripper", Gripper::new())?;
    Ok(())
}
