"""Times the reference codec (unienv 0.0.1b14) on the messages of benches/codec.rs.

    .venv-ref/bin/python benches/ref_codec.py [FRAMES_DIR]

With FRAMES_DIR (where benches/codec.rs writes its messages), first checks
that the Rust benchmark encodes exactly the same messages.

Prints one line per measurement, "<op> <message> <min us> <median us>" (per
operation, over 15 timeit repeats of the autorange loop count), plus
"message <name> <bytes> bytes" for each message.
"""

from __future__ import annotations

import os
import statistics
import sys
import timeit

import numpy as np
from unienv_interface.remote.codec import Codec


def state(rows=None) -> np.ndarray:
    n = (rows or 1) * 32
    values = (np.arange(n) % 97).astype(np.float32) * np.float32(0.125) - np.float32(6.0)
    return values if rows is None else values.reshape(rows, 32)


def image(batch=None) -> np.ndarray:
    n = (batch or 1) * 84 * 84 * 3
    values = (np.arange(n, dtype=np.int64) * 7 % 251).astype(np.uint8)
    return values.reshape(((batch,) if batch else ()) + (84, 84, 3))


def step_response(observation):
    info = {"TimeLimit.truncated": False, "episode_step": 17}
    step = (observation, 0.5, False, False, info)
    return {
        "version": 1,
        "type": "response",
        "session_id": "5f0c6a0e2b7d4e4f9d3c1a2b3c4d5e6f",
        "request_id": "r-000042",
        "resource_id": "env",
        "operation_id": "op-000042",
        "result": {"value": step, "descriptors": []},
    }


def messages():
    return [
        ("state", step_response({"state": state()})),
        ("image", step_response({"image": image(), "state": state()})),
        ("batch", step_response({"image": image(64), "state": state(64)})),
    ]


def per_op_us(fn):
    """(minimum, median) microseconds per call over 15 repeats."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    runs = sorted(t / number * 1e6 for t in timer.repeat(repeat=15, number=number))
    return runs[0], statistics.median(runs)


def main() -> int:
    codec = Codec()
    frames_dir = sys.argv[1] if len(sys.argv) > 1 else None
    for name, value in messages():
        frame = codec.encode(value)
        if frames_dir:
            with open(os.path.join(frames_dir, name + ".bin"), "rb") as f:
                if f.read() != frame:
                    print(f"benches/codec.rs builds a different {name} message", file=sys.stderr)
                    return 1
        print(f"message {name} {len(frame)} bytes", flush=True)
        for op, fn in (("encode", lambda: codec.encode(value)), ("decode", lambda: codec.decode(frame))):
            low, median = per_op_us(fn)
            print(f"{op} {name} {low:.3f} {median:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
