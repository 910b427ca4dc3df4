"""A server process of ``unienv_remote.ProcessVectorEnv`` (see
``unienv_remote.fleet``): reads its envs from standard input (an 8-byte
little-endian length, then a pickled ``{"sys_path", "log_level", "spec"}``:
the vector env's import path, the level of its ``unienv_remote`` logger, and
``{"fns", "groups", "cpu", "unix", "observation_space"}`` pickled again, to be read once that path
is set), hosts them as ``BatchedEnv`` resources ``batch0``, ``batch1``, ...
(``groups`` gives their sizes, in ``fns`` order; values of spaces the wire
has no form for carried pickled, see ``_gym_spaces.CARRIER``),
prints ``SPACES_PREFIX`` and its first sub-env's Gymnasium spaces, then
``URL_PREFIX`` and its URL, and serves until its standard input closes. When
its sub-envs' observation spaces do not pass Gymnasium's ``AsyncVectorEnv``
check for the vector env's ``observation_mode`` (``spec["observation_space"]``:
the one space to publish, or ``None`` for ``"same"``), it prints
``ERROR_PREFIX`` and Gymnasium's message instead, and exits.

Meanwhile it answers the vector env's ``call`` / ``set_attr`` requests, sent
on standard input framed as the spec is (a pickled ``(op, name, payload)``),
on the main thread, one at a time: a framed, pickled answer on standard
output (see ``_answer``). These never go over the wire: the protocol has no
attribute or code call (its "Execution rules"), and this process is the
vector env's own.

Standard input is its life line: a thread of its own (the watchdog) reads it
from the first byte to its end, whatever the rest of the process is doing.
When it ends (the vector env closed, or the learner's process ended however
it ended), a server that serves closes within ``CLOSE_GRACE`` seconds, and
one still starting (an env factory, an import or a pickled value that
hangs) exits at once: the process never outlives its learner by more than
that, in any state."""

from __future__ import annotations

import base64
import logging
import os
import pickle
import queue
import struct
import sys
import threading
from typing import Any, BinaryIO, Callable, Dict, List, Optional, Tuple

#: Seconds a serving server has to close once its life line ended, before
#: the watchdog ends the process (an env whose ``close`` hangs).
CLOSE_GRACE = 5.0

#: The process's exit status when the watchdog ends it.
WATCHDOG_EXIT = 3

#: Gymnasium's ``AsyncVectorEnv`` error for sub-envs of differing
#: observation spaces in ``observation_mode="same"``, ours.
SAME_MISMATCH = ("ProcessVectorEnv(..., observation_mode='same') however some of the sub-environments observation "
                 "spaces are not equivalent. If this is intentional, use `observation_mode='different'` instead.")
#: Its error for sub-envs whose spaces differ in type, shape or dtype
#: (``observation_mode="different"`` or a custom space).
DIFFERENT_MISMATCH = ("ProcessVectorEnv(..., observation_mode='different' or custom space) however the "
                      "sub-environment's observation spaces do not share a common shape and dtype.")


class _Watchdog:
    """Reads standard input on a thread of its own: the spec first (handed
    to the main thread), then to its end, which ends the process."""

    def __init__(self, stdin: BinaryIO) -> None:
        self.stdin = stdin
        self.payload: "queue.Queue[Optional[bytes]]" = queue.Queue(maxsize=1)
        #: Set once standard input ended: the main thread closes the server.
        self.ended = threading.Event()
        #: Requests after the spec (``None`` once standard input ended).
        self.requests: "queue.Queue[Optional[bytes]]" = queue.Queue()
        #: Set by the main thread once the server serves.
        self.serving = threading.Event()
        self.thread = threading.Thread(target=self._run, name="unienv-fleet-watchdog", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _read_exactly(self, n: int) -> Optional[bytes]:
        data = b""
        while len(data) < n:
            chunk = self.stdin.read(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def _run(self) -> None:
        head = self._read_exactly(8)
        payload = None if head is None else self._read_exactly(struct.unpack("<Q", head)[0])
        self.payload.put(payload)
        if payload is not None:
            # Then requests (``call`` / ``set_attr``, framed the same way),
            # handed to the main thread, until the end.
            while True:
                head = self._read_exactly(8)
                request = None if head is None else self._read_exactly(struct.unpack("<Q", head)[0])
                if request is None:
                    break
                self.requests.put(request)
        self.ended.set()
        self.requests.put(None)
        # A server still starting exits now; a serving one closes in the main
        # thread, given CLOSE_GRACE seconds.
        if not self.serving.is_set() or not _main_finished.wait(CLOSE_GRACE):
            _exit_now()


#: Set when ``main`` returns (the server closed).
_main_finished = threading.Event()


def _exit_now() -> None:
    """Ends the process without waiting for any thread (a hosted env's
    thread may be stuck); what it printed is flushed first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(WATCHDOG_EXIT)


def main() -> None:
    # Standard output is a pipe that the vector env reads only until the URL:
    # everything else printed (by the envs, now or while they step) goes to
    # standard error, so that a chatty simulator never fills that pipe.
    url_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    watchdog = _Watchdog(sys.stdin.buffer)
    watchdog.start()
    data = watchdog.payload.get()
    if data is None:
        raise SystemExit("unienv_remote._fleet_server: standard input ended before its envs were read")
    outer: Dict[str, Any] = pickle.loads(data)
    # The learner's level for the ``unienv_remote`` logger: what it would see
    # of its own client is what it sees of its servers (quiet at INFO by
    # default, as an unconfigured logger is at WARNING).
    level = outer.get("log_level")
    if isinstance(level, int):
        logging.getLogger("unienv_remote").setLevel(level)
    # The vector env's import path, for factories pickled by reference.
    sys.path[:] = list(dict.fromkeys(list(outer["sys_path"]) + sys.path))
    spec: Dict[str, Any] = pickle.loads(outer["spec"])

    from unienv_remote.batched import BatchedEnv
    from unienv_remote.server import RemoteServer
    from unienv_remote.fleet import ERROR_PREFIX, SPACES_PREFIX, URL_PREFIX

    server = RemoteServer(idle_timeout=None, cpus=None if spec["cpu"] is None else [spec["cpu"]])
    try:
        made = _make_envs(spec["fns"], spec.get("observation_space"))
        mismatch = _differing_spaces(made, spec.get("observation_space"))
        if mismatch is not None:
            for env in made:
                env.close()
            print(ERROR_PREFIX + mismatch, file=url_out, flush=True)
            raise SystemExit(f"unienv_remote._fleet_server: {mismatch}")
        start = 0
        batches = []
        for k, size in enumerate(spec["groups"]):
            batch = BatchedEnv([_given(env) for env in made[start:start + size]])
            batches.append(batch)
            server.register(f"batch{k}", batch)
            start += size
        url = server.listen("127.0.0.1", 0) if spec["unix"] is None else server.listen_unix(spec["unix"])
        watchdog.serving.set()
        if watchdog.ended.is_set():
            _exit_now()  # the learner ended while this server started
        print(SPACES_PREFIX + _spaces_line(batches[0].sub_envs[0]), file=url_out, flush=True)
        print(URL_PREFIX + url, file=url_out, flush=True)
        envs = [env for batch in batches for env in batch.sub_envs]
        while True:  # until the vector env closes (or its process ends)
            request = watchdog.requests.get()
            if request is None:
                break
            _answer(envs, request, url_out)
    finally:
        server.close()
        _main_finished.set()


def _make_envs(fns: List[Callable[[], Any]], observation_space: Any) -> List[Any]:
    """Every env of ``fns`` as this process hosts it: values of spaces the
    wire has no form for (``Graph``, ``Sequence``, custom spaces) carried
    pickled (``_gym_spaces.fleet_hostable``), for the vector env that
    started this process to unpickle; with ``observation_space`` (the
    vector env's ``observation_mode`` other than ``"same"``), each
    Gymnasium env published with that observation space instead of its
    own (``_gym_spaces.ObservationSpaceAs``)."""
    from unienv_remote._gym_spaces import ObservationSpaceAs, fleet_hostable

    made: List[Any] = []
    try:
        for fn in fns:
            env = fn()
            made.append(env)
            if observation_space is not None and isinstance(env, ObservationSpaceAs.wrappable):
                made[-1] = ObservationSpaceAs(env, observation_space)
            made[-1] = fleet_hostable(made[-1])
    except BaseException:
        for env in made:
            env.close()
        raise
    return made


def _given(env: Any) -> Callable[[], Any]:
    """A factory giving ``env`` (``BatchedEnv`` takes factories)."""
    return lambda: env


def _differing_spaces(envs: List[Any], published: Any) -> Optional[str]:
    """Gymnasium's ``AsyncVectorEnv`` check of its sub-envs' observation
    spaces, and its error: with ``observation_mode="same"`` (nothing
    ``published``) they must all be equal, else each must have the
    ``published`` space's types, shapes and dtypes."""
    from gymnasium.spaces.utils import is_space_dtype_shape_equiv

    from unienv_remote._gym_spaces import gymnasium_env

    found = [getattr(gymnasium_env(env), "observation_space", None) for env in envs]
    if published is None:
        return None if all(space == found[0] for space in found[1:]) else SAME_MISMATCH
    if all(space is None or is_space_dtype_shape_equiv(published, space) for space in found):
        return None
    return DIFFERENT_MISMATCH


def _spaces_line(env: Any) -> str:
    """Sub-env 0's Gymnasium spaces (``None`` for a UniEnv env), metadata and
    render mode, pickled and in base 64: the vector env's single spaces."""
    import gymnasium

    from unienv_remote._gym_spaces import gymnasium_env

    inner = gymnasium_env(env)
    found: Dict[str, Any] = {}
    if isinstance(inner, gymnasium.Env):
        found = {"observation_space": inner.observation_space, "action_space": inner.action_space,
                 "metadata": dict(inner.metadata), "render_mode": inner.render_mode}
    try:
        # cloudpickle: a space class sent by value with the factories (not
        # importable here) goes back the same way.
        data = _dumps(found)
    except Exception:  # noqa: BLE001 - a space that does not pickle: the wire's spaces are used
        data = pickle.dumps({})
    return base64.b64encode(data).decode("ascii")


def _answer(envs: List[Any], request: bytes, out: Any) -> None:
    """Runs one ``call`` / ``set_attr`` request on the sub-envs it names, as
    Gymnasium's ``AsyncVectorEnv`` worker does (``get_wrapper_attr``, called
    when callable; ``set_wrapper_attr``), and writes the framed, pickled
    answer: ``("ok", [result per env])`` or ``("error", (env, exception))``."""
    from unienv_remote._gym_spaces import gymnasium_env

    op, name, payload = pickle.loads(request)
    results: List[Any] = []
    answer: Tuple[str, Any]
    for i, env in enumerate(envs):
        target = gymnasium_env(env)
        try:
            if op == "set_attr":
                if hasattr(target, "set_wrapper_attr"):
                    target.set_wrapper_attr(name, payload[i])
                else:
                    setattr(target, name, payload[i])
                results.append(None)
            else:
                args, kwargs = payload
                attr = target.get_wrapper_attr(name) if hasattr(target, "get_wrapper_attr") else getattr(target, name)
                results.append(attr(*args, **kwargs) if callable(attr) else attr)
        except Exception as e:  # noqa: BLE001 - the learner raises it
            answer = ("error", (i, e))
            break
    else:
        answer = ("ok", results)
    try:
        data = _dumps(answer)
    except Exception as e:  # noqa: BLE001 - a result that does not pickle
        data = _dumps(("error", (0, TypeError(f"the result of {name!r} does not pickle: {e}"))))
    out.buffer.write(struct.pack("<Q", len(data)) + data)
    out.flush()


def _dumps(obj: Any) -> bytes:
    try:
        import cloudpickle  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - Gymnasium requires cloudpickle
        return pickle.dumps(obj)
    data: bytes = cloudpickle.dumps(obj)
    return data


if __name__ == "__main__":
    main()
