"""Envs hosted from C and C++ through the C ABI (capi/, include/unienv_remote.h):
the examples are built with make (the library through cargo), run as processes,
and driven by the reference client and ours.

- Every transition of the C, pump-mode C and C++ cart-poles is checked against
  Gymnasium's own ``CartPole-v1`` reset with the same seed (the examples seed
  as Gymnasium does, NumPy's SeedSequence and PCG64) and stepped in lockstep:
  start states and observations bit for bit, rewards, termination, truncation
  at 500.
- Callback errors keep the protocol's meaning (examples/c/faults.c): a refused
  argument is a certain ``invalid_request``; a failure, a wrong-shaped
  observation or a missing result is an ``execution_error`` that faults the env
  until a reset; a callback that never returns times its clients out while
  another env answers, and the process still stops within its shutdown timeout.
- The examples run under valgrind (memcheck) without an error.

The build profile is ``$UNIENV_CAPI_PROFILE`` (default ``debug``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.remote import RemoteClient as RefClient  # noqa: E402
from unienv_interface.remote.errors import RemoteError  # noqa: E402

import unienv_remote  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROFILE = os.environ.get("UNIENV_CAPI_PROFILE", "debug")
URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")

HOSTS = {
    "c": ["examples/c/cartpole"],
    "c-pump": ["examples/c/engine_loop"],
    "cpp": ["examples/cpp/cartpole"],
    "cpp-pump": ["examples/cpp/cartpole", "pump"],
}


@pytest.fixture(scope="session")
def built() -> None:
    """Builds the library and the C and C++ examples (make is incremental)."""
    for directory in ("examples/c", "examples/cpp"):
        subprocess.run(["make", "--quiet", "-C", directory, f"PROFILE={PROFILE}", "CLI=0"], cwd=REPO, check=True)


class Host:
    """A server process on 127.0.0.1 with a port the OS picked (`argv` gets the
    address appended unless it names it)."""

    def __init__(self, argv: List[str]) -> None:
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            match = URL.search(line)
            if match:
                self.url = match.group(1)
                return
        self.process.kill()
        _, err = self.process.communicate()
        raise RuntimeError(f"{argv} printed no URL; stderr: {err}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> str:
        """Signals the process and returns its stderr; it must exit with status 0."""
        self.process.send_signal(sig)
        try:
            _, err = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
            raise AssertionError(f"the host did not stop within {timeout} s: {err}")
        assert self.process.returncode == 0, err
        return err


@pytest.fixture
def host(built: None) -> Iterator[Callable[..., Host]]:
    started: List[Host] = []

    def start(command: List[str], prefix: Optional[List[str]] = None) -> Host:
        h = Host((prefix or []) + [str(REPO / command[0]), "127.0.0.1:0"] + command[1:])
        started.append(h)
        return h

    yield start
    for h in started:
        if h.process.poll() is None:
            h.process.kill()
            h.process.wait()


@pytest.fixture(scope="session")
def rust_spaces() -> Iterator[Any]:
    """The spaces of the crate's Rust-hosted `cartpole` (`unienv-remote serve`)."""
    from conftest import our_binary

    h = Host([str(our_binary()), "serve", "--addr", "127.0.0.1:0"])
    c = RefClient.connect(h.url)
    env = c.env("cartpole")
    yield str(env.action_space), str(env.observation_space)
    c.close()
    h.stop()


def connect(kind: str, url: str, **options: Any) -> Any:
    return (RefClient if kind == "reference" else unienv_remote.RemoteClient).connect(url, **options)


def policy(obs: np.ndarray) -> int:
    """Balances the pole for 500 steps from Gymnasium's start states."""
    return int(obs[2] + 0.5 * obs[3] + 0.01 * obs[0] + 0.1 * obs[1] > 0)


def lockstep(remote: Any, seed: Optional[int], choose: Callable[[np.ndarray, int], Any], steps_after_end: int,
             local: Any = None) -> int:
    """One episode on `remote` and on Gymnasium's CartPole-v1 (`local`, or a
    new one), both reset with `seed` (None: an unseeded reset, which continues
    each one's random stream): the start state and every transition must be
    identical (the example seeds as Gymnasium does: examples/c/numpy_random.h).
    Returns the episode length."""
    context, obs, info = remote.reset(seed=seed)
    assert context is None and info == {}
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and obs.shape == (4,)
    if local is None:
        local = gymnasium.make("CartPole-v1")
    want_obs, _ = local.reset(seed=seed)
    assert obs.tobytes() == want_obs.tobytes(), (seed, obs, want_obs)
    t, left = 0, None
    while left is None or left > 0:
        action = choose(obs, t)
        got = remote.step(action)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Gymnasium warns on steps after termination
            want_obs, want_reward, want_term, want_trunc, _ = local.step(int(action))
        obs, reward, terminated, truncated, info = got
        t += 1
        assert obs.dtype == np.float32 and obs.tobytes() == want_obs.tobytes(), (t, obs, want_obs)
        assert (reward, terminated, truncated, info) == (float(want_reward), want_term, want_trunc, {}), t
        assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
        if left is not None:
            left -= 1
        elif terminated or truncated:
            left = steps_after_end if terminated else 0
    return t


@pytest.mark.parametrize("client", ["reference", "ours"])
@pytest.mark.parametrize("name", list(HOSTS))
def test_cartpole_matches_gymnasium(host: Callable[..., Host], rust_spaces: Any, name: str, client: str) -> None:
    h = host(HOSTS[name])
    c = connect(client, h.url)
    env = c.env("cartpole")
    assert (str(env.action_space), str(env.observation_space)) == rust_spaces
    rng = np.random.default_rng(3)
    # Random pushes end soon, by termination; steps after it keep integrating
    # with reward 0. NumPy integers arrive as 0-d arrays, Python ints as ints.
    for seed in (1, 2):
        n = lockstep(env, seed, lambda o, t: rng.integers(0, 2) if t % 2 else int(rng.integers(0, 2)), 3)
        assert 8 <= n < 100
    # A balancing policy reaches the 500-step truncation.
    assert lockstep(env, 7, lambda o, t: policy(o), 0) == 500
    # The same seed gives the same episode start; options bound it.
    first = env.reset(seed=11)[1]
    assert env.reset(seed=11)[1].tobytes() == first.tobytes()
    assert np.all(np.abs(env.reset(seed=1, options={"low": -0.001, "high": 0.001})[1]) <= 0.001)
    # Gymnasium refuses a negative seed (seeding.np_random): so does the example.
    with pytest.raises(RemoteError) as e:
        env.reset(seed=-1)
    assert e.value.code == "invalid_request" and not e.value.uncertain and "non-negative" in str(e.value)
    # Refusals are certain and leave the env usable.
    for bad in (2, -1, 0.5, "left", np.array([1.0])):
        with pytest.raises(RemoteError) as e:
            env.step(bad)
        assert e.value.code == "invalid_request" and not e.value.uncertain, bad
        assert "action must be 0 or 1" in str(e.value)
    with pytest.raises(RemoteError) as e:
        env.reset(seed=1, options={"low": "x"})
    assert e.value.code == "invalid_request" and "must be a" in str(e.value), e.value
    assert env.step(1)[0].shape == (4,)
    c.close()
    err = h.stop(signal.SIGINT if client == "ours" else signal.SIGTERM)
    assert "stopped" in err


@pytest.mark.parametrize("name", ["c", "cpp"])
def test_seeded_like_gymnasium(host: Callable[..., Host], name: str) -> None:
    """From `reset(seed=s)` on, the example's episodes are Gymnasium's own:
    the start state drawn as `np_random.uniform(-0.05, 0.05, 4)` from
    Generator(PCG64(SeedSequence(s))) (seeds of one and two 32-bit words,
    0 and the largest int64 included), the trajectory under the same random
    actions, unseeded resets continuing the stream, and options' bounds."""
    h = host(HOSTS[name])
    c = unienv_remote.RemoteClient.connect(h.url)
    env = c.env("cartpole")
    rng = np.random.default_rng(5)
    for seed in (0, 1, 42, 12345, 2**32 - 1, 2**32, 2**63 - 1):
        local = gymnasium.make("CartPole-v1")
        lockstep(env, seed, lambda o, t: int(rng.integers(0, 2)), 2, local)
        # The next, unseeded, resets draw on from the same generator.
        lockstep(env, None, lambda o, t: int(rng.integers(0, 2)), 0, local)
        lockstep(env, None, lambda o, t: int(rng.integers(0, 2)), 0, local)
    options = {"low": -0.2, "high": 0.1}
    got = env.reset(seed=3, options=options)[1]
    want = gymnasium.make("CartPole-v1").reset(seed=3, options=options)[0]
    assert got.tobytes() == want.tobytes()
    c.close()
    h.stop()


def test_step_before_reset_is_refused(host: Callable[..., Host]) -> None:
    h = host(HOSTS["c"])
    c = unienv_remote.RemoteClient.connect(h.url)
    env = c.env("cartpole")
    with pytest.raises(RemoteError) as e:
        env.step(0)
    assert e.value.code == "invalid_request" and "reset" in str(e.value) and not e.value.uncertain
    env.reset(seed=0)
    env.step(0)
    c.close()
    h.stop()


@pytest.mark.parametrize("client", ["reference", "ours"])
def test_callback_errors_keep_their_protocol_meaning(host: Callable[..., Host], client: str) -> None:
    h = host(["examples/c/faults"])
    c = connect(client, h.url)
    env = c.env("faulty")
    env.reset(seed=0)
    assert env.step(0)[4] == {"action": 0}

    def fails(action: int, code: str, uncertain: bool, text: str) -> None:
        with pytest.raises(RemoteError) as e:
            env.step(action)
        assert (e.value.code, e.value.uncertain) == (code, uncertain), e.value
        assert text in str(e.value), e.value

    # Render mode, metadata and a frame lent by C without a copy.
    assert env.render_mode == "rgb_array"
    assert env.metadata == {"render_modes": ["rgb_array"], "render_fps": 50}
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.shape == (2, 3, 3) and np.all(frame == 1)
    # Nested spaces and values: Tuple(Dict(open, pos), Discrete(3)).
    gate = c.env("gate")
    assert "TupleSpace" in type(gate.observation_space).__name__
    (state, phase) = gate.reset()[1]
    assert state["open"].dtype == np.bool_ and state["open"].shape == () and not state["open"]
    assert state["pos"].tolist() == [0.0, -0.0] and phase == 0
    (state, phase), *_ = gate.step(1)
    assert bool(state["open"]) and state["pos"].tolist() == [0.5, -0.5] and phase == 2
    fails(1, "invalid_request", False, "action 1 is refused")
    assert env.step(0)[0].tolist() == [2.0, 2.0], "a refusal changes nothing"
    for action, text in ((2, "failed half-way"), (3, "has shape [3], the space [2]"),
                         (5, "without setting its result")):
        fails(action, "execution_error", True, text)
        fails(0, "faulted", False, "")
        env.reset()
        assert env.step(0)[0].tolist() == [1.0, 1.0]
    c.close()
    h.stop()


def test_a_callback_that_never_returns_times_out_its_clients_only(host: Callable[..., Host]) -> None:
    h = host(["examples/c/faults"])
    hung = unienv_remote.RemoteClient.connect(h.url, timeout=0.5)
    faulty = hung.env("faulty")
    # Connected before the hang: a client connecting now would wait for it,
    # as connecting discovers every resource, the hung one too.
    other = RefClient.connect(h.url)
    gate = other.env("gate")
    faulty.reset()
    started = time.monotonic()
    with pytest.raises(RemoteError) as e:
        faulty.step(4)
    assert e.value.code == "uncertain_outcome" and e.value.uncertain
    assert time.monotonic() - started < 5
    # The other env answers on its own thread meanwhile, and opens the gate.
    gate.reset()
    gate.step(0)
    # The hung step then completes; the env answers new clients again.
    again = unienv_remote.RemoteClient.connect(h.url, timeout=2)
    env = again.env("faulty")
    deadline = time.monotonic() + 10
    while True:
        try:
            obs = env.step(0)[0]
            break
        except RemoteError as err:  # the timed-out session's control is released when it is gone
            if err.code != "ownership_conflict" or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    assert obs.tolist() == [2.0, 2.0], "the hung step completed, then this one"
    # Hung for good this time: stopping leaves the thread behind after the
    # shutdown timeout (1 s here) and the process still exits.
    with pytest.raises(RemoteError):
        env.step(4)
    for client in (hung, other, again):
        client.close()
    started = time.monotonic()
    h.stop(timeout=30)
    assert time.monotonic() - started < 15


def test_token_is_required_when_set(host: Callable[..., Host]) -> None:
    h = host(HOSTS["c"] + ["s3cret"])
    with pytest.raises(Exception):
        unienv_remote.RemoteClient.connect(h.url).env("cartpole").reset()
    c = unienv_remote.RemoteClient.connect(h.url, token="s3cret")
    c.env("cartpole").reset(seed=0)
    c.close()
    h.stop()


@pytest.mark.parametrize("name", ["c", "c-pump", "cpp"])
def test_examples_run_clean_under_valgrind(host: Callable[..., Host], name: str) -> None:
    valgrind = shutil.which("valgrind")
    assert valgrind, "valgrind is missing: scripts/test.sh installs it (apt-get install valgrind)"
    h = host(HOSTS[name], prefix=[valgrind, "--error-exitcode=99", "--leak-check=no", "--track-origins=no", "-q"])
    c = unienv_remote.RemoteClient.connect(h.url, timeout=60)
    env = c.env("cartpole")
    # One short episode (random pushes end it by termination in tens of steps:
    # valgrind makes each step slow), every transition checked.
    rng = np.random.default_rng(5)
    assert lockstep(env, 4, lambda o, t: int(rng.integers(0, 2)), 1) < 100
    with pytest.raises(RemoteError):
        env.step(7)
    c.close()
    err = h.stop(timeout=120)
    assert "ERROR SUMMARY" not in err or "ERROR SUMMARY: 0 errors" in err, err
