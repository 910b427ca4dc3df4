"""16 Pendulum-v1 envs: RemoteVectorEnv over 4 server processes vs Gymnasium's
AsyncVectorEnv and SyncVectorEnv, then RemoteVectorEnv across a veth pair
between two network namespaces with and without 1 ms of added round trip.

    .venv-ref/bin/python benches/vector_pendulum.py [--steps 2000] [--no-netns]

Figures are env steps per second (vector steps x 16 / wall time, random
actions drawn beforehand, after 50 warm-up steps). Printed as a Markdown table.

The servers are `python/tests/vector_server.py` processes (our Python
`unienv_remote.RemoteServer`).

Latency (root only): the benchmark creates network namespaces `uvr-bench-cli`
and `uvr-bench-srv` joined by a veth pair with addresses in 10.213.77.0/30
(which exists only inside them), runs the 4 servers in `uvr-bench-srv` on its
loopback behind `delay_relay.py` (listening on the veth address; the kernel
here has no netem qdisc), and the client in `uvr-bench-cli`. Everything is
deleted afterwards, also on failure.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
SERVER = HERE.parent / "python" / "tests" / "vector_server.py"
RELAY = HERE / "delay_relay.py"
N, SERVERS = 16, 4
NS_CLI, NS_SRV = "uvr-bench-cli", "uvr-bench-srv"
VETH_CLI, VETH_SRV = "uvrb-cli", "uvrb-srv"
ADDR_CLI, ADDR_SRV = "10.213.77.1", "10.213.77.2"


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


def remote(urls: List[str], steps: int) -> float:
    from unienv_remote import RemoteVectorEnv
    addresses = [(urls[j % len(urls)], f"pendulum{j // len(urls)}") for j in range(N)]
    envs = RemoteVectorEnv(addresses)
    try:
        return time_vector(envs, steps)
    finally:
        envs.close()


def start_servers(prefix: List[str]) -> Tuple[List[subprocess.Popen], List[str], str]:
    procs, urls, kind = [], [], "?"
    for _ in range(SERVERS):
        p = subprocess.Popen(prefix + [sys.executable, str(SERVER), str(N // SERVERS)], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        procs.append(p)
        assert p.stdout is not None
        for line in p.stdout:
            if line.startswith("server:"):
                kind = line.split(":", 1)[1].strip()
            m = re.search(r"ws://[\d.]+:\d+", line)
            if m:
                urls.append(m.group(0))
                break
    if len(urls) != SERVERS:
        stop(procs)
        raise RuntimeError("a server did not start")
    return procs, urls, kind


def stop(procs: List[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True)


def netns_up() -> None:
    sh("ip", "netns", "add", NS_CLI)
    sh("ip", "netns", "add", NS_SRV)
    sh("ip", "link", "add", VETH_CLI, "netns", NS_CLI, "type", "veth", "peer", "name", VETH_SRV, "netns", NS_SRV)
    for ns, dev, addr in ((NS_CLI, VETH_CLI, ADDR_CLI), (NS_SRV, VETH_SRV, ADDR_SRV)):
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")


def netns_down() -> None:
    for ns in (NS_CLI, NS_SRV):
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


def across_netns(steps: int, delay_ms: float) -> float:
    """Servers in NS_SRV behind the relay; the client measured in NS_CLI."""
    procs, urls, _ = start_servers(["ip", "netns", "exec", NS_SRV])
    relay: Optional[subprocess.Popen] = None
    try:
        upstreams = [u[len("ws://"):] for u in urls]
        relay = subprocess.Popen(["ip", "netns", "exec", NS_SRV, sys.executable, str(RELAY), str(delay_ms / 2),
                                  ADDR_SRV] + upstreams, stdout=subprocess.PIPE, text=True)
        assert relay.stdout is not None
        relayed = [f"ws://{relay.stdout.readline().split()[0]}" for _ in upstreams]
        out = subprocess.run(["ip", "netns", "exec", NS_CLI, sys.executable, __file__, "--client", "--steps",
                              str(steps)] + relayed, check=True, capture_output=True, text=True)
        return float(json.loads(out.stdout.strip().splitlines()[-1])["steps_per_s"])
    finally:
        if relay is not None:
            relay.kill()
            relay.wait()
        stop(procs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--no-netns", action="store_true")
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("urls", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        print(json.dumps({"steps_per_s": remote(args.urls, args.steps)}))
        return

    import gymnasium
    rows = []
    procs, urls, kind = start_servers([])
    try:
        rows.append((f"RemoteVectorEnv, 4 server processes ({kind} RemoteServer), loopback",
                     remote(urls, args.steps)))
    finally:
        stop(procs)
    sync = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("Pendulum-v1") for _ in range(N)])
    rows.append(("SyncVectorEnv (one process)", time_vector(sync, args.steps)))
    sync.close()
    async_ = gymnasium.vector.AsyncVectorEnv([lambda: gymnasium.make("Pendulum-v1") for _ in range(N)])
    rows.append(("AsyncVectorEnv (16 subprocesses)", time_vector(async_, args.steps)))
    async_.close()
    if not args.no_netns:
        if os.geteuid() != 0:
            print("not root: skipping the network namespace runs", file=sys.stderr)
        else:
            netns_down()
            netns_up()
            try:
                rows.append(("RemoteVectorEnv across veth + relay, +0 ms", across_netns(args.steps, 0.0)))
                rows.append(("RemoteVectorEnv across veth + relay, +1 ms round trip", across_netns(args.steps, 1.0)))
            finally:
                netns_down()
    print(f"\n16 x Pendulum-v1, {args.steps} vector steps, env steps/s\n")
    print("| configuration | env steps/s |")
    print("|---|---:|")
    for name, rate in rows:
        print(f"| {name} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
