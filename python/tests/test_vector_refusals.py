"""A refused action leaves ``RemoteVectorEnv`` usable: the server refuses
a NaN, out-of-bounds or wrongly shaped action as a certain
``invalid_request`` before the env runs, so nothing changed: the call
reports the refusal (``VectorEnvError``, or ``infos["error"]`` with
``on_error="info"``), no env needs a reset, the next step goes on from where
the envs were, and a recording keeps the episode whole. A negative
``env_id`` is a ``ValueError`` before anything is sent."""

import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import BatchedEnv, RemoteVectorEnv  # noqa: E402
from unienv_remote.vector import VectorEnvError  # noqa: E402


def pendulum() -> Any:
    return gymnasium.make("Pendulum-v1", max_episode_steps=1000)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = unienv_remote.RemoteServer(idle_timeout=None)
    for mode in ("raise", "info", "record", "ids"):
        server.register(f"pair_{mode}", BatchedEnv([pendulum] * 2))
        server.register(f"one_{mode}", FromGymnasiumEnv(pendulum()))
    yield server.listen("127.0.0.1", 0)
    server.close()


BAD = {
    "nan": np.full((3, 1), np.nan, np.float32),
    "above": np.full((3, 1), 5.0, np.float32),
    "shape": np.zeros((3, 2), np.float32),
}


def good(t: int) -> np.ndarray:
    return np.full((3, 1), 0.25 * (t % 5) - 0.5, np.float32)


def reference(steps: int) -> np.ndarray:
    """The observations three local Pendulums reach, seeded as the vector
    env seeds its sub-envs (seed + i)."""
    envs = gymnasium.vector.SyncVectorEnv([pendulum] * 3)
    obs, _ = envs.reset(seed=7)
    for t in range(steps):
        obs, *_ = envs.step(good(t))
    envs.close()
    return np.asarray(obs)


@pytest.mark.parametrize("on_error", ["raise", "info"])
def test_a_refused_action_leaves_every_env_usable(url: str, on_error: str) -> None:
    envs = RemoteVectorEnv([(url, f"pair_{on_error}"), (url, f"one_{on_error}")], on_error=on_error)
    try:
        envs.reset(seed=7)
        t = 0
        for name, bad in BAD.items():
            envs.step(good(t))
            t += 1
            if on_error == "raise":
                with pytest.raises(VectorEnvError) as caught:
                    envs.step(bad)
                errors = caught.value.errors
                assert sorted(errors) == [0, 1, 2], (name, errors)
                assert all(getattr(e, "code", None) == "invalid_request" and not e.uncertain
                           for e in errors.values()), (name, errors)
            else:
                _, _, _, _, infos = envs.step(bad)
                assert list(infos["_error"]) == [True, True, True], (name, infos)
            assert not envs.needs_reset().any(), name
        obs, *_ = envs.step(good(t))
        t += 1
        # The refused steps changed nothing: the envs are where three local
        # envs are after the same accepted actions.
        np.testing.assert_allclose(obs, reference(t), rtol=1e-5, atol=1e-6)
    finally:
        envs.close()


def test_a_refused_step_does_not_split_a_recorded_episode(url: str, tmp_path: Path) -> None:
    envs = RemoteVectorEnv([(url, "pair_record"), (url, "one_record")], record_dir=tmp_path,
                           record_format="npz")
    try:
        envs.reset(seed=7)
        for t in range(4):
            envs.step(good(t))
        with pytest.raises(VectorEnvError):
            envs.step(BAD["nan"])
        for t in range(4, 8):
            envs.step(good(t))
    finally:
        envs.close()
    assert envs.recording_error is None
    for i in range(3):
        meta = json.loads((tmp_path / str(i) / "metadata.json").read_text())
        # One episode (closed at close()) of the 8 accepted steps.
        assert meta["count"] == 8 and meta["physical_segments"] == [[0, 7]], (i, meta)


@pytest.mark.parametrize("env_id", [[-1], np.array([-1, 0, 1]), [0.0, -2.0]])
def test_a_negative_env_id_is_a_value_error(url: str, env_id: Any) -> None:
    envs = RemoteVectorEnv([(url, "pair_ids"), (url, "one_ids")])
    try:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match="env_id must be sub-env ids from 0 to 2"):
            envs.send(np.zeros((len(np.asarray(env_id).reshape(-1)), 1), np.float32), env_id)
        # Nothing was sent: every env can be stepped.
        envs.step(good(0))
    finally:
        envs.close()
