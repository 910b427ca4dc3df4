"""The simulator's own cost: N steps of `FromGymnasiumEnv(Pendulum-v1)` in
this process, with the same zero action as `step_n.py`, between two
callgrind dumps (`CALLGRIND_PID` names this process to callgrind_control,
when run under it): `profile_step.sh` subtracts it from the hosted cost.

  python pendulum_local.py N
"""
import sys

import gymnasium
import numpy as np
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

n = int(sys.argv[1])
env = FromGymnasiumEnv(gymnasium.make("Pendulum-v1"))
action = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
env.reset(seed=0)
for _ in range(n):
    env.step(action)
