"""Drives our server over TLS (wss://) with the reference client, trusting
the test CA through an ssl.SSLContext passed to the transport (websockets'
`ssl` argument).

  python drive_wss.py WSS_URL CA_FILE
"""
import ssl
import sys

import numpy as np

url, ca_file = sys.argv[1], sys.argv[2]
from unienv_interface.remote import RemoteClient, WebSocketTransport

# Without the CA the certificate is refused.
try:
    WebSocketTransport.connect(url, ssl=ssl.create_default_context())
    raise SystemExit("connected without trusting the test CA")
except ssl.SSLCertVerificationError:
    pass

context = ssl.create_default_context(cafile=ca_file)
c = RemoteClient(WebSocketTransport.connect(url, ssl=context))
env = c.env("counter")
env.reset(seed=1)
obs, reward, terminated, truncated, info = env.step(np.array([1.0, 2.0], np.float32))
assert float(reward) == 5.0, reward

image_env = c.env("bench_image")
image_env.reset()
obs, *_ = image_env.step(np.ones(4, np.float32))
image = np.asarray(obs["image"])
assert image.shape == (84, 84, 3), image.shape
assert (image.reshape(-1) == np.arange(image.size) % 251).all(), "image corrupted"
c.close()
print("ok")
