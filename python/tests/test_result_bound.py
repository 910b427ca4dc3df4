"""A hosted call's result is checked against the server's ``max_message_size``
while it is converted: an oversized result is refused as the encoder refuses
it (``serialization_error``, uncertain, the domain faulted until a reset)
without ever being copied in full.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from unienv_interface.remote import RemoteClient as RefClient
from unienv_interface.remote.errors import RemoteError

import unienv_remote

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py"))
from ref_fixture_server import CounterEnv  # noqa: E402

STEP = np.zeros(2, np.float32)
LIMIT = 1 << 20


class Returning(CounterEnv):
    """Steps return ``self.payload`` as the observation while it is set."""

    def __init__(self):
        super().__init__()
        self.payload = None

    def step(self, action):
        result = super().step(action)
        if self.payload is None:
            return result
        return (self.payload, *result[1:])


@pytest.mark.parametrize(
    "size",
    [
        64 << 20,  # refused while converted (its data alone is over the limit)
        LIMIT - 16,  # converted in full, refused by the encoder (its header tips it over)
    ],
)
def test_an_oversized_result_is_an_uncertain_serialization_error_that_faults(size):
    env = Returning()
    server = unienv_remote.RemoteServer(max_message_size=LIMIT, idle_timeout=None)
    server.register("env", env)
    try:
        client = RefClient.connect(server.listen("127.0.0.1", 0))
        remote = client.env("env")
        remote.reset(seed=1)
        env.payload = np.ones(size, np.uint8)
        with pytest.raises(RemoteError) as refused:
            remote.step(STEP)
        assert refused.value.code == "serialization_error" and refused.value.uncertain
        assert "exceeds the limit of 1048576 bytes" in str(refused.value)
        env.payload = None
        with pytest.raises(RemoteError) as faulted:
            remote.step(STEP)
        assert faulted.value.code == "faulted"
        assert "encoding the result of step() on 'env'" in str(faulted.value)
        remote.reset(seed=2)
        obs, *_ = remote.step(np.ones(2, np.float32))
        assert obs["position"].tolist() == [3.0, 3.0]
        client.close()
    finally:
        server.close()


def test_bytes_and_strings_count_too():
    env = Returning()
    server = unienv_remote.RemoteServer(max_message_size=LIMIT, idle_timeout=None)
    server.register("env", env)
    try:
        client = RefClient.connect(server.listen("127.0.0.1", 0))
        remote = client.env("env")
        for payload in ([b"x" * (LIMIT // 2)] * 3, {"text": "y" * (2 * LIMIT)}, {"k" * (2 * LIMIT): 1}):
            remote.reset(seed=1)
            env.payload = payload
            with pytest.raises(RemoteError) as refused:
                remote.step(STEP)
            assert refused.value.code == "serialization_error" and refused.value.uncertain
        client.close()
    finally:
        server.close()


PEAK = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from ref_fixture_server import CounterEnv
    from unienv_interface.remote import RemoteClient
    from unienv_interface.remote.errors import RemoteError
    import unienv_remote

    big = np.ones(256 << 20, np.uint8)  # touched: resident in both runs
    oversized = sys.argv[1] == "oversized"

    class Env(CounterEnv):
        def step(self, action):
            obs = big if oversized else big[: 1 << 10]
            return (obs, *super().step(action)[1:])

    server = unienv_remote.RemoteServer(max_message_size=1 << 20, idle_timeout=None)
    server.register("env", Env())
    client = RemoteClient.connect(server.listen("127.0.0.1", 0))
    remote = client.env("env")
    code = "ok"
    for _ in range(3):
        remote.reset(seed=1)
        try:
            remote.step(np.zeros(2, np.float32))
        except RemoteError as e:
            code = e.code
    client.close()
    server.close()
    print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """
)


def peak_kib(mode):
    fixtures = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "py")
    out = subprocess.run(
        [sys.executable, "-c", PEAK, mode, fixtures], capture_output=True, text=True, timeout=120, check=True
    )
    code, rss = out.stdout.split()
    return code, int(rss)


def test_an_oversized_result_is_never_copied():
    code, within = peak_kib("within")
    assert code == "ok"
    code, oversized = peak_kib("oversized")
    assert code == "serialization_error"
    # A full copy of the 256 MiB array would add 256 MiB (262,144 KiB).
    assert oversized - within < 40 << 10, (within, oversized)


class Rendering(CounterEnv):
    """Renders ``self.frame``."""

    def __init__(self, frame):
        super().__init__()
        self.frame = frame

    def render(self):
        return self.frame


def test_an_oversized_snapshot_field_is_a_subscription_error():
    """Snapshot reads (an env's render, a node's getters) are bounded too."""
    env = Rendering(np.ones(16 << 20, np.uint8))
    server = unienv_remote.RemoteServer(max_message_size=LIMIT, idle_timeout=None)
    server.register("env", env)
    try:
        url = server.listen("127.0.0.1", 0)
        controller, observer = RefClient.connect(url), RefClient.connect(url)
        subscription = observer.subscribe("env", ["render"])
        remote = controller.env("env")
        remote.reset(seed=1)
        remote.step(STEP)
        with pytest.raises(RemoteError) as refused:
            subscription.next(timeout=30)
        # As when the encoder refuses a snapshot over the session's limit.
        assert refused.value.code == "snapshot_error"
        assert "exceeds the limit of 1048576 bytes" in str(refused.value)
        # The controller is unaffected.
        obs, *_ = remote.step(np.ones(2, np.float32))
        assert obs["position"].tolist() == [2.0, 2.0]
        controller.close()
        observer.close()
    finally:
        server.close()
