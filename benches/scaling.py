"""How cost grows with the number of envs on one learner (BENCHMARKS.md,
"Scaling").

    .venv-ref/bin/python benches/scaling.py [--sizes 16,64,256,1024] [--configs sync,single2]
        [--seconds 1.5] [--rounds 3] [--async-max N] [--driver PATH]

``Pendulum-v1``, lockstep ``step`` with random actions, at each N of
``--sizes`` in these configurations (``--configs`` names; ``sync`` is always
measured, it is the baseline of the ratios):

* ``sync``: Gymnasium ``SyncVectorEnv`` in process;
* ``async``: Gymnasium ``AsyncVectorEnv`` (N subprocesses), at the N that fit
  (``--async-max``; default: half of ``MemAvailable`` at 64 MiB a worker);
  skipped sizes are named in the output;
* ``process``: ``ProcessVectorEnv([...] * N)`` with its defaults;
* ``batched``: ``RemoteVectorEnv`` over 2 server processes x one
  ``BatchedEnv(N / 2)``;
* ``single2`` / ``single8``: ``RemoteVectorEnv`` over N single-env resources
  spread over 2 / 8 server processes (N ``(url, id)`` pairs);
* ``single2nohold``: ``single2`` with servers that write each reply at once
  (``RemoteServer(reply_hold=None)``, SPEC.md section 8.4);
* ``rust2``: the Rust ``BlockingVectorEnv`` over the same N single-env
  resources on 2 server processes as ``single2``, stepped by the program
  ``benches/vector_driver.rs`` (``--driver``; default
  ``target/release/examples/vector_driver``, built first with
  ``cargo build --release --example vector_driver``). Its learner figures
  are that process's: CPU from its ``/proc/PID/stat`` around each round,
  RSS growth and step times as it reports them.

Per configuration: env steps per second (median of ``--rounds`` rounds,
configurations interleaved within each round, each measured for ``--seconds``
after a warm-up), the learner's CPU per env step (user + system time of this
process, all threads), the servers' CPU per env step (``/proc/PID/stat`` of
the server processes, or of ``AsyncVectorEnv``'s workers), the learner's RSS
growth while building the configuration and the servers' RSS, each per env,
and the p50 / p99 of one vector step. A size's configurations live for its
rounds and are closed before the next size starts.

The servers are this script run as ``--serve`` (our Python
``unienv_remote.RemoteServer`` on 127.0.0.1, port picked by the OS); every
process the script starts is stopped when it ends, on Ctrl-C or SIGTERM too.
The soft ``RLIMIT_NOFILE`` is raised to the hard limit when the largest N
needs more descriptors than it allows (the output says so).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from throughput import URL, process_cpu, stop_process  # noqa: E402

SIM = "Pendulum-v1"
CONFIGS = ("sync", "async", "process", "batched", "single2", "single2nohold", "single8", "rust2")
LABELS = {
    "sync": "SyncVectorEnv",
    "async": "AsyncVectorEnv",
    "process": "ProcessVectorEnv, its defaults",
    "batched": "remote 2 x BatchedEnv(N/2)",
    "single2": "remote N single, 2 servers",
    "single2nohold": "as single2, reply_hold=None",
    "single8": "remote N single, 8 servers",
    "rust2": "Rust VectorEnv, N single, 2 servers",
}
#: The Rust learner of ``rust2`` (``benches/vector_driver.rs``).
DRIVER = Path(__file__).resolve().parent.parent / "target" / "release" / "examples" / "vector_driver"
#: The memory an ``AsyncVectorEnv`` worker is taken to need when sizing
#: ``--async-max`` by default.
ASYNC_WORKER_BYTES = 64 << 20


# -- the servers (this script with --serve) -------------------------------------

def serve(singles: int, batch: int, reply_hold: bool = True) -> None:
    import gymnasium
    from unienv_interface.wrapper.gym_compat import FromGymnasiumEnv
    from unienv_remote import BatchedEnv, RemoteServer

    server = RemoteServer(idle_timeout=None) if reply_hold else RemoteServer(idle_timeout=None, reply_hold=None)
    if batch:
        server.register("pendulum_batch", BatchedEnv([functools.partial(gymnasium.make, SIM)] * batch))
    for i in range(singles):
        server.register(f"pendulum{i}", FromGymnasiumEnv(gymnasium.make(SIM)))
    print(server.listen("127.0.0.1", 0), flush=True)
    try:
        sys.stdin.read()  # until the benchmark closes our stdin
    finally:
        server.close()


class Server:
    """This script as ``--serve``: ``singles`` single Pendulums
    (``pendulum0``...) and, if ``batch``, a ``BatchedEnv(batch)``
    (``pendulum_batch``); ``reply_hold=False`` writes each reply at once
    (``RemoteServer(reply_hold=None)``). Started at construction; ``wait()``
    reads its URL."""

    def __init__(self, singles: int, batch: int = 0, reply_hold: bool = True) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", "--singles", str(singles), "--batch", str(batch)]
            + ([] if reply_hold else ["--no-reply-hold"]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = ""

    def wait(self) -> str:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            m = URL.search(line)
            if m:
                self.url = m.group(1)
                return self.url
        raise RuntimeError(f"a server printed no URL (exit {self.process.wait()})")

    def stop(self) -> None:
        stop_process(self.process)


def rss_bytes(pid: int) -> int:
    """Resident set size of process ``pid`` (``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


# -- the measurements -------------------------------------------------------------

def lockstep(envs: Any, seconds: float, durations: Optional[List[float]] = None) -> Tuple[int, float]:
    """Steps ``envs`` with random actions for ``seconds``; returns env steps
    and the window, appending each vector step's seconds to ``durations``."""
    rng = np.random.default_rng(0)
    pool = rng.uniform(-2, 2, size=(16,) + envs.action_space.shape).astype(np.float32)
    envs.reset(seed=0)
    steps, start = 0, time.perf_counter()
    now = start
    while now - start < seconds:
        envs.step(pool[steps % 16])
        after = time.perf_counter()
        if durations is not None:
            durations.append(after - now)
        now = after
        steps += 1
    return steps * envs.num_envs, now - start


class Config:
    """One configuration at one N: ``make()`` builds it (and the servers it
    needs, in ``servers``), ``run(seconds)`` measures one round."""

    def __init__(self, key: str, n: int, make: Callable[[], Any], servers: Optional[List[Server]] = None) -> None:
        self.key, self.n, self.make_fn = key, n, make
        self.servers = servers or []
        self.obj: Any = None
        self.rates: List[float] = []
        self.learner_cpu: List[float] = []
        self.server_cpu: List[float] = []
        self.durations: List[float] = []
        self.learner_rss = 0
        self.server_rss = 0

    def pids(self) -> List[int]:
        pids = [s.process.pid for s in self.servers]
        pids += list(getattr(self.obj, "server_pids", []))  # ProcessVectorEnv
        pids += [p.pid for p in getattr(self.obj, "processes", [])]  # AsyncVectorEnv
        return pids

    def cpu_of_servers(self) -> float:
        return sum(sum(process_cpu(p)) for p in self.pids())

    def run(self, seconds: float) -> None:
        if self.obj is None:
            rss = rss_bytes(os.getpid())
            for s in self.servers:
                s.wait()
            self.obj = self.make_fn()
            lockstep(self.obj, min(0.3, seconds))  # warm-up
            self.learner_rss = rss_bytes(os.getpid()) - rss
            self.server_rss = sum(rss_bytes(p) for p in self.pids())
        servers_before = self.cpu_of_servers()
        cpu_before = os.times()
        steps, window = lockstep(self.obj, seconds, self.durations)
        cpu_after = os.times()
        used = (cpu_after.user - cpu_before.user) + (cpu_after.system - cpu_before.system)
        self.rates.append(steps / window)
        self.learner_cpu.append(used / steps)
        if self.pids():
            self.server_cpu.append((self.cpu_of_servers() - servers_before) / steps)

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)

    def close(self) -> None:
        try:
            if self.obj is not None:
                self.obj.close()
        finally:
            self.obj = None
            for s in self.servers:
                s.stop()


class RustConfig(Config):
    """``rust2``: the Rust ``BlockingVectorEnv`` in ``benches/vector_driver.rs``
    (a process of its own) over ``servers``' single envs. The learner's
    figures are the driver's."""

    def __init__(self, n: int, driver: Path, servers: List[Server]) -> None:
        super().__init__("rust2", n, lambda: None, servers)
        self.driver = driver
        self.process: Optional["subprocess.Popen[str]"] = None

    def line(self) -> Dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        text = self.process.stdout.readline()
        if not text:
            raise RuntimeError(f"{self.driver.name} ended (exit {self.process.wait()}); its stderr says why")
        reply: Dict[str, Any] = json.loads(text)
        return reply

    def run(self, seconds: float) -> None:
        if self.process is None:
            for s in self.servers:
                s.wait()
            k = len(self.servers)
            args: List[str] = []
            for j in range(self.n):
                args += [self.servers[j % k].url, f"pendulum{j // k}"]
            env = dict(os.environ, VECTOR_DRIVER_WARMUP=str(min(0.3, seconds)))
            self.process = subprocess.Popen([str(self.driver), *args], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, text=True, env=env)
            self.learner_rss = int(self.line()["rss_growth"])  # after its warm-up
            self.server_rss = sum(rss_bytes(p) for p in self.pids())
        assert self.process.stdin is not None
        servers_before = self.cpu_of_servers()
        learner_before = sum(process_cpu(self.process.pid))
        self.process.stdin.write(f"{seconds}\n")
        self.process.stdin.flush()
        reply = self.line()
        learner_after = sum(process_cpu(self.process.pid))
        steps = int(reply["env_steps"])
        self.rates.append(steps / float(reply["window"]))
        self.learner_cpu.append((learner_after - learner_before) / steps)
        self.server_cpu.append((self.cpu_of_servers() - servers_before) / steps)
        self.durations += [float(d) for d in reply["durations"]]

    def close(self) -> None:
        try:
            if self.process is not None:
                stop_process(self.process)
        finally:
            self.process = None
            for s in self.servers:
                s.stop()


def raise_nofile(need: int) -> str:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return f"RLIMIT_NOFILE soft limit {soft} covers the ~{need} descriptors needed"
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    note = f"RLIMIT_NOFILE soft limit raised from {soft} to the hard limit {hard} (~{need} descriptors needed)"
    if hard != resource.RLIM_INFINITY and hard < need:
        note += "; the hard limit is below that, the largest sizes may fail to connect"
    return note


def build(n: int, keys: List[str], async_max: int, configs: Dict[str, Config], driver: Path) -> List[str]:
    """Fills ``configs`` with the configurations at ``n`` (their servers
    started, not yet waited for); returns notes on those skipped."""
    import gymnasium
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv
    from unienv_remote import ProcessVectorEnv, RemoteVectorEnv

    make = functools.partial(gymnasium.make, SIM)
    notes: List[str] = []

    def remote(servers: List[Server], single: bool) -> Callable[[], Any]:
        def construct() -> Any:
            if single:
                k = len(servers)
                return RemoteVectorEnv([(servers[j % k].url, f"pendulum{j // k}") for j in range(n)])
            return RemoteVectorEnv([(s.url, "pendulum_batch") for s in servers])
        return construct

    for key in keys:
        if key == "sync":
            configs[key] = Config(key, n, lambda: SyncVectorEnv([make] * n))
        elif key == "async":
            if n > async_max:
                notes.append(f"AsyncVectorEnv skipped at N={n}: {n} worker processes exceed --async-max {async_max}")
                continue
            configs[key] = Config(key, n, lambda: AsyncVectorEnv([make] * n))
        elif key == "process":
            configs[key] = Config(key, n, lambda: ProcessVectorEnv([make] * n))
        elif key == "batched":
            if n % 2:
                notes.append(f"batched skipped at N={n}: N must be even")
                continue
            servers = [Server(0, n // 2) for _ in range(2)]
            configs[key] = Config(key, n, remote(servers, False), servers)
        elif key in ("single2", "single2nohold", "single8"):
            k = 8 if key == "single8" else 2
            if n < k:
                notes.append(f"{key} skipped at N={n}: fewer envs than servers")
                continue
            hold = key != "single2nohold"
            servers = [Server(n // k + (1 if i < n % k else 0), reply_hold=hold) for i in range(k)]
            configs[key] = Config(key, n, remote(servers, True), servers)
        elif key == "rust2":
            if n < 2:
                notes.append(f"{key} skipped at N={n}: fewer envs than servers")
                continue
            servers = [Server(n // 2 + (1 if i < n % 2 else 0)) for i in range(2)]
            configs[key] = RustConfig(n, driver, servers)
    return notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--singles", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--no-reply-hold", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="16,64,256,1024", help="comma-separated N (default: %(default)s)")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated subset of {', '.join(CONFIGS)} (sync is always measured)")
    parser.add_argument("--seconds", type=float, default=1.5, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--async-max", type=int, default=None,
                        help="largest N for AsyncVectorEnv (default: half of MemAvailable at 64 MiB a worker)")
    parser.add_argument("--driver", type=Path, default=DRIVER,
                        help="the rust2 learner (default: %(default)s; "
                             "cargo build --release --example vector_driver)")
    args = parser.parse_args()
    if args.serve:
        serve(args.singles, args.batch, not args.no_reply_hold)
        return

    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not sizes or min(sizes) < 1:
        parser.error("--sizes needs positive integers")
    keys = [k for k in args.configs.split(",") if k]
    unknown = [k for k in keys if k not in CONFIGS]
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; choose from {', '.join(CONFIGS)}")
    keys = ["sync"] + [k for k in CONFIGS if k in keys and k != "sync"]
    if "rust2" in keys and not os.access(args.driver, os.X_OK):
        parser.error(f"rust2 needs {args.driver}: cargo build --release --example vector_driver (or --driver PATH)")
    async_max = args.async_max if args.async_max is not None else mem_available() // 2 // ASYNC_WORKER_BYTES

    # SIGTERM ends the run as Ctrl-C does: through the finally blocks that
    # stop every process started.
    # SIGINT raises KeyboardInterrupt even when started with it ignored
    # (a background job of a non-interactive shell).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # The learner holds one connection per server (its resources share it);
    # AsyncVectorEnv holds pipes to each worker.
    notes = [raise_nofile((4 * min(max(sizes), async_max) if "async" in keys else 0) + 256)]
    load_before = os.getloadavg()
    results: List[Config] = []
    for n in sizes:
        configs: Dict[str, Config] = {}
        try:
            notes += build(n, keys, async_max, configs, args.driver)
            for r in range(args.rounds):
                for key, config in configs.items():
                    config.run(args.seconds)
                    print(f"N={n} round {r}: {LABELS[key]}: {config.rates[-1]:,.0f} env-steps/s",
                          file=sys.stderr, flush=True)
        finally:
            for config in configs.values():
                config.close()
        results += configs.values()
    load_after = os.getloadavg()

    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} cores; "
          f"{SIM}, lockstep, random actions; median of {args.rounds} interleaved rounds of {args.seconds} s")
    for note in notes:
        print(f"note: {note}")
    print()
    print("CPU: user+system seconds per env step (learner: this process, all threads, or for the Rust VectorEnv")
    print("the vector_driver process; servers: the server processes or AsyncVectorEnv's workers). RSS per env:")
    print("the learner's growth while building the configuration, the servers' total. Step: one vector step's")
    print("wall time over all rounds.")
    print()
    print("| N | configuration | env-steps/s | vs SyncVectorEnv | learner CPU µs/env-step | server CPU µs/env-step "
          "| learner RSS KiB/env | server RSS KiB/env | step p50 ms | step p99 ms |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    baseline = {c.n: c for c in results if c.key == "sync"}
    for c in results:
        d = np.array(c.durations) * 1e3
        server_cpu = f"{1e6 * statistics.median(c.server_cpu):.1f}" if c.server_cpu else ""
        server_rss = f"{c.server_rss / 1024 / c.n:.0f}" if c.server_rss else ""
        print(f"| {c.n} | {LABELS[c.key]} | {c.rate:,.0f} | {c.rate / baseline[c.n].rate:.2f}x "
              f"| {1e6 * statistics.median(c.learner_cpu):.1f} | {server_cpu} | {c.learner_rss / 1024 / c.n:.0f} "
              f"| {server_rss} | {np.percentile(d, 50):.3f} | {np.percentile(d, 99):.3f} |")


if __name__ == "__main__":
    main()
