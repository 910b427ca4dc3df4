//! The part of a session that domain workers see: its outbound queues
//! (reliable messages, then latest-wins snapshots), its close signal and
//! what it holds. The connection's reader and writer are in `session`.

use super::snapshot::PendingSnapshot;
use crate::budget::{Account, BudgetError, Charge};
use crate::codec::{Codec, Dict, Value};
use crate::protocol::{response_envelope, response_head, ErrorCode, ProtocolError};
use crate::transport::ws::Direct;
use crate::transport::{DirectWriter, TransportError};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{watch, Notify, OwnedSemaphorePermit};

/// Reliable messages a session may have queued; one more disconnects it.
pub(crate) const RELIABLE_QUEUE_LIMIT: usize = 64;

/// Most responses held for the session's other requests
/// ([`ServerConfig::reply_hold`](super::ServerConfig::reply_hold)): one
/// more writes them all.
const HOLD_MAX_MESSAGES: usize = 32;
/// Larger responses are never held (writing them together saves nothing
/// worth their wait).
const HOLD_MAX_BYTES: usize = 64 * 1024;

/// Longest `request_id`, `operation_id` and `subscription_id`, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Longest `resource_id` echoed in a response (registered IDs are at most
/// this long, so a longer one is never found).
pub(crate) const MAX_RESOURCE_ID_BYTES: usize = 1024;

/// A request queued at a domain: its in-flight slot and the bytes it holds
/// (its frame and decoded tree), both given back when the domain is done,
/// after its response. The last of a session's requests to be done writes
/// the responses held for it.
pub(crate) struct InFlight {
    _permit: OwnedSemaphorePermit,
    _charge: Charge,
    session: Arc<SessionShared>,
}

impl InFlight {
    pub(crate) fn new(
        permit: OwnedSemaphorePermit,
        charge: Charge,
        session: Arc<SessionShared>,
    ) -> InFlight {
        session.at_domains.fetch_add(1, Ordering::AcqRel);
        InFlight {
            _permit: permit,
            _charge: charge,
            session,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.session.at_domains.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.session.release_held();
        }
    }
}

/// Why a session ended, for logs and tests.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CloseReason {
    #[error("the peer closed the connection")]
    PeerClosed,
    #[error("invalid envelope: {0}")]
    InvalidEnvelope(String),
    #[error("transport error: {0}")]
    Transport(TransportError),
    /// The peer sent a text message (v1 is binary only): closed with 1003.
    #[error("the peer sent a text message; the protocol uses binary messages only")]
    TextMessage,
    #[error("the client did not read its responses (reliable queue overflow)")]
    QueueOverflow,
    #[error("the server is shutting down")]
    Shutdown,
    /// The connection or the server's byte budget was exceeded.
    #[error("{0}")]
    OverBudget(BudgetError),
    /// No hello within `hello_timeout` of the upgrade.
    #[error("no hello in time")]
    HelloTimeout,
    /// Held nothing and sent nothing for `idle_session_timeout`.
    #[error("idle: held nothing and sent nothing for the idle session timeout")]
    Idle,
    // [transport: heartbeat hook]
    /// Nothing at all (not even a pong to a heartbeat ping) arrived for the
    /// heartbeat timeout: the peer vanished.
    #[error("the peer vanished: nothing received for {} s (heartbeat timeout)", .0.as_secs_f64())]
    PeerVanished(std::time::Duration),
}

impl CloseReason {
    /// Why a session ends when its transport fails.
    pub(super) fn from_transport(e: TransportError) -> CloseReason {
        match e {
            TransportError::Closed => CloseReason::PeerClosed,
            TransportError::TextMessage => CloseReason::TextMessage,
            e => CloseReason::Transport(e),
        }
    }
}

#[derive(Default)]
pub(super) struct Outbound {
    reliable: VecDeque<Queued>,
    /// Responses held for the session's other requests at domains, in the
    /// order they were produced; they go before anything queued after them.
    held: Vec<(Bytes, Charge)>,
    /// When the first of `held` was held: the writer task writes them at
    /// this plus the hold, if nothing has before.
    held_since: Option<std::time::Instant>,
    /// Pending snapshots, one per subscription, in first-queued order.
    snapshots: SnapshotSlots,
    /// Whether the writer task has written and flushed everything it took
    /// and waits for more: only then may a reliable message skip the queue.
    writer_idle: bool,
    /// Sends at once from the thread that produced the message (taken away
    /// when the session closes, so the connection's last handle goes too).
    pub(super) direct: Option<DirectWriter>,
}

/// Latest-wins snapshot slots, one per subscription, delivered in the order
/// the slots were first filled. Replacing, adding, removing and taking the
/// next are each O(1) (amortised), whatever the number of subscriptions: a
/// boundary publishing to many never-reading observers costs the controller
/// a constant per delivery.
struct SnapshotSlots<T = PendingSnapshot> {
    /// The pending snapshot of each subscription, with its slot's stamp.
    slots: HashMap<Arc<str>, (u64, T)>,
    /// Delivery order: (subscription, stamp). An entry whose stamp no longer
    /// matches its slot (removed, or removed and filled again) is stale and
    /// skipped.
    order: VecDeque<(Arc<str>, u64)>,
    next_stamp: u64,
}

impl<T> Default for SnapshotSlots<T> {
    fn default() -> Self {
        SnapshotSlots {
            slots: HashMap::new(),
            order: VecDeque::new(),
            next_stamp: 0,
        }
    }
}

impl<T> SnapshotSlots<T> {
    fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn clear(&mut self) {
        self.slots.clear();
        self.order.clear();
    }

    /// Fills a subscription's slot, replacing what it held (keeping its
    /// place in the delivery order); whether a pending snapshot was replaced.
    fn put(&mut self, id: Arc<str>, snapshot: T) -> bool {
        match self.slots.get_mut(&id) {
            Some((_, slot)) => {
                *slot = snapshot;
                true
            }
            None => {
                let stamp = self.next_stamp;
                self.next_stamp += 1;
                self.order.push_back((id.clone(), stamp));
                self.slots.insert(id, (stamp, snapshot));
                false
            }
        }
    }

    fn remove(&mut self, id: &str) {
        self.slots.remove(id);
        // Stale order entries are skipped when reached; compact when they
        // outnumber the live ones, so the queue stays proportional to the
        // subscriptions however often they come and go.
        if self.order.len() > 2 * self.slots.len() + 16 {
            let slots = &self.slots;
            self.order
                .retain(|(id, stamp)| slots.get(id).is_some_and(|(s, _)| s == stamp));
        }
    }

    /// The oldest filled slot, emptied.
    fn pop(&mut self) -> Option<(Arc<str>, T)> {
        while let Some((id, stamp)) = self.order.pop_front() {
            if self.slots.get(&id).is_some_and(|(s, _)| *s == stamp) {
                if let Some((_, snapshot)) = self.slots.remove(&id) {
                    return Some((id, snapshot));
                }
            }
        }
        None
    }
}

/// A reliable queue entry.
enum Queued {
    /// An envelope to frame and send, and the bytes it is charged.
    Message(Bytes, Charge),
    /// The framed rest of a partly written direct send: it goes next.
    Raw(Bytes, Charge),
}

/// The part of a session that domain workers see.
pub(crate) struct SessionShared {
    pub id: Arc<str>,
    pub(super) max_message_size: AtomicUsize,
    pub(super) ready: AtomicBool,
    pub(super) outbound: Mutex<Outbound>,
    pub(super) notify: Notify,
    closed: AtomicBool,
    pub(super) close_tx: watch::Sender<Option<CloseReason>>,
    /// Subscription IDs alive in any domain (unique per session).
    pub subscriptions: Mutex<HashSet<Arc<str>>>,
    /// Domains this session has sent requests to (to detach on close).
    pub(super) touched: Mutex<HashSet<usize>>,
    /// Whether a request of this session ever went to a domain (it may then
    /// hold control, so it is never closed as idle).
    pub(super) routed: AtomicBool,
    /// This session's requests at domains (queued or running).
    at_domains: AtomicUsize,
    /// Whether responses are held (`Outbound::held_since` is set), read
    /// without the lock when the session's last request at a domain is done.
    holding: AtomicBool,
    /// [`ServerConfig::reply_hold`](super::ServerConfig::reply_hold).
    pub(super) reply_hold: Option<std::time::Duration>,
    /// What this connection holds in memory.
    pub(crate) account: Arc<Account>,
    /// The server's counters (requests, bytes, dropped snapshots).
    pub(crate) metrics: Arc<crate::metrics::Metrics>,
    /// The leading members of this session's successful responses, as
    /// `response_head` builds them, with null in place of the echoed IDs
    /// (written from here instead of being built per response).
    pub(crate) ok_head: [(&'static str, Value); 6],
}

impl SessionShared {
    pub(crate) fn new(
        id: Arc<str>,
        max_message_size: usize,
        account: Arc<Account>,
        metrics: Arc<crate::metrics::Metrics>,
        reply_hold: Option<std::time::Duration>,
    ) -> Arc<SessionShared> {
        let (close_tx, _) = watch::channel(None);
        let ok_head = response_head(true, &id, Value::Null, Value::Null, Value::Null);
        Arc::new(SessionShared {
            ok_head,
            id,
            max_message_size: AtomicUsize::new(max_message_size),
            ready: AtomicBool::new(false),
            outbound: Mutex::new(Outbound::default()),
            notify: Notify::new(),
            closed: AtomicBool::new(false),
            close_tx,
            subscriptions: Mutex::new(HashSet::new()),
            touched: Mutex::new(HashSet::new()),
            routed: AtomicBool::new(false),
            at_domains: AtomicUsize::new(0),
            holding: AtomicBool::new(false),
            reply_hold,
            account,
            metrics,
        })
    }

    /// The codec with this session's negotiated limit.
    pub(crate) fn codec(&self) -> Codec {
        Codec::new(self.max_message_size.load(Ordering::Relaxed)).unwrap_or_default()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Closes the session (idempotent): queues are dropped and both halves stop.
    pub(crate) fn close(&self, reason: CloseReason) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        {
            let mut out = self.outbound.lock();
            out.reliable.clear();
            out.held.clear();
            self.held_since(&mut out, None);
            out.snapshots.clear();
            out.writer_idle = false;
            out.direct = None;
        }
        self.close_tx.send_replace(Some(reason));
        self.notify.notify_one();
    }

    /// Sends a reliable message: written at once from this thread when
    /// nothing is ahead of it, held for the session's other requests at
    /// domains ([`ServerConfig::reply_hold`](super::ServerConfig::reply_hold)),
    /// or queued for the writer task; a peer that lets more than
    /// [`RELIABLE_QUEUE_LIMIT`] pile up is disconnected.
    pub(crate) fn send_reliable(&self, message: Bytes) {
        if self.is_closed() {
            return;
        }
        self.metrics
            .bytes_out
            .fetch_add(message.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let mut out = self.outbound.lock();
        if self.is_closed() {
            return;
        }
        // Only while the writer is idle: a busy writer gathers what is
        // queued behind it into its next write anyway.
        let direct_allowed = out.writer_idle && out.reliable.is_empty() && out.direct.is_some();
        if direct_allowed
            && self.reply_hold.is_some()
            && self.at_domains.load(Ordering::Acquire) > 1
            && out.held.len() < HOLD_MAX_MESSAGES
            && message.len() <= HOLD_MAX_BYTES
        {
            let charge = match self.account.charge(message.len()) {
                Ok(charge) => charge,
                Err(e) => {
                    drop(out);
                    return self.close(CloseReason::OverBudget(e));
                }
            };
            out.held.push((message, charge));
            if out.held_since.is_none() {
                // The writer task arms the hold's deadline.
                self.held_since(&mut out, Some(std::time::Instant::now()));
                drop(out);
                self.notify.notify_one();
            }
            return;
        }
        if direct_allowed {
            // Fast path: nothing is ahead of this message (but what is
            // held), so the producing thread writes it itself instead of
            // waking the writer task. The lock keeps the writer from
            // starting meanwhile.
            let held = std::mem::take(&mut out.held);
            self.held_since(&mut out, None);
            let unwritten = if held.is_empty() {
                self.try_direct(out, std::slice::from_ref(&message))
            } else {
                let mut batch: Vec<Bytes> = held.iter().map(|(m, _)| m.clone()).collect();
                batch.push(message.clone());
                self.try_direct(out, &batch)
            };
            let Some(guard) = unwritten else {
                return;
            };
            out = guard;
            // Not written: what was held goes first.
            for (m, charge) in held {
                out.reliable.push_back(Queued::Message(m, charge));
            }
        } else if !out.held.is_empty() {
            self.queue_held(&mut out);
        }
        let overflow = if out.reliable.len() >= RELIABLE_QUEUE_LIMIT {
            Some(CloseReason::QueueOverflow)
        } else {
            match self.account.charge(message.len()) {
                Ok(charge) => {
                    out.reliable.push_back(Queued::Message(message, charge));
                    None
                }
                Err(e) => Some(CloseReason::OverBudget(e)),
            }
        };
        drop(out);
        match overflow {
            Some(reason) => self.close(reason),
            None => self.notify.notify_one(),
        }
    }

    /// Writes `batch` at once from this thread if the socket takes it
    /// (the rest of a partial write queued first for the writer); gives the
    /// lock back when nothing was written.
    fn try_direct<'a>(
        &self,
        mut out: parking_lot::MutexGuard<'a, Outbound>,
        batch: &[Bytes],
    ) -> Option<parking_lot::MutexGuard<'a, Outbound>> {
        let sent = match &out.direct {
            Some(direct) => direct.try_send_all(batch),
            None => Direct::NotNow,
        };
        match sent {
            Direct::Sent => {
                self.held_since(&mut out, None);
                let more = !out.snapshots.is_empty();
                drop(out);
                if more {
                    self.notify.notify_one();
                }
                None
            }
            Direct::Partial(rest) => {
                // The rest must go next whatever the budget: it is
                // charged, and may overdraw by one message.
                self.held_since(&mut out, None);
                let charge = self.account.charge(rest.len()).unwrap_or_default();
                out.reliable.push_back(Queued::Raw(rest, charge));
                drop(out);
                self.notify.notify_one();
                None
            }
            Direct::NotNow => Some(out),
        }
    }

    /// Sets when the held responses were first held (`None`: none are).
    fn held_since(&self, out: &mut Outbound, since: Option<std::time::Instant>) {
        out.held_since = since;
        self.holding.store(since.is_some(), Ordering::Release);
    }

    /// Moves the held responses to the writer's queue.
    fn queue_held(&self, out: &mut Outbound) {
        self.held_since(out, None);
        for (m, charge) in out.held.drain(..) {
            out.reliable.push_back(Queued::Message(m, charge));
        }
    }

    /// Writes the held responses now (the session's last request at a
    /// domain is done, or the hold's time is up): at once from this thread
    /// when the writer is idle, else through the writer task.
    pub(super) fn release_held(&self) {
        if !self.holding.load(Ordering::Acquire) {
            return;
        }
        let mut out = self.outbound.lock();
        if out.held.is_empty() {
            return;
        }
        if out.writer_idle && out.reliable.is_empty() && !self.is_closed() {
            let batch: Vec<Bytes> = out.held.iter().map(|(m, _)| m.clone()).collect();
            let held = std::mem::take(&mut out.held);
            match self.try_direct(out, &batch) {
                None => return,
                Some(guard) => {
                    out = guard;
                    out.held = held;
                }
            }
        }
        self.queue_held(&mut out);
        drop(out);
        self.notify.notify_one();
    }

    /// When the held responses are due, if any are held.
    pub(super) fn held_deadline(&self) -> Option<std::time::Instant> {
        let since = self.outbound.lock().held_since?;
        Some(since + self.reply_hold.unwrap_or_default())
    }

    /// Replaces the pending snapshot of a subscription (latest wins).
    pub(crate) fn send_snapshot(&self, subscription_id: Arc<str>, snapshot: PendingSnapshot) {
        if self.is_closed() {
            return;
        }
        {
            let mut out = self.outbound.lock();
            if out.snapshots.put(subscription_id, snapshot) {
                self.metrics
                    .dropped_snapshots
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        self.notify.notify_one();
    }

    /// Drops a subscription's pending snapshot.
    pub(crate) fn drop_snapshot(&self, subscription_id: &str) {
        self.outbound.lock().snapshots.remove(subscription_id);
    }

    /// Encodes a response (or error) envelope for a request and queues it.
    /// A result that does not fit becomes a `serialization_error`; a session
    /// whose limit cannot even hold that is closed.
    pub(crate) fn respond(&self, request: &Dict, outcome: Result<Value, &ProtocolError>) {
        // Over-long IDs are refused (`check_request`) and not echoed.
        let echo = |key: &str, max: usize| match request.get(key) {
            Some(Value::Str(s)) if s.len() > max => Value::Null,
            other => other.cloned().unwrap_or_default(),
        };
        let envelope = |outcome: Result<Value, &ProtocolError>| {
            response_envelope(
                &self.id,
                echo("request_id", MAX_ID_BYTES),
                echo("resource_id", MAX_RESOURCE_ID_BYTES),
                echo("operation_id", MAX_ID_BYTES),
                outcome,
            )
        };
        self.metrics.request(
            crate::metrics::op_index(request.get("op").and_then(Value::as_str)),
            outcome.as_ref().err().map(|e| &e.code),
        );
        let codec = self.codec();
        let encoded = codec.encode(&envelope(outcome)).or_else(|e| {
            let error = ProtocolError::new(ErrorCode::SerializationError, e.to_string());
            codec.encode(&envelope(Err(&error)))
        });
        match encoded {
            Ok(bytes) => self.send_reliable(Bytes::from(bytes)),
            Err(e) => self.close(CloseReason::InvalidEnvelope(format!(
                "cannot encode even an error response: {e}"
            ))),
        }
    }

    /// The next thing for the writer to send; `None` with `flushed` marks
    /// the writer idle (direct sends allowed) until it takes something again.
    pub(super) fn next_outbound(&self, flushed: bool) -> Option<Outgoing> {
        let mut out = self.outbound.lock();
        if let Some(q) = out.reliable.pop_front() {
            out.writer_idle = false;
            return Some(match q {
                Queued::Message(b, c) => Outgoing::Reliable(b, c),
                Queued::Raw(b, c) => Outgoing::Raw(b, c),
            });
        }
        // Snapshots wait behind held responses (published after them).
        if out.snapshots.is_empty() || !out.held.is_empty() {
            out.writer_idle = flushed && !self.is_closed();
            return None;
        }
        out.writer_idle = false;
        let (id, snap) = out.snapshots.pop()?;
        Some(Outgoing::Snapshot(id, snap))
    }
}

/// What the writer sends next; the charge is held until it is written.
pub(super) enum Outgoing {
    Reliable(Bytes, Charge),
    Raw(Bytes, Charge),
    Snapshot(Arc<str>, PendingSnapshot),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{Server, ServerConfig};
    use crate::transport::frame::{header, OP_BINARY};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The session of the only connection to `server`, once its writer task
    /// is idle (a direct write is then allowed).
    async fn idle_session(server: &Server) -> Arc<SessionShared> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let session = server
                .inner
                .shared
                .sessions
                .lock()
                .values()
                .find_map(std::sync::Weak::upgrade);
            if let Some(session) = session.filter(|s| s.outbound.lock().writer_idle) {
                return session;
            }
            assert!(std::time::Instant::now() < deadline, "no idle session");
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// What a server sends for `messages`: one binary frame each, in order.
    fn frames(messages: &[&Bytes]) -> Vec<u8> {
        let mut wire = Vec::new();
        for m in messages {
            let (head, n) = header(OP_BINARY, m.len());
            wire.extend_from_slice(&head[..n]);
            wire.extend_from_slice(m);
        }
        wire
    }

    /// Sends the same messages to a session of a real server over a Unix
    /// socket, with the session's direct writer (`direct`) or without it
    /// (each message queued for the writer task, the general path), and
    /// returns the bytes the peer read and the reliable queue's length
    /// after each send. A small message; a message too large for the
    /// socket's buffer (the peer not reading yet); a small one while the
    /// rest of the large one waits in the queue (the socket emptied
    /// meanwhile); and once everything is read and the writer idle again,
    /// a last small one.
    async fn wire(direct: bool, messages: &[Bytes; 4]) -> (Vec<u8>, Vec<usize>) {
        let (up, mut peer, session) = upgraded(ServerConfig::default()).await;
        if !direct {
            session.outbound.lock().direct = None;
        }
        // No await between these sends: the writer task (on this test's
        // one thread) cannot take anything meanwhile. Before the third,
        // the peer reads what the socket holds without waiting, so that
        // the socket could take the third at once: only the queue ahead of
        // it keeps it behind the large one's rest.
        let mut queued = Vec::new();
        let mut got = Vec::new();
        for (i, m) in messages[..3].iter().enumerate() {
            if i == 2 {
                got.extend_from_slice(&drain_now(&mut peer));
            }
            session.send_reliable(m.clone());
            queued.push(session.outbound.lock().reliable.len());
        }
        let first = frames(&[&messages[0], &messages[1], &messages[2]]).len();
        let mut rest = vec![0u8; first - got.len()];
        peer.read_exact(&mut rest).await.expect("the first three");
        got.extend_from_slice(&rest);
        let session = idle_session(&up.server).await;
        session.send_reliable(messages[3].clone());
        queued.push(session.outbound.lock().reliable.len());
        let mut last = vec![0u8; frames(&[&messages[3]]).len()];
        peer.read_exact(&mut last).await.expect("the last");
        got.extend_from_slice(&last);
        up.close(session, peer).await;
        (got, queued)
    }

    /// The direct write from the producing thread puts on the wire exactly
    /// what queueing for the writer task does, in the same order: a whole
    /// frame, a frame torn by a full socket whose rest the writer
    /// completes, a message refused the direct way because the queue is not
    /// empty (it follows the rest), and a direct write again once the
    /// writer is idle.
    #[tokio::test(flavor = "current_thread")]
    async fn direct_writes_put_the_queued_writes_bytes_on_the_wire() {
        let big: Vec<u8> = (0..8usize << 20).map(|i| (i % 251) as u8).collect();
        let messages = [
            Bytes::from_static(b"first"),
            Bytes::from(big),
            Bytes::from_static(b"behind the rest"),
            Bytes::from(vec![7u8; 300]),
        ];
        let expected = frames(&messages.iter().collect::<Vec<_>>());
        let (queued_wire, queued) = wire(false, &messages).await;
        let (direct_wire, direct) = wire(true, &messages).await;
        assert!(queued_wire == expected, "the queued writes' bytes");
        assert!(direct_wire == queued_wire, "the direct writes' bytes");
        // Every message queued on the general path; on the direct one, the
        // first and last written at once, the large one's rest queued and
        // the message after it refused (queued behind the rest).
        assert_eq!(queued, [1, 2, 3, 1]);
        assert_eq!(direct, [0, 1, 2, 0]);
    }

    /// A real server listening on a Unix socket.
    struct Upgraded {
        server: Server,
        _dir: tempfile::TempDir,
        _listener: crate::server::Listener,
    }

    impl Upgraded {
        /// Closes the session, then the peer's end, then the server.
        async fn close(self, session: Arc<SessionShared>, peer: tokio::net::UnixStream) {
            session.close(CloseReason::Shutdown);
            drop(session);
            drop(peer);
            self.server.shutdown().await;
        }
    }

    /// A server with `config`, one session over a Unix socket once its
    /// writer is idle, and the peer's end of the connection.
    async fn upgraded(
        config: ServerConfig,
    ) -> (Upgraded, tokio::net::UnixStream, Arc<SessionShared>) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("s.sock");
        let server = Server::builder(config)
            .start()
            .expect("a valid configuration");
        let listener = server.listen_unix(&path).await.expect("listen");
        let mut peer = tokio::net::UnixStream::connect(&path)
            .await
            .expect("connect");
        peer.write_all(
            b"GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
              Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
              Sec-WebSocket-Version: 13\r\n\r\n",
        )
        .await
        .expect("upgrade request");
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(peer.read_u8().await.expect("the upgrade response"));
        }
        assert!(head.starts_with(b"HTTP/1.1 101"), "{head:?}");
        let session = idle_session(&server).await;
        let up = Upgraded {
            server,
            _dir: dir,
            _listener: listener,
        };
        (up, peer, session)
    }

    /// What the peer can read without waiting, after the server's tasks
    /// have had their turns.
    async fn readable_now(peer: &mut tokio::net::UnixStream) -> Vec<u8> {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        drain_now(peer)
    }

    /// What the peer's socket holds now, without waiting.
    fn drain_now(peer: &mut tokio::net::UnixStream) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match peer.try_read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading the peer's socket: {e}"),
            }
        }
        got
    }

    /// `n` requests of `session` at domains.
    async fn at_domains(session: &Arc<SessionShared>, n: usize) -> Vec<InFlight> {
        let slots = Arc::new(tokio::sync::Semaphore::new(n));
        let mut held = Vec::new();
        for _ in 0..n {
            let permit = slots.clone().acquire_owned().await.expect("a slot");
            held.push(InFlight::new(permit, Charge::default(), session.clone()));
        }
        held
    }

    /// Responses produced while the session's other requests are at
    /// domains are held, and written together, in the order they were
    /// produced, when the last of those requests is done: the bytes one
    /// write at a time would have put on the wire. Without other requests
    /// at domains, or with the hold off, each is written at once.
    #[tokio::test(flavor = "current_thread")]
    async fn held_responses_are_written_together_when_the_last_request_is_done() {
        let messages = [
            Bytes::from_static(b"first"),
            Bytes::from(vec![3u8; 70_000]),
            Bytes::from_static(b"third"),
        ];
        // A hold far longer than the test: only the requests release them.
        let long = ServerConfig {
            reply_hold: Some(std::time::Duration::from_secs(3600)),
            ..Default::default()
        };
        let (up, mut peer, session) = upgraded(long).await;
        let mut requests = at_domains(&session, 3).await;
        session.send_reliable(messages[0].clone());
        assert_eq!(readable_now(&mut peer).await, b"", "held");
        // Too large to hold: written at once, with what was held before it.
        session.send_reliable(messages[1].clone());
        let mut got = readable_now(&mut peer).await;
        let first_two = frames(&[&messages[0], &messages[1]]);
        let mut rest = vec![0u8; first_two.len() - got.len()];
        peer.read_exact(&mut rest).await.expect("the first two");
        got.extend_from_slice(&rest);
        assert!(got == first_two, "the held response went first");
        session.send_reliable(messages[2].clone());
        requests.pop();
        requests.pop();
        assert_eq!(readable_now(&mut peer).await, b"", "one request still out");
        // The last request is done: the held response goes.
        requests.pop();
        assert_eq!(readable_now(&mut peer).await, frames(&[&messages[2]]));
        // Alone at its domain, a response is written at once.
        let mut alone = at_domains(&session, 1).await;
        session.send_reliable(Bytes::from_static(b"alone"));
        assert_eq!(
            readable_now(&mut peer).await,
            frames(&[&Bytes::from_static(b"alone")])
        );
        alone.clear();
        up.close(session, peer).await;

        // With the hold off, every response is written at once.
        let off = ServerConfig {
            reply_hold: None,
            ..Default::default()
        };
        let (up, mut peer, session) = upgraded(off).await;
        let requests = at_domains(&session, 3).await;
        session.send_reliable(messages[0].clone());
        assert_eq!(readable_now(&mut peer).await, frames(&[&messages[0]]));
        drop(requests);
        up.close(session, peer).await;
    }

    /// A held response whose session's other requests never finish is
    /// written by the writer task once its hold is up.
    #[tokio::test(flavor = "current_thread")]
    async fn a_held_response_is_written_when_its_hold_is_up() {
        let short = ServerConfig {
            reply_hold: Some(std::time::Duration::from_millis(5)),
            ..Default::default()
        };
        let (up, mut peer, session) = upgraded(short).await;
        let requests = at_domains(&session, 2).await;
        let message = Bytes::from_static(b"held, then due");
        session.send_reliable(message.clone());
        let expected = frames(&[&message]);
        let mut got = vec![0u8; expected.len()];
        // Both requests are still out: only the hold's deadline writes it.
        peer.read_exact(&mut got).await.expect("the held response");
        assert!(got == expected);
        assert!(session.outbound.lock().held.is_empty());
        drop(requests);
        up.close(session, peer).await;
    }

    #[test]
    fn snapshot_slots_are_latest_wins_in_first_filled_order() {
        let mut s = SnapshotSlots::<u32>::default();
        let id = |i: u32| -> Arc<str> { Arc::from(format!("sub{i}").as_str()) };
        for round in 0..3 {
            for i in 0..1024 {
                s.put(id(i), round);
            }
        }
        assert_eq!(s.order.len(), 1024, "a replaced slot keeps its one place");
        s.remove("sub1");
        s.put(id(1), 7);
        // Come and go many times without the writer taking anything: the
        // order queue stays proportional to the live slots.
        for _ in 0..10_000 {
            s.remove("sub2");
            s.put(id(2), 9);
        }
        assert!(s.order.len() <= 2 * 1024 + 17, "{}", s.order.len());
        let mut got = Vec::new();
        while let Some((k, v)) = s.pop() {
            got.push((k.to_string(), v));
        }
        assert_eq!(got.len(), 1024);
        assert_eq!(got[0], ("sub0".into(), 2));
        assert_eq!(got[1], ("sub3".into(), 2), "removed slots lose their place");
        assert_eq!(got[1021], ("sub1023".into(), 2));
        assert_eq!(got[1022], ("sub1".into(), 7));
        assert_eq!(got[1023], ("sub2".into(), 9));
        assert!(s.is_empty() && s.pop().is_none());
    }
}
