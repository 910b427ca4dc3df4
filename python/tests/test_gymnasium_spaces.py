"""Every Gymnasium space through our paths (``unienv_remote/_gym_spaces.py``):
values converted both ways and batched as Gymnasium batches them; a
Gymnasium env of any such space hosted by ``RemoteServer`` through
``unienv_remote.from_gymnasium`` and driven by ``RemoteGymnasiumEnv``;
a ``BatchedEnv`` of them behind a ``RemoteVectorEnv``; and ``ProcessVectorEnv``
giving what ``SyncVectorEnv`` gives for the same envs and seeds (toy text,
classic control, MuJoCo), with Gymnasium's vector API (``call``,
``get_attr``, ``set_attr``, ``render``, ``np_random_seed``) and errors."""

import copy
from typing import Any, Callable, List, Optional

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium import spaces  # noqa: E402
from gymnasium.utils.env_checker import data_equivalence  # noqa: E402
from gymnasium.vector import SyncVectorEnv  # noqa: E402
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array  # noqa: E402
from unienv_interface.space.space_utils import batch_utils as sbu  # noqa: E402

import unienv_remote  # noqa: E402
import unienv_remote.gymnasium as remote_gymnasium  # noqa: E402
from unienv_remote import ProcessVectorEnv, RemoteServer, RemoteVectorEnv  # noqa: E402
from unienv_remote import from_gymnasium  # noqa: E402
from unienv_remote._gym_spaces import (  # noqa: E402
    batch_from_gymnasium, batch_to_gymnasium, to_gymnasium, to_unienv, unienv_space)

SPACES = {
    "box_f64_scalar": spaces.Box(low=-1.0, high=1.0, shape=(), dtype=np.float64),
    "box_f32": spaces.Box(low=-1.0, high=1.0, shape=(3,), dtype=np.float32),
    "box_u8_image": spaces.Box(low=0, high=255, shape=(4, 4, 3), dtype=np.uint8),
    "box_i16": spaces.Box(low=-5, high=5, shape=(2,), dtype=np.int16),
    "box_bool": spaces.Box(low=0, high=1, shape=(3,), dtype=np.bool_),
    "discrete": spaces.Discrete(5),
    "discrete_start": spaces.Discrete(5, start=-2),
    "discrete_int32": spaces.Discrete(4, dtype=np.int32, start=1),
    "box_int32_unbounded": spaces.Box(low=np.array([-np.inf, -np.inf, 0, -10]), high=np.array([np.inf, 0, np.inf, 10]),
                                      dtype=np.int32),
    "multi_discrete_2d_start": spaces.MultiDiscrete([[2, 3], [3, 2]], start=[[10, 20], [30, 40]]),
    "multi_discrete_int8": spaces.MultiDiscrete([2, 3], dtype=np.int8),
    "multi_discrete_uint16": spaces.MultiDiscrete([2, 3], dtype=np.uint16),
    "multi_binary_2d": spaces.MultiBinary([2, 3]),
    "multi_discrete": spaces.MultiDiscrete([3, 4, 5]),
    "multi_binary": spaces.MultiBinary(6),
    "tuple": spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, (2,), np.float64))),
    "dict_nested": spaces.Dict({
        "position": spaces.Dict({"x": spaces.Discrete(29), "y": spaces.Discrete(31)}),
        "velocity": spaces.Tuple((spaces.Discrete(37), spaces.Box(0, 255, (), np.uint8))),
        "flags": spaces.MultiBinary(2),
    }),
    "text": spaces.Text(6, min_length=1, charset="abcXYZ"),
    "one_of": spaces.OneOf((spaces.Discrete(3), spaces.Box(0.0, 1.0, (2,), np.float32),
                            spaces.Tuple((spaces.Text(3), spaces.MultiBinary(2))))),
}
IDS = list(SPACES)


class Opaque(spaces.Space):  # type: ignore[type-arg]
    """A custom Gymnasium space (Gymnasium's vector envs batch it as a tuple)."""

    def __init__(self) -> None:
        super().__init__(seed=None)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        return {"word": "w" * int(self.np_random.integers(1, 5)), "n": int(self.np_random.integers(9))}

    def contains(self, x: Any) -> bool:
        return isinstance(x, dict) and set(x) == {"word", "n"}

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Opaque)


#: Spaces no UniEnv space describes: carried pickled between a
#: ``ProcessVectorEnv`` and its server processes.
PICKLED = {
    "graph_box_discrete": spaces.Graph(spaces.Box(-1.0, 1.0, (2, 3)), spaces.Discrete(4)),
    "graph_no_edges": spaces.Graph(spaces.MultiBinary(3), None),
    "graph_dict_nodes": spaces.Graph(spaces.Dict({"kind": spaces.Discrete(5), "pos": spaces.Box(-1.0, 1.0, (2,))}),
                                     spaces.Tuple((spaces.Discrete(2), spaces.Box(0.0, 1.0, ())))),
    "sequence": spaces.Sequence(spaces.Discrete(4)),
    "sequence_stacked": spaces.Sequence(spaces.Box(0.0, 1.0, (2,), np.float32), stack=True),
    "sequence_of_graphs": spaces.Sequence(spaces.Graph(spaces.Box(0.0, 1.0, (1,)), None)),
    "tuple_with_graph": spaces.Tuple((spaces.Graph(spaces.Box(-1.0, 1.0, (1,)), None), spaces.Discrete(2))),
    "dict_with_sequence": spaces.Dict({"seq": spaces.Sequence(spaces.Box(0.0, 1.0, (1,)), stack=True),
                                       "text": spaces.Text(4), "box": spaces.Box(-1.0, 1.0, (2,))}),
    "one_of_graph": spaces.OneOf((spaces.Discrete(3), spaces.Graph(spaces.Discrete(2), spaces.Discrete(2)))),
    "custom": Opaque(),
}
PICKLED_IDS = list(PICKLED)


def scalars(value: Any) -> Any:
    """``value`` with 0-d arrays as NumPy scalars (Gymnasium's ``Box.sample``
    gives either; its vector envs hand sub-envs scalars)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    if isinstance(value, dict):
        return {k: scalars(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(scalars(v) for v in value)
    return value


@pytest.mark.parametrize("name", IDS)
def test_values_convert_both_ways_with_gymnasium_types(name: str) -> None:
    """A sample becomes a member of the UniEnv space and comes back equal,
    of the type Gymnasium gives (``np.int64`` for ``Discrete``)."""
    space = SPACES[name]
    space.seed(0)
    uspace = unienv_space(space)
    for _ in range(5):
        value = space.sample()
        carried = to_unienv(space, value)
        assert uspace.contains(carried), (name, carried)
        back = to_gymnasium(space, carried)
        assert data_equivalence(back, scalars(value)), (name, back, value)
        assert space.contains(back)


@pytest.mark.parametrize("name", IDS)
def test_batches_are_gymnasiums(name: str) -> None:
    """What unienv's ``concatenate`` stacks of carried values, converted, is
    Gymnasium's ``concatenate`` of the values (a member of its
    ``batch_space``); and a Gymnasium batch is carried as unienv stacks it."""
    space = SPACES[name]
    space.seed(1)
    values = [space.sample() for _ in range(3)]
    stacked = sbu.concatenate(unienv_space(space), [to_unienv(space, v) for v in values])
    ours = batch_to_gymnasium(space, stacked)
    theirs = concatenate(space, values, create_empty_array(space, 3))
    assert data_equivalence(ours, theirs), (name, ours, theirs)
    assert batch_space(space, 3).contains(ours)
    assert data_equivalence(batch_to_gymnasium(space, batch_from_gymnasium(space, theirs)), theirs)


@pytest.mark.parametrize("name", PICKLED_IDS)
def test_spaces_without_a_carried_form_are_refused_unless_pickled(name: str) -> None:
    """Outside a ``ProcessVectorEnv``'s own servers, a space no UniEnv
    space describes is a ``TypeError`` naming it (the whole space is
    checked, a nested one too); with ``pickled=True`` its values go as
    ``CARRIER`` values and come back equal, alone and batched as
    Gymnasium's ``concatenate`` batches them (a tuple of the values)."""
    space = PICKLED[name]
    inner = {"tuple_with_graph": "Graph", "dict_with_sequence": "Sequence", "one_of_graph": "Graph"}
    with pytest.raises(TypeError, match=inner.get(name, type(space).__name__)):
        unienv_space(space)
    with pytest.raises(TypeError):
        from_gymnasium(SpaceEnv(space, spaces.Discrete(2)))
    space.seed(3)
    values = [space.sample() for _ in range(3)]
    uspace = unienv_space(space, pickled=True)
    carried = [to_unienv(space, v, pickled=True) for v in values]
    for value, c in zip(values, carried):
        assert data_equivalence(to_gymnasium(space, c, pickled=True), value)
    # unienv's concatenate pads the carried rows; the pickles ignore it.
    stacked = sbu.concatenate(uspace, carried)
    ours = batch_to_gymnasium(space, stacked, pickled=True)
    theirs = concatenate(space, values, create_empty_array(space, 3))
    assert data_equivalence(ours, theirs), (ours, theirs)
    assert batch_space(space, 3).contains(ours)
    back = batch_from_gymnasium(space, theirs, pickled=True)
    assert data_equivalence(batch_to_gymnasium(space, back, pickled=True), theirs)
    # Rows of different lengths gathered in a list (the client's stacking).
    if isinstance(stacked, np.ndarray):
        assert data_equivalence(batch_to_gymnasium(space, [np.asarray(c) for c in carried], pickled=True), theirs)


class SpaceEnv(gymnasium.Env):  # type: ignore[type-arg]
    """Observations drawn from ``observation_space`` (seeded), the action
    echoed in the info as Gymnasium gave it (its type checked by the test)."""

    def __init__(self, observation_space: Any, action_space: Any) -> None:
        self.observation_space = copy.deepcopy(observation_space)
        self.action_space = copy.deepcopy(action_space)
        self.seen: List[Any] = []

    def reset(self, *, seed: Optional[int] = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(1 << 30)))
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> Any:
        assert self.action_space.contains(action), action
        self.seen.append(action)
        return self.observation_space.sample(), 1.0, False, False, {"action_type": type(action).__name__}


def test_single_env_path_carries_every_space() -> None:
    """A Gymnasium env whose observation is a nested Dict of Discrete, Tuple
    and MultiBinary spaces and whose action is Discrete, hosted through
    ``unienv_remote.from_gymnasium`` and driven with ``RemoteGymnasiumEnv``:
    the observations are what the env gave (as Gymnasium types; a 0-d box's
    value as a 0-d array, the wire knowing no NumPy scalars), and the
    action reaches the env as a NumPy integer."""
    obs_space, act_space = SPACES["dict_nested"], spaces.Discrete(4)
    local = SpaceEnv(obs_space, act_space)
    hosted = SpaceEnv(obs_space, act_space)
    server = RemoteServer(idle_timeout=None)
    server.register("env", from_gymnasium(hosted))
    url = server.listen("127.0.0.1", 0)
    try:
        env = remote_gymnasium.make(url, "env")
        try:
            obs, _ = env.reset(seed=5)
            expected, _ = local.reset(seed=5)
            assert data_equivalence(scalars(obs), scalars(expected))
            assert isinstance(obs["position"]["x"], np.int64)
            for action in (0, 3, 2):
                obs, reward, _, _, info = env.step(np.int64(action))
                expected = local.step(np.int64(action))[0]
                assert data_equivalence(scalars(obs), scalars(expected))
                assert info["action_type"] == "int64"
            assert [type(a) for a in hosted.seen] == [np.int64] * 3
        finally:
            env.close()
    finally:
        server.close()


def test_from_gymnasium_keeps_unienvs_wrapper_for_box_envs() -> None:
    """Box spaces convert exactly in unienv: ``from_gymnasium`` gives its
    ``FromGymnasiumEnv`` (our host's fast path); other spaces get ours."""
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    assert type(from_gymnasium(gymnasium.make("Pendulum-v1"))) is FromGymnasiumEnv
    assert type(from_gymnasium(gymnasium.make("FrozenLake-v1"))) is not FromGymnasiumEnv
    with pytest.raises(TypeError, match="gymnasium.Env"):
        from_gymnasium(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("wrapped", [False, True], ids=["gymnasium", "from_gymnasium"])
def test_batched_env_of_discrete_envs_behind_a_remote_vector_env(wrapped: bool) -> None:
    """``BatchedEnv`` of FrozenLakes (Gymnasium envs, or ``from_gymnasium``'s)
    hosted and stepped through ``RemoteVectorEnv`` with the sub-envs'
    Gymnasium spaces: the same transitions as ``SyncVectorEnv``."""
    make: Callable[[], Any] = lambda: gymnasium.make("FrozenLake-v1")  # noqa: E731
    server = RemoteServer(idle_timeout=None)
    factory = (lambda: from_gymnasium(make())) if wrapped else make
    server.register("batch", unienv_remote.BatchedEnv([factory] * 3))
    url = server.listen("127.0.0.1", 0)
    try:
        envs = RemoteVectorEnv([(url, "batch")], single_observation_space=spaces.Discrete(16),
                               single_action_space=spaces.Discrete(4), autoreset_mode="SameStep")
        local = SyncVectorEnv([make] * 3, autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
        try:
            obs, _ = envs.reset(seed=11)
            assert data_equivalence(obs, local.reset(seed=11)[0])
            rng = np.random.default_rng(0)
            for _ in range(30):
                action = rng.integers(0, 4, size=3)
                ours, theirs = envs.step(action), local.step(action)
                assert data_equivalence(ours[:4], theirs[:4])
        finally:
            envs.close()
            local.close()
    finally:
        server.close()


#: Every toy-text and classic-control env Gymnasium registers, and every
#: MuJoCo env of the ``mujoco`` bindings (v4 and v5; v2 and v3 need
#: ``mujoco-py``, which does not install without system packages, and
#: ``Pusher-v4`` needs ``mujoco<3``).
TOY_AND_CLASSIC = sorted(name for name, spec in gymnasium.registry.items()
                         if any(kind in str(spec.entry_point) for kind in ("toy_text", "classic_control")))
MUJOCO = sorted(name for name, spec in gymnasium.registry.items()
                if "mujoco" in str(spec.entry_point) and name.endswith(("-v4", "-v5")) and name != "Pusher-v4")
EVERY_ENV = TOY_AND_CLASSIC + MUJOCO


def steps_of(env_id: str) -> int:
    """Random steps per env: enough for toy-text episodes to end and
    autoreset; a few for the MuJoCo envs (their dynamics are deterministic)."""
    return 6 if env_id in MUJOCO else 25


def same_transitions(envs: Any, local: Any, env_id: str) -> None:
    """Resets both from one seed and steps them with the same random
    actions: every observation, reward and signal equal, of the same types."""
    assert data_equivalence(envs.reset(seed=7)[0], local.reset(seed=7)[0])
    local.action_space.seed(3)
    for _ in range(steps_of(env_id)):
        action = local.action_space.sample()
        ours, theirs = envs.step(action), local.step(action)
        assert data_equivalence(ours[:4], theirs[:4]), (ours, theirs)


@pytest.mark.parametrize("env_id", [e for e in EVERY_ENV if not e.endswith("-v4")])
def test_process_vector_env_steps_as_sync_vector_env(env_id: str) -> None:
    """2 envs (3 for toy text and classic control), random steps from the
    same seeds and actions (episodes of FrozenLake, CliffWalking and
    Blackjack end and autoreset, some drawing from their generator in every
    step): the same spaces and transitions as ``SyncVectorEnv``. (MuJoCo's
    v4 envs, stepped the same way, go through the faster test below only.)"""
    if env_id in MUJOCO:
        pytest.importorskip("mujoco")
    n = 2 if env_id in MUJOCO else 3
    envs = ProcessVectorEnv([lambda: gymnasium.make(env_id)] * n, servers=1)
    local = SyncVectorEnv([lambda: gymnasium.make(env_id)] * n)
    try:
        assert envs.single_observation_space == local.single_observation_space
        assert envs.single_action_space == local.single_action_space
        same_transitions(envs, local, env_id)
    finally:
        envs.close()
        local.close()


@pytest.mark.parametrize("env_id", EVERY_ENV)
def test_remote_vector_env_steps_as_sync_vector_env(env_id: str) -> None:
    """The same through a ``RemoteVectorEnv`` (given the Gymnasium spaces)
    over a ``RemoteServer`` in this process: one ``BatchedEnv`` of 2 envs
    and one single env (``from_gymnasium``), stepped together."""
    if env_id in MUJOCO:
        pytest.importorskip("mujoco")
    make: Callable[[], Any] = lambda: gymnasium.make(env_id)  # noqa: E731
    server = RemoteServer(idle_timeout=None)
    server.register("batch", unienv_remote.BatchedEnv([make] * 2))
    server.register("single", from_gymnasium(make()))
    url = server.listen("127.0.0.1", 0)
    local = SyncVectorEnv([make] * 3)
    try:
        envs = RemoteVectorEnv([(url, "batch"), (url, "single")],
                               single_observation_space=local.single_observation_space,
                               single_action_space=local.single_action_space)
        try:
            same_transitions(envs, local, env_id)
        finally:
            envs.close()
    finally:
        local.close()
        server.close()


class Counter(gymnasium.Env):  # type: ignore[type-arg]
    """Counts its steps; ``max_count`` (set from outside) ends an episode."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self) -> None:
        self.observation_space = spaces.Discrete(100)
        self.action_space = spaces.Discrete(3)
        self.render_mode = "ansi"
        self.max_count = 5
        self.count = 0

    def reset(self, *, seed: Optional[int] = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.count = 0
        return self.count, {}

    def step(self, action: Any) -> Any:
        self.count += 1
        return self.count, float(action), self.count >= self.max_count, False, {}

    def render(self) -> str:
        return f"count {self.count}"

    def add(self, a: int, b: int = 0) -> int:
        return self.count + a + b


def test_vector_api_of_process_vector_env() -> None:
    """``set_attr`` (one value per env, or one for all), ``get_attr``,
    ``call`` of a method with arguments, ``render`` and ``np_random_seed``
    reach every sub-env, over two server processes; their errors and
    Gymnasium's errors for bad actions and reset masks."""
    envs = ProcessVectorEnv([Counter] * 4, servers=2)
    try:
        assert len(envs.np_random_seed) == 4
        envs.set_attr("max_count", [1, 2, 3, 4])
        assert envs.get_attr("max_count") == (1, 2, 3, 4)
        envs.set_attr("max_count", 2)
        assert envs.get_attr("max_count") == (2, 2, 2, 2)
        obs, _ = envs.reset(seed=42)
        assert envs.np_random_seed == (42, 43, 44, 45)
        assert obs.dtype == np.int64 and obs.tolist() == [0, 0, 0, 0]
        _, _, terminated, _, _ = envs.step(np.array([0, 1, 2, 0]))
        assert not terminated.any()
        _, _, terminated, _, _ = envs.step(np.array([0, 1, 2, 0]))
        assert terminated.all()
        assert envs.call("add", 10, b=1) == (13, 13, 13, 13)
        assert envs.render() == ("count 2",) * 4
        with pytest.raises(AttributeError):
            envs.get_attr("no_such_attribute")
        with pytest.raises(ValueError, match="Values must be a list or tuple"):
            envs.set_attr("max_count", [1, 2])
        with pytest.raises(ValueError, match="use `step` directly"):
            envs.call("step", 0)
        with pytest.raises(TypeError, match="scalar"):
            envs.step(1)
        with pytest.raises(TypeError, match="must be a numpy array"):
            envs.reset(options={"reset_mask": [True, False, True, False]})
        with pytest.raises(ValueError, match=r"must have shape `\(4,\)`"):
            envs.reset(options={"reset_mask": np.array([True, False])})
        with pytest.raises(TypeError, match="must have `dtype=np.bool_`"):
            envs.reset(options={"reset_mask": np.array([1, 0, 1, 0])})
        with pytest.raises(ValueError, match="at least one True value"):
            envs.reset(options={"reset_mask": np.zeros(4, dtype=np.bool_)})
        with pytest.raises(ValueError, match="the length must match num_envs=4"):
            envs.reset(seed=[1, 2])
        # An action outside the space is refused (the env is not stepped).
        with pytest.raises(Exception, match="(?i)bound|range|high"):
            envs.step(np.array([0, 1, 7, 0]))
    finally:
        envs.close()


@pytest.mark.parametrize("space,arrives_as", [
    (spaces.Text(8, min_length=2, charset="abcXYZ"), spaces.Text(8, min_length=2, charset="abcXYZ")),
    (spaces.Box(0, 1, (3,), np.bool_), spaces.MultiBinary(3)),
    (spaces.MultiBinary((2, 2)), spaces.MultiBinary((2, 2))),
    (spaces.MultiDiscrete([3, 4], start=[-1, 2]), spaces.MultiDiscrete([3, 4], start=[-1, 2])),
], ids=["text", "box_bool", "multi_binary", "multi_discrete_start"])
def test_single_env_path_other_spaces(space: Any, arrives_as: Any) -> None:
    """Text, a bool box (a binary space on the wire: ``MultiBinary`` at the
    client), MultiBinary and MultiDiscrete with a start as observation and
    action of one hosted env: the observations are the env's, the actions
    reach it as members of its space (``SpaceEnv.step`` checks)."""
    local, hosted = SpaceEnv(space, space), SpaceEnv(space, space)
    server = RemoteServer(idle_timeout=None)
    server.register("env", from_gymnasium(hosted))
    url = server.listen("127.0.0.1", 0)
    try:
        env = remote_gymnasium.make(url, "env")
        try:
            assert env.observation_space == arrives_as and env.action_space == arrives_as
            obs, _ = env.reset(seed=2)
            assert np.array_equal(np.asarray(obs), np.asarray(local.reset(seed=2)[0]))
            env.action_space.seed(0)
            for _ in range(3):
                action = env.action_space.sample()
                obs = env.step(action)[0]
                assert np.array_equal(np.asarray(obs), np.asarray(local.step(to_gymnasium(space, action))[0]))
            assert len(hosted.seen) == 3
        finally:
            env.close()
    finally:
        server.close()


@pytest.mark.parametrize("name", IDS + PICKLED_IDS)
def test_process_vector_env_carries_every_space(name: str) -> None:
    """Two envs whose observation and action spaces are ``name``'s, through
    ``ProcessVectorEnv`` and ``SyncVectorEnv`` from the same seed and
    actions: the same spaces, the same batched observations (Gymnasium's
    batch types), and every action reaches its env as a member of its space
    (``SpaceEnv.step`` asserts it)."""
    space = SPACES[name] if name in SPACES else PICKLED[name]
    envs = ProcessVectorEnv([lambda: SpaceEnv(space, space)] * 2, servers=1)
    local = SyncVectorEnv([lambda: SpaceEnv(space, space)] * 2)
    try:
        assert envs.single_observation_space == space and envs.observation_space == local.observation_space
        assert envs.action_space == local.action_space
        obs, _ = envs.reset(seed=4)
        assert data_equivalence(obs, local.reset(seed=4)[0])
        assert obs in envs.observation_space
        envs.action_space.seed(9)
        for _ in range(3):
            action = envs.action_space.sample()
            ours, theirs = envs.step(action), local.step(action)
            assert data_equivalence(ours[0], theirs[0]), (ours[0], theirs[0])
        assert envs.get_attr("seen")[0] and all(space.contains(a) for a in envs.get_attr("seen")[0])
    finally:
        envs.close()
        local.close()


def test_same_step_final_obs_as_sync_vector_env() -> None:
    """``SAME_STEP``: the final observation of an episode that ended, in
    ``infos["final_obs"]``, is what ``SyncVectorEnv`` gives (a Python int
    for a ``Discrete`` env that returns one), and the step's observation is
    the new episode's."""
    mode = gymnasium.vector.AutoresetMode.SAME_STEP
    envs = ProcessVectorEnv([Counter] * 3, servers=1, autoreset_mode=mode)
    local = SyncVectorEnv([Counter] * 3, autoreset_mode=mode)
    try:
        for v in (envs, local):
            v.set_attr("max_count", [2, 3, 3])
            v.reset(seed=0)
        for _ in range(4):
            ours, theirs = envs.step(np.array([1, 2, 0])), local.step(np.array([1, 2, 0]))
            assert data_equivalence(ours, theirs), (ours, theirs)
    finally:
        envs.close()
        local.close()


def test_discrete_action_box_observation_envs_keep_the_fast_path() -> None:
    """An env of a real Box observation and a Discrete action (CartPole's
    kind) stays on our host's fast path in a ``BatchedEnv`` and still
    receives NumPy integers, through ``ProcessVectorEnv`` as through
    ``SyncVectorEnv``."""
    obs_space, act_space = spaces.Box(-1.0, 1.0, (3,), np.float32), spaces.Discrete(4, start=1)
    batch = unienv_remote.BatchedEnv([lambda: SpaceEnv(obs_space, act_space)] * 2)
    assert batch._native_step_plan() is not None
    batch.close()
    envs = ProcessVectorEnv([lambda: SpaceEnv(obs_space, act_space)] * 2, servers=1)
    local = SyncVectorEnv([lambda: SpaceEnv(obs_space, act_space)] * 2)
    try:
        assert data_equivalence(envs.reset(seed=1)[0], local.reset(seed=1)[0])
        for action in ([1, 4], [2, 3]):
            assert data_equivalence(envs.step(np.array(action))[0], local.step(np.array(action))[0])
        seen = envs.get_attr("seen")
        assert data_equivalence(seen, local.get_attr("seen"))
        assert all(type(a) is np.int64 for row in seen for a in row)
    finally:
        envs.close()
        local.close()


@pytest.mark.parametrize("name", ["text", "one_of", "dict_text"])
def test_batched_env_of_text_and_one_of_envs_behind_a_remote_vector_env(name: str) -> None:
    """A ``BatchedEnv`` of Gymnasium envs of ``Text`` or ``OneOf`` spaces
    (alone, or a ``Text`` inside a ``Dict``) behind a ``RemoteVectorEnv``:
    unienv batches these spaces but cannot concatenate their values, so
    ours does; given the Gymnasium spaces, the vector env's observations
    are what ``SyncVectorEnv`` gives and it takes Gymnasium's batched
    actions, each reaching its sub-env as a member of its space
    (``SpaceEnv.step`` asserts it)."""
    space = {"dict_text": spaces.Dict({"text": spaces.Text(5), "n": spaces.Discrete(3)})}.get(name) or SPACES[name]
    server = RemoteServer(idle_timeout=None)
    batch = unienv_remote.BatchedEnv([lambda: SpaceEnv(space, space)] * 3)
    server.register("batch", batch)
    url = server.listen("127.0.0.1", 0)
    try:
        envs = RemoteVectorEnv([(url, "batch")], single_observation_space=space, single_action_space=space)
        local = SyncVectorEnv([lambda: SpaceEnv(space, space)] * 3)
        try:
            obs, _ = envs.reset(seed=6)
            assert data_equivalence(obs, local.reset(seed=6)[0])
            local.action_space.seed(2)
            for _ in range(3):
                action = local.action_space.sample()
                ours = envs.step(action)[0]
                assert data_equivalence(ours, local.step(action)[0])
            assert all(len(env.env.seen) == 3 for env in batch.sub_envs)
        finally:
            envs.close()
            local.close()
    finally:
        server.close()


def test_single_env_path_one_of() -> None:
    """A ``OneOf`` space is UniEnv's union space on the wire, both ways: a
    hosted env's observations arrive as ``(np.int64, value)`` of the
    chosen space, actions reach it as members of its space; a ``Discrete``
    inside it keeps its ``n`` (our host publishes its reachable high bound
    inside a union as inside ``Dict`` and ``Tuple`` spaces)."""
    space = SPACES["one_of"]
    local, hosted = SpaceEnv(space, space), SpaceEnv(space, space)
    server = RemoteServer(idle_timeout=None)
    server.register("env", from_gymnasium(hosted))
    url = server.listen("127.0.0.1", 0)
    try:
        env = remote_gymnasium.make(url, "env")
        try:
            assert env.observation_space == space and env.action_space == env.observation_space
            obs, _ = env.reset(seed=2)
            assert data_equivalence(scalars(obs), scalars(local.reset(seed=2)[0]))
            space.seed(0)
            for _ in range(4):
                action = space.sample()
                obs = env.step(action)[0]
                assert obs in space
                assert data_equivalence(scalars(obs), scalars(local.step(action)[0]))
            assert len(hosted.seen) == 4
        finally:
            env.close()
    finally:
        server.close()


def test_bool_box_over_the_wire() -> None:
    """A bool ``Box`` is a binary space on the wire, whose document cannot
    tell it from a ``MultiBinary``: a ``RemoteVectorEnv`` makes a
    ``MultiBinary`` of it (unienv's own conversion fails on binary spaces),
    in a dict too, and given the ``Box`` it gives bool observations in it;
    a ``ProcessVectorEnv`` has the sub-envs' own ``Box``."""
    space = spaces.Box(0, 1, (3,), np.bool_)
    nested = spaces.Dict({"flags": space, "n": spaces.Discrete(2)})
    server = RemoteServer(idle_timeout=None)
    server.register("batch", unienv_remote.BatchedEnv([lambda: SpaceEnv(space, space)] * 2))
    server.register("nested", unienv_remote.BatchedEnv([lambda: SpaceEnv(nested, space)] * 2))
    url = server.listen("127.0.0.1", 0)
    try:
        envs = RemoteVectorEnv([(url, "batch")])
        try:
            assert envs.single_observation_space == spaces.MultiBinary(3)
            assert envs.single_action_space == spaces.MultiBinary(3)
        finally:
            envs.close()
        envs = RemoteVectorEnv([(url, "nested")])
        try:
            assert envs.single_observation_space["flags"] == spaces.MultiBinary(3)
        finally:
            envs.close()
        envs = RemoteVectorEnv([(url, "batch")], single_observation_space=space, single_action_space=space)
        try:
            obs, _ = envs.reset(seed=0)
            assert obs.dtype == np.bool_ and obs in envs.observation_space
            obs = envs.step(np.array([[True, False, True]] * 2))[0]
            assert obs.dtype == np.bool_ and obs in envs.observation_space
        finally:
            envs.close()
    finally:
        server.close()
    process = ProcessVectorEnv([lambda: SpaceEnv(space, space)] * 2, servers=1)
    try:
        assert process.single_observation_space == space and process.single_action_space == space
        assert process.reset(seed=0)[0].dtype == np.bool_
    finally:
        process.close()


def test_observation_mode_of_process_vector_env() -> None:
    """Gymnasium's ``observation_mode``: ``"different"`` batches sub-envs
    of differing ``Box`` bounds (over two server processes) with
    ``batch_differing_spaces`` and steps as ``SyncVectorEnv`` does; a
    ``(batched, single)`` pair is taken as given; ``"same"`` with
    differing spaces (within one server or across servers), sub-envs of
    other shapes, and an unknown mode are Gymnasium's errors."""
    from gymnasium.vector.utils import batch_differing_spaces

    boxes = [spaces.Box(0.0, float(i), (2,), np.float32) for i in (1, 2, 3)]
    fns = [lambda b=b: SpaceEnv(b, spaces.Discrete(2)) for b in boxes]
    envs = ProcessVectorEnv(fns, servers=2, observation_mode="different")
    local = SyncVectorEnv(fns, observation_mode="different")
    try:
        assert envs.observation_space == batch_differing_spaces(boxes) == local.observation_space
        assert envs.single_observation_space == boxes[0]
        assert data_equivalence(envs.reset(seed=3)[0], local.reset(seed=3)[0])
        for _ in range(2):
            ours, theirs = envs.step(np.array([0, 1, 1])), local.step(np.array([0, 1, 1]))
            assert data_equivalence(ours[0], theirs[0])
    finally:
        envs.close()
        local.close()
    given = (spaces.Box(0.0, 3.0, (3, 2), np.float32), spaces.Box(0.0, 3.0, (2,), np.float32))
    envs = ProcessVectorEnv(fns, servers=1, observation_mode=given)
    try:
        assert (envs.observation_space, envs.single_observation_space) == given
        assert envs.reset(seed=0)[0].shape == (3, 2)
    finally:
        envs.close()
    for servers in (1, 3):
        with pytest.raises(RuntimeError, match="observation spaces are not equivalent"):
            ProcessVectorEnv(fns, servers=servers)
    shapes = [lambda n=n: SpaceEnv(spaces.Box(0.0, 1.0, (n,)), spaces.Discrete(2)) for n in (1, 2)]
    with pytest.raises(RuntimeError, match="do not share a common shape and dtype"):
        ProcessVectorEnv(shapes, servers=1, observation_mode=(spaces.Box(0.0, 1.0, (2, 2)), spaces.Box(0.0, 1.0, (2,))))
    with pytest.raises((AssertionError, ValueError)):
        ProcessVectorEnv(shapes, servers=1, observation_mode="different")
    with pytest.raises(ValueError, match="Invalid `observation_mode`"):
        ProcessVectorEnv(fns, observation_mode="invalid")
    with pytest.raises(TypeError, match="to be Spaces"):
        ProcessVectorEnv(fns, observation_mode=(boxes[0], "single"))  # type: ignore[arg-type]


def test_space_hull_holds_every_space() -> None:
    """The one space the servers publish in ``observation_mode="different"``
    holds every sub-env's values: widest bounds, field by field."""
    from unienv_remote._gym_spaces import space_hull

    given = [spaces.Dict({"b": spaces.Box(-float(i), 1.0, (2,)), "d": spaces.Discrete(3 + i, start=i),
                          "m": spaces.MultiDiscrete([2 + i, 2], start=[-i, 0])}) for i in range(3)]
    hull = space_hull(given)
    assert hull == spaces.Dict({"b": spaces.Box(-2.0, 1.0, (2,)), "d": spaces.Discrete(7),
                                "m": spaces.MultiDiscrete([4, 2], start=[-2, 0])})
    for space in given:
        space.seed(0)
        assert all(hull.contains(space.sample()) for _ in range(20))


def test_process_vector_env_carries_a_space_defined_in_a_function() -> None:
    """A custom space whose class is defined where the envs are made (not
    importable by the server processes: cloudpickle sends it by value, with
    the factories) still comes back as itself, its values unpickled."""

    class Local(spaces.Space):  # type: ignore[type-arg]
        def sample(self, mask: Any = None, probability: Any = None) -> Any:
            return ("local", int(self.np_random.integers(5)))

        def contains(self, x: Any) -> bool:
            return isinstance(x, tuple) and x[0] == "local"

        def __eq__(self, other: Any) -> bool:
            return type(other).__name__ == "Local"

    envs = ProcessVectorEnv([lambda: SpaceEnv(Local(), Local())] * 2, servers=1)
    try:
        assert type(envs.single_observation_space).__name__ == "Local"
        obs, _ = envs.reset(seed=0)
        assert isinstance(obs, tuple) and len(obs) == 2 and all(o[0] == "local" for o in obs)
        obs = envs.step((("local", 1), ("local", 2)))[0]
        assert all(o[0] == "local" for o in obs)
    finally:
        envs.close()
