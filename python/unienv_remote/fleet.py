"""``unienv_remote.ProcessVectorEnv``: a ``RemoteVectorEnv`` over server
processes it starts on this machine, one per vCPU, each hosting its share of
the envs as ``BatchedEnv`` resources.

What a learner writes instead of Gymnasium's ``AsyncVectorEnv(env_fns)``; its
loop stays the same::

    from unienv_remote import ProcessVectorEnv
    envs = ProcessVectorEnv([lambda: gymnasium.make("HalfCheetah-v5")] * 16)

It is the configuration this project measures fastest on one machine (its
README, "Keep every server busy"; BENCHMARKS.md): the envs split evenly
over ``servers`` processes (by default one per vCPU this process may use),
each pinned to a vCPU of its own, reached over Unix domain sockets, its
share stepped as ``BatchedEnv`` resources (one request per resource per
step). ``resources_per_server=2`` with ``batch_size=num_envs // 2`` lets each
server step one batch while the learner turns the other around (``send`` /
``recv``).

A server process is ``python -m unienv_remote._fleet_server``: it reads this
process's import path and the env factories (pickled with ``cloudpickle``
when it is installed, as Gymnasium's ``AsyncVectorEnv`` pickles them, else
``pickle``) from its standard input, prints its URL and serves until its standard input closes:
when this vector env closes, or when this process ends, however it ends.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .vector import RemoteVectorEnv

__all__ = ["ProcessVectorEnv"]

#: The line a server process prints before its URL.
URL_PREFIX = "unienv-remote-fleet-url "


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


class _Server:
    """One server process: started, its URL read, stopped."""

    def __init__(self, index: int, fns: Sequence[Callable[[], Any]], groups: List[int],
                 cpu: Optional[int], socket_path: Optional[str]) -> None:
        self.index, self.fns, self.groups, self.cpu, self.socket_path = index, fns, groups, cpu, socket_path
        # Unbuffered: select() on its standard output sees every byte not read.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "unienv_remote._fleet_server"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        # The parent's import path first (as multiprocessing's spawn sends it):
        # factories pickled by reference import their modules from it.
        payload = pickle.dumps({"sys_path": list(sys.path),
                                "spec": _dumps({"fns": list(fns), "groups": groups, "cpu": cpu, "unix": socket_path})})
        stdin = self.process.stdin
        assert stdin is not None
        data = memoryview(struct.pack("<Q", len(payload)) + payload)
        try:
            while data:  # unbuffered: a write may take part of it
                data = data[stdin.write(data) or 0:]
        except BrokenPipeError:
            pass  # it died at once: read_url says how
        self.url = ""

    def read_url(self, deadline: float) -> str:
        """Waits for the server's URL (until ``deadline``, a monotonic time)."""
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"server process {self.index} (pid {self.process.pid}) did not start in time")
            ready, _, _ = select.select([stdout], [], [], left)
            if not ready:
                continue
            line = stdout.readline().decode("utf-8", "replace")
            if not line:
                code = self.process.wait()
                raise RuntimeError(f"server process {self.index} (pid {self.process.pid}) exited with code {code} "
                                   "before serving (its error is on standard error above)")
            if line.startswith(URL_PREFIX):
                self.url = line[len(URL_PREFIX):].strip()
                return self.url

    def again(self, deadline: float) -> "_Server":
        """A new process serving the same envs (at the same socket path),
        started and serving by ``deadline``."""
        new = _Server(self.index, self.fns, self.groups, self.cpu, self.socket_path)
        try:
            new.read_url(deadline)
        except BaseException:
            new.stop()
            raise
        return new

    def stop(self, timeout: float = 10.0) -> None:
        """Closes its standard input (it closes its server and exits); kills
        it after ``timeout`` seconds."""
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ProcessVectorEnv(RemoteVectorEnv):
    """A ``RemoteVectorEnv`` over ``len(env_fns)`` envs hosted by server
    processes it starts and owns (see the module's documentation).

    * ``env_fns``: one callable per env, returning a Gymnasium env or a
      UniEnv ``Env`` (as ``BatchedEnv`` takes them); they run in the server
      processes, so they must pickle (``cloudpickle`` takes lambdas).
    * ``servers``: how many processes (default: the vCPUs this process may
      use, at most one per env).
    * ``resources_per_server``: how many ``BatchedEnv`` resources each
      process hosts (its envs split evenly): 1 for lockstep ``step``, 2 to
      step with ``send``/``recv`` and ``batch_size`` half the envs.
    * ``pin``: pin server ``i`` to the ``i``-th vCPU this process may use
      (``RemoteServer(cpus=...)``, Linux), the learner left unpinned.
    * ``unix``: serve on Unix domain sockets in a private temporary
      directory (else loopback TCP).
    * ``start_timeout``: seconds to wait for every server to serve.
    * ``restart``: a ``RestartPolicy`` (without ``resolve``): a server
      process that died is started again (the same envs, vCPU and socket
      path), and its envs heal as ``RemoteVectorEnv``'s policy says (they
      are reset and reported in that step's ``infos["restart"]``), within
      the policy's limits; the other servers' envs are not touched.
    * everything else (``autoreset_mode``, ``batch_size``, ``timeout``,
      ``on_error``, ``record_dir``, ...) as ``RemoteVectorEnv``.

    ``close()`` closes the connections, then the processes; they also end
    when this process ends. Sub-env ``i`` is ``env_fns[i]``'s env, and
    ``reset(seed=s)`` seeds it with ``s + i`` as Gymnasium's vector envs do.
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], *, servers: Optional[int] = None,
                 resources_per_server: int = 1, pin: bool = True, unix: bool = True,
                 start_timeout: float = 120.0, **kwargs: Any) -> None:
        fns = list(env_fns)
        if not fns:
            raise ValueError("ProcessVectorEnv needs at least one env factory")
        if not all(callable(f) for f in fns):
            raise TypeError("env_fns must be callables that return an env")
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if servers is None:
            servers = min(len(fns), max(1, len(cpus) or (os.cpu_count() or 1)))
        if not 1 <= servers <= len(fns):
            raise ValueError(f"servers must be between 1 and the number of envs ({len(fns)}), got {servers}")
        if not 1 <= resources_per_server <= len(fns) // servers:
            raise ValueError("resources_per_server must be at least 1 and leave each resource an env "
                             f"({len(fns)} envs over {servers} servers)")
        self._servers: List[_Server] = []
        self._start_timeout = start_timeout
        restart = kwargs.get("restart")
        if restart is not None and restart.resolve is None:
            kwargs["restart"] = dataclasses.replace(restart, resolve=self._resolve)
        self._socket_dir: Optional[str] = tempfile.mkdtemp(prefix="unienv-fleet-") if unix else None
        try:
            # Resources server-major: server s's resources hold consecutive envs.
            sizes = _split(len(fns), servers)
            start = 0
            shares: List[Tuple[Sequence[Callable[[], Any]], List[int]]] = []
            for size in sizes:
                shares.append((fns[start:start + size], _split(size, resources_per_server)))
                start += size
            for i, (share, groups) in enumerate(shares):
                cpu = cpus[i % len(cpus)] if pin and cpus else None
                path = None if self._socket_dir is None else os.path.join(self._socket_dir, f"server{i}.sock")
                self._servers.append(_Server(i, share, groups, cpu, path))
            deadline = time.monotonic() + start_timeout
            urls = [s.read_url(deadline) for s in self._servers]
            # Every URL each server had (a TCP server started again has a new port).
            self._slot_of: Dict[str, int] = {url: k for k, url in enumerate(urls)}
            addresses = [(url, f"batch{k}") for url, (_, groups) in zip(urls, shares) for k in range(len(groups))]
            super().__init__(addresses, **kwargs)
        except BaseException:
            self._stop_servers()
            raise

    def _resolve(self, url: str, resource_id: str) -> Optional[str]:
        """``RestartPolicy.resolve``: where the envs of the server that
        served ``url`` are now; a dead server is started again (once for all
        of its resources: the next call finds the new one alive)."""
        k = self._slot_of.get(url)
        if k is None:
            return None  # not one of ours: where it was
        server = self._servers[k]
        if server.process.poll() is None:
            return server.url  # alive (a timeout, a faulted env, or started again already)
        self._servers[k] = server.again(time.monotonic() + self._start_timeout)
        server.stop()
        self._slot_of[self._servers[k].url] = k
        return self._servers[k].url

    @property
    def server_pids(self) -> List[int]:
        """The server processes' ids."""
        return [s.process.pid for s in self._servers]

    def _stop_servers(self) -> None:
        for s in self._servers:
            s.stop()
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
