"""``BatchedEnv``: N environments as one batched UniEnv ``Env`` (``batch_size == N``).

    import gymnasium
    from unienv_remote import BatchedEnv, RemoteServer

    server = RemoteServer()
    server.register("pendulums", BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * 8))

One request to such a resource steps all N sub-environments: one message, one
GIL acquisition and one reply for N env steps, which is where hosting many
small simulators gets its throughput (EnvPool's and PufferLib's lesson).

Each factory returns a UniEnv ``Env`` (unbatched, NumPy backend) or a
Gymnasium env. A Gymnasium env of ``Box`` spaces (real dtypes) is stepped
directly, converting data the way unienv's ``FromGymnasiumEnv`` does, without
wrapping each sub-env (the wrapper costs a MuJoCo step 15-20 %); any other
Gymnasium env (``Discrete``, ``MultiBinary``, ``Tuple``, ``Dict``, a ``bool``
box, ...) is wrapped in ``unienv_remote._gym_spaces.GymnasiumEnv``, whose
conversions unienv's lack: it receives its actions as Gymnasium's vector envs
hand them (a NumPy integer for ``Discrete``), and once its episode ended it is
not stepped again until it is reset (see ``_gym_spaces.hostable``). The spaces
are the sub-envs' spaces batched by unienv's ``batch_space`` (leading axis
N); all sub-envs must share them.

Semantics are UniEnv's batched ones, not Gymnasium's vector env:

* ``step(action)`` takes the batched action (leading axis N) and returns the
  batched observation, ``reward`` (``float64``, shape ``(N,)``),
  ``terminated`` / ``truncated`` (``bool``, shape ``(N,)``) and ``info``. There
  is **no autoreset**: a finished sub-env is reset by its client with
  ``reset(mask=...)`` (``RemoteVectorEnv`` does that).
* ``reset(mask=None, seed=None, **kwargs)`` resets the sub-envs of ``mask``
  (a bool array of shape ``(N,)``; all when ``None``) and returns only their
  rows of context and observation. ``seed`` is an int ``s`` (sub-env ``i``
  gets ``s + i``, as Gymnasium's vector envs derive it), a sequence of N
  seeds (``None`` entries draw nothing), or ``None``. Other keyword arguments
  (``options=...``) go to every reset sub-env.
* ``info`` follows Gymnasium's vector convention: key ``k`` holds one entry
  per sub-env (an array of length N for numbers of one kind or arrays of one
  shape, else a list with ``None`` where absent) and ``_k`` is the bool mask
  of the sub-envs that reported it; dicts nest. Only the reset sub-envs
  report infos of a reset. It is built by the crate's one implementation of
  the layout (``_native.batch_infos``), the Rust host's ``BatchedEnv``'s too.
* A sub-env that raises faults the whole batched env (UniEnv semantics: the
  resource's call fails): the exception propagates, and ``step`` refuses to
  run until every sub-env has been reset since.

This class splits actions into rows and assembles the rows' results; the
rest (refusing a faulted batch, the rows of a mask and their seeds, stepping
every row, failing the batch) is the crate's one stepping core, which the
Rust host's ``BatchedEnv`` runs on too (``_native.BatchedCore``).

Stepping runs on ``threads`` threads, each stepping a contiguous slice of the
sub-envs (in turn); this pays only for simulators that release the GIL for most of
their step. The default is sequential stepping (``threads=1``): measured on
the benchmark machine (``benches/throughput.py``, BENCHMARKS.md, "Vector envs
and throughput") a batch of 8 ``HalfCheetah-v5`` — MuJoCo releases the GIL in
``mj_step``, but a Gymnasium MuJoCo env spends most of its step in Python —
gained nothing from 2 threads, and Pendulum loses.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, SupportsFloat, Tuple, Union

import gymnasium
import numpy as np

from unienv_interface.backends import NumpyComputeBackend
from unienv_interface.env_base.env import Env
from unienv_interface.space import BoxSpace, Space
from unienv_interface.space.space_utils import batch_utils as sbu
from unienv_interface.space.space_utils import gym_utils
from unienv_interface.space.space_utils.serialization_utils import space_to_json
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

from . import _native
from ._gym_spaces import hostable

# A refusal of a bad mask: ``_hooks`` imports ``RemoteServer``, which needs
# nothing of this module.
from ._hooks import RequestRefused

__all__ = ["BatchedEnv", "SubEnvFactory"]

#: A factory of one sub-environment: a UniEnv ``Env`` or a Gymnasium env.
SubEnvFactory = Callable[[], Union[Env, gymnasium.Env]]

Seeds = Optional[Union[int, Sequence[Optional[int]]]]


class _Sub:
    """One sub-environment and the conversions its data needs."""

    __slots__ = ("env", "gym", "boxes", "action_space", "observation_space", "context_space")

    def __init__(self, env: Union[Env, gymnasium.Env]) -> None:
        # A Gymnasium env of spaces unienv does not convert exactly (Discrete,
        # MultiBinary, Tuple, Dict, ...) goes through our conversions.
        hosted: Union[Env, gymnasium.Env] = hostable(env)
        env = hosted
        self.env = env
        if isinstance(env, gymnasium.Env):
            self.gym = True
            self.action_space: Space = gym_utils.from_gym_space(env.action_space, NumpyComputeBackend)
            self.observation_space: Space = gym_utils.from_gym_space(env.observation_space, NumpyComputeBackend)
            self.context_space: Optional[Space] = None
            # Box spaces: unienv's NumPy conversions are the identity for
            # arrays (``to_gym_data`` / ``from_gym_data``), skipped here.
            self.boxes = isinstance(self.action_space, BoxSpace) and isinstance(self.observation_space, BoxSpace)
        elif isinstance(env, Env):
            if env.batch_size is not None:
                raise ValueError(f"a sub-env must be unbatched, got batch_size={env.batch_size}")
            if getattr(env.backend, "simplified_name", None) != "numpy":
                raise ValueError("a UniEnv sub-env must use the NumPy backend")
            self.gym = False
            self.boxes = False
            self.action_space = env.action_space
            self.observation_space = env.observation_space
            self.context_space = env.context_space
        else:
            raise TypeError(f"a factory returned {type(env).__name__}, neither a UniEnv Env nor a Gymnasium env")

    def step(self, action: Any) -> Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]:
        if self.boxes and isinstance(action, np.ndarray):
            return self.finish(self.env.step(action))
        if self.gym:
            obs, reward, terminated, truncated, info = self.env.step(gym_utils.to_gym_data(self.action_space, action))
            return gym_utils.from_gym_data(self.observation_space, obs), reward, terminated, truncated, info
        return self.env.step(action)

    def finish(self, result: Any) -> Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]:
        """The rest of a Box sub-env's ``step`` after ``self.env.step(action)``
        returned ``result``."""
        obs, reward, terminated, truncated, info = result
        if not isinstance(obs, np.ndarray):
            obs = gym_utils.from_gym_data(self.observation_space, obs)
        return obs, reward, terminated, truncated, info

    def reset(self, seed: Optional[int], kwargs: Dict[str, Any]) -> Tuple[Any, Any, Dict[str, Any]]:
        if isinstance(self.env, gymnasium.Env):  # self.gym, narrowed for mypy
            obs, info = self.env.reset(seed=seed, **kwargs)
            return None, gym_utils.from_gym_data(self.observation_space, obs), info
        result: Tuple[Any, Any, Dict[str, Any]] = self.env.reset(seed=seed, **kwargs)
        return result


def _seed_arg(seed: Seeds) -> Union[None, int, List[Optional[int]]]:
    """``seed`` as the core takes it: ``None``, an ``int`` (row ``i`` gets
    ``seed + i``) or one seed (or ``None``) per row."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)):
        return int(seed)
    return [None if s is None else int(s) for s in seed]


def _row(space: Space, data: Any, index: int) -> Any:
    """Sub-env ``index``'s part of batched ``data``: arrays keep being arrays
    (``data[index, ...]``, 0-d for a scalar space, as an unbatched env receives
    it), dicts and tuples are split field by field, a list (the rows the
    wire gathers when they do not stack, such as strings) by its items,
    anything else by unienv's ``get_at``."""
    if isinstance(data, np.ndarray):
        return data[index, ...]
    if isinstance(data, list):
        return data[index]
    if isinstance(data, dict):
        return {k: _row(space, v, index) for k, v in data.items()}
    if isinstance(data, tuple):
        return tuple(_row(space, v, index) for v in data)
    return sbu.get_at(space, data, index)


class BatchedEnv(Env):  # type: ignore[misc]  # Env is untyped (unienv)
    """N sub-environments as one batched UniEnv ``Env`` (see the module docs).

    ``threads``: how many threads step the sub-envs (1, the default, steps
    them in turn on the calling thread).

    ``faulted`` (read-only) is true while a sub-env that raised has not been
    reset since: ``step`` refuses to run then.
    """

    def __init__(self, factories: Sequence[SubEnvFactory], *, threads: int = 1) -> None:
        if len(factories) == 0:
            raise ValueError("a BatchedEnv needs at least one factory")
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self._subs: List[_Sub] = []
        try:
            for factory in factories:
                self._subs.append(_Sub(factory()))
            first = self._subs[0]
            for i, sub in enumerate(self._subs[1:], start=1):
                for name in ("action_space", "observation_space", "context_space"):
                    a, b = getattr(first, name), getattr(sub, name)
                    if (a is None) != (b is None) or (a is not None and space_to_json(a) != space_to_json(b)):
                        raise ValueError(f"sub-env {i}'s {name} differs from sub-env 0's")
        except BaseException:
            self.close()
            raise
        n = len(self._subs)
        self.backend = NumpyComputeBackend
        self.device = None
        self.batch_size = n
        self.single_action_space: Space = first.action_space
        self.single_observation_space: Space = first.observation_space
        self.single_context_space: Optional[Space] = first.context_space
        self.action_space = sbu.batch_space(first.action_space, n)
        self.observation_space = sbu.batch_space(first.observation_space, n)
        self.context_space = None if first.context_space is None else sbu.batch_space(first.context_space, n)
        self.metadata = dict(getattr(first.env, "metadata", None) or {"render_modes": []})
        self.render_mode = getattr(first.env, "render_mode", None)
        self.rng = np.random.default_rng()
        self.threads = min(threads, n)
        # The stepping core; ``complete`` is how our host finishes a step
        # whose sub-results it cannot assemble itself (see ``_complete_step``).
        self._core = _native.BatchedCore(self._subs, self.threads, lambda results: self._complete_step(results))

    @property
    def faulted(self) -> bool:
        """Whether a sub-env raised and was not reset since (``step`` refuses
        to run then)."""
        return bool(self._core.faulted)

    @property
    def sub_envs(self) -> List[Union[Env, gymnasium.Env]]:
        """The sub-environments, in order."""
        return [s.env for s in self._subs]

    def _gymnasium_space(self, name: str) -> Optional[gymnasium.Space[Any]]:
        """Sub-env 0's Gymnasium space ``name`` when the sub-envs are
        Gymnasium envs or unienv ``FromGymnasiumEnv``\\ s (``None`` otherwise).
        Our host reads it to publish and check the integer boxes UniEnv makes
        of ``Discrete`` / ``MultiDiscrete`` with the high bound their values
        reach, as it does for a single ``FromGymnasiumEnv`` (SPEC.md)."""
        env: Any = self._subs[0].env
        if isinstance(env, FromGymnasiumEnv):
            env = env.env
        if isinstance(env, gymnasium.Env):
            space: Optional[gymnasium.Space[Any]] = getattr(env, name, None)
            return space
        return None

    def _native_step_plan(self) -> Optional[List[gymnasium.Env]]:
        """The sub-envs, when our host (``RemoteServer``) may step this batch
        through its core without calling :meth:`step`: every sub-env a
        Gymnasium env with Box action and observation spaces, stepped
        sequentially, and ``step`` not overridden.

        The host then calls each sub-env's ``step`` with its row of the action
        (a NumPy array, as :meth:`step` passes it) and builds the batched
        result in Rust when every sub-result is regular (NumPy observations of
        one dtype and shape, ``float`` rewards, no infos or flat infos of
        floats); anything else goes through :meth:`_complete_step`. The
        transitions are the same, bit for bit (``python/tests/test_batched_fast.py``)."""
        if type(self).step is not BatchedEnv.step or self.threads > 1:
            return None
        if not all(sub.gym and sub.boxes for sub in self._subs):
            return None
        return [sub.env for sub in self._subs]

    def _complete_step(self, results: List[Any]) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        """The batch's result of its sub-envs' step results (``results[i]``:
        sub-env ``i``'s, as ``_Sub.step`` returns it): what :meth:`step`
        returns, and what our host calls when it cannot build the result
        itself."""
        n = len(self._subs)
        obs = sbu.concatenate(self.single_observation_space, [r[0] for r in results])
        reward = np.asarray([r[1] for r in results], dtype=np.float64)
        terminated = np.asarray([bool(r[2]) for r in results], dtype=np.bool_)
        truncated = np.asarray([bool(r[3]) for r in results], dtype=np.bool_)
        reported = [i for i, r in enumerate(results) if r[4]]
        infos = _native.batch_infos(n, reported, [results[i][4] for i in reported]) if reported else {}
        return obs, reward, terminated, truncated, infos

    def step(self, action: Any) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        space = self.action_space
        return self._complete_step(self._core.step(action, lambda data, i: _row(space, data, i)))

    def reset(self, *, mask: Optional[Any] = None, seed: Seeds = None,
              **kwargs: Any) -> Tuple[Any, Any, Dict[str, Any]]:
        n = len(self._subs)
        rows: Optional[List[bool]] = None
        if mask is not None:
            m = np.asarray(mask)
            if m.shape != (n,) or m.dtype != np.bool_:
                # Refused before any sub-env is touched: our host answers a
                # certain invalid_request and the batch stays usable.
                raise RequestRefused(f"mask must be a bool array of shape ({n},), got {m.dtype} {m.shape}")
            rows = m.tolist()
        indices, results = self._core.reset(rows, _seed_arg(seed), kwargs)
        if not results:
            return None, None, {}
        obs = sbu.concatenate(self.single_observation_space, [r[1] for r in results])
        context = None
        if self.single_context_space is not None:
            context = sbu.concatenate(self.single_context_space, [r[0] for r in results])
        reported = [k for k, r in enumerate(results) if r[2]]
        infos = (_native.batch_infos(n, [indices[k] for k in reported], [results[k][2] for k in reported])
                 if reported else {})
        return context, obs, infos

    def render(self) -> Optional[List[Any]]:
        """Every sub-env's ``render()``, in order."""
        return [s.env.render() for s in self._subs]

    def close(self) -> None:
        """Closes every sub-env."""
        for sub in getattr(self, "_subs", []):
            sub.env.close()

    def __str__(self) -> str:
        return f"<BatchedEnv of {len(self._subs)}: {self._subs[0].env}>"


# -- the host's fast path for one FromGymnasiumEnv (python/src/host/fast.rs) ------------


def _native_single_plan(env: Any) -> Optional[Tuple[gymnasium.Env, Space, Space]]:
    """``(env.env, env.action_space, env.observation_space)`` when our host
    (``RemoteServer``) may step ``env`` itself: ``env`` is unienv's
    ``FromGymnasiumEnv`` (not a subclass, ``step`` not replaced on the
    instance) over a Gymnasium env, with Box action and observation spaces
    (UniEnv ``BoxSpace``\\ s of the NumPy backend, which ``Box``,
    ``Discrete`` and ``MultiDiscrete`` become); ``None`` otherwise.

    For such an env, ``FromGymnasiumEnv.step(action)`` with a NumPy array
    ``action`` is ``env.env.step(action)`` with its observation passed through
    ``from_gym_data``, which returns a NumPy observation as it is (the NumPy
    backend's ``to_numpy``/``from_numpy`` are the identity), and its reward,
    flags and info untouched; it keeps no state of its own. The host then
    calls ``env.env.step`` with the action array itself and converts the
    result as it is when it is a tuple of 5 with a NumPy observation, and
    finishes anything else with :func:`_finish_single_step`. The host checks
    at every step that ``env.env`` and the two spaces are still these objects
    (``python/tests/test_single_fast.py``)."""
    if type(env) is not FromGymnasiumEnv or "step" in vars(env):
        return None
    inner = getattr(env, "env", None)
    if not isinstance(inner, gymnasium.Env):
        return None
    action_space, observation_space = env.action_space, env.observation_space
    for space in (action_space, observation_space):
        if type(space) is not BoxSpace or space.backend is not NumpyComputeBackend:
            return None
    return inner, action_space, observation_space


def _finish_single_step(env: FromGymnasiumEnv, result: Any) -> Tuple[Any, Any, Any, Any, Any]:
    """The rest of ``FromGymnasiumEnv.step`` after our host called
    ``env.env.step(action)`` itself and it returned ``result``, as that
    ``step`` finishes it."""
    obs, rew, terminated, truncated, info = result
    return gym_utils.from_gym_data(env.observation_space, obs), rew, terminated, truncated, info
