"""RemoteVectorEnv's results bit for bit against Gymnasium's ``SyncVectorEnv``
when the replies' scalars change every step: rewards that are ``-0.0``,
whole numbers, the smallest subnormal, huge values; infos whose numbers,
ints and flags change from step to step and sometimes change type or key.
The learner reads a step reply from a kept value when only its scalars
changed (``src/codec/decode/reply_kept.rs``); these results would differ if
a scalar were taken from an earlier reply, or a changed text were read
from a kept one. Single and batched resources, all three autoreset modes.
(A scalar that changes type in a hole, int to float, is covered by the Rust
tests: inside a ``BatchedEnv`` an info key's array takes the first
sub-env's type, which ``SyncVectorEnv`` does not share.)
"""

from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import BatchedEnv, RemoteVectorEnv  # noqa: E402

REWARDS = [-0.0, 0.0, 1.0, 2.5, 1e300, -7.597172153860404, 5e-324, -1e-300, 3.0, 0.1]


class Scalars(gymnasium.Env):  # type: ignore[misc]
    """Rewards from REWARDS, infos with changing numbers, an episode end now
    and then (seeded). Steps draw from a generator of their own, derived at
    each reset: a batched resource's finished sub-env, stepped once more
    before its NEXT_STEP reset (``RemoteVectorEnv``'s docs), does not move
    the reset's generator."""

    observation_space = gymnasium.spaces.Box(-1e6, 1e6, (3,), np.float32)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.steps = np.random.default_rng(1)
        self.t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[np.ndarray, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        obs = self.rng.normal(size=3).astype(np.float32)
        info = {"start": int(self.rng.integers(0, 5))}
        self.steps = np.random.default_rng(int(self.rng.integers(0, 2**62)))
        return obs, info

    def step(self, action: np.ndarray) -> Tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        k = int(self.steps.integers(0, len(REWARDS)))
        obs = (self.steps.normal(size=3) + float(action[0])).astype(np.float32)
        info: Dict[str, Any] = {"x": float(self.steps.normal()), "n": int(self.steps.integers(-3, 3)),
                                "ok": bool(self.t % 2)}
        if self.t % 7 == 0:
            info["late"] = 1.5  # a key now and then
        terminated = bool(self.steps.random() < 0.04)
        truncated = self.t >= 30
        return obs, REWARDS[k], terminated, truncated, info


def same_infos(got: Dict[str, Any], want: Dict[str, Any]) -> None:
    assert set(got) == set(want), (sorted(got), sorted(want))
    for key, value in want.items():
        if key == "final_obs":
            for a, b in zip(got[key], value):
                assert (a is None and b is None) or (a.dtype == b.dtype and a.tobytes() == b.tobytes())
        elif isinstance(value, dict):
            same_infos(got[key], value)
        elif np.asarray(value).dtype == object:
            for a, b in zip(np.asarray(got[key]), np.asarray(value)):
                if isinstance(b, dict):
                    same_infos(a, b)
                else:
                    assert type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes(), key
        else:
            g, w = np.asarray(got[key]), np.asarray(value)
            assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes(), (key, g, w)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    s = unienv_remote.RemoteServer(idle_timeout=None)
    for mode in ("next", "same", "disabled"):
        s.register(f"one_{mode}", FromGymnasiumEnv(Scalars()))
        s.register(f"three_{mode}", BatchedEnv([Scalars] * 3))
        s.register(f"two_{mode}", FromGymnasiumEnv(Scalars()))
    yield s.listen("127.0.0.1", 0)
    s.close()


@pytest.mark.parametrize("mode,name", [(AutoresetMode.NEXT_STEP, "next"), (AutoresetMode.SAME_STEP, "same"),
                                       (AutoresetMode.DISABLED, "disabled")])
def test_changing_scalars_equal_sync_vector_env_bit_for_bit(server: str, mode: AutoresetMode, name: str) -> None:
    addresses = [(server, f"one_{name}"), (server, f"three_{name}"), (server, f"two_{name}")]
    envs = RemoteVectorEnv(addresses, autoreset_mode=mode)
    local = SyncVectorEnv([Scalars for _ in range(5)], autoreset_mode=mode)
    try:
        got, want = envs.reset(seed=5), local.reset(seed=5)
        assert got[0].tobytes() == want[0].tobytes()
        same_infos(got[1], want[1])
        local.action_space.seed(5)
        ends = 0
        for t in range(150):
            actions = local.action_space.sample()
            got_step, want_step = envs.step(actions), local.step(actions)
            for a, b in zip(got_step[:4], want_step[:4]):
                assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), (t, a, b)
            same_infos(got_step[4], want_step[4])
            ended = want_step[2] | want_step[3]
            ends += int(ended.sum())
            if mode == AutoresetMode.DISABLED and ended.any():
                options = {"reset_mask": ended}
                got, want = envs.reset(seed=100 + t, options=options), local.reset(seed=100 + t, options=options)
                assert got[0].tobytes() == want[0].tobytes()
                same_infos(got[1], want[1])
        assert ends >= 10
    finally:
        envs.close()
        local.close()


def test_recv_results_have_the_step_dtypes(server: str) -> None:
    """``recv``'s columns (written straight into NumPy by the extension):
    float64 rewards, bool flags, int64 ids, equal to lockstep ``step``'s."""
    addresses = [(server, "one_disabled"), (server, "three_disabled"), (server, "two_disabled")]
    envs = RemoteVectorEnv(addresses, autoreset_mode=AutoresetMode.DISABLED, batch_size=1)
    local = SyncVectorEnv([Scalars for _ in range(5)], autoreset_mode=AutoresetMode.DISABLED)
    try:
        envs.reset(seed=9)
        local.reset(seed=9)
        actions = np.zeros((5, 1), np.float32)
        want = local.step(actions)
        envs.send(actions)
        seen: Dict[int, Tuple[Any, ...]] = {}
        while len(seen) < 5:
            obs, rewards, terminated, truncated, infos = envs.recv()
            ids = infos["env_id"]
            assert ids.dtype == np.int64 and rewards.dtype == np.float64
            assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
            for k, i in enumerate(ids):
                seen[int(i)] = (obs[k], rewards[k], terminated[k], truncated[k])
        for i in range(5):
            assert seen[i][0].tobytes() == want[0][i].tobytes()
            assert np.float64(seen[i][1]).tobytes() == np.float64(want[1][i]).tobytes()
            assert (seen[i][2], seen[i][3]) == (want[2][i], want[3][i])
    finally:
        envs.close()
        local.close()
