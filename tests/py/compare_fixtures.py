"""Runs the same scenario against two servers hosting the conformance fixture
registry (ours and the reference) with the reference client, and compares
every result: values with their exact types (numpy dtype and shape, tuple vs
list, int vs float), descriptors, error codes and uncertainty.

  python compare_fixtures.py OUR_URL REFERENCE_URL
"""
import math
import sys
import time

import numpy as np
from unienv_interface.remote import RemoteClient, RemoteWorldEnv
from unienv_interface.remote.errors import RemoteError, UncertainOutcomeError
from unienv_interface.space.spaces.graph import GraphInstance


def f32(*v):
    return np.array(v, np.float32)


def scenario(url):
    out = []

    def rec(name, fn):
        try:
            out.append((name, "ok", fn()))
        except UncertainOutcomeError as e:
            out.append((name, "uncertain_outcome", e.uncertain))
        except RemoteError as e:
            out.append((name, "error", e.code, e.uncertain))
        except Exception as e:  # noqa: BLE001 - the type is what we compare
            out.append((name, "exception", type(e).__name__))

    c = RemoteClient.connect(url)
    rec("discover", lambda: c.discover())

    env = c.env("counter")
    rec("counter.spaces", lambda: (str(env.action_space), str(env.observation_space), str(env.context_space)))
    rec("counter.reset", lambda: env.reset(seed=2))
    rec("counter.step", lambda: env.step(f32(1.0, 2.0)))
    rec("counter.step.f64", lambda: env.step(np.array([0.5, 0.25])))
    rec("counter.step.int", lambda: env.step(np.array([1, 1], np.int64)))
    rec("counter.render", lambda: env.render())
    rec("counter.reset.noseed", lambda: env.reset())
    rec("counter.descriptor", lambda: c.describe("counter"))

    e3 = c.env("counter3")
    rec("counter3.reset", lambda: e3.reset(seed=1))
    rec("counter3.mask", lambda: e3.reset(mask=np.array([True, False, True]), seed=5))
    rec("counter3.step", lambda: e3.step(np.ones((3, 2), np.float32)))
    rec("counter3.step.row", lambda: e3.step(f32(1.0, -1.0)))
    rec("counter3.render", lambda: e3.render())

    comp = c.env("composed")
    act = {"a": f32(1.0), "b": f32(2.0)}
    rec("composed.reset", lambda: comp.reset(seed=1))
    for i in range(3):
        rec(f"composed.step{i}", lambda: comp.step(act))
    rec("composed.render", lambda: comp.render())
    rec("composed.reload", lambda: comp.reload(seed=2))
    rec("composed.spaces", lambda: (str(comp.observation_space), str(comp.action_space)))
    rec("composed.step.after.reload", lambda: comp.step(act))
    rec("composed.reset.kw", lambda: comp.reset(seed=3, pernode_kwargs={"a": {}}))
    # The world resets, then the combined node refuses the unknown keyword:
    # an execution error after the mutation started (uncertain, faulted).
    rec("composed.reset.badkw", lambda: comp.reset(bogus=1))
    rec("composed.faulted", lambda: comp.step(act))
    rec("composed.reset.recover", lambda: comp.reset(seed=4))
    rec("composed.descriptors", lambda: c._request("describe", "composed"))
    rec("release.composed", lambda: c.release("composed"))

    # Client-side composition in components mode (the reference RemoteWorldEnv).
    c2 = RemoteClient.connect(url)
    world = c2.world("composed/world")
    root = c2.node("composed/node")
    renv = RemoteWorldEnv(world, root)
    rec("remote_worldenv.reset", lambda: renv.reset(seed=5))
    for i in range(2):
        rec(f"remote_worldenv.step{i}", lambda: renv.step(act))
    rec("remote_worldenv.getters", lambda: (root.get_observation(), root.get_reward(), root.get_info(),
                                          c2.node("composed/node/a").get_context()))
    rec("remote_worldenv.reload", lambda: renv.reset(reload=True, seed=6))
    rec("remote_worldenv.render", lambda: renv.render())
    rec("remote_worldenv.spaces", lambda: str(renv.observation_space))
    # Ownership: the first client cannot take the domain meanwhile.
    rec("conflict.env", lambda: comp.step(act))
    rec("conflict.acquire", lambda: c.acquire("composed", "components"))
    renv.close()
    rec("after.release", lambda: comp.reset(seed=7))
    rec("release.composed.again", lambda: c.release("composed"))

    # Detached devices in components mode.
    dev = c2.node("devices")
    grip = c2.node("devices/arm%2Fgrip")
    rec("devices.env_mode", lambda: c2.acquire("devices", "env"))
    rec("devices.acquire", lambda: c2.acquire("devices"))
    rec("devices.outside_op", lambda: dev.set_next_action(f32(1.0)))

    def reset_devices(seed):
        with c2.operation("devices", "reset"):
            dev.reset(seed=seed)
        return (dev.get_observation(), grip.get_observation(), grip.get_info(), dev.get_reward())

    rec("devices.reset", lambda: reset_devices(3))

    def step_devices(a):
        with c2.operation("devices", "step"):
            dev.set_next_action(f32(a))
            grip.set_next_action(f32(a * 2))
            dev.post_environment_step(0.1)
            grip.post_environment_step(0.1)
        return (dev.get_observation(), grip.get_observation(), dev.get_termination(), grip.get_truncation())

    rec("devices.step", lambda: step_devices(2.0))
    rec("devices.step2", lambda: step_devices(4.0))

    def child_only_reset():
        with c2.operation("devices", "reset"):
            grip.reset(seed=1)

    rec("devices.child_reset_only", child_only_reset)

    def wrong_hook():
        with c2.operation("devices", "reset"):
            dev.set_next_action(f32(1.0))

    rec("devices.step_hook_in_reset", wrong_hook)
    rec("devices.faulted", lambda: step_devices(1.0))
    rec("devices.recover", lambda: reset_devices(0))
    rec("devices.after_recover", lambda: step_devices(1.0))
    rec("devices.descriptors", lambda: c2._request("describe", "devices/hand"))

    # Errors.
    rec("unsupported", lambda: c.call("counter", "close"))
    rec("broken_render", lambda: (c.env("broken_render").reset(), c.env("broken_render").render()))
    small = RemoteClient.connect(url, max_message_size=100_000)
    rec("large_render.render", lambda: (small.env("large_render").reset(), small.env("large_render").render()))
    rec("large_info.reset", lambda: small.env("large_info").reset())
    rec("large_info.step", lambda: small.env("large_info").step(f32(1.0, 1.0)))
    rec("large_info.faulted", lambda: small.env("large_info").step(f32(1.0, 1.0)))
    rec("large_info.recover", lambda: small.env("large_info").reset(seed=1))
    small.close()

    rec("release.counters", lambda: (c.release("counter"), c.release("counter3")))

    # A client timeout: the step's outcome is uncertain and the connection closes.
    impatient = RemoteClient.connect(url, timeout=0.5)
    rec("timeout.reset", lambda: impatient.env("counter3").reset(seed=0))
    rec("timeout.step", lambda: impatient.env("counter3").step(np.full((3, 2), 99, np.float32)))
    rec("timeout.closed", lambda: impatient.closed)
    time.sleep(1.6)
    c3 = RemoteClient.connect(url)
    rec("timeout.after", lambda: c3.env("counter3").reset(seed=1))

    # A disconnect in the middle of an operation faults the domain.
    c4 = RemoteClient.connect(url)
    arm = c4.node("arm")
    op = c4.operation("arm", "step")
    op.__enter__()
    rec("disconnect.inside", lambda: arm.set_next_action(f32(1.0)))
    c4.close()
    time.sleep(0.2)
    arm3 = c3.node("arm")

    def step_arm():
        with c3.operation("arm", "step"):
            arm3.set_next_action(f32(1.0))

    rec("disconnect.faulted", step_arm)

    # Observers.
    observer = RemoteClient.connect(url)
    sub = observer.subscribe("counter", ["observation", "reward"])
    ctl = c3.env("counter")
    rec("observe.reset", lambda: ctl.reset(seed=1))

    def until(subscription, client, resource):
        # Latest-wins: skip events older than the controller's boundary.
        target = client.descriptors[resource]["sequence"]
        while True:
            event = subscription.next(timeout=5)
            if event["sequence"] >= target:
                return event

    def observed_step(a):
        ctl.step(f32(a, a))
        event = until(sub, c3, "counter")
        return {k: event[k] for k in ("type", "resource_id", "kind", "sequence", "descriptor_revision", "data")}

    for i in range(3):
        rec(f"observe.step{i}", lambda: observed_step(float(i)))
    sub.close()
    world_sub = observer.subscribe("composed/world")
    node_sub = observer.subscribe("composed/node/b")
    c3.release("counter")
    cenv = c3.env("composed")
    rec("observe.composed.reset", lambda: cenv.reset(seed=2))

    def observed_composed_step():
        cenv.step(act)
        w = until(world_sub, c3, "composed")
        n = until(node_sub, c3, "composed")
        return ({k: w[k] for k in ("kind", "sequence", "data")}, {k: n[k] for k in ("kind", "sequence", "data")})

    rec("observe.composed.step", observed_composed_step)

    # Factories.
    rec("lazy.describe", lambda: c3.describe("lazy"))
    rec("lazy_composed.describe", lambda: c3._request("describe", "lazy_composed/node/a%2Fb"))
    rec("lazy.reset", lambda: c3.env("lazy").reset(seed=9))

    for client in (c, c2, c3, observer):
        client.close()
    return out


def same(a, b, path="$"):
    if isinstance(a, GraphInstance) or isinstance(b, GraphInstance):
        if type(a) is not type(b):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        for f in ("n_nodes", "n_edges", "nodes_features", "edges_features", "edges"):
            d = same(getattr(a, f), getattr(b, f), f"{path}.{f}")
            if d:
                return d
        return None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        if a.dtype.str != b.dtype.str or a.shape != b.shape:
            return f"{path}: array {a.dtype.str}{a.shape} vs {b.dtype.str}{b.shape}"
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a.flat, b.flat)):
                d = same(x, y, f"{path}[{i}]")
                if d:
                    return d
            return None
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            return f"{path}: array values {a!r} vs {b!r}"
        return None
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {a!r} vs {type(b).__name__} {b!r}"
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return f"{path}: keys {list(a.keys())} vs {list(b.keys())}"
        for k in a:
            d = same(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return None
    if a != b:
        return f"{path}: {a!r} vs {b!r}"
    return None


def main():
    ours, reference = sys.argv[1], sys.argv[2]
    got, want = scenario(ours), scenario(reference)
    failures = []
    for g, w in zip(got, want):
        d = same(g, w, g[0])
        if d:
            failures.append(d)
    if len(got) != len(want):
        failures.append(f"{len(got)} results vs {len(want)}")
    print(f"{len(got)} results compared")
    if failures:
        print("MISMATCHES (ours vs reference):")
        for f in failures:
            print("  " + f[:2000])
        sys.exit(1)
    # The scenario must have exercised both outcomes.
    kinds = {r[1] for r in got}
    assert {"ok", "error", "uncertain_outcome"} <= kinds, kinds


if __name__ == "__main__":
    main()
