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
//! let server = builder.start()?;
//! let listener = server.listen("127.0.0.1:0").await?;
//! println!("serving on ws://{}", listener.local_addr());
//! server.shutdown().await;
//! # Ok(()) }
//! ```

mod boundary;
mod call;
mod committed;
mod config;
mod control;
mod descriptors;
mod dial;
mod domain;
mod hosted;
mod instance;
mod jobs;
mod listener;
mod names;
mod outbound;
mod placement;
mod recording;
mod session;
mod shared;
mod snapshot;
pub(crate) mod suggest;
mod tasks;
mod unix;

pub use config::{ServerConfig, ServerConfigError};
pub use dial::wire as relay_wire;
pub use dial::{DialError, DialHandle, DialOptions, DialState, DialStatus};
// The relay (`crate::relay`) admits connections as the listener does.
pub use hosted::{ForeignHost, ForeignResource, Hosted};
pub(crate) use listener::Policy;
pub use listener::{ListenError, Listener};
pub(crate) use names::machine_names;
pub use placement::{
    check_cpus, current_thread_cpus, format_cpu_list, parse_cpu_list, pin_current_thread,
    PlacementError,
};
pub use shared::SERVER_NAME;
pub(crate) use tasks::Tasks;

use crate::budget;
use crate::host::{Env, HostResult, Node};
use crate::transport::MemoryTransport;
use domain::Domain;
use jobs::{DomainSender, InstantiateError, Job};
use parking_lot::{Mutex, RwLock};
use shared::{Core, ServerShared};
use std::collections::HashMap;
use std::sync::{mpsc, Arc};
use tokio::sync::watch;

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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
    /// The CPUs domain threads pin themselves to ([`ServerConfig::cpus`]),
    /// when usable.
    pin: Option<Arc<[usize]>>,
}

/// Checks a resource ID as registration does: non-empty, at most 1,024
/// bytes, no control characters (a NUL, a newline: Unicode category `Cc`).
/// Every ID a server hosts passes it — roots at registration, and the IDs a
/// hosted object exports (a foreign host's nodes) when it is built — so a
/// host that collects registrations before it builds the server (the Python
/// `RemoteServer`) can refuse a bad ID at its own `register`.
pub fn check_resource_id(id: &str) -> Result<(), RegisterError> {
    validate_id(id)
}

fn validate_id(id: &str) -> Result<(), RegisterError> {
    if !hosted::valid_id(id) {
        return Err(RegisterError::InvalidId(id.chars().take(64).collect()));
    }
    Ok(())
}

impl ServerBuilder {
    fn new(config: ServerConfig) -> ServerBuilder {
        // An unusable placement is refused by `start` (`validate`); until
        // then nothing is pinned.
        let pin: Option<Arc<[usize]>> = config
            .cpus
            .as_deref()
            .filter(|cpus| placement::check_cpus(cpus).is_ok())
            .map(Arc::from);
        let recorder = config.record_dir.as_deref().and_then(|dir| {
            let start = || {
                crate::record::Recorder::start_with(
                    dir,
                    config.record_format.clone(),
                    config.record_queue_bytes,
                )
            };
            let started = match &pin {
                // The writer thread inherits the placement of the thread
                // that starts it (Linux): one of ours, pinned first.
                Some(cpus) => std::thread::scope(|s| {
                    s.spawn(|| {
                        pin_domain_thread(cpus);
                        start()
                    })
                    .join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("the recorder's start panicked")))
                }),
                None => start(),
            };
            started
                .map(Arc::new)
                .map_err(|e| {
                    tracing::error!(dir = %dir.display(), error = %e, "cannot record");
                })
                .ok()
        });
        let metrics = Arc::new(crate::metrics::Metrics::new(
            recorder.as_ref().map(|r| r.stats.clone()),
        ));
        ServerBuilder {
            core: Arc::new(Core {
                recorder,
                metrics,
                config,
                registry: RwLock::new(HashMap::new()),
            }),
            domains: Vec::new(),
            factory_roots: Vec::new(),
            roots: Vec::new(),
            pin,
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
        let (tx, rx) = jobs::queue();
        let committed = committed::channel();
        let sender = DomainSender {
            jobs: tx,
            committed: committed.clone(),
        };
        let (core, root) = (self.core.clone(), id.to_string());
        // The domain is built on its own thread: what it hosts need not be Send.
        let (done_tx, done) = tokio::sync::oneshot::channel::<()>();
        let pin = self.pin.clone();
        let handle = std::thread::Builder::new()
            .name(format!("unienv-domain-{index}"))
            .spawn(move || {
                // Dropped when the thread ends, however it ends: shutdown
                // waits on it instead of polling the thread.
                let _done = done_tx;
                if let Some(cpus) = pin {
                    pin_domain_thread(&cpus);
                }
                Domain::new(index, root, core, factory, lazy, committed).run(rx)
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
    /// configuration is valid ([`ServerConfig::validate`]); an invalid one
    /// is returned as its [`ServerConfigError`], naming the field, and the domain
    /// threads stop. Domain threads are already running; sessions need a
    /// tokio runtime.
    pub fn start(self) -> Result<Server, ServerConfigError> {
        self.core.config.validate()?;
        Ok(self.start_unchecked())
    }

    fn start_unchecked(self) -> Server {
        let ServerBuilder {
            core,
            domains,
            factory_roots,
            roots,
            pin: _,
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
            tasks: tasks::Tasks::default(),
            reads: Arc::new(tokio::sync::Semaphore::new(1)),
        });
        Server {
            inner: Arc::new(ServerInner {
                shared,
                threads: Mutex::new(threads),
                roots,
                metrics: tokio::sync::OnceCell::new(),
            }),
        }
    }
}

struct ServerInner {
    shared: Arc<ServerShared>,
    threads: Mutex<Vec<DomainThread>>,
    roots: Vec<String>,
    /// The endpoint of [`ServerConfig::metrics_addr`], once started.
    metrics: tokio::sync::OnceCell<crate::metrics::MetricsEndpoint>,
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
    /// [`ServerConfigError`].
    pub async fn listen(&self, addr: impl tokio::net::ToSocketAddrs) -> std::io::Result<Listener> {
        self.configured_metrics().await?;
        listener::listen(self.inner.shared.clone(), addr).await
    }

    /// Serves WebSocket connections accepted on a listener bound by the
    /// caller (a socket with options of its own, or one handed over by a
    /// service manager); as [`Server::listen`] otherwise.
    pub async fn serve(&self, tcp: tokio::net::TcpListener) -> std::io::Result<Listener> {
        self.configured_metrics().await?;
        listener::serve(self.inner.shared.clone(), tcp).await
    }

    /// Dials the relay at `url` (`ws://HOST:PORT` or `wss://…`, module
    /// [`crate::relay`]) and serves the clients it forwards, each tunnel
    /// with the same session code as an accepted connection, re-dialing
    /// after any loss until [`DialHandle::stop`] or [`Server::shutdown`]. A
    /// server may dial and listen at once. Must be called inside a tokio
    /// runtime.
    pub fn dial(&self, url: &str, options: DialOptions) -> Result<DialHandle, DialError> {
        dial::dial(&self.inner.shared, &self.inner.roots, url, options)
    }

    /// Serves the metrics ([`crate::metrics`]) at `http://ADDR/metrics` until
    /// the server shuts down (or [`MetricsEndpoint::close`](crate::metrics::MetricsEndpoint::close)).
    /// Must be called inside a tokio runtime.
    pub async fn serve_metrics(
        &self,
        addr: impl tokio::net::ToSocketAddrs,
    ) -> std::io::Result<crate::metrics::MetricsEndpoint> {
        let weak = Arc::downgrade(&self.inner.shared);
        let render = Arc::new(move || match weak.upgrade() {
            Some(shared) => render_metrics(&shared),
            None => String::new(),
        });
        let tcp = tokio::net::TcpListener::bind(addr).await?;
        let guard = listener::host_guard(self.config(), tcp.local_addr()?.ip()).await;
        crate::metrics::serve(tcp, render, guard, self.inner.shared.shutdown.subscribe())
    }

    /// The endpoint of [`ServerConfig::metrics_addr`], started once.
    async fn configured_metrics(&self) -> std::io::Result<()> {
        let Some(addr) = self.config().metrics_addr.clone() else {
            return Ok(());
        };
        self.inner
            .metrics
            .get_or_try_init(|| self.serve_metrics(addr))
            .await
            .map(|_| ())
    }

    /// `http://ADDR/metrics` of [`ServerConfig::metrics_addr`], once the
    /// first listener started it.
    pub fn metrics_url(&self) -> Option<String> {
        self.inner.metrics.get().map(|m| m.url())
    }

    /// The metrics in the Prometheus text format, as the endpoint serves
    /// them.
    pub fn metrics_text(&self) -> String {
        render_metrics(&self.inner.shared)
    }

    /// Starts a WebSocket listener on the Unix domain socket `path`, for
    /// clients on this machine (`ws+unix://PATH`; SPEC.md, "Unix domain
    /// sockets"). A stale socket file left by a server that is gone is
    /// replaced; a live server's socket, or a file that is not a socket, is
    /// an `AddrInUse` error ([`ListenError::BindUnix`]). The socket file is
    /// made readable and writable by its owner only (mode 0600) and removed
    /// when the listener stops or the server shuts down. Never TLS.
    pub async fn listen_unix(
        &self,
        path: impl AsRef<std::path::Path>,
    ) -> std::io::Result<Listener> {
        self.configured_metrics().await?;
        listener::listen_unix(self.inner.shared.clone(), path.as_ref()).await
    }

    /// Serves WebSocket connections accepted on a Unix domain socket bound
    /// by the caller (its file's permissions and removal are the caller's).
    pub async fn serve_unix(&self, unix: tokio::net::UnixListener) -> std::io::Result<Listener> {
        listener::serve_unix(self.inner.shared.clone(), unix).await
    }

    /// Connects an in-memory client. Must be called inside a tokio runtime.
    pub fn connect_memory(&self) -> MemoryTransport {
        let (client, server) = MemoryTransport::pair();
        let shared = self.inner.shared.clone();
        let (reader, writer) = server.split();
        // The session's span is a child of the caller's current span (the
        // command line keeps its own start-up session out of the log).
        let session = async move {
            session::run(shared, reader, writer).await;
        };
        self.inner
            .shared
            .tasks
            .spawn(tracing::Instrument::in_current_span(session));
        client
    }

    /// Connection and in-memory session tasks still running (tests check
    /// that shutdown leaves none).
    #[doc(hidden)]
    pub fn live_tasks(&self) -> usize {
        self.inner.shared.tasks.len()
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

    /// The index of this server's domain whose thread is calling, when
    /// called from inside a hosted call (a simulator calling back into its
    /// own server); `None` elsewhere.
    pub fn hosted_domain(&self) -> Option<usize> {
        jobs::current_domain(Arc::as_ptr(&self.inner.shared.core) as usize)
    }

    /// Stops listeners, closes every session, disposes every instantiated
    /// domain on its own thread (each close hook once) and joins the threads.
    /// Sessions get `shutdown_timeout` to close; connection tasks still
    /// running then (pending handshakes, sessions that did not close) are
    /// aborted, closing their sockets; then each domain thread gets
    /// `shutdown_timeout` (from when all were told to stop) to finish; a
    /// simulator hung past it is left behind rather than blocking forever.
    /// Called from inside a hosted call, it does not wait for that call's
    /// own domain (logged), whose thread stops once the call returns.
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
        // Handshakes in progress and sessions that outlived the timeout:
        // aborted (their sockets closed), and awaited briefly.
        let grace = tokio::time::Instant::now() + timeout.min(std::time::Duration::from_secs(1));
        let (aborted, left) = shared.tasks.abort_all(grace).await;
        if aborted > 0 {
            tracing::debug!(aborted, left, "connection tasks aborted at shutdown");
        }
        let threads: Vec<DomainThread> = std::mem::take(&mut *self.inner.threads.lock());
        for s in &shared.domains {
            s.send(Job::Shutdown);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        // A shutdown started by a hosted call (a simulator closing its own
        // server) cannot wait for its own domain: that thread stops when
        // the call returns.
        let own = self.hosted_domain();
        for (index, DomainThread { handle, done }) in threads.into_iter().enumerate() {
            if own == Some(index) {
                tracing::warn!(
                    thread = ?handle.thread().name(),
                    "shutdown called from inside a hosted call: not waiting for that call's domain, which stops when the call returns"
                );
                continue;
            }
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
        // Every domain has closed its envs' recordings: commit and stop.
        if let Some(recorder) = &shared.core.recorder {
            let recorder = recorder.clone();
            let _ = tokio::task::spawn_blocking(move || recorder.stop()).await;
        }
    }

    /// Waits until every transition recorded so far is written to disk
    /// (committed episodes and the open ones' elements); returns at once
    /// when the server does not record. For tests and checkpoints.
    pub fn flush_recording(&self) {
        if let Some(recorder) = &self.inner.shared.core.recorder {
            recorder.flush();
        }
    }

    /// The recording's counters, when the server records.
    pub fn record_stats(&self) -> Option<Arc<crate::record::RecordStats>> {
        self.inner
            .shared
            .core
            .recorder
            .as_ref()
            .map(|r| r.stats.clone())
    }
}

fn render_metrics(shared: &ServerShared) -> String {
    let sessions: Vec<_> = shared.sessions.lock().values().cloned().collect();
    let observers = sessions
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .map(|s| s.subscriptions.lock().len() as u64)
        .sum();
    shared.core.metrics.render(crate::metrics::Live {
        sessions: sessions.len() as u64,
        observers,
    })
}

/// Pins the calling thread (a domain's, or the recorder's starter) to
/// `cpus`, checked usable beforehand; a refusal is logged and the thread
/// runs unpinned.
fn pin_domain_thread(cpus: &[usize]) {
    if let Err(e) = placement::pin_current_thread(cpus) {
        tracing::warn!(error = %e, "running unpinned");
    }
}

/// A domain's OS thread, and the signal of its end.
struct DomainThread {
    handle: std::thread::JoinHandle<()>,
    done: tokio::sync::oneshot::Receiver<()>,
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
