"""A script hosting envs with ``unienv_remote.RemoteServer`` tells what happens on
stderr without configuring anything: sessions, a failing env (its ID and the
exception with its traceback), the fault, refused actions, and shutdown; an
application's own logging configuration takes over from the default handler.
"""

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("gymnasium")

HOST = textwrap.dedent("""
    import logging, sys
    import gymnasium
    import numpy as np
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv
    from unienv_remote import RemoteClient, RemoteServer
    from unienv_interface.remote.errors import RemoteError

    class Broken(FromGymnasiumEnv):
        def step(self, action):
            return explode(action)

    def explode(action):
        raise ZeroDivisionError("the simulator divided by zero")

    if sys.argv[1] == "debug":
        logging.getLogger("unienv_remote").setLevel(logging.DEBUG)
    if sys.argv[1] == "basicConfig":
        logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="APP %(levelname)s %(name)s %(message)s")
    server = RemoteServer(idle_timeout=None)
    server.register("broken_pendulum", Broken(gymnasium.make("Pendulum-v1")))
    url = server.listen("127.0.0.1", 0)
    client = RemoteClient.connect(url)
    env = client.env("broken_pendulum")
    env.reset(seed=0)
    for action in ([5.0], [0.5]):
        try:
            env.step(action)
        except RemoteError as e:
            pass
    client.close()
    server.close()
""")


def host(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", HOST, mode], capture_output=True, text=True, timeout=120)


def test_a_hosting_script_logs_sessions_faults_refusals_and_shutdown():
    done = host("default")
    assert done.returncode == 0, done.stderr
    log = done.stderr
    assert "INFO unienv_remote.server: listening on ws://127.0.0.1:" in log, log
    assert "session opened" in log and "session closed" in log, log
    # The refused action names the env, the element and the bound.
    assert "action refused" in log and "broken_pendulum" in log and "above the high bound 2" in log, log
    # The failing env: its ID and the exception with its traceback.
    assert "ERROR unienv_remote.host: step() on 'broken_pendulum' raised ZeroDivisionError" in log, log
    assert "Traceback (most recent call last)" in log and "in explode" in log, log
    assert "ZeroDivisionError: the simulator divided by zero" in log, log
    assert "domain faulted" in log, log
    assert log.rstrip().endswith("INFO unienv_remote.server: server closed"), log


def test_the_applications_logging_configuration_takes_over():
    done = host("basicConfig")
    assert done.returncode == 0, done.stderr
    # Only the application's handler prints, at its level (WARNING): no
    # duplicate on stderr, no INFO records.
    assert "unienv_remote" not in done.stderr, done.stderr
    assert "APP ERROR unienv_remote.host step() on 'broken_pendulum' raised ZeroDivisionError" in done.stdout
    assert "session opened" not in done.stdout
    assert "APP WARNING unienv_remote.server.domain" in done.stdout, done.stdout


def test_a_level_set_before_the_server_starts_is_the_level_forwarded():
    done = host("debug")
    assert done.returncode == 0, done.stderr
    # DEBUG events of the crate (control, the request path) reach logging
    # (through the default handler: no handler was configured).
    assert "DEBUG unienv_remote.server.domain" in done.stderr and "control acquired" in done.stderr, done.stderr
