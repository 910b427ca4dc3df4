"""Recording in the Parquet format (``record_format="parquet"``): each buffer
is a ``ReplayBuffer`` over ``unienv_data``'s ``ParquetStorage`` (flattened, or
one storage per leaf) that ``ReplayBuffer.load_from`` opens with unienv_data
and pyarrow alone (a fresh interpreter that never imports ``unienv_remote``),
holding exactly what the client or the learner saw; committed at each
episode's end (a SIGKILL loses only the open episode), resumed by a second
run. The pieces are written by the Rust recorder (no pyarrow): they are
compared here with the files pyarrow writes of unienv_data's own tables,
for every dtype and shape the recorder stores, value for value, schema for
schema and byte for byte where pyarrow's bytes are ours to match (the
``ARROW:schema`` and ``column_shapes`` keys, ``_metadata.json``).

Most tests shrink the pieces to 16 rows (``PARQUET_PIECE_BYTES``) so that
episodes span pieces and commits rewrite partial ones.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np
import pytest

pytest.importorskip("pyarrow")

import unienv_interface.remote as reference  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import RemoteVectorEnv, _record  # noqa: E402

from _record_helpers import (committed, expected_segments, kill_after_committed_episodes, load,  # noqa: E402
                             run_episodes, sigkill, storage_class, three_counter_episodes_through_serve,
                             wait_for)
from test_record import CopyingCounter, TickCounter, drive_batched  # noqa: E402
from test_record_vector import check, drive, server  # noqa: E402,F401

PARQUET = "unienv_data.storages.parquet.ParquetStorage"


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Pieces of 16 rows (the smallest piece_size)."""
    monkeypatch.setattr(_record, "PARQUET_PIECE_BYTES", 1)
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


def test_serve_records_parquet_without_python(tmp_path: Path) -> None:
    """``serve --record DIR --record-format parquet`` (the Rust host alone)."""
    path, _ = three_counter_episodes_through_serve(tmp_path, "--record-format", "parquet")
    assert PARQUET in (path / "storage" / "flattened_metadata.json").read_text()
    assert pieces(path / "storage" / "inner_storage") == ["part-000000.parquet"]


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
from unienv_remote import _record
_record.PARQUET_PIECE_BYTES = 1
server = unienv_remote.RemoteServer(idle_timeout=None, record_dir=sys.argv[1], record_format="parquet")
server.register("counter", CopyingCounter())
print(server.listen("127.0.0.1", 0), flush=True)
sys.stdin.read()
"""


def test_a_host_killed_mid_episode_loses_only_the_open_episode(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HOST, str(tmp_path), str(Path(__file__).parent)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        client = reference.RemoteClient.connect(proc.stdout.readline().strip())
        kill_after_committed_episodes(client.env("counter"), 3, 7, tmp_path / "counter", sigkill(proc))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)


def test_a_second_run_resumes_the_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second run continues in the first run's partial piece, with the
    first run's piece_size (although its own would differ)."""
    episodes = []
    for run in range(2):
        monkeypatch.setattr(_record, "PARQUET_PIECE_BYTES", 1 if run == 0 else 1 << 20)
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
import json, sys
sys.modules["pyarrow"] = None  # as if it were not installed
sys.path.insert(0, sys.argv[2])
import numpy as np
import unienv_interface.remote as reference
import unienv_remote
from unienv_remote import _record
from test_record import CopyingCounter, run_episodes
_record.PARQUET_PIECE_BYTES = 1
server = unienv_remote.RemoteServer(idle_timeout=None, record_dir=sys.argv[1])  # the default: Parquet
server.register("counter", CopyingCounter())
client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
episodes = run_episodes(client.env("counter"), 3, np.random.default_rng(8))
client.close()
server.close()
assert "pyarrow" not in sys.modules or sys.modules["pyarrow"] is None
print(json.dumps(episodes))
"""


def test_recording_needs_no_pyarrow(tmp_path: Path) -> None:
    """The Rust writer records Parquet (the default format) in a process
    without pyarrow, warning once that loading will need it; unienv_data
    (with pyarrow) loads what the client saw."""
    done = subprocess.run([sys.executable, "-c", NO_PYARROW, str(tmp_path), str(Path(__file__).parent)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warned) == 1 and "needs pyarrow" in warned[0], done.stderr
    episodes = json.loads(done.stdout.splitlines()[-1])
    path = tmp_path / "counter"
    assert storage_class(path) == "parquet"
    loaded = load(path)[str(path)]
    assert loaded["segments"] == expected_segments(episodes)
    assert loaded["items"] == [t for steps in episodes for t in steps]
    with pytest.raises(ValueError, match="record_format"):
        unienv_remote.RemoteServer(record_format="hdf5")
    with pytest.raises(ValueError, match="record_format"):
        RemoteVectorEnv([], record_format="hdf5")
    # With pyarrow here, nothing to warn about.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unienv_remote.RemoteServer(record_dir=tmp_path / "quiet")
        assert _record.native_format("parquet") == ("parquet", _record.PARQUET_PIECE_BYTES)
        assert _record.native_format("npz") == "npz"
        assert _record.native_format("npz", recording=False) is None


class AllDtypes(TickCounter):
    """The counter with an observation leaf of every dtype unienv_data's
    Parquet storage holds (and the int64 tick: stored per leaf, each leaf a
    storage of its own dtype and shape): scalars, (1,), multi-dim. (Not
    float16: the protocol's space documents have no name for it, so no env
    declares it.)"""

    LEAVES = {"f32": ("float32", (3, 2)), "f64": ("float64", ()),
              "i8": ("int8", (2,)), "i16": ("int16", ()), "i32": ("int32", (1,)),
              "u8": ("uint8", (2, 2)), "u16": ("uint16", (3,)), "u32": ("uint32", ()),
              "u64": ("uint64", (2,)), "flag": ("bool", (2,))}

    def __init__(self) -> None:
        super().__init__()
        from unienv_interface.backends import NumpyComputeBackend as B
        from unienv_interface.space import BinarySpace, BoxSpace, DictSpace

        spaces = dict(self.observation_space.spaces)
        for name, (dtype, shape) in self.LEAVES.items():
            if dtype == "bool":
                spaces[name] = BinarySpace(B, shape=shape)
            elif dtype.startswith("float"):
                spaces[name] = BoxSpace(B, -np.inf, np.inf, np.dtype(dtype), shape=shape)
            else:
                info = np.iinfo(dtype)
                spaces[name] = BoxSpace(B, info.min, info.max, np.dtype(dtype), shape=shape)
        self.observation_space = DictSpace(B, spaces)

    def extra(self, obs: Dict[str, Any]) -> Dict[str, Any]:
        rng = np.random.default_rng(self.tick % 1000)
        out = dict(obs)
        for name, (dtype, shape) in self.LEAVES.items():
            if dtype == "bool":
                out[name] = rng.random(shape) < 0.5
            elif dtype.startswith("float"):
                out[name] = np.asarray(rng.normal(size=shape) * 100, dtype=dtype)
            else:
                info = np.iinfo(dtype)
                out[name] = np.asarray(rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True))
        return out

    def reset(self, *, mask=None, seed=None, **kwargs):
        context, obs, info = super().reset(mask=mask, seed=seed, **kwargs)
        return context, self.extra(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return self.extra(obs), reward, terminated, truncated, info


def leaf(item: Dict[str, Any], key: str) -> np.ndarray:
    """The array of ``key`` (``next_obs/f16``) in one loaded transition."""
    for part in key.split("/"):
        item = item[part]
    return np.array(item["data"], dtype=item["dtype"]).reshape(item["shape"])


def compare_with_pyarrow(storage: Path, rows: List[np.ndarray]) -> None:
    """``storage`` (written by us) against what unienv_data writes of
    ``rows`` (``_numpy_arrays_to_arrow_table``, ``_write_piece_to_disk``'s
    ``pq.write_table``, ``_write_metadata``): the same ``_metadata.json``
    bytes, and per piece the same Arrow schema with its metadata, the same
    Parquet schema, the same ``ARROW:schema`` and ``column_shapes`` bytes,
    and equal tables (values, types, row count; ours in a row group per
    commit)."""
    from unienv_data.storages import parquet

    meta = json.loads((storage / "_metadata.json").read_text())
    piece, count = meta["piece_size"], meta["num_rows"]
    assert count == len(rows)
    spec = ("data", rows[0].dtype, rows[0].shape)
    theirs_dir = storage.parent / (storage.name + ".pyarrow")
    theirs_dir.mkdir()
    try:
        parquet._write_metadata(str(theirs_dir), piece, count, {"data": rows[0].shape}, "snappy",
                                column_dtypes=parquet._serialize_column_dtypes([spec]))
        assert (storage / "_metadata.json").read_bytes() == (theirs_dir / "_metadata.json").read_bytes()
        for index in range(-(-count // piece)):
            part = np.stack(rows[index * piece:(index + 1) * piece])
            parquet._write_piece_to_disk(str(theirs_dir), index, {"data": part}, [spec], len(part),
                                         {"data": rows[0].shape}, "snappy")
            name = parquet._piece_filename(index)
            ours_file = parquet.pq.ParquetFile(storage / name)
            theirs_file = parquet.pq.ParquetFile(theirs_dir / name)
            assert ours_file.schema.equals(theirs_file.schema), (storage, ours_file.schema, theirs_file.schema)
            ours_kv, theirs_kv = ours_file.metadata.metadata, theirs_file.metadata.metadata
            assert ours_kv == theirs_kv, storage
            # (one row group per commit that wrote to the piece, pyarrow's one in all)
            assert ours_file.metadata.num_row_groups >= 1
            ours = parquet.pq.read_table(storage / name)
            theirs = parquet.pq.read_table(theirs_dir / name)
            assert ours.schema.equals(theirs.schema, check_metadata=True), (storage, ours.schema)
            assert ours.equals(theirs), storage
            values = parquet._arrow_table_to_numpy_arrays(ours, {"data": rows[0].shape})["data"]
            assert values.dtype == part.dtype and values.tobytes() == part.tobytes()
    finally:
        shutil.rmtree(theirs_dir)


def test_every_dtype_and_shape_as_pyarrow_writes_it(tmp_path: Path, small_pieces: None) -> None:
    """A storage per leaf of every dtype (scalars, (1,), multi-dim, bool,
    integers, floats), checked against pyarrow's files after each episode's
    commit: the partial piece rewritten at each commit, the full ones
    left; the buffer loads as the client saw it."""
    server = host(tmp_path, ("all", AllDtypes()))
    path = tmp_path / "all"
    seen: List[Dict[str, Any]] = []
    episodes: List[List[Dict[str, Any]]] = []
    try:
        client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
        env = client.env("all")
        for episode in range(3):
            episodes += run_episodes(env, 1, np.random.default_rng(20 + episode))
            seen += episodes[-1]
            wait_for(lambda: committed(path) == len(seen), f"{len(seen)} committed transitions",
                     lambda: committed(path))
            storage_map = json.loads((path / "storage" / "dict_storage_metadata.json").read_text())["storage_map"]
            assert len(storage_map) == 2 * (len(AllDtypes.LEAVES) + 2) + 5
            for key, entry in storage_map.items():
                assert entry["type"] == PARQUET
                compare_with_pyarrow(path / "storage" / entry["path"], [leaf(t, key) for t in seen])
        client.close()
    finally:
        server.close()
    assert len(seen) > 16, "the episodes span two pieces"
    loaded = load(path)[str(path)]
    assert loaded["segments"] == expected_segments(episodes)
    assert loaded["items"] == seen


def test_a_flattened_storage_as_pyarrow_writes_it(tmp_path: Path, small_pieces: None) -> None:
    """The flattened transition (one float64 column of every leaf's values)."""
    server = host(tmp_path, ("counter", CopyingCounter()))
    path = tmp_path / "counter"
    try:
        client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
        episodes = run_episodes(client.env("counter"), 3, np.random.default_rng(1))
        client.close()
    finally:
        server.close()
    seen = [t for steps in episodes for t in steps]
    keys = ["action", "context", "next_obs/position", "obs/position", "reward", "terminated", "truncated"]
    rows = [np.concatenate([leaf(t, k).astype(np.float64).ravel() for k in keys]) for t in seen]
    compare_with_pyarrow(path / "storage" / "inner_storage", rows)


def test_sub_envs_that_end_together_record_as_npz_does(tmp_path: Path, small_pieces: None) -> None:
    """Three sub-envs truncating on the same step (their episodes committed
    in one batch): the recording equals the NPZ one of the same run."""
    server = pendulums(3, 5)
    try:
        url = server.listen("127.0.0.1", 0)
        drive_pendulums(url, tmp_path / "npz", "npz", 17)  # 3 episodes of 5 steps (and autoresets)
        drive_pendulums(url, tmp_path / "parquet", "parquet", 17)
    finally:
        server.close()
    paths = [tmp_path / fmt / str(i) for fmt in ("npz", "parquet") for i in range(3)]
    loaded = load(*paths)
    for i in range(3):
        npz, parquet = loaded[str(paths[i])], loaded[str(paths[3 + i])]
        assert npz["segments"] == [[0, 5], [5, 10], [10, 15]]
        assert parquet == npz


def test_a_failed_commit_of_one_buffer_leaves_the_others_committed(tmp_path: Path) -> None:
    """One buffer's storage failing to commit (its second episode: its
    ``.tmp`` directory replaced by a file): the other buffers are
    committed; that buffer keeps its first episode, loses the second, and
    records the third."""
    record = tmp_path / "parquet"
    broken = record / "1" / "storage" / "inner_storage" / ".tmp"
    ends = 0

    def episode_ended() -> None:
        nonlocal ends
        ends += 1
        wait_for(lambda: committed(record / "2") == 5 * ends, f"episode {ends} of buffer 2",
                 lambda: committed(record / "2"))
        if ends == 1:
            shutil.rmtree(broken)
            broken.write_bytes(b"")  # the next commit of buffer 1 cannot write its piece
        elif ends == 2:
            broken.unlink()
            broken.mkdir()

    server = pendulums(3, 5)
    try:
        url = server.listen("127.0.0.1", 0)
        drive_pendulums(url, tmp_path / "npz", "npz", 17)
        # The vector env's close() warns of the failed commit.
        with pytest.warns(RuntimeWarning, match=r"failed 1 time\(s\); the first: .*commit failed"):
            drive_pendulums(url, record, "parquet", 17, episode_ended)
    finally:
        server.close()
    assert ends == 3
    paths = [tmp_path / fmt / str(i) for fmt in ("npz", "parquet") for i in range(3)]
    loaded = load(*paths)
    for i in (0, 2):
        assert loaded[str(paths[3 + i])] == loaded[str(paths[i])]
    npz, failed = loaded[str(paths[1])], loaded[str(paths[4])]
    assert npz["segments"] == [[0, 5], [5, 10], [10, 15]]
    assert failed["segments"] == [[0, 5], [5, 10]]
    assert failed["items"] == npz["items"][:5] + npz["items"][10:]


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
    on which episodes ended."""
    envs = RemoteVectorEnv([(url, f"pendulum{i}") for i in range(3)], record_dir=record, record_format=fmt)
    actions = np.random.default_rng(5).uniform(-2, 2, size=(vector_steps, 3, 1)).astype(np.float32)
    envs.reset(seed=0)
    for a in actions:
        _, _, terminated, truncated, _ = envs.step(a)
        if episode_ended is not None and (np.any(terminated) or np.any(truncated)):
            episode_ended()
    envs.close()


KILLED_WHILE_COMMITTING = r"""
import sys
sys.path.insert(0, sys.argv[2])
from unienv_remote import _record
from test_record_parquet import drive_pendulums, pendulums
_record.PARQUET_PIECE_BYTES = 1
server = pendulums(3, 5)
print("ready", flush=True)
drive_pendulums(server.listen("127.0.0.1", 0), sys.argv[1], "parquet", 100000)
"""


def test_a_learner_killed_while_committing_keeps_whole_episodes(tmp_path: Path) -> None:
    """A SIGKILL at an arbitrary moment of a recording that commits all the
    time (three sub-envs ending every 5 steps, 16-row pieces): every
    buffer loads with whole episodes, equal to the same run's NPZ
    recording as far as it got; storages may hold rows beyond the
    buffer's count, which only ``metadata.json`` advances."""
    record = tmp_path / "parquet"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WHILE_COMMITTING, str(record), str(Path(__file__).parent)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        wait_for(lambda: all(committed(record / str(i)) >= 60 for i in range(3)), "12 committed episodes",
                 deadline=60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)
    counts = [committed(record / str(i)) for i in range(3)]
    server = pendulums(3, 5)
    try:
        drive_pendulums(server.listen("127.0.0.1", 0), tmp_path / "npz", "npz", (max(counts) // 5) * 6)
    finally:
        server.close()
    paths = [record / str(i) for i in range(3)] + [tmp_path / "npz" / str(i) for i in range(3)]
    loaded = load(*paths)
    for i, count in enumerate(counts):
        got, npz = loaded[str(paths[i])], loaded[str(paths[3 + i])]
        assert count % 5 == 0 and got["segments"] == [[k, k + 5] for k in range(0, count, 5)]
        assert got["items"] == npz["items"][:count]
        rows = json.loads((paths[i] / "storage" / "inner_storage" / "_metadata.json").read_text())["num_rows"]
        assert rows >= count
