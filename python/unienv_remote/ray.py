"""UniEnv servers as Ray actors, and a ``RemoteVectorEnv`` over them.

    import ray
    from unienv_remote import ray as uray

    def pendulums():
        import gymnasium
        from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv
        return {f"pendulum{i}": FromGymnasiumEnv(gymnasium.make("Pendulum-v1")) for i in range(4)}

    servers = uray.start_servers(pendulums, 4, num_cpus=1, resources={"sim": 1})
    envs = uray.vector_env(servers)          # 16 envs, spread over the 4 actors
    ...
    servers[2] = uray.restart_server(servers[2], envs)   # a fresh actor (new URL); envs follow it
    envs.reset(options={"reset_mask": envs.needs_reset()})

Each actor runs one server (our Python ``unienv_remote.RemoteServer`` when this
package has it, otherwise the reference's ``unienv_interface.remote.RemoteServer``)
hosting what ``factory()`` returns (a dict of resource ID -> env), listening on
its node's IP address (``ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # unannotated in ray``) with a port the OS
picks; Ray's resource requests (``num_cpus``, ``num_gpus``, ``resources``,
``scheduling_strategy``...) place it. Clients connect to it directly over the
protocol, not through Ray. Across machines, serve TLS: ``start_servers(...,
tls_cert=CERT, tls_key=KEY)`` (a certificate naming the nodes' addresses) and
``vector_env(servers, ca_file=CA)`` on the learner.

Fleets that heal: ``vector_env(servers, restart=RestartPolicy(...))`` gives
the vector env a ``resolve`` callback (an :class:`ActorRestarter`) that
restarts a dead server actor itself, within the policy's limits, and hands the
vector env the new URL; the lost envs are reconnected, reset and reported in
that step's ``infos`` (see ``unienv_remote.restart``)::

    from unienv_remote import RestartPolicy

    envs = uray.vector_env(servers, restart=RestartPolicy(max_restarts=3, window=600.0))
    # ... an actor dies: the next step restarts it and reports the cut episodes

Manually, when an actor dies, its server's connections drop: the protocol's connection
loss. A request that was on its way fails with ``UncertainOutcomeError`` (its
mutation may have executed), later ones with ``ConnectionError``;
``RemoteVectorEnv`` reports them per env (``VectorEnvError``) without losing
the other envs' results. ``restart_server`` starts a replacement actor with
the same factory and options (fresh envs, a new URL); given the vector env,
it also points that server's envs at the new URL
(``RemoteVectorEnv.replace_server``), which then need a reset:

    servers[2] = uray.restart_server(servers[2], envs)
    envs.reset(options={"reset_mask": envs.needs_reset()})
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field, replace
import os
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple, Union

try:
    import ray

    from .restart import RestartError, RestartPolicy
    from .vector import RemoteVectorEnv
except ModuleNotFoundError as missing:
    if str(missing.name).split(".")[0] not in ("ray", "gymnasium"):
        raise
    raise ModuleNotFoundError(f"unienv_remote.ray needs ray and gymnasium ({missing.name} is not installed): "
                              "pip install \"unienv-remote[ray]\"", name=missing.name) from missing

__all__ = ["ServerHandle", "ActorRestarter", "start_servers", "restart_server", "vector_env", "addresses"]


class _ServerActor:
    """Hosts ``factory()`` on a UniEnv server in the actor's process."""

    def __init__(self, factory: Callable[[], Dict[str, Any]], host: Optional[str],
                 server_options: Dict[str, Any], tls: Optional[Tuple[bytes, bytes]]) -> None:
        import os
        import tempfile

        try:
            from unienv_remote import RemoteServer
        except ImportError:
            if tls is not None:
                raise
            from unienv_interface.remote import RemoteServer  # type: ignore[no-redef]  # the reference's (untyped)
        folder = None
        options = dict(server_options)
        if tls is not None:
            # The PEM texts travelled with the actor's arguments; the server
            # reads them from files, in a private folder removed once it
            # listens.
            folder = tempfile.mkdtemp(prefix="unienv-tls-")
            for name, pem in zip(("cert.pem", "key.pem"), tls):
                fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(pem)
            options["tls_cert"] = os.path.join(folder, "cert.pem")
            options["tls_key"] = os.path.join(folder, "key.pem")
        try:
            self._server = RemoteServer(**options)
            resources = factory()
            for resource_id, obj in resources.items():
                self._server.register(resource_id, obj)
            self._ids = list(resources)
            bind = host if host is not None else ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # unannotated in ray
            self._url = self._server.listen(bind, 0)
        finally:
            if folder is not None:
                for name in ("cert.pem", "key.pem"):
                    try:
                        os.unlink(os.path.join(folder, name))
                    except OSError:
                        pass
                os.rmdir(folder)

    def info(self) -> Dict[str, Any]:
        return {"url": self._url, "resource_ids": self._ids, "node_id": ray.get_runtime_context().get_node_id()}


@dataclass
class ServerHandle:
    """A server actor: its Ray handle, URL, hosted env IDs and node, and how
    it was made (for ``restart_server``)."""

    actor: Any
    url: str
    resource_ids: List[str]
    node_id: str
    factory: Callable[[], Dict[str, Any]] = field(repr=False)
    options: Dict[str, Any] = field(repr=False)
    host: Optional[str] = None
    server_options: Dict[str, Any] = field(default_factory=dict, repr=False)
    tls: Optional[Tuple[bytes, bytes]] = field(default=None, repr=False)


def _start(factory: Callable[[], Dict[str, Any]], options: Dict[str, Any], host: Optional[str],
           server_options: Dict[str, Any], tls: Optional[Tuple[bytes, bytes]],
           timeout: Optional[float] = None) -> ServerHandle:
    actor_class = ray.remote(_ServerActor)
    # Ray's actor handles expose the remote methods dynamically (untyped).
    actor: Any = actor_class.options(**options).remote(factory, host, server_options, tls)
    try:
        info: Dict[str, Any] = ray.get(actor.info.remote(), timeout=timeout)
    except BaseException:
        ray.kill(actor, no_restart=True)  # not listening in time (or failed): none left behind
        raise
    return ServerHandle(actor=actor, url=info["url"], resource_ids=info["resource_ids"], node_id=info["node_id"],
                        factory=factory, options=options, host=host, server_options=server_options, tls=tls)


def start_servers(
    factory: Callable[[], Dict[str, Any]],
    count: int,
    *,
    host: Optional[str] = None,
    tls_cert: Optional[Union[str, "os.PathLike[str]"]] = None,
    tls_key: Optional[Union[str, "os.PathLike[str]"]] = None,
    server_options: Optional[Dict[str, Any]] = None,
    **actor_options: Any,
) -> List[ServerHandle]:
    """Starts ``count`` server actors hosting ``factory()`` each, placed by
    ``actor_options`` (passed to ``ActorClass.options``: ``num_cpus``,
    ``resources``, ``scheduling_strategy``, ...); waits until every one
    listens. ``host`` overrides the address the servers bind (default: the
    node's IP address).

    ``tls_cert`` / ``tls_key`` (PEM files on this machine): the servers serve
    ``wss://`` with this certificate, whose contents are shipped to the
    actors (written to a private temporary folder on their node while the
    server starts, then removed). The certificate must name every address
    the servers bind (IP subject alternative names for node IPs); clients
    trust its CA: ``vector_env(servers, ca_file=CA)``. ``server_options`` go
    to ``RemoteServer`` (``token``, ``allowed_hosts``, limits, ...)."""
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert and tls_key go together: give both (PEM files) or neither")
    tls = None
    if tls_cert is not None and tls_key is not None:
        with open(tls_cert, "rb") as c, open(tls_key, "rb") as k:
            tls = (c.read(), k.read())
    return [_start(factory, dict(actor_options), host, dict(server_options or {}), tls) for _ in range(count)]


def restart_server(server: ServerHandle, envs: Optional[RemoteVectorEnv] = None, *,
                   timeout: Optional[float] = None) -> ServerHandle:
    """Kills ``server``'s actor (if still alive) and starts a replacement
    with the same factory, placement, bind address, server options and
    certificate; returns its handle (fresh envs, a new URL). With ``envs``,
    the vector env's envs on the old server are reconnected to the new one
    (``envs.replace_server``); reset them (``envs.needs_reset()`` is their
    mask) before stepping them. ``timeout`` (seconds) bounds the wait for
    the new server to listen (``ray.exceptions.GetTimeoutError`` after it,
    the new actor killed)."""
    try:
        ray.kill(server.actor, no_restart=True)
    except Exception:  # already dead: nothing to kill
        pass
    new = _start(server.factory, server.options, server.host, server.server_options, server.tls, timeout)
    if envs is not None:
        envs.replace_server(server.url, new.url)
    return new


def addresses(servers: Sequence[ServerHandle], num_envs: Optional[int] = None) -> List[Tuple[str, str]]:
    """``(url, resource_id)`` for ``num_envs`` envs (default: every hosted
    env), round-robin over the servers so that consecutive envs live on
    different actors."""
    per = [list(s.resource_ids) for s in servers]
    out: List[Tuple[str, str]] = []
    k = 0
    total = sum(len(p) for p in per)
    wanted = total if num_envs is None else num_envs
    if wanted > total:
        raise ValueError(f"{wanted} envs wanted, the servers host {total}")
    while len(out) < wanted:
        for s, ids in zip(servers, per):
            if k < len(ids) and len(out) < wanted:
                out.append((s.url, ids[k]))
        k += 1
    return out


class ActorRestarter:
    """A ``RestartPolicy.resolve`` callback for envs on server actors: where
    does the server that served ``url`` live now?

    It asks the actor (``timeout`` seconds, default the policy's): an actor
    that answers is alive, and its current URL is returned (a new one if Ray
    restarted it itself, as actors started with Ray's ``max_restarts``
    option are; while Ray is restarting it, the attempt fails and the vector
    env tries again after its backoff); an actor that is dead or does not
    answer is replaced by
    :func:`restart_server` (same factory and placement, a new URL), at most
    ``policy.max_restarts`` times per server within ``policy.window``
    seconds; one more raises :class:`RestartError`, and the vector env gives
    the envs up. ``servers`` (a list) is updated in place: it always holds
    the live handles. Idempotent: the envs of one dead server trigger one
    replacement."""

    def __init__(self, servers: List[ServerHandle], policy: RestartPolicy,
                 timeout: Optional[float] = None) -> None:
        self.servers = servers
        self.policy = policy
        self.timeout = policy.timeout if timeout is None else timeout
        self._history: Dict[int, Deque[float]] = collections.defaultdict(collections.deque)
        self._urls: Dict[str, int] = {s.url: k for k, s in enumerate(servers)}  # every URL each slot had

    def __call__(self, url: str, resource_id: str) -> Optional[str]:
        k = self._urls.get(url)
        if k is None:
            return None  # not one of ours: reconnect where it was
        server = self.servers[k]
        try:
            info: Dict[str, Any] = ray.get(server.actor.info.remote(), timeout=self.timeout)
        except ray.exceptions.ActorUnavailableError:
            raise  # Ray is restarting it (max_restarts): the vector env tries again after a backoff
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return self._replace(k)  # dead for good, or not answering
        if info["url"] != server.url:  # restarted by Ray (max_restarts): a new server, a new port
            self.servers[k] = replace(server, url=info["url"], resource_ids=info["resource_ids"],
                                      node_id=info["node_id"])
            self._urls[info["url"]] = k
        return self.servers[k].url

    def _replace(self, k: int) -> str:
        server = self.servers[k]
        history = self._history[k]
        now = time.monotonic()
        while history and history[0] <= now - self.policy.window:
            history.popleft()
        if len(history) >= self.policy.max_restarts:
            raise RestartError(
                f"the server actor at {server.url} died again: {len(history)} restart(s) within the last "
                f"{self.policy.window:g} s, the policy's max_restarts={self.policy.max_restarts}", url=server.url)
        history.append(now)
        new = restart_server(server, timeout=self.timeout)
        self.servers[k] = new
        self._urls[new.url] = k
        return new.url


def vector_env(servers: Sequence[ServerHandle], num_envs: Optional[int] = None, *,
               restart: Optional[RestartPolicy] = None, **kwargs: Any) -> RemoteVectorEnv:
    """A ``RemoteVectorEnv`` over the servers' envs (see ``addresses``);
    ``kwargs`` go to ``RemoteVectorEnv``. With ``restart`` (a
    :class:`RestartPolicy` without ``resolve``), dead server actors are
    restarted by an :class:`ActorRestarter` within the policy's limits and
    their envs heal; ``servers`` (when a list) is kept up to date with the
    replacements' handles."""
    if restart is not None and restart.resolve is None:
        live = servers if isinstance(servers, list) else list(servers)
        restart = replace(restart, resolve=ActorRestarter(live, restart))
    return RemoteVectorEnv(addresses(servers, num_envs), restart=restart, **kwargs)
