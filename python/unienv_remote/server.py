"""``unienv_remote.RemoteServer``: the unienv-remote Rust server hosting Python objects.

A drop-in for ``unienv_interface.remote.RemoteServer`` (unienv 0.0.1b14)::

    from unienv_remote import RemoteServer   # was: from unienv_interface.remote import RemoteServer

Registration is the reference's, in Python (the same forms, checks and resource
IDs); everything after it — protocol, codec, sessions, queues, snapshots,
transports — runs in Rust. Each execution domain has a worker thread that holds
the GIL only while it calls into the hosted objects, so simulators that release
the GIL (NumPy, MuJoCo) step independent domains in parallel.
"""

from __future__ import annotations

import logging
import math
import os
from threading import Lock
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, TYPE_CHECKING, Union
from urllib.parse import quote

from unienv_interface.env_base.env import Env
from unienv_interface.remote.codec import DEFAULT_MAX_MESSAGE_SIZE, Codec, map_arrays
from unienv_interface.world.env_composer import WorldEnv
from unienv_interface.world.node import WorldNode
from unienv_interface.world.world import World

from . import _logging, _native
from ._record import native_format

if TYPE_CHECKING:
    from .client import RemoteClient

HostedResource = Union[Env, World, WorldNode]
ResourceFactory = Callable[[], HostedResource]

__all__ = ["RemoteServer"]


class _Resource:
    __slots__ = ("id", "obj", "kind", "domain", "world_id", "node_id", "children")

    def __init__(self, resource_id: str, obj: HostedResource, kind: str, domain: "_Domain") -> None:
        self.id, self.obj, self.kind, self.domain = resource_id, obj, kind, domain
        self.world_id: Optional[str] = None
        self.node_id: Optional[str] = None
        self.children: Dict[str, str] = {}


class _Domain:
    __slots__ = ("resources", "factory", "root_id")

    def __init__(self, factory: Optional[ResourceFactory] = None, root_id: Optional[str] = None) -> None:
        self.resources: List[_Resource] = []
        self.factory, self.root_id = factory, root_id


def _is_numpy(obj: HostedResource) -> bool:
    backend = getattr(obj, "backend", None)
    return getattr(backend, "simplified_name", None) == "numpy" and getattr(obj, "device", None) is None


class RemoteServer:
    """Host objects or lazy root factories. Register resources before connecting.

    The reference's constructor arguments (``max_message_size``, ``idle_timeout``)
    and these additions:

    * ``token``: WebSocket clients must send ``Authorization: Bearer <token>``.
    * ``allowed_origins`` / ``allowed_hosts``: browser origins and ``Host`` names
      allowed besides loopback ones (``"*"`` allows any origin).
    * ``max_connections``, ``max_in_flight`` (requests a session may have queued),
      ``max_subscriptions_per_session``: limits.
    * ``env_boundary_snapshots``: also repeat an env call's own fields as its
      boundary snapshot (the reference does; off by default, as the values are
      already the call's result).
    * ``shutdown_timeout``: seconds ``close()`` waits for each domain's worker
      (a simulator hung past it is left behind).
    * ``tls_cert`` / ``tls_key``: serve ``wss://`` (TLS) with this certificate
      chain (PEM, leaf first) and private key (PEM), as ``unienv-remote serve
      --tls-cert FILE --tls-key FILE``; both or neither. They are read when the
      server starts (first ``listen``/``connect``): a bad file raises
      ``ValueError`` there.
    * ``validate_actions`` (on by default; the reference has no such check):
      before an env's ``step`` or a node's ``set_next_action`` reaches the
      object, a plain action (``1``, ``0.5``, ``[0.5]``, nested lists) becomes
      an array of the action space's dtype and shape, and the action is
      checked against the space (dtype, shape, bounds, finiteness, dict and
      tuple structure; Gymnasium's ``Discrete`` range through
      ``FromGymnasiumEnv``); a refused action, or ``step`` before the first
      ``reset``, is a certain ``invalid_request`` naming the problem, and the
      env stays usable. ``validate_actions=False`` passes actions through
      untouched, as the reference does.
    * ``record_dir``: record every env-mode transition of every env resource
      into ``record_dir/<resource_id>/`` as a ``unienv_data`` ``ReplayBuffer``
      (one per sub-env of a batched env), one segment per episode, written by
      a thread of its own and committed at each episode's end; ``close()``
      commits the open episodes. Open it with ``ReplayBuffer.load_from(path,
      backend=NumpyComputeBackend)``.
    * ``record_format``: how ``record_dir``'s buffers store their elements:
      ``"parquet"`` (default: ``unienv_data``'s ``ParquetStorage``, pieces
      of many transitions, a few files per episode, written by the Rust
      recorder; loading it needs pyarrow beside unienv, which
      ``unienv_data.storages.parquet`` imports: without it ``load_from``
      raises ``ModuleNotFoundError``; recording does not need it, and warns
      once when it is missing here) or ``"npz"`` (one ``NPZStorage`` file
      per transition, loadable with unienv alone, far dearer to write). See
      docs/recording.md.
    * ``metrics``: an address (``"127.0.0.1:9464"``, port 0 for any) at which
      the server's metrics are served in the Prometheus text format, from the
      first ``listen``/``connect`` on; ``metrics_url`` is then
      ``http://ADDR/metrics``. No authentication: keep it on loopback or a
      monitoring network.
    * ``max_connection_bytes`` / ``max_server_bytes``: the byte budgets, most
      bytes one connection may hold at once (default 256 MiB; beyond it the
      connection is closed, 1008) and most all connections together may hold
      beyond their first MiB each (default 8 GiB; 1013). ``None``: the default.
    * ``record_queue_bytes``: with ``record_dir``, most bytes of transitions
      waiting for the recorder's writer (default 256 MiB); beyond it the
      simulators wait for the disk (SPEC.md section 10.2). ``None``: the default.
    * ``cpus``: run the server's threads (its domain workers, with any
      threads they start, its runtime and its recorder) on these CPUs only,
      e.g. ``[0]``; default ``None``, wherever the OS schedules them. With
      several server processes beside a learner on one machine, one server
      process per vCPU (``cpus=[i % os.cpu_count()]``, the learner unpinned)
      steps faster, the more so the busier the machine (BENCHMARKS.md, "Vector envs and throughput"). The
      calling (Python main) thread is left as it is. A CPU the machine does not
      have, or one outside the process's allowed set (``os.sched_getaffinity``),
      raises ``ValueError`` when the server starts (first
      ``listen``/``connect``); Linux only (elsewhere, any ``cpus`` raises).
    * ``reply_hold``: seconds a response may wait for the same session's
      other requests still at simulators, to be written together with theirs
      (default 0.0005; ``None`` writes each at once). A learner stepping many
      envs on one connection then wakes once per batch of replies; a reply is
      never held longer than this, whatever the other requests do (SPEC.md
      section 8.4).
    """

    def __init__(self, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 idle_timeout: Optional[float] = 60.0, token: Optional[str] = None,
                 allowed_origins: Sequence[str] = (), allowed_hosts: Sequence[str] = (),
                 max_connections: int = 1024, max_in_flight: int = 64,
                 max_subscriptions_per_session: int = 1024, env_boundary_snapshots: bool = False,
                 shutdown_timeout: float = 10.0, tls_cert: Optional[Union[str, os.PathLike[str]]] = None,
                 tls_key: Optional[Union[str, os.PathLike[str]]] = None,
                 validate_actions: bool = True,
                 record_dir: Optional[Union[str, os.PathLike[str]]] = None,
                 record_format: str = "parquet",
                 metrics: Optional[str] = None,
                 max_connection_bytes: Optional[int] = None,
                 max_server_bytes: Optional[int] = None,
                 cpus: Optional[Sequence[int]] = None,
                 record_queue_bytes: Optional[int] = None,
                 reply_hold: Optional[float] = 0.0005) -> None:
        if idle_timeout is not None and (not math.isfinite(idle_timeout) or idle_timeout <= 0):
            raise ValueError("idle_timeout must be positive and finite, or None")
        if type(max_message_size) is not int or max_message_size < 8:
            raise ValueError("max_message_size must be an integer of at least 8")
        if not isinstance(shutdown_timeout, (int, float)) or not math.isfinite(shutdown_timeout) or shutdown_timeout <= 0:
            raise ValueError("shutdown_timeout must be positive and finite")
        if reply_hold is not None and (not isinstance(reply_hold, (int, float)) or not math.isfinite(reply_hold)
                                       or reply_hold <= 0):
            raise ValueError("reply_hold must be positive and finite (seconds), or None")
        # As in the reference: the codec's limit and idle_timeout are public
        # attributes, read when the server starts (first listen/connect).
        self.codec = Codec(max_message_size)
        self.idle_timeout = idle_timeout
        self._options: Dict[str, Any] = dict(
            token=token, allowed_origins=list(allowed_origins), allowed_hosts=list(allowed_hosts),
            max_connections=max_connections, max_in_flight=max_in_flight,
            max_subscriptions_per_session=max_subscriptions_per_session,
            env_boundary_snapshots=env_boundary_snapshots, shutdown_timeout=shutdown_timeout,
            tls_cert=None if tls_cert is None else os.fspath(tls_cert),
            tls_key=None if tls_key is None else os.fspath(tls_key),
            validate_actions=bool(validate_actions),
            record_dir=None if record_dir is None else os.fspath(record_dir),
            record_format=native_format(record_format, record_dir is not None),
            reply_hold=reply_hold)
        for name, budget in (("max_connection_bytes", max_connection_bytes),
                             ("max_server_bytes", max_server_bytes),
                             ("record_queue_bytes", record_queue_bytes)):
            if budget is not None and (type(budget) is not int or budget <= 0):
                raise ValueError(f"{name} must be a positive integer, or None")
            self._options[name] = budget
        if cpus is not None:
            if isinstance(cpus, (str, bytes)) or not all(type(c) is int and c >= 0 for c in cpus):
                raise ValueError("cpus must be a sequence of CPU numbers (non-negative integers), or None")
            self._options["cpus"] = list(cpus)
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both (PEM files) or neither")
        self.tls = tls_cert is not None
        self._resources: Dict[str, _Resource] = {}
        self._objects: Dict[int, str] = {}
        self._domains: Dict[Any, _Domain] = {}
        self._world_owners: Dict[int, _Domain] = {}
        self._lock = Lock()
        self._native: Optional[_native.Server] = None
        self._closed = False
        self._listening = False
        # Dialing stops when its last handle goes: the server keeps them.
        self._dials: List[_native.DialHandle] = []
        self._metrics_addr = metrics
        self.metrics_url: Optional[str] = None

    @property
    def max_message_size(self) -> int:
        """``codec.max_message_size``."""
        size: int = self.codec.max_message_size
        return size

    @max_message_size.setter
    def max_message_size(self, value: int) -> None:
        self.codec.max_message_size = value

    # -- registration (the reference's rules) ----------------------------------

    def register(self, resource_id: str, obj_or_factory: Union[HostedResource, ResourceFactory]) -> str:
        """Register an Env, World, WorldNode, or zero-arg root factory.

        WorldEnv exports its world and complete node tree automatically.
        Re-registering the same object returns its existing ID, without aliases.
        A root WorldNode with world=None owns a separate domain, including its
        detached children. Factories run on the domain's worker on first access
        (including discovery); their topology must stay identical across idle
        eviction and revival.
        """
        with self._lock:
            if self._native is not None or self._closed:
                raise RuntimeError("Register resources before starting the server")
            if callable(obj_or_factory):
                if not isinstance(resource_id, str) or not resource_id:
                    raise ValueError("resource_id must be a nonempty string")
                _native.check_resource_id(resource_id)
                if resource_id in self._resources:
                    raise ValueError(f"Resource ID already registered: {resource_id}")
                domain = _Domain(factory=obj_or_factory, root_id=resource_id)
                # A placeholder until the factory runs (routing and ID checks).
                self._resources[resource_id] = _Resource(resource_id, None, None, domain)  # type: ignore[arg-type]
                self._domains[resource_id] = domain
                return resource_id
            return self._register(resource_id, obj_or_factory)[0]

    def _register(self, resource_id: str, obj: HostedResource, target: Optional[_Domain] = None) -> Tuple[str, List[_Resource]]:
        """Lays out ``obj``'s tree: its canonical ID and, for a factory's
        product (``target``), the domain's resources (the registry is left as
        it was); otherwise the registry is updated and the list is empty."""
        resources, objects, domains = self._resources.copy(), self._objects.copy(), self._domains.copy()
        world_owners = self._world_owners.copy()
        members = {key: list(domain.resources) for key, domain in domains.items()}
        if target is not None:
            # A factory's product: laid out on its own, never merged into the
            # registry (a registered object met in it is refused below).
            resources = {key: value for key, value in resources.items() if value.domain is not target}
            members[target.root_id] = []
        root_world: List[Any] = []
        detached_root = obj if isinstance(obj, WorldNode) and obj.world is None else None
        detached_key = ("node", id(detached_root)) if detached_root is not None else None

        def visit(resource_id: str, obj: HostedResource) -> str:
            if not isinstance(resource_id, str) or not resource_id:
                raise ValueError("resource_id must be a nonempty string")
            _native.check_resource_id(resource_id)
            if resource_id in resources and resources[resource_id].obj is not obj:
                raise ValueError(f"Resource ID already registered: {resource_id}")
            if id(obj) in objects:
                existing = resources[objects[id(obj)]]
                if target is not None and existing.domain is not target:
                    raise ValueError("Factory trees must not share registered objects")
                expected_key = target.root_id if target is not None else detached_key
                if detached_root is not None and obj is not detached_root and existing.domain is not domains.get(expected_key):
                    raise ValueError("Detached node trees must not share registered nodes across domains")
                return objects[id(obj)]
            if not isinstance(obj, (Env, World, WorldNode)):
                raise TypeError("Expected Env, World, or WorldNode")
            kind = "env" if isinstance(obj, Env) else ("world" if isinstance(obj, World) else "node")
            base = obj.unwrapped if isinstance(obj, Env) else obj
            world = base.world if isinstance(base, (WorldEnv, WorldNode)) else base
            if world is None:
                if detached_root is None:
                    raise ValueError("Only detached node roots and their children may omit a world")
                if getattr(obj, "backend", None) is None:
                    raise ValueError("Detached nodes must declare a backend; the RPC device defaults to None")
            key: Any = detached_key if world is None else id(world)
            if target is not None:
                if world is not None:
                    if not root_world:
                        root_world.append(world)
                    if world is not root_world[0]:
                        raise ValueError("Factory trees must have their own single world")
                key = target.root_id
            if key not in domains:
                domains[key] = _Domain()
                members[key] = []
            domain = domains[key]
            if world is not None:
                owner = world_owners.get(id(world))
                if owner is not None and owner is not domain:
                    raise ValueError("Underlying world or environment already belongs to another domain")
                world_owners[id(world)] = domain
            resource = _Resource(resource_id, obj, kind, domain)
            resources[resource_id] = resource
            objects[id(obj)] = resource_id
            members[key].append(resource)
            if isinstance(base, (WorldEnv, WorldNode)) and world is not None:
                resource.world_id = visit(resource_id + "/world", world)
            if isinstance(base, WorldEnv):
                resource.node_id = visit(resource_id + "/node", base.node)
            if isinstance(obj, WorldNode):
                for child in getattr(obj, "nodes", ()):
                    if child.world is not world:
                        raise ValueError("All children must retain their server-side world")
                    if child.name in resource.children:
                        raise ValueError("Duplicate child node name")
                    resource.children[child.name] = visit(resource_id + "/" + quote(child.name, safe=""), child)
            return resource_id

        canonical_id = visit(resource_id, obj)
        if target is not None:
            return canonical_id, members[target.root_id]
        for key, domain in domains.items():
            domain.resources = members[key]
        self._resources, self._objects, self._domains = resources, objects, domains
        self._world_owners = world_owners
        return canonical_id, []

    # -- called by the Rust domains ----------------------------------------------

    @staticmethod
    def _entries(resources: Iterable[_Resource]) -> List[Tuple[Any, ...]]:
        return [(r.id, r.kind, r.obj, r.world_id, r.node_id, list(r.children.items()), _is_numpy(r.obj))
                for r in resources]

    def _layout_factory(self, root_id: str, obj: HostedResource) -> List[Tuple[Any, ...]]:
        """Lays out a factory's product (on its domain's worker)."""
        with self._lock:
            domain = self._domains.get(root_id)
            if domain is None:
                raise ValueError("Unknown factory")
            try:
                _, resources = self._register(root_id, obj, target=domain)
            except Exception:
                self._dispose_rejected(obj)
                raise
        return self._entries(resources)

    def _dispose_rejected(self, obj: HostedResource) -> None:
        # A rejected product is closed unless it holds registered objects.
        if id(obj) in self._objects:
            return
        try:
            obj.close()
        except Exception:
            logging.getLogger(__name__).exception("Rejected factory object cleanup failed")

    @staticmethod
    def _map_arguments(obj: HostedResource, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        """Converts array arguments to a non-NumPy resource's backend and device."""
        backend, device = obj.backend, getattr(obj, "device", None)
        return tuple(map_arrays(list(args), backend, device)), map_arrays(kwargs, backend, device)

    @staticmethod
    def _dispose(items: List[Tuple[str, HostedResource]]) -> None:
        """Closes a domain's objects once, as the reference does: the outermost
        registered wrapper chain (whose close releases what it wraps), then nodes
        no closed object covers, then a world no WorldEnv covers."""
        nodes = [obj for kind, obj in items if kind == "node"]
        child_ids = {id(child) for node in nodes for child in getattr(node, "nodes", ())}
        environments = [obj for kind, obj in items if kind == "env"]
        covered_nodes: Set[int] = set()

        def cover(node: WorldNode) -> None:
            if id(node) in covered_nodes:
                return
            covered_nodes.add(id(node))
            for child in getattr(node, "nodes", ()):
                cover(child)

        wrapped_ids: Set[int] = set()
        for env in environments:
            current = getattr(env, "env", None)
            while isinstance(current, Env) and id(current) not in wrapped_ids:
                wrapped_ids.add(id(current))
                current = getattr(current, "env", None)
        roots = [env for env in environments if id(env) not in wrapped_ids]
        objects: List[Any] = roots[:1]
        world_covered = False
        if roots:
            base = roots[0].unwrapped
            if isinstance(base, WorldEnv):
                cover(base.node)
                world_covered = True
        objects += [node for node in nodes if id(node) not in child_ids and id(node) not in covered_nodes]
        if not world_covered:
            objects += [obj for kind, obj in items if kind == "world"]
        for obj in objects:
            try:
                obj.close()
            except BaseException:
                logging.getLogger(__name__).exception("Closing %r failed", obj)

    # -- serving -------------------------------------------------------------------

    def _start(self) -> _native.Server:
        with self._lock:
            if self._closed:
                raise RuntimeError("Server is closed")
            if self._native is None:
                _logging.start()
                domains: List[Tuple[Any, ...]] = []
                for domain in self._domains.values():
                    if domain.factory is not None:
                        domains.append((domain.root_id, domain.factory))
                    else:
                        domains.append((domain.resources[0].id, self._entries(domain.resources)))
                idle = self.idle_timeout
                if idle is not None and (not math.isfinite(idle) or idle <= 0):
                    raise ValueError("idle_timeout must be positive and finite, or None")
                native = _native.Server(self, domains, max_message_size=self.codec.max_message_size,
                                        idle_timeout=idle, **self._options)
                if self._metrics_addr is not None:
                    try:
                        self.metrics_url = native.serve_metrics(self._metrics_addr)
                    except BaseException:
                        native.close()
                        raise
                self._native = native
            return self._native

    def metrics_text(self) -> str:
        """The server's metrics in the Prometheus text format (as its endpoint serves them)."""
        return self._start().metrics_text()

    def listen(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Start the WebSocket listener; return its ws:// endpoint (wss:// with TLS)."""
        if self._closed or self._listening:
            raise RuntimeError("Server is closed or already listening")
        native = self._start()
        bound = native.listen(host, port)
        self._listening = True
        scheme = "wss" if self.tls else "ws"
        url = f"{scheme}://{'[' + host + ']' if ':' in host else host}:{bound}"
        logging.getLogger(__name__).info("listening on %s (%d resources)", url, len(self._resources))
        return url

    def listen_unix(self, path: Union[str, "os.PathLike[str]"]) -> str:
        """Start the WebSocket listener on the Unix domain socket ``path`` (for
        clients on this machine) instead of a TCP port; return its
        ``ws+unix://PATH`` URL. A stale socket file is replaced; the socket is
        made owner-only (mode 0600) and removed when the server closes."""
        if self._closed or self._listening:
            raise RuntimeError("Server is closed or already listening")
        native = self._start()
        url = native.listen_unix(os.fspath(path))
        self._listening = True
        return url

    def dial(self, url: str, *, name: str, token: Optional[str] = None,
             ca_file: Optional[Union[str, "os.PathLike[str]"]] = None, connect_timeout: float = 10.0,
             initial_backoff: float = 0.25, max_backoff: float = 10.0) -> _native.DialHandle:
        """Host by dialing out: connect to the relay at ``url`` (``ws://HOST:PORT``
        or ``wss://``; ``unienv-remote relay`` or :class:`unienv_remote.Relay`)
        and register as ``name`` (1 to 64 of ``A-Z a-z 0-9 . _ -``, starting
        with a letter or digit). Clients, the reference's included, then reach
        this server at ``ws://HOST:PORT/hosts/NAME``, each client session
        served as an accepted connection is. ``token``: the relay's host
        token; ``ca_file``: CA certificates (PEM) to trust for ``wss://``
        besides the system's.

        Returns at once with a :class:`~unienv_remote.DialHandle`; the
        connection is made in the background and re-made after any loss (a
        refused registration included), with backoff from ``initial_backoff``
        seconds doubling up to ``max_backoff`` (each wait drawn between half
        and all of it), each attempt bounded by ``connect_timeout``; a
        re-dial gets the name back. ``handle.wait_registered(timeout)``
        waits for registration, ``handle.status()`` tells the state and the
        last failure, ``handle.stop()`` stops dialing (so does ``close()``).
        A server may dial several relays, and listen too. An invalid name or
        URL raises ``ValueError``.
        """
        native = self._start()
        handle = native.dial(url, name, token=token, ca_file=None if ca_file is None else os.fspath(ca_file),
                             connect_timeout=connect_timeout, initial_backoff=initial_backoff,
                             max_backoff=max_backoff)
        self._dials.append(handle)
        logging.getLogger(__name__).info("dialing %s as %r (%d resources)", url, name, len(self._resources))
        return handle

    def connect(self, **client_options: Any) -> RemoteClient:
        """Create an in-memory ``unienv_remote.RemoteClient`` using the full wire protocol."""
        from .client import RemoteClient
        native = self._start()
        client_options.setdefault("max_message_size", self.max_message_size)
        memory = native.connect_memory(timeout=client_options.get("timeout", 30.0),
                                       max_message_size=client_options["max_message_size"])
        return RemoteClient(memory, **client_options)

    @property
    def session_count(self) -> int:
        """Connected sessions (0 before the server starts)."""
        return 0 if self._native is None else self._native.session_count

    def close(self) -> None:
        """Close every session and dispose of every domain (each close hook once)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            native = self._native
        for handle in self._dials:
            handle.stop()
        if native is not None:
            native.close()
            _logging.flush()
            logging.getLogger(__name__).info("server closed")
        self._resources.clear()
        self._objects.clear()
        self._domains.clear()
        self._world_owners.clear()

    def __enter__(self) -> RemoteServer:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


# -- Extension: sub-env attributes (SPEC.md, "Extension: sub-env attributes") --
# Called by the host (python/src/host/server/attributes.rs) on the domain's
# worker thread, for an env resource's ``ext:call`` / ``ext:set_attr``.


def _attribute_targets(obj: Any) -> List[Any]:
    """What an env resource's attributes are read on, one per sub-env: a
    ``BatchedEnv``'s sub-envs, else the env itself; each a Gymnasium env
    where it wraps one (``FromGymnasiumEnv``), as Gymnasium's vector envs
    reach their sub-envs."""
    import sys

    from ._gym_spaces import gymnasium_env

    batched = sys.modules.get(f"{__package__}.batched")
    subs = list(obj.sub_envs) if batched is not None and isinstance(obj, batched.BatchedEnv) else [obj]
    return [gymnasium_env(s) for s in subs]


def _refused(message: str) -> BaseException:
    from ._hooks import RequestRefused

    return RequestRefused(message)


def _call_attribute(obj: Any, name: str, args: List[Any], kwargs: Dict[str, Any]) -> List[Any]:
    """``ext:call``: attribute ``name`` of each sub-env (``get_wrapper_attr``
    on a Gymnasium env), called with ``args`` and ``kwargs`` when callable,
    else its value. Every sub-env's attribute is looked up before any is
    called: a missing one is refused (``RequestRefused``) with nothing run."""
    found = []
    for i, target in enumerate(_attribute_targets(obj)):
        try:
            found.append(target.get_wrapper_attr(name) if hasattr(target, "get_wrapper_attr")
                         else getattr(target, name))
        except AttributeError as e:
            raise _refused(f"sub-env {i} ({type(target).__name__}) has no attribute {name!r}") from e
    return [attr(*args, **kwargs) if callable(attr) else attr for attr in found]


def _set_attribute(obj: Any, name: str, values: List[Any]) -> None:
    """``ext:set_attr``: attribute ``name`` of sub-env ``i`` set to
    ``values[i]`` (``set_wrapper_attr`` on a Gymnasium env); as many values
    as sub-envs, else refused with nothing set."""
    targets = _attribute_targets(obj)
    if len(values) != len(targets):
        raise _refused(f"set_attr({name!r}) takes one value per sub-env: this env has {len(targets)}, "
                       f"got {len(values)} values")
    for target, value in zip(targets, values):
        if hasattr(target, "set_wrapper_attr"):
            target.set_wrapper_attr(name, value)
        else:
            setattr(target, name, value)
