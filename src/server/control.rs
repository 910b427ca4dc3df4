//! The control state machine of one execution domain, without threads, I/O
//! or hosted objects: who controls the domain and in which mode, the open
//! component operation, the fault, the descriptor revision and the boundary
//! sequence (SPEC sections 6–7; the seed's "Execution rules").
//!
//! A [`Domain`](super::domain::Domain) asks it, before invoking anything,
//! whether a request may run ([`Control::claim_for`], [`Control::begin`],
//! [`Control::check_call`], ...), and tells it afterwards what happened
//! ([`Control::call_succeeded`], [`Control::call_failed`],
//! [`Control::publish`]). A refusal is a [`Refusal`], turned into the wire
//! error (with messages naming the domain) by [`Control::error`].

use crate::protocol::{
    err, ErrorCode, Method, Mode, Op, OperationKind, ProtocolError, ResourceKind,
};

/// A controlling party: sessions are compared by identity.
pub(crate) trait Party: Clone {
    /// Whether `self` and `other` are the same session.
    fn same(&self, other: &Self) -> bool;
}

impl<T> Party for std::sync::Arc<T> {
    fn same(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(self, other)
    }
}

/// How the domain is named in messages, from its root resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Not instantiated yet: the registered root ID.
    Pending(String),
    /// A standalone env.
    Env(String),
    /// A detached node tree, by its root node.
    Detached(String),
    /// A world domain, with the envs registered over it.
    World { world: String, envs: Vec<String> },
}

impl Scope {
    /// `env 'cartpole'`, `world 'pointmass/world'`, `detached node tree 'g'`.
    fn name(&self) -> String {
        match self {
            Scope::Pending(id) => format!("'{id}'"),
            Scope::Env(id) => format!("env '{id}'"),
            Scope::Detached(id) => format!("detached node tree '{id}'"),
            Scope::World { world, .. } => format!("world '{world}'"),
        }
    }
}

/// What a call targets, as far as control is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub kind: ResourceKind,
    /// A node with no world (part of a detached tree).
    pub detached_node: bool,
    /// A successful `reset`/`reload` of it recovers the domain: the world,
    /// or the root of a detached tree.
    pub recovers: bool,
}

/// Why control refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `acquire` with a mode other than `env` or `components`.
    UnknownMode,
    /// `acquire` of a detached node in env mode.
    DetachedEnvMode,
    /// Another session controls the domain (in `held` mode).
    OtherOwner { held: Mode },
    /// This session controls the domain in another mode.
    OtherMode { held: Mode, asked: Mode },
    /// `begin` without a kind or a nonempty operation ID.
    BeginNeedsKindAndId,
    /// `begin` while an operation is open.
    InProgress,
    /// The domain is faulted and the request does not recover it.
    Faulted,
    /// No open operation, or a different operation ID.
    NoMatchingOperation,
    /// `complete` of a reset/reload operation that reset nothing that recovers.
    NotRecovered,
    /// A reset/reload lifecycle method inside a step operation.
    ResetInStep,
    /// A step lifecycle method inside a reset/reload operation.
    StepInReset,
    /// An env mutation without an operation ID.
    EnvCallNeedsOperationId,
}

/// What [`Control::check_call`] decided about an allowed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallPolicy {
    pub method: Method,
    /// The method mutates: a failure after it started faults the domain and
    /// is uncertain.
    pub mutation: bool,
    /// An env-mode mutation: its own boundary, published after the response.
    pub env_mutation: bool,
}

/// Whether a claim took control or confirmed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claim {
    Acquired,
    Held,
}

/// An open component operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operation {
    pub id: String,
    pub kind: OperationKind,
    /// A recovering reset/reload has run in it.
    pub recovered: bool,
}

/// A completed operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completed {
    pub id: String,
    pub kind: OperationKind,
    /// The domain was faulted before and is not any more.
    pub recovered_fault: bool,
}

/// The control state of one domain; `S` identifies sessions.
#[derive(Debug)]
pub(crate) struct Control<S> {
    owner: Option<(S, Mode)>,
    operation: Option<Operation>,
    /// What faulted the domain, while it is faulted.
    fault: Option<String>,
    revision: u64,
    sequence: u64,
    scope: Scope,
}

impl<S: Party> Control<S> {
    /// A fresh domain registered as `root_id`: no owner, revision and
    /// sequence 0.
    pub(crate) fn new(root_id: &str) -> Control<S> {
        Control {
            owner: None,
            operation: None,
            fault: None,
            revision: 0,
            sequence: 0,
            scope: Scope::Pending(root_id.to_string()),
        }
    }

    /// The hosted object was (re)built with this scope: the fault is gone;
    /// a revival (not the first build) advances the revision.
    pub(crate) fn instantiated(&mut self, scope: Scope, revival: bool) {
        self.scope = scope;
        self.fault = None;
        if revival {
            self.revision += 1;
        }
    }

    pub(crate) fn revision(&self) -> u64 {
        self.revision
    }

    /// The last completed boundary.
    pub(crate) fn sequence(&self) -> u64 {
        self.sequence
    }

    pub(crate) fn is_faulted(&self) -> bool {
        self.fault.is_some()
    }

    /// What faulted the domain, while it is.
    pub(crate) fn fault_cause(&self) -> Option<&str> {
        self.fault.as_deref()
    }

    pub(crate) fn owner(&self) -> Option<(&S, Mode)> {
        self.owner.as_ref().map(|(s, m)| (s, *m))
    }

    pub(crate) fn is_owner(&self, session: &S) -> bool {
        self.owner.as_ref().is_some_and(|(o, _)| o.same(session))
    }

    #[cfg(test)]
    pub(crate) fn operation(&self) -> Option<&Operation> {
        self.operation.as_ref()
    }

    /// Takes control for `session` in `mode`, or confirms it holds it.
    pub(crate) fn claim(&mut self, session: &S, mode: Option<Mode>) -> Result<Claim, Refusal> {
        let Some(mode) = mode else {
            return Err(Refusal::UnknownMode);
        };
        match &self.owner {
            Some((owner, held)) if !owner.same(session) => Err(Refusal::OtherOwner { held: *held }),
            Some((_, held)) if *held != mode => Err(Refusal::OtherMode {
                held: *held,
                asked: mode,
            }),
            Some(_) => Ok(Claim::Held),
            None => {
                self.owner = Some((session.clone(), mode));
                Ok(Claim::Acquired)
            }
        }
    }

    /// `acquire`: a detached node is controlled in components mode only.
    pub(crate) fn acquire(
        &mut self,
        session: &S,
        mode: Option<Mode>,
        target: Target,
    ) -> Result<Claim, Refusal> {
        if target.detached_node && mode == Some(Mode::Env) {
            return Err(Refusal::DetachedEnvMode);
        }
        self.claim(session, mode)
    }

    /// The implicit claim of `begin`, `complete`, `abort` and `call`: env
    /// mode for calls on an env, components mode otherwise.
    pub(crate) fn claim_for(
        &mut self,
        session: &S,
        op: Op,
        kind: ResourceKind,
    ) -> Result<Claim, Refusal> {
        let mode = if kind == ResourceKind::Env && op == Op::Call {
            Mode::Env
        } else {
            Mode::Components
        };
        self.claim(session, Some(mode))
    }

    /// `release` (or the session's disconnection): gives up control if
    /// `session` holds it; an open operation is lost and faults the domain.
    /// Whether it held control.
    pub(crate) fn release(&mut self, session: &S) -> bool {
        if !self.is_owner(session) {
            return false;
        }
        if let Some(op) = &self.operation {
            let cause = format!(
                "its controller released control (or disconnected) during the unfinished {} operation '{}'",
                op.kind.as_str(),
                op.id
            );
            self.fault(cause);
        }
        self.operation = None;
        self.owner = None;
        true
    }

    /// Faults the domain: stepping is refused until a successful reset or
    /// reload; an open operation is closed.
    pub(crate) fn fault(&mut self, cause: String) {
        self.fault = Some(cause);
        self.operation = None;
    }

    /// `begin`: opens an operation (a faulted domain only a reset/reload one).
    pub(crate) fn begin(
        &mut self,
        kind: Option<OperationKind>,
        operation_id: Option<&str>,
    ) -> Result<(), Refusal> {
        let (Some(kind), Some(id)) = (kind, operation_id.filter(|s| !s.is_empty())) else {
            return Err(Refusal::BeginNeedsKindAndId);
        };
        if self.operation.is_some() {
            return Err(Refusal::InProgress);
        }
        if self.fault.is_some() && !kind.is_reset_family() {
            return Err(Refusal::Faulted);
        }
        self.operation = Some(Operation {
            id: id.to_string(),
            kind,
            recovered: false,
        });
        Ok(())
    }

    /// The open operation, if `operation_id` names it.
    fn matching(&self, operation_id: Option<&str>) -> Result<&Operation, Refusal> {
        match &self.operation {
            Some(op) if operation_id == Some(op.id.as_str()) => Ok(op),
            _ => Err(Refusal::NoMatchingOperation),
        }
    }

    /// `abort`: closes the operation and faults the domain.
    pub(crate) fn abort(&mut self, operation_id: Option<&str>) -> Result<(), Refusal> {
        let op = self.matching(operation_id)?;
        let cause = format!("the {} operation '{}' was aborted", op.kind.as_str(), op.id);
        self.fault(cause);
        Ok(())
    }

    /// `complete`: closes the operation (a reset/reload one only once it has
    /// recovered the domain) and clears the fault. The boundary's sequence
    /// is taken by [`Control::publish`].
    pub(crate) fn complete(&mut self, operation_id: Option<&str>) -> Result<Completed, Refusal> {
        let op = self.matching(operation_id)?;
        if op.kind.is_reset_family() && !op.recovered {
            return Err(Refusal::NotRecovered);
        }
        let Some(op) = self.operation.take() else {
            return Err(Refusal::NoMatchingOperation);
        };
        Ok(Completed {
            id: op.id,
            kind: op.kind,
            recovered_fault: self.fault.take().is_some(),
        })
    }

    /// Whether `method` of `target` may run now, with the request's
    /// `operation_id` (`None` when absent or not a string); the method is
    /// one `target`'s kind exports.
    pub(crate) fn check_call(
        &self,
        target: Target,
        method: Method,
        operation_id: Option<&str>,
    ) -> Result<CallPolicy, Refusal> {
        let mutation = target.kind.is_mutation(method.as_str()).unwrap_or(false);
        let in_reset_op = self
            .operation
            .as_ref()
            .is_some_and(|o| o.kind.is_reset_family());
        if self.fault.is_some() && !method.is_reset_or_reload() && !in_reset_op {
            return Err(Refusal::Faulted);
        }
        let is_env = target.kind == ResourceKind::Env;
        if !is_env && (mutation || self.operation.is_some()) {
            let op = self.matching(operation_id)?;
            if op.kind == OperationKind::Step && method.is_reset_lifecycle() {
                return Err(Refusal::ResetInStep);
            }
            if op.kind.is_reset_family() && method.is_step_lifecycle() {
                return Err(Refusal::StepInReset);
            }
        }
        let env_mutation = is_env && mutation;
        if env_mutation && operation_id.is_none_or(str::is_empty) {
            return Err(Refusal::EnvCallNeedsOperationId);
        }
        Ok(CallPolicy {
            method,
            mutation,
            env_mutation,
        })
    }

    /// An allowed call returned: the reset/reload lifecycle advances the
    /// revision, a recovering reset/reload marks the operation recovered,
    /// an env mutation clears the fault. Whether the domain recovered.
    pub(crate) fn call_succeeded(&mut self, target: Target, policy: CallPolicy) -> bool {
        if policy.method.is_reset_lifecycle() {
            self.revision += 1;
        }
        if target.recovers && policy.method.is_reset_or_reload() {
            if let Some(op) = self.operation.as_mut() {
                op.recovered = true;
            }
        }
        policy.env_mutation && self.fault.take().is_some()
    }

    /// An allowed call failed after it started: a mutation faults the
    /// domain (`cause` says which call and how). Whether the outcome is
    /// uncertain.
    pub(crate) fn call_failed(
        &mut self,
        policy: CallPolicy,
        cause: impl FnOnce() -> String,
    ) -> bool {
        if policy.mutation {
            self.fault(cause());
        }
        policy.mutation
    }

    /// The sequence the next boundary will have.
    pub(crate) fn next_sequence(&self) -> u64 {
        self.sequence + 1
    }

    /// A boundary is published: the sequence advances; the new one.
    pub(crate) fn publish(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence
    }

    /// The wire error of a refusal, naming the domain.
    pub(crate) fn error(&self, refusal: &Refusal) -> ProtocolError {
        match refusal {
            Refusal::UnknownMode => err(ErrorCode::InvalidRequest, "Unknown execution mode"),
            Refusal::DetachedEnvMode => err(
                ErrorCode::InvalidRequest,
                "Detached nodes support only components mode",
            ),
            Refusal::OtherOwner { held } => err(
                ErrorCode::OwnershipConflict,
                format!(
                    "{} is controlled by another session ({} mode): wait until it releases control or disconnects, or watch it as an observer (subscribe)",
                    self.scope.name(),
                    held.as_str()
                ),
            ),
            Refusal::OtherMode { held, asked } => err(
                ErrorCode::OwnershipConflict,
                format!(
                    "this session controls {} in {} mode; release it before using {} mode",
                    self.scope.name(),
                    held.as_str(),
                    asked.as_str()
                ),
            ),
            Refusal::BeginNeedsKindAndId => err(
                ErrorCode::InvalidRequest,
                "begin requires a kind and operation_id",
            ),
            Refusal::InProgress => err(
                ErrorCode::OperationInProgress,
                "A component operation is already active",
            ),
            Refusal::Faulted => self.faulted_error(),
            Refusal::NoMatchingOperation => err(
                ErrorCode::InvalidOperation,
                "An explicit matching component operation is required",
            ),
            Refusal::NotRecovered => {
                let scope = match self.scope {
                    Scope::Detached(_) => "detached-root node",
                    _ => "world",
                };
                err(
                    ErrorCode::InvalidOperation,
                    format!("Recovery requires a successful {scope} reset or reload"),
                )
            }
            Refusal::ResetInStep => err(
                ErrorCode::InvalidOperation,
                "Reset lifecycle requires a reset/reload operation",
            ),
            Refusal::StepInReset => err(
                ErrorCode::InvalidOperation,
                "Step lifecycle requires a step operation",
            ),
            Refusal::EnvCallNeedsOperationId => err(
                ErrorCode::InvalidRequest,
                "environment calls require an operation_id",
            ),
        }
    }

    /// The `faulted` refusal: names the resource, what faulted it and how to
    /// recover (for a plain env, without speaking of a world).
    fn faulted_error(&self) -> ProtocolError {
        let cause = self.fault.as_deref().unwrap_or("an interrupted operation");
        let message = match &self.scope {
            Scope::Pending(_) => format!("Faulted by {cause}: reset or reload to recover"),
            Scope::Env(id) => format!(
                "Env '{id}' is faulted: {cause}, so its state is unknown. Call reset() (or reload()) on '{id}' to recover"
            ),
            Scope::Detached(id) => format!(
                "Detached node tree '{id}' is faulted: {cause}, so its state is unknown. To recover, begin a reset (or reload) operation, reset (or reload) the root node '{id}', and complete the operation"
            ),
            Scope::World { world, envs } => {
                let via_env = if envs.is_empty() {
                    String::new()
                } else {
                    let quoted: Vec<String> = envs.iter().map(|e| format!("'{e}'")).collect();
                    format!("call reset() on env {} (env mode), or ", quoted.join(" or "))
                };
                format!(
                    "World '{world}' is faulted: {cause}, so its state is unknown. To recover, {via_env}begin a reset (or reload) operation, reset (or reload) the world '{world}', and complete the operation"
                )
            }
        };
        err(ErrorCode::Faulted, message)
    }
}

#[cfg(test)]
#[path = "control_tests.rs"]
mod tests;
