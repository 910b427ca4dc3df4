//! One connected peer: its outbound queues, its reader (decode, route) and
//! its writer (reliable messages first, then latest-wins snapshots).

use super::budget::{Account, BudgetError, Charge};
use super::domain::Job;
use super::snapshot::PendingSnapshot;
use super::{ServerShared, SERVER_NAME};
use crate::codec::{Codec, Dict, Value};
use crate::protocol::{err, response_envelope, ErrorCode, Op, ProtocolError, PROTOCOL_VERSION};
use crate::transport::ws::Direct;
use crate::transport::{DirectWriter, Reader, TransportError, Writer};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};

/// Reliable messages a session may have queued; one more disconnects it.
pub(crate) const RELIABLE_QUEUE_LIMIT: usize = 64;

/// Longest `request_id`, `operation_id` and `subscription_id`, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Longest `resource_id` echoed in a response (registered IDs are at most
/// this long, so a longer one is never found).
const MAX_RESOURCE_ID_BYTES: usize = 1024;

/// Messages larger than this are decoded on tokio's blocking threads (at
/// most `max_parallel_decodes` at once), not on the async workers.
const BLOCKING_DECODE_BYTES: usize = 64 * 1024;

/// A request queued at a domain: its in-flight slot and the bytes it holds
/// (its frame and decoded tree), both given back when the domain is done.
pub(crate) struct InFlight {
    _permit: OwnedSemaphorePermit,
    _charge: Charge,
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

#[derive(Default)]
struct Outbound {
    reliable: VecDeque<Queued>,
    /// Pending snapshots, one per subscription, in first-queued order.
    snapshots: SnapshotSlots,
    /// Whether the writer task has written and flushed everything it took
    /// and waits for more: only then may a reliable message skip the queue.
    writer_idle: bool,
    /// Sends at once from the thread that produced the message (taken away
    /// when the session closes, so the connection's last handle goes too).
    direct: Option<DirectWriter>,
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
    /// place in the delivery order).
    fn put(&mut self, id: Arc<str>, snapshot: T) {
        match self.slots.get_mut(&id) {
            Some((_, slot)) => *slot = snapshot,
            None => {
                let stamp = self.next_stamp;
                self.next_stamp += 1;
                self.order.push_back((id.clone(), stamp));
                self.slots.insert(id, (stamp, snapshot));
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
    max_message_size: AtomicUsize,
    ready: AtomicBool,
    outbound: Mutex<Outbound>,
    notify: Notify,
    closed: AtomicBool,
    close_tx: watch::Sender<Option<CloseReason>>,
    /// Subscription IDs alive in any domain (unique per session).
    pub subscriptions: Mutex<HashSet<Arc<str>>>,
    /// Domains this session has sent requests to (to detach on close).
    touched: Mutex<HashSet<usize>>,
    /// Whether a request of this session ever went to a domain (it may then
    /// hold control, so it is never closed as idle).
    routed: AtomicBool,
    /// What this connection holds in memory.
    pub(crate) account: Arc<Account>,
}

impl SessionShared {
    pub(crate) fn new(max_message_size: usize, account: Arc<Account>) -> Arc<SessionShared> {
        let (close_tx, _) = watch::channel(None);
        Arc::new(SessionShared {
            id: Arc::from(super::random_hex().as_str()),
            max_message_size: AtomicUsize::new(max_message_size),
            ready: AtomicBool::new(false),
            outbound: Mutex::new(Outbound::default()),
            notify: Notify::new(),
            closed: AtomicBool::new(false),
            close_tx,
            subscriptions: Mutex::new(HashSet::new()),
            touched: Mutex::new(HashSet::new()),
            routed: AtomicBool::new(false),
            account,
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
            out.snapshots.clear();
            out.writer_idle = false;
            out.direct = None;
        }
        self.close_tx.send_replace(Some(reason));
        self.notify.notify_one();
    }

    /// Queues a reliable message; a peer that lets more than
    /// [`RELIABLE_QUEUE_LIMIT`] pile up is disconnected.
    pub(crate) fn send_reliable(&self, message: Bytes) {
        if self.is_closed() {
            return;
        }
        let overflow = {
            let mut out = self.outbound.lock();
            // Fast path: nothing is ahead of this message, so the producing
            // thread writes it itself instead of waking the writer task. The
            // lock keeps the writer from starting meanwhile.
            if out.writer_idle && out.reliable.is_empty() && !self.is_closed() {
                if let Some(direct) = &out.direct {
                    match direct.try_send(&message) {
                        Direct::Sent => return,
                        Direct::Partial(rest) => {
                            // The rest must go next whatever the budget:
                            // it is charged, and may overdraw by one message.
                            let charge = self.account.charge(rest.len()).unwrap_or_default();
                            out.reliable.push_back(Queued::Raw(rest, charge));
                            drop(out);
                            self.notify.notify_one();
                            return;
                        }
                        Direct::NotNow => {}
                    }
                }
            }
            if out.reliable.len() >= RELIABLE_QUEUE_LIMIT {
                Some(CloseReason::QueueOverflow)
            } else {
                match self.account.charge(message.len()) {
                    Ok(charge) => {
                        out.reliable.push_back(Queued::Message(message, charge));
                        None
                    }
                    Err(e) => Some(CloseReason::OverBudget(e)),
                }
            }
        };
        match overflow {
            Some(reason) => self.close(reason),
            None => self.notify.notify_one(),
        }
    }

    /// Replaces the pending snapshot of a subscription (latest wins).
    pub(crate) fn send_snapshot(&self, subscription_id: Arc<str>, snapshot: PendingSnapshot) {
        if self.is_closed() {
            return;
        }
        {
            let mut out = self.outbound.lock();
            out.snapshots.put(subscription_id, snapshot);
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
        let codec = self.codec();
        let encoded = codec.encode(&envelope(outcome)).or_else(|e| {
            let error = ProtocolError::new(ErrorCode::SERIALIZATION_ERROR, e.to_string());
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
    fn next_outbound(&self, flushed: bool) -> Option<Outgoing> {
        let mut out = self.outbound.lock();
        if let Some(q) = out.reliable.pop_front() {
            out.writer_idle = false;
            return Some(match q {
                Queued::Message(b, c) => Outgoing::Reliable(b, c),
                Queued::Raw(b, c) => Outgoing::Raw(b, c),
            });
        }
        if out.snapshots.is_empty() {
            out.writer_idle = flushed && !self.is_closed();
            return None;
        }
        out.writer_idle = false;
        let (id, snap) = out.snapshots.pop()?;
        Some(Outgoing::Snapshot(id, snap))
    }
}

/// What the writer sends next; the charge is held until it is written.
enum Outgoing {
    Reliable(Bytes, Charge),
    Raw(Bytes, Charge),
    Snapshot(Arc<str>, PendingSnapshot),
}

/// Runs one connection to completion.
pub(crate) async fn run(
    server: Arc<ServerShared>,
    mut reader: Reader,
    writer: Writer,
) -> CloseReason {
    let config = &server.core.config;
    let account = Account::new(server.guards.pool.clone(), config.max_connection_bytes);
    let session = SessionShared::new(config.max_message_size, account.clone());
    reader.set_limits(account, config.message_timeout);
    session.outbound.lock().direct = Some(writer.direct());
    server
        .sessions
        .lock()
        .insert(session.id.clone(), Arc::downgrade(&session));
    let mut close_rx = session.close_tx.subscribe();
    let mut shutdown_rx = server.shutdown.subscribe();
    let writer_task = tokio::spawn(write_loop(session.clone(), writer));
    let in_flight = Arc::new(Semaphore::new(config.max_in_flight));
    // One timer, armed at the hello deadline, then (lazily, when it fires)
    // at the idle limit: no timer is touched per message.
    let timer = tokio::time::sleep(config.hello_timeout);
    tokio::pin!(timer);
    let mut timer_on = true;
    let mut last_message = tokio::time::Instant::now();
    // [transport: heartbeat hook] pings a silent peer; completes when it
    // has vanished.
    let vanished = reader.watch_peer(config.heartbeat_interval, config.heartbeat_timeout);
    tokio::pin!(vanished);

    let reason = loop {
        let frame = tokio::select! {
            biased;
            _ = close_rx.changed() => break close_rx.borrow().clone().unwrap_or(CloseReason::Shutdown),
            // `wait_for` sees a shutdown that began before this session did.
            _ = shutdown_rx.wait_for(|stop| *stop) => break CloseReason::Shutdown,
            frame = reader.recv() => frame,
            quiet = &mut vanished => break CloseReason::PeerVanished(quiet),
            _ = &mut timer, if timer_on => {
                if !session.ready.load(Ordering::Acquire) {
                    break CloseReason::HelloTimeout;
                }
                // After hello: a session that holds nothing and has sent
                // nothing for the idle limit is closed.
                let Some(idle) = config.idle_session_timeout else {
                    timer_on = false;
                    continue;
                };
                let now = tokio::time::Instant::now();
                // Keepalive pings (the Python client's, every 20 s) count
                // as activity: only silent sessions are idle.
                if let Some(at) = reader.last_control() {
                    last_message = last_message.max(at.into());
                }
                let idle_at = last_message + idle;
                if now >= idle_at {
                    if holds_nothing(&session, &in_flight, config.max_in_flight) {
                        break CloseReason::Idle;
                    }
                    timer.as_mut().reset(now + idle);
                } else {
                    timer.as_mut().reset(idle_at);
                }
                continue;
            }
        };
        let frame = match frame {
            Ok(f) => f,
            Err(TransportError::Closed) => break CloseReason::PeerClosed,
            Err(e) => break CloseReason::Transport(e),
        };
        last_message = tokio::time::Instant::now();
        let charge = reader.take_charge();
        // Decoding, waiting for a decode slot or for an in-flight slot may
        // take a while: meanwhile the reader answers control frames (pings,
        // a close) without reading the next message.
        let work = process_frame(&server, &session, &in_flight, frame, charge);
        tokio::pin!(work);
        let outcome = tokio::select! {
            biased;
            r = &mut work => r,
            _ = close_rx.changed() => Ok(()),
            e = reader.pump_control() => Err(match e {
                TransportError::Closed => CloseReason::PeerClosed,
                e => CloseReason::Transport(e),
            }),
            quiet = &mut vanished => Err(CloseReason::PeerVanished(quiet)),
        };
        if let Err(reason) = outcome {
            break reason;
        }
        if session.is_closed() {
            break close_rx.borrow().clone().unwrap_or(CloseReason::Shutdown);
        }
        // After hello, a message over the negotiated limit is refused from
        // its frame header.
        reader.set_max_message(session.max_message_size.load(Ordering::Relaxed));
    };
    session.close(reason.clone());
    drop(reader);
    let _ = writer_task.await;
    let touched: Vec<usize> = session.touched.lock().drain().collect();
    for index in touched {
        if let Some(domain) = server.domains.get(index) {
            domain.send(Job::Detach {
                session: session.clone(),
            });
        }
    }
    server.sessions.lock().remove(&session.id);
    tracing_log(&reason, &session.id);
    reason
}

/// Whether a session holds nothing a peer could be waiting on: no request
/// ever routed to a domain (so no control), no subscription, nothing in
/// flight.
fn holds_nothing(session: &SessionShared, in_flight: &Semaphore, max_in_flight: usize) -> bool {
    !session.routed.load(Ordering::Acquire)
        && session.subscriptions.lock().is_empty()
        && in_flight.available_permits() == max_in_flight
}

/// Decodes one message (a large one on the blocking pool), charges what it
/// holds and handles it.
async fn process_frame(
    server: &Arc<ServerShared>,
    session: &Arc<SessionShared>,
    in_flight: &Arc<Semaphore>,
    frame: Bytes,
    mut charge: Charge,
) -> Result<(), CloseReason> {
    if charge.bytes() < frame.len() {
        // In memory, nothing was charged when the message arrived.
        let more = session
            .account
            .charge(frame.len() - charge.bytes())
            .map_err(CloseReason::OverBudget)?;
        charge.absorb(more);
    }
    let codec = session.codec();
    let max_tree = server.core.config.max_decoded_bytes;
    let decoded = if frame.len() > BLOCKING_DECODE_BYTES {
        let permit = server
            .guards
            .decodes
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CloseReason::Shutdown)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            codec.decode_bounded(frame, max_tree)
        })
        .await
        .map_err(|e| CloseReason::InvalidEnvelope(format!("decoder failed: {e}")))?
    } else {
        codec.decode_bounded(frame, max_tree)
    };
    let (value, tree_bytes) = decoded.map_err(|e| CloseReason::InvalidEnvelope(e.to_string()))?;
    charge.absorb(
        session
            .account
            .charge(tree_bytes)
            .map_err(CloseReason::OverBudget)?,
    );
    handle_message(server, session, in_flight, value, charge).await;
    Ok(())
}

fn tracing_log(reason: &CloseReason, id: &str) {
    match reason {
        CloseReason::PeerClosed | CloseReason::Shutdown => {
            tracing::info!(session = %id, reason = %reason, "session closed")
        }
        _ => tracing::warn!(session = %id, reason = %reason, "session closed"),
    }
}

async fn handle_message(
    server: &Arc<ServerShared>,
    session: &Arc<SessionShared>,
    in_flight: &Arc<Semaphore>,
    value: Value,
    charge: Charge,
) {
    let request = match value {
        Value::Dict(d) => d,
        _ => {
            let e = err(
                ErrorCode::INVALID_REQUEST,
                "Expected a request with a string request_id",
            );
            return session.respond(&Dict::new(), Err(&e));
        }
    };
    if let Err(e) = check_request(session, &request) {
        return session.respond(&request, Err(&e));
    }
    let op_name = request
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match Op::parse(op_name) {
        Some(Op::Hello) => {
            let outcome = hello(server, session, &request);
            session.respond(&request, outcome.as_ref().cloned());
        }
        Some(Op::Discover) => {
            let mut receivers = Vec::with_capacity(server.domains.len());
            for (i, domain) in server.domains.iter().enumerate() {
                let (tx, rx) = tokio::sync::oneshot::channel();
                session.touched.lock().insert(i);
                domain.send(Job::Discover { reply: tx });
                receivers.push(rx);
            }
            let mut all = Vec::new();
            let mut failure = None;
            for rx in receivers {
                match rx.await {
                    Ok(Ok(mut descriptors)) => all.append(&mut descriptors),
                    Ok(Err(e)) => {
                        failure.get_or_insert(e);
                    }
                    Err(_) => {
                        failure.get_or_insert(err(
                            ErrorCode::EXECUTION_ERROR,
                            "domain worker stopped",
                        ));
                    }
                }
            }
            match failure {
                Some(e) => session.respond(&request, Err(&e)),
                None => session.respond(&request, Ok(Value::List(all))),
            }
        }
        _ => {
            let Some(resource_id) = request.get("resource_id").and_then(Value::as_str) else {
                let e = err(ErrorCode::INVALID_REQUEST, "resource_id must be a string");
                return session.respond(&request, Err(&e));
            };
            let Some(index) = server.route(resource_id) else {
                let e = err(ErrorCode::NOT_FOUND, server.unknown_resource(resource_id));
                return session.respond(&request, Err(&e));
            };
            // Bounded work per session: at most `max_in_flight` requests
            // queued at domains; the reader waits for a slot, unless the
            // session closes or the server shuts down meanwhile (a hung
            // domain may never free one).
            let permit = match in_flight.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    let mut shutdown = server.shutdown.subscribe();
                    let mut closed = session.close_tx.subscribe();
                    tokio::select! {
                        permit = in_flight.clone().acquire_owned() => match permit {
                            Ok(permit) => permit,
                            Err(_) => return,
                        },
                        _ = shutdown.wait_for(|stop| *stop) => return,
                        _ = closed.wait_for(Option::is_some) => return,
                    }
                }
            };
            session.touched.lock().insert(index);
            session.routed.store(true, Ordering::Release);
            server.domains[index].send(Job::Request {
                session: session.clone(),
                request,
                permit: InFlight {
                    _permit: permit,
                    _charge: charge,
                },
            });
        }
    }
}

/// Correlation, version and session checks shared by every request.
fn check_request(session: &SessionShared, request: &Dict) -> Result<(), ProtocolError> {
    if request.get("type").and_then(Value::as_str) != Some("request")
        || request.get("request_id").and_then(Value::as_str).is_none()
    {
        return Err(err(
            ErrorCode::INVALID_REQUEST,
            "Expected a request with a string request_id",
        ));
    }
    for key in ["request_id", "operation_id", "subscription_id"] {
        if matches!(request.get(key), Some(Value::Str(s)) if s.len() > MAX_ID_BYTES) {
            return Err(err(
                ErrorCode::INVALID_REQUEST,
                format!("{key} is longer than {MAX_ID_BYTES} bytes"),
            ));
        }
    }
    // As in the reference (`request.get("version") != 1` in Python): every
    // value equal to 1 is version 1, so `True` and `1.0` are too.
    let version_one = match request.get("version") {
        Some(Value::Bool(b)) => *b,
        Some(Value::Float(f)) => *f == PROTOCOL_VERSION as f64,
        Some(v) => v.as_i64() == Some(PROTOCOL_VERSION),
        None => false,
    };
    if !version_one {
        return Err(err(
            ErrorCode::VERSION_MISMATCH,
            "Only protocol version 1 is supported",
        ));
    }
    let Some(op) = request.get("op").and_then(Value::as_str) else {
        return Err(err(ErrorCode::INVALID_REQUEST, "op must be a string"));
    };
    if op != "hello"
        && (!session.ready.load(Ordering::Acquire)
            || request.get("session_id").and_then(Value::as_str) != Some(&*session.id))
    {
        return Err(err(
            ErrorCode::INVALID_SESSION,
            "Complete hello before making requests",
        ));
    }
    Ok(())
}

fn hello(
    server: &ServerShared,
    session: &SessionShared,
    request: &Dict,
) -> Result<Value, ProtocolError> {
    if session.ready.load(Ordering::Acquire) {
        return Err(err(
            ErrorCode::INVALID_SESSION,
            "hello has already completed",
        ));
    }
    let server_max = server.core.config.max_message_size;
    let limit = match request.get("max_message_size") {
        None => server_max as u64,
        Some(v @ (Value::Int(_) | Value::UInt(_))) => v.as_u64().unwrap_or(0),
        // Beyond u64: the server's limit is the smaller.
        Some(Value::BigInt(b)) if !b.is_negative() => u64::MAX,
        Some(_) => return Err(err(ErrorCode::INVALID_REQUEST, "Invalid max_message_size")),
    };
    if limit < crate::codec::MIN_MAX_MESSAGE_SIZE as u64 {
        return Err(err(ErrorCode::INVALID_REQUEST, "Invalid max_message_size"));
    }
    let negotiated = limit.min(server_max as u64) as usize;
    session
        .max_message_size
        .store(negotiated, Ordering::Relaxed);
    session.ready.store(true, Ordering::Release);
    tracing::info!(session = %session.id, max_message_size = negotiated, "session opened");
    let mut result = Dict::with_capacity(5);
    result.insert("session_id", &*session.id);
    result.insert("max_message_size", negotiated);
    result.insert("server", SERVER_NAME);
    result.insert("server_version", env!("CARGO_PKG_VERSION"));
    result.insert(
        "protocol_versions",
        Value::List(vec![Value::Int(PROTOCOL_VERSION)]),
    );
    Ok(Value::Dict(result))
}

async fn write_loop(session: Arc<SessionShared>, mut writer: Writer) {
    let mut closed = session.close_tx.subscribe();
    let mut unflushed = false;
    loop {
        if session.is_closed() {
            break;
        }
        let item = session.next_outbound(!unflushed);
        let (bytes, attachments, _charge) = match item {
            Some(Outgoing::Reliable(bytes, charge)) => (bytes, Bytes::new(), charge),
            Some(Outgoing::Raw(framed, _charge)) => {
                let written = tokio::select! {
                    r = writer.write_raw(&framed) => r,
                    _ = closed.changed() => break,
                };
                if let Err(e) = written {
                    session.close(CloseReason::Transport(e));
                    break;
                }
                continue;
            }
            Some(Outgoing::Snapshot(id, snap)) => match snap.encode(&session) {
                // Each observer encodes its own copy: it is charged while
                // it is written.
                Ok((head, tail)) => match session.account.charge(head.len() + tail.len()) {
                    Ok(charge) => (head, tail, charge),
                    Err(e) => {
                        session.close(CloseReason::OverBudget(e));
                        break;
                    }
                },
                Err(failure) => {
                    // Too large (or otherwise unencodable) for this peer: the
                    // subscription ends with a reliable subscription_error.
                    session.subscriptions.lock().remove(&id);
                    snap.domain.send(Job::DropSubscription {
                        session_id: session.id.clone(),
                        subscription_id: id,
                    });
                    session.send_reliable(failure);
                    continue;
                }
            },
            None if unflushed => {
                let flushed = tokio::select! {
                    r = writer.flush() => r,
                    _ = closed.changed() => break,
                };
                if let Err(e) = flushed {
                    session.close(CloseReason::Transport(e));
                    break;
                }
                unflushed = false;
                continue;
            }
            None => {
                tokio::select! {
                    _ = session.notify.notified() => {}
                    _ = closed.changed() => break,
                }
                continue;
            }
        };
        // A peer that stops reading blocks this write; closing the session
        // (queue overflow, shutdown) must still end it.
        let fed = tokio::select! {
            r = writer.feed_parts(bytes, attachments) => r,
            _ = closed.changed() => break,
        };
        match fed {
            Ok(()) => unflushed = true,
            Err(e) => {
                session.close(CloseReason::Transport(e));
                break;
            }
        }
    }
    let reason = session.close_tx.borrow().clone();
    let close_frame = match reason {
        Some(CloseReason::InvalidEnvelope(_)) => Some((1007, "invalid envelope")),
        Some(CloseReason::QueueOverflow) => Some((1008, "reliable queue overflow")),
        Some(CloseReason::OverBudget(BudgetError::Connection { .. })) => {
            Some((1008, "connection memory budget exceeded"))
        }
        Some(CloseReason::OverBudget(BudgetError::Server { .. })) => {
            Some((1013, "server memory budget exhausted, try again later"))
        }
        Some(CloseReason::HelloTimeout) => Some((1008, "no hello in time")),
        Some(CloseReason::Idle) => Some((1001, "idle session")),
        Some(CloseReason::Shutdown) => Some((1001, "server shutting down")),
        // The reader closed already with the error's own code
        // (`TransportError::close_code`); this answers a text message the
        // same way should the reader not have.
        Some(CloseReason::Transport(TransportError::TextMessage)) => {
            Some((1003, "binary messages only"))
        }
        _ => None,
    };
    // Bounded: a peer that does not read cannot hold the close forever.
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(2), writer.close(close_frame)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

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
