"""Hosts that dial out, from C and from Python, reached through a relay
(SPEC.md, "Relay and dial-out hosts"; docs/network.md, "Relay").

- The C cart-pole in pump mode (``examples/c/cartpole --pump --dial URL
  --name NAME``, its callbacks on its main thread) is driven by
  ``RemoteVectorEnv`` through ``ws://RELAY/hosts/NAME`` exactly as it is
  driven when it listens: the same process serves both, and both paths give
  the same trajectories bit for bit.
- A C host with a wrong host token is refused and keeps re-dialing, saying why.
- The dialing C cart-pole runs clean under valgrind (memcheck).
- A Python host (``RemoteServer.dial``) hosting the conformance fixture
  registry gives, through the relay, the reference server's transcript with
  the reference client and with ours.
- A learner in Unity ML-Agents' shape: ``unienv_remote.Relay`` in process,
  hosts started as processes that dial it (``unienv-remote serve --dial``),
  ``relay.wait_for(n)``, ``RemoteVectorEnv(relay.addresses())``; a host
  killed and started again under its name is healed by a ``RestartPolicy``.
- A relay stopped and started again on its port: the hosts re-dial it and a
  ``RestartPolicy`` heals every env.
- ``DialHandle`` states: a taken name, a wrong token, stopping, a closed
  server; ``Relay``'s tokens and refusals; a TLS relay in process, a host
  dialing it with and without its CA.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import numpy as np
import pytest
import unienv_interface.remote as reference

import unienv_remote
from compare import transcript_differences
import certs
from conftest import Server, our_binary
from transcript import scenario
from unienv_remote import Relay, RemoteServer, RemoteVectorEnv, RestartPolicy

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROFILE = os.environ.get("UNIENV_CAPI_PROFILE", "debug")
LISTENING = re.compile(r"serving cartpole on (ws://127\.0\.0\.1:\d+)")


@pytest.fixture(scope="module")
def c_built() -> None:
    """Builds the C library and examples (make is incremental)."""
    subprocess.run(["make", "--quiet", "-C", "examples/c", f"PROFILE={PROFILE}", "CLI=0"], cwd=REPO, check=True)


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


def test_a_dialing_c_cartpole_runs_clean_under_valgrind(c_built: None) -> None:
    valgrind = shutil.which("valgrind")
    assert valgrind, "valgrind is missing: scripts/test.sh installs it (apt-get install valgrind)"
    with Relay("127.0.0.1:0") as relay:
        host = subprocess.Popen([valgrind, "--error-exitcode=99", "--leak-check=no", "--track-origins=no", "-q",
                                 str(REPO / "examples/c/cartpole"), "--pump", "--dial", relay.url, "--name", "vg"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            relay.wait_for(1, timeout=120)
            envs = RemoteVectorEnv(relay.addresses("cartpole"), timeout=60)
            envs.reset(seed=0)
            for t in range(20):
                envs.step(np.array([t % 2]))
            envs.close()
        finally:
            host.terminate()
            _, err = host.communicate(timeout=120)
    assert host.returncode == 0, err
    assert "cartpole: stopped" in err

# -- Python hosts and the relay in process ------------------------------------------------

PY_TESTS = REPO / "tests" / "py"
FIXTURE_HOST = f"""
import sys, time
sys.path.insert(0, {str(PY_TESTS)!r})
from ref_fixture_server import build
import unienv_remote
server = unienv_remote.RemoteServer(idle_timeout=60.0, validate_actions=False)
build(server)
dial = server.dial(sys.argv[1], name=sys.argv[2])
assert dial.wait_registered(timeout=60), dial.status()
print("registered", flush=True)
time.sleep(3600)
"""
REFERENCE_FIXTURES = [sys.executable, str(PY_TESTS / "ref_fixture_server.py"), "0"]


@pytest.fixture
def relay() -> Iterator[Relay]:
    with Relay("127.0.0.1:0") as r:
        yield r


@pytest.fixture
def processes() -> Iterator[List[subprocess.Popen]]:
    started: List[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.communicate()


@pytest.mark.parametrize("client", ["reference", "ours"])
def test_a_python_host_dialing_out_gives_the_reference_servers_transcript(
        relay: Relay, processes: List[subprocess.Popen], client: str) -> None:
    host = subprocess.Popen([sys.executable, "-c", FIXTURE_HOST, relay.url, "fixtures"], stdout=subprocess.PIPE,
                            text=True)
    processes.append(host)
    direct = subprocess.Popen(REFERENCE_FIXTURES, stdout=subprocess.PIPE, text=True)
    processes.append(direct)
    assert host.stdout is not None and direct.stdout is not None
    assert host.stdout.readline().strip() == "registered"
    reference_url = direct.stdout.readline().strip()
    assert [h.name for h in relay.hosts()] == ["fixtures"]
    module = reference if client == "reference" else unienv_remote
    got = scenario(module, relay.host_url("fixtures"))
    want = scenario(module, reference_url)
    mismatches = transcript_differences(got, want)
    assert not mismatches, "\n".join(m[:2000] for m in mismatches)
    assert {"ok", "error", "uncertain_outcome"} <= {r[1] for r in got}


def serve_dialing(relay_url: str, name: str) -> subprocess.Popen:
    """A Rust cartpole host that only dials (`unienv-remote serve --dial`)."""
    return subprocess.Popen([str(our_binary()), "serve", "--no-listen", "--dial", relay_url, "--name", name],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def restarted(infos: Dict[str, object]) -> List[int]:
    return [] if "restart" not in infos else [int(i) for i in np.flatnonzero(np.asarray(infos["_restart"]))]


def test_a_learner_starts_hosts_that_dial_its_relay_and_a_killed_one_heals(
        relay: Relay, processes: List[subprocess.Popen]) -> None:
    names = ["sim-0", "sim-1", "sim-2"]
    for name in names:
        processes.append(serve_dialing(relay.url, name))
    hosts = relay.wait_for(3, timeout=60)
    assert sorted(h.name for h in hosts) == names and all("cartpole" in h.resources for h in hosts)
    # Every resource of every host, by host name; or one resource's.
    assert relay.addresses() == [(relay.host_url(n), r) for n in names for r in hosts[0].resources]
    assert relay.addresses("cartpole") == [(relay.host_url(n), "cartpole") for n in names]
    assert relay.addresses("other") == []

    envs = RemoteVectorEnv(relay.addresses("cartpole"), timeout=30,
                           restart=RestartPolicy(max_restarts=3, window=600.0, timeout=60.0))
    try:
        obs, _ = envs.reset(seed=5)
        assert obs.shape == (3, 4)
        for _ in range(5):
            assert restarted(envs.step(np.array([1, 0, 1]))[4]) == []
        # sim-1 dies; the relay closes its clients at once, and a new
        # process registers under its name (the address is stable).
        processes[1].send_signal(signal.SIGKILL)
        processes[1].wait()
        processes.append(serve_dialing(relay.url, "sim-1"))
        healed: List[int] = []
        for _ in range(50):
            obs, reward, terminated, truncated, infos = envs.step(np.array([0, 1, 0]))
            healed += restarted(infos)
            if healed:
                assert truncated[1] and reward[1] == 0 and not terminated[1]
                break
        assert healed == [1]
        assert obs.shape == (3, 4) and sorted(h.name for h in relay.hosts()) == names
        envs.step(np.array([1, 1, 1]))
    finally:
        envs.close()


def test_after_a_relay_restart_the_hosts_re_dial_and_a_restart_policy_heals_every_env(
        processes: List[subprocess.Popen]) -> None:
    relay = Relay("127.0.0.1:0")
    addr = relay.url.removeprefix("ws://")
    try:
        for name in ("sim-0", "sim-1"):
            processes.append(serve_dialing(relay.url, name))
        relay.wait_for(2, timeout=60)
        envs = RemoteVectorEnv(relay.addresses("cartpole"), timeout=30,
                               restart=RestartPolicy(max_restarts=3, window=600.0, timeout=60.0))
        envs.reset(seed=1)
        envs.step(np.array([0, 1]))
        # The relay stops (every connection closed) and starts again on its
        # port; the hosts re-dial it, and the learner's envs heal.
        relay.close()
        relay = Relay(addr)
        obs, reward, terminated, truncated, infos = envs.step(np.array([1, 0]))
        assert restarted(infos) == [0, 1] and list(truncated) == [True, True], infos
        assert set(infos["restart_reason"]) == {"connection_lost"}
        assert sorted(h.name for h in relay.wait_for(2, timeout=60)) == ["sim-0", "sim-1"]
        assert restarted(envs.step(np.array([1, 1]))[4]) == []
        envs.close()
    finally:
        relay.close()


def first_failure(handle: unienv_remote.DialHandle) -> unienv_remote.DialStatus:
    """The handle's status once an attempt failed."""
    deadline = time.monotonic() + 60
    while handle.status().last_error is None:
        assert time.monotonic() < deadline, handle.status()
        time.sleep(0.01)
    return handle.status()


def test_dial_states_a_taken_name_a_wrong_token_and_stopping() -> None:
    with Relay("127.0.0.1:0", token="client-secret", host_token="host-secret") as relay:
        first, second, intruder = RemoteServer(), RemoteServer(), RemoteServer()
        try:
            for server in (first, second, intruder):
                server.register("counter", CounterEnv())
            with pytest.raises(ValueError, match="name"):
                first.dial(relay.url, name="no/slash", token="host-secret")
            with pytest.raises(ValueError, match="URL"):
                first.dial("http://127.0.0.1:1", name="a", token="host-secret")
            holder = first.dial(relay.url, name="sim", token="host-secret")
            assert holder.wait_registered(timeout=60)
            status = holder.status()
            assert (status.state, status.name, status.relay, status.registrations) == ("registered", "sim",
                                                                                       relay.url, 1)
            taken = second.dial(relay.url, name="sim", token="host-secret")
            refused = intruder.dial(relay.url, name="other", token="guess")
            for handle, why in ((taken, "name_taken"), (refused, "401")):
                status = first_failure(handle)
                assert status.state in ("waiting", "connecting") and status.registrations == 0
                assert status.last_error is not None and why in status.last_error, status
            assert [h.name for h in relay.hosts()] == ["sim"]

            # Clients need the client token: through the relay as direct.
            with pytest.raises(ConnectionError, match="401"):
                unienv_remote.RemoteClient.connect(relay.host_url("sim"), token="host-secret")
            client = unienv_remote.RemoteClient.connect(relay.host_url("sim"), token="client-secret")
            assert client.env("counter").reset(seed=2)[1]["position"].tolist() == [2.0, 2.0]
            client.close()
            assert holder.status().tunnels == 1

            # The holder stops: the name goes to the waiting host.
            holder.stop()
            assert taken.wait_registered(timeout=60)
            deadline = time.monotonic() + 60
            while holder.status().state != "stopped":  # stopping runs in the background
                assert time.monotonic() < deadline, holder.status()
                time.sleep(0.01)
            assert not holder.wait_registered(timeout=None)
            # A closed server's dialing is stopped.
            second.close()
            assert taken.status().state == "stopped"
        finally:
            for server in (first, second, intruder):
                server.close()


def test_relay_refusals_and_waits() -> None:
    with pytest.raises(ValueError, match="tls_cert and tls_key"):
        Relay("127.0.0.1:0", tls_cert="cert.pem")
    with pytest.raises(ValueError, match="open_timeout"):
        Relay("127.0.0.1:0", open_timeout=0)
    relay = Relay("127.0.0.1:0")
    with pytest.raises(OSError):
        Relay(relay.url.removeprefix("ws://"))  # the port is taken
    with pytest.raises(TimeoutError, match="0 of 1 hosts"):
        relay.wait_for(1, timeout=0.2)
    assert relay.wait_for(0, timeout=0) == []
    with pytest.raises(ValueError, match="name"):
        relay.host_url("a b")
    assert not relay.closed
    relay.close()
    relay.close()
    assert relay.closed
    with pytest.raises(RuntimeError, match="closed"):
        relay.wait_for(1, timeout=1)


def test_a_tls_relay_in_process_serves_a_python_host_and_a_client_over_wss(tmp_path: Path) -> None:
    if not certs.available():
        pytest.fail("openssl is missing: the tests make their certificates with it")
    made = certs.make(tmp_path)
    with Relay("127.0.0.1:0", tls_cert=made.cert, tls_key=made.key) as relay, RemoteServer() as host:
        assert relay.url.startswith("wss://127.0.0.1:")
        host.register("counter", CounterEnv())
        untrusted = host.dial(relay.url, name="untrusted")  # no CA file: the relay's certificate is refused
        trusted = host.dial(relay.url, name="sim", ca_file=made.ca)
        assert trusted.wait_registered(timeout=60)
        status = first_failure(untrusted)
        assert status.registrations == 0 and "certificate" in (status.last_error or ""), status
        untrusted.stop()
        client = unienv_remote.RemoteClient(relay.host_url("sim"), ca_file=made.ca, timeout=10.0)
        assert client.env("counter").reset(seed=3)[1]["position"].tolist() == [3.0, 3.0]
        client.close()
