//! How a viewer connects upstream and which pages it serves.

use crate::client::{Client, ClientConfig, ClientResult};
use crate::server::Server;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How a viewer connects and whom it serves.
#[derive(Clone)]
pub struct ViewerConfig {
    /// The UniEnv server, `ws://HOST:PORT`.
    pub upstream: String,
    /// The bearer token for the UniEnv server (never sent to the page).
    pub token: Option<String>,
    /// Timeout of the upstream connection and of each request.
    pub timeout: Option<Duration>,
    /// Host header names accepted besides IP literals and `localhost`
    /// (`*` accepts any).
    pub allowed_hosts: Vec<String>,
    /// Origins accepted on the WebSocket besides the page's own (`*`
    /// accepts any).
    pub allowed_origins: Vec<String>,
    /// For a `wss://` upstream: also trust the CA certificates in this PEM
    /// file (as [`ClientConfig::ca_file`]).
    pub ca_file: Option<PathBuf>,
    /// For a `wss://` upstream: a whole rustls client configuration (as
    /// [`ClientConfig::tls`]; takes precedence over `ca_file`).
    pub tls: Option<Arc<tokio_rustls::rustls::ClientConfig>>,
    /// Reach this server in process instead of at `upstream` (which is then
    /// only shown): each tab's session is an in-memory connection, so no
    /// token, certificate or connection slot is involved (`serve --viewer`).
    pub in_process: Option<Server>,
}

impl ViewerConfig {
    /// A viewer of `upstream` with the default checks and a 30 s timeout.
    pub fn new(upstream: impl Into<String>) -> ViewerConfig {
        ViewerConfig {
            upstream: upstream.into(),
            token: None,
            timeout: Some(Duration::from_secs(30)),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            ca_file: None,
            tls: None,
            in_process: None,
        }
    }

    pub(super) fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::default()
            .with_timeout(self.timeout)
            .with_discover(false);
        config.token = self.token.clone();
        config.ca_file = self.ca_file.clone();
        config.tls = self.tls.clone();
        config
    }

    /// A new session with the upstream server (in process or at its URL).
    pub(super) async fn connect(&self) -> ClientResult<Client> {
        match &self.in_process {
            Some(server) => {
                Client::over_memory(server.connect_memory(), self.client_config()).await
            }
            None => Client::connect(&self.upstream, self.client_config()).await,
        }
    }
}

impl std::fmt::Debug for ViewerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViewerConfig")
            .field("upstream", &self.upstream)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("timeout", &self.timeout)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("ca_file", &self.ca_file)
            .field("tls", &self.tls.as_ref().map(|_| "<rustls config>"))
            .field("in_process", &self.in_process.is_some())
            .finish()
    }
}
