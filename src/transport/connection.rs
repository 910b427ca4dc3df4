//! A WebSocket connection after its handshake: the reader (frames into
//! messages, control frames answered, limits and budget enforced from frame
//! headers) and the writer (gathered small frames, large ones written from
//! their own buffers, direct sends from other threads), sharing the
//! stream's write side.
//!
//! Here frames are read into spare buffer capacity without initialisation,
//! a complete message is split off the buffer as `Bytes` (zero-copy: the
//! envelope decoder then slices arrays out of it), and outgoing frames are
//! written with their header, without an intermediate frame object.

use super::error::TransportError;
use super::frame::{
    self, random_u64, FrameError, Header, Parsed, Role, OP_BINARY, OP_CLOSE, OP_CONTINUATION,
    OP_PING, OP_PONG, OP_TEXT,
};
use super::keepalive::{self, Heard};
use super::tls::{ReadHalf, Stream, WriteHalf};
use crate::budget::{Account, Charge};
use bytes::{Buf, Bytes, BytesMut};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Frames up to this size are gathered into one write with their header.
const COALESCE: usize = 64 * 1024;

/// Control frames held back while a data frame is torn, at most.
const HELD_LIMIT: usize = 4096;

/// Most control frames (pings and pongs together) read from a peer in one
/// second: once as many arrived, nothing more is read from the connection
/// until the second is over, so a flood is throttled by TCP backpressure
/// (the peer's sends block) instead of costing a pong write (a system
/// call) each. Heartbeats need one every few seconds at most; the limit
/// only stops floods, and closing would only invite a reconnection flood.
pub(crate) const MAX_CONTROL_PER_SECOND: u32 = 100;

/// After a message larger than this, the read buffer is replaced by a small
/// one, so an idle connection does not keep its largest message's memory.
const SHRINK_AFTER: usize = 64 * 1024;

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
        let mask = (self.role == Role::Client).then(|| self.next_mask());
        frame::encode_into(out, opcode, payload, mask);
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

/// The receiving half.
pub(crate) struct WsReader {
    read: ReadHalf,
    buf: BytesMut,
    shared: Arc<Shared>,
    max_message: usize,
    /// A fragmented message being assembled (boxed: rare, and the reader
    /// stays small).
    partial: Option<Box<BytesMut>>,
    /// Frames read whole ([`WsReader::recv_frames`]): the payload bytes of
    /// the fragmented message under way, if one is.
    forwarding: Option<u64>,
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
    /// When the peer last sent anything (heartbeats).
    heard: Arc<Heard>,
    /// Keep the read buffer between messages even on the server side (a
    /// relay's forwarding: its fixed per-connection memory counts it).
    keep_buffer: bool,
    /// The current one-second window of control frames: its start and the
    /// frames counted in it.
    control_window: (Instant, u32),
}

/// The sending half.
pub(crate) struct WsWriter {
    shared: Arc<Shared>,
    /// Small frames waiting for the next flush.
    out: Vec<u8>,
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

    /// When the last ping arrived (the peer's keepalive).
    pub(crate) fn last_control(&self) -> Option<Instant> {
        self.last_control
    }

    /// A handle for heartbeats on this connection.
    pub(crate) fn keepalive(&self) -> Keepalive {
        Keepalive {
            shared: self.shared.clone(),
            heard: self.heard.clone(),
        }
    }

    /// What the last message returned by [`WsReader::recv`] was charged.
    pub(crate) fn take_charge(&mut self) -> Charge {
        std::mem::take(&mut self.charge)
    }

    /// Reads more bytes into the buffer's spare capacity (no zero-filling).
    /// Once part of a message has arrived, the rest must come within the
    /// message timeout.
    async fn fill(&mut self, want: usize) -> Result<(), TransportError> {
        if self.shared.role == Role::Server
            && !self.keep_buffer
            && self.buf.is_empty()
            && self.partial.is_none()
        {
            // Between messages a server holds no read buffer while it
            // waits (an idle session then costs none): the next one is
            // allocated when bytes are there to read (docs/network.md,
            // "Many sessions").
            let spare = std::mem::take(&mut self.buf);
            match self.read.readable().await {
                Some(ready) => ready.map_err(TransportError::io)?,
                None => self.buf = spare,
            }
        }
        if self.buf.capacity() - self.buf.len() < want {
            self.buf.reserve(want.max(8 * 1024));
        }
        let in_message =
            !self.buf.is_empty() || self.partial.is_some() || self.forwarding.is_some();
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
                    return Err(self.fail(TransportError::MessageTimeout(waited)).await);
                }
            },
            None => read.await,
        }
        .map_err(TransportError::io)?;
        if n == 0 {
            return Err(TransportError::Closed);
        }
        // One clock read for both stamps.
        let now = Instant::now();
        self.heard.touch_at(now);
        if !in_message {
            self.started = Some(now);
        }
        Ok(())
    }

    /// Counts a control frame; `false` (it is then dropped unanswered) if
    /// the peer has sent more than [`MAX_CONTROL_PER_SECOND`] in the current
    /// second (never while the throttle in `next` holds).
    fn count_control(&mut self) -> bool {
        let now = Instant::now();
        let (start, count) = &mut self.control_window;
        if now.duration_since(*start) >= Duration::from_secs(1) {
            *start = now;
            *count = 0;
        }
        *count += 1;
        *count <= MAX_CONTROL_PER_SECOND
    }

    /// Closes with the error's close code (and its text as the reason).
    async fn fail(&mut self, error: TransportError) -> TransportError {
        let code = error.close_code().unwrap_or(1011);
        let payload = frame::close_payload(code, &error.to_string());
        let _ = self.shared.write_control(OP_CLOSE, &payload).await;
        error
    }

    /// The next binary message.
    pub(crate) async fn recv(&mut self) -> Result<Bytes, TransportError> {
        self.next(false, Whole::No).await
    }

    /// The next data frames as they came, headers (and masking keys)
    /// included, for a relay to write on unchanged: the next data frame and
    /// the further whole data frames the buffer already holds behind it, as
    /// they lie there (one contiguous run, for one write). Every rule of
    /// [`recv`](Self::recv) holds for each frame (the message limit over a
    /// fragmented message's frames, the budget charged from each frame's
    /// header, control frames answered), but payloads are neither unmasked
    /// nor assembled. A frame that would be refused (over a limit, out of
    /// sequence, over the budget) ends the run, and the next call reads and
    /// refuses it; a control frame ends it too. A connection read this way
    /// is read only this way, and keeps its read buffer between messages
    /// (a relay counts it in its fixed memory per connection).
    pub(crate) async fn recv_frames(&mut self) -> Result<Bytes, TransportError> {
        self.keep_buffer = true;
        self.next(false, Whole::Run).await
    }

    /// Answers control frames (pings, a close) while the session cannot take
    /// another message: reads until the next data frame's header and stops
    /// there (pending forever) without buffering its payload. Returns only
    /// when the connection fails or closes.
    pub(crate) async fn pump_control(&mut self) -> TransportError {
        match self.next(true, Whole::No).await {
            Err(e) => e,
            // `next(true)` stops before data frames: never reached.
            Ok(_) => TransportError::Closed,
        }
    }

    /// Takes the first `end` bytes of the buffer (whole frames). After a
    /// large frame the large allocation then belongs to the frame alone.
    fn split_frames(&mut self, end: usize) -> BytesMut {
        let frames = self.buf.split_to(end);
        self.head_charged = false;
        if end > SHRINK_AFTER {
            let rest = self.buf.split();
            self.buf = BytesMut::with_capacity(rest.len().max(8 * 1024));
            self.buf.extend_from_slice(&rest);
        }
        frames
    }

    /// Extends a run of whole data frames ending at `end` with those after
    /// it that the buffer holds whole and that pass every check a frame
    /// read alone passes (sequence, message limit, budget: each is charged
    /// here); returns the run's new end, and whether a gathered frame ended
    /// a message. `forwarding` follows the frames.
    fn gather(&mut self, mut end: usize, forwarding: &mut Option<u64>) -> (usize, bool) {
        let mut ended = false;
        while let Ok(Parsed::Header(h)) = frame::parse_header(&self.buf[end..], self.shared.role) {
            let total = h.header_len + h.len as usize;
            let assembled = forwarding.unwrap_or(0);
            if h.is_control()
                || !in_sequence(h.opcode, forwarding.is_some())
                || assembled.saturating_add(h.len) > self.max_message as u64
                || self.buf.len() - end < total
            {
                break;
            }
            if let Some(account) = &self.account {
                match account.charge(h.len as usize) {
                    Ok(c) => self.charge.absorb(c),
                    Err(_) => break,
                }
            }
            *forwarding = (!h.fin).then_some(assembled + h.len);
            ended |= h.fin;
            end += total;
        }
        (end, ended)
    }

    async fn next(&mut self, control_only: bool, whole: Whole) -> Result<Bytes, TransportError> {
        self.heard.set_parked(false);
        loop {
            // The peer sent its second's worth of control frames: nothing
            // more is read until the second is over (cancel-safe: nothing
            // was taken from the buffer).
            let (start, count) = self.control_window;
            if count >= MAX_CONTROL_PER_SECOND {
                let over = start + Duration::from_secs(1);
                if Instant::now() < over {
                    self.heard.set_parked(true);
                    tokio::time::sleep_until(over.into()).await;
                    self.heard.set_parked(false);
                }
                self.control_window = (Instant::now(), 0);
            }
            let header = match frame::parse_header(&self.buf, self.shared.role) {
                Ok(Parsed::Header(h)) => h,
                Ok(Parsed::Incomplete(need)) => {
                    self.fill(need - self.buf.len()).await?;
                    continue;
                }
                Err(e) => return Err(self.fail(e.into()).await),
            };
            let Header {
                fin,
                opcode,
                len,
                header_len,
                ..
            } = header;
            let is_control = header.is_control();
            if opcode == OP_TEXT {
                return Err(self.fail(TransportError::TextMessage).await);
            }
            if !is_control && control_only {
                // The session cannot take a message now: leave it unread
                // (the peer is not silent meanwhile).
                self.heard.set_parked(true);
                std::future::pending::<()>().await;
            }
            let assembled = match self.forwarding {
                Some(n) => n,
                None => self.partial.as_ref().map_or(0, |p| p.len()) as u64,
            };
            if !is_control && assembled.saturating_add(len) > self.max_message as u64 {
                return Err(self.fail(TransportError::TooLarge).await);
            }
            if !is_control && !self.head_charged {
                if let Some(account) = &self.account {
                    match account.charge(len as usize) {
                        Ok(c) => self.charge.absorb(c),
                        Err(e) => return Err(self.fail(e.into()).await),
                    }
                }
                self.head_charged = true;
            }
            let total = header_len + len as usize;
            if self.buf.len() < total {
                let missing = total - self.buf.len();
                self.fill(missing).await?;
                continue;
            }
            if whole != Whole::No && !is_control {
                if !in_sequence(opcode, self.forwarding.is_some()) {
                    return Err(self.fail(FrameError::UnexpectedContinuation.into()).await);
                }
                let mut forwarding = (!fin).then_some(assembled + len);
                let (end, ended) = self.gather(total, &mut forwarding);
                self.forwarding = forwarding;
                let frames = self.split_frames(end);
                if forwarding.is_none() {
                    self.started = (!self.buf.is_empty()).then(Instant::now);
                } else if fin || ended {
                    // The message under way began inside this run.
                    self.started = Some(Instant::now());
                }
                return Ok(frames.freeze());
            }
            let mut frame = self.split_frames(total);
            let mask = header.mask(&frame);
            frame.advance(header_len);
            if let Some(mask) = mask {
                frame::apply_mask(&mut frame, mask);
            }
            match opcode {
                OP_BINARY | OP_CONTINUATION => {
                    let message = match (opcode, self.partial.take()) {
                        (OP_BINARY, None) => frame,
                        (OP_CONTINUATION, Some(started)) => {
                            let mut started = *started;
                            started.extend_from_slice(&frame);
                            started
                        }
                        _ => {
                            return Err(self.fail(FrameError::UnexpectedContinuation.into()).await)
                        }
                    };
                    if fin {
                        self.started = (!self.buf.is_empty()).then(Instant::now);
                        return Ok(message.freeze());
                    }
                    self.partial = Some(Box::new(message));
                }
                OP_PING | OP_PONG if !self.count_control() => {}
                OP_PING => {
                    self.last_control = Some(Instant::now());
                    let _ = self.shared.write_control(OP_PONG, &frame).await;
                }
                // A pong that answers our heartbeat ping is not the peer's
                // own keepalive (an idle session stays idle); an unsolicited
                // one is.
                OP_PONG => {
                    if !self.heard.take_ping() {
                        self.last_control = Some(Instant::now());
                    }
                }
                _ => {
                    // Close: a valid code is echoed, an empty payload
                    // answered 1000; a 1-byte payload, a reserved or
                    // unassigned code, or a reason that is not UTF-8 is a
                    // protocol error (1002).
                    return Err(match frame::parse_close(&frame) {
                        Ok(code) => {
                            let _ = self
                                .shared
                                .write_control(OP_CLOSE, &code.to_be_bytes())
                                .await;
                            TransportError::Closed
                        }
                        Err(e) => self.fail(e.into()).await,
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
        if message.len() <= COALESCE || self.shared.role == Role::Client {
            self.shared.frame_into(&mut self.out, OP_BINARY, &message);
            if self.out.len() > COALESCE {
                self.flush().await?;
            }
            return Ok(());
        }
        let (header, n) = frame::header(OP_BINARY, message.len());
        self.out.extend_from_slice(&header[..n]);
        let mut w = self.shared.write.lock().await;
        let r = w.put(&[&self.out, &message]).await;
        drop(w);
        self.written();
        r.map_err(TransportError::io)
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
        let (header, n) = frame::header(OP_BINARY, len);
        self.out.extend_from_slice(&header[..n]);
        self.out.extend_from_slice(head);
        if len <= COALESCE {
            self.out.extend_from_slice(tail);
            if self.out.len() > COALESCE {
                self.flush().await?;
            }
            return Ok(());
        }
        let mut w = self.shared.write.lock().await;
        let r = w.put(&[&self.out, tail]).await;
        drop(w);
        self.written();
        r.map_err(TransportError::io)
    }

    /// Writes everything gathered.
    pub(crate) async fn flush(&mut self) -> Result<(), TransportError> {
        if self.out.is_empty() {
            return Ok(());
        }
        let mut w = self.shared.write.lock().await;
        let r = w.put(&[&self.out]).await;
        drop(w);
        self.written();
        r.map_err(TransportError::io)
    }

    /// Empties the gathering buffer once written. A server's is freed (the
    /// writer flushes when it has nothing more to send, so an idle session
    /// holds none of it; the next message allocates again); a client's is
    /// kept for its next request.
    fn written(&mut self) {
        if self.shared.role == Role::Server {
            self.out = Vec::new();
        } else {
            self.out.clear();
        }
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
        if self.out.is_empty() {
            // The common case: nobody else is writing and the socket takes
            // the bytes now, in one system call, without the lock's wait or
            // a write future (a TLS stream answers `WouldBlock` here and is
            // written as below).
            if let Ok(mut w) = self.shared.write.try_lock() {
                if !w.torn && !w.close_sent && w.held.is_empty() {
                    let rest = match w.half.try_write_vectored(&[std::io::IoSlice::new(framed)]) {
                        Ok(n) if n >= framed.len() => return Ok(()),
                        Ok(n) => &framed[n..],
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => framed,
                        Err(e) => return Err(TransportError::io(e)),
                    };
                    // The rest of a torn frame, or all of it, as below.
                    return w.put(&[rest]).await.map_err(TransportError::io);
                }
            }
        }
        let mut w = self.shared.write.lock().await;
        // The rest of the torn frame goes first; nothing is gathered while a
        // direct send is possible, so `out` is empty here.
        let r = w.put(&[framed, &self.out]).await;
        drop(w);
        self.written();
        r.map_err(TransportError::io)
    }

    /// Sends a close frame (with a status code and reason) and shuts the
    /// socket's write side.
    pub(crate) async fn close(&mut self, reason: Option<(u16, &str)>) {
        let _ = self.flush().await;
        let payload = match reason {
            Some((code, text)) => frame::close_payload(code, text),
            None => Vec::new(),
        };
        // Held back, and so never sent, after a frame torn by a cancelled
        // write: the peer then sees the connection end instead of a close
        // frame inside a data frame.
        let _ = self.shared.write_control(OP_CLOSE, &payload).await;
        let _ = self.shared.write.lock().await.half.shutdown().await;
    }
}

/// Heartbeats on a connection: pings, and when the peer was last heard from.
#[derive(Clone)]
pub(crate) struct Keepalive {
    shared: Arc<Shared>,
    heard: Arc<Heard>,
}

impl Keepalive {
    /// Pings the peer after `interval` of silence and returns once it has
    /// been silent for `timeout` (see [`keepalive::watch`]); pending forever
    /// without an interval.
    pub(crate) async fn watch(self, interval: Option<Duration>, timeout: Duration) -> Duration {
        let heard = self.heard;
        let shared = self.shared;
        let last = heard.clone();
        keepalive::watch(
            move || last.last(),
            move || {
                let shared = shared.clone();
                heard.ping_sent();
                Box::pin(async move {
                    let _ = shared.write_control(OP_PING, b"").await;
                })
            },
            interval,
            timeout,
        )
        .await
    }
}

/// How [`WsReader::next`] returns data frames.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Whole {
    /// Unmasked and assembled into messages.
    No,
    /// As they came: a data frame and the whole ones behind it in the
    /// buffer.
    Run,
}

/// Whether a data frame with `opcode` may come now: a new message when
/// none is under way, a continuation when one is.
fn in_sequence(opcode: u8, under_way: bool) -> bool {
    matches!(
        (opcode, under_way),
        (OP_BINARY, false) | (OP_CONTINUATION, true)
    )
}

pub(crate) fn pair(
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
            forwarding: None,
            account: None,
            charge: Charge::default(),
            head_charged: false,
            message_timeout: None,
            started: None,
            last_control: None,
            heard: Arc::new(Heard::new()),
            keep_buffer: false,
            control_window: (Instant::now(), 0),
        },
        WsWriter {
            out: if role == Role::Server {
                Vec::new()
            } else {
                Vec::with_capacity(4096)
            },
            shared,
        },
    )
}

#[path = "direct.rs"]
mod direct;
pub(crate) use direct::{Direct, WsDirect};

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
