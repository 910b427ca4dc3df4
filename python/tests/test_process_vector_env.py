"""``ProcessVectorEnv`` (``unienv_remote/fleet.py``): the envs split over
server processes it starts (``BatchedEnv`` resources, Unix sockets, pinned
servers) step as ``SyncVectorEnv`` steps the same envs, through ``step`` and
through ``send``/``recv``; its processes end when it closes, when its
process dies, and when an env factory fails; bad arguments are refused
before any process starts."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any, List

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from unienv_remote import ProcessVectorEnv  # noqa: E402


def cartpole() -> Any:
    return gymnasium.make("CartPole-v1")


def gone(pids: List[int], within: float = 15.0) -> bool:
    """Whether every process in ``pids`` has ended within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            # A zombie of ours counts as ended.
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(")")[-1].split()[0] == "Z":
                        continue
            except OSError:
                continue
            alive.append(pid)
        if not alive:
            return True
        time.sleep(0.05)
    return False


def test_steps_as_sync_vector_env_and_closes_its_servers() -> None:
    """7 CartPoles over 2 servers (4 + 3 envs, lambdas pickled): every
    transition equals ``SyncVectorEnv``'s, episodes ending, in NEXT_STEP
    mode; close() ends the processes and removes the sockets."""
    from gymnasium.vector import SyncVectorEnv

    envs = ProcessVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 7, servers=2)
    local = SyncVectorEnv([cartpole] * 7)
    pids, socket_dir = envs.server_pids, envs._socket_dir
    try:
        assert len(pids) == 2 and envs.num_envs == 7
        assert all(url.startswith("ws+unix://") for url, _ in envs.addresses)
        assert [r for _, r in envs.addresses] == ["batch0", "batch0"]
        assert envs._ranges == [(0, 4), (4, 3)]
        obs, _ = envs.reset(seed=3)
        want, _ = local.reset(seed=3)
        assert np.array_equal(obs, want)
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(60):
            actions = rng.integers(0, 2, size=7)
            got = envs.step(actions)
            want = local.step(actions)
            for a, b in zip(got[:4], want[:4]):
                assert np.array_equal(a, b)
            ends += int(np.sum(want[2]))
        assert ends > 0
    finally:
        envs.close()
        local.close()
    assert gone(pids)
    assert socket_dir is not None and not os.path.exists(socket_dir)


def test_send_recv_over_two_resources_per_server() -> None:
    """8 envs, 2 servers x 2 resources of 2, TCP, unpinned, ``batch_size=4``:
    every env comes back exactly once per send, with the transition its
    action gives (the same as ``SyncVectorEnv`` stepping it alone)."""
    envs = ProcessVectorEnv([cartpole] * 8, servers=2, resources_per_server=2, unix=False, pin=False, batch_size=4)
    local = [cartpole() for _ in range(8)]
    try:
        assert all(url.startswith("ws://127.0.0.1:") for url, _ in envs.addresses)
        assert len(envs.addresses) == 4
        obs, _ = envs.reset(seed=0)
        last = [env.reset(seed=i)[0] for i, env in enumerate(local)]
        assert np.array_equal(obs, np.stack(last))
        # Env i's k-th action is k % 2: no episode ends in these 10 steps
        # (deterministic from the seeds; checked below). Each resource's next
        # action goes out as soon as its results are back.
        steps = [0] * 8
        in_flight = set(range(8))
        envs.send(np.zeros(8, np.int64))
        while in_flight:
            obs, rewards, terminated, truncated, infos = envs.recv()
            ids = [int(i) for i in infos["env_id"]]
            assert set(ids) <= in_flight and len(set(ids)) == len(ids)
            in_flight -= set(ids)
            for pos, i in enumerate(ids):
                want = local[i].step(steps[i] % 2)
                steps[i] += 1
                assert np.array_equal(obs[pos], want[0])
                assert rewards[pos] == want[1]
                assert not (want[2] or want[3] or terminated[pos] or truncated[pos])
            again = [i for i in ids if steps[i] < 10]
            if again:
                envs.send(np.array([steps[i] % 2 for i in again], np.int64), again)
                in_flight |= set(again)
        assert steps == [10] * 8
        while envs._native.step_pending():
            envs.recv()
    finally:
        envs.close()


def failing() -> Any:
    raise RuntimeError("no simulator here")


def test_a_failing_factory_fails_the_construction_and_leaves_no_process(capfd: pytest.CaptureFixture[str]) -> None:
    before = set(children())
    with pytest.raises(RuntimeError, match=r"server process 1 .* exited with code"):
        ProcessVectorEnv([cartpole, cartpole, failing], servers=2)
    # Both server processes ended and were reaped: no child of ours is left.
    assert set(children()) <= before
    assert "no simulator here" in capfd.readouterr().err


def children() -> List[int]:
    """This process's child processes."""
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().split(")")[-1].split()[1]) == me:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def test_its_servers_end_when_its_process_is_killed() -> None:
    """A learner killed with SIGKILL (no cleanup at all): its server
    processes see their standard input close and end."""
    script = textwrap.dedent("""
        import gymnasium, sys, time
        from unienv_remote import ProcessVectorEnv
        envs = ProcessVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, servers=2)
        print(*envs.server_pids, flush=True)
        time.sleep(600)
    """)
    learner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert learner.stdout is not None
        pids = [int(p) for p in learner.stdout.readline().split()]
        assert len(pids) == 2
        os.kill(learner.pid, signal.SIGKILL)
        learner.wait()
        assert gone(pids)
    finally:
        if learner.poll() is None:
            learner.kill()


@pytest.mark.parametrize("kwargs, error", [
    ({"servers": 0}, ValueError),
    ({"servers": 4}, ValueError),
    ({"servers": 2, "resources_per_server": 2}, ValueError),
    ({"resources_per_server": 0}, ValueError),
])
def test_bad_arguments_are_refused_before_any_process_starts(kwargs: Any, error: type) -> None:
    before = set(children())
    with pytest.raises(error):
        ProcessVectorEnv([cartpole] * 3, **kwargs)
    assert set(children()) <= before


def test_no_envs_or_no_callables_are_refused() -> None:
    with pytest.raises(ValueError):
        ProcessVectorEnv([])
    with pytest.raises(TypeError):
        ProcessVectorEnv([cartpole(), cartpole])  # type: ignore[list-item]


@pytest.mark.parametrize("unix", [True, False])
def test_a_killed_server_is_started_again_with_a_restart_policy(unix: bool) -> None:
    """With a ``RestartPolicy``, a server process killed between steps is
    started again (the same envs; over TCP at a new port): its envs are
    reset and reported restarted in the next step's infos, the other
    server's envs step on untouched, and later steps run normally."""
    from unienv_remote import RestartPolicy

    envs = ProcessVectorEnv([cartpole] * 4, servers=2, resources_per_server=2, unix=unix,
                            restart=RestartPolicy(max_restarts=2, window=60.0, timeout=30.0))
    local = [cartpole() for _ in range(4)]
    try:
        envs.reset(seed=0)
        for i, env in enumerate(local):
            env.reset(seed=i)
        old = envs.server_pids
        original = [url for url, _ in envs.addresses]
        os.kill(old[1], signal.SIGKILL)
        assert gone([old[1]])
        obs, rewards, terminated, truncated, infos = envs.step(np.ones(4, np.int64))
        assert infos["_restart"].tolist() == [False, False, True, True]
        assert truncated.tolist() == [False, False, True, True]
        for i in (0, 1):  # the other server's envs: stepped as if nothing happened
            assert np.array_equal(obs[i], local[i].step(1)[0])
        new = envs.server_pids
        assert new[0] == old[0] and new[1] != old[1]
        # A new address (over Unix, a socket path of its own).
        urls = [url for url, _ in envs.addresses]
        assert urls[2] == urls[3] != original[2] and urls[:2] == original[:2]
        if unix:
            assert urls[2].endswith("server1~1.sock")
        for _ in range(3):
            obs, rewards, terminated, truncated, infos = envs.step(np.ones(4, np.int64))
            assert "restart" not in infos
            assert np.array_equal(obs[:2], np.stack([local[i].step(1)[0] for i in (0, 1)]))
    finally:
        envs.close()
    assert gone(new)


def test_a_restart_never_takes_an_address_another_server_had(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over TCP, a restarted server whose port another server of the fleet
    had before (here: declared so) is started again while it holds that
    port, so a resource of that other server not yet reconnected can never
    be sent to it; the stand-in is stopped and the envs step on."""
    from unienv_remote import RestartPolicy
    from unienv_remote import fleet

    envs = ProcessVectorEnv([cartpole] * 4, servers=2, unix=False,
                            restart=RestartPolicy(max_restarts=2, window=60.0, timeout=30.0))
    taken: List[Any] = []
    again = fleet._Server.again

    def again_recorded(self: Any, deadline: float) -> Any:
        new = again(self, deadline)
        if not taken:  # the first restart's address: once server 0's
            envs._slot_of[new.url] = 0
        taken.append(new)
        return new

    monkeypatch.setattr(fleet._Server, "again", again_recorded)
    try:
        envs.reset(seed=0)
        old = envs.server_pids
        os.kill(old[1], signal.SIGKILL)
        assert gone([old[1]])
        infos = envs.step(np.ones(4, np.int64))[4]
        assert infos["_restart"].tolist() == [False, False, True, True]
        assert len(taken) == 2, "started again once more"
        assert gone([taken[0].process.pid]), "the stand-in at the taken address is stopped"
        urls = [url for url, _ in envs.addresses]  # one resource per server
        assert urls[1] == taken[1].url != taken[0].url
        assert envs.server_pids[1] == taken[1].process.pid
        envs.step(np.ones(4, np.int64))
    finally:
        envs.close()


def chatty() -> Any:
    """CartPole that prints 1 KiB to standard output at every step."""
    env = cartpole()
    step = env.step

    def noisy_step(action: Any) -> Any:
        print("x" * 1024, flush=True)
        return step(action)

    env.step = noisy_step
    print("made a chatty env", flush=True)
    return env


def test_envs_that_print_never_fill_a_pipe() -> None:
    """Envs printing 1 KiB per step, 200 steps (more than a pipe holds): the
    prints go to the servers' standard error and every step completes."""
    envs = ProcessVectorEnv([chatty] * 2, servers=1)
    try:
        envs.reset(seed=0)
        for _ in range(200):
            envs.step(np.zeros(2, np.int64))
    finally:
        envs.close()


def test_factories_larger_than_a_pipe_travel_whole() -> None:
    """Factories that carry a 4 MiB array (closures over it; more than a
    pipe holds) reach their server whole: its envs see the array's sum."""
    table = np.arange(512 * 1024, dtype=np.float64)  # 4 MiB
    want = float(table.sum())

    def make() -> Any:
        env = cartpole()
        env.unwrapped.checksum = float(table.sum())  # type: ignore[attr-defined]
        if env.unwrapped.checksum != want:  # type: ignore[attr-defined]
            raise RuntimeError("the table arrived changed")
        return env

    envs = ProcessVectorEnv([make, make], servers=1)
    try:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 4)
    finally:
        envs.close()


def test_a_factory_that_does_not_pickle_starts_no_process() -> None:
    import threading

    lock = threading.Lock()
    before = set(children())
    with pytest.raises(TypeError):
        ProcessVectorEnv([lambda: (lock, cartpole())[1]] * 2, servers=2)
    assert set(children()) <= before


def test_forked_children_do_not_hold_the_servers_life_lines() -> None:
    """A child forked by the learner (a data loader's worker) does not keep
    the servers' standard input open (it would hide the learner's end from
    them); the servers run in a session of their own (the terminal's Ctrl-C
    is the learner's)."""
    envs = ProcessVectorEnv([cartpole] * 2, servers=2)
    try:
        fds = [s.fd(s.process.stdin) for s in envs._servers]
        assert all(os.getsid(pid) == pid != os.getsid(0) for pid in envs.server_pids)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report whether each of those fds is closed
            closed = []
            for fd in fds:
                try:
                    os.fstat(fd)
                    closed.append(False)
                except OSError:
                    closed.append(True)
            os.write(w, bytes(closed))
            os._exit(0)
        os.close(w)
        report = os.read(r, 16)
        os.close(r)
        os.waitpid(pid, 0)
        assert list(report) == [1, 1]
    finally:
        envs.close()


def test_an_unclosed_env_with_a_restart_policy_ends_its_servers_when_dropped() -> None:
    """No reference cycle through the restart policy: dropping the last
    reference to an unclosed env ends its servers (without a collection)."""
    import gc

    from unienv_remote import RestartPolicy

    gc.disable()
    try:
        envs = ProcessVectorEnv([cartpole] * 2, servers=2, restart=RestartPolicy())
        pids = envs.server_pids
        del envs
        assert gone(pids)
    finally:
        gc.enable()


def _learner(script: str, **kwargs: Any) -> "subprocess.Popen[str]":
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], text=True, **kwargs)


def test_its_servers_end_when_it_is_killed_while_a_factory_hangs(tmp_path: Any) -> None:
    """A learner killed with SIGKILL while one server's factory hangs (that
    server still starting, the other serving): both servers end within a
    few seconds (their life line is read by a thread of its own)."""
    script = f"""
        import os, time, gymnasium
        from unienv_remote import ProcessVectorEnv

        def make(hang):
            def factory():
                with open(os.path.join({str(tmp_path)!r}, f"{{os.getpid()}}.{{hang}}"), "w"):
                    pass
                if hang:
                    time.sleep(600)
                return gymnasium.make("CartPole-v1")
            return factory

        ProcessVectorEnv([make(False), make(True)], servers=2)
    """
    learner = _learner(script)
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(tmp_path)) < 2 and time.monotonic() < deadline and learner.poll() is None:
            time.sleep(0.05)
        names = os.listdir(tmp_path)
        assert sorted(n.split(".")[1] for n in names) == ["False", "True"], names
        pids = [int(n.split(".")[0]) for n in names]
        os.kill(learner.pid, signal.SIGKILL)
        learner.wait()
        assert gone(pids, within=20.0)
    finally:
        if learner.poll() is None:
            learner.kill()
            learner.wait()


def test_its_servers_end_when_it_is_killed_while_a_step_hangs(tmp_path: Any) -> None:
    """Serving, with the env's thread stuck in a step: the server cannot
    close its env, and ends all the same once its learner is gone."""
    script = f"""
        import os, sys, time, gymnasium
        from unienv_remote import ProcessVectorEnv

        class Stuck(gymnasium.Wrapper):
            def step(self, action):
                open(os.path.join({str(tmp_path)!r}, "stepping"), "w").close()
                time.sleep(600)

        envs = ProcessVectorEnv([lambda: Stuck(gymnasium.make("CartPole-v1"))], servers=1)
        print(*envs.server_pids, flush=True)
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())
    """
    learner = _learner(script, stdout=subprocess.PIPE)
    try:
        assert learner.stdout is not None
        pids = [int(p) for p in learner.stdout.readline().split()]
        deadline = time.monotonic() + 60
        while not os.path.exists(tmp_path / "stepping") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.exists(tmp_path / "stepping")
        os.kill(learner.pid, signal.SIGKILL)
        learner.wait()
        assert gone(pids, within=20.0)
    finally:
        if learner.poll() is None:
            learner.kill()
            learner.wait()


_QUIET = """
    import logging, gymnasium
    from unienv_remote import ProcessVectorEnv
    {setup}
    envs = ProcessVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, servers=2{args})
    envs.reset(seed=0)
    envs.step(envs.action_space.sample())
    envs.close()
"""


@pytest.mark.parametrize("setup, args, loud", [
    ("", "", False),
    ("logging.basicConfig(level=logging.WARNING)", "", False),
    ("logging.basicConfig(level=logging.INFO)", "", True),
    ("logging.getLogger('unienv_remote').setLevel(logging.INFO)", "", True),
    ("", ", log_level=logging.INFO", True),
    ("logging.getLogger('unienv_remote').setLevel(logging.INFO)", ", log_level=logging.ERROR", False),
])
def test_its_servers_log_at_its_unienv_remote_level(setup: str, args: str, loud: bool) -> None:
    """The servers' standard error is the learner's: a normal run prints
    nothing there unless the learner's ``unienv_remote`` logger (or
    ``log_level=``) asks for ``INFO``."""
    learner = _learner(_QUIET.format(setup=setup, args=args), stderr=subprocess.PIPE)
    _, err = learner.communicate(timeout=120)
    assert learner.returncode == 0, err
    assert ("session opened" in err) == loud, err
    if not loud:
        assert "INFO" not in err, err


def test_a_bad_log_level_is_refused_before_any_process_starts() -> None:
    before = set(children())
    with pytest.raises(TypeError):
        ProcessVectorEnv([cartpole], log_level="INFO")  # type: ignore[arg-type]
    assert set(children()) <= before


def test_an_unpicklable_factory_of_a_later_server_starts_no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every server's factories are pickled before the first process starts:
    the second server's bad factory fails before the first server starts."""
    import threading

    from unienv_remote import fleet

    started: List[Any] = []
    real = subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        started.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(fleet.subprocess, "Popen", popen)
    lock = threading.Lock()
    with pytest.raises(TypeError):
        ProcessVectorEnv([cartpole, lambda: (lock, cartpole())[1]], servers=2)
    assert started == []
