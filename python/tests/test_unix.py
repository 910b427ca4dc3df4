"""Unix domain sockets (``ws+unix://PATH``): our Python server
(``RemoteServer.listen_unix``) and our Rust server (``unienv-remote serve
--unix``), driven by our Python client, ``RemoteVectorEnv`` and the
reference's client (its ``WebSocketTransport`` over ``websockets``'
``unix_connect``), give what the same servers give over TCP.
"""

import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.vector import SyncVectorEnv  # noqa: E402
from unienv_interface.remote import RemoteClient as RefClient  # noqa: E402
from unienv_interface.remote import WebSocketTransport  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import RemoteServer, RemoteVectorEnv  # noqa: E402

from conftest import REPO, our_binary  # noqa: E402

UNIX_URL = re.compile(r"(ws\+unix://\S+)")


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    # Short: a socket path is limited to about 100 bytes.
    path = Path(tempfile.mkdtemp(prefix="ue-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pendulum_server() -> RemoteServer:
    server = RemoteServer()
    for i in range(2):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    return server


def episode(env, seed: int, steps: int = 5) -> list:
    out = [env.reset(seed=seed)]
    for t in range(steps):
        out.append(env.step(np.array([0.5 - 0.2 * t], dtype=np.float32)))
    return out


def same(a, b) -> None:
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert type(a) is type(b) and a == b, (a, b)


def test_python_server_over_a_unix_socket(socket_dir: Path) -> None:
    path = socket_dir / "py.sock"
    with pendulum_server() as tcp_server, pendulum_server() as unix_server:
        tcp_url = tcp_server.listen()
        url = unix_server.listen_unix(path)
        assert url == f"ws+unix://{path}"
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        with pytest.raises(RuntimeError):
            unix_server.listen_unix(socket_dir / "again.sock")
        over_tcp = unienv_remote.RemoteClient(tcp_url)
        over_unix = unienv_remote.RemoteClient(url)
        same(episode(over_unix.env("pendulum0"), 7), episode(over_tcp.env("pendulum0"), 7))
        # The reference's client, on a socket websockets connects.
        from websockets.sync.client import unix_connect
        ref = RefClient(WebSocketTransport(unix_connect(str(path), max_size=64 * 1024 * 1024, compression=None)))
        same(episode(ref.env("pendulum1"), 9), episode(over_tcp.env("pendulum1"), 9))
        ref.close()
        over_unix.close()
        over_tcp.close()
    assert not path.exists(), "the socket file is removed when the server closes"


def test_vector_env_over_unix_sockets(socket_dir: Path) -> None:
    paths = [socket_dir / "a.sock", socket_dir / "b.sock"]
    servers = [pendulum_server() for _ in paths]
    try:
        urls = [s.listen_unix(p) for s, p in zip(servers, paths)]
        envs = RemoteVectorEnv([(urls[j % 2], f"pendulum{j // 2}") for j in range(4)])
        local = SyncVectorEnv([lambda: gymnasium.make("Pendulum-v1") for _ in range(4)])
        obs, _ = envs.reset(seed=3)
        obs_l, _ = local.reset(seed=3)
        assert np.array_equal(obs, obs_l)
        local.action_space.seed(3)
        for _ in range(10):
            actions = local.action_space.sample()
            got, expected = envs.step(actions), local.step(actions)
            for a, b in zip(got[:4], expected[:4]):
                assert a.dtype == b.dtype and np.array_equal(a, b)
        envs.close()
        local.close()
    finally:
        for s in servers:
            s.close()


def test_rust_server_over_a_unix_socket(socket_dir: Path, our_server) -> None:
    path = socket_dir / "rs.sock"
    # A stale socket file (its server gone) is replaced.
    import socket
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()
    process = subprocess.Popen([str(our_binary()), "serve", "--fixtures", "--unix", str(path)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    try:
        assert process.stdout is not None
        url = None
        for line in process.stdout:
            match = UNIX_URL.search(line)
            if match:
                url = match.group(1)
                break
        assert url == f"ws+unix://{path}", url
        transcripts = []
        for target in (url, our_server.url):
            client = unienv_remote.RemoteClient(target)
            env = client.env("counter")
            context, obs, info = env.reset(seed=2)
            steps = [env.step(np.array([1.0, 2.0], dtype=np.float32)) for _ in range(3)]
            transcripts.append([context, obs, info, steps])
            client.close()
        same(transcripts[0], transcripts[1])
        from websockets.sync.client import unix_connect
        ref = RefClient(WebSocketTransport(unix_connect(str(path), compression=None)))
        ref_env = ref.env("counter")
        same(list(ref_env.reset(seed=2)), [transcripts[0][0], transcripts[0][1], transcripts[0][2]])
        ref.close()
        # Our client given the reference's transport over the socket reconnects to it.
        ours = unienv_remote.RemoteClient(WebSocketTransport(unix_connect(str(path), compression=None)))
        same(list(ours.env("counter").reset(seed=2)), [transcripts[0][0], transcripts[0][1], transcripts[0][2]])
        ours.close()
    finally:
        process.terminate()
        process.wait(timeout=20)
        if process.stdout is not None:
            process.stdout.close()
    assert not path.exists(), "serve removes its socket file at exit"
