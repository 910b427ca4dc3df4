"""An experiment (measured, not kept): the learner steps a share of the envs
itself while one server process steps the rest.

16 envs, interleaved rounds of 2 s each, env steps per second against one
``SyncVectorEnv(16)`` in the same rounds:

* ``sync16``: ``SyncVectorEnv(16)`` in this process;
* ``process``: ``ProcessVectorEnv(16)`` with its defaults (2 servers of
  ``BatchedEnv(8)``, pinned, Unix sockets);
* ``share L``: ``SyncVectorEnv(L)`` in this process and ``ProcessVectorEnv
  (16 - L, servers=1)``: each vector step sends the server its actions
  (``step_async``), steps the learner's L envs, then waits for the server's
  (``step_wait``): the learner computes while the server does.

    .venv-ref/bin/python benches/profile/learner_share.py [Pendulum-v1|HalfCheetah-v5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import gymnasium
import numpy as np
from gymnasium.vector import SyncVectorEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from unienv_remote import ProcessVectorEnv  # noqa: E402

N = 16
Step = Callable[[np.ndarray], Any]


def measure(step: Step, reset: Callable[[], Any], actions: np.ndarray, seconds: float) -> float:
    reset()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step(actions)
        steps += 1
    return steps * N / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sim", nargs="?", default="Pendulum-v1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--shares", default="6,8,10")
    args = parser.parse_args()

    def make() -> gymnasium.Env[Any, Any]:
        return gymnasium.make(args.sim)

    space = make().action_space
    actions = np.stack([space.sample() for _ in range(N)])
    closers: List[Any] = []
    configs: Dict[str, Tuple[Step, Callable[[], Any]]] = {}
    sync = SyncVectorEnv([make] * N)
    configs["sync16"] = (sync.step, lambda: sync.reset(seed=0))
    process = ProcessVectorEnv([make] * N)
    closers.append(process)
    configs["process"] = (process.step, lambda: process.reset(seed=0))
    for share in (int(s) for s in args.shares.split(",")):
        local = SyncVectorEnv([make] * share)
        remote = ProcessVectorEnv([make] * (N - share), servers=1)
        closers.append(remote)

        def step(a: np.ndarray, local: Any = local, remote: Any = remote, share: int = share) -> Any:
            remote.step_async(a[share:])
            mine = local.step(a[:share])
            theirs = remote.step_wait()
            return np.concatenate([mine[0], theirs[0]])

        def reset(local: Any = local, remote: Any = remote, share: int = share) -> None:
            local.reset(seed=0)
            remote.reset(seed=share)

        configs[f"share {share}"] = (step, reset)
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()), f"({args.sim})")
    rates: Dict[str, List[float]] = {name: [] for name in configs}
    try:
        for _ in range(args.rounds):
            for name, (step, reset) in configs.items():
                rates[name].append(measure(step, reset, actions, args.seconds))
    finally:
        for env in closers:
            env.close()
    base = statistics.median(rates["sync16"])
    for name, r in rates.items():
        median = statistics.median(r)
        print(f"{name:10s} {median:9,.0f} env-steps/s  {median / base:.2f}x sync16  rounds {[round(x) for x in r]}")
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
