"""Where a simulator's time goes inside our server, and the ceiling of any remote design here.

    .venv-ref/bin/python benches/profile/ceiling.py [--sims Pendulum-v1,HalfCheetah-v5] [--seconds 2] [--rounds 3]

Two parts, every figure measured in this one run (medians of ``--rounds``
interleaved rounds of ``--seconds`` each), with the load average before and
after:

1. **A sub-env's own ``step``, in each setting** (the puzzle: the
   server's CPU per env step is well above the simulator's in-process cost).
   Every Gymnasium env is wrapped in :class:`Timed`, which accumulates the
   wall time (``perf_counter_ns``) and the thread's CPU time
   (``thread_time_ns``) of the wrapped ``env.step`` call, less the cost of
   reading the two clocks (calibrated in each process). Settings:
   ``SyncVectorEnv`` of 16 and ``BatchedEnv`` of 8 stepped in a process of
   their own, (a) alone, (b) beside one busy process (a Python spin loop,
   the other vCPU taken), (c) beside two (3 runnable processes on 2 vCPUs, as
   in ``throughput.py``'s remote rows); the ``BatchedEnv`` alone again with a
   blocking pipe round trip to another process after each batch step (it
   sleeps and is woken once per batch, as a server's domain thread), that
   process answering at once or after writing over 2 MB (another process's
   work evicting the caches between two batch steps, as the learner's and the
   other server's do); and (d) the ``BatchedEnv`` of 8 hosted by our
   ``RemoteServer``, two server processes driven lockstep by a
   ``RemoteVectorEnv`` learner of 16 (``throughput.py``'s "remote 2x
   BatchedEnv(8)" row), as they are and with each server pinned to one
   vCPU: by its own option (``RemoteServer(cpus=[i])``: its domain, runtime
   and recorder threads; its domain thread never migrates), and the two
   other placements of part 2 (whole process; domain threads only). For each: the sub-env step's wall and CPU time, the
   process's (server's) user and system CPU per env step, and what is left
   beyond the sub-env steps. For the server, per thread kind (the domain
   thread that runs Python, the tokio runtime workers, the rest) from
   ``/proc/<pid>/task``.
2. **The ceiling**: 16 envs stepped as two processes of 8, in process,
   concurrently, no communication at all (each a ``SyncVectorEnv(8)``, or a
   ``BatchedEnv(8)``): the best any remote design could do on this machine,
   against one ``SyncVectorEnv(16)`` in the same round; and the remote
   configuration (2 servers x ``BatchedEnv(8)``, untimed envs, the servers
   unpinned and pinned; stepped lockstep and EnvPool's way, ``send``/``recv``
   with ``batch_size=8`` as ``throughput.py``) in the same rounds. Pinned
   three ways (lockstep): the server's threads (``RemoteServer(cpus=[i])``,
   what users get), the whole process (``sched_setaffinity`` before the
   server starts: the Python main thread too, as ``taskset``), and the
   domain threads only (``sched_setaffinity`` of each ``unienv-domain``
   thread once it exists: the runtime workers free to run anywhere).

Every configuration runs in a process of its own (this script with
``--worker`` / ``--serve``); the parent only coordinates, blocked on pipes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np  # noqa: E402
from throughput import process_cpu, send_recv, stop_process  # noqa: E402

URL = re.compile(r"(ws://127\.0\.0\.1:\d+)")

# -- timing a sub-env's step --------------------------------------------------------

#: This process's totals over every Timed env: steps, wall ns, thread CPU ns.
TOTALS = [0, 0, 0]


def clock_cost() -> Tuple[float, float]:
    """What reading the clocks adds to one timed region, in ns (median of
    many back-to-back readings): ``(wall, cpu)``."""
    walls, cpus = [], []
    for _ in range(2000):
        w0 = time.perf_counter_ns()
        c0 = time.thread_time_ns()
        c1 = time.thread_time_ns()
        w1 = time.perf_counter_ns()
        walls.append(w1 - w0)
        cpus.append(c1 - c0)
    return statistics.median(walls), statistics.median(cpus)


def timed_factory(sim: str) -> Callable[[], Any]:
    import gymnasium

    class Timed(gymnasium.Wrapper):
        """Accumulates the wall and thread CPU time of the wrapped env's ``step``."""

        def step(self, action: Any) -> Any:
            w0 = time.perf_counter_ns()
            c0 = time.thread_time_ns()
            result = self.env.step(action)
            c1 = time.thread_time_ns()
            w1 = time.perf_counter_ns()
            TOTALS[0] += 1
            TOTALS[1] += w1 - w0
            TOTALS[2] += c1 - c0
            return result

    return lambda: Timed(gymnasium.make(sim))


def plain_factory(sim: str) -> Callable[[], Any]:
    import gymnasium

    return lambda: gymnasium.make(sim)


def take_totals() -> Tuple[int, int, int]:
    out = (TOTALS[0], TOTALS[1], TOTALS[2])
    TOTALS[0] = TOTALS[1] = TOTALS[2] = 0
    return out


def thread_cpu() -> Dict[str, List[int]]:
    """This process's threads by kind: ``domain`` (our host's domain
    threads, which run the simulator's Python), ``runtime`` (the tokio
    workers, ``unienv-server``) and ``other:NAME``; for each kind the sum of
    its threads' user and system clock ticks, nanoseconds spent runnable but
    waiting for a CPU (``schedstat``), voluntary and involuntary context
    switches."""
    kinds: Dict[str, List[int]] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            comm = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            wait = int((task / "schedstat").read_text().split()[1])
            status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        kind = "domain" if comm.startswith("unienv-domain") else "runtime" if comm == "unienv-server" else \
            f"other:{comm}"
        row = kinds.setdefault(kind, [0, 0, 0, 0, 0])
        for i, v in enumerate((int(fields[11]), int(fields[12]), wait, int(status["voluntary_ctxt_switches"]),
                               int(status["nonvoluntary_ctxt_switches"]))):
            row[i] += v
    return kinds


def since(start: Dict[str, List[int]]) -> Dict[str, List[int]]:
    """:func:`thread_cpu` now less ``start``."""
    return {k: [a - b for a, b in zip(v, start.get(k, [0] * len(v)))] for k, v in thread_cpu().items()}


# -- the processes -------------------------------------------------------------------

#: Where a pinned server's threads run (see the module docs).
PLACEMENTS = ("server", "process", "domains")


def serve(sim: str, timed: bool, cpu: Optional[int], placement: str = "server") -> None:
    if cpu is not None and placement == "process":
        # Before any thread exists: every thread of the process inherits it.
        os.sched_setaffinity(0, {cpu})
    from unienv_remote import RemoteServer
    from unienv_remote.batched import BatchedEnv

    factory: Callable[[], Any] = timed_factory(sim) if timed else plain_factory(sim)
    server = RemoteServer(idle_timeout=None, cpus=[cpu] if cpu is not None and placement == "server" else None)
    server.register("batch", BatchedEnv([factory for _ in range(8)]))
    # The same again for a send/recv learner (one controller per resource).
    server.register("batch_recv", BatchedEnv([factory for _ in range(8)]))
    print(server.listen("127.0.0.1", 0), flush=True)
    if cpu is not None and placement == "domains":
        # The domain threads exist once the server listens.
        for task in Path("/proc/self/task").iterdir():
            if (task / "comm").read_text().startswith("unienv-domain"):
                os.sched_setaffinity(int(task.name), {cpu})
    wall_cost, cpu_cost = clock_cost()
    start_ticks = thread_cpu()
    try:
        for line in sys.stdin:  # blocks without the GIL
            if line.strip() == "mark":
                take_totals()
                start_ticks = thread_cpu()
                print("{}", flush=True)
            elif line.strip() == "stats":
                ticks = since(start_ticks)
                n, wall, cpu = take_totals()
                print(json.dumps({"steps": n, "wall_ns": wall - n * wall_cost, "cpu_ns": cpu - n * cpu_cost,
                                  "ticks": ticks, "hz": os.sysconf("SC_CLK_TCK")}), flush=True)
    finally:
        server.close()


ECHO = "import os\nwhile os.read(0, 1):\n    os.write(1, b'x')\n"
#: The same, writing over 2 MB (beyond a core's L2, as the learner's and
#: the other server's work between two requests) before each answer.
ECHO_POLLUTE = ("import os\nimport numpy as np\nb = np.zeros(2 << 20, np.uint8)\n"
                "while os.read(0, 1):\n    b += 1\n    os.write(1, b'x')\n")


class Echo:
    """A process that answers every byte written to it (asleep otherwise):
    a blocking round trip through it between two batch steps makes the
    stepping process sleep and be woken once per batch, as a server's domain
    thread is, without any of the server's work."""

    def __init__(self, pollute: bool = False) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", ECHO_POLLUTE if pollute else ECHO],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.w, self.r = self.process.stdin.fileno(), self.process.stdout.fileno()

    def round_trip(self) -> None:
        os.write(self.w, b"x")
        os.read(self.r, 1)


def lockstep(envs: Any, seconds: float, batched_reset: bool = False, echo: Optional[Echo] = None) -> Tuple[int, float]:
    """Steps ``envs`` for ``seconds`` with actions as ``throughput.py``'s;
    ``batched_reset``: a UniEnv batched env, its finished sub-envs reset by
    mask (it has no autoreset); ``echo``: a round trip through it after each
    step. Returns env steps and the window."""
    if batched_reset:
        n = envs.batch_size
        shape = envs.action_space.shape[1:]
    else:
        n = envs.num_envs
        shape = envs.single_action_space.shape
    actions = np.random.default_rng(0).uniform(-1, 1, size=(64, n) + shape).astype(np.float32)
    envs.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        result = envs.step(actions[steps % 64])
        if batched_reset:
            done = np.logical_or(result[2], result[3])
            if done.any():
                envs.reset(mask=done)
        if echo is not None:
            echo.round_trip()
        steps += 1
    return steps * n, time.perf_counter() - start


def worker(kind: str, sim: str, timed: bool, urls: Sequence[str]) -> None:
    """A configuration in its own process: ``go SECONDS`` on stdin runs it
    and prints a JSON line (env steps, window, own CPU, the Timed totals)."""
    from gymnasium.vector import SyncVectorEnv

    from unienv_remote.batched import BatchedEnv
    from unienv_remote.vector import RemoteVectorEnv

    factory: Callable[[], Any] = timed_factory(sim) if timed else plain_factory(sim)
    batched = kind.startswith("batched8")
    echo = Echo(kind == "batched8-pollute") if kind in ("batched8-echo", "batched8-pollute") else None
    if kind == "sync16":
        envs: Any = SyncVectorEnv([factory for _ in range(16)])
    elif kind == "sync8":
        envs = SyncVectorEnv([factory for _ in range(8)])
    elif batched:
        envs = BatchedEnv([factory for _ in range(8)])
    elif kind == "remote":
        envs = RemoteVectorEnv([(u, "batch") for u in urls])
    elif kind == "remote-recv":
        envs = RemoteVectorEnv([(u, "batch_recv") for u in urls], batch_size=8)
    else:
        raise SystemExit(f"unknown worker kind {kind}")
    wall_cost, cpu_cost = clock_cost()
    def run(seconds: float) -> Tuple[int, float]:
        if kind == "remote-recv":
            return send_recv(envs, seconds)
        return lockstep(envs, seconds, batched, echo)

    run(0.3)  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        seconds = float(line.split()[1])
        take_totals()
        t0, threads0 = os.times(), thread_cpu()
        steps, window = run(seconds)
        t1, threads = os.times(), since(threads0)
        n, wall, cpu = take_totals()
        print(json.dumps({"steps": steps, "window": window, "user": t1.user - t0.user, "sys": t1.system - t0.system,
                          "sub_steps": n, "wall_ns": wall - n * wall_cost, "cpu_ns": cpu - n * cpu_cost,
                          "wait_ns": sum(v[2] for v in threads.values()),
                          "switches": [sum(v[3] for v in threads.values()), sum(v[4] for v in threads.values())]}),
              flush=True)
    envs.close()
    if echo is not None:
        echo.process.communicate()


class Child:
    """This script as a child process speaking lines on its pipes."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen([sys.executable, __file__, *args], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def readline(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"child {self.process.args!r} ended (exit {self.process.wait()})")
        return line

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def cpu(self) -> Tuple[float, float]:
        return process_cpu(self.process.pid)

    def stop(self) -> None:
        stop_process(self.process)


def spinner() -> subprocess.Popen[bytes]:
    """A busy process: a Python spin loop (killed by its Popen, by pid)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


# -- the rounds ------------------------------------------------------------------------

def run_workers(workers: Sequence[Child], seconds: float) -> List[Dict[str, Any]]:
    for w in workers:
        w.send(f"go {seconds}")
    return [json.loads(w.readline()) for w in workers]


def hosted_row(servers: Sequence[Child], learner: Child, seconds: float) -> Dict[str, float]:
    """One round of a hosted configuration: the learner steps for
    ``seconds``; the servers' Timed totals, CPU and CPU by thread kind."""
    for s in servers:
        s.send("mark")
        s.readline()
    cpu0 = [s.cpu() for s in servers]
    (r,) = run_workers([learner], seconds)
    cpu1 = [s.cpu() for s in servers]
    for s in servers:
        s.send("stats")
    stats = [json.loads(s.readline()) for s in servers]
    n = r["steps"]
    sub = sum(s["steps"] for s in stats)
    user = sum(b[0] - a[0] for a, b in zip(cpu0, cpu1))
    system = sum(b[1] - a[1] for a, b in zip(cpu0, cpu1))
    row = {"rate": n / r["window"], "wall": sum(s["wall_ns"] for s in stats) / sub / 1e3,
           "cpu": sum(s["cpu_ns"] for s in stats) / sub / 1e3, "user": 1e6 * user / n,
           "sys": 1e6 * system / n, "learner": 1e6 * (r["user"] + r["sys"]) / n}
    hz = stats[0]["hz"]
    for kind in ("domain", "runtime"):
        row[kind] = 1e6 * sum(sum(t[:2]) for s in stats for k, t in s["ticks"].items() if k == kind) / hz / n
    row["other threads"] = 1e6 * sum(sum(t[:2]) for s in stats for k, t in s["ticks"].items()
                                     if k.startswith("other")) / hz / n
    # Each server gets one request per learner step (16 env steps).
    requests = n / 16 * len(servers)
    domain = [t for s in stats for k, t in s["ticks"].items() if k == "domain"]
    row["domain wait"] = sum(t[2] for t in domain) / 1e3 / requests
    row["domain voluntary"] = sum(t[3] for t in domain) / requests
    row["domain involuntary"] = sum(t[4] for t in domain) / requests
    row["learner wait"] = r["wait_ns"] / 1e3 / (n / 16)
    return row


HOSTED = "BatchedEnv(8) x 2 servers, RemoteVectorEnv lockstep"
PINNED = ", each server pinned to its own vCPU"
#: The labels of the pinned rows by placement.
PINNED_BY = {"server": PINNED + " (RemoteServer(cpus=[i]))", "process": PINNED + " (whole process, taskset's way)",
             "domains": PINNED + " (domain threads only)"}


def part1(sim: str, seconds: float, rounds: int) -> List[str]:
    """Per-sub-env step time and CPU beyond it, each setting (medians)."""
    workers = {kind: Child("--worker", kind, sim, "1")
               for kind in ("sync16", "batched8", "batched8-echo", "batched8-pollute")}
    hosts: Dict[str, Tuple[List[Child], Child]] = {}
    allowed = sorted(os.sched_getaffinity(0))
    pins = [str(allowed[i % len(allowed)]) for i in range(2)]
    for label, placement in (("", None), *((PINNED_BY[p], p) for p in PLACEMENTS)):
        servers = [Child("--serve", sim, "1", *([pin, placement] if placement else [])) for pin in pins]
        urls = [URL.search(s.readline()).group(1) for s in servers]  # type: ignore[union-attr]
        hosts[HOSTED + label] = (servers, Child("--worker", "remote", sim, "1", *urls))
    for c in (*workers.values(), *(learner for _, learner in hosts.values())):
        assert c.readline().strip() == "ready"
    rows: Dict[str, List[Dict[str, float]]] = {}

    def in_process(name: str, child: Child, busy: int) -> None:
        spinners = [spinner() for _ in range(busy)]
        try:
            time.sleep(0.2)
            (r,) = run_workers([child], seconds)
        finally:
            for s in spinners:
                s.kill()
                s.wait()
        n = r["steps"]
        rows.setdefault(name, []).append({
            "rate": n / r["window"], "wall": r["wall_ns"] / r["sub_steps"] / 1e3,
            "cpu": r["cpu_ns"] / r["sub_steps"] / 1e3, "user": 1e6 * r["user"] / n, "sys": 1e6 * r["sys"] / n})

    try:
        for _ in range(rounds):
            for busy, label in ((0, "alone"), (1, "+1 busy process"), (2, "+2 busy processes")):
                in_process(f"SyncVectorEnv(16) in process, {label}", workers["sync16"], busy)
                in_process(f"BatchedEnv(8) in process, {label}", workers["batched8"], busy)
            in_process("BatchedEnv(8) in process, alone, a pipe round trip to a sleeping process per batch step",
                       workers["batched8-echo"], 0)
            in_process("BatchedEnv(8) in process, alone, the same round trip, the other process writing 2 MB each time",
                       workers["batched8-pollute"], 0)
            for name, (servers, learner) in hosts.items():
                rows.setdefault(name, []).append(hosted_row(servers, learner, seconds))
    finally:
        for c in workers.values():
            c.stop()
        for servers, learner in hosts.values():
            for c in (learner, *servers):
                c.stop()

    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rows.items()}
    out = [f"### {sim}: a sub-env's own step, in each setting (µs per env step, medians)", "",
           "| setting | env-steps/s | sub-env step wall | sub-env step CPU | process user | process sys "
           "| user+sys beyond the sub-env steps' CPU |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for name, m in med.items():
        out.append(f"| {name} | {m['rate']:,.0f} | {m['wall']:.1f} | {m['cpu']:.1f} | {m['user']:.1f} | {m['sys']:.1f} "
                   f"| {m['user'] + m['sys'] - m['cpu']:.1f} |")
    out.append("")
    for name in hosts:
        m = med[name]
        out.append(f"{name}: by thread (CPU µs per env step, both servers): domain threads {m['domain']:.1f}, "
                   f"runtime workers {m['runtime']:.1f}, other threads {m['other threads']:.1f}; "
                   f"the learner process {m['learner']:.1f}. Per request, a domain thread waited "
                   f"{m['domain wait']:.1f} µs runnable for a CPU and switched {m['domain voluntary']:.2f} times "
                   f"voluntarily, {m['domain involuntary']:.2f} involuntarily; per learner step the learner "
                   f"waited {m['learner wait']:.1f} µs runnable.")
    out.append("")
    return out


def part2(sim: str, seconds: float, rounds: int) -> List[str]:
    """The ceiling: two in-process halves running at once, against
    SyncVectorEnv(16) and the remote configuration, same rounds."""
    sync16 = Child("--worker", "sync16", sim, "0")
    halves_sync = [Child("--worker", "sync8", sim, "0") for _ in range(2)]
    halves_batched = [Child("--worker", "batched8", sim, "0") for _ in range(2)]
    allowed = sorted(os.sched_getaffinity(0))
    pairs: Dict[str, List[Child]] = {"": [Child("--serve", sim, "0") for _ in range(2)]}
    for placement in PLACEMENTS:
        pairs[PINNED_BY[placement]] = [Child("--serve", sim, "0", str(allowed[i % len(allowed)]), placement)
                                       for i in range(2)]
    servers = [s for pair in pairs.values() for s in pair]
    urls = {label: [URL.search(s.readline()).group(1) for s in pair]  # type: ignore[union-attr]
            for label, pair in pairs.items()}
    learners = {f"remote: {HOSTED.replace(' lockstep', ', ' + mode)}{label}": Child("--worker", kind, sim, "0", *at)
                for kind, mode in (("remote", "lockstep"), ("remote-recv", "send/recv M=8"))
                for label, at in urls.items() if kind == "remote" or label in ("", PINNED_BY["server"])}
    every = [sync16, *halves_sync, *halves_batched, *learners.values()]
    for c in every:
        assert c.readline().strip() == "ready"
    rates: Dict[str, List[float]] = {}
    try:
        for _ in range(rounds):
            for name, group in (("SyncVectorEnv(16), one process", [sync16]),
                                ("2 processes x SyncVectorEnv(8), concurrently", halves_sync),
                                ("2 processes x BatchedEnv(8), concurrently", halves_batched),
                                *((name, [learner]) for name, learner in learners.items())):
                results = run_workers(group, seconds)
                rates.setdefault(name, []).append(sum(r["steps"] / r["window"] for r in results))
    finally:
        for c in (*every, *servers):
            c.stop()
    base = rates["SyncVectorEnv(16), one process"]
    out = [f"### {sim}: the ceiling (env-steps/s; ratio to SyncVectorEnv(16) of the same round)", "",
           "| configuration | env-steps/s (median) | vs SyncVectorEnv(16), median of rounds | rounds' ratios |",
           "|---|---:|---:|---|"]
    for name, rs in rates.items():
        ratios = [r / b for r, b in zip(rs, base)]
        out.append(f"| {name} | {statistics.median(rs):,.0f} | {statistics.median(ratios):.2f}x "
                   f"| {', '.join(f'{x:.2f}' for x in ratios)} |")
    out.append("")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", metavar="SIM", help=argparse.SUPPRESS)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--sims", default="Pendulum-v1,HalfCheetah-v5")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", default="1,2", help="which parts to run (1: per-step timing, 2: ceiling)")
    args, rest = parser.parse_known_args()
    if args.serve is not None:
        serve(args.serve, rest[:1] == ["1"], int(rest[1]) if len(rest) > 1 else None,
              rest[2] if len(rest) > 2 else "server")
        return
    if args.worker is not None:
        kind, sim, timed, *urls = args.worker + rest
        worker(kind, sim, timed == "1", urls)
        return
    load_before = os.getloadavg()
    started = time.strftime("%H:%M:%S", time.gmtime())
    lines: List[str] = []
    for sim in args.sims.split(","):
        if "1" in args.parts:
            lines += part1(sim, args.seconds, args.rounds)
        if "2" in args.parts:
            lines += part2(sim, args.seconds, args.rounds)
        print(f"{sim} done", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print(f"{started}-{time.strftime('%H:%M:%S', time.gmtime())} UTC; load average before: "
          f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; after: {load_after[0]:.2f} "
          f"{load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} cores; medians of {args.rounds} interleaved "
          f"rounds of {args.seconds} s")
    print()
    print("\n".join(lines))


if __name__ == "__main__":
    main()
