//! `unienv_remote._native.DialHandle`: a Python host dialing out to a relay
//! (the crate's [`Server::dial`](unienv_remote::server::Server::dial)), its status and stopping it.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::time::{Duration, Instant};
use unienv_remote::server::{DialHandle, DialOptions, DialState, Server};

/// Where a dialing host stands (`DialHandle.status()`).
#[pyclass(module = "unienv_remote._native", name = "DialStatus", frozen, get_all)]
pub struct PyDialStatus {
    /// `"connecting"`, `"registered"`, `"waiting"` or `"stopped"`.
    state: &'static str,
    /// The relay's URL.
    relay: String,
    /// The name registered (or asked for).
    name: String,
    /// Attempts since the last registration (the current one included).
    attempts: u64,
    /// Registrations so far (a re-dial after a loss counts again).
    registrations: u64,
    /// Tunnels opened for clients so far.
    tunnels: u64,
    /// The last failure (a refused registration, a lost connection).
    last_error: Option<String>,
    /// While waiting: seconds until the next attempt.
    retry_in: Option<f64>,
}

#[pymethods]
impl PyDialStatus {
    fn __repr__(&self) -> String {
        format!(
            "DialStatus(state={:?}, relay={:?}, name={:?}, registrations={}, tunnels={}, last_error={:?})",
            self.state, self.relay, self.name, self.registrations, self.tunnels, self.last_error
        )
    }
}

/// A server's dialing to one relay: re-dials after any loss until
/// `stop()` or the server closes.
#[pyclass(module = "unienv_remote._native", name = "DialHandle", frozen)]
pub struct PyDial {
    handle: DialHandle,
    runtime: tokio::runtime::Handle,
    /// Whether its server is closed: its dialing is then stopped, whatever
    /// its task last recorded before the runtime ended.
    server_closed: Box<dyn Fn() -> bool + Send + Sync>,
}

/// Seconds as a positive duration.
fn positive(value: f64, what: &str) -> PyResult<Duration> {
    if value.is_finite() && value > 0.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(PyValueError::new_err(format!(
            "{what} must be positive and finite (seconds), got {value}"
        )))
    }
}

/// `RemoteServer.dial`'s options.
pub(crate) fn options(
    name: &str,
    token: Option<String>,
    ca_file: Option<std::path::PathBuf>,
    (connect_timeout, initial_backoff, max_backoff): (f64, f64, f64),
) -> PyResult<DialOptions> {
    let mut options = DialOptions::new(name);
    options.token = token;
    options.ca_file = ca_file;
    options.connect_timeout = positive(connect_timeout, "connect_timeout")?;
    options.initial_backoff = positive(initial_backoff, "initial_backoff")?;
    options.max_backoff = positive(max_backoff, "max_backoff")?;
    Ok(options)
}

impl PyDial {
    /// Starts `server` (running on `runtime`) dialing `url`.
    pub(crate) fn start(
        server: &Server,
        runtime: &tokio::runtime::Runtime,
        url: &str,
        options: DialOptions,
        server_closed: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> PyResult<PyDial> {
        let _enter = runtime.enter();
        let handle = server
            .dial(url, options)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyDial {
            handle,
            runtime: runtime.handle().clone(),
            server_closed,
        })
    }

    fn state(&self) -> DialState {
        if (self.server_closed)() {
            DialState::Stopped
        } else {
            self.handle.status().state
        }
    }
}

fn state_name(state: DialState) -> &'static str {
    match state {
        DialState::Connecting => "connecting",
        DialState::Registered => "registered",
        DialState::Waiting => "waiting",
        _ => "stopped",
    }
}

#[pymethods]
impl PyDial {
    /// The current state.
    fn status(&self) -> PyDialStatus {
        let s = self.handle.status();
        PyDialStatus {
            state: state_name(self.state()),
            relay: s.relay,
            name: s.name,
            attempts: s.attempts,
            registrations: s.registrations,
            tunnels: s.tunnels,
            last_error: s.last_error,
            retry_in: s.retry_in.map(|d| d.as_secs_f64()),
        }
    }

    /// Waits until registered (now or later; at most `timeout` seconds,
    /// `None`: without limit), the GIL released; whether it is (false at
    /// the timeout or once stopped). Ctrl-C interrupts it.
    #[pyo3(signature = (timeout = None))]
    fn wait_registered(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let limit = match timeout {
            Some(t) if t.is_finite() && t >= 0.0 => Some(Duration::from_secs_f64(t)),
            Some(_) => {
                return Err(PyValueError::new_err(
                    "timeout must be at least 0 and finite (seconds), or None",
                ))
            }
            None => None,
        };
        let deadline = limit.map(|l| Instant::now() + l);
        let slice = Duration::from_millis(100);
        loop {
            match self.state() {
                DialState::Registered => return Ok(true),
                DialState::Stopped => return Ok(false),
                _ => {}
            }
            let now = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(slice),
                None => slice,
            };
            if now.is_zero() {
                return Ok(false);
            }
            let handle = self.handle.clone();
            let runtime = self.runtime.clone();
            if py.detach(move || runtime.block_on(handle.wait_registered(now))) {
                return Ok(self.state() == DialState::Registered);
            }
            py.check_signals()?;
        }
    }

    /// Stops dialing and closes the connection to the relay (in the
    /// background; the relay then lists the host no more and closes the
    /// sessions it forwarded). The server goes on serving its other
    /// connections. Idempotent.
    fn stop(&self) {
        self.handle.stop();
    }

    fn __repr__(&self) -> String {
        let s = self.status();
        format!(
            "DialHandle(relay={:?}, name={:?}, state={:?})",
            s.relay, s.name, s.state
        )
    }
}

/// Registers the dialing classes.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDial>()?;
    m.add_class::<PyDialStatus>()?;
    Ok(())
}
