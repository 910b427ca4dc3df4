//! Transports: whole envelopes in both directions, reliably and in order.
//!
//! - WebSocket (RFC 6455, our own framing in `ws`): one binary message per envelope; a text
//!   message closes the connection; no compression; the message size limit
//!   is enforced by the WebSocket layer before a message is buffered.
//! - TLS (`wss://`, module [`tls`]): the same WebSocket framing over rustls.
//! - In-memory pairs ([`MemoryTransport::pair`]) with 16-message bounded
//!   queues in each direction, for embedding and fast tests.

mod connection;
pub mod frame;
mod handshake;
mod keepalive;
pub mod tls;
pub(crate) mod ws;

pub use tls::{ServerTls, TlsError};
pub use ws::ConnectError;

use bytes::Bytes;
use tokio::sync::mpsc;

/// Capacity of each direction of an in-memory pair, as in the reference.
pub const MEMORY_QUEUE_CAPACITY: usize = 16;

/// Why a transport stopped.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The peer closed the connection (or it was closed locally).
    #[error("connection closed")]
    Closed,
    /// The peer sent a text message; v1 carries binary messages only (1003).
    #[error("text message received: the protocol uses binary messages only")]
    TextMessage,
    /// A message exceeded the size limit (1009).
    #[error("message exceeds the size limit")]
    TooLarge,
    /// The peer broke RFC 6455 framing (1002).
    #[error("WebSocket protocol error: {0}")]
    Protocol(#[from] frame::FrameError),
    /// A message did not complete within this time of its first byte (1008).
    #[error("message not completed within {} s of its first byte", .0.as_secs_f64())]
    MessageTimeout(std::time::Duration),
    /// The connection would hold more bytes than its budget (1008).
    #[error(
        "connection memory budget exceeded: {wanted} more bytes with {held} held, at most {cap}"
    )]
    ConnectionBudget {
        /// Bytes asked for.
        wanted: usize,
        /// Bytes already held.
        held: usize,
        /// The connection's cap.
        cap: usize,
    },
    /// The server's shared pool of bytes is exhausted (1013, try again later).
    #[error("server memory budget exhausted: {wanted} bytes wanted, {used} of {limit} in use")]
    ServerBudget {
        /// Bytes asked for.
        wanted: usize,
        /// Bytes in use by all connections.
        used: usize,
        /// The pool's size.
        limit: usize,
    },
    /// The opening handshake's request is not HTTP (or is TLS on a plain
    /// endpoint).
    #[error("invalid handshake: {0}")]
    Handshake(&'static str),
    /// The opening handshake was refused with this HTTP status.
    #[error("handshake refused: {status} {message}")]
    Refused {
        /// The HTTP status sent.
        status: u16,
        /// The body sent.
        message: String,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake failed: {0}")]
    Tls(#[source] std::sync::Arc<std::io::Error>),
    /// Reading or writing the stream failed.
    #[error("transport I/O failure: {0}")]
    Io(#[source] std::sync::Arc<std::io::Error>),
}

impl TransportError {
    pub(crate) fn io(e: std::io::Error) -> TransportError {
        TransportError::Io(std::sync::Arc::new(e))
    }

    /// The WebSocket close code this error closes the connection with:
    /// 1002 framing, 1003 text, 1008 policy (budget, slow message), 1009 too
    /// large, 1013 server budget; `None` where no close frame is due.
    pub fn close_code(&self) -> Option<u16> {
        match self {
            TransportError::TextMessage => Some(1003),
            TransportError::TooLarge => Some(1009),
            TransportError::Protocol(e) => Some(e.close_code()),
            TransportError::MessageTimeout(_) | TransportError::ConnectionBudget { .. } => {
                Some(1008)
            }
            TransportError::ServerBudget { .. } => Some(1013),
            TransportError::Closed
            | TransportError::Handshake(_)
            | TransportError::Refused { .. }
            | TransportError::Tls(_)
            | TransportError::Io(_) => None,
        }
    }
}

impl From<crate::server::budget::BudgetError> for TransportError {
    fn from(e: crate::server::budget::BudgetError) -> TransportError {
        use crate::server::budget::BudgetError;
        match e {
            BudgetError::Connection { wanted, held, cap } => {
                TransportError::ConnectionBudget { wanted, held, cap }
            }
            BudgetError::Server {
                wanted,
                used,
                limit,
            } => TransportError::ServerBudget {
                wanted,
                used,
                limit,
            },
        }
    }
}

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
    pub(crate) fn take_charge(&mut self) -> crate::server::budget::Charge {
        match self {
            Reader::Memory(_) => Default::default(),
            Reader::Ws(r) => r.take_charge(),
        }
    }

    /// Sets the budget, the message timeout and the message limit.
    pub(crate) fn set_limits(
        &mut self,
        account: std::sync::Arc<crate::server::budget::Account>,
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
