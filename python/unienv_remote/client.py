"""``RemoteClient`` and ``Subscription``: the reference client's public surface
(``unienv_interface.remote.client``, unienv 0.0.1b14) over the Rust client core.

The protocol runs in Rust (``unienv_remote._native.Client``): transport,
codec, descriptor store, boundary-snapshot cache and its invalidation rules,
operation guards. The GIL is released while a request waits on the network.
"""

from __future__ import annotations

import os
import socket as _socket
import ssl as _ssl
import tempfile
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union, TYPE_CHECKING

from unienv_interface.backends.numpy import NumpyComputeBackend
from unienv_interface.remote.codec import Codec, DEFAULT_MAX_MESSAGE_SIZE, map_arrays

from . import _logging, _native

# The crate's warnings and errors reach ``logging`` from the start (see
# ``_logging``): a client's events too, not only a server's.
_logging.follow()

if TYPE_CHECKING:
    from unienv_interface.backends import ComputeBackend
    from .proxies import RemoteEnv, RemoteWorld, RemoteWorldNode, _Proxy

__all__ = ["RemoteClient", "Subscription"]

# The native client's descriptor-change key (``_native.Client.schema_since``).
_SchemaKey = Tuple[int, int, int]


_HANDSHAKE_HEADERS = {"host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version",
                      "sec-websocket-extensions", "sec-websocket-protocol", "user-agent"}


def _from_websocket_transport(transport: Any) -> Tuple[str, List[Tuple[str, str]], Optional[_ssl.SSLContext]]:
    """The URI, extra handshake headers and (for ``wss://``) SSL context of an
    open reference ``WebSocketTransport``, which is then closed."""
    connection = getattr(transport, "connection", None)
    request = getattr(connection, "request", None)
    host = None if request is None else request.headers.get("Host")
    if request is None or host is None:
        raise TypeError("unienv_remote.RemoteClient connects to a ws:// or wss:// URI or takes the reference's "
                        "WebSocketTransport; other Python transports are not supported")
    headers = [(name, value) for name, value in request.headers.raw_items()
               if name.lower() not in _HANDSHAKE_HEADERS]
    sock = getattr(connection, "socket", None)
    context = sock.context if isinstance(sock, _ssl.SSLSocket) else None
    if sock is not None and getattr(sock, "family", None) == _socket.AF_UNIX:
        # websockets' unix_connect: the same socket file, as ws+unix://PATH.
        path = sock.getpeername()
        transport.close()
        return f"ws+unix://{os.fsdecode(path)}", headers, None
    transport.close()
    return f"{'wss' if context is not None else 'ws'}://{host}{request.path}", headers, context


def _ca_pem_of(context: _ssl.SSLContext) -> Optional[str]:
    """The CA certificates an ``ssl.SSLContext`` holds, as PEM (``None`` when
    it holds none: the system's roots are used then, as by default)."""
    if context.verify_mode == _ssl.CERT_NONE or not context.check_hostname:
        raise ValueError("unienv_remote.RemoteClient always verifies the server's certificate and name; an SSL "
                         "context with verification or hostname checking off is not supported (trust the server's "
                         "CA instead: ca_file=FILE)")
    ders = context.get_ca_certs(binary_form=True)
    return "".join(_ssl.DER_cert_to_PEM_cert(d) for d in ders) if ders else None


def _connect_native(uri: str, ca_file: Optional[str], context: Optional[_ssl.SSLContext],
                    **options: Any) -> _native.Client:
    """``_native.Client.connect``, trusting ``ca_file`` and the CAs of
    ``context`` (written to a temporary file read during the handshake)."""
    if context is None:
        return _native.Client.connect(uri, ca_file=ca_file, **options)
    if ca_file is not None:
        raise ValueError("give ca_file or ssl, not both")
    pem = _ca_pem_of(context)
    if pem is None:
        return _native.Client.connect(uri, **options)
    fd, path = tempfile.mkstemp(prefix="unienv-ca-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        return _native.Client.connect(uri, ca_file=path, **options)
    finally:
        os.unlink(path)


class Subscription:
    """Closeable latest-snapshot iterator. next(timeout=...) is also supported."""

    def __init__(self, client: RemoteClient, native: _native.Subscription) -> None:
        self.client, self._native = client, native
        self.resource_id, self.id = native.resource_id, native.id

    def next(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The next (latest) snapshot event, waiting at most ``timeout`` seconds
        (``None``: no limit); ``StopIteration`` once the subscription has ended."""
        event = self._native.next(timeout)
        if event is None:
            raise StopIteration
        event["data"] = self.client._map(event["data"])
        return event

    def __iter__(self) -> Subscription:
        """The subscription itself: iterating yields snapshot events until it ends."""
        return self

    def __next__(self) -> Dict[str, Any]:
        """The next snapshot event, waiting without a limit."""
        return self.next()

    def close(self) -> None:
        """Unsubscribe; a thread waiting in ``next`` wakes with ``StopIteration``."""
        self.client._subscriptions.pop(self.id, None)
        self._native.close()

    def __enter__(self) -> Subscription:
        """The subscription, closed when the ``with`` block exits."""
        return self

    def __exit__(self, *args: object) -> None:
        """Close the subscription."""
        self.close()


class RemoteClient:
    """A connection, descriptor cache, and shared control session.

    A drop-in for ``unienv_interface.remote.RemoteClient``: the same
    constructor options, methods, attributes, proxies and exceptions. A
    timeout closes the connection: late replies can never be confused with a
    later request. Mutations aren't retried and may have executed remotely.

    ``transport`` is the server's ``ws://`` or ``wss://`` URI, or the
    reference's ``WebSocketTransport`` (its connection's address, handshake
    headers such as ``Authorization``, and for ``wss://`` the CA certificates
    of its SSL context are reused for our own connection, and it is closed);
    ``RemoteClient.connect(uri, ...)`` is the same in both. Other Python
    transports (``MemoryTransport``) are not supported. ``token`` is sent as
    ``Authorization: Bearer <token>``.

    TLS (``wss://``): the server's certificate is verified against the
    system's root certificates plus ``ca_file`` (a PEM file of CA
    certificates, e.g. a private CA's), or the CA certificates loaded into
    ``ssl`` (an ``ssl.SSLContext``, as the reference's
    ``WebSocketTransport.connect(uri, ssl=...)`` takes; one made by
    ``ssl.create_default_context(cafile=FILE)``). The server's name is always
    checked; contexts with verification off are refused (``ValueError``).
    """

    def __init__(self, transport: Union[str, Any], *, backend: ComputeBackend = NumpyComputeBackend,
                 device: Optional[object] = None, timeout: Optional[float] = 30.0,
                 max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, token: Optional[str] = None,
                 ca_file: Optional[Union[str, os.PathLike[str]]] = None, ssl: Optional[_ssl.SSLContext] = None) -> None:
        headers: List[Tuple[str, str]] = []
        if not isinstance(transport, (str, _native.Client)):
            transport, headers, context = _from_websocket_transport(transport)
            if ssl is None and ca_file is None:
                ssl = context
        if max_message_size < 8:
            raise ValueError("max_message_size must be at least 8")
        _logging.follow()
        self._backend, self._device = backend, device
        self._numpy = getattr(backend, "simplified_name", None) == "numpy" and device is None
        self._proxies: weakref.WeakValueDictionary[str, _Proxy] = weakref.WeakValueDictionary()
        self._subscriptions: Dict[str, Subscription] = {}
        if isinstance(transport, _native.Client):
            # Already connected: an in-memory connection from unienv_remote.RemoteServer.connect().
            self._native = transport
        else:
            self._native = _connect_native(transport, None if ca_file is None else os.fspath(ca_file), ssl,
                                           timeout=timeout, max_message_size=max_message_size, token=token,
                                           headers=headers)
        self.codec = Codec(self._native.max_message_size)

    @classmethod
    def connect(cls, uri: str, **options: Any) -> RemoteClient:
        """Connect to ``uri``: the same as ``RemoteClient(uri, **options)``."""
        return cls(uri, **options)

    # -- state -------------------------------------------------------------

    # Attributes the reference reads at use time take effect when assigned.

    @property
    def timeout(self) -> Optional[float]:
        """Seconds each request may take (``None``: no limit); assigning it
        applies to every request sent from then on, as in the reference."""
        return self._native.timeout

    @timeout.setter
    def timeout(self, value: Optional[float]) -> None:
        self._native.set_timeout(value)

    @property
    def backend(self) -> ComputeBackend:
        """The backend results are converted to (read at each call)."""
        return self._backend

    @backend.setter
    def backend(self, value: ComputeBackend) -> None:
        self._backend = value
        self._numpy = getattr(value, "simplified_name", None) == "numpy" and self._device is None

    @property
    def device(self) -> Optional[object]:
        """The device results are converted to (read at each call)."""
        return self._device

    @device.setter
    def device(self, value: Optional[object]) -> None:
        self._device = value
        self._numpy = getattr(self._backend, "simplified_name", None) == "numpy" and value is None

    @property
    def session_id(self) -> str:
        """The session ID the server assigned in ``hello``."""
        return self._native.session_id

    @property
    def closed(self) -> bool:
        """Whether the connection is closed (by ``close``, a timeout or the server)."""
        return self._native.closed

    @property
    def descriptors(self) -> Dict[str, Dict[str, Any]]:
        """The latest descriptor of every known resource (a fresh dict)."""
        return self._native.descriptors()

    @property
    def requests_sent(self) -> int:
        """Requests sent on this connection so far (hello included)."""
        return self._native.requests_sent

    def _map(self, value: Any) -> Any:
        """``value`` with its arrays converted to the client's backend and device."""
        return value if self._numpy else map_arrays(value, self.backend, self.device)

    # Internal accessors for the proxies (proxies.py): the native client
    # stays private to this module.

    def _known(self, resource_id: str) -> bool:
        """Whether the resource's descriptor is known to this client."""
        return self._native.kind(resource_id) is not None

    def _schema_since(self, resource_id: str, key: Optional[_SchemaKey]) -> Optional[Tuple[_SchemaKey, Dict[str, Any]]]:
        """The resource's descriptor if it changed since ``key``: ``(key, descriptor)``, else ``None``."""
        return self._native.schema_since(resource_id, key)

    def _space_since(self, resource_id: str, name: str, serial: Optional[int]) -> Optional[Tuple[int, Any]]:
        """``(serial, document)`` of the space ``name`` when it differs from ``serial``, else ``None``."""
        return self._native.space_since(resource_id, name, serial)

    def _call_raw(self, resource_id: str, method: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
        """``call`` without the resource lookup or the backend conversion."""
        return self._native.call(resource_id, method, args, kwargs)

    def _kind(self, resource_id: str) -> str:
        kind = self._native.kind(resource_id)
        if kind is None:
            raise KeyError(resource_id)
        return kind

    def _domain_id(self, resource_id: str) -> str:
        domain = self._native.domain_id(resource_id)
        if domain is None:
            raise KeyError(resource_id)
        return domain

    # -- requests ----------------------------------------------------------

    def discover(self) -> List[Dict[str, Any]]:
        """``discover``: the descriptor of every resource the server hosts."""
        return self._native.discover()

    def describe(self, resource_id: str) -> Dict[str, Any]:
        """``describe``: the resource's current descriptor (``KeyError``-like
        protocol error when the server does not know it)."""
        return self._native.describe(resource_id)

    def resource(self, resource_id: str) -> Union[RemoteEnv, RemoteWorld, RemoteWorldNode]:
        """The proxy of the resource, of the class its kind calls for; the
        same open proxy object is returned while it is alive."""
        from .proxies import RemoteEnv, RemoteWorld, RemoteWorldNode
        proxy = self._proxies.get(resource_id)
        if proxy is not None and not proxy._closed and isinstance(proxy, (RemoteEnv, RemoteWorld, RemoteWorldNode)):
            return proxy
        if self._native.kind(resource_id) is None:
            self.describe(resource_id)
        classes: Dict[str, Callable[[RemoteClient, str], Union[RemoteEnv, RemoteWorld, RemoteWorldNode]]] = {
            "env": RemoteEnv, "world": RemoteWorld, "node": RemoteWorldNode}
        cls = classes[self._kind(resource_id)]
        created: Union[RemoteEnv, RemoteWorld, RemoteWorldNode] = cls(self, resource_id)
        self._proxies[resource_id] = created
        return created

    def env(self, resource_id: str) -> RemoteEnv:
        """The proxy of an environment (``TypeError`` for another kind)."""
        proxy = self.resource(resource_id)
        if self._kind(resource_id) != "env":
            raise TypeError("Resource is not an environment")
        return proxy

    def world(self, resource_id: str) -> RemoteWorld:
        """The proxy of a world (``TypeError`` for another kind)."""
        proxy = self.resource(resource_id)
        if self._kind(resource_id) != "world":
            raise TypeError("Resource is not a world")
        return proxy

    def node(self, resource_id: str) -> RemoteWorldNode:
        """The proxy of a world node (``TypeError`` for another kind)."""
        proxy = self.resource(resource_id)
        if self._kind(resource_id) != "node":
            raise TypeError("Resource is not a node")
        return proxy

    def acquire(self, resource_id: str, mode: Optional[str] = None) -> None:
        """``acquire``: claim control of the resource's domain (``mode``:
        ``"env"`` or ``"components"``; ``None``: the server's choice)."""
        self._kind(resource_id)
        self._native.acquire(resource_id, mode)

    def release(self, resource_id: str, *, close_subscriptions: bool = False) -> None:
        """Release shared world control, retaining subscriptions by default.

        Set close_subscriptions=True to also close this client's domain streams.
        """
        if close_subscriptions:
            # The Rust client ends and unsubscribes the domain's streams
            # itself (waking any thread waiting in next), then releases.
            domain_id = self._domain_id(resource_id)
            for subscription in list(self._subscriptions.values()):
                if self._domain_id(subscription.resource_id) == domain_id:
                    self._subscriptions.pop(subscription.id, None)
        self._native.release(resource_id, close_subscriptions)

    @contextmanager
    def operation(self, resource_id: str, kind: str = "step") -> Iterator[str]:
        """Mark one client-coordinated reset/reload/step, without rollback.

        Use a world or node ID. Every mutating component call must belong to an
        operation. The context publishes snapshots only after successful exit.
        """
        domain_id = self._domain_id(resource_id)
        if self._native.current_operation(domain_id) is not None:
            raise RuntimeError("Nested component operations are not supported")
        operation = self._native.begin(domain_id, kind)
        try:
            yield operation.id
            operation.complete()
        except BaseException:
            if not self.closed:
                try:
                    operation.abort()
                except Exception:
                    pass
            raise

    def call(self, resource_id: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """``call``: run ``method`` of the resource remotely with these
        arguments and return its result (arrays on the client's backend)."""
        self._kind(resource_id)
        return self._map(self._native.call(resource_id, method, args, kwargs))

    def _read(self, resource_id: str, field: str) -> Any:
        """A node getter's value, from the boundary snapshot cache when allowed."""
        return self._map(self._native.read(resource_id, field))

    def subscribe(self, resource_id: str, fields: Optional[Iterable[str]] = None) -> Subscription:
        """Subscribe to the resource's published snapshots (only ``fields``
        when given); iterate the returned ``Subscription`` for the latest."""
        if self._native.kind(resource_id) is None:
            self.describe(resource_id)
        native = self._native.subscribe(resource_id, None if fields is None else list(fields))
        subscription = Subscription(self, native)
        self._subscriptions[subscription.id] = subscription
        return subscription

    def close(self) -> None:
        """Close the connection: pending requests fail and subscriptions end."""
        self._native.close()

    def __enter__(self) -> RemoteClient:
        """The client, closed when the ``with`` block exits."""
        return self

    def __exit__(self, *args: object) -> None:
        """Close the client."""
        self.close()
