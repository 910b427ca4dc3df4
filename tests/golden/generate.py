#!/usr/bin/env python3
"""Writes the golden envelopes tests/golden/<case>.bin with the reference codec.

Regenerate (only needed when a case in tests/py/golden_cases.py changes; the
files are checked in so that tests/codec/golden.rs runs without Python):

    ./scripts/test.sh --test codec golden::      # once, to set up .venv-ref
    .venv-ref/bin/python tests/golden/generate.py

(or any interpreter with `unienv==0.0.1b14` installed, e.g.
UNIENV_REF_PYTHON). The script writes one file per case with
`unienv_interface.remote.codec.Codec().encode`, removes .bin files of cases
that no longer exist, and prints each file's size and SHA-256. Then update the
Rust twin of every changed case (`golden_cases()` in tests/codec/golden.rs),
run `cargo test --test codec golden::`, and commit the .bin files.
"""

from __future__ import annotations

import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "py"))

from golden_cases import CASES  # noqa: E402
from unienv_interface.remote.codec import Codec  # noqa: E402


def main() -> None:
    codec = Codec()
    wanted = set()
    for name, build in CASES.items():
        data = codec.encode(build())
        # The reference must read back what it wrote.
        codec.decode(data)
        path = os.path.join(HERE, name + ".bin")
        wanted.add(name + ".bin")
        with open(path, "wb") as f:
            f.write(data)
        print(f"{name + '.bin':24} {len(data):8} bytes  sha256 {hashlib.sha256(data).hexdigest()[:16]}")
    for stale in sorted(set(f for f in os.listdir(HERE) if f.endswith(".bin")) - wanted):
        os.remove(os.path.join(HERE, stale))
        print(f"removed stale {stale}")


if __name__ == "__main__":
    main()
