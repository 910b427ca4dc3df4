//! How a viewer connects upstream and which pages it serves.

use crate::client::ClientConfig;
use std::time::Duration;

/// How a viewer connects and whom it serves.
#[derive(Debug, Clone)]
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
        }
    }

    pub(super) fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::default()
            .with_timeout(self.timeout)
            .with_discover(false);
        config.token = self.token.clone();
        config
    }
}
