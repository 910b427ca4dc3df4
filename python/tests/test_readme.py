"""The README's Python sections run as written: every ``python`` snippet of
"## Python" (against ``unienv-remote serve``, the address replaced by the test
server's) and of "## Serve a Python simulator" (a hosting script, stopped with
Ctrl-C); plus the first hour's other promises: a missing extra names itself,
``serve`` logs no session before a client comes, and the command line names
the closest resource ID where the server does not.
"""

import re
import signal
import subprocess
import sys
from typing import List

import pytest

from conftest import REPO, our_binary, start_server

pytest.importorskip("gymnasium")

ADDRESS = "ws://127.0.0.1:8765"


def section(title: str) -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def snippets(title: str, language: str = "python") -> List[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(title), flags=re.S)


def start_serve():
    server = subprocess.Popen([str(our_binary()), "serve", "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=REPO)
    url = None
    banner = []
    for line in server.stdout:
        banner.append(line)
        url = url or (re.search(r"(ws://127\.0\.0\.1:\d+)", line) or [None])[0]
        if line.startswith("Press Ctrl-C"):
            break
    assert url is not None, banner
    return url, server


def stop_serve(server):
    if server.poll() is None:
        server.terminate()
        server.wait(timeout=10)
    server.stdout.close()
    server.stderr.close()


@pytest.fixture(scope="module")
def serve():
    url, server = start_serve()
    yield url, server
    stop_serve(server)


def run_snippet(code: str, url: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code.replace(ADDRESS, url)], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_the_install_block_says_which_extra_and_how_to_watch_the_build():
    install = snippets("Python", "sh")[0]
    assert "pip install -v" in install and "[gymnasium]" in install and "[vector]" in install
    assert "3 minutes" in section("Python")


@pytest.mark.parametrize("index", range(len(snippets("Python"))))
def test_python_section_snippets_run_against_serve(serve, index):
    url, _ = serve
    code = snippets("Python")[index]
    assert ADDRESS in code
    done = run_snippet(code, url)
    assert done.returncode == 0, done.stderr


def test_serve_a_python_simulator_snippet_hosts_until_ctrl_c():
    (code,) = snippets("Serve a Python simulator")
    assert "import gymnasium" in code and "FromGymnasiumEnv" in code
    host = subprocess.Popen([sys.executable, "-c", code.replace("8765", "0")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        url = host.stdout.readline().strip()
        assert url.startswith("ws://127.0.0.1:"), host.stderr.read() if host.poll() is not None else url
        import unienv_remote
        client = unienv_remote.RemoteClient.connect(url)
        env = client.env("pendulum")
        env.reset(seed=0)
        obs, reward, *_ = env.step([0.5])
        assert obs.shape == (3,)
        client.close()
        host.send_signal(signal.SIGINT)
        assert host.wait(timeout=30) == 0
        log = host.stderr.read()
        assert "session opened" in log and "server closed" in log, log
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        host.stdout.close()
        host.stderr.close()


def test_a_missing_extra_names_the_extra():
    code = ("import sys; sys.modules['gymnasium'] = None\n"
            "import unienv_remote\n"
            "try:\n"
            "    unienv_remote.RemoteVectorEnv\n"
            "except ModuleNotFoundError as e:\n"
            "    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert 'pip install "unienv-remote[vector]"' in done.stdout, done.stdout + done.stderr


def test_the_ray_module_names_its_extra():
    code = ("import sys; sys.modules['ray'] = None\n"
            "try:\n"
            "    import unienv_remote.ray\n"
            "except ModuleNotFoundError as e:\n"
            "    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert 'pip install "unienv-remote[ray]"' in done.stdout, done.stdout + done.stderr


def test_serve_logs_no_session_before_a_client_comes():
    url, server = start_serve()
    called = subprocess.run([str(our_binary()), "call", url, "cartpole", "reset"], capture_output=True, text=True,
                            timeout=60)
    assert called.returncode == 0, called.stderr
    server.send_signal(signal.SIGINT)
    server.wait(timeout=30)
    log = server.stderr.read()
    stop_serve(server)
    # One session: the call's (none for the banner's own descriptors).
    assert log.count("session opened") == 1, log


def test_the_command_line_suggests_the_closest_id_on_any_server():
    reference = start_server("reference")
    try:
        done = subprocess.run([str(our_binary()), "call", reference.url, "countr", "reset"], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode != 0
        assert "Unknown resource ID 'countr'; did you mean 'counter'?" in done.stderr, done.stderr
    finally:
        reference.stop()


SLOW_HOST = """
import sys, threading
import numpy as np
sys.path.insert(0, "tests/py")
from ref_fixture_server import CounterEnv
from unienv_remote import RemoteServer

class Stuck(CounterEnv):
    def step(self, action):
        print("entered", flush=True)
        threading.Event().wait()

server = RemoteServer(idle_timeout=None)
server.register("stuck", Stuck())
print(server.listen("127.0.0.1", 0), flush=True)
threading.Event().wait()
"""


@pytest.mark.parametrize("cause", ["timeout", "lost"])
def test_a_lost_reply_says_whether_it_timed_out_or_the_connection_was_lost(cause):
    import threading

    import numpy as np
    import unienv_remote
    host = subprocess.Popen([sys.executable, "-c", SLOW_HOST], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, cwd=REPO)
    try:
        url = host.stdout.readline().strip()
        assert url.startswith("ws://"), url
        # A timeout long enough never to fire first when the server is killed.
        client = unienv_remote.RemoteClient.connect(url, timeout=0.5 if cause == "timeout" else 120.0)
        env = client.env("stuck")
        env.reset(seed=0)
        if cause == "lost":
            def kill_when_entered():
                if host.stdout.readline().strip() == "entered":
                    host.kill()
            threading.Thread(target=kill_when_entered, daemon=True).start()
        with pytest.raises(unienv_remote.UncertainOutcomeError) as lost:
            env.step(np.zeros(2, np.float32))
        message = str(lost.value)
        assert message.endswith("the remote mutation may have executed"), message
        if cause == "timeout":
            assert message.startswith("No reply within 0.5 s (timeout"), message
        else:
            assert message.startswith("Connection lost ("), message
    finally:
        if host.poll() is None:
            host.kill()
        host.wait()
        host.stdout.close()
