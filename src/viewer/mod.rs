//! The browser viewer: a local web app showing any UniEnv server's resources
//! and live boundary snapshots (`unienv-remote view`, `serve --viewer`).
//!
//! The viewer is an ordinary client of the UniEnv server (ours or the
//! reference): it holds the token, and the browser talks only to the viewer.
//! It serves the page's files (embedded in the binary) over HTTP and one
//! WebSocket per open tab at `/ws`, using the crate's own WebSocket layer.
//! Like the server, it accepts only Host headers that cannot come from DNS
//! rebinding (IP literals, `localhost`, or names allowed explicitly) and, on
//! the WebSocket, only the page's own origin (or origins allowed
//! explicitly).
//!
//! The viewer is as closed as the server it shows (see `access.rs` for the
//! details): when the upstream server has a token, or the viewer listens
//! beyond loopback, every request needs the viewer's own key, which the
//! URL printed at start carries once and a cookie keeps. Tabs are capped
//! ([`ViewerConfig::max_tabs`]), a tab's page socket has a heartbeat, and
//! all tabs share one upstream session, so the viewer holds one of the
//! server's connection slots however many tabs are open. Connections that
//! have not sent their request head are capped (the oldest is dropped) and
//! must send it within 10 s; the head is read as it arrives (no polling).
//! Each tab may hold at most [`MAX_PANELS`] panels, its panels share a
//! frame rate (see `panel_task`), and all tabs share [`MAX_RENDERS`]
//! places for one-shot renders, each held at least [`RENDER_SPACING`] (a
//! render makes the simulator render at its next boundary: a page asking
//! for renders in a loop would make every controller step render).
//!
//! Every panel of the page is one
//! subscription, and the page grants one *credit* per panel each time it has
//! drawn a snapshot: the viewer takes the subscription's latest snapshot only
//! against a credit. The client keeps one undelivered snapshot per
//! subscription and the server one pending snapshot per subscription, so a
//! slow or paused tab drops frames and never builds a queue anywhere.
//! When a domain publishes boundaries much faster than a page can draw, a
//! panel holds its upstream subscription only while the page waits for a
//! frame, so that the viewer's reading costs the simulator's machine one
//! snapshot per drawn frame, not one per boundary (see `panel_task`).
//!
//! In the server's process (`serve --viewer`), the viewer also watches
//! every resource from its start (see `watch.rs`): a panel opens at the
//! resource's last boundary, however long ago it was, an idle resource
//! renders on demand, and each frame carries the episode ends and resets
//! since the page's previous frame, so that the page marks them although
//! it skips frames. A viewer of a remote server (`view URL`) sees only the
//! boundaries made after a panel subscribed (observers receive future
//! boundaries only), and its page says so.
//!
//! A page's commands are read at most 250 a second (a token bucket; a flooding page stalls on its own socket), and
//! its `refresh` is answered at most once a second (the viewer's
//! `discover` too, all tabs together).
//!
//! The wire format between the viewer and its page is in [`frame`].

mod access;
mod config;
pub mod frame;
mod http;
mod page;
mod panel;
mod relay;
mod tab;
#[cfg(test)]
mod tests;
mod upstream;
mod watch;

pub use config::ViewerConfig;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The default address of the viewer's web app.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8766";

/// Most panels (subscriptions) one tab may hold; more are refused.
pub const MAX_PANELS: usize = 32;

/// Most one-shot renders pending at once, all tabs together; more are
/// refused (`too_many_renders`).
pub const MAX_RENDERS: usize = 2;

/// A render holds its place at least this long, so that the viewer asks
/// for at most `MAX_RENDERS` renders per this time.
pub const RENDER_SPACING: Duration = Duration::from_secs(1);

/// Connections that have not sent their whole request head, at most; a
/// new one beyond it drops the oldest.
const MAX_PENDING_HEADS: usize = 64;

/// What the viewer's connections share.
struct ViewerState {
    config: ViewerConfig,
    access: Arc<access::Access>,
    upstream: upstream::Upstream,
    /// One permit per open tab.
    tabs: Arc<tokio::sync::Semaphore>,
    /// Open tabs (for the viewer-wide share of frames).
    open_tabs: Arc<AtomicUsize>,
    /// Connections still sending their request head.
    pending: crate::budget::Handshakes,
    /// One permit per pending render (all tabs).
    renders: Arc<tokio::sync::Semaphore>,
    /// In the server's process: the watch of every resource.
    watcher: Option<watch::Watcher>,
    /// In front of a relay: the viewer of each host a tab views, by name
    /// (see [`ViewerState::host`]).
    hosts: Option<parking_lot::Mutex<HashMap<String, Weak<ViewerState>>>>,
}

impl ViewerState {
    /// In front of a relay, the viewer of the host `name`: its own
    /// upstream session (through the relay, to `/hosts/NAME`), made when a
    /// tab first needs it, shared by that host's tabs and dropped with the
    /// last of them; the tabs, renders and key are the whole viewer's. At
    /// most one per open tab is alive, so the map holds no more (the dead
    /// are pruned as new ones come). `None` when not in front of a relay.
    fn host(&self, name: &str) -> Option<Arc<ViewerState>> {
        let mut hosts = self.hosts.as_ref()?.lock();
        if let Some(live) = hosts.get(name).and_then(Weak::upgrade) {
            return Some(live);
        }
        hosts.retain(|_, h| h.strong_count() > 0);
        let mut config = self.config.clone();
        config.upstream = relay::host_url(&self.config.upstream, name);
        config.relay = false;
        let state = Arc::new(ViewerState {
            config,
            access: self.access.clone(),
            upstream: upstream::Upstream::new(),
            tabs: self.tabs.clone(),
            open_tabs: self.open_tabs.clone(),
            // Heads are read by the whole viewer's state only.
            pending: crate::budget::Handshakes::new(1),
            renders: self.renders.clone(),
            watcher: None,
            hosts: None,
        });
        hosts.insert(name.to_string(), Arc::downgrade(&state));
        Some(state)
    }
}

/// Why the viewer could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewerError {
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The operating system's error.
        message: String,
    },
}

/// A running viewer; dropping it (or [`Viewer::stop`]) stops accepting.
pub struct Viewer {
    addr: SocketAddr,
    accept: JoinHandle<()>,
    key: Option<String>,
}

impl std::fmt::Debug for Viewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Viewer")
            .field("addr", &self.addr)
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl Viewer {
    /// Binds `listen` and serves the viewer of `config.upstream` there
    /// (inside a tokio runtime). Connections to the upstream server are
    /// made per open tab, so a server that is not up yet is not an error.
    pub async fn start(listen: &str, mut config: ViewerConfig) -> Result<Viewer, ViewerError> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| ViewerError::Bind {
                addr: listen.to_string(),
                message: e.to_string(),
            })?;
        let addr = listener.local_addr().map_err(|e| ViewerError::Bind {
            addr: listen.to_string(),
            message: e.to_string(),
        })?;
        let loopback = addr.ip().is_loopback();
        let token = config.upstream_has_token();
        if config.key.is_none() && (token || !loopback) {
            config.key = Some(access::new_key());
        }
        if !loopback {
            tracing::warn!(
                %addr,
                "the viewer listens beyond loopback over plain HTTP: anyone on the network who sees its URL (and key) in transit can use it; prefer 127.0.0.1 and an SSH tunnel"
            );
        }
        let state = Arc::new(ViewerState {
            access: Arc::new(access::Access::new(config.key.clone(), addr.port())),
            upstream: upstream::Upstream::new(),
            tabs: Arc::new(tokio::sync::Semaphore::new(config.max_tabs.max(1))),
            open_tabs: Arc::new(AtomicUsize::new(0)),
            pending: crate::budget::Handshakes::new(MAX_PENDING_HEADS),
            renders: Arc::new(tokio::sync::Semaphore::new(MAX_RENDERS)),
            watcher: config
                .in_process
                .is_some()
                .then(|| watch::Watcher::start(config.clone())),
            hosts: (config.relay && config.in_process.is_none())
                .then(|| parking_lot::Mutex::new(HashMap::new())),
            config,
        });
        let key = state.access.key().map(str::to_string);
        let accept = tokio::spawn(async move {
            let mut backoff = Duration::from_millis(10);
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        backoff = Duration::from_millis(10);
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(http::handle_connection(stream, state.clone()));
                    }
                    Err(e) => {
                        // Out of file handles or similar: back off (up to
                        // 1 s) and say so.
                        tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64,
                            "viewer: cannot accept a connection");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(1));
                    }
                }
            }
        });
        Ok(Viewer { addr, accept, key })
    }

    /// The viewer's key, when it requires one (see [`ViewerConfig::key`]).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL, `http://HOST:PORT/`, with `?key=KEY` when the
    /// viewer requires its key: the URL to open (and to print).
    pub fn url(&self) -> String {
        match &self.key {
            Some(key) => format!("http://{}/?key={key}", self.addr),
            None => format!("http://{}/", self.addr),
        }
    }

    /// The page's URL opening a panel for each of `ids` (the page's
    /// `watch` parameter: `?watch=A,B`, or `?key=KEY&watch=A,B`), each id
    /// percent-encoded for a query.
    pub fn watch_url(&self, ids: &[&str]) -> String {
        let ids: Vec<String> = ids.iter().map(|id| query_quote(id)).collect();
        let joiner = if self.key.is_some() { '&' } else { '?' };
        format!("{}{joiner}watch={}", self.url(), ids.join(","))
    }

    /// Stops accepting connections (open tabs keep their sessions until
    /// they close).
    pub fn stop(&self) {
        self.accept.abort();
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// `id` percent-encoded for a URL's query (unreserved characters and `/`
/// kept; `,` encoded, as it separates the page's `watch` ids).
fn query_quote(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
