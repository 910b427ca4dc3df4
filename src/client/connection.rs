//! The connection: [`Client`] says hello, keeps the descriptor store and
//! the boundary cache, and sends every request. Proxies, operations and
//! subscriptions (in their own files) build on it.

use super::config::ClientConfig;
use super::descriptor::{BoundarySnapshot, Descriptor};
use super::error::{ClientError, ClientResult, CloseReason, ConnectFailure, ProtocolViolation};
use super::pending::{Reply, ReplySink};
use super::shared::Shared;
use super::sub_queue::SubShared;
use crate::codec::{Dict, Value, MIN_MAX_MESSAGE_SIZE};
use crate::protocol::{Mode, Op, ResourceKind};
use crate::transport::{MemoryTransport, Reader, Writer};
use std::sync::Arc;

/// What the server said in `hello`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerInfo {
    /// The session ID.
    pub session_id: String,
    /// The negotiated message size limit.
    pub max_message_size: usize,
    /// The server's name (`unienv` for the reference).
    pub server: String,
    /// The server's version (`unknown` when not known).
    pub server_version: String,
    /// Protocol versions the server supports.
    pub protocol_versions: Vec<i64>,
    /// Extensions of our own the server lists in `hello` (SPEC.md,
    /// "Extension: sub-env attributes"); empty for other servers.
    pub extensions: Vec<String>,
}

struct Inner {
    shared: Arc<Shared>,
    info: ServerInfo,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.close(ClientError::Closed(CloseReason::Dropped));
    }
}

/// A connection to a server: a descriptor store, a boundary snapshot cache
/// and one control session. Cheap to clone; the connection closes when the
/// last clone (including those held by proxies, operations and
/// subscriptions) is dropped, or on [`Client::close`].
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    pub(crate) shared: Arc<Shared>,
}

impl Client {
    /// Connects over WebSocket (`ws://HOST:PORT`, or `wss://HOST:PORT` over
    /// TLS: see [`ClientConfig::ca_file`]), says hello and, unless
    /// disabled, discovers every resource. Must run inside a tokio runtime:
    /// the connection's reader and writer tasks are spawned on it.
    pub async fn connect(url: &str, config: ClientConfig) -> ClientResult<Client> {
        config.validate()?;
        let mut headers = config.headers.clone();
        if let Some(token) = &config.token {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
            headers.push(("Authorization".to_string(), format!("Bearer {token}")));
        }
        // [transport: TLS hook] the trust for wss:// URLs.
        let tls = match (&config.tls, url.starts_with("wss://")) {
            (Some(tls), _) => Some(tls.clone()),
            (None, true) => Some(
                crate::transport::tls::client_config(config.ca_file.as_deref())
                    .map_err(|e| ClientError::Connect(e.into()))?,
            ),
            (None, false) => None,
        };
        let handshake =
            crate::transport::ws::connect_with(url, &headers, config.max_message_size, tls);
        let connected = match config.timeout {
            Some(limit) => tokio::time::timeout(limit, handshake)
                .await
                .map_err(|_| ClientError::Connect(ConnectFailure::TimedOut { after: limit }))?,
            None => handshake.await,
        };
        let (reader, writer) = connected.map_err(|e| ClientError::Connect(e.into()))?;
        Client::start(Reader::Ws(reader), Writer::Ws(writer), config).await
    }

    /// Connects through an in-memory transport (for example
    /// [`Server::connect_memory`](crate::server::Server::connect_memory)).
    /// Must run inside a tokio runtime.
    pub async fn over_memory(
        transport: MemoryTransport,
        config: ClientConfig,
    ) -> ClientResult<Client> {
        config.validate()?;
        let (reader, writer) = transport.split();
        Client::start(reader, writer, config).await
    }

    async fn start(reader: Reader, writer: Writer, config: ClientConfig) -> ClientResult<Client> {
        let discover = config.discover;
        let limit = Value::from(config.max_message_size);
        let shared = Shared::start(reader, writer, config);
        let info = match hello(&shared, &limit).await {
            Ok(info) => info,
            Err(e) => {
                shared.close(ClientError::Closed(CloseReason::HelloFailed));
                shared.join().await;
                return Err(e);
            }
        };
        let client = Client {
            inner: Arc::new(Inner {
                shared: shared.clone(),
                info,
            }),
            shared,
        };
        if discover {
            if let Err(e) = client.discover().await {
                client.close().await;
                return Err(e);
            }
        }
        Ok(client)
    }

    /// What the server said in `hello`.
    pub fn server_info(&self) -> &ServerInfo {
        &self.inner.info
    }

    /// The session ID.
    pub fn session_id(&self) -> &str {
        &self.inner.info.session_id
    }

    /// The negotiated message size limit.
    pub fn max_message_size(&self) -> usize {
        self.shared.max_message_size()
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.shared.is_closed()
    }

    /// The request timeout in force ([`ClientConfig::timeout`] until set).
    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.shared.timeout()
    }

    /// Sets the timeout of every request sent from now on (`None`: wait as
    /// long as it takes), as assigning the reference client's `timeout`.
    pub fn set_timeout(&self, timeout: Option<std::time::Duration>) {
        self.shared.set_timeout(timeout);
    }

    /// Requests sent on this connection so far (hello included; requests
    /// sent without waiting, such as an unsubscribe from a destructor, too).
    pub fn requests_sent(&self) -> u64 {
        self.shared.requests_sent()
    }

    /// Closes the connection: pending requests fail, subscriptions end, the
    /// cache is cleared, and the server releases this session's control and
    /// subscriptions. Waits (briefly) for the connection's tasks to stop.
    pub async fn close(&self) {
        self.shared.close(ClientError::Closed(CloseReason::Closed));
        self.shared.join().await;
    }

    /// Fetches every descriptor (`discover`) and refreshes the store.
    pub async fn discover(&self) -> ClientResult<Vec<Arc<Descriptor>>> {
        let descriptors = self.shared.request(Op::Discover, None, &[], false).await?;
        self.shared.apply_descriptors(descriptors, true)
    }

    /// Fetches the descriptors of a resource's domain (`describe`) and
    /// returns the resource's.
    pub async fn describe(&self, resource_id: &str) -> ClientResult<Arc<Descriptor>> {
        let descriptors = self
            .shared
            .request(Op::Describe, Some(resource_id), &[], false)
            .await?;
        self.shared.apply_descriptors(descriptors, true)?;
        self.descriptor(resource_id).ok_or_else(|| {
            ClientError::Protocol(ProtocolViolation::DescribeMissing {
                resource_id: resource_id.to_string(),
            })
        })
    }

    /// The latest descriptor of a resource, if known (no request).
    pub fn descriptor(&self, resource_id: &str) -> Option<Arc<Descriptor>> {
        self.shared
            .state
            .lock()
            .descriptors
            .get(resource_id)
            .cloned()
    }

    /// Every known descriptor, sorted by ID (no request).
    pub fn descriptors(&self) -> Vec<Arc<Descriptor>> {
        let mut all: Vec<_> = self
            .shared
            .state
            .lock()
            .descriptors
            .values()
            .cloned()
            .collect();
        all.sort_by(|a, b| a.id().cmp(b.id()));
        all
    }

    pub(crate) async fn ensure_descriptor(
        &self,
        resource_id: &str,
    ) -> ClientResult<Arc<Descriptor>> {
        match self.descriptor(resource_id) {
            Some(d) => Ok(d),
            None => self.describe(resource_id).await,
        }
    }

    /// Claims control of the resource's domain in `mode` (default: env mode
    /// for envs, components mode otherwise). Drops the domain's cached fields.
    pub async fn acquire(&self, resource_id: &str, mode: Option<Mode>) -> ClientResult<()> {
        let descriptor = self.ensure_descriptor(resource_id).await?;
        let mode = mode.unwrap_or(match descriptor.kind() {
            ResourceKind::Env => Mode::Env,
            _ => Mode::Components,
        });
        let mode = Value::from(mode.as_str());
        self.shared
            .request(Op::Acquire, Some(resource_id), &[("mode", &mode)], true)
            .await
            .map(drop)
    }

    /// Releases control of the resource's domain (an unfinished operation
    /// faults it). Subscriptions are kept unless `close_subscriptions`, which
    /// first unsubscribes this client's subscriptions in that domain. Drops
    /// the domain's cached fields. Does nothing once the connection is closed.
    pub async fn release(&self, resource_id: &str, close_subscriptions: bool) -> ClientResult<()> {
        if close_subscriptions {
            let subscriptions: Vec<Arc<SubShared>> = {
                let st = self.shared.state.lock();
                let domain = st.domain_of(resource_id);
                st.subscriptions
                    .values()
                    .filter(|s| st.domain_of(&s.resource_id) == domain)
                    .cloned()
                    .collect()
            };
            for s in subscriptions {
                if s.finish(None) {
                    self.unsubscribe_remote(&s).await?;
                }
            }
        }
        if self.shared.is_closed() {
            return Ok(());
        }
        self.shared
            .request(Op::Release, Some(resource_id), &[], true)
            .await
            .map(drop)
    }

    /// The ID of the open operation on the resource's domain, if any.
    pub fn current_operation(&self, resource_id: &str) -> Option<String> {
        let st = self.shared.state.lock();
        st.operations
            .get(st.domain_of(resource_id))
            .map(|id| id.to_string())
    }

    /// Calls a method by name, always live (`call`). Env calls get a fresh
    /// operation ID; world and node calls carry the domain's open operation,
    /// if any. The response's descriptors (and boundary snapshots) refresh
    /// the client before the value is returned.
    pub async fn call(
        &self,
        resource_id: &str,
        method: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> ClientResult<Value> {
        let descriptor = self.ensure_descriptor(resource_id).await?;
        let call = self.call_params(&descriptor, method, args, kwargs);
        let result = self
            .shared
            .request(Op::Call, Some(resource_id), &call.params(), call.mutation)
            .await?;
        self.call_value(result)
    }

    /// [`call`](Self::call)'s request with its reply handed to `sink` (with
    /// `tag`) by the reader task instead of awaited; the sink makes of it
    /// what `call` returns with [`call_reply`](Self::call_reply). Returns
    /// the request's ID, or, when the resource's descriptor is not known yet
    /// (`call` would ask for it first), the arguments back.
    pub(crate) fn call_to(
        &self,
        resource_id: &str,
        method: &str,
        args: Vec<Value>,
        sink: Arc<dyn ReplySink>,
        tag: usize,
    ) -> Result<ClientResult<u64>, Vec<Value>> {
        let Some(descriptor) = self.descriptor(resource_id) else {
            return Err(args);
        };
        let call = self.call_params(&descriptor, method, args, Dict::new());
        Ok(self.shared.send_to(
            Op::Call,
            Some(resource_id),
            &call.params(),
            call.mutation,
            sink,
            tag,
        ))
    }

    /// What a reply handed to a sink by [`call_to`](Self::call_to) comes
    /// to: what [`call`](Self::call) would have returned.
    pub(crate) fn call_reply(
        &self,
        reply: Reply,
        resource_id: &str,
        mutation: bool,
    ) -> ClientResult<Value> {
        let result = self.shared.settle(reply, Some(resource_id), mutation)?;
        self.call_value(result)
    }

    /// A call request's parameters: the method, its arguments, and the
    /// operation it belongs to (a fresh one for an env's call, the domain's
    /// open one otherwise).
    fn call_params(
        &self,
        descriptor: &Descriptor,
        method: &str,
        args: Vec<Value>,
        kwargs: Dict,
    ) -> CallParams {
        let kind = descriptor.kind();
        let operation_id = if kind == ResourceKind::Env {
            Value::from(self.shared.fresh_id())
        } else {
            self.shared
                .state
                .lock()
                .operations
                .get(descriptor.domain_id())
                .map_or(Value::Null, |id| Value::from(&**id))
        };
        CallParams {
            mutation: kind.is_mutation(method).unwrap_or(false),
            method: Value::from(method),
            args: Value::Tuple(args),
            kwargs: Value::Dict(kwargs),
            operation_id,
        }
    }

    /// A call's result: its descriptors applied, its value returned.
    fn call_value(&self, result: Value) -> ClientResult<Value> {
        let Value::Dict(mut result) = result else {
            return Err(ClientError::Protocol(ProtocolViolation::WrongType {
                what: "a call result",
                expected: "a dict",
                found: result.type_name(),
            }));
        };
        if let Some(descriptors) = result.remove("descriptors") {
            self.shared.apply_descriptors(descriptors, true)?;
        }
        Ok(result.remove("value").unwrap_or_default())
    }

    /// A node getter: from the boundary cache when allowed, live otherwise.
    pub(crate) async fn read_field(
        &self,
        resource_id: &str,
        field: &str,
        method: &str,
    ) -> ClientResult<Value> {
        if let Some(value) = self.shared.cached_field(resource_id, field)? {
            return Ok(value);
        }
        self.call(resource_id, method, Vec::new(), Dict::new())
            .await
    }

    /// The cached boundary snapshot of a resource, if any (a copy).
    ///
    /// The cache is keyed by resource and boundary `(sequence, revision)`.
    /// It is filled only from this controller's responses: env mutation
    /// results and completed operations. It is dropped for a domain before
    /// any mutation, `begin`, `abort`, `acquire` or `release` is sent, when
    /// a request on it fails, and when a newer revision or sequence of the
    /// domain is seen (in a response or an observer event); a new boundary
    /// replaces the domain's fields, never merges with them; an older
    /// version never restores them; closing the session clears everything.
    /// Node getters use it only outside operations on the domain; `render`
    /// and explicit [`Client::call`]s never use it.
    pub fn boundary_snapshot(&self, resource_id: &str) -> Option<BoundarySnapshot> {
        self.shared.state.lock().snapshots.get(resource_id).cloned()
    }

    pub(crate) async fn unsubscribe_remote(&self, subscription: &SubShared) -> ClientResult<()> {
        self.shared
            .state
            .lock()
            .subscriptions
            .remove(&subscription.id);
        if self.shared.is_closed() {
            return Ok(());
        }
        let id = Value::from(&*subscription.id);
        self.shared
            .request(
                Op::Unsubscribe,
                Some(&subscription.resource_id),
                &[("subscription_id", &id)],
                false,
            )
            .await
            .map(drop)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("session_id", &self.session_id())
            .field("closed", &self.is_closed())
            .finish()
    }
}

async fn hello(shared: &Arc<Shared>, limit: &Value) -> ClientResult<ServerInfo> {
    let result = shared
        .request(Op::Hello, None, &[("max_message_size", limit)], false)
        .await?;
    let text = |key: &str| result.get(key).and_then(Value::as_str).map(str::to_string);
    let session_id = text("session_id").ok_or(ClientError::Protocol(
        ProtocolViolation::HelloWithoutSession,
    ))?;
    let max_message_size = result
        .get("max_message_size")
        .and_then(Value::as_u64)
        .and_then(|m| usize::try_from(m).ok())
        .filter(|m| *m >= MIN_MAX_MESSAGE_SIZE)
        .ok_or(ClientError::Protocol(ProtocolViolation::HelloWithoutLimit))?;
    shared.set_session(&session_id, max_message_size);
    Ok(ServerInfo {
        session_id,
        max_message_size: shared.max_message_size(),
        server: text("server").unwrap_or_default(),
        server_version: text("server_version").unwrap_or_default(),
        protocol_versions: result
            .get("protocol_versions")
            .and_then(Value::as_seq)
            .map(|v| v.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default(),
        extensions: result
            .get("extensions")
            .and_then(Value::as_seq)
            .map(|v| {
                v.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// A call request's parameters (see [`Client::call`]).
struct CallParams {
    mutation: bool,
    method: Value,
    args: Value,
    kwargs: Value,
    operation_id: Value,
}

impl CallParams {
    fn params(&self) -> [(&str, &Value); 4] {
        [
            ("method", &self.method),
            ("args", &self.args),
            ("kwargs", &self.kwargs),
            ("operation_id", &self.operation_id),
        ]
    }
}
