//! The connection core: the reader and writer tasks, request correlation,
//! the descriptor store and the boundary snapshot cache.
//!
//! Everything a request needs is behind one short-lived lock ([`State`]),
//! never held across an `await`. A request is encoded on the caller's task,
//! handed to the writer task through an unbounded queue (bounded in practice
//! by the callers awaiting their replies) and answered by the reader task,
//! which does nothing else than decode, check and route messages: through a
//! oneshot channel to the task awaiting it, or to a [`ReplySink`] (see
//! [`pending`](super::pending)).

use super::config::ClientConfig;
use super::descriptor::Descriptor;
use super::error::{ClientError, ClientResult, CloseReason, ProtocolViolation};
use super::ids::{lower_hex, IdSource};
use super::known::KnownDescriptors;
use super::pending::{watch_deadlines, Deadlines, Reply, ReplySink, Waiter};
use super::state::State;
use super::template::{plain_request, CallTemplates};
use crate::codec::{Codec, Dict, KeptReplies, Value};
use crate::protocol::{Op, ProtocolError, PROTOCOL_VERSION};
use crate::transport::{Reader, TransportError, Writer};
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;

/// What the writer task sends.
pub(crate) enum Outgoing {
    Frame(Bytes),
    Close,
}

/// State shared by the client handles and the two tasks.
pub(crate) struct Shared {
    pub config: ClientConfig,
    /// The request timeout in force (from `config.timeout`; settable after
    /// connecting, read by every request).
    timeout: Mutex<Option<Duration>>,
    limit: AtomicUsize,
    session: OnceLock<Value>,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    closed: AtomicBool,
    shutdown: watch::Sender<bool>,
    pub state: Mutex<State>,
    next_request: AtomicU64,
    requests_sent: AtomicU64,
    /// Frames handed to the writer task so far (under the `state` lock, so
    /// that the writer's queue holds them in the order of this count).
    queued: AtomicU64,
    /// Frames the writer task has written to the socket (flushed) so far:
    /// the first `written` of the `queued` ones.
    written: AtomicU64,
    /// Woken when `written` grows and when the connection closes.
    flushed: Notify,
    /// Tells the deadline watch of an earlier deadline.
    rearm: Arc<Notify>,
    ids: IdSource,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Descriptors recognised in replies by their text (the reader's).
    known: Mutex<KnownDescriptors>,
    /// Call requests' kept encodings (see [`CallTemplates`]).
    templates: Mutex<CallTemplates>,
    /// Replies' values kept by their text (the reader's; see
    /// [`KeptReplies`]).
    replies: Mutex<KeptReplies>,
}

impl Shared {
    /// Starts the reader and writer tasks on the current runtime.
    pub fn start(reader: Reader, writer: Writer, config: ClientConfig) -> Arc<Shared> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (shutdown, shutdown_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            limit: AtomicUsize::new(config.max_message_size),
            timeout: Mutex::new(config.timeout),
            config,
            session: OnceLock::new(),
            outgoing: tx,
            closed: AtomicBool::new(false),
            shutdown,
            state: Mutex::new(State::default()),
            next_request: AtomicU64::new(1),
            requests_sent: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            written: AtomicU64::new(0),
            flushed: Notify::new(),
            rearm: Arc::new(Notify::new()),
            ids: IdSource::new(),
            tasks: Mutex::new(Vec::new()),
            known: Mutex::new(KnownDescriptors::default()),
            templates: Mutex::new(CallTemplates::default()),
            replies: Mutex::new(KeptReplies::default()),
        });
        // [transport: heartbeat hook] pings a silent server; a server that
        // stays silent past the timeout is a lost connection.
        let vanished = reader.watch_peer(
            shared.config.heartbeat_interval,
            shared.config.heartbeat_timeout,
        );
        let heartbeat_task = tokio::spawn(heartbeat(
            Arc::downgrade(&shared),
            vanished,
            shutdown_rx.clone(),
        ));
        let deadline_task = tokio::spawn(watch_deadlines(
            Arc::downgrade(&shared),
            shared.rearm.clone(),
            shutdown_rx.clone(),
        ));
        let reader_task = tokio::spawn(read_loop(shared.clone(), reader, shutdown_rx));
        let writer_task = tokio::spawn(write_loop(shared.clone(), writer, rx));
        shared
            .tasks
            .lock()
            .extend([reader_task, writer_task, heartbeat_task, deadline_task]);
        shared
    }

    /// Completes the hello exchange: the session ID and the message limit.
    pub fn set_session(&self, session_id: &str, limit: usize) {
        let _ = self.session.set(Value::from(session_id));
        self.limit.fetch_min(limit, Ordering::Relaxed);
    }

    /// The session ID, once hello has completed.
    pub fn session_id(&self) -> Option<&str> {
        self.session.get().and_then(Value::as_str)
    }

    /// The message size limit in force.
    pub fn max_message_size(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// The codec under the limit in force (the configuration and `hello`
    /// both refuse a limit below the minimum, so this fails only if that
    /// invariant is broken, and then loudly rather than with a default).
    fn codec(&self) -> ClientResult<Codec> {
        Ok(Codec::new(self.max_message_size())?)
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The request timeout in force.
    pub fn timeout(&self) -> Option<Duration> {
        *self.timeout.lock()
    }

    /// Sets the request timeout of requests sent from now on.
    pub fn set_timeout(&self, timeout: Option<Duration>) {
        *self.timeout.lock() = timeout;
    }

    pub fn requests_sent(&self) -> u64 {
        self.requests_sent.load(Ordering::Relaxed)
    }

    /// Frames handed to the writer task so far: a frame queued before this
    /// is read has a number at most this.
    pub fn frames_queued(&self) -> u64 {
        self.queued.load(Ordering::Acquire)
    }

    /// Frames queued and not yet written (tests).
    #[cfg(test)]
    pub fn frames_unwritten(&self) -> u64 {
        self.frames_queued() - self.written.load(Ordering::Acquire)
    }

    /// Waits until the writer task has written (flushed to the socket) the
    /// first `frames` frames queued, or the connection closed (its frames
    /// are then never written, and their requests fail). Sleeps until the
    /// writer says so: no polling loop.
    pub async fn frames_written(&self, frames: u64) {
        let done = || self.written.load(Ordering::Acquire) >= frames || self.is_closed();
        // Usually so at once (this thread ran the writer): no waiter needed.
        if done() {
            return;
        }
        loop {
            let flushed = self.flushed.notified();
            tokio::pin!(flushed);
            // Registered before the check: a flush after it wakes us.
            flushed.as_mut().enable();
            if done() {
                return;
            }
            flushed.await;
        }
    }

    /// Hands a frame to the writer task, counted in `queued`; the caller
    /// holds the `state` lock (`_st`), so frames are counted in the order
    /// they are queued. `Err` when the writer has stopped.
    fn enqueue(&self, _st: &mut State, frame: Bytes) -> Result<(), ()> {
        self.queued.fetch_add(1, Ordering::AcqRel);
        if self.outgoing.send(Outgoing::Frame(frame)).is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(());
        }
        Ok(())
    }

    /// A fresh 32-hex-digit ID (operations, subscriptions, env calls).
    pub fn fresh_id(&self) -> String {
        self.ids.next()
    }

    /// Closes the connection (idempotent): pending requests fail with
    /// `reason`, subscriptions end with it, the cache is cleared, and both
    /// tasks stop.
    pub fn close(&self, reason: ClientError) {
        let (pending, subscriptions) = {
            let mut st = self.state.lock();
            if self.closed.swap(true, Ordering::AcqRel) {
                return;
            }
            st.failure = Some(reason.clone());
            st.snapshots.clear();
            st.versions.clear();
            st.operations.clear();
            let pending = st.pending.drain();
            let subscriptions: Vec<_> = st.subscriptions.drain().map(|(_, s)| s).collect();
            (pending, subscriptions)
        };
        for waiter in pending {
            waiter.send(Err(reason.clone()));
        }
        for s in subscriptions {
            s.finish(Some(reason.clone()));
        }
        let _ = self.outgoing.send(Outgoing::Close);
        self.shutdown.send_replace(true);
        // Those waiting for frames to be written: they never will be.
        self.flushed.notify_waiters();
    }

    /// Waits for both tasks to stop (at most about a second for the writer
    /// to say goodbye).
    pub async fn join(&self) {
        let tasks: Vec<_> = std::mem::take(&mut *self.tasks.lock());
        for task in tasks {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(1), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }

    fn encode_request(
        &self,
        request_id: u64,
        op: Op,
        resource_id: Option<&str>,
        params: &[(&str, &Value)],
    ) -> ClientResult<Bytes> {
        if let (Op::Call, Some(session), Some(resource_id)) = (op, self.session.get(), resource_id)
        {
            let mut digits = [0u8; 16];
            let id = lower_hex(request_id, &mut digits);
            let codec = self.codec()?;
            let mut templates = self.templates.lock();
            if let Some(frame) = templates.encode(&codec, session, id, resource_id, params) {
                return Ok(frame);
            }
        }
        self.encode_plain(request_id, op, resource_id, params)
    }

    /// [`encode_request`](Self::encode_request) without templates.
    fn encode_plain(
        &self,
        request_id: u64,
        op: Op,
        resource_id: Option<&str>,
        params: &[(&str, &Value)],
    ) -> ClientResult<Bytes> {
        let session = self.session.get().cloned().unwrap_or(Value::Null);
        let frame = plain_request(&self.codec()?, session, request_id, op, resource_id, params)?;
        Ok(Bytes::from(frame))
    }

    /// Encodes a request and hands it to the writer with its waiter
    /// registered; returns its ID. Mutations drop the domain's cached
    /// fields first. A sink's request is timed by the connection's deadline
    /// watch (a task's by its own timer).
    fn submit(
        &self,
        op: Op,
        resource_id: Option<&str>,
        params: &[(&str, &Value)],
        mutation: bool,
        waiter: Waiter,
    ) -> ClientResult<u64> {
        if self.is_closed() {
            return Err(self.state.lock().closed_error());
        }
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let frame = self.encode_request(id, op, resource_id, params)?;
        let timed = matches!(waiter, Waiter::Sink(..))
            .then(|| self.timeout())
            .flatten();
        let rearm = {
            let mut st = self.state.lock();
            if self.is_closed() {
                return Err(st.closed_error());
            }
            if mutation && resource_id.is_some() {
                st.drop_snapshots(resource_id);
            }
            st.pending.insert(id, waiter);
            if self.enqueue(&mut st, frame).is_err() {
                // Nothing was sent: certainly not executed.
                st.pending.remove(id);
                return Err(ClientError::Closed(CloseReason::WriterStopped));
            }
            timed.is_some_and(|limit| st.pending.time(id, limit))
        };
        if rearm {
            self.rearm.notify_one();
        }
        self.requests_sent.fetch_add(1, Ordering::Relaxed);
        Ok(id)
    }

    /// Sends one request and waits for its reply. Mutations drop the
    /// domain's cached fields first. A timeout or a connection failure closes
    /// the connection; for a mutation the error is then
    /// [`ClientError::Uncertain`]. A server error drops the domain's cached
    /// fields and is returned as [`ClientError::Remote`].
    pub async fn request(
        self: &Arc<Self>,
        op: Op,
        resource_id: Option<&str>,
        params: &[(&str, &Value)],
        mutation: bool,
    ) -> ClientResult<Value> {
        let (tx, rx) = oneshot::channel();
        let id = self.submit(op, resource_id, params, mutation, Waiter::Task(tx))?;
        let mut guard = InFlight {
            shared: self,
            id,
            mutation,
            armed: true,
        };
        let timeout = *self.timeout.lock();
        let received = match timeout {
            Some(limit) => match tokio::time::timeout(limit, rx).await {
                Ok(r) => r,
                Err(_) => Ok(Err(ClientError::Timeout(limit))),
            },
            None => rx.await,
        };
        let outcome = received.unwrap_or_else(|_| Err(self.state.lock().closed_error()));
        guard.armed = false;
        drop(guard);
        self.settle(outcome, resource_id, mutation)
    }

    /// Sends one request whose reply goes to `sink` (with `tag`) when it
    /// arrives, from the reader task; returns its ID. The sink makes of it
    /// what [`request`](Self::request) returns with
    /// [`settle`](Self::settle). Unanswered at the timeout in force, it
    /// fails as [`request`](Self::request)'s would.
    pub(crate) fn send_to(
        &self,
        op: Op,
        resource_id: Option<&str>,
        params: &[(&str, &Value)],
        mutation: bool,
        sink: Arc<dyn ReplySink>,
        tag: usize,
    ) -> ClientResult<u64> {
        self.submit(op, resource_id, params, mutation, Waiter::Sink(sink, tag))
    }

    /// What a request's reply comes to (see [`request`](Self::request)): a
    /// failure closes the connection, and is uncertain for a mutation; a
    /// server error drops the domain's cached fields.
    pub(crate) fn settle(
        &self,
        outcome: Reply,
        resource_id: Option<&str>,
        mutation: bool,
    ) -> ClientResult<Value> {
        let mut message = match outcome {
            Ok(m) => m,
            Err(failure) => {
                // Others (pending requests, subscriptions) learn that the
                // connection closed, and why.
                self.close(match &failure {
                    ClientError::Timeout(limit) => {
                        ClientError::Closed(CloseReason::RequestTimedOut { after: *limit })
                    }
                    other => other.clone(),
                });
                return Err(if mutation {
                    ClientError::Uncertain(Box::new(failure))
                } else {
                    failure
                });
            }
        };
        if message.get("type").and_then(Value::as_str) == Some("error") {
            self.state.lock().drop_snapshots(resource_id);
            let error = message
                .get("error")
                .and_then(ProtocolError::from_value)
                .ok_or(ClientError::Protocol(ProtocolViolation::MalformedError))?;
            return Err(ClientError::Remote(error));
        }
        Ok(message.remove("result").unwrap_or_default())
    }

    /// Abandons request `id` (sent with [`send_to`](Self::send_to)) if it
    /// is still unanswered: its reply will be ignored, and for a mutation
    /// the connection closes (its outcome is unknown, as when a
    /// [`request`](Self::request)'s future is dropped).
    pub(crate) fn abandon(&self, id: u64, mutation: bool) {
        let removed = self.state.lock().pending.remove(id).is_some();
        if removed && mutation {
            self.close(ClientError::Closed(CloseReason::MutationCancelled));
        }
    }

    /// Sends a request whose reply is not awaited (an abort or unsubscribe
    /// from a destructor); the reply is ignored when it arrives. Messages
    /// keep their order with every other request.
    pub fn send_detached(
        &self,
        op: Op,
        resource_id: &str,
        params: &[(&str, &Value)],
        mutation: bool,
    ) {
        if self.is_closed() {
            return;
        }
        let id = self.next_request.fetch_add(1, Ordering::Relaxed);
        let Ok(frame) = self.encode_request(id, op, Some(resource_id), params) else {
            return;
        };
        let mut st = self.state.lock();
        if mutation {
            st.drop_snapshots(Some(resource_id));
        }
        self.requests_sent.fetch_add(1, Ordering::Relaxed);
        let _ = self.enqueue(&mut st, frame);
    }

    /// Refreshes descriptors from a response. Descriptors older than a
    /// version already seen for their domain are ignored; boundary snapshots
    /// they carry fill the cache when `with_snapshots` (controller
    /// responses), never otherwise (observer events).
    pub fn apply_descriptors(
        &self,
        descriptors: Value,
        with_snapshots: bool,
    ) -> ClientResult<Vec<Arc<Descriptor>>> {
        let items = match descriptors {
            Value::List(items) | Value::Tuple(items) => items,
            other => {
                return Err(ClientError::Protocol(ProtocolViolation::WrongType {
                    what: "descriptors",
                    expected: "a list",
                    found: other.type_name(),
                }))
            }
        };
        let mut st = self.state.lock();
        let keep_snapshots = with_snapshots && !self.is_closed();
        let mut accepted = Vec::with_capacity(items.len());
        for item in items {
            let previous = item
                .get("id")
                .and_then(Value::as_str)
                .and_then(|id| st.descriptors.get(id).cloned());
            let (descriptor, snapshot) =
                Descriptor::parse(item, previous.as_deref()).map_err(ClientError::malformed)?;
            let (descriptor, fresh) = st.accept(descriptor, snapshot.filter(|_| keep_snapshots));
            if fresh {
                accepted.push(descriptor);
            }
        }
        Ok(accepted)
    }

    /// Parses one descriptor of an observer event and refreshes the store
    /// with it (never the cache); returns the parsed descriptor.
    pub fn apply_observed(&self, descriptor: Value) -> ClientResult<Arc<Descriptor>> {
        let mut st = self.state.lock();
        let previous = descriptor
            .get("id")
            .and_then(Value::as_str)
            .and_then(|id| st.descriptors.get(id).cloned());
        let (descriptor, _) =
            Descriptor::parse(descriptor, previous.as_deref()).map_err(ClientError::malformed)?;
        Ok(st.accept(descriptor, None).0)
    }

    /// Routes one received envelope; an error closes the connection.
    fn dispatch(&self, frame: Bytes) -> ClientResult<()> {
        // A call reply carrying an unchanged descriptor is decoded without
        // it, and the remembered one applied (`known`); others teach it.
        let (frame, recognised) = self.known.lock().strip(frame);
        // A response in the servers' layout: its envelope read without
        // building it (the same checks and routing as below).
        // Its value, when the reply has a kept one's text, from the kept
        // tree (the same value).
        let reply = self
            .session_id()
            .and_then(|session| {
                self.replies
                    .lock()
                    .decode(&frame, self.max_message_size())
                    .filter(|r| r.session_id == session)
            })
            .map(|r| (u64::from_str_radix(r.request_id, 16).ok(), r.result));
        if let Some((id, result)) = reply {
            match recognised {
                Some(d) => drop(self.state.lock().accept(d, None)),
                None => self
                    .known
                    .lock()
                    .learn(&frame, result.get("descriptors"), |id| {
                        self.state.lock().descriptors.get(id).cloned()
                    }),
            }
            let waiter = id.and_then(|id| self.state.lock().pending.remove(id));
            if let Some(waiter) = waiter {
                // What `settle` reads of a response: its `result`.
                waiter.send(Ok(Dict::new().with("result", result)));
            }
            return Ok(());
        }
        let decoded = recognised.is_none().then(|| frame.clone());
        let Value::Dict(message) = self.codec()?.decode(frame)? else {
            return Err(ClientError::Protocol(ProtocolViolation::NotADict));
        };
        let version_ok =
            matches!(message.get("version"), Some(Value::Int(v)) if *v == PROTOCOL_VERSION);
        if !version_ok {
            return Err(ClientError::Protocol(ProtocolViolation::Version));
        }
        if let Some(session) = self.session_id() {
            if message.get("session_id").and_then(Value::as_str) != Some(session) {
                return Err(ClientError::Protocol(ProtocolViolation::WrongSession));
            }
        }
        match message.get("type").and_then(Value::as_str) {
            Some(kind @ ("response" | "error")) => {
                if kind == "response" {
                    match (recognised, decoded) {
                        (Some(d), _) => drop(self.state.lock().accept(d, None)),
                        (None, Some(frame)) => self.known.lock().learn(
                            &frame,
                            message.get("result").and_then(|r| r.get("descriptors")),
                            |id| self.state.lock().descriptors.get(id).cloned(),
                        ),
                        (None, None) => {}
                    }
                }
                let id = message
                    .get("request_id")
                    .and_then(Value::as_str)
                    .and_then(|s| u64::from_str_radix(s, 16).ok());
                let waiter = id.and_then(|id| self.state.lock().pending.remove(id));
                if let Some(waiter) = waiter {
                    waiter.send(Ok(message));
                }
                Ok(())
            }
            Some(kind @ ("snapshot" | "subscription_error")) => {
                let is_error = kind == "subscription_error";
                self.on_event(message, is_error)
            }
            _ => Err(ClientError::Protocol(ProtocolViolation::UnknownMessageType)),
        }
    }

    fn on_event(&self, message: Dict, is_error: bool) -> ClientResult<()> {
        let resource_id =
            message
                .get("resource_id")
                .and_then(Value::as_str)
                .ok_or(ClientError::Protocol(
                    ProtocolViolation::EventWithoutResource,
                ))?;
        let subscription = {
            let mut st = self.state.lock();
            if is_error {
                st.drop_snapshots(Some(resource_id));
            } else if st.descriptors.contains_key(resource_id) {
                let number = |key: &str| {
                    message.get(key).and_then(Value::as_u64).ok_or_else(|| {
                        ClientError::Protocol(ProtocolViolation::SnapshotField {
                            field: key.to_string(),
                        })
                    })
                };
                let version = (number("descriptor_revision")?, number("sequence")?);
                let domain = st.domain_of(resource_id).to_string();
                st.observe_boundary(&domain, version);
            }
            message
                .get("subscription_id")
                .and_then(Value::as_str)
                .and_then(|id| st.subscriptions.get(id).cloned())
        };
        if let Some(s) = subscription {
            s.push(message, is_error);
        }
        Ok(())
    }

    /// The cached value of a field of a resource, when the cache may serve
    /// it: outside operations on its domain, from the latest boundary.
    pub fn cached_field(&self, resource_id: &str, field: &str) -> ClientResult<Option<Value>> {
        let st = self.state.lock();
        if self.is_closed() {
            return Err(st.closed_error());
        }
        if st.operations.contains_key(st.domain_of(resource_id)) {
            return Ok(None);
        }
        Ok(st
            .snapshots
            .get(resource_id)
            .and_then(|s| s.data.get(field))
            .cloned())
    }
}

impl Deadlines for Shared {
    fn expire_deadlines(&self, now: tokio::time::Instant) -> Option<Option<tokio::time::Instant>> {
        let expired = self.state.lock().pending.expire(now);
        match expired {
            Ok(next) => Some(next),
            Err((waiter, timeout)) => {
                // What a timed request's own timer does: its caller learns
                // of the timeout, everyone else that the connection closed
                // because of it.
                waiter.send(Err(ClientError::Timeout(timeout)));
                self.close(ClientError::Closed(CloseReason::RequestTimedOut {
                    after: timeout,
                }));
                None
            }
        }
    }
}

/// Removes a request's waiter if its future is dropped before the reply;
/// a mutation whose reply is abandoned closes the connection (its outcome
/// is unknown and a later response could not be attributed).
struct InFlight<'a> {
    shared: &'a Arc<Shared>,
    id: u64,
    mutation: bool,
    armed: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.abandon(self.id, self.mutation);
        }
    }
}

async fn read_loop(shared: Arc<Shared>, mut reader: Reader, mut shutdown: watch::Receiver<bool>) {
    let failure = loop {
        let frame = tokio::select! {
            biased;
            _ = shutdown.wait_for(|stop| *stop) => return,
            frame = reader.recv() => frame,
        };
        match frame {
            Ok(frame) => {
                if let Some(capture) = &shared.config.capture {
                    capture.record(&frame);
                }
                if let Err(e) = shared.dispatch(frame) {
                    break e;
                }
            }
            Err(TransportError::Closed) => break ClientError::Closed(CloseReason::ByServer),
            Err(source) => break ClientError::Closed(CloseReason::Transport { source }),
        }
    };
    shared.close(failure);
}

/// Closes the connection as lost when `vanished` completes (the server
/// stayed silent past the heartbeat timeout).
async fn heartbeat(
    shared: std::sync::Weak<Shared>,
    vanished: impl std::future::Future<Output = Duration>,
    mut shutdown: watch::Receiver<bool>,
) {
    let quiet = tokio::select! {
        _ = shutdown.wait_for(|stop| *stop) => return,
        quiet = vanished => quiet,
    };
    if let Some(shared) = shared.upgrade() {
        shared.close(ClientError::Closed(CloseReason::ServerSilent { quiet }));
    }
}

async fn write_loop(
    shared: Arc<Shared>,
    mut writer: Writer,
    mut queue: mpsc::UnboundedReceiver<Outgoing>,
) {
    'outer: while let Some(item) = queue.recv().await {
        let mut next = Some(item);
        let mut fed = 0;
        // Feed everything already queued, then flush once.
        while let Some(item) = next.take() {
            match item {
                Outgoing::Close => break 'outer,
                Outgoing::Frame(frame) => {
                    if let Err(source) = writer.feed(frame).await {
                        shared.close(ClientError::Closed(CloseReason::Transport { source }));
                        break 'outer;
                    }
                    fed += 1;
                }
            }
            next = queue.try_recv().ok();
        }
        if let Err(source) = writer.flush().await {
            shared.close(ClientError::Closed(CloseReason::Transport { source }));
            break;
        }
        shared.written.fetch_add(fed, Ordering::AcqRel);
        shared.flushed.notify_waiters();
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), writer.close(None)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict;

    fn descriptor(id: &str, domain: &str, revision: u64, sequence: u64, snapshot: bool) -> Value {
        let mut d = dict! {
            "id" => id, "kind" => "node", "world_id" => (), "node_id" => (),
            "children" => Dict::new(), "revision" => revision, "sequence" => sequence,
            "domain_id" => domain,
        };
        if snapshot {
            d.insert(
                "snapshot",
                dict! {
                    "sequence" => sequence, "revision" => revision,
                    "fields" => Value::list(["reward"]),
                    "data" => dict! { "reward" => sequence as f64 },
                },
            );
        }
        Value::Dict(d)
    }

    fn accept(st: &mut State, v: Value) -> bool {
        let previous = v
            .get("id")
            .and_then(Value::as_str)
            .and_then(|id| st.descriptors.get(id).cloned());
        let (d, s) = Descriptor::parse(v, previous.as_deref()).unwrap();
        st.accept(d, s).1
    }

    #[test]
    fn boundaries_replace_and_never_go_back() {
        let mut st = State::default();
        assert!(accept(&mut st, descriptor("a", "d", 1, 1, true)));
        assert!(accept(&mut st, descriptor("a/x", "d", 1, 1, true)));
        assert!(accept(&mut st, descriptor("b", "other", 0, 4, true)));
        assert_eq!(st.snapshots.len(), 3);
        // A newer boundary replaces the domain's fields: `a/x` has none now.
        assert!(accept(&mut st, descriptor("a", "d", 1, 2, true)));
        assert!(!st.snapshots.contains_key("a/x"));
        assert_eq!(st.snapshots["a"].sequence, 2);
        assert!(st.snapshots.contains_key("b"));
        // An older version is refused and restores nothing.
        assert!(!accept(&mut st, descriptor("a/x", "d", 1, 1, true)));
        assert!(!st.snapshots.contains_key("a/x"));
        assert_eq!(st.descriptors["a/x"].sequence(), 1);
        // A newer revision with the same sequence invalidates too.
        assert!(accept(&mut st, descriptor("a/x", "d", 2, 2, false)));
        assert!(!st.snapshots.contains_key("a"));
        // Dropping by resource drops the whole domain only.
        assert!(accept(&mut st, descriptor("a", "d", 2, 3, true)));
        st.drop_snapshots(Some("a/x"));
        assert!(!st.snapshots.contains_key("a") && st.snapshots.contains_key("b"));
        st.drop_snapshots(None);
        assert!(st.snapshots.is_empty());
    }
}
