"""``RemoteVectorEnv``: many remote environments as one Gymnasium ``VectorEnv``.

    from unienv_remote import RemoteVectorEnv

    envs = RemoteVectorEnv([("ws://10.0.0.5:8765", "pendulum0"), ("ws://10.0.0.6:8765", "pendulum0"), ...])
    obs, infos = envs.reset(seed=0)
    obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())

Each address is an env-mode resource of any UniEnv server (ours or the
reference), given as ``(url, resource_id)``; any mix of servers and resource IDs
works, as long as the envs share their action and observation spaces. A
batched resource (``batch_size`` B, e.g. a :class:`unienv_remote.BatchedEnv`)
contributes B consecutive sub-environments, stepped by one request; batched
and unbatched resources mix. A step sends every request at once (envs on one
server share a connection, their requests pipelined), written by
``step_async`` itself, which returns as soon as they are on their way, so the
learner can compute meanwhile; ``step_wait`` reads the replies and stacks them
in Rust without the GIL (on the calling thread: no hand-off between threads).

Asynchronous stepping, EnvPool's way: with ``batch_size=M``, ``send(actions,
env_id)`` steps some sub-envs and ``recv()`` returns the first M (at least M:
whole resources) whose results arrived, with their ids in
``infos["env_id"]``, so the learner never waits for the slowest simulator::

    envs = RemoteVectorEnv(addresses, batch_size=16)
    obs, infos = envs.reset(seed=0)
    envs.send(policy(obs))                      # every env
    while True:
        obs, rewards, terminations, truncations, infos = envs.recv()
        envs.send(policy(obs), infos["env_id"])

Autoreset follows Gymnasium 1.x: ``AutoresetMode.NEXT_STEP`` by default (what
``SyncVectorEnv`` and ``AsyncVectorEnv`` do unless told otherwise), or
``SAME_STEP`` (``infos["final_obs"]`` / ``infos["final_info"]``) or
``DISABLED``, chosen with ``autoreset_mode=``. A batched resource is reset
through reset masks: one extra ``reset(mask=...)`` request on a step where
some of its sub-envs must be reset (in ``NEXT_STEP`` mode sent right behind the
step, pipelined, in ``SAME_STEP`` mode after the step's reply; in ``NEXT_STEP``
mode those sub-envs are stepped once more first, their result discarded: a
batched env steps all of its sub-envs or none).

Failures of single sub-environments do not lose the others' results: with
``on_error="raise"`` (default) ``step`` / ``step_wait`` / ``reset`` raise
:class:`VectorEnvError`, which carries the whole result (``.result``, failed
envs' slots zero) and the per-env exceptions (``.errors``: index -> the
exception the single-env client raises, e.g. ``UncertainOutcomeError`` for a
lost reply or ``RemoteError`` with its ``uncertain`` flag). With
``on_error="info"`` the result is returned and the exceptions are in
``infos["error"]`` (object array, mask ``infos["_error"]``). A failed env is
not stepped again until it is reset: ``reset(options={"reset_mask": mask})``
resets only the envs of ``mask``. A failed request to a batched resource fails
all of its sub-envs (UniEnv semantics: the resource is faulted until reset).

Restarting is opt-in: with ``restart=RestartPolicy(max_restarts=...,
window=...)`` a lost or faulted sub-env is reconnected, reset and reported in
that step's ``infos`` (``restart``, ``restart_reason``,
``step_may_have_run``) within rate limits; see ``help(RemoteVectorEnv)`` and
``unienv_remote.restart``.

Without a policy, reconnecting is explicit: when a server comes back (a
restarted process or Ray actor, maybe at a new URL),
``replace_server(old_url, new_url)`` points
every env of the old server at the new one (``reconnect({i: (url, id)})``
for single envs), without touching the others' connections or episodes. A
reconnected env is then reset like a failed one (``reset_mask``) before it is
stepped again; until then each step reports it as needing a reset. Nothing
reconnects on its own: whether a lost reply's mutation executed is for the
learner to decide (the ``UncertainOutcomeError`` it got), not for a silent
retry.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np
import gymnasium
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from unienv_interface.backends import NumpyComputeBackend
from unienv_interface.space.space_utils.serialization_utils import json_to_space

from . import _actions, _logging, _native
from ._gym_spaces import (batch_from_gymnasium, batch_to_gymnasium, exact_in_unienv, is_scalar_action, to_gymnasium,
                          wire_gymnasium_space)
from ._record import native_format
from .restart import (Failure, Healer, RestartError, RestartPolicy, Restarted, classify, concat_results, put, take,
                      zeros_rows)

_Result = TypeVar("_Result")

__all__ = ["RemoteVectorEnv", "VectorEnvError", "RestartPolicy", "RestartError"]


class VectorEnvError(RuntimeError):
    """Some sub-environments failed; the others' results are complete.

    ``errors`` maps each failed env's index to its exception (the one the
    single-env client raises for the same failure; ``getattr(e, "uncertain",
    False)`` or ``isinstance(e, UncertainOutcomeError)`` tells whether its
    mutation may have executed; with a restart policy, a failure it gave up
    on is a ``RestartError`` whose ``__cause__`` is that exception). Envs
    that failed in an earlier call and were
    not reset since are in ``needs_reset`` (nothing was sent to them).
    ``result`` is what the call would have returned, with zeros in the failed
    envs' slots.
    """

    def __init__(self, errors: Dict[int, BaseException], needs_reset: List[int], result: Any) -> None:
        self.errors = errors
        self.needs_reset = needs_reset
        self.result = result
        parts = [f"env {i}: {type(e).__name__}: {e}" for i, e in sorted(errors.items())]
        parts += [f"env {i}: failed earlier, reset it first" for i in needs_reset]
        super().__init__("; ".join(parts))


def check_reset_mask(reset_mask: Any, num_envs: int) -> None:
    """Gymnasium's vector envs' checks of ``options["reset_mask"]``, with
    their exceptions and messages (a NumPy bool array of shape
    ``(num_envs,)`` with at least one ``True``)."""
    if not isinstance(reset_mask, np.ndarray):
        raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(reset_mask)}")
    if reset_mask.shape != (num_envs,):
        raise ValueError(f"`options['reset_mask']` must have shape `({num_envs},)`, got {reset_mask.shape}")
    if reset_mask.dtype != np.bool_:
        raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {reset_mask.dtype}")
    if not np.any(reset_mask):
        raise ValueError("`options['reset_mask']` must contain a boolean array with at least one True value, "
                         f"got reset_mask={reset_mask}")


def _mode(mode: Union[AutoresetMode, str]) -> AutoresetMode:
    if isinstance(mode, AutoresetMode):
        return mode
    for m in AutoresetMode:
        if mode in (m.value, m.name):
            return m
    raise ValueError(f"unknown autoreset mode {mode!r}")


class _InfoBuilder:
    """Gymnasium's ``VectorEnv._add_info`` for ``num_envs`` entries."""

    _add_info = VectorEnv._add_info

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


def _gather_infos(builder: Any, env_infos: Union[Sequence[Dict[str, Any]], Dict[str, Any]],
                  used: Optional[Any] = None) -> Dict[str, Any]:
    """Gymnasium's vector info dict of a step's or reset's infos: a dict is
    what the extension gathered already (``python/src/client/vector_infos.rs``,
    the regular case, equal to Gymnasium's to the byte:
    ``python/tests/test_vector_infos.py``) and is returned as it is; one dict
    per env goes through Gymnasium's own ``_add_info`` in env order (envs
    whose info is empty, or false in ``used``, a bool sequence or array,
    left out)."""
    if isinstance(env_infos, dict):
        return env_infos
    gathered: Dict[str, Any] = {}
    for i, info in enumerate(env_infos):
        if info and (used is None or used[i]):
            gathered = builder._add_info(gathered, info, i)
    return gathered


class RemoteVectorEnv(VectorEnv):
    """``num_envs`` remote environments as one Gymnasium ``VectorEnv``.

    ``envs`` lists ``(url, resource_id)`` pairs (``ws://`` or ``wss://``); a
    batched resource counts as its ``batch_size`` sub-envs. ``batch_size``
    (EnvPool's name): how many sub-envs ``recv()`` returns at least.
    ``timeout`` (seconds, per request; ``None`` waits forever), ``token``
    (bearer token) and ``ca_file`` (CA certificates, PEM, trusted for
    ``wss://`` besides the system's roots) apply to every connection,
    reconnections included.

    The single spaces are the envs' UniEnv spaces converted by unienv's
    ``to_gym_space`` (binary spaces as ``MultiBinary``, union spaces as
    ``OneOf``), which has no ``Discrete``: a ``Discrete(n)`` hosted env's
    space comes back as an integer ``Box``, a bool ``Box`` as a
    ``MultiBinary`` (docs/vector.md, "Gymnasium spaces on the wire").
    ``single_observation_space`` / ``single_action_space`` give the
    Gymnasium spaces to use instead; observations and actions then take
    those spaces' Gymnasium types (an ``int8`` ``MultiBinary``, a tuple of
    ``Text`` strings, ...), as ``ProcessVectorEnv``'s do. A scalar action is
    a ``TypeError`` and a bad ``reset_mask`` raises Gymnasium's errors, as
    Gymnasium's vector envs.

    ``call`` / ``get_attr`` / ``set_attr`` / ``render`` / ``np_random_seed``
    reach the sub-envs over our servers' attribute extension (SPEC.md,
    section 15); a server without it (the reference) raises
    ``NotImplementedError`` for them, sending nothing.

    ``autoreset_mode`` (Gymnasium 1.x's ``AutoresetMode`` or its name):

    * ``NEXT_STEP`` (default, as ``SyncVectorEnv``): an env that ends an
      episode returns its last observation; the next ``step`` resets it
      (its action is ignored) and returns the first observation of the new
      episode, with reward 0 and both signals false.
    * ``SAME_STEP``: the env is reset within the step that ended the
      episode; the step returns the new episode's first observation, and the
      last one is in ``infos["final_obs"]`` / ``infos["final_info"]`` (masks
      ``infos["_final_obs"]`` / ``infos["_final_info"]``).
    * ``DISABLED``: nothing is reset; call ``reset(options={"reset_mask":
      mask})`` for the envs that ended.

    ``on_error`` says what a failure of some sub-envs does (the others'
    results are never lost):

    * ``"raise"`` (default): ``reset`` / ``step`` / ``step_wait`` raise
      :class:`VectorEnvError`, whose ``.errors`` maps each failed env's index
      to the exception the single-env client raises (``RemoteError`` with
      its ``code`` and ``uncertain`` flag, ``UncertainOutcomeError`` when a
      mutation's reply was lost and it may have executed), ``.needs_reset``
      lists the envs that failed earlier and were not stepped, and
      ``.result`` holds the whole return value, zeros in the failed slots.
    * ``"info"``: the result is returned; ``infos["error"]`` (an object
      array, mask ``infos["_error"]``) holds the exceptions.

    A failed env is not stepped again until it is reset
    (``reset(options={"reset_mask": envs.needs_reset()})``). Actions may be
    an array stacked along the first axis or a nested list (``[[0.0]] * n``),
    converted to the action space's dtype.

    ``restart`` (a :class:`~unienv_remote.RestartPolicy`; default ``None``:
    nothing restarts on its own) heals lost and faulted sub-envs. When
    ``step`` / ``step_wait`` / ``reset`` sees a sub-env's connection closed
    or refused, a timeout, or a ``faulted`` / ``execution_error`` reply, it
    reconnects that env's resource (same address, or ``policy.resolve``'s
    answer; a batched resource's B sub-envs together), resets it, and
    returns with it healed, reporting the restart in ``infos`` (keys with
    Gymnasium's ``_key`` masks, set for the restarted envs only, in that
    call only):

    * ``infos["restart"]``: ``True``;
    * ``infos["restart_reason"]``: ``"connection_lost"``, ``"timeout"`` or
      ``"faulted"``;
    * ``infos["step_may_have_run"]`` (``step`` only): whether the lost step
      may have executed on the server (an ``UncertainOutcomeError``). It is
      never sent again: a mutation is not retried;
    * ``infos["restart_cause"]``: the exception that called for it;
    * the keys of the new episode's reset info.

    In a step, the restarted env's episode is cut: ``truncated`` is true,
    ``terminated`` false, reward 0, and its observation is the *new*
    episode's first (the cut episode's last observation was lost with the
    server). How that fits each autoreset mode:

    * ``NEXT_STEP``: the env is already reset, so its next step is a real
      step of the new episode (its action is used), not an autoreset step;
      a learner that drops the transition after every done (Gymnasium's
      convention for this mode) drops that one real transition too. If the
      lost request was itself the autoreset (the episode had ended the step
      before), no episode is cut: ``truncated`` stays false.
    * ``SAME_STEP``: exactly this mode's shape (the new episode's first
      observation with ``truncated``), except that there is no
      ``final_obs`` / ``final_info`` for the env (``_final_obs`` false):
      check ``infos["_restart"]`` before bootstrapping from it.
    * ``DISABLED``: the env is reset already, unlike an episode that ends
      on its own; resetting it again (``reset_mask``) only starts another
      episode.

    In ``reset``, a restarted env is reset with the seed and options asked
    for, its infos carry ``restart`` and ``restart_reason``. In ``recv``, a
    restart needs nothing in flight: that ``recv`` first gathers every other
    sub-env in flight (waiting for them as a full ``step`` would) and
    returns their results too (more than ``batch_size``, as ``recv`` may).

    Limits: at most ``max_restarts`` restarts per resource within any
    ``window`` seconds; a restart that does not succeed within ``timeout``
    seconds (reconnection attempts with exponential backoff) is given up.
    A given-up resource is reported as :class:`~unienv_remote.RestartError`
    through ``on_error`` (in ``VectorEnvError.errors`` or
    ``infos["error"]``), then as needing a reset, as without a policy;
    once the learner brings it back itself (``reconnect`` /
    ``replace_server``, then a successful ``reset`` with ``reset_mask``),
    the policy covers it again. A call returns the other sub-envs' results
    once its restarts succeeded or were given up: within the policy's
    ``timeout`` after the failure plus at most one attempt in progress
    (whose connection and reset requests are each bounded by this vector
    env's ``timeout=``; a refused connection fails at once), the restarts
    of one call sharing one deadline.

    ``record_dir``: records each sub-env's transitions as the learner sees
    them into a ``unienv_data`` ``ReplayBuffer`` of its own,
    ``record_dir/<index>/``, from a Rust thread (SPEC.md section 10.2);
    ``record_format``: ``"parquet"`` (default; loading it needs pyarrow) or
    ``"npz"`` (loads with unienv alone; a file per transition), as for
    ``RemoteServer``.
    """

    def __init__(
        self,
        envs: Sequence[Tuple[str, str]],
        *,
        autoreset_mode: Union[AutoresetMode, str] = AutoresetMode.NEXT_STEP,
        timeout: Optional[float] = 30.0,
        token: Optional[str] = None,
        ca_file: Optional[Union[str, "os.PathLike[str]"]] = None,
        on_error: str = "raise",
        single_observation_space: Optional[gymnasium.Space[Any]] = None,
        single_action_space: Optional[gymnasium.Space[Any]] = None,
        batch_size: Optional[int] = None,
        restart: Optional[RestartPolicy] = None,
        record_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        record_format: str = "parquet",
    ) -> None:
        if on_error not in ("raise", "info"):
            raise ValueError("on_error must be 'raise' or 'info'")
        _logging.follow()  # the crate's events at the unienv_remote logger's level
        # Before connecting: an unknown format is a ValueError here.
        record_writer = native_format(record_format, record_dir is not None)
        mode = _mode(autoreset_mode)
        self._on_error = on_error
        self.addresses: List[Tuple[str, str]] = [(str(u), str(r)) for u, r in envs]
        self._native = _native.VectorEnv(self.addresses, mode.value, timeout, token,
                                         None if ca_file is None else os.fspath(ca_file))
        self.num_envs = self._native.num_envs
        # Each resource's first sub-env and its number of sub-envs.
        self._ranges: List[Tuple[int, int]] = [(int(a), int(b)) for a, b in self._native.resource_ranges()]
        if batch_size is not None and not 1 <= batch_size <= self.num_envs:
            raise ValueError(f"batch_size must be between 1 and num_envs ({self.num_envs})")
        self.batch_size = batch_size
        self.single_observation_space = single_observation_space or self._gym_space("observation_space")
        self.single_action_space = single_action_space or self._gym_space("action_space")
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        #: Whether observations / actions are converted between what the wire
        #: carries and Gymnasium's types: only for spaces the caller gave
        #: (``single_observation_space=`` ...) that are not Boxes of real dtypes.
        self._convert_obs = single_observation_space is not None and not exact_in_unienv(single_observation_space)
        self._convert_actions = single_action_space is not None and not exact_in_unienv(single_action_space)
        #: Whether some values travel pickled (``_gym_spaces.CARRIER``): only
        #: between ``ProcessVectorEnv`` and the server processes it started.
        self._pickled = False
        #: ``set_attr``'s values (name -> one per env), re-applied to a
        #: resource its restart policy reconnects (SPEC.md, "Extension: sub-env attributes").
        self._attributes_set: Dict[str, List[Any]] = {}
        metadata = dict(self._native.env_metadata())
        metadata["autoreset_mode"] = mode
        self.metadata = metadata
        self.render_mode = None
        self.closed = False
        self._autoreset_mode = mode
        self.restart_policy = restart
        self._healer = None if restart is None else Healer(restart, self._native, self._ranges, self.addresses)
        if self._healer is not None:
            # Through a weak reference: a cycle would keep an unclosed env's
            # connections (and a ProcessVectorEnv's servers) until a collection.
            me = weakref.ref(self)

            def reapply(k: int) -> None:
                env = me()
                if env is not None:
                    env._reapply_attributes(k)

            self._healer.reconnected = reapply
        # NEXT_STEP: the envs whose last step ended (their next step is an autoreset).
        self._ended = np.zeros(self.num_envs, dtype=np.bool_)
        # Learner-side recording (docs/recording.md): one call per reset/send/result.
        self._recorder = None if record_dir is None else _native.Recorder(
            os.fspath(record_dir), self._native.space_document("observation_space"),
            self._native.space_document("action_space"), self.num_envs,
            record_writer)

    def _gym_space(self, name: str) -> gymnasium.Space[Any]:
        document = self._native.space_document(name)
        if document is None:
            raise ValueError(f"the remote envs have no {name}")
        space = wire_gymnasium_space(json_to_space(document, NumpyComputeBackend, None))
        return space

    def _report(self, errors: List[Tuple[int, str, BaseException]], infos: Dict[str, Any],
                result_of: Callable[[Dict[str, Any]], _Result],
                builder: Any = None, positions: Optional[Dict[int, int]] = None) -> _Result:
        if not errors:
            return result_of(infos)
        failed = {i: e for i, kind, e in errors if kind == "failed"}
        needs_reset = [i for i, kind, _ in errors if kind == "needs_reset"]
        if self._on_error == "info":
            for i, _, e in errors:
                position = i if positions is None else positions[i]
                infos = (builder or self)._add_info(infos, {"error": e}, position)
            return result_of(infos)
        raise VectorEnvError(failed, needs_reset, result_of(infos))

    def reset(
        self,
        *,
        seed: Optional[Union[int, Sequence[Optional[int]]]] = None,
        options: Optional[Dict[str, Any]] = None,
    ) -> Tuple[Any, Dict[str, Any]]:
        """Resets every env (``seed``: ``None``, an int ``s`` for seeds
        ``s, s+1, ...``, or one per env); ``options["reset_mask"]`` (a bool
        array) resets only those envs, the others keeping their latest
        observation. Other options are passed to every env's reset."""
        if seed is None:
            seeds: List[Optional[int]] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = [None if s is None else int(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(f"If seeds are passed as a list the length must match num_envs={self.num_envs} "
                                 f"but got length={len(seeds)}.")
        mask = None
        if options is not None and "reset_mask" in options:
            options = dict(options)
            reset_mask = options.pop("reset_mask")
            check_reset_mask(reset_mask, self.num_envs)
            mask = [bool(m) for m in reset_mask]
            if not options:
                options = None
        obs, env_infos, errors, used = self._native.reset(seeds, options, mask)
        if self._recorder is not None:
            self._recorder.reset(obs, used, errors)
        extra: Dict[int, Dict[str, Any]] = {}
        if self._healer is not None:
            failed = {i for i, _, _ in errors}
            self._healer.learner_reset([i for i in range(self.num_envs) if used[i] and i not in failed])
            obs, errors, extra = self._restart_failed(obs, errors, seeds, options, step=False)
            self._record_restarts(obs, extra)
        self._ended[np.asarray(used, dtype=np.bool_)] = False
        infos = _gather_infos(self, env_infos, used)
        for i, info in sorted(extra.items()):
            infos = self._add_info(infos, info, i)
        return self._report(errors, infos, lambda inf: (self._obs(obs), inf))

    def _restart_failed(
        self, obs: Any, errors: List[Tuple[int, str, BaseException]], seeds: Optional[Sequence[Optional[int]]],
        options: Optional[Any], step: bool, positions: Optional[Dict[int, int]] = None,
        count: Optional[int] = None,
    ) -> Tuple[Any, List[Tuple[int, str, BaseException]], Dict[int, Dict[str, Any]]]:
        """Restarts the resources whose failure the policy heals; returns the
        observation with their reset observations in place, the errors left
        (given-up resources' as ``RestartError``) and each restarted env's
        infos (its reset's, plus the restart keys)."""
        healer = self._healer
        assert healer is not None
        failures: Dict[int, Failure] = {}
        for i, kind, e in errors:
            k = healer.resource_of(i)
            if kind != "failed" or k in healer.given_up or k in failures:
                continue
            why = classify(e)
            if why is not None:
                failures[k] = Failure(why[0], why[1], e)
        if not failures:
            return obs, errors, {}
        done, given_up = healer.restart(failures, seeds, options)
        extra: Dict[int, Dict[str, Any]] = {}
        restarted: Dict[int, Restarted] = {}
        for k, r in done.items():
            if obs is None:  # every env failed: nothing was stacked
                obs = zeros_rows(r.stacked, self.num_envs if count is None else count)
            for i, o, info in zip(healer.envs_of(k), r.observations, r.infos):
                obs = put(obs, i if positions is None else positions[i], o)
                keys: Dict[str, Any] = {"restart": True, "restart_reason": r.failure.reason,
                                        "restart_cause": r.failure.error}
                if step:
                    keys["step_may_have_run"] = r.failure.may_have_run
                extra[i] = {**info, **keys}
                restarted[i] = r
        replaced: Dict[int, RestartError] = {i: e for k, e in given_up.items() for i in healer.envs_of(k)}
        left = [(i, kind, replaced.get(i, e) if kind == "failed" else e)
                for i, kind, e in errors if i not in restarted]
        return obs, left, extra

    def step_async(self, actions: Any) -> None:
        """Sends every env's action (stacked along the first axis) at once; a
        nested list or scalars become the stacked array, as a server converts
        a single env's plain action."""
        if type(actions) is not np.ndarray or actions.ndim == 0 or self._convert_actions:
            actions = self._actions(actions)
        if type(actions) in _actions.PLAIN:
            actions = _actions.coerce_batched(actions, self._native.space_document("action_space"), self.num_envs)
        self._native.step_async(actions)
        if self._recorder is not None:
            self._recorder.sent(actions)

    def _plain(self, native: _native.VectorStep) -> bool:
        """Whether a step's or recv's native results are the common case,
        returned as they are: no info, no final observation, no failure,
        nothing to record or heal."""
        return (not (native.infos or native.finals or native.errors) and self._healer is None and self._recorder is None
                and not self._convert_obs)

    def step_wait(self) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        """Waits for the pending step and returns the stacked results (with
        a restart policy, after restarting the lost or faulted envs)."""
        native = self._native.step_wait()
        if self._plain(native):
            # What _results would return.
            return native.observation, native.reward, native.terminated, native.truncated, {}
        if self._recorder is not None:
            self._recorder.stepped(native)
        extra: Dict[int, Dict[str, Any]] = {}
        if self._healer is not None and native.errors:
            native, extra = self._restart_step(native)
            self._record_restarts(native.observation, extra)
        self._track_ended(native, extra)
        return self._results(native, self, extra=extra)

    def _track_ended(self, native: _native.VectorStep, extra: Dict[int, Dict[str, Any]]) -> None:
        """NEXT_STEP: which envs' next step is an autoreset (for a restart's
        report, so kept only with a restart policy: not on every learner's
        step)."""
        if self._healer is None or self._autoreset_mode != AutoresetMode.NEXT_STEP:
            return
        ids = np.asarray(native.env_id, dtype=np.int64)
        if len(ids) != len(native.terminated):  # a full step (step_wait) names every env
            ids = np.arange(len(native.terminated))
        self._ended[ids] = np.asarray(native.terminated, dtype=np.bool_) | np.asarray(native.truncated, dtype=np.bool_)
        for i in extra:
            self._ended[i] = False  # reset already

    def _restart_step(self, native: _native.VectorStep, positions: Optional[Dict[int, int]] = None,
                      ) -> Tuple[_native.VectorStep, Dict[int, Dict[str, Any]]]:
        rewards, terminations, truncations = native.reward, native.terminated, native.truncated
        obs, errors, extra = self._restart_failed(native.observation, native.errors, None, None, step=True,
                                                  positions=positions, count=len(native.env_id))
        if extra:
            rewards, terminations, truncations = (np.array(a) for a in (rewards, terminations, truncations))
            for i in extra:
                p = i if positions is None else positions[i]
                rewards[p] = 0
                terminations[p] = False
                # NEXT_STEP: an env whose last step ended was due an autoreset
                # (a reset, not a step): no episode was cut.
                truncations[p] = not (self._autoreset_mode == AutoresetMode.NEXT_STEP and self._ended[i])
        return _native.VectorStep(obs, rewards, terminations, truncations, native.infos, native.autoreset,
                                  native.finals, errors, native.env_id), extra

    def _results(self, native: _native.VectorStep, builder: Any, positions: Optional[Dict[int, int]] = None,
                 extra: Optional[Dict[int, Dict[str, Any]]] = None,
                 ) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        obs, rewards, terminations, truncations = native.observation, native.reward, native.terminated, native.truncated
        obs = self._obs(obs)
        errors = native.errors
        infos = _gather_infos(builder, native.infos)
        for i, final_obs, final_info in native.finals:
            infos = builder._add_info(infos, {"final_obs": final_obs, "final_info": final_info}, i)
        infos = self._final_obs(infos)
        for i, info in sorted((extra or {}).items()):
            infos = builder._add_info(infos, info, i if positions is None else positions[i])
        return self._report(errors, infos, lambda inf: (obs, rewards, terminations, truncations, inf),
                            builder, positions)

    def send(self, actions: Any, env_id: Optional[Any] = None) -> None:
        """Sends the step of the sub-envs ``env_id`` (all when ``None``;
        ``actions`` stacked in that order) and returns at once. The ids must
        cover whole resources (a batched resource's sub-envs go together),
        none of them in flight: send back what ``recv`` returned. A nested
        list or scalars become the stacked array, as in ``step_async``.
        Ids are integers (a float array of whole numbers is taken too); a
        boolean mask is refused (``TypeError``), as are fractional ids
        (``ValueError``), before anything is sent."""
        if env_id is None:
            ids = list(range(self.num_envs))
        elif type(env_id) is np.ndarray and env_id.dtype.kind in "iu":
            # What recv's infos["env_id"] is: its ints at once (iterating
            # the array makes a NumPy scalar per id and ends on an IndexError).
            ids = env_id.reshape(-1).tolist()
        else:
            given = np.asarray(env_id).reshape(-1)
            if given.dtype.kind == "b":
                raise TypeError("env_id takes the sub-envs' ids (as recv's infos['env_id']), not a boolean mask")
            if given.dtype.kind == "f" and not np.all(np.mod(given, 1) == 0):
                raise ValueError(f"env_id must be whole numbers (sub-env ids), got {given.tolist()}")
            ids = [int(i) for i in given]
        if any(i < 0 for i in ids):
            raise ValueError(f"env_id must be sub-env ids from 0 to {self.num_envs - 1}, got {min(ids)}")
        if type(actions) is not np.ndarray or actions.ndim == 0 or self._convert_actions:
            actions = self._actions(actions)
        if type(actions) in _actions.PLAIN:
            actions = _actions.coerce_batched(actions, self._native.space_document("action_space"), len(ids))
        self._native.send(actions, ids)
        if self._recorder is not None:
            self._recorder.sent(actions, ids)

    def recv(self) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        """Waits for the first ``batch_size`` sub-envs whose results arrived
        (at least that many: whole resources; all in flight if fewer are) and
        returns their results, stacked in arrival order, with their ids in
        ``infos["env_id"]`` (the other info keys are indexed by position, as
        the other results; ``VectorEnvError.errors`` by env id). With a
        restart policy, a ``recv`` that restarts envs returns every env that
        was in flight (see the class's help)."""
        native = self._native.recv(self.batch_size or self.num_envs)
        if self._plain(native):
            # What the general path below returns (its infos empty but for
            # the ids).
            return native.observation, native.reward, native.terminated, native.truncated, {"env_id": native.env_id}
        if self._recorder is not None:
            self._recorder.stepped(native)
        extra: Dict[int, Dict[str, Any]] = {}
        if self._healer is not None and self._restartable(native.errors):
            if self._native.step_pending():
                # A restart needs nothing in flight: the others' results are
                # gathered now and returned with these.
                rest = self._native.recv(self.num_envs)
                if self._recorder is not None:
                    self._recorder.stepped(rest)
                native = concat_results(native, rest)
            positions = {int(env): k for k, env in enumerate(native.env_id)}
            native, extra = self._restart_step(native, positions)
            self._record_restarts(native.observation, extra, positions)
        self._track_ended(native, extra)
        ids = native.env_id
        obs, rewards, terminations, truncations, infos = self._results_positional(native, len(ids), extra)
        infos["env_id"] = ids
        return obs, rewards, terminations, truncations, infos

    def _record_restarts(self, obs: Any, extra: Dict[int, Dict[str, Any]],
                         positions: Optional[Dict[int, int]] = None) -> None:
        """Tells the recorder that each restarted env began a new episode at
        its reset observation (its cut episode was committed when the
        failure was recorded): never a transition across the restart."""
        if self._recorder is None or not extra or obs is None:
            return
        full = zeros_rows(obs, self.num_envs)
        for i in extra:
            full = put(full, i, take(obs, i if positions is None else positions[i]))
        self._recorder.reset(full, [i in extra for i in range(self.num_envs)], [])

    def _restartable(self, errors: List[Tuple[int, str, BaseException]]) -> bool:
        healer = self._healer
        return healer is not None and any(
            kind == "failed" and healer.resource_of(i) not in healer.given_up and classify(e) is not None
            for i, kind, e in errors)

    def _results_positional(self, native: _native.VectorStep, count: int,
                            extra: Optional[Dict[int, Dict[str, Any]]] = None,
                            ) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        positions = {int(env): k for k, env in enumerate(native.env_id)}
        try:
            return self._results(native, _InfoBuilder(count), positions, extra)
        except VectorEnvError as e:
            e.result[4]["env_id"] = native.env_id
            raise

    def step(self, actions: Any) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        """``step_async(actions)`` then ``step_wait()``."""
        self.step_async(actions)
        return self.step_wait()

    def reconnect(self, changes: Union[Dict[int, Tuple[str, str]], Sequence[int]]) -> None:
        """Connects envs anew: ``{index: (url, resource_id)}``, or indices to
        reconnect at their current address; a batched resource is named by
        its first sub-env and reconnected whole. One connection per distinct
        URL; all or nothing (``ConnectionError`` or ``ValueError`` change no
        env). The reconnected envs must be reset
        (``reset(options={"reset_mask": mask})``) before they are stepped."""
        first = {start: k for k, (start, _) in enumerate(self._ranges)}
        for i in (changes if isinstance(changes, dict) else list(changes)):
            if not 0 <= int(i) < self.num_envs:
                raise ValueError(f"env {i} does not exist ({self.num_envs} envs)")
            if int(i) not in first:
                raise ValueError(f"env {i} is inside a batched resource: name its first sub-env")
        if isinstance(changes, dict):
            items = [(int(i), (str(a[0]), str(a[1]))) for i, a in changes.items()]
        else:
            items = [(int(i), self.addresses[first[int(i)]]) for i in changes]
        self._native.reconnect([(i, url, rid) for i, (url, rid) in items])
        for i, address in items:
            self.addresses[first[i]] = address
        return None

    def needs_reset(self) -> np.ndarray:
        """The bool mask of the envs that must be reset before they are
        stepped (they failed, or were reconnected), for
        ``reset(options={"reset_mask": ...})``."""
        return np.array(self._native.failed(), dtype=np.bool_)

    def replace_server(self, old_url: str, new_url: str) -> np.ndarray:
        """Reconnects every env at ``old_url`` to the same resource ID at
        ``new_url`` (a restarted server); returns the bool mask of those
        envs, ready for ``reset(options={"reset_mask": mask})``."""
        mask = np.zeros(self.num_envs, dtype=np.bool_)
        changes: Dict[int, Tuple[str, str]] = {}
        for (url, rid), (start, width) in zip(self.addresses, self._ranges):
            if url == old_url:
                mask[start:start + width] = True
                changes[start] = (new_url, rid)
        if not changes:
            raise ValueError(f"no env is at {old_url}")
        self.reconnect(changes)
        return mask

    # -- Gymnasium's types (where the caller gave Gymnasium spaces) --------

    def _obs(self, obs: Any) -> Any:
        """A batch of observations as the wire carries them, in Gymnasium's
        batched form of the given ``single_observation_space``."""
        return batch_to_gymnasium(self.single_observation_space, obs, self._pickled) if self._convert_obs and obs is not None else obs

    def _final_obs(self, infos: Dict[str, Any]) -> Dict[str, Any]:
        """``SAME_STEP``'s final observations as single Gymnasium values; a
        ``Discrete`` one (alone, not inside a tuple or dict) as a Python
        ``int``, as Gymnasium's toy-text envs return it and its vector envs
        pass it on (the batch it was cut from cannot say which integer type
        the env returned)."""
        if self._convert_obs and "final_obs" in infos:
            final = infos["final_obs"]
            space = self.single_observation_space
            for i, present in enumerate(infos["_final_obs"]):
                if present:
                    value = to_gymnasium(space, final[i], self._pickled)
                    final[i] = int(value) if isinstance(space, gymnasium.spaces.Discrete) else value
        return infos

    def _actions(self, actions: Any) -> Any:
        """A batch of actions checked (one scalar is a ``TypeError``, as
        Gymnasium's vector envs raise) and, for a given Gymnasium action
        space, converted to what the wire carries."""
        if is_scalar_action(actions):
            raise TypeError(f"a vector env's action is a batch of {self.num_envs} actions, "
                            f"got the scalar {actions!r}")
        if self._convert_actions:
            return batch_from_gymnasium(self.single_action_space, actions, self._pickled)
        return actions

    # -- Gymnasium's vector API on the sub-envs (SPEC.md, "Extension: sub-env attributes")

    def supports_attributes(self) -> bool:
        """Whether every sub-env's server carries ``call`` / ``get_attr`` /
        ``set_attr`` (our servers' attribute extension: it lists it in
        ``hello``; the reference server and other v1 servers do not)."""
        return all(_native.vector_supports_attributes(self._native, k) for k in range(len(self._ranges)))

    def _check_attributes(self, what: str, extension: bool = True) -> None:
        if self.closed:
            raise RuntimeError(f"{what}: this vector env is closed")
        if self._native.step_pending():
            raise RuntimeError(f"{what} while a step is in flight: receive its results first")
        for k, (url, resource_id) in enumerate(self.addresses if extension else []):
            if not _native.vector_supports_attributes(self._native, k):
                raise NotImplementedError(
                    f"{what}: the server of {resource_id!r} at {url} does not carry sub-env attributes: it lists no "
                    "'env_attributes' extension in hello (unienv-remote servers do; protocol v1 has no attribute "
                    "or code call). Nothing was sent.")

    def call(self, name: str, *args: Any, **kwargs: Any) -> Tuple[Any, ...]:
        """Calls method ``name`` of every sub-env with ``args`` and
        ``kwargs`` (or reads attribute ``name`` when it is not callable), as
        Gymnasium's vector envs do (``get_wrapper_attr`` on a Gymnasium
        sub-env): the results, in env order. Over our servers' attribute
        extension: every server must list it (else ``NotImplementedError``,
        nothing sent); arguments and results travel as the protocol's
        values (arrays, numbers, strings, lists, tuples, str-keyed dicts),
        anything else is an error; private names (``_x``) are refused. One
        request per resource, in order; no step may be in flight."""
        if name in ("reset", "step", "close", "_setattr", "_check_spaces"):
            raise ValueError(f"Trying to call function `{name}` with `call`, use `{name}` directly instead.")
        self._check_attributes(f"call({name!r})")
        results: List[Any] = []
        for k in range(len(self._ranges)):
            results.extend(_native.vector_call_attribute(self._native, k, name, list(args), dict(kwargs)))
        return tuple(results)

    def get_attr(self, name: str) -> Tuple[Any, ...]:
        """Attribute ``name`` of every sub-env (``call(name)``, as
        Gymnasium's vector envs)."""
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Sets attribute ``name`` of every sub-env: ``values`` is a list or
        tuple of one value per env, or one value for all, as Gymnasium's
        vector envs take it (``set_wrapper_attr`` on a Gymnasium sub-env).
        With a restart policy, the values are set again on a resource it
        reconnects (a restarted server's env is new), before its reset."""
        if not isinstance(values, (list, tuple)):
            values = [values for _ in range(self.num_envs)]
        if len(values) != self.num_envs:
            raise ValueError("Values must be a list or tuple with length equal to the number of environments. "
                             f"Got `{len(values)}` values for {self.num_envs} environments.")
        self._check_attributes(f"set_attr({name!r})")
        for k, (start, width) in enumerate(self._ranges):
            _native.vector_set_attribute(self._native, k, name, list(values[start:start + width]))
        self._attributes_set.pop(name, None)  # re-applied in the order last set
        self._attributes_set[name] = list(values)

    @property
    def np_random_seed(self) -> Tuple[int, ...]:  # type: ignore[override]  # AsyncVectorEnv's type
        """Every sub-env's ``np_random_seed``, as Gymnasium's vector envs give
        it (``get_attr``: ``(42, 43, ...)`` after ``reset(seed=42)``)."""
        return self.get_attr("np_random_seed")

    def _reapply_attributes(self, k: int) -> None:
        """Sets ``set_attr``'s values again on resource ``k`` (reconnected by
        the restart policy, before its reset)."""
        start, width = self._ranges[k]
        for name, values in self._attributes_set.items():
            _native.vector_set_attribute(self._native, k, name, list(values[start:start + width]))

    def render(self) -> Optional[Tuple[Any, ...]]:
        """Every sub-env's ``render()``, in order, as Gymnasium's vector envs
        give it (``call("render")`` over the attribute extension; a server
        without it: each resource's own ``render`` call of protocol v1,
        an unbatched env's frame as its sub-env's)."""
        if self.supports_attributes():
            return self.call("render")
        self._check_attributes("render", extension=False)
        frames: List[Any] = []
        for k, (start, width) in enumerate(self._ranges):
            frame = _native.vector_render(self._native, k)
            if width == 1:
                frames.append(frame)
            elif isinstance(frame, (list, tuple)) and len(frame) == width:
                frames.extend(frame)
            else:
                url, resource_id = self.addresses[k]
                raise NotImplementedError(
                    f"render: the batched resource {resource_id!r} at {url} renders one value for its {width} "
                    "sub-envs, and its server does not carry sub-env attributes to render each")
        return tuple(frames)

    @property
    def recording_error(self) -> Optional[str]:
        """``None`` while the recording (``record_dir``) writes everything;
        else how many times it failed and the first failure (each is also
        logged to ``unienv_remote``, and ``close()`` warns with it)."""
        return None if self._recorder is None else self._recorder.error

    def close_extras(self, **kwargs: Any) -> None:
        self._native.close()
        if self._recorder is not None:
            self._recorder.close()

    def __del__(self) -> None:
        native = getattr(self, "_native", None)
        if native is not None:
            native.close()
