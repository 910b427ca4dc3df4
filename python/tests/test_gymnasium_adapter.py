"""``unienv_remote.gymnasium``: one remote env as a ``gymnasium.Env`` passes
Gymnasium's own ``check_env`` against the Rust server's built-in simulators
(``unienv-remote serve``: ``cartpole``, and ``pointmass`` with a context space
and rendering) and against Gymnasium envs hosted by our ``RemoteServer``, with
and without a context space, rendering included; the registered id works with
``gymnasium.make`` and ``gymnasium.make_vec``.
"""

import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402
import unienv_remote.gymnasium as remote_gymnasium  # noqa: E402
from conftest import our_binary  # noqa: E402
import subprocess  # noqa: E402
import re  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402


class Painter(gymnasium.Env):
    """A small Gymnasium env that renders ``rgb_array`` frames and has a
    ``Dict`` observation and a ``MultiBinary`` + ``Discrete`` action."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gymnasium.spaces.Dict({
            "position": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "cell": gymnasium.spaces.Discrete(4),
        })
        self.action_space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(3), gymnasium.spaces.MultiBinary(2)))
        self.position = np.zeros(2, np.float32)

    def _obs(self):
        return {"position": self.position.copy(), "cell": int(self.position[0] > 0) + 2 * int(self.position[1] > 0)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        return self._obs(), {"seeded": seed is not None}

    def step(self, action):
        move, pen = action
        assert self.action_space.contains((int(move), np.asarray(pen, np.int8))), action
        self.position = np.clip(self.position + 0.1 * (int(move) - 1), -1.0, 1.0).astype(np.float32)
        return self._obs(), float(np.sum(pen)), bool(abs(self.position[0]) >= 1.0), False, {}

    def render(self):
        frame = np.zeros((16, 16, 3), np.uint8)
        frame[..., 0] = 128
        return frame


@pytest.fixture(scope="module")
def rust_server():
    process = subprocess.Popen([str(our_binary()), "serve", "--addr", "127.0.0.1:0"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    url = None
    for line in process.stdout:
        found = re.search(r"(ws://127\.0\.0\.1:\d+)", line)
        if found:
            url = found.group(1)
            break
    assert url is not None
    yield url
    process.terminate()
    process.wait(timeout=10)
    process.stdout.close()


@pytest.fixture(scope="module")
def python_server():
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("cartpole", FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
    server.register("pendulum0", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    server.register("pendulum1", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    server.register("painter", FromGymnasiumEnv(Painter(render_mode="rgb_array")))
    # A UniEnv env with a context space (and rendering), hosted by our server.
    server.register("counter", CounterEnv())
    yield server.listen("127.0.0.1", 0)
    server.close()


# Advice about the simulators themselves (CartPole's unbounded observations,
# Pendulum's [-2, 2] torque) and about check_env's own reach, not problems of
# the adapter.
ADVICE = ("infinity", "symmetric and normalized", "alternative render modes", "No render fps was declared")


def checked(env):
    """``check_env`` passes, and warns about nothing but ``ADVICE`` (a wrong
    observation dtype, a non-bool signal, an unseeded RNG... would fail)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    problems = [str(w.message) for w in caught if not any(a in str(w.message) for a in ADVICE)]
    assert not problems, problems


@pytest.mark.parametrize("resource", ["cartpole", "pointmass"])
def test_check_env_on_the_built_in_simulators(rust_server, resource):
    env = remote_gymnasium.make(rust_server, resource)
    try:
        if resource == "pointmass":
            # A context space (in info) and rgb_array frames.
            assert env.render_mode == "rgb_array" and env.metadata["render_modes"] == ["rgb_array"]
            obs, info = env.reset(seed=3)
            assert info["context"] in env._context_space
            assert env.render().dtype == np.uint8
        else:
            assert env.action_space == gymnasium.spaces.Discrete(2)
        checked(env)
    finally:
        env.close()


def test_context_as_part_of_the_observation(rust_server):
    env = remote_gymnasium.make(rust_server, "pointmass", context="observation")
    try:
        obs, _ = env.reset(seed=1)
        assert set(obs) == {"context", "observation"} and obs in env.observation_space
        checked(env)
    finally:
        env.close()


@pytest.mark.parametrize("resource, context", [("cartpole", "info"), ("pendulum0", "info"), ("painter", "info"),
                                               ("counter", "info"), ("counter", "observation")])
def test_check_env_on_envs_hosted_by_our_server(python_server, resource, context):
    env = remote_gymnasium.make(python_server, resource, context=context)
    try:
        if resource == "cartpole":
            # Discrete(2), not UniEnv's [0, 2] box: every sample is an action CartPole takes.
            assert env.action_space == gymnasium.spaces.Discrete(2)
        if resource == "painter":
            assert env.render_mode == "rgb_array" and env.render().shape == (16, 16, 3)
        if resource == "counter":
            obs, info = env.reset(seed=4)
            if context == "info":
                assert info["context"].tolist() == [4.0, 4.0] and obs["position"].tolist() == [4.0, 4.0]
            else:
                assert obs["context"].tolist() == [4.0, 4.0] and obs["observation"]["position"].tolist() == [4.0, 4.0]
        checked(env)
    finally:
        env.close()


def test_registered_id_with_make_and_make_vec(python_server):
    env = gymnasium.make(remote_gymnasium.ENV_ID, url=python_server, resource_id="pendulum0")
    try:
        check_env(env.unwrapped)
        obs, info = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs.shape == (3,) and isinstance(reward, float) and terminated is False
    finally:
        env.close()
    envs = gymnasium.make_vec(remote_gymnasium.ENV_ID, num_envs=2, url=python_server,
                              resource_id=["pendulum0", "pendulum1"])
    try:
        assert isinstance(envs, unienv_remote.RemoteVectorEnv)
        obs, infos = envs.reset(seed=0)
        obs, rewards, *_ = envs.step(envs.action_space.sample())
        assert obs.shape == (2, 3) and rewards.shape == (2,)
    finally:
        envs.close()
    with pytest.raises(ValueError, match="one ID per env"):
        gymnasium.make_vec(remote_gymnasium.ENV_ID, num_envs=2, url=python_server, resource_id="pendulum0")


def test_check_env_through_gymnasium_make_with_its_spec(python_server):
    """check_env makes a second adapter of the same remote env (env.spec.make)
    to check rendering: the first one hands control over, refuses to step
    while the second one exists, and takes the env back with a reset."""
    env = gymnasium.make(remote_gymnasium.ENV_ID, url=python_server, resource_id="painter")
    try:
        checked(env.unwrapped)
        with pytest.raises(RuntimeError, match="close that one, then reset this one"):
            other = gymnasium.make(remote_gymnasium.ENV_ID, url=python_server, resource_id="painter")
            other.reset(seed=1)
            env.unwrapped.step(env.action_space.sample())
        other.close()
        env.reset(seed=2)
        env.step(env.action_space.sample())
    finally:
        env.close()


def test_another_render_mode_is_refused(python_server):
    with pytest.raises(ValueError, match="render mode is chosen where it is hosted"):
        remote_gymnasium.make(python_server, "painter", render_mode="human")
