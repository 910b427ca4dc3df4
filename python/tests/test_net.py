"""Across machines: every refused connection says which flag or keyword lets
it in (token, Host names, CA file), and TLS from Python: our
``RemoteServer`` serving ``wss://`` to our client (``ca_file=``, ``ssl=``, the
reference's ``WebSocketTransport``) and to the reference client, and a
``RemoteVectorEnv`` over ``wss://`` (reconnection included). Certificates are
made by the tests (``certs.py``, the openssl command)."""

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


def test_a_taken_port_is_an_oserror_naming_the_address():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    server = unienv_remote.RemoteServer()
    server.register("counter", CounterEnv())
    try:
        with pytest.raises(OSError) as refused:
            server.listen("127.0.0.1", port)
        text = str(refused.value)
        assert f"cannot listen on 127.0.0.1:{port}" in text and "another server is using it" in text, text
        # Nothing was left half-started: another port still works.
        url = server.listen("127.0.0.1", 0)
        with unienv_remote.RemoteClient.connect(url, timeout=10.0) as client:
            assert client.session_id
    finally:
        server.close()
        taken.close()


def test_a_configuration_that_cannot_work_is_a_valueerror_naming_the_field():
    server = unienv_remote.RemoteServer(max_in_flight=0)
    server.register("counter", CounterEnv())
    try:
        with pytest.raises(ValueError, match="max_in_flight"):
            server.listen("127.0.0.1", 0)
    finally:
        server.close()


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


@pytest.mark.ci_may_skip
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


# -- TLS (wss://) -------------------------------------------------------------------

@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    import certs as made
    if not made.available():
        if os.environ.get("CI") == "true":
            raise RuntimeError("the openssl command is missing: the TLS tests need it to make certificates")
        pytest.skip("the openssl command is missing (it makes the test certificates)")
    return made.make(tmp_path_factory.mktemp("certs"))


def test_wss_our_client_and_the_reference_client_against_our_python_server(certs):
    import ssl

    from unienv_interface.remote import RemoteClient as RefClient
    from unienv_interface.remote import WebSocketTransport

    server, url = serve(tls_cert=certs.cert, tls_key=certs.key)
    try:
        assert url.startswith("wss://127.0.0.1:"), url
        port = url.rsplit(":", 1)[1]
        context = ssl.create_default_context(cafile=str(certs.ca))
        ways = [
            lambda: unienv_remote.RemoteClient(url, ca_file=certs.ca, timeout=10.0),
            lambda: unienv_remote.RemoteClient(f"wss://localhost:{port}", ca_file=str(certs.ca), timeout=10.0),
            lambda: unienv_remote.RemoteClient(url, ssl=context, timeout=10.0),
            # The reference's transport: its SSL context's CA is reused.
            lambda: unienv_remote.RemoteClient(WebSocketTransport.connect(url, ssl=context), timeout=10.0),
            # The reference client itself, over wss, against our server.
            lambda: RefClient(WebSocketTransport.connect(url, ssl=context), timeout=10.0),
        ]
        for k, connect in enumerate(ways):
            with connect() as client:
                assert client.env("counter").reset(seed=k)[2] == {"seed": k}, k
                client.release("counter")
    finally:
        server.close()


def test_hundreds_of_wss_connections_all_complete(certs):
    """Every TLS handshake and upgrade completes, whatever the client's timing:
    the reference's transport (its reader thread starts before it writes the
    upgrade request) over TLS 1.3 and 1.2, and our client."""
    import ssl

    from unienv_interface.remote import WebSocketTransport

    server, url = serve(tls_cert=certs.cert, tls_key=certs.key)
    try:
        failures = []
        for version, count in ((ssl.TLSVersion.TLSv1_3, 300), (ssl.TLSVersion.TLSv1_2, 50)):
            context = ssl.create_default_context(cafile=str(certs.ca))
            context.minimum_version = context.maximum_version = version
            for i in range(count):
                try:
                    WebSocketTransport.connect(url, ssl=context, open_timeout=5).close()
                except Exception as e:  # noqa: BLE001 - every failure is reported
                    failures.append(f"{version.name} #{i}: {e!r}")
        for i in range(150):
            unienv_remote.RemoteClient(url, ca_file=certs.ca, timeout=5.0).close()
        assert failures == []
    finally:
        server.close()


def test_a_ws_client_on_the_tls_port_is_told_to_use_wss(certs):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    server, url = serve(tls_cert=certs.cert, tls_key=certs.key)
    try:
        plain = url.replace("wss://", "ws://", 1)
        with pytest.raises(InvalidStatus) as refused:
            connect(plain, open_timeout=5)
        assert refused.value.response.status_code == 400
        assert b"wss://" in refused.value.response.body
        with pytest.raises(ConnectionError) as ours:
            unienv_remote.RemoteClient(plain, timeout=5.0)
        assert "wss://" in str(ours.value)
    finally:
        server.close()


def test_wss_refusals_say_what_to_pass(certs):
    import ssl

    server, url = serve(tls_cert=certs.cert, tls_key=certs.key)
    try:
        # An unknown CA: the error names ca_file= (and the CLI's --ca-file).
        with pytest.raises(ConnectionError) as refused:
            unienv_remote.RemoteClient(url, timeout=10.0)
        assert "ca_file=" in str(refused.value) and "--ca-file" in str(refused.value), str(refused.value)
        # ws:// to a TLS server.
        with pytest.raises(ConnectionError) as refused:
            unienv_remote.RemoteClient("ws://" + url[len("wss://"):], timeout=10.0)
        assert "wss://" in str(refused.value), str(refused.value)
        # Verification cannot be switched off.
        lax = ssl.create_default_context(cafile=str(certs.ca))
        lax.check_hostname = False
        lax.verify_mode = ssl.CERT_NONE
        with pytest.raises(ValueError, match="ca_file"):
            unienv_remote.RemoteClient(url, ssl=lax, timeout=10.0)
    finally:
        server.close()
    with pytest.raises(ValueError, match="tls_key"):
        unienv_remote.RemoteServer(tls_cert=certs.cert)
    broken = unienv_remote.RemoteServer(tls_cert=certs.ca.parent / "missing.pem", tls_key=certs.key)
    broken.register("counter", CounterEnv())
    with pytest.raises(ValueError, match="missing.pem"):
        broken.listen("127.0.0.1", 0)
    broken.close()


def test_a_vector_env_over_wss_matches_local_envs_and_reconnects(certs):
    gymnasium = pytest.importorskip("gymnasium")
    import numpy as np
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    def pendulums():
        s = unienv_remote.RemoteServer(tls_cert=certs.cert, tls_key=certs.key)
        for i in range(2):
            s.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
        return s, s.listen("127.0.0.1", 0)

    (s1, u1), (s2, u2) = pendulums(), pendulums()
    envs = unienv_remote.RemoteVectorEnv([(u1, "pendulum0"), (u2, "pendulum0"), (u1, "pendulum1"),
                                          (u2, "pendulum1")], ca_file=certs.ca, timeout=10.0)
    local = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("Pendulum-v1") for _ in range(4)])
    s3 = None
    try:
        assert np.array_equal(envs.reset(seed=3)[0], local.reset(seed=3)[0])
        local.action_space.seed(3)
        for _ in range(10):
            actions = local.action_space.sample()
            got, expected = envs.step(actions), local.step(actions)
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x, y)
        # Server 2 is replaced: the new connection uses the same CA.
        s2.close()
        s3, u3 = pendulums()
        mask = envs.replace_server(u2, u3)
        assert mask.tolist() == [False, True, False, True]
        assert envs.needs_reset().tolist() == mask.tolist()
        obs, _ = envs.reset(seed=5, options={"reset_mask": mask})
        assert np.array_equal(obs, local.reset(seed=5, options={"reset_mask": mask.copy()})[0])
        for _ in range(5):
            actions = local.action_space.sample()
            got, expected = envs.step(actions), local.step(actions)
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x, y)
    finally:
        envs.close()
        local.close()
        s1.close()
        s2.close()
        if s3 is not None:
            s3.close()
