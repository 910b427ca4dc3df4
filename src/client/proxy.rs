//! Proxies of remote environments, worlds and nodes.
//!
//! A proxy is a cheap handle (the client and a resource ID). Its attributes
//! and spaces always come from the client's latest descriptor of the
//! resource, which every response refreshes.

use super::connection::Client;
use super::descriptor::Descriptor;
use super::error::{ClientError, ClientResult, InvalidUse};
use super::pending::{Reply, ReplySink};
use crate::codec::{Dict, NdArray, Value};
use crate::host::{Phase, ResetArgs, ResetResult, Space, StepResult};
use crate::protocol::ResourceKind;
use std::sync::Arc;

impl Client {
    /// A proxy of any kind (describes the resource when unknown).
    pub async fn resource(&self, resource_id: &str) -> ClientResult<Resource> {
        let descriptor = self.ensure_descriptor(resource_id).await?;
        Ok(Resource::new(self.clone(), descriptor))
    }

    /// An environment proxy.
    pub async fn env(&self, resource_id: &str) -> ClientResult<EnvProxy> {
        match self.resource(resource_id).await? {
            Resource::Env(p) => Ok(p),
            other => Err(wrong_kind(resource_id, other.kind(), "an env")),
        }
    }

    /// A world proxy.
    pub async fn world(&self, resource_id: &str) -> ClientResult<WorldProxy> {
        match self.resource(resource_id).await? {
            Resource::World(p) => Ok(p),
            other => Err(wrong_kind(resource_id, other.kind(), "a world")),
        }
    }

    /// A node proxy.
    pub async fn node(&self, resource_id: &str) -> ClientResult<NodeProxy> {
        match self.resource(resource_id).await? {
            Resource::Node(p) => Ok(p),
            other => Err(wrong_kind(resource_id, other.kind(), "a node")),
        }
    }
}

fn wrong_kind(id: &str, kind: ResourceKind, wanted: &'static str) -> ClientError {
    ClientError::InvalidUse(InvalidUse::WrongKind {
        resource_id: id.to_string(),
        kind,
        wanted,
    })
}

/// What the proxies share: the client, the ID, and the descriptor seen
/// when the proxy was made (used only if the store lost it).
#[derive(Clone)]
struct Handle {
    client: Client,
    id: Arc<str>,
    initial: Arc<Descriptor>,
}

impl Handle {
    fn descriptor(&self) -> Arc<Descriptor> {
        self.client
            .descriptor(&self.id)
            .unwrap_or_else(|| self.initial.clone())
    }

    async fn call(&self, method: &str, args: Vec<Value>, kwargs: Dict) -> ClientResult<Value> {
        self.client.call(&self.id, method, args, kwargs).await
    }
}

macro_rules! common_accessors {
    () => {
        /// The resource ID.
        pub fn id(&self) -> &str {
            &self.handle.id
        }

        /// The client this proxy talks through.
        pub fn client(&self) -> &Client {
            &self.handle.client
        }

        /// The latest descriptor of the resource.
        pub fn descriptor(&self) -> Arc<Descriptor> {
            self.handle.descriptor()
        }

        /// Claims control of the resource's domain (env mode for envs,
        /// components mode otherwise). Calls claim it implicitly.
        pub async fn acquire(&self) -> ClientResult<()> {
            self.handle.client.acquire(&self.handle.id, None).await
        }

        /// Releases control of the domain, keeping subscriptions (the
        /// reference proxies' `close`).
        pub async fn close(&self) -> ClientResult<()> {
            self.handle.client.release(&self.handle.id, false).await
        }
    };
}

macro_rules! space_accessors {
    () => {
        /// The action space (`None` until available).
        pub fn action_space(&self) -> Option<Arc<Space>> {
            self.descriptor().action_space()
        }

        /// The observation space (`None` until available).
        pub fn observation_space(&self) -> Option<Arc<Space>> {
            self.descriptor().observation_space()
        }

        /// The context space (`None` when there is none).
        pub fn context_space(&self) -> Option<Arc<Space>> {
            self.descriptor().context_space()
        }
    };
}

fn seq_kwargs(first: &[(&str, Value)], args: &ResetArgs) -> Dict {
    let mut d = Dict::with_capacity(first.len() + args.kwargs.len());
    for (k, v) in first {
        d.insert(*k, v.clone());
    }
    for (k, v) in args.kwargs.iter() {
        d.insert(k, v.clone());
    }
    d
}

fn mask_value(mask: &Option<NdArray>) -> Value {
    mask.clone().map_or(Value::Null, Value::Array)
}

fn protocol(e: String) -> ClientError {
    ClientError::malformed(e)
}

/// A remote environment (env mode: every call is a whole `reset`, `step`,
/// `reload` or `render`).
#[derive(Clone)]
pub struct EnvProxy {
    handle: Handle,
}

impl EnvProxy {
    common_accessors!();
    space_accessors!();

    /// `reset(mask=…, seed=…, **kwargs)`.
    pub async fn reset(&self, args: ResetArgs) -> ClientResult<ResetResult> {
        let value = self
            .handle
            .call("reset", Vec::new(), args.to_kwargs())
            .await?;
        ResetResult::from_value(value).map_err(protocol)
    }

    /// `reload(mask=…, seed=…, **kwargs)` (when the env exports it).
    pub async fn reload(&self, args: ResetArgs) -> ClientResult<ResetResult> {
        let value = self
            .handle
            .call("reload", Vec::new(), args.to_kwargs())
            .await?;
        ResetResult::from_value(value).map_err(protocol)
    }

    /// `step(action)`.
    pub async fn step(&self, action: impl Into<Value>) -> ClientResult<StepResult> {
        let value = self
            .handle
            .call("step", vec![action.into()], Dict::new())
            .await?;
        StepResult::from_value(value).map_err(protocol)
    }

    /// `step(action)` with its reply handed to `sink` (with `tag`) by the
    /// reader task: see [`Client::call_to`]. `Err(action)` when the
    /// descriptor is not known. Returns the request's ID.
    pub(crate) fn step_to(
        &self,
        action: Value,
        sink: Arc<dyn ReplySink>,
        tag: usize,
    ) -> Result<ClientResult<u64>, Value> {
        self.handle
            .client
            .call_to(&self.handle.id, "step", vec![action], sink, tag)
            .map_err(|mut args| args.pop().unwrap_or_default())
    }

    /// Whether an env's `step` is a mutation (what [`Client::call`] finds
    /// for it: always).
    pub(crate) fn step_mutates() -> bool {
        ResourceKind::Env.is_mutation("step").unwrap_or(false)
    }

    /// What [`step`](Self::step) returns, from the reply of a
    /// [`step_to`](Self::step_to) request.
    pub(crate) fn step_reply(&self, reply: Reply) -> ClientResult<StepResult> {
        let value =
            self.handle
                .client
                .call_reply(reply, &self.handle.id, EnvProxy::step_mutates())?;
        StepResult::from_value(value).map_err(protocol)
    }

    /// `render()`.
    pub async fn render(&self) -> ClientResult<Value> {
        self.handle.call("render", Vec::new(), Dict::new()).await
    }

    /// The env's batch size (`None` when unbatched).
    pub fn batch_size(&self) -> Option<usize> {
        self.descriptor().batch_size()
    }

    /// The env's render mode.
    pub fn render_mode(&self) -> Option<String> {
        self.descriptor().render_mode().map(str::to_string)
    }

    /// The env's metadata.
    pub fn metadata(&self) -> Dict {
        self.descriptor().metadata().cloned().unwrap_or_default()
    }

    /// The world of a composed env.
    pub async fn world(&self) -> ClientResult<Option<WorldProxy>> {
        match self.descriptor().world_id() {
            Some(id) => self.handle.client.world(id).await.map(Some),
            None => Ok(None),
        }
    }

    /// The root node of a composed env.
    pub async fn node(&self) -> ClientResult<Option<NodeProxy>> {
        match self.descriptor().node_id() {
            Some(id) => self.handle.client.node(id).await.map(Some),
            None => Ok(None),
        }
    }

    /// The node at `keys` below the env's root node (`None` when the env has
    /// no node tree or no such node).
    pub async fn get_node<I, S>(&self, keys: I) -> ClientResult<Option<NodeProxy>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        match self.node().await? {
            Some(root) => root.get_node(keys).await,
            None => Ok(None),
        }
    }
}

/// A remote world (components mode: mutations run inside operations).
#[derive(Clone)]
pub struct WorldProxy {
    handle: Handle,
}

impl WorldProxy {
    common_accessors!();

    /// `step()`: the elapsed time (a float, or an array when batched).
    pub async fn step(&self) -> ClientResult<Value> {
        self.handle.call("step", Vec::new(), Dict::new()).await
    }

    fn kwargs(args: &ResetArgs) -> Dict {
        seq_kwargs(
            &[
                ("seed", Value::from(args.seed)),
                ("mask", mask_value(&args.mask)),
            ],
            args,
        )
    }

    /// `reset(seed=…, mask=…, **kwargs)`.
    pub async fn reset(&self, args: &ResetArgs) -> ClientResult<()> {
        self.handle
            .call("reset", Vec::new(), Self::kwargs(args))
            .await
            .map(drop)
    }

    /// `reload(seed=…, mask=…, **kwargs)`.
    pub async fn reload(&self, args: &ResetArgs) -> ClientResult<()> {
        self.handle
            .call("reload", Vec::new(), Self::kwargs(args))
            .await
            .map(drop)
    }

    /// `after_reset(seed=…, mask=…, **kwargs)`.
    pub async fn after_reset(&self, args: &ResetArgs) -> ClientResult<()> {
        self.handle
            .call("after_reset", Vec::new(), Self::kwargs(args))
            .await
            .map(drop)
    }

    /// `after_reload(seed=…, mask=…, **kwargs)`.
    pub async fn after_reload(&self, args: &ResetArgs) -> ClientResult<()> {
        self.handle
            .call("after_reload", Vec::new(), Self::kwargs(args))
            .await
            .map(drop)
    }

    /// `world_timestep`.
    pub fn world_timestep(&self) -> Option<f64> {
        self.descriptor().world_timestep()
    }

    /// `world_subtimestep`.
    pub fn world_subtimestep(&self) -> Option<f64> {
        self.descriptor().world_subtimestep()
    }

    /// `batch_size`.
    pub fn batch_size(&self) -> Option<usize> {
        self.descriptor().batch_size()
    }
}

/// A remote node (components mode). The six getters are served from the
/// boundary snapshot cache outside operations when the last completed
/// boundary captured the field, and read live otherwise.
#[derive(Clone)]
pub struct NodeProxy {
    handle: Handle,
}

impl NodeProxy {
    common_accessors!();
    space_accessors!();

    /// The node's name.
    pub fn name(&self) -> String {
        self.descriptor().name().unwrap_or_default().to_string()
    }

    /// The priority set of a lifecycle phase (highest first).
    pub fn priorities(&self, phase: Phase) -> Vec<i64> {
        self.descriptor().priorities(phase)
    }

    /// The node's world (`None` for detached nodes).
    pub async fn world(&self) -> ClientResult<Option<WorldProxy>> {
        match self.descriptor().world_id() {
            Some(id) => self.handle.client.world(id).await.map(Some),
            None => Ok(None),
        }
    }

    /// The direct children, in the server's order.
    pub async fn children(&self) -> ClientResult<Vec<NodeProxy>> {
        let mut out = Vec::new();
        for (_, id) in self.descriptor().children() {
            out.push(self.handle.client.node(id).await?);
        }
        Ok(out)
    }

    /// The descendant at `keys` (child names, outermost first); the node
    /// itself for no keys, `None` when a name is missing.
    pub async fn get_node<I, S>(&self, keys: I) -> ClientResult<Option<NodeProxy>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut current = self.clone();
        for key in keys {
            let Some(id) = current.descriptor().child(key.as_ref()).map(str::to_string) else {
                return Ok(None);
            };
            current = self.handle.client.node(&id).await?;
        }
        Ok(Some(current))
    }

    async fn call(&self, method: &str, args: Vec<Value>, kwargs: Dict) -> ClientResult<()> {
        self.handle.call(method, args, kwargs).await.map(drop)
    }

    async fn read(&self, field: &str, method: &str) -> ClientResult<Value> {
        self.handle
            .client
            .read_field(&self.handle.id, field, method)
            .await
    }

    /// `set_next_action(action)`.
    pub async fn set_next_action(&self, action: impl Into<Value>) -> ClientResult<()> {
        self.call("set_next_action", vec![action.into()], Dict::new())
            .await
    }

    /// `pre_environment_step(dt, priority=…)`.
    pub async fn pre_environment_step(
        &self,
        dt: impl Into<Value>,
        priority: i64,
    ) -> ClientResult<()> {
        let mut kwargs = Dict::with_capacity(1);
        kwargs.insert("priority", priority);
        self.call("pre_environment_step", vec![dt.into()], kwargs)
            .await
    }

    /// `post_environment_step(dt, priority=…)`.
    pub async fn post_environment_step(
        &self,
        dt: impl Into<Value>,
        priority: i64,
    ) -> ClientResult<()> {
        let mut kwargs = Dict::with_capacity(1);
        kwargs.insert("priority", priority);
        self.call("post_environment_step", vec![dt.into()], kwargs)
            .await
    }

    fn reset_kwargs(priority: i64, args: &ResetArgs) -> Dict {
        seq_kwargs(
            &[
                ("priority", Value::Int(priority)),
                ("seed", Value::from(args.seed)),
                ("mask", mask_value(&args.mask)),
            ],
            args,
        )
    }

    fn after_kwargs(priority: i64, mask: Option<&NdArray>) -> Dict {
        let mut kwargs = Dict::with_capacity(2);
        kwargs.insert("priority", priority);
        kwargs.insert("mask", mask.cloned().map_or(Value::Null, Value::Array));
        kwargs
    }

    /// `reset(priority=…, seed=…, mask=…, **kwargs)`.
    pub async fn reset(&self, priority: i64, args: &ResetArgs) -> ClientResult<()> {
        self.call("reset", Vec::new(), Self::reset_kwargs(priority, args))
            .await
    }

    /// `reload(priority=…, seed=…, mask=…, **kwargs)`.
    pub async fn reload(&self, priority: i64, args: &ResetArgs) -> ClientResult<()> {
        self.call("reload", Vec::new(), Self::reset_kwargs(priority, args))
            .await
    }

    /// `after_reset(priority=…, mask=…)`.
    pub async fn after_reset(&self, priority: i64, mask: Option<&NdArray>) -> ClientResult<()> {
        self.call(
            "after_reset",
            Vec::new(),
            Self::after_kwargs(priority, mask),
        )
        .await
    }

    /// `after_reload(priority=…, mask=…)`.
    pub async fn after_reload(&self, priority: i64, mask: Option<&NdArray>) -> ClientResult<()> {
        self.call(
            "after_reload",
            Vec::new(),
            Self::after_kwargs(priority, mask),
        )
        .await
    }

    /// `get_context()` (cache-aware).
    pub async fn get_context(&self) -> ClientResult<Value> {
        self.read("context", "get_context").await
    }

    /// `get_observation()` (cache-aware).
    pub async fn get_observation(&self) -> ClientResult<Value> {
        self.read("observation", "get_observation").await
    }

    /// `get_reward()` (cache-aware).
    pub async fn get_reward(&self) -> ClientResult<Value> {
        self.read("reward", "get_reward").await
    }

    /// `get_termination()` (cache-aware).
    pub async fn get_termination(&self) -> ClientResult<Value> {
        self.read("terminated", "get_termination").await
    }

    /// `get_truncation()` (cache-aware).
    pub async fn get_truncation(&self) -> ClientResult<Value> {
        self.read("truncated", "get_truncation").await
    }

    /// `get_info()` (cache-aware).
    pub async fn get_info(&self) -> ClientResult<Value> {
        self.read("info", "get_info").await
    }

    /// `render()` (always live; render is never cached).
    pub async fn render(&self) -> ClientResult<Value> {
        self.handle.call("render", Vec::new(), Dict::new()).await
    }

    /// `control_timestep`.
    pub fn control_timestep(&self) -> Option<f64> {
        self.descriptor().control_timestep()
    }

    /// `update_timestep`.
    pub fn update_timestep(&self) -> Option<f64> {
        self.descriptor().update_timestep()
    }

    /// `has_reward`.
    pub fn has_reward(&self) -> bool {
        self.descriptor().has_reward()
    }

    /// `has_termination_signal`.
    pub fn has_termination_signal(&self) -> bool {
        self.descriptor().has_termination_signal()
    }

    /// `has_truncation_signal`.
    pub fn has_truncation_signal(&self) -> bool {
        self.descriptor().has_truncation_signal()
    }

    /// `render_mode`.
    pub fn render_mode(&self) -> Option<String> {
        self.descriptor().render_mode().map(str::to_string)
    }
}

/// A proxy of any kind.
#[derive(Clone)]
pub enum Resource {
    /// An environment.
    Env(EnvProxy),
    /// A world.
    World(WorldProxy),
    /// A node.
    Node(NodeProxy),
}

impl Resource {
    pub(crate) fn new(client: Client, descriptor: Arc<Descriptor>) -> Resource {
        let handle = Handle {
            client,
            id: Arc::from(descriptor.id()),
            initial: descriptor.clone(),
        };
        match descriptor.kind() {
            ResourceKind::Env => Resource::Env(EnvProxy { handle }),
            ResourceKind::World => Resource::World(WorldProxy { handle }),
            ResourceKind::Node => Resource::Node(NodeProxy { handle }),
        }
    }

    /// The resource ID.
    pub fn id(&self) -> &str {
        match self {
            Resource::Env(p) => p.id(),
            Resource::World(p) => p.id(),
            Resource::Node(p) => p.id(),
        }
    }

    /// The resource kind.
    pub fn kind(&self) -> ResourceKind {
        match self {
            Resource::Env(_) => ResourceKind::Env,
            Resource::World(_) => ResourceKind::World,
            Resource::Node(_) => ResourceKind::Node,
        }
    }
}

impl std::fmt::Debug for EnvProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EnvProxy({:?})", self.id())
    }
}

impl std::fmt::Debug for WorldProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WorldProxy({:?})", self.id())
    }
}

impl std::fmt::Debug for NodeProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeProxy({:?})", self.id())
    }
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Env(p) => p.fmt(f),
            Resource::World(p) => p.fmt(f),
            Resource::Node(p) => p.fmt(f),
        }
    }
}
