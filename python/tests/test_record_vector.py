"""Recording on the learner's side (``RemoteVectorEnv(..., record_dir=DIR)``):
one ``unienv_data`` ``ReplayBuffer`` per sub-env, ``DIR/<index>/``, that
``ReplayBuffer.load_from`` opens with unienv (and pyarrow, for the default
format, Parquet; NPZ when asked for) in a fresh interpreter that never imports
``unienv_remote``, holding exactly the transitions the learner saw, one
segment per episode, in every autoreset mode, over single and batched
resources mixed; never a transition across an autoreset.
"""

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.vector import AutoresetMode  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import BatchedEnv, RemoteVectorEnv  # noqa: E402

from test_record import load  # noqa: E402
from _record_helpers import storage_class  # noqa: E402

MODES = ("next", "same", "disabled")
FLEETS = MODES + ("recv", "crash")


def short_pendulum() -> gymnasium.Env:
    """Pendulum truncated every 7 steps: many episodes in a short test."""
    return gymnasium.make("Pendulum-v1", max_episode_steps=7)


def cartpole() -> gymnasium.Env:
    return gymnasium.make("CartPole-v1")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    s = unienv_remote.RemoteServer(idle_timeout=None)
    for mode in FLEETS:
        # A mixed fleet: batched (2), single, batched (3) Pendulums.
        s.register(f"pair_{mode}", BatchedEnv([short_pendulum] * 2))
        s.register(f"single_{mode}", FromGymnasiumEnv(short_pendulum()))
        s.register(f"triple_{mode}", BatchedEnv([short_pendulum] * 3))
        # Single CartPoles: episodes that terminate, an integer action.
        for k in range(3):
            s.register(f"cartpole{k}_{mode}", FromGymnasiumEnv(cartpole()))
        # Batched CartPoles: sub-envs of one resource end their episodes at
        # different steps (reset masks; NEXT_STEP steps the others on).
        s.register(f"cartpoles2_{mode}", BatchedEnv([cartpole] * 2))
        s.register(f"cartpoles3_{mode}", BatchedEnv([cartpole] * 3))
    url = s.listen("127.0.0.1", 0)
    yield url
    s.close()


Transition = Dict[str, Any]


def drive(envs: RemoteVectorEnv, mode: str, steps: int, seed: int) -> List[List[List[Transition]]]:
    """Steps ``envs`` with random actions and returns, per sub-env, its
    episodes as the learner saw them (lists of transitions), by Gymnasium's
    rules for the autoreset mode."""
    n = envs.num_envs
    episodes: List[List[List[Transition]]] = [[[]] for _ in range(n)]
    obs, _ = envs.reset(seed=seed)
    prev = [obs[i] for i in range(n)]
    ended = [False] * n
    envs.action_space.seed(seed)
    for _ in range(steps):
        actions = envs.action_space.sample()
        if np.issubdtype(actions.dtype, np.integer):
            actions %= 2  # CartPole's Discrete(2), published as the box [0, 1]: Gymnasium samples [0, 1] too
        obs, rewards, terms, truncs, infos = envs.step(actions)
        for i in range(n):
            if mode == "next" and ended[i]:
                # Gymnasium's NEXT_STEP autoreset: a reset, not a transition.
                assert rewards[i] == 0 and not terms[i] and not truncs[i]
                prev[i], ended[i] = obs[i], False
                episodes[i].append([])
                continue
            done = bool(terms[i] or truncs[i])
            next_obs = infos["final_obs"][i] if mode == "same" and done else obs[i]
            episodes[i][-1].append({
                "obs": prev[i], "action": actions[i], "reward": rewards[i],
                "terminated": terms[i], "truncated": truncs[i], "next_obs": next_obs,
            })
            prev[i], ended[i] = obs[i], done
            if done and mode == "same":
                episodes[i].append([])
        if mode == "disabled" and any(ended):
            mask = np.array(ended)
            obs, _ = envs.reset(options={"reset_mask": mask})
            for i in np.flatnonzero(mask):
                prev[i], ended[i] = obs[i], False
                episodes[i].append([])
    return [[e for e in env if e] for env in episodes]


def check(recording: Dict[str, Any], want: List[List[Transition]]) -> None:
    """One sub-env's loaded buffer against its episodes."""
    flat = [t for episode in want for t in episode]
    assert recording["len"] == len(flat)
    starts = np.cumsum([0] + [len(e) for e in want])
    # get_segments() gives [start, end) ranges.
    assert recording["segments"] == [[int(s), int(e)] for s, e in zip(starts[:-1], starts[1:])]
    for got, t in zip(recording["items"], flat):
        assert "context" not in got
        for key in ("obs", "next_obs", "action"):
            leaf = got[key]
            np.testing.assert_array_equal(np.asarray(leaf["data"], leaf["dtype"]),
                                          np.asarray(t[key], leaf["dtype"]).reshape(leaf["shape"]), key)
        assert got["reward"]["dtype"] == "float64" and got["reward"]["data"] == float(t["reward"])
        assert got["terminated"]["data"] == bool(t["terminated"])
        assert got["truncated"]["data"] == bool(t["truncated"])


@pytest.mark.parametrize("fmt", [None, "npz"], ids=["default", "npz"])
@pytest.mark.parametrize("fleet", ["mixed", "cartpole", "batched_cartpole"])
@pytest.mark.parametrize("mode", MODES)
def test_a_vector_recording_equals_what_the_learner_saw(server: str, tmp_path: Path, fleet: str,
                                                          mode: str, fmt: Optional[str]) -> None:
    names = {"mixed": ["pair", "single", "triple"], "cartpole": ["cartpole0", "cartpole1", "cartpole2"],
             "batched_cartpole": ["cartpoles2", "cartpoles3"]}[fleet]
    gym_mode = {"next": AutoresetMode.NEXT_STEP, "same": AutoresetMode.SAME_STEP,
                "disabled": AutoresetMode.DISABLED}[mode]
    envs = RemoteVectorEnv([(server, f"{name}_{mode}") for name in names], autoreset_mode=gym_mode,
                           record_dir=tmp_path, **({} if fmt is None else {"record_format": fmt}))
    want = drive(envs, mode, 40 if fleet == "mixed" else 150, seed=3)
    envs.close()
    n = len(want)
    assert n == {"mixed": 6, "cartpole": 3, "batched_cartpole": 5}[fleet]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(str(i) for i in range(n))
    assert {storage_class(tmp_path / str(i)) for i in range(n)} == {fmt or "parquet"}
    loaded = load(*[tmp_path / str(i) for i in range(n)])
    for i in range(n):
        assert len(want[i]) >= 2, "the test drives more than one episode per env"
        check(loaded[str(tmp_path / str(i))], want[i])


def test_send_and_recv_are_recorded_as_the_learner_saw_them(server: str, tmp_path: Path) -> None:
    """EnvPool-style stepping: each sub-env's action paired with the result
    ``recv`` returned for it, whatever order the results came in."""
    envs = RemoteVectorEnv([(server, f"{name}_recv") for name in ("pair", "single", "triple")],
                           batch_size=3, record_dir=tmp_path)
    n = envs.num_envs
    episodes: List[List[List[Transition]]] = [[[]] for _ in range(n)]
    obs, _ = envs.reset(seed=5)
    prev = [obs[i] for i in range(n)]
    ended = [False] * n
    rng = np.random.default_rng(5)
    sent: Dict[int, Any] = {}

    def send(ids: List[int]) -> None:
        actions = rng.uniform(-2, 2, size=(len(ids), 1)).astype(np.float32)
        for k, i in enumerate(ids):
            sent[i] = actions[k]
        envs.send(actions, np.array(ids))

    def receive() -> List[int]:
        obs, rewards, terms, truncs, infos = envs.recv()
        ids = [int(i) for i in infos["env_id"]]
        for k, i in enumerate(ids):
            if ended[i]:  # NEXT_STEP autoreset
                prev[i], ended[i] = obs[k], False
                episodes[i].append([])
                continue
            episodes[i][-1].append({"obs": prev[i], "action": sent[i], "reward": rewards[k],
                                    "terminated": terms[k], "truncated": truncs[k], "next_obs": obs[k]})
            prev[i], ended[i] = obs[k], bool(terms[k] or truncs[k])
        return ids

    send(list(range(n)))
    for _ in range(60):
        send(receive())
    in_flight = n
    while in_flight:
        in_flight -= len(receive())
    envs.close()
    loaded = load(*[tmp_path / str(i) for i in range(n)])
    for i in range(n):
        check(loaded[str(tmp_path / str(i))], [e for e in episodes[i] if e])


CRASHING_LEARNER = r"""
import sys
import numpy as np
from unienv_remote import RemoteVectorEnv
url, record_dir = sys.argv[1], sys.argv[2]
formats = {} if sys.argv[3] == "default" else {"record_format": sys.argv[3]}
envs = RemoteVectorEnv([(url, f"{name}_crash") for name in ("pair", "single", "triple")], record_dir=record_dir,
                       **formats)
envs.reset(seed=1)
for _ in range(17):  # episodes end at steps 7 and 14 (truncation); 15 is the autoreset
    envs.step(np.zeros((envs.num_envs, 1), np.float32))
envs._recorder.flush()  # what was queued is written: the open episode is all that is missing
print("stepped", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("fmt", ["default", "npz"])
def test_a_learner_killed_mid_episode_loses_only_the_open_episode(server: str, tmp_path: Path, fmt: str) -> None:
    learner = subprocess.Popen([sys.executable, "-c", CRASHING_LEARNER, server, str(tmp_path), fmt],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert learner.stdout is not None and learner.stdout.readline().strip() == "stepped"
    finally:
        learner.send_signal(signal.SIGKILL)
        learner.wait(timeout=60)
    assert {storage_class(tmp_path / str(i)) for i in range(6)} == {"parquet" if fmt == "default" else fmt}
    loaded = load(*[tmp_path / str(i) for i in range(6)])
    for i in range(6):
        recording = loaded[str(tmp_path / str(i))]
        # Two whole episodes of 7 steps each; the third's two steps were open.
        assert recording["len"] == 14 and recording["segments"] == [[0, 7], [7, 14]], recording["segments"]
        assert [t["truncated"]["data"] for t in recording["items"]] == ([False] * 6 + [True]) * 2


_FULL_DISK = """
import json, logging, os, resource, signal, sys, warnings
import numpy as np
from unienv_remote import RemoteVectorEnv

url, record_dir = sys.argv[1], sys.argv[2]
records = []

class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.levelname, record.name, record.getMessage()))

# A handler to look at what arrives; no level set anywhere (WARNING, the default).
logging.getLogger("unienv_remote").addHandler(Keep())
envs = RemoteVectorEnv([(url, "cartpole0"), (url, "cartpole1")], record_dir=record_dir)
envs.reset(seed=0)
rng = np.random.default_rng(0)
for _ in range(60):
    envs.step(rng.integers(0, 2, size=2))
envs._recorder.flush()
before = dict(envs._recorder.stats(), error=envs.recording_error)
# From here on the disk takes nothing: every write fails (EFBIG), as on a full disk.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
for _ in range(200):
    envs.step(rng.integers(0, 2, size=2))
envs._recorder.flush()
during = envs.recording_error
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    envs.close()
    envs.close()
from unienv_remote import _native
_native.flush_logs(5.0)
print(json.dumps({"before": before, "during": during, "after": envs._recorder.stats(),
                  "error": envs.recording_error, "records": records,
                  "warnings": [(w.category.__name__, str(w.message)) for w in caught]}))
"""


def test_a_recording_that_cannot_write_says_so(tmp_path: Path) -> None:
    """The learner's recording on a disk that stops taking writes (a file
    size limit of 0 in the learner's process, EFBIG as a full disk's
    ENOSPC): the failure reaches ``logging`` with nothing configured, is on
    the vector env (``recording_error``), ``close()`` warns once, and the
    counted transitions are exactly those committed on disk."""
    import json

    server = unienv_remote.RemoteServer(idle_timeout=None)
    for k in range(2):
        server.register(f"cartpole{k}", FromGymnasiumEnv(cartpole()))
    url = server.listen("127.0.0.1", 0)
    try:
        run = subprocess.run([sys.executable, "-c", _FULL_DISK, url, str(tmp_path)],
                             capture_output=True, text=True, timeout=300)
    finally:
        server.close()
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    before, after = out["before"], out["after"]
    assert before["error"] is None and before["errors"] == 0 and before["transitions"] > 0, out
    assert after["errors"] > 0, out
    # Seen before close() (which adds the commits of the open episodes).
    assert out["during"] is not None, out
    first = out["during"].split("; the first: ")[1]
    assert out["error"].endswith("; the first: " + first), out
    assert "failed" in out["error"] and str(tmp_path) in out["error"], out
    assert [w for w in out["warnings"] if w[0] == "RuntimeWarning"] == [["RuntimeWarning", out["error"]]], out
    assert any(level in ("WARNING", "ERROR") and name.startswith("unienv_remote") and "record" in message
               for level, name, message in out["records"]), out
    # Counted: what the buffers on disk hold (their committed count).
    on_disk = sum(json.loads((tmp_path / str(i) / "metadata.json").read_text())["count"] for i in range(2))
    assert after["transitions"] == on_disk
    assert on_disk < 260  # the steps after the disk filled are not there
