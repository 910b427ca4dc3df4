"""The byte budgets are settable from ``RemoteServer`` like the other limits:
a connection holding more than ``max_connection_bytes`` is closed (1008)."""

import os
import sys

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402


def test_a_connection_over_its_byte_budget_is_closed_with_1008() -> None:
    server = unienv_remote.RemoteServer(max_connection_bytes=2 << 20)
    server.register("counter", CounterEnv())
    try:
        url = server.listen("127.0.0.1", 0)
        with connect(url, max_size=None) as ws:
            # 4 MiB: under the 64 MiB message limit, over the 2 MiB budget.
            ws.send(b"\0" * (4 << 20))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        # A message within the budget is read (and refused as an envelope,
        # not for its size).
        with connect(url, max_size=None) as ws:
            ws.send(b"\0" * (1 << 20))
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
    finally:
        server.close()


@pytest.mark.parametrize("name", ["max_connection_bytes", "max_server_bytes"])
def test_budgets_must_be_positive_integers(name: str) -> None:
    for bad in (0, -1, 1.5, "1"):
        with pytest.raises(ValueError, match=name):
            unienv_remote.RemoteServer(**{name: bad})
