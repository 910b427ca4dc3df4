"""Servers for the client tests: ours (the crate's `unienv-remote serve
--fixtures`) and the reference (`tests/py/ref_fixture_server.py`), both hosting
the conformance fixture registry on 127.0.0.1 with a port the OS picks.

Our server binary is `$UNIENV_REMOTE_BIN`, or the one `cargo build --bin
unienv-remote` makes from this checkout (run once per test session: it is
up to date then, never a stale binary left in `target/` by another build or
profile; cargo names the file it built).

With `CI=true` a skipped test is a failure (its skip reason kept): CI on a
fresh machine must run every test, never pass by leaving some out.
"""

import json
import os
import re
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
REF_SERVER = REPO / "tests" / "py" / "ref_fixture_server.py"
URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")


@lru_cache(maxsize=None)
def our_binary() -> Path:
    explicit = os.environ.get("UNIENV_REMOTE_BIN")
    if explicit:
        return Path(explicit)
    built = subprocess.run(
        ["cargo", "build", "--quiet", "--bin", "unienv-remote", "--message-format=json-render-diagnostics"],
        cwd=REPO, check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    for line in built.splitlines():
        message = json.loads(line)
        if message.get("reason") == "compiler-artifact" and message.get("executable") \
                and message.get("target", {}).get("name") == "unienv-remote":
            return Path(message["executable"])
    raise RuntimeError("cargo build --bin unienv-remote named no executable")


def _ci() -> bool:
    return os.environ.get("CI") == "true"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "ci_may_skip: the test may skip on CI too (a property of the machine, not a missing dependency)")


def _fail_skip(report: "pytest.TestReport | pytest.CollectReport", item: Optional[pytest.Item] = None) -> None:
    """Turns a skip into a failure on CI, keeping its reason."""
    if item is not None and item.get_closest_marker("ci_may_skip") is not None:
        return
    if _ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped with CI=true (CI must run every test): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    _fail_skip(outcome.get_result(), item)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    # A module-level skip (pytest.importorskip) happens at collection.
    outcome = yield
    _fail_skip(outcome.get_result())


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


def wait_stopped(pid: int, deadline_s: float = 60.0) -> None:
    """Returns once every thread of ``pid`` is stopped (state T): kill()
    returns before a group stop has reached them all."""
    deadline = time.monotonic() + deadline_s
    while True:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:  # a thread that ended meanwhile
                pass
        if states and all(state == "T" for state in states):
            return
        assert time.monotonic() < deadline, f"process {pid} not stopped: {states}"
        time.sleep(0.01)
