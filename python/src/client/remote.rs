//! `_native.Client`: the crate's blocking client (transport, codec,
//! boundary-snapshot cache, operation guards) as a Python object.
//!
//! The Python package (`unienv_remote/client.py`, `proxies.py`) builds the
//! reference's public surface on top of it. Every method that may wait on
//! the network releases the GIL while it waits; values cross the boundary
//! through [`crate::common::convert`].

use crate::common::convert::{self, ArrayMode};
use parking_lot::Mutex;
use pyo3::exceptions::{
    PyConnectionError, PyConnectionRefusedError, PyRuntimeError, PyTimeoutError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use unienv_remote::client::{
    blocking, ClientConfig, ClientError, ConnectFailure, Descriptor, Mode, OperationKind,
    SnapshotEvent,
};
use unienv_remote::{Dict, Value};

pyo3::import_exception!(unienv_interface.remote.errors, RemoteError);
pyo3::import_exception!(unienv_interface.remote.errors, UncertainOutcomeError);

/// The reference's `RemoteError(code, message, uncertain=...)`.
fn remote_error(py: Python<'_>, code: &str, message: &str, uncertain: bool) -> PyErr {
    let kwargs = PyDict::new(py);
    let made = kwargs.set_item("uncertain", uncertain).and_then(|_| {
        py.get_type::<RemoteError>()
            .call((code, message), Some(&kwargs))
    });
    match made {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

/// Maps a client error onto the exception the reference client raises in
/// the same situation.
pub fn client_error(py: Python<'_>, error: ClientError) -> PyErr {
    match error {
        ClientError::Remote(e) => remote_error(py, e.code.as_str(), &e.message, e.uncertain),
        ClientError::Uncertain(cause) => {
            // Which of the two happened, where the reference says "Connection
            // lost or timed out".
            let what = match cause.as_ref() {
                ClientError::Timeout(after) => format!(
                    "No reply within {} s (timeout; the connection was closed so that a late reply \
                     is never taken for another)",
                    after.as_secs_f64()
                ),
                ClientError::Closed(reason) => format!("Connection lost ({reason})"),
                other => other.to_string(),
            };
            let message = format!("{what}; the remote mutation may have executed");
            let err = match py.get_type::<UncertainOutcomeError>().call1((message,)) {
                Ok(instance) => PyErr::from_value(instance),
                Err(e) => return e,
            };
            err.set_cause(py, Some(client_error(py, *cause)));
            err
        }
        ClientError::Timeout(after) => PyTimeoutError::new_err(format!(
            "Remote request timed out: no reply within {} s (the connection was closed)",
            after.as_secs_f64()
        )),
        ClientError::Closed(reason) => {
            PyConnectionError::new_err(format!("Client is closed ({reason})"))
        }
        ClientError::Connect(failure) => {
            // The reference's WebSocket library raises the OS error's own class.
            if failure.is_refused_by_os() {
                PyConnectionRefusedError::new_err(failure.to_string())
            } else if failure.is_timeout() {
                PyTimeoutError::new_err(failure.to_string())
            } else {
                PyConnectionError::new_err(refusal_hint(&failure))
            }
        }
        ClientError::Protocol(violation) => {
            remote_error(py, "protocol_error", &violation.to_string(), false)
        }
        ClientError::Codec(e) => convert::CodecError::new_err(e.to_string()),
        ClientError::InvalidUse(reason) => PyRuntimeError::new_err(reason.to_string()),
        ClientError::Interrupted => crate::common::wait::interrupted(py),
        ClientError::Config(e) => PyRuntimeError::new_err(e.to_string()),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// A refused handshake's message with the Python spelling of its way out:
/// the body (or the Rust client's hint) names the command-line flags.
fn refusal_hint(failure: &ConnectFailure) -> String {
    let reason = failure.to_string();
    if failure.status() == Some(401) {
        format!("{reason}; from Python: RemoteClient(uri, token=TOKEN)")
    } else if failure.needs_ca_file() {
        format!("{reason}; from Python: RemoteClient(uri, ca_file=FILE) or ssl=ssl.create_default_context(cafile=FILE)")
    } else if failure.status() == Some(403) {
        format!(
            "{reason}; a unienv_remote.RemoteServer takes the same as allowed_hosts=[...] / allowed_origins=[...]"
        )
    } else {
        reason
    }
}

fn seconds(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    crate::common::wait::timeout_arg(timeout, "timeout")
}

/// Identifies one descriptor version: its address and `(revision, sequence)`.
type SchemaKey = (usize, u64, u64);

/// The serial number of a space document as last seen, per resource and
/// space name: equal documents keep their serial, so the Python proxies keep
/// their space objects (identity) while the serialized form is unchanged.
#[derive(Default)]
struct SpaceSerials {
    next: u64,
    seen: HashMap<(String, String), (Value, u64)>,
}

/// A connection to a UniEnv server (`_native.Client.connect(...)`).
#[pyclass(module = "unienv_remote._native", name = "Client", frozen)]
pub struct PyClient {
    client: blocking::Client,
    nodes: Mutex<HashMap<String, blocking::NodeProxy>>,
    spaces: Mutex<SpaceSerials>,
}

impl PyClient {
    /// A client connected through an in-memory transport (`RemoteServer.connect()`).
    pub(crate) fn over_memory(
        py: Python<'_>,
        transport: unienv_remote::transport::MemoryTransport,
        timeout: Option<f64>,
        max_message_size: usize,
    ) -> PyResult<PyClient> {
        if max_message_size < unienv_remote::codec::MIN_MAX_MESSAGE_SIZE {
            return Err(PyValueError::new_err("max_message_size must be at least 8"));
        }
        let config = ClientConfig {
            timeout: seconds(timeout)?,
            max_message_size,
            ..ClientConfig::default()
        };
        let client =
            crate::common::wait::detach(py, || blocking::Client::over_memory(transport, config))
                .map_err(|e| client_error(py, e))?;
        Ok(PyClient {
            client,
            nodes: Mutex::new(HashMap::new()),
            spaces: Mutex::new(SpaceSerials::default()),
        })
    }

    /// The exception of a failed request; an interrupted one that closed
    /// the connection (a mutation: its outcome is unknown) says so.
    fn fail(&self, py: Python<'_>, e: ClientError, what: &str) -> PyErr {
        if matches!(e, ClientError::Interrupted) && self.client.is_closed() {
            return crate::common::wait::interrupted_mutation(py, what);
        }
        client_error(py, e)
    }

    fn descriptor(&self, resource_id: &str) -> Option<Arc<Descriptor>> {
        self.client.descriptor(resource_id)
    }

    fn node_proxy(&self, py: Python<'_>, resource_id: &str) -> PyResult<blocking::NodeProxy> {
        if let Some(node) = self.nodes.lock().get(resource_id) {
            return Ok(node.clone());
        }
        let node = crate::common::wait::detach(py, || self.client.node(resource_id))
            .map_err(|e| client_error(py, e))?;
        self.nodes
            .lock()
            .insert(resource_id.to_string(), node.clone());
        Ok(node)
    }
}

fn descriptor_to_py<'py>(py: Python<'py>, d: &Descriptor) -> PyResult<Bound<'py, PyDict>> {
    convert::dict_to_py(py, d.raw())
}

fn descriptors_to_py<'py>(
    py: Python<'py>,
    list: &[Arc<Descriptor>],
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for d in list {
        out.append(descriptor_to_py(py, d)?)?;
    }
    Ok(out)
}

/// A snapshot event as the reference delivers it: the whole wire message.
fn event_to_py<'py>(
    py: Python<'py>,
    session_id: &str,
    event: &SnapshotEvent,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("version", 1)?;
    out.set_item("type", "snapshot")?;
    out.set_item("session_id", session_id)?;
    out.set_item("subscription_id", &event.subscription_id)?;
    out.set_item("resource_id", &event.resource_id)?;
    out.set_item("operation_id", event.operation_id.as_deref())?;
    out.set_item("kind", &event.kind)?;
    out.set_item("sequence", event.sequence)?;
    out.set_item("timestamp_ns", event.timestamp_ns)?;
    out.set_item("descriptor_revision", event.descriptor_revision)?;
    match &event.descriptor {
        Some(d) => out.set_item("descriptor", descriptor_to_py(py, d)?)?,
        None => out.set_item("descriptor", PyDict::new(py))?,
    }
    out.set_item("data", convert::dict_to_py(py, &event.data)?)?;
    Ok(out)
}

/// A call's arguments, each refused as soon as it alone is known to pass
/// `max` (the connection's message limit), before it is converted whole.
fn args_from_py(args: &Bound<'_, PyTuple>, max: usize) -> PyResult<Vec<Value>> {
    args.iter()
        .map(|a| convert::from_py_limited(&a, ArrayMode::Borrow, max))
        .collect()
}

fn kwargs_from_py(kwargs: Option<&Bound<'_, PyDict>>, max: usize) -> PyResult<Dict> {
    match kwargs {
        None => Ok(Dict::new()),
        Some(k) => match convert::from_py_limited(k.as_any(), ArrayMode::Borrow, max)? {
            Value::Dict(d) => Ok(d),
            _ => Ok(Dict::new()),
        },
    }
}

#[pymethods]
impl PyClient {
    /// Connects over WebSocket, says hello and discovers every resource.
    /// `headers` are extra handshake headers (`[(name, value), ...]`);
    /// `ca_file` a PEM file of CA certificates trusted for `wss://` besides
    /// the system's roots.
    #[staticmethod]
    #[pyo3(signature = (uri, *, timeout = Some(30.0), max_message_size = unienv_remote::codec::DEFAULT_MAX_MESSAGE_SIZE, token = None, discover = true, headers = Vec::new(), ca_file = None))]
    #[allow(clippy::too_many_arguments)]
    fn connect(
        py: Python<'_>,
        uri: &str,
        timeout: Option<f64>,
        max_message_size: usize,
        token: Option<String>,
        discover: bool,
        headers: Vec<(String, String)>,
        ca_file: Option<std::path::PathBuf>,
    ) -> PyResult<PyClient> {
        let config = ClientConfig {
            timeout: seconds(timeout)?,
            max_message_size,
            discover,
            token,
            headers,
            ca_file,
            ..ClientConfig::default()
        };
        if max_message_size < unienv_remote::codec::MIN_MAX_MESSAGE_SIZE {
            return Err(PyValueError::new_err("max_message_size must be at least 8"));
        }
        let client = crate::common::wait::detach(py, || blocking::Client::connect(uri, config))
            .map_err(|e| client_error(py, e))?;
        Ok(PyClient {
            client,
            nodes: Mutex::new(HashMap::new()),
            spaces: Mutex::new(SpaceSerials::default()),
        })
    }

    /// The session ID the server assigned.
    #[getter]
    fn session_id(&self) -> String {
        self.client.session_id().to_string()
    }

    /// Whether the connection is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.client.is_closed()
    }

    /// The request timeout in seconds (`None`: none).
    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.client.timeout().map(|d| d.as_secs_f64())
    }

    /// Sets the timeout of every request sent from now on.
    fn set_timeout(&self, timeout: Option<f64>) -> PyResult<()> {
        self.client.set_timeout(seconds(timeout)?);
        Ok(())
    }

    /// The negotiated message size limit.
    #[getter]
    fn max_message_size(&self) -> usize {
        self.client.max_message_size()
    }

    /// Requests sent on this connection so far (hello included).
    #[getter]
    fn requests_sent(&self) -> u64 {
        self.client.requests_sent()
    }

    /// The server's name and version from `hello`.
    #[getter]
    fn server(&self) -> (String, String) {
        let info = self.client.server_info();
        (info.server.clone(), info.server_version.clone())
    }

    /// Closes the connection (pending requests fail, subscriptions end).
    fn close(&self, py: Python<'_>) {
        crate::common::wait::detach(py, || self.client.close());
    }

    /// `discover`: every descriptor, as dicts.
    fn discover<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = crate::common::wait::detach(py, || self.client.discover())
            .map_err(|e| client_error(py, e))?;
        descriptors_to_py(py, &list)
    }

    /// `describe`: refreshes the resource's domain and returns its descriptor.
    fn describe<'py>(&self, py: Python<'py>, resource_id: &str) -> PyResult<Bound<'py, PyDict>> {
        let d = crate::common::wait::detach(py, || self.client.describe(resource_id))
            .map_err(|e| client_error(py, e))?;
        descriptor_to_py(py, &d)
    }

    /// Every known descriptor (no request), as `{id: descriptor}`.
    fn descriptors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for d in self.client.descriptors() {
            out.set_item(d.id(), descriptor_to_py(py, &d)?)?;
        }
        Ok(out)
    }

    /// The resource's kind (`env`, `world`, `node`), or `None` when unknown.
    fn kind(&self, resource_id: &str) -> Option<&'static str> {
        self.descriptor(resource_id).map(|d| d.kind().as_str())
    }

    /// The resource's domain ID, or `None` when unknown.
    fn domain_id(&self, resource_id: &str) -> Option<String> {
        self.descriptor(resource_id)
            .map(|d| d.domain_id().to_string())
    }

    /// The descriptor if it changed since `key` (a value this method
    /// returned before): `(key, descriptor)`, or `None` when unchanged or
    /// unknown. A cheap check for the proxies' attributes.
    #[pyo3(signature = (resource_id, key = None))]
    fn schema_since<'py>(
        &self,
        py: Python<'py>,
        resource_id: &str,
        key: Option<SchemaKey>,
    ) -> PyResult<Option<(SchemaKey, Bound<'py, PyDict>)>> {
        let Some(d) = self.descriptor(resource_id) else {
            return Ok(None);
        };
        let now = (Arc::as_ptr(&d) as usize, d.revision(), d.sequence());
        if key == Some(now) {
            return Ok(None);
        }
        Ok(Some((now, descriptor_to_py(py, &d)?)))
    }

    /// The serial of the resource's space `name` (`action_space`,
    /// `observation_space`, `context_space`) and, when it differs from
    /// `serial`, its document: `(serial, document_or_None)`; `None` when
    /// unchanged. Equal documents keep their serial.
    #[pyo3(signature = (resource_id, name, serial = None))]
    fn space_since<'py>(
        &self,
        py: Python<'py>,
        resource_id: &str,
        name: &str,
        serial: Option<u64>,
    ) -> PyResult<Option<(u64, Bound<'py, PyAny>)>> {
        let doc = self
            .descriptor(resource_id)
            .and_then(|d| d.get(name).cloned())
            .unwrap_or(Value::Null);
        let current = {
            let mut spaces = self.spaces.lock();
            let key = (resource_id.to_string(), name.to_string());
            match spaces.seen.get(&key) {
                Some((seen, s)) if *seen == doc => *s,
                _ => {
                    spaces.next += 1;
                    let s = spaces.next;
                    spaces.seen.insert(key, (doc.clone(), s));
                    s
                }
            }
        };
        if serial == Some(current) {
            return Ok(None);
        }
        Ok(Some((current, convert::to_py(py, &doc)?)))
    }

    /// `call`: a method by name with positional and keyword arguments;
    /// returns the value (descriptors are refreshed first).
    #[pyo3(signature = (resource_id, method, args, kwargs = None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        resource_id: &str,
        method: &str,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let max = self.client.max_message_size();
        let args = args_from_py(args, max)?;
        let kwargs = kwargs_from_py(kwargs, max)?;
        let value =
            crate::common::wait::detach(py, || self.client.call(resource_id, method, args, kwargs))
                .map_err(|e| self.fail(py, e, &format!("{method}() on '{resource_id}'")))?;
        convert::to_py(py, &value)
    }

    /// A node getter (`field` is `context`, `observation`, `reward`,
    /// `terminated`, `truncated` or `info`): from the boundary snapshot
    /// cache when allowed, live otherwise.
    fn read<'py>(
        &self,
        py: Python<'py>,
        resource_id: &str,
        field: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let node = self.node_proxy(py, resource_id)?;
        let value = crate::common::wait::detach(py, || match field {
            "context" => node.get_context(),
            "observation" => node.get_observation(),
            "reward" => node.get_reward(),
            "terminated" => node.get_termination(),
            "truncated" => node.get_truncation(),
            "info" => node.get_info(),
            other => Err(ClientError::invalid_use(format!(
                "{other} is not a node getter field"
            ))),
        })
        .map_err(|e| client_error(py, e))?;
        convert::to_py(py, &value)
    }

    /// `acquire`: claims the domain (`mode`: `env` or `components`; by
    /// default by the resource's kind).
    #[pyo3(signature = (resource_id, mode = None))]
    fn acquire(&self, py: Python<'_>, resource_id: &str, mode: Option<&str>) -> PyResult<()> {
        let mode = match mode {
            None => None,
            Some(m) => Some(Mode::parse(m).ok_or_else(|| {
                remote_error(py, "invalid_request", &format!("Unknown mode {m:?}"), false)
            })?),
        };
        crate::common::wait::detach(py, || self.client.acquire(resource_id, mode))
            .map_err(|e| client_error(py, e))
    }

    /// `release`: gives the domain back (optionally closing this client's
    /// subscriptions in it first).
    #[pyo3(signature = (resource_id, close_subscriptions = false))]
    fn release(
        &self,
        py: Python<'_>,
        resource_id: &str,
        close_subscriptions: bool,
    ) -> PyResult<()> {
        crate::common::wait::detach(py, || self.client.release(resource_id, close_subscriptions))
            .map_err(|e| client_error(py, e))
    }

    /// `begin`: opens a component operation on the resource's domain.
    fn begin(&self, py: Python<'_>, resource_id: &str, kind: &str) -> PyResult<PyOperation> {
        let kind = OperationKind::parse(kind).ok_or_else(|| {
            remote_error(
                py,
                "invalid_request",
                &format!("Unknown operation kind {kind:?}"),
                false,
            )
        })?;
        let op = crate::common::wait::detach(py, || self.client.operation(resource_id, kind))
            .map_err(|e| client_error(py, e))?;
        Ok(PyOperation {
            id: op.id().to_string(),
            domain_id: op.domain_id().to_string(),
            op: Mutex::new(Some(op)),
        })
    }

    /// The open operation's ID on the resource's domain, if any.
    fn current_operation(&self, resource_id: &str) -> Option<String> {
        self.client.current_operation(resource_id)
    }

    /// The cached boundary snapshot of a resource (no request):
    /// `{"sequence", "revision", "fields", "data"}` or `None`.
    fn boundary_snapshot<'py>(
        &self,
        py: Python<'py>,
        resource_id: &str,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(s) = self.client.boundary_snapshot(resource_id) else {
            return Ok(None);
        };
        let out = PyDict::new(py);
        out.set_item("sequence", s.sequence)?;
        out.set_item("revision", s.revision)?;
        out.set_item("fields", PyList::new(py, &s.fields)?)?;
        out.set_item("data", convert::dict_to_py(py, &s.data)?)?;
        Ok(Some(out))
    }

    /// `subscribe`: a latest-value stream of the resource's boundaries.
    #[pyo3(signature = (resource_id, fields = None))]
    fn subscribe(
        &self,
        py: Python<'_>,
        resource_id: &str,
        fields: Option<Vec<String>>,
    ) -> PyResult<PySubscription> {
        let sub = crate::common::wait::detach(py, || {
            let names: Option<Vec<&str>> = fields
                .as_ref()
                .map(|f| f.iter().map(String::as_str).collect());
            self.client.subscribe(resource_id, names.as_deref())
        })
        .map_err(|e| client_error(py, e))?;
        Ok(PySubscription {
            id: sub.id().to_string(),
            resource_id: sub.resource_id().to_string(),
            session_id: self.client.session_id().to_string(),
            closing: AtomicBool::new(false),
            sub: Mutex::new(Some(sub)),
        })
    }
}

/// An open component operation (`_native.Operation`).
#[pyclass(module = "unienv_remote._native", name = "Operation", frozen)]
pub struct PyOperation {
    id: String,
    domain_id: String,
    op: Mutex<Option<blocking::Operation>>,
}

#[pymethods]
impl PyOperation {
    /// The operation ID.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// The domain it runs on.
    #[getter]
    fn domain_id(&self) -> &str {
        &self.domain_id
    }

    /// `complete`: publishes the boundary; returns the refreshed descriptors.
    fn complete<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let Some(op) = self.op.lock().take() else {
            return Ok(PyList::empty(py));
        };
        let list = crate::common::wait::detach(py, || op.complete()).map_err(|e| match e {
            ClientError::Interrupted => crate::common::wait::interrupted_mutation(py, "complete()"),
            e => client_error(py, e),
        })?;
        descriptors_to_py(py, &list)
    }

    /// `abort`: ends the operation without publishing.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let Some(op) = self.op.lock().take() else {
            return Ok(());
        };
        crate::common::wait::detach(py, || op.abort()).map_err(|e| client_error(py, e))
    }
}

/// A snapshot stream (`_native.Subscription`).
#[pyclass(module = "unienv_remote._native", name = "Subscription", frozen)]
pub struct PySubscription {
    id: String,
    resource_id: String,
    session_id: String,
    closing: AtomicBool,
    sub: Mutex<Option<blocking::Subscription>>,
}

/// The longest `Subscription.next` holds its subscription at a time (see
/// `next`); snapshots are returned as soon as they arrive.
const NEXT_SLICE: Duration = Duration::from_millis(50);

#[pymethods]
impl PySubscription {
    /// The subscription ID.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// The observed resource.
    #[getter]
    fn resource_id(&self) -> &str {
        &self.resource_id
    }

    /// Whether the stream has ended (`False` while another thread waits in
    /// `next`, unless `close` was called).
    #[getter]
    fn closed(&self) -> bool {
        if self.closing.load(Ordering::Acquire) {
            return true;
        }
        match self.sub.try_lock() {
            Some(guard) => guard.as_ref().is_none_or(|s| s.is_closed()),
            None => false,
        }
    }

    /// The next snapshot message (a dict), `None` once the stream has
    /// ended; `TimeoutError` when nothing arrived within `timeout` seconds;
    /// the subscription's error (a `RemoteError`) or the session's end.
    #[pyo3(signature = (timeout = None))]
    fn next<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let limit = seconds(timeout)?;
        let outcome = crate::common::wait::detach(py, || {
            let deadline = limit.map(|l| Instant::now() + l);
            loop {
                // Waits in slices, so that a close() from another thread
                // gets the subscription within one slice and ends this wait.
                if self.closing.load(Ordering::Acquire) {
                    return Ok(None);
                }
                let slice = deadline.map_or(NEXT_SLICE, |d| {
                    d.saturating_duration_since(Instant::now()).min(NEXT_SLICE)
                });
                let mut guard = self.sub.lock();
                let Some(sub) = guard.as_mut() else {
                    return Ok(None);
                };
                match sub.next(Some(slice)) {
                    Err(ClientError::Timeout(_))
                        if unienv_remote::client::interrupt::interrupted() =>
                    {
                        return Err(ClientError::Interrupted)
                    }
                    Err(ClientError::Timeout(_)) => match (deadline, limit) {
                        (Some(d), Some(l)) if Instant::now() >= d => {
                            return Err(ClientError::Timeout(l))
                        }
                        _ => continue,
                    },
                    other => return other,
                }
            }
        });
        match outcome {
            Ok(Some(event)) => Ok(Some(event_to_py(py, &self.session_id, &event)?)),
            Ok(None) => Ok(None),
            Err(ClientError::Timeout(_)) => Err(PyTimeoutError::new_err(
                "No snapshot arrived before the deadline",
            )),
            Err(e) => Err(client_error(py, e)),
        }
    }

    /// Unsubscribes (waits for the server's acknowledgement); idempotent.
    /// A thread waiting in `next` returns `None` (its iteration ends).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closing.store(true, Ordering::Release);
        crate::common::wait::detach(py, || match self.sub.lock().take() {
            Some(sub) => sub.unsubscribe(),
            None => Ok(()),
        })
        .map_err(|e| client_error(py, e))
    }
}

/// Registers `Client`, `Operation` and `Subscription`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyClient>()?;
    m.add_class::<PyOperation>()?;
    m.add_class::<PySubscription>()?;
    Ok(())
}
