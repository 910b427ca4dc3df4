"""Deep comparison of results with their exact types (NumPy dtype and shape,
tuple vs list, int vs float, GraphInstance), for transcripts."""

import math
from typing import Any, Optional

import numpy as np
from unienv_interface.space.spaces.graph import GraphInstance

GRAPH_FIELDS = ("n_nodes", "n_edges", "nodes_features", "edges_features", "edges")


def difference(a: Any, b: Any, path: str = "$") -> Optional[str]:
    """The first difference between `a` and `b`, or None when they are the same."""
    if isinstance(a, GraphInstance) or isinstance(b, GraphInstance):
        if type(a) is not type(b):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        for f in GRAPH_FIELDS:
            d = difference(getattr(a, f), getattr(b, f), f"{path}.{f}")
            if d:
                return d
        return None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        if a.dtype.str != b.dtype.str or a.shape != b.shape:
            return f"{path}: array {a.dtype.str}{a.shape} vs {b.dtype.str}{b.shape}"
        if a.flags.writeable != b.flags.writeable:
            return f"{path}: writeable {a.flags.writeable} vs {b.flags.writeable}"
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a.flat, b.flat)):
                d = difference(x, y, f"{path}[{i}]")
                if d:
                    return d
            return None
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            return f"{path}: array values {a!r} vs {b!r}"
        return None
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {a!r} vs {type(b).__name__} {b!r}"
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return f"{path}: keys {list(a.keys())} vs {list(b.keys())}"
        for k in a:
            d = difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return None
    if a != b:
        return f"{path}: {a!r} vs {b!r}"
    return None


def assert_same_transcripts(got, want, what: str) -> None:
    """Transcripts are lists of (name, outcome...) tuples."""
    names_got = [g[0] for g in got]
    names_want = [w[0] for w in want]
    assert names_got == names_want, f"{what}: different steps"
    failures = [d for g, w in zip(got, want) if (d := difference(g, w, g[0]))]
    assert not failures, f"{what}:\n  " + "\n  ".join(f[:1500] for f in failures)
