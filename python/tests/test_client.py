"""Client behaviour beyond the shared transcript: eviction and revival,
the GIL released while waiting, bearer tokens, values independent of the
cache, unienv's wrappers over our proxies."""

import threading

import numpy as np
import pytest
import unienv_interface.remote as reference
from unienv_interface.env_base.env import Env
from unienv_interface.wrapper.frame_stack import FrameStackWrapper
from unienv_interface.wrapper.gym_compat import ToGymnasiumEnv
from unienv_interface.wrapper.time_limit import TimeLimitWrapper

import unienv_remote as ours
from compare import assert_same_transcripts
from conftest import Server, our_binary
from transcript import connect, f32, poll, requests_for

IDLE = 0.3
NODE = "lazy_composed/node/a%2Fb"


def revival_scenario(remote, url):
    """Factory domains are evicted when idle and revived on next access with
    a new revision: descriptors refresh, spaces are rebuilt only when their
    serialized form changes."""
    out = []
    client = connect(remote, url)
    node = client.node(NODE)
    before = client.descriptors[NODE]["revision"]
    space = node.observation_space
    out.append(("before", before, str(space)))
    client.describe(NODE)
    out.append(("describe.keeps.identity", node.observation_space is space))
    # Each describe is a use: wait past the idle timeout between attempts.
    after = poll(lambda: client.describe(NODE)["revision"], lambda r: r[0] == "ok" and r[1] > before,
                 interval=IDLE * 2)
    out.append(("revived", after > before))
    out.append(("space.rebuilt", node.observation_space is not space, str(node.observation_space)))
    out.append(("proxy.descriptor", node.descriptor["revision"] == after))
    lazy = client.env("lazy")
    out.append(("lazy.reset", lazy.reset(seed=3)))
    out.append(("lazy.step", lazy.step(f32(1.0, 1.0))))
    client.close()
    return out


@pytest.mark.parametrize("server_kind", ["ours", "reference"])
def test_eviction_and_revival(servers, server_kind):
    want = revival_scenario(reference, servers(server_kind, idle_timeout=IDLE).url)
    got = revival_scenario(ours, servers(server_kind, idle_timeout=IDLE).url)
    assert_same_transcripts(got, want, f"revival against the {server_kind} server")
    assert got[2] == ("revived", True) and got[3][1] is True


def test_the_gil_is_released_while_waiting(our_server):
    """A thread blocked in Subscription.next (no deadline) must not stop the
    main thread from running Python code that produces the awaited snapshot."""
    observer = ours.RemoteClient.connect(our_server.url)
    controller = ours.RemoteClient.connect(our_server.url)
    env = controller.env("bench_state")
    env.reset()
    subscription = observer.subscribe("bench_state", ["observation"])
    received = []
    waiting = threading.Event()

    def observe():
        waiting.set()
        received.append(subscription.next())

    thread = threading.Thread(target=observe, daemon=True)
    thread.start()
    waiting.wait()
    # Python work on this thread while the other waits in Rust: it steps
    # until the observer has its snapshot (latest-wins, so one is enough).
    steps = 0
    while thread.is_alive() and steps < 10_000:
        env.step(np.ones(4, np.float32))
        steps += 1
        thread.join(timeout=0.01)
    assert not thread.is_alive() and received and received[0]["resource_id"] == "bench_state"
    subscription.close()
    observer.close()
    controller.close()


def test_release_with_close_subscriptions_wakes_a_waiting_thread(our_server):
    client = ours.RemoteClient.connect(our_server.url)
    subscription = client.subscribe("counter3", ["observation"])
    outcome = []
    waiting = threading.Event()

    def observe():
        waiting.set()
        try:
            outcome.append(subscription.next())
        except StopIteration:
            outcome.append("ended")

    thread = threading.Thread(target=observe, daemon=True)
    thread.start()
    waiting.wait()
    client.acquire("counter3")
    client.release("counter3", close_subscriptions=True)
    thread.join(timeout=30)
    assert outcome == ["ended"]
    assert subscription.id not in client._subscriptions
    subscription.close()  # idempotent, no request on an ended stream
    client.close()


def test_close_from_another_thread_ends_a_waiting_next(our_server):
    client = ours.RemoteClient.connect(our_server.url)
    subscription = client.subscribe("hand")
    outcome = []
    waiting = threading.Event()

    def observe():
        waiting.set()
        outcome.extend(subscription)  # iterates until the stream ends

    thread = threading.Thread(target=observe, daemon=True)
    thread.start()
    waiting.wait()
    subscription.close()
    thread.join(timeout=30)
    assert not thread.is_alive() and outcome == []
    with pytest.raises(StopIteration):
        subscription.next(timeout=0)
    client.close()


def test_bearer_token():
    server = Server("ours", [str(our_binary()), "serve", "--fixtures", "--addr", "127.0.0.1:0",
                             "--token", "s3cret"])
    try:
        with pytest.raises(ConnectionError):
            ours.RemoteClient.connect(server.url)
        with pytest.raises(ConnectionError):
            ours.RemoteClient.connect(server.url, token="wrong")
        with ours.RemoteClient.connect(server.url, token="s3cret") as client:
            assert client.env("counter").reset(seed=1)[2] == {"seed": 1}
    finally:
        server.stop()


def test_connection_refused_is_the_reference_exception_class():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on the port any more.
    for remote in (reference, ours):
        with pytest.raises(ConnectionRefusedError):
            remote.RemoteClient.connect(f"ws://127.0.0.1:{port}")


def test_the_reference_websocket_transport_is_accepted():
    """The reference's documented token pattern works unchanged."""
    server = Server("ours", [str(our_binary()), "serve", "--fixtures", "--addr", "127.0.0.1:0",
                             "--token", "s3cret"])
    try:
        for remote in (reference, ours):
            transport = reference.WebSocketTransport.connect(
                server.url, additional_headers={"Authorization": "Bearer s3cret"})
            with remote.RemoteClient(transport, timeout=10.0) as client:
                assert client.env("counter").reset(seed=2)[2] == {"seed": 2}
                client.release("counter")
        with pytest.raises(TypeError):
            ours.RemoteClient(reference.MemoryTransport.pair()[0])
    finally:
        server.stop()


def test_constructor_options(our_server):
    client = ours.RemoteClient(our_server.url, timeout=5.0, max_message_size=1 << 20)
    assert client.timeout == 5.0 and client.codec.max_message_size == 1 << 20
    assert client.backend.simplified_name == "numpy" and client.device is None
    client.close()
    with pytest.raises(ValueError):
        ours.RemoteClient.connect(our_server.url, max_message_size=4)
    with pytest.raises(TypeError):
        ours.RemoteClient(object())


def test_cached_values_are_independent_copies(our_server):
    client = ours.RemoteClient.connect(our_server.url)
    node = client.node("hand")
    with client.operation("hand", "reset"):
        node.reset(seed=4)
    first, count = requests_for(client, node.get_observation)
    assert count == 0 and first.flags.writeable
    first[...] = -1
    second = node.get_observation()
    assert second[0] == 4.0
    snapshot = client._native.boundary_snapshot("hand")
    assert snapshot["data"]["observation"][0] == 4.0
    client.release("hand")
    client.close()


def test_proxies_are_unienv_instances_and_wrappers_accept_them(our_server):
    client = ours.RemoteClient.connect(our_server.url)
    env = client.env("counter")
    assert isinstance(env, Env)
    # Gymnasium's API over the remote env.
    gym_env = ToGymnasiumEnv(env)
    obs, info = gym_env.reset(seed=1)
    assert gym_env.observation_space.contains(obs)
    assert obs["context"].tolist() == [1.0, 1.0] and obs["position"].tolist() == [1.0, 1.0]
    obs, reward, terminated, truncated, info = gym_env.step(np.array([0.5, 0.5], np.float32))
    assert reward == pytest.approx(3.0) and terminated is False and info["pair"] == (b"abc", [1, None])
    # Time limits.
    limited = TimeLimitWrapper(env, time_limit=2)
    limited.reset(seed=0)
    assert limited.step(f32(0.0, 0.0))[3] is False
    assert limited.step(f32(0.0, 0.0))[3] is True
    # Frame stacking.
    stacked = FrameStackWrapper(env, obs_stack_size=3)
    _, obs, _ = stacked.reset(seed=0)
    obs, *_ = stacked.step(f32(1.0, 1.0))
    # The wrapper keeps the last obs_stack_size + 1 observations.
    assert obs["position"].tolist() == [[0.0, 0.0]] * 3 + [[1.0, 1.0]]
    client.release("counter")
    client.close()


def test_wrappers_give_the_same_results_with_both_clients(servers):
    url = servers("ours").url

    def run(remote):
        client = remote.RemoteClient.connect(url)
        env = client.env("counter")
        out = []
        gym_env = ToGymnasiumEnv(TimeLimitWrapper(env, time_limit=3))
        out.append(gym_env.reset(seed=2))
        for _ in range(4):
            out.append(gym_env.step(np.array([1.0, 0.5], np.float32)))
            if out[-1][2] or out[-1][3]:
                out.append(gym_env.reset(seed=1))
        stacked = FrameStackWrapper(env, obs_stack_size=2)
        out.append(stacked.reset(seed=0))
        out.append(stacked.step(f32(1.0, 2.0)))
        client.release("counter")
        client.close()
        return [(str(i), r) for i, r in enumerate(out)]

    assert_same_transcripts(run(ours), run(reference), "wrappers over both clients")
