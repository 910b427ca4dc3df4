"""Run: start a server hosting the built-in simulators (`unienv-remote serve`,
`cargo run --example host_custom_sim`, or the reference Python server hosting
a `cartpole` env), then
`python examples/python/train_cartpole.py [ws://127.0.0.1:8765] [TOKEN]`
with a Python that has our package (`pip install ./python`), or
`python examples/python/train_cartpole.py --reference [URL]` with a Python
that has only the reference client (`pip install "unienv[network]==0.0.1b14"`).

Trains a linear policy for the server's `cartpole` (Gymnasium's CartPole-v1)
through our Python client, `unienv_remote.RemoteClient`, printing progress;
with `--reference`, the very same loop runs on UniEnv's reference client,
`unienv_interface.remote.RemoteClient`: ours is a drop-in. The action is
`int(obs @ w > 0)`; a random search draws candidate weights uniformly in
[-1, 1]^4, then a hill climb perturbs the best one, both scored on the same
seeded evaluation episodes. The result is evaluated on fresh episodes against
a random policy.
"""
import sys
import time

import numpy as np

REFERENCE = "--reference" in sys.argv[1:]
if REFERENCE:
    from unienv_interface.remote import RemoteClient
else:
    from unienv_remote import RemoteClient

ARGS = [a for a in sys.argv[1:] if a != "--reference"]
URL = ARGS[0] if ARGS else "ws://127.0.0.1:8765"
TOKEN = ARGS[1] if len(ARGS) > 1 else None
CANDIDATES, CLIMB_STEPS, EVAL_EPISODES, EVAL_STEPS, FINAL_EPISODES = 20, 20, 3, 500, 10


def run_episode(env, policy, seed, max_steps=500):
    """The return of one seeded episode (UniEnv's reset returns context first)."""
    _context, obs, _info = env.reset(seed=seed)
    total = 0.0
    for _ in range(max_steps):
        obs, reward, terminated, truncated, _info = env.step(policy(obs))
        total += reward
        if terminated or truncated:
            break
    return total


def main():
    rng = np.random.default_rng(0)
    options = {"token": TOKEN} if TOKEN is not None else {}
    with RemoteClient.connect(URL, **options) as client:
        env = client.env("cartpole")
        print(f"connected to {URL}: observation {env.observation_space}, action {env.action_space}")
        started = time.monotonic()

        random_policy = lambda obs: int(rng.integers(0, 2))
        random_mean = np.mean([run_episode(env, random_policy, seed=10_000 + i) for i in range(20)])
        print(f"random policy: mean return {random_mean:.1f}")

        def score(w):
            policy = lambda obs: int(obs @ w > 0)
            return np.mean([run_episode(env, policy, seed=j, max_steps=EVAL_STEPS) for j in range(EVAL_EPISODES)])

        best_w, best_score = None, -np.inf
        for k in range(CANDIDATES):
            w = rng.uniform(-1.0, 1.0, size=4)
            s = score(w)
            if s > best_score:
                best_w, best_score = w, s
            print(f"random search {k:2d}: score {s:6.1f}   best {best_score:6.1f}   w = {np.round(w, 3)}")
            if best_score >= EVAL_STEPS:
                break
        for k in range(CLIMB_STEPS):
            if best_score >= EVAL_STEPS:
                print("the best policy balances every evaluation episode to the limit")
                break
            w = best_w + rng.normal(0.0, 0.2, size=4)
            s = score(w)
            if s >= best_score:
                best_w, best_score = w, s
            print(f"hill climb    {k:2d}: score {s:6.1f}   best {best_score:6.1f}   w = {np.round(w, 3)}")

        policy = lambda obs: int(obs @ best_w > 0)
        returns = [run_episode(env, policy, seed=20_000 + i) for i in range(FINAL_EPISODES)]
        print(f"trained policy: mean return {np.mean(returns):.1f} over {FINAL_EPISODES} episodes "
              f"(min {min(returns):.0f}, max {max(returns):.0f}); random policy {random_mean:.1f}")
        print(f"done in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
