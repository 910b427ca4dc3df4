//! The viewer's one upstream session, shared by all its tabs: however many
//! tabs are open, the viewer holds one connection slot of the upstream
//! server (and one file handle for it), so tabs can never take the slots
//! that token holders need. It is made when a tab needs it, made again
//! (by one tab, the others waiting for it) when lost, and closed when the
//! last tab closes.

use super::config::ViewerConfig;
use super::page::error_json;
use crate::client::{Client, ClientResult, Descriptor};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Between attempts to reach a lost upstream server.
pub(super) const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// Requests the viewer has outstanding upstream at once, at most: well
/// under the server's queue of unread responses (64 in ours), so that the
/// viewer's session is never closed by its own server for not reading.
pub(super) const MAX_UPSTREAM_REQUESTS: usize = 32;

/// A tab's `refresh` is answered at most once per this (later ones are
/// answered together when it has passed), and the viewer asks its server
/// for the list (`discover`) at most once per this, all tabs together: a
/// page sending `refresh` in a loop costs the server one `discover` a
/// second.
pub(super) const REFRESH_SPACING: Duration = Duration::from_secs(1);

/// The resources as last listed, and when.
type Listing = Option<(Instant, Arc<Vec<Arc<Descriptor>>>)>;

/// The shared session and the last failure to make one.
pub(super) struct Upstream {
    state: Mutex<State>,
    requests: Arc<Semaphore>,
    /// The last `discover`'s answer (any tab's).
    listing: Mutex<Listing>,
}

#[derive(Default)]
struct State {
    client: Option<Client>,
    /// The last failure (code, message) and when: tabs asking again within
    /// [`RECONNECT_DELAY`] get it without another attempt.
    failed: Option<(Instant, (String, String))>,
    /// Open tabs.
    tabs: usize,
}

impl Upstream {
    pub(super) fn new() -> Upstream {
        Upstream {
            state: Mutex::new(State::default()),
            requests: Arc::new(Semaphore::new(MAX_UPSTREAM_REQUESTS)),
            listing: Mutex::new(None),
        }
    }

    /// A place for one request upstream (held until its reply).
    pub(super) async fn request(&self) -> OwnedSemaphorePermit {
        // The semaphore is never closed.
        loop {
            if let Ok(permit) = self.requests.clone().acquire_owned().await {
                return permit;
            }
        }
    }

    /// The server's resources: `client`'s `discover`, or the last one's
    /// answer when it is younger than [`REFRESH_SPACING`] (tabs asking
    /// while one `discover` is under way wait for it and share its answer).
    pub(super) async fn discover(
        &self,
        client: &Client,
    ) -> ClientResult<Arc<Vec<Arc<Descriptor>>>> {
        let mut listing = self.listing.lock().await;
        if let Some((at, list)) = listing.as_ref() {
            if at.elapsed() < REFRESH_SPACING {
                return Ok(list.clone());
            }
        }
        let permit = self.request().await;
        let list = Arc::new(client.discover().await?);
        drop(permit);
        *listing = Some((Instant::now(), list.clone()));
        Ok(list)
    }

    /// The session, made (once for all tabs) when there is none or it was
    /// lost; on failure the error's code and message.
    pub(super) async fn client(&self, config: &ViewerConfig) -> Result<Client, (String, String)> {
        let mut state = self.state.lock().await;
        if let Some(client) = state.client.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        if let Some((at, error)) = &state.failed {
            if at.elapsed() < RECONNECT_DELAY {
                return Err(error.clone());
            }
        }
        if let Some(old) = state.client.take() {
            old.close().await;
        }
        match config.connect().await {
            Ok(client) => {
                state.failed = None;
                state.client = Some(client.clone());
                Ok(client)
            }
            Err(e) => {
                let error = error_json(&e);
                tracing::warn!(upstream = %config.upstream, code = %error.0, message = %error.1,
                    "viewer: cannot reach the UniEnv server");
                state.failed = Some((Instant::now(), error.clone()));
                Err(error)
            }
        }
    }

    /// A tab opened.
    pub(super) async fn tab_opened(&self) {
        self.state.lock().await.tabs += 1;
    }

    /// A tab closed: the last one closes the session.
    pub(super) async fn tab_closed(&self) {
        let mut state = self.state.lock().await;
        state.tabs = state.tabs.saturating_sub(1);
        if state.tabs == 0 {
            if let Some(client) = state.client.take() {
                client.close().await;
            }
        }
    }
}
