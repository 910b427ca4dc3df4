"""Rust → Python golden check (run by tests/codec/golden.rs).

    golden_check.py check DIR   decode every DIR/<case>.bin (written by the Rust
                                encoder) with the reference Codec().decode,
                                compare with the value golden_cases.py builds,
                                and re-encode it with the reference expecting
                                the very same bytes; prints "ok <case>" per case
                                and exits 1 listing every mismatch.
    golden_check.py write DIR   write the reference encoding of the stress
                                cases into DIR, for the Rust side to decode.
"""

from __future__ import annotations

import os
import sys
from typing import Any, List, Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests"))

from compare import GRAPH_FIELDS, difference  # noqa: E402
from golden_cases import CASES, stress_cases  # noqa: E402
from unienv_interface.remote.codec import Codec  # noqa: E402
from unienv_interface.space.spaces.graph import GraphInstance  # noqa: E402


def diff(expected: Any, actual: Any) -> Optional[str]:
    """Where two decoded values differ, or None. Strict: exact Python types
    (tuple vs list, bool vs int vs float), float bits (any NaN matches any
    NaN, -0.0 differs from 0.0), NumPy dtype including byte order, shape and
    raw bytes, GraphInstance fields, object array elements."""
    return difference(expected, actual, exact_bits=True, writeable=False)


def as_decoded(value: Any) -> Any:
    """What the reference decoder yields for a value it encodes: NumPy scalars
    become 0-d arrays (np.float64 is a float and stays one)."""
    if isinstance(value, np.generic) and not isinstance(value, float):
        return np.asarray(value)
    if isinstance(value, np.ndarray) and value.dtype != object:
        return value.copy(order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    if isinstance(value, np.ndarray):
        out = np.empty(value.shape, dtype=object)
        for i, item in enumerate(value.flat):
            out.flat[i] = as_decoded(item)
        return out
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return {k: as_decoded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(as_decoded(v) for v in value)
    if isinstance(value, GraphInstance):
        return GraphInstance(**{k: as_decoded(getattr(value, k)) for k in GRAPH_FIELDS})
    return value


def check(directory: str) -> int:
    codec = Codec()
    cases = dict(CASES)
    cases.update(stress_cases())
    failures: List[str] = []
    for name, build in cases.items():
        path = os.path.join(directory, name + ".bin")
        if not os.path.exists(path):
            failures.append(f"{name}: {path} is missing")
            continue
        with open(path, "rb") as f:
            data = f.read()
        try:
            decoded = codec.decode(data)
        except Exception as exc:  # report every case, not just the first
            failures.append(f"{name}: the reference failed to decode our envelope: {exc!r}")
            continue
        d = diff(as_decoded(build()), decoded)
        if d:
            failures.append(f"{name}: {d}")
            continue
        again = codec.encode(decoded)
        if again != data:
            n = int.from_bytes(data[:4], "big")
            m = int.from_bytes(again[:4], "big")
            ours, ref = data[4:4 + n].decode(), again[4:4 + m].decode()
            at = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
            failures.append(f"{name}: the reference re-encodes our envelope differently; headers differ at "
                            f"{at}:\n  ours:      {ours[max(0, at - 40):at + 40]}\n  reference: {ref[max(0, at - 40):at + 40]}")
            continue
        print(f"ok {name}")
    if failures:
        print("golden_check: MISMATCH\n" + "\n".join(failures), file=sys.stderr)
        return 1
    return 0


def write(directory: str) -> int:
    codec = Codec()
    for name, build in stress_cases().items():
        with open(os.path.join(directory, name + ".bin"), "wb") as f:
            f.write(codec.encode(build()))
    return 0


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "write"):
        print(__doc__, file=sys.stderr)
        return 2
    return check(sys.argv[2]) if sys.argv[1] == "check" else write(sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
