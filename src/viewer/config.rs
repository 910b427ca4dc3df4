//! How a viewer connects upstream and which pages it serves.

use crate::client::{Client, ClientConfig, ClientResult};
use crate::server::Server;
use std::time::Duration;

/// How a viewer connects and whom it serves.
#[derive(Clone)]
pub struct ViewerConfig {
    /// The UniEnv server, `ws://HOST:PORT` or `wss://HOST:PORT`.
    pub upstream: String,
    /// How each tab connects to it: bearer token (never sent to the page),
    /// timeout, and for `wss://` a CA file or a whole rustls configuration.
    /// Its `discover` is ignored: a tab lists the resources itself.
    pub client: ClientConfig,
    /// Host header names accepted besides IP literals and `localhost`
    /// (`*` accepts any).
    pub allowed_hosts: Vec<String>,
    /// Origins accepted on the WebSocket besides the page's own (`*`
    /// accepts any).
    pub allowed_origins: Vec<String>,
    /// Reach this server in process instead of at `upstream` (which is then
    /// only shown): each tab's session is an in-memory connection, so no
    /// token, certificate or connection slot is involved (`serve --viewer`).
    pub in_process: Option<Server>,
    /// The viewer's own credential: the page (and `/ws`) is served only to
    /// a browser that presents it, in the URL the viewer prints
    /// (`?key=KEY`, then kept in a cookie) or in that cookie. `None`: a
    /// random per-start key is made when one is needed, i.e. when the
    /// upstream server has a token or the viewer listens on a non-loopback
    /// address; otherwise the page is open to this machine.
    pub key: Option<String>,
    /// Most tabs (page WebSockets) open at once (default 16); more are
    /// refused (503). All tabs share one upstream session, so tabs never
    /// take the upstream server's connection slots.
    pub max_tabs: usize,
    /// A page socket silent for this long is pinged (default 20 s; `None`
    /// disables the heartbeat).
    pub heartbeat_interval: Option<Duration>,
    /// A page socket from which nothing (not even a pong) arrived for this
    /// long is closed, and its panels unsubscribed (default 60 s).
    pub heartbeat_timeout: Duration,
    /// `upstream` is a relay's root (`ws://RELAY`; SPEC.md, "Relay and
    /// dial-out hosts"): the page at `/` lists the hosts connected to it,
    /// and `/hosts/NAME/` is the viewer of the host `NAME`, through the
    /// relay, with an upstream session of its own (shared by that host's
    /// tabs). `client`'s token is the relay's client token.
    pub relay: bool,
}

impl ViewerConfig {
    /// A viewer of `upstream` with the default checks and the client's
    /// defaults (a 30 s timeout).
    pub fn new(upstream: impl Into<String>) -> ViewerConfig {
        ViewerConfig {
            upstream: upstream.into(),
            client: ClientConfig::default(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            in_process: None,
            key: None,
            max_tabs: 16,
            heartbeat_interval: Some(Duration::from_secs(20)),
            heartbeat_timeout: Duration::from_secs(60),
            relay: false,
        }
    }

    /// Whether the upstream server has a token (given to the viewer, or the
    /// in-process server's own).
    pub(super) fn upstream_has_token(&self) -> bool {
        self.client.token.is_some()
            || self
                .in_process
                .as_ref()
                .is_some_and(|s| s.config().token.is_some())
    }

    /// A new session with the upstream server (in process or at its URL).
    pub(super) async fn connect(&self) -> ClientResult<Client> {
        let config = self.client.clone().with_discover(false);
        match &self.in_process {
            Some(server) => Client::over_memory(server.connect_memory(), config).await,
            None => Client::connect(&self.upstream, config).await,
        }
    }
}

impl std::fmt::Debug for ViewerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewerConfig")
            .field("upstream", &self.upstream)
            .field("token", &self.client.token.as_ref().map(|_| "<set>"))
            .field("timeout", &self.client.timeout)
            .field("ca_file", &self.client.ca_file)
            .field("tls", &self.client.tls.as_ref().map(|_| "<rustls config>"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("in_process", &self.in_process.is_some())
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .field("max_tabs", &self.max_tabs)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("heartbeat_timeout", &self.heartbeat_timeout)
            .field("relay", &self.relay)
            .finish()
    }
}
