//! The crate's own WebSocket layer alone, for `benches/ws_layers.rs`, which
//! compares it with WebSocket libraries on the same messages. Hidden, not a
//! public API: it may change or go away in any release.

use crate::transport::{ws, TransportError};
use bytes::Bytes;
use tokio::net::TcpStream;

/// The receiving half of one of our WebSocket connections.
pub struct Reader(ws::WsReader);

/// The sending half of one of our WebSocket connections.
pub struct Writer {
    writer: ws::WsWriter,
    direct: ws::WsDirect,
}

fn halves((reader, writer): (ws::WsReader, ws::WsWriter)) -> (Reader, Writer) {
    let direct = writer.direct();
    (Reader(reader), Writer { writer, direct })
}

/// The server handshake on an accepted stream (any request accepted).
pub async fn accept(
    stream: TcpStream,
    max_message: usize,
) -> Result<(Reader, Writer), TransportError> {
    ws::accept(stream, 16 * 1024, max_message, |_| Ok(()))
        .await
        .map(halves)
}

/// The client handshake to `url` (`ws://host:port/path`).
pub async fn connect(url: &str, max_message: usize) -> Result<(Reader, Writer), String> {
    ws::connect_with(url, &[], max_message, None)
        .await
        .map(halves)
        .map_err(|e| e.to_string())
}

impl Reader {
    /// The next binary message.
    pub async fn recv(&mut self) -> Result<Bytes, TransportError> {
        self.0.recv().await
    }
}

impl Writer {
    /// Sends one message as a session sends a reply: written at once by
    /// the calling thread when the socket takes it (one `writev`), the rest
    /// or the whole through the writer otherwise (server side only).
    pub async fn send_reply(&mut self, message: &Bytes) -> Result<(), TransportError> {
        match self.direct.try_send(message) {
            ws::Direct::Sent => Ok(()),
            ws::Direct::Partial(rest) => self.writer.write_raw(&rest).await,
            ws::Direct::NotNow => self.send(message.clone()).await,
        }
    }

    /// Sends one message through the writer (gathered, then flushed), as a
    /// client sends its requests and a session's writer task its snapshots.
    pub async fn send(&mut self, message: Bytes) -> Result<(), TransportError> {
        self.writer.feed(message).await?;
        self.writer.flush().await
    }
}
