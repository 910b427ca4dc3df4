"""An experiment (measured, not kept): does keeping every vCPU from halting
help the remote configuration? One ``SCHED_IDLE`` spinner process per vCPU
(it runs only when nothing else wants the vCPU, so the vCPU never halts and
any woken thread preempts it at once), toggled between interleaved rounds:
``SyncVectorEnv(16)`` and ``ProcessVectorEnv(16)`` (its defaults), env steps
per second without and with the spinners.

    .venv-ref/bin/python benches/profile/idle_spinners.py [Pendulum-v1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import gymnasium
import numpy as np
from gymnasium.vector import SyncVectorEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from unienv_remote import ProcessVectorEnv  # noqa: E402

from learner_share import N, measure  # noqa: E402  (this folder: the script's own)

SPINNER = (
    "import os, sys\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
    "while True:\n"
    "    pass\n"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sim", nargs="?", default="Pendulum-v1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()

    def make() -> gymnasium.Env[Any, Any]:
        return gymnasium.make(args.sim)

    space = make().action_space
    actions = np.stack([space.sample() for _ in range(N)])
    envs = {"SyncVectorEnv(16)": SyncVectorEnv([make] * N), "ProcessVectorEnv(16)": ProcessVectorEnv([make] * N)}
    rates: Dict[Tuple[str, bool], List[float]] = {}
    print("load before:", " ".join(f"{x:.2f}" for x in os.getloadavg()), f"({args.sim})")
    try:
        for _ in range(args.rounds):
            for spin in (False, True):
                spinners = []
                if spin:
                    spinners = [subprocess.Popen([sys.executable, "-c", SPINNER, str(cpu)])
                                for cpu in sorted(os.sched_getaffinity(0))]
                    time.sleep(0.3)
                try:
                    for name, env in envs.items():
                        rates.setdefault((name, spin), []).append(measure(env.step, lambda env=env: env.reset(seed=0), actions, args.seconds))
                finally:
                    for p in spinners:
                        p.kill()
                        p.wait()
    finally:
        for env in envs.values():
            env.close()
    for (name, spin), r in rates.items():
        print(f"{name:22s} spinners {'on ' if spin else 'off'} {statistics.median(r):9,.0f} env-steps/s"
              f"  rounds {[round(x) for x in r]}")
    for spin in (False, True):
        ratio = statistics.median(rates[("ProcessVectorEnv(16)", spin)]) / statistics.median(
            rates[("SyncVectorEnv(16)", spin)])
        print(f"spinners {'on ' if spin else 'off'}: ProcessVectorEnv / SyncVectorEnv {ratio:.2f}x")
    print("load after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
