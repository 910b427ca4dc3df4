//! Hosting by dialing out: the server connects to a relay
//! (`crate::relay`), registers under a name, and serves each tunnel the
//! relay asks for with the same session code as an accepted connection
//! (SPEC.md, "Relay and dial-out hosts").
//!
//! The control connection is re-dialed after any loss, with exponential
//! backoff and jitter up to a cap; every attempt (TCP, TLS, upgrade and
//! registration) is bounded by a stall timeout.

pub mod wire;

use super::config::ServerConfigError;
use super::session;
use super::shared::{ServerShared, SERVER_NAME};
use crate::transport::{Reader, Writer};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;
use wire::{Control, HostIdentity};

/// How a server dials a relay.
#[derive(Debug, Clone)]
pub struct DialOptions {
    /// The name to register under (clients reach it at
    /// `ws://RELAY/hosts/NAME`): 1 to 64 bytes of `[A-Za-z0-9._-]`.
    pub name: String,
    /// The relay's host token, sent as `Authorization: Bearer TOKEN`.
    pub token: Option<String>,
    /// For `wss://` relays: also trust the CA certificates in this PEM file.
    pub ca_file: Option<PathBuf>,
    /// For `wss://` relays: a TLS client configuration of the caller's
    /// (takes precedence over `ca_file`).
    pub tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    /// The first wait before re-dialing; doubled after each failed attempt.
    pub initial_backoff: Duration,
    /// The longest wait before re-dialing.
    pub max_backoff: Duration,
    /// Each attempt's bound: connecting, TLS, the upgrade and the
    /// registration answer (and each tunnel's connection) must finish
    /// within it.
    pub connect_timeout: Duration,
}

impl DialOptions {
    /// Options for the name `name`: backoff from 0.25 s doubling up to 10 s
    /// (each wait drawn between half and all of it), 10 s per attempt.
    pub fn new(name: impl Into<String>) -> DialOptions {
        DialOptions {
            name: name.into(),
            token: None,
            ca_file: None,
            tls: None,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// With the relay's host token.
    pub fn with_token(mut self, token: impl Into<String>) -> DialOptions {
        self.token = Some(token.into());
        self
    }
}

/// Why [`Server::dial`](super::Server::dial) could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// The name is not valid.
    #[error(transparent)]
    Name(#[from] wire::InvalidName),
    /// The URL is not `ws://HOST[:PORT][/PREFIX]` or `wss://…`.
    #[error("invalid relay URL {url:?}: expected ws://HOST[:PORT] or wss://HOST[:PORT]")]
    Url {
        /// The URL given.
        url: String,
    },
    /// A setting is unusable.
    #[error("invalid dial option: {0}")]
    Options(&'static str),
    /// The TLS client configuration could not be built.
    #[error(transparent)]
    Tls(#[from] crate::transport::TlsError),
    /// The server's configuration cannot serve WebSocket connections.
    #[error(transparent)]
    Config(#[from] ServerConfigError),
    /// Not called inside a tokio runtime.
    #[error("Server::dial must be called inside a tokio runtime")]
    NoRuntime,
}

/// Where a dialing host stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DialState {
    /// Connecting and registering.
    Connecting,
    /// Registered: clients can reach it.
    Registered,
    /// Waiting before the next attempt.
    Waiting,
    /// Stopped ([`DialHandle::stop`], the last handle dropped, or the
    /// server shut down).
    Stopped,
}

/// A dialing host's state, for logs and status queries.
#[derive(Debug, Clone)]
pub struct DialStatus {
    /// The state.
    pub state: DialState,
    /// The relay's URL.
    pub relay: String,
    /// The name registered (or asked for).
    pub name: String,
    /// Attempts since the last registration (the current one included).
    pub attempts: u64,
    /// Registrations so far (a re-dial after a loss counts again).
    pub registrations: u64,
    /// Tunnels opened for clients so far.
    pub tunnels: u64,
    /// The last failure: a refused registration, a lost connection.
    pub last_error: Option<String>,
    /// While waiting: how long until the next attempt.
    pub retry_in: Option<Duration>,
}

struct DialShared {
    status: Mutex<(DialStatus, Option<Instant>)>,
    changed: watch::Sender<u64>,
}

impl DialShared {
    fn update(&self, f: impl FnOnce(&mut DialStatus, &mut Option<Instant>)) {
        {
            let mut s = self.status.lock();
            let (status, until) = &mut *s;
            f(status, until);
        }
        self.changed.send_modify(|n| *n += 1);
    }
}

/// A dialing host: its status, and stopping it. Dropping the last clone
/// stops the dialing (sessions already served go on until they end).
#[derive(Clone)]
pub struct DialHandle {
    shared: Arc<DialShared>,
    stop: Arc<watch::Sender<bool>>,
}

impl std::fmt::Debug for DialHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DialHandle").field(&self.status()).finish()
    }
}

impl DialHandle {
    /// The current state.
    pub fn status(&self) -> DialStatus {
        let s = self.shared.status.lock();
        let mut status = s.0.clone();
        status.retry_in = s.1.map(|t| t.saturating_duration_since(Instant::now()));
        status
    }

    /// Waits until registered (now or later), at most `timeout`; whether it
    /// is.
    pub async fn wait_registered(&self, timeout: Duration) -> bool {
        let mut rx = self.shared.changed.subscribe();
        let registered = async {
            rx.wait_for(|_| matches!(self.shared.status.lock().0.state, DialState::Registered))
                .await
                .is_ok()
        };
        matches!(tokio::time::timeout(timeout, registered).await, Ok(true))
    }

    /// Stops dialing and closes the control connection (the relay then
    /// lists the host no more; its forwarded sessions are closed).
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

/// [`Server::dial`](super::Server::dial): starts dialing for the server
/// `server` hosting `roots`.
pub(super) fn dial(
    server: &Arc<ServerShared>,
    roots: &[String],
    url: &str,
    options: DialOptions,
) -> Result<DialHandle, DialError> {
    wire::validate_name(&options.name)?;
    if !(url.starts_with("ws://") || url.starts_with("wss://")) || url.contains('?') {
        return Err(DialError::Url { url: url.into() });
    }
    if options.connect_timeout.is_zero() || options.initial_backoff.is_zero() {
        return Err(DialError::Options(
            "connect_timeout and initial_backoff must be longer than zero",
        ));
    }
    if options.max_backoff < options.initial_backoff {
        return Err(DialError::Options(
            "max_backoff must be at least initial_backoff",
        ));
    }
    server.core.config.validate_for_websocket()?;
    let tls = match (&options.tls, url.starts_with("wss://")) {
        (Some(t), _) => Some(t.clone()),
        (None, true) => Some(crate::transport::tls::client_config(
            options.ca_file.as_deref(),
        )?),
        (None, false) => None,
    };
    let runtime = tokio::runtime::Handle::try_current().map_err(|_| DialError::NoRuntime)?;
    let shared = Arc::new(DialShared {
        status: Mutex::new((
            DialStatus {
                state: DialState::Connecting,
                relay: url.to_string(),
                name: options.name.clone(),
                attempts: 0,
                registrations: 0,
                tunnels: 0,
                last_error: None,
                retry_in: None,
            },
            None,
        )),
        changed: watch::channel(0).0,
    });
    let (stop, stop_rx) = watch::channel(false);
    let dialer = Dialer {
        server: server.clone(),
        roots: roots.to_vec(),
        url: url.trim_end_matches('/').to_string(),
        options,
        tls,
        status: shared.clone(),
        instance: wire::tunnel_id(),
    };
    let span = tracing::info_span!("dial", relay = %url, name = %dialer.options.name);
    runtime.spawn(dialer.run(stop_rx).instrument(span));
    Ok(DialHandle {
        shared,
        stop: Arc::new(stop),
    })
}

struct Dialer {
    server: Arc<ServerShared>,
    roots: Vec<String>,
    url: String,
    options: DialOptions,
    tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    status: Arc<DialShared>,
    /// This dialing host's ID: a re-dial gets its name back from a
    /// registration the relay still holds.
    instance: String,
}

/// Why a control connection ended or could not be made.
enum Lost {
    /// Stopped or shut down: no re-dial.
    Stopped,
    /// Anything else: re-dial.
    Failed(String),
}

impl Dialer {
    fn headers(&self) -> Vec<(String, String)> {
        self.options
            .token
            .as_ref()
            .map(|t| vec![("Authorization".to_string(), format!("Bearer {t}"))])
            .unwrap_or_default()
    }

    async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut shutdown = self.server.shutdown.subscribe();
        let mut backoff = self.options.initial_backoff;
        let stopped = |stop: &watch::Receiver<bool>, shutdown: &watch::Receiver<bool>| {
            *stop.borrow() || *shutdown.borrow()
        };
        while !stopped(&stop, &shutdown) {
            self.status.update(|s, until| {
                s.state = DialState::Connecting;
                s.attempts += 1;
                *until = None;
            });
            let attempt = tokio::time::timeout(self.options.connect_timeout, self.register());
            let outcome = tokio::select! {
                r = attempt => match r {
                    Ok(r) => r,
                    Err(_) => Err(format!(
                        "no registration within {:.1} s (connect timeout)",
                        self.options.connect_timeout.as_secs_f64()
                    )),
                },
                _ = until(&mut stop) => break,
                _ = until(&mut shutdown) => break,
            };
            let why = match outcome {
                Ok((reader, writer)) => {
                    backoff = self.options.initial_backoff;
                    self.status.update(|s, _| {
                        s.state = DialState::Registered;
                        s.attempts = 0;
                        s.registrations += 1;
                        s.last_error = None;
                    });
                    tracing::info!("registered at the relay");
                    match self.serve(reader, writer, &mut stop, &mut shutdown).await {
                        Lost::Stopped => break,
                        Lost::Failed(why) => format!("lost the relay: {why}"),
                    }
                }
                Err(why) => why,
            };
            // Equal jitter: between half and all of the backoff, so that
            // hosts dropped together do not re-dial together.
            let half = backoff / 2;
            let spread = half.as_nanos() as u64;
            let jitter = if spread == 0 {
                0
            } else {
                crate::transport::frame::random_u64() % spread
            };
            let wait = half + Duration::from_nanos(jitter);
            tracing::warn!(reason = %why, retry_in_ms = wait.as_millis() as u64,
                "not registered at the relay; re-dialing");
            self.status.update(|s, until| {
                s.state = DialState::Waiting;
                s.last_error = Some(why);
                *until = Some(Instant::now() + wait);
            });
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = until(&mut stop) => break,
                _ = until(&mut shutdown) => break,
            }
            backoff = (backoff * 2).min(self.options.max_backoff);
        }
        self.status.update(|s, until| {
            s.state = DialState::Stopped;
            *until = None;
        });
        tracing::info!("stopped dialing the relay");
    }

    /// Connects and registers.
    async fn register(&self) -> Result<(Reader, Writer), String> {
        let url = wire::join(&self.url, wire::CONTROL_PATH);
        let (r, w) = crate::transport::ws::connect_with(
            &url,
            &self.headers(),
            wire::MAX_CONTROL_MESSAGE,
            self.tls.clone(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let (mut reader, mut writer) = (Reader::Ws(r), Writer::Ws(w));
        let identity = HostIdentity {
            name: self.options.name.clone(),
            server: SERVER_NAME.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            resources: self.roots.clone(),
        };
        let register = Control::Register {
            identity,
            instance: self.instance.clone(),
        };
        send(&mut writer, register.encode())
            .await
            .map_err(|e| format!("sending the registration: {e}"))?;
        let answer = reader
            .recv()
            .await
            .map_err(|e| format!("the relay closed before answering the registration: {e}"))?;
        match Control::decode(&answer).map_err(|e| e.to_string())? {
            Control::Registered { .. } => Ok((reader, writer)),
            Control::Refused { code, message } => {
                let _ =
                    tokio::time::timeout(self.options.connect_timeout, writer.close(None)).await;
                Err(format!(
                    "the relay refused the registration ({code}): {message}"
                ))
            }
            _ => Err("the relay answered the registration with another message".into()),
        }
    }

    /// Serves the control connection: a tunnel for each open request.
    async fn serve(
        &self,
        mut reader: Reader,
        mut writer: Writer,
        stop: &mut watch::Receiver<bool>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Lost {
        let config = &self.server.core.config;
        let vanished = reader.watch_peer(config.heartbeat_interval, config.heartbeat_timeout);
        tokio::pin!(vanished);
        let (declines, mut declined) = mpsc::channel::<Control>(64);
        let lost = loop {
            tokio::select! {
                _ = until(stop) => break Lost::Stopped,
                _ = until(shutdown) => break Lost::Stopped,
                quiet = &mut vanished => {
                    break Lost::Failed(format!("the relay was silent for {:.0} s", quiet.as_secs_f64()));
                }
                Some(decline) = declined.recv() => {
                    let sent = tokio::time::timeout(self.options.connect_timeout, send(&mut writer, decline.encode()));
                    match sent.await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => break Lost::Failed(e.to_string()),
                        Err(_) => break Lost::Failed("the relay took nothing".into()),
                    }
                }
                message = reader.recv() => match message {
                    Err(e) => break Lost::Failed(format!("the control connection ended: {e}")),
                    Ok(bytes) => match Control::decode(&bytes) {
                        Ok(Control::Open { tunnel }) if wire::is_tunnel_id(&tunnel) => {
                            self.open_tunnel(tunnel, declines.clone());
                        }
                        Ok(other) => tracing::debug!(message = ?other, "ignored a relay control message"),
                        Err(e) => break Lost::Failed(e.to_string()),
                    },
                },
            }
        };
        let reason = match &lost {
            Lost::Stopped => Some((1001, "host stopping")),
            Lost::Failed(_) => None,
        };
        let _ = tokio::time::timeout(self.options.connect_timeout, writer.close(reason)).await;
        lost
    }

    /// Opens the tunnel `id` and runs a session on it, as for an accepted
    /// connection (its connection slot included); a refusal is declined
    /// at once over the control connection.
    fn open_tunnel(&self, id: String, declines: mpsc::Sender<Control>) {
        let server = self.server.clone();
        let url = wire::join(&self.url, &format!("{}{id}", wire::TUNNEL_PREFIX));
        let decline = move |message: String| {
            let _ = declines.try_send(Control::Decline {
                tunnel: id.clone(),
                message,
            });
        };
        let Ok(permit) = server.connections.clone().try_acquire_owned() else {
            tracing::info!("tunnel declined: too many connections");
            decline("the host has too many connections".into());
            return;
        };
        let headers = self.headers();
        let tls = self.tls.clone();
        let timeout = self.options.connect_timeout;
        let status = self.status.clone();
        let max_message = server.core.config.max_message_size;
        let task_server = server.clone();
        let task = async move {
            // Framed as a server: the relay writes the client's frames on
            // as they came (masked), and ours reach the client as they are;
            // responses can then be written from the domain threads at once
            // (as on an accepted connection).
            let connected = tokio::time::timeout(
                timeout,
                crate::transport::ws::connect_framed(
                    &url,
                    &headers,
                    max_message,
                    tls,
                    crate::transport::frame::Role::Server,
                ),
            )
            .await;
            let (r, w) = match connected {
                Ok(Ok(halves)) => halves,
                Ok(Err(e)) => {
                    tracing::info!(reason = %e, "cannot open a tunnel");
                    decline(format!("the host could not open the tunnel: {e}"));
                    return;
                }
                Err(_) => {
                    decline("the host's tunnel connection stalled".into());
                    return;
                }
            };
            status.update(|s, _| s.tunnels += 1);
            let _permit = permit;
            session::run(task_server, Reader::Ws(r), Writer::Ws(w))
                .instrument(tracing::info_span!("tunnel"))
                .await;
        };
        server.tasks.spawn(task.in_current_span());
    }
}

/// Returns once the flag is set (or its sender is gone); holds no borrow
/// of the flag across its caller's awaits.
async fn until(flag: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

/// Sends one message now.
async fn send(
    writer: &mut Writer,
    message: bytes::Bytes,
) -> Result<(), crate::transport::TransportError> {
    writer.feed(message).await?;
    writer.flush().await
}
