"""The byte budgets are settable from ``RemoteServer`` like the other limits:
a connection holding more than ``max_connection_bytes`` is closed (1008)."""

import os
import sys
from typing import Optional

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402


def close_code(url: str, size: int) -> Optional[int]:
    """Sends ``size`` zero bytes as one message; the close code the server
    answered with (``None``: it closed while the message was being sent,
    refusing it from its frame header before the client finished)."""
    with connect(url, max_size=None) as ws:
        try:
            ws.send(b"\0" * size)
            ws.recv(timeout=30)
        except ConnectionClosed as closed:
            return None if closed.rcvd is None else closed.rcvd.code
        except OSError:
            return None
    raise AssertionError("the server did not close the connection")


def test_a_connection_over_its_byte_budget_is_closed_with_1008() -> None:
    budgeted = unienv_remote.RemoteServer(max_connection_bytes=2 << 20)
    default = unienv_remote.RemoteServer()
    for server in (budgeted, default):
        server.register("counter", CounterEnv())
    try:
        # 4 MiB, under the 64 MiB message limit: over the 2 MiB budget it is
        # refused from its frame header (1008, or closed before the client
        # finished sending); within the default budget it is read, and
        # refused as an envelope (1007).
        url = budgeted.listen("127.0.0.1", 0)
        assert close_code(url, 4 << 20) in (1008, None)
        assert close_code(default.listen("127.0.0.1", 0), 4 << 20) == 1007
        # Within the budget a message is read.
        assert close_code(url, 1 << 20) == 1007
    finally:
        budgeted.close()
        default.close()


@pytest.mark.parametrize("name", ["max_connection_bytes", "max_server_bytes"])
def test_budgets_must_be_positive_integers(name: str) -> None:
    for bad in (0, -1, 1.5, "1"):
        with pytest.raises(ValueError, match=name):
            unienv_remote.RemoteServer(**{name: bad})
