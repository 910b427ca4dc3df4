"""Python simulators served by the reference server and by ours, stepped by the
reference client and by ours (BENCHMARKS.md, "Python host").

    .venv-ref/bin/python benches/python_server.py [--steps N] [--seconds S]

Each server runs in its own process (``python benches/python_server.py host
MODULE``) hosting the fixture ``BenchEnv``s (``bench_state``, ``bench_image``,
``bench_batch64``) and ``FromGymnasiumEnv`` of Gymnasium's ``Pendulum-v1`` and
MuJoCo's ``HalfCheetah-v5`` (plus a second HalfCheetah for the concurrency
figure); each client runs here, one step at a time, and reports the median of
five rounds of µs per step. Then: two HalfCheetah domains stepped concurrently
by two threads (our client, which releases the GIL while it waits) against one.
"""

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))

SIMS = ["Pendulum-v1", "HalfCheetah-v5"]
ENVS = ["bench_state", "bench_image", "bench_batch64"] + SIMS


def make_sim(name):
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv

    return FromGymnasiumEnv(gymnasium.make(name))


def host(module):
    from ref_fixture_server import BenchEnv

    server = importlib.import_module(module).RemoteServer(idle_timeout=None)
    # One copy per client, so that both clients hold their controls at once.
    for client in ("reference", "ours"):
        server.register(f"bench_state@{client}", BenchEnv(None, None))
        server.register(f"bench_image@{client}", BenchEnv(None, (84, 84, 3)))
        server.register(f"bench_batch64@{client}", BenchEnv(64, (84, 84, 3)))
        for name in SIMS:
            server.register(f"{name}@{client}", make_sim(name))
    server.register("HalfCheetah-v5#2", make_sim("HalfCheetah-v5"))
    print(server.listen("127.0.0.1", 0), flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    server.close()


class Hosted:
    def __init__(self, module):
        self.process = subprocess.Popen([sys.executable, __file__, "host", module], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.url = self.process.stdout.readline().strip()

    def close(self):
        self.process.stdin.close()
        self.process.wait(30)


def action_for(env, rng):
    space = env.action_space
    if np.all(np.isfinite(space.low)):
        return rng.uniform(space.low, space.high).astype(space.dtype)
    return np.ones(space.shape, space.dtype)


def timed(env, actions, steps):
    """µs per step of `steps` steps."""
    start = time.perf_counter()
    for i in range(steps):
        env.step(actions[i % len(actions)])
    return (time.perf_counter() - start) / steps * 1e6


def prepared(env):
    rng = np.random.default_rng(0)
    actions = [action_for(env, rng) for _ in range(64)]
    env.reset(seed=0)
    timed(env, actions, 20)  # warm up
    return env, actions


def local_envs():
    from ref_fixture_server import BenchEnv

    envs = {"bench_state": BenchEnv(None, None), "bench_image": BenchEnv(None, (84, 84, 3)),
            "bench_batch64": BenchEnv(64, (84, 84, 3))}
    envs.update({name: make_sim(name) for name in SIMS})
    return envs


def client_class(which):
    if which == "reference":
        from unienv_interface.remote import RemoteClient
    else:
        from unienv_remote import RemoteClient
    return RemoteClient


def throughput(url, ids, seconds):
    """Steps per second of all threads together, one thread per resource."""
    from unienv_remote import RemoteClient

    clients = [RemoteClient.connect(url) for _ in ids]
    envs = [c.env(i) for c, i in zip(clients, ids)]
    for env in envs:
        env.reset(seed=0)
        env.step(np.zeros(env.action_space.shape, env.action_space.dtype))
    counts = [0] * len(ids)
    stop = threading.Event()
    start_barrier = threading.Barrier(len(ids) + 1)

    def run(k):
        env = envs[k]
        action = np.zeros(env.action_space.shape, env.action_space.dtype)
        start_barrier.wait()
        while not stop.is_set():
            env.step(action)
            counts[k] += 1

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(ids))]
    for t in threads:
        t.start()
    start_barrier.wait()
    begin = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - begin
    for c in clients:
        c.close()
    return sum(counts) / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100, help="steps per measurement")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median reported)")
    parser.add_argument("--seconds", type=float, default=2.0, help="per throughput measurement")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; {args.rounds} interleaved rounds of {args.steps} steps, median")
    ref_server, our_server = "unienv_interface.remote", "unienv_remote"
    hosts = {ref_server: Hosted(ref_server), our_server: Hosted(our_server)}
    combos = [(srv, cli) for srv in (ref_server, our_server) for cli in ("reference", "ours")]
    try:
        clients = {combo: client_class(combo[1]).connect(hosts[combo[0]].url) for combo in combos}
        local = local_envs()
        prepared_envs = {}
        for name in ENVS:
            prepared_envs[("local", name)] = prepared(local[name])
            for combo in combos:
                prepared_envs[(combo, name)] = prepared(clients[combo].env(f"{name}@{combo[1]}"))
        samples = {key: [] for key in prepared_envs}
        # Rounds interleave every configuration, so that load from other
        # processes on this machine falls on all of them alike.
        for _ in range(args.rounds):
            for key, (env, actions) in prepared_envs.items():
                samples[key].append(timed(env, actions, args.steps))
        for client in clients.values():
            client.close()
    finally:
        for hosted in hosts.values():
            hosted.close()
    med = {key: statistics.median(v) for key, v in samples.items()}
    print("\nµs per step (lower is better); gains against the reference server + reference client")
    print(f"{'env':<16}{'local':>9}{'ref+ref':>10}{'ours+ref':>10}{'ref+ours':>10}{'ours+ours':>11}"
          f"{'srv gain':>10}{'full gain':>11}")
    for name in ENVS:
        base = med[((ref_server, "reference"), name)]
        our_ref = med[((our_server, "reference"), name)]
        ref_our = med[((ref_server, "ours"), name)]
        ours = med[((our_server, "ours"), name)]
        print(f"{name:<16}{med[('local', name)]:>9.1f}{base:>10.1f}{our_ref:>10.1f}{ref_our:>10.1f}{ours:>11.1f}"
              f"{base / our_ref:>9.2f}x{base / ours:>10.2f}x")
    hosted = Hosted(our_server)
    ones, twos = [], []
    try:
        for _ in range(3):
            ones.append(throughput(hosted.url, ["HalfCheetah-v5@ours"], args.seconds))
            twos.append(throughput(hosted.url, ["HalfCheetah-v5@ours", "HalfCheetah-v5#2"], args.seconds))
    finally:
        hosted.close()
    one, two = statistics.median(ones), statistics.median(twos)
    print(f"\nHalfCheetah-v5 on our server, our client, {args.seconds:.0f} s x 3 alternating, median: "
          f"one domain {one:.0f} steps/s, two domains concurrently {two:.0f} steps/s ({two / one:.2f}x)")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "host":
        host(sys.argv[2])
    else:
        main()
