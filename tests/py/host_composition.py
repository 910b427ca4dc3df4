"""Runs WorldEnv compositions with the reference, for tests/interop/host.rs.

Reads a codec envelope from stdin: a list of scenarios, each a dict with
"world" (timestep, batch_size, step_dt), "root" (how the node tree is built,
see `build_node` and `build_env`) and "ops" (the calls to make). Writes a
codec envelope to stdout: for each scenario {"trace": [call, ...],
"results": [(op, value), ...]}. The Rust test builds the same scenarios with
its own WorldEnv / CombinedNode and nodes that behave like SimNode below.
"""
import sys

import numpy as np
from unienv_interface.backends import NumpyComputeBackend as B
from unienv_interface.remote import Codec
from unienv_interface.space import BoxSpace, DictSpace
from unienv_interface.space.space_utils.serialization_utils import space_to_json
from unienv_interface.world.env_composer import WorldEnv
from unienv_interface.world.node import WorldNode
from unienv_interface.world.nodes.combined_node import CombinedWorldNode
from unienv_interface.world.world import World

INF = np.inf
PHASES = {
    "reset": "reset_priorities",
    "reload": "reload_priorities",
    "after_reset": "after_reset_priorities",
    "after_reload": "after_reload_priorities",
    "pre_step": "pre_environment_step_priorities",
    "post_step": "post_environment_step_priorities",
}


def kw_names(kwargs):
    return ",".join(kwargs)


class SimWorld(World):
    backend = B
    device = None

    def __init__(self, spec, trace):
        self.world_timestep = spec["timestep"]
        self.batch_size = spec["batch_size"]
        self.step_dt = spec["step_dt"]
        self.trace = trace

    def step(self):
        self.trace.append("world.step()")
        return self.step_dt

    def reset(self, *, seed=None, mask=None, **kwargs):
        self.trace.append(f"world.reset(seed={seed}, kwargs={kw_names(kwargs)})")

    def reload(self, *, seed=None, mask=None, **kwargs):
        self.trace.append(f"world.reload(seed={seed}, kwargs={kw_names(kwargs)})")

    def after_reset(self, *, seed=None, mask=None, **kwargs):
        self.trace.append(f"world.after_reset(seed={seed}, kwargs={kw_names(kwargs)})")

    def after_reload(self, *, seed=None, mask=None, **kwargs):
        self.trace.append(f"world.after_reload(seed={seed}, kwargs={kw_names(kwargs)})")

    def close(self):
        self.trace.append("world.close()")


class SimNode(WorldNode):
    """A node whose outputs depend on what it received; every call is traced."""

    def __init__(self, spec, world, trace):
        self.spec = spec
        self.world = world
        self.trace = trace
        self.name = spec["name"]
        self.control_timestep = spec["control"]
        self.update_timestep = spec["update"]
        for phase, attr in PHASES.items():
            setattr(self, attr, set(spec["priorities"].get(phase, [])))
        self.has_reward = spec["reward"] is not None
        self.has_termination_signal = spec["term_after"] is not None
        self.has_truncation_signal = spec["trunc_after"] is not None
        self.render_mode = None if spec["render"] is None else "rgb_array"
        self.obs_dim = spec["obs_dim"]
        self.t = 0
        self.time = 0.0
        self.seed = None
        self.kw = {}
        self.last_action = None

    def log(self, call):
        self.trace.append(f"{self.name}.{call}")

    def batch(self, *shape):
        b = self.world.batch_size
        return shape if b is None else (b, *shape)

    @property
    def observation_space(self):
        kind = self.spec["obs"]
        if kind == "box":
            return BoxSpace(B, -INF, INF, np.float32, shape=self.batch(self.obs_dim))
        if kind == "dict":
            return DictSpace(B, {"progress": BoxSpace(B, -INF, INF, np.float32, shape=())})
        return None

    @property
    def context_space(self):
        kind = self.spec["ctx"]
        if kind == "box":
            return BoxSpace(B, 0, 1000, np.int64, shape=self.batch(1))
        if kind == "dict":
            return DictSpace(B, {"goal": BoxSpace(B, -INF, INF, np.float32, shape=(2,))})
        return None

    @property
    def action_space(self):
        kind = self.spec["act"]
        if kind == "box":
            return BoxSpace(B, -1.0, 1.0, np.float32, shape=self.batch(2))
        if kind == "int":
            return BoxSpace(B, 0, 10, np.int64, shape=self.batch())
        if kind == "dict":
            return DictSpace(B, {"mode": BoxSpace(B, 0, 3, np.int64, shape=())})
        return None

    def _reset(self, method, priority, seed, kwargs):
        self.log(f"{method}(priority={priority}, seed={seed}, kwargs={kw_names(kwargs)})")
        self.seed = seed
        self.kw = dict(kwargs)
        self.t = 0
        self.time = 0.0

    def reset(self, *, priority=0, seed=None, mask=None, **kwargs):
        self._reset("reset", priority, seed, kwargs)

    def reload(self, *, priority=0, seed=None, mask=None, **kwargs):
        self._reset("reload", priority, seed, kwargs)

    def after_reset(self, *, priority=0, mask=None):
        self.log(f"after_reset(priority={priority})")

    def after_reload(self, *, priority=0, mask=None):
        self.log(f"after_reload(priority={priority})")
        if self.spec["grow_obs"] is not None:
            self.obs_dim = self.spec["grow_obs"]

    def pre_environment_step(self, dt, *, priority=0):
        self.log(f"pre_environment_step({dt!r}, priority={priority})")
        if priority == max(self.pre_environment_step_priorities):
            self.t += 1
        if dt is not None:
            self.time += dt

    def post_environment_step(self, dt, *, priority=0):
        self.log(f"post_environment_step({dt!r}, priority={priority})")

    def set_next_action(self, action):
        self.log("set_next_action()")
        self.last_action = action

    def get_context(self):
        self.log("get_context()")
        if self.spec["ctx"] == "dict":
            return {"goal": np.array([self.seed or 0, self.t], dtype=np.float32)}
        return np.full(self.batch(1), self.seed or 0, dtype=np.int64)

    def get_observation(self):
        self.log("get_observation()")
        if self.spec["obs"] == "dict":
            return {"progress": np.float32(self.time)}
        obs = np.full(self.batch(self.obs_dim), self.t, dtype=np.float32)
        obs[..., 0] = self.time
        return obs

    def get_reward(self):
        self.log("get_reward()")
        kind = self.spec["reward"]
        if kind == "float":
            return self.t * 0.5
        if kind == "int":
            return self.t
        return np.full(self.batch(), self.t * 0.25, dtype=np.float32)

    def _signal(self, after):
        if self.world.batch_size is None:
            return self.t >= after
        flags = np.zeros(self.world.batch_size, dtype=bool)
        flags[0] = self.t >= after
        return flags

    def get_termination(self):
        self.log("get_termination()")
        return self._signal(self.spec["term_after"])

    def get_truncation(self):
        self.log("get_truncation()")
        return self._signal(self.spec["trunc_after"])

    def get_info(self):
        self.log("get_info()")
        if not self.spec["info"]:
            return None
        return {"t": self.t, "time": self.time, "last_action": self.last_action, "kw": self.kw, "seed": self.seed}

    def render(self):
        self.log("render()")
        kind = self.spec["render"]
        if kind == "rgb":
            return np.full((2, 2, 3), self.t, dtype=np.uint8)
        if kind == "dict":
            return {"left": np.full((1,), self.t, dtype=np.uint8), "right": None}
        return None

    def close(self):
        self.log("close()")


def build_node(spec, world, trace):
    if spec.get("kind") == "combined":
        children = [build_node(c, world, trace) for c in spec["children"]]
        root = None if spec["root_node"] is None else build_node(spec["root_node"], world, trace)
        return CombinedWorldNode(
            spec["name"], children, direct_return=spec["direct_return"], render_mode=spec["render_mode"],
            root_node=root,
        )
    return SimNode(spec, world, trace)


def build_env(spec, world, trace):
    root = spec["root"]
    if root.get("kind") == "nodes":
        nodes = [build_node(c, world, trace) for c in root["children"]]
        return WorldEnv(world, nodes, render_mode=root["render_mode"])
    return WorldEnv(world, build_node(root, world, trace))


def describe(env):
    node = env.node
    doc = lambda s: None if s is None else space_to_json(s)
    return {
        "action_space": doc(env.action_space),
        "observation_space": doc(env.observation_space),
        "context_space": doc(env.context_space),
        "render_mode": env.render_mode,
        "render_fps": env.render_fps,
        "control_timestep": env.control_timestep,
        "batch_size": env.batch_size,
        "node_control_timestep": node.control_timestep,
        "node_update_timestep": node.update_timestep,
        "flags": (node.has_reward, node.has_termination_signal, node.has_truncation_signal),
        "priorities": {phase: sorted(getattr(node, attr), reverse=True) for phase, attr in PHASES.items()},
    }


def run(scenario):
    trace = []
    world = SimWorld(scenario["world"], trace)
    env = build_env(scenario, world, trace)
    results = []
    for op in scenario["ops"]:
        name, arg = op[0], op[1]
        try:
            if name == "reset":
                value = env.reset(seed=arg["seed"], **arg["kwargs"])
            elif name == "step":
                value = env.step(arg)
            elif name == "render":
                value = env.render()
            elif name == "describe":
                value = describe(env)
            elif name == "close":
                value = env.close()
            else:
                raise RuntimeError(f"unknown op {name}")
        except TypeError:
            trace.append("error(TypeError)")
            value = "TypeError"
            name = "error"
        results.append((name, value))
    # A snapshot: the destructors of UniEnv's nodes call close() again later.
    return {"trace": list(trace), "results": results}


def main():
    codec = Codec()
    scenarios = codec.decode(sys.stdin.buffer.read())
    sys.stdout.buffer.write(codec.encode([run(s) for s in scenarios]))


if __name__ == "__main__":
    main()
