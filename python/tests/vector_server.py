"""Gymnasium envs behind a UniEnv server, for the vector env tests and benchmark.

    python vector_server.py COUNT [HOST]

Hosts ``pendulum0..pendulum{COUNT-1}`` (``Pendulum-v1``) and
``cartpole0..cartpole{COUNT-1}`` (``CartPole-v1``), each a
``FromGymnasiumEnv(gymnasium.make(...))``, on HOST (default 127.0.0.1) with a
port the OS picks, and prints the server's ws:// URL. The server is our Python
``unienv_remote.RemoteServer`` (the first line printed names it).
"""

import sys
import time

import gymnasium
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

from unienv_remote import RemoteServer

KIND = "unienv_remote"


def main() -> None:
    count = int(sys.argv[1])
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    server = RemoteServer()
    for i in range(count):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
        server.register(f"cartpole{i}", FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
    print(f"server: {KIND}", flush=True)
    print(server.listen(host, 0), flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.close()


if __name__ == "__main__":
    main()
