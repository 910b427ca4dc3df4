//! Forwarding one client session: WebSocket messages both ways, as they
//! are (never decoded), each charged to the session's byte budget from its
//! arrival until it is written on, within the message size limit; the
//! relay answers pings on each side and watches both with heartbeats.
//!
//! Data frames are written on exactly as they arrived, header and masking
//! key included: the client's frames are masked, and the host frames its
//! tunnel as a server (it takes masked frames and sends unmasked ones), so
//! each side receives frames masked as its role expects and the relay
//! neither unmasks, masks, re-frames nor copies a payload. One task per
//! session reads both sides and writes each frame at once, in one write
//! (the whole frames a read brought together, in one write).
//!
//! A wake of the task polls only what woke it: the two pumps and one
//! watch (both heartbeats, the host's registration, the relay's shutdown)
//! are three futures with wakers of their own, so a forwarded message polls
//! its pump alone; the watch runs on its timers and flags. The task is not
//! instrumented with its connection's span (entering it on every poll
//! costs as much as a quarter of a forwarded message); its events name the
//! span as their parent instead.

use super::{HostEntry, Shared};
use crate::budget::Account;
use crate::transport::ws::{WsReader, WsWriter};
use crate::transport::TransportError;
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;

/// A host's tunnel connection, with its connection slot.
pub(crate) struct Tunnel {
    pub(crate) reader: WsReader,
    pub(crate) writer: WsWriter,
    pub(crate) _permit: OwnedSemaphorePermit,
}

/// A close frame's code and reason (`None`: a bare close).
type Close = Option<(u16, String)>;

/// How forwarding ended.
enum End {
    /// The client's side failed or closed (reading it, or writing to it).
    Client(TransportError, bool),
    /// The host's side failed or closed.
    Host(TransportError, bool),
    /// The client was silent past the heartbeat timeout.
    ClientSilent,
    /// The host's tunnel was silent past the heartbeat timeout.
    HostSilent,
    /// The host's registration ended.
    Gone,
    /// The relay is shutting down.
    Shutdown,
}

/// Copies data frames from `from` to `to` until either fails: `(error,
/// true)` when reading failed, `(error, false)` when writing did. The
/// whole frames one read brought are written on together.
async fn pump(from: &mut WsReader, to: &mut WsWriter) -> (TransportError, bool) {
    loop {
        let frame = match from.recv_frames().await {
            Ok(f) => f,
            Err(e) => return (e, true),
        };
        // Held until the frame is written on: a peer that does not read
        // holds its budget, and then its sender waits or is refused.
        let charge = from.take_charge();
        if let Err(e) = to.write_raw(&frame).await {
            return (e, false);
        }
        drop(charge);
    }
}

/// Forwards between a client and its tunnel until either ends, then closes
/// both: the client is told at once when its host's registration ends.
/// `span`: the client connection's, the parent of the session's events.
pub(crate) async fn run(
    shared: Arc<Shared>,
    host: Arc<HostEntry>,
    client: (WsReader, WsWriter, OwnedSemaphorePermit),
    tunnel: Tunnel,
    span: tracing::Span,
) {
    let config = &shared.config.listen;
    let (mut client_reader, mut client_writer, _client_slot) = client;
    let Tunnel {
        reader: mut host_reader,
        writer: mut host_writer,
        _permit,
    } = tunnel;
    // One budget for the session, both directions (as a server session's
    // one account).
    let account = Account::new(shared.guards.pool.clone(), config.max_connection_bytes);
    client_reader.set_limits(account.clone(), config.message_timeout);
    host_reader.set_limits(account, config.message_timeout);
    host.clients.fetch_add(1, Ordering::Relaxed);
    let name = host.identity.name.clone();
    tracing::debug!(parent: &span, host = %name, "relay: forwarding a client session");
    let (interval, timeout) = (config.heartbeat_interval, config.heartbeat_timeout);
    let client_quiet = client_reader.keepalive().watch(interval, timeout);
    let host_quiet = host_reader.keepalive().watch(interval, timeout);
    let mut gone = host.gone.subscribe();
    let mut shutdown = shared.shutdown.subscribe();
    let end = {
        let up = async {
            let (e, read) = pump(&mut client_reader, &mut host_writer).await;
            End::Client(e, read)
        };
        let down = async {
            let (e, read) = pump(&mut host_reader, &mut client_writer).await;
            End::Host(e, read)
        };
        // Woken only by a timer or a flag, never by traffic.
        let watch = async {
            tokio::select! {
                _ = client_quiet => End::ClientSilent,
                _ = host_quiet => End::HostSilent,
                _ = until(&mut gone) => End::Gone,
                _ = until(&mut shutdown) => End::Shutdown,
            }
        };
        first([Box::pin(up), Box::pin(down), Box::pin(watch)]).await
    };
    host.clients.fetch_sub(1, Ordering::Relaxed);
    let gone_text = format!("host '{name}' disconnected from the relay");
    // (the client's close, the host's close)
    let (to_client, to_host): (Close, Close) = match &end {
        End::Client(e, true) => (
            close_code(e),
            Some((1000, "the client closed its connection".into())),
        ),
        // Writing to the tunnel failed: the host's side is gone.
        End::Client(_, false) => (Some((1001, gone_text.clone())), None),
        End::Host(e, true) => (
            Some((1001, "the host closed this connection".into())),
            close_code(e),
        ),
        End::Host(_, false) => (None, Some((1000, "the client's connection failed".into()))),
        End::ClientSilent => (
            Some((1001, "no heartbeat answer".into())),
            Some((1000, "the client vanished".into())),
        ),
        End::HostSilent => (
            Some((1001, "the host's tunnel went silent".into())),
            Some((1001, "no heartbeat answer".into())),
        ),
        End::Gone => (Some((1001, gone_text.clone())), None),
        End::Shutdown => (
            Some((1001, "relay shutting down".into())),
            Some((1001, "relay shutting down".into())),
        ),
    };
    match &end {
        End::Client(e, _) | End::Host(e, _) => {
            tracing::debug!(parent: &span, host = %name, reason = %e, "relay: client session ended")
        }
        End::Gone => {
            tracing::info!(parent: &span, host = %name, "relay: client closed: its host disconnected")
        }
        _ => tracing::debug!(parent: &span, host = %name, "relay: client session ended"),
    }
    let close_client = client_writer.close(to_client.as_ref().map(|(c, t)| (*c, t.as_str())));
    let close_host = host_writer.close(to_host.as_ref().map(|(c, t)| (*c, t.as_str())));
    // Both at once, bounded: a peer that does not read cannot hold the task.
    let _ = tokio::time::timeout(config.handshake_timeout, async {
        tokio::join!(close_client, close_host)
    })
    .await;
}

/// One of a session's futures.
type Branch<'a> = Pin<Box<dyn Future<Output = End> + Send + 'a>>;

/// The outcome of the first of `branches` to finish; each is polled only
/// when its own waker fired (the others are dropped then).
async fn first(branches: [Branch<'_>; 3]) -> End {
    let mut set: FuturesUnordered<Branch<'_>> = branches.into_iter().collect();
    // Each branch runs until the session ends: the set is never empty
    // before one has finished.
    set.next().await.unwrap_or(End::Shutdown)
}

/// Returns once the flag is set (or its sender is gone); holds no borrow
/// of the flag across its caller's awaits.
async fn until(flag: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

/// Closes with the error's own code (budget, size, framing) when it has
/// one.
fn close_code(e: &TransportError) -> Close {
    e.close_code().map(|c| (c, e.to_string()))
}
