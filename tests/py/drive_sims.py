"""The reference client drives our server's built-in simulators: `pointmass`
in env mode and, through the reference RemoteWorldEnv, in components mode;
then the detached `gripper`.

  python drive_sims.py URL

Prints `ok` and a few figures; any failed check raises.
"""
import math
import sys

import numpy as np
from unienv_interface.remote import RemoteClient, RemoteWorldEnv
from unienv_interface.space import BoxSpace, DictSpace

url = sys.argv[1]
client = RemoteClient.connect(url)
ids = {d["id"] for d in client.discover()}
expected_ids = {"cartpole", "pointmass", "pointmass/world", "pointmass/node", "pointmass/node/body",
                "pointmass/node/camera", "gripper", "gripper/left", "gripper/right"}
assert expected_ids <= ids, sorted(ids)


def check_spaces(env):
    assert isinstance(env.action_space, BoxSpace), env.action_space
    assert env.action_space.shape == (2,) and env.action_space.dtype == np.float32
    assert float(env.action_space.low.min()) == -1.0 and float(env.action_space.high.max()) == 1.0
    assert isinstance(env.context_space, BoxSpace) and env.context_space.shape == (2,)
    obs_space = env.observation_space
    assert isinstance(obs_space, DictSpace), obs_space
    assert sorted(obs_space.spaces) == ["body", "camera"], obs_space
    assert sorted(obs_space.spaces["body"].spaces) == ["position", "velocity"]
    camera = obs_space.spaces["camera"]
    assert camera.shape == (64, 64, 3) and camera.dtype == np.uint8, camera


def check_reset(result):
    context, obs, info = result
    assert context.shape == (2,) and context.dtype == np.float32, context
    body = obs["body"]
    for key in ("position", "velocity"):
        assert body[key].shape == (2,) and body[key].dtype == np.float32, (key, body[key])
    assert np.all(body["velocity"] == 0.0)
    assert obs["camera"].shape == (64, 64, 3) and obs["camera"].dtype == np.uint8
    distance = float(np.linalg.norm(context - body["position"]))
    assert distance >= 0.5 - 1e-6, distance
    assert abs(info["body"]["distance"] - distance) < 1e-6, (info, distance)
    return context, obs


def episode(env, seed, toward, steps=60):
    """Pushes the body towards (or away from) the goal with a PD law; returns
    the rewards, whether it terminated, and every observation."""
    goal, obs = check_reset(env.reset(seed=seed))
    rewards, terminated, trace = [], False, [obs]
    sign = 1.0 if toward else -1.0
    for _ in range(steps):
        body = obs["body"]
        action = np.clip(sign * 3.0 * (goal - body["position"]) - 1.5 * body["velocity"], -1.0, 1.0)
        obs, reward, terminated, truncated, info = env.step(action.astype(np.float32))
        assert isinstance(reward, float) and isinstance(terminated, bool) and isinstance(truncated, bool)
        assert abs(info["control_step_elapsed_time"] - 0.04) < 1e-9, info
        assert abs(reward + info["body"]["distance"]) < 1e-9, (reward, info)
        assert not truncated
        rewards.append(reward)
        trace.append(obs)
        if terminated:
            break
    return rewards, terminated, trace


# ---- env mode -------------------------------------------------------------
env = client.env("pointmass")
check_spaces(env)
assert env.control_timestep == 0.04 and env.render_fps == 25 and env.render_mode == "rgb_array"
toward, reached, env_trace = episode(env, seed=7, toward=True)
assert reached, toward
assert toward[-1] > toward[0] + 0.3, (toward[0], toward[-1])
assert toward[-1] >= -0.1, toward[-1]
away, away_reached, _ = episode(env, seed=7, toward=False, steps=25)
assert not away_reached
assert away[-1] < toward[0] + 0.05 and min(away) < toward[0], (away, toward[0])
frame = env.render()
assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8
greens = np.all(frame == np.array([40, 200, 80], np.uint8), axis=-1).sum()
reds = np.all(frame == np.array([230, 60, 50], np.uint8), axis=-1).sum()
assert greens > 10 and reds > 10, (greens, reds)
env.close()

# ---- components mode, composed on the client ------------------------------
world = client.world("pointmass/world")
root = client.node("pointmass/node")
assert world.world_timestep == 0.01 and root.name == "robot"
assert root.descriptor["children"] == {"body": "pointmass/node/body", "camera": "pointmass/node/camera"}
body = client.node("pointmass/node/body")
camera = client.node("pointmass/node/camera")
assert body.post_environment_step_priorities == {50} and camera.post_environment_step_priorities == {-50}
assert camera.action_space is None and camera.render_mode == "rgb_array"
assert body.has_reward and body.has_termination_signal and not camera.has_reward
renv = RemoteWorldEnv(world, root)
check_spaces(renv)
assert (renv._n_update_substeps, renv._n_world_substeps) == (2, 2)
assert renv.control_timestep == 0.04
comp_toward, comp_reached, comp_trace = episode(renv, seed=7, toward=True)
# The same seed and actions give the same trajectory in either mode.
assert comp_reached and comp_toward == toward, (comp_toward, toward)
for a, b in zip(env_trace, comp_trace):
    assert np.array_equal(a["body"]["position"], b["body"]["position"])
    assert np.array_equal(a["camera"], b["camera"])
# The nodes' own getters read the same state.
assert np.array_equal(body.get_observation()["position"], comp_trace[-1]["body"]["position"])
assert np.array_equal(camera.get_observation(), comp_trace[-1]["camera"])
assert body.get_termination() is True
assert np.array_equal(renv.render(), comp_trace[-1]["camera"])
renv.close()

# ---- the detached gripper -------------------------------------------------
client.acquire("gripper")
gripper = client.node("gripper")
left, right = client.node("gripper/left"), client.node("gripper/right")
assert gripper.descriptor["world_id"] is None
assert gripper.descriptor["children"] == {"left": "gripper/left", "right": "gripper/right"}
assert not (gripper.has_reward or gripper.has_termination_signal or gripper.has_truncation_signal)
assert gripper.action_space.shape == (1,) and gripper.post_environment_step_priorities == {50}
with client.operation("gripper", "reset"):
    gripper.reset(priority=50, seed=0)
with client.operation("gripper", "step"):
    gripper.set_next_action(np.array([0.0], np.float32))
    gripper.post_environment_step(0.01, priority=50)
assert float(gripper.get_observation()[0]) < 0.08
with client.operation("gripper", "reset"):
    gripper.reset(seed=0)  # the default priority 0 works too: the hooks declare one priority
assert np.allclose(gripper.get_observation(), [0.08])
# Close to 2 cm over five control steps of two 10 ms updates each.
for _ in range(5):
    with client.operation("gripper", "step"):
        gripper.set_next_action(np.array([0.02], np.float32))
        for _ in range(2):
            gripper.post_environment_step(0.01, priority=50)
width = float(gripper.get_observation()[0])
expected = 0.02 + 0.06 * math.exp(-0.1 / 0.05)
assert abs(width - expected) < 1e-6, (width, expected)
assert abs(float(left.get_observation()[0]) - expected / 2) < 1e-6
info = gripper.get_info()
assert list(info) == ["target_width"] and abs(info["target_width"] - 0.02) < 1e-8, info
# One finger on its own.
with client.operation("gripper", "step"):
    right.set_next_action(np.array([0.04], np.float32))
    right.post_environment_step(0.5, priority=50)
assert float(right.get_observation()[0]) > float(left.get_observation()[0]) + 0.01
client.release("gripper")
client.close()
print(f"ok pointmass_steps={len(toward)} first_reward={toward[0]:.3f} last_reward={toward[-1]:.3f} "
      f"away_last_reward={away[-1]:.3f} gripper_width={width:.5f}")
