"""What the recording tests share (``test_record.py``, ``test_record_parquet.py``,
``test_record_vector.py``): loading a buffer with unienv_data alone in a fresh
interpreter, the counter's transitions as the reference's wrapper records them,
and the two scenarios both formats run: three counter episodes through
``serve --record`` and a host killed (SIGKILL) after its committed episodes."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import unienv_interface.remote as reference

from conftest import Server, our_binary

LOADER = r"""
import json, sys
import numpy as np
from unienv_interface.backends import NumpyComputeBackend
from unienv_data.replay_buffer import ReplayBuffer

def plain(x):
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    a = np.asarray(x)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.tolist()}

out = {}
for path in sys.argv[1:]:
    rb = ReplayBuffer.load_from(path, backend=NumpyComputeBackend)
    out[path] = {
        "len": len(rb),
        "segments": [list(s) for s in rb.get_segments()],
        "items": [plain(rb.get_at(i)) for i in range(len(rb))],
        "space": str(rb.single_space),
    }
assert not any(m.startswith("unienv_remote") for m in sys.modules), "unienv_remote was imported"
print(json.dumps(out))
"""


def load(*paths: Path) -> Dict[str, Any]:
    """Each buffer as plain data, loaded by unienv_data alone in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", LOADER, *map(str, paths)], capture_output=True, text=True,
                          cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def plain(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    a = np.asarray(x)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.tolist()}


def transition(obs, context, action, next_obs, reward, terminated, truncated, with_context=True) -> Dict[str, Any]:
    t = {
        "action": plain(np.asarray(action, np.float32)),
        "next_obs": plain(next_obs),
        "obs": plain(obs),
        "reward": plain(np.float64(reward)),
        "terminated": plain(np.bool_(terminated)),
        "truncated": plain(np.bool_(truncated)),
    }
    if with_context:
        t["context"] = plain(context)
    return t


def run_episodes(env: Any, episodes: int, rng: np.random.Generator) -> List[List[Dict[str, Any]]]:
    """Drives an unbatched counter: each episode ends when it terminates."""
    out = []
    for e in range(episodes):
        context, obs, _ = env.reset(seed=-e)
        steps = []
        done = False
        while not done:
            action = rng.uniform(0.0, 1.0, size=2).astype(np.float32)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            steps.append(transition(obs, context, action, next_obs, reward, terminated, truncated))
            obs, done = next_obs, bool(terminated or truncated)
        out.append(steps)
    return out


def expected_segments(episodes: List[List[Any]]) -> List[List[int]]:
    segments, start = [], 0
    for steps in episodes:
        segments.append([start, start + len(steps)])
        start += len(steps)
    return segments


def serve(*args: str) -> Server:
    return Server("ours", [str(our_binary()), "serve", "--addr", "127.0.0.1:0", *args])


def committed(path: Path) -> int:
    try:
        return json.loads((path / "metadata.json").read_text())["count"]
    except (OSError, ValueError, KeyError):
        return -1


def wait_for(predicate, what: str, state=lambda: None, deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}: {state()}"
        time.sleep(0.02)


def three_counter_episodes_through_serve(tmp_path: Path, *args: str) -> Tuple[Path, List[List[Dict[str, Any]]]]:
    """``serve --fixtures --record tmp_path *args`` driven by the reference
    client through three episodes of ``counter``, stopped cleanly (SIGTERM,
    which commits what is open: nothing here); checks that the buffer loads
    with unienv_data alone and holds exactly what the client saw."""
    server = serve("--fixtures", "--record", str(tmp_path), *args)
    try:
        client = reference.RemoteClient.connect(server.url)
        episodes = run_episodes(client.env("counter"), 3, np.random.default_rng(1))
        client.close()
    finally:
        server.stop()
    path = tmp_path / "counter"
    loaded = load(path)[str(path)]
    assert loaded["len"] == sum(map(len, episodes))
    assert loaded["segments"] == expected_segments(episodes)
    assert loaded["items"] == [t for steps in episodes for t in steps]
    return path, episodes


def kill_after_committed_episodes(env: Any, episodes: int, seed: int, path: Path, kill: Callable[[], None]) -> None:
    """Drives ``env`` (a counter recorded into ``path``) through ``episodes``
    episodes and one step of another (left open), waits until the finished
    ones are committed, calls ``kill`` (a SIGKILL and its reaping), then
    checks that the buffer holds the finished episodes exactly and nothing of
    the open one."""
    done = run_episodes(env, episodes, np.random.default_rng(seed))
    env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step(np.zeros(2, np.float32))  # the open episode
    assert not (terminated or truncated)
    want = sum(map(len, done))
    wait_for(lambda: committed(path) == want, f"{episodes} committed episodes ({want} transitions)",
             lambda: committed(path))
    kill()
    loaded = load(path)[str(path)]
    assert loaded["segments"] == expected_segments(done)
    assert loaded["items"] == [t for steps in done for t in steps]


def sigkill(proc: "subprocess.Popen[Any]") -> Callable[[], None]:
    """Kills ``proc`` with SIGKILL and reaps it."""
    def kill() -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    return kill


#: The storage classes a buffer's storage metadata names, by format.
STORAGE_CLASSES = {
    "npz": "unienv_data.storages.npz_storage.NPZStorage",
    "parquet": "unienv_data.storages.parquet.ParquetStorage",
}


def storage_class(path: Path) -> str:
    """The format of the buffer at ``path`` (``"npz"`` or ``"parquet"``), by
    the storage classes its flattened or dict storage metadata names (all
    the same one, or this fails)."""
    storage = path / "storage"
    meta = storage / "flattened_metadata.json"
    if meta.exists():
        classes = [json.loads(meta.read_text())["inner_storage_type"]]
    else:
        text = (storage / "dict_storage_metadata.json").read_text()
        classes = [c for c in STORAGE_CLASSES.values() if c in text]
    formats = {f for f, c in STORAGE_CLASSES.items() if c in classes}
    assert len(formats) == 1 and len(classes) == 1, classes
    return formats.pop()
