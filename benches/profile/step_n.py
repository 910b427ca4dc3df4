"""Connects to URL, resets the env ENV_ID and steps it N times with a zero
action of its action space (our `unienv_remote` client, which takes ws:// and
ws+unix:// URLs). Used by `profile_step.sh` to drive a server under callgrind.

  python step_n.py URL ENV_ID N
"""
import sys

import numpy as np

from unienv_remote import RemoteClient

url, env_id, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = RemoteClient(url, timeout=600.0)
env = client.env(env_id)
space = env.action_space
action = np.zeros(space.shape, dtype=space.dtype)
env.reset(seed=0)
for _ in range(n):
    env.step(action)
client.close()
