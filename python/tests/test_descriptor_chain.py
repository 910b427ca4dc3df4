"""``RemoteServer`` reads a ``FromGymnasiumEnv``'s ``metadata``,
``render_mode`` and ``render_fps`` after every call without running their
Python (``python/src/descriptor/chain.rs``: the same attribute reads, done
from Rust, through the Gymnasium wrappers whose property code it verified).
A Pendulum-v1 whose wrappers, env and ``FromGymnasiumEnv`` change what those
properties return in every way the getters can see (each ``_metadata`` set,
mutated in place and cleared, the env's ``metadata`` and ``render_mode``
replaced, ``_render_fps`` set, a mapping with its own ``get``, a wrapper
overriding the properties or the attribute lookup inserted, a getter
raising ``AttributeError``) must give, after each step, exactly the
descriptors the reference server gives (through the reference client).
"""

from typing import Any, Callable, List

import gymnasium
import numpy as np
from unienv_interface.remote import RemoteClient as RefClient
from unienv_interface.remote import RemoteServer as RefServer
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

import unienv_remote


class FpsDict(dict):  # type: ignore[type-arg]
    """A metadata mapping whose ``get`` is not ``dict.get``."""

    def get(self, key: Any, default: Any = None) -> Any:
        return 1000 + super().get(key, 0)


class Overriding(gymnasium.Wrapper):  # type: ignore[type-arg]
    """Overrides both properties: not the verified code."""

    @property
    def metadata(self) -> Any:
        return {"render_fps": 99, "overridden": True}

    @property
    def render_mode(self) -> Any:
        return "rgb_array"


class Hooked(gymnasium.Wrapper):  # type: ignore[type-arg]
    """Its own attribute lookup: not the generic one."""

    def __getattribute__(self, name: str) -> Any:
        if name == "_metadata":
            return {"render_fps": 42}
        return super().__getattribute__(name)


class Mutator(gymnasium.Wrapper):  # type: ignore[type-arg]
    """Applies change k of ``changes`` at its step number k."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.count = 0
        self.outer: Any = None

    def step(self, action: Any) -> Any:
        self.count += 1
        todo = changes(self)
        todo[self.count % len(todo)]()
        return self.env.step(action)


def changes(m: Mutator) -> List[Callable[[], Any]]:
    outer, inner = m.outer, m.unwrapped
    first = m.env  # the TimeLimit (or whatever is first below the mutator)
    return [
        lambda: None,
        lambda: setattr(outer, "_metadata", {"render_modes": [], "render_fps": 7}),
        lambda: setattr(outer, "_metadata", None),
        lambda: setattr(m, "_metadata", {"render_fps": 11, "x": [1]}),
        lambda: m._metadata["x"].append(2),
        lambda: setattr(m, "_metadata", None),
        lambda: setattr(first, "_metadata", {"render_fps": 17}),
        lambda: setattr(first, "_metadata", None),
        lambda: setattr(inner, "metadata", {"render_modes": ["rgb_array"], "render_fps": 12}),
        lambda: inner.metadata.__setitem__("render_fps", 13),
        lambda: inner.__dict__.pop("metadata"),
        lambda: setattr(inner, "render_mode", "rgb_array"),
        lambda: setattr(inner, "render_mode", None),
        lambda: setattr(outer, "_render_fps", 5),
        lambda: setattr(outer, "_render_fps", None),
        lambda: setattr(inner, "metadata", FpsDict({"render_fps": 1})),
        lambda: inner.__dict__.pop("metadata"),
        lambda: setattr(m, "env", Overriding(m.env)),
        lambda: setattr(m, "env", m.env.env),
        lambda: setattr(m, "env", Hooked(m.env)),
        lambda: setattr(m, "env", m.env.env),
        lambda: delattr(first, "_metadata"),
        lambda: None,
        lambda: setattr(first, "_metadata", None),
        lambda: setattr(outer, "_metadata", FpsDict({"render_fps": 3})),
        lambda: setattr(outer, "_metadata", None),
    ]


def make_env() -> FromGymnasiumEnv:
    mutator = Mutator(gymnasium.make("Pendulum-v1"))
    env = FromGymnasiumEnv(mutator)
    mutator.outer = env
    return env


def descriptors_after_steps(url: str, name: str, steps: int) -> List[str]:
    client = RefClient.connect(url)
    env = client.env(name)
    env.reset(seed=1)
    seen = []
    for _ in range(steps):
        env.step(np.array([0.5], np.float32))
        seen.append(repr(client.descriptors[name]))
    client.close()
    return seen


def test_every_change_behind_the_properties_is_seen_as_the_reference_sees_it() -> None:
    steps = 2 * len(changes(Mutator(gymnasium.make("Pendulum-v1")))) + 3
    ours = unienv_remote.RemoteServer()
    ours.register("pendulum", make_env())
    reference = RefServer()
    reference.register("pendulum", make_env())
    try:
        got = descriptors_after_steps(ours.listen(), "pendulum", steps)
        expected = descriptors_after_steps(reference.listen(), "pendulum", steps)
    finally:
        ours.close()
        reference.close()
    assert len(set(expected)) > 10, "the changes show in the descriptors"
    for step, (a, b) in enumerate(zip(got, expected)):
        assert a == b, f"after step {step + 1}:\n ours      {a}\n reference {b}"
