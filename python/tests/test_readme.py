"""The documents' snippets run as written, in the order each document gives
them: README.md and every docs/*.md. A fenced block is marked by the line
before it:

- ``<!-- test: start -->`` starts what the block starts and keeps it running
  for the document's later blocks: in an ``sh`` block, each ``unienv-remote
  serve`` line (on port 0 instead of its ``--addr``, 8765 by default); a
  ``python`` block is a hosting script that prints its address (its
  ``listen("127.0.0.1", PORT)`` on port 0) and stops with exit code 0 on
  Ctrl-C when the document is done;
- ``<!-- test: run -->`` runs a ``python`` block to its end, or each
  ``unienv-remote`` command of an ``sh`` block in turn (exit code 0), its
  ``ws://127.0.0.1:PORT`` addresses replaced by those of what the document
  started before it: a block that needs what the document has not started
  above it fails;
- ``<!-- test: skip (reason) -->`` does not run it.

Every ``python`` block carries a mark. Also here: the first hour's other
promises (the install commands, a missing extra names itself, ``serve`` logs
no session before a client comes, the command line names the closest resource
ID where the server does not).
"""

import re
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from conftest import REPO, our_binary, start_server

pytest.importorskip("gymnasium")

DOCUMENTS = ["README.md"] + sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!-- test: (start|run|skip)(?: \((.+)\))? -->")
LOCAL = re.compile(r"ws://127\.0\.0\.1:(\d+)")


def blocks(document: str) -> List[Tuple[Optional[str], str, str]]:
    """The fenced blocks of a document in order: (mark, language, code)."""
    text = (REPO / document).read_text()
    found = []
    for fence in FENCE.finditer(text):
        before = text[:fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.fullmatch(before.strip())
        found.append((mark.group(1) if mark else None, fence.group(1), fence.group(2)))
    return found


def start_serve(*args: str, stderr=subprocess.PIPE):
    server = subprocess.Popen([str(our_binary()), "serve", *args, "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                              stderr=stderr, text=True, cwd=REPO)
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
    if server.stderr is not None:
        server.stderr.close()


def serve_args(line: str) -> Tuple[int, List[str]]:
    """The port a documented ``unienv-remote serve ...`` line listens on, and its
    other arguments."""
    words = shlex.split(line.split("#", 1)[0])[2:]
    port, rest = 8765, []
    i = 0
    while i < len(words):
        if words[i] == "--addr":
            port = int(words[i + 1].rsplit(":", 1)[1])
            i += 2
            continue
        rest.append(words[i])
        i += 1
    return port, rest


def test_every_python_block_is_marked():
    unmarked = [(document, code.splitlines()[0]) for document in DOCUMENTS
                for mark, language, code in blocks(document) if language == "python" and mark is None]
    assert unmarked == [], "mark each with <!-- test: run/start/skip (reason) -->"


def test_the_documents_run_their_snippets():
    ran = [(document, mark) for document in DOCUMENTS for mark, _, _ in blocks(document) if mark in ("run", "start")]
    # The README, the Python and the vector documents are tried in order.
    for document in ("README.md", "docs/python.md", "docs/vector.md"):
        assert (document, "run") in ran and (document, "start") in ran, document


@pytest.mark.parametrize("document", DOCUMENTS)
def test_snippets_run_in_the_order_the_document_gives_them(document, tmp_path):
    addresses: Dict[str, str] = {}
    servers, hosts = [], []

    def localize(code: str, what: str) -> str:
        missing = sorted({m.group(0) for m in LOCAL.finditer(code)} - set(addresses))
        assert not missing, f"{document}: {what} needs {missing}, which no block above it starts"
        return LOCAL.sub(lambda m: addresses[m.group(0)], code)

    try:
        for number, (mark, language, code) in enumerate(blocks(document)):
            what = f"block {number} ({code.strip().splitlines()[0]!r})"
            if mark == "start" and language == "sh":
                started = [line for line in code.splitlines() if line.startswith("unienv-remote serve")]
                assert started, f"{document}: {what} starts nothing"
                for line in started:
                    port, args = serve_args(line)
                    log = open(tmp_path / f"serve-{port}.log", "w")
                    url, server = start_serve(*args, stderr=log)
                    log.close()
                    servers.append(server)
                    addresses[f"ws://127.0.0.1:{port}"] = url
            elif mark == "start" and language == "python":
                listen = re.search(r'listen\("127\.0\.0\.1", (\d+)\)', code)
                assert listen, f"{document}: {what} listens nowhere"
                log_path = tmp_path / f"host-{listen.group(1)}.log"
                host = subprocess.Popen([sys.executable, "-c", code.replace(listen.group(0), 'listen("127.0.0.1", 0)')],
                                        stdout=subprocess.PIPE, stderr=open(log_path, "w"), text=True, cwd=REPO)
                hosts.append((host, log_path, what))
                url = host.stdout.readline().strip()
                assert url.startswith("ws://127.0.0.1:"), f"{document}: {what}: {log_path.read_text()}"
                addresses[f"ws://127.0.0.1:{listen.group(1)}"] = url
            elif mark == "run" and language == "sh":
                for line in localize(code, what).splitlines():
                    words = shlex.split(line, comments=True)
                    if not words:
                        continue
                    assert words[0] == "unienv-remote", f"{document}: {what}: only unienv-remote commands run"
                    done = subprocess.run([str(our_binary()), *words[1:]], capture_output=True, text=True,
                                          timeout=120, cwd=tmp_path)
                    assert done.returncode == 0, f"{document}: {line}:\n{done.stderr}"
            elif mark == "run":
                assert language == "python", f"{document}: {what}: only python and sh blocks run"
                done = subprocess.run([sys.executable, "-c", localize(code, what)], capture_output=True, text=True,
                                      timeout=300, cwd=tmp_path)
                assert done.returncode == 0, f"{document}: {what}:\n{done.stderr}"
        for host, log_path, what in hosts:
            host.send_signal(signal.SIGINT)
            assert host.wait(timeout=30) == 0, f"{document}: {what}: {log_path.read_text()}"
            # It logs to stderr at INFO without any logging configured.
            assert "server closed" in log_path.read_text(), log_path.read_text()
    finally:
        for host, _, _ in hosts:
            if host.poll() is None:
                host.kill()
                host.wait()
            host.stdout.close()
        for server in servers:
            stop_serve(server)


def test_the_install_commands_are_locked_and_say_how_to_watch_the_build():
    readme = (REPO / "README.md").read_text()
    assert "cargo install --locked --path ." in readme
    assert "pip install -v ./python" in readme and "[gymnasium]" in readme and "[vector]" in readme
    assert "3 minutes" in readme
    # The two commands are on the first screen.
    first_screen = "\n".join(readme.splitlines()[:40])
    assert "unienv-remote serve" in first_screen and "./scripts/test.sh" in first_screen


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
