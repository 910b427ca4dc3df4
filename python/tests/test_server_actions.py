"""Every usual action mistake of a Gymnasium user, made against Gymnasium envs
hosted by our ``RemoteServer`` (``FromGymnasiumEnv(gymnasium.make(...))``) with
the reference client and with ours: an action that fits the space works
(``step(1)``, ``step([0.5])``), anything else is a certain ``invalid_request``
naming the problem, and the env stays usable without a reset.
"""

from typing import Any, Callable, Iterator, Tuple

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.remote import RemoteClient as RefClient  # noqa: E402
from unienv_interface.remote.errors import RemoteError  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402


class DictActions(gymnasium.Env):
    """A Gymnasium env with a ``Dict(move: Discrete(3), force: Box(2))`` action space."""

    def __init__(self) -> None:
        self.action_space = gymnasium.spaces.Dict({
            "move": gymnasium.spaces.Discrete(3),
            "force": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32),
        })
        self.observation_space = gymnasium.spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.steps += 1
        obs = np.asarray(action["force"], np.float32)
        return obs, float(action["move"]), False, False, {"steps": self.steps}


def hosted(**options: Any) -> unienv_remote.RemoteServer:
    server = unienv_remote.RemoteServer(idle_timeout=None, **options)
    server.register("cartpole", FromGymnasiumEnv(gymnasium.make("CartPole-v1")))
    server.register("pendulum", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    server.register("dict", FromGymnasiumEnv(DictActions()))
    return server


@pytest.fixture(params=["reference", "ours"])
def connect(request) -> Iterator[Callable[..., Any]]:
    servers = []
    clients = []

    def make(**options: Any) -> Any:
        server = hosted(**options)
        servers.append(server)
        url = server.listen("127.0.0.1", 0)
        client = (RefClient if request.param == "reference" else unienv_remote.RemoteClient).connect(url)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
    for server in servers:
        server.close()


def refused(call: Callable[[], Any]) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        call()
    error = caught.value
    assert error.code == "invalid_request", error
    assert not error.uncertain, error
    return error


def test_plain_actions_that_fit_the_space_work(connect):
    client = connect()
    cartpole, pendulum = client.env("cartpole"), client.env("pendulum")
    cartpole.reset(seed=0)
    for action in (1, 0, np.int64(1), np.array(0)):
        obs, reward, terminated, truncated, info = cartpole.step(action)
        assert obs.shape == (4,) and reward == 1.0
    pendulum.reset(seed=0)
    for action in ([0.5], 0.5, [-2], np.array([0.5]), np.array([1.0], np.float32)):
        obs, reward, *_ = pendulum.step(action)
        assert obs.shape == (3,) and isinstance(float(reward), float)
    env = client.env("dict")
    env.reset(seed=0)
    obs, reward, *_ = env.step({"move": 2, "force": [0.25, -0.5]})
    assert obs.tolist() == [0.25, -0.5] and reward == 2.0


def test_step_before_reset_is_a_certain_error_naming_reset(connect):
    client = connect()
    env = client.env("cartpole")
    error = refused(lambda: env.step(1))
    assert "reset()" in str(error)
    env.reset(seed=1)
    assert env.step(1)[0].shape == (4,)


@pytest.mark.parametrize("resource, action, words", [
    ("pendulum", np.zeros(2), "has shape (2,) but the action space Box(float32, [1]) has shape (1,)"),
    ("pendulum", [0.5, 0.5], "has shape (2,)"),
    ("pendulum", [3.0], "action[0] = 3 is above the high bound 2"),
    ("pendulum", [-2.5], "action[0] = -2.5 is below the low bound -2"),
    ("pendulum", [float("nan")], "action[0] is NaN"),
    ("pendulum", np.array([np.inf], np.float32), "action[0] is inf"),
    ("pendulum", "left", "must be an array of shape (1,)"),
    ("cartpole", 2, "action = 2 is above the high bound 1"),
    ("cartpole", -1, "action = -1 is below the low bound 0"),
    ("cartpole", 0.5, "floating-point values"),
    ("cartpole", [1, 0], "has shape (2,)"),
    ("dict", {"move": 1}, "action is missing the key 'force'"),
    ("dict", {"move": 3, "force": [0.0, 0.0]}, "action['move'] = 3 is above the high bound 2"),
    ("dict", {"move": 1, "force": [0.0, 0.0], "jump": 1}, "unexpected key 'jump'"),
    ("dict", [1, [0.0, 0.0]], "must be a dict"),
])
def test_refused_actions_name_the_problem_and_leave_the_env_usable(connect, resource, action, words):
    client = connect()
    env = client.env(resource)
    env.reset(seed=2)
    error = refused(lambda: env.step(action))
    assert words in str(error), str(error)
    assert f"step() on '{resource}' refused the action" in str(error)
    # Not faulted: the next fitting step runs without a reset.
    good = {"cartpole": 1, "pendulum": [0.0], "dict": {"move": 0, "force": [0.0, 0.0]}}[resource]
    env.step(good)


def test_validate_actions_false_passes_actions_through_as_the_reference_does(connect):
    client = connect(validate_actions=False)
    env = client.env("pendulum")
    env.reset(seed=0)
    # Wrong shape goes through unchecked (Pendulum reads the first element).
    env.step(np.zeros(2))
    cartpole = client.env("cartpole")
    cartpole.reset(seed=0)
    if isinstance(client, RefClient):
        # The reference's failure: the env gets a bare int, the domain faults.
        with pytest.raises(RemoteError) as failed:
            cartpole.step(1)
        assert failed.value.code == "execution_error" and failed.value.uncertain
    else:
        # Our client converts the plain action before sending it.
        assert cartpole.step(1)[0].shape == (4,)


def test_the_native_coercion_our_clients_use():
    from unienv_remote import _actions
    box = {"type": "BoxSpace", "shape": (1,), "low": [-2.0], "high": [2.0], "dtype": "float32"}
    converted = _actions.coerce([0.5], box)
    assert converted.dtype == np.float32 and converted.tolist() == [0.5]
    assert _actions.coerce(0.5, box).shape == (1,)
    assert _actions.coerce([0.5, 0.5], box) == [0.5, 0.5]
    stacked = _actions.coerce_batched([[0.0]] * 8, box, 8)
    assert stacked.dtype == np.float32 and stacked.shape == (8, 1)
    discrete = {"type": "BoxSpace", "shape": (), "low": 0, "high": 2, "dtype": "int64"}
    assert _actions.coerce(1, discrete).dtype == np.int64
    assert _actions.coerce(1.5, discrete) == 1.5
    assert _actions.coerce_batched([1, 0, 1], discrete, 3).tolist() == [1, 0, 1]


def test_vector_env_steps_with_a_nested_list():
    server = unienv_remote.RemoteServer(idle_timeout=None)
    for i in range(2):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
    url = server.listen("127.0.0.1", 0)
    try:
        envs = unienv_remote.RemoteVectorEnv([(url, "pendulum0"), (url, "pendulum1")])
        try:
            envs.reset(seed=0)
            obs, rewards, terminations, truncations, infos = envs.step([[0.0]] * 2)
            assert obs.shape == (2, 3) and rewards.shape == (2,)
            obs, *_ = envs.step([[0.5], [-0.5]])
            assert obs.shape == (2, 3)
        finally:
            envs.close()
    finally:
        server.close()


def test_the_command_line_steps_a_python_hosted_env_with_a_json_action():
    import subprocess
    from conftest import our_binary
    server = hosted()
    url = server.listen("127.0.0.1", 0)
    try:
        def call(*args: str) -> "subprocess.CompletedProcess[str]":
            return subprocess.run([str(our_binary()), "call", url, "cartpole", *args],
                                  capture_output=True, text=True, timeout=120)
        before = call("step", "--args", "[1]")
        assert before.returncode != 0 and "reset()" in before.stderr, before.stderr
        assert "faulted" not in before.stderr and "uncertain" not in before.stderr.lower()
        assert call("reset", "--kwargs", '{"seed": 0}').returncode == 0
        stepped = call("step", "--args", "[1]", "--json")
        assert stepped.returncode == 0, stepped.stderr
        out_of_space = call("step", "--args", "[7]")
        assert out_of_space.returncode != 0 and "above the high bound 1" in out_of_space.stderr
    finally:
        server.close()


@pytest.mark.parametrize("client_kind", ["reference", "ours"])
def test_node_actions_are_converted_and_checked_too(client_kind):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
    from ref_fixture_server import DeviceNode
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("arm", DeviceNode("arm", width=2))
    url = server.listen("127.0.0.1", 0)
    client = (RefClient if client_kind == "reference" else unienv_remote.RemoteClient).connect(url)
    try:
        arm = client.node("arm")
        client.acquire("arm")
        with client.operation("arm", "reset"):
            arm.reset(seed=0)
        with client.operation("arm", "step"):
            error = refused(lambda: arm.set_next_action([0.5]))
            assert "set_next_action() on 'arm' refused the action: action has shape (1,)" in str(error), error
            arm.set_next_action([0.25, 0.5])
            arm.post_environment_step(0.1)
        assert arm.get_observation().tolist() == [0.25, 0.5]
    finally:
        client.close()
        server.close()
