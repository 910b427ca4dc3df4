"""One scenario over the conformance fixture registry, written against the
reference client's public API, run with either client module (the reference
`unienv_interface.remote` or our `unienv_remote`) against either server.
Every step records its outcome: the value (with exact types), or the error's
code and uncertainty, or the exception type; request counts show what the
boundary cache served.

Waiting is never a fixed sleep that a slow machine could outrun: where the
server must finish something first (a timed-out step, a dropped connection),
the scenario polls for it with a generous deadline.
"""

import time
from typing import Any, Callable, List, Tuple

import numpy as np
from unienv_interface.env_base.env import Env
from unienv_interface.world.node import WorldNode
from unienv_interface.world.world import World


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def connect(remote: Any, url: str, **options: Any) -> Any:
    """A client of `remote`; the reference client gets a request counter."""
    client = remote.RemoteClient.connect(url, **options)
    if not hasattr(type(client), "requests_sent"):
        original = client._request
        client._test_count = 0

        def counting(*args: Any, **kwargs: Any) -> Any:
            client._test_count += 1
            return original(*args, **kwargs)

        client._request = counting
    return client


def sent(client: Any) -> int:
    return client.requests_sent if hasattr(type(client), "requests_sent") else client._test_count


def requests_for(client: Any, fn: Callable[[], Any]) -> Tuple[Any, int]:
    """`fn()` and the number of requests it sent."""
    before = sent(client)
    value = fn()
    return value, sent(client) - before


def poll(fn: Callable[[], Any], accept: Callable[[Any], bool], deadline: float = 30.0, interval: float = 0.05) -> Any:
    """Calls `fn` until `accept(result)`; errors count as results."""
    end = time.monotonic() + deadline
    while True:
        try:
            result = ("ok", fn())
        except Exception as e:  # noqa: BLE001 - polled until the state settles
            result = ("exception", e)
        if accept(result) or time.monotonic() > end:
            if result[0] == "exception":
                raise result[1]
            return result[1]
        time.sleep(interval)


def not_busy(result: Any) -> bool:
    """The server has finished what a lost client left running."""
    if result[0] == "ok":
        return True
    code = getattr(result[1], "code", None)
    return code not in ("busy", "ownership_conflict")


def scenario(remote: Any, url: str) -> List[tuple]:
    out: List[tuple] = []
    RemoteError, Uncertain = remote.RemoteError, remote.UncertainOutcomeError

    def rec(name: str, fn: Callable[[], Any]) -> None:
        try:
            out.append((name, "ok", fn()))
        except Uncertain as e:
            out.append((name, "uncertain_outcome", e.code, e.uncertain))
        except RemoteError as e:
            out.append((name, "error", e.code, e.uncertain))
        except StopIteration:
            out.append((name, "exception", "StopIteration"))
        except Exception as e:  # noqa: BLE001 - the type is what we compare
            out.append((name, "exception", type(e).__name__))

    c = connect(remote, url)
    rec("discover", lambda: sorted((d["id"], d["kind"], d["revision"]) for d in c.discover()))
    rec("descriptors", lambda: sorted(c.descriptors))
    rec("session_id", lambda: isinstance(c.session_id, str) and len(c.session_id) > 0)
    rec("wrong_kind", lambda: c.env("arm"))
    rec("unknown_resource", lambda: c.env("nope"))

    # Env mode.
    env = c.env("counter")
    rec("counter.isinstance", lambda: (isinstance(env, Env), isinstance(c.world("composed/world"), World),
                                       isinstance(c.node("arm"), WorldNode)))
    rec("counter.attrs", lambda: (env.batch_size, env.render_mode, env.render_fps, env.metadata,
                                  env.descriptor["operations"]))
    rec("counter.spaces", lambda: (str(env.action_space), str(env.observation_space), str(env.context_space)))
    space = env.observation_space
    rec("counter.reset", lambda: env.reset(seed=2))
    rec("counter.step", lambda: env.step(f32(1.0, 2.0)))
    rec("counter.space.identity", lambda: env.observation_space is space)
    rec("counter.step.f64", lambda: env.step(np.array([0.5, 0.25])))
    rec("counter.step.int", lambda: env.step(np.array([1, 1], np.int64)))
    rec("counter.step.list", lambda: env.step([1.0, 1.0]))
    rec("counter.render", lambda: env.render())
    rec("counter.reset.noseed", lambda: env.reset())
    rec("counter.describe", lambda: c.describe("counter"))
    rec("counter.call", lambda: c.call("counter", "step", f32(0.5, 0.5)))
    rec("counter.proxy.same", lambda: c.env("counter") is env)

    # Batched envs.
    e3 = c.env("counter3")
    rec("counter3.batch", lambda: e3.batch_size)
    rec("counter3.reset", lambda: e3.reset(seed=1))
    rec("counter3.mask", lambda: e3.reset(mask=np.array([True, False, True]), seed=5))
    rec("counter3.step", lambda: e3.step(np.ones((3, 2), np.float32)))
    rec("counter3.step.row", lambda: e3.step(f32(1.0, -1.0)))
    rec("counter3.render", lambda: e3.render())

    # A composed env in env mode.
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
    rec("composed.get_node", lambda: comp.get_node("b").resource_id)
    rec("release.composed", lambda: c.release("composed"))

    # Component mode through RemoteWorldEnv, with the boundary cache.
    c2 = connect(remote, url)
    world = c2.world("composed/world")
    root = c2.node("composed/node")
    renv = remote.RemoteWorldEnv(world, root)
    rec("remote_worldenv.attrs", lambda: (world.world_timestep, root.control_timestep, root.has_reward,
                                          sorted(root.reset_priorities), sorted(root.pre_environment_step_priorities),
                                          root.world is world))
    rec("remote_worldenv.reset", lambda: renv.reset(seed=5))
    for i in range(2):
        rec(f"remote_worldenv.step{i}", lambda: renv.step(act))
    rec("remote_worldenv.getters.cached", lambda: requests_for(c2, lambda: (
        root.get_observation(), root.get_reward(), root.get_info(), root.get_termination(),
        root.get_truncation(), c2.node("composed/node/a").get_context())))
    rec("remote_worldenv.render.live", lambda: requests_for(c2, lambda: root.render()))

    def getters_inside_operation():
        with c2.operation("composed/world", "step"):
            return requests_for(c2, lambda: (root.get_observation(), root.get_reward()))

    rec("cache.inside_operation", getters_inside_operation)
    rec("cache.after_empty_operation", lambda: requests_for(c2, lambda: root.get_observation()))
    rec("remote_worldenv.reload", lambda: renv.reset(reload=True, seed=6))
    rec("remote_worldenv.render", lambda: renv.render())
    rec("remote_worldenv.spaces", lambda: str(renv.observation_space))
    def nested_operation():
        with c2.operation("composed/world", "step"):
            with c2.operation("composed/node", "step"):
                pass

    rec("nested_operation", nested_operation)
    # Ownership: the first client cannot take the domain meanwhile.
    rec("conflict.env", lambda: comp.step(act))
    rec("conflict.acquire", lambda: c.acquire("composed", "components"))
    renv.close()
    rec("after.release", lambda: comp.reset(seed=7))
    rec("release.composed.again", lambda: c.release("composed"))

    # Detached devices in components mode.
    dev = c2.node("devices")
    grip = c2.node("devices/arm%2Fgrip")
    rec("devices.world", lambda: (dev.world, sorted(dev.descriptor["children"])))
    rec("devices.get_node", lambda: dev.get_node("arm/grip") is grip)
    rec("devices.worldenv", lambda: remote.RemoteWorldEnv(world, dev))
    rec("devices.env_mode", lambda: c2.acquire("devices", "env"))
    rec("devices.acquire", lambda: c2.acquire("devices"))
    rec("devices.outside_op", lambda: dev.set_next_action(f32(1.0)))

    def reset_devices(seed):
        with c2.operation("devices", "reset"):
            dev.reset(seed=seed)
        return requests_for(c2, lambda: (dev.get_observation(), grip.get_observation(), grip.get_info(),
                                         dev.get_reward()))

    rec("devices.reset", lambda: reset_devices(3))

    def step_devices(a):
        with c2.operation("devices", "step"):
            dev.set_next_action(f32(a))
            grip.set_next_action(f32(a * 2))
            dev.post_environment_step(0.1)
            grip.post_environment_step(0.1)
        return requests_for(c2, lambda: (dev.get_observation(), grip.get_observation(), dev.get_termination(),
                                         grip.get_truncation()))

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
    rec("devices.cache.after_error", lambda: requests_for(c2, lambda: dev.get_reward()))
    rec("devices.faulted", lambda: step_devices(1.0))
    rec("devices.recover", lambda: reset_devices(0))
    rec("devices.after_recover", lambda: step_devices(1.0))
    rec("devices.describe", lambda: c2.describe("devices/hand"))
    rec("devices.release.proxy", lambda: dev.close())
    rec("devices.proxy.closed", lambda: dev.get_reward())
    rec("devices.proxy.new", lambda: c2.node("devices") is not dev)

    # Errors.
    rec("unsupported", lambda: c.call("counter", "close"))
    rec("broken_render", lambda: (c.env("broken_render").reset(), c.env("broken_render").render()))
    rec("bad_action", lambda: env.step({1: 2}))
    rec("bad_mode", lambda: c.acquire("counter", "bogus"))
    small = connect(remote, url, max_message_size=100_000)
    rec("large_render.render", lambda: (small.env("large_render").reset(), small.env("large_render").render()))
    rec("large_info.reset", lambda: small.env("large_info").reset())
    rec("large_info.step", lambda: small.env("large_info").step(f32(1.0, 1.0)))
    rec("large_info.faulted", lambda: small.env("large_info").step(f32(1.0, 1.0)))
    rec("large_info.recover", lambda: small.env("large_info").reset(seed=1))
    small.close()
    rec("closed.call", lambda: small.env("large_info").step(f32(1.0, 1.0)))
    rec("closed.flag", lambda: small.closed)

    rec("release.counters", lambda: (c.release("counter"), c.release("counter3")))

    # A client timeout: the step's outcome is uncertain and the connection closes.
    # The fixture sleeps 1.5 s on an all-99 action: 1 s times out surely, and
    # leaves the ordinary requests before it a wide margin on a busy machine.
    impatient = connect(remote, url, timeout=1.0)
    rec("timeout.reset", lambda: impatient.env("counter3").reset(seed=0))
    rec("timeout.step", lambda: impatient.env("counter3").step(np.full((3, 2), 99, np.float32)))
    rec("timeout.closed", lambda: impatient.closed)
    rec("timeout.after_close", lambda: impatient.discover())
    c3 = connect(remote, url)
    rec("timeout.after", lambda: poll(lambda: c3.env("counter3").reset(seed=1), not_busy))

    # A disconnect in the middle of an operation faults the domain.
    c4 = connect(remote, url)
    arm = c4.node("arm")
    op = c4.operation("arm", "step")
    op.__enter__()
    rec("disconnect.inside", lambda: arm.set_next_action(f32(1.0)))
    c4.close()
    arm3 = c3.node("arm")

    def step_arm():
        with c3.operation("arm", "step"):
            arm3.set_next_action(f32(1.0))

    rec("disconnect.faulted", lambda: poll(step_arm, not_busy))

    # Observers.
    observer = connect(remote, url)
    sub = observer.subscribe("counter", ["observation", "reward"])
    ctl = c3.env("counter")
    rec("observe.reset", lambda: ctl.reset(seed=1))

    def until(subscription, client, resource):
        # Latest-wins: skip events older than the controller's boundary.
        target = client.descriptors[resource]["sequence"]
        while True:
            event = subscription.next(timeout=30)
            if event["sequence"] >= target:
                return event

    def observed_step(a):
        ctl.step(f32(a, a))
        event = until(sub, c3, "counter")
        return {k: event[k] for k in ("version", "type", "resource_id", "kind", "sequence", "descriptor_revision",
                                      "data")}, sorted(event)

    for i in range(3):
        rec(f"observe.step{i}", lambda: observed_step(float(i)))
    rec("observe.subscription.attrs", lambda: (sub.resource_id, isinstance(sub.id, str)))
    sub.close()
    rec("observe.closed.next", lambda: sub.next(timeout=1))
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
    rec("observe.release.close_subscriptions", lambda: observer.release("composed", close_subscriptions=True))
    rec("observe.after_release.next", lambda: world_sub.next(timeout=1))
    rec("observe.timeout", lambda: observer.subscribe("counter").next(timeout=0.05))
    with observer.subscribe("counter3") as scoped:
        rec("observe.context_manager", lambda: scoped.resource_id)

    # Factories.
    rec("lazy.describe", lambda: c3.describe("lazy"))
    rec("lazy_composed.describe", lambda: c3.describe("lazy_composed/node/a%2Fb"))
    rec("lazy.reset", lambda: c3.env("lazy").reset(seed=9))

    for client in (c, c2, c3, observer):
        client.close()
    rec("closed.all", lambda: [client.closed for client in (c, c2, c3, observer)])
    with connect(remote, url) as scoped_client:
        rec("client.context_manager", lambda: scoped_client.env("counter").batch_size)
    rec("client.context_manager.closed", lambda: scoped_client.closed)
    return out
