"""Our Python host: `unienv_remote.RemoteServer` hosting one
`FromGymnasiumEnv(gymnasium.make("Pendulum-v1"))` as `pendulum`, listening
on the Unix socket PATH until killed. Prints the URL.

  python pendulum_server.py PATH
"""
import sys
import time

import gymnasium
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

from unienv_remote import RemoteServer

server = RemoteServer()
server.register("pendulum", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
print(server.listen_unix(sys.argv[1]), flush=True)
try:
    while True:
        time.sleep(3600)
finally:
    server.close()
