//! One connected peer: its reader (decode, route) and its writer (reliable
//! messages first, then latest-wins snapshots, from its
//! [`SessionShared`] queues).

use super::jobs::Job;
use super::outbound::{CloseReason, InFlight, Outgoing, SessionShared, MAX_ID_BYTES};
use super::shared::{random_hex, ServerShared, SERVER_NAME};
use super::snapshot::Encoded;
use crate::budget::{Account, BudgetError, Charge};
use crate::codec::{Dict, Held, RequestTemplate, Value};
use crate::protocol::{err, Command, ErrorCode, ProtocolError, PROTOCOL_VERSION};
use crate::transport::{Reader, Writer};
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tracing::Instrument;

/// Messages larger than this are decoded on tokio's blocking threads (at
/// most `max_parallel_decodes` at once), not on the async workers.
const BLOCKING_DECODE_BYTES: usize = 64 * 1024;

/// Runs one connection to completion, inside a `session` span that puts
/// the session's ID on every event.
pub(crate) async fn run(server: Arc<ServerShared>, reader: Reader, writer: Writer) -> CloseReason {
    let id: Arc<str> = Arc::from(random_hex().as_str());
    let span = tracing::info_span!("session", id = %id);
    // Boxed: the task that accepted the connection then holds a pointer,
    // not a second copy of the session's state (docs/network.md, "Many
    // sessions").
    Box::pin(run_session(server, id, reader, writer))
        .instrument(span)
        .await
}

async fn run_session(
    server: Arc<ServerShared>,
    id: Arc<str>,
    mut reader: Reader,
    writer: Writer,
) -> CloseReason {
    let config = &server.core.config;
    let account = Account::new(server.guards.pool.clone(), config.max_connection_bytes);
    let session = SessionShared::new(
        id,
        config.max_message_size,
        account.clone(),
        server.core.metrics.clone(),
        config.reply_hold,
    );
    server
        .core
        .metrics
        .sessions_opened
        .fetch_add(1, Ordering::Relaxed);
    reader.set_limits(account, config.message_timeout);
    session.outbound.lock().direct = Some(writer.direct());
    server
        .sessions
        .lock()
        .insert(session.id.clone(), Arc::downgrade(&session));
    let mut close_rx = session.close_tx.subscribe();
    let mut shutdown_rx = server.shutdown.subscribe();
    let writer_task = tokio::spawn(
        write_loop(server.clone(), session.clone(), writer).instrument(tracing::Span::current()),
    );
    // From here on, however this task ends (returning, or aborted at
    // shutdown), the session is closed, its writer stopped, its domains
    // told and its entry removed.
    let mut cleanup = Cleanup {
        server: server.clone(),
        session: session.clone(),
        writer: Some(writer_task),
    };
    let in_flight = Arc::new(Semaphore::new(config.max_in_flight));
    // The last request in the layout our clients repeat (an env's steps),
    // decoded from its kept tree when the next one differs only in its IDs
    // and attachment bytes.
    // What it keeps is charged to the session's account, only while that
    // leaves half the account free: a cache must never be why a message is
    // refused.
    let account = session.account.clone();
    let mut requests = RequestTemplate::reserving(Box::new(move |n| {
        let held: Held = Box::new(account.charge_within_half(n).ok()?);
        Some(held)
    }));
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
            Err(e) => break CloseReason::from_transport(e),
        };
        last_message = tokio::time::Instant::now();
        let charge = reader.take_charge();
        // Decoding, waiting for a decode slot or for an in-flight slot may
        // take a while: meanwhile the reader answers control frames (pings,
        // a close) without reading the next message.
        let work = process_frame(&server, &session, &in_flight, &mut requests, frame, charge);
        tokio::pin!(work);
        let outcome = tokio::select! {
            biased;
            r = &mut work => r,
            _ = close_rx.changed() => Ok(()),
            _ = shutdown_rx.wait_for(|stop| *stop) => Err(CloseReason::Shutdown),
            e = reader.pump_control() => Err(CloseReason::from_transport(e)),
            quiet = &mut vanished => Err(CloseReason::PeerVanished(quiet)),
        };
        if let Err(reason) = outcome {
            break reason;
        }
        if session.is_closed() {
            // `close` marks the session closed before it publishes the
            // reason: wait for the reason rather than guess (a guess of
            // "shutting down" mislabelled in-memory sessions closed for
            // not reading their responses while the server ran on).
            let reason = close_rx
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|r| r.clone());
            break reason.unwrap_or(CloseReason::Shutdown);
        }
        // After hello, a message over the negotiated limit is refused from
        // its frame header.
        reader.set_max_message(session.max_message_size.load(Ordering::Relaxed));
    };
    // Over a byte budget: refused here, or by the reader as the frame came in.
    if matches!(
        reason,
        CloseReason::OverBudget(_)
            | CloseReason::Transport(
                crate::transport::TransportError::ConnectionBudget { .. }
                    | crate::transport::TransportError::ServerBudget { .. }
            )
    ) {
        server
            .core
            .metrics
            .budget_refusals
            .fetch_add(1, Ordering::Relaxed);
    }
    session.close(reason.clone());
    drop(reader);
    if let Some(writer) = cleanup.writer.as_mut() {
        let _ = writer.await;
    }
    cleanup.writer = None;
    drop(cleanup);
    tracing_log(&reason);
    reason
}

/// A session's cleanup, run when its task ends however it ends (a drop
/// guard: an aborted task runs it too).
struct Cleanup {
    server: Arc<ServerShared>,
    session: Arc<SessionShared>,
    /// The writer task, while it may still run (aborted if so).
    writer: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (server, session) = (&self.server, &self.session);
        session.close(CloseReason::Shutdown);
        if let Some(writer) = self.writer.take() {
            writer.abort();
        }
        let touched: Vec<usize> = session.touched.lock().drain().collect();
        for index in touched {
            if let Some(domain) = server.domains.get(index) {
                domain.send(Job::Detach {
                    session: session.clone(),
                });
            }
        }
        let mut sessions = server.sessions.lock();
        sessions.remove(&session.id);
        if sessions.is_empty() {
            server.sessions_gone.notify_waiters();
        }
    }
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
    requests: &mut RequestTemplate,
    frame: Bytes,
    mut charge: Charge,
) -> Result<(), CloseReason> {
    server
        .core
        .metrics
        .bytes_in
        .fetch_add(frame.len() as u64, Ordering::Relaxed);
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
        requests.decode(frame, codec.max_message_size(), max_tree)
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

fn tracing_log(reason: &CloseReason) {
    match reason {
        CloseReason::PeerClosed | CloseReason::Shutdown => {
            tracing::info!(reason = %reason, "session closed")
        }
        _ => tracing::warn!(reason = %reason, "session closed"),
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
                ErrorCode::InvalidRequest,
                "Expected a request with a string request_id",
            );
            return session.respond(&Dict::new(), Err(&e));
        }
    };
    if let Err(e) = check_request(session, &request) {
        return session.respond(&request, Err(&e));
    }
    let command = Command::from_request(&request);
    let is_describe = matches!(command, Some(Command::Describe));
    match command {
        Some(Command::Hello { max_message_size }) => {
            let outcome = hello(server, session, max_message_size);
            session.respond(&request, outcome.as_ref().cloned());
        }
        Some(Command::Discover) => {
            // Nothing is answered when the session closes or the server
            // shuts down meanwhile: the connection is going away.
            let ordered = in_flight.available_permits() < server.core.config.max_in_flight;
            let mut turn = read_turn(server, session).await;
            if turn.is_none() {
                return;
            }
            // The turn is held while the answer is encoded and queued,
            // unless the answer waited on domains.
            match discover(server, session, ordered, &mut turn).await {
                Some(Ok(all)) => session.respond(&request, Ok(Value::List(all))),
                Some(Err(e)) => session.respond(&request, Err(&e)),
                None => {}
            }
            if let Some(turn) = turn {
                end_read_turn(turn).await;
            }
        }
        _ => {
            let Some(resource_id) = request.get("resource_id").and_then(Value::as_str) else {
                let e = err(ErrorCode::InvalidRequest, "resource_id must be a string");
                return session.respond(&request, Err(&e));
            };
            let Some(index) = server.route(resource_id) else {
                let e = err(ErrorCode::NotFound, server.unknown_resource(resource_id));
                return session.respond(&request, Err(&e));
            };
            // A session that does not control the domain, and has no
            // request in flight that this one must follow, is answered from
            // the domain's last committed boundary, without waiting on its
            // thread.
            let idle = in_flight.available_permits() == server.core.config.max_in_flight;
            if is_describe && idle {
                let published = {
                    let committed = server.domains[index].committed.borrow();
                    committed.has(resource_id) && !committed.owned_by(&session.id)
                };
                if published {
                    let Some(turn) = read_turn(server, session).await else {
                        return;
                    };
                    let list = server.domains[index].committed.borrow().stamped();
                    if let Some(list) = list {
                        session.respond(&request, Ok(Value::List(list)));
                        return end_read_turn(turn).await;
                    }
                }
            }
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
            let cap = server.core.config.max_queued_per_domain;
            let job = Job::Request {
                session: session.clone(),
                request,
                permit: InFlight::new(permit, charge, session.clone()),
            };
            if let Err(job) = server.domains[index].send_request(job, &session.id, cap) {
                if let Job::Request { request, .. } = *job {
                    server
                        .core
                        .metrics
                        .queue_refusals
                        .fetch_add(1, Ordering::Relaxed);
                    let e = err(
                        ErrorCode::InvalidRequest,
                        format!(
                            "too many requests waiting at this domain: this session has \
                             {cap} waiting (max_queued_per_domain); wait for their answers"
                        ),
                    );
                    session.respond(&request, Err(&e));
                }
            }
        }
    }
}

/// `discover`: every domain's descriptors as of its last committed
/// boundary, without waiting on a busy domain. Pending domains (never
/// built, or evicted) are asked to instantiate, and their descriptors are
/// taken as soon as they are built (even if the domain then goes on to run
/// a call that hangs); only a factory that hangs is waited on. A domain
/// the session controls, or every domain when `ordered` (the session has
/// requests in flight), is asked on its thread instead, so that the answer
/// follows the session's own earlier requests. `None` when the session
/// closes or the server shuts down meanwhile.
async fn discover(
    server: &Arc<ServerShared>,
    session: &Arc<SessionShared>,
    ordered: bool,
    turn: &mut Option<tokio::sync::OwnedSemaphorePermit>,
) -> Option<Result<Vec<Value>, ProtocolError>> {
    let mut parts: Vec<Option<Vec<Value>>> = Vec::with_capacity(server.domains.len());
    let mut waits = Vec::new();
    for (i, domain) in server.domains.iter().enumerate() {
        let stamped = {
            let committed = domain.committed.borrow();
            let own = ordered || committed.owned_by(&session.id);
            if own {
                None
            } else {
                committed.stamped()
            }
        };
        if stamped.is_none() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            session.touched.lock().insert(i);
            domain.send(Job::Discover {
                session: session.id.clone(),
                reply: tx,
            });
            // Only a pending domain may be answered from what it commits
            // once built; one of this session's own is answered in order.
            let pending = domain.committed.borrow().descriptors.is_none();
            waits.push((i, rx, pending));
        }
        parts.push(stamped);
    }
    // What waits on domains does not hold up other sessions' reads.
    if !waits.is_empty() {
        *turn = None;
    }
    let mut shutdown = server.shutdown.subscribe();
    let mut closed = session.close_tx.subscribe();
    let mut failure = None;
    for (i, mut rx, pending) in waits {
        let mut committed = server.domains[i].committed.subscribe();
        let built = async {
            if !pending {
                return std::future::pending().await;
            }
            loop {
                if let Some(list) = committed.borrow_and_update().stamped() {
                    return Some(list);
                }
                if committed.changed().await.is_err() {
                    return None;
                }
            }
        };
        let outcome = tokio::select! {
            reply = &mut rx => reply.unwrap_or_else(|_| {
                Err(err(ErrorCode::ExecutionError, "domain worker stopped"))
            }),
            Some(list) = built => Ok(list),
            _ = shutdown.wait_for(|stop| *stop) => return None,
            _ = closed.wait_for(Option::is_some) => return None,
        };
        match outcome {
            Ok(list) => parts[i] = Some(list),
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    Some(match failure {
        Some(e) => Err(e),
        None => Ok(parts.into_iter().flatten().flatten().collect()),
    })
}

/// Waits for this session's turn to answer a read from published
/// descriptors (see [`ServerShared::reads`]); `None` when the session
/// closes or the server shuts down meanwhile.
async fn read_turn(
    server: &Arc<ServerShared>,
    session: &Arc<SessionShared>,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(turn) = server.reads.clone().try_acquire_owned() {
        return Some(turn);
    }
    let mut shutdown = server.shutdown.subscribe();
    let mut closed = session.close_tx.subscribe();
    tokio::select! {
        turn = server.reads.clone().acquire_owned() => turn.ok(),
        _ = shutdown.wait_for(|stop| *stop) => None,
        _ = closed.wait_for(Option::is_some) => None,
    }
}

/// Ends a read's turn: every other task ready now (a controller's reader,
/// the writers) runs before the turn passes on. Without it the next reader,
/// woken by the release, would run at once on this worker (tokio runs a
/// task woken by the running one next), and reads would follow one another
/// ahead of everything else.
async fn end_read_turn(turn: tokio::sync::OwnedSemaphorePermit) {
    tokio::task::yield_now().await;
    drop(turn);
}

/// Correlation, version and session checks shared by every request.
fn check_request(session: &SessionShared, request: &Dict) -> Result<(), ProtocolError> {
    if request.get("type").and_then(Value::as_str) != Some("request")
        || request.get("request_id").and_then(Value::as_str).is_none()
    {
        return Err(err(
            ErrorCode::InvalidRequest,
            "Expected a request with a string request_id",
        ));
    }
    for key in ["request_id", "operation_id", "subscription_id"] {
        if matches!(request.get(key), Some(Value::Str(s)) if s.len() > MAX_ID_BYTES) {
            return Err(err(
                ErrorCode::InvalidRequest,
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
            ErrorCode::VersionMismatch,
            "Only protocol version 1 is supported",
        ));
    }
    let Some(op) = request.get("op").and_then(Value::as_str) else {
        return Err(err(ErrorCode::InvalidRequest, "op must be a string"));
    };
    if op != "hello"
        && (!session.ready.load(Ordering::Acquire)
            || request.get("session_id").and_then(Value::as_str) != Some(&*session.id))
    {
        return Err(err(
            ErrorCode::InvalidSession,
            "Complete hello before making requests",
        ));
    }
    Ok(())
}

fn hello(
    server: &ServerShared,
    session: &SessionShared,
    max_message_size: Option<&Value>,
) -> Result<Value, ProtocolError> {
    if session.ready.load(Ordering::Acquire) {
        return Err(err(
            ErrorCode::InvalidSession,
            "hello has already completed",
        ));
    }
    let server_max = server.core.config.max_message_size;
    let limit = match max_message_size {
        None => server_max as u64,
        Some(v @ (Value::Int(_) | Value::UInt(_))) => v.as_u64().unwrap_or(0),
        // Beyond u64: the server's limit is the smaller.
        Some(Value::BigInt(b)) if !b.is_negative() => u64::MAX,
        Some(_) => return Err(err(ErrorCode::InvalidRequest, "Invalid max_message_size")),
    };
    if limit < crate::codec::MIN_MAX_MESSAGE_SIZE as u64 {
        return Err(err(ErrorCode::InvalidRequest, "Invalid max_message_size"));
    }
    let negotiated = limit.min(server_max as u64) as usize;
    session
        .max_message_size
        .store(negotiated, Ordering::Relaxed);
    session.ready.store(true, Ordering::Release);
    tracing::info!(max_message_size = negotiated, "session opened");
    let mut result = Dict::with_capacity(6);
    result.insert("session_id", &*session.id);
    result.insert("max_message_size", negotiated);
    result.insert("server", SERVER_NAME);
    result.insert("server_version", env!("CARGO_PKG_VERSION"));
    result.insert(
        "protocol_versions",
        Value::List(vec![Value::Int(PROTOCOL_VERSION)]),
    );
    // Extensions of our own (SPEC.md, "Extension: sub-env attributes").
    result.insert(
        "extensions",
        Value::List(vec![Value::from(crate::protocol::attributes::EXTENSION)]),
    );
    Ok(Value::Dict(result))
}

/// Sleeps until `due` (forever without one).
async fn sleep_until(due: Option<std::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

async fn write_loop(server: Arc<ServerShared>, session: Arc<SessionShared>, mut writer: Writer) {
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
            Some(Outgoing::Snapshot(id, snap)) => {
                match snap.encode(&session.codec(), &session.id) {
                    // Each observer encodes its own copy: it is charged while
                    // it is written.
                    Ok(Encoded::Snapshot(head, tail)) => {
                        match session.account.charge(head.len() + tail.len()) {
                            Ok(charge) => {
                                session
                                    .metrics
                                    .bytes_out
                                    .fetch_add((head.len() + tail.len()) as u64, Ordering::Relaxed);
                                (head, tail, charge)
                            }
                            Err(e) => {
                                session.close(CloseReason::OverBudget(e));
                                break;
                            }
                        }
                    }
                    Ok(Encoded::Error(failure)) => {
                        // Too large (or otherwise unencodable) for this peer: the
                        // subscription ends with a reliable subscription_error.
                        session.subscriptions.lock().remove(&id);
                        if let Some(domain) = server.domains.get(snap.domain) {
                            domain.send(Job::DropSubscription {
                                session_id: session.id.clone(),
                                subscription_id: id,
                            });
                        }
                        session.send_reliable(failure);
                        continue;
                    }
                    Err(e) => {
                        session.close(CloseReason::InvalidEnvelope(e));
                        break;
                    }
                }
            }
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
                // Responses held for the session's other requests are
                // written when the last of those is done, or here when the
                // hold's time is up.
                let due = session.held_deadline();
                tokio::select! {
                    _ = session.notify.notified() => {}
                    _ = closed.changed() => break,
                    _ = sleep_until(due), if due.is_some() => session.release_held(),
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
        Some(CloseReason::TextMessage) => Some((1003, "binary messages only")),
        _ => None,
    };
    // Bounded: a peer that does not read cannot hold the close forever.
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(2), writer.close(close_frame)).await;
}
