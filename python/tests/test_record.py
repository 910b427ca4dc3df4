"""Recording on the host (``serve --record DIR``, ``RemoteServer(record_dir=DIR)``):
every env-mode transition lands in ``DIR/<resource_id>/`` as a ``unienv_data``
``ReplayBuffer`` that ``ReplayBuffer.load_from`` opens with unienv alone (NPZ)
or with unienv and pyarrow (Parquet, the default), equal to the transitions
the client saw, and to what ``ReplayBufferCollectionWrapper`` records when the
same env is wrapped locally.

Most tests run twice (``fmt``): with no format given (the default, which must
be Parquet) and with ``npz`` asked for. The loading runs in a fresh
interpreter that never imports ``unienv_remote``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pytest
import unienv_interface.remote as reference

from conftest import REPO

sys.path.insert(0, str(REPO / "tests" / "py"))
from ref_fixture_server import CounterEnv  # noqa: E402
from _record_helpers import (LOADER, expected_segments, kill_after_committed_episodes, load,  # noqa: E402
                             plain, run_episodes, serve, sigkill, storage_class,
                             three_counter_episodes_through_serve)

#: ``None``: no format given (the default: Parquet); ``"npz"``: asked for.
FORMATS = [None, "npz"]
fmt_param = pytest.mark.parametrize("fmt", FORMATS, ids=["default", "npz"])


def flags(fmt: Optional[str]) -> List[str]:
    """``serve``'s flags for ``fmt``."""
    return [] if fmt is None else ["--record-format", fmt]


def kwargs(fmt: Optional[str]) -> Dict[str, str]:
    """``RemoteServer``'s keywords for ``fmt``."""
    return {} if fmt is None else {"record_format": fmt}


def expected_class(fmt: Optional[str]) -> str:
    return "npz" if fmt == "npz" else "parquet"


@fmt_param
def test_three_episodes_through_our_server_load_with_unienv_data(tmp_path: Path, fmt: Optional[str]) -> None:
    path, _ = three_counter_episodes_through_serve(tmp_path, *flags(fmt))
    assert storage_class(path) == expected_class(fmt)


@fmt_param
def test_a_crash_loses_only_the_open_episode(tmp_path: Path, fmt: Optional[str]) -> None:
    server = serve("--fixtures", "--record", str(tmp_path), *flags(fmt))
    try:
        client = reference.RemoteClient.connect(server.url)
        # The two finished episodes are committed by the writer thread.
        kill_after_committed_episodes(client.env("counter"), 2, 2, tmp_path / "counter", sigkill(server.process))
    finally:
        server.stop()
    assert storage_class(tmp_path / "counter") == expected_class(fmt)


@fmt_param
def test_batched_env_records_one_buffer_per_sub_env_like_the_wrapper(tmp_path: Path, fmt: Optional[str]) -> None:
    """A batched counter hosted by our Python RemoteServer, reset with masks,
    recorded per sub-env; the same calls on a local copy wrapped in
    ReplayBufferCollectionWrapper (per_env mode) give the same buffers."""
    from unienv_data.replay_buffer import ReplayBuffer, ReplayBufferCollectionWrapper
    from unienv_data.storages.dict_storage import DictStorage
    from unienv_data.storages.npz_storage import NPZStorage
    from unienv_interface.backends import NumpyComputeBackend

    import unienv_remote

    record = tmp_path / "rec"
    server = unienv_remote.RemoteServer(idle_timeout=None, record_dir=record, **kwargs(fmt))
    server.register("counter3", CounterEnv(batch_size=3))
    rng = np.random.default_rng(3)
    actions = [rng.uniform(0.0, 0.6, size=(3, 2)).astype(np.float32) for _ in range(40)]
    try:
        client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
        remote = client.env("counter3")
        calls = drive_batched(remote, actions)
        client.close()
    finally:
        server.close()
    paths = [record / "counter3" / str(i) for i in range(3)]
    assert {storage_class(p) for p in paths} == {expected_class(fmt)}
    loaded = load(*paths)

    # The same calls on a local copy, recorded by unienv_data's own wrapper
    # into buffers of the recorded space.
    local_env = CopyingCounter(batch_size=3)
    space = ReplayBuffer.load_from(paths[0], backend=NumpyComputeBackend).single_space
    keys = ["action", "context", "next_obs/position", "obs/position", "reward", "terminated", "truncated"]
    buffers = [
        ReplayBuffer.create(DictStorage, space, storage_cls_map={k: NPZStorage for k in keys},
                            cache_path=tmp_path / f"local{i}", maintain_segment_metadata=True)
        for i in range(3)
    ]
    wrapped = ReplayBufferCollectionWrapper(local_env, buffers, replay_mode="per_env")
    local_calls = drive_batched(wrapped, actions)
    assert [c[:2] for c in local_calls] == [c[:2] for c in calls]
    for rb in buffers:  # the wrapper leaves open episodes open; the server commits them on close()
        if rb.storage.has_open_segment:
            rb.mark_segment_end()
    for i, path in enumerate(paths):
        got = loaded[str(path)]
        assert got["len"] == len(buffers[i]) > 0
        assert got["segments"] == [list(s) for s in buffers[i].get_segments()]
        assert got["items"] == [plain(buffers[i].get_at(j)) for j in range(len(buffers[i]))]
        assert len(got["segments"]) >= 2


class CopyingCounter(CounterEnv):
    """The counter, returning copies: it returns its own state array, which a
    local wrapper would keep a reference to while the next step changes it
    (the remote client always gets copies)."""

    def reset(self, *, mask=None, seed=None, **kwargs):
        context, obs, info = super().reset(mask=mask, seed=seed, **kwargs)
        return context.copy(), {"position": obs["position"].copy()}, info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return {"position": obs["position"].copy()}, reward, terminated, truncated, info


def drive_batched(env: Any, actions: List[np.ndarray]) -> List[Any]:
    """Steps a batched counter; sub-envs that terminate are reset by mask."""
    seen = []
    env.reset(seed=0)
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        seen.append(("step", np.asarray(reward).tolist(), np.asarray(terminated).tolist()))
        done = np.logical_or(terminated, truncated)
        if done.any():
            env.reset(mask=done, seed=0)
            seen.append(("reset", done.tolist(), None))
    return seen


@pytest.mark.parametrize("sim", ["cartpole", "pointmass"])
def test_record_on_the_built_in_simulators(tmp_path: Path, sim: str) -> None:
    server = serve("--record", str(tmp_path))
    steps = 25
    try:
        client = reference.RemoteClient.connect(server.url)
        env = client.env(sim)
        rng = np.random.default_rng(4)
        env.reset(seed=4)
        observed = []
        ended = 0
        for _ in range(steps):
            rng, action = env.action_space.sample(rng)
            obs, reward, terminated, truncated, _ = env.step(action)
            observed.append((np.asarray(action), float(reward), bool(terminated or truncated)))
            if terminated or truncated:
                ended += 1
                env.reset()
        client.close()
    finally:
        server.stop()  # a clean stop commits the open episode
    path = tmp_path / sim
    # Only envs record: the detached gripper node and untouched envs leave nothing.
    assert sorted(os.listdir(tmp_path)) == [sim]
    loaded = load(path)[str(path)]
    assert loaded["len"] == steps
    assert len(loaded["segments"]) == ended + (0 if observed[-1][2] else 1)
    for item, (action, reward, done) in zip(loaded["items"], observed):
        assert item["action"]["data"] == action.tolist()
        assert item["reward"]["data"] == reward
        assert (item["terminated"]["data"] or item["truncated"]["data"]) == done


@fmt_param
def test_rust_server_flushes_on_sigterm_and_resumes(tmp_path: Path, fmt: Optional[str]) -> None:
    """A second run of the server continues the same buffer after the committed episodes."""
    episodes = []
    for run in range(2):
        server = serve("--fixtures", "--record", str(tmp_path), *flags(fmt))
        try:
            client = reference.RemoteClient.connect(server.url)
            episodes += run_episodes(client.env("counter"), 1, np.random.default_rng(10 + run))
            client.close()
        finally:
            server.stop()
    path = tmp_path / "counter"
    loaded = load(path)[str(path)]
    assert loaded["segments"] == expected_segments(episodes)
    assert loaded["items"] == [t for steps in episodes for t in steps]


@fmt_param
def test_no_stray_files_beyond_the_buffer_layout(tmp_path: Path, fmt: Optional[str]) -> None:
    server = serve("--fixtures", "--record", str(tmp_path), *flags(fmt))
    try:
        client = reference.RemoteClient.connect(server.url)
        episode = run_episodes(client.env("counter"), 1, np.random.default_rng(5))[0]
        client.close()
    finally:
        server.stop()
    # Every leaf of counter converts to float64 exactly: one flattened storage,
    # NPZ's a file per element, Parquet's one piece (and its _metadata.json).
    storage = tmp_path / "counter" / "storage"
    assert sorted(os.listdir(storage)) == ["flattened_metadata.json", "inner_storage"]
    assert sorted(os.listdir(tmp_path / "counter")) == ["metadata.json", "storage"]
    assert "unienv_data.storages.flattened.FlattenedStorage" in (tmp_path / "counter" / "metadata.json").read_text()
    inner = sorted(os.listdir(storage / "inner_storage"))
    if fmt == "npz":
        assert inner == sorted([f"{i}.npz" for i in range(len(episode))] + ["npz_metadata.json"])
    else:
        assert inner == ["_metadata.json", "part-000000.parquet"]
    assert not list((tmp_path / "counter").glob("**/*.tmp"))


class TickCounter(CopyingCounter):
    """The counter with an int64 tick beyond float64's exact integers: its
    elements cannot be flattened to float64, so each leaf gets its own storage."""

    def __init__(self) -> None:
        super().__init__()
        from unienv_interface.backends import NumpyComputeBackend as B
        from unienv_interface.space import BoxSpace, DictSpace

        self.observation_space = DictSpace(B, {
            "position": BoxSpace(B, -np.inf, np.inf, np.float32, shape=(2,)),
            "tick": BoxSpace(B, 0, 2 ** 62, np.int64, shape=()),
        })
        self.tick = 0

    def reset(self, *, mask=None, seed=None, **kwargs):
        context, obs, info = super().reset(mask=mask, seed=seed, **kwargs)
        self.tick = 2 ** 60 + 1
        return context, {**obs, "tick": np.int64(self.tick)}, info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.tick += 1
        return {**obs, "tick": np.int64(self.tick)}, reward, terminated, truncated, info


@fmt_param
def test_int64_leaves_are_stored_per_leaf_exactly(tmp_path: Path, fmt: Optional[str]) -> None:
    import unienv_remote

    server = unienv_remote.RemoteServer(idle_timeout=None, record_dir=tmp_path, **kwargs(fmt))
    server.register("ticks", TickCounter())
    try:
        client = reference.RemoteClient.connect(server.listen("127.0.0.1", 0))
        episodes = run_episodes(client.env("ticks"), 2, np.random.default_rng(6))
        client.close()
    finally:
        server.close()
    path = tmp_path / "ticks"
    assert "unienv_data.storages.dict_storage.DictStorage" in (path / "metadata.json").read_text()
    assert storage_class(path) == expected_class(fmt)
    loaded = load(path)[str(path)]
    assert loaded["segments"] == expected_segments(episodes)
    assert loaded["items"] == [t for steps in episodes for t in steps]
    assert loaded["items"][0]["next_obs"]["tick"] == {"dtype": "int64", "shape": [], "data": 2 ** 60 + 2}


NO_PYARROW_LOADER = "import sys; sys.modules['pyarrow'] = None  # as if it were not installed\n" + LOADER


@fmt_param
def test_what_loading_needs_besides_unienv(tmp_path: Path, fmt: Optional[str]) -> None:
    """NPZ loads with unienv alone; the default (Parquet) needs pyarrow:
    without it ``load_from`` raises ``ModuleNotFoundError`` naming pyarrow
    (unienv_data's parquet module imports it), as the docs say."""
    path, _ = three_counter_episodes_through_serve(tmp_path, *flags(fmt))
    done = subprocess.run([sys.executable, "-c", NO_PYARROW_LOADER, str(path)], capture_output=True, text=True,
                          cwd="/", timeout=120)
    if fmt == "npz":
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == load(path)
    else:
        assert done.returncode != 0
        assert "ModuleNotFoundError" in done.stderr and "pyarrow" in done.stderr, done.stderr
