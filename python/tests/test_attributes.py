"""Drop-in attributes: what the reference's ``RemoteClient`` and
``RemoteServer`` read at use time takes effect when assigned after
construction in ours too (``timeout`` first), and every timeout argument is
validated the same way: NaN or a negative number is a ``ValueError`` naming
the argument."""

import math
import os
import sys

import numpy as np
import pytest
from unienv_interface.remote import RemoteClient as RefClient
from unienv_interface.remote.errors import UncertainOutcomeError

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402

ONES = np.ones(2, np.float32)


from gated import Gated  # noqa: E402


@pytest.mark.parametrize("client_class", [RefClient, unienv_remote.RemoteClient], ids=["reference", "ours"])
def test_assigning_timeout_after_connecting_applies_to_the_next_request(client_class):
    env = Gated()
    server = unienv_remote.RemoteServer(idle_timeout=None, shutdown_timeout=0.5)
    server.register("hung", env)
    try:
        url = server.listen("127.0.0.1", 0)
        client = client_class.connect(url, timeout=None)
        client.env("hung").reset(seed=1)
        client.timeout = 0.25
        assert client.timeout == 0.25
        # Without the assignment this step would wait forever (timeout=None).
        with pytest.raises(UncertainOutcomeError) as uncertain:
            client.env("hung").step(ONES)
        assert isinstance(uncertain.value.__cause__, TimeoutError)
        assert client.closed
    finally:
        env.gate.set()
        server.close()


def test_assigning_backend_and_device_applies_to_the_next_result():
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("counter", CounterEnv())
    try:
        client = server.connect()
        backend = client.backend
        client.device = "cpu"  # not None: results go through map_arrays
        assert client._numpy is False
        client.device = None
        assert client._numpy is True
        client.backend = backend
        obs, *_ = client.env("counter").reset(seed=1)
        assert obs.tolist() == [1.0, 1.0]
        client.close()
    finally:
        server.close()


def test_server_codec_and_idle_timeout_are_read_when_it_starts():
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("counter", CounterEnv())
    server.codec.max_message_size = 4096
    try:
        client = server.connect()
        assert client.codec.max_message_size == 4096
        client.close()
    finally:
        server.close()


@pytest.mark.parametrize("bad", [math.nan, -1.0])
def test_timeout_arguments_are_validated_the_same_everywhere(bad):
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("counter", CounterEnv())
    try:
        url = server.listen("127.0.0.1", 0)
        for make in (lambda: unienv_remote.RemoteClient(url, timeout=bad),
                     lambda: server.connect(timeout=bad)):
            with pytest.raises(ValueError, match="timeout"):
                make()
        client = server.connect()
        with pytest.raises(ValueError, match="timeout"):
            client.timeout = bad
        assert client.timeout == 30.0
        subscription = client.subscribe("counter")
        with pytest.raises(ValueError, match="timeout"):
            subscription.next(timeout=bad)
        subscription.close()
        client.close()
        with pytest.raises(ValueError, match="timeout"):
            unienv_remote.RemoteVectorEnv([(url, "counter")], timeout=bad)
        for name in ("idle_timeout", "shutdown_timeout"):
            with pytest.raises(ValueError, match=name):
                unienv_remote.RemoteServer(**{name: bad})
    finally:
        server.close()
