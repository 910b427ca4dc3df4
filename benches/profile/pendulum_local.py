"""The simulator's own cost: N steps in this process, with the same zero
action as `step_n.py`, between two callgrind dumps (`CALLGRIND_PID` names
this process to callgrind_control, when run under it): `profile_step.sh`
subtracts it from the hosted cost. `single` (the default) steps one
`FromGymnasiumEnv(Pendulum-v1)`; `batched` steps 8 `gymnasium.make
("Pendulum-v1")` in turn per step (what a `BatchedEnv` of 8 hosts; its own
Python overhead is counted as the host's); `bare` steps one
`gymnasium.make("Pendulum-v1")` without unienv's wrapper (what the host's
fast path for a `FromGymnasiumEnv` calls; for comparison, run by hand:
`valgrind --tool=callgrind python pendulum_local.py N bare` for two N).

  python pendulum_local.py N [single|batched|bare]
"""
import sys

import gymnasium
import numpy as np
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

n = int(sys.argv[1])
kind = sys.argv[2] if len(sys.argv) > 2 else "single"
if kind == "batched":
    envs = [gymnasium.make("Pendulum-v1") for _ in range(8)]
    action = np.zeros((1,), dtype=np.float32)
    for i, e in enumerate(envs):
        e.reset(seed=i)
    for _ in range(n):
        for e in envs:
            e.step(action)
elif kind == "bare":
    env = gymnasium.make("Pendulum-v1")
    action = np.zeros((1,), dtype=np.float32)
    env.reset(seed=0)
    for _ in range(n):
        env.step(action)
else:
    env = FromGymnasiumEnv(gymnasium.make("Pendulum-v1"))
    action = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
    env.reset(seed=0)
    for _ in range(n):
        env.step(action)
