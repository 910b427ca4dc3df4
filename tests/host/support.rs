//! Recording worlds and nodes for the WorldEnv / CombinedNode tests: every
//! call is appended to a shared log in the notation of the semantics
//! document (`a.reset(priority=1, seed=7, mask=None)`).
#![allow(dead_code)]

use std::cell::RefCell;
use std::rc::Rc;
use unienv_remote::host::{HostError, HostResult, Node, Phase, ResetArgs, Space, World};
use unienv_remote::{Dict, NdArray, Value};

/// The shared call log.
#[derive(Clone, Default)]
pub struct Log(Rc<RefCell<Vec<String>>>);

impl Log {
    pub fn push(&self, entry: impl Into<String>) {
        self.0.borrow_mut().push(entry.into());
    }

    /// Takes the entries recorded so far.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.borrow_mut())
    }

    /// Takes the entries, keeping only those that start with one of `prefixes`.
    pub fn take_matching(&self, prefixes: &[&str]) -> Vec<String> {
        self.take()
            .into_iter()
            .filter(|e| prefixes.iter().any(|p| e.starts_with(p)))
            .collect()
    }
}

/// Python's repr of an optional float.
pub fn py_f(x: Option<f64>) -> String {
    x.map_or_else(|| "None".to_owned(), |x| format!("{x:?}"))
}

fn py_mask(mask: Option<&NdArray>) -> String {
    match mask {
        None => "None".to_owned(),
        Some(m) => format!("{:?}", m.to_vec::<bool>().unwrap_or_default()),
    }
}

fn args_repr(args: &ResetArgs) -> String {
    let mut s = format!(
        "seed={}, mask={}",
        args.seed
            .map_or_else(|| "None".to_owned(), |s| s.to_string()),
        py_mask(args.mask.as_ref())
    );
    for (k, v) in args.kwargs.iter() {
        s.push_str(&format!(", {k}={v}"));
    }
    s
}

/// A world whose every call is logged.
pub struct RecWorld {
    pub log: Log,
    pub world_timestep: Option<f64>,
    pub batch_size: Option<usize>,
    /// What `step` returns.
    pub step_dt: f64,
    /// `after_reload` fails this many more times.
    pub fail_after_reload: usize,
}

impl RecWorld {
    pub fn new(log: &Log, world_timestep: Option<f64>) -> RecWorld {
        RecWorld {
            log: log.clone(),
            world_timestep,
            batch_size: None,
            step_dt: world_timestep.unwrap_or(0.0),
            fail_after_reload: 0,
        }
    }
}

impl World for RecWorld {
    fn step(&mut self) -> HostResult<f64> {
        self.log.push("world.step()");
        Ok(self.step_dt)
    }
    fn reset(&mut self, args: &ResetArgs) -> HostResult<()> {
        self.log.push(format!("world.reset({})", args_repr(args)));
        Ok(())
    }
    fn reload(&mut self, args: &ResetArgs) -> HostResult<()> {
        self.log.push(format!("world.reload({})", args_repr(args)));
        Ok(())
    }
    fn after_reset(&mut self, args: &ResetArgs) -> HostResult<()> {
        self.log
            .push(format!("world.after_reset({})", args_repr(args)));
        Ok(())
    }
    fn after_reload(&mut self, args: &ResetArgs) -> HostResult<()> {
        self.log
            .push(format!("world.after_reload({})", args_repr(args)));
        if self.fail_after_reload > 0 {
            self.fail_after_reload -= 1;
            return Err(HostError::new("scene compilation failed"));
        }
        Ok(())
    }
    fn close(&mut self) {
        self.log.push("world.close()");
    }
    fn world_timestep(&self) -> Option<f64> {
        self.world_timestep
    }
    fn batch_size(&self) -> Option<usize> {
        self.batch_size
    }
}

/// A space cell the test can change while the node is owned by a tree.
pub type SpaceCell = Rc<RefCell<Option<Space>>>;

pub fn cell(space: Option<Space>) -> SpaceCell {
    Rc::new(RefCell::new(space))
}

/// Priority sets the test can change while the node is owned by a tree.
pub type PriorityCell = Rc<RefCell<Vec<(Phase, Vec<i64>)>>>;

/// A configurable node whose every call is logged.
pub struct RecNode {
    pub log: Log,
    pub name: String,
    pub control_timestep: Option<f64>,
    pub update_timestep: Option<f64>,
    pub priorities: PriorityCell,
    pub context_space: SpaceCell,
    pub observation_space: SpaceCell,
    pub action_space: SpaceCell,
    pub has_reward: bool,
    pub has_termination: bool,
    pub has_truncation: bool,
    pub render_mode: Option<String>,
    pub context: Value,
    pub observation: Value,
    pub reward: Value,
    pub termination: Value,
    pub truncation: Value,
    pub info: Value,
    pub frame: Value,
}

impl RecNode {
    /// A node with nothing set (all UniEnv defaults).
    pub fn new(log: &Log, name: &str) -> RecNode {
        RecNode {
            log: log.clone(),
            name: name.to_owned(),
            control_timestep: None,
            update_timestep: None,
            priorities: Rc::new(RefCell::new(Vec::new())),
            context_space: cell(None),
            observation_space: cell(None),
            action_space: cell(None),
            has_reward: false,
            has_termination: false,
            has_truncation: false,
            render_mode: None,
            context: Value::Null,
            observation: Value::Null,
            reward: Value::Int(0),
            termination: Value::Bool(false),
            truncation: Value::Bool(false),
            info: Value::Null,
            frame: Value::Null,
        }
    }

    pub fn timesteps(mut self, control: Option<f64>, update: Option<f64>) -> Self {
        self.control_timestep = control;
        self.update_timestep = update;
        self
    }

    pub fn prio(self, phase: Phase, set: &[i64]) -> Self {
        self.priorities.borrow_mut().push((phase, set.to_vec()));
        self
    }

    pub fn context(mut self, space: Space, value: impl Into<Value>) -> Self {
        self.context_space = cell(Some(space));
        self.context = value.into();
        self
    }

    pub fn observation(mut self, space: Space, value: impl Into<Value>) -> Self {
        self.observation_space = cell(Some(space));
        self.observation = value.into();
        self
    }

    pub fn action(mut self, space: Space) -> Self {
        self.action_space = cell(Some(space));
        self
    }

    pub fn reward(mut self, value: impl Into<Value>) -> Self {
        self.has_reward = true;
        self.reward = value.into();
        self
    }

    pub fn termination(mut self, value: impl Into<Value>) -> Self {
        self.has_termination = true;
        self.termination = value.into();
        self
    }

    pub fn truncation(mut self, value: impl Into<Value>) -> Self {
        self.has_truncation = true;
        self.truncation = value.into();
        self
    }

    pub fn info(mut self, value: impl Into<Value>) -> Self {
        self.info = value.into();
        self
    }

    pub fn render(mut self, mode: &str, frame: impl Into<Value>) -> Self {
        self.render_mode = Some(mode.to_owned());
        self.frame = frame.into();
        self
    }

    pub fn boxed<W: ?Sized + 'static>(self) -> Box<dyn Node<W>> {
        Box::new(self)
    }

    fn call(&self, what: String) {
        self.log.push(format!("{}.{what}", self.name));
    }
}

impl<W: ?Sized + 'static> Node<W> for RecNode {
    fn name(&self) -> &str {
        &self.name
    }
    fn control_timestep(&self) -> Option<f64> {
        self.control_timestep
    }
    fn update_timestep(&self) -> Option<f64> {
        self.update_timestep
    }
    fn context_space(&self) -> Option<Space> {
        self.context_space.borrow().clone()
    }
    fn observation_space(&self) -> Option<Space> {
        self.observation_space.borrow().clone()
    }
    fn action_space(&self) -> Option<Space> {
        self.action_space.borrow().clone()
    }
    fn has_reward(&self) -> bool {
        self.has_reward
    }
    fn has_termination_signal(&self) -> bool {
        self.has_termination
    }
    fn has_truncation_signal(&self) -> bool {
        self.has_truncation
    }
    fn render_mode(&self) -> Option<String> {
        self.render_mode.clone()
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        self.priorities
            .borrow()
            .iter()
            .filter(|(p, _)| *p == phase)
            .flat_map(|(_, set)| set.iter().copied())
            .collect()
    }
    fn set_next_action(&mut self, _: &mut W, action: Value) -> HostResult<()> {
        self.call(format!("set_next_action({action})"));
        Ok(())
    }
    fn pre_environment_step(
        &mut self,
        _: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        self.call(format!(
            "pre_environment_step({}, priority={priority})",
            py_f(dt)
        ));
        Ok(())
    }
    fn post_environment_step(
        &mut self,
        _: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        self.call(format!(
            "post_environment_step({}, priority={priority})",
            py_f(dt)
        ));
        Ok(())
    }
    fn reset(&mut self, _: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.call(format!("reset(priority={priority}, {})", args_repr(args)));
        Ok(())
    }
    fn reload(&mut self, _: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.call(format!("reload(priority={priority}, {})", args_repr(args)));
        Ok(())
    }
    fn after_reset(&mut self, _: &mut W, priority: i64, mask: Option<&NdArray>) -> HostResult<()> {
        self.call(format!(
            "after_reset(priority={priority}, mask={})",
            py_mask(mask)
        ));
        Ok(())
    }
    fn after_reload(&mut self, _: &mut W, priority: i64, mask: Option<&NdArray>) -> HostResult<()> {
        self.call(format!(
            "after_reload(priority={priority}, mask={})",
            py_mask(mask)
        ));
        Ok(())
    }
    fn get_context(&mut self, _: &mut W) -> HostResult<Value> {
        self.call("get_context()".into());
        Ok(self.context.clone())
    }
    fn get_observation(&mut self, _: &mut W) -> HostResult<Value> {
        self.call("get_observation()".into());
        Ok(self.observation.clone())
    }
    fn get_reward(&mut self, _: &mut W) -> HostResult<Value> {
        self.call("get_reward()".into());
        Ok(self.reward.clone())
    }
    fn get_termination(&mut self, _: &mut W) -> HostResult<Value> {
        self.call("get_termination()".into());
        Ok(self.termination.clone())
    }
    fn get_truncation(&mut self, _: &mut W) -> HostResult<Value> {
        self.call("get_truncation()".into());
        Ok(self.truncation.clone())
    }
    fn get_info(&mut self, _: &mut W) -> HostResult<Value> {
        self.call("get_info()".into());
        Ok(self.info.clone())
    }
    fn render(&mut self, _: &mut W) -> HostResult<Value> {
        self.call("render()".into());
        Ok(self.frame.clone())
    }
    fn close(&mut self, _: &mut W) {
        self.call("close()".into());
    }
}

/// Wraps any node (e.g. a combined root) and logs the calls it receives
/// under `label` before delegating; the children are exported unchanged.
pub struct Traced<N> {
    pub label: String,
    pub log: Log,
    pub inner: N,
}

impl<N> Traced<N> {
    pub fn new(log: &Log, label: &str, inner: N) -> Traced<N> {
        Traced {
            label: label.to_owned(),
            log: log.clone(),
            inner,
        }
    }

    fn call(&self, what: String) {
        self.log.push(format!("{}.{what}", self.label));
    }
}

impl<W: ?Sized + 'static, N: Node<W>> Node<W> for Traced<N> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn control_timestep(&self) -> Option<f64> {
        self.inner.control_timestep()
    }
    fn update_timestep(&self) -> Option<f64> {
        self.inner.update_timestep()
    }
    fn effective_update_timestep(&self) -> Option<f64> {
        self.inner.effective_update_timestep()
    }
    fn context_space(&self) -> Option<Space> {
        self.inner.context_space()
    }
    fn observation_space(&self) -> Option<Space> {
        self.inner.observation_space()
    }
    fn action_space(&self) -> Option<Space> {
        self.inner.action_space()
    }
    fn has_reward(&self) -> bool {
        self.inner.has_reward()
    }
    fn has_termination_signal(&self) -> bool {
        self.inner.has_termination_signal()
    }
    fn has_truncation_signal(&self) -> bool {
        self.inner.has_truncation_signal()
    }
    fn supported_render_modes(&self) -> Vec<String> {
        self.inner.supported_render_modes()
    }
    fn render_mode(&self) -> Option<String> {
        self.inner.render_mode()
    }
    fn priorities(&self, phase: Phase) -> Vec<i64> {
        self.inner.priorities(phase)
    }
    fn child_count(&self) -> usize {
        self.inner.child_count()
    }
    fn child(&self, index: usize) -> Option<&dyn Node<W>> {
        self.inner.child(index)
    }
    fn child_mut(&mut self, index: usize) -> Option<&mut dyn Node<W>> {
        self.inner.child_mut(index)
    }
    fn set_next_action(&mut self, world: &mut W, action: Value) -> HostResult<()> {
        self.call(format!("set_next_action({action})"));
        self.inner.set_next_action(world, action)
    }
    fn pre_environment_step(
        &mut self,
        world: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        self.call(format!(
            "pre_environment_step({}, priority={priority})",
            py_f(dt)
        ));
        self.inner.pre_environment_step(world, dt, priority)
    }
    fn post_environment_step(
        &mut self,
        world: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        self.call(format!(
            "post_environment_step({}, priority={priority})",
            py_f(dt)
        ));
        self.inner.post_environment_step(world, dt, priority)
    }
    fn reset(&mut self, world: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.call(format!("reset(priority={priority}, {})", args_repr(args)));
        self.inner.reset(world, priority, args)
    }
    fn reload(&mut self, world: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.call(format!("reload(priority={priority}, {})", args_repr(args)));
        self.inner.reload(world, priority, args)
    }
    fn after_reset(
        &mut self,
        world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
    ) -> HostResult<()> {
        self.call(format!(
            "after_reset(priority={priority}, mask={})",
            py_mask(mask)
        ));
        self.inner.after_reset(world, priority, mask)
    }
    fn after_reload(
        &mut self,
        world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
    ) -> HostResult<()> {
        self.call(format!(
            "after_reload(priority={priority}, mask={})",
            py_mask(mask)
        ));
        self.inner.after_reload(world, priority, mask)
    }
    fn get_context(&mut self, world: &mut W) -> HostResult<Value> {
        self.call("get_context()".into());
        self.inner.get_context(world)
    }
    fn get_observation(&mut self, world: &mut W) -> HostResult<Value> {
        self.call("get_observation()".into());
        self.inner.get_observation(world)
    }
    fn get_reward(&mut self, world: &mut W) -> HostResult<Value> {
        self.call("get_reward()".into());
        self.inner.get_reward(world)
    }
    fn get_termination(&mut self, world: &mut W) -> HostResult<Value> {
        self.call("get_termination()".into());
        self.inner.get_termination(world)
    }
    fn get_truncation(&mut self, world: &mut W) -> HostResult<Value> {
        self.call("get_truncation()".into());
        self.inner.get_truncation(world)
    }
    fn get_info(&mut self, world: &mut W) -> HostResult<Value> {
        self.call("get_info()".into());
        self.inner.get_info(world)
    }
    fn render(&mut self, world: &mut W) -> HostResult<Value> {
        self.call("render()".into());
        self.inner.render(world)
    }
    fn close(&mut self, world: &mut W) {
        self.call("close()".into());
        self.inner.close(world)
    }
}

/// A float32 box of shape (1,) from −∞ to ∞.
pub fn box1() -> Space {
    Space::unbounded_f32(vec![1])
}

/// An empty dict.
pub fn empty() -> Dict {
    Dict::new()
}
