"""The conformance fixture registry hosted by ``unienv_remote.RemoteServer`` behaves
like the same Python objects hosted by the reference server.

Both servers run ``tests/py/ref_fixture_server.py`` (the shared fixture registry,
built from the same Python classes) in their own process — the reference's by
default, ours with ``UNIENV_SERVER_MODULE=unienv_remote`` — and the shared transcript of
``python/tests/transcript.py``, through ``tests/py/compare_fixtures.py`` (env mode batched and unbatched, the reference
``RemoteWorldEnv`` in components mode, detached devices, ownership conflicts,
faults and recovery, a disconnect mid-operation, a client timeout,
serialization errors, observers, factories) runs against each with the
reference client, then with ours; every result must be identical (types,
dtypes, shapes, values, descriptors, error codes and uncertainty).
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from unienv_interface.remote.codec import Codec
from websockets.sync.client import connect

ROOT = Path(__file__).resolve().parents[2]
PY_TESTS = ROOT / "tests" / "py"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, PY_TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FixtureServer:
    """``ref_fixture_server.py`` in a subprocess, on 127.0.0.1 and a free port."""

    def __init__(self, module=None, idle_timeout=None):
        env = dict(os.environ)
        if module is not None:
            env["UNIENV_SERVER_MODULE"] = module
        args = [sys.executable, str(PY_TESTS / "ref_fixture_server.py"), "0"]
        if idle_timeout is not None:
            args.append(str(idle_timeout))
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, text=True)
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("ws://127.0.0.1:"), self.url
        # Which server answers: "unienv-remote" (ours) or "unienv" (the reference).
        with connect(self.url) as ws:
            codec = Codec()
            ws.send(codec.encode({"version": 1, "type": "request", "request_id": "h", "op": "hello"}))
            self.name = codec.decode(ws.recv())["result"]["server"]

    def close(self):
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def fixture_servers():
    ours, reference = FixtureServer("unienv_remote"), FixtureServer()
    assert (ours.name, reference.name) == ("unienv-remote", "unienv")
    yield ours, reference
    ours.close()
    reference.close()


def _compare(compare, ours_url, reference_url):
    got, mismatches = compare.compare(ours_url, reference_url)
    assert not mismatches, "\n".join(m[:2000] for m in mismatches)
    kinds = {r[1] for r in got}
    assert {"ok", "error", "uncertain_outcome"} <= kinds, kinds
    return got


def test_fixture_registry_under_the_reference_client(fixture_servers):
    ours, reference = fixture_servers
    compare = _load("compare_fixtures")
    got = _compare(compare, ours.url, reference.url)
    assert len(got) >= 74


def test_fixture_registry_under_our_client():
    """The same scenario through ``unienv_remote.RemoteClient`` against both
    servers (two fresh servers: the scenario counts factory instantiations)."""
    import unienv_remote

    compare = _load("compare_fixtures")
    compare.remote = unienv_remote
    ours, reference = FixtureServer("unienv_remote"), FixtureServer()
    assert (ours.name, reference.name) == ("unienv-remote", "unienv")
    try:
        _compare(compare, ours.url, reference.url)
    finally:
        ours.close()
        reference.close()
