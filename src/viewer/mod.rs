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
//! Each tab gets its own upstream session. Every panel of the page is one
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
//! The wire format between the viewer and its page is in [`frame`].

mod config;
pub mod frame;
mod http;
mod page;
mod panel;
mod tab;
#[cfg(test)]
mod tests;

pub use config::ViewerConfig;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The default address of the viewer's web app.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8766";

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
#[derive(Debug)]
pub struct Viewer {
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl Viewer {
    /// Binds `listen` and serves the viewer of `config.upstream` there
    /// (inside a tokio runtime). Connections to the upstream server are
    /// made per open tab, so a server that is not up yet is not an error.
    pub async fn start(listen: &str, config: ViewerConfig) -> Result<Viewer, ViewerError> {
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
        let config = Arc::new(config);
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                tokio::spawn(http::handle_connection(stream, config.clone()));
            }
        });
        Ok(Viewer { addr, accept })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL, `http://HOST:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
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
