//! The queue from the recording's callers (domain threads, the learner) to
//! the writer thread.
//!
//! A push appends under a lock and, most of the time, wakes nobody: the
//! writer is woken (one futex wake, 10–25 µs on the caller's side on a VM,
//! BENCHMARKS.md, "Vector envs and throughput") only by an event that must be written promptly
//! ([`Urgent`]; for the recorder's events: an episode's end, a reset, a
//! flush, a close, the stop), when [`WAKE_EVENTS`] wait, or when the writer sleeps idle (the
//! first event after a pause). Otherwise it takes what waits every
//! [`BATCH_WAIT`] at most. Before, the writer polled every 4 ms
//! (250 wake-ups a second and recorder, each a timer and a context
//! switch) and the queue was a `sync_channel`.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::time::Duration;

/// Events the queue holds before a caller waits.
pub const QUEUE_EVENTS: usize = 4096;

/// Events that wake the writer however many it is given time for
/// (a quarter of [`QUEUE_EVENTS`]: it drains them long before callers wait).
pub(crate) const WAKE_EVENTS: usize = QUEUE_EVENTS / 4;

/// How long a busy writer sleeps at most before it takes what waits (a
/// bound on the memory that waiting events hold, a few thousand env steps,
/// and on how long an event waits when nothing urgent comes); an idle one
/// (it found nothing at its last look) sleeps until an event comes.
pub(crate) const BATCH_WAIT: Duration = Duration::from_millis(50);

/// What the queue carries: each item says whether the writer must be woken
/// for it at once.
pub(crate) trait Urgent {
    /// Whether it is written promptly (see the module docs).
    fn is_urgent(&self) -> bool;
}

/// The queue's state, under its lock.
struct State<T> {
    events: VecDeque<T>,
    /// An urgent event (or [`WAKE_EVENTS`]) waits: the writer takes the
    /// queue as soon as it looks.
    due: bool,
    /// The writer sleeps on `ready`.
    parked: bool,
    /// It sleeps until any event comes (found nothing at its last look).
    idle: bool,
    /// It was notified and has not woken yet (one wake is enough).
    woken: bool,
    /// Callers waiting for room.
    waiting: usize,
    /// The writer is gone: pushes are dropped.
    closed: bool,
}

/// A bounded queue with one consumer (the writer thread).
pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    /// The writer waits here.
    ready: Condvar,
    /// Callers wait here for room.
    room: Condvar,
    /// [`BATCH_WAIT`] (longer in tests).
    batch_wait: Duration,
}

/// What [`Queue::push`] did.
pub(crate) enum Pushed<T> {
    Queued,
    /// Queued after waiting for room.
    Waited,
    /// The queue was full ([`Queue::try_push`]): the event back.
    Full(T),
    /// The writer is gone: dropped.
    Closed,
}

impl<T: Urgent> Queue<T> {
    pub(crate) fn new() -> Queue<T> {
        Queue::with_wait(BATCH_WAIT)
    }

    /// A queue whose busy writer sleeps at most `batch_wait`.
    fn with_wait(batch_wait: Duration) -> Queue<T> {
        Queue {
            batch_wait,
            state: Mutex::new(State {
                events: VecDeque::with_capacity(WAKE_EVENTS),
                due: false,
                parked: false,
                idle: false,
                woken: false,
                waiting: 0,
                closed: false,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
        }
    }

    /// Appends `event`; with `wait`, waits for room when the queue is full,
    /// otherwise gives it back.
    fn push_inner(&self, event: T, wait: bool) -> Pushed<T> {
        let urgent = event.is_urgent();
        let mut s = self.state.lock();
        let mut waited = false;
        while s.events.len() >= QUEUE_EVENTS && !s.closed {
            if !wait {
                return Pushed::Full(event);
            }
            waited = true;
            s.waiting += 1;
            self.room.wait(&mut s);
            s.waiting -= 1;
        }
        if s.closed {
            return Pushed::Closed;
        }
        s.events.push_back(event);
        if urgent || s.events.len() >= WAKE_EVENTS {
            s.due = true;
        }
        let wake = s.parked && !s.woken && (s.due || s.idle);
        if wake {
            s.woken = true;
        }
        drop(s);
        if wake {
            self.ready.notify_one();
        }
        if waited {
            Pushed::Waited
        } else {
            Pushed::Queued
        }
    }

    /// Appends `event`, waiting for room while the queue is full.
    pub(crate) fn push(&self, event: T) -> Pushed<T> {
        self.push_inner(event, true)
    }

    /// Appends `event` if there is room.
    pub(crate) fn try_push(&self, event: T) -> Pushed<T> {
        self.push_inner(event, false)
    }

    /// The writer's side: waits until events are due (or [`BATCH_WAIT`]
    /// passed with events waiting), then moves them all into `batch`.
    /// `busy`: whether the writer took events at its last call (it then
    /// sleeps at most [`BATCH_WAIT`]; otherwise until an event comes).
    /// Returns whether it took any.
    pub(crate) fn take(&self, batch: &mut VecDeque<T>, busy: bool) -> bool {
        let mut s = self.state.lock();
        let mut busy = busy;
        loop {
            if s.due && !s.events.is_empty() {
                break;
            }
            s.parked = true;
            if busy {
                s.idle = false;
                let timed_out = self.ready.wait_for(&mut s, self.batch_wait).timed_out();
                s.parked = false;
                s.woken = false;
                if timed_out {
                    if s.events.is_empty() {
                        // Nothing came: sleep until something does.
                        busy = false;
                        continue;
                    }
                    break;
                }
            } else if !s.events.is_empty() {
                // Events wait, none due: give them time to gather.
                s.parked = false;
                busy = true;
            } else {
                s.idle = true;
                self.ready.wait(&mut s);
                s.parked = false;
                s.woken = false;
                s.idle = false;
                // Woken by the first event: gather the next ones.
                busy = true;
            }
        }
        s.parked = false;
        s.woken = false;
        s.due = false;
        let took = !s.events.is_empty();
        std::mem::swap(batch, &mut s.events);
        if s.waiting > 0 {
            self.room.notify_all();
        }
        took
    }

    /// The writer is gone: drops what waits, wakes callers waiting for room
    /// and drops what comes later.
    pub(crate) fn close(&self) {
        let dropped = {
            let mut s = self.state.lock();
            s.closed = true;
            std::mem::take(&mut s.events)
        };
        self.room.notify_all();
        drop(dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// An event: whether it ends an episode.
    struct Step(bool);

    impl Urgent for Step {
        fn is_urgent(&self) -> bool {
            self.0
        }
    }

    fn step(done: bool) -> Step {
        Step(done)
    }

    /// Waits until the writer sleeps on `ready`, `idle` or not.
    fn parked(q: &Queue<Step>, idle: bool) {
        loop {
            {
                let s = q.state.lock();
                if s.parked && s.idle == idle && !s.woken {
                    return;
                }
            }
            std::thread::yield_now();
        }
    }

    /// A busy writer is not woken by steps, only by an episode's end; an
    /// idle one by the first event; and it takes everything queued.
    #[test]
    fn only_episode_ends_wake_a_busy_writer() {
        // (no timeout in the test's time: only wakes end the wait)
        let q = Arc::new(Queue::with_wait(Duration::from_secs(3600)));
        let writer = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut batch = VecDeque::new();
                // Idle: woken by the first event, then gathers events until
                // one is due or BATCH_WAIT passed.
                assert!(q.take(&mut batch, false));
                batch.len()
            })
        };
        parked(&q, true);
        assert!(matches!(q.push(step(false)), Pushed::Queued));
        // The idle writer was woken; it sleeps again, busy.
        parked(&q, false);
        assert!(!q.state.lock().due);
        for _ in 0..10 {
            q.push(step(false));
            let s = q.state.lock();
            assert!(
                !s.woken && !s.due,
                "a step that ends nothing woke the writer"
            );
        }
        // The episode's end wakes it (nothing else would, within the hour):
        // it takes the twelve events in one batch.
        q.push(step(true));
        assert_eq!(writer.join().unwrap(), 12);
        assert!(q.state.lock().events.is_empty());
    }

    /// [`WAKE_EVENTS`] waiting events wake the writer; a full queue makes
    /// `try_push` give the event back; after `close` pushes are dropped.
    #[test]
    fn many_events_are_due_and_a_full_queue_refuses() {
        let q = Queue::new();
        for i in 0..QUEUE_EVENTS {
            assert!(matches!(q.try_push(step(false)), Pushed::Queued));
            assert_eq!(q.state.lock().due, i + 1 >= WAKE_EVENTS);
        }
        assert!(matches!(q.try_push(step(false)), Pushed::Full(_)));
        let mut batch = VecDeque::new();
        assert!(q.take(&mut batch, true));
        assert_eq!(batch.len(), QUEUE_EVENTS);
        q.close();
        assert!(matches!(q.push(step(true)), Pushed::Closed));
    }
}
