//! A combined node's lifecycle: dispatch of reset/reload, the after-hooks
//! and pre/post steps by priority with per-member update ratios, action
//! routing with hold-last caching, and aggregation of data, rewards and
//! signals (the [`Node`] implementation).

use super::tables::{phase_index, Members, ROOT_KEY};
use super::CombinedNode;
use crate::codec::{Dict, NdArray, Value};
use crate::host::args::ResetArgs;
use crate::host::error::{HostError, HostResult};
use crate::host::phase::{Phase, RESERVED_PRIORITY};
use crate::host::pyops::{numeric, py_mod};
use crate::host::space::Space;
use crate::host::traits::{Node, World};

impl<W: ?Sized + 'static> CombinedNode<W> {
    fn reset_routing_state(&mut self) {
        self.update_substeps = 0;
        self.action_substeps = 0;
        self.cached_actions.iter_mut().for_each(|a| *a = None);
    }

    /// Dispatches `reset` or `reload` at `priority`.
    fn dispatch_reset(
        &mut self,
        world: &mut W,
        priority: i64,
        args: &ResetArgs,
        reload: bool,
    ) -> HostResult<()> {
        let method = if reload { "reload" } else { "reset" };
        let mut pernode = None;
        for (key, value) in args.kwargs.iter() {
            if key != "pernode_kwargs" {
                return Err(HostError::invalid_argument(format!(
                    "{method}() got an unexpected keyword argument '{key}'"
                )));
            }
            pernode = Some(value);
        }
        let table = &self.phases[phase_index(if reload { Phase::Reload } else { Phase::Reset })];
        for entry in table.participants(priority) {
            let member = self.members.get_mut(entry.member);
            let kwargs = match pernode {
                None => Dict::new(),
                Some(Value::Dict(d)) => match d.get(member.name()) {
                    None => Dict::new(),
                    Some(Value::Dict(kw)) => kw.clone(),
                    Some(other) => {
                        return Err(HostError::invalid_argument(format!(
                            "{method}() argument after ** must be a mapping, not {}",
                            other.type_name()
                        )))
                    }
                },
                Some(other) => {
                    return Err(HostError::invalid_argument(format!(
                        "pernode_kwargs must be a dict, not {}",
                        other.type_name()
                    )))
                }
            };
            if let Some(k) = ["priority", "seed", "mask"]
                .into_iter()
                .find(|k| kwargs.contains_key(k))
            {
                return Err(HostError::invalid_argument(format!(
                    "{method}() got multiple values for keyword argument '{k}'"
                )));
            }
            let member_args = ResetArgs {
                seed: args.seed,
                mask: args.mask.clone(),
                kwargs,
            };
            if reload {
                member.reload(world, priority, &member_args)?;
            } else {
                member.reset(world, priority, &member_args)?;
            }
        }
        Ok(())
    }

    /// Dispatches `after_reset` or `after_reload` at `priority`.
    fn dispatch_after(
        &mut self,
        world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
        reload: bool,
    ) -> HostResult<()> {
        let pi = phase_index(if reload {
            Phase::AfterReload
        } else {
            Phase::AfterReset
        });
        if self.phases[pi].first() == Some(priority) || priority == RESERVED_PRIORITY {
            self.reset_routing_state();
        }
        let table = &self.phases[pi];
        for entry in table.participants(priority) {
            let member = self.members.get_mut(entry.member);
            if reload {
                member.after_reload(world, priority, mask)?;
            } else {
                member.after_reset(world, priority, mask)?;
            }
        }
        if reload && self.phases[pi].last() == Some(priority) {
            self.refresh_spaces()?;
            self.refresh_space_caches();
        }
        Ok(())
    }

    /// Dispatches a pre- or post-step at `priority`.
    fn dispatch_step(&mut self, world: &mut W, priority: i64, post: bool) -> HostResult<()> {
        let pre_first = self.phases[phase_index(Phase::PreStep)].first();
        let advance = if post {
            pre_first.is_none()
                && self.phases[phase_index(Phase::PostStep)].first() == Some(priority)
        } else {
            pre_first == Some(priority)
        };
        if advance {
            self.update_substeps = py_mod(self.update_substeps, self.update_period)? + 1;
        }
        let table = &self.phases[phase_index(if post {
            Phase::PostStep
        } else {
            Phase::PreStep
        })];
        for entry in table.participants(priority) {
            if py_mod(self.update_substeps - 1, entry.ratio)? == 0 {
                let member = self.members.get_mut(entry.member);
                if post {
                    member.post_environment_step(world, entry.dt, priority)?;
                } else {
                    member.pre_environment_step(world, entry.dt, priority)?;
                }
            }
        }
        Ok(())
    }

    /// Collects the context (or observation) channel from its contributors
    /// and aggregates it.
    fn aggregate_channel_data(&mut self, world: &mut W, context: bool) -> HostResult<Value> {
        let nodes = if context {
            &self.context_nodes
        } else {
            &self.observation_nodes
        };
        let mut child_data = Dict::with_capacity(nodes.len());
        let mut root_data = None;
        for &i in nodes {
            let is_root = self.members.is_root(i);
            let member = self.members.get_mut(i);
            let value = if context {
                member.get_context(world)?
            } else {
                member.get_observation(world)?
            };
            if is_root {
                root_data = Some(value);
            } else {
                child_data.insert(member.name(), value);
            }
        }
        let Some(root_data) = root_data else {
            return Ok(aggregate_data(child_data, self.direct_return));
        };
        if child_data.is_empty() {
            return Ok(aggregate_data(
                Dict::new().with(ROOT_KEY, root_data),
                self.direct_return,
            ));
        }
        match root_data {
            Value::Dict(root) => {
                child_data.extend(root);
                Ok(Value::Dict(child_data))
            }
            other => Err(HostError::new(format!(
                "root_node '{}' must return a mapping for the aggregated channel when combined with named child nodes, got {}.",
                self.members.get(self.members.children.len()).name(),
                other.type_name()
            ))),
        }
    }

    /// OR of a signal over its contributors: short-circuiting `any` when
    /// unbatched, element-wise over a `(batch_size,)` bool array when batched.
    fn combine_signal(
        &mut self,
        world: &mut W,
        termination: bool,
        batch_size: Option<usize>,
    ) -> HostResult<Value> {
        let nodes = if termination {
            &self.termination_nodes
        } else {
            &self.truncation_nodes
        };
        let get = |members: &mut Members<W>, i: usize, world: &mut W| {
            let m = members.get_mut(i);
            if termination {
                m.get_termination(world)
            } else {
                m.get_truncation(world)
            }
        };
        match batch_size {
            None => {
                for &i in nodes {
                    let signal = get(&mut self.members, i, world)?;
                    if numeric::truthy(&signal)? {
                        return Ok(Value::Bool(true));
                    }
                }
                Ok(Value::Bool(false))
            }
            Some(n) => {
                let mut acc = numeric::Operand::bool_zeros(n);
                for &i in nodes {
                    let signal = get(&mut self.members, i, world)?;
                    acc = numeric::logical_or(&acc, &numeric::Operand::from_value(&signal, true)?)?;
                }
                acc.into_bool_value()
            }
        }
    }
}

/// UniEnv's `aggregate_data`: nothing gives `None`, one entry with
/// `direct_return` gives that value, otherwise the dict.
fn aggregate_data(data: Dict, direct_return: bool) -> Value {
    match data.len() {
        0 => Value::Null,
        1 if direct_return => data.into_iter().next().map(|(_, v)| v).unwrap_or_default(),
        _ => Value::Dict(data),
    }
}

impl<W: World + ?Sized> Node<W> for CombinedNode<W> {
    fn name(&self) -> &str {
        &self.name
    }

    fn control_timestep(&self) -> Option<f64> {
        self.smallest_control_ts
    }

    fn update_timestep(&self) -> Option<f64> {
        self.smallest_update_ts
    }

    fn effective_update_timestep(&self) -> Option<f64> {
        self.smallest_update_ts
    }

    fn context_space(&self) -> Option<Space> {
        self.context_space.clone()
    }

    fn observation_space(&self) -> Option<Space> {
        self.observation_space.clone()
    }

    fn action_space(&self) -> Option<Space> {
        self.action_space.clone()
    }

    fn has_reward(&self) -> bool {
        self.has_reward
    }

    fn has_termination_signal(&self) -> bool {
        self.has_termination_signal
    }

    fn has_truncation_signal(&self) -> bool {
        self.has_truncation_signal
    }

    fn supported_render_modes(&self) -> Vec<String> {
        vec!["dict".to_owned(), "auto".to_owned()]
    }

    fn render_mode(&self) -> Option<String> {
        self.render_mode.clone()
    }

    fn priorities(&self, phase: Phase) -> Vec<i64> {
        self.priority_order(phase).to_vec()
    }

    fn child_count(&self) -> usize {
        self.members.children.len()
    }

    fn child(&self, index: usize) -> Option<&dyn Node<W>> {
        self.members.children.get(index).map(|c| c.as_ref())
    }

    fn child_mut(&mut self, index: usize) -> Option<&mut dyn Node<W>> {
        match self.members.children.get_mut(index) {
            Some(child) => Some(child.as_mut()),
            None => None,
        }
    }

    fn set_next_action(&mut self, world: &mut W, action: Value) -> HostResult<()> {
        if self.action_space.is_none() {
            if !action.is_null() {
                return Err(HostError::new(
                    "Cannot provide an action when action_space is None.",
                ));
            }
            return Ok(());
        }
        self.action_substeps = py_mod(self.action_substeps, self.action_period)? + 1;

        // Split the action by member: the direct action child gets it whole;
        // otherwise it must be a mapping keyed by child name.
        let (direct, split) = match self.direct_action {
            Some(i) => (Some((i, action)), Dict::new()),
            None => match action {
                Value::Dict(d) => (None, d),
                other => {
                    return Err(HostError::new(format!(
                        "Action must be a mapping when there are multiple action spaces, got {}.",
                        other.type_name()
                    )))
                }
            },
        };
        // The keys no child claims belong to the root node (mixed case).
        if let Some(root) = self.members.root.as_deref() {
            if root.action_space().is_some() && direct.is_none() {
                let children = &self.members.children;
                let root_actions: Dict = split
                    .iter()
                    .filter(|(k, _)| *k != ROOT_KEY && !children.iter().any(|c| c.name() == *k))
                    .map(|(k, v)| (k, v.clone()))
                    .collect();
                if !root_actions.is_empty() {
                    let root_index = children.len();
                    self.cached_actions[root_index] = Some(Value::Dict(root_actions));
                }
            }
        }
        let mut direct = direct;
        for &i in &self.action_nodes {
            let given = match &mut direct {
                Some((d, value)) if *d == i => Some(std::mem::take(value)),
                Some(_) => None,
                None => split.get(self.members.key(i)).cloned(),
            };
            if let Some(value) = given {
                self.cached_actions[i] = Some(value);
            }
            if py_mod(self.action_substeps - 1, self.action_ratios[i])? == 0 {
                if let Some(value) = &self.cached_actions[i] {
                    self.members
                        .get_mut(i)
                        .set_next_action(world, value.clone())?;
                }
            }
        }
        Ok(())
    }

    fn pre_environment_step(
        &mut self,
        world: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        let _ = dt; // UniEnv ignores it: each member receives its own effective update timestep.
        self.dispatch_step(world, priority, false)
    }

    fn post_environment_step(
        &mut self,
        world: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        let _ = dt;
        self.dispatch_step(world, priority, true)
    }

    fn reset(&mut self, world: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.dispatch_reset(world, priority, args, false)
    }

    fn reload(&mut self, world: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        self.dispatch_reset(world, priority, args, true)
    }

    fn after_reset(
        &mut self,
        world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
    ) -> HostResult<()> {
        self.dispatch_after(world, priority, mask, false)
    }

    fn after_reload(
        &mut self,
        world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
    ) -> HostResult<()> {
        self.dispatch_after(world, priority, mask, true)
    }

    fn get_context(&mut self, world: &mut W) -> HostResult<Value> {
        if self.context_space.is_none() {
            return Err(HostError::new("Context space is None, cannot get context."));
        }
        self.aggregate_channel_data(world, true)
    }

    fn get_observation(&mut self, world: &mut W) -> HostResult<Value> {
        if self.observation_space.is_none() {
            return Err(HostError::new(
                "Observation space is None, cannot get observation.",
            ));
        }
        self.aggregate_channel_data(world, false)
    }

    fn get_reward(&mut self, world: &mut W) -> HostResult<Value> {
        if !self.has_reward {
            return Err(HostError::new("This node does not provide a reward."));
        }
        let mut total = match world.batch_size() {
            None => numeric::Operand::Int(0),
            Some(n) => numeric::Operand::float_zeros(n),
        };
        for &i in &self.reward_nodes {
            let reward = self.members.get_mut(i).get_reward(world)?;
            total = numeric::add(&total, &numeric::Operand::from_value(&reward, false)?)?;
        }
        total.into_value()
    }

    fn get_termination(&mut self, world: &mut W) -> HostResult<Value> {
        if !self.has_termination_signal {
            return Err(HostError::new(
                "This node does not provide a termination signal.",
            ));
        }
        let batch_size = world.batch_size();
        self.combine_signal(world, true, batch_size)
    }

    fn get_truncation(&mut self, world: &mut W) -> HostResult<Value> {
        if !self.has_truncation_signal {
            return Err(HostError::new(
                "This node does not provide a truncation signal.",
            ));
        }
        let batch_size = world.batch_size();
        self.combine_signal(world, false, batch_size)
    }

    fn get_info(&mut self, world: &mut W) -> HostResult<Value> {
        let mut infos = Dict::new();
        for i in 0..self.members.len() {
            let member = self.members.get_mut(i);
            let info = member.get_info(world)?;
            if !info.is_null() {
                infos.insert(member.name(), info);
            }
        }
        Ok(aggregate_data(infos, false))
    }

    fn render(&mut self, world: &mut W) -> HostResult<Value> {
        if self.render_mode.is_none() {
            return Ok(Value::Null);
        }
        if let [only] = self.renderable.as_slice() {
            if self.true_render_mode.as_deref() != Some("dict") {
                return self.members.get_mut(*only).render(world);
            }
        }
        let mut result = Dict::new();
        for &i in &self.renderable {
            let member = self.members.get_mut(i);
            match member.render(world)? {
                Value::Null => {}
                Value::Dict(frames) => {
                    for (k, v) in frames {
                        result.insert(format!("{}.{k}", member.name()), v);
                    }
                }
                frame => {
                    result.insert(member.name(), frame);
                }
            }
        }
        Ok(if result.is_empty() {
            Value::Null
        } else {
            Value::Dict(result)
        })
    }

    fn close(&mut self, world: &mut W) {
        for i in 0..self.members.len() {
            self.members.get_mut(i).close(world);
        }
    }
}
