"""``_gather_infos`` (a vector step's infos, a column at a time when the envs
report the same keys with values of one type) gives what Gymnasium's
``_add_info`` gives env by env, to the byte: the same keys in the same order,
each value array and mask of the same dtype, shape and bytes; across the
cases it takes whole (scalars of every NumPy type, 0-d and n-d arrays, envs
without an info, unused envs) and those it hands to ``_add_info`` (keys that
differ, mixed types, nested dicts, objects, ``final_obs``, ``_``-keys)."""

from typing import Any, Dict, List, Optional

import numpy as np
import pytest

from unienv_remote.vector import _gather_infos, _InfoBuilder


def by_add_info(n: int, env_infos: List[Dict[str, Any]], used: Optional[List[bool]] = None) -> Dict[str, Any]:
    builder = _InfoBuilder(n)
    infos: Dict[str, Any] = {}
    for i, info in enumerate(env_infos):
        if info and (used is None or used[i]):
            infos = builder._add_info(infos, info, i)
    return infos


def same(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        if a.dtype == object:
            assert len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b))
        else:
            assert a.tobytes() == b.tobytes()
    else:
        assert a == b


CHEETAH = [{"x_position": 0.1 * i, "x_velocity": -1.5 * i, "reward_forward": float(i),
            "reward_ctrl": np.array(-0.01 * i, np.float32)} for i in range(16)]

CASES: Dict[str, List[Dict[str, Any]]] = {
    "cheetah": CHEETAH,
    "some envs without infos": [{} if i % 3 == 0 else CHEETAH[i] for i in range(16)],
    "ints and bools": [{"lives": i, "done": i % 2 == 0, "np_bool": np.bool_(i % 3 == 0)} for i in range(8)],
    "numpy scalars": [{"a": np.float32(i / 3), "b": np.int32(-i), "c": np.uint8(i), "d": np.float16(i / 7),
                       "e": np.int64(i * 10 ** 12)} for i in range(8)],
    "n-d arrays": [{"contact": np.arange(6, dtype=np.float64).reshape(2, 3) * i, "ids": np.array([i, i + 1])}
                   for i in range(8)],
    "keys differ": [{"a": 1.0} if i % 2 else {"b": 2.0} for i in range(8)],
    "key order differs": [{"a": float(i), "b": 2.0} if i % 2 else {"b": 3.0, "a": float(i)} for i in range(8)],
    "types differ": [{"a": 1 if i % 2 else 1.5} for i in range(8)],
    "bool after int": [{"a": i if i else True} for i in range(8)],
    "array shapes differ": [{"a": np.zeros(i % 2 + 1)} for i in range(2)] + [{"a": np.zeros(1)}],
    "array dtypes differ": [{"a": np.zeros(2, np.float32 if i % 2 else np.float64)} for i in range(8)],
    "nested": [{"inner": {"x": float(i), "y": i}, "z": 1.0} for i in range(8)],
    "objects": [{"name": f"env{i}", "z": 1.0} for i in range(8)],
    "final_obs": [{"final_obs": np.zeros(3), "final_info": {}} for _ in range(4)],
    "underscore keys": [{"x": 1.0, "_x": 2.0} for _ in range(4)],
    "none": [{} for _ in range(8)],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_equals_add_info(name: str) -> None:
    env_infos = CASES[name]
    for n in (len(env_infos), len(env_infos) + 3):
        try:
            want = by_add_info(n, env_infos)
        except ValueError as e:  # arrays of other shapes: _add_info cannot stack them
            with pytest.raises(type(e), match="broadcast"):
                _gather_infos(_InfoBuilder(n), env_infos)
            continue
        same(want, _gather_infos(_InfoBuilder(n), env_infos))


@pytest.mark.parametrize("name", ["cheetah", "ints and bools", "keys differ"])
def test_gather_leaves_out_unused_envs(name: str) -> None:
    env_infos = CASES[name]
    used = [i % 4 != 1 for i in range(len(env_infos))]
    same(by_add_info(len(env_infos), env_infos, used), _gather_infos(_InfoBuilder(len(env_infos)), env_infos, used))


def test_gather_copies_the_values() -> None:
    """The columns hold the values, not the envs' arrays: a sub-env that
    writes into its info array later changes nothing gathered."""
    env_infos = [{"a": np.array([1.0, 2.0])} for _ in range(4)]
    infos = _gather_infos(_InfoBuilder(4), env_infos)
    env_infos[0]["a"][0] = 99.0
    assert infos["a"][0, 0] == 1.0


class Counting(_InfoBuilder):
    calls = 0

    def _add_info(self, *args: Any) -> Any:  # type: ignore[override]
        Counting.calls += 1
        return super()._add_info(*args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_general_way_is_gymnasiums_add_info(name: str) -> None:
    """Infos the extension did not gather (one dict per env) go through
    Gymnasium's ``_add_info``, at least once per reporting env; a dict (gathered by
    the extension) is returned as it is."""
    Counting.calls = 0
    try:
        _gather_infos(Counting(len(CASES[name])), CASES[name])
    except ValueError:  # arrays of other shapes: _add_info cannot stack them
        assert name == "array shapes differ"
        return
    # (nested dicts are more calls: _add_info recurses)
    assert Counting.calls >= sum(1 for info in CASES[name] if info) and (Counting.calls > 0) == any(CASES[name])
    gathered = {"a": np.zeros(2), "_a": np.ones(2, np.bool_)}
    assert _gather_infos(Counting(2), gathered) is gathered


def test_halfcheetah_infos_equal_sync_vector_envs(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: HalfCheetah's four infos (three floats and a float32
    0-d array) from a batched and a single remote resource, gathered whole,
    equal ``SyncVectorEnv``'s over the same envs, dtypes and bytes."""
    gymnasium = pytest.importorskip("gymnasium")
    pytest.importorskip("mujoco")
    from gymnasium.vector import SyncVectorEnv
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    import unienv_remote
    from unienv_remote import BatchedEnv, RemoteVectorEnv

    def make() -> Any:
        return gymnasium.make("HalfCheetah-v5")

    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("batch", BatchedEnv([make] * 3))
    server.register("single", FromGymnasiumEnv(make()))
    url = server.listen("127.0.0.1", 0)
    envs = RemoteVectorEnv([(url, "batch"), (url, "single")])
    local = SyncVectorEnv([make] * 4)
    try:
        envs.reset(seed=3)
        local.reset(seed=3)
        local.action_space.seed(3)
        calls: List[int] = []
        add_info = RemoteVectorEnv._add_info
        monkeypatch.setattr(RemoteVectorEnv, "_add_info", lambda self, *a: calls.append(1) or add_info(self, *a))
        for _ in range(20):
            actions = local.action_space.sample()
            got, want = envs.step(actions), local.step(actions)
            assert list(got[4]) == ["x_position", "_x_position", "x_velocity", "_x_velocity",
                                    "reward_forward", "_reward_forward", "reward_ctrl", "_reward_ctrl"]
            same(want[4], got[4])
            assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
        assert not calls  # gathered whole, every step
    finally:
        envs.close()
        local.close()
        server.close()


# -- the extension's gather (python/src/client/vector_infos.rs) against SyncVectorEnv --

INFO_CASES = {
    "floats": lambda i, t: {"a": 0.5 * i + t, "b": -1.0 * t},
    "ints": lambda i, t: {"n": i * 10 + t},
    "bools": lambda i, t: {"flag": (i + t) % 2 == 0},
    "float32 scalars": lambda i, t: {"c": np.float32(i + 0.25 * t)},
    "arrays": lambda i, t: {"v": np.arange(3, dtype=np.float32) * (i + t), "m": np.eye(2) * t},
    "partial": lambda i, t: {} if (i + t) % 3 == 0 else {"a": float(i), "n": t},
    "mixed types": lambda i, t: {"a": i if i % 2 else float(i)},
    "nested": lambda i, t: {"d": {"x": float(i), "y": t}, "z": 1.0},
    "underscore key": lambda i, t: {"x": 1.0 * t, "_y": 2.0},
    "keys differ": lambda i, t: {"a": 1.0 * t} if i % 2 else {"b": 2.0},
}
#: Cases whose every reporting step the extension gathers itself.
GATHERED = {"floats", "ints", "bools", "float32 scalars", "arrays", "partial"}


def info_env(case: str, index: int) -> Any:
    gymnasium = pytest.importorskip("gymnasium")

    class InfoEnv(gymnasium.Env):  # type: ignore[misc]
        observation_space = gymnasium.spaces.Box(-1e6, 1e6, (1,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

        def __init__(self) -> None:
            self.t = 0

        def reset(self, *, seed: Optional[int] = None, options: Any = None) -> Any:
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(1, np.float32), {}

        def step(self, action: Any) -> Any:
            self.t += 1
            return (np.full(1, self.t, np.float32), float(index), False, False,
                    INFO_CASES[case](index, self.t))

    return InfoEnv()


@pytest.fixture(scope="module")
def info_url() -> Any:
    pytest.importorskip("gymnasium")
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    import unienv_remote
    from unienv_remote import BatchedEnv

    server = unienv_remote.RemoteServer(idle_timeout=None)
    # Resources of their own for the recv part ("r"): a closed vector env's
    # control is released when the server sees its sessions end, which a
    # new session may beat.
    for case in INFO_CASES:
        for part in ("", "r"):
            for i in range(3):
                server.register(f"{case}/{part}{i}", FromGymnasiumEnv(info_env(case, i)))
            server.register(f"{case}/{part}batch", BatchedEnv([lambda c=case, k=k: info_env(c, k) for k in (3, 4)]))
    yield server.listen("127.0.0.1", 0)
    server.close()


@pytest.mark.parametrize("case", sorted(INFO_CASES))
def test_extension_gather_equals_sync_vector_env(info_url: str, case: str) -> None:
    """Three single and a batched resource of 2 whose infos are ``case``:
    every step's infos equal ``SyncVectorEnv``'s over the same envs
    (dtypes, shapes, bytes, key order), through ``step``, ``step_wait``
    and ``recv`` (by position, in arrival order), and the extension gathers
    them itself exactly in the cases it should."""
    from gymnasium.vector import SyncVectorEnv

    from unienv_remote import RemoteVectorEnv

    addresses = [(info_url, f"{case}/{i}") for i in range(3)] + [(info_url, f"{case}/batch")]
    envs = RemoteVectorEnv(addresses)
    local = SyncVectorEnv([lambda k=k: info_env(case, k) for k in range(5)])
    try:
        envs.reset(seed=0)
        local.reset(seed=0)
        kinds = set()
        for t in range(6):
            actions = np.zeros((5, 1), np.float32)
            if t % 2:
                envs._native.step_async(actions)
                native = envs._native.step_wait()
                kinds.add(type(native.infos).__name__ if native.infos else "none")
                got = envs._results(native, envs)
            else:
                got = envs.step(actions)
            want = local.step(actions)
            same(want[4], got[4])
        assert ("dict" in kinds) == (case in GATHERED), kinds
    finally:
        envs.close()
        local.close()

    # recv: the infos by position, in arrival order: Gymnasium's _add_info
    # over the envs' own infos in that order (a column's dtype follows the
    # first env that reports, here the first to arrive).
    envs = RemoteVectorEnv([(info_url, f"{case}/r{i}") for i in range(3)] + [(info_url, f"{case}/rbatch")],
                           batch_size=5)
    try:
        envs.reset(seed=0)
        envs.send(np.zeros((5, 1), np.float32))
        for t in range(1, 5):
            obs, _, _, _, infos = envs.recv()
            ids = infos.pop("env_id")
            assert sorted(ids.tolist()) == list(range(5))
            same(by_add_info(5, [INFO_CASES[case](int(i), t) for i in ids]), infos)
            envs.send(np.zeros((5, 1), np.float32), ids)
        while envs._native.step_pending():
            envs.recv()
    finally:
        envs.close()


# -- a batched resource's info read whole (StepInfos' blocks) --------------------

def raw(t: int) -> Dict[str, Dict[str, Any]]:
    """Vector infos of a batch of 2 as a batched env may return them, by
    case, at step ``t``."""
    yes, half = np.array([True, True]), np.array([True, False])
    return {
        # Entries where the mask is off are not zeros: they are left out.
        "garbage where unreported": {"a": np.array([1.5 * t, 99.0]), "_a": half,
                                     "n": np.array([t, -7]), "_n": half},
        "2-d and float32 columns": {"c": np.arange(6, dtype=np.float32).reshape(2, 3) * t, "_c": yes,
                                    "f": np.array([0.5, t], np.float32), "_f": yes,
                                    "ok": np.array([True, t % 2 == 0]), "_ok": yes},
        "nobody reports": {"a": np.zeros(2), "_a": np.array([False, False])},
        # Bool bytes other than 0 and 1 (a view of uint8) are true, written as 1.
        "bool bytes above 1": {"ok": np.array([2, 0], np.uint8).view(np.bool_), "_ok": yes},
        # The general way (split into one dict per sub-env):
        "int mask": {"a": np.array([1.5, 2.5 * t]), "_a": np.array([1, 0])},
        "masks differ": {"a": np.array([1.0, 2.0 * t]), "_a": yes, "b": np.array([3, 4]), "_b": half},
        "big-endian column": {"a": np.array([1.5, 2.5 * t], ">f8"), "_a": yes},
        "no mask": {"a": np.array([1.0, 2.0 * t])},
        "list column": {"a": [1.0, 2.0 * t], "_a": yes},
    }


#: Cases the extension gathers itself.
RAW_WHOLE = {"garbage where unreported", "2-d and float32 columns", "bool bytes above 1"}


def split(info: Dict[str, Any], b: int) -> List[Dict[str, Any]]:
    """A batched info as one dict per sub-env, as the Rust client splits it
    (for the cases above): masked rows, ``float64``/``int64``/``bool`` rows
    as scalars, other rows as arrays; a key without a mask of ``b`` entries
    given whole to every sub-env."""
    out: List[Dict[str, Any]] = [{} for _ in range(b)]
    for key, value in info.items():
        if key.startswith("_") and key[1:] in info:
            continue
        mask = info.get(f"_{key}")
        if mask is None or not isinstance(value, (np.ndarray, list)) or len(value) != b:
            for d in out:
                d[key] = value
            continue
        for j in range(b):
            if mask[j]:
                row = np.asarray(value[j])
                native = row.dtype.newbyteorder("=")
                if row.ndim == 0 and native in (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_)):
                    out[j][key] = row.item()
                else:
                    out[j][key] = row
    return out


def raw_single(case: str) -> Any:
    """A single env whose info at step ``t`` is sub-env 0's of ``raw(t)[case]``."""
    env = info_env("floats", 0)

    def step(action: Any) -> Any:
        obs, reward, terminated, truncated, _ = type(env).step(env, action)
        return obs, reward, terminated, truncated, split(raw(env.t)[case], 2)[0]

    env.step = step
    return env


@pytest.fixture(scope="module")
def raw_url() -> Any:
    pytest.importorskip("gymnasium")
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    import unienv_remote
    from unienv_remote import BatchedEnv

    class RawInfoBatch(BatchedEnv):
        """A batch of 2 whose step returns ``raw(t)[case]`` as its info (``t``
        counted from its last reset)."""

        def __init__(self, case: str) -> None:
            super().__init__([lambda k=k: info_env("floats", k) for k in (0, 1)])
            self.case, self.t = case, 0

        def reset(self, *args: Any, **kwargs: Any) -> Any:
            self.t = 0
            return super().reset(*args, **kwargs)

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, _ = super().step(action)
            self.t += 1
            return obs, reward, terminated, truncated, raw(self.t)[self.case]

    server = unienv_remote.RemoteServer(idle_timeout=None)
    for case in raw(0):
        for i in range(2):
            server.register(f"{case}/b{i}", RawInfoBatch(case))
        server.register(f"{case}/single", FromGymnasiumEnv(raw_single(case)))
    yield server.listen("127.0.0.1", 0)
    server.close()


@pytest.mark.parametrize("case", sorted(raw(0)))
def test_batched_infos_read_whole_equal_split_ones(raw_url: str, case: str) -> None:
    """Two batched resources whose infos are ``case``: each step's infos are
    those of their sub-envs' own dicts (split by their masks) gathered with
    Gymnasium's ``_add_info``, and the extension reads them column by column
    exactly in the cases it should."""
    from unienv_remote import RemoteVectorEnv

    envs = RemoteVectorEnv([(raw_url, f"{case}/b{i}") for i in range(2)])
    try:
        envs.reset(seed=0)
        kinds = set()
        for t in range(1, 4):
            envs._native.step_async(np.zeros((4, 1), np.float32))
            native = envs._native.step_wait()
            kinds.add(type(native.infos).__name__)
            got = envs._results(native, envs)[4]
            same(by_add_info(4, split(raw(t)[case], 2) * 2), got)
        assert kinds == ({"dict"} if case in RAW_WHOLE else {"list"}), kinds
    finally:
        envs.close()


@pytest.mark.parametrize("single_first", [False, True])
@pytest.mark.parametrize("case", sorted(RAW_WHOLE))
def test_batched_and_single_infos_gather_together(raw_url: str, case: str, single_first: bool) -> None:
    """A single env (in the middle, or first: the key order is then its
    dict's) and two batched resources that report the same keys: one column
    over all of them, the single env's values beside the batches' rows,
    gathered by the extension."""
    from unienv_remote import RemoteVectorEnv

    if single_first:
        names = [f"{case}/single", f"{case}/b0", f"{case}/b1"]
    else:
        names = [f"{case}/b0", f"{case}/single", f"{case}/b1"]
    envs = RemoteVectorEnv([(raw_url, name) for name in names])
    try:
        envs.reset(seed=0)
        for t in range(1, 4):
            envs._native.step_async(np.zeros((5, 1), np.float32))
            native = envs._native.step_wait()
            rows = split(raw(t)[case], 2)
            want = rows[:1] + rows + rows if single_first else rows + rows[:1] + rows
            same(by_add_info(5, want), envs._results(native, envs)[4])
            assert isinstance(native.infos, dict)
    finally:
        envs.close()


def reset_info_env(index: int) -> Any:
    gymnasium = pytest.importorskip("gymnasium")

    class ResetInfoEnv(gymnasium.Env):  # type: ignore[misc]
        observation_space = gymnasium.spaces.Box(-1e6, 1e6, (1,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

        def reset(self, *, seed: Optional[int] = None, options: Any = None) -> Any:
            super().reset(seed=seed)
            return np.zeros(1, np.float32), {"start": 0.5 * index, "k": index, "v": np.full(2, index, np.float32)}

        def step(self, action: Any) -> Any:
            return np.zeros(1, np.float32), 0.0, False, False, {}

    return ResetInfoEnv()


def test_reset_infos_are_gathered_by_the_extension() -> None:
    """A reset's regular infos come gathered from the extension (a dict,
    the envs not reset left out) and equal ``SyncVectorEnv``'s, for a full
    reset and a masked one (``options={"reset_mask": ...}``)."""
    pytest.importorskip("gymnasium")
    from gymnasium.vector import SyncVectorEnv
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    import unienv_remote
    from unienv_remote import BatchedEnv, RemoteVectorEnv

    server = unienv_remote.RemoteServer(idle_timeout=None)
    for i in range(3):
        server.register(f"r{i}", FromGymnasiumEnv(reset_info_env(i)))
    server.register("rbatch", BatchedEnv([lambda k=k: reset_info_env(k) for k in (3, 4)]))
    url = server.listen("127.0.0.1", 0)
    envs = RemoteVectorEnv([(url, f"r{i}") for i in range(3)] + [(url, "rbatch")])
    local = SyncVectorEnv([lambda k=k: reset_info_env(k) for k in range(5)])
    try:
        _, infos, _, used = envs._native.reset([0] * 5)
        assert isinstance(infos, dict) and list(used) == [True] * 5
        same(local.reset(seed=0)[1], envs.reset(seed=0)[1])
        mask = np.array([False, True, False, True, True])
        _, infos, _, _ = envs._native.reset([None] * 5, None, [bool(m) for m in mask])
        assert isinstance(infos, dict) and list(infos["_k"]) == list(mask)
        same(local.reset(options={"reset_mask": mask})[1], envs.reset(options={"reset_mask": mask})[1])
    finally:
        envs.close()
        local.close()
        server.close()


def test_two_recvs_with_gathered_infos_concatenate_row_by_row() -> None:
    """A restart during ``recv`` merges two native results
    (``restart.concat_results``): infos the extension gathered are split
    back into rows first, so the merged infos gather as Gymnasium's
    ``_add_info`` of every row."""
    from unienv_remote import _native
    from unienv_remote.restart import concat_results

    rows = [{"x": 0.5, "n": 3, "ok": True, "v": np.arange(2.0)}, {},
            {"x": 1.5, "n": 4, "ok": False, "v": np.ones(2)}]
    gathered = {"x": np.array([0.5, 0.0, 1.5]), "_x": np.array([True, False, True]),
                "n": np.array([3, 0, 4]), "_n": np.array([True, False, True]),
                "ok": np.array([True, False, False]), "_ok": np.array([True, False, True]),
                "v": np.stack([np.arange(2.0), np.zeros(2), np.ones(2)]), "_v": np.array([True, False, True])}
    same(by_add_info(3, rows), gathered)
    later = [{"x": 2.5, "n": 5, "ok": True, "v": np.full(2, 7.0)}]

    def step(infos: Any, ids: List[int]) -> Any:
        k = len(ids)
        return _native.VectorStep(np.zeros((k, 1)), np.zeros(k), np.zeros(k, np.bool_), np.zeros(k, np.bool_),
                                  infos, np.zeros(k, np.bool_), [], [], np.array(ids, np.int64))

    merged = concat_results(step(gathered, [0, 1, 2]), step(later, [3]))
    assert list(merged.env_id) == [0, 1, 2, 3]
    same(by_add_info(4, rows + later), _gather_infos(_InfoBuilder(4), merged.infos))
