"""``BatchedEnv`` on the crate's stepping core (``_native.BatchedCore``): what
the core decides for the Python class, in turn and on threads alike: every
sub-env steps before the first failure (by index) is raised, a row that
cannot be split fails as its sub-env would, an interruption
(``KeyboardInterrupt``) propagates as it is without faulting the batch, and
seeds are derived and counted per row.
"""

from typing import Any, List, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from unienv_remote import BatchedEnv  # noqa: E402


class Counting(gymnasium.Env):  # type: ignore[type-arg]
    """A Box env counting its steps and recording its seeds; an action of
    -1 raises ``ValueError``, of -2 ``KeyboardInterrupt``."""

    observation_space = gymnasium.spaces.Box(-10.0, 10.0, (1,), np.float32)
    action_space = gymnasium.spaces.Box(-2.0, 2.0, (1,), np.float32)

    def __init__(self) -> None:
        self.steps = 0
        self.seeds: List[Optional[int]] = []

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[Any, dict]:
        self.seeds.append(seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: np.ndarray) -> Tuple[Any, float, bool, bool, dict]:
        self.steps += 1
        if action[0] == -1:
            raise ValueError(f"bad action {self.steps}")
        if action[0] == -2:
            raise KeyboardInterrupt
        return np.full(1, self.steps, np.float32), 1.0, False, False, {}


def counts(batch: BatchedEnv) -> List[int]:
    return [env.steps for env in batch.sub_envs]


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_every_row_steps_before_the_first_failure_is_raised(threads: int) -> None:
    batch = BatchedEnv([Counting] * 4, threads=threads)
    try:
        batch.reset(seed=0)
        with pytest.raises(RuntimeError, match="sub-env 1 raised ValueError: bad action 1") as raised:
            batch.step(np.array([[0], [-1], [0], [-1]], np.float32))
        assert isinstance(raised.value.__cause__, ValueError)
        assert counts(batch) == [1, 1, 1, 1]
        assert batch.faulted
    finally:
        batch.close()


@pytest.mark.parametrize("threads", [1, 2])
def test_a_row_that_cannot_be_split_fails_as_its_sub_env(threads: int) -> None:
    """An action of 2 rows for 3 sub-envs: rows 0 and 1 step, row 2 fails
    (an ``IndexError`` splitting it) and faults the batch."""
    batch = BatchedEnv([Counting] * 3, threads=threads)
    try:
        batch.reset()
        with pytest.raises(RuntimeError, match="sub-env 2 raised IndexError"):
            batch.step(np.zeros((2, 1), np.float32))
        assert counts(batch) == [1, 1, 0]
        assert batch.faulted
    finally:
        batch.close()


def test_an_interruption_propagates_and_does_not_fault_the_batch() -> None:
    batch = BatchedEnv([Counting] * 3)
    try:
        batch.reset()
        with pytest.raises(KeyboardInterrupt):
            batch.step(np.array([[0], [-2], [0]], np.float32))
        assert counts(batch) == [1, 1, 0]
        assert not batch.faulted
        batch.step(np.zeros((3, 1), np.float32))
    finally:
        batch.close()


@pytest.mark.parametrize("threads", [1, 3])
def test_seeds_per_row(threads: int) -> None:
    batch = BatchedEnv([Counting] * 3, threads=threads)
    try:
        batch.reset(seed=np.int64(7))
        batch.reset(seed=[1, None, 3], mask=np.array([True, False, True]))
        batch.reset(seed=[4, None, 6])
        assert [env.seeds for env in batch.sub_envs] == [[7, 1, 4], [8, None], [9, 3, 6]]
        with pytest.raises(ValueError, match="2 seeds for 3 sub-envs"):
            batch.reset(seed=[1, 2])
        assert [len(env.seeds) for env in batch.sub_envs] == [3, 2, 3]
    finally:
        batch.close()
