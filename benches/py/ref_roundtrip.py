"""Step round trips of a Python client against a server hosting the fixture
registry's bench envs. Prints one JSON line per env:
{"env", "median_us", "p99_us", "steps_per_s", "n", "client_cpu_us"}, the
last being this process's CPU time (all its threads) per step: what the
client itself costs, whatever the server.

  python ref_roundtrip.py URL SECONDS [CLIENT_MODULE]

CLIENT_MODULE is the module whose RemoteClient is measured: the reference
`unienv_interface.remote` (default) or our `unienv_remote`.
"""
import importlib
import json
import sys
import time

import numpy as np

url, seconds = sys.argv[1], float(sys.argv[2])
module = sys.argv[3] if len(sys.argv) > 3 else "unienv_interface.remote"
RemoteClient = importlib.import_module(module).RemoteClient
client = RemoteClient.connect(url)
for env_id, action in (
    ("bench_state", np.zeros(4, np.float32)),
    ("bench_image", np.zeros(4, np.float32)),
    ("bench_batch64", np.zeros((64, 4), np.float32)),
):
    env = client.env(env_id)
    env.reset()
    warm_end = time.perf_counter() + min(0.5, seconds / 4)
    while time.perf_counter() < warm_end:
        env.step(action)
    times = []
    cpu_start = time.process_time()
    start = time.perf_counter()
    end = start + seconds
    while True:
        t0 = time.perf_counter()
        env.step(action)
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if t1 >= end and len(times) >= 20:
            break
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    times.sort()
    print(json.dumps({
        "env": env_id,
        "median_us": times[len(times) // 2] * 1e6,
        "p99_us": times[min(len(times) - 1, int(len(times) * 0.99))] * 1e6,
        "steps_per_s": len(times) / elapsed,
        "n": len(times),
        "client_cpu_us": cpu / len(times) * 1e6,
    }), flush=True)
    client.release(env_id)
client.close()
