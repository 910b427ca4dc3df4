"""Real simulators served by ``unienv_remote.RemoteServer`` and driven remotely:
Gymnasium's ``Pendulum-v1`` and MuJoCo's ``HalfCheetah-v5`` through unienv's
``FromGymnasiumEnv``, reset and stepped with the same seeds and actions as a
local copy; every observation, reward, signal and info must be identical.
"""

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from unienv_interface.remote import RemoteClient as RefClient  # noqa: E402
from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv  # noqa: E402

import unienv_remote  # noqa: E402

STEPS = 60


def make(name):
    return FromGymnasiumEnv(gymnasium.make(name))


def identical(a, b, path="$"):
    assert type(a) is type(b), f"{path}: {type(a)} vs {type(b)}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert a.tobytes() == b.tobytes(), f"{path}: {a} vs {b}"
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            identical(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            identical(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


def normalized(value):
    """What a value becomes on the wire, as the reference codec encodes it: floats
    (``np.float64`` included) are floats, other NumPy scalars 0-d arrays."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(normalized(v) for v in value)
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


def episode(env, actions, seed):
    out = [normalized(env.reset(seed=seed))]
    for action in actions:
        out.append(normalized(env.step(action)))
    return out


@pytest.mark.parametrize("name", ["Pendulum-v1", "HalfCheetah-v5"])
@pytest.mark.parametrize("client", ["reference", "ours", "memory"])
def test_served_simulator_matches_local_stepping(name, client):
    local = make(name)
    rng = np.random.default_rng(7)
    low, high = local.action_space.low, local.action_space.high
    actions = [rng.uniform(low, high).astype(local.action_space.dtype) for _ in range(STEPS)]
    want = episode(local, actions, seed=11)

    server = unienv_remote.RemoteServer(idle_timeout=None)
    served = make(name)
    server.register("sim", served)
    try:
        if client == "memory":
            remote_client = server.connect()
        else:
            url = server.listen("127.0.0.1", 0)
            remote_client = (RefClient if client == "reference" else unienv_remote.RemoteClient).connect(url)
        remote = remote_client.env("sim")
        got = episode(remote, actions, seed=11)
        # The served object was stepped, not a copy: its state is the local one's.
        identical(normalized(served.env.unwrapped.state if name == "Pendulum-v1" else
                             served.env.unwrapped.data.qpos.copy()),
                  normalized(local.env.unwrapped.state if name == "Pendulum-v1" else
                             local.env.unwrapped.data.qpos.copy()))
        # The remote spaces are the served env's, through unienv's own space_to_json.
        assert str(remote.action_space) == str(local.action_space)
        assert str(remote.observation_space) == str(local.observation_space)
        remote_client.close()
    finally:
        server.close()
    identical(got, want)
