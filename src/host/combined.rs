//! UniEnv's `CombinedWorldNode`: a node that aggregates named children (and
//! an optional root node merged at the top level) into one node.
//!
//! Everything here follows `CombinedWorldNode` of `unienv==0.0.1b14` call for
//! call: priority sets are unions over the members (plus
//! [`RESERVED_PRIORITY`] in the after-hooks), frozen at construction; spaces
//! are aggregated per channel with the `direct_return` rule and refreshed at
//! the lowest `after_reload` priority; actions are routed by child name with
//! hold-last caching and per-child control-rate ratios; pre/post steps are
//! dispatched at per-child update-rate ratios, each child receiving its own
//! effective update timestep.

use super::args::ResetArgs;
use super::error::{HostError, HostResult};
use super::space::Space;
use super::traits::{Node, Phase, World, RESERVED_PRIORITY};
use crate::codec::{Dict, NdArray, Value};

/// The reserved internal key of the root node in routing and aggregation.
const ROOT_KEY: &str = "";

/// Tolerance of the timestep-multiple checks, as in UniEnv.
const RATIO_TOLERANCE: f64 = 1e-9;

/// The `render_mode` constructor argument of a [`CombinedNode`].
///
/// UniEnv takes a string: `"auto"` (the default), `"dict"`, or any other
/// value (including `None`), which is used as the node's render mode as is.
/// Conversions from strings map `"auto"` and `"dict"` to their variants.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RenderModeArg {
    /// One renderable member: its render mode (and `render` returns its frame
    /// directly); several: `"dict"`; none: `None`.
    #[default]
    Auto,
    /// `"dict"` if any member can render, else `None`; `render` always builds
    /// a dict.
    Dict,
    /// This render mode, as given (a custom string, or `None`).
    Custom(Option<String>),
}

impl RenderModeArg {
    /// The Python value this argument stands for.
    fn into_python(self) -> Option<String> {
        match self {
            RenderModeArg::Auto => Some("auto".to_owned()),
            RenderModeArg::Dict => Some("dict".to_owned()),
            RenderModeArg::Custom(mode) => mode,
        }
    }
}

impl From<&str> for RenderModeArg {
    fn from(mode: &str) -> RenderModeArg {
        match mode {
            "auto" => RenderModeArg::Auto,
            "dict" => RenderModeArg::Dict,
            other => RenderModeArg::Custom(Some(other.to_owned())),
        }
    }
}

impl From<String> for RenderModeArg {
    fn from(mode: String) -> RenderModeArg {
        RenderModeArg::from(mode.as_str())
    }
}

impl From<Option<&str>> for RenderModeArg {
    fn from(mode: Option<&str>) -> RenderModeArg {
        mode.map_or(RenderModeArg::Custom(None), RenderModeArg::from)
    }
}

impl From<Option<String>> for RenderModeArg {
    fn from(mode: Option<String>) -> RenderModeArg {
        RenderModeArg::from(mode.as_deref())
    }
}

/// One pre/post-step participant: member index, update ratio, and the
/// member's effective update timestep captured at construction.
#[derive(Debug, Clone, Copy)]
struct StepEntry {
    member: usize,
    ratio: i64,
    dt: Option<f64>,
}

/// One phase's cached dispatch table.
#[derive(Debug, Clone, Default)]
struct PhaseTable {
    /// The aggregated priorities, descending.
    order: Vec<i64>,
    /// For each priority of `order` (same index), the participants in member order.
    participants: Vec<Vec<StepEntry>>,
}

impl PhaseTable {
    fn participants(&self, priority: i64) -> &[StepEntry] {
        self.order
            .iter()
            .position(|&p| p == priority)
            .map_or(&[], |i| self.participants[i].as_slice())
    }

    fn first(&self) -> Option<i64> {
        self.order.first().copied()
    }

    fn last(&self) -> Option<i64> {
        self.order.last().copied()
    }
}

fn phase_index(phase: Phase) -> usize {
    match phase {
        Phase::Reset => 0,
        Phase::Reload => 1,
        Phase::AfterReset => 2,
        Phase::AfterReload => 3,
        Phase::PreStep => 4,
        Phase::PostStep => 5,
    }
}

/// The members of a combined node: the public children, then the optional
/// root node (member index `children.len()`).
struct Members<W: ?Sized + 'static> {
    children: Vec<Box<dyn Node<W>>>,
    root: Option<Box<dyn Node<W>>>,
}

impl<W: ?Sized + 'static> Members<W> {
    fn len(&self) -> usize {
        self.children.len() + usize::from(self.root.is_some())
    }

    fn is_root(&self, i: usize) -> bool {
        i == self.children.len()
    }

    fn get(&self, i: usize) -> &dyn Node<W> {
        match self.children.get(i) {
            Some(child) => child.as_ref(),
            None => self.root.as_deref().expect("member index in range"),
        }
    }

    fn get_mut(&mut self, i: usize) -> &mut dyn Node<W> {
        match self.children.get_mut(i) {
            Some(child) => child.as_mut(),
            None => self.root.as_deref_mut().expect("member index in range"),
        }
    }

    /// The routing key: the child's name, or `""` for the root node.
    fn key(&self, i: usize) -> &str {
        if self.is_root(i) {
            ROOT_KEY
        } else {
            self.children[i].name()
        }
    }

    fn iter(&self) -> impl Iterator<Item = &dyn Node<W>> {
        self.children
            .iter()
            .map(|c| c.as_ref())
            .chain(self.root.as_deref())
    }
}

/// A space channel.
#[derive(Debug, Clone, Copy)]
enum Channel {
    Context,
    Observation,
    Action,
}

impl Channel {
    fn space<W: ?Sized + 'static>(self, node: &dyn Node<W>) -> Option<Space> {
        match self {
            Channel::Context => node.context_space(),
            Channel::Observation => node.observation_space(),
            Channel::Action => node.action_space(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Channel::Context => "context",
            Channel::Observation => "observation",
            Channel::Action => "action",
        }
    }
}

/// UniEnv's `CombinedWorldNode`: aggregates named children (and an optional
/// root node) into one [`Node`].
///
/// * Priorities: each phase's set is the union of the members' sets, plus
///   [`RESERVED_PRIORITY`] for `after_reset` / `after_reload`; frozen at
///   construction, as are the participants of each priority, the update and
///   action ratios, the reward/termination/truncation flags and the set of
///   renderable members.
/// * Spaces (context, observation, action, each independently): no
///   contributor gives `None`; one contributor with `direct_return` gives its
///   space unwrapped; otherwise a [`Space::dict`] keyed by child name. A root
///   node's dict space is merged at the top level. Spaces are recomputed at
///   the lowest `after_reload` priority.
/// * Data: the same rule, dicts in constructor order; rewards are summed,
///   signals OR-ed, infos keyed by member name.
///
/// The public children are exported through [`Node::child`]; the root node is
/// not a child. Batched aggregation (rewards and signals) follows the world's
/// [`World::batch_size`]; detached trees (`W = ()`) are unbatched.
///
/// ```
/// use unienv_remote::host::{CombinedNode, Node, Space};
///
/// struct Arm;
/// impl Node for Arm {
///     fn name(&self) -> &str { "arm" }
///     fn action_space(&self) -> Option<Space> { Some(Space::unbounded_f32(vec![2])) }
/// }
/// struct Cam;
/// impl Node for Cam {
///     fn name(&self) -> &str { "cam" }
///     fn observation_space(&self) -> Option<Space> { Some(Space::unbounded_f32(vec![3])) }
/// }
///
/// let node = CombinedNode::new("robot", vec![Box::new(Arm), Box::new(Cam)]).unwrap();
/// // One contributor per channel and direct_return: the spaces pass through.
/// assert_eq!(node.action_space(), Some(Space::unbounded_f32(vec![2])));
/// assert_eq!(node.observation_space(), Some(Space::unbounded_f32(vec![3])));
/// let node = CombinedNode::builder("robot", vec![Box::new(Arm), Box::new(Cam)])
///     .direct_return(false)
///     .build()
///     .unwrap();
/// assert_eq!(node.action_space(), Some(Space::dict([("arm", Space::unbounded_f32(vec![2]))])));
/// ```
pub struct CombinedNode<W: ?Sized + 'static = ()> {
    name: String,
    direct_return: bool,
    members: Members<W>,
    has_reward: bool,
    has_termination_signal: bool,
    has_truncation_signal: bool,
    /// The resolved `render_mode` attribute.
    render_mode: Option<String>,
    /// The constructor argument (`_true_render_mode`).
    true_render_mode: Option<String>,
    renderable: Vec<usize>,
    smallest_update_ts: Option<f64>,
    smallest_control_ts: Option<f64>,
    action_ratios: Vec<i64>,
    update_period: i64,
    action_period: i64,
    update_substeps: i64,
    action_substeps: i64,
    /// Hold-last action cache, per member.
    cached_actions: Vec<Option<Value>>,
    phases: [PhaseTable; 6],
    context_space: Option<Space>,
    observation_space: Option<Space>,
    action_space: Option<Space>,
    /// The single action contributor under `direct_return`.
    direct_action: Option<usize>,
    context_nodes: Vec<usize>,
    observation_nodes: Vec<usize>,
    action_nodes: Vec<usize>,
    reward_nodes: Vec<usize>,
    termination_nodes: Vec<usize>,
    truncation_nodes: Vec<usize>,
}

/// Builds a [`CombinedNode`] with non-default options.
///
/// ```
/// use unienv_remote::host::{CombinedNode, Node, RenderModeArg};
/// struct Leaf;
/// impl Node for Leaf {
///     fn name(&self) -> &str { "leaf" }
/// }
/// let node = CombinedNode::builder("root", vec![Box::new(Leaf)])
///     .direct_return(false)
///     .render_mode(RenderModeArg::Dict)
///     .build()
///     .unwrap();
/// assert_eq!(node.render_mode(), None); // nothing can render
/// ```
pub struct CombinedNodeBuilder<W: ?Sized + 'static = ()> {
    name: String,
    children: Vec<Box<dyn Node<W>>>,
    direct_return: bool,
    render_mode: RenderModeArg,
    root_node: Option<Box<dyn Node<W>>>,
}

impl<W: ?Sized + 'static> CombinedNodeBuilder<W> {
    /// Whether a channel with a single contributor passes its space and data
    /// through unwrapped (default `true`).
    pub fn direct_return(mut self, direct_return: bool) -> Self {
        self.direct_return = direct_return;
        self
    }

    /// The `render_mode` argument (default [`RenderModeArg::Auto`]).
    pub fn render_mode(mut self, render_mode: impl Into<RenderModeArg>) -> Self {
        self.render_mode = render_mode.into();
        self
    }

    /// A root node, merged at the top level of the aggregated spaces and data.
    pub fn root_node(mut self, root_node: Box<dyn Node<W>>) -> Self {
        self.root_node = Some(root_node);
        self
    }

    /// Validates the composition and builds the node.
    pub fn build(self) -> HostResult<CombinedNode<W>> {
        CombinedNode::with_options(
            self.name,
            self.children,
            self.direct_return,
            self.render_mode,
            self.root_node,
        )
    }
}

impl<W: ?Sized + 'static> CombinedNode<W> {
    /// A combined node with UniEnv's defaults: `direct_return = true`,
    /// `render_mode = "auto"`, no root node.
    ///
    /// Fails (as UniEnv's constructor does) when `children` is empty, when a
    /// child name is empty or repeated, when the timesteps are not integer
    /// multiples of the smallest one (tolerance 1e-9), or when the spaces
    /// cannot be aggregated.
    pub fn new(
        name: impl Into<String>,
        children: Vec<Box<dyn Node<W>>>,
    ) -> HostResult<CombinedNode<W>> {
        CombinedNode::with_options(name, children, true, RenderModeArg::Auto, None)
    }

    /// A builder for the optional arguments.
    pub fn builder(
        name: impl Into<String>,
        children: Vec<Box<dyn Node<W>>>,
    ) -> CombinedNodeBuilder<W> {
        CombinedNodeBuilder {
            name: name.into(),
            children,
            direct_return: true,
            render_mode: RenderModeArg::Auto,
            root_node: None,
        }
    }

    /// UniEnv's full constructor, `CombinedWorldNode(name, nodes,
    /// direct_return, render_mode, root_node)`. See [`CombinedNode::new`]
    /// for the failures; additionally the root node must have a non-empty name.
    pub fn with_options(
        name: impl Into<String>,
        children: Vec<Box<dyn Node<W>>>,
        direct_return: bool,
        render_mode: impl Into<RenderModeArg>,
        root_node: Option<Box<dyn Node<W>>>,
    ) -> HostResult<CombinedNode<W>> {
        if children.is_empty() {
            return Err(HostError::invalid_argument(
                "At least one node is required to create a CombinedWorldNode.",
            ));
        }
        for (i, child) in children.iter().enumerate() {
            if children[..i].iter().any(|c| c.name() == child.name()) {
                return Err(HostError::invalid_argument(
                    "All nodes must have unique names.",
                ));
            }
        }
        if children.iter().any(|c| c.name().is_empty()) {
            return Err(HostError::invalid_argument(
                "Child node names must be non-empty strings (the empty string is reserved for the root_node).",
            ));
        }
        if root_node.as_ref().is_some_and(|r| r.name().is_empty()) {
            return Err(HostError::invalid_argument(
                "root_node must have a non-empty name (used for info / render keys).",
            ));
        }
        let members = Members {
            children,
            root: root_node,
        };
        let n = members.len();
        let has_reward = members.iter().any(|m| m.has_reward());
        let has_termination_signal = members.iter().any(|m| m.has_termination_signal());
        let has_truncation_signal = members.iter().any(|m| m.has_truncation_signal());

        let mut node = CombinedNode {
            name: name.into(),
            direct_return,
            members,
            has_reward,
            has_termination_signal,
            has_truncation_signal,
            render_mode: None,
            true_render_mode: render_mode.into().into_python(),
            renderable: Vec::new(),
            smallest_update_ts: None,
            smallest_control_ts: None,
            action_ratios: Vec::new(),
            update_period: 1,
            action_period: 1,
            update_substeps: 0,
            action_substeps: 0,
            cached_actions: vec![None; n],
            phases: Default::default(),
            context_space: None,
            observation_space: None,
            action_space: None,
            direct_action: None,
            context_nodes: Vec::new(),
            observation_nodes: Vec::new(),
            action_nodes: Vec::new(),
            reward_nodes: Vec::new(),
            termination_nodes: Vec::new(),
            truncation_nodes: Vec::new(),
        };
        node.refresh_spaces()?;
        node.resolve_render_mode();
        let update_ratios = node.compute_rates()?;
        node.build_dispatch_caches(&update_ratios);
        node.refresh_space_caches();
        Ok(node)
    }

    fn resolve_render_mode(&mut self) {
        self.renderable = (0..self.members.len())
            .filter(|&i| self.members.get(i).render_mode().is_some())
            .collect();
        self.render_mode = match self.true_render_mode.as_deref() {
            Some("auto") => match self.renderable.as_slice() {
                [only] => self.members.get(*only).render_mode(),
                [] => None,
                _ => Some("dict".to_owned()),
            },
            Some("dict") => (!self.renderable.is_empty()).then(|| "dict".to_owned()),
            _ => self.true_render_mode.clone(),
        };
    }

    /// Validates the timesteps and computes the smallest timesteps, the
    /// action ratios and both periods; returns the update ratios.
    fn compute_rates(&mut self) -> HostResult<Vec<i64>> {
        let n = self.members.len();
        let eff: Vec<Option<f64>> = self
            .members
            .iter()
            .map(|m| m.effective_update_timestep())
            .collect();
        let ctrl: Vec<Option<f64>> = self.members.iter().map(|m| m.control_timestep()).collect();
        let name = |i: usize| self.members.get(i).name().to_owned();

        self.smallest_update_ts = py_min(eff.iter().flatten().copied());
        if let Some(smallest) = self.smallest_update_ts {
            for (i, es) in eff.iter().enumerate() {
                if let Some(es) = *es {
                    if !is_integer_ratio(py_div(es, smallest)?)? {
                        return Err(HostError::invalid_argument(format!(
                            "Node {} update_timestep ({es}) not integer multiple of smallest ({smallest})",
                            name(i)
                        )));
                    }
                }
            }
        }
        self.smallest_control_ts = py_min(ctrl.iter().flatten().copied());
        if self.smallest_control_ts.is_some() {
            let largest = py_max(ctrl.iter().flatten().copied()).unwrap_or(f64::NAN);
            for (i, ct) in ctrl.iter().enumerate() {
                if let Some(ct) = *ct {
                    if !is_integer_ratio(py_div(largest, ct)?)? {
                        return Err(HostError::invalid_argument(format!(
                            "Largest control ({largest}) not integer multiple of {}'s ({ct})",
                            name(i)
                        )));
                    }
                }
            }
        }
        let ratio = |ts: Option<f64>, smallest: Option<f64>| -> HostResult<i64> {
            match (ts, smallest) {
                (Some(ts), Some(s)) if ts != 0.0 && s != 0.0 => py_round(ts / s),
                _ => Ok(1),
            }
        };
        let mut update_ratios = Vec::with_capacity(n);
        let mut action_ratios = Vec::with_capacity(n);
        for i in 0..n {
            update_ratios.push(ratio(eff[i], self.smallest_update_ts)?);
            action_ratios.push(ratio(ctrl[i], self.smallest_control_ts)?);
        }
        self.update_period = lcm_all(&update_ratios);
        self.action_period = lcm_all(&action_ratios);
        self.action_ratios = action_ratios;
        Ok(update_ratios)
    }

    fn build_dispatch_caches(&mut self, update_ratios: &[i64]) {
        let member_sets: Vec<Vec<Vec<i64>>> = self
            .members
            .iter()
            .map(|m| Phase::ALL.iter().map(|&p| m.priorities(p)).collect())
            .collect();
        let eff: Vec<Option<f64>> = self
            .members
            .iter()
            .map(|m| m.effective_update_timestep())
            .collect();
        for (pi, &phase) in Phase::ALL.iter().enumerate() {
            let mut order: Vec<i64> = member_sets
                .iter()
                .flat_map(|sets| sets[pi].iter().copied())
                .collect();
            if matches!(phase, Phase::AfterReset | Phase::AfterReload) {
                order.push(RESERVED_PRIORITY);
            }
            order.sort_unstable_by(|a, b| b.cmp(a));
            order.dedup();
            let participants = order
                .iter()
                .map(|p| {
                    (0..member_sets.len())
                        .filter(|&m| member_sets[m][pi].contains(p))
                        .map(|m| StepEntry {
                            member: m,
                            ratio: update_ratios[m],
                            dt: eff[m],
                        })
                        .collect()
                })
                .collect();
            self.phases[phase_index(phase)] = PhaseTable {
                order,
                participants,
            };
        }
    }

    fn refresh_space_caches(&mut self) {
        let list = |f: &dyn Fn(&dyn Node<W>) -> bool| -> Vec<usize> {
            (0..self.members.len())
                .filter(|&i| f(self.members.get(i)))
                .collect()
        };
        let context_nodes = list(&|m| m.context_space().is_some());
        let observation_nodes = list(&|m| m.observation_space().is_some());
        let action_nodes = list(&|m| m.action_space().is_some());
        let reward_nodes = list(&|m| m.has_reward());
        let termination_nodes = list(&|m| m.has_termination_signal());
        let truncation_nodes = list(&|m| m.has_truncation_signal());
        self.context_nodes = context_nodes;
        self.observation_nodes = observation_nodes;
        self.action_nodes = action_nodes;
        self.reward_nodes = reward_nodes;
        self.termination_nodes = termination_nodes;
        self.truncation_nodes = truncation_nodes;
    }

    /// Re-aggregates the three spaces, assigning each as soon as it is
    /// computed (as UniEnv does).
    fn refresh_spaces(&mut self) -> HostResult<()> {
        self.context_space = self.aggregate_channel_space(Channel::Context)?.1;
        self.observation_space = self.aggregate_channel_space(Channel::Observation)?.1;
        let (direct, action_space) = self.aggregate_channel_space(Channel::Action)?;
        self.direct_action = direct;
        self.action_space = action_space;
        Ok(())
    }

    /// One channel's aggregated space, and the single contributor when it
    /// is passed through directly.
    fn aggregate_channel_space(
        &self,
        channel: Channel,
    ) -> HostResult<(Option<usize>, Option<Space>)> {
        let children: Vec<(usize, Space)> = self
            .members
            .children
            .iter()
            .enumerate()
            .filter_map(|(i, c)| channel.space(c.as_ref()).map(|s| (i, s)))
            .collect();
        let root_space = self.members.root.as_deref().and_then(|r| channel.space(r));
        let Some(root_space) = root_space else {
            return Ok(self.aggregate_spaces(children));
        };
        let root_index = self.members.children.len();
        if children.is_empty() {
            return Ok(self.aggregate_spaces(vec![(root_index, root_space)]));
        }
        let root_name = self.members.get(root_index).name();
        let Space::Dict(root_dict) = root_space else {
            return Err(HostError::new(format!(
                "root_node '{root_name}' must expose a DictSpace {} space when combined with named child nodes, got {}.",
                channel.name(),
                root_space.type_name()
            )));
        };
        let mut entries: Vec<(String, Space)> = children
            .into_iter()
            .map(|(i, s)| (self.members.key(i).to_owned(), s))
            .collect();
        for (key, space) in root_dict.entries() {
            if entries.iter().any(|(k, _)| k == key) {
                let c = channel.name();
                return Err(HostError::invalid_argument(format!(
                    "Root {c} key '{key}' of root_node '{root_name}' collides with the child node named '{key}'; \
                     root {c} keys must not collide with child node names."
                )));
            }
            entries.push((key.clone(), space.clone()));
        }
        Ok((None, Some(Space::dict(entries))))
    }

    /// UniEnv's `aggregate_spaces` over `(member, space)` entries.
    fn aggregate_spaces(&self, entries: Vec<(usize, Space)>) -> (Option<usize>, Option<Space>) {
        match entries.len() {
            0 => (None, None),
            1 if self.direct_return => {
                let (i, space) = entries.into_iter().next().expect("one entry");
                (Some(i), Some(space))
            }
            _ => (
                None,
                Some(Space::dict(
                    entries
                        .into_iter()
                        .map(|(i, s)| (self.members.key(i).to_owned(), s)),
                )),
            ),
        }
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether single contributors are passed through unwrapped.
    pub fn direct_return(&self) -> bool {
        self.direct_return
    }

    /// The public children, in constructor order.
    pub fn children(&self) -> impl ExactSizeIterator<Item = &dyn Node<W>> {
        self.members.children.iter().map(|c| c.as_ref())
    }

    /// The root node, if any (not one of the public children).
    pub fn root_node(&self) -> Option<&dyn Node<W>> {
        self.members.root.as_deref()
    }

    /// The root node, mutably.
    pub fn root_node_mut(&mut self) -> Option<&mut dyn Node<W>> {
        match &mut self.members.root {
            Some(root) => Some(root.as_mut()),
            None => None,
        }
    }

    /// The cached descending priority order of a phase (UniEnv's
    /// `get_priority_order`), including [`RESERVED_PRIORITY`] for the
    /// after-hooks.
    pub fn priority_order(&self, phase: Phase) -> &[i64] {
        &self.phases[phase_index(phase)].order
    }

    /// UniEnv's `get_node`: an empty path is the node itself; the first key
    /// names a public child (never the root node), further keys are resolved
    /// on that child; `None` when a key is missing.
    pub fn get_node(&self, path: &[&str]) -> Option<&dyn Node<W>>
    where
        W: World,
    {
        find_node(self, path)
    }

    /// [`CombinedNode::get_node`], mutably.
    pub fn get_node_mut(&mut self, path: &[&str]) -> Option<&mut dyn Node<W>>
    where
        W: World,
    {
        find_node_mut(self, path)
    }

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

/// [`find_node`], mutably. With [`WorldEnv::parts_mut`](super::WorldEnv::parts_mut)
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

/// Python's `min` over floats (the first of equal values wins).
fn py_min(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.fold(None, |m, v| match m {
        Some(m) if v.partial_cmp(&m) != Some(std::cmp::Ordering::Less) => Some(m),
        _ => Some(v),
    })
}

/// Python's `max` over floats.
fn py_max(values: impl Iterator<Item = f64>) -> Option<f64> {
    values.fold(None, |m, v| match m {
        Some(m) if v.partial_cmp(&m) != Some(std::cmp::Ordering::Greater) => Some(m),
        _ => Some(v),
    })
}

/// Python's float division: dividing by zero is an error.
pub(crate) fn py_div(a: f64, b: f64) -> HostResult<f64> {
    if b == 0.0 {
        return Err(HostError::invalid_argument("float division by zero"));
    }
    Ok(a / b)
}

/// Python's `round(x)` for floats: half to even, an error for NaN and infinities.
pub(crate) fn py_round(x: f64) -> HostResult<i64> {
    let r = x.round_ties_even();
    if !r.is_finite() || r.abs() >= 9.2e18 {
        return Err(HostError::invalid_argument(format!(
            "cannot round {x} to an integer"
        )));
    }
    Ok(r as i64)
}

/// `abs(r - round(r)) < 1e-9`.
fn is_integer_ratio(r: f64) -> HostResult<bool> {
    Ok((r - py_round(r)? as f64).abs() < RATIO_TOLERANCE)
}

/// Python's `a % b` for integers (the result has the sign of `b`).
fn py_mod(a: i64, b: i64) -> HostResult<i64> {
    if b == 0 {
        return Err(HostError::new("integer modulo by zero"));
    }
    Ok(a.rem_euclid(b) + if b < 0 && a.rem_euclid(b) != 0 { b } else { 0 })
}

/// Python's `math.lcm(*values)` (1 for no values).
fn lcm_all(values: &[i64]) -> i64 {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    values.iter().fold(1i64, |acc, &v| {
        let v = v.saturating_abs();
        if acc == 0 || v == 0 {
            0
        } else {
            (acc / gcd(acc, v)).saturating_mul(v)
        }
    })
}

/// Python-style arithmetic on reward and signal values: scalars keep Python's
/// int/float distinction; arrays (0-d or 1-d, any real dtype) broadcast and
/// produce float64 (sums) or bool (logical OR) arrays.
mod numeric {
    use super::{HostError, HostResult};
    use crate::codec::{NdArray, ScalarKind, Value};

    /// An operand of `+` or `logical_or`.
    #[derive(Debug, Clone)]
    pub(super) enum Operand {
        /// A Python int (bools count as ints).
        Int(i128),
        /// A Python float.
        Float(f64),
        /// A 0-d or 1-d array: its shape and elements as `f64`.
        Array(Vec<usize>, Vec<f64>),
    }

    impl Operand {
        pub(super) fn float_zeros(n: usize) -> Operand {
            Operand::Array(vec![n], vec![0.0; n])
        }

        pub(super) fn bool_zeros(n: usize) -> Operand {
            Operand::float_zeros(n)
        }

        /// Converts a value; `complex_ok` accepts complex arrays (for truth
        /// tests, which look at both parts).
        pub(super) fn from_value(v: &Value, complex_ok: bool) -> HostResult<Operand> {
            Ok(match v {
                Value::Bool(b) => Operand::Int(i128::from(*b)),
                Value::Int(i) => Operand::Int(i128::from(*i)),
                Value::UInt(u) => Operand::Int(i128::from(*u)),
                Value::Float(f) => Operand::Float(*f),
                Value::Array(a) if a.ndim() <= 1 => {
                    let complex = a.dtype().kind() == ScalarKind::Complex;
                    if complex && !complex_ok {
                        return Err(HostError::new(
                            "cannot add a complex array to a real reward",
                        ));
                    }
                    let elements = (0..a.len())
                        .map(|i| {
                            let (re, im) = a.get_complex(i).unwrap_or((0.0, 0.0));
                            if complex && im != 0.0 {
                                1.0
                            } else {
                                re
                            }
                        })
                        .collect();
                    Operand::Array(a.shape().to_vec(), elements)
                }
                Value::Array(a) => {
                    return Err(HostError::new(format!(
                        "arrays of {} dimensions are not supported here (0 or 1 expected)",
                        a.ndim()
                    )))
                }
                other => {
                    return Err(HostError::new(format!(
                        "unsupported operand type for + or logical_or: '{}'",
                        other.type_name()
                    )))
                }
            })
        }

        fn as_array(&self) -> (Vec<usize>, Vec<f64>) {
            match self {
                Operand::Int(i) => (Vec::new(), vec![*i as f64]),
                Operand::Float(f) => (Vec::new(), vec![*f]),
                Operand::Array(shape, values) => (shape.clone(), values.clone()),
            }
        }

        /// The value of a sum: an int, a float or a float64 array.
        pub(super) fn into_value(self) -> HostResult<Value> {
            Ok(match self {
                Operand::Int(i) => match i64::try_from(i) {
                    Ok(i) => Value::Int(i),
                    Err(_) => Value::UInt(
                        u64::try_from(i)
                            .map_err(|_| HostError::new("integer reward sum out of range"))?,
                    ),
                },
                Operand::Float(f) => Value::Float(f),
                Operand::Array(shape, values) => {
                    Value::Array(NdArray::from_shape_vec(shape, values)?)
                }
            })
        }

        /// The value of a logical OR: a bool array.
        pub(super) fn into_bool_value(self) -> HostResult<Value> {
            let (shape, values) = self.as_array();
            let bools: Vec<bool> = values.iter().map(|&x| x != 0.0).collect();
            Ok(Value::Array(NdArray::from_shape_vec(shape, bools)?))
        }
    }

    /// NumPy broadcasting of two 0-d / 1-d operands.
    fn broadcast(a: &Operand, b: &Operand, f: impl Fn(f64, f64) -> f64) -> HostResult<Operand> {
        let (sa, va) = a.as_array();
        let (sb, vb) = b.as_array();
        let (la, lb) = (va.len(), vb.len());
        let len = match (sa.len(), sb.len()) {
            (0, 0) => None,
            (0, _) => Some(lb),
            (_, 0) => Some(la),
            _ if la == lb || lb == 1 => Some(la),
            _ if la == 1 => Some(lb),
            _ => {
                return Err(HostError::new(format!(
                    "operands could not be broadcast together with shapes ({la},) ({lb},)"
                )))
            }
        };
        let n = len.unwrap_or(1);
        let pick = |v: &[f64], i: usize| if v.len() == 1 { v[0] } else { v[i] };
        let values = (0..n).map(|i| f(pick(&va, i), pick(&vb, i))).collect();
        Ok(Operand::Array(
            len.map(|l| vec![l]).unwrap_or_default(),
            values,
        ))
    }

    /// `a + b` with Python and NumPy semantics.
    pub(super) fn add(a: &Operand, b: &Operand) -> HostResult<Operand> {
        Ok(match (a, b) {
            (Operand::Int(x), Operand::Int(y)) => Operand::Int(
                x.checked_add(*y)
                    .ok_or_else(|| HostError::new("integer reward sum overflow"))?,
            ),
            (Operand::Int(x), Operand::Float(y)) => Operand::Float(*x as f64 + y),
            (Operand::Float(x), Operand::Int(y)) => Operand::Float(x + *y as f64),
            (Operand::Float(x), Operand::Float(y)) => Operand::Float(x + y),
            _ => broadcast(a, b, |x, y| x + y)?,
        })
    }

    /// `logical_or(a, b)`: element-wise, non-zero is true.
    pub(super) fn logical_or(a: &Operand, b: &Operand) -> HostResult<Operand> {
        broadcast(a, b, |x, y| f64::from(u8::from(x != 0.0 || y != 0.0)))
    }

    /// Python truthiness of a signal; an error for arrays of several elements.
    pub(super) fn truthy(v: &Value) -> HostResult<bool> {
        v.truthy().ok_or_else(|| {
            HostError::new(
                "The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::numeric::{add, logical_or, Operand};
    use super::*;

    fn sum(values: &[Value]) -> Value {
        let mut total = Operand::Int(0);
        for v in values {
            total = add(&total, &Operand::from_value(v, false).unwrap()).unwrap();
        }
        total.into_value().unwrap()
    }

    #[test]
    fn python_sums() {
        assert_eq!(sum(&[Value::Int(1), Value::Int(2)]), Value::Int(3));
        assert!(matches!(
            sum(&[Value::Int(1), Value::Int(2)]),
            Value::Int(3)
        ));
        assert!(matches!(sum(&[Value::Int(1), Value::Float(0.5)]), Value::Float(f) if f == 1.5));
        assert!(matches!(
            sum(&[Value::Bool(true), Value::Bool(true)]),
            Value::Int(2)
        ));
        assert!(matches!(sum(&[]), Value::Int(0)));
        let a = sum(&[
            Value::Float(1.0),
            Value::Array(NdArray::from_vec(vec![1i32, 2])),
        ]);
        assert_eq!(a, Value::Array(NdArray::from_vec(vec![2.0f64, 3.0])));
        let b = sum(&[Value::Array(NdArray::scalar(2.5f32))]);
        assert_eq!(b, Value::Array(NdArray::scalar(2.5f64)));
        let bad = add(
            &Operand::from_value(&Value::Array(NdArray::from_vec(vec![1.0f64, 2.0])), false)
                .unwrap(),
            &Operand::from_value(
                &Value::Array(NdArray::from_vec(vec![1.0f64, 2.0, 3.0])),
                false,
            )
            .unwrap(),
        );
        assert!(bad.is_err());
        assert!(Operand::from_value(&Value::Null, false).is_err());
        assert!(Operand::from_value(&Value::Str("x".into()), false).is_err());
    }

    #[test]
    fn logical_or_broadcasts() {
        let acc = Operand::bool_zeros(3);
        let x = logical_or(
            &acc,
            &Operand::from_value(&Value::Bool(true), true).unwrap(),
        )
        .unwrap();
        assert_eq!(
            x.into_bool_value().unwrap(),
            Value::Array(NdArray::from_vec(vec![true; 3]))
        );
        let y = logical_or(
            &acc,
            &Operand::from_value(&Value::Array(NdArray::from_vec(vec![0u8, 3, 0])), true).unwrap(),
        )
        .unwrap();
        assert_eq!(
            y.into_bool_value().unwrap(),
            Value::Array(NdArray::from_vec(vec![false, true, false]))
        );
    }

    #[test]
    fn python_arithmetic_helpers() {
        assert_eq!(py_mod(-1, 3).unwrap(), 2);
        assert_eq!(py_mod(4, 3).unwrap(), 1);
        assert_eq!(py_mod(1, -3).unwrap(), -2);
        assert!(py_mod(1, 0).is_err());
        assert_eq!(py_round(2.5).unwrap(), 2);
        assert_eq!(py_round(3.5).unwrap(), 4);
        assert_eq!(py_round(-0.5).unwrap(), 0);
        assert!(py_round(f64::NAN).is_err());
        assert!(py_round(f64::INFINITY).is_err());
        assert!(py_div(1.0, 0.0).is_err());
        assert_eq!(lcm_all(&[1, 2, 3]), 6);
        assert_eq!(lcm_all(&[]), 1);
        assert_eq!(lcm_all(&[4, 6]), 12);
        assert_eq!(py_min([0.5, 0.25, 0.25].into_iter()), Some(0.25));
        assert_eq!(py_max([0.5, 1.0].into_iter()), Some(1.0));
        assert_eq!(py_min(std::iter::empty()), None);
    }
}
