"""``RemoteVectorEnv`` over 2 batched hosts through a relay against the same
over 2 listening servers, in one run (SPEC.md, "Relay and dial-out hosts").

    .venv-ref/bin/python benches/relay_vector.py [--sim cartpole|pendulum|halfcheetah] [--relay process|learner]
        [--seconds 2] [--rounds 3] [--smoke]

Starts ``unienv-remote relay`` (``--relay learner``: ``unienv_remote.Relay``
in this process instead, the learner-side relay of Unity ML-Agents' shape),
two hosts listening (direct) and two dialing
the relay, then steps a ``RemoteVectorEnv`` of the two batches (16 envs) each
way in alternating rounds and prints env steps per second, the median of the
rounds, and the ratio relay / direct. The binary is ``$UNIENV_REMOTE_BIN``,
else ``target/release/unienv-remote``, else ``target/debug/unienv-remote``.
``--smoke`` runs a few steps only (no figures worth reading).

``--sim`` chooses the hosts:

- ``cartpole`` (the default): ``unienv-remote serve --batch 8`` of the Rust
  cartpole (``--dial URL --name NAME --no-listen`` for the dialing ones),
  whose step costs almost nothing: a vector step is pure messaging, and the
  ratio is the relay's hop against a bare round trip;
- ``pendulum``: our Python host (``RemoteServer``) with a ``BatchedEnv`` of 8
  Gymnasium ``Pendulum-v1`` (``RemoteServer.dial`` for the dialing ones),
  this script run as ``--host``: a step that costs what a small real
  simulator costs, so the ratio is the hop's share of a realistic step;
- ``halfcheetah``: the same host with MuJoCo's ``HalfCheetah-v5``: a
  physics engine's step, the simulators a relay is for.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from typing import IO, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import cli_binary  # noqa: E402

URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")
BATCH = 8
# The Python hosts' Gymnasium envs, by `--sim` (also their resource names).
GYMNASIUM = {"pendulum": "Pendulum-v1", "halfcheetah": "HalfCheetah-v5"}


def drain(stream: "IO[str]") -> None:
    """Reads what a process prints until it exits (so that it never blocks
    on a full pipe), then closes the pipe."""
    with stream:
        for _ in stream:
            pass


def start(args: List[str], drains: List[threading.Thread], wrap: Sequence[str] = (),
          python: bool = False) -> Tuple[subprocess.Popen, str]:
    """A process of ours (the binary run with ``args``, under ``wrap`` if
    given; with ``python``, this script run with ``args``) and the first
    ws:// URL it prints; the rest of its output is drained by a thread
    added to ``drains``."""
    command = [sys.executable, __file__, *args] if python else [*wrap, cli_binary(), *args]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stdout = process.stdout
    assert stdout is not None
    drainer = threading.Thread(target=drain, args=(stdout,), daemon=True)
    for line in stdout:
        match = URL.search(line)
        if match:
            drainer.start()
            drains.append(drainer)
            return process, match.group(1)
    stdout.close()
    raise SystemExit(f"{args[0]} printed no URL (exit code {process.wait()})")


def listed(relay: str) -> List[str]:
    with urllib.request.urlopen(relay.replace("ws://", "http://", 1) + "/hosts", timeout=30) as answer:
        return [h["name"] for h in json.load(answer)["hosts"]]


def wait_listed(relay: str, names: List[str]) -> None:
    deadline = time.monotonic() + 60
    while not set(names) <= set(listed(relay)):
        assert time.monotonic() < deadline, "the hosts never registered"
        time.sleep(0.02)


def stop(processes: List[subprocess.Popen], drains: List[threading.Thread]) -> None:
    for p in processes:
        p.terminate()
    for p in processes:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for d in drains:
        d.join(timeout=10)


def host(sim: str, relay: Optional[str], name: Optional[str]) -> None:
    """``--host``: our Python host of a ``BatchedEnv`` of 8 of ``sim``'s
    Gymnasium env, registered as ``sim``, listening (prints its URL) or,
    given a relay, dialing it as ``name`` (prints the relay's URL once
    registered); runs until terminated."""
    import gymnasium

    from unienv_remote import BatchedEnv, RemoteServer

    server = RemoteServer()
    gym_id = GYMNASIUM[sim]
    server.register(sim, BatchedEnv([lambda: gymnasium.make(gym_id)] * BATCH))
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        if relay is None:
            print(server.listen("127.0.0.1", 0), flush=True)
        else:
            handle = server.dial(relay, name=name or sim)
            handle.wait_registered(60)
            print(f"registered at {relay}", flush=True)
        stopped.wait()
    finally:
        server.close()


def steps_per_s(envs: List[Tuple[str, str]], seconds: float, min_steps: int) -> float:
    from unienv_remote import RemoteVectorEnv

    vec = RemoteVectorEnv(envs)
    try:
        vec.reset(seed=0)
        for _ in range(min(min_steps, 10)):
            vec.step(vec.action_space.sample())
        n, start_at = 0, time.perf_counter()
        while n < min_steps or time.perf_counter() - start_at < seconds:
            vec.step(vec.action_space.sample())
            n += 1
        return n * vec.num_envs / (time.perf_counter() - start_at)
    finally:
        vec.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--sim", choices=["cartpole", *GYMNASIUM], default="cartpole",
                        help="the hosts: the Rust cartpole (a free step), Python Pendulum-v1 (a small "
                             "real one) or MuJoCo's HalfCheetah-v5 (a physics engine's)")
    parser.add_argument("--relay", choices=["process", "learner"], default="process",
                        help="the relay: `unienv-remote relay` (a process of its own) or "
                             "unienv_remote.Relay in the learner's process")
    parser.add_argument("--host", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dial", help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.host:
        host(args.sim, args.dial, args.name)
        return
    env_id = args.sim
    seconds, rounds, min_steps = (0.0, 1, 20) if args.smoke else (args.seconds, args.rounds, 200)
    processes: List[subprocess.Popen] = []
    drains: List[threading.Thread] = []
    in_learner = None
    try:
        if args.relay == "learner":
            from unienv_remote import Relay

            in_learner = Relay("127.0.0.1:0")
            relay = in_learner.url
        else:
            relay_process, relay = start(["relay", "--addr", "127.0.0.1:0"], drains)
            processes.append(relay_process)
        direct = []
        python = args.sim in GYMNASIUM
        for _ in range(2):
            serve = ["--host", "--sim", args.sim] if python else ["serve", "--batch", str(BATCH), "--addr", "127.0.0.1:0"]
            p, url = start(serve, drains, python=python)
            processes.append(p)
            direct.append((url, env_id))
        names = ["batch0", "batch1"]
        for name in names:
            dial = (["--host", "--sim", args.sim, "--dial", relay, "--name", name] if python else
                    ["serve", "--batch", str(BATCH), "--no-listen", "--name", name, "--dial", relay])
            p, _ = start(dial, drains, python=python)
            processes.append(p)
        wait_listed(relay, names)
        through = [(f"{relay}/hosts/{name}", env_id) for name in names]
        figures = {"direct": [], "relay": []}
        for _ in range(rounds):
            figures["direct"].append(steps_per_s(direct, seconds, min_steps))
            figures["relay"].append(steps_per_s(through, seconds, min_steps))
        d, r = statistics.median(figures["direct"]), statistics.median(figures["relay"])
        what = f"Python host, {GYMNASIUM[args.sim]}" if python else "cartpole"
        where = "in the learner's process" if in_learner is not None else "a process of its own"
        print(f"RemoteVectorEnv, 2 hosts x BatchedEnv({BATCH}) {what}, the relay {where}, "
              f"median of {rounds} rounds:")
        print(f"  direct {d:10.0f} env steps/s   through the relay {r:10.0f} env steps/s   ratio {r / d:.2f}x")
    finally:
        stop(processes, drains)
        if in_learner is not None:
            in_learner.close()


if __name__ == "__main__":
    main()
