"""Nobody waits on someone else's simulator, on our Python host: while one
simulator hangs, new clients (the reference's and ours) connect — which
discovers every domain — describe the hung one and step another; a hosted
call may call back into its own server (``server.connect()``, our client or
the reference client over the URL, a discover) without deadlocking; and
``RemoteServer.close()`` from inside a hosted call does not wait on its own
domain, and says so in the log. Events, no racing sleeps: every client below
has a short timeout, so a wait on the hung domain would fail the test."""

import logging
import os
import sys
import threading

import numpy as np
from unienv_interface.remote import RemoteClient as RefClient

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402

ONES = np.ones(2, np.float32)


from gated import Gated  # noqa: E402


def hang(server, url):
    """A reference client stepping ``hung`` in a thread until the gate opens."""
    stuck = RefClient.connect(url, timeout=None)
    stuck.env("hung").reset(seed=1)
    worker = threading.Thread(target=lambda: stuck.env("hung").step(ONES), daemon=True)
    worker.start()
    return stuck, worker


def test_new_clients_connect_describe_and_step_while_a_simulator_hangs():
    hung = Gated()
    server = unienv_remote.RemoteServer(idle_timeout=None, shutdown_timeout=0.5)
    server.register("hung", hung)
    server.register("free", CounterEnv())
    try:
        url = server.listen("127.0.0.1", 0)
        stuck, worker = hang(server, url)
        assert hung.entered.wait(30)
        ways = [
            lambda: RefClient.connect(url, timeout=1.0),
            lambda: unienv_remote.RemoteClient(url, timeout=1.0),
            lambda: server.connect(timeout=1.0),
        ]
        for k, connect in enumerate(ways):
            client = connect()
            # The hung domain as of its last committed boundary (the reset).
            assert client.describe("hung")["sequence"] == 1, k
            env = client.env("free")
            env.reset(seed=k)
            obs, *_ = env.step(ONES)
            assert obs["position"].tolist() == [k + 1.0] * 2, k
            client.release("free")
            client.close()
        assert worker.is_alive()
        hung.gate.set()
        worker.join(30)
        stuck.close()
    finally:
        hung.gate.set()
        server.close()


class CallsBack(CounterEnv):
    """``step`` calls back into its own server the way ``how`` says, then
    describes itself and steps ``free`` before stepping itself."""

    def __init__(self):
        super().__init__()
        self.server = None
        self.url = None
        self.how = None

    def step(self, action):
        if self.how == "memory":
            client = self.server.connect(timeout=5.0)
        elif self.how == "ours":
            client = unienv_remote.RemoteClient(self.url, timeout=5.0)
        else:
            client = RefClient.connect(self.url, timeout=5.0)
        try:
            assert client.describe("caller")["id"] == "caller"
            free = client.env("free")
            free.reset(seed=2)
            free.step(ONES)
            client.release("free")
        finally:
            client.close()
        return super().step(action)


def test_a_hosted_call_calls_back_into_its_own_server():
    caller = CallsBack()
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("caller", caller)
    server.register("free", CounterEnv())
    try:
        caller.server, caller.url = server, server.listen("127.0.0.1", 0)
        for k, how in enumerate(["memory", "ours", "reference"]):
            caller.how = how
            client = RefClient.connect(caller.url, timeout=20.0)
            env = client.env("caller")
            env.reset(seed=0)
            obs, *_ = env.step(ONES)
            assert obs["position"].tolist() == [1.0, 1.0], how
            client.close()
    finally:
        server.close()


class ClosesItsServer(CounterEnv):
    """``step`` closes the server hosting it."""

    def __init__(self):
        super().__init__()
        self.server = None
        self.closed = threading.Event()

    def step(self, action):
        self.server.close()
        self.closed.set()
        return super().step(action)


def test_close_from_inside_a_hosted_call_does_not_wait_on_its_domain(caplog):
    env = ClosesItsServer()
    # Waiting on its own domain would take the whole shutdown timeout.
    server = unienv_remote.RemoteServer(idle_timeout=None, shutdown_timeout=60.0)
    server.register("env", env)
    env.server = server
    client = server.connect(timeout=30.0)
    client.env("env").reset(seed=0)
    outcome = []

    def step():
        try:
            client.env("env").step(ONES)
            outcome.append("answered")
        except Exception as e:  # noqa: BLE001 - the server closed under it
            outcome.append(type(e).__name__)

    with caplog.at_level(logging.WARNING, logger="unienv_remote.server"):
        worker = threading.Thread(target=step, daemon=True)
        worker.start()
        # Returns well before the 60 s shutdown timeout (the client's 30 s
        # timeout would fail the step otherwise).
        assert env.closed.wait(30)
        worker.join(30)
    assert outcome and outcome[0] != "answered"
    assert any("from inside a hosted call" in r.getMessage() for r in caplog.records)
