"""The host's recording on a disk that stops taking writes (a file size
limit of 0 in the server's process: EFBIG, as a full disk's ENOSPC): the
server counts the failures (``unienv_record_errors_total``) and counts as
recorded only the transitions committed to disk
(``unienv_recorded_transitions_total``)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")

_SERVER = """
import json, resource, signal, sys, time
import numpy as np, gymnasium
import unienv_remote
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None

server = unienv_remote.RemoteServer(idle_timeout=None, record_dir=sys.argv[1], record_format="npz")
server.register("cartpole", FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
client = unienv_remote.RemoteClient.connect(server.listen("127.0.0.1", 0))
env = client.env("cartpole")
rng = np.random.default_rng(0)

def run(steps):
    env.reset(seed=int(rng.integers(1000)))
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(np.int64(rng.integers(2)))
        if terminated or truncated:
            env.reset()

run(100)
# The writer commits in the background: let some of these reach the disk
# before it fails (a loaded machine may not have written any yet).
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not (metric(server.metrics_text(), "unienv_recorded_transitions_total") or 0):
    time.sleep(0.05)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
run(200)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    text = server.metrics_text()
    if (metric(text, "unienv_record_errors_total") or 0) > 0:
        break
    time.sleep(0.05)
client.close()
server.close()
print(json.dumps({"errors": metric(text, "unienv_record_errors_total"),
                  "transitions": metric(text, "unienv_recorded_transitions_total"),
                  "episodes": metric(text, "unienv_recorded_episodes_total")}))
"""


def test_the_host_counts_what_it_committed_and_its_failures(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", _SERVER, str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["errors"] and out["errors"] > 0, out
    # The failures are logged where the server's log goes (stderr, nothing configured).
    assert "record" in run.stderr and ("WARNING" in run.stderr or "ERROR" in run.stderr), run.stderr
    [buffer] = [p for p in tmp_path.iterdir() if p.is_dir()]
    committed = json.loads((buffer / "metadata.json").read_text())["count"]
    assert 0 < committed < 300
    assert out["transitions"] == committed, (out, committed)


def test_the_recorders_byte_budget_is_settable_from_python(tmp_path: Path) -> None:
    """``RemoteServer(record_queue_bytes=)`` reaches the server: with a budget
    smaller than any transition (each is then queued alone, once the writer
    holds nothing) every transition is still recorded; a budget that is not a
    positive integer is refused."""
    import gymnasium
    import numpy as np
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    import unienv_remote

    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="record_queue_bytes"):
            unienv_remote.RemoteServer(record_queue_bytes=bad)  # type: ignore[arg-type]
    server = unienv_remote.RemoteServer(idle_timeout=None, record_dir=str(tmp_path), record_format="npz",
                                        record_queue_bytes=1)
    server.register("cartpole", FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
    client = unienv_remote.RemoteClient.connect(server.listen("127.0.0.1", 0))
    try:
        env = client.env("cartpole")
        env.reset(seed=0)
        steps = 0
        for _ in range(40):
            _, _, terminated, truncated, _ = env.step(np.int64(steps % 2))
            steps += 1
            if terminated or truncated:
                break
    finally:
        client.close()
        server.close()
    [buffer] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert json.loads((buffer / "metadata.json").read_text())["count"] == steps
