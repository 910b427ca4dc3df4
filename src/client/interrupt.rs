//! Interrupting the blocking client's waits (Ctrl-C in a host language).
//!
//! A blocking call ([`blocking`](super::blocking), the blocking vector env)
//! waits on a tokio runtime. A thread that installs a check with
//! [`with_check`] has every such wait consult it every [`SLICE`]; when the
//! check says so, the wait stops: the request's future is dropped — for a
//! mutation in flight that closes the connection, exactly as a timeout does,
//! since its outcome is now unknown — and the call returns
//! [`ClientError::Interrupted`]. Threads without a check wait as before, at
//! no cost. The Python package installs `PyErr_CheckSignals` as the check on
//! the main thread, so that Ctrl-C raises `KeyboardInterrupt` within a slice.

use super::{ClientError, ClientResult};
use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

/// How often an interruptible wait consults its check.
pub const SLICE: Duration = Duration::from_millis(50);

/// A check: `true` stops the wait.
type Check = Box<dyn FnMut() -> bool>;

thread_local! {
    static CHECK: RefCell<Option<Check>> = const { RefCell::new(None) };
}

/// Runs `f` with `check` consulted by every blocking wait it makes on this
/// thread (the previous check, if any, is restored afterwards).
pub fn with_check<R>(check: impl FnMut() -> bool + 'static, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Check>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CHECK.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CHECK.with(|c| c.borrow_mut().replace(Box::new(check)));
    let _restore = Restore(previous);
    f()
}

/// Whether this thread has a check installed.
pub fn installed() -> bool {
    CHECK.with(|c| c.borrow().is_some())
}

/// Consults this thread's check (false without one): for loops of short
/// waits, which a check between them interrupts.
pub fn interrupted() -> bool {
    CHECK.with(|c| c.borrow_mut().as_mut().is_some_and(|check| check()))
}

/// A wait's result when it was interrupted.
pub trait Interruptible {
    /// The value returned instead of the interrupted wait's.
    fn interrupted() -> Self;
}

impl<T> Interruptible for ClientResult<T> {
    fn interrupted() -> Self {
        Err(ClientError::Interrupted)
    }
}

impl<T> Interruptible for Result<T, super::vector::VectorError> {
    fn interrupted() -> Self {
        Err(super::vector::VectorError::Interrupted)
    }
}

impl Interruptible for () {
    fn interrupted() -> Self {}
}

/// A slice timer kept from one wait to the next (see [`block_on_reusing`]).
pub(crate) type Slice = Option<std::pin::Pin<Box<tokio::time::Sleep>>>;

/// Drives `future` on `runtime` from this thread; with a check installed,
/// stops when it says so (see the module's documentation).
pub fn block_on<F>(runtime: &tokio::runtime::Runtime, future: F) -> F::Output
where
    F: Future,
    F::Output: Interruptible,
{
    block_on_reusing(runtime, &mut None, future)
}

/// [`block_on`], timing the slices with `slice`'s timer (made on first
/// use, kept for the next wait on the same runtime). A timer registered anew
/// for every wait costs the runtime a wake-up (an `eventfd` write, and a
/// return from `epoll_wait`) whenever its deadline is the earliest; pushing
/// a registered timer's deadline later costs nothing.
pub(crate) fn block_on_reusing<F>(
    runtime: &tokio::runtime::Runtime,
    slice: &mut Slice,
    future: F,
) -> F::Output
where
    F: Future,
    F::Output: Interruptible,
{
    if !installed() {
        return runtime.block_on(future);
    }
    runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + SLICE;
        let sleep = match slice {
            Some(sleep) => {
                sleep.as_mut().reset(deadline);
                sleep
            }
            None => slice.insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        tokio::pin!(future);
        loop {
            tokio::select! {
                biased;
                out = &mut future => return out,
                _ = sleep.as_mut() => {
                    if interrupted() {
                        return F::Output::interrupted();
                    }
                    sleep.as_mut().reset(tokio::time::Instant::now() + SLICE);
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_stops_a_wait_and_is_restored_after() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut asked = 0;
        let (tx, rx) = std::sync::mpsc::channel();
        let out: ClientResult<()> = with_check(
            move || {
                let _ = tx.send(());
                true
            },
            || block_on(&runtime, std::future::pending()),
        );
        assert!(matches!(out, Err(ClientError::Interrupted)));
        while rx.try_recv().is_ok() {
            asked += 1;
        }
        assert_eq!(asked, 1);
        assert!(!installed());
        // Without a check, a finished future is returned as it is.
        let out: ClientResult<u8> = block_on(&runtime, async { Ok(3) });
        assert_eq!(out.unwrap(), 3);
    }

    #[test]
    fn a_kept_slice_timer_still_interrupts_the_next_waits() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let mut slice: Slice = None;
        let asked = std::rc::Rc::new(std::cell::Cell::new(0));
        let seen = asked.clone();
        with_check(
            move || {
                seen.set(seen.get() + 1);
                true
            },
            || {
                // A wait that ends at once makes the timer and keeps it.
                let out: ClientResult<u8> = block_on_reusing(&runtime, &mut slice, async { Ok(1) });
                assert_eq!(out.unwrap(), 1);
                assert!(slice.is_some());
                // The next waits reuse it (pushed later) and are interrupted
                // after a slice, also once its first deadline has passed.
                for _ in 0..2 {
                    let out: ClientResult<()> =
                        block_on_reusing(&runtime, &mut slice, std::future::pending());
                    assert!(matches!(out, Err(ClientError::Interrupted)));
                }
            },
        );
        assert_eq!(asked.get(), 2);
    }
}
