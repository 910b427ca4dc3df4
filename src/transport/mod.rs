//! Transports: whole envelopes in both directions, reliably and in order.
//!
//! - WebSocket (RFC 6455, our own framing in `ws`): one binary message per envelope; a text
//!   message closes the connection; no compression; the message size limit
//!   is enforced by the WebSocket layer before a message is buffered.
//! - TLS (`wss://`, module [`tls`]): the same WebSocket framing over rustls.
//! - In-memory pairs ([`MemoryTransport::pair`]) with 16-message bounded
//!   queues in each direction, for embedding and fast tests.

mod connection;
mod error;
pub mod frame;
mod handshake;
mod keepalive;
pub mod tls;
mod unix_io;
pub(crate) mod ws;

pub use error::TransportError;
pub use tls::{ServerTls, TlsError};
pub use ws::ConnectError;

use bytes::Bytes;
use tokio::sync::mpsc;

/// Capacity of each direction of an in-memory pair, as in the reference.
pub const MEMORY_QUEUE_CAPACITY: usize = 16;

/// One end of an in-memory transport pair.
#[derive(Debug)]
pub struct MemoryTransport {
    tx: mpsc::Sender<Bytes>,
    rx: mpsc::Receiver<Bytes>,
}

impl MemoryTransport {
    /// Two connected ends, each direction a bounded queue of
    /// [`MEMORY_QUEUE_CAPACITY`] messages. A full queue makes the sender wait.
    pub fn pair() -> (MemoryTransport, MemoryTransport) {
        let (a_tx, b_rx) = mpsc::channel(MEMORY_QUEUE_CAPACITY);
        let (b_tx, a_rx) = mpsc::channel(MEMORY_QUEUE_CAPACITY);
        (
            MemoryTransport { tx: a_tx, rx: a_rx },
            MemoryTransport { tx: b_tx, rx: b_rx },
        )
    }

    /// Sends one message, waiting while the queue is full.
    pub async fn send(&self, message: Bytes) -> Result<(), TransportError> {
        self.tx
            .send(message)
            .await
            .map_err(|_| TransportError::Closed)
    }

    /// Receives one message; `Closed` once the peer is gone.
    pub async fn recv(&mut self) -> Result<Bytes, TransportError> {
        self.rx.recv().await.ok_or(TransportError::Closed)
    }

    pub(crate) fn split(self) -> (Reader, Writer) {
        (Reader::Memory(self.rx), Writer::Memory(self.tx))
    }
}

/// The receiving half of a connection.
pub(crate) enum Reader {
    Ws(ws::WsReader),
    Memory(mpsc::Receiver<Bytes>),
}

/// The sending half of a connection.
pub(crate) enum Writer {
    Ws(ws::WsWriter),
    Memory(mpsc::Sender<Bytes>),
}

impl Reader {
    /// The next envelope. Pings are answered and skipped; a close frame or
    /// the end of the stream is `Closed`; a text message is an error.
    pub(crate) async fn recv(&mut self) -> Result<Bytes, TransportError> {
        match self {
            Reader::Memory(rx) => rx.recv().await.ok_or(TransportError::Closed),
            Reader::Ws(r) => r.recv().await,
        }
    }

    /// Answers control frames while the session takes no message; returns
    /// only when the connection fails (in memory: never).
    pub(crate) async fn pump_control(&mut self) -> TransportError {
        match self {
            Reader::Memory(_) => std::future::pending().await,
            Reader::Ws(r) => r.pump_control().await,
        }
    }

    /// What the last received message was charged (WebSocket only; in
    /// memory, the session charges it).
    pub(crate) fn take_charge(&mut self) -> crate::budget::Charge {
        match self {
            Reader::Memory(_) => Default::default(),
            Reader::Ws(r) => r.take_charge(),
        }
    }

    /// Sets the budget, the message timeout and the message limit.
    pub(crate) fn set_limits(
        &mut self,
        account: std::sync::Arc<crate::budget::Account>,
        message_timeout: std::time::Duration,
    ) {
        if let Reader::Ws(r) = self {
            r.set_limits(account, message_timeout);
        }
    }

    /// When the peer last sent a ping or pong (WebSocket keepalive).
    pub(crate) fn last_control(&self) -> Option<std::time::Instant> {
        match self {
            Reader::Memory(_) => None,
            Reader::Ws(r) => r.last_control(),
        }
    }

    /// Heartbeats for this connection: pings the peer after `interval` of
    /// silence and completes, with how long it was silent, once nothing at
    /// all (not even a pong) arrived for `timeout`. Never completes in
    /// memory or without an interval.
    pub(crate) fn watch_peer(
        &self,
        interval: Option<std::time::Duration>,
        timeout: std::time::Duration,
    ) -> impl std::future::Future<Output = std::time::Duration> + Send + 'static {
        let keepalive = match self {
            Reader::Ws(r) => Some(r.keepalive()),
            Reader::Memory(_) => None,
        };
        async move {
            match keepalive {
                Some(k) => k.watch(interval, timeout).await,
                None => std::future::pending().await,
            }
        }
    }

    /// Lowers the message limit (after hello).
    pub(crate) fn set_max_message(&mut self, max: usize) {
        if let Reader::Ws(r) = self {
            r.set_max_message(max);
        }
    }
}

/// A handle that sends an envelope at once from any thread when the
/// connection can take it without waiting (see [`ws::WsDirect`]).
#[derive(Clone)]
pub(crate) enum DirectWriter {
    Ws(ws::WsDirect),
    Memory(mpsc::Sender<Bytes>),
}

impl DirectWriter {
    /// Tries to send one envelope now.
    pub(crate) fn try_send(&self, message: &Bytes) -> ws::Direct {
        match self {
            DirectWriter::Ws(w) => w.try_send(message),
            DirectWriter::Memory(tx) => match tx.try_send(message.clone()) {
                Ok(()) => ws::Direct::Sent,
                Err(_) => ws::Direct::NotNow,
            },
        }
    }

    /// Tries to send envelopes now, in order, all at once (one `writev` for
    /// WebSocket); a memory transport takes one at a time only.
    pub(crate) fn try_send_all(&self, messages: &[Bytes]) -> ws::Direct {
        match (self, messages) {
            (_, [one]) => self.try_send(one),
            (DirectWriter::Ws(w), _) => w.try_send_all(messages),
            (DirectWriter::Memory(_), _) => ws::Direct::NotNow,
        }
    }
}

impl Writer {
    /// A handle for sending at once from other threads.
    pub(crate) fn direct(&self) -> DirectWriter {
        match self {
            Writer::Ws(w) => DirectWriter::Ws(w.direct()),
            Writer::Memory(tx) => DirectWriter::Memory(tx.clone()),
        }
    }

    /// Writes already-framed bytes (the rest of a partly sent direct message).
    pub(crate) async fn write_raw(&mut self, framed: &[u8]) -> Result<(), TransportError> {
        match self {
            // Memory sends are all or nothing: there is never a rest.
            Writer::Memory(_) => Ok(()),
            Writer::Ws(w) => w.write_raw(framed).await,
        }
    }

    /// Queues one envelope (small WebSocket messages are gathered until
    /// `flush`) or sends it (memory).
    pub(crate) async fn feed(&mut self, message: Bytes) -> Result<(), TransportError> {
        match self {
            Writer::Memory(tx) => tx.send(message).await.map_err(|_| TransportError::Closed),
            Writer::Ws(w) => w.feed(message).await,
        }
    }

    /// Queues one envelope given as two parts (its head, and attachments
    /// shared with other messages), without joining them for WebSocket.
    pub(crate) async fn feed_parts(
        &mut self,
        head: Bytes,
        tail: Bytes,
    ) -> Result<(), TransportError> {
        if tail.is_empty() {
            return self.feed(head).await;
        }
        match self {
            Writer::Memory(tx) => {
                let mut joined = Vec::with_capacity(head.len() + tail.len());
                joined.extend_from_slice(&head);
                joined.extend_from_slice(&tail);
                tx.send(Bytes::from(joined))
                    .await
                    .map_err(|_| TransportError::Closed)
            }
            Writer::Ws(w) => w.feed_parts(&head, &tail).await,
        }
    }

    /// Flushes fed envelopes to the peer.
    pub(crate) async fn flush(&mut self) -> Result<(), TransportError> {
        match self {
            Writer::Memory(_) => Ok(()),
            Writer::Ws(w) => w.flush().await,
        }
    }

    /// Closes the connection (a close frame for WebSocket).
    pub(crate) async fn close(&mut self, reason: Option<(u16, &str)>) {
        if let Writer::Ws(w) = self {
            w.close(reason).await;
        }
    }
}
