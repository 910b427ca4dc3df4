"""Step round trips of the reference Python client against a server hosting
the fixture registry's bench envs. Prints one JSON line per env:
{"env", "median_us", "p99_us", "steps_per_s", "n", "client_cpu_us"}, the
last being this process's CPU time (all its threads) per step: what the
reference client itself costs, whatever the server.

  python ref_roundtrip.py URL SECONDS
"""
import json
import sys
import time

import numpy as np
from unienv_interface.remote import RemoteClient

url, seconds = sys.argv[1], float(sys.argv[2])
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
