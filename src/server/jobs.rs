//! Work for a domain thread, and the handle sessions send it with.

use super::committed::CommittedTx;
use super::hosted::Hosted;
use super::outbound::{InFlight, SessionShared};
use crate::codec::{Dict, Value};
use crate::host::HostResult;
use crate::protocol::{err, ErrorCode, ProtocolError};
use std::sync::mpsc;
use std::sync::Arc;
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
        permit: InFlight,
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
        reply: mpsc::Sender<Result<Vec<String>, InstantiateError>>,
    },
    /// Dispose of the hosted objects and stop the thread.
    Shutdown,
}

/// A cloneable handle for sending jobs to a domain thread, with what the
/// domain published at its last committed boundary.
#[derive(Clone)]
pub(crate) struct DomainSender {
    pub jobs: mpsc::Sender<Job>,
    pub committed: CommittedTx,
}

impl DomainSender {
    pub(crate) fn send(&self, job: Job) {
        // A stopped domain (server shutting down) drops the job, which drops
        // any reply sender and so answers the waiter.
        let _ = self.jobs.send(job);
    }
}

/// Why a domain's object could not be built (or rebuilt).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InstantiateError {
    #[error("the domain has been disposed")]
    Disposed,
    #[error("factory failed: {0}")]
    Factory(String),
    #[error("factory panicked: {0}")]
    FactoryPanicked(String),
    /// A resource ID of the object is registered already.
    #[error("Resource ID already registered: {0}")]
    Taken(String),
    #[error("invalid resource tree: {0}")]
    InvalidTree(String),
    #[error("resource tree inspection panicked: {0}")]
    TreePanicked(String),
    #[error("Factory resource topology must remain unchanged on revival")]
    TopologyChanged,
}

impl InstantiateError {
    /// The error answered to the request that needed the object.
    pub(crate) fn into_protocol(self) -> ProtocolError {
        err(ErrorCode::ExecutionError, self.to_string())
    }
}

thread_local! {
    /// The server core and domain index this thread runs, on a domain
    /// thread (so that a shutdown started by a hosted call does not wait on
    /// its own domain).
    static CURRENT: std::cell::Cell<Option<(usize, usize)>> = const { std::cell::Cell::new(None) };
}

/// Marks this thread as domain `index` of the server whose core is at
/// address `core` (`Arc::as_ptr`).
pub(crate) fn enter_domain_thread(core: usize, index: usize) {
    CURRENT.with(|c| c.set(Some((core, index))));
}

/// The index of the domain of the server whose core is at address `core`
/// whose thread this is, if any.
pub(crate) fn current_domain(core: usize) -> Option<usize> {
    CURRENT
        .with(std::cell::Cell::get)
        .filter(|(c, _)| *c == core)
        .map(|(_, index)| index)
}
