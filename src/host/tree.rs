//! The type-erased view of a world and its node tree that the server drives.
//!
//! [`Tree`] hides the world type `W` so that one server can host worlds of
//! any type. It is implemented by [`WorldEnv`](super::WorldEnv) (its world
//! plus root node) and by [`Detached`] (a node tree without a world). An
//! [`Env`](super::Env) that wraps a `WorldEnv` forwards
//! [`Env::as_tree`](super::Env::as_tree) so that the server exports the
//! wrapped world and nodes too.
//!
//! Nodes are addressed by their path of child indices from the root node.

use super::args::{dt_arg, mask_arg, priority_arg, CallArgs, ResetArgs};
pub use super::erased::{NodeAttrs, Tree, WorldAttrs};
use super::error::{HostError, HostResult};
use super::phase::{Field, Phase};
use super::traits::{Node, World};
use crate::codec::Value;

fn find<'a, W: ?Sized + 'static>(root: &'a dyn Node<W>, path: &[usize]) -> Option<&'a dyn Node<W>> {
    let mut cur = root;
    for &i in path {
        cur = cur.child(i)?;
    }
    Some(cur)
}

fn find_mut<'a, W: ?Sized + 'static>(
    root: &'a mut dyn Node<W>,
    path: &[usize],
) -> Option<&'a mut dyn Node<W>> {
    let mut cur = root;
    for &i in path {
        cur = cur.child_mut(i)?;
    }
    Some(cur)
}

/// The outcome of a composite's method once it has started: an
/// invalid-argument error it returns (e.g. a composite rejecting a keyword
/// after its world already reset, or a child refusing an action after a
/// sibling took its own) is an execution failure, since state may have
/// changed. A leaf object's invalid-argument error passes through: it
/// promises that nothing changed (see
/// [`HostErrorKind::InvalidArgument`](crate::host::HostErrorKind::InvalidArgument)).
pub fn ran<T>(result: HostResult<T>) -> HostResult<T> {
    result.map_err(|e| match e.kind() {
        crate::host::HostErrorKind::InvalidArgument => HostError::new(e.message()),
        _ => e,
    })
}

/// [`ran`] for a composite, the result itself for a leaf.
fn settle<T>(composite: bool, result: HostResult<T>) -> HostResult<T> {
    if composite {
        ran(result)
    } else {
        result
    }
}

fn no_node() -> HostError {
    HostError::new("the node no longer exists in the tree")
}

/// Children names of a node.
pub fn children_of<W: ?Sized + 'static>(root: &dyn Node<W>, path: &[usize]) -> Option<Vec<String>> {
    let node = find(root, path)?;
    Some(
        (0..node.child_count())
            .filter_map(|i| node.child(i).map(|c| c.name().to_string()))
            .collect(),
    )
}

/// Descriptor attributes of a node.
pub fn attrs_of<W: ?Sized + 'static>(root: &dyn Node<W>, path: &[usize]) -> Option<NodeAttrs> {
    let n = find(root, path)?;
    let sorted = |phase| {
        let mut v: Vec<i64> = n.priorities(phase);
        v.sort_unstable_by(|a, b| b.cmp(a));
        v.dedup();
        v
    };
    Some(NodeAttrs {
        name: n.name().to_string(),
        control_timestep: n.control_timestep(),
        update_timestep: n.update_timestep(),
        render_mode: n.render_mode(),
        supported_render_modes: n.supported_render_modes(),
        has_reward: n.has_reward(),
        has_termination_signal: n.has_termination_signal(),
        has_truncation_signal: n.has_truncation_signal(),
        action_space: n.action_space(),
        observation_space: n.observation_space(),
        context_space: n.context_space(),
        priorities: Phase::ALL.map(sorted),
        remote_snapshot_fields: n.remote_snapshot_fields(),
    })
}

/// Calls a node method by its protocol name, binding the protocol arguments
/// to the UniEnv signature first (a binding failure is an invalid-argument
/// error and the method does not run).
pub fn call_node<W: ?Sized + 'static>(
    world: &mut W,
    root: &mut dyn Node<W>,
    path: &[usize],
    method: &str,
    args: CallArgs,
) -> HostResult<Value> {
    let node = find_mut(root, path).ok_or_else(no_node)?;
    // A node with children is a composite: it cannot promise that a refusal
    // left its parts untouched.
    let composite = node.child_count() > 0;
    let ran = |r| settle(composite, r);
    let ran_unit = |r| settle(composite, r);
    let mut args = args;
    match method {
        "set_next_action" => {
            let action = args.required("action", 0)?;
            args.finish()?;
            ran_unit(node.set_next_action(world, action)).map(|_| Value::Null)
        }
        "pre_environment_step" | "post_environment_step" => {
            let dt = dt_arg(args.required("dt", 0)?)?;
            let priority = priority_arg(args.keyword("priority"))?;
            args.finish()?;
            ran_unit(if method == "pre_environment_step" {
                node.pre_environment_step(world, dt, priority)
            } else {
                node.post_environment_step(world, dt, priority)
            })
            .map(|_| Value::Null)
        }
        "reset" | "reload" => {
            let priority = priority_arg(args.keyword("priority"))?;
            let reset = ResetArgs::bind(&mut args)?;
            ran_unit(if method == "reset" {
                node.reset(world, priority, &reset)
            } else {
                node.reload(world, priority, &reset)
            })
            .map(|_| Value::Null)
        }
        "after_reset" | "after_reload" => {
            let priority = priority_arg(args.keyword("priority"))?;
            let mask = mask_arg(args.keyword("mask"))?;
            args.finish()?;
            ran_unit(if method == "after_reset" {
                node.after_reset(world, priority, mask.as_ref())
            } else {
                node.after_reload(world, priority, mask.as_ref())
            })
            .map(|_| Value::Null)
        }
        "get_context" | "get_observation" | "get_reward" | "get_termination" | "get_truncation"
        | "get_info" | "render" => {
            args.finish()?;
            ran(match method {
                "get_context" => node.get_context(world),
                "get_observation" => node.get_observation(world),
                "get_reward" => node.get_reward(world),
                "get_termination" => node.get_termination(world),
                "get_truncation" => node.get_truncation(world),
                "get_info" => node.get_info(world),
                _ => node.render(world),
            })
        }
        other => Err(HostError::invalid_argument(format!(
            "{other} is not a node method"
        ))),
    }
}

/// Reads a snapshot field through the node's getter, when it applies: the
/// space exists (context, observation), the flag is set (reward, signals),
/// the node can render (render); info always applies.
pub fn read_node<W: ?Sized + 'static>(
    world: &mut W,
    root: &mut dyn Node<W>,
    path: &[usize],
    field: Field,
) -> HostResult<Option<Value>> {
    let node = find_mut(root, path).ok_or_else(no_node)?;
    let value = match field {
        Field::Context if node.context_space().is_some() => node.get_context(world)?,
        Field::Observation if node.observation_space().is_some() => node.get_observation(world)?,
        Field::Reward if node.has_reward() => node.get_reward(world)?,
        Field::Terminated if node.has_termination_signal() => node.get_termination(world)?,
        Field::Truncated if node.has_truncation_signal() => node.get_truncation(world)?,
        Field::Info => node.get_info(world)?,
        Field::Render if node.render_mode().is_some() => node.render(world)?,
        _ => return Ok(None),
    };
    Ok(Some(value))
}

/// Calls a world method by its protocol name.
pub fn call_world<W: World + ?Sized>(
    world: &mut W,
    method: &str,
    args: CallArgs,
) -> HostResult<Value> {
    let mut args = args;
    match method {
        "step" => {
            args.finish()?;
            let dt = world.step()?;
            Ok(world
                .last_step_per_env()
                .map_or(Value::Float(dt), Value::Array))
        }
        "reset" | "reload" | "after_reset" | "after_reload" => {
            let reset = ResetArgs::bind(&mut args)?;
            (match method {
                "reset" => world.reset(&reset),
                "reload" => world.reload(&reset),
                "after_reset" => world.after_reset(&reset),
                _ => world.after_reload(&reset),
            })
            .map(|_| Value::Null)
        }
        other => Err(HostError::invalid_argument(format!(
            "{other} is not a world method"
        ))),
    }
}

/// The descriptor attributes of a world.
pub fn world_attrs_of<W: World + ?Sized>(world: &W) -> WorldAttrs {
    WorldAttrs {
        batch_size: world.batch_size(),
        world_timestep: world.world_timestep(),
        world_subtimestep: world.world_subtimestep(),
    }
}

/// A node tree without a world: a detached device, its own execution domain.
pub struct Detached<N: Node<()>> {
    root: N,
}

impl<N: Node<()>> Detached<N> {
    /// Wraps a detached root node.
    pub fn new(root: N) -> Detached<N> {
        Detached { root }
    }

    /// The root node.
    pub fn root(&self) -> &N {
        &self.root
    }
}

impl<N: Node<()>> Tree for Detached<N> {
    fn has_world(&self) -> bool {
        false
    }
    fn world_attrs(&self) -> WorldAttrs {
        world_attrs_of(&())
    }
    fn world_call(&mut self, method: &str, _args: CallArgs) -> HostResult<Value> {
        Err(HostError::invalid_argument(format!(
            "a detached tree has no world to {method}"
        )))
    }
    fn node_children(&self, path: &[usize]) -> Option<Vec<String>> {
        children_of(&self.root, path)
    }
    fn node_attrs(&self, path: &[usize]) -> Option<NodeAttrs> {
        attrs_of(&self.root, path)
    }
    fn node_call(&mut self, path: &[usize], method: &str, args: CallArgs) -> HostResult<Value> {
        call_node(&mut (), &mut self.root, path, method, args)
    }
    fn node_read(&mut self, path: &[usize], field: Field) -> HostResult<Option<Value>> {
        read_node(&mut (), &mut self.root, path, field)
    }
    fn close(&mut self) {
        self.root.close(&mut ());
    }
}

/// A world registered on its own, without nodes.
pub struct WorldOnly<W: World> {
    world: W,
}

impl<W: World> WorldOnly<W> {
    /// Wraps a world.
    pub fn new(world: W) -> WorldOnly<W> {
        WorldOnly { world }
    }
}

impl<W: World> Tree for WorldOnly<W> {
    fn has_world(&self) -> bool {
        true
    }
    fn world_attrs(&self) -> WorldAttrs {
        world_attrs_of(&self.world)
    }
    fn world_call(&mut self, method: &str, args: CallArgs) -> HostResult<Value> {
        call_world(&mut self.world, method, args)
    }
    fn node_children(&self, _path: &[usize]) -> Option<Vec<String>> {
        None
    }
    fn node_attrs(&self, _path: &[usize]) -> Option<NodeAttrs> {
        None
    }
    fn node_call(&mut self, _path: &[usize], _method: &str, _args: CallArgs) -> HostResult<Value> {
        Err(no_node())
    }
    fn node_read(&mut self, _path: &[usize], _field: Field) -> HostResult<Option<Value>> {
        Err(no_node())
    }
    fn close(&mut self) {
        self.world.close();
    }
}

/// A node attached to a world, hosted without an env: the node tree and its
/// world, side by side.
pub struct Attached<W: World> {
    world: W,
    root: Box<dyn Node<W>>,
}

impl<W: World> Attached<W> {
    /// Pairs a world with a root node.
    pub fn new(world: W, root: Box<dyn Node<W>>) -> Attached<W> {
        Attached { world, root }
    }
}

impl<W: World> Tree for Attached<W> {
    fn has_world(&self) -> bool {
        true
    }
    fn world_attrs(&self) -> WorldAttrs {
        world_attrs_of(&self.world)
    }
    fn world_call(&mut self, method: &str, args: CallArgs) -> HostResult<Value> {
        call_world(&mut self.world, method, args)
    }
    fn node_children(&self, path: &[usize]) -> Option<Vec<String>> {
        children_of(self.root.as_ref(), path)
    }
    fn node_attrs(&self, path: &[usize]) -> Option<NodeAttrs> {
        attrs_of(self.root.as_ref(), path)
    }
    fn node_call(&mut self, path: &[usize], method: &str, args: CallArgs) -> HostResult<Value> {
        call_node(&mut self.world, self.root.as_mut(), path, method, args)
    }
    fn node_read(&mut self, path: &[usize], field: Field) -> HostResult<Option<Value>> {
        read_node(&mut self.world, self.root.as_mut(), path, field)
    }
    /// Closes the root node (which closes its children), then the world, as
    /// the reference disposes of a registered attached node with its world.
    fn close(&mut self) {
        self.root.close(&mut self.world);
        self.world.close();
    }
}

/// A tree shared on one thread (e.g. a `WorldEnv` that a wrapper and the
/// server both reach): every call borrows it for its duration.
impl<T: Tree> Tree for std::rc::Rc<std::cell::RefCell<T>> {
    fn has_world(&self) -> bool {
        self.borrow().has_world()
    }
    fn world_attrs(&self) -> WorldAttrs {
        self.borrow().world_attrs()
    }
    fn world_call(&mut self, method: &str, args: CallArgs) -> HostResult<Value> {
        self.borrow_mut().world_call(method, args)
    }
    fn node_children(&self, path: &[usize]) -> Option<Vec<String>> {
        self.borrow().node_children(path)
    }
    fn node_attrs(&self, path: &[usize]) -> Option<NodeAttrs> {
        self.borrow().node_attrs(path)
    }
    fn node_call(&mut self, path: &[usize], method: &str, args: CallArgs) -> HostResult<Value> {
        self.borrow_mut().node_call(path, method, args)
    }
    fn node_read(&mut self, path: &[usize], field: Field) -> HostResult<Option<Value>> {
        self.borrow_mut().node_read(path, field)
    }
    fn close(&mut self) {
        self.borrow_mut().close();
    }
}
