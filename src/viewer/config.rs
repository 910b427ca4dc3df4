//! How a viewer connects upstream and which pages it serves.

use crate::client::{Client, ClientConfig, ClientResult};
use crate::server::Server;

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
        }
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
            .finish()
    }
}
