"""The Python host out of file descriptors (docs/network.md, "Many
sessions"): a ``RemoteServer`` whose process has no descriptor left to
accept with warns through the ``unienv_remote`` logger (the limit, ``ulimit
-n``, ``LimitNOFILE``), keeps serving its open session, and accepts the
waiting connection once that session closes. The server runs in a child
process whose RLIMIT_NOFILE it lowers itself, after it listens, to leave one
descriptor free: the first session takes it."""

import base64
import os
import select
import socket
import subprocess
import sys
import time
from typing import List

import pytest

pytest.importorskip("gymnasium")
resource = pytest.importorskip("resource")

import unienv_remote  # noqa: E402

SERVER = r"""
import logging, os, resource, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
import gymnasium
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv
from unienv_remote import RemoteServer

server = RemoteServer()
server.register("cartpole", FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
url = server.listen("127.0.0.1", 0)

def limit_leaving(free):
    fd = 0
    while True:
        try:
            os.fstat(fd)
        except OSError:
            free -= 1
            if free == 0:
                return fd + 1
        fd += 1

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
limit = limit_leaving(1)
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
print(url, limit, flush=True)
sys.stdin.read()
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
server.close()
"""

WARNING = "cannot accept connections: out of file descriptors"


def read_until(proc: "subprocess.Popen[bytes]", lines: List[str], want: str, seconds: float = 60.0) -> str:
    """Reads the child's standard error until a line contains ``want`` (an
    event awaited, up to ``seconds`` on a loaded machine, not a timing)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + seconds
    buffered = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], 0.5)
        if not ready:
            continue
        chunk = os.read(proc.stderr.fileno(), 65536)
        if not chunk:
            break
        buffered += chunk
        *done, buffered = buffered.split(b"\n")
        for raw in done:
            line = raw.decode(errors="replace")
            lines.append(line)
            if want in line:
                return line
    raise AssertionError(f"no {want!r} from the server within {seconds} s; it said:\n" + "\n".join(lines))


def upgrade(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    return s


def response_head(s: socket.socket) -> bytes:
    s.settimeout(60)  # an answer awaited, not a timing
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(4096)
        assert chunk, f"closed before answering: {got!r}"
        got += chunk
    return got


def test_out_of_descriptors_is_said_and_survived() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    lines: List[str] = []
    try:
        assert proc.stdout is not None
        url, limit = proc.stdout.readline().decode().split()
        port = int(url.rsplit(":", 1)[1])
        first = unienv_remote.RemoteClient(url, timeout=60)
        env = first.env("cartpole")
        env.reset(seed=0)
        # No descriptor left: this connection waits in the backlog.
        pending = upgrade(port)
        warned = read_until(proc, lines, WARNING)
        assert "ulimit -n" in warned and "LimitNOFILE" in warned, warned
        assert f"open_files_limit={limit}" in warned, warned
        # The open session is served meanwhile.
        for _ in range(5):
            env.step(1)
        # Once it closes, the waiting connection is upgraded.
        first.close()
        head = response_head(pending)
        assert head.startswith(b"HTTP/1.1 101"), head
        read_until(proc, lines, "accepting connections again")
        assert sum(WARNING in line for line in lines) == 1, lines
        pending.close()
        # And a new client connects and steps.
        again = unienv_remote.RemoteClient(url, timeout=60)
        env = again.env("cartpole")
        env.reset(seed=0)
        env.step(0)
        again.close()
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
