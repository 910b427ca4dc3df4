//! Requests awaiting their replies: who waits for each (a task, or a sink
//! the reply is handed to as it arrives), and the deadlines of those that
//! no task times.
//!
//! A request sent by [`Shared::request`](super::shared::Shared::request) is
//! awaited by its caller's task, through a oneshot channel, under a timer of
//! its own. A vector env's step of many single envs instead hands each reply
//! to a [`ReplySink`] from the reader task: no task, channel or timer per
//! request. Those requests' deadlines are kept here, in the order they were
//! sent, and one task per connection ([`watch_deadlines`]) sleeps until the
//! earliest: a request still unanswered then fails as the timer would have
//! failed it ([`ClientError::Timeout`], the connection closed because of it;
//! see [`Deadlines`]).

use super::error::ClientError;
use crate::codec::Dict;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::{oneshot, watch, Notify};
use tokio::time::Instant;

/// A request's reply as the reader hands it on: the response message (its
/// `result` at least), or why none will come.
pub(crate) type Reply = Result<Dict, ClientError>;

/// Where replies go when no task awaits them. Called from the connection's
/// reader task with no lock of the connection held, once per request: with
/// the reply, or with the connection's failure when it closes first.
pub(crate) trait ReplySink: Send + Sync {
    /// Takes the reply of the request registered with `tag`.
    fn deliver(&self, tag: usize, reply: Reply);
}

/// Who waits for a request's reply.
pub(crate) enum Waiter {
    /// The task that sent it ([`Shared::request`](super::shared::Shared::request)).
    Task(oneshot::Sender<Reply>),
    /// A sink, told which request by its tag.
    Sink(Arc<dyn ReplySink>, usize),
}

impl Waiter {
    /// Hands the reply on (to a task that is gone: dropped).
    pub(crate) fn send(self, reply: Reply) {
        match self {
            Waiter::Task(tx) => {
                let _ = tx.send(reply);
            }
            Waiter::Sink(sink, tag) => sink.deliver(tag, reply),
        }
    }
}

/// The requests of a connection awaiting replies, by request ID, and the
/// deadlines of those handed to sinks.
#[derive(Default)]
pub(crate) struct Pending {
    waiters: HashMap<u64, Waiter, rustc_hash::FxBuildHasher>,
    /// `(deadline, request ID, timeout)` of sink requests, in the order
    /// they were sent; answered ones are dropped from the front as new ones
    /// come, and skipped by the watch.
    deadlines: VecDeque<(Instant, u64, Duration)>,
    /// The deadline the watch sleeps until (`None`: it sleeps until told).
    armed: Option<Instant>,
}

impl Pending {
    /// Registers a request's waiter.
    pub(crate) fn insert(&mut self, id: u64, waiter: Waiter) {
        self.waiters.insert(id, waiter);
    }

    /// Takes a request's waiter: its reply arrived, or it is abandoned.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Waiter> {
        self.waiters.remove(&id)
    }

    /// Takes every waiter (the connection is closing).
    pub(crate) fn drain(&mut self) -> Vec<Waiter> {
        self.deadlines.clear();
        self.armed = None;
        self.waiters.drain().map(|(_, w)| w).collect()
    }

    /// Records the deadline of sink request `id`, `timeout` from now.
    /// Returns whether the watch must be told (it sleeps until a later
    /// deadline, or none).
    pub(crate) fn time(&mut self, id: u64, timeout: Duration) -> bool {
        // Answered requests leave from the front (replies come about in
        // the order of their requests): the queue holds about those in
        // flight.
        while let Some(&(_, front, _)) = self.deadlines.front() {
            if self.waiters.contains_key(&front) {
                break;
            }
            self.deadlines.pop_front();
        }
        // One request unanswered for long keeps those behind it: compacted
        // when most are answered (amortised over the pushes since).
        if self.deadlines.len() > 2 * self.waiters.len() + 64 {
            let waiters = &self.waiters;
            self.deadlines.retain(|(_, id, _)| waiters.contains_key(id));
        }
        let deadline = Instant::now() + timeout;
        self.deadlines.push_back((deadline, id, timeout));
        if self.armed.is_some_and(|a| a <= deadline) {
            return false;
        }
        self.armed = Some(deadline);
        true
    }

    /// At `now`: the first sink request past its deadline and still
    /// unanswered, taken out with its waiter and timeout; otherwise the
    /// next deadline to sleep until (`None`: none), which is armed.
    pub(crate) fn expire(&mut self, now: Instant) -> Result<Option<Instant>, (Waiter, Duration)> {
        let waiters = &self.waiters;
        self.deadlines.retain(|(_, id, _)| waiters.contains_key(id));
        if let Some(k) = self.deadlines.iter().position(|(d, _, _)| *d <= now) {
            if let Some((_, id, timeout)) = self.deadlines.remove(k) {
                if let Some(waiter) = self.waiters.remove(&id) {
                    return Err((waiter, timeout));
                }
            }
        }
        self.armed = self.deadlines.iter().map(|(d, _, _)| *d).min();
        Ok(self.armed)
    }

    /// Sink requests whose deadlines are kept (tests).
    #[cfg(test)]
    pub(crate) fn timed(&self) -> usize {
        self.deadlines.len()
    }
}

/// A connection whose sink requests [`watch_deadlines`] times.
pub(crate) trait Deadlines: Send + Sync {
    /// At `now`: fails the first sink request past its deadline, as its own
    /// timer would have, and closes the connection (`None`); otherwise the
    /// next deadline to sleep until (`Some(None)`: none).
    fn expire_deadlines(&self, now: Instant) -> Option<Option<Instant>>;
}

/// The task that fails sink requests at their deadlines (see the module's
/// documentation). `rearm` is notified when an earlier deadline is recorded.
pub(crate) async fn watch_deadlines<C: Deadlines>(
    connection: Weak<C>,
    rearm: Arc<Notify>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let next = match connection
            .upgrade()
            .map(|c| c.expire_deadlines(Instant::now()))
        {
            Some(Some(next)) => next,
            // Gone, or closed by a timeout.
            _ => return,
        };
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => return,
            _ = rearm.notified() => {}
            _ = sleep => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Waiter {
        Waiter::Task(oneshot::channel().0)
    }

    #[test]
    fn the_earliest_deadline_is_armed_and_answered_requests_leave() {
        let mut p = Pending::default();
        let (long, short) = (Duration::from_secs(10), Duration::from_secs(1));
        for id in 1..=3 {
            p.insert(id, task());
        }
        assert!(p.time(1, long), "the first deadline arms the watch");
        assert!(!p.time(2, long), "a later one does not");
        assert!(p.time(3, short), "an earlier one does");
        // Request 1 is answered: it leaves the front when the next comes.
        assert!(p.remove(1).is_some());
        p.insert(4, task());
        assert!(!p.time(4, long));
        assert_eq!(p.timed(), 3);
        let now = Instant::now();
        let next = p.expire(now).ok().flatten().expect("a deadline");
        assert!(
            next > now && next <= now + short,
            "request 3's deadline is next"
        );
        match p.expire(now + 2 * short) {
            Err((Waiter::Task(_), after)) => assert_eq!(after, short),
            _ => panic!("request 3 is past its deadline"),
        }
        assert!(p.remove(3).is_none(), "taken out with its waiter");
        assert!(p.remove(2).is_some() && p.remove(4).is_some());
        assert_eq!(
            p.expire(now + 3 * long).ok(),
            Some(None),
            "nothing left to time"
        );
    }

    #[test]
    fn one_unanswered_request_does_not_keep_the_answered_ones() {
        let mut p = Pending::default();
        p.insert(0, task());
        p.time(0, Duration::from_secs(30));
        for id in 1..10_000 {
            p.insert(id, task());
            p.time(id, Duration::from_secs(30));
            assert!(p.remove(id).is_some());
            assert!(p.timed() <= 2 * 2 + 64 + 1, "{} kept", p.timed());
        }
        let drained = p.drain();
        assert_eq!((drained.len(), p.timed()), (1, 0));
    }
}
