"""What recording costs: 16 Pendulum-v1 envs over 2 server processes (our Python
``unienv_remote.RemoteServer``, 8 envs each), driven in lockstep by
``RemoteVectorEnv``, with and without ``RemoteServer(record_dir=...)``.

    .venv-ref/bin/python benches/record_cost.py [--steps 1500] [--rounds 3] [--dir DIR]

Runs alternate (plain, recording, plain, recording, ...) so that both see the
same machine load; each run starts fresh servers, resets, takes 50 warm-up
steps, then times ``--steps`` vector steps of random actions drawn beforehand.
Pendulum truncates every 200 steps, so episodes end (and are committed) during
the run. Prints env steps per second of each run, the median of each mode, and
their ratio; the recordings are checked to hold every transition.
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

import numpy as np

N, SERVERS = 16, 2
URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")


def serve(count: int, record: Optional[str]) -> None:
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    from unienv_remote import RemoteServer

    server = RemoteServer(idle_timeout=None, record_dir=record)
    for i in range(count):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    print(server.listen("127.0.0.1", 0), flush=True)
    try:
        sys.stdin.read()  # until the benchmark closes our stdin
    finally:
        server.close()


def start(record: Optional[Path]) -> List[subprocess.Popen]:
    procs = []
    for s in range(SERVERS):
        cmd = [sys.executable, __file__, "--serve", str(N // SERVERS)]
        if record is not None:
            cmd += ["--record", str(record / f"server{s}")]
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    return procs


def url_of(proc: subprocess.Popen) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        m = URL.search(line)
        if m:
            return m.group(1)
    raise RuntimeError("a server printed no URL")


def run(steps: int, record: Optional[Path]) -> float:
    from unienv_remote import RemoteVectorEnv

    procs = start(record)
    try:
        urls = [url_of(p) for p in procs]
        addresses = [(urls[j % SERVERS], f"pendulum{j // SERVERS}") for j in range(N)]
        envs = RemoteVectorEnv(addresses)
        acts = np.random.default_rng(0).uniform(-2, 2, size=(steps + 50, N, 1)).astype(np.float32)
        envs.reset(seed=0)
        for a in acts[:50]:
            envs.step(a)
        begin = time.perf_counter()
        for a in acts[50:]:
            envs.step(a)
        rate = steps * N / (time.perf_counter() - begin)
        envs.close()
    finally:
        for p in procs:
            assert p.stdin is not None
            p.stdin.close()  # a clean stop: close() commits the open episodes
            p.wait(timeout=60)
    return rate


def recorded_transitions(record: Path) -> int:
    total = 0
    for meta in record.glob("server*/*/metadata.json"):
        total += json.loads(meta.read_text())["count"]
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", type=int)
    parser.add_argument("--record")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", help="where recordings go (default: the system's temporary directory)")
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.record)
        return
    plain, recording = [], []
    for r in range(args.rounds):
        plain.append(run(args.steps, None))
        record = Path(tempfile.mkdtemp(prefix="uvr-record-bench-", dir=args.dir))
        try:
            recording.append(run(args.steps, record))
            # Every step of every env (warm-up included), committed at close();
            # Pendulum truncates after 200 steps, and the vector env's next
            # step of that env is its autoreset (a reset, no transition).
            total = args.steps + 50
            expected = (total - total // 201) * N
            assert recorded_transitions(record) == expected, (recorded_transitions(record), expected)
        finally:
            shutil.rmtree(record)
        print(f"round {r + 1}: plain {plain[-1]:,.0f} steps/s, recording {recording[-1]:,.0f} steps/s", flush=True)
    p, q = float(np.median(plain)), float(np.median(recording))
    print("| mode | env steps/s (median of %d) |" % args.rounds)
    print("|---|---|")
    print(f"| plain | {p:,.0f} |")
    print(f"| recording every transition | {q:,.0f} |")
    print(f"| ratio recording / plain | {q / p:.3f} |")


if __name__ == "__main__":
    main()
