//! Tree search by name: UniEnv's `get_node` over any node tree.

use crate::host::traits::Node;

/// Resolves a path of node names below `node`, as UniEnv's `get_node`: an
/// empty path is `node` itself, each key names a child (as exported by
/// [`Node::child`]), and a missing key gives `None`. A combined node's root
/// node is not a child and is never resolved.
pub fn find_node<'a, W: ?Sized + 'static>(
    node: &'a dyn Node<W>,
    path: &[&str],
) -> Option<&'a dyn Node<W>> {
    let Some((first, rest)) = path.split_first() else {
        return Some(node);
    };
    let child = (0..node.child_count())
        .filter_map(|i| node.child(i))
        .find(|c| c.name() == *first)?;
    find_node(child, rest)
}

/// [`find_node`], mutably. With [`WorldEnv::parts_mut`](crate::host::WorldEnv::parts_mut)
/// this gives the world and any node of the tree at the same time.
pub fn find_node_mut<'a, W: ?Sized + 'static>(
    node: &'a mut dyn Node<W>,
    path: &[&str],
) -> Option<&'a mut dyn Node<W>> {
    let Some((first, rest)) = path.split_first() else {
        return Some(node);
    };
    let index =
        (0..node.child_count()).find(|&i| node.child(i).is_some_and(|c| c.name() == *first))?;
    find_node_mut(node.child_mut(index)?, rest)
}
