//! The blocking client's runtime driver.

use crate::client::{ClientError, ClientResult, ConnectFailure};
use parking_lot::{Condvar, Mutex};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a connection may go without calls before the idle driver
/// thread services it.
const IDLE_AFTER: Duration = Duration::from_millis(200);

/// A current-thread runtime, driven by the threads that call into it (so a
/// request costs no thread handoff on the client side: the caller's thread
/// runs the writer and reader tasks itself) and, after [`IDLE_AFTER`] without
/// calls, by an idle driver thread, so that the connection keeps answering
/// pings, receiving snapshots and noticing closure between calls. A call
/// arriving while the idle driver runs takes the runtime back from it.
pub(crate) struct Driver {
    runtime: Option<tokio::runtime::Runtime>,
    state: Mutex<DriverState>,
    wake: Condvar,
    kick: tokio::sync::Notify,
    /// [`IDLE_AFTER`], but in tests.
    idle_after: Duration,
    /// The interruptible waits' slice timer, kept between calls.
    slice: Mutex<crate::client::interrupt::Slice>,
}

pub(crate) struct DriverState {
    calls: usize,
    idling: bool,
    last_call: Instant,
    stop: bool,
}

impl Driver {
    pub(crate) fn new() -> ClientResult<Arc<Driver>> {
        Driver::with_idle_after(IDLE_AFTER)
    }

    /// A driver whose idle thread takes over after `idle_after` without
    /// calls (tests: a very long one keeps it out of the way).
    pub(crate) fn with_idle_after(idle_after: Duration) -> ClientResult<Arc<Driver>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                ClientError::Connect(ConnectFailure::Runtime {
                    what: " runtime",
                    detail: e.to_string(),
                })
            })?;
        Ok(Arc::new(Driver {
            runtime: Some(runtime),
            state: Mutex::new(DriverState {
                calls: 0,
                idling: false,
                last_call: Instant::now(),
                stop: false,
            }),
            wake: Condvar::new(),
            kick: tokio::sync::Notify::new(),
            idle_after,
            slice: Mutex::new(None),
        }))
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        match &self.runtime {
            Some(rt) => rt,
            None => unreachable!("the runtime is only taken when the driver is dropped"),
        }
    }

    pub(crate) fn block_on<F>(&self, future: F) -> F::Output
    where
        F: Future,
        F::Output: crate::client::interrupt::Interruptible,
    {
        struct Call<'a>(&'a Driver);
        impl Drop for Call<'_> {
            fn drop(&mut self) {
                let mut st = self.0.state.lock();
                st.calls -= 1;
                st.last_call = Instant::now();
            }
        }
        {
            let mut st = self.state.lock();
            st.calls += 1;
            if st.idling {
                self.kick.notify_one();
            }
        }
        let _call = Call(self);
        if !crate::client::interrupt::installed() {
            return self.runtime().block_on(future);
        }
        // Another thread waiting at the same time makes its own timer.
        let mut slice = self.slice.lock().take();
        let out = crate::client::interrupt::block_on_reusing(self.runtime(), &mut slice, future);
        *self.slice.lock() = slice;
        out
    }

    /// The idle driver thread's loop.
    pub(crate) fn idle(&self) {
        loop {
            {
                let mut st = self.state.lock();
                loop {
                    if st.stop {
                        return;
                    }
                    let quiet = st.last_call.elapsed();
                    if st.calls == 0 && quiet >= self.idle_after {
                        break;
                    }
                    let wait = if st.calls > 0 {
                        self.idle_after
                    } else {
                        self.idle_after.saturating_sub(quiet)
                    };
                    self.wake.wait_for(&mut st, wait);
                }
                st.idling = true;
            }
            self.runtime().block_on(self.kick.notified());
            self.state.lock().idling = false;
        }
    }

    pub(crate) fn stop(&self) {
        let mut st = self.state.lock();
        st.stop = true;
        if st.idling {
            self.kick.notify_one();
        }
        self.wake.notify_all();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The timer goes before its runtime.
        drop(self.slice.lock().take());
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
