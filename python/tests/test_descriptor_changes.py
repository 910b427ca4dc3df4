"""Every call's response carries the domain's descriptors; ``RemoteServer``
rebuilds one only when it notices a change (``python/src/host/descriptor.rs``).
An env that changes its descriptor attributes between steps in every way
(appearing, disappearing, replaced by an equal value of another type, a
nested list mutated in place, a space replaced by an equal or a different
one, an optional method appearing) must give, after each step, exactly the
descriptors the reference server gives (through the reference client).
"""

import os
import sys
from typing import Any, Callable, Tuple

import numpy as np
from unienv_interface.remote import RemoteClient as RefClient
from unienv_interface.remote import RemoteServer as RefServer

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv, box  # noqa: E402
from unienv_interface.space import DictSpace  # noqa: E402


class MutatingEnv(CounterEnv):
    """A counter whose ``step`` number k applies change k to its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def step(self, action):
        self.steps += 1
        change = CHANGES[self.steps % len(CHANGES)]
        change(self)
        return super().step(action)


def _drop_name(env: MutatingEnv) -> None:
    if "name" in env.__dict__:
        del env.name


CHANGES = [
    lambda env: None,
    lambda env: setattr(env, "render_fps", 30),
    lambda env: setattr(env, "render_fps", 30.0),
    lambda env: setattr(env, "metadata", {"render_modes": ["rgb_array"], "render_fps": 30}),
    lambda env: env.metadata["render_modes"].append("human"),
    lambda env: None,
    lambda env: setattr(env, "name", "mutant"),
    _drop_name,
    lambda env: setattr(env, "action_space", box((2,))),
    lambda env: setattr(env, "observation_space", DictSpace(env.backend, {"position": box((3,))})),
    lambda env: setattr(env, "reload", lambda **kwargs: env.reset(**kwargs)),
    lambda env: setattr(env, "render_mode", None),
    lambda env: setattr(env, "supported_render_modes", ("rgb_array",)),
    lambda env: setattr(env, "batch_size", None),
    lambda env: setattr(env, "control_timestep", 0.05),
    lambda env: setattr(env, "control_timestep", np.float64(0.05)),
]


def descriptors_after_steps(url: str, name: str, steps: int, keep: Callable[[Any], Any] = repr) -> list:
    client = RefClient.connect(url)
    env = client.env(name)
    env.reset(seed=1)
    seen = []
    for _ in range(steps):
        env.step(np.array([0.1, 0.2], np.float32))
        seen.append(keep(client.descriptors[name]))
    client.close()
    return seen


def ours_and_reference(name: str, make_env: Callable[[], Any], steps: int) -> Tuple[list, list]:
    """The descriptors the reference client holds after each of ``steps``
    steps of an env made by ``make_env``, hosted by our server and by the
    reference's."""
    ours = unienv_remote.RemoteServer()
    ours.register(name, make_env())
    reference = RefServer()
    reference.register(name, make_env())
    try:
        got = descriptors_after_steps(ours.listen(), name, steps)
        expected = descriptors_after_steps(reference.listen(), name, steps)
    finally:
        ours.close()
        reference.close()
    return got, expected


def test_every_change_of_a_descriptor_is_noticed() -> None:
    got, expected = ours_and_reference("mutant", MutatingEnv, 2 * len(CHANGES) + 3)
    assert len(set(expected)) > len(CHANGES) // 2, "the changes show in the descriptors"
    for step, (a, b) in enumerate(zip(got, expected)):
        assert a == b, f"after step {step + 1}:\n ours      {a}\n reference {b}"
