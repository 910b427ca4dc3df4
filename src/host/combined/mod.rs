//! UniEnv's `CombinedWorldNode`: a node that aggregates named children (and
//! an optional root node merged at the top level) into one node.
//!
//! Everything here follows `CombinedWorldNode` of `unienv==0.0.1b14` call for
//! call: priority sets are unions over the members (plus
//! [`RESERVED_PRIORITY`](crate::host::RESERVED_PRIORITY) in the after-hooks),
//! frozen at construction; spaces are aggregated per channel with the
//! `direct_return` rule and refreshed at the lowest `after_reload` priority;
//! actions are routed by child name with hold-last caching and per-child
//! control-rate ratios; pre/post steps are dispatched at per-child
//! update-rate ratios, each child receiving its own effective update
//! timestep.
//!
//! The node and its construction live here; the dispatch tables in
//! `tables`, the lifecycle dispatch and data aggregation (the [`Node`]
//! implementation) in `dispatch`, and the search by name in `search`.

mod dispatch;
mod search;
mod tables;

pub use search::{find_node, find_node_mut};

use super::error::{HostError, HostResult};
use super::phase::Phase;
use super::space::Space;
use super::traits::{Node, World};
use crate::codec::Value;
use tables::{compute_rates, phase_index, phase_tables, Channel, Members, PhaseTable};

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

/// UniEnv's `CombinedWorldNode`: aggregates named children (and an optional
/// root node) into one [`Node`].
///
/// * Priorities: each phase's set is the union of the members' sets, plus
///   [`RESERVED_PRIORITY`](crate::host::RESERVED_PRIORITY) for
///   `after_reset` / `after_reload`; frozen at
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
        let rates = compute_rates(&node.members)?;
        node.phases = phase_tables(&node.members, &rates.update_ratios);
        node.smallest_update_ts = rates.smallest_update_ts;
        node.smallest_control_ts = rates.smallest_control_ts;
        node.update_period = rates.update_period;
        node.action_period = rates.action_period;
        node.action_ratios = rates.action_ratios;
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
    /// `get_priority_order`), including
    /// [`RESERVED_PRIORITY`](crate::host::RESERVED_PRIORITY) for the
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
}
