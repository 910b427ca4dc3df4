"""Servers for the client tests: ours (the crate's `unienv-remote serve
--fixtures`) and the reference (`tests/py/ref_fixture_server.py`), both hosting
the conformance fixture registry on 127.0.0.1 with a port the OS picks.

Our server binary is `$UNIENV_REMOTE_BIN`, or `target/{debug,release}/unienv-remote`
(built with `cargo build --bin unienv-remote` when neither exists).
"""

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
REF_SERVER = REPO / "tests" / "py" / "ref_fixture_server.py"
URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")


def our_binary() -> Path:
    explicit = os.environ.get("UNIENV_REMOTE_BIN")
    if explicit:
        return Path(explicit)
    for profile in ("debug", "release"):
        candidate = REPO / "target" / profile / "unienv-remote"
        if candidate.exists():
            return candidate
    subprocess.run(["cargo", "build", "--quiet", "--bin", "unienv-remote"], cwd=REPO, check=True)
    return REPO / "target" / "debug" / "unienv-remote"


class Server:
    """A server process; `url` is its ws:// address."""

    def __init__(self, kind: str, command: List[str]) -> None:
        self.kind = kind
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        cwd=REPO)
        self.url: Optional[str] = None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            match = URL.search(line)
            if match:
                self.url = match.group(1)
                break
        if self.url is None:
            self.process.kill()
            raise RuntimeError(f"the {kind} server printed no ws:// URL (exit code {self.process.wait()})")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_server(kind: str, idle_timeout: Optional[float] = None) -> Server:
    if kind == "ours":
        command = [str(our_binary()), "serve", "--fixtures", "--addr", "127.0.0.1:0"]
        if idle_timeout is not None:
            command += ["--idle-timeout", str(idle_timeout)]
    elif kind == "reference":
        command = [sys.executable, str(REF_SERVER), "0"]
        if idle_timeout is not None:
            command.append(str(idle_timeout))
    else:
        raise ValueError(kind)
    return Server(kind, command)


@pytest.fixture
def servers() -> Iterator[Callable[..., Server]]:
    """A factory of fresh servers (`servers("ours")`), all stopped after the test."""
    started: List[Server] = []

    def start(kind: str, idle_timeout: Optional[float] = None) -> Server:
        server = start_server(kind, idle_timeout)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def our_server() -> Iterator[Server]:
    """One of our servers shared by a module's tests (for tests that only
    read, or that use resources no other test of the module touches)."""
    server = start_server("ours")
    yield server
    server.stop()
