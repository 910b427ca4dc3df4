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
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

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


def test_pieces_and_metadata_are_written_as_unienv_data_writes_them(tmp_path: Path) -> None:
    """The writer's cached schema and ``_metadata.json`` template give the
    bytes unienv_data's own helpers give, piece by piece (flattened float64,
    per-leaf float32 of shape (3, 2), (1,)-shaped and scalar int64, bool)."""
    from unienv_data.storages import parquet

    rng = np.random.default_rng(4)
    cases = [("float64", (10,), rng.random((37, 10))),
             ("float32", (3, 2), rng.random((5, 3, 2)).astype(np.float32)),
             ("int64", (1,), rng.integers(-9, 9, size=(16, 1))),
             ("int64", (), rng.integers(-9, 9, size=(7,))),
             ("bool", (2,), rng.random((9, 2)) < 0.5)]
    for dtype, shape, data in cases:
        spec = ("data", np.dtype(dtype), shape)
        shapes = {"data": shape}
        theirs = parquet._numpy_arrays_to_arrow_table({"data": data}, [spec], len(data), {"data": list(shape)})
        ours = _record_parquet._table(spec, _record_parquet._schema(spec, shapes), data)
        assert ours.equals(theirs) and ours.schema.metadata == theirs.schema.metadata
        written = []
        for table in (theirs, ours):
            out = parquet.pa.BufferOutputStream()
            parquet.pq.write_table(table, out, compression="snappy", use_dictionary=False, write_statistics=False)
            written.append(out.getvalue().to_pybytes())
        assert written[0] == written[1], (dtype, shape)
        template = _record_parquet._MetadataTemplate(512, shapes, "snappy", {"data": dtype})
        for rows in (0, 1, 512, 10**12):
            assert template.bytes(rows) == _record_parquet.metadata_bytes(512, rows, shapes, "snappy",
                                                                          {"data": dtype})


def pendulums(count: int, steps: int) -> unienv_remote.RemoteServer:
    """A server of ``count`` Pendulum-v1 envs that truncate every ``steps``
    steps (a vector env over them ends every sub-env's episode on the same
    step)."""
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    server = unienv_remote.RemoteServer(idle_timeout=None)
    for i in range(count):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1", max_episode_steps=steps)))
    return server


def drive_pendulums(url: str, record: Path, fmt: str, vector_steps: int,
                    episode_ended: Optional[Callable[[], None]] = None) -> None:
    """Steps the three pendulums; ``episode_ended`` is called after each step
    on which episodes ended (see :func:`one_call_per_end`)."""
    envs = RemoteVectorEnv([(url, f"pendulum{i}") for i in range(3)], record_dir=record, record_format=fmt)
    actions = np.random.default_rng(5).uniform(-2, 2, size=(vector_steps, 3, 1)).astype(np.float32)
    envs.reset(seed=0)
    for a in actions:
        _, _, terminated, truncated, _ = envs.step(a)
        if episode_ended is not None and (np.any(terminated) or np.any(truncated)):
            episode_ended()
    envs.close()


def one_call_per_end(calls: Callable[[], int]) -> Callable[[], None]:
    """An ``episode_ended`` for :func:`drive_pendulums` that waits until the
    writer has made one more ``commit_many`` call (``calls()`` counts them):
    each step's episode ends are then committed in a call of their own,
    however fast the learner steps (the writer commits what ended during one
    drain of its queue together, so a learner running ahead would put two
    episodes of a buffer in one call)."""
    ends = 0

    def wait() -> None:
        nonlocal ends
        ends += 1
        deadline = time.monotonic() + 20
        while calls() < ends:
            assert time.monotonic() < deadline, f"no commit for episode end {ends}"
            time.sleep(0.001)

    return wait


def test_one_call_commits_the_sub_envs_that_end_together(tmp_path: Path, small_pieces: None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Three sub-envs truncating on the same step: their episodes are
    committed in one ``commit_many`` call of three buffers; the recording
    equals the NPZ one of the same run."""
    calls: List[int] = []
    commit_many = _record_parquet.ParquetFormat.commit_many

    def counting(self: Any, items: Any) -> Any:
        calls.append(len(items))
        return commit_many(self, items)

    monkeypatch.setattr(_record_parquet.ParquetFormat, "commit_many", counting)
    server = pendulums(3, 5)
    try:
        url = server.listen("127.0.0.1", 0)
        drive_pendulums(url, tmp_path / "npz", "npz", 17)  # 3 episodes of 5 steps (and autoresets)
        drive_pendulums(url, tmp_path / "parquet", "parquet", 17, one_call_per_end(lambda: len(calls)))
    finally:
        server.close()
    assert calls and max(calls) == 3 and sum(calls) == 9, calls
    paths = [tmp_path / fmt / str(i) for fmt in ("npz", "parquet") for i in range(3)]
    loaded = load(*paths)
    for i in range(3):
        npz, parquet = loaded[str(paths[i])], loaded[str(paths[3 + i])]
        assert npz["segments"] == [[0, 5], [5, 10], [10, 15]]
        assert parquet == npz


def test_a_failed_commit_of_one_buffer_leaves_the_others_committed(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """One buffer's writer failing in a batched commit (its second episode):
    the other buffers of the call are committed; that buffer keeps its
    first episode, loses the second, and records the third."""
    calls = 0
    commit_many = _record_parquet.ParquetFormat.commit_many

    def failing(self: Any, items: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            items = list(items)
            columns, arrays, rows = items[1]

            class Broken:
                def write(self, arrays: Any, rows: int, commit: bool) -> None:
                    raise OSError("disk full")

            broken = Broken()
            errors = commit_many(self, [items[0], (broken, arrays, rows), items[2]])
            assert errors[1] is not None and "disk full" in errors[1]
            return errors
        return commit_many(self, items)

    monkeypatch.setattr(_record_parquet.ParquetFormat, "commit_many", failing)
    server = pendulums(3, 5)
    try:
        url = server.listen("127.0.0.1", 0)
        drive_pendulums(url, tmp_path / "npz", "npz", 17)  # the same run (NPZ commits without commit_many)
        drive_pendulums(url, tmp_path / "parquet", "parquet", 17, one_call_per_end(lambda: calls))
    finally:
        server.close()
    assert calls == 3
    paths = [tmp_path / fmt / str(i) for fmt in ("npz", "parquet") for i in range(3)]
    loaded = load(*paths)
    for i in (0, 2):
        assert loaded[str(paths[3 + i])] == loaded[str(paths[i])]
    npz, broken = loaded[str(paths[1])], loaded[str(paths[4])]
    assert npz["segments"] == [[0, 5], [5, 10], [10, 15]]
    assert broken["segments"] == [[0, 5], [5, 10]]
    assert broken["items"] == npz["items"][:5] + npz["items"][10:]


KILLED_IN_A_BATCH = r"""
import json, os, signal, sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from unienv_remote import _record_parquet
from test_record_parquet import drive_pendulums, one_call_per_end, pendulums
calls = 0
def dying(self, items):
    global calls
    calls += 1
    if calls == 2:
        # What the first call committed (every buffer's metadata.json is
        # written before the next call), and which storage is written next.
        columns, arrays, rows = items[0]
        committed = {}
        for i in range(3):
            path = os.path.join(sys.argv[1], str(i), "metadata.json")
            committed[i] = open(path).read() if os.path.exists(path) else None
        with open(sys.argv[3], "w") as f:
            json.dump({"committed": committed, "first": columns._dirs[0]}, f)
        columns.write(arrays, rows, True)  # the first buffer's storage committed...
        os.kill(os.getpid(), signal.SIGKILL)  # ...and the process killed before the others
    return commit_many(self, items)
commit_many = _record_parquet.ParquetFormat.commit_many
_record_parquet.ParquetFormat.commit_many = dying
server = pendulums(3, 5)
drive_pendulums(server.listen("127.0.0.1", 0), sys.argv[1], "parquet", 17, one_call_per_end(lambda: calls))
"""


def test_a_crash_between_the_buffers_of_one_batched_commit(tmp_path: Path) -> None:
    """Killed inside a batched commit, after the first buffer's storage was
    committed and before the others': every buffer loads with the episodes
    committed before that call (the first storage's extra rows are beyond
    its buffer's count, which only ``metadata.json`` advances). How many
    episodes each call holds depends on how fast the learner steps, so the
    script writes down what was committed when the second call began."""
    record, side = tmp_path / "rec", tmp_path / "killed.json"
    done = subprocess.run([sys.executable, "-c", KILLED_IN_A_BATCH, str(record), str(Path(__file__).parent), str(side)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    killed = json.loads(side.read_text())
    paths = [record / str(i) for i in range(3)]
    loaded = load(*paths)
    first = None
    for i, path in enumerate(paths):
        before = killed["committed"][str(i)]
        assert before is not None and (path / "metadata.json").read_text() == before  # nothing advanced
        count = json.loads(before)["count"]
        assert count % 5 == 0
        assert loaded[str(path)]["segments"] == [[k, k + 5] for k in range(0, count, 5)]
        if Path(killed["first"]).is_relative_to(path):
            first = count
    assert first is not None
    # The first storage holds more rows than its buffer's committed count.
    assert json.loads((Path(killed["first"]) / "_metadata.json").read_text())["num_rows"] > first
