"""Gymnasium's vector API on ``RemoteVectorEnv``: ``call``, ``get_attr``,
``set_attr``, ``render`` and ``np_random_seed`` over our servers' attribute
extension (SPEC.md section 15) — against our Python ``RemoteServer`` (a
``BatchedEnv`` and a single env), our Rust server (its envs have no
attributes), and the reference server (no extension: a clear error, nothing
sent) — and Gymnasium's types and errors (``single_*_space=`` given, a scalar
action, bad reset masks), the same as ``ProcessVectorEnv``'s and
``SyncVectorEnv``'s."""

import os
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import unienv_remote
from unienv_remote import BatchedEnv, ProcessVectorEnv, RemoteError, RemoteVectorEnv, RestartPolicy, from_gymnasium

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Server  # noqa: E402


class Counting(gymnasium.Env[np.ndarray, np.int64]):
    """Ends its episode after ``max_count`` steps (an attribute to set);
    ``scaled(x, factor=1)`` is a method to call."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.render_mode = "rgb_array"
        self.max_count = 5
        self.count = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None,
              ) -> Tuple[np.ndarray, Dict[str, Any]]:
        super().reset(seed=seed)
        self.count = 0
        return np.zeros(1, np.float32), {"max_count_at_reset": self.max_count}

    def step(self, action: Any) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        self.count += 1
        return np.array([self.count], np.float32), 1.0, self.count >= self.max_count, False, {}

    def scaled(self, x: Any, *, factor: int = 1) -> Any:
        return x * self.max_count * factor

    def fail(self) -> None:
        raise RuntimeError("the method failed")

    def render(self) -> np.ndarray:
        return np.full((2, 2, 3), self.count, np.uint8)


@pytest.fixture(scope="module")
def python_server() -> Iterator[Tuple[str, unienv_remote.RemoteServer]]:
    s = unienv_remote.RemoteServer(idle_timeout=None)
    for fleet in ("a", "b", "c"):
        s.register(f"{fleet}_pair", BatchedEnv([Counting, Counting]))
        s.register(f"{fleet}_single", from_gymnasium(Counting()))
    url = s.listen("127.0.0.1", 0)
    yield url, s
    s.close()


def counting_envs(url: str, fleet: str, **kwargs: Any) -> RemoteVectorEnv:
    """Three sub-envs: a BatchedEnv of two, then a single env."""
    return RemoteVectorEnv([(url, f"{fleet}_pair"), (url, f"{fleet}_single")], **kwargs)


def test_get_set_and_call_reach_every_sub_env(python_server: Tuple[str, Any]) -> None:
    envs = counting_envs(python_server[0], "a")
    try:
        assert envs.supports_attributes()
        assert envs.get_attr("max_count") == (5, 5, 5)
        envs.set_attr("max_count", [2, 3, 4])
        assert envs.get_attr("max_count") == (2, 3, 4)
        assert envs.call("scaled", 10) == (20, 30, 40)
        assert envs.call("scaled", 1, factor=3) == (6, 9, 12)
        arrays = envs.call("scaled", np.arange(2))
        assert [a.tolist() for a in arrays] == [[0, 2], [0, 3], [0, 4]]
        # One value for all (Gymnasium's form), then the episodes end on it.
        envs.set_attr("max_count", 1)
        assert envs.get_attr("max_count") == (1, 1, 1)
        envs.reset(seed=42)
        assert envs.get_attr("np_random_seed") == (42, 43, 44)
        assert envs.np_random_seed == (42, 43, 44)
        _, _, terminated, _, _ = envs.step(np.zeros(3, np.int64))
        assert terminated.tolist() == [True, True, True]
        frames = envs.render()
        assert frames is not None and len(frames) == 3
        assert all(f.shape == (2, 2, 3) and f.dtype == np.uint8 and f[0, 0, 0] == 1 for f in frames)
    finally:
        envs.close()


def test_errors_are_clear_and_change_nothing(python_server: Tuple[str, Any]) -> None:
    envs = counting_envs(python_server[0], "b")
    local = SyncVectorEnv([Counting] * 3)
    try:
        # Gymnasium's own checks and messages.
        with pytest.raises(ValueError) as ours:
            envs.set_attr("max_count", [1, 2])
        with pytest.raises(ValueError) as theirs:
            local.set_attr("max_count", [1, 2])
        assert str(ours.value) == str(theirs.value)
        for name in ("reset", "step", "close"):
            with pytest.raises(ValueError, match=f"use `{name}` directly"):
                envs.call(name)
        # The server's guard: private names, unknown attributes (nothing run).
        for name, says in (("_secret", "private"), ("__class__", "private"), ("missing", "no attribute")):
            with pytest.raises(RemoteError) as refused:
                envs.call(name)
            assert refused.value.code == "invalid_request" and says in str(refused.value)
            assert not refused.value.uncertain
        # A result the codec cannot carry, named; an argument likewise.
        with pytest.raises(RemoteError) as unsent:
            envs.get_attr("observation_space")
        assert unsent.value.code == "serialization_error"
        assert "'observation_space'" in str(unsent.value) and "sub-env 0" in str(unsent.value)
        with pytest.raises(Exception, match="object"):
            envs.call("scaled", object())
        # A method that fails after it ran: uncertain, the env not faulted.
        with pytest.raises(RemoteError) as failed:
            envs.call("fail")
        assert failed.value.code == "execution_error" and failed.value.uncertain
        assert envs.get_attr("max_count") == (5, 5, 5)
        envs.reset(seed=0)
        envs.step(np.zeros(3, np.int64))
        # No step may be in flight.
        envs.step_async(np.zeros(3, np.int64))
        with pytest.raises(RuntimeError, match="in flight"):
            envs.get_attr("max_count")
        envs.step_wait()
    finally:
        envs.close()
        local.close()


def test_reference_server_raises_at_once_and_renders_by_v1(servers: Callable[..., Server]) -> None:
    reference = servers("reference")
    envs = RemoteVectorEnv([(reference.url, "counter"), (reference.url, "lazy")], timeout=10.0)
    try:
        assert not envs.supports_attributes()
        for attempt in (lambda: envs.call("render"), lambda: envs.get_attr("x"), lambda: envs.set_attr("x", 1)):
            with pytest.raises(NotImplementedError, match="env_attributes"):
                attempt()
        envs.reset(seed=0)
        frames = envs.render()  # v1's render call, one per resource
        assert frames is not None and len(frames) == 2
        envs.step(np.zeros((2,) + envs.single_action_space.shape, np.float32))
    finally:
        envs.close()


def test_rust_server_envs_have_no_attributes(our_server: Server) -> None:
    envs = RemoteVectorEnv([(our_server.url, "counter")], timeout=10.0)
    try:
        assert envs.supports_attributes()
        with pytest.raises(RemoteError) as unsupported:
            envs.get_attr("max_count")
        assert unsupported.value.code == "unsupported_operation"
        assert "no attributes to reach" in str(unsupported.value)
        with pytest.raises(RemoteError) as refused:
            envs.get_attr("_private")
        assert refused.value.code == "invalid_request"
    finally:
        envs.close()


def test_set_attr_survives_a_restart() -> None:
    """The first server closes; the restart policy reconnects to a new one
    (a fresh env, ``max_count`` 5), sets ``set_attr``'s values there before
    the reset (its reset info says so) and the next episodes use them."""
    first = unienv_remote.RemoteServer(idle_timeout=None)
    first.register("c", from_gymnasium(Counting()))
    first_url = first.listen("127.0.0.1", 0)
    second = unienv_remote.RemoteServer(idle_timeout=None)
    second.register("c", from_gymnasium(Counting()))
    second_url = second.listen("127.0.0.1", 0)
    moved: List[str] = []

    def resolve(url: str, resource_id: str) -> Optional[str]:
        moved.append(url)
        return second_url

    envs = RemoteVectorEnv([(first_url, "c")], timeout=10.0,
                           restart=RestartPolicy(max_restarts=1, timeout=30.0, resolve=resolve))
    try:
        envs.set_attr("max_count", 2)
        envs.reset(seed=0)
        first.close()
        _, _, _, truncated, infos = envs.step(np.zeros(1, np.int64))
        assert moved and infos["_restart"][0] and truncated[0]
        assert infos["max_count_at_reset"][0] == 2
        assert envs.get_attr("max_count") == (2,)
        _, _, terminated, _, _ = envs.step(np.zeros(1, np.int64))
        assert not terminated[0]
        _, _, terminated, _, _ = envs.step(np.zeros(1, np.int64))
        assert terminated[0]
    finally:
        envs.close()
        second.close()


# -- Gymnasium's types and errors ---------------------------------------------


class Mixed(gymnasium.Env[Dict[str, Any], np.ndarray]):
    """A Dict observation of a Discrete and a MultiBinary, a MultiBinary
    action: values whose types differ between the wire and Gymnasium."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict({"pos": spaces.Discrete(5), "bits": spaces.MultiBinary(3)})
        self.action_space = spaces.MultiBinary(2)
        self.pos = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None,
              ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        super().reset(seed=seed)
        self.pos = int(self.np_random.integers(5))
        return self._obs(), {}

    def _obs(self) -> Dict[str, Any]:
        return {"pos": np.int64(self.pos), "bits": np.array([self.pos & 1, self.pos & 2, 0], np.int8).clip(0, 1)}

    def step(self, action: Any) -> Tuple[Dict[str, Any], float, bool, bool, Dict[str, Any]]:
        self.pos = (self.pos + int(action[0]) + 2 * int(action[1])) % 5
        return self._obs(), float(self.pos), self.pos == 4, False, {}


def test_given_gymnasium_spaces_give_gymnasium_types() -> None:
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("m0", from_gymnasium(Mixed()))
    server.register("m1", from_gymnasium(Mixed()))
    url = server.listen("127.0.0.1", 0)
    space = Mixed()
    envs = RemoteVectorEnv([(url, "m0"), (url, "m1")], single_observation_space=space.observation_space,
                           single_action_space=space.action_space, autoreset_mode=AutoresetMode.SAME_STEP)
    local = SyncVectorEnv([Mixed, Mixed], autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        obs, _ = envs.reset(seed=3)
        want, _ = local.reset(seed=3)
        local.action_space.seed(3)
        for _ in range(12):
            for key in ("pos", "bits"):
                assert obs[key].dtype == want[key].dtype and np.array_equal(obs[key], want[key]), key
            actions = local.action_space.sample()  # int8, as Gymnasium batches MultiBinary
            obs, rewards, terminated, truncated, infos = envs.step(actions)
            want, want_rewards, want_terminated, _, want_infos = local.step(actions)
            assert np.array_equal(rewards, want_rewards) and np.array_equal(terminated, want_terminated)
            if "final_obs" in want_infos:
                for i in np.flatnonzero(want_infos["_final_obs"]):
                    got_final, want_final = infos["final_obs"][i], want_infos["final_obs"][i]
                    assert type(got_final["pos"]) is type(want_final["pos"])
                    assert got_final["bits"].dtype == want_final["bits"].dtype
    finally:
        envs.close()
        local.close()
        server.close()


BAD_MASKS = [
    [True, False],  # not an array
    np.array([True, False, True]),  # wrong shape
    np.array([1, 0]),  # wrong dtype
    np.array([False, False]),  # no True
]


def raised(call: Callable[[], Any]) -> Tuple[type, str]:
    with pytest.raises(Exception) as e:
        call()
    return type(e.value), str(e.value)


def test_scalar_actions_and_bad_masks_raise_what_gymnasium_raises(python_server: Tuple[str, Any]) -> None:
    remote = RemoteVectorEnv([(python_server[0], "c_pair")])
    fleet = ProcessVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, servers=1)
    local = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2)
    try:
        for envs in (remote, fleet, local):
            envs.reset(seed=0)
        for scalar in (1, 1.0, np.int64(1), np.array(1)):
            got = [raised(lambda: envs.step(scalar)) for envs in (remote, fleet)]
            assert got[0] == got[1] and got[0][0] is TypeError, got
            with pytest.raises(TypeError):
                local.step(scalar)
            with pytest.raises(TypeError):
                remote.send(scalar)
        for mask in BAD_MASKS:
            want = raised(lambda: local.reset(options={"reset_mask": mask}))
            for envs in (remote, fleet):
                assert raised(lambda: envs.reset(options={"reset_mask": mask})) == want
        want = raised(lambda: local.reset(seed=[1, 2, 3]))
        for envs in (remote, fleet):
            assert raised(lambda: envs.reset(seed=[1, 2, 3])) == want
        # Nothing broke: a real step still goes through.
        for envs in (remote, fleet):
            envs.step(np.zeros(2, np.int64))
    finally:
        remote.close()
        fleet.close()
        local.close()
