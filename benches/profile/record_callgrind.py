"""What the learner-side recorder costs per transition, in instructions
(load-proof): drives ``_native.Recorder`` as ``RemoteVectorEnv`` does (16
Pendulum-shaped sub-envs, NEXT_STEP autoresets, episodes of 200 steps, the
observations and actions drawn beforehand), then closes it (every episode
committed). Run it under callgrind twice, with two step counts, and divide
the difference of the instruction counts by the difference of transitions:
what is left is the per-transition cost of the hook (``reset``/``sent``/
``stepped``), the queue, and the writer thread (rows, Parquet or NPZ files,
commits); the set-up (interpreter, buffers' creation) cancels out.

    valgrind --tool=callgrind --callgrind-out-file=cg.%p .venv-ref/bin/python benches/profile/record_callgrind.py \\
        --steps 50 --dir /dev/shm/rec --format parquet
    (the same with --steps 450), then callgrind_annotate each: (Ir(450) - Ir(50)) / (16 * 400 - ...)

The script prints the transitions it recorded (16 per step but for the
autoreset steps) for the division.
"""

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

from unienv_remote import _native, _record

N, EPISODE = 16, 200
OBSERVATION = {"type": "BoxSpace", "shape": (3,), "low": [-1.0, -1.0, -8.0], "high": [1.0, 1.0, 8.0],
               "dtype": "float32"}
ACTION = {"type": "BoxSpace", "shape": (1,), "low": [-2.0], "high": [2.0], "dtype": "float32"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--format", choices=_record.RECORD_FORMATS, default="parquet")
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    rng = np.random.default_rng(0)
    observations = rng.uniform(-1, 1, size=(args.steps + 1, N, 3)).astype(np.float32)
    actions = rng.uniform(-2, 2, size=(args.steps, N, 1)).astype(np.float32)
    rewards = rng.uniform(-16, 0, size=(args.steps, N))
    ids = np.arange(N, dtype=np.int64)
    no = np.zeros(N, dtype=bool)
    recorder = _native.Recorder(str(args.dir), OBSERVATION, ACTION, N,
                                _record.native_format(args.format))
    recorder.reset(observations[0], np.ones(N, dtype=bool), [])
    transitions, since_reset = 0, 0
    for t in range(args.steps):
        autoreset = since_reset == EPISODE
        truncated = np.full(N, since_reset == EPISODE - 1)
        recorder.sent(actions[t])
        native = (observations[t + 1], rewards[t], no, truncated, {}, np.full(N, autoreset), [], [], ids)
        recorder.stepped(native)
        if autoreset:
            since_reset = 0
        else:
            since_reset += 1
            transitions += N
    recorder.close()
    stats = recorder.stats()
    assert stats["transitions"] == transitions and stats["errors"] == 0, stats
    print(f"transitions {transitions} episodes {stats['episodes']}", file=sys.stderr)


if __name__ == "__main__":
    main()
