"""Ctrl-C works: every blocking wait of the package returns on SIGINT with
``KeyboardInterrupt`` (our client's calls, operations, ``Subscription.next``,
``RemoteVectorEnv`` steps, ``RemoteServer.close``), whatever the timeout
(``None`` here: without the interrupt they would wait forever). An
interrupted mutation is treated like a timeout: outcome uncertain, said in a
note on the exception, and the connection closed; an interrupted read leaves
the connection open. SIGINT is sent by a thread once the hosted simulator
signals that the call reached it (an event, no racing sleep); a watchdog
opens the gate after 20 s so that a failing test ends instead of hanging."""

import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402
from gated import Gated as GatedStep  # noqa: E402

ONES = np.ones(2, np.float32)


class Gated(GatedStep):
    """``step`` and ``render`` wait at the gate (a hung simulator)."""

    def render(self):
        self.entered.set()
        self.gate.wait()
        return super().render()


@pytest.fixture
def hung():
    env = Gated()
    server = unienv_remote.RemoteServer(idle_timeout=None, shutdown_timeout=0.5)
    server.register("hung", env)
    server.register("free", CounterEnv())
    url = server.listen("127.0.0.1", 0)
    yield env, server, url
    env.gate.set()
    server.close()


def interrupt_when(event, sent):
    """Sends SIGINT to this process once ``event`` is set (recording when);
    opens nothing: the caller's watchdog does."""

    def run():
        if event.wait(20):
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=run, daemon=True).start()


class MainThreadIn:
    """An event-like condition: the main thread is inside the Python
    function ``name`` (blocked in a native wait under it)."""

    def __init__(self, name):
        self.name = name

    def wait(self, timeout):
        main = threading.main_thread().ident
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = sys._current_frames().get(main)
            while frame is not None:
                if frame.f_code.co_name == self.name:
                    return True
                frame = frame.f_back
            time.sleep(0.005)
        return False


def watchdog(env):
    timer = threading.Timer(20, env.gate.set)
    timer.daemon = True
    timer.start()
    return timer


def interrupted(call, event):
    """Runs ``call`` expecting SIGINT once ``event`` is set; returns the
    KeyboardInterrupt and the seconds from the signal to its arrival."""
    sent = []
    interrupt_when(event, sent)
    with pytest.raises(KeyboardInterrupt) as caught:
        call()
    return caught.value, time.monotonic() - sent[0]


def test_an_interrupted_step_raises_at_once_and_closes_the_connection(hung):
    env, server, url = hung
    timer = watchdog(env)
    client = unienv_remote.RemoteClient(url, timeout=None)
    remote = client.env("hung")
    remote.reset(seed=1)
    error, took = interrupted(lambda: remote.step(ONES), env.entered)
    timer.cancel()
    assert took < 2.0, took
    assert any("outcome is uncertain" in note for note in getattr(error, "__notes__", []))
    assert client.closed, "an interrupted mutation closes the connection"


def test_an_interrupted_read_leaves_the_connection_open(hung):
    env, server, url = hung
    timer = watchdog(env)
    controller = unienv_remote.RemoteClient(url, timeout=None)
    controller.env("hung").reset(seed=1)
    _, took = interrupted(lambda: controller.env("hung").render(), env.entered)
    assert took < 2.0, took
    assert not controller.closed
    env.gate.set()
    timer.cancel()
    # The abandoned read's late answer is ignored; the next calls work.
    obs, *_ = controller.env("hung").step(ONES)
    assert obs["position"].tolist() == [2.0, 2.0]
    controller.close()


def test_an_interrupted_subscription_wait_raises(hung):
    env, server, url = hung
    client = server.connect(timeout=None)
    subscription = client.subscribe("free")
    _, took = interrupted(lambda: subscription.next(timeout=None), MainThreadIn("next"))
    assert took < 2.0, took
    subscription.close()
    client.close()


def test_an_interrupted_component_operation_raises(hung):
    env, server, url = hung
    timer = watchdog(env)
    client = unienv_remote.RemoteClient(url, timeout=None)
    client.env("hung").reset(seed=1)
    _, took = interrupted(lambda: client.call("hung", "step", ONES), env.entered)
    timer.cancel()
    assert took < 2.0, took
    assert client.closed


def test_an_interrupted_vector_step_raises(hung):
    env, server, url = hung
    timer = watchdog(env)
    vector = unienv_remote.RemoteVectorEnv([(url, "free"), (url, "hung")], timeout=None)
    vector.reset(seed=0)
    _, took = interrupted(lambda: vector.step(np.ones((2, 2), np.float32)), env.entered)
    timer.cancel()
    assert took < 2.0, took
    vector.close()


class InRecv(MainThreadIn):
    """The main thread is inside ``RemoteVectorEnv.recv``, and has had a
    moment to reach the native wait under it (a signal that arrived earlier,
    in recv's Python code, would interrupt it too, and prove less)."""

    def __init__(self):
        super().__init__("recv")

    def wait(self, timeout):
        found = super().wait(timeout)
        time.sleep(0.1)
        return found


def test_an_interrupted_vector_recv_raises(hung):
    """EnvPool-style ``recv`` waits like ``step_wait``: Ctrl-C ends it while
    the hung env holds back the batch it waits for."""
    env, server, url = hung
    timer = watchdog(env)
    vector = unienv_remote.RemoteVectorEnv([(url, "free"), (url, "hung")], timeout=None, batch_size=2)
    vector.reset(seed=0)
    vector.send(np.ones((2, 2), np.float32))
    assert env.entered.wait(20)  # the hung env's step runs: recv will wait for it
    _, took = interrupted(vector.recv, InRecv())
    timer.cancel()
    assert took < 2.0, took
    vector.close()


def test_an_interrupted_close_returns_and_finishes_in_the_background():
    env = Gated()
    server = unienv_remote.RemoteServer(idle_timeout=None, shutdown_timeout=60.0)
    server.register("hung", env)
    client = server.connect(timeout=None)
    client.env("hung").reset(seed=1)
    stepping = threading.Thread(target=lambda: pytest.raises(Exception, client.env("hung").step, ONES),
                                daemon=True)
    stepping.start()
    assert env.entered.wait(20)
    timer = watchdog(env)
    # close() would wait up to the 60 s shutdown timeout for the hung domain.
    _, took = interrupted(server.close, MainThreadIn("close"))
    assert took < 2.0, took
    env.gate.set()
    timer.cancel()
    stepping.join(20)
