"""unienv_remote.ray on a local two-node Ray cluster bound to 127.0.0.1
(usage statistics and dashboard off): server actors placed by resource
requests on different nodes, a RemoteVectorEnv over them that matches
Gymnasium's SyncVectorEnv, actor death reported as connection loss for that
actor's envs only, and a restarted actor serving again with the vector env
reconnected to it (RemoteVectorEnv.replace_server through restart_server);
with a RestartPolicy, a killed actor replaced by the vector env itself (and
an actor Ray restarted itself followed to its new URL), within the limits.

Skipped when ray is not installed, unless CI=true (then it must run).

Ray turns 127.0.0.1 into the machine's outward IP address when a driver
connects (`resolve_ip_for_localhost`) unless multi-node mode is off for this
machine: `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` (read when ray is imported) keeps
every node address, and so all traffic, on loopback.
"""

import os
import socket
import sys
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np
import pytest

try:
    import ray
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("ray is not installed (pip install ray); with CI=true this test fails instead",
                allow_module_level=True)

import gymnasium
from gymnasium.vector import SyncVectorEnv

from unienv_remote import UncertainOutcomeError, VectorEnvError
from unienv_remote import ray as uray


# The factory travels to the actors by value (this test module is not
# importable in Ray's worker processes).
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def cartpoles():
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv
    return {f"cartpole{i}": FromGymnasiumEnv(gymnasium.make("CartPole-v1")) for i in range(2)}


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False, "resources": {"sim_a": 1}})
    try:
        c.add_node(num_cpus=1, node_ip_address="127.0.0.1", resources={"sim_b": 1})
        ray.init(address=c.address)
        assert ray.util.get_node_ip_address() == "127.0.0.1"
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def _wait_until_refused(url: str, deadline_s: float = 120.0) -> None:
    """Returns once nothing listens at ``url``'s loopback port any more."""
    host, port = url[len("ws://"):].split("/")[0].rsplit(":", 1)
    assert host == "127.0.0.1", url
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=1.0).close()
        except OSError:
            return
        assert time.monotonic() < deadline, f"{url} still accepts connections"
        time.sleep(0.05)


def test_vector_env_over_ray_actors(cluster) -> None:
    a = uray.start_servers(cartpoles, 1, num_cpus=0, resources={"sim_a": 1})
    b = uray.start_servers(cartpoles, 1, num_cpus=0, resources={"sim_b": 1})
    servers = a + b
    assert a[0].node_id != b[0].node_id, "placed on different nodes by their resource requests"
    for s in servers:
        assert s.url.startswith("ws://127.0.0.1:"), s.url
        assert s.resource_ids == ["cartpole0", "cartpole1"]
    assert uray.addresses(servers) == [(a[0].url, "cartpole0"), (b[0].url, "cartpole0"),
                                       (a[0].url, "cartpole1"), (b[0].url, "cartpole1")]
    envs = uray.vector_env(servers, timeout=10.0)
    local = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(4)])
    try:
        obs, _ = envs.reset(seed=4)
        assert np.array_equal(obs, local.reset(seed=4)[0])
        local.action_space.seed(4)
        for _ in range(30):
            actions = local.action_space.sample()
            got, expected = envs.step(actions), local.step(actions)
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x, y)

        # The actor on node b dies: its envs (1 and 3) report connection
        # loss, the others' results are intact.
        ray.kill(b[0].actor, no_restart=True)
        # ray.kill returns at once, and a call made just after it may still
        # be served: wait until Ray reports the actor dead, then until its
        # server's loopback port refuses connections (Ray can report the
        # death before the process has exited).
        deadline = time.monotonic() + 120
        while True:
            try:
                ray.get(b[0].actor.info.remote(), timeout=120)
            except ray.exceptions.RayActorError:
                break
            assert time.monotonic() < deadline, "the killed actor still answers"
            time.sleep(0.05)
        _wait_until_refused(b[0].url)
        actions = local.action_space.sample()
        with pytest.raises(VectorEnvError) as caught:
            envs.step(actions)
        expected = local.step(actions)
        assert sorted(caught.value.errors) == [1, 3]
        for e in caught.value.errors.values():
            assert isinstance(e, (ConnectionError, UncertainOutcomeError)), repr(e)
        got = caught.value.result
        assert np.array_equal(got[0][[0, 2]], expected[0][[0, 2]])

        # A replacement actor, same placement, at a new URL: the vector env
        # follows it (envs 1 and 3 reconnected, 0 and 2 untouched); reset,
        # the reconnected envs match local ones reset with the same seeds.
        restarted = uray.restart_server(b[0], envs)
        assert restarted.node_id == b[0].node_id and restarted.url != b[0].url
        assert envs.addresses == uray.addresses([a[0], restarted])
        mask = envs.needs_reset()
        assert mask.tolist() == [False, True, False, True]
        actions = local.action_space.sample()
        with pytest.raises(VectorEnvError) as caught:
            envs.step(actions)
        assert caught.value.needs_reset == [1, 3] and not caught.value.errors
        # (nothing was sent to 1 and 3; 0 and 2 stepped as the local ones do)
        expected = local.step(actions)
        assert np.array_equal(caught.value.result[0][[0, 2]], expected[0][[0, 2]])
        obs, _ = envs.reset(seed=7, options={"reset_mask": mask})
        expected_obs, _ = local.reset(seed=7, options={"reset_mask": mask.copy()})
        assert np.array_equal(obs, expected_obs)
        for _ in range(20):
            actions = local.action_space.sample()
            got, expected = envs.step(actions), local.step(actions)
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x, y)
    finally:
        envs.close()
        local.close()
    ray.kill(a[0].actor, no_restart=True)
    ray.kill(restarted.actor, no_restart=True)


def test_vector_env_over_ray_actors_serving_tls(cluster, tmp_path) -> None:
    """Actors serve wss:// with a certificate shipped by the driver; the
    learner trusts its CA; a restarted actor serves TLS again."""
    import certs as made
    if not made.available():
        if os.environ.get("CI") == "true":
            raise RuntimeError("the openssl command is missing: the TLS tests need it to make certificates")
        pytest.skip("the openssl command is missing (it makes the test certificates)")
    c = made.make(tmp_path)
    servers = (uray.start_servers(cartpoles, 1, num_cpus=0, resources={"sim_a": 1}, tls_cert=c.cert, tls_key=c.key)
               + uray.start_servers(cartpoles, 1, num_cpus=0, resources={"sim_b": 1}, tls_cert=c.cert,
                                    tls_key=c.key))
    for s in servers:
        assert s.url.startswith("wss://127.0.0.1:"), s.url
    # Without the CA, the certificate is not trusted.
    with pytest.raises(ConnectionError, match="ca_file|--ca-file"):
        uray.vector_env(servers, timeout=10.0)
    envs = uray.vector_env(servers, timeout=10.0, ca_file=c.ca)
    local = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(4)])
    restarted = None
    try:
        assert np.array_equal(envs.reset(seed=11)[0], local.reset(seed=11)[0])
        local.action_space.seed(11)
        for _ in range(10):
            actions = local.action_space.sample()
            got, expected = envs.step(actions), local.step(actions)
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x, y)
        restarted = uray.restart_server(servers[0], envs)
        assert restarted.url.startswith("wss://127.0.0.1:") and restarted.url != servers[0].url
        mask = envs.needs_reset()
        assert mask.tolist() == [True, False, True, False]
        obs, _ = envs.reset(seed=2, options={"reset_mask": mask})
        assert np.array_equal(obs, local.reset(seed=2, options={"reset_mask": mask.copy()})[0])
        actions = local.action_space.sample()
        got, expected = envs.step(actions), local.step(actions)
        assert np.array_equal(got[0], expected[0])
    finally:
        envs.close()
        local.close()
        for s in [servers[1]] + ([restarted] if restarted is not None else [servers[0]]):
            ray.kill(s.actor, no_restart=True)


def _kill_and_wait(server: uray.ServerHandle) -> None:
    """Kills the actor and returns once Ray reports it dead and its port
    refuses connections (so that no step races its dying server)."""
    ray.kill(server.actor, no_restart=True)
    deadline = time.monotonic() + 120
    while True:
        try:
            ray.get(server.actor.info.remote(), timeout=120)
        except ray.exceptions.RayActorError:
            break
        assert time.monotonic() < deadline, "the killed actor still answers"
        time.sleep(0.05)
    _wait_until_refused(server.url)


def test_vector_env_heals_when_an_actor_dies(cluster) -> None:
    """vector_env(servers, restart=...): an actor killed mid-run is replaced
    by the vector env itself (a new actor, a new URL) within the next step;
    its two envs' cut episodes are reported once, the other actor's envs
    stay exactly Gymnasium's SyncVectorEnv; a second death within the
    restarter's window is given up as RestartError."""
    from unienv_remote import RestartError, RestartPolicy

    servers = (uray.start_servers(cartpoles, 1, num_cpus=0, resources={"sim_a": 1})
               + uray.start_servers(cartpoles, 1, num_cpus=0, resources={"sim_b": 1}))
    first = list(servers)
    restarter = uray.ActorRestarter(servers, RestartPolicy(max_restarts=1, window=600.0, timeout=120.0))
    envs = uray.vector_env(servers, timeout=10.0,
                           restart=RestartPolicy(max_restarts=3, window=600.0, timeout=120.0, resolve=restarter))
    local = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(4)])
    try:
        assert np.array_equal(envs.reset(seed=6)[0], local.reset(seed=6)[0])
        local.action_space.seed(6)
        intact = np.ones(4, dtype=bool)
        reports = {}
        for t in range(30):
            if t == 10:
                _kill_and_wait(first[1])
            actions = local.action_space.sample()
            got, expected = envs.step(actions), local.step(actions)
            if "restart" in got[4]:
                for i in np.flatnonzero(got[4]["_restart"]):
                    assert t == 10 and got[4]["restart_reason"][i] == "connection_lost"
                    reports[int(i)] = reports.get(int(i), 0) + 1
                    intact[i] = False
            for x, y in zip(got[:4], expected[:4]):
                assert np.array_equal(x[intact], y[intact]), t
        assert reports == {1: 1, 3: 1}
        assert servers[1].url != first[1].url and servers[1].node_id == first[1].node_id
        assert envs.addresses == uray.addresses(servers)
        assert not envs.needs_reset().any()

        _kill_and_wait(servers[1])
        actions = local.action_space.sample()
        with pytest.raises(VectorEnvError) as caught:
            envs.step(actions)
        expected = local.step(actions)
        assert sorted(caught.value.errors) == [1, 3]
        for e in caught.value.errors.values():
            assert isinstance(e, RestartError) and "max_restarts=1" in str(e), e
        assert np.array_equal(caught.value.result[0][[0, 2]], expected[0][[0, 2]])
    finally:
        envs.close()
        local.close()
        for s in servers:
            ray.kill(s.actor, no_restart=True)


def test_vector_env_follows_an_actor_that_ray_restarted(cluster) -> None:
    """An actor started with Ray's own max_restarts is restarted by Ray (a
    new server process, a new port): the restarter finds its new URL by
    asking the actor, and the vector env heals there."""
    from unienv_remote import RestartPolicy

    servers = uray.start_servers(cartpoles, 1, num_cpus=0, resources={"sim_a": 1}, max_restarts=1)
    actor, old_url = servers[0].actor, servers[0].url
    envs = uray.vector_env(servers, timeout=10.0, restart=RestartPolicy(max_restarts=1, timeout=120.0))
    local = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1") for _ in range(2)])
    try:
        assert np.array_equal(envs.reset(seed=8)[0], local.reset(seed=8)[0])
        local.action_space.seed(8)
        for _ in range(3):
            actions = local.action_space.sample()
            assert np.array_equal(envs.step(actions)[0], local.step(actions)[0])
        ray.kill(actor, no_restart=False)
        _wait_until_refused(old_url)
        got = envs.step(local.action_space.sample())
        assert got[4]["_restart"].tolist() == [True, True] and got[3].tolist() == [True, True]
        assert servers[0].actor is actor, "Ray restarted the same actor: no replacement was made"
        assert envs.addresses == uray.addresses(servers) and envs.addresses[0][0] == servers[0].url
        for _ in range(3):
            got = envs.step(local.action_space.sample())
            assert "restart" not in got[4]
    finally:
        envs.close()
        local.close()
        ray.kill(actor, no_restart=True)
