"""A single-env round trip through our Python client (``unienv_remote.RemoteClient``)
over ``ws://`` (loopback TCP) against ``ws+unix://``, both to ``unienv-remote serve
--fixtures`` (the release binary), alternating rounds.

    .venv-ref/bin/python benches/unix_python_client.py [--steps 3000] [--rounds 6] [--bin target/release/unienv-remote]

Per round and transport: µs per ``step`` of ``bench_state`` (a fresh connection
per round, a warm-up of 200 steps not counted) and the server process's CPU per
step (``/proc/PID/stat``). Prints the medians, the ratio unix / tcp (the
target: ≤ 0.8), and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from unienv_remote import RemoteClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import process_cpu  # noqa: E402

URL = re.compile(r"(ws(?:\+unix)?://\S+)")


def start(binary: str, args: List[str]) -> "tuple[subprocess.Popen[str], str]":
    process = subprocess.Popen([binary, "serve", "--fixtures", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        m = URL.search(line)
        if m:
            return process, m.group(1).rstrip(".,")
    raise RuntimeError(f"serve {args} printed no URL (exit {process.wait()})")


def cpu_seconds(pid: int) -> float:
    return sum(process_cpu(pid))


def steps(url: str, n: int, pid: int) -> "tuple[float, float]":
    client = RemoteClient(url, timeout=60.0)
    try:
        env = client.env("bench_state")
        action = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
        env.reset(seed=0)
        for _ in range(200):
            env.step(action)
        cpu0, t0 = cpu_seconds(pid), time.perf_counter()
        for _ in range(n):
            env.step(action)
        elapsed, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
    finally:
        client.close()
    return elapsed / n * 1e6, cpu / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--bin", default="target/release/unienv-remote")
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="unienv-unix-bench-") as tmp:
        tcp, tcp_url = start(args.bin, ["--addr", "127.0.0.1:0"])
        unix, unix_url = start(args.bin, ["--unix", os.path.join(tmp, "s.sock")])
        times: Dict[str, List[float]] = {"tcp": [], "unix": []}
        cpus: Dict[str, List[float]] = {"tcp": [], "unix": []}
        try:
            for r in range(args.rounds):
                order = [("tcp", tcp_url, tcp), ("unix", unix_url, unix)]
                for name, url, process in order if r % 2 == 0 else order[::-1]:
                    us, cpu = steps(url, args.steps, process.pid)
                    times[name].append(us)
                    cpus[name].append(cpu)
        finally:
            for p in (tcp, unix):
                p.terminate()
                p.wait(timeout=10)
    after = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: "
          f"{after[0]:.2f} {after[1]:.2f} {after[2]:.2f}; {args.rounds} alternating rounds of {args.steps} steps")
    print("| transport | µs per step (median) | rounds | server CPU µs per step |")
    print("|---|---:|---|---:|")
    for name in ("tcp", "unix"):
        print(f"| {name} | {statistics.median(times[name]):.1f} | {', '.join(f'{x:.1f}' for x in times[name])} "
              f"| {statistics.median(cpus[name]):.1f} |")
    ratios = [u / t for u, t in zip(times["unix"], times["tcp"])]
    print(f"unix / tcp: {statistics.median(times['unix']) / statistics.median(times['tcp']):.2f} "
          f"(per round: {', '.join(f'{x:.2f}' for x in ratios)}); target <= 0.8")


if __name__ == "__main__":
    main()
