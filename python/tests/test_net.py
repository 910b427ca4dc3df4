"""Across machines: every refused connection says which flag or keyword lets
it in (token, Host names, origins)."""

import os
import socket
import sys

import pytest

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402


def loopback_host_name():
    """This machine's host name when it resolves to loopback only (Debian's
    /etc/hosts), so that a client can connect by it on 127.0.0.1."""
    name = socket.gethostname().lower()
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(name, None)}
    except OSError:
        return None
    return name if addrs and all(a.startswith("127.") or a == "::1" for a in addrs) else None


def serve(**options):
    server = unienv_remote.RemoteServer(**options)
    server.register("counter", CounterEnv())
    return server, server.listen("127.0.0.1", 0)


def test_a_missing_token_names_the_flag_and_the_keyword():
    server, url = serve(token="s3cret")
    try:
        with pytest.raises(ConnectionError) as refused:
            unienv_remote.RemoteClient.connect(url, timeout=10.0)
        text = str(refused.value)
        assert "HTTP 401" in text and "--token" in text and "token=TOKEN" in text, text
        with unienv_remote.RemoteClient.connect(url, token="s3cret", timeout=10.0) as client:
            assert client.session_id
    finally:
        server.close()


def test_a_host_name_on_a_loopback_bind_names_allow_host():
    name = loopback_host_name()
    if name is None:
        pytest.skip("this machine's host name does not resolve to loopback")
    server, url = serve()
    port = url.rsplit(":", 1)[1]
    try:
        with pytest.raises(ConnectionError) as refused:
            unienv_remote.RemoteClient.connect(f"ws://{name}:{port}", timeout=10.0)
        text = str(refused.value)
        assert "HTTP 403" in text and f"--allow-host {name} " in text and "allowed_hosts=" in text, text
    finally:
        server.close()
    server, url = serve(allowed_hosts=[name])
    port = url.rsplit(":", 1)[1]
    try:
        with unienv_remote.RemoteClient.connect(f"ws://{name}:{port}", timeout=10.0) as client:
            assert client.session_id
    finally:
        server.close()
