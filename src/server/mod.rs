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

mod boundary;
pub(crate) mod budget;
mod call;
mod config;
mod control;
mod descriptors;
mod domain;
mod hosted;
mod instance;
mod jobs;
mod listener;
mod names;
mod outbound;
mod session;
mod snapshot;

pub use config::{ConfigError, ServerConfig};
pub use hosted::{ForeignHost, ForeignResource, Hosted};
pub use listener::Listener;

use crate::host::{Env, HostResult, Node};
use crate::transport::MemoryTransport;
use domain::Domain;
use jobs::{DomainSender, InstantiateError, Job};
use outbound::SessionShared;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::{mpsc, Arc, Weak};
use tokio::sync::watch;

/// The `server` member of the hello result.
pub const SERVER_NAME: &str = "unienv-remote";

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
    domains: Vec<(DomainSender, DomainThread)>,
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
    /// Signalled when the last session ends (shutdown waits on it).
    pub sessions_gone: tokio::sync::Notify,
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
        factory: jobs::Factory,
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
        let (core, root) = (self.core.clone(), id.to_string());
        // The domain is built on its own thread: what it hosts need not be Send.
        let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
        let handle = std::thread::Builder::new()
            .name(format!("unienv-domain-{index}"))
            .spawn(move || {
                // Dropped when the thread ends, however it ends: shutdown
                // waits on it instead of polling the thread.
                let _done = done_tx;
                Domain::new(index, root, core, factory, lazy).run(rx)
            })
            .map_err(|e| RegisterError::Failed(e.to_string()))?;
        let thread = DomainThread { handle, done };
        if lazy {
            self.core.registry.write().insert(id.to_string(), index);
            self.factory_roots.push((id.to_string(), index));
        } else {
            let (reply_tx, reply_rx) = mpsc::channel();
            sender.send(Job::Instantiate { reply: reply_tx });
            let outcome = reply_rx
                .recv()
                .map_err(|_| RegisterError::Failed("the domain thread stopped".into()))
                .and_then(|r| {
                    r.map_err(|e| match e {
                        InstantiateError::Taken(id) => RegisterError::Taken(id),
                        e => RegisterError::Failed(e.to_string()),
                    })
                });
            if let Err(e) = outcome {
                sender.send(Job::Shutdown);
                let _ = thread.handle.join();
                return Err(e);
            }
        }
        self.domains.push((sender, thread));
        self.roots.push(id.to_string());
        Ok(id.to_string())
    }

    /// Freezes the registry and returns the running server, once the
    /// configuration is valid ([`ServerConfig::validate`]). Domain threads
    /// are already running; sessions need a tokio runtime.
    pub fn try_start(self) -> Result<Server, ConfigError> {
        self.core.config.validate()?;
        Ok(self.start_unchecked())
    }

    /// [`ServerBuilder::try_start`] for a configuration known to be valid.
    ///
    /// # Panics
    ///
    /// If the configuration is invalid (the message names the field).
    pub fn start(self) -> Server {
        if let Err(e) = self.core.config.validate() {
            panic!("invalid ServerConfig: {e}");
        }
        self.start_unchecked()
    }

    fn start_unchecked(self) -> Server {
        let ServerBuilder {
            core,
            domains,
            factory_roots,
            roots,
        } = self;
        let (senders, threads): (Vec<_>, Vec<_>) = domains.into_iter().unzip();
        let (shutdown, _) = watch::channel(false);
        let connections = Arc::new(tokio::sync::Semaphore::new(core.config.max_connections));
        let guards = budget::Guards::new(
            core.config.max_server_bytes,
            core.config.max_parallel_decodes,
            core.config.max_pending_handshakes,
        );
        let shared = Arc::new(ServerShared {
            guards,
            core,
            domains: senders,
            factory_roots,
            sessions: Mutex::new(HashMap::new()),
            sessions_gone: tokio::sync::Notify::new(),
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
    threads: Mutex<Vec<DomainThread>>,
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

    /// Starts a WebSocket listener on `addr` (e.g. `127.0.0.1:0`). An
    /// invalid configuration is an `InvalidInput` error whose source is the
    /// [`ConfigError`].
    pub async fn listen(&self, addr: impl tokio::net::ToSocketAddrs) -> std::io::Result<Listener> {
        listener::listen(self.inner.shared.clone(), addr).await
    }

    /// Serves WebSocket connections accepted on a listener bound by the
    /// caller (a socket with options of its own, or one handed over by a
    /// service manager); as [`Server::listen`] otherwise.
    pub async fn serve(&self, tcp: tokio::net::TcpListener) -> std::io::Result<Listener> {
        listener::serve(self.inner.shared.clone(), tcp).await
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
    /// domain on its own thread (each close hook once) and joins the threads.
    /// Sessions get `shutdown_timeout` to close; then each domain thread gets
    /// `shutdown_timeout` (from when all were told to stop) to finish; a
    /// simulator hung past it is left behind rather than blocking forever.
    pub async fn shutdown(&self) {
        let shared = &self.inner.shared;
        let timeout = shared.core.config.shutdown_timeout;
        shared.shutdown.send_replace(true);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let gone = shared.sessions_gone.notified();
            tokio::pin!(gone);
            // Registered before the check, so a session ending in between
            // still wakes us.
            gone.as_mut().enable();
            if self.session_count() == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, gone).await.is_err() {
                tracing::warn!(
                    sessions = self.session_count(),
                    "sessions still open after the shutdown timeout"
                );
                break;
            }
        }
        let threads: Vec<DomainThread> = std::mem::take(&mut *self.inner.threads.lock());
        for s in &shared.domains {
            s.send(Job::Shutdown);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        for DomainThread { handle, done } in threads {
            // `done` resolves (as closed) when the thread ends.
            if tokio::time::timeout_at(deadline, done).await.is_err() {
                tracing::warn!(
                    thread = ?handle.thread().name(),
                    ?timeout,
                    "domain thread did not stop within the shutdown timeout; leaving it"
                );
                continue;
            }
            // The thread has ended: joining does not block.
            let _ = handle.join();
        }
    }
}

/// A domain's OS thread, and the signal of its end.
struct DomainThread {
    handle: std::thread::JoinHandle<()>,
    done: tokio::sync::oneshot::Receiver<()>,
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

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
