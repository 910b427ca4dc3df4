"""RemoteVectorEnv(restart=RestartPolicy(...)): server processes SIGKILLed
mid-run (our Rust `unienv-remote serve` on Unix sockets, restarted on the same
socket path; our Python `RemoteServer` in `vector_server.py` on TCP, replaced
at a new port that the policy's `resolve` callback gives) while the learner's
loop keeps stepping. The loop never raises; every cut episode is reported
exactly once in the step's infos (truncated, `restart`, `restart_reason`,
`step_may_have_run`); the other sub-envs' results are exactly what they
produce without any kill (a twin vector env on servers nobody kills, or
Gymnasium's SyncVectorEnv); a batched resource restarts whole; the policy's
limits end in `RestartError` through `on_error`. Also: a simulator that
raises (a faulted env, reset on its live connection), a SIGSTOPped server
(a timeout, its process replaced by `resolve`), and a `reset` that finds its
server gone (restarted with the seeds asked for).

Restarts are waited for by the policy's own bounded retries (the new server
comes up while the vector env retries), never by sleeps in the test.
"""

import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402

from unienv_remote import (  # noqa: E402
    RemoteError, RemoteServer, RemoteVectorEnv, RestartError, RestartPolicy, UncertainOutcomeError, VectorEnvError,
)

from conftest import REPO, our_binary, wait_stopped  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "py"))
from ref_fixture_server import CounterEnv  # noqa: E402

UNIX_URL = re.compile(r"(ws\+unix://\S+)")
TCP_URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")
VECTOR_SERVER = Path(__file__).resolve().parent / "vector_server.py"


class Process:
    """A server process; `url` is the address it printed once listening."""

    def __init__(self, command: List[str], pattern: "re.Pattern[str]") -> None:
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        cwd=REPO)
        self.url: Optional[str] = None
        assert self.process.stdout is not None
        for line in self.process.stdout:
            match = pattern.search(line)
            if match:
                self.url = match.group(1)
                break
        if self.url is None:
            self.process.kill()
            raise RuntimeError(f"{command} printed no URL (exit code {self.process.wait()})")

    def kill(self) -> None:
        """SIGKILL, as a crash: no goodbye to the clients."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def serve(path: Path, *args: str) -> Process:
    """`unienv-remote serve --unix PATH ARGS` (the built-in simulators)."""
    return Process([str(our_binary()), "serve", "--unix", str(path), *args], UNIX_URL)


def python_server(count: int) -> Process:
    """`vector_server.py COUNT`: our Python RemoteServer hosting Gymnasium
    envs on 127.0.0.1, a port the OS picks."""
    return Process([sys.executable, str(VECTOR_SERVER), str(count)], TCP_URL)


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ue-"))  # short: socket paths are limited to ~100 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


def restart_reports(infos: Dict[str, object]) -> Dict[int, Tuple[str, bool]]:
    """{env: (reason, step_may_have_run)} of the step's restart report,
    checking that its keys and masks agree."""
    if "restart" not in infos:
        assert not any(k in infos for k in ("restart_reason", "step_may_have_run", "restart_cause")), infos
        return {}
    mask = np.asarray(infos["_restart"])
    for key in ("restart_reason", "step_may_have_run", "restart_cause"):
        assert np.array_equal(np.asarray(infos[f"_{key}"]), mask), key
    out = {}
    for i in np.flatnonzero(mask):
        assert infos["restart"][i] is True or infos["restart"][i] == True  # noqa: E712
        out[int(i)] = (str(infos["restart_reason"][i]), bool(infos["step_may_have_run"][i]))
    return out


def test_rust_servers_killed_and_restarted_on_the_same_socket(socket_dir: Path) -> None:
    """Server A (one batched cartpole resource, batch_size 3: envs 0..2) is
    SIGKILLed twice mid-step and started again on its socket path; server B
    (two single cartpoles: envs 3 and 4) is never touched. A twin vector env
    on servers nobody kills gets the same seeds and actions."""
    a_path, b_path = socket_dir / "a.sock", socket_dir / "b.sock"
    a, b = serve(a_path, "--batch", "3"), serve(b_path, "--copies", "2")
    twin_a, twin_b = serve(socket_dir / "ta.sock", "--batch", "3"), serve(socket_dir / "tb.sock", "--copies", "2")
    processes = [a, b, twin_a, twin_b]
    policy = RestartPolicy(max_restarts=3, window=600.0, timeout=60.0)
    envs = RemoteVectorEnv([(a.url, "cartpole"), (b.url, "cartpole-0"), (b.url, "cartpole-1")],
                           timeout=30.0, restart=policy)
    twin = RemoteVectorEnv([(twin_a.url, "cartpole"), (twin_b.url, "cartpole-0"), (twin_b.url, "cartpole-1")])
    try:
        assert envs.num_envs == 5
        obs, _ = envs.reset(seed=11)
        assert np.array_equal(obs, twin.reset(seed=11)[0])
        envs.action_space.seed(11)
        kills = [15, 40]
        reported: List[Tuple[int, int, str, bool]] = []
        ended = np.zeros(5, dtype=bool)
        same_episode = np.ones(5, dtype=bool)  # not cut yet: comparable with the twin
        for t in range(60):
            actions = envs.action_space.sample()
            if t in kills:
                envs.step_async(actions)
                a.kill()
                a = serve(a_path, "--batch", "3")  # a new process on the same socket path
                processes.append(a)
                got = envs.step_wait()
            else:
                got = envs.step(actions)
            expected = twin.step(actions)
            reports = restart_reports(got[4])
            for i, (reason, may) in reports.items():
                reported.append((t, i, reason, may))
                assert reason == "connection_lost"
                # The cut episode is truncated, unless the lost request was
                # an autoreset (NEXT_STEP: the episode had ended last step).
                assert got[3][i] == (not ended[i]) and not got[2][i] and got[1][i] == 0
                assert envs.single_observation_space.contains(got[0][i])
                same_episode[i] = False
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x[same_episode], y[same_episode]), t
            assert np.all(same_episode[3:]), "envs 3 and 4 are never cut"
            ended = got[2] | got[3]
        # Each kill cut the batched resource's three episodes once, together,
        # in the step that was in flight or the next one.
        steps = sorted({t for t, _, _, _ in reported})
        assert len(steps) == 2 and kills[0] <= steps[0] <= kills[0] + 1 and kills[1] <= steps[1] <= kills[1] + 1
        assert sorted(i for _, i, _, _ in reported) == [0, 0, 1, 1, 2, 2]
        assert not envs.needs_reset().any()

        # A reset that finds the server gone restarts it with the seeds asked
        # for: the same observations as the twin's.
        a.kill()
        a = serve(a_path, "--batch", "3")
        processes.append(a)
        obs, infos = envs.reset(seed=99)
        assert np.array_equal(obs, twin.reset(seed=99)[0])
        assert list(np.flatnonzero(infos["_restart"])) == [0, 1, 2] and "step_may_have_run" not in infos
        assert set(infos["restart_reason"][:3]) == {"connection_lost"}
        for _ in range(5):
            actions = envs.action_space.sample()
            got, expected = envs.step(actions), twin.step(actions)
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x, y)
    finally:
        envs.close()
        twin.close()
        for p in processes:
            p.kill()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_python_server_killed_and_replaced_at_a_new_address(mode: AutoresetMode) -> None:
    """Two `vector_server.py` processes (our Python RemoteServer); the first
    is SIGKILLed with a step in flight, and `resolve` starts its replacement
    at a new port. Envs on the second are exactly Gymnasium's SyncVectorEnv
    throughout."""
    servers = [python_server(2), python_server(2)]
    processes = list(servers)
    replaced: Dict[str, str] = {}
    resolved: List[Tuple[str, str]] = []

    def resolve(url: str, resource_id: str) -> Optional[str]:
        # Idempotent: the first call for a dead server starts its replacement.
        resolved.append((url, resource_id))
        if url not in replaced and url == servers[0].url and servers[0].process.poll() is not None:
            new = python_server(2)
            processes.append(new)
            replaced[url] = str(new.url)
        return replaced.get(url)

    n = 4
    addresses = [(servers[j % 2].url, f"cartpole{j // 2}") for j in range(n)]  # envs 0, 2 on server 0
    envs = RemoteVectorEnv(addresses, autoreset_mode=mode, single_action_space=gymnasium.spaces.Discrete(2),
                           restart=RestartPolicy(max_restarts=1, window=600.0, timeout=60.0, resolve=resolve))
    local = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(n)], autoreset_mode=mode)
    try:
        obs, _ = envs.reset(seed=21)
        assert np.array_equal(obs, local.reset(seed=21)[0])
        local.action_space.seed(21)
        kill_at = 20
        intact = np.ones(n, dtype=bool)
        reports: Dict[int, int] = {}
        ended = np.zeros(n, dtype=bool)
        for t in range(50):
            actions = local.action_space.sample()
            if t == kill_at:
                envs.step_async(actions)
                servers[0].kill()
                got = envs.step_wait()
            else:
                got = envs.step(actions)
            expected = local.step(actions)
            for i, (reason, _may) in restart_reports(got[4]).items():
                assert reason == "connection_lost" and i in (0, 2) and t in (kill_at, kill_at + 1)
                reports[i] = reports.get(i, 0) + 1
                intact[i] = False
                was_autoreset = mode == AutoresetMode.NEXT_STEP and ended[i]
                assert got[3][i] == (not was_autoreset) and not got[2][i]
                if mode == AutoresetMode.SAME_STEP:
                    assert "_final_obs" not in got[4] or not got[4]["_final_obs"][i]
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x[intact], y[intact]), t
            ended = got[2] | got[3]
        assert reports == {0: 1, 2: 1}, "each cut episode reported exactly once"
        assert envs.addresses[0][0] == envs.addresses[2][0] == replaced[str(servers[0].url)]
        assert envs.addresses[1][0] == servers[1].url
        assert {rid for _, rid in resolved} == {"cartpole0", "cartpole1"}
    finally:
        envs.close()
        local.close()
        for p in processes:
            p.kill()


def test_the_policy_limits_end_in_restart_error(socket_dir: Path) -> None:
    """max_restarts=1: the first kill heals, the second (within the window)
    is given up as RestartError; a server that never comes back is given up
    after the policy's timeout. The others' results are intact throughout."""
    x_path, y_path = socket_dir / "x.sock", socket_dir / "y.sock"
    x, y = serve(x_path), serve(y_path)
    twin_x, twin_y = serve(socket_dir / "tx.sock"), serve(socket_dir / "ty.sock")
    processes = [x, y, twin_x, twin_y]
    envs = RemoteVectorEnv([(x.url, "cartpole"), (y.url, "cartpole")],
                           restart=RestartPolicy(max_restarts=1, window=600.0, timeout=2.0))
    twin = RemoteVectorEnv([(twin_x.url, "cartpole"), (twin_y.url, "cartpole")])
    try:
        envs.reset(seed=5)
        twin.reset(seed=5)
        envs.action_space.seed(5)

        def step() -> Tuple[object, ...]:
            actions = envs.action_space.sample()
            expected = twin.step(actions)
            try:
                got = envs.step(actions)
            except VectorEnvError as e:
                return e.result, e, expected
            return got, None, expected

        for _ in range(3):
            got, error, expected = step()
            assert error is None
        x.kill()
        x = serve(x_path)
        processes.append(x)
        got, error, expected = step()
        assert error is None and list(restart_reports(got[4])) == [0]
        assert restart_reports(got[4])[0][0] == "connection_lost"
        assert np.array_equal(got[0][1], expected[0][1])

        # Within the window, a second restart is one too many.
        x.kill()
        x = serve(x_path)
        processes.append(x)
        got, error, expected = step()
        assert isinstance(error, VectorEnvError) and list(error.errors) == [0]
        limit = error.errors[0]
        assert isinstance(limit, RestartError) and "max_restarts=1" in str(limit)
        assert limit.reason == "connection_lost"
        assert isinstance(limit.__cause__, (ConnectionError, UncertainOutcomeError)), repr(limit.__cause__)
        assert np.array_equal(got[0][1], expected[0][1])
        # Given up: the env waits for the learner's reset, as without a policy.
        got, error, expected = step()
        assert isinstance(error, VectorEnvError) and error.needs_reset == [0] and not error.errors
        assert np.array_equal(got[0][1], expected[0][1])
        # The learner brings it back itself (reconnect, reset); the policy
        # then covers it again.
        envs.reconnect([0])
        obs, _ = envs.reset(seed=8, options={"reset_mask": envs.needs_reset()})
        assert not envs.needs_reset().any()
        for _ in range(2):
            got, error, expected = step()
            assert error is None and np.array_equal(got[0][1], expected[0][1])

        # Server y never comes back: given up after the policy's timeout;
        # on_error="info" reports it in infos, the loop goes on.
        envs._on_error = "info"
        y.kill()
        got, error, expected = step()
        assert error is None
        infos = got[4]
        assert list(np.flatnonzero(infos["_error"])) == [1]
        gone = infos["error"][1]
        assert isinstance(gone, RestartError) and "not back within the policy's timeout of 2 s" in str(gone)
        assert "restart" not in infos
        got, error, expected = step()
        assert list(np.flatnonzero(got[4]["_error"])) == [1]
    finally:
        envs.close()
        twin.close()
        for p in processes:
            p.kill()


class FailsOnce(CounterEnv):
    """The fixtures' counter env whose next step raises when ``fail`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = False
        self.fail_reset = False

    def step(self, action):  # type: ignore[no-untyped-def]
        if self.fail:
            self.fail = False
            raise RuntimeError("simulator failed")
        return super().step(action)

    def reset(self, **kwargs):  # type: ignore[no-untyped-def]
        if self.fail_reset:
            self.fail_reset = False
            raise RuntimeError("reset failed")
        return super().reset(**kwargs)


def test_a_faulted_env_is_reset_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    """A simulator that raises (an uncertain execution_error; its domain is
    faulted) is reset on its live connection, the cut reported as
    "faulted" with step_may_have_run; the other env goes on; the second
    fault is one more than max_restarts=1."""
    failing = FailsOnce()
    server = RemoteServer(idle_timeout=None)
    server.register("a", failing)
    server.register("b", CounterEnv())
    try:
        url = server.listen("127.0.0.1", 0)
        envs = RemoteVectorEnv([(url, "a"), (url, "b")], restart=RestartPolicy(max_restarts=1, timeout=10.0))
        step = np.full((2, 2), 0.25, np.float32)
        envs.reset(seed=1)
        envs.step(step)
        failing.fail = True
        with caplog.at_level("WARNING", logger="unienv_remote.restart"):
            obs, rewards, terminated, truncated, infos = envs.step(step)
        assert restart_reports(infos) == {0: ("faulted", True)}
        logged = [r for r in caplog.records if r.name == "unienv_remote.restart"]
        assert len(logged) == 1 and "restarted env 0 (a at ws://" in logged[0].getMessage(), logged
        assert "after faulted" in logged[0].getMessage()
        cause = infos["restart_cause"][0]
        assert isinstance(cause, RemoteError) and cause.code == "execution_error"
        assert infos["seed"][0] is None and infos["_seed"].tolist() == [True, False]  # the reset's info
        assert truncated.tolist() == [True, False] and terminated.tolist() == [False, False]
        # (reset with seeds 1 and 2: env b counts from 2)
        assert rewards[0] == 0 and rewards[1] == 5.0
        assert obs["position"].tolist() == [[0.0, 0.0], [2.5, 2.5]]  # env a reset (no seed: 0)
        obs, *_ = envs.step(step)
        assert obs["position"].tolist() == [[0.25, 0.25], [2.75, 2.75]]

        failing.fail = True
        with pytest.raises(VectorEnvError) as caught:
            envs.step(step)
        assert list(caught.value.errors) == [0]
        error = caught.value.errors[0]
        assert isinstance(error, RestartError) and error.reason == "faulted" and error.step_may_have_run
        assert isinstance(error.__cause__, RemoteError) and error.__cause__.code == "execution_error"
        assert caught.value.result[0]["position"][1].tolist() == [3.0, 3.0]
        envs.close()
    finally:
        server.close()


def test_a_hung_server_times_out_and_is_replaced(socket_dir: Path) -> None:
    """Server x is SIGSTOPped: its env's step times out (reason "timeout",
    the step may have run); `resolve`, called before the first reconnection
    attempt, replaces the hung process by a new one on the same socket path.
    The env on server y is exactly its twin's."""
    x_path, y_path = socket_dir / "x.sock", socket_dir / "y.sock"
    x, y = serve(x_path), serve(y_path)
    twin_y = serve(socket_dir / "ty.sock")
    processes = [x, y, twin_y]
    calls: List[str] = []
    replacement: List[Process] = []

    def resolve(url: str, resource_id: str) -> None:
        calls.append(url)
        if not replacement:  # the hung process goes (SIGKILL ends a stopped one too)
            x.kill()
            replacement.append(serve(x_path))
            processes.append(replacement[0])
        return None  # same address

    envs = RemoteVectorEnv([(x.url, "cartpole"), (y.url, "cartpole")], timeout=5.0,
                           restart=RestartPolicy(max_restarts=1, timeout=60.0, resolve=resolve))
    twin = RemoteVectorEnv([(twin_y.url, "cartpole")])
    try:
        envs.reset(seed=3)
        twin.reset(seed=4)  # env 1 of `envs` has seed 3 + 1
        envs.action_space.seed(3)
        for t in range(6):
            if t == 3:
                x.process.send_signal(signal.SIGSTOP)
                wait_stopped(x.process.pid)
            actions = envs.action_space.sample()
            got = envs.step(actions)
            expected = twin.step(actions[1:])
            for a, b in zip(got[:4], expected[:4]):
                assert np.array_equal(a[1:], b)
            assert restart_reports(got[4]) == ({0: ("timeout", True)} if t == 3 else {})
        assert calls == [x.url] and len(replacement) == 1
        assert envs.addresses[0] == (x.url, "cartpole")
    finally:
        envs.close()
        twin.close()
        for p in processes:
            p.kill()


def test_a_replacement_that_is_not_the_same_env_is_given_up(socket_dir: Path) -> None:
    """`resolve` names an env with other spaces (pointmass for a cartpole):
    the restart is given up at once (RestartError naming the mismatch), not
    retried until the policy's timeout."""
    x, other = serve(socket_dir / "x.sock"), serve(socket_dir / "o.sock")
    processes = [x, other]
    envs = RemoteVectorEnv([(x.url, "cartpole")], on_error="info",
                           restart=RestartPolicy(timeout=600.0, resolve=lambda url, rid: (str(other.url), "pointmass")))
    try:
        envs.reset(seed=1)
        x.kill()
        infos = envs.step(envs.action_space.sample())[4]
        error = infos["error"][0]
        assert isinstance(error, RestartError) and "cannot reconnect" in str(error), error
        assert "does not have the batch size and the action and observation spaces" in str(error)
        assert envs.addresses == [(x.url, "cartpole")]
    finally:
        envs.close()
        for p in processes:
            p.kill()


def recv_run(envs: RemoteVectorEnv, results: int, on_round=None) -> Tuple[Dict[int, list], Dict[int, int]]:
    """EnvPool's loop (send/recv, batch_size 2 of 4) until every env has
    ``results`` results (how many rounds that takes depends on arrival
    order): env i's k-th action is (i + k) % 2 whatever the order; returns
    each env's results in its own order, and each env's number of restart
    reports."""
    per_env: Dict[int, list] = {i: [] for i in range(envs.num_envs)}
    restarts: Dict[int, int] = {}
    count = {i: 0 for i in range(envs.num_envs)}
    envs.reset(seed=17)
    envs.send(np.array([i % 2 for i in range(envs.num_envs)], dtype=np.int64))
    r = 0
    while min(count.values()) < results:
        assert r < 100 * results, f"some env starved: {count}"
        if on_round is not None:
            on_round(r)
        r += 1
        obs, rewards, terminated, truncated, infos = envs.recv()
        ids = [int(i) for i in infos["env_id"]]
        for p, i in enumerate(ids):
            if "restart" in infos and infos["_restart"][p]:
                restarts[i] = restarts.get(i, 0) + 1
                per_env[i].append("restart")
            else:
                per_env[i].append((obs[p].tolist(), float(rewards[p]), bool(terminated[p]), bool(truncated[p])))
            count[i] += 1
        envs.send(np.array([(i + count[i]) % 2 for i in ids], dtype=np.int64), ids)
    envs.recv()  # the last ones in flight
    return per_env, restarts


def test_recv_restarts_with_the_others_gathered(socket_dir: Path) -> None:
    """send/recv (batch_size 2 of 4 envs): server x is SIGKILLed and started
    again on its socket path mid-run; the recv that sees it gathers the
    others in flight and restarts x's two envs, reported once each; y's envs
    follow exactly the trajectories of a run where nothing was killed."""
    x_path = socket_dir / "x.sock"
    x, y = serve(x_path, "--copies", "2"), serve(socket_dir / "y.sock", "--copies", "2")
    twin_x, twin_y = serve(socket_dir / "tx.sock", "--copies", "2"), serve(socket_dir / "ty.sock", "--copies", "2")
    processes = [x, y, twin_x, twin_y]

    def addresses(a: Process, b: Process) -> List[Tuple[str, str]]:
        return [(str(a.url), "cartpole-0"), (str(b.url), "cartpole-0"), (str(a.url), "cartpole-1"),
                (str(b.url), "cartpole-1")]

    policy = RestartPolicy(max_restarts=1, timeout=60.0)
    envs = RemoteVectorEnv(addresses(x, y), batch_size=2, restart=policy)
    twin = RemoteVectorEnv(addresses(twin_x, twin_y), batch_size=2)

    def kill_x(r: int) -> None:
        if r == 12:
            x.kill()
            processes.append(serve(x_path, "--copies", "2"))

    try:
        got, restarts = recv_run(envs, 20, kill_x)
        expected, none = recv_run(twin, 20)
        assert none == {} and restarts == {0: 1, 2: 1}, restarts
        for i in (1, 3):
            assert got[i][:20] == expected[i][:20], i
        for i in (0, 2):  # identical until cut (within 13 results: killed before recv call 12), then one report
            cut = got[i].index("restart")
            assert cut <= 13 and got[i][:cut] == expected[i][:cut] and "restart" not in got[i][cut + 1:]
    finally:
        envs.close()
        twin.close()
        for p in processes:
            p.kill()


def test_a_lost_autoreset_cuts_no_episode() -> None:
    """NEXT_STEP: env a's episode ends (terminated); the next step is its
    autoreset, whose reset raises. The restart resets it again: reported,
    but nothing is cut (terminated and truncated false, reward 0), as the
    autoreset itself would have returned."""
    failing = FailsOnce()
    server = RemoteServer(idle_timeout=None)
    server.register("a", failing)
    server.register("b", CounterEnv())
    try:
        url = server.listen("127.0.0.1", 0)
        envs = RemoteVectorEnv([(url, "a"), (url, "b")], restart=RestartPolicy(max_restarts=1, timeout=10.0))
        envs.reset(seed=[1, -10])
        step = np.ones((2, 2), np.float32)
        for _ in range(2):
            _, _, terminated, _, _ = envs.step(step)
            assert not terminated.any()
        _, _, terminated, truncated, _ = envs.step(step)  # a: 4 > 3
        assert terminated.tolist() == [True, False] and not truncated.any()
        failing.fail_reset = True
        obs, rewards, terminated, truncated, infos = envs.step(step)
        assert restart_reports(infos) == {0: ("faulted", True)}
        assert terminated.tolist() == [False, False] and truncated.tolist() == [False, False]
        assert rewards[0] == 0 and obs["position"].tolist() == [[0.0, 0.0], [-6.0, -6.0]]
        obs, *_ = envs.step(step)
        assert obs["position"].tolist() == [[1.0, 1.0], [-5.0, -5.0]]
        envs.close()
    finally:
        server.close()


def test_a_restart_starts_a_new_recorded_episode(tmp_path: Path) -> None:
    """With ``record_dir`` (learner-side recording), a faulted env that the
    policy restarts has its cut episode committed as it stood and a new one
    begun at the restart's reset observation: no transition across the
    restart, and the env that never failed records one unbroken episode."""
    from test_record import load

    failing = FailsOnce()
    server = RemoteServer(idle_timeout=None)
    server.register("a", failing)
    server.register("b", CounterEnv())
    try:
        url = server.listen("127.0.0.1", 0)
        envs = RemoteVectorEnv([(url, "a"), (url, "b")], restart=RestartPolicy(max_restarts=1, timeout=10.0),
                               record_dir=tmp_path)
        step = np.full((2, 2), 0.25, np.float32)
        envs.reset(seed=1)
        envs.step(step)
        envs.step(step)
        failing.fail = True
        obs, _, _, truncated, infos = envs.step(step)
        assert restart_reports(infos) == {0: ("faulted", True)} and truncated.tolist() == [True, False]
        envs.step(step)
        envs.close()
    finally:
        server.close()
    recorded = load(tmp_path / "0", tmp_path / "1")
    a, b = recorded[str(tmp_path / "0")], recorded[str(tmp_path / "1")]
    # env a: two steps, then the cut (the failed step is no transition), then
    # one step of the new episode from its reset observation (0, 0).
    assert a["segments"] == [[0, 2], [2, 3]], a["segments"]
    first_of_new = a["items"][2]
    assert first_of_new["obs"]["position"]["data"] == [0.0, 0.0]
    assert first_of_new["next_obs"]["position"]["data"] == [0.25, 0.25]
    # env b: four steps in one episode.
    assert b["len"] == 4 and b["segments"] == [[0, 4]], b["segments"]
