//! The traits a hosted simulator implements.

use super::args::{ResetArgs, ResetResult, StepResult};
use super::erased::Tree;
use super::error::{HostError, HostResult};
use super::phase::{Field, Phase};
use super::space::Space;
use crate::codec::{Dict, NdArray, Value};

/// An environment, as UniEnv's `Env`: `reset` returns `(context,
/// observation, info)` (context first), `step` returns `(observation, reward,
/// terminated, truncated, info)`.
///
/// When batched (`batch_size` is `Some(n)`), the spaces already include the
/// leading batch axis.
///
/// ```
/// use unienv_remote::host::{Env, HostResult, ResetArgs, ResetResult, Space, StepResult};
/// use unienv_remote::{Dict, NdArray, Value};
///
/// struct Counter { value: f32 }
///
/// impl Env for Counter {
///     fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
///         self.value = args.seed.unwrap_or(0) as f32;
///         Ok(ResetResult::new((), NdArray::from_vec(vec![self.value]), Dict::new()))
///     }
///     fn step(&mut self, action: Value) -> HostResult<StepResult> {
///         let a = action.as_scalar_f64().ok_or("action must be a number")?;
///         self.value += a as f32;
///         let obs = NdArray::from_vec(vec![self.value]);
///         Ok(StepResult::new(obs, self.value as f64, self.value > 10.0, false, Dict::new()))
///     }
///     fn action_space(&self) -> Option<Space> { Some(Space::unbounded_f32(vec![])) }
///     fn observation_space(&self) -> Option<Space> { Some(Space::unbounded_f32(vec![1])) }
/// }
/// ```
pub trait Env: 'static {
    /// Starts a new episode.
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult>;

    /// Advances one control step.
    ///
    /// Rejecting the call *before* changing any state — an action outside
    /// the action space, or `step` before the first `reset` — is
    /// [`HostError::invalid_argument`]: the client gets a certain
    /// `invalid_request` and the env stays usable. `step` before `reset`
    /// should be refused that way, with a message naming `reset` (every
    /// built-in simulator does; a [`WorldEnv`](crate::host::WorldEnv) does
    /// when built with `refusing_step_before_reset`).
    /// Any other error means the state may have changed: the client gets an
    /// uncertain `execution_error` and the env is faulted until `reset`.
    fn step(&mut self, action: Value) -> HostResult<StepResult>;

    /// Whether no episode has started yet, so that `step` must be refused
    /// (default `false`). When `true`, the server refuses `step` with a
    /// certain `invalid_request` naming `reset`, without calling it; an env
    /// that keeps the default refuses in [`Env::step`] itself.
    /// [`WorldEnv`](crate::host::WorldEnv) returns `true` until its first
    /// reset when built with `refusing_step_before_reset`.
    fn awaits_reset(&self) -> bool {
        false
    }

    /// Renders the current state (`None` by default).
    fn render(&mut self) -> HostResult<Value> {
        Ok(Value::Null)
    }

    /// Whether `reload` is implemented; it is exported only then.
    fn supports_reload(&self) -> bool {
        false
    }

    /// Rebuilds the scene and resets (optional; see [`Env::supports_reload`]).
    fn reload(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        let _ = args;
        Err(HostError::not_implemented("reload"))
    }

    /// Releases resources. Called once, on the domain's thread, when the
    /// server disposes of the domain.
    fn close(&mut self) {}

    /// **Extension** (SPEC.md, "Extension: sub-env attributes"): calls
    /// attribute `name` of each sub-env (one for an unbatched env) with
    /// `args` and `kwargs` when it is a method, or reads it; one value per
    /// sub-env. `name` is already checked (a public identifier, not a
    /// lifecycle method). By default the env has none: `not_implemented`,
    /// which the client sees as `unsupported_operation`. An unknown name is
    /// an [`HostError::invalid_argument`] (nothing changed).
    fn call_attribute(
        &mut self,
        name: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> HostResult<Vec<Value>> {
        let _ = (name, args, kwargs);
        Err(HostError::not_implemented("ext:call"))
    }

    /// **Extension** (see [`Env::call_attribute`]): sets attribute `name`
    /// of sub-env `i` to `values[i]` (as many values as sub-envs, checked).
    fn set_attribute(&mut self, name: &str, values: Vec<Value>) -> HostResult<()> {
        let _ = (name, values);
        Err(HostError::not_implemented("ext:set_attr"))
    }

    /// `None` when unbatched, `Some(n)` for `n` parallel environments.
    fn batch_size(&self) -> Option<usize> {
        None
    }

    /// The space of actions `step` accepts.
    fn action_space(&self) -> Option<Space>;

    /// The space of observations.
    fn observation_space(&self) -> Option<Space>;

    /// The space of contexts returned by `reset` (none by default).
    fn context_space(&self) -> Option<Space> {
        None
    }

    /// How `render` renders (`None` by default).
    fn render_mode(&self) -> Option<String> {
        None
    }

    /// Frames per second of rendered output.
    fn render_fps(&self) -> Option<i64> {
        None
    }

    /// Free-form metadata; UniEnv's default is `{"render_modes": []}`.
    fn metadata(&self) -> Dict {
        let mut d = Dict::new();
        d.insert("render_modes", Value::List(Vec::new()));
        d
    }

    /// Whether the env has a `control_timestep` attribute (a `WorldEnv` has
    /// one; a plain env or a wrapper does not), exported in its descriptor.
    fn has_control_timestep(&self) -> bool {
        false
    }

    /// The control timestep (see [`Env::has_control_timestep`]).
    fn control_timestep(&self) -> Option<f64> {
        None
    }

    /// The world and node tree this env is composed of, if any. The server
    /// exports them as `ID/world`, `ID/node` and the node's descendants, and
    /// reaches them only through this one method (for descriptors too), so a
    /// wrapper around a `WorldEnv` forwards just this. `WorldEnv` returns
    /// itself.
    fn as_tree(&mut self) -> Option<&mut dyn Tree> {
        None
    }
}

/// A simulated world, as UniEnv's `World`: it owns the physics and is advanced
/// by [`World::step`], which returns the elapsed time.
pub trait World: 'static {
    /// Advances one world step and returns the elapsed time in seconds.
    fn step(&mut self) -> HostResult<f64>;

    /// Resets the world (runs before the nodes' resets).
    fn reset(&mut self, args: &ResetArgs) -> HostResult<()>;

    /// Prepares or clears the scene before nodes add entities; calls
    /// [`World::reset`] by default.
    fn reload(&mut self, args: &ResetArgs) -> HostResult<()> {
        self.reset(args)
    }

    /// Runs after every node reset.
    fn after_reset(&mut self, args: &ResetArgs) -> HostResult<()> {
        let _ = args;
        Ok(())
    }

    /// Runs after every node reload (compile the scene here).
    fn after_reload(&mut self, args: &ResetArgs) -> HostResult<()> {
        let _ = args;
        Ok(())
    }

    /// Releases resources.
    fn close(&mut self) {}

    /// Seconds advanced by one `step`; `None` means asynchronous / real time.
    fn world_timestep(&self) -> Option<f64>;

    /// Physics sub-step inside one world step (informational).
    fn world_subtimestep(&self) -> Option<f64> {
        None
    }

    /// Number of parallel environments, `None` when unbatched.
    fn batch_size(&self) -> Option<usize> {
        None
    }

    /// For a batched world whose environments advanced by different
    /// amounts in the last [`World::step`]: the elapsed time of each, an
    /// array of shape `(batch_size,)`, as UniEnv's `World.step` returns it.
    /// The server then reports it, not `step`'s float, as the remote
    /// world's `step` value and `dt` snapshot field. `None` (the default):
    /// every environment advanced by `step`'s float.
    fn last_step_per_env(&self) -> Option<NdArray> {
        None
    }
}

impl World for () {
    fn step(&mut self) -> HostResult<f64> {
        Err(HostError::not_implemented("step of the empty world"))
    }
    fn reset(&mut self, _: &ResetArgs) -> HostResult<()> {
        Ok(())
    }
    fn world_timestep(&self) -> Option<f64> {
        None
    }
}

/// A node of a world, as UniEnv's `WorldNode`: a robot, a sensor, a camera, a
/// task. Every method receives the node's world (`W`; `()` for detached
/// nodes). A lifecycle method runs only for the priorities in its
/// [`Node::priorities`] set, highest first.
///
/// Defaults follow UniEnv: `reload` calls `reset`, `after_reload` calls
/// `after_reset`, `get_reward` is `0`, the signals are `false`, `get_info` and
/// `get_context` are `None`, and `set_next_action` / `get_observation` are not
/// implemented.
pub trait Node<W: ?Sized = ()>: 'static {
    /// The node's name (unique among its siblings, non-empty for children).
    fn name(&self) -> &str;

    /// Period at which the node accepts a new action.
    fn control_timestep(&self) -> Option<f64> {
        None
    }

    /// Period of the node's pre/post-step updates.
    fn update_timestep(&self) -> Option<f64> {
        None
    }

    /// `update_timestep`, or `control_timestep` when that is `None`.
    fn effective_update_timestep(&self) -> Option<f64> {
        self.update_timestep().or_else(|| self.control_timestep())
    }

    /// The space of contexts (`None`: no context channel).
    fn context_space(&self) -> Option<Space> {
        None
    }

    /// The space of observations (`None`: no observation channel).
    fn observation_space(&self) -> Option<Space> {
        None
    }

    /// The space of actions (`None`: no action channel).
    fn action_space(&self) -> Option<Space> {
        None
    }

    /// Whether `get_reward` contributes.
    fn has_reward(&self) -> bool {
        false
    }

    /// Whether `get_termination` contributes.
    fn has_termination_signal(&self) -> bool {
        false
    }

    /// Whether `get_truncation` contributes.
    fn has_truncation_signal(&self) -> bool {
        false
    }

    /// Render modes the node supports (informational).
    fn supported_render_modes(&self) -> Vec<String> {
        Vec::new()
    }

    /// How `render` renders; `None` means the node cannot render.
    fn render_mode(&self) -> Option<String> {
        None
    }

    /// The priorities at which the phase's method is called (empty: never).
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        let _ = phase;
        Vec::new()
    }

    /// The snapshot fields the server may read proactively at boundaries;
    /// `None` (the default) allows every field, an empty list disables
    /// proactive reads.
    fn remote_snapshot_fields(&self) -> Option<Vec<Field>> {
        None
    }

    /// Number of child nodes.
    fn child_count(&self) -> usize {
        0
    }

    /// Child `index`.
    fn child(&self, index: usize) -> Option<&dyn Node<W>> {
        let _ = index;
        None
    }

    /// Child `index`, mutably.
    fn child_mut(&mut self, index: usize) -> Option<&mut dyn Node<W>> {
        let _ = index;
        None
    }

    /// Stores the action for the coming step.
    fn set_next_action(&mut self, world: &mut W, action: Value) -> HostResult<()> {
        let _ = (world, action);
        Err(HostError::not_implemented("set_next_action"))
    }

    /// Runs before the world steps; `dt` is the time since the previous world step.
    fn pre_environment_step(
        &mut self,
        world: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        let _ = (world, dt, priority);
        Ok(())
    }

    /// Runs after the world steps.
    fn post_environment_step(
        &mut self,
        world: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        let _ = (world, dt, priority);
        Ok(())
    }

    /// Resets the node (after the world's reset).
    fn reset(&mut self, world: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        let _ = (world, priority, args);
        Ok(())
    }

    /// Reloads the node; calls [`Node::reset`] by default.
    fn reload(&mut self, world: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.reset(world, priority, args)
    }

    /// Runs after the world's after_reset.
    fn after_reset(
        &mut self,
        world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
    ) -> HostResult<()> {
        let _ = (world, priority, mask);
        Ok(())
    }

    /// Runs after the world's after_reload; calls [`Node::after_reset`] by default.
    fn after_reload(
        &mut self,
        world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
    ) -> HostResult<()> {
        self.after_reset(world, priority, mask)
    }

    /// The current context.
    fn get_context(&mut self, world: &mut W) -> HostResult<Value> {
        let _ = world;
        Ok(Value::Null)
    }

    /// The current observation.
    fn get_observation(&mut self, world: &mut W) -> HostResult<Value> {
        let _ = world;
        Err(HostError::not_implemented("get_observation"))
    }

    /// The reward of the last step.
    fn get_reward(&mut self, world: &mut W) -> HostResult<Value> {
        let _ = world;
        Ok(Value::Int(0))
    }

    /// Whether the episode terminated.
    fn get_termination(&mut self, world: &mut W) -> HostResult<Value> {
        let _ = world;
        Ok(Value::Bool(false))
    }

    /// Whether the episode was truncated.
    fn get_truncation(&mut self, world: &mut W) -> HostResult<Value> {
        let _ = world;
        Ok(Value::Bool(false))
    }

    /// Extra information (`None` by default).
    fn get_info(&mut self, world: &mut W) -> HostResult<Value> {
        let _ = world;
        Ok(Value::Null)
    }

    /// Renders the node (`None` by default).
    fn render(&mut self, world: &mut W) -> HostResult<Value> {
        let _ = world;
        Ok(Value::Null)
    }

    /// Releases resources. The server closes only the root of a tree (and
    /// a `WorldEnv` closes its root node): a node with children closes them,
    /// as [`CombinedNode`](super::CombinedNode) does.
    fn close(&mut self, world: &mut W) {
        let _ = world;
    }
}
