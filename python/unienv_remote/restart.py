"""Fleets that heal: ``RemoteVectorEnv(..., restart=RestartPolicy(...))``.

    from unienv_remote import RemoteVectorEnv, RestartPolicy

    envs = RemoteVectorEnv(addresses, restart=RestartPolicy(max_restarts=3, window=600.0))

With a policy, a sub-environment whose server is lost (its connection closed
or refused, or a request timed out, which closes the connection) or whose env
is faulted (``faulted`` or ``execution_error``: the simulator raised) is
*restarted* within the call that saw the failure: reconnected (at the same
address, or the one ``resolve`` gives), reset, and reported in that call's
``infos`` as a cut episode. A mutation is never retried: the lost step is not
sent again, and ``infos["step_may_have_run"]`` says whether it may have run on
the server before the loss. See :class:`RestartPolicy` for the limits, and
``help(RemoteVectorEnv)`` for how a restart looks in each autoreset mode.

Restarts are counted per *resource* (one address: a single env, or a batched
resource's B sub-envs, which restart together). Beyond ``max_restarts`` within
``window`` seconds, or when a restart does not succeed within ``timeout``
seconds, the resource is given up: its failure is reported as
:class:`RestartError` through ``on_error`` (``VectorEnvError`` or
``infos["error"]``), and it is not restarted again until the learner resets
it successfully itself (``reset(options={"reset_mask": envs.needs_reset()})``).

Nothing here changes the protocol: it is the client's policy, built on
``RemoteVectorEnv.reconnect`` and masked resets.
"""

from __future__ import annotations

import collections
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union

import numpy as np
from unienv_interface.remote.errors import RemoteError, UncertainOutcomeError

from . import _native

__all__ = ["RestartPolicy", "RestartError", "Resolver", "REASONS"]

#: What ``resolve`` returns: ``None`` (reconnect at the same address), a new
#: URL (same resource ID), or a new ``(url, resource_id)``.
ResolvedAddress = Union[None, str, Tuple[str, str]]
#: ``resolve(url, resource_id)``: where a lost resource lives now.
Resolver = Callable[[str, str], ResolvedAddress]

#: The values of ``infos["restart_reason"]``: ``"connection_lost"`` (the
#: connection closed or was refused), ``"timeout"`` (no reply within the
#: vector env's ``timeout``; the client closed the connection) and
#: ``"faulted"`` (the server answered ``faulted`` or ``execution_error``: the
#: env must be reset; the connection is kept).
REASONS = ("connection_lost", "timeout", "faulted")

_FAULT_CODES = frozenset({"faulted", "execution_error"})

#: Each restart (WARNING) and each resource given up (ERROR) is logged here.
_log = logging.getLogger("unienv_remote.restart")


@dataclass(frozen=True)
class RestartPolicy:
    """When and how ``RemoteVectorEnv`` restarts lost or faulted sub-envs.

    ``max_restarts`` restarts of one resource (a single env, or a batched
    resource's sub-envs together) within any ``window`` seconds; one more is
    not attempted: the resource is given up (:class:`RestartError`).
    ``max_restarts=0`` never restarts (every failure is reported as
    ``RestartError`` naming the policy).

    ``timeout`` (seconds) bounds one restart: reconnection attempts (each
    also bounded by the vector env's ``timeout``, which a connection attempt
    to a hung host may take in full) and the reset, retried with exponential
    backoff from ``backoff`` seconds, doubling up to ``max_backoff``. The
    call that saw the failure (``step``, ``step_wait``, ``reset``) returns
    the other sub-envs' results once every restart it started succeeded or
    was given up: within ``timeout`` plus at most one attempt in progress
    (its connection and its reset each bounded by the vector env's own
    ``timeout=``; a refused connection fails at once). The restarts of one
    call share one deadline: two lost servers cost one ``timeout``, not two
    (their attempts, one connection per server, are made in turn).

    ``resolve(url, resource_id)`` (optional) says where a lost resource
    lives now: ``None`` for the same address, a new URL, or a new ``(url,
    resource_id)``. It is called before every reconnection attempt (it may
    start a replacement server, as :func:`unienv_remote.ray.vector_env`'s
    does for a dead Ray actor; make it idempotent), not for a faulted env on
    a live connection. If it raises :class:`RestartError` the resource is
    given up at once; any other exception counts as a failed attempt.
    """

    max_restarts: int = 3
    window: float = 600.0
    timeout: float = 30.0
    backoff: float = 0.05
    max_backoff: float = 2.0
    resolve: Optional[Resolver] = None

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ValueError("max_restarts must be >= 0")
        for name in ("window", "timeout", "backoff", "max_backoff"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"{name} must be > 0 seconds")


class RestartError(RuntimeError):
    """A lost or faulted sub-env was not restarted: the policy's limit was
    reached, the restart did not succeed within the policy's ``timeout``, or
    ``resolve`` gave up. ``__cause__`` is the failure that called for the
    restart (or the last attempt's error); ``reason`` is one of
    :data:`REASONS`; ``step_may_have_run`` tells whether the lost step may
    have executed on the server; ``url`` / ``resource_id`` name the
    resource."""

    def __init__(self, message: str, *, url: str = "", resource_id: str = "", reason: str = "",
                 step_may_have_run: bool = False) -> None:
        super().__init__(message)
        self.url = url
        self.resource_id = resource_id
        self.reason = reason
        self.step_may_have_run = step_may_have_run


def classify(error: BaseException) -> Optional[Tuple[str, bool]]:
    """``(reason, may_have_run)`` for a failure a restart heals, else
    ``None`` (a refused request, a codec error...: the learner's to see)."""
    may_have_run = isinstance(error, UncertainOutcomeError) or bool(getattr(error, "uncertain", False))
    cause: Optional[BaseException] = error
    if isinstance(error, UncertainOutcomeError):
        cause = error.__cause__
    if isinstance(cause, TimeoutError):
        return "timeout", may_have_run
    if isinstance(cause, ConnectionError):
        return "connection_lost", may_have_run
    if isinstance(error, RemoteError) and error.code in _FAULT_CODES:
        return "faulted", may_have_run
    if isinstance(error, UncertainOutcomeError):
        return "connection_lost", may_have_run
    return None


@dataclass
class Failure:
    """A resource to restart: why, and whether its lost step may have run."""

    reason: str
    may_have_run: bool
    error: BaseException


@dataclass
class Restarted:
    """A resource restarted: each sub-env's reset observation and info, and
    the reset's whole stacked observation (a template when the call that
    failed returned none: every env failed)."""

    failure: Failure
    observations: List[Any]
    infos: List[Dict[str, Any]]
    stacked: Any


def take(tree: Any, i: int) -> Any:
    """Env ``i``'s slot of a stacked observation (arrays, dicts, tuples)."""
    if isinstance(tree, dict):
        return {k: take(v, i) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(take(v, i) for v in tree)
    value = tree[i]
    return value.copy() if hasattr(value, "copy") else value


def zeros_rows(tree: Any, count: int) -> Any:
    """A stacked observation of ``count`` rows of zeros, shaped like ``tree``'s rows."""
    if isinstance(tree, dict):
        return {k: zeros_rows(v, count) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(zeros_rows(v, count) for v in tree)
    return np.zeros((count, *np.shape(tree)[1:]), dtype=np.asarray(tree).dtype)


def _concat(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {k: _concat(a[k], b[k]) for k in a}
    if isinstance(a, (tuple, list)):
        return type(a)(_concat(x, y) for x, y in zip(a, b))
    return np.concatenate([np.asarray(a), np.asarray(b)])


def info_rows(infos: Any, count: int) -> List[Dict[str, Any]]:
    """A native result's infos as one dict per row: a list as it is, or the
    dict the extension gathered (Gymnasium's layout of flat columns) split
    by its masks, each value as the row's own dict held it (a Python
    ``float``/``int``/``bool`` for a 1-D ``float64``/``int64``/``bool``
    column, else the row's array)."""
    if not isinstance(infos, dict):
        return list(infos)
    rows: List[Dict[str, Any]] = [{} for _ in range(count)]
    for key, column in infos.items():
        mask = infos.get(f"_{key}")
        if mask is None:
            continue  # a mask itself
        scalars = column.ndim == 1 and column.dtype in (np.float64, np.int64, np.bool_)
        for j in np.flatnonzero(mask):
            rows[j][key] = column[j].item() if scalars else column[j].copy()
    return rows


def concat_results(a: _native.VectorStep, b: _native.VectorStep) -> _native.VectorStep:
    """Two native ``recv`` results as one (``b``'s rows after ``a``'s)."""
    na, nb = len(a.env_id), len(b.env_id)
    if a.observation is None and b.observation is None:
        obs = None
    else:
        obs = _concat(zeros_rows(b.observation, na) if a.observation is None else a.observation,
                      zeros_rows(a.observation, nb) if b.observation is None else b.observation)
    finals = list(a.finals) + [(p + na, o, info) for p, o, info in b.finals]

    def cat(x: Any, y: Any) -> Any:
        return np.concatenate([np.asarray(x), np.asarray(y)])

    infos: Any = info_rows(a.infos, na) + info_rows(b.infos, nb)
    return _native.VectorStep(obs, cat(a.reward, b.reward), cat(a.terminated, b.terminated),
                              cat(a.truncated, b.truncated), infos,
                              cat(a.autoreset, b.autoreset), finals, list(a.errors) + list(b.errors),
                              cat(a.env_id, b.env_id))


def put(tree: Any, i: int, value: Any) -> Any:
    """Writes ``value`` into slot ``i`` of a stacked observation; returns
    the structure (a copy of a read-only array)."""
    if isinstance(tree, dict):
        return {k: put(v, i, value[k]) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(put(v, i, w) for v, w in zip(tree, value))
    if not tree.flags.writeable:
        tree = tree.copy()
    tree[i] = value
    return tree


class Healer:
    """Restarts resources of a native vector env under a policy (the
    counting, the attempts and their deadline); ``RemoteVectorEnv`` decides
    what to restart and reports the outcome."""

    def __init__(self, policy: RestartPolicy, native: Any, ranges: Sequence[Tuple[int, int]],
                 addresses: List[Tuple[str, str]]) -> None:
        self.policy = policy
        self._native = native
        self._ranges = list(ranges)
        self._addresses = addresses  # RemoteVectorEnv's own list, updated in place
        self._history: Dict[int, Deque[float]] = collections.defaultdict(collections.deque)
        #: Resources given up, not restarted again until the learner resets them.
        self.given_up: Set[int] = set()
        self._resource_of = [k for k, (_, width) in enumerate(self._ranges) for _ in range(width)]
        #: Called with a resource reconnected, before its reset (the vector
        #: env sets its ``set_attr`` values again); its failure fails the attempt.
        self.reconnected: Optional[Callable[[int], None]] = None

    def resource_of(self, env: int) -> int:
        return self._resource_of[env]

    def envs_of(self, resource: int) -> range:
        start, width = self._ranges[resource]
        return range(start, start + width)

    def learner_reset(self, envs: Sequence[int]) -> None:
        """The learner reset these envs itself: their resources may restart again."""
        for i in envs:
            self.given_up.discard(self.resource_of(i))

    def _give_up(self, k: int, failure: Failure, why: str, cause: BaseException) -> RestartError:
        url, resource_id = self._addresses[k]
        error = RestartError(f"{self._name(k)}, {failure.reason}: {why}", url=url,
                             resource_id=resource_id, reason=failure.reason,
                             step_may_have_run=failure.may_have_run)
        error.__cause__ = cause
        self.given_up.add(k)
        _log.error("gave up restarting %s", error)
        return error

    def _name(self, k: int) -> str:
        url, resource_id = self._addresses[k]
        first, width = self._ranges[k]
        envs = f"env {first}" if width == 1 else f"envs {first}..{first + width - 1}"
        return f"{envs} ({resource_id} at {url})"

    def _target(self, k: int) -> Tuple[str, str]:
        url, resource_id = self._addresses[k]
        if self.policy.resolve is None:
            return url, resource_id
        resolved = self.policy.resolve(url, resource_id)
        if resolved is None:
            return url, resource_id
        if isinstance(resolved, str):
            return resolved, resource_id
        return str(resolved[0]), str(resolved[1])

    def restart(self, failures: Dict[int, Failure], seeds: Optional[Sequence[Optional[int]]] = None,
                options: Optional[Any] = None) -> Tuple[Dict[int, Restarted], Dict[int, RestartError]]:
        """Restarts ``failures`` (resource -> why): reconnects the lost ones,
        resets all (``seeds`` per env, ``options`` for every reset), retrying
        until the policy's ``timeout``. Returns the restarted resources and
        the given-up ones' errors."""
        policy = self.policy
        now = time.monotonic()
        done: Dict[int, Restarted] = {}
        given_up: Dict[int, RestartError] = {}
        pending: Dict[int, Failure] = {}
        for k, failure in failures.items():
            history = self._history[k]
            while history and history[0] <= now - policy.window:
                history.popleft()
            if len(history) >= policy.max_restarts:
                given_up[k] = self._give_up(
                    k, failure, f"not restarted: {len(history)} restart(s) within the last {policy.window:g} s, "
                    f"the policy's max_restarts={policy.max_restarts}", failure.error)
                continue
            history.append(now)
            pending[k] = failure
        reconnect = {k for k, f in pending.items() if f.reason != "faulted"}
        last_error: Dict[int, BaseException] = {k: f.error for k, f in pending.items()}
        deadline = now + policy.timeout
        delay = policy.backoff
        attempts = 0
        n = self._native.num_envs
        while pending:
            attempts += 1
            by_url: Dict[str, List[Tuple[int, str, str]]] = {}
            for k in sorted(reconnect):
                try:
                    url, resource_id = self._target(k)
                except RestartError as e:
                    e.__cause__ = e.__cause__ or pending[k].error
                    given_up[k] = self._give_up(k, pending.pop(k), f"resolve gave up: {e}", e)
                    reconnect.discard(k)
                    continue
                except Exception as e:  # the resolver's failure: one failed attempt
                    last_error[k] = e
                    continue
                by_url.setdefault(url, []).append((k, url, resource_id))
            for url, group in by_url.items():
                try:
                    self._native.reconnect([(self._ranges[k][0], u, r) for k, u, r in group])
                except ValueError as e:  # not the env it replaces (batch size, spaces): for good
                    for k, _, _ in group:
                        reconnect.discard(k)
                        given_up[k] = self._give_up(k, pending.pop(k), f"cannot reconnect: {e}", e)
                    continue
                except (ConnectionError, TimeoutError, OSError, RuntimeError) as e:
                    for k, _, _ in group:
                        last_error[k] = e
                    continue
                for k, u, r in group:
                    self._addresses[k] = (u, r)
                    if self.reconnected is not None:
                        try:
                            self.reconnected(k)
                        except Exception as e:  # the next attempt reconnects again
                            last_error[k] = e
                            continue
                    reconnect.discard(k)
            ready = [k for k in pending if k not in reconnect]
            if ready:
                mask = [False] * n
                for k in ready:
                    for i in self.envs_of(k):
                        mask[i] = True
                reset_seeds = [None if seeds is None else seeds[i] for i in range(n)]
                obs, infos, errors, used = self._native.reset(reset_seeds, options, mask)
                infos = info_rows(infos, n)  # the extension may have gathered them
                failed: Dict[int, BaseException] = {}
                for i, _kind, reset_error in errors:
                    if mask[i]:
                        failed.setdefault(self.resource_of(i), reset_error)
                for k in ready:
                    if k in failed:
                        last_error[k] = failed[k]
                        why = classify(failed[k])
                        if why is None:
                            given_up[k] = self._give_up(k, pending.pop(k), f"its reset failed: {failed[k]}", failed[k])
                        elif why[0] != "faulted":
                            reconnect.add(k)
                        continue
                    envs = self.envs_of(k)
                    done[k] = Restarted(pending.pop(k), [take(obs, i) for i in envs],
                                        [dict(infos[i]) if i < len(infos) else {} for i in envs], obs)
                    _log.warning("restarted %s after %s (%s; %d attempt(s), %.2f s); the lost request %s",
                                 self._name(k), done[k].failure.reason, done[k].failure.error, attempts,
                                 time.monotonic() - now,
                                 "may have run" if done[k].failure.may_have_run else "did not run")
            if not pending:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                for k in list(pending):
                    given_up[k] = self._give_up(
                        k, pending.pop(k), f"not back within the policy's timeout of {policy.timeout:g} s "
                        f"({attempts} attempt(s); last: {type(last_error[k]).__name__}: {last_error[k]})",
                        last_error[k])
                break
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, policy.max_backoff)
        return done, given_up
