"""Our host's fast path for ``BatchedEnv`` (``python/src/host/batched.rs``): a
batch of Gymnasium Box sub-envs stepped from Rust gives the transitions of
the plain path (``BatchedEnv.step`` in Python) bit for bit, for regular
results (Pendulum, HalfCheetah's float infos) and irregular ones (which it
hands back to ``BatchedEnv._complete_step``); a sub-env that raises still
faults the whole batched resource; the reference client drives it.

The plain path is the same batch class with ``step`` overridden (calling the
base class): ``_native_step_plan`` refuses a class that overrides ``step``.
"""

import re
from typing import Any, Callable, List, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.remote import RemoteClient as RefClient  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import BatchedEnv, RemoteError  # noqa: E402

from test_batched import Exploding, same  # noqa: E402


class PlainBatchedEnv(BatchedEnv):
    """``BatchedEnv`` stepped in Python: the host's fast path does not apply
    to a class that overrides ``step``."""

    def step(self, action: Any) -> Tuple[Any, ...]:
        return super().step(action)  # type: ignore[no-any-return]


class Irregular(gymnasium.Env):  # type: ignore[type-arg]
    """A Box env whose results the fast path cannot always take as they are:
    its observation is float64 (not the space's float32) on some steps, its
    reward an ``int`` or a ``numpy.float32`` on some, its info nested, of
    mixed kinds, ``numpy.bool_`` (which Gymnasium's layout puts in a list) or
    empty; sub-envs reset with different seeds are out of phase, so that
    one step mixes them."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self) -> None:
        self.t = self.phase = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        if seed is not None:
            self.phase = seed
        return np.zeros(2, np.float32), {}

    def step(self, action: np.ndarray) -> Tuple[Any, Any, bool, bool, dict]:
        self.t += 1
        k = self.t + self.phase
        x = float(action[0]) * self.t
        obs = np.array([x, -x], np.float64 if k % 4 == 0 else np.float32)
        reward: Any = [self.t, np.float32(x), x][k % 3]
        info: Any = [{}, {"a": {"b": x}}, {"n": self.t}, {"x": x}, {"flag": np.bool_(True)}, {"x": np.float32(x)},
                     {"n": np.int64(k)}, {"x": True}][k % 8]
        return obs, reward, self.t % 7 == 0, False, info


def pair(make: Callable[[], Any], n: int) -> Tuple[Any, Any, Any]:
    """A server hosting ``fast`` (BatchedEnv) and ``plain`` (PlainBatchedEnv)
    of the same sub-envs, and a client of ours."""
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("fast", BatchedEnv([make] * n))
    server.register("plain", PlainBatchedEnv([make] * n))
    return server, server.connect(), None


def run_both(make: Callable[[], Any], n: int, steps: int, seed: int, low: float = -1.0, high: float = 1.0) -> int:
    """Steps the fast and plain batches with the same seeds and actions,
    comparing every result bit for bit; resets ended sub-envs by mask.
    Returns how many steps had infos."""
    server, client, _ = pair(make, n)
    try:
        fast, plain = client.env("fast"), client.env("plain")
        same(fast.reset(seed=seed)[1], plain.reset(seed=seed)[1])
        rng = np.random.default_rng(seed)
        with_infos = 0
        for _ in range(steps):
            action = rng.uniform(low, high, size=fast.action_space.shape).astype(fast.action_space.dtype)
            got, want = fast.step(action), plain.step(action)
            for k in range(5):
                same(got[k], want[k], f"step[{k}]")
            with_infos += bool(want[4])
            done = np.asarray(want[2]) | np.asarray(want[3])
            if done.any():
                same(fast.reset(mask=done)[1], plain.reset(mask=done)[1])
        client.close()
        return with_infos
    finally:
        server.close()


def test_the_fast_path_applies_only_where_it_may() -> None:
    pendulums = BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * 2)
    threaded = BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * 2, threads=2)
    wrapped = BatchedEnv([lambda: FromGymnasiumEnv(gymnasium.make("Pendulum-v1"))] * 2)
    plain = PlainBatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * 2)
    try:
        assert pendulums._native_step_plan() == pendulums.sub_envs
        assert threaded._native_step_plan() is None
        assert wrapped._native_step_plan() is None  # UniEnv sub-envs
        assert plain._native_step_plan() is None
    finally:
        for b in (pendulums, threaded, wrapped, plain):
            b.close()


def test_pendulum_fast_equals_plain_bit_for_bit() -> None:
    assert run_both(lambda: gymnasium.make("Pendulum-v1"), 4, 210, seed=3, low=-2.0, high=2.0) == 0


def test_cartpole_integer_actions_and_episode_ends_fast_equal_plain() -> None:
    """Discrete becomes an integer Box in UniEnv: 0-d int rows, as the plain path passes them."""
    run_both(lambda: gymnasium.make("CartPole-v1"), 4, 120, seed=2, low=0, high=2)


def test_halfcheetah_infos_fast_equal_plain_bit_for_bit() -> None:
    assert run_both(lambda: gymnasium.make("HalfCheetah-v5"), 3, 25, seed=11) == 25


def test_irregular_results_fast_equal_plain_bit_for_bit() -> None:
    run_both(Irregular, 3, 40, seed=5)


def fault_and_recovery(server: unienv_remote.RemoteServer, name: str,
                       action: np.ndarray) -> Tuple[RemoteError, Optional[RemoteError], bytes]:
    """Drives env ``name`` of ``server`` (closed afterwards), whose simulator
    raises on its second step: a step, the step that raises (its error), one
    more step (its error, or ``None`` when it stepped), then a reset and a
    step (its observation's bytes)."""
    try:
        client = server.connect()
        remote = client.env(name)
        remote.reset(seed=0)
        remote.step(action)
        with pytest.raises(RemoteError) as raised:
            remote.step(action)
        after: Optional[RemoteError] = None
        try:
            remote.step(action)
        except RemoteError as e:
            after = e
        remote.reset(seed=1)
        obs = remote.step(action)[0]
        client.close()
    finally:
        server.close()
    return raised.value, after, np.asarray(obs).tobytes()


def test_a_raising_sub_env_faults_the_fast_batch() -> None:
    """The same error, fault and recovery as the plain path."""
    outcomes: List[List[str]] = []
    for cls in (BatchedEnv, PlainBatchedEnv):
        factories = [lambda: gymnasium.make("Pendulum-v1")] * 2 + [lambda: Exploding(gymnasium.make("Pendulum-v1"), 2)]
        server = unienv_remote.RemoteServer(idle_timeout=None)
        server.register("b", cls(factories))
        first, after, obs = fault_and_recovery(server, "b", np.zeros((3, 1), np.float32))
        assert first.uncertain
        assert after is not None and re.search("fault", str(after)), after
        outcomes.append([str(first), repr(obs)])
    assert "sub-env 2 raised ValueError: the simulator broke" in outcomes[0][0]
    assert outcomes[0] == outcomes[1]


def reference_client_equals_in_process(make: Callable[[], Any], action: Callable[[np.random.Generator], Any]) -> None:
    """The reference client drives an env made by ``make`` on our server
    (reset, then 10 steps of ``action(rng)``): every result equals that of
    another env made by ``make``, stepped in process."""
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("fast", make())
    expected = make()
    try:
        client: Any = RefClient.connect(server.listen("127.0.0.1", 0))
        try:
            remote = client.env("fast")
            same(remote.reset(seed=4)[1], expected.reset(seed=4)[1])
            rng = np.random.default_rng(4)
            for _ in range(10):
                a = action(rng)
                got, want = remote.step(a), expected.step(a)
                for k in range(5):
                    same(got[k], want[k], f"step[{k}]")
        finally:
            client.close()
    finally:
        server.close()
        expected.close()


def test_the_reference_client_drives_the_fast_path() -> None:
    n = 3
    reference_client_equals_in_process(lambda: BatchedEnv([lambda: gymnasium.make("HalfCheetah-v5")] * n),
                                       lambda rng: rng.uniform(-1, 1, size=(n, 6)))


def test_regular_steps_never_reach_python_and_irregular_ones_do() -> None:
    """Where each result is built: counted on the hosted instances."""
    calls = {"regular": 0, "irregular": 0}
    server = unienv_remote.RemoteServer(idle_timeout=None)
    for name, make in (("regular", lambda: gymnasium.make("HalfCheetah-v5")), ("irregular", Irregular)):
        env = BatchedEnv([make] * 2)
        complete = env._complete_step

        def counted(*args: Any, _name: str = name, _complete: Any = complete) -> Any:
            calls[_name] += 1
            return _complete(*args)

        env._complete_step = counted  # type: ignore[method-assign]
        server.register(name, env)
    try:
        client = server.connect()
        for name in ("regular", "irregular"):
            remote = client.env(name)
            remote.reset(seed=0)
            for _ in range(4):
                remote.step(np.zeros(remote.action_space.shape, remote.action_space.dtype))
        client.close()
    finally:
        server.close()
    assert calls == {"regular": 0, "irregular": 4}
