//! The type-erased interface the server drives: a world and its node tree
//! behind one object-safe trait, [`Tree`], with the descriptor attributes it
//! reports. The implementations live in [`tree`](super::tree) (and
//! [`WorldEnv`](super::WorldEnv)'s in its own file).

use super::args::CallArgs;
use super::error::HostResult;
use super::phase::Field;
use super::space::Space;
use crate::codec::Value;

/// Descriptor attributes of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeAttrs {
    /// `name`
    pub name: String,
    /// `control_timestep`
    pub control_timestep: Option<f64>,
    /// `update_timestep`
    pub update_timestep: Option<f64>,
    /// `render_mode`
    pub render_mode: Option<String>,
    /// `supported_render_modes`
    pub supported_render_modes: Vec<String>,
    /// `has_reward`
    pub has_reward: bool,
    /// `has_termination_signal`
    pub has_termination_signal: bool,
    /// `has_truncation_signal`
    pub has_truncation_signal: bool,
    /// `action_space`
    pub action_space: Option<Space>,
    /// `observation_space`
    pub observation_space: Option<Space>,
    /// `context_space`
    pub context_space: Option<Space>,
    /// The six priority sets, in [`Phase::ALL`](super::Phase::ALL) order, sorted descending without duplicates.
    pub priorities: [Vec<i64>; 6],
    /// `remote_snapshot_fields`
    pub remote_snapshot_fields: Option<Vec<Field>>,
}

/// Descriptor attributes of a world.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorldAttrs {
    /// `batch_size`
    pub batch_size: Option<usize>,
    /// `world_timestep`
    pub world_timestep: Option<f64>,
    /// `world_subtimestep`
    pub world_subtimestep: Option<f64>,
}

/// A world and a node tree, with the world type erased.
pub trait Tree {
    /// Whether there is a real world (`false` for detached node trees).
    fn has_world(&self) -> bool;
    /// The world's descriptor attributes.
    fn world_attrs(&self) -> WorldAttrs;
    /// Calls a world method by its protocol name.
    fn world_call(&mut self, method: &str, args: CallArgs) -> HostResult<Value>;
    /// Names of the children of the node at `path` (`None`: no such node).
    fn node_children(&self, path: &[usize]) -> Option<Vec<String>>;
    /// Descriptor attributes of the node at `path`.
    fn node_attrs(&self, path: &[usize]) -> Option<NodeAttrs>;
    /// Calls a node method by its protocol name.
    fn node_call(&mut self, path: &[usize], method: &str, args: CallArgs) -> HostResult<Value>;
    /// Reads a snapshot field of the node at `path` through its getter;
    /// `Ok(None)` when the field does not apply (no such space or flag).
    fn node_read(&mut self, path: &[usize], field: Field) -> HostResult<Option<Value>>;
    /// Closes the node tree (root only; composite nodes close their
    /// children), then the world.
    fn close(&mut self);
}
