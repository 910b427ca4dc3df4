//! One connected peer: its outbound queues, its reader (decode, route) and
//! its writer (reliable messages first, then latest-wins snapshots).

use super::domain::Job;
use super::snapshot::PendingSnapshot;
use super::{ServerShared, SERVER_NAME};
use crate::codec::{Codec, Dict, Value};
use crate::protocol::{err, response_envelope, ErrorCode, Op, ProtocolError, PROTOCOL_VERSION};
use crate::transport::ws::Direct;
use crate::transport::{DirectWriter, Reader, TransportError, Writer};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{watch, Notify, Semaphore};

/// Reliable messages a session may have queued; one more disconnects it.
pub(crate) const RELIABLE_QUEUE_LIMIT: usize = 64;

/// Why a session ended, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CloseReason {
    PeerClosed,
    InvalidEnvelope(String),
    Transport(String),
    QueueOverflow,
    Shutdown,
}

#[derive(Default)]
struct Outbound {
    reliable: VecDeque<Queued>,
    /// Pending snapshots, one per subscription, in first-queued order.
    snapshots: Vec<(Arc<str>, PendingSnapshot)>,
    /// Whether the writer task has written and flushed everything it took
    /// and waits for more: only then may a reliable message skip the queue.
    writer_idle: bool,
    /// Sends at once from the thread that produced the message (taken away
    /// when the session closes, so the connection's last handle goes too).
    direct: Option<DirectWriter>,
}

/// A reliable queue entry.
enum Queued {
    /// An envelope to frame and send.
    Message(Bytes),
    /// The framed rest of a partly written direct send: it goes next.
    Raw(Bytes),
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
}

impl SessionShared {
    pub(crate) fn new(max_message_size: usize) -> Arc<SessionShared> {
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
                            out.reliable.push_back(Queued::Raw(rest));
                            drop(out);
                            self.notify.notify_one();
                            return;
                        }
                        Direct::NotNow => {}
                    }
                }
            }
            if out.reliable.len() >= RELIABLE_QUEUE_LIMIT {
                true
            } else {
                out.reliable.push_back(Queued::Message(message));
                false
            }
        };
        if overflow {
            self.close(CloseReason::QueueOverflow);
        } else {
            self.notify.notify_one();
        }
    }

    /// Replaces the pending snapshot of a subscription (latest wins).
    pub(crate) fn send_snapshot(&self, subscription_id: Arc<str>, snapshot: PendingSnapshot) {
        if self.is_closed() {
            return;
        }
        {
            let mut out = self.outbound.lock();
            match out
                .snapshots
                .iter_mut()
                .find(|(id, _)| *id == subscription_id)
            {
                Some((_, slot)) => *slot = snapshot,
                None => out.snapshots.push((subscription_id, snapshot)),
            }
        }
        self.notify.notify_one();
    }

    /// Drops a subscription's pending snapshot.
    pub(crate) fn drop_snapshot(&self, subscription_id: &str) {
        self.outbound
            .lock()
            .snapshots
            .retain(|(id, _)| &**id != subscription_id);
    }

    /// Encodes a response (or error) envelope for a request and queues it.
    /// A result that does not fit becomes a `serialization_error`; a session
    /// whose limit cannot even hold that is closed.
    pub(crate) fn respond(&self, request: &Dict, outcome: Result<Value, &ProtocolError>) {
        let envelope = |outcome: Result<Value, &ProtocolError>| {
            response_envelope(
                &self.id,
                request.get("request_id").cloned().unwrap_or_default(),
                request.get("resource_id").cloned().unwrap_or_default(),
                request.get("operation_id").cloned().unwrap_or_default(),
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
                Queued::Message(b) => Outgoing::Reliable(b),
                Queued::Raw(b) => Outgoing::Raw(b),
            });
        }
        if out.snapshots.is_empty() {
            out.writer_idle = flushed && !self.is_closed();
            return None;
        }
        out.writer_idle = false;
        let (id, snap) = out.snapshots.remove(0);
        Some(Outgoing::Snapshot(id, snap))
    }
}

enum Outgoing {
    Reliable(Bytes),
    Raw(Bytes),
    Snapshot(Arc<str>, PendingSnapshot),
}

/// Runs one connection to completion.
pub(crate) async fn run(
    server: Arc<ServerShared>,
    mut reader: Reader,
    writer: Writer,
) -> CloseReason {
    let session = SessionShared::new(server.core.config.max_message_size);
    session.outbound.lock().direct = Some(writer.direct());
    server
        .sessions
        .lock()
        .insert(session.id.clone(), Arc::downgrade(&session));
    let mut close_rx = session.close_tx.subscribe();
    let mut shutdown_rx = server.shutdown.subscribe();
    let writer_task = tokio::spawn(write_loop(session.clone(), writer));
    let in_flight = Arc::new(Semaphore::new(server.core.config.max_in_flight));

    let reason = loop {
        let frame = tokio::select! {
            biased;
            _ = close_rx.changed() => break close_rx.borrow().clone().unwrap_or(CloseReason::Shutdown),
            // `wait_for` sees a shutdown that began before this session did.
            _ = shutdown_rx.wait_for(|stop| *stop) => break CloseReason::Shutdown,
            frame = reader.recv() => frame,
        };
        let frame = match frame {
            Ok(f) => f,
            Err(TransportError::Closed) => break CloseReason::PeerClosed,
            Err(e) => break CloseReason::Transport(e.to_string()),
        };
        let value = match session.codec().decode(frame) {
            Ok(v) => v,
            Err(e) => break CloseReason::InvalidEnvelope(e.to_string()),
        };
        handle_message(&server, &session, &in_flight, value).await;
        if session.is_closed() {
            break close_rx.borrow().clone().unwrap_or(CloseReason::Shutdown);
        }
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

fn tracing_log(reason: &CloseReason, id: &str) {
    if let CloseReason::InvalidEnvelope(e) | CloseReason::Transport(e) = reason {
        if std::env::var_os("UNIENV_REMOTE_DEBUG").is_some() {
            eprintln!("unienv-remote: session {id} closed: {e}");
        }
    }
}

async fn handle_message(
    server: &Arc<ServerShared>,
    session: &Arc<SessionShared>,
    in_flight: &Arc<Semaphore>,
    value: Value,
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
                let e = err(ErrorCode::NOT_FOUND, "Unknown resource ID");
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
            server.domains[index].send(Job::Request {
                session: session.clone(),
                request,
                permit,
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
    if request.get("version").and_then(Value::as_i64) != Some(PROTOCOL_VERSION)
        || matches!(request.get("version"), Some(Value::Bool(_)))
    {
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
        let (bytes, attachments) = match item {
            Some(Outgoing::Reliable(bytes)) => (bytes, Bytes::new()),
            Some(Outgoing::Raw(framed)) => {
                let written = tokio::select! {
                    r = writer.write_raw(&framed) => r,
                    _ = closed.changed() => break,
                };
                if let Err(e) = written {
                    session.close(CloseReason::Transport(e.to_string()));
                    break;
                }
                continue;
            }
            Some(Outgoing::Snapshot(id, snap)) => match snap.encode(&session) {
                Ok(parts) => parts,
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
                if flushed.is_err() {
                    session.close(CloseReason::Transport("write failed".into()));
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
                session.close(CloseReason::Transport(e.to_string()));
                break;
            }
        }
    }
    let reason = session.close_tx.borrow().clone();
    let close_frame = match reason {
        Some(CloseReason::InvalidEnvelope(_)) => Some((1007, "invalid envelope")),
        Some(CloseReason::QueueOverflow) => Some((1008, "reliable queue overflow")),
        Some(CloseReason::Shutdown) => Some((1001, "server shutting down")),
        Some(CloseReason::Transport(ref t)) if t.contains("text message") => {
            Some((1003, "binary messages only"))
        }
        _ => None,
    };
    // Bounded: a peer that does not read cannot hold the close forever.
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(2), writer.close(close_frame)).await;
}
