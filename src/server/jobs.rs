//! Work for a domain thread, and the handle sessions send it with.

use super::committed::CommittedTx;
use super::hosted::Hosted;
use super::outbound::{InFlight, SessionShared};
use crate::codec::{Dict, Value};
use crate::host::HostResult;
use crate::protocol::{err, ErrorCode, ProtocolError};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    /// Descriptors of every resource (instantiating a pending domain), for
    /// the session `session`.
    Discover {
        session: Arc<str>,
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

/// Which lane of a domain's queue a job waits in: the session it is for, or
/// the server's own lane (instantiation, shutdown).
type Lane = Option<Arc<str>>;

impl Job {
    fn lane(&self) -> Lane {
        match self {
            Job::Request { session, .. } | Job::Detach { session } => Some(session.id.clone()),
            Job::Discover { session, .. } => Some(session.clone()),
            Job::DropSubscription { session_id, .. } => Some(session_id.clone()),
            Job::Instantiate { .. } | Job::Shutdown => None,
        }
    }
}

/// What a domain's queue holds: one lane of jobs per session (and one for
/// the server), served round-robin, one job per lane per turn. A session's
/// own jobs keep their order; another session's pile of requests delays
/// them by at most one job per turn (SPEC §6, "Fair queues").
#[derive(Default)]
struct Lanes {
    /// (FxHash: a session ID is hashed twice per request.)
    jobs: HashMap<Lane, VecDeque<Job>, rustc_hash::FxBuildHasher>,
    /// The lanes holding jobs, in the order they are served.
    turn: VecDeque<Lane>,
    /// Senders alive; none left (and nothing queued) stops the thread.
    senders: usize,
    /// The domain thread has stopped: jobs sent now are dropped.
    stopped: bool,
}

/// A domain's job queue, shared by its senders and its thread.
struct Queue {
    lanes: Mutex<Lanes>,
    ready: Condvar,
}

/// Why [`JobRx::recv_timeout`] returned no job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvError {
    Timeout,
    Disconnected,
}

/// A domain's queue, the sending side: cloneable.
pub(crate) struct JobTx {
    queue: Arc<Queue>,
}

/// A domain's queue, the side its thread takes jobs from.
pub(crate) struct JobRx {
    queue: Arc<Queue>,
}

/// A new, empty domain queue.
pub(crate) fn queue() -> (JobTx, JobRx) {
    let queue = Arc::new(Queue {
        lanes: Mutex::new(Lanes {
            senders: 1,
            ..Lanes::default()
        }),
        ready: Condvar::new(),
    });
    (
        JobTx {
            queue: queue.clone(),
        },
        JobRx { queue },
    )
}

impl Clone for JobTx {
    fn clone(&self) -> JobTx {
        self.queue.lanes.lock().senders += 1;
        JobTx {
            queue: self.queue.clone(),
        }
    }
}

impl Drop for JobTx {
    fn drop(&mut self) {
        let mut lanes = self.queue.lanes.lock();
        lanes.senders -= 1;
        if lanes.senders == 0 {
            self.queue.ready.notify_all();
        }
    }
}

impl JobTx {
    /// Queues `job` in its lane; dropped (answering any waiter through its
    /// dropped reply sender) if the domain thread has stopped.
    fn send(&self, job: Job) {
        let lane = job.lane();
        let mut lanes = self.queue.lanes.lock();
        if lanes.stopped {
            drop(lanes);
            drop(job);
            return;
        }
        let queued = lanes.jobs.entry(lane.clone()).or_default();
        queued.push_back(job);
        if queued.len() == 1 {
            lanes.turn.push_back(lane);
        }
        drop(lanes);
        self.queue.ready.notify_one();
    }

    /// Queues a request unless `session` already has `cap` jobs waiting in
    /// this queue; the request is handed back then.
    fn send_capped(&self, job: Job, session: &Arc<str>, cap: usize) -> Result<(), Box<Job>> {
        {
            let lanes = self.queue.lanes.lock();
            let lane = Some(session.clone());
            if !lanes.stopped && lanes.jobs.get(&lane).map_or(0, VecDeque::len) >= cap {
                return Err(Box::new(job));
            }
        }
        self.send(job);
        Ok(())
    }
}

impl JobRx {
    /// The next job, round-robin across lanes, waiting at most `timeout`.
    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Result<Job, RecvError> {
        let deadline = Instant::now() + timeout;
        let mut lanes = self.queue.lanes.lock();
        loop {
            if let Some(lane) = lanes.turn.pop_front() {
                let Some(queued) = lanes.jobs.get_mut(&lane) else {
                    continue;
                };
                let Some(job) = queued.pop_front() else {
                    lanes.jobs.remove(&lane);
                    continue;
                };
                if queued.is_empty() {
                    lanes.jobs.remove(&lane);
                } else {
                    lanes.turn.push_back(lane);
                }
                return Ok(job);
            }
            if lanes.senders == 0 {
                return Err(RecvError::Disconnected);
            }
            if self
                .queue
                .ready
                .wait_until(&mut lanes, deadline)
                .timed_out()
            {
                return Err(RecvError::Timeout);
            }
        }
    }
}

impl Drop for JobRx {
    fn drop(&mut self) {
        // Jobs left behind are dropped outside the lock (a dropped reply
        // sender answers its waiter).
        let left = {
            let mut lanes = self.queue.lanes.lock();
            lanes.stopped = true;
            lanes.turn.clear();
            std::mem::take(&mut lanes.jobs)
        };
        drop(left);
    }
}

/// A cloneable handle for sending jobs to a domain thread, with what the
/// domain published at its last committed boundary.
#[derive(Clone)]
pub(crate) struct DomainSender {
    pub jobs: JobTx,
    pub committed: CommittedTx,
}

impl DomainSender {
    pub(crate) fn send(&self, job: Job) {
        // A stopped domain (server shutting down) drops the job, which drops
        // any reply sender and so answers the waiter.
        self.jobs.send(job);
    }

    /// Queues a session's request unless the session already has `cap`
    /// jobs waiting at this domain (SPEC §6, "Fair queues"); the request
    /// is handed back then.
    pub(crate) fn send_request(
        &self,
        job: Job,
        session: &Arc<str>,
        cap: usize,
    ) -> Result<(), Box<Job>> {
        self.jobs.send_capped(job, session, cap)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn drop_sub(session: &str, id: &str) -> Job {
        Job::DropSubscription {
            session_id: Arc::from(session),
            subscription_id: Arc::from(id),
        }
    }

    /// What a job is, for comparing orders.
    fn name(job: &Job) -> String {
        match job {
            Job::DropSubscription {
                session_id,
                subscription_id,
            } => format!("{session_id}{subscription_id}"),
            Job::Shutdown => "shutdown".into(),
            _ => "other".into(),
        }
    }

    /// Lanes are served in turn, one job each, each lane in its own order;
    /// the cap counts a session's waiting jobs; with every sender gone the
    /// thread is told, once the queue is empty; after the thread stops,
    /// jobs are dropped (a reply sender with them).
    #[test]
    fn lanes_take_turns_and_the_cap_counts_a_sessions_jobs() {
        let (tx, rx) = queue();
        for id in ["1", "2", "3"] {
            tx.send(drop_sub("a", id));
        }
        tx.send(drop_sub("b", "1"));
        tx.send(Job::Shutdown);
        let a: Arc<str> = Arc::from("a");
        let refused = tx.send_capped(drop_sub("a", "4"), &a, 3);
        assert!(refused.is_err(), "a has 3 waiting");
        assert!(tx.send_capped(drop_sub("a", "4"), &a, 4).is_ok());
        let second = tx.clone();
        drop(tx);
        let order: Vec<String> = (0..6)
            .map(|_| name(&rx.recv_timeout(Duration::from_secs(5)).unwrap()))
            .collect();
        assert_eq!(order, ["a1", "b1", "shutdown", "a2", "a3", "a4"]);
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(1)).err(),
            Some(RecvError::Timeout)
        );
        drop(second);
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)).err(),
            Some(RecvError::Disconnected)
        );

        let (tx, rx) = queue();
        drop(rx);
        let (reply, answer) = mpsc::channel();
        tx.send(Job::Instantiate { reply });
        assert!(answer.recv().is_err(), "the job was dropped with its reply");
    }
}
