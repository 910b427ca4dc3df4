"""One remote UniEnv env as a ``gymnasium.Env``, for training code that takes one
(Stable-Baselines3, CleanRL, TorchRL's Gymnasium wrappers)::

    import unienv_remote.gymnasium

    env = unienv_remote.gymnasium.make("ws://127.0.0.1:8765", "cartpole")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

    # or through Gymnasium's registry (after importing this module):
    env = gymnasium.make("unienv_remote/Remote-v0", url="ws://127.0.0.1:8765", resource_id="cartpole")
    envs = gymnasium.make_vec("unienv_remote/Remote-v0", num_envs=2, url="ws://127.0.0.1:8765",
                              resource_id=["pendulum0", "pendulum1"])   # a RemoteVectorEnv

Any env-mode resource of any UniEnv server works (``unienv-remote serve``, our
``RemoteServer``, the reference's). Spaces are the remote env's UniEnv spaces
in Gymnasium's terms: an integer box of shape ``()`` is ``Discrete`` (of shape
``(n,)``, ``MultiDiscrete``) when its bounds are finite, a binary space
``MultiBinary`` (so is a hosted ``Box`` of ``bool``: the space document of a
binary space says nothing of the Gymnasium space it came from), a text space
``Text``, dict and tuple spaces ``Dict`` and ``Tuple``, a union space
``OneOf``, other boxes ``Box``. Graph, dynamic box and batched spaces have no
Gymnasium counterpart here (a ``ValueError``). Observations are converted to those spaces' types (``np.int64`` for
``Discrete``, the box's dtype), rewards to ``float`` and signals to ``bool``.

Seeding is Gymnasium's: ``reset(seed=s)`` seeds ``np_random`` here and resets
the remote env with the same seed. ``options`` (when not empty) go to the
remote ``reset`` as its ``options`` keyword argument.

A context (UniEnv's per-episode ``context``, e.g. a goal) is given in
``info["context"]`` by ``reset`` (``context="info"``, the default), or as part of
every observation (``context="observation"``: observations are
``{"context": ..., "observation": ...}``); envs without a context space have
neither.

Rendering is the remote env's: ``render_mode`` is chosen where the env is
hosted (``metadata["render_modes"]`` lists it); asking for another one is a
``ValueError``. Each adapter has its own connection and controls its env like
any client: two adapters (or ``make_vec(..., vectorization_mode="sync")``
copies) on one resource conflict, so give each sub-env its own resource.
Batched remote envs (``batch_size`` set) are refused: use
``unienv_remote.RemoteVectorEnv``.

Needs gymnasium: ``pip install "unienv-remote[gymnasium]"``.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Dict, List, Mapping, Optional, Sequence, SupportsFloat, Tuple, Union

import numpy as np

try:
    import gymnasium
    from gymnasium import spaces
except ModuleNotFoundError as missing:  # pragma: no cover - depends on the installation
    raise ModuleNotFoundError(
        "unienv_remote.gymnasium needs gymnasium: pip install \"unienv-remote[gymnasium]\"",
        name=missing.name) from missing

from unienv_interface.remote.errors import RemoteError

from .client import RemoteClient

__all__ = ["ENV_ID", "RemoteGymnasiumEnv", "gymnasium_space", "make", "make_vector"]

#: The registered id, for ``gymnasium.make`` and ``gymnasium.make_vec``.
ENV_ID = "unienv_remote/Remote-v0"

_INT64 = np.iinfo(np.int64)

#: The adapter of this process that last reset each ``(url, resource_id)``.
_CURRENT: "weakref.WeakValueDictionary[Tuple[str, str], RemoteGymnasiumEnv]" = weakref.WeakValueDictionary()


def gymnasium_space(document: Mapping[str, Any]) -> spaces.Space[Any]:
    """The Gymnasium space of a UniEnv space document (``space_to_json``)."""
    kind = document.get("type")
    if kind == "BoxSpace":
        dtype = np.dtype(document["dtype"])
        shape = tuple(document["shape"])
        low = np.broadcast_to(np.asarray(document["low"], dtype=dtype), shape).copy()
        high = np.broadcast_to(np.asarray(document["high"], dtype=dtype), shape).copy()
        if np.issubdtype(dtype, np.integer) and len(shape) <= 1:
            info = np.iinfo(dtype)
            bounded = bool(np.all(low > info.min) and np.all(high < info.max)) if low.size else False
            if bounded and bool(np.all(high.astype(object) - low.astype(object) < _INT64.max)):
                if shape == ():
                    return spaces.Discrete(int(high) - int(low) + 1, start=int(low))
                return spaces.MultiDiscrete(high.astype(np.int64) - low.astype(np.int64) + 1,
                                            start=low.astype(np.int64))
        return spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "BinarySpace":
        dims = [int(d) for d in document["shape"]]
        # MultiBinary(n) for one dimension, as Gymnasium's envs declare it (equal spaces).
        return spaces.MultiBinary(dims[0] if len(dims) == 1 else dims)
    if kind == "DictSpace":
        return spaces.Dict({key: gymnasium_space(value) for key, value in document["spaces"].items()})
    if kind == "TupleSpace":
        return spaces.Tuple([gymnasium_space(value) for value in document["spaces"]])
    if kind == "TextSpace":
        charset = document.get("charset")
        return spaces.Text(max_length=int(document["max_length"]), min_length=int(document.get("min_length") or 0),
                           **({} if charset is None else {"charset": charset}))
    if kind == "UnionSpace":
        return spaces.OneOf([gymnasium_space(value) for value in document["spaces"]])
    raise ValueError(f"a {kind} has no Gymnasium space this adapter knows (Box, Binary, Text, Dict, Tuple and "
                     "Union spaces do)")


def _to_gymnasium(value: Any, space: spaces.Space[Any]) -> Any:
    """A remote value as a member of ``space``."""
    if isinstance(space, spaces.Discrete):
        return np.int64(np.asarray(value).item())
    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        return np.array(value, dtype=space.dtype)
    if isinstance(space, spaces.Dict):
        return {key: _to_gymnasium(value[key], sub) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_to_gymnasium(item, sub) for item, sub in zip(value, space.spaces))
    if isinstance(space, spaces.Text):
        return str(value)
    if isinstance(space, spaces.OneOf):
        index = int(np.asarray(value[0]).item())
        return np.int64(index), _to_gymnasium(value[1], space.spaces[index])
    return value


def _to_remote(action: Any, space: spaces.Space[Any]) -> Any:
    """A member of ``space`` as the remote env's action (binary values as bools)."""
    if isinstance(space, spaces.MultiBinary):
        return np.asarray(action, dtype=np.bool_)
    if isinstance(space, spaces.Dict) and isinstance(action, Mapping):
        return {key: _to_remote(action[key], space.spaces[key]) if key in space.spaces else action[key]
                for key in action}
    if isinstance(space, spaces.Tuple) and isinstance(action, (tuple, list)):
        return tuple(_to_remote(item, sub) for item, sub in zip(action, space.spaces))
    if isinstance(space, spaces.OneOf) and isinstance(action, (tuple, list)) and len(action) == 2:
        index = int(np.asarray(action[0]).item())
        if 0 <= index < len(space.spaces):
            return index, _to_remote(action[1], space.spaces[index])
    return action


class RemoteGymnasiumEnv(gymnasium.Env):
    """The remote env ``resource_id`` at ``url`` as a ``gymnasium.Env`` (see
    the module's documentation). ``timeout``, ``token`` and ``ca_file`` are
    ``RemoteClient``'s; ``context`` is ``"info"`` or ``"observation"``.

    When a second adapter of this process resets the same remote env (as
    ``check_env`` does through ``env.spec.make()``), the first one hands its
    control over: until the second one is closed and the first one is reset
    again, its calls raise ``RuntimeError`` saying so (never two adapters
    stepping one env in turn). An adapter in another process gets the
    server's ``ownership_conflict`` instead.
    """

    # What the class can render: the instance's metadata has the remote env's mode.
    metadata: Dict[str, Any] = {"render_modes": ["human", "rgb_array", "ansi", "rgb_array_list", "depth_array"]}

    def __init__(self, url: str, resource_id: str, *, render_mode: Optional[str] = None,
                 context: str = "info", timeout: Optional[float] = 30.0, token: Optional[str] = None,
                 ca_file: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        if context not in ("info", "observation"):
            raise ValueError("context must be 'info' or 'observation'")
        self.url, self.resource_id = url, resource_id
        self._client: Optional[RemoteClient] = RemoteClient.connect(url, timeout=timeout, token=token,
                                                                     ca_file=ca_file)
        try:
            self._remote = self._client.env(resource_id)
            descriptor = self._remote.descriptor
            if descriptor.get("batch_size") is not None:
                raise ValueError(f"env {resource_id!r} is batched (batch_size={descriptor['batch_size']}): "
                                 "use unienv_remote.RemoteVectorEnv")
            if descriptor.get("action_space") is None or descriptor.get("observation_space") is None:
                raise ValueError(f"env {resource_id!r} has no action or observation space")
            remote_mode = descriptor.get("render_mode")
            if render_mode is not None and render_mode != remote_mode:
                raise ValueError(f"env {resource_id!r} renders {remote_mode!r}, not {render_mode!r}: its render "
                                 "mode is chosen where it is hosted")
            self.action_space = gymnasium_space(descriptor["action_space"])
            self._observation_space = gymnasium_space(descriptor["observation_space"])
            context_document = descriptor.get("context_space")
            self._context_space = None if context_document is None else gymnasium_space(context_document)
            self._context_mode = context if self._context_space is not None else "none"
            if self._context_space is not None and self._context_mode == "observation":
                self.observation_space = spaces.Dict({"context": self._context_space,
                                                      "observation": self._observation_space})
            else:
                self.observation_space = self._observation_space
            metadata = dict(descriptor.get("metadata") or {})
            modes = [m for m in metadata.get("render_modes", []) if m == remote_mode]
            metadata["render_modes"] = modes if modes or remote_mode is None else [remote_mode]
            if descriptor.get("render_fps") is not None:
                metadata["render_fps"] = descriptor["render_fps"]
            self.metadata = metadata
            self.render_mode = remote_mode
        except BaseException:
            self._client.close()
            self._client = None
            raise
        self._context: Any = None
        self._displaced_by: Optional[str] = None

    def _current(self, resetting: bool = False) -> None:
        if self._client is None:
            raise RuntimeError("this RemoteGymnasiumEnv is closed")
        if self._displaced_by is not None:
            if resetting and _CURRENT.get((self.url, self.resource_id)) is None:
                self._displaced_by = None  # the other adapter is closed: a reset takes the env back
                return
            raise RuntimeError(f"env {self.resource_id!r} at {self.url} was reset by {self._displaced_by} of this "
                               "process after this one (one remote env has one adapter at a time): close that one, "
                               "then reset this one to drive the env again")

    def _hand_over(self, to: RemoteGymnasiumEnv) -> None:
        if self._client is not None:
            self._client.release(self.resource_id)
        self._displaced_by = repr(to)

    def _observation(self, observation: Any) -> Any:
        observation = _to_gymnasium(observation, self._observation_space)
        if self._context_space is not None and self._context_mode == "observation":
            # A copy per observation: returned data never shares memory.
            return {"context": _to_gymnasium(self._context, self._context_space), "observation": observation}
        return observation

    def reset(self, *, seed: Optional[int] = None,
              options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        super().reset(seed=seed)
        kwargs: Dict[str, Any] = {"seed": seed}
        if options:
            kwargs["options"] = options
        self._current(resetting=True)
        key = (self.url, self.resource_id)
        try:
            context, observation, info = self._remote.reset(**kwargs)
        except RemoteError as refused:
            holder = _CURRENT.get(key)
            if refused.code != "ownership_conflict" or holder is None or holder is self:
                raise
            holder._hand_over(self)
            context, observation, info = self._remote.reset(**kwargs)
        _CURRENT[key] = self
        info = dict(info or {})
        if self._context_space is not None:
            self._context = _to_gymnasium(context, self._context_space)
            if self._context_mode == "info":
                info["context"] = self._context
        return self._observation(observation), info

    def step(self, action: Any) -> Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]:
        self._current()
        observation, reward, terminated, truncated, info = self._remote.step(_to_remote(action, self.action_space))
        reward = float(np.asarray(reward).item()) if np.ndim(reward) == 0 else reward
        return (self._observation(observation), reward, bool(np.asarray(terminated).item()),
                bool(np.asarray(truncated).item()), dict(info or {}))

    def render(self) -> Any:
        if self.render_mode is None:
            return None
        self._current()
        return self._remote.render()

    def close(self) -> None:
        client, self._client = self._client, None
        key = (self.url, self.resource_id)
        if _CURRENT.get(key) is self:
            del _CURRENT[key]
        if client is not None:
            # Released first (answered by the server), so that another
            # adapter can take the env as soon as this returns.
            if self._displaced_by is None:
                try:
                    client.release(self.resource_id)
                except (RemoteError, ConnectionError):
                    pass
            client.close()

    def __repr__(self) -> str:
        return f"<RemoteGymnasiumEnv {self.resource_id!r} at {self.url}>"


def make(url: str, resource_id: str, **options: Any) -> RemoteGymnasiumEnv:
    """``RemoteGymnasiumEnv(url, resource_id, **options)``: the remote env as a
    ``gymnasium.Env``, without Gymnasium's wrappers."""
    return RemoteGymnasiumEnv(url, resource_id, **options)


def make_vector(num_envs: int = 1, *, url: Optional[str] = None,
                resource_id: Union[str, Sequence[str], None] = None,
                envs: Optional[Sequence[Tuple[str, str]]] = None, **options: Any) -> Any:
    """``gymnasium.make_vec(ENV_ID, ...)``'s constructor: a ``RemoteVectorEnv``
    over ``envs`` (``(url, resource_id)`` pairs) or over ``url`` and
    ``resource_id`` (one ID per env). ``options`` are ``RemoteVectorEnv``'s."""
    from .vector import RemoteVectorEnv
    options.pop("max_episode_steps", None)
    options.pop("render_mode", None)
    if envs is None:
        if url is None or resource_id is None:
            raise ValueError("give envs=[(url, resource_id), ...], or url= and resource_id=")
        ids: List[str] = [resource_id] if isinstance(resource_id, str) else [str(r) for r in resource_id]
        if len(ids) == 1 and num_envs > 1:
            raise ValueError(f"{num_envs} envs need {num_envs} remote envs: give resource_id=[...] with one ID per "
                             "env (one remote env cannot be stepped by several sub-envs)")
        envs = [(url, r) for r in ids]
    if len(envs) != num_envs:
        raise ValueError(f"num_envs={num_envs} but {len(envs)} remote envs were given")
    return RemoteVectorEnv(list(envs), **options)


if ENV_ID not in gymnasium.registry:
    # gymnasium.make passes url and resource_id as keywords; gymnasium's
    # EnvCreator protocol (``(**kwargs) -> Env``) cannot say a class needs them.
    gymnasium.register(id=ENV_ID, entry_point=RemoteGymnasiumEnv,  # type: ignore[arg-type]
                       vector_entry_point=make_vector)
