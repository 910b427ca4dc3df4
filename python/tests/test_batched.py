"""``unienv_remote.BatchedEnv``: N sub-envs as one batched UniEnv env.

Its transitions equal N independent, identically seeded envs' bit for bit
(Gymnasium sub-envs stepped directly, UniEnv sub-envs, sequential and
threaded stepping); a sub-env that raises faults the whole batch; and it is a
plain UniEnv env: hosted by our ``RemoteServer`` and by the reference's,
driven by our client and by the reference's, it gives the local results.
"""

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.remote import RemoteClient as RefClient  # noqa: E402
from unienv_interface.remote import RemoteServer as RefServer  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
from unienv_remote import BatchedEnv  # noqa: E402


def add_info(infos: Dict[str, Any], info: Dict[str, Any], index: int, n: int) -> Dict[str, Any]:
    """The test's model of the layout, Gymnasium's ``_add_info`` for ``n``
    envs (key ``k`` -> one entry per env, ``_k`` -> bool mask; dicts nest),
    values that are neither numbers nor arrays in a list (Gymnasium: an
    object array, which the wire cannot carry)."""
    for key, value in info.items():
        if isinstance(value, dict):
            array: Any = add_info(infos.get(key, {}), value, index, n)
        else:
            array = infos.get(key)
            if array is None:
                if type(value) in (int, float, bool) or isinstance(value, np.number):
                    array = np.zeros(n, dtype=type(value))
                elif isinstance(value, np.ndarray):
                    array = np.zeros((n, *value.shape), dtype=value.dtype)
                else:
                    array = [None] * n
            array[index] = value
        mask = infos.get(f"_{key}")
        if mask is None:
            mask = np.zeros(n, dtype=np.bool_)
        mask[index] = True
        infos[key] = array
        infos[f"_{key}"] = mask
    return infos


def same(a: Any, b: Any, path: str = "$") -> None:
    """Equal bit for bit: same types, dtypes, shapes and bytes."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, f"{path}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        assert a.tobytes() == b.tobytes(), f"{path}: {a} vs {b}"
    elif isinstance(a, dict):
        assert set(a) == set(b), f"{path}: {sorted(a)} vs {sorted(b)}"
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


class Independent:
    """N separate envs driven the way a BatchedEnv's client drives the batch,
    stacking their results: the expected transitions."""

    def __init__(self, envs: List[Any], gym: bool) -> None:
        self.envs, self.gym, self.n = envs, gym, len(envs)

    def reset(self, seeds: List[Optional[int]], mask: np.ndarray) -> Tuple[Any, Dict[str, Any]]:
        rows, infos = [], {}
        for i in np.flatnonzero(mask):
            if self.gym:
                obs, info = self.envs[i].reset(seed=seeds[i])
            else:
                _, obs, info = self.envs[i].reset(seed=seeds[i])
            rows.append(obs)
            if info:
                infos = add_info(infos, info, int(i), self.n)
        return np.stack(rows), infos

    def step(self, action: np.ndarray) -> Tuple[Any, ...]:
        out = [e.step(action[i]) for i, e in enumerate(self.envs)]
        infos: Dict[str, Any] = {}
        for i, r in enumerate(out):
            if r[4]:
                infos = add_info(infos, r[4], i, self.n)
        return (np.stack([r[0] for r in out]), np.asarray([r[1] for r in out], dtype=np.float64),
                np.asarray([r[2] for r in out]), np.asarray([r[3] for r in out]), infos)


def drive(batched: Any, expected: Independent, steps: int, seed: int) -> int:
    """Steps both with the same seeds and actions, resetting (by mask,
    unseeded) the sub-envs whose episode ended; returns how many ended."""
    n = expected.n
    _, obs, info = batched.reset(seed=seed)
    want_obs, want_info = expected.reset([seed + i for i in range(n)], np.ones(n, dtype=np.bool_))
    same(obs, want_obs)
    same(info, want_info)
    rng = np.random.default_rng(seed)
    space = batched.action_space
    ends = 0
    for _ in range(steps):
        if np.issubdtype(space.dtype, np.integer):
            action = rng.integers(0, 2, size=space.shape).astype(space.dtype)
        else:
            action = rng.uniform(-1, 1, size=space.shape).astype(space.dtype)
        got = batched.step(action)
        want = expected.step(action)
        for k in range(5):
            same(got[k], want[k], f"step[{k}]")
        done = np.asarray(got[2]) | np.asarray(got[3])
        if done.any():
            ends += int(done.sum())
            _, obs, info = batched.reset(mask=done)
            want_obs, want_info = expected.reset([None] * n, done)
            same(obs, want_obs)
            same(info, want_info)
    return ends


@pytest.mark.parametrize("threads", [1, 3])
def test_gymnasium_sub_envs_equal_independent_envs(threads: int) -> None:
    n = 4
    batched = BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * n, threads=threads)
    expected = Independent([FromGymnasiumEnv(gymnasium.make("Pendulum-v1")) for _ in range(n)], gym=False)
    try:
        assert batched.batch_size == n
        assert batched.observation_space.shape == (n, 3) and batched.action_space.shape == (n, 1)
        assert drive(batched, expected, 205, seed=3) == n  # every sub-env truncated at step 200
    finally:
        batched.close()


def test_unienv_sub_envs_with_infos_equal_independent_envs() -> None:
    n = 3
    make: Callable[[], Any] = lambda: FromGymnasiumEnv(gymnasium.make("HalfCheetah-v5"))  # noqa: E731
    batched = BatchedEnv([make] * n, threads=2)
    expected = Independent([make() for _ in range(n)], gym=False)
    try:
        drive(batched, expected, 30, seed=11)
        _, _, _, _, info = batched.step(np.zeros(batched.action_space.shape, np.float64))
        # Gymnasium's vector info layout: one float64 per sub-env and its mask.
        assert info["x_position"].shape == (n,) and info["_x_position"].all()
    finally:
        batched.close()


def test_episode_ends_reset_by_mask_and_seeds_per_env() -> None:
    n = 5
    batched = BatchedEnv([lambda: gymnasium.make("CartPole-v1")] * n)
    expected = Independent([gymnasium.make("CartPole-v1") for _ in range(n)], gym=True)
    try:
        assert drive(batched, expected, 80, seed=5) > 0
        # A sequence of seeds: one per sub-env, only the masked ones used.
        mask = np.array([False, True, False, True, False])
        _, obs, _ = batched.reset(mask=mask, seed=[None, 7, None, 9, None])
        want, _ = expected.reset([None, 7, None, 9, None], mask)
        same(obs, want)
        with pytest.raises(ValueError):
            batched.reset(mask=np.ones(n + 1, dtype=np.bool_))
    finally:
        batched.close()


class Exploding(gymnasium.Wrapper):
    """Raises on its ``at``-th step (counted over its life)."""

    def __init__(self, env: gymnasium.Env, at: int) -> None:
        super().__init__(env)
        self.at, self.count = at, 0

    def step(self, action: Any) -> Any:
        self.count += 1
        if self.count == self.at:
            raise ValueError("the simulator broke")
        return self.env.step(action)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_raising_sub_env_faults_the_whole_batch(threads: int) -> None:
    factories = [lambda: gymnasium.make("Pendulum-v1")] * 3 + [lambda: Exploding(gymnasium.make("Pendulum-v1"), 2)]
    batched = BatchedEnv(factories, threads=threads)
    try:
        batched.reset(seed=0)
        action = np.zeros(batched.action_space.shape, np.float32)
        batched.step(action)
        with pytest.raises(RuntimeError, match="sub-env 3 raised ValueError: the simulator broke") as raised:
            batched.step(action)
        assert isinstance(raised.value.__cause__, ValueError)
        # Faulted: nothing steps until every sub-env was reset.
        with pytest.raises(RuntimeError, match=r"reset sub-envs \[0, 1, 2, 3\]"):
            batched.step(action)
        batched.reset(mask=np.array([True, True, False, False]))
        with pytest.raises(RuntimeError, match=r"reset sub-envs \[2, 3\]"):
            batched.step(action)
        batched.reset(mask=np.array([False, False, True, True]))
        batched.step(action)
    finally:
        batched.close()


def test_mismatched_sub_envs_are_refused() -> None:
    with pytest.raises(ValueError, match="sub-env 1's action_space differs"):
        BatchedEnv([lambda: gymnasium.make("Pendulum-v1"), lambda: gymnasium.make("CartPole-v1")])


@pytest.mark.parametrize("server_kind,client_kind", [("ours", "ours"), ("ours", "reference"),
                                                     ("reference", "reference"), ("reference", "ours")])
def test_hosted_and_driven_remotely(server_kind: str, client_kind: str) -> None:
    n = 4
    server: Any = unienv_remote.RemoteServer(idle_timeout=None) if server_kind == "ours" else RefServer()
    server.register("pendulums", BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * n))
    expected = BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * n)
    try:
        url = server.listen("127.0.0.1", 0)
        client: Any = (unienv_remote.RemoteClient if client_kind == "ours" else RefClient).connect(url)
        try:
            remote = client.env("pendulums")
            assert remote.batch_size == n
            assert str(remote.action_space) == str(expected.action_space)
            assert str(remote.observation_space) == str(expected.observation_space)
            same(remote.reset(seed=2)[1], expected.reset(seed=2)[1])
            rng = np.random.default_rng(2)
            for _ in range(20):
                action = rng.uniform(-2, 2, size=(n, 1)).astype(np.float32)
                got, want = remote.step(action), expected.step(action)
                for k in range(4):
                    same(got[k], want[k], f"step[{k}]")
            mask = np.array([True, False, False, True])
            got_reset, want_reset = remote.reset(mask=mask, seed=40), expected.reset(mask=mask, seed=40)
            same(got_reset[1], want_reset[1])
        finally:
            client.close()
    finally:
        server.close()
        expected.close()


def test_a_raising_sub_env_faults_the_hosted_resource() -> None:
    """Hosted by our server, the failing step is an uncertain execution
    error that faults the resource: a step is refused until a reset."""
    from unienv_remote import RemoteError
    factories = [lambda: gymnasium.make("Pendulum-v1"), lambda: Exploding(gymnasium.make("Pendulum-v1"), 1)]
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("pendulums", BatchedEnv(factories))
    try:
        client = server.connect()
        remote = client.env("pendulums")
        remote.reset(seed=0)
        action = np.zeros((2, 1), np.float32)
        with pytest.raises(RemoteError) as raised:
            remote.step(action)
        assert raised.value.uncertain
        with pytest.raises(RemoteError, match="fault"):
            remote.step(action)
        remote.reset(seed=1)
        remote.step(action)
        client.close()
    finally:
        server.close()


def test_discrete_bounds_are_published_and_checked_alike_single_and_batched() -> None:
    """A BatchedEnv of Discrete sub-envs publishes and checks the high bound
    actions reach, as a single FromGymnasiumEnv does on our host: [0, n-1]
    (SPEC.md, action checking on the Python host)."""
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("single", FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
    server.register("batched", BatchedEnv([lambda: gymnasium.make("CartPole-v1")] * 3))
    server.register("wrapped", BatchedEnv([lambda: FromGymnasiumEnv(gymnasium.make("CartPole-v1"))] * 2))
    try:
        client = server.connect()
        single, batched, wrapped = client.env("single"), client.env("batched"), client.env("wrapped")
        assert int(single.action_space.high) == 1 and single.action_space.shape == ()
        assert batched.action_space.shape == (3,) and np.asarray(batched.action_space.high).tolist() == [1, 1, 1]
        assert np.asarray(wrapped.action_space.high).tolist() == [1, 1]
        assert np.asarray(batched.action_space.low).tolist() == [0, 0, 0]
        for remote, action in ((single, np.int64(2)), (batched, np.array([0, 2, 1])), (wrapped, np.array([2, 0]))):
            remote.reset(seed=0)
            with pytest.raises(unienv_remote.RemoteError) as refused:
                remote.step(action)
            # Refused before the sub-env saw it: certain, nothing faulted.
            assert refused.value.code == "invalid_request" and not refused.value.uncertain
            assert "above the high bound 1" in str(refused.value)
            remote.step(np.zeros(remote.action_space.shape, np.int64))
        client.close()
    finally:
        server.close()


def test_batch_infos_is_the_layout_of_the_model() -> None:
    """``_native.batch_infos`` (the crate's one implementation of the layout,
    the Rust host's ``BatchedEnv``'s too) equals the model for the infos
    sub-envs report: floats, ints, bools, NumPy scalars and arrays, strings,
    nested dicts, envs without a key; values of mixed kinds, which the model
    would coerce to the first one's dtype, become a list."""
    from unienv_remote import _native

    infos = [
        {"x": 0.5, "n": 3, "ok": True, "f32": np.float32(1.5), "v": np.arange(3.0), "name": "a", "d": {"y": 1.0}},
        {"x": 1.5, "ok": False, "f32": np.float32(2.5), "v": np.ones(3), "name": "b", "d": {"y": 2.0}},
        {"x": -2.0, "n": 7, "ok": True, "f32": np.float32(0.0), "v": np.zeros(3), "d": {"y": 3.0, "z": 4}},
    ]
    indices = [0, 2, 3]
    want: Dict[str, Any] = {}
    for i, info in zip(indices, infos):
        want = add_info(want, info, i, 5)
    got = _native.batch_infos(5, indices, infos)
    assert list(got) == list(want)
    same(got, want)
    mixed = _native.batch_infos(2, [0, 1], [{"a": 1}, {"a": 2.5}])
    assert mixed["a"] == [1, 2.5] and mixed["_a"].tolist() == [True, True]
