"""Deep comparison of decoded values with their exact types (NumPy dtype and
shape, tuple vs list, int vs float, GraphInstance), shared by every check
that compares two runs: the transcripts of python/tests (our client vs the
reference's), ``tests/py/compare_fixtures.py`` (our server vs the
reference's) and ``tests/py/golden_check.py`` (our encoder vs the
reference's decoder, with ``exact_bits``)."""

import math
from typing import Any, Optional

import numpy as np
from unienv_interface.space.spaces.graph import GraphInstance

GRAPH_FIELDS = ("n_nodes", "n_edges", "nodes_features", "edges_features", "edges")


def difference(a: Any, b: Any, path: str = "$", *, exact_bits: bool = False, writeable: bool = True) -> Optional[str]:
    """The first difference between `a` and `b`, or None when they are the same.

    Any NaN matches any NaN. With `exact_bits`, a float's sign counts too
    (-0.0 differs from 0.0) and arrays compare by their raw bytes; with
    `writeable`, arrays must agree on whether they are writeable."""

    def sub(x: Any, y: Any, where: str) -> Optional[str]:
        return difference(x, y, where, exact_bits=exact_bits, writeable=writeable)

    if isinstance(a, GraphInstance) or isinstance(b, GraphInstance):
        if type(a) is not type(b):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        for f in GRAPH_FIELDS:
            d = sub(getattr(a, f), getattr(b, f), f"{path}.{f}")
            if d:
                return d
        return None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        if a.dtype.str != b.dtype.str or a.shape != b.shape:
            return f"{path}: array {a.dtype.str}{a.shape} vs {b.dtype.str}{b.shape}"
        if writeable and a.flags.writeable != b.flags.writeable:
            return f"{path}: writeable {a.flags.writeable} vs {b.flags.writeable}"
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a.flat, b.flat)):
                d = sub(x, y, f"{path}[{i}]")
                if d:
                    return d
            return None
        if exact_bits:
            same = a.tobytes() == b.tobytes()
        else:
            same = np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        return None if same else f"{path}: array values {a!r} vs {b!r}"
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {a!r} vs {type(b).__name__} {b!r}"
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return f"{path}: keys {list(a.keys())} vs {list(b.keys())}"
        for k in a:
            d = sub(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = sub(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, float):
        if math.isnan(a) and math.isnan(b):
            return None
        if a == b and (not exact_bits or math.copysign(1.0, a) == math.copysign(1.0, b)):
            return None
        return f"{path}: {a!r} vs {b!r}"
    if a != b:
        return f"{path}: {a!r} vs {b!r}"
    return None


def transcript_differences(got, want) -> list:
    """Every difference between two transcripts (lists of (name, outcome...)
    tuples): a different list of steps, then each step that differs."""
    names_got = [g[0] for g in got]
    names_want = [w[0] for w in want]
    if names_got != names_want:
        return [f"different steps: {names_got} vs {names_want}"]
    return [d for g, w in zip(got, want) if (d := difference(g, w, g[0]))]


def assert_same_transcripts(got, want, what: str) -> None:
    """Transcripts are lists of (name, outcome...) tuples."""
    failures = transcript_differences(got, want)
    assert not failures, f"{what}:\n  " + "\n  ".join(f[:1500] for f in failures)
