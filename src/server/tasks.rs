//! The server's connection tasks, tracked so that shutdown can wait for them
//! (and abort the ones still running at its deadline) instead of leaving
//! them detached.

use parking_lot::Mutex;
use std::future::Future;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// A set of running tasks: each WebSocket connection (from its handshake to
/// the end of its session) and each in-memory session.
#[derive(Default)]
pub(crate) struct Tasks {
    set: Mutex<JoinSet<()>>,
}

impl Tasks {
    /// Spawns a tracked task on the current runtime. Finished tasks are
    /// reaped here, so the set holds only running ones (plus those that
    /// finished since the last spawn).
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut set = self.set.lock();
        while set.try_join_next().is_some() {}
        set.spawn(task);
    }

    /// Tasks not yet reaped (running, or finished since the last spawn).
    pub fn len(&self) -> usize {
        let mut set = self.set.lock();
        while set.try_join_next().is_some() {}
        set.len()
    }

    /// Aborts every task still running and waits, until `deadline`, for all
    /// of them to end. Returns how many were still running when aborted and
    /// how many had not ended by the deadline (a task aborted while its
    /// blocking work runs ends at its next await).
    pub async fn abort_all(&self, deadline: Instant) -> (usize, usize) {
        let mut set = std::mem::take(&mut *self.set.lock());
        while set.try_join_next().is_some() {}
        let aborted = set.len();
        set.abort_all();
        while !set.is_empty() {
            match tokio::time::timeout_at(deadline, set.join_next()).await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                // Dropping the set detaches what is left (already aborted).
                Err(_) => return (aborted, set.len()),
            }
        }
        (aborted, 0)
    }
}
