"""Python simulators that fail, hang or raise ``KeyboardInterrupt``/``SystemExit``
never take ``unienv_remote.RemoteServer`` down; factories are evicted when idle
and revived with a topology check.
"""

import os
import sys
import threading
import time

import numpy as np
import pytest
from unienv_interface.remote import RemoteClient as RefClient
from unienv_interface.remote.codec import Codec
from unienv_interface.remote.errors import RemoteError
from websockets.sync.client import connect

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv, TickNode, TickWorld  # noqa: E402
from gated import Gated  # noqa: E402

STEP = np.zeros(2, np.float32)


class Raising(CounterEnv):
    """Steps raise the exception given (a class) until ``error`` is cleared."""

    def __init__(self, error):
        super().__init__()
        self.error = error

    def step(self, action):
        if self.error is not None:
            raise self.error("simulator failed")
        return super().step(action)


def raw_steps(url, resource_id, steps):
    """Resets (seed 1) and steps a counter env over a raw protocol session."""
    codec = Codec()
    with connect(url) as ws:
        def request(op, **members):
            request.n += 1
            ws.send(codec.encode({"version": 1, "type": "request", "request_id": str(request.n), "op": op,
                                  "session_id": request.session, "resource_id": resource_id, **members}))
            reply = codec.decode(ws.recv(timeout=30))
            assert reply["type"] == "response", reply
            return reply["result"]

        request.n, request.session = 0, None
        request.session = request("hello")["session_id"]
        request("call", method="reset", args=[], kwargs={"seed": 1}, operation_id="r")
        for i in range(steps):
            value = request("call", method="step", args=[np.ones(2, np.float32)], kwargs={},
                            operation_id=f"s{i}")["value"]
        return value[0]["position"].tolist()


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt, SystemExit])
def test_exceptions_become_uncertain_execution_errors_and_fault_the_domain(error):
    env = Raising(error)
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("env", env)
    server.register("other", CounterEnv())
    try:
        client = RefClient.connect(server.listen("127.0.0.1", 0))
        remote = client.env("env")
        remote.reset(seed=1)
        with pytest.raises(RemoteError) as failed:
            remote.step(STEP)
        assert failed.value.code == "execution_error" and failed.value.uncertain
        assert str(failed.value) == "simulator failed"
        env.error = None
        with pytest.raises(RemoteError) as faulted:
            remote.step(STEP)
        assert faulted.value.code == "faulted"
        remote.reset(seed=2)
        obs, *_ = remote.step(np.ones(2, np.float32))
        assert obs["position"].tolist() == [3.0, 3.0]
        # The server and its other domains are unaffected.
        assert client.env("other").reset(seed=4)[0].tolist() == [4.0, 4.0]
        client.close()
    finally:
        server.close()


def test_a_hung_simulator_blocks_only_its_domain():
    hung = Gated()
    server = unienv_remote.RemoteServer(idle_timeout=None, shutdown_timeout=0.5)
    server.register("hung", hung)
    server.register("free", CounterEnv())
    try:
        url = server.listen("127.0.0.1", 0)
        stuck = RefClient.connect(url, timeout=None)
        stuck.env("hung").reset()
        result = {}
        worker = threading.Thread(target=lambda: result.update(step=stuck.env("hung").step(STEP)))
        worker.start()
        assert hung.entered.wait(30)
        # While "hung" is stuck in its step, the other domain serves requests
        # (a raw session here; clients connecting meanwhile: test_busy.py).
        assert raw_steps(url, "free", 20) == [21.0, 21.0]
        assert "step" not in result
        hung.gate.set()
        worker.join(30)
        assert "step" in result
        stuck.close()
    finally:
        hung.gate.set()
        server.close()


def test_close_leaves_a_simulator_hung_past_the_shutdown_timeout_behind():
    hung = Gated()
    server = unienv_remote.RemoteServer(idle_timeout=None, shutdown_timeout=0.2)
    server.register("hung", hung)
    client = server.connect(timeout=None)
    client.env("hung").reset()
    outcome = []

    def step():
        try:
            client.env("hung").step(STEP)
            outcome.append("answered")
        except Exception as e:  # noqa: BLE001 - the connection closed under it
            outcome.append(type(e).__name__)

    worker = threading.Thread(target=step, daemon=True)
    worker.start()
    assert hung.entered.wait(30)
    server.close()  # returns although the step has not finished
    hung.gate.set()
    worker.join(30)
    # The session closed with the server: the step was never answered.
    assert outcome and outcome[0] != "answered"


class Counted(CounterEnv):
    closes = 0

    def close(self):
        type(self).closes += 1


def wait_for(predicate, what):
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_idle_factories_are_evicted_and_revived_with_a_topology_check():
    built = []

    def factory():
        if len(built) >= 2:
            # A third product with another topology: refused on revival.
            built.append(TickNode(TickWorld(), "other"))
            return built[-1]
        built.append(Counted())
        return built[-1]

    server = unienv_remote.RemoteServer(idle_timeout=0.05)
    server.register("lazy", factory)
    try:
        client = RefClient.connect(server.listen("127.0.0.1", 0))
        assert len(built) == 1  # the client discovered every domain at connect
        assert client.env("lazy").reset(seed=1)[0].tolist() == [1.0, 1.0]
        revision = client.describe("lazy")["revision"]
        client.release("lazy")
        wait_for(lambda: Counted.closes == 1, "the idle factory was not disposed")
        # The next request revives it: a new object, the revision grows by one.
        described = client.describe("lazy")
        assert len(built) == 2 and described["revision"] == revision + 1
        wait_for(lambda: Counted.closes == 2, "the revived factory was not disposed")
        with pytest.raises(RemoteError) as refused:
            client.describe("lazy")
        assert refused.value.code == "execution_error"
        assert "Factory resource topology must remain unchanged on revival" in str(refused.value)
        client.close()
    finally:
        server.close()
