//! One execution domain: a world's whole tree (with every env wrapping it),
//! a standalone env, or a detached node tree. A dedicated OS thread owns the
//! hosted objects and runs every call, lifecycle step, snapshot capture and
//! disposal for them, in arrival order. Control state (owner, operation,
//! fault, revision, sequence, subscriptions) lives on that thread too, so
//! none of it needs a lock; its rules are [`Control`]'s.

use super::boundary::{Publish, Subscriptions};
use super::call;
use super::committed::{self, CommittedTx};
use super::control::{CallPolicy, Claim, Control, Refusal};
use super::hosted::{topology, Hosted, TopologyError};
use super::instance::{panic_message, Captures, Instance};
use super::jobs::{Factory, InstantiateError, Job, RecvError};
use super::outbound::SessionShared;
use super::shared::Core;
use crate::codec::{Dict, Value};
use crate::host::HostErrorKind;
use crate::protocol::{err, Command, ErrorCode, Method, ProtocolError, ResourceKind};
use bytes::Bytes;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod attributes;
mod responses;

/// What a request produced.
enum Reply {
    /// A result still to be encoded.
    Value(Value),
    /// A response already encoded (calls and completions, whose encoding is
    /// part of their outcome).
    Encoded(Vec<u8>),
}

/// The members of a `call`.
struct CallRequest<'a> {
    method: Option<&'a str>,
    operation_id: Option<&'a Value>,
    args: Option<&'a Value>,
    kwargs: Option<&'a Value>,
}

/// A request's outcome and the publication to run after its response.
type Outcome = Result<(Reply, Option<Publish>), ProtocolError>;

/// The state owned by a domain thread.
pub(crate) struct Domain {
    pub index: usize,
    pub root_id: String,
    server: Arc<Core>,
    factory: Option<Factory>,
    evictable: bool,
    instance: Instance,
    control: Control<Arc<SessionShared>>,
    subscriptions: Subscriptions,
    last_activity: Instant,
    recording: super::recording::Recording,
    /// Step latency histograms of env resources, by index.
    steps: std::collections::HashMap<usize, Arc<crate::metrics::StepHistogram>>,
    /// The descriptors as of the last committed boundary, for readers that
    /// must not wait on this thread.
    committed: CommittedTx,
}

impl Domain {
    pub(crate) fn new(
        index: usize,
        root_id: String,
        server: Arc<Core>,
        factory: Factory,
        evictable: bool,
        committed: CommittedTx,
    ) -> Domain {
        Domain {
            committed,
            index,
            control: Control::new(&root_id),
            root_id,
            server,
            factory: Some(factory),
            evictable,
            instance: Instance::default(),
            subscriptions: Subscriptions::default(),
            last_activity: Instant::now(),
            recording: Default::default(),
            steps: Default::default(),
        }
    }

    /// The thread's loop: jobs in order, idle eviction in between.
    pub(crate) fn run(mut self, jobs: super::jobs::JobRx) {
        // Every event of this thread carries the domain's root ID.
        let span = tracing::info_span!("domain", root = %self.root_id);
        let _domain = span.enter();
        super::jobs::enter_domain_thread(Arc::as_ptr(&self.server) as usize, self.index);
        let idle = self.server.config.idle_timeout.filter(|_| self.evictable);
        let tick = idle.map_or(Duration::from_secs(3600), |d| {
            (d / 2).clamp(Duration::from_millis(10), Duration::from_secs(5))
        });
        loop {
            match jobs.recv_timeout(tick) {
                Ok(Job::Shutdown) => break,
                Ok(job) => {
                    // Our own code must never take the thread down; hosted
                    // code is already isolated per call.
                    if catch_unwind(AssertUnwindSafe(|| self.handle(job))).is_err() {
                        self.fault("an internal error of the server".into());
                    }
                }
                Err(RecvError::Timeout) => {}
                Err(RecvError::Disconnected) => break,
            }
            if let Some(idle) = idle {
                self.maybe_evict(idle);
            }
        }
        self.dispose();
    }

    /// Publishes the descriptors of the last committed boundary (after an
    /// instantiation, a completed operation, an env mutation, a disposal).
    fn commit(&mut self) {
        self.commit_at(self.control.sequence());
    }

    /// Publishes the descriptors as of the boundary `sequence`.
    fn commit_at(&mut self, sequence: u64) {
        let revision = self.control.revision();
        committed::publish(&self.committed, &mut self.instance, revision, sequence);
    }

    /// Publishes the session controlling the domain.
    fn commit_owner(&self) {
        let owner = self.control.owner().map(|(s, _)| &s.id);
        committed::publish_owner(&self.committed, owner);
    }

    fn handle(&mut self, job: Job) {
        match job {
            Job::Request {
                session,
                request,
                permit,
            } => {
                self.last_activity = Instant::now();
                let sequence = self.control.sequence();
                // The request's ID, op, method and resource on each event
                // it causes (a disabled span costs a level check).
                let str_of = |k: &str| request.get(k).and_then(Value::as_str).unwrap_or("");
                let call = tracing::debug_span!(
                    "call",
                    session = %session.id,
                    request_id = str_of("request_id"),
                    op = str_of("op"),
                    method = str_of("method"),
                    resource = str_of("resource_id"),
                );
                let _call = call.enter();
                let (reply, publish) =
                    match catch_unwind(AssertUnwindSafe(|| self.execute(&session, &request))) {
                        Ok(Ok((reply, publish))) => (Ok(reply), publish),
                        Ok(Err(e)) => (Err(e), None),
                        Err(_) => {
                            self.fault(
                                "an internal error of the server while handling a request".into(),
                            );
                            let e = ProtocolError::uncertain(
                                ErrorCode::ExecutionError,
                                "internal server error",
                            );
                            (Err(e), None)
                        }
                    };
                // A boundary is committed before its response is sent: a
                // describe or discover by anyone who saw the response sees it.
                let boundary = publish.is_some();
                if boundary {
                    self.commit_at(self.control.next_sequence());
                }
                match reply {
                    Ok(Reply::Encoded(bytes)) => {
                        let op = request.get("op").and_then(Value::as_str);
                        let metrics = &self.server.metrics;
                        metrics.request(crate::metrics::op_index(op), None);
                        session.send_reliable(Bytes::from(bytes))
                    }
                    Ok(Reply::Value(v)) => session.respond(&request, Ok(v)),
                    Err(e) => session.respond(&request, Err(&e)),
                }
                drop(permit);
                if let Some(p) = publish {
                    self.publish(p);
                }
                if !boundary && self.control.sequence() != sequence {
                    self.commit();
                }
                self.commit_owner();
                self.last_activity = Instant::now();
            }
            Job::Discover { reply, .. } => {
                self.last_activity = Instant::now();
                let result = self
                    .instantiate()
                    .map(|_| self.descriptors())
                    .map_err(InstantiateError::into_protocol);
                let _ = reply.send(result);
                self.last_activity = Instant::now();
            }
            Job::Detach { session } => {
                if self.release(&session) {
                    self.last_activity = Instant::now();
                }
                if self.subscriptions.detach(&session) {
                    self.last_activity = Instant::now();
                }
                self.commit_owner();
            }
            Job::DropSubscription {
                session_id,
                subscription_id,
            } => {
                self.subscriptions.remove(&session_id, &subscription_id);
            }
            Job::Instantiate { reply } => {
                let result = self.instantiate().map(|_| {
                    self.instance
                        .resources
                        .iter()
                        .map(|r| r.id.clone())
                        .collect()
                });
                if result.is_ok() && !self.evictable {
                    self.factory = None;
                }
                let _ = reply.send(result);
            }
            Job::Shutdown => {}
        }
    }

    // ---- lifecycle of the hosted object ----

    /// Runs the factory if the domain is pending, validating the product
    /// before anything is committed.
    fn instantiate(&mut self) -> Result<(), InstantiateError> {
        if self.instance.hosted.is_some() {
            return Ok(());
        }
        let Some(factory) = self.factory.as_mut() else {
            return Err(InstantiateError::Disposed);
        };
        let mut product = match catch_unwind(AssertUnwindSafe(factory)) {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => return Err(InstantiateError::Factory(e.to_string())),
            Err(p) => return Err(InstantiateError::FactoryPanicked(panic_message(&p))),
        };
        let rejected = |product: &mut Hosted, e: InstantiateError| {
            let _ = catch_unwind(AssertUnwindSafe(|| product.close()));
            e
        };
        let topo = match catch_unwind(AssertUnwindSafe(|| topology(&self.root_id, &mut product))) {
            Ok(Ok(t)) => t,
            Ok(Err(TopologyError::Taken(id))) => {
                return Err(rejected(&mut product, InstantiateError::Taken(id)))
            }
            Ok(Err(TopologyError::Invalid(m))) => {
                return Err(rejected(&mut product, InstantiateError::InvalidTree(m)))
            }
            Err(p) => {
                return Err(rejected(
                    &mut product,
                    InstantiateError::TreePanicked(panic_message(&p)),
                ))
            }
        };
        let revived = !self.instance.resources.is_empty();
        if revived && topo != self.instance.resources {
            return Err(rejected(&mut product, InstantiateError::TopologyChanged));
        }
        {
            let mut registry = self.server.registry.write();
            if let Some(taken) = topo
                .iter()
                .find(|r| registry.get(&r.id).is_some_and(|&d| d != self.index))
            {
                let id = taken.id.clone();
                drop(registry);
                return Err(rejected(&mut product, InstantiateError::Taken(id)));
            }
            for r in &topo {
                registry.insert(r.id.clone(), self.index);
            }
        }
        self.instance.install(product, topo);
        self.control
            .instantiated(self.instance.scope(&self.root_id), revived);
        // Readers waiting for a pending domain take its descriptors now,
        // even if the request that built it goes on to hang.
        self.commit();
        if revived {
            self.server.metrics.revivals.fetch_add(1, Relaxed);
            tracing::info!(
                revision = self.control.revision(),
                "domain revived after idle eviction"
            );
        } else {
            tracing::debug!(
                resources = self.instance.resources.len(),
                "domain instantiated"
            );
        }
        Ok(())
    }

    fn maybe_evict(&mut self, idle: Duration) {
        if self.instance.hosted.is_some()
            && self.control.owner().is_none()
            && self.subscriptions.is_empty()
            && self.last_activity.elapsed() >= idle
        {
            tracing::info!(idle_secs = idle.as_secs_f64(), "evicting idle domain");
            self.server.metrics.evictions.fetch_add(1, Relaxed);
            self.dispose();
        }
    }

    /// Closes the hosted object on this thread (once) and forgets it; the
    /// topology stays for routing and for checking a revival.
    fn dispose(&mut self) {
        self.recording.close(&self.server);
        if let Some(mut hosted) = self.instance.take_hosted() {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| hosted.close())) {
                tracing::error!(
                    panic = %panic_message(&p),
                    "closing the hosted object panicked"
                );
            }
            drop(hosted);
        }
        self.commit();
    }

    /// Releases control if `session` holds it; whether it did.
    fn release(&mut self, session: &Arc<SessionShared>) -> bool {
        let faulted = self.control.is_faulted();
        if !self.control.release(session) {
            return false;
        }
        if !faulted {
            if let Some(cause) = self.control.fault_cause() {
                tracing::warn!(%cause, "domain faulted");
            }
        }
        tracing::debug!(session = %session.id, "control released");
        true
    }

    /// A session that controls the domain and has closed (its peer closed
    /// the connection, it vanished, or it was closed) gives up control now,
    /// as its cleanup's [`Job::Detach`] will: a peer that closed its
    /// connection and reconnects is never refused for its own past session
    /// while that cleanup is on its way.
    fn release_closed_owner(&mut self) {
        let closed = match self.control.owner() {
            Some((owner, _)) if owner.is_closed() => owner.clone(),
            _ => return,
        };
        if self.release(&closed) {
            self.last_activity = Instant::now();
            self.commit_owner();
        }
    }

    /// Faults the domain: stepping is refused until a successful reset or
    /// reload; `cause` says what happened, for the refusal and the log.
    fn fault(&mut self, cause: String) {
        self.server.metrics.faults.fetch_add(1, Relaxed);
        tracing::warn!(%cause, "domain faulted");
        self.control.fault(cause);
    }

    /// The wire error of a control refusal.
    fn refused(&self, refusal: Refusal) -> ProtocolError {
        self.control.error(&refusal)
    }

    /// Takes or confirms control (logging a change).
    fn claim(
        &mut self,
        session: &Arc<SessionShared>,
        claimed: Result<Claim, Refusal>,
    ) -> Result<(), ProtocolError> {
        match claimed {
            Ok(Claim::Acquired) => {
                let mode = self.control.owner().map_or("", |(_, m)| m.as_str());
                tracing::debug!(session = %session.id, mode, "control acquired");
                Ok(())
            }
            Ok(Claim::Held) => Ok(()),
            Err(refusal) => {
                if let Refusal::OtherOwner { .. } = refusal {
                    tracing::info!(session = %session.id, "control refused: another session controls the domain");
                }
                Err(self.refused(refusal))
            }
        }
    }

    // ---- requests ----

    fn execute(&mut self, session: &Arc<SessionShared>, request: &Dict) -> Outcome {
        if session.is_closed() {
            return Err(err(ErrorCode::InvalidSession, "Session has closed"));
        }
        self.release_closed_owner();
        let command = Command::from_request(request);
        let holds_nothing = matches!(
            command,
            Some(Command::Release | Command::Unsubscribe { .. })
        );
        if !holds_nothing {
            self.instantiate()
                .map_err(InstantiateError::into_protocol)?;
        }
        let resource_id = request
            .get("resource_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(&index) = self.instance.ids.get(resource_id) else {
            // As in the reference: releasing or unsubscribing at the root of
            // a factory never built holds nothing to undo and is null.
            if holds_nothing && self.instance.hosted.is_none() && resource_id == self.root_id {
                return Ok((Reply::Value(Value::Null), None));
            }
            let ids: Vec<&str> = self
                .instance
                .resources
                .iter()
                .map(|r| r.id.as_str())
                .collect();
            return Err(err(
                ErrorCode::NotFound,
                super::suggest::unknown_name("resource ID", resource_id, &ids),
            ));
        };
        let target = self.instance.target(index);
        let value = |v: Value| Ok((Reply::Value(v), None));
        let Some(command) = command else {
            return Err(err(
                ErrorCode::UnsupportedOperation,
                "Unknown protocol operation",
            ));
        };
        match command {
            Command::Describe => value(Value::List(self.descriptors())),
            Command::Subscribe {
                subscription_id,
                fields,
            } => value(self.subscriptions.subscribe(
                session,
                (subscription_id, fields),
                &self.instance,
                index,
                self.server.config.max_subscriptions_per_session,
            )?),
            Command::Unsubscribe { subscription_id } => {
                if let Some(id) = subscription_id {
                    self.subscriptions.unsubscribe(session, id);
                }
                value(Value::Null)
            }
            Command::Release => {
                self.release(session);
                value(Value::Null)
            }
            Command::Acquire { mode } => {
                let claimed = self.control.acquire(session, mode, target);
                self.claim(session, claimed)?;
                value(Value::Null)
            }
            Command::Begin { kind, operation_id } => {
                let claimed = self.control.claim_for(session, command.op(), target.kind);
                self.claim(session, claimed)?;
                self.control
                    .begin(kind, operation_id)
                    .map_err(|r| self.refused(r))?;
                self.instance.clear_latest();
                value(Value::Null)
            }
            Command::Abort { operation_id } => {
                let claimed = self.control.claim_for(session, command.op(), target.kind);
                self.claim(session, claimed)?;
                self.control
                    .abort(operation_id)
                    .map_err(|r| self.refused(r))?;
                if let Some(cause) = self.control.fault_cause() {
                    tracing::warn!(%cause, "domain faulted");
                }
                value(Value::Null)
            }
            Command::Complete { operation_id } => {
                let claimed = self.control.claim_for(session, command.op(), target.kind);
                self.claim(session, claimed)?;
                self.complete(session, request, operation_id)
            }
            Command::Call {
                method,
                operation_id,
                args,
                kwargs,
            } => {
                let claimed = self.control.claim_for(session, command.op(), target.kind);
                self.claim(session, claimed)?;
                let call = CallRequest {
                    method,
                    operation_id,
                    args,
                    kwargs,
                };
                self.call(session, request, index, call)
            }
            Command::Hello { .. } | Command::Discover => Err(err(
                ErrorCode::UnsupportedOperation,
                "Unknown protocol operation",
            )),
        }
    }

    fn complete(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
        operation_id: Option<&str>,
    ) -> Outcome {
        let done = self
            .control
            .complete(operation_id)
            .map_err(|r| self.refused(r))?;
        let kind = done.kind.as_str();
        if done.recovered_fault {
            tracing::info!(kind, "domain recovered");
        }
        let publish = Publish {
            operation_id: Value::from(done.id),
            kind,
            env_resource: None,
            captures: Captures::new(),
        };
        self.boundary_response(session, request, publish)
            .map_err(|message| ProtocolError::new(ErrorCode::SerializationError, message))
    }

    /// parse → policy → invoke → bookkeeping → encode.
    fn call(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
        index: usize,
        call: CallRequest<'_>,
    ) -> Outcome {
        if call
            .method
            .is_some_and(crate::protocol::attributes::AttributeRequest::is_extension)
        {
            return self.attribute(session, request, index, &call);
        }
        let method = self.exported_method(call.method, index)?;
        let target = self.instance.target(index);
        let policy = self
            .control
            .check_call(target, method, call.operation_id.and_then(Value::as_str))
            .map_err(|r| self.refused(r))?;
        let (args, kwargs) = call::arguments(call.args, call.kwargs)?;
        if policy.env_mutation {
            self.instance.clear_latest();
        }
        let pending = super::recording::capture(&self.server, target.kind, method, &args, &kwargs);
        let value = match self.invoke(index, policy, args, kwargs)? {
            Ok(value) => value,
            // It ran, but its result was found over the limit while the host
            // converted it: as a result that ran and then failed to encode.
            Err(message) => {
                self.control.call_succeeded(target, policy);
                let call = format!(
                    "encoding the result of {method}() on '{}'",
                    self.instance.resources[index].id
                );
                return Err(self.call_failed(
                    policy,
                    ErrorCode::SerializationError,
                    message,
                    &call,
                ));
            }
        };
        if let Some(p) = pending {
            self.recording
                .record(&self.server, &mut self.instance, index, p, &value);
        }
        // Bookkeeping.
        if self.control.call_succeeded(target, policy) {
            tracing::info!(resource = %self.instance.resources[index].id, %method, "domain recovered");
        }
        if policy.env_mutation || (target.kind == ResourceKind::World && method == Method::Step) {
            self.instance.freeze(index, method.as_str(), &value);
        }
        // Encode.
        let publish = Publish {
            operation_id: call.operation_id.cloned().unwrap_or_default(),
            kind: method.as_str(),
            env_resource: Some(index),
            captures: Captures::new(),
        };
        let boundary = policy.env_mutation.then_some(publish);
        match self.call_response(session, request, value, boundary) {
            Ok(done) => Ok(done),
            Err(message) => {
                let call = format!(
                    "encoding the result of {method}() on '{}'",
                    self.instance.resources[index].id
                );
                Err(self.call_failed(policy, ErrorCode::SerializationError, message, &call))
            }
        }
    }

    /// The request's method, if resource `index` exports it.
    fn exported_method(
        &mut self,
        name: Option<&str>,
        index: usize,
    ) -> Result<Method, ProtocolError> {
        let Some(name) = name else {
            return Err(err(ErrorCode::InvalidRequest, "method must be a string"));
        };
        let meta = &self.instance.resources[index];
        let hosted = self
            .instance
            .hosted
            .as_mut()
            .ok_or_else(|| err(ErrorCode::ExecutionError, "domain not instantiated"))?;
        if !hosted.exports(meta, name) {
            let exported: Vec<&str> = meta
                .kind
                .methods()
                .iter()
                .map(|(m, _)| *m)
                .filter(|m| hosted.exports(meta, m))
                .collect();
            return Err(err(
                ErrorCode::UnsupportedOperation,
                format!(
                    "Method is not exported: {} '{}' has no method '{name}'{}",
                    meta.kind.as_str(),
                    meta.id,
                    super::suggest::valid_list(name, &exported)
                ),
            ));
        }
        Ok(Method::parse(name)
            .filter(|m| meta.kind.has_method(*m))
            .unwrap_or(Method::Render))
    }

    /// Checks the action (when configured) and invokes the hosted method; a
    /// failure after it started faults the domain if it mutates. `Ok(Err)`:
    /// the method ran but its result is too large (the host's message), left
    /// to the caller to fail as an encoding failure.
    fn invoke(
        &mut self,
        index: usize,
        policy: CallPolicy,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> Result<Result<Value, String>, ProtocolError> {
        let method = policy.method.as_str();
        let meta = &self.instance.resources[index];
        let Some(hosted) = self.instance.hosted.as_mut() else {
            return Err(err(ErrorCode::ExecutionError, "domain not instantiated"));
        };
        let takes_action = (meta.kind == ResourceKind::Env && policy.method == Method::Step)
            || policy.method == Method::SetNextAction;
        if takes_action && self.server.config.validate_actions {
            call::check_action(hosted, meta, method, &args, &kwargs)?;
        }
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| hosted.call(meta, method, args, kwargs)));
        let took = started.elapsed();
        if meta.kind == ResourceKind::Env && policy.method == Method::Step {
            let metrics = &self.server.metrics;
            self.steps
                .entry(index)
                .or_insert_with(|| metrics.step_histogram(&meta.id))
                .observe(took);
        }
        if self
            .server
            .config
            .slow_call
            .is_some_and(|limit| took >= limit)
        {
            tracing::warn!(resource = %meta.id, method, secs = took.as_secs_f64(), "slow call");
        } else {
            tracing::trace!(resource = %meta.id, method, secs = took.as_secs_f64(), "call");
        }
        let (code, message) = match outcome {
            Ok(Ok(v)) => return Ok(Ok(v)),
            Ok(Err(e)) if e.kind() == HostErrorKind::ResultTooLarge => {
                return Ok(Err(e.message().to_string()));
            }
            // A refusal before anything changed: certain, no fault.
            Ok(Err(e)) if e.kind() == HostErrorKind::InvalidArgument => {
                tracing::debug!(resource = %meta.id, method, reason = e.message(), "call refused");
                return Err(err(ErrorCode::InvalidRequest, e.message().to_string()));
            }
            Ok(Err(e)) if e.kind() == HostErrorKind::Serialization => {
                (ErrorCode::SerializationError, e.message().to_string())
            }
            Ok(Err(e)) => (ErrorCode::ExecutionError, e.message().to_string()),
            Err(p) => (
                ErrorCode::ExecutionError,
                format!("{method} panicked: {}", panic_message(&p)),
            ),
        };
        let call = format!("{method}() on '{}'", meta.id);
        Err(self.call_failed(policy, code, message, &call))
    }

    /// A call failed after it started: a mutation faults the domain and its
    /// outcome is uncertain; reads fail without consequence.
    fn call_failed(
        &mut self,
        policy: CallPolicy,
        code: ErrorCode,
        message: String,
        call: &str,
    ) -> ProtocolError {
        let cause = || format!("{call} failed after it started ({message})");
        if self.control.call_failed(policy, cause) {
            self.server.metrics.faults.fetch_add(1, Relaxed);
            if let Some(cause) = self.control.fault_cause() {
                tracing::warn!(%cause, "domain faulted");
            }
            ProtocolError::uncertain(code, message)
        } else {
            ProtocolError::new(code, message)
        }
    }
}
