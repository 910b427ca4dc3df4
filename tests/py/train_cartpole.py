"""The learning test: the reference client trains a linear CartPole policy
by random search against our server's `cartpole`, and compares it with a
random policy measured in the same run.

  python train_cartpole.py URL

Prints one line, `ok key=value ...`, with the figures; exits non-zero (an
AssertionError) when the trained policy is not far better than random.
Everything is seeded, so a run is reproducible.
"""
import sys
import time

import numpy as np
from unienv_interface.remote import RemoteClient

url = sys.argv[1]
client = RemoteClient.connect(url)
env = client.env("cartpole")

# What the reference client makes of our descriptor.
assert env.observation_space.shape == (4,), env.observation_space
assert env.observation_space.dtype == np.float32, env.observation_space
assert env.action_space.shape == (), env.action_space
assert env.render_mode == "rgb_array" and env.render_fps == 50, (env.render_mode, env.render_fps)
assert env.metadata == {"render_modes": ["rgb_array"], "render_fps": 50}, env.metadata

steps = 0


def run_episode(policy, seed, max_steps=500):
    """Return of one episode from a seeded reset, cut at max_steps."""
    global steps
    context, obs, info = env.reset(seed=seed)
    assert context is None and info == {}, (context, info)
    assert obs.shape == (4,) and obs.dtype == np.float32, (obs.shape, obs.dtype)
    assert np.all(np.abs(obs) < 0.05), obs
    total = 0.0
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        steps += 1
        assert isinstance(reward, float) and isinstance(terminated, bool), (reward, terminated)
        total += reward
        if terminated or truncated:
            break
    return total


def linear(w):
    return lambda obs: int(obs @ w > 0)


started = time.monotonic()
rng = np.random.default_rng(2024)

# Baseline: uniformly random actions, as NumPy integers (0-d arrays on the wire).
random_returns = [run_episode(lambda obs: rng.integers(0, 2), seed=1000 + i) for i in range(20)]
random_mean = float(np.mean(random_returns))

# Random search over w ~ U[-1, 1]^4 with two short evaluation episodes each,
# stopping early once a candidate balances both to the evaluation limit.
EVAL_STEPS, CANDIDATES = 200, 40
best_w, best_score, tried = None, -1.0, 0
for k in range(CANDIDATES):
    w = rng.uniform(-1.0, 1.0, size=4)
    score = float(np.mean([run_episode(linear(w), seed=100 + 2 * k + j, max_steps=EVAL_STEPS)
                           for j in range(2)]))
    tried += 1
    print(f"candidate {k}: w={np.round(w, 3).tolist()} score={score}", file=sys.stderr)
    if score > best_score:
        best_w, best_score = w, score
    if best_score >= EVAL_STEPS:
        break

# Final evaluation of the best candidate over fresh seeded full episodes.
final_returns = [run_episode(linear(best_w), seed=5000 + i) for i in range(5)]
final_mean = float(np.mean(final_returns))
seconds = time.monotonic() - started
client.close()

assert final_mean >= 150.0, (final_mean, final_returns)
assert final_mean >= 5.0 * random_mean, (final_mean, random_mean)
print(f"ok random_mean={random_mean:.1f} candidates={tried} best_search_score={best_score:.1f} "
      f"final_mean={final_mean:.1f} final_min={min(final_returns):.1f} steps={steps} "
      f"seconds={seconds:.2f} us_per_step={1e6 * seconds / steps:.0f}")
