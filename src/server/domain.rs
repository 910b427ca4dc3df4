//! One execution domain: a world's whole tree (with every env wrapping it),
//! a standalone env, or a detached node tree. A dedicated OS thread owns the
//! hosted objects and runs every call, lifecycle step, snapshot capture and
//! disposal for them, in arrival order. Control state (owner, operation,
//! fault, revision, sequence, subscriptions) lives on that thread too, so
//! none of it needs a lock.

use super::hosted::{topology, Attrs, Hosted, ResourceMeta, TAKEN_PREFIX};
use super::session::SessionShared;
use super::snapshot::{self, Boundary, PendingSnapshot, SharedTail};
use super::Core;
use crate::codec::{Codec, Dict, NdArray, Value};
use crate::host::{Field, HostError, HostErrorKind, HostResult};
use crate::protocol::{err, ErrorCode, Mode, Op, OperationKind, ProtocolError, ResourceKind};
use bytes::Bytes;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;

/// A factory that builds a domain's hosted object on the domain's thread.
pub(crate) type Factory = Box<dyn FnMut() -> HostResult<Hosted> + Send>;

/// Work for a domain thread.
pub(crate) enum Job {
    /// A resource request from a session; the response goes straight to
    /// the session's reliable queue.
    Request {
        session: Arc<SessionShared>,
        request: Dict,
        permit: super::session::InFlight,
    },
    /// Descriptors of every resource (instantiating a pending domain).
    Discover {
        reply: oneshot::Sender<Result<Vec<Value>, ProtocolError>>,
    },
    /// A session closed: release its control and drop its subscriptions.
    Detach { session: Arc<SessionShared> },
    /// A subscription ended because its snapshot could not be delivered.
    DropSubscription {
        session_id: Arc<str>,
        subscription_id: Arc<str>,
    },
    /// Instantiate now (eager registration); replies with the resource IDs.
    Instantiate {
        reply: mpsc::Sender<Result<Vec<String>, ProtocolError>>,
    },
    /// Dispose of the hosted objects and stop the thread.
    Shutdown,
}

/// A cloneable handle for sending jobs to a domain thread.
#[derive(Clone)]
pub(crate) struct DomainSender(pub mpsc::Sender<Job>);

impl DomainSender {
    pub(crate) fn send(&self, job: Job) {
        // A stopped domain (server shutting down) drops the job, which drops
        // any reply sender and so answers the waiter.
        let _ = self.0.send(job);
    }
}

struct Owner {
    session: Arc<SessionShared>,
    mode: Mode,
}

struct Operation {
    id: String,
    kind: OperationKind,
    recovered: bool,
}

struct Subscription {
    session: Arc<SessionShared>,
    id: Arc<str>,
    resource: usize,
    fields: Vec<Field>,
}

/// Captured (resource, field) values of one boundary, shared by the
/// controller's snapshot and every observer.
type Captures = HashMap<(usize, Field), Result<Option<Value>, String>>;

/// What a request produced.
enum Reply {
    /// A result still to be encoded.
    Value(Value),
    /// A response already encoded (calls and completions, whose encoding is
    /// part of their outcome).
    Encoded(Vec<u8>),
}

/// A publication to run after the response has been queued.
struct Publish {
    operation_id: Value,
    kind: &'static str,
    env_resource: Option<usize>,
    captures: Captures,
}

/// The state owned by a domain thread.
pub(crate) struct Domain {
    pub index: usize,
    pub root_id: String,
    server: Arc<Core>,
    sender: DomainSender,
    factory: Option<Factory>,
    evictable: bool,
    hosted: Option<Hosted>,
    resources: Vec<ResourceMeta>,
    ids: HashMap<String, usize>,
    owner: Option<Owner>,
    operation: Option<Operation>,
    faulted: bool,
    /// What faulted the domain (for the `faulted` refusal and the log).
    fault_cause: Option<String>,
    revision: u64,
    sequence: u64,
    subscriptions: Vec<Subscription>,
    /// Per resource: the frozen fields of the last env mutation, or a world's dt.
    latest: Vec<Dict>,
    /// Per resource: the attributes its cached descriptor was built from.
    desc_attrs: Vec<Option<Attrs>>,
    /// Per resource: the cached descriptor (`Null` when it must be rebuilt).
    desc_values: Vec<Value>,
    last_activity: Instant,
}

impl Domain {
    pub(crate) fn new(
        index: usize,
        root_id: String,
        server: Arc<Core>,
        sender: DomainSender,
        factory: Factory,
        evictable: bool,
    ) -> Domain {
        Domain {
            index,
            root_id,
            server,
            sender,
            factory: Some(factory),
            evictable,
            hosted: None,
            resources: Vec::new(),
            ids: HashMap::new(),
            owner: None,
            operation: None,
            faulted: false,
            fault_cause: None,
            revision: 0,
            sequence: 0,
            subscriptions: Vec::new(),
            latest: Vec::new(),
            desc_attrs: Vec::new(),
            desc_values: Vec::new(),
            last_activity: Instant::now(),
        }
    }

    /// The thread's loop: jobs in order, idle eviction in between.
    pub(crate) fn run(mut self, jobs: mpsc::Receiver<Job>) {
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
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if let Some(idle) = idle {
                self.maybe_evict(idle);
            }
        }
        self.dispose();
    }

    fn handle(&mut self, job: Job) {
        match job {
            Job::Request {
                session,
                request,
                permit,
            } => {
                self.last_activity = Instant::now();
                let (reply, publish) =
                    match catch_unwind(AssertUnwindSafe(|| self.execute(&session, &request))) {
                        Ok(outcome) => outcome,
                        Err(_) => {
                            self.fault(
                                "an internal error of the server while handling a request".into(),
                            );
                            let e = ProtocolError::uncertain(
                                ErrorCode::EXECUTION_ERROR,
                                "internal server error",
                            );
                            (Err(e), None)
                        }
                    };
                match reply {
                    Ok(Reply::Encoded(bytes)) => session.send_reliable(Bytes::from(bytes)),
                    Ok(Reply::Value(v)) => session.respond(&request, Ok(v)),
                    Err(e) => session.respond(&request, Err(&e)),
                }
                drop(permit);
                if let Some(p) = publish {
                    self.publish(p);
                }
                self.last_activity = Instant::now();
            }
            Job::Discover { reply } => {
                self.last_activity = Instant::now();
                let result = self.instantiate().map(|_| self.descriptors(None));
                let _ = reply.send(result);
                self.last_activity = Instant::now();
            }
            Job::Detach { session } => {
                if self
                    .owner
                    .as_ref()
                    .is_some_and(|o| Arc::ptr_eq(&o.session, &session))
                {
                    self.release();
                    self.last_activity = Instant::now();
                }
                let before = self.subscriptions.len();
                self.subscriptions
                    .retain(|s| !Arc::ptr_eq(&s.session, &session));
                if self.subscriptions.len() != before {
                    self.last_activity = Instant::now();
                }
            }
            Job::DropSubscription {
                session_id,
                subscription_id,
            } => {
                self.subscriptions
                    .retain(|s| !(s.session.id == session_id && s.id == subscription_id));
            }
            Job::Instantiate { reply } => {
                let result = self
                    .instantiate()
                    .map(|_| self.resources.iter().map(|r| r.id.clone()).collect());
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
    fn instantiate(&mut self) -> Result<(), ProtocolError> {
        if self.hosted.is_some() {
            return Ok(());
        }
        let Some(factory) = self.factory.as_mut() else {
            return Err(err(
                ErrorCode::EXECUTION_ERROR,
                "the domain has been disposed",
            ));
        };
        let mut product = match catch_unwind(AssertUnwindSafe(factory)) {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                return Err(err(
                    ErrorCode::EXECUTION_ERROR,
                    format!("factory failed: {e}"),
                ))
            }
            Err(p) => {
                return Err(err(
                    ErrorCode::EXECUTION_ERROR,
                    format!("factory panicked: {}", panic_message(&p)),
                ))
            }
        };
        let rejected = |product: &mut Hosted, message: String| {
            let _ = catch_unwind(AssertUnwindSafe(|| product.close()));
            err(ErrorCode::EXECUTION_ERROR, message)
        };
        let topo = match catch_unwind(AssertUnwindSafe(|| topology(&self.root_id, &mut product))) {
            Ok(Ok(t)) => t,
            Ok(Err(m)) if m.starts_with(TAKEN_PREFIX) => return Err(rejected(&mut product, m)),
            Ok(Err(m)) => {
                return Err(rejected(
                    &mut product,
                    format!("invalid resource tree: {m}"),
                ))
            }
            Err(p) => {
                return Err(rejected(
                    &mut product,
                    format!("resource tree inspection panicked: {}", panic_message(&p)),
                ))
            }
        };
        let revived = !self.resources.is_empty();
        if revived && topo != self.resources {
            return Err(rejected(
                &mut product,
                "Factory resource topology must remain unchanged on revival".into(),
            ));
        }
        {
            let mut registry = self.server.registry.write();
            if let Some(taken) = topo
                .iter()
                .find(|r| registry.get(&r.id).is_some_and(|&d| d != self.index))
            {
                let id = taken.id.clone();
                drop(registry);
                return Err(rejected(
                    &mut product,
                    format!("Resource ID already registered: {id}"),
                ));
            }
            for r in &topo {
                registry.insert(r.id.clone(), self.index);
            }
        }
        self.ids = topo
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        self.latest = vec![Dict::new(); topo.len()];
        self.desc_attrs = Vec::new();
        self.desc_values = Vec::new();
        self.resources = topo;
        self.hosted = Some(product);
        self.faulted = false;
        self.fault_cause = None;
        if revived {
            self.revision += 1;
            tracing::info!(domain = %self.root_id, revision = self.revision, "domain revived after idle eviction");
        } else {
            tracing::debug!(domain = %self.root_id, resources = self.resources.len(), "domain instantiated");
        }
        Ok(())
    }

    fn maybe_evict(&mut self, idle: Duration) {
        if self.hosted.is_some()
            && self.owner.is_none()
            && self.subscriptions.is_empty()
            && self.last_activity.elapsed() >= idle
        {
            tracing::info!(domain = %self.root_id, idle_secs = idle.as_secs_f64(), "evicting idle domain");
            self.dispose();
        }
    }

    /// Closes the hosted object on this thread (once) and forgets it; the
    /// topology stays for routing and for checking a revival.
    fn dispose(&mut self) {
        if let Some(mut hosted) = self.hosted.take() {
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| hosted.close())) {
                tracing::error!(
                    domain = %self.root_id,
                    panic = %panic_message(&p),
                    "closing the hosted object panicked"
                );
            }
            drop(hosted);
        }
        for l in &mut self.latest {
            *l = Dict::new();
        }
    }

    fn release(&mut self) {
        if let Some(op) = &self.operation {
            let cause = format!(
                "its controller released control (or disconnected) during the unfinished {} operation '{}'",
                op.kind.as_str(),
                op.id
            );
            self.fault(cause);
        }
        self.operation = None;
        if let Some(owner) = self.owner.take() {
            tracing::debug!(domain = %self.root_id, session = %owner.session.id, mode = owner.mode.as_str(), "control released");
        }
    }

    /// Faults the domain: stepping is refused until a successful reset or
    /// reload; `cause` says what happened, for the refusal and the log.
    fn fault(&mut self, cause: String) {
        tracing::warn!(domain = %self.root_id, %cause, "domain faulted");
        self.faulted = true;
        self.fault_cause = Some(cause);
        self.operation = None;
    }

    /// The `faulted` refusal: names the resource, what faulted it and how to
    /// recover (for a plain env, without speaking of a world).
    fn faulted_error(&self) -> ProtocolError {
        let cause = self
            .fault_cause
            .as_deref()
            .unwrap_or("an interrupted operation");
        let Some(root) = self.resources.first() else {
            return err(
                ErrorCode::FAULTED,
                format!("Faulted by {cause}: reset or reload to recover"),
            );
        };
        let envs: Vec<String> = self
            .resources
            .iter()
            .filter(|r| r.kind == ResourceKind::Env)
            .map(|r| format!("'{}'", r.id))
            .collect();
        let message = match (root.kind, root.world_id.as_deref()) {
            (ResourceKind::Env, None) => format!(
                "Env '{}' is faulted: {cause}, so its state is unknown. Call reset() (or reload()) on '{}' to recover",
                root.id, root.id
            ),
            (ResourceKind::Node, None) => format!(
                "Detached node tree '{}' is faulted: {cause}, so its state is unknown. To recover, begin a reset (or reload) operation, reset (or reload) the root node '{}', and complete the operation",
                root.id, root.id
            ),
            (_, world) => {
                let world = world.unwrap_or(&root.id);
                let via_env = if envs.is_empty() {
                    String::new()
                } else {
                    format!("call reset() on env {} (env mode), or ", envs.join(" or "))
                };
                format!(
                    "World '{world}' is faulted: {cause}, so its state is unknown. To recover, {via_env}begin a reset (or reload) operation, reset (or reload) the world '{world}', and complete the operation"
                )
            }
        };
        err(ErrorCode::FAULTED, message)
    }

    fn claim(
        &mut self,
        session: &Arc<SessionShared>,
        mode: Option<Mode>,
    ) -> Result<(), ProtocolError> {
        let Some(mode) = mode else {
            return Err(err(ErrorCode::INVALID_REQUEST, "Unknown execution mode"));
        };
        if let Some(owner) = &self.owner {
            if !Arc::ptr_eq(&owner.session, session) {
                tracing::debug!(domain = %self.root_id, session = %session.id, owner = %owner.session.id, "control refused: another session controls the domain");
                return Err(err(
                    ErrorCode::OWNERSHIP_CONFLICT,
                    format!(
                        "{} is controlled by another session ({} mode): wait until it releases control or disconnects, or watch it as an observer (subscribe)",
                        self.scope_name(),
                        owner.mode.as_str()
                    ),
                ));
            }
            if owner.mode != mode {
                return Err(err(
                    ErrorCode::OWNERSHIP_CONFLICT,
                    format!(
                        "this session controls {} in {} mode; release it before using {} mode",
                        self.scope_name(),
                        owner.mode.as_str(),
                        mode.as_str()
                    ),
                ));
            }
        } else {
            tracing::debug!(domain = %self.root_id, session = %session.id, mode = mode.as_str(), "control acquired");
        }
        self.owner = Some(Owner {
            session: session.clone(),
            mode,
        });
        Ok(())
    }

    /// How the domain is named in messages: `env 'cartpole'`, `world
    /// 'pointmass/world'`, `detached node tree 'gripper'`.
    fn scope_name(&self) -> String {
        match self.resources.first() {
            Some(r) if r.world_id.is_none() && r.kind == ResourceKind::Env => {
                format!("env '{}'", r.id)
            }
            Some(r) if r.world_id.is_none() && r.kind == ResourceKind::Node => {
                format!("detached node tree '{}'", r.id)
            }
            Some(r) => format!("world '{}'", r.world_id.as_deref().unwrap_or(&r.id)),
            None => format!("'{}'", self.root_id),
        }
    }

    fn check_operation(&self, request: &Dict) -> Result<&Operation, ProtocolError> {
        match &self.operation {
            Some(op)
                if request.get("operation_id").and_then(Value::as_str) == Some(op.id.as_str()) =>
            {
                Ok(op)
            }
            _ => Err(err(
                ErrorCode::INVALID_OPERATION,
                "An explicit matching component operation is required",
            )),
        }
    }

    // ---- requests ----

    fn execute(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
    ) -> (Result<Reply, ProtocolError>, Option<Publish>) {
        match self.execute_inner(session, request) {
            Ok((reply, publish)) => (Ok(reply), publish),
            Err(e) => (Err(e), None),
        }
    }

    fn execute_inner(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
    ) -> Result<(Reply, Option<Publish>), ProtocolError> {
        if session.is_closed() {
            return Err(err(ErrorCode::INVALID_SESSION, "Session has closed"));
        }
        let op = Op::parse(
            request
                .get("op")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        if !matches!(op, Some(Op::Release | Op::Unsubscribe)) {
            self.instantiate()?;
        }
        let resource_id = request
            .get("resource_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(&index) = self.ids.get(resource_id) else {
            // As in the reference: releasing or unsubscribing at the root of
            // a factory never built holds nothing to undo and is null.
            if matches!(op, Some(Op::Release | Op::Unsubscribe))
                && self.hosted.is_none()
                && resource_id == self.root_id
            {
                return Ok((Reply::Value(Value::Null), None));
            }
            let ids: Vec<&str> = self.resources.iter().map(|r| r.id.as_str()).collect();
            return Err(err(
                ErrorCode::NOT_FOUND,
                super::unknown_name("resource ID", resource_id, &ids),
            ));
        };
        let kind = self.resources[index].kind;
        let value = |v: Value| Ok((Reply::Value(v), None));
        match op {
            Some(Op::Describe) => value(Value::List(self.descriptors(None))),
            Some(Op::Subscribe) => value(self.subscribe(session, request, index)?),
            Some(Op::Unsubscribe) => {
                if let Some(id) = request.get("subscription_id").and_then(Value::as_str) {
                    let before = self.subscriptions.len();
                    self.subscriptions
                        .retain(|s| !(Arc::ptr_eq(&s.session, session) && &*s.id == id));
                    if self.subscriptions.len() != before {
                        session.subscriptions.lock().remove(id);
                    }
                    session.drop_snapshot(id);
                }
                value(Value::Null)
            }
            Some(Op::Release) => {
                if self
                    .owner
                    .as_ref()
                    .is_some_and(|o| Arc::ptr_eq(&o.session, session))
                {
                    self.release();
                }
                value(Value::Null)
            }
            Some(Op::Acquire) => {
                let mode = request
                    .get("mode")
                    .and_then(Value::as_str)
                    .and_then(Mode::parse);
                let detached =
                    kind == ResourceKind::Node && self.resources[index].world_id.is_none();
                if detached && mode == Some(Mode::Env) {
                    return Err(err(
                        ErrorCode::INVALID_REQUEST,
                        "Detached nodes support only components mode",
                    ));
                }
                self.claim(session, mode)?;
                value(Value::Null)
            }
            Some(Op::Begin | Op::Complete | Op::Abort | Op::Call) => {
                let op = op.unwrap_or(Op::Call);
                let mode = if kind == ResourceKind::Env && op == Op::Call {
                    Mode::Env
                } else {
                    Mode::Components
                };
                self.claim(session, Some(mode))?;
                match op {
                    Op::Begin => value(self.begin(request)?),
                    Op::Abort => {
                        let op = self.check_operation(request)?;
                        let cause =
                            format!("the {} operation '{}' was aborted", op.kind.as_str(), op.id);
                        self.fault(cause);
                        value(Value::Null)
                    }
                    Op::Complete => self.complete(session, request),
                    _ => self.call(session, request, index),
                }
            }
            _ => Err(err(
                ErrorCode::UNSUPPORTED_OPERATION,
                "Unknown protocol operation",
            )),
        }
    }

    fn subscribe(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
        index: usize,
    ) -> Result<Value, ProtocolError> {
        let kind = self.resources[index].kind;
        let fields: Vec<Field> = match request.get("fields") {
            None => kind
                .fields()
                .iter()
                .filter(|f| **f != "render")
                .filter_map(|f| Field::parse(f))
                .collect(),
            Some(Value::List(items)) => {
                let mut fields = Vec::with_capacity(items.len());
                for item in items {
                    match item
                        .as_str()
                        .filter(|f| kind.fields().contains(f))
                        .and_then(Field::parse)
                    {
                        Some(f) => fields.push(f),
                        None => {
                            let asked = match item.as_str() {
                                Some(name) => name.to_string(),
                                None => format!("a {}", item.type_name()),
                            };
                            return Err(err(
                                ErrorCode::INVALID_REQUEST,
                                format!(
                                    "Unsupported snapshot fields: {} '{}' has no field '{asked}'{}",
                                    kind.as_str(),
                                    self.resources[index].id,
                                    super::valid_list(&asked, kind.fields())
                                ),
                            ));
                        }
                    }
                }
                fields
            }
            Some(other) => {
                return Err(err(
                    ErrorCode::INVALID_REQUEST,
                    format!(
                        "Unsupported snapshot fields: fields must be a list of names, got a {}; {} fields are {}",
                        other.type_name(),
                        kind.as_str(),
                        kind.fields().join(", ")
                    ),
                ))
            }
        };
        let id = match request.get("subscription_id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Arc::<str>::from(id),
            _ => {
                return Err(err(
                    ErrorCode::INVALID_REQUEST,
                    "subscription_id must be a nonempty string",
                ))
            }
        };
        if !session.subscriptions.lock().insert(id.clone()) {
            return Err(err(
                ErrorCode::INVALID_REQUEST,
                "Subscription ID already exists",
            ));
        }
        let limit = self.server.config.max_subscriptions_per_session;
        if session.subscriptions.lock().len() > limit {
            session.subscriptions.lock().remove(&id);
            return Err(err(
                ErrorCode::INVALID_REQUEST,
                format!("a session may hold at most {limit} subscriptions"),
            ));
        }
        self.subscriptions.push(Subscription {
            session: session.clone(),
            id: id.clone(),
            resource: index,
            fields,
        });
        Ok(Value::from(&*id))
    }

    fn begin(&mut self, request: &Dict) -> Result<Value, ProtocolError> {
        let kind = request
            .get("kind")
            .and_then(Value::as_str)
            .and_then(OperationKind::parse);
        let id = request
            .get("operation_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let (Some(kind), Some(id)) = (kind, id) else {
            return Err(err(
                ErrorCode::INVALID_REQUEST,
                "begin requires a kind and operation_id",
            ));
        };
        if self.operation.is_some() {
            return Err(err(
                ErrorCode::OPERATION_IN_PROGRESS,
                "A component operation is already active",
            ));
        }
        if self.faulted && !kind.is_reset_family() {
            return Err(self.faulted_error());
        }
        for l in &mut self.latest {
            *l = Dict::new();
        }
        self.operation = Some(Operation {
            id: id.to_string(),
            kind,
            recovered: false,
        });
        Ok(Value::Null)
    }

    fn complete(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
    ) -> Result<(Reply, Option<Publish>), ProtocolError> {
        let op = self.check_operation(request)?;
        if op.kind.is_reset_family() && !op.recovered {
            let root = &self.resources[0];
            let scope = if root.kind == ResourceKind::Node && root.world_id.is_none() {
                "detached-root node"
            } else {
                "world"
            };
            return Err(err(
                ErrorCode::INVALID_OPERATION,
                format!("Recovery requires a successful {scope} reset or reload"),
            ));
        }
        let kind = op.kind.as_str();
        let operation_id = Value::from(op.id.as_str());
        self.operation = None;
        if self.faulted {
            tracing::info!(domain = %self.root_id, kind, "domain recovered");
        }
        self.faulted = false;
        self.fault_cause = None;
        let mut captures = Captures::new();
        let sequence = self.sequence + 1;
        let mut descriptors = self.take_descriptors(Some(sequence));
        self.boundary_snapshots(session, &mut descriptors, sequence, None, &mut captures);
        let mut result = Value::List(descriptors);
        let bytes = encode_response(session, request, &mut result);
        if let Value::List(descriptors) = result {
            self.restore_descriptors(descriptors);
        }
        let publish = Publish {
            operation_id,
            kind,
            env_resource: None,
            captures,
        };
        match bytes {
            Ok(b) => Ok((Reply::Encoded(b), Some(publish))),
            // The boundary itself stands; only the response is undeliverable.
            Err(e) => {
                self.publish(publish);
                Err(ProtocolError::new(ErrorCode::SERIALIZATION_ERROR, e))
            }
        }
    }

    fn call(
        &mut self,
        session: &Arc<SessionShared>,
        request: &Dict,
        index: usize,
    ) -> Result<(Reply, Option<Publish>), ProtocolError> {
        let Some(method) = request.get("method").and_then(Value::as_str) else {
            return Err(err(ErrorCode::INVALID_REQUEST, "method must be a string"));
        };
        let meta = self.resources[index].clone();
        let hosted = self
            .hosted
            .as_mut()
            .ok_or_else(|| err(ErrorCode::EXECUTION_ERROR, "domain not instantiated"))?;
        if !hosted.exports(&meta, method) {
            let exported: Vec<&str> = meta
                .kind
                .methods()
                .iter()
                .map(|(m, _)| *m)
                .filter(|m| hosted.exports(&meta, m))
                .collect();
            return Err(err(
                ErrorCode::UNSUPPORTED_OPERATION,
                format!(
                    "Method is not exported: {} '{}' has no method '{method}'{}",
                    meta.kind.as_str(),
                    meta.id,
                    super::valid_list(method, &exported)
                ),
            ));
        }
        let method: &'static str = meta
            .kind
            .methods()
            .iter()
            .map(|(m, _)| *m)
            .find(|m| *m == method)
            .unwrap_or("render");
        let mutation = meta.kind.is_mutation(method).unwrap_or(false);
        let reset_family = matches!(method, "reset" | "reload" | "after_reset" | "after_reload");
        let in_reset_op = self
            .operation
            .as_ref()
            .is_some_and(|o| o.kind.is_reset_family());
        if self.faulted && !matches!(method, "reset" | "reload") && !in_reset_op {
            return Err(self.faulted_error());
        }
        let is_env = meta.kind == ResourceKind::Env;
        if !is_env && (mutation || self.operation.is_some()) {
            let op = self.check_operation(request)?;
            if op.kind == OperationKind::Step && reset_family {
                return Err(err(
                    ErrorCode::INVALID_OPERATION,
                    "Reset lifecycle requires a reset/reload operation",
                ));
            }
            if op.kind.is_reset_family()
                && matches!(
                    method,
                    "step" | "set_next_action" | "pre_environment_step" | "post_environment_step"
                )
            {
                return Err(err(
                    ErrorCode::INVALID_OPERATION,
                    "Step lifecycle requires a step operation",
                ));
            }
        }
        let env_mutation = is_env && mutation;
        let operation_id = request.get("operation_id").cloned().unwrap_or_default();
        if env_mutation && operation_id.as_str().is_none_or(str::is_empty) {
            return Err(err(
                ErrorCode::INVALID_REQUEST,
                "environment calls require an operation_id",
            ));
        }
        let args = match request.get("args") {
            None => Vec::new(),
            Some(Value::List(a) | Value::Tuple(a)) => a.iter().map(native).collect(),
            Some(_) => {
                return Err(err(
                    ErrorCode::INVALID_REQUEST,
                    "Expected args sequence and kwargs dictionary",
                ))
            }
        };
        let kwargs = match request.get("kwargs") {
            None => Dict::new(),
            Some(Value::Dict(d)) => d.iter().map(|(k, v)| (k.to_string(), native(v))).collect(),
            Some(_) => {
                return Err(err(
                    ErrorCode::INVALID_REQUEST,
                    "Expected args sequence and kwargs dictionary",
                ))
            }
        };
        if env_mutation {
            for l in &mut self.latest {
                *l = Dict::new();
            }
        }
        let Some(hosted) = self.hosted.as_mut() else {
            return Err(err(ErrorCode::EXECUTION_ERROR, "domain not instantiated"));
        };
        let takes_action = (is_env && method == "step") || method == "set_next_action";
        if takes_action && self.server.config.validate_actions {
            // Only a well-formed call is checked: a wrong argument count is
            // reported by the binding, which names what was given.
            let action = match args.len() {
                0 => kwargs.get("action"),
                1 if !kwargs.contains_key("action") => args.first(),
                _ => None,
            };
            if let (Some(action), Some(space)) = (action, hosted.action_space(&meta)) {
                if let Err(problem) = space.check(action, "action") {
                    tracing::debug!(resource = %meta.id, method, %problem, "action refused");
                    return Err(err(
                        ErrorCode::INVALID_REQUEST,
                        format!("{method}() on '{}' refused the action: {problem}", meta.id),
                    ));
                }
            }
        }
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            hosted.call(&meta, method, args, kwargs)
        }));
        let took = started.elapsed();
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
        let value = match outcome {
            Ok(Ok(v)) => v,
            // A refusal before anything changed: certain, no fault.
            Ok(Err(e)) if e.kind() == HostErrorKind::InvalidArgument => {
                tracing::debug!(resource = %meta.id, method, reason = e.message(), "call refused");
                return Err(err(ErrorCode::INVALID_REQUEST, e.message().to_string()));
            }
            failure => {
                let (code, message) = match failure {
                    Ok(Err(e)) if e.kind() == HostErrorKind::Serialization => {
                        (ErrorCode::SERIALIZATION_ERROR, e.message().to_string())
                    }
                    Ok(Err(e)) => (ErrorCode::EXECUTION_ERROR, e.message().to_string()),
                    Err(p) => (
                        ErrorCode::EXECUTION_ERROR,
                        format!("{method} panicked: {}", panic_message(&p)),
                    ),
                    Ok(Ok(_)) => (ErrorCode::EXECUTION_ERROR, String::new()),
                };
                let call = format!("{method}() on '{}'", meta.id);
                return Err(self.mutation_failed(mutation, code, message, &call));
            }
        };
        if reset_family {
            self.revision += 1;
        }
        let detached_root =
            index == 0 && meta.kind == ResourceKind::Node && meta.world_id.is_none();
        if (meta.kind == ResourceKind::World || detached_root)
            && matches!(method, "reset" | "reload")
        {
            if let Some(op) = self.operation.as_mut() {
                op.recovered = true;
            }
        }
        if meta.kind == ResourceKind::World && method == "step" {
            let mut l = Dict::new();
            l.insert("dt", value.clone());
            self.latest[index] = l;
        }
        if env_mutation {
            if self.faulted {
                tracing::info!(domain = %self.root_id, resource = %meta.id, method, "domain recovered");
            }
            self.faulted = false;
            self.fault_cause = None;
            let names: &[&str] = if method == "step" {
                &["observation", "reward", "terminated", "truncated", "info"]
            } else {
                &["context", "observation", "info"]
            };
            let mut l = Dict::new();
            if let Some(items) = value.as_seq() {
                for (name, v) in names.iter().zip(items) {
                    l.insert(*name, v.clone());
                }
            }
            self.latest[index] = l;
        }
        let mut captures = Captures::new();
        let sequence = if env_mutation {
            self.sequence + 1
        } else {
            self.sequence
        };
        let mut descriptors = self.take_descriptors(Some(sequence));
        if env_mutation {
            self.boundary_snapshots(
                session,
                &mut descriptors,
                sequence,
                Some(index),
                &mut captures,
            );
        }
        let mut result = Dict::with_capacity(2);
        result.insert("value", value);
        result.insert("descriptors", Value::List(descriptors));
        let mut result = Value::Dict(result);
        let encoded = encode_response(session, request, &mut result);
        if let Value::Dict(mut d) = result {
            if let Some(Value::List(descriptors)) = d.remove("descriptors") {
                self.restore_descriptors(descriptors);
            }
        }
        let bytes = match encoded {
            Ok(b) => b,
            Err(message) => {
                let call = format!("encoding the result of {method}() on '{}'", meta.id);
                return Err(self.mutation_failed(
                    mutation,
                    ErrorCode::SERIALIZATION_ERROR,
                    message,
                    &call,
                ));
            }
        };
        let publish = env_mutation.then(|| Publish {
            operation_id,
            kind: method,
            env_resource: Some(index),
            captures,
        });
        Ok((Reply::Encoded(bytes), publish))
    }

    /// A hosted mutation failed after it started: the domain is faulted and
    /// the outcome is uncertain. Reads fail without consequence.
    fn mutation_failed(
        &mut self,
        mutation: bool,
        code: ErrorCode,
        message: String,
        call: &str,
    ) -> ProtocolError {
        if mutation {
            self.fault(format!("{call} failed after it started ({message})"));
            ProtocolError::uncertain(code, message)
        } else {
            ProtocolError::new(code, message)
        }
    }

    // ---- descriptors and snapshots ----

    fn domain_id(&self) -> &str {
        let root = &self.resources[0];
        root.world_id.as_deref().unwrap_or(&root.id)
    }

    /// Brings the cached descriptor of resource `index` up to date: it is
    /// rebuilt only when the resource's attributes differ from the last
    /// ones; identity, revision and sequence are set in place.
    fn refresh_descriptor(&mut self, index: usize, sequence: u64) {
        let meta = &self.resources[index];
        let attrs = match &mut self.hosted {
            Some(h) => h.attrs(meta),
            None => Attrs::Missing,
        };
        let stale = self.desc_values.get(index).is_none_or(Value::is_null)
            || self
                .desc_attrs
                .get(index)
                .is_none_or(|a| a.as_ref() != Some(&attrs));
        if stale {
            let mut d = Dict::with_capacity(32);
            d.insert("id", meta.id.as_str());
            d.insert("kind", meta.kind.as_str());
            d.insert("world_id", meta.world_id.as_deref());
            d.insert("node_id", meta.node_id.as_deref());
            d.insert(
                "children",
                Value::Dict(
                    meta.children
                        .iter()
                        .map(|(n, id)| (n.clone(), Value::from(id)))
                        .collect(),
                ),
            );
            d.insert("revision", self.revision);
            d.insert("sequence", sequence);
            d.insert("domain_id", self.domain_id());
            attrs.write(meta.kind, &mut d);
            let n = self.resources.len();
            self.desc_values.resize(n, Value::Null);
            self.desc_attrs.resize(n, None);
            self.desc_values[index] = Value::Dict(d);
            self.desc_attrs[index] = Some(attrs);
        }
        if let Some(d) = self.desc_values[index].as_dict_mut() {
            if let Some(v) = d.get_mut("revision") {
                *v = Value::from(self.revision);
            }
            if let Some(v) = d.get_mut("sequence") {
                *v = Value::from(sequence);
            }
        }
    }

    /// Moves the up-to-date descriptors out of the cache (give them back with
    /// [`Domain::restore_descriptors`]; if not, they are rebuilt next time).
    fn take_descriptors(&mut self, sequence: Option<u64>) -> Vec<Value> {
        let sequence = sequence.unwrap_or(self.sequence);
        for i in 0..self.resources.len() {
            self.refresh_descriptor(i, sequence);
        }
        std::mem::take(&mut self.desc_values)
    }

    /// Returns descriptors to the cache, without any boundary snapshot.
    fn restore_descriptors(&mut self, mut descriptors: Vec<Value>) {
        if descriptors.len() != self.resources.len() {
            return;
        }
        for d in &mut descriptors {
            if let Some(d) = d.as_dict_mut() {
                d.remove("snapshot");
            }
        }
        self.desc_values = descriptors;
    }

    /// A copy of every descriptor (describe, discover).
    fn descriptors(&mut self, sequence: Option<u64>) -> Vec<Value> {
        let all = self.take_descriptors(sequence);
        let copy = all.clone();
        self.restore_descriptors(all);
        copy
    }

    /// A copy of one descriptor.
    fn descriptor(&mut self, index: usize, sequence: u64) -> Value {
        self.refresh_descriptor(index, sequence);
        self.desc_values[index].clone()
    }

    /// Adds controller snapshots to the descriptors of a completed boundary.
    fn boundary_snapshots(
        &mut self,
        session: &Arc<SessionShared>,
        descriptors: &mut [Value],
        sequence: u64,
        env_resource: Option<usize>,
        captures: &mut Captures,
    ) {
        let controller = self
            .owner
            .as_ref()
            .map(|o| o.session.clone())
            .unwrap_or_else(|| session.clone());
        for (index, descriptor) in descriptors.iter_mut().enumerate() {
            let meta = &self.resources[index];
            if meta.kind == ResourceKind::Env && Some(index) != env_resource {
                continue;
            }
            // The env's own fields are exactly the call's value: repeating
            // them is optional and off unless configured (SPEC 8.3).
            if meta.kind == ResourceKind::Env && !self.server.config.env_boundary_snapshots {
                continue;
            }
            let kind_fields: Vec<Field> = meta
                .kind
                .fields()
                .iter()
                .filter_map(|f| Field::parse(f))
                .collect();
            // The union of the controller's own selections for this
            // resource (empty when it subscribed with `fields: []`: no
            // proactive reads, as in the reference), else every field.
            let mut selected: Vec<Field> = Vec::new();
            let mut subscribed = false;
            for s in &self.subscriptions {
                if Arc::ptr_eq(&s.session, &controller) && s.resource == index {
                    subscribed = true;
                    selected.extend(s.fields.iter().copied());
                }
            }
            if !subscribed {
                selected = kind_fields;
            }
            let allowed = match meta.kind {
                ResourceKind::Node => self.hosted.as_mut().and_then(|h| h.snapshot_fields(meta)),
                _ => None,
            };
            let mut fields: Vec<Field> = selected
                .into_iter()
                .filter(|f| *f != Field::Render && allowed.as_ref().is_none_or(|a| a.contains(f)))
                .collect();
            fields.sort_by_key(|f| f.name());
            fields.dedup();
            let Ok(data) = self.capture(index, &fields, captures) else {
                continue;
            };
            let mut snap = Dict::with_capacity(4);
            snap.insert("sequence", sequence);
            snap.insert("revision", self.revision);
            snap.insert(
                "fields",
                Value::List(fields.iter().map(|f| Value::from(f.name())).collect()),
            );
            snap.insert("data", data);
            if let Some(d) = descriptor.as_dict_mut() {
                d.insert("snapshot", snap);
            }
        }
    }

    /// Reads the given fields of a resource (each at most once per boundary)
    /// into a data dict in field-name order; unavailable fields are omitted.
    fn capture(
        &mut self,
        index: usize,
        fields: &[Field],
        captures: &mut Captures,
    ) -> Result<Value, String> {
        let mut sorted: Vec<Field> = fields.to_vec();
        sorted.sort_by_key(|f| f.name());
        sorted.dedup();
        let mut data = Dict::with_capacity(sorted.len());
        for field in sorted {
            let captured = match captures.get(&(index, field)) {
                Some(c) => c.clone(),
                None => {
                    let c = self.read_field(index, field);
                    captures.insert((index, field), c.clone());
                    c
                }
            };
            if let Some(v) = captured? {
                data.insert(field.name(), v);
            }
        }
        Ok(Value::Dict(data))
    }

    fn read_field(&mut self, index: usize, field: Field) -> Result<Option<Value>, String> {
        let meta = self.resources[index].clone();
        let Some(hosted) = self.hosted.as_mut() else {
            return Ok(None);
        };
        let value = match (meta.kind, field) {
            (ResourceKind::Env, Field::Render) | (ResourceKind::Node, _) => {
                catch_unwind(AssertUnwindSafe(|| hosted.read(&meta, field)))
                    .unwrap_or_else(|p| Err(HostError::new(panic_message(&p))))
            }
            (ResourceKind::Env | ResourceKind::World, f) => {
                Ok(self.latest[index].get(f.name()).cloned())
            }
        };
        match value {
            Ok(Some(v)) => match Codec::new(usize::MAX).ok().map(|c| c.measure(&v)) {
                Some(Err(e)) => Err(e.to_string()),
                _ => Ok(Some(v)),
            },
            Ok(None) => Ok(None),
            Err(e) => Err(e.message().to_string()),
        }
    }

    /// Publishes a completed boundary to every matching subscription.
    fn publish(&mut self, p: Publish) {
        self.sequence += 1;
        let Publish {
            operation_id,
            kind,
            env_resource,
            mut captures,
        } = p;
        let boundary = Arc::new(Boundary {
            operation_id,
            kind: Value::from(kind),
            sequence: self.sequence,
            timestamp_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos().min(i64::MAX as u128) as i64),
            revision: self.revision,
        });
        // Observers of the same resource and fields share one tail (data and
        // descriptor), encoded at most once.
        let mut tails: HashMap<(usize, Vec<Field>), Arc<SharedTail>> = HashMap::new();
        let mut ended: Vec<usize> = Vec::new();
        for i in 0..self.subscriptions.len() {
            let (resource, fields) = {
                let s = &self.subscriptions[i];
                (s.resource, s.fields.clone())
            };
            if self.resources[resource].kind == ResourceKind::Env && Some(resource) != env_resource
            {
                continue;
            }
            let key = (resource, fields);
            let data = match tails.get(&key) {
                Some(tail) => Ok(tail.clone()),
                None => self.capture(resource, &key.1, &mut captures).map(|data| {
                    let descriptor = self.descriptor(resource, self.sequence);
                    let tail = Arc::new(SharedTail::new(data, descriptor));
                    tails.insert(key, tail.clone());
                    tail
                }),
            };
            let sub = &self.subscriptions[i];
            let resource_id = self.resources[resource].id.as_str();
            match data {
                Ok(tail) => {
                    sub.session.send_snapshot(
                        sub.id.clone(),
                        PendingSnapshot {
                            domain: self.sender.clone(),
                            subscription_id: sub.id.clone(),
                            resource_id: Arc::from(resource_id),
                            boundary: boundary.clone(),
                            tail,
                        },
                    );
                }
                Err(message) => {
                    let head = snapshot::header(
                        &sub.session,
                        "subscription_error",
                        &sub.id,
                        resource_id,
                        &boundary,
                    );
                    sub.session.send_reliable(snapshot::subscription_error(
                        &sub.session,
                        head,
                        &message,
                    ));
                    sub.session.subscriptions.lock().remove(&sub.id);
                    ended.push(i);
                }
            }
        }
        for i in ended.into_iter().rev() {
            self.subscriptions.remove(i);
        }
    }
}

/// Arrays in arguments are normalized to native byte order before invocation
/// (lossless for every supported dtype).
fn native(v: &Value) -> Value {
    match v {
        Value::Array(a) if !a.dtype().is_native() => Value::Array(NdArray::to_native(a)),
        Value::List(items) => Value::List(items.iter().map(native).collect()),
        Value::Tuple(items) => Value::Tuple(items.iter().map(native).collect()),
        Value::Dict(d) => Value::Dict(d.iter().map(|(k, v)| (k.to_string(), native(v))).collect()),
        Value::ObjectArray(o) => crate::codec::ObjectArray::new(
            o.shape().to_vec(),
            o.values().iter().map(native).collect(),
        )
        .map(Value::ObjectArray)
        .unwrap_or_else(|_| v.clone()),
        Value::Graph(g) => Value::Graph(Box::new(crate::codec::Graph {
            n_nodes: native(&g.n_nodes),
            n_edges: native(&g.n_edges),
            nodes_features: native(&g.nodes_features),
            edges_features: native(&g.edges_features),
            edges: native(&g.edges),
        })),
        other => other.clone(),
    }
}

/// Encodes a response envelope around `result` without copying it; if it
/// does not fit, drops the optional snapshots from its descriptors and tries
/// again.
fn encode_response(
    session: &SessionShared,
    request: &Dict,
    result: &mut Value,
) -> Result<Vec<u8>, String> {
    let codec = session.codec();
    let attempt = |result: &Value| {
        let head = response_head(session, request);
        let mut entries: Vec<(&str, &Value)> = head.iter().map(|(k, v)| (*k, v)).collect();
        entries.push(("result", result));
        codec.encode_entries(&entries)
    };
    match attempt(result) {
        Ok(bytes) => Ok(bytes),
        Err(e) => {
            if !strip_snapshots(result) {
                return Err(e.to_string());
            }
            attempt(result).map_err(|e| e.to_string())
        }
    }
}

/// The members of a response before `result`.
fn response_head(session: &SessionShared, request: &Dict) -> [(&'static str, Value); 6] {
    let echo = |k: &str| request.get(k).cloned().unwrap_or_default();
    [
        ("version", Value::Int(crate::protocol::PROTOCOL_VERSION)),
        ("type", Value::from("response")),
        ("session_id", Value::from(&*session.id)),
        ("request_id", echo("request_id")),
        ("resource_id", echo("resource_id")),
        ("operation_id", echo("operation_id")),
    ]
}

/// Removes every boundary snapshot from a result's descriptors; whether
/// there was any.
fn strip_snapshots(result: &mut Value) -> bool {
    let descriptors = match result {
        Value::List(d) => d,
        Value::Dict(d) => match d.get_mut("descriptors") {
            Some(Value::List(d)) => d,
            _ => return false,
        },
        _ => return false,
    };
    let mut any = false;
    for d in descriptors {
        if let Some(d) = d.as_dict_mut() {
            any |= d.remove("snapshot").is_some();
        }
    }
    any
}

/// The text of a caught panic.
pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}
