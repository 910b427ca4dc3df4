"""``RemoteServer`` rebuilds a descriptor only when its check after a call
finds a change (``python/src/host/descriptor.rs``); the check compares each
attribute with a snapshot of what it was, without converting it
(``python/src/descriptor/snapshot.rs``). Every change below is one such a
check could miss: a value replaced by an equal one of another type (``1`` and
``1.0``, ``True`` and ``1``), a nested container or an
array mutated in place, an array's dtype or byte order changed under the
same values, a dict's key order, types the snapshot does not know (mutated
in place as well), a property computing a new value, spaces swapped,
attributes added and deleted. After each step our server must give exactly
the reference server's descriptors (through the reference client).

``0.0`` replaced by ``-0.0`` is among them: the check compares floats by
their bits, and the domain's descriptor cache (``src/server/descriptors.rs``)
compares the rebuilt attributes with ``Value``'s ``==``, under which the two
zeros differ (they encode differently), so ``-0.0`` is sent as the reference
sends it.
"""

import collections
import os
import sys
from typing import Any, Callable, List

import numpy as np
import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv, box  # noqa: E402
from test_descriptor_changes import descriptors_after_steps, ours_and_reference  # noqa: E402


class Meta(collections.OrderedDict):  # type: ignore[type-arg]
    """A dict subclass: no snapshot, converted on every check."""


def initial_metadata() -> Any:
    return {
        "render_modes": ["rgb_array"],
        "x": 1,
        "flag": True,
        "nested": {"a": {"b": 1}, "list": [1, 2]},
        "arr": np.arange(4, dtype=np.int32),
        "z": 0.0,
    }


class SnapshotEnv(CounterEnv):
    """A counter whose ``step`` number k applies change k to its attributes;
    ``name`` and ``update_timestep`` are properties computed from the round
    of changes (new objects on every read, other values in each round: they
    change on a step that changes nothing else, so they hide no change)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0
        self.metadata = initial_metadata()

    @property
    def name(self) -> Any:
        return ["snap", self.steps // len(CHANGES)]

    @property
    def update_timestep(self) -> Any:
        round = self.steps // len(CHANGES)
        return round * 0.25 if round % 2 == 0 else round

    def step(self, action: Any) -> Any:
        self.steps += 1
        CHANGES[self.steps % len(CHANGES)](self)
        return super().step(action)


def _set(env: SnapshotEnv, key: str, value: Any) -> None:
    env.metadata[key] = value


def _reorder(env: SnapshotEnv) -> None:
    env.metadata["x"] = env.metadata.pop("x")


def _drop(env: SnapshotEnv, name: str) -> None:
    if name in env.__dict__:
        delattr(env, name)


def _swap_byte_order(env: SnapshotEnv) -> None:
    arr = env.metadata["arr"]
    env.metadata["arr"] = arr.astype(arr.dtype.newbyteorder())


def _subclass_metadata(env: SnapshotEnv) -> None:
    env.metadata = Meta(env.metadata)


CHANGES: List[Callable[[SnapshotEnv], None]] = [
    lambda env: None,
    lambda env: _set(env, "x", 1.0),  # int -> float, in place
    lambda env: _set(env, "x", 1),  # and back
    lambda env: _set(env, "flag", 1),  # True -> 1
    lambda env: _set(env, "flag", True),
    lambda env: _set(env, "z", -0.0),  # the other zero
    lambda env: _set(env, "z", 0.0),
    lambda env: _set(env, "z", 0.5),
    lambda env: _set(env, "z", float("nan")),
    lambda env: _set(env, "z", float("nan")),  # another NaN object, same bits
    lambda env: env.metadata["nested"]["a"].__setitem__("b", 2),  # nested dict, in place
    lambda env: env.metadata["nested"]["list"].append(3),  # nested list, in place
    lambda env: env.metadata["nested"]["list"].__setitem__(0, [True]),
    lambda env: env.metadata["nested"]["list"][0].__setitem__(0, 1),  # True -> 1, deeper
    lambda env: env.metadata["arr"].__setitem__(1, 7),  # array written in place
    lambda env: _set(env, "arr", env.metadata["arr"].view(np.float32)),  # same bytes, other dtype
    lambda env: _set(env, "arr", env.metadata["arr"].view(np.int32).reshape(2, 2)),  # other shape
    _swap_byte_order,  # same values, other byte order
    lambda env: _set(env, "arr", np.arange(8, dtype=np.int32)[::2]),  # not contiguous
    lambda env: env.metadata["arr"].__setitem__(0, 9),  # written in place, not contiguous
    _reorder,  # key order
    lambda env: _set(env, "big", 2**70),
    lambda env: _set(env, "big", 2**70 + 1),
    lambda env: _set(env, "s", "é" * 3),
    lambda env: _set(env, "s", "".join(["é"] * 3)),  # an equal str, another object
    lambda env: _set(env, "s", "e" * 3),
    lambda env: _set(env, "np", np.float64(1.5)),
    lambda env: _set(env, "np", 1.5),
    lambda env: _set(env, "np", np.float32(1.5)),
    _subclass_metadata,  # no snapshot: converted each time
    lambda env: env.metadata["nested"]["list"].append(4),  # and mutated in place
    lambda env: setattr(env, "supported_render_modes", ("rgb_array", ["human"])),
    lambda env: env.supported_render_modes[1].append("ansi"),  # a list in a tuple
    lambda env: setattr(env, "world_timestep", 0.1),  # added
    lambda env: _drop(env, "world_timestep"),  # deleted
    lambda env: setattr(env, "context_space", box((4,))),  # another space
    lambda env: setattr(env, "context_space", None),
    lambda env: setattr(env, "context_space", box((2,))),
    lambda env: setattr(env, "metadata", {"render_modes": []}),
    lambda env: setattr(env, "metadata", initial_metadata()),
]


def test_every_change_the_snapshot_could_miss_is_noticed() -> None:
    got, expected = ours_and_reference("snap", SnapshotEnv, 2 * len(CHANGES) + 3)
    distinct = sum(1 for a, b in zip(expected, expected[1:]) if a != b)
    assert distinct > len(CHANGES), "the changes show in the descriptors"
    for step, (a, b) in enumerate(zip(got, expected)):
        assert a == b, f"after step {step + 1}:\n ours      {a}\n reference {b}"


class LookupEnv(CounterEnv):
    """Attributes that come and go through ``__getattr__`` and through a
    property raising ``AttributeError`` (both mean absent, as for
    ``hasattr``), and a property raising another exception."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def __getattr__(self, name: str) -> Any:
        if name == "world_subtimestep" and self.__dict__.get("steps", 0) % 3 == 1:
            return 0.5
        raise AttributeError(name)

    @property
    def control_timestep(self) -> Any:
        if self.steps % 2:
            raise AttributeError("not on odd steps")
        return 0.02

    def step(self, action: Any) -> Any:
        self.steps += 1
        return super().step(action)


class RaisingEnv(LookupEnv):
    @property
    def world_timestep(self) -> Any:
        if self.steps % 4 == 2:
            raise RuntimeError("world_timestep is broken")
        return 0.25


def test_attributes_absent_through_getattr_hooks_and_attribute_errors() -> None:
    got, expected = ours_and_reference("env", LookupEnv, 9)
    assert len(set(expected)) >= 4
    assert got == expected


def test_a_getter_raising_leaves_its_member_out_while_it_raises() -> None:
    # The reference's hasattr lets the exception through (the call fails);
    # ours leaves the member out and logs it, and puts it back afterwards.
    ours = unienv_remote.RemoteServer()
    ours.register("env", RaisingEnv())
    try:
        seen = descriptors_after_steps(ours.listen(), "env", 8, keep=lambda d: d)
    finally:
        ours.close()
    assert [d.get("world_timestep") for d in seen] == [0.25, None, 0.25, 0.25] * 2
    assert ["world_timestep" in d for d in seen] == [True, False, True, True] * 2
