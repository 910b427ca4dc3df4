"""Registration forms hosted by the reference server: prints the discovered
topology as JSON lines (id, kind, world_id, node_id, children, domain_id,
operations), for tests/server/registry.rs to compare with ours.

Registered: a bare World; a WorldNode attached to its world; a Wrapper
around a WorldEnv and the WorldEnv itself (then again, which returns its
existing ID); a plain Env and a Wrapper around it (base first).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_fixture_server import CounterEnv, TickNode, TickWorld, make_composed  # noqa: E402

from unienv_interface.env_base.wrapper import Wrapper  # noqa: E402
from unienv_interface.remote import RemoteServer  # noqa: E402

server = RemoteServer(idle_timeout=None)
ids = [server.register("world", TickWorld())]
ids.append(server.register("sensor", TickNode(TickWorld(), "sensor")))
env = make_composed()
ids.append(server.register("wrapped", Wrapper(env)))
ids.append(server.register("base", env))
ids.append(server.register("again", env))
plain = CounterEnv()
ids.append(server.register("pbase", plain))
ids.append(server.register("pwrap", Wrapper(plain)))
print(json.dumps({"registered": ids}))
client = server.connect()
for d in client.discover():
    keys = ("id", "kind", "world_id", "node_id", "children", "domain_id", "operations")
    print(json.dumps({k: d[k] for k in keys}))
client.close()
server.close()
