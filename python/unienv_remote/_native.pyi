"""Type stub of ``unienv_remote._native``, the Rust extension (python/src/).

Checked against the built module by ``mypy.stubtest`` in ``scripts/test.sh``:
a class, method, parameter or default that changes in ``python/src/**.rs``
must change here too. The public API is the Python facade
(``unienv_remote.RemoteClient``, ``RemoteServer``, ``RemoteVectorEnv``);
these are its building blocks.
"""

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, final

from numpy.typing import NDArray

__all__ = [
    "BUILD_PROFILE", "PARQUET_PIECE_BYTES", "__version__", "encode", "decode", "Client", "Operation",
    "Subscription", "Server", "VectorEnv", "VectorStep", "Recorder", "coerce_action", "set_log_level", "flush_logs",
    "stop_logs", "set_hooks", "batch_infos", "check_resource_id", "BatchedCore", "DialHandle", "DialStatus", "Relay",
    "RelayHost", "vector_supports_attributes", "vector_call_attribute", "vector_set_attribute", "vector_render",
]

#: ``"debug"`` or ``"release"``: how the extension was compiled.
BUILD_PROFILE: str
#: Bytes of rows a Parquet piece of a recording is sized for (the Rust
#: writer's ``PIECE_BYTES``).
PARQUET_PIECE_BYTES: int
#: The package's version (``python/Cargo.toml``, the one source).
__version__: str

_SchemaKey = Tuple[int, int, int]
_Descriptor = Dict[str, Any]
# (index, error code, exception) of each sub-environment that failed.
_VectorErrors = List[Tuple[int, str, BaseException]]
# One info dict per env, or (when they allow it) already in Gymnasium's
# vector layout: {key: column, "_key": mask}.
_VectorInfos = Union[List[Dict[str, Any]], Dict[str, Any]]
# (position, final observation, final info) of each row whose episode ended.
_VectorFinals = List[Tuple[int, Any, Dict[str, Any]]]

def encode(value: object, max_message_size: int = ...) -> bytes:
    """The crate's codec: ``value`` encoded as one protocol message."""

def decode(payload: bytes, max_message_size: int = ...) -> Any:
    """The crate's codec: one protocol message decoded into Python values."""

def coerce_action(space_document: Any, action: Any) -> Any:
    """A plain action (number, nested list) as an array of the space's dtype
    and shape where that is unambiguous; anything else unchanged."""

def set_log_level(levelno: int) -> bool:
    """Forwards the crate's events at ``levelno`` and above to ``logging``;
    whether events are forwarded."""

def flush_logs(timeout: float) -> None:
    """Waits until every record queued so far reached ``logging`` (at most ``timeout`` s)."""

def stop_logs() -> None:
    """Forwards what is queued (at most one second), then nothing more."""

def batch_infos(n: int, indices: Sequence[int], infos: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Gymnasium's vector info layout of ``n`` sub-envs from the infos of
    those at ``indices`` (the crate's ``codec::vector_info::gather``)."""

def check_resource_id(resource_id: str) -> None:
    """Raises ``ValueError`` unless ``resource_id`` is one a server can host:
    non-empty, at most 1,024 bytes, no control characters."""

def set_hooks(hooks: Any) -> None:
    """Registers the package's ``NativeHooks`` (``unienv_remote/_hooks.py``),
    what the host calls back; once, at import."""

@final
class BatchedCore:
    """The stepping core of a ``BatchedEnv`` (the crate's ``BatchedCore``):
    ``subs`` are its sub-envs' ``_Sub``\ s (``env``, ``step(row)``,
    ``finish(result)``, ``reset(seed, kwargs)``), stepped in turn or on
    ``threads`` threads; ``complete(results)`` assembles the results of a
    step our host makes itself."""

    def __new__(cls, subs: Sequence[Any], threads: int, complete: Any) -> "BatchedCore": ...
    @property
    def faulted(self) -> bool:
        """Whether a sub-env raised and was not reset since."""
    def step(self, action: Any, row: Any) -> List[Any]:
        """Every sub-env's ``step(row(action, i))``; the results, in order."""
    def reset(self, mask: Optional[Sequence[bool]], seed: Union[None, int, Sequence[Optional[int]]],
              kwargs: Dict[str, Any]) -> Tuple[List[int], List[Any]]:
        """Resets the rows of ``mask`` (all when ``None``), row ``i`` with
        seed ``seed + i`` (an ``int``) or ``seed[i]``; their indices and
        results."""

@final
class Client:
    """A connection to a server (the crate's blocking client)."""

    @staticmethod
    def connect(
        uri: str,
        *,
        timeout: Optional[float] = ...,
        max_message_size: int = ...,
        token: Optional[str] = None,
        discover: bool = True,
        headers: Sequence[Tuple[str, str]] = ...,
        ca_file: Optional[str | os.PathLike[str]] = None,
    ) -> Client:
        """Connects over WebSocket, says hello and discovers every resource."""
    @property
    def session_id(self) -> str:
        """The session ID the server assigned."""
    @property
    def closed(self) -> bool:
        """Whether the connection is closed."""
    @property
    def timeout(self) -> Optional[float]:
        """The request timeout in seconds (``None``: none)."""
    def set_timeout(self, timeout: Optional[float]) -> None:
        """Sets the timeout of every request sent from now on."""
    @property
    def max_message_size(self) -> int:
        """The negotiated message size limit."""
    @property
    def requests_sent(self) -> int:
        """Requests sent on this connection so far (hello included)."""
    @property
    def server(self) -> Tuple[str, str]:
        """The server's name and version from ``hello``."""
    def close(self) -> None:
        """Closes the connection (pending requests fail, subscriptions end)."""
    def discover(self) -> List[_Descriptor]:
        """``discover``: every descriptor, as dicts."""
    def describe(self, resource_id: str) -> _Descriptor:
        """``describe``: refreshes the resource's domain and returns its descriptor."""
    def descriptors(self) -> Dict[str, _Descriptor]:
        """Every known descriptor (no request), as ``{id: descriptor}``."""
    def kind(self, resource_id: str) -> Optional[str]:
        """The resource's kind (``env``, ``world``, ``node``), or ``None`` when unknown."""
    def domain_id(self, resource_id: str) -> Optional[str]:
        """The resource's domain ID, or ``None`` when unknown."""
    def schema_since(
        self, resource_id: str, key: Optional[_SchemaKey] = None
    ) -> Optional[Tuple[_SchemaKey, _Descriptor]]:
        """The descriptor if it changed since ``key``: ``(key, descriptor)`` or ``None``."""
    def space_since(
        self, resource_id: str, name: str, serial: Optional[int] = None
    ) -> Optional[Tuple[int, Any]]:
        """``(serial, document)`` of the space ``name`` when it differs from ``serial``."""
    def call(
        self,
        resource_id: str,
        method: str,
        args: Tuple[Any, ...],
        kwargs: Optional[Dict[str, Any]] = None,
    ) -> Any:
        """``call``: a method by name with positional and keyword arguments."""
    def read(self, resource_id: str, field: str) -> Any:
        """A node getter, from the boundary snapshot cache when allowed."""
    def acquire(self, resource_id: str, mode: Optional[str] = None) -> None:
        """``acquire``: claims the domain (``mode``: ``env`` or ``components``)."""
    def release(self, resource_id: str, close_subscriptions: bool = False) -> None:
        """``release``: gives the domain back."""
    def begin(self, resource_id: str, kind: str) -> Operation:
        """``begin``: opens a component operation on the resource's domain."""
    def current_operation(self, resource_id: str) -> Optional[str]:
        """The open operation's ID on the resource's domain, if any."""
    def boundary_snapshot(self, resource_id: str) -> Optional[Dict[str, Any]]:
        """The cached boundary snapshot of a resource (no request), or ``None``."""
    def subscribe(self, resource_id: str, fields: Optional[Sequence[str]] = None) -> Subscription:
        """``subscribe``: a latest-value stream of the resource's boundaries."""

@final
class Operation:
    """An open component operation."""

    @property
    def id(self) -> str:
        """The operation ID."""
    @property
    def domain_id(self) -> str:
        """The domain it runs on."""
    def complete(self) -> List[_Descriptor]:
        """``complete``: publishes the boundary; returns the refreshed descriptors."""
    def abort(self) -> None:
        """``abort``: ends the operation without publishing."""

@final
class Subscription:
    """A snapshot stream."""

    @property
    def id(self) -> str:
        """The subscription ID."""
    @property
    def resource_id(self) -> str:
        """The observed resource."""
    @property
    def closed(self) -> bool:
        """Whether the stream has ended."""
    def next(self, timeout: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """The next snapshot message, ``None`` once the stream has ended."""
    def close(self) -> None:
        """Unsubscribes (waits for the server's acknowledgement); idempotent."""

@final
class Server:
    """A running server hosting the Python objects laid out by ``RemoteServer``."""

    def __new__(
        cls,
        server: object,
        domains: List[Tuple[str, Any]],
        *,
        max_message_size: int,
        idle_timeout: Optional[float],
        token: Optional[str] = None,
        allowed_origins: Sequence[str] = ...,
        allowed_hosts: Sequence[str] = ...,
        max_connections: int = 1024,
        max_in_flight: int = 64,
        max_subscriptions_per_session: int = 1024,
        env_boundary_snapshots: bool = False,
        shutdown_timeout: float = 10.0,
        handshake_timeout: float = 10.0,
        tls_cert: Optional[str | os.PathLike[str]] = None,
        tls_key: Optional[str | os.PathLike[str]] = None,
        validate_actions: bool = True,
        record_dir: Optional[str | os.PathLike[str]] = None,
        max_connection_bytes: Optional[int] = None,
        max_server_bytes: Optional[int] = None,
        record_format: Optional[object] = None,
        cpus: Optional[List[int]] = None,
        record_queue_bytes: Optional[int] = None,
        reply_hold: Optional[float] = ...,
    ) -> Server: ...
    def serve_metrics(self, addr: str) -> str:
        """Serves the metrics (Prometheus text format) on ``addr``; returns its URL."""
    def metrics_text(self) -> str:
        """The metrics as the endpoint serves them (Prometheus text format)."""
    def listen(self, host: str, port: int) -> int:
        """Starts a WebSocket listener; returns the bound port."""
    def listen_unix(self, path: str | os.PathLike[str]) -> str:
        """Starts a listener on the Unix domain socket ``path``; returns its ``ws+unix://`` URL."""
    def connect_memory(self, *, timeout: Optional[float] = ..., max_message_size: int = ...) -> Client:
        """Connects an in-memory client."""
    def dial(
        self,
        url: str,
        name: str,
        *,
        token: Optional[str] = None,
        ca_file: Optional[str | os.PathLike[str]] = None,
        connect_timeout: float = 10.0,
        initial_backoff: float = 0.25,
        max_backoff: float = 10.0,
    ) -> DialHandle:
        """Dials the relay at ``url`` and registers as ``name``."""
    @property
    def session_count(self) -> int:
        """Number of connected sessions."""
    def close(self) -> None:
        """Closes every session, disposes of every domain and stops the runtime. Idempotent."""

@final
class VectorStep:
    """What ``VectorEnv.step_wait`` and ``recv`` return: one vector step's
    results by name, rows in the order of ``env_id``."""

    def __new__(
        cls,
        observation: Any,
        reward: NDArray[Any],
        terminated: NDArray[Any],
        truncated: NDArray[Any],
        infos: _VectorInfos,
        autoreset: NDArray[Any],
        finals: _VectorFinals,
        errors: _VectorErrors,
        env_id: NDArray[Any],
    ) -> VectorStep: ...
    @property
    def observation(self) -> Any:
        """The stacked observations (``None`` when no env returned one)."""
    @property
    def reward(self) -> NDArray[Any]:
        """``float64`` rewards, one per row."""
    @property
    def terminated(self) -> NDArray[Any]:
        """``bool`` terminations, one per row."""
    @property
    def truncated(self) -> NDArray[Any]:
        """``bool`` truncations, one per row."""
    @property
    def infos(self) -> _VectorInfos:
        """One info dict per row, or Gymnasium's vector layout; ``[]`` when all are empty."""
    @property
    def autoreset(self) -> NDArray[Any]:
        """``bool``, per row: the row is an autoreset's (NextStep mode)."""
    @property
    def finals(self) -> _VectorFinals:
        """``(position, final_obs, final_info)`` of the rows whose episode ended (SameStep mode)."""
    @property
    def errors(self) -> _VectorErrors:
        """``(index, kind, exception)`` of the envs that failed."""
    @property
    def env_id(self) -> NDArray[Any]:
        """``int64``: each row's env index."""

@final
class VectorEnv:
    """Sub-environments on several servers, stepped together."""

    def __new__(
        cls,
        addresses: Sequence[Tuple[str, str]],
        autoreset_mode: str = "NextStep",
        timeout: Optional[float] = ...,
        token: Optional[str] = None,
        ca_file: Optional[str | os.PathLike[str]] = None,
    ) -> VectorEnv: ...
    @property
    def num_envs(self) -> int:
        """The number of sub-environments."""
    def space_document(self, name: str) -> Any:
        """The serialized form of one sub-environment's space ``name``."""
    def resource_ranges(self) -> List[Tuple[int, int]]:
        """Each resource's first sub-environment and its number of sub-environments."""
    def env_metadata(self) -> Dict[str, Any]:
        """Env 0's metadata dict."""
    def reset(
        self,
        seeds: Sequence[Optional[int]],
        options: Optional[object] = None,
        mask: Optional[Sequence[bool]] = None,
    ) -> Tuple[Any, _VectorInfos, _VectorErrors, NDArray[Any]]:
        """Resets the envs; ``(observation, infos, errors, mask)``, ``infos`` as in ``VectorStep``
        (the envs not reset left out of a gathered dict)."""
    def step_async(self, actions: object) -> None:
        """Sends every env's step at once and returns."""
    def step_wait(
        self,
    ) -> VectorStep:
        """Waits for the pending step; the last item is the sub-environments' ids."""
    def send(self, actions: object, env_id: Sequence[int]) -> None:
        """Sends the step of the sub-environments ``env_id`` (whole resources)."""
    def recv(
        self, min: int
    ) -> VectorStep:
        """Waits for the results of at least ``min`` sub-environments (whole resources)."""
    def reconnect(self, changes: Sequence[Tuple[int, str, str]]) -> None:
        """Points envs at new addresses (``[(index, url, resource_id)]``), all or nothing."""
    def failed(self) -> List[bool]:
        """Which envs must be reset before they are stepped."""
    def step_pending(self) -> bool:
        """Whether a step is pending."""
    def close(self) -> None:
        """Closes every connection (idempotent)."""

def vector_supports_attributes(env: VectorEnv, index: int) -> bool:
    """Whether resource ``index``'s server lists the attribute extension."""

def vector_call_attribute(env: VectorEnv, index: int, name: str, args: List[Any], kwargs: Dict[str, Any]) -> List[Any]:
    """``ext:call`` on resource ``index``: one result per sub-env."""

def vector_set_attribute(env: VectorEnv, index: int, name: str, values: List[Any]) -> None:
    """``ext:set_attr`` on resource ``index``: ``values`` one per sub-env."""

def vector_render(env: VectorEnv, index: int) -> Any:
    """Protocol v1's ``render`` call on resource ``index``."""

@final
class Recorder:
    """A vector env's learner-side recording: one ``unienv_data``
    ``ReplayBuffer`` per sub-env under ``dir``, written by a Rust thread.
    ``record_format`` (as ``Server``'s): ``None`` or ``"parquet"`` (the
    default, ``ParquetStorage``), ``"npz"``, or ``("parquet", piece_bytes)``."""

    def __new__(
        cls,
        dir: str | os.PathLike[str],
        observation_space: Any,
        action_space: Any,
        num_envs: int,
        record_format: Optional[object] = None,
    ) -> Recorder: ...
    def reset(self, observation: Any, used: Any, errors: _VectorErrors) -> None:
        """A reset's results (``used``: the envs that were reset)."""
    def sent(self, actions: object, env_id: Optional[Sequence[int]] = None) -> None:
        """The actions sent to ``env_id`` (all when ``None``), stacked in that order."""
    def stepped(self, native: VectorStep) -> None:
        """A step's or ``recv``'s native results."""
    def flush(self) -> None:
        """Waits until everything recorded before is written."""
    def close(self) -> None:
        """Commits every open episode and stops the writer (idempotent);
        warns (``RuntimeWarning``) once when anything could not be recorded."""
    @property
    def error(self) -> Optional[str]:
        """How many times recording failed and the first failure, or ``None``."""
    def stats(self) -> Dict[str, int]:
        """``transitions`` (committed), ``episodes``, ``queue_waits``, ``errors``."""

@final
class DialStatus:
    """Where a dialing host stands (``DialHandle.status()``)."""

    @property
    def state(self) -> str:
        """``"connecting"``, ``"registered"``, ``"waiting"`` (before the next attempt) or ``"stopped"``."""
    @property
    def relay(self) -> str:
        """The relay's URL."""
    @property
    def name(self) -> str:
        """The name registered (or asked for)."""
    @property
    def attempts(self) -> int:
        """Attempts since the last registration (the current one included)."""
    @property
    def registrations(self) -> int:
        """Registrations so far (a re-dial after a loss counts again)."""
    @property
    def tunnels(self) -> int:
        """Tunnels opened for clients so far (one per client session)."""
    @property
    def last_error(self) -> Optional[str]:
        """The last failure (a refused registration with the relay's reason, a lost connection)."""
    @property
    def retry_in(self) -> Optional[float]:
        """While waiting: seconds until the next attempt."""

@final
class DialHandle:
    """A server's dialing to one relay (``RemoteServer.dial``)."""

    def status(self) -> DialStatus:
        """The current state."""
    def wait_registered(self, timeout: Optional[float] = None) -> bool:
        """Waits until registered (at most ``timeout`` seconds; ``None``: without limit); whether it is."""
    def stop(self) -> None:
        """Stops dialing and closes the connection to the relay (in the background). Idempotent."""

@final
class RelayHost:
    """A host connected to a :class:`Relay`, as it lists it."""

    @property
    def name(self) -> str:
        """The name clients reach it by."""
    @property
    def server(self) -> str:
        """Its software (``unienv-remote``)."""
    @property
    def version(self) -> str:
        """Its software's version."""
    @property
    def resources(self) -> List[str]:
        """The resource IDs it hosts (its root registrations)."""
    @property
    def clients(self) -> int:
        """Client sessions forwarded to it now."""
    @property
    def connected_for(self) -> float:
        """Seconds since it registered."""
    @property
    def url(self) -> str:
        """``ws://RELAY/hosts/NAME``: where clients reach it."""

@final
class Relay:
    """A relay in this process: hosts dial ``url`` and register under a name;
    clients reach them at ``ws://HOST:PORT/hosts/NAME``."""

    def __new__(
        cls,
        addr: str = "127.0.0.1:0",
        *,
        token: Optional[str] = None,
        host_token: Optional[str] = None,
        tls_cert: Optional[str | os.PathLike[str]] = None,
        tls_key: Optional[str | os.PathLike[str]] = None,
        allowed_hosts: Sequence[str] = ...,
        allowed_origins: Sequence[str] = ...,
        max_message_size: int = ...,
        max_connections: int = 1024,
        max_hosts: int = 4096,
        open_timeout: float = 10.0,
    ) -> Relay: ...
    @property
    def url(self) -> str:
        """``ws://HOST:PORT`` (``wss://`` with TLS): what hosts dial."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    def host_url(self, name: str) -> str:
        """``ws://HOST:PORT/hosts/NAME``: where clients reach the host ``name``."""
    def hosts(self) -> List[RelayHost]:
        """The connected hosts, by name."""
    def addresses(self, resource: Optional[str] = None) -> List[Tuple[str, str]]:
        """``(url, resource_id)`` of every connected host's resources (or of ``resource`` only), by host name."""
    def wait_for(self, n: int, timeout: Optional[float] = None) -> List[RelayHost]:
        """Waits until at least ``n`` hosts are connected; ``TimeoutError`` after ``timeout`` seconds."""
    def close(self) -> None:
        """Stops the relay: closes every connection and frees the port. Idempotent."""
    def __enter__(self) -> Relay: ...
    def __exit__(self, *args: object) -> None: ...
