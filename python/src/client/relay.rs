//! `unienv_remote._native.Relay`: the crate's relay
//! ([`unienv_remote::relay::Relay`]) in the learner's process, so that a
//! learner can start engine processes that dial it (`serve --dial
//! relay.host_url`), wait for them and drive them through it (SPEC.md,
//! "Relay and dial-out hosts").

use parking_lot::Mutex;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use std::time::{Duration, Instant};
use unienv_remote::relay::{HostInfo, Relay, RelayConfig, RelayError};
use unienv_remote::server::ServerConfig;

/// A connected host, as the relay lists it.
#[pyclass(module = "unienv_remote._native", name = "RelayHost", frozen, get_all)]
pub struct PyRelayHost {
    /// The name clients reach it by (`ws://RELAY/hosts/NAME`).
    name: String,
    /// Its software (`unienv-remote`) and version.
    server: String,
    version: String,
    /// The resource IDs it hosts (its root registrations).
    resources: Vec<String>,
    /// Client sessions forwarded to it now.
    clients: usize,
    /// Seconds since it registered.
    connected_for: f64,
    /// `ws://RELAY/hosts/NAME`.
    url: String,
}

#[pymethods]
impl PyRelayHost {
    fn __repr__(&self) -> String {
        format!(
            "RelayHost(name={:?}, resources={:?}, clients={}, url={:?})",
            self.name, self.resources, self.clients, self.url
        )
    }
}

/// A relay listening in this process; stopped by `close()` (or when
/// collected).
#[pyclass(module = "unienv_remote._native", name = "Relay", frozen)]
pub struct PyRelay {
    relay: Relay,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

fn seconds(value: f64, what: &str) -> PyResult<Duration> {
    if value.is_finite() && value > 0.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(PyValueError::new_err(format!(
            "{what} must be positive and finite (seconds), got {value}"
        )))
    }
}

impl PyRelay {
    fn host(&self, info: &HostInfo) -> PyRelayHost {
        PyRelayHost {
            name: info.identity.name.clone(),
            server: info.identity.server.clone(),
            version: info.identity.version.clone(),
            resources: info.identity.resources.clone(),
            clients: info.clients,
            connected_for: info.connected_for.as_secs_f64(),
            url: self.relay.host_url(&info.identity.name),
        }
    }

    fn runtime_handle(&self) -> PyResult<tokio::runtime::Handle> {
        self.runtime
            .lock()
            .as_ref()
            .map(|r| r.handle().clone())
            .ok_or_else(|| PyRuntimeError::new_err("the relay is closed"))
    }
}

#[pymethods]
impl PyRelay {
    #[new]
    #[pyo3(signature = (addr = "127.0.0.1:0", *, token = None, host_token = None, tls_cert = None,
        tls_key = None, allowed_hosts = Vec::new(), allowed_origins = Vec::new(),
        max_message_size = unienv_remote::codec::DEFAULT_MAX_MESSAGE_SIZE, max_connections = 1024,
        max_hosts = 4096, open_timeout = 10.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        addr: &str,
        token: Option<String>,
        host_token: Option<String>,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        allowed_hosts: Vec<String>,
        allowed_origins: Vec<String>,
        max_message_size: usize,
        max_connections: usize,
        max_hosts: usize,
        open_timeout: f64,
    ) -> PyResult<PyRelay> {
        let tls = match (tls_cert, tls_key) {
            (Some(cert), Some(key)) => Some(
                unienv_remote::transport::ServerTls::from_pem_files(&cert, &key)
                    .map_err(|e| PyValueError::new_err(format!("tls_cert/tls_key: {e}")))?,
            ),
            (None, None) => None,
            _ => {
                return Err(PyValueError::new_err(
                    "tls_cert and tls_key go together: give both (PEM files) or neither",
                ))
            }
        };
        let config = RelayConfig {
            listen: ServerConfig {
                tls,
                token,
                allowed_hosts,
                allowed_origins,
                max_message_size,
                max_connections,
                ..ServerConfig::default()
            },
            host_token,
            max_hosts,
            open_timeout: seconds(open_timeout, "open_timeout")?,
            ..RelayConfig::default()
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("unienv-relay")
            .enable_all()
            .build()
            .map_err(|e| PyOSError::new_err(format!("cannot start the relay's runtime: {e}")))?;
        let addr = addr.to_string();
        let started = py.detach(|| runtime.block_on(Relay::start(addr.as_str(), config)));
        let relay = started.map_err(|e| match e {
            RelayError::Bind { .. } => PyOSError::new_err(e.to_string()),
            other => PyValueError::new_err(other.to_string()),
        })?;
        Ok(PyRelay {
            relay,
            runtime: Mutex::new(Some(runtime)),
        })
    }

    /// `ws://HOST:PORT` (`wss://` with TLS): what hosts dial.
    #[getter]
    fn url(&self) -> String {
        self.relay.url()
    }

    /// `ws://HOST:PORT/hosts/NAME`: where clients reach the host `name`.
    fn host_url(&self, name: &str) -> PyResult<String> {
        unienv_remote::relay::validate_name(name)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(self.relay.host_url(name))
    }

    /// The connected hosts, by name.
    fn hosts(&self) -> Vec<PyRelayHost> {
        self.relay.hosts().iter().map(|h| self.host(h)).collect()
    }

    /// `(url, resource_id)` for every resource of every connected host, by
    /// host name then resource (only `resource` when given): the argument
    /// `RemoteVectorEnv` takes.
    #[pyo3(signature = (resource = None))]
    fn addresses(&self, resource: Option<&str>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for h in self.relay.hosts() {
            let url = self.relay.host_url(&h.identity.name);
            for r in &h.identity.resources {
                if resource.is_none_or(|want| want == r) {
                    out.push((url.clone(), r.clone()));
                }
            }
        }
        out
    }

    /// Waits until at least `n` hosts are connected (at most `timeout`
    /// seconds; `None`: without limit), the GIL released; returns them.
    /// `TimeoutError` when fewer are connected by then; Ctrl-C interrupts
    /// it.
    #[pyo3(signature = (n, timeout = None))]
    fn wait_for(
        &self,
        py: Python<'_>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<Vec<PyRelayHost>> {
        let limit = timeout.map(|t| seconds_or_zero(t, "timeout")).transpose()?;
        let deadline = limit.map(|l| Instant::now() + l);
        let runtime = self.runtime_handle()?;
        // In slices, so that Ctrl-C (Python's signal handlers) is heard.
        let slice = Duration::from_millis(100);
        loop {
            let now = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(slice),
                None => slice,
            };
            let relay = self.relay.clone();
            if let Some(hosts) = py.detach(|| runtime.block_on(relay.wait_for(n, now))) {
                return Ok(hosts.iter().map(|h| self.host(h)).collect());
            }
            py.check_signals()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let names: Vec<String> = self
                    .relay
                    .hosts()
                    .into_iter()
                    .map(|h| h.identity.name)
                    .collect();
                return Err(PyTimeoutError::new_err(format!(
                    "{} of {n} hosts connected to the relay within {:.1} s: {names:?}",
                    names.len(),
                    limit.unwrap_or_default().as_secs_f64()
                )));
            }
            if self.runtime.lock().is_none() {
                return Err(PyRuntimeError::new_err("the relay is closed"));
            }
        }
    }

    /// Stops the relay: closes every connection (clients see their
    /// connection lost; hosts re-dial) and frees the port. Idempotent.
    fn close(&self, py: Python<'_>) {
        let Some(runtime) = self.runtime.lock().take() else {
            return;
        };
        let relay = self.relay.clone();
        py.detach(move || {
            runtime.block_on(relay.shutdown());
            runtime.shutdown_timeout(Duration::from_secs(10));
        });
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.runtime.lock().is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) {
        self.close(py);
    }

    fn __repr__(&self) -> String {
        format!(
            "Relay(url={:?}, hosts={})",
            self.relay.url(),
            self.relay.hosts().len()
        )
    }
}

fn seconds_or_zero(value: f64, what: &str) -> PyResult<Duration> {
    if value.is_finite() && value >= 0.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(PyValueError::new_err(format!(
            "{what} must be at least 0 and finite (seconds), or None"
        )))
    }
}

impl Drop for PyRelay {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.get_mut().take() {
            // Not blocking a collector: the connections' tasks are dropped,
            // which closes their sockets.
            runtime.shutdown_background();
        }
    }
}

/// Registers the relay's classes.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRelay>()?;
    m.add_class::<PyRelayHost>()?;
    Ok(())
}
