//! Pump mode: the domain threads queue callback invocations here and wait;
//! the engine's thread runs them in `unienv_server_poll`.

use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// One queued callback invocation (it sends its own result back).
pub(crate) type Task = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queue {
    tasks: VecDeque<Task>,
    closed: bool,
}

/// The queue between the domain threads and the thread that polls.
#[derive(Default)]
pub(crate) struct Pump {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Pump {
    /// Queues `task`; gives it back when the pump is closed.
    pub(crate) fn submit(&self, task: Task) -> Result<(), Task> {
        let mut q = self.queue.lock();
        if q.closed {
            return Err(task);
        }
        q.tasks.push_back(task);
        drop(q);
        self.ready.notify_one();
        Ok(())
    }

    /// Waits up to `timeout` (`None`: without limit) for a queued task, then
    /// runs every task queued by then, in arrival order, on this thread.
    /// Returns how many ran.
    pub(crate) fn run(&self, timeout: Option<Duration>) -> usize {
        let deadline = timeout.map(|t| Instant::now() + t);
        let batch = {
            let mut q = self.queue.lock();
            while q.tasks.is_empty() && !q.closed {
                match deadline {
                    None => self.ready.wait(&mut q),
                    Some(d) => {
                        if self.ready.wait_until(&mut q, d).timed_out() {
                            break;
                        }
                    }
                }
            }
            std::mem::take(&mut q.tasks)
        };
        let n = batch.len();
        for task in batch {
            // A task only calls C and sends its result; should anything of
            // ours panic, its sender is dropped and the domain reports an
            // execution error.
            let _ = catch_unwind(AssertUnwindSafe(task));
        }
        n
    }

    /// Refuses new tasks and drops the queued ones (their callers see an
    /// error).
    pub(crate) fn close(&self) {
        let dropped = {
            let mut q = self.queue.lock();
            q.closed = true;
            std::mem::take(&mut q.tasks)
        };
        drop(dropped);
        self.ready.notify_all();
    }
}
