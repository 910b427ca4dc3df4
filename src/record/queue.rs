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
//!
//! The queue is bounded twice: by [`QUEUE_EVENTS`] events and by a budget
//! of bytes (what the events hold, [`Urgent::bytes`], counted from the push
//! until the writer is done with the event, not only while it waits in the
//! queue). A push that would go past either bound waits for room (or is
//! refused, [`Queue::try_push`]); one event larger than the whole budget is
//! taken when nothing else is held, so it never waits for ever. After a
//! burst, the writer gives the memory back: the queue's buffers shrink and,
//! with glibc, freed pages return to the OS (`malloc_trim`).

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::time::Duration;

/// Events the queue holds before a caller waits.
pub const QUEUE_EVENTS: usize = 4096;

/// Events that wake the writer however many it is given time for
/// (a quarter of [`QUEUE_EVENTS`]: it drains them long before callers wait).
pub(crate) const WAKE_EVENTS: usize = QUEUE_EVENTS / 4;

/// The default byte budget (256 MiB): [`ServerConfig::record_queue_bytes`](crate::server::ServerConfig::record_queue_bytes).
pub const DEFAULT_QUEUE_BYTES: usize = 256 << 20;

/// Bytes held after which, once the writer has drained them, it gives
/// memory back to the OS (a burst).
const TRIM_AFTER_BYTES: usize = 16 << 20;

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
    /// The bytes it holds, counted against the queue's byte budget.
    fn bytes(&self) -> usize;
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
    /// Bytes of the events pushed and not yet released by the writer
    /// ([`Queue::release`]): those waiting and those being written.
    held: usize,
    /// The most `held` reached since the writer last gave memory back.
    peak: usize,
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
    /// The byte budget.
    budget: usize,
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
    /// A queue of at most `budget` bytes (and [`QUEUE_EVENTS`] events).
    pub(crate) fn new(budget: usize) -> Queue<T> {
        Queue::with_wait(BATCH_WAIT, budget)
    }

    /// A queue whose busy writer sleeps at most `batch_wait`.
    fn with_wait(batch_wait: Duration, budget: usize) -> Queue<T> {
        Queue {
            batch_wait,
            budget: budget.max(1),
            state: Mutex::new(State {
                events: VecDeque::with_capacity(WAKE_EVENTS),
                due: false,
                parked: false,
                idle: false,
                woken: false,
                waiting: 0,
                closed: false,
                held: 0,
                peak: 0,
            }),
            ready: Condvar::new(),
            room: Condvar::new(),
        }
    }

    /// Appends `event`; with `wait`, waits for room when the queue is full,
    /// otherwise gives it back.
    fn push_inner(&self, event: T, wait: bool) -> Pushed<T> {
        let urgent = event.is_urgent();
        let bytes = event.bytes();
        let mut s = self.state.lock();
        let mut waited = false;
        let full = |s: &State<T>| {
            s.events.len() >= QUEUE_EVENTS
                || (s.held > 0 && s.held.saturating_add(bytes) > self.budget)
        };
        while full(&s) && !s.closed {
            if !wait {
                return Pushed::Full(event);
            }
            waited = true;
            s.waiting += 1;
            // The writer is told to take what waits now: room comes only
            // from its work.
            if !s.events.is_empty() && !s.due {
                s.due = true;
                if s.parked && !s.woken {
                    s.woken = true;
                    self.ready.notify_one();
                }
            }
            self.room.wait(&mut s);
            s.waiting -= 1;
        }
        if s.closed {
            return Pushed::Closed;
        }
        s.events.push_back(event);
        s.held += bytes;
        s.peak = s.peak.max(s.held);
        if urgent || s.events.len() >= WAKE_EVENTS || s.held >= self.budget / 4 {
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

    /// The writer is done with an event of `bytes` bytes (written, or
    /// dropped): its room goes to callers waiting for it.
    pub(crate) fn release(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let mut s = self.state.lock();
        s.held = s.held.saturating_sub(bytes);
        if s.waiting > 0 {
            self.room.notify_all();
        }
    }

    /// Bytes held now, and the most held since the writer last gave
    /// memory back.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.held, s.peak)
    }

    /// The writer's side, after a batch: when a burst has drained (nothing
    /// held, after more than [`TRIM_AFTER_BYTES`]), shrinks the queue's
    /// buffers and `batch`, and returns freed heap pages to the OS. Whether
    /// it did.
    pub(crate) fn give_back(&self, batch: &mut VecDeque<T>) -> bool {
        {
            let mut s = self.state.lock();
            if s.held > 0 || s.peak < TRIM_AFTER_BYTES {
                return false;
            }
            s.peak = 0;
            s.events.shrink_to(WAKE_EVENTS);
        }
        batch.shrink_to(WAKE_EVENTS);
        trim_heap();
        true
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

/// Returns the heap's free pages to the OS (glibc keeps them otherwise:
/// a burst of large transitions would stay resident after it drained).
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only walks glibc's own heap under its locks;
    // it takes no pointer from us.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// An event: whether it ends an episode, and its bytes.
    struct Step(bool, usize);

    impl Urgent for Step {
        fn is_urgent(&self) -> bool {
            self.0
        }
        fn bytes(&self) -> usize {
            self.1
        }
    }

    fn step(done: bool) -> Step {
        Step(done, 8)
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
        let q = Arc::new(Queue::with_wait(
            Duration::from_secs(3600),
            DEFAULT_QUEUE_BYTES,
        ));
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
        let q = Queue::new(DEFAULT_QUEUE_BYTES);
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

    /// A slow writer (it takes one event at a time and is let go one event
    /// at a time): callers pushing large events wait for room, the bytes
    /// held never pass the budget, and every wait is a `Waited`. One event
    /// larger than the budget is taken alone.
    #[test]
    fn the_byte_budget_holds_under_a_slow_writer() {
        const BUDGET: usize = 10_000;
        let q = Arc::new(Queue::<Step>::with_wait(Duration::from_millis(1), BUDGET));
        let (go, gate) = std::sync::mpsc::channel::<()>();
        let writer = {
            let q = q.clone();
            std::thread::spawn(move || {
                let mut batch = VecDeque::new();
                let mut written = 0;
                let mut busy = false;
                while written < 200 {
                    busy = q.take(&mut batch, busy);
                    while let Some(event) = batch.pop_front() {
                        // The gate: the writer is as slow as the test says.
                        gate.recv().unwrap();
                        let (held, _) = q.held();
                        assert!(held <= BUDGET, "{held} bytes held");
                        q.release(event.bytes());
                        written += 1;
                    }
                }
            })
        };
        let callers: Vec<_> = (0..4)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut waits = 0;
                    for _ in 0..50 {
                        if let Pushed::Waited = q.push(Step(false, 3_000)) {
                            waits += 1;
                        }
                        let (held, peak) = q.held();
                        assert!(held <= BUDGET && peak <= BUDGET, "{held} / {peak}");
                    }
                    waits
                })
            })
            .collect();
        // Three events fit; the fourth caller waits until one is written.
        while q.state.lock().waiting == 0 {
            std::thread::yield_now();
        }
        for _ in 0..200 {
            go.send(()).unwrap();
        }
        let waits: usize = callers.into_iter().map(|c| c.join().unwrap()).sum();
        writer.join().unwrap();
        assert!(waits > 0, "no caller waited for room");
        let (held, peak) = q.held();
        assert_eq!(held, 0);
        assert!(peak <= BUDGET, "peak {peak}");
        // Alone, an event over the whole budget is taken (nothing waits
        // for ever); a second one is not, until the first is released.
        assert!(matches!(
            q.try_push(Step(false, 3 * BUDGET)),
            Pushed::Queued
        ));
        assert!(matches!(q.try_push(Step(false, 1)), Pushed::Full(_)));
        q.release(3 * BUDGET);
        assert!(matches!(q.try_push(Step(false, 1)), Pushed::Queued));
    }

    /// After a burst has drained, the writer shrinks the queue's buffers.
    #[test]
    fn memory_is_given_back_after_a_burst() {
        let q = Queue::<Step>::new(DEFAULT_QUEUE_BYTES);
        for _ in 0..QUEUE_EVENTS {
            q.push(Step(false, TRIM_AFTER_BYTES / 1000));
        }
        let mut batch = VecDeque::new();
        assert!(q.take(&mut batch, true));
        // Still held: nothing is given back while the writer works.
        assert!(!q.give_back(&mut batch));
        let n = batch.len();
        while let Some(e) = batch.pop_front() {
            q.release(e.bytes());
        }
        assert_eq!(n, QUEUE_EVENTS);
        assert!(batch.capacity() >= QUEUE_EVENTS);
        assert!(q.give_back(&mut batch));
        assert!(batch.capacity() < QUEUE_EVENTS);
        assert_eq!(q.held(), (0, 0));
    }
}
