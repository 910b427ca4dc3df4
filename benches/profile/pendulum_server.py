"""Our Python host: `unienv_remote.RemoteServer` hosting, as `pendulum`,
either one `FromGymnasiumEnv(gymnasium.make("Pendulum-v1"))` (the default)
or, with `batched`, a `BatchedEnv` of 8 `gymnasium.make("Pendulum-v1")`, or,
with `fleet`, 8 single ones as `pendulum0` .. `pendulum7` (8 domains, as one
server process of `benches/throughput.py`'s 16 single remote envs);
listening on the Unix socket PATH (or, given `tcp:PORT`, on 127.0.0.1:PORT) until
killed. Prints the URL.

  python pendulum_server.py PATH|tcp:PORT [single|batched|fleet]

With CPUS set (e.g. CPUS=0 or CPUS=0,1), the server's threads run on those
CPUs (`RemoteServer(cpus=...)`).
"""
import os
import sys
import time

import gymnasium
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

from unienv_remote import BatchedEnv, RemoteServer

kind = sys.argv[2] if len(sys.argv) > 2 else "single"
cpus = os.environ.get("CPUS")
server = RemoteServer(cpus=[int(c) for c in cpus.split(",")] if cpus else None)
if kind == "batched":
    server.register("pendulum", BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * 8))
elif kind == "fleet":
    for i in range(8):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
else:
    server.register("pendulum", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
where = sys.argv[1]
if where.startswith("tcp:"):
    print(server.listen("127.0.0.1", int(where[4:])), flush=True)
else:
    print(server.listen_unix(where), flush=True)
try:
    while True:
        time.sleep(3600)
finally:
    server.close()
