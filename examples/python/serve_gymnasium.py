"""Serve Gymnasium simulators with unienv-remote's Rust server core.

    pip install ./python "gymnasium[mujoco]"     # or: maturin develop -m python/Cargo.toml
    python examples/python/serve_gymnasium.py [PORT]

The only difference from a server script written for the reference is the
import line. Drive it from any UniEnv client, for example:

    from unienv_remote import RemoteClient        # or unienv_interface.remote
    env = RemoteClient.connect("ws://127.0.0.1:8765").env("HalfCheetah-v5")
    context, obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample(env.rng)[1])
"""

import sys
import time

import gymnasium
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

from unienv_remote import RemoteServer   # was: from unienv_interface.remote import RemoteServer


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8765
    server = RemoteServer(idle_timeout=60.0)
    # Each registration is its own execution domain: independent simulators step
    # in parallel when they release the GIL (MuJoCo does).
    server.register("Pendulum-v1", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    server.register("HalfCheetah-v5", FromGymnasiumEnv(gymnasium.make("HalfCheetah-v5")))
    # A zero-argument factory: built on first use, disposed after idle_timeout.
    server.register("CartPole-v1", lambda: FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
    print(server.listen("127.0.0.1", port), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
