"""Gymnasium spaces and values as what our hosts and clients carry, and back.

UniEnv's own conversions (``unienv_interface.space.space_utils.gym_utils``)
fall short for some Gymnasium values: a ``Discrete`` observation is a NumPy
integer scalar (``np.int64``), which ``from_gym_data`` refuses; a ``Box`` of
``bool`` becomes a float box; a ``MultiBinary`` value is ``int8`` where
UniEnv's binary space holds ``bool``; and an action reaches a Gymnasium env
as a 0-d array where Gymnasium's own vector envs give it a NumPy integer
(``FrozenLake`` indexes a dict with it). The functions here convert every
Gymnasium space whose values fit the protocol's codec:

=====================  ====================================  =======================================
Gymnasium space        UniEnv space (what the wire carries)   Gymnasium value (single / batched)
=====================  ====================================  =======================================
``Discrete``           integer box, shape ``()``              NumPy integer / array ``(n,)`` (its dtype)
``MultiDiscrete``      integer box                            array of its dtype
``MultiBinary``        binary space (``bool``)                ``int8`` array
``Box`` (any dtype)    box (a ``bool`` box: binary space)     array of its dtype (0-d: a NumPy scalar)
``Text``               text space                             ``str`` / tuple of ``str``
``Tuple`` / ``Dict``   tuple / dict space, nested             tuple / dict, nested
``OneOf``              union space, ``(index, value)``        ``(np.int64, value)`` / tuple of them
``Graph``, ``Seq...``  :data:`CARRIER` (``pickled`` only)     the value itself / tuple of them
=====================  ====================================  =======================================

``Discrete`` and ``MultiDiscrete`` become UniEnv's integer boxes as unienv
makes them (``high`` exclusive, ``[start, start + n)``), so that our host's
published bounds and action checks are those of unienv's ``FromGymnasiumEnv``
(SPEC.md, "Action checking on the Python host").

``Graph`` and ``Sequence`` (and any other Gymnasium space, such as a custom
one) have no UniEnv space that the reference's space documents describe
(its graph space needs node and edge count bounds and box features; it has
no sequence space): our hosts and clients refuse them with a ``TypeError``
naming the space, except between a ``ProcessVectorEnv`` and the server
processes it started (``pickled=True``, see :data:`CARRIER`), where each
value travels pickled, as Gymnasium's ``AsyncVectorEnv`` sends it through
its pipes, and arrives as it left. Pickles are never read from any other
server.

Integer boxes carry ``int64`` (unienv's integer dtype); the Gymnasium side
has the space's own dtype. Batched values follow Gymnasium's ``batch_space``
/ ``concatenate``: a ``Discrete``'s batch is an array of its dtype, a
``MultiBinary``'s an ``int8`` array, a ``Text``'s, ``OneOf``'s, ``Graph``'s
and ``Sequence``'s a tuple of the values, ``Tuple`` and ``Dict`` batch field
by field. unienv batches text and union spaces but cannot concatenate their
values: importing this module registers that (a list of the values, which
the wire carries as rows) with unienv's ``concatenate``.
"""

from __future__ import annotations

import pickle
from typing import Any, Dict, List, Optional, SupportsFloat, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces

from unienv_interface.backends import NumpyComputeBackend
from unienv_interface.space import (BinarySpace, DictSpace, DynamicBoxSpace, Space, TextSpace, TupleSpace,
                                    UnionSpace)
from unienv_interface.space.space_utils import batch_utils, gym_utils
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

__all__ = ["GymnasiumEnv", "from_gymnasium", "unienv_space", "to_unienv", "to_gymnasium", "batch_to_gymnasium",
           "batch_from_gymnasium", "exact_in_unienv", "hostable", "gymnasium_env", "is_scalar_action", "DiscreteActions",
           "CARRIER", "carried_pickled", "fleet_hostable", "wire_gymnasium_space", "ObservationSpaceAs",
           "space_hull"]

_SUPPORTED = ("Box, Discrete, MultiDiscrete, MultiBinary, Text, Tuple, Dict and OneOf, nested; others only "
              "between a ProcessVectorEnv and its own server processes")


#: The longest pickled value :data:`CARRIER` declares (``int32``'s maximum).
CARRIER_MAX_BYTES = 2**31 - 1

#: The UniEnv space of a value carried pickled (``pickled=True``): a
#: variable-length ``uint8`` array holding ``pickle.dumps(value)``. Batched,
#: unienv pads the rows with zeros, which ``pickle.loads`` ignores (it stops
#: at the pickle's end); our hosts do not check a dynamic box's values.
CARRIER: Space = DynamicBoxSpace(NumpyComputeBackend, 0, 255, (0,), (CARRIER_MAX_BYTES,), np.uint8)

#: The Gymnasium spaces of the module's table.
_TABLE = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Text, spaces.Tuple,
          spaces.Dict, spaces.OneOf)


def carried_pickled(space: spaces.Space[Any]) -> bool:
    """Whether ``space``'s values (or some part of them) travel pickled
    when ``pickled=True``: a space outside the module's table (``Graph``,
    ``Sequence``, a custom space), or a ``Tuple``, ``Dict`` or ``OneOf``
    holding one."""
    if isinstance(space, spaces.Tuple):
        return any(carried_pickled(s) for s in space.spaces)
    if isinstance(space, spaces.Dict):
        return any(carried_pickled(s) for s in space.spaces.values())
    if isinstance(space, spaces.OneOf):
        return any(carried_pickled(s) for s in space.spaces)
    return not isinstance(space, _TABLE)


def _opaque(space: spaces.Space[Any], pickled: bool) -> bool:
    """Whether ``space`` is a leaf carried pickled (else refused when not
    ``pickled``)."""
    if isinstance(space, _TABLE):
        return False
    if not pickled:
        raise _refuse(space)
    return True


def _pickle(value: Any) -> np.ndarray:
    return np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8)


def _unpickle(carried: Any) -> Any:
    return pickle.loads(np.ascontiguousarray(carried, dtype=np.uint8).tobytes())


def _rows(value: Any) -> List[Any]:
    """The rows of a batch of carried values: a padded ``uint8`` array's
    rows (unienv's ``concatenate``, the client's stacking of rows of one
    length), or the list the client gathers rows of different lengths in."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        return list(value.reshape(value.shape[0], -1)) if value.ndim >= 1 else [value]
    return list(value)


def _split(value: Any) -> List[Any]:
    """The rows of a batch as the wire gives it: a list of the rows (the
    client gathers rows it cannot stack, our hosts send rows of a text or
    union space so), or stacked field by field (tuples and dicts of such
    batches, arrays along their first axis)."""
    if isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return [tuple(parts) for parts in zip(*(_split(v) for v in value))]
    if isinstance(value, dict):
        keys = list(value)
        return [dict(zip(keys, parts)) for parts in zip(*(_split(value[k]) for k in keys))]
    return list(np.asarray(value))


def _pad(rows: List[np.ndarray]) -> np.ndarray:
    """Carried values as one zero-padded ``uint8`` array, a row each."""
    width = max((r.size for r in rows), default=0)
    out = np.zeros((len(rows), width), dtype=np.uint8)
    for i, r in enumerate(rows):
        out[i, :r.size] = r
    return out


def _concatenate_rows(space: Space, items: Any, axis: int = 0) -> List[Any]:
    """unienv batches a text or union space (``batch_space``: a
    ``BatchedSpace`` of it) but has no ``concatenate`` for its values, so a
    ``BatchedEnv`` of ``Text`` or ``OneOf`` envs could not batch its
    observations: registered here, the values as a list (what the wire
    splits and stacks as rows; Gymnasium's ``concatenate`` gives a tuple)."""
    if axis != 0:
        raise ValueError(f"{type(space).__name__} values are batched along the first axis only")
    return list(items)


batch_utils.concatenate.register(TextSpace, _concatenate_rows)
batch_utils.concatenate.register(UnionSpace, _concatenate_rows)


def _refuse(space: spaces.Space[Any]) -> TypeError:
    return TypeError(f"Gymnasium's {type(space).__name__} space has no form our hosts and clients carry "
                     f"(they carry {_SUPPORTED}): {space}")


def unienv_space(space: spaces.Space[Any], pickled: bool = False) -> Space:
    """The UniEnv space (NumPy backend) that carries ``space``'s values
    (:data:`CARRIER` for a space outside the table, with ``pickled``)."""
    if _opaque(space, pickled):
        return CARRIER
    if isinstance(space, spaces.Box):
        if space.dtype == np.bool_:
            return BinarySpace(NumpyComputeBackend, shape=space.shape)
        return gym_utils.from_gym_space(space, NumpyComputeBackend)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.Text)):
        return gym_utils.from_gym_space(space, NumpyComputeBackend)
    if isinstance(space, spaces.MultiBinary):
        return BinarySpace(NumpyComputeBackend, shape=tuple(space.shape))
    if isinstance(space, spaces.Tuple):
        return TupleSpace(NumpyComputeBackend, [unienv_space(s, pickled) for s in space.spaces])
    if isinstance(space, spaces.Dict):
        return DictSpace(NumpyComputeBackend, {k: unienv_space(s, pickled) for k, s in space.spaces.items()})
    if isinstance(space, spaces.OneOf):
        return UnionSpace(NumpyComputeBackend, [unienv_space(s, pickled) for s in space.spaces])
    raise _refuse(space)


def exact_in_unienv(space: spaces.Space[Any]) -> bool:
    """Whether unienv's own conversion carries ``space``'s values unchanged
    both ways: a ``Box`` of a real (non-``bool``) dtype, whose values are
    the arrays themselves."""
    return isinstance(space, spaces.Box) and space.dtype != np.bool_


def to_unienv(space: spaces.Space[Any], value: Any, pickled: bool = False) -> Any:
    """A value of ``space`` (as a Gymnasium env gives it) as the UniEnv
    space of :func:`unienv_space` holds it."""
    if _opaque(space, pickled):
        return _pickle(value)
    if isinstance(space, spaces.Discrete):
        return np.asarray(value, dtype=np.int64)
    if isinstance(space, spaces.MultiDiscrete):
        return np.asarray(value, dtype=np.int64)
    if isinstance(space, spaces.MultiBinary):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(space, spaces.Box):
        return np.asarray(value, dtype=space.dtype)
    if isinstance(space, spaces.Text):
        return str(value)
    if isinstance(space, spaces.Tuple):
        return tuple(to_unienv(s, v, pickled) for s, v in zip(space.spaces, value))
    if isinstance(space, spaces.Dict):
        return {k: to_unienv(s, value[k], pickled) for k, s in space.spaces.items()}
    if isinstance(space, spaces.OneOf):
        index, inner = value
        return int(index), to_unienv(space.spaces[int(index)], inner, pickled)
    raise _refuse(space)


def to_gymnasium(space: spaces.Space[Any], value: Any, pickled: bool = False) -> Any:
    """A value of :func:`unienv_space`'s space (as a host or client carries
    it) as a member of ``space``, of the types Gymnasium gives (a NumPy
    integer for ``Discrete``)."""
    if _opaque(space, pickled):
        return _unpickle(value)
    if isinstance(space, spaces.Discrete):
        return space.dtype.type(np.asarray(value).item())
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        array = np.asarray(value, dtype=space.dtype)
        # A 0-d box's value as Gymnasium's vector envs hand it (``iterate``:
        # a NumPy scalar).
        return array[()] if array.ndim == 0 else array
    if isinstance(space, spaces.Text):
        return str(value)
    if isinstance(space, spaces.Tuple):
        return tuple(to_gymnasium(s, v, pickled) for s, v in zip(space.spaces, value))
    if isinstance(space, spaces.Dict):
        return {k: to_gymnasium(s, value[k], pickled) for k, s in space.spaces.items()}
    if isinstance(space, spaces.OneOf):
        index, inner = value
        index = int(np.asarray(index).item())
        return np.int64(index), to_gymnasium(space.spaces[index], inner, pickled)
    raise _refuse(space)


def batch_to_gymnasium(space: spaces.Space[Any], value: Any, pickled: bool = False) -> Any:
    """A batch of ``space``'s values as carried (stacked along a first axis,
    tuples and dicts field by field) as Gymnasium's ``concatenate`` gives it
    for ``batch_space(space, n)`` (a tuple of the values, for a space
    carried pickled)."""
    if _opaque(space, pickled):
        return tuple(_unpickle(row) for row in _rows(value))
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        return np.asarray(value, dtype=space.dtype)
    if isinstance(space, spaces.Text):
        return tuple(str(v) for v in value)
    if isinstance(space, spaces.Tuple):
        return tuple(batch_to_gymnasium(s, v, pickled) for s, v in zip(space.spaces, value))
    if isinstance(space, spaces.Dict):
        return {k: batch_to_gymnasium(s, value[k], pickled) for k, s in space.spaces.items()}
    if isinstance(space, spaces.OneOf):
        return tuple(to_gymnasium(space, row, pickled) for row in _split(value))
    raise _refuse(space)


def batch_from_gymnasium(space: spaces.Space[Any], value: Any, pickled: bool = False) -> Any:
    """A batch of ``space``'s values in Gymnasium's batched form as carried
    (the inverse of :func:`batch_to_gymnasium`; values carried pickled as
    one zero-padded ``uint8`` array, a row each, which our hosts split as
    they split any array)."""
    if _opaque(space, pickled):
        return _pad([_pickle(v) for v in value])
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return np.asarray(value, dtype=np.int64)
    if isinstance(space, spaces.MultiBinary):
        return np.asarray(value, dtype=np.bool_)
    if isinstance(space, spaces.Box):
        return np.asarray(value, dtype=space.dtype)
    if isinstance(space, spaces.Text):
        return [str(v) for v in value]
    if isinstance(space, spaces.Tuple):
        return tuple(batch_from_gymnasium(s, v, pickled) for s, v in zip(space.spaces, value))
    if isinstance(space, spaces.Dict):
        return {k: batch_from_gymnasium(s, value[k], pickled) for k, s in space.spaces.items()}
    if isinstance(space, spaces.OneOf):
        return [to_unienv(space, v, pickled) for v in value]
    raise _refuse(space)


def wire_gymnasium_space(space: Space) -> spaces.Space[Any]:
    """The Gymnasium space a client of the wire makes of a UniEnv space:
    unienv's ``to_gym_space``, except that a binary space (which it fails
    to convert) is a ``MultiBinary`` and a union space a ``OneOf``, nested
    in dict and tuple spaces too. A bool ``Box`` hosted by us is a binary
    space on the wire, so it comes back as a ``MultiBinary`` (the document
    says nothing more)."""
    if isinstance(space, BinarySpace):
        shape = tuple(int(d) for d in space.shape)
        return spaces.MultiBinary(shape[0] if len(shape) == 1 else list(shape))
    if isinstance(space, DictSpace):
        return spaces.Dict({k: wire_gymnasium_space(s) for k, s in space.spaces.items()})
    if isinstance(space, TupleSpace):
        return spaces.Tuple([wire_gymnasium_space(s) for s in space.spaces])
    if isinstance(space, UnionSpace):
        return spaces.OneOf([wire_gymnasium_space(s) for s in space.spaces])
    converted: spaces.Space[Any] = gym_utils.to_gym_space(space)
    return converted


class GymnasiumEnv(FromGymnasiumEnv):  # type: ignore[misc]  # FromGymnasiumEnv is untyped (unienv)
    """A Gymnasium env as a UniEnv ``Env`` (NumPy backend) for every space
    of the module's table (``pickled``: any space, see :data:`CARRIER`):
    unienv's ``FromGymnasiumEnv`` with this module's spaces and conversions.
    Actions reach the Gymnasium env as members of its action space (a NumPy
    integer for ``Discrete``), observations leave as the UniEnv spaces hold
    them. Make it with :func:`from_gymnasium`."""

    def __init__(self, env: gymnasium.Env[Any, Any], *, hold_finished: bool = False, pickled: bool = False) -> None:
        self._pickled = pickled
        # FromGymnasiumEnv's state, without its space conversions (which
        # refuse Graph and Sequence): this module's instead.
        self.env = env
        self._metadata: Optional[Dict[str, Any]] = None
        self._render_fps: Optional[int] = None
        self.backend = NumpyComputeBackend
        self.device = None
        self.batch_size = None
        self.context_space = None
        self._rng = env.np_random
        self.gymnasium_action_space: spaces.Space[Any] = env.action_space
        self.gymnasium_observation_space: spaces.Space[Any] = env.observation_space
        self.action_space = unienv_space(env.action_space, pickled)
        self.observation_space = unienv_space(env.observation_space, pickled)
        self._hold_finished = hold_finished
        self._finished: Optional[Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]] = None

    def step(self, action: Any) -> Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]:
        if self._finished is not None:
            return self._finished
        obs, reward, terminated, truncated, info = self.env.step(
            to_gymnasium(self.gymnasium_action_space, action, self._pickled))
        result = to_unienv(self.gymnasium_observation_space, obs, self._pickled), reward, terminated, truncated, info
        if self._hold_finished and (terminated or truncated):
            # Until the next reset, steps do not reach the env (see hostable).
            self._finished = (result[0], 0.0, bool(terminated), bool(truncated), {})
        return result

    def reset(self, *args: Any, mask: Optional[Any] = None, seed: Optional[int] = None,
              **kwargs: Any) -> Tuple[None, Any, Dict[str, Any]]:
        if mask is not None:
            raise ValueError("a GymnasiumEnv is unbatched: reset takes no mask")
        obs, info = self.env.reset(*args, seed=seed, **kwargs)
        self._finished = None
        return None, to_unienv(self.gymnasium_observation_space, obs, self._pickled), info


def from_gymnasium(env: gymnasium.Env[Any, Any]) -> FromGymnasiumEnv:
    """``env`` as a UniEnv ``Env`` to host (``RemoteServer.register``,
    ``BatchedEnv``), whatever its spaces (the module's table): unienv's own
    ``FromGymnasiumEnv(env)`` when its conversion is exact (``Box`` spaces
    of real dtypes: our host then steps it on its fast path), else a
    :class:`GymnasiumEnv`. Spaces it cannot carry (``Graph``, ``Sequence``,
    custom spaces) are a ``TypeError``."""
    if not isinstance(env, gymnasium.Env):
        raise TypeError(f"from_gymnasium takes a gymnasium.Env, got {type(env).__name__}")
    if exact_in_unienv(env.action_space) and exact_in_unienv(env.observation_space):
        return FromGymnasiumEnv(env)
    return GymnasiumEnv(env)


class DiscreteActions(gymnasium.Wrapper[Any, Any, Any, Any]):
    """A Gymnasium env of a ``Box`` observation space (real dtype) and a
    ``Discrete`` action space, given each action as a NumPy integer of the
    space's dtype (the 0-d array our host hands it becomes one): the only
    conversion such an env needs, so that our host keeps stepping it on its
    fast path (SPEC.md, ``BatchedEnv``)."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self._integer = np.dtype(env.action_space.dtype).type

    def step(self, action: Any) -> Any:
        if type(action) is np.ndarray:
            action = self._integer(action.item())
        return self.env.step(action)


def hostable(env: Any) -> Any:
    """``env`` as a ``BatchedEnv`` sub-env: a Gymnasium env whose spaces
    unienv does not convert exactly becomes a :class:`GymnasiumEnv`;
    anything else is returned as it is (a Gymnasium env of ``Box`` spaces is
    stepped directly).

    Such a sub-env, once its episode ended, is not stepped again until it
    is reset: a batched env steps all of its sub-envs or none, and a
    ``RemoteVectorEnv`` in ``NEXT_STEP`` mode discards the ended sub-envs'
    extra step before resetting them. Stepping the ended env would draw
    from its random generator (``FrozenLake``'s slippery moves,
    ``Blackjack``'s cards) and its next episodes would differ from
    ``SyncVectorEnv``'s from the same seeds. Its step returns the last
    observation instead, reward 0 and the flags it ended with.

    An env of a real ``Box`` observation space and a ``Discrete`` action
    space (CartPole, Acrobot, MountainCar) only needs its actions as NumPy
    integers: it becomes a :class:`DiscreteActions` (a Gymnasium wrapper,
    which our host still steps on its fast path)."""
    if not isinstance(env, gymnasium.Env) or isinstance(env, DiscreteActions):
        return env
    if exact_in_unienv(env.observation_space):
        if exact_in_unienv(env.action_space):
            return env
        if isinstance(env.action_space, spaces.Discrete):
            return DiscreteActions(env)
    return GymnasiumEnv(env, hold_finished=True)


def fleet_hostable(env: Any) -> Any:
    """``env`` as a sub-env of a ``ProcessVectorEnv``'s server process: a
    Gymnasium env with a space outside the module's table
    (:func:`carried_pickled`) becomes a :class:`GymnasiumEnv` carrying
    those values pickled (the vector env unpickles them: it started this
    process and reaches it over a private socket); anything else is
    returned as it is (``BatchedEnv`` then hosts it as :func:`hostable`
    says)."""
    if isinstance(env, gymnasium.Env) and (carried_pickled(env.observation_space)
                                           or carried_pickled(env.action_space)):
        return GymnasiumEnv(env, hold_finished=True, pickled=True)
    return env


class ObservationSpaceAs(gymnasium.Wrapper[Any, Any, Any, Any]):
    """A Gymnasium env published with another observation space (its
    values unchanged): a ``ProcessVectorEnv``'s sub-envs in
    ``observation_mode="different"`` (the space holding every sub-env's,
    :func:`space_hull`) or given a custom space, so that one batched
    resource hosts sub-envs of spaces that differ."""

    #: What it wraps.
    wrappable = gymnasium.Env

    def __init__(self, env: gymnasium.Env[Any, Any], observation_space: spaces.Space[Any]) -> None:
        super().__init__(env)
        self.observation_space = observation_space


def space_hull(given: List[Any]) -> spaces.Space[Any]:
    """One space holding every value of ``given`` (spaces that Gymnasium's
    ``batch_differing_spaces`` batches: one type, shape and dtype): a
    ``Box`` from the lowest ``low`` to the highest ``high``, a
    ``Discrete`` or ``MultiDiscrete`` from the lowest start to the highest
    end, ``Dict`` and ``Tuple`` field by field; any other space, the
    first."""
    first = given[0]
    if isinstance(first, spaces.Box):
        low = np.min(np.stack([np.asarray(s.low) for s in given]), axis=0)
        high = np.max(np.stack([np.asarray(s.high) for s in given]), axis=0)
        return spaces.Box(low, high, first.shape, first.dtype)
    if isinstance(first, spaces.Discrete):
        start = min(int(s.start) for s in given)
        end = max(int(s.start) + int(s.n) for s in given)
        return spaces.Discrete(end - start, start=start, dtype=first.dtype)
    if isinstance(first, spaces.MultiDiscrete):
        lo = np.min(np.stack([s.start for s in given]), axis=0)
        hi = np.max(np.stack([s.start + s.nvec for s in given]), axis=0)
        return spaces.MultiDiscrete(hi - lo, start=lo, dtype=first.dtype)
    if isinstance(first, spaces.Dict):
        return spaces.Dict({k: space_hull([s[k] for s in given]) for k in first.spaces})
    if isinstance(first, spaces.Tuple):
        return spaces.Tuple([space_hull([s[i] for s in given]) for i in range(len(first.spaces))])
    same: spaces.Space[Any] = first
    return same


def gymnasium_env(env: Any) -> Any:
    """The Gymnasium env inside a ``BatchedEnv`` sub-env (``env`` itself
    when it is one, or a UniEnv ``Env`` of its own)."""
    if isinstance(env, FromGymnasiumEnv):
        return gymnasium_env(env.env)
    if isinstance(env, (DiscreteActions, ObservationSpaceAs)):
        return gymnasium_env(env.env)
    return env


def is_scalar_action(actions: Any) -> bool:
    """Whether ``actions`` is one scalar where a vector env takes a batch
    (Gymnasium's vector envs raise ``TypeError`` for it)."""
    return isinstance(actions, (int, float, bool, np.number, np.bool_)) or (
        isinstance(actions, np.ndarray) and actions.ndim == 0)

