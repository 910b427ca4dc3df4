//! The client: connect to a UniEnv remote server (this crate's or the
//! Python reference), drive environments, worlds and nodes through proxies,
//! observe boundaries through subscriptions.
//!
//! The core is async (tokio); [`blocking`] wraps it for plain training loops.
//! Semantics follow the reference client (`unienv_interface.remote.client`):
//!
//! - **Connection.** [`Client::connect`] (WebSocket, binary messages, no
//!   compression, TCP_NODELAY, optional bearer token and extra headers) or
//!   [`Client::over_memory`]. `hello` negotiates the message limit (the
//!   smaller of both wins) and, by default, `discover` loads every
//!   descriptor. One reader task and one writer task serve the connection;
//!   requests carry fresh IDs and are answered through their own channel.
//! - **Failures.** A request timeout or a transport failure closes the
//!   connection, so a late reply can never be taken for a later request. A
//!   mutation whose reply never arrived fails with
//!   [`ClientError::Uncertain`]; nothing is retried. Server errors keep their
//!   code, message and `uncertain` flag ([`ClientError::Remote`]). Unknown
//!   result fields are ignored.
//! - **Proxies.** [`EnvProxy`], [`WorldProxy`] and [`NodeProxy`] read their
//!   attributes and spaces from the latest descriptor, which every response
//!   refreshes; a descriptor is never replaced by one of an older
//!   `(revision, sequence)`, and parsed spaces are kept while their
//!   serialized form is unchanged.
//! - **Control.** The first control call claims the domain; [`Client::acquire`]
//!   claims it explicitly and [`Client::release`] gives it back (keeping
//!   subscriptions unless asked). Component mutations run inside an
//!   [`Operation`] ([`Client::with_operation`] or [`Client::operation`]).
//!   [`blocking::RemoteWorldEnv`] runs the crate's `WorldEnv` composer
//!   client-side over a remote world and its nodes, one operation per
//!   reset, reload and step.
//! - **Boundary snapshot cache.** Completed boundaries (env mutations and
//!   completed operations) bring the captured fields of the domain's
//!   resources; outside operations, node getters are served from them
//!   without a request. See [`Client::boundary_snapshot`] for the rules.
//!
//! Values returned to the caller never alias the cache in a mutable way:
//! [`Value`] trees are cloned, and arrays are immutable reference-counted
//! [`Bytes`](bytes::Bytes) (copy-on-write by construction), so the caller
//! cannot alter what the cache holds, and clones are independent.
//!
//! ```
//! use unienv_remote::client::{Client, ClientConfig, OperationKind};
//! use unienv_remote::host::ResetArgs;
//! use unienv_remote::server::{Server, ServerConfig};
//! use unienv_remote::{fixtures, NdArray};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut builder = Server::builder(ServerConfig::default());
//! fixtures::register(&mut builder)?;
//! let server = builder.start();
//! // Client::connect("ws://127.0.0.1:PORT", ..) works the same way.
//! let client = Client::over_memory(server.connect_memory(), ClientConfig::default()).await?;
//!
//! // Env mode: whole reset/step calls.
//! let env = client.env("counter").await?;
//! env.reset(ResetArgs::with_seed(1)).await?;
//! let step = env.step(NdArray::from_vec(vec![1.0f32, 2.0])).await?;
//! assert_eq!(step.reward.as_f64(), Some(5.0));
//!
//! // Component mode: an explicit operation around node calls.
//! let arm = client.node("arm").await?;
//! client
//!     .with_operation("arm", OperationKind::Reset, async |_op| {
//!         arm.reset(0, &ResetArgs::with_seed(3)).await
//!     })
//!     .await?;
//! // Served from the boundary snapshot cache: no request is sent.
//! let sent = client.requests_sent();
//! let observation = arm.get_observation().await?;
//! assert_eq!(client.requests_sent(), sent);
//! assert_eq!(observation.as_array().map(|a| a.to_f64_vec()), Some(vec![3.0]));
//!
//! client.close().await;
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod blocking;
mod descriptor;
mod error;
mod operation;
mod proxy;
mod remote_env;
mod shared;
mod subscription;
pub mod vector;

pub use crate::protocol::{Mode, OperationKind};
pub use descriptor::{BoundarySnapshot, Descriptor};
pub use error::{ClientError, ClientResult};
pub use operation::Operation;
pub use proxy::{EnvProxy, NodeProxy, Resource, WorldProxy};
pub use subscription::{SnapshotEvent, Subscription};

use crate::codec::{Dict, Value, DEFAULT_MAX_MESSAGE_SIZE, MIN_MAX_MESSAGE_SIZE};
use crate::protocol::{Op, ResourceKind};
use crate::transport::{MemoryTransport, Reader, Writer};
use shared::Shared;
use std::sync::Arc;
use std::time::Duration;
use subscription::SubShared;

/// Client settings. Every field has a documented default.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long a request (and the connection handshake) may take before
    /// the connection is closed (default 30 s; `None` waits forever).
    pub timeout: Option<Duration>,
    /// Largest message in either direction (default 64 MiB); `hello` lowers
    /// it to the server's limit when that is smaller.
    pub max_message_size: usize,
    /// Whether to `discover` every descriptor on connect (default `true`,
    /// as the reference). Without it, descriptors are fetched on first use
    /// of a resource (`describe`).
    pub discover: bool,
    /// Sent as `Authorization: Bearer <token>` on WebSocket connections.
    pub token: Option<String>,
    /// Additional HTTP headers for the WebSocket handshake.
    pub headers: Vec<(String, String)>,
    /// Receives every envelope the server sends, as its raw bytes, before
    /// it is decoded (default none): for saving envelopes that
    /// `unienv-remote inspect` reads.
    pub capture: Option<Capture>,
    // [transport: TLS hook]
    /// Extra trusted CA certificates (a PEM file) for `wss://` URLs, besides
    /// the system's root certificates (default none): for servers whose
    /// certificate a private CA issued, or a self-signed one
    /// (`--ca-file FILE`). Read when connecting.
    pub ca_file: Option<std::path::PathBuf>,
    /// A complete rustls configuration for `wss://` URLs, used instead of the
    /// system roots and [`ClientConfig::ca_file`] (default none).
    pub tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
}

/// A sink for received envelopes (see [`ClientConfig::capture`]).
#[derive(Clone)]
pub struct Capture(Arc<dyn Fn(&bytes::Bytes) + Send + Sync>);

impl Capture {
    /// Calls `sink` with every received envelope, on the connection's reader
    /// task (keep it short).
    pub fn new(sink: impl Fn(&bytes::Bytes) + Send + Sync + 'static) -> Capture {
        Capture(Arc::new(sink))
    }

    pub(crate) fn record(&self, frame: &bytes::Bytes) {
        (self.0)(frame)
    }
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Capture(..)")
    }
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            timeout: Some(Duration::from_secs(30)),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            discover: true,
            token: None,
            headers: Vec::new(),
            capture: None,
            ca_file: None,
            tls: None,
        }
    }
}

impl ClientConfig {
    /// Sets [`ClientConfig::timeout`].
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> ClientConfig {
        self.timeout = timeout;
        self
    }

    /// Sets [`ClientConfig::max_message_size`].
    pub fn with_max_message_size(mut self, bytes: usize) -> ClientConfig {
        self.max_message_size = bytes;
        self
    }

    /// Sets [`ClientConfig::discover`].
    pub fn with_discover(mut self, discover: bool) -> ClientConfig {
        self.discover = discover;
        self
    }

    /// Sets [`ClientConfig::token`].
    pub fn with_token(mut self, token: impl Into<String>) -> ClientConfig {
        self.token = Some(token.into());
        self
    }

    /// Sets [`ClientConfig::ca_file`].
    pub fn with_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> ClientConfig {
        self.ca_file = Some(path.into());
        self
    }

    /// Adds a handshake header.
    pub fn with_header(
        mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> ClientConfig {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What the server said in `hello`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    /// The session ID.
    pub session_id: String,
    /// The negotiated message size limit.
    pub max_message_size: usize,
    /// The server's name (`unienv` for the reference).
    pub server: String,
    /// The server's version (`unknown` when not known).
    pub server_version: String,
    /// Protocol versions the server supports.
    pub protocol_versions: Vec<i64>,
}

struct Inner {
    shared: Arc<Shared>,
    info: ServerInfo,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared
            .close(ClientError::Closed("the client was dropped".into()));
    }
}

/// A connection to a server: a descriptor store, a boundary snapshot cache
/// and one control session. Cheap to clone; the connection closes when the
/// last clone (including those held by proxies, operations and
/// subscriptions) is dropped, or on [`Client::close`].
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    pub(crate) shared: Arc<Shared>,
}

impl Client {
    /// Connects over WebSocket (`ws://HOST:PORT`, or `wss://HOST:PORT` over
    /// TLS: see [`ClientConfig::ca_file`]), says hello and, unless
    /// disabled, discovers every resource. Must run inside a tokio runtime:
    /// the connection's reader and writer tasks are spawned on it.
    pub async fn connect(url: &str, config: ClientConfig) -> ClientResult<Client> {
        check_limit(&config)?;
        let mut headers = config.headers.clone();
        if let Some(token) = &config.token {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
            headers.push(("Authorization".to_string(), format!("Bearer {token}")));
        }
        // [transport: TLS hook] the trust for wss:// URLs.
        let tls = match (&config.tls, url.starts_with("wss://")) {
            (Some(tls), _) => Some(tls.clone()),
            (None, true) => Some(
                crate::transport::tls::client_config(config.ca_file.as_deref())
                    .map_err(|e| ClientError::Connect(e.to_string()))?,
            ),
            (None, false) => None,
        };
        let handshake =
            crate::transport::ws::connect_with(url, &headers, config.max_message_size, tls);
        let connected = match config.timeout {
            Some(limit) => tokio::time::timeout(limit, handshake).await.map_err(|_| {
                ClientError::Connect(format!("handshake timed out after {limit:?}"))
            })?,
            None => handshake.await,
        };
        let (reader, writer) = connected.map_err(|e| ClientError::Connect(e.to_string()))?;
        Client::start(Reader::Ws(reader), Writer::Ws(writer), config).await
    }

    /// Connects through an in-memory transport (for example
    /// [`Server::connect_memory`](crate::server::Server::connect_memory)).
    /// Must run inside a tokio runtime.
    pub async fn over_memory(
        transport: MemoryTransport,
        config: ClientConfig,
    ) -> ClientResult<Client> {
        check_limit(&config)?;
        let (reader, writer) = transport.split();
        Client::start(reader, writer, config).await
    }

    async fn start(reader: Reader, writer: Writer, config: ClientConfig) -> ClientResult<Client> {
        let discover = config.discover;
        let limit = Value::from(config.max_message_size);
        let shared = Shared::start(reader, writer, config);
        let info = match hello(&shared, &limit).await {
            Ok(info) => info,
            Err(e) => {
                shared.close(ClientError::Closed("hello failed".into()));
                shared.join().await;
                return Err(e);
            }
        };
        let client = Client {
            inner: Arc::new(Inner {
                shared: shared.clone(),
                info,
            }),
            shared,
        };
        if discover {
            if let Err(e) = client.discover().await {
                client.close().await;
                return Err(e);
            }
        }
        Ok(client)
    }

    /// What the server said in `hello`.
    pub fn server_info(&self) -> &ServerInfo {
        &self.inner.info
    }

    /// The session ID.
    pub fn session_id(&self) -> &str {
        &self.inner.info.session_id
    }

    /// The negotiated message size limit.
    pub fn max_message_size(&self) -> usize {
        self.shared.max_message_size()
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// Requests sent on this connection so far (hello included; requests
    /// sent without waiting, such as an unsubscribe from a destructor, too).
    pub fn requests_sent(&self) -> u64 {
        self.shared.requests_sent()
    }

    /// Closes the connection: pending requests fail, subscriptions end, the
    /// cache is cleared, and the server releases this session's control and
    /// subscriptions. Waits (briefly) for the connection's tasks to stop.
    pub async fn close(&self) {
        self.shared
            .close(ClientError::Closed("the client was closed".into()));
        self.shared.join().await;
    }

    /// Fetches every descriptor (`discover`) and refreshes the store.
    pub async fn discover(&self) -> ClientResult<Vec<Arc<Descriptor>>> {
        let descriptors = self.shared.request(Op::Discover, None, &[], false).await?;
        self.shared.apply_descriptors(descriptors, true)
    }

    /// Fetches the descriptors of a resource's domain (`describe`) and
    /// returns the resource's.
    pub async fn describe(&self, resource_id: &str) -> ClientResult<Arc<Descriptor>> {
        let descriptors = self
            .shared
            .request(Op::Describe, Some(resource_id), &[], false)
            .await?;
        self.shared.apply_descriptors(descriptors, true)?;
        self.descriptor(resource_id)
            .ok_or_else(|| ClientError::Protocol(format!("describe did not return {resource_id}")))
    }

    /// The latest descriptor of a resource, if known (no request).
    pub fn descriptor(&self, resource_id: &str) -> Option<Arc<Descriptor>> {
        self.shared
            .state
            .lock()
            .descriptors
            .get(resource_id)
            .cloned()
    }

    /// Every known descriptor, sorted by ID (no request).
    pub fn descriptors(&self) -> Vec<Arc<Descriptor>> {
        let mut all: Vec<_> = self
            .shared
            .state
            .lock()
            .descriptors
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.id().cmp(b.id()));
        all
    }

    async fn ensure_descriptor(&self, resource_id: &str) -> ClientResult<Arc<Descriptor>> {
        match self.descriptor(resource_id) {
            Some(d) => Ok(d),
            None => self.describe(resource_id).await,
        }
    }

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

    /// Claims control of the resource's domain in `mode` (default: env mode
    /// for envs, components mode otherwise). Drops the domain's cached fields.
    pub async fn acquire(&self, resource_id: &str, mode: Option<Mode>) -> ClientResult<()> {
        let descriptor = self.ensure_descriptor(resource_id).await?;
        let mode = mode.unwrap_or(match descriptor.kind() {
            ResourceKind::Env => Mode::Env,
            _ => Mode::Components,
        });
        let mode = Value::from(mode.as_str());
        self.shared
            .request(Op::Acquire, Some(resource_id), &[("mode", &mode)], true)
            .await
            .map(drop)
    }

    /// Releases control of the resource's domain (an unfinished operation
    /// faults it). Subscriptions are kept unless `close_subscriptions`, which
    /// first unsubscribes this client's subscriptions in that domain. Drops
    /// the domain's cached fields. Does nothing once the connection is closed.
    pub async fn release(&self, resource_id: &str, close_subscriptions: bool) -> ClientResult<()> {
        if close_subscriptions {
            let subscriptions: Vec<Arc<SubShared>> = {
                let st = self.shared.state.lock();
                let domain = st.domain_of(resource_id);
                st.subscriptions
                    .values()
                    .filter(|s| st.domain_of(&s.resource_id) == domain)
                    .cloned()
                    .collect()
            };
            for s in subscriptions {
                if s.finish(None) {
                    self.unsubscribe_remote(&s).await?;
                }
            }
        }
        if self.shared.is_closed() {
            return Ok(());
        }
        self.shared
            .request(Op::Release, Some(resource_id), &[], true)
            .await
            .map(drop)
    }

    /// Begins a component operation on the resource's domain (the domain of
    /// a world or node). Nested operations on one domain are refused. Prefer
    /// [`Client::with_operation`].
    pub async fn operation(
        &self,
        resource_id: &str,
        kind: OperationKind,
    ) -> ClientResult<Operation> {
        let descriptor = self.ensure_descriptor(resource_id).await?;
        let domain: Arc<str> = Arc::from(descriptor.domain_id());
        let id: Arc<str> = Arc::from(self.shared.fresh_id());
        {
            let mut st = self.shared.state.lock();
            if st.operations.contains_key(&*domain) {
                return Err(ClientError::InvalidUse(format!(
                    "nested component operations are not supported: {domain} already has an open operation"
                )));
            }
            st.operations.insert(domain.to_string(), id.clone());
        }
        let kind_value = Value::from(kind.as_str());
        let id_value = Value::from(&*id);
        let begun = self
            .shared
            .request(
                Op::Begin,
                Some(&domain),
                &[("kind", &kind_value), ("operation_id", &id_value)],
                true,
            )
            .await;
        match begun {
            Ok(_) => Ok(Operation::new(self.clone(), domain, id, kind)),
            Err(e) => {
                let mut st = self.shared.state.lock();
                if st.operations.get(&*domain).is_some_and(|o| *o == id) {
                    st.operations.remove(&*domain);
                }
                Err(e)
            }
        }
    }

    /// Runs `body` inside a component operation: begins it, completes it
    /// when `body` succeeds (a completion failure is returned), aborts it
    /// when `body` fails or is cancelled. The operation is passed to `body`
    /// for its ID; calls made during it find it through the client.
    pub async fn with_operation<T, E, F>(
        &self,
        resource_id: &str,
        kind: OperationKind,
        body: F,
    ) -> Result<T, E>
    where
        F: AsyncFnOnce(&Operation) -> Result<T, E>,
        E: From<ClientError>,
    {
        let operation = self.operation(resource_id, kind).await?;
        match body(&operation).await {
            Ok(value) => {
                operation.complete().await?;
                Ok(value)
            }
            Err(e) => {
                let _ = operation.abort().await;
                Err(e)
            }
        }
    }

    /// The ID of the open operation on the resource's domain, if any.
    pub fn current_operation(&self, resource_id: &str) -> Option<String> {
        let st = self.shared.state.lock();
        st.operations
            .get(st.domain_of(resource_id))
            .map(|id| id.to_string())
    }

    /// Calls a method by name, always live (`call`). Env calls get a fresh
    /// operation ID; world and node calls carry the domain's open operation,
    /// if any. The response's descriptors (and boundary snapshots) refresh
    /// the client before the value is returned.
    pub async fn call(
        &self,
        resource_id: &str,
        method: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> ClientResult<Value> {
        let descriptor = self.ensure_descriptor(resource_id).await?;
        let kind = descriptor.kind();
        let mutation = kind.is_mutation(method).unwrap_or(false);
        let operation_id = if kind == ResourceKind::Env {
            Value::from(self.shared.fresh_id())
        } else {
            self.shared
                .state
                .lock()
                .operations
                .get(descriptor.domain_id())
                .map_or(Value::Null, |id| Value::from(&**id))
        };
        let method = Value::from(method);
        let args = Value::Tuple(args);
        let kwargs = Value::Dict(kwargs);
        let result = self
            .shared
            .request(
                Op::Call,
                Some(resource_id),
                &[
                    ("method", &method),
                    ("args", &args),
                    ("kwargs", &kwargs),
                    ("operation_id", &operation_id),
                ],
                mutation,
            )
            .await?;
        let Value::Dict(mut result) = result else {
            return Err(ClientError::Protocol(format!(
                "a call result must be a dict, got {}",
                result.type_name()
            )));
        };
        if let Some(descriptors) = result.remove("descriptors") {
            self.shared.apply_descriptors(descriptors, true)?;
        }
        Ok(result.remove("value").unwrap_or_default())
    }

    /// A node getter: from the boundary cache when allowed, live otherwise.
    pub(crate) async fn read_field(
        &self,
        resource_id: &str,
        field: &str,
        method: &str,
    ) -> ClientResult<Value> {
        if let Some(value) = self.shared.cached_field(resource_id, field)? {
            return Ok(value);
        }
        self.call(resource_id, method, Vec::new(), Dict::new())
            .await
    }

    /// The cached boundary snapshot of a resource, if any (a copy).
    ///
    /// The cache is keyed by resource and boundary `(sequence, revision)`.
    /// It is filled only from this controller's responses: env mutation
    /// results and completed operations. It is dropped for a domain before
    /// any mutation, `begin`, `abort`, `acquire` or `release` is sent, when
    /// a request on it fails, and when a newer revision or sequence of the
    /// domain is seen (in a response or an observer event); a new boundary
    /// replaces the domain's fields, never merges with them; an older
    /// version never restores them; closing the session clears everything.
    /// Node getters use it only outside operations on the domain; `render`
    /// and explicit [`Client::call`]s never use it.
    pub fn boundary_snapshot(&self, resource_id: &str) -> Option<BoundarySnapshot> {
        self.shared.state.lock().snapshots.get(resource_id).cloned()
    }

    /// Subscribes to a resource's boundary snapshots (`fields`: `None` for
    /// the server's default selection). Observers need no control.
    pub async fn subscribe(
        &self,
        resource_id: &str,
        fields: Option<&[&str]>,
    ) -> ClientResult<Subscription> {
        self.ensure_descriptor(resource_id).await?;
        let id: Arc<str> = Arc::from(self.shared.fresh_id());
        let shared = SubShared::new(id.clone(), Arc::from(resource_id));
        self.shared
            .state
            .lock()
            .subscriptions
            .insert(id.clone(), shared.clone());
        let id_value = Value::from(&*id);
        let fields = fields.map(|f| Value::list(f.iter().copied()));
        let mut params: Vec<(&str, &Value)> = vec![("subscription_id", &id_value)];
        if let Some(f) = &fields {
            params.push(("fields", f));
        }
        match self
            .shared
            .request(Op::Subscribe, Some(resource_id), &params, false)
            .await
        {
            Ok(_) => Ok(Subscription::new(self.clone(), shared)),
            Err(e) => {
                self.shared.state.lock().subscriptions.remove(&id);
                shared.finish(None);
                Err(e)
            }
        }
    }

    pub(crate) async fn unsubscribe_remote(&self, subscription: &SubShared) -> ClientResult<()> {
        self.shared
            .state
            .lock()
            .subscriptions
            .remove(&subscription.id);
        if self.shared.is_closed() {
            return Ok(());
        }
        let id = Value::from(&*subscription.id);
        self.shared
            .request(
                Op::Unsubscribe,
                Some(&subscription.resource_id),
                &[("subscription_id", &id)],
                false,
            )
            .await
            .map(drop)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("session_id", &self.session_id())
            .field("closed", &self.is_closed())
            .finish()
    }
}

async fn hello(shared: &Arc<Shared>, limit: &Value) -> ClientResult<ServerInfo> {
    let result = shared
        .request(Op::Hello, None, &[("max_message_size", limit)], false)
        .await?;
    let text = |key: &str| result.get(key).and_then(Value::as_str).map(str::to_string);
    let session_id = text("session_id")
        .ok_or_else(|| ClientError::Protocol("hello without a session_id".into()))?;
    let max_message_size = result
        .get("max_message_size")
        .and_then(Value::as_u64)
        .and_then(|m| usize::try_from(m).ok())
        .filter(|m| *m >= MIN_MAX_MESSAGE_SIZE)
        .ok_or_else(|| ClientError::Protocol("hello without a valid max_message_size".into()))?;
    shared.set_session(&session_id, max_message_size);
    Ok(ServerInfo {
        session_id,
        max_message_size: shared.max_message_size(),
        server: text("server").unwrap_or_default(),
        server_version: text("server_version").unwrap_or_default(),
        protocol_versions: result
            .get("protocol_versions")
            .and_then(Value::as_seq)
            .map(|v| v.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default(),
    })
}

fn check_limit(config: &ClientConfig) -> ClientResult<()> {
    if config.max_message_size < MIN_MAX_MESSAGE_SIZE {
        return Err(ClientError::InvalidUse(format!(
            "max_message_size must be at least {MIN_MAX_MESSAGE_SIZE} bytes"
        )));
    }
    Ok(())
}

fn wrong_kind(id: &str, kind: ResourceKind, wanted: &str) -> ClientError {
    ClientError::InvalidUse(format!(
        "resource {id} is a {}, not {wanted}",
        kind.as_str()
    ))
}
