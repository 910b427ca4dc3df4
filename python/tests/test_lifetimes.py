"""Nothing outlives its owner: a ``RemoteServer`` dropped without ``close()``
is collected (its worker threads hold only its class and a weak reference to
it), and then closes its socket, disposes of its objects and ends its
threads; ``with RemoteServer() as server:`` closes it too."""

import gc
import os
import socket
import sys
import time
import weakref

import pytest
from unienv_interface.remote import RemoteClient as RefClient

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402


class Counted(CounterEnv):
    def __init__(self):
        super().__init__()
        self.closes = 0

    def close(self):
        self.closes += 1


def domain_threads():
    """The thread IDs of this process's domain workers (Linux)."""
    tids = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().startswith("unienv-domain"):
                    tids.add(tid)
        except OSError:
            pass
    return tids


def refused(url):
    host, port = url.rsplit("/", 1)[-1].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


def wait_for(predicate, what):
    deadline = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="thread names from /proc")
def test_a_server_dropped_without_close_is_collected_and_shuts_down():
    before = domain_threads()
    env, built = Counted(), []
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("counter", env)
    server.register("lazy", lambda: built.append(Counted()) or built[-1])
    url = server.listen("127.0.0.1", 0)
    client = RefClient.connect(url)  # discovers: the factory runs
    client.env("counter").reset(seed=1)
    client.close()
    ours = domain_threads() - before
    assert len(ours) == 2 and len(built) == 1
    collected = weakref.ref(server)
    del server
    gc.collect()
    assert collected() is None, "the RemoteServer was not collected"
    wait_for(lambda: refused(url), "the listening socket stayed open")
    wait_for(lambda: not (domain_threads() & ours), "the domain threads did not end")
    assert env.closes == 1 and built[0].closes == 1


def test_with_closes_the_server():
    env = Counted()
    with unienv_remote.RemoteServer(idle_timeout=None) as server:
        server.register("counter", env)
        url = server.listen("127.0.0.1", 0)
        with RefClient.connect(url) as client:
            client.env("counter").reset(seed=1)
    assert refused(url)
    assert env.closes == 1
