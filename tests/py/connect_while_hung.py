"""While the env 'hung' of the server at URL hangs in a step, the reference
client connects (which discovers every domain), describes 'hung' (its last
committed boundary: the reset, sequence 1) and steps 'counter', every request
with a 1 s timeout.

  python connect_while_hung.py URL
"""
import sys

import numpy as np
from unienv_interface.remote import RemoteClient

client = RemoteClient.connect(sys.argv[1], timeout=1.0)
assert client.describe("hung")["sequence"] == 1
env = client.env("counter")
env.reset(seed=0)
env.step(np.ones(2, np.float32))
client.release("counter")
client.close()
print("ok")
