"""Plain actions (``1``, ``0.5``, ``[0.5]``, nested lists) converted before they
are sent, the way our ``RemoteServer`` converts them on arrival
(``_native.coerce_action``: the crate's ``Space::coerce``): into an array of
the action space's dtype and shape where that is unambiguous, otherwise left
as they are for the server to check."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from . import _native

#: The types converted; arrays and anything else go as they are.
PLAIN = (int, float, bool, list, tuple, dict)


def coerce(action: Any, document: Optional[Mapping[str, Any]]) -> Any:
    """``action`` converted for the space ``document`` (``space_to_json``)."""
    if type(action) not in PLAIN or document is None:
        return action
    return _native.coerce_action(document, action)


def coerce_batched(actions: Any, document: Optional[Mapping[str, Any]], num_envs: int) -> Any:
    """One action per env, stacked along a first axis of ``num_envs``, for a
    single env's box or binary space ``document``: a nested list becomes the
    stacked array (``[[0.0]] * 8`` for eight ``Box(1)`` envs)."""
    if type(actions) not in PLAIN or document is None:
        return actions
    if document.get("type") not in ("BoxSpace", "BinarySpace"):
        return actions
    batched = dict(document)
    batched["shape"] = (num_envs,) + tuple(document["shape"])
    for bound in ("low", "high"):
        if bound in batched:
            batched[bound] = [document[bound]]
    return _native.coerce_action(batched, actions)
