//! The server: a registry of hosted simulators grouped into execution
//! domains (one OS thread each), sessions over WebSocket or in-memory
//! transports, and snapshot publication.
//!
//! ```no_run
//! use unienv_remote::server::{Hosted, Server, ServerConfig};
//! # use unienv_remote::host::*; use unienv_remote::*;
//! # struct MyEnv;
//! # impl Env for MyEnv {
//! #   fn reset(&mut self, _: ResetArgs) -> HostResult<ResetResult> { Ok(ResetResult::default()) }
//! #   fn step(&mut self, _: Value) -> HostResult<StepResult> { Ok(StepResult::default()) }
//! #   fn action_space(&self) -> Option<Space> { None }
//! #   fn observation_space(&self) -> Option<Space> { None }
//! # }
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut builder = Server::builder(ServerConfig::default());
//! builder.register_env("my_env", MyEnv)?;
//! let server = builder.start();
//! let listener = server.listen("127.0.0.1:0").await?;
//! println!("serving on ws://{}", listener.local_addr());
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub(crate) mod budget;
mod domain;
mod hosted;
mod listener;
mod names;
mod session;
mod snapshot;

pub use hosted::{ForeignHost, ForeignResource, Hosted};
pub use listener::Listener;

use crate::host::{Env, HostResult, Node};
use crate::transport::MemoryTransport;
use domain::{Domain, DomainSender, Job};
use parking_lot::{Mutex, RwLock};
use session::SessionShared;
use std::collections::HashMap;
use std::sync::{mpsc, Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// The `server` member of the hello result.
pub const SERVER_NAME: &str = "unienv-remote";

/// Server settings. Every limit has a documented default.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest message in either direction (default 64 MiB). A client may
    /// lower it for its session in `hello`.
    pub max_message_size: usize,
    /// Factory-registered domains with no activity, subscription or
    /// controller for this long are disposed (default 60 s; `None` disables).
    pub idle_timeout: Option<Duration>,
    /// Most simultaneous connections (default 1024); more are refused.
    pub max_connections: usize,
    /// When set, WebSocket clients must send `Authorization: Bearer <token>`.
    /// An empty (or blank) token is refused by [`Server::listen`].
    pub token: Option<String>,
    /// Browser origins allowed besides loopback ones (`*` allows any).
    pub allowed_origins: Vec<String>,
    /// `Host` header values allowed besides loopback names and IP literals.
    pub allowed_hosts: Vec<String>,
    /// Time allowed for a WebSocket handshake (default 10 s).
    pub handshake_timeout: Duration,
    /// Largest handshake request, headers included (default 16 KiB).
    pub max_handshake_bytes: usize,
    /// Requests a session may have queued at domains at once (default 64).
    pub max_in_flight: usize,
    /// Subscriptions a session may hold (default 1024).
    pub max_subscriptions_per_session: usize,
    /// Whether env-mutation responses also carry the mutated env's own
    /// controller snapshot (default `false`). Its data would repeat the call's
    /// value — for an image observation, doubling the response — and no
    /// protocol read is served from it; node and world snapshots are always
    /// sent. `true` reproduces the reference byte for byte.
    pub env_boundary_snapshots: bool,
    /// How long shutdown waits for each domain thread (default 10 s); a
    /// simulator hung past it is left behind rather than blocking forever.
    pub shutdown_timeout: Duration,
    /// Most bytes one connection may hold at once (default 256 MiB): the
    /// message it is sending, its requests waiting at domains (their frames
    /// and decoded trees) and the responses queued for it. Beyond it the
    /// connection is closed (1008).
    pub max_connection_bytes: usize,
    /// Most bytes all connections together may hold beyond their first MiB
    /// each (default 8 GiB; 1 GiB on 32-bit targets). A connection that
    /// needs more while it is exhausted is closed (1013, try again later).
    pub max_server_bytes: usize,
    /// Largest decoded value tree of one message, attachments excluded
    /// (default 256 MiB, counted by node); a larger one is an invalid
    /// envelope.
    pub max_decoded_bytes: usize,
    /// Decodes of large messages (over 64 KiB) running at once, on tokio's
    /// blocking threads (default: half the cores, 1 to 8, so that at
    /// least half the cores stay with the async workers that serve every
    /// connection's I/O); others wait their turn, first come first served.
    pub max_parallel_decodes: usize,
    /// WebSocket handshakes in progress at once (default 256); a new
    /// connection beyond it evicts the oldest pending handshake.
    pub max_pending_handshakes: usize,
    /// Time allowed between the upgrade and `hello` (default 10 s).
    pub hello_timeout: Duration,
    /// A session that holds nothing (no request ever routed to a domain, so
    /// no control; no subscription) and sends nothing, not even a ping, for
    /// this long is closed (default 300 s; `None` disables).
    pub idle_session_timeout: Option<Duration>,
    /// Time a WebSocket message may take to arrive once its first byte has
    /// (default 60 s).
    pub message_timeout: Duration,
    /// Whether actions (`step` of a hosted Rust env, `set_next_action` of a
    /// hosted Rust node) are checked against the declared action space
    /// before the simulator sees them: dtype kind, shape, bounds and
    /// finiteness (see [`Space::check`](crate::host::Space::check)). A bad
    /// action is answered with a certain `invalid_request` naming the
    /// element and the bound, and the simulator stays usable. Default
    /// `false`, as the reference (which passes any action through);
    /// `unienv-remote serve` turns it on. Foreign (Python) hosts are never
    /// checked.
    pub validate_actions: bool,
    /// Hosted calls taking longer than this are logged at `warn` level with
    /// `tracing` (default 1 s; `None` disables).
    pub slow_call: Option<Duration>,
    // [transport: TLS hook]
    /// TLS for every WebSocket connection (`wss://`; default none: plain
    /// `ws://`). Build it with
    /// [`ServerTls::from_pem_files`](crate::transport::ServerTls::from_pem_files).
    /// The handshake timeout covers the TLS handshake too.
    pub tls: Option<crate::transport::ServerTls>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_message_size: crate::codec::DEFAULT_MAX_MESSAGE_SIZE,
            idle_timeout: Some(Duration::from_secs(60)),
            max_connections: 1024,
            token: None,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            handshake_timeout: Duration::from_secs(10),
            max_handshake_bytes: 16 * 1024,
            max_in_flight: 64,
            max_subscriptions_per_session: 1024,
            env_boundary_snapshots: false,
            shutdown_timeout: Duration::from_secs(10),
            max_connection_bytes: 256 << 20,
            max_server_bytes: if usize::BITS >= 64 {
                (8u64 << 30) as usize
            } else {
                1 << 30
            },
            max_decoded_bytes: 256 << 20,
            max_parallel_decodes: std::thread::available_parallelism()
                .map_or(1, |n| (n.get() / 2).clamp(1, 8)),
            max_pending_handshakes: 256,
            hello_timeout: Duration::from_secs(10),
            idle_session_timeout: Some(Duration::from_secs(300)),
            message_timeout: Duration::from_secs(60),
            validate_actions: false,
            slow_call: Some(Duration::from_secs(1)),
            tls: None,
        }
    }
}

impl ServerConfig {
    /// The most memory the server's connections can hold at once under
    /// this configuration, whatever the peers do (SPEC section 11), in
    /// bytes:
    ///
    /// `max_connections × (1 MiB allowance + 160 KiB fixed buffers)`
    /// `+ max_server_bytes` (frames, decoded trees, queued and in-flight
    /// responses beyond the allowances)
    /// `+ max_parallel_decodes × max_decoded_bytes` (trees being built,
    /// charged once built)
    /// `+ max_connections × max_subscriptions_per_session × 1 KiB`
    /// (subscription records and their IDs, at most 256 bytes)
    /// `+ max_pending_handshakes × max_handshake_bytes`.
    ///
    /// Not included: the hosted simulators' own memory, in-memory
    /// connections (not capped by `max_connections`), and the kernel's socket
    /// buffers (bounded by the OS, e.g. Linux's `net.ipv4.tcp_mem`).
    pub fn worst_case_memory_bytes(&self) -> u64 {
        let n = self.max_connections as u64;
        let per_connection = budget::ACCOUNT_ALLOWANCE as u64 + FIXED_CONNECTION_BYTES;
        n.saturating_mul(per_connection)
            .saturating_add(self.max_server_bytes as u64)
            .saturating_add(
                (self.max_parallel_decodes.max(1) as u64)
                    .saturating_mul(self.max_decoded_bytes as u64),
            )
            .saturating_add(
                n.saturating_mul(self.max_subscriptions_per_session as u64)
                    .saturating_mul(SUBSCRIPTION_BYTES),
            )
            .saturating_add(
                (self.max_pending_handshakes as u64)
                    .saturating_mul(self.max_handshake_bytes as u64),
            )
    }
}

/// Per connection, uncharged: the read buffer's spare room (8 KiB), the
/// writer's gathering buffer (64 KiB and one small frame), control frames
/// held back (4 KiB), the tasks and session records.
const FIXED_CONNECTION_BYTES: u64 = 160 << 10;

/// One subscription: its record at the domain and the session, its ID
/// (at most 256 bytes) twice, and its pending-snapshot slot.
const SUBSCRIPTION_BYTES: u64 = 1 << 10;

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The ID is empty, too long or holds control characters.
    #[error("invalid resource ID {0:?}: IDs are non-empty, at most 1024 bytes, without control characters")]
    InvalidId(String),
    /// The ID (or one of the IDs the object exports) is taken.
    #[error("resource ID already registered: {0}")]
    Taken(String),
    /// The object could not be built or inspected.
    #[error("registration failed: {0}")]
    Failed(String),
}

/// Collects registrations, then starts the server.
pub struct ServerBuilder {
    core: Arc<Core>,
    domains: Vec<(DomainSender, std::thread::JoinHandle<()>)>,
    factory_roots: Vec<(String, usize)>,
    roots: Vec<String>,
}

/// What domain threads share: the configuration and the registry.
pub(crate) struct Core {
    pub config: ServerConfig,
    /// Resource ID → domain index. Grows when factories first instantiate;
    /// entries stay across eviction so requests still route.
    pub registry: RwLock<HashMap<String, usize>>,
}

/// State shared by sessions and listeners.
pub(crate) struct ServerShared {
    pub core: Arc<Core>,
    /// The domain senders, by index.
    pub domains: Vec<DomainSender>,
    /// Factory root IDs (for routing IDs that appear only once built).
    pub factory_roots: Vec<(String, usize)>,
    pub sessions: Mutex<HashMap<Arc<str>, Weak<SessionShared>>>,
    pub shutdown: watch::Sender<bool>,
    pub connections: Arc<tokio::sync::Semaphore>,
    /// Byte budgets, the decode pool, pending handshakes.
    pub guards: Arc<budget::Guards>,
}

impl ServerShared {
    /// The `not_found` message of an unknown resource ID: what was asked,
    /// the closest known ID and the known ones.
    pub(crate) fn unknown_resource(&self, resource_id: &str) -> String {
        let registry = self.core.registry.read();
        let mut ids: Vec<&str> = registry.keys().map(String::as_str).collect();
        for (root, _) in &self.factory_roots {
            if !registry.contains_key(root) {
                ids.push(root);
            }
        }
        ids.sort_unstable();
        unknown_name("resource ID", resource_id, &ids)
    }

    /// The domain serving a resource ID.
    pub(crate) fn route(&self, resource_id: &str) -> Option<usize> {
        if let Some(&d) = self.core.registry.read().get(resource_id) {
            return Some(d);
        }
        self.factory_roots
            .iter()
            .filter(|(root, _)| {
                resource_id.len() > root.len() + 1
                    && resource_id.starts_with(root.as_str())
                    && resource_id.as_bytes()[root.len()] == b'/'
            })
            .max_by_key(|(root, _)| root.len())
            .map(|(_, d)| *d)
    }
}

/// `Unknown resource ID 'x'; did you mean 'y'? Valid: 'a', 'b'`.
pub(crate) fn unknown_name(what: &str, asked: &str, valid: &[&str]) -> String {
    let shown: String = asked.chars().take(200).collect();
    format!("Unknown {what} '{shown}'{}", valid_list(asked, valid))
}

/// `; did you mean 'y'? Valid: 'a', 'b'` (at most 20 listed), or nothing
/// when nothing is valid.
pub(crate) fn valid_list(asked: &str, valid: &[&str]) -> String {
    if valid.is_empty() {
        return String::new();
    }
    let closest = valid
        .iter()
        .map(|v| (edit_distance(asked, v), *v))
        .filter(|(d, v)| *d <= (v.chars().count().max(asked.chars().count()) / 3).max(2))
        .min();
    let listed: Vec<String> = valid.iter().take(20).map(|v| format!("'{v}'")).collect();
    let more = if valid.len() > 20 {
        format!(" and {} more", valid.len() - 20)
    } else {
        String::new()
    };
    match closest {
        Some((_, v)) => format!("; did you mean '{v}'? Valid: {}{more}", listed.join(", ")),
        None => format!("; valid: {}{more}", listed.join(", ")),
    }
}

/// Levenshtein distance over chars (short names only).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().take(256).collect();
    let b: Vec<char> = b.chars().take(256).collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn validate_id(id: &str) -> Result<(), RegisterError> {
    if id.is_empty() || id.len() > 1024 || id.chars().any(char::is_control) {
        return Err(RegisterError::InvalidId(id.chars().take(64).collect()));
    }
    Ok(())
}

impl ServerBuilder {
    fn new(config: ServerConfig) -> ServerBuilder {
        ServerBuilder {
            core: Arc::new(Core {
                config,
                registry: RwLock::new(HashMap::new()),
            }),
            domains: Vec::new(),
            factory_roots: Vec::new(),
            roots: Vec::new(),
        }
    }

    /// Registers an env (a plain env, or a `WorldEnv` whose world and nodes
    /// are exported too). The instance moves to its domain's thread.
    pub fn register_env(
        &mut self,
        id: &str,
        env: impl Env + Send,
    ) -> Result<String, RegisterError> {
        self.register_with(id, move || Ok(Hosted::env(env)))
    }

    /// Registers a detached node tree (its own domain, components mode only).
    pub fn register_node(
        &mut self,
        id: &str,
        node: impl Node<()> + Send,
    ) -> Result<String, RegisterError> {
        self.register_with(id, move || Ok(Hosted::detached(node)))
    }

    /// Registers a bare world (kind `world`, no nodes), driven in
    /// components mode by a remote coordinator.
    pub fn register_world(
        &mut self,
        id: &str,
        world: impl crate::host::World + Send,
    ) -> Result<String, RegisterError> {
        self.register_with(id, move || Ok(Hosted::world(world)))
    }

    /// Registers a node attached to a world: the node as `id` (children as
    /// `id/<child>`) and its world as `id/world`, one domain.
    pub fn register_attached<W: crate::host::World + Send>(
        &mut self,
        id: &str,
        world: W,
        node: Box<dyn Node<W> + Send>,
    ) -> Result<String, RegisterError> {
        self.register_with(id, move || {
            let node: Box<dyn Node<W>> = node;
            Ok(Hosted::attached(world, node))
        })
    }

    /// Registers an object built by `build` on the domain's own thread, now;
    /// the object need not be `Send` (GPU contexts, foreign handles). It is
    /// never evicted. A build error is returned as [`RegisterError::Failed`].
    pub fn register_with<F>(&mut self, id: &str, build: F) -> Result<String, RegisterError>
    where
        F: FnOnce() -> HostResult<Hosted> + Send + 'static,
    {
        let mut build = Some(build);
        let factory = move || -> HostResult<Hosted> {
            match build.take() {
                Some(b) => b(),
                None => Err(crate::host::HostError::new("the object was already built")),
            }
        };
        self.spawn(id, Box::new(factory), false)
    }

    /// Registers a lazy factory: it runs on the domain's thread at the first
    /// request that needs the object (never at hello), again after idle
    /// eviction, and after a failure on a later request.
    pub fn register_factory<F>(&mut self, id: &str, factory: F) -> Result<String, RegisterError>
    where
        F: FnMut() -> HostResult<Hosted> + Send + 'static,
    {
        self.spawn(id, Box::new(factory), true)
    }

    fn spawn(
        &mut self,
        id: &str,
        factory: domain::Factory,
        lazy: bool,
    ) -> Result<String, RegisterError> {
        validate_id(id)?;
        let taken = self.core.registry.read().contains_key(id)
            || self.factory_roots.iter().any(|(r, _)| r == id);
        if taken {
            return Err(RegisterError::Taken(id.to_string()));
        }
        let index = self.domains.len();
        let (tx, rx) = mpsc::channel();
        let sender = DomainSender(tx);
        let (core, root, own_sender) = (self.core.clone(), id.to_string(), sender.clone());
        // The domain is built on its own thread: what it hosts need not be Send.
        let thread = std::thread::Builder::new()
            .name(format!("unienv-domain-{index}"))
            .spawn(move || Domain::new(index, root, core, own_sender, factory, lazy).run(rx))
            .map_err(|e| RegisterError::Failed(e.to_string()))?;
        if lazy {
            self.core.registry.write().insert(id.to_string(), index);
            self.factory_roots.push((id.to_string(), index));
        } else {
            let (reply_tx, reply_rx) = mpsc::channel();
            sender.send(domain::Job::Instantiate { reply: reply_tx });
            let outcome = reply_rx
                .recv()
                .map_err(|_| RegisterError::Failed("the domain thread stopped".into()))
                .and_then(|r| {
                    r.map_err(|e| {
                        if let Some(rest) =
                            e.message.strip_prefix("Resource ID already registered: ")
                        {
                            RegisterError::Taken(rest.to_string())
                        } else {
                            RegisterError::Failed(e.message)
                        }
                    })
                });
            if let Err(e) = outcome {
                sender.send(Job::Shutdown);
                let _ = thread.join();
                return Err(e);
            }
        }
        self.domains.push((sender, thread));
        self.roots.push(id.to_string());
        Ok(id.to_string())
    }

    /// Freezes the registry and returns the running server. Domain threads
    /// are already running; sessions need a tokio runtime.
    pub fn start(self) -> Server {
        let ServerBuilder {
            core,
            domains,
            factory_roots,
            roots,
        } = self;
        let (senders, threads): (Vec<_>, Vec<_>) = domains.into_iter().unzip();
        let (shutdown, _) = watch::channel(false);
        let connections = Arc::new(tokio::sync::Semaphore::new(core.config.max_connections));
        let guards = budget::Guards::new(&core.config);
        let shared = Arc::new(ServerShared {
            guards,
            core,
            domains: senders,
            factory_roots,
            sessions: Mutex::new(HashMap::new()),
            shutdown,
            connections,
        });
        Server {
            inner: Arc::new(ServerInner {
                shared,
                threads: Mutex::new(threads),
                roots,
            }),
        }
    }
}

struct ServerInner {
    shared: Arc<ServerShared>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    roots: Vec<String>,
}

/// A running server: cheap to clone; serves WebSocket listeners and
/// in-memory connections until [`Server::shutdown`].
#[derive(Clone)]
pub struct Server {
    inner: Arc<ServerInner>,
}

impl Server {
    /// Starts collecting registrations.
    pub fn builder(config: ServerConfig) -> ServerBuilder {
        ServerBuilder::new(config)
    }

    /// The registered root IDs, in registration order.
    pub fn roots(&self) -> &[String] {
        &self.inner.roots
    }

    /// Whether `id` is a factory registration (built on first use).
    pub fn is_lazy(&self, id: &str) -> bool {
        self.inner.shared.factory_roots.iter().any(|(r, _)| r == id)
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.inner.shared.core.config
    }

    /// Starts a WebSocket listener on `addr` (e.g. `127.0.0.1:0`).
    pub async fn listen(&self, addr: impl tokio::net::ToSocketAddrs) -> std::io::Result<Listener> {
        listener::listen(self.inner.shared.clone(), addr).await
    }

    /// Connects an in-memory client. Must be called inside a tokio runtime.
    pub fn connect_memory(&self) -> MemoryTransport {
        let (client, server) = MemoryTransport::pair();
        let shared = self.inner.shared.clone();
        let (reader, writer) = server.split();
        tokio::spawn(async move {
            session::run(shared, reader, writer).await;
        });
        client
    }

    /// Number of connected sessions.
    pub fn session_count(&self) -> usize {
        self.inner.shared.sessions.lock().len()
    }

    /// Bytes that connections hold beyond their free first MiB each, drawn
    /// from [`ServerConfig::max_server_bytes`] (for monitoring and tests).
    pub fn pooled_bytes(&self) -> usize {
        self.inner.shared.guards.pool.used()
    }

    /// Stops listeners, closes every session, disposes every instantiated
    /// domain on its own thread (each close hook once) and joins the threads
    /// (waiting at most `shutdown_timeout` for each).
    pub async fn shutdown(&self) {
        self.inner.shared.shutdown.send_replace(true);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while self.session_count() > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let threads: Vec<_> = std::mem::take(&mut *self.inner.threads.lock());
        let senders = self.inner.shared.domains.clone();
        let timeout = self.inner.shared.core.config.shutdown_timeout;
        let _ = tokio::task::spawn_blocking(move || {
            for s in &senders {
                s.send(Job::Shutdown);
            }
            for t in threads {
                join_with_timeout(t, timeout);
            }
        })
        .await;
    }
}

fn join_with_timeout(handle: std::thread::JoinHandle<()>, timeout: Duration) {
    let deadline = std::time::Instant::now() + timeout;
    while !handle.is_finished() {
        if std::time::Instant::now() >= deadline {
            eprintln!(
                "unienv-remote: domain thread {:?} did not stop within {timeout:?}; leaving it",
                handle.thread().name()
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = handle.join();
}

/// 128 random bits as 32 lowercase hex digits (session IDs).
pub(crate) fn random_hex() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut out = String::with_capacity(32);
    for half in 0..2u64 {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u64(half);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}
