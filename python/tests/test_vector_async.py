"""RemoteVectorEnv's EnvPool-style ``send``/``recv`` through the Python
binding: ``send`` returns while a simulator is still stepping, ``recv``
returns the envs whose results arrived without waiting for a straggler held
inside its step, and every env comes back exactly once per ``send``.
"""

import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import RemoteVectorEnv  # noqa: E402


class Held(gymnasium.Env):  # type: ignore[type-arg]
    """One number of state (reset: the seed; step: plus the action); an
    action of 5 waits for ``release`` inside the step."""

    observation_space = gymnasium.spaces.Box(-1e6, 1e6, (1,), np.float64)
    action_space = gymnasium.spaces.Box(-1e6, 1e6, (1,), np.float64)

    def __init__(self, release: threading.Event, entered: threading.Event) -> None:
        self.release, self.entered, self.value = release, entered, 0.0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[np.ndarray, Dict[str, Any]]:
        super().reset(seed=seed)
        self.value = float(seed or 0)
        return np.array([self.value]), {}

    def step(self, action: Any) -> Tuple[np.ndarray, float, bool, bool, Dict[str, Any]]:
        a = float(np.asarray(action).reshape(-1)[0])
        if a == 5.0:
            self.entered.set()
            assert self.release.wait(30), "the test never released the held step"
        self.value += a
        return np.array([self.value]), self.value, False, False, {}


@pytest.fixture()
def held() -> Iterator[Tuple[str, threading.Event, threading.Event]]:
    release, entered = threading.Event(), threading.Event()
    server = unienv_remote.RemoteServer(idle_timeout=None)
    for i in range(4):
        server.register(f"held{i}", FromGymnasiumEnv(Held(release, entered)))
    url = server.listen("127.0.0.1", 0)
    try:
        yield url, release, entered
    finally:
        release.set()
        server.close()


def test_recv_does_not_wait_for_a_straggler(held: Tuple[str, threading.Event, threading.Event]) -> None:
    url, release, entered = held
    envs = RemoteVectorEnv([(url, f"held{i}") for i in range(4)], batch_size=3, timeout=30.0)
    try:
        obs, _ = envs.reset(seed=10)
        assert obs[:, 0].tolist() == [10.0, 11.0, 12.0, 13.0]
        envs.send(np.array([[5.0], [1.0], [1.0], [1.0]]))
        # send returned while env 0 is (or will be) held inside its step.
        assert entered.wait(30)
        obs, rewards, _, _, infos = envs.recv()
        ids: List[int] = [int(i) for i in infos["env_id"]]
        assert sorted(ids) == [1, 2, 3]
        for pos, i in enumerate(ids):
            assert obs[pos, 0] == 10.0 + i + 1.0 and rewards[pos] == obs[pos, 0]
        # They go again while env 0 is still held; each comes back once.
        envs.send(np.full((3, 1), 2.0), ids)
        obs, _, _, _, infos = envs.recv()
        assert sorted(int(i) for i in infos["env_id"]) == [1, 2, 3]
        assert not release.is_set()
        release.set()
        obs, rewards, _, _, infos = envs.recv()
        assert [int(i) for i in infos["env_id"]] == [0]
        assert obs[:, 0].tolist() == [15.0] and rewards.tolist() == [15.0]
        assert not envs._native.step_pending()
    finally:
        envs.close()
