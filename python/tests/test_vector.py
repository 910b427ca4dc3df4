"""RemoteVectorEnv: 16 remote Gymnasium envs over 4 server processes give
exactly what Gymnasium's SyncVectorEnv gives over the same envs locally
(same seeds, same actions), autoreset included; a failing server's envs are
reported without losing the others' results.

The servers are `vector_server.py` processes on 127.0.0.1 (port 0).
"""

import os
import signal
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402

from unienv_remote import RemoteVectorEnv, UncertainOutcomeError, VectorEnvError  # noqa: E402

from conftest import Server, wait_stopped  # noqa: E402

SERVER = Path(__file__).resolve().parent / "vector_server.py"
NUM_SERVERS = 4
PER_SERVER = 4


class ServerProcess(Server):
    """A `vector_server.py` process (started and read by conftest's `Server`);
    stopping kills it at once, also when a test has SIGSTOPped it."""

    def __init__(self, count: int) -> None:
        super().__init__("vector", [sys.executable, str(SERVER), str(count)])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start(n: int) -> List[ServerProcess]:
    started: List[ServerProcess] = []
    try:
        for _ in range(n):
            started.append(ServerProcess(PER_SERVER))
    except BaseException:
        for s in started:
            s.stop()
        raise
    return started


@pytest.fixture(scope="module")
def servers() -> Iterator[List[ServerProcess]]:
    started = start(NUM_SERVERS)
    yield started
    for s in started:
        s.stop()


def addresses(servers: List[ServerProcess], prefix: str, n: int) -> List[Tuple[str, str]]:
    # Env j on server j % 4: consecutive envs live on different servers.
    return [(servers[j % len(servers)].url, f"{prefix}{j // len(servers)}") for j in range(n)]


def assert_same_infos(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for key, value in expected.items():
        if key == "final_obs":
            for a, b in zip(got[key], value):
                assert (a is None and b is None) or np.array_equal(a, b)
        elif isinstance(value, dict):
            assert_same_infos(got[key], value)
        else:
            np.testing.assert_array_equal(got[key], value)


def run_against_sync(envs: RemoteVectorEnv, local: SyncVectorEnv, steps: int, seed: int) -> Tuple[int, int]:
    """Steps both with the same seeds and actions, comparing everything;
    returns (episode ends, autoresets seen)."""
    obs, infos = envs.reset(seed=seed)
    obs_l, infos_l = local.reset(seed=seed)
    assert np.array_equal(obs, obs_l)
    assert_same_infos(infos, infos_l)
    local.action_space.seed(seed)
    ends = autoresets = 0
    ended = np.zeros(envs.num_envs, dtype=bool)
    for t in range(steps):
        actions = local.action_space.sample()
        if t % 2:
            got = envs.step(actions)
        else:
            envs.step_async(actions)
            got = envs.step_wait()
        expected = local.step(actions)
        for a, b in zip(got[:4], expected[:4]):
            assert a.dtype == b.dtype and a.shape == b.shape, (t, a.dtype, b.dtype, a.shape, b.shape)
            assert np.array_equal(a, b), (t, a, b)
        assert_same_infos(got[4], expected[4])
        if envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP:
            # An env that ended last step was reset: reward 0, not ended.
            assert np.all(got[1][ended] == 0) and not np.any(got[2][ended] | got[3][ended])
            autoresets += int(ended.sum())
        ended = got[2] | got[3]
        ends += int(ended.sum())
    return ends, autoresets


@pytest.mark.parametrize("env_id,prefix,steps", [("Pendulum-v1", "pendulum", 205), ("CartPole-v1", "cartpole", 60)])
def test_same_as_sync_vector_env_next_step(servers: List[ServerProcess], env_id: str, prefix: str,
                                           steps: int) -> None:
    n = NUM_SERVERS * PER_SERVER
    local = SyncVectorEnv([lambda: gymnasium.make(env_id) for _ in range(n)])
    if env_id == "CartPole-v1":
        # UniEnv has no Discrete space: Discrete(2) travels as an int64 box,
        # which our RemoteServer publishes with the high bound actions reach
        # (the reference publishes UniEnv's [0, 2]).
        plain = RemoteVectorEnv(addresses(servers, prefix, 2))
        assert plain.single_action_space == gymnasium.spaces.Box(0, 1, (), np.int64)
        plain.close()
        envs = RemoteVectorEnv(addresses(servers, prefix, n), single_action_space=gymnasium.spaces.Discrete(2))
    else:
        envs = RemoteVectorEnv(addresses(servers, prefix, n))
    try:
        assert envs.num_envs == n == 16
        assert envs.single_observation_space == local.single_observation_space
        assert envs.single_action_space == local.single_action_space
        assert envs.observation_space == local.observation_space
        assert envs.action_space == local.action_space
        assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP == local.metadata["autoreset_mode"]
        ends, autoresets = run_against_sync(envs, local, steps, seed=123)
        # Pendulum truncates all 16 at step 200; CartPole's episodes end apart.
        assert ends >= 16 and autoresets >= 16
    finally:
        envs.close()
        local.close()


def test_same_as_sync_vector_env_same_step(servers: List[ServerProcess]) -> None:
    n = 8
    envs = RemoteVectorEnv(addresses(servers, "cartpole", n), autoreset_mode=AutoresetMode.SAME_STEP,
                           single_action_space=gymnasium.spaces.Discrete(2))
    local = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(n)],
                          autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
        ends, _ = run_against_sync(envs, local, 60, seed=5)
        assert ends > 0
    finally:
        envs.close()
        local.close()


def test_gymnasium_vector_wrappers_drive_it(servers: List[ServerProcess]) -> None:
    from gymnasium.wrappers.vector import RecordEpisodeStatistics
    n = 4
    envs = RecordEpisodeStatistics(RemoteVectorEnv(addresses(servers, "cartpole", n),
                                                   single_action_space=gymnasium.spaces.Discrete(2)))
    local = RecordEpisodeStatistics(SyncVectorEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(n)]))
    try:
        envs.reset(seed=9)
        local.reset(seed=9)
        local.action_space.seed(9)
        episodes = 0
        for _ in range(60):
            actions = local.action_space.sample()
            got, expected = envs.step(actions), local.step(actions)
            if "episode" in expected[4]:
                episodes += 1
                np.testing.assert_array_equal(got[4]["episode"]["r"], expected[4]["episode"]["r"])
                np.testing.assert_array_equal(got[4]["_episode"], expected[4]["_episode"])
        assert episodes > 0
    finally:
        envs.close()
        local.close()


def test_reset_mask_resets_only_those(servers: List[ServerProcess]) -> None:
    n = 4
    envs = RemoteVectorEnv(addresses(servers, "pendulum", n))
    local = SyncVectorEnv([lambda: gymnasium.make("Pendulum-v1") for _ in range(n)])
    try:
        envs.reset(seed=1)
        local.reset(seed=1)
        actions = np.full((n, 1), 0.5, np.float32)
        envs.step(actions)
        local.step(actions)
        mask = np.array([True, False, True, False])
        got = envs.reset(seed=[10, None, 12, None], options={"reset_mask": mask})
        expected = local.reset(seed=[10, None, 12, None], options={"reset_mask": mask})
        assert np.array_equal(got[0], expected[0])
    finally:
        envs.close()
        local.close()


def test_failing_server_keeps_the_others_results() -> None:
    """Server 3 is stopped (SIGSTOP) while a step is sent: its envs' replies
    never come (uncertain), the others' results are complete and exactly
    Gymnasium's; then it is killed, and its envs are not stepped again
    until reset (whose failure is reported the same way)."""
    own = start(NUM_SERVERS)
    n = NUM_SERVERS * PER_SERVER
    envs = RemoteVectorEnv(addresses(own, "pendulum", n), timeout=5.0)
    local = SyncVectorEnv([lambda: gymnasium.make("Pendulum-v1") for _ in range(n)])
    dead = [j for j in range(n) if j % NUM_SERVERS == 3]
    alive = np.array([j not in dead for j in range(n)])
    try:
        envs.reset(seed=3)
        local.reset(seed=3)
        local.action_space.seed(3)
        actions = local.action_space.sample()
        np.testing.assert_array_equal(envs.step(actions)[0], local.step(actions)[0])

        os.kill(own[3].process.pid, signal.SIGSTOP)
        wait_stopped(own[3].process.pid)  # kill() returns before every thread is stopped
        actions = local.action_space.sample()
        with pytest.raises(VectorEnvError) as caught:
            envs.step(actions)
        expected = local.step(actions)
        error = caught.value
        assert sorted(error.errors) == dead and error.needs_reset == []
        # All four were sent on server 3's connection: the first to time out
        # closed it, which ended the other three (all uncertain).
        causes = [e.__cause__ for e in error.errors.values()]
        assert all(isinstance(e, UncertainOutcomeError) for e in error.errors.values())
        assert all(isinstance(c, (TimeoutError, ConnectionError)) for c in causes), causes
        assert any(isinstance(c, TimeoutError) for c in causes), causes
        obs, rewards, terminated, truncated, _ = error.result
        np.testing.assert_array_equal(obs[alive], expected[0][alive])
        np.testing.assert_array_equal(rewards[alive], expected[1][alive])
        assert np.all(obs[~alive] == 0) and np.all(rewards[~alive] == 0)

        os.kill(own[3].process.pid, signal.SIGKILL)
        actions = local.action_space.sample()
        with pytest.raises(VectorEnvError) as caught:
            envs.step(actions)
        expected = local.step(actions)
        assert caught.value.errors == {} and caught.value.needs_reset == dead
        np.testing.assert_array_equal(caught.value.result[0][alive], expected[0][alive])

        # Resetting the dead server's envs fails the same way.
        with pytest.raises(VectorEnvError) as caught:
            envs.reset(seed=3, options={"reset_mask": ~alive})
        assert sorted(caught.value.errors) == dead
        assert all(isinstance(e, ConnectionError) for e in caught.value.errors.values())
        # on_error="info": the same report in infos["error"].
        envs._on_error = "info"
        obs, rewards, _, _, infos = envs.step(local.action_space.sample())
        assert list(np.flatnonzero(infos["_error"])) == dead
        assert all(isinstance(infos["error"][j], RuntimeError) for j in dead)
    finally:
        envs.close()
        local.close()
        for s in own:
            s.stop()
