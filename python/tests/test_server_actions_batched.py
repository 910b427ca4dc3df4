"""The action check on batched and integer spaces, against our ``RemoteServer``
hosting a ``BatchedEnv`` of Pendulums and Gymnasium envs whose ``Discrete`` /
``MultiDiscrete`` spaces start at an offset: which actions pass and the exact
refusal of those that do not (bounds edges, NaN, infinities, wrong dtype and
shape), with the reference client and with ours. These messages are the ones
main's build gave before the check read array actions in place; the test
passes against both builds.
"""

from typing import Any, Callable, Iterator

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.remote import RemoteClient as RefClient  # noqa: E402
from unienv_interface.remote.errors import RemoteError  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402

N = 4


class Offsets(gymnasium.Env):
    """Actions ``Discrete(5, start=3)`` or ``MultiDiscrete([2, 4], start=[-1, 2])``."""

    def __init__(self, multi: bool = False) -> None:
        if multi:
            self.action_space = gymnasium.spaces.MultiDiscrete([2, 4], start=[-1, 2])
        else:
            self.action_space = gymnasium.spaces.Discrete(5, start=3)
        self.observation_space = gymnasium.spaces.Box(-10.0, 10.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action), action
        return np.zeros(1, np.float32), 0.0, False, False, {}


@pytest.fixture(params=["reference", "ours"])
def client(request) -> Iterator[Any]:
    server = unienv_remote.RemoteServer(idle_timeout=None)
    server.register("pendulums", unienv_remote.BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * N))
    server.register("discrete", FromGymnasiumEnv(Offsets()))
    server.register("multi", FromGymnasiumEnv(Offsets(multi=True)))
    server.register("discretes", unienv_remote.BatchedEnv([lambda: Offsets()] * N))
    url = server.listen("127.0.0.1", 0)
    c = (RefClient if request.param == "reference" else unienv_remote.RemoteClient).connect(url)
    yield c
    c.close()
    server.close()


def refusal(call: Callable[[], Any]) -> str:
    with pytest.raises(RemoteError) as caught:
        call()
    assert caught.value.code == "invalid_request", caught.value
    assert not caught.value.uncertain, caught.value
    return str(caught.value)


def pendulums(values: Any, dtype: Any = np.float32) -> np.ndarray:
    return np.asarray(values, dtype).reshape(N, 1)


above_two = float(np.nextafter(np.float32(2.0), np.float32(3.0)))
BOX = "Box(float32, [4, 1])"

REFUSED = [
    ("pendulums", pendulums([0.0, 0.0, above_two, 0.0]),
     "action[2, 0] = 2.000000238418579 is above the high bound 2 of the action space"),
    ("pendulums", pendulums([0.0, -above_two, 0.0, 0.0]),
     "action[1, 0] = -2.000000238418579 is below the low bound -2 of the action space"),
    ("pendulums", pendulums([0.0, 0.0, 0.0, np.nan]), "action[3, 0] is NaN: actions must be finite numbers"),
    ("pendulums", pendulums([np.inf, 0.0, 0.0, 0.0], np.float64),
     "action[0, 0] is inf: actions must be finite numbers"),
    ("pendulums", pendulums([0.0, -np.inf, 0.0, 0.0]), "action[1, 0] is -inf: actions must be finite numbers"),
    ("pendulums", np.zeros(N, np.float32), f"action has shape (4,) but the action space {BOX} has shape (4, 1)"),
    ("pendulums", np.zeros((N, 1), np.bool_),
     f"action has boolean values but the action space {BOX} holds floating-point values (dtype float32)"),
    ("pendulums", np.zeros((N, 1), np.complex64),
     f"action has complex values but the action space {BOX} holds floating-point values (dtype float32)"),
    ("discrete", 8, "action = 8 is above the high bound 7 of the action space"),
    ("discrete", np.int64(2), "action = 2 is below the low bound 3 of the action space"),
    ("discrete", np.array(3.0), "action has floating-point values but the action space Box(int64, []) holds integer values (dtype int64)"),
    ("multi", np.array([0, 6]), "action[1] = 6 is above the high bound 5 of the action space"),
    ("multi", np.array([-2, 2]), "action[0] = -2 is below the low bound -1 of the action space"),
    ("discretes", np.array([3, 7, 8, 3]), "action[2] = 8 is above the high bound 7 of the action space"),
    ("discretes", np.array([3, 7, 7, 2], np.int8), "action[3] = 2 is below the low bound 3 of the action space"),
]


@pytest.mark.parametrize("resource, action, message", REFUSED)
def test_refusals_name_the_element_and_bound_exactly(client, resource, action, message):
    env = client.env(resource)
    env.reset(seed=3)
    text = refusal(lambda: env.step(action))
    assert text.endswith(f"step() on '{resource}' refused the action: {message}"), text


ACCEPTED = [
    ("pendulums", pendulums([2.0, -2.0, 0.0, 1.5])),
    ("pendulums", pendulums([2.0, -2.0, -0.0, 1e-30], np.float64)),
    ("pendulums", pendulums([2, -2, 0, 1], np.int64)),
    ("discrete", 7),
    ("discrete", np.int32(3)),
    ("multi", np.array([-1, 5])),
    ("multi", np.array([0, 2], np.uint8)),
    ("discretes", np.array([3, 7, 5, 4])),
]


@pytest.mark.parametrize("resource, action", ACCEPTED)
def test_actions_on_the_bounds_pass(client, resource, action):
    env = client.env(resource)
    env.reset(seed=3)
    env.step(action)


BAD_MASKS = [
    np.array([1, 0, 1, 0]),                   # int, not bool
    np.array([1.0, 0.0, 0.0, 0.0]),           # float
    np.ones(N + 1, np.bool_),                 # one too many
    np.ones((N, 1), np.bool_),                # 2-D
    "all",
]


@pytest.mark.parametrize("mask", BAD_MASKS, ids=["int", "float", "long", "2d", "str"])
def test_a_bad_reset_mask_is_refused_and_the_batch_stays_usable(client, mask):
    """``BatchedEnv.reset`` refuses a mask that is not a bool array of shape
    ``(N,)`` before touching a sub-env: a certain ``invalid_request``, the
    domain not faulted (the next step runs)."""
    env = client.env("pendulums")
    env.reset(seed=3)
    text = refusal(lambda: env.reset(mask=mask))
    assert f"mask must be a bool array of shape ({N},)" in text, text
    _, reward, *_ = env.step(pendulums([0.0] * N))
    assert np.asarray(reward).shape == (N,)
