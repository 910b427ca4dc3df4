"""Hosts that dial out, from C and from Python, reached through a relay
(SPEC.md, "Relay and dial-out hosts"; docs/network.md, "Relay").

- The C cart-pole in pump mode (``examples/c/cartpole --pump --dial URL
  --name NAME``, its callbacks on its main thread) is driven by
  ``RemoteVectorEnv`` through ``ws://RELAY/hosts/NAME`` exactly as it is
  driven when it listens: the same process serves both, and both paths give
  the same trajectories bit for bit.
- A C host with a wrong host token is refused and keeps re-dialing, saying why.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Iterator, List, Optional

import numpy as np
import pytest

from conftest import Server, our_binary
from unienv_remote import RemoteVectorEnv

REPO = Path(__file__).resolve().parents[2]
PROFILE = os.environ.get("UNIENV_CAPI_PROFILE", "debug")
LISTENING = re.compile(r"serving cartpole on (ws://127\.0\.0\.1:\d+)")


@pytest.fixture(scope="module")
def c_built() -> None:
    """Builds the C library and examples (make is incremental)."""
    subprocess.run(["make", "--quiet", "-C", "examples/c", f"PROFILE={PROFILE}"], cwd=REPO, check=True)


def listed(relay_url: str, token: Optional[str] = None) -> List[str]:
    """The names of the hosts the relay lists (its JSON endpoint)."""
    request = urllib.request.Request(relay_url.replace("ws://", "http://", 1) + "/hosts")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return [h["name"] for h in json.load(answer)["hosts"]]


class CHost:
    """examples/c/cartpole with `args`; `url` is its listening address when
    `listens`."""

    def __init__(self, args: List[str], listens: bool = False) -> None:
        self.process = subprocess.Popen([str(REPO / "examples/c/cartpole"), *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=REPO)
        self.url: Optional[str] = None
        assert self.process.stdout is not None
        if listens:
            for line in self.process.stdout:
                match = LISTENING.search(line)
                if match:
                    self.url = match.group(1)
                    break
            assert self.url is not None, "the C host printed no listening address"

    def stop(self) -> str:
        """SIGTERM; it must exit with status 0. Its stderr."""
        if self.process.poll() is None:
            self.process.terminate()
        _, err = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, err
        return err


@pytest.fixture
def c_hosts(c_built: None) -> Iterator[List[CHost]]:
    started: List[CHost] = []
    yield started
    for h in started:
        if h.process.poll() is None:
            h.process.kill()
            h.process.communicate()


@pytest.fixture
def cli_relay() -> Iterator[Server]:
    """`unienv-remote relay` requiring a host token."""
    relay = Server("relay", [str(our_binary()), "relay", "--addr", "127.0.0.1:0", "--host-token", "host-secret"])
    yield relay
    relay.stop()


def wait_listed(relay_url: str, names: List[str], hosts: List[CHost]) -> None:
    deadline = time.monotonic() + 60
    while not set(names) <= set(listed(relay_url)):
        for h in hosts:
            assert h.process.poll() is None, h.process.communicate()[1]
        assert time.monotonic() < deadline, f"{names} never registered"
        time.sleep(0.02)


def trajectory(envs: RemoteVectorEnv, steps: int) -> List[np.ndarray]:
    """Observations and rewards of `steps` steps of a fixed action pattern."""
    obs, _ = envs.reset(seed=[3, 4])
    seen = [obs.copy()]
    for t in range(steps):
        obs, reward, terminated, truncated, _ = envs.step(np.array([t % 2, (t // 3) % 2]))
        seen += [obs.copy(), reward.copy(), terminated.copy(), truncated.copy()]
    return seen


def test_a_pump_mode_c_cartpole_dialing_out_is_driven_by_remote_vector_env(
        cli_relay: Server, c_hosts: List[CHost]) -> None:
    assert cli_relay.url is not None
    names = ["cart-0", "cart-1"]
    for name in names:
        c_hosts.append(CHost(["--pump", "--dial", cli_relay.url, "--name", name, "--host-token", "host-secret",
                              "127.0.0.1:0"], listens=True))
    wait_listed(cli_relay.url, names, c_hosts)

    relayed = RemoteVectorEnv([(f"{cli_relay.url}/hosts/{n}", "cartpole") for n in names], timeout=30)
    assert relayed.num_envs == 2 and relayed.single_observation_space.shape == (4,)
    through_relay = trajectory(relayed, 40)
    relayed.close()
    direct = RemoteVectorEnv([(h.url or "", "cartpole") for h in c_hosts], timeout=30)
    assert [a.tobytes() for a in trajectory(direct, 40)] == [a.tobytes() for a in through_relay]
    direct.close()
    assert any(bool(t.any()) for t in through_relay[3::4]), "some episode ended (autoreset through the relay)"

    for h in c_hosts:
        err = h.stop()
        assert "cartpole: stopped" in err and "not registered" not in err, err


def test_a_c_host_with_a_wrong_host_token_is_refused_and_keeps_re_dialing(
        cli_relay: Server, c_hosts: List[CHost]) -> None:
    assert cli_relay.url is not None
    h = CHost(["--pump", "--dial", cli_relay.url, "--name", "intruder", "--host-token", "guess"])
    c_hosts.append(h)
    assert h.process.stdout is not None
    assert h.process.stdout.readline().startswith(f"dialing {cli_relay.url} as intruder")
    assert h.process.stderr is not None
    first = h.process.stderr.readline()
    assert "not registered" in first and "401" in first, first
    assert "intruder" not in listed(cli_relay.url)
    h.stop()
