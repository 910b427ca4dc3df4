"""What a sleep between batches costs the next batch's simulator steps, in
one process, no messages: 8 Gymnasium envs stepped in turn (a batch, as a
server's ``BatchedEnv(8)`` steps them), then a gap before the next batch:
none, a sleep (the thread blocks and its vCPU may halt, as a server's domain
thread waits for its next request), or a spin of the same length (the thread
stays on its vCPU). Prints the simulator's wall time per step inside the
batches (the gap left out), medians of interleaved rounds, pinned to one vCPU.

    .venv-ref/bin/python benches/profile/sleep_cost.py [Pendulum-v1] [--gaps 100,300,1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Dict, List

import gymnasium
import numpy as np


def batches(envs: List[gymnasium.Env], action: np.ndarray, gap: float, how: str, seconds: float) -> float:
    """Seconds per env step inside the batches."""
    busy, steps, start = 0.0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        t = time.perf_counter()
        for env in envs:
            env.step(action)
        busy += time.perf_counter() - t
        steps += len(envs)
        if how == "sleep":
            time.sleep(gap)
        elif how == "spin":
            end = time.perf_counter() + gap
            while time.perf_counter() < end:
                pass
    return busy / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sim", nargs="?", default="Pendulum-v1")
    parser.add_argument("--gaps", default="100,300,1000", help="gaps in µs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--cpu", type=int, default=None, help="the vCPU to pin to (default: the last one)")
    args = parser.parse_args()
    cpu = args.cpu if args.cpu is not None else sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {cpu})
    envs = [gymnasium.make(args.sim) for _ in range(8)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    action = np.zeros(envs[0].action_space.shape, dtype=np.float32)
    settings = [("none", 0.0)] + [(how, int(g) * 1e-6) for g in args.gaps.split(",") for how in ("sleep", "spin")]
    results: Dict[str, List[float]] = {}
    batches(envs, action, 0.0, "none", 0.5)  # warm-up
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()), f"({args.sim}, vCPU {cpu})")
    for _ in range(args.rounds):
        for how, gap in settings:
            name = "no gap" if how == "none" else f"{how} {gap * 1e6:.0f} µs"
            results.setdefault(name, []).append(batches(envs, action, gap, how, args.seconds))
    base = statistics.median(results["no gap"])
    for name, r in results.items():
        median = statistics.median(r)
        print(f"{name:16s} {median * 1e6:7.2f} µs per step  {median / base:.2f}x  rounds {[round(x * 1e6, 1) for x in r]}")
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
