"""Our host's fast path for one unienv ``FromGymnasiumEnv``
(``python/src/host/fast.rs``): the Gymnasium env stepped from Rust gives the
transitions of the plain path (``FromGymnasiumEnv.step`` in Python) bit for
bit: Pendulum, CartPole (a ``Discrete`` action: a 0-d integer array),
HalfCheetah (infos), irregular results (finished by
``unienv_remote.batched._finish_single_step``), a raising env (the same
error and fault); an env with a non-Box observation goes the plain way;
the reference client drives it.

The plain path is a subclass of ``FromGymnasiumEnv`` overriding ``step``
(calling the base class): ``_native_single_plan`` refuses anything but
``FromGymnasiumEnv`` itself.
"""

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote.batched import _native_single_plan  # noqa: E402

from test_batched import Exploding, same  # noqa: E402
from test_batched_fast import fault_and_recovery, reference_client_equals_in_process  # noqa: E402


class PlainFromGymnasiumEnv(FromGymnasiumEnv):  # type: ignore[misc]  # unienv is untyped
    """``FromGymnasiumEnv`` stepped in Python: the host's fast path does not
    apply to a subclass."""

    def step(self, action: Any) -> Any:
        return super().step(action)


class Irregular(gymnasium.Env):  # type: ignore[type-arg]
    """A Box env whose results are not always a tuple with a NumPy
    observation of the space's dtype: a list on some steps, a float64
    observation on some, an ``int``, ``numpy.float32`` or ``numpy.bool_``
    flag or reward on others, nested and mixed infos."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self) -> None:
        self.t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[Any, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: np.ndarray) -> Any:
        self.t += 1
        k = self.t
        x = float(action[0]) * k
        obs = np.array([x, -x], np.float64 if k % 4 == 0 else np.float32)
        reward: Any = [k, np.float32(x), x][k % 3]
        info: Any = [{}, {"a": {"b": x}}, {"n": k}, {"flag": np.bool_(True)}, {"x": np.float32(x)}][k % 5]
        terminated: Any = [k % 7 == 0, np.bool_(k % 7 == 0), int(k % 7 == 0)][k % 3]
        result = (obs, reward, terminated, False, info)
        return list(result) if k % 5 == 2 else result


class DictObservation(gymnasium.Env):  # type: ignore[type-arg]
    """A non-Box observation: the fast path does not apply."""

    observation_space = gymnasium.spaces.Dict({"x": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)})
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[Any, dict]:
        super().reset(seed=seed)
        return {"x": self.np_random.uniform(-1, 1, 2).astype(np.float32)}, {}

    def step(self, action: np.ndarray) -> Any:
        return {"x": np.full(2, action[0], np.float32)}, float(action[0]), False, False, {"k": 1}


def pair(make: Callable[[], Any]) -> Tuple[Any, Any]:
    """A server hosting ``fast`` (FromGymnasiumEnv) and ``plain``
    (PlainFromGymnasiumEnv) of the same Gymnasium env, and a client of ours."""
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("fast", FromGymnasiumEnv(make()))
    server.register("plain", PlainFromGymnasiumEnv(make()))
    return server, server.connect()


def random_action(space: Any, rng: np.random.Generator, low: float, high: float) -> np.ndarray:
    if np.issubdtype(space.dtype, np.integer):
        return np.asarray(rng.integers(low, high, size=space.shape), dtype=space.dtype)
    return np.asarray(rng.uniform(low, high, size=space.shape), dtype=space.dtype)


def run_both(make: Callable[[], Any], steps: int, seed: int, low: float = -1.0, high: float = 1.0) -> int:
    """Steps the fast and plain envs with the same seeds and actions,
    comparing every result bit for bit (types included); resets ended
    episodes. Returns how many steps had infos."""
    server, client = pair(make)
    try:
        fast, plain = client.env("fast"), client.env("plain")
        same(fast.reset(seed=seed), plain.reset(seed=seed))
        rng = np.random.default_rng(seed)
        with_infos = 0
        for _ in range(steps):
            action = random_action(fast.action_space, rng, low, high)
            got, want = fast.step(action), plain.step(action)
            for k in range(5):
                assert type(got[k]) is type(want[k]), f"step[{k}]: {type(got[k])} vs {type(want[k])}"
                same(got[k], want[k], f"step[{k}]")
            with_infos += bool(want[4])
            if want[2] or want[3]:
                same(fast.reset(), plain.reset())
        client.close()
        return with_infos
    finally:
        server.close()


def test_the_fast_path_applies_only_where_it_may() -> None:
    pendulum = FromGymnasiumEnv(gymnasium.make("Pendulum-v1"))
    cartpole = FromGymnasiumEnv(gymnasium.make("CartPole-v1"))
    plain = PlainFromGymnasiumEnv(gymnasium.make("Pendulum-v1"))
    dict_obs = FromGymnasiumEnv(DictObservation())
    patched = FromGymnasiumEnv(gymnasium.make("Pendulum-v1"))
    patched.step = lambda action: FromGymnasiumEnv.step(patched, action)
    try:
        plan = _native_single_plan(pendulum)
        assert plan is not None and plan[0] is pendulum.env
        assert plan[1] is pendulum.action_space and plan[2] is pendulum.observation_space
        assert _native_single_plan(cartpole) is not None  # Discrete: an integer BoxSpace
        assert _native_single_plan(plain) is None
        assert _native_single_plan(dict_obs) is None
        assert _native_single_plan(patched) is None
        assert _native_single_plan(gymnasium.make("Pendulum-v1")) is None
    finally:
        for e in (pendulum, cartpole, plain, dict_obs, patched):
            e.close()


def test_pendulum_fast_equals_plain_bit_for_bit() -> None:
    assert run_both(lambda: gymnasium.make("Pendulum-v1"), 210, seed=3, low=-2.0, high=2.0) == 0


def test_cartpole_discrete_actions_and_episode_ends_fast_equal_plain() -> None:
    run_both(lambda: gymnasium.make("CartPole-v1"), 150, seed=2, low=0, high=2)


def test_halfcheetah_infos_fast_equal_plain_bit_for_bit() -> None:
    assert run_both(lambda: gymnasium.make("HalfCheetah-v5"), 25, seed=11) == 25


def test_irregular_results_fast_equal_plain_bit_for_bit() -> None:
    run_both(Irregular, 40, seed=5)


def test_a_non_box_observation_goes_the_plain_way_and_equals_it() -> None:
    assert run_both(DictObservation, 10, seed=1) == 10


def test_a_raising_env_fails_and_recovers_as_on_the_plain_path() -> None:
    """The same error (message, uncertain, fault) and recovery as the plain path."""
    outcomes: List[List[str]] = []
    for cls in (FromGymnasiumEnv, PlainFromGymnasiumEnv):
        server = unienv_remote.RemoteServer(idle_timeout=None)
        server.register("e", cls(Exploding(gymnasium.make("Pendulum-v1"), 2)))
        first, after, obs = fault_and_recovery(server, "e", np.zeros(1, np.float32))
        outcomes.append([f"{first.uncertain} {first}", "stepped" if after is None else f"{after.uncertain} {after}",
                         repr(obs)])
    assert "the simulator broke" in outcomes[0][0]
    assert outcomes[0] == outcomes[1]


def test_the_reference_client_drives_the_fast_path() -> None:
    reference_client_equals_in_process(lambda: FromGymnasiumEnv(gymnasium.make("HalfCheetah-v5")),
                                       lambda rng: rng.uniform(-1, 1, size=(6,)).astype(np.float32))


def test_regular_steps_skip_the_wrapper_and_a_swapped_env_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where each step goes: ``FromGymnasiumEnv.step`` counted (patched on the
    class once the host detected its fast paths); after ``env.env`` is
    replaced, the host steps the new env through the wrapper."""
    calls: Dict[str, int] = {"fast": 0, "dict": 0}
    fast = FromGymnasiumEnv(gymnasium.make("Pendulum-v1"))
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("fast", fast)
    server.register("dict", FromGymnasiumEnv(DictObservation()))
    original = FromGymnasiumEnv.step
    try:
        client = server.connect()
        remotes = {name: client.env(name) for name in calls}
        for remote in remotes.values():
            remote.reset(seed=0)

        def counted(self: Any, action: Any) -> Any:
            calls["fast" if self is fast else "dict"] += 1
            return original(self, action)

        monkeypatch.setattr(FromGymnasiumEnv, "step", counted)
        for _ in range(4):
            for remote in remotes.values():
                remote.step(np.zeros(1, np.float32))
        assert calls == {"fast": 0, "dict": 4}
        fast.env = gymnasium.make("Pendulum-v1")
        remotes["fast"].reset(seed=0)
        remotes["fast"].step(np.zeros(1, np.float32))
        assert calls == {"fast": 1, "dict": 4}
        client.close()
    finally:
        server.close()
