"""The learner's side of throughput (BENCHMARKS.md, "Vector envs and
throughput"): CPU per env step of the
process that drives ``RemoteVectorEnv`` (not the servers'), and the
stragglers' asynchronous ``recv`` against lockstep ``step``; and the batched
fleet driven EnvPool's way (``pendulum-recv``: ``batch_size=8``, one server's
batch per ``recv``); and the HalfCheetah fleets (``cheetah-batched``,
``cheetah-single``), whose steps return infos.

    .venv-ref/bin/python benches/profile/learner_side.py [--seconds 2] [--rounds 3] [--only NAME,...]
    .venv-ref/bin/python benches/profile/learner_side.py --profile NAME   # cProfile of one configuration

Servers are ``benches/throughput.py --serve`` processes (2 of them, our
Python ``RemoteServer``), the same resources as that script. Per
configuration and round: env steps per second, the learner process's CPU
(user + system, ``time.process_time``) per env step, the servers' CPU per env
step, and per vector call the learner's wall time outside ``step``/``recv``.
Configurations run round-robin (interleaved), the median of the rounds shown.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from throughput import N, STRAGGLERS, Measured, ServerProcess, lockstep, send_recv  # noqa: E402


class Config:
    def __init__(self, make: Callable[[], Any], run: Callable[[Any, float], Measured],
                 servers: List[ServerProcess]) -> None:
        self.make, self.run_fn, self.servers = make, run, servers
        self.obj: Any = None
        self.rates: List[float] = []
        self.learner_us: List[float] = []
        self.server_us: List[float] = []

    def run(self, seconds: float) -> None:
        if self.obj is None:
            self.obj = self.make()
            self.run_fn(self.obj, 0.3)
        before = sum(s.cpu_seconds() for s in self.servers)
        start, cpu = time.perf_counter(), time.process_time()
        steps, _ = self.run_fn(self.obj, seconds)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        used = sum(s.cpu_seconds() for s in self.servers) - before
        self.rates.append(steps / elapsed)
        self.learner_us.append(1e6 * cpu / steps)
        self.server_us.append(1e6 * used / steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="")
    parser.add_argument("--profile", default="")
    args = parser.parse_args()

    from unienv_remote import RemoteVectorEnv

    load_before = os.getloadavg()
    servers = [ServerProcess(0), ServerProcess(1)]
    urls = [s.url for s in servers]
    single = [(urls[j % 2], f"pendulum{j // 2}") for j in range(N)]
    batched = [(u, "pendulum_batch") for u in urls]
    batched_recv = [(u, "pendulum_batch_recv") for u in urls]  # one controller per resource
    stragglers = [(urls[j % 2], f"straggler{j // 2}") for j in range(STRAGGLERS)]
    stragglers_recv = [(urls[j % 2], f"straggler{STRAGGLERS // 2 + j // 2}") for j in range(STRAGGLERS)]
    configs: Dict[str, Config] = {
        "pendulum-batched": Config(lambda: RemoteVectorEnv(batched), lockstep, servers),
        "pendulum-single": Config(lambda: RemoteVectorEnv(single), lockstep, servers),
        "stragglers-step": Config(lambda: RemoteVectorEnv(stragglers), lockstep, servers),
        "stragglers-recv": Config(lambda: RemoteVectorEnv(stragglers_recv, batch_size=16), send_recv, servers),
        "pendulum-recv": Config(lambda: RemoteVectorEnv(batched_recv, batch_size=8), send_recv, servers),
        # HalfCheetah's sub-envs return an info dict each (4 floats): the
        # learner gathers them into Gymnasium's per-key arrays and masks.
        "cheetah-batched": Config(lambda: RemoteVectorEnv([(u, "cheetah_batch") for u in urls]), lockstep, servers),
        "cheetah-single": Config(lambda: RemoteVectorEnv([(urls[j % 2], f"cheetah{j // 2}") for j in range(N)]),
                                 lockstep, servers),
    }
    if args.only:
        configs = {k: v for k, v in configs.items() if k in args.only.split(",")}
    try:
        if args.profile:
            c = configs[args.profile]
            c.obj = c.make()
            c.run_fn(c.obj, 0.3)
            profile = cProfile.Profile()
            profile.enable()
            steps, _ = c.run_fn(c.obj, args.seconds)
            profile.disable()
            print(f"{steps} env steps")
            pstats.Stats(profile).sort_stats("tottime").print_stats(18)
            return
        for r in range(args.rounds):
            for name, c in configs.items():
                c.run(args.seconds)
                print(f"round {r}: {name}: {c.rates[-1]:,.0f} env-steps/s, learner {c.learner_us[-1]:.1f} µs, "
                      f"servers {c.server_us[-1]:.1f} µs per env step", file=sys.stderr, flush=True)
    finally:
        for c in configs.values():
            if c.obj is not None:
                c.obj.close()
        for s in servers:
            s.stop()
    load_after = os.getloadavg()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}; after: "
          f"{' '.join(f'{x:.2f}' for x in load_after)}; {os.cpu_count()} cores; median of {args.rounds} "
          f"interleaved rounds of {args.seconds} s")
    print()
    print("| configuration | env-steps/s | learner CPU µs/env-step | servers CPU µs/env-step |")
    print("|---|---:|---:|---:|")
    for name, c in configs.items():
        print(f"| {name} | {statistics.median(c.rates):,.0f} ({max(c.rates):,.0f}) | "
              f"{statistics.median(c.learner_us):.1f} | {statistics.median(c.server_us):.1f} |")
    if "stragglers-step" in configs and "stragglers-recv" in configs:
        a, b = configs["stragglers-step"], configs["stragglers-recv"]
        print(f"\nstragglers recv/step: {statistics.median(b.rates) / statistics.median(a.rates):.2f}x")


if __name__ == "__main__":
    main()
