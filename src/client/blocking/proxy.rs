//! Blocking proxies: [`EnvProxy`], and [`WorldProxy`] / [`NodeProxy`],
//! which implement the crate's [`World`] and [`Node`] traits.

use super::connection::Client;
use crate::client::{ClientError, ClientResult, Descriptor};
use crate::codec::{NdArray, Value};
use crate::host::{
    Field, HostError, HostResult, Node, Phase, ResetArgs, ResetResult, Space, StepResult, World,
};
use crate::protocol::ResourceKind;
use std::sync::Arc;

/// Blocking methods derived from the async proxy's: each
/// `fn name(&self, arg: Type, ...) -> Output;` becomes a public method that
/// runs `self.inner.name(arg, ...)` to completion (`self.client.block_on`)
/// and returns `ClientResult<Output>`. Its documentation links the async
/// method, followed by any doc lines written above the item.
macro_rules! blocking_methods {
    ($async_type:literal; $( $(#[doc = $doc:literal])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty; )*) => {
        $(
            #[doc = concat!("See [`", $async_type, "::", stringify!($name), "`].")]
            $(#[doc = $doc])*
            pub fn $name(&self $(, $arg: $ty)*) -> ClientResult<$out> {
                self.client.block_on(self.inner.$name($($arg),*))
            }
        )*
    };
}

impl Client {
    /// A proxy of any kind.
    pub fn resource(&self, resource_id: &str) -> ClientResult<Resource> {
        let descriptor = match self.descriptor(resource_id) {
            Some(d) => d,
            None => self.describe(resource_id)?,
        };
        Ok(match descriptor.kind() {
            ResourceKind::Env => Resource::Env(self.env(resource_id)?),
            ResourceKind::World => Resource::World(self.world(resource_id)?),
            ResourceKind::Node => Resource::Node(self.node(resource_id)?),
        })
    }

    /// An environment proxy.
    pub fn env(&self, resource_id: &str) -> ClientResult<EnvProxy> {
        let inner = self.block_on(self.core.client.env(resource_id))?;
        Ok(EnvProxy {
            inner,
            client: self.clone(),
        })
    }

    /// A world proxy.
    pub fn world(&self, resource_id: &str) -> ClientResult<WorldProxy> {
        let inner = self.block_on(self.core.client.world(resource_id))?;
        Ok(WorldProxy {
            inner,
            client: self.clone(),
        })
    }

    /// A node proxy, with proxies of its whole subtree (the topology is
    /// fixed after registration).
    pub fn node(&self, resource_id: &str) -> ClientResult<NodeProxy> {
        let inner = self.block_on(self.core.client.node(resource_id))?;
        let descriptor = inner.descriptor();
        let mut children = Vec::with_capacity(descriptor.children().len());
        for (_, child) in descriptor.children() {
            children.push(self.node(child)?);
        }
        Ok(NodeProxy {
            name: descriptor.name().unwrap_or_default().to_string(),
            inner,
            children,
            client: self.clone(),
        })
    }
}

/// A proxy of any kind.
#[derive(Debug, Clone)]
pub enum Resource {
    /// An environment.
    Env(EnvProxy),
    /// A world.
    World(WorldProxy),
    /// A node.
    Node(NodeProxy),
}

/// A blocking environment proxy (see [`crate::client::EnvProxy`]).
#[derive(Clone)]
pub struct EnvProxy {
    inner: crate::client::EnvProxy,
    client: Client,
}

impl EnvProxy {
    /// The resource ID.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The latest descriptor.
    pub fn descriptor(&self) -> Arc<Descriptor> {
        self.inner.descriptor()
    }

    blocking_methods! { "crate::client::EnvProxy";
        fn reset(&self, args: ResetArgs) -> ResetResult;
        fn reload(&self, args: ResetArgs) -> ResetResult;
        fn step(&self, action: impl Into<Value>) -> StepResult;
        fn render(&self) -> Value;
        /// Claims control (env mode).
        fn acquire(&self) -> ();
        /// Releases control, keeping subscriptions.
        fn close(&self) -> ();
    }

    /// The action space.
    pub fn action_space(&self) -> Option<Arc<Space>> {
        self.inner.action_space()
    }

    /// The observation space.
    pub fn observation_space(&self) -> Option<Arc<Space>> {
        self.inner.observation_space()
    }

    /// The context space.
    pub fn context_space(&self) -> Option<Arc<Space>> {
        self.inner.context_space()
    }

    /// The batch size.
    pub fn batch_size(&self) -> Option<usize> {
        self.inner.batch_size()
    }

    /// The world of a composed env.
    pub fn world(&self) -> ClientResult<Option<WorldProxy>> {
        self.descriptor()
            .world_id()
            .map(|id| self.client.world(id))
            .transpose()
    }

    /// The root node of a composed env.
    pub fn node(&self) -> ClientResult<Option<NodeProxy>> {
        self.descriptor()
            .node_id()
            .map(|id| self.client.node(id))
            .transpose()
    }

    /// See [`crate::client::EnvProxy::get_node`].
    pub fn get_node<I, S>(&self, keys: I) -> ClientResult<Option<NodeProxy>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        match self.node()? {
            Some(root) => root.get_node(keys),
            None => Ok(None),
        }
    }
}

/// A blocking world proxy (see [`crate::client::WorldProxy`]); implements [`World`].
#[derive(Clone)]
pub struct WorldProxy {
    inner: crate::client::WorldProxy,
    client: Client,
}

impl WorldProxy {
    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The resource ID.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The latest descriptor.
    pub fn descriptor(&self) -> Arc<Descriptor> {
        self.inner.descriptor()
    }

    blocking_methods! { "crate::client::WorldProxy";
        fn step(&self) -> Value;
        fn reset(&self, args: &ResetArgs) -> ();
        fn reload(&self, args: &ResetArgs) -> ();
        fn after_reset(&self, args: &ResetArgs) -> ();
        fn after_reload(&self, args: &ResetArgs) -> ();
        /// Claims control (components mode).
        fn acquire(&self) -> ();
        /// Releases control, keeping subscriptions.
        fn close(&self) -> ();
    }
}

/// A blocking node proxy (see [`crate::client::NodeProxy`]) holding proxies of its
/// children; implements [`Node<W>`](Node) for every `W`.
#[derive(Clone)]
pub struct NodeProxy {
    inner: crate::client::NodeProxy,
    name: String,
    children: Vec<NodeProxy>,
    client: Client,
}

impl NodeProxy {
    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The resource ID.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The latest descriptor.
    pub fn descriptor(&self) -> Arc<Descriptor> {
        self.inner.descriptor()
    }

    /// The direct children.
    pub fn children(&self) -> &[NodeProxy] {
        &self.children
    }

    /// The node's world (`None` for detached nodes).
    pub fn world(&self) -> ClientResult<Option<WorldProxy>> {
        self.descriptor()
            .world_id()
            .map(|id| self.client.world(id))
            .transpose()
    }

    /// The descendant at `keys` (see [`crate::client::NodeProxy::get_node`]).
    pub fn get_node<I, S>(&self, keys: I) -> ClientResult<Option<NodeProxy>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut current = self;
        for key in keys {
            match current.children.iter().find(|c| c.name == key.as_ref()) {
                Some(child) => current = child,
                None => return Ok(None),
            }
        }
        Ok(Some(current.clone()))
    }

    blocking_methods! { "crate::client::NodeProxy";
        fn set_next_action(&self, action: impl Into<Value>) -> ();
        fn pre_environment_step(&self, dt: impl Into<Value>, priority: i64) -> ();
        fn post_environment_step(&self, dt: impl Into<Value>, priority: i64) -> ();
        fn reset(&self, priority: i64, args: &ResetArgs) -> ();
        fn reload(&self, priority: i64, args: &ResetArgs) -> ();
        fn after_reset(&self, priority: i64, mask: Option<&NdArray>) -> ();
        fn after_reload(&self, priority: i64, mask: Option<&NdArray>) -> ();
        /// Cache-aware: served from the boundary snapshot when allowed.
        fn get_context(&self) -> Value;
        /// Cache-aware: served from the boundary snapshot when allowed.
        fn get_observation(&self) -> Value;
        /// Cache-aware: served from the boundary snapshot when allowed.
        fn get_reward(&self) -> Value;
        /// Cache-aware: served from the boundary snapshot when allowed.
        fn get_termination(&self) -> Value;
        /// Cache-aware: served from the boundary snapshot when allowed.
        fn get_truncation(&self) -> Value;
        /// Cache-aware: served from the boundary snapshot when allowed.
        fn get_info(&self) -> Value;
        fn render(&self) -> Value;
        /// Claims control (components mode).
        fn acquire(&self) -> ();
        /// Releases control, keeping subscriptions.
        fn close(&self) -> ();
    }
}

impl std::fmt::Debug for EnvProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "blocking::EnvProxy({:?})", self.id())
    }
}

impl std::fmt::Debug for WorldProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "blocking::WorldProxy({:?})", self.id())
    }
}

impl std::fmt::Debug for NodeProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "blocking::NodeProxy({:?})", self.id())
    }
}

/// A client error as a host error: `invalid_request` becomes an invalid
/// argument, everything else an execution failure carrying the message
/// (with its code).
pub(crate) fn host_error(e: ClientError) -> HostError {
    if e.code() == "invalid_request" {
        HostError::invalid_argument(e.to_string())
    } else {
        HostError::new(e.to_string())
    }
}

fn space(s: Option<Arc<Space>>) -> Option<Space> {
    s.map(|s| Space::clone(&s))
}

impl World for WorldProxy {
    fn step(&mut self) -> HostResult<f64> {
        let dt = WorldProxy::step(self).map_err(host_error)?;
        dt.as_scalar_f64().ok_or_else(|| {
            HostError::new(format!("the remote world step returned {dt}, not a number"))
        })
    }

    fn reset(&mut self, args: &ResetArgs) -> HostResult<()> {
        WorldProxy::reset(self, args).map_err(host_error)
    }

    fn reload(&mut self, args: &ResetArgs) -> HostResult<()> {
        WorldProxy::reload(self, args).map_err(host_error)
    }

    fn after_reset(&mut self, args: &ResetArgs) -> HostResult<()> {
        WorldProxy::after_reset(self, args).map_err(host_error)
    }

    fn after_reload(&mut self, args: &ResetArgs) -> HostResult<()> {
        WorldProxy::after_reload(self, args).map_err(host_error)
    }

    /// Releases control of the remote domain (as the reference proxies'
    /// `close`); the remote world itself is not closed.
    fn close(&mut self) {
        let _ = WorldProxy::close(self);
    }

    fn world_timestep(&self) -> Option<f64> {
        self.descriptor().world_timestep()
    }

    fn world_subtimestep(&self) -> Option<f64> {
        self.descriptor().world_subtimestep()
    }

    fn batch_size(&self) -> Option<usize> {
        self.descriptor().batch_size()
    }
}

impl<W: ?Sized + 'static> Node<W> for NodeProxy {
    fn name(&self) -> &str {
        &self.name
    }

    fn control_timestep(&self) -> Option<f64> {
        self.descriptor().control_timestep()
    }

    fn update_timestep(&self) -> Option<f64> {
        self.descriptor().update_timestep()
    }

    fn context_space(&self) -> Option<Space> {
        space(self.inner.context_space())
    }

    fn observation_space(&self) -> Option<Space> {
        space(self.inner.observation_space())
    }

    fn action_space(&self) -> Option<Space> {
        space(self.inner.action_space())
    }

    fn has_reward(&self) -> bool {
        self.descriptor().has_reward()
    }

    fn has_termination_signal(&self) -> bool {
        self.descriptor().has_termination_signal()
    }

    fn has_truncation_signal(&self) -> bool {
        self.descriptor().has_truncation_signal()
    }

    fn supported_render_modes(&self) -> Vec<String> {
        self.descriptor()
            .supported_render_modes()
            .into_iter()
            .map(str::to_string)
            .collect()
    }

    fn render_mode(&self) -> Option<String> {
        self.descriptor().render_mode().map(str::to_string)
    }

    fn priorities(&self, phase: Phase) -> Vec<i64> {
        self.descriptor().priorities(phase)
    }

    /// Proactive capture is configured on the server; the proxy declares
    /// nothing.
    fn remote_snapshot_fields(&self) -> Option<Vec<Field>> {
        None
    }

    fn child_count(&self) -> usize {
        self.children.len()
    }

    fn child(&self, index: usize) -> Option<&dyn Node<W>> {
        self.children.get(index).map(|c| c as &dyn Node<W>)
    }

    fn child_mut(&mut self, index: usize) -> Option<&mut dyn Node<W>> {
        self.children.get_mut(index).map(|c| c as &mut dyn Node<W>)
    }

    fn set_next_action(&mut self, _world: &mut W, action: Value) -> HostResult<()> {
        NodeProxy::set_next_action(self, action).map_err(host_error)
    }

    fn pre_environment_step(
        &mut self,
        _world: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        NodeProxy::pre_environment_step(self, dt, priority).map_err(host_error)
    }

    fn post_environment_step(
        &mut self,
        _world: &mut W,
        dt: Option<f64>,
        priority: i64,
    ) -> HostResult<()> {
        NodeProxy::post_environment_step(self, dt, priority).map_err(host_error)
    }

    fn reset(&mut self, _world: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        NodeProxy::reset(self, priority, args).map_err(host_error)
    }

    fn reload(&mut self, _world: &mut W, priority: i64, args: &ResetArgs) -> HostResult<()> {
        NodeProxy::reload(self, priority, args).map_err(host_error)
    }

    fn after_reset(
        &mut self,
        _world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
    ) -> HostResult<()> {
        NodeProxy::after_reset(self, priority, mask).map_err(host_error)
    }

    fn after_reload(
        &mut self,
        _world: &mut W,
        priority: i64,
        mask: Option<&NdArray>,
    ) -> HostResult<()> {
        NodeProxy::after_reload(self, priority, mask).map_err(host_error)
    }

    fn get_context(&mut self, _world: &mut W) -> HostResult<Value> {
        NodeProxy::get_context(self).map_err(host_error)
    }

    fn get_observation(&mut self, _world: &mut W) -> HostResult<Value> {
        NodeProxy::get_observation(self).map_err(host_error)
    }

    fn get_reward(&mut self, _world: &mut W) -> HostResult<Value> {
        NodeProxy::get_reward(self).map_err(host_error)
    }

    fn get_termination(&mut self, _world: &mut W) -> HostResult<Value> {
        NodeProxy::get_termination(self).map_err(host_error)
    }

    fn get_truncation(&mut self, _world: &mut W) -> HostResult<Value> {
        NodeProxy::get_truncation(self).map_err(host_error)
    }

    fn get_info(&mut self, _world: &mut W) -> HostResult<Value> {
        NodeProxy::get_info(self).map_err(host_error)
    }

    fn render(&mut self, _world: &mut W) -> HostResult<Value> {
        NodeProxy::render(self).map_err(host_error)
    }

    /// Releases control of the remote domain (as the reference proxies'
    /// `close`); the remote node itself is not closed.
    fn close(&mut self, _world: &mut W) {
        let _ = NodeProxy::close(self);
    }
}
