"""The one object through which the extension's Python host calls back into
this package: :class:`NativeHooks`, registered once at import
(``_native.set_hooks(HOOKS)``, from ``unienv_remote/__init__.py``).

The Rust side (``python/src/host/hooks.rs``) calls nothing else of the
package by name: each method below is a call it makes, with the thread and
the moment it makes it. Every method runs on a domain's worker thread with
the GIL held (or at the host's setup, for ``*_plan``), and must not block.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional, Tuple

from .server import RemoteServer


class RequestRefused(ValueError):
    """Raised by a hosted object to refuse a request before anything
    changed (``BatchedEnv.reset`` with a bad ``mask``): our host answers a
    certain ``invalid_request`` with its message and does not fault the
    domain, as it does for a refused action."""


def _batched() -> Any:
    """``unienv_remote.batched`` when it was imported (an object can be a
    ``BatchedEnv`` only then), else ``None``: never imports gymnasium."""
    return sys.modules.get(f"{__package__}.batched")


class NativeHooks:
    """What the extension's Python host (``_native.Server``) calls back.

    * ``refusal``: the exception class meaning "refused before anything
      changed" (:class:`RequestRefused`): a certain ``invalid_request``.
    * ``map_arguments(obj, args, kwargs)``: before each call of a resource
      whose backend is not NumPy, its array arguments moved to its backend
      and device; returns ``(args, kwargs)``.
    * ``layout_factory(server, root_id, product)``: a factory's product laid
      out as a domain (``RemoteServer``'s entries), on the new domain's worker.
    * ``dispose(items)``: a domain's objects closed once (``[(kind, obj)]``).
    * ``single_step_plan(obj)``: at setup, ``(env, action_space,
      observation_space)`` when the host may step a ``FromGymnasiumEnv``
      itself, else ``None``; ``finish_single_step(obj, result)`` finishes a
      step whose result is not regular, as ``FromGymnasiumEnv.step`` does.
    * ``batch_core(obj)``: at setup, the ``_native.BatchedCore`` of a
      ``BatchedEnv`` the host may step through it without calling its
      ``step``, else ``None``.
    * ``gymnasium_space(obj, name)``: a ``BatchedEnv``'s sub-envs' Gymnasium
      space ``name`` (for the action check's discrete bounds), else ``None``.
    """

    refusal = RequestRefused

    @staticmethod
    def map_arguments(obj: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        return RemoteServer._map_arguments(obj, args, kwargs)

    @staticmethod
    def layout_factory(server: Any, root_id: str, product: Any) -> List[Tuple[Any, ...]]:
        layout: List[Tuple[Any, ...]] = server._layout_factory(root_id, product)
        return layout

    @staticmethod
    def dispose(items: List[Tuple[str, Any]]) -> None:
        RemoteServer._dispose(items)

    @staticmethod
    def single_step_plan(obj: Any) -> Optional[Tuple[Any, Any, Any]]:
        try:
            from .batched import _native_single_plan
        except ImportError:  # no gymnasium: no FromGymnasiumEnv to step
            return None
        return _native_single_plan(obj)

    @staticmethod
    def finish_single_step(obj: Any, result: Any) -> Tuple[Any, Any, Any, Any, Any]:
        from .batched import _finish_single_step
        return _finish_single_step(obj, result)

    @staticmethod
    def batch_core(obj: Any) -> Any:
        batched = _batched()
        if batched is None or not isinstance(obj, batched.BatchedEnv) or obj._native_step_plan() is None:
            return None
        return obj._core

    @staticmethod
    def gymnasium_space(obj: Any, name: str) -> Any:
        batched = _batched()
        if batched is None or not isinstance(obj, batched.BatchedEnv):
            return None
        return obj._gymnasium_space(name)


HOOKS = NativeHooks()
