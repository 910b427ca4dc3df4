"""A Python learner steps 16 remote Pendulum-v1 through
``RemoteVectorEnv`` spread over Ray actors on a local cluster, over TLS; the
same over plain ws://, and Gymnasium's AsyncVectorEnv, in one run.

    .venv-ref/bin/python benches/vector_ray_tls.py [--steps 2000] [--rounds 2]

The cluster is ``ray.cluster_utils.Cluster`` with two nodes on 127.0.0.1
(usage statistics and the dashboard off; RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
keeps every address on loopback, see python/tests/test_ray.py), each with 2
logical CPUs. 4 server actors (``unienv_remote.ray.start_servers``, 2 per node
by their resource requests), each hosting 4 ``FromGymnasiumEnv(Pendulum-v1)``
on our ``RemoteServer``; env ``j`` lives on actor ``j % 4``. The TLS actors
serve wss:// with a certificate made here by the openssl command (a throwaway
CA, ``python/tests/certs.py``), shipped to the actors; the learner trusts the
CA (``ca_file=``). Plain and TLS actors are separate sets, started once;
the configurations are measured in turn, ``--rounds`` times, interleaved
(plain, TLS, Async, plain, TLS, Async...), and each row reports the median
and the range.

Figures are env steps per second (vector steps x 16 / wall time, random
actions drawn beforehand, after 50 warm-up steps). Printed as a Markdown table
with the machine's load average before and after.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python" / "tests"))
import certs as made  # noqa: E402

N, ACTORS = 16, 4


def pendulums():
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv
    return {f"pendulum{i}": FromGymnasiumEnv(gymnasium.make("Pendulum-v1")) for i in range(N // ACTORS)}


def actions(steps: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.uniform(-2, 2, size=(steps, N, 1)).astype(np.float32)


def time_vector(envs, steps: int) -> float:
    acts = actions(steps + 50)
    envs.reset(seed=0)
    for a in acts[:50]:
        envs.step(a)
    start = time.perf_counter()
    for a in acts[50:]:
        envs.step(a)
    return steps * N / (time.perf_counter() - start)


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import gymnasium
    import ray
    from ray.cluster_utils import Cluster

    from unienv_remote import ray as uray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    load_before = load()
    folder = Path(tempfile.mkdtemp(prefix="uvr-bench-certs-"))
    c = made.make(folder)
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "node_ip_address": "127.0.0.1", "include_dashboard": False, "resources": {"node_a": 4}})
    rows = {}
    try:
        cluster.add_node(num_cpus=2, node_ip_address="127.0.0.1", resources={"node_b": 4})
        ray.init(address=cluster.address)

        def actors(**tls):
            return [s for node in ("node_a", "node_b")
                    for s in uray.start_servers(pendulums, ACTORS // 2, num_cpus=0, resources={node: 1}, **tls)]

        plain = actors()
        secure = actors(tls_cert=c.cert, tls_key=c.key)
        assert all(s.url.startswith("ws://127.0.0.1:") for s in plain)
        assert all(s.url.startswith("wss://127.0.0.1:") for s in secure)
        nodes = {s.node_id for s in plain + secure}
        configs = [
            ("`RemoteVectorEnv` over 4 Ray actors (2 nodes), plain `ws://`",
             lambda: uray.vector_env(plain)),
            ("`RemoteVectorEnv` over 4 Ray actors (2 nodes), TLS `wss://`",
             lambda: uray.vector_env(secure, ca_file=c.ca)),
            ("Gymnasium `AsyncVectorEnv` (16 subprocesses)",
             lambda: gymnasium.vector.AsyncVectorEnv([lambda: gymnasium.make("Pendulum-v1") for _ in range(N)])),
        ]
        for _ in range(args.rounds):
            for name, make_envs in configs:
                envs = make_envs()
                try:
                    rows.setdefault(name, []).append(time_vector(envs, args.steps))
                finally:
                    envs.close()
        for s in plain + secure:
            ray.kill(s.actor, no_restart=True)
    finally:
        ray.shutdown()
        cluster.shutdown()
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()
    print(f"\n16 x Pendulum-v1, {args.steps} vector steps, {args.rounds} rounds, env steps/s "
          f"(actors on {len(nodes)} Ray nodes)\n")
    print("| configuration | env steps/s (median) | range |")
    print("|---|---:|---:|")
    for name, rates in rows.items():
        print(f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f}–{max(rates):,.0f} |")
    print(f"\nload average (1, 5, 15 min): before {load_before}, after {load()}")


if __name__ == "__main__":
    main()
