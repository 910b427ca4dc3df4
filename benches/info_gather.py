"""A vector step's infos gathered by Gymnasium's ``_add_info`` env by env
against ``unienv_remote.vector._gather_infos`` (a column at a time, in
Python: the path for infos the extension does not gather itself), on the
infos a real fleet returns: 2 ``BatchedEnv(8)`` of HalfCheetah-v5 hosted by
an in-process ``RemoteServer`` (three floats and a float32 0-d array per
sub-env, as the extension's per-env dicts carried them), and a 16-env fleet
where half the envs report nothing.

    .venv-ref/bin/python benches/info_gather.py [--rounds 5]

Prints µs per vector step for each, medians of interleaved rounds, with the
load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import timeit
from typing import Any, Dict, List

import gymnasium
import numpy as np

from unienv_remote import BatchedEnv, RemoteServer, RemoteVectorEnv
from unienv_remote.vector import _gather_infos, _InfoBuilder


def add_info_loop(builder: _InfoBuilder, env_infos: List[Dict[str, Any]]) -> Dict[str, Any]:
    infos: Dict[str, Any] = {}
    for i, info in enumerate(env_infos):
        if info:
            infos = builder._add_info(infos, info, i)
    return infos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server = RemoteServer(idle_timeout=None)
    for k in range(2):
        server.register(f"b{k}", BatchedEnv([lambda: gymnasium.make("HalfCheetah-v5")] * 8))
    url = server.listen("127.0.0.1", 0)
    envs = RemoteVectorEnv([(url, "b0"), (url, "b1")])
    try:
        envs.reset(seed=0)
        envs._native.step_async(np.zeros((16, 6), np.float32))
        gathered = envs._native.step_wait().infos
    finally:
        envs.close()
        server.close()
    # The extension now returns these infos gathered (python/src/vector_infos.rs);
    # the per-env dicts it used to return, taken back out of the columns:
    keys = [k for k in gathered if not k.startswith("_")]
    infos = [{k: (gathered[k][i].item() if gathered[k].dtype == np.float64 else np.array(gathered[k][i]))
              for k in keys} for i in range(16)]
    half = [info if i % 2 else {} for i, info in enumerate(infos)]
    builder = _InfoBuilder(16)
    cases = {"16 HalfCheetah infos": infos, "8 of 16": half}
    load = os.getloadavg()
    times: Dict[str, List[float]] = {f"{c}: {f}": [] for c in cases for f in ("_add_info", "_gather_infos")}
    for _ in range(args.rounds):
        for case, data in cases.items():
            for name, fn in (("_add_info", add_info_loop), ("_gather_infos", _gather_infos)):
                n = 3000
                t = timeit.timeit(lambda: fn(builder, data), number=n)
                times[f"{case}: {name}"].append(t / n * 1e6)
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; median of {args.rounds} interleaved rounds")
    print("| infos | `_add_info` env by env, µs | `_gather_infos`, µs | ratio |")
    print("|---|---:|---:|---:|")
    for case in cases:
        a = statistics.median(times[f"{case}: _add_info"])
        g = statistics.median(times[f"{case}: _gather_infos"])
        print(f"| {case} | {a:.1f} | {g:.1f} | {g / a:.2f}x |")


if __name__ == "__main__":
    main()
