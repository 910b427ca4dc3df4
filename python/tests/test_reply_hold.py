"""``RemoteServer(reply_hold=...)``: responses held for the same session's
other requests are written together (SPEC.md section 8.4); the transitions a
learner sees are the same with the hold on and off, and a bad value is
refused."""

from typing import List, Optional, Tuple

import gymnasium
import numpy as np
import pytest
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

from unienv_remote import RemoteServer, RemoteVectorEnv

N = 8


def transitions(reply_hold: Optional[float]) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Observations and rewards of N single Pendulums on one server (one
    connection), stepped in lockstep from fixed seeds and actions."""
    server = RemoteServer(idle_timeout=None, reply_hold=reply_hold)
    for i in range(N):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    url = server.listen("127.0.0.1", 0)
    envs = RemoteVectorEnv([(url, f"pendulum{i}") for i in range(N)])
    try:
        actions = np.random.default_rng(0).uniform(-2, 2, size=(30, N, 1)).astype(np.float32)
        obs, _ = envs.reset(seed=7)
        out = [(obs, np.zeros(N))]
        for a in actions:
            obs, reward, _, _, _ = envs.step(a)
            out.append((obs, reward))
        return out
    finally:
        envs.close()
        server.close()


def test_held_replies_give_the_transitions_of_replies_written_at_once() -> None:
    held, at_once = transitions(0.0005), transitions(None)
    assert len(held) == len(at_once)
    for (o1, r1), (o2, r2) in zip(held, at_once):
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(r1, r2)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "1"])
def test_a_bad_reply_hold_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="reply_hold"):
        RemoteServer(reply_hold=bad)  # type: ignore[arg-type]
