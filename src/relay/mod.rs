//! The relay: simulators that can only make outbound connections (an
//! engine's editor, a render node behind NAT) dial a relay and register
//! under a name; clients connect to `ws://RELAY/hosts/NAME` and get a
//! session of their own on that host (SPEC.md, "Relay and dial-out hosts").
//!
//! For each client the relay asks the host, over the host's control
//! connection, to open a tunnel connection (a reverse tunnel), then forwards
//! WebSocket messages both ways without decoding them: the session on the
//! host is the same code as for an accepted connection, so every protocol
//! semantic is the direct one.
//!
//! ```no_run
//! use unienv_remote::relay::{Relay, RelayConfig};
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let relay = Relay::start("127.0.0.1:0", RelayConfig::default()).await?;
//! println!("hosts dial {}; clients connect to {}", relay.url(), relay.host_url("NAME"));
//! relay.shutdown().await;
//! # Ok(()) }
//! ```

mod accept;
mod forward;
mod list;

/// What a relay and a dialing host say to each other (shared with
/// [`Server::dial`](crate::server::Server::dial)).
pub use crate::server::relay_wire as wire;
pub use list::{list_hosts, ListError};
pub use wire::{validate_name, HostIdentity, HostInfo, InvalidName};

use crate::budget::Guards;
use crate::server::{Policy, ServerConfig, ServerConfigError, Tasks};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch, Notify, Semaphore};
use wire::Control;

/// A relay's settings.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// What the relay shares with `serve`'s listener: `token` (required of
    /// clients), `allowed_hosts`, `allowed_origins`, `tls`,
    /// `max_connections` (every socket: hosts' control and tunnel
    /// connections, clients), `max_handshake_bytes`, `handshake_timeout`,
    /// `max_pending_handshakes`, `max_message_size` (of forwarded
    /// messages), `max_connection_bytes` (per forwarded session),
    /// `max_server_bytes` (the pool), `message_timeout`, and the heartbeats
    /// (`heartbeat_interval`, `heartbeat_timeout`) with which the relay
    /// watches every connection. Its other fields are not used.
    pub listen: ServerConfig,
    /// The bearer token required of hosts (control and tunnel connections);
    /// `None`: any host may register.
    pub host_token: Option<String>,
    /// Most registered hosts.
    pub max_hosts: usize,
    /// Most clients waiting for a tunnel, over all hosts.
    pub max_pending_opens: usize,
    /// Most clients waiting for a tunnel of one host.
    pub max_pending_opens_per_host: usize,
    /// How long a client waits for its host to open the tunnel; then it is
    /// refused with HTTP 504.
    pub open_timeout: Duration,
}

impl Default for RelayConfig {
    fn default() -> RelayConfig {
        RelayConfig {
            listen: ServerConfig::default(),
            host_token: None,
            max_hosts: 4096,
            max_pending_opens: 1024,
            max_pending_opens_per_host: 64,
            open_timeout: Duration::from_secs(10),
        }
    }
}

/// Per registered host, uncharged: its record, its control connection's
/// queue of open requests, its tasks.
const HOST_ENTRY_BYTES: u64 = 8 << 10;

/// Per connection, uncharged (as the server's): read buffer spare room,
/// the writer's gathering buffer, control frames, tasks.
const FIXED_CONNECTION_BYTES: u64 = 160 << 10;

impl RelayConfig {
    /// An upper bound of the memory the relay holds however its peers
    /// behave (SPEC.md, "Relay and dial-out hosts"): every connection its
    /// allowance and fixed buffers, the shared pool, pending handshakes'
    /// heads, clients waiting for a tunnel (their request heads), and every
    /// registered host's record (at most one control message).
    pub fn worst_case_memory_bytes(&self) -> u64 {
        let l = &self.listen;
        let n = l.max_connections as u64;
        n.saturating_mul(crate::budget::ACCOUNT_ALLOWANCE as u64 + FIXED_CONNECTION_BYTES)
            .saturating_add(l.max_server_bytes as u64)
            .saturating_add(
                (l.max_pending_handshakes as u64).saturating_mul(l.max_handshake_bytes as u64),
            )
            .saturating_add(
                (self.max_pending_opens as u64).saturating_mul(l.max_handshake_bytes as u64),
            )
            .saturating_add(
                (self.max_hosts as u64)
                    .saturating_mul(wire::MAX_CONTROL_MESSAGE as u64 + HOST_ENTRY_BYTES),
            )
    }

    /// Checks the settings: the listener's as `serve` does, and the relay's
    /// own counts and times.
    pub fn validate(&self) -> Result<(), RelayError> {
        self.listen
            .validate_for_websocket()
            .map_err(RelayError::Config)?;
        let invalid =
            |field: &'static str, reason: &'static str| Err(RelayError::Invalid { field, reason });
        if self.max_hosts == 0 {
            return invalid("max_hosts", "must be at least 1");
        }
        if self.max_pending_opens == 0 || self.max_pending_opens_per_host == 0 {
            return invalid(
                "max_pending_opens",
                "max_pending_opens and max_pending_opens_per_host must be at least 1",
            );
        }
        if self.open_timeout.is_zero() {
            return invalid("open_timeout", "must be longer than zero");
        }
        if self
            .host_token
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            return invalid("host_token", "is empty: give a token, or none");
        }
        Ok(())
    }
}

/// Why a relay could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The listener's settings are unusable.
    #[error("invalid relay configuration: {0}")]
    Config(#[source] ServerConfigError),
    /// A relay setting is unusable.
    #[error("invalid relay configuration: {field} {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address given.
        addr: String,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

/// What a client waiting for a tunnel is given.
pub(crate) type OpenReply = Result<forward::Tunnel, String>;

/// A registered host.
pub(crate) struct HostEntry {
    pub(crate) identity: HostIdentity,
    /// The dialing host's instance ID: a re-dial with the same one takes the
    /// name over from a registration the relay still holds.
    instance: String,
    /// Distinguishes this registration from a later one of the same name.
    serial: u64,
    since: Instant,
    /// Open requests for the control connection to send.
    opens: mpsc::Sender<Control>,
    /// Set when the registration ends (control connection lost, or taken
    /// over by a re-dial): its clients are closed at once.
    gone: watch::Sender<bool>,
    /// Clients waiting for a tunnel.
    pending: AtomicUsize,
    /// Forwarded sessions.
    clients: AtomicUsize,
}

/// A client waiting for its tunnel.
struct Pending {
    host: Arc<HostEntry>,
    reply: oneshot::Sender<OpenReply>,
}

/// What the relay's tasks share.
pub(crate) struct Shared {
    pub(crate) config: RelayConfig,
    client_policy: Policy,
    host_policy: Policy,
    pub(crate) guards: Arc<Guards>,
    connections: Arc<Semaphore>,
    hosts: Mutex<HashMap<String, Arc<HostEntry>>>,
    pending: Mutex<HashMap<String, Pending>>,
    /// Notified when a host registers or leaves.
    changed: Notify,
    next_serial: AtomicU64,
    pub(crate) shutdown: watch::Sender<bool>,
    tasks: Tasks,
    /// Connection tasks running, and their end.
    live: AtomicUsize,
    live_gone: Notify,
}

/// A running relay: cheap to clone.
#[derive(Clone)]
pub struct Relay {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    tls: bool,
    /// The accept loop, awaited at shutdown (the port is free then).
    accepting: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("url", &self.url())
            .field("hosts", &self.shared.hosts.lock().len())
            .finish()
    }
}

impl Relay {
    /// Listens on `addr` (e.g. `127.0.0.1:0`) and relays until
    /// [`Relay::shutdown`]. Must be called inside a tokio runtime.
    pub async fn start(
        addr: impl tokio::net::ToSocketAddrs + std::fmt::Debug,
        config: RelayConfig,
    ) -> Result<Relay, RelayError> {
        config.validate()?;
        let shown = format!("{addr:?}").trim_matches('"').to_string();
        let tcp = TcpListener::bind(addr)
            .await
            .map_err(|source| RelayError::Bind {
                addr: shown,
                source,
            })?;
        Relay::serve(tcp, config).await
    }

    /// Relays on a listener bound by the caller.
    pub async fn serve(tcp: TcpListener, config: RelayConfig) -> Result<Relay, RelayError> {
        config.validate()?;
        let local_addr = tcp.local_addr().map_err(|source| RelayError::Bind {
            addr: "the given listener".into(),
            source,
        })?;
        let names = crate::server::machine_names(local_addr.ip()).await;
        let l = &config.listen;
        let client_policy = Policy::new(l, local_addr.ip(), names.clone());
        let host_policy = Policy::new(
            &ServerConfig {
                token: config.host_token.clone(),
                ..l.clone()
            },
            local_addr.ip(),
            names,
        );
        let shared = Arc::new(Shared {
            guards: Guards::new(l.max_server_bytes, 1, l.max_pending_handshakes),
            connections: Arc::new(Semaphore::new(l.max_connections)),
            client_policy,
            host_policy,
            hosts: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            next_serial: AtomicU64::new(0),
            shutdown: watch::channel(false).0,
            tasks: Tasks::default(),
            live: AtomicUsize::new(0),
            live_gone: Notify::new(),
            config,
        });
        let tls = shared.config.listen.tls.is_some();
        let accepting = tokio::spawn(accept::accept_loop(shared.clone(), tcp));
        Ok(Relay {
            shared,
            local_addr,
            tls,
            accepting: Arc::new(Mutex::new(Some(accepting))),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `ws://HOST:PORT` (`wss://` with TLS): what hosts dial.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "wss" } else { "ws" };
        match self.local_addr.ip() {
            IpAddr::V6(ip) => format!("{scheme}://[{ip}]:{}", self.local_addr.port()),
            IpAddr::V4(ip) => format!("{scheme}://{ip}:{}", self.local_addr.port()),
        }
    }

    /// `ws://HOST:PORT/hosts/NAME`: where clients reach the host `name`.
    pub fn host_url(&self, name: &str) -> String {
        format!("{}{}{name}", self.url(), wire::HOSTS_PREFIX)
    }

    /// The connected hosts, by name.
    pub fn hosts(&self) -> Vec<HostInfo> {
        self.shared.host_infos()
    }

    /// Client URLs of the connected hosts, by name.
    pub fn addresses(&self) -> Vec<String> {
        self.hosts()
            .iter()
            .map(|h| self.host_url(&h.identity.name))
            .collect()
    }

    /// Waits until at least `n` hosts are connected, at most `timeout`;
    /// returns them, or `None` at the timeout.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Option<Vec<HostInfo>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let hosts = self.hosts();
            if hosts.len() >= n {
                return Some(hosts);
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return None;
            }
        }
    }

    /// The relay's settings (its worst-case memory:
    /// [`RelayConfig::worst_case_memory_bytes`]).
    pub fn config(&self) -> &RelayConfig {
        &self.shared.config
    }

    /// Stops accepting, closes every connection (clients see their
    /// connection lost; hosts re-dial elsewhere or later) and waits up to
    /// the listener's `shutdown_timeout` for the connection tasks, then
    /// aborts what is left.
    pub async fn shutdown(&self) {
        let shared = &self.shared;
        shared.shutdown.send_replace(true);
        let accepting = self.accepting.lock().take();
        if let Some(task) = accepting {
            let _ = task.await;
        }
        let deadline = tokio::time::Instant::now() + shared.config.listen.shutdown_timeout;
        loop {
            let gone = shared.live_gone.notified();
            tokio::pin!(gone);
            gone.as_mut().enable();
            if shared.live.load(Ordering::Acquire) == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, gone).await.is_err() {
                break;
            }
        }
        let grace = tokio::time::Instant::now() + Duration::from_secs(1);
        shared.tasks.abort_all(grace).await;
    }
}

impl Shared {
    fn host_infos(&self) -> Vec<HostInfo> {
        let mut out: Vec<HostInfo> = self
            .hosts
            .lock()
            .values()
            .map(|h| HostInfo {
                identity: h.identity.clone(),
                clients: h.clients.load(Ordering::Relaxed),
                connected_for: h.since.elapsed(),
            })
            .collect();
        out.sort_by(|a, b| a.identity.name.cmp(&b.identity.name));
        out
    }

    /// The listing as JSON (`GET /hosts`).
    pub(crate) fn listing(&self) -> serde_json::Value {
        let hosts: Vec<serde_json::Value> = self
            .host_infos()
            .into_iter()
            .map(|h| {
                serde_json::json!({
                    "name": h.identity.name,
                    "path": format!("{}{}", wire::HOSTS_PREFIX, h.identity.name),
                    "server": h.identity.server,
                    "version": h.identity.version,
                    "resources": h.identity.resources,
                    "clients": h.clients,
                    "connected_s": h.connected_for.as_secs_f64(),
                })
            })
            .collect();
        serde_json::json!({
            "relay": crate::server::SERVER_NAME,
            "version": env!("CARGO_PKG_VERSION"),
            "hosts": hosts,
        })
    }

    /// Registers a host, or says why not. A live name is refused unless the
    /// same dialing host (its instance ID) registers it again: then the old
    /// registration ends and this one takes its place.
    fn register(
        &self,
        identity: HostIdentity,
        instance: String,
    ) -> Result<(Arc<HostEntry>, mpsc::Receiver<Control>), Control> {
        let refuse = |code: &str, message: String| Control::Refused {
            code: code.into(),
            message,
        };
        if let Err(e) = wire::validate_name(&identity.name) {
            return Err(refuse("invalid_name", e.to_string()));
        }
        let mut hosts = self.hosts.lock();
        let replaced = match hosts.get(&identity.name) {
            Some(live) if live.instance != instance => {
                return Err(refuse(
                    "name_taken",
                    format!(
                        "the name '{}' is taken by another connected host: choose another --name, or stop that host",
                        identity.name
                    ),
                ));
            }
            Some(live) => Some(live.clone()),
            None => None,
        };
        if replaced.is_none() && hosts.len() >= self.config.max_hosts {
            return Err(refuse(
                "too_many_hosts",
                format!(
                    "this relay holds its most hosts ({})",
                    self.config.max_hosts
                ),
            ));
        }
        let (tx, rx) = mpsc::channel(self.config.max_pending_opens_per_host);
        let entry = Arc::new(HostEntry {
            identity,
            instance,
            serial: self.next_serial.fetch_add(1, Ordering::Relaxed),
            since: Instant::now(),
            opens: tx,
            gone: watch::channel(false).0,
            pending: AtomicUsize::new(0),
            clients: AtomicUsize::new(0),
        });
        hosts.insert(entry.identity.name.clone(), entry.clone());
        drop(hosts);
        if let Some(old) = replaced {
            old.gone.send_replace(true);
        }
        self.changed.notify_waiters();
        Ok((entry, rx))
    }

    /// Ends a registration (if it is still the current one for its name):
    /// its clients and waiting clients are told at once.
    fn unregister(&self, host: &Arc<HostEntry>) {
        {
            let mut hosts = self.hosts.lock();
            if hosts
                .get(&host.identity.name)
                .is_some_and(|h| h.serial == host.serial)
            {
                hosts.remove(&host.identity.name);
            }
        }
        host.gone.send_replace(true);
        self.changed.notify_waiters();
    }

    /// Asks `host` for a tunnel; the client then waits on the receiver.
    fn request_open(
        self: &Arc<Self>,
        host: &Arc<HostEntry>,
    ) -> Result<OpenRequest, crate::transport::ws::Refusal> {
        use crate::transport::ws::Refusal;
        let busy = |what: String| Refusal::new(503, "Service Unavailable", what);
        let mut pending = self.pending.lock();
        if pending.len() >= self.config.max_pending_opens {
            return Err(busy(format!(
                "this relay has {} clients waiting for tunnels, its most: try again shortly",
                pending.len()
            )));
        }
        let waiting = host.pending.load(Ordering::Relaxed);
        if waiting >= self.config.max_pending_opens_per_host {
            return Err(busy(format!(
                "host '{}' has {waiting} clients waiting for tunnels, the most per host: try again shortly",
                host.identity.name
            )));
        }
        let id = wire::tunnel_id();
        if host
            .opens
            .try_send(Control::Open { tunnel: id.clone() })
            .is_err()
        {
            return Err(busy(format!(
                "host '{}' is not taking open requests now",
                host.identity.name
            )));
        }
        let (reply, rx) = oneshot::channel();
        pending.insert(
            id.clone(),
            Pending {
                host: host.clone(),
                reply,
            },
        );
        host.pending.fetch_add(1, Ordering::Relaxed);
        Ok(OpenRequest {
            shared: self.clone(),
            host: host.clone(),
            id,
            reply: rx,
        })
    }

    /// The pending open `id`, taken (a tunnel connection claims it).
    fn claim(&self, id: &str) -> Option<oneshot::Sender<OpenReply>> {
        self.pending.lock().remove(id).map(|p| p.reply)
    }

    /// `host` declines the tunnel `id` (only its own).
    fn decline(&self, host: &Arc<HostEntry>, id: &str, message: String) {
        let mut pending = self.pending.lock();
        let own = pending.get(id).is_some_and(|p| Arc::ptr_eq(&p.host, host));
        if own {
            if let Some(p) = pending.remove(id) {
                let _ = p.reply.send(Err(message));
            }
        }
    }

    /// Marks a connection task running until the guard drops.
    fn live(self: &Arc<Self>) -> LiveGuard {
        self.live.fetch_add(1, Ordering::AcqRel);
        LiveGuard(self.clone())
    }
}

struct LiveGuard(Arc<Shared>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        if self.0.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.live_gone.notify_waiters();
        }
    }
}

/// A client's open request: its place among the pending ones, released
/// however the wait ends.
struct OpenRequest {
    shared: Arc<Shared>,
    host: Arc<HostEntry>,
    id: String,
    reply: oneshot::Receiver<OpenReply>,
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.shared.pending.lock().remove(&self.id);
        self.host.pending.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_memory_counts_every_term() {
        let c = RelayConfig::default();
        let worst = c.worst_case_memory_bytes();
        for more in [
            RelayConfig {
                max_hosts: c.max_hosts + 1,
                ..c.clone()
            },
            RelayConfig {
                max_pending_opens: c.max_pending_opens + 1,
                ..c.clone()
            },
        ] {
            assert!(more.worst_case_memory_bytes() > worst);
        }
        // The defaults fit the server's bound plus the hosts' records.
        assert!(worst <= c.listen.worst_case_memory_bytes() + (1 << 30));
    }

    #[test]
    fn invalid_settings_are_named() {
        let bad = RelayConfig {
            max_hosts: 0,
            ..RelayConfig::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_hosts"));
        let bad = RelayConfig {
            host_token: Some(" ".into()),
            ..RelayConfig::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("host_token"));
        assert!(RelayConfig::default().validate().is_ok());
    }
}
