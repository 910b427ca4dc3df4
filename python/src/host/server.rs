//! `unienv_remote._native.Server`: the crate's server hosting Python objects.
//!
//! The Python side (`unienv_remote/server.py`) registers objects as the
//! reference does and lays each domain out (resource IDs, kinds, links, in
//! the reference's order). Each domain becomes a [`ForeignHost`] on its own
//! worker thread in the crate's server: the protocol, codec, sessions,
//! queues, snapshot fan-out and transports are Rust. A worker attaches to
//! the interpreter (takes the GIL) only for the duration of one call into
//! Python and detaches around everything else, so simulators that release
//! the GIL (NumPy, MuJoCo) run independent domains in parallel.
//!
//! Python exceptions of every kind (`KeyboardInterrupt` and `SystemExit`
//! included) become the reference's errors: `execution_error` with
//! `str(exc)`, or `serialization_error` for a value the codec cannot carry
//! (the reference's `CodecError`); a mutation that raised faults its domain.

use crate::common::convert::{dict_to_py, from_py_bounded, to_py, ArrayMode, ConvertError};
use crate::host::actions::ActionGuard;
use crate::host::attr::attr_str;
use crate::host::descriptor::{self, Probe};
use crate::host::dial::{self, PyDial};
use crate::host::fast::FastStep;
use crate::host::hooks;
use crate::host::outcome::convert_result;
use crate::host::python::{host_error, with_python};
use parking_lot::Mutex;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::time::Duration;
use unienv_remote::host::{Field, HostError, HostResult};
use unienv_remote::protocol::ResourceKind;
use unienv_remote::server::{
    ForeignHost, ForeignResource, Hosted, ListenError, Listener, Server, ServerBuilder,
    ServerConfig,
};
use unienv_remote::{Dict, Value};

mod attributes;
mod shutdown;
use shutdown::{log_warning, shut_down, shut_down_in_background};

/// Why the server could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A layout entry has the wrong shape.
    #[error("invalid layout entry: {0}")]
    Layout(String),
    /// The crate refused a registration.
    #[error(transparent)]
    Register(#[from] unienv_remote::server::RegisterError),
    /// The server's runtime could not start.
    #[error("cannot start the server runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// The configuration cannot work (`max_in_flight=0`, ...).
    #[error("invalid server configuration: {0}")]
    Config(#[from] unienv_remote::server::ServerConfigError),
}

impl From<SetupError> for PyErr {
    fn from(e: SetupError) -> PyErr {
        match e {
            SetupError::Layout(_) | SetupError::Register(_) | SetupError::Config(_) => {
                PyValueError::new_err(e.to_string())
            }
            SetupError::Runtime(_) => PyRuntimeError::new_err(e.to_string()),
        }
    }
}

/// One hosted Python object.
struct PyResource {
    obj: Py<PyAny>,
    info: ForeignResource,
    /// Whether arguments reach the object as NumPy arrays as they are
    /// (NumPy backend, no device); otherwise the reference's `map_arrays`.
    numpy: bool,
    /// Action conversion and checking (`validate_actions`).
    guard: ActionGuard,
    /// What its descriptor was last read from.
    probe: Probe,
    /// A `BatchedEnv` or `FromGymnasiumEnv` this host steps itself (`fast.rs`).
    fast: Option<FastStep>,
}

/// The Python objects of one domain.
struct PyHost {
    resources: Vec<PyResource>,
    /// Per resource, whether its descriptor changed, checked at the end of
    /// a successful call while still attached to the interpreter: the
    /// domain reads every descriptor right after a call (they go in its
    /// response), and this saves attaching again for it. Taken by
    /// `descriptor_if_changed`; cleared by every other use of the host.
    after_call: Vec<Option<bool>>,
    /// The server's `max_message_size`, which bounds every session's: a
    /// call's result is refused while it is converted as soon as it is
    /// known to be larger, so that no more than this is copied.
    max_message_size: usize,
}

/// `(id, kind, obj, world_id, node_id, children, numpy)`.
type LayoutEntry = (
    String,
    String,
    Py<PyAny>,
    Option<String>,
    Option<String>,
    Vec<(String, String)>,
    bool,
);

/// Reads a layout entry: `(id, kind, obj, world_id, node_id, children,
/// numpy)` with children a list of `(name, id)`; `validate` turns the
/// action check on.
fn resource_from_layout(entry: &Bound<'_, PyAny>, validate: bool) -> PyResult<PyResource> {
    let (id, kind, obj, world_id, node_id, children, numpy): LayoutEntry = entry.extract()?;
    let kind = ResourceKind::parse(&kind)
        .ok_or_else(|| PyValueError::new_err(format!("unknown resource kind {kind:?}")))?;
    let guard = ActionGuard::new(validate, kind, world_id.is_some() || node_id.is_some());
    let fast = if kind == ResourceKind::Env && numpy {
        FastStep::detect(obj.bind(entry.py()))
    } else {
        None
    };
    Ok(PyResource {
        fast,
        obj,
        info: ForeignResource {
            id,
            kind,
            world_id,
            node_id,
            children,
        },
        numpy,
        guard,
        probe: Probe::default(),
    })
}

fn host_from_layout(
    layout: &Bound<'_, PyAny>,
    validate: bool,
    max_message_size: usize,
) -> PyResult<PyHost> {
    let mut resources = Vec::new();
    for entry in layout.try_iter()? {
        resources.push(resource_from_layout(&entry?, validate)?);
    }
    if resources.is_empty() {
        return Err(PyValueError::new_err(
            "a domain needs at least one resource",
        ));
    }
    Ok(PyHost {
        resources,
        after_call: Vec::new(),
        max_message_size,
    })
}

impl PyHost {
    fn resource(&mut self, index: usize) -> HostResult<&mut PyResource> {
        self.resources
            .get_mut(index)
            .ok_or_else(|| HostError::new(format!("no resource {index}")))
    }
}

impl ForeignHost for PyHost {
    fn resources(&mut self, _root_id: &str) -> Result<Vec<ForeignResource>, String> {
        Ok(self.resources.iter().map(|r| r.info.clone()).collect())
    }

    fn descriptor(&mut self, index: usize) -> Dict {
        if let Some(checked) = self.after_call.get_mut(index) {
            *checked = None;
        }
        let Some(r) = self.resources.get_mut(index) else {
            return Dict::new();
        };
        with_python(|py| {
            let obj = r.obj.bind(py).clone();
            let (id, kind) = (r.info.id.as_str(), r.info.kind);
            let checked = r.guard.enabled();
            r.probe.read(&obj, id, kind, checked).unwrap_or_else(|e| {
                let error = host_error(py, e);
                tracing::warn!(target: "unienv_remote_native::server", resource = %id, %error, "descriptor not read");
                Dict::new()
            })
        })
    }

    fn descriptor_if_changed(&mut self, index: usize) -> Option<Dict> {
        let checked = self.after_call.get_mut(index).and_then(Option::take);
        let changed = match checked {
            Some(changed) => changed,
            None => {
                let r = self.resources.get(index)?;
                with_python(|py| r.probe.changed(r.obj.bind(py), r.info.kind))
            }
        };
        changed.then(|| self.descriptor(index))
    }

    fn exports(&mut self, index: usize, method: &str) -> bool {
        self.after_call.clear();
        let Some(r) = self.resources.get(index) else {
            return false;
        };
        // Only an env's `reload` is optional: the others need no Python.
        if r.info.kind != ResourceKind::Env || method != "reload" {
            return r.info.kind.methods().iter().any(|(m, _)| *m == method);
        }
        with_python(|py| descriptor::methods(r.obj.bind(py), r.info.kind).contains(&method))
    }

    fn snapshot_fields(&mut self, index: usize) -> Option<Vec<Field>> {
        self.after_call.clear();
        let r = self.resources.get(index)?;
        with_python(|py| {
            let obj = r.obj.bind(py);
            let fields = attr_str(obj, "remote_snapshot_fields").ok()??;
            let mut out = Vec::new();
            for f in fields.try_iter().ok()? {
                if let Some(field) = f
                    .ok()?
                    .extract::<String>()
                    .ok()
                    .and_then(|s| Field::parse(&s))
                {
                    out.push(field);
                }
            }
            Some(out)
        })
    }

    fn call(
        &mut self,
        index: usize,
        method: &str,
        mut args: Vec<Value>,
        mut kwargs: Dict,
    ) -> HostResult<Value> {
        self.after_call.clear();
        let resources = &mut self.resources;
        let after_call = &mut self.after_call;
        let max_message_size = self.max_message_size;
        if index >= resources.len() {
            return Err(HostError::new("no resource"));
        }
        with_python(|py| {
            let r = &mut resources[index];
            let (kind, id) = (r.info.kind, r.info.id.as_str());
            r.guard
                .admit(r.obj.bind(py), kind, id, method, &mut args, &mut kwargs)?;
            // Ok(Err(e)): it ran, but its result is over the limit.
            let run = || -> PyResult<Result<Value, ConvertError>> {
                if let Some(fast) = r.fast.as_ref().filter(|_| method == "step") {
                    if let Some(outcome) =
                        fast.step(r.obj.bind(py), &args, &kwargs, max_message_size)
                    {
                        return outcome;
                    }
                }
                let mut items = Vec::with_capacity(args.len());
                for a in &args {
                    items.push(to_py(py, a)?);
                }
                let mut pargs = PyTuple::new(py, items)?;
                let mut pkwargs = dict_to_py(py, &kwargs)?;
                // Interned: the method names are few, and looked up per call.
                let method = pyo3::types::PyString::intern(py, method);
                if !r.numpy {
                    (pargs, pkwargs) = hooks::map_arguments(r.obj.bind(py), pargs, pkwargs)?;
                }
                let result = r
                    .obj
                    .bind(py)
                    .getattr(method)?
                    .call(pargs, (!pkwargs.is_empty()).then_some(&pkwargs))?;
                convert_result(&result, max_message_size)
            };
            let outcome = run();
            // A result too large to send ran as well as one that fits: the
            // host's own bookkeeping is a success's (as before the bound,
            // when the encoder refused it after conversion).
            r.guard.finished(method, outcome.is_ok());
            let value = outcome.map_err(|e| {
                let mutation = kind.is_mutation(method).unwrap_or(true);
                crate::common::log::exception(py, &format!("{method}() on '{id}'"), mutation, &e);
                host_error(py, e)
            })?;
            let value = match value {
                Ok(value) => value,
                Err(too_large) => {
                    tracing::warn!(target: "unienv_remote_native::server", resource = %id, %method, error = %too_large, "result too large");
                    return Err(HostError::result_too_large(too_large.to_string()));
                }
            };
            after_call.extend(
                resources
                    .iter()
                    .map(|r| Some(r.probe.changed(r.obj.bind(py), r.info.kind))),
            );
            Ok(value)
        })
    }

    fn call_attribute(
        &mut self,
        i: usize,
        name: &str,
        args: Vec<Value>,
        kw: Dict,
    ) -> HostResult<Vec<Value>> {
        attributes::call(self, i, name, &args, &kw)
    }

    fn set_attribute(&mut self, i: usize, name: &str, values: Vec<Value>) -> HostResult<()> {
        attributes::set(self, i, name, &values)
    }

    fn read(&mut self, index: usize, field: Field) -> HostResult<Option<Value>> {
        self.after_call.clear();
        let max_message_size = self.max_message_size;
        let r = self.resource(index)?;
        let kind = r.info.kind;
        with_python(|py| {
            let obj = r.obj.bind(py);
            // Bounded as a call's result is: a snapshot field over the limit
            // is never copied in full (it could not be sent anyway).
            let convert = |v: &Bound<'_, PyAny>| -> PyResult<Value> {
                from_py_bounded(v, ArrayMode::Copy, max_message_size).map_err(|e| match e {
                    Ok(too_large) => too_large.into(),
                    Err(e) => e,
                })
            };
            let run = || -> PyResult<Option<Value>> {
                if kind == ResourceKind::Env {
                    if field != Field::Render {
                        return Ok(None);
                    }
                    let v = obj.call_method0(intern!(py, "render"))?;
                    return Ok(Some(convert(&v)?));
                }
                if kind != ResourceKind::Node {
                    return Ok(None);
                }
                // The reference's `_snapshot`: (flag, getter) per field.
                let (flag, getter) = match field {
                    Field::Context => (Some("context_space"), "get_context"),
                    Field::Observation => (Some("observation_space"), "get_observation"),
                    Field::Reward => (Some("has_reward"), "get_reward"),
                    Field::Terminated => (Some("has_termination_signal"), "get_termination"),
                    Field::Truncated => (Some("has_truncation_signal"), "get_truncation"),
                    Field::Info => (None, "get_info"),
                    Field::Render => (Some("can_render"), "render"),
                    Field::Dt => return Ok(None),
                };
                let enabled = match flag {
                    None => true,
                    Some(f) if f.ends_with("_space") => {
                        attr_str(obj, f)?.is_some_and(|s| !s.is_none())
                    }
                    Some(f) => match attr_str(obj, f)? {
                        Some(v) => v.is_truthy()?,
                        None => false,
                    },
                };
                if !enabled {
                    return Ok(None);
                }
                let v = obj.call_method0(getter)?;
                Ok(Some(convert(&v)?))
            };
            run().map_err(|e| {
                let what = format!("reading {} of '{}'", field.name(), r.info.id);
                crate::common::log::exception(py, &what, false, &e);
                host_error(py, e)
            })
        })
    }

    fn close(&mut self) {
        self.after_call.clear();
        let resources = &self.resources;
        with_python(|py| {
            let items: Vec<(String, Py<PyAny>)> = resources
                .iter()
                .map(|r| (r.info.kind.as_str().to_string(), r.obj.clone_ref(py)))
                .collect();
            if let Err(e) = hooks::dispose(py, items) {
                let error = host_error(py, e);
                tracing::error!(target: "unienv_remote_native::server", %error, "disposal failed");
            }
        });
    }
}

/// `_native.Server`: a started server hosting Python objects.
#[pyclass(module = "unienv_remote._native", name = "Server", frozen)]
pub struct PyServer {
    server: Server,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    listeners: Mutex<Vec<Listener>>,
}

fn seconds(value: Option<f64>, what: &str) -> PyResult<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(_) => Err(PyValueError::new_err(format!(
            "{what} must be positive and finite, or None"
        ))),
    }
}

/// What one domain is built from.
enum DomainSpec {
    /// Objects laid out at registration.
    Static(PyHost),
    /// A zero-argument factory, laid out by `RemoteServer._layout_factory`.
    Factory(Py<PyAny>),
}

#[pymethods]
impl PyServer {
    /// Starts a server. `domains` is a list of `(root_id, layout)` for
    /// registered objects (see `RemoteServer._layout`) or `(root_id,
    /// factory)` for callables; `server` is the Python `RemoteServer`.
    #[new]
    #[pyo3(signature = (server, domains, *, max_message_size, idle_timeout, token = None,
        allowed_origins = Vec::new(), allowed_hosts = Vec::new(), max_connections = 1024,
        max_in_flight = 64, max_subscriptions_per_session = 1024, env_boundary_snapshots = false,
        shutdown_timeout = 10.0, handshake_timeout = 10.0, tls_cert = None, tls_key = None,
        validate_actions = true, record_dir = None, max_connection_bytes = None,
        max_server_bytes = None, record_format = None, cpus = None, record_queue_bytes = None,
        reply_hold = Some(0.0005)))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        server: Py<PyAny>,
        domains: &Bound<'_, PyList>,
        max_message_size: usize,
        idle_timeout: Option<f64>,
        token: Option<String>,
        allowed_origins: Vec<String>,
        allowed_hosts: Vec<String>,
        max_connections: usize,
        max_in_flight: usize,
        max_subscriptions_per_session: usize,
        env_boundary_snapshots: bool,
        shutdown_timeout: f64,
        handshake_timeout: f64,
        tls_cert: Option<std::path::PathBuf>,
        tls_key: Option<std::path::PathBuf>,
        validate_actions: bool,
        record_dir: Option<std::path::PathBuf>,
        max_connection_bytes: Option<usize>,
        max_server_bytes: Option<usize>,
        // The recording's storage writer (`None`: the default, Parquet), see python/src/client/record.rs.
        record_format: Option<Bound<'_, PyAny>>,
        // The server's placement (`ServerConfig::cpus`).
        cpus: Option<Vec<usize>>,
        // The recorder's queue budget in bytes (`ServerConfig::record_queue_bytes`).
        record_queue_bytes: Option<usize>,
        // Seconds a response may wait for the session's other requests (`ServerConfig::reply_hold`).
        reply_hold: Option<f64>,
    ) -> PyResult<PyServer> {
        if let Some(dir) = &record_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| PyValueError::new_err(format!("record_dir {}: {e}", dir.display())))?;
        }
        if max_message_size < unienv_remote::codec::MIN_MAX_MESSAGE_SIZE {
            return Err(PyValueError::new_err("max_message_size must be at least 8"));
        }
        let tls = match (tls_cert, tls_key) {
            (Some(cert), Some(key)) => Some(
                unienv_remote::transport::ServerTls::from_pem_files(cert, key)
                    .map_err(|e| PyValueError::new_err(format!("tls_cert/tls_key: {e}")))?,
            ),
            (None, None) => None,
            _ => {
                return Err(PyValueError::new_err(
                    "tls_cert and tls_key go together: give both (PEM files) or neither",
                ))
            }
        };
        let config = ServerConfig {
            max_message_size,
            idle_timeout: seconds(idle_timeout, "idle_timeout")?,
            token,
            allowed_origins,
            allowed_hosts,
            max_connections,
            max_in_flight,
            max_subscriptions_per_session,
            env_boundary_snapshots,
            shutdown_timeout: seconds(Some(shutdown_timeout), "shutdown_timeout")?
                .unwrap_or_default(),
            handshake_timeout: seconds(Some(handshake_timeout), "handshake_timeout")?
                .unwrap_or_default(),
            tls,
            record_dir,
            record_format: crate::client::record::format(record_format.as_ref())?,
            // The byte budgets (None: the crate's defaults).
            max_connection_bytes: max_connection_bytes
                .unwrap_or(ServerConfig::default().max_connection_bytes),
            max_server_bytes: max_server_bytes.unwrap_or(ServerConfig::default().max_server_bytes),
            cpus: cpus.clone(),
            record_queue_bytes: record_queue_bytes
                .unwrap_or(ServerConfig::default().record_queue_bytes),
            reply_hold: seconds(reply_hold, "reply_hold")?,
            ..ServerConfig::default()
        };
        // Domain threads of factories hold a weak reference to the
        // instance: a RemoteServer dropped without close() is collected, and
        // its PyServer's drop shuts it down.
        let weak = py
            .import(intern!(py, "weakref"))?
            .call_method1(intern!(py, "ref"), (server.bind(py),))?
            .unbind();
        drop(server);
        let mut specs: Vec<(String, DomainSpec)> = Vec::new();
        for item in domains.iter() {
            let (root, payload): (String, Bound<'_, PyAny>) = item.extract()?;
            let spec = if payload.is_callable() {
                DomainSpec::Factory(payload.unbind())
            } else {
                let host = host_from_layout(&payload, validate_actions, max_message_size)?;
                if host.resources[0].info.id != root {
                    return Err(SetupError::Layout(format!(
                        "the first resource of {root:?} is {:?}",
                        host.resources[0].info.id
                    ))
                    .into());
                }
                DomainSpec::Static(host)
            };
            specs.push((root, spec));
        }
        config
            .validate()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut runtime = tokio::runtime::Builder::new_multi_thread();
        if let Some(cpus) = cpus {
            // The runtime's threads on the placement's CPUs too (the server
            // pins its domain threads and recorder itself).
            runtime.on_thread_start(move || {
                let _ = unienv_remote::server::pin_current_thread(&cpus);
            });
        }
        let runtime = runtime
            .worker_threads(2)
            .thread_name("unienv-server")
            .enable_all()
            .build()
            .map_err(SetupError::from)?;
        // Domains are built on their own threads, which attach to the
        // interpreter: registration runs detached.
        let started = py.detach(move || -> Result<Server, SetupError> {
            let mut builder: ServerBuilder = Server::builder(config);
            for (root, spec) in specs {
                match spec {
                    DomainSpec::Static(host) => {
                        builder.register_with(&root, move || Ok(Hosted::foreign(host)))?;
                    }
                    DomainSpec::Factory(factory) => {
                        let weak = Python::attach(|py| weak.clone_ref(py));
                        let id = root.clone();
                        builder.register_factory(&root, move || {
                            with_python(|py| {
                                let build = || -> PyResult<PyHost> {
                                    let server = weak.bind(py).call0()?;
                                    if server.is_none() {
                                        return Err(PyRuntimeError::new_err(
                                            "the RemoteServer has been collected",
                                        ));
                                    }
                                    let product = factory.bind(py).call0()?;
                                    let layout = hooks::layout_factory(&server, &id, product)?;
                                    host_from_layout(&layout, validate_actions, max_message_size)
                                };
                                build().map(Hosted::foreign).map_err(|e| host_error(py, e))
                            })
                        })?;
                    }
                }
            }
            Ok(builder.start()?)
        })?;
        Ok(PyServer {
            server: started,
            runtime: Mutex::new(Some(runtime)),
            listeners: Mutex::new(Vec::new()),
        })
    }

    /// Serves the metrics (Prometheus text format) on `addr`; returns
    /// `http://ADDR/metrics`. The endpoint stops with the server.
    fn serve_metrics(&self, py: Python<'_>, addr: &str) -> PyResult<String> {
        let guard = self.runtime.lock();
        let runtime = guard
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("Server is closed"))?;
        let server = self.server.clone();
        let target = addr.to_string();
        let endpoint = py
            .detach(|| runtime.block_on(async move { server.serve_metrics(target).await }))
            .map_err(|e| PyValueError::new_err(format!("metrics {addr}: {e}")))?;
        Ok(endpoint.url())
    }

    /// The metrics as the endpoint serves them (Prometheus text format).
    fn metrics_text(&self) -> String {
        self.server.metrics_text()
    }

    /// Starts a WebSocket listener; returns the bound port.
    fn listen(&self, py: Python<'_>, host: &str, port: u16) -> PyResult<u16> {
        let guard = self.runtime.lock();
        let runtime = guard
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("Server is closed"))?;
        let server = self.server.clone();
        let addr = (host.to_string(), port);
        let listener = py
            .detach(|| runtime.block_on(async move { server.listen(addr).await }))
            .map_err(|e| listen_error(&e, host, port))?;
        let port = listener.local_addr().port();
        self.listeners.lock().push(listener);
        Ok(port)
    }

    /// Starts a WebSocket listener on the Unix domain socket `path`;
    /// returns its `ws+unix://` URL.
    fn listen_unix(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
        let guard = self.runtime.lock();
        let runtime = guard
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("Server is closed"))?;
        let server = self.server.clone();
        let listener = py
            .detach(|| runtime.block_on(async move { server.listen_unix(path).await }))
            .map_err(|e| listen_error(&e, "", 0))?;
        let url = listener.url();
        self.listeners.lock().push(listener);
        Ok(url)
    }

    /// Connects an in-memory client (the crate's blocking client).
    #[pyo3(signature = (*, timeout = Some(30.0), max_message_size = unienv_remote::codec::DEFAULT_MAX_MESSAGE_SIZE))]
    fn connect_memory(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        max_message_size: usize,
    ) -> PyResult<crate::client::remote::PyClient> {
        let transport = {
            let guard = self.runtime.lock();
            let runtime = guard
                .as_ref()
                .ok_or_else(|| PyRuntimeError::new_err("Server is closed"))?;
            let _enter = runtime.enter();
            self.server.connect_memory()
        };
        // Not holding the runtime's lock while the client says hello and
        // discovers: a hosted call may connect (or close) meanwhile.
        crate::client::remote::PyClient::over_memory(py, transport, timeout, max_message_size)
    }

    /// Dials the relay at `url` and registers as `name`; serves the
    /// clients it forwards until the handle stops or the server closes.
    #[pyo3(signature = (url, name, *, token = None, ca_file = None, connect_timeout = 10.0,
        initial_backoff = 0.25, max_backoff = 10.0))]
    #[allow(clippy::too_many_arguments)]
    fn dial(
        slf: &Bound<'_, Self>,
        url: &str,
        name: &str,
        token: Option<String>,
        ca_file: Option<std::path::PathBuf>,
        connect_timeout: f64,
        initial_backoff: f64,
        max_backoff: f64,
    ) -> PyResult<PyDial> {
        let times = (connect_timeout, initial_backoff, max_backoff);
        let options = dial::options(name, token, ca_file, times)?;
        let me = slf.clone().unbind();
        let closed = Box::new(move || me.get().runtime.lock().is_none());
        let this = slf.get();
        let guard = this.runtime.lock();
        let runtime = guard
            .as_ref()
            .ok_or_else(|| PyRuntimeError::new_err("Server is closed"))?;
        PyDial::start(&this.server, runtime, url, options, closed)
    }

    /// Number of connected sessions.
    #[getter]
    fn session_count(&self) -> usize {
        self.server.session_count()
    }

    /// Closes every session, disposes of every domain (each on its own
    /// thread, attached to the interpreter only while closing objects) and
    /// stops the runtime. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(runtime) = self.runtime.lock().take() else {
            return Ok(());
        };
        let inside = self.server.hosted_domain();
        if let Some(index) = inside {
            let root = self.server.roots().get(index).cloned().unwrap_or_default();
            log_warning(
                py,
                &format!(
                    "RemoteServer.close() called from inside a hosted call of '{root}': closing without waiting for that domain, which is disposed of when the call returns"
                ),
            );
        }
        let listeners: Vec<Listener> = std::mem::take(&mut *self.listeners.lock());
        let server = self.server.clone();
        let close = move || shut_down(runtime, listeners, server);
        if inside.is_some() {
            // On this domain's thread, which the shutdown must know it is on.
            py.detach(close);
            return Ok(());
        }
        // On a thread of its own, waited for interruptibly: Ctrl-C returns
        // at once and the shutdown goes on in the background.
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("unienv-server-close".into())
            .spawn(move || {
                close();
                let _ = done_tx.send(());
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start closing: {e}")))?;
        match crate::common::wait::recv(py, done) {
            Ok(_) => Ok(()),
            Err(e) => {
                log_warning(
                    py,
                    "RemoteServer.close() interrupted: the shutdown goes on in the background",
                );
                Err(e)
            }
        }
    }
}

/// Registers `Server`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyServer>()?;
    m.add_function(wrap_pyfunction!(check_resource_id, m)?)
}

/// `_native.check_resource_id(id)`: the server's rule for a resource ID
/// (`unienv_remote::server::check_resource_id`), so that `RemoteServer.register`
/// refuses a bad ID where it is given instead of at `listen`.
#[pyfunction]
fn check_resource_id(resource_id: &str) -> PyResult<()> {
    unienv_remote::server::check_resource_id(resource_id)
        .map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The Python exception of a failed `listen`: `ValueError` for a
/// configuration the server cannot run with, `OSError` (as the reference's
/// `websockets.serve` raises) for an address that cannot be resolved or
/// bound.
fn listen_error(e: &std::io::Error, host: &str, port: u16) -> PyErr {
    if e.get_ref()
        .is_some_and(|i| i.is::<unienv_remote::server::ServerConfigError>())
    {
        return PyValueError::new_err(format!("invalid server configuration: {e}"));
    }
    if matches!(
        ListenError::of(e),
        Some(ListenError::Bind { .. } | ListenError::BindUnix { .. })
    ) {
        return PyOSError::new_err(e.to_string());
    }
    PyOSError::new_err(format!("cannot listen on {host}:{port}: {e}"))
}

impl Drop for PyServer {
    /// A server dropped without `close()` (its `RemoteServer` collected):
    /// shut down on a thread of its own ([`shut_down_in_background`]).
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.get_mut().take() else {
            return;
        };
        let listeners: Vec<Listener> = std::mem::take(self.listeners.get_mut());
        shut_down_in_background(runtime, listeners, self.server.clone());
    }
}
