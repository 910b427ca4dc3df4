"""``unienv_remote.ProcessVectorEnv``: a ``RemoteVectorEnv`` over server
processes it starts on this machine, one per vCPU, each hosting its share of
the envs as ``BatchedEnv`` resources.

What a learner writes instead of Gymnasium's ``AsyncVectorEnv(env_fns)``; its
loop stays the same::

    from unienv_remote import ProcessVectorEnv
    envs = ProcessVectorEnv([lambda: gymnasium.make("HalfCheetah-v5")] * 16)

It is the configuration this project measures fastest on one machine (its
docs/vector.md, "Keep every server busy"; BENCHMARKS.md): the envs split evenly
over ``servers`` processes (by default one per vCPU this process may use),
each pinned to a vCPU of its own, reached over Unix domain sockets, its
share stepped as ``BatchedEnv`` resources (one request per resource per
step). ``resources_per_server=2`` with ``batch_size=num_envs // 2`` lets each
server step one batch while the learner turns the other around (``send`` /
``recv``).

A server process is ``python -m unienv_remote._fleet_server``: it reads this
process's import path, the level of its ``unienv_remote`` logger and the env
factories (pickled with ``cloudpickle`` when it is installed, as Gymnasium's
``AsyncVectorEnv`` pickles them, else ``pickle``; every server's factories are
pickled before any process starts) from its standard input, prints its URL
and serves until its standard input closes: when this vector env closes, or
when this process ends, however it ends and whatever the server is doing
then (still starting included: it is gone within seconds).

The servers log as this process's ``unienv_remote`` logger is set (its
effective level when the vector env is made, or ``log_level=``): with
``logging`` unconfigured that is ``WARNING``, so a normal run prints nothing
(no ``INFO`` for each session opened or server closed).
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import weakref
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import gymnasium
import numpy as np

from ._fleet_plan import plan_fleet
from ._gym_spaces import exact_in_unienv
from .vector import RemoteVectorEnv

__all__ = ["ProcessVectorEnv"]

#: The longest Unix socket path (``sun_path`` holds 108 bytes on Linux,
#: 104 on macOS, with its terminating NUL).
_SUN_PATH_MAX = 103
#: How many more times a restarted server is started again while its TCP
#: address is one another server of the fleet had (see ``_resolve``).
_MAX_URL_RETRIES = 5

#: The line a server process prints before its URL.
URL_PREFIX = "unienv-remote-fleet-url "
#: The line before it: its first sub-env's Gymnasium spaces, pickled, base 64.
SPACES_PREFIX = "unienv-remote-fleet-spaces "
#: The line a server prints instead, when its envs cannot be hosted as asked.
ERROR_PREFIX = "unienv-remote-fleet-error "

#: Gymnasium's ``AsyncVectorEnv`` error for an ``observation_mode`` it does not know.
_INVALID_MODE = ("Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and batch "
                 "observation space, actual got {}")


def _dumps(obj: Any) -> bytes:
    try:
        # Lambdas and closures, as Gymnasium's AsyncVectorEnv sends them.
        import cloudpickle  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - Gymnasium requires cloudpickle
        return pickle.dumps(obj)
    data: bytes = cloudpickle.dumps(obj)
    return data


def _split(n: int, parts: int) -> List[int]:
    """``n`` as ``parts`` sizes differing by at most one, larger first."""
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


#: Every server process's standard input (its life line), closed in a child
#: this process forks: a forked child (a data loader's worker) holding it
#: would keep the server from seeing its learner end.
_LIFE_LINES: "weakref.WeakSet[_Server]" = weakref.WeakSet()


def _close_life_lines_in_child() -> None:
    for server in list(_LIFE_LINES):
        server.drop_life_line()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_life_lines_in_child)


def _payload(fns: Sequence[Callable[[], Any]], groups: List[int], cpu: Optional[int],
             socket_path: Optional[str], log_level: int, observation_space: Any = None) -> memoryview:
    """What a server process reads from its standard input: its length, then
    the parent's import path first (as multiprocessing's spawn sends it:
    factories pickled by reference import their modules from it), the log
    level and the pickled factories (with the observation space its
    Gymnasium envs are published with, ``observation_mode`` other than
    ``"same"``)."""
    payload = pickle.dumps({"sys_path": list(sys.path), "log_level": log_level,
                            "spec": _dumps({"fns": list(fns), "groups": groups, "cpu": cpu, "unix": socket_path,
                                            "observation_space": observation_space})})
    return memoryview(struct.pack("<Q", len(payload)) + payload)


class _Server:
    """One server process: started, given its envs, its URL read, stopped.
    ``unsent`` is its :func:`_payload`, made before any process of the fleet
    starts (a factory that does not pickle starts none)."""

    def __init__(self, index: int, fns: Sequence[Callable[[], Any]], groups: List[int],
                 cpu: Optional[int], socket_path: Optional[str], log_level: int, unsent: memoryview,
                 generation: int = 0, observation_space: Any = None) -> None:
        self.index, self.fns, self.groups, self.cpu, self.socket_path = index, fns, groups, cpu, socket_path
        self.log_level = log_level
        #: The observation space its Gymnasium envs are published with (or None: their own).
        self.observation_space = observation_space
        #: How many times this server was started again before this process.
        self.generation = generation
        self.unsent = unsent
        self.url = ""
        #: Its first sub-env's Gymnasium spaces, metadata and render mode
        #: (empty for UniEnv envs).
        self.spaces: Dict[str, Any] = {}
        # Unbuffered pipes (select() sees every byte), a session of its own
        # (the terminal's Ctrl-C is the learner's to handle, not the servers').
        self.process = subprocess.Popen(
            [sys.executable, "-m", "unienv_remote._fleet_server"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, start_new_session=True)
        _LIFE_LINES.add(self)

    @staticmethod
    def fd(pipe: Optional[IO[bytes]]) -> int:
        """A pipe's file descriptor (the pipes are made, so never ``None``)."""
        assert pipe is not None
        return pipe.fileno()

    def drop_life_line(self) -> None:
        """Closes this process's copy of the server's standard input."""
        if self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass

    def _send_some(self) -> None:
        """Writes what the pipe takes of the envs not yet sent (non-blocking)."""
        stdin = self.process.stdin
        assert stdin is not None
        try:
            written = stdin.write(self.unsent)
        except BlockingIOError:
            return
        except (BrokenPipeError, ValueError):
            self.unsent = memoryview(b"")  # it died: its standard output says so
            return
        self.unsent = self.unsent[written or 0:]

    def _read_some(self) -> bool:
        """Reads a line of its standard output; True once it is the URL."""
        stdout = self.process.stdout
        assert stdout is not None
        line = stdout.readline().decode("utf-8", "replace")
        if not line:
            code = self.process.wait()
            raise RuntimeError(f"server process {self.index} (pid {self.process.pid}) exited with code {code} "
                               "before serving (its error is on standard error above)")
        if line.startswith(ERROR_PREFIX):
            raise RuntimeError(line[len(ERROR_PREFIX):].strip())
        if line.startswith(SPACES_PREFIX):
            self.spaces = pickle.loads(base64.b64decode(line[len(SPACES_PREFIX):].strip()))
        if line.startswith(URL_PREFIX):
            self.url = line[len(URL_PREFIX):].strip()
            return True
        return False

    def request(self, op: str, name: str, payload: Any, timeout: Optional[float]) -> List[Any]:
        """Runs ``call`` / ``set_attr`` on this server's sub-envs (see
        ``_fleet_server._answer``); their results in order. A sub-env's
        exception is raised here; a server that is gone or silent for
        ``timeout`` seconds is a ``RuntimeError``."""
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None or stdin.closed or stdout.closed:
            raise RuntimeError(f"server process {self.index} is stopped")
        data = _dumps((op, name, payload))
        try:
            stdin.write(struct.pack("<Q", len(data)) + data)
            stdin.flush()
        except (BrokenPipeError, ValueError) as e:
            raise RuntimeError(f"server process {self.index} (pid {self.process.pid}) is gone") from e
        head = self._read_exactly(8, timeout)
        answer = pickle.loads(self._read_exactly(struct.unpack("<Q", head)[0], timeout))
        kind, value = answer
        if kind == "error":
            raise value[1]
        results: List[Any] = value
        return results

    def _read_exactly(self, n: int, timeout: Optional[float]) -> bytes:
        fd = self.fd(self.process.stdout)
        data = b""
        while len(data) < n:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise RuntimeError(f"server process {self.index} (pid {self.process.pid}) did not answer within "
                                   f"{timeout} s")
            chunk = os.read(fd, n - len(data))
            if not chunk:
                raise RuntimeError(f"server process {self.index} (pid {self.process.pid}) is gone")
            data += chunk
        return data

    def again(self, deadline: float) -> "_Server":
        """A new process serving the same envs, started and serving by
        ``deadline``; over a Unix socket at a path of its own
        (``server{i}~1.sock``, ``~2``, ...: nothing left of the dead server,
        such as a listening socket a child of it may still hold, is in its
        way)."""
        path = None
        if self.socket_path is not None:
            path = os.path.join(os.path.dirname(self.socket_path), f"server{self.index}~{self.generation + 1}.sock")
        unsent = _payload(self.fns, self.groups, self.cpu, path, self.log_level, self.observation_space)
        new = _Server(self.index, self.fns, self.groups, self.cpu, path, self.log_level, unsent,
                      self.generation + 1, self.observation_space)
        try:
            _start_all([new], deadline)
        except BaseException:
            new.stop(timeout=0)
            raise
        return new

    def stop(self, timeout: float = 10.0) -> None:
        """Closes its standard input (it closes its server and exits); kills
        it after ``timeout`` seconds."""
        self.drop_life_line()
        if self.process.stdout is not None:
            self.process.stdout.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _start_all(servers: Sequence[_Server], deadline: float) -> List[str]:
    """Gives every server its envs and reads its URL, all at once, by
    ``deadline`` (a monotonic time); the URLs in order."""
    for s in servers:
        os.set_blocking(s.fd(s.process.stdin), False)
    waiting = [s for s in servers if not s.url]
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            late = ", ".join(f"{s.index} (pid {s.process.pid})" for s in waiting)
            raise TimeoutError(f"server process(es) {late} did not start in time")
        readers = {s.fd(s.process.stdout): s for s in waiting}
        writers = {s.fd(s.process.stdin): s for s in waiting if s.unsent}
        readable, writable, _ = select.select(list(readers), list(writers), [], left)
        for fd in writable:
            writers[fd]._send_some()
        for fd in readable:
            if readers[fd]._read_some():
                waiting.remove(readers[fd])
    for s in servers:
        # Everything is sent (a server reads it all before it serves): later
        # requests are written whole.
        os.set_blocking(s.fd(s.process.stdin), True)
    return [s.url for s in servers]


def _observation_mode(mode: Any, fns: Sequence[Callable[[], Any]]) -> Tuple[Optional[Tuple[Any, Any]], Any]:
    """``observation_mode`` as Gymnasium's ``AsyncVectorEnv`` takes it:
    ``(None, None)`` for ``"same"``; for ``"different"`` (each env made
    here once to read its space, as Gymnasium does) Gymnasium's
    ``batch_differing_spaces`` of the envs' spaces and the first, and the
    space holding them all (``_gym_spaces.space_hull``) for the servers to
    publish; for ``(batched, single)`` those, ``single`` published."""
    from gymnasium.vector.utils import batch_differing_spaces

    from ._gym_spaces import space_hull

    if isinstance(mode, tuple) and len(mode) == 2:
        if not isinstance(mode[0], gymnasium.Space) or not isinstance(mode[1], gymnasium.Space):
            raise TypeError(f"Expected both elements of observation_mode to be Spaces, got {type(mode[0])} and "
                            f"{type(mode[1])}")
        return (mode[0], mode[1]), mode[1]
    if isinstance(mode, str) and mode == "different":
        found = []
        for fn in fns:
            env = fn()
            found.append(env.observation_space)
            env.close()
        return (batch_differing_spaces(found), found[0]), space_hull(found)
    if isinstance(mode, str) and mode == "same":
        return None, None
    raise ValueError(_INVALID_MODE.format(mode))


class ProcessVectorEnv(RemoteVectorEnv):
    """A ``RemoteVectorEnv`` over ``len(env_fns)`` envs hosted by server
    processes it starts and owns (see the module's documentation).

    * ``env_fns``: one callable per env, returning a Gymnasium env or a
      UniEnv ``Env`` (as ``BatchedEnv`` takes them); they run in the server
      processes, so they must pickle (``cloudpickle`` takes lambdas).
    * ``servers``: how many processes (default: the vCPUs this process may
      use, at most one per env).
    * ``resources_per_server``: how many ``BatchedEnv`` resources each
      process hosts (its envs split evenly). Default: 1, the measured best
      for ``step``; a ``send``/``recv`` loop may do better with 2 and
      ``batch_size`` half the envs (``_fleet_plan``, docs/vector.md).
    * ``pin``: pin server ``i`` to the ``i``-th vCPU this process may use
      (``RemoteServer(cpus=...)``, Linux), the learner left unpinned.
    * ``unix``: serve on Unix domain sockets in a private temporary
      directory (else loopback TCP).
    * ``start_timeout``: seconds to wait for every server to serve.
    * ``log_level``: the servers' ``logging`` level (default: this
      process's ``unienv_remote`` logger's effective level, ``WARNING``
      when ``logging`` is not configured).
    * ``observation_mode``: as Gymnasium's ``AsyncVectorEnv``'s:
      ``"same"`` (default: every sub-env's observation space equal, else a
      ``RuntimeError``), ``"different"`` (spaces of one type, shape and
      dtype, batched by Gymnasium's ``batch_differing_spaces``; each env is
      made once in this process to read its space, as Gymnasium does) or
      ``(observation_space, single_observation_space)``. The servers then
      publish one observation space for all (the one holding every
      sub-env's values, or the given single space).
    * ``restart``: a ``RestartPolicy`` (without ``resolve``): a server
      process that died is started again (the same envs and vCPU; a new
      socket path or port), and its envs heal as ``RemoteVectorEnv``'s policy says (they
      are reset and reported in that step's ``infos["restart"]``), within
      the policy's limits; the other servers' envs are not touched.
    * everything else (``autoreset_mode``, ``batch_size``, ``timeout``,
      ``on_error``, ``record_dir``, ...) as ``RemoteVectorEnv``.

    ``close()`` closes the connections, then the processes; they also end
    when this process ends. Sub-env ``i`` is ``env_fns[i]``'s env, and
    ``reset(seed=s)`` seeds it with ``s + i`` as Gymnasium's vector envs do.
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], *, servers: Optional[int] = None,
                 resources_per_server: Optional[int] = None, pin: bool = True, unix: bool = True,
                 start_timeout: float = 120.0, log_level: Optional[int] = None,
                 observation_mode: Union[str, Tuple[gymnasium.Space[Any], gymnasium.Space[Any]]] = "same",
                 **kwargs: Any) -> None:
        fns = list(env_fns)
        if not fns:
            raise ValueError("ProcessVectorEnv needs at least one env factory")
        if not all(callable(f) for f in fns):
            raise TypeError("env_fns must be callables that return an env")
        # (batched, single) observation spaces other than "same"'s, and the
        # one space every sub-env is published with then.
        custom, hosted_space = _observation_mode(observation_mode, fns)
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        cpu_count = len(cpus) or os.cpu_count() or 1
        if servers is None:
            servers = plan_fleet(len(fns), cpu_count).servers
        if not 1 <= servers <= len(fns):
            raise ValueError(f"servers must be between 1 and the number of envs ({len(fns)}), got {servers}")
        if resources_per_server is None:
            # The measured best for these servers (_fleet_plan), recv's batch with it.
            plan = plan_fleet(len(fns), cpu_count, servers)
            resources_per_server = plan.resources_per_server
            if plan.batch_size is not None:
                kwargs.setdefault("batch_size", plan.batch_size)
        if not 1 <= resources_per_server <= len(fns) // servers:
            raise ValueError("resources_per_server must be at least 1 and leave each resource an env "
                             f"({len(fns)} envs over {servers} servers)")
        if log_level is None:
            log_level = logging.getLogger("unienv_remote").getEffectiveLevel()
        elif isinstance(log_level, bool) or not isinstance(log_level, int):
            raise TypeError(f"log_level must be a logging level (an int), got {log_level!r}")
        self._servers: List[_Server] = []
        self._start_timeout = start_timeout
        restart = kwargs.get("restart")
        # A server started again must serve within the policy's time too.
        self._restart_timeout = start_timeout if restart is None else min(start_timeout, restart.timeout)
        if restart is not None and restart.resolve is None:
            # Through a weak reference: the policy is the vector env's own, and
            # a cycle would keep an unclosed env's servers until a collection.
            me = weakref.ref(self)

            def resolve(url: str, resource_id: str) -> Optional[str]:
                env = me()
                return None if env is None else env._resolve(url, resource_id)

            kwargs["restart"] = dataclasses.replace(restart, resolve=resolve)
        self._socket_dir: Optional[str] = tempfile.mkdtemp(prefix="unienv-fleet-") if unix else None
        try:
            # Resources server-major: server s's resources hold consecutive envs.
            sizes = _split(len(fns), servers)
            start = 0
            shares: List[Tuple[Sequence[Callable[[], Any]], List[int]]] = []
            for size in sizes:
                shares.append((fns[start:start + size], _split(size, resources_per_server)))
                start += size
            plans = []
            for i, (share, groups) in enumerate(shares):
                cpu = cpus[i % len(cpus)] if pin and cpus else None
                path = None if self._socket_dir is None else os.path.join(self._socket_dir, f"server{i}.sock")
                if path is not None and len(os.fsencode(path)) > _SUN_PATH_MAX:
                    raise ValueError(f"the socket path {path!r} is longer than a Unix socket address takes "
                                     f"({_SUN_PATH_MAX} bytes): set TMPDIR to a shorter directory, or unix=False")
                # Every share pickled before the first process starts.
                plans.append((i, share, groups, cpu, path,
                              _payload(share, groups, cpu, path, log_level, hosted_space)))
            for i, share, groups, cpu, path, unsent in plans:
                self._servers.append(_Server(i, share, groups, cpu, path, log_level, unsent,
                                             observation_space=hosted_space))
            deadline = time.monotonic() + start_timeout
            urls = _start_all(self._servers, deadline)
            # Every URL each server had (a server started again has a new one).
            self._slot_of: Dict[str, int] = {url: k for k, url in enumerate(urls)}
            addresses = [(url, f"batch{k}") for url, (_, groups) in zip(urls, shares) for k in range(len(groups))]
            # The sub-envs' own Gymnasium spaces (a Discrete stays one), as
            # Gymnasium's AsyncVectorEnv has them.
            found = self._servers[0].spaces
            if custom is None and any(s.spaces.get("observation_space") != found.get("observation_space")
                                      for s in self._servers[1:]):
                from ._fleet_server import SAME_MISMATCH
                raise RuntimeError(SAME_MISMATCH)
            for name in ("observation_space", "action_space"):
                if found.get(name) is not None:
                    kwargs.setdefault(f"single_{name}", found[name])
            if custom is not None:
                kwargs["single_observation_space"] = custom[1]
            super().__init__(addresses, **kwargs)
        except BaseException:
            self._stop_servers(timeout=2.0)
            raise
        if custom is not None:
            self.observation_space = custom[0]
        #: How the sub-envs' observation spaces are batched (Gymnasium's ``observation_mode``).
        self.observation_mode = observation_mode
        if found.get("metadata") is not None:
            self.metadata = {**self.metadata, **found["metadata"], "autoreset_mode": self.metadata["autoreset_mode"]}
        self.render_mode = found.get("render_mode")
        #: Whether observations / actions are converted between what the
        #: wire carries and Gymnasium's types (RemoteVectorEnv's conversions;
        #: here also for the wire's own spaces when the sub-envs are UniEnv's).
        self._convert_obs = not exact_in_unienv(self.single_observation_space)
        self._convert_actions = not exact_in_unienv(self.single_action_space)
        #: Whether the servers carry some values pickled (``_gym_spaces.CARRIER``):
        #: only spaces they have for their Gymnasium sub-envs.
        self._pickled = found.get("observation_space") is not None

    # -- Gymnasium's vector API: calls on the sub-envs ---------------------

    def _each_server(self, op: str, name: str, payloads: Sequence[Any]) -> Tuple[Any, ...]:
        if self.closed or not self._servers:
            raise RuntimeError("this ProcessVectorEnv is closed")
        if self._native.step_pending():
            raise RuntimeError(f"{op}({name!r}) while a step is in flight: receive its results first")
        results: List[Any] = []
        for server, payload in zip(self._servers, payloads):
            results.extend(server.request(op, name, payload, self._start_timeout))
        return tuple(results)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Tuple[Any, ...]:
        """Calls method ``name`` of every sub-env with ``args`` and
        ``kwargs`` (or reads attribute ``name`` when it is not callable), as
        Gymnasium's ``AsyncVectorEnv.call``: the results, in env order. Runs
        in the server processes, through their standard input (no request
        on the wire); arguments and results must pickle."""
        if name in ("reset", "step", "close", "_setattr", "_check_spaces"):
            raise ValueError(f"Trying to call function `{name}` with `call`, use `{name}` directly instead.")
        return self._each_server("call", name, [(args, kwargs)] * len(self._servers))

    def get_attr(self, name: str) -> Tuple[Any, ...]:
        """Attribute ``name`` of every sub-env (``call(name)``)."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Sets attribute ``name`` of every sub-env: ``values`` is a list or
        tuple of one value per env, or one value for all, as Gymnasium's
        ``AsyncVectorEnv.set_attr``. A server started again (``restart=``)
        starts from its factories: attributes set before are not set there."""
        if not isinstance(values, (list, tuple)):
            values = [values for _ in range(self.num_envs)]
        if len(values) != self.num_envs:
            raise ValueError("Values must be a list or tuple with length equal to the number of environments. "
                             f"Got `{len(values)}` values for {self.num_envs} environments.")
        payloads, start = [], 0
        for server in self._servers:
            width = sum(server.groups)
            payloads.append(list(values[start:start + width]))
            start += width
        self._each_server("set_attr", name, payloads)

    def render(self) -> Optional[Tuple[Any, ...]]:
        """Every sub-env's ``render()``, in order (``call("render")``)."""
        return self.call("render")

    @property
    def np_random_seed(self) -> Tuple[int, ...]:  # type: ignore[override]  # AsyncVectorEnv's type
        """Every sub-env's ``np_random_seed``, as Gymnasium's vector envs give it."""
        return self.get_attr("np_random_seed")

    def _resolve(self, url: str, resource_id: str) -> Optional[str]:
        """``RestartPolicy.resolve``: where the envs of the server that
        served ``url`` are now; a dead server is started again (once for all
        of its resources: the next call finds the new one alive)."""
        k = self._slot_of.get(url)
        if k is None:
            return None  # not one of ours: where it was
        server = self._servers[k]
        try:
            # A connection drops as its process dies, a moment before the
            # process can be waited for.
            server.process.wait(0.5)
        except subprocess.TimeoutExpired:
            return server.url  # alive (a timeout, a faulted env, or started again already)
        deadline = time.monotonic() + self._restart_timeout
        fresh = server.again(deadline)
        # Over TCP the OS may hand out a port another of our servers had
        # before it died: a resource of that server not yet reconnected would
        # then be sent here. Such a server is started again while it holds
        # the port (so the next one gets another), until its URL was never
        # another server's.
        for _ in range(_MAX_URL_RETRIES):
            if self._slot_of.get(fresh.url, k) == k:
                break
            retry = fresh.again(deadline)
            fresh.stop(timeout=2.0)
            fresh = retry
        else:
            fresh.stop(timeout=2.0)
            raise RuntimeError(f"server {k} was started again {_MAX_URL_RETRIES + 1} times, and each time at an "
                               "address another server of this fleet had before")
        self._servers[k] = fresh
        server.stop()
        self._slot_of[fresh.url] = k
        return fresh.url

    @property
    def server_pids(self) -> List[int]:
        """The server processes' ids."""
        return [s.process.pid for s in self._servers]

    def _stop_servers(self, timeout: float = 10.0) -> None:
        for s in self._servers:
            s.stop(timeout)
        self._servers = []
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def close_extras(self, **kwargs: Any) -> None:
        try:
            super().close_extras(**kwargs)
        finally:
            self._stop_servers()

    def __del__(self) -> None:
        try:
            super().__del__()
        finally:
            if getattr(self, "_servers", None):
                self._stop_servers()
