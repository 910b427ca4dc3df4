//! UniEnv's `WorldEnv` composer.
use super::traits::{Node, World};
/// A world and a node tree composed into an env (to be implemented).
pub struct WorldEnv<W: World> {
    _world: W,
    _node: Box<dyn Node<W>>,
}
