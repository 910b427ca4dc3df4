//! A blocking facade over the async client, for plain training loops.
//!
//! [`Client`] owns a small current-thread tokio runtime. Every method blocks
//! the calling thread until the async operation completes, and the calling
//! thread itself runs the connection's writer and reader tasks meanwhile: a
//! request costs no thread handoff on the client side. When no call has been
//! made for a short while (200 ms), an idle thread drives the connection
//! instead (answering pings, receiving snapshots, noticing closure) until the
//! next call takes over. Several threads may share one client. The semantics
//! are exactly those of the async [`client`](super) module. Do not call these
//! methods from async code (blocking inside a runtime panics): use the async
//! client there.
//!
//! [`WorldProxy`] implements the crate's [`World`] trait and [`NodeProxy`]
//! implements [`Node<W>`](Node) for any world type `W` (the world argument is
//! ignored: the node's world is remote), so that remote components can be
//! driven by code written against the host traits — in particular by the
//! crate's [`WorldEnv`](crate::host::WorldEnv) composer, which
//! [`RemoteWorldEnv`] runs client-side with one operation per reset, reload
//! and step.
//!
//! ```
//! use unienv_remote::client::{blocking, ClientConfig, OperationKind};
//! use unienv_remote::host::ResetArgs;
//! use unienv_remote::server::{Server, ServerConfig};
//! use unienv_remote::{fixtures, NdArray};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A server in this process (any `ws://` URL works with `connect`).
//! let runtime = tokio::runtime::Runtime::new()?;
//! let mut builder = Server::builder(ServerConfig::default());
//! fixtures::register(&mut builder)?;
//! let server = builder.start();
//! let listener = runtime.block_on(server.listen("127.0.0.1:0"))?;
//!
//! let client = blocking::Client::connect(&listener.url(), ClientConfig::default())?;
//! let env = client.env("counter")?;
//! env.reset(ResetArgs::with_seed(0))?;
//! for _ in 0..3 {
//!     let step = env.step(NdArray::from_vec(vec![1.0f32, 1.0]))?;
//!     println!("reward {}", step.reward);
//! }
//! let arm = client.node("arm")?;
//! client.with_operation("arm", OperationKind::Reset, |_op| {
//!     arm.reset(0, &ResetArgs::with_seed(1))
//! })?;
//! assert_eq!(arm.get_reward()?.as_f64(), Some(1.0));
//! client.close();
//! runtime.block_on(server.shutdown());
//! # Ok(()) }
//! ```

pub use super::remote_env::RemoteWorldEnv;

use super::{
    BoundarySnapshot, ClientConfig, ClientError, ClientResult, Descriptor, Mode, OperationKind,
    ServerInfo, SnapshotEvent,
};
use crate::codec::{Dict, NdArray, Value};
use crate::host::{
    Field, HostError, HostResult, Node, Phase, ResetArgs, ResetResult, Space, StepResult, World,
};
use crate::protocol::ResourceKind;
use crate::transport::MemoryTransport;
use parking_lot::{Condvar, Mutex};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a connection may go without calls before the idle driver
/// thread services it.
const IDLE_AFTER: Duration = Duration::from_millis(200);

/// A current-thread runtime, driven by the threads that call into it (so a
/// request costs no thread handoff on the client side: the caller's thread
/// runs the writer and reader tasks itself) and, after [`IDLE_AFTER`] without
/// calls, by an idle driver thread, so that the connection keeps answering
/// pings, receiving snapshots and noticing closure between calls. A call
/// arriving while the idle driver runs takes the runtime back from it.
struct Driver {
    runtime: Option<tokio::runtime::Runtime>,
    state: Mutex<DriverState>,
    wake: Condvar,
    kick: tokio::sync::Notify,
}

struct DriverState {
    calls: usize,
    idling: bool,
    last_call: Instant,
    stop: bool,
}

impl Driver {
    fn new() -> ClientResult<Arc<Driver>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ClientError::Connect(format!("cannot start the client runtime: {e}")))?;
        Ok(Arc::new(Driver {
            runtime: Some(runtime),
            state: Mutex::new(DriverState {
                calls: 0,
                idling: false,
                last_call: Instant::now(),
                stop: false,
            }),
            wake: Condvar::new(),
            kick: tokio::sync::Notify::new(),
        }))
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        match &self.runtime {
            Some(rt) => rt,
            None => unreachable!("the runtime is only taken when the driver is dropped"),
        }
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        struct Call<'a>(&'a Driver);
        impl Drop for Call<'_> {
            fn drop(&mut self) {
                let mut st = self.0.state.lock();
                st.calls -= 1;
                st.last_call = Instant::now();
            }
        }
        {
            let mut st = self.state.lock();
            st.calls += 1;
            if st.idling {
                self.kick.notify_one();
            }
        }
        let _call = Call(self);
        self.runtime().block_on(future)
    }

    /// The idle driver thread's loop.
    fn idle(&self) {
        loop {
            {
                let mut st = self.state.lock();
                loop {
                    if st.stop {
                        return;
                    }
                    let quiet = st.last_call.elapsed();
                    if st.calls == 0 && quiet >= IDLE_AFTER {
                        break;
                    }
                    let wait = if st.calls > 0 {
                        IDLE_AFTER
                    } else {
                        IDLE_AFTER.saturating_sub(quiet)
                    };
                    self.wake.wait_for(&mut st, wait);
                }
                st.idling = true;
            }
            self.runtime().block_on(self.kick.notified());
            self.state.lock().idling = false;
        }
    }

    fn stop(&self) {
        let mut st = self.state.lock();
        st.stop = true;
        if st.idling {
            self.kick.notify_one();
        }
        self.wake.notify_all();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The driver and the async client it serves; closed gracefully when the
/// last blocking handle goes away.
struct Core {
    client: super::Client,
    driver: Arc<Driver>,
    idler: Option<std::thread::JoinHandle<()>>,
}

impl Core {
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.driver.block_on(future)
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.driver.stop();
        if let Some(idler) = self.idler.take() {
            let _ = idler.join();
        }
        if tokio::runtime::Handle::try_current().is_err() {
            let client = self.client.clone();
            self.driver.block_on(async move {
                let _ = tokio::time::timeout(Duration::from_secs(1), client.close()).await;
            });
        }
    }
}

/// A blocking connection (see [`super::Client`]). Cheap to clone.
#[derive(Clone)]
pub struct Client {
    core: Arc<Core>,
}

impl Client {
    /// Connects over WebSocket (see [`super::Client::connect`]).
    pub fn connect(url: &str, config: ClientConfig) -> ClientResult<Client> {
        let driver = Driver::new()?;
        let client = driver.block_on(super::Client::connect(url, config))?;
        Client::wrap(client, driver)
    }

    /// Connects through an in-memory transport (see
    /// [`super::Client::over_memory`]).
    pub fn over_memory(transport: MemoryTransport, config: ClientConfig) -> ClientResult<Client> {
        let driver = Driver::new()?;
        let client = driver.block_on(super::Client::over_memory(transport, config))?;
        Client::wrap(client, driver)
    }

    fn wrap(client: super::Client, driver: Arc<Driver>) -> ClientResult<Client> {
        let idle = driver.clone();
        let idler = std::thread::Builder::new()
            .name("unienv-client-idle".into())
            .spawn(move || idle.idle());
        let idler = match idler {
            Ok(handle) => handle,
            Err(e) => {
                driver.block_on(client.close());
                return Err(ClientError::Connect(format!(
                    "cannot start the client's idle thread: {e}"
                )));
            }
        };
        Ok(Client {
            core: Arc::new(Core {
                client,
                driver,
                idler: Some(idler),
            }),
        })
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.core.block_on(future)
    }

    /// Whether both handles share one connection.
    pub fn same_connection(&self, other: &Client) -> bool {
        Arc::ptr_eq(&self.core, &other.core)
    }

    /// See [`super::Client::server_info`].
    pub fn server_info(&self) -> &ServerInfo {
        self.core.client.server_info()
    }

    /// See [`super::Client::session_id`].
    pub fn session_id(&self) -> &str {
        self.core.client.session_id()
    }

    /// See [`super::Client::max_message_size`].
    pub fn max_message_size(&self) -> usize {
        self.core.client.max_message_size()
    }

    /// See [`super::Client::is_closed`].
    pub fn is_closed(&self) -> bool {
        self.core.client.is_closed()
    }

    /// See [`super::Client::requests_sent`].
    pub fn requests_sent(&self) -> u64 {
        self.core.client.requests_sent()
    }

    /// See [`super::Client::close`].
    pub fn close(&self) {
        self.block_on(self.core.client.close());
    }

    /// See [`super::Client::discover`].
    pub fn discover(&self) -> ClientResult<Vec<Arc<Descriptor>>> {
        self.block_on(self.core.client.discover())
    }

    /// See [`super::Client::describe`].
    pub fn describe(&self, resource_id: &str) -> ClientResult<Arc<Descriptor>> {
        self.block_on(self.core.client.describe(resource_id))
    }

    /// See [`super::Client::descriptor`].
    pub fn descriptor(&self, resource_id: &str) -> Option<Arc<Descriptor>> {
        self.core.client.descriptor(resource_id)
    }

    /// See [`super::Client::descriptors`].
    pub fn descriptors(&self) -> Vec<Arc<Descriptor>> {
        self.core.client.descriptors()
    }

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

    /// See [`super::Client::acquire`].
    pub fn acquire(&self, resource_id: &str, mode: Option<Mode>) -> ClientResult<()> {
        self.block_on(self.core.client.acquire(resource_id, mode))
    }

    /// See [`super::Client::release`].
    pub fn release(&self, resource_id: &str, close_subscriptions: bool) -> ClientResult<()> {
        self.block_on(self.core.client.release(resource_id, close_subscriptions))
    }

    /// See [`super::Client::operation`]. Prefer [`Client::with_operation`].
    pub fn operation(&self, resource_id: &str, kind: OperationKind) -> ClientResult<Operation> {
        let inner = self.block_on(self.core.client.operation(resource_id, kind))?;
        Ok(Operation {
            inner: Some(inner),
            client: self.clone(),
        })
    }

    /// Runs `body` inside a component operation: completes it when `body`
    /// succeeds, aborts it when `body` fails (or panics).
    pub fn with_operation<T, E, F>(
        &self,
        resource_id: &str,
        kind: OperationKind,
        body: F,
    ) -> Result<T, E>
    where
        F: FnOnce(&Operation) -> Result<T, E>,
        E: From<ClientError>,
    {
        let operation = self.operation(resource_id, kind)?;
        match body(&operation) {
            Ok(value) => {
                operation.complete()?;
                Ok(value)
            }
            Err(e) => {
                let _ = operation.abort();
                Err(e)
            }
        }
    }

    /// See [`super::Client::current_operation`].
    pub fn current_operation(&self, resource_id: &str) -> Option<String> {
        self.core.client.current_operation(resource_id)
    }

    /// See [`super::Client::call`].
    pub fn call(
        &self,
        resource_id: &str,
        method: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> ClientResult<Value> {
        self.block_on(self.core.client.call(resource_id, method, args, kwargs))
    }

    /// See [`super::Client::boundary_snapshot`].
    pub fn boundary_snapshot(&self, resource_id: &str) -> Option<BoundarySnapshot> {
        self.core.client.boundary_snapshot(resource_id)
    }

    /// See [`super::Client::subscribe`].
    pub fn subscribe(
        &self,
        resource_id: &str,
        fields: Option<&[&str]>,
    ) -> ClientResult<Subscription> {
        let inner = self.block_on(self.core.client.subscribe(resource_id, fields))?;
        Ok(Subscription {
            inner: Some(inner),
            client: self.clone(),
        })
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::Client")
            .field(&self.core.client)
            .finish()
    }
}

/// An open component operation (see [`super::Operation`]); aborted when
/// dropped without [`Operation::complete`].
#[must_use = "an operation is aborted when dropped; call complete()"]
#[derive(Debug)]
pub struct Operation {
    inner: Option<super::Operation>,
    client: Client,
}

impl Operation {
    fn inner(&self) -> &super::Operation {
        match &self.inner {
            Some(op) => op,
            None => unreachable!("the operation is only taken by complete/abort"),
        }
    }

    /// The operation ID.
    pub fn id(&self) -> &str {
        self.inner().id()
    }

    /// The domain it runs on.
    pub fn domain_id(&self) -> &str {
        self.inner().domain_id()
    }

    /// Its kind.
    pub fn kind(&self) -> OperationKind {
        self.inner().kind()
    }

    /// See [`super::Operation::complete`].
    pub fn complete(mut self) -> ClientResult<Vec<Arc<Descriptor>>> {
        match self.inner.take() {
            Some(op) => self.client.block_on(op.complete()),
            None => Ok(Vec::new()),
        }
    }

    /// See [`super::Operation::abort`].
    pub fn abort(mut self) -> ClientResult<()> {
        match self.inner.take() {
            Some(op) => self.client.block_on(op.abort()),
            None => Ok(()),
        }
    }
}

/// A latest-value stream of snapshots (see [`super::Subscription`]). As an
/// iterator it waits without a deadline and ends with the stream.
#[derive(Debug)]
pub struct Subscription {
    inner: Option<super::Subscription>,
    client: Client,
}

impl Subscription {
    fn inner(&self) -> &super::Subscription {
        match &self.inner {
            Some(s) => s,
            None => unreachable!("the subscription is only taken by unsubscribe"),
        }
    }

    /// The subscription ID.
    pub fn id(&self) -> &str {
        self.inner().id()
    }

    /// The observed resource.
    pub fn resource_id(&self) -> &str {
        self.inner().resource_id()
    }

    /// See [`super::Subscription::is_closed`].
    pub fn is_closed(&self) -> bool {
        self.inner().is_closed()
    }

    /// See [`super::Subscription::next`].
    pub fn next(&mut self, timeout: Option<Duration>) -> ClientResult<Option<SnapshotEvent>> {
        match self.inner.as_mut() {
            Some(s) => self.client.core.block_on(s.next(timeout)),
            None => Ok(None),
        }
    }

    /// See [`super::Subscription::unsubscribe`].
    pub fn unsubscribe(mut self) -> ClientResult<()> {
        match self.inner.take() {
            Some(s) => self.client.block_on(s.unsubscribe()),
            None => Ok(()),
        }
    }
}

impl Iterator for Subscription {
    type Item = ClientResult<SnapshotEvent>;

    fn next(&mut self) -> Option<Self::Item> {
        Subscription::next(self, None).transpose()
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

/// A blocking environment proxy (see [`super::EnvProxy`]).
#[derive(Clone)]
pub struct EnvProxy {
    inner: super::EnvProxy,
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

    /// See [`super::EnvProxy::reset`].
    pub fn reset(&self, args: ResetArgs) -> ClientResult<ResetResult> {
        self.client.block_on(self.inner.reset(args))
    }

    /// See [`super::EnvProxy::reload`].
    pub fn reload(&self, args: ResetArgs) -> ClientResult<ResetResult> {
        self.client.block_on(self.inner.reload(args))
    }

    /// See [`super::EnvProxy::step`].
    pub fn step(&self, action: impl Into<Value>) -> ClientResult<StepResult> {
        self.client.block_on(self.inner.step(action))
    }

    /// See [`super::EnvProxy::render`].
    pub fn render(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.render())
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

    /// See [`super::EnvProxy::get_node`].
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

    /// Claims control (env mode).
    pub fn acquire(&self) -> ClientResult<()> {
        self.client.block_on(self.inner.acquire())
    }

    /// Releases control, keeping subscriptions.
    pub fn close(&self) -> ClientResult<()> {
        self.client.block_on(self.inner.close())
    }
}

/// A blocking world proxy (see [`super::WorldProxy`]); implements [`World`].
#[derive(Clone)]
pub struct WorldProxy {
    inner: super::WorldProxy,
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

    /// See [`super::WorldProxy::step`].
    pub fn step(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.step())
    }

    /// See [`super::WorldProxy::reset`].
    pub fn reset(&self, args: &ResetArgs) -> ClientResult<()> {
        self.client.block_on(self.inner.reset(args))
    }

    /// See [`super::WorldProxy::reload`].
    pub fn reload(&self, args: &ResetArgs) -> ClientResult<()> {
        self.client.block_on(self.inner.reload(args))
    }

    /// See [`super::WorldProxy::after_reset`].
    pub fn after_reset(&self, args: &ResetArgs) -> ClientResult<()> {
        self.client.block_on(self.inner.after_reset(args))
    }

    /// See [`super::WorldProxy::after_reload`].
    pub fn after_reload(&self, args: &ResetArgs) -> ClientResult<()> {
        self.client.block_on(self.inner.after_reload(args))
    }

    /// Claims control (components mode).
    pub fn acquire(&self) -> ClientResult<()> {
        self.client.block_on(self.inner.acquire())
    }

    /// Releases control, keeping subscriptions.
    pub fn close(&self) -> ClientResult<()> {
        self.client.block_on(self.inner.close())
    }
}

/// A blocking node proxy (see [`super::NodeProxy`]) holding proxies of its
/// children; implements [`Node<W>`](Node) for every `W`.
#[derive(Clone)]
pub struct NodeProxy {
    inner: super::NodeProxy,
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

    /// The descendant at `keys` (see [`super::NodeProxy::get_node`]).
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

    /// See [`super::NodeProxy::set_next_action`].
    pub fn set_next_action(&self, action: impl Into<Value>) -> ClientResult<()> {
        self.client.block_on(self.inner.set_next_action(action))
    }

    /// See [`super::NodeProxy::pre_environment_step`].
    pub fn pre_environment_step(&self, dt: impl Into<Value>, priority: i64) -> ClientResult<()> {
        self.client
            .block_on(self.inner.pre_environment_step(dt, priority))
    }

    /// See [`super::NodeProxy::post_environment_step`].
    pub fn post_environment_step(&self, dt: impl Into<Value>, priority: i64) -> ClientResult<()> {
        self.client
            .block_on(self.inner.post_environment_step(dt, priority))
    }

    /// See [`super::NodeProxy::reset`].
    pub fn reset(&self, priority: i64, args: &ResetArgs) -> ClientResult<()> {
        self.client.block_on(self.inner.reset(priority, args))
    }

    /// See [`super::NodeProxy::reload`].
    pub fn reload(&self, priority: i64, args: &ResetArgs) -> ClientResult<()> {
        self.client.block_on(self.inner.reload(priority, args))
    }

    /// See [`super::NodeProxy::after_reset`].
    pub fn after_reset(&self, priority: i64, mask: Option<&NdArray>) -> ClientResult<()> {
        self.client.block_on(self.inner.after_reset(priority, mask))
    }

    /// See [`super::NodeProxy::after_reload`].
    pub fn after_reload(&self, priority: i64, mask: Option<&NdArray>) -> ClientResult<()> {
        self.client
            .block_on(self.inner.after_reload(priority, mask))
    }

    /// See [`super::NodeProxy::get_context`] (cache-aware).
    pub fn get_context(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.get_context())
    }

    /// See [`super::NodeProxy::get_observation`] (cache-aware).
    pub fn get_observation(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.get_observation())
    }

    /// See [`super::NodeProxy::get_reward`] (cache-aware).
    pub fn get_reward(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.get_reward())
    }

    /// See [`super::NodeProxy::get_termination`] (cache-aware).
    pub fn get_termination(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.get_termination())
    }

    /// See [`super::NodeProxy::get_truncation`] (cache-aware).
    pub fn get_truncation(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.get_truncation())
    }

    /// See [`super::NodeProxy::get_info`] (cache-aware).
    pub fn get_info(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.get_info())
    }

    /// See [`super::NodeProxy::render`].
    pub fn render(&self) -> ClientResult<Value> {
        self.client.block_on(self.inner.render())
    }

    /// Claims control (components mode).
    pub fn acquire(&self) -> ClientResult<()> {
        self.client.block_on(self.inner.acquire())
    }

    /// Releases control, keeping subscriptions.
    pub fn close(&self) -> ClientResult<()> {
        self.client.block_on(self.inner.close())
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
