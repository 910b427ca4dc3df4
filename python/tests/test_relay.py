"""The shared transcript through a relay: a host that dials out
(`unienv-remote serve --fixtures --dial URL --name NAME --no-listen`) reached
at `ws://RELAY/hosts/NAME` gives the reference client and ours the very
results a listening server gives the reference client (SPEC.md, "Relay and
dial-out hosts")."""

import json
import time
import urllib.request
from typing import Iterator, List

import pytest
import unienv_interface.remote as reference

import unienv_remote as ours
from compare import assert_same_transcripts
from conftest import Server, our_binary, start_server
from transcript import scenario


@pytest.fixture
def relay() -> Iterator[Server]:
    server = Server("relay", [str(our_binary()), "relay", "--addr", "127.0.0.1:0"])
    yield server
    server.stop()


def hosts(relay_url: str) -> List[str]:
    http = relay_url.replace("ws://", "http://", 1)
    with urllib.request.urlopen(f"{http}/hosts", timeout=30) as answer:
        return [h["name"] for h in json.load(answer)["hosts"]]


def dialing_host(relay_url: str, name: str) -> Server:
    """A fixture host dialing the relay, once the relay lists it."""
    host = Server("host", [str(our_binary()), "serve", "--fixtures", "--no-listen", "--name", name,
                           "--dial", relay_url])
    deadline = time.monotonic() + 60
    while name not in hosts(relay_url):
        assert host.process.poll() is None, "the host exited"
        assert time.monotonic() < deadline, f"{name} never registered"
        time.sleep(0.02)
    return host


def test_both_clients_see_through_the_relay_what_the_reference_sees_direct(relay: Server) -> None:
    assert relay.url is not None
    direct = start_server("ours")
    started = [direct]
    try:
        assert direct.url is not None
        want = scenario(reference, direct.url)
        for module, name in [(reference, "for_reference"), (ours, "for_ours")]:
            host = dialing_host(relay.url, name)
            started.append(host)
            got = scenario(module, f"{relay.url}/hosts/{name}")
            assert_same_transcripts(got, want, f"{module.__name__} through the relay vs the reference client direct")
        assert {"ok", "error", "uncertain_outcome", "exception"} <= {r[1] for r in want}
    finally:
        for s in started:
            s.stop()
