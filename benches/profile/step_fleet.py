"""Connects a `RemoteVectorEnv` to the 8 single envs `pendulum0` ..
`pendulum7` at URL (`pendulum_server.py ... fleet`), resets them and makes N
lockstep vector steps (8 requests each, sent together: what one server
process of `benches/throughput.py`'s "16 single" configuration receives).
Used by `wakeups.sh fleet` and `profile_step.sh fleet`.

  python step_fleet.py URL N
"""
import sys

import numpy as np

from unienv_remote import RemoteVectorEnv

url, n = sys.argv[1], int(sys.argv[2])
envs = RemoteVectorEnv([(url, f"pendulum{i}") for i in range(8)], timeout=600.0)
actions = np.random.default_rng(0).uniform(-1, 1, size=(64, 8, 1)).astype(np.float32)
envs.reset(seed=0)
for i in range(n):
    envs.step(actions[i % 64])
envs.close()
