"""Drives our server with the reference client for behaviour only our test
server hosts: a simulator that panics, and bearer-token authentication.

  python drive_our_server.py URL TOKEN
"""
import sys

import numpy as np

url, token = sys.argv[1], sys.argv[2]
from unienv_interface.remote import RemoteClient, WebSocketTransport
from unienv_interface.remote.errors import RemoteError


def connect(headers=None):
    # RemoteClient.connect does not forward extra headers; the transport does.
    kwargs = {} if headers is None else {"additional_headers": headers}
    return RemoteClient(WebSocketTransport.connect(url, **kwargs))



# Without the token the handshake is refused before the upgrade.
try:
    connect()
    raise SystemExit("connected without a token")
except RemoteError:
    raise SystemExit("expected a handshake failure, got a protocol error")
except Exception as exc:  # websockets InvalidStatus
    assert "401" in str(exc), exc

try:
    connect({"Authorization": "Bearer wrong"})
    raise SystemExit("connected with a wrong token")
except Exception as exc:
    assert "401" in str(exc), exc

c = connect({"Authorization": f"Bearer {token}"})
good, bad = c.env("good"), c.env("bad")
good.reset(seed=1)
bad.reset(seed=1)
try:
    bad.step(np.float32(7.0))
    raise SystemExit("the panicking step succeeded")
except RemoteError as e:
    assert e.code == "execution_error" and e.uncertain, (e.code, e.uncertain)
    assert "simulator exploded" in str(e), str(e)
try:
    bad.step(np.float32(1.0))
    raise SystemExit("a faulted domain accepted a step")
except RemoteError as e:
    assert e.code == "faulted", e.code
# Every other domain carries on, on the same connection.
obs, reward, *_ = good.step(np.float32(2.0))
assert reward == 3.0, reward
# A reset recovers the faulted domain.
bad.reset(seed=0)
assert bad.step(np.float32(4.0))[1] == 4.0
c.close()
print("ok")
