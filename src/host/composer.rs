//! UniEnv's `WorldEnv`: a [`World`] and a node tree composed into an [`Env`].
//!
//! The lifecycle follows `WorldEnv` of `unienv==0.0.1b14` exactly: the first
//! reset takes the reload path; reset and reload run the world, then the root
//! node at each priority of the phase (highest first), then the world's
//! after-hook, then the node's after-hook at each priority; a step sets the
//! action, runs `n_update_substeps` update substeps of `n_world_substeps`
//! world steps each, and reads the results.

use super::args::CallArgs;
use super::args::{ResetArgs, ResetResult, StepResult};
use super::combined::{find_node, find_node_mut, CombinedNode, RenderModeArg};
use super::error::STEP_BEFORE_RESET;
use super::error::{HostError, HostResult};
use super::phase::{Field, Phase};
use super::pyops::{py_div, py_round};
use super::space::Space;
use super::traits::{Env, Node, World};
use super::tree::{
    attrs_of, call_node, call_world, children_of, read_node, world_attrs_of, NodeAttrs, Tree,
    WorldAttrs,
};
use crate::codec::{DType, Dict, NdArray, Value};

/// A world and a root node composed into an environment (UniEnv's `WorldEnv`).
///
/// The world and the node tree are owned side by side; every node method
/// receives the world. [`WorldEnv::parts_mut`] hands out both at once, so a
/// caller can drive the world and any node of the tree (see
/// [`find_node_mut`](super::find_node_mut)) together.
///
/// ```
/// use unienv_remote::host::{Env, HostResult, Node, ResetArgs, Space, World, WorldEnv};
/// use unienv_remote::{NdArray, Value};
///
/// struct Clock { t: f64 }
/// impl World for Clock {
///     fn step(&mut self) -> HostResult<f64> { self.t += 0.1; Ok(0.1) }
///     fn reset(&mut self, _: &ResetArgs) -> HostResult<()> { self.t = 0.0; Ok(()) }
///     fn world_timestep(&self) -> Option<f64> { Some(0.1) }
/// }
/// struct TimeSensor;
/// impl Node<Clock> for TimeSensor {
///     fn name(&self) -> &str { "time" }
///     fn control_timestep(&self) -> Option<f64> { Some(0.2) }
///     fn observation_space(&self) -> Option<Space> { Some(Space::unbounded_f32(vec![])) }
///     fn get_observation(&mut self, world: &mut Clock) -> HostResult<Value> {
///         Ok(NdArray::scalar(world.t as f32).into())
///     }
/// }
///
/// let mut env = WorldEnv::new(Clock { t: 0.0 }, Box::new(TimeSensor)).unwrap();
/// env.reset(ResetArgs::default()).unwrap();
/// let step = env.step(Value::Null).unwrap();
/// assert_eq!(step.info.get("control_step_elapsed_time"), Some(&Value::Float(0.2)));
/// assert_eq!(env.render_fps(), Some(5));
/// ```
pub struct WorldEnv<W: World> {
    world: W,
    node: Box<dyn Node<W>>,
    n_update_substeps: i64,
    n_world_substeps: i64,
    update_dt: Option<f64>,
    control_dt: Option<f64>,
    first_reset: bool,
    /// Whether `step` before the first reset is refused (off by default,
    /// as the reference's `WorldEnv`, which steps whatever state it has).
    refuse_step_before_reset: bool,
    /// Whether the env or its world was reset (or reloaded) successfully.
    started: bool,
}

/// `world.is_control_timestep_compatible(ts)`: true when either timestep is
/// `None`, otherwise `ts % world_timestep == 0` with exact float remainder.
fn is_control_timestep_compatible(
    world_timestep: Option<f64>,
    ts: Option<f64>,
) -> HostResult<bool> {
    match (ts, world_timestep) {
        (Some(_), Some(0.0)) => Err(HostError::invalid_argument("float modulo by zero")),
        // For the equality with zero, Python's `%` and `fmod` agree.
        (Some(ts), Some(w)) => Ok(ts % w == 0.0),
        _ => Ok(true),
    }
}

/// Python's `a or b` over optional floats (`None` and `0.0` are falsy).
fn py_or(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match a {
        Some(x) if x != 0.0 => a,
        _ => b,
    }
}

/// `int(round(1 / control_dt))`, `None` where Python would fail.
fn fps(control_dt: f64) -> Option<i64> {
    py_div(1.0, control_dt).and_then(py_round).ok()
}

/// `x or {}` for an info value, as a dict.
fn info_dict(info: Value) -> HostResult<Dict> {
    match info {
        Value::Dict(d) => Ok(d),
        other => match other.truthy() {
            Some(false) => Ok(Dict::new()),
            _ => Err(HostError::new(format!(
                "info must be a dict or None, got {}",
                other.type_name()
            ))),
        },
    }
}

impl<W: World> WorldEnv<W> {
    /// Composes `world` with a single root node (a [`CombinedNode`] or any
    /// other node).
    ///
    /// Fails when the node's control timestep or effective update timestep
    /// is not a multiple of the world timestep (exact float remainder), or
    /// when the substep counts cannot be computed (division by zero).
    pub fn new(world: W, node: Box<dyn Node<W>>) -> HostResult<WorldEnv<W>> {
        let world_ts = world.world_timestep();
        let control_ts = node.control_timestep();
        if !is_control_timestep_compatible(world_ts, control_ts)? {
            return Err(HostError::invalid_argument(format!(
                "Control timestep {} is not compatible with world timestep {}.",
                py_opt(control_ts),
                py_opt(world_ts)
            )));
        }
        let update_ts = node.effective_update_timestep();
        if !is_control_timestep_compatible(world_ts, update_ts)? {
            return Err(HostError::invalid_argument(format!(
                "Update timestep {} is not compatible with world timestep {}.",
                py_opt(update_ts),
                py_opt(world_ts)
            )));
        }
        let n_update_substeps = match (control_ts, update_ts) {
            (Some(c), Some(u)) => py_round(py_div(c, u)?)?,
            _ => 1,
        };
        let n_world_substeps = match (update_ts, world_ts) {
            (Some(u), Some(w)) => py_round(py_div(u, w)?)?,
            _ => 1,
        };
        Ok(WorldEnv {
            world,
            node,
            n_update_substeps,
            n_world_substeps,
            update_dt: py_or(update_ts, world_ts),
            control_dt: py_or(py_or(control_ts, update_ts), world_ts),
            first_reset: true,
            refuse_step_before_reset: false,
            started: false,
        })
    }

    /// Refuses `step` before the first reset with an invalid-argument error
    /// naming `reset` (a certain `invalid_request`; nothing runs), as the
    /// hosting traits recommend and the built-in simulators do. Off by
    /// default: the reference's `WorldEnv` steps whatever state it has.
    pub fn refusing_step_before_reset(mut self) -> WorldEnv<W> {
        self.refuse_step_before_reset = true;
        self
    }

    /// Records that an episode started: the env, or its world in components
    /// mode, was reset or reloaded.
    pub(crate) fn episode_started(&mut self) {
        self.started = true;
    }

    /// Composes `world` with several nodes, wrapped as
    /// `CombinedNode("combined", nodes, direct_return = true, render_mode)`.
    pub fn from_nodes(
        world: W,
        nodes: Vec<Box<dyn Node<W>>>,
        render_mode: impl Into<RenderModeArg>,
    ) -> HostResult<WorldEnv<W>> {
        let node = CombinedNode::with_options("combined", nodes, true, render_mode, None)?;
        WorldEnv::new(world, Box::new(node))
    }

    /// Simulation time of one control step: the node's control timestep, or
    /// its effective update timestep, or the world timestep (Python-falsy
    /// `or`); `None` when none is set.
    pub fn control_timestep(&self) -> Option<f64> {
        self.control_dt
    }

    /// The dt given to the root node's pre/post steps: the node's effective
    /// update timestep, or the world timestep (Python-falsy `or`).
    pub fn update_dt(&self) -> Option<f64> {
        self.update_dt
    }

    /// Update substeps per control step: `round(control / update)`, or 1.
    pub fn n_update_substeps(&self) -> i64 {
        self.n_update_substeps
    }

    /// World steps per update substep: `round(update / world)`, or 1.
    pub fn n_world_substeps(&self) -> i64 {
        self.n_world_substeps
    }

    /// The world.
    pub fn world(&self) -> &W {
        &self.world
    }

    /// The world, mutably.
    pub fn world_mut(&mut self) -> &mut W {
        &mut self.world
    }

    /// The root node.
    pub fn node(&self) -> &dyn Node<W> {
        self.node.as_ref()
    }

    /// The root node, mutably.
    pub fn node_mut(&mut self) -> &mut dyn Node<W> {
        self.node.as_mut()
    }

    /// The world and the root node at the same time, e.g. to call a node of
    /// the tree (reached with [`find_node_mut`](super::find_node_mut)) with
    /// its world.
    pub fn parts_mut(&mut self) -> (&mut W, &mut dyn Node<W>) {
        (&mut self.world, self.node.as_mut())
    }

    /// UniEnv's `get_node`, delegated to the root node (see
    /// [`find_node`](super::find_node)).
    pub fn get_node(&self, path: &[&str]) -> Option<&dyn Node<W>> {
        find_node(self.node.as_ref(), path)
    }

    /// [`WorldEnv::get_node`], mutably.
    pub fn get_node_mut(&mut self, path: &[&str]) -> Option<&mut dyn Node<W>> {
        find_node_mut(self.node.as_mut(), path)
    }

    /// Whether the next [`Env::reset`] takes the reload path (until the first
    /// successful reload).
    pub fn is_first_reset(&self) -> bool {
        self.first_reset
    }

    /// The descending priority order of a phase: the root node's set, sorted
    /// (a [`CombinedNode`] already reports its cached order, including
    /// [`RESERVED_PRIORITY`](super::RESERVED_PRIORITY) for the after-hooks).
    fn order(&self, phase: Phase) -> Vec<i64> {
        let mut order = self.node.priorities(phase);
        order.sort_unstable_by(|a, b| b.cmp(a));
        order.dedup();
        order
    }

    /// `priority` passed explicitly and in `**kwargs` is Python's TypeError.
    fn check_node_kwargs(args: &ResetArgs, method: &str) -> HostResult<()> {
        if args.kwargs.contains_key("priority") {
            return Err(HostError::invalid_argument(format!(
                "{method}() got multiple values for keyword argument 'priority'"
            )));
        }
        Ok(())
    }

    fn check_args(args: &ResetArgs, method: &str) -> HostResult<()> {
        if let Some(k) = ["seed", "mask"]
            .into_iter()
            .find(|k| args.kwargs.contains_key(k))
        {
            return Err(HostError::invalid_argument(format!(
                "{method}() got multiple values for keyword argument '{k}'"
            )));
        }
        Ok(())
    }

    fn read_reset_result(&mut self) -> HostResult<ResetResult> {
        let context = match self.node.context_space() {
            Some(_) => self.node.get_context(&mut self.world)?,
            None => Value::Null,
        };
        let observation = match self.node.observation_space() {
            Some(_) => self.node.get_observation(&mut self.world)?,
            None => Value::Null,
        };
        let info = info_dict(self.node.get_info(&mut self.world)?)?;
        Ok(ResetResult {
            context,
            observation,
            info,
        })
    }

    fn reload_impl(&mut self, args: &ResetArgs) -> HostResult<ResetResult> {
        Self::check_args(args, "reload")?;
        self.world.reload(args)?;
        for p in self.order(Phase::Reload) {
            Self::check_node_kwargs(args, "reload")?;
            self.node.reload(&mut self.world, p, args)?;
        }
        self.world.after_reload(args)?;
        for p in self.order(Phase::AfterReload) {
            self.node
                .after_reload(&mut self.world, p, args.mask.as_ref())?;
        }
        let result = self.read_reset_result()?;
        self.first_reset = false;
        Ok(result)
    }

    fn reset_impl(&mut self, mut args: ResetArgs) -> HostResult<ResetResult> {
        let reload = match args.kwargs.remove("reload") {
            None => false,
            Some(flag) => flag.truthy().ok_or_else(|| {
                HostError::invalid_argument("the truth value of the reload argument is ambiguous")
            })?,
        };
        if self.first_reset || reload {
            return self.reload_impl(&args);
        }
        Self::check_args(&args, "reset")?;
        self.world.reset(&args)?;
        for p in self.order(Phase::Reset) {
            Self::check_node_kwargs(&args, "reset")?;
            self.node.reset(&mut self.world, p, &args)?;
        }
        self.world.after_reset(&args)?;
        for p in self.order(Phase::AfterReset) {
            self.node
                .after_reset(&mut self.world, p, args.mask.as_ref())?;
        }
        self.read_reset_result()
    }

    fn step_impl(&mut self, action: Value) -> HostResult<StepResult> {
        if self.node.action_space().is_some() {
            self.node.set_next_action(&mut self.world, action)?;
        }
        let mut actual_dt: Option<f64> = None;
        let mut elapsed: Option<f64> = None;
        for _ in 0..self.n_update_substeps {
            for p in self.order(Phase::PreStep) {
                self.node
                    .pre_environment_step(&mut self.world, self.update_dt, p)?;
            }
            for _ in 0..self.n_world_substeps {
                let dt = self.world.step()?;
                actual_dt = Some(dt);
                elapsed = Some(elapsed.map_or(dt, |e| e + dt));
            }
            let post_dt = self.update_dt.or(actual_dt);
            for p in self.order(Phase::PostStep) {
                self.node
                    .post_environment_step(&mut self.world, post_dt, p)?;
            }
        }
        let observation = match self.node.observation_space() {
            Some(_) => self.node.get_observation(&mut self.world)?,
            None => Value::Null,
        };
        let reward = if self.node.has_reward() {
            self.node.get_reward(&mut self.world)?
        } else {
            self.zeros(DType::F64)?.unwrap_or(Value::Float(0.0))
        };
        let terminated = if self.node.has_termination_signal() {
            self.node.get_termination(&mut self.world)?
        } else {
            self.zeros(DType::BOOL)?.unwrap_or(Value::Bool(false))
        };
        let truncated = if self.node.has_truncation_signal() {
            self.node.get_truncation(&mut self.world)?
        } else {
            self.zeros(DType::BOOL)?.unwrap_or(Value::Bool(false))
        };
        let mut info = info_dict(self.node.get_info(&mut self.world)?)?;
        info.insert("control_step_elapsed_time", elapsed);
        Ok(StepResult {
            observation,
            reward,
            terminated,
            truncated,
            info,
        })
    }

    fn zeros(&self, dtype: DType) -> HostResult<Option<Value>> {
        match self.world.batch_size() {
            Some(n) => Ok(Some(Value::Array(NdArray::zeros(dtype, vec![n])?))),
            None => Ok(None),
        }
    }
}

fn py_opt(x: Option<f64>) -> String {
    x.map_or_else(|| "None".to_owned(), |x| format!("{x:?}"))
}

impl<W: World> Env for WorldEnv<W> {
    /// Resets; the first reset, or one with a truthy `reload` keyword
    /// argument (which is not forwarded), takes the reload path.
    ///
    /// An invalid-argument error (Python's `TypeError`) may come after parts
    /// already reset: the server treats a composite's invalid-argument errors
    /// as execution failures (see [`crate::host::tree::ran`]).
    fn reset(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        let result = self.reset_impl(args)?;
        self.started = true;
        Ok(result)
    }

    /// Steps. With [`WorldEnv::refusing_step_before_reset`], before the
    /// first reset it refuses with an invalid-argument error naming `reset`,
    /// and nothing runs (see [`Env::awaits_reset`]).
    fn step(&mut self, action: Value) -> HostResult<StepResult> {
        if self.awaits_reset() {
            return Err(HostError::invalid_argument(STEP_BEFORE_RESET));
        }
        self.step_impl(action)
    }

    /// With [`WorldEnv::refusing_step_before_reset`]: `true` until the
    /// first successful reset or reload of the env or of its world.
    fn awaits_reset(&self) -> bool {
        self.refuse_step_before_reset && !self.started
    }

    fn render(&mut self) -> HostResult<Value> {
        if self.node.render_mode().is_some() {
            self.node.render(&mut self.world)
        } else {
            Ok(Value::Null)
        }
    }

    fn supports_reload(&self) -> bool {
        true
    }

    fn reload(&mut self, args: ResetArgs) -> HostResult<ResetResult> {
        let result = self.reload_impl(&args)?;
        self.started = true;
        Ok(result)
    }

    /// Closes the node tree, then the world.
    fn close(&mut self) {
        self.node.close(&mut self.world);
        self.world.close();
    }

    fn batch_size(&self) -> Option<usize> {
        self.world.batch_size()
    }

    fn action_space(&self) -> Option<Space> {
        self.node.action_space()
    }

    fn observation_space(&self) -> Option<Space> {
        self.node.observation_space()
    }

    fn context_space(&self) -> Option<Space> {
        self.node.context_space()
    }

    fn render_mode(&self) -> Option<String> {
        self.node.render_mode()
    }

    /// `int(round(1 / control_timestep))`, or `None` without a control timestep.
    fn render_fps(&self) -> Option<i64> {
        self.control_dt.and_then(fps)
    }

    fn has_control_timestep(&self) -> bool {
        true
    }

    fn control_timestep(&self) -> Option<f64> {
        self.control_dt
    }

    fn as_tree(&mut self) -> Option<&mut dyn crate::host::Tree> {
        Some(self)
    }
}

impl<W: World> Tree for WorldEnv<W> {
    fn has_world(&self) -> bool {
        true
    }
    fn world_attrs(&self) -> WorldAttrs {
        world_attrs_of(self.world())
    }
    fn world_call(&mut self, method: &str, args: CallArgs) -> HostResult<Value> {
        let value = call_world(self.world_mut(), method, args)?;
        if matches!(method, "reset" | "reload") {
            // A coordinator reset the world in components mode: an episode
            // has started, for `step` in env mode too.
            self.episode_started();
        }
        Ok(value)
    }
    fn node_children(&self, path: &[usize]) -> Option<Vec<String>> {
        children_of(self.node(), path)
    }
    fn node_attrs(&self, path: &[usize]) -> Option<NodeAttrs> {
        attrs_of(self.node(), path)
    }
    fn node_call(&mut self, path: &[usize], method: &str, args: CallArgs) -> HostResult<Value> {
        let (world, root) = self.parts_mut();
        call_node(world, root, path, method, args)
    }
    fn node_read(&mut self, path: &[usize], field: Field) -> HostResult<Option<Value>> {
        let (world, root) = self.parts_mut();
        read_node(world, root, path, field)
    }
    fn close(&mut self) {
        let (world, root) = self.parts_mut();
        root.close(world);
        world.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_helpers() {
        assert_eq!(py_or(Some(0.0), Some(0.5)), Some(0.5));
        assert_eq!(py_or(None, Some(0.0)), Some(0.0));
        assert_eq!(py_or(Some(0.25), None), Some(0.25));
        assert_eq!(fps(0.4), Some(2)); // round(2.5) == 2
        assert_eq!(fps(1.0 / 3.5), Some(4));
        assert_eq!(fps(0.0), None);
        assert!(is_control_timestep_compatible(Some(0.125), Some(0.5)).unwrap());
        assert!(!is_control_timestep_compatible(Some(0.1), Some(0.3)).unwrap());
        assert!(is_control_timestep_compatible(None, Some(0.3)).unwrap());
        assert!(is_control_timestep_compatible(Some(0.1), None).unwrap());
        assert!(is_control_timestep_compatible(Some(0.0), Some(0.1)).is_err());
        assert_eq!(info_dict(Value::Null).unwrap(), Dict::new());
        assert!(info_dict(Value::Int(3)).is_err());
    }
}
