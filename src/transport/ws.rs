//! RFC 6455 WebSocket framing and handshakes, written for this protocol's
//! traffic: one binary message per envelope, no extensions.
//!
//! Why not tungstenite's framing: it zero-fills its whole read buffer
//! (128 KiB by default) before every read and copies every payload into it,
//! which measured as nearly half of all instructions of a small step round
//! trip. Here frames are read into spare buffer capacity without
//! initialisation, a complete message is split off the buffer as `Bytes`
//! (zero-copy: the envelope decoder then slices arrays out of it), and
//! outgoing frames are written with their header, without an intermediate
//! frame object.
//!
//! - Client frames are masked with a fresh key per frame, server frames never.
//! - RSV bits, unknown opcodes, unmasked client frames, masked server frames,
//!   fragmented or oversized control frames are protocol errors (close 1002).
//! - A text message closes the connection (1003); a message over the limit,
//!   detected from the frame header before its payload is buffered, too (1009).
//! - Pings are answered with pongs by the reader; a close frame is answered
//!   and ends the stream.

use super::tls::{ReadHalf, Stream, WriteHalf};
use super::TransportError;
use crate::server::budget::{Account, Charge};
use bytes::{Buf, Bytes, BytesMut};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

/// Which end of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Server,
    Client,
}

const OP_CONTINUATION: u8 = 0x0;
const OP_TEXT: u8 = 0x1;
const OP_BINARY: u8 = 0x2;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// Frames up to this size are gathered into one write with their header.
const COALESCE: usize = 64 * 1024;

/// The GUID of RFC 6455 section 1.3.
const ACCEPT_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Control frames held back while a data frame is torn, at most.
const HELD_LIMIT: usize = 4096;

/// After a message larger than this, the read buffer is replaced by a small
/// one, so an idle connection does not keep its largest message's memory.
const SHRINK_AFTER: usize = 64 * 1024;

/// Whether a received close code may appear in a close frame (RFC 6455
/// section 7.4: 1000–1003, 1007–1014 as registered, 3000–4999 for
/// libraries and applications; 1004–1006 and 1015 are reserved, the rest
/// unassigned).
fn valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// What both halves share: the socket's write side (frames are written
/// whole under its lock, so the reader's pongs never interleave with data).
struct Shared {
    write: tokio::sync::Mutex<Sink>,
    role: Role,
    mask_state: parking_lot::Mutex<u64>,
}

/// The socket's write side and what is known of the byte stream's framing.
struct Sink {
    half: WriteHalf,
    /// A frame was begun and not finished: a write cancelled part-way (the
    /// session is closing), or the first part of a direct send whose rest
    /// the writer task will write next. Nothing else may go out meanwhile.
    torn: bool,
    /// Control frames (pongs, a close) that came while `torn`, written as
    /// soon as the torn frame is complete (never, if it never is).
    held: Vec<u8>,
    /// A close frame was written (or held): nothing may follow it (RFC 6455
    /// section 5.5.1), neither a second close, nor a pong, nor data.
    close_sent: bool,
}

impl Sink {
    /// Writes `parts` in order; they complete any torn frame, or are whole
    /// frames. A write cancelled part-way leaves the sink torn.
    async fn put(&mut self, parts: &[&[u8]]) -> std::io::Result<()> {
        if self.close_sent && !self.torn {
            // Whole frames after the close frame are dropped.
            return Ok(());
        }
        self.torn = true;
        for part in parts {
            self.half.write_all(part).await?;
        }
        self.torn = false;
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.torn = true;
            self.half.write_all(&held).await?;
            self.torn = false;
        }
        // TLS buffers what it encrypts: push it out (a no-op for TCP).
        self.half.flush().await
    }
}

impl Shared {
    fn next_mask(&self) -> [u8; 4] {
        let mut s = self.mask_state.lock();
        // SplitMix64 over a randomly seeded state.
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z as u32).to_ne_bytes()
    }

    /// Appends one frame (header and, for clients, the masked payload).
    fn frame_into(&self, out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
        let len = payload.len();
        out.push(0x80 | opcode);
        let mask_bit = if self.role == Role::Client { 0x80 } else { 0 };
        if len < 126 {
            out.push(mask_bit | len as u8);
        } else if len <= u16::MAX as usize {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        } else {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
        if self.role == Role::Client {
            let mask = self.next_mask();
            out.extend_from_slice(&mask);
            let start = out.len();
            out.extend_from_slice(payload);
            apply_mask(&mut out[start..], mask);
        } else {
            out.extend_from_slice(payload);
        }
    }

    /// The header alone of an unmasked (server) frame.
    fn header(opcode: u8, len: usize) -> ([u8; 10], usize) {
        let mut h = [0u8; 10];
        h[0] = 0x80 | opcode;
        if len < 126 {
            h[1] = len as u8;
            (h, 2)
        } else if len <= u16::MAX as usize {
            h[1] = 126;
            h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            (h, 4)
        } else {
            h[1] = 127;
            h[2..10].copy_from_slice(&(len as u64).to_be_bytes());
            (h, 10)
        }
    }

    /// Writes a control frame, or holds it back while a data frame is torn.
    async fn write_control(&self, opcode: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut frame = Vec::with_capacity(payload.len() + 14);
        self.frame_into(&mut frame, opcode, payload);
        let mut w = self.write.lock().await;
        if w.close_sent {
            return Ok(());
        }
        if w.torn {
            if w.held.len() + frame.len() <= HELD_LIMIT {
                w.held.extend_from_slice(&frame);
                w.close_sent |= opcode == OP_CLOSE;
            }
            return Ok(());
        }
        let r = w.put(&[&frame]).await;
        w.close_sent |= opcode == OP_CLOSE;
        r
    }
}

/// XORs `data` with the repeating 4-byte `mask`, eight bytes at a time.
pub(crate) fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(word) ^ wide).to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
}

/// The receiving half.
pub(crate) struct WsReader {
    read: ReadHalf,
    buf: BytesMut,
    shared: Arc<Shared>,
    max_message: usize,
    /// A fragmented message being assembled.
    partial: Option<BytesMut>,
    /// The connection's byte budget (server side): every data frame is
    /// charged from its header, before its payload is buffered.
    account: Option<Arc<Account>>,
    /// What the message being received is charged.
    charge: Charge,
    /// Whether the frame at the head of the buffer is charged already.
    head_charged: bool,
    /// Time a message may take to arrive once its first byte has.
    message_timeout: Option<Duration>,
    /// When the first byte of the message being received arrived.
    started: Option<Instant>,
    /// When the last ping or pong arrived (keepalive counts as activity).
    last_control: Option<Instant>,
}

/// The sending half.
pub(crate) struct WsWriter {
    shared: Arc<Shared>,
    /// Small frames waiting for the next flush.
    out: Vec<u8>,
}

fn protocol_error(reason: &str) -> TransportError {
    TransportError::Io(format!("WebSocket protocol error: {reason}"))
}

impl WsReader {
    /// Sets the budget that received messages are charged to, and the time a
    /// message may take once its first byte has arrived.
    pub(crate) fn set_limits(&mut self, account: Arc<Account>, message_timeout: Duration) {
        self.account = Some(account);
        self.message_timeout = Some(message_timeout);
    }

    /// Lowers the message limit (to the one negotiated in hello): a larger
    /// message is then refused from its frame header (1009).
    pub(crate) fn set_max_message(&mut self, max: usize) {
        self.max_message = max;
    }

    /// When the last ping or pong arrived.
    pub(crate) fn last_control(&self) -> Option<Instant> {
        self.last_control
    }

    /// What the last message returned by [`WsReader::recv`] was charged.
    pub(crate) fn take_charge(&mut self) -> Charge {
        std::mem::take(&mut self.charge)
    }

    /// Reads more bytes into the buffer's spare capacity (no zero-filling).
    /// Once part of a message has arrived, the rest must come within the
    /// message timeout.
    async fn fill(&mut self, want: usize) -> Result<(), TransportError> {
        if self.buf.capacity() - self.buf.len() < want {
            self.buf.reserve(want.max(8 * 1024));
        }
        let in_message = !self.buf.is_empty() || self.partial.is_some();
        let deadline = match (self.message_timeout, in_message) {
            (Some(t), true) => Some(*self.started.get_or_insert_with(Instant::now) + t),
            _ => None,
        };
        let read = self.read.read_buf(&mut self.buf);
        let n = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline.into(), read).await {
                Ok(r) => r,
                Err(_) => {
                    let waited = self.message_timeout.unwrap_or_default();
                    return Err(self
                        .fail(
                            1008,
                            TransportError::Io(format!(
                                "message not completed within {} s of its first byte",
                                waited.as_secs_f64()
                            )),
                        )
                        .await);
                }
            },
            None => read.await,
        }
        .map_err(|e| TransportError::Io(e.to_string()))?;
        if n == 0 {
            return Err(TransportError::Closed);
        }
        if !in_message {
            self.started = Some(Instant::now());
        }
        Ok(())
    }

    async fn fail(&mut self, code: u16, error: TransportError) -> TransportError {
        let mut payload = code.to_be_bytes().to_vec();
        payload.extend_from_slice(
            error
                .to_string()
                .chars()
                .take(100)
                .collect::<String>()
                .as_bytes(),
        );
        let _ = self.shared.write_control(OP_CLOSE, &payload).await;
        error
    }

    /// The next binary message.
    pub(crate) async fn recv(&mut self) -> Result<Bytes, TransportError> {
        self.next(false).await
    }

    /// Answers control frames (pings, a close) while the session cannot take
    /// another message: reads until the next data frame's header and stops
    /// there (pending forever) without buffering its payload. Returns only
    /// when the connection fails or closes.
    pub(crate) async fn pump_control(&mut self) -> TransportError {
        match self.next(true).await {
            Err(e) => e,
            Ok(_) => protocol_error("a data frame was read while reading control frames only"),
        }
    }

    async fn next(&mut self, control_only: bool) -> Result<Bytes, TransportError> {
        loop {
            if self.buf.len() < 2 {
                self.fill(2).await?;
                continue;
            }
            let b0 = self.buf[0];
            let b1 = self.buf[1];
            let fin = b0 & 0x80 != 0;
            let opcode = b0 & 0x0F;
            let masked = b1 & 0x80 != 0;
            if b0 & 0x70 != 0 {
                return Err(self
                    .fail(
                        1002,
                        protocol_error("reserved bits set (no extension was negotiated)"),
                    )
                    .await);
            }
            let expected_mask = self.shared.role == Role::Server;
            if masked != expected_mask {
                let e = protocol_error(if expected_mask {
                    "unmasked client frame"
                } else {
                    "masked server frame"
                });
                return Err(self.fail(1002, e).await);
            }
            let (len, ext) = match b1 & 0x7F {
                126 => {
                    if self.buf.len() < 4 {
                        self.fill(4).await?;
                        continue;
                    }
                    (u16::from_be_bytes([self.buf[2], self.buf[3]]) as u64, 2)
                }
                127 => {
                    if self.buf.len() < 10 {
                        self.fill(10).await?;
                        continue;
                    }
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&self.buf[2..10]);
                    (u64::from_be_bytes(b), 8)
                }
                n => (n as u64, 0),
            };
            let is_control = opcode >= 0x8;
            if !matches!(
                opcode,
                OP_CONTINUATION | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG
            ) {
                return Err(self.fail(1002, protocol_error("unknown opcode")).await);
            }
            if is_control && (!fin || len > 125) {
                return Err(self
                    .fail(
                        1002,
                        protocol_error("fragmented or oversized control frame"),
                    )
                    .await);
            }
            if opcode == OP_TEXT {
                return Err(self.fail(1003, TransportError::TextMessage).await);
            }
            if !is_control && control_only {
                // The session cannot take a message now: leave it unread.
                std::future::pending::<()>().await;
            }
            let assembled = self.partial.as_ref().map_or(0, BytesMut::len) as u64;
            if !is_control && assembled.saturating_add(len) > self.max_message as u64 {
                return Err(self.fail(1009, TransportError::TooLarge).await);
            }
            if !is_control && !self.head_charged {
                if let Some(account) = &self.account {
                    match account.charge(len as usize) {
                        Ok(c) => self.charge.absorb(c),
                        Err(e) => {
                            let code = match e {
                                crate::server::budget::BudgetError::Server { .. } => 1013,
                                _ => 1008,
                            };
                            return Err(self.fail(code, TransportError::Io(e.to_string())).await);
                        }
                    }
                }
                self.head_charged = true;
            }
            let header_len = 2 + ext + if masked { 4 } else { 0 };
            let total = header_len + len as usize;
            if self.buf.len() < total {
                let missing = total - self.buf.len();
                self.fill(missing).await?;
                continue;
            }
            let mut frame = self.buf.split_to(total);
            self.head_charged = false;
            if total > SHRINK_AFTER {
                // The large allocation now belongs to the frame alone.
                let rest = self.buf.split();
                self.buf = BytesMut::with_capacity(rest.len().max(8 * 1024));
                self.buf.extend_from_slice(&rest);
            }
            let mask = masked.then(|| {
                [
                    frame[header_len - 4],
                    frame[header_len - 3],
                    frame[header_len - 2],
                    frame[header_len - 1],
                ]
            });
            frame.advance(header_len);
            if let Some(mask) = mask {
                apply_mask(&mut frame, mask);
            }
            match opcode {
                OP_BINARY | OP_CONTINUATION => {
                    let message = match (opcode, self.partial.take()) {
                        (OP_BINARY, None) => frame,
                        (OP_CONTINUATION, Some(mut started)) => {
                            started.extend_from_slice(&frame);
                            started
                        }
                        _ => {
                            return Err(self
                                .fail(1002, protocol_error("unexpected continuation"))
                                .await)
                        }
                    };
                    if fin {
                        self.started = (!self.buf.is_empty()).then(Instant::now);
                        return Ok(message.freeze());
                    }
                    self.partial = Some(message);
                }
                OP_PING => {
                    self.last_control = Some(Instant::now());
                    let _ = self.shared.write_control(OP_PONG, &frame).await;
                }
                OP_PONG => self.last_control = Some(Instant::now()),
                _ => {
                    // Close: a valid code is echoed, an empty payload
                    // answered 1000; a 1-byte payload, a reserved or
                    // unassigned code, or a reason that is not UTF-8 is a
                    // protocol error (1002).
                    let answer = match frame.len() {
                        0 => Ok(1000),
                        1 => Err("a close payload of one byte"),
                        _ => {
                            let code = u16::from_be_bytes([frame[0], frame[1]]);
                            if !valid_close_code(code) {
                                Err("an invalid close code")
                            } else if std::str::from_utf8(&frame[2..]).is_err() {
                                Err("a close reason that is not UTF-8")
                            } else {
                                Ok(code)
                            }
                        }
                    };
                    return Err(match answer {
                        Ok(code) => {
                            let _ = self
                                .shared
                                .write_control(OP_CLOSE, &code.to_be_bytes())
                                .await;
                            TransportError::Closed
                        }
                        Err(what) => self.fail(1002, protocol_error(what)).await,
                    });
                }
            }
        }
    }
}

impl WsWriter {
    /// Queues one binary message; small ones are gathered until `flush`,
    /// large ones are written at once (after what was gathered).
    pub(crate) async fn feed(&mut self, message: Bytes) -> Result<(), TransportError> {
        let io = |e: std::io::Error| TransportError::Io(e.to_string());
        if message.len() <= COALESCE || self.shared.role == Role::Client {
            self.shared.frame_into(&mut self.out, OP_BINARY, &message);
            if self.out.len() > COALESCE {
                self.flush().await?;
            }
            return Ok(());
        }
        let (header, n) = Shared::header(OP_BINARY, message.len());
        self.out.extend_from_slice(&header[..n]);
        let mut w = self.shared.write.lock().await;
        let r = w.put(&[&self.out, &message]).await;
        self.out.clear();
        r.map_err(io)
    }

    /// Queues one binary message given in two parts, as one frame; a large
    /// second part is written from its own buffer, not copied.
    pub(crate) async fn feed_parts(
        &mut self,
        head: &[u8],
        tail: &[u8],
    ) -> Result<(), TransportError> {
        let len = head.len() + tail.len();
        if self.shared.role == Role::Client {
            let mut joined = Vec::with_capacity(len);
            joined.extend_from_slice(head);
            joined.extend_from_slice(tail);
            return self.feed(Bytes::from(joined)).await;
        }
        let (header, n) = Shared::header(OP_BINARY, len);
        self.out.extend_from_slice(&header[..n]);
        self.out.extend_from_slice(head);
        if len <= COALESCE {
            self.out.extend_from_slice(tail);
            if self.out.len() > COALESCE {
                self.flush().await?;
            }
            return Ok(());
        }
        let io = |e: std::io::Error| TransportError::Io(e.to_string());
        let mut w = self.shared.write.lock().await;
        let r = w.put(&[&self.out, tail]).await;
        self.out.clear();
        r.map_err(io)
    }

    /// Writes everything gathered.
    pub(crate) async fn flush(&mut self) -> Result<(), TransportError> {
        if self.out.is_empty() {
            return Ok(());
        }
        let mut w = self.shared.write.lock().await;
        let r = w.put(&[&self.out]).await;
        self.out.clear();
        r.map_err(|e| TransportError::Io(e.to_string()))
    }

    /// A handle for [`WsDirect::try_send`] on this connection.
    pub(crate) fn direct(&self) -> WsDirect {
        WsDirect {
            shared: self.shared.clone(),
        }
    }

    /// Writes bytes that are already framed (the rest of a partly written
    /// direct message), after what was gathered.
    pub(crate) async fn write_raw(&mut self, framed: &[u8]) -> Result<(), TransportError> {
        let io = |e: std::io::Error| TransportError::Io(e.to_string());
        let mut w = self.shared.write.lock().await;
        // The rest of the torn frame goes first; nothing is gathered while a
        // direct send is possible, so `out` is empty here.
        let r = w.put(&[framed, &self.out]).await;
        self.out.clear();
        r.map_err(io)
    }

    /// Sends a close frame (with a status code and reason) and shuts the
    /// socket's write side.
    pub(crate) async fn close(&mut self, reason: Option<(u16, &str)>) {
        let _ = self.flush().await;
        let mut payload = Vec::new();
        if let Some((code, text)) = reason {
            payload.extend_from_slice(&code.to_be_bytes());
            payload.extend_from_slice(text.chars().take(100).collect::<String>().as_bytes());
        }
        // Held back, and so never sent, after a frame torn by a cancelled
        // write: the peer then sees the connection end instead of a close
        // frame inside a data frame.
        let _ = self.shared.write_control(OP_CLOSE, &payload).await;
        let _ = self.shared.write.lock().await.half.shutdown().await;
    }
}

/// What became of a message offered to [`WsDirect::try_send`].
pub(crate) enum Direct {
    /// Written whole.
    Sent,
    /// Partly written: these framed bytes must be written next, before
    /// anything else.
    Partial(Bytes),
    /// Nothing written (socket full, or the writer busy): queue it.
    NotNow,
}

/// Writes whole server frames without waiting, from any thread (a domain
/// worker answering a request), when the socket can take them at once; this
/// saves waking the writer task for the common small response.
#[derive(Clone)]
pub(crate) struct WsDirect {
    shared: Arc<Shared>,
}

impl WsDirect {
    /// Tries to write one binary message now (one `writev`).
    pub(crate) fn try_send(&self, message: &[u8]) -> Direct {
        if self.shared.role != Role::Server {
            return Direct::NotNow;
        }
        let Ok(mut w) = self.shared.write.try_lock() else {
            return Direct::NotNow;
        };
        if w.torn || w.close_sent {
            return Direct::NotNow;
        }
        let (header, n) = Shared::header(OP_BINARY, message.len());
        let total = n + message.len();
        let parts = [
            std::io::IoSlice::new(&header[..n]),
            std::io::IoSlice::new(message),
        ];
        match w.half.try_write_vectored(&parts) {
            Ok(0) | Err(_) => Direct::NotNow,
            Ok(k) if k >= total => Direct::Sent,
            Ok(k) => {
                w.torn = true;
                let mut rest = Vec::with_capacity(total - k);
                if k < n {
                    rest.extend_from_slice(&header[k..n]);
                    rest.extend_from_slice(message);
                } else {
                    rest.extend_from_slice(&message[k - n..]);
                }
                Direct::Partial(Bytes::from(rest))
            }
        }
    }
}

fn pair(
    stream: Stream,
    leftover: BytesMut,
    role: Role,
    max_message: usize,
) -> (WsReader, WsWriter) {
    let (read, write) = stream.into_split();
    let shared = Arc::new(Shared {
        write: tokio::sync::Mutex::new(Sink {
            half: write,
            torn: false,
            held: Vec::new(),
            close_sent: false,
        }),
        role,
        mask_state: parking_lot::Mutex::new(random_u64()),
    });
    (
        WsReader {
            read,
            buf: leftover,
            shared: shared.clone(),
            max_message,
            partial: None,
            account: None,
            charge: Charge::default(),
            head_charged: false,
            message_timeout: None,
            started: None,
            last_control: None,
        },
        WsWriter {
            shared,
            out: Vec::with_capacity(4096),
        },
    )
}

/// 64 unpredictable bits (randomly keyed SipHash of a counter and the time).
pub(crate) fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Standard base64 with padding.
pub(crate) fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

/// `Sec-WebSocket-Accept` for a key.
pub(crate) fn accept_key(key: &str) -> String {
    let mut input = key.trim().as_bytes().to_vec();
    input.extend_from_slice(ACCEPT_GUID);
    base64(&sha1(&input))
}

/// SHA-1 (only for the handshake's accept key, as RFC 6455 requires).
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

/// A parsed HTTP request head (what the server's handshake needs).
pub(crate) struct RequestHead {
    pub method: String,
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The first value of a header (case-insensitive name).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a handshake was refused: the HTTP status and a short text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub status: u16,
    pub reason: &'static str,
    pub message: String,
    pub extra_headers: Vec<(&'static str, &'static str)>,
}

impl Refusal {
    pub(crate) fn new(status: u16, reason: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason,
            message: message.into(),
            extra_headers: Vec::new(),
        }
    }
}

/// Reads an HTTP head (up to the blank line), at most `max` bytes.
async fn read_head<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut BytesMut,
    max: usize,
) -> Result<usize, TransportError> {
    loop {
        if let Some(end) = head_end(buf) {
            return Ok(end);
        }
        if buf.len() >= max {
            return Err(TransportError::TooLarge);
        }
        buf.reserve(1024);
        let room = max - buf.len();
        let n = {
            let mut limited = (&mut *stream).take(room as u64);
            limited
                .read_buf(buf)
                .await
                .map_err(|e| TransportError::Io(e.to_string()))?
        };
        if n == 0 {
            return Err(TransportError::Closed);
        }
        if buf.first() == Some(&TLS_HANDSHAKE_RECORD) {
            return Err(protocol_error("a TLS handshake where HTTP was expected"));
        }
    }
}

/// The first byte of a TLS handshake record (a client or server hello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// The length of an HTTP head ending in a blank line: CRLF CRLF, or a bare
/// LF where a line ends (the head parser accepts both, so a head written
/// with bare LFs is answered at once instead of waiting for more).
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = buf[from..].iter().position(|&b| b == b'\n') {
        let at = from + i;
        match &buf[at + 1..] {
            [b'\n', ..] => return Some(at + 2),
            [b'\r', b'\n', ..] => return Some(at + 3),
            _ => from = at + 1,
        }
    }
    None
}

/// Whether a `Sec-WebSocket-Key` is what RFC 6455 section 4.1 requires:
/// the base64 encoding of 16 bytes (22 base64 digits and `==`).
fn valid_key(key: &str) -> bool {
    let key = key.trim().as_bytes();
    key.len() == 24
        && key[22..] == *b"=="
        && key[..22]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

async fn write_refusal<S: AsyncWrite + Unpin>(stream: &mut S, r: &Refusal) {
    let mut text = format!(
        "HTTP/1.1 {} {}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n",
        r.status,
        r.reason,
        r.message.len()
    );
    for (k, v) in &r.extra_headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(&r.message);
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The server side of a connection's handshakes: TLS first when `tls` is
/// given, then the WebSocket upgrade ([`accept`]).
pub(crate) async fn accept_over(
    tcp: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    max_head: usize,
    max_message: usize,
    policy: impl FnOnce(&RequestHead) -> Result<(), Refusal>,
) -> Result<(WsReader, WsWriter), TransportError> {
    let stream = match tls {
        None => Stream::Tcp(tcp),
        Some(acceptor) => {
            let s = acceptor
                .accept(tcp)
                .await
                .map_err(|e| TransportError::Io(format!("TLS handshake failed: {e}")))?;
            Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(s)))
        }
    };
    accept(stream, max_head, max_message, policy).await
}

/// The server side of the opening handshake: reads the request (at most
/// `max_head` bytes), validates it as a WebSocket upgrade, asks `policy`, and
/// answers 101 (without any extension: compression is never negotiated) or
/// the refusal.
pub(crate) async fn accept(
    stream: impl Into<Stream>,
    max_head: usize,
    max_message: usize,
    policy: impl FnOnce(&RequestHead) -> Result<(), Refusal>,
) -> Result<(WsReader, WsWriter), TransportError> {
    let mut stream = stream.into();
    let mut buf = BytesMut::with_capacity(2048);
    let head_len = match read_head(&mut stream, &mut buf, max_head).await {
        Ok(n) => n,
        Err(TransportError::TooLarge) => {
            write_refusal(
                &mut stream,
                &Refusal::new(
                    431,
                    "Request Header Fields Too Large",
                    "handshake too large",
                ),
            )
            .await;
            return Err(TransportError::TooLarge);
        }
        Err(e) if buf.first() == Some(&TLS_HANDSHAKE_RECORD) => {
            // A TLS client hello on a plain endpoint: answered in plain
            // HTTP, which the client's TLS layer reports as not TLS.
            write_refusal(
                &mut stream,
                &Refusal::new(
                    400,
                    "Bad Request",
                    "this endpoint does not speak TLS: connect with a ws:// URL",
                ),
            )
            .await;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let head = buf.split_to(head_len);
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let parsed = match req.parse(&head) {
        Ok(httparse::Status::Complete(_)) => RequestHead {
            method: req.method.unwrap_or_default().to_string(),
            headers: req
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_string(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect(),
        },
        _ => {
            write_refusal(
                &mut stream,
                &Refusal::new(400, "Bad Request", "malformed HTTP request"),
            )
            .await;
            return Err(protocol_error("malformed handshake"));
        }
    };
    let has_token = |name: &str, token: &str| {
        parsed
            .header(name)
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    let check = || -> Result<String, Refusal> {
        if parsed.method != "GET" || req.version != Some(1) {
            return Err(Refusal::new(
                400,
                "Bad Request",
                "a WebSocket upgrade is a GET over HTTP/1.1",
            ));
        }
        if !has_token("upgrade", "websocket") || !has_token("connection", "upgrade") {
            let mut r = Refusal::new(
                426,
                "Upgrade Required",
                "this endpoint speaks WebSocket only",
            );
            r.extra_headers.push(("Upgrade", "websocket"));
            return Err(r);
        }
        if parsed.header("sec-websocket-version").map(str::trim) != Some("13") {
            let mut r = Refusal::new(426, "Upgrade Required", "WebSocket version 13 is required");
            r.extra_headers.push(("Sec-WebSocket-Version", "13"));
            return Err(r);
        }
        match parsed.header("sec-websocket-key") {
            Some(k) if valid_key(k) => Ok(accept_key(k)),
            Some(_) => Err(Refusal::new(
                400,
                "Bad Request",
                "Sec-WebSocket-Key must be the base64 encoding of 16 bytes",
            )),
            None => Err(Refusal::new(
                400,
                "Bad Request",
                "Sec-WebSocket-Key is missing",
            )),
        }
    };
    let accept = match check().and_then(|a| policy(&parsed).map(|_| a)) {
        Ok(a) => a,
        Err(r) => {
            write_refusal(&mut stream, &r).await;
            return Err(TransportError::Io(format!(
                "handshake refused: {} {}",
                r.status, r.message
            )));
        }
    };
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream
        .write_all(response.as_bytes())
        .await
        .map_err(|e| TransportError::Io(e.to_string()))?;
    Ok(pair(stream, buf, Role::Server, max_message))
}

/// Why a client could not connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not `ws://host[:port][/path]` or `wss://host[:port][/path]`.
    #[error("invalid URL {url:?}: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A handshake header is not a valid HTTP header.
    #[error("invalid header {name:?}")]
    Header {
        /// The header's name.
        name: String,
    },
    /// The TCP connection failed.
    #[error("cannot connect to {addr}: {source}")]
    Tcp {
        /// The address connected to.
        addr: String,
        /// The I/O failure.
        source: std::io::Error,
    },
    /// The client's TLS configuration could not be built (an unreadable CA
    /// file, no root certificates).
    #[error(transparent)]
    TlsConfig(#[from] super::tls::TlsError),
    /// The server's certificate was not accepted (unknown issuer, expired,
    /// not valid for the host name).
    #[error("the TLS certificate of {host} was not accepted: {source}; if the server's certificate is issued by a private CA (or is self-signed), pass that CA's certificate with --ca-file FILE (ClientConfig::ca_file)")]
    Certificate {
        /// The host name verified.
        host: String,
        /// rustls's verdict.
        source: rustls::Error,
    },
    /// The TLS handshake failed for another reason.
    #[error("TLS handshake with {host} failed: {source}{}", tls_hint(source))]
    Tls {
        /// The host name.
        host: String,
        /// The failure.
        source: std::io::Error,
    },
    /// The server answered a plain `ws://` handshake with TLS.
    #[error("the server at {host} speaks TLS: connect with a wss:// URL")]
    ServerWantsTls {
        /// The host.
        host: String,
    },
    /// An I/O failure during the HTTP upgrade.
    #[error("{during}: {source}")]
    Io {
        /// What was being done.
        during: &'static str,
        /// The failure.
        source: std::io::Error,
    },
    /// The server answered with this HTTP status instead of 101.
    #[error("server refused the WebSocket handshake: HTTP {status} {reason}{}", refusal_detail(*status, body))]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The status line's reason phrase.
        reason: String,
        /// The response body (at most 4 KiB), often saying why.
        body: String,
    },
    /// The server's answer violates the handshake.
    #[error("invalid handshake response: {reason}")]
    Handshake {
        /// What is wrong.
        reason: &'static str,
    },
}

/// A hint for TLS failures that usually mean a wrong scheme.
fn tls_hint(e: &std::io::Error) -> &'static str {
    match super::tls::rustls_error(e) {
        Some(rustls::Error::InvalidMessage(_)) => {
            " (is the server serving TLS? a plain server is reached with ws://)"
        }
        _ if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            " (the server closed the connection: is it serving TLS? a plain server is reached with ws://)"
        }
        _ => "",
    }
}

/// The body of a refusal and, when the body does not already say it, the
/// way out.
fn refusal_detail(status: u16, body: &str) -> String {
    let mut out = String::new();
    if !body.is_empty() {
        out.push_str(&format!(" ({})", body.trim()));
    }
    match status {
        401 if !body.contains("--token") => out.push_str(
            "; the server requires a bearer token: pass it with --token TOKEN (ClientConfig::token)",
        ),
        403 if !body.contains("--allow-") => out.push_str(
            "; the server refused this Host or Origin: start it with --allow-host NAME or --allow-origin ORIGIN",
        ),
        _ => {}
    }
    out
}

/// Where a `ws://` or `wss://` URL leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `host:port` for TCP.
    pub addr: String,
    /// The `Host` header (the URL's authority).
    pub authority: String,
    /// The host name alone (brackets removed), for TLS.
    pub host: String,
    /// The request path and query.
    pub path: String,
    /// `wss://`.
    pub secure: bool,
}

/// Parses `ws://host[:port][/path]` (port 80 by default) or `wss://…` (443).
pub(crate) fn parse_target(url: &str) -> Result<Target, ConnectError> {
    let bad = |reason| ConnectError::Url {
        url: url.to_string(),
        reason,
    };
    let (rest, secure) = if let Some(rest) = url.strip_prefix("ws://") {
        (rest, false)
    } else if let Some(rest) = url.strip_prefix("wss://") {
        (rest, true)
    } else {
        return Err(bad(
            "expected ws://host[:port][/path] or wss://host[:port][/path]",
        ));
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() || authority.contains('@') {
        return Err(bad("expected a host (without user information)"));
    }
    let (host, has_port) = if let Some(v6) = authority.strip_prefix('[') {
        let (ip, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
        (ip, after.starts_with(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) => (h, true),
            None => (authority, false),
        }
    };
    let addr = if has_port {
        authority.to_string()
    } else {
        format!("{authority}:{}", if secure { 443 } else { 80 })
    };
    Ok(Target {
        addr,
        authority: authority.to_string(),
        host: host.to_string(),
        path,
        secure,
    })
}

/// Splits a URL into (host for TCP, Host header, path).
pub(crate) fn parse_url(url: &str) -> Result<(String, String, String), ConnectError> {
    let t = parse_target(url)?;
    Ok((t.addr, t.authority, t.path))
}

/// The client side of the opening handshake; `wss://` URLs trust the
/// system's root certificates.
pub(crate) async fn connect(
    url: &str,
    headers: &[(String, String)],
    max_message: usize,
) -> Result<(WsReader, WsWriter), ConnectError> {
    connect_with(url, headers, max_message, None).await
}

/// The client side of the opening handshake, with a TLS configuration for
/// `wss://` URLs (`None`: the system's root certificates).
pub(crate) async fn connect_with(
    url: &str,
    headers: &[(String, String)],
    max_message: usize,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<(WsReader, WsWriter), ConnectError> {
    let target = parse_target(url)?;
    for (name, value) in headers {
        if name.contains(['\r', '\n', ':']) || value.contains(['\r', '\n']) {
            return Err(ConnectError::Header { name: name.clone() });
        }
    }
    let tcp = TcpStream::connect(target.addr.as_str())
        .await
        .map_err(|source| ConnectError::Tcp {
            addr: target.addr.clone(),
            source,
        })?;
    let _ = tcp.set_nodelay(true);
    let mut stream = if target.secure {
        let config = match tls {
            Some(c) => c,
            None => super::tls::client_config(None)?,
        };
        let name = rustls::pki_types::ServerName::try_from(target.host.clone()).map_err(|_| {
            ConnectError::Url {
                url: url.to_string(),
                reason: "the host is not a valid DNS name or IP address for TLS",
            }
        })?;
        let tls_stream = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|source| match super::tls::rustls_error(&source) {
                Some(e @ rustls::Error::InvalidCertificate(_)) => ConnectError::Certificate {
                    host: target.host.clone(),
                    source: e.clone(),
                },
                _ => ConnectError::Tls {
                    host: target.host.clone(),
                    source,
                },
            })?;
        Stream::Tls(Box::new(tokio_rustls::TlsStream::Client(tls_stream)))
    } else {
        Stream::Tcp(tcp)
    };
    let key = base64(
        &random_u64()
            .to_ne_bytes()
            .iter()
            .chain(random_u64().to_ne_bytes().iter())
            .copied()
            .collect::<Vec<u8>>(),
    );
    let mut request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n",
        target.path, target.authority
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let sent = async {
        stream.write_all(request.as_bytes()).await?;
        stream.flush().await
    };
    sent.await.map_err(|source| ConnectError::Io {
        during: "sending the handshake request",
        source,
    })?;
    let mut buf = BytesMut::with_capacity(1024);
    let head_len = match read_head(&mut stream, &mut buf, 16 * 1024).await {
        Ok(n) => n,
        // A TLS record (an alert, or a server hello) where HTTP was expected.
        Err(_) if !target.secure && matches!(buf.first(), Some(0x15 | 0x16)) => {
            return Err(ConnectError::ServerWantsTls { host: target.host });
        }
        Err(e) => {
            return Err(ConnectError::Io {
                during: "reading the handshake response",
                source: std::io::Error::other(e),
            })
        }
    };
    let head = buf.split_to(head_len);
    let mut hs = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut hs);
    match resp.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => {
            return Err(ConnectError::Handshake {
                reason: "malformed HTTP response",
            })
        }
    }
    let status = resp.code.unwrap_or(0);
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
    };
    if status != 101 {
        let reason = resp.reason.unwrap_or("").to_string();
        let body_len: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
            .min(4096);
        while buf.len() < body_len {
            let mut limited = (&mut stream).take((body_len - buf.len()) as u64);
            match limited.read_buf(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let body = String::from_utf8_lossy(&buf[..buf.len().min(body_len)]).into_owned();
        return Err(ConnectError::Refused {
            status,
            reason,
            body,
        });
    }
    if header("sec-websocket-accept").as_deref() != Some(accept_key(&key).as_str()) {
        return Err(ConnectError::Handshake {
            reason: "wrong Sec-WebSocket-Accept",
        });
    }
    if header("sec-websocket-extensions").is_some() {
        return Err(ConnectError::Handshake {
            reason: "the server enabled an extension we did not offer",
        });
    }
    Ok(pair(stream, buf, Role::Client, max_message))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A direct send larger than the socket buffers is written in part; a
    /// pong due meanwhile is held back and follows the completed frame, so
    /// the peer sees two whole frames.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn control_frames_wait_for_a_torn_frame() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server_side, _) = listener.accept().await.unwrap();
        let (mut reader, mut writer) =
            pair(server_side.into(), BytesMut::new(), Role::Server, 1 << 30);
        let message: Vec<u8> = (0..32usize << 20).map(|i| (i % 251) as u8).collect();
        let rest = match writer.direct().try_send(&message) {
            Direct::Partial(rest) => rest,
            Direct::Sent => panic!("32 MiB fit the socket buffers whole"),
            Direct::NotNow => panic!("nothing written"),
        };
        // A masked ping "hi" from the peer; the server's reader answers it.
        let mask = [1u8, 2, 3, 4];
        let mut ping = vec![0x80 | OP_PING, 0x80 | 2];
        ping.extend_from_slice(&mask);
        ping.extend_from_slice(&[b'h' ^ 1, b'i' ^ 2]);
        peer.write_all(&ping).await.unwrap();
        let shared = writer.shared.clone();
        let reading = tokio::spawn(async move { reader.recv().await });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while shared.write.lock().await.held.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the pong was not held"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let expected = message.clone();
        let receiving = tokio::spawn(async move {
            let mut head = [0u8; 10];
            peer.read_exact(&mut head).await.unwrap();
            assert_eq!(head[..2], [0x80 | OP_BINARY, 127]);
            let len = u64::from_be_bytes(head[2..10].try_into().unwrap()) as usize;
            assert_eq!(len, expected.len());
            let mut body = vec![0u8; len];
            peer.read_exact(&mut body).await.unwrap();
            assert!(body == expected, "the data frame arrived corrupted");
            let mut pong = [0u8; 4];
            peer.read_exact(&mut pong).await.unwrap();
            assert_eq!(pong, [0x80 | OP_PONG, 2, b'h', b'i']);
        });
        writer.write_raw(&rest).await.unwrap();
        receiving.await.unwrap();
        assert!(!shared.write.lock().await.torn);
        reading.abort();
    }

    /// After a large message the read buffer is small again, so an idle
    /// connection does not keep its largest message's memory.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_read_buffer_shrinks_after_a_large_message() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server_side, _) = listener.accept().await.unwrap();
        let (mut reader, _writer) =
            pair(server_side.into(), BytesMut::new(), Role::Server, 1 << 30);
        let len = 4usize << 20;
        let mut frame = vec![0x80 | OP_BINARY, 0x80 | 127];
        frame.extend_from_slice(&(len as u64).to_be_bytes());
        frame.extend_from_slice(&[0, 0, 0, 0]);
        frame.resize(frame.len() + len, 7);
        let sending = tokio::spawn(async move {
            peer.write_all(&frame).await.unwrap();
            peer
        });
        let big = reader.recv().await.unwrap();
        assert_eq!(big.len(), len);
        let mut peer = sending.await.unwrap();
        drop(big);
        // The next read reserves room: a buffer still sharing the large
        // allocation would take it all back now.
        peer.write_all(&[0x80 | OP_BINARY, 0x80 | 3, 0, 0, 0, 0, 1, 2, 3])
            .await
            .unwrap();
        assert_eq!(&reader.recv().await.unwrap()[..], &[1, 2, 3]);
        assert!(
            reader.buf.capacity() <= 64 * 1024,
            "the buffer kept {} bytes",
            reader.buf.capacity()
        );
    }

    #[test]
    fn head_ends_and_keys() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nrest"), Some(27));
        assert_eq!(head_end(b"GET / HTTP/1.1\nHost: a\n\nrest"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\nHost: a\n\r\n"), Some(25));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n"), None);
        assert!(valid_key("dGhlIHNhbXBsZSBub25jZQ=="));
        assert!(valid_key(" dGhlIHNhbXBsZSBub25jZQ== "));
        for bad in [
            "",
            "x",
            "dGhlIHNhbXBsZSBub25jZQ",
            "dGhlIHNhbXBsZSBub25jZQ=",
            "dGhlIHNhbXBsZSBub25jZQ===",
            "dGhlIHNhbXBsZSBub25jZ!==",
            "dGhlIHNhbXBsZSBub25jZQxx",
        ] {
            assert!(!valid_key(bad), "{bad:?}");
        }
        for code in [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, u16::MAX] {
            assert!(!valid_close_code(code), "{code}");
        }
        for code in [1000, 1001, 1002, 1003, 1007, 1011, 1014, 3000, 4999] {
            assert!(valid_close_code(code), "{code}");
        }
    }

    #[test]
    fn rfc_accept_key() {
        // RFC 6455 section 1.3's example.
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }

    #[test]
    fn sha1_known_digest() {
        let hex: String = sha1(b"abc").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    }

    #[test]
    fn masking_is_an_involution() {
        let mut data: Vec<u8> = (0..37u8).collect();
        apply_mask(&mut data, [1, 2, 3, 4]);
        assert_eq!(data[0], 1);
        assert_eq!(data[5], 5 ^ 2);
        apply_mask(&mut data, [1, 2, 3, 4]);
        assert_eq!(data, (0..37u8).collect::<Vec<_>>());
    }

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("ws://127.0.0.1:8765").unwrap(),
            ("127.0.0.1:8765".into(), "127.0.0.1:8765".into(), "/".into())
        );
        assert_eq!(
            parse_url("ws://localhost/x?y").unwrap(),
            ("localhost:80".into(), "localhost".into(), "/x?y".into())
        );
        assert_eq!(parse_url("ws://[::1]:9/").unwrap().0, "[::1]:9");
        assert_eq!(parse_url("wss://x/p").unwrap().0, "x:443");
        assert!(parse_target("wss://x").unwrap().secure);
        assert_eq!(parse_target("wss://[::1]:9").unwrap().host, "::1");
        assert!(parse_url("http://x").is_err());
        assert!(parse_url("ws://").is_err());
    }
}
