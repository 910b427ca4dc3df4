"""Recording in the Parquet format (``record_format="parquet"``): each buffer
is a ``ReplayBuffer`` over ``unienv_data``'s ``ParquetStorage`` (flattened, or
one storage per leaf) that ``ReplayBuffer.load_from`` opens with unienv_data
and pyarrow alone (a fresh interpreter that never imports ``unienv_remote``),
holding exactly what the client or the learner saw; committed at each
episode's end (a SIGKILL loses only the open episode), resumed by a second
run, and refused with a clear ``ImportError`` when pyarrow is missing.

Most tests shrink the pieces to 16 rows (``PIECE_BYTES``) so that episodes
span pieces and commits rewrite partial ones.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List

import numpy as np
import pytest

pytest.importorskip("pyarrow")

import unienv_interface.remote as reference  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import RemoteVectorEnv, _record_parquet  # noqa: E402

from test_record import (CopyingCounter, TickCounter, committed, drive_batched, expected_segments,  # noqa: E402
                         load, run_episodes, wait_for)
from test_record_vector import check, drive, server  # noqa: E402,F401

PARQUET = "unienv_data.storages.parquet.ParquetStorage"


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Pieces of 16 rows (the smallest piece_size)."""
    monkeypatch.setattr(_record_parquet, "PIECE_BYTES", 1)
    yield


def host(tmp_path: Path, *envs: Any, fmt: str = "parquet") -> unienv_remote.RemoteServer:
    server = unienv_remote.RemoteServer(idle_timeout=None, record_dir=tmp_path, record_format=fmt)
    for name, env in envs:
        server.register(name, env)
    return server


def pieces(storage: Path) -> List[str]:
    return sorted(p for p in os.listdir(storage) if p.startswith("part-"))


def test_three_episodes_through_the_reference_client(tmp_path: Path, small_pieces: None) -> None:
    """Flattened (float leaves) and per-leaf (an int64 leaf) buffers, each
    equal to what the client saw, in unienv_data's own Parquet layout."""
    server = host(tmp_path, ("counter", CopyingCounter()), ("ticks", TickCounter()))
    try:
        client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
        counter = run_episodes(client.env("counter"), 3, np.random.default_rng(1))
        ticks = run_episodes(client.env("ticks"), 3, np.random.default_rng(2))
        client.close()
    finally:
        server.close()
    loaded = load(tmp_path / "counter", tmp_path / "ticks")
    for name, episodes in (("counter", counter), ("ticks", ticks)):
        got = loaded[str(tmp_path / name)]
        assert got["segments"] == expected_segments(episodes)
        assert got["items"] == [t for steps in episodes for t in steps]
    total = sum(map(len, counter))
    assert total > 16, "the episodes span two pieces"
    inner = tmp_path / "counter" / "storage" / "inner_storage"
    assert PARQUET in (tmp_path / "counter" / "storage" / "flattened_metadata.json").read_text()
    assert sorted(os.listdir(inner)) == ["_metadata.json", "part-000000.parquet", "part-000001.parquet"]
    meta = json.loads((inner / "_metadata.json").read_text())
    assert (meta["piece_size"], meta["num_rows"]) == (16, total)
    dict_meta = (tmp_path / "ticks" / "storage" / "dict_storage_metadata.json").read_text()
    assert dict_meta.count(PARQUET) == 9  # one storage per leaf
    assert pieces(tmp_path / "ticks" / "storage" / "obs.tick")


def test_a_batched_env_records_as_the_npz_format_does(tmp_path: Path, small_pieces: None) -> None:
    """The same calls on a batched counter (reset by masks) recorded in both
    formats: the buffers load equal (the NPZ ones equal the reference
    wrapper's, test_record.py)."""
    rng = np.random.default_rng(3)
    actions = [rng.uniform(0.0, 0.6, size=(3, 2)).astype(np.float32) for _ in range(40)]
    for fmt in ("npz", "parquet"):
        server = host(tmp_path / fmt, ("counter3", CopyingCounter(batch_size=3)), fmt=fmt)
        try:
            client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
            drive_batched(client.env("counter3"), actions)
            client.close()
        finally:
            server.close()
    paths = [tmp_path / fmt / "counter3" / str(i) for fmt in ("npz", "parquet") for i in range(3)]
    loaded = load(*paths)
    for i in range(3):
        npz, parquet = loaded[str(paths[i])], loaded[str(paths[3 + i])]
        assert npz["len"] > 16 and len(npz["segments"]) >= 2
        assert parquet == npz


def test_a_learner_side_recording_over_a_mixed_fleet(server: str, tmp_path: Path, small_pieces: None) -> None:
    envs = RemoteVectorEnv([(server, f"{name}_same") for name in ("pair", "single", "triple")],
                           autoreset_mode=AutoresetMode.SAME_STEP, record_dir=tmp_path, record_format="parquet")
    want = drive(envs, "same", 40, seed=3)
    envs.close()
    assert len(want) == 6
    loaded = load(*[tmp_path / str(i) for i in range(6)])
    for i in range(6):
        check(loaded[str(tmp_path / str(i))], want[i])
        assert len(pieces(tmp_path / str(i) / "storage" / "inner_storage")) == 3


HOST = r"""
import sys
sys.path.insert(0, sys.argv[2])
from test_record import CopyingCounter
import unienv_remote
from unienv_remote import _record_parquet
_record_parquet.PIECE_BYTES = 1
server = unienv_remote.RemoteServer(idle_timeout=None, record_dir=sys.argv[1], record_format="parquet")
server.register("counter", CopyingCounter())
print(server.listen("127.0.0.1", 0), flush=True)
sys.stdin.read()
"""


def test_a_host_killed_mid_episode_loses_only_the_open_episode(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOST, str(tmp_path), str(Path(__file__).parent)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    path = tmp_path / "counter"
    try:
        assert proc.stdout is not None
        client = reference.RemoteClient.connect(proc.stdout.readline().strip())
        env = client.env("counter")
        done = run_episodes(env, 3, np.random.default_rng(7))
        env.reset(seed=0)
        _, _, terminated, truncated, _ = env.step(np.zeros(2, np.float32))  # the open episode
        assert not (terminated or truncated)
        want = sum(map(len, done))
        wait_for(lambda: committed(path) == want, f"three committed episodes ({want} transitions)",
                 lambda: committed(path))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    loaded = load(path)[str(path)]
    assert loaded["segments"] == expected_segments(done)
    assert loaded["items"] == [t for steps in done for t in steps]


def test_a_second_run_resumes_the_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second run continues in the first run's partial piece, with the
    first run's piece_size (although its own would differ)."""
    episodes = []
    for run in range(2):
        monkeypatch.setattr(_record_parquet, "PIECE_BYTES", 1 if run == 0 else 1 << 20)
        server = host(tmp_path, ("counter", CopyingCounter()))
        try:
            client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
            episodes += run_episodes(client.env("counter"), 2, np.random.default_rng(10 + run))
            client.close()
        finally:
            server.close()
    path = tmp_path / "counter"
    loaded = load(path)[str(path)]
    assert loaded["segments"] == expected_segments(episodes)
    assert loaded["items"] == [t for steps in episodes for t in steps]
    inner = path / "storage" / "inner_storage"
    assert json.loads((inner / "_metadata.json").read_text())["piece_size"] == 16
    assert len(pieces(inner)) == -(-sum(map(len, episodes)) // 16)
    # An NPZ run on a Parquet recording leaves it alone (logged): not mixed.
    server = host(tmp_path, ("counter", CopyingCounter()), fmt="npz")
    try:
        client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
        run_episodes(client.env("counter"), 1, np.random.default_rng(12))
        client.close()
    finally:
        server.close()
    assert load(path)[str(path)] == loaded


NO_PYARROW = r"""
import sys
sys.modules["pyarrow"] = None  # as if it were not installed
import unienv_remote
for make in (lambda: unienv_remote.RemoteServer(record_dir=sys.argv[1], record_format="parquet"),
             lambda: unienv_remote.RemoteVectorEnv([("ws://127.0.0.1:9", "x")], record_dir=sys.argv[1],
                                                   record_format="parquet")):
    try:
        make()
    except ImportError as e:
        print(e)
unienv_remote.RemoteServer(record_dir=sys.argv[1]).close()  # NPZ needs no pyarrow
print("npz ok")
"""


def test_parquet_without_pyarrow_is_a_clear_import_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", NO_PYARROW, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and lines[2] == "npz ok", done.stdout
    for line in lines[:2]:
        assert "pip install pyarrow" in line and "record_format='parquet'" in line
    with pytest.raises(ValueError, match="record_format"):
        unienv_remote.RemoteServer(record_format="hdf5")


def test_rows_handed_over_early_then_aborted_stay_uncommitted(tmp_path: Path, small_pieces: None) -> None:
    """The writer's own contract (an episode beyond 4 MiB is handed over in
    parts; a failed one is aborted): full pieces written early hold rows
    beyond ``num_rows``, which an abort forgets and the next commit
    overwrites; unienv_data reads the committed rows."""
    from unienv_data.storages.parquet import ParquetStorage
    from unienv_interface.backends import NumpyComputeBackend
    from unienv_interface.space import BoxSpace

    def rows(a: np.ndarray) -> List[np.ndarray]:
        return [np.frombuffer(a.tobytes(), np.uint8)]

    data = np.arange(60 * 3, dtype=np.float32).reshape(60, 3)
    columns = _record_parquet.ParquetColumns([(str(tmp_path), "float32", [3])], 0)
    columns.write(rows(data[:10]), 10, True)
    columns.write(rows(-data[10:40]), 30, False)  # pieces 0 and 1 written, not committed
    assert pieces(tmp_path) == ["part-000000.parquet", "part-000001.parquet"]
    columns.abort()
    columns.write(rows(data[10:15]), 5, True)
    columns.close()
    assert sorted(os.listdir(tmp_path))[0] == "_metadata.json" and not (tmp_path / ".tmp").exists()
    space = BoxSpace(NumpyComputeBackend, -np.inf, np.inf, np.float32, shape=(3,))
    storage = ParquetStorage.load_from(tmp_path, space, read_only=True)
    assert len(storage) == 15
    np.testing.assert_array_equal(storage.get(slice(0, 15)), data[:15])


def test_metadata_is_written_as_unienv_data_writes_it(tmp_path: Path) -> None:
    from unienv_data.storages import parquet

    shapes = {"data": (3, 2)}
    parquet._write_metadata(str(tmp_path), 512, 1234, shapes, "snappy", column_dtypes={"data": "float32"})
    ours = _record_parquet.metadata_bytes(512, 1234, shapes, "snappy", {"data": "float32"})
    assert (tmp_path / "_metadata.json").read_bytes() == ours
