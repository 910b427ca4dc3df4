//! UniEnv's `CombinedWorldNode`.
use super::traits::Node;
/// A node that aggregates children (to be implemented).
pub struct CombinedNode<W: 'static> {
    _children: Vec<Box<dyn Node<W>>>,
}
