"""RemoteVectorEnv over batched resources (``unienv_remote.BatchedEnv`` hosted
by our ``RemoteServer``), mixed with unbatched ones: the same transitions as
Gymnasium's ``SyncVectorEnv`` in all three autoreset modes; a faulted batched
resource fails its sub-envs and only those; EnvPool-style ``send``/``recv``
returns every env exactly once per send, with the right results.
"""

from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import BatchedEnv, RemoteVectorEnv, VectorEnvError  # noqa: E402

from test_batched import Exploding  # noqa: E402


def pendulum() -> gymnasium.Env:
    return gymnasium.make("Pendulum-v1")


def cartpole() -> gymnasium.Env:
    return gymnasium.make("CartPole-v1")


@pytest.fixture(scope="module")
def server() -> Iterator[Tuple[str, unienv_remote.RemoteServer]]:
    s = unienv_remote.RemoteServer(idle_timeout=None)
    # For the SyncVectorEnv comparisons, per mode: 3 + 1 + 4 CartPoles (all
    # batched; our server publishes Discrete(2) as the box [0, 1] for a single
    # FromGymnasiumEnv and a BatchedEnv alike, SPEC 12), and 3 + 1 + 4
    # Pendulums (batched, single, batched).
    for mode in ("next", "same", "disabled"):
        s.register(f"cartpole3_{mode}", BatchedEnv([cartpole] * 3))
        s.register(f"cartpole1_{mode}", BatchedEnv([cartpole]))
        s.register(f"cartpole4_{mode}", BatchedEnv([cartpole] * 4))
        s.register(f"pendulum3_{mode}", BatchedEnv([pendulum] * 3))
        s.register(f"pendulum1_{mode}", FromGymnasiumEnv(pendulum()))
        s.register(f"pendulum4_{mode}", BatchedEnv([pendulum] * 4))
    s.register("broken", BatchedEnv([pendulum] * 3 + [lambda: Exploding(pendulum(), 3)]))
    s.register("fine", FromGymnasiumEnv(pendulum()))
    for k in range(3):
        s.register(f"pair{k}", BatchedEnv([pendulum] * 2))
        s.register(f"single{k}", FromGymnasiumEnv(pendulum()))
    # Two more identical mixed fleets (the step paths' comparison).
    for fleet in ("a", "b"):
        s.register(f"{fleet}_pair", BatchedEnv([pendulum] * 2))
        s.register(f"{fleet}_single", FromGymnasiumEnv(pendulum()))
        s.register(f"{fleet}_triple", BatchedEnv([pendulum] * 3))
    url = s.listen("127.0.0.1", 0)
    yield url, s
    s.close()


def same_infos(got: Dict[str, Any], want: Dict[str, Any]) -> None:
    assert set(got) == set(want), (sorted(got), sorted(want))
    for key, value in want.items():
        if key == "final_obs":
            for a, b in zip(got[key], value):
                assert (a is None and b is None) or np.array_equal(a, b)
        elif isinstance(value, dict):
            same_infos(got[key], value)
        else:
            assert np.asarray(got[key]).dtype == np.asarray(value).dtype, key
            np.testing.assert_array_equal(got[key], value)


@pytest.mark.parametrize("sim,steps", [("cartpole", 120), ("pendulum", 205)])
@pytest.mark.parametrize("mode,name", [(AutoresetMode.NEXT_STEP, "next"), (AutoresetMode.SAME_STEP, "same"),
                                       (AutoresetMode.DISABLED, "disabled")])
def test_batched_and_single_resources_equal_sync_vector_env(server: Tuple[str, Any], mode: AutoresetMode,
                                                             name: str, sim: str, steps: int) -> None:
    url, _ = server
    addresses = [(url, f"{sim}3_{name}"), (url, f"{sim}1_{name}"), (url, f"{sim}4_{name}")]
    make = cartpole if sim == "cartpole" else pendulum
    extra: Dict[str, Any] = {"single_action_space": gymnasium.spaces.Discrete(2)} if sim == "cartpole" else {}
    envs = RemoteVectorEnv(addresses, autoreset_mode=mode, **extra)
    local = SyncVectorEnv([make for _ in range(8)], autoreset_mode=mode)
    try:
        assert envs.num_envs == 8
        assert envs.single_observation_space == local.single_observation_space
        assert envs.observation_space == local.observation_space
        got, want = envs.reset(seed=21), local.reset(seed=21)
        assert np.array_equal(got[0], want[0])
        same_infos(got[1], want[1])
        local.action_space.seed(21)
        ends = 0
        for t in range(steps):
            actions = local.action_space.sample()
            got_step, want_step = envs.step(actions), local.step(actions)
            for a, b in zip(got_step[:4], want_step[:4]):
                assert a.dtype == b.dtype and a.shape == b.shape
                assert np.array_equal(a, b), (t, a, b)
            same_infos(got_step[4], want_step[4])
            ended = want_step[2] | want_step[3]
            ends += int(ended.sum())
            if mode == AutoresetMode.DISABLED and ended.any():
                # The learner resets by mask; seeds as Gymnasium derives them.
                options = {"reset_mask": ended}
                got, want = envs.reset(seed=100 + t, options=options), local.reset(seed=100 + t, options=options)
                assert np.array_equal(got[0], want[0])
                same_infos(got[1], want[1])
        # CartPole episodes end apart (masks of some sub-envs of a batch);
        # Pendulum's all truncate at step 200.
        assert ends >= 4
    finally:
        envs.close()
        local.close()


def test_a_faulted_batched_resource_fails_its_sub_envs_only(server: Tuple[str, Any]) -> None:
    url, _ = server
    envs = RemoteVectorEnv([(url, "broken"), (url, "fine")])
    local = pendulum()
    try:
        assert envs.num_envs == 5
        envs.reset(seed=1)
        local.reset(seed=5)
        action = np.full((5, 1), 0.25, np.float32)
        for _ in range(2):
            envs.step(action)
            want = local.step(action[4])
        with pytest.raises(VectorEnvError) as raised:
            envs.step(action)
        want = local.step(action[4])
        error = raised.value
        assert sorted(error.errors) == [0, 1, 2, 3]
        assert all(getattr(e, "uncertain", False) for e in error.errors.values())
        obs, rewards = error.result[0], error.result[1]
        assert np.array_equal(obs[4], want[0]) and rewards[4] == want[1]
        assert not obs[:4].any() and not rewards[:4].any()
        assert envs.needs_reset().tolist() == [True] * 4 + [False]
        # Not sent until reset: reported as needing a reset, the other stepped.
        with pytest.raises(VectorEnvError) as again:
            envs.step(action)
        assert again.value.needs_reset == [0, 1, 2, 3] and not again.value.errors
        local.step(action[4])
        envs.reset(options={"reset_mask": np.array([True] * 4 + [False])})
        obs, *_ = envs.step(action)
        assert np.array_equal(obs[4], local.step(action[4])[0])
    finally:
        envs.close()
        local.close()


def test_recv_returns_every_env_once_per_send(server: Tuple[str, Any]) -> None:
    url, _ = server
    # 3 pairs and 3 singles: 9 envs in 6 resources; recv at least 4.
    addresses: List[Tuple[str, str]] = []
    for k in range(3):
        addresses += [(url, f"pair{k}"), (url, f"single{k}")]
    envs = RemoteVectorEnv(addresses, batch_size=4)
    widths = [2, 1] * 3
    n = sum(widths)
    locals_ = [pendulum() for _ in range(n)]
    resource_of = [k for k, w in enumerate(widths) for _ in range(w)]
    try:
        assert envs.num_envs == n
        obs, _ = envs.reset(seed=7)
        for i, e in enumerate(locals_):
            assert np.array_equal(obs[i], e.reset(seed=7 + i)[0])
        rng = np.random.default_rng(7)
        in_flight = set(range(n))
        actions = rng.uniform(-2, 2, size=(n, 1)).astype(np.float32)
        sent = {i: actions[i] for i in range(n)}
        envs.send(actions)
        received = np.zeros(n, dtype=int)
        for _ in range(40):
            obs, rewards, terminated, truncated, infos = envs.recv()
            ids = [int(i) for i in infos["env_id"]]
            assert len(ids) == len(set(ids)) and len(ids) >= min(4, len(in_flight))
            assert set(ids) <= in_flight
            # Whole resources at a time.
            for i in ids:
                assert all(j in ids for j in range(n) if resource_of[j] == resource_of[i])
            for pos, i in enumerate(ids):
                want = locals_[i].step(sent.pop(i))
                assert np.array_equal(obs[pos], want[0]) and rewards[pos] == want[1]
                received[i] += 1
            in_flight -= set(ids)
            actions = rng.uniform(-2, 2, size=(len(ids), 1)).astype(np.float32)
            sent.update({i: actions[k] for k, i in enumerate(ids)})
            envs.send(actions, ids)
            in_flight |= set(ids)
        # Sending an env already in flight, or half a batched resource, is refused.
        with pytest.raises(ValueError):
            envs.send(np.zeros((1, 1), np.float32), [sorted(in_flight)[0]])
        assert received.sum() >= 40 * 4 and (received > 0).all()
    finally:
        envs.close()
        for e in locals_:
            e.close()


def test_step_is_unchanged_with_a_batch_size(server: Tuple[str, Any]) -> None:
    url, _ = server
    envs = RemoteVectorEnv([(url, "pair0"), (url, "single0")], batch_size=2)
    local = SyncVectorEnv([pendulum] * 3)
    try:
        assert np.array_equal(envs.reset(seed=3)[0], local.reset(seed=3)[0])
        for _ in range(5):
            action = np.full((3, 1), -0.5, np.float32)
            got, want = envs.step(action), local.step(action)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    finally:
        envs.close()
        local.close()



def test_send_converts_nested_lists_as_step_does(server: Tuple[str, Any]) -> None:
    """``send`` takes a nested list for a batched resource (``[[0.5], [-0.5]]``
    for a pair of ``Box(1)`` envs), as ``step_async`` does, and the envs
    step exactly as with the array."""
    url, _ = server
    envs = RemoteVectorEnv([(url, "pair2"), (url, "single2")], batch_size=2)
    local = SyncVectorEnv([pendulum] * 3)
    try:
        assert np.array_equal(envs.reset(seed=11)[0], local.reset(seed=11)[0])
        envs.send([[0.5], [-0.5], [1.0]])
        want = local.step(np.array([[0.5], [-0.5], [1.0]], np.float32))
        got: Dict[int, Any] = {}
        while len(got) < 3:
            obs, rewards, _, _, infos = envs.recv()
            for pos, i in enumerate(infos["env_id"]):
                got[int(i)] = (obs[pos], rewards[pos])
        for i in range(3):
            assert np.array_equal(got[i][0], want[0][i]) and got[i][1] == want[1][i]
        envs.send([[0.25], [0.25]], [0, 1])  # one whole resource, as a nested list
        obs, *_, infos = envs.recv()
        assert [int(i) for i in infos["env_id"]] == [0, 1]
    finally:
        envs.close()
        local.close()


def test_any_seeds_reach_a_batched_resource(server: Tuple[str, Any]) -> None:
    """Seeds that are not ``s + i`` travel to the batch as a list."""
    url, _ = server
    envs = RemoteVectorEnv([(url, "pair1"), (url, "single1")])
    local = SyncVectorEnv([pendulum] * 3)
    try:
        assert np.array_equal(envs.reset(seed=[5, 9, 2])[0], local.reset(seed=[5, 9, 2])[0])
        mask = np.array([False, True, True])
        got = envs.reset(seed=[None, 70, 3], options={"reset_mask": mask})
        want = local.reset(seed=[None, 70, 3], options={"reset_mask": mask})
        assert np.array_equal(got[0], want[0])
    finally:
        envs.close()
        local.close()


def test_the_short_step_path_equals_the_full_one(server: Tuple[str, Any]) -> None:
    """``step_wait`` returns at once when there is nothing to merge (no
    info, final observation, failure, recorder or restart policy); with a
    restart policy every step takes the full path. Two identical mixed
    fleets, same seeds and actions, in every autoreset mode's shape (NEXT_STEP
    here: Pendulum truncates at 200, so autoreset steps are included):
    the same arrays bit for bit, dtypes and infos included."""
    url, _ = server
    fast = RemoteVectorEnv([(url, "a_pair"), (url, "a_single"), (url, "a_triple")])
    full = RemoteVectorEnv([(url, "b_pair"), (url, "b_single"), (url, "b_triple")],
                           restart=unienv_remote.RestartPolicy(max_restarts=1, window=60.0, timeout=5.0))
    try:
        got, want = fast.reset(seed=5), full.reset(seed=5)
        assert np.array_equal(got[0], want[0]) and got[0].dtype == want[0].dtype
        actions = np.random.default_rng(5).uniform(-2, 2, size=(205, 6, 1)).astype(np.float32)
        for t in range(205):
            a, b = fast.step(actions[t]), full.step(actions[t])
            for x, y in zip(a[:4], b[:4]):
                assert x.dtype == y.dtype and x.shape == y.shape
                assert x.tobytes() == y.tobytes(), t
            same_infos(a[4], b[4])
            assert a[4] == {}
        assert fast._healer is None and full._healer is not None
    finally:
        fast.close()
        full.close()
