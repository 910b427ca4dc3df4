"""Our host's fast path for ``BatchedEnv`` (``python/src/host/batched.rs``) hands
each sub-env its own row of the action and takes the observations' dtype
from the first row's dtype object: transitions equal the plain path's
(``BatchedEnv.step`` in Python) bit for bit for multi-dimensional and
integer rows, for sub-envs that write into the row they were given (a row
shared with another sub-env, or made with the wrong shape or bytes, would
show in the next sub-env's observation), and for observations whose dtype is
an equal but distinct dtype object on some rows and not others.
"""

from typing import Any, Dict, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from test_batched_fast import run_both  # noqa: E402


class ActionEcho(gymnasium.Env):  # type: ignore[type-arg]
    """Observes the action row it is given (its values, ``ndim``, C order and
    shape), then overwrites that row with 99 when it may."""

    def __init__(self, shape: Tuple[int, ...], dtype: Any, low: float, high: float) -> None:
        self.action_space = gymnasium.spaces.Box(low, high, shape, dtype)
        size = int(np.prod(shape)) + 2 + len(shape)
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (size,), np.float64)
        self.t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[Any, Dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(self.observation_space.shape, np.float64), {}

    def step(self, action: np.ndarray) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        self.t += 1
        obs = np.concatenate([np.asarray(action, np.float64).ravel(),
                              [action.ndim, action.flags.c_contiguous], np.asarray(action.shape, np.float64)])
        reward = float(np.asarray(action, np.float64).sum())
        if action.flags.writeable:
            action[...] = 99
        return obs, reward, self.t % 9 == 0, False, {}


class DescrFlip(gymnasium.Env):  # type: ignore[type-arg]
    """Observations of float64 made with NumPy's own ``float64`` dtype object
    on some steps and with an equal, distinct one (``newbyteorder('=')``) on
    others, out of phase between sub-envs (seeds); on some steps float32."""

    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float64)
    action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self) -> None:
        self.t = self.phase = 0
        self.other = np.dtype(np.float64).newbyteorder("=")
        assert self.other is not np.dtype(np.float64) and self.other == np.dtype(np.float64)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[Any, Dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        if seed is not None:
            self.phase = seed
        return np.zeros(3, np.float64), {}

    def step(self, action: np.ndarray) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        self.t += 1
        k = self.t + self.phase
        dtype = [np.dtype(np.float64), self.other, np.dtype(np.float64), self.other, np.float32][k % 5]
        x = float(action[0])
        obs = np.array([x, k, -x], dtype=dtype)
        return obs, x, False, False, {}


@pytest.mark.parametrize("shape, dtype, low, high", [
    ((2, 3), np.float64, -1.0, 1.0),
    ((4,), np.float32, -2.0, 2.0),
    ((2,), np.int32, 0, 5),
    ((), np.float32, -1.0, 1.0),
])
def test_each_sub_env_gets_its_own_row_as_the_plain_path(shape: Tuple[int, ...], dtype: Any, low: float,
                                                         high: float) -> None:
    run_both(lambda: ActionEcho(shape, dtype, low, high), 4, 30, seed=7, low=low, high=high)


def test_equal_but_distinct_observation_dtypes_fast_equal_plain() -> None:
    run_both(DescrFlip, 4, 30, seed=1)
