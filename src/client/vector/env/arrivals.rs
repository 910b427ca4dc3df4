//! Step outcomes as they arrive: the reply sink of single envs' steps
//! ([`sink`](super::sink)) and the tasks that carry a vector env's other
//! requests deliver here, [`VectorEnv::step_wait`](super::VectorEnv::step_wait)
//! and [`VectorEnv::recv`](super::VectorEnv::recv) take from here.
//!
//! One task carries all the other resources of one `send` (their requests are
//! polled, hence queued on their connections, in one go, so the connection's
//! writer sends them with one write), and the waiting caller is woken once,
//! when enough sub-envs' results have arrived for it, not once per result.

use super::resource::{step_resource, Resource, Stepped};
use crate::client::{ClientError, CloseReason};
use crate::codec::Value;
use futures_util::stream::{FuturesUnordered, StreamExt};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use tokio::sync::Notify;

use crate::client::vector::AutoresetMode;

/// What a resource's step request came to.
pub(super) enum Outcome {
    /// One result per sub-env.
    Stepped(Stepped),
    /// The request failed: every sub-env of the resource failed with it.
    Failed(ClientError),
    /// Not sent: a sub-env of the resource failed earlier and was not reset.
    NotSent,
}

impl From<Result<Stepped, ClientError>> for Outcome {
    /// A request's result: its sub-envs' outcomes, or its failure.
    fn from(result: Result<Stepped, ClientError>) -> Outcome {
        match result {
            Ok(steps) => Outcome::Stepped(steps),
            Err(e) => Outcome::Failed(e),
        }
    }
}

/// Outcomes delivered and not yet taken, in arrival order.
#[derive(Default)]
struct Queue {
    outcomes: VecDeque<(usize, usize, Outcome)>,
    /// Sub-envs in `outcomes` (resources count their width).
    width: usize,
    /// How many sub-envs the waiting caller needs (`usize::MAX`: nobody
    /// waits).
    wanted: usize,
}

/// The outcomes shared by the request tasks and the vector env.
pub(super) struct Arrivals {
    queue: Mutex<Queue>,
    notify: Notify,
    /// Carrying tasks that have handed their requests to their
    /// connections' writers.
    started: AtomicU64,
    /// Woken when `started` grows.
    starting: Notify,
}

impl Arrivals {
    pub(super) fn new() -> Arc<Arrivals> {
        Arc::new(Arrivals {
            queue: Mutex::new(Queue {
                wanted: usize::MAX,
                ..Queue::default()
            }),
            notify: Notify::new(),
            started: AtomicU64::new(0),
            starting: Notify::new(),
        })
    }

    /// How many carrying tasks have handed their requests to the writers.
    pub(super) fn started(&self) -> u64 {
        self.started.load(Ordering::Acquire)
    }

    /// Waits until `count` carrying tasks have handed their requests to the
    /// writers (sleeping until told: no polling loop).
    pub(super) async fn wait_started(&self, count: u64) {
        // Usually so at once (this thread ran the tasks): no waiter needed.
        if self.started() >= count {
            return;
        }
        loop {
            let starting = self.starting.notified();
            tokio::pin!(starting);
            // Registered before the check: a start after it wakes us.
            starting.as_mut().enable();
            if self.started() >= count {
                return;
            }
            starting.await;
        }
    }

    /// Delivers resource `k`'s outcome (`width` sub-envs); wakes the caller
    /// when it now has what it waits for.
    pub(super) fn deliver(&self, k: usize, width: usize, outcome: Outcome) {
        let wake = {
            let mut q = self.queue.lock();
            q.outcomes.push_back((k, width, outcome));
            q.width += width;
            q.width >= q.wanted
        };
        if wake {
            self.notify.notify_one();
        }
    }

    /// Waits until at least `min` sub-envs' outcomes are here (the caller
    /// makes sure that many are on their way) and takes the first ones
    /// that make `min`, whole resources, in arrival order.
    pub(super) async fn take(&self, min: usize) -> Vec<(usize, Outcome)> {
        loop {
            {
                let mut q = self.queue.lock();
                if q.width >= min {
                    q.wanted = usize::MAX;
                    let mut out = Vec::new();
                    let mut taken = 0;
                    while taken < min {
                        let Some((k, w, o)) = q.outcomes.pop_front() else {
                            break;
                        };
                        taken += w;
                        out.push((k, o));
                    }
                    q.width -= taken;
                    return out;
                }
                q.wanted = min;
            }
            self.notify.notified().await;
        }
    }

    /// Forgets every outcome (the vector env is closing).
    pub(super) fn clear(&self) {
        let mut q = self.queue.lock();
        q.outcomes.clear();
        q.width = 0;
        q.wanted = usize::MAX;
    }
}

/// One resource's step to carry: its index, the resource, its action (a
/// batched resource's stacked) and which of its sub-envs to reset instead
/// (`NextStep`).
pub(super) struct Job {
    pub(super) k: usize,
    pub(super) resource: Resource,
    pub(super) action: Value,
    pub(super) ended: Vec<bool>,
}

/// Resources of a task whose outcome was not delivered: when the task ends
/// without delivering (it panicked, or was aborted), each fails as a lost
/// reply (uncertain: its request may have executed).
pub(super) struct Undelivered {
    arrivals: Arc<Arrivals>,
    /// By position in the task's jobs: the resource's index and width, until
    /// its outcome is delivered.
    left: Vec<Option<(usize, usize)>>,
}

impl Undelivered {
    /// A task's resources (index and width), none delivered yet.
    pub(super) fn new(arrivals: Arc<Arrivals>, left: Vec<(usize, usize)>) -> Undelivered {
        Undelivered {
            arrivals,
            left: left.into_iter().map(Some).collect(),
        }
    }

    /// Delivers the outcome of the job at `position` (once: a second
    /// delivery for the same job is ignored).
    pub(super) fn deliver(&mut self, position: usize, outcome: Outcome) {
        if let Some((k, width)) = self.left.get_mut(position).and_then(Option::take) {
            self.arrivals.deliver(k, width, outcome);
        }
    }
}

impl Drop for Undelivered {
    fn drop(&mut self) {
        for (k, width) in self.left.drain(..).flatten() {
            let error =
                ClientError::Uncertain(Box::new(ClientError::Closed(CloseReason::TaskEnded {
                    detail: "the task carrying the request ended before its reply".into(),
                })));
            self.arrivals.deliver(k, width, Outcome::Failed(error));
        }
    }
}

/// The task that carries `jobs`' requests: all of them are started in its
/// first poll, and each outcome is delivered as it arrives.
pub(super) async fn carry(arrivals: Arc<Arrivals>, jobs: Vec<Job>, mode: AutoresetMode) {
    let mut undelivered = Undelivered::new(
        arrivals.clone(),
        jobs.iter().map(|j| (j.k, j.resource.width())).collect(),
    );
    let mut requests: FuturesUnordered<_> = jobs
        .into_iter()
        .enumerate()
        .map(|(position, j)| {
            // Boxed, the set moves a pointer instead of the whole request's
            // future into its task (−1.7 % of a single-env learner's work).
            Box::pin(async move {
                let result = step_resource(j.resource, j.action, j.ended, mode).await;
                (position, result)
            })
        })
        .collect();
    let deliver = |undelivered: &mut Undelivered, (position, result)| {
        undelivered.deliver(position, Outcome::from(result));
    };
    // Every request's first poll queues its frame on its connection: poll
    // until all wait for replies (one finishing at once, e.g. on a closed
    // connection, must not keep the others from being queued), then count
    // this task as started.
    let mut first = Vec::new();
    std::future::poll_fn(|cx| {
        while let Poll::Ready(Some(done)) = requests.poll_next_unpin(cx) {
            first.push(done);
        }
        Poll::Ready(())
    })
    .await;
    arrivals.started.fetch_add(1, Ordering::AcqRel);
    arrivals.starting.notify_waiters();
    for done in first {
        deliver(&mut undelivered, done);
    }
    while let Some(done) = requests.next().await {
        deliver(&mut undelivered, done);
    }
}
