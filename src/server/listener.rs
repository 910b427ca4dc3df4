//! The WebSocket listener: connection cap, handshake limits (size, time),
//! DNS-rebinding checks on `Host` and `Origin`, the optional bearer token,
//! and no compression (the permessage-deflate offer is never accepted).
//! It accepts on a TCP port or on a Unix domain socket (module `unix`).

use super::session;
use super::shared::ServerShared;
use super::unix::SocketFile;
use crate::transport::tls::Stream;
use crate::transport::ws::{self, Refusal, RequestHead};
use crate::transport::{Reader, Writer};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::watch;
use tracing::Instrument;

/// A running WebSocket listener.
pub struct Listener {
    local_addr: SocketAddr,
    /// The socket file of a Unix domain socket listener.
    unix_path: Option<PathBuf>,
    // [transport: TLS hook]
    tls: bool,
    host_names: Vec<String>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    /// The bound address (useful with port 0); `0.0.0.0:0` for a Unix
    /// domain socket listener (see [`Listener::unix_path`]).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The socket file of a listener started by
    /// [`Server::listen_unix`](super::Server::listen_unix) or
    /// [`Server::serve_unix`](super::Server::serve_unix).
    pub fn unix_path(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }

    /// `ws://HOST:PORT` for clients (`wss://` when serving TLS;
    /// `ws+unix://PATH` for a Unix domain socket).
    pub fn url(&self) -> String {
        if let Some(path) = &self.unix_path {
            return format!("{}{}", ws::UNIX_SCHEME, path.display());
        }
        let scheme = if self.tls { "wss" } else { "ws" };
        match self.local_addr.ip() {
            IpAddr::V6(ip) => format!("{scheme}://[{ip}]:{}", self.local_addr.port()),
            IpAddr::V4(ip) => format!("{scheme}://{ip}:{}", self.local_addr.port()),
        }
    }

    /// Whether connections are served over TLS (`wss://`; never on a Unix
    /// domain socket).
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The DNS names accepted in `Host` besides IP addresses, `localhost`
    /// and [`ServerConfig::allowed_hosts`](super::ServerConfig::allowed_hosts):
    /// the names this machine answers to (its host name, FQDN, the names
    /// `/etc/hosts` gives its addresses) for a non-loopback bind, found once
    /// at start; none for a loopback bind (a DNS-rebinding guard).
    pub fn host_names(&self) -> &[String] {
        &self.host_names
    }

    /// Stops accepting connections (open sessions are not affected).
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}

/// Why [`Server::listen`](super::Server::listen) could not start a
/// listener: the inner error of the `io::Error` it returns (of the same
/// kind), reached with [`ListenError::of`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenError {
    /// The address could not be resolved.
    #[error("cannot resolve the listen address: {source}")]
    Resolve {
        /// The resolver's error.
        #[source]
        source: io::Error,
    },
    /// The Unix domain socket could not be bound: the path is taken (by a
    /// live server, or by a file that is not a socket), or not writable.
    #[error("cannot listen on the Unix socket {}: {source}{hint}", path.display())]
    BindUnix {
        /// The socket file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: io::Error,
        /// What to do about it (may be empty).
        hint: &'static str,
    },
    /// No resolved address could be bound.
    #[error(
        "cannot listen on {}: {source}{}",
        addrs.iter().map(SocketAddr::to_string).collect::<Vec<_>>().join(", "),
        if source.kind() == io::ErrorKind::AddrInUse {
            " (another server is using it: stop it, or choose another port, e.g. port 0 for any free one)"
        } else {
            ""
        }
    )]
    Bind {
        /// The addresses tried.
        addrs: Vec<SocketAddr>,
        /// The error of the last one.
        #[source]
        source: io::Error,
    },
}

impl ListenError {
    /// The `ListenError` inside an error [`Server::listen`](super::Server::listen)
    /// returned, if that is what it holds.
    pub fn of(e: &io::Error) -> Option<&ListenError> {
        e.get_ref()?.downcast_ref()
    }

    fn into_io(self) -> io::Error {
        let kind = match &self {
            ListenError::Resolve { source }
            | ListenError::Bind { source, .. }
            | ListenError::BindUnix { source, .. } => source.kind(),
        };
        io::Error::new(kind, self)
    }
}

pub(crate) async fn listen(
    shared: Arc<ServerShared>,
    addr: impl tokio::net::ToSocketAddrs,
) -> io::Result<Listener> {
    check_config(&shared)?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|source| ListenError::Resolve { source }.into_io())?
        .collect();
    let tcp = TcpListener::bind(&addrs[..])
        .await
        .map_err(|source| ListenError::Bind { addrs, source }.into_io())?;
    serve(shared, tcp).await
}

/// A configuration the server cannot run with, as an `InvalidInput` error.
fn check_config(shared: &ServerShared) -> io::Result<()> {
    shared
        .core
        .config
        .validate_for_websocket()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// The first and the longest wait after a failed accept.
const ACCEPT_BACKOFF_MIN: std::time::Duration = std::time::Duration::from_millis(10);
const ACCEPT_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// How often a listener that keeps failing to accept says so: the failures
/// in between are counted in the next warning.
const ACCEPT_WARN_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

/// `EMFILE` and `ENFILE` (the same numbers on Linux, macOS and the BSDs).
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

/// What the warning about `EMFILE` says to do.
const OUT_OF_FDS_HINT: &str = "each session takes one file descriptor; raise the process's \
    open-files limit (RLIMIT_NOFILE): `ulimit -n N` in the shell that starts the server, \
    LimitNOFILE=N in its systemd unit; open sessions are still served";

/// What the warning about `ENFILE` says to do.
const FILE_TABLE_HINT: &str = "raise the system's limit (sysctl fs.file-max) or close other \
    programs' files; open sessions are still served";

/// A listener's run of failed accepts: when it last warned, and the
/// failures since.
#[derive(Default)]
struct AcceptTrouble {
    warned_at: Option<std::time::Instant>,
    /// Failures since the last warning (not counting the one it was about).
    unreported: u64,
    /// Failures since the last accepted connection.
    run: u64,
}

impl AcceptTrouble {
    /// Logs a failed accept, at most once per [`ACCEPT_WARN_INTERVAL`]
    /// (`warn`), saying what to do when it is the descriptor limit.
    fn failed(&mut self, e: &io::Error, retry_in: std::time::Duration) {
        self.run += 1;
        let now = std::time::Instant::now();
        if self
            .warned_at
            .is_some_and(|at| now.duration_since(at) < ACCEPT_WARN_INTERVAL)
        {
            self.unreported += 1;
            return;
        }
        self.warned_at = Some(now);
        let also_failed = std::mem::take(&mut self.unreported);
        let retry_in_ms = retry_in.as_millis() as u64;
        match e.raw_os_error() {
            Some(EMFILE) => {
                let (limit, hard) = open_files_limit();
                tracing::warn!(error = %e, open_files_limit = limit, hard_limit = hard,
                    also_failed, retry_in_ms, hint = OUT_OF_FDS_HINT,
                    "cannot accept connections: out of file descriptors");
            }
            Some(ENFILE) => {
                tracing::warn!(error = %e, also_failed, retry_in_ms, hint = FILE_TABLE_HINT,
                    "cannot accept connections: the system's file table is full");
            }
            _ => {
                tracing::warn!(error = %e, also_failed, retry_in_ms, "cannot accept a connection");
            }
        }
    }

    /// Notes an accepted connection: after failures, says so (`info`).
    fn recovered(&mut self) {
        if self.run > 0 {
            tracing::info!(failed = self.run, "accepting connections again");
            *self = AcceptTrouble::default();
        }
    }
}

/// The soft and hard `RLIMIT_NOFILE` (0 when unknown).
fn open_files_limit() -> (u64, u64) {
    #[cfg(target_os = "linux")]
    {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given, nothing else.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
            // `rlim_t` is not `u64` on every Linux target.
            #[allow(clippy::unnecessary_cast)]
            return (r.rlim_cur as u64, r.rlim_max as u64);
        }
    }
    (0, 0)
}

/// Starts a listener on the Unix domain socket `path` (see module `unix`
/// for stale sockets and permissions).
pub(crate) async fn listen_unix(shared: Arc<ServerShared>, path: &Path) -> io::Result<Listener> {
    check_config(&shared)?;
    let (unix, file) = super::unix::bind(path).await.map_err(|(source, hint)| {
        ListenError::BindUnix {
            path: path.to_path_buf(),
            source,
            hint,
        }
        .into_io()
    })?;
    start(
        shared,
        Accepting::Unix {
            listener: unix,
            _file: Some(file),
        },
    )
    .await
}

/// Accepts connections on a bound listener until stopped or shut down.
pub(crate) async fn serve(shared: Arc<ServerShared>, tcp: TcpListener) -> io::Result<Listener> {
    start(shared, Accepting::Tcp(tcp)).await
}

/// Accepts connections on a Unix domain socket bound by the caller (its
/// file is left in place when the listener stops).
pub(crate) async fn serve_unix(
    shared: Arc<ServerShared>,
    unix: UnixListener,
) -> io::Result<Listener> {
    start(
        shared,
        Accepting::Unix {
            listener: unix,
            _file: None,
        },
    )
    .await
}

/// A bound socket accepting connections.
enum Accepting {
    Tcp(TcpListener),
    /// With the socket file to remove when accepting ends, when we made it.
    Unix {
        listener: UnixListener,
        _file: Option<SocketFile>,
    },
}

/// An accepted connection's socket, before any handshake.
enum Accepted {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Accepting {
    async fn accept(&self) -> io::Result<(Accepted, String)> {
        match self {
            Accepting::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                Ok((Accepted::Tcp(s), peer.to_string()))
            }
            Accepting::Unix { listener: l, .. } => {
                let (s, _) = l.accept().await?;
                // Peers of a listening socket are almost always unnamed:
                // the credentials say who connected.
                let peer = match s.peer_cred() {
                    Ok(c) => format!("unix:pid={:?},uid={}", c.pid(), c.uid()),
                    Err(_) => "unix".to_string(),
                };
                Ok((Accepted::Unix(s), peer))
            }
        }
    }
}

async fn start(shared: Arc<ServerShared>, accepting: Accepting) -> io::Result<Listener> {
    check_config(&shared)?;
    let (local_addr, unix_path, tls, host_names, policy) = match &accepting {
        Accepting::Tcp(tcp) => {
            let local_addr = tcp.local_addr()?;
            let host_names = super::names::machine_names(local_addr.ip()).await;
            let policy = Policy::new(&shared.core.config, local_addr.ip(), host_names.clone());
            let tls = shared.core.config.tls.is_some();
            (local_addr, None, tls, host_names, policy)
        }
        Accepting::Unix { listener: unix, .. } => {
            let path = unix
                .local_addr()?
                .as_pathname()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
            let policy = Policy::unix(&shared.core.config);
            (unspecified, Some(path), false, Vec::new(), policy)
        }
    };
    let policy = Arc::new(policy);
    let (stop, mut stop_rx) = watch::channel(false);
    let mut shutdown_rx = shared.shutdown.subscribe();
    let task = tokio::spawn(async move {
        let mut backoff = ACCEPT_BACKOFF_MIN;
        let mut trouble = AcceptTrouble::default();
        loop {
            let accepted = tokio::select! {
                _ = stop_rx.changed() => break,
                _ = shutdown_rx.changed() => break,
                a = accepting.accept() => a,
            };
            let (stream, peer) = match accepted {
                Ok(a) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    trouble.recovered();
                    a
                }
                Err(e) => {
                    // Out of file descriptors or similar: say so (once per
                    // interval), and back off (doubling up to 1 s) rather
                    // than spin; open sessions are served meanwhile.
                    trouble.failed(&e, backoff);
                    tokio::select! {
                        _ = stop_rx.changed() => break,
                        _ = shutdown_rx.changed() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            };
            let policy = policy.clone();
            let task_shared = shared.clone();
            shared.tasks.spawn(async move {
                serve_connection(task_shared, &policy, stream, peer).await;
            });
        }
        // The socket file (if we made it) goes with the listener.
        drop(accepting);
    });
    Ok(Listener {
        local_addr,
        unix_path,
        tls,
        host_names,
        stop,
        task,
    })
}

async fn serve_connection(
    shared: Arc<ServerShared>,
    policy: &Policy,
    stream: Accepted,
    peer: String,
) {
    // A handshake in progress holds a handshake place, not a connection
    // slot: when all places are taken, the oldest pending handshake is
    // dropped for the newcomer, so silent sockets cannot keep out a peer that
    // completes its handshake at once. The connection slot is taken only
    // once the request has passed the Host, Origin and token checks.
    let slot = shared.guards.handshakes.admit();
    let config = &shared.core.config;
    // A second handle on a plain (not TLS) socket: an evicted handshake is
    // answered `503 Service Unavailable` on it rather than closed in silence
    // (under TLS the answer would have to be encrypted: closed).
    let spare = match &stream {
        Accepted::Tcp(_) if config.tls.is_some() => None,
        Accepted::Tcp(s) => socket2::SockRef::from(s).try_clone().ok(),
        Accepted::Unix(s) => socket2::SockRef::from(s).try_clone().ok(),
    };
    let mut connection = None;
    let policy_check = |req: &RequestHead| {
        policy.check(req)?;
        match shared.connections.clone().try_acquire_owned() {
            Ok(permit) => {
                connection = Some(permit);
                Ok(())
            }
            Err(_) => Err(Refusal::new(
                503,
                "Service Unavailable",
                "too many connections",
            )),
        }
    };
    // Boxed: the handshake's state (TLS included) is freed once it is done,
    // instead of sizing this task's future for the whole session
    // (docs/network.md, "Many sessions").
    let handshake = Box::pin(async {
        match stream {
            Accepted::Tcp(stream) => {
                let _ = stream.set_nodelay(true);
                // [transport: TLS hook] the TLS handshake, when configured, runs under
                // the same timeout and handshake place as the WebSocket upgrade.
                let tls = config.tls.as_ref().map(|t| t.acceptor());
                ws::accept_over(
                    stream,
                    tls,
                    config.max_handshake_bytes,
                    config.max_message_size,
                    policy_check,
                )
                .await
            }
            // Never TLS: the socket file's permissions guard it (SPEC.md).
            Accepted::Unix(stream) => {
                ws::accept(
                    Stream::Unix(stream),
                    config.max_handshake_bytes,
                    config.max_message_size,
                    policy_check,
                )
                .await
            }
        }
    });
    let accepted = tokio::select! {
        r = tokio::time::timeout(config.handshake_timeout, handshake) => r,
        _ = slot.evicted.notified() => {
            tracing::info!(%peer, "connection refused: too many pending handshakes");
            if let Some(spare) = spare {
                // Boxed too: its read buffer must not size the task.
                Box::pin(refuse_evicted(spare)).await;
            }
            return;
        }
    };
    drop(slot);
    drop(spare);
    let (reader, writer) = match accepted {
        Ok(Ok(halves)) => halves,
        Ok(Err(e)) => {
            tracing::info!(%peer, reason = %e, "connection refused");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, "connection refused: handshake timed out");
            return;
        }
    };
    tracing::debug!(%peer, "connection accepted");
    let _connection = connection;
    session::run(shared, Reader::Ws(reader), Writer::Ws(writer))
        .instrument(tracing::info_span!("connection", %peer))
        .await;
}

/// Answers an evicted handshake `503 Service Unavailable` (with
/// `Retry-After: 1`) on the spare handle of its socket, then reads what the
/// peer still sends for at most a second, so that closing does not reset
/// the connection before the answer is read.
async fn refuse_evicted(spare: socket2::Socket) {
    let refusal = {
        let mut r = Refusal::new(
            503,
            "Service Unavailable",
            "too many connections are opening at once (pending handshakes); retry",
        );
        r.extra_headers.push(("Retry-After", "1"));
        r
    };
    let answer = async {
        if spare.set_nonblocking(true).is_err() {
            return;
        }
        let is_unix = spare.local_addr().is_ok_and(|a| a.is_unix());
        if is_unix {
            let std: std::os::unix::net::UnixStream = spare.into();
            if let Ok(mut s) = UnixStream::from_std(std) {
                ws::write_refusal(&mut s, &refusal).await;
                drain(&mut s).await;
            }
        } else {
            let std: std::net::TcpStream = spare.into();
            if let Ok(mut s) = TcpStream::from_std(std) {
                ws::write_refusal(&mut s, &refusal).await;
                drain(&mut s).await;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), answer).await;
}

/// Reads and drops what a refused peer still sends, until it closes (or 64
/// KiB, or the caller's timeout).
async fn drain<S: tokio::io::AsyncRead + Unpin>(s: &mut S) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// Who may connect (the relay, `crate::relay`, applies the same checks).
#[derive(Clone)]
pub(crate) struct Policy {
    /// A Unix domain socket listener: `Host` is not checked (no browser
    /// reaches a socket file, so DNS rebinding cannot either).
    any_host: bool,
    token: Option<String>,
    origins: Vec<String>,
    /// `--allow-host` names (lowercase).
    hosts: Vec<String>,
    /// Whether the listener is bound to a loopback address: then only
    /// loopback names and IP addresses pass without `--allow-host`.
    loopback: bool,
    /// The names this machine answers to (lowercase), accepted when the
    /// listener is not bound to loopback.
    machine_names: Vec<String>,
}

impl Policy {
    /// The policy of a listener bound to `bind` on a machine called
    /// `machine_names` (which a loopback bind ignores).
    pub(crate) fn new(c: &super::ServerConfig, bind: IpAddr, machine_names: Vec<String>) -> Policy {
        let loopback = bind.is_loopback();
        Policy {
            any_host: false,
            token: c.token.clone(),
            origins: c
                .allowed_origins
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            hosts: c
                .allowed_hosts
                .iter()
                .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            loopback,
            machine_names: if loopback {
                Vec::new()
            } else {
                machine_names
                    .iter()
                    .map(|n| n.trim_end_matches('.').to_ascii_lowercase())
                    .collect()
            },
        }
    }

    /// The policy of a Unix domain socket listener: any `Host`; Origin and
    /// token as on a loopback TCP listener.
    fn unix(c: &super::ServerConfig) -> Policy {
        Policy {
            any_host: true,
            ..Policy::new(c, IpAddr::from([127, 0, 0, 1]), Vec::new())
        }
    }

    /// Host, Origin and token checks, before the upgrade.
    pub(crate) fn check(&self, req: &RequestHead) -> Result<(), Refusal> {
        self.check_host_origin(req.header("host"), req.header("origin"))?;
        self.check_token(req)
    }

    /// The DNS-rebinding guard: the `Host` header and, when sent, `Origin`.
    fn check_host_origin(&self, host: Option<&str>, origin: Option<&str>) -> Result<(), Refusal> {
        let host = host.unwrap_or("");
        if !self.any_host && !self.host_allowed(host) {
            return Err(Refusal::new(403, "Forbidden", self.host_refusal(host)));
        }
        if let Some(origin) = origin {
            if !self.origin_allowed(origin) {
                let shown: String = origin.chars().take(200).collect();
                return Err(Refusal::new(
                    403,
                    "Forbidden",
                    format!(
                        "Origin not allowed: '{shown}' is not a loopback origin; start the server with --allow-origin {} (ServerConfig::allowed_origins) to accept it",
                        flag_value(origin.trim().trim_end_matches('/'), "ORIGIN")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The bearer token, when the server has one.
    fn check_token(&self, req: &RequestHead) -> Result<(), Refusal> {
        if let Some(token) = &self.token {
            let given = req
                .header("authorization")
                .and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
                .unwrap_or("");
            if !constant_time_eq(given.trim().as_bytes(), token.as_bytes()) {
                let what = if given.is_empty() { "missing" } else { "wrong" };
                let mut r = Refusal::new(
                    401,
                    "Unauthorized",
                    format!(
                        "{what} bearer token: this server requires the header 'Authorization: Bearer TOKEN' with the token it was started with (unienv-remote clients: --token TOKEN)"
                    ),
                );
                r.extra_headers.push(("WWW-Authenticate", "Bearer"));
                return Err(r);
            }
        }
        Ok(())
    }

    /// Whether the `Host` header `host` (`name[:port]`) may connect: an IP
    /// address or a loopback name always; a name given by `--allow-host`
    /// (or `*`); for a non-loopback bind, a name this machine answers to.
    /// Other DNS names could be an attacker's, rebound to this address.
    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        if host.is_empty() {
            return false;
        }
        if self.hosts.iter().any(|h| h == "*" || *h == host) {
            return true;
        }
        let name = split_host(&host).trim_end_matches('.');
        if self.hosts.iter().any(|h| h == name) {
            return true;
        }
        // DNS rebinding needs a DNS name: IP literals and localhost are safe.
        name == "localhost"
            || name.ends_with(".localhost")
            || name.parse::<IpAddr>().is_ok()
            || self.machine_names.iter().any(|n| n == name)
    }

    /// The 403 body for a refused `Host`: why, and the flag that accepts it.
    fn host_refusal(&self, host: &str) -> String {
        let shown: String = host.trim().chars().take(200).collect();
        if shown.is_empty() {
            return "Host not allowed: the request has no Host header (HTTP/1.1 requires one); send the name or address the client connects to".into();
        }
        let fix = format!(
            "start the server with --allow-host {} (ServerConfig::allowed_hosts) to accept it",
            flag_value(split_host(&shown.to_ascii_lowercase()), "NAME")
        );
        if self.loopback {
            format!(
                "Host not allowed: '{shown}' is a DNS name, and a server bound to loopback accepts only localhost and IP addresses (a DNS-rebinding guard); {fix}"
            )
        } else {
            let known = if self.machine_names.is_empty() {
                "none found".to_string()
            } else {
                self.machine_names.join(", ")
            };
            format!(
                "Host not allowed: '{shown}' is neither an IP address nor a name of this machine ({known}) (a DNS-rebinding guard); {fix}"
            )
        }
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        if self.origins.iter().any(|o| o == "*" || *o == origin) {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        if !matches!(scheme, "http" | "https") {
            return false;
        }
        let name = split_host(rest);
        name == "localhost"
            || name.ends_with(".localhost")
            || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// What another HTTP endpoint of the server (the metrics endpoint) bound
/// to `bind` checks before it answers: the `Host` header and any `Origin`,
/// as a listener bound there does (the DNS-rebinding guard; no token).
pub(crate) async fn host_guard(
    config: &super::ServerConfig,
    bind: IpAddr,
) -> crate::metrics::HostGuard {
    let names = super::names::machine_names(bind).await;
    let policy = Policy::new(config, bind, names);
    Arc::new(move |host, origin| {
        policy
            .check_host_origin(host, origin)
            .map_err(|r| (r.status, r.reason, r.message))
    })
}

/// `value` as a command-line argument when it is plainly one (letters,
/// digits, `.-_:/[]`), else `placeholder`: a refusal never echoes arbitrary
/// bytes into a suggested command.
fn flag_value<'a>(value: &'a str, placeholder: &'a str) -> &'a str {
    let plain = !value.is_empty()
        && value.len() <= 200
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:/[]".contains(&b));
    if plain {
        value
    } else {
        placeholder
    }
}

/// The host name of `host[:port]` or `[v6]:port` (brackets removed).
fn split_host(s: &str) -> &str {
    if let Some(rest) = s.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match s.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => s,
    }
}

/// Compares secrets without an early exit on the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..n {
        diff |= (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0)) as u64;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> crate::server::ServerConfig {
        crate::server::ServerConfig {
            allowed_origins: vec!["https://dash.example".into()],
            allowed_hosts: vec!["sim.lan".into()],
            ..Default::default()
        }
    }

    fn policy() -> Policy {
        Policy::new(&config(), IpAddr::from([127, 0, 0, 1]), Vec::new())
    }

    fn names() -> Vec<String> {
        vec!["farm-a".into(), "farm-a.lab.example".into()]
    }

    #[test]
    fn hosts() {
        let p = policy();
        for ok in [
            "127.0.0.1:80",
            "localhost:9",
            "[::1]:1",
            "10.0.0.2:5",
            "sim.lan:7",
            "SIM.LAN",
            "sim.lan.:7",
        ] {
            assert!(p.host_allowed(ok), "{ok}");
        }
        for bad in [
            "",
            "evil.example:80",
            "localhost.evil.example",
            "rebind.attacker.test:1",
        ] {
            assert!(!p.host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn a_non_loopback_bind_accepts_the_machine_names() {
        for bind in ["10.0.0.5", "0.0.0.0", "::", "fd00::2"] {
            let p = Policy::new(&config(), bind.parse().unwrap(), names());
            for ok in [
                "farm-a:8765",
                "FARM-A.lab.example",
                "farm-a.lab.example.:1",
                "sim.lan",
                "10.0.0.5:8765",
                "localhost",
            ] {
                assert!(p.host_allowed(ok), "{bind} {ok}");
            }
            for bad in [
                "evil.example:8765",
                "farm-a.evil.example",
                "lab.example",
                "",
            ] {
                assert!(!p.host_allowed(bad), "{bind} {bad}");
            }
            let body = p.host_refusal("evil.example:8765");
            assert!(
                body.contains("--allow-host evil.example ")
                    && body.contains("(farm-a, farm-a.lab.example)"),
                "{body}"
            );
        }
    }

    #[test]
    fn a_loopback_bind_keeps_the_rebinding_guard_for_the_machine_names() {
        for bind in ["127.0.0.1", "::1", "127.0.0.2"] {
            let p = Policy::new(&config(), bind.parse().unwrap(), names());
            assert!(!p.host_allowed("farm-a:8765"), "{bind}");
            assert!(!p.host_allowed("farm-a.lab.example"), "{bind}");
            assert!(p.host_allowed("sim.lan"), "{bind}");
            let body = p.host_refusal("farm-a:8765");
            assert!(
                body.contains("bound to loopback") && body.contains("--allow-host farm-a "),
                "{body}"
            );
        }
    }

    #[test]
    fn refusals_name_the_flag_and_never_echo_odd_bytes_into_it() {
        let p = policy();
        let body = p.host_refusal("we ird\"name");
        assert!(body.contains("--allow-host NAME "), "{body}");
        assert!(p.host_refusal("").contains("no Host header"));
        let p = Policy::new(&config(), IpAddr::from([10, 0, 0, 5]), Vec::new());
        assert!(p.host_refusal("x.example").contains("(none found)"));
        assert_eq!(
            flag_value("https://a.example:8", "O"),
            "https://a.example:8"
        );
        assert_eq!(flag_value("a b", "O"), "O");
        assert_eq!(flag_value("", "O"), "O");
    }

    #[test]
    fn origins() {
        let p = policy();
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8",
            "https://dash.example/",
        ] {
            assert!(p.origin_allowed(ok), "{ok}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://10.0.0.2:80",
            "file://localhost",
            "http://localhost.evil.test",
        ] {
            assert!(!p.origin_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn constant_time() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
