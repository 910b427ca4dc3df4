"""Throughput at scale, every configuration in one run (BENCHMARKS.md,
"Vector envs and throughput").

    .venv-ref/bin/python benches/throughput.py [--seconds 1.5] [--rounds 3]

Prints env steps per second of each configuration as the median of
``--rounds`` interleaved rounds (each configuration measured for ``--seconds``
per round, after a warm-up), and each figure as a ratio against the baselines
measured in the same run, with the machine's load average before and after:

* 16 ``Pendulum-v1`` / ``HalfCheetah-v5``: Gymnasium ``SyncVectorEnv`` in
  process, Gymnasium ``AsyncVectorEnv`` (16 subprocesses),
  ``RemoteVectorEnv`` over 16 single remote envs (2 server processes x 8), and
  ``RemoteVectorEnv`` over 2 server processes x ``BatchedEnv`` of 8;
* server CPU per env step (user + system time of the server processes over
  the run of a configuration, from ``/proc``), and the same minus the
  simulator's own cost (``SyncVectorEnv``'s time per env step);
* stragglers: 64 envs whose step sleeps an exponential time of mean 1 ms
  (100 % standard deviation), 2 server processes x 32 single envs: lockstep
  ``step`` against EnvPool-style ``send``/``recv`` with ``batch_size=16``;
* ``BatchedEnv`` of 8 in process, sequential against 2 threads (what its
  default follows);
* the batched configuration again over Unix domain sockets (``ws+unix://``)
  instead of loopback TCP, and again stepped with ``send``/``recv``
  (``batch_size=8``: one server's batch at a time, the other stepping);
* 32 envs as 2 server processes x 2 ``BatchedEnv`` of 8, stepped with
  ``send``/``recv`` (``batch_size=16``: while the learner handles one batch,
  each server steps its other one), against ``SyncVectorEnv`` of 32, servers
  unpinned and pinned: what a server's own turnaround costs once it has a
  second resource to step;
* ``ProcessVectorEnv(env_fns)`` with its defaults (16 envs: it starts 2
  server processes, one per vCPU, pinned, Unix sockets, ``BatchedEnv(8)``
  each): the one-line construction, against the hand-built rows;
* the 16 single and the batched configurations again with each server
  process pinned to a vCPU of its own (server i on CPU i mod the CPU count,
  ``RemoteServer(cpus=[i])``, as a user would; the learner unpinned), in the
  same rounds, with the ratio pinned / unpinned.

The servers are this script run as ``--serve`` (our Python
``unienv_remote.RemoteServer`` on 127.0.0.1, port picked by the OS).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

N = 16
STRAGGLERS = 64
PER_SERVER = N // 2
URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")
#: The rows whose servers are pinned, one vCPU each.
PINNED = ", servers pinned (RemoteServer(cpus=[i]))"
UNIX_URL = re.compile(r"(ws\+unix://\S+)")


# -- the servers (this script with --serve) -------------------------------------

def straggler_factory(seed: int) -> Callable[[], Any]:
    import gymnasium

    class Straggler(gymnasium.Env):
        """A simulator whose step sleeps Exp(1 ms): mean 1 ms, stddev 1 ms."""

        observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

        def __init__(self) -> None:
            self.delays = np.random.default_rng(seed)

        def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[np.ndarray, dict]:
            super().reset(seed=seed)
            return np.zeros(4, np.float32), {}

        def step(self, action: np.ndarray) -> Tuple[np.ndarray, float, bool, bool, dict]:
            time.sleep(self.delays.exponential(1e-3))
            return np.zeros(4, np.float32), 0.0, False, False, {}

    return Straggler


def serve(index: int, unix: bool, cpu: Optional[int]) -> None:
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv
    from unienv_remote import BatchedEnv, RemoteServer

    server = RemoteServer(idle_timeout=None, cpus=None if cpu is None else [cpu])
    server.register("pendulum_batch", BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * PER_SERVER))
    server.register("cheetah_batch", BatchedEnv([lambda: gymnasium.make("HalfCheetah-v5")] * PER_SERVER))
    if unix:
        # The batched envs again, on a Unix domain socket (a RemoteServer has
        # one listener): the same-host fast path.
        import tempfile
        socket_dir = tempfile.mkdtemp(prefix="unienv-throughput-")
        print(server.listen_unix(os.path.join(socket_dir, "server.sock")), flush=True)
        try:
            sys.stdin.read()
        finally:
            server.close()  # removes the socket file
            os.rmdir(socket_dir)
        return
    # Two more batches per server for the 32-env send/recv rows.
    for k in range(2):
        server.register(f"pendulum_batch_x{k}", BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * PER_SERVER))
        server.register(f"cheetah_batch_x{k}", BatchedEnv([lambda: gymnasium.make("HalfCheetah-v5")] * PER_SERVER))
    for i in range(PER_SERVER):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make("Pendulum-v1")))
        server.register(f"cheetah{i}", FromGymnasiumEnv(gymnasium.make("HalfCheetah-v5")))
    if cpu is not None:
        # A pinned server: the batched, the 16 single and the 32-env rows only.
        print(server.listen("127.0.0.1", 0), flush=True)
        try:
            sys.stdin.read()
        finally:
            server.close()
        return
    # The batches again for send/recv (one controller per resource).
    server.register("pendulum_batch_recv", BatchedEnv([lambda: gymnasium.make("Pendulum-v1")] * PER_SERVER))
    server.register("cheetah_batch_recv", BatchedEnv([lambda: gymnasium.make("HalfCheetah-v5")] * PER_SERVER))
    # Lockstep uses straggler0..31, send/recv straggler32..63 (one controller each).
    for i in range(STRAGGLERS):
        server.register(f"straggler{i}", FromGymnasiumEnv(straggler_factory(1000 * index + i)()))
    print(server.listen("127.0.0.1", 0), flush=True)
    try:
        sys.stdin.read()  # until the benchmark closes our stdin
    finally:
        server.close()


def cli_binary(profiles: Tuple[str, ...] = ("release", "debug")) -> str:
    """The ``unienv-remote`` command line: ``$UNIENV_REMOTE_BIN``, else the
    first of ``target/PROFILE/unienv-remote`` that exists."""
    explicit = os.environ.get("UNIENV_REMOTE_BIN")
    if explicit:
        return explicit
    root = Path(__file__).resolve().parent.parent
    for profile in profiles:
        path = root / "target" / profile / "unienv-remote"
        if path.exists():
            return str(path)
    flag = "--release" if profiles[0] == "release" else f"--profile {profiles[0]}"
    raise SystemExit(f"no unienv-remote binary: cargo build {flag} --bin unienv-remote, or set UNIENV_REMOTE_BIN")


def process_cpu(pid: int) -> Tuple[float, float]:
    """User and system CPU seconds process ``pid`` has used (``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / hz, int(fields[12]) / hz


def stop_process(process: "subprocess.Popen[str]") -> None:
    """Closes the stdin of ``process`` (this script's children end at
    EOF) and waits for it, killing it (by its Popen) after 15 s."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class ServerProcess:
    """This script as ``--serve``; ``cpu``: pinned to that CPU."""

    def __init__(self, index: int, unix: bool = False, cpu: Optional[int] = None) -> None:
        extra = (["--unix"] if unix else []) + ([] if cpu is None else ["--cpu", str(cpu)])
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", str(index), *extra], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.process.stdout is not None
        self.url = ""
        for line in self.process.stdout:
            m = (UNIX_URL if unix else URL).search(line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            raise RuntimeError(f"server {index} printed no URL (exit {self.process.wait()})")

    def cpu_seconds(self) -> float:
        return sum(process_cpu(self.process.pid))

    def stop(self) -> None:
        stop_process(self.process)


# -- the measurements -------------------------------------------------------------

class Config:
    """A configuration: ``make()`` builds it once, ``run(seconds)`` records
    env steps per second, ``close()`` ends it."""

    def __init__(self, name: str, make: Callable[[], Any], run: Callable[[Any, float], Measured],
                 servers: Optional[List[ServerProcess]] = None) -> None:
        self.name, self.make, self.run_fn, self.servers = name, make, run, servers or []
        self.obj: Any = None
        self.rates: List[float] = []
        self.cpu_per_step: List[float] = []
        self.own_cpu_per_step: List[float] = []

    def run(self, seconds: float) -> None:
        if self.obj is None:
            self.obj = self.make()
            self.run_fn(self.obj, 0.3)  # warm-up
        before = self.server_cpu()
        start, cpu_start = time.perf_counter(), time.process_time()
        steps, window = self.run_fn(self.obj, seconds)
        rate = steps / window
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        self.rates.append(rate)
        self.own_cpu_per_step.append(cpu / (rate * elapsed))
        if self.servers or self.pids():
            used = self.server_cpu() - before
            self.cpu_per_step.append(used / (rate * elapsed))

    def pids(self) -> List[int]:
        """The server processes a configuration started itself (``ProcessVectorEnv``)."""
        return list(getattr(self.obj, "server_pids", []))

    def server_cpu(self) -> float:
        return sum(s.cpu_seconds() for s in self.servers) + sum(sum(process_cpu(p)) for p in self.pids())

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)

    @property
    def best(self) -> float:
        return max(self.rates)

    def close(self) -> None:
        if self.obj is not None:
            self.obj.close()


#: What a measuring loop returns: env steps taken, and the seconds they took
#: (the loop's own window: resetting before and draining after left out).
Measured = Tuple[int, float]


def lockstep(envs: Any, seconds: float) -> Measured:
    actions = np.random.default_rng(0).uniform(-1, 1, size=(64,) + envs.action_space.shape).astype(np.float32)
    envs.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.step(actions[steps % 64])
        steps += 1
    return steps * envs.num_envs, time.perf_counter() - start


def send_recv(envs: Any, seconds: float) -> Measured:
    single = envs.single_action_space.shape
    envs.reset(seed=0)
    envs.send(np.zeros((envs.num_envs,) + single, np.float32))
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs, *_, infos = envs.recv()
        ids = infos["env_id"]
        count += len(ids)
        envs.send(np.zeros((len(ids),) + single, np.float32), ids)
    window = time.perf_counter() - start
    while envs._native.step_pending():
        envs.recv()
    return count, window


def batched_local(env: Any, seconds: float) -> Measured:
    env.reset(seed=0)
    action = np.zeros(env.action_space.shape, np.float32)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(action)
        steps += 1
    return steps * env.batch_size, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--unix", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.unix, args.cpu)
        return

    import gymnasium
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv
    from unienv_remote import BatchedEnv, ProcessVectorEnv, RemoteVectorEnv

    load_before = os.getloadavg()
    servers = [ServerProcess(0), ServerProcess(1)]
    unix_servers = [ServerProcess(0, unix=True), ServerProcess(1, unix=True)]
    allowed = sorted(os.sched_getaffinity(0))
    pinned_servers = [ServerProcess(i, cpu=allowed[i % len(allowed)]) for i in range(2)]
    urls = [s.url for s in servers]
    unix_urls = [s.url for s in unix_servers]
    pinned_urls = [s.url for s in pinned_servers]

    def remote(prefix: str, batched: bool, unix: bool = False, pinned: bool = False, **kw: Any) -> Callable[[], Any]:
        at = unix_urls if unix else pinned_urls if pinned else urls
        if batched:
            addresses = [(u, f"{prefix}_batch") for u in at]
        else:
            addresses = [(at[j % 2], f"{prefix}{j // 2}") for j in range(N)]
        return lambda: RemoteVectorEnv(addresses, **kw)

    stragglers = [(urls[j % 2], f"straggler{j // 2}") for j in range(STRAGGLERS)]
    stragglers_recv = [(urls[j % 2], f"straggler{STRAGGLERS // 2 + j // 2}") for j in range(STRAGGLERS)]
    configs: Dict[str, Config] = {}
    for sim, prefix in (("Pendulum-v1", "pendulum"), ("HalfCheetah-v5", "cheetah")):
        make = (lambda s: lambda: gymnasium.make(s))(sim)
        configs[f"{sim} SyncVectorEnv"] = Config("sync", lambda m=make: SyncVectorEnv([m] * N), lockstep)
        configs[f"{sim} AsyncVectorEnv"] = Config("async", lambda m=make: AsyncVectorEnv([m] * N), lockstep)
        configs[f"{sim} remote 16 single"] = Config("single", remote(prefix, False), lockstep, servers)
        configs[f"{sim} remote 16 single{PINNED}"] = Config(
            "single-pinned", remote(prefix, False, pinned=True), lockstep, pinned_servers)
        configs[f"{sim} remote 2x BatchedEnv(8)"] = Config("batched", remote(prefix, True), lockstep, servers)
        configs[f"{sim} remote 2x BatchedEnv(8){PINNED}"] = Config(
            "batched-pinned", remote(prefix, True, pinned=True), lockstep, pinned_servers)
        configs[f"{sim} remote 2x BatchedEnv(8), Unix sockets"] = Config(
            "batched-unix", remote(prefix, True, unix=True), lockstep, unix_servers)
        # The one-line construction (its own server processes).
        configs[f"{sim} ProcessVectorEnv(16), its defaults"] = Config(
            "process", lambda m=make: ProcessVectorEnv([m] * N), lockstep)
        # The same fleet stepped EnvPool's way: while the learner handles one
        # batch's results, the other server steps its own.
        recv_fleet = [(u, f"{prefix}_batch_recv") for u in urls]
        configs[f"{sim} remote 2x BatchedEnv(8), send/recv M=8"] = Config(
            "batched-recv", (lambda a: lambda: RemoteVectorEnv(a, batch_size=PER_SERVER))(recv_fleet), send_recv,
            servers)
        # 32 envs, two resources per server: a server steps one while the
        # learner turns the other around.
        configs[f"{sim} SyncVectorEnv(32)"] = Config("sync32", lambda m=make: SyncVectorEnv([m] * 2 * N), lockstep)
        for pin, at in (("", servers), (PINNED, pinned_servers)):
            fleet32 = [(s.url, f"{prefix}_batch_x{k}") for k in range(2) for s in at]
            configs[f"{sim} remote 2x2 BatchedEnv(8), send/recv M=16{pin}"] = Config(
                "batched32-recv", (lambda a: lambda: RemoteVectorEnv(a, batch_size=N))(fleet32), send_recv, at)
    configs["stragglers lockstep step"] = Config("lockstep", lambda: RemoteVectorEnv(stragglers), lockstep, servers)
    configs["stragglers send/recv M=16"] = Config(
        "recv", lambda: RemoteVectorEnv(stragglers_recv, batch_size=16), send_recv, servers)
    for sim in ("Pendulum-v1", "HalfCheetah-v5"):
        for threads in (1, 2):
            configs[f"{sim} BatchedEnv(8) in process, threads={threads}"] = Config(
                "local", (lambda s, t: lambda: BatchedEnv([lambda: gymnasium.make(s)] * 8, threads=t))(sim, threads),
                batched_local)
    try:
        for r in range(args.rounds):
            for name, config in configs.items():
                config.run(args.seconds)
                print(f"round {r}: {name}: {config.rates[-1]:,.0f} env-steps/s", file=sys.stderr, flush=True)
    finally:
        for config in configs.values():
            config.close()
        for s in servers + unix_servers + pinned_servers:
            s.stop()
    load_after = os.getloadavg()

    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} cores; "
          f"median of {args.rounds} interleaved rounds of {args.seconds} s")
    print()
    print("Env steps per second: median of the rounds (best round in brackets); ratios of medians (of bests).")
    print("Server CPU: user+system time of the 2 server processes per env step (median); 'beyond the simulator'")
    print("subtracts the simulator's own CPU per env step, measured as SyncVectorEnv's process CPU time per env step.")
    print()
    print("| configuration | env-steps/s | vs SyncVectorEnv | vs AsyncVectorEnv | server CPU µs/env-step | beyond the simulator |")
    print("|---|---:|---:|---:|---:|---:|")
    for sim in ("Pendulum-v1", "HalfCheetah-v5"):
        sync, asyn = configs[f"{sim} SyncVectorEnv"], configs[f"{sim} AsyncVectorEnv"]
        own_us = 1e6 * statistics.median(sync.own_cpu_per_step)
        for label in ("SyncVectorEnv", "AsyncVectorEnv", "remote 16 single", f"remote 16 single{PINNED}",
                      "remote 2x BatchedEnv(8)", f"remote 2x BatchedEnv(8){PINNED}",
                      "remote 2x BatchedEnv(8), Unix sockets", "remote 2x BatchedEnv(8), send/recv M=8",
                      "ProcessVectorEnv(16), its defaults"):
            c = configs[f"{sim} {label}"]
            cpu = f"{1e6 * statistics.median(c.cpu_per_step):.1f}" if c.cpu_per_step else f"({own_us:.1f} in process)" \
                if label == "SyncVectorEnv" else ""
            beyond = f"{1e6 * statistics.median(c.cpu_per_step) - own_us:.1f}" if c.cpu_per_step else ""
            print(f"| {sim} {label} | {c.rate:,.0f} ({c.best:,.0f}) | {c.rate / sync.rate:.2f}x ({c.best / sync.best:.2f}x) "
                  f"| {c.rate / asyn.rate:.2f}x ({c.best / asyn.best:.2f}x) | {cpu} | {beyond} |")
    for sim in ("Pendulum-v1", "HalfCheetah-v5"):
        for label in ("remote 16 single", "remote 2x BatchedEnv(8)"):
            plain, pinned = configs[f"{sim} {label}"], configs[f"{sim} {label}{PINNED}"]
            ratios = [p / u for p, u in zip(pinned.rates, plain.rates)]
            print(f"| {sim} {label}: pinned / unpinned | | {pinned.rate / plain.rate:.2f}x "
                  f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)}) | | | |")
    lock, recv = configs["stragglers lockstep step"], configs["stragglers send/recv M=16"]
    print(f"| 64 stragglers (Exp(1 ms) step), lockstep `step` | {lock.rate:,.0f} ({lock.best:,.0f}) | | | | |")
    print(f"| 64 stragglers, send/recv with batch_size=16 | {recv.rate:,.0f} ({recv.best:,.0f}) | "
          f"recv/step {recv.rate / lock.rate:.2f}x ({recv.best / lock.best:.2f}x) | | | |")
    for sim in ("Pendulum-v1", "HalfCheetah-v5"):
        one = configs[f"{sim} BatchedEnv(8) in process, threads=1"]
        two = configs[f"{sim} BatchedEnv(8) in process, threads=2"]
        print(f"| {sim} BatchedEnv(8) in process, threads=1 / threads=2 | {one.rate:,.0f} / {two.rate:,.0f} | "
              f"2 threads {two.rate / one.rate:.2f}x ({two.best / one.best:.2f}x) | | | |")
    print()
    print("| 32 envs | env-steps/s | vs SyncVectorEnv(32) | server CPU µs/env-step | beyond the simulator |")
    print("|---|---:|---:|---:|---:|")
    for sim in ("Pendulum-v1", "HalfCheetah-v5"):
        sync32 = configs[f"{sim} SyncVectorEnv(32)"]
        own_us = 1e6 * statistics.median(sync32.own_cpu_per_step)
        print(f"| {sim} SyncVectorEnv(32) | {sync32.rate:,.0f} ({sync32.best:,.0f}) | 1.00x | ({own_us:.1f} in process) | |")
        for pin in ("", PINNED):
            c = configs[f"{sim} remote 2x2 BatchedEnv(8), send/recv M=16{pin}"]
            cpu_us = 1e6 * statistics.median(c.cpu_per_step)
            print(f"| {sim} remote 2x2 BatchedEnv(8), send/recv M=16{pin} | {c.rate:,.0f} ({c.best:,.0f}) "
                  f"| {c.rate / sync32.rate:.2f}x ({c.best / sync32.best:.2f}x) | {cpu_us:.1f} | {cpu_us - own_us:.1f} |")
    print()
    print("Targets: Pendulum batched >= 1.0x Sync and >= 5x Async; HalfCheetah batched >= 1.3x Sync; "
          "16 single remote >= 2x Async; stragglers recv/step >= 1.5x.")


if __name__ == "__main__":
    main()
